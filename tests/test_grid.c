/* test_grid.c — a randomized grid of kvattn_forward calls checked against the float64 reference: head dims,
 * ragged lengths that miss every tile size, contiguous and paged caches (shuffled pages, views), every option
 * of SPEC.md, on the CPU backend and (when a GPU is present) on the CUDA backend with the same inputs; then forced
 * decode-first batches and a sweep over every head dim 8 - 256 (multiples of 8) with split pieces.
 * B sequences, H query heads, Hk key/value heads, D head dim. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXB 6

static int rand_len(const int *list, int n) {
    int v = kvt_pick(list, n);
    return v < 0 ? kvt_randint(1, -v) : v; /* a negative entry means "random in [1, -v]" */
}

/* Builds one random case into P (for P->backend) from the generator's current state; *desc gets a one-line
 * description. Returns 0 if built, 1 if the case does not fit the time budget (caller draws again). */
/* When set: the batch's query lengths (varlen, 4 query heads per kv head); everything else drawn as usual. */
static const int *g_force_nq;
static int g_force_b;
/* When set (the head-dim sweep): this head dim, fp16 or bf16, cache lengths 1030 - 3000 (split pieces) and
 * num_splits g_force_splits. */
static int g_force_D, g_force_splits;
/* When set (the many-split cases, with g_force_D and g_force_nq): cache lengths g_force_S .. g_force_S + 1000, this
 * many kv heads and query heads per kv head, no window, a softmax scale in [0.002, 0.02], batch_invariant g_force_bi, and
 * q / out strides that the CUDA backend's fast path takes (odd ones run its simple kernel, which merges no pieces). */
static int g_force_S, g_force_Hk, g_force_group, g_force_bi;

