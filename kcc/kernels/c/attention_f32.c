/* Multi-head scaled dot-product attention over time-major q, k, v [n_seq, n_tok, heads*head_dim]:
 * out[b, i, h, :] = sum_{j < lengths[b]} softmax_j(scale * q[b,i,h,:].k[b,j,h,:]) v[b,j,h,:].
 * Keys at j >= lengths[b] contribute nothing; every query row (padded ones too) attends to the
 * valid keys, as a transformer with an additive -inf key mask does. Every length is validated
 * (1 <= lengths[b] <= n_tok) before the first write.
 * Online softmax over key blocks of KCC_ATTN_KB (a 64-float score tile on the stack, like a
 * GEMM register tile; no other scratch): the running max, the denominator and the exp are
 * double (the block's exps by kcc_exp_f64 in one vectorisable loop; below e^-708 a weight is
 * e^-708, which adds nothing to a denominator >= 1 and rounds to 0 in f32), the f32 output
 * slice accumulates p * v and is rescaled when the max grows (at most n_tok / 64 times), then
 * divided by the denominator. Dot products use 8 partial f32 sums. */
#define KCC_ATTN_KB 64

static float kcc_dot8_f32(const float *KCC_RESTRICT a, const float *KCC_RESTRICT b, int64_t n)
{
    float part[8] = {0};
    const int64_t n8 = n / 8 * 8;
    for (int64_t d = 0; d < n8; d += 8)
        for (int u = 0; u < 8; ++u) part[u] += a[d + u] * b[d + u];
    float tail = 0.0f;
    for (int64_t r = 0; r < n - n8; ++r) tail += a[n8 + r] * b[n8 + r];
    return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7])) + tail;
}

static int kcc_attention_f32(const float *KCC_RESTRICT q, const float *KCC_RESTRICT k,
                             const float *KCC_RESTRICT v, const int32_t *KCC_RESTRICT lengths,
                             int64_t n_seq, int64_t n_tok, int64_t heads, int64_t head_dim, float scale,
                             float *KCC_RESTRICT out)
{
    if (n_seq < 0 || n_tok < 1 || heads < 1 || head_dim < 1) return KCC_EDIMS;
    for (int64_t b = 0; b < n_seq; ++b)
        if (lengths[b] < 1 || lengths[b] > n_tok) return KCC_EBADINPUT;
    const int64_t width = heads * head_dim;
    KCC_PARALLEL_FOR   /* each (sequence, query row) writes its own output row */
    for (int64_t bi = 0; bi < n_seq * n_tok; ++bi) {
        const int64_t b = bi / n_tok, i = bi % n_tok, len = lengths[b];
        const float *qb = q + b * n_tok * width, *kb = k + b * n_tok * width, *vb = v + b * n_tok * width;
        float s[KCC_ATTN_KB];
        for (int64_t h = 0; h < heads; ++h) {
            const float *qi = qb + i * width + h * head_dim;
            float *acc = out + (b * n_tok + i) * width + h * head_dim;
            for (int64_t d = 0; d < head_dim; ++d) acc[d] = 0.0f;
            double m = -HUGE_VAL, l = 0.0;
            for (int64_t j0 = 0; j0 < len; j0 += KCC_ATTN_KB) {
                const int64_t nb = len - j0 < KCC_ATTN_KB ? len - j0 : KCC_ATTN_KB;
                double mb = m;
                for (int64_t jj = 0; jj < nb; ++jj) {
                    s[jj] = kcc_dot8_f32(qi, kb + (j0 + jj) * width + h * head_dim, head_dim) * scale;
                    if (s[jj] > mb) mb = s[jj];
                }
                if (mb > m) {
                    const double r = exp(m - mb);    /* 0 on the first block (m = -inf) */
                    l *= r;
                    for (int64_t d = 0; d < head_dim; ++d) acc[d] = (float)(acc[d] * r);
                    m = mb;
                }
                double pd[KCC_ATTN_KB];
                for (int64_t jj = 0; jj < nb; ++jj)         /* its own loop: kcc_exp_f64 vectorises */
                    pd[jj] = kcc_exp_f64((double)s[jj] - m);     /* <= 0; NaN stays NaN */
                for (int64_t jj = 0; jj < nb; ++jj) {
                    const float p = (float)pd[jj];
                    const float *vj = vb + (j0 + jj) * width + h * head_dim;
                    l += pd[jj];
                    for (int64_t d = 0; d < head_dim; ++d) acc[d] += p * vj[d];
                }
            }
            const float inv = (float)(1.0 / l);
            for (int64_t d = 0; d < head_dim; ++d) acc[d] *= inv;
        }
    }
    return KCC_OK;
}
