/* test_pages.c — unit tests of the page manager (kvattn_pages_*): bad arguments, exhaustion that changes
 * nothing, release and reuse, fork with shared reference-counted pages, fill with pending tokens, and a
 * randomized stress of thousands of operations checked against a simple model of the pool (fresh on every run;
 * KVATTN_TEST_SEED replays one). */
#include "kvattn.h"
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_passed, g_failed, g_case_failed;

#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            g_case_failed = 1;                                                                               \
            printf("  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                         \
            printf(__VA_ARGS__);                                                                             \
            printf(" (last error: \"%s\")\n", kvattn_last_error());                                          \
        }                                                                                                    \
    } while (0)
#define CHECK_STATUS(call, want)                                                                             \
    do {                                                                                                     \
        int st_ = (call);                                                                                    \
        CHECK(st_ == (want), "%s returned %s, want %s", #call, kvattn_status_string(st_),                    \
              kvattn_status_string(want));                                                                   \
    } while (0)
#define CHECK_ERROR_MENTIONS(word) CHECK(strstr(kvattn_last_error(), (word)) != NULL, "message lacks \"%s\"", (word))

static void run_case(const char *name, void (*fn)(void)) {
    g_case_failed = 0;
    fn();
    if (g_case_failed) {
        g_failed++;
        printf("FAIL %s\n", name);
    } else {
        g_passed++;
        printf("ok   %s\n", name);
    }
}

/* Everything observable about a pool for a set of ids: counts, lengths, page lists. */
#define SNAP_MAX_SEQS 64
#define SNAP_MAX_PAGES 256
typedef struct snapshot {
    int32_t free_count, used_count, n;
    int32_t len[SNAP_MAX_SEQS], npages[SNAP_MAX_SEQS];
    int32_t table[SNAP_MAX_SEQS][SNAP_MAX_PAGES];
} snapshot;

static void take_snapshot(const kvattn_pages *pool, const int32_t *ids, int32_t n, snapshot *s) {
    memset(s, 0, sizeof(*s));
    s->free_count = kvattn_pages_free_count(pool);
    s->used_count = kvattn_pages_used_count(pool);
    s->n = n;
    for (int32_t b = 0; b < n; b++) {
        s->len[b] = kvattn_pages_seq_len(pool, ids[b]);
        s->npages[b] = kvattn_pages_seq_num_pages(pool, ids[b]);
        int32_t seqlen;
        if (s->len[b] >= 0) kvattn_pages_fill(pool, &ids[b], 1, NULL, s->table[b], SNAP_MAX_PAGES, SNAP_MAX_PAGES, &seqlen);
    }
}

static int same_snapshot(const snapshot *a, const snapshot *b) { return memcmp(a, b, sizeof(*a)) == 0; }

/* ---- cases ---------------------------------------------------------------------------------------------- */

