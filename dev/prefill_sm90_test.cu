/* prefill_sm90_test.cu — kernel experiments for src/cuda/attn_prefill_sm90.cuh (llm.c style): a unit test of
 * the wgmma descriptors and fragment layouts against a CPU product, then random prefill problems (items built
 * on the host the way the scheduler builds them) checked against a float64 CPU reference of SPEC.md
 * (poisoned outputs, sentinels, split pieces against the partial softmax of their key range), then timings
 * of causal prefill (three kernel variants x two item orders). B sequences, H query heads, Hk KV heads, D head
 * dim, G = H / Hk.
 *   ./prefill_sm90_test unit | validate [variant] | quick [variant] | bench      (see dev/run_prefill_sm90.sh)
 * Build: nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Iinclude -Isrc --expt-relaxed-constexpr \
 *          -Xcompiler -fopenmp dev/prefill_sm90_test.cu -o dev/bin/prefill_sm90_test -lgomp */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "../src/cuda/attn_kernels.cuh"
#include "../src/cuda/attn_prefill_sm90.cuh"

extern "C" int kv_set_error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kv_set_error(%d): ", status);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return status;
}

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "CUDA %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_));         \
            exit(2);                                                                                           \
        }                                                                                                      \
    } while (0)

static uint64_t rng_state = 0x1234567ull;
static uint32_t rnd() {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}
static float frand() { return (rnd() & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f; }

static float h2f(uint16_t x, int dtype) {
    if (dtype == KVATTN_F16) { __half h; memcpy(&h, &x, 2); return __half2float(h); }
    __nv_bfloat16 h; memcpy(&h, &x, 2); return __bfloat162float(h);
}
static uint16_t f2h(float x, int dtype) {
    uint16_t r;
    if (dtype == KVATTN_F16) { __half h = __float2half_rn(x); memcpy(&r, &h, 2); }
    else { __nv_bfloat16 h = __float2bfloat16_rn(x); memcpy(&r, &h, 2); }
    return r;
}
static int g_num_sms = 132;

/* ---- 1. unit test: one block, two warpgroups, the exact descriptor arithmetic of the kernel ------------
 * C1 = A B^T (A: 128 x 128 Q-like tile, B: 128 x 128 K-like tile, both K-major swizzled),
 * C2 = P V   (P: 128 x 128 from registers, V: 128 keys x 128 channels N-major swizzled); v_swap = 1 exchanges
 * the V descriptor's two byte offsets (the other reading of the PTX text: it must fail). Inputs row-major. */
template <typename T>
__global__ void __launch_bounds__(256) unit_wgmma(const T *A, const T *Bm, const T *P, const T *V, float *C1, float *C2,
                                                  int v_swap) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(1024) unsigned char sm[];
    const uint32_t base = (kv_smem_u32(sm) + 1023u) & ~1023u;
    const uint32_t sA = base, sB = base + 32768, sV = base + 65536;
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, gq = lane >> 2, tq = lane & 3;
    for (int e = tid; e < 128 * 16; e += 256) {
        const int r = e / 16, ch = e % 16;
        kv_copy16_row(sA + kv_sw128<128>(r, ch), (uint64_t)(A + r * 128), ch * 16);
        kv_copy16_row(sB + kv_sw128<128>(r, ch), (uint64_t)(Bm + r * 128), ch * 16);
        kv_copy16_row(sV + kv_sw128<128>(r, ch), (uint64_t)(V + r * 128), ch * 16);
    }
    kv_cp_async_commit();
    kv_cp_async_wait<0>();
    kv_fence_proxy_async();
    __syncthreads();
    float sc[64], o[64];
    const uint64_t dq0 = kv_sm90_desc(sA + wg * 64 * 128, 16, 1024), dk0 = kv_sm90_desc(sB, 16, 1024);
    kv_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 8; kk++) {
        const uint32_t qoff = (kk >> 2) * (128 * 128) + (kk & 3) * 32, koff = (kk >> 2) * (128 * 128) + (kk & 3) * 32;
        kv_wgmma<T>::ss128(sc, dq0 + (qoff >> 4), dk0 + (koff >> 4), kk > 0);
    }
    kv_wgmma_commit();
    kv_wgmma_wait<0>();
    kv_fence_regs<64>(sc);
    const int r0 = wg * 64 + warp * 16 + gq;
    for (int k = 0; k < 64; k++) {
        const int r = r0 + ((k >> 1) & 1) * 8, c = (k >> 2) * 8 + tq * 2 + (k & 1);
        C1[r * 128 + c] = sc[k];
    }
    uint32_t pf[8][4];
    for (int kk = 0; kk < 8; kk++) {
        for (int e = 0; e < 4; e++) {
            const int r = r0 + (e & 1) * 8, c = kk * 16 + tq * 2 + (e >> 1) * 8;
            T two[2] = {P[r * 128 + c], P[r * 128 + c + 1]};
            pf[kk][e] = *(uint32_t *)two;
        }
    }
    for (int k = 0; k < 64; k++) o[k] = 0.0f;
    const uint64_t dv0 = v_swap ? kv_sm90_desc(sV, 1024, 128 * 128) : kv_sm90_desc(sV, 128 * 128, 1024);
    kv_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 8; kk++) kv_wgmma<T>::rs128(o, pf[kk], dv0 + ((kk * 2048) >> 4), 1);
    kv_wgmma_commit();
    kv_wgmma_wait<0>();
    kv_fence_regs<64>(o);
    for (int k = 0; k < 64; k++) {
        const int r = r0 + ((k >> 1) & 1) * 8, c = (k >> 2) * 8 + tq * 2 + (k & 1);
        C2[r * 128 + c] = o[k];
    }
