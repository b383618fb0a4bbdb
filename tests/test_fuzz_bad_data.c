/* test_fuzz_bad_data.c — randomized bad data (SPEC step 1, "Nothing out of bounds, ever"): fresh ragged batches
 * with 0..3 sequences broken at random places, plus near misses (wrong-looking values where no check looks) that
 * must not count. CPU: KVATTN_ERR_BAD_DATA naming the first broken sequence, nothing changed (clean: computed).
 * CUDA: OK, the device status exactly the broken set's, their cache and out/lse rows untouched, every other
 * sequence correct (a broken cu_seqlens: the whole batch skipped). Each case is one 64-bit state, printed with
 * every failure: KVATTN_FUZZ_CASE=<state> replays it alone with a table of its sequences; KVATTN_TEST_SEED replays
 * the run; KVATTN_FUZZ_CASES=n sets the number of cases; KVATTN_FUZZ_VERBOSE=1 (2: with tables) prints each case.
 * B sequences, H query heads, Hk key/value heads, D head dim, ps page size, C capacity, R rotary_max_pos. */
#include "test_cuda_common.h"

#include <inttypes.h>
#include <limits.h>
#include <stdint.h>

#define MAXB 12

/* ---- what a case may break ----------------------------------------------------------------------------- */
enum { /* faults: each breaks its sequence (the check it must fail: fault_flag) */
       F_NONE,
       F_PAGE_PAST,     /* a touched slot holds num_pages + 0..3 */
       F_PAGE_FAR,      /* ... num_pages + up to 2^30 */
       F_PAGE_NEG,      /* ... -1 or another negative */
       F_PAGE_MAX,      /* ... INT32_MAX */
       F_PAGE_MIN,      /* ... INT32_MIN */
       F_GROW_UNMAPPED, /* cache_seqlens within the capacity but past the mapped pages (slots hold no page) */
       F_CAPACITY,      /* S + n_new = C + 1..3 (or more) */
       F_CAPACITY_HUGE, /* S near INT32_MAX: S + n_new overflows int32 */
       F_LEFTPAD_GT,    /* L > S */
       F_LEFTPAD_NEG,   /* L < 0 */
       F_SEQLEN_NEG,    /* S < 0 */
       F_BATCH_IDX,     /* cache_batch_idx outside [0, cache_batch) */
       F_ROTARY_POS,    /* S + n_new > rotary_max_pos (every other sequence fits) */
       F_ROTARY_NQ,     /* n_q > S + n_new with rotary: a query before position 0 */
       F_KINDS };
static const char *fault_name[F_KINDS] = {"none", "page_past_pool", "page_far_past_pool", "page_negative",
                                          "page_INT32_MAX", "page_INT32_MIN", "seqlen_into_unmapped_slots",
                                          "capacity", "capacity_int32_overflow", "leftpad_gt_seqlen",
                                          "leftpad_negative", "seqlen_negative", "batch_idx_out_of_range",
                                          "rotary_pos_past_max", "rotary_nq_gt_positions"};
static int fault_flag(int f) {
    if (f >= F_PAGE_PAST && f <= F_GROW_UNMAPPED) return KVATTN_FLAG_PAGE_INDEX;
    if (f == F_CAPACITY || f == F_CAPACITY_HUGE) return KVATTN_FLAG_CAPACITY;
    if (f == F_LEFTPAD_GT || f == F_LEFTPAD_NEG || f == F_SEQLEN_NEG) return KVATTN_FLAG_BAD_LEFTPAD;
    if (f == F_BATCH_IDX) return KVATTN_FLAG_BATCH_IDX;
    if (f == F_ROTARY_POS || f == F_ROTARY_NQ) return KVATTN_FLAG_ROTARY_RANGE;
    return 0;
}
enum { /* near misses: valid sequences that look broken */
       N_NONE,
       N_PAGE_BEFORE_L, /* garbage in slots wholly left of the page holding position L */
       N_PAGE_AFTER_END, /* garbage in the slot just past the last touched one (end often a multiple of ps) */
       N_EMPTY_RANGE,   /* S == L, n_new == 0: no position touched, so no slot is read (paged: all garbage) */
       N_AT_CAPACITY,   /* S + n_new == C exactly */
       N_LEFTPAD_EQ_S,  /* L == S: only the new tokens are visible */
       N_ROTARY_NQ_EQ,  /* n_q == S + n_new with rotary: the first query at position 0 */
       N_KINDS };
static const char *near_name[N_KINDS] = {"none", "garbage_slots_before_leftpad", "garbage_slot_after_end",
                                         "empty_range_all_slots_garbage", "seqlen_at_capacity", "leftpad_eq_seqlen",
                                         "rotary_nq_eq_positions"};
enum { CU_NONE, CU_FIRST, CU_PAST_TOTAL, CU_DOWN, CU_KINDS };
static const char *cu_name[CU_KINDS] = {"none", "cu[0] != 0", "cu[B] > total rows", "cu decreasing"};

/* ---- one case ------------------------------------------------------------------------------------------- */
typedef struct seq_plan {
    int n_q, n_new, S, L; /* lengths as built (valid, but for F_GROW_UNMAPPED's S and the faults applied later) */
    int mapped_end;       /* positions [0, mapped_end) have pages (paged) */
    int fault, near;
    int flags;            /* KVATTN_FLAG_* bits it must raise (computed from the final arrays) */
    char what[96];        /* where the fault / near miss went */
} seq_plan;

typedef struct fuzz_case {
    uint64_t state;
    int backend, dtype, B, H, Hk, D;
    int paged, ps, hnd, max_pages, bt_stride, num_pages, huge_table, trailing_garbage, junk_before_L;
    int C, cache_batch, use_idx;
    int has_new, has_leftpad, rotary, rot_R, rot_slack, long_mode;
    int q_pad, o_pad, lse_kind;
    int cu_fault, cu_on_knew;
    char cu_what[96];
    int n_victims, want_flags, first_victim;
    unsigned char mask[MAXB];
    seq_plan s[MAXB];
    char opts[200];
} fuzz_case;

static int64_t g_budget_cache, g_budget_ref; /* per case: cache elements, reference multiply-adds */
static int g_verbose;
static long g_fault_count[F_KINDS], g_near_count[N_KINDS], g_cu_count[CU_KINDS], g_clean_cases;

static int imax(int a, int b) { return a > b ? a : b; }
static int imin(int a, int b) { return a < b ? a : b; }

