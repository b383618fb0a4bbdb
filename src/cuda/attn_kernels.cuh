/* attn_kernels.cuh — the scheduler, the tensor-core attention kernel and the split combine of attn.cu.
 * B sequences, H query heads, Hk KV heads, G = H / Hk query heads per KV head, D head dim, DP = D padded to a
 * multiple of 32 (padding channels are zero in smem). A "packed row" r of a (sequence, KV head) is query
 * i = r / G of head kv_head * G + r % G: the G heads sharing a KV head are rows of one tile (GQA packing). */
#ifndef KVATTN_ATTN_KERNELS_CUH
#define KVATTN_ATTN_KERNELS_CUH

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math_constants.h>
#include "cuda/cuda_internal.cuh"
#include "cuda/attn_v0.cuh"

#ifndef KV_DEV_STRIP /* dev only (sixteenth session): bits skip parts of a decode item (1 Q K^T, 2 masks and softmax,
                      * 4 P V, 8 the epilogue and the split combine, 16 the Q tile's load, 32 the split combine,
                      * 64 the epilogue's merged rows and their writes, 128 the split merge but not the count that
                      * finds the last piece; nineteenth session); results are wrong, for timing what each part costs */
#define KV_DEV_STRIP 0
#endif
#define KV_BN 64              /* keys per KV tile */
#define KV_DECODE_ROWS 16     /* packed rows of a decode-shaped item: the 4 warps split the keys */
#define KV_PREFILL_ROWS 64    /* packed rows of a prefill item of the mma.sync kernel: 16 per warp */
#define KV_MAX_TILE_ROWS 128  /* packed rows of the tallest item of any variant (workspace bounds) */
#define KV_MAX_PACKED_ROWS 0x3fffffff /* query rows x H/Hk of one sequence (kv_attn_supported refuses more) */
#define KV_THREADS 128
#define KV_NO_WAIT_DECODE 1  /* kv_attn_args.no_wait bits */
#define KV_NO_WAIT_PREFILL 2
/* bit 2 (KV_EARLY_START; decode steps without an append whose checks the scheduler runs, see kv_attn_early): the
 * decode kernel starts on the scheduler's items_ready flag instead of the scheduler's completion and writes a
 * sequence's output only once its seq_ok is final; a prefill kernel after it starts on sched_done (kv_attn_kernel) */
#define KV_EARLY_START 4
/* set with KV_EARLY_START for B <= KV_LEAN_SEQS: KV_LEAN_WARPS warps (a sequence per thread) plan the batch when
 * every live sequence has a single decode tile (kv_lean_plan), in the scheduler and in every block of the early
 * decode kernel's SELF instantiation, which starts its first item from it; otherwise the general passes run */
#define KV_LEAN_SCHED 8
#define KV_LEAN_WARPS 2
#define KV_LEAN_SEQS (32 * KV_LEAN_WARPS)
#define KV_SEQ_PENDING 2 /* seq_ok[b] while the checks of an early-start call run (then 1: ok, 0: skip) */
#define KV_INV_SPLIT_KEYS 2048 /* batch-invariant mode: splits start at multiples of this key index */
#define KV_MIN_CHUNK_TILES 16  /* auto split: no piece shorter than this many KV tiles (item start-up costs) */
/* stream-K cut of a decode-only lean plan (v95, kv_lean_plan): taken when its chunk is at most KV_SK_PCT % of the
 * c1 / c2 split's call in KV tiles (measured on the H200, attn_notes.md, forty-second session: 61% gained 14%, 73 -
 * 75% ~4%, 86 - 91% lost 3 - 5%), for chunks up to KV_SK_MAX_CHUNK tiles (its list keys fit int32) */
#ifndef KV_SK_PCT
#define KV_SK_PCT 70
#endif
#define KV_SK_MAX_CHUNK 65535
#ifndef KV_DEV_SK_MUTANT /* test mutant (1): a stream-K tile's piece 0 too long by its shift (overlaps piece 1) */
#define KV_DEV_SK_MUTANT 0
#endif
#ifndef KV_SK
#define KV_SK 1
#endif
#define KV_SPLIT_PIECES_PER_CTA 1 /* auto split: chunks of work per block (more pieces cost start-ups; see notes) */
#define KV_SCHED_THREADS 1024
/* mutants for the tests of the early append (kv_sched_append): KV_DEV_NO_SCHED_APPEND=1 leaves the new rows
 * unstored; KV_DEV_NEW_FROM_CACHE=1 makes the decode items read them from the cache (racing with their stores)
 * instead of k_new / v_new. Both must fail test_grid, test_cuda_graph and test_cuda_bad_data. */
#ifndef KV_DEV_NO_SCHED_APPEND
#define KV_DEV_NO_SCHED_APPEND 0
#endif
#ifndef KV_DEV_NEW_FROM_CACHE
#define KV_DEV_NEW_FROM_CACHE 0
#endif
/* and of the early append with rotary: KV_DEV_ROPE_ITEMS_UNROTATED=1 makes the decode items attend to their new keys
 * unrotated (the cache still gets them rotated); KV_DEV_ROPE_NO_ITEM_STORE=1 leaves the keys the decode items hold
 * unstored; KV_DEV_ROPE_SCHED_UNROTATED=1 makes the scheduler store the keys no decode item holds unrotated (the
 * attention still rotates). Each must fail test_cuda_bad_data (its sequences without a query append a key that no
 * item holds), the first two also test_cuda_graph and test_grid. */
#ifndef KV_DEV_ROPE_ITEMS_UNROTATED
#define KV_DEV_ROPE_ITEMS_UNROTATED 0
#endif
#ifndef KV_DEV_ROPE_SCHED_UNROTATED
#define KV_DEV_ROPE_SCHED_UNROTATED 0
#endif
#ifndef KV_DEV_ROPE_NO_ITEM_STORE
#define KV_DEV_ROPE_NO_ITEM_STORE 0
#endif
/* KV_DEV_ROPE_STORE_UNGATED=1: the items store their keys whatever the verdict (must fail test_cuda_bad_data: a
 * victim whose page check fails keeps its cache untouched) */
#ifndef KV_DEV_ROPE_STORE_UNGATED
#define KV_DEV_ROPE_STORE_UNGATED 0
#endif
#define KV_SCHED_SEQS 2048     /* batches up to this size keep the scheduler's per-sequence facts in smem */
static_assert(KV_SCHED_SEQS <= 2 * KV_SCHED_THREADS, "the fused check gives a thread at most two sequences");
#define KV_SCHED_BUCKETS 256   /* item order: piece lengths 255 KV tiles and longer share the first range */

/* One work item: packed rows [row0, row0 + nrows) of (sequence b, kv_head) against keys [klo, khi). part >= 0:
 * a split piece whose normalized partial out and (m, log2 l) go to partial rows [part, part + nrows); the block that
 * finishes the last piece of combine task `comb` merges them (see kv_attn_piece_done). */
typedef struct __align__(16) kv_item { /* 16-byte aligned: written and read as two 16-byte words */
    int32_t b, kv_head, row0, nrows, klo, khi, part, comb;
} kv_item;
/* Item idx of a list written by this call's scheduler: two 16-byte loads from L2 (__ldcg: never a stale L1 line) */
static __device__ __forceinline__ kv_item kv_item_ldcg(const kv_item *list, int idx) {
    const int4 *src = (const int4 *)(list + idx);
    const int4 lo = __ldcg(src), hi = __ldcg(src + 1);
    kv_item it;
    it.b = lo.x; it.kv_head = lo.y; it.row0 = lo.z; it.nrows = lo.w;
    it.klo = hi.x; it.khi = hi.y; it.part = hi.z; it.comb = hi.w;
    return it;
}
/* One combine task: the nsplit pieces of packed rows [row0, row0+nrows) of (b, kv_head), partial rows
 * part_base + s * nrows + rr, merged in split order s = 0, 1, ... */
typedef struct __align__(16) kv_combine {
    int32_t b, kv_head, row0, nrows, part_base, nsplit, pad0, pad1;
} kv_combine;

typedef struct kv_attn_ws_header {
    int32_t n_items, n_pitems;             /* decode items (items[]), prefill items (pitems[]) */
    int32_t item_counter, pitem_counter;   /* next item to take, per list (reset by the scheduler) */
    int32_t n_combine, overflow; /* overflow: diagnostic bits of the "cannot happen" guards (1, 2) */
    int32_t items_ready;         /* KV_EARLY_START: 0 at the scheduler's start, 1 once the item lists are written */
    int32_t sched_done;          /* KV_EARLY_START: 0 at the scheduler's start, 1 once its checks are final */
} kv_attn_ws_header;

/* Pointers into the attention workspace (see attn_ws_layout in attn.cu). */
typedef struct kv_attn_args {
    const int8_t *seq_ok;
    kv_attn_ws_header *hdr;
    int32_t *tile_prefix; /* [B + 1] */
    kv_item *items;       /* [max_items] decode-shaped items (<= KV_DECODE_ROWS rows) */
    kv_item *pitems;      /* [max_items] prefill items (<= prefill_rows rows) */
    kv_combine *combine;
    int32_t *comb_done;   /* [max_combine] pieces finished per combine task (zeroed by the scheduler) */
    kvattn_device_status *status; /* the scheduler finalizes the check flags first (see kv_finalize_block) */
    float *part_o;   /* [max_part_rows, dp] */
    float2 *part_ml; /* [max_part_rows] each piece row's (m, log2 l): its max score and the log2 of its sum of
                      * exp2(score - m), in the kernels' log2 units; (-inf, 0) for a row that saw no key */
    int64_t max_items, max_combine, max_part_rows;
    int32_t grid_ctas;     /* blocks of the attention kernel */
    int32_t split_blocks;  /* auto split aims at KV_SPLIT_PIECES_PER_CTA chunks of work per block of this many */
    int32_t prefill_rows;  /* packed rows per prefill item of the prefill kernel variant (<= KV_MAX_TILE_ROWS) */
    int32_t dp;            /* the pitch of part_o's rows: the prefill kernel's padded head dim (kv_part_pitch) */
    /* bit 0 (KV_NO_WAIT_DECODE): the decode kernel follows the prefill kernel of the same call (PDL) and does not wait
     * for it (see kv_attn_kernel); bit 1 (KV_NO_WAIT_PREFILL): the prefill kernel follows the decode kernel
     * (decode-first order, see launch_fast) and does not wait for it, by the same argument; bit 2 (KV_EARLY_START):
     * see above; else a kernel waits */
    int32_t no_wait;
    int32_t fused_check; /* 1: the scheduler runs the checks of every sequence first (no check kernel) */
} kv_attn_args;
/* An early step that appends with rotary (ROPE): the rotated new keys, [new row][kv head][head_dim] in k_new's row
 * order (kv_rot_row), written by the decode items that read them (kv_attn_item). The region follows part_ml
 * (attn_plan_make); its address is derived here rather than passed: a field more in kv_attn_args changed the
 * register allocation of unrelated kernels (the ws prefill kernel spilled 200 bytes). */
template <typename T>
static __device__ __forceinline__ T *kv_rot_k(const kv_attn_args &a) {
    return (T *)((unsigned char *)a.part_ml + ((a.max_part_rows * (int64_t)sizeof(float2) + 255) & ~(int64_t)255));
}
/* A split piece's row for the merge: (m, log2 l) from its running max m (log2 units) and sum l, (-inf, 0) where
 * l = 0. The pair is kept rather than one lse = (m + log2 l) ln 2: at scores of ~1e5 an fp32 lse rounds by ~1e-2,
 * and the merge's weights exp(lse_s - lse) drifted by as much (with tied scores at 1e8 every piece weighed 1 and out
 * came to nsplit x v; fifty-third session, dev/numerics_probe.py). With the pair, the merge subtracts maxima that
 * are equal or close (exact in fp32) and adds only the small log2 l terms. */
static __device__ __forceinline__ float2 kv_piece_ml(float m, float l) {
    return l > 0.0f ? make_float2(m, log2f(l)) : make_float2(-CUDART_INF_F, 0.0f);
}
/* Element offset in kv_rot_k of new row t of sequence b (s.new_row0: its first row when varlen), kv head 0 */
static __device__ __forceinline__ int64_t kv_rot_row(const kvattn_params &p, int b, int32_t new_row0, int32_t t) {
    const int64_t rst = (int64_t)p.num_kv_heads * p.head_dim;
    return kv_row_offset(p.cu_seqlens_knew != NULL, b, new_row0, t, (int64_t)p.seqlen_knew * rst, rst);
}

/* ---- small PTX wrappers ------------------------------------------------------------------------------- */
static __device__ __forceinline__ uint32_t kv_smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
/* 16-byte async copy global -> shared of row address `row` + `off` bytes; row = 0 stores 16 zero bytes and reads
 * nothing (rows outside the key range, unmapped pages, channels >= D): cp.async's ignore-src predicate. CA: the
 * .ca form (through L1: one L2 request per 128-byte line) instead of .cg (L1 bypassed: 24 L2 sectors requested
 * per warp's 16 sectors of data, ncu), see KV_DECODE_CA. */
template <bool CA = false, int PF = 0>
static __device__ __forceinline__ void kv_copy16_row(uint32_t dst, uint64_t row, uint64_t off) {
#define KV_CP16(form)                                                                                           \
    asm volatile("{\n.reg .pred p;\nsetp.eq.u64 p, %1, 0;\n" form " [%0], [%2], 16, p;\n}\n" ::"r"(dst), "l"(row), \
                 "l"(row + off)                                                                                 \
                 : "memory")
    if (CA && PF == 256) KV_CP16("cp.async.ca.shared.global.L2::256B");
    else if (CA && PF == 128) KV_CP16("cp.async.ca.shared.global.L2::128B");
    else if (CA) KV_CP16("cp.async.ca.shared.global");
    else if (PF == 256) KV_CP16("cp.async.cg.shared.global.L2::256B");
    else if (PF == 128) KV_CP16("cp.async.cg.shared.global.L2::128B");
    else KV_CP16("cp.async.cg.shared.global");
#undef KV_CP16
}
/* The same pair of copies for one K row and one V row at once (v98): both ignore their source where the K row's
 * address is 0 (tile_row_address gives the K and V rows of a key the same validity: the same range, table entry and
 * limits) or nc is nonzero (a channel >= D), one predicate for both. Replaces the address masks (4 LOP3 per pair) and
 * the V row's own null test. */
template <bool CAK, int PFK, bool CAV, int PFV>
static __device__ __forceinline__ void kv_copy16_kv(uint32_t dk, uint32_t dv, uint64_t krow, uint64_t vrow,
                                                    uint64_t off, uint32_t nc) {
#define KV_CP16_KV(fk, fv)                                                                                      \
    asm volatile("{\n.reg .pred q, p;\nsetp.ne.u32 q, %5, 0;\nsetp.eq.or.u64 p, %2, 0, q;\n" fk                \
                 " [%0], [%3], 16, p;\n" fv " [%1], [%4], 16, p;\n}\n" ::"r"(dk),                                   \
                 "r"(dv), "l"(krow), "l"(krow + off), "l"(vrow + off), "r"(nc)                                  \
                 : "memory")
    if (CAK && !CAV && PFK == 128 && PFV == 128)
        KV_CP16_KV("cp.async.ca.shared.global.L2::128B", "cp.async.cg.shared.global.L2::128B");
    else if (CAK && !CAV && PFK == 0 && PFV == 0)
        KV_CP16_KV("cp.async.ca.shared.global", "cp.async.cg.shared.global");
    else if (!CAK && !CAV && PFK == 128 && PFV == 128)
        KV_CP16_KV("cp.async.cg.shared.global.L2::128B", "cp.async.cg.shared.global.L2::128B");
    else if (!CAK && !CAV && PFK == 0 && PFV == 0)
        KV_CP16_KV("cp.async.cg.shared.global", "cp.async.cg.shared.global");
    else { /* other mixes (dev builds of KV_DECODE_CA / KV_DECODE_PF_KV): the two single copies */
        kv_copy16_row<CAK, PFK>(dk, nc ? 0 : krow, off);
        kv_copy16_row<CAV, PFV>(dv, nc ? 0 : vrow, off);
    }
#undef KV_CP16_KV
}
/* L2 prefetch size of a decode item's K / V copies of DP >= 96 (v45 for DP 128 and 256; both copy paths and DP 96
 * since the seventeenth session): 0 = none (the L2 fetches the missed sectors), 128 or 256 bytes (the aligned
 * segment around the copy; within one page, so no fault, and no data of it is used beyond the copied bytes);
 * KV_DECODE_PF_KV: bit 0 K rows, bit 1 V rows. 128 on both took the large decode shapes 0.5 - 1% faster than none on
 * the H200 (64x4096 page 16 277.4 -> 275.6 us, 64x16384 contiguous 1010.4 -> 1002.6), 256 made them 1 - 3% slower;
 * at D 256 128 was equal or faster, at D 64 no faster and 2 - 6% slower at 8x8192 and 1x32768, so DP 32 and 64 copy
 * without it (attn_notes.md, fourteenth session). */
#ifndef KV_DECODE_PF
#define KV_DECODE_PF 128
#endif
#ifndef KV_DECODE_PF_KV
#define KV_DECODE_PF_KV 3
#endif
static_assert(KV_DECODE_PF == 0 || KV_DECODE_PF == 128 || KV_DECODE_PF == 256, "KV_DECODE_PF: 0, 128 or 256");
#ifndef KV_DECODE_PF_MIN_DP /* the smallest DP whose decode copies carry it: 96 (seventeenth session: head dim 96 decodes
                             * 4.4% faster with it and K by .ca, every row of ten equal or faster) */
#define KV_DECODE_PF_MIN_DP 96
#endif
/* Which rows of a decode item are copied by cp.async.ca: bit 0 K, bit 1 V (the others by .cg). K by .ca and V by
 * .cg (1) took 64x4096 from ~282 to ~266 us on the H200; both by .ca (3) was no faster than both by .cg (0) (v36,
 * attn_notes.md, tenth session); a build may pick another mix with -DKV_DECODE_CA=n. */
#ifndef KV_DECODE_CA
#define KV_DECODE_CA 1
#endif
/* Warp-private decode pipelines (v53, eighteenth session). In a decode item warp w reads only keys 16 w .. 16 w + 15
 * of every tile (Q K^T and P V), so each warp copies its own 16 K and 16 V rows and waits for its own copies
 * (cp.async.wait_group + __syncwarp): no block barrier per tile, and no warp waits for another's copies. Measured on
 * the H200 against the block-wide copies (bench_cuda --quick, two calls of three rounds, means of isolated calls):
 * head dim 128 -0.75% / -0.81% over 35 rows (8x8192 contiguous -3.5% / -4.9%, 64x4096 contiguous -3.3% / -2.4%; worst
 * row +1.4% / +1.1%, 64x16384 page 16 +0.6% / +1.1%); dev/attn_test decode rows: head dim 64 -3.1%, 96 -3.7%, 256
 * -2.2% (attn_notes.md). The prefill kernels keep the block-wide copies (each warp reads every key). */
#ifndef KV_DECODE_WPIPE
#define KV_DECODE_WPIPE 1
#endif
/* Row addresses read per batch of this many copy pairs of a warp-private decode pipeline, before the batch's copies
 * (v57, twentieth session; see load_tile). 4 is the shipped value (measured with the rest of v57); 8 alone was no
 * faster than 1, the form before (one pair at a time) */
#ifndef KV_DECODE_ABATCH
#define KV_DECODE_ABATCH 4
#endif
/* A decode item without rotary copies its Q tile by cp.async, in the first KV tile's group (v61, twenty-first session),
 * so that the Q round trip overlaps the first tile's instead of preceding it; 0: Q by loads and stores first. */
#ifndef KV_DECODE_QASYNC
#define KV_DECODE_QASYNC 1
#endif
/* v103 (forty-fifth session): a DP 128 decode tile's Q K^T accumulates its odd k-steps apart and sums them after the
 * loop: four chains of 4 dependent mma per warp instead of two of 8. A lone block's loop waits on its own dependency
 * chains (ncu: fixed-latency waits and issue, not memory); this one shortened its kernel 1.7% (12x4096, one block
 * per SM) and graph replays 0.2 - 1.7% at nine decode shapes on the H200 (attn_notes.md, forty-fifth session).
 * DP 96 and 256 spill with it and keep two chains. 0: two chains everywhere. */
#ifndef KV_DECODE_QK2
#define KV_DECODE_QK2 1
#endif

/* Flags between the scheduler and an early-start decode kernel (KV_EARLY_START): the flag store releases the item
 * lists, the flag load acquires them; seq_ok bytes are read relaxed at GPU scope (from L2, never a stale L1 line). */
