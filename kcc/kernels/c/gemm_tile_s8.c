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
 * Numerics: integer sums, exact (|sum| < 2^31 while K * 255 * 127 does, K < 66000), so the
 * AVX512-VNNI tile (vpdpbusd, where the CPU has it and the build is not forced below the AVX-512
 * level) and the ISO C emulation elsewhere give the same bits for any blocking and thread count.
 * The emulation is much slower than the f32 tiles (bench/results/precision.md): the loader
 * builds fp32 on CPUs without AVX512_VNNI. */
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
 * nr <= 2 * NR. Raw sums: the caller subtracts the shift's column sums. */
static void kcc_gemm_tile_s8(const uint8_t *KCC_RESTRICT a, int64_t lda, int64_t mr, const int8_t *KCC_RESTRICT b,
                             const int8_t *KCC_RESTRICT b2, int64_t kq, int64_t nr, int32_t *KCC_RESTRICT acc)
{
#if KCC_S8_X86
    if (kcc_s8_native()) {
        if (nr > KCC_GEMM_NR)
            kcc_s8_tile8x2(a, lda, mr, b, b2, kq, nr, acc, NULL, NULL, 0, NULL, 0);
        else
            kcc_s8_tile8(a, lda, mr, b, b, kq, nr, acc, NULL, NULL, 0, NULL, 0);
        return;
    }
#endif
    kcc_s8_tile_c(a, lda, mr, b, nr > KCC_GEMM_NR ? b2 : b, kq, nr, acc);
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

/* The tile with its dequantisation: on the VNNI path in registers (no store of the sums). */
static void kcc_gemm_tile_s8_dq(const uint8_t *KCC_RESTRICT a, int64_t lda, int64_t mr,
                                const int8_t *KCC_RESTRICT b, const int8_t *KCC_RESTRICT b2, int64_t kq, int64_t nr,
                                const int32_t *KCC_RESTRICT comp, const float *KCC_RESTRICT sa, int64_t sa_step,
                                float *KCC_RESTRICT ob, int64_t ldo)
{
    int32_t acc[KCC_GEMM_MR * 2 * KCC_GEMM_NR];
#if KCC_S8_X86
    if (kcc_s8_native()) {
        if (nr > KCC_GEMM_NR)
            kcc_s8_tile8x2_dq(a, lda, mr, b, b2, kq, nr, acc, comp, sa, sa_step, ob, ldo);
        else
            kcc_s8_tile8_dq(a, lda, mr, b, b, kq, nr, acc, comp, sa, sa_step, ob, ldo);
        return;
    }
#endif
    kcc_s8_tile_c(a, lda, mr, b, nr > KCC_GEMM_NR ? b2 : b, kq, nr, acc);
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
