/* The GEMM micro-kernel every dense primitive runs on (linear, conv GEMM / polyphase paths,
 * the DFT conv's slot GEMMs, the fused norm-conv, attention's score and value products):
 * c [mr, nr] (=, or += unless first) = a [mr, kc] (row stride lda) x B packed in column panels
 * of KCC_GEMM_NR, one contiguous 16-float row per k step. Numerics: each output is one chain of
 * multiply-adds in k order from zero (FMA where the target has it), whatever the tile, so every
 * blocking and thread split gives the same bits; callers chunk K by KCC_GEMM_KC and add the
 * chunk sums in order. */
#define KCC_GEMM_NR 16     /* panel width: PANEL in kcc/ops/dense.py */
#define KCC_GEMM_MR 8      /* rows per call: an 8-row register tile where the target has AVX-512, else 4 + 4 */
#define KCC_GEMM_KC 128    /* K chunk: each chunk sums from zero, then adds to the stored partial */
#define KCC_GEMM_NP 2      /* panels per call: the 8 x 2 tile */
#define KCC_GEMM_NH 8      /* lanes per half panel: one AVX2 register (the tile4h rows) */
#define KCC_GEMM_NQ 4      /* lanes per quarter panel: one SSE2 register (the tile2q rows) */

/* Register tiles: named accumulator rows (not an [MR][NR] array: compilers keep them in vector
 * registers); rows past mr alias row 0 (no branch in the loop, results discarded). Every output
 * is the same k-ordered chain of multiply-adds whatever the tile height, so the 8- and 4-row
 * tiles give identical bits. */
#define KCC_GEMM_ROW_PTR(r) const float *a##r = a + (mr > (r) ? (r) : 0) * lda

/* c [mr, nr] (=, or += unless first) the tile's accumulator rows; a full panel's row as one
 * constant-width loop per case (a runtime-width loop with the test inside stayed scalar: 14% of
 * the 8 x 2 tile's time in a K 3 conv, perf). */
static inline void kcc_gemm_store_row(const float *KCC_RESTRICT acc, int64_t nr, int first, float *KCC_RESTRICT c)
{
    if (nr == KCC_GEMM_NR && first)
        for (int64_t j = 0; j < KCC_GEMM_NR; ++j) c[j] = acc[j];
    else if (nr == KCC_GEMM_NR)
        for (int64_t j = 0; j < KCC_GEMM_NR; ++j) c[j] += acc[j];
    else
        for (int64_t j = 0; j < nr; ++j) c[j] = first ? acc[j] : c[j] + acc[j];
}

static inline void kcc_gemm_store(float *const *rows, int64_t mr, int64_t nr, int first, float *KCC_RESTRICT c,
                                  int64_t ldc)
{
    for (int64_t r = 0; r < mr; ++r) kcc_gemm_store_row(rows[r], nr, first, c + r * ldc);
}

/* The same for rows kept as four quarter-panel accumulators (row r's lanes 4s.. in q[4r + s]). */
static inline void kcc_gemm_store_quarters(float *const *q, int64_t mr, int64_t nr, int first, float *KCC_RESTRICT c,
                                           int64_t ldc)
{
    for (int64_t r = 0; r < mr; ++r) {
        float row[KCC_GEMM_NR];
        for (int s = 0; s < KCC_GEMM_NR / KCC_GEMM_NQ; ++s)
            for (int j = 0; j < KCC_GEMM_NQ; ++j) row[s * KCC_GEMM_NQ + j] = q[4 * r + s][j];
        kcc_gemm_store_row(row, nr, first, c + r * ldc);
    }
}

/* The same for rows kept as two half-panel accumulators (lanes 0..NH-1 in lo[r], the rest in hi[r]):
 * a full panel's row straight from its halves, one constant-width loop per half and case. */