static int build_case(kvt_problem *P, char *desc, size_t desc_len, int64_t budget) {
    static const int head_dims[] = {32, 59, 64, 80, 128, 256};
    static const int dtypes[] = {KVATTN_F32, KVATTN_F16, KVATTN_BF16};
    static const int qlens[] = {0, 1, 1, 3, 97, 512, -20};
    static const int cachelens[] = {0, 1, 15, 16, 17, 255, 1025, 2999, -3000, -300};
    static const int batches[] = {0, 1, 2, 2, 3, 4, 5};
    /* 8, 16, 32, 64 and 256: the GPU prefill kernel's tensor-map boxes of page_size or 128 rows (1, 3: its cp.async) */
    static const int page_sizes[] = {1, 3, 8, 16, 32, 64, 256};
    kvattn_params *p = &P->ph;
    *p = kvattn_params_default();
    const int D = g_force_D ? g_force_D : kvt_pick(head_dims, 6);
    const int dt_drawn = kvt_pick(dtypes, 3);
    const int dt = g_force_D && dt_drawn == KVATTN_F32 ? KVATTN_BF16 : dt_drawn;
    const int es = kvref_dtype_size(dt);
    const int Hk_drawn = kvt_randint(1, 3), group_drawn = kvt_pick((const int[]){1, 2, 4}, 3);
    const int Hk = g_force_Hk ? g_force_Hk : Hk_drawn;
    const int group = g_force_group ? g_force_group : g_force_nq ? 4 : group_drawn, H = Hk * group;
    const int B_drawn = kvt_pick(batches, 7), B = g_force_nq ? g_force_b : B_drawn;
    const int varlen = kvt_randint(0, 9) < 7 || g_force_nq;
    const int has_new = kvt_randint(0, 3) > 0;
    const int paged = kvt_randint(0, 1);
    int nq[MAXB], nnew[MAXB], S[MAXB], L[MAXB];
    int fixed_q = rand_len(qlens, 7), fixed_new = kvt_randint(0, 1) ? fixed_q : rand_len(qlens, 7);
    const int use_leftpad = kvt_randint(0, 9) < 3;
    int64_t cost = 0;
    for (int b = 0; b < B; b++) {
        nq[b] = varlen ? rand_len(qlens, 7) : fixed_q;
        if (g_force_nq) nq[b] = g_force_nq[b];
        nnew[b] = !has_new ? 0 : varlen ? (kvt_randint(0, 1) ? nq[b] : rand_len(qlens, 7)) : fixed_new;
        S[b] = g_force_S ? kvt_randint(g_force_S, g_force_S + 1000)
               : g_force_D ? kvt_randint(1030, 3000) : rand_len(cachelens, 10);
        L[b] = use_leftpad && kvt_randint(0, 2) ? kvt_randint(0, g_force_S ? S[b] / 4 : S[b]) : 0;
        cost += (int64_t)nq[b] * (S[b] + nnew[b] - L[b]) * H * D;
    }
    if (cost > budget) return 1;

    /* rotary needs every query at a position >= 0 */
    int rotary = kvt_randint(0, 9) < 4;
    for (int b = 0; b < B; b++)
        if (nq[b] > S[b] + nnew[b]) rotary = 0;

    /* ---- shapes of the row tensors (views: head and channel padding) ---- */
    int hp = kvt_randint(0, 1), dp = kvt_pick((const int[]){0, 0, 8, 3}, 4);
    if (g_force_S && dp == 3) dp = 8; /* many-split cases: strides the CUDA fast path takes (multiples of 8) */
    int total_q = 0, total_new = 0, cu_q[MAXB + 1], cu_new[MAXB + 1];
    cu_q[0] = cu_new[0] = 0;
    for (int b = 0; b < B; b++) {
        cu_q[b + 1] = cu_q[b] + nq[b];
        cu_new[b + 1] = cu_new[b] + nnew[b];
    }
    total_q = cu_q[B];
    total_new = cu_new[B];
    p->dtype = dt;
    p->batch = B;
    p->num_heads = H;
    p->num_kv_heads = Hk;
    p->head_dim = D;
    int64_t qrow = (int64_t)(H + hp) * (D + dp);
    p->q_head_stride = D + dp;
    p->q_row_stride = qrow;
    int64_t qrows;
    if (varlen) {
        p->total_q = total_q;
        kvt_arr_alloc(P, &P->cu_q, "cu_seqlens_q", (B + 1) * 4);
        memcpy(P->cu_q.host, cu_q, (B + 1) * 4);
        qrows = total_q;
    } else {
        p->seqlen_q = fixed_q;
        p->q_batch_stride = (fixed_q + (fixed_q == 0 ? 1 : kvt_randint(0, 1))) * qrow;
        qrows = B ? (int64_t)(B - 1) * (p->q_batch_stride / qrow) + fixed_q : 0;
    }
    kvt_arr_alloc(P, &P->q, "q", (size_t)qrows * qrow * es);
    kvt_fill(dt, P->q.host, qrows * qrow, -4, 4);

    /* out: its own padding */
    int ohp = kvt_randint(0, 1), odp = kvt_pick((const int[]){0, 0, 5}, 3);
    if (g_force_S) odp = 0;
    int64_t orow = (int64_t)(H + ohp) * (D + odp);
    p->out_head_stride = D + odp;
    p->out_row_stride = orow;
    int64_t orows = varlen ? total_q : 0;
    if (!varlen) {
        p->out_batch_stride = (fixed_q + (fixed_q == 0 ? 1 : kvt_randint(0, 1))) * orow;
        orows = B ? (int64_t)(B - 1) * (p->out_batch_stride / orow) + fixed_q : 0;
    }
    kvt_arr_alloc(P, &P->out, "out", (size_t)orows * orow * es);

    /* softmax_lse: [H, total_q] / [total_q, H] (varlen) or [B, H, Sq] / [B, Sq, H] (fixed), maybe padded */
    int lse_kind = kvt_randint(0, 4); /* 0: none */
    if (lse_kind) {
        int pad = kvt_randint(0, 2);
        int64_t n;
        int rows_per = varlen ? total_q : fixed_q;
        if (lse_kind <= 2) { /* head-major */
            p->lse_head_stride = rows_per + pad;
            p->lse_row_stride = 1;
            p->lse_batch_stride = (int64_t)H * (rows_per + pad);
        } else {
            p->lse_head_stride = 1;
            p->lse_row_stride = H + pad;
            p->lse_batch_stride = (int64_t)rows_per * (H + pad);
        }
        if (p->lse_batch_stride == 0) p->lse_batch_stride = 1;
        n = varlen ? (lse_kind <= 2 ? (int64_t)H * (rows_per + pad) : (int64_t)rows_per * (H + pad))
                   : (int64_t)B * p->lse_batch_stride;
        kvt_arr_alloc(P, &P->lse, "softmax_lse", (size_t)n * 4);
    }

    /* new tokens */
    if (has_new) {
        int khp = kvt_randint(0, 1), vdp = kvt_pick((const int[]){0, 4}, 2);
        p->knew_head_stride = D;
        p->knew_row_stride = (int64_t)(Hk + khp) * D;
        p->vnew_head_stride = D + vdp;
        p->vnew_row_stride = (int64_t)Hk * (D + vdp);
        int64_t krows = total_new, vrows = total_new;
        if (varlen) {
            p->total_knew = total_new;
            kvt_arr_alloc(P, &P->cu_knew, "cu_seqlens_knew", (B + 1) * 4);
            memcpy(P->cu_knew.host, cu_new, (B + 1) * 4);
        } else {
            p->seqlen_knew = fixed_new;
            p->knew_batch_stride = (int64_t)(fixed_new + 1) * p->knew_row_stride;
            p->vnew_batch_stride = (int64_t)(fixed_new + 1) * p->vnew_row_stride;
            krows = vrows = (int64_t)B * (fixed_new + 1);
        }
        kvt_arr_alloc(P, &P->k_new, "k_new", (size_t)(krows * p->knew_row_stride) * es);
        kvt_arr_alloc(P, &P->v_new, "v_new", (size_t)(vrows * p->vnew_row_stride) * es);
        kvt_fill(dt, P->k_new.host, krows * p->knew_row_stride, -1, 1);
        kvt_fill(dt, P->v_new.host, vrows * p->vnew_row_stride, -1, 1);
    }

    /* ---- the cache ---- */
    int need_max = 1;
    for (int b = 0; b < B; b++)
        if (S[b] + nnew[b] > need_max) need_max = S[b] + nnew[b];
    /* K and V caches (w = 0, 1): each its own padding of heads (chp) and channels (cdp), view offset and, paged,
     * NHD or HND order; in half of the cases V's layout is drawn apart from K's (else it is K's), so that a backend
     * addressing V with K's strides fails */
    const int v_own = kvt_randint(0, 1);
    int chp[2], cdp[2], view_head[2], hnd[2] = {0, 0};
    for (int w = 0; w < 2; w++) {
        const int draw = w == 0 || v_own;
        chp[w] = draw ? kvt_randint(0, 1) : chp[0];
        cdp[w] = draw ? kvt_pick((const int[]){0, 8}, 2) : cdp[0];
        view_head[w] = !draw ? view_head[0] : chp[w] ? kvt_randint(0, 1) : 0; /* the view may start at head 1 */
    }
    int64_t cache_elems[2];
    char layout[80];
    int ps = 0;
    if (paged) {
        ps = kvt_pick(page_sizes, 7);
        int pages_of[MAXB], total_pages = 0, maxp = 1;
        for (int b = 0; b < B; b++) {
            pages_of[b] = (S[b] + nnew[b] + ps - 1) / ps;
            total_pages += pages_of[b];
            if (pages_of[b] > maxp) maxp = pages_of[b];
        }
        int max_pages = maxp + kvt_randint(0, 2);
        int num_pages = total_pages + kvt_randint(1, 5); /* the pool is larger than needed */
        hnd[0] = kvt_randint(0, 2) == 0;
        hnd[1] = v_own ? kvt_randint(0, 2) == 0 : hnd[0];
        for (int w = 0; w < 2; w++) {
            int64_t page_elems = (int64_t)ps * (Hk + chp[w]) * (D + cdp[w]);
            int64_t head = hnd[w] ? (int64_t)ps * (D + cdp[w]) : D + cdp[w];
            int64_t row = hnd[w] ? D + cdp[w] : (int64_t)(Hk + chp[w]) * (D + cdp[w]);
            if (w == 0) p->k_batch_stride = page_elems, p->k_row_stride = row, p->k_head_stride = head;
            else p->v_batch_stride = page_elems, p->v_row_stride = row, p->v_head_stride = head;
            cache_elems[w] = (int64_t)num_pages * page_elems;
        }
        p->page_size = ps;
        p->num_pages = num_pages;
        p->max_pages_per_seq = max_pages;
        p->block_table_batch_stride = max_pages + kvt_randint(0, 2);
        int32_t *pool = malloc(sizeof(int32_t) * (num_pages > 0 ? num_pages : 1));
        for (int i = 0; i < num_pages; i++) pool[i] = i;
        kvt_shuffle(pool, num_pages);
        kvt_arr_alloc(P, &P->block_table, "block_table", (size_t)(B ? B : 1) * p->block_table_batch_stride * 4);
        int32_t *bt = P->block_table.host;
        int next = 0, junk_before_L = kvt_randint(0, 2) == 0;
        for (int b = 0; b < B; b++) {
            for (int s = 0; s < p->block_table_batch_stride; s++) bt[(int64_t)b * p->block_table_batch_stride + s] = -1;
            for (int s = 0; s < pages_of[b]; s++) {
                int32_t page = pool[next++];
                /* pages wholly left of the left padding are never touched: they may hold anything */
                if (junk_before_L && (int64_t)(s + 1) * ps <= L[b]) page = kvt_randint(0, 1) ? -7 : num_pages + 3;
                bt[(int64_t)b * p->block_table_batch_stride + s] = page;
            }
        }
        free(pool);
        snprintf(layout, sizeof layout, "paged ps=%d pool=%d k %s v %s%s", ps, num_pages, hnd[0] ? "HND" : "NHD",
                 hnd[1] ? "HND" : "NHD", junk_before_L ? " junk<L" : "");
    } else {
        int C = need_max + kvt_randint(0, 3);
        int cache_batch = B + kvt_randint(0, 2);
        if (cache_batch == 0) cache_batch = 1;
        int extra_rows = 0;
        for (int w = 0; w < 2; w++) {
            if (w == 0 || v_own) extra_rows = kvt_randint(0, 1);
            int64_t row = (int64_t)(Hk + chp[w]) * (D + cdp[w]), batch = (int64_t)(C + extra_rows) * row;
            if (w == 0) p->k_batch_stride = batch, p->k_row_stride = row, p->k_head_stride = D + cdp[w];
            else p->v_batch_stride = batch, p->v_row_stride = row, p->v_head_stride = D + cdp[w];
            cache_elems[w] = (int64_t)cache_batch * batch;
        }
        p->cache_batch = cache_batch;
        p->cache_capacity = C;
        int use_idx = kvt_randint(0, 9) < 3 && B > 0;
        if (use_idx) {
            int32_t perm[MAXB + 3];
            for (int i = 0; i < cache_batch; i++) perm[i] = i;
            kvt_shuffle(perm, cache_batch);
            kvt_arr_alloc(P, &P->batch_idx, "cache_batch_idx", (size_t)B * 4);
            memcpy(P->batch_idx.host, perm, (size_t)B * 4);
        }
        snprintf(layout, sizeof layout, "contig C=%d Bc=%d%s", C, cache_batch, use_idx ? " batch_idx" : "");
    }
    const int64_t max_elems = cache_elems[0] > cache_elems[1] ? cache_elems[0] : cache_elems[1];
    if (!g_force_S && max_elems > (kvt_quick() ? 1500000 : 4000000)) return 1; /* (many-split cases: long) */
    int64_t view_off[2];
    kvt_arr *cache_arr[2] = {&P->k_cache, &P->v_cache};
    for (int w = 0; w < 2; w++) {
        view_off[w] = (int64_t)view_head[w] * (D + cdp[w]);
        /* an HND paged view starting at head 1 would run past the buffer's end: only NHD-style offsets */
        if (paged && hnd[w]) view_off[w] = 0;
        kvt_arr_alloc(P, cache_arr[w], w ? "v_cache" : "k_cache", (size_t)cache_elems[w] * es);
        cache_arr[w]->offset_bytes = (size_t)view_off[w] * es;
        kvt_fill(dt, cache_arr[w]->host, cache_elems[w], -1, 1);
    }
    /* A third of the cases: every cache element outside the sequences' live keys (positions [L, S + n_new) of heads
     * < Hk, channels < D) is NaN: left padding, the rows past a sequence's keys in its last page or cache row, pages
     * and rows no sequence owns, padded heads and channels. No kernel may read them into a result (a tile that reads
     * a row past the keys and masks it would still turn 0 * NaN into NaN). */
    if (kvt_randint(0, 2) == 0) {
        kvattn_params where = *p; /* the reference's cache addressing, with the host tables drawn so far */
        where.block_table = P->block_table.used ? P->block_table.host : NULL;
        where.cache_batch_idx = P->batch_idx.used ? P->batch_idx.host : NULL;
        for (int w = 0; w < 2; w++) {
            unsigned char *live = calloc((size_t)cache_elems[w], 1);
            for (int b = 0; b < B; b++)
                for (int32_t pos = L[b]; pos < S[b] + nnew[b]; pos++)
                    for (int kh = 0; kh < Hk; kh++) {
                        const int64_t o = kvref_cache_offset(&where, b, pos, kh, w);
                        if (o >= 0) memset(live + view_off[w] + o, 1, (size_t)D);
                    }
            unsigned char *h = cache_arr[w]->host;
            for (int64_t e = 0; e < cache_elems[w]; e++)
                if (!live[e]) memset(h + e * es, 0xFF, (size_t)es);
            free(live);
        }
        strcat(layout, " NaN-outside");
    }

    kvt_arr_alloc(P, &P->seqlens, "cache_seqlens", (size_t)B * 4);
    for (int b = 0; b < B; b++) ((int32_t *)P->seqlens.host)[b] = S[b];
    if (use_leftpad) {
        kvt_arr_alloc(P, &P->leftpad, "cache_leftpad", (size_t)B * 4);
        for (int b = 0; b < B; b++) ((int32_t *)P->leftpad.host)[b] = L[b];
    }

    /* ---- options ---- */
    char opts[256] = "";
    size_t ol = 0;
    if (rotary) {
        int R = kvt_randint(0, 1) ? (D & ~1) : 2 * kvt_randint(1, D / 2);
        int half = R / 2;
        int max_pos = need_max + kvt_randint(0, 5);
        int rdt = kvt_randint(0, 1) ? KVATTN_F32 : dt;
        int64_t rs = kvt_randint(0, 1) ? 0 : half + kvt_randint(1, 3);
        int64_t rstride = rs ? rs : half;
        p->rotary_dim = R;
        p->rotary_max_pos = max_pos;
        p->rotary_interleaved = kvt_randint(0, 1);
        p->rotary_dtype = rdt;
        p->rotary_row_stride = rs;
        size_t n = (size_t)max_pos * rstride;
        kvt_arr_alloc(P, &P->rot_cos, "rotary_cos", n * kvref_dtype_size(rdt));
        kvt_arr_alloc(P, &P->rot_sin, "rotary_sin", n * kvref_dtype_size(rdt));
        for (int pos = 0; pos < max_pos; pos++)
            for (int i = 0; i < rstride; i++) {
                double theta = i < half ? pos * pow(10000.0, -2.0 * i / R) : 0.0;
                kvref_store(rdt, P->rot_cos.host, (int64_t)pos * rstride + i, i < half ? cos(theta) : 7.0);
                kvref_store(rdt, P->rot_sin.host, (int64_t)pos * rstride + i, i < half ? sin(theta) : 7.0);
            }
        ol += snprintf(opts + ol, sizeof opts - ol, " rotary(R=%d %s %s%s)", R, p->rotary_interleaved ? "gptj" : "neox",
                       rdt == KVATTN_F32 ? "f32" : "qdtype", rs ? " strided" : "");
    }
    int alibi = kvt_randint(0, 3) == 0 ? kvt_randint(1, 2) : 0;
    if (alibi) {
        int64_t bs = alibi == 1 ? 0 : H + kvt_randint(0, 2);
        size_t n = alibi == 1 ? (size_t)H : (size_t)(B ? B : 1) * bs;
        kvt_arr_alloc(P, &P->alibi, "alibi_slopes", n * 4);
        for (size_t i = 0; i < n; i++) ((float *)P->alibi.host)[i] = (float)kvt_uniform(0.0, 0.3);
        p->alibi_batch_stride = bs;
        ol += snprintf(opts + ol, sizeof opts - ol, " alibi%s", alibi == 1 ? "[H]" : "[B,H]");
    }
    p->causal = kvt_randint(0, 9) < 4;
    if (kvt_randint(0, 3) == 0) {
        p->window_left = kvt_pick((const int[]){-1, 0, 1, 7, 100, 1000}, 6);
        /* with causal too: SPEC's "causal is the window with window_right = 0", so causal's edge must win */
        p->window_right = kvt_pick((const int[]){-1, 0, 3, 50}, 4);
    }
    if (kvt_randint(0, 6) == 0) p->softcap = (float)kvt_uniform(1.0, 5.0);
    if (kvt_randint(0, 3) == 0) p->softmax_scale = (float)kvt_uniform(0.05, 0.3);
    p->num_splits = kvt_pick((const int[]){0, 0, 1, 2, 5}, 5);
    if (g_force_D) p->num_splits = g_force_splits;
    /* many-split cases: no window (a window of <= 1000 keys leaves one piece), and a small scale, so that the
     * weights spread over the keys and every piece's partial counts in the merged sum */
    if (g_force_S) {
        p->window_left = p->window_right = -1;
        p->softmax_scale = (float)kvt_uniform(0.002, 0.02);
    }
    p->batch_invariant = kvt_randint(0, 4) == 0;
    if (g_force_S) p->batch_invariant = g_force_bi;
    ol += snprintf(opts + ol, sizeof opts - ol, "%s win=(%d,%d)%s%s splits=%d%s", p->causal ? " causal" : "",
                   p->window_left, p->window_right, p->softcap > 0 ? " softcap" : "",
                   p->softmax_scale != 0 ? " scale" : "", p->num_splits, p->batch_invariant ? " batch_inv" : "");

    char lens[160] = "";
    size_t ll = 0;
    for (int b = 0; b < B && ll < sizeof lens - 40; b++)
        ll += snprintf(lens + ll, sizeof lens - ll, "%s%d/%d/%d/%d", b ? " " : "", nq[b], nnew[b], S[b], L[b]);
    snprintf(desc, desc_len, "%s %s D=%d H=%d Hk=%d B=%d [nq/nnew/S/L: %s] %s lse=%d pad(q %d,%d k %d,%d+%lld v %d,%d+%lld)%s",
             P->backend == KVATTN_BACKEND_CPU ? "cpu" : "cuda", dt == KVATTN_F32 ? "f32" : dt == KVATTN_F16 ? "f16" : "bf16",
             D, H, Hk, B, lens, varlen ? "varlen" : "fixed", lse_kind, hp, dp, chp[0], cdp[0], (long long)view_off[0],
             chp[1], cdp[1], (long long)view_off[1], opts);
    (void)layout;
    size_t dl = strlen(desc);
    snprintf(desc + dl, desc_len - dl, " %s", layout);
    return 0;
}