static void test_create_bad_args(void) {
    kvattn_pages *pool = (kvattn_pages *)(uintptr_t)1;
    CHECK_STATUS(kvattn_pages_create(NULL, 4, 16), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("out");
    CHECK_STATUS(kvattn_pages_create(&pool, -1, 16), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("num_pages=-1");
    CHECK(pool == NULL, "*out must be NULL after a failure");
    CHECK_STATUS(kvattn_pages_create(&pool, 4, 0), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("page_size=0");
    CHECK(pool == NULL, "*out must be NULL after a failure");
    kvattn_pages_destroy(NULL);
    CHECK(kvattn_pages_free_count(NULL) == -1, "free_count(NULL)");
    CHECK(kvattn_pages_used_count(NULL) == -1, "used_count(NULL)");
    CHECK(kvattn_pages_seq_len(NULL, 0) == -1, "seq_len(NULL)");
    CHECK(kvattn_pages_seq_num_pages(NULL, 0) == -1, "seq_num_pages(NULL)");
    int32_t id;
    CHECK_STATUS(kvattn_pages_add_seq(NULL, &id), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_append(NULL, 0, 1), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_release(NULL, 0), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_fork(NULL, 0, 0, &id), KVATTN_ERR_INVALID_ARGUMENT);
}

static void test_empty_pool(void) {
    kvattn_pages *pool;
    CHECK_STATUS(kvattn_pages_create(&pool, 0, 16), KVATTN_OK);
    int32_t id;
    CHECK_STATUS(kvattn_pages_add_seq(pool, &id), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, id, 0), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, id, 1), KVATTN_ERR_OUT_OF_PAGES);
    CHECK(kvattn_pages_seq_len(pool, id) == 0, "length changed");
    CHECK(kvattn_pages_free_count(pool) == 0 && kvattn_pages_used_count(pool) == 0, "counts");
    kvattn_pages_destroy(pool);
}

static void test_append_counts(void) {
    kvattn_pages *pool;
    CHECK_STATUS(kvattn_pages_create(&pool, 8, 16), KVATTN_OK);
    int32_t id;
    CHECK_STATUS(kvattn_pages_add_seq(pool, &id), KVATTN_OK);
    CHECK(kvattn_pages_seq_len(pool, id) == 0 && kvattn_pages_seq_num_pages(pool, id) == 0, "new seq is empty");
    const int32_t steps[] = {1, 15, 1, 0, 31, 16};
    const int32_t want_len[] = {1, 16, 17, 17, 48, 64};
    const int32_t want_pages[] = {1, 1, 2, 2, 3, 4};
    for (int i = 0; i < 6; i++) {
        CHECK_STATUS(kvattn_pages_append(pool, id, steps[i]), KVATTN_OK);
        CHECK(kvattn_pages_seq_len(pool, id) == want_len[i], "step %d: len %d want %d", i,
              kvattn_pages_seq_len(pool, id), want_len[i]);
        CHECK(kvattn_pages_seq_num_pages(pool, id) == want_pages[i], "step %d: pages %d want %d", i,
              kvattn_pages_seq_num_pages(pool, id), want_pages[i]);
        CHECK(kvattn_pages_used_count(pool) == want_pages[i] && kvattn_pages_free_count(pool) == 8 - want_pages[i],
              "step %d: used %d free %d", i, kvattn_pages_used_count(pool), kvattn_pages_free_count(pool));
    }
    CHECK_STATUS(kvattn_pages_append(pool, id, -1), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("n_tokens=-1");
    CHECK_STATUS(kvattn_pages_append(pool, id, 0x7fffffff), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK(kvattn_pages_seq_len(pool, id) == 64, "a failed append changed the length");
    kvattn_pages_destroy(pool);
}

static void test_exhaustion_changes_nothing(void) {
    kvattn_pages *pool;
    CHECK_STATUS(kvattn_pages_create(&pool, 10, 16), KVATTN_OK);
    int32_t ids[2];
    CHECK_STATUS(kvattn_pages_add_seq(pool, &ids[0]), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_add_seq(pool, &ids[1]), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, ids[0], 100), KVATTN_OK); /* 7 pages */
    CHECK_STATUS(kvattn_pages_append(pool, ids[1], 5), KVATTN_OK);   /* 1 page, 11 tokens of room left */
    snapshot before, after;
    take_snapshot(pool, ids, 2, &before);
    CHECK_STATUS(kvattn_pages_append(pool, ids[1], 5 + 16 * 3), KVATTN_ERR_OUT_OF_PAGES); /* needs 3, 2 free */
    CHECK_ERROR_MENTIONS("needs 3");
    CHECK_ERROR_MENTIONS("only 2");
    take_snapshot(pool, ids, 2, &after);
    CHECK(same_snapshot(&before, &after), "a failed append changed the pool");
    CHECK_STATUS(kvattn_pages_append(pool, ids[0], 1000), KVATTN_ERR_OUT_OF_PAGES);
    take_snapshot(pool, ids, 2, &after);
    CHECK(same_snapshot(&before, &after), "a failed append changed the pool");
    /* exactly what fits still works: 11 tokens in the partial page + 2 fresh pages */
    CHECK_STATUS(kvattn_pages_append(pool, ids[1], 11 + 32), KVATTN_OK);
    CHECK(kvattn_pages_free_count(pool) == 0 && kvattn_pages_used_count(pool) == 10, "pool is full");
    CHECK_STATUS(kvattn_pages_append(pool, ids[1], 1), KVATTN_ERR_OUT_OF_PAGES);
    CHECK_STATUS(kvattn_pages_append(pool, ids[0], 12), KVATTN_OK); /* 100 -> 112 stays in 7 pages */
    CHECK_STATUS(kvattn_pages_append(pool, ids[0], 1), KVATTN_ERR_OUT_OF_PAGES);
    kvattn_pages_destroy(pool);
}

static void test_release_and_reuse(void) {
    kvattn_pages *pool;
    CHECK_STATUS(kvattn_pages_create(&pool, 6, 4), KVATTN_OK);
    int32_t a, b, c;
    CHECK_STATUS(kvattn_pages_add_seq(pool, &a), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_add_seq(pool, &b), KVATTN_OK);
    CHECK(a != b, "ids must differ");
    CHECK_STATUS(kvattn_pages_append(pool, a, 12), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, b, 12), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, b, 1), KVATTN_ERR_OUT_OF_PAGES);
    int32_t pages_a[3], len;
    CHECK_STATUS(kvattn_pages_fill(pool, &a, 1, NULL, pages_a, 3, 3, &len), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_release(pool, a), KVATTN_OK);
    CHECK(kvattn_pages_free_count(pool) == 3 && kvattn_pages_used_count(pool) == 3, "pages of a returned");
    CHECK(kvattn_pages_seq_len(pool, a) == -1 && kvattn_pages_seq_num_pages(pool, a) == -1, "a is gone");
    CHECK_STATUS(kvattn_pages_release(pool, a), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("seq_id=");
    CHECK_STATUS(kvattn_pages_append(pool, a, 1), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_add_seq(pool, &c), KVATTN_OK);
    CHECK(c == a, "the released id %d should be reused, got %d", a, c);
    CHECK_STATUS(kvattn_pages_append(pool, c, 12), KVATTN_OK);
    int32_t pages_c[3];
    CHECK_STATUS(kvattn_pages_fill(pool, &c, 1, NULL, pages_c, 3, 3, &len), KVATTN_OK);
    int reused = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) reused += pages_c[i] == pages_a[j];
    CHECK(reused == 3, "c should get a's freed pages (got %d of them)", reused);
    CHECK_STATUS(kvattn_pages_release(pool, b), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_release(pool, c), KVATTN_OK);
    CHECK(kvattn_pages_free_count(pool) == 6, "all pages back");
    /* bad ids */
    CHECK_STATUS(kvattn_pages_append(pool, -1, 1), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_append(pool, 12345, 1), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("12345");
    CHECK_STATUS(kvattn_pages_release(pool, -7), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK(kvattn_pages_seq_len(pool, 99) == -1, "unknown id");
    CHECK_STATUS(kvattn_pages_add_seq(pool, NULL), KVATTN_ERR_INVALID_ARGUMENT);
    kvattn_pages_destroy(pool);
}

static int count_common(const int32_t *x, int nx, const int32_t *y, int ny) {
    int n = 0;
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++) n += x[i] == y[j];
    return n;
}

static void test_fork_sharing(void) {
    kvattn_pages *pool;
    CHECK_STATUS(kvattn_pages_create(&pool, 16, 16), KVATTN_OK);
    int32_t parent, child, child0, len;
    CHECK_STATUS(kvattn_pages_add_seq(pool, &parent), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, parent, 40), KVATTN_OK); /* 3 pages, last one partial */
    /* bad forks change nothing */
    int32_t id = -5;
    CHECK_STATUS(kvattn_pages_fork(pool, parent, 40, &id), KVATTN_ERR_INVALID_ARGUMENT); /* not a page boundary */
    CHECK_ERROR_MENTIONS("n_tokens=40");
    CHECK_STATUS(kvattn_pages_fork(pool, parent, 48, &id), KVATTN_ERR_INVALID_ARGUMENT); /* past the length */
    CHECK_STATUS(kvattn_pages_fork(pool, parent, -16, &id), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_fork(pool, 77, 0, &id), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("parent=77");
    CHECK_STATUS(kvattn_pages_fork(pool, parent, 0, NULL), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK(id == -5, "a failed fork wrote *seq_id");
    CHECK(kvattn_pages_used_count(pool) == 3, "a failed fork changed the pool");

    CHECK_STATUS(kvattn_pages_fork(pool, parent, 32, &child), KVATTN_OK);
    CHECK(kvattn_pages_seq_len(pool, child) == 32 && kvattn_pages_seq_num_pages(pool, child) == 2, "child shape");
    CHECK(kvattn_pages_used_count(pool) == 3, "fork takes no page");
    CHECK_STATUS(kvattn_pages_fork(pool, parent, 0, &child0), KVATTN_OK);
    CHECK(kvattn_pages_seq_len(pool, child0) == 0 && kvattn_pages_seq_num_pages(pool, child0) == 0, "empty fork");

    int32_t tp[8], tc[8];
    CHECK_STATUS(kvattn_pages_fill(pool, &parent, 1, NULL, tp, 8, 8, &len), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_fill(pool, &child, 1, NULL, tc, 8, 8, &len), KVATTN_OK);
    CHECK(tc[0] == tp[0] && tc[1] == tp[1] && tc[2] == -1, "child shares the first two pages");

    /* the parent's partial last page is its own: appending there takes no page; the child starts a fresh page */
    CHECK_STATUS(kvattn_pages_append(pool, parent, 8), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 3, "parent filled its own page 3");
    CHECK_STATUS(kvattn_pages_append(pool, child, 1), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 4, "child took a fresh page");
    CHECK_STATUS(kvattn_pages_fill(pool, &child, 1, NULL, tc, 8, 8, &len), KVATTN_OK);
    CHECK(count_common(tc + 2, 1, tp, 3) == 0, "the child's third page is not one of the parent's");

    /* fork at the parent's full length when it ends on a page boundary: every page shared, then both diverge */
    int32_t twin;
    CHECK_STATUS(kvattn_pages_fork(pool, parent, 48, &twin), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 4, "fork takes no page");
    CHECK_STATUS(kvattn_pages_append(pool, parent, 1), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, twin, 1), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 6, "both took a fresh page");
    int32_t tt[8];
    CHECK_STATUS(kvattn_pages_fill(pool, &parent, 1, NULL, tp, 8, 8, &len), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_fill(pool, &twin, 1, NULL, tt, 8, 8, &len), KVATTN_OK);
    CHECK(count_common(tp, 3, tt, 3) == 3 && tp[3] != tt[3], "twin shares 3 pages, not the 4th");

    /* a fork of a fork */
    int32_t grandchild;
    CHECK_STATUS(kvattn_pages_fork(pool, twin, 16, &grandchild), KVATTN_OK);

    /* refcounts: releasing holders frees a page only with its last holder */
    CHECK_STATUS(kvattn_pages_release(pool, parent), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 5, "only the parent's own 4th page is freed (used %d)",
          kvattn_pages_used_count(pool));
    CHECK_STATUS(kvattn_pages_release(pool, twin), KVATTN_OK);
    /* left: child (pages 0,1 + own), grandchild (page 0) */
    CHECK(kvattn_pages_used_count(pool) == 3, "used %d want 3", kvattn_pages_used_count(pool));
    CHECK_STATUS(kvattn_pages_release(pool, child), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 1, "used %d want 1", kvattn_pages_used_count(pool));
    CHECK_STATUS(kvattn_pages_release(pool, grandchild), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_release(pool, child0), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 0 && kvattn_pages_free_count(pool) == 16, "all free");
    kvattn_pages_destroy(pool);
}

/* truncate: bad arguments change nothing; pages past the new length return to the pool (with their last holder);
 * a cut inside a page shared by a fork is refused; after a cut the next append refills the kept partial page. */
static void test_truncate(void) {
    kvattn_pages *pool;
    CHECK_STATUS(kvattn_pages_create(&pool, 8, 16), KVATTN_OK);
    int32_t a, child, len, t[8], t2[8];
    CHECK_STATUS(kvattn_pages_add_seq(pool, &a), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, a, 50), KVATTN_OK); /* 4 pages, the last holds 2 tokens */
    CHECK_STATUS(kvattn_pages_fill(pool, &a, 1, NULL, t, 8, 8, &len), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_truncate(pool, a, 51), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("n_tokens=51");
    CHECK_STATUS(kvattn_pages_truncate(pool, a, -1), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_truncate(pool, 9, 0), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("seq_id=9");
    CHECK_STATUS(kvattn_pages_truncate(NULL, a, 0), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK(kvattn_pages_seq_len(pool, a) == 50 && kvattn_pages_used_count(pool) == 4, "a refused cut changed the pool");

    CHECK_STATUS(kvattn_pages_truncate(pool, a, 50), KVATTN_OK); /* no-op */
    CHECK(kvattn_pages_seq_len(pool, a) == 50 && kvattn_pages_used_count(pool) == 4, "truncate to the length");
    CHECK_STATUS(kvattn_pages_truncate(pool, a, 20), KVATTN_OK); /* drops pages 3 and 4, keeps page 2 partial */
    CHECK(kvattn_pages_seq_len(pool, a) == 20 && kvattn_pages_seq_num_pages(pool, a) == 2 &&
              kvattn_pages_used_count(pool) == 2 && kvattn_pages_free_count(pool) == 6,
          "after the cut to 20: len %d pages %d used %d", kvattn_pages_seq_len(pool, a),
          kvattn_pages_seq_num_pages(pool, a), kvattn_pages_used_count(pool));
    CHECK_STATUS(kvattn_pages_fill(pool, &a, 1, NULL, t2, 8, 8, &len), KVATTN_OK);
    CHECK(t2[0] == t[0] && t2[1] == t[1] && t2[2] == -1 && len == 20, "kept pages and length");
    /* the next append fills page 2 first (12 free rows), then takes the freed pages again, in their old order */
    CHECK_STATUS(kvattn_pages_append(pool, a, 30), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_fill(pool, &a, 1, NULL, t2, 8, 8, &len), KVATTN_OK);
    CHECK(len == 50 && t2[1] == t[1] && t2[2] == t[2] && t2[3] == t[3] && t2[4] == -1, "re-append");

    /* with a fork sharing pages 1 and 2 (32 tokens): a cut inside page 2 is refused, at 32 or 16 allowed */
    CHECK_STATUS(kvattn_pages_fork(pool, a, 32, &child), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_truncate(pool, a, 31), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("share");
    CHECK_STATUS(kvattn_pages_truncate(pool, a, 5), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK(kvattn_pages_seq_len(pool, a) == 50 && kvattn_pages_used_count(pool) == 4, "refused cut changed the pool");
    CHECK_STATUS(kvattn_pages_truncate(pool, a, 32), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 2, "pages 3, 4 freed (used %d)", kvattn_pages_used_count(pool));
    CHECK_STATUS(kvattn_pages_truncate(pool, a, 0), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 2 && kvattn_pages_seq_num_pages(pool, a) == 0,
          "shared pages stay with the child (used %d)", kvattn_pages_used_count(pool));
    CHECK_STATUS(kvattn_pages_truncate(pool, child, 17), KVATTN_OK); /* now the child's own: a partial cut is fine */
    CHECK(kvattn_pages_used_count(pool) == 2 && kvattn_pages_seq_len(pool, child) == 17, "child cut");
    CHECK_STATUS(kvattn_pages_append(pool, child, 15), KVATTN_OK);
    CHECK(kvattn_pages_used_count(pool) == 2, "child refilled its page 2 (used %d)", kvattn_pages_used_count(pool));
    CHECK_STATUS(kvattn_pages_release(pool, child), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_release(pool, a), KVATTN_OK);
    CHECK(kvattn_pages_free_count(pool) == 8, "all free");
    kvattn_pages_destroy(pool);
}

static void test_fill(void) {
    kvattn_pages *pool;
    int32_t ids[3];
    CHECK_STATUS(kvattn_pages_create(&pool, 32, 16), KVATTN_OK);
    for (int i = 0; i < 3; i++) CHECK_STATUS(kvattn_pages_add_seq(pool, &ids[i]), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, ids[0], 20), KVATTN_OK); /* 2 pages */
    CHECK_STATUS(kvattn_pages_append(pool, ids[1], 1), KVATTN_OK);  /* 1 page  */
    CHECK_STATUS(kvattn_pages_append(pool, ids[2], 64), KVATTN_OK); /* 4 pages */
    /* this step: seq 0 decodes 1, seq 1 prefills 100, seq 2 verifies 3 */
    CHECK_STATUS(kvattn_pages_append(pool, ids[0], 1), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, ids[1], 100), KVATTN_OK); /* 101 tokens: 7 pages */
    CHECK_STATUS(kvattn_pages_append(pool, ids[2], 3), KVATTN_OK);   /* 67: 5 pages */
    const int32_t pending[3] = {1, 100, 3};
    enum { STRIDE = 10, MAXP = 8 };
    int32_t table[3 * STRIDE], seqlens[3];
    for (int i = 0; i < 3 * STRIDE; i++) table[i] = 12345;
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, pending, table, STRIDE, MAXP, seqlens), KVATTN_OK);
    CHECK(seqlens[0] == 20 && seqlens[1] == 1 && seqlens[2] == 64, "cache_seqlens %d %d %d", seqlens[0], seqlens[1],
          seqlens[2]);
    const int want_pages[3] = {2, 7, 5};
    int32_t all[32], n_all = 0;
    for (int b = 0; b < 3; b++) {
        for (int i = 0; i < MAXP; i++) {
            int32_t v = table[b * STRIDE + i];
            if (i < want_pages[b]) {
                CHECK(v >= 0 && v < 32, "row %d entry %d = %d", b, i, v);
                all[n_all++] = v;
            } else {
                CHECK(v == -1, "row %d unused entry %d = %d, want -1", b, i, v);
            }
        }
        for (int i = MAXP; i < STRIDE; i++) CHECK(table[b * STRIDE + i] == 12345, "row %d padding %d overwritten", b, i);
    }
    for (int i = 0; i < n_all; i++)
        for (int j = i + 1; j < n_all; j++) CHECK(all[i] != all[j], "page %d appears twice", all[i]);

    /* failures write nothing */
    int32_t table2[3 * STRIDE], seqlens2[3];
    for (int i = 0; i < 3 * STRIDE; i++) table2[i] = 777;
    seqlens2[0] = seqlens2[1] = seqlens2[2] = 777;
    const int32_t bad_pending[3] = {1, 102, 3};
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, bad_pending, table2, STRIDE, MAXP, seqlens2),
                 KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("pending[1]=102");
    const int32_t neg_pending[3] = {-1, 0, 0};
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, neg_pending, table2, STRIDE, MAXP, seqlens2),
                 KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, pending, table2, STRIDE, 6, seqlens2), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("max_pages_per_seq=6");
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, pending, table2, 4, MAXP, seqlens2), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("block_table_stride=4");
    /* two rows are enough to overlap: row 1 would overwrite the last entry of row 0 */
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 2, pending, table2, MAXP - 1, MAXP, seqlens2),
                 KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("block_table_stride=7");
    const int32_t bad_ids[3] = {ids[0], 999, ids[2]};
    CHECK_STATUS(kvattn_pages_fill(pool, bad_ids, 3, pending, table2, STRIDE, MAXP, seqlens2),
                 KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("seq_ids[1]=999");
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, pending, NULL, STRIDE, MAXP, seqlens2), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, pending, table2, STRIDE, MAXP, NULL), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_fill(pool, NULL, 3, pending, table2, STRIDE, MAXP, seqlens2), KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(kvattn_pages_fill(pool, ids, -1, pending, table2, STRIDE, MAXP, seqlens2), KVATTN_ERR_INVALID_ARGUMENT);
    /* row offsets that overflow int64 (sixty-first session: the byte offset wrapped, row 1 was written over row 0) */
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, pending, table2, INT64_MAX / 2 + 1, MAXP, seqlens2),
                 KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("overflows");
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 2, pending, table2, (int64_t)1 << 62, MAXP, seqlens2),
                 KVATTN_ERR_INVALID_ARGUMENT);
    CHECK_ERROR_MENTIONS("block_table_stride=4611686018427387904");
    /* inputs in memory the call writes (sixty-first session: seq_ids and pending were read again after rows were
     * written, so seq_ids inside block_table read pool->seqs[-1]). The table spans arena[0, 28). */
    {
        int32_t arena[40], before[40];
        for (int i = 0; i < 40; i++) arena[i] = 777;
        memcpy(arena + 8, ids, sizeof ids);      /* inside the table's span (row 0's padding, row 1) */
        memcpy(arena + 31, pending, sizeof pending);
        memcpy(before, arena, sizeof arena);
        CHECK_STATUS(kvattn_pages_fill(pool, arena + 8, 3, pending, arena, STRIDE, MAXP, arena + 34),
                     KVATTN_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("seq_ids overlaps block_table");
        CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, arena + 31, arena, STRIDE, MAXP, arena + 32),
                     KVATTN_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("pending overlaps cache_seqlens");
        CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, pending, arena, STRIDE, MAXP, arena + 26),
                     KVATTN_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("block_table and cache_seqlens overlap");
        CHECK(memcmp(arena, before, sizeof arena) == 0, "a fill refused for overlap wrote its outputs");
        /* next to each other is fine: ids at [28, 31), pending at [31, 34), cache_seqlens at [34, 37) */
        memcpy(arena + 28, ids, sizeof ids);
        CHECK_STATUS(kvattn_pages_fill(pool, arena + 28, 3, arena + 31, arena, STRIDE, MAXP, arena + 34), KVATTN_OK);
        CHECK(arena[34] == 20 && arena[35] == 1 && arena[36] == 64 && arena[37] == 777, "adjacent arrays: %d %d %d %d",
              arena[34], arena[35], arena[36], arena[37]);
        /* one element of overlap is enough: cache_seqlens starting at seq_ids' last element, seq_ids starting at the
         * last entry the table is written at (row 2, entry MAXP - 1 = arena[27]) */
        for (int i = 0; i < 40; i++) arena[i] = 777;
        memcpy(arena + 30, ids, sizeof ids);
        memcpy(before, arena, sizeof arena);
        CHECK_STATUS(kvattn_pages_fill(pool, arena + 30, 3, pending, table2, STRIDE, MAXP, arena + 32),
                     KVATTN_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("seq_ids overlaps cache_seqlens");
        memcpy(arena + 27, ids, sizeof ids);
        memcpy(before, arena, sizeof arena);
        CHECK_STATUS(kvattn_pages_fill(pool, arena + 27, 3, pending, arena, STRIDE, MAXP, seqlens2),
                     KVATTN_ERR_INVALID_ARGUMENT);
        CHECK_ERROR_MENTIONS("seq_ids overlaps block_table");
        CHECK(memcmp(arena, before, sizeof arena) == 0, "a fill refused for a one-element overlap wrote its outputs");
    }
    int untouched = seqlens2[0] == 777 && seqlens2[1] == 777 && seqlens2[2] == 777;
    for (int i = 0; i < 3 * STRIDE; i++) untouched &= table2[i] == 777;
    CHECK(untouched, "a failing fill wrote its outputs");
    /* n = 0 needs no arrays; pending NULL means 0; pending == length gives an empty cache */
    CHECK_STATUS(kvattn_pages_fill(pool, NULL, 0, NULL, NULL, 0, 0, NULL), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, NULL, table2, STRIDE, MAXP, seqlens2), KVATTN_OK);
    CHECK(seqlens2[0] == 21 && seqlens2[1] == 101 && seqlens2[2] == 67, "pending NULL");
    const int32_t full_pending[3] = {21, 101, 67};
    CHECK_STATUS(kvattn_pages_fill(pool, ids, 3, full_pending, table2, STRIDE, MAXP, seqlens2), KVATTN_OK);
    CHECK(seqlens2[0] == 0 && seqlens2[1] == 0 && seqlens2[2] == 0, "pending == length");
    /* one row with stride 0 is fine */
    CHECK_STATUS(kvattn_pages_fill(pool, &ids[1], 1, NULL, table2, 0, 7, seqlens2), KVATTN_OK);
    kvattn_pages_destroy(pool);
}

