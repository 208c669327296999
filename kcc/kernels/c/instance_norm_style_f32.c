/* Style-conditioned instance norm over time-major x [n_batch, n_time, n_chan]:
 *   h = fc_w @ style[b] + fc_b  (fc_w [2*n_chan, n_style]; gamma = h[:n_chan], beta = h[n_chan:])
 *   xn = (x - mean_t) / sqrt(var_t + eps) * norm_w + norm_b    (biased variance over time, per b, c)
 *   y = (1 + gamma) * xn + beta                                 (f32, torch's operation order)
 * then act: 0 none, 1 leaky (y >= 0 ? y : slope*y), 2 snake (y + sin(alpha*y)^2 / alpha, alpha [n_chan]).
 * Statistics are two-pass f64 (channels in tiles of KCC_IN_NC, contiguous within a row); the fc
 * dot products are f64, rounded once. alpha is not read unless act = 2. The statistics and the
 * per-element step are helpers shared with the fused norm_conv1d kernel (identical results).
 * Snake's sin^2 is a branch-free f64 polynomial (kcc_sin2_f64) so the row loop vectorises;
 * arguments past KCC_SIN2_MAX fall back to libm sin. */
#define KCC_IN_NC 16
#define KCC_SIN2_MAX 1.0e5

/* sin(z)^2 for |z| <= KCC_SIN2_MAX, ~2 ulp (f64): z = n*pi/2 + r, |r| <= pi/4 (Cody-Waite, fdlibm's
 * three-part pi/2, n*P1 exact for |n| < 2^20), fdlibm's sin/cos kernels on r; sin^2 z is
 * sin^2 r for even n and cos^2 r for odd n, picked arithmetically (no branch). */
static inline double kcc_sin2_f64(double z)
{
    const double magic = 6755399441055744.0;                      /* 1.5 * 2^52: round to integer */
    const double n = (z * 6.36619772367581382433e-01 + magic) - magic;
    const double r = ((z - n * 1.57079632673412561417e+00) - n * 6.07710050630396597660e-11)
                     - n * 2.02226624879595063154e-21;
    const double h = n * 0.5, odd = 2.0 * fabs(h - ((h + magic) - magic));   /* 1 for odd n, else 0 */
    const double r2 = r * r;
    const double s = r + r * r2 * (-1.66666666666666324348e-01 + r2 * (8.33333333332248946124e-03
                     + r2 * (-1.98412698298579493134e-04 + r2 * (2.75573137070700676789e-06
                     + r2 * (-2.50507602534068634195e-08 + r2 * 1.58969099521155010221e-10)))));
    const double c = 1.0 - 0.5 * r2 + r2 * r2 * (4.16666666666666019037e-02 + r2 * (-1.38888888888741095749e-03
                     + r2 * (2.48015872894767294178e-05 + r2 * (-2.75573143513906633035e-07
                     + r2 * (2.08757232129817482790e-09 + r2 * -1.13596475577881948265e-11)))));
    const double s2 = s * s;
    return s2 + odd * (c * c - s2);
}

/* Channels [c0, c0 + nc) of one batch: mean and inverse std (f64), gain 1 + gamma and shift beta. */
static void kcc_in_style_stats(const float *KCC_RESTRICT xb, const float *KCC_RESTRICT sb, int64_t n_time,
                               int64_t n_chan, int64_t n_style, const float *KCC_RESTRICT fc_w,
                               const float *KCC_RESTRICT fc_b, float eps, int64_t c0, int64_t nc,
                               double *KCC_RESTRICT mean, double *KCC_RESTRICT inv,
                               float *KCC_RESTRICT gain, float *KCC_RESTRICT shift)
{
    double var[KCC_IN_NC] = {0};
    for (int64_t j = 0; j < nc; ++j) mean[j] = 0.0;
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
        inv[j] = 1.0 / sqrt(var[j] / (double)n_time + (double)eps);
    }
}

static float kcc_in_style_y(float x, double mean, double inv, float nw, float nb, float gain, float shift)
{
    const float xn = (float)(((double)x - mean) * inv * (double)nw + (double)nb);
    return gain * xn + shift;
}

/* One row of channels [0, n): yr = act((1 + gamma) * xn + beta); per-channel arrays indexed 0..n.
 * Full blocks of KCC_IN_NC channels have a constant trip count: they vectorise at -O2. */
KCC_VECTOR_CLONES
static void kcc_in_style_row(const float *KCC_RESTRICT xr, int64_t n, const double *KCC_RESTRICT mean,
                             const double *KCC_RESTRICT inv, const float *KCC_RESTRICT norm_w,
                             const float *KCC_RESTRICT norm_b, const float *KCC_RESTRICT gain,
                             const float *KCC_RESTRICT shift, const float *KCC_RESTRICT alpha, int64_t act,
                             float slope, float *KCC_RESTRICT yr)
{
    const int64_t full = n / KCC_IN_NC * KCC_IN_NC;
    for (int64_t j0 = 0; j0 < full; j0 += KCC_IN_NC)
        for (int j = 0; j < KCC_IN_NC; ++j)
            yr[j0 + j] = kcc_in_style_y(xr[j0 + j], mean[j0 + j], inv[j0 + j], norm_w[j0 + j], norm_b[j0 + j],
                                        gain[j0 + j], shift[j0 + j]);
    for (int64_t j = full; j < n; ++j)
        yr[j] = kcc_in_style_y(xr[j], mean[j], inv[j], norm_w[j], norm_b[j], gain[j], shift[j]);
    if (act == 1) {
        for (int64_t j = 0; j < n; ++j) yr[j] = yr[j] >= 0.0f ? yr[j] : yr[j] * slope;
    } else if (act == 2) {
        int big = 0;
        for (int64_t j0 = 0; j0 < full; j0 += KCC_IN_NC)
            for (int j = 0; j < KCC_IN_NC; ++j) {
                const double y = (double)yr[j0 + j], a = (double)alpha[j0 + j];
                big |= fabs(a * y) > KCC_SIN2_MAX;
                yr[j0 + j] = (float)(y + kcc_sin2_f64(a * y) / a);
            }
        for (int64_t j = full; j < n; ++j) {
            const double y = (double)yr[j], a = (double)alpha[j];
            big |= fabs(a * y) > KCC_SIN2_MAX;
            yr[j] = (float)(y + kcc_sin2_f64(a * y) / a);
        }
        for (int64_t j = 0; big && j < n; ++j) {         /* rare: huge arguments, redo with libm */
            const double y = (double)kcc_in_style_y(xr[j], mean[j], inv[j], norm_w[j], norm_b[j], gain[j], shift[j]);
            const double a = (double)alpha[j];
            if (fabs(a * y) > KCC_SIN2_MAX) {
                const double sn = sin(a * y);
                yr[j] = (float)(y + sn * sn / a);
            }
        }
    }
}

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
            double mean[KCC_IN_NC], inv[KCC_IN_NC];
            float gain[KCC_IN_NC], shift[KCC_IN_NC];
            kcc_in_style_stats(xb, sb, n_time, n_chan, n_style, fc_w, fc_b, eps, c0, nc, mean, inv, gain, shift);
            for (int64_t t = 0; t < n_time; ++t)
                kcc_in_style_row(xb + t * n_chan + c0, nc, mean, inv, norm_w + c0, norm_b + c0, gain, shift,
                                 alpha + (act == 2 ? c0 : 0), act, slope, ob + t * n_chan + c0);
        }
    }
    return KCC_OK;
}
