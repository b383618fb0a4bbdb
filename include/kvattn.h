/* kvattn.h — the one public header of kvattn: exact attention for LLM generation over ragged batches and
 * a KV cache updated in place (contiguous, or paged with any page size >= 1).
 * What one call computes is defined in SPEC.md (docs/SPEC.md); every backend (CPU, CUDA) computes exactly that.
 * In short, for each sequence b with S = cache_seqlens[b] tokens cached, n_new appended and n_q queries: the new
 * keys (rotated) and values are stored at positions S .. S + n_new - 1 first; then query row i sits at position
 * S + n_new - n_q + i (bottom-right aligned, causal or not, also its rotary position) and sees the keys at
 * positions [cache_leftpad[b], S + n_new) that the causal / window masks leave; score = softmax_scale * q.k, then
 * softcap * tanh(score / softcap), then - slope_h * |query position - key position| with ALiBi. A row that sees no
 * key gets out = 0 and lse = -inf. Accumulation is fp32.
 *
 * Dimensions used throughout: B sequences, H query heads, Hk key/value heads (H % Hk == 0), D head dim. */
#ifndef KVATTN_H
#define KVATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define KVATTN_API
#else
#define KVATTN_API __attribute__((visibility("default")))
#endif

/* ---- version ------------------------------------------------------------------------------------------ */
#define KVATTN_VERSION_MAJOR 0
#define KVATTN_VERSION_MINOR 2
#define KVATTN_VERSION_PATCH 0
#define KVATTN_VERSION_NUMBER (KVATTN_VERSION_MAJOR * 10000 + KVATTN_VERSION_MINOR * 100 + KVATTN_VERSION_PATCH)

/* Returns KVATTN_VERSION_NUMBER of the library actually linked (compare with the macro of the header). */
KVATTN_API unsigned kvattn_version_number(void);
/* Returns the version as "MAJOR.MINOR.PATCH". */
KVATTN_API const char *kvattn_version_string(void);

/* ---- status codes (stable numbers) -------------------------------------------------------------------- */
typedef enum {
    KVATTN_OK = 0,
    KVATTN_ERR_INVALID_ARGUMENT = 1, /* something visible from the arguments is wrong (null, size, stride) */
    KVATTN_ERR_UNSUPPORTED = 2,      /* valid request this backend does not implement (dtype, head dim)  */
    KVATTN_ERR_WORKSPACE = 3,        /* workspace missing or smaller than kvattn_workspace_size()        */
    KVATTN_ERR_BAD_DATA = 4,         /* a data-dependent check failed (lengths, leftpad, capacity, page)  */
    KVATTN_ERR_NOT_AVAILABLE = 5,    /* backend not built, no device, or a device the build cannot run   */
    KVATTN_ERR_OUT_OF_PAGES = 6,     /* page manager: not enough free pages; nothing was changed         */
    KVATTN_ERR_OUT_OF_MEMORY = 7,    /* a host allocation failed (page manager, CPU scratch)             */
    KVATTN_ERR_CUDA = 8,             /* the CUDA runtime reported an error (message has its text)        */
    KVATTN_ERR_INTERNAL = 9          /* a bug in kvattn; please report                                   */
} kvattn_status;

/* Returns a static string naming a status code ("KVATTN_ERR_BAD_DATA"); never NULL. */
KVATTN_API const char *kvattn_status_string(int status);
/* Returns the detail of the failure of the last kvattn call made on this thread that returns a status
 * ("k_cache: page_size=0 must be >= 1"), or "" when that call succeeded (every such call clears it first). The
 * pointer stays valid until the next kvattn call on this thread. */
KVATTN_API const char *kvattn_last_error(void);

/* ---- element types and backends ----------------------------------------------------------------------- */
typedef enum { KVATTN_F32 = 0, KVATTN_F16 = 1, KVATTN_BF16 = 2 } kvattn_dtype;
typedef enum { KVATTN_BACKEND_CPU = 0, KVATTN_BACKEND_CUDA = 1 } kvattn_backend;

