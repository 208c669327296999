/* Alignment expansion: out[b,f,:] = x[b,t,:] for the token t whose cumulative-duration interval
 * [sum(dur[b,0:t]), sum(dur[b,0:t+1])) contains frame f. This is the one-hot alignment matmul
 * (x^T @ aln) without materialising the [T, F] matrix; exact copies. Checks before the first
 * write: every duration >= 0 and each sequence's durations sum to exactly n_frames. */
static int kcc_expand_by_durations_f32(const float *KCC_RESTRICT x, const int32_t *KCC_RESTRICT dur,
                                       int64_t n_seq, int64_t n_tok, int64_t n_chan, int64_t n_frames,
                                       float *KCC_RESTRICT out)
{
    if (n_seq < 1 || n_tok < 1 || n_chan < 1 || n_frames < 1) return KCC_EDIMS;
    for (int64_t b = 0; b < n_seq; ++b) {
        int64_t total = 0;
        for (int64_t t = 0; t < n_tok; ++t) {
            if (dur[b * n_tok + t] < 0) return KCC_EBADINPUT;
            total += dur[b * n_tok + t];
        }
        if (total != n_frames) return KCC_EBADINPUT;
    }
    for (int64_t b = 0; b < n_seq; ++b) {
        float *y = out + b * n_frames * n_chan;
        for (int64_t t = 0; t < n_tok; ++t) {
            const float *xr = x + (b * n_tok + t) * n_chan;
            for (int32_t r = 0; r < dur[b * n_tok + t]; ++r, y += n_chan)
                for (int64_t c = 0; c < n_chan; ++c) y[c] = xr[c];
        }
    }
    return KCC_OK;
}
