/* Input-to-gate products of a bidirectional LSTM for every timestep at once, before the
 * recurrence: gates[d][row][:] = x[row] @ W_ih[d]^T + b_ih[d], d = 0 forward, 1 reverse,
 * rows = sequences * tokens. One blocked GEMM pass per direction over all rows (gemm_f32.c,
 * W_ih packed in its 16-column panels); the output is direction-major so each pass writes a
 * contiguous [rows, 4H] block. b_hh is added in the recurrence, as torch adds it. */
static int kcc_lstm_input_gates_f32(const float *KCC_RESTRICT x, int64_t rows, int64_t k,
                                    const float *KCC_RESTRICT wp_fwd, const float *KCC_RESTRICT b_fwd,
                                    const float *KCC_RESTRICT wp_rev, const float *KCC_RESTRICT b_rev,
                                    int64_t n_gate, float *KCC_RESTRICT gates)
{
    if (rows < 1 || k < 1 || n_gate < 4 || n_gate % 4) return KCC_EDIMS;
    const int st = kcc_linear_f32(x, rows, k, wp_fwd, b_fwd, n_gate, 0, 0.0f, gates);
    if (st) return st;
    return kcc_linear_f32(x, rows, k, wp_rev, b_rev, n_gate, 0, 0.0f, gates + rows * n_gate);
}
