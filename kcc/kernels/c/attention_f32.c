/* Multi-head scaled dot-product attention over time-major q, k, v [n_seq, n_tok, heads*head_dim]:
 * out[b, i, h, :] = sum_{j < lengths[b]} softmax_j(scale * q[b,i,h,:].k[b,j,h,:]) v[b,j,h,:].
 * Keys at j >= lengths[b] contribute nothing; every query row (padded ones too) attends to the
 * valid keys, as a transformer with an additive -inf key mask does. Every length is validated
 * (1 <= lengths[b] <= n_tok) and head_dim <= KCC_ATTN_MAX_D before the first write.
 *
 * Blocked like a GEMM, on kcc_gemm_tile_f32 (gemm_tile_f32.c): a task is one (sequence, head, block
 * of KCC_ATTN_QB query rows); per block of KCC_ATTN_KB keys it packs the keys transposed and
 * the values into GEMM panels (stack, 1/(2 QB) of the block's multiply-adds), takes the score
 * tile S = Q K^T on register tiles, the softmax weights P in place, and O += P V on register
 * tiles again, straight into the output rows. One query at a time, each key's row was read
 * once per query: the scores ran at ~35 GFLOP/s on 2 cores, a tenth of the tiles' rate.
 * Numerics: scores and p * v are the GEMM's f32 k-ordered chains (FMA where the target has it;
 * head_dim <= 128 terms sum from zero in one chunk); online softmax with a double running max
 * and denominator, the weights exp(s - m) by kcc_exp_f64 (below e^-708 a weight is e^-708,
 * which adds nothing to a denominator >= 1 and rounds to 0 in f32) rounded once to f32; the
 * output block is rescaled when a row's max grows (at most n_tok / KB times), then divided by
 * the denominator. Identical for any thread count. */
#define KCC_ATTN_QB 64      /* query rows per task: each key block is packed once per QB rows */
#define KCC_ATTN_KB 64      /* keys per block: the score tile is QB x KB floats */
#define KCC_ATTN_MAX_D 256  /* head_dim bound of the packed key / value blocks (64 KiB each) */

/* dst[p][d][16] = src row p*16 + c at column d for d < dim, keys past nb zero: nb rows of
 * src (row stride lds) transposed into GEMM panels of 16 keys, `dim` terms deep. */
static void kcc_attn_pack_keys(const float *KCC_RESTRICT src, int64_t lds, int64_t nb, int64_t dim,
                               float *KCC_RESTRICT dst)
{
    for (int64_t p = 0; p * KCC_GEMM_NR < nb; ++p)
        for (int64_t c = 0; c < KCC_GEMM_NR; ++c) {
            const int64_t j = p * KCC_GEMM_NR + c;
            for (int64_t d = 0; d < dim; ++d)
                dst[(p * dim + d) * KCC_GEMM_NR + c] = j < nb ? src[j * lds + d] : 0.0f;
        }
}

/* dst[p][j][16] = src row j at column p*16 + c for j < nb (zero past dim): nb rows of src (row
 * stride lds), `dim` wide, as GEMM panels of 16 columns, nb terms deep. */
static void kcc_attn_pack_values(const float *KCC_RESTRICT src, int64_t lds, int64_t nb, int64_t dim,
                                 float *KCC_RESTRICT dst)
{
    for (int64_t p = 0; p * KCC_GEMM_NR < dim; ++p)
        for (int64_t j = 0; j < nb; ++j)
            for (int64_t c = 0; c < KCC_GEMM_NR; ++c) {
                const int64_t d = p * KCC_GEMM_NR + c;
                dst[(p * nb + j) * KCC_GEMM_NR + c] = d < dim ? src[j * lds + d] : 0.0f;
            }
}

/* Row r of a score block: scale, fold into the running max m / denominator l (rescaling the
 * output row o when the max grows), and replace the scores by their f32 weights. The max and
 * the denominator's sum run over 16 lanes (the max is the same in any order; the sum is double),
 * so every loop vectorises, in portable builds too (KCC_VECTOR_CLONES). */
