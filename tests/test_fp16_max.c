/* test_fp16_max.c — fp16 values at the top of the type's range (|v| = 65504), on the CPU and, when present, the CUDA
 * backend. out is a convex combination of the values, so with every value 65504 the exact out is 65504, and it must
 * never come out as inf. The CUDA kernels round P to fp16 for P x V while l sums the fp32 P (as FlashAttention does);
 * scores chosen so that most keys' P = 0.5 + 1.05 x 2^-12 relative to the row max (rounded up to 0.5 + 2^-11) made
 * the fp32 out ~65531, which fp16 rounds to inf: measured on the H200 before the fifty-fifth session (every row of
 * decode and prefill, dev/numerics_probe.py (d), docs/perf/s55/run2). The kernels now clamp a finite result to the
 * largest finite fp16 value.
 * The scores: q = (1, 0, ..., 0); a key's channel 0 is 0 (a "top" key, score 0: the positions 0, 16, 32, 48 of every
 * 64, so that every 16-key slice of every tile holds one and each warp's running max is 0) or -1 (score -scale, with
 * scale = -ln(0.5 + 1.05 x 2^-12)); the other channels are random and do not enter the scores. Two variants: every
 * value +-65504 (out must be exactly +-65504), and values drawn from {65504, 65472} per element, with sign (out
 * within one fp16 ulp, 32, of the exact float64 answer, and finite); and every value +-65504 but for one key whose
 * channel 0 is +-inf and channel 1 NaN (those channels must come out +-inf and NaN: the clamp passes non-finite
 * results; the others +-65504). lse = ln(n_top + n_small e^-scale) to 1e-3.
 * Decode rows (one query) and prefill rows (64 queries, not causal); head dims 64 and 128; num_splits 1, 4 and
 * automatic; two sequences of 8192 and 3000 keys. Strides are left at their defaults (packed). k's channels past 0
 * (outside the scores) are one random row per case: drawn per element they took 253 s of CI's ASan run, now 7.5 s. */
#include "test_cuda_common.h"

#define H 4
#define HK 2
#define NPOS 8192

static const int32_t S[2] = {NPOS, 3000};

static int is_top(int pos) { return pos % 64 % 16 == 0; }

#define SPECIAL_POS 5 /* mode 2: the key whose channels 0 and 1 are +-inf and NaN (a small key, P > 0 in every row) */

