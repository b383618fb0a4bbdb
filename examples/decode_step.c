/* decode_step.c — the README's example: one decode step of a GQA model over a paged bf16 cache (page 16), with
 * the page manager doing the bookkeeping. Runs on the CPU backend (host memory); for CUDA the same params take
 * device pointers, a workspace of kvattn_workspace_size() bytes and a stream. Built and run by `make test`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvattn.h"

enum { B = 3, H = 8, HK = 2, D = 64, PAGE = 16, NUM_PAGES = 64, MAX_PAGES = 16 };

static uint16_t bf16_of(float x) { uint32_t u; memcpy(&u, &x, 4); return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); }
static void fill(uint16_t *a, size_t n) { for (size_t i = 0; i < n; i++) a[i] = bf16_of((float)rand() / RAND_MAX - 0.5f); }

/* every kvattn call returns a status; a failing one has changed nothing and kvattn_last_error() names the cause */
#define TRY(call)                                                                                            \
    do {                                                                                                     \
        int st_ = (call);                                                                                    \
        if (st_ != KVATTN_OK) {                                                                              \
            fprintf(stderr, "%s: %s: %s\n", #call, kvattn_status_string(st_), kvattn_last_error());          \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

int main(void) {
    /* caches [num_pages, page_size, Hk, D]; the prompt tokens were appended earlier (here: random contents) */
    size_t cache_elems = (size_t)NUM_PAGES * PAGE * HK * D;
    uint16_t *k_cache = malloc(cache_elems * 2), *v_cache = malloc(cache_elems * 2);
    uint16_t *q = malloc(B * H * D * 2), *k_new = malloc(B * HK * D * 2), *v_new = malloc(B * HK * D * 2);
    uint16_t *out = malloc(B * H * D * 2);
    fill(k_cache, cache_elems); fill(v_cache, cache_elems);
    fill(q, B * H * D); fill(k_new, B * HK * D); fill(v_new, B * HK * D);

    /* three live sequences of 40, 7 and 100 tokens; this step appends one token to each */
    kvattn_pages *pool;
    int32_t seq[B], prompt_len[B] = {40, 7, 100}, pending[B] = {1, 1, 1};
    int32_t block_table[B * MAX_PAGES], cache_seqlens[B], cu_seqlens[B + 1] = {0, 1, 2, 3};
    TRY(kvattn_pages_create(&pool, NUM_PAGES, PAGE));
    for (int b = 0; b < B; b++) {
        TRY(kvattn_pages_add_seq(pool, &seq[b]));
        TRY(kvattn_pages_append(pool, seq[b], prompt_len[b])); /* the prompt (already in the cache) */
        TRY(kvattn_pages_append(pool, seq[b], 1));             /* room for this step's token (or OUT_OF_PAGES) */
    }
    TRY(kvattn_pages_fill(pool, seq, B, pending, block_table, MAX_PAGES, MAX_PAGES, cache_seqlens));

    /* every tensor here is packed in its documented shape, so no stride is set (the defaults are
     * KVATTN_STRIDE_PACKED); a strided view sets its *_stride fields in elements */
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_BF16; p.batch = B; p.num_heads = H; p.num_kv_heads = HK; p.head_dim = D;
    p.q = q; p.cu_seqlens_q = cu_seqlens; p.total_q = B;                 /* varlen: one query each */
    p.k_new = k_new; p.v_new = v_new; p.cu_seqlens_knew = cu_seqlens; p.total_knew = B;
    p.k_cache = k_cache; p.v_cache = v_cache;                            /* paged [pages, PAGE, Hk, D] */
    p.block_table = block_table; p.max_pages_per_seq = MAX_PAGES;      /* [B, MAX_PAGES] */
    p.num_pages = NUM_PAGES; p.page_size = PAGE; p.cache_seqlens = cache_seqlens;
    p.causal = 1;
    p.out = out;

    TRY(kvattn_forward(&p, KVATTN_BACKEND_CPU, NULL, 0, NULL));
    printf("decode step done: kvattn %s, %d pages in use, out[0][0][0..3] =", kvattn_version_string(),
           kvattn_pages_used_count(pool));
    for (int c = 0; c < 4; c++) { uint32_t u = (uint32_t)out[c] << 16; float f; memcpy(&f, &u, 4); printf(" %.4f", f); }
    printf("\n");

    /* a bad argument is rejected before any work, with a message naming it */
    p.page_size = 0;
    int status = kvattn_forward(&p, KVATTN_BACKEND_CPU, NULL, 0, NULL);
    printf("with page_size=0: %s: %s\n", kvattn_status_string(status), kvattn_last_error());

    kvattn_pages_destroy(pool);
    free(k_cache); free(v_cache); free(q); free(k_new); free(v_new); free(out);
    return status == KVATTN_ERR_INVALID_ARGUMENT ? 0 : 1;
}
