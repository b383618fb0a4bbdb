/* attn_test.cu — kernel experiments for src/cuda/attn.cu (llm.c style): builds random problems, runs the
 * scalar v0 kernel and the fast path through kv_attn_launch, checks both against a float64 CPU reference of
 * SPEC.md (poisoned outputs, sentinels, skipped sequences, batch invariance, determinism), then times decode,
 * inflight and prefill shapes against the measured read ceiling.
 *   ./attn_test validate      ./attn_test bench      (see dev/run_attn.sh)
 * B sequences, H query heads, Hk KV heads, D head dim. The cache is filled directly (no append kernel here):
 * the "new" tokens are already in it, k_new only carries their counts. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <vector>
#include <algorithm>
#include <map>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define KVATTN_DEV_VARIANTS 1
#include "../src/cuda/attn.cu"

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
static int irand(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); } /* [lo, hi] */

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

/* One problem: lengths and options on the host, device buffers, params. */
struct Problem {
    int dtype = KVATTN_BF16, B = 0, H = 8, Hk = 2, D = 128, page = 16; /* page 0 = contiguous */
    std::vector<int> nq, nnew, S, L;
    int causal = 0, wl = -1, wr = -1, num_splits = 0, invariant = 0, rotary = 0, rot_il = 1, rot_R = 0;
    float softcap = 0.0f;
    int alibi = 0, leftpad = 0, lse = 1, batch_idx = 0;
    std::vector<int> bad; /* sequences whose seq_ok is 0 */
    /* host data */
    std::vector<uint16_t> q, kc, vc, out;
    std::vector<float> cosT, sinT, slopes, lse_out;
    std::vector<int> cu_q, cu_new, bt, cbi;
    int total_q = 0, total_new = 0, max_pages = 0, num_pages = 0, C = 0, max_pos = 0, cache_batch = 0;
    kvattn_params p;
    /* device */
    void *dq = 0, *dk = 0, *dv = 0, *dout = 0, *dknew = 0, *dws = 0;
    float *dlse = 0, *dcos = 0, *dsin = 0, *dslopes = 0;
    int *dcu_q = 0, *dcu_new = 0, *dbt = 0, *dS = 0, *dL = 0, *dcbi = 0;
    int8_t *dok = 0, *dflags = 0; /* dok: the check flags, finalized by the scheduler; dflags: their source */
    kvattn_device_status *dstatus = 0;
    size_t ws_bytes = 0;
};

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
    P.total_new = P.cu_new[B];
    if (P.page > 0) {
        P.max_pages = (maxlen + P.page - 1) / P.page + 1;
        P.C = P.max_pages * P.page;
        std::vector<int> perm;
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
            P.cbi.resize(B);
            for (int b = 0; b < B; b++) P.cbi[b] = (b * 7 + 1) % P.cache_batch;
            /* distinct rows: a permutation prefix */
            std::vector<int> rows(P.cache_batch);
            for (int i = 0; i < P.cache_batch; i++) rows[i] = i;
            for (int i = P.cache_batch - 1; i > 0; i--) std::swap(rows[i], rows[rnd() % (i + 1)]);
            for (int b = 0; b < B; b++) P.cbi[b] = rows[b];
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
        for (size_t i = 0; i < P.q.size(); i++) P.q[i] = f2h(frand(), P.dtype);
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

    CK(cudaMalloc(&P.dq, P.q.size() * 2 + 16));
    CK(cudaMalloc(&P.dk, cache_elems * 2 + 16));
    CK(cudaMalloc(&P.dv, cache_elems * 2 + 16));
    const size_t out_elems = (size_t)P.total_q * H * D;
    CK(cudaMalloc(&P.dout, out_elems * 2 + 4096)); /* 1024 sentinel bytes each side */
    CK(cudaMalloc(&P.dlse, ((size_t)P.total_q * H + 512) * 4));
    CK(cudaMalloc(&P.dknew, 16));
    CK(cudaMemcpy(P.dq, P.q.data(), P.q.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dk, P.kc.data(), cache_elems * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dv, P.vc.data(), cache_elems * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&P.dcu_q, (B + 1) * 4));
    CK(cudaMalloc(&P.dcu_new, (B + 1) * 4));
    CK(cudaMalloc(&P.dS, B * 4 + 4));
    CK(cudaMalloc(&P.dL, B * 4 + 4));
    CK(cudaMalloc(&P.dok, B + 1));
    CK(cudaMalloc(&P.dflags, B + 1));
    CK(cudaMalloc(&P.dstatus, sizeof(kvattn_device_status)));
    CK(cudaMemcpy(P.dcu_q, P.cu_q.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dcu_new, P.cu_new.data(), (B + 1) * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dS, P.S.data(), B * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(P.dL, P.L.data(), B * 4, cudaMemcpyHostToDevice));
    std::vector<int8_t> flags(B, 0); /* check-kernel flags: 0 = ok */
    for (int b : P.bad) flags[b] = KVATTN_FLAG_CAPACITY;
    CK(cudaMemcpy(P.dflags, flags.data(), B, cudaMemcpyHostToDevice));
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
    p.k_new = P.dknew;
    p.v_new = P.dknew;
    p.cu_seqlens_knew = P.dcu_new;
    p.total_knew = P.total_new;
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
    p.num_splits = P.num_splits;
    p.batch_invariant = P.invariant;
    p.out = (char *)P.dout + 1024;
    p.out_row_stride = (int64_t)H * D;
    p.out_head_stride = D;
    p.softmax_lse = P.lse ? P.dlse + 256 : NULL;
    p.lse_head_stride = P.total_q;
    p.lse_row_stride = 1;
    /* KVATTN_TL_FIXED (forty-seventh session): a batch of one query per sequence in the fixed mode (cu_seqlens_q
     * NULL, seqlen_q 1) and without the lse, as flash_attn_with_kvcache calls it (dev/split_probe.py); the varlen
     * form of the same batch (bench_cuda's decode rows) launches the prefill kernel after the decode kernel
     * (launch_fast: decode first). For timeline and bench modes only (validate checks the lse). Until it dropped
     * the lse (every Problem has lse = 1), this knob changed nothing: the session's calls 5 - 9 ran varlen. */
    bool one = getenv("KVATTN_TL_FIXED") && P.total_q == B;
    for (int b = 0; one && b < B; b++) one = P.nq[b] == 1;
    if (one) {
        p.cu_seqlens_q = NULL;
        p.seqlen_q = 1;
        p.total_q = 0;
        p.q_batch_stride = p.out_batch_stride = (int64_t)H * D;
        p.softmax_lse = NULL;
    }
}

static kv_device_info g_dev;

static void free_problem(Problem &P) {
    void *ptrs[] = {P.dq, P.dk, P.dv, P.dout, P.dknew, P.dws, P.dlse, P.dcos, P.dsin, P.dslopes,
                    P.dcu_q, P.dcu_new, P.dbt, P.dS, P.dL, P.dcbi, P.dok, P.dflags, P.dstatus};
    for (void *x : ptrs) if (x) cudaFree(x);
}

static void run_attn(Problem &P, int force_v0) {
    size_t need = kv_attn_workspace_bytes(&P.p, &g_dev);
    if (need > P.ws_bytes) {
        if (P.dws) cudaFree(P.dws);
        CK(cudaMalloc(&P.dws, need));
        P.ws_bytes = need;
    }
    kv_attn_force_v0 = force_v0;
    CK(cudaMemcpyAsync(P.dok, P.dflags, P.B, cudaMemcpyDeviceToDevice, 0));
    /* KVATTN_TL_FUSED: the checks in the scheduler, as kv_cuda_forward does for small batches */
    const int fused = getenv("KVATTN_TL_FUSED") && !force_v0 ? kv_attn_check_fused(&P.p, &g_dev) : 0;
    int st = kv_attn_launch_prologue(&P.p, P.dok, P.dstatus, P.dws, P.ws_bytes, &g_dev, fused, 0);
    if (st == KVATTN_OK) st = kv_attn_launch(&P.p, P.dok, P.dws, P.ws_bytes, &g_dev, fused, 0);
    kv_attn_force_v0 = 0;
    if (st != KVATTN_OK) { fprintf(stderr, "kv_attn_launch failed: %d\n", st); exit(3); }
}

/* float64 reference of SPEC.md "Attend" for one (row, head): writes D values and the lse. */
static void reference(const Problem &P, std::vector<double> &ref, std::vector<double> &ref_lse) {
    const int H = P.H, Hk = P.Hk, D = P.D, G = H / Hk;
    ref.assign((size_t)P.total_q * H * D, 0.0);
    ref_lse.assign((size_t)P.total_q * H, -INFINITY);
    const float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < P.B; b++) {
        const int nq = P.nq[b], S = P.S[b], nn = P.nnew[b], L = P.L[b];
        const int s_k = S + nn - L;
        for (int i = 0; i < nq; i++) {
            kv_range vr = kv_visible_keys(i, nq, s_k, P.causal, P.wl, P.wr);
            const int qkey = i + s_k - nq, pos = S + nn - nq + i;
            for (int h = 0; h < H; h++) {
                const int kvh = h / G;
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
                for (int j = vr.lo; j < vr.hi; j++) {
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
                double *o = &ref[((size_t)(P.cu_q[b] + i) * H + h) * D];
                for (size_t k = 0; k < sc.size(); k++)
                    for (int c = 0; c < D; c++) o[c] += sc[k] / sum * h2f(P.vc[vo[k] + c], P.dtype);
                ref_lse[(size_t)h * P.total_q + P.cu_q[b] + i] = sc.empty() ? -INFINITY : mx + log(sum);
            }
        }
    }
}

/* Runs one variant on poisoned outputs and compares. Returns 1 if it passed. */
static int check(Problem &P, int force_v0, const char *name, std::vector<uint16_t> *bits_out = NULL) {
    const size_t out_elems = (size_t)P.total_q * P.H * P.D;
    CK(cudaMemset(P.dout, 0xff, out_elems * 2 + 4096)); /* NaN poison + sentinels */
    CK(cudaMemset(P.dlse, 0x7f, ((size_t)P.total_q * P.H + 512) * 4));
    run_attn(P, force_v0);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> out(out_elems + 2048);
    std::vector<float> lse((size_t)P.total_q * P.H + 512);
    CK(cudaMemcpy(out.data(), P.dout, out.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lse.data(), P.dlse, lse.size() * 4, cudaMemcpyDeviceToHost));
    std::vector<double> ref, ref_lse;
    reference(P, ref, ref_lse);
    int fail = 0;
    for (int i = 0; i < 512; i++) if (out[i] != 0xffff || out[512 + out_elems + i] != 0xffff) fail |= 1;
    std::vector<char> badseq(P.B, 0);
    for (int b : P.bad) badseq[b] = 1;
    double num = 0, den = 0, maxabs = 0, lse_err = 0;
    for (int b = 0; b < P.B; b++)
        for (int i = P.cu_q[b]; i < P.cu_q[b + 1]; i++)
            for (int h = 0; h < P.H; h++) {
                for (int c = 0; c < P.D; c++) {
                    const size_t e = ((size_t)i * P.H + h) * P.D + c;
                    const uint16_t raw = out[512 + e];
                    if (badseq[b]) { if (raw != 0xffff) fail |= 2; continue; }
                    const double v = h2f(raw, P.dtype);
                    if (!(v == v)) { fail |= 4; continue; }
                    num += (v - ref[e]) * (v - ref[e]);
                    den += ref[e] * ref[e];
                    maxabs = std::max(maxabs, fabs(v - ref[e]));
                }
                if (P.lse && !badseq[b]) {
                    const float l = lse[256 + (size_t)h * P.total_q + i];
                    const double r = ref_lse[(size_t)h * P.total_q + i];
                    if (std::isinf(r)) { if (!(std::isinf(l) && l < 0)) fail |= 8; }
                    else lse_err = std::max(lse_err, fabs(l - r));
                }
            }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    const double tol = P.dtype == KVATTN_BF16 ? 1e-2 : 2e-3;
    if (!(rel < tol) || !(maxabs < 0.06) || !(lse_err < 2e-3 * 10)) fail |= 16;
    printf("  %-8s %-44s rel %.2e  maxabs %.2e  lse %.1e  %s\n", force_v0 ? "v0" : "fast", name, rel, maxabs, lse_err,
           fail ? "FAIL" : "ok");
    if (fail) printf("    fail bits %d\n", fail);
    if (bits_out) {
        bits_out->assign(out.begin() + 512, out.begin() + 512 + out_elems);
    }
    return !fail;
}

static Problem make(int B, int H, int Hk, int D, int page, int dtype) {
    Problem P;
    P.B = B; P.H = H; P.Hk = Hk; P.D = D; P.page = page; P.dtype = dtype;
    P.nq.resize(B); P.nnew.resize(B); P.S.resize(B); P.L.assign(B, 0);
    return P;
}

static int validate(bool quick) {
    int failures = 0, cases = 0;
    auto both = [&](Problem &P, const char *name) {
        build(P);
        cases++;
        if (!quick) failures += !check(P, 1, name);
        failures += !check(P, 0, name);
        free_problem(P);
    };
    { /* decode, GQA 4, page 16, ragged lengths incl. 0 cached */
        Problem P = make(7, 8, 2, 128, 16, KVATTN_BF16);
        int S[7] = {0, 1, 15, 16, 300, 1025, 97};
        for (int b = 0; b < 7; b++) { P.nq[b] = 1; P.nnew[b] = 1; P.S[b] = S[b]; }
        both(P, "decode bf16 D128 G4 page16");
    }
    { /* speculative + prefill mix, causal, page 1 */
        Problem P = make(5, 8, 2, 128, 1, KVATTN_BF16);
        int nq[5] = {1, 3, 7, 97, 170}, S[5] = {500, 60, 0, 0, 33};
        for (int b = 0; b < 5; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; }
        P.causal = 1;
        both(P, "mixed causal page1");
    }
    { /* fp16, D 64, MQA, window, softcap, lse, contiguous + batch idx */
        Problem P = make(4, 8, 1, 64, 0, KVATTN_F16);
        int nq[4] = {1, 20, 5, 64}, S[4] = {2000, 100, 0, 64};
        for (int b = 0; b < 4; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; }
        P.wl = 70; P.wr = 3; P.softcap = 5.0f; P.batch_idx = 1;
        both(P, "fp16 D64 MQA window softcap contig");
    }
    { /* D 80 (padded 96), ALiBi, rotary neox partial, leftpad */
        Problem P = make(4, 6, 3, 80, 7, KVATTN_BF16);
        int nq[4] = {1, 2, 33, 9}, S[4] = {130, 77, 5, 700};
        for (int b = 0; b < 4; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; P.L[b] = S[b] / 3; }
        P.leftpad = 1; P.alibi = 1; P.rotary = 1; P.rot_il = 0; P.rot_R = 48; P.causal = 1;
        both(P, "D80 alibi rotary-neox leftpad page7");
    }
    { /* D 256, rotary interleaved full, fp16 */
        Problem P = make(3, 4, 2, 256, 16, KVATTN_F16);
        int nq[3] = {1, 40, 3}, S[3] = {900, 0, 4000};
        for (int b = 0; b < 3; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; }
        P.rotary = 1; P.rot_il = 1; P.rot_R = 256; P.causal = 1;
        both(P, "D256 rotary-il fp16 causal");
    }
    { /* D 40, 96, 224 with splits forced */
        int Ds[3] = {40, 96, 224};
        for (int k = 0; k < 3; k++) {
            Problem P = make(2, 4, 4, Ds[k], 16, KVATTN_BF16);
            P.nq[0] = 1; P.nnew[0] = 0; P.S[0] = 3000;
            P.nq[1] = 2; P.nnew[1] = 2; P.S[1] = 1500;
            P.num_splits = 3;
            char name[64];
            snprintf(name, sizeof name, "D%d splits<=3", Ds[k]);
            both(P, name);
        }
    }
    { /* long decode with auto split, n_q = 0 sequence, bad sequence skipped */
        Problem P = make(4, 32, 8, 128, 16, KVATTN_BF16);
        int nq[4] = {1, 0, 1, 4}, S[4] = {9000, 10, 20000, 5000};
        for (int b = 0; b < 4; b++) { P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b]; }
        /* (a preset check flag: with KVATTN_TL_FUSED the scheduler makes the checks itself and finds sequence 3
         * valid, so its output is written; the library's bad-input tests make real bad inputs) */
        if (!getenv("KVATTN_TL_FUSED")) P.bad.push_back(3);
        both(P, getenv("KVATTN_TL_FUSED") ? "auto split long, nq=0 (fused: no preset bad seq)"
                                          : "auto split long, nq=0, bad seq skipped");
    }
    { /* batch invariance: sequence alone vs. inside a batch, bitwise */
        Problem A = make(1, 32, 8, 128, 16, KVATTN_BF16);
        A.nq[0] = 2; A.nnew[0] = 2; A.S[0] = 7000; A.invariant = 1; A.causal = 1;
        build(A);
        std::vector<uint16_t> alone, inb;
        cases++;
        failures += !check(A, 0, "invariant alone", &alone);
        Problem Bt = make(9, 32, 8, 128, 16, KVATTN_BF16);
        for (int b = 0; b < 9; b++) { Bt.nq[b] = 1 + b % 3; Bt.nnew[b] = Bt.nq[b]; Bt.S[b] = 100 + 1000 * b; }
        Bt.nq[5] = 2; Bt.nnew[5] = 2; Bt.S[5] = 7000; Bt.invariant = 1; Bt.causal = 1;
        build(Bt);
        /* copy A's q and cache rows into Bt's sequence 5 */
        const size_t qrow = (size_t)32 * 128;
        for (int i = 0; i < 2; i++)
            memcpy(&Bt.q[(Bt.cu_q[5] + i) * qrow], &A.q[i * qrow], qrow * 2);
        for (int pos = 0; pos < 7002; pos++) {
            size_t sa = ((size_t)A.bt[pos / 16] * 16 + pos % 16) * 8 * 128;
            size_t sb = ((size_t)Bt.bt[(size_t)5 * Bt.max_pages + pos / 16] * 16 + pos % 16) * 8 * 128;
            memcpy(&Bt.kc[sb], &A.kc[sa], 8 * 128 * 2);
            memcpy(&Bt.vc[sb], &A.vc[sa], 8 * 128 * 2);
        }
        CK(cudaMemcpy(Bt.dq, Bt.q.data(), Bt.q.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(Bt.dk, Bt.kc.data(), Bt.kc.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(Bt.dv, Bt.vc.data(), Bt.vc.size() * 2, cudaMemcpyHostToDevice));
        failures += !check(Bt, 0, "invariant in batch of 9", &inb);
        int same = memcmp(alone.data(), &inb[(size_t)Bt.cu_q[5] * qrow], alone.size() * 2) == 0;
        printf("  batch invariance (seq alone vs in batch): %s\n", same ? "bitwise equal" : "DIFFERENT");
        failures += !same;
        /* determinism: run again */
        std::vector<uint16_t> again;
        check(Bt, 0, "invariant in batch of 9 (again)", &again);
        int det = again == inb;
        printf("  determinism (two runs): %s\n", det ? "bitwise equal" : "DIFFERENT");
        failures += !det;
        free_problem(A);
        free_problem(Bt);
    }
    printf("validate: %d cases, %d failures\n", cases, failures);
    return failures;
}

/* ---- timing ----------------------------------------------------------------------------------------- */
__global__ void read_kernel(const uint4 *x, size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = x[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) *sink = acc;
}

static float time_ms(Problem &P, int reps) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) run_attn(P, 0);
    std::vector<float> ts;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(e0));
        run_attn(P, 0);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
}