/* A page index that the pool does not hold (any of the ways a table can be wrong). */
static int32_t invalid_page(int num_pages) {
    switch (kvt_randint(0, 5)) {
    case 0: return -1;
    case 1: return num_pages;
    case 2: return INT32_MAX;
    case 3: return INT32_MIN;
    case 4: return -kvt_randint(2, 1 << 30);
    default: return num_pages + kvt_randint(1, 1 << 30);
    }
}
/* Anything at all, valid page indices included (1 in `one_in_valid`): what an untouched slot may hold. */
static int32_t garbage_page(int num_pages, int one_in_valid) {
    return kvt_randint(1, one_in_valid) == 1 && num_pages > 0 ? kvt_randint(0, num_pages - 1) : invalid_page(num_pages);
}

/* ---- the flags a sequence must raise, from SPEC step 1 (cu_seqlens aside) ------------------------------------
 * The page indices are judged only where the touched positions [L, S + n_new) are defined (0 <= L <= S and
 * S + n_new <= C); they are the slots L / ps .. (S + n_new - 1) / ps. */
static int seq_flags(const kvattn_params *p, int b) {
    kvref_seq s = kvref_seq_of(p, b);
    const int64_t end = (int64_t)s.S + s.n_new;
    int f = 0;
    if (s.S < 0 || s.L < 0 || s.L > s.S) f |= KVATTN_FLAG_BAD_LEFTPAD;
    if (end > s.C) f |= KVATTN_FLAG_CAPACITY;
    if (!p->block_table && (s.cache_row < 0 || s.cache_row >= p->cache_batch)) f |= KVATTN_FLAG_BATCH_IDX;
    if (p->rotary_cos && (end > p->rotary_max_pos || (int64_t)s.n_q > end)) f |= KVATTN_FLAG_ROTARY_RANGE;
    if (p->block_table && !(f & (KVATTN_FLAG_BAD_LEFTPAD | KVATTN_FLAG_CAPACITY)) && end > s.L) {
        const int32_t *row = p->block_table + (int64_t)b * p->block_table_batch_stride;
        for (int64_t slot = s.L / p->page_size; slot <= (end - 1) / p->page_size; slot++)
            if (row[slot] < 0 || row[slot] >= p->num_pages) {
                f |= KVATTN_FLAG_PAGE_INDEX;
                break;
            }
    }
    return f;
}

static const char *dtype_str(int dt) { return dt == KVATTN_F32 ? "f32" : dt == KVATTN_F16 ? "f16" : "bf16"; }

/* ---- drawing a case: lengths, faults and near misses, the layout (no allocation) --------------------------
 * Returns 0 when the case fits the budgets, 1 to draw again. */
