/* out[b,t,:] = table[ids[b,t], :]. Every id is checked against [0, n_rows) before the first
 * write, so a bad id leaves out untouched. Exact copies. */
static int kcc_embedding_lookup_f32(const int32_t *KCC_RESTRICT ids, int64_t n_ids,
                                    const float *KCC_RESTRICT table, int64_t n_rows, int64_t n_chan,
                                    float *KCC_RESTRICT out)
{
    if (n_ids < 1 || n_chan < 1) return KCC_EDIMS;
    for (int64_t i = 0; i < n_ids; ++i)
        if (ids[i] < 0 || ids[i] >= n_rows) return KCC_EBADINPUT;
    for (int64_t i = 0; i < n_ids; ++i) {
        const float *src = table + (int64_t)ids[i] * n_chan;
        float *y = out + i * n_chan;
        for (int64_t c = 0; c < n_chan; ++c) y[c] = src[c];
    }
    return KCC_OK;
}
