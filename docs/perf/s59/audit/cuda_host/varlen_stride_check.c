/* CPU part of the finding "an unused varlen batch stride selects the scalar fallback kernel": kvattn_validate
 * (CUDA backend) accepts q_batch_stride / out_batch_stride = 1 in varlen mode (they are documented as unused). */
#include "common.h"
int main(void) {
    kvattn_params p = mk(8, 8, 32, 8, 128, 16, 512, 0, 0);
    p.q_batch_stride = 1; p.out_batch_stride = 1;
    int st = kvattn_validate(&p, KVATTN_BACKEND_CUDA);
    printf("varlen, q/out_batch_stride=1: %s %s\n", kvattn_status_string(st), kvattn_last_error());
    size_t a = 0, b = 0;
    kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &a);
    p.q_batch_stride = p.out_batch_stride = 0;
    kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &b);
    printf("workspace sizes: %zu vs %zu\n", a, b);
    return 0;
}
