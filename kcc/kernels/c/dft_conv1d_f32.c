/* Stride-1 conv1d as block DFTs (overlap-save): fewer multiplies for long kernels.
 * x [n_batch, t_in, c_in] -> out [n_batch, t_out, c_out], t_out = t_in + 2*pad - dilation*(K-1),
 * with the conv1d epilogue (+ bias, leaky slope, + res).
 *
 * Dilation d: output rows t = r + d*q (residue r < d) are a dilation-1 correlation over the
 * input rows r + d*q' - pad. Per residue, tile j holds h = n - K + 1 outputs q = j*h + i and
 * reads the n inputs q' = j*h + u (u < n; rows outside [0, t_in) are zero padding); the
 * n-point circular correlation y = IDFT(DFT(x) . conj(DFT(w))) equals the linear one for i < h.
 * Tiles are anchored at q = 0 (kcc_conv_tile_t0, conv_geometry.c), so each output's arithmetic
 * depends only on t: results are identical for any blocking and thread count.
 * Spectrum slots (n/2): slot 0 carries the two real bins 0 and n/2, slot f < n/2 bin f. With
 * X = a + ib the tile's bin and conj(DFT_n(w))_f = c + id (scaled by 2/n; slot 0 by 1/n, powers
 * of two: exact), the product takes three real GEMMs (Gauss), k1 = (a+b).c, k2 = a.(d-c),
 * k3 = b.(c+d): Re = k1 - k3, Im = k1 + k2 (slot 0: X_0.c_0 and X_n/2.c_n/2, two GEMMs), each
 * [tiles, c_in] x [c_in, c_out] on kcc_gemm_tile_f32: 3/4 of a plain complex product's
 * multiplies. The input's bins come from a real FFT (kcc_dft_plan) and the outputs from the same
 * plan run backwards (a real inverse FFT; h of its n outputs are kept).
 * Layout: spec[f][g][p][ci][j] = S_fg[ci][p*NR + j], S_f = (c, d-c, c+d) (slot 0: c_0, c_n/2, 0),
 * the GEMM pack of kcc_conv1d_gemm_f32 (zeros past c_out): a read-only weight made once at lowering
 * (kcc/ops/dft_conv.py, spectrum_pack) from the conv's weight.
 * Short inputs: when n_batch * t_in < min_rows the kernel runs the direct conv on the GEMM pack
 * wp (reading the spectrum would cost more than it saves); the caller picks min_rows.
 * Numerics: the spectrum is made in f64 from the f32 weights and rounded once; the input FFT
 * and the inverse FFT (twiddles rounded from f64), the GEMM (128-term chunks from zero, FMA where
 * the target has it) run in f32 in a fixed order. The DFT basis is unitary, so rounding
 * does not grow with n the way a Winograd transform's does: measured 1.1-2.3x the direct conv's
 * own f32 error (Gauss's sums a + b, c + d and k1 - k3 round once more; tests/test_dft_conv.py). */
#define KCC_DFT_MAX_N 64
#define KCC_DFT_WORK 131072  /* floats per thread (512 KiB of stack): one block's bin and GEMM rows */
#define KCC_DFT_VW 16        /* lane block of the transforms */
/* The 16-wide transform steps and the block driver carry KCC_VECTOR_CLONES (kcc_common.h):
 * portable builds run them on AVX-512 / AVX2 clones picked at load time, with the same results
 * (the driver's clone calls its level's transform clones directly: x1.03 whole synthesis at the
 * AVX-512 level, bit-identical).
 * Prefetches: the next tile's input rows, a lane block at a time while this tile transforms;
 * in the inverse, this lane block's residual rows (the epilogue's misses, perf). Hints only: no
 * effect on results. */
#if defined(__GNUC__)
#define KCC_DFT_PREFETCH(p) __builtin_prefetch(p)
#else
#define KCC_DFT_PREFETCH(p) ((void)(p))
#endif

