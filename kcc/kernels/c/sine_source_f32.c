/* Harmonic-plus-noise excitation (neural source-filter "SineGen" + merge), from frame-rate f0.
 *
 * For batch b, frame-rate f0[b, n_frame] is nearest-upsampled by `up` to n_out = n_frame*up
 * samples; harmonic h (1..n_harm) has per-sample phase increment rad = (f0*h / sample_rate) mod 1
 * (+ init_phase[b,h] on sample 0, none for the fundamental). The increments are linearly
 * resampled down by 1/up, cumulatively summed (f64 accumulator, each prefix rounded to f32, as
 * torch's CPU cumsum), scaled by 2*pi*up and linearly resampled back up by `up`; then
 *   s_h = sin(phase) * sine_amp * uv + amp * noise[b, t, h],   uv = f0 > voiced_threshold,
 *   amp = uv * noise_std + (1 - uv) * sine_amp / 3,
 *   out[b, t] = tanh(sum_h mix_w[h] * s_h + mix_b[0]).
 * The resampling replays torch's linear-interpolation arithmetic (align_corners=False, the
 * scale passed as 1/scale_factor, source index and blend as single-rounding fused
 * multiply-adds), so the phase matches an FP32 torch run bit for bit before the sine; a
 * free-running f32 phase would drift by many ulps over long inputs instead.
 * No scratch: the cumulative phase is produced frame by frame as the output walks forward. */
#define KCC_SINE_MAX_HARM 64
#define KCC_SINE_CHUNKS 32   /* parallel chunks of output samples (each starts from a snapshot) */

/* f0 at output sample t under nearest upsampling (torch: floor(t * (float)(1/up))). */
static float kcc_sine_f0_at(const float *KCC_RESTRICT f0, int64_t n_frame, float near_scale, int64_t t)
{
    int64_t j = (int64_t)floorf((float)t * near_scale);
    return f0[j < n_frame - 1 ? j : n_frame - 1];
}

/* torch.remainder(x, 1) for f32: fmod, moved into [0, 1). */
static float kcc_sine_frac(float x)
{
    float m = fmodf(x, 1.0f);
    return (m != 0.0f && m < 0.0f) ? m + 1.0f : m;
}

/* Linear-interpolation source position for output index i (torch's area_pixel_compute_source_index
 * followed by guard_index_and_lambda): returns the left index, writes the two blend weights. */
static int64_t kcc_sine_lerp_index(float scale, int64_t i, int64_t n_in, float *w0, float *w1)
{
    float src = fmaf(scale, (float)i + 0.5f, -0.5f);
    if (src < 0.0f) src = 0.0f;
    int64_t i0 = (int64_t)floorf(src);
    if (i0 > n_in - 1) i0 = n_in - 1;
    float l1 = src - (float)i0;
    l1 = l1 < 0.0f ? 0.0f : (l1 > 1.0f ? 1.0f : l1);
    *w1 = l1;
    *w0 = 1.0f - l1;
    return i0;
}

/* The phase walk's state: frames [0, have] produced, frame j's phases in ph[j & 1]. */
struct kcc_sine_walk {
    int64_t have;
    double acc[KCC_SINE_MAX_HARM];
    float ph[2][KCC_SINE_MAX_HARM];
};

/* Produce the frame phases up to frame i1, the right lerp frame of the current output sample
 * (its left frame i0 never decreases and i1 <= i0 + 1, so the two slots always hold both). */
static void kcc_sine_walk_to(struct kcc_sine_walk *w, int64_t i1, const float *KCC_RESTRICT fb,
                             const float *KCC_RESTRICT ib, int64_t n_frame, int64_t n_out, int64_t n_harm,
                             float up_scale, float down_scale, float sample_rate, float upf)
{
    const float pi_f = (float)3.14159265358979323846;
    while (w->have < i1) {
        const int64_t j = ++w->have;
        float d0, d1;   /* down-resampling of the per-sample increments: two taps */
        const int64_t s0 = kcc_sine_lerp_index(down_scale, j, n_out, &d0, &d1);
        const int64_t s1 = s0 + (s0 < n_out - 1 ? 1 : 0);
        const float fa = kcc_sine_f0_at(fb, n_frame, up_scale, s0);
        const float fc = kcc_sine_f0_at(fb, n_frame, up_scale, s1);
        float *pj = w->ph[j & 1];
        for (int64_t h = 0; h < n_harm; ++h) {
            const float hm = (float)(h + 1);
            float ra = kcc_sine_frac(fa * hm / sample_rate);
            float rc = kcc_sine_frac(fc * hm / sample_rate);
            if (h > 0 && s0 == 0) ra += ib[h];
            if (h > 0 && s1 == 0) rc += ib[h];
            w->acc[h] += (double)fmaf(ra, d0, rc * d1);
            pj[h] = (float)w->acc[h] * 2.0f * pi_f * upf;
        }
    }
}

