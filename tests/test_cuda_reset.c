/* test_cuda_reset.c — calls keep working after cudaDeviceReset(). The library caches per device that it raised the
 * dynamic shared-memory limit of its kernels (the decode kernels take 96 KB at D 128); a reset destroys the primary
 * context, and were the limit lost with it, every later launch would fail ("invalid argument") while the cache said
 * it was set. On the H200 with CUDA 13.0 the runtime keeps the attribute across the reset (fifty-second session).
 * Each round: a mixed step (decodes, a prompt, appends; paged page 16 and contiguous in turn, bf16, D 128, so that
 * the decode kernels and the sm90 prefill kernel both run), checked against the float64 reference with poisoned
 * outputs and guards; then the device is reset and the next round allocates everything again. */
#include "test_cuda_common.h"

#define ROUNDS 4

int main(void) {
    kvt_init("test_cuda_reset");
    if (!cu_gpu_or_skip(ROUNDS)) return kvt_finish();
    for (int round = 0; round < ROUNDS; round++) {
        int n_q[4] = {1, kvt_randint(130, 400), 1, 3}, n_new[4], S[4] = {kvt_randint(200, 3000), 0,
                                                                          kvt_randint(1, 9000), kvt_randint(5, 600)};
        for (int b = 0; b < 4; b++) n_new[b] = n_q[b];
        cu_spec sp = cu_spec_default();
        sp.B = 4;
        sp.H = 32;
        sp.Hk = 8;
        sp.n_q = n_q;
        sp.n_new = n_new;
        sp.S = S;
        sp.paged = round & 1; /* paged and contiguous in turn */
        kvt_problem P;
        cu_build(&P, &sp);
        kvt_case_begin("round %d (%s; prompt of %d, caches %d / %d / %d)%s", round, sp.paged ? "paged 16" : "contiguous",
                       n_q[1], S[0], S[2], S[3], round ? ", after cudaDeviceReset()" : "");
        if (kvt_problem_upload(&P, 1) == 0) {
            if (kvt_problem_run(&P, kvt_expect_ok())) kvt_failf("unsupported: %s", kvattn_last_error());
        }
        kvt_problem_free(&P);
        kvt_case_end();
#ifdef KVATTN_HAVE_CUDA
        const cudaError_t e = cudaDeviceReset();
        if (e != cudaSuccess) kvt_note_failure("cudaDeviceReset: %s", cudaGetErrorString(e));
#endif
    }
    return kvt_finish();
}
