/* kcc_conv1d_gemm_f32 (groups 1, direct, any stride and dilation) at the int8 precision: int8
 * weights, activations quantised per input row, integer products on kcc_gemm_tile_s8
 * (gemm_tile_s8.c: vpdpbusd where the CPU has AVX512_VNNI). Same argument list as
 * kcc_conv1d_gemm_f32, so one bind serves both; the row-block driver is conv1d_gemm_f32.c's.
 *
 * Weight pack (kcc.ops.conv_int8.s8_conv_pack), 32-bit words [K][panels][kq + 2][16]: per tap k and
 * column panel p (NR = 16 output channels o)
 *   row 0: sw[o] f32, the channel's scale max |W[o]| / 127 over (ci, k) (symmetric; every tap
 *          repeats it, so the pack keeps the GEMM pack's [K, panels, rows, 16] shape)
 *   row 1: comp[o] s32 = 128 * sum_ci q[o][ci][k], the u8 shift's correction for this tap
 *   rows 2 ..: q[o][ci][k] s8 in the panel layout of gemm_tile_s8.c (kq quads of 64 bytes).
 * Numerics: each input row is quantised once per block that reads it (kcc_s8_quant_rows: its
 * own scale, so the result does not depend on the blocking); per output row t and tap k the
 * integer sum s = sum_ci q_x[t*stride + k*dil - pad][ci] * q_w[o][ci][k] is exact; then
 * y = (sum over taps in order of (float)s * sa[row]) * sw[o] in f32, then the f32 epilogue
 * (bias, leaky slope, + res). Identical for any thread count, and between the VNNI tiles and
 * the emulation. Error: ~2^-8 relative per operand, judged by the listening gate. */
#define KCC_S8_ROWS 163840    /* bytes (160 KiB of stack) of quantised input rows a block holds */
#define KCC_S8_MAX_ROWS 2048  /* input rows a block quantises at most (their scales' array) */

/* Rows [t0, t1) of a panel pair's columns (nr of them, row stride ldo) times their scales. */
KCC_VECTOR_CLONES
static void kcc_s8_scale_cols(float *KCC_RESTRICT ob, int64_t ldo, int64_t t0, int64_t t1, int64_t nr,
                              const float *KCC_RESTRICT sw)
{
    for (int64_t t = t0; t < t1; ++t) {
        float *KCC_RESTRICT y = ob + t * ldo;
        KCC_FOR16(nr, y[j] *= sw[j];);
    }
}

/* Row `row` (16 words) of pack block (k, p), for both panels of a pair (the second's only where
 * nr > NR, else zeros) side by side in out (32 words, f32 or s32: copied as bytes). */
static inline void kcc_s8_pair_row(const float *KCC_RESTRICT wp, int64_t panels, int64_t kq, int64_t k, int64_t p,
                                   int64_t nr, int64_t row, void *KCC_RESTRICT out)
{
    const float *a = wp + ((k * panels + p) * (kq + 2) + row) * KCC_GEMM_NR;
    const size_t half = KCC_GEMM_NR * sizeof(float);
    memcpy(out, a, half);
    if (nr > KCC_GEMM_NR)
        memcpy((char *)out + half, a + (kq + 2) * KCC_GEMM_NR, half);
    else
        memset((char *)out + half, 0, half);
}

/* Output rows a block of quantised rows can serve: the input rows they read must fit
 * KCC_S8_ROWS bytes and KCC_S8_MAX_ROWS scales. 0: not even one (kcc.ops.conv_int8 refuses such
 * shapes at lowering). */
static inline int64_t kcc_s8_rows_per_block(int64_t c_in, int64_t span, int64_t stride)
{
    const int64_t ldq = (c_in + 3) / 4 * 4;
    int64_t held = KCC_S8_ROWS / ldq;
    if (held > KCC_S8_MAX_ROWS) held = KCC_S8_MAX_ROWS;
    if (held < span + 1) return 0;
    const int64_t n = (held - span - 1) / stride + 1;
    return n >= KCC_GEMM_MR ? n / KCC_GEMM_MR * KCC_GEMM_MR : n;
}

/* kcc_conv_rows_f32's contract on the int8 pack: ob rows [t0, t1) (=) of the conv of the rows held
 * at xs (row ti at xs + (ti - r0) * c_in), zero padding skipped; same signature, so the fused
 * norm-conv and the conv driver take it as they take the f32 rows. Not scaled by sw and without
 * the epilogue until kcc_s8_scale_cols: done here, the rows are finished but for the epilogue. */