/* Output sample t's left lerp frame (returned), right frame *i1 and blend weights. */
static int64_t kcc_sine_frames_of(int64_t t, int64_t n_frame, float up_scale, int64_t *i1, float *w0, float *w1)
{
    const int64_t i0 = kcc_sine_lerp_index(up_scale, t, n_frame, w0, w1);
    *i1 = i0 + (i0 < n_frame - 1 ? 1 : 0);
    return i0;
}

static int kcc_harmonic_noise_source_f32(
    const float *KCC_RESTRICT f0, const float *KCC_RESTRICT init_phase, const float *KCC_RESTRICT noise,
    const float *KCC_RESTRICT mix_w, const float *KCC_RESTRICT mix_b, int64_t n_batch, int64_t n_frame,
    int64_t n_noise_rows, int64_t up, int64_t n_harm, float sample_rate, float sine_amp, float noise_std,
    float voiced_threshold, float *KCC_RESTRICT out)
{
    if (n_batch < 1 || n_frame < 1 || up < 1) return KCC_EBADINPUT;
    if (n_harm < 1 || n_harm > KCC_SINE_MAX_HARM) return KCC_EBADINPUT;
    if (n_noise_rows != n_frame * up) return KCC_EBADINPUT;
    if (!(sample_rate > 0.0f)) return KCC_EBADINPUT;
    const int64_t n_out = n_frame * up;
    /* Scales as torch derives them from scale_factor 1/up (down) and up (up and nearest). */
    const float down_scale = (float)(1.0 / (1.0 / (double)up));
    const float up_scale = (float)(1.0 / (double)up);
    const float upf = (float)up;

    /* The frame phases are a running sum (serial); the per-sample sines are not. A serial
     * pre-pass replays the phase walk and snapshots its state at each chunk's first sample;
     * the chunks then run in parallel from their snapshots, so every value is computed by the
     * same operations in the same order as one serial walk: identical for any thread count. */
    const int64_t chunk = (n_out + KCC_SINE_CHUNKS - 1) / KCC_SINE_CHUNKS;
    const int64_t n_chunks = (n_out + chunk - 1) / chunk;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *fb = f0 + b * n_frame;
        const float *ib = init_phase + b * n_harm;
        const float *nb = noise + b * n_out * n_harm;
        float *ob = out + b * n_out;
        struct kcc_sine_walk snap[KCC_SINE_CHUNKS];
        struct kcc_sine_walk w;
        w.have = -1;
        for (int64_t h = 0; h < n_harm; ++h) w.acc[h] = 0.0;
        for (int64_t t = 0; t < n_out; ++t) {
            int64_t i1;
            float w0, w1;
            if (t % chunk == 0) snap[t / chunk] = w;
            (void)kcc_sine_frames_of(t, n_frame, up_scale, &i1, &w0, &w1);
            kcc_sine_walk_to(&w, i1, fb, ib, n_frame, n_out, n_harm, up_scale, down_scale, sample_rate, upf);
        }
        KCC_PARALLEL_FOR
        for (int64_t c = 0; c < n_chunks; ++c) {
            struct kcc_sine_walk cw = snap[c];
            const int64_t t1 = n_out - c * chunk < chunk ? n_out : (c + 1) * chunk;
            for (int64_t t = c * chunk; t < t1; ++t) {
                int64_t i1;
                float w0, w1;
                const int64_t i0 = kcc_sine_frames_of(t, n_frame, up_scale, &i1, &w0, &w1);
                kcc_sine_walk_to(&cw, i1, fb, ib, n_frame, n_out, n_harm, up_scale, down_scale, sample_rate, upf);
                const float *p0 = cw.ph[i0 & 1], *p1 = cw.ph[i1 & 1];
                const float fv = kcc_sine_f0_at(fb, n_frame, up_scale, t);
                const float uv = fv > voiced_threshold ? 1.0f : 0.0f;
                const float amp = uv * noise_std + (1.0f - uv) * sine_amp / 3.0f;
                const float *nt = nb + t * n_harm;
                double mix = 0.0;
                for (int64_t h = 0; h < n_harm; ++h) {
                    const float phase = fmaf(p0[h], w0, p1[h] * w1);
                    const float s = sinf(phase) * sine_amp * uv + amp * nt[h];
                    mix += (double)mix_w[h] * (double)s;
                }
                ob[t] = tanhf((float)(mix + (double)mix_b[0]));
            }
        }
    }
    return KCC_OK;
}
