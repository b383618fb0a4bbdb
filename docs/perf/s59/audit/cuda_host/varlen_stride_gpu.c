/* GPU repro (needs an sm_90 device; compiles here): in varlen mode q_batch_stride / out_batch_stride are documented
 * as unused (kvattn.h: "varlen: unused, 0") and validation ignores them, but attn_fast_layout_ok (attn.cu:172-178)
 * ORs them into the 16-byte / even-stride tests. An odd value (here 1) silently routes the whole call to the scalar
 * fallback kv_attn_v0_kernel (one warp per (row, head), no split, no fused check: check + finalize + v0 kernels).
 * Expected on an H200: same call, (a) out bits differ between the two runs (v0's fp32 scalar path vs the mma
 * decode kernel with its split merge), (b) the odd-stride call is much slower (tens of times at 8 x 8192).
 * Build: gcc -std=c11 -O1 -I../include -I/usr/local/cuda/include varlen_stride_gpu.c -o varlen_stride_gpu \
 *        -L../build-audit -lkvattn -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,$PWD/../build-audit */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime.h>
#include "kvattn.h"
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)
enum { B = 8, H = 32, HK = 8, D = 128, C = 8192 };
static void *dev_rand(size_t n2) { /* n2 bf16 elements, small random values */
    unsigned short *h = malloc(n2 * 2);
    for (size_t i = 0; i < n2; i++) h[i] = (unsigned short)(0x3c00 + (rand() & 0x3ff)) ^ (rand() & 1 ? 0x8000 : 0);
    void *d; cudaMalloc(&d, n2 * 2); cudaMemcpy(d, h, n2 * 2, cudaMemcpyHostToDevice); free(h); return d;
}
static int run(kvattn_params *p, void *ws, size_t wsb, cudaStream_t s, float *ms, int reps) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    int st = kvattn_forward(p, KVATTN_BACKEND_CUDA, ws, wsb, s); /* warm-up */
    if (st) { printf("forward: %s %s\n", kvattn_status_string(st), kvattn_last_error()); return st; }
    cudaEventRecord(a, s);
    for (int i = 0; i < reps; i++) kvattn_forward(p, KVATTN_BACKEND_CUDA, ws, wsb, s);
    cudaEventRecord(b, s); cudaEventSynchronize(b); cudaEventElapsedTime(ms, a, b); *ms /= reps;
    return 0;
}
int main(void) {
    int32_t cu[B + 1], sl[B];
    for (int b = 0; b <= B; b++) cu[b] = b;
    for (int b = 0; b < B; b++) sl[b] = C;
    void *q = dev_rand((size_t)B * H * D), *kc = dev_rand((size_t)B * C * HK * D), *vc = dev_rand((size_t)B * C * HK * D);
    void *out1, *out2, *dcu, *dsl, *ws;
    CK(cudaMalloc(&out1, (size_t)B * H * D * 2)); CK(cudaMalloc(&out2, (size_t)B * H * D * 2));
    CK(cudaMalloc(&dcu, sizeof cu)); CK(cudaMalloc(&dsl, sizeof sl));
    CK(cudaMemcpy(dcu, cu, sizeof cu, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dsl, sl, sizeof sl, cudaMemcpyHostToDevice));
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_BF16; p.batch = B; p.num_heads = H; p.num_kv_heads = HK; p.head_dim = D;
    p.q = q; p.cu_seqlens_q = dcu; p.total_q = B; p.k_cache = kc; p.v_cache = vc;
    p.cache_batch = B; p.cache_capacity = C; p.cache_seqlens = dsl; p.causal = 1; p.out = out1;
    size_t wsb = 0;
    if (kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &wsb)) { printf("%s\n", kvattn_last_error()); return 1; }
    CK(cudaMalloc(&ws, wsb));
    cudaStream_t s; cudaStreamCreate(&s);
    float t1 = 0, t2 = 0;
    p.q_batch_stride = 0; p.out_batch_stride = 0; p.out = out1;             /* documented packed value */
    if (run(&p, ws, wsb, s, &t1, 20)) return 1;
    p.q_batch_stride = 1; p.out_batch_stride = 1; p.out = out2;             /* "unused" in varlen mode */
    if (run(&p, ws, wsb, s, &t2, 20)) return 1;
    CK(cudaStreamSynchronize(s));
    size_t n = (size_t)B * H * D;
    unsigned short *h1 = malloc(n * 2), *h2 = malloc(n * 2);
    CK(cudaMemcpy(h1, out1, n * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(h2, out2, n * 2, cudaMemcpyDeviceToHost));
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += h1[i] != h2[i];
    printf("batch strides 0: %.1f us/call; batch strides 1 (unused): %.1f us/call (x%.1f); %zu of %zu out elements "
           "differ bitwise\n", t1 * 1e3, t2 * 1e3, t2 / t1, diff, n);
    return 0;
}
