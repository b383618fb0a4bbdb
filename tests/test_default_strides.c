/* test_default_strides.c — strides left at KVATTN_STRIDE_PACKED (what kvattn_params_default() sets) take the
 * packed layout of each tensor's documented shape (kvattn.h), on the CPU and, when present, the CUDA backend.
 * Each case builds one random call twice from the same random draw: once with every stride left unset, once with
 * every stride written out by hand (the packed values, computed here). Both are checked against the float64
 * reference (out, lse, both caches, poison and guards: tests/common), and their outputs and caches must be the same
 * bits. The unset call must really leave its strides unset (checked before it runs), so a library that ignored
 * the sentinel, or read it as 0 (broadcast), fails: a broadcast q, cache or k_new gives other values, a broadcast out
 * or lse is refused as overlapping. Fixed-length (q [B, Sq, H, D], lse [B, H, Sq]) and varlen (lse [H, total_q])
 * calls; contiguous and paged caches (page sizes 1, 7 and 16); with and without appended tokens, rotary, ALiBi
 * [H]. Also: kvattn_params_default() sets all 24 strides to the sentinel; a tensor with one stride set and the
 * others unset takes each unset one from its shape alone, and is refused, naming the unset fields, where the two
 * together make its elements overlap; packed strides that overflow int64 saturate, an argument error naming the
 * tensor, not a crash. B sequences, H query heads, Hk KV heads, D head dim. */
#include "test_cuda_common.h"

#include <stddef.h>

/* every stride field of kvattn_params */
static const struct {
    const char *name;
    size_t off;
} STRIDES[] = {
#define F(x) {#x, offsetof(kvattn_params, x)}
    F(q_batch_stride),    F(q_row_stride),     F(q_head_stride),    F(knew_batch_stride),
    F(knew_row_stride),   F(knew_head_stride), F(vnew_batch_stride), F(vnew_row_stride),
    F(vnew_head_stride),  F(k_batch_stride),   F(k_row_stride),     F(k_head_stride),
    F(v_batch_stride),    F(v_row_stride),     F(v_head_stride),    F(block_table_batch_stride),
    F(rotary_row_stride), F(alibi_batch_stride), F(out_batch_stride), F(out_row_stride),
    F(out_head_stride),   F(lse_batch_stride), F(lse_head_stride),  F(lse_row_stride),
#undef F
};
#define NSTRIDES ((int)(sizeof STRIDES / sizeof STRIDES[0]))

static int64_t *stride_at(kvattn_params *p, int i) { return (int64_t *)((char *)p + STRIDES[i].off); }

typedef struct shape {
    int backend, dtype, B, H, Hk, D;
    int varlen, paged, page_size, append, rotary, alibi;
    int sq, sn;             /* fixed-length: queries and new tokens per sequence */
    int nq[4], nn[4], S[4]; /* per sequence: queries, new tokens (varlen), cached tokens */
} shape;

/* Builds the call into P from the current random state. explicit_strides: 1, every stride written out (the packed
 * values); 2 (varlen only), the same but the strides kvattn.h calls unused in varlen mode (the batch strides of q,
 * out, k_new, v_new and lse) set to odd junk, which must change nothing (on CUDA, not even the kernel that runs);
 * 0, none (left at kvattn_params_default()'s KVATTN_STRIDE_PACKED). */
