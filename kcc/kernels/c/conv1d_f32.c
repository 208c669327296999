/* Conv1d and ConvTranspose1d over time-major activations, x [n_batch, t_in, c_in] ->
 * out [n_batch, t_out, c_out] (t_out computed here from the conv arithmetic), with an
 * epilogue per output: v = acc + bias, leaky slope (neg_slope 1 is the identity), + res.
 *
 * GEMM path (kcc_conv_is_gemm: groups 1, direct, not 1-in-1-out, any stride): the conv is K
 * accumulated GEMMs over shifted row views (tap k reads rows t*stride + k*dilation - pad, rows
 * outside [0, t_in) are zero padding and skipped; a stride is the view's row step), run on
 * kcc_gemm_tile_f32 (gemm_tile_f32.c).
 *   layout: wp[k][p][ci][j] = W[p*NR + j][ci][k], NR = KCC_GEMM_NR, zeros past c_out.
 *   numerics: f32; per tap, KC-chunk sums from zero added in (tap, chunk) order to the row's
 *   f32 partial: each output's arithmetic is fixed by (k, ci), independent of row blocking,
 *   so results are identical for any thread count and for the tiled caller (norm_conv1d).
 * Polyphase path (kcc_conv_is_polyphase: transposed, groups 1, dilation 1, not 1-in-1-out):
 * output rows t with t + pad = q*stride + phi read taps k = phi + m*stride at input row q - m,
 * so each phase is a stride-1 GEMM over q writing every stride-th output row; same layout
 * wp[k][p][ci][j] = W[ci][p*NR + j][k] and the same f32 numerics as the GEMM path.
 * General path (grouped, depthwise, dilated transposed, 1-in-1-out): every output row t is a sum over
 * taps of (packed weight slice k) x (one input row), where the input row is
 *   direct:     ti = t*stride + k*dilation - pad
 *   transposed: ti = (t + pad - k*dilation) / stride, only when that divides exactly
 *   dense:     wp[g][p][k][ci][j], column panels p of KCC_CONV_NR (zeros past cog)
 *              = W[g*cog + p*NR + j][ci][k] (direct) or W[g*cig + ci][p*NR + j][k] (transposed)
 *   depthwise (cig == cog == 1): wp[k][c] = W[c][0][k]
 * It sweeps time in tiles of KCC_CONV_MR rows per column panel; full taps run a register
 * micro-kernel with f32 partial sums over <= KCC_CONV_KC input channels, each flushed into f64,
 * edge taps run in f64; rounded once after the f64 bias add. */
#define KCC_CONV_MR 4
#define KCC_CONV_NR 8
#define KCC_CONV_KC 32
#define KCC_CONV_DW_BLOCK 256   /* depthwise: channels per f64 accumulator block */
#define KCC_CONV_MC 64     /* GEMM path: output rows per parallel block (the out block stays in L1/L2) */
_Static_assert(KCC_CONV_MR == 4, "kcc_conv_tile_f32 is written out for 4 rows");

static int kcc_conv_is_gemm(int64_t c_in, int64_t c_out, int64_t groups, int64_t transposed)
{
    return groups == 1 && !transposed && !(c_in == 1 && c_out == 1);
}

static int kcc_conv_is_polyphase(int64_t c_in, int64_t c_out, int64_t groups, int64_t dilation, int64_t transposed)
{
    return transposed && groups == 1 && dilation == 1 && !(c_in == 1 && c_out == 1);
}

/* The transposed conv's output rows of q in [q0, q1): row t = q*stride + phi - pad, phi < stride. */
static void kcc_conv_phases_f32(const float *KCC_RESTRICT xb, int64_t t_in, int64_t c_in,
                                const float *KCC_RESTRICT wp, int64_t c_out, int64_t k_size, int64_t stride,
                                int64_t pad, int64_t t_out, int64_t q0, int64_t q1, float *KCC_RESTRICT ob)
{
    const int64_t panels = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR;
    for (int64_t phi = 0; phi < stride && phi < k_size; ++phi) {
        int64_t qa = q0, qb = q1;                                  /* rows inside [0, t_out) */
        while (qa < qb && qa * stride + phi - pad < 0) ++qa;
        while (qb > qa && (qb - 1) * stride + phi - pad >= t_out) --qb;
        for (int64_t p = 0; p < panels; p += KCC_GEMM_NP) {
            const int64_t nr = kcc_gemm_pair_cols(c_out, p * KCC_GEMM_NR);
            for (int64_t m = 0; phi + m * stride < k_size; ++m) {
                const int64_t lo = qa > m ? qa : m, hi = qb < t_in + m ? qb : t_in + m;   /* 0 <= q - m < t_in */
                const float *wk = wp + ((phi + m * stride) * panels + p) * c_in * KCC_GEMM_NR;
                for (int64_t ci0 = 0; ci0 < c_in; ci0 += KCC_GEMM_KC) {
                    const int64_t kc = c_in - ci0 < KCC_GEMM_KC ? c_in - ci0 : KCC_GEMM_KC;
                    for (int64_t q = lo; q < hi; q += KCC_GEMM_MR)
                        kcc_gemm_tile_f32(xb + (q - m) * c_in + ci0, c_in, hi - q < KCC_GEMM_MR ? hi - q : KCC_GEMM_MR,
                                          wk + ci0 * KCC_GEMM_NR, c_in * KCC_GEMM_NR, kc,
                                          ob + (q * stride + phi - pad) * c_out + p * KCC_GEMM_NR,
                                          stride * c_out, nr, 0);
                }
            }
        }
    }
}

