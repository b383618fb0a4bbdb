/* audit_main.c — kvattn CUDA memory-safety audit: adversarial inputs that pass host validation, run on the GPU,
 * each checked against the CPU backend used as an oracle (one B = 1 CPU call per good sequence).
 *
 * For every case it checks:
 *   - kvattn_forward returns KVATTN_OK and cudaDeviceSynchronize reports no error (an illegal address is FATAL);
 *   - the device status record: exactly the expected failing sequence(s) and flag bit(s);
 *   - out / softmax_lse: good sequences match the CPU oracle, failing sequences' rows and the rows that belong to
 *     no sequence still hold the sentinel (bit-exact);
 *   - k_cache / v_cache: every element the oracle did not append is bit-identical to the initial contents
 *     (a failing sequence's cache untouched; no write outside a sequence's own positions), appended ones match;
 *   - every tensor is its own cudaMalloc of the exact size, followed by a freed 1 MiB spacer: run under
 *     `compute-sanitizer --tool memcheck` to catch reads as well as writes past any tensor or the workspace.
 * The block-table slots a sequence does not touch (before its leftpad page, after its last page, up to
 * max_pages_per_seq) hold garbage: INT32_MIN, INT32_MAX, -1, num_pages, ... (the SPEC only checks touched pages).
 * The workspace is exactly kvattn_workspace_size() bytes and filled with 0xFF bytes before each call.
 *
 * Usage: audit_main [substring-filter]   (runs every case whose name contains the filter) */
#include "audit_common.h"

enum { K_NONE, K_PAGE, K_CAP, K_S, K_L, K_IDX, K_ROT_POS, K_ROT_NQ, K_CU_Q, K_CU_KNEW };
static const char *kind_name[] = {"ok", "page", "capacity", "seqlen", "leftpad", "batch_idx", "rotary_pos",
                                  "rotary_nq", "cu_q", "cu_knew"};

typedef struct {
    char name[200];
    int dtype, B, H, Hk, D;
    int nq[4096], nnew[4096], S[4096], L[4096];
    int has_L, has_knew, fixed;
    int paged, ps, mp_extra, mp_force, hnd, bt_pad, spare_pages;
    int C_extra, idx_mode; /* contiguous: idx_mode 1 = cache_batch_idx (a permutation, cache_batch = B + 3) */
    int causal, wl, wr, rotR, rot_inter, alibi, lse;
    float softcap;
    int num_splits, inv;
    int misalign_q;    /* q starts 2 bytes into its allocation: the scalar (v0) kernel runs */
    int extra_q_rows;  /* total_q > cu_seqlens_q[B]: rows that belong to no sequence (never written) */
    int extra_kn_rows; /* total_knew > cu_seqlens_knew[B] */
    int victim, kind, slotsel, cu_variant;
    int32_t val; /* the bad value (page index, S, L, cache_batch_idx) */
    int rot_maxpos_cut; /* K_ROT_POS: rotary_max_pos = max end of the other sequences */
    int bcast; /* caches with row stride 0 (one stored row per page / cache row; read-only, so no k_new) */
} tcase;

static int64_t imax64(int64_t a, int64_t b) { return a > b ? a : b; }

static const int32_t garbage_vals[] = {INT32_MIN, INT32_MAX, -1, 0 /* num_pages */, 1000000, -2, 0x40000000};