static void build(kvt_problem *P, const shape *s, int explicit_strides) {
    const int B = s->B, H = s->H, Hk = s->Hk, D = s->D, dt = s->dtype, es = kvref_dtype_size(dt);
    kvt_problem_init(P, s->backend, dt, B, H, Hk, D);
    kvattn_params *p = &P->ph;
    p->causal = kvt_randint(0, 1);
    p->softmax_scale = (float)kvt_uniform(0.05, 0.3);
    int total_q = 0, total_n = 0, need = 1;
    int nq[4], nn[4];
    for (int b = 0; b < B; b++) {
        nq[b] = s->varlen ? s->nq[b] : s->sq;
        nn[b] = s->append ? (s->varlen ? s->nn[b] : s->sn) : 0;
        total_q += nq[b];
        total_n += nn[b];
        if (s->S[b] + nn[b] > need) need = s->S[b] + nn[b];
    }
    kvt_arr_alloc(P, &P->seqlens, "cache_seqlens", (size_t)B * 4);
    memcpy(P->seqlens.host, s->S, (size_t)B * 4);
    if (s->varlen) {
        kvt_arr_alloc(P, &P->cu_q, "cu_seqlens_q", (size_t)(B + 1) * 4);
        int32_t *c = P->cu_q.host;
        c[0] = 0;
        for (int b = 0; b < B; b++) c[b + 1] = c[b] + nq[b];
        p->total_q = total_q;
        if (s->append) {
            kvt_arr_alloc(P, &P->cu_knew, "cu_seqlens_knew", (size_t)(B + 1) * 4);
            int32_t *n = P->cu_knew.host;
            n[0] = 0;
            for (int b = 0; b < B; b++) n[b + 1] = n[b] + nn[b];
            p->total_knew = total_n;
        }
    } else {
        p->seqlen_q = s->sq;
        p->seqlen_knew = s->append ? s->sn : 0;
    }
    kvt_arr_alloc(P, &P->q, "q", (size_t)total_q * H * D * es);
    kvt_arr_alloc(P, &P->out, "out", (size_t)total_q * H * D * es);
    kvt_arr_alloc(P, &P->lse, "softmax_lse", (size_t)total_q * H * 4);
    kvt_fill(dt, P->q.host, (int64_t)total_q * H * D, -1, 1);
    if (s->append) {
        kvt_arr_alloc(P, &P->k_new, "k_new", (size_t)total_n * Hk * D * es);
        kvt_arr_alloc(P, &P->v_new, "v_new", (size_t)total_n * Hk * D * es);
        kvt_fill(dt, P->k_new.host, (int64_t)total_n * Hk * D, -1, 1);
        kvt_fill(dt, P->v_new.host, (int64_t)total_n * Hk * D, -1, 1);
    }
    int64_t cache_rows, rows_per; /* pages (or cache rows) and tokens per page (or capacity) */
    if (s->paged) {
        const int ps = s->page_size, maxp = (need + ps - 1) / ps + 1;
        int used = 0;
        for (int b = 0; b < B; b++) used += (s->S[b] + nn[b] + ps - 1) / ps;
        p->page_size = ps;
        p->num_pages = used + 2;
        p->max_pages_per_seq = maxp;
        kvt_arr_alloc(P, &P->block_table, "block_table", (size_t)B * maxp * 4);
        int32_t *perm = malloc((size_t)p->num_pages * 4), *bt = P->block_table.host;
        for (int i = 0; i < p->num_pages; i++) perm[i] = i;
        kvt_shuffle(perm, p->num_pages);
        int next = 0;
        for (int b = 0; b < B; b++) {
            const int np = (s->S[b] + nn[b] + ps - 1) / ps;
            for (int j = 0; j < maxp; j++) bt[b * maxp + j] = j < np ? perm[next++] : -1;
        }
        free(perm);
        cache_rows = p->num_pages;
        rows_per = ps;
    } else {
        p->cache_batch = B;
        p->cache_capacity = need + kvt_randint(0, 9);
        cache_rows = B;
        rows_per = p->cache_capacity;
    }
    const int64_t cache_el = cache_rows * rows_per * Hk * D;
    kvt_arr_alloc(P, &P->k_cache, "k_cache", (size_t)cache_el * es);
    kvt_arr_alloc(P, &P->v_cache, "v_cache", (size_t)cache_el * es);
    kvt_fill(dt, P->k_cache.host, cache_el, -1, 1);
    kvt_fill(dt, P->v_cache.host, cache_el, -1, 1);
    if (s->rotary) {
        const int R = s->rotary == 1 ? D : D / 2, maxpos = need + 3;
        p->rotary_dim = R;
        p->rotary_max_pos = maxpos;
        p->rotary_interleaved = kvt_randint(0, 1);
        p->rotary_dtype = KVATTN_F32;
        kvt_arr_alloc(P, &P->rot_cos, "rotary_cos", (size_t)maxpos * (R / 2) * 4);
        kvt_arr_alloc(P, &P->rot_sin, "rotary_sin", (size_t)maxpos * (R / 2) * 4);
        for (int64_t i = 0; i < (int64_t)maxpos * (R / 2); i++) {
            const double a = kvt_uniform(0, 6.283185307179586);
            ((float *)P->rot_cos.host)[i] = (float)cos(a);
            ((float *)P->rot_sin.host)[i] = (float)sin(a);
        }
    }
    if (s->alibi) {
        kvt_arr_alloc(P, &P->alibi, "alibi_slopes", (size_t)H * 4);
        for (int h = 0; h < H; h++) ((float *)P->alibi.host)[h] = (float)kvt_uniform(0.0, 0.1);
    }
    if (!explicit_strides) return;
    /* the packed strides, written out */
    const int64_t Sq = s->sq, Sn = s->append ? s->sn : 0;
    p->q_head_stride = p->out_head_stride = D;
    p->q_row_stride = p->out_row_stride = (int64_t)H * D;
    p->q_batch_stride = p->out_batch_stride = s->varlen ? 0 : Sq * H * D;
    p->knew_head_stride = p->vnew_head_stride = D;
    p->knew_row_stride = p->vnew_row_stride = (int64_t)Hk * D;
    p->knew_batch_stride = p->vnew_batch_stride = s->varlen ? 0 : Sn * Hk * D;
    p->k_head_stride = p->v_head_stride = D;
    p->k_row_stride = p->v_row_stride = (int64_t)Hk * D;
    p->k_batch_stride = p->v_batch_stride = rows_per * Hk * D;
    p->block_table_batch_stride = p->max_pages_per_seq;
    p->rotary_row_stride = p->rotary_dim / 2;
    p->alibi_batch_stride = 0;
    p->lse_row_stride = 1;
    p->lse_head_stride = s->varlen ? total_q : Sq;
    p->lse_batch_stride = s->varlen ? 0 : (int64_t)H * Sq;
    if (explicit_strides == 2) {
        p->q_batch_stride = 2 * kvt_randint(0, 1000) + 1;
        p->out_batch_stride = 2 * kvt_randint(0, 1000) + 1;
        p->lse_batch_stride = 2 * kvt_randint(0, 1000) + 1;
        if (s->append) {
            p->knew_batch_stride = 2 * kvt_randint(0, 1000) + 1;
            p->vnew_batch_stride = 2 * kvt_randint(0, 1000) + 1;
        }
    }
}