static inline void kcc_gemm_store_halves(float *const *lo, float *const *hi, int64_t mr, int64_t nr, int first,
                                         float *KCC_RESTRICT c, int64_t ldc)
{
    for (int64_t r = 0; r < mr; ++r) {
        float *KCC_RESTRICT cr = c + r * ldc;
        const float *KCC_RESTRICT l = lo[r], *KCC_RESTRICT h = hi[r];
        if (nr == KCC_GEMM_NR && first) {
            for (int j = 0; j < KCC_GEMM_NH; ++j) cr[j] = l[j];
            for (int j = 0; j < KCC_GEMM_NH; ++j) cr[KCC_GEMM_NH + j] = h[j];
        } else if (nr == KCC_GEMM_NR) {
            for (int j = 0; j < KCC_GEMM_NH; ++j) cr[j] += l[j];
            for (int j = 0; j < KCC_GEMM_NH; ++j) cr[KCC_GEMM_NH + j] += h[j];
        } else {
            float row[KCC_GEMM_NR];
            for (int j = 0; j < KCC_GEMM_NH; ++j) {
                row[j] = l[j];
                row[KCC_GEMM_NH + j] = h[j];
            }
            kcc_gemm_store_row(row, nr, first, cr);
        }
    }
}

/* The three register tiles, defined once and instantiated per multiply-add (KCC_GEMM_TILES
 * below): _f32 with KCC_MADD (fmaf where the target has FMA, else a rounded multiply then add)
 * and, in portable builds, _fma_f32 with __builtin_fmaf, taken when the CPU has FMA (its AVX2 /
 * AVX-512 clones inline it; without FMA its libm call would be slow): a portable build's tiles
 * then run the same fused chains as a native build's. Each output's chain of multiply-adds is the
 * same in every tile, so the tiles give identical bits.
 * tile4h (AVX2): the tile4 with each row's 16 lanes in two 8-lane halves. With 8-lane registers
 * GCC keeps a 16-lane row array in memory (its loop runs twice: load, FMA, store per step: 31
 * GFLOP/s on one Zen 4 core, forced avx2fma), each half is one register for the whole K loop:
 * eight accumulators, two B loads and four broadcasts per eight FMAs.
 * tile2q (baseline x86-64, SSE2: 16 registers of 4 lanes; also off x86, e.g. aarch64's NEON): two
 * rows, each as four 4-lane quarters: eight accumulators, four B loads and two broadcasts per eight
 * multiply-adds.
 * tile8: eight independent accumulator chains hide the multiply-add latency and each B load
 * feeds eight of them. With AVX2's 16 vector registers its 16 accumulators would spill: only
 * AVX-512 targets take it.
 * tile8x2 (eight rows by two panels): sixteen accumulators, each A broadcast feeding two of them;
 * twice the tile8's latency slack (its 8 chains just cover 2 FMAs/cycle x 4 cycles) and half its
 * broadcasts per multiply-add. On the EPYC (Zen 5), L1-resident, one core: 196 vs 152 GFLOP/s
 * (peak ~247, bench/fma_peak.c). b2 is the second panel's chunk; columns NR.. of c come from it. */
#define KCC_GEMM_TILES(SUFFIX, MADD)                                                            \
KCC_VECTOR_CLONES                                                                                \
static void kcc_gemm_tile4##SUFFIX(const float *KCC_RESTRICT a, int64_t lda, int64_t mr,         \
                               const float *KCC_RESTRICT b, int64_t kc,                          \
                               float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int first)        \
{                                                                                                \
    float c0[KCC_GEMM_NR] = {0}, c1[KCC_GEMM_NR] = {0}, c2[KCC_GEMM_NR] = {0}, c3[KCC_GEMM_NR] = {0}; \
    KCC_GEMM_ROW_PTR(0); KCC_GEMM_ROW_PTR(1); KCC_GEMM_ROW_PTR(2); KCC_GEMM_ROW_PTR(3);          \
    for (int64_t p = 0; p < kc; ++p) {                                                           \
        const float *bp = b + p * KCC_GEMM_NR;                                                   \
        const float v0 = a0[p], v1 = a1[p], v2 = a2[p], v3 = a3[p];                              \
        for (int j = 0; j < KCC_GEMM_NR; ++j) {                                                  \
            c0[j] = MADD(v0, bp[j], c0[j]);                                                      \
            c1[j] = MADD(v1, bp[j], c1[j]);                                                      \
            c2[j] = MADD(v2, bp[j], c2[j]);                                                      \
            c3[j] = MADD(v3, bp[j], c3[j]);                                                      \
        }                                                                                        \
    }                                                                                            \
    float *rows[4] = {c0, c1, c2, c3};                                                           \
    kcc_gemm_store(rows, mr, nr, first, c, ldc);                                                 \
}                                                                                                \
                                                                                                 \
