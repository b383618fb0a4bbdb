/* demo.c — an inflight-batching generation stream on kvattn: requests with random prompt lengths and
 * random numbers of new tokens arrive into a queue; B slots; every step is ONE kvattn_forward over the ragged
 * batch (new prompts prefill, the others decode one token) with a paged KV cache managed by kvattn_pages_*.
 * Random q/k/v stand in for a model. Every --check-every'th step is verified against the float64 reference
 * of tests/common (outputs, LSE, and the whole cache after the append, bitwise).
 * Runs on the CUDA backend when a GPU is present, else on the CPU.
 *   usage: demo [--cpu] [--requests N] [--slots B] [--max-new N] [--fp16] [--check-every K] [--seed S] [--quiet] */
#include "kvattn.h"
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef KVATTN_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* model shape (GQA): H query heads, Hk key/value heads, D head dim */
enum { H = 16, HK = 4, D = 128, PAGE_SIZE = 16, PROMPT_MIN = 16, PROMPT_MAX = 700 };

typedef struct request {
    int32_t prompt_len, max_new;
    int32_t arrival_step;
} request;

typedef struct slot {
    int32_t active, req, seq_id;
    int32_t prefilled; /* 0 until the prompt went through a step */
    int32_t generated; /* tokens produced so far (the prefill step produces the first) */
    int32_t reserved_pages; /* pages this request may still take before it finishes */
} slot;

typedef struct config {
    int force_cpu, requests, slots, dtype, check_every, quiet, max_new;
    double arrival_gap; /* mean steps between arrivals */
    uint64_t seed;
} config;

static uint64_t g_rng;
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static int32_t rnd_in(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }
static float rnd_unit(void) { return (float)(rnd() & 0xffffff) / (float)0x800000 - 1.0f; } /* [-1, 1) */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill_random(uint16_t *x, int64_t n, int dtype, float amplitude) {
    for (int64_t i = 0; i < n; i++) {
        float v = amplitude * rnd_unit();
        x[i] = dtype == KVATTN_BF16 ? kvref_f32_to_bf16(v) : kvref_f32_to_f16(v);
    }
}

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "demo: out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

/* ---- memory on the backend: host for the CPU, device for CUDA --------------------------------------------- */
static int g_cuda;

#ifdef KVATTN_HAVE_CUDA
#define CUDA_OK(call)                                                                                        \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "demo: %s failed: %s\n", #call, cudaGetErrorString(e_));                         \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)
#endif

static void *dev_alloc(size_t bytes) {
#ifdef KVATTN_HAVE_CUDA
    if (g_cuda) {
        void *p = NULL;
        CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1));
        CUDA_OK(cudaMemset(p, 0, bytes ? bytes : 1));
        return p;
    }
#endif
    void *p = xmalloc(bytes);
    memset(p, 0, bytes);
    return p;
}
static void dev_free(void *p) {
#ifdef KVATTN_HAVE_CUDA
    if (g_cuda) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}
static void to_dev(void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
#ifdef KVATTN_HAVE_CUDA
    if (g_cuda) {
        CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
        return;
    }
#endif
    memcpy(dst, src, bytes);
}
static void to_host(void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
#ifdef KVATTN_HAVE_CUDA
    if (g_cuda) {
        CUDA_OK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
        return;
    }
#endif
    memcpy(dst, src, bytes);
}
static void dev_sync(void) {
#ifdef KVATTN_HAVE_CUDA
    if (g_cuda) CUDA_OK(cudaDeviceSynchronize());
#endif
}

/* ---- the check of one step against the float64 reference --------------------------------------------------
 * `host` is the step's params with every pointer on the host and the caches pointing at a copy taken before
 * the call; the reference appends into that copy and attends. Then: out and LSE within tolerance, and the
 * library's cache after the call (`k_after`, `v_after`, host copies) equal to the reference's, bitwise over
 * the whole pool: the append wrote exactly the right rows of the right pages and nothing else. */