static int kcc_dft_sizes_ok(int64_t n, int64_t k_size)
{
    return n >= 4 && n <= KCC_DFT_MAX_N && (n & (n - 1)) == 0 && k_size >= 1 && k_size < n;
}

/* The forward transform's plan: a real n-point DFT as an N = n/2-point complex FFT of
 * z_m = x_2m + i x_2m+1 (radix 2, decimation in time: bit-reversed loads, natural-order bins),
 * then X_f = E_f + e^(-2 pi i f/n) O_f with E_f = (Z_f + conj Z_N-f) / 2, O_f = (Z_f - conj Z_N-f) / 2i.
 * Tables in f32, made in f64: twiddles e^(-2 pi i k/N) (k < N/2) and (cos, sin)(2 pi f/n) (f < N). */
typedef struct {
    int64_t half;                                         /* N */
    int64_t rev[KCC_DFT_MAX_N / 2];
    float tw_r[KCC_DFT_MAX_N / 4], tw_i[KCC_DFT_MAX_N / 4];
    float pw_r[KCC_DFT_MAX_N / 2], pw_i[KCC_DFT_MAX_N / 2];
} kcc_dft_plan;

static void kcc_dft_plan_make(int64_t n, kcc_dft_plan *pl)
{
    const int64_t nh = n / 2;
    int64_t bits = 0;
    while (((int64_t)1 << bits) < nh) ++bits;
    pl->half = nh;
    for (int64_t m = 0; m < nh; ++m) {
        int64_t r = 0;
        for (int64_t q = 0; q < bits; ++q) r |= ((m >> q) & 1) << (bits - 1 - q);
        pl->rev[m] = r;
    }
    for (int64_t k = 0; k < nh / 2; ++k) {
        pl->tw_r[k] = (float)cos(6.283185307179586476925 * (double)k / (double)nh);
        pl->tw_i[k] = (float)-sin(6.283185307179586476925 * (double)k / (double)nh);
    }
    for (int64_t f = 0; f < nh; ++f) {
        pl->pw_r[f] = (float)cos(6.283185307179586476925 * (double)f / (double)n);
        pl->pw_i[f] = (float)sin(6.283185307179586476925 * (double)f / (double)n);
    }
}

static const float kcc_dft_zero_row[KCC_DFT_VW] = {0};

/* The forward steps work on whole 16-lane rows through restrict parameters: GCC's -O2
 * (portable builds) vectorises a loop only when it needs no runtime alias check. */
static inline void kcc_dft_butterfly(float *KCC_RESTRICT ar, float *KCC_RESTRICT ai, float *KCC_RESTRICT br,
                                     float *KCC_RESTRICT bi, float wr, float wi)
{
    for (int64_t j = 0; j < KCC_DFT_VW; ++j) {
        const float tr = wr * br[j] - wi * bi[j], ti = wr * bi[j] + wi * br[j];
        br[j] = ar[j] - tr;
        bi[j] = ai[j] - ti;
        ar[j] += tr;
        ai[j] += ti;
    }
}

/* The N = n/2-point complex FFT's radix-2 stages over whole 16-lane rows (bit-reversed in,
 * natural order out), twiddles e^(-2 pi i k/N) with their sine times `sign`: 1 forward, -1 the
 * inverse (an exact negation). */
static inline void kcc_dft_stages(float (*zr)[KCC_DFT_VW], float (*zi)[KCC_DFT_VW], const kcc_dft_plan *pl, float sign)
{
    const int64_t nh = pl->half;
    for (int64_t len = 2; len <= nh; len *= 2)
        for (int64_t s0 = 0; s0 < nh; s0 += len)
            for (int64_t k = 0; k < len / 2; ++k)
                kcc_dft_butterfly(zr[s0 + k], zi[s0 + k], zr[s0 + k + len / 2], zi[s0 + k + len / 2],
                                  pl->tw_r[k * (nh / len)], sign * pl->tw_i[k * (nh / len)]);
}

