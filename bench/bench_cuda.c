/* bench_cuda.c — the CUDA backend on the H200: decode bandwidth (contiguous and paged 1/16/64/256), the inflight
 * step of PERF.md, and causal prefill TFLOP/s, each against ceilings measured in the same run (a 4 GiB
 * read-only sum with 16-byte loads, and a device-to-device copy). bf16, D = 128 (or KVATTN_BENCH_D), GQA 32/8.
 * Timing: CUDA events around each call, warm-up first, median of many runs, rotating between cache copies so
 * that every set read is well beyond the 60 MB L2. Every configuration is also checked once against the
 * float64 reference on a few rows of one sequence (causal rows are checked by re-posing them as a smaller
 * bottom-right-aligned problem: row i only sees keys up to its own position).
 * Usage: bench_cuda [--quick] [--md FILE] [--json FILE]. A benchmark, never a pass/fail test.
 * KVATTN_BENCH_DECODE="BxL,BxL,..." (at most 6 shapes, B * L <= 2^20) replaces the decode shapes of section (1),
 * e.g. lengths that are not powers of two, whose split merges have other piece counts (default: the shapes).
 * KVATTN_BENCH_D=d (a multiple of 8 from 8 to 256; default 128) runs every section at head dim d; the peers' figures
 * (PERF.md, head dim 128) are then left out. */
#include "harness.h"
#include "kvattn.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define H 32
#define HK 8
static int D = 128; /* head dim: KVATTN_BENCH_D */
#define ES 2 /* bf16 */

#define CK(call)                                                                                             \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));           \
            exit(2);                                                                                         \
        }                                                                                                    \
    } while (0)

/* ---- the helper kernels (bench_kernels.cu, embedded as PTX: the Makefile builds benchmarks with the C
 * compiler, so they are loaded at run time with cudaLibraryLoadData) ------------------------------------- */
#include "bench_kernels_ptx.h"
static cudaKernel_t g_k_read, g_k_fill;
static void kernels_load(void) {
    cudaLibrary_t lib;
    CK(cudaLibraryLoadData(&lib, bench_kernels_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CK(cudaLibraryGetKernel(&g_k_read, lib, "bench_read_sum"));
    CK(cudaLibraryGetKernel(&g_k_fill, lib, "bench_fill_bf16"));
}
static void bench_fill_bf16(void *p, size_t n, unsigned seed) {
    unsigned long long nn = n;
    void *args[3] = {&p, &nn, &seed};
    dim3 grid = {1056, 1, 1}, block = {256, 1, 1};
    CK(cudaLaunchKernel((const void *)g_k_fill, grid, block, args, 0, NULL));
    CK(cudaGetLastError());
}
static int cmp_f(const void *a, const void *b);
static double kvt_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static float median(float *v, int n);
/* The read kernel (16-byte loads, 8 blocks of 512 per SM) over `bytes` of buf[i % nbuf] in launch i: median us of
 * one launch isolated (events around it, the stream drained first; 2 warm-ups), and with b2b_us the median over 5
 * rounds of `reps` launches back to back, per launch. */
static double bench_read_us(void *const *buf, int nbuf, size_t bytes, int reps, double *b2b_us) {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    void *out;
    CK(cudaMalloc(&out, (size_t)sms * 8 * 4));
    unsigned long long n16 = bytes / 16;
    dim3 grid = {(unsigned)sms * 8, 1, 1}, block = {512, 1, 1};
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float t[64], rt[5];
    if (reps > 64) reps = 64;
    for (int i = 0; i < reps + 2; i++) {
        void *args[3] = {(void *)&buf[i % nbuf], &n16, &out};
        CK(cudaEventRecord(e0, NULL));
        CK(cudaLaunchKernel((const void *)g_k_read, grid, block, args, 0, NULL));
        CK(cudaEventRecord(e1, NULL));
        CK(cudaEventSynchronize(e1));
        if (i >= 2) CK(cudaEventElapsedTime(&t[i - 2], e0, e1));
    }
    for (int round = 0; b2b_us && round < 5; round++) {
        CK(cudaEventRecord(e0, NULL));
        for (int i = 0; i < reps; i++) {
            void *args[3] = {(void *)&buf[i % nbuf], &n16, &out};
            CK(cudaLaunchKernel((const void *)g_k_read, grid, block, args, 0, NULL));
        }
        CK(cudaEventRecord(e1, NULL));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&rt[round], e0, e1));
        rt[round] /= (float)reps;
    }
    if (b2b_us) *b2b_us = 1000.0 * median(rt, 5);
    cudaFree(out);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return 1000.0 * median(t, reps);
}

/* Read ceiling: TB/s of summing `bytes` of one buffer, median of `reps` isolated launches. */
static double bench_read_ceiling_tbs(size_t bytes, int reps) {
    void *buf;
    CK(cudaMalloc(&buf, bytes));
    bench_fill_bf16(buf, bytes / 2, 3);
    const double us = bench_read_us(&buf, 1, bytes, reps, NULL);
    cudaFree(buf);
    return (double)bytes / (us * 1e-6) / 1e12;
}

static int g_quick;
static double g_read_tbs, g_copy_tbs;
/* KVATTN_BENCH_APPEND=2: the appended keys get rotary (full head dim, adjacent channels paired: rotary_interleaved,
 * the default) */
static int g_rope;

/* A plain read of `bytes` (the read-ceiling kernel over two rotated buffers, each larger than the L2): median us of
 * one launch isolated and per launch back to back (*b2b_us). What a kernel that only reads a decode shape's K and V
 * once, with no attention and no scheduling, takes in this run. */
