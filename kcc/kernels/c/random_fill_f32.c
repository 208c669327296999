/* Seeded pseudo-random fill, counter based so every element is a pure function of
 * (seed, stream, index) and independent of layout or of how much was drawn before:
 *   key  = splitmix64(seed) ^ splitmix64(stream + 0x632BE59BD9B4E019)
 *   u(i) = top 53 bits of splitmix64(key + (i + 1) * 0x9E3779B97F4A7C15), as (bits + 0.5) / 2^53,
 * strictly inside (0, 1). dist 0: uniform [0, 1) (the f64 value rounded to f32, clamped below 1).
 * dist 1: standard normal by Box-Muller on the pair (u(2p), u(2p+1)): element 2p gets
 * r*cos(theta), 2p+1 gets r*sin(theta), r = sqrt(-2 ln u(2p)), theta = 2*pi*u(2p+1), in f64.
 * ln, cos and sin are the branch-free kcc_rng_log / kcc_rng_sincos2pi below (within a few double
 * ulps of libm's), so the loop vectorises; rounded to f32 the values are libm's but for rare
 * last-bit ties (tests/test_signal_ops.py).
 * This is not torch's generator: it serves seeded production runs, not bit parity. */
#define KCC_RNG_BLOCK 256   /* normal pairs per block */

KCC_FORCE_INLINE uint64_t kcc_rng_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

