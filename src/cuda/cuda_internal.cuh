/* cuda_internal.cuh — the contract between the CUDA backend's two halves:
 *   backend.cu (host entry, workspace layout, the check kernel that validates each sequence on the device and
 *               writes the status record + a per-sequence ok flag, the append kernel with fused rotary), and
 *   attn.cu    (the scheduler that turns live lengths into work items, the attention kernel, the combine).
 * Both see kvattn_params by value; all pointers in it are device pointers. */
#ifndef KVATTN_CUDA_INTERNAL_CUH
#define KVATTN_CUDA_INTERNAL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda.h> /* CUtensorMap (the type only; the encoder is reached through the runtime, no -lcuda) */
#include <cuda_runtime.h>
#include <string.h>
#include "internal.h"

/* A failing runtime call's error is also kept as the thread's "last error"; it is kvattn's own (reported by the
 * status), so it is cleared rather than left for the caller's next cudaGetLastError (a sticky error stays). */
#define KV_CUDA_CHECK_RET(call)                                                                              \
    do {                                                                                                     \
        cudaError_t err_ = (call);                                                                           \
        if (err_ != cudaSuccess) {                                                                           \
            (void)cudaGetLastError();                                                                        \
            return kv_set_error(KVATTN_ERR_CUDA, "%s: %s (%s:%d)", #call, cudaGetErrorString(err_), __FILE__, \
                                __LINE__);                                                                   \
        }                                                                                                    \
    } while (0)

/* Device facts read once per device (cached; no sync). */
typedef struct kv_device_info {
    int device;
    int num_sms;
    int max_smem_optin; /* cudaDevAttrMaxSharedMemoryPerBlockOptin */
    int smem_per_sm;    /* cudaDevAttrMaxSharedMemoryPerMultiprocessor */
    int pdl;            /* programmatic dependent launch: compute capability >= 9 and KVATTN_NO_PDL unset */
    int overlap;        /* pdl, and KVATTN_NO_OVERLAP unset: a step's decode kernel runs alongside its prefill
                         * kernel (see kv_attn_kernel) */
    int early;          /* KVATTN_NO_EARLY unset: decode steps may start early (kv_attn_early) */
    int early_append;   /* KVATTN_NO_EARLY_APPEND unset: so may decode steps with a small append (kv_attn_early) */
    int lean;           /* KVATTN_NO_LEAN unset: early decode steps of few sequences take the scheduler's lean
                         * path (KV_LEAN_SCHED, attn_kernels.cuh) */
    int sm90;           /* compute capability 9.0 exactly: the sm_90a kernels run (when built for sm_90a) */
    int tma;            /* KVATTN_NO_TMA unset: the ws prefill kernel may copy K / V tiles by tensor maps */
    int tma_log;        /* KVATTN_DEV_TMA_LOG set: say on stderr whether each call's maps were encoded (dev runs) */
} kv_device_info;

/* Tensor maps of the K and V caches for the ws prefill kernel's producer (attn_prefill_ws.cuh, KV_WS_TMA), encoded
 * by the host per call (attn.cu, kv_ws_tmaps_make). 4-D, innermost first: {D, Hk, rows, outer} with rows the cache
 * positions (contiguous: capacity C, outer the cache row) or a page's rows (paged: page_size, outer the page). Boxes
 * of {64, 1, rows, 1}, 128-byte swizzle: a box lands as kv_sw128 lays a tile's 64-channel block out. rows == 0: off
 * (the producer copies every tile with cp.async). */
typedef struct kv_ws_tmaps {
    CUtensorMap k, v;
    int32_t rows; /* rows per box: BN (contiguous, or pages of a multiple of BN rows) or page_size (pages of 8 .. BN / 2
                   * rows dividing BN); 0 = off */
    int32_t outer0; /* contiguous caches at batch stride 0: the outer coordinate is 0 for every sequence */
} kv_ws_tmaps;

/* ---- the rotary embedding of appended keys ----------------------------------------------------------------
 * Element conversions, the cos / sin table element (fp32 or the q dtype; the caller checked the position), and THE
 * rotation of one channel: x * cos - partner * sin * sign in fp32 without contraction (the C expression of the CPU
 * backend), rounded once. Every place that rotates a new key uses kv_rope_rot, so the append kernel (backend.cu),
 * the scheduler's append and the decode items of an early step that appends (attn_kernels.cuh) produce the same
 * bits: the cache holds what the attention read. */
