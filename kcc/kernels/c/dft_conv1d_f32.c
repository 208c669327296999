/* Stride-1 conv1d as block DFTs (overlap-save): fewer multiplies for long kernels.
 * x [n_batch, t_in, c_in] -> out [n_batch, t_out, c_out], t_out = t_in + 2*pad - dilation*(K-1),
 * with the conv1d epilogue (+ bias, leaky slope, + res).
 *
 * Dilation d: output rows t = r + d*q (residue r < d) are a dilation-1 correlation over the
 * input rows r + d*q' - pad. Per residue, tile j holds h = n - K + 1 outputs q = j*h + i and
 * reads the n inputs q' = j*h + u (u < n; rows outside [0, t_in) are zero padding); the
 * n-point circular correlation y = IDFT(DFT(x) . conj(DFT(w))) equals the linear one for i < h.
 * Tiles are anchored at q = 0, so each output's arithmetic depends only on t: results are
 * identical for any blocking and thread count.
 * Spectrum slots (n/2): slot 0 carries the two real bins 0 and n/2, slot f < n/2 bin f. With
 * X = a + ib the tile's bin and conj(DFT_n(w))_f = c + id (scaled by 2/n; slot 0 by 1/n, powers
 * of two: exact), the product takes three real GEMMs (Gauss), k1 = (a+b).c, k2 = a.(d-c),
 * k3 = b.(c+d): Re = k1 - k3, Im = k1 + k2 (slot 0: X_0.c_0 and X_n/2.c_n/2, two GEMMs), each
 * [tiles, c_in] x [c_in, c_out] on kcc_gemm_tile_f32: 3/4 of a plain complex product's
 * multiplies. The inverse DFT is then a plain cos/sin sum over slots.
 * Layout: spec[f][g][p][ci][j] = S_fg[ci][p*NR + j], S_f = (c, d-c, c+d) (slot 0: c_0, c_n/2, 0),
 * the GEMM pack of kcc_conv1d_f32 (zeros past c_out): a read-only weight made once at lowering
 * (kcc/ops/dft_conv.py, spectrum_pack) from the conv's weight.
 * Short inputs: when n_batch * t_in < min_rows the kernel runs the direct conv on the GEMM pack
 * wp (reading the spectrum would cost more than it saves); the caller picks min_rows.
 * Numerics: the spectrum is made in f64 from the f32 weights and rounded once; the input DFT,
 * the GEMM (128-term chunks from zero, FMA where the target has it) and the inverse sum run in
 * f32 in a fixed order. The DFT basis is unitary, so rounding does not grow with n the way a
 * Winograd transform's does: measured 0.7-2.3x the direct conv's own f32 error (Gauss's sums
 * a + b, c + d and k1 - k3 round once more; tests/test_dft_conv.py). */
#define KCC_DFT_MAX_N 64
#define KCC_DFT_WORK 131072  /* floats per thread (512 KiB of stack): one block's bin and GEMM rows */
#define KCC_DFT_VW 16        /* lane block of the transforms */
/* The 16-wide transform steps carry KCC_VECTOR_CLONES (kcc_common.h): portable builds run them
 * on AVX-512 / AVX2 clones picked at load time, with the same results.
 * The transforms walk n rows (d rows apart) per lane block: fetch each row's next block ahead,
 * which the hardware's stride prefetcher does not. A hint only: no effect on results. */
#if defined(__GNUC__)
#define KCC_DFT_PREFETCH(p) __builtin_prefetch(p)
#else
#define KCC_DFT_PREFETCH(p) ((void)(p))
#endif

static int kcc_dft_sizes_ok(int64_t n, int64_t k_size)
{
    return n >= 4 && n <= KCC_DFT_MAX_N && (n & (n - 1)) == 0 && k_size >= 1 && k_size < n;
}

/* Slot f's basis at u < n in f64: (cos, sin) of 2 pi f u / n; slot 0: (1, (-1)^u), the real
 * bins 0 and n/2. Exact zeros and ones where cos/sin have them. */
