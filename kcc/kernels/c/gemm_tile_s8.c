/* The integer GEMM micro-kernel of the int8 precision (BuildOptions(precision="int8"),
 * kcc/compiler/precision.py): s32 acc [mr, nr] = A (u8) x B (s8), exact in integers.
 *
 * B, the s8 panel layout: column panels of KCC_GEMM_NR (16) outputs; inside a panel the K rows
 * go in quads: quad q holds 64 bytes, column j's four bytes B[4q .. 4q+3][j] at 4j .. 4j+3
 * (what one vpdpbusd multiplies against a broadcast 4-byte word of A); K is zero-padded to a
 * multiple of 4. kcc.ops.conv_int8.s8_panels makes it.
 * A: rows of ldq = 4 * kq bytes, u8 = q + 128 with q the symmetric s8 quantum of an activation
 * (kcc_s8_quant_rows: one f32 scale per row, max |x| / 127, rounded to nearest even). The +128
 * shift makes A unsigned, as vpdpbusd wants; the caller subtracts 128 * sum_k B[k][j] (the
 * per-column weight sum, stored with the weights) to get sum_k q[k] * B[k][j], as onnxruntime's
 * MLAS and oneDNN do. Padding bytes of A past K meet zero weights.
 * Numerics: integer sums, exact (|sum| < 2^31 while K * 255 * 127 does, K < 66000), so every
 * path gives the same bits for any blocking and thread count (kcc_s8_path picks one per call):
 *   3  vpdpbusd zmm: AVX512_VNNI at the AVX-512 level (8-row x 2-panel tiles, 16 zmm sums);
 *   2  vpdpbusd ymm: AVX-VNNI (VEX: Alder Lake and later clients, Zen 5, Sapphire Rapids at the
 *      AVX2 level), 4-row x 1-panel sub-tiles;
 *   1  AVX2 without VNNI: vpmaddwd on operands widened to s16 (u8 activations zero-extended, s8
 *      weights sign-extended: every product and pair sum exact, unlike vpmaddubsw's saturating
 *      s16 pairs), 4-row x 8-column sub-tiles; ~1.6x an f32 FMA tile's multiply-adds on a Zen 3;
 *   0  ISO C elsewhere (much slower than the f32 tiles: the loader builds fp32 there). */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) \
    && (!defined(KCC_ISA_LEVEL) || KCC_ISA_LEVEL == 3)
#define KCC_S8_X86 1
#include <immintrin.h>
#define KCC_S8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#else
#define KCC_S8_X86 0
#endif

#define KCC_S8_QUAD 64        /* bytes of one quad of a panel: 16 columns x 4 K rows */
#define KCC_S8_SHIFT 128      /* u8 = s8 quantum + KCC_S8_SHIFT */

/* xq [rows][ldq] (u8) and sa [rows] = the rows x [rows][c] (row stride ldx) quantised one scale a
 * row: sa = max |x| / 127 (0 for a zero row), xq = round(x * 127 / max |x|) + 128 (nearest even,
 * by the 1.5 * 2^23 addition, which vectorises), clamped to [1, 255]; bytes c .. ldq - 1 are 128.
 * A row holding an infinity or a NaN quantises to 128s with a NaN scale: the outputs that read
 * it are NaN (an infinity gives NaN, not the f32 path's infinity). ISO C; kcc_s8_quant_rows_x86
 * gives the same bytes and scales. */
KCC_VECTOR_CLONES
static void kcc_s8_quant_rows_c(const float *KCC_RESTRICT x, int64_t ldx, int64_t rows, int64_t c,
                                uint8_t *KCC_RESTRICT xq, int64_t ldq, float *KCC_RESTRICT sa)
{
    for (int64_t r = 0; r < rows; ++r) {
        const float *KCC_RESTRICT xr = x + r * ldx;
        uint8_t *KCC_RESTRICT qr = xq + r * ldq;
        /* max |x| as the max of the sign-cleared bit patterns (ordered as the values; an integer
         * max), >= the infinity's pattern where an infinity or a NaN is present */
        uint32_t mb = 0;
        for (int64_t j = 0; j < c; ++j) {
            uint32_t u;
            memcpy(&u, xr + j, sizeof u);
            u &= 0x7FFFFFFFu;
            mb = u > mb ? u : mb;
        }
        float m;
        memcpy(&m, &mb, sizeof m);
        if (mb >= 0x7F800000u) {
            sa[r] = NAN;
            for (int64_t j = 0; j < ldq; ++j) qr[j] = KCC_S8_SHIFT;
            continue;
        }
        const float inv = m > 0.0f ? 127.0f / m : 0.0f;
        sa[r] = m / 127.0f;
        KCC_FOR16(c, {
            float v = xr[j] * inv;
            v = v > 127.0f ? 127.0f : v;
            v = v < -127.0f ? -127.0f : v;
            v = (v + 12582912.0f) - 12582912.0f;            /* 1.5 * 2^23: to an integer, ties to even */
            qr[j] = (uint8_t)((int32_t)v + KCC_S8_SHIFT);
        });
        for (int64_t j = c; j < ldq; ++j) qr[j] = KCC_S8_SHIFT;
    }
}