static int forward_ws(kvt_problem *P, const kvattn_params *p) {
    size_t ws = 0;
    int st = kvattn_workspace_size(p, P->backend, &ws);
    if (st != KVATTN_OK) return st;
    kvt_buf w = kvt_alloc(P->backend, ws ? ws : 16);
    st = kvattn_forward(p, P->backend, ws ? w.ptr : NULL, ws, NULL);
    if (!kvt_guards_ok(&w)) kvt_failf("guard bytes around the workspace overwritten");
    kvt_free(&w);
    return st;
}

/* What a repeated call is checked against: out, softmax_lse and both caches (whole allocations, guards aside) as
 * the first call left them, and byte masks of the elements that a call of the sequences [b0, b1) must write: their
 * out rows (heads < H, channels < D), their lse entries, and the cache rows they append (heads < Hk, channels < D). */
enum { W_OUT, W_LSE, W_K, W_V, W_N };
typedef struct snap {
    kvt_arr *arr[W_N];
    int es[W_N];
    unsigned char *first[W_N]; /* the first call's bytes (NULL: tensor not used) */
} snap;

static void snap_take(kvt_problem *P, snap *s) {
    memset(s, 0, sizeof *s);
    kvt_arr *arr[W_N] = {&P->out, &P->lse, &P->k_cache, &P->v_cache};
    for (int w = 0; w < W_N; w++) {
        s->arr[w] = arr[w];
        s->es[w] = w == W_LSE ? 4 : kvref_dtype_size(P->ph.dtype);
        if (!arr[w]->used) continue;
        s->first[w] = malloc(arr[w]->bytes + 1);
        if (kvt_download(&arr[w]->dev, s->first[w], arr[w]->bytes)) kvt_failf("download of %s failed", arr[w]->name);
    }
}