static void max_case(int backend, int D, int NQ, int ns, int sign, int mode) {
    const int mixed = mode == 1;
    kvt_case_begin("%s, fp16, D %d, %d quer%s per sequence, num_splits %d, values %s%s",
                   backend == KVATTN_BACKEND_CUDA ? "CUDA" : "CPU", D, NQ, NQ == 1 ? "y" : "ies", ns,
                   sign > 0 ? "+" : "-",
                   mode == 1 ? "{65504, 65472}" : mode == 2 ? "65504, one key's channels 0 / 1 +-inf / NaN" : "65504");
    const double p_small = 0.5 + 1.05 * ldexp(1.0, -12);
    const float scale = (float)-log(p_small);
    const size_t nq_el = (size_t)2 * NQ * H * D, cache_el = (size_t)2 * NPOS * HK * D, nl = (size_t)2 * H * NQ;
    uint16_t *q = malloc(nq_el * 2), *k = malloc(cache_el * 2), *v = malloc(cache_el * 2), *o = malloc(nq_el * 2);
    float *l = malloc(nl * 4);
    for (size_t i = 0; i < nq_el; i++) q[i] = kvref_f32_to_f16(i % D == 0 ? 1.0f : 0.0f);
    /* k's channels past 0 (which do not enter the scores): one random row per case, the same at every position */
    uint16_t krow[256];
    for (int c = 0; c < D; c++) krow[c] = kvref_f32_to_f16((float)kvt_uniform(-1, 1));
    const uint16_t vmax = kvref_f32_to_f16((float)sign * 65504.0f), vless = kvref_f32_to_f16((float)sign * 65472.0f);
    uint64_t bits = 0;
    for (size_t i = 0; i < cache_el; i++) {
        const int c = (int)(i % D), pos = (int)(i / ((size_t)HK * D) % NPOS);
        k[i] = c == 0 ? kvref_f32_to_f16(is_top(pos) ? 0.0f : -1.0f) : krow[c];
        if (i % 64 == 0) bits = kvt_rand_u64();
        v[i] = mixed && (bits >> (i % 64) & 1) ? vless : vmax;
        if (mode == 2 && pos == SPECIAL_POS && c < 2) v[i] = c == 0 ? (sign > 0 ? 0x7c00 : 0xfc00) : 0x7e00;
    }
    for (size_t i = 0; i < nq_el; i++) o[i] = 0x7e77; /* poison: NaN */
    for (size_t i = 0; i < nl; i++) l[i] = 12345.f;
    kvt_buf bq = kvt_alloc(backend, nq_el * 2), bk = kvt_alloc(backend, cache_el * 2),
            bv = kvt_alloc(backend, cache_el * 2), bs = kvt_alloc(backend, sizeof S),
            bo = kvt_alloc(backend, nq_el * 2), bl = kvt_alloc(backend, nl * 4), ws = {0};
    kvattn_params p = kvattn_params_default(); /* strides: packed */
    p.dtype = KVATTN_F16; p.batch = 2; p.num_heads = H; p.num_kv_heads = HK; p.head_dim = D;
    p.q = bq.ptr; p.seqlen_q = NQ;
    p.k_cache = bk.ptr; p.v_cache = bv.ptr; p.cache_batch = 2; p.cache_capacity = NPOS;
    p.cache_seqlens = bs.ptr;
    p.out = bo.ptr;
    p.softmax_lse = bl.ptr; /* [B, H, NQ] */
    p.softmax_scale = scale;
    p.num_splits = ns;
    size_t wsb = 0;
    int st = kvattn_workspace_size(&p, backend, &wsb);
    if (st == KVATTN_OK) ws = kvt_alloc(backend, wsb ? wsb : 16);
    if (st != KVATTN_OK) kvt_failf("workspace_size: %s (%s)", kvattn_status_string(st), kvattn_last_error());
    else if (!ws.ptr || !bq.ptr || !bk.ptr || !bv.ptr || !bs.ptr || !bo.ptr || !bl.ptr)
        kvt_failf("allocation failed");
    else if (kvt_upload(&bq, q, nq_el * 2) || kvt_upload(&bk, k, cache_el * 2) || kvt_upload(&bv, v, cache_el * 2) ||
             kvt_upload(&bs, S, sizeof S) || kvt_upload(&bo, o, nq_el * 2) || kvt_upload(&bl, l, nl * 4))
        kvt_failf("upload failed");
    else if ((st = kvattn_forward(&p, backend, ws.ptr, wsb, NULL)) != KVATTN_OK)
        kvt_failf("forward: %s (%s)", kvattn_status_string(st), kvattn_last_error());
    else if (backend != KVATTN_BACKEND_CUDA || !cu_sync_ok("forward")) {
        if (kvt_download(&bo, o, nq_el * 2) || kvt_download(&bl, l, nl * 4)) kvt_failf("download failed");
        int bad = 0;
        double worst = 0;
        for (int b = 0; b < 2; b++)
            for (int kh = 0; kh < HK; kh++) {
                /* the exact answer of this sequence and KV head, per channel (every query row and head of the group
                 * has the same scores) */
                double n_top = 0, n_small = 0, *ex = calloc((size_t)D, sizeof(double));
                const double es = exp(-(double)scale);
                for (int pos = 0; pos < S[b]; pos++) {
                    const double w = is_top(pos) ? 1.0 : es;
                    if (is_top(pos)) n_top++; else n_small++;
                    for (int c = 0; c < D; c++)
                        ex[c] += w * kvref_load(KVATTN_F16, v, (((int64_t)b * NPOS + pos) * HK + kh) * D + c);
                }
                const double lsum = n_top + n_small * es, lse = log(lsum);
                for (int c = 0; c < D; c++) ex[c] /= lsum;
                for (int hh = 0; hh < H / HK; hh++)
                    for (int i = 0; i < NQ; i++) {
                        const int h = kh * (H / HK) + hh;
                        const float got_l = l[(b * H + h) * NQ + i];
                        if (!(fabs(got_l - lse) <= 1e-3) && bad++ < 4)
                            kvt_failf("sequence %d row %d head %d: lse %.9g, want %.9g", b, i, h, got_l, lse);
                        for (int c = 0; c < D; c++) {
                            const double g = kvref_load(KVATTN_F16, o, (((int64_t)b * NQ + i) * H + h) * D + c);
                            const double e = fabs(g - ex[c]);
                            if (mode != 2 && (e > worst || e != e)) worst = e != e ? INFINITY : e;
                            const int ok = mode == 2 && c == 0 ? g == sign * (double)INFINITY
                                           : mode == 2 && c == 1 ? g != g
                                           : mixed             ? e <= 32.0
                                                               : g == sign * 65504.0;
                            if (!ok && bad++ < 4)
                                kvt_failf("sequence %d row %d head %d ch %d: out %.9g, want %.9g", b, i, h, c, g,
                                          ex[c]);
                        }
                    }
                free(ex);
            }
        if (bad > 4) kvt_failf("... %d bad values in all", bad);
        if (!kvt_guards_ok(&bo) || !kvt_guards_ok(&bl) || !kvt_guards_ok(&ws)) kvt_failf("guard bytes overwritten");
        if (kvt_case_failed()) printf("  worst |out - exact| %.6g\n", worst);
    }
    kvt_buf *all[7] = {&bq, &bk, &bv, &bs, &bo, &bl, &ws};
    for (int i = 0; i < 7; i++) kvt_free(all[i]);
    free(q);
    free(k);
    free(v);
    free(o);
    free(l);
    kvt_case_end();
}

static void run_backend(int backend) {
    static const int dims[2] = {64, 128}, nqs[2] = {1, 64}, splits[3] = {1, 4, 0};
    for (int d = 0; d < 2; d++)
        for (int n = 0; n < 2; n++)
            for (int s = 0; s < 3; s++)
                for (int sign = 1; sign >= -1; sign -= 2)
                    for (int mode = 0; mode < 3; mode++) max_case(backend, dims[d], nqs[n], splits[s], sign, mode);
}

int main(void) {
    kvt_init("test_fp16_max");
    run_backend(KVATTN_BACKEND_CPU);
    if (cu_gpu_or_skip(2 * 2 * 3 * 2 * 3)) run_backend(KVATTN_BACKEND_CUDA);
    return kvt_finish();
}
