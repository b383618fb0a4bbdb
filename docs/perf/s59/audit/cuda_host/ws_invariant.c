/* Finding: batch-invariant workspace bound uses KV_MAX_TILE_ROWS (128) rows per sequence, but only sequences of
 * <= KV_PREFILL_ROWS (64) packed rows are ever split in that mode (kv_sched_split), so the partial-row region is
 * up to 2x larger than anything the scheduler can write; and it scales with capacity x B x Hk.
 * Runs on the CPU (no device: kvattn_workspace_size uses the 132-SM, non-sm90 stand-in). */
#include "common.h"
int main(void) {
    struct { int B, total_q, H, Hk, D, page, max_pages; } c[] = {
        {256, 8192, 32, 8, 128, 16, 8192},   /* Llama-3-8B-like, 128K context, chunked-prefill budget 8192 */
        {256, 256, 32, 8, 128, 16, 8192},    /* same, a pure decode step */
        {1024, 1024, 64, 8, 128, 16, 65536}, /* 70B-like, 1M-token capacity, decode */
    };
    for (unsigned i = 0; i < sizeof c / sizeof c[0]; i++) {
        size_t inv = 0, aut = 0;
        kvattn_params p = mk(c[i].B, c[i].total_q, c[i].H, c[i].Hk, c[i].D, c[i].page, c[i].max_pages, 1, 0);
        int s1 = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &inv);
        if (s1) printf("err %s %s\n", kvattn_status_string(s1), kvattn_last_error());
        p.batch_invariant = 0;
        int s2 = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &aut);
        if (s2) printf("err %s %s\n", kvattn_status_string(s2), kvattn_last_error());
        /* the most partial rows batch-invariant mode can use: sum over split tiles of npieces * nrows * Hk, with
         * npieces <= C/2048 + 1 and nrows <= 64 per sequence (only sequences of <= 64 packed rows are split) */
        long long G = c[i].H / c[i].Hk, C = (long long)c[i].max_pages * c[i].page, pinv = (C + 2047) / 2048 + 1;
        long long rows128 = (long long)c[i].total_q * G < 128LL * c[i].B ? (long long)c[i].total_q * G : 128LL * c[i].B;
        long long rows64 = (long long)c[i].total_q * G < 64LL * c[i].B ? (long long)c[i].total_q * G : 64LL * c[i].B;
        long long pr128 = c[i].Hk * pinv * rows128, pr64 = c[i].Hk * pinv * rows64;
        int pdp = (c[i].D + 31) / 32 * 32;
        printf("B=%d total_q=%d H=%d Hk=%d D=%d C=%lld: workspace batch_invariant=%.2f GB, auto=%.3f GB; "
               "invariant part rows reserved %lld, reachable at most %lld (%.2f GB of part_o never written)\n",
               c[i].B, c[i].total_q, c[i].H, c[i].Hk, c[i].D, C, inv / 1e9, aut / 1e9, pr128, pr64,
               (double)(pr128 - pr64) * (pdp * 4 + 8) / 1e9);
    }
    return 0;
}
