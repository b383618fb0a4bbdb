/* test_cuda_common.h — what the CUDA tests (tests/test_cuda_*.c) share on top of tests/common: skipping when no
 * GPU is present, and a builder of one varlen problem (paged with a shuffled block table, or contiguous) from
 * per-sequence lengths. B sequences, H query heads, Hk KV heads, D head dim. */
#ifndef KVATTN_TEST_CUDA_COMMON_H
#define KVATTN_TEST_CUDA_COMMON_H

#include "harness.h"
#include "kvattn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KVATTN_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Returns 1 when the CUDA backend can run; else prints why, counts `n_cases` skips and returns 0. */
static inline int cu_gpu_or_skip(int n_cases) {
    if (kvattn_backend_available(KVATTN_BACKEND_CUDA)) return 1;
    printf("CUDA backend not available (%s): GPU tests skipped\n", kvattn_last_error());
    for (int i = 0; i < n_cases; i++) {
        kvt_case_begin("gpu case %d", i);
        kvt_case_skip("no CUDA device");
    }
    return 0;
}

/* One problem's shape: per-sequence lengths and the options the CUDA tests vary. */
typedef struct cu_spec {
    int backend; /* KVATTN_BACKEND_CUDA (cu_spec_default); the problem itself suits either backend */
    int dtype, B, H, Hk, D;
    const int *n_q, *n_new, *S, *L; /* [B] each; L may be NULL */
    int paged, page_size;           /* paged: page_size >= 1 */
    int extra_pages;                /* paged: pool pages beyond what the sequences need */
    int extra_slots;                /* paged: block-table slots per sequence beyond the longest need (-1) */
    int capacity;                   /* contiguous: tokens per cache row (0: the longest need) */
    int causal, rotary_dim, rotary_interleaved;
    int batch_invariant, num_splits;
} cu_spec;

static inline cu_spec cu_spec_default(void) {
    cu_spec s;
    memset(&s, 0, sizeof s);
    s.backend = KVATTN_BACKEND_CUDA;
    s.dtype = KVATTN_BF16;
    s.H = 8;
    s.Hk = 2;
    s.D = 128;
    s.paged = 1;
    s.page_size = 16;
    s.extra_pages = 3;
    s.extra_slots = 2;
    s.causal = 1;
    return s;
}

