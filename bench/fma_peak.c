/* FP32 peak of one core: 16 independent AVX-512 FMA chains held in registers (no loads), the
 * ceiling the GEMM tiles are measured against. Not part of kcc's build.
 *   cc -O3 -march=native -funroll-loops bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak */
#define _POSIX_C_SOURCE 199309L
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void)
{
    __m512 acc[16];
    for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_ps((float)i * 1e-3f);
    const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-6f);
    const long n = 400000000;                   /* FMAs of 16 lanes */
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        const double t0 = now();
        for (long it = 0; it < n / 16; ++it)
            for (int i = 0; i < 16; i++) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
        const double t = now() - t0;
        if (t < best) best = t;
    }
    float s = 0.0f;
    for (int i = 0; i < 16; i++) s += _mm512_reduce_add_ps(acc[i]);
    printf("%.1f GFLOP/s per core (checksum %g)\n", (double)n * 16.0 * 2.0 / best / 1e9, s);
    return 0;
}