/* Bin f from Z_f = (pr, pi) and Z_N-f = (qr, qi): X_f = a + ib. */
static inline void kcc_dft_unpack(const float *KCC_RESTRICT pr, const float *KCC_RESTRICT pi,
                                  const float *KCC_RESTRICT qr, const float *KCC_RESTRICT qi, float c, float sn,
                                  float *KCC_RESTRICT a, float *KCC_RESTRICT b)
{
    for (int64_t j = 0; j < KCC_DFT_VW; ++j) {
        const float er = 0.5f * (pr[j] + qr[j]), ei = 0.5f * (pi[j] - qi[j]);
        const float o_r = 0.5f * (pi[j] + qi[j]), o_i = 0.5f * (qr[j] - pr[j]);
        a[j] = er + (c * o_r + sn * o_i);
        b[j] = ei + (c * o_i - sn * o_r);
    }
}

/* Forward transform of one tile over one lane block (lanes [0, NL)): its n input rows
 * x + off[u] (off[u] < 0: zero padding) -> every slot's three GEMM rows, slot f's row g at
 * v + f*fs + g*vs: (a + b, a, b) for X_f = a + ib; slot 0: (X_0, X_n/2, 0). Lanes past NL
 * transform zeros and are not stored. */
#define KCC_DFT_FORWARD_BODY(NL)                                                                  \
    const int64_t nh = pl->half;                                                                  \
    float zr[KCC_DFT_MAX_N / 2][KCC_DFT_VW], zi[KCC_DFT_MAX_N / 2][KCC_DFT_VW];                   \
    float a[KCC_DFT_VW], b[KCC_DFT_VW];                                                           \
    for (int64_t j = 0; j < KCC_DFT_VW; ++j) zr[0][j] = zi[0][j] = 0.0f; /* m = 0 rewrites it: */ \
    /* set anyway, as GCC's -Wmaybe-uninitialized cannot see that the loop below runs */        \
    for (int64_t m = 0; m < nh; ++m) {                                                            \
        const float *KCC_RESTRICT xe = off[2 * m] >= 0 ? x + off[2 * m] : kcc_dft_zero_row;       \
        const float *KCC_RESTRICT xo = off[2 * m + 1] >= 0 ? x + off[2 * m + 1] : kcc_dft_zero_row; \
        float *KCC_RESTRICT dr = zr[pl->rev[m]], *KCC_RESTRICT di = zi[pl->rev[m]];               \
        for (int64_t j = 0; j < (NL); ++j) dr[j] = xe[j];                                         \
        for (int64_t j = 0; j < (NL); ++j) di[j] = xo[j];                                         \
        for (int64_t j = (NL); j < KCC_DFT_VW; ++j) dr[j] = di[j] = 0.0f;                         \
    }                                                                                             \
    kcc_dft_stages(zr, zi, pl, 1.0f);                                                             \
    for (int64_t j = 0; j < (NL); ++j) v[j] = zr[0][j] + zi[0][j];                                \
    for (int64_t j = 0; j < (NL); ++j) v[vs + j] = zr[0][j] - zi[0][j];                           \
    for (int64_t j = 0; j < (NL); ++j) v[2 * vs + j] = 0.0f;                                      \
    for (int64_t f = 1; f < nh; ++f) {                                                            \
        float *KCC_RESTRICT vf = v + f * fs;                                                      \
        kcc_dft_unpack(zr[f], zi[f], zr[nh - f], zi[nh - f], pl->pw_r[f], pl->pw_i[f], a, b);     \
        for (int64_t j = 0; j < (NL); ++j) vf[j] = a[j] + b[j];                                   \
        for (int64_t j = 0; j < (NL); ++j) vf[vs + j] = a[j];                                     \
        for (int64_t j = 0; j < (NL); ++j) vf[2 * vs + j] = b[j];                                 \
    }

KCC_VECTOR_CLONES
static void kcc_dft_forward16_f32(const float *KCC_RESTRICT x, const int64_t *off, const kcc_dft_plan *pl,
                                  int64_t fs, int64_t vs, float *KCC_RESTRICT v)
{
    KCC_DFT_FORWARD_BODY(KCC_DFT_VW)
}