static void kcc_dft_basis(int64_t f, int64_t n, double *cs, double *sn)
{
    for (int64_t u = 0; u < n; ++u) {
        const int64_t j = (f * u) & (n - 1);
        if (f == 0) {
            cs[u] = 1.0;
            sn[u] = (u & 1) ? -1.0 : 1.0;
            continue;
        }
        cs[u] = 4 * j == n || 4 * j == 3 * n ? 0.0 : cos(6.283185307179586476925 * (double)j / (double)n);
        sn[u] = 2 * j == n || j == 0 ? 0.0 : sin(6.283185307179586476925 * (double)j / (double)n);
    }
}

/* Forward step over one lane block (lanes [0, NL), NL = VW for full blocks, so the accumulators
 * stay in registers): bins f0, f1 of one tile, the sum over its rows x + off[u] (off[u] < 0:
 * zero padding, skipped) of x_row * (cos, -sin) = a + ib; the tile's GEMM rows are written, row g
 * of slot f0 at v0 + g*vs (of f1 at v1 + g*vs): (a + b, a, b); slot 0 (real0): (X_0, X_n/2). */
#define KCC_DFT_FORWARD_BODY(NL)                                                                  \
    float ar[KCC_DFT_VW] = {0}, ai[KCC_DFT_VW] = {0}, br[KCC_DFT_VW] = {0}, bi[KCC_DFT_VW] = {0}; \
    for (int64_t u = 0; u < n; ++u) {                                                             \
        if (off[u] < 0) continue;                                                                 \
        const float *KCC_RESTRICT xr = x + off[u];                                                \
        const float p = cr0[u], q = cm0[u], r = cr1[u], s = cm1[u];                               \
        KCC_DFT_PREFETCH(xr + KCC_DFT_VW);                                                        \
        for (int64_t j = 0; j < (NL); ++j) {                                                      \
            ar[j] = KCC_MADD(p, xr[j], ar[j]);                                                    \
            ai[j] = KCC_MADD(q, xr[j], ai[j]);                                                    \
            br[j] = KCC_MADD(r, xr[j], br[j]);                                                    \
            bi[j] = KCC_MADD(s, xr[j], bi[j]);                                                    \
        }                                                                                         \
    }                                                                                             \
    for (int64_t j = 0; j < (NL); ++j) {                                                          \
        v0[j] = real0 ? ar[j] : ar[j] + ai[j];                                                    \
        v0[vs + j] = real0 ? ai[j] : ar[j];                                                       \
        v0[2 * vs + j] = real0 ? 0.0f : ai[j];                                                    \
        v1[j] = br[j] + bi[j];                                                                    \
        v1[vs + j] = br[j];                                                                       \
        v1[2 * vs + j] = bi[j];                                                                   \
    }

KCC_VECTOR_CLONES
static void kcc_dft_forward16_f32(const float *KCC_RESTRICT x, const int64_t *off, int64_t n, const float *cr0,
                                  const float *cm0, const float *cr1, const float *cm1, int64_t vs, int real0,
                                  float *KCC_RESTRICT v0, float *KCC_RESTRICT v1)
{
    KCC_DFT_FORWARD_BODY(KCC_DFT_VW)
}

static void kcc_dft_forward_tail_f32(const float *KCC_RESTRICT x, const int64_t *off, int64_t n, const float *cr0,
                                     const float *cm0, const float *cr1, const float *cm1, int64_t vs, int real0,
                                     float *KCC_RESTRICT v0, float *KCC_RESTRICT v1, int64_t nl)
{
    KCC_DFT_FORWARD_BODY(nl)
}

/* Inverse step over one lane block: rows y_i = ob + t_of[i] (i < rows) get (=, or += when acc)
 * cr0[i]*Re0 + cm0[i]*Im0 + cr1[i]*Re1 + cm1[i]*Im1, added in that order, where a slot's GEMM
 * rows k_g at m + g*ms give Re = k1 - k3, Im = k1 + k2 (slot 0, when real0: Y_0 = k1, Y_n/2 = k2);
 * KCC_MADD is one fused multiply-add where the target has FMA (kcc_common.h). */
