/* Conv1d / ConvTranspose1d in general: grouped (groups < channels), and the transposed convs
 * with a dilation; x [n_batch, t_in, c_in] -> out [n_batch, t_out, c_out]. Every output row t
 * is a sum over taps of (packed weight slice k) x (one input row), the input row
 * kcc_conv_tap_row(t, k, ...) (conv_geometry.c).
 *   layout: wp[g][p][k][ci][j], column panels p of KCC_CONV_NR (zeros past cog)
 *           = W[g*cog + p*NR + j][ci][k] (direct) or W[g*cig + ci][p*NR + j][k] (transposed)
 * It sweeps time in tiles of KCC_CONV_MR rows per column panel; full taps run a register
 * micro-kernel with f32 partial sums over <= KCC_CONV_KC input channels, each flushed into f64,
 * edge taps run in f64; rounded once after the f64 bias add, then the leaky slope and + res in
 * f32. Identical for any thread count. */
#define KCC_CONV_MR 4
#define KCC_CONV_NR 8
#define KCC_CONV_KC 32
_Static_assert(KCC_CONV_MR == 4, "kcc_conv_tile_f32 is written out for 4 rows");

/* dacc[r][j] += sum_{ci < n} xr[r][ci] * w[ci*NR + j]: f32 register tile, one f64 flush. */
static void kcc_conv_tile_f32(const float *const *KCC_RESTRICT xr, const float *KCC_RESTRICT w, int64_t n,
                              double (*KCC_RESTRICT dacc)[KCC_CONV_NR])
{
    float acc[KCC_CONV_MR][KCC_CONV_NR];
    const float *x0 = xr[0], *x1 = xr[1], *x2 = xr[2], *x3 = xr[3];
    for (int r = 0; r < KCC_CONV_MR; ++r)
        for (int j = 0; j < KCC_CONV_NR; ++j) acc[r][j] = 0.0f;
    for (int64_t ci = 0; ci < n; ++ci) {
        const float *wr = w + ci * KCC_CONV_NR;
        const float v0 = x0[ci], v1 = x1[ci], v2 = x2[ci], v3 = x3[ci];
        for (int j = 0; j < KCC_CONV_NR; ++j) {
            acc[0][j] += v0 * wr[j];
            acc[1][j] += v1 * wr[j];
            acc[2][j] += v2 * wr[j];
            acc[3][j] += v3 * wr[j];
        }
    }
    for (int r = 0; r < KCC_CONV_MR; ++r)
        for (int j = 0; j < KCC_CONV_NR; ++j) dacc[r][j] += (double)acc[r][j];
}

static int kcc_conv1d_grouped_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                                  const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t has_bias,
                                  int64_t c_out, int64_t k_size, int64_t stride, int64_t pad, int64_t dilation,
                                  int64_t output_padding, int64_t groups, int64_t transposed, float neg_slope,
                                  const float *KCC_RESTRICT res, int64_t has_res, float *KCC_RESTRICT out)
{
    const int64_t t_out = kcc_conv_out_rows(n_batch, t_in, c_in, c_out, k_size, stride, pad, dilation,
                                            output_padding, groups, transposed);
    if (t_out < 0) return KCC_EDIMS;
    const int64_t cig = c_in / groups, cog = c_out / groups;
    const int64_t panels = (cog + KCC_CONV_NR - 1) / KCC_CONV_NR;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * t_in * c_in, *rb = has_res ? res + b * t_out * c_out : res;
        float *ob = out + b * t_out * c_out;
        KCC_PARALLEL_FOR_COLLAPSE2   /* each (group, panel) writes its own output columns */
        for (int64_t g = 0; g < groups; ++g) {
            for (int64_t p = 0; p < panels; ++p) {
                const float *wpan = wp + (g * panels + p) * k_size * cig * KCC_CONV_NR;
                const int64_t j0 = p * KCC_CONV_NR, c0 = g * cog + j0;
                const int64_t nc = cog - j0 < KCC_CONV_NR ? cog - j0 : KCC_CONV_NR;
                for (int64_t t0 = 0; t0 < t_out; t0 += KCC_CONV_MR) {
                    const int64_t nt = t_out - t0 < KCC_CONV_MR ? t_out - t0 : KCC_CONV_MR;
                    double acc[KCC_CONV_MR][KCC_CONV_NR];
                    for (int r = 0; r < KCC_CONV_MR; ++r)
                        for (int j = 0; j < KCC_CONV_NR; ++j) acc[r][j] = 0.0;
                    for (int64_t k = 0; k < k_size; ++k) {
                        const float *xr[KCC_CONV_MR] = {NULL, NULL, NULL, NULL};
                        int valid = 0;
                        for (int r = 0; r < nt; ++r) {
                            const int64_t ti = kcc_conv_tap_row(t0 + r, k, t_in, stride, pad, dilation, transposed);
                            if (ti >= 0) {
                                xr[r] = xb + ti * c_in + g * cig;
                                ++valid;
                            }
                        }
                        const float *wk = wpan + k * cig * KCC_CONV_NR;
                        if (valid == KCC_CONV_MR) {
                            for (int64_t ci0 = 0; ci0 < cig; ci0 += KCC_CONV_KC) {
                                const float *xs[KCC_CONV_MR];
                                for (int r = 0; r < KCC_CONV_MR; ++r) xs[r] = xr[r] + ci0;
                                kcc_conv_tile_f32(xs, wk + ci0 * KCC_CONV_NR,
                                                  cig - ci0 < KCC_CONV_KC ? cig - ci0 : KCC_CONV_KC, acc);
                            }
                            continue;
                        }
                        for (int r = 0; r < nt; ++r) {       /* padded edge or short last tile */
                            if (!xr[r]) continue;
                            for (int64_t ci = 0; ci < cig; ++ci) {
                                const double xv = (double)xr[r][ci];
                                const float *w = wk + ci * KCC_CONV_NR;
                                for (int j = 0; j < KCC_CONV_NR; ++j) acc[r][j] += xv * (double)w[j];
                            }
                        }
                    }
                    for (int r = 0; r < nt; ++r) {
                        float *y = ob + (t0 + r) * c_out + c0;
                        const float *rr = has_res ? rb + (t0 + r) * c_out + c0 : rb;
                        for (int64_t j = 0; j < nc; ++j) {
                            const float v = (float)(acc[r][j] + (has_bias ? (double)bias[c0 + j] : 0.0));
                            const float u = kcc_leaky_f32(v, neg_slope);
                            y[j] = has_res ? u + rr[j] : u;
                        }
                    }
                }
            }
        }
    }
    return KCC_OK;
}