/* ob rows [t0, t1) = conv of the input rows held at xs: row ti (0 <= ti < t_in) is at
 * xs + (ti - r0)*c_in; output row t, tap k reads row t*stride + k*dilation - pad; the caller
 * guarantees every row a tap reads is held. */
static void kcc_conv_rows_f32(const float *KCC_RESTRICT xs, int64_t r0, int64_t t_in, int64_t c_in,
                              const float *KCC_RESTRICT wp, int64_t c_out, int64_t k_size, int64_t pad,
                              int64_t dilation, int64_t stride, int64_t t0, int64_t t1, float *KCC_RESTRICT ob)
{
    const int64_t panels = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR;
    for (int64_t t = t0; t < t1; ++t)
        for (int64_t j = 0; j < c_out; ++j) ob[t * c_out + j] = 0.0f;
    for (int64_t p = 0; p < panels; p += KCC_GEMM_NP) {
        const int64_t nr = kcc_gemm_pair_cols(c_out, p * KCC_GEMM_NR);
        for (int64_t k = 0; k < k_size; ++k) {
            const int64_t off = k * dilation - pad;         /* rows t with 0 <= t*stride + off < t_in */
            const int64_t first = off >= 0 ? 0 : (-off + stride - 1) / stride;
            const int64_t end = t_in - off <= 0 ? 0 : (t_in - off + stride - 1) / stride;
            const int64_t lo = t0 > first ? t0 : first, hi = t1 < end ? t1 : end;
            const float *wk = wp + (k * panels + p) * c_in * KCC_GEMM_NR;
            for (int64_t ci0 = 0; ci0 < c_in; ci0 += KCC_GEMM_KC) {
                const int64_t kc = c_in - ci0 < KCC_GEMM_KC ? c_in - ci0 : KCC_GEMM_KC;
                for (int64_t i = lo; i < hi; i += KCC_GEMM_MR)
                    kcc_gemm_tile_f32(xs + (i * stride + off - r0) * c_in + ci0, stride * c_in,
                                      hi - i < KCC_GEMM_MR ? hi - i : KCC_GEMM_MR, wk + ci0 * KCC_GEMM_NR,
                                      c_in * KCC_GEMM_NR, kc,
                                      ob + i * c_out + p * KCC_GEMM_NR, c_out, nr, 0);
            }
        }
    }
}

/* The epilogue on rows [t0, t1) of ob: + bias, leaky slope, + res (same layout as ob). Each
 * case is its own KCC_FOR16 loop (portable -O2 builds vectorise it too, where a per-element test
 * of has_bias / has_res kept it scalar: 24% of a portable synthesis). */
