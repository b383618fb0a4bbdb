/* harness.c — backend memory with guards (host or CUDA), poison, random fills, and the comparison of one
 * kvattn_forward call against the float64 reference. See harness.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef KVATTN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---- counting ------------------------------------------------------------------------------------------ */
static const char *g_name = "test";
static int g_passed, g_failed, g_skipped;
static char g_case[512];
static int g_case_fail, g_case_msgs;
static uint64_t g_rng;

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void kvt_init(const char *test_name) {
    g_name = test_name;
    const char *env = getenv("KVATTN_TEST_SEED");
    uint64_t seed;
    if (env && *env) seed = strtoull(env, NULL, 0);
    else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
        seed = splitmix(&s) % 1000000000000ull;
    }
    g_rng = seed;
    printf("%s: seed=%llu (replay with KVATTN_TEST_SEED=%llu)%s\n", g_name, (unsigned long long)seed,
           (unsigned long long)seed, kvt_quick() ? " [quick]" : "");
    fflush(stdout);
}

int kvt_quick(void) {
    const char *q = getenv("KVATTN_TEST_QUICK");
    return q && *q && strcmp(q, "0") != 0;
}

void kvt_case_begin(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_case, sizeof g_case, fmt, ap);
    va_end(ap);
    g_case_fail = 0;
    g_case_msgs = 0;
}

void kvt_failf(const char *fmt, ...) {
    g_case_fail = 1;
    if (g_case_msgs++ >= 6) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("FAIL [%s]: %s\n", g_case, msg);
    fflush(stdout);
}

int kvt_case_failed(void) { return g_case_fail; }

void kvt_case_end(void) {
    if (g_case_fail) g_failed++;
    else g_passed++;
}

void kvt_case_skip(const char *why) {
    g_skipped++;
    (void)why;
}

void kvt_note_failure(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("FAIL: %s\n", msg);
    g_failed++;
}

/* the largest error seen in out / softmax_lse as a fraction of its bound (check_outputs), printed at the end:
 * how close the passing cases came to failing */
static double g_worst_out, g_worst_lse;

int kvt_finish(void) {
    if (g_worst_out > 0 || g_worst_lse > 0)
        printf("%s: worst error / bound: out %.3f, lse %.3f\n", g_name, g_worst_out, g_worst_lse);
    printf("%s: %d passed, %d failed, %d skipped\n", g_name, g_passed, g_failed, g_skipped);
    fflush(stdout);
    return g_failed ? 1 : 0;
}

/* ---- random -------------------------------------------------------------------------------------------- */
uint64_t kvt_rand_u64(void) { return splitmix(&g_rng); }
int kvt_randint(int lo, int hi) { return hi <= lo ? lo : lo + (int)(kvt_rand_u64() % (uint64_t)(hi - lo + 1)); }
double kvt_uniform(double lo, double hi) { return lo + (hi - lo) * ((kvt_rand_u64() >> 11) * (1.0 / 9007199254740992.0)); }
int kvt_pick(const int *values, int n) { return values[kvt_randint(0, n - 1)]; }
void kvt_shuffle(int32_t *a, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = kvt_randint(0, i);
        int32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
uint64_t kvt_rng_get(void) { return g_rng; }
void kvt_rng_set(uint64_t state) { g_rng = state; }

/* Fills are a large share of a test's time: 16-bit values are made by truncating an fp32 draw (any valid
 * value in range will do for an input; only the reference's stores need round-to-nearest-even). */
void kvt_fill(int dtype, void *base, int64_t n, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) {
        float x = (float)kvt_uniform(lo, hi);
        uint32_t u;
        memcpy(&u, &x, 4);
        if (dtype == KVATTN_F32) ((float *)base)[i] = x;
        else if (dtype == KVATTN_BF16) ((uint16_t *)base)[i] = (uint16_t)(u >> 16);
        else {
            int e = (int)((u >> 23) & 255) - 127 + 15;
            uint16_t h = (uint16_t)((u >> 16) & 0x8000);
            if (e > 0 && e < 31) h |= (uint16_t)((e << 10) | ((u >> 13) & 1023));
            ((uint16_t *)base)[i] = h;
        }
    }
}

/* ---- memory ---------------------------------------------------------------------------------------------- */
static unsigned char guard_byte(size_t i) { return (unsigned char)(0xA5 ^ (i * 37)); }

/* KVATTN_TEST_EXACT_ALLOC=1: no guard regions, every allocation exactly its tensor's bytes, so that a sanitizer
 * (compute-sanitizer memcheck, ASan) sees a read or write just past a tensor as out of bounds. With guards, such a
 * read lands in the guard bytes of the same allocation and goes unseen (only writes change the guards). */
static int exact_alloc(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("KVATTN_TEST_EXACT_ALLOC");
        v = e && e[0] && e[0] != '0';
    }
    return v;
}

