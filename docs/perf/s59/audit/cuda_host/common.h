/* fake, well-separated, aligned device addresses: kvattn_validate / kvattn_workspace_size read no data */
#include <stdint.h>
#include <stdio.h>
#include "kvattn.h"
static void *fake(int i) { return (void *)(uintptr_t)(((uint64_t)(i + 1)) << 52); }
/* paged varlen call: B sequences, total_q query rows, H/Hk/D, capacity = max_pages * page */
static kvattn_params mk(int B, int total_q, int H, int Hk, int D, int page, int max_pages, int inv, int splits) {
    kvattn_params p = kvattn_params_default();
    p.dtype = KVATTN_BF16; p.batch = B; p.num_heads = H; p.num_kv_heads = Hk; p.head_dim = D;
    p.q = fake(0); p.cu_seqlens_q = (const int32_t *)fake(1); p.total_q = total_q;
    p.k_cache = fake(2); p.v_cache = fake(3);
    p.block_table = (const int32_t *)fake(4); p.max_pages_per_seq = max_pages; p.page_size = page;
    p.num_pages = 1 << 20; p.cache_seqlens = (const int32_t *)fake(5);
    p.out = fake(6); p.causal = 1; p.batch_invariant = inv; p.num_splits = splits;
    return p;
}
