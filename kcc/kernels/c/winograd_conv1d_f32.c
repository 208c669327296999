/* Stride-1 conv1d with K = 3 taps as Winograd minimal filtering F(m, 3): alpha = m + 2 slot GEMMs
 * per m outputs instead of 3 m, optionally with the style instance norm (+ act) of
 * kcc_instance_norm_style_f32 fused into its input read, with the conv1d epilogue (+ bias, leaky
 * slope, + res). x [n_batch, t_in, c_in] -> out [n_batch, t_out, c_out], t_out = t_in + 2*pad - 2*dilation.
 *
 * Tiles, as the block-DFT conv cuts them (kcc_conv_tile_t0, conv_geometry.c): output rows
 * t = r + d*q (residue r < d) are a dilation-1 correlation over the input rows r + d*q' - pad;
 * per residue, tile j holds the m outputs q = j*m + i and reads the alpha inputs q' = j*m + u
 * (rows outside [0, t_in) are zero padding). Tiles are anchored at q = 0, so each output's
 * arithmetic depends only on t: results are identical for any blocking and thread count.
 * Per tile: v_s = sum_u BT[s][u] x_u (forward), M_s = v_s . U_s ([tiles, c_in] x [c_in, c_out] on
 * kcc_gemm_packed_f32, U_s = sum_k G[s][k] w_k made in f64 at lowering and rounded once:
 * kcc/ops/winograd_conv.py), y_i = sum_s AT[i][s] M_s (inverse) with the epilogue, while the
 * rows are in L1. Interpolation points 0, 1, -1 (m = 2), + 2 (m = 3), and infinity; BT row j
 * holds the coefficients (ascending powers) of prod over the other finite points l of (x - p_l),
 * the infinity row those of prod over all of them; AT[i][j] = p_j^i (infinity: 1 in row m - 1);
 * G carries the 1 / prod_{l != j}(p_j - p_l): every BT and AT entry is a small integer, exact in f32.
 * Numerics: f32 in a fixed order (transform sums left to right, a * b + c without contraction,
 * so every clone gives the same bits; the GEMM as kcc_gemm_tile_f32). Measured max-abs vs
 * float64 after an AdaIN + Snake: m = 2 0.9-1.4x, m = 3 2.1-4.2x the direct conv's own f32 error
 * (tests/test_winograd_conv.py bounds m = 2, the pass's).
 * Fused norm (has_norm): statistics over all of x first (kcc_in_style_stats), then each block
 * normalises the input rows its tiles read (kcc_in_style_row, as the unfused adain does them:
 * the same bits) into its work area and transforms from there.
 * Layout: u[s][p][ci][j] = U_s[ci][p*NR + j], the GEMM pack per slot (zeros past c_out). */
#define KCC_WG_MAX_M 3
#define KCC_WG_MAX_ALPHA (KCC_WG_MAX_M + 2)
#define KCC_WG_WORK 131072  /* floats per thread (512 KiB of stack): slot rows and normalised input rows */
#define KCC_WG_VW 16        /* padding between the work area's regions (floats) */

/* The transforms, written out per m (constant coefficients, every channel in KCC_FOR16 blocks:
 * one call per tile, not one per lane block); each sum is evaluated left to right.
 * m = 2, points 0, 1, -1, inf: BT = [-1 0 1 0; 0 1 1 0; 0 -1 1 0; 0 -1 0 1], AT = [1 1 1 0; 0 1 -1 1].
 * m = 3, points 0, 1, -1, 2, inf: BT = [2 -1 -2 1 0; 0 -2 -1 1 0; 0 2 -3 1 0; 0 -1 0 1 0; 0 2 -1 -2 1],
 * AT = [1 1 1 1 0; 0 1 -1 2 0; 0 1 1 4 1].
 * Forward: the tile's input rows x_u -> slot s's GEMM row v_s. Every row is its own restrict
 * parameter: GCC's -O2 (portable builds) vectorises only loops that need no runtime alias check,
 * and rows at run-time offsets from one pointer would (the portable AVX-512 clone ran scalar). */
KCC_VECTOR_CLONES
static void kcc_wg_forward2_f32(const float *KCC_RESTRICT x0, const float *KCC_RESTRICT x1,
                                const float *KCC_RESTRICT x2, const float *KCC_RESTRICT x3, int64_t c_in,
                                float *KCC_RESTRICT v0, float *KCC_RESTRICT v1, float *KCC_RESTRICT v2,
                                float *KCC_RESTRICT v3)
{
    KCC_FOR16(c_in, v0[j] = x2[j] - x0[j]; v1[j] = x1[j] + x2[j]; v2[j] = x2[j] - x1[j]; v3[j] = x3[j] - x1[j];);
}

