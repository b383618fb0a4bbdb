/* alias_cu_out.c — out overlaps cu_seqlens_q (a read-only metadata array). The CPU backend validates cu_seqlens_q in
 * check_data, then re-reads it for every work item (kv_seq_get in run_item) after earlier items have written out.
 * Sequence 0's output row overwrites cu_seqlens_q[1]; sequence 1's item then reads q and writes out at a row index
 * taken from those float bits: far outside both tensors. SPEC: "No input, however wrong, makes a kernel read or
 * write outside the tensors it was given"; DECISIONS: aliasing a read-only tensor gives "an unspecified result
 * (nothing out of bounds)". */
#include "kvattn.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    enum { B = 2, H = 1, D = 4, CAP = 4 };
    /* out: 2 rows x D floats, followed by nothing; cu_seqlens_q lives at out + 2 (row 0, channels 2..3, row 1 ch 0) */
    float *out = calloc(2 * D, sizeof(float));
    int32_t *cu = (int32_t *)(out + 2);
    cu[0] = 0; cu[1] = 1; cu[2] = 2;
    float q[2 * D], kc[B * CAP * D], vc[B * CAP * D];
    for (int i = 0; i < 2 * D; i++) q[i] = 0.1f;
    for (int i = 0; i < B * CAP * D; i++) kc[i] = 0.2f, vc[i] = 1000.0f; /* out = 1000.0f = 0x447a0000 as int */
    int32_t seqlens[B] = {2, 2};

    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_F32; p.batch = B; p.num_heads = H; p.num_kv_heads = H; p.head_dim = D;
    p.q = q; p.cu_seqlens_q = cu; p.total_q = 2;
    p.k_cache = kc; p.v_cache = vc; p.cache_batch = B; p.cache_capacity = CAP; p.cache_seqlens = seqlens;
    p.out = out;
    printf("validate: %d %s\n", kvattn_validate(&p, KVATTN_BACKEND_CPU), kvattn_last_error());
    fflush(stdout);
    int st = kvattn_forward(&p, KVATTN_BACKEND_CPU, NULL, 0, NULL);
    printf("forward: %d %s; cu now = %d %d %d\n", st, kvattn_last_error(), cu[0], cu[1], cu[2]);
    return 0;
}
