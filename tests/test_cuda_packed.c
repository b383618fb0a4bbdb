/* test_cuda_packed.c — flash_attn_varlen_func's layout on the CUDA backend: packed keys, one contiguous cache row of
 * capacity total_k that every sequence reads (batch stride 0), sequence b's keys between cache_leftpad[b] and
 * cache_seqlens[b] (python/kvattn/attention.py, flash_attn_varlen_func). At head dims 200 - 256 the sm_90a prefill
 * kernel copies full K / V tiles by tensor maps, and for batch stride 0 the host encodes one outer coordinate
 * (attn.cu kv_ws_tmaps_make: outer0; attn_prefill_ws.cuh: box_c3 = 0): no other test reaches that form (the C
 * tests' caches have a batch stride; the Python grid runs head dim 32). Head dims 256 and 200 (maps; 200: the last
 * box partly past the head dim), 136 (DP 256 by cp.async) and 128 (DP 128) as controls. The sequences' key ranges
 * are separated by gaps of 0 - 70 rows of NaN, so a tile that reads a row past its sequence's keys (the next
 * sequence's, or a gap's) without masking it shows. Prompts (prefill items) beside decode rows, causal with
 * n_q != n_k, sliding window with softcap (Gemma-like), ALiBi. Checked against the float64 reference (out, lse,
 * the caches untouched). B sequences, H query heads, Hk key/value heads, D head dim. */
#include "test_cuda_common.h"

#define PB 5

static void packed_case(int dtype, int D, int H, int Hk, int opt) {
    static const char *opt_name[4] = {"causal", "window (100, 0) + softcap 30", "ALiBi [H], not causal",
                                      "causal, softcap 5 + ALiBi [B, H], window (300, -1)"};
    int n_q[PB] = {kvt_randint(130, 300), 1, kvt_randint(17, 70), 1, kvt_randint(2, 9)};
    int len[PB], zero[PB] = {0}, off[PB], gap[PB];
    int rows = 0;
    for (int b = 0; b < PB; b++) {
        len[b] = n_q[b] + kvt_randint(0, 600); /* n_k >= n_q: causal rows see keys */
        gap[b] = kvt_randint(0, 70);
        off[b] = rows + gap[b];
        rows = off[b] + len[b];
    }
    rows += kvt_randint(0, 70);
    kvt_case_begin("%s, D %d, H %d / Hk %d, packed keys (batch stride 0) of %d rows, n_q %d/%d/%d/%d/%d: %s",
                   dtype == KVATTN_BF16 ? "bf16" : "fp16", D, H, Hk, rows, n_q[0], n_q[1], n_q[2], n_q[3], n_q[4],
                   opt_name[opt]);
    cu_spec sp = cu_spec_default();
    sp.dtype = dtype;
    sp.B = PB;
    sp.H = H;
    sp.Hk = Hk;
    sp.D = D;
    sp.n_q = n_q;
    sp.n_new = zero;
    sp.S = len;
    sp.paged = 0;
    sp.capacity = rows;
    sp.causal = opt == 0 || opt == 1 || opt == 3;
    kvt_problem P;
    cu_build(&P, &sp);
    kvattn_params *p = &P.ph;
    /* no new tokens: the caches are read only, so they may broadcast */
    p->k_new = p->v_new = NULL;
    p->cu_seqlens_knew = NULL;
    p->total_knew = 0;
    P.k_new.used = P.v_new.used = P.cu_knew.used = 0;
    /* one row of `rows` keys read by every sequence (cache_batch B rows, all the same storage) */
    p->k_batch_stride = p->v_batch_stride = 0;
    p->cache_capacity = rows;
    kvt_arr_alloc(&P, &P.leftpad, "cache_leftpad", (size_t)PB * 4);
    int32_t *lp = P.leftpad.host, *sl = P.seqlens.host;
    for (int b = 0; b < PB; b++) {
        lp[b] = off[b];
        sl[b] = off[b] + len[b];
    }
    /* the gaps (and the rows past the last sequence) NaN in both caches, every head and channel */
    const int64_t row_elems = (int64_t)Hk * D;
    for (int w = 0; w < 2; w++) {
        uint16_t *c = w ? P.v_cache.host : P.k_cache.host;
        int r = 0;
        for (int b = 0; b <= PB; b++) {
            const int end = b < PB ? off[b] : rows;
            for (; r < end; r++)
                for (int64_t e = 0; e < row_elems; e++) c[r * row_elems + e] = 0xFFFF;
            if (b < PB) r = off[b] + len[b];
        }
    }
    if (opt == 1 || opt == 3) {
        p->window_left = opt == 1 ? 100 : 300;
        p->window_right = opt == 1 ? 0 : -1;
        p->softcap = opt == 1 ? 30.0f : 5.0f;
    }
    if (opt >= 2) {
        const int per_batch = opt == 3;
        const size_t n = per_batch ? (size_t)PB * (H + 1) : (size_t)H;
        kvt_arr_alloc(&P, &P.alibi, "alibi_slopes", n * 4);
        for (size_t i = 0; i < n; i++) ((float *)P.alibi.host)[i] = (float)kvt_uniform(0.0, 0.1);
        p->alibi_batch_stride = per_batch ? H + 1 : 0;
    }
    p->softmax_scale = (float)kvt_uniform(0.03, 0.1); /* scores spread over the keys: a wrong key shows */
    if (kvt_problem_upload(&P, 1) == 0 && kvt_problem_run_case(&P, kvt_expect_ok())) {
        kvt_case_skip("unsupported");
        kvt_problem_free(&P);
        return;
    }
    cu_sync_ok("after the call");
    kvt_problem_free(&P);
    kvt_case_end();
}

int main(void) {
    kvt_init("test_cuda_packed");
    static const int dims[4][3] = {{256, 8, 2}, {200, 4, 1}, {136, 8, 4}, {128, 8, 2}}; /* D, H, Hk */
    if (!cu_gpu_or_skip(4 * 4)) return kvt_finish();
    for (int d = 0; d < 4; d++)
        for (int opt = 0; opt < 4; opt++)
            packed_case((d + opt) & 1 ? KVATTN_F16 : KVATTN_BF16, dims[d][0], dims[d][1], dims[d][2], opt);
    return kvt_finish();
}