static void snap_free(snap *s) {
    for (int w = 0; w < W_N; w++) free(s->first[w]);
}

/* mask[w][e] = 1 for every element e (of the whole allocation) that sequences [b0, b1) of ph write */
static void mark_written(const kvt_problem *P, const snap *s, int b0, int b1, unsigned char *mask[W_N]) {
    const kvattn_params *ph = &P->ph;
    const int H = ph->num_heads, Hk = ph->num_kv_heads, D = ph->head_dim, varlen = ph->cu_seqlens_q != NULL;
    int64_t n[W_N];
    for (int w = 0; w < W_N; w++) {
        n[w] = s->first[w] ? (int64_t)(s->arr[w]->bytes / s->es[w]) : 0;
        mask[w] = s->first[w] ? calloc((size_t)n[w] + 1, 1) : NULL;
    }
    /* (the first call's check already found every one of these elements inside its buffer; a miss here is a bug of
     * this test, reported rather than written past the mask) */
#define MARK(w, e)                                                                                                 \
    do {                                                                                                           \
        const int64_t e_ = (e);                                                                                    \
        if (mask[w] && e_ >= 0 && e_ < n[w]) mask[w][e_] = 1;                                                      \
        else if (mask[w]) kvt_failf("test bug: element %lld of %s outside its buffer", (long long)e_, s->arr[w]->name); \
    } while (0)
    for (int b = b0; b < b1; b++) {
        kvref_seq q = kvref_seq_of(ph, b);
        for (int32_t i = 0; i < q.n_q; i++) {
            const int64_t row = (int64_t)q.q_row0 + i;
            const int64_t obase = varlen ? row * ph->out_row_stride
                                         : (int64_t)b * ph->out_batch_stride + (int64_t)i * ph->out_row_stride;
            for (int h = 0; h < H; h++) {
                for (int c = 0; c < D; c++) MARK(W_OUT, obase + (int64_t)h * ph->out_head_stride + c);
                MARK(W_LSE, (varlen ? 0 : (int64_t)b * ph->lse_batch_stride) + (int64_t)h * ph->lse_head_stride +
                                (varlen ? row : i) * ph->lse_row_stride);
            }
        }
        if (!ph->k_new) continue;
        for (int which = 0; which < 2; which++) {
            const int w = which ? W_V : W_K;
            const int64_t view = (int64_t)(s->arr[w]->offset_bytes / s->es[w]);
            for (int32_t t = 0; t < q.n_new; t++)
                for (int kh = 0; kh < Hk; kh++) {
                    const int64_t o = kvref_cache_offset(ph, b, q.S + t, kh, which);
                    for (int c = 0; o >= 0 && c < D; c++) MARK(w, view + o + c);
                }
        }
    }
#undef MARK
}