static int plan_case(fuzz_case *c) {
    /* {32, 2}, {32, 1}: 16 and 32 query heads per kv head (a decode row fills a 16-row decode tile, or is a prefill
     * item of 32 packed rows); 184: the CUDA variant DP 192 (head dims 168 - 192), which no other random draw has */
    static const int heads[][2] = {{8, 2}, {4, 4}, {8, 1}, {6, 3}, {2, 1}, {1, 1}, {12, 4}, {16, 2}, {32, 2}, {32, 1}};
    static const int dims[] = {64, 96, 128, 256, 8, 40, 72, 136, 200, 64, 128, 184};
    static const int page_sizes[] = {1, 2, 3, 7, 16, 64, 256};
    const uint64_t state = c->state;
    const int backend = c->backend;
    memset(c, 0, sizeof *c);
    c->state = state;
    c->backend = backend;
    int dr = kvt_randint(0, 9);
    c->dtype = dr < 4 ? KVATTN_BF16 : dr < 8 ? KVATTN_F16 : KVATTN_F32;
    if (backend == KVATTN_BACKEND_CUDA && c->dtype == KVATTN_F32) c->dtype = KVATTN_BF16; /* CPU only */
    int hc = kvt_randint(0, 9);
    c->H = heads[hc][0];
    c->Hk = heads[hc][1];
    c->D = kvt_pick(dims, 12);
    c->long_mode = kvt_randint(0, 9) < 2; /* caches of thousands of tokens: the CUDA split paths */
    c->B = c->long_mode ? kvt_randint(1, 5) : kvt_randint(1, MAXB);
    c->paged = kvt_randint(0, 2) > 0;
    c->ps = c->paged ? kvt_pick(page_sizes, 7) : 0;
    c->hnd = c->paged && kvt_randint(0, 2) == 0;
    c->has_new = kvt_randint(0, 19) > 2;
    const int all_new_zero = c->has_new && kvt_randint(0, 9) == 0;
    c->has_leftpad = kvt_randint(0, 2) == 0;
    c->rotary = kvt_randint(0, 2) == 0;
    c->use_idx = !c->paged && kvt_randint(0, 9) < 4;
    c->q_pad = kvt_randint(0, 3) == 0 ? 8 : 0;
    c->o_pad = kvt_randint(0, 3) == 0 ? 8 : 0;
    c->lse_kind = kvt_randint(0, 6) == 0 ? 0 : kvt_randint(1, 2);
    c->huge_table = c->paged && c->ps <= 16 && kvt_randint(0, 11) == 0;
    c->trailing_garbage = c->paged && kvt_randint(0, 1);
    c->junk_before_L = c->paged && kvt_randint(0, 4) == 0;
    c->rot_slack = kvt_randint(0, 1) ? 0 : kvt_randint(1, 3); /* 0: the longest sequence ends exactly at R */
    const int B = c->B;

    /* lengths: mostly decode steps, some prompts and speculative steps, some idle sequences */
    for (int b = 0; b < B; b++) {
        seq_plan *s = &c->s[b];
        int r = kvt_randint(0, 99);
        s->n_q = r < 8 ? 0 : r < 63 ? 1 : r < 80 ? kvt_randint(2, 8) : kvt_randint(9, 80);
        /* usually n_new = n_q; SPEC ties them in no way (n_q = 0 may still append) */
        const int rn = kvt_randint(0, 9);
        s->n_new = !c->has_new || all_new_zero ? 0 : rn < 7 ? s->n_q : rn < 9 ? kvt_randint(0, s->n_q)
                                                                         : kvt_randint(0, s->n_q + 8);
        if (c->long_mode) s->S = kvt_randint(0, 3) == 0 ? kvt_randint(0, 300) : kvt_randint(1000, 4000);
        else s->S = kvt_randint(0, 9) == 0 ? 0 : kvt_randint(1, 300);
        s->L = c->has_leftpad && kvt_randint(0, 1) ? kvt_randint(0, s->S) : 0;
        if (c->paged && kvt_randint(0, 3) == 0) { /* the touched range ends at a page boundary */
            int end = s->S + s->n_new;
            s->S += (c->ps - end % c->ps) % c->ps;
        }
        if (c->paged && kvt_randint(0, 3) == 0) s->L = s->L / c->ps * c->ps; /* ... or starts at one */
    }

    /* the broken sequences and their faults; a broken cu_seqlens is a case of its own */
    int r = kvt_randint(0, 99);
    if (r < 7) {
        c->cu_fault = B >= 2 ? kvt_randint(CU_FIRST, CU_DOWN) : kvt_randint(CU_FIRST, CU_PAST_TOTAL);
        c->cu_on_knew = c->has_new && kvt_randint(0, 1);
    }
    int nv = c->cu_fault ? 0 : r < 25 ? 0 : r < 58 ? 1 : r < 82 ? 2 : 3;
    nv = imin(nv, B);
    int order[MAXB];
    for (int b = 0; b < B; b++) order[b] = b;
    kvt_shuffle(order, B);
    for (int v = 0; v < nv; v++) {
        int kinds[32], n = 0;
        for (int k = 0; k < (c->paged ? 3 : 0); k++) { /* page faults are the main attraction of a paged case */
            kinds[n++] = kvt_randint(F_PAGE_PAST, F_PAGE_MIN);
            kinds[n++] = kvt_randint(F_PAGE_PAST, F_PAGE_MIN);
        }
        if (c->paged) kinds[n++] = F_GROW_UNMAPPED;
        kinds[n++] = F_CAPACITY;
        kinds[n++] = F_CAPACITY_HUGE;
        kinds[n++] = F_LEFTPAD_GT;
        kinds[n++] = F_LEFTPAD_NEG;
        kinds[n++] = F_SEQLEN_NEG;
        if (!c->paged) {
            kinds[n++] = F_BATCH_IDX;
            kinds[n++] = F_BATCH_IDX;
        }
        if (c->rotary) {
            kinds[n++] = F_ROTARY_POS;
            kinds[n++] = F_ROTARY_POS;
            kinds[n++] = F_ROTARY_NQ;
        }
        c->s[order[v]].fault = kvt_pick(kinds, n);
    }
    for (int v = nv; v < B; v++) {
        if (kvt_randint(0, 99) >= 40) continue;
        int kinds[16], n = 0;
        if (c->paged) {
            kinds[n++] = N_PAGE_BEFORE_L;
            kinds[n++] = N_PAGE_BEFORE_L;
            kinds[n++] = N_PAGE_AFTER_END;
            kinds[n++] = N_PAGE_AFTER_END;
        }
        kinds[n++] = N_EMPTY_RANGE;
        if (!c->huge_table) kinds[n++] = N_AT_CAPACITY;
        kinds[n++] = N_LEFTPAD_EQ_S;
        if (c->rotary) kinds[n++] = N_ROTARY_NQ_EQ;
        c->s[order[v]].near = kvt_pick(kinds, n);
    }

    /* lengths the faults and near misses need before the layout is sized */
    int any_rotpos = 0;
    for (int b = 0; b < B; b++) {
        seq_plan *s = &c->s[b];
        if (s->fault == F_LEFTPAD_GT || s->fault == F_LEFTPAD_NEG || s->near == N_LEFTPAD_EQ_S ||
            s->near == N_EMPTY_RANGE || s->near == N_PAGE_BEFORE_L)
            c->has_leftpad = 1;
        if (s->fault == F_BATCH_IDX) c->use_idx = 1;
        if (s->fault == F_ROTARY_NQ) { /* queries before position 0 */
            s->S = kvt_randint(0, 3);
            s->n_new = c->has_new && !all_new_zero ? kvt_randint(0, 2) : 0;
            s->n_q = s->S + s->n_new + kvt_randint(1, 4);
            s->L = c->has_leftpad ? kvt_randint(0, s->S) : 0;
        } else if (s->near == N_ROTARY_NQ_EQ) {
            if (s->n_q == 0) s->n_q = kvt_randint(1, 4);
            if (s->n_new > s->n_q) s->n_new = s->n_q;
            s->S = s->n_q - s->n_new;
            s->L = c->has_leftpad ? kvt_randint(0, s->S) : 0;
        } else if (c->rotary && s->n_q > s->S + s->n_new) {
            s->S = s->n_q - s->n_new; /* every query at a position >= 0 */
        }
        if (s->near == N_EMPTY_RANGE) {
            s->n_new = 0;
            if (c->rotary && s->S < s->n_q) s->S = s->n_q;
            s->L = s->S;
        }
        if (s->near == N_LEFTPAD_EQ_S) s->L = s->S;
        if (s->near == N_PAGE_BEFORE_L) {
            if (s->S < c->ps) s->S = c->ps + kvt_randint(0, c->ps);
            s->L = kvt_randint(c->ps, s->S);
        }
        if (s->fault >= F_PAGE_PAST && s->fault <= F_PAGE_MIN && s->S + s->n_new <= s->L)
            s->S = s->L + kvt_randint(1, 3); /* at least one touched slot */
        if (s->fault == F_ROTARY_POS) any_rotpos = 1;
        s->mapped_end = s->S + s->n_new;
    }
    for (int b = 0; b < B; b++) /* with rotary, a sequence at the capacity would pass R too */
        if (c->s[b].near == N_AT_CAPACITY && c->rotary && any_rotpos) c->s[b].near = N_NONE;

    /* F_GROW_UNMAPPED: the length reaches past its pages (planned now so that C and R cover it) */
    for (int b = 0; b < B; b++) {
        seq_plan *s = &c->s[b];
        if (s->fault != F_GROW_UNMAPPED) continue;
        int mapped_pages = (s->mapped_end + c->ps - 1) / c->ps;
        s->S = mapped_pages * c->ps - s->n_new + kvt_randint(1, 2 * c->ps);
    }
    /* rotary_max_pos: the positions of every other sequence fit, the F_ROTARY_POS ones end past it */
    int R0 = 0;
    for (int b = 0; b < B; b++)
        if (c->s[b].fault != F_ROTARY_POS) R0 = imax(R0, c->s[b].S + c->s[b].n_new);
    if (any_rotpos) {
        c->rot_R = R0 + c->rot_slack;
        for (int b = 0; b < B; b++) {
            seq_plan *s = &c->s[b];
            if (s->fault != F_ROTARY_POS) continue;
            int end = c->rot_R + kvt_randint(1, 3);
            if (s->S + s->n_new < end) s->S = end - s->n_new;
            s->mapped_end = s->S + s->n_new; /* pages for all of it: only the rotary check fails */
        }
    }

    /* capacity */
    int need_max = 1;
    for (int b = 0; b < B; b++) need_max = imax(need_max, c->s[b].S + c->s[b].n_new);
    if (c->paged) {
        int extra = kvt_randint(0, 3);
        for (int b = 0; b < B; b++)
            if (c->s[b].near == N_PAGE_AFTER_END && extra == 0) extra = 1;
        if (c->huge_table) extra += 65536 / B + kvt_randint(1, 2000); /* B x slots > 65536: the CUDA check kernel */
        c->max_pages = (need_max + c->ps - 1) / c->ps + extra;
        c->bt_stride = c->max_pages + (kvt_randint(0, 2) == 0 ? kvt_randint(1, 3) : 0);
        c->C = c->max_pages * c->ps;
    } else {
        c->C = need_max + kvt_randint(0, 4);
        c->cache_batch = B + (c->use_idx ? kvt_randint(0, 3) : 0);
    }
    for (int b = 0; b < B; b++) {
        seq_plan *s = &c->s[b];
        if (s->near != N_AT_CAPACITY) continue;
        s->S = c->C - s->n_new;
        s->mapped_end = c->C;
    }
    if (c->rotary) {
        if (!any_rotpos) {
            c->rot_R = 0;
            for (int b = 0; b < B; b++) c->rot_R = imax(c->rot_R, c->s[b].S + c->s[b].n_new);
            c->rot_R += c->rot_slack;
        }
    }

    /* the pool */
    int64_t ref_cost = 0;
    int pages = 0;
    for (int b = 0; b < B; b++) {
        seq_plan *s = &c->s[b];
        if (c->paged) pages += (s->mapped_end + c->ps - 1) / c->ps;
        ref_cost += (int64_t)s->n_q * c->H * imax(s->S + s->n_new - s->L, 0) * c->D;
    }
    if (c->paged) c->num_pages = pages + kvt_randint(0, 5) + (pages == 0);
    int64_t cache_elems = (c->paged ? (int64_t)c->num_pages * c->ps : (int64_t)c->cache_batch * c->C) * c->Hk * c->D;
    return cache_elems > g_budget_cache || ref_cost > g_budget_ref;
}

