/* What the GEMM-path conv variants share (conv1d_gemm_f32.c, conv1d_polyphase_f32.c, their bf16
 * twins, the fused and block-DFT convs): the row block they cut time into and the epilogue they
 * run on each finished block. The direct-summation variants (depthwise, grouped) add the bias in
 * f64 inside their sums and do not use it; the geometry all of them share is conv_geometry.c. */
#define KCC_CONV_MC 64     /* GEMM paths: output rows per parallel block (the out block stays in L1/L2) */

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
