/* validate.c — SPEC.md "Bad input": every problem visible from the arguments alone (no data is read), shared
 * by every backend and entry point. Each failure names the argument and its values.
 * B sequences, H query heads, Hk KV heads, D head dim. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Largest element offset of a tensor with these extents and strides (the last dimension, D, contiguous),
 * or -1 when it, or the byte offset just past that element (elements of esize bytes), overflows int64: the
 * backends form byte addresses from it. An empty tensor (some extent 0) has offset 0. */
static int64_t max_offset(int n, const int64_t *extent, const int64_t *stride, int esize) {
    int64_t off = 0, bytes;
    for (int k = 0; k < n; k++)
        if (extent[k] <= 0) return 0;
    for (int k = 0; k < n; k++) {
        int64_t term;
        if (__builtin_mul_overflow(extent[k] - 1, stride[k], &term)) return -1;
        if (__builtin_add_overflow(off, term, &off)) return -1;
    }
    if (__builtin_add_overflow(off, 1, &bytes) || __builtin_mul_overflow(bytes, (int64_t)esize, &bytes)) return -1;
    return off;
}

/* The dimensions of extent > 1 (at most 5), in increasing stride order, into idx; returns their number. */
static int dims_by_stride(int n, const int64_t *extent, const int64_t *stride, int *idx) {
    int m = 0;
    for (int k = 0; k < n; k++)
        if (extent[k] > 1) idx[m++] = k;
    for (int a = 1; a < m; a++) /* insertion sort */
        for (int c = a; c > 0 && stride[idx[c]] < stride[idx[c - 1]]; c--) {
            int t = idx[c];
            idx[c] = idx[c - 1];
            idx[c - 1] = t;
        }
    return m;
}

/* 1 when two elements of a tensor that the call writes could share an address: with its dimensions of extent > 1
 * ordered by stride, each stride must lie past the largest offset that the dimensions inside it reach (so a
 * stride of 0, or a head stride below D, is an overlap). Call after max_offset, which excludes overflow. */
static int may_overlap(int n, const int64_t *extent, const int64_t *stride) {
    for (int k = 0; k < n; k++)
        if (extent[k] <= 0) return 0; /* empty: nothing is written */
    int idx[5];
    const int m = dims_by_stride(n, extent, stride, idx);
    int64_t reach = 0;
    for (int a = 0; a < m; a++) {
        if (stride[idx[a]] <= reach) return 1;
        reach += (extent[idx[a]] - 1) * stride[idx[a]];
    }
    return 0;
}

/* ---- strides left unset (KVATTN_STRIDE_PACKED) beside strides that are set ----------------------------------
 * api.c resolves each unset stride on its own to the packed value of its tensor's documented shape. A tensor that
 * mixes set and unset strides can then lay elements over each other (q_row_stride set for padded rows, q_batch_stride
 * unset: sequence b would read the padding of sequence b - 1), which a tensor packed throughout never does. That is
 * refused, naming the unset fields. Dimensions with a stride of 0 set explicitly (a broadcast) are left out. Sizes
 * that validation will reject (negative extents or strides, offsets past int64) are left to it. */
typedef struct mixed_tensor {
    const char *name;
    int n;                 /* dimensions (the contiguous D included, with stride 1) */
    int64_t ext[5];
    const char *field[5];  /* the stride field of each dimension, NULL for D */
    int64_t given[5], str[5];
} mixed_tensor;

static int check_mixed(const mixed_tensor *t, int esize) {
    int unset = 0, set = 0;
    int64_t ext[5], str[5];
    for (int k = 0; k < t->n; k++) {
        if (t->field[k] == NULL) { ext[k] = t->ext[k]; str[k] = t->str[k]; continue; }
        if (t->given[k] == KVATTN_STRIDE_PACKED) unset++;
        else if (t->given[k] < 0) return KVATTN_OK; /* validation names it */
        else set++;
        ext[k] = t->given[k] == 0 ? 1 : t->ext[k]; /* a broadcast dimension is read, never laid out */
        str[k] = t->str[k];
    }
    if (!unset || !set || max_offset(t->n, ext, str, esize) <= 0 || !may_overlap(t->n, ext, str)) return KVATTN_OK;
    /* the set strides overlap on their own (e.g. a head stride below D): validation's own error names that, and
     * blaming the unset strides would send the caller to fields that do not fix it (fifty-eighth session, an audit) */
    int64_t ext_set[5];
    for (int k = 0; k < t->n; k++)
        ext_set[k] = t->field[k] != NULL && t->given[k] == KVATTN_STRIDE_PACKED ? 1 : ext[k];
    if (may_overlap(t->n, ext_set, str)) return KVATTN_OK;
    char u[200] = "", s[200] = "";
    for (int k = 0; k < t->n; k++) {
        if (t->field[k] == NULL) continue;
        char *dst = t->given[k] == KVATTN_STRIDE_PACKED ? u : s;
        size_t len = strlen(dst);
        snprintf(dst + len, 200 - len, "%s%s=%lld", len ? ", " : "", t->field[k], (long long)t->str[k]);
    }
    return kv_set_error(KVATTN_ERR_INVALID_ARGUMENT,
                        "%s: strides left unset (KVATTN_STRIDE_PACKED) take the packed values %s, which with the "
                        "strides set (%s) make the tensor's elements overlap; set those strides too", t->name, u, s);
}