/* ---- building the tensors of a planned case into P (host mirror; uploaded by the caller) ------------------ */
static void build_case(fuzz_case *c, kvt_problem *P) {
    const int B = c->B, H = c->H, Hk = c->Hk, D = c->D, dt = c->dtype, es = kvref_dtype_size(dt);
    kvt_problem_init(P, c->backend, dt, B, H, Hk, D);
    kvattn_params *p = &P->ph;

    int32_t cu_q[MAXB + 1] = {0}, cu_n[MAXB + 1] = {0};
    for (int b = 0; b < B; b++) {
        cu_q[b + 1] = cu_q[b] + c->s[b].n_q;
        cu_n[b + 1] = cu_n[b] + c->s[b].n_new;
    }
    const int32_t total_q = cu_q[B], total_new = cu_n[B];
    p->total_q = total_q;
    kvt_arr_alloc(P, &P->cu_q, "cu_seqlens_q", (size_t)(B + 1) * 4);
    memcpy(P->cu_q.host, cu_q, (size_t)(B + 1) * 4);
    p->q_head_stride = D;
    p->q_row_stride = (int64_t)H * D + c->q_pad;
    p->out_head_stride = D;
    p->out_row_stride = (int64_t)H * D + c->o_pad;
    kvt_arr_alloc(P, &P->q, "q", (size_t)total_q * p->q_row_stride * es);
    kvt_fill(dt, P->q.host, (int64_t)total_q * p->q_row_stride, -2, 2);
    kvt_arr_alloc(P, &P->out, "out", (size_t)total_q * p->out_row_stride * es);
    if (c->lse_kind) {
        p->lse_head_stride = c->lse_kind == 1 ? total_q : 1;
        p->lse_row_stride = c->lse_kind == 1 ? 1 : H;
        kvt_arr_alloc(P, &P->lse, "softmax_lse", (size_t)total_q * H * 4);
    }
    if (c->has_new) {
        p->total_knew = total_new;
        kvt_arr_alloc(P, &P->cu_knew, "cu_seqlens_knew", (size_t)(B + 1) * 4);
        memcpy(P->cu_knew.host, cu_n, (size_t)(B + 1) * 4);
        p->knew_head_stride = p->vnew_head_stride = D;
        p->knew_row_stride = p->vnew_row_stride = (int64_t)Hk * D;
        kvt_arr_alloc(P, &P->k_new, "k_new", (size_t)total_new * Hk * D * es);
        kvt_arr_alloc(P, &P->v_new, "v_new", (size_t)total_new * Hk * D * es);
        kvt_fill(dt, P->k_new.host, (int64_t)total_new * Hk * D, -1, 1);
        kvt_fill(dt, P->v_new.host, (int64_t)total_new * Hk * D, -1, 1);
    }

    int64_t cache_elems;
    if (c->paged) {
        const int ps = c->ps;
        p->page_size = ps;
        p->num_pages = c->num_pages;
        p->max_pages_per_seq = c->max_pages;
        p->block_table_batch_stride = c->bt_stride;
        p->k_batch_stride = p->v_batch_stride = (int64_t)ps * Hk * D;
        if (c->hnd) {
            p->k_head_stride = p->v_head_stride = (int64_t)ps * D;
            p->k_row_stride = p->v_row_stride = D;
        } else {
            p->k_head_stride = p->v_head_stride = D;
            p->k_row_stride = p->v_row_stride = (int64_t)Hk * D;
        }
        cache_elems = (int64_t)c->num_pages * ps * Hk * D;
        int32_t *pool = malloc(sizeof(int32_t) * (size_t)c->num_pages);
        for (int i = 0; i < c->num_pages; i++) pool[i] = i;
        kvt_shuffle(pool, c->num_pages);
        kvt_arr_alloc(P, &P->block_table, "block_table", (size_t)B * c->bt_stride * 4);
        int32_t *bt = P->block_table.host;
        int next = 0;
        for (int b = 0; b < B; b++) {
            seq_plan *s = &c->s[b];
            int32_t *row = bt + (int64_t)b * c->bt_stride;
            const int mapped = (s->mapped_end + ps - 1) / ps;
            for (int slot = 0; slot < c->bt_stride; slot++) {
                if (slot < mapped) row[slot] = pool[next++];
                /* slots a sequence does not touch may hold anything; F_GROW_UNMAPPED's must hold no page */
                else row[slot] = !c->trailing_garbage ? -1
                                 : s->fault == F_GROW_UNMAPPED ? invalid_page(c->num_pages)
                                                               : garbage_page(c->num_pages, 4);
                if (c->junk_before_L && (int64_t)(slot + 1) * ps <= s->L) row[slot] = garbage_page(c->num_pages, 4);
            }
        }
        free(pool);
    } else {
        p->cache_batch = c->cache_batch;
        p->cache_capacity = c->C;
        p->k_batch_stride = p->v_batch_stride = (int64_t)c->C * Hk * D;
        p->k_row_stride = p->v_row_stride = (int64_t)Hk * D;
        p->k_head_stride = p->v_head_stride = D;
        cache_elems = (int64_t)c->cache_batch * c->C * Hk * D;
        if (c->use_idx) { /* distinct rows, shuffled */
            int32_t rows[MAXB + 3];
            for (int i = 0; i < c->cache_batch; i++) rows[i] = i;
            kvt_shuffle(rows, c->cache_batch);
            kvt_arr_alloc(P, &P->batch_idx, "cache_batch_idx", (size_t)B * 4);
            memcpy(P->batch_idx.host, rows, (size_t)B * 4);
        }
    }
    kvt_arr_alloc(P, &P->k_cache, "k_cache", (size_t)cache_elems * es);
    kvt_arr_alloc(P, &P->v_cache, "v_cache", (size_t)cache_elems * es);
    kvt_fill(dt, P->k_cache.host, cache_elems, -1, 1);
    kvt_fill(dt, P->v_cache.host, cache_elems, -1, 1);

    kvt_arr_alloc(P, &P->seqlens, "cache_seqlens", (size_t)B * 4);
    if (c->has_leftpad) kvt_arr_alloc(P, &P->leftpad, "cache_leftpad", (size_t)B * 4);
    for (int b = 0; b < B; b++) {
        ((int32_t *)P->seqlens.host)[b] = c->s[b].S;
        if (c->has_leftpad) ((int32_t *)P->leftpad.host)[b] = c->s[b].L;
    }

    size_t ol = 0;
    c->opts[0] = 0;
    if (c->rotary) {
        const int R = kvt_randint(0, 1) ? D : 2 * kvt_randint(1, D / 2); /* all channels, or a part */
        const int half = R / 2, rdt = kvt_randint(0, 1) ? KVATTN_F32 : dt;
        const int64_t rs = kvt_randint(0, 2) ? 0 : half + kvt_randint(1, 3), rstride = rs ? rs : half;
        p->rotary_dim = R;
        p->rotary_max_pos = c->rot_R;
        p->rotary_interleaved = kvt_randint(0, 1);
        p->rotary_dtype = rdt;
        p->rotary_row_stride = rs;
        const size_t n = (size_t)c->rot_R * rstride;
        kvt_arr_alloc(P, &P->rot_cos, "rotary_cos", n * kvref_dtype_size(rdt));
        kvt_arr_alloc(P, &P->rot_sin, "rotary_sin", n * kvref_dtype_size(rdt));
        for (int pos = 0; pos < c->rot_R; pos++)
            for (int i = 0; i < rstride; i++) {
                double th = i < half ? pos * pow(10000.0, -2.0 * i / R) : 0.0;
                kvref_store(rdt, P->rot_cos.host, (int64_t)pos * rstride + i, i < half ? cos(th) : 9.0);
                kvref_store(rdt, P->rot_sin.host, (int64_t)pos * rstride + i, i < half ? sin(th) : 9.0);
            }
        ol += snprintf(c->opts + ol, sizeof c->opts - ol, " rotary(R=%d %s %s maxpos=%d%s)", R,
                       p->rotary_interleaved ? "gptj" : "neox", dtype_str(rdt), c->rot_R, rs ? " strided" : "");
    }
    if (kvt_randint(0, 4) == 0) {
        const int per_batch = kvt_randint(0, 1);
        const int64_t bs = per_batch ? H + kvt_randint(0, 2) : 0;
        const size_t n = per_batch ? (size_t)B * bs : (size_t)H;
        kvt_arr_alloc(P, &P->alibi, "alibi_slopes", n * 4);
        for (size_t i = 0; i < n; i++) ((float *)P->alibi.host)[i] = (float)kvt_uniform(0.0, 0.3);
        p->alibi_batch_stride = bs;
        ol += snprintf(c->opts + ol, sizeof c->opts - ol, " alibi%s", per_batch ? "[B,H]" : "[H]");
    }
    p->causal = kvt_randint(0, 9) < 4;
    if (kvt_randint(0, 4) == 0) {
        p->window_left = kvt_pick((const int[]){0, 1, 7, 100}, 4);
        p->window_right = kvt_pick((const int[]){-1, 0, 3}, 3); /* with causal too: causal's edge wins */
    }
    if (kvt_randint(0, 9) == 0) p->softcap = (float)kvt_uniform(1.0, 5.0);
    if (kvt_randint(0, 3) == 0) p->softmax_scale = (float)kvt_uniform(0.05, 0.3);
    p->num_splits = kvt_pick((const int[]){0, 0, 0, 1, 2, 5}, 6);
    p->batch_invariant = kvt_randint(0, 4) == 0;
    ol += snprintf(c->opts + ol, sizeof c->opts - ol, "%s win=(%d,%d)%s%s splits=%d%s lse=%d pad(q%d,o%d)",
                   p->causal ? " causal" : "", p->window_left, p->window_right, p->softcap > 0 ? " softcap" : "",
                   p->softmax_scale != 0 ? " scale" : "", p->num_splits, p->batch_invariant ? " batch_inv" : "",
                   c->lse_kind, c->q_pad, c->o_pad);
}

