/* test_cuda_bad_data.c — data-dependent failures on the CUDA backend (SPEC "Bad input", step 1): a page index
 * past the pool or negative, lengths past the capacity, leftpad > seqlen, a negative seqlen, a cache row out
 * of range, rotary positions out of range, broken cu_seqlens. The call must return OK, flag the failure in the
 * device status record, leave the failing sequence's cache and out rows untouched (out keeps its poison), and
 * compute every other sequence correctly with its cache intact. Run it under compute-sanitizer too. */
#include "test_cuda_common.h"

enum { BAD_NONE, BAD_PAGE_PAST, BAD_PAGE_NEG, BAD_PAGE_MAX, BAD_CAPACITY, BAD_LEFTPAD, BAD_SEQLEN_NEG, BAD_BATCH_IDX,
       BAD_ROTARY_POS, BAD_ROTARY_NQ, OK_PAGE_BEFORE_LEFTPAD, BAD_KINDS };
static const char *bad_name[BAD_KINDS] = {"none", "page index past the pool", "negative page index",
                                          "page index INT32_MAX", "S + n_new > capacity", "leftpad > seqlen",
                                          "negative cache_seqlens", "cache_batch_idx out of range",
                                          "position past rotary_max_pos", "n_q > S + n_new with rotary",
                                          "bad page index before leftpad (untouched: valid)"};

