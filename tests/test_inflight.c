/* test_inflight.c — the seed scenario: a generation loop with inflight batching over a paged cache (page 16,
 * pages handed out by a shuffled free list kept by the test itself). Each step mixes decodes of 1 token,
 * speculative verifies of 3 (of which only some are accepted: the rejected rows are overwritten later) and
 * new prompts of 50-200 tokens replacing finished sequences, in a shuffled batch order. Every step's outputs
 * and the WHOLE cache are checked against the reference, which keeps its own copy of the cache.
 * B sequences, H query heads, Hk key/value heads, D head dim. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SLOTS = 4, PAGE = 16, POOL = 160, MAXP = 32, MAXPOS = MAXP * PAGE };

typedef struct slot {
    int active;
    int len;     /* tokens in the cache */
    int target;  /* finishes at this length */
    int npages;
    int32_t pages[MAXP];
} slot;

typedef struct free_list {
    int32_t page[POOL];
    int n;
} free_list;

static int32_t page_take(free_list *f) { return f->n > 0 ? f->page[--f->n] : -1; }
static void page_give(free_list *f, int32_t page) { f->page[f->n++] = page; }

static void run_loop(int backend, int dt, int D, int steps) {
    const int H = 8, Hk = 2, es = kvref_dtype_size(dt);
    const char *dname = dt == KVATTN_F32 ? "f32" : dt == KVATTN_F16 ? "f16" : "bf16";
    kvt_problem P;
    memset(&P, 0, sizeof P);
    P.backend = backend;
    /* the caches live for the whole loop: [POOL, PAGE, Hk, D], stale random contents in every page */
    int64_t page_elems = (int64_t)PAGE * Hk * D, cache_elems = POOL * page_elems;
    kvt_arr_alloc(&P, &P.k_cache, "k_cache", (size_t)cache_elems * es);
    kvt_arr_alloc(&P, &P.v_cache, "v_cache", (size_t)cache_elems * es);
    kvt_fill(dt, P.k_cache.host, cache_elems, -1, 1);
    kvt_fill(dt, P.v_cache.host, cache_elems, -1, 1);

    free_list fl;
    fl.n = POOL;
    for (int i = 0; i < POOL; i++) fl.page[i] = i;
    kvt_shuffle(fl.page, POOL);
    slot sl[SLOTS];
    memset(sl, 0, sizeof sl);

    /* rotary tables (GPT-NeoX pairing, fp32), shared by every step */
    float *cos_t = malloc(sizeof(float) * MAXPOS * (D / 2)), *sin_t = malloc(sizeof(float) * MAXPOS * (D / 2));
    for (int pos = 0; pos < MAXPOS; pos++)
        for (int i = 0; i < D / 2; i++) {
            double th = pos * pow(10000.0, -2.0 * i / D);
            cos_t[pos * (D / 2) + i] = (float)cos(th);
            sin_t[pos * (D / 2) + i] = (float)sin(th);
        }

    int failed_steps = 0;
    for (int step = 0; step < steps && !failed_steps; step++) {
        /* decide this step: a finished (or empty) slot starts a new prompt, others decode 1 or verify 3 */
        int n_tok[SLOTS], order[SLOTS], B = 0;
        for (int s = 0; s < SLOTS; s++) {
            if (sl[s].active && sl[s].len >= sl[s].target) { /* finished: pages go back, slot sits out a step */
                for (int i = 0; i < sl[s].npages; i++) page_give(&fl, sl[s].pages[i]);
                sl[s].active = 0;
                sl[s].npages = 0;
                n_tok[s] = 0;
                continue;
            }
            if (!sl[s].active) {
                sl[s].active = 1;
                sl[s].len = 0;
                n_tok[s] = kvt_randint(50, 200);
                sl[s].target = n_tok[s] + kvt_randint(3, 40);
            } else n_tok[s] = kvt_randint(0, 3) == 0 ? 3 : 1;
            while (sl[s].npages * PAGE < sl[s].len + n_tok[s]) sl[s].pages[sl[s].npages++] = page_take(&fl);
            order[B++] = s;
        }
        kvt_shuffle((int32_t *)order, B);

        kvattn_params *p = &P.ph;
        *p = kvattn_params_default();
        p->dtype = dt;
        p->batch = B;
        p->num_heads = H;
        p->num_kv_heads = Hk;
        p->head_dim = D;
        int cu[SLOTS + 1] = {0};
        for (int b = 0; b < B; b++) cu[b + 1] = cu[b] + n_tok[order[b]];
        int total = cu[B];
        p->total_q = p->total_knew = total;
        kvt_arr_alloc(&P, &P.cu_q, "cu_seqlens_q", sizeof(int32_t) * (B + 1));
        kvt_arr_alloc(&P, &P.cu_knew, "cu_seqlens_knew", sizeof(int32_t) * (B + 1));
        memcpy(P.cu_q.host, cu, sizeof(int32_t) * (B + 1));
        memcpy(P.cu_knew.host, cu, sizeof(int32_t) * (B + 1));
        p->q_head_stride = p->out_head_stride = D;
        p->q_row_stride = p->out_row_stride = (int64_t)H * D;
        p->knew_head_stride = p->vnew_head_stride = D;
        p->knew_row_stride = p->vnew_row_stride = (int64_t)Hk * D;
        kvt_arr_alloc(&P, &P.q, "q", (size_t)total * H * D * es);
        kvt_arr_alloc(&P, &P.out, "out", (size_t)total * H * D * es);
        kvt_arr_alloc(&P, &P.k_new, "k_new", (size_t)total * Hk * D * es);
        kvt_arr_alloc(&P, &P.v_new, "v_new", (size_t)total * Hk * D * es);
        kvt_fill(dt, P.q.host, (int64_t)total * H * D, -4, 4);
        kvt_fill(dt, P.k_new.host, (int64_t)total * Hk * D, -1, 1);
        kvt_fill(dt, P.v_new.host, (int64_t)total * Hk * D, -1, 1);
        p->lse_head_stride = total;
        p->lse_row_stride = 1;
        kvt_arr_alloc(&P, &P.lse, "softmax_lse", (size_t)total * H * 4);

        p->k_batch_stride = p->v_batch_stride = page_elems;
        p->k_row_stride = p->v_row_stride = (int64_t)Hk * D;
        p->k_head_stride = p->v_head_stride = D;
        p->page_size = PAGE;
        p->num_pages = POOL;
        p->max_pages_per_seq = MAXP;
        p->block_table_batch_stride = MAXP;
        kvt_arr_alloc(&P, &P.block_table, "block_table", sizeof(int32_t) * (B ? B : 1) * MAXP);
        kvt_arr_alloc(&P, &P.seqlens, "cache_seqlens", sizeof(int32_t) * (B ? B : 1));
        int32_t *bt = P.block_table.host, *seqlens = P.seqlens.host;
        char lens[160];
        size_t ll = 0;
        for (int b = 0; b < B; b++) {
            slot *q = &sl[order[b]];
            for (int i = 0; i < MAXP; i++) bt[b * MAXP + i] = i < q->npages ? q->pages[i] : -1;
            seqlens[b] = q->len;
            ll += snprintf(lens + ll, sizeof lens - ll, "%s%d+%d", b ? " " : "", q->len, n_tok[order[b]]);
        }
        p->rotary_dim = D;
        p->rotary_max_pos = MAXPOS;
        p->rotary_dtype = KVATTN_F32;
        p->rotary_interleaved = 0;
        kvt_arr_alloc(&P, &P.rot_cos, "rotary_cos", sizeof(float) * MAXPOS * (D / 2));
        kvt_arr_alloc(&P, &P.rot_sin, "rotary_sin", sizeof(float) * MAXPOS * (D / 2));
        memcpy(P.rot_cos.host, cos_t, sizeof(float) * MAXPOS * (D / 2));
        memcpy(P.rot_sin.host, sin_t, sizeof(float) * MAXPOS * (D / 2));
        p->causal = 1;
        p->batch_invariant = step % 2;

        kvt_case_begin("%s %s D=%d step %d [%s]", backend ? "cuda" : "cpu", dname, D, step, lens);
        int skipped = 0;
        if (kvt_problem_upload(&P, step == 0) == 0) skipped = kvt_problem_run(&P, kvt_expect_ok());
        if (skipped) { /* this step and the loop's later ones (each a case) do not run */
            for (int s = step; s < steps; s++) kvt_case_skip("unsupported");
            break;
        }
        if (kvt_case_failed()) failed_steps++;
        kvt_case_end();
        kvt_problem_free_io(&P);

        /* a speculative verify of 3 keeps 1..3 of them; the rest of its rows are stale and get overwritten */
        for (int b = 0; b < B; b++) {
            slot *q = &sl[order[b]];
            int n = n_tok[order[b]];
            q->len += n == 3 ? kvt_randint(1, 3) : n;
        }
    }
    kvt_problem_free(&P);
    free(cos_t);
    free(sin_t);
}

int main(void) {
    kvt_init("test_inflight");
    const int steps = kvt_quick() ? 12 : 30;
    run_loop(KVATTN_BACKEND_CPU, KVATTN_F16, 64, steps);
    run_loop(KVATTN_BACKEND_CPU, KVATTN_BF16, 128, steps);
    run_loop(KVATTN_BACKEND_CPU, KVATTN_F32, 80, steps);
    if (kvattn_backend_available(KVATTN_BACKEND_CUDA)) {
        run_loop(KVATTN_BACKEND_CUDA, KVATTN_F16, 64, steps);
        run_loop(KVATTN_BACKEND_CUDA, KVATTN_BF16, 128, steps);
    } else { /* the two CUDA loops' steps (each a case) count as skipped */
        printf("CUDA: skipped (no GPU)\n");
        for (int i = 0; i < 2 * steps; i++) kvt_case_skip("no CUDA device");
    }
    return kvt_finish();
}