/* ---- faults and near misses, written into the host arrays of a built case --------------------------------- */
static void apply_faults(fuzz_case *c, kvt_problem *P) {
    kvattn_params *p = &P->ph;
    int32_t *sl = P->seqlens.host, *lp = c->has_leftpad ? P->leftpad.host : NULL;
    int32_t *bt = c->paged ? P->block_table.host : NULL;
    const int ps = c->ps;
    for (int b = 0; b < c->B; b++) {
        seq_plan *s = &c->s[b];
        int32_t *row = bt ? bt + (int64_t)b * c->bt_stride : NULL;
        const int end = s->S + s->n_new;
        s->what[0] = 0;
        switch (s->fault) {
        case F_PAGE_PAST: case F_PAGE_FAR: case F_PAGE_NEG: case F_PAGE_MAX: case F_PAGE_MIN: {
            const int lo = s->L / ps, hi = (end - 1) / ps;
            int slot;
            switch (kvt_randint(0, 4)) { /* the edges of the touched slots, the first appended one, or any */
            case 0: slot = lo; break;
            case 1: slot = hi; break;
            case 2: slot = s->n_new > 0 ? s->S / ps : hi; break;
            default: slot = kvt_randint(lo, hi); break;
            }
            int32_t v = s->fault == F_PAGE_PAST ? c->num_pages + kvt_randint(0, 3)
                        : s->fault == F_PAGE_FAR ? c->num_pages + kvt_randint(4, 1 << 30)
                        : s->fault == F_PAGE_NEG ? (kvt_randint(0, 1) ? -1 : -kvt_randint(2, 1 << 30))
                        : s->fault == F_PAGE_MAX ? INT32_MAX : INT32_MIN;
            snprintf(s->what, sizeof s->what, "slot %d of touched %d..%d: %d -> %d", slot, lo, hi, row[slot], v);
            row[slot] = v;
            break;
        }
        case F_GROW_UNMAPPED:
            snprintf(s->what, sizeof s->what, "S=%d: positions to %d, pages only for [0,%d)", s->S, end,
                     (s->mapped_end + ps - 1) / ps * ps);
            break;
        case F_CAPACITY: case F_CAPACITY_HUGE: {
            int64_t v; /* past the capacity by a little, a lot, or up to int32 overflow of S + n_new */
            if (s->fault == F_CAPACITY)
                v = (int64_t)c->C - s->n_new + (kvt_randint(0, 3) ? kvt_randint(1, 3) : kvt_randint(4, 100000));
            else
                v = kvt_randint(0, 1) ? INT32_MAX - kvt_randint(0, imin(s->n_new, 3)) : (1 << 30) + kvt_randint(0, 999);
            if (v > INT32_MAX) v = INT32_MAX;
            sl[b] = (int32_t)v;
            snprintf(s->what, sizeof s->what, "S %d -> %d (n_new %d, C %d)", s->S, sl[b], s->n_new, c->C);
            break;
        }
        case F_LEFTPAD_GT:
            lp[b] = kvt_randint(0, 4) ? s->S + kvt_randint(1, 3) : INT32_MAX;
            snprintf(s->what, sizeof s->what, "L %d -> %d (S %d)", s->L, lp[b], s->S);
            break;
        case F_LEFTPAD_NEG:
            lp[b] = kvt_randint(0, 4) ? -kvt_randint(1, 3) : INT32_MIN;
            snprintf(s->what, sizeof s->what, "L %d -> %d", s->L, lp[b]);
            break;
        case F_SEQLEN_NEG:
            sl[b] = kvt_randint(0, 4) ? -kvt_randint(1, 5) : INT32_MIN;
            snprintf(s->what, sizeof s->what, "S %d -> %d", s->S, sl[b]);
            break;
        case F_BATCH_IDX: {
            int32_t *bi = P->batch_idx.host;
            int32_t v = kvt_pick((const int[]){-1, -2, 0, 1, 2, 3}, 6);
            v = v == 0 ? c->cache_batch : v == 1 ? c->cache_batch + kvt_randint(1, 100) : v == 2 ? INT32_MAX
                : v == 3 ? INT32_MIN : v;
            snprintf(s->what, sizeof s->what, "cache_batch_idx %d -> %d (cache_batch %d)", bi[b], v, c->cache_batch);
            bi[b] = v;
            break;
        }
        case F_ROTARY_POS:
            snprintf(s->what, sizeof s->what, "S + n_new = %d > rotary_max_pos %d", end, c->rot_R);
            break;
        case F_ROTARY_NQ:
            snprintf(s->what, sizeof s->what, "n_q %d > S + n_new = %d", s->n_q, end);
            break;
        default: break;
        }
        switch (s->near) {
        case N_PAGE_BEFORE_L: {
            const int first = s->L / ps; /* slots [0, first) are wholly left of L */
            int n = 0;
            for (int slot = 0; slot < first; slot++)
                if (slot == first - 1 || kvt_randint(0, 1)) {
                    row[slot] = garbage_page(c->num_pages, 5);
                    n++;
                }
            snprintf(s->what, sizeof s->what, "garbage in %d of slots 0..%d (L %d, slot %d = %d)", n, first - 1, s->L,
                     first - 1, row[first - 1]);
            break;
        }
        case N_PAGE_AFTER_END: {
            const int slot = end > 0 ? (end - 1) / ps + 1 : 0;
            if (slot < c->max_pages) row[slot] = garbage_page(c->num_pages, 8);
            for (int k = slot + 1; k < c->bt_stride; k++)
                if (kvt_randint(0, 2) == 0) row[k] = garbage_page(c->num_pages, 4);
            snprintf(s->what, sizeof s->what, "end %d, slot %d = %d", end, slot, slot < c->max_pages ? row[slot] : 0);
            break;
        }
        case N_EMPTY_RANGE:
            if (row)
                for (int k = 0; k < c->bt_stride; k++) row[k] = garbage_page(c->num_pages, 5);
            snprintf(s->what, sizeof s->what, "S = L = %d, n_new 0%s", s->S, row ? ", every slot garbage" : "");
            break;
        case N_AT_CAPACITY: snprintf(s->what, sizeof s->what, "S + n_new = C = %d", c->C); break;
        case N_LEFTPAD_EQ_S: snprintf(s->what, sizeof s->what, "L = S = %d", s->S); break;
        case N_ROTARY_NQ_EQ: snprintf(s->what, sizeof s->what, "n_q = S + n_new = %d", s->n_q); break;
        default: break;
        }
    }

    if (c->cu_fault) {
        kvt_arr *a = c->cu_on_knew ? &P->cu_knew : &P->cu_q;
        int32_t *cu = a->host;
        const int B = c->B, total = c->cu_on_knew ? p->total_knew : p->total_q;
        switch (c->cu_fault) {
        case CU_FIRST: cu[0] = kvt_randint(0, 1) ? kvt_randint(1, 3) : -kvt_randint(1, 3); break;
        case CU_PAST_TOTAL: cu[B] = total + kvt_randint(1, 5); break;
        default: {
            const int k = kvt_randint(1, B - 1);
            if (kvt_randint(0, 1)) cu[k] = cu[k - 1] - kvt_randint(1, 3); /* below its predecessor */
            else cu[k] = cu[k + 1] + kvt_randint(1, 3);                  /* above its successor */
            break;
        }
        }
        size_t l = snprintf(c->cu_what, sizeof c->cu_what, "%s %s:", a->name, cu_name[c->cu_fault]);
        for (int b = 0; b <= B && l < sizeof c->cu_what - 12; b++)
            l += snprintf(c->cu_what + l, sizeof c->cu_what - l, " %d", cu[b]);
    }
}