static __device__ __forceinline__ int32_t kv_ld_acquire(const int32_t *p) {
    int32_t v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ int32_t kv_ld_relaxed(const int32_t *p) {
    int32_t v;
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}
/* Thread 0 of an early decode block: waits for the scheduler's items_ready flag (relaxed polls, then one fence: an
 * acquire pattern of the PTX memory model; see kv_attn_kernel) */
static __device__ __forceinline__ void kv_lists_acquire(const int32_t *items_ready) {
    while (kv_ld_relaxed(items_ready) == 0) __nanosleep(32);
    asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
}
/* atomic add with acquire and release semantics at gpu scope; returns the old value */
static __device__ __forceinline__ int32_t kv_atom_add_acq_rel(int32_t *p, int32_t v) {
    int32_t old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
static __device__ __forceinline__ void kv_st_release(int32_t *p, int32_t v) {
    asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
static __device__ __forceinline__ int kv_ld_relaxed_s8(const int8_t *p) {
    int v;
    asm volatile("ld.relaxed.gpu.global.s8 %0, [%1];\n" : "=r"(v) : "l"(p));
    return v;
}
/* The final seq_ok of a sequence (1: write its output, 0: skip it), given a first read v of it: while the
 * scheduler's checks still run it reads KV_SEQ_PENDING and is read again. */
static __device__ __forceinline__ int kv_seq_verdict(const int8_t *seq_ok, int b, int v) {
    while (v == KV_SEQ_PENDING) {
        __nanosleep(64);
        v = kv_ld_relaxed_s8(seq_ok + b);
    }
    return v;
}

/* Row addresses of one cache tensor (K or V) for one item's sequence and kv head, with the checks of
 * kv_page_of / kv_cache_offset_at (internal.h) and the same results, in fewer instructions per row: byte strides
 * and the sequence's base row are set up once per item, a power-of-two page size divides by shifting.
 * page(pos): the block-table entry of key position pos (paged; -1 outside the table); addr(pos, page): the
 * row's global address, 0 where the page is unmapped or the position is outside the capacity. */
struct kv_row_addresser {
    const unsigned char *base; /* the tensor + kv head (paged), or + the sequence's cache row (contiguous) */
    const int32_t *table;      /* the sequence's block-table row (paged), else NULL */
    int64_t ostride, rstride;  /* bytes per page (or cache row) and per position */
    int32_t page_size, page_shift, limit; /* limit: num_pages (paged) or capacity (contiguous; 0 if no row) */
    int32_t max_pages;
    __device__ __forceinline__ void init(const kvattn_params &p, int b, int32_t cache_row, int kvh, bool v) {
        base = (const unsigned char *)(v ? p.v_cache : p.k_cache) + (int64_t)kvh * (v ? p.v_head_stride : p.k_head_stride) * 2;
        ostride = (v ? p.v_batch_stride : p.k_batch_stride) * 2;
        rstride = (v ? p.v_row_stride : p.k_row_stride) * 2;
        page_size = p.page_size;
        max_pages = p.max_pages_per_seq;
        table = p.block_table ? p.block_table + (int64_t)b * p.block_table_batch_stride : NULL;
        if (table) {
            page_shift = page_size > 0 && (page_size & (page_size - 1)) == 0 ? __ffs(page_size) - 1 : -1;
            limit = p.num_pages;
        } else {
            page_shift = 0;
            const bool row_ok = cache_row >= 0 && cache_row < p.cache_batch;
            limit = row_ok ? p.cache_capacity : 0;
            if (row_ok) base += (int64_t)cache_row * ostride;
        }
    }
    __device__ __forceinline__ int32_t page(int32_t pos) const {
        const int32_t slot = page_shift >= 0 ? pos >> page_shift : pos / page_size;
        return pos >= 0 && slot < max_pages ? table[slot] : -1;
    }
    __device__ __forceinline__ uint64_t addr(int32_t pos, int32_t pg) const {
        if (table) {
            if (pg < 0 || pg >= limit) return 0;
            const int32_t r = page_shift >= 0 ? pos & (page_size - 1) : pos % page_size;
            return (uint64_t)(base + (int64_t)pg * ostride + (int64_t)r * rstride);
        }
        return pos >= 0 && pos < limit ? (uint64_t)(base + (int64_t)pos * rstride) : 0;
    }
};
static __device__ __forceinline__ void kv_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void kv_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
static __device__ __forceinline__ void kv_ldmatrix_x4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                                      uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
static __device__ __forceinline__ void kv_ldmatrix_x4_trans(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                                                            uint32_t &r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
/* D(16x8 fp32) += A(16x16) * B(16x8), A row-major, B column-major, fp16 or bf16 operands. */
template <typename T> struct kv_mma;
template <> struct kv_mma<__nv_bfloat16> {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *(uint32_t *)&v;
    }
};
template <> struct kv_mma<__half> {
    static __device__ __forceinline__ void run(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        __half2 v = __floats2half2_rn(lo, hi);
        return *(uint32_t *)&v;
    }
};

/* 2^x by the SFU (x = -inf gives 0); the scores are already in log2 units. */
static __device__ __forceinline__ float kv_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
static __device__ __forceinline__ int64_t kv_ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Key range [lo, hi) (indices j relative to L) seen by packed rows [row0, row0 + nrows) of sequence s: the
 * union of the rows' visible ranges (lo and hi never decrease with the query index). */
static __device__ __forceinline__ kv_range kv_tile_keys(const kvattn_params &p, const kv_seq &s, int G, int row0,
                                                        int nrows) {
    const int32_t s_k = s.S + s.n_new - s.L;
    const kv_range a = kv_visible_keys(row0 / G, s.n_q, s_k, p.causal, p.window_left, p.window_right);
    const kv_range z = kv_visible_keys((row0 + nrows - 1) / G, s.n_q, s_k, p.causal, p.window_left, p.window_right);
    kv_range r;
    r.lo = a.lo;
    r.hi = z.hi > a.lo ? z.hi : a.lo;
    return r;
}

/* Packed rows of sequence s (0 if the sequence is skipped) and its tile height. */
static __device__ __forceinline__ int32_t kv_seq_rows(const kvattn_params &p, const kv_seq &s, int G) {
    const int64_t rows = (int64_t)s.n_q * G;
    return (s.n_q <= 0 || rows > KV_MAX_PACKED_ROWS) ? 0 : (int32_t)rows;
}
static __device__ __forceinline__ int kv_tile_rows(int32_t rows, int prefill_rows) {
    return rows <= KV_DECODE_ROWS ? KV_DECODE_ROWS : prefill_rows;
}

/* ---- scheduler helpers -------------------------------------------------------------------------------- */
/* Inclusive prefix sum of v over the 32 lanes of a warp (every lane calls it). */
static __device__ __forceinline__ int32_t kv_warp_incl_scan(int32_t v, int lane) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const int32_t u = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += u;
    }
    return v;
}
/* Exclusive prefix sum of v over a whole block of at most 1024 threads (every thread calls it); *s_total gets the
 * sum. s_scan: one int32 per warp, in smem. Two block barriers. */
static __device__ __forceinline__ int32_t kv_block_excl_scan(int32_t v, int32_t *s_scan, int32_t *s_total) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int32_t incl = kv_warp_incl_scan(v, lane);
    if (lane == 31) s_scan[wid] = incl;
    __syncthreads();
    if (wid == 0) {
        const int32_t w = lane < (int)(blockDim.x >> 5) ? s_scan[lane] : 0;
        const int32_t wi = kv_warp_incl_scan(w, lane);
        if (lane < (int)(blockDim.x >> 5)) s_scan[lane] = wi - w;
        if (lane == 31) *s_total = wi;
    }
    __syncthreads();
    return s_scan[wid] + incl - v;
}

/* One query tile's reserved items: pieces [0, npieces) of each kv head at list slots first + kh * npieces + k,
 * and its combine tasks when split (comb0 >= 0). Piece k starts k * span keys past the tile's first KV tile, less
 * shift for k >= 1 (so piece 0 is span - shift keys long). A stream-K tile of the lean plan (fm >= 0, v95: shift
 * from the batch's cut points) has its pieces at three places of the list, which is ordered by piece length: its
 * head piece (k 0) of each kv head at first + kh, its middle pieces at fm + kh * (npieces - 2) + k - 1, its tail
 * piece (k npieces - 1) at ft + kh (kv_sched_pos). */
typedef struct kv_sched_tile {
    int32_t b, row0, nrows, klo, khi, span, inv_block, npieces, first, part_base, comb0, dec, shift, fm, ft;
} kv_sched_tile;
#define KV_CHECK_U 8 /* fused check: table slots per lane and round (a round: 8192 slots) */
#define KV_SCHED_OWN_ITEMS 16 /* a tile with more items is written by the whole block (queue of KV_SCHED_BIG) */
#define KV_SCHED_BIG 64
/* Piece k of kv head kh of tile q, and (split tiles) that kv head's combine task. */
static __device__ __forceinline__ kv_combine kv_sched_combine(const kv_sched_tile &q, int kh) {
    kv_combine cb;
    cb.b = q.b;
    cb.kv_head = kh;
    cb.row0 = q.row0;
    cb.nrows = q.nrows;
    cb.part_base = q.part_base + kh * q.npieces * q.nrows;
    cb.nsplit = q.npieces;
    cb.pad0 = cb.pad1 = 0;
    return cb;
}
static __device__ __forceinline__ kv_item kv_sched_item(const kv_sched_tile &q, int kh, int32_t k) {
    const int32_t comb = q.comb0 >= 0 ? q.comb0 + kh : -1;
    kv_item it;
    it.b = q.b;
    it.kv_head = kh;
    it.row0 = q.row0;
    it.nrows = q.nrows;
    if (q.npieces == 1) {
        it.klo = q.klo;
        it.khi = q.khi;
    } else if (q.inv_block) { /* the piece's end as start + min(rest, block): (blk + 1) * block can pass 2^31 */
        const int32_t start = (q.klo / q.inv_block + k) * q.inv_block; /* <= khi - 1 */
        it.klo = max(q.klo, start);
        it.khi = start + min(q.khi - start, q.inv_block);
    } else { /* piece 0: span - shift keys, then span each (shift 0 but for stream-K tiles) */
        const int32_t start = (q.klo / KV_BN) * KV_BN + (k > 0 ? (k - 1) * q.span + (q.span - q.shift) : 0); /* < khi */
        it.klo = max(q.klo, start);
        it.khi = start + min(q.khi - start, k > 0 ? q.span : q.span - (KV_DEV_SK_MUTANT ? 0 : q.shift));
    }
    it.part = comb >= 0 ? q.part_base + (kh * q.npieces + k) * q.nrows : -1;
    it.comb = comb;
    if (comb < 0 && q.npieces > 1) { /* no combine slot: piece 0 carries the whole tile */
        it.klo = q.klo;
        it.khi = k == 0 ? q.khi : q.klo;
        it.nrows = k == 0 ? q.nrows : 0;
    }
    return it;
}
/* The list slot of item e of tile q (kv head e / npieces, piece e % npieces) */
static __device__ __forceinline__ int32_t kv_sched_pos(const kv_sched_tile &q, int32_t e) {
    if (q.fm < 0) return q.first + e;
    const int32_t kh = e / q.npieces, k = e - kh * q.npieces;
    return k == 0 ? q.first + kh : k == q.npieces - 1 ? q.ft + kh : q.fm + kh * (q.npieces - 2) + k - 1;
}
/* The inverse: item e of tile q held at list slot i, or -1 (none of q's items there) */
static __device__ __forceinline__ int32_t kv_sched_slot_item(const kv_sched_tile &q, int Hk, int32_t i) {
    const int32_t n = q.npieces;
    if (n <= 0) return -1;
    if (q.fm < 0) return i >= q.first && i - q.first < n * Hk ? i - q.first : -1;
    if (i >= q.first && i - q.first < Hk) return (i - q.first) * n;
    if (n >= 2 && i >= q.ft && i - q.ft < Hk) return (i - q.ft) * n + n - 1;
    if (n >= 3 && i >= q.fm && i - q.fm < Hk * (n - 2)) {
        const int32_t d = i - q.fm, kh = d / (n - 2);
        return kh * n + 1 + (d - kh * (n - 2));
    }
    return -1;
}
/* Writes items e = i0, i0 + di, ... of tile q (item e: kv head e / npieces, piece e % npieces) and its combine
 * tasks likewise: a lane its own tile (i0 = 0, di = 1). */
static __device__ __forceinline__ void kv_sched_write_tile(const kv_attn_args &a, const kv_sched_tile &q, int Hk,
                                                           int i0, int di) {
    kv_item *list = q.dec ? a.items : a.pitems;
    if (q.comb0 >= 0) {
        for (int kh = i0; kh < Hk; kh += di) {
            a.combine[q.comb0 + kh] = kv_sched_combine(q, kh);
            a.comb_done[q.comb0 + kh] = 0;
        }
    }
    for (int32_t e = i0; e < q.npieces * Hk; e += di) {
        const int kh = e / q.npieces;
        list[kv_sched_pos(q, e)] = kv_sched_item(q, kh, e - kh * q.npieces);
    }
}
/* Item e of tile q and, for piece 0 of a split tile, that kv head's combine task (the block-wide flat pass). */
/* Item e of tile q's items (list slot kv_sched_pos(q, e)): kv head e / npieces, piece e % npieces. */
static __device__ __forceinline__ kv_item kv_sched_item_at(const kv_sched_tile &q, int32_t e) {
    const int kh = e / q.npieces;
    return kv_sched_item(q, kh, e - kh * q.npieces);
}
static __device__ __forceinline__ void kv_sched_write_item(const kv_attn_args &a, const kv_sched_tile &q, int32_t e,
                                                           int32_t skip = 0) {
    const int kh = e / q.npieces;
    const int32_t k = e - kh * q.npieces;
    if (q.comb0 >= 0 && k == 0) {
        a.combine[q.comb0 + kh] = kv_sched_combine(q, kh);
        a.comb_done[q.comb0 + kh] = 0;
    }
    /* items below skip: written by the early decode blocks that run them (kv_attn_kernel, lean plan) */
    const int32_t i = kv_sched_pos(q, e);
    if (i >= skip) (q.dec ? a.items : a.pitems)[i] = kv_sched_item_at(q, e);
}

/* The auto split's chunk in KV tiles from the batch's KV work (tiles x kv heads, summed): no piece longer than a
 * block's fair share, none shorter than KV_MIN_CHUNK_TILES. int32 (clamped): the item passes divide by it (64-bit
 * divisions are calls). */
static __device__ __forceinline__ int32_t kv_sched_chunk(unsigned long long w, int32_t split_blocks) {
    int32_t chunk = KV_MIN_CHUNK_TILES;
    const unsigned long long n = (unsigned long long)KV_SPLIT_PIECES_PER_CTA * (unsigned)max(split_blocks, 1);
    const unsigned long long c = w + n - 1 <= 0xffffffffull ? (unsigned)(w + n - 1) / (unsigned)n : (w + n - 1) / n;
    if (c > (unsigned long long)chunk) chunk = c > 0x7fffffffull ? 0x7fffffff : (int32_t)c;
    return chunk;
}
/* The KV work of one query tile of a sequence with s_k keys, for the auto chunk: kv heads x KV tiles (at least
 * one). Both scheduler paths sum it, so that their chunks, and so their pieces, agree. */
static __device__ __forceinline__ unsigned long long kv_sched_tile_work(int Hk, int64_t s_k) {
    return (unsigned long long)Hk * (unsigned long long)max((int64_t)1, kv_ceil_div64(s_k, KV_BN));
}
/* KV tiles of a key range (KV_BN keys each, counted from the tile holding kr.lo) */
static __device__ __forceinline__ int32_t kv_range_ktiles(const kv_range &kr) {
    return (int32_t)(kv_ceil_div64(kr.hi, KV_BN) - kr.lo / KV_BN);
}
/* THE split of one query tile (rows packed rows of sequence s, key range kr): its pieces, [klo + k * span, ...)
 * in auto mode, fixed key blocks of inv_block keys in batch-invariant mode (0: not split that way), and its
 * bucket (piece length in KV tiles, capped) for the list order. Both scheduler paths use it, so that a sequence
 * gets the same pieces whichever path plans it (batch invariance, determinism). */
static __device__ __forceinline__ void kv_sched_split(const kvattn_params &p, const kv_seq &s, int32_t rows,
                                                      const kv_range &kr, int32_t chunk, int32_t *npieces,
                                                      int32_t *span, int32_t *inv_block, int32_t *bucket) {
    const int32_t ktiles = kv_range_ktiles(kr);
    *npieces = 1;
    *span = 0;
    *inv_block = 0;
    if (p.num_splits != 1 && kr.hi > kr.lo) {
        if (p.batch_invariant) {
            if (rows <= KV_PREFILL_ROWS) { /* fixed, not the variant's tile: invariance across variants */
                const int32_t s_k = s.S + s.n_new - s.L;
                int32_t nb = (int32_t)kv_ceil_div64(s_k, KV_INV_SPLIT_KEYS);
                if (p.num_splits > 1 && nb > p.num_splits)
                    nb = nb / p.num_splits + (nb % p.num_splits != 0);
                else
                    nb = 1;
                *inv_block = nb * KV_INV_SPLIT_KEYS;
                *npieces = (int32_t)((kr.hi - 1) / *inv_block - kr.lo / *inv_block + 1);
            }
        } else if (ktiles > chunk) { /* 32-bit: ktiles <= 2^25 + 1, n >= 2, so span fits */
            int32_t n = ktiles / chunk + (ktiles % chunk != 0);
            if (p.num_splits > 1 && n > p.num_splits) n = p.num_splits;
            const int32_t span_t = ktiles / n + (ktiles % n != 0); /* tiles per piece */
            *span = span_t * KV_BN;
            *npieces = ktiles / span_t + (ktiles % span_t != 0);
        }
    }
    *bucket = min((ktiles + *npieces - 1) / *npieces, KV_SCHED_BUCKETS - 1);
}

/* ---- the auto split's one-wave alternative (v94, forty-first session; attn_notes.md) ----------------------
 * The auto chunk c1 = a block's fair share of the work cuts each tile into ceil(ktiles / c1) pieces. When the
 * pieces come out a little more than the split_blocks blocks that the chunk aims at (ceil rounds every tile up),
 * the greedy list runs a second wave on some blocks: 16 sequences of 8192 keys at D 128 (c1 = 63 tiles) give 384
 * pieces of 43 tiles for 264 blocks, so the call takes two pieces' time where two pieces of 64 tiles per tile (256
 * items, one wave) take 64 tiles' time. Measured with num_splits caps (dev/split_probe.py, H200): 149.5 -> 128.9
 * us there, 8 x 8300 95.6 -> 73.2, D 256 8 x 8192 153.9 -> 132.3. The alternative c2 gives the longest tile one
 * piece less (so every tile as many pieces or fewer); a decode-only batch (every live sequence one tile) takes it
 * when c1 needs more than one wave (P1 > split_blocks), c2 fits one (P2 <= split_blocks), and its longest piece is
 * at most twice c1's shortest: more than split_blocks pieces put two of them on one block, each at least that
 * long, so c1's call cannot be shorter (a list schedule of equal block rates). Both scheduler paths (the lean plan
 * and the general passes) decide with these helpers from the same per-tile facts, so that they give a sequence the
 * same pieces. */
/* c2 for the longest tile's ktiles (0: no alternative: nothing longer than c1, or no auto split) */
static __device__ __forceinline__ int32_t kv_sched_chunk_alt(const kvattn_params &p, int32_t c1, int32_t kmax) {
    if (p.batch_invariant || p.num_splits == 1 || kmax <= c1) return 0;
    const int32_t n = kmax / c1 + (kmax % c1 != 0); /* >= 2 */
    return kmax / (n - 1) + (kmax % (n - 1) != 0);
}
/* A split tile's shortest and longest piece in KV tiles (kt KV tiles in n pieces of span keys, the last the
 * remainder; n 1: the whole tile) */
static __device__ __forceinline__ int32_t kv_piece_min(int32_t kt, int32_t n, int32_t span) {
    return n > 1 ? kt - (n - 1) * (span / KV_BN) : kt;
}
static __device__ __forceinline__ int32_t kv_piece_max(int32_t kt, int32_t n, int32_t span) {
    return n > 1 ? span / KV_BN : kt;
}
/* c2 wins: p1 / p2 items at c1 / c2, min1 the shortest piece at c1, len2 the longest at c2 (KV tiles) */
static __device__ __forceinline__ bool kv_alt_wins(unsigned long long p1, unsigned long long p2, int32_t min1,
                                                   int32_t len2, int32_t split_blocks) {
    const unsigned long long nb = (unsigned long long)max(split_blocks, 1);
    return p1 > nb && p2 <= nb && (int64_t)len2 <= 2 * (int64_t)min1;
}

/* Reservation of cnt slots from counters[key] (key -1: none), called by every lane of a warp. When all lanes
 * that reserve use one key (a uniform batch: the common case) the warp makes one atomic for all of them (same-
 * address smem atomics serialize); otherwise each lane makes its own. Returns the lane's first slot. */
static __device__ __forceinline__ int32_t kv_warp_reserve(int32_t *counters, int key, int32_t cnt, int lane) {
    const unsigned want = __ballot_sync(0xffffffffu, key >= 0);
    if (!want) return 0;
    const int lead = __ffs(want) - 1;
    const int lead_key = __shfl_sync(0xffffffffu, key, lead);
    if (__all_sync(0xffffffffu, key < 0 || key == lead_key)) {
        const int32_t c = key >= 0 ? cnt : 0;
        const int32_t incl = kv_warp_incl_scan(c, lane);
        const int32_t tot = __shfl_sync(0xffffffffu, incl, 31);
        int32_t base = 0;
        if (lane == lead) base = atomicAdd(&counters[lead_key], tot);
        return __shfl_sync(0xffffffffu, base, lead) + incl - c;
    }
    return key >= 0 ? atomicAdd(&counters[key], cnt) : 0;
}