#define KCC_DFT_INVERSE_BODY(NL)                                                                  \
    float ar[KCC_DFT_VW] = {0}, ai[KCC_DFT_VW] = {0}, br[KCC_DFT_VW] = {0}, bi[KCC_DFT_VW] = {0}; \
    for (int64_t j = 0; j < (NL); ++j) {                                                          \
        ar[j] = real0 ? m0[j] : m0[j] - m0[2 * ms + j];                                           \
        ai[j] = real0 ? m0[ms + j] : m0[j] + m0[ms + j];                                          \
        br[j] = m1[j] - m1[2 * ms + j];                                                           \
        bi[j] = m1[j] + m1[ms + j];                                                               \
    }                                                                                             \
    for (int64_t i = 0; i < rows; ++i) {                                                          \
        float *KCC_RESTRICT y = ob + t_of[i];                                                     \
        const float p = cr0[i], q = cm0[i], r = cr1[i], s = cm1[i];                               \
        KCC_DFT_PREFETCH(y + KCC_DFT_VW);                                                         \
        for (int64_t j = 0; j < (NL); ++j) {                                                      \
            const float y0 = acc ? y[j] : 0.0f;                                                   \
            y[j] = KCC_MADD(s, bi[j], KCC_MADD(r, br[j], KCC_MADD(q, ai[j], KCC_MADD(p, ar[j], y0)))); \
        }                                                                                         \
    }

KCC_VECTOR_CLONES
static void kcc_dft_inverse16_f32(float *KCC_RESTRICT ob, const int64_t *t_of, int64_t rows, const float *cr0,
                                  const float *cm0, const float *cr1, const float *cm1, int64_t ms, int real0,
                                  const float *KCC_RESTRICT m0, const float *KCC_RESTRICT m1, int acc)
{
    KCC_DFT_INVERSE_BODY(KCC_DFT_VW)
}

static void kcc_dft_inverse_tail_f32(float *KCC_RESTRICT ob, const int64_t *t_of, int64_t rows, const float *cr0,
                                     const float *cm0, const float *cr1, const float *cm1, int64_t ms, int real0,
                                     const float *KCC_RESTRICT m0, const float *KCC_RESTRICT m1, int acc,
                                     int64_t nl)
{
    KCC_DFT_INVERSE_BODY(nl)
}

/* m [rows, ldm] = v [rows, k] x one slot's spectrum sf, in (panel pair, K chunk) order. */
static void kcc_dft_slot_gemm_f32(const float *KCC_RESTRICT v, int64_t rows, int64_t k,
                                  const float *KCC_RESTRICT sf, int64_t panels, float *KCC_RESTRICT m)
{
    const int64_t ldm = panels * KCC_GEMM_NR;
    for (int64_t p = 0; p < panels; p += KCC_GEMM_NP) {
        const int64_t nr = kcc_gemm_pair_cols(ldm, p * KCC_GEMM_NR);
        for (int64_t k0 = 0; k0 < k; k0 += KCC_GEMM_KC) {
            const int64_t kc = k - k0 < KCC_GEMM_KC ? k - k0 : KCC_GEMM_KC;
            for (int64_t i = 0; i < rows; i += KCC_GEMM_MR)
                kcc_gemm_tile_f32(v + i * k + k0, k, rows - i < KCC_GEMM_MR ? rows - i : KCC_GEMM_MR,
                                  sf + (p * k + k0) * KCC_GEMM_NR, k * KCC_GEMM_NR, kc, m + i * ldm + p * KCC_GEMM_NR,
                                  ldm, nr, k0 == 0);
        }
    }
}

/* Called through a pointer, not inlined: next to the transform loops compilers spill the GEMM
 * tile's accumulators (as in norm_conv1d_f32.c). */
static void (*const volatile kcc_dft_slot_gemm)(const float *, int64_t, int64_t, const float *, int64_t,
                                                float *) = kcc_dft_slot_gemm_f32;