/* The emulation: acc [r][j] (row stride 2 * NR) over rows r < mr, columns j < nr (<= 2 * NR: the
 * panel at b, then the one at b2), kq quads of a (row stride lda bytes). Each quad's 64 weight bytes
 * are first widened to s32 in (u, j) order (a transposition the vectoriser takes), then the 4
 * activation bytes multiply-add against 16 columns each: integers, so the same sums as vpdpbusd. */
KCC_VECTOR_CLONES
static void kcc_s8_tile_c(const uint8_t *KCC_RESTRICT a, int64_t lda, int64_t mr, const int8_t *KCC_RESTRICT b,
                          const int8_t *KCC_RESTRICT b2, int64_t kq, int64_t nr, int32_t *KCC_RESTRICT acc)
{
    int32_t rows[KCC_GEMM_MR][2 * KCC_GEMM_NR];
    for (int64_t r = 0; r < KCC_GEMM_MR; ++r)
        for (int j = 0; j < 2 * KCC_GEMM_NR; ++j) rows[r][j] = 0;
    for (int64_t q = 0; q < kq; ++q) {
        int32_t w[4][2 * KCC_GEMM_NR];
        for (int u = 0; u < 4; ++u)
            for (int j = 0; j < KCC_GEMM_NR; ++j) {
                w[u][j] = b[q * KCC_S8_QUAD + 4 * j + u];
                w[u][KCC_GEMM_NR + j] = b2[q * KCC_S8_QUAD + 4 * j + u];
            }
        for (int64_t r = 0; r < mr; ++r) {
            const uint8_t *ar = a + r * lda + 4 * q;
            for (int u = 0; u < 4; ++u) {
                const int32_t x = ar[u];
                for (int j = 0; j < 2 * KCC_GEMM_NR; ++j) rows[r][j] += x * w[u][j];
            }
        }
    }
    for (int64_t r = 0; r < mr; ++r)
        for (int64_t j = 0; j < nr; ++j) acc[r * 2 * KCC_GEMM_NR + j] = rows[r][j];
}

#if KCC_S8_X86
/* 1 where this library runs the vpdpbusd tiles on this CPU. */
static int kcc_s8_native(void)
{
    return kcc_isa_level_now() == 3 && __builtin_cpu_supports("avx512vnni");
}

/* kcc_s8_quant_rows_c in AVX-512, 16 floats a step: the same max, scale, products, clamps and
 * rounding (vcvtps2dq rounds to nearest even, as the addition trick does at |v| <= 127). */
KCC_S8_TARGET
static void kcc_s8_quant_rows_x86(const float *KCC_RESTRICT x, int64_t ldx, int64_t rows, int64_t c,
                                  uint8_t *KCC_RESTRICT xq, int64_t ldq, float *KCC_RESTRICT sa)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), shift = _mm512_set1_epi32(KCC_S8_SHIFT);
    const __m512 hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
    for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * ldx;
        uint8_t *qr = xq + r * ldq;
        __m512i mx = _mm512_setzero_si512();
        for (int64_t j = 0; j < c; j += 16) {
            const __mmask16 mk = (__mmask16)(c - j >= 16 ? 0xFFFFu : (1u << (c - j)) - 1u);
            mx = _mm512_max_epu32(mx, _mm512_and_si512(_mm512_maskz_loadu_epi32(mk, xr + j), abs_mask));
        }
        const uint32_t mb = (uint32_t)_mm512_reduce_max_epu32(mx);
        if (mb >= 0x7F800000u) {
            sa[r] = NAN;
            memset(qr, KCC_S8_SHIFT, (size_t)ldq);
            continue;
        }
        float m;
        memcpy(&m, &mb, sizeof m);
        const float inv = m > 0.0f ? 127.0f / m : 0.0f;
        sa[r] = m / 127.0f;
        const __m512 vi = _mm512_set1_ps(inv);
        for (int64_t j = 0; j < c; j += 16) {
            const __mmask16 mk = (__mmask16)(c - j >= 16 ? 0xFFFFu : (1u << (c - j)) - 1u);
            __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, xr + j), vi);
            v = _mm512_max_ps(_mm512_min_ps(v, hi), lo);
            _mm512_mask_cvtepi32_storeu_epi8(qr + j, mk, _mm512_add_epi32(_mm512_cvtps_epi32(v), shift));
        }
        for (int64_t j = c; j < ldq; ++j) qr[j] = KCC_S8_SHIFT;
    }
}

