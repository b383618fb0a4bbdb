/* alias_cu_cache.c — the cache being appended to overlaps cu_seqlens_knew (read-only metadata). check_data validates
 * cu_seqlens_knew, then append_seq re-reads it per sequence (kv_seq_get) after sequence 0's append has overwritten
 * it: sequence 1 reads k_new / v_new at a row index taken from float bits, far outside k_new. */
#include "kvattn.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    enum { B = 2, H = 1, D = 4, CAP = 4 };
    float *kc = calloc(B * CAP * D, sizeof(float)), *vc = calloc(B * CAP * D, sizeof(float));
    int32_t seqlens[B] = {0, 0};
    /* sequence 0 appends at cache row 0, position 0: kc[0..3]; cu_seqlens_knew lives at kc + 1 .. kc + 3 */
    int32_t *cu_n = (int32_t *)(kc + 1);
    cu_n[0] = 0; cu_n[1] = 1; cu_n[2] = 2;
    float q[2 * D], kn[2 * D], vn[2 * D], out[2 * D];
    int32_t cu_q[B + 1] = {0, 1, 2};
    for (int i = 0; i < 2 * D; i++) q[i] = 0.1f, kn[i] = 0.0f, vn[i] = 1.0f;
    /* k_new row 0, as stored by sequence 0's append, becomes cu_seqlens_knew[1..2] = {100000000, 100000005} */
    int32_t big[2] = {100000000, 100000005};
    memcpy(&kn[2], big, sizeof big);
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_F32; p.batch = B; p.num_heads = H; p.num_kv_heads = H; p.head_dim = D;
    p.q = q; p.cu_seqlens_q = cu_q; p.total_q = 2;
    p.k_new = kn; p.v_new = vn; p.cu_seqlens_knew = cu_n; p.total_knew = 2;
    p.k_cache = kc; p.v_cache = vc; p.cache_batch = B; p.cache_capacity = CAP; p.cache_seqlens = seqlens;
    p.out = out;
    printf("validate: %d %s\n", kvattn_validate(&p, KVATTN_BACKEND_CPU), kvattn_last_error());
    fflush(stdout);
    int st = kvattn_forward(&p, KVATTN_BACKEND_CPU, NULL, 0, NULL);
    printf("forward: %d %s\n", st, kvattn_last_error());
    return 0;
}
