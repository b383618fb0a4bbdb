/* test_huge_scores.c — split merges at huge (finite) scores, on the CPU and, when present, the CUDA backend.
 * Every key of a sequence is the same stored row (the cache broadcast: stride 0 over positions), so all of a query
 * row's scores are tied, whatever their rounding, and the exact answer is closed-form: out = v, lse = score +
 * ln(visible keys). The scores are pushed to |s| ~ 1e4 .. 1e8 by softmax_scale (q and k positive, or k negative for
 * negative scores). A merge that weighs its pieces by an fp32 lse per piece rounds that lse by ~|s| 2^-24, and the
 * merged weights no longer sum to 1: the CUDA backend's merge did so until the fifty-fourth session and returned
 * out = 1.0117 v (fp16, 4 splits, s = 1e6) and out = nsplit x v at s = 1e8 (dev/numerics_probe.py). A merge that
 * carries each piece's (max, sum) gives v exactly.
 * out is checked to within a quarter of a 16-bit ulp of v (v is +-1 or +-2: that is, exactly v), except the CUDA
 * prefill rows: there to within u |v| (u: the 16-bit ulp at 1.0). The prefill kernels round P to the element type
 * for P x V while l sums the fp32 P (as FlashAttention does), and they take P = exp2 of the fma residue s c - m, not
 * of a rounded difference, so tied scores give P = exp2(residue), the same for every key, rather than 1, and its
 * 16-bit rounding moves every weight the same way: measured on the H200, out one 16-bit ulp below v (ratio 1 - u/2)
 * at |s| >= 1e4 (fp16) / 1e6 (bf16) with or without splits (fifty-fourth session, docs/perf/s54). lse to 1e-5 |score| + 1e-3 (the scores' own fp32 rounding). Decode rows (one query) and prefill
 * rows (64 queries, not causal), head dims 64 and 128, num_splits 1, 2, 4, 8, automatic, batch-invariant automatic,
 * and 48 pieces (below). Two sequences of 4096 (98304 for the 48-piece cases) and 2500 keys on the same broadcast
 * cache. */
#include "test_cuda_common.h"

#define H 4
#define HK 2
#define NKEYS 4096

static const double SCORES[] = {1e4, 1e6, -1e6, 1e8};
/* (batch_invariant, num_splits, first sequence's keys). The last two cut it into 48 pieces on CUDA (auto: pieces of
 * >= 16 KV tiles of 64 keys, capped at 48; batch-invariant: blocks of 2048 keys), past the merge's first 32 splits
 * (its lanes' second round); the others into at most 4. */
#define LONGKEYS 98304
static const int SPLITS[][3] = {{0, 1, NKEYS}, {0, 2, NKEYS}, {0, 4, NKEYS}, {0, 8, NKEYS}, {0, 0, NKEYS},
                                {1, 0, NKEYS}, {0, 48, LONGKEYS}, {1, 64, LONGKEYS}};