/* One row step of the native tile: row r's broadcast word against one or two panels' quads. */
#define KCC_S8_ROW(r, TWO)                                                                        \
    do {                                                                                          \
        int32_t w_;                                                                               \
        memcpy(&w_, p##r + 4 * q, sizeof w_);                                                     \
        const __m512i x = _mm512_set1_epi32(w_);                                                  \
        c##r = _mm512_dpbusd_epi32(c##r, x, w0);                                                  \
        if (TWO) d##r = _mm512_dpbusd_epi32(d##r, x, w1);                                         \
    } while (0)

/* Row r's finish: raw sums stored to acc (DQ 0), or dequantised into ob as kcc_s8_dequant_add does
 * (DQ 1: ob[j] += (float)(acc[j] - comp[j]) * sa[r * sa_step], a multiply then an add, as the ISO C
 * code rounds them), the columns past nr masked off. */
#define KCC_S8_FINISH(r, TWO, DQ)                                                                 \
    do {                                                                                          \
        if (r < mr) {                                                                             \
            if (DQ) {                                                                             \
                const __m512 s_ = _mm512_set1_ps(sa[r * sa_step]);                                \
                float *y_ = ob + r * ldo;                                                         \
                const __m512 f0_ = _mm512_cvtepi32_ps(_mm512_sub_epi32(c##r, comp0));             \
                _mm512_mask_storeu_ps(y_, m0, _mm512_add_ps(_mm512_maskz_loadu_ps(m0, y_), _mm512_mul_ps(f0_, s_))); \
                if (TWO) {                                                                        \
                    const __m512 f1_ = _mm512_cvtepi32_ps(_mm512_sub_epi32(d##r, comp1));         \
                    _mm512_mask_storeu_ps(y_ + KCC_GEMM_NR, m1,                                   \
                        _mm512_add_ps(_mm512_maskz_loadu_ps(m1, y_ + KCC_GEMM_NR), _mm512_mul_ps(f1_, s_))); \
                }                                                                                 \
            } else {                                                                              \
                _mm512_mask_storeu_epi32(acc + r * 2 * KCC_GEMM_NR, m0, c##r);                    \
                if (TWO) _mm512_mask_storeu_epi32(acc + r * 2 * KCC_GEMM_NR + KCC_GEMM_NR, m1, d##r); \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* The 8-row tiles over one (TWO 0) or two panels (TWO 1): 8 or 16 zmm accumulators; rows past
 * mr alias row 0 and are not stored. DQ 0: raw sums into acc; DQ 1: dequantised into ob. */
#define KCC_S8_TILE(NAME, TWO, DQ)                                                                \
KCC_S8_TARGET                                                                                     \
static void NAME(const uint8_t *KCC_RESTRICT a, int64_t lda, int64_t mr, const int8_t *KCC_RESTRICT b, \
                 const int8_t *KCC_RESTRICT b2, int64_t kq, int64_t nr, int32_t *KCC_RESTRICT acc, \
                 const int32_t *KCC_RESTRICT comp, const float *KCC_RESTRICT sa, int64_t sa_step,  \
                 float *KCC_RESTRICT ob, int64_t ldo)                                             \
{                                                                                                 \
    const uint8_t *p0 = a, *p1 = a + (mr > 1) * lda, *p2 = a + (mr > 2) * 2 * lda;               \
    const uint8_t *p3 = a + (mr > 3) * 3 * lda, *p4 = a + (mr > 4) * 4 * lda;                     \
    const uint8_t *p5 = a + (mr > 5) * 5 * lda, *p6 = a + (mr > 6) * 6 * lda;                     \
    const uint8_t *p7 = a + (mr > 7) * 7 * lda;                                                   \
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0; \
    __m512i d0 = c0, d1 = c0, d2 = c0, d3 = c0, d4 = c0, d5 = c0, d6 = c0, d7 = c0;               \
    for (int64_t q = 0; q < kq; ++q) {                                                            \
        const __m512i w0 = _mm512_loadu_si512((const void *)(b + q * KCC_S8_QUAD));               \
        const __m512i w1 = TWO ? _mm512_loadu_si512((const void *)(b2 + q * KCC_S8_QUAD)) : w0;   \
        KCC_S8_ROW(0, TWO); KCC_S8_ROW(1, TWO); KCC_S8_ROW(2, TWO); KCC_S8_ROW(3, TWO);           \
        KCC_S8_ROW(4, TWO); KCC_S8_ROW(5, TWO); KCC_S8_ROW(6, TWO); KCC_S8_ROW(7, TWO);           \
    }                                                                                             \
    const int64_t n0 = nr < KCC_GEMM_NR ? nr : KCC_GEMM_NR, n1 = nr - n0;                         \
    const __mmask16 m0 = (__mmask16)((1u << n0) - 1u), m1 = (__mmask16)((1u << n1) - 1u);         \
    const __m512i comp0 = DQ ? _mm512_maskz_loadu_epi32(m0, comp) : c0;                           \
    const __m512i comp1 = DQ && TWO ? _mm512_maskz_loadu_epi32(m1, comp + KCC_GEMM_NR) : c0;      \
    (void)acc; (void)comp0; (void)comp1; (void)sa; (void)sa_step; (void)ob; (void)ldo;            \
    KCC_S8_FINISH(0, TWO, DQ); KCC_S8_FINISH(1, TWO, DQ); KCC_S8_FINISH(2, TWO, DQ);              \
    KCC_S8_FINISH(3, TWO, DQ); KCC_S8_FINISH(4, TWO, DQ); KCC_S8_FINISH(5, TWO, DQ);              \
    KCC_S8_FINISH(6, TWO, DQ); KCC_S8_FINISH(7, TWO, DQ);                                         \
}

KCC_S8_TILE(kcc_s8_tile8, 0, 0)
KCC_S8_TILE(kcc_s8_tile8x2, 1, 0)
KCC_S8_TILE(kcc_s8_tile8_dq, 0, 1)
KCC_S8_TILE(kcc_s8_tile8x2_dq, 1, 1)
#endif

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) \
    && (!defined(KCC_ISA_LEVEL) || KCC_ISA_LEVEL >= 1)
#define KCC_S8_X86_256 1
#include <immintrin.h>
#define KCC_S8_AVX2_TARGET __attribute__((target("avx2")))
#if defined(KCC_S8_AVXVNNI_STANDIN)
/* Tests only (tests/test_int8_kernels.py): the AVX-VNNI tile's code with its vpdpbusd done exactly
 * in AVX2, so a CPU without AVX-VNNI runs that tile's data flow; path 2 is then taken at any AVX2
 * level. Per 32-bit lane: the four u8 x s8 products widened to s16 pairs (vpmaddwd, exact), the
 * pairs added back in lane order (hadd works per 128-bit half: the permute restores the order). */
#define KCC_S8_VNNI256_TARGET KCC_S8_AVX2_TARGET
KCC_S8_AVX2_TARGET
static inline __m256i kcc_s8_dpbusd256(__m256i acc, __m256i x, __m256i w)
{
    const __m256i lo = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(x)),
                                         _mm256_cvtepi8_epi16(_mm256_castsi256_si128(w)));
    const __m256i hi = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(x, 1)),
                                         _mm256_cvtepi8_epi16(_mm256_extracti128_si256(w, 1)));
    return _mm256_add_epi32(acc, _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xD8));
}
#else
#define KCC_S8_VNNI256_TARGET __attribute__((target("avx2,avxvnni")))
#define kcc_s8_dpbusd256(acc, x, w) _mm256_dpbusd_avx_epi32((acc), (x), (w))
#endif
#else
#define KCC_S8_X86_256 0
#endif

/* Which tiles run here (the numbers of the list at the top). Cheap: the CPU's features are read
 * from what libgcc's constructor cached. */
static int kcc_s8_path(void)
{
#if KCC_S8_X86
    if (kcc_s8_native()) return 3;
#endif
#if KCC_S8_X86_256
    if (kcc_isa_level_now() >= 1) {
#if defined(KCC_S8_AVXVNNI_STANDIN)
        return 2;
#elif defined(__clang__)
        return 1;          /* (clang's builtin may not know the feature: the AVX2 tiles, same sums) */
#else
        return __builtin_cpu_supports("avxvnni") ? 2 : 1;
#endif
    }
#endif
    return 0;
}

#if KCC_S8_X86_256
/* AVX-VNNI: acc [r][j] (row stride 2 * NR) for r < mr, j < nr, four rows and one panel (16
 * columns: two ymm of sums a row, a column a lane) at a time; rows past mr alias row 0 and are
 * not stored; the second panel only where nr > NR. */
KCC_S8_VNNI256_TARGET
static void kcc_s8_tile_vnni256(const uint8_t *KCC_RESTRICT a, int64_t lda, int64_t mr, const int8_t *KCC_RESTRICT b,
                                const int8_t *KCC_RESTRICT b2, int64_t kq, int64_t nr, int32_t *KCC_RESTRICT acc)
{
    for (int64_t h = 0; h < mr; h += 4) {
        const uint8_t *p0 = a + h * lda, *p1 = a + (h + 1 < mr ? h + 1 : 0) * lda;
        const uint8_t *p2 = a + (h + 2 < mr ? h + 2 : 0) * lda, *p3 = a + (h + 3 < mr ? h + 3 : 0) * lda;
        for (int64_t panel = 0; panel < (nr > KCC_GEMM_NR ? 2 : 1); ++panel) {
            const int8_t *w = panel ? b2 : b;
            __m256i c0 = _mm256_setzero_si256(), d0 = c0, c1 = c0, d1 = c0, c2 = c0, d2 = c0, c3 = c0, d3 = c0;
            for (int64_t q = 0; q < kq; ++q) {
                const __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)(w + q * KCC_S8_QUAD));
                const __m256i w1 = _mm256_loadu_si256((const __m256i *)(const void *)(w + q * KCC_S8_QUAD + 32));
                int32_t v0, v1, v2, v3;
                memcpy(&v0, p0 + 4 * q, 4); memcpy(&v1, p1 + 4 * q, 4);
                memcpy(&v2, p2 + 4 * q, 4); memcpy(&v3, p3 + 4 * q, 4);
                __m256i x = _mm256_set1_epi32(v0);
                c0 = kcc_s8_dpbusd256(c0, x, w0); d0 = kcc_s8_dpbusd256(d0, x, w1);
                x = _mm256_set1_epi32(v1);
                c1 = kcc_s8_dpbusd256(c1, x, w0); d1 = kcc_s8_dpbusd256(d1, x, w1);
                x = _mm256_set1_epi32(v2);
                c2 = kcc_s8_dpbusd256(c2, x, w0); d2 = kcc_s8_dpbusd256(d2, x, w1);
                x = _mm256_set1_epi32(v3);
                c3 = kcc_s8_dpbusd256(c3, x, w0); d3 = kcc_s8_dpbusd256(d3, x, w1);
            }
            int32_t *o = acc + h * 2 * KCC_GEMM_NR + panel * KCC_GEMM_NR;
            _mm256_storeu_si256((__m256i *)(void *)o, c0);
            _mm256_storeu_si256((__m256i *)(void *)(o + 8), d0);
            if (h + 1 < mr) {
                _mm256_storeu_si256((__m256i *)(void *)(o + 2 * KCC_GEMM_NR), c1);
                _mm256_storeu_si256((__m256i *)(void *)(o + 2 * KCC_GEMM_NR + 8), d1);
            }
            if (h + 2 < mr) {
                _mm256_storeu_si256((__m256i *)(void *)(o + 4 * KCC_GEMM_NR), c2);
                _mm256_storeu_si256((__m256i *)(void *)(o + 4 * KCC_GEMM_NR + 8), d2);
            }
            if (h + 3 < mr) {
                _mm256_storeu_si256((__m256i *)(void *)(o + 6 * KCC_GEMM_NR), c3);
                _mm256_storeu_si256((__m256i *)(void *)(o + 6 * KCC_GEMM_NR + 8), d3);
            }
        }
    }
}

#define KCC_S8_W16_QUADS 128   /* quads of A one widening holds: 8 rows x 1 KiB of s16 on the stack */
#define KCC_S8_W16_LD (4 * KCC_S8_W16_QUADS)

/* AVX2, one 8-column group of a panel (w: its 32 bytes of quad 0; quads 64 bytes apart) against
 * four rows of widened activations (a16, 8-byte aligned quads, row stride KCC_S8_W16_LD), nq
 * quads, added to part (four rows of 16 s32: a row's two vectors hold columns 0-3 and 4-7, each
 * as two partial sums, the even and odd K pairs of a quad, which vpmaddwd leaves in neighbouring
 * lanes). noipa: inlined or specialised for its caller, GCC 12 -O3 copies the sums between
 * registers and spills one every quad (bench/bench_int8_tiles.py, one Zen 3 core: 54 vs 62 G
 * multiply-adds/s). */
#define KCC_S8_MADD(c, x, w) c = _mm256_add_epi32(_mm256_madd_epi16((x), (w)), c)
#define KCC_S8_QUAD16(r) _mm256_castpd_si256(_mm256_broadcast_sd((const double *)(const void *)(a16 + (r) * KCC_S8_W16_LD + 4 * q)))
#if defined(__clang__)
#define KCC_S8_NOIPA noinline
#else
#define KCC_S8_NOIPA noipa
#endif
__attribute__((target("avx2"), KCC_S8_NOIPA))
static void kcc_s8_group_avx2(const int16_t *KCC_RESTRICT a16, const int8_t *KCC_RESTRICT w, int64_t nq,
                              int32_t *KCC_RESTRICT part)
{
    __m256i c0 = _mm256_loadu_si256((const __m256i *)(const void *)part);
    __m256i d0 = _mm256_loadu_si256((const __m256i *)(const void *)(part + 8));
    __m256i c1 = _mm256_loadu_si256((const __m256i *)(const void *)(part + 16));
    __m256i d1 = _mm256_loadu_si256((const __m256i *)(const void *)(part + 24));
    __m256i c2 = _mm256_loadu_si256((const __m256i *)(const void *)(part + 32));
    __m256i d2 = _mm256_loadu_si256((const __m256i *)(const void *)(part + 40));
    __m256i c3 = _mm256_loadu_si256((const __m256i *)(const void *)(part + 48));
    __m256i d3 = _mm256_loadu_si256((const __m256i *)(const void *)(part + 56));
    for (int64_t q = 0; q < nq; ++q) {
        const __m256i wl = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(w + q * KCC_S8_QUAD)));
        const __m256i wh = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(w + q * KCC_S8_QUAD + 16)));
        __m256i x = KCC_S8_QUAD16(0);
        KCC_S8_MADD(c0, x, wl); KCC_S8_MADD(d0, x, wh);
        x = KCC_S8_QUAD16(1);
        KCC_S8_MADD(c1, x, wl); KCC_S8_MADD(d1, x, wh);
        x = KCC_S8_QUAD16(2);
        KCC_S8_MADD(c2, x, wl); KCC_S8_MADD(d2, x, wh);
        x = KCC_S8_QUAD16(3);
        KCC_S8_MADD(c3, x, wl); KCC_S8_MADD(d3, x, wh);
    }
    _mm256_storeu_si256((__m256i *)(void *)part, c0);
    _mm256_storeu_si256((__m256i *)(void *)(part + 8), d0);
    _mm256_storeu_si256((__m256i *)(void *)(part + 16), c1);
    _mm256_storeu_si256((__m256i *)(void *)(part + 24), d1);
    _mm256_storeu_si256((__m256i *)(void *)(part + 32), c2);
    _mm256_storeu_si256((__m256i *)(void *)(part + 40), d2);
    _mm256_storeu_si256((__m256i *)(void *)(part + 48), c3);
    _mm256_storeu_si256((__m256i *)(void *)(part + 56), d3);
}

