/* Stride-1 conv1d with K = 3 taps as Winograd minimal filtering F(m, 3): alpha = m + 2 slot GEMMs
 * per m outputs instead of 3 m, optionally with the style instance norm (+ act) of
 * kcc_instance_norm_style_f32 fused into its input read, with the conv1d epilogue (+ bias, leaky
 * slope, + res). x [n_batch, t_in, c_in] -> out [n_batch, t_out, c_out], t_out = t_in + 2*pad - 2*dilation.
 *
 * Tiles, as the block-DFT conv cuts them (dft_conv1d_f32.c): output rows t = r + d*q (residue
 * r < d) are a dilation-1 correlation over the input rows r + d*q' - pad; per residue, tile j
 * holds the m outputs q = j*m + i and reads the alpha inputs q' = j*m + u (rows outside
 * [0, t_in) are zero padding). Tiles are anchored at q = 0, so each output's arithmetic depends
 * only on t: results are identical for any blocking and thread count.
 * Per tile: v_s = sum_u BT[s][u] x_u (forward), M_s = v_s . U_s ([tiles, c_in] x [c_in, c_out] on
 * kcc_gemm_packed_f32, U_s = sum_k G[s][k] w_k made in f64 at lowering and rounded once:
 * kcc/ops/winograd_conv.py), y_i = sum_s AT[i][s] M_s (inverse), then the epilogue while the rows
 * are in L1. Interpolation points 0, 1, -1 (m = 2), + 2 (m = 3), + -2 (m = 4), and infinity; BT
 * row j holds the coefficients (ascending powers) of prod over the other finite points l of
 * (x - p_l), the infinity row those of prod over all of them; AT[i][j] = p_j^i (infinity: 1 in
 * row m - 1); G carries the 1 / prod_{l != j}(p_j - p_l): every BT and AT entry is a small
 * integer, exact in f32.
 * Numerics: f32 in a fixed order (forward sums in u order, GEMM as kcc_gemm_tile_f32, inverse in
 * s order; a * b + c, no contraction, so every clone gives the same bits). Measured max-abs vs
 * float64: m = 2 1.0-1.4x, m = 3 1.1-1.9x the direct conv's own f32 error
 * (tests/test_winograd_conv.py bounds it).
 * Fused norm (has_norm): statistics over all of x first (kcc_in_style_stats), then each block
 * normalises the input rows its tiles read (kcc_in_style_row, as the unfused adain does them:
 * the same bits) into its work area and transforms from there.
 * Layout: u[s][p][ci][j] = U_s[ci][p*NR + j], the GEMM pack per slot (zeros past c_out). */
#define KCC_WG_MAX_M 4
#define KCC_WG_MAX_ALPHA (KCC_WG_MAX_M + 2)
#define KCC_WG_WORK 131072  /* floats per thread (512 KiB of stack): slot rows and normalised input rows */
#define KCC_WG_VW 16        /* lane block of the transforms */

static const float kcc_wg_bt2[4 * 4] = {-1, 0, 1, 0, 0, 1, 1, 0, 0, -1, 1, 0, 0, -1, 0, 1};
static const float kcc_wg_at2[2 * 4] = {1, 1, 1, 0, 0, 1, -1, 1};
static const float kcc_wg_bt3[5 * 5] = {2, -1, -2, 1, 0, 0, -2, -1, 1, 0, 0, 2, -3, 1, 0, 0, -1, 0, 1, 0,
                                        0, 2, -1, -2, 1};
static const float kcc_wg_at3[3 * 5] = {1, 1, 1, 1, 0, 0, 1, -1, 2, 0, 0, 1, 1, 4, 1};
static const float kcc_wg_bt4[6 * 6] = {4, 0, -5, 0, 1, 0, 0, -4, -4, 1, 1, 0, 0, 4, -4, -1, 1, 0,
                                        0, -2, -1, 2, 1, 0, 0, 2, -1, -2, 1, 0, 0, 4, 0, -5, 0, 1};
static const float kcc_wg_at4[4 * 6] = {1, 1, 1, 1, 1, 0, 0, 1, -1, 2, -2, 0, 0, 1, 1, 4, 4, 0, 0, 1, -1, 8, -8, 1};

static const float kcc_wg_zero_row[KCC_WG_VW] = {0};

/* Forward transform of one tile over one lane block (lanes [0, NL)): its alpha input rows
 * rows[u] -> slot s's GEMM row at v + s*vs. Zero coefficients are skipped (the sum starts at
 * 0: 0 + c*x is c*x exactly). */
#define KCC_WG_FORWARD_BODY(NL)                                                                   \
    for (int64_t s = 0; s < alpha; ++s) {                                                         \
        float acc[KCC_WG_VW] = {0};                                                               \
        for (int64_t u = 0; u < alpha; ++u) {                                                     \
            const float c = bt[s * alpha + u];                                                    \
            const float *KCC_RESTRICT xr = rows[u];                                               \
            if (c == 0.0f) continue;                                                              \
            for (int64_t j = 0; j < (NL); ++j) acc[j] = c * xr[j] + acc[j];                      \
        }                                                                                         \
        float *KCC_RESTRICT vr = v + s * vs;                                                      \
        for (int64_t j = 0; j < (NL); ++j) vr[j] = acc[j];                                        \
    }

