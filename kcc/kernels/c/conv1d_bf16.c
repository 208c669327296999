/* kcc_conv1d_gemm_f32 (groups 1, direct, any stride) on the bf16 precision's weights: its pack
 * with input channels in bf16 pairs (wp[k][p][q][j] holds rows 2q and 2q + 1 of W[p*NR + j][.][k],
 * see gemm_tile_bf16.c), the tiles kcc_gemm_tile_bf16p, the row-block driver conv1d_gemm_f32.c's. Same
 * argument list as kcc_conv1d_gemm_f32, so one bind serves both. Results do not depend on row
 * blocking or threads. The transposed twin is conv1d_polyphase_bf16.c. */

/* kcc_conv_rows_f32 on the pair pack: ob rows [t0, t1) of the conv of the rows held at xs. The
 * input rows those outputs read are rounded to bf16 pairs once (not once per tap and panel pair)
 * when they fit KCC_BF16_ROWS words, else per tile; the same values either way. */
static void kcc_conv_rows_bf16(const float *KCC_RESTRICT xs, int64_t r0, int64_t t_in, int64_t c_in,
                               const float *KCC_RESTRICT wp, int64_t c_out, int64_t k_size, int64_t pad,
                               int64_t dilation, int64_t stride, int64_t t0, int64_t t1, float *KCC_RESTRICT ob)
{
    const int64_t panels = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR, kp = (c_in + 1) / 2;
    const int64_t lo_in = t0 * stride - pad > 0 ? t0 * stride - pad : 0;
    const int64_t last = (t1 - 1) * stride + (k_size - 1) * dilation - pad + 1;
    const int64_t hi_in = last < t_in ? last : t_in;
    uint32_t xa[KCC_BF16_ROWS];
    const int held = hi_in > lo_in && (hi_in - lo_in) * kp <= KCC_BF16_ROWS;
    if (held) kcc_bf16_pack_rows(xs + (lo_in - r0) * c_in, c_in, hi_in - lo_in, c_in, xa, kp);
    for (int64_t t = t0; t < t1; ++t)
        for (int64_t j = 0; j < c_out; ++j) ob[t * c_out + j] = 0.0f;
    for (int64_t p = 0; p < panels; p += KCC_GEMM_NP) {
        const int64_t nr = kcc_gemm_pair_cols(c_out, p * KCC_GEMM_NR);
        for (int64_t k = 0; k < k_size; ++k) {
            const int64_t off = k * dilation - pad;           /* tap k reads input row t*stride + off */
            int64_t lo, hi;
            kcc_conv_tap_rows(k, t_in, stride, pad, dilation, t0, t1, &lo, &hi);
            const float *wk = wp + (k * panels + p) * kp * KCC_GEMM_NR;
            for (int64_t ci0 = 0; ci0 < c_in; ci0 += KCC_GEMM_KC) {
                const int64_t kc = c_in - ci0 < KCC_GEMM_KC ? c_in - ci0 : KCC_GEMM_KC;
                for (int64_t i = lo; i < hi; i += KCC_GEMM_MR) {
                    const int64_t mr = hi - i < KCC_GEMM_MR ? hi - i : KCC_GEMM_MR;
                    if (held)
                        kcc_gemm_tile_bf16p(xa + (i * stride + off - lo_in) * kp + ci0 / 2, stride * kp, mr,
                                            (const uint32_t *)(const void *)(wk + ci0 / 2 * KCC_GEMM_NR),
                                            kp * KCC_GEMM_NR, kc, ob + i * c_out + p * KCC_GEMM_NR, c_out, nr, 0);
                    else
                        kcc_gemm_tile_bf16(xs + (i * stride + off - r0) * c_in + ci0, stride * c_in, mr,
                                           wk + ci0 / 2 * KCC_GEMM_NR, kp * KCC_GEMM_NR, kc,
                                           ob + i * c_out + p * KCC_GEMM_NR, c_out, nr, 0);
                }
            }
        }
    }
}

static int kcc_conv1d_gemm_bf16(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                                const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t has_bias,
                                int64_t c_out, int64_t k_size, int64_t stride, int64_t pad, int64_t dilation,
                                float neg_slope, const float *KCC_RESTRICT res, int64_t has_res,
                                float *KCC_RESTRICT out)
{
    (void)kcc_conv1d_gemm_f32;   /* pasted for its driver */
    return kcc_conv1d_gemm_on(kcc_conv_rows_bf16, x, n_batch, t_in, c_in, wp, bias, has_bias, c_out, k_size, stride,
                              pad, dilation, neg_slope, res, has_res, out);
}
