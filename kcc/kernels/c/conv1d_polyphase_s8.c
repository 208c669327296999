/* kcc_conv1d_polyphase_f32 (transposed, groups 1, dilation 1) at the int8 precision: the int8
 * pack of conv1d_s8.c over the polyphase layout (tap k, panel p: the channel scales, the tap's
 * shift correction, the s8 quads of W[.][p*NR + j][k]), input rows quantised one scale a row
 * (kcc_s8_quant_rows), kcc_gemm_tile_s8_dq's exact integer sums dequantised tap by tap into the
 * f32 rows, times the channel scales, then the driver's epilogue. Same argument list as
 * kcc_conv1d_polyphase_f32, so one bind serves both; results do not depend on blocking or threads. */

/* kcc_conv_phases_f32 on the int8 pack: the output rows of q in [q0, q1) (added into the zeroed
 * rows), scaled by the channel scales at the end. The input rows a q range reads, quantised,
 * must fit KCC_S8_ROWS: the range is cut into steps that do (kcc_s8_rows_per_block). */
static void kcc_conv_phases_s8(const float *KCC_RESTRICT xb, int64_t t_in, int64_t c_in,
                               const float *KCC_RESTRICT wp, int64_t c_out, int64_t k_size, int64_t stride,
                               int64_t pad, int64_t t_out, int64_t q0, int64_t q1, float *KCC_RESTRICT ob)
{
    const int64_t panels = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR;
    const int64_t kq = (c_in + 3) / 4, ldq = 4 * kq, back = (k_size - 1) / stride;   /* rows q - m, m <= back */
    const int64_t step = kcc_s8_rows_per_block(c_in, back, 1);
    if (step < 1) return;   /* refused at lowering */
    uint8_t xq[KCC_S8_ROWS];
    float sa[KCC_S8_MAX_ROWS], sw[2 * KCC_GEMM_NR];
    int32_t comp[2 * KCC_GEMM_NR];
    for (int64_t s0 = q0; s0 < q1; s0 += step) {
        const int64_t s1 = q1 - s0 < step ? q1 : s0 + step;
        const int64_t lo_in = s0 - back > 0 ? s0 - back : 0, hi_in = s1 < t_in ? s1 : t_in;
        if (hi_in > lo_in) kcc_s8_quant_rows(xb + lo_in * c_in, c_in, hi_in - lo_in, c_in, xq, ldq, sa);
        for (int64_t phi = 0; phi < stride && phi < k_size; ++phi) {
            int64_t qa, qb;                                           /* rows inside [0, t_out) */
            kcc_conv_phase_rows(phi, stride, pad, t_out, s0, s1, &qa, &qb);
            for (int64_t p = 0; p < panels; p += KCC_GEMM_NP) {
                const int64_t nr = kcc_gemm_pair_cols(c_out, p * KCC_GEMM_NR);
                for (int64_t m = 0; phi + m * stride < k_size; ++m) {
                    const int64_t k = phi + m * stride;
                    const int64_t lo = qa > m ? qa : m, hi = qb < t_in + m ? qb : t_in + m;   /* 0 <= q - m < t_in */
                    const int8_t *wk = (const int8_t *)(const void *)(wp + ((k * panels + p) * (kq + 2) + 2) * KCC_GEMM_NR);
                    kcc_s8_pair_row(wp, panels, kq, k, p, nr, 1, comp);
                    for (int64_t q = lo; q < hi; q += KCC_GEMM_MR) {
                        const int64_t mr = hi - q < KCC_GEMM_MR ? hi - q : KCC_GEMM_MR;
                        const int64_t row = q - m - lo_in;
                        kcc_gemm_tile_s8_dq(xq + row * ldq, ldq, mr, wk, nr > KCC_GEMM_NR ? wk + (kq + 2) * KCC_S8_QUAD : wk, kq, nr, comp,
                                            sa + row, 1, ob + (q * stride + phi - pad) * c_out + p * KCC_GEMM_NR,
                                            stride * c_out);
                    }
                }
            }
        }
    }
    const int64_t t0 = q0 * stride - pad > 0 ? q0 * stride - pad : 0;
    const int64_t t1 = q1 * stride - pad < t_out ? q1 * stride - pad : t_out;
    for (int64_t p = 0; p < panels; p += KCC_GEMM_NP) {
        const int64_t nr = kcc_gemm_pair_cols(c_out, p * KCC_GEMM_NR);
        kcc_s8_pair_row(wp, panels, kq, 0, p, nr, 0, sw);
        kcc_s8_scale_cols(ob + p * KCC_GEMM_NR, c_out, t0, t1, nr, sw);
    }
}

static int kcc_conv1d_polyphase_s8(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                                   const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t has_bias,
                                   int64_t c_out, int64_t k_size, int64_t stride, int64_t pad,
                                   int64_t output_padding, float neg_slope, const float *KCC_RESTRICT res,
                                   int64_t has_res, float *KCC_RESTRICT out)
{
    (void)kcc_conv1d_polyphase_f32;   /* pasted for its driver */
    (void)kcc_conv1d_gemm_s8;         /* pasted for the int8 rows' helpers */
    if (c_in < 1 || k_size < 1 || stride < 1 || kcc_s8_rows_per_block(c_in, (k_size - 1) / stride, 1) < 1)
        return KCC_EDIMS;
    return kcc_conv1d_polyphase_on(kcc_conv_phases_s8, x, n_batch, t_in, c_in, wp, bias, has_bias, c_out, k_size,
                                   stride, pad, output_padding, neg_slope, res, has_res, out);
}