/* Returns 1 if the backend is compiled in and usable now, else 0 and kvattn_last_error() says why. For CUDA: the
 * current device is present and this build's kernels can run on it (make CUDA_ARCH=..., sm_90a by default). It
 * creates no CUDA context. */
KVATTN_API int kvattn_backend_available(int backend);

/* ---- the params of one call ----------------------------------------------------------------------------
 * One struct describes one call exactly as SPEC.md does. Pointers are host memory for the CPU backend and
 * device memory for the CUDA backend. Strides are in elements (never bytes); the last dimension (D) of every
 * tensor is contiguous. Every pointer is a multiple of its element size (2 bytes for fp16/bf16, 4 for fp32 and the
 * int32 arrays; else KVATTN_ERR_INVALID_ARGUMENT naming it). The int32 index arrays (cu_seqlens_q, cu_seqlens_knew,
 * cache_seqlens, cache_leftpad, cache_batch_idx, block_table) must not share memory with a tensor the call writes
 * (out, softmax_lse, the caches when appending) nor, on CUDA, with the workspace: refused, naming both.
 * Fill it with kvattn_params_default() and then set the fields you use: its strides are KVATTN_STRIDE_PACKED, so a
 * tensor laid out packed in the documented shape needs no stride set at all.
 *
 * A stride equal to KVATTN_STRIDE_PACKED takes the value that packs the documented shape (each field on its
 * own, from the sizes, whatever the other strides of the tensor are):
 *   q, out:         head D, row H * D, batch seqlen_q * H * D (varlen: unused, 0);
 *   k_new, v_new:   head D, row Hk * D, batch seqlen_knew * Hk * D (varlen: unused, 0);
 *   k/v_cache:      head D, row Hk * D, batch cache_capacity * Hk * D (paged: page_size * Hk * D per page);
 *   softmax_lse:    [B, H, Sq]: row 1, head seqlen_q, batch H * seqlen_q; varlen [H, total_q]: row 1, head total_q;
 *   block_table_batch_stride: max_pages_per_seq; rotary_row_stride: rotary_dim / 2; alibi_batch_stride: 0 ([H]).
 * A tensor whose set and unset strides together make its elements overlap (e.g. q_row_stride set for padded rows,
 * q_batch_stride unset) is refused with KVATTN_ERR_INVALID_ARGUMENT naming the unset fields. A stride of 0 broadcasts
 * (every index reads the same elements): allowed for tensors that are only read, except rotary_row_stride (0 means
 * rotary_dim / 2) and block_table_batch_stride (at least max_pages_per_seq). A negative stride is refused, even one
 * that the call's mode leaves unused (a varlen call's batch strides). Upgrading from 0.1: the defaults
 * were 0, so a read-only tensor meant to broadcast must now set its strides to 0. */
#define KVATTN_STRIDE_PACKED INT64_MIN

/* "Row tensors" (q, k_new, v_new, out, softmax_lse) are addressed in one of two modes:
 *   varlen (cu_seqlens_* != NULL): row i of sequence b is global row cu_seqlens[b] + i, at row * row_stride;
 *   fixed  (cu_seqlens_* == NULL): every sequence has seqlen_* rows; row i of b is at
 *                                   b * batch_stride + i * row_stride.  */