/* ---- the lean plan (KV_LEAN_SCHED) --------------------------------------------------------------------
 * An early-start decode step (no append, fused checks) of B <= KV_LEAN_SEQS sequences whose live sequences all
 * have one decode tile (packed rows <= KV_DECODE_ROWS) is planned by the first KV_LEAN_WARPS warps of a block,
 * thread b for sequence b: the per-sequence checks, the work and chunk, the tile's pieces by kv_sched_split (the
 * general passes' split, so the same pieces), the list order (descending piece length, then sequence) by a rank
 * over the batch, partial rows and combine tasks by scans. Warp reductions and three exchanges between the warps
 * (named barrier 1); no block barrier. The scheduler writes its items from it (kv_attn_schedule_kernel), and the
 * early decode kernel computes the same plan to start its first item before the lists are out (kv_attn_kernel):
 * a function of the lengths alone, so both get the same items in the same order. The general passes take ~18
 * kcycles before the lists are out even for 8 sequences, the scheduler's lean path ~13 (8x8192); an unrolled first
 * form of it grew the scheduler by half and slowed the general passes of every other call by 5 - 8 us, hence the
 * template (attn_notes.md, eleventh and thirteenth sessions). v67 (twenty-fourth session): a sequence's reads in one
 * round trip (kv_check_seq_get), the rank over B entries, three exchanges instead of four: ~1250 SM cycles (~0.6 us)
 * less per block, measured -0.4 to -0.8% back to back at 8x8192 (attn_notes.md). */
struct __align__(16) kv_lean_smem { /* scratch (key and cnt read as int4 by the rank) */
    unsigned long long work[KV_LEAN_WARPS];
    int32_t key[KV_LEAN_SEQS], cnt[KV_LEAN_SEQS];
    int32_t key2[KV_LEAN_SEQS], cnt2[KV_LEAN_SEQS], min1[KV_LEAN_SEQS], len2[KV_LEAN_SEQS]; /* the c2 split (v94) */
    int32_t skey[3][KV_LEAN_SEQS], scnt[3][KV_LEAN_SEQS]; /* stream-K pieces: head, middle, tail (v95) */
    long long kts[KV_LEAN_WARPS];                         /* stream-K: the warps' KV tiles (v95) */
    int32_t x[7][KV_LEAN_WARPS];
};
struct kv_lean_res {
    kv_sched_tile q; /* thread b's tile (npieces 0: no items written) */
    int ok;          /* sequence b passed the per-sequence checks */
    int32_t total;      /* items in all */
    int32_t cut;        /* start of the first range that did not fit (INT_MAX: none) */
    int32_t total_comb; /* combine tasks */
    int ov;          /* overflow bits (2: items, 1: partial rows or combine tasks) */
    int sk;          /* the stream-K cut (v95): planned by the scheduler alone (kv_lean_plan<true>) */
};
/* Every item of the plan is in the list (no overflow, no range cut): then the early decode blocks start items
 * [0, gridDim.x) themselves and the scheduler leaves them unwritten. Both sides decide with this. */
static __device__ __forceinline__ bool kv_lean_complete(int ov, int32_t cut) { return ov == 0 && cut == 0x7fffffff; }
static __device__ __forceinline__ void kv_lean_sync() { /* the lean plan's warps only */
    asm volatile("bar.sync 1, %0;" ::"n"(KV_LEAN_SEQS) : "memory");
}
/* Dev knob (attn_notes.md, twenty-third session), off by default (the library's SASS is then unchanged): with
 * KV_DEV_PLAN_DELAY 1 every lean plan ends with a spin of kv_dev_plan_delay SM cycles, a value the host sets once at
 * run time from KVATTN_DEV_PLAN_DELAY (attn.cu, kv_attn_launch_prologue; bench_cuda and dev/attn_test alike), so that
 * one binary, whose kernels are the same code whatever the delay, measures how a call's time follows its plan's.
 * (A compile-time delay, or the plan as a called function, moved the tile loop's SASS: a change of the plan's code
 * alone cannot be timed apart from that.) */
#ifndef KV_DEV_PLAN_DELAY
#define KV_DEV_PLAN_DELAY 0
#endif
#if KV_DEV_PLAN_DELAY
__device__ int kv_dev_plan_delay;
#endif
#ifdef KVATTN_TIMELINE /* dev: thread 0's clock64 at the start and after each exchange into tlc[0..4] (SELF blocks) */
#define KV_LEAN_STAMP(k) do { if (tlc && threadIdx.x == 0) tlc[k] = clock64(); } while (0)
#define KV_LEAN_TLC , long long *tlc = nullptr
#else
#define KV_LEAN_STAMP(k) do { } while (0)
#define KV_LEAN_TLC
#endif
/* Called by threads 0 .. KV_LEAN_SEQS - 1 of a block. Returns 0 (every caller) when a live sequence has a prefill
 * tile (the general passes plan the batch), else 1 with *r filled. */
template <bool SK>
static __device__ __forceinline__ int kv_lean_plan(const kvattn_params &p, const kv_attn_args &a, kv_lean_smem &sm,
                                                   kv_lean_res &r KV_LEAN_TLC) {
    const int B = p.batch, Hk = p.num_kv_heads, G = p.num_heads / p.num_kv_heads;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const int b = tid;
    KV_LEAN_STAMP(0);
#if KV_DEV_PLAN_DELAY
    const int dev_delay = kv_dev_plan_delay; /* (its load overlaps the plan's own) */
#endif
    kv_seq sq = {};
    int fl = 0;
    if (b < B) { /* every read before any branch on them (one round trip: kv_check_seq_get) */
        int32_t lo, hi;
        fl = kv_check_seq_get(p, b, &sq, &lo, &hi);
    }
    /* exchange 1: bad cu_seqlens anywhere (then no sequence has work), a prefill tile anywhere, the work */
    const bool ok0 = b < B && fl == 0;
    const int32_t rows0 = ok0 ? kv_seq_rows(p, sq, G) : 0;
    const int64_t s_k = (int64_t)sq.S + sq.n_new - sq.L;
    unsigned long long work = rows0 ? kv_sched_tile_work(Hk, s_k) : 0;
    /* the tile's keys and KV tiles (a decode tile: rows0 <= KV_DECODE_ROWS), for the longest tile (v94) */
    const kv_range kr = kv_tile_keys(p, sq, G, 0, rows0);
    const int32_t kt = rows0 && rows0 <= KV_DECODE_ROWS ? kv_range_ktiles(kr) : 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) work += __shfl_xor_sync(0xffffffffu, work, o);
    const unsigned bits = __reduce_or_sync(0xffffffffu, (b < B && (fl & KVATTN_FLAG_BAD_CU_SEQLENS) ? 1u : 0u) |
                                                            (rows0 > KV_DECODE_ROWS ? 2u : 0u));
    const unsigned ktmax = __reduce_max_sync(0xffffffffu, (unsigned)kt);
    if (lane == 0) {
        sm.work[w] = work;
        sm.x[0][w] = (int32_t)bits;
        sm.x[6][w] = (int32_t)ktmax;
    }
    kv_lean_sync();
    KV_LEAN_STAMP(1);
    unsigned any = 0;
    int32_t kmax = 0;
    work = 0;
#pragma unroll
    for (int k = 0; k < KV_LEAN_WARPS; k++) {
        any |= (unsigned)sm.x[0][k];
        kmax = max(kmax, sm.x[6][k]);
        work += sm.work[k];
    }
    const bool bad_cu = any & 1u;
    if (!bad_cu && (any & 2u)) return 0; /* a prefill tile: the general passes */
    const bool ok = ok0 && !bad_cu;
    r.ok = ok;
    const int32_t rows = ok ? rows0 : 0;
    const int32_t chunk = kv_sched_chunk(work, a.split_blocks); /* (unused with bad_cu: no sequence has rows) */
    kv_sched_tile &q = r.q;
    q.b = b;
    q.row0 = 0;
    q.nrows = rows;
    q.klo = q.khi = 0;
    q.span = q.inv_block = 0;
    q.npieces = 0;
    q.part_base = q.comb0 = -1;
    q.dec = 1;
    q.shift = 0;
    q.fm = q.ft = -1;
    int32_t n = 0, key = 0x7fffffff;
    if (rows) {
        int32_t bucket;
        kv_sched_split(p, sq, rows, kr, chunk, &q.npieces, &q.span, &q.inv_block, &bucket);
        q.klo = kr.lo;
        q.khi = kr.hi;
        n = q.npieces * Hk;
        key = (KV_SCHED_BUCKETS - 1 - bucket) * KV_LEAN_SEQS + b; /* unique; longest pieces first */
    }
    /* exchange 2, first: the items of every tile ordered before this one */
    sm.key[tid] = key;
    sm.cnt[tid] = n;
    kv_lean_sync();
    KV_LEAN_STAMP(2);
    /* the rank: the items of the tiles with a smaller key. Entries b >= B (key max, count 0; every caller's thread
     * wrote its entry) add nothing, so four at a time up to B rounded up to 4 (the loop over all 32 / 64 entries
     * took ~1000 / 1800 cycles per block: attn_notes.md, twenty-second session). Also the items in all (p1), for
     * the one-wave alternative (v94). */
    static_assert(KV_LEAN_SEQS % 4 == 0, "the rank reads int4");
    static_assert(offsetof(kv_lean_smem, key) % 16 == 0 && offsetof(kv_lean_smem, cnt) % 16 == 0, "int4 rank reads");
    const int nb4 = (min(B, KV_LEAN_SEQS) + 3) >> 2;
    const int4 *key4 = (const int4 *)sm.key, *cnt4 = (const int4 *)sm.cnt;
    int32_t first = 0;
    unsigned long long p1 = 0;
#pragma unroll 2
    for (int o = 0; o < nb4; o++) {
        const int4 k4 = key4[o], c4 = cnt4[o];
        first += (k4.x < key ? c4.x : 0) + (k4.y < key ? c4.y : 0) + (k4.z < key ? c4.z : 0) + (k4.w < key ? c4.w : 0);
        p1 += (unsigned)c4.x + (unsigned)c4.y + (unsigned)c4.z + (unsigned)c4.w;
    }
    /* When c1 needs more than one wave (the same p1 in every thread): the one-wave alternative c2 (v94) and the
     * stream-K cut (v95), each from one more exchange. Calls whose pieces fit one wave (8x8192 at D 128) pay only
     * the p1 sum above. */
    bool sk = false, skd = false; /* the stream-K pieces taken (SK only); the cut decided (every caller) */
    if (p1 > (unsigned long long)max(a.split_blocks, 1)) {
        const int32_t c2 = kv_sched_chunk_alt(p, chunk, kmax);
        int32_t n2 = 0, key2 = 0x7fffffff, np2 = 0, span2 = 0, inv2 = 0;
        if (c2 && rows) {
            int32_t bucket;
            kv_sched_split(p, sq, rows, kr, c2, &np2, &span2, &inv2, &bucket);
            n2 = np2 * Hk;
            key2 = (KV_SCHED_BUCKETS - 1 - bucket) * KV_LEAN_SEQS + b;
        }
        sm.key2[tid] = key2;
        sm.cnt2[tid] = n2;
        sm.min1[tid] = rows ? kv_piece_min(kt, q.npieces, q.span) : 0x7fffffff;
        sm.len2[tid] = rows && c2 ? kv_piece_max(kt, np2, span2) : 0;
        /* stream-K facts: the live tiles' KV tiles before this one (in the warp) and their least */
        const int32_t ktl = rows ? kt : 0;
        const int32_t kin = kv_warp_incl_scan(ktl, lane); /* 32 tiles of <= 2^25 + 1 KV tiles each: int32 */
        const unsigned ktmn = __reduce_min_sync(0xffffffffu, rows ? (unsigned)kt : 0x7fffffffu);
        if (lane == 31) sm.kts[w] = kin;
        if (lane == 0) sm.x[6][w] = (int32_t)ktmn;
        kv_lean_sync();
        static_assert(offsetof(kv_lean_smem, key2) % 16 == 0 && offsetof(kv_lean_smem, cnt2) % 16 == 0 &&
                          offsetof(kv_lean_smem, min1) % 16 == 0 && offsetof(kv_lean_smem, len2) % 16 == 0,
                      "int4 reads");
        const int4 *key24 = (const int4 *)sm.key2, *cnt24 = (const int4 *)sm.cnt2;
        const int4 *min14 = (const int4 *)sm.min1, *len24 = (const int4 *)sm.len2;
        int32_t first2 = 0, mn = 0x7fffffff, ln = 0;
        unsigned long long p2 = 0;
        for (int o = 0; o < nb4; o++) {
            const int4 k24 = key24[o], c24 = cnt24[o], m4 = min14[o], l4 = len24[o];
            first2 += (k24.x < key2 ? c24.x : 0) + (k24.y < key2 ? c24.y : 0) + (k24.z < key2 ? c24.z : 0) +
                      (k24.w < key2 ? c24.w : 0);
            p2 += (unsigned)c24.x + (unsigned)c24.y + (unsigned)c24.z + (unsigned)c24.w;
            mn = min(mn, min(min(m4.x, m4.y), min(m4.z, m4.w)));
            ln = max(ln, max(max(l4.x, l4.y), max(l4.z, l4.w)));
        }
        long long kt0 = kin - ktl, ktot = 0; /* KV tiles of the live tiles before this one, and of all (int64: 64
                                               * tiles can pass 2^31; the stream-K cut needs <= 2^31 - 1) */
        int32_t ktmin = 0x7fffffff;
#pragma unroll
        for (int k = 0; k < KV_LEAN_WARPS; k++) {
            if (k < w) kt0 += sm.kts[k];
            ktot += sm.kts[k];
            ktmin = min(ktmin, sm.x[6][k]);
        }
        /* the call's length by c1 / c2 in KV tiles: c1 puts two pieces on some block, each at least mn long */
        long long mcur = 2 * (long long)mn;
        if (c2 && kv_alt_wins(p1, p2, mn, ln, a.split_blocks)) { /* the same verdict in every thread and block */
            q.npieces = np2;
            q.span = span2;
            q.inv_block = inv2;
            n = n2;
            first = first2;
            mcur = ln;
        }
        /* v95, the stream-K cut: the live tiles' KV tiles laid end to end (sequence order, the same for every kv
         * head) and cut every cs tiles, cs = the share of one of the split_blocks / Hk blocks of a kv head; a
         * tile's pieces are its parts between cuts, at most cs long, so that the longest-first list (the longest
         * pieces start, the shorter ones fill the blocks that end first) gives every block about cs tiles. Taken
         * when every live tile is at least cs long (a chunk then holds at most two pieces) and cs is at most
         * KV_SK_PCT % of the c1 / c2 split's call (mcur). Same in every thread. */
        const int per = max(a.split_blocks, 1) / Hk;
        if (KV_SK && !p.batch_invariant && p.num_splits == 0 && per >= 1 && ktot <= 0x7fffffffll) {
            /* 32-bit divisions (a 64-bit division is a called routine) */
            const int32_t cs0 = (int32_t)(((unsigned)ktot + (unsigned)per - 1u) / (unsigned)per);
            const int32_t cs = max(cs0, KV_MIN_CHUNK_TILES);
            skd = cs0 <= KV_SK_MAX_CHUNK && ktmin >= cs && 100 * (long long)cs <= KV_SK_PCT * mcur;
            /* Only the scheduler cuts (SK): the early decode blocks see skd and do not start their own items, so
             * the lists are the scheduler's (the cut's code in the decode kernel made every lean call ~5 us slower,
             * taken or not: attn_notes.md, forty-second session) */
            if (SK && skd) {
                int32_t npk = 0, phi = 0, len[3] = {0, 0, 0}, cnt[3] = {0, 0, 0};
                if (rows) {
                    phi = (int32_t)((unsigned)kt0 % (unsigned)cs);
                    const int32_t h = cs - phi; /* piece 0's length (kt >= cs >= h) */
                    npk = 1 + (kt - h + cs - 1) / cs;
                    len[0] = h;
                    len[1] = cs;
                    len[2] = kt - h - (npk - 2) * cs;
                    cnt[0] = Hk;
                    cnt[1] = npk >= 3 ? (npk - 2) * Hk : 0;
                    cnt[2] = npk >= 2 ? Hk : 0;
                }
                int32_t skey[3];
#pragma unroll
                for (int c = 0; c < 3; c++) { /* longest first, then head / middle / tail, then sequence: unique */
                    skey[c] = cnt[c] ? (cs - len[c]) * (3 * KV_LEAN_SEQS) + c * KV_LEAN_SEQS + b : 0x7fffffff;
                    sm.skey[c][tid] = skey[c];
                    sm.scnt[c][tid] = cnt[c];
                }
                kv_lean_sync();
                static_assert(offsetof(kv_lean_smem, skey) % 16 == 0 && offsetof(kv_lean_smem, scnt) % 16 == 0 &&
                                  KV_LEAN_SEQS % 4 == 0, "int4 reads");
                int32_t f[3] = {0, 0, 0};
                unsigned long long ps = 0;
#pragma unroll
                for (int c = 0; c < 3; c++) {
                    const int4 *k4p = (const int4 *)sm.skey[c], *c4p = (const int4 *)sm.scnt[c];
                    for (int o = 0; o < nb4; o++) {
                        const int4 k4 = k4p[o], c4 = c4p[o];
                        ps += (unsigned)c4.x + (unsigned)c4.y + (unsigned)c4.z + (unsigned)c4.w;
#pragma unroll
                        for (int m = 0; m < 3; m++)
                            f[m] += (k4.x < skey[m] ? c4.x : 0) + (k4.y < skey[m] ? c4.y : 0) +
                                    (k4.z < skey[m] ? c4.z : 0) + (k4.w < skey[m] ? c4.w : 0);
                    }
                }
                if (ps <= (unsigned long long)a.max_items) { /* else the c1 / c2 split (never cut) */
                    sk = true;
                    if (rows) {
                        q.npieces = npk;
                        q.span = cs * KV_BN;
                        q.shift = phi * KV_BN;
                        q.inv_block = 0;
                        q.fm = f[1];
                        q.ft = f[2];
                        n = npk * Hk;
                        first = f[0];
                    }
                }
            }
        }
    }
    r.sk = skd;
    const bool fits = n > 0 && (sk || (int64_t)first + n <= a.max_items);
    const bool split = fits && q.npieces > 1;
    const int32_t cp = split ? q.npieces * q.nrows * Hk : 0, cc = split ? Hk : 0;
    int32_t ip = kv_warp_incl_scan(cp, lane), ic = kv_warp_incl_scan(cc, lane);
    /* the warp's items, first range that did not fit (never hand out unwritten slots) and overflow of the list */
    int32_t total = n, cut = n > 0 && !fits ? first : 0x7fffffff;
    int ov2 = n > 0 && !fits ? 2 : 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        total += __shfl_xor_sync(0xffffffffu, total, o);
        cut = min(cut, __shfl_xor_sync(0xffffffffu, cut, o));
        ov2 |= __shfl_xor_sync(0xffffffffu, ov2, o);
    }
    /* exchange 3, the last: the warps' partial-row and combine totals (for the scans across warps) and the above
     * (until v67, twenty-fourth session: a fourth exchange carried the items, the cut and the overflow bits) */
    if (lane == 31) {
        sm.x[1][w] = ip;
        sm.x[2][w] = ic;
        sm.x[3][w] = total;
        sm.x[4][w] = cut;
        sm.x[5][w] = ov2;
    }
    kv_lean_sync();
    KV_LEAN_STAMP(3);
    int32_t total_comb = 0;
    int64_t total_part = 0;
    r.total = 0;
    r.cut = 0x7fffffff;
    r.ov = 0;
#pragma unroll
    for (int k = 0; k < KV_LEAN_WARPS; k++) {
        if (k < w) {
            ip += sm.x[1][k];
            ic += sm.x[2][k];
        }
        total_part += sm.x[1][k];
        total_comb += sm.x[2][k];
        r.total += sm.x[3][k];
        r.cut = min(r.cut, sm.x[4][k]);
        r.ov |= sm.x[5][k];
    }
    if (split && (int64_t)ip <= a.max_part_rows && (int64_t)ic <= a.max_combine) {
        q.part_base = ip - cp;
        q.comb0 = ic - cc;
    }
    /* bit 1: a split tile found no partial rows or combine tasks (cannot happen when the bounds are right: then
     * piece 0 does it all). A split tile's inclusive scans are at most the totals, and the last split tile's are
     * the totals (the other tiles add nothing), so some split tile overflowed exactly when a total is past its bound. */
    if (total_part > a.max_part_rows || (int64_t)total_comb > a.max_combine) r.ov |= 1;
    q.first = first;
    if (!fits) q.npieces = 0; /* no items written */
    KV_LEAN_STAMP(4);
    r.total_comb = total_comb;
#if KV_DEV_PLAN_DELAY
    for (const long long t0 = clock64(); clock64() - t0 < dev_delay;) {
    }
#endif
    return 1;
}

