/* pages.c — the host-side page manager for inflight batching (kvattn_pages_* in kvattn.h): a pool of pages,
 * a LIFO free list, per-sequence page lists and per-page reference counts for shared prefixes. It only does
 * bookkeeping; it never touches cache data. Every failing call returns an error and changes nothing.
 *
 * Invariant that makes sharing safe: a page with refcount > 1 is full in every sequence that holds it (fork
 * shares only whole pages inside the parent's length), appending only ever adds positions >= a sequence's
 * length, and truncation refuses to end a sequence inside a page it shares. So an append takes either its own
 * partially filled last page or fresh pages. (The pool counts appended
 * tokens before kvattn_forward writes them: a fork must share only written tokens, as kvattn.h says.) */
#include "internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct kv_page_seq {
    int32_t active;    /* 1 while the id is in use */
    int32_t length;    /* tokens counted as appended */
    int32_t num_pages; /* entries of pages[] in use: ceil(length / page_size) */
    int32_t capacity;  /* allocated entries of pages[] */
    int32_t *pages;
} kv_page_seq;

struct kvattn_pages {
    int32_t num_pages;
    int32_t page_size;
    int32_t *refcount;  /* [num_pages]: sequences holding the page; 0 = on the free list */
    int32_t *free_list; /* [num_pages]: a stack, free_list[0..num_free) */
    int32_t num_free;
    kv_page_seq *seqs; /* [num_seqs] ids 0..num_seqs-1, active or not */
    int32_t num_seqs;
    int32_t seqs_capacity;
    int32_t *free_ids; /* released ids, a stack (reused before new ids are made) */
    int32_t num_free_ids;
};

/* Whether the int32 ranges [a, a + na) and [b, b + nb) share an element (empty ranges share none). */
static int kv_ranges_overlap(const int32_t *a, int64_t na, const int32_t *b, int64_t nb) {
    const uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return na > 0 && nb > 0 && a0 < b0 + (uintptr_t)nb * sizeof(int32_t) && b0 < a0 + (uintptr_t)na * sizeof(int32_t);
}

static int64_t pages_for(int64_t tokens, int32_t page_size) { return (tokens + page_size - 1) / page_size; }

static const kv_page_seq *find_seq(const kvattn_pages *pool, int32_t seq_id) {
    if (!pool || seq_id < 0 || seq_id >= pool->num_seqs || !pool->seqs[seq_id].active) return NULL;
    return &pool->seqs[seq_id];
}

/* Grows seq->pages to hold at least `need` entries. Returns KVATTN_OK or KVATTN_ERR_OUT_OF_MEMORY; a larger
 * allocation is not a visible change, so callers may call it before their last check. */
static int reserve_pages(kv_page_seq *seq, int32_t need, const char *fn) {
    if (need <= seq->capacity) return KVATTN_OK;
    int64_t cap = seq->capacity > 0 ? seq->capacity : 4;
    while (cap < need) cap *= 2;
    if (cap > INT32_MAX) cap = INT32_MAX;
    int32_t *grown = (int32_t *)realloc(seq->pages, (size_t)cap * sizeof(int32_t));
    RETURN_IF(!grown, KVATTN_ERR_OUT_OF_MEMORY, "%s: could not allocate a page list of %lld entries", fn,
              (long long)cap);
    seq->pages = grown;
    seq->capacity = (int32_t)cap;
    return KVATTN_OK;
}