KCC_VECTOR_CLONES
static void kcc_conv_epilogue_f32(float *KCC_RESTRICT ob, int64_t c_out, int64_t t0, int64_t t1,
                                  const float *KCC_RESTRICT bias, int64_t has_bias, float neg_slope,
                                  const float *KCC_RESTRICT res, int64_t has_res)
{
    for (int64_t t = t0; t < t1; ++t) {
        float *KCC_RESTRICT y = ob + t * c_out;
        const float *KCC_RESTRICT r = has_res ? res + t * c_out : res;
        if (has_bias && has_res)
            KCC_FOR16(c_out, y[j] = kcc_leaky_f32(y[j] + bias[j], neg_slope) + r[j];);
        else if (has_bias)
            KCC_FOR16(c_out, y[j] = kcc_leaky_f32(y[j] + bias[j], neg_slope););
        else if (has_res)
            KCC_FOR16(c_out, y[j] = kcc_leaky_f32(y[j], neg_slope) + r[j];);
        else
            KCC_FOR16(c_out, y[j] = kcc_leaky_f32(y[j], neg_slope););
    }
}

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
                          const float *KCC_RESTRICT res, int64_t has_res, float *KCC_RESTRICT out)
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
    if (kcc_conv_is_gemm(c_in, c_out, groups, transposed)) {
        /* row blocks of <= KCC_CONV_MC cut evenly: each output's arithmetic is fixed by (k, ci) */
        const int64_t mc = kcc_split_even(t_out, KCC_CONV_MC), blocks = (t_out + mc - 1) / mc;
        for (int64_t b = 0; b < n_batch; ++b) {
            const float *xb = x + b * t_in * c_in, *rb = has_res ? res + b * t_out * c_out : res;
            float *ob = out + b * t_out * c_out;
            KCC_PARALLEL_FOR   /* each row block is written by one thread, in a fixed order */
            for (int64_t blk = 0; blk < blocks; ++blk) {
                const int64_t t0 = blk * mc, t1 = t_out - t0 < mc ? t_out : t0 + mc;
                kcc_conv_rows_f32(xb, 0, t_in, c_in, wp, c_out, k_size, pad, dilation, stride, t0, t1, ob);
                kcc_conv_epilogue_f32(ob, c_out, t0, t1, bias, has_bias, neg_slope, rb, has_res);
            }
        }
        return KCC_OK;
    }
    if (kcc_conv_is_polyphase(c_in, c_out, groups, dilation, transposed)) {
        const int64_t q_end = (t_out - 1 + pad) / stride + 1;           /* q of the last output row, + 1 */
        const int64_t mc = kcc_split_even(q_end, KCC_CONV_MC), blocks = (q_end + mc - 1) / mc;
        for (int64_t b = 0; b < n_batch; ++b) {
            const float *xb = x + b * t_in * c_in, *rb = has_res ? res + b * t_out * c_out : res;
            float *ob = out + b * t_out * c_out;
            KCC_PARALLEL_FOR   /* q block -> the contiguous output rows [q0*s - pad, q1*s - pad) */
            for (int64_t blk = 0; blk < blocks; ++blk) {
                const int64_t q0 = blk * mc, q1 = q_end - q0 < mc ? q_end : q0 + mc;
                const int64_t t0 = q0 * stride - pad > 0 ? q0 * stride - pad : 0;
                const int64_t t1 = q1 * stride - pad < t_out ? q1 * stride - pad : t_out;
                for (int64_t t = t0; t < t1; ++t)
                    for (int64_t j = 0; j < c_out; ++j) ob[t * c_out + j] = 0.0f;
                kcc_conv_phases_f32(xb, t_in, c_in, wp, c_out, k_size, stride, pad, t_out, q0, q1, ob);
                kcc_conv_epilogue_f32(ob, c_out, t0, t1, bias, has_bias, neg_slope, rb, has_res);
            }
        }
        return KCC_OK;
    }
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * t_in * c_in, *rb = has_res ? res + b * t_out * c_out : res;
        float *ob = out + b * t_out * c_out;
        if (cig == 1 && cog == 1) {
            /* depthwise: channel c reads only channel c. Per output row, each tap's input row is
             * found once (not once per channel: a transposed conv's divisibility test is an
             * integer division), then a block of channels accumulates in f64, bias first and the
             * taps in order. */
            KCC_PARALLEL_FOR
            for (int64_t t = 0; t < t_out; ++t) {
                float *y = ob + t * c_out;
                for (int64_t c0 = 0; c0 < c_out; c0 += KCC_CONV_DW_BLOCK) {
                    const int64_t nc = c_out - c0 < KCC_CONV_DW_BLOCK ? c_out - c0 : KCC_CONV_DW_BLOCK;
                    double acc[KCC_CONV_DW_BLOCK];
                    for (int64_t c = 0; c < nc; ++c) acc[c] = has_bias ? (double)bias[c0 + c] : 0.0;
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
                        const float *KCC_RESTRICT wk = wp + k * c_out + c0, *KCC_RESTRICT xr = xb + ti * c_in + c0;
                        for (int64_t c = 0; c < nc; ++c) acc[c] += (double)wk[c] * (double)xr[c];
                    }
                    for (int64_t c = 0; c < nc; ++c) {
                        const float v = (float)acc[c], u = kcc_leaky_f32(v, neg_slope);
                        y[c0 + c] = has_res ? u + rb[t * c_out + c0 + c] : u;   /* rb is res's batch b when has_res */
                    }
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