#define NB 5
/* The spec of a batch of B sequences with these lengths (the rest as cu_spec_default). */
static cu_spec batch_spec(int dtype, int B, const int *n_q, const int *n_new, const int *S) {
    cu_spec sp = cu_spec_default();
    sp.dtype = dtype;
    sp.B = B;
    sp.n_q = n_q;
    sp.n_new = n_new;
    sp.S = S;
    return sp;
}
/* Runs one case: builds a batch of NB sequences, breaks sequence `victim` with `kind`, checks the call. */
static void run_case(int kind, int paged, int dtype, int victim) {
    int n_q[NB] = {1, 7, 1, 33, 1}, n_new[NB] = {1, 7, 1, 33, 1}, S[NB] = {40, 100, 0, 17, 300};
    int L[NB] = {0, 3, 0, 17, 45};
    const int uses_leftpad = kind == BAD_LEFTPAD || kind == OK_PAGE_BEFORE_LEFTPAD;
    const int uses_rotary = kind == BAD_ROTARY_POS || kind == BAD_ROTARY_NQ;
    if (paged == 3) /* 15000 live slots (two rounds of the fused pass), 5 x 3203 table slots (<= 65536: fused) */
        for (int b = 0; b < NB; b++) S[b] += 2900;
    if (kind == BAD_ROTARY_NQ) { /* queries before position 0 */
        S[victim] = 0;
        n_new[victim] = 1;
        n_q[victim] = 3;
    }
    if (kind == OK_PAGE_BEFORE_LEFTPAD) L[victim] = S[victim] >= 40 ? 40 : S[victim];
    /* paged 2: page size 1 with a table of 14000+ slots per sequence (B x slots > 65536), so that the separate
     * check kernel runs the checks (smaller tables have the scheduler run them: kv_attn_check_fused); paged 3:
     * page size 1 and caches ~3000 tokens longer, so that the scheduler's flat pass takes two rounds */
    static const char *layout[4] = {"contiguous", "paged 16 (fused check)", "paged 1, long table (check kernel)",
                                    "paged 1, longer caches (fused check, 2 rounds)"};
    kvt_case_begin("%s, %s, %s, sequence %d", bad_name[kind], layout[paged], dtype == KVATTN_BF16 ? "bf16" : "fp16",
                   victim);
    cu_spec sp = batch_spec(dtype, NB, n_q, n_new, S);
    sp.L = uses_leftpad ? L : NULL;
    sp.paged = paged != 0;
    if (paged >= 2) {
        sp.page_size = 1;
        sp.extra_slots = paged == 2 ? 14000 : 2;
    }
    sp.capacity = paged ? 0 : 420;
    sp.rotary_dim = uses_rotary ? 64 : 0;
    sp.rotary_interleaved = 0;
    kvt_problem P;
    cu_build(&P, &sp);
    kvattn_params *p = &P.ph;
    int32_t *bt = P.block_table.used ? P.block_table.host : NULL;
    int32_t *sl = P.seqlens.host;
    const int end = S[victim] + n_new[victim];
    const int last_slot = paged ? (end - 1) / p->page_size : 0;
    int flag = 0;
    switch (kind) {
    case BAD_PAGE_PAST: bt[(int64_t)victim * p->max_pages_per_seq + last_slot] = p->num_pages; flag = KVATTN_FLAG_PAGE_INDEX; break;
    case BAD_PAGE_NEG: bt[(int64_t)victim * p->max_pages_per_seq + 0] = -3; flag = KVATTN_FLAG_PAGE_INDEX; break;
    case BAD_PAGE_MAX: bt[(int64_t)victim * p->max_pages_per_seq + last_slot / 2] = 2147483647; flag = KVATTN_FLAG_PAGE_INDEX; break;
    case BAD_CAPACITY: {
        int C = paged ? p->max_pages_per_seq * p->page_size : p->cache_capacity;
        sl[victim] = C - n_new[victim] + 1;
        flag = KVATTN_FLAG_CAPACITY;
        break;
    }
    case BAD_LEFTPAD: ((int32_t *)P.leftpad.host)[victim] = S[victim] + 1; flag = KVATTN_FLAG_BAD_LEFTPAD; break;
    case BAD_SEQLEN_NEG: sl[victim] = -5; flag = KVATTN_FLAG_BAD_LEFTPAD; break;
    case BAD_BATCH_IDX: {
        kvt_arr_alloc(&P, &P.batch_idx, "cache_batch_idx", NB * 4);
        int32_t *bi = P.batch_idx.host;
        for (int b = 0; b < NB; b++) bi[b] = NB - 1 - b; /* a permutation of the cache rows */
        bi[victim] = (victim & 1) ? -1 : p->cache_batch;
        flag = KVATTN_FLAG_BATCH_IDX;
        break;
    }
    case BAD_ROTARY_POS: {
        /* the victim has the largest end; every other sequence still fits */
        int other = 0;
        for (int b = 0; b < NB; b++)
            if (b != victim && S[b] + n_new[b] > other) other = S[b] + n_new[b];
        if (end <= other) {
            sl[victim] = other + 10 - n_new[victim];
            if (paged) { /* keep pages for the larger length: the rotary check must be what fails */
                kvt_case_skip("victim is not the longest");
                kvt_problem_free(&P);
                return;
            }
        }
        p->rotary_max_pos = sl[victim] + n_new[victim] - 1;
        flag = KVATTN_FLAG_ROTARY_RANGE;
        break;
    }
    case BAD_ROTARY_NQ: flag = KVATTN_FLAG_ROTARY_RANGE; break;
    case OK_PAGE_BEFORE_LEFTPAD:
        if (paged && L[victim] >= p->page_size) bt[(int64_t)victim * p->max_pages_per_seq + 0] = -7;
        break;
    default: break;
    }
    if (kvt_problem_upload(&P, 1)) {
        kvt_case_end();
        kvt_problem_free(&P);
        return;
    }
    kvt_expect e = kvt_expect_ok();
    e.flag = flag;
    e.skip_seq = flag ? victim : -1;
    if (kvt_problem_run_case(&P, e)) kvt_case_skip("unsupported");
    else {
        cu_sync_ok("after the call");
        kvt_case_end();
    }
    kvt_problem_free(&P);
}

/* Two bad sequences at once, and a broken cu_seqlens: only the status record is checked here, plus (cu) that
 * nothing at all was written. */