/* ---- reporting -------------------------------------------------------------------------------------------- */
static void flags_str(int f, char *buf, size_t n) {
    static const char *names[6] = {"CU_SEQLENS", "LEFTPAD", "CAPACITY", "PAGE_INDEX", "ROTARY_RANGE", "BATCH_IDX"};
    size_t l = 0;
    buf[0] = 0;
    for (int i = 0; i < 6; i++)
        if (f & (1 << i)) l += snprintf(buf + l, n - l, "%s%s", l ? "|" : "", names[i]);
    if (!l) snprintf(buf, n, "0");
}

static void case_title(const fuzz_case *c, int index, char *buf, size_t n) {
    size_t l = snprintf(buf, n, "%s #%d state=%" PRIu64 ": %s B=%d H=%d Hk=%d D=%d ", c->backend ? "cuda" : "cpu",
                        index, c->state, dtype_str(c->dtype), c->B, c->H, c->Hk, c->D);
    if (c->paged)
        l += snprintf(buf + l, n - l, "paged ps=%d pool=%d slots=%d%s", c->ps, c->num_pages, c->max_pages,
                      c->huge_table ? " (huge table)" : "");
    else
        l += snprintf(buf + l, n - l, "contiguous C=%d rows=%d%s", c->C, c->cache_batch,
                      c->use_idx ? " batch_idx" : "");
    if (c->cu_fault) l += snprintf(buf + l, n - l, " | %s", c->cu_what);
    else if (!c->n_victims) l += snprintf(buf + l, n - l, " | clean");
    for (int b = 0; b < c->B && l < n - 40; b++)
        if (c->s[b].fault) l += snprintf(buf + l, n - l, " | seq %d: %s", b, fault_name[c->s[b].fault]);
    for (int b = 0; b < c->B && l < n - 40; b++)
        if (c->s[b].near) l += snprintf(buf + l, n - l, " | near miss seq %d: %s", b, near_name[c->s[b].near]);
}

