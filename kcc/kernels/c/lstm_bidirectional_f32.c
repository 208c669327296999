/* Bidirectional single-layer LSTM recurrence over precomputed input gates, PyTorch semantics
 * (gate order i, f, g, o; h0 = c0 = 0):
 *   a = (W_hh h_prev + b_hh) + pre_t;  c = f*c + i*g;  h = o*tanh(c)
 * pre: [2][n_seq*n_tok][4H] from kcc_lstm_input_gates_f32. whh_t: W_hh transposed to [H][4H]
 * per direction, so the hidden product is a contiguous axpy over the 4H gates per hidden unit
 * (vectorises; each gate is one f32 accumulator summed in k order, then + b_hh, then + pre).
 * Sigmoid and tanh are evaluated in double and rounded once (kcc_sigmoid_f32, kcc_tanh_f32 in
 * kcc_common.h: branch-free, so the gate loop vectorises; libm's were a call per element); the
 * cell update rounds each product and the sum to f32 as torch's cell does.
 * packed != 0: sequence b covers t < lengths[b], as pack_padded_sequence does (the reverse
 *   direction starts at lengths[b]-1) and rows t >= lengths[b] are written 0.
 * packed == 0: every sequence covers all n_tok rows and lengths is not read (may be NULL).
 * The running cell state and one step's gates live in fixed local arrays, so the hidden size
 * is bounded by KCC_LSTM_MAX_HIDDEN (checked). h_prev is read back from the previous output row.
 * The two directions (and the sequences) run in parallel, each exactly as it would alone. */
#define KCC_LSTM_MAX_HIDDEN 512

/* gate = W_hh h_prev for the f32 layout (h_prev NULL: the first step, gate = 0). Each gate is
 * one f32 accumulator summed in k order; the int8 layout (lstm_bidirectional_q8.c) gives the
 * same bits from the same weights. */
typedef void (*kcc_lstm_hidden_fn)(const float *KCC_RESTRICT w, const float *KCC_RESTRICT h_prev, int64_t H,
                                   float *KCC_RESTRICT gate);

KCC_VECTOR_CLONES
static void kcc_lstm_hidden_f32(const float *KCC_RESTRICT wt, const float *KCC_RESTRICT h_prev, int64_t H,
                                float *KCC_RESTRICT gate)
{
    const int64_t G = 4 * H;
    KCC_FOR16(G, gate[j] = 0.0f;);
    for (int64_t k = 0; h_prev && k < H; ++k) {
        const float hk = h_prev[k];
        const float *KCC_RESTRICT w = wt + k * G;
        KCC_FOR16(G, gate[j] += hk * w[j];);
    }
}

/* The rest of one step: gate = (gate + b_hh) + p, then the cell and h. Loops run through
 * KCC_FOR16, with AVX-512 / AVX2 clones; the arithmetic per element is the same in every block
 * and clone. */
KCC_VECTOR_CLONES
static void kcc_lstm_cell_f32(const float *KCC_RESTRICT bias, const float *KCC_RESTRICT p, int64_t H,
                              float *KCC_RESTRICT gate, float *KCC_RESTRICT cell, float *KCC_RESTRICT h)
{
    const int64_t G = 4 * H;
    KCC_FOR16(G, gate[j] = (gate[j] + bias[j]) + p[j];);
#define KCC_LSTM_CELL                                                                             \
    const float i_g = kcc_sigmoid_f32(gate[j]), f_g = kcc_sigmoid_f32(gate[H + j]);               \
    const float g_g = kcc_tanh_f32(gate[2 * H + j]), o_g = kcc_sigmoid_f32(gate[3 * H + j]);      \
    const float fc = f_g * cell[j], ig = i_g * g_g;                                               \
    cell[j] = fc + ig;                                                                            \
    h[j] = o_g * kcc_tanh_f32(cell[j]);
    KCC_FOR16(H, KCC_LSTM_CELL);
#undef KCC_LSTM_CELL
}

/* The recurrence for any W_hh layout: `hidden_fn` reads whh_fwd / whh_rev as that layout. */
static int kcc_bilstm_run(const float *KCC_RESTRICT pre, const int32_t *KCC_RESTRICT lengths,
                          int64_t n_seq, int64_t n_tok,
                          const float *KCC_RESTRICT whh_fwd, const float *KCC_RESTRICT bhh_fwd,
                          const float *KCC_RESTRICT whh_rev, const float *KCC_RESTRICT bhh_rev,
                          int64_t hidden, int64_t packed, float *KCC_RESTRICT out, kcc_lstm_hidden_fn hidden_fn)
{
    if (n_seq < 1 || n_tok < 1 || hidden < 1) return KCC_EDIMS;
    if (hidden > KCC_LSTM_MAX_HIDDEN) return KCC_EDIMS;
    if (packed) {
        if (!lengths) return KCC_ENULL;
        for (int64_t b = 0; b < n_seq; ++b)
            if (lengths[b] < 1 || lengths[b] > n_tok) return KCC_EBADINPUT;
    }
    const int64_t H = hidden, G = 4 * hidden, width = 2 * hidden;
    KCC_PARALLEL_FOR   /* (sequence, direction) pairs are independent: each writes its own half of the rows */
    for (int64_t bd = 0; bd < 2 * n_seq; ++bd) {
        const int64_t b = bd / 2, dir = bd % 2;
        const int64_t len = packed ? (int64_t)lengths[b] : n_tok;
        float *yb = out + b * n_tok * width;
        float gate[4 * KCC_LSTM_MAX_HIDDEN];
        float cell[KCC_LSTM_MAX_HIDDEN];
        const float *wt = dir ? whh_rev : whh_fwd;
        const float *bias = dir ? bhh_rev : bhh_fwd;
        const float *pb = pre + (dir * n_seq + b) * n_tok * G;
        const float *h_prev = NULL;
        for (int64_t j = 0; j < H; ++j) cell[j] = 0.0f;
        for (int64_t s = 0; s < len; ++s) {
            const int64_t t = dir ? len - 1 - s : s;
            float *h = yb + t * width + dir * H;
            hidden_fn(wt, h_prev, H, gate);
            kcc_lstm_cell_f32(bias, pb + t * G, H, gate, cell, h);
            h_prev = h;
        }
        for (int64_t t = len; t < n_tok; ++t)       /* this direction's half of the padded rows */
            for (int64_t j = 0; j < H; ++j) yb[t * width + dir * H + j] = 0.0f;
    }
    return KCC_OK;
}

static int kcc_bilstm_f32(const float *KCC_RESTRICT pre, const int32_t *KCC_RESTRICT lengths,
                          int64_t n_seq, int64_t n_tok,
                          const float *KCC_RESTRICT whh_fwd, const float *KCC_RESTRICT bhh_fwd,
                          const float *KCC_RESTRICT whh_rev, const float *KCC_RESTRICT bhh_rev,
                          int64_t hidden, int64_t packed, float *KCC_RESTRICT out)
{
    return kcc_bilstm_run(pre, lengths, n_seq, n_tok, whh_fwd, bhh_fwd, whh_rev, bhh_rev, hidden, packed, out,
                          kcc_lstm_hidden_f32);
}