static void run_status_case(int which, int dtype) {
    int n_q[NB] = {1, 7, 1, 33, 1}, n_new[NB] = {1, 7, 1, 33, 1}, S[NB] = {40, 100, 0, 17, 300};
    kvt_case_begin("%s, %s", which ? "cu_seqlens_q not non-decreasing" : "two bad sequences (1: page, 3: capacity)",
                   dtype == KVATTN_BF16 ? "bf16" : "fp16");
    cu_spec sp = batch_spec(dtype, NB, n_q, n_new, S);
    kvt_problem P;
    cu_build(&P, &sp);
    kvattn_params *p = &P.ph;
    int want_flags, want_failed, want_first;
    if (which == 0) {
        ((int32_t *)P.block_table.host)[1 * p->max_pages_per_seq + 0] = p->num_pages + 100;
        ((int32_t *)P.seqlens.host)[3] = p->max_pages_per_seq * p->page_size;
        want_flags = KVATTN_FLAG_PAGE_INDEX | KVATTN_FLAG_CAPACITY;
        want_failed = 2;
        want_first = 1;
    } else {
        int32_t *cq = P.cu_q.host;
        cq[2] = cq[3] + 1; /* rows of sequence 2 run backwards */
        want_flags = KVATTN_FLAG_BAD_CU_SEQLENS;
        want_failed = NB; /* the row partition is undefined: every sequence is skipped (a documented choice) */
        want_first = 0;
    }
    if (kvt_problem_upload(&P, 1) == 0) {
        kvt_expect e = kvt_expect_ok();
        e.flag = which ? KVATTN_FLAG_BAD_CU_SEQLENS : KVATTN_FLAG_PAGE_INDEX;
        e.any_seq = 1;
        if (kvt_problem_run_case(&P, e)) { /* UNSUPPORTED where OK is due: skipped (and nothing to read) */
            kvt_case_skip("unsupported");
            kvt_problem_free(&P);
            return;
        }
        kvattn_device_status ds;
        int st = kvattn_device_status_read(P.workspace.ptr, NULL, &ds);
        if (st != KVATTN_OK) kvt_failf("status read: %s", kvattn_last_error());
        else if (ds.flags != want_flags || ds.num_failed != want_failed || ds.first_failed != want_first)
            kvt_failf("status flags 0x%x num_failed %d first_failed %d, want 0x%x %d %d", ds.flags, ds.num_failed,
                      ds.first_failed, want_flags, want_failed, want_first);
        if (which == 1) { /* nothing written: out all poison, caches as uploaded */
            unsigned char *o = malloc(P.out.bytes);
            if (!kvt_download(&P.out.dev, o, P.out.bytes))
                for (size_t i = 0; i < P.out.bytes; i++)
                    if (o[i] != 0xFF) {
                        kvt_failf("out byte %zu written although every sequence was skipped", i);
                        break;
                    }
            free(o);
            kvt_arr *c[2] = {&P.k_cache, &P.v_cache};
            for (int w = 0; w < 2; w++) {
                void *g = malloc(c[w]->bytes);
                if (!kvt_download(&c[w]->dev, g, c[w]->bytes) && memcmp(g, c[w]->host, c[w]->bytes))
                    kvt_failf("%s changed although every sequence was skipped", c[w]->name);
                free(g);
            }
        }
        cu_sync_ok("after the call");
    }
    kvt_case_end();
    kvt_problem_free(&P);
}