/* Runs `p` (P's backend call, or one sequence of it) again after poisoning (0xFF, as kvt_problem_upload does)
 * everything it writes: out and softmax_lse whole, and in the caches the rows that sequences [b0, b1) append (the
 * rest of the caches as the first call left them). Then every element it must write has to be written (no
 * poison left) and bitwise the first call's, and every other element untouched: without the poison, a call that
 * wrote nothing would leave the first call's bits in place and compare equal. */
static void rerun_compare(kvt_problem *P, const kvattn_params *p, const snap *s, int b0, int b1, const char *what) {
    unsigned char *mask[W_N];
    mark_written(P, s, b0, b1, mask);
    unsigned char *want[W_N] = {NULL}, *img[W_N] = {NULL};
    int ok = 1;
    for (int w = 0; w < W_N && ok; w++) {
        if (!s->first[w]) continue;
        const size_t bytes = s->arr[w]->bytes, n = bytes / s->es[w], es = (size_t)s->es[w];
        /* uploaded: out and lse all poison, the caches the first call's with the appended rows poisoned; wanted after
         * the call: the first call's bytes where it writes, else what was uploaded (so, for the caches, all of the
         * first call's bytes) */
        img[w] = malloc(bytes + 1);
        want[w] = malloc(bytes + 1);
        if (w == W_OUT || w == W_LSE) {
            memset(img[w], 0xFF, bytes);
            memset(want[w], 0xFF, bytes);
            for (size_t e = 0; e < n; e++)
                if (mask[w][e]) memcpy(want[w] + e * es, s->first[w] + e * es, es);
        } else {
            memcpy(img[w], s->first[w], bytes);
            memcpy(want[w], s->first[w], bytes);
            for (size_t e = 0; e < n; e++)
                if (mask[w][e]) memset(img[w] + e * es, 0xFF, es);
        }
        if (kvt_upload(&s->arr[w]->dev, img[w], bytes)) {
            kvt_failf("%s: cannot upload the poisoned %s", what, s->arr[w]->name);
            ok = 0;
        }
    }
    const int st = ok ? forward_ws(P, p) : KVATTN_OK;
    if (ok && st != KVATTN_OK) kvt_failf("%s: %s (%s)", what, kvattn_status_string(st), kvattn_last_error());
    for (int w = 0; w < W_N && ok && st == KVATTN_OK; w++) {
        if (!s->first[w]) continue;
        kvt_arr *a = s->arr[w];
        const size_t bytes = a->bytes, n = bytes / s->es[w], es = (size_t)s->es[w];
        if (!kvt_guards_ok(&a->dev)) kvt_failf("%s: guard bytes around %s overwritten", what, a->name);
        unsigned char *got = img[w]; /* (reused: uploaded already) */
        if (kvt_download(&a->dev, got, bytes)) {
            kvt_failf("%s: download of %s failed", what, a->name);
            continue;
        }
        if (memcmp(got, want[w], bytes) == 0) continue;
        size_t unwritten = 0, differ = 0, outside = 0, first_un = 0, first_diff = 0, first_out = 0;
        for (size_t e = 0; e < n; e++) {
            const unsigned char *g = got + e * es;
            if (memcmp(g, want[w] + e * es, es) == 0) continue;
            const int poison = kvt_is_poison(g, (int)es);
            if (!mask[w][e]) {
                if (!outside++) first_out = e;
            } else if (poison) {
                if (!unwritten++) first_un = e;
            } else if (!differ++) first_diff = e;
        }
        if (unwritten)
            kvt_failf("%s: %s: %zu elements not written (still poison; first at element %zu)", what, a->name, unwritten,
                      first_un);
        if (differ) {
            if (w == W_LSE)
                kvt_failf("%s: softmax_lse is not bitwise identical (%zu elements differ; first: element %zu: %.9g vs "
                          "%.9g)", what, differ, first_diff, (double)((const float *)s->first[w])[first_diff],
                          (double)((const float *)got)[first_diff]);
            else
                kvt_failf("%s: %s is not bitwise identical (%zu elements differ; first: element %zu: %.9g vs %.9g)",
                          what, a->name, differ, first_diff, kvref_load(P->ph.dtype, s->first[w], first_diff),
                          kvref_load(P->ph.dtype, got, first_diff));
        }
        if (outside)
            kvt_failf("%s: %s: %zu elements written outside what the call writes (first at element %zu)", what, a->name,
                      outside, first_out);
    }
    for (int w = 0; w < W_N; w++) {
        free(mask[w]);
        free(want[w]);
        free(img[w]);
    }
}