/* ---- scheduler: one block turns the live lengths into the item lists -----------------------------------
 * -1. with fused_check (small batches, kv_attn_check_fused): the check kernel's work first, kv_check_seq per
 *    sequence and one flat pass over every live page slot of the batch;
 * 0. the finalize step of the check (status record, seq_ok -> 1 / 0), see kv_finalize_block;
 * 1. per sequence (contiguous blocks of sequences per thread): tiles = ceil(rows / tile rows) (16-row decode
 *    tiles, prefill tiles of the prefill kernel's height) and an upper bound of its KV work in tiles; a block
 *    scan gives each sequence's first tile; with B <= KV_SCHED_SEQS these per-sequence facts stay in smem;
 * 2. the split chunk: auto = max(KV_MIN_CHUNK_TILES, work / (KV_SPLIT_PIECES_PER_CTA * grid blocks)) KV tiles,
 *    so that no piece is longer than a block's fair share; batch-invariant = fixed KV_INV_SPLIT_KEYS key blocks
 *    (depends on that sequence only); num_splits caps the pieces;
 * 3. per (sequence, tile), a warp's 32 tiles at a time: its key range and pieces, one item per (kv head, piece)
 *    in the decode or the prefill list, and one combine task per kv head when split (merged by the block
 *    finishing the last piece). Each list is ordered by descending piece length (counting sort over
 *    KV_SCHED_BUCKETS lengths; warp-aggregated reservations): the attention kernels take items in list order, so
 *    this is a greedy longest-first schedule. A tile's items are written by its lane, or by the whole block when
 *    it has more than KV_SCHED_OWN_ITEMS.
 * Early start (KV_EARLY_START, kv_attn_early): -1 and 0 move after 3. Steps 1 - 3 use the per-sequence checks
 * alone, the lists are released on items_ready (the decode kernel starts on it), then the page-slot pass and the
 * finalize step run, the prefill items of failed sequences are emptied, and sched_done is released. */
/* An early-start decode step that appends (kv_attn_early: 16-byte rows of k_new and v_new) has no append kernel,
 * and no attention item waits for a store. The decode items read the new keys [S - L, S - L + n_new) of their range
 * from k_new / v_new themselves (tile_row_address: the bits the cache will hold, since without rotary the append
 * copies); with rotary (ROPE) they first rotate their new keys into the workspace (kv_rot_k) and read them there,
 * and store them into the cache at their end, once the verdict is final (kv_attn_item). The scheduler stores every
 * new row of the ok sequences (with rotary: the values and the keys no decode item holds) after the finalize step,
 * before sched_done (kv_sched_append), while the decode kernel runs; the prefill items of a decode-first call
 * start on sched_done and read the cache. Earlier forms, in which attention items stored rows in the tile loop or
 * waited for them, were slower (dev/experiments/v84, v85); so was the scheduler rotating every key itself (one
 * round trip more per task: 64x256 +21% against the plain order, thirty-fifth session).
 * kv_append_tasks: tasks (new row, kv head, 16-byte chunk) first, first + step, ... of sequence b, with
 * KV_SCHED_APPEND_ILP loads in flight per thread before their stores (4 spilled 160 bytes: the scheduler has 64
 * registers per thread). kv_sched_append: a warp per sequence; a sequence of more than KV_SCHED_APPEND_WARP_TASKS tasks is
 * stored by the whole block afterwards (one warp, ~1 us per 64 tasks estimated: a 128-row append at 8 kv heads,
 * 16384 tasks, ~250 us). kv_attn_early allows 1024 (row, kv head) units, so at most 1024 / (512 / chunks) = 2 x
 * chunks <= 64 sequences are that large (KV_SCHED_APPEND_BIG; past it, a warp stores its sequence itself). */
#define KV_SCHED_APPEND_ILP 2
#define KV_SCHED_APPEND_WARP_TASKS 512
#define KV_SCHED_APPEND_BIG 64
template <typename T, bool ROPE>
static __device__ __forceinline__ void kv_append_tasks(const kvattn_params &p, const kv_seq &s, int b,
                                                       int32_t first, int32_t step, bool k_all) {
    const int Hk = p.num_kv_heads, chunks = p.head_dim / 8; /* head_dim % 8 == 0 (kv_attn_supported) */
    const int varlen = p.cu_seqlens_knew != NULL;
    const int32_t cache_row = p.cache_batch_idx ? p.cache_batch_idx[b] : b;
    const int32_t per_row = Hk * chunks, tasks = s.n_new * per_row;
    /* ROPE: the new keys [cov_lo, cov_hi) are stored rotated by the decode items that hold them (kv_attn_item): the
     * sequence's decode tile's key range, which its items' pieces cover (kv_sched_item), unless k_all (the lists
     * were cut: some item may not exist); this loop stores the values and the other keys */
    int32_t cov_lo = 0, cov_hi = 0;
    if (ROPE && !k_all) {
        const int G = p.num_heads / p.num_kv_heads;
        const int32_t rows = kv_seq_rows(p, s, G);
        if (rows > 0 && rows <= KV_DECODE_ROWS) {
            const kv_range kr = kv_tile_keys(p, s, G, 0, rows);
            cov_lo = kr.lo;
            cov_hi = kr.hi;
        }
    }
    for (int32_t t0 = first; t0 < tasks; t0 += step * KV_SCHED_APPEND_ILP) {
        uint4 kx[KV_SCHED_APPEND_ILP], vx[KV_SCHED_APPEND_ILP];
        int64_t ko[KV_SCHED_APPEND_ILP], vo[KV_SCHED_APPEND_ILP];
#pragma unroll
        for (int u = 0; u < KV_SCHED_APPEND_ILP; u++) {
            const int32_t task = t0 + u * step;
            ko[u] = vo[u] = -1;
            if (task >= tasks) continue;
            const int32_t t = task / per_row, rem = task - t * per_row, kvh = rem / chunks;
            const int c0 = (rem - kvh * chunks) * 8;
            const int32_t pos = s.S + t;
            const bool k_item = ROPE && pos - s.L >= cov_lo && pos - s.L < cov_hi; /* stored by its decode item */
            const T *krow = (const T *)p.k_new +
                            kv_row_offset(varlen, b, s.new_row0, t, p.knew_batch_stride, p.knew_row_stride) +
                            (int64_t)kvh * p.knew_head_stride;
            if (!k_item) kx[u] = *(const uint4 *)(krow + c0);
            /* ROPE: rotated as the append kernel does (kv_rope_k8); an ok sequence's positions are in the table */
            if (ROPE && !KV_DEV_ROPE_SCHED_UNROTATED && !k_item && c0 < p.rotary_dim && pos < p.rotary_max_pos)
                kv_rope_k8<T>(p, krow, c0, pos, (T *)&kx[u]);
            vx[u] = *(const uint4 *)((const T *)p.v_new +
                                     kv_row_offset(varlen, b, s.new_row0, t, p.vnew_batch_stride, p.vnew_row_stride) +
                                     (int64_t)kvh * p.vnew_head_stride + c0);
            ko[u] = k_item ? -1
                           : kv_cache_offset(&p, b, cache_row, pos, kvh, p.k_batch_stride, p.k_row_stride, p.k_head_stride);
            vo[u] = kv_cache_offset(&p, b, cache_row, pos, kvh, p.v_batch_stride, p.v_row_stride, p.v_head_stride);
            if (ko[u] >= 0) ko[u] += c0;
            if (vo[u] >= 0) vo[u] += c0;
        }
#pragma unroll
        for (int u = 0; u < KV_SCHED_APPEND_ILP; u++) {
            if (ko[u] >= 0 && !KV_DEV_NO_SCHED_APPEND) *(uint4 *)((T *)p.k_cache + ko[u]) = kx[u];
            if (vo[u] >= 0 && !KV_DEV_NO_SCHED_APPEND) *(uint4 *)((T *)p.v_cache + vo[u]) = vx[u];
        }
    }
}
/* every thread of the block, in block-uniform flow (it has block barriers) */
template <typename T, bool ROPE>
static __device__ __forceinline__ void kv_sched_append(const kvattn_params &p, const int8_t *ok, int B, bool k_all) {
    __shared__ int32_t s_big[KV_SCHED_APPEND_BIG], s_nbig;
    const int per_row = p.num_kv_heads * (p.head_dim / 8);
    const int nwarps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) s_nbig = 0;
    __syncthreads();
    for (int b = warp; b < B; b += nwarps) {
        if (!ok[b]) continue;
        const kv_seq s = kv_seq_get(&p, b);
        if (s.n_new <= 0) continue;
        if ((int64_t)s.n_new * per_row > KV_SCHED_APPEND_WARP_TASKS) {
            int i = 0;
            if (lane == 0) i = atomicAdd(&s_nbig, 1);
            i = __shfl_sync(0xffffffffu, i, 0);
            if (i < KV_SCHED_APPEND_BIG) {
                if (lane == 0) s_big[i] = b;
                continue;
            }
        }
        kv_append_tasks<T, ROPE>(p, s, b, lane, 32, k_all);
    }
    __syncthreads();
    const int nbig = min(s_nbig, KV_SCHED_APPEND_BIG);
    for (int i = 0; i < nbig; i++) {
        const int b = s_big[i];
        kv_append_tasks<T, ROPE>(p, kv_seq_get(&p, b), b, threadIdx.x, blockDim.x, k_all);
    }
}

/* APPEND: an early-start call that appends (kv_sched_append); its own instantiation, so that the other calls'
 * scheduler keeps its code */