typedef struct check_result {
    int ok;
    double max_err_out, max_err_lse;
    int64_t bad_out, bad_lse, bad_cache_bytes;
} check_result;

static check_result check_step(const kvattn_params *host, const uint16_t *out, const float *lse, const void *k_after,
                               const void *v_after, size_t cache_bytes) {
    check_result r;
    memset(&r, 0, sizeof r);
    int64_t rows = kvref_rows(host);
    double *out_ref = xmalloc(sizeof(double) * (size_t)(rows * H * D + 1));
    double *lse_ref = xmalloc(sizeof(double) * (size_t)(rows * H + 1));
    int flag = kvref_forward(host, out_ref, lse_ref);
    if (flag) {
        printf("  reference rejected the step (flag %d)\n", flag);
        free(out_ref);
        free(lse_ref);
        return r;
    }
    /* tolerances: the output is rounded to the 16-bit type, and kernels may round the probabilities to it
     * before the P*V product; the LSE is fp32 accumulated */
    double tol = host->dtype == KVATTN_BF16 ? 1.6e-2 : 2e-3;
    for (int64_t i = 0; i < rows * H * D; i++) {
        double got = kvref_load(host->dtype, out, i);
        double err = fabs(got - out_ref[i]);
        if (!(err <= tol * (1.0 + fabs(out_ref[i])))) r.bad_out++;
        if (err > r.max_err_out || err != err) r.max_err_out = err;
    }
    for (int64_t i = 0; i < rows; i++)
        for (int h = 0; h < H; h++) {
            double ref = lse_ref[i * H + h], got = lse[(int64_t)h * host->lse_head_stride + i];
            double err = (isinf(ref) && got == ref) ? 0.0 : fabs(got - ref);
            if (!(err <= 1e-3 * (1.0 + fabs(ref)))) r.bad_lse++;
            if (err > r.max_err_lse || err != err) r.max_err_lse = err;
        }
    const unsigned char *ka = k_after, *va = v_after, *kr = host->k_cache, *vr = host->v_cache;
    for (size_t i = 0; i < cache_bytes; i++) r.bad_cache_bytes += (ka[i] != kr[i]) + (va[i] != vr[i]);
    r.ok = r.bad_out == 0 && r.bad_lse == 0 && r.bad_cache_bytes == 0;
    free(out_ref);
    free(lse_ref);
    return r;
}

/* a whole decimal number >= lo for option `name`, else a message and 0 */
static int int_arg(const char *name, const char *v, int lo, int *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > 1000000000) {
        fprintf(stderr, "demo: %s needs a whole number >= %d, got \"%s\"\n", name, lo, v);
        return 0;
    }
    *out = (int)x;
    return 1;
}

static void usage(void) {
    printf("usage: demo [--cpu] [--requests N] [--slots B] [--max-new N] [--fp16] [--check-every K] [--seed S]"
           " [--quiet]\n");
}