KCC_VECTOR_CLONES
static void kcc_wg_forward3_f32(const float *KCC_RESTRICT x0, const float *KCC_RESTRICT x1,
                                const float *KCC_RESTRICT x2, const float *KCC_RESTRICT x3,
                                const float *KCC_RESTRICT x4, int64_t c_in, float *KCC_RESTRICT v0,
                                float *KCC_RESTRICT v1, float *KCC_RESTRICT v2, float *KCC_RESTRICT v3,
                                float *KCC_RESTRICT v4)
{
    KCC_FOR16(c_in, const float a = x1[j]; const float b = x2[j]; const float c = x3[j];
              v0[j] = 2.0f * x0[j] - a - 2.0f * b + c; v1[j] = -2.0f * a - b + c; v2[j] = 2.0f * a - 3.0f * b + c;
              v3[j] = c - a; v4[j] = 2.0f * a - b - 2.0f * c + x4[j];);
}

/* Inverse + epilogue: the slot products at mr + s*ms -> output rows y[i] (i < rows; a tile at
 * the end may keep fewer than m) = leaky(sum + bias) (+ res rows r[i] when has_res), the
 * kcc_conv_epilogue_f32 arithmetic. */
#define KCC_WG_EPILOGUE(Y, R, SUM)                                                                \
    do {                                                                                          \
        float *KCC_RESTRICT y_ = (Y);                                                             \
        const float *KCC_RESTRICT r_ = (R);                                                       \
        if (has_res)                                                                              \
            KCC_FOR16(c_out, y_[j] = kcc_leaky_f32((SUM) + bias[j], neg_slope) + r_[j];);         \
        else                                                                                      \
            KCC_FOR16(c_out, y_[j] = kcc_leaky_f32((SUM) + bias[j], neg_slope););                 \
    } while (0)

KCC_VECTOR_CLONES
static void kcc_wg_inverse2_f32(const float *KCC_RESTRICT mr, int64_t ms, int64_t c_out, float *const *y,
                                const float *const *r, int64_t rows, const float *KCC_RESTRICT bias,
                                float neg_slope, int64_t has_res)
{
    const float *KCC_RESTRICT m0 = mr, *KCC_RESTRICT m1 = mr + ms, *KCC_RESTRICT m2 = mr + 2 * ms;
    const float *KCC_RESTRICT m3 = mr + 3 * ms;
    KCC_WG_EPILOGUE(y[0], r[0], m0[j] + m1[j] + m2[j]);
    if (rows > 1) KCC_WG_EPILOGUE(y[1], r[1], m1[j] - m2[j] + m3[j]);
}

KCC_VECTOR_CLONES
static void kcc_wg_inverse3_f32(const float *KCC_RESTRICT mr, int64_t ms, int64_t c_out, float *const *y,
                                const float *const *r, int64_t rows, const float *KCC_RESTRICT bias,
                                float neg_slope, int64_t has_res)
{
    const float *KCC_RESTRICT m0 = mr, *KCC_RESTRICT m1 = mr + ms, *KCC_RESTRICT m2 = mr + 2 * ms;
    const float *KCC_RESTRICT m3 = mr + 3 * ms, *KCC_RESTRICT m4 = mr + 4 * ms;
    KCC_WG_EPILOGUE(y[0], r[0], m0[j] + m1[j] + m2[j] + m3[j]);
    if (rows > 1) KCC_WG_EPILOGUE(y[1], r[1], m1[j] - m2[j] + 2.0f * m3[j]);
    if (rows > 2) KCC_WG_EPILOGUE(y[2], r[2], m1[j] + m2[j] + 4.0f * m3[j] + m4[j]);
}

/* A slot's GEMM, through a pointer, not inlined (next to the transform loops compilers spill the
 * GEMM tile's accumulators: dft_conv1d_f32.c, norm_conv1d_f32.c). */
static void (*const volatile kcc_wg_slot_gemm)(const float *, int64_t, int64_t, const float *, int64_t, int64_t,
                                               float *, int64_t, int64_t) = kcc_gemm_packed_f32;

/* Input rows a block of `tiles` tiles reads at most (the normalised rows of a fused block):
 * its tiles span at most (tiles + d) * m rows of their residues' outputs, plus the taps. */
