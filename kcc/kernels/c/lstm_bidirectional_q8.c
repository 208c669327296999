/* kcc_bilstm_f32 with W_hh stored as int8 + one f32 scale per gate row (4H), dequantised in
 * registers. whq (kcc/ops/recurrence.py: pack_q8_transposed), 32-bit words:
 *   scales [4H] f32, then q [H][4H] int8 (W_hh transposed, as the f32 layout).
 * gate[j] += h[k] * ((float)q[k][j] * s[j]): the weight term is the FP32 path's weight (exact
 * product rounded once), so the recurrence gives kcc_bilstm_f32's bits; W_hh is a quarter of
 * the bytes each step streams (256 KiB at H = 256: it stays in L2). */
/* Blocks of 64 int8 lanes: GCC then widens bytes to whole 512-bit float vectors (16-lane blocks
 * it converts 4 floats at a time, 4.8x slower than the f32 step). */
#define KCC_Q8_BLOCK 64

KCC_VECTOR_CLONES
static void kcc_lstm_hidden_q8(const float *KCC_RESTRICT whq, const float *KCC_RESTRICT h_prev, int64_t H,
                               float *KCC_RESTRICT gate)
{
    const int64_t G = 4 * H;
    const float *KCC_RESTRICT s = whq;
    const signed char *KCC_RESTRICT q = (const signed char *)(whq + G);
    const int64_t full = G / KCC_Q8_BLOCK * KCC_Q8_BLOCK;
    /* Gate blocks outermost, each block's sums held in a local across k (the order of the terms
     * per gate is still k order from zero). */
    for (int64_t j0 = 0; j0 < full; j0 += KCC_Q8_BLOCK) {
        float acc[KCC_Q8_BLOCK] = {0};
        for (int64_t k = 0; h_prev && k < H; ++k) {
            const float hk = h_prev[k];
            const signed char *KCC_RESTRICT qk = q + k * G + j0;
            for (int64_t jj = 0; jj < KCC_Q8_BLOCK; ++jj)
                acc[jj] += hk * ((float)qk[jj] * s[j0 + jj]);
        }
        for (int64_t jj = 0; jj < KCC_Q8_BLOCK; ++jj) gate[j0 + jj] = acc[jj];
    }
    for (int64_t j = full; j < G; ++j) {
        float a = 0.0f;
        for (int64_t k = 0; h_prev && k < H; ++k) a += h_prev[k] * ((float)q[k * G + j] * s[j]);
        gate[j] = a;
    }
}

static int kcc_bilstm_q8(const float *KCC_RESTRICT pre, const int32_t *KCC_RESTRICT lengths,
                         int64_t n_seq, int64_t n_tok,
                         const float *KCC_RESTRICT whq_fwd, const float *KCC_RESTRICT bhh_fwd,
                         const float *KCC_RESTRICT whq_rev, const float *KCC_RESTRICT bhh_rev,
                         int64_t hidden, int64_t packed, float *KCC_RESTRICT out)
{
    (void)kcc_bilstm_f32;   /* pasted for kcc_bilstm_run */
    return kcc_bilstm_run(pre, lengths, n_seq, n_tok, whq_fwd, bhh_fwd, whq_rev, bhh_rev, hidden, packed, out,
                          kcc_lstm_hidden_q8);
}
