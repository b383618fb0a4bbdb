/* test_bad_input.c — every bad input SPEC.md names: argument checks (status, a message naming the argument,
 * nothing changed) and data-dependent checks (CPU: KVATTN_ERR_BAD_DATA with nothing changed; CUDA: KVATTN_OK,
 * the device status flag, the failing sequence untouched and the others computed), plus the valid edges next
 * to each check. B sequences, H query heads, Hk key/value heads, D head dim. */
#include "harness.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef KVATTN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

enum { B0 = 3, H0 = 4, HK0 = 2, D0 = 64, PS0 = 16, MAXP0 = 4, POOL0 = 16, CAP0 = 64, BC0 = 5, MAXPOS0 = 64 };
static const int NQ0[B0] = {1, 3, 2}, NNEW0[B0] = {1, 1, 2}, S0[B0] = {20, 5, 40}, L0[B0] = {0, 2, 3};

/* A valid call: varlen, k_new, rotary, leftpad, ALiBi; paged (page 16, shuffled pool) or contiguous with
 * cache_batch_idx. Host data only (uploaded by the caller after the mutation). */
static void build_base(kvt_problem *P, int backend, int paged, int dt) {
    kvt_problem_init(P, backend, dt, B0, H0, HK0, D0);
    kvattn_params *p = &P->ph;
    const int es = kvref_dtype_size(dt);
    int cu_q[B0 + 1] = {0}, cu_n[B0 + 1] = {0};
    for (int b = 0; b < B0; b++) {
        cu_q[b + 1] = cu_q[b] + NQ0[b];
        cu_n[b + 1] = cu_n[b] + NNEW0[b];
    }
    p->total_q = cu_q[B0];
    p->total_knew = cu_n[B0];
    kvt_arr_alloc(P, &P->cu_q, "cu_seqlens_q", sizeof cu_q);
    memcpy(P->cu_q.host, cu_q, sizeof cu_q);
    kvt_arr_alloc(P, &P->cu_knew, "cu_seqlens_knew", sizeof cu_n);
    memcpy(P->cu_knew.host, cu_n, sizeof cu_n);
    p->q_head_stride = D0;
    p->q_row_stride = H0 * D0;
    p->out_head_stride = D0;
    p->out_row_stride = H0 * D0;
    kvt_arr_alloc(P, &P->q, "q", (size_t)p->total_q * H0 * D0 * es);
    kvt_fill(dt, P->q.host, (int64_t)p->total_q * H0 * D0, -4, 4);
    kvt_arr_alloc(P, &P->out, "out", (size_t)p->total_q * H0 * D0 * es);
    p->lse_head_stride = p->total_q;
    p->lse_row_stride = 1;
    kvt_arr_alloc(P, &P->lse, "softmax_lse", (size_t)p->total_q * H0 * 4);
    p->knew_head_stride = p->vnew_head_stride = D0;
    p->knew_row_stride = p->vnew_row_stride = HK0 * D0;
    kvt_arr_alloc(P, &P->k_new, "k_new", (size_t)p->total_knew * HK0 * D0 * es);
    kvt_arr_alloc(P, &P->v_new, "v_new", (size_t)p->total_knew * HK0 * D0 * es);
    kvt_fill(dt, P->k_new.host, (int64_t)p->total_knew * HK0 * D0, -1, 1);
    kvt_fill(dt, P->v_new.host, (int64_t)p->total_knew * HK0 * D0, -1, 1);
    int64_t cache_elems;
    p->k_head_stride = p->v_head_stride = D0;
    p->k_row_stride = p->v_row_stride = HK0 * D0;
    if (paged) {
        p->k_batch_stride = p->v_batch_stride = (int64_t)PS0 * HK0 * D0;
        p->page_size = PS0;
        p->num_pages = POOL0;
        p->max_pages_per_seq = MAXP0;
        p->block_table_batch_stride = MAXP0;
        int32_t pool[POOL0];
        for (int i = 0; i < POOL0; i++) pool[i] = i;
        kvt_shuffle(pool, POOL0);
        kvt_arr_alloc(P, &P->block_table, "block_table", sizeof(int32_t) * B0 * MAXP0);
        memcpy(P->block_table.host, pool, sizeof(int32_t) * B0 * MAXP0); /* every slot a distinct valid page */
        cache_elems = (int64_t)POOL0 * p->k_batch_stride;
    } else {
        p->k_batch_stride = p->v_batch_stride = (int64_t)CAP0 * HK0 * D0;
        p->cache_batch = BC0;
        p->cache_capacity = CAP0;
        int32_t idx[B0] = {4, 0, 2};
        kvt_arr_alloc(P, &P->batch_idx, "cache_batch_idx", sizeof idx);
        memcpy(P->batch_idx.host, idx, sizeof idx);
        cache_elems = (int64_t)BC0 * p->k_batch_stride;
    }
    kvt_arr_alloc(P, &P->k_cache, "k_cache", (size_t)cache_elems * es);
    kvt_arr_alloc(P, &P->v_cache, "v_cache", (size_t)cache_elems * es);
    kvt_fill(dt, P->k_cache.host, cache_elems, -1, 1);
    kvt_fill(dt, P->v_cache.host, cache_elems, -1, 1);
    kvt_arr_alloc(P, &P->seqlens, "cache_seqlens", sizeof S0);
    memcpy(P->seqlens.host, S0, sizeof S0);
    kvt_arr_alloc(P, &P->leftpad, "cache_leftpad", sizeof L0);
    memcpy(P->leftpad.host, L0, sizeof L0);
    p->rotary_dim = D0;
    p->rotary_max_pos = MAXPOS0;
    p->rotary_dtype = KVATTN_F32;
    p->rotary_interleaved = 0;
    /* the tables have room for 2 * MAXPOS0 positions, so rotary_max_pos can be raised */
    kvt_arr_alloc(P, &P->rot_cos, "rotary_cos", (size_t)2 * MAXPOS0 * (D0 / 2) * 4);
    kvt_arr_alloc(P, &P->rot_sin, "rotary_sin", (size_t)2 * MAXPOS0 * (D0 / 2) * 4);
    kvt_fill(KVATTN_F32, P->rot_cos.host, (int64_t)2 * MAXPOS0 * (D0 / 2), -1, 1);
    kvt_fill(KVATTN_F32, P->rot_sin.host, (int64_t)2 * MAXPOS0 * (D0 / 2), -1, 1);
    kvt_arr_alloc(P, &P->alibi, "alibi_slopes", H0 * 4);
    for (int h = 0; h < H0; h++) ((float *)P->alibi.host)[h] = 0.05f * (h + 1);
    p->causal = 1;
}

/* ---- argument checks: each mutates the backend params after upload ---------------------------------------- */
typedef struct arg_case {
    const char *name;
    int status;
    const char *needle;  /* kvattn_last_error() must contain this (the argument's name) */
    const char *needle2; /* or this (NULL: no alternative) */
    int paged;           /* 1: only on the paged base, 0: only contiguous, -1: both */
} arg_case;