/* The status record is rewritten by every call: a clean call after a failing one reads all clear. */
static void run_reset_case(void) {
    int n_q[NB] = {1, 7, 1, 33, 1}, n_new[NB] = {1, 7, 1, 33, 1}, S[NB] = {40, 100, 0, 17, 300};
    kvt_case_begin("status record rewritten by the next clean call");
    cu_spec sp = batch_spec(KVATTN_BF16, NB, n_q, n_new, S);
    kvt_problem P;
    cu_build(&P, &sp);
    ((int32_t *)P.block_table.host)[2 * P.ph.max_pages_per_seq] = -1;
    size_t ws = 0;
    if (kvt_problem_upload(&P, 1) == 0 && kvattn_workspace_size(&P.pd, KVATTN_BACKEND_CUDA, &ws) == KVATTN_OK) {
        kvt_buf w = kvt_alloc(KVATTN_BACKEND_CUDA, ws);
        kvattn_device_status ds;
        int st = kvattn_forward(&P.pd, KVATTN_BACKEND_CUDA, w.ptr, ws, NULL);
        kvattn_device_status_read(w.ptr, NULL, &ds);
        if (st != KVATTN_OK || ds.flags != KVATTN_FLAG_PAGE_INDEX || ds.num_failed != 1 || ds.first_failed != 2)
            kvt_failf("bad call: status %d flags 0x%x failed %d first %d", st, ds.flags, ds.num_failed, ds.first_failed);
        ((int32_t *)P.block_table.host)[2 * P.ph.max_pages_per_seq] = 0; /* fix it (page 0 may be shared: fine) */
        kvt_upload(&P.block_table.dev, P.block_table.host, P.block_table.bytes);
        st = kvattn_forward(&P.pd, KVATTN_BACKEND_CUDA, w.ptr, ws, NULL);
        kvattn_device_status_read(w.ptr, NULL, &ds);
        if (st != KVATTN_OK || ds.flags != 0 || ds.num_failed != 0 || ds.first_failed != -1)
            kvt_failf("clean call: status %d flags 0x%x failed %d first %d", st, ds.flags, ds.num_failed, ds.first_failed);
        if (!kvt_guards_ok(&w)) kvt_failf("workspace guards overwritten");
        kvt_free(&w);
        cu_sync_ok("after the calls");
    } else kvt_failf("setup failed: %s", kvattn_last_error());
    kvt_case_end();
    kvt_problem_free(&P);
}

/* A batch of more than 1024 sequences with small paged caches: the scheduler still runs the checks (B <= 2048,
 * < 65536 table slots) and then gives each of its threads two sequences. One bad page in the second half.
 * BL > KV_SCHED_SEQS (2048): the check kernel runs the checks, and the scheduler keeps no per-sequence facts in smem
 * (attn_kernels.cuh: cached = B <= KV_SCHED_SEQS; its passes re-read them and the tile prefix from global memory). */
static void run_large_batch_case(int dtype, int BL) {
    enum { BL_MAX = 2600 };
    static int n_q[BL_MAX], n_new[BL_MAX], S[BL_MAX];
    if (BL > BL_MAX) BL = BL_MAX;
    for (int b = 0; b < BL; b++) {
        n_q[b] = n_new[b] = b % 97 == 5 ? 3 : 1;
        S[b] = kvt_randint(0, 200);
    }
    const int victim = kvt_randint(1025, BL - 1);
    kvt_case_begin("batch of %d (%s), bad page in sequence %d, %s", BL,
                   BL > 2048 ? "check kernel; the scheduler's passes from global memory" : "two sequences per scheduler thread", victim,
                   dtype == KVATTN_BF16 ? "bf16" : "fp16");
    cu_spec sp = batch_spec(dtype, BL, n_q, n_new, S);
    kvt_problem P;
    cu_build(&P, &sp);
    const int last_slot = (S[victim] + n_new[victim] - 1) / P.ph.page_size;
    ((int32_t *)P.block_table.host)[(int64_t)victim * P.ph.max_pages_per_seq + last_slot] = P.ph.num_pages;
    if (kvt_problem_upload(&P, 1) == 0) {
        kvt_expect e = kvt_expect_ok();
        e.flag = KVATTN_FLAG_PAGE_INDEX;
        e.skip_seq = victim;
        if (kvt_problem_run_case(&P, e)) {
            kvt_case_skip("unsupported");
            kvt_problem_free(&P);
            return;
        }
        cu_sync_ok("after the call");
    }
    kvt_case_end();
    kvt_problem_free(&P);
}

