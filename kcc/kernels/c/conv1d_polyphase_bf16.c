/* kcc_conv1d_polyphase_f32 (transposed, groups 1, dilation 1) on the bf16 precision's weights:
 * its pack with input channels in bf16 pairs (wp[k][p][q][j] holds rows 2q and 2q + 1 of
 * W[.][p*NR + j][k], see gemm_tile_bf16.c), the tiles kcc_gemm_tile_bf16p, the q-block
 * driver conv1d_polyphase_f32.c's. Same argument list as kcc_conv1d_polyphase_f32, so one bind serves
 * both. Results do not depend on row blocking or threads. */

/* kcc_conv_phases_f32 on the pair pack: the transposed conv's output rows of q in [q0, q1), the
 * input rows they read rounded to pairs once when they fit, else per tile. */
static void kcc_conv_phases_bf16(const float *KCC_RESTRICT xb, int64_t t_in, int64_t c_in,
                                 const float *KCC_RESTRICT wp, int64_t c_out, int64_t k_size, int64_t stride,
                                 int64_t pad, int64_t t_out, int64_t q0, int64_t q1, float *KCC_RESTRICT ob)
{
    const int64_t panels = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR, kp = (c_in + 1) / 2;
    const int64_t lo_in = q0 - (k_size - 1) / stride > 0 ? q0 - (k_size - 1) / stride : 0;
    const int64_t hi_in = q1 < t_in ? q1 : t_in;
    uint32_t xa[KCC_BF16_ROWS];
    const int held = hi_in > lo_in && (hi_in - lo_in) * kp <= KCC_BF16_ROWS;
    if (held) kcc_bf16_pack_rows(xb + lo_in * c_in, c_in, hi_in - lo_in, c_in, xa, kp);
    for (int64_t phi = 0; phi < stride && phi < k_size; ++phi) {
        int64_t qa, qb;                                           /* rows inside [0, t_out) */
        kcc_conv_phase_rows(phi, stride, pad, t_out, q0, q1, &qa, &qb);
        for (int64_t p = 0; p < panels; p += KCC_GEMM_NP) {
            const int64_t nr = kcc_gemm_pair_cols(c_out, p * KCC_GEMM_NR);
            for (int64_t m = 0; phi + m * stride < k_size; ++m) {
                const int64_t lo = qa > m ? qa : m, hi = qb < t_in + m ? qb : t_in + m;   /* 0 <= q - m < t_in */
                const float *wk = wp + ((phi + m * stride) * panels + p) * kp * KCC_GEMM_NR;
                for (int64_t ci0 = 0; ci0 < c_in; ci0 += KCC_GEMM_KC) {
                    const int64_t kc = c_in - ci0 < KCC_GEMM_KC ? c_in - ci0 : KCC_GEMM_KC;
                    for (int64_t q = lo; q < hi; q += KCC_GEMM_MR) {
                        const int64_t mr = hi - q < KCC_GEMM_MR ? hi - q : KCC_GEMM_MR;
                        float *o = ob + (q * stride + phi - pad) * c_out + p * KCC_GEMM_NR;
                        if (held)
                            kcc_gemm_tile_bf16p(xa + (q - m - lo_in) * kp + ci0 / 2, kp, mr,
                                                (const uint32_t *)(const void *)(wk + ci0 / 2 * KCC_GEMM_NR),
                                                kp * KCC_GEMM_NR, kc, o, stride * c_out, nr, 0);
                        else
                            kcc_gemm_tile_bf16(xb + (q - m) * c_in + ci0, c_in, mr, wk + ci0 / 2 * KCC_GEMM_NR,
                                               kp * KCC_GEMM_NR, kc, o, stride * c_out, nr, 0);
                    }
                }
            }
        }
    }
}

static int kcc_conv1d_polyphase_bf16(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                                     const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t has_bias,
                                     int64_t c_out, int64_t k_size, int64_t stride, int64_t pad,
                                     int64_t output_padding, float neg_slope, const float *KCC_RESTRICT res,
                                     int64_t has_res, float *KCC_RESTRICT out)
{
    (void)kcc_conv1d_polyphase_f32;   /* pasted for its driver */
    return kcc_conv1d_polyphase_on(kcc_conv_phases_bf16, x, n_batch, t_in, c_in, wp, bias, has_bias, c_out, k_size,
                                   stride, pad, output_padding, neg_slope, res, has_res, out);
}
