/* y[r, :] = LayerNorm(x[r, :] (+ res[r, :] when has_res)) * gamma + beta over n_chan channels.
 * The sum x + res is rounded to f32 first (as torch adds before its LayerNorm); mean and
 * variance (two-pass, about the mean) accumulate in double; normalise and affine in f32.
 * With has_res = 0 the `res` pointer is never read (bind passes x there). */
static int kcc_layer_norm_f32(const float *KCC_RESTRICT x, const float *KCC_RESTRICT res, int64_t has_res,
                              int64_t rows, int64_t n_chan, const float *KCC_RESTRICT gamma,
                              const float *KCC_RESTRICT beta, float eps, float *KCC_RESTRICT out)
{
    if (rows < 0 || n_chan < 1) return KCC_EDIMS;
    if (has_res != 0 && has_res != 1) return KCC_EBADINPUT;
    KCC_PARALLEL_FOR   /* rows are independent */
    for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * n_chan;
        float *y = out + r * n_chan;
        if (has_res) {
            const float *rr = res + r * n_chan;
            for (int64_t c = 0; c < n_chan; ++c) y[c] = xr[c] + rr[c];
        } else {
            for (int64_t c = 0; c < n_chan; ++c) y[c] = xr[c];
        }
        double mean, inv;
        kcc_mean_rstd_f64(y, n_chan, eps, &mean, &inv);
        for (int64_t c = 0; c < n_chan; ++c) y[c] = (float)(((double)y[c] - mean) * inv) * gamma[c] + beta[c];
    }
    return KCC_OK;
}