/* A decode step without an append (no new tokens), or (app 1) one that appends without rotary, or (app 2) with
 * rotary (random rotary dim 64 or 128, random pairing): the decode kernel then starts before the scheduler's page
 * checks end and writes a sequence's output only once its check verdict is final (early start, attn.cu
 * kv_attn_early); with app 1, the decode items read the new keys from k_new / v_new while the scheduler stores
 * them, with app 2 they rotate them into the workspace and read them there while the scheduler stores them
 * rotated; the victim's cache must stay untouched. BAD_ROTARY_POS (app 2 only): the victim, the longest sequence,
 * ends one position past rotary_max_pos. shape 0: four one-query sequences
 * (decode kernel alone); 1: five (decode-first order, the
 * prefill kernel after it with an empty list); 2: twelve, the first with 5 queries (20 packed rows: a prefill
 * item, computed by the prefill kernel of the decode-first order; the victim of every first repetition), four
 * with no query; 3: 48 sequences, one query each but every seventh without (the scheduler's lean path with both
 * of its warps holding sequences), and in the second repetition sequence 40 with 5 queries (a prefill tile in the
 * second warp: the general passes). Long caches are split into pieces (the merge of the victim's pieces must write
 * nothing), short ones are one item each. */
static void run_nonew_case(int kind, int shape, int dtype, int rep, int app) {
    enum { BM = 48 };
    static const int nbat[4] = {4, 5, 12, 48};
    const int B = nbat[shape];
    int n_q[BM], n_new[BM], S[BM];
    /* app: each sequence appends its queries' tokens, every other one without a query one token, and sequence
     * `big` 17 - 90 (more tasks than one scheduler warp takes: the whole block stores it, kv_sched_append; its new
     * keys span up to three KV tiles, read from k_new / v_new) */
    const int big = kvt_randint(0, B - 1);
    for (int b = 0; b < B; b++) {
        if (shape == 3) n_q[b] = b == 40 && rep == 1 ? 5 : b % 7 == 6 ? 0 : 1;
        else n_q[b] = shape == 2 ? (b == 0 ? 5 : b < 8 ? 1 : 0) : 1;
        n_new[b] = !app ? 0 : b == big ? kvt_randint(17, 90) : n_q[b] > 0 ? n_q[b] : b & 1;
        S[b] = kvt_randint(0, 1) ? kvt_randint(2000, 4000) : kvt_randint(5, 700);
    }
    int victim = kvt_randint(shape == 3 && rep == 0 ? 32 : 0, B - 1); /* shape 3, lean: in the second warp */
    while (n_q[victim] == 0) victim = kvt_randint(shape == 3 && rep == 0 ? 32 : 0, B - 1);
    if (shape == 2 && rep == 0) { /* the sequence of the prefill item, with a cache long enough to be split */
        victim = 0;
        S[0] = kvt_randint(2000, 4000);
    }
    if (kind == BAD_ROTARY_POS) { /* the victim ends past every other sequence */
        int other = 0;
        for (int b = 0; b < B; b++)
            if (b != victim && S[b] + n_new[b] > other) other = S[b] + n_new[b];
        if (S[victim] + n_new[victim] <= other) S[victim] = other + kvt_randint(1, 40) - n_new[victim];
    }
    const int rot_dim = app == 2 ? 64 * kvt_randint(1, 2) : 0, rot_il = app == 2 ? kvt_randint(0, 1) : 0;
    char what[96];
    if (app == 2)
        snprintf(what, sizeof what, "decode step that appends with rotary (dim %d, %s)", rot_dim,
                 rot_il ? "interleaved" : "halves");
    else snprintf(what, sizeof what, "%s", app ? "decode step that appends" : "no append");
    kvt_case_begin("%s (early start), %d sequences, %s in sequence %d (S %d, %d queries), %s", what, B,
                   bad_name[kind], victim, S[victim], n_q[victim], dtype == KVATTN_BF16 ? "bf16" : "fp16");
    cu_spec sp = batch_spec(dtype, B, n_q, n_new, S);
    sp.rotary_dim = rot_dim;
    sp.rotary_interleaved = rot_il;
    kvt_problem P;
    cu_build(&P, &sp);
    kvattn_params *p = &P.ph;
    int32_t *bt = P.block_table.host;
    const int last_slot = (S[victim] + n_new[victim] - 1) / p->page_size; /* (with app: the appended row's page) */
    int flag = 0;
    switch (kind) {
    case BAD_PAGE_PAST: bt[(int64_t)victim * p->max_pages_per_seq + last_slot] = p->num_pages; flag = KVATTN_FLAG_PAGE_INDEX; break;
    case BAD_PAGE_NEG: bt[(int64_t)victim * p->max_pages_per_seq + last_slot / 2] = -3; flag = KVATTN_FLAG_PAGE_INDEX; break;
    case BAD_CAPACITY:
        ((int32_t *)P.seqlens.host)[victim] = p->max_pages_per_seq * p->page_size - n_new[victim] + 1;
        flag = KVATTN_FLAG_CAPACITY;
        break;
    case BAD_ROTARY_POS:
        p->rotary_max_pos = S[victim] + n_new[victim] - 1;
        flag = KVATTN_FLAG_ROTARY_RANGE;
        break;
    default: break;
    }
    int skipped = 0;
    if (kvt_problem_upload(&P, 1) == 0) {
        kvt_expect e = kvt_expect_ok();
        e.flag = flag;
        e.skip_seq = flag ? victim : -1;
        skipped = kvt_problem_run_case(&P, e);
        if (!skipped) cu_sync_ok("after the call");
    }
    if (skipped) kvt_case_skip("unsupported"); /* counted as skipped only, never also as passed */
    else kvt_case_end();
    kvt_problem_free(&P);
}

