/* test_cuda_invariance.c — batch invariance and determinism on the CUDA backend.
 * Batch invariance (batch_invariant = 1): a target sequence's out and lse bits must be identical when it runs
 * alone, at another index, in a batch of 5 and in a batch of 200 of varied lengths; targets include a long
 * cache (20000 tokens, so automatic splitting would kick in) and a short decode. Determinism: the same batch
 * of 200 run twice gives the same bits, with batch_invariant 0 and 1. All sequences share one paged pool
 * (page 16); appends are idempotent (same new tokens at the same positions), so configurations can share it.
 * In each comparison one of the compared runs is also checked against the float64 reference with the shared harness's
 * bounds (kvt_problem_run: out, lse, guards and the pool), so that equal bits are also right bits; and every run starts
 * from poisoned out and lse and must write every element of them, so that two runs that wrote nothing cannot compare
 * equal. Decode steps without an append (early start, the scheduler's lean path) are checked the same way: the lean
 * path against the general passes, and 4-piece split merges (a batch of 3 and one alone) against the batch of 200. */
#include "test_cuda_common.h"

#define NSEQ 200
#define LEAN_SEQS 64 /* KV_LEAN_SEQS (src/cuda/attn_kernels.cuh): the most sequences the lean path plans */
#define PS 16
#define H 8
#define HK 2
#define D 128

#ifdef KVATTN_HAVE_CUDA
typedef struct seqdata {
    int n_q, S;
    uint16_t *q, *k_new, *v_new; /* [n_q, H, D], [n_q, HK, D] (n_new = n_q) */
    int32_t *pages;              /* [max_pages] */
} seqdata;

static int g_max_pages, g_num_pages;
/* The shared paged pool: the two caches of a problem that holds nothing else (kvt_arr_alloc: guard bytes around
 * each device allocation; host mirror for the reference). Each call's problem borrows them (kvt_problem_free_io
 * leaves the caches alone), so kvt_problem_run checks the pool and carries the device's bytes into the mirror. */
static kvt_problem g_pool;
static seqdata g_seq[NSEQ];
static int g_no_append; /* 1: calls append nothing (k_new NULL): decode steps of the early start and lean path */
static float *g_rcos, *g_rsin; /* non-NULL: the calls append with rotary (host fp32 tables, dim 64, interleaved pairs) */
static int g_rmax;             /* the tables' positions */

enum { NO_REF = 0, REF = 1 }; /* run_batch: also check the call against the float64 reference */


/* Runs the sequences ids[0..n) as one batch; returns out rows [total_q, H, D] and lse [H, total_q] (host). Every
 * tensor is the harness's (kvt_arr_alloc: guard bytes checked after the call; out and lse poisoned before it,
 * kvt_problem_upload), and every element of out and lse must be written: each row belongs to a sequence with
 * queries, so a call that leaves poison fails here, and two calls that both wrote nothing cannot compare equal.
 * `ref` (REF): the call goes through kvt_problem_run, which also checks out, lse and the pool against the
 * float64 reference with the shared harness's bounds. */