/* Everything about a case, one line per sequence (on failure, KVATTN_FUZZ_CASE and KVATTN_FUZZ_VERBOSE=2). */
static void dump_case(const fuzz_case *c, const kvt_problem *P) {
    const kvattn_params *p = &P->ph;
    char fs[96];
    printf("  replay this case alone: KVATTN_FUZZ_CASE=%" PRIu64 "\n", c->state);
    printf("  %s layout: ", dtype_str(c->dtype));
    if (c->paged)
        printf("paged ps=%d num_pages=%d max_pages_per_seq=%d table stride=%d %s, trailing slots %s%s\n", c->ps,
               c->num_pages, c->max_pages, c->bt_stride, c->hnd ? "HND" : "NHD", c->trailing_garbage ? "garbage" : "-1",
               c->junk_before_L ? ", garbage before leftpad" : "");
    else printf("contiguous C=%d cache_batch=%d%s\n", c->C, c->cache_batch, c->use_idx ? " with cache_batch_idx" : "");
    printf("  options:%s%s%s\n", c->opts, c->has_new ? " k_new" : " no k_new", c->has_leftpad ? " leftpad" : "");
    if (c->cu_fault) printf("  cu_seqlens fault: %s\n", c->cu_what);
    flags_str(c->want_flags, fs, sizeof fs);
    printf("  expected device status: flags %s (0x%x), num_failed %d, first_failed %d\n", fs, c->want_flags,
           c->cu_fault ? c->B : c->n_victims, c->cu_fault ? 0 : c->first_victim);
    for (int b = 0; b < c->B; b++) {
        const seq_plan *s = &c->s[b];
        kvref_seq r = kvref_seq_of(p, b);
        flags_str(s->flags, fs, sizeof fs);
        printf("  seq %2d: n_q %3d n_new %3d S %d L %d end %lld", b, r.n_q, r.n_new, r.S, r.L,
               (long long)r.S + r.n_new);
        if (!c->paged) printf(" row %d", r.cache_row);
        else printf(" pages for [0,%d)", (s->mapped_end + c->ps - 1) / c->ps * c->ps);
        if (s->fault) printf("  BROKEN %s: %s -> flags %s", fault_name[s->fault], s->what, fs);
        else if (s->near) printf("  near miss %s: %s", near_name[s->near], s->what);
        printf("\n");
    }
    if (c->paged && g_verbose >= 2)
        for (int b = 0; b < c->B; b++) {
            const int32_t *row = (const int32_t *)P->block_table.host + (int64_t)b * c->bt_stride;
            printf("  table %2d:", b);
            for (int k = 0; k < c->bt_stride && k < 48; k++) printf(" %d", row[k]);
            printf("%s\n", c->bt_stride > 48 ? " ..." : "");
        }
    fflush(stdout);
}