KCC_VECTOR_CLONES
static void kcc_wg_forward16_f32(const float *const *rows, const float *bt, int64_t alpha, int64_t vs,
                                 float *KCC_RESTRICT v)
{
    KCC_WG_FORWARD_BODY(KCC_WG_VW)
}

static void kcc_wg_forward_tail_f32(const float *const *rows, const float *bt, int64_t alpha, int64_t vs,
                                    float *KCC_RESTRICT v, int64_t nl)
{
    KCC_WG_FORWARD_BODY(nl)
}

/* Inverse over one lane block: output row i < rows at ob + t_of[i] = sum_s AT[i][s] M_s, the
 * slot products at mr + s*ms, summed in s order from 0 (zero coefficients skipped). */
#define KCC_WG_INVERSE_BODY(NL)                                                                   \
    for (int64_t i = 0; i < rows; ++i) {                                                          \
        float acc[KCC_WG_VW] = {0};                                                               \
        for (int64_t s = 0; s < alpha; ++s) {                                                     \
            const float c = at[i * alpha + s];                                                    \
            const float *KCC_RESTRICT mrow = mr + s * ms;                                         \
            if (c == 0.0f) continue;                                                              \
            for (int64_t j = 0; j < (NL); ++j) acc[j] = c * mrow[j] + acc[j];                    \
        }                                                                                         \
        float *KCC_RESTRICT y = ob + t_of[i];                                                     \
        for (int64_t j = 0; j < (NL); ++j) y[j] = acc[j];                                         \
    }

KCC_VECTOR_CLONES
static void kcc_wg_inverse16_f32(float *KCC_RESTRICT ob, const int64_t *t_of, int64_t rows, const float *at,
                                 int64_t alpha, const float *KCC_RESTRICT mr, int64_t ms)
{
    KCC_WG_INVERSE_BODY(KCC_WG_VW)
}

static void kcc_wg_inverse_tail_f32(float *KCC_RESTRICT ob, const int64_t *t_of, int64_t rows, const float *at,
                                    int64_t alpha, const float *KCC_RESTRICT mr, int64_t ms, int64_t nl)
{
    KCC_WG_INVERSE_BODY(nl)
}

/* A slot's GEMM, through a pointer, not inlined (next to the transform loops compilers spill the
 * GEMM tile's accumulators: dft_conv1d_f32.c, norm_conv1d_f32.c). */
static void (*const volatile kcc_wg_slot_gemm)(const float *, int64_t, int64_t, const float *, int64_t, int64_t,
                                               float *, int64_t, int64_t) = kcc_gemm_packed_f32;

/* Tile g's first output row: tile j = g / d of residue r = g % d (kcc_dft_tile_t0's cut). */
static inline int64_t kcc_wg_tile_t0(int64_t g, int64_t d, int64_t m)
{
    return g % d + d * (g / d * m);
}

/* Input rows a block of `tiles` tiles reads at most (the normalised rows of a fused block):
 * its tiles span at most (tiles + d) * m rows of their residues' outputs, plus the taps. */
static inline int64_t kcc_wg_src_rows(int64_t tiles, int64_t d, int64_t m)
{
    return (tiles + d) * m + d * (m + 2);
}

/* Tiles one block holds: alpha + 1 regions of one GEMM row per tile, as wide as the wider side
 * (slot s's transformed rows in region s + 1, its products in region s, where slot s - 1's
 * rows were), one lane block of padding per region, and with the norm the block's input rows.
 * Whole 8-row GEMM tiles when at least 8 fit. kcc/ops/winograd_conv.py (tiles_per_block)
 * mirrors it. */
static int64_t kcc_wg_tiles_per_block(int64_t m, int64_t c_in, int64_t c_out, int64_t d, int64_t has_norm)
{
    const int64_t alpha = m + 2, ldm = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR * KCC_GEMM_NR;
    const int64_t w = c_in > ldm ? c_in : ldm;
    const int64_t fixed = (alpha + 1) * KCC_WG_VW + (has_norm ? kcc_wg_src_rows(0, d, m) * c_in : 0);
    const int64_t per_tile = (alpha + 1) * w + (has_norm ? m * c_in : 0);
    const int64_t fit = fixed < KCC_WG_WORK ? (KCC_WG_WORK - fixed) / per_tile : 0;
    return fit >= KCC_GEMM_MR ? fit / KCC_GEMM_MR * KCC_GEMM_MR : fit;
}

typedef struct {
    const float *bt, *at;
    int64_t m, alpha, c_in, c_out, ldm, pad, d, t_in, t_out;
    const float *u, *bias, *res;
    float neg_slope;
    int64_t has_res;
} kcc_wg_conv;

/* One block: tiles g in [g0, g1), epilogue included. src holds input rows [r0, r1) (row ti at
 * src + (ti - r0) * c_in); work holds the slot regions. */
