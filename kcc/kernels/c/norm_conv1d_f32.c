/* Style instance norm (+ act) feeding a GEMM-path conv1d, without materialising the normalised
 * tensor: out = conv(act(adain(x))) with the conv epilogue (bias, leaky slope, + res).
 * x [n_batch, t_in, c_in]; the conv is stride 1 and groups 1 (the GEMM variant's), out
 * [n_batch, t_out, c_out]. Statistics over all of x come first (kcc_in_style_stats, parts of
 * time in parallel); then time is cut into chunks of <= KCC_NC_CHUNK output rows (in parallel),
 * each swept in row blocks: the input rows a block reads (its rows plus the tap span, the halo)
 * are normalised into a local tile (at most KCC_NC_TILE floats), rows carried over from the previous
 * block are moved, not recomputed, and kcc_conv_rows_f32 runs on the tile in KCC_CONV_MC-row steps.
 * Numerics: bit-identical to kcc_instance_norm_style_f32 followed by kcc_conv1d_gemm_f32 (the same
 * helpers, and the conv's arithmetic per output does not depend on row blocking), for any
 * thread count. Limits (KCC_EDIMS otherwise): c_in <= KCC_IN_MAX_C (the AdaIN helpers'
 * per-channel arrays) and c_in * (span + KCC_GEMM_MR) <= KCC_NC_TILE; kcc/compiler/passes.py fuses only
 * what fits. */
#define KCC_NC_TILE 73728      /* floats (288 KiB of stack): KCC_CONV_MC + halo rows of 1090 channels */
#define KCC_NC_TILE_L2 32768   /* floats a block normalises at most when fewer channels give KCC_CONV_MC rows */
#define KCC_NC_CHUNK 512

/* The conv runs through this pointer, not inlined: inlined next to the normalising loop, compilers
 * spill the GEMM tile's accumulators (measured 2x slower); a call keeps its own registers. */
static void (*const volatile kcc_nc_conv_rows)(const float *, int64_t, int64_t, int64_t, const float *, int64_t,
                                               int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                               float *) = kcc_conv_rows_f32;

typedef void (*kcc_nc_rows_fn)(const float *, int64_t, int64_t, int64_t, const float *, int64_t, int64_t, int64_t,
                               int64_t, int64_t, int64_t, int64_t, float *);

/* The kernel over a conv-rows function: kcc_norm_conv1d_f32 passes kcc_conv_rows_f32,
 * kcc_norm_conv1d_bf16 (norm_conv1d_bf16.c) its bf16 twin on the bf16 weight pack. */