static double bench_plain_read_us(size_t bytes, int reps, double *b2b_us) {
    void *buf[2];
    for (int c = 0; c < 2; c++) {
        CK(cudaMalloc(&buf[c], bytes));
        bench_fill_bf16(buf[c], bytes / 2, 21 + c);
    }
    const double us = bench_read_us(buf, 2, bytes, reps, b2b_us);
    for (int c = 0; c < 2; c++) cudaFree(buf[c]);
    return us;
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}
static float median(float *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_f);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- one benchmark problem on the device ----------------------------------------------------------------- */
typedef struct bproblem {
    int B, paged, page_size, n_copies;
    int32_t *n_q, *n_new, *S; /* host [B] */
    kvattn_params p[8];       /* one per cache copy (k_cache / v_cache differ) */
    void *kc[8], *vc[8];
    void *q, *kn, *vn, *out, *lse, *cu_q, *cu_kn, *sl, *bt, *ws;
    int32_t *bt_h, *cu_q_h, *cu_kn_h;
    size_t ws_bytes, cache_bytes;
    int max_pages, num_pages, cap;
    uint16_t *q_h; /* host copy of q (for the check) */
    void *rcos, *rsin;       /* g_rope: fp32 [need_max, D / 2] tables on the device */
    float *rcos_h, *rsin_h;  /* and on the host (the check rotates the reference's queries with them) */
} bproblem;