static void kcc_wg_block_f32(const kcc_wg_conv *cv, const float *KCC_RESTRICT src, int64_t r0, int64_t r1,
                             int64_t g0, int64_t g1, float *KCC_RESTRICT work, const float *KCC_RESTRICT rb,
                             float *KCC_RESTRICT ob)
{
    const int64_t tiles = g1 - g0, c_in = cv->c_in, c_out = cv->c_out, m = cv->m, alpha = cv->alpha, d = cv->d;
    const int64_t w = c_in > cv->ldm ? c_in : cv->ldm, part = cv->ldm * c_in;
    const int64_t rs = tiles * w + KCC_WG_VW;   /* region stride: padded off multiples of 4 KiB */
#define KCC_WG_ROW(r, tt) (work + (r) * rs + (tt) * w)
    const float *rows[KCC_WG_MAX_ALPHA];
    int64_t t_of[KCC_WG_MAX_M];
    for (int64_t tt = 0; tt < tiles; ++tt) {                  /* every slot's transformed rows */
        const int64_t first = kcc_wg_tile_t0(g0 + tt, d, m) - cv->pad;
        for (int64_t c0 = 0; c0 < c_in; c0 += KCC_WG_VW) {
            for (int64_t u = 0; u < alpha; ++u) {
                const int64_t row = first + d * u;
                rows[u] = row >= r0 && row < r1 ? src + (row - r0) * c_in + c0 : kcc_wg_zero_row;
            }
            if (c_in - c0 >= KCC_WG_VW)
                kcc_wg_forward16_f32(rows, cv->bt, alpha, rs, KCC_WG_ROW(1, tt) + c0);
            else
                kcc_wg_forward_tail_f32(rows, cv->bt, alpha, rs, KCC_WG_ROW(1, tt) + c0, c_in - c0);
        }
    }
    for (int64_t s = 0; s < alpha; ++s)
        kcc_wg_slot_gemm(KCC_WG_ROW(s + 1, 0), w, tiles, cv->u + s * part, c_in, cv->ldm, KCC_WG_ROW(s, 0), w, 1);
    for (int64_t tt = 0; tt < tiles; ++tt) {                  /* inverse, then the epilogue in L1 */
        const int64_t t0 = kcc_wg_tile_t0(g0 + tt, d, m);
        int64_t n_rows = 0;
        while (n_rows < m && t0 + d * n_rows < cv->t_out) {
            t_of[n_rows] = (t0 + d * n_rows) * c_out;
            ++n_rows;
        }
        for (int64_t c0 = 0; c0 < c_out; c0 += KCC_WG_VW) {
            if (c_out - c0 >= KCC_WG_VW)
                kcc_wg_inverse16_f32(ob + c0, t_of, n_rows, cv->at, alpha, KCC_WG_ROW(0, tt) + c0, rs);
            else
                kcc_wg_inverse_tail_f32(ob + c0, t_of, n_rows, cv->at, alpha, KCC_WG_ROW(0, tt) + c0, rs, c_out - c0);
        }
        for (int64_t i = 0; i < n_rows; ++i)
            kcc_conv_epilogue_f32(ob, c_out, t0 + d * i, t0 + d * i + 1, cv->bias, 1, cv->neg_slope, rb, cv->has_res);
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
    kcc_wg_conv cv = {m == 2 ? kcc_wg_bt2 : m == 3 ? kcc_wg_bt3 : kcc_wg_bt4,
                      m == 2 ? kcc_wg_at2 : m == 3 ? kcc_wg_at3 : kcc_wg_at4,
                      m, m + 2, c_in, c_out, (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR * KCC_GEMM_NR, pad, dilation,
                      t_in, t_out, u, bias, res, neg_slope, has_res};
    const int64_t q_max = (t_out + dilation - 1) / dilation;           /* outputs of residue 0 */
    const int64_t all = dilation * ((q_max + m - 1) / m);              /* every residue's tiles */
    const int64_t tb = kcc_split_even(all, tb_max), blocks = (all + tb - 1) / tb;
    const int64_t w = c_in > cv.ldm ? c_in : cv.ldm;
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
            const int64_t g0 = blk * tb, g1 = g0 + tb < all ? g0 + tb : all;
            if (!has_norm) {
                kcc_wg_block_f32(&cv, xb, 0, t_in, g0, g1, work, rb, ob);
                continue;
            }
            /* the rows this block's tiles read, normalised after the slot regions (monotone t0) */
            const int64_t lo0 = kcc_wg_tile_t0(g0, dilation, m) - pad;
            const int64_t hi0 = kcc_wg_tile_t0(g1 - 1, dilation, m) - pad + dilation * (m + 1) + 1;
            const int64_t lo = lo0 > 0 ? lo0 : 0, hi = hi0 < t_in ? hi0 : t_in;
            float *src = work + (m + 3) * ((g1 - g0) * w + KCC_WG_VW);
            for (int64_t ti = lo; ti < hi; ++ti)
                kcc_in_style_row(xb + ti * c_in, c_in, &p, act, slope, src + (ti - lo) * c_in);
            kcc_wg_block_f32(&cv, src, lo, hi > lo ? hi : lo, g0, g1, work, rb, ob);
        }
    }
    return KCC_OK;
}