/* AVX2 without VNNI: acc as kcc_s8_tile_vnni256 makes it. A is widened to s16 once per chunk of
 * KCC_S8_W16_QUADS quads (rows past mr alias row 0) and read by every column group. */
KCC_S8_AVX2_TARGET
static void kcc_s8_tile_avx2(const uint8_t *KCC_RESTRICT a, int64_t lda, int64_t mr, const int8_t *KCC_RESTRICT b,
                             const int8_t *KCC_RESTRICT b2, int64_t kq, int64_t nr, int32_t *KCC_RESTRICT acc)
{
    _Alignas(32) int16_t a16[KCC_GEMM_MR * KCC_S8_W16_LD];
    int32_t part[4][KCC_GEMM_MR][16];                  /* [column group][row][partial sums] */
    memset(part, 0, sizeof part);
    const int64_t rows = (mr + 3) / 4 * 4, groups = (nr + 7) / 8;
    for (int64_t q0 = 0; q0 < kq; q0 += KCC_S8_W16_QUADS) {
        const int64_t nq = kq - q0 < KCC_S8_W16_QUADS ? kq - q0 : KCC_S8_W16_QUADS;
        for (int64_t r = 0; r < rows; ++r) {
            const uint8_t *src = a + (r < mr ? r : 0) * lda + 4 * q0;
            int16_t *dst = a16 + r * KCC_S8_W16_LD;
            int64_t u = 0;
            for (; u + 16 <= 4 * nq; u += 16)
                _mm256_storeu_si256((__m256i *)(void *)(dst + u),
                                    _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(src + u))));
            for (; u < 4 * nq; ++u) dst[u] = src[u];
        }
        for (int64_t h = 0; h < rows; h += 4)
            for (int64_t g = 0; g < groups; ++g)
                kcc_s8_group_avx2(a16 + h * KCC_S8_W16_LD, (g < 2 ? b : b2) + (g & 1) * 32 + q0 * KCC_S8_QUAD, nq,
                                  &part[g][h][0]);
    }
    for (int64_t r = 0; r < mr; ++r)
        for (int64_t g = 0; g < groups; ++g) {
            /* [c0 c0' c1 c1' | c2 c2' c3 c3'] and [c4 ...]: hadd pairs them per 128-bit half as
             * [c0 c1 c4 c5 | c2 c3 c6 c7], the permute puts the columns in order */
            const __m256i lo = _mm256_loadu_si256((const __m256i *)(const void *)&part[g][r][0]);
            const __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)&part[g][r][8]);
            _mm256_storeu_si256((__m256i *)(void *)(acc + r * 2 * KCC_GEMM_NR + 8 * g),
                                _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xD8));
        }
}
#endif