/* Downloads what the backend wrote: out, lse and both caches, one buffer. */
static unsigned char *results(const kvt_problem *P, size_t *bytes) {
    const kvt_arr *a[4] = {&P->out, &P->lse, &P->k_cache, &P->v_cache};
    size_t n = 0;
    for (int i = 0; i < 4; i++) n += a[i]->bytes;
    unsigned char *r = malloc(n), *w = r;
    for (int i = 0; i < 4; i++) {
        if (kvt_download(&a[i]->dev, w, a[i]->bytes)) kvt_failf("cannot download %s", a[i]->name);
        w += a[i]->bytes;
    }
    *bytes = n;
    return r;
}

static void twin_case(const shape *s) {
    kvt_case_begin("%s, %s, %s, %s%s, B %d, H %d / Hk %d, D %d%s%s%s",
                   s->backend == KVATTN_BACKEND_CUDA ? "CUDA" : "CPU",
                   s->dtype == KVATTN_BF16 ? "bf16" : s->dtype == KVATTN_F16 ? "fp16" : "fp32",
                   s->varlen ? "varlen" : "fixed-length", s->paged ? "paged" : "contiguous",
                   s->paged ? (s->page_size == 1 ? " (page 1)" : s->page_size == 7 ? " (page 7)" : " (page 16)") : "",
                   s->B, s->H, s->Hk, s->D, s->append ? ", appending" : "",
                   s->rotary ? (s->rotary == 1 ? ", rotary D" : ", rotary D/2") : "", s->alibi ? ", ALiBi [H]" : "");
    const uint64_t seed = kvt_rng_get();
    unsigned char *got[3] = {NULL, NULL, NULL};
    size_t bytes[3] = {0, 0, 0};
    int skipped = 0;
    const int runs = s->varlen ? 3 : 2;
    for (int e = 0; e < runs && !skipped; e++) {
        kvt_rng_set(seed);
        kvt_problem P;
        build(&P, s, e);
        if (kvt_problem_upload(&P, 1) == 0) {
            if (!e) /* the call must reach the library with its strides unset */
                for (int i = 0; i < NSTRIDES; i++)
                    if (*stride_at(&P.pd, i) != KVATTN_STRIDE_PACKED)
                        kvt_failf("harness: %s of the unset call is %lld, not KVATTN_STRIDE_PACKED", STRIDES[i].name,
                                  (long long)*stride_at(&P.pd, i));
            if (kvt_problem_run_case(&P, kvt_expect_ok()))
                skipped = 1;
            else
                got[e] = results(&P, &bytes[e]);
        }
        kvt_problem_free(&P);
    }
    if (skipped) {
        kvt_case_skip("unsupported");
    } else if (got[0] && got[1]) {
        if (bytes[0] != bytes[1] || memcmp(got[0], got[1], bytes[0]) != 0)
            kvt_failf("the call with unset strides and the one with the packed strides written out differ");
        if (runs == 3 && got[2] && (bytes[0] != bytes[2] || memcmp(got[0], got[2], bytes[0]) != 0))
            kvt_failf("varlen: odd values in the unused batch strides (q, out, lse, k_new, v_new) changed the results");
    }
    free(got[0]);
    free(got[1]);
    free(got[2]);
    if (!skipped) kvt_case_end();
}