/* One block: tiles g in [g0, g1) (tile j = g / d of residue r = g % d: the residues interleave,
 * so a block's input and output rows are contiguous), slot pairs in order (the output rows hold
 * the running inverse sum); the caller runs the epilogue. work: tiles * 6 * (c_in + ldm). */
static void kcc_dft_conv_block_f32(const float *KCC_RESTRICT xb, int64_t t_in, int64_t c_in,
                                   const float *KCC_RESTRICT spec, int64_t n, int64_t c_out, int64_t k_size,
                                   int64_t pad, int64_t d, int64_t t_out, int64_t g0, int64_t g1,
                                   const float (*cr)[KCC_DFT_MAX_N], const float (*cm)[KCC_DFT_MAX_N],
                                   float *KCC_RESTRICT work, float *KCC_RESTRICT ob)
{
    const int64_t h = n - k_size + 1, tiles = g1 - g0;
    const int64_t panels = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR, ldm = panels * KCC_GEMM_NR;
    const int64_t part = panels * c_in * KCC_GEMM_NR, vs = tiles * c_in, ms = tiles * ldm;
    float *v0 = work, *v1 = v0 + 3 * vs, *m0 = v1 + 3 * vs, *m1 = m0 + 3 * ms;
    int64_t off[KCC_DFT_MAX_N], t_of[KCC_DFT_MAX_N];
    for (int64_t f = 0; f < n / 2; f += 2) {
        for (int64_t tt = 0; tt < tiles; ++tt) {                  /* bins f, f+1 of each tile's n inputs */
            const int64_t first = (g0 + tt) % d + d * ((g0 + tt) / d * h) - pad;   /* input row of u = 0 */
            for (int64_t u = 0; u < n; ++u) {
                const int64_t row = first + d * u;
                off[u] = row >= 0 && row < t_in ? row * c_in : -1;
            }
            for (int64_t c0 = 0; c0 < c_in; c0 += KCC_DFT_VW) {
                float *a = v0 + tt * c_in + c0, *b = v1 + tt * c_in + c0;
                if (c_in - c0 >= KCC_DFT_VW)
                    kcc_dft_forward16_f32(xb + c0, off, n, cr[f], cm[f], cr[f + 1], cm[f + 1], vs, f == 0, a, b);
                else
                    kcc_dft_forward_tail_f32(xb + c0, off, n, cr[f], cm[f], cr[f + 1], cm[f + 1], vs, f == 0, a, b,
                                             c_in - c0);
            }
        }
        for (int g = 0; g < 3; ++g) {                             /* slot 0 has no third product */
            if (f > 0 || g < 2)
                kcc_dft_slot_gemm(v0 + g * vs, tiles, c_in, spec + f * 3 * part + g * part, panels, m0 + g * ms);
            kcc_dft_slot_gemm(v1 + g * vs, tiles, c_in, spec + (f + 1) * 3 * part + g * part, panels, m1 + g * ms);
        }
        for (int64_t tt = 0; tt < tiles; ++tt) {                  /* inverse: the pair's share of each output */
            const int64_t t0 = (g0 + tt) % d + d * ((g0 + tt) / d * h);      /* output row of i = 0 */
            int64_t rows = 0;
            while (rows < h && t0 + d * rows < t_out) {
                t_of[rows] = (t0 + d * rows) * c_out;
                ++rows;
            }
            for (int64_t c0 = 0; c0 < c_out; c0 += KCC_DFT_VW) {
                const float *a = m0 + tt * ldm + c0, *b = m1 + tt * ldm + c0;
                if (c_out - c0 >= KCC_DFT_VW)
                    kcc_dft_inverse16_f32(ob + c0, t_of, rows, cr[f], cm[f], cr[f + 1], cm[f + 1], ms, f == 0, a, b, f > 0);
                else
                    kcc_dft_inverse_tail_f32(ob + c0, t_of, rows, cr[f], cm[f], cr[f + 1], cm[f + 1], ms, f == 0, a, b,
                                             f > 0, c_out - c0);
            }
        }
    }
}