template <typename T> struct kv_elem;
template <> struct kv_elem<__half> {
    static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
    static __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
};
template <> struct kv_elem<__nv_bfloat16> {
    static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
};
static __device__ __forceinline__ float kv_load_rotary(const void *base, int rotary_dtype, int64_t idx) {
    if (rotary_dtype == KVATTN_F32) return ((const float *)base)[idx];
    if (rotary_dtype == KVATTN_BF16) return __bfloat162float(((const __nv_bfloat16 *)base)[idx]);
    return __half2float(((const __half *)base)[idx]);
}
static __device__ __forceinline__ float kv_rope_rot(float x, float y, float cs, float sn, float sign) {
    return __fsub_rn(__fmul_rn(x, cs), __fmul_rn(__fmul_rn(y, sn), sign));
}
/* Rotates the 8 channels [c0, c0 + 8) of a new key, loaded into kx, to position pos (in [0, rotary_max_pos): the
 * caller checks); krow is the key's k_new row, read for the partner channels; channels >= rotary_dim stay. */
template <typename T>
static __device__ __forceinline__ void kv_rope_k8(const kvattn_params &p, const T *krow, int c0, int32_t pos, T *kx) {
    const int R = p.rotary_dim, il = p.rotary_interleaved;
    const int64_t rs = p.rotary_row_stride ? p.rotary_row_stride : R / 2;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        const int c = c0 + e;
        if (c >= R) continue;
        const int64_t ri = (int64_t)pos * rs + kv_rope_pair(c, R, il);
        const float cs = kv_load_rotary(p.rotary_cos, p.rotary_dtype, ri);
        const float sn = kv_load_rotary(p.rotary_sin, p.rotary_dtype, ri);
        const float x = kv_elem<T>::to_f(kx[e]), y = kv_elem<T>::to_f(krow[kv_rope_partner(c, R, il)]);
        kx[e] = kv_elem<T>::from_f(kv_rope_rot(x, y, cs, sn, kv_rope_sign(c, R, il)));
    }
}

/* ---- programmatic dependent launch (PDL) ----------------------------------------------------------------
 * The kernels of one call after the first are launched with programmatic stream serialization, so that each
 * one is dispatched while its predecessor still runs. Every such kernel calls kv_grid_wait() before it reads
 * anything a predecessor wrote (it returns once the predecessor grid has completed and its writes are
 * visible), then kv_grid_launch_dependents() so that its own successor can be dispatched. Correctness never
 * depends on where the trigger sits, only the overlap does. The first kernel of a call is launched plainly:
 * the caller's own work before the call (a copy into the block table, say) must be complete. Without sm_90
 * (or with KVATTN_NO_PDL set) launches are plain and the two calls are no-ops. */
static __device__ __forceinline__ void kv_grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
static __device__ __forceinline__ void kv_grid_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
/* Dev builds only (-DKVATTN_TIMELINE, dev/attn_test.cu "timeline"): per kernel k of a call (0 scheduler,
 * 1 prefill, 2 decode) the global timer at [0] the first block's start, [1] the first and [2] the last block
 * past kv_grid_wait, [3] the first and [4] the last block's exit. The harness resets kv_tl before a call. */
#ifdef KVATTN_TIMELINE
__device__ unsigned long long kv_tl[3][16]; /* [5..]: scheduler phase ends; attention: start-up / item ns, items;
                                             * [10..]: sm90 prefill item breakdown in SM cycles */
static __device__ __forceinline__ unsigned long long kv_gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ int8_t kv_tl_flags[4096];
__device__ long long kv_tl_sc[16]; /* scheduler phase ends, SM cycles after its (last) pass's start (thread 0) */
#define KV_TLS(slot) do { if (threadIdx.x == 0) kv_tl_sc[slot] = clock64() - tl_c0; } while (0)
__device__ unsigned long long kv_tl_plan[8]; /* SELF blocks' kv_lean_plan sections, SM cycles summed (thread 0) */
__device__ unsigned long long kv_tl_merge[3]; /* merges: SM cycles from the lse to the output's offset, a count, and
                                               * from the lse to all of the first FEW splits' channels in */
__device__ int kv_tl_twice; /* dev: the scheduler runs its body twice (the second pass with warm caches) */
#define KV_TL_ITEMS 8192
__device__ unsigned long long kv_tl_items[2][KV_TL_ITEMS][4]; /* per item of list [decode]: start, end ns, smid << 32 |
                                                               * block, key tiles */