kvt_buf kvt_alloc(int backend, size_t bytes) {
    kvt_buf b = {backend, bytes, NULL, NULL, exact_alloc() ? 0 : KVT_GUARD};
    const size_t g = b.guard, total = bytes + 2 * g;
    unsigned char guard[KVT_GUARD];
    for (size_t i = 0; i < KVT_GUARD; i++) guard[i] = guard_byte(i);
    if (backend == KVATTN_BACKEND_CPU) {
        b.raw = malloc(total ? total : 1);
        if (!b.raw) return b;
        memcpy(b.raw, guard, g);
        memcpy(b.raw + g + bytes, guard, g);
    } else {
#ifdef KVATTN_HAVE_CUDA
        void *d = NULL;
        if (cudaMalloc(&d, total ? total : 1) != cudaSuccess) return b;
        b.raw = d;
        if (g) {
            cudaMemcpy(b.raw, guard, g, cudaMemcpyHostToDevice);
            cudaMemcpy(b.raw + g + bytes, guard, g, cudaMemcpyHostToDevice);
        }
#else
        return b;
#endif
    }
    b.ptr = b.raw + g;
    return b;
}

void kvt_free(kvt_buf *b) {
    if (!b->raw) return;
    if (b->backend == KVATTN_BACKEND_CPU) free(b->raw);
#ifdef KVATTN_HAVE_CUDA
    else cudaFree(b->raw);
#endif
    b->raw = NULL;
    b->ptr = NULL;
}

