/* test_cuda_split.c — the automatic split of decode steps whose pieces just miss one wave (v94, forty-first
 * session). The auto chunk (a block's fair share of the KV work) cuts every tile into ceil(tiles / chunk) pieces;
 * when that gives a few more pieces than the blocks the chunk aims at, the scheduler takes the one-wave
 * alternative (each tile one piece fewer: kv_sched_chunk_alt / kv_alt_wins in src/cuda/attn_kernels.cuh).
 * Uniform decode batches whose pieces come out just past 264 (2 decode blocks per SM on a 132-SM H200, D 128) take
 * it there; on another device the same batches check the plain auto split. Each batch (one query per sequence, no
 * append: the early start and its lean plan) is checked against the float64 reference, and its out and lse bits
 * against the same batch with 24 sequences without queries appended (over 64 sequences: the scheduler's general
 * passes), which must choose the same pieces. Paged (page 16) and contiguous caches. */
#include "test_cuda_common.h"

#ifdef KVATTN_HAVE_CUDA
#define EMPTY 24 /* sequences without queries appended: B + EMPTY > 64 (KV_LEAN_SEQS) */

typedef struct shape {
    int B, H, Hk, S;
    const char *what;
} shape;

/* out [total_q, H, D] (bf16) and lse [H, total_q] of the last kvt_problem_run, downloaded */
static void grab(kvt_problem *P, uint16_t **out, float **lse) {
    *out = malloc(P->out.bytes);
    *lse = malloc(P->lse.bytes);
    if (kvt_download(&P->out.dev, *out, P->out.bytes) || kvt_download(&P->lse.dev, *lse, P->lse.bytes))
        kvt_failf("download of out / softmax_lse failed");
}

static void split_case(const shape *sh, int paged) {
    kvt_case_begin("%d x %d keys, H %d / Hk %d, D 128, %s: %s; against the reference, and bits against the same "
                   "batch plus %d empty sequences (general passes)",
                   sh->B, sh->S, sh->H, sh->Hk, paged ? "page 16" : "contiguous", sh->what, EMPTY);
    const int n = sh->B + EMPTY;
    int *nq = calloc((size_t)n, sizeof(int)), *nn = calloc((size_t)n, sizeof(int)), *S = calloc((size_t)n, sizeof(int));
    for (int b = 0; b < sh->B; b++) {
        nq[b] = 1;
        S[b] = sh->S;
    }
    cu_spec sp = cu_spec_default();
    sp.H = sh->H;
    sp.Hk = sh->Hk;
    sp.n_q = nq;
    sp.n_new = nn;
    sp.S = S;
    sp.paged = paged;
    sp.extra_slots = 0;
    sp.causal = 1;
    /* the batch alone (lean plan) */
    sp.B = sh->B;
    kvt_problem P1;
    cu_build(&P1, &sp);
    P1.ph.k_new = P1.ph.v_new = NULL; /* no append: a decode step that starts early */
    P1.ph.cu_seqlens_knew = NULL;
    P1.k_new.used = P1.v_new.used = P1.cu_knew.used = 0;
    uint16_t *o1 = NULL, *o2 = NULL;
    float *l1 = NULL, *l2 = NULL;
    if (kvt_problem_upload(&P1, 1)) kvt_failf("upload failed");
    else if (kvt_problem_run(&P1, kvt_expect_ok())) kvt_failf("unsupported");
    else grab(&P1, &o1, &l1);
    /* the same sequences, caches and queries, then EMPTY sequences without queries */
    sp.B = n;
    kvt_problem P2;
    cu_build(&P2, &sp);
    P2.ph.k_new = P2.ph.v_new = NULL;
    P2.ph.cu_seqlens_knew = NULL;
    P2.k_new.used = P2.v_new.used = P2.cu_knew.used = 0;
    const int total_q = sh->B;
    memcpy(P2.q.host, P1.q.host, (size_t)total_q * sh->H * 128 * 2);
    if (paged) { /* the first B sequences' tables, and the pool (same sizes: the empty ones own no pages) */
        const int mp1 = P1.ph.max_pages_per_seq, mp2 = P2.ph.max_pages_per_seq;
        int32_t *t1 = P1.block_table.host, *t2 = P2.block_table.host;
        for (int b = 0; b < sh->B; b++)
            for (int s = 0; s < mp2; s++) t2[(size_t)b * mp2 + s] = s < mp1 ? t1[(size_t)b * mp1 + s] : -1;
    }
    if (P2.k_cache.bytes < P1.k_cache.bytes) {
        kvt_failf("test setup: cache of %zu bytes for %zu", P2.k_cache.bytes, P1.k_cache.bytes);
    } else {
        memcpy(P2.k_cache.host, P1.k_cache.host, P1.k_cache.bytes);
        memcpy(P2.v_cache.host, P1.v_cache.host, P1.v_cache.bytes);
        if (kvt_problem_upload(&P2, 1)) kvt_failf("upload failed");
        else if (kvt_problem_run(&P2, kvt_expect_ok())) kvt_failf("unsupported");
        else grab(&P2, &o2, &l2);
    }
    if (o1 && o2) {
        if (memcmp(o1, o2, (size_t)total_q * sh->H * 128 * 2)) kvt_failf("out bits differ between the two plans");
        for (int h = 0; h < sh->H; h++) /* lse [H, total_q]: the second has total_q rows too (empty: no rows) */
            if (memcmp(l1 + (size_t)h * total_q, l2 + (size_t)h * total_q, (size_t)total_q * 4)) {
                kvt_failf("lse bits of head %d differ between the two plans", h);
                break;
            }
    }
    free(o1); free(o2); free(l1); free(l2);
    kvt_problem_free(&P1);
    kvt_problem_free(&P2);
    free(nq); free(nn); free(S);
    kvt_case_end();
}
#endif

int main(void) {
    kvt_init("test_cuda_split");
    if (!cu_gpu_or_skip(6)) return kvt_finish();
#ifdef KVATTN_HAVE_CUDA
    /* on the H200 (264 blocks): 45 x 2 tiles of 36 KV tiles at chunk 16 are 270 pieces of 12, the alternative 180
     * of 18; 34 x 4 tiles of 20 at chunk 16 are 272 pieces of 10, the alternative 136 whole tiles; 40 x 2 tiles of
     * 32 at chunk 16 are 160 pieces (one wave already: the alternative is not taken) */
    static const shape shapes[3] = {{45, 8, 2, 2304, "3 pieces -> 2 per tile"},
                                    {34, 16, 4, 1280, "2 pieces -> 1 per tile"},
                                    {40, 8, 2, 2048, "one wave already (2 pieces)"}};
    for (int i = 0; i < 3; i++)
        for (int paged = 1; paged >= 0; paged--) split_case(&shapes[i], paged);
#endif
    return kvt_finish();
}