static void kcc_dft_forward_tail_f32(const float *KCC_RESTRICT x, const int64_t *off, const kcc_dft_plan *pl,
                                     int64_t fs, int64_t vs, float *KCC_RESTRICT v, int64_t nl)
{
    KCC_DFT_FORWARD_BODY(nl)
}

/* Inverse transform of one tile over one lane block (lanes [0, NL)): every slot's GEMM rows
 * (slot f's row k_g at m + f*fs + g*ms: Y_f = (k1 - k3) + i(k1 + k2); slot 0: the real Y_0 = k1,
 * Y_n/2 = k2) -> the tile's output rows y_i = ob + t_of[i] (i < rows), stored, where
 * y_i = Y_0 + (-1)^i Y_n/2 + sum_f Re(Y_f e^(2 pi i f i/n)) (the spectrum's 2/n is in the weights).
 * As the forward's plan backwards: the N = n/2-point complex inverse FFT of
 * Z_0 = (Y_0 + Y_n/2) + i(Y_0 - Y_n/2), Z_k = A + i e^(2 pi i k/n) B with A = (Y_k + conj Y_N-k)/2,
 * B = (Y_k - conj Y_N-k)/2 (k and N - k from the same four rows; Z_N/2 = conj Y_N/2), gives
 * z_m = y_2m + i y_2m+1. Lanes past NL carry zeros and are not stored. */
#define KCC_DFT_INVERSE_BODY(NL)                                                                  \
    const int64_t nh = pl->half;                                                                  \
    float zr[KCC_DFT_MAX_N / 2][KCC_DFT_VW], zi[KCC_DFT_MAX_N / 2][KCC_DFT_VW];                   \
    for (int64_t k = 0; k < nh; ++k)                                                              \
        for (int64_t j = (NL); j < KCC_DFT_VW; ++j) zr[k][j] = zi[k][j] = 0.0f;                   \
    for (int64_t j = 0; j < (NL); ++j) {                                                          \
        zr[0][j] = m[j] + m[ms + j];                                                              \
        zi[0][j] = m[j] - m[ms + j];                                                              \
    }                                                                                             \
    for (int64_t k = 1; 2 * k < nh; ++k) {                                                        \
        const float *KCC_RESTRICT p = m + k * fs, *KCC_RESTRICT q = m + (nh - k) * fs;            \
        float *KCC_RESTRICT kr = zr[pl->rev[k]], *KCC_RESTRICT ki = zi[pl->rev[k]];               \
        float *KCC_RESTRICT lr = zr[pl->rev[nh - k]], *KCC_RESTRICT li = zi[pl->rev[nh - k]];     \
        const float c = pl->pw_r[k], sn = pl->pw_i[k];                                            \
        for (int64_t j = 0; j < (NL); ++j) {                                                      \
            const float ykr = p[j] - p[2 * ms + j], yki = p[j] + p[ms + j];                       \
            const float ylr = q[j] - q[2 * ms + j], yli = q[j] + q[ms + j];                       \
            const float ar = 0.5f * (ykr + ylr), ai = 0.5f * (yki - yli);                         \
            const float br = 0.5f * (ykr - ylr), bi = 0.5f * (yki + yli);                         \
            const float er = c * br - sn * bi, ei = c * bi + sn * br;          /* e^(2 pi i k/n) B */ \
            kr[j] = ar - ei;                                                                      \
            ki[j] = ai + er;                                                                      \
            lr[j] = ar + ei;                                                                      \
            li[j] = er - ai;                                                                      \
        }                                                                                         \
    }                                                                                             \
    {                                                   /* Z_N/2 (n >= 4: kcc_dft_sizes_ok) */    \
        const float *KCC_RESTRICT p = m + nh / 2 * fs;                                            \
        float *KCC_RESTRICT kr = zr[pl->rev[nh / 2]], *KCC_RESTRICT ki = zi[pl->rev[nh / 2]];     \
        for (int64_t j = 0; j < (NL); ++j) {                                                      \
            kr[j] = p[j] - p[2 * ms + j];                                                         \
            ki[j] = -(p[j] + p[ms + j]);                                                          \
        }                                                                                         \
    }                                                                                             \
    kcc_dft_stages(zr, zi, pl, -1.0f);                                                            \
    for (int64_t i = 0; i < rows; ++i) {                                                          \
        float *KCC_RESTRICT y = ob + t_of[i];                                                     \
        const float *KCC_RESTRICT z = (i & 1) ? zi[i / 2] : zr[i / 2];                            \
        for (int64_t j = 0; j < (NL); ++j) y[j] = z[j];                                           \
    }