int kv_check_mixed_strides(const kvattn_params *given, const kvattn_params *r) {
    const kvattn_params *g = given;
    const int64_t B = r->batch, H = r->num_heads, Hk = r->num_kv_heads, D = r->head_dim;
    const int q_varlen = r->cu_seqlens_q != NULL, n_varlen = r->cu_seqlens_knew != NULL;
    const int64_t q_rows = q_varlen ? r->total_q : r->seqlen_q, n_rows = n_varlen ? r->total_knew : r->seqlen_knew;
    const int64_t c_rows = r->block_table ? r->num_pages : r->cache_batch,
                  c_cap = r->block_table ? r->page_size : r->cache_capacity;
    const int esize = kv_dtype_size(r->dtype);
#define ROWS(nm, fld, heads, rows, varlen)                                                                           \
    {nm, varlen ? 3 : 4,                                                                                            \
     {varlen ? rows : B, varlen ? heads : rows, varlen ? D : heads, D, 0},                                          \
     {varlen ? #fld "_row_stride" : #fld "_batch_stride", varlen ? #fld "_head_stride" : #fld "_row_stride",        \
      varlen ? NULL : #fld "_head_stride", NULL, NULL},                                                             \
     {varlen ? g->fld##_row_stride : g->fld##_batch_stride, varlen ? g->fld##_head_stride : g->fld##_row_stride,    \
      varlen ? 1 : g->fld##_head_stride, 1, 0},                                                                     \
     {varlen ? r->fld##_row_stride : r->fld##_batch_stride, varlen ? r->fld##_head_stride : r->fld##_row_stride,    \
      varlen ? 1 : r->fld##_head_stride, 1, 0}}
#define CACHE(nm, fld)                                                                                               \
    {nm, 4, {c_rows, c_cap, Hk, D, 0},                                                                              \
     {#fld "_batch_stride", #fld "_row_stride", #fld "_head_stride", NULL, NULL},                                   \
     {g->fld##_batch_stride, g->fld##_row_stride, g->fld##_head_stride, 1, 0},                                      \
     {r->fld##_batch_stride, r->fld##_row_stride, r->fld##_head_stride, 1, 0}}
    const mixed_tensor t[7] = {
        ROWS("q", q, H, q_rows, q_varlen),
        ROWS("out", out, H, q_rows, q_varlen),
        ROWS("k_new", knew, Hk, n_rows, n_varlen),
        ROWS("v_new", vnew, Hk, n_rows, n_varlen),
        CACHE("k_cache", k),
        CACHE("v_cache", v),
        {"softmax_lse", q_varlen ? 2 : 3, {q_varlen ? H : B, q_varlen ? q_rows : H, q_rows, 0, 0},
         {q_varlen ? "lse_head_stride" : "lse_batch_stride", q_varlen ? "lse_row_stride" : "lse_head_stride",
          q_varlen ? NULL : "lse_row_stride", NULL, NULL},
         {q_varlen ? g->lse_head_stride : g->lse_batch_stride, q_varlen ? g->lse_row_stride : g->lse_head_stride,
          g->lse_row_stride, 0, 0},
         {q_varlen ? r->lse_head_stride : r->lse_batch_stride, q_varlen ? r->lse_row_stride : r->lse_head_stride,
          r->lse_row_stride, 0, 0}},
    };
#undef ROWS
#undef CACHE
    const int used[7] = {1, 1, r->k_new != NULL, r->v_new != NULL, 1, 1, r->softmax_lse != NULL};
    for (int i = 0; i < 7; i++) {
        if (!used[i]) continue;
        const int st = check_mixed(&t[i], i == 6 ? 4 : esize);
        if (st != KVATTN_OK) return st;
    }
    return KVATTN_OK;
}

/* ---- tensors the call writes must not share an element with each other ------------------------------------
 * A written tensor as validated above: n dimensions (extents ext, element strides str, the last one of stride 1
 * for the row tensors and caches), elements of esize bytes from base. */
typedef struct written {
    const char *name;
    const char *base;
    int n, esize;
    int64_t ext[4], str[4];
    uintptr_t lo, hi; /* its bytes [lo, hi), lo == hi when empty: set_range */
} written;

/* Sets t's byte range. Call on validated sizes (max_offset does not overflow). */
static void set_range(written *t) {
    t->lo = t->hi = (uintptr_t)t->base;
    for (int k = 0; k < t->n; k++)
        if (t->ext[k] <= 0) return;
    t->hi = t->lo + (uintptr_t)(max_offset(t->n, t->ext, t->str, t->esize) + 1) * (uintptr_t)t->esize;
}

/* 1 when d (in elements) is a difference of two offsets of one layout: d = sum_k c_k str_k with |c_k| <= ext_k - 1.
 * Dimensions dim[0..m) of extent > 1 are in increasing stride order (dims_by_stride), and each stride lies past the
 * reach of the ones before it (may_overlap said no), so at each level, from the largest stride down, only
 * floor(d / s) and floor(d / s) + 1 can leave a remainder within the inner reach: at most 2^m paths. */
static int is_offset_difference(const written *t, const int *dim, int m, int64_t d) {
    if (m == 0) return d == 0;
    const int64_t s = t->str[dim[m - 1]], e = t->ext[dim[m - 1]] - 1;
    int64_t reach = 0;
    for (int a = 0; a < m - 1; a++) reach += (t->ext[dim[a]] - 1) * t->str[dim[a]];
    int64_t c = d / s;
    if (d % s != 0 && d < 0) c--; /* floor */
    for (int64_t k = c; k <= c + 1; k++) {
        if (k < -e || k > e) continue;
        const int64_t r = d - k * s; /* |k * s| <= the tensor's own reach: no overflow */
        if (r >= -reach && r <= reach && is_offset_difference(t, dim, m - 1, r)) return 1;
    }
    return 0;
}

/* 1 when tensors a and b may share a byte. Same element size and layout (k_cache and v_cache as two views of one
 * buffer, e.g. [pages, 2, page_size, Hk, D]): exact. Otherwise: whether their byte ranges intersect. */
static int written_share(const written *a, const written *b) {
    const uintptr_t a0 = a->lo, b0 = b->lo;
    if (a->lo == a->hi || b->lo == b->hi || a->hi <= b->lo || b->hi <= a->lo) return 0;
    int same = a->n == b->n && a->esize == b->esize;
    for (int k = 0; same && k < a->n; k++) same = a->ext[k] == b->ext[k] && a->str[k] == b->str[k];
    if (!same) return 1;
    int dim[5];
    const int m = dims_by_stride(a->n, a->ext, a->str, dim);
    /* b's element j starts d bytes after a's element j: they share a byte with a's element i iff i - j is
     * floor(d / esize) or, when d is not a multiple of esize, that plus one */
    const int64_t d = (int64_t)(b0 - a0), q = d / a->esize - (d % a->esize != 0 && d < 0);
    return is_offset_difference(a, dim, m, q) || (d % a->esize != 0 && is_offset_difference(a, dim, m, q + 1));
}

/* The tensors the call writes, as validated: out, softmax_lse when given, and both caches when k_new/v_new are
 * appended. Returns their number (at most 4). */
static int written_list(const kvattn_params *p, written *w) {
    const int32_t B = p->batch, H = p->num_heads, Hk = p->num_kv_heads, D = p->head_dim;
    const int q_varlen = p->cu_seqlens_q != NULL, esize = kv_dtype_size(p->dtype);
    const int64_t q_rows = q_varlen ? p->total_q : p->seqlen_q;
    int nw = 0;
    w[nw] = (written){"out", (const char *)p->out, 0, esize, {0}, {0}, 0, 0};
    if (!q_varlen) { w[nw].ext[w[nw].n] = B; w[nw].str[w[nw].n++] = p->out_batch_stride; }
    w[nw].ext[w[nw].n] = q_rows; w[nw].str[w[nw].n++] = p->out_row_stride;
    w[nw].ext[w[nw].n] = H; w[nw].str[w[nw].n++] = p->out_head_stride;
    w[nw].ext[w[nw].n] = D; w[nw].str[w[nw].n++] = 1;
    nw++;
    if (p->softmax_lse) {
        w[nw] = (written){"softmax_lse", (const char *)p->softmax_lse, 0, 4, {0}, {0}, 0, 0};
        if (!q_varlen) { w[nw].ext[w[nw].n] = B; w[nw].str[w[nw].n++] = p->lse_batch_stride; }
        w[nw].ext[w[nw].n] = H; w[nw].str[w[nw].n++] = p->lse_head_stride;
        w[nw].ext[w[nw].n] = q_rows; w[nw].str[w[nw].n++] = p->lse_row_stride;
        nw++;
    }
    if (p->k_new) {
        const int64_t rows = p->block_table ? p->num_pages : p->cache_batch,
                      cap = p->block_table ? p->page_size : p->cache_capacity;
        w[nw++] = (written){"k_cache", (const char *)p->k_cache, 4, esize, {rows, cap, Hk, D},
                            {p->k_batch_stride, p->k_row_stride, p->k_head_stride, 1}, 0, 0};
        w[nw++] = (written){"v_cache", (const char *)p->v_cache, 4, esize, {rows, cap, Hk, D},
                            {p->v_batch_stride, p->v_row_stride, p->v_head_stride, 1}, 0, 0};
    }
    for (int k = 0; k < nw; k++) set_range(&w[k]);
    return nw;
}

/* The int32 index arrays the call reads (lengths, offsets, tables), as the backends read them. Returns their number
 * (at most 6). */
static int index_list(const kvattn_params *p, written *ix) {
    const int64_t B = p->batch;
    int n = 0;
#define KV_INDEX(ptr, count) \
    if (p->ptr) ix[n++] = (written){#ptr, (const char *)(p->ptr), 1, 4, {(count)}, {1}, 0, 0}
    KV_INDEX(cu_seqlens_q, B + 1);
    if (p->k_new) KV_INDEX(cu_seqlens_knew, B + 1);
    KV_INDEX(cache_seqlens, B);
    KV_INDEX(cache_leftpad, B);
    if (p->block_table)
        ix[n++] = (written){"block_table", (const char *)p->block_table, 2, 4, {B, p->max_pages_per_seq},
                            {p->block_table_batch_stride, 1}, 0, 0};
    else
        KV_INDEX(cache_batch_idx, B);
#undef KV_INDEX
    for (int k = 0; k < n; k++) set_range(&ix[k]);
    return n;
}

int kv_check_workspace_disjoint(const kvattn_params *p, const void *workspace, size_t bytes) {
    if (p->batch <= 0 || workspace == NULL || bytes == 0) return KVATTN_OK;
    written t[10];
    int n = written_list(p, t);
    n += index_list(p, t + n);
    written ws = {"workspace", (const char *)workspace, 1, 1, {(int64_t)bytes}, {1}, 0, 0};
    set_range(&ws);
    for (int a = 0; a < n; a++)
        RETURN_IF(written_share(&ws, &t[a]), KVATTN_ERR_INVALID_ARGUMENT,
                  "%s and workspace: share memory (%s at %p, the workspace's %zu bytes at %p), and kvattn writes the "
                  "workspace", t[a].name, t[a].name, (const void *)t[a].base, bytes, workspace);
    return KVATTN_OK;
}

#define CHECK_STRIDE(name, v) \
    RETURN_IF((v) < 0, KVATTN_ERR_INVALID_ARGUMENT, "%s: stride %s=%lld must be >= 0", name, #v, (long long)(v))

/* A row tensor (q, k_new, v_new, out): varlen [total, heads, D] or fixed [B, seqlen, heads, D]; written: the
 * call writes it (out), so its elements must not overlap. */
static int check_rows(const char *name, int varlen, int32_t B, int32_t rows, int32_t heads, int32_t D, int esize,
                      int written, int64_t batch_stride, int64_t row_stride, int64_t head_stride) {
    RETURN_IF(batch_stride < 0 || row_stride < 0 || head_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,
              "%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0", name, (long long)batch_stride,
              (long long)row_stride, (long long)head_stride);
    int64_t ext[4], str[4];
    int n = 0;
    if (!varlen) { ext[n] = B; str[n++] = batch_stride; }
    ext[n] = rows; str[n++] = row_stride;
    ext[n] = heads; str[n++] = head_stride;
    ext[n] = D; str[n++] = 1;
    RETURN_IF(max_offset(n, ext, str, esize) < 0, KVATTN_ERR_INVALID_ARGUMENT,
              "%s: shape and strides (batch=%lld, row=%lld, head=%lld) overflow int64 offsets", name,
              (long long)batch_stride, (long long)row_stride, (long long)head_stride);
    RETURN_IF(written && may_overlap(n, ext, str), KVATTN_ERR_INVALID_ARGUMENT,
              "%s: strides (batch=%lld, row=%lld, head=%lld) make elements overlap (rows=%d, heads=%d, D=%d), and "
              "kvattn writes it", name, (long long)batch_stride, (long long)row_stride, (long long)head_stride,
              rows, heads, D);
    return KVATTN_OK;
}

static int check_cache(const char *name, const kvattn_params *p, int64_t batch_stride, int64_t row_stride,
                       int64_t head_stride) {
    RETURN_IF(batch_stride < 0 || row_stride < 0 || head_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,
              "%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0", name, (long long)batch_stride,
              (long long)row_stride, (long long)head_stride);
    int64_t ext[4] = {p->block_table ? p->num_pages : p->cache_batch,
                      p->block_table ? p->page_size : p->cache_capacity, p->num_kv_heads, p->head_dim};
    int64_t str[4] = {batch_stride, row_stride, head_stride, 1};
    RETURN_IF(max_offset(4, ext, str, kv_dtype_size(p->dtype)) < 0, KVATTN_ERR_INVALID_ARGUMENT,
              "%s: shape [%lld, %lld, %lld, %lld] with strides (%lld, %lld, %lld) overflows int64 offsets", name,
              (long long)ext[0], (long long)ext[1], (long long)ext[2], (long long)ext[3],
              (long long)batch_stride, (long long)row_stride, (long long)head_stride);
    /* appending writes the cache: its rows must not overlap (a cache only read may broadcast, e.g. batch stride 0) */
    RETURN_IF(p->k_new && may_overlap(4, ext, str), KVATTN_ERR_INVALID_ARGUMENT,
              "%s: shape [%lld, %lld, %lld, %lld] with strides (%lld, %lld, %lld) makes elements overlap, and "
              "k_new/v_new are appended into it", name, (long long)ext[0], (long long)ext[1], (long long)ext[2],
              (long long)ext[3], (long long)batch_stride, (long long)row_stride, (long long)head_stride);
    return KVATTN_OK;
}

static const char *dtype_name(int dtype) {
    return dtype == KVATTN_F32 ? "f32" : dtype == KVATTN_F16 ? "f16" : dtype == KVATTN_BF16 ? "bf16" : "?";
}

#define FLAG01(field)                                                                                        \
    RETURN_IF(p->field != 0 && p->field != 1, KVATTN_ERR_INVALID_ARGUMENT, #field ": %d must be 0 or 1",      \
              (int)p->field)

int kv_validate_args(const kvattn_params *p, int backend) {
    int st;
    RETURN_IF(p == NULL, KVATTN_ERR_INVALID_ARGUMENT, "params: NULL");
    RETURN_IF(p->struct_size != (int64_t)sizeof(kvattn_params), KVATTN_ERR_INVALID_ARGUMENT,
              "params: struct_size=%lld but this library's kvattn_params has %zu bytes (use kvattn_params_default)",
              (long long)p->struct_size, sizeof(kvattn_params));
    RETURN_IF(backend != KVATTN_BACKEND_CPU && backend != KVATTN_BACKEND_CUDA, KVATTN_ERR_INVALID_ARGUMENT,
              "backend: %d is neither KVATTN_BACKEND_CPU (0) nor KVATTN_BACKEND_CUDA (1)", backend);
    RETURN_IF(p->dtype != KVATTN_F32 && p->dtype != KVATTN_F16 && p->dtype != KVATTN_BF16,
              KVATTN_ERR_INVALID_ARGUMENT, "dtype: %d is not a kvattn_dtype (0 f32, 1 f16, 2 bf16)", (int)p->dtype);
    RETURN_IF(backend == KVATTN_BACKEND_CUDA && p->dtype == KVATTN_F32, KVATTN_ERR_UNSUPPORTED,
              "dtype: f32 is supported on the CPU backend only (CUDA takes f16 or bf16)");

    const int32_t B = p->batch, H = p->num_heads, Hk = p->num_kv_heads, D = p->head_dim;
    RETURN_IF(B < 0, KVATTN_ERR_INVALID_ARGUMENT, "batch: B=%d must be >= 0", B);
    /* the kernels step over sequences in int32 by up to a block's threads */
    RETURN_IF(B > KV_MAX_TOKENS, KVATTN_ERR_INVALID_ARGUMENT, "batch: B=%d exceeds %d (2^31 - 2^16)", B,
              KV_MAX_TOKENS);
    RETURN_IF(H <= 0, KVATTN_ERR_INVALID_ARGUMENT, "num_heads: H=%d must be >= 1", H);
    RETURN_IF(Hk <= 0, KVATTN_ERR_INVALID_ARGUMENT, "num_kv_heads: Hk=%d must be >= 1", Hk);
    RETURN_IF(H % Hk != 0, KVATTN_ERR_INVALID_ARGUMENT, "num_heads: H=%d not divisible by num_kv_heads=%d", H, Hk);
    RETURN_IF(D <= 0, KVATTN_ERR_INVALID_ARGUMENT, "head_dim: D=%d must be >= 1", D);
    RETURN_IF(backend == KVATTN_BACKEND_CUDA && D > 256, KVATTN_ERR_UNSUPPORTED,
              "head_dim: D=%d is larger than 256, the most the CUDA backend supports", D);
    RETURN_IF(D > 65536, KVATTN_ERR_UNSUPPORTED, "head_dim: D=%d is larger than 65536, the most kvattn supports", D);

    /* options */
    FLAG01(causal);
    FLAG01(batch_invariant);
    FLAG01(rotary_interleaved);
    RETURN_IF(isnan(p->softmax_scale) || isinf(p->softmax_scale) || p->softmax_scale < 0.0f,
              KVATTN_ERR_INVALID_ARGUMENT, "softmax_scale: %g must be finite and >= 0 (0 = 1/sqrt(D))",
              (double)p->softmax_scale);
    /* the CUDA kernels work in log2 units: softmax_scale * log2(e) must stay finite in fp32 (else 0 * inf = NaN for
     * every zero dot product) */
    RETURN_IF(p->softmax_scale > 2.3e38f, KVATTN_ERR_INVALID_ARGUMENT,
              "softmax_scale: %g exceeds 2.3e38 (softmax_scale * log2(e) must be finite in fp32)",
              (double)p->softmax_scale);
    RETURN_IF(isnan(p->softcap) || isinf(p->softcap) || p->softcap < 0.0f, KVATTN_ERR_INVALID_ARGUMENT,
              "softcap: %g must be finite and >= 0 (0 = off)", (double)p->softcap);
    RETURN_IF(p->window_left < -1, KVATTN_ERR_INVALID_ARGUMENT, "window_left: %d must be >= -1 (-1 = unbounded)",
              p->window_left);
    RETURN_IF(p->window_right < -1, KVATTN_ERR_INVALID_ARGUMENT,
              "window_right: %d must be >= -1 (-1 = unbounded)", p->window_right);
    RETURN_IF(p->num_splits < 0, KVATTN_ERR_INVALID_ARGUMENT, "num_splits: %d must be >= 0 (0 = automatic)",
              p->num_splits);

    /* queries and outputs */
    const int q_varlen = p->cu_seqlens_q != NULL;
    int32_t q_rows;
    if (q_varlen) {
        RETURN_IF(p->total_q < 0, KVATTN_ERR_INVALID_ARGUMENT, "total_q: %d must be >= 0", p->total_q);
        q_rows = p->total_q;
    } else {
        RETURN_IF(p->seqlen_q < 0, KVATTN_ERR_INVALID_ARGUMENT, "seqlen_q: %d must be >= 0", p->seqlen_q);
        RETURN_IF((int64_t)B * p->seqlen_q > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,
                  "seqlen_q: B=%d times seqlen_q=%d rows exceeds 2^31-1", B, p->seqlen_q);
        q_rows = p->seqlen_q;
        /* a total_q that disagrees with the fixed-length shape means cu_seqlens_q was forgotten: the call would
         * read seqlen_q rows per sequence (often 0) and write no output where the caller expects some */
        RETURN_IF(B > 0 && p->total_q != 0 && (int64_t)p->total_q != (int64_t)B * p->seqlen_q,
                  KVATTN_ERR_INVALID_ARGUMENT,
                  "total_q: %d is set but cu_seqlens_q is NULL, so the call is fixed-length with seqlen_q=%d rows per "
                  "sequence (B=%d); pass cu_seqlens_q for varlen queries, or total_q=0", p->total_q, p->seqlen_q, B);
    }
    if (B > 0) {
        RETURN_IF(p->q == NULL, KVATTN_ERR_INVALID_ARGUMENT, "q: NULL with batch=%d", B);
        RETURN_IF(p->out == NULL, KVATTN_ERR_INVALID_ARGUMENT, "out: NULL with batch=%d", B);
        RETURN_IF(p->k_cache == NULL, KVATTN_ERR_INVALID_ARGUMENT, "k_cache: NULL with batch=%d", B);
        RETURN_IF(p->v_cache == NULL, KVATTN_ERR_INVALID_ARGUMENT, "v_cache: NULL with batch=%d", B);
        RETURN_IF(p->cache_seqlens == NULL, KVATTN_ERR_INVALID_ARGUMENT, "cache_seqlens: NULL with batch=%d", B);
    }
    const int esize = kv_dtype_size(p->dtype);
    if ((st = check_rows("q", q_varlen, B, q_rows, H, D, esize, 0, p->q_batch_stride, p->q_row_stride,
                         p->q_head_stride)))
        return st;
    if ((st = check_rows("out", q_varlen, B, q_rows, H, D, esize, 1, p->out_batch_stride, p->out_row_stride,
                         p->out_head_stride)))
        return st;
    if (p->softmax_lse) {
        RETURN_IF(p->lse_batch_stride < 0 || p->lse_head_stride < 0 || p->lse_row_stride < 0,
                  KVATTN_ERR_INVALID_ARGUMENT, "softmax_lse: strides (batch=%lld, head=%lld, row=%lld) must be >= 0",
                  (long long)p->lse_batch_stride, (long long)p->lse_head_stride, (long long)p->lse_row_stride);
        int64_t ext[3] = {B, H, q_rows}, str[3] = {p->lse_batch_stride, p->lse_head_stride, p->lse_row_stride};
        RETURN_IF(max_offset(q_varlen ? 2 : 3, q_varlen ? ext + 1 : ext, q_varlen ? str + 1 : str, 4) < 0,
                  KVATTN_ERR_INVALID_ARGUMENT, "softmax_lse: shape and strides (batch=%lld, head=%lld, row=%lld) "
                  "overflow int64 offsets", (long long)p->lse_batch_stride, (long long)p->lse_head_stride,
                  (long long)p->lse_row_stride);
        RETURN_IF(may_overlap(q_varlen ? 2 : 3, q_varlen ? ext + 1 : ext, q_varlen ? str + 1 : str),
                  KVATTN_ERR_INVALID_ARGUMENT, "softmax_lse: strides (batch=%lld, head=%lld, row=%lld) make elements "
                  "overlap (B=%d, H=%d, rows=%d), and kvattn writes it", (long long)p->lse_batch_stride,
                  (long long)p->lse_head_stride, (long long)p->lse_row_stride, B, H, q_rows);
    }

    /* new tokens */
    RETURN_IF((p->k_new == NULL) != (p->v_new == NULL), KVATTN_ERR_INVALID_ARGUMENT,
              "k_new/v_new: must be given together (k_new=%s, v_new=%s)", p->k_new ? "set" : "NULL",
              p->v_new ? "set" : "NULL");
    if (p->k_new) {
        const int n_varlen = p->cu_seqlens_knew != NULL;
        int32_t n_rows;
        if (n_varlen) {
            RETURN_IF(p->total_knew < 0, KVATTN_ERR_INVALID_ARGUMENT, "total_knew: %d must be >= 0", p->total_knew);
            n_rows = p->total_knew;
        } else {
            RETURN_IF(p->seqlen_knew < 0, KVATTN_ERR_INVALID_ARGUMENT, "seqlen_knew: %d must be >= 0",
                      p->seqlen_knew);
            RETURN_IF((int64_t)B * p->seqlen_knew > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,
                      "seqlen_knew: B=%d times seqlen_knew=%d rows exceeds 2^31-1", B, p->seqlen_knew);
            n_rows = p->seqlen_knew;
            RETURN_IF(B > 0 && p->total_knew != 0 && (int64_t)p->total_knew != (int64_t)B * p->seqlen_knew,
                      KVATTN_ERR_INVALID_ARGUMENT,
                      "total_knew: %d is set but cu_seqlens_knew is NULL, so the call is fixed-length with "
                      "seqlen_knew=%d new tokens per sequence (B=%d); pass cu_seqlens_knew for varlen new tokens, or "
                      "total_knew=0", p->total_knew, p->seqlen_knew, B);
        }
        if ((st = check_rows("k_new", n_varlen, B, n_rows, Hk, D, esize, 0, p->knew_batch_stride,
                             p->knew_row_stride, p->knew_head_stride)))
            return st;
        if ((st = check_rows("v_new", n_varlen, B, n_rows, Hk, D, esize, 0, p->vnew_batch_stride,
                             p->vnew_row_stride, p->vnew_head_stride)))
            return st;
    }

    /* cache layout */
    if (p->block_table) {
        RETURN_IF(p->cache_batch_idx != NULL, KVATTN_ERR_INVALID_ARGUMENT,
                  "cache_batch_idx: must be NULL in paged mode (block_table is set)");
        RETURN_IF(p->page_size < 1, KVATTN_ERR_INVALID_ARGUMENT, "k_cache: page_size=%d must be >= 1", p->page_size);
        RETURN_IF(p->num_pages < 0, KVATTN_ERR_INVALID_ARGUMENT, "k_cache: num_pages=%d must be >= 0", p->num_pages);
        RETURN_IF(p->max_pages_per_seq < 0, KVATTN_ERR_INVALID_ARGUMENT, "block_table: max_pages_per_seq=%d must be >= 0",
                  p->max_pages_per_seq);
        RETURN_IF((int64_t)p->max_pages_per_seq * p->page_size > KV_MAX_TOKENS, KVATTN_ERR_INVALID_ARGUMENT,
                  "block_table: max_pages_per_seq=%d times page_size=%d exceeds %d tokens (2^31 - 2^16)",
                  p->max_pages_per_seq, p->page_size, KV_MAX_TOKENS);
        RETURN_IF(p->block_table_batch_stride < p->max_pages_per_seq, KVATTN_ERR_INVALID_ARGUMENT,
                  "block_table: block_table_batch_stride=%lld must be >= max_pages_per_seq=%d",
                  (long long)p->block_table_batch_stride, p->max_pages_per_seq);
        int64_t ext[2] = {B, p->max_pages_per_seq}, str[2] = {p->block_table_batch_stride, 1};
        RETURN_IF(max_offset(2, ext, str, 4) < 0, KVATTN_ERR_INVALID_ARGUMENT,
                  "block_table: B=%d rows of stride %lld overflow int64 offsets", B,
                  (long long)p->block_table_batch_stride);
    } else {
        RETURN_IF(p->cache_batch <= 0 && B > 0, KVATTN_ERR_INVALID_ARGUMENT, "k_cache: cache_batch=%d must be >= 1",
                  p->cache_batch);
        RETURN_IF(p->cache_batch < 0, KVATTN_ERR_INVALID_ARGUMENT, "k_cache: cache_batch=%d must be >= 0",
                  p->cache_batch);
        RETURN_IF(p->cache_capacity < 0, KVATTN_ERR_INVALID_ARGUMENT, "k_cache: cache_capacity=%d must be >= 0",
                  p->cache_capacity);
        RETURN_IF(p->cache_capacity > KV_MAX_TOKENS, KVATTN_ERR_INVALID_ARGUMENT,
                  "k_cache: cache_capacity=%d exceeds %d tokens (2^31 - 2^16)", p->cache_capacity, KV_MAX_TOKENS);
        RETURN_IF(p->cache_batch_idx == NULL && B > p->cache_batch, KVATTN_ERR_INVALID_ARGUMENT,
                  "k_cache: cache_batch=%d is smaller than batch=%d and cache_batch_idx is NULL", p->cache_batch, B);
    }
    if ((st = check_cache("k_cache", p, p->k_batch_stride, p->k_row_stride, p->k_head_stride))) return st;
    if ((st = check_cache("v_cache", p, p->v_batch_stride, p->v_row_stride, p->v_head_stride))) return st;

    /* rotary */
    RETURN_IF((p->rotary_cos == NULL) != (p->rotary_sin == NULL), KVATTN_ERR_INVALID_ARGUMENT,
              "rotary_cos/rotary_sin: must be given together (cos=%s, sin=%s)", p->rotary_cos ? "set" : "NULL",
              p->rotary_sin ? "set" : "NULL");
    if (p->rotary_cos) {
        const int32_t R = p->rotary_dim;
        RETURN_IF(R <= 0 || R % 2 != 0 || R > D, KVATTN_ERR_INVALID_ARGUMENT,
                  "rotary_dim: R=%d must be even and in [2, head_dim=%d]", R, D);
        RETURN_IF(p->rotary_max_pos < 0, KVATTN_ERR_INVALID_ARGUMENT, "rotary_max_pos: %d must be >= 0",
                  p->rotary_max_pos);
        RETURN_IF(p->rotary_dtype != KVATTN_F32 && p->rotary_dtype != p->dtype, KVATTN_ERR_INVALID_ARGUMENT,
                  "rotary_dtype: %d must be f32 (0) or the dtype of q (%s)", (int)p->rotary_dtype, dtype_name(p->dtype));
        RETURN_IF(p->rotary_row_stride < 0 || (p->rotary_row_stride != 0 && p->rotary_row_stride < R / 2),
                  KVATTN_ERR_INVALID_ARGUMENT, "rotary_row_stride: %lld must be 0 or >= rotary_dim/2=%d",
                  (long long)p->rotary_row_stride, R / 2);
        int64_t ext[2] = {p->rotary_max_pos, R / 2}, str[2] = {p->rotary_row_stride ? p->rotary_row_stride : R / 2, 1};
        RETURN_IF(max_offset(2, ext, str, kv_dtype_size(p->rotary_dtype)) < 0, KVATTN_ERR_INVALID_ARGUMENT,
                  "rotary_cos: rotary_max_pos=%d rows of stride %lld overflow int64 offsets", p->rotary_max_pos,
                  (long long)str[0]);
    }

    /* ALiBi */
    if (p->alibi_slopes) {
        RETURN_IF(p->alibi_batch_stride != 0 && p->alibi_batch_stride < H, KVATTN_ERR_INVALID_ARGUMENT,
                  "alibi_batch_stride: %lld must be 0 ([H] slopes) or >= num_heads=%d ([B, H] slopes)",
                  (long long)p->alibi_batch_stride, H);
        int64_t ext[2] = {B, H}, str[2] = {p->alibi_batch_stride, 1};
        RETURN_IF(max_offset(2, ext, str, 4) < 0, KVATTN_ERR_INVALID_ARGUMENT,
                  "alibi_slopes: B=%d rows of stride %lld overflow int64 offsets", B, (long long)p->alibi_batch_stride);
    }
    /* every base address a multiple of its element size: the CUDA kernels load and store whole elements (a
     * misaligned fp32 lse store or int32 length load faults, and ends the CUDA context), and C reads them as such */
    {
        const int rsize = kv_dtype_size(p->rotary_dtype);
        const struct { const char *name; const void *ptr; int size; } a[] = {
            {"q", p->q, esize}, {"out", p->out, esize}, {"k_new", p->k_new, esize}, {"v_new", p->v_new, esize},
            {"k_cache", p->k_cache, esize}, {"v_cache", p->v_cache, esize}, {"softmax_lse", p->softmax_lse, 4},
            {"cu_seqlens_q", p->cu_seqlens_q, 4}, {"cu_seqlens_knew", p->cu_seqlens_knew, 4},
            {"cache_seqlens", p->cache_seqlens, 4}, {"cache_leftpad", p->cache_leftpad, 4},
            {"cache_batch_idx", p->cache_batch_idx, 4}, {"block_table", p->block_table, 4},
            {"rotary_cos", p->rotary_cos, rsize}, {"rotary_sin", p->rotary_sin, rsize},
            {"alibi_slopes", p->alibi_slopes, 4}};
        for (size_t k = 0; k < sizeof a / sizeof a[0]; k++)
            RETURN_IF(a[k].ptr != NULL && (uintptr_t)a[k].ptr % (uintptr_t)a[k].size != 0, KVATTN_ERR_INVALID_ARGUMENT,
                      "%s: address %p is not a multiple of its element size (%d bytes)", a[k].name, a[k].ptr,
                      a[k].size);
    }
    if (B > 0) {
        /* tensors the call writes, pairwise: out, softmax_lse, and the caches when k_new/v_new are appended */
        written w[4], ix[6];
        const int nw = written_list(p, w), nix = index_list(p, ix);
        for (int a = 0; a < nw; a++)
            for (int b = a + 1; b < nw; b++)
                RETURN_IF(written_share(&w[a], &w[b]), KVATTN_ERR_INVALID_ARGUMENT,
                          "%s and %s: share memory (%s at %p, %s at %p), and kvattn writes both%s", w[a].name,
                          w[b].name, w[a].name, (const void *)w[a].base, w[b].name, (const void *)w[b].base,
                          p->k_new && b >= nw - 2 ? " (k_new/v_new are appended into the caches)" : "");
        /* the length arrays and tables are read again after those writes may have begun (the CUDA kernels re-read
         * a sequence's lengths per work item): one that shares memory with a written tensor would hand them
         * rewritten lengths, so it is refused */
        for (int i = 0; i < nix; i++)
            for (int a = 0; a < nw; a++)
                RETURN_IF(written_share(&ix[i], &w[a]), KVATTN_ERR_INVALID_ARGUMENT,
                          "%s and %s: share memory (%s at %p, %s at %p); kvattn writes %s and reads %s after that",
                          ix[i].name, w[a].name, ix[i].name, (const void *)ix[i].base, w[a].name,
                          (const void *)w[a].base, w[a].name, ix[i].name);
    }
    return KVATTN_OK;
}
