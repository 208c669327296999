/* What every conv variant shares (conv1d_gemm_f32.c, conv1d_polyphase_f32.c, conv1d_depthwise_f32.c,
 * conv1d_grouped_f32.c, the fused and block-DFT convs): the output length of a conv / transposed
 * conv with the dimension checks every variant makes before its first write, the GEMM paths' row
 * block, and their epilogue. */
#define KCC_CONV_MC 64     /* GEMM paths: output rows per parallel block (the out block stays in L1/L2) */

/* t_out of a conv1d (transposed = 0) or a conv_transpose1d over t_in rows, or -1 where the
 * dims make no conv (a tap span longer than the padded input, a group count that does not
 * divide the channels, anything below its minimum). */
static inline int64_t kcc_conv_out_rows(int64_t n_batch, int64_t t_in, int64_t c_in, int64_t c_out, int64_t k_size,
                                        int64_t stride, int64_t pad, int64_t dilation, int64_t output_padding,
                                        int64_t groups, int64_t transposed)
{
    if (n_batch < 1 || t_in < 1 || c_in < 1 || c_out < 1 || k_size < 1 || stride < 1 || dilation < 1
        || pad < 0 || output_padding < 0 || groups < 1 || c_in % groups || c_out % groups)
        return -1;
    const int64_t span = dilation * (k_size - 1);
    int64_t t_out;
    if (transposed) {
        t_out = (t_in - 1) * stride - 2 * pad + span + output_padding + 1;
    } else {
        if (t_in + 2 * pad - span - 1 < 0) return -1;   /* input shorter than one tap span */
        t_out = (t_in + 2 * pad - span - 1) / stride + 1;
    }
    return t_out < 1 ? -1 : t_out;
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