KCC_VECTOR_CLONES                                                                                \
static void kcc_gemm_tile4h##SUFFIX(const float *KCC_RESTRICT a, int64_t lda, int64_t mr,        \
                                const float *KCC_RESTRICT b, int64_t kc,                         \
                                float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int first)       \
{                                                                                                \
    float c0[KCC_GEMM_NH] = {0}, c1[KCC_GEMM_NH] = {0}, c2[KCC_GEMM_NH] = {0}, c3[KCC_GEMM_NH] = {0}; \
    float e0[KCC_GEMM_NH] = {0}, e1[KCC_GEMM_NH] = {0}, e2[KCC_GEMM_NH] = {0}, e3[KCC_GEMM_NH] = {0}; \
    KCC_GEMM_ROW_PTR(0); KCC_GEMM_ROW_PTR(1); KCC_GEMM_ROW_PTR(2); KCC_GEMM_ROW_PTR(3);          \
    for (int64_t p = 0; p < kc; ++p) {                                                           \
        const float *bp = b + p * KCC_GEMM_NR, *bq = bp + KCC_GEMM_NH;                           \
        const float v0 = a0[p], v1 = a1[p], v2 = a2[p], v3 = a3[p];                              \
        for (int j = 0; j < KCC_GEMM_NH; ++j) {                                                  \
            c0[j] = MADD(v0, bp[j], c0[j]);                                                      \
            c1[j] = MADD(v1, bp[j], c1[j]);                                                      \
            c2[j] = MADD(v2, bp[j], c2[j]);                                                      \
            c3[j] = MADD(v3, bp[j], c3[j]);                                                      \
        }                                                                                        \
        for (int j = 0; j < KCC_GEMM_NH; ++j) {                                                  \
            e0[j] = MADD(v0, bq[j], e0[j]);                                                      \
            e1[j] = MADD(v1, bq[j], e1[j]);                                                      \
            e2[j] = MADD(v2, bq[j], e2[j]);                                                      \
            e3[j] = MADD(v3, bq[j], e3[j]);                                                      \
        }                                                                                        \
    }                                                                                            \
    float *lo[4] = {c0, c1, c2, c3}, *hi[4] = {e0, e1, e2, e3};                                  \
    kcc_gemm_store_halves(lo, hi, mr, nr, first, c, ldc);                                        \
}                                                                                                \
                                                                                                 \
static void kcc_gemm_tile2q##SUFFIX(const float *KCC_RESTRICT a, int64_t lda, int64_t mr,        \
                                const float *KCC_RESTRICT b, int64_t kc,                         \
                                float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int first)       \
{                                                                                                \
    float c0[KCC_GEMM_NQ] = {0}, c1[KCC_GEMM_NQ] = {0}, c2[KCC_GEMM_NQ] = {0}, c3[KCC_GEMM_NQ] = {0}; \
    float d0[KCC_GEMM_NQ] = {0}, d1[KCC_GEMM_NQ] = {0}, d2[KCC_GEMM_NQ] = {0}, d3[KCC_GEMM_NQ] = {0}; \
    KCC_GEMM_ROW_PTR(0); KCC_GEMM_ROW_PTR(1);                                                    \
    for (int64_t p = 0; p < kc; ++p) {                                                           \
        const float *bp = b + p * KCC_GEMM_NR;                                                   \
        const float v0 = a0[p], v1 = a1[p];                                                      \
        for (int j = 0; j < KCC_GEMM_NQ; ++j) {                                                  \
            c0[j] = MADD(v0, bp[j], c0[j]);                                                      \
            d0[j] = MADD(v1, bp[j], d0[j]);                                                      \
        }                                                                                        \
        for (int j = 0; j < KCC_GEMM_NQ; ++j) {                                                  \
            c1[j] = MADD(v0, bp[KCC_GEMM_NQ + j], c1[j]);                                        \
            d1[j] = MADD(v1, bp[KCC_GEMM_NQ + j], d1[j]);                                        \
        }                                                                                        \
        for (int j = 0; j < KCC_GEMM_NQ; ++j) {                                                  \
            c2[j] = MADD(v0, bp[2 * KCC_GEMM_NQ + j], c2[j]);                                    \
            d2[j] = MADD(v1, bp[2 * KCC_GEMM_NQ + j], d2[j]);                                    \
        }                                                                                        \
        for (int j = 0; j < KCC_GEMM_NQ; ++j) {                                                  \
            c3[j] = MADD(v0, bp[3 * KCC_GEMM_NQ + j], c3[j]);                                    \
            d3[j] = MADD(v1, bp[3 * KCC_GEMM_NQ + j], d3[j]);                                    \
        }                                                                                        \
    }                                                                                            \
    float *q[8] = {c0, c1, c2, c3, d0, d1, d2, d3};                                              \
    kcc_gemm_store_quarters(q, mr, nr, first, c, ldc);                                           \
}                                                                                                \
                                                                                                 \
