/* ConvTranspose1d, groups 1 and dilation 1 (not one channel in and out), as stride phases of
 * GEMMs: x [n_batch, t_in, c_in] -> out [n_batch, t_out, c_out]. Output rows t with
 * t + pad = q*stride + phi read taps k = phi + m*stride at input row q - m, so each phase is a
 * stride-1 GEMM over q (kcc_gemm_tile_f32) writing every stride-th output row.
 *   layout: wp[k][p][ci][j] = W[ci][p*NR + j][k], NR = KCC_GEMM_NR, zeros past c_out.
 *   numerics: those of the shifted-GEMM conv (conv_rows_f32.c): f32, per tap KC-chunk sums
 *   from zero added in order to the row's partial; identical for any thread count. Then the
 *   epilogue (conv_epilogue_f32.c). */

/* The transposed conv's output rows of q in [q0, q1): row t = q*stride + phi - pad, phi < stride. */
static void kcc_conv_phases_f32(const float *KCC_RESTRICT xb, int64_t t_in, int64_t c_in,
                                const float *KCC_RESTRICT wp, int64_t c_out, int64_t k_size, int64_t stride,
                                int64_t pad, int64_t t_out, int64_t q0, int64_t q1, float *KCC_RESTRICT ob)
{
    const int64_t panels = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR;
    for (int64_t phi = 0; phi < stride && phi < k_size; ++phi) {
        int64_t qa, qb;                                           /* rows inside [0, t_out) */
        kcc_conv_phase_rows(phi, stride, pad, t_out, q0, q1, &qa, &qb);
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

/* A phases function: kcc_conv_phases_f32's signature and contract (adds into the zeroed rows). */
typedef void (*kcc_conv_phases_fn)(const float *, int64_t, int64_t, const float *, int64_t, int64_t, int64_t, int64_t,
                                   int64_t, int64_t, int64_t, float *);

/* The q-block driver over a phases function: the bf16 and int8 twins (conv1d_polyphase_bf16.c,
 * conv1d_polyphase_s8.c) run it on their own phases and weight packs. */
static inline int kcc_conv1d_polyphase_on(kcc_conv_phases_fn phases, const float *KCC_RESTRICT x, int64_t n_batch,
                                          int64_t t_in, int64_t c_in, const float *KCC_RESTRICT wp,
                                          const float *KCC_RESTRICT bias, int64_t has_bias, int64_t c_out,
                                          int64_t k_size, int64_t stride, int64_t pad, int64_t output_padding,
                                          float neg_slope, const float *KCC_RESTRICT res, int64_t has_res,
                                          float *KCC_RESTRICT out)
{
    const int64_t t_out = kcc_conv_out_rows(n_batch, t_in, c_in, c_out, k_size, stride, pad, 1, output_padding, 1, 1);
    if (t_out < 0) return KCC_EDIMS;
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
            phases(xb, t_in, c_in, wp, c_out, k_size, stride, pad, t_out, q0, q1, ob);
            kcc_conv_epilogue_f32(ob, c_out, t0, t1, bias, has_bias, neg_slope, rb, has_res);
        }
    }
    return KCC_OK;
}

static int kcc_conv1d_polyphase_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                                    const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t has_bias,
                                    int64_t c_out, int64_t k_size, int64_t stride, int64_t pad,
                                    int64_t output_padding, float neg_slope, const float *KCC_RESTRICT res,
                                    int64_t has_res, float *KCC_RESTRICT out)
{
    return kcc_conv1d_polyphase_on(kcc_conv_phases_f32, x, n_batch, t_in, c_in, wp, bias, has_bias, c_out, k_size,
                                   stride, pad, output_padding, neg_slope, res, has_res, out);
}