static void kcc_s8_quant_rows(const float *KCC_RESTRICT x, int64_t ldx, int64_t rows, int64_t c,
                              uint8_t *KCC_RESTRICT xq, int64_t ldq, float *KCC_RESTRICT sa)
{
#if KCC_S8_X86
    if (kcc_s8_native()) {
        kcc_s8_quant_rows_x86(x, ldx, rows, c, xq, ldq, sa);
        return;
    }
#endif
    kcc_s8_quant_rows_c(x, ldx, rows, c, xq, ldq, sa);
}

/* acc [mr][2 * NR] (columns j < nr stored) = u8 rows a [mr][4 * kq] (row stride lda bytes) x the
 * s8 panel chunk at b and, for columns past NR, the next panel's at b2: mr <= KCC_GEMM_MR,
 * nr <= 2 * NR, on the tiles of `path` (kcc_s8_path's numbers). Raw sums: the caller subtracts the
 * shift's column sums. */
static void kcc_s8_tile_on(int path, const uint8_t *KCC_RESTRICT a, int64_t lda, int64_t mr,
                           const int8_t *KCC_RESTRICT b, const int8_t *KCC_RESTRICT b2, int64_t kq, int64_t nr,
                           int32_t *KCC_RESTRICT acc)
{
#if KCC_S8_X86
    if (path == 3) {
        if (nr > KCC_GEMM_NR)
            kcc_s8_tile8x2(a, lda, mr, b, b2, kq, nr, acc, NULL, NULL, 0, NULL, 0);
        else
            kcc_s8_tile8(a, lda, mr, b, b, kq, nr, acc, NULL, NULL, 0, NULL, 0);
        return;
    }
#endif
#if KCC_S8_X86_256
    if (path == 2) {
        kcc_s8_tile_vnni256(a, lda, mr, b, nr > KCC_GEMM_NR ? b2 : b, kq, nr, acc);
        return;
    }
    if (path == 1) {
        kcc_s8_tile_avx2(a, lda, mr, b, nr > KCC_GEMM_NR ? b2 : b, kq, nr, acc);
        return;
    }
#endif
    (void)path;
    kcc_s8_tile_c(a, lda, mr, b, nr > KCC_GEMM_NR ? b2 : b, kq, nr, acc);
}