static void test_page_size_one(void) {
    kvattn_pages *pool;
    CHECK_STATUS(kvattn_pages_create(&pool, 100, 1), KVATTN_OK);
    int32_t a, b, len;
    CHECK_STATUS(kvattn_pages_add_seq(pool, &a), KVATTN_OK);
    CHECK_STATUS(kvattn_pages_append(pool, a, 37), KVATTN_OK);
    CHECK(kvattn_pages_seq_num_pages(pool, a) == 37, "one page per token");
    CHECK_STATUS(kvattn_pages_fork(pool, a, 37, &b), KVATTN_OK); /* any length is a page boundary */
    CHECK_STATUS(kvattn_pages_append(pool, b, 63), KVATTN_OK);
    CHECK(kvattn_pages_free_count(pool) == 0, "full");
    CHECK_STATUS(kvattn_pages_append(pool, a, 1), KVATTN_ERR_OUT_OF_PAGES);
    int32_t t[100];
    CHECK_STATUS(kvattn_pages_fill(pool, &b, 1, NULL, t, 100, 100, &len), KVATTN_OK);
    CHECK(len == 100, "len %d", len);
    CHECK_STATUS(kvattn_pages_release(pool, a), KVATTN_OK);
    CHECK(kvattn_pages_free_count(pool) == 0, "a's pages are all shared with b");
    CHECK_STATUS(kvattn_pages_release(pool, b), KVATTN_OK);
    CHECK(kvattn_pages_free_count(pool) == 100, "all free");
    kvattn_pages_destroy(pool);
}

