/* kcc_dft_conv1d_f32 on the bf16 precision's weights: the spectrum and the GEMM pack hold input
 * channels in bf16 pairs (gemm_tile_bf16.c), the slot GEMMs run on kcc_gemm_tile_bf16 (the tile
 * bins rounded to bf16, f32 sums), short inputs on kcc_conv1d_gemm_bf16; the transforms, the inverse
 * and the epilogue are kcc_dft_conv1d_f32's, in f32. Same argument list and limits. */

/* Through a pointer, not inlined, for the reason kcc_dft_slot_gemm gives (dft_conv1d_f32.c). */
static void (*const volatile kcc_dft_slot_gemm_bf16)(const float *, int64_t, int64_t, const float *, int64_t,
                                                     int64_t, float *, int64_t, int64_t) = kcc_gemm_packed_bf16;

static int kcc_dft_conv1d_bf16(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                               const float *KCC_RESTRICT wp, const float *KCC_RESTRICT spec, int64_t n,
                               int64_t min_rows, const float *KCC_RESTRICT bias, int64_t c_out, int64_t k_size,
                               int64_t pad, int64_t dilation, float neg_slope, const float *KCC_RESTRICT res,
                               int64_t has_res, float *KCC_RESTRICT out)
{
    (void)kcc_dft_conv1d_f32;
    const kcc_dft_format fmt = {kcc_dft_slot_gemm_bf16, kcc_conv1d_gemm_bf16, 1};
    return kcc_dft_conv1d_on(&fmt, x, n_batch, t_in, c_in, wp, spec, n, min_rows, bias, c_out, k_size, pad, dilation,
                             neg_slope, res, has_res, out);
}
