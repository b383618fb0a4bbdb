/* test_cuda_split.c — the automatic split of decode steps whose pieces just miss one wave (v94, forty-first
 * session). The auto chunk (a block's fair share of the KV work) cuts every tile into ceil(tiles / chunk) pieces;
 * when that gives a few more pieces than the blocks the chunk aims at, the scheduler takes the one-wave
 * alternative (each tile one piece fewer: kv_sched_chunk_alt / kv_alt_wins in src/cuda/attn_kernels.cuh).
 * Uniform decode batches whose pieces come out just past 264 (2 decode blocks per SM on a 132-SM H200, D 128) take
 * it there; on another device the same batches check the plain auto split. Each batch (one query per sequence, no
 * append unless said: the early start and its lean plan) is checked against the float64 reference, and its out and lse bits
 * against the same batch with at least 24 sequences without queries appended (over 64 sequences: the general
 * passes), which must choose the same pieces. Paged (page 16) and contiguous caches.
 * The stream-K cut (v95, forty-second session): a decode-only batch planned by the lean plan whose chunk (the
 * batch's KV tiles laid end to end, one share per block of a kv head) is at most 70% of the c1 / c2 split's longest
 * piece is cut at that chunk's multiples by the scheduler (the decode blocks then start from its lists), so its
 * pieces start and end inside tiles at other places than the general passes' (which keep c1 / c2); those batches
 * are checked against the reference and for the same bits in a second call (determinism), uniform, ragged and with
 * a sliding window (key ranges that start inside a KV tile). The shapes are chosen for the H200's 132 SMs; on
 * another device they check whichever split it takes against the reference. */
#include "test_cuda_common.h"

typedef struct shape {
    int B, H, Hk, S;
    const char *what;
    int sk;     /* the stream-K cut on the H200: compare with a second call, not with the general passes */
    int spread; /* ragged: sequence b holds S + (b * 193) % spread keys */
    int window; /* window_left (0: none) */
    int append; /* stream-K cases: 1 new key per sequence appended in the call (2: with rotary, head dim 128) */
} shape;

#ifdef KVATTN_HAVE_CUDA
/* sequences without queries appended: at least 24, and B + them > 64 (KV_LEAN_SEQS: past it the general passes) */
#define EMPTY(B) ((B) + 24 > 64 ? 24 : 65 - (B))

/* out [total_q, H, D] (bf16) and lse [H, total_q] of the last kvt_problem_run, downloaded */
static void grab(kvt_problem *P, uint16_t **out, float **lse) {
    *out = malloc(P->out.bytes);
    *lse = malloc(P->lse.bytes);
    if (kvt_download(&P->out.dev, *out, P->out.bytes) || kvt_download(&P->lse.dev, *lse, P->lse.bytes))
        kvt_failf("download of out / softmax_lse failed");
}