/* The id one past the last one handed out is unknown, also when the table of sequences is exactly full (its
 * capacity grows 16, 32, 64: an off-by-one in the id check reads past the table, which ASan reports). */
static void test_unknown_ids_at_the_end(void) {
    kvattn_pages *pool;
    CHECK_STATUS(kvattn_pages_create(&pool, 4, 2), KVATTN_OK);
    for (int32_t n = 1; n <= 40; n++) {
        int32_t id = -1, child = -1;
        CHECK_STATUS(kvattn_pages_add_seq(pool, &id), KVATTN_OK);
        CHECK(id == n - 1, "ids are handed out in order: got %d, want %d", id, n - 1);
        CHECK(kvattn_pages_seq_len(pool, n) == -1 && kvattn_pages_seq_num_pages(pool, n) == -1, "unknown id %d", n);
        CHECK_STATUS(kvattn_pages_append(pool, n, 1), KVATTN_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(kvattn_pages_fork(pool, n, 0, &child), KVATTN_ERR_INVALID_ARGUMENT);
        CHECK_STATUS(kvattn_pages_release(pool, n), KVATTN_ERR_INVALID_ARGUMENT);
        int32_t table[1], len;
        CHECK_STATUS(kvattn_pages_fill(pool, &n, 1, NULL, table, 1, 1, &len), KVATTN_ERR_INVALID_ARGUMENT);
        if (g_case_failed) break;
    }
    CHECK(kvattn_pages_used_count(pool) == 0 && kvattn_pages_free_count(pool) == 4, "no page was taken");
    kvattn_pages_destroy(pool);
}

/* ---- randomized stress against a model ------------------------------------------------------------------
 * The model keeps, per live id, the length and the page list it has observed. After every operation the pool
 * must agree: lengths, page counts ceil(len / page_size), the inherited pages of a fork, no page held twice
 * by one sequence, a page held by several sequences only at the same slot and full in each of them, freshly
 * taken pages previously unused, and free + used == num_pages with used == the number of distinct pages. */
#define ST_SEQS 48
#define ST_NUM_PAGES 96

typedef struct model_seq {
    int live;
    int32_t len, npages;
    int32_t pages[ST_NUM_PAGES];
} model_seq;

static uint64_t g_rng; /* xorshift state, from the run's seed (main) */
static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}
static int32_t rnd_in(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }

static int model_check(const kvattn_pages *pool, const model_seq *m, int32_t page_size, int op) {
    int ok = 1;
    int holders[ST_NUM_PAGES] = {0};
    int used = 0;
    for (int id = 0; id < ST_SEQS; id++) {
        if (!m[id].live) {
            continue;
        }
        const model_seq *s = &m[id];
        int32_t table[ST_NUM_PAGES], len;
        if (kvattn_pages_seq_len(pool, id) != s->len || kvattn_pages_seq_num_pages(pool, id) != s->npages ||
            s->npages != (s->len + page_size - 1) / page_size) {
            printf("  op %d: seq %d len %d/%d pages %d/%d\n", op, id, kvattn_pages_seq_len(pool, id), s->len,
                   kvattn_pages_seq_num_pages(pool, id), s->npages);
            return 0;
        }
        int32_t one = id;
        if (kvattn_pages_fill(pool, &one, 1, NULL, table, ST_NUM_PAGES, ST_NUM_PAGES, &len) != KVATTN_OK) return 0;
        for (int i = 0; i < s->npages; i++) {
            if (table[i] != s->pages[i] || table[i] < 0 || table[i] >= ST_NUM_PAGES) {
                printf("  op %d: seq %d slot %d page %d, model %d\n", op, id, i, table[i], s->pages[i]);
                return 0;
            }
            if (holders[table[i]]++ == 0) used++;
        }
    }
    /* sharing rule: every holder of a page holds it at the same slot, and that slot is full */
    for (int id = 0; id < ST_SEQS && ok; id++) {
        if (!m[id].live) continue;
        for (int i = 0; i < m[id].npages && ok; i++) {
            int32_t page = m[id].pages[i];
            if (holders[page] < 2) continue;
            if ((i + 1) * page_size > m[id].len) {
                printf("  op %d: shared page %d is partial in seq %d\n", op, page, id);
                ok = 0;
            }
            for (int other = 0; other < ST_SEQS && ok; other++) {
                if (!m[other].live || other == id) continue;
                for (int j = 0; j < m[other].npages; j++)
                    if (m[other].pages[j] == page && j != i) {
                        printf("  op %d: page %d at slot %d of seq %d and slot %d of seq %d\n", op, page, i, id, j,
                               other);
                        ok = 0;
                    }
            }
            for (int j = i + 1; j < m[id].npages; j++)
                if (m[id].pages[j] == page) ok = 0;
        }
    }
    if (kvattn_pages_used_count(pool) != used || kvattn_pages_free_count(pool) + used != ST_NUM_PAGES) {
        printf("  op %d: used %d (model %d) free %d\n", op, kvattn_pages_used_count(pool), used,
               kvattn_pages_free_count(pool));
        ok = 0;
    }
    return ok;
}