static void huge_case(int backend, int dtype, int D, int NQ, double score, int bi, int ns, int nkeys) {
    kvt_case_begin("%s, %s, D %d, %d quer%s per sequence, scores ~ %g, batch_invariant %d, num_splits %d, %d keys",
                   backend == KVATTN_BACKEND_CUDA ? "CUDA" : "CPU", dtype == KVATTN_BF16 ? "bf16" : "fp16", D, NQ,
                   NQ == 1 ? "y" : "ies", score, bi, ns, nkeys);
    if (kvt_quick() && backend == KVATTN_BACKEND_CPU && nkeys > NKEYS && NQ > 1) {
        kvt_case_skip("KVATTN_TEST_QUICK: 64 query rows over 98304 keys on the CPU (sanitizer runs)");
        return;
    }
    const int32_t S[2] = {nkeys, 2500};
    const size_t nq_el = (size_t)2 * NQ * H * D, out_elems = nq_el, nl = (size_t)2 * NQ * H;
    uint16_t *q = malloc(nq_el * 2), *k = malloc((size_t)HK * D * 2), *v = malloc((size_t)HK * D * 2);
    uint16_t *o = malloc(out_elems * 2);
    float *l = malloc(nl * 4);
    const double ksign = score < 0 ? -1.0 : 1.0;
#define TO16(x) (dtype == KVATTN_BF16 ? kvref_f32_to_bf16((float)(x)) : kvref_f32_to_f16((float)(x)))
    for (size_t i = 0; i < nq_el; i++) q[i] = TO16(kvt_uniform(0.5, 1.0));
    static const float vals[4] = {-2.f, -1.f, 1.f, 2.f};
    for (int i = 0; i < HK * D; i++) {
        k[i] = TO16(ksign * kvt_uniform(0.5, 1.0));
        v[i] = TO16(vals[kvt_randint(0, 3)]);
    }
#undef TO16
    /* the scale that puts the mean score at `score` */
    double mean_dot = 0;
    for (int r = 0; r < 2 * NQ; r++)
        for (int h = 0; h < H; h++)
            for (int c = 0; c < D; c++)
                mean_dot += kvref_load(dtype, q, ((int64_t)r * H + h) * D + c) *
                            kvref_load(dtype, k, (int64_t)(h / (H / HK)) * D + c);
    mean_dot /= 2.0 * NQ * H;
    const float scale = (float)(score / mean_dot);
    for (size_t i = 0; i < out_elems; i++) o[i] = 0x7e77; /* poison: a NaN in both types */
    for (size_t i = 0; i < nl; i++) l[i] = 12345.f;
    int32_t bidx[2] = {0, 0};
    kvt_buf bq = kvt_alloc(backend, nq_el * 2), bk = kvt_alloc(backend, (size_t)HK * D * 2),
            bv = kvt_alloc(backend, (size_t)HK * D * 2), bs = kvt_alloc(backend, sizeof S),
            bo = kvt_alloc(backend, out_elems * 2), bl = kvt_alloc(backend, nl * 4),
            bb = kvt_alloc(backend, sizeof bidx), ws = {0};
    kvattn_params p = kvattn_params_default();
    p.dtype = dtype; p.batch = 2; p.num_heads = H; p.num_kv_heads = HK; p.head_dim = D;
    p.q = bq.ptr; p.seqlen_q = NQ; p.q_batch_stride = (int64_t)NQ * H * D; p.q_row_stride = H * D; p.q_head_stride = D;
    p.k_cache = bk.ptr; p.v_cache = bv.ptr; p.cache_batch = 1; p.cache_capacity = nkeys;
    p.k_batch_stride = p.v_batch_stride = 0; p.k_row_stride = p.v_row_stride = 0; /* every position: one row */
    p.k_head_stride = p.v_head_stride = D;
    p.cache_batch_idx = bb.ptr;
    p.cache_seqlens = bs.ptr;
    p.out = bo.ptr; p.out_batch_stride = (int64_t)NQ * H * D; p.out_row_stride = H * D; p.out_head_stride = D;
    p.softmax_lse = bl.ptr; p.lse_batch_stride = H * NQ; p.lse_head_stride = NQ; p.lse_row_stride = 1;
    p.softmax_scale = scale;
    p.batch_invariant = bi;
    p.num_splits = ns;
    size_t wsb = 0;
    int st = kvattn_workspace_size(&p, backend, &wsb);
    if (st == KVATTN_OK) ws = kvt_alloc(backend, wsb ? wsb : 16);
    if (st != KVATTN_OK) kvt_failf("workspace_size: %s (%s)", kvattn_status_string(st), kvattn_last_error());
    else if (!ws.ptr || !bq.ptr || !bk.ptr || !bv.ptr || !bs.ptr || !bo.ptr || !bl.ptr || !bb.ptr)
        kvt_failf("allocation failed");
    else if (kvt_upload(&bq, q, nq_el * 2) || kvt_upload(&bk, k, (size_t)HK * D * 2) ||
             kvt_upload(&bv, v, (size_t)HK * D * 2) || kvt_upload(&bs, S, sizeof S) ||
             kvt_upload(&bo, o, out_elems * 2) || kvt_upload(&bl, l, nl * 4) || kvt_upload(&bb, bidx, sizeof bidx))
        kvt_failf("upload failed");
    else if ((st = kvattn_forward(&p, backend, ws.ptr, wsb, NULL)) != KVATTN_OK)
        kvt_failf("forward: %s (%s)", kvattn_status_string(st), kvattn_last_error());
    else if (backend != KVATTN_BACKEND_CUDA || !cu_sync_ok("forward")) {
        if (backend == KVATTN_BACKEND_CUDA) {
            kvattn_device_status ds;
            st = kvattn_device_status_read(ws.ptr, NULL, &ds);
            if (st != KVATTN_OK || ds.flags != 0 || ds.num_failed != 0)
                kvt_failf("device status: %s, flags 0x%x, %d failed (want clean)", kvattn_status_string(st),
                          ds.flags, ds.num_failed);
        }
        if (kvt_download(&bo, o, out_elems * 2) || kvt_download(&bl, l, nl * 4)) kvt_failf("download failed");
        const double u = dtype == KVATTN_BF16 ? 1.0 / 128 : 1.0 / 1024; /* a 16-bit ulp at 1.0 */
        const double tol = backend == KVATTN_BACKEND_CUDA && NQ > 1 ? u : u / 4;
        int bad = 0;
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < NQ; i++)
                for (int h = 0; h < H; h++) {
                    const int kh = h / (H / HK);
                    double dot = 0;
                    for (int c = 0; c < D; c++)
                        dot += kvref_load(dtype, q, ((int64_t)(b * NQ + i) * H + h) * D + c) *
                               kvref_load(dtype, k, (int64_t)kh * D + c);
                    const double s = (double)scale * dot, want = s + log((double)S[b]);
                    const float got = l[(b * H + h) * NQ + i];
                    if (!(fabs(got - want) <= 1e-5 * fabs(s) + 1e-3) && bad++ < 4)
                        kvt_failf("sequence %d row %d head %d: lse %.9g, want %.9g", b, i, h, got, want);
                    for (int c = 0; c < D; c++) {
                        const double g = kvref_load(dtype, o, ((int64_t)(b * NQ + i) * H + h) * D + c);
                        const double w = kvref_load(dtype, v, (int64_t)kh * D + c);
                        const double e = fabs(g - w) / fabs(w);
                        if (!(e <= tol) && bad++ < 4)
                            kvt_failf("sequence %d row %d head %d ch %d: out %.6g, want %.6g (ratio %.6g)", b, i, h,
                                      c, g, w, g / w);
                    }
                }
        if (bad > 4) kvt_failf("... %d bad values in all", bad);
        if (!kvt_guards_ok(&bo) || !kvt_guards_ok(&bl) || !kvt_guards_ok(&ws)) kvt_failf("guard bytes overwritten");
    }
    kvt_buf *all[8] = {&bq, &bk, &bv, &bs, &bo, &bl, &bb, &ws};
    for (int i = 0; i < 8; i++) kvt_free(all[i]);
    free(q);
    free(k);
    free(v);
    free(o);
    free(l);
    kvt_case_end();
}

static void run_backend(int backend) {
    static const int dtypes[2] = {KVATTN_F16, KVATTN_BF16}, dims[2] = {64, 128}, nqs[2] = {1, 64};
    const int nsc = (int)(sizeof SCORES / sizeof SCORES[0]), nsp = (int)(sizeof SPLITS / sizeof SPLITS[0]);
    for (int t = 0; t < 2; t++)
        for (int d = 0; d < 2; d++)
            for (int n = 0; n < 2; n++)
                for (int s = 0; s < nsc; s++)
                    for (int k = 0; k < nsp; k++)
                        huge_case(backend, dtypes[t], dims[d], nqs[n], SCORES[s], SPLITS[k][0], SPLITS[k][1],
                                  SPLITS[k][2]);
}

int main(void) {
    kvt_init("test_huge_scores");
    run_backend(KVATTN_BACKEND_CPU);
    const int n_gpu = 2 * 2 * 2 * (int)(sizeof SCORES / sizeof SCORES[0]) * (int)(sizeof SPLITS / sizeof SPLITS[0]);
    if (cu_gpu_or_skip(n_gpu)) run_backend(KVATTN_BACKEND_CUDA);
    return kvt_finish();
}