int main(int argc, char **argv) {
    config cfg = {0};
    cfg.requests = -1;
    cfg.slots = 16;
    cfg.dtype = KVATTN_BF16;
    cfg.check_every = -1;
    cfg.max_new = -1;
    cfg.arrival_gap = -1.0;
    cfg.seed = 1234;
    for (int i = 1; i < argc; i++) {
        int ok = 1;
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--cpu")) cfg.force_cpu = 1;
        else if (!strcmp(a, "--fp16")) cfg.dtype = KVATTN_F16;
        else if (!strcmp(a, "--quiet")) cfg.quiet = 1;
        else if (!strcmp(a, "--requests")) ok = int_arg(a, v, 1, &cfg.requests), i++;
        else if (!strcmp(a, "--slots")) ok = int_arg(a, v, 1, &cfg.slots), i++;
        else if (!strcmp(a, "--max-new")) ok = int_arg(a, v, 1, &cfg.max_new), i++;
        else if (!strcmp(a, "--check-every")) ok = int_arg(a, v, 1, &cfg.check_every), i++;
        else if (!strcmp(a, "--seed")) {
            char *end;
            cfg.seed = strtoull(v, &end, 10), i++;
            ok = *v && !*end;
            if (!ok) fprintf(stderr, "demo: --seed needs a number, got \"%s\"\n", v);
        }
        else {
            usage();
            return strcmp(a, "--help") ? 2 : 0;
        }
        if (!ok) return 2;
    }
    if (cfg.slots < 1 || cfg.slots > 256) {
        usage();
        return 2;
    }
    g_rng = cfg.seed * 0x9e3779b97f4a7c15ull + 1;

    g_cuda = !cfg.force_cpu && kvattn_backend_available(KVATTN_BACKEND_CUDA);
    const int backend = g_cuda ? KVATTN_BACKEND_CUDA : KVATTN_BACKEND_CPU;
    /* the CPU is much slower: a shorter stream keeps the run to seconds */
    if (cfg.requests < 0) cfg.requests = g_cuda ? 512 : 64;
    if (cfg.max_new < 0) cfg.max_new = g_cuda ? 256 : 64;
    if (cfg.arrival_gap < 0) cfg.arrival_gap = g_cuda ? 0.08 : 1.2;
    if (cfg.check_every < 0) cfg.check_every = g_cuda ? 50 : 10; /* the float64 reference runs on one core */
    if (cfg.max_new < 1) cfg.max_new = 1;

    /* the pool holds 3/4 of what all slots at their longest would need: admission has to wait for pages */
    const int32_t max_pages_per_seq = (PROMPT_MAX + cfg.max_new + PAGE_SIZE - 1) / PAGE_SIZE;
    int32_t num_pages = cfg.slots * max_pages_per_seq * 3 / 4;
    if (num_pages < max_pages_per_seq) num_pages = max_pages_per_seq; /* the longest request must fit alone */
    const int64_t page_elems = (int64_t)PAGE_SIZE * HK * D;
    const size_t cache_bytes = (size_t)num_pages * page_elems * 2;
    const int32_t max_rows = cfg.slots * PROMPT_MAX;

    printf("kvattn %s demo: inflight batching on the %s backend\n", kvattn_version_string(), g_cuda ? "CUDA" : "CPU");
#ifdef KVATTN_HAVE_CUDA
    if (g_cuda) {
        struct cudaDeviceProp prop;
        int dev = 0;
        CUDA_OK(cudaGetDevice(&dev));
        CUDA_OK(cudaGetDeviceProperties(&prop, dev));
        printf("device: %s\n", prop.name);
    }
#endif
    printf("shape: H=%d Hk=%d D=%d %s, causal, paged cache page_size=%d, %d pages (%.1f MiB per K/V), %d slots\n", H,
           HK, D, cfg.dtype == KVATTN_BF16 ? "bf16" : "fp16", PAGE_SIZE, num_pages, cache_bytes / 1048576.0,
           cfg.slots);
    printf("stream: %d requests, prompt %d..%d tokens, %d..%d new tokens, one arrival per %.2f steps on average\n",
           cfg.requests, PROMPT_MIN, PROMPT_MAX, 1, cfg.max_new, cfg.arrival_gap);

    request *reqs = xmalloc(sizeof(request) * (size_t)cfg.requests);
    double t_arrive = 0.0;
    for (int i = 0; i < cfg.requests; i++) {
        reqs[i].prompt_len = rnd_in(PROMPT_MIN, PROMPT_MAX);
        reqs[i].max_new = rnd_in(1, cfg.max_new);
        reqs[i].arrival_step = (int32_t)t_arrive;
        t_arrive += cfg.arrival_gap * 2.0 * (double)(rnd() % 1024) / 1023.0;
    }

    kvattn_pages *pool = NULL;
    if (kvattn_pages_create(&pool, num_pages, PAGE_SIZE) != KVATTN_OK) {
        fprintf(stderr, "demo: kvattn_pages_create: %s\n", kvattn_last_error());
        return 1;
    }
    slot *slots = calloc((size_t)cfg.slots, sizeof(slot));

    /* host staging (the CPU backend uses these directly) */
    int32_t *h_cu = xmalloc(sizeof(int32_t) * (size_t)(cfg.slots + 1));
    int32_t *h_table = xmalloc(sizeof(int32_t) * (size_t)cfg.slots * max_pages_per_seq);
    int32_t *h_seqlens = xmalloc(sizeof(int32_t) * (size_t)cfg.slots);
    int32_t *seq_ids = xmalloc(sizeof(int32_t) * (size_t)cfg.slots);
    int32_t *n_tok = xmalloc(sizeof(int32_t) * (size_t)cfg.slots);
    int32_t *batch_slot = xmalloc(sizeof(int32_t) * (size_t)cfg.slots);
    uint16_t *h_q = xmalloc(sizeof(uint16_t) * (size_t)max_rows * H * D);
    uint16_t *h_k = xmalloc(sizeof(uint16_t) * (size_t)max_rows * HK * D);
    uint16_t *h_v = xmalloc(sizeof(uint16_t) * (size_t)max_rows * HK * D);
    uint16_t *h_out = xmalloc(sizeof(uint16_t) * (size_t)max_rows * H * D);
    float *h_lse = xmalloc(sizeof(float) * (size_t)max_rows * H);
    unsigned char *snap_k = xmalloc(cache_bytes), *snap_v = xmalloc(cache_bytes);
    unsigned char *after_k = xmalloc(cache_bytes), *after_v = xmalloc(cache_bytes);

    /* backend buffers (on the CPU the staging arrays double as them, except the cache and outputs) */
    void *k_cache = dev_alloc(cache_bytes), *v_cache = dev_alloc(cache_bytes);
    uint16_t *d_q = h_q, *d_k = h_k, *d_v = h_v, *d_out = h_out;
    float *d_lse = h_lse;
    int32_t *d_cu = h_cu, *d_table = h_table, *d_seqlens = h_seqlens;
    void *workspace = NULL;
    size_t workspace_bytes = 0;
    if (g_cuda) {
        d_q = dev_alloc(sizeof(uint16_t) * (size_t)max_rows * H * D);
        d_k = dev_alloc(sizeof(uint16_t) * (size_t)max_rows * HK * D);
        d_v = dev_alloc(sizeof(uint16_t) * (size_t)max_rows * HK * D);
        d_out = dev_alloc(sizeof(uint16_t) * (size_t)max_rows * H * D);
        d_lse = dev_alloc(sizeof(float) * (size_t)max_rows * H);
        d_cu = dev_alloc(sizeof(int32_t) * (size_t)(cfg.slots + 1));
        d_table = dev_alloc(sizeof(int32_t) * (size_t)cfg.slots * max_pages_per_seq);
        d_seqlens = dev_alloc(sizeof(int32_t) * (size_t)cfg.slots);
    }

    int next_req = 0, finished = 0, step = 0, checks = 0, checks_passed = 0, failed = 0;
    int64_t tokens_total = 0, prefill_tokens = 0, decode_tokens = 0, kv_read_total = 0;
    int32_t reserved = 0, peak_used = 0, peak_queue = 0;
    double attn_time = 0.0, t_start = now_s();
    int status_reads = 0, status_bad = 0;
    int print_every = 1;
    if (cfg.quiet) print_every = 1 << 30;
    else if (g_cuda) print_every = 25;

    while (finished < cfg.requests) {
        /* 1. admission, first come first served: a request enters a free slot when the pool can hold its whole
         *    life (prompt + max new tokens) on top of what the running requests may still take */
        int queued = 0;
        for (int i = next_req; i < cfg.requests && reqs[i].arrival_step <= step; i++) queued++;
        if (queued > peak_queue) peak_queue = queued;
        for (int s = 0; s < cfg.slots && next_req < cfg.requests && reqs[next_req].arrival_step <= step; s++) {
            if (slots[s].active) continue;
            const request *r = &reqs[next_req];
            int32_t life_pages = (r->prompt_len + r->max_new + PAGE_SIZE - 1) / PAGE_SIZE;
            if (kvattn_pages_free_count(pool) - reserved < life_pages) break;
            slot *sl = &slots[s];
            memset(sl, 0, sizeof *sl);
            if (kvattn_pages_add_seq(pool, &sl->seq_id) != KVATTN_OK) {
                fprintf(stderr, "demo: kvattn_pages_add_seq: %s\n", kvattn_last_error());
                return 1;
            }
            sl->active = 1;
            sl->req = next_req++;
            sl->reserved_pages = life_pages;
            reserved += life_pages;
        }

        /* 2. the ragged batch: prefills append their whole prompt, the others one token */
        int B = 0;
        int32_t total = 0;
        h_cu[0] = 0;
        for (int s = 0; s < cfg.slots; s++) {
            slot *sl = &slots[s];
            if (!sl->active) continue;
            int32_t n = sl->prefilled ? 1 : reqs[sl->req].prompt_len;
            int32_t pages_before = kvattn_pages_seq_num_pages(pool, sl->seq_id);
            int st = kvattn_pages_append(pool, sl->seq_id, n);
            if (st != KVATTN_OK) { /* cannot happen with the reservation above; the pool is unchanged */
                fprintf(stderr, "demo: kvattn_pages_append: %s\n", kvattn_last_error());
                return 1;
            }
            int32_t taken = kvattn_pages_seq_num_pages(pool, sl->seq_id) - pages_before;
            sl->reserved_pages -= taken;
            reserved -= taken;
            seq_ids[B] = sl->seq_id;
            n_tok[B] = n;
            batch_slot[B] = s;
            total += n;
            h_cu[B + 1] = total;
            B++;
        }
        if (B == 0) { /* nothing arrived yet */
            step++;
            continue;
        }
        /* cache_seqlens = length before this step's tokens (pending = the tokens the call appends) */
        if (kvattn_pages_fill(pool, seq_ids, B, n_tok, h_table, max_pages_per_seq, max_pages_per_seq, h_seqlens) !=
            KVATTN_OK) {
            fprintf(stderr, "demo: kvattn_pages_fill: %s\n", kvattn_last_error());
            return 1;
        }
        int32_t used = kvattn_pages_used_count(pool);
        if (used > peak_used) peak_used = used;
        int64_t kv_read = 0;
        for (int b = 0; b < B; b++) kv_read += (int64_t)h_seqlens[b] + n_tok[b];

        /* 3. random activations standing in for the model */
        fill_random(h_q, (int64_t)total * H * D, cfg.dtype, 2.0f);
        fill_random(h_k, (int64_t)total * HK * D, cfg.dtype, 1.0f);
        fill_random(h_v, (int64_t)total * HK * D, cfg.dtype, 1.0f);

        kvattn_params p = kvattn_params_default();
        p.dtype = cfg.dtype;
        p.batch = B;
        p.num_heads = H;
        p.num_kv_heads = HK;
        p.head_dim = D;
        p.q = d_q;
        p.cu_seqlens_q = d_cu;
        p.total_q = total;
        p.q_row_stride = (int64_t)H * D;
        p.q_head_stride = D;
        p.k_new = d_k;
        p.v_new = d_v;
        p.cu_seqlens_knew = d_cu;
        p.total_knew = total;
        p.knew_row_stride = p.vnew_row_stride = (int64_t)HK * D;
        p.knew_head_stride = p.vnew_head_stride = D;
        p.k_cache = k_cache;
        p.v_cache = v_cache;
        p.k_batch_stride = p.v_batch_stride = page_elems;
        p.k_row_stride = p.v_row_stride = (int64_t)HK * D;
        p.k_head_stride = p.v_head_stride = D;
        p.block_table = d_table;
        p.block_table_batch_stride = max_pages_per_seq;
        p.max_pages_per_seq = max_pages_per_seq;
        p.num_pages = num_pages;
        p.page_size = PAGE_SIZE;
        p.cache_seqlens = d_seqlens;
        p.causal = 1;
        p.out = d_out;
        p.out_row_stride = (int64_t)H * D;
        p.out_head_stride = D;
        p.softmax_lse = d_lse;
        p.lse_head_stride = total; /* [H, total_q] */
        p.lse_row_stride = 1;

        int do_check = cfg.check_every > 0 && step % cfg.check_every == 0;
        if (g_cuda) {
            to_dev(d_cu, h_cu, sizeof(int32_t) * (size_t)(B + 1));
            to_dev(d_table, h_table, sizeof(int32_t) * (size_t)B * max_pages_per_seq);
            to_dev(d_seqlens, h_seqlens, sizeof(int32_t) * (size_t)B);
            to_dev(d_q, h_q, sizeof(uint16_t) * (size_t)total * H * D);
            to_dev(d_k, h_k, sizeof(uint16_t) * (size_t)total * HK * D);
            to_dev(d_v, h_v, sizeof(uint16_t) * (size_t)total * HK * D);
            size_t need = 0;
            if (kvattn_workspace_size(&p, backend, &need) != KVATTN_OK) {
                fprintf(stderr, "demo: kvattn_workspace_size: %s\n", kvattn_last_error());
                return 1;
            }
            if (need > workspace_bytes || !workspace) {
                dev_free(workspace);
                workspace_bytes = need + need / 4;
                workspace = dev_alloc(workspace_bytes);
            }
        }
        if (do_check) {
            to_host(snap_k, k_cache, cache_bytes);
            to_host(snap_v, v_cache, cache_bytes);
        }

        dev_sync();
        double t0 = now_s();
        int st = kvattn_forward(&p, backend, workspace, workspace_bytes, NULL);
        dev_sync();
        double dt = now_s() - t0;
        if (st != KVATTN_OK) {
            fprintf(stderr, "demo: step %d: kvattn_forward: %s: %s\n", step, kvattn_status_string(st),
                    kvattn_last_error());
            return 1;
        }
        attn_time += dt;
        /* every CUDA call rewrites the status record in its workspace, so it is read after each call; the stream
         * is already drained (for the timing above), so this costs only the record's copy. A real loop that does
         * not synchronize each step reads it when it chooses (or checks the flags on the device) */
        if (g_cuda) {
            kvattn_device_status ds = {0};
            int sst = kvattn_device_status_read(workspace, NULL, &ds);
            status_reads++;
            if (sst != KVATTN_OK || ds.flags != 0 || ds.num_failed != 0) {
                printf("step %d: device status %s flags=0x%x, %d sequences skipped (first: batch index %d)\n", step,
                       kvattn_status_string(sst), ds.flags, ds.num_failed, ds.first_failed);
                status_bad++;
            }
        }
        tokens_total += total;
        kv_read_total += kv_read;

        /* 4. the check: reference on host copies of everything */
        char check_note[160] = "";
        if (do_check) {
            to_host(h_out, d_out, sizeof(uint16_t) * (size_t)total * H * D);
            to_host(h_lse, d_lse, sizeof(float) * (size_t)total * H);
            to_host(after_k, k_cache, cache_bytes);
            to_host(after_v, v_cache, cache_bytes);
            kvattn_params hp = p;
            hp.q = h_q;
            hp.k_new = h_k;
            hp.v_new = h_v;
            hp.cu_seqlens_q = hp.cu_seqlens_knew = h_cu;
            hp.block_table = h_table;
            hp.cache_seqlens = h_seqlens;
            hp.k_cache = snap_k;
            hp.v_cache = snap_v;
            hp.out = h_out;
            hp.softmax_lse = h_lse;
            check_result r = check_step(&hp, h_out, h_lse, after_k, after_v, cache_bytes);
            checks++;
            checks_passed += r.ok;
            if (!r.ok) failed = 1;
            snprintf(check_note, sizeof check_note, "  check %s (max err out %.2e lse %.2e%s)", r.ok ? "ok" : "FAILED",
                     r.max_err_out, r.max_err_lse, r.bad_cache_bytes ? ", CACHE DIFFERS" : "");
            if (!r.ok)
                printf("step %d: %lld bad outputs, %lld bad lse, %lld cache bytes differ\n", step,
                       (long long)r.bad_out, (long long)r.bad_lse, (long long)r.bad_cache_bytes);
        }

        if (step % print_every == 0 || do_check) {
            char lens[512];
            int off = snprintf(lens, sizeof lens, "[");
            for (int b = 0; b < B && off < (int)sizeof lens - 16; b++)
                off += snprintf(lens + off, sizeof lens - (size_t)off, "%s%d", b ? "," : "", n_tok[b]);
            snprintf(lens + off, sizeof lens - (size_t)off, "]");
            printf("step %4d  B=%2d  q lens %-50s tokens %5d  pages %4d used %4d free  %8.2f ms  %9.0f tok/s%s\n", step,
                   B, lens, total, used, kvattn_pages_free_count(pool), dt * 1e3, total / dt, check_note);
        }

        /* 5. bookkeeping: each sequence produced one token; finished requests leave and free their pages */
        for (int b = 0; b < B; b++) {
            slot *sl = &slots[batch_slot[b]];
            if (sl->prefilled) decode_tokens++;
            else prefill_tokens += n_tok[b];
            sl->prefilled = 1;
            sl->generated++;
            if (sl->generated >= reqs[sl->req].max_new) {
                reserved -= sl->reserved_pages;
                if (kvattn_pages_release(pool, sl->seq_id) != KVATTN_OK) {
                    fprintf(stderr, "demo: kvattn_pages_release: %s\n", kvattn_last_error());
                    return 1;
                }
                sl->active = 0;
                finished++;
            }
        }
        step++;
    }
    double wall = now_s() - t_start;

    if (g_cuda) {
        printf("device status: read after each of %d calls, %d reported skipped sequences\n", status_reads,
               status_bad);
        if (status_bad) failed = 1;
    }
    if (checks == 0) printf("NOTE: no step was checked (--check-every %d, %d steps)\n", cfg.check_every, step);
    if (kvattn_pages_used_count(pool) != 0) {
        printf("pages still in use at the end: %d\n", kvattn_pages_used_count(pool));
        failed = 1;
    }

    printf("pages: peak %d of %d in use; queue peak %d requests\n", peak_used, num_pages, peak_queue);
    printf("tokens: %lld prefill + %lld decode; attention read %lld cached K/V tokens\n", (long long)prefill_tokens,
           (long long)decode_tokens, (long long)kv_read_total);
    printf("summary: backend %s, %d requests, %d steps, %lld tokens, attention %.3f s (%.0f tokens/s), wall %.2f s, "
           "checked steps %d/%d passed\n",
           g_cuda ? "CUDA" : "CPU", cfg.requests, step, (long long)tokens_total, attn_time, tokens_total / attn_time,
           wall, checks_passed, checks);

    kvattn_pages_destroy(pool);
    dev_free(k_cache);
    dev_free(v_cache);
    if (g_cuda) {
        dev_free(d_q), dev_free(d_k), dev_free(d_v), dev_free(d_out), dev_free(d_lse);
        dev_free(d_cu), dev_free(d_table), dev_free(d_seqlens), dev_free(workspace);
    }
    free(reqs), free(slots), free(h_cu), free(h_table), free(h_seqlens), free(seq_ids), free(n_tok), free(batch_slot);
    free(h_q), free(h_k), free(h_v), free(h_out), free(h_lse), free(snap_k), free(snap_v), free(after_k), free(after_v);
    return failed ? 1 : 0;
}
