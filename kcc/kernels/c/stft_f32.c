/* Centred STFT -> [magnitude | phase] rows; window, twiddles, checks in stft_window_f32.c. */
/* x [n_batch, n_len] -> out [n_batch, n_len/hop + 1, 2K]: |X| then angle(X) (atan2, in
 * (-pi, pi]; the DC and Nyquist bins have an exactly zero imaginary part, so a negative real
 * value there gives +pi, as torch's real FFT does). Requires n_fft/2 < n_len (reflect pad). */
static int kcc_stft_polar_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t n_len, int64_t n_fft,
                              int64_t hop, float *KCC_RESTRICT out)
{
    if (kcc_stft_check(n_fft, hop) != KCC_OK || n_batch < 1 || n_len <= n_fft / 2) return KCC_EBADINPUT;
    float win[KCC_STFT_MAX_FFT];
    double cs[KCC_STFT_MAX_FFT], sn[KCC_STFT_MAX_FFT];
    (void)kcc_hann_window_f32(n_fft, win);
    kcc_stft_twiddles(n_fft, cs, sn);
    const int64_t half = n_fft / 2, n_bin = half + 1, n_frames = n_len / hop + 1;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * n_len;
        KCC_PARALLEL_FOR   /* frames are independent */
        for (int64_t f = 0; f < n_frames; ++f) {
            float xw[KCC_STFT_MAX_FFT];
            for (int64_t i = 0; i < n_fft; ++i) {
                int64_t m = f * hop - half + i;
                if (m < 0) m = -m;
                if (m >= n_len) m = 2 * (n_len - 1) - m;
                xw[i] = xb[m] * win[i];
            }
            float *row = out + (b * n_frames + f) * 2 * n_bin;
            for (int64_t k = 0; k < n_bin; ++k) {
                double re = 0.0, im = 0.0;
                for (int64_t i = 0; i < n_fft; ++i) {
                    const int64_t m = (k * i) % n_fft;
                    re += (double)xw[i] * cs[m];
                    im -= (double)xw[i] * sn[m];
                }
                if (k == 0 || k == half) im = 0.0;
                row[k] = (float)sqrt(re * re + im * im);
                row[n_bin + k] = (float)atan2(im, re);
            }
        }
    }
    return KCC_OK;
}

