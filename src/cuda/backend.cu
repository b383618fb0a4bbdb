/* backend.cu — the host half of the CUDA backend: device facts, the workspace layout, and the three small
 * kernels that run before attention (check each sequence on the device, finalize the status record, append
 * the new tokens with fused rotary). Everything is enqueued on the caller's stream: no allocation, no copy
 * between host and device, no synchronization (kv_cuda_status_read is the one exception, at the host's call).
 * B sequences, H query heads, Hk KV heads, D head dim (as in kvattn.h). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"

/* ---- device facts, cached per device ------------------------------------------------------------------ */
#define KV_MAX_DEVICES 64
static kv_device_info g_device_info[KV_MAX_DEVICES];
static int g_device_info_ready[KV_MAX_DEVICES]; /* 0/1, published with release after the fields */

/* A KVATTN_NO_* switch is on when set to anything but empty or "0". */
static int env_on(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && v[0] != '0';
}

#ifndef KVATTN_BUILD_ARCH
#define KVATTN_BUILD_ARCH "" /* NVCCFLAGS set by hand: not known, not checked (a launch then fails instead) */
#endif

int kv_device_info_get(kv_device_info *info) {
    int device = 0;
    const cudaError_t e = cudaGetDevice(&device);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
        (void)cudaGetLastError(); /* this call's own error, not sticky: not left for the caller's next check */
        return kv_set_error(KVATTN_ERR_NOT_AVAILABLE, "no usable CUDA device: %s", cudaGetErrorString(e));
    }
    KV_CUDA_CHECK_RET(e);
    if (device < 0 || device >= KV_MAX_DEVICES)
        return kv_set_error(KVATTN_ERR_UNSUPPORTED, "device ordinal %d: at most %d devices supported", device,
                            KV_MAX_DEVICES);
    if (__atomic_load_n(&g_device_info_ready[device], __ATOMIC_ACQUIRE)) {
        *info = g_device_info[device];
        return KVATTN_OK;
    }
    /* Two threads may both get here; they write the same values, so the race is benign. */
    kv_device_info d;
    d.device = device;
    KV_CUDA_CHECK_RET(cudaDeviceGetAttribute(&d.num_sms, cudaDevAttrMultiProcessorCount, device));
    KV_CUDA_CHECK_RET(cudaDeviceGetAttribute(&d.max_smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    KV_CUDA_CHECK_RET(cudaDeviceGetAttribute(&d.smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    int major = 0;
    KV_CUDA_CHECK_RET(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    d.pdl = major >= 9 && !env_on("KVATTN_NO_PDL");
    d.overlap = d.pdl && !env_on("KVATTN_NO_OVERLAP");
    d.early = !env_on("KVATTN_NO_EARLY");
    d.early_append = !env_on("KVATTN_NO_EARLY_APPEND");
    d.lean = !env_on("KVATTN_NO_LEAN");
    int minor = 0;
    KV_CUDA_CHECK_RET(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    /* Checked before anything is cached, so a device without kernels is reported unavailable by every call that
     * needs the device (with the reason), rather than failing with KVATTN_ERR_CUDA at the first launch. */
    RETURN_IF(major < 8, KVATTN_ERR_NOT_AVAILABLE,
              "CUDA device %d has compute capability %d.%d; kvattn's CUDA backend needs 8.0 or newer (cp.async)",
              device, major, minor);
    RETURN_IF(!kv_arch_runs_on(KVATTN_BUILD_ARCH, major, minor), KVATTN_ERR_NOT_AVAILABLE,
              "CUDA device %d has compute capability %d.%d; this library's kernels were built with CUDA_ARCH=%s and "
              "cannot run there (rebuild with make CUDA_ARCH=%d%d%s)",
              device, major, minor, KVATTN_BUILD_ARCH, major, minor, major == 9 && minor == 0 ? "a" : "");
    d.sm90 = major == 9 && minor == 0;
    d.tma = d.sm90 && !env_on("KVATTN_NO_TMA");
    d.tma_log = env_on("KVATTN_DEV_TMA_LOG");
    g_device_info[device] = d;
    __atomic_store_n(&g_device_info_ready[device], 1, __ATOMIC_RELEASE);
    *info = d;
    return KVATTN_OK;
}

/* KVATTN_OK when the current device can run this library's kernels; else the status and reason (in
 * kvattn_last_error) that every call needing the device gives. Creates no CUDA context (device attributes only). */
extern "C" int kv_cuda_ready(void) {
    kv_device_info dev;
    return kv_device_info_get(&dev);
}

extern "C" int kv_cuda_available(void) { return kv_cuda_ready() == KVATTN_OK; }

/* ---- workspace layout (see cuda_internal.cuh) ---------------------------------------------------------
 *   [0, 256)                 kvattn_device_status
 *   [256, 256 + round(B))    int8 seq_ok[B]: the check kernel writes each sequence's KVATTN_FLAG_* bits
 *                            there; the finalize kernel turns them into 1 (ok) / 0 (skip)
 *   [attn_offset, ...)       the attention half's scratch */
#define KV_WS_ALIGN 256
#define KV_WS_STATUS_BYTES 256
static size_t kv_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

size_t kv_ws_attn_offset(const kvattn_params *p) {
    size_t B = p->batch > 0 ? (size_t)p->batch : 0;
    return KV_WS_STATUS_BYTES + kv_round_up(B, KV_WS_ALIGN);
}

/* Device facts for sizing; without a device, a fixed stand-in (the size then only has to be self-consistent
 * for validation, since no call can run). */
static kv_device_info kv_device_info_or_default(void) {
    kv_device_info dev;
    if (kv_device_info_get(&dev) != KVATTN_OK) {
        kv_clear_error(); /* the size query itself succeeds */
        dev.device = -1;
        dev.num_sms = 132;
        dev.max_smem_optin = 227 * 1024;
        dev.smem_per_sm = 228 * 1024;
        dev.pdl = 0;
        dev.overlap = 0;
        dev.early = 0;
        dev.early_append = 0;
        dev.lean = 0;
        dev.sm90 = 0;
        dev.tma = 0;
        dev.tma_log = 0;
    }
    return dev;
}

extern "C" size_t kv_cuda_workspace_size(const kvattn_params *p) {
    kv_device_info dev = kv_device_info_or_default();
    return kv_ws_attn_offset(p) + kv_attn_workspace_bytes(p, &dev);
}

/* Largest head dim the append kernel stages in shared memory: 256 threads x 8 channels. */
#define KV_APPEND_THREADS 256
#define KV_APPEND_MAX_CHUNKS KV_APPEND_THREADS

extern "C" int kv_cuda_check(const kvattn_params *p) {
    RETURN_IF(p->dtype != KVATTN_F16 && p->dtype != KVATTN_BF16, KVATTN_ERR_UNSUPPORTED,
              "dtype=%d: the CUDA backend supports fp16 (%d) and bf16 (%d)", p->dtype, KVATTN_F16, KVATTN_BF16);
    RETURN_IF((p->head_dim + 7) / 8 > KV_APPEND_MAX_CHUNKS, KVATTN_ERR_UNSUPPORTED,
              "head_dim=%d: the CUDA backend supports head_dim <= %d", p->head_dim, KV_APPEND_MAX_CHUNKS * 8);
    return kv_attn_supported(p);
}

/* ---- the check kernel ----------------------------------------------------------------------------------
 * grid [B], block [KV_CHECK_THREADS]. Block b performs every data-dependent check of SPEC step 1 on sequence
 * b (kv_check_seq, cuda_internal.cuh) and writes its KVATTN_FLAG_* bits (0 = ok) to seq_ok[b]; the finalize
 * step turns a local cu_seqlens failure anywhere into a batch-wide one. The page indices of positions
 * [L, S + n_new) are read by all threads of the block, four loads in flight each. Small batches skip this
 * kernel: the scheduler runs the same checks first (kv_attn_check_fused, attn.cu). */
#define KV_CHECK_THREADS 256

__global__ void __launch_bounds__(KV_CHECK_THREADS) kv_check_kernel(const __grid_constant__ kvattn_params p, int8_t *seq_ok) {
    __shared__ int s_flags;
    __shared__ int32_t s_slot_lo, s_slot_hi; /* page slots to check, inclusive; lo > hi when none */
    const int b = blockIdx.x;
    kv_grid_launch_dependents(); /* the scheduler may be dispatched now; it waits for this grid to complete */
    if (threadIdx.x == 0) {
        int32_t slot_lo, slot_hi;
        s_flags = kv_check_seq(p, b, &slot_lo, &slot_hi);
        s_slot_lo = slot_lo;
        s_slot_hi = slot_hi;
    }
    __syncthreads();
    const int32_t slot_lo = s_slot_lo, slot_hi = s_slot_hi;
    const int32_t *table = p.block_table ? p.block_table + (int64_t)b * p.block_table_batch_stride : NULL;
    int bad = 0;
    for (int32_t s0 = slot_lo + (int32_t)threadIdx.x; s0 <= slot_hi; s0 += 4 * KV_CHECK_THREADS) {
        int32_t pg[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int32_t s = s0 + k * KV_CHECK_THREADS;
            pg[k] = s <= slot_hi ? table[s] : 0;
        }
#pragma unroll
        for (int k = 0; k < 4; k++) bad |= pg[k] < 0 || pg[k] >= p.num_pages;
    }
    bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) seq_ok[b] = (int8_t)(s_flags | (bad ? KVATTN_FLAG_PAGE_INDEX : 0));
}

/* ---- the append kernel ----------------------------------------------------------------------------------
 * k_new, v_new [rows, Hk, D] -> k_cache, v_cache at positions S + t of each ok sequence.
 * One thread owns a chunk of 8 channels of one (new row, kv head) unit; a block owns 256 / chunks units.
 * 1. find the sequence b of the row (binary search in cu_seqlens_knew, valid when any sequence is ok);
 * 2. load the K chunk (16 bytes when aligned) into fp32 and, with rotary, stage the unit in shared memory
 *    so that every channel can read its partner (GPT-J: c^1, GPT-NeoX: c +- R/2, any R);
 * 3. out[c] = x[c] * cos - x[partner] * sin * sign, in fp32 without contraction (the same evaluation as the
 *    C expression on the CPU), rounded once; channels >= R are copied;
 * 4. copy the V chunk unchanged. Destinations come from kv_cache_offset (never -1 for an ok sequence). */
/* Copies n (<= 8) elements; 16-byte access when vec (then n == 8 and both addresses are 16-byte aligned). */
template <typename T> static __device__ __forceinline__ void kv_load8(const T *src, int n, int vec, T *dst) {
    if (vec) {
        *(uint4 *)dst = __ldg((const uint4 *)src);
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (e < n) dst[e] = src[e];
    }
}
template <typename T> static __device__ __forceinline__ void kv_store8(T *dst, int n, int vec, const T *src) {
    if (vec) {
        *(uint4 *)dst = *(const uint4 *)src;
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (e < n) dst[e] = src[e];
    }
}

template <typename T>
__global__ void __launch_bounds__(KV_APPEND_THREADS)
    kv_append_kernel(const __grid_constant__ kvattn_params p, const int8_t *seq_ok, int64_t total_rows, int chunks, int vec) {
    __shared__ float stage[KV_APPEND_THREADS * 8];
    kv_grid_wait(); /* seq_ok is final once the scheduler / finalize grid has completed */
    kv_grid_launch_dependents();
    const int D = p.head_dim, Hk = p.num_kv_heads;
    const int units_per_block = KV_APPEND_THREADS / chunks;
    const int u = threadIdx.x / chunks, c0 = (threadIdx.x % chunks) * 8;
    const int n = D - c0 < 8 ? D - c0 : 8;
    const int has_rotary = p.rotary_cos != NULL;
    const int R = has_rotary ? p.rotary_dim : 0;
    const int64_t rot_stride = p.rotary_row_stride ? p.rotary_row_stride : R / 2;
    const int64_t total_units = total_rows * Hk;
    const int varlen = p.cu_seqlens_knew != NULL;

    for (int64_t base = (int64_t)blockIdx.x * units_per_block; base < total_units;
         base += (int64_t)gridDim.x * units_per_block) {
        const int64_t unit = base + u;
        int active = u < units_per_block && unit < total_units;
        int b = 0;
        int32_t t = 0;
        int kv_head = 0;
        if (active) {
            const int64_t row = unit / Hk;
            kv_head = (int)(unit - row * Hk);
            if (varlen) {
                /* largest b in [0, B) with cu[b] <= row; the row must also lie before cu[b + 1] */
                int lo = 0, hi = p.batch - 1;
                while (lo < hi) {
                    int mid = (lo + hi + 1) / 2;
                    if (p.cu_seqlens_knew[mid] <= row) lo = mid; else hi = mid - 1;
                }
                b = lo;
                t = (int32_t)(row - p.cu_seqlens_knew[b]);
                active = p.cu_seqlens_knew[b] <= row && row < p.cu_seqlens_knew[b + 1];
            } else {
                b = (int)(row / p.seqlen_knew);
                t = (int32_t)(row - (int64_t)b * p.seqlen_knew);
            }
            active = active && seq_ok[b];
        }
        kv_seq s;
        const T *k_src = NULL;
        T kx[8];
        if (active) {
            s = kv_seq_get(&p, b);
            k_src = (const T *)p.k_new + kv_row_offset(varlen, b, s.new_row0, t, p.knew_batch_stride, p.knew_row_stride) +
                    (int64_t)kv_head * p.knew_head_stride;
            kv_load8(k_src + c0, n, vec, kx);
            if (has_rotary) {
#pragma unroll
                for (int e = 0; e < 8; e++)
                    if (e < n) stage[u * D + c0 + e] = kv_elem<T>::to_f(kx[e]);
            }
        }
        if (has_rotary) __syncthreads();
        if (active) {
            const int32_t pos = s.S + t;
            const int32_t cache_row = p.cache_batch_idx ? p.cache_batch_idx[b] : b;
            if (c0 < R) {
                const int interleaved = p.rotary_interleaved;
#pragma unroll
                for (int e = 0; e < 8; e++) {
                    const int c = c0 + e;
                    if (e >= n || c >= R) continue;
                    const int64_t ri = (int64_t)pos * rot_stride + kv_rope_pair(c, R, interleaved);
                    const float cs = kv_load_rotary(p.rotary_cos, p.rotary_dtype, ri);
                    const float sn = kv_load_rotary(p.rotary_sin, p.rotary_dtype, ri);
                    const float x = stage[u * D + c];
                    const float y = stage[u * D + kv_rope_partner(c, R, interleaved)];
                    const float r = kv_rope_rot(x, y, cs, sn, kv_rope_sign(c, R, interleaved));
                    kx[e] = kv_elem<T>::from_f(r);
                }
            }
            const int64_t k_off = kv_cache_offset(&p, b, cache_row, pos, kv_head, p.k_batch_stride, p.k_row_stride,
                                                  p.k_head_stride);
            const int64_t v_off = kv_cache_offset(&p, b, cache_row, pos, kv_head, p.v_batch_stride, p.v_row_stride,
                                                  p.v_head_stride);
            if (k_off >= 0) kv_store8((T *)p.k_cache + k_off + c0, n, vec, kx);
            const T *v_src = (const T *)p.v_new + kv_row_offset(varlen, b, s.new_row0, t, p.vnew_batch_stride,
                                                                p.vnew_row_stride) +
                             (int64_t)kv_head * p.vnew_head_stride;
            T vx[8];
            kv_load8(v_src + c0, n, vec, vx);
            if (v_off >= 0) kv_store8((T *)p.v_cache + v_off + c0, n, vec, vx);
        }
        if (has_rotary) __syncthreads(); /* the next unit reuses the stage */
    }
}

/* ---- entry points -------------------------------------------------------------------------------------- */
extern "C" int kv_cuda_forward(const kvattn_params *p, void *workspace, size_t workspace_bytes, void *stream_) {
    cudaStream_t stream = (cudaStream_t)stream_;
    kv_device_info dev;
    int st = kv_device_info_get(&dev);
    if (st != KVATTN_OK) return st;
    const size_t attn_offset = kv_ws_attn_offset(p);
    const size_t need = attn_offset + kv_attn_workspace_bytes(p, &dev);
    RETURN_IF(workspace == NULL || workspace_bytes < need, KVATTN_ERR_WORKSPACE,
              "workspace: %zu bytes at %p, need %zu (kvattn_workspace_size)", workspace_bytes, workspace, need);
    RETURN_IF((uintptr_t)workspace % 16, KVATTN_ERR_WORKSPACE, "workspace: %p must be 16-byte aligned", workspace);
    /* everything of the attention half that can fail on the host, before any kernel writes the cache */
    st = kv_attn_prepare(p, &dev, workspace_bytes - attn_offset);
    if (st != KVATTN_OK) return st;

    char *ws = (char *)workspace;
    kvattn_device_status *status = (kvattn_device_status *)ws;
    int8_t *seq_ok = (int8_t *)(ws + KV_WS_STATUS_BYTES);
    const int B = p->batch;

    /* (1) check every sequence, (2) finalize the status record and the ok flags (also for B = 0), fused with
     * the attention scheduler when the fast kernels run */
    const int fused = kv_attn_check_fused(p, &dev);
    if (B > 0 && !fused) {
        /* kv_launch returns this launch's own status (cudaGetLastError would also return, and clear, an error
         * that the caller's code left pending) */
        KV_CUDA_CHECK_RET(kv_launch(kv_check_kernel, (unsigned)B, KV_CHECK_THREADS, 0, stream, 0, *p, seq_ok));
    }
    st = kv_attn_launch_prologue(p, seq_ok, status, ws + attn_offset, workspace_bytes - attn_offset, &dev, fused,
                                 stream);
    if (st != KVATTN_OK || B == 0) return st;

    /* (3) append the new tokens of the ok sequences */
    const int64_t new_rows = kv_new_rows(p);
    if (new_rows > 0 && p->num_kv_heads > 0 && !kv_attn_early(p, &dev, fused)) { /* (early: the scheduler appends) */
        const int chunks = (p->head_dim + 7) / 8;
        const int units_per_block = KV_APPEND_THREADS / chunks;
        const int64_t units = new_rows * p->num_kv_heads;
        int64_t blocks = (units + units_per_block - 1) / units_per_block;
        const int64_t max_blocks = (int64_t)dev.num_sms * 16; /* grid-stride beyond that */
        if (blocks > max_blocks) blocks = max_blocks;
        const int vec = kv_append_vectorizable(p);
        const int8_t *ok = seq_ok;
        cudaError_t e = p->dtype == KVATTN_BF16
                            ? kv_launch(kv_append_kernel<__nv_bfloat16>, (unsigned)blocks, KV_APPEND_THREADS, 0, stream,
                                        dev.pdl, *p, ok, new_rows, chunks, vec)
                            : kv_launch(kv_append_kernel<__half>, (unsigned)blocks, KV_APPEND_THREADS, 0, stream,
                                        dev.pdl, *p, ok, new_rows, chunks, vec);
        if (e != cudaSuccess) {
            (void)cudaGetLastError(); /* reported here, not left for the caller's next check */
            return kv_set_error(KVATTN_ERR_CUDA, "kv_append_kernel launch: %s", cudaGetErrorString(e));
        }
    }

    /* (4) attention over the ok sequences */
    return kv_attn_launch(p, seq_ok, ws + attn_offset, workspace_bytes - attn_offset, &dev, fused, stream);
}

extern "C" int kv_cuda_status_read(const void *workspace, void *stream_, kvattn_device_status *out) {
    RETURN_IF(workspace == NULL || out == NULL, KVATTN_ERR_INVALID_ARGUMENT, "status read: workspace=%p out=%p",
              workspace, (void *)out);
    /* no usable device: KVATTN_ERR_NOT_AVAILABLE, as kvattn_forward says (not the runtime's error of the first call) */
    const int avail = kv_cuda_ready();
    if (avail != KVATTN_OK) return avail;
    cudaStream_t stream = (cudaStream_t)stream_;
    /* a copy into this stack record must not be recorded into a graph being captured (nor can it wait there) */
    cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    KV_CUDA_CHECK_RET(cudaStreamIsCapturing(stream, &cap));
    RETURN_IF(cap != cudaStreamCaptureStatusNone, KVATTN_ERR_INVALID_ARGUMENT,
              "stream: is being captured into a CUDA graph; read the device status outside the capture (after the "
              "graph's launch)");
    kvattn_device_status st;
    KV_CUDA_CHECK_RET(cudaMemcpyAsync(&st, workspace, sizeof st, cudaMemcpyDeviceToHost, stream));
    KV_CUDA_CHECK_RET(cudaStreamSynchronize(stream));
    *out = st;
    return KVATTN_OK;
}