static int kcc_dft_conv1d_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                              const float *KCC_RESTRICT wp, const float *KCC_RESTRICT spec, int64_t n,
                              int64_t min_rows, const float *KCC_RESTRICT bias, int64_t c_out, int64_t k_size,
                              int64_t pad, int64_t dilation, float neg_slope, const float *KCC_RESTRICT res,
                              int64_t has_res, float *KCC_RESTRICT out)
{
    if (n_batch < 1 || t_in < 1 || c_in < 1 || c_out < 1 || pad < 0 || dilation < 1 || !kcc_dft_sizes_ok(n, k_size))
        return KCC_EDIMS;
    if (n_batch * t_in < min_rows)       /* short input: run direct, the spectrum is not read */
        return kcc_conv1d_f32(x, n_batch, t_in, c_in, wp, bias, 1, c_out, k_size, 1, pad, dilation, 0, 1, 0,
                              neg_slope, res, has_res, out);
    const int64_t t_out = t_in + 2 * pad - dilation * (k_size - 1);
    const int64_t ldm = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR * KCC_GEMM_NR;
    const int64_t per_tile = 6 * (c_in + ldm);           /* a slot pair's three GEMM rows in and out */
    if (t_out < 1 || per_tile > KCC_DFT_WORK) return KCC_EDIMS;
    /* The data transforms' basis in f32: forward (cos, -sin) at u < n; the inverse reuses it
     * at i < h (Yr cos(2 pi f i/n) - Yi sin(2 pi f i/n); slot 0: Y_0 + (-1)^i Y_n/2). */
    float cr[KCC_DFT_MAX_N / 2][KCC_DFT_MAX_N], cm[KCC_DFT_MAX_N / 2][KCC_DFT_MAX_N];
    for (int64_t f = 0; f < n / 2; ++f) {
        double cs[KCC_DFT_MAX_N], sn[KCC_DFT_MAX_N];
        kcc_dft_basis(f, n, cs, sn);
        for (int64_t u = 0; u < n; ++u) {
            cr[f][u] = (float)cs[u];
            cm[f][u] = f == 0 ? (float)sn[u] : (float)-sn[u];
        }
    }
    const int64_t h = n - k_size + 1;
    const int64_t q_max = (t_out + dilation - 1) / dilation;          /* outputs of residue 0 */
    const int64_t tiles = (q_max + h - 1) / h, all = dilation * tiles;  /* every residue: tiles */
    /* Blocks of tiles: as many as the work area holds, since the spectrum is
     * re-read once per block and the slot GEMMs want rows; cut evenly for the threads so they
     * finish together (kcc_split_even). Results do not depend on it. */
    const int64_t tb = kcc_split_even(all, KCC_DFT_WORK / per_tile), blocks = (all + tb - 1) / tb;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * t_in * c_in, *rb = has_res ? res + b * t_out * c_out : res;
        float *ob = out + b * t_out * c_out;
        KCC_PARALLEL_FOR   /* a block writes the rows of its tiles only */
        for (int64_t blk = 0; blk < blocks; ++blk) {
            float work[KCC_DFT_WORK];
            const int64_t g0 = blk * tb, g1 = g0 + tb < all ? g0 + tb : all;
            kcc_dft_conv_block_f32(xb, t_in, c_in, spec, n, c_out, k_size, pad, dilation, t_out, g0, g1,
                                   (const float (*)[KCC_DFT_MAX_N])cr, (const float (*)[KCC_DFT_MAX_N])cm, work, ob);
            for (int64_t g = g0; g < g1; ++g)
                for (int64_t i = 0; i < h; ++i) {
                    const int64_t t = g % dilation + dilation * (g / dilation * h + i);
                    if (t < t_out) kcc_conv_epilogue_f32(ob, c_out, t, t + 1, bias, 1, neg_slope, rb, has_res);
                }
        }
    }
    return KCC_OK;
}
