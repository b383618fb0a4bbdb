/* test_alias_cu_seqlens.c — audit repro (not part of the suite): a device length array that lies inside a tensor the
 * call writes is re-read by the attention kernels after that write, so the values the checks approved are not the
 * values used for the out / lse / q addresses.
 *
 * Setup (bf16, B = 2, H = Hk = 1, D = 64, contiguous cache [2, 64, 1, 64], varlen queries and new keys):
 *   cu_seqlens_q points INTO k_cache, at cache row 0, position S0 = 10 (the row sequence 0 appends this call).
 *   Before the call it holds {0, n_q0, total_q}: valid, so the fused check (scheduler) passes every sequence.
 *   k_new row 0 (sequence 0's one new key) carries in its channels 0..5 the int32 words {0, EVIL, total_q}.
 *   The append kernel copies that row into the cache, i.e. over cu_seqlens_q: cu_seqlens_q[1] becomes EVIL.
 *   The attention kernels run after the append (plain order: the call is not an early-start step) and take
 *   q_row0 = cu_seqlens_q[1] = EVIL for sequence 1 (kv_item_facts_get -> kv_seq_get re-reads it), so they read q
 *   and write out / lse at rows EVIL .. EVIL + n_q1 - 1, past total_q.
 * Validation accepts the call: the index arrays are not checked against the written tensors (validate.c checks
 * out, softmax_lse, k_cache, v_cache pairwise only). docs/DECISIONS.md says such aliasing gives "an unspecified
 * result (nothing out of bounds)"; SPEC.md says no input may make a kernel write outside its tensors.
 *
 * mode "prefill" (default): n_q = {1, 19}, total_q = 20 (sequence 1 is a prefill item: sm90 ws kernel on an H200);
 *   total_q > B keeps the call off the early start (kv_attn_early), so the append kernel runs before attention.
 * mode "decode": n_q = {1, 3}, total_q = 4, k_new rows of stride 68 (not 16-byte multiples: no early append,
 *   kv_append_vectorizable), so again the append kernel runs first; sequence 1 is a decode item.
 * EVIL = total_q + 5: the stray rows land in guard rows allocated right after out and lse (poisoned 0xFF), so the
 *   test sees them without faulting. Argument "huge": EVIL = 2^30 instead (expect an illegal-address error).
 * Argument "nopdl": sets KVATTN_NO_PDL=1 first (plain kernel boundaries; the result must not depend on it).
 * Expected with a correct library: guards intact (either the sequence is skipped and flagged, or the call refused).
 * Build: see build_tests.sh. Exit 0 = no stray write seen, 1 = defect reproduced, 2 = setup / CUDA error. */
#define _POSIX_C_SOURCE 200809L
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvattn.h"

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #x);            \
            return 2;                                                                                          \
        }                                                                                                      \
    } while (0)

static uint16_t bf16_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}
static uint32_t rng = 12345u;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return ((rng >> 8) / 16777216.0f) * 2.0f - 1.0f;
}

int main(int argc, char **argv) {
    int decode = 0, huge = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "decode")) decode = 1;
        else if (!strcmp(argv[i], "huge")) huge = 1;
        else if (!strcmp(argv[i], "nopdl")) setenv("KVATTN_NO_PDL", "1", 1);
    }
    const int have_gpu = kvattn_backend_available(KVATTN_BACKEND_CUDA);
    enum { B = 2, H = 1, HK = 1, D = 64, CB = 2, C = 64, GUARD_ROWS = 64 };
    const int n_q[B] = {1, decode ? 3 : 19};
    const int total_q = n_q[0] + n_q[1];
    const int S[B] = {10, 30};
    const int n_new[B] = {1, 0};
    const int total_knew = 1;
    const int knew_rs = decode ? 68 : 64; /* decode: not a multiple of 8 -> no early append */
    const int32_t evil = huge ? (1 << 30) : total_q + 5;

    /* k_cache with cu_seqlens_q inside row 0, position S0 (element offset S0 * D) */
    const size_t cache_elems = (size_t)CB * C * HK * D;
    uint16_t *hk = malloc(cache_elems * 2), *hv = malloc(cache_elems * 2);
    for (size_t i = 0; i < cache_elems; i++) {
        hk[i] = bf16_of(frand());
        hv[i] = bf16_of(frand());
    }
    const size_t cu_off = (size_t)S[0] * HK * D; /* cache row 0, position 10, head 0, channel 0 */
    const int32_t cu_before[3] = {0, n_q[0], total_q};
    memcpy(hk + cu_off, cu_before, sizeof cu_before);

    /* k_new / v_new: one row; k_new's channels 0..5 are the words {0, evil, total_q} */
    uint16_t *hkn = calloc((size_t)knew_rs, 2), *hvn = calloc((size_t)knew_rs, 2);
    for (int c = 0; c < D; c++) {
        hkn[c] = bf16_of(frand());
        hvn[c] = bf16_of(frand());
    }
    const int32_t cu_after[3] = {0, evil, total_q};
    memcpy(hkn, cu_after, sizeof cu_after);

    /* q and out with GUARD_ROWS rows after the tensor (q: readable slack; out: poisoned guard) */
    const size_t row = (size_t)H * D;
    const size_t q_elems = (size_t)(total_q + GUARD_ROWS) * row;
    uint16_t *hq = malloc(q_elems * 2);
    for (size_t i = 0; i < q_elems; i++) hq[i] = bf16_of(frand());
    const size_t out_bytes = (size_t)(total_q + GUARD_ROWS) * row * 2;
    const size_t lse_elems = (size_t)H * total_q + GUARD_ROWS;

    const int32_t h_cuk[3] = {0, n_new[0], n_new[0] + n_new[1]};
    const int32_t h_seqlens[B] = {S[0], S[1]};

    void *dk, *dv, *dq, *dout, *dkn, *dvn;
    float *dlse;
    int32_t *dcuk, *dseq;
    if (!have_gpu) { /* no device: only show that validation accepts the call (stand-in, never dereferenced) */
        char *fake = (char *)(uintptr_t)0x10000000u;
        dk = fake; dv = fake + 0x100000; dq = fake + 0x200000; dout = fake + 0x300000;
        dkn = fake + 0x400000; dvn = fake + 0x500000; dlse = (float *)(fake + 0x600000);
        dcuk = (int32_t *)(fake + 0x700000); dseq = (int32_t *)(fake + 0x800000);
        goto params;
    }
    CK(cudaMalloc(&dk, cache_elems * 2));
    CK(cudaMalloc(&dv, cache_elems * 2));
    CK(cudaMalloc(&dq, q_elems * 2));
    CK(cudaMalloc(&dout, out_bytes));
    CK(cudaMalloc((void **)&dlse, lse_elems * 4));
    CK(cudaMalloc(&dkn, (size_t)knew_rs * 2 * total_knew));
    CK(cudaMalloc(&dvn, (size_t)knew_rs * 2 * total_knew));
    CK(cudaMalloc((void **)&dcuk, sizeof h_cuk));
    CK(cudaMalloc((void **)&dseq, sizeof h_seqlens));
    CK(cudaMemcpy(dk, hk, cache_elems * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, hv, cache_elems * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dq, hq, q_elems * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xFF, out_bytes));
    CK(cudaMemset(dlse, 0xFF, lse_elems * 4));
    CK(cudaMemcpy(dkn, hkn, (size_t)knew_rs * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dvn, hvn, (size_t)knew_rs * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dcuk, h_cuk, sizeof h_cuk, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dseq, h_seqlens, sizeof h_seqlens, cudaMemcpyHostToDevice));