static double read_ceiling() {
    size_t bytes = (size_t)4 << 30;
    uint4 *x;
    unsigned *sink;
    CK(cudaMalloc(&x, bytes));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(x, 1, bytes));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ts;
    for (int r = 0; r < 12; r++) {
        CK(cudaEventRecord(e0));
        read_kernel<<<g_dev.num_sms * 8, 512>>>(x, bytes / 16, sink);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 2) ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    cudaFree(x);
    cudaFree(sink);
    return bytes / (ts[ts.size() / 2] * 1e-3) / 1e12;
}

static void bench_inflight() {
    /* inflight: 60 decodes with S uniform in [512, 8192] + 4 prompts of 512, causal, page 16; then the same
     * with the prompts only and the decodes only (where the time goes) */
    const int plen = getenv("KVATTN_INFLIGHT_PLEN") ? atoi(getenv("KVATTN_INFLIGHT_PLEN")) : 512; /* prompt tokens */
    if (plen != 512) printf("(prompts of %d tokens)\n", plen);
    for (int part = 0; part < 3; part++) {
        rng_state = 0x5eed;
        std::vector<int> nq, S;
        for (int b = 0; b < 64; b++) {
            const bool prompt = b % 16 == 5;
            const int s_dec = irand(512, 8192) - 1;
            if (part == 1 && !prompt) continue;
            if (part == 2 && prompt) continue;
            nq.push_back(prompt ? plen : 1);
            S.push_back(prompt ? 0 : s_dec);
        }
        Problem P = make((int)nq.size(), 32, 8, 128, 16, KVATTN_BF16);
        double bytes = 0;
        for (int b = 0; b < P.B; b++) {
            P.nq[b] = nq[b]; P.nnew[b] = nq[b]; P.S[b] = S[b];
            bytes += (double)(P.S[b] + P.nnew[b]) * 8 * 128 * 4;
        }
        P.causal = 1;
        build(P, false);
        const double ms = time_ms(P, 20);
        const char *what[3] = {"inflight 60 decodes + 4x512 prompts", "  its 4 prompts only", "  its 60 decodes only"};
        printf("%-38s %8.1f us  (KV bytes %.0f MB: %.2f TB/s)\n", what[part], ms * 1e3, bytes / 1e6,
               bytes / (ms * 1e-3) / 1e12);
        free_problem(P);
    }
}


