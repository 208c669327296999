/* out = x after checking every value is finite (NaN or inf -> KCC_EBADINPUT, nothing written).
 * Guards small inputs such as style vectors before they reach arithmetic. Exact copy. */
static int kcc_check_finite_copy_f32(const float *KCC_RESTRICT x, int64_t n, float *KCC_RESTRICT out)
{
    if (n < 1) return KCC_EDIMS;
    for (int64_t i = 0; i < n; ++i)
        if (!isfinite(x[i])) return KCC_EBADINPUT;
    for (int64_t i = 0; i < n; ++i) out[i] = x[i];
    return KCC_OK;
}