template <bool LEAN, bool APPEND = false, bool ROPE = false>
__global__ void __launch_bounds__(KV_SCHED_THREADS) kv_attn_schedule_kernel(kvattn_params p, kv_attn_args a) {
    __shared__ int32_t s_scan[KV_SCHED_THREADS / 32]; /* per-warp tile totals, then their exclusive scan */
    __shared__ unsigned long long s_work;
    __shared__ unsigned long long s_alt_p1, s_alt_p2; /* the c2 decision (v94): items at c1 / c2 */
    __shared__ int32_t s_kmax, s_anybig, s_alt_min1, s_alt_len2; /* longest decode tile, a prefill tile, pieces */
    __shared__ int32_t s_items, s_pitems, s_combine, s_part, s_overflow, s_total;
    __shared__ int32_t s_items_cut, s_pitems_cut; /* smallest start of a range that did not fit (unwritten) */
    /* per-sequence facts of the item pass, in smem when B <= KV_SCHED_SEQS (else re-read from global memory):
     * first tile, queries (0: skipped) and key count */
    __shared__ int32_t s_pre[KV_SCHED_SEQS + 1], s_nq[KV_SCHED_SEQS], s_sk[KV_SCHED_SEQS];
    __shared__ int8_t s_ok[KV_SCHED_SEQS]; /* the final ok flags (B <= KV_SCHED_SEQS) */
    __shared__ int32_t s_bucket[2 * KV_SCHED_BUCKETS]; /* per list and piece length: count, then next slot */
    __shared__ kv_sched_tile s_big[KV_SCHED_BIG];      /* tiles whose items the whole block writes */
    __shared__ int32_t s_nbig, s_bigpre[KV_SCHED_BIG + 1]; /* their count; exclusive prefix of their item counts */
    __shared__ int32_t s_lean;    /* the lean path planned the batch (KV_LEAN_SCHED) */
    __shared__ int32_t s_lean_sk; /* ... with the stream-K cut: the early decode blocks started no item (v95) */
    __shared__ kv_lean_smem s_lean_sm;                   /* the lean path's scratch */
    const int tid = threadIdx.x;
    const int B = p.batch, Hk = p.num_kv_heads, G = p.num_heads / p.num_kv_heads;
    const bool early = (a.no_wait & KV_EARLY_START) != 0; /* fused checks, B <= KV_SCHED_SEQS (kv_attn_early) */
    KV_TL(0, 0, Min);
    kv_grid_wait(); /* the check flags (PDL: see cuda_internal.cuh) */
    KV_TL(0, 1, Min);
    KV_TL(0, 2, Max);
    if (early) { /* before the decode kernel can start: no flag of an earlier call may be read as this call's */
        for (int b = tid; b < B; b += KV_SCHED_THREADS) ((int8_t *)a.seq_ok)[b] = KV_SEQ_PENDING;
        if (tid == 0) a.hdr->items_ready = a.hdr->sched_done = 0;
        __threadfence();
        __syncthreads();
    }
    kv_grid_launch_dependents();
#ifdef KVATTN_TIMELINE
    for (int tl_rep = 0; tl_rep < 1 + kv_tl_twice; tl_rep++) { /* dev: a second pass with warm caches */
    if (kv_tl_twice && !a.fused_check) /* the second pass sees the check kernel's flags again */
        for (int b = tid; b < B && b < 4096; b += KV_SCHED_THREADS) {
            if (tl_rep == 0) kv_tl_flags[b] = a.seq_ok[b];
            else ((int8_t *)a.seq_ok)[b] = kv_tl_flags[b];
        }
    __syncthreads();
    KV_TL(0, 14, Max);
    const long long tl_c0 = clock64();
#endif
    auto fused_check = [&]() {
        /* the check kernel's work, for a batch small enough for this block (B <= KV_SCHED_SEQS, few page slots):
         * per-sequence checks (thread t: sequence t, or 2t and 2t + 1 when B > threads), a block scan of each
         * sequence's page-slot count,
         * then the slots of all sequences as one flat range, KV_CHECK_U coalesced table reads in flight per lane.
         * Smem reused here and filled again after the finalize step: s_sk = flags, s_nq = first slot, s_pre = slot
         * prefix */
        int32_t cnt[2] = {0, 0};
        const int per = B > KV_SCHED_THREADS ? 2 : 1; /* sequences per thread (B <= KV_SCHED_SEQS = 2 x threads) */
#pragma unroll
        for (int k = 0; k < 2; k++) {
            const int b = per * tid + k;
            if (k < per && b < B) {
                int32_t lo, hi;
                s_sk[b] = kv_check_seq(p, b, &lo, &hi);
                s_nq[b] = lo;
                cnt[k] = hi >= lo ? hi - lo + 1 : 0;
            }
        }
        {
            const int32_t base = kv_block_excl_scan(cnt[0] + cnt[1], s_scan, &s_total);
            if (per * tid < B) s_pre[per * tid] = base;
            if (per == 2 && 2 * tid + 1 < B) s_pre[2 * tid + 1] = base + cnt[0];
            if (tid == 0) s_pre[B] = s_total;
        }
        __syncthreads();
        KV_TLS(10); /* the fused check's per-sequence part */
        const int32_t total_slots = s_total;
        /* a round: warp w takes the KV_CHECK_U * 32 consecutive slots from (round * warps + w) * 32 * KV_CHECK_U,
         * lane l the slots base + l + 32 j (j < KV_CHECK_U): each table read of a warp covers 32 consecutive
         * entries (coalesced: thread-contiguous runs of 8 slots made each warp read touch 32 sectors), and all
         * KV_CHECK_U reads of a lane are issued before any is checked. Measured (attn_notes.md, seventh session): no
         * faster than the thread-contiguous form, 16384 slots still take ~9.5 kcycles (two dependent rounds). */
        constexpr int U = KV_CHECK_U;
        auto seq_of = [&](int32_t f) { /* the last sequence whose slots start at or before f */
            int lo = 0, hi = B;
            while (hi - lo > 1) {
                const int mid = (lo + hi) >> 1;
                if (s_pre[mid] <= f) lo = mid; else hi = mid;
            }
            return lo;
        };
        for (int32_t base = (tid >> 5) * 32 * U; base < total_slots; base += KV_SCHED_THREADS * U) {
            const int32_t f0 = base + (tid & 31);
            int b = seq_of(min(f0, total_slots - 1));
            int32_t pg[U];
#pragma unroll
            for (int j = 0; j < U; j++) {
                const int32_t f = f0 + 32 * j;
                pg[j] = 0;
                if (f < total_slots) {
                    while (s_pre[b + 1] <= f) b++; /* next sequence with slots (s_pre[B] = total > f) */
                    pg[j] = p.block_table[(int64_t)b * p.block_table_batch_stride + s_nq[b] + (f - s_pre[b])];
                }
            }
            unsigned bad = 0;
#pragma unroll
            for (int j = 0; j < U; j++)
                if (f0 + 32 * j < total_slots && (pg[j] < 0 || pg[j] >= p.num_pages)) bad |= 1u << j;
            if (bad) { /* rare: walk again for the sequences of the bad slots */
                b = seq_of(min(f0, total_slots - 1));
                for (int j = 0; j < U; j++) {
                    const int32_t f = f0 + 32 * j;
                    if (f >= total_slots) break;
                    while (s_pre[b + 1] <= f) b++;
                    if ((bad >> j) & 1u) atomicOr(&s_sk[b], KVATTN_FLAG_PAGE_INDEX);
                }
            }
        }
        /* kv_finalize_block reads the flags (s_sk) after its first barrier */
#ifdef KVATTN_TIMELINE
        __syncthreads();
        KV_TLS(9); /* the fused check's end */
#endif
    };
    const bool cached = B <= KV_SCHED_SEQS;
    /* one sequence per thread of the first KV_LEAN_WARPS warps (kv_lean_plan); the tiles fit the block-wide queue */
    static_assert(KV_LEAN_SEQS <= KV_SCHED_BIG && KV_LEAN_SEQS < KV_SCHED_THREADS, "lean path");
    bool lean = false;
    if (!early) {
        if (a.fused_check) fused_check();
        kv_finalize_block(B, (int8_t *)a.seq_ok, a.status, a.fused_check ? s_sk : NULL, s_ok,
                          cached ? B : 0); /* ends with a block barrier */
    } else {
        /* early start: the items first, from the per-sequence checks alone (the lengths they use are sound);
         * the page-slot pass and the finalize step follow once the items are out. A sequence that then fails
         * still has items: the decode kernel computes them but writes nothing of it (kv_seq_verdict). s_ok holds
         * "passed kv_check_seq" here; a cu_seqlens failure anywhere fails every sequence, as in the finalize. */
        if constexpr (LEAN) {
            if (tid < KV_LEAN_SEQS) {
                kv_lean_res r;
                const int st = kv_lean_plan<true>(p, a, s_lean_sm, r);
                if (st) {
                    const int b = tid;
                    if (b < B) {
                        s_ok[b] = r.ok;
                        s_big[b] = r.q;
                    }
                    if (tid == 0) {
                        s_items = r.total;
                        s_items_cut = r.cut;
                        s_pitems = 0;
                        s_pitems_cut = 0x7fffffff;
                        s_combine = r.total_comb;
                        s_overflow = r.ov;
                        s_lean_sk = r.sk;
                        s_nbig = B;
                    }
                }
                if (tid == 0) s_lean = st;
                KV_TLS(12); /* the lean path's end */
            }
            __syncthreads();
            lean = s_lean != 0;
        }
        if (!lean) {
            int bad_cu = 0; /* (fused_check runs kv_check_seq again after the lists: its smem is the item pass's) */
            for (int b = tid; b < B; b += KV_SCHED_THREADS) {
                int32_t lo, hi;
                const int f = kv_check_seq(p, b, &lo, &hi);
                s_ok[b] = f == 0;
                bad_cu |= f & KVATTN_FLAG_BAD_CU_SEQLENS;
            }
            if (__syncthreads_or(bad_cu))
                for (int b = tid; b < B; b += KV_SCHED_THREADS) s_ok[b] = 0; /* this thread's own entries */
        }
    }
    KV_TLS(5);

    const int lane = tid & 31, wid = tid >> 5;
    if (!lean) {
        if (tid == 0) {
            s_work = 0; s_items = 0; s_pitems = 0; s_combine = 0; s_part = 0; s_overflow = 0;
            s_kmax = 0; s_anybig = 0; s_alt_p1 = s_alt_p2 = 0; s_alt_min1 = 0x7fffffff; s_alt_len2 = 0;
            s_items_cut = s_pitems_cut = 0x7fffffff;
            s_nbig = 0;
        }
        __syncthreads();

        /* 1. tiles per sequence, scanned */
        int32_t *pre = cached ? s_pre : a.tile_prefix;
        const int per = (B + KV_SCHED_THREADS - 1) / KV_SCHED_THREADS;
        const int b_begin = min(B, tid * per), b_end = min(B, b_begin + per);
        int32_t my_tiles = 0, my_kmax = 0;
        unsigned long long my_work = 0;
        bool my_big = false;
        for (int b = b_begin; b < b_end; b++) {
            const bool ok = cached ? s_ok[b] : a.seq_ok[b];
            const kv_seq s = kv_seq_get(&p, b);
            const int32_t rows = ok ? kv_seq_rows(p, s, G) : 0;
            if (cached) {
                s_nq[b] = rows ? s.n_q : 0;
                s_sk[b] = s.S + s.n_new - s.L;
            }
            if (rows == 0) continue;
            const int32_t tiles = (rows + kv_tile_rows(rows, a.prefill_rows) - 1) / kv_tile_rows(rows, a.prefill_rows);
            const int64_t s_k = (int64_t)s.S + s.n_new - s.L;
            my_tiles += tiles;
            my_work += (unsigned long long)tiles * kv_sched_tile_work(Hk, s_k);
            if (rows > KV_DECODE_ROWS) my_big = true;
            else my_kmax = max(my_kmax, kv_range_ktiles(kv_tile_keys(p, s, G, 0, rows)));
        }
        {   /* the longest decode tile and whether any tile is a prefill tile (the c2 decision, v94) */
            const int32_t wk = (int32_t)__reduce_max_sync(0xffffffffu, (unsigned)my_kmax);
            const bool wb = __any_sync(0xffffffffu, my_big);
            if (lane == 0 && wk) atomicMax(&s_kmax, wk);
            if (lane == 0 && wb) s_anybig = 1;
        }
#ifdef KVATTN_TIMELINE
        __syncthreads();
        KV_TLS(11); /* the facts loop */
#endif
        /* the block's work (one 64-bit smem atomic per warp: they serialize), then the exclusive scan of my_tiles */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) my_work += __shfl_xor_sync(0xffffffffu, my_work, o);
        if (lane == 0 && my_work) atomicAdd(&s_work, my_work);
        {
            int32_t acc = kv_block_excl_scan(my_tiles, s_scan, &s_total);
            for (int b = b_begin; b < b_end; b++) {
                pre[b] = acc;
                int32_t rows;
                if (cached) {
                    kv_seq s;
                    s.n_q = s_nq[b];
                    rows = kv_seq_rows(p, s, G);
                } else {
                    const kv_seq s = kv_seq_get(&p, b);
                    rows = a.seq_ok[b] ? kv_seq_rows(p, s, G) : 0;
                }
                if (rows) acc += (rows + kv_tile_rows(rows, a.prefill_rows) - 1) / kv_tile_rows(rows, a.prefill_rows);
            }
            if (tid == 0) pre[B] = s_total;
        }
        __threadfence_block();
        __syncthreads();
        KV_TLS(6);
        const int32_t total_tiles = s_total;

        /* 2. the auto chunk (KV tiles per piece), or its one-wave alternative c2 for a decode-only batch (v94,
         * kv_sched_chunk_alt: the lean plan decides the same from the same facts) */
        /* sequence b as the item passes read it: from the smem facts (only n_q, 0 when skipped, and the key count
         * S + n_new - L) or from global memory */
        auto item_seq = [&](int b) -> kv_seq {
            kv_seq s;
            if (cached) {
                s.n_q = s_nq[b];
                s.S = s_sk[b];
                s.n_new = 0;
                s.L = 0;
            } else {
                s = kv_seq_get(&p, b);
            }
            return s;
        };
        int32_t chunk = kv_sched_chunk(s_work, a.split_blocks);
        const int32_t c2 = s_anybig ? 0 : kv_sched_chunk_alt(p, chunk, s_kmax);
        if (c2) {
            unsigned long long p1 = 0, p2 = 0;
            int32_t mn = 0x7fffffff, ln = 0;
            for (int b = b_begin; b < b_end; b++) {
                const kv_seq s = item_seq(b);
                const int32_t rows = cached || a.seq_ok[b] ? kv_seq_rows(p, s, G) : 0;
                if (rows == 0) continue;
                const kv_range kr = kv_tile_keys(p, s, G, 0, rows);
                const int32_t kt = kv_range_ktiles(kr);
                int32_t n1, sp1, n2, sp2, inv, bucket;
                kv_sched_split(p, s, rows, kr, chunk, &n1, &sp1, &inv, &bucket);
                kv_sched_split(p, s, rows, kr, c2, &n2, &sp2, &inv, &bucket);
                p1 += (unsigned long long)n1 * Hk;
                p2 += (unsigned long long)n2 * Hk;
                mn = min(mn, kv_piece_min(kt, n1, sp1));
                ln = max(ln, kv_piece_max(kt, n2, sp2));
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                p1 += __shfl_xor_sync(0xffffffffu, p1, o);
                p2 += __shfl_xor_sync(0xffffffffu, p2, o);
            }
            mn = (int32_t)__reduce_min_sync(0xffffffffu, (unsigned)mn);
            ln = (int32_t)__reduce_max_sync(0xffffffffu, (unsigned)ln);
            if (lane == 0) {
                if (p1) atomicAdd(&s_alt_p1, p1);
                if (p2) atomicAdd(&s_alt_p2, p2);
                atomicMin(&s_alt_min1, mn);
                atomicMax(&s_alt_len2, ln);
            }
            __syncthreads();
            if (kv_alt_wins(s_alt_p1, s_alt_p2, s_alt_min1, s_alt_len2, a.split_blocks)) chunk = c2;
        }

        /* 3. items in descending piece length (what a greedy list schedule needs to keep the tail short): pass 0
         * counts the items per (list, piece length in KV tiles, capped), a scan turns the counts into the start
         * of each length's range, pass 1 writes the items there */
        struct tile_plan {
            int b;
            int32_t rows, row0, nrows, npieces, span, inv_block, bucket;
            kv_range kr;
        };
        auto plan_tile = [&](int32_t t, tile_plan &tp) -> bool {
            int lo = 0, hi = B; /* last b with pre[b] <= t, among sequences that own tiles */
            while (hi - lo > 1) {
                const int mid = (lo + hi) >> 1;
                if (pre[mid] <= t) lo = mid; else hi = mid;
            }
            const int b = lo;
            const kv_seq s = item_seq(b);
            tp.b = b;
            tp.rows = kv_seq_rows(p, s, G);
            const int tm = kv_tile_rows(tp.rows, a.prefill_rows);
            tp.row0 = (t - pre[b]) * tm;
            if (tp.rows == 0 || tp.row0 >= tp.rows) return false; /* cannot happen for a consistent prefix */
            tp.nrows = min(tm, tp.rows - tp.row0);
            tp.kr = kv_tile_keys(p, s, G, tp.row0, tp.nrows);
            kv_sched_split(p, s, tp.rows, tp.kr, chunk, &tp.npieces, &tp.span, &tp.inv_block, &tp.bucket);
            return true;
        };
        for (int e = tid; e < 2 * KV_SCHED_BUCKETS; e += KV_SCHED_THREADS) s_bucket[e] = 0;
        __syncthreads();
        /* both passes go over the tiles a warp at a time (lane = tile), so that reservations are warp-aggregated:
         * one smem atomic per (warp, counter), not one per tile (same-address atomics serialize) */
        auto tile_key = [&](const tile_plan &tp) {
            return (tp.rows <= KV_DECODE_ROWS ? 0 : KV_SCHED_BUCKETS) + tp.bucket;
        };
        /* with at most one tile per thread (the common case) pass 1 reuses pass 0's plan from registers */
        const bool one_round = total_tiles <= KV_SCHED_THREADS;
        tile_plan tp_kept = {};
        bool v_kept = false;
        for (int32_t t0 = wid * 32; t0 < total_tiles; t0 += KV_SCHED_THREADS) {
            tile_plan tp = {};
            const bool v = t0 + lane < total_tiles && plan_tile(t0 + lane, tp);
            kv_warp_reserve(s_bucket, v ? tile_key(tp) : -1, v ? tp.npieces * Hk : 0, lane);
            tp_kept = tp;
            v_kept = v;
        }
        __syncthreads();
        KV_TLS(12); /* pass 0 */
        if (tid < 64) { /* exclusive scan of each list's counts, longest pieces first: warp w scans list w, lane l
                           * owns the 8 buckets 255 - 8l ... 248 - 8l */
            constexpr int PER = KV_SCHED_BUCKETS / 32;
            int32_t *cnt = s_bucket + wid * KV_SCHED_BUCKETS;
            int32_t c[PER], sum = 0;
#pragma unroll
            for (int k = 0; k < PER; k++) {
                c[k] = cnt[KV_SCHED_BUCKETS - 1 - (lane * PER + k)];
                sum += c[k];
            }
            const int32_t wi = kv_warp_incl_scan(sum, lane);
            int32_t acc = wi - sum;
#pragma unroll
            for (int k = 0; k < PER; k++) {
                cnt[KV_SCHED_BUCKETS - 1 - (lane * PER + k)] = acc;
                acc += c[k];
            }
            if (lane == 31) {
                if (wid == 0) s_items = wi; else s_pitems = wi;
            }
        }
        __syncthreads();
        KV_TLS(7);
        for (int32_t t0 = wid * 32; t0 < total_tiles; t0 += KV_SCHED_THREADS) {
            tile_plan tp = tp_kept;
            bool v = v_kept;
            if (!one_round) {
                tp = tile_plan{};
                v = t0 + lane < total_tiles && plan_tile(t0 + lane, tp);
            }
            const bool dec = tp.rows <= KV_DECODE_ROWS;
            const int32_t n = v ? tp.npieces * Hk : 0;
            const int32_t first = kv_warp_reserve(s_bucket, v ? tile_key(tp) : -1, n, lane);
            const bool fits = v && (int64_t)first + n <= a.max_items;
            if (v && !fits) {
                atomicOr(&s_overflow, 2);
                atomicMin(dec ? &s_items_cut : &s_pitems_cut, first); /* never hand out its unwritten slots */
            }
            const bool split = fits && tp.npieces > 1;
            int32_t part_base = kv_warp_reserve(&s_part, split ? 0 : -1, split ? tp.npieces * tp.nrows * Hk : 0, lane);
            int32_t comb0 = kv_warp_reserve(&s_combine, split ? 0 : -1, split ? Hk : 0, lane);
            if (!split) {
                part_base = comb0 = -1;
            } else if ((int64_t)part_base + (int64_t)tp.npieces * tp.nrows * Hk > a.max_part_rows ||
                       (int64_t)comb0 + Hk > a.max_combine) {
                atomicOr(&s_overflow, 1); /* cannot happen when the bounds are right: piece 0 does it all */
                part_base = comb0 = -1;
            }
            /* each lane writes its own tile's items, except that a tile of many pieces (a long sequence split for a
             * small batch) is queued and written by the whole block below */
            if (fits) {
                kv_sched_tile q;
                q.b = tp.b;
                q.row0 = tp.row0;
                q.nrows = tp.nrows;
                q.klo = tp.kr.lo;
                q.khi = tp.kr.hi;
                q.span = tp.span;
                q.inv_block = tp.inv_block;
                q.npieces = tp.npieces;
                q.first = first;
                q.part_base = part_base;
                q.comb0 = comb0;
                q.dec = dec;
                q.shift = 0;
                q.fm = q.ft = -1;
                int slot = -1;
                if (n > KV_SCHED_OWN_ITEMS) {
                    slot = atomicAdd(&s_nbig, 1);
                    if (slot < KV_SCHED_BIG) s_big[slot] = q;
                }
                if (slot < 0 || slot >= KV_SCHED_BIG) kv_sched_write_tile(a, q, Hk, 0, 1);
            }
        }
        __syncthreads();
        KV_TLS(13); /* pass 1 */
    }
    /* the queued tiles' items as one flat range over the whole block (a loop over the tiles, each written by the
     * block, made 8x8192 spend ~3 us here: one dependent round of index math and stores per tile) */
    const int nbig = min(s_nbig, KV_SCHED_BIG);
    if (nbig > 0) {
        if (wid == 0) {
            int32_t acc = 0;
            for (int q0 = 0; q0 < nbig; q0 += 32) {
                const int q = q0 + lane;
                const int32_t c = q < nbig ? s_big[q].npieces * Hk : 0;
                const int32_t incl = kv_warp_incl_scan(c, lane);
                if (q < nbig) s_bigpre[q] = acc + incl - c;
                acc += __shfl_sync(0xffffffffu, incl, 31);
            }
            if (lane == 0) s_bigpre[nbig] = acc;
        }
        __syncthreads();
        const int32_t total_big = s_bigpre[nbig];
        /* a lean plan without overflow: the early decode blocks computed it too and each wrote and runs item
         * blockIdx.x (kv_attn_kernel) */
        const int32_t skip = lean && kv_lean_complete(s_overflow, s_items_cut) && !s_lean_sk ? a.grid_ctas : 0;
        for (int32_t idx = tid; idx < total_big; idx += KV_SCHED_THREADS) {
            int lo = 0, hi = nbig; /* the last queued tile whose items start at or before idx */
            while (hi - lo > 1) {
                const int mid = (lo + hi) >> 1;
                if (s_bigpre[mid] <= idx) lo = mid; else hi = mid;
            }
            kv_sched_write_item(a, s_big[lo], idx - s_bigpre[lo], skip);
        }
    }
    __syncthreads();
    KV_TLS(8);
    if (tid == 0) {
        /* ranges are reserved in order: every range starting below the first one that did not fit was written */
        a.hdr->n_items = (int32_t)min(min((int64_t)s_items, a.max_items), (int64_t)s_items_cut);
        a.hdr->n_pitems = (int32_t)min(min((int64_t)s_pitems, a.max_items), (int64_t)s_pitems_cut);
        a.hdr->n_combine = (int32_t)min((int64_t)s_combine, a.max_combine);
        a.hdr->item_counter = 0;
        a.hdr->pitem_counter = 0;
        a.hdr->overflow = s_overflow;
    }
    if (early) {
        /* release the lists (the block's item writes, ordered before thread 0's fence by the barrier; the fence is
         * cumulative), then the checks left: the page slots and the finalize step, whose seq_ok bytes replace
         * KV_SEQ_PENDING */
        __syncthreads();
#ifdef KVATTN_TIMELINE
        if (tid == 0 && tl_rep == kv_tl_twice) { /* the last pass's lists */
            __threadfence();
            kv_st_release(&a.hdr->items_ready, 1);
        }
        KV_TLS(15);
#else
        if (tid == 0) {
            __threadfence();
            kv_st_release(&a.hdr->items_ready, 1);
        }
#endif
        fused_check();
        kv_finalize_block(B, (int8_t *)a.seq_ok, a.status, s_sk, s_ok, B); /* ends with a block barrier */
        /* prefill items (decode-first order; the prefill kernel starts on sched_done) of a sequence that failed
         * become empty, and so does their combine task: nothing of the sequence is computed or written. The
         * decode kernel, already running, gates its own writes instead (kv_attn_item, kv_attn_piece_done). */
        const int32_t np = a.hdr->n_pitems; /* written by thread 0 before the barriers above */
        for (int32_t i = tid; i < np; i += KV_SCHED_THREADS) {
            kv_item *it = a.pitems + i;
            if (s_ok[it->b]) continue;
            it->nrows = 0;
            it->khi = it->klo;
            if (it->comb >= 0) a.combine[it->comb].nrows = 0;
        }
        if (APPEND) { /* this call's append (kv_attn_early); every thread's stores before thread 0's fence */
            /* (ROPE: every key if the decode list was cut, since an item that holds one may then not exist) */
            const bool k_all = s_items_cut != 0x7fffffff || (s_overflow & 2);
            if (p.dtype == KVATTN_BF16) kv_sched_append<__nv_bfloat16, ROPE>(p, s_ok, B, k_all);
            else kv_sched_append<__half, ROPE>(p, s_ok, B, k_all);
        }
        __syncthreads();
        if (tid == 0) {
            __threadfence();
            kv_st_release(&a.hdr->sched_done, 1);
        }
    }
#ifdef KVATTN_TIMELINE
    }
#endif
    KV_TL(0, 3, Min);
    KV_TL(0, 4, Max);
}

/* ---- output of one packed row ------------------------------------------------------------------------- */
/* Element offset of out (or q) for packed row r of (b, kv_head); also the lse offset. */
/* What an attention item derives from the params and its sequence; one place for both attention kernels (the
 * mma.sync kv_attn_item and the wgmma kv_sm90_item). */
typedef struct kv_item_facts {
    kv_seq s;
    int32_t s_k;       /* key positions of the sequence after this call's append, from its leftpad on */
    int32_t cache_row; /* contiguous caches: the sequence's cache row (cache_batch_idx, default b) */
    int G, D;          /* query heads per KV head, head dim */
    float scale;       /* softmax scale */
    bool plain;        /* no softcap and no ALiBi: the scores need only the scale */
} kv_item_facts;
static __device__ __forceinline__ kv_item_facts kv_item_facts_get(const kvattn_params &p, int b) {
    kv_item_facts f;
    f.s = kv_seq_get(&p, b);
    f.s_k = f.s.S + f.s.n_new - f.s.L;
    f.cache_row = p.cache_batch_idx ? p.cache_batch_idx[b] : b;
    f.G = p.num_heads / p.num_kv_heads;
    f.D = p.head_dim;
    f.scale = kv_softmax_scale(&p);
    f.plain = !(p.softcap > 0.0f) && !p.alibi_slopes;
    return f;
}
static __device__ __forceinline__ int64_t kv_out_offset(const kvattn_params &p, int b, const kv_seq &s, int G,
                                                        int kv_head, int32_t r, int64_t bs, int64_t rs, int64_t hs) {
    const int32_t i = r / G;
    const int h = kv_head * G + (r - i * G);
    return kv_row_offset(p.cu_seqlens_q != NULL, b, s.q_row0, i, bs, rs) + (int64_t)h * hs;
}
/* lse of packed row r into lse_g (p.softmax_lse, not NULL, read by the caller) */
static __device__ __forceinline__ void kv_store_lse_at(float *lse_g, const kvattn_params &p, int b, const kv_seq &s,
                                                       int G, int kv_head, int32_t r, float lse) {
    const int32_t i = r / G;
    const int h = kv_head * G + (r - i * G);
    const int64_t off = p.cu_seqlens_q ? (int64_t)h * p.lse_head_stride + (int64_t)(s.q_row0 + i) * p.lse_row_stride
                                       : (int64_t)b * p.lse_batch_stride + (int64_t)h * p.lse_head_stride +
                                             (int64_t)i * p.lse_row_stride;
    lse_g[off] = lse;
}
static __device__ __forceinline__ void kv_store_lse(const kvattn_params &p, int b, const kv_seq &s, int G,
                                                    int kv_head, int32_t r, float lse) {
    if (p.softmax_lse) kv_store_lse_at(p.softmax_lse, p, b, s, G, kv_head, r, lse);
}

/* ---- the attention kernel ------------------------------------------------------------------------------
 * Persistent over one list (decode or prefill): each block takes items in list order from a counter. Per item:
 * 1. Q tile (packed rows, rotary applied at position S + n_new - n_q + i, rounded to T) -> smem;
 * 2. KV tiles [klo/64, ceil(khi/64)) stream through NS smem stages by 16-byte cp.async (decode items: K rows by
 *    .ca, V rows by .cg, see KV_DECODE_CA), each row's address
 *    from kv_row_addresser (block-table entry read a tile ahead; rows outside [klo, khi) or with address 0 are
 *    zero-filled, never read);
 * 3. S = Q K^T by mma.sync m16n8k16 (fp32), scores scaled / capped / biased / masked in log2 units, online
 *    softmax, O += P V (P from the S registers, V by ldmatrix.trans);
 *    prefill items: 4 warps x 16 rows, each warp all 64 keys of a tile;
 *    decode items (<= 16 rows): every warp all 16 rows, warp w keys [16w, 16w + 16) of each tile, which that
 *    warp copies and waits for itself (KV_DECODE_WPIPE: no block barrier per tile), the 4 partial states merged
 *    in smem in warp order at the end;
 * 4. out = O / l, lse = ln(sum) (0 and -inf for rows without keys), or the normalized partial of a piece
 *    (then kv_attn_piece_done: the last piece of a tile merges them). */
/* The smem rows of decode items' K / V stages and Q tile for DP 128 and 256 (v46): dense rows of DP elements
 * (128-byte aligned, so that a warp's 16-byte copies fill whole lines) with the 16-byte chunk c of row r stored at
 * chunk c ^ (r & 7), which keeps the 8 rows of every ldmatrix on distinct banks (KV_DECODE_SWZ 1); 0 = rows padded
 * to DP + 8 elements, as the other kernels and head dims keep them. In a copy-only stream of the decode kernel's
 * pattern (dev/stream_test, H200) the swizzled rows took 64x4096 from 241.1 to 238.0 us and 8x8192 from 65.4 to
 * 64.7. KV_SWZ_PIN (bit 0 K, bit 1 V): the lane's swizzled ldmatrix offsets are computed once per item and held
 * in registers (an empty asm makes them opaque); unpinned, the compiler recomputed them from the thread index in
 * every tile (~40 instructions per tile and warp). Measured on the H200 (bench_cuda --quick, mean of isolated
 * calls over all 30 decode rows against the padded rows): V pinned -1.5%, worst row +0.2%; both pinned -1.3%,
 * faster at 64x4096 contiguous and 64x16384 but up to +1.8% at page size 1 and 128x2048 / 256x1024; K only -0.5%
 * (attn_notes.md, fifteenth session). */
#ifndef KV_DECODE_SWZ
#define KV_DECODE_SWZ 1
#endif
#ifndef KV_SWZ_PIN
#define KV_SWZ_PIN 2
#endif
/* dev: DP 64 swizzled too. Measured slower (dev/attn_test bench at D 64, two rounds: +8.6% mean, +21% at 64x16384,
 * -7 to -9% at 128x2048 / 256x1024); its smaller stages (64 KB + 4 KB static instead of 72 + 4) leave room for a
 * third block per SM by the sizes, so that comparison mixes two changes (attn_notes.md, fifteenth session), and the
 * split then aimed at two blocks per SM (v107, fifty-seventh session: docs/perf/s57/run4.sh times it with v107). */
#ifndef KV_DECODE_SWZ_64
#define KV_DECODE_SWZ_64 0
#endif
static __host__ __device__ constexpr bool kv_swizzled(bool decode, int dp) {
    return KV_DECODE_SWZ && decode && (dp == 128 || dp == 256 || (KV_DECODE_SWZ_64 && dp == 64));
}
/* smem row pitch (elements) of the K / V stages and the Q tile */
static __host__ __device__ constexpr int kv_smem_row(bool decode, int dp) {
    return kv_swizzled(decode, dp) ? dp : dp + 8;
}
/* Element offset of column c (a multiple of 8) of row r in a stage or Q tile of pitch ROW: the one definition of the
 * layout that the copies, the Q stores and the ldmatrix offsets share (swizzled: chunk c / 8 at (c / 8) ^ (r & 7)) */
