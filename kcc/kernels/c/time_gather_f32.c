/* Rows copied by a time index map, x [n_batch, t_in, n_chan] -> out [n_batch, t_out, n_chan],
 * t_out = t_in*factor + pad_left + pad_right: output row t reads the nearest-upsampled row
 * u = reflect(t - pad_left) / factor, reflect mirroring about both ends without repeating
 * the edge (torch ReflectionPad1d). factor 2, no pads: F.interpolate(scale 2, 'nearest');
 * factor 1, pad_left 1: ReflectionPad1d((1, 0)). Pads must be shorter than the upsampled length. */
static int kcc_time_gather_f32(const float *KCC_RESTRICT x, int64_t n_batch, int64_t t_in, int64_t n_chan,
                               int64_t factor, int64_t pad_left, int64_t pad_right, float *KCC_RESTRICT out)
{
    if (n_batch < 1 || t_in < 1 || n_chan < 1 || factor < 1 || pad_left < 0 || pad_right < 0) return KCC_EDIMS;
    const int64_t t_up = t_in * factor;
    if (pad_left >= t_up || pad_right >= t_up) return KCC_EDIMS;   /* reflection needs a longer input */
    const int64_t t_out = t_up + pad_left + pad_right;
    for (int64_t b = 0; b < n_batch; ++b) {
        for (int64_t t = 0; t < t_out; ++t) {
            int64_t u = t - pad_left;
            if (u < 0) u = -u;
            if (u >= t_up) u = 2 * (t_up - 1) - u;
            memcpy(out + (b * t_out + t) * n_chan, x + (b * t_in + u / factor) * n_chan,
                   (size_t)n_chan * sizeof(float));
        }
    }
    return KCC_OK;
}