/* Makes sure a new id can be handed out without a failing allocation afterwards. */
static int reserve_seq_slot(kvattn_pages *pool, const char *fn) {
    if (pool->num_free_ids > 0 || pool->num_seqs < pool->seqs_capacity) return KVATTN_OK;
    RETURN_IF(pool->num_seqs == INT32_MAX, KVATTN_ERR_OUT_OF_MEMORY, "%s: too many sequences (%d)", fn,
              pool->num_seqs);
    int64_t cap = pool->seqs_capacity > 0 ? 2 * (int64_t)pool->seqs_capacity : 16;
    if (cap > INT32_MAX) cap = INT32_MAX;
    kv_page_seq *seqs = (kv_page_seq *)realloc(pool->seqs, (size_t)cap * sizeof(kv_page_seq));
    RETURN_IF(!seqs, KVATTN_ERR_OUT_OF_MEMORY, "%s: could not allocate %lld sequence records", fn, (long long)cap);
    pool->seqs = seqs;
    memset(seqs + pool->seqs_capacity, 0, (size_t)(cap - pool->seqs_capacity) * sizeof(kv_page_seq));
    int32_t *ids = (int32_t *)realloc(pool->free_ids, (size_t)cap * sizeof(int32_t));
    RETURN_IF(!ids, KVATTN_ERR_OUT_OF_MEMORY, "%s: could not allocate %lld sequence ids", fn, (long long)cap);
    pool->free_ids = ids;
    pool->seqs_capacity = (int32_t)cap;
    return KVATTN_OK;
}

/* Hands out an id; reserve_seq_slot must have succeeded. The record comes back empty and active (it keeps
 * its page-list allocation from an earlier life). */
static int32_t take_seq_id(kvattn_pages *pool) {
    int32_t id;
    if (pool->num_free_ids > 0)
        id = pool->free_ids[--pool->num_free_ids];
    else
        id = pool->num_seqs++; /* records past num_seqs are zeroed when the array grows */
    kv_page_seq *seq = &pool->seqs[id];
    seq->active = 1;
    seq->length = 0;
    seq->num_pages = 0;
    return id;
}

/* Drops seq's pages from index keep on: each page nobody else holds goes back to the free list, in reverse so that a
 * LIFO free list hands them out again in the same order. */
static void drop_pages(kvattn_pages *pool, kv_page_seq *seq, int32_t keep) {
    for (int32_t i = seq->num_pages - 1; i >= keep; i--) {
        int32_t page = seq->pages[i];
        if (--pool->refcount[page] == 0) pool->free_list[pool->num_free++] = page;
    }
    seq->num_pages = keep;
}