KCC_VECTOR_CLONES                                                                                \
static void kcc_gemm_tile8##SUFFIX(const float *KCC_RESTRICT a, int64_t lda, int64_t mr,         \
                               const float *KCC_RESTRICT b, int64_t kc,                          \
                               float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int first)        \
{                                                                                                \
    float c0[KCC_GEMM_NR] = {0}, c1[KCC_GEMM_NR] = {0}, c2[KCC_GEMM_NR] = {0}, c3[KCC_GEMM_NR] = {0}; \
    float c4[KCC_GEMM_NR] = {0}, c5[KCC_GEMM_NR] = {0}, c6[KCC_GEMM_NR] = {0}, c7[KCC_GEMM_NR] = {0}; \
    KCC_GEMM_ROW_PTR(0); KCC_GEMM_ROW_PTR(1); KCC_GEMM_ROW_PTR(2); KCC_GEMM_ROW_PTR(3);          \
    KCC_GEMM_ROW_PTR(4); KCC_GEMM_ROW_PTR(5); KCC_GEMM_ROW_PTR(6); KCC_GEMM_ROW_PTR(7);          \
    for (int64_t p = 0; p < kc; ++p) {                                                           \
        const float *bp = b + p * KCC_GEMM_NR;                                                   \
        for (int j = 0; j < KCC_GEMM_NR; ++j) {                                                  \
            c0[j] = MADD(a0[p], bp[j], c0[j]);                                                   \
            c1[j] = MADD(a1[p], bp[j], c1[j]);                                                   \
            c2[j] = MADD(a2[p], bp[j], c2[j]);                                                   \
            c3[j] = MADD(a3[p], bp[j], c3[j]);                                                   \
            c4[j] = MADD(a4[p], bp[j], c4[j]);                                                   \
            c5[j] = MADD(a5[p], bp[j], c5[j]);                                                   \
            c6[j] = MADD(a6[p], bp[j], c6[j]);                                                   \
            c7[j] = MADD(a7[p], bp[j], c7[j]);                                                   \
        }                                                                                        \
    }                                                                                            \
    float *rows[8] = {c0, c1, c2, c3, c4, c5, c6, c7};                                           \
    kcc_gemm_store(rows, mr, nr, first, c, ldc);                                                 \
}                                                                                                \
                                                                                                 \
