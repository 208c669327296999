/* Conv1d, groups 1 (not one channel in and out), any stride and dilation, over time-major
 * activations: x [n_batch, t_in, c_in] -> out [n_batch, t_out, c_out], as K accumulated GEMMs
 * over shifted row views (kcc_conv_rows_f32, conv_rows_f32.c: its layout and numerics), then
 * the epilogue per output: v = acc + bias, leaky slope (neg_slope 1 is the identity), + res.
 * kcc/ops/conv.py binds it to the convs its rule table sends here; it computes any groups-1
 * direct conv. The row-block driver takes the rows function: the bf16 and int8 twins
 * (conv1d_bf16.c, conv1d_s8.c) run it on their own rows and weight packs. */

/* A conv-rows function: kcc_conv_rows_f32's signature and contract (ob rows [t0, t1) =). */
typedef void (*kcc_conv_rows_fn)(const float *, int64_t, int64_t, int64_t, const float *, int64_t, int64_t,
                                 int64_t, int64_t, int64_t, int64_t, int64_t, float *);

static inline int kcc_conv1d_gemm_on(kcc_conv_rows_fn rows, const float *KCC_RESTRICT x, int64_t n_batch,
                                     int64_t t_in, int64_t c_in, const float *KCC_RESTRICT wp,
                                     const float *KCC_RESTRICT bias, int64_t has_bias, int64_t c_out,
                                     int64_t k_size, int64_t stride, int64_t pad, int64_t dilation, float neg_slope,
                                     const float *KCC_RESTRICT res, int64_t has_res, float *KCC_RESTRICT out)
{
    const int64_t t_out = kcc_conv_out_rows(n_batch, t_in, c_in, c_out, k_size, stride, pad, dilation, 0, 1, 0);
    if (t_out < 0) return KCC_EDIMS;
    /* row blocks of <= KCC_CONV_MC cut evenly: each output's arithmetic is fixed by (k, ci) */
    const int64_t mc = kcc_split_even(t_out, KCC_CONV_MC), blocks = (t_out + mc - 1) / mc;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * t_in * c_in, *rb = has_res ? res + b * t_out * c_out : res;
        float *ob = out + b * t_out * c_out;
        KCC_PARALLEL_FOR   /* each row block is written by one thread, in a fixed order */
        for (int64_t blk = 0; blk < blocks; ++blk) {
            const int64_t t0 = blk * mc, t1 = t_out - t0 < mc ? t_out : t0 + mc;
            rows(xb, 0, t_in, c_in, wp, c_out, k_size, pad, dilation, stride, t0, t1, ob);
            kcc_conv_epilogue_f32(ob, c_out, t0, t1, bias, has_bias, neg_slope, rb, has_res);
        }
    }
    return KCC_OK;
}

static int kcc_conv1d_gemm_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t c_in,
                               const float *KCC_RESTRICT wp, const float *KCC_RESTRICT bias, int64_t has_bias,
                               int64_t c_out, int64_t k_size, int64_t stride, int64_t pad, int64_t dilation,
                               float neg_slope, const float *KCC_RESTRICT res, int64_t has_res,
                               float *KCC_RESTRICT out)
{
    return kcc_conv1d_gemm_on(kcc_conv_rows_f32, x, n_batch, t_in, c_in, wp, bias, has_bias, c_out, k_size, stride,
                              pad, dilation, neg_slope, res, has_res, out);
}