typedef struct kvattn_params {
    int64_t struct_size; /* = sizeof(kvattn_params); set by kvattn_params_default() */

    int32_t dtype;        /* kvattn_dtype of q, k_new, v_new, k_cache, v_cache and out (f32: CPU backend only) */
    int32_t batch;        /* B >= 0 (B = 0 is a valid no-op) */
    int32_t num_heads;    /* H */
    int32_t num_kv_heads; /* Hk, H % Hk == 0 */
    int32_t head_dim;     /* D: up to 65536 on the CPU; multiples of 8 up to 256 on CUDA (else UNSUPPORTED) */

    /* queries: varlen [total_q, H, D] with cu_seqlens_q[B+1], or fixed [B, seqlen_q, H, D] */
    const void *q;
    const int32_t *cu_seqlens_q; /* optional: NULL selects the fixed mode */
    int32_t seqlen_q;            /* fixed mode: queries per sequence */
    int32_t total_q;             /* varlen mode: rows of q/out (cu_seqlens_q[B] must be <= total_q; rows
                                  * cu_seqlens_q[B] .. total_q - 1 belong to no sequence: read and written by
                                  * no backend). Fixed mode with B > 0: 0 or B * seqlen_q (another value means
                                  * that cu_seqlens_q was forgotten: KVATTN_ERR_INVALID_ARGUMENT) */
    int64_t q_batch_stride, q_row_stride, q_head_stride;

    /* new tokens to append (optional, k_new and v_new together): varlen [total_new, Hk, D] with
     * cu_seqlens_knew[B+1], or fixed [B, seqlen_knew, Hk, D] */
    const void *k_new;
    const void *v_new;
    const int32_t *cu_seqlens_knew;
    int32_t seqlen_knew; /* fixed mode: new tokens per sequence */
    int32_t total_knew;  /* varlen mode: rows of k_new/v_new; fixed mode with k_new: 0 or B * seqlen_knew (as
                          * total_q) */
    int64_t knew_batch_stride, knew_row_stride, knew_head_stride;
    int64_t vnew_batch_stride, vnew_row_stride, vnew_head_stride;

    /* KV cache. Contiguous (block_table == NULL): [cache_batch, cache_capacity, Hk, D], "batch" stride per
     * cache row. Paged (block_table != NULL): [num_pages, page_size, Hk, D], "batch" stride per page, any
     * strides (NHD or HND). A sequence's capacity (cache_capacity, or max_pages_per_seq * page_size) is at most
     * KVATTN_MAX_CACHE_TOKENS. When k_new/v_new are given the caches are written, so their elements must not
     * overlap (as for out and softmax_lse), neither within one cache nor between k_cache, v_cache, out and
     * softmax_lse (K and V interleaved in one buffer with the same strides pass); a cache that is only read may
     * (e.g. batch stride 0). Two sequences appending into the same cache position in one call: unspecified. */
    void *k_cache;
    void *v_cache;
    int64_t k_batch_stride, k_row_stride, k_head_stride;
    int64_t v_batch_stride, v_row_stride, v_head_stride;
    int32_t cache_batch;    /* contiguous: B_cache, number of cache rows */
    int32_t cache_capacity; /* contiguous: C, tokens per cache row */
    const int32_t *cache_batch_idx; /* contiguous, optional [B]: cache row of sequence b (default b) */
    const int32_t *block_table;     /* paged: [B, max_pages_per_seq] */
    int64_t block_table_batch_stride;
    int32_t max_pages_per_seq;
    int32_t num_pages;
    int32_t page_size; /* any value >= 1 */
    const int32_t *cache_seqlens; /* [B]: tokens already in the cache before this call (required if B > 0) */
    const int32_t *cache_leftpad; /* optional [B]: positions < cache_leftpad[b] are ignored (contiguous or paged;
                                   * in paged mode the pages before it need not be valid) */

    /* rotary embedding (optional, cos and sin together): [rotary_max_pos, rotary_dim / 2] each */
    const void *rotary_cos;
    const void *rotary_sin;
    int32_t rotary_dtype; /* KVATTN_F32 or the dtype of q */
    int32_t rotary_dim;   /* R: even, 0 < R <= D */
    int32_t rotary_max_pos;
    int32_t rotary_interleaved; /* 1: pairs (2i, 2i+1) (GPT-J); 0: pairs (i, i + R/2) (GPT-NeoX) */
    int64_t rotary_row_stride;  /* elements between positions; 0 means rotary_dim / 2 */

    /* ALiBi (optional): fp32 [H] (alibi_batch_stride = 0) or [B, H] (alibi_batch_stride >= H) */
    const float *alibi_slopes;
    int64_t alibi_batch_stride;

    float softmax_scale; /* 0 means 1 / sqrt(D); negative, NaN, infinite or > 2.3e38: KVATTN_ERR_INVALID_ARGUMENT.
                          * Scores (scaled, capped, biased) must be finite in fp32; precision at |score| >> 1e4 is
                          * in docs/DECISIONS.md, "Numerics at extreme scores" */
    float softcap;       /* 0 = off; else score = softcap * tanh(score / softcap) */
    int32_t causal;      /* 1: same as window_right = 0 (window_right is then ignored) */
    int32_t window_left;  /* -1 = unbounded */
    int32_t window_right; /* -1 = unbounded */
    int32_t num_splits;     /* 0 = automatic, 1 = no split, n = at most n KV splits */
    int32_t batch_invariant; /* 1: a sequence's results do not depend on the rest of the batch */

    /* output: varlen [total_q, H, D] or fixed [B, seqlen_q, H, D], dtype of q; written for every query row of
     * every sequence (masked or not; varlen rows past cu_seqlens_q[B] are left as they are). out, softmax_lse and
     * the caches being appended to must not overlap each other (checked). They must not overlap the tensors that
     * are only read (q, k_new, v_new, rotary tables, ...) either: that is not checked, and the result is then
     * unspecified. */
    void *out;
    int64_t out_batch_stride, out_row_stride, out_head_stride;

    /* optional fp32 natural-log LSE: element (row, h) at [batch *] lse_batch_stride + h * lse_head_stride +
     * i * lse_row_stride (varlen: i is the global row, batch term absent); [H, total_q] is head stride
     * total_q, row stride 1; [B, H, Sq] is batch stride H*Sq, head stride Sq, row stride 1; written for the
     * same rows as out */
    float *softmax_lse;
    int64_t lse_batch_stride, lse_head_stride, lse_row_stride;
} kvattn_params;

