/* Shared by every kcc kernel: status codes and the restrict spelling. Model-name free. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#define KCC_OK 0
#define KCC_EBADINPUT -1   /* an input value (id, length, extent) is out of its declared range */
#define KCC_EARENA -2      /* activation arena too small or misaligned */
#define KCC_EWEIGHTS -3    /* weight blob of the wrong size or misaligned */
#define KCC_EDIMS -4       /* a runtime dimension is outside the planned range */
#define KCC_ENULL -5       /* a required pointer is NULL */

#define KCC_RESTRICT restrict

/* Threading: kernels mark their outer loops with KCC_PARALLEL_FOR. Built without -fopenmp
 * the macro is empty (and no pragma reaches -Wunknown-pragmas); with it, each marked loop
 * splits statically across the threads set by the entry point's set_threads. */
#ifdef _OPENMP
#include <omp.h>
#define KCC_PARALLEL_FOR _Pragma("omp parallel for schedule(static)")
#define KCC_PARALLEL_FOR_COLLAPSE2 _Pragma("omp parallel for collapse(2) schedule(static)")
#else
#define KCC_PARALLEL_FOR
#define KCC_PARALLEL_FOR_COLLAPSE2
#endif

/* The threads a KCC_PARALLEL_FOR here would run on (1 in serial builds). */
static inline int64_t kcc_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Items per block when n items are cut for a KCC_PARALLEL_FOR: at most max_per, the blocks of
 * equal size and their count a whole number of rounds for the threads (66 rows, at most 64, on
 * 2 threads: 33 + 33, not 64 + 2). Kernels use it only where results do not depend on the cut. */
static inline int64_t kcc_split_even(int64_t n, int64_t max_per)
{
    if (n < 1 || max_per < 1) return 1;
    const int64_t threads = kcc_max_threads();
    int64_t blocks = (n + max_per - 1) / max_per;
    blocks = (blocks + threads - 1) / threads * threads;
    return (n + blocks - 1) / blocks;
}

/* Blocks for n items of uneven cost per block (a block of tiles re-reads a whole weight set): a
 * whole number bpt of blocks per thread, each at most max_per items, sizes differing by at most
 * one, block b covering [kcc_block_start(b), kcc_block_start(b + 1)). With KCC_PARALLEL_FOR's
 * static schedule thread t runs blocks [t*bpt, (t+1)*bpt): n/threads items each, +-1, and bpt
 * weight passes each (kcc_split_even's equal blocks gave 99 tiles, at most 8 a block, on 2
 * threads as 13 blocks: 56 tiles + 43). Kernels use it only where results do not depend on the cut. */
static inline int64_t kcc_share_blocks(int64_t n, int64_t max_per)
{
    if (n < 1 || max_per < 1) return 1;
    const int64_t most = kcc_max_threads(), threads = most < n ? most : n;
    const int64_t share = (n + threads - 1) / threads;
    return threads * ((share + max_per - 1) / max_per);
}

static inline int64_t kcc_block_start(int64_t b, int64_t n, int64_t blocks)
{
    return b * n / blocks;
}

/* Mean and 1/sqrt(biased variance + eps) of n floats, both accumulated in double (two passes):
 * the statistics contract every row normalisation (LayerNorm and its variants) shares. */
static inline void kcc_mean_rstd_f64(const float *x, int64_t n, float eps, double *mean, double *rstd)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const double mu = sum / (double)n;
    double var = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = (double)x[i] - mu;
        var += d * d;
    }
    *mean = mu;
    *rstd = 1.0 / sqrt(var / (double)n + (double)eps);
}

/* A helper the vectoriser must see inside its caller's loop: GCC's -O2 (portable builds) may
 * leave a larger static inline function as a call, and a call in a loop body stops it. */
#if defined(__GNUC__)
#define KCC_FORCE_INLINE static inline __attribute__((always_inline))
#else
#define KCC_FORCE_INLINE static inline
#endif

/* c ? a : b as a bit mask, for loops that must vectorise at every level. Written as a conditional
 * expression, a float select was if-converted by GCC 12's vectoriser (ISO C's trapping math) only
 * with AVX-512's masked operations: the AVX2 and SSE2 code of such loops stayed scalar (the conv
 * epilogue's leaky slope, the sums' activation, exp's clamps). Both operands are evaluated; the
 * result has the chosen one's exact bits, so every level keeps the same results. */
KCC_FORCE_INLINE float kcc_select_f32(int c, float a, float b)
{
    uint32_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    const uint32_t m = (uint32_t)0 - (uint32_t)(c != 0), r = (ua & m) | (ub & ~m);
    float out;
    memcpy(&out, &r, sizeof out);
    return out;
}