int kvt_upload(kvt_buf *b, const void *host, size_t bytes) {
    if (!b->ptr || bytes > b->bytes) return 1;
    if (bytes == 0) return 0;
    if (b->backend == KVATTN_BACKEND_CPU) {
        memcpy(b->ptr, host, bytes);
        return 0;
    }
#ifdef KVATTN_HAVE_CUDA
    return cudaMemcpy(b->ptr, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess;
#else
    return 1;
#endif
}

int kvt_download(const kvt_buf *b, void *host, size_t bytes) {
    if (!b->ptr || bytes > b->bytes) return 1;
    if (bytes == 0) return 0;
    if (b->backend == KVATTN_BACKEND_CPU) {
        memcpy(host, b->ptr, bytes);
        return 0;
    }
#ifdef KVATTN_HAVE_CUDA
    return cudaMemcpy(host, b->ptr, bytes, cudaMemcpyDeviceToHost) != cudaSuccess;
#else
    return 1;
#endif
}

int kvt_guards_ok(const kvt_buf *b) {
    if (!b->raw || b->guard == 0) return 1; /* no guards (KVATTN_TEST_EXACT_ALLOC): the sanitizer checks */
    unsigned char g[2][KVT_GUARD];
    if (b->backend == KVATTN_BACKEND_CPU) {
        memcpy(g[0], b->raw, KVT_GUARD);
        memcpy(g[1], b->raw + KVT_GUARD + b->bytes, KVT_GUARD);
    } else {
#ifdef KVATTN_HAVE_CUDA
        if (cudaMemcpy(g[0], b->raw, KVT_GUARD, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
        if (cudaMemcpy(g[1], b->raw + KVT_GUARD + b->bytes, KVT_GUARD, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
#else
        return 0;
#endif
    }
    for (size_t i = 0; i < KVT_GUARD; i++)
        if (g[0][i] != guard_byte(i) || g[1][i] != guard_byte(i)) return 0;
    return 1;
}

/* ---- problems ---------------------------------------------------------------------------------------------- */
void kvt_problem_init(kvt_problem *P, int backend, int dtype, int B, int H, int Hk, int D) {
    memset(P, 0, sizeof *P);
    P->backend = backend;
    kvattn_params *p = &P->ph;
    *p = kvattn_params_default();
    p->dtype = dtype;
    p->batch = B;
    p->num_heads = H;
    p->num_kv_heads = Hk;
    p->head_dim = D;
}

void kvt_resolve_packed(kvattn_params *p) {
    const int64_t H = p->num_heads, Hk = p->num_kv_heads, D = p->head_dim;
    const int q_fixed = p->cu_seqlens_q == NULL, n_fixed = p->cu_seqlens_knew == NULL;
    /* row tensors: [B, S, heads, D] packed from the inside out; varlen has no batch dimension */
    struct { int64_t *batch, *row, *head; int64_t heads, seq; int fixed; } rows[] = {
        {&p->q_batch_stride, &p->q_row_stride, &p->q_head_stride, H, p->seqlen_q, q_fixed},
        {&p->out_batch_stride, &p->out_row_stride, &p->out_head_stride, H, p->seqlen_q, q_fixed},
        {&p->knew_batch_stride, &p->knew_row_stride, &p->knew_head_stride, Hk, p->seqlen_knew, n_fixed},
        {&p->vnew_batch_stride, &p->vnew_row_stride, &p->vnew_head_stride, Hk, p->seqlen_knew, n_fixed},
        {&p->k_batch_stride, &p->k_row_stride, &p->k_head_stride, Hk,
         p->block_table ? p->page_size : p->cache_capacity, 1},
        {&p->v_batch_stride, &p->v_row_stride, &p->v_head_stride, Hk,
         p->block_table ? p->page_size : p->cache_capacity, 1},
    };
    for (size_t t = 0; t < sizeof rows / sizeof rows[0]; t++) {
        if (*rows[t].head == KVATTN_STRIDE_PACKED) *rows[t].head = D;
        if (*rows[t].row == KVATTN_STRIDE_PACKED) *rows[t].row = rows[t].heads * D;
        if (*rows[t].batch == KVATTN_STRIDE_PACKED)
            *rows[t].batch = rows[t].fixed ? rows[t].seq * rows[t].heads * D : 0;
    }
    /* lse: [B, H, seqlen_q], or [H, total_q] */
    if (p->lse_row_stride == KVATTN_STRIDE_PACKED) p->lse_row_stride = 1;
    if (p->lse_head_stride == KVATTN_STRIDE_PACKED) p->lse_head_stride = q_fixed ? p->seqlen_q : p->total_q;
    if (p->lse_batch_stride == KVATTN_STRIDE_PACKED) p->lse_batch_stride = q_fixed ? H * p->seqlen_q : 0;
    if (p->block_table_batch_stride == KVATTN_STRIDE_PACKED) p->block_table_batch_stride = p->max_pages_per_seq;
    if (p->rotary_row_stride == KVATTN_STRIDE_PACKED) p->rotary_row_stride = p->rotary_dim / 2;
    if (p->alibi_batch_stride == KVATTN_STRIDE_PACKED) p->alibi_batch_stride = 0;
}

void kvt_arr_alloc(kvt_problem *P, kvt_arr *a, const char *name, size_t bytes) {
    if (a->used) {
        free(a->host);
        kvt_free(&a->dev);
    }
    size_t n = bytes < 16 ? 16 : bytes;
    a->name = name;
    a->used = 1;
    a->bytes = bytes;
    a->host = calloc(1, n);
    a->dev = kvt_alloc(P->backend, n);
    a->dev.bytes = n;
}

static void arr_free(kvt_arr *a) {
    if (!a->used) return;
    free(a->host);
    kvt_free(&a->dev);
    memset(a, 0, sizeof *a);
}

void kvt_problem_free_io(kvt_problem *P) {
    kvt_arr *io[] = {&P->q, &P->k_new, &P->v_new, &P->out, &P->lse, &P->cu_q, &P->cu_knew, &P->seqlens,
                     &P->leftpad, &P->batch_idx, &P->block_table, &P->rot_cos, &P->rot_sin, &P->alibi};
    for (size_t i = 0; i < sizeof io / sizeof io[0]; i++) arr_free(io[i]);
    kvt_free(&P->workspace);
}

void kvt_problem_free(kvt_problem *P) {
    kvt_problem_free_io(P);
    arr_free(&P->k_cache);
    arr_free(&P->v_cache);
}

#define HOSTP(a) ((a).used ? (void *)((char *)(a).host + (a).offset_bytes) : NULL)
#define DEVP(a) ((a).used ? (void *)((char *)(a).dev.ptr + (a).offset_bytes) : NULL)

int kvt_problem_upload(kvt_problem *P, int upload_caches) {
    kvattn_params *h = &P->ph, *d = &P->pd;
    h->q = HOSTP(P->q);                 d->q = DEVP(P->q);
    h->k_new = HOSTP(P->k_new);         d->k_new = DEVP(P->k_new);
    h->v_new = HOSTP(P->v_new);         d->v_new = DEVP(P->v_new);
    h->k_cache = HOSTP(P->k_cache);     d->k_cache = DEVP(P->k_cache);
    h->v_cache = HOSTP(P->v_cache);     d->v_cache = DEVP(P->v_cache);
    h->out = HOSTP(P->out);             d->out = DEVP(P->out);
    h->softmax_lse = HOSTP(P->lse);     d->softmax_lse = DEVP(P->lse);
    h->cu_seqlens_q = HOSTP(P->cu_q);   d->cu_seqlens_q = DEVP(P->cu_q);
    h->cu_seqlens_knew = HOSTP(P->cu_knew); d->cu_seqlens_knew = DEVP(P->cu_knew);
    h->cache_seqlens = HOSTP(P->seqlens);   d->cache_seqlens = DEVP(P->seqlens);
    h->cache_leftpad = HOSTP(P->leftpad);   d->cache_leftpad = DEVP(P->leftpad);
    h->cache_batch_idx = HOSTP(P->batch_idx); d->cache_batch_idx = DEVP(P->batch_idx);
    h->block_table = HOSTP(P->block_table);   d->block_table = DEVP(P->block_table);
    h->rotary_cos = HOSTP(P->rot_cos);  d->rotary_cos = DEVP(P->rot_cos);
    h->rotary_sin = HOSTP(P->rot_sin);  d->rotary_sin = DEVP(P->rot_sin);
    h->alibi_slopes = HOSTP(P->alibi);  d->alibi_slopes = DEVP(P->alibi);
    /* every scalar and stride of d comes from h */
    kvattn_params keep = *d;
    *d = *h;
    d->q = keep.q; d->k_new = keep.k_new; d->v_new = keep.v_new; d->k_cache = keep.k_cache;
    d->v_cache = keep.v_cache; d->out = keep.out; d->softmax_lse = keep.softmax_lse;
    d->cu_seqlens_q = keep.cu_seqlens_q; d->cu_seqlens_knew = keep.cu_seqlens_knew;
    d->cache_seqlens = keep.cache_seqlens; d->cache_leftpad = keep.cache_leftpad;
    d->cache_batch_idx = keep.cache_batch_idx; d->block_table = keep.block_table;
    d->rotary_cos = keep.rotary_cos; d->rotary_sin = keep.rotary_sin; d->alibi_slopes = keep.alibi_slopes;
    kvt_resolve_packed(h); /* d keeps the strides the test left unset: the library resolves them */

    /* poison: all-ones bytes are NaN in fp32, fp16 and bf16 */
    if (P->out.used) memset(P->out.host, 0xFF, P->out.bytes);
    if (P->lse.used) memset(P->lse.host, 0xFF, P->lse.bytes);
    kvt_arr *all[] = {&P->q, &P->k_new, &P->v_new, &P->out, &P->lse, &P->cu_q, &P->cu_knew, &P->seqlens,
                      &P->leftpad, &P->batch_idx, &P->block_table, &P->rot_cos, &P->rot_sin, &P->alibi,
                      &P->k_cache, &P->v_cache};
    int n = sizeof all / sizeof all[0];
    if (!upload_caches) n -= 2;
    for (int i = 0; i < n; i++) {
        if (!all[i]->used) continue;
        if (!all[i]->dev.ptr || kvt_upload(&all[i]->dev, all[i]->host, all[i]->bytes)) {
            kvt_failf("cannot allocate/upload %s (%zu bytes)", all[i]->name, all[i]->bytes);
            return 1;
        }
    }
    return 0;
}

kvt_expect kvt_expect_ok(void) {
    kvt_expect e = {KVATTN_OK, 0, -1, 0, 0, NULL};
    return e;
}

/* ---- tolerances ---------------------------------------------------------------------------------------------
 * u: unit roundoff of the element type. 16-bit outputs are compared with the reference computed from the same
 * rounded inputs; the backend may round P to the element type (~u relative) and rounds the output once:
 * |err| <= 4u * max|v| + 2u |ref| per element (|v| <= 1 in these tests), plus a norm check. A backend may also
 * round the rotated query to the element type (the CUDA kernels do, for the tensor cores): that moves each score
 * by up to (u/2) * q_sens (kvref_forward_sens: scale x the largest sum of |rope(q)_c k_c| over rotated
 * channels), so the row's out by up to 2 max|v| times that and its lse by that, added to those rows' bounds.
 * lse itself is float32 arithmetic on the (rounded) inputs: the backends sum the probabilities before rounding
 * them, so the element type's u does not enter its bound, which is 1e-4 max(|lse|, 1) in fp32 (CPU only) and
 * 2e-3 max(|lse|, 1) at 16 bits, plus that term. The 16-bit scores come from the tensor cores on CUDA, whose fp32
 * accumulation is coarser than the CPU's: on the H200 the worst lse error seen was 0.45 of 1e-3 max(|lse|, 1) + dq
 * (test_fuzz_bad_data, fifty-first session, docs/perf/s51/run3), so 2e-3 leaves a margin of ~4. (Until then the
 * 16-bit bound was 8u max(|lse|, 1), 0.03 |lse| in bf16: an lse off by 0.15 passed.)
 * Without that term a row with a large scale and a sharp softmax failed (f16, D 256, rotary on all 256
 * channels, scale 0.29, scores ~18.8: err 2.2e-3 against a bound of 2.1e-3; the CPU backend with its rotated
 * query rounded to f16 gave the CUDA result exactly). */
static double unit_roundoff(int dtype) {
    return dtype == KVATTN_F16 ? ldexp(1.0, -11) : dtype == KVATTN_BF16 ? ldexp(1.0, -8) : ldexp(1.0, -24);
}
static double relnorm_limit(int dtype) { return dtype == KVATTN_F16 ? 2e-3 : dtype == KVATTN_BF16 ? 1.2e-2 : 1e-5; }

/* 1 when sequence b is left out of the comparison: the one skip_seq, or marked in skip_mask (NULL: none) */
static int seq_skipped(int b, int skip_seq, const unsigned char *skip_mask) {
    return b == skip_seq || (skip_mask && skip_mask[b]);
}

int kvt_is_poison(const void *e, int es) {
    const unsigned char *b = e;
    for (int i = 0; i < es; i++)
        if (b[i] != 0xFF) return 0;
    return 1;
}

/* Checks out and softmax_lse (downloaded into got_out / got_lse) against the reference. Elements outside the
 * rows of the sequences (padding of views, skipped sequences) must still hold the poison. */
static void check_outputs(const kvattn_params *ph, const unsigned char *got_out, size_t out_bytes,
                          const float *got_lse, size_t lse_bytes, const double *oref, const double *lref,
                          const double *qsens, int skip_seq, const unsigned char *skip_mask, int nothing_written) {
    const int H = ph->num_heads, D = ph->head_dim, dt = ph->dtype, es = kvref_dtype_size(dt);
    const int varlen = ph->cu_seqlens_q != NULL;
    size_t n_out = out_bytes / es, n_lse = lse_bytes / 4;
    char *cov = calloc(n_out ? n_out : 1, 1);
    char *covl = calloc(n_lse ? n_lse : 1, 1);
    double refmax = 0, err2 = 0, ref2 = 0, maxerr = 0;
    const double u = unit_roundoff(dt);
    const double atol = dt == KVATTN_F32 ? 0 : 4 * u, rtol = dt == KVATTN_F32 ? 0 : 2 * u;
    for (int b = 0; b < ph->batch && !nothing_written; b++) {
        if (seq_skipped(b, skip_seq, skip_mask)) continue;
        kvref_seq s = kvref_seq_of(ph, b);
        for (int32_t i = 0; i < s.n_q; i++)
            for (int h = 0; h < H; h++)
                for (int c = 0; c < D; c++) {
                    double r = fabs(oref[(((int64_t)s.q_row0 + i) * H + h) * D + c]);
                    if (r > refmax) refmax = r;
                }
    }
    const double atol32 = 1e-4 * (refmax > 1e-3 ? refmax : 1e-3);
    int bad_out = 0, bad_lse = 0;
    for (int b = 0; b < ph->batch && !nothing_written; b++) {
        if (seq_skipped(b, skip_seq, skip_mask)) continue;
        kvref_seq s = kvref_seq_of(ph, b);
        for (int32_t i = 0; i < s.n_q; i++) {
            int64_t row = (int64_t)s.q_row0 + i;
            int64_t obase = varlen ? row * ph->out_row_stride : (int64_t)b * ph->out_batch_stride + (int64_t)i * ph->out_row_stride;
            for (int h = 0; h < H; h++) {
                const double *r = oref + (row * H + h) * D;
                double lr = lref[row * H + h];
                const double dq = dt == KVATTN_F32 ? 0 : 0.5 * u * qsens[row * H + h]; /* |score moves| */
                for (int c = 0; c < D; c++) {
                    int64_t e = obase + (int64_t)h * ph->out_head_stride + c;
                    if (e < 0 || (size_t)e >= n_out) {
                        if (bad_out++ < 3) kvt_failf("out: element (b=%d,i=%d,h=%d,c=%d) outside the buffer", b, i, h, c);
                        continue;
                    }
                    cov[e] = 1;
                    const unsigned char *ge = got_out + e * es;
                    if (kvt_is_poison(ge, es)) {
                        if (bad_out++ < 3) kvt_failf("out: not written at b=%d i=%d h=%d c=%d", b, i, h, c);
                        continue;
                    }
                    double g = kvref_load(dt, got_out, e);
                    double err = fabs(g - r[c]);
                    int ok;
                    if (lr == -INFINITY) ok = g == 0.0; /* empty row: exactly zero */
                    else {
                        const double bound = dt == KVATTN_F32 ? atol32 : atol + rtol * fabs(r[c]) + 2 * dq;
                        ok = err <= bound;
                        if (err / bound > g_worst_out) g_worst_out = err / bound;
                    }
                    if (!(err == err)) ok = 0;
                    if (!ok && bad_out++ < 3)
                        kvt_failf("out: b=%d i=%d h=%d c=%d got %.6g want %.6g (err %.3g)%s", b, i, h, c, g, r[c],
                                  err, lr == -INFINITY ? " [row with no visible key]" : "");
                    if (err == err) {
                        err2 += err * err;
                        if (err > maxerr) maxerr = err;
                    } else err2 = INFINITY;
                    ref2 += r[c] * r[c];
                }
                if (got_lse) {
                    int64_t le = (varlen ? 0 : (int64_t)b * ph->lse_batch_stride) + (int64_t)h * ph->lse_head_stride +
                                 (varlen ? row : i) * ph->lse_row_stride;
                    if (le < 0 || (size_t)le >= n_lse) {
                        if (bad_lse++ < 3) kvt_failf("lse: element (b=%d,i=%d,h=%d) outside the buffer", b, i, h);
                        continue;
                    }
                    covl[le] = 1;
                    if (kvt_is_poison((const unsigned char *)(got_lse + le), 4)) {
                        if (bad_lse++ < 3) kvt_failf("lse: not written at b=%d i=%d h=%d", b, i, h);
                        continue;
                    }
                    double g = got_lse[le];
                    int ok;
                    if (lr == -INFINITY) ok = g == -INFINITY;
                    else {
                        double tol = (dt == KVATTN_F32 ? 1e-4 : 2e-3) * (fabs(lr) > 1 ? fabs(lr) : 1) + dq;
                        ok = fabs(g - lr) <= tol;
                        if (fabs(g - lr) / tol > g_worst_lse) g_worst_lse = fabs(g - lr) / tol;
                    }
                    if (!ok && bad_lse++ < 3) kvt_failf("lse: b=%d i=%d h=%d got %.7g want %.7g", b, i, h, g, lr);
                }
            }
        }
    }
    if (!nothing_written && ref2 > 1e-20) {
        double rel = sqrt(err2 / ref2);
        if (!(rel <= relnorm_limit(dt))) kvt_failf("out: |out-ref|/|ref| = %.3g > %.3g (max abs err %.3g)", rel, relnorm_limit(dt), maxerr);
    }
    size_t untouched_bad = 0, first_bad = 0;
    for (size_t e = 0; e < n_out; e++)
        if (!cov[e] && !kvt_is_poison(got_out + e * es, es)) {
            if (!untouched_bad++) first_bad = e;
        }
    if (untouched_bad)
        kvt_failf("out: %zu elements %s were written (first at element %zu)", untouched_bad,
                  nothing_written ? "(by a call that must change nothing)" : "outside the output rows", first_bad);
    untouched_bad = 0;
    for (size_t e = 0; got_lse && e < n_lse; e++)
        if (!covl[e] && !kvt_is_poison((const unsigned char *)(got_lse + e), 4)) {
            if (!untouched_bad++) first_bad = e;
        }
    if (untouched_bad)
        kvt_failf("lse: %zu elements %s were written (first at element %zu)", untouched_bad,
                  nothing_written ? "(by a call that must change nothing)" : "outside the rows", first_bad);
    free(cov);
    free(covl);
}

/* The cache after the call must equal the reference's bytewise, except that appended k elements may differ by
 * one rounding (rotary in fp32 vs double): |got - exact| <= ulp + 8 * 2^-24 * (|x cos| + |y sin|). `expect` is
 * the reference's cache after its append; ph points at the host tensors (k_new etc.). A mismatch is reported as
 * an appended element or one that must be untouched (both caches: `app` marks the appended elements). */
static void check_cache(const kvattn_params *ph, int which, const void *expect, const void *got, size_t bytes,
                        int skip_seq, const unsigned char *skip_mask, int appended, int64_t view_offset) {
    if (memcmp(expect, got, bytes) == 0) return;
    const int dt = ph->dtype, es = kvref_dtype_size(dt), D = ph->head_dim;
    const char *name = which ? "v_cache" : "k_cache";
    size_t n = bytes / es;
    double *exact = NULL, *tol = NULL;
    unsigned char *app = NULL;
    if (ph->k_new && appended) {
        exact = calloc(n, sizeof(double));
        tol = calloc(n, sizeof(double));
        app = calloc(n, 1);
        const void *src = which ? ph->v_new : ph->k_new;
        const int64_t bst = which ? ph->vnew_batch_stride : ph->knew_batch_stride;
        const int64_t rst = which ? ph->vnew_row_stride : ph->knew_row_stride;
        const int64_t hst = which ? ph->vnew_head_stride : ph->knew_head_stride;
        for (int b = 0; b < ph->batch; b++) {
            if (seq_skipped(b, skip_seq, skip_mask)) continue;
            kvref_seq s = kvref_seq_of(ph, b);
            for (int32_t t = 0; t < s.n_new; t++)
                for (int kh = 0; kh < ph->num_kv_heads; kh++) {
                    int64_t o = kvref_cache_offset(ph, b, s.S + t, kh, which);
                    int64_t ro = (ph->cu_seqlens_knew ? (int64_t)(s.new_row0 + t) * rst
                                                      : (int64_t)b * bst + (int64_t)t * rst) +
                                 (int64_t)kh * hst;
                    const char *row = (const char *)src + ro * es;
                    for (int c = 0; c < D; c++) {
                        int64_t e = o < 0 ? -1 : o + view_offset + c; /* element in the whole allocation */
                        if (e < 0 || (size_t)e >= n) continue;
                        app[e] = 1;
                        if (which) continue; /* values are copied: bitwise */
                        double mag;
                        double x = kvref_rope_channel(ph, row, c, s.S + t, &mag);
                        exact[e] = x;
                        tol[e] = kvref_ulp(dt, x) + 8 * ldexp(1.0, -24) * mag;
                    }
                }
        }
    }
    size_t bad = 0;
    for (size_t e = 0; e < n; e++) {
        if (memcmp((const char *)expect + e * es, (const char *)got + e * es, es) == 0) continue;
        double g = kvref_load(dt, got, e);
        if (tol && tol[e] > 0 && fabs(g - exact[e]) <= tol[e]) continue;
        if (bad++ < 3)
            kvt_failf("%s: element %zu is %.8g, want %.8g%s", name, e, g, kvref_load(dt, expect, e),
                      app && app[e] ? " (appended)" : " (not an appended element: must be untouched)");
    }
    if (bad > 3) kvt_failf("%s: %zu elements differ", name, bad);
    free(exact);
    free(tol);
    free(app);
}

void kvt_check_cache(const kvattn_params *ph, int which, const void *expect, const void *got, size_t bytes,
                     int skip_seq, int appended, int64_t view_offset) {
    check_cache(ph, which, expect, got, bytes, skip_seq, NULL, appended, view_offset);
}

int kvt_problem_run(kvt_problem *P, kvt_expect e) {
    kvattn_params *ph = &P->ph;
    const int backend = P->backend;
    size_t ws = 0;
    int st = kvattn_workspace_size(&P->pd, backend, &ws);
    if (st == KVATTN_ERR_UNSUPPORTED && e.status != KVATTN_ERR_UNSUPPORTED) return 1;
    if (st != KVATTN_OK && st != e.status)
        kvt_failf("workspace_size: status %s, want %s (%s)", kvattn_status_string(st), kvattn_status_string(e.status),
                  kvattn_last_error());
    if (st != KVATTN_OK) ws = 0; /* rejected arguments: forward must reject them too, workspace or not */
    if (P->ws_override) ws = P->ws_bytes;
    kvt_free(&P->workspace);
    P->workspace = kvt_alloc(backend, ws ? ws : 16);
    if (!P->workspace.ptr) {
        kvt_failf("cannot allocate a workspace of %zu bytes", ws);
        return 0;
    }
    st = kvattn_forward(&P->pd, backend, ws ? P->workspace.ptr : NULL, ws, NULL);
    P->last_status = st;
    snprintf(P->last_error, sizeof P->last_error, "%s", kvattn_last_error());
    if (st == KVATTN_ERR_UNSUPPORTED && e.status != KVATTN_ERR_UNSUPPORTED) return 1;
    if (st != e.status) {
        kvt_failf("forward: status %s, want %s (%s)", kvattn_status_string(st), kvattn_status_string(e.status),
                  P->last_error);
        if (st != KVATTN_OK && e.status == KVATTN_OK) return 0; /* nothing to compare */
    }
    kvattn_device_status ds = {0, 0, -1, 0};
    if (backend == KVATTN_BACKEND_CUDA && ws && st == KVATTN_OK) {
        int rs = kvattn_device_status_read(P->workspace.ptr, NULL, &ds);
        if (rs != KVATTN_OK) kvt_failf("device_status_read: %s (%s)", kvattn_status_string(rs), kvattn_last_error());
        if (e.flag == 0 && ds.flags != 0)
            kvt_failf("device status flags 0x%x (num_failed %d, first %d) on valid input", ds.flags, ds.num_failed, ds.first_failed);
        if (e.flag && !(ds.flags & e.flag))
            kvt_failf("device status flags 0x%x, want flag 0x%x", ds.flags, e.flag);
        if (e.flag && e.skip_seq >= 0 && (ds.num_failed != 1 || ds.first_failed != e.skip_seq))
            kvt_failf("device status num_failed %d first_failed %d, want 1 and %d", ds.num_failed, ds.first_failed, e.skip_seq);
        if (e.skip_mask) { /* a set of failing sequences: the whole record is known */
            int n_failed = 0, first = -1;
            for (int b = ph->batch - 1; b >= 0; b--)
                if (e.skip_mask[b]) {
                    n_failed++;
                    first = b;
                }
            if (ds.flags != e.flag || ds.num_failed != n_failed || ds.first_failed != first)
                kvt_failf("device status flags 0x%x num_failed %d first_failed %d, want exactly 0x%x %d %d", ds.flags,
                          ds.num_failed, ds.first_failed, e.flag, n_failed, first);
        }
    }
    const unsigned char *skip_mask = e.flag ? e.skip_mask : NULL;

    /* the reference, on the host mirror */
    int64_t rows = kvref_rows(ph);
    size_t H = ph->num_heads > 0 ? ph->num_heads : 1, D = ph->head_dim > 0 ? ph->head_dim : 1;
    size_t nrows = rows > 0 ? (size_t)rows : 1;
    double *oref = calloc(nrows * H * D, sizeof(double));
    double *lref = calloc(nrows * H, sizeof(double));
    double *qsens = calloc(nrows * H, sizeof(double));
    int nothing = e.no_change;
    if (!nothing) {
        int rf = e.any_seq ? 0 : kvref_forward_mask(ph, oref, lref, e.flag ? e.skip_seq : -1, skip_mask, qsens);
        if (rf) kvt_failf("reference rejected the input (flag 0x%x): the test is wrong", rf);
    }

    /* guards of every buffer */
    kvt_arr *all[] = {&P->q, &P->k_new, &P->v_new, &P->out, &P->lse, &P->cu_q, &P->cu_knew, &P->seqlens,
                      &P->leftpad, &P->batch_idx, &P->block_table, &P->rot_cos, &P->rot_sin, &P->alibi,
                      &P->k_cache, &P->v_cache};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]->used && !kvt_guards_ok(&all[i]->dev)) kvt_failf("guard bytes around %s overwritten", all[i]->name);
    if (!kvt_guards_ok(&P->workspace)) kvt_failf("guard bytes around the workspace overwritten");

    /* inputs must be untouched (they are const) */
    kvt_arr *inputs[] = {&P->q, &P->k_new, &P->v_new, &P->cu_q, &P->cu_knew, &P->seqlens, &P->leftpad,
                         &P->batch_idx, &P->block_table, &P->rot_cos, &P->rot_sin, &P->alibi};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        kvt_arr *a = inputs[i];
        if (!a->used || !a->bytes) continue;
        void *g = malloc(a->bytes);
        if (kvt_download(&a->dev, g, a->bytes)) kvt_failf("download of %s failed", a->name);
        else if (memcmp(g, a->host, a->bytes)) kvt_failf("input %s was modified", a->name);
        free(g);
    }

    if (e.any_seq) { /* CUDA bad cu_seqlens: only the status is defined */
        free(oref);
        free(lref);
        free(qsens);
        return 0;
    }
    unsigned char *gout = malloc(P->out.bytes ? P->out.bytes : 1);
    float *glse = P->lse.used ? malloc(P->lse.bytes ? P->lse.bytes : 4) : NULL;
    if (kvt_download(&P->out.dev, gout, P->out.bytes)) kvt_failf("download of out failed");
    else if (!glse || !kvt_download(&P->lse.dev, glse, P->lse.bytes))
        check_outputs(ph, gout, P->out.bytes, glse, P->lse.used ? P->lse.bytes : 0, oref, lref, qsens,
                      e.flag ? e.skip_seq : -1, skip_mask, nothing);
    else kvt_failf("download of softmax_lse failed");

    kvt_arr *caches[2] = {&P->k_cache, &P->v_cache};
    for (int w = 0; w < 2; w++) {
        kvt_arr *a = caches[w];
        void *g = malloc(a->bytes ? a->bytes : 1);
        if (kvt_download(&a->dev, g, a->bytes)) kvt_failf("download of %s failed", a->name);
        else {
            check_cache(ph, w, a->host, g, a->bytes, e.flag ? e.skip_seq : -1, skip_mask, !nothing,
                        a->offset_bytes / kvref_dtype_size(ph->dtype));
            /* checked: carry the backend's bytes forward (a 1-ulp rounding difference must not resurface in
             * the next step of a generation loop as an "untouched row changed") */
            memcpy(a->host, g, a->bytes);
        }
        free(g);
    }
    free(gout);
    free(glse);
    free(oref);
    free(lref);
    free(qsens);
    return 0;
}

int kvt_problem_run_case(kvt_problem *P, kvt_expect e) {
    P->last_status = -1; /* kvt_problem_run sets it once forward was called */
    if (!kvt_problem_run(P, e)) return 0;
    if (e.status == KVATTN_OK) return 1;
    const char *who = P->last_status == KVATTN_ERR_UNSUPPORTED ? "forward" : "workspace_size";
    if (P->last_status != KVATTN_ERR_UNSUPPORTED) { /* workspace_size answered: its message is the last one */
        P->last_status = KVATTN_ERR_UNSUPPORTED;
        snprintf(P->last_error, sizeof P->last_error, "%s", kvattn_last_error());
    }
    kvt_failf("%s: status KVATTN_ERR_UNSUPPORTED, want %s (%s)", who, kvattn_status_string(e.status), P->last_error);
    return 0;
}

/* A paged varlen call of B sequences and total_q query rows (H / Hk / D, bf16, causal, capacity max_pages x page)
 * at fake, aligned, well-separated addresses (2^52 apart): for kvattn_validate and kvattn_workspace_size only,
 * which read no data. */
kvattn_params kvt_fake_paged_call(int B, int total_q, int H, int Hk, int D, int page, int max_pages) {
    kvattn_params p = kvattn_params_default();
#define FAKE(i) ((void *)(uintptr_t)((uint64_t)((i) + 1) << 52))
    p.dtype = KVATTN_BF16; p.batch = B; p.num_heads = H; p.num_kv_heads = Hk; p.head_dim = D;
    p.q = FAKE(0); p.cu_seqlens_q = (const int32_t *)FAKE(1); p.total_q = total_q;
    p.k_cache = FAKE(2); p.v_cache = FAKE(3);
    p.block_table = (const int32_t *)FAKE(4); p.max_pages_per_seq = max_pages; p.page_size = page;
    p.num_pages = 1 << 20; p.cache_seqlens = (const int32_t *)FAKE(5);
    p.out = FAKE(6); p.causal = 1;
#undef FAKE
    return p;
}