static __device__ __forceinline__ unsigned kv_smid() {
    unsigned r;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
    return r;
}
#define KV_TL(k, slot, op) \
    do { if (threadIdx.x == 0) atomic##op(&kv_tl[k][slot], kv_gtime()); } while (0)
#define KV_TL_NOW() kv_gtime()
#define KV_TL_ADD(k, slot, v) \
    do { if (threadIdx.x == 0) atomicAdd(&kv_tl[k][slot], (unsigned long long)(v)); } while (0)
/* the ws prefill kernel's parts (attn_prefill_ws.cuh, thirty-first session): SM cycles summed by one consumer
 * thread (128) and the producer's thread 0; slots named where they are added, printed by attn_test timeline */
__device__ unsigned long long kv_tl_ws[16];
#define KV_WS_T(v) const long long v = clock64()
#define KV_WS_CLK_NOW() clock64()
#define KV_WS_ADD(cond, slot, v) do { if (cond) atomicAdd(&kv_tl_ws[slot], (unsigned long long)(v)); } while (0)
#define KV_TLC_T0(v) const long long v = clock64()
#define KV_TLC_ACC(acc, v) (acc) += clock64() - (v)
#else
#define KV_WS_T(v) do { } while (0)
#define KV_WS_CLK_NOW() 0ll
#define KV_WS_ADD(cond, slot, v) do { } while (0)
#define KV_TLC_T0(v) do { } while (0)
#define KV_TLC_ACC(acc, v) do { } while (0)
#define KV_TL(k, slot, op) do { } while (0)
#define KV_TLS(slot) do { } while (0)
#define KV_TL_NOW() 0ull
#define KV_TL_ADD(k, slot, v) do { } while (0)
#endif

template <typename... K, typename... A>
static cudaError_t kv_launch(void (*kernel)(K...), unsigned grid, unsigned block, size_t smem, cudaStream_t stream,
                             int pdl, A... args) {
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(grid, 1, 1);
    cfg.blockDim = dim3(block, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, args...);
}
int kv_device_info_get(kv_device_info *info); /* backend.cu */

/* Workspace layout (all offsets 256-byte aligned):
 *   [0, 256)                    kvattn_device_status (status record), written by the check kernel
 *   [256, 256 + round(B))       int8 seq_ok[B]: 1 if sequence b passed every check (append + attend it)
 *   [attn_offset, ...)          the attention half's own scratch (items, partial outputs), size from
 *                               kv_attn_workspace_bytes() */
size_t kv_ws_attn_offset(const kvattn_params *p);
/* Rows of k_new / v_new this call appends (0: no append kernel runs). */
static inline int64_t kv_new_rows(const kvattn_params *p) {
    return !p->k_new ? 0 : p->cu_seqlens_knew ? p->total_knew : (int64_t)p->batch * p->seqlen_knew;
}

/* attn.cu: scratch the attention half needs for these params on this device (depends on arguments only). */
size_t kv_attn_workspace_bytes(const kvattn_params *p, const kv_device_info *dev);
/* attn.cu: enqueue the step after the check kernel: finalize (status record, seq_ok -> 1/0; also for B = 0),
 * fused with the scheduler that writes the work items when the fast kernels will run. */
int kv_attn_launch_prologue(const kvattn_params *p, int8_t *seq_ok, kvattn_device_status *status, void *attn_ws,
                            size_t attn_ws_bytes, const kv_device_info *dev, int fused_check, cudaStream_t stream);
/* attn.cu: 1 when the scheduler itself runs the checks of every sequence (no check kernel: the batch is small
 * enough for one block, B <= KV_SCHED_SEQS and few page slots); then kv_attn_launch_prologue gets
 * fused_check = 1 and launches the scheduler as the call's first kernel. */
int kv_attn_check_fused(const kvattn_params *p, const kv_device_info *dev);
/* attn.cu: enqueue attention (the split combine is fused into it) on `stream`. Sequences with seq_ok[b] == 0 are skipped
 * entirely (their out/lse rows are not written). fused_check: as given to kv_attn_launch_prologue (with
 * kv_attn_early, the two must agree). Returns KVATTN_OK or an error status (kv_set_error). */
int kv_attn_launch(const kvattn_params *p, const int8_t *seq_ok, void *attn_ws, size_t attn_ws_bytes,
                   const kv_device_info *dev, int fused_check, cudaStream_t stream);
/* 1 when every row of k_new, v_new and both caches can be read and written in 16-byte pieces (16-byte aligned bases,
 * strides in multiples of 8 elements, head_dim % 8 == 0): the append kernel's vector path (backend.cu), and a
 * condition of the early append (kv_attn_early, attn.cu). Inline here so that attn.cu needs no other object (the
 * dev harness dev/attn_test.cu compiles it alone). */
static inline int kv_append_vectorizable(const kvattn_params *p) {
    if (p->head_dim % 8) return 0;
    const void *ptrs[4] = {p->k_new, p->v_new, p->k_cache, p->v_cache};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)ptrs[i] % 16) return 0;
    const int64_t strides[12] = {p->knew_batch_stride, p->knew_row_stride, p->knew_head_stride,
                                 p->vnew_batch_stride, p->vnew_row_stride, p->vnew_head_stride,
                                 p->k_batch_stride,    p->k_row_stride,    p->k_head_stride,
                                 p->v_batch_stride,    p->v_row_stride,    p->v_head_stride};
    for (int i = 0; i < 12; i++) {
        /* batch strides of the new rows only matter in fixed mode */
        if ((i == 0 || i == 3) && p->cu_seqlens_knew) continue;
        if (strides[i] % 8) return 0;
    }
    return 1;
}
/* attn.cu: 1 when the call's decode kernel starts before the scheduler's page checks end (KV_EARLY_START). */
int kv_attn_early(const kvattn_params *p, const kv_device_info *dev, int fused_check);
/* attn.cu: every host-side step of kv_attn_launch that can fail (support, workspace size, per-variant smem
 * attribute), run by kv_cuda_forward before any kernel that writes; launches nothing. */
