/* The geometry every conv variant shares: how many output rows a conv / transposed conv has
 * (with the dimension checks each variant makes before its first write), which input row an
 * output row's tap reads, which rows a tap (direct) or a stride phase (transposed) covers, and
 * how the block-transform convs (block DFT, Winograd) cut their outputs into tiles.
 * Integer arithmetic only; the variants' own files hold their sums. */

/* t_out of a conv1d (transposed = 0) or a conv_transpose1d over t_in rows, or -1 where the
 * dims make no conv (a tap span longer than the padded input, a group count that does not
 * divide the channels, anything below its minimum). */
static inline int64_t kcc_conv_out_rows(int64_t n_batch, int64_t t_in, int64_t c_in, int64_t c_out, int64_t k_size,
                                        int64_t stride, int64_t pad, int64_t dilation, int64_t output_padding,
                                        int64_t groups, int64_t transposed)
{
    if (n_batch < 1 || t_in < 1 || c_in < 1 || c_out < 1 || k_size < 1 || stride < 1 || dilation < 1
        || pad < 0 || output_padding < 0 || groups < 1 || c_in % groups || c_out % groups)
        return -1;
    const int64_t span = dilation * (k_size - 1);
    int64_t t_out;
    if (transposed) {
        t_out = (t_in - 1) * stride - 2 * pad + span + output_padding + 1;
    } else {
        if (t_in + 2 * pad - span - 1 < 0) return -1;   /* input shorter than one tap span */
        t_out = (t_in + 2 * pad - span - 1) / stride + 1;
    }
    return t_out < 1 ? -1 : t_out;
}

/* The input row that output row t's tap k reads, or -1 where it reads none (the padding, or in
 * a transposed conv a tap that falls between two strided input rows):
 *   direct:     ti = t*stride + k*dilation - pad
 *   transposed: ti = (t + pad - k*dilation) / stride, only when that divides exactly
 * The direct-summation variants (depthwise, grouped) call it once per (row, tap), outside their
 * channel loops: a transposed conv's test is an integer division. */
static inline int64_t kcc_conv_tap_row(int64_t t, int64_t k, int64_t t_in, int64_t stride, int64_t pad,
                                       int64_t dilation, int64_t transposed)
{
    int64_t ti;
    if (transposed) {
        const int64_t num = t + pad - k * dilation;
        if (num < 0 || num % stride) return -1;
        ti = num / stride;
    } else {
        ti = t * stride + k * dilation - pad;
    }
    return ti >= 0 && ti < t_in ? ti : -1;
}

/* The output rows [*lo, *hi) of [t0, t1) whose tap k reads an input row of a direct conv, i.e.
 * 0 <= t*stride + k*dilation - pad < t_in: the GEMM-path rows (f32, bf16, int8) run each tap's
 * product over exactly these rows, so no row is clamped or tested inside the tile loop. */
static inline void kcc_conv_tap_rows(int64_t k, int64_t t_in, int64_t stride, int64_t pad, int64_t dilation,
                                     int64_t t0, int64_t t1, int64_t *lo, int64_t *hi)
{
    const int64_t off = k * dilation - pad;
    const int64_t first = off >= 0 ? 0 : (-off + stride - 1) / stride;
    const int64_t end = t_in - off <= 0 ? 0 : (t_in - off + stride - 1) / stride;
    *lo = t0 > first ? t0 : first;
    *hi = t1 < end ? t1 : end;
}

/* The q of [*qa, *qb) within [q0, q1) whose transposed-conv output row q*stride + phi - pad lies
 * in [0, t_out): the polyphase rows (f32, bf16, int8) run phase phi over exactly these q. */
static inline void kcc_conv_phase_rows(int64_t phi, int64_t stride, int64_t pad, int64_t t_out, int64_t q0,
                                       int64_t q1, int64_t *qa, int64_t *qb)
{
    int64_t a = q0, b = q1;
    while (a < b && a * stride + phi - pad < 0) ++a;
    while (b > a && (b - 1) * stride + phi - pad >= t_out) --b;
    *qa = a;
    *qb = b;
}

/* The block-transform convs' tiles (dft_conv1d_f32.c, winograd_conv1d_f32.c): output rows
 * t = r + d*q (residue r < d) are a dilation-1 correlation per residue, cut into tiles of `len`
 * outputs q = j*len + i anchored at q = 0, so each output's arithmetic depends only on t. Tile
 * g is tile j = g / d of residue r = g % d: the residues interleave, so a run of tiles covers
 * contiguous rows. kcc_conv_tile_t0: tile g's first output row; kcc_conv_tiles: the tiles over
 * every residue of t_out rows (each residue as many as residue 0, the longest). */
static inline int64_t kcc_conv_tile_t0(int64_t g, int64_t d, int64_t len)
{
    return g % d + d * (g / d * len);
}

static inline int64_t kcc_conv_tiles(int64_t t_out, int64_t d, int64_t len)
{
    const int64_t q_max = (t_out + d - 1) / d;          /* outputs of residue 0 */
    return d * ((q_max + len - 1) / len);
}
