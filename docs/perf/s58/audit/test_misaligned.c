/* test_misaligned.c — audit repro (not part of the suite): validation does not require a tensor's base address to be
 * a multiple of its element size on CUDA (only the workspace's 16-byte alignment is checked; the Python layer refuses
 * such arrays, the C API does not). Here q starts 1 byte into an allocation: attn_fast_layout_ok sends the call to the
 * scalar kv_attn_v0_kernel, whose 2-byte loads of q then fault (cudaErrorMisalignedAddress, a sticky error that ends
 * the context). Argument "lse": q aligned, softmax_lse 2 bytes off instead (4-byte float stores). Argument "cu":
 * cu_seqlens_q 2 bytes off (int32 loads in the scheduler / check). Expected with a fixed library:
 * KVATTN_ERR_INVALID_ARGUMENT from kvattn_validate / kvattn_forward. Exit 0 = refused or ran cleanly, 1 = device
 * fault (defect), 2 = setup error. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kvattn.h"

int main(int argc, char **argv) {
    const int which = argc > 1 && !strcmp(argv[1], "lse") ? 1 : argc > 1 && !strcmp(argv[1], "cu") ? 2 : 0;
    const int have_gpu = kvattn_backend_available(KVATTN_BACKEND_CUDA);
    enum { B = 1, H = 1, D = 64, C = 16 };
    char *dq = NULL, *dk = NULL, *dv = NULL, *dout = NULL, *dlse = NULL, *dseq = NULL, *dcu = NULL;
    if (have_gpu) {
        if (cudaMalloc((void **)&dq, 4096) || cudaMalloc((void **)&dk, 4096) || cudaMalloc((void **)&dv, 4096) ||
            cudaMalloc((void **)&dout, 4096) || cudaMalloc((void **)&dlse, 256) || cudaMalloc((void **)&dseq, 256) ||
            cudaMalloc((void **)&dcu, 256))
            return 2;
        cudaMemset(dq, 0, 4096);
        cudaMemset(dk, 0, 4096);
        cudaMemset(dv, 0, 4096);
        const int32_t S = 8, one = 1;
        unsigned char hb[16] = {0};
        memcpy(hb + 10, &one, 4); /* int32 {0, 1} at byte offset 6 */
        cudaMemcpy(dseq, &S, 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dcu, hb, 16, cudaMemcpyHostToDevice);
    } else { /* stand-ins, never dereferenced: only validation runs */
        dq = (char *)(uintptr_t)0x10000000u; dk = dq + 0x10000; dv = dq + 0x20000; dout = dq + 0x30000;
        dlse = dq + 0x40000; dseq = dq + 0x50000; dcu = dq + 0x60000;
    }
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_BF16;
    p.batch = B;
    p.num_heads = H;
    p.num_kv_heads = H;
    p.head_dim = D;
    p.q = which == 0 ? dq + 1 : dq;
    if (which == 2) {
        p.cu_seqlens_q = (const int32_t *)(dcu + 6); /* {0, 1} at a 2-byte-aligned address */
        p.total_q = 1;
    } else {
        p.seqlen_q = 1;
    }
    p.k_cache = dk;
    p.v_cache = dv;
    p.cache_batch = B;
    p.cache_capacity = C;
    p.cache_seqlens = (const int32_t *)dseq;
    p.out = dout;
    p.softmax_lse = which == 1 ? (float *)(dlse + 2) : NULL;
    int st = kvattn_validate(&p, KVATTN_BACKEND_CUDA);
    printf("%s misaligned: validate -> %s %s\n", which == 0 ? "q" : which == 1 ? "softmax_lse" : "cu_seqlens_q",
           kvattn_status_string(st), kvattn_last_error());
    if (st != KVATTN_OK) return 0;
    if (!have_gpu) {
        printf("SKIP: no CUDA device (validation accepted the misaligned pointer)\n");
        return 0;
    }
    size_t ws_bytes = 0;
    if (kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &ws_bytes) != KVATTN_OK) return 2;
    void *ws;
    if (cudaMalloc(&ws, ws_bytes)) return 2;
    st = kvattn_forward(&p, KVATTN_BACKEND_CUDA, ws, ws_bytes, NULL);
    printf("forward -> %s %s\n", kvattn_status_string(st), kvattn_last_error());
    if (st != KVATTN_OK) return 0;
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("DEFECT: device fault %s (%s)\n", cudaGetErrorName(e), cudaGetErrorString(e));
        return 1;
    }
    printf("OK: ran cleanly\n");
    return 0;
}
