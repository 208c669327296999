/* Seeded pseudo-random fill, counter based so every element is a pure function of
 * (seed, stream, index) and independent of layout or of how much was drawn before:
 *   key  = splitmix64(seed) ^ splitmix64(stream + 0x632BE59BD9B4E019)
 *   u(i) = top 53 bits of splitmix64(key + (i + 1) * 0x9E3779B97F4A7C15), as (bits + 0.5) / 2^53,
 * strictly inside (0, 1). dist 0: uniform [0, 1) (the f64 value rounded to f32, clamped below 1).
 * dist 1: standard normal by Box-Muller on the pair (u(2p), u(2p+1)): element 2p gets
 * r*cos(theta), 2p+1 gets r*sin(theta), r = sqrt(-2 ln u(2p)), theta = 2*pi*u(2p+1), in f64.
 * This is not torch's generator: it serves seeded production runs, not bit parity. */
static uint64_t kcc_rng_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double kcc_rng_open01(uint64_t key, uint64_t i)
{
    const uint64_t r = kcc_rng_mix64(key + (i + 1u) * 0x9E3779B97F4A7C15ull);
    return ((double)(r >> 11) + 0.5) * (1.0 / 9007199254740992.0);
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
    KCC_PARALLEL_FOR
    for (int64_t p = 0; p < (n + 1) / 2; ++p) {
        const double u1 = kcc_rng_open01(key, (uint64_t)(2 * p));
        const double u2 = kcc_rng_open01(key, (uint64_t)(2 * p + 1));
        const double r = sqrt(-2.0 * log(u1)), th = 2.0 * 3.14159265358979323846 * u2;
        out[2 * p] = (float)(r * cos(th));
        if (2 * p + 1 < n) out[2 * p + 1] = (float)(r * sin(th));
    }
    return KCC_OK;
}
