/* host_cost.cu — where the host time of one kvattn_forward goes, and what it costs an isolated call on the GPU.
 * A dev measurement (never a test). Build after `make build/libkvattn.a`:
 *   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Iinclude dev/host_cost.cu build/libkvattn.a \
 *        -lgomp -o dev/bin/host_cost
 * Prints, per item, the median host us of one call, and for launches / forwards the isolated GPU us (events
 * around one call with the stream drained first, as bench_cuda's first column) and the back-to-back us per call.
 * Decode problems as bench_cuda's (bf16, H 32, Hk 8, D 128, one query per sequence, no append). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>

#include "kvattn.h"
#include "../bench/bench_kernels.cu" /* bench_read_sum (the read ceiling's kernel), bench_fill_bf16 */

#define CK(call)                                                                                             \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));           \
            exit(2);                                                                                         \
        }                                                                                                    \
    } while (0)

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}
static double med(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Big { char b[560]; }; /* the size of (kvattn_params, kv_attn_args) */
__global__ void k_empty(void) {}
__global__ void k_big(const __grid_constant__ Big p) {
    if (p.b[0] == 7 && threadIdx.x == 1000) printf("x");
}
__global__ void k_big_pdl(const __grid_constant__ Big p) {
    asm volatile("griddepcontrol.launch_dependents;");
    if (p.b[0] == 7 && threadIdx.x == 1000) printf("x");
}
static cudaError_t launch_big(bool pdl, int grid) {
    Big b;
    memset(&b, 0, sizeof b);
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(grid, 1, 1);
    cfg.blockDim = dim3(128, 1, 1);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return pdl ? cudaLaunchKernelEx(&cfg, k_big_pdl, b) : cudaLaunchKernelEx(&cfg, k_big, b);
}

/* median host us per call of fn, and (gpu) isolated GPU us and back-to-back us per call */
template <typename F>
static void measure(const char *name, F fn, bool gpu) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> host, iso;
    for (int i = 0; i < 330; i++) {
        if (gpu) CK(cudaEventRecord(e0, 0));
        const double t0 = now_us();
        fn();
        const double t1 = now_us();
        if (gpu) {
            CK(cudaEventRecord(e1, 0));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            if (i >= 30) iso.push_back(ms * 1e3);
        }
        if (i >= 30) host.push_back(t1 - t0);
    }
    if (!gpu) {
        printf("%-44s host %7.2f us\n", name, med(host));
        return;
    }
    std::vector<double> b2b;
    for (int r = 0; r < 7; r++) {
        CK(cudaDeviceSynchronize());
        CK(cudaEventRecord(e0, 0));
        for (int i = 0; i < 30; i++) fn();
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        b2b.push_back(ms * 1e3 / 30);
    }
    printf("%-44s host %7.2f us   isolated %7.2f us   back-to-back %7.2f us\n", name, med(host), med(iso), med(b2b));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}

struct Prob {
    kvattn_params p;
    void *ws;
    size_t ws_bytes;
};
static Prob make_decode(int B, int L, int page) {
    const int H = 32, HK = 8, D = 128;
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_BF16;
    p.batch = B;
    p.num_heads = H;
    p.num_kv_heads = HK;
    p.head_dim = D;
    p.causal = 1;
    p.total_q = B;
    p.q_row_stride = p.out_row_stride = H * D;
    p.q_head_stride = p.out_head_stride = D;
    p.lse_head_stride = B;
    p.lse_row_stride = 1;
    void *q, *out, *lse, *cu, *sl;
    CK(cudaMalloc(&q, (size_t)B * H * D * 2));
    CK(cudaMalloc(&out, (size_t)B * H * D * 2));
    CK(cudaMalloc(&lse, (size_t)B * H * 4));
    bench_fill_bf16<<<264, 256>>>((uint16_t *)q, (size_t)B * H * D, 1);
    std::vector<int32_t> cu_h(B + 1), sl_h(B, L);
    for (int b = 0; b <= B; b++) cu_h[b] = b;
    CK(cudaMalloc(&cu, (B + 1) * 4));
    CK(cudaMalloc(&sl, B * 4));
    CK(cudaMemcpy(cu, cu_h.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(sl, sl_h.data(), B * 4, cudaMemcpyHostToDevice));
    p.q = q;
    p.out = out;
    p.softmax_lse = (float *)lse;
    p.cu_seqlens_q = (const int32_t *)cu;
    p.cache_seqlens = (const int32_t *)sl;
    size_t elems;
    if (page) {
        const int mp = (L + page - 1) / page;
        std::vector<int32_t> bt((size_t)B * mp);
        for (size_t i = 0; i < bt.size(); i++) bt[i] = (int32_t)((i * 7919) % bt.size()); /* a permutation */
        void *bt_d;
        CK(cudaMalloc(&bt_d, bt.size() * 4));
        CK(cudaMemcpy(bt_d, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice));
        p.block_table = (const int32_t *)bt_d;
        p.block_table_batch_stride = mp;
        p.max_pages_per_seq = mp;
        p.num_pages = B * mp;
        p.page_size = page;
        p.k_batch_stride = p.v_batch_stride = (int64_t)page * HK * D;
        elems = (size_t)B * mp * page * HK * D;
    } else {
        p.cache_batch = B;
        p.cache_capacity = L;
        p.k_batch_stride = p.v_batch_stride = (int64_t)L * HK * D;
        elems = (size_t)B * L * HK * D;
    }
    p.k_row_stride = p.v_row_stride = HK * D;
    p.k_head_stride = p.v_head_stride = D;
    void *kc, *vc;
    CK(cudaMalloc(&kc, elems * 2));
    CK(cudaMalloc(&vc, elems * 2));
    bench_fill_bf16<<<1056, 256>>>((uint16_t *)kc, elems, 2);
    bench_fill_bf16<<<1056, 256>>>((uint16_t *)vc, elems, 3);
    p.k_cache = kc;
    p.v_cache = vc;
    Prob P;
    P.p = p;
    if (kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &P.ws_bytes) != KVATTN_OK) {
        fprintf(stderr, "workspace_size: %s\n", kvattn_last_error());
        exit(2);
    }
    CK(cudaMalloc(&P.ws, P.ws_bytes));
    CK(cudaDeviceSynchronize());
    return P;
}