KCC_VECTOR_CLONES                                                                                \
static void kcc_gemm_tile8x2##SUFFIX(const float *KCC_RESTRICT a, int64_t lda, int64_t mr,       \
                                 const float *KCC_RESTRICT b, const float *KCC_RESTRICT b2, int64_t kc, \
                                 float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int first)      \
{                                                                                                \
    float c0[KCC_GEMM_NR] = {0}, c1[KCC_GEMM_NR] = {0}, c2[KCC_GEMM_NR] = {0}, c3[KCC_GEMM_NR] = {0}; \
    float c4[KCC_GEMM_NR] = {0}, c5[KCC_GEMM_NR] = {0}, c6[KCC_GEMM_NR] = {0}, c7[KCC_GEMM_NR] = {0}; \
    float d0[KCC_GEMM_NR] = {0}, d1[KCC_GEMM_NR] = {0}, d2[KCC_GEMM_NR] = {0}, d3[KCC_GEMM_NR] = {0}; \
    float d4[KCC_GEMM_NR] = {0}, d5[KCC_GEMM_NR] = {0}, d6[KCC_GEMM_NR] = {0}, d7[KCC_GEMM_NR] = {0}; \
    KCC_GEMM_ROW_PTR(0); KCC_GEMM_ROW_PTR(1); KCC_GEMM_ROW_PTR(2); KCC_GEMM_ROW_PTR(3);          \
    KCC_GEMM_ROW_PTR(4); KCC_GEMM_ROW_PTR(5); KCC_GEMM_ROW_PTR(6); KCC_GEMM_ROW_PTR(7);          \
    for (int64_t p = 0; p < kc; ++p) {                                                           \
        const float *bp = b + p * KCC_GEMM_NR, *bq = b2 + p * KCC_GEMM_NR;                       \
        for (int j = 0; j < KCC_GEMM_NR; ++j) {                                                  \
            c0[j] = MADD(a0[p], bp[j], c0[j]);                                                   \
            c1[j] = MADD(a1[p], bp[j], c1[j]);                                                   \
            c2[j] = MADD(a2[p], bp[j], c2[j]);                                                   \
            c3[j] = MADD(a3[p], bp[j], c3[j]);                                                   \
            c4[j] = MADD(a4[p], bp[j], c4[j]);                                                   \
            c5[j] = MADD(a5[p], bp[j], c5[j]);                                                   \
            c6[j] = MADD(a6[p], bp[j], c6[j]);                                                   \
            c7[j] = MADD(a7[p], bp[j], c7[j]);                                                   \
            d0[j] = MADD(a0[p], bq[j], d0[j]);                                                   \
            d1[j] = MADD(a1[p], bq[j], d1[j]);                                                   \
            d2[j] = MADD(a2[p], bq[j], d2[j]);                                                   \
            d3[j] = MADD(a3[p], bq[j], d3[j]);                                                   \
            d4[j] = MADD(a4[p], bq[j], d4[j]);                                                   \
            d5[j] = MADD(a5[p], bq[j], d5[j]);                                                   \
            d6[j] = MADD(a6[p], bq[j], d6[j]);                                                   \
            d7[j] = MADD(a7[p], bq[j], d7[j]);                                                   \
        }                                                                                        \
    }                                                                                            \
    float *rows[8] = {c0, c1, c2, c3, c4, c5, c6, c7}, *rows2[8] = {d0, d1, d2, d3, d4, d5, d6, d7}; \
    kcc_gemm_store(rows, mr, KCC_GEMM_NR, first, c, ldc);                                        \
    kcc_gemm_store(rows2, mr, nr - KCC_GEMM_NR, first, c + KCC_GEMM_NR, ldc);                    \
}

/* The 8-row tiles need AVX-512's 32 registers; AVX2 (16 registers of 8 lanes) takes the half-panel
 * tile; the fused twins ride with the v3 / v4 clones. */
static int kcc_gemm_has_avx512(void)
{
    return kcc_isa_level_now() == 3;
}

static int kcc_gemm_has_avx2(void)
{
    const int level = kcc_isa_level_now();
    return level == 1 || level == 2;
}

#if KCC_FMA_VERSIONS
static int kcc_gemm_has_fma(void)
{
    return kcc_isa_level_now() >= 2;
}
#endif

/* kcc_gemm_dispatch##SUFFIX: c [mr, nr] with one instantiation's tiles: the 8 x 2 tile for two
 * panels on AVX-512, else per panel the 8-row tile (AVX-512) or 4-row ones (half-panel rows on AVX2). */
