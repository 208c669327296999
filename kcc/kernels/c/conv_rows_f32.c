/* The shifted-GEMM conv rows that kcc_conv1d_gemm_f32, the fused norm-conv (norm_conv1d_f32.c)
 * and the block-DFT conv's short-input path share: a direct, groups-1 conv as K accumulated GEMMs
 * over shifted row views on kcc_gemm_tile_f32 (gemm_tile_f32.c).
 *   layout: wp[k][p][ci][j] = W[p*NR + j][ci][k], NR = KCC_GEMM_NR, zeros past c_out.
 *   numerics: f32; per tap, KC-chunk sums from zero added in (tap, chunk) order to the row's
 *   f32 partial: each output's arithmetic is fixed by (k, ci), independent of row blocking,
 *   so results are identical for any thread count and for the tiled caller. */

/* ob rows [t0, t1) = conv of the input rows held at xs: row ti (0 <= ti < t_in) is at
 * xs + (ti - r0)*c_in; output row t, tap k reads row t*stride + k*dilation - pad (rows outside
 * [0, t_in) are zero padding and skipped; a stride is the view's row step); the caller
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
            const int64_t off = k * dilation - pad;           /* tap k reads input row t*stride + off */
            int64_t lo, hi;
            kcc_conv_tap_rows(k, t_in, stride, pad, dilation, t0, t1, &lo, &hi);
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
