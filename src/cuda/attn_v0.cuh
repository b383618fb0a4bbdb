/* attn_v0.cuh — the simplest correct attention kernel (one warp per (query row, head), scalar fp32), kept as
 * the validation baseline for the fast kernels (dev/attn_*.cu) and as the library's fallback path.
 * B sequences, H query heads, Hk KV heads, D head dim. No workspace, no scheduling: a grid-stride loop. */
#ifndef KVATTN_ATTN_V0_CUH
#define KVATTN_ATTN_V0_CUH

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math_constants.h>
#include "cuda/cuda_internal.cuh"

static __device__ __forceinline__ float kv_to_float(__half x) { return __half2float(x); }
static __device__ __forceinline__ float kv_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
static __device__ __forceinline__ void kv_from_float(__half *dst, float x) { *dst = __float2half_rn(x); }
static __device__ __forceinline__ void kv_from_float(__nv_bfloat16 *dst, float x) { *dst = __float2bfloat16_rn(x); }
/* An output element. out is a convex combination of the values, so |out| <= max |v| <= 65504 in fp16; the fp32 result
 * passes 65504 only by rounding (the kernels round P to 16 bits for P x V while l sums the fp32 P: with v = 65504 and
 * P rounded up by ~2^-12, fp16 gave inf; dev/numerics_probe.py (d), fifty-fifth session). So a finite result is
 * clamped to the largest finite fp16 value; inf and NaN (from non-finite values) pass. bf16 shares fp32's range:
 * plain rounding (there a sum P v near 3.4e38 overflows fp32 first). */
static __device__ __forceinline__ void kv_out_from_float(__half *dst, float x) {
    const float a = fabsf(x);
    *dst = __float2half_rn(a > 65504.0f && a != CUDART_INF_F ? copysignf(65504.0f, x) : x);
}
static __device__ __forceinline__ void kv_out_from_float(__nv_bfloat16 *dst, float x) { *dst = __float2bfloat16_rn(x); }

/* Rotary cos/sin element (pair index k of position pos), fp32 or the q dtype. Caller checked the range. */
template <typename T>
static __device__ __forceinline__ float kv_rope_table(const kvattn_params &p, const void *table, int32_t pos, int k) {
    int64_t stride = p.rotary_row_stride ? p.rotary_row_stride : p.rotary_dim / 2;
    int64_t off = (int64_t)pos * stride + k;
    if (p.rotary_dtype == KVATTN_F32) return ((const float *)table)[off];
    return kv_to_float(((const T *)table)[off]);
}

/* Rotates the query channels [c0, c0 + 8) held in vals (already loaded; channels >= rope_R are left as they are)
 * to position pos; qrow is the row's first element in global memory, read for the partner channels. A position
 * outside [0, rotary_max_pos) leaves the chunk as it is (the table is never read out of range). */
template <typename T>
static __device__ __forceinline__ void kv_rope_q8(const kvattn_params &p, const T *qrow, int c0, int32_t rope_R,
                                                  int32_t pos, T *vals) {
    if (pos < 0 || pos >= p.rotary_max_pos) return;
    const int il = p.rotary_interleaved;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int c = c0 + j;
        if (c < rope_R) {
            const float x = kv_to_float(vals[j]);
            const float y = kv_to_float(qrow[kv_rope_partner(c, rope_R, il)]);
            const int pr = kv_rope_pair(c, rope_R, il);
            const float cs = kv_rope_table<T>(p, p.rotary_cos, pos, pr);
            const float sn = kv_rope_table<T>(p, p.rotary_sin, pos, pr);
            kv_from_float(&vals[j], x * cs - y * sn * kv_rope_sign(c, rope_R, il));
        }
    }
}

/* Sequence of global query row r (varlen: binary search in cu_seqlens_q; fixed: r / seqlen_q); -1 if none. */
static __device__ __forceinline__ int kv_seq_of_row(const kvattn_params &p, int64_t r) {
    if (!p.cu_seqlens_q) return p.seqlen_q > 0 ? (int)(r / p.seqlen_q) : -1;
    int lo = 0, hi = p.batch; /* find the last b with cu[b] <= r */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (p.cu_seqlens_q[mid] <= r) lo = mid; else hi = mid;
    }
    return lo;
}

/* out/lse: [rows, H, D]; each warp owns one (global row, head) at a time.
 * 1. find the row's sequence b and index i, skip unless seq_ok[b] and i is inside its rows;
 * 2. load q (rotated at position S + n_new - n_q + i) into registers, channels lane + 32k;
 * 3. walk the visible keys, online softmax in fp32 (scores scaled, capped, biased);
 * 4. write out = acc / l and lse = m + log(l) (0 and -inf for an empty row). */
