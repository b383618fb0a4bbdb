/* Finding: attn_plan_make (attn.cu:124) evaluates `p->num_splits + 1` in int. num_splits = INT32_MAX is valid
 * (kvattn_validate only asks >= 0; "n = at most n KV splits"), and with batch_invariant = 1 the sum overflows
 * (undefined behaviour; wraps to INT32_MIN in practice), pinv becomes -2^31, and the workspace layout is computed
 * from negative item / partial-row counts. Runs on the CPU (no device: 132-SM stand-in). */
#include <limits.h>
#include "common.h"
int main(void) {
    int splits[] = {0, 64, 1 << 20, INT_MAX - 1, INT_MAX};
    for (unsigned i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        kvattn_params p = mk(8, 8, 32, 8, 128, 16, 8192, 1, splits[i]); /* 8 decodes, 128K capacity, invariant */
        size_t ws = 0;
        int st = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &ws);
        printf("batch_invariant=1 num_splits=%d: %s, workspace %zu bytes (%.3g)\n", splits[i],
               kvattn_status_string(st), ws, (double)ws);
    }
    /* the call itself is then refused whatever workspace is given (on a GPU too: same arithmetic) */
    kvattn_params p = mk(8, 8, 32, 8, 128, 16, 8192, 1, INT_MAX);
    int st = kvattn_forward(&p, KVATTN_BACKEND_CUDA, fake(9), (size_t)1 << 40, NULL);
    printf("forward with a 1 TiB workspace: %s: %s\n", kvattn_status_string(st), kvattn_last_error());
    return 0;
}