/* SPEC "Deterministic": the same call again gives bitwise the same out and lse, and appends the same cache rows
 * (the same rows at the same positions). SPEC "Batch invariant": with batch_invariant set, each sequence run alone
 * (B = 1, pointers moved to its rows) gives bitwise the rows it got in the batch, and appends the same cache rows.
 * Every call here runs on poisoned outputs (rerun_compare). */
static void check_determinism(kvt_problem *P) {
    const kvattn_params *d = &P->pd, *h = &P->ph;
    snap s;
    snap_take(P, &s);
    const int have_first = !kvt_case_failed(); /* (the caller runs this on a case that passed so far) */
    if (have_first) rerun_compare(P, d, &s, 0, d->batch, "same call twice");
    /* (each call below uploads its own poisoned images from the snapshot: independent of the repeat's outcome) */
    if (have_first && d->batch_invariant && d->cu_seqlens_q && d->batch > 1) {
        const int es = kvref_dtype_size(d->dtype);
        for (int b = 0; b < d->batch; b++) {
            kvref_seq q = kvref_seq_of(h, b);
            kvattn_params one = *d;
            int32_t cu[2][2] = {{0, q.n_q}, {0, q.n_new}};
            kvt_buf cub = kvt_alloc(P->backend, sizeof cu);
            if (!cub.ptr || kvt_upload(&cub, cu, sizeof cu)) {
                kvt_failf("sequence %d alone: cannot allocate/upload its cu_seqlens", b);
                kvt_free(&cub);
                break;
            }
            one.batch = 1;
            one.cu_seqlens_q = (const int32_t *)cub.ptr;
            one.total_q = q.n_q;
            one.q = (const char *)d->q + (int64_t)q.q_row0 * d->q_row_stride * es;
            one.out = (char *)d->out + (int64_t)q.q_row0 * d->out_row_stride * es;
            if (d->softmax_lse) one.softmax_lse = d->softmax_lse + (int64_t)q.q_row0 * d->lse_row_stride;
            if (d->k_new) {
                one.cu_seqlens_knew = (const int32_t *)cub.ptr + 2;
                one.total_knew = q.n_new;
                one.k_new = (const char *)d->k_new + (int64_t)q.new_row0 * d->knew_row_stride * es;
                one.v_new = (const char *)d->v_new + (int64_t)q.new_row0 * d->vnew_row_stride * es;
            }
            one.cache_seqlens = d->cache_seqlens + b;
            if (d->cache_leftpad) one.cache_leftpad = d->cache_leftpad + b;
            if (d->cache_batch_idx) one.cache_batch_idx = d->cache_batch_idx + b;
            else if (!d->block_table) { /* sequence b uses cache row b: alone it is row 0 of a moved view */
                one.k_cache = (char *)d->k_cache + (int64_t)b * d->k_batch_stride * es;
                one.v_cache = (char *)d->v_cache + (int64_t)b * d->v_batch_stride * es;
                one.cache_batch = d->cache_batch - b;
            }
            if (d->block_table) one.block_table = d->block_table + (int64_t)b * d->block_table_batch_stride;
            if (d->alibi_slopes) one.alibi_slopes = d->alibi_slopes + (int64_t)b * d->alibi_batch_stride;
            char what[96];
            snprintf(what, sizeof what, "batch_invariant: sequence %d alone vs in the batch", b);
            /* each alone call on fresh poison: only its own rows may be written, and all of them */
            rerun_compare(P, &one, &s, b, b + 1, what);
            if (!kvt_guards_ok(&cub)) kvt_failf("%s: guard bytes around its cu_seqlens overwritten", what);
            kvt_free(&cub);
        }
    }
    snap_free(&s);
}