KCC_VECTOR_CLONES
static void kcc_attn_softmax_row(float *KCC_RESTRICT s, int64_t nb, float scale, double *m, double *l,
                                 float *KCC_RESTRICT o, int64_t dim)
{
    const int64_t full = nb / 16 * 16;
    float top[16];
    double part[16];
    for (int64_t u = 0; u < 16; ++u) {
        top[u] = -HUGE_VALF;
        part[u] = 0.0;
    }
    for (int64_t j0 = 0; j0 < full; j0 += 16)
        for (int64_t u = 0; u < 16; ++u) {
            s[j0 + u] *= scale;
            top[u] = s[j0 + u] > top[u] ? s[j0 + u] : top[u];     /* NaN scores never win */
        }
    for (int64_t j = full; j < nb; ++j) {
        s[j] *= scale;
        top[0] = s[j] > top[0] ? s[j] : top[0];
    }
    double mb = *m;
    for (int64_t u = 0; u < 16; ++u)
        if (top[u] > mb) mb = top[u];
    if (mb > *m) {
        const double r = exp(*m - mb);    /* 0 on the first block (m = -inf) */
        *l *= r;
        KCC_FOR16(dim, o[j] = (float)(o[j] * r););
        *m = mb;
    }
    const double mx = *m;
    double pd[KCC_ATTN_KB];
    KCC_FOR16(nb, pd[j] = kcc_exp_f64((double)s[j] - mx););      /* <= 0; NaN stays NaN */
    for (int64_t j0 = 0; j0 < full; j0 += 16)
        for (int64_t u = 0; u < 16; ++u) {
            part[u] += pd[j0 + u];
            s[j0 + u] = (float)pd[j0 + u];
        }
    double tail = 0.0;
    for (int64_t j = full; j < nb; ++j) {
        tail += pd[j];
        s[j] = (float)pd[j];
    }
    for (int64_t w = 8; w >= 1; w /= 2)       /* pairwise over the lanes */
        for (int64_t u = 0; u < w; ++u) part[u] += part[u + w];
    *l += part[0] + tail;
}

KCC_VECTOR_CLONES
static void kcc_attn_scale_row(float *KCC_RESTRICT o, int64_t dim, float by)
{
    KCC_FOR16(dim, o[j] *= by;);
}

static int kcc_attention_f32(const float *KCC_RESTRICT q, const float *KCC_RESTRICT k,
                             const float *KCC_RESTRICT v, const int32_t *KCC_RESTRICT lengths,
                             int64_t n_seq, int64_t n_tok, int64_t heads, int64_t head_dim, float scale,
                             float *KCC_RESTRICT out)
{
    if (n_seq < 0 || n_tok < 1 || heads < 1 || head_dim < 1 || head_dim > KCC_ATTN_MAX_D) return KCC_EDIMS;
    for (int64_t b = 0; b < n_seq; ++b)
        if (lengths[b] < 1 || lengths[b] > n_tok) return KCC_EBADINPUT;
    const int64_t width = heads * head_dim, qblocks = (n_tok + KCC_ATTN_QB - 1) / KCC_ATTN_QB;
    KCC_PARALLEL_FOR   /* each task writes its own query rows of one head */
    for (int64_t task = 0; task < n_seq * heads * qblocks; ++task) {
        const int64_t b = task / (heads * qblocks), h = task / qblocks % heads, i0 = task % qblocks * KCC_ATTN_QB;
        const int64_t rows = n_tok - i0 < KCC_ATTN_QB ? n_tok - i0 : KCC_ATTN_QB, len = lengths[b];
        const int64_t base = b * n_tok * width + h * head_dim;
        float kp[KCC_ATTN_KB * KCC_ATTN_MAX_D], vp[KCC_ATTN_KB * KCC_ATTN_MAX_D], s[KCC_ATTN_QB * KCC_ATTN_KB];
        double m[KCC_ATTN_QB], l[KCC_ATTN_QB];
        float *o = out + base + i0 * width;
        for (int64_t r = 0; r < rows; ++r) {
            m[r] = -HUGE_VAL;
            l[r] = 0.0;
            for (int64_t d = 0; d < head_dim; ++d) o[r * width + d] = 0.0f;
        }
        for (int64_t j0 = 0; j0 < len; j0 += KCC_ATTN_KB) {
            const int64_t nb = len - j0 < KCC_ATTN_KB ? len - j0 : KCC_ATTN_KB;
            kcc_attn_pack_keys(k + base + j0 * width, width, nb, head_dim, kp);
            kcc_gemm_packed_f32(q + base + i0 * width, width, rows, kp, head_dim, nb, s, KCC_ATTN_KB, 1);  /* S = Q K^T */
            for (int64_t r = 0; r < rows; ++r)
                kcc_attn_softmax_row(s + r * KCC_ATTN_KB, nb, scale, m + r, l + r, o + r * width, head_dim);
            kcc_attn_pack_values(v + base + j0 * width, width, nb, head_dim, vp);
            kcc_gemm_packed_f32(s, KCC_ATTN_KB, rows, vp, nb, head_dim, o, width, 0);     /* O += P V */
        }
        for (int64_t r = 0; r < rows; ++r)
            kcc_attn_scale_row(o + r * width, head_dim, (float)(1.0 / l[r]));
    }
    return KCC_OK;
}
