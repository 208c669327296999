/* kcc_bilstm_f32 with W_hh stored as int8 + one f32 scale per gate row (4H), dequantised in
 * registers. whq (kcc/ops/recurrence.py: pack_q8_transposed), 32-bit words:
 *   scales [4H] f32, then q [H][4H] int8 (W_hh transposed, as the f32 layout).
 * gate[j] += h[k] * ((float)q[k][j] * s[j]): the weight term is the FP32 path's weight (exact
 * product rounded once), so the recurrence gives kcc_bilstm_f32's bits; W_hh is a quarter of
 * the bytes each step streams (256 KiB at H = 256: it stays in L2). */
KCC_VECTOR_CLONES
static void kcc_lstm_hidden_q8(const float *KCC_RESTRICT whq, const float *KCC_RESTRICT h_prev, int64_t H,
                               float *KCC_RESTRICT gate)
{
    const int64_t G = 4 * H;
    const float *KCC_RESTRICT s = whq;
    const signed char *KCC_RESTRICT q = (const signed char *)(whq + G);
    KCC_FOR16(G, gate[j] = 0.0f;);
    for (int64_t k = 0; h_prev && k < H; ++k) {
        const float hk = h_prev[k];
        const signed char *KCC_RESTRICT qk = q + k * G;
        KCC_FOR16(G, gate[j] += hk * ((float)qk[j] * s[j]););
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