static void split_case(const shape *sh, int paged) {
    if (sh->sk)
        kvt_case_begin("%d x %d(+%d) keys, H %d / Hk %d, D 128, window %d, append %d, %s: %s; against the reference, "
                       "and bits against a second call",
                       sh->B, sh->S, sh->spread, sh->H, sh->Hk, sh->window, sh->append, paged ? "page 16" : "contiguous",
                       sh->what);
    else
        kvt_case_begin("%d x %d keys, H %d / Hk %d, D 128, %s: %s; against the reference, and bits against the same "
                       "batch plus %d empty sequences (general passes)",
                       sh->B, sh->S, sh->H, sh->Hk, paged ? "page 16" : "contiguous", sh->what, EMPTY(sh->B));
    const int n = sh->B + EMPTY(sh->B);
    int *nq = calloc((size_t)n, sizeof(int)), *nn = calloc((size_t)n, sizeof(int)), *S = calloc((size_t)n, sizeof(int));
    for (int b = 0; b < sh->B; b++) {
        nq[b] = 1;
        nn[b] = sh->append ? 1 : 0;
        S[b] = sh->S + (sh->spread ? (b * 193) % sh->spread : 0);
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
    if (sh->append == 2) sp.rotary_dim = 128;
    /* the batch alone (lean plan) */
    sp.B = sh->B;
    kvt_problem P1;
    cu_build(&P1, &sp);
    if (!sh->append) {
        P1.ph.k_new = P1.ph.v_new = NULL; /* no append: a decode step that starts early */
        P1.ph.cu_seqlens_knew = NULL;
        P1.k_new.used = P1.v_new.used = P1.cu_knew.used = 0;
    }
    if (sh->window) P1.ph.window_left = sh->window;
    uint16_t *o1 = NULL, *o2 = NULL;
    float *l1 = NULL, *l2 = NULL;
    if (kvt_problem_upload(&P1, 1)) kvt_failf("upload failed");
    else if (kvt_problem_run(&P1, kvt_expect_ok())) kvt_failf("unsupported");
    else grab(&P1, &o1, &l1);
    if (sh->sk) { /* determinism: a second call (fresh poison) gives the same bits */
        /* re-upload (out and lse poisoned again, the caches as the first call left them), with or without an append:
         * without the poison, a second call that wrote nothing would leave the first call's bits to compare equal
         * and pass kvt_problem_run's "every element written" check */
        if (o1 && kvt_problem_upload(&P1, 1)) kvt_failf("upload failed");
        else if (o1 && kvt_problem_run(&P1, kvt_expect_ok())) kvt_failf("second call failed");
        else if (o1) grab(&P1, &o2, &l2);
        if (o1 && o2) {
            if (memcmp(o1, o2, (size_t)sh->B * sh->H * 128 * 2)) kvt_failf("out bits differ between two calls");
            if (memcmp(l1, l2, (size_t)sh->B * sh->H * 4)) kvt_failf("lse bits differ between two calls");
        }
        free(o1); free(o2); free(l1); free(l2);
        kvt_problem_free(&P1);
        free(nq); free(nn); free(S);
        kvt_case_end();
        return;
    }
    /* the same sequences, caches and queries, then EMPTY(B) sequences without queries */
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

/* on the H200 (264 blocks; stream-K chunk cs = KV tiles / (264 / Hk), taken at <= 70% of the c1 / c2 split's
 * longest piece):
 * - 45 x 2 tiles of 36 KV tiles at chunk 16 are 270 pieces of 12, the alternative 180 of 18 (cs 16: 89%);
 * - 40 x 2 tiles of 32 at chunk 16 are 160 pieces (one wave already: neither is considered);
 * - 34 x 4 tiles of 20 at chunk 16 are 272 pieces of 10, the alternative 136 whole tiles (cs 16: 80%);
 * - 12 x 8 tiles of 64: c1 288 pieces of 22 / 20, c2 192 of 32 (cs 24: 75%);
 * - stream-K: 20 x 8 tiles of 64 (c2 160 whole tiles, cs 39: 61%; pieces such as 39 25, 14 39 11, 28 36);
 *   the same ragged (64 - 72 KV tiles, cs 42); 20 x 8 tiles with a window of 3001 keys (47 KV tiles from a key
 *   inside a tile: c1 39 from all 64 tiles of a sequence's keys, pieces of 24 and 23, c2 47 is over twice 23,
 *   cs 29 against 46); 36 x 4 ragged (64 - 69, cs 37) and 44 x 4 (cs 43, 176 tiles); 20 x 8 ragged with one
 *   key appended per sequence in the call (the early start of an appending step), plain and with rotary.
 *   (An 18 x 8192 window case before it was not cut: the chunk c1 counts every key of a sequence, 70 tiles,
 *   so its 47-tile windows were one piece each.) */
static const shape shapes[] = {{45, 8, 2, 2304, "3 pieces -> 2 per tile", 0, 0, 0, 0},
                                {40, 8, 2, 2048, "one wave already (2 pieces)", 0, 0, 0, 0},
                                {34, 16, 4, 1280, "2 pieces -> 1 per tile", 0, 0, 0, 0},
                                {12, 32, 8, 4096, "3 pieces -> 2 per tile", 0, 0, 0, 0},
                                {20, 32, 8, 4096, "stream-K, uniform", 1, 0, 0, 0},
                                {20, 32, 8, 4096, "stream-K, ragged", 1, 512, 0, 0},
                                {20, 32, 8, 4096, "stream-K, sliding window", 1, 0, 3001, 0},
                                {36, 16, 4, 4096, "stream-K, ragged, GQA 4", 1, 300, 0, 0},
                                {44, 8, 4, 4096, "stream-K, 176 tiles", 1, 0, 0, 0},
                                {20, 32, 8, 4096, "stream-K, appending", 1, 300, 0, 1},
                                {20, 32, 8, 4096, "stream-K, appending with rotary", 1, 300, 0, 2},
                                /* more than KV_LEAN_SEQS (64) one-query sequences appending early (new rows x kv heads
                                 * <= KV_SCHED_APPEND_UNITS = 1024): the early decode kernels without the lean plan
                                 * (attn.cu launch_decode: kv_attn_kernel<.., EARLY, !SELF, APPEND[, ROPE]>), which no
                                 * other case launches; the second at exactly 1024 units (the workspace's rotated keys
                                 * full). Checked against the reference and for the same bits in a second call. */
                                {96, 8, 2, 1500, "B > 64 appending: early APPEND kernel, general passes", 1, 700, 0, 1},
                                {128, 32, 8, 1000, "B > 64 appending with rotary, 1024 units: early ROPE kernel", 1, 300,
                                 0, 2}};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

int main(void) {
    kvt_init("test_cuda_split");
    if (!cu_gpu_or_skip(2 * NSHAPES)) return kvt_finish(); /* each shape paged and contiguous */
#ifdef KVATTN_HAVE_CUDA
    for (int i = 0; i < NSHAPES; i++)
        for (int paged = 1; paged >= 0; paged--) split_case(&shapes[i], paged);
#endif
    return kvt_finish();
}
