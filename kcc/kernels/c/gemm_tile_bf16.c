/* The GEMM micro-kernel of the bf16 precision (BuildOptions(precision="bf16"), kcc/compiler/precision.py):
 * c [mr, nr] (=, or += unless first) = a [mr, kc] (f32, row stride lda) x B, B in the GEMM pack of
 * gemm_tile_f32.c (column panels of KCC_GEMM_NR) with K taken in pairs: one 32-bit word per (pair
 * q, column j) holds bf16(B[2q][j]) in its low half and bf16(B[2q + 1][j]) in its high half, rounded
 * to nearest even at lowering (kcc.ops.conv.bf16_pairs; an odd K ends in a zero row). b and b_step
 * count those words; kc counts K rows (<= KCC_GEMM_KC, and chunks start at even rows).
 * Activations are rounded to bf16 (nearest even) into pair rows the same way (kcc_bf16_pack_rows):
 * by the caller once per block of rows it reuses (kcc_gemm_tile_bf16p reads them), or per call
 * (kcc_gemm_tile_bf16).
 * Numerics: products of two bf16 are exact in f32; each output sums them in f32 in pair order
 * from zero, the chunk sums added in order by the caller, as in the f32 tiles. Two paths:
 *   AVX512_BF16 (vdpbf16ps, picked at run time where the CPU has it and the build is not forced
 *   below the AVX-512 level): a pair's two products and the sum in one instruction;
 *   elsewhere an emulation in ISO C (bf16 widened to f32 by a shift, two multiply-adds per
 *   pair): the same products, summed in a possibly different rounding; each path's results are
 *   identical for any blocking and thread count. The emulation does no fewer multiply-adds than
 *   the f32 tiles (bench numbers in bench/results/precision.md), so the loader builds fp32 on
 *   CPUs without AVX512_BF16; the emulation keeps a bf16 library correct wherever it runs. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) \
    && (!defined(KCC_ISA_LEVEL) || KCC_ISA_LEVEL == 3)
#define KCC_BF16_X86 1
#include <immintrin.h>
#define KCC_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#else
#define KCC_BF16_X86 0
#endif

#define KCC_BF16_KP (KCC_GEMM_KC / 2)   /* pairs per chunk */
#define KCC_BF16_ROWS 40960             /* words (160 KiB of stack) of pair rows a caller rounds at once */

/* bf16 bits of f, rounded to nearest even as vcvtneps2bf16 does (a NaN stays a quiet NaN; the
 * rounding carry would turn some into infinities or -0), as ISO C. */
KCC_FORCE_INLINE uint32_t kcc_bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? (u >> 16) | 0x40u : rounded;
}