/* One case on one backend: builds it from `state` and runs it; returns 1 if the backend skipped it. */
static int run_case(int backend, uint64_t state, int64_t budget, int *built) {
    kvt_problem P;
    memset(&P, 0, sizeof P);
    P.backend = backend;
    char desc[768];
    kvt_rng_set(state);
    *built = build_case(&P, desc, sizeof desc, budget) == 0;
    int skipped = 0;
    if (*built) {
        if (backend == KVATTN_BACKEND_CUDA && P.ph.dtype == KVATTN_F32) {
            kvt_case_skip("fp32 on CUDA");
            skipped = 1;
        } else {
            kvt_case_begin("%s", desc);
            if (kvt_problem_upload(&P, 1) == 0 && kvt_problem_run(&P, kvt_expect_ok())) {
                kvt_case_skip("unsupported");
                skipped = 1;
            } else {
                if (!kvt_case_failed()) check_determinism(&P);
                kvt_case_end();
            }
        }
    }
    kvt_problem_free(&P);
    return skipped;
}

/* One drawn case on the CPU and, when it was built within the budget and a GPU is there, the same case on CUDA
 * (without one, that CUDA case counts as skipped, so that the summary's skips say what did not run). Returns
 * whether it was built (over the budget: nothing ran, draw again). */
static int run_both(uint64_t state, int64_t budget, int cuda, int *cuda_skipped) {
    int built, cuda_built;
    run_case(KVATTN_BACKEND_CPU, state, budget, &built);
    if (built && cuda) *cuda_skipped += run_case(KVATTN_BACKEND_CUDA, state, budget, &cuda_built);
    else if (built) {
        kvt_case_skip("no CUDA device");
        (*cuda_skipped)++;
    }
    return built;
}

