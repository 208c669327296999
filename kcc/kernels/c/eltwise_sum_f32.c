/* y[i] = act((((a[i] + b[i]) + c[i]) + d[i]) * mul / div) over n elements, for n_in = 1..4
 * inputs (c, d are not read past n_in; the caller may pass a for them). Every step is an f32
 * operation in torch's order, so sums, `* rsqrt(2)` and `/ 3` match torch bit for bit; mul = 1
 * and div = 1 are exact identities, as is neg_slope = 1 (act: y >= 0 ? y : y * neg_slope). */
#define KCC_SUM_BLOCK 1024   /* elements per parallel block */

/* y[i] for i in [i0, i1) with the first n_in inputs: one KCC_FOR16 loop per count (a loop-invariant
 * test per element kept portable -O2 builds scalar). */
#define KCC_SUM_LOOP(SUM)                                                                         \
    KCC_FOR16(i1 - i0, const int64_t k = i0 + j; const float y = (SUM) * mul / div;               \
              out[k] = kcc_leaky_f32(y, neg_slope);)

KCC_VECTOR_CLONES
static void kcc_eltwise_sum_block_f32(const float *KCC_RESTRICT a, const float *KCC_RESTRICT b,
                                      const float *KCC_RESTRICT c, const float *KCC_RESTRICT d, int64_t n_in,
                                      int64_t i0, int64_t i1, float mul, float div, float neg_slope,
                                      float *KCC_RESTRICT out)
{
    if (n_in == 1) KCC_SUM_LOOP(a[k]);
    else if (n_in == 2) KCC_SUM_LOOP(a[k] + b[k]);
    else if (n_in == 3) KCC_SUM_LOOP((a[k] + b[k]) + c[k]);
    else KCC_SUM_LOOP(((a[k] + b[k]) + c[k]) + d[k]);
}

static int kcc_eltwise_sum_f32(const float *KCC_RESTRICT a, const float *KCC_RESTRICT b,
                               const float *KCC_RESTRICT c, const float *KCC_RESTRICT d, int64_t n_in,
                               int64_t n, float mul, float div, float neg_slope, float *KCC_RESTRICT out)
{
    if (n_in < 1 || n_in > 4 || n < 0) return KCC_EDIMS;
    if (!(div != 0.0f)) return KCC_EBADINPUT;
    const int64_t blocks = (n + KCC_SUM_BLOCK - 1) / KCC_SUM_BLOCK;
    KCC_PARALLEL_FOR   /* elementwise: any split, same bits */
    for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t i0 = blk * KCC_SUM_BLOCK, i1 = n - i0 < KCC_SUM_BLOCK ? n : i0 + KCC_SUM_BLOCK;
        kcc_eltwise_sum_block_f32(a, b, c, d, n_in, i0, i1, mul, div, neg_slope, out);
    }
    return KCC_OK;
}
