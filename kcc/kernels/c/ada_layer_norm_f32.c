/* Style-conditioned LayerNorm over channels, without a learned affine:
 *   out[b,t,:] = (1 + gamma_b) * LN(x[b,t,:]) + beta_b,  [gamma_b | beta_b] = mod[b, 0:2C]
 * mod is the style projection computed beforehand (a linear op). Mean and variance are two-pass
 * in double; the normalised value is rounded to f32 once, then 1 + gamma, the product and the
 * sum each round to f32 as torch's elementwise ops do. */
static int kcc_ada_layer_norm_f32(const float *KCC_RESTRICT x, const float *KCC_RESTRICT mod,
                                  int64_t n_seq, int64_t n_tok, int64_t n_chan, float eps,
                                  float *KCC_RESTRICT out)
{
    if (n_seq < 1 || n_tok < 1 || n_chan < 1) return KCC_EDIMS;
    if (!(eps > 0.0f)) return KCC_EBADINPUT;
    for (int64_t b = 0; b < n_seq; ++b) {
        const float *gamma = mod + b * 2 * n_chan;
        const float *beta = gamma + n_chan;
        for (int64_t t = 0; t < n_tok; ++t) {
            const float *xr = x + (b * n_tok + t) * n_chan;
            float *y = out + (b * n_tok + t) * n_chan;
            double mean, inv;
            kcc_mean_rstd_f64(xr, n_chan, eps, &mean, &inv);
            for (int64_t c = 0; c < n_chan; ++c) {
                const float xn = (float)(((double)xr[c] - mean) * inv);
                const float scale = 1.0f + gamma[c];
                const float prod = scale * xn;
                y[c] = prod + beta[c];
            }
        }
    }
    return KCC_OK;
}