#ifdef KVATTN_TIMELINE
/* per-item records of the decode list (kv_tl_items): durations, per-block ends, per-SM tile rates */
static double pct(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[(size_t)(q * (v.size() - 1) + 0.5)];
}
/* KVATTN_TL_RAW=file: every timed repetition's item records appended as text lines (case, rep, item, start us,
 * end us, smid, block, tiles), times from the call's t0; for offline per-SM analysis */
static void item_dump(const char *name, int rep, unsigned long long n, double t0) {
    const char *path = getenv("KVATTN_TL_RAW");
    if (!path || n == 0) return;
    if (n > KV_TL_ITEMS) n = KV_TL_ITEMS;
    static unsigned long long r[KV_TL_ITEMS][4];
    CK(cudaMemcpyFromSymbol(r, kv_tl_items, sizeof r, sizeof r));
    FILE *f = fopen(path, "a");
    if (!f) return;
    for (unsigned long long i = 0; i < n; i++)
        fprintf(f, "%s\t%d\t%llu\t%.3f\t%.3f\t%u\t%u\t%llu\n", name, rep, i, (r[i][0] - t0) / 1e3, (r[i][1] - t0) / 1e3,
                (unsigned)(r[i][2] >> 32), (unsigned)(r[i][2] & 0xffffffffu), r[i][3]);
    fclose(f);
}