KCC_VECTOR_CLONES
static void kcc_dft_inverse16_f32(float *KCC_RESTRICT ob, const int64_t *t_of, int64_t rows, const kcc_dft_plan *pl,
                                  int64_t fs, int64_t ms, const float *KCC_RESTRICT m)
{
    KCC_DFT_INVERSE_BODY(KCC_DFT_VW)
}

static void kcc_dft_inverse_tail_f32(float *KCC_RESTRICT ob, const int64_t *t_of, int64_t rows, const kcc_dft_plan *pl,
                                     int64_t fs, int64_t ms, const float *KCC_RESTRICT m, int64_t nl)
{
    KCC_DFT_INVERSE_BODY(nl)
}

/* A slot's GEMM (kcc_gemm_packed_f32), called through a pointer, not inlined: next to the
 * transform loops compilers spill the GEMM tile's accumulators (as in norm_conv1d_f32.c). */
static void (*const volatile kcc_dft_slot_gemm)(const float *, int64_t, int64_t, const float *, int64_t, int64_t,
                                                float *, int64_t, int64_t) = kcc_gemm_packed_f32;

/* Floats of work one tile takes: n/2 + 1 regions of three GEMM rows as wide as the wider side. */
static int64_t kcc_dft_tile_work(int64_t n, int64_t c_in, int64_t ldm)
{
    return (n / 2 + 1) * 3 * (c_in > ldm ? c_in : ldm);
}

/* One block: tiles g in [g0, g1) (tile j = g / d of residue r = g % d: the residues interleave,
 * so a block's input and output rows are contiguous), epilogue included.
 * Each tile is transformed whole (the FFT makes every bin at once; the inverse FFT needs every
 * slot's products and writes its h output rows while they sit in L1), so every slot's GEMM rows
 * are held at once: work
 * holds n/2 + 1 regions of three rows per tile (width w), slot f's bins in region f + 1 and its
 * GEMM products in region f, where slot f - 1's bins were (already consumed). A block is as many
 * whole 8-row GEMM tiles as fit: each block re-reads the whole spectrum. */
/* The weights' number format: f32 (kcc_dft_conv1d_f32), or bf16 with input channels in pairs
 * (kcc_dft_conv1d_bf16, dft_conv1d_bf16.c): its slot GEMM, its direct conv for short inputs, and
 * whether the spectrum's rows hold channel pairs. */
typedef struct {
    void (*slot_gemm)(const float *, int64_t, int64_t, const float *, int64_t, int64_t, float *, int64_t, int64_t);
    int (*direct)(const float *, int64_t, int64_t, int64_t, const float *, const float *, int64_t, int64_t, int64_t,
                  int64_t, int64_t, int64_t, float, const float *, int64_t, float *);
    int64_t pairs;
} kcc_dft_format;

