/* audit_overflow.c — two silent wrong-result findings of the kvattn CUDA audit (not out-of-bounds accesses; run
 * them WITHOUT compute-sanitizer: case 1 streams 2^31 keys and takes ~1 s plain, much longer under memcheck).
 *
 * 1. Batch-invariant split with num_splits = 64 over a cache of KVATTN_MAX_CACHE_TOKENS keys: kv_sched_item
 *    (attn_kernels.cuh, `it.khi = min(q.khi, (blk + 1) * q.inv_block)`) computes the end of the last key block in
 *    int32: 64 * 2^25 = 2^31 wraps to INT32_MIN, so the last piece is empty and its 33488896 keys are dropped.
 *    q = 0, so every score is 0 and lse must be ln(S) = 21.48753; with the drop it reads ln(2113929216) = 21.47180.
 *    Controls: the same call with num_splits = 0 (batch-invariant, 2048-key blocks) and batch_invariant = 0.
 *    The cache is one stored row broadcast by row stride 0 (read-only: no k_new), so it needs a few bytes.
 * 2. A sequence with more than 2^30 packed query rows (n_q * H / Hk): kv_seq_rows (attn_kernels.cuh) returns 0,
 *    so the scheduler gives it no tile: its out rows are never written, and the status record says all good.
 *    fixed mode, seqlen_q = 65536, H = 16385, Hk = 1 (G = 16385): 65536 * 16385 = 1073807360 > 2^30 - 1.
 *    q is broadcast (strides 0, read-only); out is 17.2 GB (the one real allocation). v_cache = 1.0, so every out
 *    element must be 1.0. Skipped with "--no-big" (needs ~22 GB of device memory).
 * Usage: audit_overflow [--no-big] */
#include "audit_common.h"

/* The call on a workspace of the queried size; 0 (verdict FAIL, everything freed) when the size query or the call
 * fails, else 1 with the device status record in *ds. */
static int run_call(const char *name, kvattn_params *p, size_t *wsb, kvattn_device_status *ds) {
    char det[300];
    int st = kvattn_workspace_size(p, KVATTN_BACKEND_CUDA, wsb);
    if (st) { snprintf(det, sizeof det, "workspace_size: %s", kvattn_last_error()); verdict(name, 0, det); free_all(); return 0; }
    void *ws = dalloc(*wsb);
    free_spacers();
    st = kvattn_forward(p, KVATTN_BACKEND_CUDA, ws, *wsb, NULL);
    if (st) { snprintf(det, sizeof det, "forward: %s", kvattn_last_error()); verdict(name, 0, det); free_all(); return 0; }
    CK(cudaDeviceSynchronize());
    kvattn_device_status_read(ws, NULL, ds);
    return 1;
}