static void item_report(int list, unsigned long long n, double t0) {
    if (n == 0) return;
    if (n > KV_TL_ITEMS) n = KV_TL_ITEMS;
    static unsigned long long r[KV_TL_ITEMS][4];
    CK(cudaMemcpyFromSymbol(r, kv_tl_items, sizeof r, (size_t)list * sizeof r));
    std::vector<double> dur, per_tile, tiles;
    std::map<unsigned, std::vector<int>> by_block;
    std::map<unsigned, std::pair<double, double>> by_sm; /* busy ns, tiles */
    for (unsigned long long i = 0; i < n; i++) {
        const double d = (double)(r[i][1] - r[i][0]);
        dur.push_back(d / 1e3);
        tiles.push_back((double)r[i][3]);
        if (r[i][3]) per_tile.push_back(d / 1e3 / r[i][3]);
        by_block[(unsigned)(r[i][2] & 0xffffffffu)].push_back((int)i);
        auto &sm = by_sm[(unsigned)(r[i][2] >> 32)];
        sm.first += d;
        sm.second += (double)r[i][3];
    }
    printf("    items %llu: tiles min %.0f med %.0f max %.0f; item us min %.1f p10 %.1f med %.1f p90 %.1f max %.1f; "
           "us/tile min %.2f p10 %.2f med %.2f p90 %.2f max %.2f\n", n, pct(tiles, 0), pct(tiles, .5), pct(tiles, 1),
           pct(dur, 0), pct(dur, .1), pct(dur, .5), pct(dur, .9), pct(dur, 1), pct(per_tile, 0), pct(per_tile, .1),
           pct(per_tile, .5), pct(per_tile, .9), pct(per_tile, 1));
    std::vector<double> ends, starts, gaps, btiles;
    for (auto &kv : by_block) {
        auto &v = kv.second;
        std::sort(v.begin(), v.end(), [&](int a, int b) { return r[a][0] < r[b][0]; });
        double g = 0, tt = 0;
        for (size_t k = 0; k < v.size(); k++) {
            if (k) g += (double)(r[v[k]][0] - r[v[k - 1]][1]);
            tt += (double)r[v[k]][3];
        }
        starts.push_back((r[v.front()][0] - t0) / 1e3);
        ends.push_back((r[v.back()][1] - t0) / 1e3);
        gaps.push_back(g / 1e3);
        btiles.push_back(tt);
    }
    printf("    blocks %zu: first item start min %.1f med %.1f max %.1f; last item end min %.1f p10 %.1f med %.1f p90 %.1f "
           "max %.1f; tiles per block min %.0f med %.0f max %.0f; gaps between items med %.2f max %.2f us\n",
           by_block.size(), pct(starts, 0), pct(starts, .5), pct(starts, 1), pct(ends, 0), pct(ends, .1),
           pct(ends, .5), pct(ends, .9), pct(ends, 1), pct(btiles, 0), pct(btiles, .5), pct(btiles, 1), pct(gaps, .5),
           pct(gaps, 1));
    { /* the blocks that end last and those that start last: late starters (the scheduler's SM) or slow SMs? */
        auto top = [&](const char *what, bool by_end, size_t count) {
            std::vector<std::pair<double, unsigned>> key; /* end (or first start) us, block */
            for (auto &kv : by_block) {
                const int i = by_end ? kv.second.back() : kv.second.front();
                key.push_back({(r[i][by_end ? 1 : 0] - t0) / 1e3, kv.first});
            }
            std::sort(key.rbegin(), key.rend());
            printf("    %s:", what);
            for (size_t k = 0; k < key.size() && k < count; k++) {
                const auto &v = by_block[key[k].second];
                const double other = (r[by_end ? v.front() : v.back()][by_end ? 0 : 1] - t0) / 1e3;
                printf(" %.1f/%.1f/%u/%zu", key[k].first, other, (unsigned)(r[v.front()][2] >> 32), v.size());
            }
            printf("\n");
        };
        top("last ends (end us / first start us / SM / items)", true, 6);
        top("late starts (first start us / end us / SM / items)", false, 4);
    }
    std::vector<std::pair<double, unsigned>> rate;
    for (auto &kv : by_sm)
        if (kv.second.second > 0) rate.push_back({kv.second.first / 1e3 / kv.second.second, kv.first});
    std::sort(rate.begin(), rate.end());
    if (!rate.empty()) {
        printf("    SM us/tile (busy / tiles, %zu SMs): fastest", rate.size());
        for (size_t k = 0; k < rate.size() && k < 4; k++) printf(" %u:%.2f", rate[k].second, rate[k].first);
        printf(" median %.2f slowest", rate[rate.size() / 2].first);
        for (size_t k = rate.size() > 6 ? rate.size() - 6 : 0; k < rate.size(); k++)
            printf(" %u:%.2f", rate[k].second, rate[k].first);
        printf("\n");
    }
}
#endif
static void bench() {
    const double ceil_tb = read_ceiling();
    printf("read ceiling: %.2f TB/s\n", ceil_tb);
    struct Dec { int B, L, page; } decs[] = {{64, 4096, 16}, {64, 4096, 0}, {64, 4096, 1}, {64, 4096, 256},
                                              {8, 8192, 16},  {8, 8192, 0},  {1, 32768, 16}, {128, 2048, 16},
                                              {256, 1024, 16}, {64, 16384, 16}};
    const int HD = getenv("KVATTN_BENCH_D") ? atoi(getenv("KVATTN_BENCH_D")) : 128; /* head dim of the decodes */
    /* KVATTN_BENCH_NONEW: decodes with no append (the early / SELF kernels when KVATTN_TL_FUSED is set too);
     * KVATTN_PRE_ONLY: only the prefill rows, of head dim KVATTN_BENCH_PD (default 128) */
    const int nonew = getenv("KVATTN_BENCH_NONEW") ? 1 : 0, pre_only = getenv("KVATTN_PRE_ONLY") ? 1 : 0;
    const int PD = getenv("KVATTN_BENCH_PD") ? atoi(getenv("KVATTN_BENCH_PD")) : 128;
    printf("decode head dim %d%s, prefill head dim %d\n", HD, nonew ? " (no append)" : "", PD);
    /* KVATTN_DEV_DECS="BxL:page,...": these decodes instead of the list above (forty-seventh session) */
    std::vector<Dec> mine;
    if (const char *e = getenv("KVATTN_DEV_DECS")) {
        for (const char *c = e; *c;) {
            Dec d = {0, 0, 0};
            if (sscanf(c, "%dx%d:%d", &d.B, &d.L, &d.page) != 3 || d.B < 1 || d.B > 256 || d.L < 2) {
                fprintf(stderr, "KVATTN_DEV_DECS: expected BxL:page,... at \"%s\"\n", c);
                exit(2);
            }
            mine.push_back(d);
            const char *n = strchr(c, ',');
            c = n ? n + 1 : c + strlen(c);
        }
    }
    const std::vector<Dec> list = mine.empty() ? std::vector<Dec>(decs, decs + sizeof decs / sizeof decs[0]) : mine;
    for (auto &d : list) {
        if (pre_only) break;
        Problem P = make(d.B, 32, 8, HD, d.page, KVATTN_BF16);
        for (int b = 0; b < d.B; b++) {
            P.nq[b] = 1; P.nnew[b] = 1 - nonew; P.S[b] = d.L - 1 + nonew;
        }
        build(P, false);
        const double ms = time_ms(P, 20);
        const double bytes = (double)d.B * d.L * 8 * HD * 2 * 2;
        const double tb = bytes / (ms * 1e-3) / 1e12;
        printf("decode B=%-3d L=%-6d page=%-3d  %8.1f us  %.2f TB/s  %.0f%% of read ceiling\n", d.B, d.L, d.page,
               ms * 1e3, tb, 100 * tb / ceil_tb);
        free_problem(P);
    }
    if (getenv("KVATTN_DEC_ONLY")) return;
    if (!pre_only) { /* tiny decode: the fixed cost of a call (scheduler + kernels) */
        Problem P = make(1, 32, 8, 128, 16, KVATTN_BF16);
        P.nq[0] = 1; P.nnew[0] = 1; P.S[0] = 63;
        build(P, false);
        printf("decode B=1 L=64 (fixed cost): %8.1f us\n", time_ms(P, 20) * 1e3);
        free_problem(P);
    }
    if (!pre_only) bench_inflight();
    int Ls[3] = {1024, 4096, 16384};
    for (int k = 0; k < 3; k++) {
        const int L = Ls[k], B = 16384 / L;
        Problem P = make(B, 32, 8, PD, 16, KVATTN_BF16);
        for (int b = 0; b < B; b++) { P.nq[b] = L; P.nnew[b] = L; P.S[b] = 0; }
        P.causal = 1;
        P.lse = 1;
        build(P, false);
        const double ms = time_ms(P, 10);
        const double flops = 4.0 * B * 32 * (double)L * L * PD / 2;
        printf("prefill causal D=%d B=%-2d L=%-6d %8.1f us  %.0f TFLOP/s\n", PD, B, L, ms * 1e3,
               flops / (ms * 1e-3) / 1e12);
        free_problem(P);
    }
}

