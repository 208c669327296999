/* Depthwise Conv1d / ConvTranspose1d (groups = channels: channel c reads only channel c; one
 * channel in and out is the groups-1 case of it): x [n_batch, t_in, channels] -> out
 * [n_batch, t_out, channels], any stride and dilation. Output row t, tap k reads input row
 * kcc_conv_tap_row(t, k, ...) (conv_geometry.c).
 *   layout: wp[k][c] = W[c][0][k].
 *   numerics: per output, bias first and the taps in order accumulated in f64, rounded once;
 *   then the leaky slope and + res in f32. Identical for any thread count. */
#define KCC_CONV_DW_BLOCK 256   /* channels per f64 accumulator block */

static int kcc_conv1d_depthwise_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t channels,
                                    const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t has_bias,
                                    int64_t k_size, int64_t stride, int64_t pad, int64_t dilation,
                                    int64_t output_padding, int64_t transposed, float neg_slope,
                                    const float *KCC_RESTRICT res, int64_t has_res, float *KCC_RESTRICT out)
{
    const int64_t t_out = kcc_conv_out_rows(n_batch, t_in, channels, channels, k_size, stride, pad, dilation,
                                            output_padding, channels, transposed);
    if (t_out < 0) return KCC_EDIMS;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * t_in * channels, *rb = has_res ? res + b * t_out * channels : res;
        float *ob = out + b * t_out * channels;
        /* Per output row, each tap's input row is found once (not once per channel: a transposed
         * conv's divisibility test is an integer division), then a block of channels accumulates. */
        KCC_PARALLEL_FOR
        for (int64_t t = 0; t < t_out; ++t) {
            float *y = ob + t * channels;
            for (int64_t c0 = 0; c0 < channels; c0 += KCC_CONV_DW_BLOCK) {
                const int64_t nc = channels - c0 < KCC_CONV_DW_BLOCK ? channels - c0 : KCC_CONV_DW_BLOCK;
                double acc[KCC_CONV_DW_BLOCK];
                for (int64_t c = 0; c < nc; ++c) acc[c] = has_bias ? (double)bias[c0 + c] : 0.0;
                for (int64_t k = 0; k < k_size; ++k) {
                    const int64_t ti = kcc_conv_tap_row(t, k, t_in, stride, pad, dilation, transposed);
                    if (ti < 0) continue;
                    const float *KCC_RESTRICT wk = wp + k * channels + c0, *KCC_RESTRICT xr = xb + ti * channels + c0;
                    for (int64_t c = 0; c < nc; ++c) acc[c] += (double)wk[c] * (double)xr[c];
                }
                for (int64_t c = 0; c < nc; ++c) {
                    const float v = (float)acc[c], u = kcc_leaky_f32(v, neg_slope);
                    y[c0 + c] = has_res ? u + rb[t * channels + c0 + c] : u;   /* rb is res's batch b when has_res */
                }
            }
        }
    }
    return KCC_OK;
}