template <typename T, int DCH /* ceil(D / 32) */>
__global__ void __launch_bounds__(256) kv_attn_v0_kernel(kvattn_params p, const int8_t *__restrict__ seq_ok) {
    const int lane = threadIdx.x & 31;
    const int64_t warp0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    const int D = p.head_dim, H = p.num_heads, G = p.num_heads / p.num_kv_heads;
    const int64_t rows = p.cu_seqlens_q ? (int64_t)p.total_q : (int64_t)p.batch * p.seqlen_q;
    const float scale = kv_softmax_scale(&p);
    const int varlen = p.cu_seqlens_q != NULL;
    const T *q = (const T *)p.q;
    const T *kc = (const T *)p.k_cache;
    const T *vc = (const T *)p.v_cache;
    T *out = (T *)p.out;

    for (int64_t task = warp0; task < rows * H; task += nwarps) {
        const int64_t r = task / H;
        const int h = (int)(task - r * H);
        const int b = kv_seq_of_row(p, r);
        if (b < 0 || b >= p.batch || !seq_ok[b]) continue;
        const kv_seq s = kv_seq_get(&p, b);
        const int64_t i64 = varlen ? r - s.q_row0 : r - (int64_t)b * p.seqlen_q;
        if (i64 < 0 || i64 >= s.n_q) continue;
        const int i = (int)i64;
        const int kvh = h / G;
        const int32_t s_k = s.S + s.n_new - s.L;
        const int32_t cache_row = p.cache_batch_idx ? p.cache_batch_idx[b] : b;

        float qv[DCH];
        const int64_t qoff = kv_row_offset(varlen, b, s.q_row0, i, p.q_batch_stride, p.q_row_stride) +
                             (int64_t)h * p.q_head_stride;
        const int32_t qpos_abs = s.S + s.n_new - s.n_q + i;
        const bool rope = p.rotary_cos && qpos_abs >= 0 && qpos_abs < p.rotary_max_pos;
#pragma unroll
        for (int k = 0; k < DCH; k++) {
            const int c = lane + 32 * k;
            float x = 0.0f;
            if (c < D) {
                x = kv_to_float(q[qoff + c]);
                if (rope && c < p.rotary_dim) {
                    const int R = p.rotary_dim, il = p.rotary_interleaved;
                    const int pair = kv_rope_pair(c, R, il);
                    const float y = kv_to_float(q[qoff + kv_rope_partner(c, R, il)]);
                    const float cs = kv_rope_table<T>(p, p.rotary_cos, qpos_abs, pair);
                    const float sn = kv_rope_table<T>(p, p.rotary_sin, qpos_abs, pair);
                    x = x * cs - y * sn * kv_rope_sign(c, R, il);
                }
            }
            qv[k] = x;
        }
        /* q stored in the dtype? No: the fast kernels round rotated q to T before the product; do the same. */
#pragma unroll
        for (int k = 0; k < DCH; k++) {
            T t;
            kv_from_float(&t, qv[k]);
            qv[k] = kv_to_float(t);
        }

        const kv_range vis = kv_visible_keys(i, s.n_q, s_k, p.causal, p.window_left, p.window_right);
        const int32_t qkey = i + s_k - s.n_q;
        const float slope = p.alibi_slopes ? p.alibi_slopes[(int64_t)b * p.alibi_batch_stride + h] : 0.0f;
        float m = -CUDART_INF_F, l = 0.0f, acc[DCH];
#pragma unroll
        for (int k = 0; k < DCH; k++) acc[k] = 0.0f;
        for (int32_t j = vis.lo; j < vis.hi; j++) {
            const int64_t ko = kv_cache_offset(&p, b, cache_row, s.L + j, kvh, p.k_batch_stride, p.k_row_stride,
                                               p.k_head_stride);
            const int64_t vo = kv_cache_offset(&p, b, cache_row, s.L + j, kvh, p.v_batch_stride, p.v_row_stride,
                                               p.v_head_stride);
            float dot = 0.0f;
#pragma unroll
            for (int k = 0; k < DCH; k++) {
                const int c = lane + 32 * k;
                if (c < D && ko >= 0) dot += qv[k] * kv_to_float(kc[ko + c]);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
            float sc = kv_softcap(dot * scale, p.softcap);
            if (p.alibi_slopes) sc += kv_alibi_bias(slope, qkey, j);
            const float m_new = fmaxf(m, sc);
            const float corr = expf(m - m_new); /* m = -inf first: exp(-inf) = 0 */
            const float e = expf(sc - m_new);
            l = l * corr + e;
#pragma unroll
            for (int k = 0; k < DCH; k++) {
                const int c = lane + 32 * k;
                const float v = (c < D && vo >= 0) ? kv_to_float(vc[vo + c]) : 0.0f;
                acc[k] = acc[k] * corr + e * v;
            }
            m = m_new;
        }
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        const int64_t ooff = kv_row_offset(varlen, b, s.q_row0, i, p.out_batch_stride, p.out_row_stride) +
                             (int64_t)h * p.out_head_stride;
#pragma unroll
        for (int k = 0; k < DCH; k++) {
            const int c = lane + 32 * k;
            if (c < D) kv_out_from_float(&out[ooff + c], acc[k] * inv);
        }
        if (p.softmax_lse && lane == 0) {
            const int64_t lo = varlen ? (int64_t)h * p.lse_head_stride + r * p.lse_row_stride
                                      : (int64_t)b * p.lse_batch_stride + (int64_t)h * p.lse_head_stride +
                                            (int64_t)i * p.lse_row_stride;
            p.softmax_lse[lo] = l > 0.0f ? m + logf(l) : -CUDART_INF_F;
        }
    }
}

#endif