static shape random_shape(int backend, int k) {
    static const int heads[3][2] = {{4, 1}, {8, 2}, {4, 4}};
    static const int dims_cuda[4] = {64, 128, 40, 256}, dims_cpu[4] = {64, 128, 40, 24};
    static const int pages[3] = {1, 7, 16};
    shape s;
    memset(&s, 0, sizeof s);
    s.backend = backend;
    s.dtype = backend == KVATTN_BACKEND_CUDA ? (k & 1 ? KVATTN_BF16 : KVATTN_F16)
                                             : (k % 3 == 0 ? KVATTN_F32 : k % 3 == 1 ? KVATTN_F16 : KVATTN_BF16);
    s.B = kvt_randint(1, 4);
    const int hp = kvt_randint(0, 2);
    s.H = heads[hp][0];
    s.Hk = heads[hp][1];
    s.D = (backend == KVATTN_BACKEND_CUDA ? dims_cuda : dims_cpu)[kvt_randint(0, 3)];
    s.varlen = k & 2 ? 1 : 0;
    s.paged = k & 4 ? 1 : 0;
    s.page_size = pages[kvt_randint(0, 2)];
    s.append = k & 8 ? 1 : 0;
    s.rotary = s.append ? kvt_randint(0, 2) : 0;
    s.alibi = kvt_randint(0, 1);
    s.sq = kvt_randint(1, 12);
    s.sn = kvt_randint(s.sq, 14); /* causal rows see their own new keys */
    for (int b = 0; b < s.B; b++) {
        s.nq[b] = kvt_pick((const int[]){1, 1, 3, 40}, 4);
        s.nn[b] = s.nq[b] + kvt_randint(0, 3);
        s.S[b] = kvt_randint(0, 1) ? kvt_randint(0, 40) : kvt_randint(100, 700);
    }
    return s;
}