#endif
}

template <typename T>
static int unit_test(int dtype) {
    const int n = 128 * 128;
    std::vector<uint16_t> A(n), Bm(n), P(n), V(n);
    for (int i = 0; i < n; i++) {
        A[i] = f2h(frand(), dtype); Bm[i] = f2h(frand(), dtype);
        P[i] = f2h(fabsf(frand()), dtype); V[i] = f2h(frand(), dtype);
    }
    T *dA, *dB, *dP, *dV;
    float *dC1, *dC2;
    CK(cudaMalloc(&dA, n * 2)); CK(cudaMalloc(&dB, n * 2)); CK(cudaMalloc(&dP, n * 2)); CK(cudaMalloc(&dV, n * 2));
    CK(cudaMalloc(&dC1, n * 4)); CK(cudaMalloc(&dC2, n * 4));
    CK(cudaMemcpy(dA, A.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, Bm.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dP, P.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dV, V.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaFuncSetAttribute(unit_wgmma<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * 32768 + 1024));
    int ok_all = 1;
    for (int swap = 0; swap < 2; swap++) {
        CK(cudaMemset(dC1, 0xff, n * 4)); CK(cudaMemset(dC2, 0xff, n * 4));
        unit_wgmma<T><<<1, 256, 3 * 32768 + 1024>>>(dA, dB, dP, dV, dC1, dC2, swap);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<float> C1(n), C2(n);
        CK(cudaMemcpy(C1.data(), dC1, n * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(C2.data(), dC2, n * 4, cudaMemcpyDeviceToHost));
        double e1 = 0, e2 = 0;
        for (int r = 0; r < 128; r++)
            for (int c = 0; c < 128; c++) {
                double s1 = 0, s2 = 0;
                for (int k = 0; k < 128; k++) {
                    s1 += (double)h2f(A[r * 128 + k], dtype) * h2f(Bm[c * 128 + k], dtype);
                    s2 += (double)h2f(P[r * 128 + k], dtype) * h2f(V[k * 128 + c], dtype);
                }
                double d1 = fabs(C1[r * 128 + c] - s1), d2 = fabs(C2[r * 128 + c] - s2);
                if (!(d1 <= e1)) e1 = isnan(d1) ? INFINITY : std::max(e1, d1);
                if (!(d2 <= e2)) e2 = isnan(d2) ? INFINITY : std::max(e2, d2);
            }
        const int ok1 = e1 < 1e-3, ok2 = e2 < 1e-3;
        printf("unit %s: S=QK^T (K-major) max err %.3g %s | O=PV (N-major, v_swap=%d) max err %.3g %s\n",
               dtype == KVATTN_F16 ? "fp16" : "bf16", e1, ok1 ? "ok" : "FAIL", swap, e2, ok2 ? "ok" : "FAIL");
        if (!ok1 || (swap == 0 && !ok2)) ok_all = 0;
    }
    cudaFree(dA); cudaFree(dB); cudaFree(dP); cudaFree(dV); cudaFree(dC1); cudaFree(dC2);
    return ok_all;
}

/* ---- 2. problems ---------------------------------------------------------------------------------------- */
struct Problem {
    int dtype = KVATTN_BF16, B = 0, H = 8, Hk = 2, D = 128, page = 16; /* page 0 = contiguous */
    std::vector<int> nq, nnew, S, L;
    int causal = 0, wl = -1, wr = -1, rotary = 0, rot_il = 1, rot_R = 0;
    float softcap = 0.0f;
    int alibi = 0, leftpad = 0, lse = 1, batch_idx = 0;
    int split = 0; /* every tile split into 1..3 pieces at random key boundaries (part >= 0) */
    int order = 0; /* item order: 0 = longest first; 1 = by (sequence, kv head), longest first within */
    std::vector<uint16_t> q, kc, vc;
    std::vector<float> cosT, sinT, slopes;
    std::vector<int> cu_q, cu_new, bt, cbi;
    int total_q = 0, max_pages = 0, num_pages = 0, C = 0, max_pos = 0, cache_batch = 0;
    std::vector<kv_item> items;
    int part_rows = 0;
    kvattn_params p;
    void *dq = 0, *dk = 0, *dv = 0, *dout = 0;
    float *dlse = 0, *dcos = 0, *dsin = 0, *dslopes = 0, *dpart_o = 0;
    float2 *dpart_ml = 0;
    int *dcu_q = 0, *dcu_new = 0, *dbt = 0, *dS = 0, *dL = 0, *dcbi = 0, *dcount = 0;
    kv_item *ditems = 0;
};

static Problem make(int B, int H, int Hk, int D, int page, int dtype) {
    Problem P;
    P.B = B; P.H = H; P.Hk = Hk; P.D = D; P.page = page; P.dtype = dtype;
    P.nq.resize(B); P.nnew.resize(B); P.S.resize(B); P.L.assign(B, 0);
    return P;
}

/* Items as the scheduler makes them: every (sequence, 128-row tile, kv head), key range = union of the rows'
 * visible keys; split problems cut each range into pieces. Long items first. */
static void make_items(Problem &P) {
    const int G = P.H / P.Hk;
    P.items.clear();
    P.part_rows = 0;
    for (int b = 0; b < P.B; b++) {
        const int rows = P.nq[b] * G;
        const int s_k = P.S[b] + P.nnew[b] - P.L[b];
        for (int row0 = 0; row0 < rows; row0 += KV_SM90_ROWS) {
            const int nrows = std::min(KV_SM90_ROWS, rows - row0);
            const kv_range a = kv_visible_keys(row0 / G, P.nq[b], s_k, P.causal, P.wl, P.wr);
            const kv_range z = kv_visible_keys((row0 + nrows - 1) / G, P.nq[b], s_k, P.causal, P.wl, P.wr);
            const int lo = a.lo, hi = z.hi > a.lo ? z.hi : a.lo;
            for (int kh = 0; kh < P.Hk; kh++) {
                kv_item it;
                it.b = b; it.kv_head = kh; it.row0 = row0; it.nrows = nrows; it.comb = -1; /* merged by the harness, not the kernel */
                if (!P.split) {
                    it.klo = lo; it.khi = hi; it.part = -1;
                    P.items.push_back(it);
                    continue;
                }
                const int npieces = 1 + rnd() % 3;
                std::vector<int> cut;
                cut.push_back(lo);
                for (int k = 1; k < npieces; k++) cut.push_back(lo + (int)(rnd() % (uint32_t)(hi - lo + 1)));
                cut.push_back(hi);
                std::sort(cut.begin(), cut.end());
                for (int k = 0; k < npieces; k++) {
                    it.klo = cut[k]; it.khi = cut[k + 1]; it.part = P.part_rows;
                    P.part_rows += nrows;
                    P.items.push_back(it);
                }
            }
        }
    }
    if (P.order == 0)
        std::stable_sort(P.items.begin(), P.items.end(),
                         [](const kv_item &x, const kv_item &y) { return x.khi - x.klo > y.khi - y.klo; });
    else
        std::stable_sort(P.items.begin(), P.items.end(), [](const kv_item &x, const kv_item &y) {
            if (x.b != y.b) return x.b < y.b;
            if (x.kv_head != y.kv_head) return x.kv_head < y.kv_head;
            return x.khi - x.klo > y.khi - y.klo;
        });
}

static void build(Problem &P, bool fill_random = true) {
    const int B = P.B, H = P.H, Hk = P.Hk, D = P.D;
    P.cu_q.assign(B + 1, 0);
    P.cu_new.assign(B + 1, 0);
    int maxlen = 1;
    for (int b = 0; b < B; b++) {
        P.cu_q[b + 1] = P.cu_q[b] + P.nq[b];
        P.cu_new[b + 1] = P.cu_new[b] + P.nnew[b];
        maxlen = std::max(maxlen, P.S[b] + P.nnew[b]);
    }
    P.total_q = P.cu_q[B];
    if (P.page > 0) {
        P.max_pages = (maxlen + P.page - 1) / P.page + 1;
        P.C = P.max_pages * P.page;
        int used = 0;
        P.bt.assign((size_t)B * P.max_pages, -1);
        for (int b = 0; b < B; b++) {
            int need = (P.S[b] + P.nnew[b] + P.page - 1) / P.page;
            for (int k = 0; k < need; k++) P.bt[(size_t)b * P.max_pages + k] = used++;
        }
        P.num_pages = used + 3;
        std::vector<int> sh(P.num_pages);
        for (int i = 0; i < P.num_pages; i++) sh[i] = i;
        for (int i = P.num_pages - 1; i > 0; i--) std::swap(sh[i], sh[rnd() % (i + 1)]);
        for (auto &x : P.bt) if (x >= 0) x = sh[x];
    } else {
        P.C = maxlen + 5;
        P.cache_batch = B + (P.batch_idx ? 2 : 0);
        if (P.batch_idx) {
            std::vector<int> rows(P.cache_batch);
            for (int i = 0; i < P.cache_batch; i++) rows[i] = i;
            for (int i = P.cache_batch - 1; i > 0; i--) std::swap(rows[i], rows[rnd() % (i + 1)]);
            P.cbi.assign(rows.begin(), rows.begin() + B);
        }
    }
    const size_t cache_elems = P.page > 0 ? (size_t)P.num_pages * P.page * Hk * D : (size_t)P.cache_batch * P.C * Hk * D;
    P.q.resize((size_t)P.total_q * H * D);
    P.kc.resize(cache_elems);
    P.vc.resize(cache_elems);
    if (fill_random) {
        for (auto &x : P.q) x = f2h(frand(), P.dtype);
        for (auto &x : P.kc) x = f2h(frand(), P.dtype);
        for (auto &x : P.vc) x = f2h(frand(), P.dtype);
    } else { /* big benchmark caches: a cheap pattern, never zeros */
        for (size_t i = 0; i < P.q.size(); i++) P.q[i] = f2h(((i * 2246822519u) >> 9 & 1023) / 1024.0f - 0.5f, P.dtype);
        for (size_t i = 0; i < cache_elems; i++) {
            uint16_t v = f2h(((i * 2654435761u) >> 7 & 1023) / 1024.0f - 0.5f, P.dtype);
            P.kc[i] = v;
            P.vc[i] = v ^ 0x0001;
        }
    }
    if (P.rotary) {
        P.max_pos = maxlen + 3;
        P.cosT.resize((size_t)P.max_pos * P.rot_R / 2);
        P.sinT.resize(P.cosT.size());
        for (int pos = 0; pos < P.max_pos; pos++)
            for (int k = 0; k < P.rot_R / 2; k++) {
                double th = pos * pow(10000.0, -2.0 * k / P.rot_R);
                P.cosT[(size_t)pos * P.rot_R / 2 + k] = (float)cos(th);
                P.sinT[(size_t)pos * P.rot_R / 2 + k] = (float)sin(th);
            }
    }
    if (P.alibi) {
        P.slopes.resize((size_t)B * H);
        for (auto &x : P.slopes) x = 0.01f + 0.2f * fabsf(frand());
    }
    if (!P.leftpad) P.L.assign(B, 0);
    make_items(P);

    CK(cudaMalloc(&P.dq, P.q.size() * 2 + 16));
    CK(cudaMalloc(&P.dk, cache_elems * 2 + 16));
    CK(cudaMalloc(&P.dv, cache_elems * 2 + 16));
    const size_t out_elems = (size_t)P.total_q * H * D;
    CK(cudaMalloc(&P.dout, out_elems * 2 + 4096)); /* 1024 sentinel bytes each side */
    CK(cudaMalloc(&P.dlse, ((size_t)P.total_q * H + 512) * 4));
    CK(cudaMalloc(&P.dpart_o, ((size_t)P.part_rows + 1) * 256 * 4));
    CK(cudaMalloc(&P.dpart_ml, ((size_t)P.part_rows + 1) * 8));
    CK(cudaMemcpy(P.dq, P.q.data(), P.q.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dk, P.kc.data(), cache_elems * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dv, P.vc.data(), cache_elems * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&P.dcu_q, (B + 1) * 4));
    CK(cudaMalloc(&P.dcu_new, (B + 1) * 4));
    CK(cudaMalloc(&P.dS, B * 4 + 4));
    CK(cudaMalloc(&P.dL, B * 4 + 4));
    CK(cudaMalloc(&P.dcount, 8));
    CK(cudaMalloc(&P.ditems, (P.items.size() + 1) * sizeof(kv_item)));
    CK(cudaMemcpy(P.ditems, P.items.data(), P.items.size() * sizeof(kv_item), cudaMemcpyHostToDevice));
    const int cnt[2] = {(int)P.items.size(), 0};
    CK(cudaMemcpy(P.dcount, cnt, 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dcu_q, P.cu_q.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dcu_new, P.cu_new.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dS, P.S.data(), B * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dL, P.L.data(), B * 4, cudaMemcpyHostToDevice));
    if (P.page > 0) {
        CK(cudaMalloc(&P.dbt, P.bt.size() * 4));
        CK(cudaMemcpy(P.dbt, P.bt.data(), P.bt.size() * 4, cudaMemcpyHostToDevice));
    }
    if (P.batch_idx) {
        CK(cudaMalloc(&P.dcbi, B * 4));
        CK(cudaMemcpy(P.dcbi, P.cbi.data(), B * 4, cudaMemcpyHostToDevice));
    }
    if (P.rotary) {
        CK(cudaMalloc(&P.dcos, P.cosT.size() * 4));
        CK(cudaMalloc(&P.dsin, P.sinT.size() * 4));
        CK(cudaMemcpy(P.dcos, P.cosT.data(), P.cosT.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(P.dsin, P.sinT.data(), P.sinT.size() * 4, cudaMemcpyHostToDevice));
    }
    if (P.alibi) {
        CK(cudaMalloc(&P.dslopes, P.slopes.size() * 4));
        CK(cudaMemcpy(P.dslopes, P.slopes.data(), P.slopes.size() * 4, cudaMemcpyHostToDevice));
    }

    kvattn_params &p = P.p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.dtype = P.dtype;
    p.batch = B;
    p.num_heads = H;
    p.num_kv_heads = Hk;
    p.head_dim = D;
    p.q = P.dq;
    p.cu_seqlens_q = P.dcu_q;
    p.total_q = P.total_q;
    p.q_row_stride = (int64_t)H * D;
    p.q_head_stride = D;
    p.k_new = P.dq; /* only the counts matter here: the new tokens are already in the cache */
    p.v_new = P.dq;
    p.cu_seqlens_knew = P.dcu_new;
    p.k_cache = P.dk;
    p.v_cache = P.dv;
    p.k_head_stride = p.v_head_stride = D;
    p.k_row_stride = p.v_row_stride = (int64_t)Hk * D;
    if (P.page > 0) {
        p.k_batch_stride = p.v_batch_stride = (int64_t)P.page * Hk * D;
        p.block_table = P.dbt;
        p.block_table_batch_stride = P.max_pages;
        p.max_pages_per_seq = P.max_pages;
        p.num_pages = P.num_pages;
        p.page_size = P.page;
    } else {
        p.k_batch_stride = p.v_batch_stride = (int64_t)P.C * Hk * D;
        p.cache_batch = P.cache_batch;
        p.cache_capacity = P.C;
        p.cache_batch_idx = P.dcbi;
    }
    p.cache_seqlens = P.dS;
    p.cache_leftpad = P.leftpad ? P.dL : NULL;
    if (P.rotary) {
        p.rotary_cos = P.dcos;
        p.rotary_sin = P.dsin;
        p.rotary_dtype = KVATTN_F32;
        p.rotary_dim = P.rot_R;
        p.rotary_max_pos = P.max_pos;
        p.rotary_interleaved = P.rot_il;
    }
    p.alibi_slopes = P.dslopes;
    p.alibi_batch_stride = P.alibi ? H : 0;
    p.softcap = P.softcap;
    p.causal = P.causal;
    p.window_left = P.wl;
    p.window_right = P.wr;
    p.num_splits = 1;
    p.out = (char *)P.dout + 1024;
    p.out_row_stride = (int64_t)H * D;
    p.out_head_stride = D;
    p.softmax_lse = P.lse ? P.dlse + 256 : NULL;
    p.lse_head_stride = P.total_q;
    p.lse_row_stride = 1;
}

static void free_problem(Problem &P) {
    void *ptrs[] = {P.dq, P.dk, P.dv, P.dout, P.dlse, P.dcos, P.dsin, P.dslopes, P.dpart_o, P.dpart_ml,
                    P.dcu_q, P.dcu_new, P.dbt, P.dS, P.dL, P.dcbi, P.dcount, P.ditems};
    for (void *x : ptrs) if (x) cudaFree(x);
}

static int dp_of(int D) { return D <= 64 ? 64 : D <= 128 ? 128 : 256; }

/* kernel variant for DP 64 / 128 (keys per tile, K stages): 0 = the default (BN 64, KS 4), 1 = BN 64 KS 5,
 * 2 = BN 128 KS 2 */
static int g_variant = 0;
static const char *variant_name[3] = {"BN64 KS4", "BN64 KS5", "BN128 KS2"};

template <typename T, int DP, int BN, int KS> static void launch_v(Problem &P) {
    typedef kv_sm90_cfg<T, DP, BN, KS> CF;
    static bool attr = false;
    if (!attr) {
        CK(cudaFuncSetAttribute(kv_prefill_sm90_kernel<T, DP, BN, KS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                CF::SMEM_BYTES));
        attr = true;
    }
    kv_attn_args a;
    memset(&a, 0, sizeof a);
    a.part_o = P.dpart_o;
    a.part_ml = P.dpart_ml;
    a.dp = DP;
    kv_item_list list;
    list.items = P.ditems;
    list.count = P.dcount;
    list.counter = P.dcount + 1;
    CK(cudaMemsetAsync(P.dcount + 1, 0, 4));
    kv_prefill_sm90_kernel<T, DP, BN, KS><<<g_num_sms, CF::THREADS, CF::SMEM_BYTES>>>(P.p, a, list);
}
template <typename T, int DP> static void launch_t(Problem &P) {
    typedef kv_sm90_cfg<T, DP> CF;
    if constexpr (DP <= 128) {
        if (g_variant == 1) { launch_v<T, DP, 64, 5>(P); return; }
        if (g_variant == 2) { launch_v<T, DP, 128, 2>(P); return; }
    }
    launch_v<T, DP, CF::BN, CF::KS>(P);
}
static void launch(Problem &P) {
    const int dp = dp_of(P.D);
    if (P.dtype == KVATTN_F16) {
        if (dp == 64) launch_t<__half, 64>(P); else if (dp == 128) launch_t<__half, 128>(P); else launch_t<__half, 256>(P);
    } else {
        if (dp == 64) launch_t<__nv_bfloat16, 64>(P); else if (dp == 128) launch_t<__nv_bfloat16, 128>(P);
        else launch_t<__nv_bfloat16, 256>(P);
    }
}

/* float64 reference of SPEC.md "Attend" for query i of sequence b, head h, keys restricted to [klo, khi):
 * out[D] (normalized) and the lse. */
static double ref_row(const Problem &P, int b, int i, int h, int klo, int khi, double *out) {
    const int H = P.H, Hk = P.Hk, D = P.D, G = H / Hk, kvh = h / G;
    const int nq = P.nq[b], S = P.S[b], nn = P.nnew[b], L = P.L[b];
    const int s_k = S + nn - L;
    kv_range vr = kv_visible_keys(i, nq, s_k, P.causal, P.wl, P.wr);
    const int lo = std::max(vr.lo, klo), hi = std::min(vr.hi, khi);
    const int qkey = i + s_k - nq, pos = S + nn - nq + i;
    const double scale = 1.0 / sqrt((double)D);
    const uint16_t *qr = &P.q[((size_t)(P.cu_q[b] + i) * H + h) * D];
    std::vector<double> qv(D);
    for (int c = 0; c < D; c++) {
        double x = h2f(qr[c], P.dtype);
        if (P.rotary && c < P.rot_R) {
            int pr = kv_rope_pair(c, P.rot_R, P.rot_il);
            double y = h2f(qr[kv_rope_partner(c, P.rot_R, P.rot_il)], P.dtype);
            double cs = P.cosT[(size_t)pos * P.rot_R / 2 + pr], sn = P.sinT[(size_t)pos * P.rot_R / 2 + pr];
            x = x * cs - y * sn * kv_rope_sign(c, P.rot_R, P.rot_il);
        }
        qv[c] = x;
    }
    std::vector<double> sc;
    std::vector<size_t> vo;
    for (int j = lo; j < hi; j++) {
        const int p = L + j;
        size_t base;
        if (P.page > 0) base = ((size_t)P.bt[(size_t)b * P.max_pages + p / P.page] * P.page + p % P.page);
        else base = (size_t)(P.batch_idx ? P.cbi[b] : b) * P.C + p;
        base = (base * Hk + kvh) * D;
        double dot = 0;
        for (int c = 0; c < D; c++) dot += qv[c] * h2f(P.kc[base + c], P.dtype);
        double s = dot * scale;
        if (P.softcap > 0) s = P.softcap * tanh(s / P.softcap);
        if (P.alibi) s -= P.slopes[(size_t)b * H + h] * fabs((double)(qkey - j));
        sc.push_back(s);
        vo.push_back(base);
    }
    double mx = -INFINITY;
    for (double s : sc) mx = std::max(mx, s);
    double sum = 0;
    for (double &s : sc) { s = exp(s - mx); sum += s; }
    for (int c = 0; c < D; c++) out[c] = 0;
    for (size_t k = 0; k < sc.size(); k++)
        for (int c = 0; c < D; c++) out[c] += sc[k] / sum * h2f(P.vc[vo[k] + c], P.dtype);
    return sc.empty() ? -INFINITY : mx + log(sum);
}

struct Errs {
    long bad = 0, checked = 0;
    double worst = 0; /* largest error / tolerance */
    char first[256] = "";
    void add(double got, double ref, double tol, const char *what, int x, int y, int z) {
        checked++;
        double e = (isinf(ref) && got == ref) ? 0.0 : fabs(got - ref);
        if (!(e <= tol)) {
            if (!bad) snprintf(first, sizeof first, "%s[%d,%d,%d] got %g ref %g", what, x, y, z, got, ref);
            bad++;
            worst = INFINITY;
        } else if (tol > 0) {
            worst = std::max(worst, e / tol);
        }
    }
};

/* Runs the kernel on poisoned outputs and compares every row of the items (sample_rows > 0: that many random
 * (item, row) pairs only). Returns 1 if it passed. */
static int check(Problem &P, const char *name, int sample_rows = 0) {
    const int H = P.H, D = P.D, G = H / P.Hk, DP = dp_of(D);
    const size_t out_elems = (size_t)P.total_q * H * D;
    CK(cudaMemset(P.dout, 0xff, out_elems * 2 + 4096)); /* NaN poison + sentinels */
    CK(cudaMemset(P.dlse, 0x7f, ((size_t)P.total_q * H + 512) * 4));
    CK(cudaMemset(P.dpart_o, 0xff, ((size_t)P.part_rows + 1) * 256 * 4));
    CK(cudaMemset(P.dpart_ml, 0xff, ((size_t)P.part_rows + 1) * 8));
    launch(P);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> out(out_elems + 2048);
    std::vector<float> lse((size_t)P.total_q * H + 512), po((size_t)P.part_rows * 256 + 256), pl(2 * (P.part_rows + 1));
    CK(cudaMemcpy(out.data(), P.dout, out_elems * 2 + 4096, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse.data(), P.dlse, lse.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(po.data(), P.dpart_o, po.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(pl.data(), P.dpart_ml, pl.size() * 4, cudaMemcpyDeviceToHost));
    const double u = P.dtype == KVATTN_F16 ? 1.0 / 2048 : 1.0 / 256;
    Errs E;
    long sentinel_bad = 0;
    for (int k = 0; k < 512; k++) {
        if (out[k] != 0xffff || out[512 + out_elems + k] != 0xffff) sentinel_bad++;
    }
    /* rows to check: (item, rr) */
    std::vector<std::pair<int, int>> rows;
    if (sample_rows > 0) {
        for (int k = 0; k < sample_rows; k++) {
            const int ii = rnd() % P.items.size();
            rows.push_back({ii, (int)(rnd() % P.items[ii].nrows)});
        }
    } else {
        for (size_t ii = 0; ii < P.items.size(); ii++)
            for (int rr = 0; rr < P.items[ii].nrows; rr++) rows.push_back({(int)ii, rr});
    }
    std::vector<Errs> errs(rows.size());
#pragma omp parallel for schedule(dynamic, 16)
    for (long k = 0; k < (long)rows.size(); k++) {
        const kv_item &it = P.items[rows[k].first];
        const int rr = rows[k].second, r = it.row0 + rr, i = r / G, h = it.kv_head * G + r % G;
        std::vector<double> ref(D);
        const double rl = ref_row(P, it.b, i, h, it.klo, it.khi, ref.data());
        Errs &e = errs[k];
        if (it.part >= 0) {
            for (int c = 0; c < D; c++)
                e.add(po[(size_t)(it.part + rr) * DP + c], ref[c], 4 * u + 2 * u * fabs(ref[c]), "part_o", it.part + rr, c, 0);
            /* the piece's (m, log2 l) as its lse: (m + log2 l) ln 2 */
            const double pls = ((double)pl[2 * (it.part + rr)] + pl[2 * (it.part + rr) + 1]) * 0.69314718055994531;
            e.add(pls, rl, 1e-3 * std::max(1.0, fabs(rl)), "part_ml", it.part + rr, 0, 0);
        } else {
            const size_t row = (size_t)(P.cu_q[it.b] + i);
            for (int c = 0; c < D; c++)
                e.add(h2f(out[512 + (row * H + h) * D + c], P.dtype), ref[c], 4 * u + 2 * u * fabs(ref[c]), "out",
                      (int)row, h, c);
            if (P.lse) e.add(lse[256 + (size_t)h * P.total_q + row], rl, 1e-3 * std::max(1.0, fabs(rl)), "lse", (int)row, h, 0);
        }
    }
    for (auto &e : errs) {
        if (e.bad && !E.bad) memcpy(E.first, e.first, sizeof E.first);
        E.bad += e.bad;
        E.checked += e.checked;
        E.worst = std::max(E.worst, e.worst);
    }
    /* split problems: out and lse must be untouched (the combine kernel writes them, not this one) */
    long untouched_bad = 0;
    if (P.split) {
        for (size_t k = 0; k < out_elems; k++) untouched_bad += out[512 + k] != 0xffff;
    }
    const int ok = E.bad == 0 && sentinel_bad == 0 && untouched_bad == 0;
    printf("  %-48s %s  items %zu, values %ld, max err/tol %.2f%s%s%s\n", name, ok ? "ok  " : "FAIL", P.items.size(),
           E.checked, E.worst, E.bad ? "  first bad: " : "", E.first, sentinel_bad ? "  SENTINEL OVERWRITTEN" : "");
    if (untouched_bad) printf("    split problem: %ld out elements written\n", untouched_bad);
    return ok;
}

static int validate(bool quick) {
    int failures = 0, cases = 0;
    auto run = [&](Problem &P, const char *name) {
        build(P);
        cases++;
        failures += !check(P, name);
        free_problem(P);
    };
    const int dts[2] = {KVATTN_BF16, KVATTN_F16};
    for (int di = 0; di < (quick ? 1 : 2); di++) {
        const int dt = dts[di];
        char name[96];
        { /* causal prefill, ragged lengths, tails, GQA 4, page 16 */
            Problem P = make(5, 8, 2, 128, 16, dt);
            int nq[5] = {1, 17, 130, 300, 513};
            for (int b = 0; b < 5; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = 0; }
            P.causal = 1;
            snprintf(name, sizeof name, "%s causal ragged G4 page16", dt == KVATTN_F16 ? "fp16" : "bf16");
            run(P, name);
        }
        { /* prefill on top of a cache, page 1 */
            Problem P = make(3, 8, 2, 128, 1, dt);
            int nq[3] = {77, 200, 64}, S[3] = {500, 33, 1000};
            for (int b = 0; b < 3; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; }
            P.causal = 1;
            snprintf(name, sizeof name, "%s causal on cache S>0 page1", dt == KVATTN_F16 ? "fp16" : "bf16");
            run(P, name);
        }
        if (quick) break;
        { /* MHA, contiguous + cache_batch_idx, not causal */
            Problem P = make(3, 4, 4, 128, 0, dt);
            int nq[3] = {150, 9, 260}, S[3] = {0, 400, 100};
            for (int b = 0; b < 3; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; }
            P.batch_idx = 1;
            snprintf(name, sizeof name, "%s MHA contiguous batch_idx full", dt == KVATTN_F16 ? "fp16" : "bf16");
            run(P, name);
        }
        { /* window + softcap + ALiBi + leftpad, page 7 */
            Problem P = make(3, 8, 2, 128, 7, dt);
            int nq[3] = {200, 50, 129}, S[3] = {300, 0, 70};
            for (int b = 0; b < 3; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; P.L[b] = S[b] / 3; }
            P.leftpad = 1; P.wl = 100; P.wr = 5; P.softcap = 5.0f; P.alibi = 1;
            snprintf(name, sizeof name, "%s window softcap alibi leftpad page7", dt == KVATTN_F16 ? "fp16" : "bf16");
            run(P, name);
        }
        { /* rotary: interleaved full (fp16 pass) / NeoX partial (bf16 pass), causal, lse off */
            Problem P = make(2, 8, 2, 128, 16, dt);
            int nq[2] = {190, 140}, S[2] = {0, 260};
            for (int b = 0; b < 2; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; }
            P.rotary = 1; P.causal = 1; P.lse = 0;
            if (dt == KVATTN_F16) { P.rot_il = 1; P.rot_R = 128; } else { P.rot_il = 0; P.rot_R = 64; }
            snprintf(name, sizeof name, "%s rotary %s causal no-lse", dt == KVATTN_F16 ? "fp16" : "bf16",
                     dt == KVATTN_F16 ? "interleaved R128" : "neox R64");
            run(P, name);
        }
        { /* D = 104 (DP 128), split pieces at random key boundaries, causal on a cache */
            Problem P = make(2, 8, 2, 104, 16, dt);
            int nq[2] = {300, 150}, S[2] = {700, 0};
            for (int b = 0; b < 2; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; }
            P.causal = 1; P.split = 1;
            snprintf(name, sizeof name, "%s D104 split pieces causal", dt == KVATTN_F16 ? "fp16" : "bf16");
            run(P, name);
        }
        { /* rows without keys: n_q > s_k causal (queries before the first key), window empty rows */
            Problem P = make(2, 8, 2, 128, 16, dt);
            P.nq[0] = 90; P.nnew[0] = 0; P.S[0] = 20;
            P.nq[1] = 40; P.nnew[1] = 40; P.S[1] = 0;
            P.causal = 1;
            snprintf(name, sizeof name, "%s empty rows (n_q > s_k)", dt == KVATTN_F16 ? "fp16" : "bf16");
            run(P, name);
        }
        { /* long: many KV tiles, G 4 */
            Problem P = make(1, 4, 1, 128, 16, dt);
            P.nq[0] = 1000; P.nnew[0] = 1000; P.S[0] = 700;
            P.causal = 1;
            snprintf(name, sizeof name, "%s long causal S=700 n=1000", dt == KVATTN_F16 ? "fp16" : "bf16");
            run(P, name);
        }
        { /* D 64 and 256 */
            Problem P = make(2, 8, 2, 64, 16, dt);
            int nq[2] = {300, 70}, S[2] = {100, 0};
            for (int b = 0; b < 2; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; }
            P.causal = 1;
            snprintf(name, sizeof name, "%s D64 causal", dt == KVATTN_F16 ? "fp16" : "bf16");
            run(P, name);
            Problem Q = make(2, 8, 2, 256, 16, dt);
            for (int b = 0; b < 2; b++) { Q.nq[b] = nq[b]; Q.nnew[b] = nq[b]; Q.S[b] = S[b]; }
            Q.causal = 1; Q.alibi = dt == KVATTN_F16;
            snprintf(name, sizeof name, "%s D256 causal%s", dt == KVATTN_F16 ? "fp16" : "bf16",
                     dt == KVATTN_F16 ? " alibi" : "");
            run(Q, name);
        }
    }
    printf("validate: %d cases, %d failures\n", cases, failures);
    return failures;
}

/* ---- 3. timing ------------------------------------------------------------------------------------------ */
static void bench() {
    int Ls[3] = {1024, 4096, 16384};
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    { /* warm-up: ~0.3 s of launches so that the clocks have ramped before the first timing */
        Problem P = make(4, 32, 8, 128, 16, KVATTN_BF16);
        for (int b = 0; b < 4; b++) { P.nq[b] = 4096; P.nnew[b] = 4096; P.S[b] = 0; }
        P.causal = 1;
        build(P, false);
        for (int i = 0; i < 100; i++) launch(P);
        CK(cudaDeviceSynchronize());
        free_problem(P);
    }
    for (int k = 0; k < 6; k++) {
        const int L = Ls[k / 2], B = 16384 / L;
        Problem P = make(B, 32, 8, 128, 16, KVATTN_BF16);
        for (int b = 0; b < B; b++) { P.nq[b] = L; P.nnew[b] = L; P.S[b] = 0; }
        P.causal = 1;
        P.order = k & 1;
        build(P, false);
        for (g_variant = 0; g_variant < 3; g_variant++) {
        char name[96];
        snprintf(name, sizeof name, "check %d x %d %s order %d (sampled)", B, L, variant_name[g_variant], P.order);
        check(P, name, 256);
        for (int i = 0; i < 3; i++) launch(P);
        std::vector<float> ts;
        for (int r = 0; r < 15; r++) {
            CK(cudaMemsetAsync(P.dcount + 1, 0, 4));
            CK(cudaEventRecord(e0));
            launch(P);
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            ts.push_back(ms);
        }
        CK(cudaGetLastError());
        std::sort(ts.begin(), ts.end());
        const double ms = ts[ts.size() / 2];
        const double flops = 4.0 * B * 32 * (double)L * L * 128 / 2;
        printf("prefill sm90 %-9s %s causal bf16 D128 H32/8 B=%-2d L=%-6d %8.1f us  %.0f TFLOP/s  (min %.1f us)\n",
               variant_name[g_variant], P.order ? "by-head " : "long-1st", B, L, ms * 1e3,
               flops / (ms * 1e-3) / 1e12, ts[0] * 1e3);
        }
        g_variant = 0;
        free_problem(P);
    }
}

int main(int argc, char **argv) {
    CK(cudaSetDevice(0));
    CK(cudaDeviceGetAttribute(&g_num_sms, cudaDevAttrMultiProcessorCount, 0));
    const char *mode = argc > 1 ? argv[1] : "validate";
    if (!strcmp(mode, "unit")) {
        int ok = unit_test<__nv_bfloat16>(KVATTN_BF16);
        ok &= unit_test<__half>(KVATTN_F16);
        printf("unit: %s\n", ok ? "ok" : "FAIL");
        return ok ? 0 : 1;
    }
    if (argc > 2) g_variant = atoi(argv[2]);
    if (!strcmp(mode, "validate")) return validate(false) ? 1 : 0;
    if (!strcmp(mode, "quick")) return validate(true) ? 1 : 0;
    if (!strcmp(mode, "bench")) { bench(); return 0; }
    fprintf(stderr, "usage: %s unit|validate|quick|bench\n", argv[0]);
    return 1;
}