KCC_FORCE_INLINE float kcc_bf16_lo(uint32_t w)
{
    const uint32_t u = w << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

KCC_FORCE_INLINE float kcc_bf16_hi(uint32_t w)
{
    const uint32_t u = w & 0xFFFF0000u;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}


/* ap [rows, ceil(k / 2)] (row stride ldp words) = a [rows, k] (row stride lda) as bf16 pairs:
 * ap[r][q] = bf16(a[r][2q]) | bf16(a[r][2q + 1]) << 16, the high half zero past k. */
static void kcc_bf16_pack_rows_c(const float *KCC_RESTRICT a, int64_t lda, int64_t rows, int64_t k,
                                 uint32_t *KCC_RESTRICT ap, int64_t ldp)
{
    for (int64_t r = 0; r < rows; ++r) {
        const float *ar = a + r * lda;
        uint32_t *pr = ap + r * ldp;
        for (int64_t q = 0; 2 * q + 1 < k; ++q) pr[q] = kcc_bf16_bits(ar[2 * q]) | kcc_bf16_bits(ar[2 * q + 1]) << 16;
        if (k % 2) pr[k / 2] = kcc_bf16_bits(ar[k - 1]);
    }
}

/* The emulation: c [mr, nr] over one panel (nr <= NR) from pair rows, rows past mr alias row 0;
 * both halves widened to f32 (exact), then multiply-added pair by pair. */
KCC_VECTOR_CLONES
static void kcc_gemm_tile_bf16_emul(const uint32_t *KCC_RESTRICT ap, int64_t ldp, int64_t mr,
                                    const uint32_t *KCC_RESTRICT b, int64_t kc, float *KCC_RESTRICT c,
                                    int64_t ldc, int64_t nr, int first)
{
    float acc[4][KCC_GEMM_NR];
    for (int64_t i0 = 0; i0 < mr; i0 += 4) {
        const int64_t m4 = mr - i0 < 4 ? mr - i0 : 4;
        const uint32_t *pr[4];
        for (int r = 0; r < 4; ++r) pr[r] = ap + (i0 + (r < m4 ? r : 0)) * ldp;
        for (int r = 0; r < 4; ++r)
            for (int j = 0; j < KCC_GEMM_NR; ++j) acc[r][j] = 0.0f;
        for (int64_t q = 0; 2 * q < kc; ++q) {
            const uint32_t *bq = b + q * KCC_GEMM_NR;
            float lo[KCC_GEMM_NR], hi[KCC_GEMM_NR];
            for (int j = 0; j < KCC_GEMM_NR; ++j) {
                lo[j] = kcc_bf16_lo(bq[j]);
                hi[j] = kcc_bf16_hi(bq[j]);
            }
            for (int r = 0; r < 4; ++r) {
                const float x0 = kcc_bf16_lo(pr[r][q]), x1 = kcc_bf16_hi(pr[r][q]);
                for (int j = 0; j < KCC_GEMM_NR; ++j) acc[r][j] = (acc[r][j] + x0 * lo[j]) + x1 * hi[j];
            }
        }
        for (int64_t r = 0; r < m4; ++r) kcc_gemm_store_row(acc[r], nr, first, c + (i0 + r) * ldc);
    }
}

#if KCC_BF16_X86
/* 1 where this library runs the vdpbf16ps tiles on this CPU. */
static int kcc_bf16_native(void)
{
    return kcc_isa_level_now() == 3 && __builtin_cpu_supports("avx512bf16");
}

/* kcc_bf16_pack_rows_c with vcvtneps2bf16 (the same rounding), 16 floats a step. */
KCC_BF16_TARGET
static void kcc_bf16_pack_rows_x86(const float *KCC_RESTRICT a, int64_t lda, int64_t rows, int64_t k,
                                   uint32_t *KCC_RESTRICT ap, int64_t ldp)
{
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < k; j += 16) {
            const int64_t left = k - j < 16 ? k - j : 16;
            const __mmask16 m = (__mmask16)((1u << left) - 1u);
            const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, a + r * lda + j));
            _mm256_mask_storeu_epi32(ap + r * ldp + j / 2, (__mmask8)((1u << ((left + 1) / 2)) - 1u), (__m256i)h);
        }
}