/* kvattn_params_default() leaves every stride unset */
static void default_case(void) {
    kvt_case_begin("kvattn_params_default(): all %d strides are KVATTN_STRIDE_PACKED", NSTRIDES);
    kvattn_params p = kvattn_params_default();
    for (int i = 0; i < NSTRIDES; i++)
        if (*stride_at(&p, i) != KVATTN_STRIDE_PACKED)
            kvt_failf("%s is %lld", STRIDES[i].name, (long long)*stride_at(&p, i));
    /* the list above names every int64 stride field: the struct's int64 fields are struct_size and the strides */
    int n64 = 0;
    for (size_t off = 0; off + 8 <= sizeof p; off += 8)
        if (*(int64_t *)((char *)&p + off) == KVATTN_STRIDE_PACKED) n64++;
    if (n64 != NSTRIDES) kvt_failf("%d fields hold KVATTN_STRIDE_PACKED, the test lists %d", n64, NSTRIDES);
    kvt_case_end();
}

/* one stride set (q and out rows padded to H + 3 heads), the others of the tensor unset */
static void mixed_case(int backend) {
    kvt_case_begin("%s: q / out rows padded (row stride (H + 3) D set), head and batch strides unset",
                   backend == KVATTN_BACKEND_CUDA ? "CUDA" : "CPU");
    shape s = random_shape(backend, 2 | 4 | 8);
    s.dtype = KVATTN_BF16;
    s.rotary = 0;
    kvt_problem P;
    build(&P, &s, 0);
    kvattn_params *p = &P.ph;
    int total_q = 0;
    for (int b = 0; b < s.B; b++) total_q += s.nq[b];
    const size_t row = (size_t)(s.H + 3) * s.D;
    kvt_arr_alloc(&P, &P.q, "q", (size_t)total_q * row * 2);
    kvt_arr_alloc(&P, &P.out, "out", (size_t)total_q * row * 2);
    kvt_fill(s.dtype, P.q.host, (int64_t)(total_q * row), -1, 1);
    p->q_row_stride = p->out_row_stride = (int64_t)row;
    int skipped = 0;
    if (kvt_problem_upload(&P, 1) == 0) skipped = kvt_problem_run_case(&P, kvt_expect_ok());
    kvt_problem_free(&P);
    if (skipped)
        kvt_case_skip("unsupported");
    else
        kvt_case_end();
}

/* packed strides past int64 saturate: an argument error naming the tensor, which shows the saturated stride (a
 * wrapped product would show another number, or none) */
static void overflow_case(void) {
    kvt_case_begin("CPU validate: q's packed batch stride past int64 (seqlen_q 2^30 - 1 x H 2^30 x D 65536)");
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_F32;
    p.batch = 2;
    p.num_heads = 1 << 30;
    p.num_kv_heads = 1;
    p.head_dim = 65536;
    p.seqlen_q = (1 << 30) - 1;
    p.cache_batch = 2;
    p.cache_capacity = 1;
    static float dummy[4];
    static int32_t len[2] = {0, 0};
    p.q = p.out = p.k_cache = p.v_cache = dummy;
    p.cache_seqlens = len;
    const int st = kvattn_validate(&p, KVATTN_BACKEND_CPU);
    const char *msg = kvattn_last_error();
    if (st != KVATTN_ERR_INVALID_ARGUMENT || strstr(msg, "q:") != msg || strstr(msg, "overflow") == NULL ||
        strstr(msg, "batch=9223372036854775807") == NULL)
        kvt_failf("status %s (%s), want KVATTN_ERR_INVALID_ARGUMENT naming q, its overflow and batch=INT64_MAX",
                  kvattn_status_string(st), msg);
    kvt_case_end();
}

/* A tensor whose set and unset strides together overlap is refused, naming the unset fields (kvattn.h); a consistent
 * mix and an explicit broadcast are not. Validation only: no data is read. */