params:;
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_BF16;
    p.batch = B;
    p.num_heads = H;
    p.num_kv_heads = HK;
    p.head_dim = D;
    p.q = dq;
    p.cu_seqlens_q = (const int32_t *)((uint16_t *)dk + cu_off); /* inside k_cache */
    p.total_q = total_q;
    p.k_new = dkn;
    p.v_new = dvn;
    p.cu_seqlens_knew = dcuk;
    p.total_knew = total_knew;
    p.knew_row_stride = knew_rs;
    p.vnew_row_stride = knew_rs;
    p.k_cache = dk;
    p.v_cache = dv;
    p.cache_batch = CB;
    p.cache_capacity = C;
    p.cache_seqlens = dseq;
    p.causal = 0;
    p.out = dout;
    p.softmax_lse = dlse; /* [H, total_q]: head stride total_q (packed) */

    int st = kvattn_validate(&p, KVATTN_BACKEND_CUDA);
    printf("mode %s%s: validate -> %s %s\n", decode ? "decode" : "prefill", huge ? " huge" : "",
           kvattn_status_string(st), kvattn_last_error());
    if (st != KVATTN_OK) {
        printf("call refused: no defect reproduced\n");
        return 0;
    }
    if (!have_gpu) {
        printf("SKIP: no CUDA device (validation accepted the aliased cu_seqlens_q)\n");
        return 0;
    }
    size_t ws_bytes = 0;
    st = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &ws_bytes);
    if (st != KVATTN_OK) {
        printf("workspace size: %s %s\n", kvattn_status_string(st), kvattn_last_error());
        return 2;
    }
    void *ws;
    CK(cudaMalloc(&ws, ws_bytes));
    st = kvattn_forward(&p, KVATTN_BACKEND_CUDA, ws, ws_bytes, NULL);
    printf("forward -> %s %s\n", kvattn_status_string(st), kvattn_last_error());
    if (st != KVATTN_OK) return 2;
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("DEFECT: the call faulted on the device: %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
        return 1;
    }
    kvattn_device_status ds;
    st = kvattn_device_status_read(ws, NULL, &ds);
    printf("device status: %s flags 0x%x num_failed %d first_failed %d\n", kvattn_status_string(st), ds.flags,
           ds.num_failed, ds.first_failed);
    int32_t cu_now[3];
    CK(cudaMemcpy(cu_now, p.cu_seqlens_q, sizeof cu_now, cudaMemcpyDeviceToHost));
    printf("cu_seqlens_q after the call: {%d, %d, %d} (checked as {%d, %d, %d})\n", cu_now[0], cu_now[1], cu_now[2],
           cu_before[0], cu_before[1], cu_before[2]);

    unsigned char *ho = malloc(out_bytes);
    float *hl = malloc(lse_elems * 4);
    CK(cudaMemcpy(ho, dout, out_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl, dlse, lse_elems * 4, cudaMemcpyDeviceToHost));
    const size_t out_end = (size_t)total_q * row * 2;
    size_t bad_out = 0, first_out = 0;
    for (size_t i = out_end; i < out_bytes; i++)
        if (ho[i] != 0xFF) {
            if (!bad_out) first_out = i;
            bad_out++;
        }
    size_t bad_lse = 0;
    for (size_t i = (size_t)H * total_q; i < lse_elems; i++) {
        uint32_t u;
        memcpy(&u, &hl[i], 4);
        if (u != 0xFFFFFFFFu) bad_lse++;
    }
    if (bad_out) printf("out guard: %zu bytes written past out's %d rows (first at row %zu)\n", bad_out, total_q,
                        first_out / (row * 2));
    if (bad_lse) printf("lse guard: %zu floats written past lse's [H, total_q]\n", bad_lse);
    if (bad_out || bad_lse) {
        printf("DEFECT: the kernels wrote outside out / softmax_lse\n");
        return 1;
    }
    printf("OK: guards intact\n");
    return 0;
}
