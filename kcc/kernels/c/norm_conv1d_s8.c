/* kcc_norm_conv1d_f32 at the int8 precision: the same AdaIN (+ snake / leaky) tiles, the conv rows
 * through kcc_conv_rows_s8 (conv1d_s8.c) on the int8 pack, each normalised row quantised with its
 * own scale. Same argument list and limits as kcc_norm_conv1d_f32 (plus the int8 rows' own:
 * kcc_s8_rows_per_block >= 1); results do not depend on blocking or threads, and equal the
 * unfused adain -> conv1d_int8 bit for bit (a row's quantum depends on that row alone). */

/* Through a pointer, not inlined, for the reason kcc_nc_conv_rows gives (norm_conv1d_f32.c). */
static void (*const volatile kcc_nc_conv_rows_s8)(const float *, int64_t, int64_t, int64_t, const float *,
                                                  int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                  int64_t, float *) = kcc_conv_rows_s8;

static int kcc_norm_conv1d_s8(
    const float *KCC_RESTRICT x, const float *KCC_RESTRICT style, int64_t n_batch, int64_t t_in, int64_t c_in,
    int64_t n_style, const float *KCC_RESTRICT norm_w, const float *KCC_RESTRICT norm_b,
    const float *KCC_RESTRICT fc_w, const float *KCC_RESTRICT fc_b, const float *KCC_RESTRICT alpha,
    int64_t act, float slope, float eps, const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias,
    int64_t has_bias, int64_t c_out, int64_t k_size, int64_t pad, int64_t dilation, float neg_slope,
    const float *KCC_RESTRICT res, int64_t has_res, float *KCC_RESTRICT out)
{
    (void)kcc_norm_conv1d_f32;
    (void)kcc_conv1d_gemm_s8;
    if (c_in < 1 || k_size < 1 || dilation < 1 || kcc_s8_rows_per_block(c_in, dilation * (k_size - 1), 1) < 1)
        return KCC_EDIMS;
    return kcc_norm_conv1d_on(kcc_nc_conv_rows_s8, x, style, n_batch, t_in, c_in, n_style, norm_w, norm_b, fc_w,
                              fc_b, alpha, act, slope, eps, wp, bias, has_bias, c_out, k_size, pad, dilation,
                              neg_slope, res, has_res, out);
}
