/* test_cuda_limits.c — the CUDA kernels at the length limit: a cache of KVATTN_MAX_CACHE_TOKENS (2^31 - 2^16)
 * keys, in every split mode. The kernels' key positions are int32; a split piece whose end was computed as
 * (block + 1) * block_keys wrapped past 2^31 and dropped its keys with a clean status (batch-invariant mode with
 * num_splits 64: the last of 64 blocks of 2^25 keys). Found by a kernel audit, twenty-eighth session.
 *
 * The cache is one stored key row and one value row, broadcast (every stride 0; read only, no append), so it
 * takes a few bytes. Every key is the same, so each query row's scores are all equal and the reference is
 * closed-form: lse = scale * dot(q, k) + ln(visible keys), out = v. A dropped piece of keys moves lse by
 * ln(S / kept), which for a whole piece is >= 0.015 here. Values of v are +-1 and +-2. out is checked only where
 * every split piece has at most 2^25 keys: with num_splits 2 or 3 a piece holds ~2^30 keys and its fp32 sums of
 * p * v stop growing (measured on the H200: out came out v / 4 and 3v / 8; lse right), a precision limit of fp32
 * accumulation (DECISIONS.md, "Limits"), not a dropped key. Two sequences: the long one and a short one on the
 * same cache (the batch's other work).
 * Streams 2^31 keys per case (~1 s each on an H200): skipped under KVATTN_TEST_QUICK (sanitizer runs). */
#include "test_cuda_common.h"

#ifdef KVATTN_HAVE_CUDA
#define H 4
#define HK 2
#define D 64