static void test_stress(void) {
    const int32_t page_sizes[] = {1, 3, 16};
    for (int ps_i = 0; ps_i < 3; ps_i++) {
        int32_t page_size = page_sizes[ps_i];
        kvattn_pages *pool;
        CHECK_STATUS(kvattn_pages_create(&pool, ST_NUM_PAGES, page_size), KVATTN_OK);
        static model_seq m[ST_SEQS];
        memset(m, 0, sizeof(m));
        int n_ok = 0, n_oop = 0, n_fork = 0, n_trunc = 0, n_trunc_shared = 0;
        for (int op = 0; op < 6000 && !g_case_failed; op++) {
            int32_t live[ST_SEQS], n_live = 0;
            for (int id = 0; id < ST_SEQS; id++)
                if (m[id].live) live[n_live++] = id;
            int kind = (int)(rnd() % 11);
            if (n_live == 0 || (kind == 0 && n_live < 40)) { /* add */
                int32_t id;
                CHECK_STATUS(kvattn_pages_add_seq(pool, &id), KVATTN_OK);
                CHECK(id >= 0 && id < ST_SEQS && !m[id].live, "new id %d", id);
                if (g_case_failed) break;
                memset(&m[id], 0, sizeof(m[id]));
                m[id].live = 1;
            } else if (kind == 1 && n_live < 40) { /* fork, sometimes with a bad n_tokens */
                int32_t parent = live[rnd() % (uint32_t)n_live];
                int32_t n_tok = (rnd() % 4 == 0) ? rnd_in(0, m[parent].len + 2)
                                                 : page_size * rnd_in(0, m[parent].len / page_size);
                int valid = n_tok <= m[parent].len && n_tok % page_size == 0;
                int32_t id = -1;
                int before_used = kvattn_pages_used_count(pool);
                int st = kvattn_pages_fork(pool, parent, n_tok, &id);
                CHECK(st == (valid ? KVATTN_OK : KVATTN_ERR_INVALID_ARGUMENT), "fork(%d, %d) -> %d", parent, n_tok, st);
                CHECK(kvattn_pages_used_count(pool) == before_used, "fork changed the page count");
                if (st == KVATTN_OK) {
                    CHECK(id >= 0 && id < ST_SEQS && !m[id].live, "fork id %d", id);
                    if (g_case_failed) break;
                    m[id].live = 1;
                    m[id].len = n_tok;
                    m[id].npages = n_tok / page_size;
                    memcpy(m[id].pages, m[parent].pages, sizeof(int32_t) * (size_t)m[id].npages);
                    n_fork++;
                }
            } else if (kind <= 6) { /* append: mostly decode steps, some prefills */
                int32_t id = live[rnd() % (uint32_t)n_live];
                int32_t n_tok = rnd() % 3 == 0 ? rnd_in(0, 6 * page_size + 20) : rnd_in(0, 2);
                int32_t need = (m[id].len + n_tok + page_size - 1) / page_size - m[id].npages;
                int32_t free_before = kvattn_pages_free_count(pool);
                int st = kvattn_pages_append(pool, id, n_tok);
                if (need > free_before) {
                    CHECK(st == KVATTN_ERR_OUT_OF_PAGES, "append(%d, %d) -> %d with %d needed, %d free", id, n_tok,
                          st, need, free_before);
                    n_oop++;
                } else {
                    CHECK(st == KVATTN_OK, "append(%d, %d) -> %d", id, n_tok, st);
                    int32_t table[ST_NUM_PAGES], len;
                    kvattn_pages_fill(pool, &id, 1, NULL, table, ST_NUM_PAGES, ST_NUM_PAGES, &len);
                    /* the fresh pages must have been unused by everyone */
                    for (int i = m[id].npages; i < m[id].npages + need; i++)
                        for (int other = 0; other < ST_SEQS; other++)
                            if (m[other].live)
                                for (int j = 0; j < m[other].npages; j++)
                                    CHECK(m[other].pages[j] != table[i], "fresh page %d was held by seq %d",
                                          table[i], other);
                    memcpy(m[id].pages + m[id].npages, table + m[id].npages, sizeof(int32_t) * (size_t)need);
                    m[id].npages += need;
                    m[id].len += n_tok;
                    n_ok++;
                }
            } else if (kind == 10) { /* truncate, sometimes past the length; refused inside a shared page */
                int32_t id = live[rnd() % (uint32_t)n_live];
                int32_t n_tok = rnd_in(-1, m[id].len + 1);
                int shared_cut = 0;
                if (n_tok > 0 && n_tok < m[id].len && n_tok % page_size != 0) {
                    int32_t page = m[id].pages[n_tok / page_size];
                    for (int other = 0; other < ST_SEQS; other++)
                        if (other != id && m[other].live)
                            for (int j = 0; j < m[other].npages; j++) shared_cut |= m[other].pages[j] == page;
                }
                int valid = n_tok >= 0 && n_tok <= m[id].len && !shared_cut;
                int st = kvattn_pages_truncate(pool, id, n_tok);
                CHECK(st == (valid ? KVATTN_OK : KVATTN_ERR_INVALID_ARGUMENT), "truncate(%d, %d) of len %d -> %d", id,
                      n_tok, m[id].len, st);
                if (st == KVATTN_OK) {
                    m[id].len = n_tok;
                    m[id].npages = (n_tok + page_size - 1) / page_size;
                    n_trunc++;
                } else if (shared_cut) {
                    n_trunc_shared++;
                }
            } else if (kind == 7 || (kind == 8 && kvattn_pages_free_count(pool) < ST_NUM_PAGES / 8)) { /* release */
                int32_t id = live[rnd() % (uint32_t)n_live];
                CHECK_STATUS(kvattn_pages_release(pool, id), KVATTN_OK);
                m[id].live = 0;
                CHECK_STATUS(kvattn_pages_release(pool, id), KVATTN_ERR_INVALID_ARGUMENT);
            } else { /* fill a random batch with pending, compare with the model */
                int32_t batch[8], pend[8], table[8 * ST_NUM_PAGES], seqlens[8];
                int n = 1 + (int)(rnd() % 8);
                for (int b = 0; b < n; b++) {
                    batch[b] = live[rnd() % (uint32_t)n_live];
                    pend[b] = rnd_in(0, m[batch[b]].len);
                }
                CHECK_STATUS(kvattn_pages_fill(pool, batch, n, pend, table, ST_NUM_PAGES, ST_NUM_PAGES, seqlens),
                             KVATTN_OK);
                for (int b = 0; b < n; b++) {
                    CHECK(seqlens[b] == m[batch[b]].len - pend[b], "fill seqlens");
                    for (int i = 0; i < ST_NUM_PAGES; i++)
                        CHECK(table[b * ST_NUM_PAGES + i] == (i < m[batch[b]].npages ? m[batch[b]].pages[i] : -1),
                              "fill row %d entry %d", b, i);
                }
            }
            if (!model_check(pool, m, page_size, op)) {
                CHECK(0, "model mismatch after op %d (page_size %d)", op, page_size);
                break;
            }
        }
        CHECK(n_oop > 10 && n_fork > 10 && n_ok > 100 && n_trunc > 100 && (page_size == 1 || n_trunc_shared > 0),
              "stress coverage: %d appends, %d out-of-pages, %d forks, %d truncations", n_ok, n_oop, n_fork, n_trunc);
        printf("  stress page_size %d: %d appends, %d out-of-pages, %d forks, %d truncations (%d refused: shared "
               "page)\n", page_size, n_ok, n_oop, n_fork, n_trunc, n_trunc_shared);
        for (int id = 0; id < ST_SEQS; id++)
            if (m[id].live) CHECK_STATUS(kvattn_pages_release(pool, id), KVATTN_OK);
        CHECK(kvattn_pages_free_count(pool) == ST_NUM_PAGES, "all pages free at the end");
        kvattn_pages_destroy(pool);
    }
}

int main(void) {
    /* the stress draws fresh operations on every run: the harness's seed (KVATTN_TEST_SEED, else the clock),
     * printed so that a failing run can be replayed */
    kvt_init("test_pages");
    g_rng = kvt_rand_u64();
    if (!g_rng) g_rng = 0x9e3779b97f4a7c15ull; /* xorshift needs a nonzero state */
    run_case("create_bad_args", test_create_bad_args);
    run_case("empty_pool", test_empty_pool);
    run_case("append_counts", test_append_counts);
    run_case("exhaustion_changes_nothing", test_exhaustion_changes_nothing);
    run_case("release_and_reuse", test_release_and_reuse);
    run_case("fork_sharing", test_fork_sharing);
    run_case("truncate", test_truncate);
    run_case("fill", test_fill);
    run_case("page_size_one", test_page_size_one);
    run_case("unknown_ids_at_the_end", test_unknown_ids_at_the_end);
    run_case("stress", test_stress);
    printf("test_pages: %d passed, %d failed, 0 skipped\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