#define KCC_GEMM_DISPATCH(SUFFIX)                                                                 \
static void kcc_gemm_dispatch##SUFFIX(const float *KCC_RESTRICT a, int64_t lda, int64_t mr,       \
                                      const float *KCC_RESTRICT b, int64_t b_step, int64_t kc,    \
                                      float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int first)  \
{                                                                                                 \
    const int wide = mr > 4 && kcc_gemm_has_avx512(), halves = kcc_gemm_has_avx2();               \
    const int quarters = kcc_isa_level_now() < 1;   /* SSE2, and off x86 (NEON: 4-lane registers) */ \
    if (wide && nr > KCC_GEMM_NR) {                                                               \
        kcc_gemm_tile8x2##SUFFIX(a, lda, mr, b, b + b_step, kc, c, ldc, nr, first);               \
        return;                                                                                   \
    }                                                                                             \
    for (int64_t j0 = 0; j0 < nr; j0 += KCC_GEMM_NR, b += b_step, c += KCC_GEMM_NR) {             \
        const int64_t nj = nr - j0 < KCC_GEMM_NR ? nr - j0 : KCC_GEMM_NR;                         \
        if (wide) {                                                                               \
            kcc_gemm_tile8##SUFFIX(a, lda, mr, b, kc, c, ldc, nj, first);                         \
            continue;                                                                             \
        }                                                                                         \
        for (int64_t i = 0; quarters && i < mr; i += 2)                                           \
            kcc_gemm_tile2q##SUFFIX(a + i * lda, lda, mr - i < 2 ? mr - i : 2, b, kc, c + i * ldc, ldc, nj, first); \
        for (int64_t i = 0; !quarters && i < mr; i += 4) {                                        \
            const int64_t m4 = mr - i < 4 ? mr - i : 4;                                           \
            if (halves) kcc_gemm_tile4h##SUFFIX(a + i * lda, lda, m4, b, kc, c + i * ldc, ldc, nj, first); \
            else kcc_gemm_tile4##SUFFIX(a + i * lda, lda, m4, b, kc, c + i * ldc, ldc, nj, first); \
        }                                                                                         \
    }                                                                                             \
}

KCC_GEMM_TILES(_f32, KCC_MADD)
KCC_GEMM_DISPATCH(_f32)
#if KCC_FMA_VERSIONS
KCC_GEMM_TILES(_fma_f32, __builtin_fmaf)
KCC_GEMM_DISPATCH(_fma_f32)
#endif

/* c [mr, nr] (=, or += unless first) a [mr, kc] (row stride lda) x packed panel chunks b [kc, NR]:
 * mr <= KCC_GEMM_MR, nr <= KCC_GEMM_NP * NR; columns past NR come from the next panel's chunk at
 * b + b_step. */
static void kcc_gemm_tile_f32(const float *KCC_RESTRICT a, int64_t lda, int64_t mr,
                              const float *KCC_RESTRICT b, int64_t b_step, int64_t kc,
                              float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int64_t first)
{
#if KCC_FMA_VERSIONS
    if (kcc_gemm_has_fma()) {
        kcc_gemm_dispatch_fma_f32(a, lda, mr, b, b_step, kc, c, ldc, nr, first);
        return;
    }
#endif
    kcc_gemm_dispatch_f32(a, lda, mr, b, b_step, kc, c, ldc, nr, first);
}

/* Columns of the panel pair that starts at column j0 of an n-column output: what one
 * kcc_gemm_tile_f32 call covers. */
static inline int64_t kcc_gemm_pair_cols(int64_t n, int64_t j0)
{
    return n - j0 < KCC_GEMM_NP * KCC_GEMM_NR ? n - j0 : KCC_GEMM_NP * KCC_GEMM_NR;
}

/* c [rows, n] (row stride ldc; =, or += unless first) = a [rows, k] (row stride lda) x B packed
 * in column panels (panel stride k * NR, zeros past n), in (panel pair, KC chunk, row tile)
 * order: each B chunk stays in L1 across the row tiles. The chunk sums add in order. */
static inline void kcc_gemm_packed_f32(const float *KCC_RESTRICT a, int64_t lda, int64_t rows,
                                       const float *KCC_RESTRICT b, int64_t k, int64_t n, float *KCC_RESTRICT c,
                                       int64_t ldc, int64_t first)
{
    for (int64_t j0 = 0; j0 < n; j0 += KCC_GEMM_NP * KCC_GEMM_NR)
        for (int64_t k0 = 0; k0 < k; k0 += KCC_GEMM_KC) {
            const int64_t kc = k - k0 < KCC_GEMM_KC ? k - k0 : KCC_GEMM_KC;
            for (int64_t i = 0; i < rows; i += KCC_GEMM_MR)
                kcc_gemm_tile_f32(a + i * lda + k0, lda, rows - i < KCC_GEMM_MR ? rows - i : KCC_GEMM_MR,
                                  b + j0 * k + k0 * KCC_GEMM_NR, k * KCC_GEMM_NR, kc, c + i * ldc + j0, ldc,
                                  kcc_gemm_pair_cols(n, j0), first && k0 == 0);
        }
}