static int lse_case(const char *name, int inv, int num_splits) {
    const int32_t C = KVATTN_MAX_CACHE_TOKENS, D = 8;
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_F16; p.batch = 1; p.num_heads = 1; p.num_kv_heads = 1; p.head_dim = D;
    uint16_t zeros[8] = {0}, ones[8];
    for (int i = 0; i < 8; i++) ones[i] = f2h(1.0f);
    int32_t cu[2] = {0, 1}, S = C;
    p.q = dupload(zeros, 16); p.cu_seqlens_q = dupload(cu, 8); p.total_q = 1;
    p.q_row_stride = D; p.q_head_stride = D;
    p.k_cache = dupload(zeros, 16); p.v_cache = dupload(ones, 16);
    p.k_batch_stride = p.v_batch_stride = 0; p.k_row_stride = p.v_row_stride = 0; p.k_head_stride = p.v_head_stride = 0;
    p.cache_batch = 1; p.cache_capacity = C;
    p.cache_seqlens = dupload(&S, 4);
    uint16_t sent[8];
    for (int i = 0; i < 8; i++) sent[i] = 0x7777;
    p.out = dupload(sent, 16); p.out_row_stride = D; p.out_head_stride = D;
    float lse_init = 12345.0f, lse = 0;
    p.softmax_lse = dupload(&lse_init, 4); p.lse_head_stride = 1; p.lse_row_stride = 1;
    p.batch_invariant = inv; p.num_splits = num_splits;
    size_t wsb = 0;
    char det[300];
    kvattn_device_status ds;
    if (!run_call(name, &p, &wsb, &ds)) return 0;
    uint16_t out[8];
    CK(cudaMemcpy(&lse, p.softmax_lse, 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(out, p.out, 16, cudaMemcpyDeviceToHost));
    const double want = log((double)S);
    const int ok = ds.flags == 0 && fabs(lse - want) < 2e-3 && fabs(h2f(out[0]) - 1.0f) < 1e-3;
    snprintf(det, sizeof det, "lse %.5f, expected ln(%d) = %.5f (dropping the last 2^25-block piece gives %.5f); out[0] %g; "
             "status flags 0x%x; workspace %zu bytes", lse, S, want, log(2113929216.0), h2f(out[0]), ds.flags, wsb);
    verdict(name, ok, det);
    free_all();
    return ok;
}

static int rows_case(void) {
    const char *name = "2. fixed mode, 65536 queries x G 16385 = 1073807360 packed rows (> 2^30): out written";
    const int32_t Sq = 65536, H = 16385, D = 8, S = 4;
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_F16; p.batch = 1; p.num_heads = H; p.num_kv_heads = 1; p.head_dim = D;
    uint16_t qv[8], kv[4 * 8], vv[4 * 8];
    for (int i = 0; i < 8; i++) qv[i] = f2h(0.5f);
    for (int i = 0; i < 32; i++) { kv[i] = f2h(0.25f * (i % 8)); vv[i] = f2h(1.0f); }
    p.q = dupload(qv, 16); p.seqlen_q = Sq; /* strides 0: every query row reads the same 8 values */
    p.q_batch_stride = p.q_row_stride = p.q_head_stride = 0; /* (the default is KVATTN_STRIDE_PACKED) */
    p.k_cache = dupload(kv, 64); p.v_cache = dupload(vv, 64);
    p.k_batch_stride = p.v_batch_stride = 4 * 8; p.k_row_stride = p.v_row_stride = 8; p.k_head_stride = p.v_head_stride = 8;
    p.cache_batch = 1; p.cache_capacity = S;
    int32_t s = S;
    p.cache_seqlens = dupload(&s, 4);
    const size_t n_out = (size_t)Sq * H * D;
    uint16_t *out = dalloc(2 * n_out);
    CK(cudaMemset(out, 0x77, 2 * n_out)); /* 0x7777 sentinel */
    p.out = out; p.out_row_stride = (int64_t)H * D; p.out_head_stride = D; p.out_batch_stride = (int64_t)Sq * H * D;
    size_t wsb = 0;
    char det[300];
    kvattn_device_status ds;
    if (!run_call(name, &p, &wsb, &ds)) return 0;
    /* sample 4096 elements (and the first and last) */
    size_t unwritten = 0, wrong = 0, samples = 0;
    for (int k = 0; k < 4098; k++) {
        size_t i = k == 0 ? 0 : k == 1 ? n_out - 1 : (size_t)(rnd64() % n_out);
        uint16_t h;
        CK(cudaMemcpy(&h, out + i, 2, cudaMemcpyDeviceToHost));
        samples++;
        if (h == 0x7777) unwritten++;
        else if (fabs(h2f(h) - 1.0f) > 1e-3) wrong++;
    }
    snprintf(det, sizeof det, "status flags 0x%x failed %d; of %zu sampled out elements %zu unwritten (sentinel), %zu wrong; "
             "workspace %zu bytes", ds.flags, ds.num_failed, samples, unwritten, wrong, wsb);
    verdict(name, unwritten == 0 && wrong == 0 && ds.flags == 0, det);
    free_all();
    return 1;
}

int main(int argc, char **argv) {
    int big = !(argc > 1 && strcmp(argv[1], "--no-big") == 0);
    if (!kvattn_backend_available(KVATTN_BACKEND_CUDA)) { printf("no CUDA device\nRESULT: FAIL (not run)\n"); return 2; }
    lse_case("1a. control: batch_invariant=0, auto split, S = 2147418112 keys", 0, 0);
    lse_case("1b. control: batch_invariant=1, num_splits=0 (2048-key blocks)", 1, 0);
    lse_case("1c. batch_invariant=1, num_splits=64 (64 blocks of 2^25 keys: the last block's end is 2^31)", 1, 64);
    if (big) rows_case();
    return summary("audit_overflow");
}