static void kcc_gemm_tile_s8(const uint8_t *KCC_RESTRICT a, int64_t lda, int64_t mr, const int8_t *KCC_RESTRICT b,
                             const int8_t *KCC_RESTRICT b2, int64_t kq, int64_t nr, int32_t *KCC_RESTRICT acc)
{
    kcc_s8_tile_on(kcc_s8_path(), a, lda, mr, b, b2, kq, nr, acc);
}

/* ob [mr, nr] (row stride ldo) += dequantised tile: (float)(acc[r][j] - comp[j]) * sa[r * sa_step],
 * acc the raw sums kcc_gemm_tile_s8 makes (comp: the shift's column sums, sa: the rows' scales);
 * a multiply then an add per element, the same bits on every path. */
KCC_VECTOR_CLONES
static void kcc_s8_dequant_add(const int32_t *KCC_RESTRICT acc, int64_t mr, int64_t nr,
                               const int32_t *KCC_RESTRICT comp, const float *KCC_RESTRICT sa, int64_t sa_step,
                               float *KCC_RESTRICT ob, int64_t ldo)
{
    for (int64_t r = 0; r < mr; ++r) {
        const float s = sa[r * sa_step];
        const int32_t *KCC_RESTRICT ar = acc + r * 2 * KCC_GEMM_NR;
        float *KCC_RESTRICT y = ob + r * ldo;
        KCC_FOR16(nr, y[j] += (float)(ar[j] - comp[j]) * s;);
    }
}