/* profile modes: build the problem, run the call twice (ncu -c picks a launch), free it */
static int profile_twice(Problem &P) {
    build(P, false);
    run_attn(P, 0);
    run_attn(P, 0);
    CK(cudaDeviceSynchronize());
    free_problem(P);
    return 0;
}

int main(int argc, char **argv) {
    int dev = 0;
    CK(cudaSetDevice(dev));
    g_dev.device = dev;
    CK(cudaDeviceGetAttribute(&g_dev.num_sms, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaDeviceGetAttribute(&g_dev.max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CK(cudaDeviceGetAttribute(&g_dev.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
    g_dev.pdl = getenv("KVATTN_NO_PDL") ? 0 : 1;
    g_dev.overlap = g_dev.pdl && !getenv("KVATTN_NO_OVERLAP");
    g_dev.early = !getenv("KVATTN_NO_EARLY"); /* with KVATTN_TL_FUSED and no append (kv_attn_early) */
    g_dev.early_append = 0; /* (its caches hold the new rows already: no append to run) */
    g_dev.lean = !getenv("KVATTN_NO_LEAN"); /* the scheduler's lean path (KV_LEAN_SCHED) */
    {
        int major = 0, minor = 0;
        CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
        g_dev.sm90 = major == 9 && minor == 0;
    }
    kv_attn_no_sm90 = getenv("KVATTN_NO_SM90") ? 1 : 0;
    kv_attn_dev_pctas = getenv("KVATTN_DEV_PCTAS") ? atoi(getenv("KVATTN_DEV_PCTAS")) : 0;
    kv_attn_dev_splitx = getenv("KVATTN_DEV_SPLITX") ? atoi(getenv("KVATTN_DEV_SPLITX")) : 1;
    kv_attn_dev_splitb = getenv("KVATTN_DEV_SPLITB") ? atoi(getenv("KVATTN_DEV_SPLITB")) : 0;
    kv_attn_dev_stages = getenv("KVATTN_DEV_STAGES") ? atoi(getenv("KVATTN_DEV_STAGES")) : 0;
    kv_attn_dev_order = getenv("KVATTN_DEV_ORDER") ? atoi(getenv("KVATTN_DEV_ORDER")) : 0;
    const char *mode = argc > 1 ? argv[1] : "validate";
    if (!strcmp(mode, "validate")) return validate(false) ? 1 : 0;
    if (!strcmp(mode, "quick")) return validate(true) ? 1 : 0;
    if (!strcmp(mode, "bench")) {
        if (argc > 2) kv_attn_dev_stages = atoi(argv[2]);
        printf("== bench, DP=128 stages %d (0 = default), split blocks %d, splitx %d\n", kv_attn_dev_stages,
               kv_attn_dev_splitb, kv_attn_dev_splitx);
        bench();
        return 0;
    }
    if (!strcmp(mode, "inflight")) { /* the inflight step and its two halves; KVATTN_DEV_PCTAS = prefill blocks */
        printf("== inflight, sm90 prefill blocks %d (0 = one per SM)\n", kv_attn_dev_pctas);
        bench_inflight();
        return 0;
    }
    if (!strcmp(mode, "timeline")) { /* per-kernel start / wait / end times of one call (needs -DKVATTN_TIMELINE) */
#ifdef KVATTN_TIMELINE
        {
            const int twice = getenv("KVATTN_TL_TWICE") ? 1 : 0; /* times relative to the scheduler's 2nd pass */
            CK(cudaMemcpyToSymbol(kv_tl_twice, &twice, sizeof twice));
        }
        struct Case { const char *name; int B, L, page, inflight; } cases[] = {
            {"decode 64x4096 p16", 64, 4096, 16, 0}, {"decode 64x4096 contig", 64, 4096, 0, 0},
            {"decode 8x8192 p16", 8, 8192, 16, 0}, {"decode 8x8192 contig", 8, 8192, 0, 0},
            {"decode 1x32768 p16", 1, 32768, 16, 0}, {"decode 1x32768 contig", 1, 32768, 0, 0},
            {"decode 1x64 p16", 1, 64, 16, 0},
            /* medium batches: the stream-K cut (v95b) and the one-wave c2 split (forty-third session) */
            {"decode 12x4096 contig", 12, 4096, 0, 0}, {"decode 18x4096 contig", 18, 4096, 0, 0},
            {"decode 20x4096 contig", 20, 4096, 0, 0}, {"decode 17x8192 contig", 17, 8192, 0, 0},
            /* lengths whose merges have 9 - 15 or 17 - 23 pieces (the merge's splits after the first 8, v75) */
            {"decode 1x20000 p16", 1, 20000, 16, 0}, {"decode 2x12000 p16", 2, 12000, 16, 0},
            {"inflight", 64, 0, 16, 1}, {"prompts 4x512", 4, 512, 16, 2}, {"prefill 1x4096", 1, 4096, 16, 2},
            {"prefill 16x1024", 16, 1024, 16, 2}};
        const int reps = getenv("KVATTN_TL_REPS") ? atoi(getenv("KVATTN_TL_REPS")) : 4; /* first: warm-up */
        const char *only = getenv("KVATTN_TL_CASE"); /* run only the cases whose name contains this */
        for (auto &c : cases) {
            if (only && !strstr(c.name, only)) continue;
            Problem P = make(c.B, 32, 8, 128, c.page, KVATTN_BF16);
            rng_state = 0x5eed;
            for (int b = 0; b < c.B; b++) {
                if (c.inflight == 2) {
                    P.nq[b] = P.nnew[b] = c.L;
                    P.S[b] = 0;
                } else if (c.inflight) {
                    const bool prompt = b % 16 == 5;
                    const int s_dec = irand(512, 8192) - 1;
                    P.nq[b] = P.nnew[b] = prompt ? 512 : 1;
                    P.S[b] = prompt ? 0 : s_dec;
                } else if (getenv("KVATTN_TL_NONEW")) { /* as bench_cuda's decode: no append */
                    P.nq[b] = 1; P.nnew[b] = 0; P.S[b] = c.L;
                } else {
                    P.nq[b] = 1; P.nnew[b] = 1; P.S[b] = c.L - 1;
                }
            }
            P.causal = c.inflight != 0;
            build(P, false);
            for (int rep = 0; rep < reps; rep++) {
                unsigned long long init[3][16];
                for (int k = 0; k < 3; k++)
                    for (int j = 0; j < 16; j++) init[k][j] = (j == 2 || j == 4 || j >= 5) ? 0ull : ~0ull;
                CK(cudaMemcpyToSymbol(kv_tl, init, sizeof init));
                {
                    long long z[16] = {0};
                    CK(cudaMemcpyToSymbol(kv_tl_sc, z, sizeof z));
                    CK(cudaMemcpyToSymbol(kv_tl_plan, z, sizeof(unsigned long long) * 8));
                    CK(cudaMemcpyToSymbol(kv_tl_merge, z, sizeof(unsigned long long) * 3));
                    CK(cudaMemcpyToSymbol(kv_tl_ws, z, sizeof z));
                }
                CK(cudaDeviceSynchronize());
                if (const char *pw = getenv("KVATTN_TL_PREWARM")) { /* forty-seventh session: MB of reads right before
                                                                       * the call, in its stream: a GPU already busy */
                    static uint4 *wbuf = nullptr;
                    static unsigned *wsink = nullptr;
                    const size_t wn = (size_t)atoi(pw) << 20;
                    if (!wbuf && wn) {
                        CK(cudaMalloc(&wbuf, wn));
                        CK(cudaMemset(wbuf, 1, wn));
                        CK(cudaMalloc(&wsink, 4));
                    }
                    if (wn) read_kernel<<<g_dev.num_sms * 4, 512>>>(wbuf, wn / sizeof(uint4), wsink);
                }
                run_attn(P, 0);
                CK(cudaDeviceSynchronize());
                unsigned long long t[3][16];
                CK(cudaMemcpyFromSymbol(t, kv_tl, sizeof t));
                if (rep == 0) continue; /* warm-up */
                const double t0 = getenv("KVATTN_TL_TWICE") ? (double)t[0][14] : (double)t[0][0];
                printf("%-22s", c.name);
                const char *kn[3] = {"sched", "prefill", "decode"};
                for (int k = 0; k < 3; k++) {
                    if (t[k][0] == ~0ull) continue;
                    printf("  %s start %.1f wait %.1f..%.1f end %.1f..%.1f", kn[k], (t[k][0] - t0) / 1e3,
                           (t[k][1] - t0) / 1e3, (t[k][2] - t0) / 1e3, (t[k][3] - t0) / 1e3, (t[k][4] - t0) / 1e3);
                }
                long long sc[16];
                CK(cudaMemcpyFromSymbol(sc, kv_tl_sc, sizeof sc));
                printf("  (us)\n    sched phases (kcycles): check-seq %.2f check %.2f finalize %.2f facts %.2f facts+scan %.2f pass0 %.2f buckets %.2f pass1 %.2f items %.2f published %.2f;",
                       sc[10] / 1e3, sc[9] / 1e3, sc[5] / 1e3, sc[11] / 1e3, sc[6] / 1e3, sc[12] / 1e3, sc[7] / 1e3,
                       sc[13] / 1e3, sc[8] / 1e3, sc[15] / 1e3);
                for (int k = 1; k < 3; k++)
                    if (t[k][7])
                        printf("  %s: %llu items, mean start-up %.2f us (setup %.2f, issued %.2f), mean item %.2f us;",
                               kn[k], t[k][7], t[k][5] / 1e3 / t[k][7], t[k][8] / 1e3 / t[k][7], t[k][9] / 1e3 / t[k][7],
                               t[k][6] / 1e3 / t[k][7]);
                if (t[2][14]) { /* SELF blocks: their plan's parts and kv_lean_plan's sections (KV_LEAN_STAMP,
                                  * attn_kernels.cuh), mean SM cycles per block */
                    const double nb = (double)t[2][14];
                    printf("  self plan (cycles): entry %.0f, cold pass %.0f, plan %.0f, to barrier %.0f;",
                           t[2][10] / nb, t[2][11] / nb, t[2][12] / nb, t[2][13] / nb);
                    unsigned long long pl[8];
                    CK(cudaMemcpyFromSymbol(pl, kv_tl_plan, sizeof pl));
                    printf("  plan sections (cycles): start %.0f, loads+x1 %.0f, split+x2 %.0f, rank+scans+x3 %.0f, "
                           "results %.0f, after %.0f;", pl[5] / nb, pl[0] / nb, pl[1] / nb, pl[2] / nb, pl[3] / nb,
                           pl[4] / nb);
                }
                if (t[0][12]) /* the split merges (piece_done): thread 0's time for the merge, and for the same
                               * again (built with -DKV_TL_MERGE_AGAIN; else ~0) */
                    printf("  merges: %llu, mean %.2f us, again %.2f us;", t[0][12], t[0][10] / 1e3 / t[0][12],
                           t[0][11] / 1e3 / t[0][12]);
                if (t[0][8]) /* thread 0's merge in SM cycles (kv_combine_task): start to its lse, to its stores, the rest */
                    printf("  merge parts (cycles): to lse %.0f, to stores %.0f (partials in after the lse %.0f), stores and "
                           "end %.0f;", t[0][5] / (double)t[0][8], t[0][6] / (double)t[0][8], t[0][9] / (double)t[0][8],
                           t[0][7] / (double)t[0][8]);
                {
                    unsigned long long mo[3];
                    CK(cudaMemcpyFromSymbol(mo, kv_tl_merge, sizeof mo));
                    if (mo[1]) /* the merge's output offset ready, after its lse (kernel parameters, first row); all
                                * of the first splits' channels in, after its lse */
                        printf("  merge: lse to output offset %.0f cycles, to all first partials in %.0f;",
                               mo[0] / (double)mo[1], mo[2] / (double)mo[1]);
                }
                if (t[0][15]) /* the merging pieces: from the item's end to the merge's end (count, loads, merge) */
                    printf("  merging pieces: %llu, item end to merge end mean %.2f us;", t[0][15],
                           t[0][13] / 1e3 / t[0][15]);
                if (t[1][7] && t[1][12])
                    printf("\n    sm90 per item (cycles): pipeline %.0f = copy waits %.0f + product waits %.0f + rest; "
                           "epilogue %.0f; loop-to-end %.0f; tiles %.2f", t[1][13] / (double)t[1][7],
                           t[1][10] / (double)t[1][7], t[1][11] / (double)t[1][7], t[1][14] / (double)t[1][7],
                           t[1][15] / (double)t[1][7], t[1][12] / (double)t[1][7]);
                {
                    unsigned long long w[16];
                    CK(cudaMemcpyFromSymbol(w, kv_tl_ws, sizeof w));
                    if (w[0]) { /* the ws prefill kernel (attn_prefill_ws.cuh): consumer thread 128 per item, the
                                 * producer's thread 0 per item, mean SM cycles */
                        const double ni = (double)w[0], np = w[11] ? (double)w[11] : 1.0;
                        printf("\n    ws consumer per item (cycles; %llu items, %.2f tiles, Q issued early %.0f%%): "
                               "in consume %.0f = to Q %.0f + to K0 %.0f + first S+softmax %.0f + steps %.0f + last PV "
                               "%.0f + epilogue %.0f + rest; after (merge, take) %.0f"
                               "\n    ws producer per item (%llu items): claim+ring %.0f, item to K0 issued %.0f, "
                               "waits for free K %.0f / V %.0f",
                               w[0], w[1] / ni, 100.0 * w[10] / ni, w[8] / ni, w[2] / ni, w[3] / ni, w[4] / ni,
                               w[5] / ni, w[6] / ni, w[7] / ni, w[9] / ni, w[11], w[12] / np, w[13] / np, w[14] / np,
                               w[15] / np);
                    }
                }
                printf("\n");
                if (rep == reps - 1) item_report(1, t[2][7], t0);
                item_dump(c.name, rep, t[2][7], t0);
            }
            free_problem(P);
        }
        return 0;
#else
        fprintf(stderr, "timeline: build with -DKVATTN_TIMELINE\n");
        return 1;
#endif
    }
    if (!strcmp(mode, "profile_tiny")) { /* the fixed cost: B = 1, 64 keys, for ncu */
        Problem P = make(1, 32, 8, 128, 16, KVATTN_BF16);
        P.nq[0] = 1; P.nnew[0] = 1; P.S[0] = 63;
        return profile_twice(P);
    }
    if (!strcmp(mode, "profile_8x8192")) { /* decode 8 x 8192 (one-token append: the plain order), for ncu;
                                             * KVATTN_PROF_PAGE (default 16; 0 contiguous), KVATTN_TL_NONEW: no append;
                                             * KVATTN_PROF_B / KVATTN_PROF_L: another B x L (forty-fifth session) */
        const int page = getenv("KVATTN_PROF_PAGE") ? atoi(getenv("KVATTN_PROF_PAGE")) : 16;
        const int nonew = getenv("KVATTN_TL_NONEW") ? 1 : 0;
        const int pb = getenv("KVATTN_PROF_B") ? atoi(getenv("KVATTN_PROF_B")) : 8;
        const int pl = getenv("KVATTN_PROF_L") ? atoi(getenv("KVATTN_PROF_L")) : 8192;
        if (pb < 1 || pb > 256 || pl < 2 || pl > 65536) {
            fprintf(stderr, "profile_8x8192: KVATTN_PROF_B in [1, 256], KVATTN_PROF_L in [2, 65536]\n");
            return 2;
        }
        Problem P = make(pb, 32, 8, 128, page, KVATTN_BF16);
        for (int b = 0; b < pb; b++) { P.nq[b] = 1; P.nnew[b] = 1 - nonew; P.S[b] = pl - 1 + nonew; }
        return profile_twice(P);
    }
    if (!strcmp(mode, "profile_inflight")) { /* the inflight step's launches, for ncu */
        Problem P = make(64, 32, 8, 128, 16, KVATTN_BF16);
        for (int b = 0; b < 64; b++) {
            if (b % 16 == 5) { P.nq[b] = 512; P.nnew[b] = 512; P.S[b] = 0; }
            else { P.nq[b] = 1; P.nnew[b] = 1; P.S[b] = irand(512, 8192) - 1; }
        }
        P.causal = 1;
        return profile_twice(P);
    }
    if (!strcmp(mode, "profile")) { /* one decode and one prefill launch, for ncu */
        Problem P = make(64, 32, 8, 128, 16, KVATTN_BF16);
        for (int b = 0; b < 64; b++) { P.nq[b] = 1; P.nnew[b] = 1; P.S[b] = 4095; }
        build(P, false);
        run_attn(P, 0);
        CK(cudaDeviceSynchronize());
        free_problem(P);
        Problem Q = make(1, 32, 8, 128, 16, KVATTN_BF16);
        Q.nq[0] = 4096; Q.nnew[0] = 4096; Q.S[0] = 0; Q.causal = 1;
        build(Q, false);
        run_attn(Q, 0);
        CK(cudaDeviceSynchronize());
        free_problem(Q);
        return 0;
    }
    fprintf(stderr, "usage: %s validate|quick|bench|profile\n", argv[0]);
    return 1;
}
