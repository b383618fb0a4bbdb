/* attn.cu — the attention half of the CUDA backend (see cuda_internal.cuh): support check, workspace size and
 * the launch of scheduling, attention and combine kernels on the caller's stream.
 * B sequences, H query heads, Hk KV heads, D head dim. */
#include "cuda/cuda_internal.cuh"
#include "cuda/attn_v0.cuh"

int kv_attn_supported(const kvattn_params *p) {
    RETURN_IF(p->dtype != KVATTN_F16 && p->dtype != KVATTN_BF16, KVATTN_ERR_UNSUPPORTED,
              "dtype=%d: the CUDA backend supports fp16 (%d) and bf16 (%d)", p->dtype, KVATTN_F16, KVATTN_BF16);
    RETURN_IF(p->head_dim < 8 || p->head_dim > 256 || p->head_dim % 8 != 0, KVATTN_ERR_UNSUPPORTED,
              "head_dim=%d: the CUDA backend supports multiples of 8 from 8 to 256", p->head_dim);
    RETURN_IF(p->rotary_cos && p->rotary_dtype != KVATTN_F32 && p->rotary_dtype != p->dtype, KVATTN_ERR_UNSUPPORTED,
              "rotary_dtype=%d: must be fp32 (%d) or the dtype of q (%d)", p->rotary_dtype, KVATTN_F32, p->dtype);
    return KVATTN_OK;
}

size_t kv_attn_workspace_bytes(const kvattn_params *p, const kv_device_info *dev) { return 256; }

template <typename T>
static int launch_v0(const kvattn_params *p, const int8_t *seq_ok, const kv_device_info *dev, cudaStream_t stream) {
    const int grid = dev->num_sms * 8;
    const int dch = (p->head_dim + 31) / 32;
    switch (dch) {
    case 1: kv_attn_v0_kernel<T, 1><<<grid, 256, 0, stream>>>(*p, seq_ok); break;
    case 2: kv_attn_v0_kernel<T, 2><<<grid, 256, 0, stream>>>(*p, seq_ok); break;
    case 3: kv_attn_v0_kernel<T, 3><<<grid, 256, 0, stream>>>(*p, seq_ok); break;
    case 4: kv_attn_v0_kernel<T, 4><<<grid, 256, 0, stream>>>(*p, seq_ok); break;
    case 5: kv_attn_v0_kernel<T, 5><<<grid, 256, 0, stream>>>(*p, seq_ok); break;
    case 6: kv_attn_v0_kernel<T, 6><<<grid, 256, 0, stream>>>(*p, seq_ok); break;
    case 7: kv_attn_v0_kernel<T, 7><<<grid, 256, 0, stream>>>(*p, seq_ok); break;
    case 8: kv_attn_v0_kernel<T, 8><<<grid, 256, 0, stream>>>(*p, seq_ok); break;
    default: return kv_set_error(KVATTN_ERR_INTERNAL, "head_dim=%d: no v0 kernel", p->head_dim);
    }
    KV_CUDA_CHECK_RET(cudaGetLastError());
    return KVATTN_OK;
}

int kv_attn_launch(const kvattn_params *p, const int8_t *seq_ok, void *attn_ws, size_t attn_ws_bytes,
                              const kv_device_info *dev, cudaStream_t stream) {
    int st = kv_attn_supported(p);
    if (st != KVATTN_OK) return st;
    if (p->batch == 0) return KVATTN_OK;
    return p->dtype == KVATTN_F16 ? launch_v0<__half>(p, seq_ok, dev, stream)
                                  : launch_v0<__nv_bfloat16>(p, seq_ok, dev, stream);
}