template <bool SWZ, int ROW>
static __device__ __forceinline__ int kv_smem_at(int r, int c) {
    return r * ROW + (SWZ ? ((c >> 3) ^ (r & 7)) << 3 : c);
}
template <int DP, int NS, bool DECODE = false>
struct kv_attn_smem {
    static constexpr bool SWZ = kv_swizzled(DECODE, DP);
    static constexpr int ROW = kv_smem_row(DECODE, DP); /* padded: ldmatrix rows hit distinct banks; or swizzled */
    static constexpr int KV_ELEMS = KV_BN * ROW;
    /* DP <= 128 keeps Q in registers after the prologue, so Q borrows K stage NS-1 (first written by the
     * cp.async of iteration 0, after every warp read Q); larger DP keeps its own Q tile. */
    static constexpr bool Q_OWN = DP > 128;
    static constexpr int Q_ELEMS = Q_OWN ? KV_PREFILL_ROWS * ROW : 0;
    static constexpr int BYTES = (Q_ELEMS + 2 * NS * KV_ELEMS) * 2;
};

/* The padded head dim at which the sm90 prefill kernel (64, 128 or 256) runs the head dims of variant DP: DP 96 at
 * 128 and DP 160 - 224 at 256 (zero-filled channels; seventeenth session), 0 for DP 32 (the mma.sync kernel: not
 * measured padded to 64). attn.cu's plan and kv_part_pitch both follow it. */
static __host__ __device__ constexpr int kv_sm90_dp(int dp) {
    return dp <= 32 ? 0 : dp <= 64 ? 64 : dp <= 128 ? 128 : 256;
}
/* The pitch of a split piece's partial rows in a.part_o: a.dp, the prefill kernel's padded head dim. It equals DP
 * except in a decode kernel of a DP that the sm90 kernel pads further, when it runs the call's prefill; the other
 * DPs keep the constant (their SASS unchanged). */