int kvattn_pages_create(kvattn_pages **out, int32_t num_pages, int32_t page_size) {
    kv_clear_error();
    RETURN_IF(!out, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_create: out is NULL");
    *out = NULL;
    RETURN_IF(num_pages < 0, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_create: num_pages=%d must be >= 0",
              num_pages);
    RETURN_IF(page_size < 1, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_create: page_size=%d must be >= 1",
              page_size);
    kvattn_pages *pool = (kvattn_pages *)calloc(1, sizeof(kvattn_pages));
    RETURN_IF(!pool, KVATTN_ERR_OUT_OF_MEMORY, "kvattn_pages_create: could not allocate the pool");
    size_t n = num_pages > 0 ? (size_t)num_pages : 1;
    pool->refcount = (int32_t *)calloc(n, sizeof(int32_t));
    pool->free_list = (int32_t *)malloc(n * sizeof(int32_t));
    if (!pool->refcount || !pool->free_list) {
        kvattn_pages_destroy(pool);
        return kv_set_error(KVATTN_ERR_OUT_OF_MEMORY, "kvattn_pages_create: could not allocate %d pages", num_pages);
    }
    pool->num_pages = num_pages;
    pool->page_size = page_size;
    /* stack top is free_list[num_free - 1]: push in reverse so that page 0 is taken first */
    for (int32_t i = 0; i < num_pages; i++) pool->free_list[i] = num_pages - 1 - i;
    pool->num_free = num_pages;
    *out = pool;
    return KVATTN_OK;
}

void kvattn_pages_destroy(kvattn_pages *pool) {
    if (!pool) return;
    for (int32_t i = 0; i < pool->seqs_capacity; i++) free(pool->seqs[i].pages);
    free(pool->seqs);
    free(pool->free_ids);
    free(pool->refcount);
    free(pool->free_list);
    free(pool);
}

int kvattn_pages_add_seq(kvattn_pages *pool, int32_t *seq_id) {
    kv_clear_error();
    RETURN_IF(!pool, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_add_seq: pool is NULL");
    RETURN_IF(!seq_id, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_add_seq: seq_id is NULL");
    int st = reserve_seq_slot(pool, "kvattn_pages_add_seq");
    if (st != KVATTN_OK) return st;
    *seq_id = take_seq_id(pool);
    return KVATTN_OK;
}

int kvattn_pages_fork(kvattn_pages *pool, int32_t parent, int32_t n_tokens, int32_t *seq_id) {
    kv_clear_error();
    RETURN_IF(!pool, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_fork: pool is NULL");
    RETURN_IF(!seq_id, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_fork: seq_id is NULL");
    const kv_page_seq *par = find_seq(pool, parent);
    RETURN_IF(!par, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_fork: parent=%d is not a live sequence", parent);
    RETURN_IF(n_tokens < 0 || n_tokens > par->length, KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_fork: n_tokens=%d must be in [0, %d] (the length of parent=%d)", n_tokens, par->length,
              parent);
    /* Only whole pages can be shared: a partial page would be written by both sequences. */
    RETURN_IF(n_tokens % pool->page_size != 0, KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_fork: n_tokens=%d must be a multiple of page_size=%d", n_tokens, pool->page_size);
    int32_t shared = n_tokens / pool->page_size;

    int st = reserve_seq_slot(pool, "kvattn_pages_fork");
    if (st != KVATTN_OK) return st;
    /* reserve_seq_slot may move pool->seqs: look the parent up again; the child's list is grown before the id
     * is handed out so that a failed allocation changes nothing */
    int32_t id_peek = pool->num_free_ids > 0 ? pool->free_ids[pool->num_free_ids - 1] : pool->num_seqs;
    st = reserve_pages(&pool->seqs[id_peek], shared, "kvattn_pages_fork");
    if (st != KVATTN_OK) return st;
    int32_t id = take_seq_id(pool);
    kv_page_seq *child = &pool->seqs[id];
    par = &pool->seqs[parent];
    for (int32_t i = 0; i < shared; i++) {
        child->pages[i] = par->pages[i];
        pool->refcount[par->pages[i]]++;
    }
    child->num_pages = shared;
    child->length = n_tokens;
    *seq_id = id;
    return KVATTN_OK;
}

int kvattn_pages_append(kvattn_pages *pool, int32_t seq_id, int32_t n_tokens) {
    kv_clear_error();
    RETURN_IF(!pool, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_append: pool is NULL");
    RETURN_IF(!find_seq(pool, seq_id), KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_append: seq_id=%d is not a live sequence", seq_id);
    RETURN_IF(n_tokens < 0, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_append: n_tokens=%d must be >= 0", n_tokens);
    kv_page_seq *seq = &pool->seqs[seq_id];
    RETURN_IF((int64_t)seq->length + n_tokens > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_append: length %d + n_tokens=%d of seq_id=%d overflows int32", seq->length, n_tokens,
              seq_id);
    int32_t new_length = seq->length + n_tokens;
    int32_t total = (int32_t)pages_for(new_length, pool->page_size);
    int32_t needed = total - seq->num_pages;
    /* the tokens from `length` on go into the partial last page (if any) and then fresh pages: that last page
     * must be exclusively ours (see the invariant at the top) */
    if (n_tokens > 0 && seq->length % pool->page_size != 0) {
        int32_t last = seq->pages[seq->num_pages - 1];
        RETURN_IF(pool->refcount[last] != 1, KVATTN_ERR_INTERNAL,
                  "kvattn_pages_append: partial last page %d of seq_id=%d is shared (refcount %d)", last, seq_id,
                  pool->refcount[last]);
    }
    RETURN_IF(needed > pool->num_free, KVATTN_ERR_OUT_OF_PAGES,
              "kvattn_pages_append: seq_id=%d needs %d more pages for n_tokens=%d but only %d of %d are free "
              "(page_size=%d)",
              seq_id, needed, n_tokens, pool->num_free, pool->num_pages, pool->page_size);
    int st = reserve_pages(seq, total, "kvattn_pages_append");
    if (st != KVATTN_OK) return st;
    for (int32_t i = 0; i < needed; i++) {
        int32_t page = pool->free_list[--pool->num_free];
        pool->refcount[page] = 1;
        seq->pages[seq->num_pages++] = page;
    }
    seq->length = new_length;
    return KVATTN_OK;
}

int kvattn_pages_truncate(kvattn_pages *pool, int32_t seq_id, int32_t n_tokens) {
    kv_clear_error();
    RETURN_IF(!pool, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_truncate: pool is NULL");
    RETURN_IF(!find_seq(pool, seq_id), KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_truncate: seq_id=%d is not a live sequence", seq_id);
    kv_page_seq *seq = &pool->seqs[seq_id];
    RETURN_IF(n_tokens < 0 || n_tokens > seq->length, KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_truncate: n_tokens=%d must be in [0, %d] (the length of seq_id=%d)", n_tokens, seq->length,
              seq_id);
    int32_t keep = (int32_t)pages_for(n_tokens, pool->page_size);
    /* the invariant at the top: a kept page that becomes partial must be ours alone, since the next append writes
     * into it (a page shared by a fork is full in every holder, and stays so) */
    if (n_tokens % pool->page_size != 0) {
        int32_t last = seq->pages[keep - 1];
        RETURN_IF(pool->refcount[last] != 1, KVATTN_ERR_INVALID_ARGUMENT,
                  "kvattn_pages_truncate: n_tokens=%d would end seq_id=%d inside page %d, which %d other sequence(s) "
                  "share (forked); truncate to a multiple of page_size=%d (%d) and append the rest again",
                  n_tokens, seq_id, last, pool->refcount[last] - 1, pool->page_size,
                  n_tokens / pool->page_size * pool->page_size);
    }
    drop_pages(pool, seq, keep);
    seq->length = n_tokens;
    return KVATTN_OK;
}

int kvattn_pages_release(kvattn_pages *pool, int32_t seq_id) {
    kv_clear_error();
    RETURN_IF(!pool, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_release: pool is NULL");
    RETURN_IF(!find_seq(pool, seq_id), KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_release: seq_id=%d is not a live sequence", seq_id);
    kv_page_seq *seq = &pool->seqs[seq_id];
    drop_pages(pool, seq, 0);
    seq->active = 0;
    seq->length = 0;
    pool->free_ids[pool->num_free_ids++] = seq_id; /* capacity == seqs_capacity >= num_seqs */
    return KVATTN_OK;
}

int kvattn_pages_fill(const kvattn_pages *pool, const int32_t *seq_ids, int32_t n, const int32_t *pending,
                      int32_t *block_table, int64_t block_table_stride, int32_t max_pages_per_seq,
                      int32_t *cache_seqlens) {
    kv_clear_error();
    RETURN_IF(!pool, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_fill: pool is NULL");
    RETURN_IF(n < 0, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_fill: n=%d must be >= 0", n);
    if (n == 0) return KVATTN_OK;
    RETURN_IF(!seq_ids, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_fill: seq_ids is NULL (n=%d)", n);
    RETURN_IF(!block_table, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_fill: block_table is NULL (n=%d)", n);
    RETURN_IF(!cache_seqlens, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_fill: cache_seqlens is NULL (n=%d)", n);
    RETURN_IF(max_pages_per_seq < 0, KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_fill: max_pages_per_seq=%d must be >= 0", max_pages_per_seq);
    RETURN_IF(n > 1 && block_table_stride < max_pages_per_seq, KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_fill: block_table_stride=%lld must be >= max_pages_per_seq=%d (rows would overlap)",
              (long long)block_table_stride, max_pages_per_seq);
    /* the rows' byte offsets must fit int64 (a wrapped offset would write one row over another) */
    RETURN_IF(n > 1 && block_table_stride > (INT64_MAX / (int64_t)sizeof(int32_t) - max_pages_per_seq) / (n - 1),
              KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_fill: block_table_stride=%lld overflows int64 byte offsets over n=%d rows",
              (long long)block_table_stride, n);
    /* The inputs are read again while the rows are written: none may lie in memory this call writes. */
    const int64_t table_elems =
        max_pages_per_seq == 0 ? 0 : (int64_t)(n - 1) * block_table_stride + max_pages_per_seq;
    const char *in_name[2] = {"seq_ids", "pending"}, *out_name[2] = {"block_table", "cache_seqlens"};
    const int32_t *in[2] = {seq_ids, pending}, *out[2] = {block_table, cache_seqlens};
    const int64_t out_elems[2] = {table_elems, n};
    for (int i = 0; i < 2; i++)
        for (int o = 0; o < 2; o++)
            RETURN_IF(in[i] && kv_ranges_overlap(in[i], n, out[o], out_elems[o]), KVATTN_ERR_INVALID_ARGUMENT,
                      "kvattn_pages_fill: %s overlaps %s, which this call writes", in_name[i], out_name[o]);
    RETURN_IF(kv_ranges_overlap(block_table, table_elems, cache_seqlens, n), KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_fill: block_table and cache_seqlens overlap");
    for (int32_t b = 0; b < n; b++) {
        const kv_page_seq *seq = find_seq(pool, seq_ids[b]);
        RETURN_IF(!seq, KVATTN_ERR_INVALID_ARGUMENT, "kvattn_pages_fill: seq_ids[%d]=%d is not a live sequence", b,
                  seq_ids[b]);
        RETURN_IF(seq->num_pages > max_pages_per_seq, KVATTN_ERR_INVALID_ARGUMENT,
                  "kvattn_pages_fill: seq_ids[%d]=%d has %d pages, more than max_pages_per_seq=%d", b, seq_ids[b],
                  seq->num_pages, max_pages_per_seq);
        int32_t pend = pending ? pending[b] : 0;
        RETURN_IF(pend < 0 || pend > seq->length, KVATTN_ERR_INVALID_ARGUMENT,
                  "kvattn_pages_fill: pending[%d]=%d must be in [0, %d] (the length of seq_ids[%d]=%d)", b, pend,
                  seq->length, b, seq_ids[b]);
    }
    for (int32_t b = 0; b < n; b++) {
        const kv_page_seq *seq = &pool->seqs[seq_ids[b]];
        int32_t *row = block_table + (int64_t)b * block_table_stride;
        for (int32_t i = 0; i < max_pages_per_seq; i++) row[i] = i < seq->num_pages ? seq->pages[i] : -1;
        cache_seqlens[b] = seq->length - (pending ? pending[b] : 0);
    }
    return KVATTN_OK;
}

int32_t kvattn_pages_free_count(const kvattn_pages *pool) { return pool ? pool->num_free : -1; }

int32_t kvattn_pages_used_count(const kvattn_pages *pool) { return pool ? pool->num_pages - pool->num_free : -1; }

int32_t kvattn_pages_seq_len(const kvattn_pages *pool, int32_t seq_id) {
    const kv_page_seq *seq = find_seq(pool, seq_id);
    return seq ? seq->length : -1;
}

int32_t kvattn_pages_seq_num_pages(const kvattn_pages *pool, int32_t seq_id) {
    const kv_page_seq *seq = find_seq(pool, seq_id);
    return seq ? seq->num_pages : -1;
}