/* One row step of the native tile: row r's broadcast pair against one or two panels' pairs. */
#define KCC_BF16_ROW(r, TWO)                                                                      \
    do {                                                                                          \
        const __m512bh x = (__m512bh)_mm512_set1_epi32((int)p##r[q]);                            \
        c##r = _mm512_dpbf16_ps(c##r, x, w0);                                                     \
        if (TWO) d##r = _mm512_dpbf16_ps(d##r, x, w1);                                            \
    } while (0)

/* The 8-row tiles over one (TWO 0) or two panels (TWO 1): 8 or 16 zmm accumulators. */
#define KCC_BF16_TILE(NAME, TWO)                                                                  \
KCC_BF16_TARGET                                                                                   \
static void NAME(const uint32_t *KCC_RESTRICT ap, int64_t ldp, int64_t mr, const uint32_t *KCC_RESTRICT b, \
                 const uint32_t *KCC_RESTRICT b2, int64_t kc, float *KCC_RESTRICT c, int64_t ldc,  \
                 int64_t nr, int first)                                                          \
{                                                                                                 \
    const uint32_t *p0 = ap, *p1 = ap + (mr > 1) * ldp, *p2 = ap + (mr > 2) * 2 * ldp;           \
    const uint32_t *p3 = ap + (mr > 3) * 3 * ldp, *p4 = ap + (mr > 4) * 4 * ldp;                 \
    const uint32_t *p5 = ap + (mr > 5) * 5 * ldp, *p6 = ap + (mr > 6) * 6 * ldp;                 \
    const uint32_t *p7 = ap + (mr > 7) * 7 * ldp;                                                 \
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0; \
    __m512 d0 = c0, d1 = c0, d2 = c0, d3 = c0, d4 = c0, d5 = c0, d6 = c0, d7 = c0;                \
    for (int64_t q = 0; 2 * q < kc; ++q) {                                                        \
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512((const void *)(b + q * KCC_GEMM_NR));     \
        const __m512bh w1 = TWO ? (__m512bh)_mm512_loadu_si512((const void *)(b2 + q * KCC_GEMM_NR)) : w0; \
        KCC_BF16_ROW(0, TWO); KCC_BF16_ROW(1, TWO); KCC_BF16_ROW(2, TWO); KCC_BF16_ROW(3, TWO);   \
        KCC_BF16_ROW(4, TWO); KCC_BF16_ROW(5, TWO); KCC_BF16_ROW(6, TWO); KCC_BF16_ROW(7, TWO);   \
    }                                                                                             \
    float rows[2 * KCC_GEMM_MR][KCC_GEMM_NR];                                                     \
    _mm512_storeu_ps(rows[0], c0); _mm512_storeu_ps(rows[1], c1); _mm512_storeu_ps(rows[2], c2);  \
    _mm512_storeu_ps(rows[3], c3); _mm512_storeu_ps(rows[4], c4); _mm512_storeu_ps(rows[5], c5);  \
    _mm512_storeu_ps(rows[6], c6); _mm512_storeu_ps(rows[7], c7);                                 \
    if (TWO) {                                                                                    \
        _mm512_storeu_ps(rows[8], d0); _mm512_storeu_ps(rows[9], d1); _mm512_storeu_ps(rows[10], d2); \
        _mm512_storeu_ps(rows[11], d3); _mm512_storeu_ps(rows[12], d4); _mm512_storeu_ps(rows[13], d5); \
        _mm512_storeu_ps(rows[14], d6); _mm512_storeu_ps(rows[15], d7);                           \
    }                                                                                             \
    for (int64_t r = 0; r < mr; ++r) {                                                            \
        kcc_gemm_store_row(rows[r], TWO ? KCC_GEMM_NR : nr, first, c + r * ldc);                  \
        if (TWO) kcc_gemm_store_row(rows[KCC_GEMM_MR + r], nr - KCC_GEMM_NR, first, c + r * ldc + KCC_GEMM_NR); \
    }                                                                                             \
}

KCC_BF16_TILE(kcc_gemm_tile8_bf16, 0)
KCC_BF16_TILE(kcc_gemm_tile8x2_bf16, 1)
#endif

static void kcc_bf16_pack_rows(const float *KCC_RESTRICT a, int64_t lda, int64_t rows, int64_t k,
                               uint32_t *KCC_RESTRICT ap, int64_t ldp)
{
#if KCC_BF16_X86
    if (kcc_bf16_native()) {
        kcc_bf16_pack_rows_x86(a, lda, rows, k, ap, ldp);
        return;
    }
#endif
    kcc_bf16_pack_rows_c(a, lda, rows, k, ap, ldp);
}

/* c [mr, nr] (=, or += unless first) = pair rows ap [mr, ceil(kc / 2)] (row stride ldp words) x the
 * bf16-pair panel chunk at b and, for columns past NR, the next panel's at b + b_step (words):
 * mr <= KCC_GEMM_MR, nr <= 2 * NR, kc <= KCC_GEMM_KC. */
static void kcc_gemm_tile_bf16p(const uint32_t *KCC_RESTRICT ap, int64_t ldp, int64_t mr,
                                const uint32_t *KCC_RESTRICT b, int64_t b_step, int64_t kc,
                                float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int first)
{
#if KCC_BF16_X86
    if (kcc_bf16_native()) {
        if (nr > KCC_GEMM_NR)
            kcc_gemm_tile8x2_bf16(ap, ldp, mr, b, b + b_step, kc, c, ldc, nr, first);
        else
            kcc_gemm_tile8_bf16(ap, ldp, mr, b, b, kc, c, ldc, nr, first);
        return;
    }
#endif
    for (int64_t j0 = 0; j0 < nr; j0 += KCC_GEMM_NR, b += b_step, c += KCC_GEMM_NR)
        kcc_gemm_tile_bf16_emul(ap, ldp, mr, b, kc, c, ldc, nr - j0 < KCC_GEMM_NR ? nr - j0 : KCC_GEMM_NR, first);
}

/* The same from f32 rows a [mr, kc] (row stride lda), rounded here; b in words of the blob. */
static void kcc_gemm_tile_bf16(const float *KCC_RESTRICT a, int64_t lda, int64_t mr,
                               const float *KCC_RESTRICT b, int64_t b_step, int64_t kc,
                               float *KCC_RESTRICT c, int64_t ldc, int64_t nr, int64_t first)
{
    uint32_t ap[KCC_GEMM_MR * KCC_BF16_KP];
    kcc_bf16_pack_rows(a, lda, mr, kc, ap, KCC_BF16_KP);
    kcc_gemm_tile_bf16p(ap, KCC_BF16_KP, mr, (const uint32_t *)(const void *)b, b_step, kc, c, ldc, nr, (int)first);
}

/* kcc_gemm_packed_f32 on the bf16-pair pack: c [rows, n] (=, or += unless first) = a [rows, k] x B
 * in column panels of ceil(k / 2) pair rows (panel stride ceil(k / 2) * NR words). a is rounded
 * once into pair rows when they fit KCC_BF16_ROWS words, else per tile. */
static inline void kcc_gemm_packed_bf16(const float *KCC_RESTRICT a, int64_t lda, int64_t rows,
                                        const float *KCC_RESTRICT b, int64_t k, int64_t n, float *KCC_RESTRICT c,
                                        int64_t ldc, int64_t first)
{
    const int64_t kp = (k + 1) / 2;
    const uint32_t *bw = (const uint32_t *)(const void *)b;
    uint32_t ap[KCC_BF16_ROWS];
    const int held = rows * kp <= KCC_BF16_ROWS;
    if (held) kcc_bf16_pack_rows(a, lda, rows, k, ap, kp);
    for (int64_t j0 = 0; j0 < n; j0 += KCC_GEMM_NP * KCC_GEMM_NR)
        for (int64_t k0 = 0; k0 < k; k0 += KCC_GEMM_KC) {
            const int64_t kc = k - k0 < KCC_GEMM_KC ? k - k0 : KCC_GEMM_KC;
            for (int64_t i = 0; i < rows; i += KCC_GEMM_MR) {
                const int64_t mr = rows - i < KCC_GEMM_MR ? rows - i : KCC_GEMM_MR;
                if (held)
                    kcc_gemm_tile_bf16p(ap + i * kp + k0 / 2, kp, mr, bw + j0 * kp + k0 / 2 * KCC_GEMM_NR,
                                        kp * KCC_GEMM_NR, kc, c + i * ldc + j0, ldc, kcc_gemm_pair_cols(n, j0),
                                        first && k0 == 0);
                else
                    kcc_gemm_tile_bf16(a + i * lda + k0, lda, mr, b + j0 * kp + k0 / 2 * KCC_GEMM_NR,
                                       kp * KCC_GEMM_NR, kc, c + i * ldc + j0, ldc, kcc_gemm_pair_cols(n, j0),
                                       first && k0 == 0);
            }
        }
}
