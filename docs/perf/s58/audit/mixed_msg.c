/* mixed_msg.c — a written tensor whose *set* stride alone makes it overlap (out_head_stride < head_dim), with the
 * other strides left at KVATTN_STRIDE_PACKED: the error blames the unset strides and tells the caller to set them;
 * doing exactly that (setting out_row_stride to its packed value) still fails, now with the real reason. */
#include "kvattn.h"
#include <stdio.h>
int main(void) {
    enum { H = 4, D = 16, T = 2 };
    static float q[T * H * D], out[T * H * D], kc[8 * H * D], vc[8 * H * D];
    int32_t cu[2] = {0, T}, S[1] = {3};
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_F32; p.batch = 1; p.num_heads = H; p.num_kv_heads = H; p.head_dim = D;
    p.q = q; p.cu_seqlens_q = cu; p.total_q = T; p.out = out;
    p.k_cache = kc; p.v_cache = vc; p.cache_batch = 1; p.cache_capacity = 8; p.cache_seqlens = S;
    p.out_head_stride = D / 2; /* the actual mistake */
    int st = kvattn_validate(&p, KVATTN_BACKEND_CPU);
    printf("1) %s: %s\n", kvattn_status_string(st), kvattn_last_error());
    p.out_row_stride = (int64_t)H * D; /* follow the advice: set the unset stride to the value it resolved to */
    st = kvattn_validate(&p, KVATTN_BACKEND_CPU);
    printf("2) %s: %s\n", kvattn_status_string(st), kvattn_last_error());
    return 0;
}