KCC_VECTOR_CLONES
static void kcc_dft_conv_block_f32(const kcc_dft_format *fmt, const float *KCC_RESTRICT xb, int64_t t_in, int64_t c_in,
                                   const float *KCC_RESTRICT spec, int64_t n, int64_t c_out, int64_t k_size,
                                   int64_t pad, int64_t d, int64_t t_out, int64_t g0, int64_t g1,
                                   const kcc_dft_plan *pl, const float *KCC_RESTRICT bias,
                                   float neg_slope, const float *KCC_RESTRICT rb, int64_t has_res,
                                   float *KCC_RESTRICT work, float *KCC_RESTRICT ob)
{
    const int64_t h = n - k_size + 1, tiles = g1 - g0;
    const int64_t panels = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR, ldm = panels * KCC_GEMM_NR;
    const int64_t part = panels * (fmt->pairs ? (c_in + 1) / 2 : c_in) * KCC_GEMM_NR, w = c_in > ldm ? c_in : ldm;
    /* Row stride: one lane block past tiles * w (often a multiple of 4 KiB), so a tile's rows in
     * the regions fall in different L1 sets. */
    const int64_t rs = tiles * w + KCC_DFT_VW;
#define KCC_DFT_ROW(r, g, tt) (work + ((r) * 3 + (g)) * rs + (tt) * w)
    int64_t off[KCC_DFT_MAX_N], t_of[KCC_DFT_MAX_N];
    for (int64_t tt = 0; tt < tiles; ++tt) {                      /* every slot's bins of each tile */
        const int64_t first = kcc_conv_tile_t0(g0 + tt, d, h) - pad;          /* input row of u = 0 */
        for (int64_t u = 0; u < n; ++u) {
            const int64_t row = first + d * u;
            off[u] = row >= 0 && row < t_in ? row * c_in : -1;
        }
        const int64_t next = kcc_conv_tile_t0(g0 + tt + 1, d, h) - pad;       /* the next tile's */
        for (int64_t c0 = 0; c0 < c_in; c0 += KCC_DFT_VW) {
            float *v = KCC_DFT_ROW(1, 0, tt) + c0;
            for (int64_t u = 0; u < n && tt + 1 < tiles; ++u) {   /* the next tile's lane block, ahead */
                const int64_t row = next + d * u;
                if (row >= 0 && row < t_in) KCC_DFT_PREFETCH(xb + row * c_in + c0);
            }
            if (c_in - c0 >= KCC_DFT_VW)
                kcc_dft_forward16_f32(xb + c0, off, pl, 3 * rs, rs, v);
            else
                kcc_dft_forward_tail_f32(xb + c0, off, pl, 3 * rs, rs, v, c_in - c0);
        }
    }
    for (int64_t f = 0; f < n / 2; ++f)                           /* slot 0 has no third product */
        for (int g = 0; g < (f > 0 ? 3 : 2); ++g)
            fmt->slot_gemm(KCC_DFT_ROW(f + 1, g, 0), w, tiles, spec + f * 3 * part + g * part, c_in, ldm,
                              KCC_DFT_ROW(f, g, 0), w, 1);
    for (int64_t tt = 0; tt < tiles; ++tt) {                      /* inverse: each tile's output rows */
        const int64_t t0 = kcc_conv_tile_t0(g0 + tt, d, h);
        int64_t rows = 0;
        while (rows < h && t0 + d * rows < t_out) {
            t_of[rows] = (t0 + d * rows) * c_out;
            ++rows;
        }
        for (int64_t c0 = 0; c0 < c_out; c0 += KCC_DFT_VW) {
            for (int64_t i = 0; has_res && i < rows; ++i)   /* this lane block's residual rows */
                KCC_DFT_PREFETCH(rb + t_of[i] + c0);
            const float *mr = KCC_DFT_ROW(0, 0, tt) + c0;
            if (c_out - c0 >= KCC_DFT_VW)
                kcc_dft_inverse16_f32(ob + c0, t_of, rows, pl, 3 * rs, rs, mr);
            else
                kcc_dft_inverse_tail_f32(ob + c0, t_of, rows, pl, 3 * rs, rs, mr, c_out - c0);
        }
        for (int64_t i = 0; i < rows; ++i)                        /* the epilogue while the rows are in L1 */
            kcc_conv_epilogue_f32(ob, c_out, t0 + d * i, t0 + d * i + 1, bias, 1, neg_slope, rb, has_res);
    }
#undef KCC_DFT_ROW
}