int main(void) {
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    measure("cudaGetDevice x10", [] { int d; for (int i = 0; i < 10; i++) cudaGetDevice(&d); }, false);
    measure("cudaGetLastError x10", [] { for (int i = 0; i < 10; i++) (void)cudaGetLastError(); }, false);
    measure("empty <<<1,32>>>", [] { k_empty<<<1, 32>>>(); }, true);
    measure("560-byte param, 264 blocks", [&] { CK(launch_big(false, 2 * sms)); }, true);
    measure("560-byte param, 264 blocks, PDL attr", [&] { CK(launch_big(true, 2 * sms)); }, true);
    measure("2 x 560-byte (1 + 264 blocks), 2nd PDL", [&] { CK(launch_big(false, 1)); CK(launch_big(true, 2 * sms)); },
            true);
    measure("3 x 560-byte (1 + 264 + 132), PDL", [&] {
        CK(launch_big(false, 1)); CK(launch_big(true, 2 * sms)); CK(launch_big(true, sms)); }, true);
    { /* a plain read of exactly a decode shape's K + V bytes (4 copies rotated, each > the 60 MB L2) */
        unsigned *part;
        CK(cudaMalloc(&part, (size_t)sms * 8 * 4));
        struct { const char *name; size_t bytes; } rd[] = {{"1x32768", (size_t)134217728},
                                                          {"8x8192", (size_t)268435456},
                                                          {"64x4096", (size_t)1073741824}};
        for (auto &r : rd) {
            void *buf[4];
            for (int c = 0; c < 4; c++) {
                CK(cudaMalloc(&buf[c], r.bytes));
                bench_fill_bf16<<<1056, 256>>>((uint16_t *)buf[c], r.bytes / 2, 10 + c);
            }
            CK(cudaDeviceSynchronize());
            int it = 0;
            char name[96];
            snprintf(name, sizeof name, "plain read of %s's K+V (%.0f MB)", r.name, r.bytes / 1e6);
            measure(name, [&] {
                bench_read_sum<<<sms * 8, 512>>>((const uint4 *)buf[it++ % 4], r.bytes / 16, part);
            }, true);
            for (int c = 0; c < 4; c++) cudaFree(buf[c]);
        }
        cudaFree(part);
    }
    struct { int B, L, page; } shapes[] = {{8, 8192, 0}, {8, 8192, 16}, {1, 32768, 0}, {64, 4096, 16},
                                           {128, 2048, 16}};
    for (auto &s : shapes) {
        Prob P = make_decode(s.B, s.L, s.page);
        char name[96];
        snprintf(name, sizeof name, "%dx%d %s: kvattn_validate", s.B, s.L, s.page ? "p16" : "contig");
        measure(name, [&] { (void)kvattn_validate(&P.p, KVATTN_BACKEND_CUDA); }, false);
        snprintf(name, sizeof name, "%dx%d %s: kvattn_workspace_size", s.B, s.L, s.page ? "p16" : "contig");
        measure(name, [&] { size_t n; (void)kvattn_workspace_size(&P.p, KVATTN_BACKEND_CUDA, &n); }, false);
        snprintf(name, sizeof name, "%dx%d %s: kvattn_forward", s.B, s.L, s.page ? "p16" : "contig");
        measure(name, [&] {
            if (kvattn_forward(&P.p, KVATTN_BACKEND_CUDA, P.ws, P.ws_bytes, NULL) != KVATTN_OK) {
                fprintf(stderr, "forward: %s\n", kvattn_last_error());
                exit(2);
            }
        }, true);
        /* the same step in fixed mode (seqlen_q = 1, no cu_seqlens_q): decode-only on the host's knowledge */
        kvattn_params f = P.p;
        f.cu_seqlens_q = NULL;
        f.seqlen_q = 1;
        f.total_q = 0;
        f.q_batch_stride = f.out_batch_stride = (int64_t)f.num_heads * f.head_dim;
        f.lse_batch_stride = f.num_heads;
        f.lse_head_stride = 1;
        f.lse_row_stride = 1;
        size_t fws_bytes = 0;
        if (kvattn_workspace_size(&f, KVATTN_BACKEND_CUDA, &fws_bytes) != KVATTN_OK) {
            fprintf(stderr, "workspace_size (fixed): %s\n", kvattn_last_error());
            exit(2);
        }
        void *fws;
        CK(cudaMalloc(&fws, fws_bytes));
        snprintf(name, sizeof name, "%dx%d %s: kvattn_forward, fixed mode", s.B, s.L, s.page ? "p16" : "contig");
        measure(name, [&] {
            if (kvattn_forward(&f, KVATTN_BACKEND_CUDA, fws, fws_bytes, NULL) != KVATTN_OK) {
                fprintf(stderr, "forward (fixed): %s\n", kvattn_last_error());
                exit(2);
            }
        }, true);
    }
    return 0;
}