static inline int64_t kcc_wg_src_rows(int64_t tiles, int64_t d, int64_t m)
{
    return (tiles + d) * m + d * (m + 2);
}

/* Tiles one block holds: alpha + 1 regions of one GEMM row per tile, as wide as the wider side
 * (slot s's transformed rows in region s + 1, its products in region s, where slot s - 1's
 * rows were), one padding block per region, a zero row (the padding rows' stand-in) and with
 * the norm the block's input rows. Whole 8-row GEMM tiles when at least 8 fit.
 * kcc/ops/winograd_conv.py (tiles_per_block) mirrors it. */
static int64_t kcc_wg_tiles_per_block(int64_t m, int64_t c_in, int64_t c_out, int64_t d, int64_t has_norm)
{
    const int64_t alpha = m + 2, ldm = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR * KCC_GEMM_NR;
    const int64_t w = c_in > ldm ? c_in : ldm;
    const int64_t fixed = (alpha + 1) * KCC_WG_VW + c_in + (has_norm ? kcc_wg_src_rows(0, d, m) * c_in : 0);
    const int64_t per_tile = (alpha + 1) * w + (has_norm ? m * c_in : 0);
    const int64_t fit = fixed < KCC_WG_WORK ? (KCC_WG_WORK - fixed) / per_tile : 0;
    return fit >= KCC_GEMM_MR ? fit / KCC_GEMM_MR * KCC_GEMM_MR : fit;
}

typedef struct {
    int64_t m, c_in, c_out, ldm, pad, d, t_in, t_out;
    const float *u, *bias;
    float neg_slope;
    int64_t has_res;
} kcc_wg_conv;

/* One block: tiles g in [g0, g1), epilogue included. src holds input rows [r0, r1) (row ti at
 * src + (ti - r0) * c_in); work holds the slot regions, then a zero row. Cloned like the
 * transforms it calls (as dft_conv1d_f32.c's block driver). */
KCC_VECTOR_CLONES
static void kcc_wg_block_f32(const kcc_wg_conv *cv, const float *KCC_RESTRICT src, int64_t r0, int64_t r1,
                             int64_t g0, int64_t g1, float *KCC_RESTRICT work, const float *KCC_RESTRICT rb,
                             float *KCC_RESTRICT ob)
{
    const int64_t tiles = g1 - g0, c_in = cv->c_in, c_out = cv->c_out, m = cv->m, alpha = m + 2, d = cv->d;
    const int64_t w = c_in > cv->ldm ? c_in : cv->ldm, part = cv->ldm * c_in;
    const int64_t rs = tiles * w + KCC_WG_VW;   /* region stride: padded off multiples of 4 KiB */
    float *zero = work + (alpha + 1) * rs;
#define KCC_WG_ROW(r, tt) (work + (r) * rs + (tt) * w)
    for (int64_t j = 0; j < c_in; ++j) zero[j] = 0.0f;
    const float *x[KCC_WG_MAX_ALPHA];
    float *y[KCC_WG_MAX_M];
    const float *r[KCC_WG_MAX_M];
    for (int64_t tt = 0; tt < tiles; ++tt) {                  /* every slot's transformed rows */
        const int64_t first = kcc_conv_tile_t0(g0 + tt, d, m) - cv->pad;
        for (int64_t u = 0; u < alpha; ++u) {
            const int64_t row = first + d * u;
            x[u] = row >= r0 && row < r1 ? src + (row - r0) * c_in : zero;
        }
        float *v = KCC_WG_ROW(1, tt);
        if (m == 2) kcc_wg_forward2_f32(x[0], x[1], x[2], x[3], c_in, v, v + rs, v + 2 * rs, v + 3 * rs);
        else kcc_wg_forward3_f32(x[0], x[1], x[2], x[3], x[4], c_in, v, v + rs, v + 2 * rs, v + 3 * rs, v + 4 * rs);
    }
    for (int64_t s = 0; s < alpha; ++s)
        kcc_wg_slot_gemm(KCC_WG_ROW(s + 1, 0), w, tiles, cv->u + s * part, c_in, cv->ldm, KCC_WG_ROW(s, 0), w, 1);
    for (int64_t tt = 0; tt < tiles; ++tt) {                  /* inverse and epilogue, in L1 */
        const int64_t t0 = kcc_conv_tile_t0(g0 + tt, d, m);
        int64_t rows = 0;
        for (; rows < m && t0 + d * rows < cv->t_out; ++rows) {
            y[rows] = ob + (t0 + d * rows) * c_out;
            r[rows] = cv->has_res ? rb + (t0 + d * rows) * c_out : cv->bias;
        }
        if (rows == 0) continue;       /* a residue's last tile can lie past t_out */
        if (m == 2) kcc_wg_inverse2_f32(KCC_WG_ROW(0, tt), rs, c_out, y, r, rows, cv->bias, cv->neg_slope, cv->has_res);
        else kcc_wg_inverse3_f32(KCC_WG_ROW(0, tt), rs, c_out, y, r, rows, cv->bias, cv->neg_slope, cv->has_res);
    }
#undef KCC_WG_ROW
}