static int kcc_dft_conv1d_on(const kcc_dft_format *fmt, const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in,
                             int64_t c_in, const float *KCC_RESTRICT wp, const float *KCC_RESTRICT spec, int64_t n,
                             int64_t min_rows, const float *KCC_RESTRICT bias, int64_t c_out, int64_t k_size,
                             int64_t pad, int64_t dilation, float neg_slope, const float *KCC_RESTRICT res,
                             int64_t has_res, float *KCC_RESTRICT out)
{
    if (n_batch < 1 || t_in < 1 || c_in < 1 || c_out < 1 || pad < 0 || dilation < 1 || !kcc_dft_sizes_ok(n, k_size))
        return KCC_EDIMS;
    if (n_batch * t_in < min_rows)       /* short input: run direct, the spectrum is not read */
        return fmt->direct(x, n_batch, t_in, c_in, wp, bias, 1, c_out, k_size, 1, pad, dilation, neg_slope, res,
                           has_res, out);
    const int64_t t_out = t_in + 2 * pad - dilation * (k_size - 1);
    const int64_t ldm = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR * KCC_GEMM_NR;
    const int64_t per_tile = kcc_dft_tile_work(n, c_in, ldm);
    const int64_t area = KCC_DFT_WORK - (n / 2 + 1) * 3 * KCC_DFT_VW;   /* less the rows' padding */
    if (t_out < 1 || per_tile > area) return KCC_EDIMS;
    kcc_dft_plan plan;
    kcc_dft_plan_make(n, &plan);
    const int64_t h = n - k_size + 1;
    const int64_t all = kcc_conv_tiles(t_out, dilation, h);         /* every residue's tiles */
    /* Blocks of tiles: at most as many whole 8-row GEMM tiles as the work area holds (the
     * spectrum is re-read once per block, and a remainder row block costs a full tile call), the
     * same number per thread and the tiles shared evenly (kcc_share_blocks), so the threads
     * finish together. Results do not depend on it (kcc/ops/dft_conv.py, tiles_per_block,
     * mirrors the block size for the cost model). */
    const int64_t fit = area / per_tile, fit8 = fit >= KCC_GEMM_MR ? fit / KCC_GEMM_MR * KCC_GEMM_MR : fit;
    const int64_t blocks = kcc_share_blocks(all, fit8);
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * t_in * c_in, *rb = has_res ? res + b * t_out * c_out : res;
        float *ob = out + b * t_out * c_out;
        KCC_PARALLEL_FOR   /* a block writes the rows of its tiles only */
        for (int64_t blk = 0; blk < blocks; ++blk) {
            float work[KCC_DFT_WORK];
            const int64_t g0 = kcc_block_start(blk, all, blocks), g1 = kcc_block_start(blk + 1, all, blocks);
            if (g1 == g0) continue;        /* fewer tiles than threads * blocks: an empty block */
            kcc_dft_conv_block_f32(fmt, xb, t_in, c_in, spec, n, c_out, k_size, pad, dilation, t_out, g0, g1, &plan,
                                   bias, neg_slope, rb, has_res, work, ob);
        }
    }
    return KCC_OK;
}

static int kcc_dft_conv1d_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                              const float *KCC_RESTRICT wp, const float *KCC_RESTRICT spec, int64_t n,
                              int64_t min_rows, const float *KCC_RESTRICT bias, int64_t c_out, int64_t k_size,
                              int64_t pad, int64_t dilation, float neg_slope, const float *KCC_RESTRICT res,
                              int64_t has_res, float *KCC_RESTRICT out)
{
    const kcc_dft_format fmt = {kcc_dft_slot_gemm, kcc_conv1d_gemm_f32, 0};
    return kcc_dft_conv1d_on(&fmt, x, n_batch, t_in, c_in, wp, spec, n, min_rows, bias, c_out, k_size, pad, dilation,
                             neg_slope, res, has_res, out);
}