static void bp_setup(bproblem *P, int B, const int32_t *n_q, const int32_t *n_new, const int32_t *S, int paged,
                     int page_size, size_t min_rotation_bytes) {
    memset(P, 0, sizeof *P);
    P->B = B;
    P->paged = paged;
    P->page_size = page_size;
    P->n_q = malloc((size_t)B * 4);
    P->n_new = malloc((size_t)B * 4);
    P->S = malloc((size_t)B * 4);
    memcpy(P->n_q, n_q, (size_t)B * 4);
    memcpy(P->n_new, n_new, (size_t)B * 4);
    memcpy(P->S, S, (size_t)B * 4);
    int32_t total_q = 0, total_new = 0, need_max = 1;
    int64_t tokens = 0;
    P->cu_q_h = malloc((size_t)(B + 1) * 4);
    int32_t *cu_kn = malloc((size_t)(B + 1) * 4);
    P->cu_q_h[0] = cu_kn[0] = 0;
    for (int b = 0; b < B; b++) {
        total_q += n_q[b];
        total_new += n_new[b];
        P->cu_q_h[b + 1] = total_q;
        cu_kn[b + 1] = total_new;
        if (S[b] + n_new[b] > need_max) need_max = S[b] + n_new[b];
    }
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_BF16;
    p.batch = B;
    p.num_heads = H;
    p.num_kv_heads = HK;
    p.head_dim = D;
    p.causal = 1;
    p.total_q = total_q;
    p.q_row_stride = H * D;
    p.q_head_stride = D;
    p.out_row_stride = H * D;
    p.out_head_stride = D;
    p.lse_head_stride = total_q;
    p.lse_row_stride = 1;
    size_t qb = (size_t)total_q * H * D * ES;
    CK(cudaMalloc(&P->q, qb));
    CK(cudaMalloc(&P->out, qb));
    CK(cudaMalloc(&P->lse, (size_t)total_q * H * 4));
    CK(cudaMalloc(&P->cu_q, (size_t)(B + 1) * 4));
    CK(cudaMalloc(&P->cu_kn, (size_t)(B + 1) * 4));
    CK(cudaMalloc(&P->sl, (size_t)B * 4));
    CK(cudaMemcpy(P->cu_q, P->cu_q_h, (size_t)(B + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P->cu_kn, cu_kn, (size_t)(B + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P->sl, S, (size_t)B * 4, cudaMemcpyHostToDevice));
    bench_fill_bf16(P->q, (size_t)total_q * H * D, 7);
    P->q_h = malloc(qb);
    CK(cudaMemcpy(P->q_h, P->q, qb, cudaMemcpyDeviceToHost));
    p.q = P->q;
    p.cu_seqlens_q = P->cu_q;
    p.out = P->out;
    p.softmax_lse = P->lse;
    p.cache_seqlens = P->sl;
    if (total_new > 0) {
        size_t nb = (size_t)total_new * HK * D * ES;
        CK(cudaMalloc(&P->kn, nb));
        CK(cudaMalloc(&P->vn, nb));
        bench_fill_bf16(P->kn, nb / ES, 11);
        bench_fill_bf16(P->vn, nb / ES, 13);
        p.k_new = P->kn;
        p.v_new = P->vn;
        p.cu_seqlens_knew = P->cu_kn;
        p.total_knew = total_new;
        p.knew_row_stride = p.vnew_row_stride = HK * D;
        p.knew_head_stride = p.vnew_head_stride = D;
        if (g_rope) { /* theta = pos * 10000^(-2i/D), as the tests' tables */
            const size_t te = (size_t)need_max * (D / 2);
            P->rcos_h = malloc(te * 4);
            P->rsin_h = malloc(te * 4);
            for (int pos = 0; pos < need_max; pos++)
                for (int i = 0; i < D / 2; i++) {
                    const double th = pos * pow(10000.0, -2.0 * i / D);
                    P->rcos_h[(size_t)pos * (D / 2) + i] = (float)cos(th);
                    P->rsin_h[(size_t)pos * (D / 2) + i] = (float)sin(th);
                }
            CK(cudaMalloc(&P->rcos, te * 4));
            CK(cudaMalloc(&P->rsin, te * 4));
            CK(cudaMemcpy(P->rcos, P->rcos_h, te * 4, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(P->rsin, P->rsin_h, te * 4, cudaMemcpyHostToDevice));
            p.rotary_cos = P->rcos;
            p.rotary_sin = P->rsin;
            p.rotary_dtype = KVATTN_F32;
            p.rotary_dim = D;
            p.rotary_max_pos = need_max;
        }
    }
    size_t cache_elems;
    if (paged) {
        int ps = page_size;
        P->max_pages = (need_max + ps - 1) / ps;
        int64_t pages = 0;
        for (int b = 0; b < B; b++) pages += (S[b] + n_new[b] + ps - 1) / ps;
        P->num_pages = (int)pages;
        int32_t *perm = malloc((size_t)pages * 4);
        for (int64_t i = 0; i < pages; i++) perm[i] = (int32_t)i;
        kvt_shuffle(perm, (int)pages);
        P->bt_h = malloc((size_t)B * P->max_pages * 4);
        int64_t next = 0;
        for (int b = 0; b < B; b++) {
            int np = (S[b] + n_new[b] + ps - 1) / ps;
            for (int s = 0; s < P->max_pages; s++) P->bt_h[(int64_t)b * P->max_pages + s] = s < np ? perm[next++] : -1;
        }
        free(perm);
        CK(cudaMalloc(&P->bt, (size_t)B * P->max_pages * 4));
        CK(cudaMemcpy(P->bt, P->bt_h, (size_t)B * P->max_pages * 4, cudaMemcpyHostToDevice));
        p.block_table = P->bt;
        p.block_table_batch_stride = P->max_pages;
        p.max_pages_per_seq = P->max_pages;
        p.num_pages = P->num_pages;
        p.page_size = ps;
        p.k_batch_stride = p.v_batch_stride = (int64_t)ps * HK * D;
        cache_elems = (size_t)pages * ps * HK * D;
    } else {
        P->cap = need_max;
        p.cache_batch = B;
        p.cache_capacity = need_max;
        p.k_batch_stride = p.v_batch_stride = (int64_t)need_max * HK * D;
        cache_elems = (size_t)B * need_max * HK * D;
    }
    p.k_row_stride = p.v_row_stride = HK * D;
    p.k_head_stride = p.v_head_stride = D;
    (void)tokens;
    P->cache_bytes = cache_elems * ES;
    P->n_copies = (int)((min_rotation_bytes + 2 * P->cache_bytes - 1) / (2 * P->cache_bytes));
    if (P->n_copies < 1) P->n_copies = 1;
    if (P->n_copies > 8) P->n_copies = 8;
    for (int c = 0; c < P->n_copies; c++) {
        CK(cudaMalloc(&P->kc[c], P->cache_bytes));
        CK(cudaMalloc(&P->vc[c], P->cache_bytes));
        bench_fill_bf16(P->kc[c], cache_elems, 100 + 2 * c);
        bench_fill_bf16(P->vc[c], cache_elems, 101 + 2 * c);
        P->p[c] = p;
        P->p[c].k_cache = P->kc[c];
        P->p[c].v_cache = P->vc[c];
    }
    if (kvattn_workspace_size(&P->p[0], KVATTN_BACKEND_CUDA, &P->ws_bytes) != KVATTN_OK) {
        fprintf(stderr, "workspace_size: %s\n", kvattn_last_error());
        exit(2);
    }
    CK(cudaMalloc(&P->ws, P->ws_bytes ? P->ws_bytes : 16));
    P->cu_kn_h = cu_kn; /* the check reads the appended rows' sources */
}

static void bp_free(bproblem *P) {
    void *d[] = {P->q, P->kn, P->vn, P->out, P->lse, P->cu_q, P->cu_kn, P->sl, P->bt, P->ws, P->rcos, P->rsin};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (d[i]) cudaFree(d[i]);
    for (int c = 0; c < P->n_copies; c++) {
        cudaFree(P->kc[c]);
        cudaFree(P->vc[c]);
    }
    free(P->n_q);
    free(P->n_new);
    free(P->S);
    free(P->bt_h);
    free(P->cu_q_h);
    free(P->cu_kn_h);
    free(P->q_h);
    free(P->rcos_h);
    free(P->rsin_h);
}

/* Median microseconds of one kvattn_forward, rotating cache copies, timed two ways:
 * isolated: events around each call, the stream drained before the next one (the GPU waits for the host to
 *   enqueue the call's kernels, so host-side launch time is included: the return value);
 * back-to-back (*b2b_us): `reps` calls enqueued without a sync between them, per call (the host runs ahead, as
 *   in a generation loop or a CUDA graph; the GPU's own time per call); median of 5 such rounds.
 * *host_us: median host time to enqueue one call (kvattn_forward returns before the GPU finishes). */
/* One kvattn_forward on cache copy i % n_copies; a failure ends the benchmark. */
static void bp_forward(bproblem *P, int i) {
    if (kvattn_forward(&P->p[i % P->n_copies], KVATTN_BACKEND_CUDA, P->ws, P->ws_bytes, NULL) != KVATTN_OK) {
        fprintf(stderr, "forward: %s\n", kvattn_last_error());
        exit(2);
    }
}

static double bp_time_us(bproblem *P, int warm, int reps, double *b2b_us, double *host_us) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float *t = malloc((size_t)reps * sizeof(float));
    float *h = malloc((size_t)reps * sizeof(float));
    for (int i = 0; i < warm + reps; i++) {
        CK(cudaEventRecord(e0, NULL));
        const double h0 = kvt_now_s();
        bp_forward(P, i);
        const double h1 = kvt_now_s();
        CK(cudaEventRecord(e1, NULL));
        CK(cudaEventSynchronize(e1));
        if (i >= warm) {
            CK(cudaEventElapsedTime(&t[i - warm], e0, e1));
            h[i - warm] = (float)((h1 - h0) * 1e3);
        }
    }
    double us = 1000.0 * median(t, reps);
    if (host_us) *host_us = 1000.0 * median(h, reps);
    if (b2b_us) {
        float rt[5];
        for (int round = 0; round < 5; round++) {
            CK(cudaEventRecord(e0, NULL));
            for (int i = 0; i < reps; i++) bp_forward(P, i);
            CK(cudaEventRecord(e1, NULL));
            CK(cudaEventSynchronize(e1));
            CK(cudaEventElapsedTime(&rt[round], e0, e1));
            rt[round] /= (float)reps;
        }
        *b2b_us = 1000.0 * median(rt, 5);
    }
    free(t);
    free(h);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return us;
}

/* Checks rows [r0, r0 + cnt) of sequence b (causal, after a call on copy c) against the float64 reference.
 * s_k: keys of the sequence after the call. Returns the max abs error of out; *ok = 0 on a tolerance miss; *frac
 * is raised to the largest error seen as a fraction of its bound (out or lse).
 * Bounds: out element 2u |w| + 4u rms(w's row) (u = 2^-8: the output's own rounding is at most u/2 |w|; the rms term
 * keeps the bound at the row's scale where a long flat softmax makes |w| small, so that missing or doubled keys
 * show); lse 5e-5 (1 + |lse|) (computed in fp32 from bf16 inputs that are exact in it; a lost page of 16 keys among
 * 8192 moves lse by 2e-3). */
static double bp_check_rows(bproblem *P, int c, int b, int r0, int cnt, int s_k, int *ok, double *frac) {
    const int nq = P->n_q[b];
    const int sk2 = r0 + cnt + s_k - nq; /* keys the sub-problem needs (bottom-right alignment) */
    size_t row_elems = (size_t)HK * D;
    uint16_t *kh = malloc((size_t)sk2 * row_elems * ES), *vh = malloc((size_t)sk2 * row_elems * ES);
    if (P->paged) {
        int ps = P->page_size;
        for (int pos = 0; pos < sk2; pos += ps) {
            int n = sk2 - pos < ps ? sk2 - pos : ps;
            int32_t page = P->bt_h[(int64_t)b * P->max_pages + pos / ps];
            size_t off = (size_t)page * ps * row_elems * ES;
            CK(cudaMemcpy(kh + (size_t)pos * row_elems, (char *)P->kc[c] + off, (size_t)n * row_elems * ES, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(vh + (size_t)pos * row_elems, (char *)P->vc[c] + off, (size_t)n * row_elems * ES, cudaMemcpyDeviceToHost));
        }
    } else {
        size_t off = (size_t)b * P->cap * row_elems * ES;
        CK(cudaMemcpy(kh, (char *)P->kc[c] + off, (size_t)sk2 * row_elems * ES, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(vh, (char *)P->vc[c] + off, (size_t)sk2 * row_elems * ES, cudaMemcpyDeviceToHost));
    }
    const int64_t grow0 = (int64_t)P->cu_q_h[b] + r0;
    uint16_t *oh = malloc((size_t)cnt * H * D * ES);
    float *lh = malloc((size_t)cnt * H * 4);
    CK(cudaMemcpy(oh, (char *)P->out + (size_t)grow0 * H * D * ES, (size_t)cnt * H * D * ES, cudaMemcpyDeviceToHost));
    const int total_q = P->p[0].total_q;
    for (int h = 0; h < H; h++)
        CK(cudaMemcpy(lh + (size_t)h * cnt, (char *)P->lse + ((size_t)h * total_q + grow0) * 4, (size_t)cnt * 4,
                      cudaMemcpyDeviceToHost));
    kvattn_params r = kvattn_params_default();
    int32_t sl[1] = {sk2};
    r.dtype = KVATTN_BF16;
    r.batch = 1;
    r.num_heads = H;
    r.num_kv_heads = HK;
    r.head_dim = D;
    r.q = P->q_h + (size_t)grow0 * H * D;
    r.seqlen_q = cnt;
    r.q_batch_stride = (int64_t)cnt * H * D;
    r.q_row_stride = H * D;
    r.q_head_stride = D;
    r.k_cache = kh;
    r.v_cache = vh;
    r.cache_batch = 1;
    r.cache_capacity = sk2;
    r.k_batch_stride = r.v_batch_stride = (int64_t)sk2 * HK * D;
    r.k_row_stride = r.v_row_stride = HK * D;
    r.k_head_stride = r.v_head_stride = D;
    r.cache_seqlens = sl;
    r.causal = 1;
    if (P->rcos_h) { /* the cache holds rotated keys: the reference rotates the queries (positions s_k - nq + r0 + i) */
        r.rotary_cos = P->rcos_h;
        r.rotary_sin = P->rsin_h;
        r.rotary_dtype = KVATTN_F32;
        r.rotary_dim = D;
        r.rotary_max_pos = P->p[0].rotary_max_pos;
    }
    r.out_batch_stride = (int64_t)cnt * H * D;
    r.out_row_stride = H * D;
    r.out_head_stride = D;
    double *oref = calloc((size_t)cnt * H * D, sizeof(double)), *lref = calloc((size_t)cnt * H, sizeof(double));
    double *qsens = calloc((size_t)cnt * H, sizeof(double)); /* 0 without rotary */
    double maxerr = 0;
    if (kvref_forward_sens(&r, oref, lref, -1, qsens)) *ok = 0;
    const double u = ldexp(1.0, -8);
    for (int i = 0; i < cnt; i++)
        for (int h = 0; h < H; h++) {
            double ss = 0;
            for (int d = 0; d < D; d++) ss += oref[((size_t)i * H + h) * D + d] * oref[((size_t)i * H + h) * D + d];
            const double rms = sqrt(ss / D);
            /* with rotary the kernel rounds rope(q) to bf16: scores move by up to u/2 qsens (ref.h), lse by as
             * much and out by twice that (|v| < 1), as in the tests' harness */
            const double dq = 0.5 * u * qsens[(size_t)i * H + h];
            for (int d = 0; d < D; d++) {
                size_t e = ((size_t)i * H + h) * D + d;
                double g = kvref_load(KVATTN_BF16, oh, (int64_t)e), w = oref[e], err = fabs(g - w);
                const double bound = 2 * u * fabs(w) + 4 * u * rms + 2 * dq;
                if (!(err <= bound)) *ok = 0;
                if (err > maxerr || err != err) maxerr = err;
                if (!(err / bound <= *frac)) *frac = err != err ? INFINITY : err / bound;
            }
            double gl = lh[(size_t)h * cnt + i], wl = lref[(size_t)i * H + h];
            const double lb = 5e-5 * (1 + fabs(wl)) + dq, le = fabs(gl - wl);
            if (!(le <= lb)) *ok = 0;
            if (!(le / lb <= *frac)) *frac = le != le ? INFINITY : le / lb;
        }
    free(kh);
    free(vh);
    free(oh);
    free(lh);
    free(oref);
    free(lref);
    free(qsens);
    return maxerr;
}

/* The appended rows of sequence b in cache copy c against k_new / v_new: v bit for bit, k too without rotary, and
 * with rotary against the reference's rope of k_new (kvref_rope_channel, position S + t, the call's pairing) within
 * the tests' bound: one bf16 ulp of the value plus 8 fp32 roundings of its terms' magnitude (x cos and y sin can
 * cancel, and the kernel forms them in fp32). Otherwise the reference, which reads the keys back from the
 * cache, would take a wrong append for the truth. */
static void bp_check_append(bproblem *P, int c, int b, int *ok, double *frac) {
    const int nn = P->n_new[b];
    if (nn <= 0) return;
    const size_t row = (size_t)HK * D, rb = row * ES;
    uint16_t *kn = malloc((size_t)nn * rb), *vn = malloc((size_t)nn * rb), *kg = malloc(rb), *vg = malloc(rb);
    CK(cudaMemcpy(kn, (char *)P->kn + (size_t)P->cu_kn_h[b] * rb, (size_t)nn * rb, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(vn, (char *)P->vn + (size_t)P->cu_kn_h[b] * rb, (size_t)nn * rb, cudaMemcpyDeviceToHost));
    kvattn_params hp = P->p[c]; /* the call's rotary settings, with the host copies of its tables */
    hp.rotary_cos = P->rcos_h;
    hp.rotary_sin = P->rsin_h;
    for (int t = 0; t < nn; t++) {
        const int pos = P->S[b] + t;
        size_t off;
        if (P->paged)
            off = ((size_t)P->bt_h[(int64_t)b * P->max_pages + pos / P->page_size] * P->page_size + pos % P->page_size) * rb;
        else off = ((size_t)b * P->cap + pos) * rb;
        CK(cudaMemcpy(kg, (char *)P->kc[c] + off, rb, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(vg, (char *)P->vc[c] + off, rb, cudaMemcpyDeviceToHost));
        if (memcmp(vg, vn + (size_t)t * row, rb)) *ok = 0, *frac = INFINITY;
        if (!P->rcos_h) {
            if (memcmp(kg, kn + (size_t)t * row, rb)) *ok = 0, *frac = INFINITY;
            continue;
        }
        for (int h = 0; h < HK; h++)
            for (int ch = 0; ch < D; ch++) {
                double mag;
                const double r = kvref_rope_channel(&hp, kn + (size_t)t * row + (size_t)h * D, ch, pos, &mag);
                const double g = kvref_load(KVATTN_BF16, kg + (size_t)h * D, ch), err = fabs(g - r);
                const double bound = kvref_ulp(KVATTN_BF16, r) + 8 * ldexp(1.0, -24) * mag; /* the harness's */
                if (!(err <= bound)) *ok = 0;
                if (!(err / bound <= *frac)) *frac = err != err ? INFINITY : err / bound;
            }
    }
    free(kn);
    free(vn);
    free(kg);
    free(vg);
}

/* Runs the call once on copy 0, out and lse poisoned (NaN) first, then checks sequences seqs[0..n): the appended
 * cache rows, and query rows against the float64 reference: all of them up to 12, else the first 4, 4 from a random
 * place in the middle and the last 4. *maxerr: the largest abs error of out; *frac: the largest error as a fraction
 * of its bound. */
static int bp_check(bproblem *P, const int *seqs, int n, double *maxerr, double *frac) {
    *maxerr = 0;
    *frac = 0;
    CK(cudaMemset(P->out, 0xff, (size_t)P->p[0].total_q * H * D * ES));
    CK(cudaMemset(P->lse, 0xff, (size_t)P->p[0].total_q * H * 4));
    if (kvattn_forward(&P->p[0], KVATTN_BACKEND_CUDA, P->ws, P->ws_bytes, NULL) != KVATTN_OK) return 0;
    kvattn_device_status ds;
    if (kvattn_device_status_read(P->ws, NULL, &ds) != KVATTN_OK || ds.flags) return 0;
    int ok = 1;
    for (int k = 0; k < n; k++) {
        const int b = seqs[k], nq = P->n_q[b], s_k = P->S[b] + P->n_new[b];
        bp_check_append(P, 0, b, &ok, frac);
        double e[3] = {0, 0, 0};
        if (nq <= 12) e[0] = bp_check_rows(P, 0, b, 0, nq, s_k, &ok, frac);
        else {
            e[0] = bp_check_rows(P, 0, b, 0, 4, s_k, &ok, frac);
            e[1] = bp_check_rows(P, 0, b, kvt_randint(4, nq - 8), 4, s_k, &ok, frac);
            e[2] = bp_check_rows(P, 0, b, nq - 4, 4, s_k, &ok, frac);
        }
        for (int i = 0; i < 3; i++)
            if (!(e[i] <= *maxerr)) *maxerr = e[i];
    }
    return ok;
}

/* Up to 8 sequences spread over [0, B), the first and the last among them; returns how many. */
static int spread(int B, int *seqs) {
    const int n = B < 8 ? B : 8;
    for (int k = 0; k < n; k++) seqs[k] = n > 1 ? (int)((int64_t)k * (B - 1) / (n - 1)) : 0;
    return n;
}

/* ---- report -------------------------------------------------------------------------------------------- */
static FILE *g_md, *g_json;
static int g_json_first = 1;
static void json_rec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void json_rec(const char *fmt, ...) {
    if (!g_json) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(g_json, "%s\n  ", g_json_first ? "" : ",");
    vfprintf(g_json, fmt, ap);
    va_end(ap);
    g_json_first = 0;
}

int main(int argc, char **argv) {
    const char *md = NULL, *js = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) g_quick = 1;
        else if (!strcmp(argv[i], "--md") && i + 1 < argc) md = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) js = argv[++i];
    }
    const char *dv = getenv("KVATTN_BENCH_D");
    if (dv && *dv) {
        char *end = NULL;
        const long d = strtol(dv, &end, 10);
        if (*end || d < 8 || d > 256 || d % 8) {
            fprintf(stderr, "bench_cuda: KVATTN_BENCH_D: expected a multiple of 8 from 8 to 256, got \"%s\"\n", dv);
            return 2;
        }
        D = (int)d;
    }
    kvt_init("bench_cuda");
    if (!kvattn_backend_available(KVATTN_BACKEND_CUDA)) {
        printf("bench_cuda: no CUDA device; nothing to measure\n");
        return 0;
    }
    kernels_load();
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_md = md ? fopen(md, "w") : NULL;
    g_json = js ? fopen(js, "w") : NULL;
    if (g_json) fprintf(g_json, "[");

    /* ceilings */
    g_read_tbs = bench_read_ceiling_tbs((size_t)4 << 30, g_quick ? 5 : 15);
    {
        size_t n = (size_t)2 << 30;
        void *a, *b;
        CK(cudaMalloc(&a, n));
        CK(cudaMalloc(&b, n));
        CK(cudaMemset(a, 1, n));
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        float t[15];
        int reps = g_quick ? 5 : 15;
        for (int i = 0; i < reps + 2; i++) {
            cudaEventRecord(e0, NULL);
            CK(cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, n, cudaMemcpyDeviceToDevice, NULL));
            cudaEventRecord(e1, NULL);
            cudaEventSynchronize(e1);
            if (i >= 2) cudaEventElapsedTime(&t[i - 2], e0, e1);
        }
        g_copy_tbs = 2.0 * n / (median(t, reps) * 1e-3) / 1e12;
        cudaFree(a);
        cudaFree(b);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    printf("\n%s, %d SMs. Ceilings (this run): read %.2f TB/s (4 GiB sum, 16-byte loads), copy %.2f TB/s (read+write)\n",
           prop.name, prop.multiProcessorCount, g_read_tbs, g_copy_tbs);
    if (g_md) {
        fprintf(g_md, "Device: %s, %d SMs. bf16, D=%d, GQA 32/8, causal.\n\n", prop.name, prop.multiProcessorCount, D);
        fprintf(g_md, "Ceilings measured in this run: read **%.2f TB/s** (4 GiB sum, 16-byte loads), copy %.2f TB/s "
                      "(device-to-device, read+write counted).\n\n", g_read_tbs, g_copy_tbs);
    }
    json_rec("{\"kind\": \"ceiling\", \"read_tbs\": %.4f, \"copy_tbs\": %.4f, \"device\": \"%s\", \"head_dim\": %d}",
             g_read_tbs, g_copy_tbs, prop.name, D);

    const int warm = 3, reps = g_quick ? 10 : 30;
    const size_t rot = (size_t)512 << 20; /* each rotation set at least 512 MB (8x the L2) */

    /* (1) decode */
    int shapes[6][2] = {{1, 32768}, {8, 8192}, {64, 4096}, {128, 2048}, {256, 1024}, {64, 16384}};
    static const int layouts[5] = {0, 1, 16, 64, 256}; /* 0 = contiguous, else page size */
    double fa2[6] = {2.28, 3.25, 2.48, -1, 2.42, 2.45};
    int nshapes = 6;
    if (D != 128)
        for (int i = 0; i < 6; i++) fa2[i] = -1; /* PERF.md's figures are at head dim 128 */
    const char *own = getenv("KVATTN_BENCH_DECODE");
    if (own && *own) { /* the caller's shapes (no FA2 figures for them) */
        nshapes = 0;
        for (const char *c = own; *c && nshapes < 6;) {
            int b = 0, l = 0, used = 0;
            if (sscanf(c, "%dx%d%n", &b, &l, &used) != 2 || b < 1 || l < 1 || (double)b * l > 1048576.0) {
                fprintf(stderr, "bench_cuda: KVATTN_BENCH_DECODE: expected BxL,BxL,... (B * L <= 1048576) at \"%s\"\n", c);
                return 2;
            }
            shapes[nshapes][0] = b;
            shapes[nshapes][1] = l;
            fa2[nshapes++] = -1;
            c += used;
            if (*c == ',') c++;
            if (*c && nshapes == 6) {
                fprintf(stderr, "bench_cuda: KVATTN_BENCH_DECODE: at most 6 shapes (\"%s\" left)\n", c);
                return 2;
            }
        }
    }
    /* KVATTN_BENCH_APPEND=1: each decode step appends its token first (k_new / v_new, as a generation loop calls it;
     * the cache then holds L - 1 tokens before the call), instead of attending over a cache that holds all L;
     * KVATTN_BENCH_APPEND=2: the same with fused rotary (fp32 tables, rotary dim = head dim), for every appended key
     * of the run (the inflight step's too) */
    const int app = getenv("KVATTN_BENCH_APPEND") && atoi(getenv("KVATTN_BENCH_APPEND")) > 0 ? 1 : 0;
    g_rope = app && atoi(getenv("KVATTN_BENCH_APPEND")) == 2; /* =2: with rotary on the appended keys */
    printf("\n(1) decode, one query per sequence, K+V read once%s\n",
           g_rope ? " (KVATTN_BENCH_APPEND=2: each step appends its token first, with rotary)"
           : app  ? " (KVATTN_BENCH_APPEND: each step appends its token first)"
                  : "");
    printf("    isolated: events around one call, stream drained first; b2b: calls back to back, per call; host: enqueue\n");
    printf("    plain read: the read-ceiling kernel over exactly the shape's K+V bytes "
           "(nothing but the read: a practical floor)\n");
    printf("%-10s %-12s %10s %9s %9s %9s %9s %7s %8s %s\n", "B x L", "layout", "us", "TB/s", "of read", "b2b us",
           "of read", "host us", "FA2", "check");
    if (g_md) {
        fprintf(g_md, "### Decode (one query per sequence; bytes = K and V read once%s)\n\n",
                g_rope ? "; each step appends its token first, with rotary (KVATTN_BENCH_APPEND=2)"
                : app  ? "; each step appends its token first (KVATTN_BENCH_APPEND)"
                       : "");
        fprintf(g_md, "Isolated: events around one call with the stream drained before it (the GPU also waits for the "
                      "host to enqueue the call's kernels). Back-to-back: %d calls enqueued without a sync, time per "
                      "call (the host runs ahead, as in a generation loop or a CUDA graph). Host: time for "
                      "`kvattn_forward` to enqueue one call. Plain read (floor): the read-ceiling kernel over "
                      "exactly the shape's K and V bytes, two rotated buffers, timed the same two ways: what a kernel "
                      "that only reads the bytes once takes in this run.\n\n", reps);
        fprintf(g_md, "| B x L | layout | isolated us | TB/s | of read ceiling | back-to-back us | of read ceiling | "
                      "host us | FA2 (PERF.md, contiguous) | check (max abs err) |\n");
        fprintf(g_md, "|---|---|---|---|---|---|---|---|---|---|\n");
    }
    for (int si = 0; si < nshapes; si++) {
        { /* the shape's floor in this run: a plain read of the same bytes (no attention, no scheduling) */
            const int B = shapes[si][0], L = shapes[si][1];
            const double bytes = 2.0 * B * (double)L * HK * D * ES;
            double b2b = 0;
            const double us = bench_plain_read_us((size_t)bytes, reps, &b2b);
            const double tbs = bytes / (us * 1e-6) / 1e12, tbs2 = bytes / (b2b * 1e-6) / 1e12;
            printf("%4dx%-5d  %-12s %10.1f %9.2f %8.1f%% %9.1f %8.1f%% %7s %8s %s\n", B, L, "plain read", us, tbs,
                   100 * tbs / g_read_tbs, b2b, 100 * tbs2 / g_read_tbs, "-", "-", "(floor: the bytes read once)");
            if (g_md)
                fprintf(g_md, "| %dx%d | plain read (floor) | %.1f | %.2f | %.1f%% | %.1f | %.1f%% | - | - | - |\n",
                        B, L, us, tbs, 100 * tbs / g_read_tbs, b2b, 100 * tbs2 / g_read_tbs);
            json_rec("{\"kind\": \"plain_read\", \"B\": %d, \"L\": %d, \"us\": %.2f, \"tbs\": %.4f, "
                     "\"frac_read\": %.4f, \"b2b_us\": %.2f, \"b2b_frac_read\": %.4f}",
                     B, L, us, tbs, tbs / g_read_tbs, b2b, tbs2 / g_read_tbs);
        }
        for (int li = 0; li < 5; li++) {
            const int B = shapes[si][0], L = shapes[si][1], ps = layouts[li];
            int32_t *nq = malloc((size_t)B * 4), *nn = malloc((size_t)B * 4), *S = malloc((size_t)B * 4);
            for (int b = 0; b < B; b++) {
                nq[b] = 1;
                nn[b] = app;
                S[b] = L - app;
            }
            bproblem P;
            bp_setup(&P, B, nq, nn, S, ps > 0, ps, rot);
            double err = 0, frac = 0;
            int seqs[8];
            int ok = bp_check(&P, seqs, spread(B, seqs), &err, &frac);
            double b2b = 0, host = 0;
            double us = bp_time_us(&P, warm, reps, &b2b, &host);
            double bytes = 2.0 * B * (double)L * HK * D * ES, tbs = bytes / (us * 1e-6) / 1e12;
            double tbs2 = bytes / (b2b * 1e-6) / 1e12;
            char lay[32];
            if (ps) snprintf(lay, sizeof lay, "paged %d", ps);
            else snprintf(lay, sizeof lay, "contiguous");
            char fa[16] = "-";
            if (fa2[si] > 0 && ps == 0) snprintf(fa, sizeof fa, "%.2f", fa2[si]);
            printf("%4dx%-5d  %-12s %10.1f %9.2f %8.1f%% %9.1f %8.1f%% %7.1f %8s %s (%.2g; %.2f of bound)\n", B, L, lay,
                   us, tbs, 100 * tbs / g_read_tbs, b2b, 100 * tbs2 / g_read_tbs, host, fa, ok ? "ok" : "FAIL", err, frac);
            if (g_md)
                fprintf(g_md, "| %dx%d | %s | %.1f | %.2f | %.1f%% | %.1f | %.1f%% | %.1f | %s | %s (%.2g; %.2f of bound) |\n",
                        B, L, lay, us, tbs, 100 * tbs / g_read_tbs, b2b, 100 * tbs2 / g_read_tbs, host, fa,
                        ok ? "ok" : "FAIL", err, frac);
            json_rec("{\"kind\": \"decode\", \"B\": %d, \"L\": %d, \"page_size\": %d, \"append\": %d, \"us\": %.2f, "
                     "\"tbs\": %.4f, \"frac_read\": %.4f, \"b2b_us\": %.2f, \"b2b_frac_read\": %.4f, \"host_us\": %.2f, "
                     "\"check_ok\": %d, \"max_err\": %.3g, \"bound_frac\": %.3g}",
                     B, L, ps, app + g_rope, us, tbs, tbs / g_read_tbs, b2b, tbs2 / g_read_tbs, host, ok, err, frac);
            fflush(stdout);
            bp_free(&P);
            free(nq);
            free(nn);
            free(S);
        }
    }

    /* (2) the inflight step: 60 decodes (cache uniform [512, 8192]) + 4 prompts of 512, appended, paged 16 */
    {
        const int B = 64;
        int32_t nq[64], nn[64], S[64];
        double kv_bytes = 0;
        /* The 60 cache lengths are the quantiles of U[512, 8192] (576, 704, ..., 8128: mean 4352, as the
         * distribution's), in a fixed scattered order: a random draw moves the step by +-10% from run to run
         * (945 to 1176 MB of K+V were seen), which would hide any change being measured. The data stay fresh. */
        for (int b = 0, d = 0; b < B; b++) {
            if (b % 16 == 5) { /* the 4 prompts, spread through the batch */
                nq[b] = nn[b] = 512;
                S[b] = 0;
            } else {
                nq[b] = nn[b] = 1;
                S[b] = 576 + 128 * ((d++ * 37) % 60); /* 37 is prime to 60: every quantile once */
            }
            kv_bytes += 2.0 * (S[b] + nn[b]) * HK * D * ES;
        }
        bproblem P;
        bp_setup(&P, B, nq, nn, S, 1, 16, rot);
        /* checked: the 4 prompts (b % 16 == 5) and 8 decodes spread over the batch, among them the shortest cache
         * (b = 0: 576) and the longest (b = 50: 8128, split into pieces) */
        int seqs[12] = {5, 21, 37, 53, 0, 26, 10, 18, 33, 44, 50, 63}, ns = 12;
        double err = 0, frac = 0;
        int ok = bp_check(&P, seqs, ns, &err, &frac);
        double b2b = 0, host = 0;
        double us = bp_time_us(&P, warm, reps, &b2b, &host);
        double tbs = kv_bytes / (us * 1e-6) / 1e12;
        printf("\n(2) inflight step (60 decodes, caches at the quantiles of U[512, 8192], + 4 prompts of 512 appended and attended; paged 16)\n");
        const char *fa2_us = D == 128 ? "2096 us" : "-", *target = D == 128 ? "<= 400 us" : "-";
        printf("    isolated %.1f us (K+V %.0f MB: %.2f TB/s, %.1f%% of read), back-to-back %.1f us, host %.1f us; FA2 varlen "
               "(PERF.md): %s; check %s (%.2g; %.2f of bound)\n", us, kv_bytes / 1e6, tbs, 100 * tbs / g_read_tbs, b2b,
               host, fa2_us, ok ? "ok" : "FAIL", err, frac);
        if (g_md) {
            fprintf(g_md, "\n### Inflight step (PERF.md): 60 decodes (caches at the 60 quantiles of U[512, 8192], mean 4352) + 4 prompts of 512, appended and attended, paged 16\n\n");
            fprintf(g_md, "| isolated us | back-to-back us | host us | K+V MB | TB/s (isolated) | of read ceiling | FA2 varlen (PERF.md) | target | check |\n|---|---|---|---|---|---|---|---|---|\n");
            fprintf(g_md, "| %.1f | %.1f | %.1f | %.0f | %.2f | %.1f%% | %s | %s | %s (%.2g; %.2f of bound) |\n",
                    us, b2b, host, kv_bytes / 1e6, tbs, 100 * tbs / g_read_tbs, fa2_us, target, ok ? "ok" : "FAIL", err,
                    frac);
        }
        json_rec("{\"kind\": \"inflight\", \"us\": %.2f, \"b2b_us\": %.2f, \"host_us\": %.2f, \"kv_mb\": %.1f, "
                 "\"tbs\": %.4f, \"check_ok\": %d, \"max_err\": %.3g, \"bound_frac\": %.3g}", us, b2b, host,
                 kv_bytes / 1e6, tbs, ok, err, frac);
        bp_free(&P);
    }

    /* (3) prefill: causal, B x L = 16k, attention over a cache of L tokens with L queries (no append) */
    printf("\n(3) prefill, causal, B x L = 16384 (FLOPs 4 B L^2 H D / 2)\n");
    printf("%-10s %10s %9s %s\n", "B x L", "ms", "TFLOP/s", "check");
    if (g_md) {
        fprintf(g_md, "\n### Prefill, causal, B x L = 16k (causal FLOPs counted as half)\n\n");
        fprintf(g_md, "| B x L | ms | TFLOP/s | FA2 / cuDNN (PERF.md, D=128) | check |\n|---|---|---|---|---|\n");
    }
    static const int pl[3] = {1024, 4096, 16384};
    static const char *peer[3] = {"-", "318 / 530", "338 / 580"};
    for (int i = 0; i < 3; i++) {
        const int L = pl[i], B = 16384 / L;
        int32_t nq[16], nn[16], S[16];
        for (int b = 0; b < B; b++) {
            nq[b] = L;
            nn[b] = 0;
            S[b] = L;
        }
        bproblem P;
        bp_setup(&P, B, nq, nn, S, 0, 0, 0);
        double err = 0, frac = 0;
        int seqs[8];
        int ok = bp_check(&P, seqs, spread(B, seqs), &err, &frac);
        double us = bp_time_us(&P, 2, g_quick ? 5 : 10, NULL, NULL);
        double flops = 4.0 * B * (double)L * L * H * D / 2;
        double tf = flops / (us * 1e-6) / 1e12;
        printf("%4dx%-5d  %10.3f %9.1f %s (%.2g; %.2f of bound)\n", B, L, us / 1000, tf, ok ? "ok" : "FAIL", err, frac);
        if (g_md)
            fprintf(g_md, "| %dx%d | %.3f | %.1f | %s | %s (%.2g; %.2f of bound) |\n", B, L, us / 1000, tf,
                    D == 128 ? peer[i] : "-",
                    ok ? "ok" : "FAIL", err, frac);
        json_rec("{\"kind\": \"prefill\", \"B\": %d, \"L\": %d, \"us\": %.2f, \"tflops\": %.2f, \"check_ok\": %d, "
                 "\"max_err\": %.3g, \"bound_frac\": %.3g}", B, L, us, tf, ok, err, frac);
        bp_free(&P);
    }
    if (g_json) {
        fprintf(g_json, "\n]\n");
        fclose(g_json);
    }
    if (g_md) fclose(g_md);
    return 0;
}