/* The most tokens one sequence's cache may hold (2^31 - 2^16: positions and tile bounds stay in int32). */
#define KVATTN_MAX_CACHE_TOKENS 2147418112

/* Returns sizeof(kvattn_params) as compiled into the library (bindings compare it with their own). */
KVATTN_API size_t kvattn_params_size(void);

/* Returns a params struct with every pointer NULL, every size 0, every stride KVATTN_STRIDE_PACKED, window -1/-1,
 * rotary_interleaved 1, softmax_scale 0 (= 1/sqrt(D)), dtype fp16, rotary_dtype f32, struct_size set. */
KVATTN_API kvattn_params kvattn_params_default(void);

/* Checks everything visible from the arguments (no data is read) for this backend.
 * Returns KVATTN_OK or an error status with kvattn_last_error() naming the argument and its values. */
KVATTN_API int kvattn_validate(const kvattn_params *p, int backend);

/* Writes to *bytes the workspace kvattn_forward needs for these params on this backend (0 on the CPU).
 * The size depends only on the arguments and the current device (its SM count, shared memory per SM and compute
 * capability; a fixed stand-in when there is no usable device), never on data, so one allocation serves a CUDA graph
 * replayed with new lengths and block tables; query it on the device that will run the call.
 * Returns KVATTN_OK or the status of kvattn_validate. */
KVATTN_API int kvattn_workspace_size(const kvattn_params *p, int backend, size_t *bytes);

