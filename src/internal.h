/* internal.h — definitions shared by the CPU backend and the CUDA kernels: the per-sequence lengths, the one
 * cache-address helper for both layouts, the mask, rotary and ALiBi (each defined once), and error helpers.
 * B sequences, H query heads, Hk KV heads, D head dim (as in kvattn.h). Usable from C11 and CUDA C. */
#ifndef KVATTN_INTERNAL_H
#define KVATTN_INTERNAL_H

#include "kvattn.h"
#include <stdint.h>

#ifdef __CUDACC__
#define KV_HD static __host__ __device__ __forceinline__
#else
#define KV_HD static inline
#endif

#ifndef __CUDACC__
#include <math.h>
#endif

/* ---- errors (host only) ------------------------------------------------------------------------------- */
#ifndef __CUDACC__
int kv_set_error(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
#else
extern "C" int kv_set_error(int status, const char *fmt, ...);
#endif
#ifndef __CUDACC__
void kv_clear_error(void); /* at the start of every public call that returns a status */
#else
extern "C" void kv_clear_error(void);
#endif
#define KV_MAX_TOKENS KVATTN_MAX_CACHE_TOKENS
/* RETURN_IF(cond, status, "fmt", ...): one-line checks that keep validation readable. */
#define RETURN_IF(cond, status, ...)                                                                         \
    do {                                                                                                     \
        if (cond) return kv_set_error((status), __VA_ARGS__);                                                \
    } while (0)

/* ---- one sequence's lengths (SPEC "What one call does") ----------------------------------------------- */
typedef struct kv_seq {
    int32_t n_q;     /* queries of this sequence */
    int32_t q_row0;  /* varlen: first global row; fixed: b * seqlen_q (rows counted as b*Sq + i) */
    int32_t n_new;   /* tokens appended */
    int32_t new_row0;
    int32_t S;       /* cache_seqlens[b] */
    int32_t L;       /* cache_leftpad[b] or 0 */
    int32_t C;       /* capacity in tokens */
} kv_seq;

/* Reads the lengths of sequence b from host-visible (CPU) or device-visible (CUDA) memory. */
KV_HD kv_seq kv_seq_get(const kvattn_params *p, int b) {
    kv_seq s;
    if (p->cu_seqlens_q) {
        s.q_row0 = p->cu_seqlens_q[b];
        s.n_q = p->cu_seqlens_q[b + 1] - s.q_row0;
    } else {
        s.q_row0 = b * p->seqlen_q;
        s.n_q = p->seqlen_q;
    }
    if (p->k_new) {
        if (p->cu_seqlens_knew) {
            s.new_row0 = p->cu_seqlens_knew[b];
            s.n_new = p->cu_seqlens_knew[b + 1] - s.new_row0;
        } else {
            s.new_row0 = b * p->seqlen_knew;
            s.n_new = p->seqlen_knew;
        }
    } else {
        s.new_row0 = 0;
        s.n_new = 0;
    }
    s.S = p->cache_seqlens ? p->cache_seqlens[b] : 0;
    s.L = p->cache_leftpad ? p->cache_leftpad[b] : 0;
    s.C = p->block_table ? p->max_pages_per_seq * p->page_size : p->cache_capacity;
    return s;
}

/* Offset in elements of row i of sequence b in a row tensor (q, k_new, v_new, out). In varlen mode row0 is
 * cu_seqlens[b]; in fixed mode the rows of b start at b * batch_stride. */
KV_HD int64_t kv_row_offset(int varlen, int b, int32_t row0, int32_t i, int64_t batch_stride, int64_t row_stride) {
    return varlen ? (int64_t)(row0 + i) * row_stride : (int64_t)b * batch_stride + (int64_t)i * row_stride;
}

/* THE cache-address helper for both layouts. kv_cache_offset: the element offset of cache position pos, kv head
 * kv_head of sequence b with one tensor's strides (`cache_row` = cache_batch_idx[b] or b, contiguous mode only),
 * or -1 if the page index there is outside [0, num_pages) (paged) or the position is outside the capacity.
 * Its two steps, for callers that read the block table early (a prefetch) or address K and V with one lookup:
 * kv_page_of is the table read (paged mode; -1 when pos is outside the table), kv_cache_offset_at the rest
 * given that page (ignored when contiguous). */
KV_HD int32_t kv_page_of(const kvattn_params *p, int b, int32_t pos) {
    int32_t page_slot = pos / p->page_size;
    if (pos < 0 || page_slot >= p->max_pages_per_seq) return -1;
    return p->block_table[(int64_t)b * p->block_table_batch_stride + page_slot];
}
KV_HD int64_t kv_cache_offset_at(const kvattn_params *p, int32_t page, int32_t cache_row, int32_t pos, int kv_head,
                                 int64_t batch_stride, int64_t row_stride, int64_t head_stride) {
    int64_t outer;
    int32_t row;
    if (p->block_table) {
        if (page < 0 || page >= p->num_pages) return -1; /* also pos outside the table (kv_page_of: -1) */
        outer = page;
        row = pos % p->page_size; /* pos >= 0 here */
    } else {
        if (pos < 0 || pos >= p->cache_capacity || cache_row < 0 || cache_row >= p->cache_batch) return -1;
        outer = cache_row;
        row = pos;
    }
    return outer * batch_stride + (int64_t)row * row_stride + (int64_t)kv_head * head_stride;
}
KV_HD int64_t kv_cache_offset(const kvattn_params *p, int b, int32_t cache_row, int32_t pos, int kv_head,
                              int64_t batch_stride, int64_t row_stride, int64_t head_stride) {
    return kv_cache_offset_at(p, p->block_table ? kv_page_of(p, b, pos) : 0, cache_row, pos, kv_head, batch_stride,
                              row_stride, head_stride);
}

/* ---- the mask: the visible key indices j (relative to L) of query row i, as a half-open range ----------
 * Query i sits at key index i + s_k - n_q (bottom-right alignment). Causal is the window with right = 0. */
typedef struct kv_range { int32_t lo, hi; } kv_range;
KV_HD kv_range kv_visible_keys(int32_t i, int32_t n_q, int32_t s_k, int causal, int32_t window_left,
                               int32_t window_right) {
    int64_t qpos = (int64_t)i + s_k - n_q;
    int64_t lo = 0, hi = s_k;
    int32_t wr = causal ? 0 : window_right;
    if (wr >= 0 && qpos + wr + 1 < hi) hi = qpos + wr + 1;
    if (window_left >= 0 && qpos - window_left > lo) lo = qpos - window_left;
    kv_range r;
    if (hi < lo) hi = lo;
    r.lo = (int32_t)lo;
    r.hi = (int32_t)(hi < 0 ? 0 : hi);
    if (r.lo > r.hi) r.lo = r.hi;
    return r;
}

/* ALiBi bias for query key-index qpos and key j (both relative to L). */
KV_HD float kv_alibi_bias(float slope, int32_t qpos, int32_t j) {
    int32_t d = qpos - j;
    return -slope * (float)(d < 0 ? -d : d);
}

/* Rotary pairing: channel c (< R) is paired with kv_rope_partner(c); the pair index (row of cos/sin) is
 * kv_rope_pair(c); the first channel of a pair gets x*cos - y*sin, the second x*sin + y*cos ... written as
 * out[c] = x[c] * cos - x[partner] * sin * kv_rope_sign(c) with sign -1 for the second of the pair. */
KV_HD int kv_rope_pair(int c, int R, int interleaved) { return interleaved ? c / 2 : (c < R / 2 ? c : c - R / 2); }
KV_HD int kv_rope_partner(int c, int R, int interleaved) {
    return interleaved ? (c ^ 1) : (c < R / 2 ? c + R / 2 : c - R / 2);
}
KV_HD float kv_rope_sign(int c, int R, int interleaved) {
    int first = interleaved ? ((c & 1) == 0) : (c < R / 2);
    return first ? 1.0f : -1.0f;
}

/* Softcap applied to a scaled score. */
KV_HD float kv_softcap(float score, float softcap) { return softcap > 0.0f ? softcap * tanhf(score / softcap) : score; }

/* Resolved softmax scale (0 means 1/sqrt(D)). */
KV_HD float kv_softmax_scale(const kvattn_params *p) {
    return p->softmax_scale != 0.0f ? p->softmax_scale : 1.0f / sqrtf((float)p->head_dim);
}

/* Element size of a kvattn_dtype. */
KV_HD int kv_dtype_size(int dtype) { return dtype == KVATTN_F32 ? 4 : 2; }

/* ---- backends (entry points called by api.c after kvattn_validate) ------------------------------------- */
#ifdef __cplusplus
extern "C" {
#endif
/* validate.c: SPEC "Bad input" for everything visible from the arguments (all backends). */
int kv_validate_args(const kvattn_params *p, int backend);
/* given: the caller's params; r: the same with KVATTN_STRIDE_PACKED strides resolved (api.c). Refuses a tensor whose
 * set and unset strides together make its elements overlap, naming the unset fields. */
int kv_check_mixed_strides(const kvattn_params *given, const kvattn_params *r);
/* Refuses a workspace whose first bytes (the ones the call writes) share memory with a tensor the call writes or an
 * index array it reads (lengths, tables), naming it. */
int kv_check_workspace_disjoint(const kvattn_params *p, const void *workspace, size_t bytes);
int kv_cpu_forward(const kvattn_params *p);
int kv_cuda_available(void);
/* KVATTN_OK when the CUDA backend can run on the current device, else the status and reason (no device, a build
 * without CUDA, a device the build's arch cannot run). */
int kv_cuda_ready(void);
/* api.c: whether kernels built for CUDA_ARCH `arch` ("90a", "80", "100f") run on compute capability major.minor
 * (1 also for an arch string of another form, which is not judged). */
int kv_arch_runs_on(const char *arch, int major, int minor);
int kv_cuda_check(const kvattn_params *p);              /* backend-specific support (head dim, dtype) */
size_t kv_cuda_workspace_size(const kvattn_params *p);
int kv_cuda_forward(const kvattn_params *p, void *workspace, size_t workspace_bytes, void *stream);
int kv_cuda_status_read(const void *workspace, void *stream, kvattn_device_status *out);
#ifdef __cplusplus
}
#endif

#endif /* KVATTN_INTERNAL_H */
