/* Integer durations from per-token logits over K duration bins:
 *   dur[b,t] = max(1, round_half_even(sum_k sigmoid(logits[b,t,k]) / speed[b]))  for t < lengths[b]
 *   dur[b,t] = 0 for padded tokens t >= lengths[b] (they contribute no frames).
 * Each sigmoid is evaluated in double and rounded to f32 (torch's f32 sigmoid), the K terms
 * are summed in double and rounded to f32 once, then divided by speed in f32, then rounded
 * half to even (rint under the default rounding mode, as torch.round). Checks before the first
 * write: 0 < speed <= 5 and finite, lengths in [1, n_tok], every quotient finite and at most
 * KCC_MAX_DURATION. */
#define KCC_MAX_DURATION 1048576.0f

static int kcc_durations_from_logits_f32(const float *KCC_RESTRICT logits, const float *KCC_RESTRICT speed,
                                         const int32_t *KCC_RESTRICT lengths, int64_t n_seq, int64_t n_tok,
                                         int64_t n_bins, int32_t *KCC_RESTRICT dur)
{
    if (n_seq < 1 || n_tok < 1 || n_bins < 1) return KCC_EDIMS;
    for (int64_t b = 0; b < n_seq; ++b) {
        if (!isfinite(speed[b]) || !(speed[b] > 0.0f) || speed[b] > 5.0f) return KCC_EBADINPUT;
        if (lengths[b] < 1 || lengths[b] > n_tok) return KCC_EBADINPUT;
    }
    /* Pass 0 validates every quotient, pass 1 writes: a rejected call leaves dur untouched. */
    for (int pass = 0; pass < 2; ++pass) {
        for (int64_t b = 0; b < n_seq; ++b) {
            for (int64_t t = 0; t < n_tok; ++t) {
                if (t >= lengths[b]) {
                    if (pass) dur[b * n_tok + t] = 0;
                    continue;
                }
                const float *l = logits + (b * n_tok + t) * n_bins;
                double sum = 0.0;
                for (int64_t k = 0; k < n_bins; ++k) sum += (double)(float)(1.0 / (1.0 + exp(-(double)l[k])));
                const float q = (float)sum / speed[b];
                if (!isfinite(q) || q > KCC_MAX_DURATION) return KCC_EBADINPUT;
                const float r = rintf(q);
                if (pass) dur[b * n_tok + t] = r < 1.0f ? 1 : (int32_t)r;
            }
        }
    }
    return KCC_OK;
}
