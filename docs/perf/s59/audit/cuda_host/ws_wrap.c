/* Finding (informational): attn_plan_make's `rows_q * H * pmax` (attn.cu:138) is int64 without overflow check.
 * With params that kvattn_validate accepts, the product wraps to -524288, max_part_rows becomes negative and the
 * size_t arithmetic of the layout wraps: kvattn_workspace_size returns fewer bytes than the two item lists alone
 * (2 x max_items x 32 bytes, max_items capped at 2^31 - 1) occupy. Runs on the CPU. */
#include "common.h"
int main(void) {
    /* varlen, G = 1, total_q * G <= 2^30 - 1 (kv_attn_supported), out = 941391424 x 9344 x 8 bf16 (fits int64),
     * paged capacity 1024 x 2097087 = 2147417088 <= KVATTN_MAX_CACHE_TOKENS: pmax = cdiv(C, 1024) + 1 = 2097088;
     * 941391424 * 9344 * 2097088 = 2^64 - 524288 */
    kvattn_params p = mk(1, 941391424, 9344, 9344, 8, 1024, 2097087, 0, 0);
    p.num_pages = 1;
    int st = kvattn_validate(&p, KVATTN_BACKEND_CUDA);
    printf("validate: %s %s\n", kvattn_status_string(st), kvattn_last_error());
    size_t ws = 0;
    st = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &ws);
    const unsigned long long items_lists = 2ull * 0x7fffffffull * 32ull; /* items + pitems regions alone */
    printf("workspace_size: %s, %zu bytes; item lists alone need >= %llu bytes: %s by %lld bytes\n",
           kvattn_status_string(st), ws, items_lists, ws < items_lists ? "SHORT" : "ok",
           (long long)(items_lists - ws));
    return 0;
}