template <int DP>
static __device__ __forceinline__ int kv_part_pitch(const kv_attn_args &a) {
    return kv_sm90_dp(DP) > DP ? a.dp : DP;
}
template <typename T, int DP, int NS, bool DECODE, bool EARLY = false, bool APPEND = false, bool ROPE = false>
static __device__ __forceinline__ void kv_attn_item(const kvattn_params &p, const kv_attn_args &a, const kv_item &it,
                                                    unsigned char *kv_smem_raw, uint64_t (*s_addr)[KV_BN][2],
                                                    float (*s_m)[KV_DECODE_ROWS], float (*s_l)[KV_DECODE_ROWS]) {
    typedef kv_attn_smem<DP, NS, DECODE> SM;
    constexpr int ROW = SM::ROW;
    constexpr bool SWZ = SM::SWZ;
    constexpr int DT = DP / 8;   /* n8 tiles of the output */
    constexpr int DK = DP / 16;  /* k16 steps of Q K^T */
    constexpr int CH = DP / 8;   /* 16-byte chunks per row */
    constexpr int STRIP = DECODE ? KV_DEV_STRIP : 0;
    T *sK = (T *)kv_smem_raw + SM::Q_ELEMS; /* NS stages of K, then NS of V */
    T *sV = sK + NS * SM::KV_ELEMS;
    T *sQ = SM::Q_OWN ? (T *)kv_smem_raw : sK + (NS - 1) * SM::KV_ELEMS;
    /* threadIdx.x and the stages' shared-window addresses are held in registers for the whole item (the empty asm
     * hides where they came from): otherwise ptxas reads them again inside the decode tile loop (S2R SR_TID.X, S2UR
     * SR_CgaCtaId: variable-latency reads), and ncu put ~1/8 of the loop's stall samples on the thread-index reads and
     * their first uses (v57, twentieth session) */
    int tid_ = (int)threadIdx.x;
    asm volatile("" : "+r"(tid_));
    const int tid = tid_, warp = tid >> 5, lane = tid & 31;
    const int gq = lane >> 2, tq = lane & 3; /* mma fragment row group and thread-in-quad */
    const int b = it.b, kvh = it.kv_head;
    const kv_item_facts f = kv_item_facts_get(p, b);
    uint32_t sK_u32 = kv_smem_u32(sK), sV_u32 = kv_smem_u32(sV);
    asm volatile("" : "+r"(sK_u32), "+r"(sV_u32));
    const kv_seq s = f.s;
    const int32_t s_k = f.s_k, cache_row = f.cache_row;
    const int G = f.G, D = f.D;
    const float scale = f.scale;
    const bool plain = f.plain;
    const float LOG2E = 1.4426950408889634f;
    const T *qg = (const T *)p.q;
    T *og = (T *)p.out;
        constexpr bool decode = DECODE;
        const int tile_rows = decode ? KV_DECODE_ROWS : KV_PREFILL_ROWS;

        /* 0. the KV rows' addressing, and the block-table entries of the first NS + 1 tiles read now, all at once
         * and before the Q tile's loads, so that their latencies overlap (resolved in a loop after the Q stores,
         * they were three dependent round trips per paged item: attn_notes.md, sixth session) */
        const int32_t kt_begin = it.klo / KV_BN;
        const int32_t kt_end = (int32_t)kv_ceil_div64(it.khi, KV_BN);
        const int32_t n_kt = it.khi > it.klo ? kt_end - kt_begin : 0;
        /* the row whose address this thread resolves: row tid % 64 of K or V; a warp-private pipeline (WP) resolves its
         * own rows: lane l of warp w row 16 w + l % 16 of K (l < 16) or V */
        constexpr bool WP = DECODE && KV_DECODE_WPIPE;
        static_assert(!WP || (KV_BN == 64 && KV_THREADS == 128), "warp-private pipeline: 4 warps of 16 keys");
        const int orr = WP ? warp * 16 + (lane & 15) : tid & (KV_BN - 1), owhich = WP ? lane >> 4 : tid >> 6;
        kv_row_addresser ra;
        ra.init(p, b, cache_row, kvh, owhich != 0);
        auto page_read = [&](int32_t kt) -> int32_t {
            const int32_t j = kt * KV_BN + orr;
            return ra.table && kt < kt_end && j >= it.klo && j < it.khi ? ra.page(s.L + j) : 0;
        };
        int32_t first_pages[NS + 1];
#pragma unroll
        for (int st = 0; st <= NS; st++) first_pages[st] = page_read(kt_begin + st);
        /* APPEND: an early step that appends reads the new keys from k_new / v_new (tile_row_address): this
         * thread's row 0 of them (byte address) and the bytes per new row; key index nb0 = S - L is new row 0 */
        uint64_t n_row0 = 0;
        int64_t n_rstride = 0;
        const int32_t nb0 = s.S - s.L;
        if constexpr (APPEND && !ROPE) {
            const bool v = owhich != 0;
            const int64_t bst = v ? p.vnew_batch_stride : p.knew_batch_stride, rst = v ? p.vnew_row_stride : p.knew_row_stride;
            n_row0 = (uint64_t)((const T *)(v ? p.v_new : p.k_new) +
                                kv_row_offset(p.cu_seqlens_knew != NULL, b, s.new_row0, 0, bst, rst) +
                                (int64_t)kvh * (v ? p.vnew_head_stride : p.knew_head_stride));
            n_rstride = rst * (int64_t)sizeof(T);
        } else if constexpr (APPEND) { /* ROPE: the new keys rotated into kv_rot_k (below), the values from v_new */
            const bool v = owhich != 0;
            n_row0 = v ? (uint64_t)((const T *)p.v_new +
                                    kv_row_offset(p.cu_seqlens_knew != NULL, b, s.new_row0, 0, p.vnew_batch_stride,
                                                  p.vnew_row_stride) +
                                    (int64_t)kvh * p.vnew_head_stride)
                       : (uint64_t)((const T *)kv_rot_k<T>(a) + kv_rot_row(p, b, s.new_row0, 0) + (int64_t)kvh * D);
            n_rstride = (v ? p.vnew_row_stride : (int64_t)p.num_kv_heads * D) * (int64_t)sizeof(T);
        }

        /* 1. Q tile (KV_DECODE_QASYNC: by cp.async, waited for after the prologue's copies are issued) */
        const bool q_async = DECODE && KV_DECODE_QASYNC && !p.rotary_cos && !(STRIP & 16);
        if (q_async) {
            for (int e = tid; e < tile_rows * CH; e += KV_THREADS) {
                const int rr = e / CH, c0 = (e - rr * CH) * 8;
                uint64_t src = 0; /* padding rows and channels: zeros */
                if (rr < it.nrows && c0 < D)
                    src = (uint64_t)(qg + kv_out_offset(p, b, s, G, kvh, it.row0 + rr, p.q_batch_stride,
                                                        p.q_row_stride, p.q_head_stride) + c0);
                kv_copy16_row(kv_smem_u32(sQ + kv_smem_at<SWZ, ROW>(rr, c0)), src, 0);
            }
        } else if (!(STRIP & 16)) {
            const int32_t rope_R = p.rotary_cos ? p.rotary_dim : 0;
            for (int e = tid; e < tile_rows * CH; e += KV_THREADS) {
                const int rr = e / CH, c0 = (e - rr * CH) * 8;
                T vals[8];
                const int32_t r = it.row0 + rr;
                if (rr < it.nrows && c0 < D) {
                    const int64_t qo =
                        kv_out_offset(p, b, s, G, kvh, r, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
                    *(uint4 *)vals = *(const uint4 *)(qg + qo + c0);
                    if (c0 < rope_R) kv_rope_q8<T>(p, qg + qo, c0, rope_R, s.S + s.n_new - s.n_q + r / G, vals);
                } else {
                    *(uint4 *)vals = make_uint4(0, 0, 0, 0);
                }
                *(uint4 *)(sQ + kv_smem_at<SWZ, ROW>(rr, c0)) = *(const uint4 *)vals;
            }
        }

        /* 1b. ROPE (an early step that appends with rotary): this item rotates the new keys of its own key range
         * (kv head kvh) into kv_rot_k, which its copies read (tile_row_address); the block barrier before the
         * prologue's copies orders the stores before them. Each new key of a kv head lies in one item's range, so
         * no two blocks write the same row. The item also stores them into the cache at its end, once its
         * sequence's verdict is final (below); the scheduler stores the values and the keys no decode item holds
         * (kv_sched_append). The tasks go to the last threads first: at decode shapes those copy only padding rows
         * of the Q tile above, so the two tiles' loads overlap. */
        if constexpr (APPEND && ROPE) {
            const int32_t j0 = max(it.klo, nb0), j1 = min(it.khi, nb0 + s.n_new);
            const int chd = D / 8; /* head_dim % 8 == 0 (kv_attn_supported) */
            for (int e = KV_THREADS - 1 - tid; e < (j1 - j0) * chd; e += KV_THREADS) {
                const int32_t t = j0 - nb0 + e / chd;
                const int c0 = (e % chd) * 8;
                const int32_t pos = s.S + t;
                const T *krow = (const T *)p.k_new +
                                kv_row_offset(p.cu_seqlens_knew != NULL, b, s.new_row0, t, p.knew_batch_stride,
                                              p.knew_row_stride) +
                                (int64_t)kvh * p.knew_head_stride;
                uint4 kx = *(const uint4 *)(krow + c0);
                /* (a guard only: a sequence whose new positions pass the table fails its per-sequence checks and
                 * gets no items) */
                if (!KV_DEV_ROPE_ITEMS_UNROTATED && c0 < p.rotary_dim && pos < p.rotary_max_pos)
                    kv_rope_k8<T>(p, krow, c0, pos, (T *)&kx);
                *(uint4 *)(kv_rot_k<T>(a) + kv_rot_row(p, b, s.new_row0, t) + (int64_t)kvh * D + c0) = kx;
            }
        }

        /* 2. KV tiles: each row's global address is resolved once (thread tid: row tid % 64 of K or V) into
         * s_addr one tile before its cp.async is issued; its block-table entry is read one more tile earlier
         * into a register, so neither the table read nor the address math stalls the tile being computed.
         * A warp's copy instruction covers two whole rows (full 128-byte lines, few L2 requests). The copy loop
         * is ~8 instructions per 16 bytes (v23: 52 with element offsets and the src-size operand), ~3 in the
         * warp-private pipeline since v98 (kv_copy16_kv). */
        /* (the K and V rows of a key get 0 under the same conditions: kv_copy16_kv tests the K row's address only) */
        auto tile_row_address = [&](int32_t kt, int32_t page) -> uint64_t {
            const int32_t j = kt * KV_BN + orr;
            if (APPEND && !KV_DEV_NEW_FROM_CACHE && j >= nb0) /* a new key: its k_new / v_new row */
                return kt < kt_end && j >= it.klo && j < it.khi ? n_row0 + (uint64_t)((int64_t)(j - nb0) * n_rstride) : 0;
            return kt < kt_end && j >= it.klo && j < it.khi ? ra.addr(s.L + j, page) : 0;
        };
        auto row_address = [&](int32_t kt, int slot, int32_t page) -> uint64_t {
            const uint64_t ad = tile_row_address(kt, page);
            s_addr[slot][orr][owhich] = ad;
            return ad;
        };

        /* thread tid copies chunk tid % CH of rows tid / CH + k * RSTEP when CH divides the block (DP 32, 64,
         * 128, 256: one channel and fixed smem / s_addr steps for every k), else chunk e % CH of row e / CH */
        constexpr bool EVEN = KV_THREADS % CH == 0;
        constexpr int RSTEP = EVEN ? KV_THREADS / CH : 1;
        const int my_c0 = (tid % CH) * 8, my_r0 = tid / CH;
        const uint64_t my_cmask = my_c0 < D ? ~0ull : 0ull; /* channels >= D: zeros */
        static_assert(!SWZ || (EVEN && RSTEP % 4 == 0), "swizzled stages: rows my_r0 + k RSTEP, two chunk positions");
        uint32_t d_sw[2]; /* swizzled: smem byte offsets of this thread's chunk in rows my_r0 and my_r0 + RSTEP */
#pragma unroll
        for (int j = 0; j < 2; j++) d_sw[j] = (uint32_t)kv_smem_at<true, ROW>(my_r0 + j * RSTEP, my_c0) * 2;
        /* v98, a warp-private pipeline: the byte offsets in a stage of this lane's chunk in its rows
         * rb + k, k < 8 (rows rb + k + 8 lie 8 rows further: the same chunk position), set up once per item; and
         * whether its chunk lies past D (the copies' predicate) */
        constexpr int NK8 = CH / 2 < 8 ? CH / 2 : 8;
        uint32_t d_wp[NK8];
        const uint32_t nc_wp = my_c0 < D ? 0u : 1u;
        if (WP && EVEN) {
            const int rb = warp * 16 + (lane / CH) * (CH / 2);
#pragma unroll
            for (int k = 0; k < NK8; k++) {
                /* swizzled: chunk XOR the row's r & 7, which is k & 7 when rb % 8 = 0 (CH >= 16); at CH 8 (DP 64,
                 * dev: KV_DECODE_SWZ_64) a lane's 4 rows start at rb % 8 = 0 or 4 */
                const int sw = CH >= 16 ? (k & 7) : ((rb + k) & 7);
                d_wp[k] = (uint32_t)((rb + k) * ROW * 2) +
                          (SWZ ? (uint32_t)(((my_c0 >> 3) ^ sw) << 4) : (uint32_t)my_c0 * 2);
                asm volatile("" : "+r"(d_wp[k]));
            }
        }
        /* L2 prefetch size (v45), for DP >= 96: at D 64 it was no faster and 2 - 6% slower at 8x8192 / 1x32768 */
        constexpr int PF_K = DECODE && DP >= KV_DECODE_PF_MIN_DP && (KV_DECODE_PF_KV & 1) ? KV_DECODE_PF : 0;
        constexpr int PF_V = DECODE && DP >= KV_DECODE_PF_MIN_DP && (KV_DECODE_PF_KV & 2) ? KV_DECODE_PF : 0;
        auto load_tile = [&](int slot, int stage) {
            const uint32_t dk = sK_u32 + (uint32_t)(stage * SM::KV_ELEMS * sizeof(T));
            const uint32_t dv = sV_u32 + (uint32_t)(stage * SM::KV_ELEMS * sizeof(T));
            /* 16 bytes of a K row and of a V row, at byte offset d of their stages (a row address 0: zeros). The
             * not-EVEN branches copy without it: their selects, passed as its arguments, are evaluated before the K
             * copy, which reordered the DP 224 kernels' copy loop (nineteenth session; the EVEN ones' SASS is equal) */
            auto copy_kv = [&](uint32_t d, uint64_t k_row, uint64_t v_row, uint64_t off) {
                kv_copy16_row<DECODE && (KV_DECODE_CA & 1), PF_K>(dk + d, k_row, off);
                kv_copy16_row<DECODE && (KV_DECODE_CA & 2), PF_V>(dv + d, v_row, off);
            };
            if (WP && EVEN) { /* this warp's 16 rows: lane l copies chunk l % CH of rows rb + k */
                static_assert(!WP || !SWZ || CH >= 8, "swizzled rows: at least 8 chunks per row (d_wp)");
                const int rb = warp * 16 + (lane / CH) * (CH / 2);
                /* the rows' addresses of a batch are read before its copies: the copies' asm (a memory clobber) keeps
                 * every smem read after the copy before it, so one address read per pair made a chain of LDS ->
                 * use -> copy -> LDS (a short-scoreboard wait per pair; v57, twentieth session) */
                constexpr int NB = KV_DECODE_ABATCH < 1 ? 1 : KV_DECODE_ABATCH < CH / 2 ? KV_DECODE_ABATCH : CH / 2;
                static_assert(!(WP && EVEN) || (CH / 2) % NB == 0, "KV_DECODE_ABATCH: a divisor of the rows per lane");
#pragma unroll
                for (int k0 = 0; k0 < CH / 2; k0 += NB) {
                    ulonglong2 kva[NB];
#pragma unroll
                    for (int j = 0; j < NB; j++) kva[j] = *(const ulonglong2 *)s_addr[slot][rb + k0 + j];
#pragma unroll
                    for (int j = 0; j < NB; j++) {
                        const int k = k0 + j;
                        const uint32_t d = d_wp[k & 7] + (uint32_t)((k >> 3) * 8 * ROW * 2);
                        kv_copy16_kv<DECODE && (KV_DECODE_CA & 1), PF_K, DECODE && (KV_DECODE_CA & 2), PF_V>(
                            dk + d, dv + d, kva[j].x, kva[j].y, (uint64_t)my_c0 * 2, nc_wp);
                    }
                }
            } else if (WP) {
#pragma unroll
                for (int k = 0; k < CH / 2; k++) {
                    const int e = lane + 32 * k;
                    const int rr = e / CH, c0 = (e - rr * CH) * 8, row = warp * 16 + rr;
                    const ulonglong2 kva = *(const ulonglong2 *)s_addr[slot][row];
                    const uint32_t so = (uint32_t)(row * ROW + c0) * 2;
                    kv_copy16_row<DECODE && (KV_DECODE_CA & 1), PF_K>(dk + so, c0 < D ? kva.x : 0, (uint64_t)c0 * 2);
                    kv_copy16_row<DECODE && (KV_DECODE_CA & 2), PF_V>(dv + so, c0 < D ? kva.y : 0, (uint64_t)c0 * 2);
                }
            } else if (EVEN) {
#pragma unroll
                for (int k = 0; k < KV_BN / RSTEP; k++) {
                    const ulonglong2 kva = *(const ulonglong2 *)s_addr[slot][my_r0 + k * RSTEP]; /* K, V rows */
                    /* swizzled: rows my_r0 + k RSTEP alternate between two chunk positions (RSTEP 4 or 8) */
                    const uint32_t d = SWZ ? d_sw[k & 1] + (uint32_t)((k & ~1) * RSTEP * ROW * 2)
                                           : (uint32_t)(my_r0 * ROW + my_c0) * 2 + k * RSTEP * ROW * 2;
                    copy_kv(d, kva.x & my_cmask, kva.y & my_cmask, (uint64_t)my_c0 * 2);
                }
            } else {
#pragma unroll
                for (int k = 0; k < KV_BN * CH / KV_THREADS; k++) {
                    const int e = tid + k * KV_THREADS;
                    const int rr = e / CH, c0 = (e - rr * CH) * 8;
                    const ulonglong2 kva = *(const ulonglong2 *)s_addr[slot][rr];
                    const uint32_t so = (uint32_t)(rr * ROW + c0) * 2;
                    /* (the decode copy forms of the EVEN path: until the seventeenth session these copies were plain
                     * .cg without a prefetch size; with them head dim 96 decodes 4.4% faster, 192 3.0%) */
                    kv_copy16_row<DECODE && (KV_DECODE_CA & 1), PF_K>(dk + so, c0 < D ? kva.x : 0, (uint64_t)c0 * 2);
                    kv_copy16_row<DECODE && (KV_DECODE_CA & 2), PF_V>(dv + so, c0 < D ? kva.y : 0, (uint64_t)c0 * 2);
                }
            }
        };
#pragma unroll
        for (int st = 0; st < NS; st++) row_address(kt_begin + st, st, first_pages[st]);
        int32_t next_page = first_pages[NS]; /* of the tile whose offsets are resolved next */
        __syncthreads(); /* the first offsets (and Q, unless it comes by cp.async) in smem */
        const int wrow0 = decode ? 0 : warp * 16;
        /* swizzled stages: this lane's ldmatrix addresses in bytes from a stage's (or Q's) start. Lane l reads chunk
         * 2 kk + (l >> 4) of Q row l & 15 and of V row key0 + (l & 7) + ((l >> 3) & 1) 8, chunk 2 kk + ((l >> 3) & 1)
         * of K row key0 + (l & 7) + (l >> 4) 8 (+ 16 np), each row = l (mod 8): stored at chunk XOR (l & 7), which
         * depends on kk through kk & 3 only (kk >> 2 adds 128 bytes) */
        uint32_t q_sw[4], k_sw[4], v_sw[4];
        if (SWZ) {
            const int k_row = warp * 16 + (lane & 7) + ((lane >> 4) << 3); /* key0 = 16 warp */
            const int v_row = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                q_sw[j] = (uint32_t)kv_smem_at<true, ROW>(lane & 15, (2 * j + (lane >> 4)) * 8) * 2;
                k_sw[j] = (uint32_t)kv_smem_at<true, ROW>(k_row, (2 * j + ((lane >> 3) & 1)) * 8) * 2;
                v_sw[j] = (uint32_t)kv_smem_at<true, ROW>(v_row, (2 * j + (lane >> 4)) * 8) * 2;
#if KV_SWZ_PIN & 1
                asm volatile("" : "+r"(k_sw[j]));
#endif
#if KV_SWZ_PIN & 2
                asm volatile("" : "+r"(v_sw[j]));
#endif
            }
        }
        auto q_addr = [&](int kk) {
            return SWZ ? kv_smem_u32(sQ) + q_sw[kk & 3] + (kk >> 2) * 128
                       : kv_smem_u32(sQ + (wrow0 + (lane & 15)) * ROW + kk * 16 + (lane >> 4) * 8);
        };
        uint32_t qf[DP <= 128 ? DK : 1][4]; /* DP <= 128: Q's fragments held in registers for the whole item */
        auto load_qf = [&]() {
            if (DP <= 128) {
#pragma unroll
                for (int kk = 0; kk < DK; kk++) kv_ldmatrix_x4(q_addr(kk), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
            }
        };
        if (!q_async) load_qf();
#pragma unroll
        for (int st = 0; st < NS - 1; st++) {
            if (st < n_kt) load_tile(st, st);
            kv_cp_async_commit();
        }
        if (q_async) { /* Q came with the first tile's group: every thread's copies of it, then the fragments */
            kv_cp_async_wait<NS - 2>();
            __syncthreads();
            load_qf();
        }
        /* WP: Q lives in K stage NS - 1 (rows 0 - 15: warp 0's), which warp 0 first writes at t = 0 */
        if (WP && !SM::Q_OWN) __syncthreads();

        /* per-thread rows: fragment rows gq and gq + 8 of this warp's 16 */
        int32_t vlo[2], vhi[2], qkey[2];
        float slope[2];
#pragma unroll
        for (int h2 = 0; h2 < 2; h2++) {
            const int rr = wrow0 + gq + 8 * h2;
            const int32_t r = it.row0 + rr;
            vlo[h2] = 0;
            vhi[h2] = 0;
            qkey[h2] = 0;
            slope[h2] = 0.0f;
            if (rr < it.nrows) {
                const int32_t i = r / G;
                const kv_range vr = kv_visible_keys(i, s.n_q, s_k, p.causal, p.window_left, p.window_right);
                vlo[h2] = max(vr.lo, it.klo);
                vhi[h2] = min(vr.hi, it.khi);
                qkey[h2] = i + s_k - s.n_q;
                if (p.alibi_slopes)
                    slope[h2] = p.alibi_slopes[(int64_t)b * p.alibi_batch_stride + kvh * G + (r - i * G)];
            }
        }
        float o[DT][4];
#pragma unroll
        for (int d = 0; d < DT; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
        float m2[2] = {-CUDART_INF_F, -CUDART_INF_F}; /* running max, log2 units */
        float l[2] = {0.0f, 0.0f};                    /* this thread's part of the row sums */

        /* 3. main loop */
        constexpr int NT = decode ? 2 : 8;     /* n8 key tiles per warp */
        const int key0 = decode ? warp * 16 : 0;
        const unsigned long long t_start = KV_TL_NOW();
        (void)t_start;
        for (int32_t t = 0; t < n_kt; t++) {
            kv_cp_async_wait<NS - 2>();
            if (WP) __syncwarp(); /* this warp's rows only: its own copies, its own stages' rows */
            else __syncthreads();
            if (t == 0) KV_TL_ADD(DECODE ? 2 : 1, 5, KV_TL_NOW() - t_start);
            {
                const int32_t nt_ = t + NS - 1;
                if (nt_ < n_kt) load_tile(nt_ % NS, nt_ % NS);
                kv_cp_async_commit();
                if (t + NS < n_kt) { /* into the slot of tile t (issued long ago); the page read one tile ahead */
                    row_address(kt_begin + t + NS, t % NS, next_page);
                    next_page = page_read(kt_begin + t + NS + 1);
                }
            }
            const T *tk = sK + (t % NS) * SM::KV_ELEMS;
            const T *tv = sV + (t % NS) * SM::KV_ELEMS;
            const uint32_t tk_u32 = sK_u32 + (uint32_t)((t % NS) * SM::KV_ELEMS * sizeof(T));
            const uint32_t tv_u32 = sV_u32 + (uint32_t)((t % NS) * SM::KV_ELEMS * sizeof(T));
            const int32_t jt = (kt_begin + t) * KV_BN + key0; /* key index of this warp's first column */

            float sc[8][4];
#pragma unroll
            for (int n = 0; n < 8; n++) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
            /* QK2 (v103, KV_DECODE_QK2): the odd k-steps accumulate apart, summed after the loop (four chains of
             * DK / 2 dependent mma instead of two of DK); DP 128 only (DP 96 and 256 spill with it) */
            constexpr bool QK2 = DECODE && NT == 2 && DP == 128 && KV_DECODE_QK2;
            float scb[2][4];
#pragma unroll
            for (int n = 0; n < 2; n++) scb[n][0] = scb[n][1] = scb[n][2] = scb[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < (STRIP & 1 ? 0 : DK); kk++) {
                uint32_t af[4];
                if (DP <= 128) {
                    af[0] = qf[kk][0]; af[1] = qf[kk][1]; af[2] = qf[kk][2]; af[3] = qf[kk][3];
                } else {
                    kv_ldmatrix_x4(q_addr(kk), af[0], af[1], af[2], af[3]);
                }
#pragma unroll
                for (int np = 0; np < 4; np++) {
                    if (np * 2 < NT) {
                        uint32_t b0, b1, b2, b3;
                        const int key = key0 + np * 16 + (lane & 7) + ((lane >> 4) << 3);
                        if (SWZ)
                            kv_ldmatrix_x4(tk_u32 + k_sw[kk & 3] + (kk >> 2) * 128 + np * 16 * ROW * 2, b0, b1,
                                           b2, b3);
                        else
                            kv_ldmatrix_x4(kv_smem_u32(tk + key * ROW + kk * 16 + ((lane >> 3) & 1) * 8), b0, b1, b2, b3);
                        if (QK2 && (kk & 1)) {
                            kv_mma<T>::run(scb[0], af, b0, b1);
                            kv_mma<T>::run(scb[1], af, b2, b3);
                        } else {
                            kv_mma<T>::run(sc[2 * np], af, b0, b1);
                            kv_mma<T>::run(sc[2 * np + 1], af, b2, b3);
                        }
                    }
                }
            }
            if (QK2) {
#pragma unroll
                for (int n = 0; n < 2; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) sc[n][e] += scb[n][e];
            }
            /* scores -> log2 units, masks */
            if (!(STRIP & 2)) {
            const bool full = __all_sync(0xffffffffu, jt >= vlo[0] && jt + NT * 8 <= vhi[0] && jt >= vlo[1] &&
                                                          jt + NT * 8 <= vhi[1]);
            /* one branch per form for the whole tile (v57, twentieth session): the form before tested plain, then the
             * mask, per element, which spread the loop's code over more lines (ncu: no_instruction stalls after those
             * branches) */
            if (plain) {
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (n < NT) sc[n][e] *= scale * LOG2E;
            } else {
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        if (n < NT) {
                            const int32_t j = jt + n * 8 + tq * 2 + (e & 1);
                            float x = kv_softcap(sc[n][e] * scale, p.softcap);
                            if (p.alibi_slopes) x += kv_alibi_bias(slope[e >> 1], qkey[e >> 1], j);
                            sc[n][e] = x * LOG2E;
                        }
                    }
            }
            if (!full) {
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int32_t j = jt + n * 8 + tq * 2 + (e & 1);
                        if (n < NT && (j < vlo[e >> 1] || j >= vhi[e >> 1])) sc[n][e] = -CUDART_INF_F;
                    }
            }
            /* online softmax */
#pragma unroll
            for (int h2 = 0; h2 < 2; h2++) {
                float mx = m2[h2];
#pragma unroll
                for (int n = 0; n < 8; n++)
                    if (n < NT) mx = fmaxf(mx, fmaxf(sc[n][2 * h2], sc[n][2 * h2 + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float msafe = mx == -CUDART_INF_F ? 0.0f : mx;
                const float corr = kv_exp2(m2[h2] - msafe); /* m2 = -inf: 0 */
                m2[h2] = mx;
                float sum = 0.0f;
#pragma unroll
                for (int n = 0; n < 8; n++) {
                    if (n < NT) {
                        sc[n][2 * h2] = kv_exp2(sc[n][2 * h2] - msafe);
                        sc[n][2 * h2 + 1] = kv_exp2(sc[n][2 * h2 + 1] - msafe);
                        sum += sc[n][2 * h2] + sc[n][2 * h2 + 1];
                    }
                }
                l[h2] = l[h2] * corr + sum;
#pragma unroll
                for (int d = 0; d < DT; d++) {
                    o[d][2 * h2] *= corr;
                    o[d][2 * h2 + 1] *= corr;
                }
            }
            } /* STRIP & 2 (dev: not indented, so that the shipped code reads as before) */
            /* O += P V */
#pragma unroll
            for (int kc = 0; kc < 4; kc++) {
                if (kc * 2 < NT && !(STRIP & 4)) {
                    uint32_t pa[4];
                    pa[0] = kv_mma<T>::pack(sc[2 * kc][0], sc[2 * kc][1]);
                    pa[1] = kv_mma<T>::pack(sc[2 * kc][2], sc[2 * kc][3]);
                    pa[2] = kv_mma<T>::pack(sc[2 * kc + 1][0], sc[2 * kc + 1][1]);
                    pa[3] = kv_mma<T>::pack(sc[2 * kc + 1][2], sc[2 * kc + 1][3]);
                    const int key = key0 + kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
                    for (int dn = 0; dn < DT / 2; dn++) {
                        uint32_t b0, b1, b2, b3;
                        if (SWZ)
                            kv_ldmatrix_x4_trans(tv_u32 + v_sw[dn & 3] + (dn >> 2) * 128 + kc * 16 * ROW * 2, b0,
                                                 b1, b2, b3);
                        else
                            kv_ldmatrix_x4_trans(kv_smem_u32(tv + key * ROW + dn * 16 + (lane >> 4) * 8), b0, b1, b2, b3);
                        kv_mma<T>::run(o[2 * dn], pa, b0, b1);
                        kv_mma<T>::run(o[2 * dn + 1], pa, b2, b3);
                    }
                }
            }
        }
        /* early start (decode items): whether the sequence's output may be written is known only once the
         * scheduler's checks end; its seq_ok byte is read after the main loop (the checks ended long before, in
         * practice) and read again until it no longer reads KV_SEQ_PENDING. Nothing of it is live in the main
         * loop (attn_notes.md, eighth session: the loop's code must not change) */
        const bool gate = EARLY && it.part < 0;
        int verdict = gate ? kv_ld_relaxed_s8(a.seq_ok + b) : 1; /* in flight during the merge's first steps */
        kv_cp_async_wait<0>();
        __syncthreads(); /* all warps done with the stages: they may be reused below */
        if (STRIP & 8) return;

        /* 4. epilogue */
#pragma unroll
        for (int h2 = 0; h2 < 2; h2++) {
            l[h2] += __shfl_xor_sync(0xffffffffu, l[h2], 1);
            l[h2] += __shfl_xor_sync(0xffffffffu, l[h2], 2);
        }
        /* decode merge (v48): the warps' O rows in fp32 at a pitch of DP + 8 floats (a half-warp's 8-byte stores on
         * distinct banks; DP floats put the 8 rows of a fragment on the same banks), only the item's rows; then a
         * thread per (row, 4 channels) of the item's rows (one pass for 4 rows of D 128: the old pass went over all
         * 16 rows by channel pairs, 8 steps) with the row's lse (or a piece's (m, log2 l)) computed where it is
         * stored. The same sums in the same order as before: the same bits. */
        constexpr int SF = DP + 8;
        float *stage_f = (float *)(sK); /* [4 warps][16 rows][SF] */
        if (decode) {
            static_assert(4 * KV_DECODE_ROWS * SF * 4 <= 2 * NS * SM::KV_ELEMS * 2,
                          "the decode merge fits in the stages");
#pragma unroll
            for (int h2 = 0; h2 < 2; h2++) {
                const int rr = gq + 8 * h2;
                if (tq == 0) {
                    s_m[warp][rr] = m2[h2];
                    s_l[warp][rr] = l[h2];
                }
                if (rr < it.nrows) {
#pragma unroll
                    for (int d = 0; d < DT; d++)
                        *(float2 *)(stage_f + (warp * 16 + rr) * SF + d * 8 + tq * 2) =
                            make_float2(o[d][2 * h2], o[d][2 * h2 + 1]);
                }
            }
            if (gate) verdict = kv_seq_verdict(a.seq_ok, b, verdict);
            __syncthreads();
            constexpr int C4 = DP / 4;
            for (int e = tid; e < (STRIP & 64 ? 0 : it.nrows * C4); e += KV_THREADS) {
                const int rr = e / C4, c = (e - rr * C4) * 4;
                float mx = -CUDART_INF_F;
#pragma unroll
                for (int w = 0; w < 4; w++) mx = fmaxf(mx, s_m[w][rr]);
                const float msafe = mx == -CUDART_INF_F ? 0.0f : mx;
                float L = 0.0f;
                float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    const float f = kv_exp2(s_m[w][rr] - msafe);
                    L += s_l[w][rr] * f;
                    const float4 x = *(const float4 *)(stage_f + (w * 16 + rr) * SF + c);
                    v.x += x.x * f;
                    v.y += x.y * f;
                    v.z += x.z * f;
                    v.w += x.w * f;
                }
                const float inv = L > 0.0f ? 1.0f / L : 0.0f;
                const int32_t r = it.row0 + rr;
                if (it.part >= 0) {
                    *(float4 *)(a.part_o + (int64_t)(it.part + rr) * kv_part_pitch<DP>(a) + c) =
                        make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
                    if (c == 0) a.part_ml[it.part + rr] = kv_piece_ml(mx, L);
                } else if (!gate || verdict == 1) {
                    const int64_t oo =
                        kv_out_offset(p, b, s, G, kvh, r, p.out_batch_stride, p.out_row_stride, p.out_head_stride);
                    if (c < D) { /* D is a multiple of 8: all four channels exist */
                        T q4[4];
                        kv_out_from_float(&q4[0], v.x * inv);
                        kv_out_from_float(&q4[1], v.y * inv);
                        kv_out_from_float(&q4[2], v.z * inv);
                        kv_out_from_float(&q4[3], v.w * inv);
                        *(uint32_t *)(og + oo + c) = *(const uint32_t *)&q4[0];
                        *(uint32_t *)(og + oo + c + 2) = *(const uint32_t *)&q4[2];
                    }
                    if (c == 0)
                        kv_store_lse(p, b, s, G, kvh, r,
                                     L > 0.0f ? (mx + log2f(L)) * 0.69314718055994531f : -CUDART_INF_F);
                }
            }
        } else {
#pragma unroll
            for (int h2 = 0; h2 < 2; h2++) {
                const int rr = wrow0 + gq + 8 * h2;
                if (rr >= it.nrows) continue;
                const int32_t r = it.row0 + rr;
                const float inv = l[h2] > 0.0f ? 1.0f / l[h2] : 0.0f;
                const float lse = l[h2] > 0.0f ? (m2[h2] + log2f(l[h2])) * 0.69314718055994531f : -CUDART_INF_F;
                if (it.part >= 0) {
                    float *po = a.part_o + (int64_t)(it.part + rr) * DP;
#pragma unroll
                    for (int d = 0; d < DT; d++)
                        *(float2 *)(po + d * 8 + tq * 2) = make_float2(o[d][2 * h2] * inv, o[d][2 * h2 + 1] * inv);
                    if (tq == 0) a.part_ml[it.part + rr] = kv_piece_ml(m2[h2], l[h2]);
                } else {
                    const int64_t oo =
                        kv_out_offset(p, b, s, G, kvh, r, p.out_batch_stride, p.out_row_stride, p.out_head_stride);
#pragma unroll
                    for (int d = 0; d < DT; d++) {
                        const int c = d * 8 + tq * 2;
                        if (c < D) {
                            T pair[2];
                            kv_out_from_float(&pair[0], o[d][2 * h2] * inv);
                            kv_out_from_float(&pair[1], o[d][2 * h2 + 1] * inv);
                            *(uint32_t *)(og + oo + c) = *(const uint32_t *)pair;
                        }
                    }
                    if (tq == 0) kv_store_lse(p, b, s, G, kvh, r, lse);
                }
            }
        }
        /* ROPE: this item's rotated new keys (1b) into the cache, if its sequence passed every check. Not in the tile
         * loop: there, store code cost 2 - 10% even where it did not run (v85, attn_notes.md thirty-fourth session) */
        if constexpr (APPEND && ROPE) {
            const int32_t j0 = max(it.klo, nb0), j1 = min(it.khi, nb0 + s.n_new);
            if (j1 > j0 && !KV_DEV_ROPE_NO_ITEM_STORE) {
                const int v = KV_DEV_ROPE_STORE_UNGATED ? 1
                              : gate                      ? verdict
                                                          : kv_seq_verdict(a.seq_ok, b, kv_ld_relaxed_s8(a.seq_ok + b));
                const int chd = D / 8;
                for (int e = tid; v == 1 && e < (j1 - j0) * chd; e += KV_THREADS) {
                    const int32_t t = j0 - nb0 + e / chd;
                    const int c0 = (e % chd) * 8;
                    const int64_t ko = kv_cache_offset(&p, b, cache_row, s.S + t, kvh, p.k_batch_stride,
                                                       p.k_row_stride, p.k_head_stride);
                    if (ko >= 0)
                        *(uint4 *)((T *)p.k_cache + ko + c0) =
                            *(const uint4 *)(kv_rot_k<T>(a) + kv_rot_row(p, b, s.new_row0, t) + (int64_t)kvh * D + c0);
                }
            }
        }
}

#define KV_COMBINE_FEW 8 /* a merge loads the first channels of its first this many splits with their (m, log2 l) */
/* Whether a kernel's merge loads those early (v47): the 8 float4s stay live through the inlined merge and the
 * ptxas allocation of the whole kernel follows. Measured on the H200 (seventeenth session, causal prefill, 16k
 * tokens, 16x1024 / 4x4096 / 1x16384, the mma.sync kernel): without the early loads DP 32 -7 to -9%, DP 64 -13 to
 * -19%, DP 160 -3 to -4%, DP 224 -8 to -9%, DP 256 -12 to -14%, but DP 96 +8 to +10% and DP 128 +3 to +5%; DP 192
 * not measured (its neighbours decide). Decode kernels: kept (v47's measurement). */
static __host__ __device__ constexpr int kv_combine_few(bool decode, int dp) {
    return decode || dp == 96 || dp == 128 ? KV_COMBINE_FEW : 0;
}
/* ---- combine: merge the pieces of a split tile in split order ------------------------------------------
 * For packed row rr of task cb, from each piece's (m_s, g_s = log2 l_s) (kv_piece_ml), M = max_s m_s:
 * W_s = exp2(m_s - M + g_s), W = sum_s W_s, lse = (M + log2 W) ln 2, out = sum_s (W_s / W) * out_s, summed in
 * split order s = 0, 1, ... whichever block runs it (deterministic). One warp per row: lanes over splits (fixed
 * shuffle tree) for the lse and the weights, then lanes over 4-channel groups, each lane reading one float4 of
 * every split with the loads of 8 splits in flight (the merge is latency-bound: 32 splits cost 4 round trips,
 * not 32). The partials are read from L2 (__ldcg): other blocks wrote them in this kernel. */
template <typename T, int FEW = KV_COMBINE_FEW, int TB = 0, int NT = 0>
static __device__ void kv_combine_task(const kvattn_params &p, const kv_attn_args &a, const kv_combine &cb) {
    /* the group of threads [TB, TB + NT) runs it (NT = 0: the whole block) */
    const int warp = (threadIdx.x - TB) >> 5, lane = threadIdx.x & 31, nwarps = (NT ? NT : blockDim.x) >> 5;
    const int G = p.num_heads / p.num_kv_heads, D = p.head_dim, DP = a.dp;
    T *og = (T *)p.out;
    const kv_seq s = kv_seq_get(&p, cb.b);
    const int ns = cb.nsplit;
#ifdef KVATTN_TIMELINE /* dev: thread 0's merge in SM cycles, to its lse, to its first stores (of that, until the first
                       * partials were in), the rest, summed with a count into kv_tl[0][5..9] (attn_notes.md, 24th);
                       * from the lse to the output's offset and to all first partials in, into kv_tl_merge (25th) */
    long long tl_a = clock64(), tl_b = 0, tl_x = 0, tl_o = 0, tl_c = 0, tl_y = 0;
#endif
    for (int rr = warp; rr < cb.nrows; rr += nwarps) {
        const float2 *ml_s = a.part_ml + cb.part_base + rr; /* split k at ml_s[k * nrows] */
        const float2 first = lane < ns ? __ldcg(ml_s + (int64_t)lane * cb.nrows) : make_float2(-CUDART_INF_F, 0.0f);
        /* the lane's first four channels of the first FEW splits, loaded in the (m, log2 l) round trip */
        const float *po_row = a.part_o + ((int64_t)cb.part_base + rr) * DP;
        float4 xf[FEW > 0 ? FEW : 1];
#pragma unroll
        for (int k = 0; k < FEW; k++)
            if (k < ns)
                xf[k] = __ldcg((const float4 *)(po_row + (int64_t)k * cb.nrows * DP + (lane * 4 < D ? lane * 4 : 0)));
        float mx = first.x;
        for (int k = lane + 32; k < ns; k += 32) mx = fmaxf(mx, __ldcg(ml_s + (int64_t)k * cb.nrows).x);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float msafe = mx == -CUDART_INF_F ? 0.0f : mx;
        float L = lane < ns ? exp2f(first.x - msafe + first.y) : 0.0f; /* 0 for an empty piece: m = -inf */
        for (int k = lane + 32; k < ns; k += 32) {
            const float2 ml = __ldcg(ml_s + (int64_t)k * cb.nrows);
            L += exp2f(ml.x - msafe + ml.y);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
        const float lg = L > 0.0f ? log2f(L) : 0.0f;
        const float lse = L > 0.0f ? (msafe + lg) * 0.69314718055994531f : -CUDART_INF_F;
#ifdef KVATTN_TIMELINE
        if (threadIdx.x == 0 && tl_b == 0) tl_b = __float_as_int(lse) != 0x7fc00001 ? clock64() : 1;
        if (FEW > 0 && threadIdx.x == 0 && tl_x == 0) /* the first partial's channels, loaded with (m, log2 l) */
            tl_x = __float_as_int(xf[0].x) != 0x7fc00001 ? clock64() : 1;
        if (FEW > 0 && threadIdx.x == 0 && tl_y == 0) { /* all of them (the splits < min(ns, FEW)) */
            float all = 0.0f;
#pragma unroll
            for (int k = 0; k < FEW; k++)
                if (k < ns) all += xf[k].x;
            tl_y = __float_as_int(all) != 0x7fc00001 ? clock64() : 1;
        }
#endif
        const int32_t r = cb.row0 + rr;
        const int64_t oo =
            kv_out_offset(p, cb.b, s, G, cb.kv_head, r, p.out_batch_stride, p.out_row_stride, p.out_head_stride);
#ifdef KVATTN_TIMELINE /* the output's offset: the sequence's first row and the output's strides (kernel parameters) */
        if (threadIdx.x == 0 && tl_o == 0) tl_o = oo != -12345 ? clock64() : 1;
#endif
        for (int c0 = lane * 4; c0 - lane * 4 < D; c0 += 128) { /* warp-uniform trip count (shuffles inside) */
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (int k0 = 0; k0 < ns; k0 += 32) {
                /* lane k holds the weight of split k0 + k */
                float w_mine = 0.0f;
                if (L > 0.0f && k0 + lane < ns) {
                    const float2 ml = k0 == 0 ? first : __ldcg(ml_s + (int64_t)(k0 + lane) * cb.nrows);
                    w_mine = exp2f(ml.x - msafe + ml.y - lg);
                }
                const int kn = min(32, ns - k0);
                const float *po = po_row + (int64_t)k0 * cb.nrows * DP + (c0 < D ? c0 : 0);
                int k1 = 0;
                if (k0 == 0) { /* splits 0 .. FEW - 1 from xf (loaded again for the next 128 channels) */
                    if (c0 != lane * 4) {
#pragma unroll
                        for (int k = 0; k < FEW; k++)
                            if (k < kn) xf[k] = __ldcg((const float4 *)(po + (int64_t)k * cb.nrows * DP));
                    }
#pragma unroll
                    for (int k = 0; k < FEW; k++) {
                        if (k < kn) {
                            const float w = __shfl_sync(0xffffffffu, w_mine, k);
                            v.x += w * xf[k].x;
                            v.y += w * xf[k].y;
                            v.z += w * xf[k].z;
                            v.w += w * xf[k].w;
                        }
                    }
                    k1 = FEW;
                }
#pragma unroll 8
                for (int k = k1; k < kn; k++) {
                    const float w = __shfl_sync(0xffffffffu, w_mine, k);
                    const float4 x = __ldcg((const float4 *)(po + (int64_t)k * cb.nrows * DP));
                    v.x += w * x.x;
                    v.y += w * x.y;
                    v.z += w * x.z;
                    v.w += w * x.w;
                }
            }
#ifdef KVATTN_TIMELINE
            if (threadIdx.x == 0 && tl_c == 0) tl_c = __float_as_int(v.x) != 0x7fc00001 ? clock64() : 1;
#endif
            if (c0 < D) { /* D is a multiple of 8: all four channels exist */
                T q4[4];
                kv_out_from_float(&q4[0], v.x);
                kv_out_from_float(&q4[1], v.y);
                kv_out_from_float(&q4[2], v.z);
                kv_out_from_float(&q4[3], v.w);
                *(uint32_t *)(og + oo + c0) = *(const uint32_t *)&q4[0];
                *(uint32_t *)(og + oo + c0 + 2) = *(const uint32_t *)&q4[2];
            }
        }
        if (lane == 0) kv_store_lse(p, cb.b, s, G, cb.kv_head, r, lse);
    }
#ifdef KVATTN_TIMELINE
    if (threadIdx.x == 0 && tl_c) {
        const long long tl_d = clock64();
        atomicAdd(&kv_tl[0][5], (unsigned long long)(tl_b - tl_a));
        atomicAdd(&kv_tl[0][6], (unsigned long long)(tl_c - tl_b));
        atomicAdd(&kv_tl[0][9], (unsigned long long)(tl_x ? tl_x - tl_b : 0)); /* of those: until the partials
                                                                                 * were in (0 where FEW is 0) */
        atomicAdd(&kv_tl[0][7], (unsigned long long)(tl_d - tl_c));
        atomicAdd(&kv_tl[0][8], 1ull);
        atomicAdd(&kv_tl_merge[0], (unsigned long long)(tl_o - tl_b));
        atomicAdd(&kv_tl_merge[1], 1ull);
        atomicAdd(&kv_tl_merge[2], (unsigned long long)(tl_y ? tl_y - tl_b : 0));
    }
#endif
}

/* After a block wrote the partial rows of a split piece: count the piece, and if it was the task's last,
 * merge the task here (no separate combine launch; the merge of a long sequence starts as soon as its pieces
 * are done). The group's first thread (TB) alone synchronizes (the pattern of a CUTLASS semaphore): the barrier
 * orders every thread's partial writes before its acq_rel count (a release is cumulative over what the barrier ordered before it), the
 * count's acquire half orders the other pieces' writes (released by their counts) before the merge, and the second
 * barrier passes that on to the block's other threads. The task's record and seq_ok are read in the same round
 * trip as the count. (Until the sixteenth session: a fence.sc by every thread before the count and again before
 * the merge, and the record read after the count: ~4 more dependent round trips to L2 at the end of every split
 * piece, when the memory system is busiest; attn_notes.md.) Whole block (NT = 0), or the threads [TB, TB + NT)
 * with named barrier BAR (the consumer warpgroups of kv_prefill_ws_kernel); ends with a barrier. */
template <typename T, bool EARLY = false, int FEW = KV_COMBINE_FEW, int TB = 0, int NT = 0, int BAR = 0>
static __device__ void kv_attn_piece_done(const kvattn_params &p, const kv_attn_args &a, int32_t comb, int b,
                                          int *s_flag) {
    __shared__ kv_combine s_cb;
    auto sync = [] {
        if constexpr (NT != 0) asm volatile("bar.sync %0, %1;\n" ::"n"(BAR), "n"(NT) : "memory");
        else __syncthreads();
    };
    sync();
    if (threadIdx.x == TB) {
        const int4 *rec = (const int4 *)(a.combine + comb); /* written before the lists were released */
        const int4 r0 = __ldcg(rec), r1 = __ldcg(rec + 1);
        const int v = EARLY ? kv_ld_relaxed_s8(a.seq_ok + b) : 1; /* early start: merge only a sequence that passed */
        const int32_t done = kv_atom_add_acq_rel(&a.comb_done[comb], 1) + 1;
        kv_combine t; /* (the fields the merge uses; the record's padding is not read) */
        t.b = r0.x;
        t.kv_head = r0.y;
        t.row0 = r0.z;
        t.nrows = r0.w;
        t.part_base = r1.x;
        t.nsplit = r1.y;
        t.pad0 = t.pad1 = 0;
        s_cb = t;
        *s_flag = done == t.nsplit && (!EARLY || kv_seq_verdict(a.seq_ok, b, v) == 1);
    }
    sync();
    if (*s_flag && !(KV_DEV_STRIP & 128)) {
        /* timeline builds (nineteenth session): thread 0's time for the merge; with KV_TL_MERGE_AGAIN the same merge
         * runs again (warm code, same data). Elsewhere KV_TL_NOW is 0 and KV_TL_ADD nothing. */
        const unsigned long long m0 = KV_TL_NOW();
        kv_combine_task<T, FEW, TB, NT>(p, a, s_cb);
        const unsigned long long m1 = KV_TL_NOW();
#if defined(KVATTN_TIMELINE) && defined(KV_TL_MERGE_AGAIN)
        kv_combine_task<T, FEW, TB, NT>(p, a, s_cb); /* the same output again: only its time differs */
#endif
        KV_TL_ADD(0, 10, m1 - m0);
        KV_TL_ADD(0, 11, KV_TL_NOW() - m1);
        KV_TL_ADD(0, 12, 1);
        (void)m0;
        (void)m1;
    }
    sync();
}

/* The mma.sync attention kernel, persistent over one item list: DECODE = the decode items (<= 16 rows; keys
 * split over the 4 warps), else the prefill items (64 rows, 16 per warp). Two instantiations, so that each
 * path gets its own register allocation. */
template <typename T, int DP, int NS, bool DECODE, bool EARLY = false, bool SELF = false, bool APPEND = false,
          bool ROPE = false>
__global__ void __launch_bounds__(KV_THREADS) kv_attn_kernel(kvattn_params p, kv_attn_args a) {
    static_assert(DECODE || !EARLY, "early start: decode kernel only");
    static_assert(APPEND || !ROPE, "rotary new keys: the APPEND kernels only");
    static_assert(EARLY || !APPEND, "the early kernel of a call that appends: early start only");
    static_assert(EARLY || !SELF, "the first item from the lean plan: early start only");
    extern __shared__ __align__(128) unsigned char kv_smem_raw[]; /* (swizzled stages: 128-byte aligned rows) */
    __shared__ __align__(16) uint64_t s_addr[NS][KV_BN][2]; /* global addresses of the K, V rows of tiles in flight */
    __shared__ float s_m[4][KV_DECODE_ROWS], s_l[4][KV_DECODE_ROWS];
    __shared__ int s_item, s_flag;
    /* Waits for the items (scheduler) and the appended rows (append kernel). The decode kernel that follows the
     * prefill kernel of the same call (KV_NO_WAIT_DECODE) does not wait for it: it needs nothing the prefill
     * kernel writes, and it is dispatched only once every prefill block has passed its own wait, i.e. after the
     * scheduler and the append kernel completed; so its blocks take the SMs that prefill blocks leave. The same
     * holds for a prefill kernel after the decode kernel (KV_NO_WAIT_PREFILL, decode-first order). The lists this
     * call's scheduler wrote are read from L2 (__ldcg), never from a possibly stale L1 line. The K rows of decode
     * items go through L1 (KV_DECODE_CA), like the q tile and the block-table entries: every grid that wrote
     * them (the append kernel, earlier calls) completed before this grid was launched. */
    KV_TL(DECODE ? 2 : 1, 0, Min);
#ifdef KVATTN_TIMELINE
    const long long tl_entry = clock64(); /* SELF: the plan's parts in SM cycles, decode slots 10 - 14 */
#endif
    int32_t idx_base = 0; /* list index of the counter's first slot */
    int self = 0;         /* 1: the block's first item is list item blockIdx.x, written by the block itself */
    int32_t n = 0;        /* list items */
    if (SELF) {
        /* The scheduler's lean path (KV_LEAN_SCHED) launches this instantiation (in the early kernel, the plan's
         * code made the other early steps ~1% slower although it did not run). Its blocks do not wait for the
         * lists to start: each computes the same plan (kv_lean_plan, in the stage smem, free here), writes item
         * blockIdx.x of the list itself (the scheduler skips the first gridDim.x items of such a plan) and runs
         * it; the counter's slots start at gridDim.x. Only the combine after a split piece reads the scheduler's
         * records (and its zeroed counts), so it follows the wait. A plan that falls back to the general passes,
         * or overflows, starts no item here. The item loop below is the one the other kernels run (two call
         * sites of kv_attn_item, or the item from smem, slowed every shape: attn_notes.md, thirteenth session). */
        __shared__ int s_self, s_self_n;
#ifdef KVATTN_TIMELINE
        long long tl_c0 = 0, tl_c1 = 0, tl_c2 = 0;
#endif
        if (threadIdx.x < KV_LEAN_SEQS) {
            kv_lean_res r;
#ifdef KVATTN_TIMELINE
            tl_c0 = clock64();
            if (kv_tl_twice) { /* dev: a first, cold pass of the same plan; the pass below then runs warm */
                kv_lean_res r0;
                kv_lean_plan<false>(p, a, *(kv_lean_smem *)kv_smem_raw, r0);
                kv_lean_sync();
            }
            tl_c1 = clock64();
            long long tlc[5]; /* the plan's sections (kv_tl_plan: [0..2] to exchanges 1 - 3, [3] the
                               * results after them (exchange 4 until v67), [4] the return, [5] its start) */
            const int st = kv_lean_plan<false>(p, a, *(kv_lean_smem *)kv_smem_raw, r, tlc);
            tl_c2 = clock64();
            if (threadIdx.x == 0) {
                for (int k = 1; k < 5; k++) atomicAdd(&kv_tl_plan[k - 1], (unsigned long long)(tlc[k] - tlc[k - 1]));
                atomicAdd(&kv_tl_plan[4], (unsigned long long)(tl_c2 - tlc[4]));
                atomicAdd(&kv_tl_plan[5], (unsigned long long)(tlc[0] - tl_c1));
            }
#else
            const int st = kv_lean_plan<false>(p, a, *(kv_lean_smem *)kv_smem_raw, r);
#endif
            const bool good = st && kv_lean_complete(r.ov, r.cut) && !r.sk; /* the same for every caller */
            const int32_t i = blockIdx.x, e = good ? kv_sched_slot_item(r.q, p.num_kv_heads, i) : -1;
            if (e >= 0) a.items[i] = kv_sched_item_at(r.q, e);
            if (threadIdx.x == 0) {
                s_self = good ? (i < r.total ? 1 : 0) : -1;
                s_self_n = r.total;
            }
        }
        __syncthreads(); /* (also orders the item's global store before the loop's load of it) */
#ifdef KVATTN_TIMELINE
        KV_TL_ADD(2, 10, tl_c0 - tl_entry);    /* entry to the plan */
        KV_TL_ADD(2, 11, tl_c1 - tl_c0);       /* the cold pass (KVATTN_TL_TWICE), else ~0 */
        KV_TL_ADD(2, 12, tl_c2 - tl_c1);       /* the plan */
        KV_TL_ADD(2, 13, clock64() - tl_c2);   /* item store and the block barrier */
        KV_TL_ADD(2, 14, 1);
#endif
        if (s_self >= 0) {
            idx_base = gridDim.x;
            self = s_self;
            n = s_self_n;
            KV_TL(DECODE ? 2 : 1, 1, Min);
            KV_TL(DECODE ? 2 : 1, 2, Max);
            kv_grid_launch_dependents(); /* (when it waited: after the lists, ~10 us into the call) */
        }
    }
    auto wait_lists = [&]() {
        if (EARLY) {
            /* early start (a decode step without an append kernel, checks fused into the scheduler;
             * kv_attn_early): the lists are out before the scheduler ends (its page-slot checks and finalize step
             * run after them); thread 0's acquire and the barrier order every thread's list reads after the
             * scheduler's writes. A sequence's output is written only once its seq_ok is final (kv_seq_verdict). A
             * separate instantiation, so that this code leaves the other kernels' register allocation alone
             * (attn_notes.md, eighth session). Relaxed polls, then one fence (an acquire pattern of the PTX memory
             * model). Everything of this call's scheduler that the kernel reads after the flag is read from L2
             * (__ldcg, relaxed loads), so ordering is all it needs; the acquire load this replaces also
             * invalidated the SM's L1 at every poll (CCTL.IVALL in the SASS) while the co-resident block streamed
             * K rows through it. Measured: ~0.5 - 1 us off the lean-path shapes over six rounds (attn_notes.md,
             * eleventh session). */
            if (threadIdx.x == 0) kv_lists_acquire(&a.hdr->items_ready);
            __syncthreads();
        } else if (!DECODE && (a.no_wait & KV_EARLY_START)) { /* the prefill kernel after an early decode kernel */
            if (threadIdx.x == 0)
                while (kv_ld_acquire(&a.hdr->sched_done) == 0) __nanosleep(64);
            __syncthreads();
        } else if (!(a.no_wait & (DECODE ? KV_NO_WAIT_DECODE : KV_NO_WAIT_PREFILL))) {
            kv_grid_wait();
        }
    };
    const kv_item *list = DECODE ? a.items : a.pitems;
    int32_t *counter = DECODE ? &a.hdr->item_counter : &a.hdr->pitem_counter;
    if (!self) {
        wait_lists();
        KV_TL(DECODE ? 2 : 1, 1, Min);
        KV_TL(DECODE ? 2 : 1, 2, Max);
        kv_grid_launch_dependents();
        n = __ldcg(DECODE ? &a.hdr->n_items : &a.hdr->n_pitems);
    }
    __shared__ int32_t s_n;
    bool fresh_n = false; /* n is in s_n (thread 0 read it after the block's first item) */
    for (;;) {
        /* (no counter slot can hold an item when n <= idx_base: then no atomic, one L2 round trip less) */
        if (threadIdx.x == 0) s_item = self ? (int)blockIdx.x : n > idx_base ? atomicAdd(counter, 1) + idx_base : n;
        __syncthreads();
        if (fresh_n) {
            n = s_n;
            fresh_n = false;
        }
        const int idx = s_item;
        if (idx >= n) break;
        const kv_item it = kv_item_ldcg(list, idx);
        const unsigned long long t_item = KV_TL_NOW();
        (void)t_item;
        kv_attn_item<T, DP, NS, DECODE, EARLY, APPEND, ROPE>(p, a, it, kv_smem_raw, s_addr, s_m, s_l);
        __syncthreads(); /* smem (Q, stages, s_item) is reused by the next item */
        const unsigned long long t_end = KV_TL_NOW(); /* timeline builds: the item's end, for the tail to its merge */
        (void)t_end;
        if (self) { /* the lists, for the combine and the next items: thread 0 acquires them (the barrier of the
                     * piece's count or the loop's passes that on) and reads n in the count's round trip */
            if (threadIdx.x == 0) {
                kv_lists_acquire(&a.hdr->items_ready);
                n = __ldcg(&a.hdr->n_items);
                s_n = n;
            }
            fresh_n = true;
            self = 0;
        }
        if (it.comb >= 0 && !(DECODE && (KV_DEV_STRIP & 40))) {
            kv_attn_piece_done<T, EARLY, kv_combine_few(DECODE, DP)>(p, a, it.comb, it.b, &s_flag);
            if (s_flag) { /* timeline builds: a merging piece's end to its merge's end (slots 13, 15; else nothing) */
                KV_TL_ADD(0, 13, KV_TL_NOW() - t_end);
                KV_TL_ADD(0, 15, 1);
            }
        }
        KV_TL_ADD(DECODE ? 2 : 1, 6, KV_TL_NOW() - t_item);
        KV_TL_ADD(DECODE ? 2 : 1, 7, 1);
#ifdef KVATTN_TIMELINE
        if (threadIdx.x == 0 && idx < KV_TL_ITEMS) {
            unsigned long long *r = kv_tl_items[DECODE ? 1 : 0][idx];
            r[0] = t_item;
            r[1] = KV_TL_NOW();
            r[2] = ((unsigned long long)kv_smid() << 32) | blockIdx.x;
            r[3] = (unsigned long long)((it.khi - it.klo + KV_BN - 1) / KV_BN);
        }
#endif
    }
    KV_TL(DECODE ? 2 : 1, 3, Min);
    KV_TL(DECODE ? 2 : 1, 4, Max);
}

/* the sm_90a prefill kernel (wgmma), used for prefill items on sm_90 devices when built for sm_90a */
#include "cuda/attn_prefill_sm90.cuh"
#include "cuda/attn_prefill_ws.cuh"

#endif
