/* Concatenate up to four [rows, c_k] tensors along their last (channel) axis into
 * out [rows, c_a + c_b + c_c + c_d]; an input with zero channels is not read. */
static int kcc_concat_last_f32(const float *KCC_RESTRICT a, int64_t c_a, const float *KCC_RESTRICT b,
                               int64_t c_b, const float *KCC_RESTRICT c, int64_t c_c,
                               const float *KCC_RESTRICT d, int64_t c_d, int64_t rows,
                               float *KCC_RESTRICT out)
{
    if (rows < 0 || c_a < 1 || c_b < 0 || c_c < 0 || c_d < 0) return KCC_EDIMS;
    const int64_t width = c_a + c_b + c_c + c_d;
    const float *src[4] = {a, b, c, d};
    const int64_t chan[4] = {c_a, c_b, c_c, c_d};
    for (int64_t r = 0; r < rows; ++r) {
        float *y = out + r * width;
        for (int k = 0; k < 4; ++k) {
            if (chan[k]) memcpy(y, src[k] + r * chan[k], (size_t)chan[k] * sizeof(float));
            y += chan[k];
        }
    }
    return KCC_OK;
}