/* ws_reuse: when not NULL, use this workspace (not refilled) of *ws_bytes_io bytes instead of a fresh one */
static int run_case(const tcase *tc, void *ws_reuse, size_t ws_reuse_bytes) {
    const int dt = tc->dtype, B = tc->B, H = tc->H, Hk = tc->Hk, D = tc->D;
    char detail[600] = "";
    int ok = 1;
#define BAD(...)                                                                                             \
    do {                                                                                                     \
        if (ok) snprintf(detail, sizeof detail, __VA_ARGS__);                                                \
        ok = 0;                                                                                              \
    } while (0)
    int nq[4096], nnew[4096], S[4096], L[4096];
    memcpy(nq, tc->nq, sizeof(int) * B);
    memcpy(nnew, tc->nnew, sizeof(int) * B);
    memcpy(S, tc->S, sizeof(int) * B);
    memcpy(L, tc->L, sizeof(int) * B);
    if (!tc->has_knew)
        for (int b = 0; b < B; b++) nnew[b] = 0;
    if (!tc->has_L)
        for (int b = 0; b < B; b++) L[b] = 0;
    /* rows */
    int32_t *cuq = calloc(B + 1, 4), *cuk = calloc(B + 1, 4);
    for (int b = 0; b < B; b++) {
        cuq[b + 1] = cuq[b] + nq[b];
        cuk[b + 1] = cuk[b] + nnew[b];
    }
    const int Sq = B ? nq[0] : 0, Sk = B ? nnew[0] : 0;
    const int total_q = tc->fixed ? B * Sq : cuq[B] + tc->extra_q_rows;
    const int total_kn = tc->fixed ? B * Sk : cuk[B] + tc->extra_kn_rows;
    /* capacity and pages */
    const int ps = tc->paged ? tc->ps : 1;
    int64_t max_end = 0;
    for (int b = 0; b < B; b++) max_end = imax64(max_end, (int64_t)S[b] + nnew[b]);
    int mp = 0, C = 0, num_pages = 0, cache_batch = 0;
    int32_t *bt = NULL;
    int64_t bts = 0;
    if (tc->paged) {
        mp = tc->mp_force ? tc->mp_force : (int)((max_end + ps - 1) / ps) + tc->mp_extra;
        C = mp * ps;
        bts = mp + tc->bt_pad;
        int64_t used = 0;
        for (int b = 0; b < B; b++) {
            int64_t end = (int64_t)S[b] + nnew[b];
            if (end > L[b]) used += (end - 1) / ps - L[b] / ps + 1;
        }
        num_pages = (int)used + tc->spare_pages;
        int32_t *perm = malloc(sizeof(int32_t) * (num_pages ? num_pages : 1));
        for (int i = 0; i < num_pages; i++) perm[i] = i;
        for (int i = num_pages - 1; i > 0; i--) {
            int j = (int)(rnd64() % (uint64_t)(i + 1));
            int32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
        bt = malloc(sizeof(int32_t) * ((size_t)B * bts + 1)); /* never NULL (the oracle's paged mode) */
        int gi = 0;
        for (int64_t i = 0; i < (int64_t)B * bts; i++) {
            int32_t g = garbage_vals[gi++ % 7];
            if (g == 0) g = num_pages;
            bt[i] = g;
        }
        int np = 0;
        for (int b = 0; b < B; b++) {
            int64_t end = (int64_t)S[b] + nnew[b];
            if (end <= L[b]) continue;
            for (int64_t s = L[b] / ps; s <= (end - 1) / ps; s++) bt[b * bts + s] = perm[np++];
        }
        free(perm);
    } else {
        C = (int)max_end + tc->C_extra;
        cache_batch = tc->idx_mode ? B + 3 : B;
    }
    int32_t *idx = NULL;
    if (!tc->paged && tc->idx_mode) {
        idx = malloc(sizeof(int32_t) * (B ? B : 1));
        int32_t *perm = malloc(sizeof(int32_t) * cache_batch);
        for (int i = 0; i < cache_batch; i++) perm[i] = i;
        for (int i = cache_batch - 1; i > 0; i--) {
            int j = (int)(rnd64() % (uint64_t)(i + 1));
            int32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
        for (int b = 0; b < B; b++) idx[b] = perm[b];
        free(perm);
    }
    /* rotary */
    int max_pos = 0;
    if (tc->rotR) {
        int64_t m = 0;
        for (int b = 0; b < B; b++)
            if (!(tc->rot_maxpos_cut && b == tc->victim)) m = imax64(m, (int64_t)S[b] + nnew[b]);
        max_pos = (int)m + (tc->rot_maxpos_cut ? 0 : 3);
    }
    /* ---- corruption (after the pages were assigned from the sound lengths) ---- */
    int exp_flag = 0, exp_fail_all = 0;
    const int v = tc->victim;
    switch (tc->kind) {
    case K_PAGE: {
        int64_t end = (int64_t)S[v] + nnew[v];
        int64_t lo = L[v] / ps, hi = (end - 1) / ps, sl;
        sl = tc->slotsel == 0 ? lo : tc->slotsel == 1 ? (lo + hi) / 2 : tc->slotsel == 2 ? hi : S[v] / ps;
        bt[v * bts + sl] = tc->val == 0 ? num_pages : tc->val;
        exp_flag = KVATTN_FLAG_PAGE_INDEX;
        break;
    }
    case K_CAP: S[v] = C + 1 - nnew[v]; exp_flag = KVATTN_FLAG_CAPACITY; break;
    case K_S:
        S[v] = tc->val;
        exp_flag = tc->val < 0 ? KVATTN_FLAG_BAD_LEFTPAD : KVATTN_FLAG_CAPACITY;
        break;
    case K_L: L[v] = tc->val; exp_flag = KVATTN_FLAG_BAD_LEFTPAD; break;
    case K_IDX: idx[v] = tc->val == 0 ? cache_batch : tc->val; exp_flag = KVATTN_FLAG_BATCH_IDX; break;
    case K_ROT_POS: case K_ROT_NQ: exp_flag = KVATTN_FLAG_ROTARY_RANGE; break;
    case K_CU_Q: case K_CU_KNEW: {
        int32_t *cu = tc->kind == K_CU_Q ? cuq : cuk;
        const int tot = tc->kind == K_CU_Q ? total_q : total_kn;
        switch (tc->cu_variant) {
        case 0: cu[v + 1] = cu[v] - 1; break;                         /* decreasing */
        case 1: cu[B] = tot + 1; break;                               /* past total rows */
        case 2: cu[0] = 1; break;                                     /* cu[0] != 0 */
        case 3: cu[v + 1] = INT32_MIN; break;
        case 4: cu[v + 1] = INT32_MAX; break;
        case 5: cu[v] = -5; break;                                   /* negative start */
        }
        exp_flag = KVATTN_FLAG_BAD_CU_SEQLENS;
        exp_fail_all = 1;
        break;
    }
    default: break;
    }
    /* ---- host tensors ---- */
    const int64_t qrs = (int64_t)H * D, knrs = (int64_t)Hk * D;
    const size_t q_el = (size_t)total_q * qrs, kn_el = (size_t)total_kn * knrs;
    int64_t kbs, krs, khs;
    size_t cache_el;
    if (tc->bcast) {
        kbs = (int64_t)Hk * D; krs = 0; khs = D;
        cache_el = (size_t)(tc->paged ? num_pages : cache_batch) * kbs;
    } else if (tc->paged) {
        if (tc->hnd) { kbs = (int64_t)Hk * ps * D; khs = (int64_t)ps * D; krs = D; }
        else { kbs = (int64_t)ps * Hk * D; krs = (int64_t)Hk * D; khs = D; }
        cache_el = (size_t)num_pages * kbs;
    } else {
        kbs = (int64_t)C * Hk * D; krs = (int64_t)Hk * D; khs = D;
        cache_el = (size_t)cache_batch * kbs;
    }
    uint16_t *hq = malloc(2 * (q_el + 8)), *hkn = malloc(2 * (kn_el + 1)), *hvn = malloc(2 * (kn_el + 1));
    uint16_t *hkc = malloc(2 * (cache_el + 1)), *hvc = malloc(2 * (cache_el + 1));
    for (size_t i = 0; i < q_el; i++) hq[i] = to_el(dt, rndf());
    for (size_t i = 0; i < kn_el; i++) { hkn[i] = to_el(dt, rndf()); hvn[i] = to_el(dt, rndf()); }
    for (size_t i = 0; i < cache_el; i++) { hkc[i] = to_el(dt, rndf()); hvc[i] = to_el(dt, rndf()); }
    float *cosT = NULL, *sinT = NULL;
    if (tc->rotR) {
        const int R = tc->rotR;
        cosT = malloc(sizeof(float) * ((size_t)max_pos * (R / 2) + 1));
        sinT = malloc(sizeof(float) * ((size_t)max_pos * (R / 2) + 1));
        for (int pos = 0; pos < max_pos; pos++)
            for (int i = 0; i < R / 2; i++) {
                double th = pos * pow(10000.0, -2.0 * i / R);
                cosT[(size_t)pos * (R / 2) + i] = (float)cos(th);
                sinT[(size_t)pos * (R / 2) + i] = (float)sin(th);
            }
    }
    float *slopes = NULL;
    if (tc->alibi) {
        slopes = malloc(sizeof(float) * H);
        for (int h = 0; h < H; h++) slopes[h] = 0.01f * (h + 1);
    }
    const uint16_t OUT_SENT = 0x7777;
    uint32_t LSE_SENT_BITS = 0x7F7F7F7Fu;
    float LSE_SENT;
    memcpy(&LSE_SENT, &LSE_SENT_BITS, 4);
    uint16_t *out_ref = malloc(2 * (q_el + 1));
    for (size_t i = 0; i < q_el; i++) out_ref[i] = OUT_SENT;
    const size_t lse_el = (size_t)H * total_q;
    float *lse_ref = malloc(4 * (lse_el + 1));
    for (size_t i = 0; i < lse_el; i++) lse_ref[i] = LSE_SENT;
    uint16_t *kc_ref = malloc(2 * (cache_el + 1)), *vc_ref = malloc(2 * (cache_el + 1));
    memcpy(kc_ref, hkc, 2 * cache_el);
    memcpy(vc_ref, hvc, 2 * cache_el);

    /* ---- params (device) ---- */
    kvattn_params p = kvattn_params_default();
    p.dtype = dt; p.batch = B; p.num_heads = H; p.num_kv_heads = Hk; p.head_dim = D;
    p.q_row_stride = qrs; p.q_head_stride = D; p.q_batch_stride = (int64_t)Sq * qrs;
    p.out_row_stride = qrs; p.out_head_stride = D; p.out_batch_stride = (int64_t)Sq * qrs;
    if (tc->fixed) { p.seqlen_q = Sq; } else { p.total_q = total_q; }
    p.k_batch_stride = p.v_batch_stride = kbs; p.k_row_stride = p.v_row_stride = krs;
    p.k_head_stride = p.v_head_stride = khs;
    if (tc->paged) { p.max_pages_per_seq = mp; p.num_pages = num_pages; p.page_size = ps; p.block_table_batch_stride = bts; }
    else { p.cache_batch = cache_batch; p.cache_capacity = C; }
    p.causal = tc->causal; p.window_left = tc->wl; p.window_right = tc->wr; p.softcap = tc->softcap;
    p.num_splits = tc->num_splits; p.batch_invariant = tc->inv;
    if (tc->has_knew) {
        p.knew_row_stride = p.vnew_row_stride = knrs; p.knew_head_stride = p.vnew_head_stride = D;
        p.knew_batch_stride = p.vnew_batch_stride = (int64_t)Sk * knrs;
        if (tc->fixed) p.seqlen_knew = Sk; else p.total_knew = total_kn;
    }
    if (tc->rotR) { p.rotary_dim = tc->rotR; p.rotary_max_pos = max_pos; p.rotary_dtype = KVATTN_F32; p.rotary_interleaved = tc->rot_inter; }
    if (tc->lse) { p.lse_head_stride = total_q; p.lse_row_stride = 1; p.lse_batch_stride = (int64_t)H * Sq; }
    if (tc->lse && tc->fixed) { p.lse_head_stride = Sq; p.lse_row_stride = 1; }

    /* ---- oracle: CPU backend, one call per good sequence ---- */
    for (int b = 0; b < B && !exp_fail_all; b++) {
        if (tc->kind != K_NONE && b == v) continue;
        kvattn_params c = p;
        int32_t cq[2] = {0, nq[b]}, ck[2] = {0, nnew[b]}, rowb = idx ? idx[b] : b;
        c.batch = 1;
        const int64_t qo = tc->fixed ? (int64_t)b * Sq * qrs : (int64_t)cuq[b] * qrs;
        c.q = hq + qo; c.out = out_ref + qo;
        c.cu_seqlens_q = tc->fixed ? NULL : cq; c.total_q = nq[b];
        if (tc->has_knew) {
            const int64_t ko = tc->fixed ? (int64_t)b * Sk * knrs : (int64_t)cuk[b] * knrs;
            c.k_new = hkn + ko; c.v_new = hvn + ko;
            c.cu_seqlens_knew = tc->fixed ? NULL : ck; c.total_knew = nnew[b];
        }
        c.k_cache = kc_ref; c.v_cache = vc_ref;
        if (tc->paged) c.block_table = bt + b * bts;
        else { c.cache_batch_idx = &rowb; }
        c.cache_seqlens = &S[b];
        c.cache_leftpad = tc->has_L ? &L[b] : NULL;
        c.rotary_cos = cosT; c.rotary_sin = sinT;
        c.alibi_slopes = slopes;
        if (tc->lse) {
            c.softmax_lse = lse_ref + (tc->fixed ? (int64_t)b * H * Sq : cuq[b]);
            c.lse_batch_stride = 0;
        }
        int st = kvattn_forward(&c, KVATTN_BACKEND_CPU, NULL, 0, NULL);
        if (st != KVATTN_OK) {
            char m[300];
            snprintf(m, sizeof m, "ORACLE (CPU) rejected good sequence %d: %s", b, kvattn_last_error());
            BAD("%s", m);
        }
    }

    /* ---- device tensors ---- */
    uint16_t *dq_alloc = dupload(hq, 2 * (q_el + (tc->misalign_q ? 1 : 0)));
    if (tc->misalign_q) { /* shift the data by one element */
        CK(cudaMemcpy(dq_alloc + 1, hq, 2 * q_el, cudaMemcpyHostToDevice));
    }
    p.q = tc->misalign_q ? (void *)(dq_alloc + 1) : (void *)dq_alloc;
    if (!tc->fixed) p.cu_seqlens_q = dupload(cuq, 4 * (B + 1));
    if (tc->has_knew) {
        p.k_new = dupload(hkn, 2 * kn_el);
        p.v_new = dupload(hvn, 2 * kn_el);
        if (!tc->fixed) p.cu_seqlens_knew = dupload(cuk, 4 * (B + 1));
    }
    p.k_cache = dupload(hkc, 2 * cache_el);
    p.v_cache = dupload(hvc, 2 * cache_el);
    if (tc->paged) p.block_table = dupload(bt, 4 * (size_t)B * bts - (B ? 4 * (size_t)tc->bt_pad : 0));
    if (idx) p.cache_batch_idx = dupload(idx, 4 * B);
    p.cache_seqlens = dupload(S, 4 * B);
    if (tc->has_L) p.cache_leftpad = dupload(L, 4 * B);
    if (tc->rotR) {
        p.rotary_cos = dupload(cosT, 4 * (size_t)max_pos * (tc->rotR / 2));
        p.rotary_sin = dupload(sinT, 4 * (size_t)max_pos * (tc->rotR / 2));
    }
    if (tc->alibi) p.alibi_slopes = dupload(slopes, 4 * H);
    uint16_t *hout = malloc(2 * (q_el + 1));
    for (size_t i = 0; i < q_el; i++) hout[i] = OUT_SENT;
    p.out = dupload(hout, 2 * q_el);
    float *hlse = malloc(4 * (lse_el + 1));
    for (size_t i = 0; i < lse_el; i++) hlse[i] = LSE_SENT;
    if (tc->lse) p.softmax_lse = dupload(hlse, 4 * lse_el);

    size_t wsb = 0;
    int st = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &wsb);
    if (st != KVATTN_OK) {
        BAD("kvattn_workspace_size: %s (%s)", kvattn_status_string(st), kvattn_last_error());
        goto done;
    }
    void *ws;
    if (ws_reuse) {
        if (ws_reuse_bytes < wsb) { BAD("reuse workspace too small"); goto done; }
        ws = ws_reuse;
    } else {
        ws = dalloc(wsb);
        CK(cudaMemset(ws, 0xFF, wsb));
    }
    free_spacers();
    CK(cudaDeviceSynchronize());
    st = kvattn_forward(&p, KVATTN_BACKEND_CUDA, ws, wsb, NULL);
    if (st != KVATTN_OK) {
        BAD("kvattn_forward: %s (%s)", kvattn_status_string(st), kvattn_last_error());
        goto done;
    }
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    kvattn_device_status ds;
    st = kvattn_device_status_read(ws, NULL, &ds);
    if (st != KVATTN_OK) BAD("status read failed");
#ifdef AUDIT_SELFTEST
    /* the CPU backend rejects a batch with a bad sequence as a whole (nothing written): only its verdict counts */
    if (tc->kind != K_NONE) {
        if (!g_selftest_rejected) BAD("selftest: the CPU backend accepted a batch with a bad sequence");
        goto done;
    }
    if (g_selftest_rejected) { BAD("selftest: the CPU backend rejected a good batch: %s", kvattn_last_error()); goto done; }
#endif
    {
        const int want_failed = tc->kind == K_NONE ? 0 : exp_fail_all ? B : 1;
        const int want_first = tc->kind == K_NONE ? -1 : exp_fail_all ? 0 : v;
        if (ds.num_failed != want_failed || ds.first_failed != want_first || (ds.flags & exp_flag) != exp_flag ||
            (tc->kind == K_NONE && ds.flags))
            BAD("status {flags 0x%x, failed %d, first %d}, expected {flags 0x%x, failed %d, first %d}", ds.flags,
                ds.num_failed, ds.first_failed, exp_flag, want_failed, want_first);
    }
    /* ---- compare ---- */
    CK(cudaMemcpy(hout, p.out, 2 * q_el, cudaMemcpyDeviceToHost));
    {
        double worst = 0;
        size_t bad_i = (size_t)-1;
        for (size_t i = 0; i < q_el; i++) {
            if (out_ref[i] == OUT_SENT || hout[i] == OUT_SENT) {
                if (out_ref[i] != hout[i]) { bad_i = i; break; }
                continue;
            }
            const float a = from_el(dt, hout[i]), r = from_el(dt, out_ref[i]);
            const double e = fabs((double)a - r);
            if (!(e <= 3e-2 + 2e-2 * fabs(r))) { bad_i = i; break; }
            if (e > worst) worst = e;
        }
        if (bad_i != (size_t)-1)
            BAD("out[%zu] (row %lld, head %lld, ch %lld) = 0x%04x (%g), expected 0x%04x (%g)%s", bad_i,
                (long long)(bad_i / qrs), (long long)(bad_i % qrs / D), (long long)(bad_i % D), hout[bad_i],
                from_el(dt, hout[bad_i]), out_ref[bad_i], from_el(dt, out_ref[bad_i]),
                out_ref[bad_i] == OUT_SENT ? " (must stay unwritten)" : "");
    }
    if (tc->lse) {
        CK(cudaMemcpy(hlse, p.softmax_lse, 4 * lse_el, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < lse_el; i++) {
            uint32_t a, r;
            memcpy(&a, &hlse[i], 4);
            memcpy(&r, &lse_ref[i], 4);
            if (a == r) continue;
            if (r == LSE_SENT_BITS || a == LSE_SENT_BITS || isinf(lse_ref[i]) || isinf(hlse[i]) ||
                !(fabs(hlse[i] - lse_ref[i]) <= 2e-2 + 1e-3 * fabs(lse_ref[i]))) {
                BAD("lse[%zu] = %g, expected %g", i, hlse[i], lse_ref[i]);
                break;
            }
        }
    }
    {
        uint16_t *g = malloc(2 * (cache_el + 1));
        for (int w = 0; w < 2; w++) {
            const uint16_t *orig = w ? hvc : hkc, *ref = w ? vc_ref : kc_ref;
            CK(cudaMemcpy(g, w ? p.v_cache : p.k_cache, 2 * cache_el, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < cache_el; i++) {
                if (g[i] == ref[i]) continue;
                if (ref[i] != orig[i]) {
                    const float a = from_el(dt, g[i]), r = from_el(dt, ref[i]);
                    if (fabs(a - r) <= 1e-2 + 1e-2 * fabs(r)) continue;
                }
                BAD("%s_cache[%zu] = 0x%04x, expected 0x%04x (%s)", w ? "v" : "k", i, g[i], ref[i],
                    ref[i] == orig[i] ? "must be untouched" : "appended value");
                break;
            }
        }
        free(g);
    }
done:
    {
        char line[900];
        snprintf(line, sizeof line, "%s", detail);
        verdict(tc->name, ok, line);
    }
    free_all();
    free(cuq); free(cuk); free(bt); free(idx); free(hq); free(hkn); free(hvn); free(hkc); free(hvc);
    free(cosT); free(sinT); free(slopes); free(out_ref); free(lse_ref); free(kc_ref); free(vc_ref);
    free(hout); free(hlse);
    return ok;
}

/* ---- case construction ---------------------------------------------------------------------------- */
static const char *g_filter;
static tcase g_tc;
static void base(tcase *t, int dtype, int H, int Hk, int D) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype; t->H = H; t->Hk = Hk; t->D = D;
    t->has_knew = 1; t->has_L = 1; t->lse = 1;
    t->wl = t->wr = -1; t->spare_pages = 3; t->C_extra = 5; t->rot_inter = 1;
    t->victim = -1;
}
static void seqs(tcase *t, int B, const int *nq, const int *nnew, const int *S, const int *L) {
    t->B = B;
    for (int b = 0; b < B; b++) { t->nq[b] = nq[b]; t->nnew[b] = nnew[b]; t->S[b] = S[b]; t->L[b] = L ? L[b] : 0; }
}
static void go(tcase *t) {
    if (g_filter && !strstr(t->name, g_filter)) return;
    run_case(t, NULL, 0);
}

/* a mixed inflight batch: decode, prompt, speculative, append-only (n_q 0), attend-only (n_new 0) */
static const int MIX_NQ[] = {1, 130, 7, 0, 65, 1};
static const int MIX_NN[] = {1, 130, 7, 9, 0, 1};
static const int MIX_S[] = {37, 0, 200, 10, 300, 2};
static const int MIX_L[] = {0, 0, 5, 3, 17, 1};

int main(int argc, char **argv) {
    g_filter = argc > 1 ? argv[1] : NULL;
    if (!kvattn_backend_available(KVATTN_BACKEND_CUDA)) {
        printf("no CUDA device\nRESULT: FAIL (not run)\n");
        return 2;
    }
    tcase *t = &g_tc;
    const int dts[2] = {KVATTN_F16, KVATTN_BF16};

    /* A. good data with garbage in every untouched block-table slot: page sizes x head dims x options */
    {
        const int pss[] = {1, 3, 7, 48, 100, 16};
        const int Ds[] = {128, 40, 200, 32, 8, 256, 96};
        const int Hs[][2] = {{8, 2}, {4, 4}, {6, 1}};
        int k = 0;
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 7; j++, k++) {
                if ((i + j) % 2) continue; /* half of the grid */
                base(t, dts[k % 2], Hs[k % 3][0], Hs[k % 3][1], Ds[j]);
                seqs(t, 6, MIX_NQ, MIX_NN, MIX_S, MIX_L);
                t->paged = 1; t->ps = pss[i]; t->mp_extra = 2 + k % 3; t->hnd = k % 2; t->bt_pad = k % 3;
                t->causal = k % 3 != 0;
                if (k % 4 == 1) { t->wl = 40; t->wr = k % 3 == 0 ? 3 : 0; }
                if (k % 5 == 2) { t->rotR = Ds[j] >= 16 ? Ds[j] / 2 : Ds[j]; t->rot_inter = k % 2; }
                if (k % 7 == 3) t->alibi = 1;
                if (k % 6 == 4) t->softcap = 30.0f;
                snprintf(t->name, sizeof t->name, "A paged ps=%d D=%d H=%d/%d %s%s%s%s%s%s", pss[i], Ds[j], t->H, t->Hk,
                         dts[k % 2] == KVATTN_BF16 ? "bf16" : "fp16", t->hnd ? " HND" : "", t->causal ? " causal" : "",
                         t->wl >= 0 ? " window" : "", t->rotR ? " rotary" : "", t->alibi ? " alibi" : "");
                go(t);
            }
        /* contiguous, with and without cache_batch_idx */
        for (int j = 0; j < 7; j++) {
            base(t, dts[j % 2], 8, 2, Ds[j]);
            seqs(t, 6, MIX_NQ, MIX_NN, MIX_S, MIX_L);
            t->idx_mode = j % 2; t->causal = 1; t->rotR = j % 3 == 0 ? Ds[j] : 0;
            snprintf(t->name, sizeof t->name, "A contiguous D=%d idx=%d%s", Ds[j], t->idx_mode, t->rotR ? " rotary" : "");
            go(t);
        }
    }
    /* B. one bad sequence (a prompt or a decode), every kind, three paths: fused scheduler checks, the check
     * kernel (B * max_pages_per_seq > 65536), the scalar v0 kernel (misaligned q) */
    {
        struct { int kind, slotsel; int32_t val; const char *what; } kinds[] = {
            {K_PAGE, 0, INT32_MIN, "page INT32_MIN at first touched slot"},
            {K_PAGE, 1, INT32_MAX, "page INT32_MAX mid"},
            {K_PAGE, 2, 0, "page num_pages at last slot"},
            {K_PAGE, 3, -1, "page -1 at slot of S (append target)"},
            {K_CAP, 0, 0, "S + n_new = C + 1"},
            {K_S, 0, INT32_MAX, "S = INT32_MAX"},
            {K_S, 0, INT32_MIN, "S = INT32_MIN"},
            {K_S, 0, -1, "S = -1"},
            {K_L, 0, -1, "L = -1"},
            {K_L, 0, INT32_MIN, "L = INT32_MIN"},
            {K_L, 0, INT32_MAX, "L = INT32_MAX"},
        };
        const int nk = sizeof kinds / sizeof kinds[0];
        for (int path = 0; path < 3; path++)
            for (int ki = 0; ki < nk; ki++)
                for (int vv = 0; vv < 2; vv++) {
                    const int pss[] = {1, 7, 48};
                    const int Ds[] = {128, 40, 64};
                    base(t, dts[(ki + vv) % 2], 8, 2, Ds[(ki + path) % 3]);
                    seqs(t, 6, MIX_NQ, MIX_NN, MIX_S, MIX_L);
                    t->paged = 1; t->ps = pss[(ki + vv + path) % 3]; t->mp_extra = 2; t->causal = 1;
                    if (path == 1) { t->ps = 1; t->mp_force = 14000; }
                    if (path == 2) t->misalign_q = 1;
                    t->kind = kinds[ki].kind; t->slotsel = kinds[ki].slotsel; t->val = kinds[ki].val;
                    t->victim = vv ? 1 : 2; /* the 130-token prompt, or the 7-token speculative step */
                    if (ki % 3 == 0) t->rotR = t->D / 2;
                    snprintf(t->name, sizeof t->name, "B %s path=%s victim=%d ps=%d D=%d: %s",
                             kind_name[t->kind], path == 0 ? "fused" : path == 1 ? "checkkernel" : "v0", t->victim,
                             t->ps, t->D, kinds[ki].what);
                    go(t);
                }
        /* contiguous: cache_batch_idx, capacity, leftpad; rotary range (positions past the table, n_q > S + n_new) */
        const int32_t idxv[] = {0 /* cache_batch */, -1, INT32_MIN, INT32_MAX};
        for (int path = 0; path < 2; path++)
            for (int i = 0; i < 4; i++) {
                base(t, dts[i % 2], 4, 4, 128);
                seqs(t, 6, MIX_NQ, MIX_NN, MIX_S, MIX_L);
                t->idx_mode = 1; t->kind = K_IDX; t->val = idxv[i]; t->victim = 1 + i % 2; t->misalign_q = path;
                snprintf(t->name, sizeof t->name, "B batch_idx=%d contiguous %s victim=%d", idxv[i],
                         path ? "v0" : "fast", t->victim);
                go(t);
            }
        for (int path = 0; path < 2; path++)
            for (int pg = 0; pg < 2; pg++) {
                const int nq[] = {1, 130, 7, 5, 3}, nn[] = {1, 130, 7, 2, 0}, S[] = {37, 400, 20, 1, 9},
                          L[] = {0, 0, 5, 0, 2};
                const int nqp[] = {1, 130, 7, 2, 3}; /* (sequence 3 within its positions here) */
                base(t, dts[pg], 8, 2, 64);
                seqs(t, 5, nqp, nn, S, L);
                t->paged = pg; t->ps = 7; t->mp_extra = 1; t->rotR = 64; t->misalign_q = path; t->causal = 1;
                t->kind = K_ROT_POS; t->victim = 1; t->rot_maxpos_cut = 1;
                snprintf(t->name, sizeof t->name, "B rotary_pos %s %s (victim's end past rotary_max_pos)",
                         pg ? "paged" : "contiguous", path ? "v0" : "fast");
                go(t);
                base(t, dts[pg], 8, 2, 64);
                seqs(t, 5, nq, nn, S, L);
                t->paged = pg; t->ps = 7; t->mp_extra = 1; t->rotR = 32; t->misalign_q = path;
                t->kind = K_ROT_NQ; t->victim = 3; /* n_q 5 > S + n_new = 3 */
                snprintf(t->name, sizeof t->name, "B rotary_nq %s %s (n_q > S + n_new)", pg ? "paged" : "contiguous",
                         path ? "v0" : "fast");
                go(t);
            }
    }
    /* C. cu_seqlens: broken arrays fail every sequence and write nothing; rows past cu[B] stay untouched */
    for (int which = 0; which < 2; which++)
        for (int var = 0; var < 6; var++)
            for (int path = 0; path < 2; path++) {
                base(t, dts[var % 2], 8, 2, 128);
                seqs(t, 6, MIX_NQ, MIX_NN, MIX_S, MIX_L);
                t->paged = 1; t->ps = 16; t->mp_extra = 1; t->causal = 1;
                t->kind = which ? K_CU_KNEW : K_CU_Q; t->cu_variant = var; t->victim = 2; t->misalign_q = path;
                t->extra_q_rows = 5; t->extra_kn_rows = 3;
                snprintf(t->name, sizeof t->name, "C %s variant=%d %s", which ? "cu_seqlens_knew" : "cu_seqlens_q", var,
                         path ? "v0" : "fast");
                go(t);
            }
    for (int path = 0; path < 2; path++) {
        base(t, KVATTN_F16, 8, 2, 128);
        seqs(t, 6, MIX_NQ, MIX_NN, MIX_S, MIX_L);
        t->paged = 1; t->ps = 5; t->causal = 1; t->extra_q_rows = 37; t->extra_kn_rows = 11; t->misalign_q = path;
        snprintf(t->name, sizeof t->name, "C rows past cu[B] (total_q > cu_q[B], total_knew > cu_knew[B]) %s",
                 path ? "v0" : "fast");
        go(t);
    }
    /* D. degenerate shapes */
    {
        int z[8] = {0}, one[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        base(t, KVATTN_F16, 4, 2, 64); seqs(t, 0, z, z, z, z);
        snprintf(t->name, sizeof t->name, "D B=0 with a workspace"); go(t);
        base(t, KVATTN_BF16, 4, 2, 64); seqs(t, 4, z, one, z, z); t->paged = 1; t->ps = 3;
        snprintf(t->name, sizeof t->name, "D every n_q = 0 (append only), paged"); go(t);
        base(t, KVATTN_F16, 4, 2, 64); seqs(t, 4, one, z, z, z); t->paged = 1; t->ps = 3; t->mp_extra = 0;
        snprintf(t->name, sizeof t->name, "D empty caches (S = n_new = 0, max_pages = 0, num_pages = spare)"); go(t);
        base(t, KVATTN_F16, 4, 2, 64); seqs(t, 4, one, z, z, z); t->paged = 1; t->ps = 3; t->spare_pages = 0; t->mp_extra = 2;
        snprintf(t->name, sizeof t->name, "D num_pages = 0, nothing touched"); go(t);
        const int S1[] = {50, 70, 90, 3};
        base(t, KVATTN_BF16, 4, 1, 64); seqs(t, 4, one, z, S1, NULL); t->paged = 1; t->ps = 7; t->wl = 0; t->wr = 0;
        t->has_knew = 0; t->has_L = 0;
        snprintf(t->name, sizeof t->name, "D window 0/0 decode, no append (early start)"); go(t);
        const int nqf[] = {20, 20, 20}, nnf[] = {4, 4, 4}, Sf[] = {30, 16, 100}, Lf[] = {3, 0, 50};
        for (int pg = 0; pg < 2; pg++) {
            base(t, KVATTN_F16, 8, 2, 72); seqs(t, 3, nqf, nnf, Sf, Lf); t->fixed = 1; t->paged = pg; t->ps = 6;
            t->causal = 1; t->rotR = 72; t->rot_inter = 0;
            snprintf(t->name, sizeof t->name, "D fixed-length q and k_new (no cu_seqlens), %s, D=72 NeoX rotary",
                     pg ? "paged" : "contiguous");
            go(t);
        }
        /* decode-first order (varlen, total_q <= B, more than 16 packed rows): the prefill kernel follows the decode
         * kernel without waiting for it; with no k_new the decode kernel starts early and the prefill items of a
         * failed sequence are emptied after the page pass */
        const int nqd[] = {5, 0, 0, 1, 0, 0}, nnd[] = {5, 1, 0, 1, 2, 0}, Sd[] = {40, 7, 9, 3000, 0, 12},
                  Ld[] = {0, 0, 1, 5, 0, 12};
        for (int e = 0; e < 4; e++) {
            base(t, dts[e % 2], 8, 2, e < 2 ? 128 : 64); seqs(t, 6, nqd, nnd, Sd, Ld);
            t->has_knew = e % 2 == 0; t->paged = 1; t->ps = 5; t->mp_extra = 2; t->causal = 1;
            if (e >= 2) { t->kind = K_PAGE; t->victim = 0; t->slotsel = 1; t->val = INT32_MIN; }
            snprintf(t->name, sizeof t->name, "D decode-first order (total_q <= B, one prefill tile) %s%s",
                     t->has_knew ? "with append" : "no append (early)", e >= 2 ? ", bad page in the prefill sequence" : "");
            go(t);
        }
        /* G = 32 decode (32 packed rows: prefill tiles), G = 16 */
        const int nq1[] = {1, 1, 2}, nn1[] = {1, 1, 2}, Sg[] = {100, 3000, 17};
        base(t, KVATTN_BF16, 32, 1, 128); seqs(t, 3, nq1, nn1, Sg, NULL); t->paged = 1; t->ps = 3; t->has_L = 0;
        snprintf(t->name, sizeof t->name, "D MQA G=32 decode (prefill tiles), ps=3"); go(t);
        base(t, KVATTN_F16, 16, 1, 256); seqs(t, 3, nq1, nn1, Sg, NULL); t->paged = 1; t->ps = 100; t->has_L = 0;
        snprintf(t->name, sizeof t->name, "D G=16 D=256 decode ps=100"); go(t);
    }
    /* E. splits and the workspace bound: long caches, few sequences; num_splits; batch-invariant; non-cached
     * scheduler (B > 2048); all query rows in one sequence */
    {
        const int nq[] = {1, 1}, nn[] = {1, 0}, S[] = {20000, 7000}, L[] = {0, 4000};
        const int splits[] = {0, 3, 1000, 0, 5};
        const int invs[] = {0, 0, 0, 1, 1};
        for (int i = 0; i < 5; i++)
            for (int pg = 0; pg < 2; pg++) {
                base(t, dts[i % 2], 32, 4, 128); seqs(t, 2, nq, nn, S, L);
                t->paged = pg; t->ps = 7; t->num_splits = splits[i]; t->inv = invs[i]; t->causal = 1;
                snprintf(t->name, sizeof t->name, "E long decode num_splits=%d inv=%d %s", splits[i], invs[i],
                         pg ? "paged ps=7" : "contiguous");
                go(t);
            }
        const int nq2[] = {300, 1, 64}, nn2[] = {300, 1, 0}, S2[] = {6000, 9000, 4100}, L2[] = {100, 0, 4000};
        for (int i = 0; i < 5; i++) {
            base(t, dts[i % 2], 8, 8, 64); seqs(t, 3, nq2, nn2, S2, L2);
            t->paged = 1; t->ps = 48; t->num_splits = splits[i]; t->inv = invs[i]; t->causal = i % 2; t->wl = i == 2 ? 500 : -1;
            snprintf(t->name, sizeof t->name, "E prefill+decode splits=%d inv=%d ps=48", splits[i], invs[i]);
            go(t);
        }
        /* B = 3000 (> 2048: the check kernel, the scheduler's global prefix), one bad page */
        for (int bad = 0; bad < 2; bad++) {
            base(t, KVATTN_BF16, 4, 2, 64);
            t->B = 3000;
            for (int b = 0; b < 3000; b++) { t->nq[b] = b % 97 == 0 ? 33 : 1; t->nnew[b] = 1; t->S[b] = (b * 37) % 300; t->L[b] = (b * 7) % (t->S[b] + 1); }
            t->paged = 1; t->ps = 3; t->mp_extra = 1;
            if (bad) { t->kind = K_PAGE; t->slotsel = 2; t->val = -7; t->victim = 2500; }
            snprintf(t->name, sizeof t->name, "E B=3000 paged ps=3%s", bad ? " bad page in sequence 2500" : "");
            go(t);
        }
        /* one long prompt + many empty sequences (tile count extremes) */
        base(t, KVATTN_F16, 8, 1, 128);
        t->B = 600;
        for (int b = 0; b < 600; b++) { t->nq[b] = b == 599 ? 1500 : 0; t->nnew[b] = b == 599 ? 1500 : 0; t->S[b] = b == 599 ? 10 : 0; t->L[b] = 0; }
        t->paged = 1; t->ps = 1; t->causal = 1;
        snprintf(t->name, sizeof t->name, "E one 1500-row prompt among 600 sequences, G=8, ps=1"); go(t);
    }
    /* F. no append (early start / lean plan) with a bad page: decode blocks start before the page checks */
    {
        const int nq[] = {1, 1, 1, 1, 1, 1}, z[6] = {0}, S[] = {100, 3000, 17, 64, 1, 500}, L[] = {0, 100, 0, 63, 0, 499};
        const int32_t vals[] = {INT32_MIN, INT32_MAX, -1, 0};
        for (int i = 0; i < 8; i++) {
            base(t, dts[i % 2], i < 4 ? 4 : 16, 4, i % 3 == 0 ? 128 : 40);
            seqs(t, 6, nq, z, S, L);
            t->has_knew = 0; t->paged = 1; t->ps = i % 2 ? 1 : 16; t->mp_extra = 3;
            t->kind = K_PAGE; t->slotsel = i % 3; t->val = vals[i % 4]; t->victim = 1 + i % 3;
            t->num_splits = i == 5 ? 4 : 0;
            snprintf(t->name, sizeof t->name, "F early-start decode (no k_new) G=%d D=%d ps=%d victim=%d page=%d",
                     t->H / t->Hk, t->D, t->ps, t->victim, vals[i % 4]);
            go(t);
        }
    }
    /* H. positions near KVATTN_MAX_CACHE_TOKENS (int32 tile / slot arithmetic near 2^31): caches whose rows are
     * broadcast (row stride 0, read-only), windows and leftpads keep the visited keys few */
    {
        const int nq[] = {1, 100, 37}, z[3] = {0};
        for (int pg = 0; pg < 2; pg++)
            for (int var = 0; var < 2; var++) {
                const int32_t Cmax = pg ? 32767 * 65535 : KVATTN_MAX_CACHE_TOKENS;
                const int S[] = {Cmax, Cmax - 3, Cmax - 70000};
                const int L[] = {Cmax - 3000, var ? 0 : Cmax - 200, 5};
                base(t, dts[pg], 8, 2, 128);
                seqs(t, 3, nq, z, S, L);
                t->has_knew = 0; t->bcast = 1; t->C_extra = 0; t->causal = 1; t->wl = 500;
                t->paged = pg; t->ps = 65535; t->spare_pages = 2; t->num_splits = var ? 0 : 2; /* (batch_invariant: its workspace bound grows with C, ~400 GB here) */
                snprintf(t->name, sizeof t->name, "H positions near 2^31: %s C=%d window 500%s", pg ? "paged ps=65535" : "contiguous",
                         Cmax, var ? " auto split, L=0" : " splits=2");
                go(t);
            }
    }
    /* G. workspace reuse: a small call on the workspace a large call left behind (stale items, counters) */
    if (!g_filter || strstr("G workspace reuse", g_filter)) {
        const int nq[] = {1, 1}, nn[] = {1, 0}, S[] = {20000, 7000}, L[] = {0, 4000};
        tcase *big = malloc(sizeof *big), *small = malloc(sizeof *small);
        base(big, KVATTN_F16, 32, 4, 128); seqs(big, 2, nq, nn, S, L); big->paged = 1; big->ps = 7;
        snprintf(big->name, sizeof big->name, "G workspace reuse: first call (long split decode)");
        base(small, KVATTN_F16, 32, 4, 128);
        small->B = 1; small->nq[0] = 1; small->nnew[0] = 0; small->S[0] = 10; small->has_knew = 0; small->paged = 1; small->ps = 7;
        snprintf(small->name, sizeof small->name, "G workspace reuse: second call (B=1 decode, no append) on the same workspace");
        void *ws = NULL;
        CK(cudaMalloc(&ws, 64 << 20));
        CK(cudaMemset(ws, 0xFF, 64 << 20));
        run_case(big, ws, 64 << 20);
        run_case(small, ws, 64 << 20);
        CK(cudaFree(ws));
        free(big); free(small);
    }
    return summary("audit_main");
}