/* The tile with its dequantisation: on the AVX512-VNNI path in registers (no store of the sums). */
static void kcc_gemm_tile_s8_dq(const uint8_t *KCC_RESTRICT a, int64_t lda, int64_t mr,
                                const int8_t *KCC_RESTRICT b, const int8_t *KCC_RESTRICT b2, int64_t kq, int64_t nr,
                                const int32_t *KCC_RESTRICT comp, const float *KCC_RESTRICT sa, int64_t sa_step,
                                float *KCC_RESTRICT ob, int64_t ldo)
{
    int32_t acc[KCC_GEMM_MR * 2 * KCC_GEMM_NR];
    const int path = kcc_s8_path();
#if KCC_S8_X86
    if (path == 3) {
        if (nr > KCC_GEMM_NR)
            kcc_s8_tile8x2_dq(a, lda, mr, b, b2, kq, nr, acc, comp, sa, sa_step, ob, ldo);
        else
            kcc_s8_tile8_dq(a, lda, mr, b, b, kq, nr, acc, comp, sa, sa_step, ob, ldo);
        return;
    }
#endif
    kcc_s8_tile_on(path, a, lda, mr, b, b2, kq, nr, acc);
    kcc_s8_dequant_add(acc, mr, nr, comp, sa, sa_step, ob, ldo);
}