static const arg_case ARG_CASES[] = {
    {"q NULL", KVATTN_ERR_INVALID_ARGUMENT, "q", NULL, -1},
    {"out NULL", KVATTN_ERR_INVALID_ARGUMENT, "out", NULL, -1},
    {"k_cache NULL", KVATTN_ERR_INVALID_ARGUMENT, "k_cache", NULL, -1},
    {"v_cache NULL", KVATTN_ERR_INVALID_ARGUMENT, "v_cache", NULL, -1},
    {"cache_seqlens NULL", KVATTN_ERR_INVALID_ARGUMENT, "cache_seqlens", NULL, -1},
    {"v_new NULL with k_new", KVATTN_ERR_INVALID_ARGUMENT, "v_new", "k_new", -1},
    {"k_new NULL with v_new", KVATTN_ERR_INVALID_ARGUMENT, "k_new", "v_new", -1},
    {"rotary_sin NULL with rotary_cos", KVATTN_ERR_INVALID_ARGUMENT, "rotary_sin", "rotary_cos", -1},
    {"batch -1", KVATTN_ERR_INVALID_ARGUMENT, "batch", NULL, -1},
    {"num_heads 0", KVATTN_ERR_INVALID_ARGUMENT, "num_heads", NULL, -1},
    {"num_kv_heads 0", KVATTN_ERR_INVALID_ARGUMENT, "num_kv_heads", NULL, -1},
    {"H % Hk != 0", KVATTN_ERR_INVALID_ARGUMENT, "num_heads", "num_kv_heads", -1},
    {"head_dim 0", KVATTN_ERR_INVALID_ARGUMENT, "head_dim", NULL, -1},
    {"head_dim -5", KVATTN_ERR_INVALID_ARGUMENT, "head_dim", NULL, -1},
    {"dtype 7", KVATTN_ERR_INVALID_ARGUMENT, "dtype", NULL, -1},
    {"total_q -1", KVATTN_ERR_INVALID_ARGUMENT, "total_q", NULL, -1},
    {"total_knew -1", KVATTN_ERR_INVALID_ARGUMENT, "total_knew", NULL, -1},
    {"seqlen_q -1 (fixed mode)", KVATTN_ERR_INVALID_ARGUMENT, "seqlen_q", NULL, -1},
    {"page_size 0", KVATTN_ERR_INVALID_ARGUMENT, "page_size", NULL, 1},
    {"page_size -16", KVATTN_ERR_INVALID_ARGUMENT, "page_size", NULL, 1},
    {"num_pages -1", KVATTN_ERR_INVALID_ARGUMENT, "num_pages", NULL, 1},
    {"max_pages_per_seq -1", KVATTN_ERR_INVALID_ARGUMENT, "max_pages_per_seq", NULL, 1},
    {"block_table_batch_stride < max_pages_per_seq", KVATTN_ERR_INVALID_ARGUMENT, "block_table", NULL, 1},
    {"cache_batch 0", KVATTN_ERR_INVALID_ARGUMENT, "cache_batch", NULL, 0},
    {"cache_capacity -1", KVATTN_ERR_INVALID_ARGUMENT, "cache_capacity", NULL, 0},
    {"rotary_dim odd", KVATTN_ERR_INVALID_ARGUMENT, "rotary_dim", NULL, -1},
    {"rotary_dim > head_dim", KVATTN_ERR_INVALID_ARGUMENT, "rotary_dim", NULL, -1},
    {"rotary_dim 0 with tables", KVATTN_ERR_INVALID_ARGUMENT, "rotary_dim", NULL, -1},
    {"rotary_dtype 9", KVATTN_ERR_INVALID_ARGUMENT, "rotary_dtype", NULL, -1},
    {"rotary_max_pos -1", KVATTN_ERR_INVALID_ARGUMENT, "rotary_max_pos", NULL, -1},
    {"alibi_batch_stride 1 < H", KVATTN_ERR_INVALID_ARGUMENT, "alibi", NULL, -1},
    {"window_left -2", KVATTN_ERR_INVALID_ARGUMENT, "window_left", NULL, -1},
    {"window_right -3", KVATTN_ERR_INVALID_ARGUMENT, "window_right", NULL, -1},
    {"num_splits -1", KVATTN_ERR_INVALID_ARGUMENT, "num_splits", NULL, -1},
    {"softcap < 0", KVATTN_ERR_INVALID_ARGUMENT, "softcap", NULL, -1},
    {"negative k_row_stride", KVATTN_ERR_INVALID_ARGUMENT, "k_cache", "k_row_stride", -1},
    {"q_row_stride overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "q", NULL, -1},
    {"k_batch_stride overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "k_cache", "k_batch_stride", -1},
    {"struct_size wrong", KVATTN_ERR_INVALID_ARGUMENT, "struct_size", NULL, -1},
    {"head_dim 70000", KVATTN_ERR_UNSUPPORTED, "head_dim", NULL, -1},
    /* written tensors whose elements overlap (every element would not get its own address) */
    {"out head stride 0", KVATTN_ERR_INVALID_ARGUMENT, "out", NULL, -1},
    {"out head stride < head_dim", KVATTN_ERR_INVALID_ARGUMENT, "out", NULL, -1},
    {"softmax_lse strides set to 0 (a broadcast of a written tensor)", KVATTN_ERR_INVALID_ARGUMENT, "softmax_lse", NULL, -1},
    {"k_cache row stride 0 with appends", KVATTN_ERR_INVALID_ARGUMENT, "k_cache", NULL, -1},
    {"v_cache rows overlapping heads with appends", KVATTN_ERR_INVALID_ARGUMENT, "v_cache", NULL, -1},
    /* the element offset fits int64 but its byte address does not */
    {"q_row_stride: byte offset overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "q", NULL, -1},
    {"cache_capacity past KVATTN_MAX_CACHE_TOKENS", KVATTN_ERR_INVALID_ARGUMENT, "cache_capacity", NULL, 0},
    {"max_pages_per_seq * page_size past KVATTN_MAX_CACHE_TOKENS", KVATTN_ERR_INVALID_ARGUMENT,
     "max_pages_per_seq", NULL, 1},
    {"batch past 2^31 - 2^16", KVATTN_ERR_INVALID_ARGUMENT, "batch", NULL, -1},
    /* checks that a mutation run of validate.c found untested (each case fails with that check weakened) */
    {"q NULL with batch 1", KVATTN_ERR_INVALID_ARGUMENT, "q", NULL, -1},
    {"causal 2", KVATTN_ERR_INVALID_ARGUMENT, "causal", NULL, -1},
    {"batch_invariant 2", KVATTN_ERR_INVALID_ARGUMENT, "batch_invariant", NULL, -1},
    {"rotary_interleaved 2", KVATTN_ERR_INVALID_ARGUMENT, "rotary_interleaved", NULL, -1},
    {"softmax_scale NaN", KVATTN_ERR_INVALID_ARGUMENT, "softmax_scale", NULL, -1},
    {"softmax_scale inf", KVATTN_ERR_INVALID_ARGUMENT, "softmax_scale", NULL, -1},
    {"softmax_scale < 0", KVATTN_ERR_INVALID_ARGUMENT, "softmax_scale", NULL, -1},
    {"softcap NaN", KVATTN_ERR_INVALID_ARGUMENT, "softcap", NULL, -1},
    {"softcap inf", KVATTN_ERR_INVALID_ARGUMENT, "softcap", NULL, -1},
    {"head_dim 65537", KVATTN_ERR_UNSUPPORTED, "head_dim", NULL, -1},
    /* total_q = 0, and the needle is the guard's own message (the forgotten-cu_seqlens_q check also names
     * seqlen_q), so that only the B x seqlen_q guard passes the case */
    {"B * seqlen_q past 2^31 - 1 (fixed mode)", KVATTN_ERR_INVALID_ARGUMENT, "seqlen_q: B=", NULL, -1},
    {"seqlen_knew -1 (fixed mode)", KVATTN_ERR_INVALID_ARGUMENT, "seqlen_knew", NULL, -1},
    {"B * seqlen_knew past 2^31 - 1 (fixed mode)", KVATTN_ERR_INVALID_ARGUMENT, "seqlen_knew: B=", NULL, -1},
    {"cache_batch_idx with a block table", KVATTN_ERR_INVALID_ARGUMENT, "cache_batch_idx", NULL, 1},
    {"batch > cache_batch without cache_batch_idx", KVATTN_ERR_INVALID_ARGUMENT, "cache_batch", NULL, 0},
    {"rotary_row_stride < rotary_dim / 2", KVATTN_ERR_INVALID_ARGUMENT, "rotary_row_stride", NULL, -1},
    {"rotary_dtype the other 16-bit type", KVATTN_ERR_INVALID_ARGUMENT, "rotary_dtype", NULL, -1},
    {"rotary table offsets overflow int64", KVATTN_ERR_INVALID_ARGUMENT, "rotary_cos", NULL, -1},
    {"alibi_batch_stride overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "alibi_slopes", NULL, -1},
    {"block_table_batch_stride overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "block_table", NULL, 1},
    /* heads reach 3 * 64 + 63 = 255 elements into a row: a row stride of 200 overlaps the next row's heads */
    {"out rows overlap the heads of the row before", KVATTN_ERR_INVALID_ARGUMENT, "out", NULL, -1},
    /* a forgotten offsets pointer: the call would be fixed-length with 0 rows and write no output (or append
     * nothing), and return OK (fifty-third session, found by an audit) */
    {"total_q set, cu_seqlens_q NULL (forgotten)", KVATTN_ERR_INVALID_ARGUMENT, "total_q", NULL, -1},
    {"total_knew set, cu_seqlens_knew NULL (forgotten)", KVATTN_ERR_INVALID_ARGUMENT, "total_knew", NULL, -1},
    {"softmax_scale 3e38 (x log2(e) overflows fp32)", KVATTN_ERR_INVALID_ARGUMENT, "softmax_scale", NULL, -1},
    /* index arrays in memory the call writes: the CUDA kernels read lengths again per work item, after the append
     * and other items' stores may have rewritten them (fifty-eighth session, found by an audit: out and lse
     * written past their ends) */
    {"cu_seqlens_q inside out", KVATTN_ERR_INVALID_ARGUMENT, "cu_seqlens_q", NULL, -1},
    {"cache_seqlens inside softmax_lse", KVATTN_ERR_INVALID_ARGUMENT, "cache_seqlens", NULL, -1},
    {"block_table inside k_cache while appending", KVATTN_ERR_INVALID_ARGUMENT, "block_table", NULL, 1},
    {"cu_seqlens_knew inside v_cache while appending", KVATTN_ERR_INVALID_ARGUMENT, "cu_seqlens_knew", NULL, -1},
    {"cache_batch_idx inside out", KVATTN_ERR_INVALID_ARGUMENT, "cache_batch_idx", NULL, 0},
    {"cache_leftpad inside k_cache while appending", KVATTN_ERR_INVALID_ARGUMENT, "cache_leftpad", NULL, -1},
    /* base addresses that are not a multiple of the element size (on CUDA such a load or store faults and ends
     * the context; same audit) */
    {"q misaligned by one byte", KVATTN_ERR_INVALID_ARGUMENT, "q", NULL, -1},
    {"softmax_lse misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "softmax_lse", NULL, -1},
    {"cu_seqlens_q misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "cu_seqlens_q", NULL, -1},
    {"rotary_cos (fp32) misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "rotary_cos", NULL, -1},
    /* kvattn.h: "Every pointer is a multiple of its element size": each of the others too (a validation that forgot
     * one would let the CUDA kernels fault on it), and ALiBi's [B, H] rows one slope short of H */
    {"k_new misaligned by one byte", KVATTN_ERR_INVALID_ARGUMENT, "k_new", NULL, -1},
    {"v_new misaligned by one byte", KVATTN_ERR_INVALID_ARGUMENT, "v_new", NULL, -1},
    {"out misaligned by one byte", KVATTN_ERR_INVALID_ARGUMENT, "out", NULL, -1},
    {"k_cache misaligned by one byte", KVATTN_ERR_INVALID_ARGUMENT, "k_cache", NULL, -1},
    {"v_cache misaligned by one byte", KVATTN_ERR_INVALID_ARGUMENT, "v_cache", NULL, -1},
    {"cu_seqlens_knew misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "cu_seqlens_knew", NULL, -1},
    {"cache_seqlens misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "cache_seqlens", NULL, -1},
    {"cache_leftpad misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "cache_leftpad", NULL, -1},
    {"cache_batch_idx misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "cache_batch_idx", NULL, 0},
    {"block_table misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "block_table", NULL, 1},
    {"rotary_sin (fp32) misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "rotary_sin", NULL, -1},
    {"alibi_slopes misaligned by two bytes", KVATTN_ERR_INVALID_ARGUMENT, "alibi_slopes", NULL, -1},
    {"alibi_batch_stride H - 1 ([B, H] rows overlap)", KVATTN_ERR_INVALID_ARGUMENT, "alibi", NULL, -1},
    /* checks that a second mutation run of validate.c found untested (each case fails with that check weakened) */
    /* q's offset terms each fit int64 but their sum wraps past 2^64 (to a small positive offset) */
    {"q offsets: each term fits int64, their sum wraps past 2^64", KVATTN_ERR_INVALID_ARGUMENT, "q", NULL, -1},
    /* the element offset fits int64 but its byte address does not, for each tensor with its own element size */
    {"k_batch_stride: byte offset overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "k_cache", NULL, -1},
    {"softmax_lse head stride: byte offset overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "softmax_lse", NULL, -1},
    {"block_table_batch_stride: byte offset overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "block_table", NULL, 1},
    {"rotary_row_stride: byte offset overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "rotary_cos", NULL, -1},
    {"alibi_batch_stride: byte offset overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "alibi_slopes", NULL, -1},
    /* k_new / v_new (read-only): negative strides and offsets past int64 */
    {"negative knew_head_stride", KVATTN_ERR_INVALID_ARGUMENT, "k_new", NULL, -1},
    {"knew_row_stride overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "k_new", NULL, -1},
    {"negative vnew_head_stride", KVATTN_ERR_INVALID_ARGUMENT, "v_new", NULL, -1},
    {"vnew_row_stride overflows int64", KVATTN_ERR_INVALID_ARGUMENT, "v_new", NULL, -1},
    /* negative strides whose largest offset stays >= 0, on tensors only read or in dimensions the call leaves unused
     * (kvattn.h: "A negative stride is refused, even one that the call's mode leaves unused"): only the sign check
     * catches them */
    {"negative q_head_stride (q read-only)", KVATTN_ERR_INVALID_ARGUMENT, "q", NULL, -1},
    {"q_batch_stride -1 (varlen: unused)", KVATTN_ERR_INVALID_ARGUMENT, "q", NULL, -1},
    {"out_batch_stride -1 (varlen: unused)", KVATTN_ERR_INVALID_ARGUMENT, "out", NULL, -1},
    {"knew_batch_stride -1 (varlen: unused)", KVATTN_ERR_INVALID_ARGUMENT, "k_new", NULL, -1},
    {"k_row_stride -1, cache read-only (no k_new)", KVATTN_ERR_INVALID_ARGUMENT, "k_cache", NULL, -1},
    {"k_batch_stride -100, cache read-only (no k_new)", KVATTN_ERR_INVALID_ARGUMENT, "k_cache", NULL, -1},
    {"lse_batch_stride -1 (varlen: unused)", KVATTN_ERR_INVALID_ARGUMENT, "softmax_lse", NULL, -1},
    {"alibi_batch_stride -1", KVATTN_ERR_INVALID_ARGUMENT, "alibi", NULL, -1},
    /* the sharing checks with one sequence (the cases above all have B = 3) */
    {"batch 1: out at k_cache while appending", KVATTN_ERR_INVALID_ARGUMENT, "out", NULL, -1},
    {"batch 1: cache_seqlens inside out", KVATTN_ERR_INVALID_ARGUMENT, "cache_seqlens", NULL, -1},
};
#define N_ARG_CASES ((int)(sizeof ARG_CASES / sizeof ARG_CASES[0]))

/* the base's queries as fixed-length, 2 rows per sequence (B0 x 2 = total_q rows), every stride packed */
static void fixed_q2(kvattn_params *d) {
    d->cu_seqlens_q = NULL;
    d->seqlen_q = 2;
    d->total_q = 0;
    d->q_batch_stride = d->out_batch_stride = 2 * H0 * D0;
    d->q_row_stride = d->out_row_stride = H0 * D0;
    d->q_head_stride = d->out_head_stride = D0;
    d->lse_batch_stride = 2 * H0;
    d->lse_head_stride = 2;
    d->lse_row_stride = 1;
}

/* the cache's first extent: pages (paged) or cache_batch */
static int64_t cache_slots(const kvattn_params *d) { return d->block_table ? d->num_pages : d->cache_batch; }

static void mutate_args(int id, kvattn_params *d) {
    switch (id) {
    case 0: d->q = NULL; break;
    case 1: d->out = NULL; break;
    case 2: d->k_cache = NULL; break;
    case 3: d->v_cache = NULL; break;
    case 4: d->cache_seqlens = NULL; break;
    case 5: d->v_new = NULL; break;
    case 6: d->k_new = NULL; break;
    case 7: d->rotary_sin = NULL; break;
    case 8: d->batch = -1; break;
    case 9: d->num_heads = 0; break;
    case 10: d->num_kv_heads = 0; break;
    case 11: d->num_kv_heads = 3; break;
    case 12: d->head_dim = 0; break;
    case 13: d->head_dim = -5; break;
    case 14: d->dtype = 7; break;
    case 15: d->total_q = -1; break;
    case 16: d->total_knew = -1; break;
    case 17: d->cu_seqlens_q = NULL; d->seqlen_q = -1; d->q_batch_stride = 4 * H0 * D0; d->out_batch_stride = 4 * H0 * D0; break;
    case 18: d->page_size = 0; break;
    case 19: d->page_size = -16; break;
    case 20: d->num_pages = -1; break;
    case 21: d->max_pages_per_seq = -1; break;
    case 22: d->block_table_batch_stride = MAXP0 - 1; break;
    case 23: d->cache_batch = 0; break;
    case 24: d->cache_capacity = -1; break;
    case 25: d->rotary_dim = D0 - 1; break;
    case 26: d->rotary_dim = D0 + 2; break;
    case 27: d->rotary_dim = 0; break;
    case 28: d->rotary_dtype = 9; break;
    case 29: d->rotary_max_pos = -1; break;
    case 30: d->alibi_batch_stride = 1; break;
    case 31: d->window_left = -2; break;
    case 32: d->window_right = -3; d->causal = 0; break;
    case 33: d->num_splits = -1; break;
    case 34: d->softcap = -1.0f; break;
    case 35: d->k_row_stride = -(int64_t)HK0 * D0; break;
    case 36: d->q_row_stride = INT64_MAX / 4; break;
    case 37: d->k_batch_stride = INT64_MAX / 2; d->v_batch_stride = INT64_MAX / 2; break;
    case 38: d->struct_size = (int64_t)sizeof(kvattn_params) - 8; break;
    case 39: d->head_dim = 70000; break;
    case 40: d->out_head_stride = 0; break;
    case 41: d->out_head_stride = D0 / 2; break;
    case 42: d->lse_batch_stride = d->lse_head_stride = d->lse_row_stride = 0; break;
    case 43: d->k_row_stride = 0; break;
    case 44: d->v_row_stride = D0; d->v_head_stride = D0; break; /* [.., rows, Hk, D]: rows and heads share rows */
    case 45: d->q_row_stride = (INT64_MAX / 2) / (d->total_q - 1) + 1; break; /* x 2 bytes past INT64_MAX */
    case 46: d->cache_capacity = KVATTN_MAX_CACHE_TOKENS + 1; break;
    case 47: d->max_pages_per_seq = KVATTN_MAX_CACHE_TOKENS / PS0 + 1; d->block_table_batch_stride = d->max_pages_per_seq;
        break;
    case 48: d->batch = 2147418113; break;
    case 49: d->batch = 1; d->q = NULL; break;
    case 50: d->causal = 2; break;
    case 51: d->batch_invariant = 2; break;
    case 52: d->rotary_interleaved = 2; break;
    case 53: d->softmax_scale = NAN; break;
    case 54: d->softmax_scale = INFINITY; break;
    case 55: d->softmax_scale = -0.125f; break;
    case 56: d->softcap = NAN; break;
    case 57: d->softcap = INFINITY; break;
    case 58: d->head_dim = 65537; break;
    case 59: /* 3 x (2^30 - 1) rows; strides that alone would validate */
        d->cu_seqlens_q = NULL; d->seqlen_q = INT32_MAX / 2; d->total_q = 0;
        d->q_batch_stride = d->out_batch_stride = (int64_t)(INT32_MAX / 2) * H0 * D0; break;
    case 60: d->cu_seqlens_knew = NULL; d->seqlen_knew = -1;
        d->knew_batch_stride = d->vnew_batch_stride = 2 * HK0 * D0; break;
    case 61: d->cu_seqlens_knew = NULL; d->seqlen_knew = INT32_MAX / 2; d->total_knew = 0;
        d->knew_batch_stride = d->vnew_batch_stride = (int64_t)(INT32_MAX / 2) * HK0 * D0; break;
    case 62: d->cache_batch_idx = d->cache_seqlens; break; /* any valid int32 array */
    case 63: d->cache_batch_idx = NULL; d->cache_batch = B0 - 1; break;
    case 64: d->rotary_row_stride = D0 / 2 - 1; break;
    case 65: d->rotary_dtype = d->dtype == KVATTN_F16 ? KVATTN_BF16 : KVATTN_F16; break;
    case 66: d->rotary_row_stride = INT64_MAX / 32; break; /* (rotary_max_pos - 1) x stride */
    case 67: d->alibi_batch_stride = INT64_MAX / 2 + 1; break;
    case 68: d->block_table_batch_stride = INT64_MAX / 2 + 1; break;
    case 69: d->out_row_stride = 200; break;
    case 70: d->cu_seqlens_q = NULL; break; /* seqlen_q stays 0 */
    case 71: d->cu_seqlens_knew = NULL; break;
    case 72: d->softmax_scale = 3e38f; break;
    case 73: d->cu_seqlens_q = (const int32_t *)((char *)d->out + 64); break;
    case 74: d->cache_seqlens = (const int32_t *)((char *)d->softmax_lse + 16); break;
    case 75: d->block_table = (const int32_t *)((char *)d->k_cache + 256); break;
    case 76: d->cu_seqlens_knew = (const int32_t *)d->v_cache; break;
    case 77: d->cache_batch_idx = (const int32_t *)((char *)d->out + 4); break;
    case 78: d->cache_leftpad = (const int32_t *)((char *)d->k_cache + 1024); break;
    case 79: d->q = (const char *)d->q + 1; break;
    case 80: d->softmax_lse = (float *)((char *)d->softmax_lse + 2); break;
    case 81: d->cu_seqlens_q = (const int32_t *)((const char *)d->cu_seqlens_q + 2); break;
    case 82: d->rotary_cos = (const char *)d->rotary_cos + 2; break;
    case 83: d->k_new = (const char *)d->k_new + 1; break;
    case 84: d->v_new = (const char *)d->v_new + 1; break;
    case 85: d->out = (char *)d->out + 1; break;
    case 86: d->k_cache = (char *)d->k_cache + 1; break;
    case 87: d->v_cache = (char *)d->v_cache + 1; break;
    case 88: d->cu_seqlens_knew = (const int32_t *)((const char *)d->cu_seqlens_knew + 2); break;
    case 89: d->cache_seqlens = (const int32_t *)((const char *)d->cache_seqlens + 2); break;
    case 90: d->cache_leftpad = (const int32_t *)((const char *)d->cache_leftpad + 2); break;
    case 91: d->cache_batch_idx = (const int32_t *)((const char *)d->cache_batch_idx + 2); break;
    case 92: d->block_table = (const int32_t *)((const char *)d->block_table + 2); break;
    case 93: d->rotary_sin = (const char *)d->rotary_sin + 2; break;
    case 94: d->alibi_slopes = (const float *)((const char *)d->alibi_slopes + 2); break;
    case 95: d->alibi_batch_stride = H0 - 1; break;
    case 96: /* fixed mode, 2 rows per sequence: terms (B-1) x sb = (2-1) x sr = (H-1) x sh = 0x5555555555555556,
              * together 2^64 + 2 */
        fixed_q2(d);
        d->q_batch_stride = 0x2AAAAAAAAAAAAAABLL; d->q_row_stride = 0x5555555555555556LL;
        d->q_head_stride = 0x1C71C71C71C71C72LL; break;
    case 97: d->k_batch_stride = (INT64_MAX / 2) / (cache_slots(d) - 1) + 1; break; /* x 2 bytes past INT64_MAX */
    case 98: d->lse_head_stride = (INT64_MAX / 4) / (H0 - 1) + 1; break;               /* x 4 bytes */
    case 99: d->block_table_batch_stride = (INT64_MAX / 4) / (B0 - 1) + 1; break;      /* x 4 bytes */
    case 100: d->rotary_row_stride = (INT64_MAX / 4) / (MAXPOS0 - 1) + 1; break;       /* fp32 tables: x 4 bytes */
    case 101: d->alibi_batch_stride = (INT64_MAX / 4) / (B0 - 1) + 1; break;           /* x 4 bytes */
    case 102: d->knew_head_stride = -8; break;
    case 103: d->knew_row_stride = INT64_MAX / 2; break; /* (total_knew - 1) x stride */
    case 104: d->vnew_head_stride = -8; break;
    case 105: d->vnew_row_stride = INT64_MAX / 2; break;
    case 106: d->q_head_stride = -8; break; /* heads 24 elements back into a row of 256: offsets stay >= 0 */
    case 107: d->q_batch_stride = -1; break;
    case 108: d->out_batch_stride = -1; break;
    case 109: d->knew_batch_stride = -1; break;
    case 110: d->k_new = d->v_new = NULL; d->k_row_stride = -1; break;
    case 111: d->k_new = d->v_new = NULL; d->k_batch_stride = -100; break;
    case 112: d->lse_batch_stride = -1; break;
    case 113: d->alibi_batch_stride = -1; break; /* (B-1) x -1 + H - 1 >= 0 */
    case 114: d->batch = 1; d->out = d->k_cache; break;
    case 115: d->batch = 1; d->cache_seqlens = (const int32_t *)((char *)d->out + 64); break;
    }
}

/* n cases on the CUDA backend where it cannot run (no device, or not built): counted as skipped, not run. Returns 1
 * then, so that the summary's skips count every case that a GPU machine runs and this one did not. */
static int cuda_skip(int backend, int n) {
    if (backend != KVATTN_BACKEND_CUDA || kvattn_backend_available(KVATTN_BACKEND_CUDA)) return 0;
    for (int i = 0; i < n; i++) kvt_case_skip("no CUDA device");
    return 1;
}

static void run_arg_case(int backend, int id, int paged, int dt) {
    const arg_case *c = &ARG_CASES[id];
    if (c->paged >= 0 && c->paged != paged) return;
    if (cuda_skip(backend, 1)) return;
    kvt_problem P;
    build_base(&P, backend, paged, dt);
    kvt_case_begin("%s %s args: %s", backend ? "cuda" : "cpu", paged ? "paged" : "contig", c->name);
    int skipped = 0;
    if (kvt_problem_upload(&P, 1) == 0) {
        mutate_args(id, &P.pd);
        /* kvattn_validate must agree with forward; it runs first, since arguments it wrongly accepts (a NULL
         * pointer, an offset past int64) could crash the forward call and with it every later case */
        int v = kvattn_validate(&P.pd, backend);
        if (v != c->status) kvt_failf("kvattn_validate returned %s, want %s (%s)", kvattn_status_string(v),
                                      kvattn_status_string(c->status), kvattn_last_error());
        if (v != KVATTN_OK || c->status == KVATTN_OK) {
            kvt_expect e = {c->status, 0, -1, 1, 0, NULL};
            /* UNSUPPORTED where validate (and the case) say INVALID_ARGUMENT fails the case */
            skipped = kvt_problem_run_case(&P, e);
            if (!skipped && P.last_status == c->status && !strstr(P.last_error, c->needle) &&
                !(c->needle2 && strstr(P.last_error, c->needle2)))
                kvt_failf("last_error \"%s\" does not name \"%s\"", P.last_error, c->needle);
        }
    }
    if (skipped) kvt_case_skip("unsupported");
    else kvt_case_end();
    kvt_problem_free(&P);
}

/* ---- data-dependent checks: each mutates the host data before upload --------------------------------------- */
typedef struct data_case {
    const char *name;
    int flag;     /* KVATTN_FLAG_* the CUDA backend must record */
    int bad_seq;  /* the failing sequence (-1: a batch-wide cu_seqlens problem) */
    int paged;    /* 1 paged only, 0 contiguous only, -1 both */
    int valid;    /* 1: a valid edge right next to the check: must succeed and be correct */
} data_case;

static const data_case DATA_CASES[] = {
    {"leftpad > seqlen", KVATTN_FLAG_BAD_LEFTPAD, 1, -1, 0},
    {"leftpad < 0", KVATTN_FLAG_BAD_LEFTPAD, 2, -1, 0},
    {"cache_seqlens < 0", KVATTN_FLAG_BAD_LEFTPAD, 0, -1, 0},
    {"leftpad == seqlen (valid)", 0, -1, -1, 1},
    {"seqlen + n_new > capacity", KVATTN_FLAG_CAPACITY, 2, -1, 0},
    {"seqlen + n_new == capacity (valid)", 0, -1, -1, 1},
    {"page index -1 in a touched page", KVATTN_FLAG_PAGE_INDEX, 1, 1, 0},
    {"page index == num_pages in a touched page", KVATTN_FLAG_PAGE_INDEX, 2, 1, 0},
    {"page index past the pool in the last touched page", KVATTN_FLAG_PAGE_INDEX, 2, 1, 0},
    {"bad page index in a page left of leftpad (valid)", 0, -1, 1, 1},
    {"bad page index after the last token (valid)", 0, -1, 1, 1},
    {"cache_batch_idx == cache_batch", KVATTN_FLAG_BATCH_IDX, 1, 0, 0},
    {"cache_batch_idx < 0", KVATTN_FLAG_BATCH_IDX, 0, 0, 0},
    {"rotary position past rotary_max_pos", KVATTN_FLAG_ROTARY_RANGE, 2, -1, 0},
    {"rotary_max_pos == seqlen + n_new (valid)", 0, -1, -1, 1},
    {"n_q > seqlen + n_new with rotary", KVATTN_FLAG_ROTARY_RANGE, 1, -1, 0},
    {"n_q == seqlen + n_new with rotary (valid)", 0, -1, -1, 1},
    {"cu_seqlens_q decreasing", KVATTN_FLAG_BAD_CU_SEQLENS, -1, -1, 0},
    {"cu_seqlens_q past total_q", KVATTN_FLAG_BAD_CU_SEQLENS, -1, -1, 0},
    {"cu_seqlens_knew decreasing", KVATTN_FLAG_BAD_CU_SEQLENS, -1, -1, 0},
    {"cu_seqlens_knew past total_knew", KVATTN_FLAG_BAD_CU_SEQLENS, -1, -1, 0},
    {"cu_seqlens_q[0] != 0", KVATTN_FLAG_BAD_CU_SEQLENS, -1, -1, 0},
    {"cu_seqlens_q decreasing at the last sequence", KVATTN_FLAG_BAD_CU_SEQLENS, -1, -1, 0},
    {"cu_seqlens_knew decreasing at the last sequence", KVATTN_FLAG_BAD_CU_SEQLENS, -1, -1, 0},
    {"page index -1 where one key is visible (leftpad == seqlen)", KVATTN_FLAG_PAGE_INDEX, 1, 1, 0},
};
#define N_DATA_CASES ((int)(sizeof DATA_CASES / sizeof DATA_CASES[0]))

static void mutate_data(int id, kvt_problem *P) {
    kvattn_params *p = &P->ph;
    int32_t *S = P->seqlens.host, *L = P->leftpad.host, *cuq = P->cu_q.host, *cun = P->cu_knew.host;
    int32_t *bt = P->block_table.used ? P->block_table.host : NULL, *idx = P->batch_idx.host;
    int cap = P->block_table.used ? MAXP0 * PS0 : CAP0;
    switch (id) {
    case 0: L[1] = S[1] + 1; break;
    case 1: L[2] = -1; break;
    case 2: S[0] = -1; L[0] = 0; break;
    case 3: L[1] = S[1]; break;
    case 4: S[2] = cap - NNEW0[2] + 1; p->rotary_max_pos = 2 * MAXPOS0; break; /* only the capacity fails */
    case 5: S[2] = cap - NNEW0[2]; break;
    case 6: bt[1 * MAXP0 + 0] = -1; break;                       /* seq 1: L=2, page 0 is touched */
    case 7: bt[2 * MAXP0 + 1] = POOL0; break;                    /* seq 2: positions 3..41, page 1 */
    case 8: bt[2 * MAXP0 + 2] = POOL0 + 1000; break;             /* page 2: positions 32..47, used to 41 */
    case 9: L[2] = 16; bt[2 * MAXP0 + 0] = -1; break;            /* page 0 = positions 0..15 < L */
    case 10: bt[2 * MAXP0 + 3] = -5; bt[1 * MAXP0 + 1] = POOL0 + 9; break; /* slots past S + n_new */
    case 11: idx[1] = BC0; break;
    case 12: idx[0] = -1; break;
    case 13: p->rotary_max_pos = S0[2] + NNEW0[2] - 1; break;
    case 14: p->rotary_max_pos = S0[2] + NNEW0[2]; break;
    case 15: S[1] = 1; L[1] = 0; break;                          /* n_q = 3 > 1 + 1 */
    case 16: S[1] = 2; L[1] = 0; break;                          /* n_q = 3 == 2 + 1 */
    case 17: cuq[1] = 5; break;                                  /* [0, 5, 4, 6] */
    case 18: cuq[3] = p->total_q + 1; break;
    case 19: cun[1] = 3; break;                                  /* [0, 3, 2, 4] */
    case 20: cun[3] = p->total_knew + 1; break;
    case 21: cuq[0] = 1; break;
    case 22: cuq[3] = cuq[2] - 1; break;                         /* [0, 1, 4, 3]: n_q = -1 */
    case 23: cun[3] = cun[2] - 1; break;                         /* [0, 1, 2, 1] */
    case 24: L[1] = S[1]; bt[1 * MAXP0 + 0] = -1; break;         /* seq 1 touches position 5 only: page 0 */
    }
}

static int run_data_case(int backend, int id, int paged, int dt) {
    const data_case *c = &DATA_CASES[id];
    if (c->paged >= 0 && c->paged != paged) return 0;
    if (cuda_skip(backend, 1)) return 1;
    kvt_problem P;
    build_base(&P, backend, paged, dt);
    mutate_data(id, &P);
    kvt_case_begin("%s %s %s data: %s", backend ? "cuda" : "cpu", paged ? "paged" : "contig",
                   dt == KVATTN_F32 ? "f32" : dt == KVATTN_F16 ? "f16" : "bf16", c->name);
    int skipped = 0;
    if (kvt_problem_upload(&P, 1) == 0) {
        kvt_expect e = kvt_expect_ok();
        if (!c->valid) {
            if (backend == KVATTN_BACKEND_CPU) e = (kvt_expect){KVATTN_ERR_BAD_DATA, 0, -1, 1, 0, NULL};
            else e = (kvt_expect){KVATTN_OK, c->flag, c->bad_seq, 0, c->bad_seq < 0, NULL};
        }
        skipped = kvt_problem_run_case(&P, e); /* (CPU: UNSUPPORTED where BAD_DATA is due fails) */
        if (!skipped && !c->valid && backend == KVATTN_BACKEND_CPU && P.last_status == KVATTN_ERR_BAD_DATA &&
            strlen(P.last_error) == 0)
            kvt_failf("BAD_DATA without a message");
    }
    if (skipped) kvt_case_skip("unsupported");
    else kvt_case_end();
    kvt_problem_free(&P);
    return skipped;
}

/* B = 0 is a valid no-op, whatever the (empty) tensors */
static void run_empty_batch(int backend, int dt) {
    if (cuda_skip(backend, 1)) return;
    kvt_problem P;
    build_base(&P, backend, 1, dt);
    P.ph.batch = 0;
    kvt_case_begin("%s B=0 no-op", backend ? "cuda" : "cpu");
    if (kvt_problem_upload(&P, 1) == 0) {
        kvt_expect e = kvt_expect_ok();
        e.no_change = 1; /* nothing to write: out stays poisoned, caches identical */
        if (kvt_problem_run_case(&P, e)) kvt_case_skip("unsupported");
        else {
            /* and it needs no workspace, on CUDA too */
            int st = kvattn_forward(&P.pd, backend, NULL, 0, NULL);
            if (st != KVATTN_OK) kvt_failf("B = 0 without a workspace: %s (%s)", kvattn_status_string(st), kvattn_last_error());
            kvt_case_end();
        }
    } else kvt_case_end();
    kvt_problem_free(&P);
}

/* CUDA only: a workspace smaller than kvattn_workspace_size, and fp32 (not implemented there) */
static void run_cuda_only(void) {
    if (cuda_skip(KVATTN_BACKEND_CUDA, 3)) return;
    kvt_problem P;
    build_base(&P, KVATTN_BACKEND_CUDA, 1, KVATTN_F16);
    kvt_case_begin("cuda workspace too small");
    if (kvt_problem_upload(&P, 1) == 0) {
        size_t ws = 0;
        int st = kvattn_workspace_size(&P.pd, KVATTN_BACKEND_CUDA, &ws);
        if (st != KVATTN_OK || ws == 0) /* (a CUDA call always needs one: its device status record) */
            kvt_failf("workspace_size: %s, %zu bytes (%s): no workspace to undercut", kvattn_status_string(st), ws,
                      kvattn_last_error());
        P.ws_override = 1;
        P.ws_bytes = ws ? ws - 1 : 0;
        kvt_expect e = {KVATTN_ERR_WORKSPACE, 0, -1, 1, 0, NULL};
        kvt_problem_run_case(&P, e); /* (UNSUPPORTED instead of WORKSPACE fails: never a skip) */
        if (P.last_status == KVATTN_ERR_WORKSPACE && !strstr(P.last_error, "workspace"))
            kvt_failf("last_error \"%s\" does not name the workspace", P.last_error);
    }
    kvt_case_end();
    kvt_problem_free(&P);

    /* the workspace is written by the call (status record, plan, split partials): an index array or a written tensor
     * inside it is refused before any launch (fifty-eighth session) */
    build_base(&P, KVATTN_BACKEND_CUDA, 1, KVATTN_F16);
    kvt_case_begin("cuda index array or out inside the workspace");
    if (kvt_problem_upload(&P, 1) == 0) {
        size_t ws = 0;
        int st = kvattn_workspace_size(&P.pd, KVATTN_BACKEND_CUDA, &ws);
        if (st != KVATTN_OK) kvt_failf("workspace_size: %s (%s)", kvattn_status_string(st), kvattn_last_error());
        kvt_free(&P.workspace);
        P.workspace = kvt_alloc(KVATTN_BACKEND_CUDA, ws);
        char *w = (char *)P.workspace.ptr;
        for (int which = 0; w && which < 2; which++) {
            kvattn_params d = P.pd;
            const char *name = which ? "out" : "cu_seqlens_q";
            if (which) d.out = w + ws / 2 / 16 * 16; /* (16-byte aligned) */
            else d.cu_seqlens_q = (const int32_t *)(w + 16);
            st = kvattn_forward(&d, KVATTN_BACKEND_CUDA, w, ws, NULL);
            const char *msg = kvattn_last_error();
            if (st != KVATTN_ERR_INVALID_ARGUMENT || strncmp(msg, name, strlen(name)) != 0 || !strstr(msg, "workspace"))
                kvt_failf("%s inside the workspace: %s (%s), want INVALID_ARGUMENT naming it and the workspace", name,
                          kvattn_status_string(st), msg);
        }
        if (!w) kvt_failf("cannot allocate a workspace of %zu bytes", ws);
    }
    kvt_case_end();
    kvt_problem_free(&P);

    build_base(&P, KVATTN_BACKEND_CUDA, 1, KVATTN_F32);
    kvt_case_begin("cuda fp32 is unsupported");
    if (kvt_problem_upload(&P, 1) == 0) {
        kvt_expect e = {KVATTN_ERR_UNSUPPORTED, 0, -1, 1, 0, NULL};
        kvt_problem_run_case(&P, e); /* (UNSUPPORTED is what is expected: checked as a status) */
        if (P.last_status == KVATTN_ERR_UNSUPPORTED && !strstr(P.last_error, "dtype"))
            kvt_failf("last_error \"%s\" does not name dtype", P.last_error);
    }
    kvt_case_end();
    kvt_problem_free(&P);
}

/* An error that the caller's own code left pending (a failed cudaMalloc: not sticky) is not kvattn's: the call
 * succeeds, on the fused path (a small block table) and on the check kernel's (one of more than 65536 slots,
 * which kvattn once launched with <<<>>> and checked with cudaGetLastError, returning the caller's error). */
static void run_pending_error(int wide) {
    if (cuda_skip(KVATTN_BACKEND_CUDA, 1)) return;
#ifdef KVATTN_HAVE_CUDA
    kvt_problem P;
    build_base(&P, KVATTN_BACKEND_CUDA, 1, KVATTN_BF16);
    if (wide) {
        const int W = 32768; /* B0 x W > 65536 slots: the check kernel runs the page checks */
        int32_t *old = (int32_t *)malloc(sizeof(int32_t) * B0 * MAXP0);
        memcpy(old, P.block_table.host, sizeof(int32_t) * B0 * MAXP0);
        kvt_arr_alloc(&P, &P.block_table, "block_table", sizeof(int32_t) * B0 * W);
        int32_t *bt = (int32_t *)P.block_table.host;
        for (int b = 0; b < B0; b++)
            for (int j = 0; j < W; j++) bt[(size_t)b * W + j] = j < MAXP0 ? old[b * MAXP0 + j] : -1;
        free(old);
        P.ph.max_pages_per_seq = W;
        P.ph.block_table_batch_stride = W;
    }
    kvt_case_begin("cuda: a CUDA error the caller left pending does not fail the call (%s)",
                   wide ? "check kernel" : "fused checks");
    const char *no_api = getenv("KVATTN_TEST_NO_API_ERRORS");
    if (no_api && no_api[0] && no_api[0] != '0') {
        /* compute-sanitizer reports the provoked cudaMalloc failure as an API error (gpu_run.sh's memcheck) */
        kvt_case_skip("KVATTN_TEST_NO_API_ERRORS: the case provokes a CUDA API error on purpose");
    } else {
        int skipped = 0;
        if (kvt_problem_upload(&P, 1) == 0) {
            void *junk = NULL;
            if (cudaMalloc(&junk, (size_t)1 << 60) == cudaSuccess) {
                cudaFree(junk);
                kvt_failf("cudaMalloc of 2^60 bytes succeeded: no pending error to test with");
            }
            skipped = kvt_problem_run_case(&P, kvt_expect_ok());
        }
        if (skipped) kvt_case_skip("unsupported");
        else kvt_case_end();
    }
    (void)cudaGetLastError();
    kvt_problem_free(&P);
#else
    (void)wide;
#endif
}

int main(void) {
    kvt_init("test_bad_input");
    int backends[2] = {KVATTN_BACKEND_CPU, KVATTN_BACKEND_CUDA};
    int cuda = kvattn_backend_available(KVATTN_BACKEND_CUDA);
    if (!cuda) printf("CUDA: no GPU: its cases are counted as skipped\n");
    for (int bi = 0; bi < 2; bi++) { /* (without a GPU, each CUDA case counts a skip: cuda_skip) */
        int backend = backends[bi];
        int dt = backend == KVATTN_BACKEND_CPU ? KVATTN_F16 : KVATTN_BF16;
        for (int paged = 0; paged <= 1; paged++) {
            for (int id = 0; id < N_ARG_CASES; id++) run_arg_case(backend, id, paged, dt);
            for (int id = 0; id < N_DATA_CASES; id++) run_data_case(backend, id, paged, dt);
        }
        if (backend == KVATTN_BACKEND_CPU) /* the checks do not depend on the element type */
            for (int id = 0; id < N_DATA_CASES; id++) run_data_case(backend, id, 1, KVATTN_F32);
        run_empty_batch(backend, dt);
        if (backend == KVATTN_BACKEND_CUDA) {
            run_cuda_only();
            run_pending_error(0);
            run_pending_error(1);
        }
    }
    /* the largest capacity validates (a cache only read may also broadcast: batch stride 0 over 4 rows) */
    kvt_case_begin("capacity KVATTN_MAX_CACHE_TOKENS validates; a read-only cache may broadcast");
    {
        static char q[8 * 2], out[8 * 2], kc[8 * 2];
        static int32_t seqlens[4] = {1, 1, 1, 1};
        kvattn_params p = kvattn_params_default();
        p.dtype = KVATTN_F16; p.batch = 4; p.num_heads = 1; p.num_kv_heads = 1; p.head_dim = 8;
        p.q = q; p.seqlen_q = 1; p.q_batch_stride = 0; p.q_row_stride = 8; p.q_head_stride = 8; /* read: may broadcast */
        p.out = out; p.out_batch_stride = 8; p.out_row_stride = 8; p.out_head_stride = 8;
        p.k_cache = p.v_cache = kc; p.cache_batch = 1; p.cache_capacity = KVATTN_MAX_CACHE_TOKENS;
        p.k_batch_stride = p.v_batch_stride = (int64_t)KVATTN_MAX_CACHE_TOKENS * 8;
        p.k_row_stride = p.v_row_stride = 8; p.k_head_stride = p.v_head_stride = 8;
        p.cache_batch_idx = NULL; p.cache_seqlens = seqlens;
        p.cache_batch = 4; p.k_batch_stride = p.v_batch_stride = 0;
        int st = kvattn_validate(&p, KVATTN_BACKEND_CPU);
        if (st != KVATTN_OK) kvt_failf("validate: %s (%s)", kvattn_status_string(st), kvattn_last_error());
        static char out4[4 * 8 * 2];
        p.out = out4;
        p.out_batch_stride = 4; /* [4, 1, 1, 8] with batch stride 4 < D: rows overlap, and out is written */
        st = kvattn_validate(&p, KVATTN_BACKEND_CPU);
        if (st != KVATTN_ERR_INVALID_ARGUMENT || !strstr(kvattn_last_error(), "out"))
            kvt_failf("overlapping out: %s (%s)", kvattn_status_string(st), kvattn_last_error());
    }
    kvt_case_end();
    /* CUDA: the kernels pack a sequence's query rows with its heads (n_q x H/Hk) in int32 tiles, at most 2^30 - 1
     * rows; more used to leave the sequence's out unwritten with a clean status (validate only: no GPU needed) */
    kvt_case_begin("cuda: seqlen_q x H/Hk past 2^30 - 1 packed rows is unsupported, naming seqlen_q");
    {
        static char q[8 * 2], out[8 * 2], kc[8 * 2];
        static int32_t seqlens[1] = {4};
        kvattn_params p = kvattn_params_default();
        p.dtype = KVATTN_F16; p.batch = 1; p.num_heads = 16385; p.num_kv_heads = 1; p.head_dim = 8;
        p.q = q; p.q_batch_stride = p.q_row_stride = p.q_head_stride = 0; /* read only: may broadcast */
        p.out = out; p.out_head_stride = 8; p.out_row_stride = 16385 * 8; p.out_batch_stride = 0;
        p.k_cache = p.v_cache = kc; p.cache_batch = 1; p.cache_capacity = 4;
        p.k_batch_stride = p.v_batch_stride = 32; p.k_row_stride = p.v_row_stride = 8;
        p.k_head_stride = p.v_head_stride = 8;
        p.cache_seqlens = seqlens;
        /* 65532 x 16385 = 2^30 - 4 rows fit; 65533 x 16385 = 2^30 + 16381 do not */
        const int32_t sq[2] = {65532, 65533};
        int skipped = 0;
        for (int i = 0; i < 2 && !skipped; i++) {
            p.seqlen_q = sq[i];
            int st = kvattn_validate(&p, KVATTN_BACKEND_CUDA);
            if (st == KVATTN_ERR_NOT_AVAILABLE) {
                kvt_case_skip("CUDA backend not built");
                skipped = 1;
            } else if (i == 0 && st != KVATTN_OK) {
                kvt_failf("seqlen_q %d: %s (%s), want OK", sq[i], kvattn_status_string(st), kvattn_last_error());
            } else if (i == 1 && (st != KVATTN_ERR_UNSUPPORTED || !strstr(kvattn_last_error(), "seqlen_q"))) {
                kvt_failf("seqlen_q %d: %s (%s), want KVATTN_ERR_UNSUPPORTED naming seqlen_q", sq[i],
                          kvattn_status_string(st), kvattn_last_error());
            }
        }
        /* varlen: total_q is the bound (the rows a sequence can have) */
        static int32_t cu[2] = {0, 1};
        p.cu_seqlens_q = cu; p.total_q = 65533; p.seqlen_q = 0;
        int st = skipped ? KVATTN_ERR_UNSUPPORTED : kvattn_validate(&p, KVATTN_BACKEND_CUDA);
        if (!skipped && (st != KVATTN_ERR_UNSUPPORTED || !strstr(kvattn_last_error(), "total_q")))
            kvt_failf("total_q 65533: %s (%s), want KVATTN_ERR_UNSUPPORTED naming total_q", kvattn_status_string(st),
                      kvattn_last_error());
        if (!skipped) kvt_case_end();
    }
    /* kvattn_last_error() describes the last call that returns a status: "" once one succeeds, pages too */
    kvt_case_begin("last_error is cleared by a successful call");
    {
        kvattn_pages *pool = NULL;
        int st = kvattn_pages_create(&pool, 4, 0);
        if (st != KVATTN_ERR_INVALID_ARGUMENT || !strstr(kvattn_last_error(), "page_size"))
            kvt_failf("pages_create(page_size 0): %s (%s)", kvattn_status_string(st), kvattn_last_error());
        st = kvattn_pages_create(&pool, 4, 2);
        if (st != KVATTN_OK || kvattn_last_error()[0] != '\0')
            kvt_failf("pages_create after a failure: %s, last_error \"%s\"", kvattn_status_string(st),
                      kvattn_last_error());
        int32_t id = -1;
        if (kvattn_pages_append(pool, 99, 1) != KVATTN_ERR_INVALID_ARGUMENT) kvt_failf("append to seq 99 succeeded");
        if (kvattn_pages_add_seq(pool, &id) != KVATTN_OK || kvattn_last_error()[0] != '\0')
            kvt_failf("add_seq after a failure left last_error \"%s\"", kvattn_last_error());
        /* every other page-manager call too (sixty-first session: a mutation run removed each clear unseen) */
        int32_t child = -1, table[4], lens[1];
#define KVT_CLEARS(name, call)                                                                                     \
        do {                                                                                                       \
            if (kvattn_pages_append(pool, 99, 1) != KVATTN_ERR_INVALID_ARGUMENT || !kvattn_last_error()[0])      \
                kvt_failf("append to seq 99: no error before " name);                                             \
            const int st_ = (call);                                                                                \
            if (st_ != KVATTN_OK || kvattn_last_error()[0] != '\0')                                                \
                kvt_failf(name " after a failure: %s, last_error \"%s\"", kvattn_status_string(st_),              \
                          kvattn_last_error());                                                                    \
        } while (0)
        KVT_CLEARS("append", kvattn_pages_append(pool, id, 5));
        KVT_CLEARS("fork", kvattn_pages_fork(pool, id, 4, &child));
        KVT_CLEARS("truncate", kvattn_pages_truncate(pool, id, 4));
        KVT_CLEARS("fill", kvattn_pages_fill(pool, &id, 1, NULL, table, 4, 4, lens));
        KVT_CLEARS("release", kvattn_pages_release(pool, child));
#undef KVT_CLEARS
        kvattn_pages_destroy(pool);
        kvattn_params p = kvattn_params_default();
        if (kvattn_validate(&p, KVATTN_BACKEND_CPU) != KVATTN_ERR_INVALID_ARGUMENT || !kvattn_last_error()[0])
            kvt_failf("default params (no heads) validated");
        p.num_heads = p.num_kv_heads = p.head_dim = 8;
        if (kvattn_validate(&p, KVATTN_BACKEND_CPU) != KVATTN_OK || kvattn_last_error()[0] != '\0')
            kvt_failf("B = 0 call: last_error \"%s\"", kvattn_last_error());
        /* kvattn_workspace_size clears it too */
        p.num_heads = 0;
        size_t wsb = 0;
        if (kvattn_validate(&p, KVATTN_BACKEND_CPU) != KVATTN_ERR_INVALID_ARGUMENT || !kvattn_last_error()[0])
            kvt_failf("validate with num_heads 0: no error");
        p.num_heads = 8;
        if (kvattn_workspace_size(&p, KVATTN_BACKEND_CPU, &wsb) != KVATTN_OK || kvattn_last_error()[0] != '\0')
            kvt_failf("workspace_size after a failure: last_error \"%s\"", kvattn_last_error());
        /* kvattn_forward clears it too */
        p.num_heads = 0;
        if (kvattn_forward(&p, KVATTN_BACKEND_CPU, NULL, 0, NULL) != KVATTN_ERR_INVALID_ARGUMENT || !kvattn_last_error()[0])
            kvt_failf("forward with num_heads 0: no error");
        p.num_heads = 8;
        if (kvattn_forward(&p, KVATTN_BACKEND_CPU, NULL, 0, NULL) != KVATTN_OK || kvattn_last_error()[0] != '\0')
            kvt_failf("forward after a failure: last_error \"%s\"", kvattn_last_error());
    }
    kvt_case_end();
    /* k_new / v_new overlapping the cache rows they are appended into: a read-only tensor overlapping a written one
     * is not checked and gives an unspecified result (kvattn.h), so only the call's own promises are checked: OK,
     * and no cache row but the appended one changed. Under ASan (make test-asan) this also checks that the append
     * is not undefined behaviour (sixty-first session: memcpy of overlapping ranges, which ASan aborts on). */
    kvt_case_begin("cpu: k_new / v_new overlapping the cache row they are appended into");
    {
        enum { CD = 16, CHK = 2, CC = 8, ROW = CHK * CD };
        static uint16_t kc[CC * ROW], vc[CC * ROW], q[2 * CD], out[2 * CD], kc0[CC * ROW], vc0[CC * ROW];
        kvt_fill(KVATTN_F16, kc, CC * ROW, -1, 1);
        kvt_fill(KVATTN_F16, vc, CC * ROW, -1, 1);
        kvt_fill(KVATTN_F16, q, 2 * CD, -1, 1);
        memcpy(kc0, kc, sizeof kc);
        memcpy(vc0, vc, sizeof vc);
        int32_t seqlen = 3;
        kvattn_params p = kvattn_params_default();
        p.dtype = KVATTN_F16; p.batch = 1; p.num_heads = 2; p.num_kv_heads = CHK; p.head_dim = CD;
        p.q = q; p.seqlen_q = 1; p.out = out;
        p.k_cache = kc; p.v_cache = vc; p.cache_batch = 1; p.cache_capacity = CC; p.cache_seqlens = &seqlen;
        /* token 3 is appended; its new K starts half a head past that row, its new V half a head before it */
        p.k_new = kc + 3 * ROW + CD / 2; p.v_new = vc + 3 * ROW - CD / 2; p.seqlen_knew = 1;
        const int st = kvattn_forward(&p, KVATTN_BACKEND_CPU, NULL, 0, NULL);
        if (st != KVATTN_OK) kvt_failf("overlapping append: %s (%s)", kvattn_status_string(st), kvattn_last_error());
        for (int r = 0; r < CC; r++)
            if (r != 3 && (memcmp(kc + r * ROW, kc0 + r * ROW, ROW * 2) || memcmp(vc + r * ROW, vc0 + r * ROW, ROW * 2)))
                kvt_failf("overlapping append changed cache row %d", r);
    }
    kvt_case_end();
    /* the status strings are stable names, one per status number */
    kvt_case_begin("status strings");
    {
        static const char *names[] = {"KVATTN_OK", "KVATTN_ERR_INVALID_ARGUMENT", "KVATTN_ERR_UNSUPPORTED",
                                      "KVATTN_ERR_WORKSPACE", "KVATTN_ERR_BAD_DATA", "KVATTN_ERR_NOT_AVAILABLE",
                                      "KVATTN_ERR_OUT_OF_PAGES", "KVATTN_ERR_OUT_OF_MEMORY", "KVATTN_ERR_CUDA",
                                      "KVATTN_ERR_INTERNAL"};
        for (int s = KVATTN_OK; s <= KVATTN_ERR_INTERNAL; s++)
            if (strcmp(kvattn_status_string(s), names[s]) != 0)
                kvt_failf("kvattn_status_string(%d) = %s, want %s", s, kvattn_status_string(s), names[s]);
        if (!kvattn_status_string(12345)) kvt_failf("kvattn_status_string(12345) is NULL");
    }
    kvt_case_end();
    /* paged: max_pages_per_seq x page_size == KVATTN_MAX_CACHE_TOKENS is the largest capacity, and valid */
    kvt_case_begin("paged capacity KVATTN_MAX_CACHE_TOKENS validates");
    {
        static char q[8 * 2], out[4 * 8 * 2], kc[16 * 8 * 2];
        static int32_t seqlens[4] = {1, 1, 1, 1};
        kvattn_params p = kvattn_params_default();
        p.dtype = KVATTN_F16; p.batch = 4; p.num_heads = 1; p.num_kv_heads = 1; p.head_dim = 8;
        p.q = q; p.seqlen_q = 1; p.q_batch_stride = 0; p.q_row_stride = 8; p.q_head_stride = 8; /* read: may broadcast */
        p.out = out; p.out_batch_stride = 8; p.out_row_stride = 8; p.out_head_stride = 8;
        p.k_cache = p.v_cache = kc; p.num_pages = 1; p.page_size = 16;
        p.k_batch_stride = p.v_batch_stride = 16 * 8; p.k_row_stride = p.v_row_stride = 8;
        p.k_head_stride = p.v_head_stride = 8;
        /* a table of 4 x 2^27 slots: a fake address, never read (validate only), that lies clear of q, out and kc
         * (an index array that shares memory with out is refused) */
        p.block_table = (const int32_t *)(uintptr_t)((uint64_t)1 << 44);
        p.max_pages_per_seq = KVATTN_MAX_CACHE_TOKENS / 16; /* a multiple of 16 */
        p.block_table_batch_stride = p.max_pages_per_seq;
        p.cache_seqlens = seqlens;
        int st = kvattn_validate(&p, KVATTN_BACKEND_CPU);
        if (st != KVATTN_OK) kvt_failf("validate: %s (%s)", kvattn_status_string(st), kvattn_last_error());
    }
    kvt_case_end();
    /* kvattn_workspace_size on the CUDA backend reads no data and needs no device (a stand-in without one), so these
     * run on every CUDA build. Fake, aligned, well-separated addresses: nothing is dereferenced. */
    kvt_case_begin("cuda workspace_size: num_splits INT32_MAX, the batch-invariant bound, sizes that would wrap");
    {
        size_t probe = 0;
        kvattn_params p0 = kvattn_params_default();
        p0.num_heads = p0.num_kv_heads = p0.head_dim = 8; /* B = 0 */
        if (kvattn_workspace_size(&p0, KVATTN_BACKEND_CUDA, &probe) == KVATTN_ERR_NOT_AVAILABLE) {
            kvt_case_skip("a library built without CUDA");
        } else {
            size_t ws[5];
            int st;
            /* 8 decodes over paged caches of 8192 x 16 slots, batch-invariant: num_splits 0 (auto) and any cap at or
             * past the number of 2048-key blocks plan the same pieces, so the same workspace; INT32_MAX is a valid
             * cap ("at most n KV splits") */
            const int caps[5] = {0, 65, 1 << 20, INT32_MAX - 1, INT32_MAX};
            for (int i = 0; i < 5; i++) {
                kvattn_params p = kvt_fake_paged_call(8, 8, 32, 8, 128, 16, 8192);
                p.batch_invariant = 1;
                p.num_splits = caps[i];
                st = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &ws[i]);
                if (st != KVATTN_OK) kvt_failf("num_splits %d: %s (%s)", caps[i], kvattn_status_string(st), kvattn_last_error());
                else if (ws[i] != ws[0] || ws[i] > ((size_t)1 << 30))
                    kvt_failf("batch-invariant, num_splits %d: %zu bytes, num_splits 0: %zu (want the same, < 1 GiB)",
                              caps[i], ws[i], ws[0]);
            }
            /* batch-invariant mode splits only sequences of at most 64 packed rows: 256 sequences, 8192 queries (G 4),
             * capacity 131072 reserve partial rows for 8 heads x 65 pieces x 64 x 256 rows (~4.4 GB at head dim
             * 128), not for 128 rows per sequence (8.9 GB before the fifty-ninth session) */
            kvattn_params p = kvt_fake_paged_call(256, 8192, 32, 8, 128, 16, 8192);
            p.batch_invariant = 1;
            st = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &ws[0]);
            if (st != KVATTN_OK || ws[0] > (size_t)5000000000u || ws[0] < (size_t)4000000000u)
                kvt_failf("batch-invariant, 256 sequences, 8192 queries: %s, %zu bytes (want 4 - 5 GB)",
                          kvattn_status_string(st), ws[0]);
            /* absurd but valid sizes (out alone ~140 TB): one query row per head, 9344 heads, capacity 2^31 - 65536.
             * The partial-row bound rows x heads x pieces passes 2^63 near total_q = 941391424; the size must not
             * wrap below that of the call with half the rows. */
            kvattn_params big = kvt_fake_paged_call(1, 941391424, 9344, 9344, 8, 1024, 2097087);
            kvattn_params half = big;
            half.total_q /= 2;
            st = kvattn_workspace_size(&big, KVATTN_BACKEND_CUDA, &ws[0]);
            int st2 = kvattn_workspace_size(&half, KVATTN_BACKEND_CUDA, &ws[1]);
            if (st != KVATTN_OK || st2 != KVATTN_OK)
                kvt_failf("huge call: %s / %s (%s)", kvattn_status_string(st), kvattn_status_string(st2), kvattn_last_error());
            else if (ws[0] < ws[1])
                kvt_failf("huge call: %zu bytes, smaller than the %zu of the call with half its rows (wrapped)", ws[0], ws[1]);
        }
    }
    kvt_case_end();
    /* kvattn.h's promises outside one call: backend numbers, the workspace size's output, the defaults */
    kvt_case_begin("backend numbers, workspace_size outputs, kvattn_params_default");
    {
        kvattn_params p = kvattn_params_default();
        p.num_heads = p.num_kv_heads = p.head_dim = 8; /* B = 0: a valid call */
        if (kvattn_backend_available(KVATTN_BACKEND_CPU) != 1) kvt_failf("the CPU backend reports itself unavailable");
        /* CUDA: 1 with no error left, or 0 with the reason (no device, no CUDA in the build, no kernels for the
         * device's arch) in kvattn_last_error, and then kvattn_forward's NOT_AVAILABLE says the same */
        if (kvattn_backend_available(KVATTN_BACKEND_CUDA)) {
            if (kvattn_last_error()[0]) kvt_failf("CUDA available, yet an error is left: %s", kvattn_last_error());
        } else {
            char why[256];
            snprintf(why, sizeof why, "%s", kvattn_last_error());
            if (!why[0]) kvt_failf("CUDA backend unavailable with no reason in kvattn_last_error");
            static char host_ws[64];
            kvattn_device_status dst0;
            const int st = kvattn_device_status_read(host_ws, NULL, &dst0);
            if (st != KVATTN_ERR_NOT_AVAILABLE || strcmp(why, kvattn_last_error()))
                kvt_failf("CUDA unavailable (%s), device_status_read: %s (%s)", why, kvattn_status_string(st),
                          kvattn_last_error());
            /* a valid call says the same before its (here missing) workspace is looked at */
            kvattn_params call = kvt_fake_paged_call(4, 4, 8, 8, 64, 16, 8);
            const int fst = kvattn_forward(&call, KVATTN_BACKEND_CUDA, NULL, 0, NULL);
            if (fst != KVATTN_ERR_NOT_AVAILABLE || strcmp(why, kvattn_last_error()))
                kvt_failf("CUDA unavailable (%s), forward without a workspace: %s (%s)", why, kvattn_status_string(fst),
                          kvattn_last_error());
        }
        const int bad_backends[3] = {-1, 2, 7};
        for (int k = 0; k < 3; k++) {
            const int bk = bad_backends[k];
            if (kvattn_backend_available(bk) != 0) kvt_failf("backend %d reported available", bk);
            /* kvattn.h: "else 0 and kvattn_last_error() says why" (sixty-first session: no reason was given) */
            char num[16];
            snprintf(num, sizeof num, "%d", bk);
            if (!strstr(kvattn_last_error(), "backend") || !strstr(kvattn_last_error(), num))
                kvt_failf("backend %d unavailable, reason \"%s\"", bk, kvattn_last_error());
            int st = kvattn_validate(&p, bk);
            if (st != KVATTN_ERR_INVALID_ARGUMENT || !strstr(kvattn_last_error(), "backend"))
                kvt_failf("validate with backend %d: %s (%s)", bk, kvattn_status_string(st), kvattn_last_error());
            st = kvattn_forward(&p, bk, NULL, 0, NULL);
            if (st != KVATTN_ERR_INVALID_ARGUMENT || !strstr(kvattn_last_error(), "backend"))
                kvt_failf("forward with backend %d: %s (%s)", bk, kvattn_status_string(st), kvattn_last_error());
            size_t ws = 0;
            st = kvattn_workspace_size(&p, bk, &ws);
            if (st != KVATTN_ERR_INVALID_ARGUMENT) kvt_failf("workspace_size with backend %d: %s", bk, kvattn_status_string(st));
        }
        size_t ws = 12345;
        int st = kvattn_workspace_size(&p, KVATTN_BACKEND_CPU, &ws);
        if (st != KVATTN_OK || ws != 0) kvt_failf("CPU workspace_size: %s, %zu bytes (want 0)", kvattn_status_string(st), ws);
        st = kvattn_workspace_size(&p, KVATTN_BACKEND_CPU, NULL);
        if (st != KVATTN_ERR_INVALID_ARGUMENT || !strstr(kvattn_last_error(), "bytes"))
            kvt_failf("workspace_size(bytes NULL): %s (%s)", kvattn_status_string(st), kvattn_last_error());
        /* kvattn_device_status_read: NULL arguments are rejected on every build (before any CUDA call) */
        kvattn_device_status dst;
        static char fake_ws[64];
        st = kvattn_device_status_read(NULL, NULL, &dst);
        if (st != KVATTN_ERR_INVALID_ARGUMENT || !strstr(kvattn_last_error(), "workspace"))
            kvt_failf("device_status_read(workspace NULL): %s (%s)", kvattn_status_string(st), kvattn_last_error());
        st = kvattn_device_status_read(fake_ws, NULL, NULL);
        if (st != KVATTN_ERR_INVALID_ARGUMENT || !strstr(kvattn_last_error(), "out"))
            kvt_failf("device_status_read(out NULL): %s (%s)", kvattn_status_string(st), kvattn_last_error());
        /* no usable device (or no CUDA in the build): KVATTN_ERR_NOT_AVAILABLE, as kvattn_forward says */
        if (!kvattn_backend_available(KVATTN_BACKEND_CUDA)) {
            st = kvattn_device_status_read(fake_ws, NULL, &dst);
            if (st != KVATTN_ERR_NOT_AVAILABLE)
                kvt_failf("device_status_read without a device: %s (%s), want KVATTN_ERR_NOT_AVAILABLE",
                          kvattn_status_string(st), kvattn_last_error());
        }
        /* "every pointer NULL, every size 0, every stride KVATTN_STRIDE_PACKED, window -1/-1, rotary_interleaved 1,
         * softmax_scale 0, dtype fp16" (all 24 strides: test_default_strides) */
        kvattn_params d = kvattn_params_default();
        if (d.struct_size != (int64_t)sizeof(kvattn_params) || d.struct_size != (int64_t)kvattn_params_size())
            kvt_failf("default struct_size %lld", (long long)d.struct_size);
        if (d.dtype != KVATTN_F16 || d.rotary_interleaved != 1 || d.window_left != -1 || d.window_right != -1 ||
            d.softmax_scale != 0.0f || d.rotary_dtype != KVATTN_F32)
            kvt_failf("defaults: dtype %d rotary_interleaved %d window (%d, %d) softmax_scale %g rotary_dtype %d",
                      d.dtype, d.rotary_interleaved, d.window_left, d.window_right, (double)d.softmax_scale,
                      d.rotary_dtype);
        if (d.batch || d.num_heads || d.num_kv_heads || d.head_dim || d.seqlen_q || d.total_q || d.causal ||
            d.softcap != 0.0f || d.num_splits || d.batch_invariant || d.rotary_dim || d.rotary_max_pos ||
            d.page_size || d.num_pages || d.max_pages_per_seq || d.cache_batch || d.cache_capacity)
            kvt_failf("a default size is not 0");
        if (d.rotary_row_stride != KVATTN_STRIDE_PACKED || d.alibi_batch_stride != KVATTN_STRIDE_PACKED ||
            d.q_row_stride != KVATTN_STRIDE_PACKED || d.out_row_stride != KVATTN_STRIDE_PACKED ||
            d.k_row_stride != KVATTN_STRIDE_PACKED)
            kvt_failf("a default stride is not KVATTN_STRIDE_PACKED");
        if (d.q || d.out || d.k_cache || d.v_cache || d.k_new || d.v_new || d.cu_seqlens_q || d.cu_seqlens_knew ||
            d.cache_seqlens || d.cache_leftpad || d.cache_batch_idx || d.block_table || d.rotary_cos ||
            d.rotary_sin || d.alibi_slopes || d.softmax_lse)
            kvt_failf("a default pointer is not NULL");
    }
    kvt_case_end();
    return kvt_finish();
}
