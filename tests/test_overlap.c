/* test_overlap.c — tensors the call writes must not share memory with each other (DECISIONS.md, "Arguments"):
 * out, softmax_lse, and k_cache / v_cache when k_new / v_new are appended. kvattn_validate reads no tensor
 * data, so the tensors here are addresses only (never dereferenced).
 *
 * The main case is k_cache and v_cache as two views of one buffer with the same strides, as in layouts that keep a
 * page's K and V side by side ([pages, 2, page_size, Hk, D]): random shapes, random stride orders with padding,
 * and random byte offsets of v_cache from k_cache (some inside the gaps of an interleaved layout, some misaligned).
 * The expected verdict comes from a brute-force walk over every element's bytes; the validator's must match it
 * exactly (a shared byte is refused, a layout that shares none is accepted). Views with different strides are
 * refused when their byte ranges intersect (a documented, conservative rule), accepted when they do not. A v_cache
 * address that is not a multiple of the element size is refused as misaligned, whatever it overlaps.
 *
 * The int32 index arrays (cache_seqlens, cache_leftpad, cu_seqlens_q, cu_seqlens_knew, block_table) must not share
 * memory with a written tensor (the backends read them again after writing has begun), nor may anything the CUDA
 * call writes or indexes by lie in its workspace: both at random offsets against the byte ranges. */
#include "harness.h"
#include "internal.h" /* kv_check_workspace_disjoint: the workspace rule, which kvattn_forward applies on CUDA */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BASE ((uintptr_t)1 << 40) /* a fake, well-aligned address: nothing is read */

typedef struct layout {
    int64_t ext[4], str[4]; /* pages, rows, heads, D (stride 1) */
} layout;

/* Element offsets of every element of l, sorted. */
static int64_t *offsets(const layout *l, int64_t *n) {
    *n = l->ext[0] * l->ext[1] * l->ext[2] * l->ext[3];
    int64_t *o = malloc(sizeof(int64_t) * (size_t)*n), k = 0;
    for (int64_t a = 0; a < l->ext[0]; a++)
        for (int64_t b = 0; b < l->ext[1]; b++)
            for (int64_t c = 0; c < l->ext[2]; c++)
                for (int64_t d = 0; d < l->ext[3]; d++)
                    o[k++] = a * l->str[0] + b * l->str[1] + c * l->str[2] + d * l->str[3];
    for (int64_t i = 1; i < *n; i++) /* insertion sort (a few hundred elements) */
        for (int64_t j = i; j > 0 && o[j] < o[j - 1]; j--) {
            int64_t t = o[j];
            o[j] = o[j - 1];
            o[j - 1] = t;
        }
    return o;
}

/* 1 when an element of a (at byte 0 + esize * offset) and one of b (at byte shift + esize * offset) share a byte. */
static int brute_share(const layout *a, const layout *b, int esize, int64_t shift) {
    int64_t na, nb;
    int64_t *oa = offsets(a, &na), *ob = offsets(b, &nb);
    int hit = 0;
    for (int64_t i = 0; i < na && !hit; i++)
        for (int64_t j = 0; j < nb && !hit; j++) {
            const int64_t x = oa[i] * esize, y = shift + ob[j] * esize;
            hit = x < y + esize && y < x + esize;
        }
    free(oa);
    free(ob);
    return hit;
}

static int64_t span_bytes(const layout *l, int esize) {
    int64_t m = 0;
    for (int k = 0; k < 4; k++) m += (l->ext[k] - 1) * l->str[k];
    return (m + 1) * esize;
}

/* A random layout of no self-overlap: the three outer dimensions packed in a random order around D, each with
 * random padding; sometimes one stride doubled (room for another tensor in between). */
