/* Runs one kcc-generated circuit on files, for parity runs on another architecture
 * (scripts/aarch64_parity.py cross-compiles it with the circuit's C and runs it under qemu-user).
 * DIR/spec.txt: weights_bytes arena_bytes, n_dims dims..., n_in bytes..., n_out bytes...,
 * n_ck then per checkpoint (bytes, inject_bytes: 0 = not injected). Reads DIR/weights.bin,
 * DIR/in<i>.bin, DIR/inject<k>.bin; writes DIR/out<i>.bin, DIR/ck<k>.bin, and prints
 * "status <n> <message>". The entry point is -DKCC_ENTRY=<prefix>_run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int KCC_ENTRY(const void *weights, size_t weights_bytes, void *arena, size_t arena_bytes, const int64_t *dims,
              const void *const *inputs, void *const *outputs, void *const *checkpoints, const void *const *inject,
              char *err, size_t err_len);

static const char *dir;

static FILE *open_in(const char *stem, long long i, const char *mode)
{
    char path[4096];
    if (i < 0) snprintf(path, sizeof path, "%s/%s", dir, stem);
    else snprintf(path, sizeof path, "%s/%s%lld.bin", dir, stem, i);
    return fopen(path, mode);
}

/* 64-byte aligned, zeroed, at least one byte (the entry point checks alignment). */
static void *buffer(long long n)
{
    const size_t bytes = ((size_t)n + 64) / 64 * 64;
    void *p = aligned_alloc(64, bytes);
    if (!p) {
        fprintf(stderr, "out of memory (%lld bytes)\n", n);
        exit(2);
    }
    memset(p, 0, bytes);
    return p;
}

static void *load(const char *stem, long long i, long long n)
{
    void *p = buffer(n);
    FILE *f = open_in(stem, i, "rb");
    if (!f || fread(p, 1, (size_t)n, f) != (size_t)n || fclose(f)) {
        fprintf(stderr, "cannot read %lld bytes of %s %lld\n", n, stem, i);
        exit(2);
    }
    return p;
}

static void save(const char *stem, long long i, const void *p, long long n)
{
    FILE *f = open_in(stem, i, "wb");
    if (!f || fwrite(p, 1, (size_t)n, f) != (size_t)n || fclose(f)) {
        fprintf(stderr, "cannot write %s %lld\n", stem, i);
        exit(2);
    }
}

static long long next(FILE *f)
{
    long long v;
    if (fscanf(f, "%lld", &v) != 1 || v < 0) {
        fprintf(stderr, "malformed spec.txt\n");
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    FILE *spec = open_in("spec.txt", -1, "r");
    if (!spec) {
        fprintf(stderr, "no %s/spec.txt\n", dir);
        return 2;
    }
    const long long wbytes = next(spec), abytes = next(spec);
    const long long nd = next(spec);
    int64_t *dims = buffer((nd + 1) * (long long)sizeof(int64_t));
    for (long long i = 0; i < nd; ++i) dims[i] = next(spec);
    const long long ni = next(spec);
    const void **ins = buffer((ni + 1) * (long long)sizeof(void *));
    for (long long i = 0; i < ni; ++i) ins[i] = load("in", i, next(spec));
    const long long no = next(spec);
    void **outs = buffer((no + 1) * (long long)sizeof(void *));
    long long *obytes = buffer((no + 1) * (long long)sizeof(long long));
    for (long long i = 0; i < no; ++i) outs[i] = buffer(obytes[i] = next(spec));
    const long long nc = next(spec);
    void **cks = buffer((nc + 1) * (long long)sizeof(void *));
    const void **inj = buffer((nc + 1) * (long long)sizeof(void *));
    long long *cbytes = buffer((nc + 1) * (long long)sizeof(long long));
    for (long long k = 0; k < nc; ++k) {
        cks[k] = buffer(cbytes[k] = next(spec));
        const long long ib = next(spec);
        inj[k] = ib ? load("inject", k, ib) : NULL;
    }
    fclose(spec);
    void *weights = load("weights.bin", -1, wbytes), *arena = buffer(abytes);
    char err[512] = "";
    const int status = KCC_ENTRY(weights, (size_t)wbytes, arena, (size_t)abytes, dims, ins, outs,
                                 nc ? cks : NULL, nc ? inj : NULL, err, sizeof err);
    for (long long i = 0; status == 0 && i < no; ++i) save("out", i, outs[i], obytes[i]);
    for (long long k = 0; status == 0 && k < nc; ++k) save("ck", k, cks[k], cbytes[k]);
    printf("status %d %s\n", status, err);
    return 0;
}