KCC_FORCE_INLINE double kcc_rng_open01(uint64_t key, uint64_t i)
{
    const uint64_t r = kcc_rng_mix64(key + (i + 1u) * 0x9E3779B97F4A7C15ull);
    return ((double)(r >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* ln x for normal x > 0 (here u in (2^-54, 1)): x = m 2^e with m in [sqrt(1/2), sqrt(2)) from the
 * exponent bits, ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, the odd series to s^21
 * (remainder below 1e-17 relative), plus e ln 2 in two parts. */
KCC_FORCE_INLINE double kcc_rng_log(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int64_t e = (int64_t)(bits >> 52) - 1023;
    bits = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;      /* m in [1, 2) */
    double m;
    memcpy(&m, &bits, sizeof m);
    const int big = m > 1.4142135623730951;
    m = big ? 0.5 * m : m;
    e += big;
    const double s = (m - 1.0) / (m + 1.0), s2 = s * s;
    double t = 2.0 / 21.0;
    t = t * s2 + 2.0 / 19.0;
    t = t * s2 + 2.0 / 17.0;
    t = t * s2 + 2.0 / 15.0;
    t = t * s2 + 2.0 / 13.0;
    t = t * s2 + 2.0 / 11.0;
    t = t * s2 + 2.0 / 9.0;
    t = t * s2 + 2.0 / 7.0;
    t = t * s2 + 2.0 / 5.0;
    t = t * s2 + 2.0 / 3.0;
    const double ed = (double)e;
    return ed * KCC_LN2_HI + (2.0 * s + (s * s2 * t + ed * KCC_LN2_LO));
}

/* cos and sin of 2 pi u for u in [0, 1]: the quadrant q = round(4u) is taken from u itself, so the
 * reduction r = u - q/4 in [-1/8, 1/8] is exact; then Taylor series of a = 2 pi r (|a| <= pi/4) to
 * a^16 / a^17 (remainder below 2e-17) and the quadrant's rotation, all selects. */
KCC_FORCE_INLINE void kcc_rng_sincos2pi(double u, double *c, double *s)
{
    const double q = (4.0 * u + KCC_ROUND_SHIFT) - KCC_ROUND_SHIFT, r = u - 0.25 * q;
    const double a = r * 6.283185307179586476925, a2 = a * a;
    double cp = 1.0 / 20922789888000.0;                          /* 1/16! */
    cp = cp * a2 - 1.0 / 87178291200.0;
    cp = cp * a2 + 1.0 / 479001600.0;
    cp = cp * a2 - 1.0 / 3628800.0;
    cp = cp * a2 + 1.0 / 40320.0;
    cp = cp * a2 - 1.0 / 720.0;
    cp = cp * a2 + 1.0 / 24.0;
    cp = cp * a2 - 0.5;
    const double ca = 1.0 + a2 * cp;
    double sp = 1.0 / 355687428096000.0;                         /* 1/17! */
    sp = sp * a2 - 1.0 / 1307674368000.0;
    sp = sp * a2 + 1.0 / 6227020800.0;
    sp = sp * a2 - 1.0 / 39916800.0;
    sp = sp * a2 + 1.0 / 362880.0;
    sp = sp * a2 - 1.0 / 5040.0;
    sp = sp * a2 + 1.0 / 120.0;
    sp = sp * a2 - 1.0 / 6.0;
    const double sa = a + a * a2 * sp;
    const int64_t k = (int64_t)q & 3;                            /* q = 4 is a whole turn */
    *c = k == 0 ? ca : (k == 1 ? -sa : (k == 2 ? -ca : sa));
    *s = k == 0 ? sa : (k == 1 ? ca : (k == 2 ? -sa : -ca));
}

/* Normal pair p: (r cos(theta), r sin(theta)) of (u(2p), u(2p + 1)), in f64. */
KCC_FORCE_INLINE void kcc_rng_normal_pair(uint64_t key, int64_t p, double *KCC_RESTRICT z0, double *KCC_RESTRICT z1)
{
    const double u1 = kcc_rng_open01(key, (uint64_t)(2 * p));
    const double u2 = kcc_rng_open01(key, (uint64_t)(2 * p + 1));
    double c, s;
    kcc_rng_sincos2pi(u2, &c, &s);
    const double r = sqrt(-2.0 * kcc_rng_log(u1));
    *z0 = r * c;
    *z1 = r * s;
}

/* nb normal pairs from pair p0 into z0, z1, through KCC_FOR16 (constant-trip blocks), so
 * portable -O2 builds (and their clones) vectorise it too; each pair is a function of p alone. */
KCC_VECTOR_CLONES
static void kcc_rng_normal_block(uint64_t key, int64_t p0, int64_t nb, double *KCC_RESTRICT z0,
                                 double *KCC_RESTRICT z1)
{
    KCC_FOR16(nb, kcc_rng_normal_pair(key, p0 + j, z0 + j, z1 + j););
}

static int kcc_random_fill_f32(const int32_t *KCC_RESTRICT seed, int64_t stream, int64_t dist, int64_t n,
                               float *KCC_RESTRICT out)
{
    if (n < 0 || stream < 0 || (dist != 0 && dist != 1)) return KCC_EBADINPUT;
    const uint64_t key = kcc_rng_mix64((uint64_t)(uint32_t)seed[0])
                       ^ kcc_rng_mix64((uint64_t)stream + 0x632BE59BD9B4E019ull);
    if (dist == 0) {
        KCC_PARALLEL_FOR   /* each element is a pure function of its index: any split, same bits */
        for (int64_t i = 0; i < n; ++i) {
            const float u = (float)kcc_rng_open01(key, (uint64_t)i);
            out[i] = u < 1.0f ? u : 0x1.fffffep-1f;
        }
        return KCC_OK;
    }
    /* Blocks of pairs: the pairs into two local rows (a loop the compiler vectorises), then
     * interleaved into out. */
    const int64_t pairs = (n + 1) / 2, blocks = (pairs + KCC_RNG_BLOCK - 1) / KCC_RNG_BLOCK;
    KCC_PARALLEL_FOR
    for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t p0 = blk * KCC_RNG_BLOCK, nb = pairs - p0 < KCC_RNG_BLOCK ? pairs - p0 : KCC_RNG_BLOCK;
        double z0[KCC_RNG_BLOCK], z1[KCC_RNG_BLOCK];
        kcc_rng_normal_block(key, p0, nb, z0, z1);
        for (int64_t j = 0; j < nb; ++j) {
            out[2 * (p0 + j)] = (float)z0[j];
            if (2 * (p0 + j) + 1 < n) out[2 * (p0 + j) + 1] = (float)z1[j];
        }
    }
    return KCC_OK;
}
