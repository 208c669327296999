/* kcc_embedding_lookup_f32 on a table stored as int8 rows with one f32 scale each:
 * out[b,t,c] = q[id][c] * s[id], the product exact in f64 and rounded once to f32, so the rows
 * equal the FP32 table's. table (kcc/ops/embedding.py: pack_q8_rows) is [n_rows][row_words]
 * 32-bit words: the row's scale, then its n_chan int8 values padded to a whole word. Every id
 * is checked against [0, n_rows) before the first write. */
static int kcc_embedding_lookup_q8(const int32_t *KCC_RESTRICT ids, int64_t n_ids,
                                   const float *KCC_RESTRICT table, int64_t n_rows, int64_t row_words,
                                   int64_t n_chan, float *KCC_RESTRICT out)
{
    if (n_ids < 1 || n_chan < 1 || row_words != 1 + (n_chan + 3) / 4) return KCC_EDIMS;
    for (int64_t i = 0; i < n_ids; ++i)
        if (ids[i] < 0 || ids[i] >= n_rows) return KCC_EBADINPUT;
    for (int64_t i = 0; i < n_ids; ++i) {
        const float *row = table + (int64_t)ids[i] * row_words;
        const float s = row[0];
        const signed char *q = (const signed char *)(row + 1);
        float *y = out + i * n_chan;
        for (int64_t c = 0; c < n_chan; ++c) y[c] = (float)q[c] * s;
    }
    return KCC_OK;
}