static int run_batch(const int *ids, int n, int batch_invariant, int num_splits, int ref, uint16_t **out_h,
                     float **lse_h, int *total_q_out) {
    int total_q = 0;
    for (int i = 0; i < n; i++) total_q += g_seq[ids[i]].n_q;
    /* table width: the pool's widest table, or for calls without an append the batch's own widest (+1), so that a
     * batch of short sequences stays under the fused-check bound (early start, the lean path) */
    int mp = g_max_pages;
    if (g_no_append) {
        mp = 1;
        for (int i = 0; i < n; i++) {
            const int need = (g_seq[ids[i]].S + g_seq[ids[i]].n_q + PS - 1) / PS + 1;
            if (need > mp) mp = need;
        }
        if (mp > g_max_pages) mp = g_max_pages;
    }
    const size_t qb = (size_t)total_q * H * D * 2, nb = (size_t)total_q * HK * D * 2, lb = (size_t)total_q * H * 4;
    kvt_problem P;
    kvt_problem_init(&P, KVATTN_BACKEND_CUDA, KVATTN_BF16, n, H, HK, D);
    kvattn_params *p = &P.ph;
    kvt_arr_alloc(&P, &P.q, "q", qb);
    kvt_arr_alloc(&P, &P.cu_q, "cu_seqlens_q", (size_t)(n + 1) * 4);
    kvt_arr_alloc(&P, &P.seqlens, "cache_seqlens", (size_t)n * 4);
    kvt_arr_alloc(&P, &P.block_table, "block_table", (size_t)n * mp * 4);
    kvt_arr_alloc(&P, &P.out, "out", qb);
    kvt_arr_alloc(&P, &P.lse, "softmax_lse", lb);
    if (!g_no_append) {
        kvt_arr_alloc(&P, &P.k_new, "k_new", nb);
        kvt_arr_alloc(&P, &P.v_new, "v_new", nb);
        kvt_arr_alloc(&P, &P.cu_knew, "cu_seqlens_knew", (size_t)(n + 1) * 4);
    }
    uint16_t *q = P.q.host, *kn = P.k_new.host, *vn = P.v_new.host;
    int32_t *cu = P.cu_q.host, *sl = P.seqlens.host, *bt = P.block_table.host;
    cu[0] = 0;
    for (int i = 0; i < n; i++) {
        seqdata *s = &g_seq[ids[i]];
        memcpy(q + (size_t)cu[i] * H * D, s->q, (size_t)s->n_q * H * D * 2);
        if (!g_no_append) {
            memcpy(kn + (size_t)cu[i] * HK * D, s->k_new, (size_t)s->n_q * HK * D * 2);
            memcpy(vn + (size_t)cu[i] * HK * D, s->v_new, (size_t)s->n_q * HK * D * 2);
        }
        memcpy(bt + (size_t)i * mp, s->pages, (size_t)mp * 4);
        sl[i] = s->S;
        cu[i + 1] = cu[i] + s->n_q;
    }
    if (!g_no_append) memcpy(P.cu_knew.host, cu, (size_t)(n + 1) * 4);
    p->total_q = total_q;
    p->q_row_stride = H * D;
    p->q_head_stride = D;
    if (!g_no_append) {
        p->total_knew = total_q;
        p->knew_row_stride = p->vnew_row_stride = HK * D;
        p->knew_head_stride = p->vnew_head_stride = D;
    }
    p->k_batch_stride = p->v_batch_stride = (int64_t)PS * HK * D;
    p->k_row_stride = p->v_row_stride = HK * D;
    p->k_head_stride = p->v_head_stride = D;
    p->block_table_batch_stride = mp;
    p->max_pages_per_seq = mp;
    p->num_pages = g_num_pages;
    p->page_size = PS;
    p->causal = 1;
    if (g_rcos) {
        const size_t tb = (size_t)g_rmax * 32 * 4;
        kvt_arr_alloc(&P, &P.rot_cos, "rotary_cos", tb);
        kvt_arr_alloc(&P, &P.rot_sin, "rotary_sin", tb);
        memcpy(P.rot_cos.host, g_rcos, tb);
        memcpy(P.rot_sin.host, g_rsin, tb);
        p->rotary_dtype = KVATTN_F32;
        p->rotary_dim = 64;
        p->rotary_interleaved = 1;
        p->rotary_max_pos = g_rmax;
    }
    p->num_splits = num_splits;
    p->batch_invariant = batch_invariant;
    p->out_row_stride = H * D;
    p->out_head_stride = D;
    p->lse_head_stride = total_q;
    p->lse_row_stride = 1;
    P.k_cache = g_pool.k_cache; /* borrowed (see g_pool) */
    P.v_cache = g_pool.v_cache;

    int st = -1;
    P.last_status = -1; /* (kvt_problem_run sets it once it calls forward) */
    if (kvt_problem_upload(&P, 0) == 0) { /* (poisons out and lse; the pool stays as the device holds it) */
        if (ref) {
            /* the mirror := the device pool (the appends of every earlier call), so that the reference starts from
             * what this call reads and the pool check sees this call's changes only */
            if (kvt_download(&P.k_cache.dev, P.k_cache.host, P.k_cache.bytes) ||
                kvt_download(&P.v_cache.dev, P.v_cache.host, P.v_cache.bytes))
                kvt_failf("download of the pool failed");
            else if (kvt_problem_run(&P, kvt_expect_ok())) /* (these shapes are supported: not a skip) */
                kvt_failf("forward: KVATTN_ERR_UNSUPPORTED (%s)", kvattn_last_error());
            st = P.last_status;
        } else {
            size_t wsb = 0;
            st = kvattn_workspace_size(&P.pd, KVATTN_BACKEND_CUDA, &wsb);
            if (st == KVATTN_OK) {
                P.workspace = kvt_alloc(KVATTN_BACKEND_CUDA, wsb ? wsb : 16);
                if (!P.workspace.ptr) {
                    kvt_failf("cannot allocate a workspace of %zu bytes", wsb);
                    st = -1;
                } else {
                    st = kvattn_forward(&P.pd, KVATTN_BACKEND_CUDA, P.workspace.ptr, wsb, NULL);
                    kvattn_device_status ds = {0, 0, -1, 0};
                    int rs = st == KVATTN_OK ? kvattn_device_status_read(P.workspace.ptr, NULL, &ds) : KVATTN_OK;
                    if (rs != KVATTN_OK) kvt_failf("device_status_read: %s (%s)", kvattn_status_string(rs), kvattn_last_error());
                    else if (ds.flags)
                        kvt_failf("device status flags 0x%x (num_failed %d, first %d) on valid input", ds.flags,
                                  ds.num_failed, ds.first_failed);
                }
            }
            if (st != KVATTN_OK && st != -1) kvt_failf("forward: %s (%s)", kvattn_status_string(st), kvattn_last_error());
            kvt_arr *all[] = {&P.q, &P.k_new, &P.v_new, &P.out, &P.lse, &P.cu_q, &P.cu_knew, &P.seqlens,
                              &P.block_table, &P.rot_cos, &P.rot_sin, &P.k_cache, &P.v_cache};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                if (all[i]->used && !kvt_guards_ok(&all[i]->dev)) kvt_failf("guard bytes around %s overwritten", all[i]->name);
            if (!kvt_guards_ok(&P.workspace)) kvt_failf("guard bytes around the workspace overwritten");
        }
    }
    /* out and lse as the device holds them (poison where a download fails: nothing compares as written) */
    *out_h = malloc(qb);
    *lse_h = malloc(lb);
    memset(*out_h, 0xFF, qb);
    memset(*lse_h, 0xFF, lb);
    if (kvt_download(&P.out.dev, *out_h, qb) || kvt_download(&P.lse.dev, *lse_h, lb)) {
        kvt_failf("download of out / softmax_lse failed");
    } else if (st == KVATTN_OK) {
        size_t bad = 0, first = 0;
        for (size_t e = 0; e < qb / 2; e++)
            if (kvt_is_poison(*out_h + e, 2) && !bad++) first = e;
        if (bad)
            kvt_failf("batch of %d: %zu out elements not written (still poison; first: row %zu head %zu)", n, bad,
                      first / (H * D), first / D % H);
        bad = 0;
        for (size_t e = 0; e < lb / 4; e++)
            if (kvt_is_poison(*lse_h + e, 4) && !bad++) first = e;
        if (bad)
            kvt_failf("batch of %d: %zu softmax_lse entries not written (still poison; first: head %zu row %zu)", n,
                      bad, first / (size_t)total_q, first % (size_t)total_q);
    }
    *total_q_out = total_q;
    cu_sync_ok("run_batch");
    kvt_problem_free_io(&P); /* (not the borrowed pool) */
    return st;
}

