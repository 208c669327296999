/* Conv1d and ConvTranspose1d over time-major activations, one mechanism: every output row t
 * is a sum over taps k of (packed weight slice k) x (one input row), where the input row is
 *   direct:     ti = t*stride + k*dilation - pad
 *   transposed: ti = (t + pad - k*dilation) / stride, only when that divides exactly
 * and taps with ti outside [0, t_in) read zeros (zero padding). x [n_batch, t_in, c_in],
 * out [n_batch, t_out, c_out], t_out computed here from the conv arithmetic.
 *
 * Weight layouts (made by kcc/ops/conv.py), cig = c_in/groups, cog = c_out/groups:
 *   dense:     wp[g][p][k][ci][j], column panels p of KCC_CONV_NR (zeros past cog)
 *              = W[g*cog + p*NR + j][ci][k] (direct) or W[g*cig + ci][p*NR + j][k] (transposed)
 *   depthwise (cig == cog == 1): wp[k][c] = W[c][0][k]
 * Dense schedule: per column panel (its K*cig*NR weights stay in cache), sweep time in tiles of
 * KCC_CONV_MR rows; a tap whose rows all read real input runs a register micro-kernel with
 * f32 partial sums over at most KCC_CONV_KC input channels, each flushed into f64
 * accumulators; taps at padded edges (and a short last tile) run row by row in f64. Every
 * output is thus an f64 sum of f32 partial sums of <= KC products, rounded once after the
 * f64 bias add; the leaky slope is applied in f32 (neg_slope 1 is the identity). */
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

static int kcc_conv1d_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                          const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t has_bias,
                          int64_t c_out, int64_t k_size, int64_t stride, int64_t pad, int64_t dilation,
                          int64_t output_padding, int64_t groups, int64_t transposed, float neg_slope,
                          float *KCC_RESTRICT out)
{
    if (n_batch < 1 || t_in < 1 || c_in < 1 || c_out < 1 || k_size < 1 || stride < 1 || dilation < 1
        || pad < 0 || output_padding < 0 || groups < 1 || c_in % groups || c_out % groups)
        return KCC_EDIMS;
    const int64_t span = dilation * (k_size - 1);
    int64_t t_out;
    if (transposed) {
        t_out = (t_in - 1) * stride - 2 * pad + span + output_padding + 1;
    } else {
        if (t_in + 2 * pad - span - 1 < 0) return KCC_EDIMS;   /* input shorter than one tap span */
        t_out = (t_in + 2 * pad - span - 1) / stride + 1;
    }
    if (t_out < 1) return KCC_EDIMS;
    const int64_t cig = c_in / groups, cog = c_out / groups;

    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * t_in * c_in;
        float *ob = out + b * t_out * c_out;
        if (cig == 1 && cog == 1) {
            /* depthwise: channel c reads only channel c */
            KCC_PARALLEL_FOR
            for (int64_t t = 0; t < t_out; ++t) {
                float *y = ob + t * c_out;
                for (int64_t c = 0; c < c_out; ++c) {
                    double acc = has_bias ? (double)bias[c] : 0.0;
                    for (int64_t k = 0; k < k_size; ++k) {
                        int64_t ti;
                        if (transposed) {
                            const int64_t num = t + pad - k * dilation;
                            if (num < 0 || num % stride) continue;
                            ti = num / stride;
                        } else {
                            ti = t * stride + k * dilation - pad;
                        }
                        if (ti < 0 || ti >= t_in) continue;
                        acc += (double)wp[k * c_out + c] * (double)xb[ti * c_in + c];
                    }
                    const float v = (float)acc;
                    y[c] = v >= 0.0f ? v : v * neg_slope;
                }
            }
            continue;
        }
        const int64_t panels = (cog + KCC_CONV_NR - 1) / KCC_CONV_NR;
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
                            const int64_t t = t0 + r;
                            int64_t ti = -1;
                            if (transposed) {
                                const int64_t num = t + pad - k * dilation;
                                if (num >= 0 && num % stride == 0) ti = num / stride;
                            } else {
                                ti = t * stride + k * dilation - pad;
                            }
                            if (ti >= 0 && ti < t_in) {
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
                        for (int64_t j = 0; j < nc; ++j) {
                            const float v = (float)(acc[r][j] + (has_bias ? (double)bias[c0 + j] : 0.0));
                            y[j] = v >= 0.0f ? v : v * neg_slope;
                        }
                    }
                }
            }
        }
    }
    return KCC_OK;
}
