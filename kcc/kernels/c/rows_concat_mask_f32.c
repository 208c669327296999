/* out[b,t,:] = concat(x[b,t,0:n_chan], tail[b,0:n_tail]) for t < lengths[b], and 0 for the
 * padded rows t >= lengths[b]. With n_tail = 0 it is a pure length mask (tail is not read).
 * Every length must lie in [1, n_tok] and every tail value must be finite; both are checked
 * before the first write. Pure copies: exact. */
static int kcc_rows_concat_mask_f32(const float *KCC_RESTRICT x, int64_t n_chan,
                                    const float *KCC_RESTRICT tail, int64_t n_tail,
                                    const int32_t *KCC_RESTRICT lengths, int64_t n_seq, int64_t n_tok,
                                    float *KCC_RESTRICT out)
{
    if (n_seq < 1 || n_tok < 1 || n_chan < 1 || n_tail < 0) return KCC_EDIMS;
    for (int64_t b = 0; b < n_seq; ++b)
        if (lengths[b] < 1 || lengths[b] > n_tok) return KCC_EBADINPUT;
    for (int64_t i = 0; i < n_seq * n_tail; ++i)
        if (!isfinite(tail[i])) return KCC_EBADINPUT;
    const int64_t width = n_chan + n_tail;
    for (int64_t b = 0; b < n_seq; ++b) {
        for (int64_t t = 0; t < n_tok; ++t) {
            float *y = out + (b * n_tok + t) * width;
            if (t >= lengths[b]) {
                for (int64_t c = 0; c < width; ++c) y[c] = 0.0f;
                continue;
            }
            const float *xr = x + (b * n_tok + t) * n_chan;
            for (int64_t c = 0; c < n_chan; ++c) y[c] = xr[c];
            for (int64_t c = 0; c < n_tail; ++c) y[n_chan + c] = tail[b * n_tail + c];
        }
    }
    return KCC_OK;
}
