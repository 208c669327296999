/* out[m, n] = act(sum_k x[m, k] * W[n, k] + bias[n]) for a row-major x [rows, k].
 *
 * W arrives packed in column panels of KCC_GEMM_NR: wp[p][kk][j] = W[p*NR + j][kk] (zero past n),
 * so the micro-kernel streams one contiguous 16-float row of B per k step. Blocking: K in
 * chunks of KCC_GEMM_KC (the B chunk of a panel stays in L1), rows in chunks of KCC_GEMM_MC
 * (the A block stays in L2), register tiles of MR x NR with constant trip counts so the
 * compiler vectorises the inner loop at -O2 (SSE) and wider with -march=native.
 * Numerics: f32 throughout; each K chunk of 128 terms is summed in k order from zero (with FMA
 * where the target has it), and the chunk sums are added in order to the stored partial: at
 * K = 2048 (x, W ~ N(0, 1/K)) rms error vs f64 2.2e-7, torch's 2.6e-7 (64-term chunks: 1.8e-7,
 * but each tile call then stores and reloads its partial twice as often: 10-15% slower convs).
 * Then + bias and the activation (transcendentals evaluated in double, rounded once, on
 * kcc_exp_f64: see kcc_common.h).
 * act: 0 none, 1 gelu_new (tanh approximation), 2 leaky_relu(slope), 3 tanh, 4 sigmoid, 5 relu. */
#define KCC_GEMM_MC 64
#define KCC_ACT_COUNT 6

/* gelu_new (tanh form), 0.5 x (1 + tanh(y)) with y = sqrt(2/pi) (x + 0.044715 x^3), evaluated
 * in double as the equal x / (1 + e^(-2y)) (no cancellation where tanh(y) nears -1) and
 * rounded once. */
static inline float kcc_gelu_new_f32(float v)
{
    const double x = (double)v;
    return (float)(x / (1.0 + kcc_exp_f64(-1.5957691216057308 * (x + 0.044715 * x * x * x))));
}

/* rows x nr outputs at y (row stride ldy): + bias, then the activation; one KCC_FOR16 loop per
 * activation (branch-free bodies: they vectorise, in portable builds too, with clones). */
KCC_VECTOR_CLONES
static void kcc_linear_epilogue_f32(float *KCC_RESTRICT y, int64_t ldy, int64_t rows, const float *KCC_RESTRICT bias,
                                    int64_t nr, int64_t act, float slope)
{
    for (int64_t i = 0; i < rows; ++i) {
        float *KCC_RESTRICT yr = y + i * ldy;
        switch (act) {
        case 1: KCC_FOR16(nr, yr[j] = kcc_gelu_new_f32(yr[j] + bias[j]);); break;
        case 2: KCC_FOR16(nr, yr[j] = kcc_leaky_f32(yr[j] + bias[j], slope);); break;
        case 3: KCC_FOR16(nr, yr[j] = kcc_tanh_f32(yr[j] + bias[j]);); break;
        case 4: KCC_FOR16(nr, yr[j] = kcc_sigmoid_f32(yr[j] + bias[j]);); break;
        case 5: KCC_FOR16(nr, const float v = yr[j] + bias[j]; yr[j] = kcc_select_f32(v > 0.0f, v, 0.0f);); break;
        default: KCC_FOR16(nr, yr[j] += bias[j];); break;
        }
    }
}

static int kcc_linear_f32(const float *KCC_RESTRICT x, int64_t rows, int64_t k,
                          const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t n,
                          int64_t act, float slope, float *KCC_RESTRICT out)
{
    if (rows < 0 || k < 1 || n < 1) return KCC_EDIMS;
    if (act < 0 || act >= KCC_ACT_COUNT) return KCC_EBADINPUT;
    const int64_t panels = (n + KCC_GEMM_NR - 1) / KCC_GEMM_NR, pairs = (panels + KCC_GEMM_NP - 1) / KCC_GEMM_NP;
    const int64_t blocks = (rows + KCC_GEMM_MC - 1) / KCC_GEMM_MC;
    /* One parallel region per call (a barrier per K chunk costs a scheduler slice when another
     * process holds a core); each (panel, row block) tile runs its K chunks in order, so every
     * output's summation order is the same for any thread count. Panels outermost: the static
     * split then gives every thread a share of every row block (66 rows are blocks of 64 and 2;
     * row blocks outermost gave one thread the 64). */
    KCC_PARALLEL_FOR_COLLAPSE2
    for (int64_t pp = 0; pp < pairs; ++pp) {
        for (int64_t mb = 0; mb < blocks; ++mb) {
            const int64_t m0 = mb * KCC_GEMM_MC;
            const int64_t m1 = rows - m0 < KCC_GEMM_MC ? rows : m0 + KCC_GEMM_MC;
            const int64_t j0 = pp * KCC_GEMM_NP * KCC_GEMM_NR;
            const int64_t nr = kcc_gemm_pair_cols(n, j0);
            for (int64_t k0 = 0; k0 < k; k0 += KCC_GEMM_KC) {
                const int64_t kc = k - k0 < KCC_GEMM_KC ? k - k0 : KCC_GEMM_KC;
                const float *b = wp + (pp * KCC_GEMM_NP * k + k0) * KCC_GEMM_NR;
                for (int64_t i = m0; i < m1; i += KCC_GEMM_MR)
                    kcc_gemm_tile_f32(x + i * k + k0, k, m1 - i < KCC_GEMM_MR ? m1 - i : KCC_GEMM_MR,
                                      b, k * KCC_GEMM_NR, kc, out + i * n + j0, n, nr, k0 == 0);
            }
            kcc_linear_epilogue_f32(out + m0 * n + j0, n, m1 - m0, bias + j0, nr, act, slope);
        }
    }
    return KCC_OK;
}
