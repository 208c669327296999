/* y[i] = act((((a[i] + b[i]) + c[i]) + d[i]) * mul / div) over n elements, for n_in = 1..4
 * inputs (c, d are not read past n_in; the caller may pass a for them). Every step is an f32
 * operation in torch's order, so sums, `* rsqrt(2)` and `/ 3` match torch bit for bit; mul = 1
 * and div = 1 are exact identities, as is neg_slope = 1 (act: y >= 0 ? y : y * neg_slope). */
static int kcc_eltwise_sum_f32(const float *KCC_RESTRICT a, const float *KCC_RESTRICT b,
                               const float *KCC_RESTRICT c, const float *KCC_RESTRICT d, int64_t n_in,
                               int64_t n, float mul, float div, float neg_slope, float *KCC_RESTRICT out)
{
    if (n_in < 1 || n_in > 4 || n < 0) return KCC_EDIMS;
    if (!(div != 0.0f)) return KCC_EBADINPUT;
    KCC_PARALLEL_FOR   /* elementwise: any split, same bits */
    for (int64_t i = 0; i < n; ++i) {
        float y = a[i];
        if (n_in > 1) y += b[i];
        if (n_in > 2) y += c[i];
        if (n_in > 3) y += d[i];
        y = y * mul / div;
        out[i] = y >= 0.0f ? y : y * neg_slope;
    }
    return KCC_OK;
}