/* One call of SPEC.md: appends k_new/v_new (with rotary) into the cache, then attends.
 * CPU backend: runs synchronously; stream is ignored; workspace may be NULL; data-dependent checks are made
 *   before any write and a failure returns KVATTN_ERR_BAD_DATA having changed nothing.
 * CUDA backend: runs on the current device, enqueued on `stream` (a cudaStream_t, NULL = default stream), which
 *   must belong to the current device, as must every tensor (not checked: cudaSetDevice first);
 *   allocates nothing, copies nothing to or from the host and never synchronizes; `workspace` is (16-byte aligned) device
 *   memory of at least kvattn_workspace_size() bytes, used by one call at a time, that the call writes: its first
 *   kvattn_workspace_size() bytes must not hold a tensor the call writes or an index array (refused, naming it);
 *   nor may another stream write the index arrays while the call runs. Data-dependent failures
 *   are found on the device: the failing sequence is skipped (its cache and output untouched) and recorded
 *   in the device status (kvattn_device_status_read); other sequences are computed normally. With no usable
 *   device (none, or one the build's CUDA_ARCH cannot run) a valid call returns KVATTN_ERR_NOT_AVAILABLE before its
 *   workspace is looked at (only B = 0 with a NULL workspace, a no-op, returns KVATTN_OK).
 * Returns KVATTN_OK or an error status (kvattn_last_error() has the detail). */
KVATTN_API int kvattn_forward(const kvattn_params *p, int backend, void *workspace, size_t workspace_bytes,
                              void *stream);

/* ---- device-side status of the last CUDA call that used a workspace ----------------------------------
 * Every CUDA call rewrites a small status record at offset 0 of its workspace (stream-ordered). */
enum {
    KVATTN_FLAG_BAD_CU_SEQLENS = 1 << 0, /* cu_seqlens_q/knew not non-decreasing from 0 or past total rows */
    KVATTN_FLAG_BAD_LEFTPAD = 1 << 1,    /* cache_leftpad < 0 or > cache_seqlens, or cache_seqlens < 0  */
    KVATTN_FLAG_CAPACITY = 1 << 2,       /* cache_seqlens + n_new > capacity                              */
    KVATTN_FLAG_PAGE_INDEX = 1 << 3,     /* a page index touched lies outside [0, num_pages)              */
    KVATTN_FLAG_ROTARY_RANGE = 1 << 4,   /* position past rotary_max_pos, or n_q > S + n_new with rotary  */
    KVATTN_FLAG_BATCH_IDX = 1 << 5       /* cache_batch_idx outside [0, cache_batch)                     */
};
typedef struct kvattn_device_status {
    int32_t flags;           /* OR of KVATTN_FLAG_* over all failing sequences; 0 = all good */
    int32_t num_failed;      /* sequences skipped */
    int32_t first_failed;    /* smallest index of a skipped sequence, -1 if none */
    int32_t reserved;
} kvattn_device_status;

/* Byte offset of the kvattn_device_status record inside a CUDA workspace (for reading it asynchronously). */
KVATTN_API size_t kvattn_device_status_offset(void);
/* Copies the status record of `workspace` (device memory) to *out, waiting for `stream` to reach it:
 * this synchronizes the stream, which is the caller's choice. Returns KVATTN_OK, KVATTN_ERR_INVALID_ARGUMENT
 * for a stream being captured into a CUDA graph (read it after the graph's launch), KVATTN_ERR_NOT_AVAILABLE in
 * a library built without CUDA or when no usable CUDA device is found, or KVATTN_ERR_CUDA. */
KVATTN_API int kvattn_device_status_read(const void *workspace, void *stream, kvattn_device_status *out);

/* ---- page manager for inflight batching (host-side bookkeeping only; it never touches cache data) -------
 * A pool of num_pages pages of page_size tokens, a free list, and per-sequence page lists. Pages may be
 * shared between sequences (a common prompt prefix) and are reference-counted. Every failing call returns
 * an error status and changes nothing. A pool is not thread-safe: serialize the calls on one pool. */
typedef struct kvattn_pages kvattn_pages;