static layout random_layout(int64_t pages, int64_t rows, int64_t heads, int64_t D) {
    layout l = {{pages, rows, heads, D}, {0, 0, 0, 1}};
    int order[3] = {0, 1, 2};
    for (int i = 2; i > 0; i--) {
        int j = kvt_randint(0, i), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int64_t s = D + (kvt_randint(0, 3) == 0 ? kvt_randint(1, 5) : 0);
    for (int i = 0; i < 3; i++) {
        const int k = order[i];
        l.str[k] = s;
        int64_t next = s * l.ext[k];
        if (kvt_randint(0, 3) == 0) next *= 2;                    /* interleave room */
        else if (kvt_randint(0, 3) == 0) next += kvt_randint(1, 7); /* padding */
        s = next;
    }
    return l;
}

static void set_caches(kvattn_params *p, const layout *k, const layout *v, uintptr_t kaddr, uintptr_t vaddr) {
    p->k_cache = (void *)kaddr;
    p->v_cache = (void *)vaddr;
    p->k_batch_stride = k->str[0];
    p->k_row_stride = k->str[1];
    p->k_head_stride = k->str[2];
    p->v_batch_stride = v->str[0];
    p->v_row_stride = v->str[1];
    p->v_head_stride = v->str[2];
}

/* One decode step (B = 2, one query and one new token each) over a paged cache of the given layouts; out, lse,
 * q, k_new, v_new at their own fake addresses. */
static kvattn_params base_params(int dtype, const layout *k, const layout *v, uintptr_t kaddr, uintptr_t vaddr,
                                 int append) {
    static int32_t seqlens[2], table[2 * 8];
    const int32_t H = (int32_t)k->ext[2] * 2, Hk = (int32_t)k->ext[2], D = (int32_t)k->ext[3];
    kvattn_params p = kvattn_params_default();
    p.dtype = dtype;
    p.batch = 2;
    p.num_heads = H;
    p.num_kv_heads = Hk;
    p.head_dim = D;
    p.q = (const void *)(BASE * 2);
    p.seqlen_q = 1;
    p.q_batch_stride = p.q_row_stride = (int64_t)H * D;
    p.q_head_stride = D;
    p.out = (void *)(BASE * 3);
    p.out_batch_stride = p.out_row_stride = (int64_t)H * D;
    p.out_head_stride = D;
    p.softmax_lse = (float *)(BASE * 4);
    p.lse_batch_stride = H;
    p.lse_head_stride = 1;
    p.lse_row_stride = 1;
    if (append) {
        p.k_new = (const void *)(BASE * 5);
        p.v_new = (const void *)(BASE * 6);
        p.seqlen_knew = 1;
        p.knew_batch_stride = p.knew_row_stride = p.vnew_batch_stride = p.vnew_row_stride = (int64_t)Hk * D;
        p.knew_head_stride = p.vnew_head_stride = D;
    }
    set_caches(&p, k, v, kaddr, vaddr);
    p.block_table = table;
    p.block_table_batch_stride = 8;
    p.max_pages_per_seq = 8;
    p.num_pages = (int32_t)k->ext[0];
    p.page_size = (int32_t)k->ext[1];
    p.cache_seqlens = seqlens;
    return p;
}

static void expect(const kvattn_params *p, int refuse, const char *what) {
    const int st = kvattn_validate(p, KVATTN_BACKEND_CPU);
    const char *msg = kvattn_last_error();
    if (refuse) {
        if (st != KVATTN_ERR_INVALID_ARGUMENT || !strstr(msg, "share memory"))
            kvt_failf("%s: expected INVALID_ARGUMENT \"... share memory ...\", got %s: %s", what,
                      kvattn_status_string(st), msg);
    } else if (st != KVATTN_OK)
        kvt_failf("%s: expected KVATTN_OK, got %s: %s", what, kvattn_status_string(st), msg);
}

static void expect_misaligned(const kvattn_params *p, const char *name, const char *what) {
    const int st = kvattn_validate(p, KVATTN_BACKEND_CPU);
    const char *msg = kvattn_last_error();
    if (st != KVATTN_ERR_INVALID_ARGUMENT || strncmp(msg, name, strlen(name)) != 0 || !strstr(msg, "element size"))
        kvt_failf("%s: expected INVALID_ARGUMENT \"%s: ... element size ...\", got %s: %s", what, name,
                  kvattn_status_string(st), msg);
}

/* A tensor or index array of base_params as a byte range. */
typedef struct span {
    const char *name;
    uintptr_t base;
    int64_t bytes;
} span;

/* base_params' decode step made varlen in the queries and the new tokens (so that cu_seqlens_q and cu_seqlens_knew
 * are read), with a cache_leftpad; the index arrays at their own fake addresses. The spans of everything the call
 * writes or indexes by into s (out, softmax_lse, k_cache, v_cache, then the five index arrays), and q's last. */
static kvattn_params index_params(const layout *l, uintptr_t vaddr, span *s) {
    kvattn_params p = base_params(KVATTN_F16, l, l, BASE, vaddr, 1);
    const int64_t H = p.num_heads, D = p.head_dim;
    p.cu_seqlens_q = (const int32_t *)(BASE * 7);
    p.total_q = 2;
    p.seqlen_q = 0;
    p.q_batch_stride = p.out_batch_stride = 0;
    p.lse_batch_stride = 0;
    p.lse_head_stride = 2; /* [H, total_q] */
    p.cu_seqlens_knew = (const int32_t *)(BASE * 8);
    p.total_knew = 2;
    p.seqlen_knew = 0;
    p.knew_batch_stride = p.vnew_batch_stride = 0;
    p.cache_seqlens = (const int32_t *)(BASE * 9);
    p.cache_leftpad = (const int32_t *)(BASE * 10);
    p.block_table = (const int32_t *)(BASE * 11);
    const span all[] = {{"out", (uintptr_t)p.out, 2 * H * D * 2},
                        {"softmax_lse", (uintptr_t)p.softmax_lse, H * 2 * 4},
                        {"k_cache", BASE, span_bytes(l, 2)},
                        {"v_cache", vaddr, span_bytes(l, 2)},
                        {"cu_seqlens_q", (uintptr_t)p.cu_seqlens_q, 3 * 4},
                        {"cu_seqlens_knew", (uintptr_t)p.cu_seqlens_knew, 3 * 4},
                        {"cache_seqlens", (uintptr_t)p.cache_seqlens, 2 * 4},
                        {"cache_leftpad", (uintptr_t)p.cache_leftpad, 2 * 4},
                        {"block_table", (uintptr_t)p.block_table, (8 + 8) * 4},
                        {"q", (uintptr_t)p.q, 2 * H * D * 2}};
    memcpy(s, all, sizeof all);
    return p;
}

/* A refusal must be INVALID_ARGUMENT with the message "<first> and <second>: share memory ...". */
static void expect_verdict(int st, int refuse, const char *first, const char *second) {
    const char *msg = kvattn_last_error();
    char want[96];
    snprintf(want, sizeof want, "%s and %s: share memory", first, second);
    if (refuse) {
        if (st != KVATTN_ERR_INVALID_ARGUMENT || strncmp(msg, want, strlen(want)) != 0)
            kvt_failf("expected INVALID_ARGUMENT \"%s ...\", got %s: %s", want, kvattn_status_string(st), msg);
    } else if (st != KVATTN_OK)
        kvt_failf("expected KVATTN_OK, got %s: %s", kvattn_status_string(st), msg);
}

/* Sets the index array named s->name of p to addr. */
static void set_index(kvattn_params *p, const char *name, uintptr_t addr) {
    const int32_t *a = (const int32_t *)addr;
    if (!strcmp(name, "cu_seqlens_q")) p->cu_seqlens_q = a;
    else if (!strcmp(name, "cu_seqlens_knew")) p->cu_seqlens_knew = a;
    else if (!strcmp(name, "cache_seqlens")) p->cache_seqlens = a;
    else if (!strcmp(name, "cache_leftpad")) p->cache_leftpad = a;
    else p->block_table = a;
}

int main(void) {
    kvt_init("test_overlap");
    const int n_random = kvt_quick() ? 300 : 3000;
    int shared = 0, disjoint = 0, misaligned = 0;

    /* k_cache and v_cache with the same layout at random offsets: the validator against the brute force */
    for (int c = 0; c < n_random; c++) {
        const int dtype = kvt_randint(0, 1) ? KVATTN_F16 : KVATTN_F32, es = dtype == KVATTN_F16 ? 2 : 4;
        layout l = random_layout(kvt_randint(1, 4), kvt_randint(1, 4), kvt_randint(1, 3), 8 * kvt_randint(1, 2));
        const int64_t span = span_bytes(&l, es);
        int64_t shift; /* bytes from k_cache to v_cache */
        switch (kvt_randint(0, 3)) {
        case 0: shift = kvt_randint(-(int)span - 8, (int)span + 8); break;                /* anywhere near */
        case 1: shift = es * (int64_t)kvt_randint(-(int)span / es, (int)span / es); break; /* element-aligned */
        case 2: { /* one of the strides (a page / row / head further on), maybe negated or off by a byte */
            shift = es * l.str[kvt_randint(0, 2)] * (kvt_randint(0, 1) ? 1 : -1);
            if (kvt_randint(0, 2) == 0) shift += kvt_randint(-1, 1);
            break;
        }
        default: shift = kvt_randint(0, 1) ? 0 : span; /* the same base, or just past the end */
        }
        const int share = brute_share(&l, &l, es, shift);
        misaligned += shift % es != 0;
        shared += share && shift % es == 0;
        disjoint += !share && shift % es == 0;
        kvt_case_begin("same layout, shape [%lld, %lld, %lld, %lld], strides (%lld, %lld, %lld), %s, v_cache at "
                       "k_cache %+lld bytes: %s", (long long)l.ext[0], (long long)l.ext[1], (long long)l.ext[2],
                       (long long)l.ext[3], (long long)l.str[0], (long long)l.str[1], (long long)l.str[2],
                       es == 2 ? "f16" : "f32", (long long)shift, share ? "shared" : "disjoint");
        kvattn_params p = base_params(dtype, &l, &l, BASE, BASE + (uintptr_t)shift, 1);
        if (shift % es != 0) { /* misaligned: refused before any overlap rule, appending or not */
            expect_misaligned(&p, "v_cache", "appending");
            p = base_params(dtype, &l, &l, BASE, BASE + (uintptr_t)shift, 0);
            expect_misaligned(&p, "v_cache", "read only (no k_new)");
            kvt_case_end();
            continue;
        }
        expect(&p, share, "appending");
        p = base_params(dtype, &l, &l, BASE, BASE + (uintptr_t)shift, 0);
        expect(&p, 0, "read only (no k_new)"); /* caches that are only read may share anything */
        kvt_case_end();
    }
    printf("  same-layout cases: %d sharing a byte, %d disjoint, %d misaligned\n", shared, disjoint, misaligned);

    /* different layouts: refused when the byte ranges intersect, accepted when they do not */
    for (int c = 0; c < n_random / 10; c++) {
        layout a = random_layout(kvt_randint(1, 3), kvt_randint(1, 3), 2, 8), b;
        int same = 1;
        for (int tries = 0; same && tries < 50; tries++) {
            b = random_layout(a.ext[0], a.ext[1], 2, 8);
            same = 1;
            for (int k = 0; k < 4; k++) same &= a.ext[k] == 1 || a.str[k] == b.str[k];
        }
        if (same) continue; /* only layouts that differ in a stride that matters */
        const int64_t sa = span_bytes(&a, 2), sb = span_bytes(&b, 2);
        const int64_t shift = kvt_randint(-(int)sb - 4, (int)sa + 4);
        const int ranges = shift < sa && -shift < sb;
        kvt_case_begin("different layouts, v_cache at k_cache %+lld bytes: ranges %s", (long long)shift,
                       ranges ? "intersect" : "disjoint");
        if (brute_share(&a, &b, 2, shift) && !ranges) kvt_failf("test bug: a shared byte outside both ranges");
        kvattn_params p = base_params(KVATTN_F16, &a, &b, BASE, BASE + (uintptr_t)shift, 1);
        if (shift % 2 != 0) expect_misaligned(&p, "v_cache", "appending");
        else expect(&p, ranges, "appending");
        kvt_case_end();
    }

    /* out, softmax_lse and the caches, pairwise */
    {
        layout l = {{4, 16, 2, 64}, {16 * 2 * 64, 2 * 64, 64, 1}};
        const uintptr_t vaddr = BASE + (uintptr_t)span_bytes(&l, 2) + 4096;
        kvattn_params p;
        kvt_case_begin("out, softmax_lse and the caches");
        p = base_params(KVATTN_F16, &l, &l, BASE, vaddr, 1);
        expect(&p, 0, "all apart");
        p.softmax_lse = (float *)((char *)p.out + 64); /* inside out's [2, 1, 4, 64] halves */
        expect(&p, 1, "softmax_lse inside out");
        p = base_params(KVATTN_F16, &l, &l, BASE, vaddr, 1);
        p.softmax_lse = (float *)((char *)p.out + 2 * 4 * 64 * 2); /* just past out */
        expect(&p, 0, "softmax_lse just past out");
        p = base_params(KVATTN_F16, &l, &l, BASE, vaddr, 1);
        p.out = (void *)(vaddr + 128);
        expect(&p, 1, "out inside v_cache while appending");
        p = base_params(KVATTN_F16, &l, &l, BASE, vaddr, 0);
        p.out = (void *)(vaddr + 128);
        expect(&p, 0, "out inside v_cache, no append (the cache is only read; not checked)");
        p = base_params(KVATTN_F16, &l, &l, BASE, vaddr, 1);
        p.softmax_lse = (float *)(BASE + 256);
        expect(&p, 1, "softmax_lse inside k_cache while appending");
        p = base_params(KVATTN_F16, &l, &l, BASE, BASE, 1);
        const int st = kvattn_validate(&p, KVATTN_BACKEND_CPU);
        if (!strstr(kvattn_last_error(), "k_cache and v_cache") || !strstr(kvattn_last_error(), "appended"))
            kvt_failf("k_cache == v_cache while appending: message \"%s\" (status %s) must name both and the append",
                      kvattn_last_error(), kvattn_status_string(st));
        kvt_case_end();
    }
    /* index arrays against the tensors the call writes: refused when the byte ranges intersect */
    {
        layout l = {{4, 16, 2, 64}, {16 * 2 * 64, 2 * 64, 64, 1}};
        const uintptr_t vaddr = BASE + (uintptr_t)span_bytes(&l, 2) + 4096;
        span sp[10];
        (void)index_params(&l, vaddr, sp);
        int refused = 0, accepted = 0;
        for (int c = 0; c < n_random / 5; c++) {
            const span *t = &sp[kvt_randint(0, 3)], *a = &sp[kvt_randint(4, 8)];
            const int append = kvt_randint(0, 3) != 0;
            const int64_t off = 4 * (int64_t)kvt_randint(-(int)(a->bytes / 4) - 2, (int)(t->bytes / 4) + 2);
            const int caches = !strcmp(t->name, "k_cache") || !strcmp(t->name, "v_cache");
            const int refuse = off < t->bytes && -off < a->bytes && (append || !caches);
            kvt_case_begin("%s at %s %+lld bytes (%lld and %lld bytes), %s: %s", a->name, t->name, (long long)off,
                           (long long)a->bytes, (long long)t->bytes, append ? "appending" : "no append",
                           refuse ? "refused" : "accepted");
            kvattn_params p = index_params(&l, vaddr, sp);
            if (!append) {
                p.k_new = p.v_new = NULL;
                p.cu_seqlens_knew = NULL;
                if (!strcmp(a->name, "cu_seqlens_knew")) { kvt_case_end(); continue; } /* not read without k_new */
            }
            set_index(&p, a->name, t->base + (uintptr_t)off);
            expect_verdict(kvattn_validate(&p, KVATTN_BACKEND_CPU), refuse, a->name, t->name);
            refused += refuse;
            accepted += !refuse;
            kvt_case_end();
        }
        printf("  index-array cases: %d refused, %d accepted\n", refused, accepted);

        /* the edges, each pair: only the index array's last element on the tensor's first, or its first element on the
         * tensor's last (refused), and each array just before or just after the tensor (accepted). The random offsets
         * above hit these edges only by chance: a check that took cu_seqlens_q as B entries instead of B + 1 passed one
         * quick run of them and failed 8 of 9 full runs. */
        for (int ti = 0; ti < 4; ti++)
            for (int ai = 4; ai < 9; ai++) {
                const span *t = &sp[ti], *a = &sp[ai];
                const int64_t offs[4] = {-(a->bytes - 4), t->bytes - 4, -a->bytes, t->bytes};
                kvt_case_begin("%s against %s at their edges (appending)", a->name, t->name);
                for (int k = 0; k < 4; k++) {
                    kvattn_params p = index_params(&l, vaddr, sp);
                    set_index(&p, a->name, t->base + (uintptr_t)offs[k]);
                    expect_verdict(kvattn_validate(&p, KVATTN_BACKEND_CPU), k < 2, a->name, t->name);
                }
                kvt_case_end();
            }

        /* the workspace (the bytes a CUDA call writes) against all of these; q is only read: not checked */
        refused = accepted = 0;
        for (int c = 0; c < n_random / 5; c++) {
            const span *t = &sp[kvt_randint(0, 9)];
            const int64_t ws_bytes = 16 * kvt_randint(1, 64);
            const int64_t off = 16 * (int64_t)kvt_randint(-(int)(ws_bytes / 16) - 2, (int)(t->bytes / 16) + 2);
            const int refuse = strcmp(t->name, "q") != 0 && off < t->bytes && -off < ws_bytes;
            kvt_case_begin("workspace of %lld bytes at %s %+lld bytes: %s", (long long)ws_bytes, t->name,
                           (long long)off, refuse ? "refused" : "accepted");
            kvattn_params p = index_params(&l, vaddr, sp);
            kv_clear_error();
            expect_verdict(kv_check_workspace_disjoint(&p, (const void *)(t->base + (uintptr_t)off), (size_t)ws_bytes),
                           refuse, t->name, "workspace");
            refused += refuse;
            accepted += !refuse;
            kvt_case_end();
        }
        printf("  workspace cases: %d refused, %d accepted\n", refused, accepted);
    }
    return kvt_finish();
}
