/* kcc_linear_f32 on a weight stored as int8 + one f32 scale per output column, dequantised in
 * registers: out[m, n] = act(sum_k x[m, k] * (q[n][k] * s[n]) + bias[n]).
 *
 * wq is the packed int8 weight (kcc/ops/dense.py: pack_q8_panels), a run of 32-bit words:
 *   scales  [panels * NR] f32 (zero past n), then
 *   q       [panels][k][NR] int8 (the f32 panel layout of gemm_f32.c, one byte an entry).
 * The K chunk of a panel pair is expanded to f32 on the stack ((float)q * s: exact in f64 and
 * rounded once, so the same f32 weights the FP32 path stores) and handed to the same
 * micro-kernel in the same order: the result equals kcc_linear_f32 on the dequantised weight bit
 * for bit, at a quarter of the weight bytes. Each (panel pair, row block) tile expands its
 * chunks once per 64-row block: 1/64 of its multiply-adds when the block is full. */
KCC_VECTOR_CLONES
static void kcc_q8_expand_panels(const signed char *KCC_RESTRICT q, int64_t k, int64_t k0, int64_t kc,
                                 const float *KCC_RESTRICT s, int64_t n_panels, float *KCC_RESTRICT buf)
{
    for (int64_t p = 0; p < n_panels; ++p) {
        const signed char *KCC_RESTRICT qp = q + (p * k + k0) * KCC_GEMM_NR;
        const float *KCC_RESTRICT sp = s + p * KCC_GEMM_NR;
        float *KCC_RESTRICT bp = buf + p * KCC_GEMM_KC * KCC_GEMM_NR;
        for (int64_t kk = 0; kk < kc; ++kk)
            for (int64_t j = 0; j < KCC_GEMM_NR; ++j)
                bp[kk * KCC_GEMM_NR + j] = (float)qp[kk * KCC_GEMM_NR + j] * sp[j];
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
    const int64_t blocks = (rows + KCC_GEMM_MC - 1) / KCC_GEMM_MC;
    const float *scales = wq;
    const signed char *q = (const signed char *)(wq + panels * KCC_GEMM_NR);
    /* The loop nest of kcc_linear_f32 (its comments hold), B read from the expanded chunk. */
    KCC_PARALLEL_FOR_COLLAPSE2
    for (int64_t pp = 0; pp < pairs; ++pp) {
        for (int64_t mb = 0; mb < blocks; ++mb) {
            float buf[KCC_GEMM_NP * KCC_GEMM_KC * KCC_GEMM_NR];
            const int64_t m0 = mb * KCC_GEMM_MC;
            const int64_t m1 = rows - m0 < KCC_GEMM_MC ? rows : m0 + KCC_GEMM_MC;
            const int64_t j0 = pp * KCC_GEMM_NP * KCC_GEMM_NR;
            const int64_t nr = kcc_gemm_pair_cols(n, j0);
            const int64_t np = (nr + KCC_GEMM_NR - 1) / KCC_GEMM_NR;
            for (int64_t k0 = 0; k0 < k; k0 += KCC_GEMM_KC) {
                const int64_t kc = k - k0 < KCC_GEMM_KC ? k - k0 : KCC_GEMM_KC;
                kcc_q8_expand_panels(q + pp * KCC_GEMM_NP * k * KCC_GEMM_NR, k, k0, kc, scales + j0, np, buf);
                for (int64_t i = m0; i < m1; i += KCC_GEMM_MR)
                    kcc_gemm_tile_f32(x + i * k + k0, k, m1 - i < KCC_GEMM_MR ? m1 - i : KCC_GEMM_MR,
                                      buf, KCC_GEMM_KC * KCC_GEMM_NR, kc, out + i * n + j0, n, nr, k0 == 0);
            }
            kcc_linear_epilogue_f32(out + m0 * n + j0, n, m1 - m0, bias + j0, nr, act, slope);
        }
    }
    return KCC_OK;
}