/* ---- one case on one backend ------------------------------------------------------------------------------ */
static void run_case(uint64_t state, int backend, int index) {
    fuzz_case c;
    kvt_problem P;
    kvt_rng_set(state);
    c.state = state;
    c.backend = backend;
    for (int attempt = 0; attempt < 200 && plan_case(&c); attempt++) continue; /* over budget: draw again */
    build_case(&c, &P);
    apply_faults(&c, &P);
    kvattn_params *p = &P.ph;

    /* the broken set, as planned */
    c.n_victims = 0;
    c.first_victim = -1;
    for (int b = 0; b < c.B; b++) {
        c.mask[b] = c.s[b].fault != F_NONE;
        if (c.mask[b] && c.first_victim < 0) c.first_victim = b;
        c.n_victims += c.mask[b];
        g_fault_count[c.s[b].fault]++;
        g_near_count[c.s[b].near]++;
    }
    g_cu_count[c.cu_fault]++;
    if (!c.cu_fault && !c.n_victims) g_clean_cases++;
    char title[512];
    case_title(&c, index, title, sizeof title);
    kvt_case_begin("%s", title);

    int skipped = 0;
    if (kvt_problem_upload(&P, 1) == 0) { /* (which also points P.ph at the host arrays) */
        /* the expectation, from the final arrays; the generator must have broken exactly the planned sequences */
        int gen_bug = 0, cu_allowed = KVATTN_FLAG_BAD_CU_SEQLENS;
        c.want_flags = 0;
        for (int b = 0; b < c.B; b++) {
            seq_plan *s = &c.s[b];
            s->flags = seq_flags(p, b);
            if (c.cu_fault) cu_allowed |= s->flags;
            else if ((s->flags != 0) != (s->fault != F_NONE) || (s->fault && !(s->flags & fault_flag(s->fault))))
                gen_bug = 1;
            if (s->fault) c.want_flags |= s->flags;
        }
        if (c.cu_fault) c.want_flags = KVATTN_FLAG_BAD_CU_SEQLENS;
        if (g_verbose) {
            printf("case %s\n", title);
            if (g_verbose >= 2) dump_case(&c, &P);
        }
        /* the reference's own checks (ref.c) must agree: the first failure is the first broken sequence, and
         * with the broken ones left out nothing fails */
        int ref_bad = -1, ref_flag = kvref_check(p, &ref_bad), masked_bad = -1;
        if (!c.cu_fault && ((ref_flag != 0) != (c.n_victims != 0) || ref_bad != c.first_victim ||
                            kvref_check_mask(p, c.mask, &masked_bad) != 0))
            gen_bug = 1;
        if (c.cu_fault && ref_flag != KVATTN_FLAG_BAD_CU_SEQLENS) gen_bug = 1;
        if (gen_bug)
            kvt_failf("test generator: the planned broken sequences are not the ones the checks must find (reference: "
                      "flag 0x%x at sequence %d; with the broken ones left out: sequence %d fails)", ref_flag, ref_bad,
                      masked_bad);
        const int broken = c.cu_fault || c.n_victims;
        kvt_expect e = kvt_expect_ok();
        if (backend == KVATTN_BACKEND_CPU) {
            if (broken) {
                e.status = KVATTN_ERR_BAD_DATA;
                e.no_change = 1;
            }
        } else if (c.cu_fault) {
            e.flag = KVATTN_FLAG_BAD_CU_SEQLENS;
            e.any_seq = 1;
        } else {
            e.flag = c.want_flags;
            e.skip_mask = c.mask;
        }
        skipped = kvt_problem_run_case(&P, e); /* (UNSUPPORTED where BAD_DATA is due fails the case) */
        if (!skipped && backend == KVATTN_BACKEND_CPU && broken && P.last_status == KVATTN_ERR_BAD_DATA &&
            !c.cu_fault) {
            /* the first failing sequence is the one named: a near miss before it must not have been taken */
            char want[32];
            snprintf(want, sizeof want, "sequence %d:", c.first_victim);
            if (!strstr(P.last_error, want))
                kvt_failf("BAD_DATA message does not name the first broken sequence %d: \"%s\"", c.first_victim,
                          P.last_error);
        }
        if (!skipped && backend == KVATTN_BACKEND_CUDA) {
            cu_sync_ok("after the call");
            kvattn_device_status ds = {0, 0, -1, 0};
            int rs = kvattn_device_status_read(P.workspace.ptr, NULL, &ds);
            if (rs != KVATTN_OK) kvt_failf("device_status_read: %s", kvattn_last_error());
            else if (c.cu_fault) {
                /* the row partition is undefined: every sequence skipped; other sequences' own flags may show */
                if (!(ds.flags & KVATTN_FLAG_BAD_CU_SEQLENS) || (ds.flags & ~cu_allowed) || ds.num_failed != c.B ||
                    ds.first_failed != 0) {
                    char g[96], a[96];
                    flags_str(ds.flags, g, sizeof g);
                    flags_str(cu_allowed, a, sizeof a);
                    kvt_failf("broken cu_seqlens: device status flags %s num_failed %d first_failed %d, want "
                              "CU_SEQLENS (within %s), %d, 0", g, ds.num_failed, ds.first_failed, a, c.B);
                }
                /* nothing written: out and lse all poison, caches as uploaded */
                kvt_arr *outs[2] = {&P.out, &P.lse};
                for (int w = 0; w < 2; w++) {
                    if (!outs[w]->used || !outs[w]->bytes) continue;
                    unsigned char *o = malloc(outs[w]->bytes);
                    if (!kvt_download(&outs[w]->dev, o, outs[w]->bytes))
                        for (size_t i = 0; i < outs[w]->bytes; i++)
                            if (o[i] != 0xFF) {
                                kvt_failf("%s byte %zu written although cu_seqlens is broken", outs[w]->name, i);
                                break;
                            }
                    free(o);
                }
                kvt_arr *caches[2] = {&P.k_cache, &P.v_cache};
                for (int w = 0; w < 2; w++) {
                    unsigned char *g = malloc(caches[w]->bytes);
                    if (!kvt_download(&caches[w]->dev, g, caches[w]->bytes) &&
                        memcmp(g, caches[w]->host, caches[w]->bytes))
                        kvt_failf("%s changed although cu_seqlens is broken", caches[w]->name);
                    free(g);
                }
            } else if (kvt_case_failed()) {
                char g[96];
                flags_str(ds.flags, g, sizeof g);
                printf("  device status read: flags %s (0x%x), num_failed %d, first_failed %d\n", g, ds.flags,
                       ds.num_failed, ds.first_failed);
            }
        }
    }
    if (kvt_case_failed()) {
        if (backend == KVATTN_BACKEND_CPU)
            printf("  CPU status %s: %s\n", kvattn_status_string(P.last_status), P.last_error);
        dump_case(&c, &P);
    }
    if (skipped) kvt_case_skip("unsupported");
    else kvt_case_end();
    kvt_problem_free(&P);
}

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int main(void) {
    kvt_init("test_fuzz_bad_data");
    const int quick = kvt_quick();
    g_verbose = env_int("KVATTN_FUZZ_VERBOSE", 0);
    g_budget_cache = quick ? 600000 : 2000000;
    g_budget_ref = quick ? 4000000 : 12000000;
    const int n_cpu = env_int("KVATTN_FUZZ_CASES", quick ? 400 : 3000);
    const int n_gpu = env_int("KVATTN_FUZZ_CASES", quick ? 40 : 500);
    const int cuda = kvattn_backend_available(KVATTN_BACKEND_CUDA);

    const char *one = getenv("KVATTN_FUZZ_CASE");
    if (one && *one) { /* one case, both backends, with its table */
        const uint64_t state = strtoull(one, NULL, 0);
        if (!g_verbose) g_verbose = 2;
        run_case(state, KVATTN_BACKEND_CPU, 0);
        if (cu_gpu_or_skip(cuda ? 0 : 1)) run_case(state, KVATTN_BACKEND_CUDA, 0);
        return kvt_finish();
    }

    for (int i = 0; i < n_cpu; i++) {
        const uint64_t state = kvt_rand_u64(), keep = kvt_rng_get();
        run_case(state, KVATTN_BACKEND_CPU, i);
        kvt_rng_set(keep);
    }
    if (cu_gpu_or_skip(n_gpu))
        for (int i = 0; i < n_gpu; i++) {
            const uint64_t state = kvt_rand_u64(), keep = kvt_rng_get();
            run_case(state, KVATTN_BACKEND_CUDA, i);
            kvt_rng_set(keep);
        }

    printf("faults:");
    for (int f = 1; f < F_KINDS; f++) printf(" %s %ld", fault_name[f], g_fault_count[f]);
    printf("\nnear misses:");
    for (int n = 1; n < N_KINDS; n++) printf(" %s %ld", near_name[n], g_near_count[n]);
    printf("\ncu_seqlens faults:");
    for (int k = 1; k < CU_KINDS; k++) printf(" %s %ld", cu_name[k], g_cu_count[k]);
    printf("; clean cases %ld\n", g_clean_cases);
    return kvt_finish();
}
