/* out[m, n] = act(sum_k x[m, k] * W[n, k] + bias[n]) for a row-major x [rows, k].
 *
 * W arrives packed in column panels of KCC_GEMM_NR: wp[p][kk][j] = W[p*NR + j][kk] (zero past n),
 * so the micro-kernel streams one contiguous 16-float row of B per k step. Blocking: K in
 * chunks of KCC_GEMM_KC (the B chunk of a panel stays in L1), rows in chunks of KCC_GEMM_MC
 * (the A block stays in L2), register tiles of MR x NR with constant trip counts so the
 * compiler vectorises the inner loop at -O2 (SSE) and wider with -march=native.
 * Numerics: every out[m, n] is one f32 accumulator summed in k order 0..k-1 (partial sums are
 * stored and reloaded between K chunks, so blocking does not change the order), then bias is
 * added and the activation applied (transcendentals evaluated in double, rounded once).
 * act: 0 none, 1 gelu_new (tanh approximation), 2 leaky_relu(slope), 3 tanh, 4 sigmoid, 5 relu. */
#define KCC_GEMM_NR 16
#define KCC_GEMM_MR 4
#define KCC_GEMM_KC 256
#define KCC_GEMM_MC 64
#define KCC_ACT_COUNT 6

static void kcc_gemm_tile_f32(const float *KCC_RESTRICT a, int64_t lda, int64_t mr,
                              const float *KCC_RESTRICT b, int64_t kc,
                              float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int first)
{
    float acc[KCC_GEMM_MR][KCC_GEMM_NR];
    const float *ar[KCC_GEMM_MR];
    /* Rows past mr repeat the last real row: no branch in the inner loop, results discarded. */
    for (int r = 0; r < KCC_GEMM_MR; ++r) ar[r] = a + (r < mr ? r : mr - 1) * lda;
    for (int r = 0; r < KCC_GEMM_MR; ++r)
        for (int j = 0; j < KCC_GEMM_NR; ++j)
            acc[r][j] = (first || r >= mr || j >= nr) ? 0.0f : c[r * ldc + j];
    for (int64_t p = 0; p < kc; ++p) {
        const float *bp = b + p * KCC_GEMM_NR;
        for (int r = 0; r < KCC_GEMM_MR; ++r) {
            const float av = ar[r][p];
            for (int j = 0; j < KCC_GEMM_NR; ++j) acc[r][j] += av * bp[j];
        }
    }
    for (int r = 0; r < mr; ++r)
        for (int j = 0; j < nr; ++j) c[r * ldc + j] = acc[r][j];
}

static float kcc_activate_f32(float v, int64_t act, float slope)
{
    const double x = (double)v;
    switch (act) {
    case 1: return (float)(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
    case 2: return v >= 0.0f ? v : v * slope;
    case 3: return (float)tanh(x);
    case 4: return (float)(1.0 / (1.0 + exp(-x)));
    case 5: return v > 0.0f ? v : 0.0f;
    default: return v;
    }
}

static int kcc_linear_f32(const float *KCC_RESTRICT x, int64_t rows, int64_t k,
                          const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t n,
                          int64_t act, float slope, float *KCC_RESTRICT out)
{
    if (rows < 0 || k < 1 || n < 1) return KCC_EDIMS;
    if (act < 0 || act >= KCC_ACT_COUNT) return KCC_EBADINPUT;
    const int64_t panels = (n + KCC_GEMM_NR - 1) / KCC_GEMM_NR;
    for (int64_t k0 = 0; k0 < k; k0 += KCC_GEMM_KC) {
        const int64_t kc = k - k0 < KCC_GEMM_KC ? k - k0 : KCC_GEMM_KC;
        for (int64_t m0 = 0; m0 < rows; m0 += KCC_GEMM_MC) {
            const int64_t m1 = rows - m0 < KCC_GEMM_MC ? rows : m0 + KCC_GEMM_MC;
            for (int64_t p = 0; p < panels; ++p) {
                const int64_t nr = n - p * KCC_GEMM_NR < KCC_GEMM_NR ? n - p * KCC_GEMM_NR : KCC_GEMM_NR;
                const float *b = wp + (p * k + k0) * KCC_GEMM_NR;
                for (int64_t i = m0; i < m1; i += KCC_GEMM_MR)
                    kcc_gemm_tile_f32(x + i * k + k0, k, m1 - i < KCC_GEMM_MR ? m1 - i : KCC_GEMM_MR,
                                      b, kc, out + i * n + p * KCC_GEMM_NR, n, nr, k0 == 0);
            }
        }
    }
    for (int64_t i = 0; i < rows; ++i) {
        float *y = out + i * n;
        if (act == 0) {
            for (int64_t j = 0; j < n; ++j) y[j] += bias[j];
        } else {
            for (int64_t j = 0; j < n; ++j) y[j] = kcc_activate_f32(y[j] + bias[j], act, slope);
        }
    }
    return KCC_OK;
}