/* Fills P (backend sp->backend) with random q, k_new, v_new, caches, a shuffled pool; does not upload. */
static inline void cu_build(kvt_problem *P, const cu_spec *sp) {
    const int B = sp->B, H = sp->H, Hk = sp->Hk, D = sp->D, dt = sp->dtype, es = kvref_dtype_size(dt);
    kvt_problem_init(P, sp->backend, dt, B, H, Hk, D);
    kvattn_params *p = &P->ph;
    p->causal = sp->causal;
    p->batch_invariant = sp->batch_invariant;
    p->num_splits = sp->num_splits;

    int32_t total_q = 0, total_new = 0, need_max = 1;
    for (int b = 0; b < B; b++) {
        total_q += sp->n_q[b];
        total_new += sp->n_new[b];
        if (sp->S[b] + sp->n_new[b] > need_max) need_max = sp->S[b] + sp->n_new[b];
    }
    kvt_arr_alloc(P, &P->cu_q, "cu_seqlens_q", (size_t)(B + 1) * 4);
    kvt_arr_alloc(P, &P->cu_knew, "cu_seqlens_knew", (size_t)(B + 1) * 4);
    kvt_arr_alloc(P, &P->seqlens, "cache_seqlens", (size_t)(B > 0 ? B : 1) * 4);
    int32_t *cq = P->cu_q.host, *ck = P->cu_knew.host, *sl = P->seqlens.host;
    cq[0] = ck[0] = 0;
    for (int b = 0; b < B; b++) {
        cq[b + 1] = cq[b] + sp->n_q[b];
        ck[b + 1] = ck[b] + sp->n_new[b];
        sl[b] = sp->S[b];
    }
    if (sp->L) {
        kvt_arr_alloc(P, &P->leftpad, "cache_leftpad", (size_t)(B > 0 ? B : 1) * 4);
        memcpy(P->leftpad.host, sp->L, (size_t)B * 4);
    }
    p->total_q = total_q;
    p->total_knew = total_new;
    p->q_row_stride = (int64_t)H * D;
    p->q_head_stride = D;
    p->knew_row_stride = p->vnew_row_stride = (int64_t)Hk * D;
    p->knew_head_stride = p->vnew_head_stride = D;
    p->out_row_stride = (int64_t)H * D;
    p->out_head_stride = D;
    p->lse_head_stride = total_q;
    p->lse_row_stride = 1;
    kvt_arr_alloc(P, &P->q, "q", (size_t)total_q * H * D * es);
    kvt_arr_alloc(P, &P->k_new, "k_new", (size_t)total_new * Hk * D * es);
    kvt_arr_alloc(P, &P->v_new, "v_new", (size_t)total_new * Hk * D * es);
    kvt_arr_alloc(P, &P->out, "out", (size_t)total_q * H * D * es);
    kvt_arr_alloc(P, &P->lse, "softmax_lse", (size_t)total_q * H * 4);
    kvt_fill(dt, P->q.host, (int64_t)total_q * H * D, -1, 1);
    kvt_fill(dt, P->k_new.host, (int64_t)total_new * Hk * D, -1, 1);
    kvt_fill(dt, P->v_new.host, (int64_t)total_new * Hk * D, -1, 1);

    size_t cache_elems;
    if (sp->paged) {
        const int ps = sp->page_size;
        int max_pages = (need_max + ps - 1) / ps + (sp->extra_slots > 0 ? sp->extra_slots : 0);
        int used = 0;
        for (int b = 0; b < B; b++) used += (sp->S[b] + sp->n_new[b] + ps - 1) / ps;
        int num_pages = used + sp->extra_pages;
        if (num_pages < 1) num_pages = 1;
        p->page_size = ps;
        p->num_pages = num_pages;
        p->max_pages_per_seq = max_pages;
        p->block_table_batch_stride = max_pages;
        p->k_batch_stride = p->v_batch_stride = (int64_t)ps * Hk * D;
        p->k_row_stride = p->v_row_stride = (int64_t)Hk * D;
        p->k_head_stride = p->v_head_stride = D;
        kvt_arr_alloc(P, &P->block_table, "block_table", (size_t)(B > 0 ? B : 1) * max_pages * 4);
        int32_t *perm = malloc((size_t)num_pages * 4), *bt = P->block_table.host;
        for (int i = 0; i < num_pages; i++) perm[i] = i;
        kvt_shuffle(perm, num_pages);
        int next = 0;
        for (int b = 0; b < B; b++) {
            int np = (sp->S[b] + sp->n_new[b] + ps - 1) / ps;
            for (int s = 0; s < max_pages; s++) bt[(int64_t)b * max_pages + s] = s < np ? perm[next++] : -1;
        }
        free(perm);
        cache_elems = (size_t)num_pages * ps * Hk * D;
    } else {
        int C = sp->capacity > 0 ? sp->capacity : need_max;
        p->cache_batch = B > 0 ? B : 1;
        p->cache_capacity = C;
        p->k_batch_stride = p->v_batch_stride = (int64_t)C * Hk * D;
        p->k_row_stride = p->v_row_stride = (int64_t)Hk * D;
        p->k_head_stride = p->v_head_stride = D;
        cache_elems = (size_t)p->cache_batch * C * Hk * D;
    }
    kvt_arr_alloc(P, &P->k_cache, "k_cache", cache_elems * es);
    kvt_arr_alloc(P, &P->v_cache, "v_cache", cache_elems * es);
    kvt_fill(dt, P->k_cache.host, (int64_t)cache_elems, -1, 1);
    kvt_fill(dt, P->v_cache.host, (int64_t)cache_elems, -1, 1);

    if (sp->rotary_dim > 0) {
        const int half = sp->rotary_dim / 2, max_pos = need_max + 5;
        p->rotary_dim = sp->rotary_dim;
        p->rotary_interleaved = sp->rotary_interleaved;
        p->rotary_max_pos = max_pos;
        p->rotary_dtype = KVATTN_F32;
        kvt_arr_alloc(P, &P->rot_cos, "rotary_cos", (size_t)max_pos * half * 4);
        kvt_arr_alloc(P, &P->rot_sin, "rotary_sin", (size_t)max_pos * half * 4);
        float *c = P->rot_cos.host, *s = P->rot_sin.host;
        for (int pos = 0; pos < max_pos; pos++)
            for (int i = 0; i < half; i++) {
                double th = pos * pow(10000.0, -2.0 * i / sp->rotary_dim);
                c[(size_t)pos * half + i] = (float)cos(th);
                s[(size_t)pos * half + i] = (float)sin(th);
            }
    }
}

/* Device time of one kvattn_forward call is not measured here; this waits for the device and reports the
 * first asynchronous error (an illegal address shows up here). Returns 0 when clean. */
static inline int cu_sync_ok(const char *where) {
#ifdef KVATTN_HAVE_CUDA
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
        kvt_failf("%s: CUDA error %s", where, cudaGetErrorString(e));
        return 1;
    }
#endif
    return 0;
}

#endif