/* The rows of sequence `id` inside a batch run: out rows and lse columns, compared bitwise with `ref`. */
static int row_of(const int *ids, int n, int id) {
    int r = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] == id) return r;
        r += g_seq[ids[i]].n_q;
    }
    return -1;
}
static void compare_target(const char *what, int id, const uint16_t *out_a, const float *lse_a, int row_a, int tq_a,
                           const uint16_t *out_b, const float *lse_b, int row_b, int tq_b) {
    const int nq = g_seq[id].n_q;
    if (memcmp(out_a + (size_t)row_a * H * D, out_b + (size_t)row_b * H * D, (size_t)nq * H * D * 2))
        kvt_failf("%s: out bits of sequence %d differ", what, id);
    for (int h = 0; h < H; h++)
        if (memcmp(lse_a + (size_t)h * tq_a + row_a, lse_b + (size_t)h * tq_b + row_b, (size_t)nq * 4)) {
            kvt_failf("%s: lse bits of sequence %d head %d differ", what, id, h);
            break;
        }
}

#endif

int main(void) {
    kvt_init("test_cuda_invariance");
    if (!cu_gpu_or_skip(12)) return kvt_finish();
#ifdef KVATTN_HAVE_CUDA
    /* sequences: 0 = long target (S 20000, 5 queries), 1 = short decode target, 2 - 4 one query over 4 batch-
     * invariant pieces (S 6145 - 8192), 5 one query over 4 auto pieces when alone (S 3073 - 4096); the rest varied */
    const int nq_choices[6] = {1, 1, 1, 3, 7, 64};
    int max_need = 0;
    for (int i = 0; i < NSEQ; i++) {
        seqdata *s = &g_seq[i];
        s->n_q = i == 0 ? 5 : i <= 5 ? 1 : kvt_pick(nq_choices, 6);
        s->S = i == 0   ? 20000
               : i == 1 ? 100
               : i <= 4 ? kvt_randint(6145, 8192)
               : i == 5 ? kvt_randint(3073, 4096)
                        : (i % 17 == 0 ? kvt_randint(4000, 9000) : kvt_randint(0, 1500));
        if (s->S + s->n_q > max_need) max_need = s->S + s->n_q;
    }
    g_max_pages = (max_need + PS - 1) / PS + 1;
    g_num_pages = 0;
    for (int i = 0; i < NSEQ; i++) g_num_pages += (g_seq[i].S + g_seq[i].n_q + PS - 1) / PS;
    int32_t *perm = malloc((size_t)g_num_pages * 4);
    for (int i = 0; i < g_num_pages; i++) perm[i] = i;
    kvt_shuffle(perm, g_num_pages);
    int next = 0;
    for (int i = 0; i < NSEQ; i++) {
        seqdata *s = &g_seq[i];
        int np = (s->S + s->n_q + PS - 1) / PS;
        s->pages = malloc((size_t)g_max_pages * 4);
        for (int k = 0; k < g_max_pages; k++) s->pages[k] = k < np ? perm[next++] : -1;
        s->q = malloc((size_t)s->n_q * H * D * 2);
        s->k_new = malloc((size_t)s->n_q * HK * D * 2);
        s->v_new = malloc((size_t)s->n_q * HK * D * 2);
        kvt_fill(KVATTN_BF16, s->q, (int64_t)s->n_q * H * D, -1, 1);
        kvt_fill(KVATTN_BF16, s->k_new, (int64_t)s->n_q * HK * D, -1, 1);
        kvt_fill(KVATTN_BF16, s->v_new, (int64_t)s->n_q * HK * D, -1, 1);
    }
    free(perm);
    size_t pool = (size_t)g_num_pages * PS * HK * D * 2;
    kvt_problem_init(&g_pool, KVATTN_BACKEND_CUDA, KVATTN_BF16, 0, H, HK, D);
    kvt_arr_alloc(&g_pool, &g_pool.k_cache, "k_cache", pool);
    kvt_arr_alloc(&g_pool, &g_pool.v_cache, "v_cache", pool);
    if (!g_pool.k_cache.host || !g_pool.v_cache.host || !g_pool.k_cache.dev.ptr || !g_pool.v_cache.dev.ptr) {
        kvt_note_failure("cannot allocate the pool (%zu bytes per cache)", pool);
        kvt_problem_free(&g_pool);
        return kvt_finish();
    }
    kvt_fill(KVATTN_BF16, g_pool.k_cache.host, (int64_t)(pool / 2), -1, 1);
    kvt_fill(KVATTN_BF16, g_pool.v_cache.host, (int64_t)(pool / 2), -1, 1);
    if (kvt_upload(&g_pool.k_cache.dev, g_pool.k_cache.host, pool) ||
        kvt_upload(&g_pool.v_cache.dev, g_pool.v_cache.host, pool)) {
        kvt_note_failure("cannot upload the pool (%zu bytes per cache)", pool);
        kvt_problem_free(&g_pool);
        return kvt_finish();
    }
    printf("  pool: %d pages of %d tokens (%.1f MB per cache), %d sequences\n", g_num_pages, PS, pool / 1e6, NSEQ);

    int order[NSEQ];
    for (int i = 0; i < NSEQ; i++) order[i] = i;
    for (int target = 0; target <= 1; target++) {
        kvt_case_begin("batch invariance, target %d (S=%d, n_q=%d)", target, g_seq[target].S, g_seq[target].n_q);
        uint16_t *o_alone, *o_b;
        float *l_alone, *l_b;
        int tq_alone, tq_b;
        int alone[1] = {target};
        run_batch(alone, 1, 1, 0, REF, &o_alone, &l_alone, &tq_alone);
        /* in the batch of 200 at three positions; in a batch of 5; each compared with alone */
        int positions[3] = {target, 117, NSEQ - 1};
        for (int k = 0; k < 3; k++) {
            int ids[NSEQ];
            memcpy(ids, order, sizeof ids);
            kvt_shuffle((int32_t *)ids + 0, NSEQ);
            int at = 0;
            for (int i = 0; i < NSEQ; i++)
                if (ids[i] == target) at = i;
            int tmp = ids[positions[k]];
            ids[positions[k]] = target;
            ids[at] = tmp;
            run_batch(ids, NSEQ, 1, 0, NO_REF, &o_b, &l_b, &tq_b);
            char what[96];
            snprintf(what, sizeof what, "batch of %d at index %d vs alone", NSEQ, positions[k]);
            compare_target(what, target, o_alone, l_alone, 0, tq_alone, o_b, l_b, row_of(ids, NSEQ, target), tq_b);
            free(o_b);
            free(l_b);
        }
        int small[5] = {7, 3, target, 150, 42};
        if (target == 1) small[1] = 0; /* the long sequence beside the short target */
        run_batch(small, 5, 1, 0, NO_REF, &o_b, &l_b, &tq_b);
        compare_target("batch of 5 vs alone", target, o_alone, l_alone, 0, tq_alone, o_b, l_b, row_of(small, 5, target), tq_b);
        free(o_b);
        free(l_b);
        free(o_alone);
        free(l_alone);
        kvt_case_end();
    }
    for (int bi = 0; bi <= 1; bi++) {
        kvt_case_begin("determinism: batch of %d twice, batch_invariant=%d", NSEQ, bi);
        uint16_t *o1, *o2;
        float *l1, *l2;
        int t1, t2;
        /* the first against the reference (all 200 sequences); both must write every element (run_batch) */
        run_batch(order, NSEQ, bi, 0, REF, &o1, &l1, &t1);
        run_batch(order, NSEQ, bi, 0, NO_REF, &o2, &l2, &t2);
        if (memcmp(o1, o2, (size_t)t1 * H * D * 2)) kvt_failf("out bits differ between two identical runs");
        if (memcmp(l1, l2, (size_t)t1 * H * 4)) kvt_failf("lse bits differ between two identical runs");
        free(o1);
        free(o2);
        free(l1);
        free(l2);
        kvt_case_end();
    }
    {
        kvt_case_begin("determinism: long target alone, num_splits=8 and 0, twice each");
        int alone[1] = {0};
        for (int ns = 0; ns <= 8; ns += 8) {
            uint16_t *o1, *o2;
            float *l1, *l2;
            int t1, t2;
            run_batch(alone, 1, 0, ns, REF, &o1, &l1, &t1);
            run_batch(alone, 1, 0, ns, NO_REF, &o2, &l2, &t2);
            if (memcmp(o1, o2, (size_t)t1 * H * D * 2) || memcmp(l1, l2, (size_t)t1 * H * 4))
                kvt_failf("num_splits=%d: bits differ between two identical runs", ns);
            free(o1);
            free(o2);
            free(l1);
            free(l2);
        }
        kvt_case_end();
    }
    /* Decode steps without an append (early start). With at most KV_LEAN_SEQS (64) sequences, all of one decode
     * tile, two warps of the scheduler plan the batch (the lean path); above that, or with a taller sequence, the
     * general passes do. Both must give every sequence the same pieces, so the same bits: 64 one-query sequences
     * (lean) against the same 64 and one without queries (65: general; no work of its own, so the same split). */
    g_no_append = 1;
    int dec[NSEQ], ndec = 0, longest = -1, spare = -1;
    for (int i = 1; i < NSEQ; i++) {
        if (g_seq[i].n_q == 1) {
            if (longest < 0 || g_seq[i].S > g_seq[longest].S) longest = i;
            if (ndec < LEAN_SEQS) dec[ndec++] = i;
        } else if (spare < 0) {
            spare = i;
        }
    }
    if (ndec < LEAN_SEQS || spare < 0) { /* (all but impossible: ~99 of 198 have one query, sd ~7) */
        kvt_case_begin("no append: lean path vs general passes, and batch invariance");
        kvt_failf("test setup: %d one-query sequences (%d needed), spare %d", ndec, LEAN_SEQS, spare);
        kvt_case_end();
    } else {
        kvt_case_begin("no append: %d one-query sequences (lean path) vs the same plus one without queries (general "
                       "passes), auto split, bits; the longest alone vs the reference", ndec);
        uint16_t *o1, *o2, *oa;
        float *l1, *l2, *la;
        int t1, t2, ta;
        run_batch(dec, ndec, 0, 0, REF, &o1, &l1, &t1); /* the lean run against the reference */
        const int spare_nq = g_seq[spare].n_q;
        g_seq[spare].n_q = 0;
        dec[ndec] = spare;
        run_batch(dec, ndec + 1, 0, 0, NO_REF, &o2, &l2, &t2);
        g_seq[spare].n_q = spare_nq;
        for (int i = 0; i < ndec; i++)
            compare_target("lean (64) vs general (65)", dec[i], o1, l1, row_of(dec, ndec, dec[i]), t1, o2, l2,
                           row_of(dec, ndec + 1, dec[i]), t2);
        int alone[1] = {longest};
        run_batch(alone, 1, 0, 0, REF, &oa, &la, &ta);
        free(o1); free(o2); free(oa);
        free(l1); free(l2); free(la);
        kvt_case_end();
    }
    for (int k = 0; k < 2 && ndec >= LEAN_SEQS && spare >= 0; k++) {
        const int target = k == 0 ? 1 : longest;
        kvt_case_begin("no append, batch invariance, target %d (S=%d): alone and in a batch of 9 (lean path), in "
                       "a batch of %d (general passes)", target, g_seq[target].S, NSEQ);
        uint16_t *oa, *ob;
        float *la, *lb;
        int ta, tb;
        int alone[1] = {target};
        run_batch(alone, 1, 1, 0, REF, &oa, &la, &ta);
        int nine[9] = {dec[5], dec[9], target, dec[2], dec[30], dec[11], dec[20], dec[3], dec[25]};
        for (int i = 0; i < 9; i++)
            if (i != 2 && nine[i] == target) nine[i] = dec[31 - i];
        run_batch(nine, 9, 1, 0, NO_REF, &ob, &lb, &tb);
        compare_target("batch of 9 vs alone", target, oa, la, 0, ta, ob, lb, row_of(nine, 9, target), tb);
        free(ob);
        free(lb);
        run_batch(order, NSEQ, 1, 0, NO_REF, &ob, &lb, &tb);
        compare_target("batch of 200 vs alone", target, oa, la, 0, ta, ob, lb, row_of(order, NSEQ, target), tb);
        free(ob);
        free(lb);
        free(oa);
        free(la);
        kvt_case_end();
    }
    /* Split merges of lean-path steps: every sequence of a batch of 3 (and one alone) has 4 pieces, each task merged
     * by the early decode kernel that planned it (its first items from its own lean plan), against the same
     * sequences in the batch of 200 (general passes): the same pieces, merged in the same order, the same bits. (Also
     * the check that an experimental merge path, such as dev/experiments/v74, keeps the bits.) */
    {
        kvt_case_begin("no append, 4-piece merges: sequences 2 - 4 (S %d, %d, %d: 4 batch-invariant pieces each) as "
                       "a batch of 3 and 2 alone (lean path) vs in a batch of %d (general passes), bits; the batch of 3 "
                       "and 2 alone vs the reference", g_seq[2].S, g_seq[3].S, g_seq[4].S, NSEQ);
        uint16_t *o3, *oa, *ob;
        float *l3, *la, *lb;
        int t3, ta, tb;
        int trio[3] = {3, 2, 4}, alone[1] = {2};
        run_batch(trio, 3, 1, 0, REF, &o3, &l3, &t3); /* (sequences 3 and 4 are compared in it only) */
        run_batch(alone, 1, 1, 0, REF, &oa, &la, &ta);
        run_batch(order, NSEQ, 1, 0, NO_REF, &ob, &lb, &tb);
        compare_target("alone vs batch of 200", 2, oa, la, 0, ta, ob, lb, row_of(order, NSEQ, 2), tb);
        for (int i = 0; i < 3; i++)
            compare_target("batch of 3 vs batch of 200", trio[i], o3, l3, row_of(trio, 3, trio[i]), t3, ob, lb,
                           row_of(order, NSEQ, trio[i]), tb);
        free(o3); free(oa); free(ob);
        free(l3); free(la); free(lb);
        kvt_case_end();
        kvt_case_begin("no append, auto split: sequence 5 alone (S %d: 4 pieces) and with num_splits 3 (3 pieces), "
                       "each vs the reference", g_seq[5].S);
        int five[1] = {5};
        for (int ns = 0; ns <= 3; ns += 3) {
            run_batch(five, 1, 0, ns, REF, &oa, &la, &ta);
            free(oa);
            free(la);
        }
        kvt_case_end();
    }
    g_no_append = 0;
    /* Appends with rotary: a one-query sequence alone is a decode step that starts early, its decode items rotating
     * its new key into the workspace (kv_attn_item, ROPE); in the batch of 200 (over 1024 new rows x kv heads, and
     * prompts) the append kernel rotates it first (the plain order). The cache then holds, and the attention reads,
     * the same bits only if both rotate alike (kv_rope_k8): out and lse bits compared. Target 1 (S 100, one item)
     * and the longest one-query sequence (split: its last piece holds the new key and stores it after the verdict). */
    {
        g_rmax = 0;
        for (int i = 0; i < NSEQ; i++)
            if (g_seq[i].S + g_seq[i].n_q > g_rmax) g_rmax = g_seq[i].S + g_seq[i].n_q;
        const size_t te = (size_t)g_rmax * 32; /* (each call uploads them: run_batch) */
        g_rcos = malloc(te * 4);
        g_rsin = malloc(te * 4);
        for (int pos = 0; pos < g_rmax; pos++)
            for (int i = 0; i < 32; i++) {
                const double th = pos * pow(10000.0, -2.0 * i / 64);
                g_rcos[(size_t)pos * 32 + i] = (float)cos(th);
                g_rsin[(size_t)pos * 32 + i] = (float)sin(th);
            }
        int one = -1; /* the longest one-query sequence */
        for (int i = 2; i < NSEQ; i++)
            if (g_seq[i].n_q == 1 && (one < 0 || g_seq[i].S > g_seq[one].S)) one = i;
        for (int k = 0; k < 2; k++) {
            const int target = k == 0 ? 1 : one;
            kvt_case_begin("rotary append, batch invariance, target %d (S=%d): alone (early start, the items rotate) "
                           "vs in a batch of %d (plain order, the append kernel rotates), batch_invariant, bits", target,
                           target >= 0 ? g_seq[target].S : -1, NSEQ);
            if (target < 0) {
                kvt_failf("test setup: no one-query sequence");
                kvt_case_end();
                continue;
            }
            uint16_t *oa, *ob;
            float *la, *lb;
            int ta, tb;
            int alone[1] = {target}; /* (batch_invariant: the auto split of a batch differs from one alone) */
            run_batch(alone, 1, 1, 0, REF, &oa, &la, &ta); /* (alone against the reference) */
            run_batch(order, NSEQ, 1, 0, NO_REF, &ob, &lb, &tb);
            compare_target("batch of 200 vs alone", target, oa, la, 0, ta, ob, lb, row_of(order, NSEQ, target), tb);
            free(oa); free(ob);
            free(la); free(lb);
            kvt_case_end();
        }
        free(g_rcos);
        free(g_rsin);
        g_rcos = g_rsin = NULL;
    }
    if (!kvt_guards_ok(&g_pool.k_cache.dev) || !kvt_guards_ok(&g_pool.v_cache.dev))
        kvt_note_failure("guard bytes around the pool overwritten");
    kvt_problem_free(&g_pool);
    for (int i = 0; i < NSEQ; i++) {
        free(g_seq[i].q);
        free(g_seq[i].k_new);
        free(g_seq[i].v_new);
        free(g_seq[i].pages);
    }
#endif
    return kvt_finish();
}