int main(void) {
    kvt_init("test_cuda_bad_data");
    static const int nonew_kinds[4] = {BAD_NONE, BAD_PAGE_PAST, BAD_PAGE_NEG, BAD_CAPACITY};
    /* the layouts each kind runs on (the count of skips without a GPU must be the count of cases run with one) */
#define LAYOUT_RUNS(kind, paged)                                                                                   \
    (!((paged) && (kind) == BAD_BATCH_IDX) &&                                                                      \
     !(!(paged) && ((kind) == BAD_PAGE_PAST || (kind) == BAD_PAGE_NEG || (kind) == BAD_PAGE_MAX)))
    int n_cases = 4 + 1 + 2 + 2 + 4 * 4 * 2 * 2 * 2 + 5 * 4 * 2 * 2;
    for (int kind = 0; kind < BAD_KINDS; kind++)
        for (int paged = 0; paged <= 3; paged++) n_cases += LAYOUT_RUNS(kind, paged) ? 2 * 2 : 0;
    if (!cu_gpu_or_skip(n_cases)) return kvt_finish();
    const int dtypes[2] = {KVATTN_BF16, KVATTN_F16};
    for (int kind = 0; kind < BAD_KINDS; kind++)
        for (int paged = 0; paged <= 3; paged++) {
            if (!LAYOUT_RUNS(kind, paged)) continue;
            for (int d = 0; d < 2; d++) {
                int victims[2] = {kvt_randint(0, NB - 1), kind == BAD_ROTARY_POS ? 4 : kvt_randint(0, NB - 1)};
                for (int v = 0; v < 2; v++) run_case(kind, paged, dtypes[d], kind == BAD_ROTARY_POS ? 4 : victims[v]);
            }
        }
    for (int d = 0; d < 2; d++) {
        run_status_case(0, dtypes[d]);
        run_status_case(1, dtypes[d]);
    }
    run_reset_case();
    for (int d = 0; d < 2; d++) run_large_batch_case(dtypes[d], 1300);
    for (int d = 0; d < 2; d++) run_large_batch_case(dtypes[d], 2600);
    for (int k = 0; k < 4; k++)
        for (int shape = 0; shape < 4; shape++)
            for (int d = 0; d < 2; d++)
                for (int rep = 0; rep < 2; rep++)
                    for (int app = 0; app < 2; app++) run_nonew_case(nonew_kinds[k], shape, dtypes[d], rep, app);
    static const int rope_kinds[5] = {BAD_NONE, BAD_PAGE_PAST, BAD_PAGE_NEG, BAD_CAPACITY, BAD_ROTARY_POS};
    for (int k = 0; k < 5; k++)
        for (int shape = 0; shape < 4; shape++)
            for (int d = 0; d < 2; d++)
                for (int rep = 0; rep < 2; rep++) run_nonew_case(rope_kinds[k], shape, dtypes[d], rep, 2);
    return kvt_finish();
}