int main(void) {
    kvt_init("test_grid");
    const int quick = kvt_quick();
    const int n_cases = quick ? 100 : 500;
    const int64_t budget = quick ? 3000000 : 40000000; /* multiply-adds of one case's QK^T */
    const int cuda = kvattn_backend_available(KVATTN_BACKEND_CUDA);
    if (!cuda) printf("CUDA: skipped (no GPU)\n");
    int done = 0, cuda_skipped = 0;
    while (done < n_cases) {
        uint64_t state = kvt_rand_u64();
        if (!run_both(state, budget, cuda, &cuda_skipped)) continue;
        done++;
        kvt_rng_set(state ^ 0x5DEECE66Dull * (uint64_t)(done + 1)); /* next case draws from fresh state */
    }
    /* varlen calls with no more query rows than sequences run the decode kernel first (attn.cu, launch_fast); these
     * also have a sequence of 5 - 8 queries (20 - 32 packed rows: prefill items), computed after the decode items */
    static const int force[4][7] = {{5, 0, 0, 0, 0, 5}, {6, 0, 0, 5, 0, 0, 0}, {6, 0, 0, 0, 0, 0, 6},
                                    {5, 1, 0, 0, 0, 1}};
    int forced = 0;
    for (int f = 0; f < 4; f++)
        for (int rep = 0, tries = 0; rep < (quick ? 2 : 6) && tries < 10000; tries++) {
            g_force_nq = force[f] + 1;
            g_force_b = force[f][0];
            if (!run_both(kvt_rand_u64(), budget, cuda, &cuda_skipped)) continue; /* over the budget: draw again */
            rep++;
            forced++;
        }
    g_force_nq = NULL;
    if (forced != 4 * (quick ? 2 : 6)) kvt_note_failure("decode-first cases: built %d of %d", forced, 4 * (quick ? 2 : 6));
    /* every head dim the CUDA backend supports (multiples of 8 up to 256: each padded variant, the sm90 prefill
     * kernel's padding of DP 96 / 160 - 224 to 128 / 256), in a batch of decodes and a prompt with long caches,
     * split (auto or 3 pieces), so that both kernels' split pieces and merges run */
    static const int mix[5] = {4, 1, 20, 1, 2};
    const int64_t sweep_budget = 60000000;
    int swept = 0;
    g_force_nq = mix + 1;
    g_force_b = mix[0];
    for (int D = 8; D <= 256; D += 8) {
        g_force_D = D;
        g_force_splits = (D / 8) % 2 ? 3 : 0;
        for (int tries = 0; tries < 10000; tries++) {
            if (!run_both(kvt_rand_u64(), sweep_budget, cuda, &cuda_skipped)) continue;
            swept++;
            break;
        }
    }
    g_force_nq = NULL;
    g_force_D = 0;
    if (swept != 32) kvt_note_failure("head-dim sweep: built %d of 32", swept);
    /* long caches of one or two sequences, split in auto mode into ~12 to 40 pieces per kv head on the H200 (the
     * merge loads the first 8 pieces with their (m, log2 l) and the rest in rounds of 8, also beyond 32: more than the other
     * cases reach), or in batch-invariant mode into 16 pieces of 2048 keys: {D, Hk, group, S, B, nq, batch_invariant}.
     * A build whose merge dropped the last of more than 8 pieces failed these cases (nineteenth session). */
    static const int many[][7] = {{128, 2, 4, 31000, 1, 1, 0}, {128, 1, 8, 11000, 1, 1, 0}, {128, 3, 8, 31000, 1, 1, 0},
                                  {64, 1, 4, 39000, 1, 1, 0},  {64, 1, 4, 19000, 1, 1, 0},  {256, 1, 2, 19000, 1, 1, 0},
                                  {96, 1, 4, 19000, 1, 1, 0},  {40, 2, 4, 29000, 1, 3, 0},  {128, 1, 4, 15000, 2, 1, 0},
                                  {128, 2, 4, 31000, 1, 1, 1},
                                  /* batch-invariant pieces of prefill items (17 - 64 packed rows) on the sm_90a
                                   * warp-specialized kernels: ws64, ws256 by tensor maps (D 256), ws256 by cp.async
                                   * (D 160); the random draw reaches these in a few percent of runs (fifty-third
                                   * session's coverage audit) */
                                  {64, 1, 4, 9000, 1, 12, 1},  {256, 1, 2, 9000, 1, 20, 1}, {160, 2, 2, 9000, 1, 16, 1}};
    const int n_many = (int)(sizeof many / sizeof many[0]);
    int many_built = 0;
    for (int c = 0; c < n_many; c++) {
        static int nq_many[2];
        nq_many[0] = nq_many[1] = many[c][5];
        g_force_D = many[c][0];
        g_force_Hk = many[c][1];
        g_force_group = many[c][2];
        g_force_S = many[c][3];
        g_force_b = many[c][4];
        g_force_bi = many[c][6];
        g_force_nq = nq_many;
        g_force_splits = 0;
        for (int tries = 0; tries < 100; tries++) {
            if (!run_both(kvt_rand_u64(), 400000000, cuda, &cuda_skipped)) continue;
            many_built++;
            break;
        }
    }
    g_force_nq = NULL;
    g_force_D = g_force_Hk = g_force_group = g_force_S = g_force_bi = 0;
    if (many_built != n_many) kvt_note_failure("many-split cases: built %d of %d", many_built, n_many);
    if (cuda) printf("CUDA: %d cases skipped (fp32 or unsupported head dim)\n", cuda_skipped);
    else printf("CUDA: %d cases skipped (no GPU)\n", cuda_skipped);
    return kvt_finish();
}