static int kcc_norm_conv1d_on(
    kcc_nc_rows_fn conv_rows, const float *KCC_RESTRICT x, const float *KCC_RESTRICT style, int64_t n_batch, int64_t t_in, int64_t c_in,
    int64_t n_style, const float *KCC_RESTRICT norm_w, const float *KCC_RESTRICT norm_b,
    const float *KCC_RESTRICT fc_w, const float *KCC_RESTRICT fc_b, const float *KCC_RESTRICT alpha,
    int64_t act, float slope, float eps, const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias,
    int64_t has_bias, int64_t c_out, int64_t k_size, int64_t pad, int64_t dilation, float neg_slope,
    const float *KCC_RESTRICT res, int64_t has_res, float *KCC_RESTRICT out)
{
    if (n_batch < 1 || t_in < 1 || c_in < 1 || c_out < 1 || n_style < 1 || k_size < 1 || pad < 0 || dilation < 1)
        return KCC_EDIMS;
    if (act < 0 || act > 2 || !(eps > 0.0f)) return KCC_EBADINPUT;
    const int64_t span = dilation * (k_size - 1), t_out = t_in + 2 * pad - span;
    if (t_out < 1 || c_in > KCC_IN_MAX_C || c_in * (span + KCC_GEMM_MR) > KCC_NC_TILE) return KCC_EDIMS;
    (void)kcc_instance_norm_style_f32;   /* pasted with the adain helpers it shares */
    /* Rows per block: those KCC_NC_TILE_L2 floats hold (the tile stays in L2 beside the conv's
     * output block), more for wide inputs so a block still has KCC_CONV_MC rows: every block
     * streams the whole weight (13 MB at 1024 channels, K 3), and 24-row blocks there measured
     * 1.2-1.4x slower than 64-row ones. */
    int64_t tile_floats = c_in * (KCC_CONV_MC + span);
    if (tile_floats < KCC_NC_TILE_L2) tile_floats = KCC_NC_TILE_L2;
    if (tile_floats > KCC_NC_TILE) tile_floats = KCC_NC_TILE;
    const int64_t tile_rows = tile_floats / c_in;
    int64_t mc = (tile_rows - span) / KCC_GEMM_MR * KCC_GEMM_MR;
    if (mc > KCC_NC_CHUNK) mc = KCC_NC_CHUNK;
    /* Output chunks of at most KCC_NC_CHUNK rows, at least 8 of them when t_out allows (a
     * single chunk would leave every other thread idle) but none below a row block, then cut
     * evenly for the threads (kcc_split_even). Blocking never changes results. */
    int64_t chunk = (t_out + 7) / 8;
    if (chunk > KCC_NC_CHUNK) chunk = KCC_NC_CHUNK;
    if (chunk < mc) chunk = mc;
    chunk = kcc_split_even(t_out, chunk);
    const int64_t chunks = (t_out + chunk - 1) / chunk;
    kcc_in_style_params p;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * t_in * c_in, *rb = has_res ? res + b * t_out * c_out : res;
        float *ob = out + b * t_out * c_out;
        kcc_in_style_stats(xb, style + b * n_style, t_in, c_in, n_style, norm_w, norm_b, fc_w, fc_b, alpha, act, eps,
                           &p);
        KCC_PARALLEL_FOR   /* each chunk of output rows is written by one thread, in a fixed order */
        for (int64_t ch = 0; ch < chunks; ++ch) {
            float tile[KCC_NC_TILE];
            int64_t r0 = 0, r1 = 0;                        /* input rows [r0, r1) held in tile */
            const int64_t c_end = t_out - ch * chunk < chunk ? t_out : (ch + 1) * chunk;
            for (int64_t t0 = ch * chunk; t0 < c_end; t0 += mc) {
                const int64_t t1 = c_end - t0 < mc ? c_end : t0 + mc;
                const int64_t a = t0 - pad > 0 ? t0 - pad : 0;
                const int64_t e = t1 - 1 + span - pad + 1 < t_in ? t1 - 1 + span - pad + 1 : t_in;
                int64_t have = 0;
                if (a >= r0 && a < r1) {                   /* carry the halo rows over */
                    have = r1 - a;
                    const float *from = tile + (a - r0) * c_in;    /* forward copy: from >= tile */
                    for (int64_t i = 0; i < have * c_in; ++i) tile[i] = from[i];
                }
                for (int64_t ti = a + have; ti < e; ++ti)
                    kcc_in_style_row(xb + ti * c_in, c_in, &p, act, slope, tile + (ti - a) * c_in);
                r0 = a;
                r1 = e > a ? e : a;
                for (int64_t s0 = t0; s0 < t1; s0 += KCC_CONV_MC) {   /* the conv's own cache block */
                    const int64_t s1 = t1 - s0 < KCC_CONV_MC ? t1 : s0 + KCC_CONV_MC;
                    conv_rows(tile, r0, t_in, c_in, wp, c_out, k_size, pad, dilation, 1, s0, s1, ob);
                    kcc_conv_epilogue_f32(ob, c_out, s0, s1, bias, has_bias, neg_slope, rb, has_res);
                }
            }
        }
    }
    return KCC_OK;
}

static int kcc_norm_conv1d_f32(
    const float *KCC_RESTRICT x, const float *KCC_RESTRICT style, int64_t n_batch, int64_t t_in, int64_t c_in,
    int64_t n_style, const float *KCC_RESTRICT norm_w, const float *KCC_RESTRICT norm_b,
    const float *KCC_RESTRICT fc_w, const float *KCC_RESTRICT fc_b, const float *KCC_RESTRICT alpha,
    int64_t act, float slope, float eps, const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias,
    int64_t has_bias, int64_t c_out, int64_t k_size, int64_t pad, int64_t dilation, float neg_slope,
    const float *KCC_RESTRICT res, int64_t has_res, float *KCC_RESTRICT out)
{
    return kcc_norm_conv1d_on(kcc_nc_conv_rows, x, style, n_batch, t_in, c_in, n_style, norm_w, norm_b, fc_w, fc_b,
                              alpha, act, slope, eps, wp, bias, has_bias, c_out, k_size, pad, dilation, neg_slope,
                              res, has_res, out);
}
