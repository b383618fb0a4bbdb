/* test_big_offsets.c — SPEC.md: "All offsets are computed in 64-bit: a cache of more than 2^31 elements per
 * tensor must work." Each case runs one small call twice on the same backend (CPU, and CUDA when present):
 *   1. as built, its caches a few MB: checked in full by the shared harness against the float64 reference
 *      (poisoned outputs, guard bytes, appended rows, untouched rows);
 *   2. with the same sequences' cache rows (contiguous) or pages (paged) moved past 2^32 elements from the start
 *      of caches of ~4.3 G elements each (cache_batch_idx / block_table point there), so that an offset kept in
 *      32 bits, signed or not, lands elsewhere.
 * The second call must give the first one's bits: out, lse and the appended rows (the backends are
 * deterministic and nothing but the addresses differs), leave sentinel bytes before and after the moved rows
 * untouched, and (CUDA) report a clean device status. The CPU's big caches are sparse mappings (MAP_NORESERVE:
 * only the touched pages take memory); the GPU's are real allocations (2 x 8.6 GB at 16-bit). Decode (one query)
 * and prefill (37 queries) at head dims 64 and 256, appends with rotary over half the channels. */
#include "test_cuda_common.h"

#include <sys/mman.h>

#define SENTINEL_BYTES 4096
#define SENTINEL_BYTE 0xA5

typedef struct big_buf {
    int backend;
    size_t bytes;
    void *ptr;
} big_buf;

static big_buf big_alloc(int backend, size_t bytes) {
    big_buf b = {backend, bytes, NULL};
    if (backend == KVATTN_BACKEND_CPU) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        b.ptr = p == MAP_FAILED ? NULL : p;
    }
#ifdef KVATTN_HAVE_CUDA
    else if (cudaMalloc(&b.ptr, bytes) != cudaSuccess) {
        cudaGetLastError();
        b.ptr = NULL;
    }
#endif
    return b;
}

static void big_free(big_buf *b) {
    if (!b->ptr) return;
    if (b->backend == KVATTN_BACKEND_CPU) munmap(b->ptr, b->bytes);
#ifdef KVATTN_HAVE_CUDA
    else cudaFree(b->ptr);
#endif
    b->ptr = NULL;
}

/* host <-> backend copies at a byte offset; return 0 on success */
static int put(big_buf *b, size_t at, const void *src, size_t n) {
    if (b->backend == KVATTN_BACKEND_CPU) {
        memcpy((char *)b->ptr + at, src, n);
        return 0;
    }
#ifdef KVATTN_HAVE_CUDA
    return cudaMemcpy((char *)b->ptr + at, src, n, cudaMemcpyHostToDevice) != cudaSuccess;
#else
    return 1;
#endif
}
static int get(const big_buf *b, size_t at, void *dst, size_t n) {
    if (b->backend == KVATTN_BACKEND_CPU) {
        memcpy(dst, (const char *)b->ptr + at, n);
        return 0;
    }
#ifdef KVATTN_HAVE_CUDA
    return cudaMemcpy(dst, (const char *)b->ptr + at, n, cudaMemcpyDeviceToHost) != cudaSuccess;
#else
    return 1;
#endif
}

/* the sentinels: SENTINEL_BYTES before `at` and after `at + n` */
static int put_sentinels(big_buf *b, size_t at, size_t n) {
    unsigned char s[SENTINEL_BYTES];
    memset(s, SENTINEL_BYTE, sizeof s);
    return put(b, at - sizeof s, s, sizeof s) || put(b, at + n, s, sizeof s);
}
static void check_sentinels(const big_buf *b, size_t at, size_t n, const char *name) {
    unsigned char s[2][SENTINEL_BYTES];
    if (get(b, at - SENTINEL_BYTES, s[0], SENTINEL_BYTES) || get(b, at + n, s[1], SENTINEL_BYTES)) {
        kvt_failf("%s: cannot read the sentinels back", name);
        return;
    }
    for (int side = 0; side < 2; side++)
        for (int i = 0; i < SENTINEL_BYTES; i++)
            if (s[side][i] != SENTINEL_BYTE) {
                kvt_failf("%s: sentinel byte %d %s the moved rows was written", name, i,
                          side ? "after" : "before");
                return;
            }
}

