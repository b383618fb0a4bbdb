/* cuda_internal.cuh — the contract between the CUDA backend's two halves:
 *   backend.cu (host entry, workspace layout, the check kernel that validates each sequence on the device and
 *               writes the status record + a per-sequence ok flag, the append kernel with fused rotary), and
 *   attn.cu    (the scheduler that turns live lengths into work items, the attention kernel, the combine).
 * Both see kvattn_params by value; all pointers in it are device pointers. */
#ifndef KVATTN_CUDA_INTERNAL_CUH
#define KVATTN_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>
#include "internal.h"

#define KV_CUDA_CHECK_RET(call)                                                                              \
    do {                                                                                                     \
        cudaError_t err_ = (call);                                                                           \
        if (err_ != cudaSuccess)                                                                             \
            return kv_set_error(KVATTN_ERR_CUDA, "%s: %s (%s:%d)", #call, cudaGetErrorString(err_), __FILE__, \
                                __LINE__);                                                                   \
    } while (0)

/* Device facts read once per device (cached; no sync). */
typedef struct kv_device_info {
    int device;
    int num_sms;
    int max_smem_optin; /* cudaDevAttrMaxSharedMemoryPerBlockOptin */
} kv_device_info;
int kv_device_info_get(kv_device_info *info); /* backend.cu */

/* Workspace layout (all offsets 256-byte aligned):
 *   [0, 256)                    kvattn_device_status (status record), written by the check kernel
 *   [256, 256 + round(B))       int8 seq_ok[B]: 1 if sequence b passed every check (append + attend it)
 *   [attn_offset, ...)          the attention half's own scratch (items, partial outputs), size from
 *                               kv_attn_workspace_bytes() */
size_t kv_ws_attn_offset(const kvattn_params *p);

/* attn.cu: scratch the attention half needs for these params on this device (depends on arguments only). */
size_t kv_attn_workspace_bytes(const kvattn_params *p, const kv_device_info *dev);
/* attn.cu: enqueue scheduling, attention and combine on `stream`. Sequences with seq_ok[b] == 0 are skipped
 * entirely (their out/lse rows are not written). Returns KVATTN_OK or an error status (kv_set_error). */
int kv_attn_launch(const kvattn_params *p, const int8_t *seq_ok, void *attn_ws, size_t attn_ws_bytes,
                   const kv_device_info *dev, cudaStream_t stream);
/* attn.cu: every host-side step of kv_attn_launch that can fail (support, workspace size, per-variant smem
 * attribute), run by kv_cuda_forward before any kernel that writes; launches nothing. */
int kv_attn_prepare(const kvattn_params *p, const kv_device_info *dev, size_t attn_ws_bytes);
/* attn.cu: backend-specific support check (dtype, head dim); called by kv_cuda_check. */
int kv_attn_supported(const kvattn_params *p);

#endif
