/* validate_cost.c — host time of kvattn_validate for an 8-sequence paged decode step that appends (GQA 32/8, D 128),
 * strides left unset (default) or written out ("x" argument), three rounds of 200000 calls. Fifty-fifth session: the
 * cost of resolving KVATTN_STRIDE_PACKED and of the mixed-strides check. Build against a static library:
 *   gcc -O2 -Iinclude dev/validate_cost.c build/libkvattn.a -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt \
 *       -lstdc++ -lm -fopenmp -lpthread -o /tmp/validate_cost && /tmp/validate_cost && /tmp/validate_cost x
 * (a library from before the fifty-fifth session needs the "x" form: its defaults were 0). */
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include "kvattn.h"
int main(int argc, char **argv) {
    (void)argv;
    enum { B = 8, H = 32, HK = 8, D = 128, MP = 512 };
    static uint16_t q[B * H * D], kn[B * HK * D], out[B * H * D];
    static int32_t cu[B + 1], sl[B], bt[B * MP];
    static float lse[B * H];
    for (int b = 0; b <= B; b++) cu[b] = b;
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_BF16; p.batch = B; p.num_heads = H; p.num_kv_heads = HK; p.head_dim = D;
    p.q = q; p.cu_seqlens_q = cu; p.total_q = B;
    p.k_new = kn; p.v_new = kn + 1; p.cu_seqlens_knew = cu; p.total_knew = B;
    p.k_cache = (void *)0x10000000000ull; p.v_cache = (void *)0x20000000000ull; p.block_table = bt; p.max_pages_per_seq = MP; p.num_pages = 4096; p.page_size = 16;
    p.cache_seqlens = sl; p.causal = 1; p.out = out; p.softmax_lse = lse;
    if (argc > 1) { /* explicit strides */
        p.q_batch_stride = 0; p.q_row_stride = H * D; p.q_head_stride = D;
        p.knew_batch_stride = p.vnew_batch_stride = 0; p.knew_row_stride = p.vnew_row_stride = HK * D; p.knew_head_stride = p.vnew_head_stride = D;
        p.k_batch_stride = p.v_batch_stride = 16 * HK * D; p.k_row_stride = p.v_row_stride = HK * D; p.k_head_stride = p.v_head_stride = D;
        p.block_table_batch_stride = MP; p.rotary_row_stride = 0; p.alibi_batch_stride = 0;
        p.out_batch_stride = 0; p.out_row_stride = H * D; p.out_head_stride = D;
        p.lse_batch_stride = 0; p.lse_head_stride = B; p.lse_row_stride = 1;
    }
    int st = kvattn_validate(&p, KVATTN_BACKEND_CPU);
    if (st) { printf("%s\n", kvattn_last_error()); return 1; }
    struct timespec t0, t1;
    for (int rep = 0; rep < 3; rep++) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < 200000; i++) st |= kvattn_validate(&p, KVATTN_BACKEND_CPU);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("%.1f ns per kvattn_validate\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 200000);
    }
    return st;
}
