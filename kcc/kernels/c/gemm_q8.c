/* kcc_linear_f32 on a weight stored as int8 + one f32 scale per output column, dequantised in
 * registers: out[m, n] = act(sum_k x[m, k] * (q[n][k] * s[n]) + bias[n]).
 *
 * wq is the packed int8 weight (kcc/ops/dense.py: pack_q8_panels), a run of 32-bit words:
 *   scales  [panels * NR] f32 (zero past n), then
 *   q       [panels][k][NR] int8 (the f32 panel layout of gemm_f32.c, one byte an entry).
 * The K chunk of a panel pair is expanded to f32 on the stack ((float)q * s: exact in f64 and
 * rounded once, so the same f32 weights the FP32 path stores) and handed to the same
 * micro-kernel in the same order: the result equals kcc_linear_f32 on the dequantised weight bit
 * for bit, at a quarter of the weight bytes. Each chunk is expanded once per call: 32 products
 * per k against 32 multiply-adds per k and row. */

/* Each panel's chunk is kc rows of NR contiguous bytes: expanded in blocks of 64 lanes against
 * the scale row repeated 4 times (GCC widens 64 bytes to whole 512-bit float vectors; rows of 16
 * it converts 4 floats at a time). */
#define KCC_Q8_EXPAND 64

KCC_VECTOR_CLONES
static void kcc_q8_expand_panels(const signed char *KCC_RESTRICT q, int64_t k, int64_t k0, int64_t kc,
                                 const float *KCC_RESTRICT s, int64_t n_panels, float *KCC_RESTRICT buf)
{
    const int64_t len = kc * KCC_GEMM_NR, full = len / KCC_Q8_EXPAND * KCC_Q8_EXPAND;
    for (int64_t p = 0; p < n_panels; ++p) {
        const signed char *KCC_RESTRICT qp = q + (p * k + k0) * KCC_GEMM_NR;
        const float *KCC_RESTRICT sp = s + p * KCC_GEMM_NR;
        float *KCC_RESTRICT bp = buf + p * KCC_GEMM_KC * KCC_GEMM_NR;
        float s4[KCC_Q8_EXPAND];
        for (int64_t j = 0; j < KCC_Q8_EXPAND; ++j) s4[j] = sp[j % KCC_GEMM_NR];
        for (int64_t i0 = 0; i0 < full; i0 += KCC_Q8_EXPAND)
            for (int64_t j = 0; j < KCC_Q8_EXPAND; ++j)
                bp[i0 + j] = (float)qp[i0 + j] * s4[j];
        for (int64_t i = full; i < len; ++i)
            bp[i] = (float)qp[i] * sp[i % KCC_GEMM_NR];
    }
}

static int kcc_linear_q8(const float *KCC_RESTRICT x, int64_t rows, int64_t k,
                         const float *KCC_RESTRICT wq, const float *KCC_RESTRICT bias, int64_t n,
                         int64_t act, float slope, float *KCC_RESTRICT out)
{
    (void)kcc_linear_f32;   /* pasted for its epilogue */
    if (rows < 0 || k < 1 || n < 1) return KCC_EDIMS;
    if (act < 0 || act >= KCC_ACT_COUNT) return KCC_EBADINPUT;
    const int64_t panels = (n + KCC_GEMM_NR - 1) / KCC_GEMM_NR, pairs = (panels + KCC_GEMM_NP - 1) / KCC_GEMM_NP;
    const float *scales = wq;
    const signed char *q = (const signed char *)(wq + panels * KCC_GEMM_NR);
    /* Panel pairs outermost, each thread a whole pair: a K chunk is expanded once and every row
     * tile runs on it (rows in MR tiles, as kcc_linear_f32's 64-row blocks cut them), the chunks
     * in k order, so each output sums exactly as kcc_linear_f32 sums it. */
    KCC_PARALLEL_FOR
    for (int64_t pp = 0; pp < pairs; ++pp) {
        float buf[KCC_GEMM_NP * KCC_GEMM_KC * KCC_GEMM_NR];
        const int64_t j0 = pp * KCC_GEMM_NP * KCC_GEMM_NR;
        const int64_t nr = kcc_gemm_pair_cols(n, j0);
        const int64_t np = (nr + KCC_GEMM_NR - 1) / KCC_GEMM_NR;
        for (int64_t k0 = 0; k0 < k; k0 += KCC_GEMM_KC) {
            const int64_t kc = k - k0 < KCC_GEMM_KC ? k - k0 : KCC_GEMM_KC;
            kcc_q8_expand_panels(q + pp * KCC_GEMM_NP * k * KCC_GEMM_NR, k, k0, kc, scales + j0, np, buf);
            for (int64_t i = 0; i < rows; i += KCC_GEMM_MR)
                kcc_gemm_tile_f32(x + i * k + k0, k, rows - i < KCC_GEMM_MR ? rows - i : KCC_GEMM_MR,
                                  buf, KCC_GEMM_KC * KCC_GEMM_NR, kc, out + i * n + j0, n, nr, k0 == 0);
        }
        kcc_linear_epilogue_f32(out + j0, n, rows, bias + j0, nr, act, slope);
    }
    return KCC_OK;
}
