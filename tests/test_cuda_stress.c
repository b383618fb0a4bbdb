/* test_cuda_stress.c — the small-page prefill stress that broke other libraries (illegal memory access):
 * page size 16, 4 sequences, 170-token prompts appended into an empty paged cache with freshly shuffled block
 * tables, 1000 iterations (KVATTN_STRESS_ITERS overrides; KVATTN_TEST_QUICK=1 runs 100). Every iteration:
 * the status record must be clean, no output element may stay poisoned, and the guard bytes around every
 * buffer are checked; every 25th iteration (and the first and last) is checked in full against the float64
 * reference (out, lse, both caches, untouched bytes). Meant to run under compute-sanitizer memcheck too. */
#include "test_cuda_common.h"

#define NSEQ 4
#define PROMPT 170

int main(void) {
    kvt_init("test_cuda_stress");
    int iters = kvt_quick() ? 100 : 1000;
    const char *env = getenv("KVATTN_STRESS_ITERS");
    if (env && *env) iters = atoi(env);
    const int full_every = 25;
    int n_full = 0; /* the cases a GPU run counts: the full iterations below */
    for (int it = 0; it < iters; it++) n_full += it == 0 || it == iters - 1 || it % full_every == 0;
    if (!cu_gpu_or_skip(n_full)) return kvt_finish();

    int n_q[NSEQ], n_new[NSEQ], S[NSEQ];
    for (int b = 0; b < NSEQ; b++) {
        n_q[b] = n_new[b] = PROMPT;
        S[b] = 0;
    }
    cu_spec sp = cu_spec_default();
    sp.B = NSEQ;
    sp.n_q = n_q;
    sp.n_new = n_new;
    sp.S = S;
    sp.H = 8;
    sp.Hk = 2;
    sp.D = 128;
    sp.page_size = 16;
    sp.extra_pages = 20; /* a pool larger than needed: block tables differ every iteration */
    sp.extra_slots = 3;  /* trailing -1 entries that must never be read as pages */
    kvt_problem P;
    int failures_outside_cases = 0;
    int64_t quiet_iters = 0;
    size_t ws_bytes = 0;
    kvt_buf ws = {0};
    for (int it = 0; it < iters; it++) {
        const int full = it == 0 || it == iters - 1 || it % full_every == 0;
        sp.dtype = (it & 1) ? KVATTN_F16 : KVATTN_BF16;
        sp.rotary_dim = (it % 3 == 0) ? 64 : 0; /* every third iteration with rotary (alternating pairings) */
        sp.rotary_interleaved = (it / 3) & 1;
        cu_build(&P, &sp); /* fresh data, fresh shuffled block tables, fresh (random) pool contents */
        if (full) {
            kvt_case_begin("iteration %d (%s, rotary %d), full check", it, sp.dtype == KVATTN_BF16 ? "bf16" : "fp16",
                           sp.rotary_dim);
            if (kvt_problem_upload(&P, 1) == 0) {
                if (kvt_problem_run(&P, kvt_expect_ok())) kvt_case_skip("unsupported");
                else {
                    cu_sync_ok("full iteration");
                    kvt_case_end();
                }
            } else kvt_case_end();
            kvt_problem_free(&P);
            continue;
        }
        /* quick iteration: one call, status record, every output element written, guards */
        if (kvt_problem_upload(&P, 1)) {
            kvt_note_failure("iteration %d: upload failed", it);
            failures_outside_cases++;
            kvt_problem_free(&P);
            break;
        }
        size_t need = 0;
        if (kvattn_workspace_size(&P.pd, KVATTN_BACKEND_CUDA, &need) != KVATTN_OK) {
            kvt_note_failure("iteration %d: workspace_size: %s", it, kvattn_last_error());
            failures_outside_cases++;
            kvt_problem_free(&P);
            break;
        }
        if (need > ws_bytes) {
            kvt_free(&ws);
            ws = kvt_alloc(KVATTN_BACKEND_CUDA, need);
            ws_bytes = need;
        }
        int st = kvattn_forward(&P.pd, KVATTN_BACKEND_CUDA, ws.ptr, ws_bytes, NULL);
        kvattn_device_status ds = {0, 0, -1, 0};
        int rs = kvattn_device_status_read(ws.ptr, NULL, &ds);
        int bad = st != KVATTN_OK || rs != KVATTN_OK || ds.flags || ds.num_failed || ds.first_failed != -1;
        if (bad)
            kvt_note_failure("iteration %d: forward %s, status read %s, flags 0x%x failed %d (%s)", it,
                             kvattn_status_string(st), kvattn_status_string(rs), ds.flags, ds.num_failed,
                             kvattn_last_error());
        unsigned char *o = malloc(P.out.bytes);
        if (kvt_download(&P.out.dev, o, P.out.bytes)) bad = 1;
        else
            for (size_t e = 0; e + 1 < P.out.bytes; e += 2)
                if (o[e] == 0xFF && o[e + 1] == 0xFF) {
                    kvt_note_failure("iteration %d: out element %zu not written", it, e / 2);
                    bad = 1;
                    break;
                }
        free(o);
        kvt_arr *all[] = {&P.q, &P.k_new, &P.v_new, &P.out, &P.lse, &P.cu_q, &P.cu_knew, &P.seqlens,
                          &P.block_table, &P.rot_cos, &P.rot_sin, &P.k_cache, &P.v_cache};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i]->used && !kvt_guards_ok(&all[i]->dev)) {
                kvt_note_failure("iteration %d: guard bytes around %s overwritten", it, all[i]->name);
                bad = 1;
            }
        if (!kvt_guards_ok(&ws)) {
            kvt_note_failure("iteration %d: guard bytes around the workspace overwritten", it);
            bad = 1;
        }
#ifdef KVATTN_HAVE_CUDA
        cudaError_t ce = cudaDeviceSynchronize();
        if (ce != cudaSuccess) {
            kvt_note_failure("iteration %d: CUDA error %s", it, cudaGetErrorString(ce));
            bad = 1;
        }
#endif
        failures_outside_cases += bad;
        quiet_iters += !bad;
        kvt_problem_free(&P);
        if (failures_outside_cases > 5) break;
    }
    kvt_free(&ws);
    printf("test_cuda_stress: %d iterations, %lld quick iterations clean, %d with failures\n", iters,
           (long long)quiet_iters, failures_outside_cases);
    return kvt_finish();
}
