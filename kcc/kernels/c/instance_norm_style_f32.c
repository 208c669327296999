/* Style-conditioned instance norm over time-major x [n_batch, n_time, n_chan]:
 *   h = fc_w @ style[b] + fc_b  (fc_w [2*n_chan, n_style]; gamma = h[:n_chan], beta = h[n_chan:])
 *   xn = (x - mean_t) / sqrt(var_t + eps) * norm_w + norm_b    (biased variance over time, per b, c)
 *   y = (1 + gamma) * xn + beta                                 (f32, torch's operation order)
 * then act: 0 none, 1 leaky (y >= 0 ? y : slope*y), 2 snake (y + sin(alpha*y)^2 / alpha, alpha [n_chan]).
 * Statistics are two-pass f64 (channels in tiles of KCC_IN_NC, contiguous within a row); the fc
 * dot products are f64, rounded once. alpha is not read unless act = 2. */
#define KCC_IN_NC 16

static int kcc_instance_norm_style_f32(
    const float *KCC_RESTRICT x, const float *KCC_RESTRICT style, int64_t n_batch, int64_t n_time,
    int64_t n_chan, int64_t n_style, const float *KCC_RESTRICT norm_w, const float *KCC_RESTRICT norm_b,
    const float *KCC_RESTRICT fc_w, const float *KCC_RESTRICT fc_b, const float *KCC_RESTRICT alpha,
    int64_t act, float slope, float eps, float *KCC_RESTRICT out)
{
    if (n_batch < 1 || n_time < 1 || n_chan < 1 || n_style < 1) return KCC_EDIMS;
    if (act < 0 || act > 2 || !(eps > 0.0f)) return KCC_EBADINPUT;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * n_time * n_chan;
        const float *sb = style + b * n_style;
        float *ob = out + b * n_time * n_chan;
        KCC_PARALLEL_FOR   /* channel tiles are independent */
        for (int64_t c0 = 0; c0 < n_chan; c0 += KCC_IN_NC) {
            const int64_t nc = n_chan - c0 < KCC_IN_NC ? n_chan - c0 : KCC_IN_NC;
            double mean[KCC_IN_NC] = {0}, var[KCC_IN_NC] = {0};
            float gain[KCC_IN_NC], shift[KCC_IN_NC];
            for (int64_t t = 0; t < n_time; ++t)
                for (int64_t j = 0; j < nc; ++j) mean[j] += (double)xb[t * n_chan + c0 + j];
            for (int64_t j = 0; j < nc; ++j) mean[j] /= (double)n_time;
            for (int64_t t = 0; t < n_time; ++t)
                for (int64_t j = 0; j < nc; ++j) {
                    const double d = (double)xb[t * n_chan + c0 + j] - mean[j];
                    var[j] += d * d;
                }
            for (int64_t j = 0; j < nc; ++j) {
                const int64_t c = c0 + j;
                double g = (double)fc_b[c], s = (double)fc_b[n_chan + c];
                for (int64_t k = 0; k < n_style; ++k) {
                    g += (double)fc_w[c * n_style + k] * (double)sb[k];
                    s += (double)fc_w[(n_chan + c) * n_style + k] * (double)sb[k];
                }
                gain[j] = 1.0f + (float)g;
                shift[j] = (float)s;
                var[j] = 1.0 / sqrt(var[j] / (double)n_time + (double)eps);   /* now the inverse std */
            }
            for (int64_t t = 0; t < n_time; ++t) {
                const float *xr = xb + t * n_chan + c0;
                float *yr = ob + t * n_chan + c0;
                for (int64_t j = 0; j < nc; ++j) {
                    const int64_t c = c0 + j;
                    const float xn = (float)(((double)xr[j] - mean[j]) * var[j] * (double)norm_w[c] + (double)norm_b[c]);
                    const float y = gain[j] * xn + shift[j];
                    if (act == 1) {
                        yr[j] = y >= 0.0f ? y : y * slope;
                    } else if (act == 2) {
                        const double a = (double)alpha[c], sn = sin(a * (double)y);
                        yr[j] = (float)((double)y + sn * sn / a);
                    } else {
                        yr[j] = y;
                    }
                }
            }
        }
    }
    return KCC_OK;
}