/* The tile as a whole GEMM, for the tests and benches (no op lowers to it): c [rows, n] (s32) =
 * a (u8 [rows][4 * kq], passed as words) x b (the s8 panels of n columns, kq quads, as words),
 * raw sums (no shift correction). Row blocks of MR in parallel: any thread count, same bits. */
static int kcc_gemm_u8s8_s32(const int32_t *KCC_RESTRICT a, int64_t rows, int64_t kq, const float *KCC_RESTRICT b,
                             int64_t n, int32_t *KCC_RESTRICT c)
{
    if (rows < 1 || kq < 1 || n < 1) return KCC_EDIMS;
    const uint8_t *a8 = (const uint8_t *)(const void *)a;
    const int8_t *b8 = (const int8_t *)(const void *)b;
    const int64_t blocks = (rows + KCC_GEMM_MR - 1) / KCC_GEMM_MR, panel = kq * KCC_S8_QUAD;
    KCC_PARALLEL_FOR
    for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t i = blk * KCC_GEMM_MR, mr = rows - i < KCC_GEMM_MR ? rows - i : KCC_GEMM_MR;
        int32_t acc[KCC_GEMM_MR * 2 * KCC_GEMM_NR];
        for (int64_t j0 = 0; j0 < n; j0 += 2 * KCC_GEMM_NR) {
            const int64_t nr = n - j0 < 2 * KCC_GEMM_NR ? n - j0 : 2 * KCC_GEMM_NR;
            const int8_t *bp = b8 + j0 / KCC_GEMM_NR * panel;
            kcc_gemm_tile_s8(a8 + i * 4 * kq, 4 * kq, mr, bp, nr > KCC_GEMM_NR ? bp + panel : bp, kq, nr, acc);
            for (int64_t r = 0; r < mr; ++r)
                for (int64_t j = 0; j < nr; ++j) c[(i + r) * n + j0 + j] = acc[r * 2 * KCC_GEMM_NR + j];
        }
    }
    return KCC_OK;
}
