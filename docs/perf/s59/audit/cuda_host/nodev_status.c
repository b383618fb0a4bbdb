/* No device on this machine: kvattn_forward reports KVATTN_ERR_NOT_AVAILABLE (DECISIONS: "No usable device ...:
 * KVATTN_ERR_NOT_AVAILABLE"), kvattn_device_status_read reports KVATTN_ERR_CUDA. Runs on the CPU. */
#include "common.h"
int main(void) {
    printf("backend_available(CUDA) = %d\n", kvattn_backend_available(KVATTN_BACKEND_CUDA));
    kvattn_params p = mk(8, 8, 32, 8, 128, 16, 512, 0, 0);
    size_t ws = 0;
    int st = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &ws);
    printf("workspace_size: %s (%zu) '%s'\n", kvattn_status_string(st), ws, kvattn_last_error());
    st = kvattn_forward(&p, KVATTN_BACKEND_CUDA, fake(9), ws, NULL);
    printf("forward: %s '%s'\n", kvattn_status_string(st), kvattn_last_error());
    kvattn_device_status s;
    st = kvattn_device_status_read(fake(9), NULL, &s);
    printf("device_status_read: %s '%s'\n", kvattn_status_string(st), kvattn_last_error());
    return 0;
}
