/* Inverse of the centred STFT; window, twiddles, checks in stft_window_f32.c. */
/* x [n_batch, n_frames, 2K] -> out [n_batch, (n_frames-1)*hop]: inverse of the centred STFT
 * (one-sided inverse DFT with 1/n_fft, ignoring the imaginary part of the DC and Nyquist bins,
 * windowed overlap-add divided by the overlap-added squared window, n_fft/2 trimmed per side).
 * mode 0: row = [magnitude | phase]; mode 1: row = [log-magnitude | u], magnitude = exp(.),
 * phase = sin(u) (the iSTFTNet head). Bin values are formed in f32 as torch does
 * (m*cos(p), m*sin(p)); the inverse DFT and the overlap-add accumulate in f64 per output
 * sample, frames in order. */
#define KCC_ISTFT_CHUNK 2048
static int kcc_istft_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t n_frames, int64_t n_fft,
                         int64_t hop, int64_t mode, float *KCC_RESTRICT out)
{
    if (kcc_stft_check(n_fft, hop) != KCC_OK || n_batch < 1 || n_frames < 2) return KCC_EBADINPUT;
    if (mode != 0 && mode != 1) return KCC_EBADINPUT;
    float win[KCC_STFT_MAX_FFT];
    double cs[KCC_STFT_MAX_FFT], sn[KCC_STFT_MAX_FFT];
    (void)kcc_hann_window_f32(n_fft, win);
    kcc_stft_twiddles(n_fft, cs, sn);
    const int64_t half = n_fft / 2, n_bin = half + 1, n_out = (n_frames - 1) * hop;
    /* Squared-window overlap at each kept position (periodic in hop away from the ends);
     * checked before anything is written, as torch refuses a near-zero envelope. */
    for (int64_t u = half; u < half + n_out; ++u) {
        float e = 0.0f;
        const int64_t f_hi = u / hop < n_frames - 1 ? u / hop : n_frames - 1;
        for (int64_t f = u >= n_fft ? (u - n_fft) / hop + 1 : 0; f <= f_hi; ++f) {
            const int64_t i = u - f * hop;
            e += win[i] * win[i];
        }
        if (!(fabsf(e) >= 1e-11f)) return KCC_EBADINPUT;
    }
    /* Output samples in chunks (in parallel): a chunk sums, in frame order, the frames that
     * overlap it (frames on a chunk edge are transformed by both chunks), so each sample gets
     * the same additions in the same order for any chunking: identical for any thread count. */
    const int64_t n_chunks = (n_out + KCC_ISTFT_CHUNK - 1) / KCC_ISTFT_CHUNK;
    for (int64_t b = 0; b < n_batch; ++b) {
        float *ob = out + b * n_out;
        KCC_PARALLEL_FOR
        for (int64_t c = 0; c < n_chunks; ++c) {
            double acc[KCC_ISTFT_CHUNK], env[KCC_ISTFT_CHUNK], re[KCC_STFT_MAX_FFT / 2 + 1], im[KCC_STFT_MAX_FFT / 2 + 1];
            const int64_t t0 = c * KCC_ISTFT_CHUNK, t1 = n_out - t0 < KCC_ISTFT_CHUNK ? n_out : t0 + KCC_ISTFT_CHUNK;
            for (int64_t t = 0; t < t1 - t0; ++t) acc[t] = env[t] = 0.0;
            /* frame f covers full-signal positions [f*hop, f*hop + n_fft), i.e. t = u - half */
            const int64_t f_lo = t0 + half >= n_fft ? (t0 + half - n_fft) / hop + 1 : 0;
            const int64_t f_hi = (t1 - 1 + half) / hop < n_frames - 1 ? (t1 - 1 + half) / hop : n_frames - 1;
            for (int64_t f = f_lo; f <= f_hi; ++f) {
                const float *row = x + (b * n_frames + f) * 2 * n_bin;
                for (int64_t k = 0; k < n_bin; ++k) {
                    const float m = mode == 1 ? expf(row[k]) : row[k];
                    const float p = mode == 1 ? sinf(row[n_bin + k]) : row[n_bin + k];
                    re[k] = (double)(m * cosf(p));
                    im[k] = (double)(m * sinf(p));
                }
                for (int64_t i = 0; i < n_fft; ++i) {
                    const int64_t t = f * hop + i - half;
                    if (t < t0 || t >= t1) continue;
                    double s = re[0] + ((i & 1) ? -re[half] : re[half]);
                    for (int64_t k = 1; k < half; ++k) {
                        const int64_t m = (k * i) % n_fft;
                        s += 2.0 * (re[k] * cs[m] - im[k] * sn[m]);
                    }
                    acc[t - t0] += s / (double)n_fft * (double)win[i];
                    env[t - t0] += (double)(win[i] * win[i]);
                }
            }
            for (int64_t t = t0; t < t1; ++t) ob[t] = (float)(acc[t - t0] / env[t - t0]);
        }
    }
    return KCC_OK;
}
