/* Style-conditioned instance norm over time-major x [n_batch, n_time, n_chan]:
 *   h = fc_w @ style[b] + fc_b  (fc_w [2*n_chan, n_style]; gamma = h[:n_chan], beta = h[n_chan:])
 *   xn = (x - mean_t) / sqrt(var_t + eps) * norm_w + norm_b    (biased variance over time, per b, c)
 *   y = (1 + gamma) * xn + beta                                 (f32, torch's operation order)
 * xn is formed as torch's CPU batch-norm kernel forms it: x * scale + offset, one multiply-add.
 * then act: 0 none, 1 leaky (y >= 0 ? y : slope*y), 2 snake (y + sin(alpha*y)^2 / alpha, alpha [n_chan]).
 * Statistics are one-pass shifted f64 sums over fixed parts of time, added in order. The statistics and the
 * per-element step are helpers shared with the fused norm_conv1d kernel (identical results).
 * Snake is torch's y + (1/alpha) * sin(alpha*y)^2 in f32, sin^2 a branch-free f32 polynomial
 * (kcc_sin2_f32) so the row loop vectorises 16 wide; arguments past KCC_SIN2_MAX fall back to
 * libm sin in f64. */
#define KCC_IN_PARTS 8      /* fixed parts of time for the statistics (not the thread count) */
#define KCC_IN_MAX_C 2048   /* channels: the statistics live in stack arrays (kcc/ops/adain.py checks) */
#define KCC_IN_CHUNK 64     /* rows at most per parallel chunk of the normalising pass */
#define KCC_IN_CBLOCK 256   /* channels at most per parallel block of the per-channel constants */
#define KCC_SIN2_MAX 8192.0f

/* sin(z)^2 for |z| <= KCC_SIN2_MAX, ~2 ulp: z = n*pi/2 + r, |r| <= pi/4 (Cody-Waite with cephes'
 * three-part pi/2; n*P1 is exact for |n| < 2^16), cephes' sinf/cosf kernels on r; sin^2 z is
 * sin^2 r for even n and cos^2 r for odd n, picked arithmetically (no branch). */
static inline float kcc_sin2_f32(float z)
{
    const float magic = 12582912.0f;                              /* 1.5 * 2^23: round to integer */
    const float n = (z * 0.636619772367581343f + magic) - magic;
    const float r = ((z - n * 1.5703125f) - n * 4.837512969970703125e-4f) - n * 7.54978995489188216e-8f;
    const float h = n * 0.5f, odd = 2.0f * fabsf(h - ((h + magic) - magic));   /* 1 for odd n, else 0 */
    const float r2 = r * r;
    const float sn = r + r * r2 * (-1.6666654611e-1f + r2 * (8.3321608736e-3f + r2 * -1.9515295891e-4f));
    const float cs = 1.0f - 0.5f * r2 + r2 * r2 * (4.166664568298827e-2f + r2 * (-1.388731625493765e-3f
                     + r2 * 2.443315711809948e-5f));
    const float s2 = sn * sn;
    return s2 + odd * (cs * cs - s2);
}

/* Rows [t0, t1) of one batch, every channel: f64 sums of x - x0 and its square into s1, s2
 * (x0 = row 0: the shift keeps the variance's cancellation small). Contiguous rows, one pass;
 * channels through KCC_FOR16 (portable -O2 builds vectorise it). */
KCC_VECTOR_CLONES
static void kcc_in_style_sums(const float *KCC_RESTRICT xb, int64_t t0, int64_t t1, int64_t n_chan,
                              double *KCC_RESTRICT s1, double *KCC_RESTRICT s2)
{
    for (int64_t j = 0; j < n_chan; ++j) s1[j] = s2[j] = 0.0;
    for (int64_t t = t0; t < t1; ++t) {
        const float *KCC_RESTRICT xr = xb + t * n_chan;
        KCC_FOR16(n_chan, const double d = (double)xr[j] - (double)xb[j]; s1[j] += d; s2[j] += d * d;);
    }
}

/* One batch's per-channel constants (kcc_in_style_stats): the norm as torch's batch-norm kernel
 * applies it, xn = x * scale + offset with scale = invstd * norm_w and offset = norm_b - mean * scale
 * in f32; y = gain * xn + shift (gain 1 + gamma, shift beta); Snake's alpha and 1/alpha (torch
 * divides once per channel). */
typedef struct {
    float scale[KCC_IN_MAX_C], offset[KCC_IN_MAX_C], gain[KCC_IN_MAX_C], shift[KCC_IN_MAX_C];
    float alpha[KCC_IN_MAX_C], ralpha[KCC_IN_MAX_C];
} kcc_in_style_params;