static int kcc_winograd_conv1d_f32(
    const float *KCC_RESTRICT x, const float *KCC_RESTRICT style, int64_t n_batch, int64_t t_in, int64_t c_in,
    int64_t n_style, const float *KCC_RESTRICT norm_w, const float *KCC_RESTRICT norm_b,
    const float *KCC_RESTRICT fc_w, const float *KCC_RESTRICT fc_b, const float *KCC_RESTRICT alpha,
    int64_t act, float slope, float eps, int64_t has_norm, const float *KCC_RESTRICT u, int64_t m,
    const float *KCC_RESTRICT bias, int64_t c_out, int64_t pad, int64_t dilation, float neg_slope,
    const float *KCC_RESTRICT res, int64_t has_res, float *KCC_RESTRICT out)
{
    if (n_batch < 1 || t_in < 1 || c_in < 1 || c_out < 1 || pad < 0 || dilation < 1 || m < 2 || m > KCC_WG_MAX_M)
        return KCC_EDIMS;
    if (has_norm && (n_style < 1 || act < 0 || act > 2 || !(eps > 0.0f))) return KCC_EBADINPUT;
    if (has_norm && c_in > KCC_IN_MAX_C) return KCC_EDIMS;
    (void)kcc_instance_norm_style_f32;   /* pasted with the adain helpers it shares */
    const int64_t t_out = t_in + 2 * pad - 2 * dilation;
    const int64_t tb_max = kcc_wg_tiles_per_block(m, c_in, c_out, dilation, has_norm);
    if (t_out < 1 || tb_max < 1) return KCC_EDIMS;
    const int64_t ldm = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR * KCC_GEMM_NR, w = c_in > ldm ? c_in : ldm;
    const kcc_wg_conv cv = {m, c_in, c_out, ldm, pad, dilation, t_in, t_out, u, bias, neg_slope, has_res};
    const int64_t all = kcc_conv_tiles(t_out, dilation, m);           /* every residue's tiles */
    const int64_t blocks = kcc_share_blocks(all, tb_max);   /* the slot weights are re-read per block */
    kcc_in_style_params p;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * t_in * c_in, *rb = has_res ? res + b * t_out * c_out : res;
        float *ob = out + b * t_out * c_out;
        if (has_norm)
            kcc_in_style_stats(xb, style + b * n_style, t_in, c_in, n_style, norm_w, norm_b, fc_w, fc_b, alpha, act,
                               eps, &p);
        KCC_PARALLEL_FOR   /* a block writes the rows of its tiles only */
        for (int64_t blk = 0; blk < blocks; ++blk) {
            float work[KCC_WG_WORK];
            const int64_t g0 = kcc_block_start(blk, all, blocks), g1 = kcc_block_start(blk + 1, all, blocks);
            if (g1 == g0) continue;        /* fewer tiles than threads * blocks: an empty block */
            if (!has_norm) {
                kcc_wg_block_f32(&cv, xb, 0, t_in, g0, g1, work, rb, ob);
                continue;
            }
            /* the rows this block's tiles read (t0 grows with g), normalised after the zero row */
            const int64_t lo0 = kcc_conv_tile_t0(g0, dilation, m) - pad;
            const int64_t hi0 = kcc_conv_tile_t0(g1 - 1, dilation, m) - pad + dilation * (m + 1) + 1;
            const int64_t lo = lo0 > 0 ? lo0 : 0, hi = hi0 < t_in ? hi0 : t_in;
            float *src = work + (m + 3) * ((g1 - g0) * w + KCC_WG_VW) + c_in;
            for (int64_t ti = lo; ti < hi; ++ti)
                kcc_in_style_row(xb + ti * c_in, c_in, &p, act, slope, src + (ti - lo) * c_in);
            kcc_wg_block_f32(&cv, src, lo, hi > lo ? hi : lo, g0, g1, work, rb, ob);
        }
    }
    return KCC_OK;
}