KCC_FORCE_INLINE double kcc_select_f64(int c, double a, double b)
{
    uint64_t ua, ub;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    const uint64_t m = (uint64_t)0 - (uint64_t)(c != 0), r = (ua & m) | (ub & ~m);
    double out;
    memcpy(&out, &r, sizeof out);
    return out;
}

/* Leaky ReLU: v where v >= 0, else v * slope (NaN: v * slope). */
KCC_FORCE_INLINE float kcc_leaky_f32(float v, float slope)
{
    return kcc_select_f32(v >= 0.0f, v, v * slope);
}

/* (x + KCC_ROUND_SHIFT) - KCC_ROUND_SHIFT is x rounded to an integer (ties to even) for
 * |x| < 2^51, in two additions that vectorise (GCC 12 vectorises neither floor nor rint in ISO C
 * mode). ln 2 = KCC_LN2_HI + KCC_LN2_LO, the high part with 21 trailing zero bits: k * KCC_LN2_HI
 * is exact for |k| < 2^21. */
#define KCC_ROUND_SHIFT 6755399441055744.0     /* 1.5 * 2^52 */
#define KCC_LN2_HI 6.93147180369123816490e-01
#define KCC_LN2_LO 1.90821492927058770002e-10

/* e^z in double, z saturated to [-708, 708] (e^-708 ~ 3e-308 adds nothing beside 1 and is 0
 * in f32; e^708 makes any 1 / (1 + e^z) 0 in f32); NaN gives NaN. z = k ln2 + r with
 * |r| <= ln2/2 (k rounded by the 1.5 * 2^52 trick, ln2 in two parts), e^r by its Taylor series
 * to r^13 (remainder below 4e-18), 2^k through the exponent bits. Within a few double ulps of
 * libm's exp and branch-free, so a loop over it vectorises (libm's exp is a call per element).
 * No FMA is contracted in ISO C mode, so every build and clone gives the same bits. */