int kv_attn_prepare(const kvattn_params *p, const kv_device_info *dev, size_t attn_ws_bytes);
/* attn.cu: backend-specific support check (dtype, head dim); called by kv_cuda_check. */
int kv_attn_supported(const kvattn_params *p);

#ifdef __CUDACC__
/* A word of zeros in global memory: what kv_check_seq_get reads where an optional array is absent. */
static __device__ const int32_t kv_zero_words[2] = {0, 0};
/* Every data-dependent check of SPEC step 1 on sequence b except the page indices themselves: returns its
 * KVATTN_FLAG_* bits (0 = ok) and the page slots [*slot_lo, *slot_hi] whose indices must be checked (lo > hi:
 * none). cu_seqlens are checked locally (0 <= cu[b] <= cu[b+1] <= total, cu[0] = 0); the finalize step turns
 * a local failure anywhere into a batch-wide one, because a broken cu_seqlens array leaves the row partition
 * itself undefined. Slots are only given when the positions fit the capacity, so they are < max_pages_per_seq.
 * Used by the check kernel (backend.cu) and by the scheduler when it runs the checks itself (attn.cu).
 * kv_check_seq_get also gives the sequence's lengths (*out, as kv_seq_get in internal.h). Every read of sequence b
 * is issued before any value is used: an absent optional array is read as kv_zero_words (an address select, not a
 * branch), so the reads form one basic block and one memory round trip. (kv_check_seq, then kv_seq_get, written
 * with branches on the optional arrays: the compiler made six dependent round trips of them at the start of every
 * self-starting decode block; attn_notes.md, twenty-second session.) With bad cu_seqlens the other values are
 * read (in bounds: index b < B) but not used. */
