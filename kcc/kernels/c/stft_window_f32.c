/* Shared by the STFT and iSTFT kernels (stft_f32.c, istft_f32.c): the window, the twiddles
 * and the argument checks. Both work with a periodic Hann window of n_fft taps,
 * hop `hop`, centred frames (n_fft/2 of reflect padding on each side), one-sided spectrum of
 * K = n_fft/2 + 1 bins. Time-major: frames are rows, a row is [K magnitudes | K phases].
 * Transforms are direct DFTs in f64 (n_fft is small; exact twiddles from a k*n mod n_fft table),
 * so the only f32 roundings are the ones torch also makes (windowed samples, outputs). */
#define KCC_STFT_MAX_FFT 64

/* torch.hann_window(n, periodic=True) in f32: cos(i * (f32)(2*pi/n)) * -0.5 + 0.5. */
static int kcc_hann_window_f32(int64_t n_fft, float *KCC_RESTRICT win)
{
    if (n_fft < 1) return KCC_EBADINPUT;
    const float step = (float)(2.0 * 3.14159265358979323846 / (double)n_fft);
    for (int64_t i = 0; i < n_fft; ++i) win[i] = cosf((float)i * step) * -0.5f + 0.5f;
    return KCC_OK;
}

/* cs[m] = cos(2*pi*m/n), sn[m] = sin(2*pi*m/n) in f64. */
static void kcc_stft_twiddles(int64_t n_fft, double *KCC_RESTRICT cs, double *KCC_RESTRICT sn)
{
    for (int64_t m = 0; m < n_fft; ++m) {
        const double a = 2.0 * 3.14159265358979323846 * (double)m / (double)n_fft;
        cs[m] = cos(a);
        sn[m] = sin(a);
    }
}

static int kcc_stft_check(int64_t n_fft, int64_t hop)
{
    if (n_fft < 2 || n_fft > KCC_STFT_MAX_FFT || n_fft % 2 != 0 || hop < 1 || hop > n_fft) return KCC_EBADINPUT;
    return KCC_OK;
}

