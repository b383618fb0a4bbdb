/* cuda_stub.c — stands in for the CUDA backend when nvcc was not found at build time: the backend reports
 * itself unavailable and every entry point returns KVATTN_ERR_NOT_AVAILABLE. */
#include "internal.h"

#define NOT_BUILT "CUDA backend not built: nvcc was not found at build time"

int kv_cuda_ready(void) { return kv_set_error(KVATTN_ERR_NOT_AVAILABLE, NOT_BUILT); }
int kv_cuda_available(void) {
    kv_cuda_ready();
    return 0;
}
int kv_cuda_check(const kvattn_params *p) { return kv_set_error(KVATTN_ERR_NOT_AVAILABLE, NOT_BUILT); }
size_t kv_cuda_workspace_size(const kvattn_params *p) { return 0; }
int kv_cuda_forward(const kvattn_params *p, void *workspace, size_t workspace_bytes, void *stream) {
    return kv_set_error(KVATTN_ERR_NOT_AVAILABLE, NOT_BUILT);
}
int kv_cuda_status_read(const void *workspace, void *stream, kvattn_device_status *out) {
    return kv_set_error(KVATTN_ERR_NOT_AVAILABLE, NOT_BUILT);
}