static void kcc_conv_rows_s8(const float *KCC_RESTRICT xs, int64_t r0, int64_t t_in, int64_t c_in,
                             const float *KCC_RESTRICT wp, int64_t c_out, int64_t k_size, int64_t pad,
                             int64_t dilation, int64_t stride, int64_t t0, int64_t t1, float *KCC_RESTRICT ob)
{
    const int64_t panels = (c_out + KCC_GEMM_NR - 1) / KCC_GEMM_NR;
    const int64_t kq = (c_in + 3) / 4, ldq = 4 * kq, span = dilation * (k_size - 1);
    const int64_t step = kcc_s8_rows_per_block(c_in, span, stride);
    if (step < 1) return;   /* refused at lowering */
    uint8_t xq[KCC_S8_ROWS];
    float sa[KCC_S8_MAX_ROWS], sw[2 * KCC_GEMM_NR];
    int32_t comp[2 * KCC_GEMM_NR];
    for (int64_t s0 = t0; s0 < t1; s0 += step) {
        const int64_t s1 = t1 - s0 < step ? t1 : s0 + step;
        const int64_t lo_in = s0 * stride - pad > 0 ? s0 * stride - pad : 0;
        const int64_t last = (s1 - 1) * stride + span - pad + 1;
        const int64_t hi_in = last < t_in ? last : t_in;
        if (hi_in > lo_in) kcc_s8_quant_rows(xs + (lo_in - r0) * c_in, c_in, hi_in - lo_in, c_in, xq, ldq, sa);
        for (int64_t t = s0; t < s1; ++t)
            for (int64_t j = 0; j < c_out; ++j) ob[t * c_out + j] = 0.0f;
        for (int64_t p = 0; p < panels; p += KCC_GEMM_NP) {
            const int64_t nr = kcc_gemm_pair_cols(c_out, p * KCC_GEMM_NR);
            for (int64_t k = 0; k < k_size; ++k) {
                const int64_t off = k * dilation - pad;           /* tap k reads input row t*stride + off */
                int64_t lo, hi;
                kcc_conv_tap_rows(k, t_in, stride, pad, dilation, s0, s1, &lo, &hi);
                const int8_t *wk = (const int8_t *)(const void *)(wp + ((k * panels + p) * (kq + 2) + 2) * KCC_GEMM_NR);
                kcc_s8_pair_row(wp, panels, kq, k, p, nr, 1, comp);
                for (int64_t i = lo; i < hi; i += KCC_GEMM_MR) {
                    const int64_t mr = hi - i < KCC_GEMM_MR ? hi - i : KCC_GEMM_MR;
                    const int64_t row = i * stride + off - lo_in;
                    kcc_gemm_tile_s8_dq(xq + row * ldq, stride * ldq, mr, wk, nr > KCC_GEMM_NR ? wk + (kq + 2) * KCC_S8_QUAD : wk, kq, nr, comp,
                                        sa + row, stride, ob + i * c_out + p * KCC_GEMM_NR, c_out);
                }
            }
            kcc_s8_pair_row(wp, panels, kq, 0, p, nr, 0, sw);
            kcc_s8_scale_cols(ob + p * KCC_GEMM_NR, c_out, s0, s1, nr, sw);
        }
    }
}

static int kcc_conv1d_gemm_s8(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                              const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t has_bias,
                              int64_t c_out, int64_t k_size, int64_t stride, int64_t pad, int64_t dilation,
                              float neg_slope, const float *KCC_RESTRICT res, int64_t has_res,
                              float *KCC_RESTRICT out)
{
    (void)kcc_conv1d_gemm_f32;   /* pasted for its driver */
    (void)kcc_gemm_u8s8_s32;     /* pasted with the tiles */
    if (c_in < 1 || k_size < 1 || stride < 1 || dilation < 1
        || kcc_s8_rows_per_block(c_in, dilation * (k_size - 1), stride) < 1)
        return KCC_EDIMS;
    return kcc_conv1d_gemm_on(kcc_conv_rows_s8, x, n_batch, t_in, c_in, wp, bias, has_bias, c_out, k_size, stride,
                              pad, dilation, neg_slope, res, has_res, out);
}