static __device__ __forceinline__ int kv_check_seq_get(const kvattn_params &p, int b, kv_seq *out, int32_t *slot_lo,
                                                       int32_t *slot_hi) {
    const bool q_var = p.cu_seqlens_q != NULL, k_var = p.k_new && p.cu_seqlens_knew;
    const bool has_row = !p.block_table && p.cache_batch_idx;
    const int32_t *cq = q_var ? p.cu_seqlens_q + b : kv_zero_words;
    const int32_t *ck = k_var ? p.cu_seqlens_knew + b : kv_zero_words;
    const int32_t *cs = p.cache_seqlens ? p.cache_seqlens + b : kv_zero_words;
    const int32_t *cl = p.cache_leftpad ? p.cache_leftpad + b : kv_zero_words;
    const int32_t *ci = has_row ? p.cache_batch_idx + b : kv_zero_words;
    const int32_t q0 = cq[0], q1 = cq[1], k0 = ck[0], k1 = ck[1], S = cs[0], L = cl[0], row_b = ci[0];
    kv_seq s; /* as kv_seq_get */
    s.q_row0 = q_var ? q0 : b * p.seqlen_q;
    s.n_q = q_var ? q1 - q0 : p.seqlen_q;
    s.new_row0 = !p.k_new ? 0 : k_var ? k0 : b * p.seqlen_knew;
    s.n_new = !p.k_new ? 0 : k_var ? k1 - k0 : p.seqlen_knew;
    s.S = S;
    s.L = L;
    s.C = p.block_table ? p.max_pages_per_seq * p.page_size : p.cache_capacity;
    *out = s;
    int cu_flags = 0;
    if (q_var && (q0 < 0 || q1 < q0 || q1 > p.total_q || (b == 0 && q0 != 0))) cu_flags |= KVATTN_FLAG_BAD_CU_SEQLENS;
    if (k_var && (k0 < 0 || k1 < k0 || k1 > p.total_knew || (b == 0 && k0 != 0)))
        cu_flags |= KVATTN_FLAG_BAD_CU_SEQLENS;
    const int32_t row = has_row ? row_b : b;
    const int64_t end = (int64_t)s.S + s.n_new; /* one past the last position written and attended */
    int flags = 0;
    if (s.S < 0 || s.L < 0 || s.L > s.S) flags |= KVATTN_FLAG_BAD_LEFTPAD;
    if (end > s.C) flags |= KVATTN_FLAG_CAPACITY;
    if (!p.block_table && (row < 0 || row >= p.cache_batch)) flags |= KVATTN_FLAG_BATCH_IDX;
    if (p.rotary_cos && (end > p.rotary_max_pos || (int64_t)s.n_q > end)) flags |= KVATTN_FLAG_ROTARY_RANGE;
    /* the page slots [L / page_size, (end - 1) / page_size]; 32-bit: then 0 <= L < end <= C < 2^31 */
    const bool slots = p.block_table && !cu_flags && !(flags & (KVATTN_FLAG_BAD_LEFTPAD | KVATTN_FLAG_CAPACITY)) &&
                       end > s.L;
    const int32_t ps = p.page_size > 0 ? p.page_size : 1; /* contiguous caches: unused */
    *slot_lo = slots ? s.L / ps : 0;
    *slot_hi = slots ? (int32_t)(end - 1) / ps : -1;
    return cu_flags ? cu_flags : flags;
}
static __device__ __forceinline__ int kv_check_seq(const kvattn_params &p, int b, int32_t *slot_lo, int32_t *slot_hi) {
    kv_seq s;
    return kv_check_seq_get(p, b, &s, slot_lo, slot_hi);
}
#endif

/* The finalize step, run by one whole block (any size): reads the check flags of all B sequences, writes the
 * status record (flags OR'ed, number failed, smallest failing index; integer reductions, so deterministic) and
 * turns seq_ok[b] into 1 (append and attend) or 0 (skip). A cu_seqlens failure anywhere fails every sequence.
 * It rewrites the whole record on every call, so nothing has to be reset before it. Used by backend.cu's
 * finalize kernel and by attn.cu's scheduler, which runs it first (one launch less). */
#ifdef __CUDACC__
/* flags: the check flags in smem when the caller has them there (the scheduler's fused check; else NULL: read from
 * seq_ok); ok_out: if not NULL, the final ok of b < ok_n also into this smem array (saves the caller a re-read). */
static __device__ __forceinline__ void kv_finalize_block(int B, int8_t *seq_ok, kvattn_device_status *status,
                                                         const int32_t *flags = NULL, int8_t *ok_out = NULL,
                                                         int ok_n = 0) {
    __shared__ int s_or, s_count, s_first;
    if (threadIdx.x == 0) {
        s_or = 0;
        s_count = 0;
        s_first = B;
    }
    __syncthreads();
    for (int b = threadIdx.x; b < B; b += blockDim.x) {
        int f = flags ? flags[b] : seq_ok[b];
        if (f) {
            atomicOr(&s_or, f);
            atomicAdd(&s_count, 1);
            atomicMin(&s_first, b);
        }
    }
    __syncthreads();
    const int batch_bad = s_or & KVATTN_FLAG_BAD_CU_SEQLENS;
    for (int b = threadIdx.x; b < B; b += blockDim.x) {
        int f = flags ? flags[b] : seq_ok[b]; /* read by this same thread in the first loop; nobody else writes it */
        const int8_t ok = (int8_t)(f == 0 && !batch_bad);
        seq_ok[b] = ok;
        if (b < ok_n) ok_out[b] = ok;
    }
    if (threadIdx.x == 0) {
        kvattn_device_status st;
        st.flags = s_or;
        st.num_failed = batch_bad ? B : s_count;
        st.first_failed = batch_bad ? 0 : (s_count ? s_first : -1);
        st.reserved = 0;
        *status = st;
    }
    __syncthreads(); /* seq_ok final for the whole block */
}
#endif

#endif