/* Channels [j0, j1) of one batch's constants from the part sums. The style fc's dot products run
 * four channels at a time (eight independent f64 chains, not two latency-bound ones), each
 * channel's terms still added in k order from fc_b: the same bits as one channel at a time. */
static void kcc_in_style_channels(const double (*KCC_RESTRICT part)[2][KCC_IN_MAX_C], const float *KCC_RESTRICT xb,
                                  const float *KCC_RESTRICT sb, int64_t n_time, int64_t n_chan, int64_t n_style,
                                  const float *KCC_RESTRICT norm_w, const float *KCC_RESTRICT norm_b,
                                  const float *KCC_RESTRICT fc_w, const float *KCC_RESTRICT fc_b,
                                  const float *KCC_RESTRICT alpha, int64_t act, float eps, int64_t j0, int64_t j1,
                                  kcc_in_style_params *KCC_RESTRICT p)
{
    for (int64_t j = j0; j < j1; ++j) {
        double s1 = 0.0, s2 = 0.0;
        for (int64_t q = 0; q < KCC_IN_PARTS; ++q) {
            s1 += part[q][0][j];
            s2 += part[q][1][j];
        }
        const double m = s1 / (double)n_time;
        double var = s2 / (double)n_time - m * m;                        /* biased variance */
        if (var < 0.0) var = 0.0;
        const float mean = (float)((double)xb[j] + m), invstd = (float)(1.0 / sqrt(var + (double)eps));
        p->scale[j] = invstd * norm_w[j];
        p->offset[j] = norm_b[j] - mean * p->scale[j];
        p->alpha[j] = act == 2 ? alpha[j] : 1.0f;
        p->ralpha[j] = 1.0f / p->alpha[j];
    }
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) {
        double g[4], sh[4];
        const float *wg[4], *ws[4];
        for (int i = 0; i < 4; ++i) {
            g[i] = (double)fc_b[j + i];
            sh[i] = (double)fc_b[n_chan + j + i];
            wg[i] = fc_w + (j + i) * n_style;
            ws[i] = fc_w + (n_chan + j + i) * n_style;
        }
        for (int64_t k = 0; k < n_style; ++k) {
            const double sk = (double)sb[k];
            for (int i = 0; i < 4; ++i) {
                g[i] += (double)wg[i][k] * sk;
                sh[i] += (double)ws[i][k] * sk;
            }
        }
        for (int i = 0; i < 4; ++i) {
            p->gain[j + i] = 1.0f + (float)g[i];
            p->shift[j + i] = (float)sh[i];
        }
    }
    for (; j < j1; ++j) {
        double g = (double)fc_b[j], sh = (double)fc_b[n_chan + j];
        for (int64_t k = 0; k < n_style; ++k) {
            g += (double)fc_w[j * n_style + k] * (double)sb[k];
            sh += (double)fc_w[(n_chan + j) * n_style + k] * (double)sb[k];
        }
        p->gain[j] = 1.0f + (float)g;
        p->shift[j] = (float)sh;
    }
}

/* The rows are cut into KCC_IN_PARTS fixed parts summed in parallel, then added in part order:
 * the same result for any thread count. mean and invstd are f64, rounded to f32 as torch stores
 * them; the fc dot products are f64, rounded once. alpha is not read unless act = 2. The
 * per-channel step runs in parallel too, in blocks of KCC_IN_CBLOCK channels: serial, the
 * style fc (2 * n_chan * n_style f64 products) was a tenth of a short utterance's AdaIN calls. */
static void kcc_in_style_stats(const float *KCC_RESTRICT xb, const float *KCC_RESTRICT sb, int64_t n_time,
                               int64_t n_chan, int64_t n_style, const float *KCC_RESTRICT norm_w,
                               const float *KCC_RESTRICT norm_b, const float *KCC_RESTRICT fc_w,
                               const float *KCC_RESTRICT fc_b, const float *KCC_RESTRICT alpha, int64_t act,
                               float eps, kcc_in_style_params *KCC_RESTRICT p)
{
    double part[KCC_IN_PARTS][2][KCC_IN_MAX_C];   /* 256 KiB of the calling thread's stack */
    const int64_t rows = (n_time + KCC_IN_PARTS - 1) / KCC_IN_PARTS;
    KCC_PARALLEL_FOR   /* parts are independent */
    for (int64_t q = 0; q < KCC_IN_PARTS; ++q) {
        const int64_t t0 = q * rows < n_time ? q * rows : n_time, t1 = t0 + rows < n_time ? t0 + rows : n_time;
        kcc_in_style_sums(xb, t0, t1, n_chan, part[q][0], part[q][1]);
    }
    const int64_t cb = kcc_split_even(n_chan, KCC_IN_CBLOCK), blocks = (n_chan + cb - 1) / cb;
    KCC_PARALLEL_FOR   /* each block writes its own channels */
    for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t j0 = blk * cb, j1 = j0 + cb < n_chan ? j0 + cb : n_chan;
        kcc_in_style_channels((const double (*)[2][KCC_IN_MAX_C])part, xb, sb, n_time, n_chan, n_style, norm_w,
                              norm_b, fc_w, fc_b, alpha, act, eps, j0, j1, p);
    }
}

