/* bench_cpu.c — how close the CPU backend comes to the machine's memory bandwidth on decode.
 * Measures the read bandwidth (all threads summing a 1 GiB float array, best of several), then one decode step
 * (n_q = n_new = 1 per sequence) over a large cache for fp16/bf16, paged (page 16, shuffled pages) and
 * contiguous: effective GB/s = K+V bytes read / time, and its fraction of the measured bandwidth. Prints the load
 * average before and after: wall-clock figures on a shared machine mean little without it.
 * Usage: bench_cpu [B=8] [cache=4096] [H=32] [Hk=8] [D=128] */
#include "kvattn.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static double read_bandwidth(void) {
    const size_t n = (size_t)1 << 28; /* 1 GiB of floats */
    float *a = aligned_alloc(64, n * sizeof(float));
    if (!a) return 0.0;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = (float)(i & 7);
    double best = 1e30, sink = 0.0;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = now(), total = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : total)
        for (size_t c = 0; c < n; c += 4096) {
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (size_t i = c; i < c + 4096; i++) s += a[i];
            total += s;
        }
        double t = now() - t0;
        sink += total;
        if (t < best) best = t;
    }
    free(a);
    if (sink == 42.0) printf(" ");
    return (double)n * sizeof(float) / best / 1e9;
}

/* "load average 1.02 1.10 1.30" from /proc/loadavg (Linux), or nothing */
static void print_load(const char *when) {
    FILE *f = fopen("/proc/loadavg", "r");
    double l1, l5, l15;
    if (f && fscanf(f, "%lf %lf %lf", &l1, &l5, &l15) == 3) printf("load average %s: %.2f %.2f %.2f\n", when, l1, l5, l15);
    if (f) fclose(f);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static void fill16(uint16_t *x, size_t n, int dtype) {
    /* small values in [-1, 1): exponent/mantissa patterns valid for both fp16 and bf16 */
    for (size_t i = 0; i < n; i++) {
        uint32_t r = next_u32();
        x[i] = dtype == KVATTN_F16 ? (uint16_t)(0x3800 | (r & 0x83ff)) : (uint16_t)(0x3f00 | (r & 0x807f));
    }
}

int main(int argc, char **argv) {
    const int B = argc > 1 ? atoi(argv[1]) : 8, C = argc > 2 ? atoi(argv[2]) : 4096;
    const int H = argc > 3 ? atoi(argv[3]) : 32, Hk = argc > 4 ? atoi(argv[4]) : 8, D = argc > 5 ? atoi(argv[5]) : 128;
    const int page = 16;
    printf("kvattn %s CPU backend, %d threads\n", kvattn_version_string(), omp_get_max_threads());
    print_load("before");
    const double bw = read_bandwidth();
    printf("measured read bandwidth (sum of a 1 GiB float array, best of 6): %.1f GB/s\n\n", bw);
    printf("decode step: B=%d, cache=%d, H=%d, Hk=%d, D=%d, n_q=n_new=1\n", B, C, H, Hk, D);
    printf("%-6s %-18s %10s %10s %10s\n", "dtype", "layout", "time ms", "GB/s", "of bw");

    const size_t cache_elems = (size_t)B * C * Hk * D;
    uint16_t *kc = malloc(cache_elems * 2), *vc = malloc(cache_elems * 2);
    uint16_t *q = malloc((size_t)B * H * D * 2), *out = malloc((size_t)B * H * D * 2);
    uint16_t *kn = malloc((size_t)B * Hk * D * 2), *vn = malloc((size_t)B * Hk * D * 2);
    int32_t *seqlens = malloc(B * 4), *bt = malloc((size_t)B * (C / page) * 4), *perm = malloc((size_t)B * (C / page) * 4);
    if (!kc || !vc || !q || !out || !kn || !vn || !seqlens || !bt || !perm) return 1;
    const int np = B * (C / page);
    for (int i = 0; i < np; i++) perm[i] = i;
    for (int i = np - 1; i > 0; i--) {
        int j = (int)(next_u32() % (uint32_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    memcpy(bt, perm, (size_t)np * 4);

    for (int dtype = KVATTN_F16; dtype <= KVATTN_BF16; dtype++) {
        fill16(kc, cache_elems, dtype);
        fill16(vc, cache_elems, dtype);
        fill16(q, (size_t)B * H * D, dtype);
        fill16(kn, (size_t)B * Hk * D, dtype);
        fill16(vn, (size_t)B * Hk * D, dtype);
        for (int paged = 1; paged >= 0; paged--) {
            kvattn_params p = kvattn_params_default();
            p.dtype = dtype;
            p.batch = B;
            p.num_heads = H;
            p.num_kv_heads = Hk;
            p.head_dim = D;
            p.q = q;
            p.seqlen_q = 1;
            p.q_batch_stride = (int64_t)H * D;
            p.q_row_stride = (int64_t)H * D;
            p.q_head_stride = D;
            p.out = out;
            p.out_batch_stride = p.out_row_stride = (int64_t)H * D;
            p.out_head_stride = D;
            p.k_new = kn;
            p.v_new = vn;
            p.seqlen_knew = 1;
            p.knew_batch_stride = p.knew_row_stride = p.vnew_batch_stride = p.vnew_row_stride = (int64_t)Hk * D;
            p.knew_head_stride = p.vnew_head_stride = D;
            p.k_cache = kc;
            p.v_cache = vc;
            if (paged) {
                p.block_table = bt;
                p.max_pages_per_seq = C / page;
                p.block_table_batch_stride = C / page;
                p.num_pages = np;
                p.page_size = page;
                p.k_batch_stride = p.v_batch_stride = (int64_t)page * Hk * D;
            } else {
                p.cache_batch = B;
                p.cache_capacity = C;
                p.k_batch_stride = p.v_batch_stride = (int64_t)C * Hk * D;
            }
            p.k_row_stride = p.v_row_stride = (int64_t)Hk * D;
            p.k_head_stride = p.v_head_stride = D;
            p.cache_seqlens = seqlens;
            p.causal = 1;
            double best = 1e30;
            for (int rep = 0; rep < 12; rep++) {
                for (int b = 0; b < B; b++) seqlens[b] = C - 1; /* the step appends token C-1, attends to C keys */
                double t0 = now();
                int st = kvattn_forward(&p, KVATTN_BACKEND_CPU, NULL, 0, NULL);
                double t = now() - t0;
                if (st != KVATTN_OK) {
                    printf("error %s: %s\n", kvattn_status_string(st), kvattn_last_error());
                    return 1;
                }
                if (t < best) best = t;
            }
            const double bytes = 2.0 * B * C * Hk * D * 2; /* K and V, 2 bytes per element */
            const double gbs = bytes / best / 1e9;
            char layout[32];
            snprintf(layout, sizeof layout, paged ? "paged (page %d)" : "contiguous", page);
            printf("%-6s %-18s %10.3f %10.1f %9.0f%%\n", dtype == KVATTN_F16 ? "fp16" : "bf16", layout, best * 1e3, gbs,
                   100.0 * gbs / bw);
        }
    }
    print_load("after");
    free(kc); free(vc); free(q); free(out); free(kn); free(vn); free(seqlens); free(bt); free(perm);
    return 0;
}
