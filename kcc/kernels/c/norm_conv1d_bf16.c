/* kcc_norm_conv1d_f32 on the bf16 precision's weights: the same AdaIN tiles and epilogue, the
 * conv rows through kcc_conv_rows_bf16 (conv1d_bf16.c) on the bf16-pair GEMM pack. Same argument
 * list and limits as kcc_norm_conv1d_f32; results do not depend on blocking or threads. */

/* Through a pointer, not inlined, for the reason kcc_nc_conv_rows gives (norm_conv1d_f32.c). */
static void (*const volatile kcc_nc_conv_rows_bf16)(const float *, int64_t, int64_t, int64_t, const float *,
                                                    int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                                    int64_t, float *) = kcc_conv_rows_bf16;

static int kcc_norm_conv1d_bf16(
    const float *KCC_RESTRICT x, const float *KCC_RESTRICT style, int64_t n_batch, int64_t t_in, int64_t c_in,
    int64_t n_style, const float *KCC_RESTRICT norm_w, const float *KCC_RESTRICT norm_b,
    const float *KCC_RESTRICT fc_w, const float *KCC_RESTRICT fc_b, const float *KCC_RESTRICT alpha,
    int64_t act, float slope, float eps, const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias,
    int64_t has_bias, int64_t c_out, int64_t k_size, int64_t pad, int64_t dilation, float neg_slope,
    const float *KCC_RESTRICT res, int64_t has_res, float *KCC_RESTRICT out)
{
    (void)kcc_norm_conv1d_f32;
    (void)kcc_conv1d_gemm_bf16;
    return kcc_norm_conv1d_on(kcc_nc_conv_rows_bf16, x, style, n_batch, t_in, c_in, n_style, norm_w, norm_b, fc_w,
                              fc_b, alpha, act, slope, eps, wp, bias, has_bias, c_out, k_size, pad, dilation,
                              neg_slope, res, has_res, out);
}
