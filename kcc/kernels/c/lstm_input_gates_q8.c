/* kcc_lstm_input_gates_f32 with W_ih stored as int8 + per-gate-row scales (kcc_linear_q8's
 * packed layout, one per direction): the same two GEMM passes, the same bits. */
static int kcc_lstm_input_gates_q8(const float *KCC_RESTRICT x, int64_t rows, int64_t k,
                                   const float *KCC_RESTRICT wq_fwd, const float *KCC_RESTRICT b_fwd,
                                   const float *KCC_RESTRICT wq_rev, const float *KCC_RESTRICT b_rev,
                                   int64_t n_gate, float *KCC_RESTRICT gates)
{
    if (rows < 1 || k < 1 || n_gate < 4 || n_gate % 4) return KCC_EDIMS;
    const int st = kcc_linear_q8(x, rows, k, wq_fwd, b_fwd, n_gate, 0, 0.0f, gates);
    if (st) return st;
    return kcc_linear_q8(x, rows, k, wq_rev, b_rev, n_gate, 0, 0.0f, gates + rows * n_gate);
}