static void inconsistent_case(void) {
    enum { B = 2, SQ = 4, H = 4, HK = 2, D = 16, C = 32 };
    static const struct {
        const char *what, *tensor, *field; /* tensor NULL: must validate */
    } CASES[] = {
        {"q rows padded to H + 3 heads, q_batch_stride unset", "q:", "q_batch_stride"},
        {"out rows padded to H + 3 heads, out_batch_stride unset", "out:", "out_batch_stride"},
        {"k_cache heads padded to 2 D (no append), k_row_stride and k_batch_stride unset", "k_cache:", "k_row_stride"},
        {"softmax_lse head stride 2 Sq, lse_batch_stride unset", "softmax_lse:", "lse_batch_stride"},
        {"q rows padded, q_batch_stride set to Sq x the padded row", NULL, NULL},
        {"q_row_stride 0 (a broadcast), the rest unset", NULL, NULL},
        {"v_cache rows padded to 2 Hk D, v_batch_stride set to C x that, v_head_stride unset", NULL, NULL},
        /* the set stride overlaps on its own: validation's overlap error, which names it, not the unset fields
         * (setting those would not fix it; fifty-eighth session, an audit) */
        {"out_head_stride D / 2 set, the rest unset", "out:", "head=8"},
        {"q_head_stride D / 2 set, the rest unset (q is only read: may overlap)", NULL, NULL},
    };
    static uint16_t dummy[8];
    static int32_t len[B] = {3, 5};
    static float lse[B * H * SQ], lse_wide[B * H * 2 * SQ];
    static uint16_t out[B * SQ * (H + 3) * D];
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        kvt_case_begin("CPU validate: %s: %s", CASES[i].what, CASES[i].tensor ? "refused" : "accepted");
        kvattn_params p = kvattn_params_default();
        p.dtype = KVATTN_F16;
        p.batch = B; p.num_heads = H; p.num_kv_heads = HK; p.head_dim = D;
        p.seqlen_q = SQ;
        p.cache_batch = B; p.cache_capacity = C;
        p.q = p.k_cache = p.v_cache = dummy;
        p.out = out;
        p.cache_seqlens = len;
        p.softmax_lse = lse;
        switch (i) {
        case 0: p.q_row_stride = (H + 3) * D; break;
        case 1: p.out_row_stride = (H + 3) * D; break;
        case 2: p.k_head_stride = 2 * D; break;
        case 3: p.softmax_lse = lse_wide; p.lse_head_stride = 2 * SQ; break;
        case 4: p.q_row_stride = (H + 3) * D; p.q_batch_stride = SQ * (H + 3) * D; break;
        case 5: p.q_row_stride = 0; break;
        case 6: p.v_row_stride = 2 * HK * D; p.v_batch_stride = C * 2 * HK * D; break;
        case 7: p.out_head_stride = D / 2; break;
        case 8: p.q_head_stride = D / 2; break;
        }
        const int st = kvattn_validate(&p, KVATTN_BACKEND_CPU);
        const char *msg = kvattn_last_error();
        if (CASES[i].tensor == NULL) {
            if (st != KVATTN_OK) kvt_failf("refused: %s (%s)", kvattn_status_string(st), msg);
        } else if (st != KVATTN_ERR_INVALID_ARGUMENT || strstr(msg, CASES[i].tensor) != msg ||
                   strstr(msg, CASES[i].field) == NULL ||
                   (strstr(msg, "KVATTN_STRIDE_PACKED") == NULL) != (i == 7)) {
            kvt_failf("status %s (%s), want KVATTN_ERR_INVALID_ARGUMENT starting with %s and naming %s, %s",
                      kvattn_status_string(st), msg, CASES[i].tensor, CASES[i].field,
                      i == 7 ? "not the unset strides" : "and the unset strides (KVATTN_STRIDE_PACKED)");
        }
        kvt_case_end();
    }
}

int main(void) {
    kvt_init("test_default_strides");
    const int n = kvt_quick() ? 16 : 48;
    default_case();
    overflow_case();
    inconsistent_case();
    for (int k = 0; k < n; k++) {
        shape s = random_shape(KVATTN_BACKEND_CPU, k);
        twin_case(&s);
    }
    mixed_case(KVATTN_BACKEND_CPU);
    if (cu_gpu_or_skip(n + 1)) {
        for (int k = 0; k < n; k++) {
            shape s = random_shape(KVATTN_BACKEND_CUDA, k);
            twin_case(&s);
        }
        mixed_case(KVATTN_BACKEND_CUDA);
    }
    return kvt_finish();
}