static inline double kcc_exp_f64(double z)
{
    z = kcc_select_f64(z < -708.0, -708.0, kcc_select_f64(z > 708.0, 708.0, z));   /* NaN passes */
    const double k = (z * 1.4426950408889634 + KCC_ROUND_SHIFT) - KCC_ROUND_SHIFT;   /* round(z / ln2) */
    const double r = (z - k * KCC_LN2_HI) - k * KCC_LN2_LO;
    double p = 1.0 / 6227020800.0;                                /* 1/13! */
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const double kc = kcc_select_f64(k > -1022.0, kcc_select_f64(k < 1023.0, k, 1023.0), -1022.0);   /* NaN z: r carries it */
    /* 2^kc: the biased exponent kc + 1023 (1..2046) read from the low bits of (kc + 1023) + 2^52,
     * exact, instead of a double -> int64 conversion, which has a vector instruction only in
     * AVX-512 (AVX2 code of the loops around exp stayed scalar). */
    const double biased = (kc + 1023.0) + 4503599627370496.0;
    uint64_t bits;
    memcpy(&bits, &biased, sizeof bits);
    bits = (bits - UINT64_C(0x4330000000000000)) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* 1 / (1 + e^-v) in double on kcc_exp_f64, rounded once to f32; NaN stays NaN. */
static inline float kcc_sigmoid_f32(float v)
{
    return (float)(1.0 / (1.0 + kcc_exp_f64(-(double)v)));
}

/* tanh in double, rounded once to f32: (1 - e^-2|x|) / (1 + e^-2|x|) with x's sign, and below
 * |x| = 1/16 (where 1 - e^-2|x| would cancel) its odd Taylor series to x^15 (remainder below
 * 1e-20 relative). Both are computed and one selected: no branch, the loop vectorises. */
static inline float kcc_tanh_f32(float v)
{
    const double x = (double)v, a = fabs(x), x2 = x * x;
    const double e = kcc_exp_f64(-2.0 * a);
    const double big = (1.0 - e) / (1.0 + e);
    double s = -929569.0 / 638512875.0;                             /* x^15 */
    s = s * x2 + 21844.0 / 6081075.0;
    s = s * x2 - 1382.0 / 155925.0;
    s = s * x2 + 62.0 / 2835.0;
    s = s * x2 - 17.0 / 315.0;
    s = s * x2 + 2.0 / 15.0;
    s = s * x2 - 1.0 / 3.0;
    const double small = x + x * x2 * s;
    return (float)kcc_select_f64(a < 0.0625, small, copysign(big, x));
}

/* for (j = 0; j < n; ++j) STMT, as blocks of 16 with a constant trip count and a scalar tail:
 * GCC's -O2 (portable builds) vectorises only loops whose trip count is known, so hot loops
 * over a runtime length go through this (inside KCC_VECTOR_CLONES functions, 16 lanes of
 * AVX-512). STMT sees the index as the const int64_t j; every j runs the same STMT. */
#define KCC_FOR16(n, STMT)                                                                        \
    do {                                                                                          \
        const int64_t kcc_full_ = (n) / 16 * 16;                                                  \
        for (int64_t kcc_j0_ = 0; kcc_j0_ < kcc_full_; kcc_j0_ += 16)                             \
            for (int64_t kcc_jj_ = 0; kcc_jj_ < 16; ++kcc_jj_) {                                  \
                const int64_t j = kcc_j0_ + kcc_jj_;                                              \
                STMT                                                                              \
            }                                                                                     \
        for (int64_t j = kcc_full_; j < (n); ++j) {                                               \
            STMT                                                                                  \
        }                                                                                         \
    } while (0)


/* fmaf is one instruction with FMA hardware but a slow libm call without it. */
#if defined(__FMA__)
#define KCC_MADD(a, b, c) fmaf((a), (b), (c))
#else
#define KCC_MADD(a, b, c) ((a) * (b) + (c))
#endif

/* Portable builds stay baseline x86-64 but dispatch their hottest micro-kernels at load time
 * to AVX-512 / AVX2 clones (GCC target_clones, glibc ifunc). No FMA is contracted in ISO C mode,
 * and each clone keeps every lane's summation order, so all clones give identical results.
 * Dispatch levels (kcc/isa.py): 0 baseline (SSE2), 1 AVX2 without the fused GEMM twins,
 * 2 AVX2 + FMA (x86-64-v3), 3 AVX-512 (x86-64-v4). -DKCC_ISA_LEVEL=n (BuildOptions.isa,
 * KCC_ISA) forces one: each hot kernel is compiled for that target alone (no resolver), and the
 * GEMM tile choice follows it, so one machine can run every path a CPU takes. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(__AVX2__)
#define KCC_X86_PORTABLE 1
#else
#define KCC_X86_PORTABLE 0
#endif

#if defined(KCC_ISA_LEVEL)
#if !KCC_X86_PORTABLE
#error "KCC_ISA_LEVEL forces a portable x86-64 GCC build's dispatch; this build has none"
#endif
#if KCC_ISA_LEVEL == 3
#define KCC_VECTOR_CLONES __attribute__((target("arch=x86-64-v4")))
#elif KCC_ISA_LEVEL == 1 || KCC_ISA_LEVEL == 2
#define KCC_VECTOR_CLONES __attribute__((target("arch=x86-64-v3")))
#elif KCC_ISA_LEVEL == 0
#define KCC_VECTOR_CLONES
#else
#error "KCC_ISA_LEVEL is 0 (baseline), 1 (avx2), 2 (avx2fma) or 3 (avx512)"
#endif
#define KCC_FMA_VERSIONS (KCC_ISA_LEVEL >= 2)
#elif KCC_X86_PORTABLE && !defined(__SANITIZE_ADDRESS__)
/* (sanitizer builds carry no clones; a forced level, which needs no resolver, applies to them) */
#define KCC_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define KCC_FMA_VERSIONS 1   /* such builds also carry fused-multiply-add twins of the GEMM tiles */
#else
#define KCC_VECTOR_CLONES
#define KCC_FMA_VERSIONS 0
#endif

/* The level this library runs at on this CPU: forced, else what GCC's clone resolver picks
 * (x86-64-v4, else v3, else default; the FMA twins ride with the v3 / v4 clones, so an FMA CPU
 * without AVX2 never runs __builtin_fmaf as a libm call), else what the compiler targets;
 * -1 off x86-64. */
static inline int kcc_isa_level_now(void)
{
#if defined(KCC_ISA_LEVEL)
    return KCC_ISA_LEVEL;
#elif KCC_X86_PORTABLE && !defined(__SANITIZE_ADDRESS__)
    return __builtin_cpu_supports("x86-64-v4") ? 3 : __builtin_cpu_supports("x86-64-v3") ? 2 : 0;
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
    return 3;
#elif defined(__AVX2__) && defined(__FMA__)
    return 2;
#elif defined(__AVX2__)
    return 1;
#elif defined(__x86_64__)
    return 0;
#else
    return -1;
#endif
}

/* The same, for the caller (kcc/isa.py: library_level). Weak: kcc export links every stage's
 * translation unit, each with its copy. */
#if defined(__GNUC__)
__attribute__((weak)) int kcc_isa_level(void) { return kcc_isa_level_now(); }
#endif