static float kcc_in_style_y(float x, const kcc_in_style_params *KCC_RESTRICT p, int64_t j)
{
    return p->gain[j] * KCC_MADD(x, p->scale[j], p->offset[j]) + p->shift[j];
}

/* One row of channels [0, n): yr = act((1 + gamma) * xn + beta), each step a KCC_FOR16 loop
 * (constant-width blocks: they vectorise at -O2). */
KCC_VECTOR_CLONES
static void kcc_in_style_row(const float *KCC_RESTRICT xr, int64_t n, const kcc_in_style_params *KCC_RESTRICT p,
                             int64_t act, float slope, float *KCC_RESTRICT yr)
{
    KCC_FOR16(n, yr[j] = kcc_in_style_y(xr[j], p, j););
    if (act == 1) {
        KCC_FOR16(n, yr[j] = kcc_leaky_f32(yr[j], slope););
    } else if (act == 2) {
        int big = 0;
        KCC_FOR16(n, const float y = yr[j]; const float a = p->alpha[j]; big |= fabsf(a * y) > KCC_SIN2_MAX;
                  yr[j] = y + p->ralpha[j] * kcc_sin2_f32(a * y););
        for (int64_t j = 0; big && j < n; ++j) {         /* rare: huge arguments, redo with libm */
            const float y = kcc_in_style_y(xr[j], p, j), a = p->alpha[j];
            if (fabsf(a * y) > KCC_SIN2_MAX) {
                const double sn = sin((double)(a * y));
                yr[j] = y + p->ralpha[j] * (float)(sn * sn);
            }
        }
    }
}

static int kcc_instance_norm_style_f32(
    const float *KCC_RESTRICT x, const float *KCC_RESTRICT style, int64_t n_batch, int64_t n_time,
    int64_t n_chan, int64_t n_style, const float *KCC_RESTRICT norm_w, const float *KCC_RESTRICT norm_b,
    const float *KCC_RESTRICT fc_w, const float *KCC_RESTRICT fc_b, const float *KCC_RESTRICT alpha,
    int64_t act, float slope, float eps, float *KCC_RESTRICT out)
{
    if (n_batch < 1 || n_time < 1 || n_chan < 1 || n_chan > KCC_IN_MAX_C || n_style < 1) return KCC_EDIMS;
    if (act < 0 || act > 2 || !(eps > 0.0f)) return KCC_EBADINPUT;
    /* Statistics (parts of time in parallel), then whole rows in chunks of time (in parallel):
     * both passes read contiguous rows. */
    /* Chunks of equal size, a whole number of rounds for the threads (kcc_split_even: 520 rows
     * in 64-row chunks were 5 + 4 on 2 threads); a row's result does not depend on its chunk. */
    kcc_in_style_params p;
    const int64_t chunk = kcc_split_even(n_time, KCC_IN_CHUNK), chunks = (n_time + chunk - 1) / chunk;
    for (int64_t b = 0; b < n_batch; ++b) {
        const float *xb = x + b * n_time * n_chan;
        float *ob = out + b * n_time * n_chan;
        kcc_in_style_stats(xb, style + b * n_style, n_time, n_chan, n_style, norm_w, norm_b, fc_w, fc_b, alpha, act,
                           eps, &p);
        KCC_PARALLEL_FOR   /* each chunk of rows is written by one thread */
        for (int64_t ch = 0; ch < chunks; ++ch) {
            const int64_t t1 = n_time - ch * chunk < chunk ? n_time : (ch + 1) * chunk;
            for (int64_t t = ch * chunk; t < t1; ++t)
                kcc_in_style_row(xb + t * n_chan, n_chan, &p, act, slope, ob + t * n_chan);
        }
    }
    return KCC_OK;
}