static void limit_case(int dtype, int batch_invariant, int num_splits, int causal_window, int check_out) {
    kvt_case_begin("%s, S = KVATTN_MAX_CACHE_TOKENS, batch_invariant %d, num_splits %d%s%s",
                   dtype == KVATTN_BF16 ? "bf16" : "fp16", batch_invariant, num_splits,
                   causal_window ? ", window_left 2^30 (part of the cache visible)" : "",
                   check_out ? "" : " (lse only: pieces of ~2^30 keys)");
    const int32_t S[2] = {KVATTN_MAX_CACHE_TOKENS, 3000};
    const int32_t NQ = 2; /* two query rows per sequence: the packed rows G x 2 = 4 */
    uint16_t q[2 * NQ * H * D], k[HK * D], v[HK * D];
    for (int i = 0; i < 2 * NQ * H * D; i++)
        q[i] = dtype == KVATTN_BF16 ? kvref_f32_to_bf16((float)kvt_uniform(-1, 1)) : kvref_f32_to_f16((float)kvt_uniform(-1, 1));
    static const float vals[4] = {-2.f, -1.f, 1.f, 2.f};
    for (int i = 0; i < HK * D; i++) {
        float kv = (float)kvt_uniform(-1, 1), vv = vals[kvt_randint(0, 3)];
        k[i] = dtype == KVATTN_BF16 ? kvref_f32_to_bf16(kv) : kvref_f32_to_f16(kv);
        v[i] = dtype == KVATTN_BF16 ? kvref_f32_to_bf16(vv) : kvref_f32_to_f16(vv);
    }
    const size_t out_elems = (size_t)2 * NQ * H * D;
    kvt_buf bq = kvt_alloc(KVATTN_BACKEND_CUDA, sizeof q), bk = kvt_alloc(KVATTN_BACKEND_CUDA, sizeof k),
            bv = kvt_alloc(KVATTN_BACKEND_CUDA, sizeof v), bs = kvt_alloc(KVATTN_BACKEND_CUDA, sizeof S),
            bo = kvt_alloc(KVATTN_BACKEND_CUDA, out_elems * 2), bl = kvt_alloc(KVATTN_BACKEND_CUDA, 2 * NQ * H * 4);
    uint16_t *o = malloc(out_elems * 2);
    float *l = malloc(2 * NQ * H * 4);
    for (size_t i = 0; i < out_elems; i++) o[i] = 0x7e77; /* poison: a NaN in both types */
    for (int i = 0; i < 2 * NQ * H; i++) l[i] = 12345.f;
    kvattn_params p = kvattn_params_default();
    p.dtype = dtype; p.batch = 2; p.num_heads = H; p.num_kv_heads = HK; p.head_dim = D;
    p.q = bq.ptr; p.seqlen_q = NQ; p.q_batch_stride = NQ * H * D; p.q_row_stride = H * D; p.q_head_stride = D;
    p.k_cache = bk.ptr; p.v_cache = bv.ptr; p.cache_batch = 1; p.cache_capacity = KVATTN_MAX_CACHE_TOKENS;
    p.k_batch_stride = p.v_batch_stride = 0; p.k_row_stride = p.v_row_stride = 0; /* every position: one row */
    p.k_head_stride = p.v_head_stride = D;
    int32_t bidx[2] = {0, 0};
    kvt_buf bb = kvt_alloc(KVATTN_BACKEND_CUDA, sizeof bidx);
    p.cache_batch_idx = bb.ptr;
    p.cache_seqlens = bs.ptr;
    p.out = bo.ptr; p.out_batch_stride = NQ * H * D; p.out_row_stride = H * D; p.out_head_stride = D;
    p.softmax_lse = bl.ptr; p.lse_batch_stride = H * NQ; p.lse_head_stride = NQ; p.lse_row_stride = 1;
    p.causal = 1;
    if (causal_window) p.window_left = 1 << 30;
    p.batch_invariant = batch_invariant;
    p.num_splits = num_splits;
    size_t wsb = 0;
    kvt_buf ws = {0};
    int st = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &wsb);
    if (st == KVATTN_OK) ws = kvt_alloc(KVATTN_BACKEND_CUDA, wsb ? wsb : 16);
    if (st != KVATTN_OK) kvt_failf("workspace_size: %s (%s)", kvattn_status_string(st), kvattn_last_error());
    else if (!ws.ptr || !bq.ptr || !bk.ptr || !bv.ptr || !bs.ptr || !bo.ptr || !bl.ptr || !bb.ptr)
        kvt_failf("device allocation failed");
    else if (kvt_upload(&bq, q, sizeof q) || kvt_upload(&bk, k, sizeof k) || kvt_upload(&bv, v, sizeof v) ||
             kvt_upload(&bs, S, sizeof S) || kvt_upload(&bo, o, out_elems * 2) || kvt_upload(&bl, l, 2 * NQ * H * 4) ||
             kvt_upload(&bb, bidx, sizeof bidx))
        kvt_failf("upload failed");
    else if ((st = kvattn_forward(&p, KVATTN_BACKEND_CUDA, ws.ptr, wsb, NULL)) != KVATTN_OK)
        kvt_failf("forward: %s (%s)", kvattn_status_string(st), kvattn_last_error());
    else if (!cu_sync_ok("forward")) {
        kvattn_device_status ds;
        st = kvattn_device_status_read(ws.ptr, NULL, &ds);
        if (st != KVATTN_OK || ds.flags != 0 || ds.num_failed != 0)
            kvt_failf("device status: %s, flags 0x%x, %d failed (want clean)", kvattn_status_string(st), ds.flags,
                      ds.num_failed);
        if (kvt_download(&bo, o, out_elems * 2) || kvt_download(&bl, l, 2 * NQ * H * 4)) kvt_failf("download failed");
        int bad = 0;
        const double scale = 1.0 / sqrt((double)D);
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < NQ; i++)
                for (int h = 0; h < H; h++) {
                    const int kh = h / (H / HK);
                    double dot = 0;
                    for (int c = 0; c < D; c++)
                        dot += kvref_load(dtype, q, ((int64_t)(b * NQ + i) * H + h) * D + c) *
                               kvref_load(dtype, k, (int64_t)kh * D + c);
                    /* query i sits at key index S - NQ + i (bottom-right): keys 0 .. S - NQ + i visible
                     * (causal), the last window_left + 1 of them with the window */
                    int64_t visible = (int64_t)S[b] - NQ + i + 1;
                    if (causal_window && visible > (1 << 30) + 1) visible = (1 << 30) + 1;
                    const double want = scale * dot + log((double)visible);
                    const float got = l[(b * H + h) * NQ + i];
                    if (!(fabs(got - want) <= 2e-3) && bad++ < 4)
                        kvt_failf("sequence %d row %d head %d: lse %.6f, want %.6f (%lld visible keys; ln ratio "
                                  "%.4f)", b, i, h, got, want, (long long)visible, got - want);
                    for (int c = 0; c < D && check_out; c++) {
                        const double g = kvref_load(dtype, o, ((int64_t)(b * NQ + i) * H + h) * D + c);
                        const double w = kvref_load(dtype, v, (int64_t)kh * D + c);
                        if (!(fabs(g - w) <= 1e-2 * fabs(w)) && bad++ < 4)
                            kvt_failf("sequence %d row %d head %d ch %d: out %.6g, want %.6g", b, i, h, c, g, w);
                    }
                }
        if (!kvt_guards_ok(&bo) || !kvt_guards_ok(&bl) || !kvt_guards_ok(&ws)) kvt_failf("guard bytes overwritten");
    }
    kvt_buf *all[8] = {&bq, &bk, &bv, &bs, &bo, &bl, &bb, &ws};
    for (int i = 0; i < 8; i++) kvt_free(all[i]);
    free(o);
    free(l);
    kvt_case_end();
}
#endif

int main(void) {
    kvt_init("test_cuda_limits");
    /* (batch_invariant, num_splits, window, check out): auto; fixed 2048-key blocks; 64 blocks of 2^25 keys (the
     * wrap); a few auto counts; a window over part of the cache */
    static const int cases[][4] = {{0, 0, 0, 1}, {1, 0, 0, 1}, {1, 64, 0, 1}, {1, 63, 0, 1}, {0, 2, 0, 0},
                                   {0, 3, 0, 0}, {0, 64, 0, 1}, {1, 64, 1, 1}};
    const int n = (int)(sizeof cases / sizeof cases[0]);
    if (!cu_gpu_or_skip(n)) return kvt_finish();
    if (kvt_quick()) {
        for (int i = 0; i < n; i++) {
            kvt_case_begin("limit case %d", i);
            kvt_case_skip("KVATTN_TEST_QUICK: each case streams 2^31 keys");
        }
        return kvt_finish();
    }
#ifdef KVATTN_HAVE_CUDA
    for (int i = 0; i < n; i++) limit_case(i & 1 ? KVATTN_F16 : KVATTN_BF16, cases[i][0], cases[i][1], cases[i][2], cases[i][3]);
#endif
    return kvt_finish();
}
