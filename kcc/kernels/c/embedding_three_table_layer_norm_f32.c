/* y[b,t,:] = LayerNorm(word[ids[b,t]] + type[type_ids[b,t]] + position[t]) * gamma + beta.
 * Every id is validated before anything is written, so a bad id leaves `out` untouched.
 * Mean and variance accumulate in double (the registry records this contract). */
static int kcc_embedding_three_table_layer_norm_f32(
    const int32_t *KCC_RESTRICT ids, const int32_t *KCC_RESTRICT type_ids, int64_t n_seq, int64_t n_tok,
    const float *KCC_RESTRICT word, int64_t n_word, const float *KCC_RESTRICT position, int64_t n_position,
    const float *KCC_RESTRICT type, int64_t n_type, const float *KCC_RESTRICT gamma,
    const float *KCC_RESTRICT beta, int64_t n_chan, float eps, float *KCC_RESTRICT out)
{
    if (n_tok > n_position) return KCC_EBADINPUT;
    for (int64_t i = 0; i < n_seq * n_tok; ++i) {
        if (ids[i] < 0 || ids[i] >= n_word) return KCC_EBADINPUT;
        if (type_ids[i] < 0 || type_ids[i] >= n_type) return KCC_EBADINPUT;
    }
    for (int64_t b = 0; b < n_seq; ++b) {
        for (int64_t t = 0; t < n_tok; ++t) {
            const int64_t row = b * n_tok + t;
            const float *w = word + (int64_t)ids[row] * n_chan;
            const float *p = position + t * n_chan;
            const float *ty = type + (int64_t)type_ids[row] * n_chan;
            float *y = out + row * n_chan;
            for (int64_t c = 0; c < n_chan; ++c) y[c] = w[c] + ty[c] + p[c];
            double mean, inv;
            kcc_mean_rstd_f64(y, n_chan, eps, &mean, &inv);
            for (int64_t c = 0; c < n_chan; ++c) y[c] = (float)(((double)y[c] - mean) * inv) * gamma[c] + beta[c];
        }
    }
    return KCC_OK;
}