/* Creates a pool; *out receives it. Returns KVATTN_OK, KVATTN_ERR_INVALID_ARGUMENT or ..._OUT_OF_MEMORY. */
KVATTN_API int kvattn_pages_create(kvattn_pages **out, int32_t num_pages, int32_t page_size);
/* Frees the pool (NULL is fine). */
KVATTN_API void kvattn_pages_destroy(kvattn_pages *pool);
/* Starts an empty sequence; *seq_id receives its id (ids of released sequences are reused). */
KVATTN_API int kvattn_pages_add_seq(kvattn_pages *pool, int32_t *seq_id);
/* Starts a sequence that shares the first `n_tokens` tokens of `parent` (those pages are shared and
 * reference-counted; n_tokens must be a multiple of page_size in [0, parent's length]: only whole pages are
 * shared, so the caller copies a partial last page itself). *seq_id receives the new id; its length is n_tokens.
 * Share only tokens already written by kvattn_forward: the pool counts appended tokens before any call writes
 * them, and a child that reads rows its parent writes in the same call gets an unspecified result. */
KVATTN_API int kvattn_pages_fork(kvattn_pages *pool, int32_t parent, int32_t n_tokens, int32_t *seq_id);
/* Makes room for n_tokens more tokens in seq_id (taking free pages as needed) and counts them as appended:
 * the sequence's length grows by n_tokens. Returns KVATTN_ERR_OUT_OF_PAGES (nothing changed) when the pool
 * is short. A shared last page is never written into: appending after a fork starts a fresh page. */
KVATTN_API int kvattn_pages_append(kvattn_pages *pool, int32_t seq_id, int32_t n_tokens);
/* Shortens seq_id to its first n_tokens tokens (n_tokens in [0, its length]), e.g. to drop rejected speculative
 * tokens or to roll back a step that was not run. Pages past the new length go back to the free list unless
 * another sequence shares them; the rows of the kept partial last page past n_tokens are overwritten by the next
 * append. Refused (KVATTN_ERR_INVALID_ARGUMENT, nothing changed) when n_tokens would end the sequence inside a
 * page shared with a forked sequence: truncate to a multiple of page_size and append the rest again. */
KVATTN_API int kvattn_pages_truncate(kvattn_pages *pool, int32_t seq_id, int32_t n_tokens);
/* Ends a sequence and returns the pages nobody else references to the free list. */
KVATTN_API int kvattn_pages_release(kvattn_pages *pool, int32_t seq_id);
/* Writes, for the batch seq_ids[0..n), block_table row b (at b * block_table_stride, max_pages_per_seq
 * entries: the sequence's pages in order, unused entries -1) and cache_seqlens[b] = the sequence's length
 * minus pending[b] (the tokens appended to the pool this step but not yet written by kvattn_forward; pending
 * may be NULL for 0). Returns KVATTN_ERR_INVALID_ARGUMENT if a sequence has more pages than
 * max_pages_per_seq or pending[b] is outside [0, length], if seq_ids or pending overlaps what the call writes (the
 * span of block_table from row 0 to row n - 1, and cache_seqlens) or those two overlap, or if the rows' offsets
 * overflow int64. */
KVATTN_API int kvattn_pages_fill(const kvattn_pages *pool, const int32_t *seq_ids, int32_t n,
                                 const int32_t *pending, int32_t *block_table, int64_t block_table_stride,
                                 int32_t max_pages_per_seq, int32_t *cache_seqlens);
/* Queries: free pages, pages in use, a sequence's length and page count (-1 for an unknown id or a NULL pool). */
KVATTN_API int32_t kvattn_pages_free_count(const kvattn_pages *pool);
KVATTN_API int32_t kvattn_pages_used_count(const kvattn_pages *pool);
KVATTN_API int32_t kvattn_pages_seq_len(const kvattn_pages *pool, int32_t seq_id);
KVATTN_API int32_t kvattn_pages_seq_num_pages(const kvattn_pages *pool, int32_t seq_id);

#ifdef __cplusplus
}
#endif
#endif /* KVATTN_H */