static void big_case(int backend, int dtype, int paged, int D, int nq) {
    kvt_case_begin("%s, %s, %s, head dim %d, %d queries", backend == KVATTN_BACKEND_CPU ? "CPU" : "CUDA",
                   dtype == KVATTN_BF16 ? "bf16" : "fp16", paged ? "paged (page 16)" : "contiguous", D, nq);
    const int es = kvref_dtype_size(dtype);
    int n_q[2] = {nq, 1}, n_new[2] = {nq, 1}, S[2] = {kvt_randint(0, 60), kvt_randint(1, 90)};
    cu_spec sp = cu_spec_default();
    sp.backend = backend;
    sp.dtype = dtype;
    sp.B = 2;
    sp.H = 8;
    sp.Hk = 2;
    sp.D = D;
    sp.n_q = n_q;
    sp.n_new = n_new;
    sp.S = S;
    sp.paged = paged;
    sp.page_size = 16;
    sp.rotary_dim = D / 2;
    sp.rotary_interleaved = kvt_randint(0, 1);
    kvt_problem P;
    cu_build(&P, &sp);
    P.ph.num_splits = 0;
    const size_t cache_bytes = P.k_cache.bytes;
    void *k0 = malloc(cache_bytes), *v0 = malloc(cache_bytes);
    void *small_out = malloc(P.out.bytes), *small_lse = malloc(P.lse.bytes);
    void *small_k = malloc(cache_bytes), *small_v = malloc(cache_bytes);
    void *big_out = malloc(P.out.bytes), *big_lse = malloc(P.lse.bytes);
    big_buf bk = {backend, 0, NULL}, bv = {backend, 0, NULL};
    kvt_buf bidx = {0}, btab = {0}, ws = {0};
    memcpy(k0, P.k_cache.host, cache_bytes);
    memcpy(v0, P.v_cache.host, cache_bytes);

    /* 1. the small call, checked against the reference */
    if (kvt_problem_upload(&P, 1) != 0) goto done;
    if (kvt_problem_run(&P, kvt_expect_ok()) == 1) {
        kvt_case_skip("not supported by this backend");
        goto skipped;
    }
    if (kvt_case_failed()) goto done;
    if (kvt_download(&P.out.dev, small_out, P.out.bytes) || kvt_download(&P.lse.dev, small_lse, P.lse.bytes) ||
        kvt_download(&P.k_cache.dev, small_k, cache_bytes) || kvt_download(&P.v_cache.dev, small_v, cache_bytes)) {
        kvt_failf("cannot download the small call's results");
        goto done;
    }

    /* 2. the same call with the caches' used part moved past 2^32 elements */
    kvattn_params p = P.pd;
    const int64_t unit = p.k_batch_stride; /* elements per page (paged) or per cache row (contiguous) */
    const int64_t units = paged ? p.num_pages : p.cache_batch;
    const int64_t far = ((int64_t)1 << 32) / unit + 1; /* the first moved page / row */
    const size_t at = (size_t)far * (size_t)unit * es;  /* its byte offset: past 2^32 elements */
    const size_t big_bytes = at + (size_t)units * unit * es + SENTINEL_BYTES;
    bk = big_alloc(backend, big_bytes);
    bv = big_alloc(backend, big_bytes);
    if (!bk.ptr || !bv.ptr) {
        kvt_failf("cannot allocate two caches of %zu bytes", big_bytes);
        goto done;
    }
    if (put(&bk, at, k0, cache_bytes) || put(&bv, at, v0, cache_bytes) || put_sentinels(&bk, at, cache_bytes) ||
        put_sentinels(&bv, at, cache_bytes)) {
        kvt_failf("cannot fill the big caches");
        goto done;
    }
    p.k_cache = bk.ptr;
    p.v_cache = bv.ptr;
    if (paged) {
        const size_t n = (size_t)sp.B * p.max_pages_per_seq;
        int32_t *bt = malloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            int32_t e = ((const int32_t *)P.block_table.host)[i];
            bt[i] = e < 0 ? e : (int32_t)(e + far);
        }
        p.num_pages = (int32_t)(far + units);
        btab = kvt_alloc(backend, n * 4);
        int bad = !btab.ptr || kvt_upload(&btab, bt, n * 4);
        free(bt);
        if (bad) {
            kvt_failf("cannot upload the moved block table");
            goto done;
        }
        p.block_table = btab.ptr;
    } else {
        int32_t idx[2] = {(int32_t)far, (int32_t)far + 1}; /* sequence b's row b, moved to far + b */
        p.cache_batch = (int32_t)(far + units);
        bidx = kvt_alloc(backend, sizeof idx);
        if (!bidx.ptr || kvt_upload(&bidx, idx, sizeof idx)) {
            kvt_failf("cannot upload cache_batch_idx");
            goto done;
        }
        p.cache_batch_idx = bidx.ptr;
    }
    memset(big_out, 0xFF, P.out.bytes); /* poison: NaN in every type */
    memset(big_lse, 0xFF, P.lse.bytes);
    if (kvt_upload(&P.out.dev, big_out, P.out.bytes) || kvt_upload(&P.lse.dev, big_lse, P.lse.bytes)) {
        kvt_failf("cannot poison the outputs");
        goto done;
    }
    size_t ws_bytes = 0;
    int st = kvattn_workspace_size(&p, backend, &ws_bytes);
    if (st != KVATTN_OK) {
        kvt_failf("workspace_size of the moved call: %s (%s)", kvattn_status_string(st), kvattn_last_error());
        goto done;
    }
    ws = kvt_alloc(backend, ws_bytes ? ws_bytes : 16);
    st = kvattn_forward(&p, backend, ws_bytes ? ws.ptr : NULL, ws_bytes, NULL);
    if (st != KVATTN_OK) {
        kvt_failf("forward with the moved caches: %s (%s)", kvattn_status_string(st), kvattn_last_error());
        goto done;
    }
    if (backend == KVATTN_BACKEND_CUDA) {
        if (cu_sync_ok("forward with the moved caches")) goto done;
        kvattn_device_status ds;
        int rs = kvattn_device_status_read(ws.ptr, NULL, &ds);
        if (rs != KVATTN_OK || ds.flags || ds.num_failed)
            kvt_failf("device status after the moved call: %s, flags 0x%x, %d failed", kvattn_status_string(rs),
                      ds.flags, ds.num_failed);
    }
    if (!kvt_guards_ok(&P.out.dev) || !kvt_guards_ok(&P.lse.dev) || (ws.ptr && !kvt_guards_ok(&ws)))
        kvt_failf("a guard byte around out, softmax_lse or the workspace was written");
    if (kvt_download(&P.out.dev, big_out, P.out.bytes) || kvt_download(&P.lse.dev, big_lse, P.lse.bytes)) {
        kvt_failf("cannot download the moved call's outputs");
        goto done;
    }
    if (memcmp(big_out, small_out, P.out.bytes)) kvt_failf("out differs from the small call's");
    if (memcmp(big_lse, small_lse, P.lse.bytes)) kvt_failf("softmax_lse differs from the small call's");
    void *after = malloc(cache_bytes);
    for (int which = 0; which < 2; which++) {
        big_buf *b = which ? &bv : &bk;
        if (get(b, at, after, cache_bytes)) {
            kvt_failf("cannot read the moved %s back", which ? "v_cache" : "k_cache");
            break;
        }
        if (memcmp(after, which ? small_v : small_k, cache_bytes))
            kvt_failf("the moved %s differs from the small call's after the append", which ? "v_cache" : "k_cache");
        check_sentinels(b, at, cache_bytes, which ? "v_cache" : "k_cache");
    }
    free(after);
done:
    kvt_case_end();
skipped:
    big_free(&bk);
    big_free(&bv);
    kvt_free(&bidx);
    kvt_free(&btab);
    kvt_free(&ws);
    kvt_problem_free(&P);
    free(k0), free(v0), free(small_out), free(small_lse), free(small_k), free(small_v), free(big_out), free(big_lse);
}

static void run_backend(int backend) {
    static const int dims[2] = {64, 256}, nqs[2] = {1, 37};
    for (int paged = 0; paged <= 1; paged++)
        for (int d = 0; d < 2; d++)
            for (int n = 0; n < 2; n++) big_case(backend, (d + n + paged) & 1 ? KVATTN_BF16 : KVATTN_F16, paged,
                                                 dims[d], nqs[n]);
}

int main(void) {
    kvt_init("test_big_offsets");
    run_backend(KVATTN_BACKEND_CPU);
    if (cu_gpu_or_skip(8)) run_backend(KVATTN_BACKEND_CUDA);
    return kvt_finish();
}
