/* attn_prefill_ws.cuh — the warp-specialized form of the sm_90a prefill kernel (v76 - v78, twenty-ninth session): the
 * item semantics of kv_sm90_item (attn_prefill_sm90.cuh) with the copies moved to a warpgroup of their own.
 *
 * One block = 3 warpgroups (384 threads), one block per SM (persistent); setmaxnreg moves registers from the
 * producer to the consumers (kv_ws_cfg::PREG / CREG).
 * - Warpgroup 0, the producer: claims the items (atomic counter) and hands them to the consumers through a ring of
 *   2 smem slots; streams every item's KV tiles of BN keys into KS K stages and VS V stages, in the order the
 *   consumers use them (step t: K_t, then V_{t-1}). Per step its 128 threads resolve the row addresses (one K and one
 *   V row each at BN 128; kv_row_addresser: any page size; rows outside [klo, khi) and unmapped pages are
 *   zero-filled and never read), wait until the stage is free (mbarrier `empty_*`) and copy the tiles with 16-byte
 *   cp.async; `cp.async.mbarrier.arrive.noinc` completes the stage's `full_*` barrier once every producer thread's
 *   copies have landed. It runs ahead across items, so the next item's first tiles load while the current one is
 *   computed.
 * - Warpgroups 1 and 2, the consumers: rows [64c, 64c + 64) of the item's 128 packed rows each; per tile the
 *   wgmma pipeline of kv_sm90_item's LATE form (S_t = Q K_t^T and O += P_{t-1} V_{t-1} issued together, the softmax
 *   of S_t overlapping P V), waiting on the stage barriers instead of their own copies and a block barrier, so the
 *   two consumer warpgroups are not held in step. K_t is released (one arrival per consumer warp) once S_t is
 *   complete, V_t once P_t V_t is. Q rows: copied by the producer before the item's K_0 once the consumers have
 *   freed sQ (KV_WS_QPROD, v92; mbarriers `q_empty` / `q_full`); with rotary (Q through registers) by the consumers'
 *   own loads, the next item's in the current item's tail when the producer has published it already (KV_WS_QPF).
 * Split pieces merge through kv_attn_piece_done run by the two consumer warpgroups (named barrier 4; the producer
 * goes on with the next items). Memory order: a consumer thread that has observed a stage's full barrier issues
 * fence.proxy.async before the products read the stage (cp.async writes are generic-proxy writes; wgmma reads
 * through the async proxy). DP 64, 128 and 256 (BN 64 at DP 256; kv_prefill_sm90_kernel with KV_PREFILL_WS256=0).
 * Measured on the H200 (bench_cuda --quick, causal bf16 D 128, H 32 / Hk 8, attn_notes.md twenty-ninth session):
 * 1x16384 377 (kv_prefill_sm90_kernel) -> 424 (v76: BN 64, joint stages) -> 472 TFLOP/s (BN 128, K / V rings); 489 ->
 * 595 with v89 (thirty-eighth session, the producer's row addresses read in batches). */
#ifndef KVATTN_ATTN_PREFILL_WS_CUH
#define KVATTN_ATTN_PREFILL_WS_CUH

/* 1: prefill items of DP 64 and 128 run on kv_prefill_ws_kernel (attn.cu, launch_sm90_dp); DP 256: below */
#ifndef KV_PREFILL_WS
#define KV_PREFILL_WS 1
#endif
/* 1: those of DP 256 (head dims 136 - 256) too; 0: they keep kv_prefill_sm90_kernel */
#ifndef KV_PREFILL_WS256
#define KV_PREFILL_WS256 1
#endif

/* 1: the producer copies every item's Q rows (calls without rotary; v92, thirty-ninth session): it waits for the
 * consumers to free sQ (`q_empty`, one arrival per consumer warp once the previous item's last S is complete),
 * copies, and the copies' landing completes `q_full`, which each consumer thread waits for at the item's start.
 * Calls with rotary (Q goes through registers) keep the consumers' issue (KV_WS_QPF). Measured on the H200
 * (compare.py causal prefill, H 32 / 8, B x L = 16k, L 1024 .. 16384, four rotated rounds against v89, QFIRST 1):
 * D 64 -7.1 .. -1.6%, D 256 -7.6 .. -1.9%, D 128 -1.2 .. +1.8% (within the rounds' noise), inflight step -0.6%. */
#ifndef KV_WS_QPROD
#define KV_WS_QPROD 1
#endif
#ifndef KV_WS_QPROD128 /* the same at DP 128 */
#define KV_WS_QPROD128 1
#endif
#ifndef KV_WS_QFIRST /* 1: the producer copies Q before the item's K_0 (0: after) */
#define KV_WS_QFIRST 1
#endif
/* 1: the producer copies a K / V tile whose rows are all keys of the sequence with tensor-map (TMA) boxes, one
 * thread per box of kv_ws_tmaps::rows rows and 64 channels, when the host has encoded the maps (attn.cu; contiguous
 * caches, and pages of >= 8 rows that divide BN or are a multiple of it, 16-byte strides); every other tile (one that
 * reaches past the sequence's keys, or holds an unmapped page) by the 16-byte cp.async below */
#ifndef KV_WS_TMA
#define KV_WS_TMA 1
#endif
/* ... for the padded head dims in this mask (bit 0 DP 64, bit 1 DP 128, bit 2 DP 256; their TMA kernels are compiled
 * only then). Measured on the H200 (fortieth session, compare.py causal prefill, H 32 / 8, B x L = 16k, L 1024 ..
 * 16384, medians of three or four rotated rounds against the same binary without maps): DP 256 -4.2 .. -9.8% (packed
 * keys; boxes of 64 rows), -3.1% at 16 x 1024 in pages of 16 (boxes of 16 rows); DP 64 +5.7 .. +10.3% and DP 128
 * +2.6 .. +6.3% slower (packed), +12 / +9 .. +19% (pages of 16), with L2 promotion 256, 128 or none alike. So 4.
 * The host also keeps head dims <= DP - 64 off the maps (kv_ws_tmaps_make). */
#ifndef KV_WS_TMA_DPS
#define KV_WS_TMA_DPS 4
#endif
static constexpr bool kv_ws_tma_dp(int DP) { return (KV_WS_TMA_DPS & (DP == 64 ? 1 : DP == 128 ? 2 : DP == 256 ? 4 : 0)) != 0; }
/* 1: a consumer warpgroup issues the next item's Q rows in the current item's tail (see the consumers' loop) */
#ifndef KV_WS_QPF
#define KV_WS_QPF 1
#endif
/* KV tile keys and stages of the warp-specialized kernel (dev builds try others: -DKV_WS_BN=64 ...) */
#ifndef KV_WS_BN
#define KV_WS_BN 128
#endif
/* v89: the producer reads its copies' row addresses KV_WS_PBATCH at a time (16-byte smem loads from a layout in which a
 * thread's addresses of a tile are adjacent), and a thread whose 16-byte chunk lies past the head dim zero-fills it on
 * a stage's first use only; 0: one 8-byte smem load and the chunk mask per copy (v88b), whose serial smem round trip
 * per copy made the producer set the pace at long lengths (ncu, 1x16384). Measured on the H200 (compare.py causal
 * prefill, H 32 / 8, B x L = 16k, L 1024 .. 16384, medians of rotated rounds against v88b): batches of 4 D 128 -7.1 /
 * -11.3 / -12.2 / -13.8 / -13.2%, D 256 +2.1 / -4.9 / -5.8 / -7.2 / -7.4%; batches of 8 the same at D 128, worse at
 * D 256; batches of 2 at D 256 -0.2 to +2.9% */
#ifndef KV_WS_PBATCH
#define KV_WS_PBATCH 4
#endif
#ifndef KV_WS_PBATCH256
#define KV_WS_PBATCH256 4 /* the same at DP 256 */
#endif
/* K and V stages at DP 256 (BN 64: 32 KB per tile beside Q's 64 KB; five fit with one address slot, ASLOTS). Measured
 * on the H200 (thirty-seventh session, compare.py D 256 causal prefill, H 32 / 8, B x L = 16k, medians of four rotated
 * rounds against kv_prefill_sm90_kernel): KS 2 / VS 3 -13.6 / -6.1 / -2.3 / -0.2 / +2.3% at L 1024 / 2048 / 4096 / 8192
 * / 16384; KS 2 / VS 2 -11.9 / -5.1 / +0.3 / -0.3 / +2.8%. With the producer's copy offsets computed once (v88b,
 * three rounds): -15.9 / -10.0 / -1.8 / -4.0 / -0.5% */
#ifndef KV_WS_KS256
#define KV_WS_KS256 2
#endif
#ifndef KV_WS_VS256
#define KV_WS_VS256 3
#endif
/* the producer's registers at DP 256 (the consumers get the rest of the block's pool): 40 (ptxas: ~230 bytes of
 * spills) was faster at every length than 24 (88 bytes: +1.3 - 2.7%, KS 2 / VS 2, three rotated rounds) */
#ifndef KV_WS_PREG256
#define KV_WS_PREG256 40
#endif
template <typename T, int DP, int BN_ = (DP == 256 ? 64 : KV_WS_BN)> struct kv_ws_cfg {
    static_assert(DP == 64 || DP == 128 || DP == 256, "kv_prefill_ws_kernel: DP must be 64, 128 or 256");
    static_assert(BN_ == 64 || (BN_ == 128 && DP <= 128), "kv_prefill_ws_kernel: BN must be 64, or 128 at DP <= 128");
    static constexpr int BN = BN_;
    static constexpr int KV_BYTES = BN * DP * 2; /* one K or V tile */
    /* K and V stages: K_t is released once S_t is complete, V_t once P_t V_t is (two iterations later), so V needs
     * at least 2 stages and K 1; the rest of the smem deepens both (~192 KB in all at DP 64 / 128, 225 KB at 256) */
    static constexpr int KS = DP == 256 ? KV_WS_KS256 : BN == 128 ? (DP == 64 ? 4 : 2) : (DP == 64 ? 6 : 4);
    static constexpr int VS = DP == 256 ? KV_WS_VS256 : BN == 128 ? (DP == 64 ? 5 : 3) : (DP == 64 ? 7 : 5);
    static constexpr int THREADS = 384;
    /* slots of the producer's row addresses (static smem): 2, or 1 at DP 256 with 5 stages (the 1 KB it saves lets
     * Q and five 32 KB tiles fit under the 227 KB limit). The DP 256 block then uses all of it (ncu: 230400 bytes
     * dynamic + 2048 static, of which the kernel's own variables are ~1.2 KB): static smem past those 2048 bytes
     * would make its smem attribute, and so every DP 256 prefill call, fail with KVATTN_ERR_CUDA */
    static constexpr int ASLOTS = DP == 256 && KS + VS > 4 ? 1 : 2;
    static constexpr int Q_BYTES = KV_SM90_ROWS * DP * 2;
    static constexpr int SMEM_BYTES = Q_BYTES + (KS + VS) * KV_BYTES + 1024;
    static_assert(VS >= 2 && KS >= 1, "kv_prefill_ws_kernel: stages");
    /* registers per thread (setmaxnreg): the block's pool is 384 x 168; the producer's 128 threads give up
     * 128 x (168 - PREG) for the consumers' 256 x (CREG - 168). Chosen by reading the consumers' spills in the SASS
     * (DP 128 / BN 128 at 224 had 24 spill instructions, at 232 none); ptxas reports no spill in the DP 64 / 128
     * kernels, ~220 bytes in the DP 256 ones (O alone is 128 floats per consumer thread there) */
    static constexpr int PREG = DP == 256 ? KV_WS_PREG256 : DP == 128 && BN == 128 ? 40 : 56;
    static constexpr int CREG = DP == 256                  ? (384 * 168 - 128 * KV_WS_PREG256) / 256 / 8 * 8
                                : DP == 128 && BN == 128 ? 232
                                                         : 224;
    static_assert(128 * PREG + 256 * CREG <= 384 * 168, "kv_prefill_ws_kernel: register split");
};

/* ---- mbarrier wrappers (shared::cta addresses) ---------------------------------------------------------- */
static __device__ __forceinline__ void kv_mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
/* Waits until the phase of parity `parity` has completed (a fresh barrier: parity 1 counts as completed). */
static __device__ __forceinline__ void kv_mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n.reg .pred p;\nKV_MBAR_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra KV_MBAR_WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}
/* Whether the phase of parity `parity` has completed, without waiting. */
static __device__ __forceinline__ bool kv_mbar_test(uint32_t bar, uint32_t parity) {
    uint32_t ok;
    asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(ok)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return ok != 0;
}
static __device__ __forceinline__ void kv_mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* One arrival for the calling warp, once all its lanes are here (the consumers' barriers count warps). */
static __device__ __forceinline__ void kv_mbar_arrive_warp(uint32_t bar) {
    __syncwarp();
    if ((threadIdx.x & 31) == 0) kv_mbar_arrive(bar);
}
/* Arrival once every cp.async this thread issued before it has landed (the count is not raised: .noinc). */
static __device__ __forceinline__ void kv_mbar_arrive_cp_async(uint32_t bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/* One arrival that also expects `bytes` of asynchronous copies (TMA) in the current phase. */
static __device__ __forceinline__ void kv_mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* One 4-D tensor-map box into smem at dst; its bytes complete on the mbarrier `bar`. map: a __grid_constant__
 * kernel parameter's address. */
static __device__ __forceinline__ void kv_tma_load4(uint32_t dst, const CUtensorMap *map, int32_t c0, int32_t c1,
                                                    int32_t c2, int32_t c3, uint32_t bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
                 "%5}], [%6];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
                 : "memory");
}
template <int N> static __device__ __forceinline__ void kv_setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> static __device__ __forceinline__ void kv_setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
/* Named barrier `id` over `n` threads (id 0 is __syncthreads). */
static __device__ __forceinline__ void kv_bar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

/* The block's barriers and item ring (static smem). */
template <int KS, int VS> struct kv_ws_bars {
    uint64_t full_k[KS], empty_k[KS];           /* full: 128 producer arrivals; empty: 8 consumer warps */
    uint64_t full_v[VS], empty_v[VS];
    uint64_t ring_full[2], ring_empty[2];       /* ring_full: 1 (producer thread 0); ring_empty: 8 consumer warps */
    uint64_t q_full, q_empty;                   /* KV_WS_QPROD: sQ's barriers (128 producer arrivals / 8 warps) */
    int ring[2];                                /* list index of the item (>= count: no more items) */
    uint32_t tok[2];                            /* KV_WS_TMA: per address slot, byte w = warp w's rows of K_t (bit
                                                 * 0) / V_{t-1} (bit 1) are all keys of the sequence */
    int pidx;                                   /* the producer's claimed index, to its other threads */
};

/* ---- 64 Q rows of an item (half wg) into sQ (cp.async, or through registers with rotary), one commit group; the
 * caller waits. Called by a consumer warpgroup for its own half, or (v92, KV_WS_QPROD) by the producer for both
 * halves with ROPE_OK = false (the rotary code compiled out; the caller has checked that rotary_cos is NULL).
 * Thread wtid copies channel chunk wtid % CH of rows rr = 64 wg + wtid / CH + RSTEP k; the query index i = r / G
 * and head remainder r % G of r = row0 + rr are stepped from one division per item, not divided per row (the
 * division per row was ~9% of the kernel's stall samples at 16x1024, ncu). */
template <typename T, int DP, bool ROPE_OK = true>
static __device__ __forceinline__ void kv_ws_q_issue(const kvattn_params &p, const kv_item &it, const kv_item_facts &f,
                                                     uint32_t sQ, int wg, int wtid) {
    constexpr int ROWS = KV_SM90_ROWS, CH = DP / 8, RSTEP = 128 / CH;
    const kv_seq &s = f.s;
    const int b = it.b, kvh = it.kv_head, G = f.G, D = f.D;
    const T *qg = (const T *)p.q;
    const bool rope = ROPE_OK && p.rotary_cos != NULL; /* (ROPE_OK = false: the caller has checked it is NULL) */
    const int32_t rope_R = p.rotary_dim;
    const bool varlen = p.cu_seqlens_q != NULL;
    const int ch = wtid % CH, c0 = ch * 8;
    int rr = wg * 64 + wtid / CH;
    int32_t i = (it.row0 + rr) / G, hr = it.row0 + rr - i * G;
    const int32_t di = RSTEP / G, dh = RSTEP - di * G;
#pragma unroll 1
    for (int k = 0; k < 64 / RSTEP; k++) {
        const bool live = rr < it.nrows && c0 < D;
        const int64_t qo = live ? kv_row_offset(varlen, b, s.q_row0, i, p.q_batch_stride, p.q_row_stride) +
                                      (int64_t)(kvh * G + hr) * p.q_head_stride
                                : 0;
        if (!rope) {
            kv_copy16_row(sQ + kv_sw128<ROWS>(rr, ch), live ? (uint64_t)(qg + qo) : 0, ch * 16);
        } else {
            uint4 qv = make_uint4(0, 0, 0, 0);
            if (live) qv = *(const uint4 *)(qg + qo + c0);
            T *vals = (T *)&qv;
            if (live && c0 < rope_R) kv_rope_q8<T>(p, qg + qo, c0, rope_R, s.S + s.n_new - s.n_q + i, vals);
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sQ + kv_sw128<ROWS>(rr, ch)), "r"(qv.x),
                         "r"(qv.y), "r"(qv.z), "r"(qv.w)
                         : "memory");
        }
        rr += RSTEP;
        i += di;
        hr += dh;
        if (hr >= G) {
            hr -= G;
            i++;
        }
    }
    kv_cp_async_commit();
}

/* ---- the producer: one item's K / V tiles ----------------------------------------------------------------
 * Step t issues K_t (t < n) and V_{t-1} (t >= 1), the order the consumers use them in. gp: the block's tile
 * counter (K stage gp % KS, V stage gp % VS, phases gp / KS and gp / VS), advanced by the item's n tiles. Row
 * units: unit u < BN is K row u of tile t, unit u >= BN V row u - BN of tile t - 1; thread tid resolves units
 * tid, tid + 128, ... into s_addr (block-table entries read one step ahead), then every producer thread copies
 * its 16-byte chunks of the two tiles. */
/* v89's slot layout: unit u (K rows 0 .. BN - 1, then V rows) at the index that puts the BN / RSTEP rows copied by one
 * producer thread (rows RSTEP apart from its row r < RSTEP) next to each other: half * BN + (h % RSTEP) * (BN / RSTEP) +
 * h / RSTEP for row h of the half */
template <int BN, int RSTEP> static __device__ __forceinline__ int kv_ws_aidx(int u) {
    const int h = u % BN;
    return u - h + (h % RSTEP) * (BN / RSTEP) + h / RSTEP;
}

template <typename T, int DP, typename CF, bool TMA>
static __device__ __forceinline__ void kv_ws_produce(const kvattn_params &p, const kv_item &it, uint32_t sQ,
                                                     uint32_t sK, uint32_t sV, uint64_t (*s_addr)[2 * CF::BN],
                                                     kv_ws_bars<CF::KS, CF::VS> *bars, uint32_t &gp, bool qprod,
                                                     uint32_t &qp, const kv_ws_tmaps &tm) {
    constexpr int BN = CF::BN, KS = CF::KS, VS = CF::VS, CH = DP / 8, RSTEP = 128 / CH;
    constexpr int UNITS = 2 * BN / 128; /* row units per thread */
    constexpr int PBATCH = DP == 256 ? KV_WS_PBATCH256 : KV_WS_PBATCH;
    const int tid = threadIdx.x;        /* 0 .. 127 */
    const int32_t kt_begin = it.klo / BN;
    const int32_t n_kt = it.khi > it.klo ? (int32_t)kv_ceil_div64(it.khi, BN) - kt_begin : 0;
    if (n_kt <= 0) return;
    KV_WS_T(tp0);
    const kv_item_facts f = kv_item_facts_get(p, it.b);
    kv_row_addresser ra[UNITS];
#pragma unroll
    for (int k = 0; k < UNITS; k++) ra[k].init(p, it.b, f.cache_row, it.kv_head, tid + 128 * k >= BN);
    int32_t page[UNITS];
    /* key j of unit k at step t (K: tile t, V: tile t - 1); -1 outside the item's keys */
    auto key = [&](int k, int32_t t) -> int32_t {
        const int u = tid + 128 * k;
        const int32_t tile = u < BN ? t : t - 1;
        const int32_t j = (kt_begin + tile) * BN + u % BN;
        return tile >= 0 && tile < n_kt && j >= it.klo && j < it.khi ? j : -1;
    };
    /* KV_WS_TMA: boxes of R rows serve this item's tiles whose rows are all keys of the sequence (key_row >= 0 for
     * every row: the rows outside [klo, khi) are then read too, and masked as in the diagonal's tiles). A box must lie
     * in one page: the item's rows are aligned to R in its pages when L is (tiles start at multiples of BN). */
    const int32_t R = TMA && tm.rows > 0 ? tm.rows : BN;
    const bool tma_item = TMA && tm.rows > 0 && (ra[0].table ? f.s.L % R == 0 : ra[0].limit > 0);
    auto key_row = [&](int k, int32_t t) -> int32_t { /* key j of unit k at step t if the tile exists and j < s_k */
        const int u = tid + 128 * k;
        const int32_t tile = u < BN ? t : t - 1;
        const int32_t j = (kt_begin + tile) * BN + u % BN;
        return tile >= 0 && tile < n_kt && j < f.s_k ? j : -1;
    };
    auto page_read = [&](int k, int32_t t) -> int32_t {
        const int32_t j = tma_item ? key_row(k, t) : key(k, t); /* (key(k, t) >= 0: key_row is the same j) */
        return ra[k].table && j >= 0 ? ra[k].page(f.s.L + j) : 0;
    };
#pragma unroll
    for (int k = 0; k < UNITS; k++) page[k] = page_read(k, 0);
    const int my_ch = tid % CH, my_row = tid / CH;
    const bool ch_ok = my_ch * 8 < f.D;
    const uint64_t ch_mask = ch_ok ? ~0ull : 0ull;
    const uint32_t my_dst = kv_sw128<BN>(my_row, my_ch);
    /* rows RSTEP apart share the 128-byte swizzle's phase (row mod 8) when RSTEP is a multiple of 8 (DP <= 128); at
     * DP 256 (RSTEP 4) the odd-numbered copies' rows have the other phase: their chunk's extra offset, once */
    static_assert(RSTEP % 8 == 0 || (2 * RSTEP) % 8 == 0, "kv_ws_produce: row step");
    const uint32_t odd_dk = RSTEP % 8 == 0 ? 0u : kv_sw128<BN>(my_row + RSTEP, my_ch) - my_dst - RSTEP * 128;
    /* copy k's destination from the thread's first row's */
    auto dk = [&](int k) -> uint32_t { return k * RSTEP * 128 + (k & 1 ? odd_dk : 0u); };
#pragma unroll 1
    for (int32_t t = 0; t <= n_kt; t++) {
        /* (steps of consecutive items are apart by the item claim's barriers) */
        const int slot = CF::ASLOTS == 2 ? t & 1 : 0;
        if (CF::ASLOTS == 1 && t > 0) kv_bar_sync(1, 128); /* one slot: the previous step's copies have read it */
        bool okk = true, okv = true;  /* KV_WS_TMA: this thread's rows of K_t / V_{t-1} are keys of the sequence */
        int32_t box_c2[UNITS], box_c3[UNITS]; /* and the box coordinates of its rows (rows, outer) */
#pragma unroll
        for (int k = 0; k < UNITS; k++) {
            const int32_t j = key(k, t);
            s_addr[slot][PBATCH ? kv_ws_aidx<BN, RSTEP>(tid + 128 * k) : tid + 128 * k] =
                j >= 0 ? ra[k].addr(f.s.L + j, page[k]) : 0;
            if (tma_item) {
                const int32_t jr = key_row(k, t);
                const int32_t pos = f.s.L + jr;
                const bool ok = jr >= 0 && ra[k].addr(pos, page[k]) != 0;
                if (tid + 128 * k < BN) okk = okk && ok;
                else okv = okv && ok;
                box_c2[k] = ra[k].table ? (ra[k].page_shift >= 0 ? pos & (ra[k].page_size - 1) : pos % ra[k].page_size)
                                        : pos;
                box_c3[k] = ra[k].table ? page[k] : tm.outer0 ? 0 : f.cache_row;
            }
            page[k] = page_read(k, t + 1);
        }
        if (tma_item) {
            const uint32_t wk = __all_sync(0xffffffffu, okk), wv = __all_sync(0xffffffffu, okv);
            if ((tid & 31) == 0) ((volatile uint8_t *)&bars->tok[slot])[tid >> 5] = (uint8_t)(wk | wv << 1);
        }
        kv_bar_sync(1, 128); /* the step's addresses visible to every producer thread */
        const uint32_t tok = tma_item ? *(volatile uint32_t *)&bars->tok[slot] : 0u;
        const bool tma_k = (tok & 0x01010101u) == 0x01010101u, tma_v = (tok & 0x02020202u) == 0x02020202u;
        /* tile g of a ring of NST stages at smem `base` (its rows' addresses from unit u0 on): wait until the
         * consumers have freed the stage, copy, and let the copies' landing complete the stage's full barrier */
        auto copy_tile = [&](uint64_t *empty, uint64_t *full, uint32_t NST, uint32_t base, uint32_t g, int u0,
                             int wait_slot, bool tma, const CUtensorMap *map) {
            const uint32_t st = g % NST;
            KV_WS_T(tw0);
            kv_mbar_wait(kv_smem_u32(&empty[st]), ((g / NST) & 1) ^ 1);
            KV_WS_ADD(threadIdx.x == 0, wait_slot, KV_WS_CLK_NOW() - tw0); /* the producer's waits for a free stage */
            const uint32_t dst = base + st * CF::KV_BYTES + my_dst;
            if (tma) {
                /* the thread of the tile's row h (a multiple of R) copies rows h .. h + R - 1, DP / 64 boxes; every
                 * producer thread arrives once (the barrier counts 128), thread 0 expecting the tile's bytes */
                const uint32_t bar = kv_smem_u32(&full[st]);
#pragma unroll
                for (int k = 0; k < UNITS; k++) {
                    const int u = tid + 128 * k;
                    if ((u >= BN) == (u0 >= BN) && (u % BN) % R == 0) {
#pragma unroll
                        for (int c = 0; c < DP / 64; c++)
                            kv_tma_load4(base + st * CF::KV_BYTES + c * (BN * 128) + (u % BN) * 128, map, c * 64,
                                         it.kv_head, box_c2[k], box_c3[k], bar);
                    }
                }
                if (tid == 0) kv_mbar_arrive_tx(bar, CF::KV_BYTES);
                else kv_mbar_arrive(bar);
                return;
            }
            if (PBATCH == 0) {
#pragma unroll
                for (int k = 0; k < BN / RSTEP; k++)
                    kv_copy16_row(dst + dk(k), s_addr[slot][u0 + my_row + k * RSTEP] & ch_mask, my_ch * 16);
            } else if (ch_ok) {
                /* this thread's NPT addresses of the tile are adjacent (kv_ws_aidx): PB of them per batch, read
                 * before the batch's copies (a copy's asm orders every later smem read after it) */
                constexpr int NPT = BN / RSTEP, PB = PBATCH < NPT ? PBATCH : NPT;
                static_assert(PB % 2 == 0 && NPT % PB == 0, "kv_ws_produce: address batch");
                const ulonglong2 *rows = (const ulonglong2 *)&s_addr[slot][u0 + my_row * NPT];
#pragma unroll
                for (int kb = 0; kb < NPT; kb += PB) {
                    uint64_t r[PB];
#pragma unroll
                    for (int j = 0; j < PB; j += 2) {
                        const ulonglong2 a = rows[(kb + j) / 2];
                        r[j] = a.x;
                        r[j + 1] = a.y;
                    }
#pragma unroll
                    for (int j = 0; j < PB; j++) {
                        kv_copy16_row(dst + dk(kb + j), r[j], my_ch * 16);
                    }
                }
            } else if (g < NST) {
                /* a chunk past the head dim: zero it on the stage's first use in this block; no copy writes it later */
#pragma unroll
                for (int k = 0; k < BN / RSTEP; k++) kv_copy16_row(dst + dk(k), 0, 0);
            }
            kv_mbar_arrive_cp_async(kv_smem_u32(&full[st]));
        };
        /* the item's 128 Q rows, once the consumers have freed sQ (v92), after K_0 (or before: KV_WS_QFIRST) */
        auto copy_q = [&]() {
            kv_mbar_wait(kv_smem_u32(&bars->q_empty), (qp & 1) ^ 1);
            kv_ws_q_issue<T, DP, false>(p, it, f, sQ, 0, tid);
            kv_ws_q_issue<T, DP, false>(p, it, f, sQ, 1, tid);
            kv_mbar_arrive_cp_async(kv_smem_u32(&bars->q_full));
            qp++;
        };
        if (qprod && t == 0 && KV_WS_QFIRST) copy_q();
        if (t < n_kt) { /* K_t */
            copy_tile(bars->empty_k, bars->full_k, KS, sK, gp + t, 0, 14, tma_k, &tm.k);
            KV_WS_ADD(threadIdx.x == 0 && t == 0, 13, KV_WS_CLK_NOW() - tp0); /* item to K_0's copies issued */
        }
        if (qprod && t == 0 && !KV_WS_QFIRST) copy_q();
        if (t >= 1) copy_tile(bars->empty_v, bars->full_v, VS, sV, gp + t - 1, BN, 15, tma_v, &tm.v); /* V_{t-1} */
    }
    gp += n_kt;
}

/* ---- a consumer warpgroup: its 64 rows of one item -------------------------------------------------------
 * gc: the block's tile counter as the consumers see it (the same sequence as the producer's gp). */
template <typename T, int DP, typename CF, typename PF>
static __device__ __forceinline__ void kv_ws_consume(const kvattn_params &p, const kv_attn_args &a, const kv_item &it,
                                                     uint32_t sQ, uint32_t sK, uint32_t sV,
                                                     kv_ws_bars<CF::KS, CF::VS> *bars, uint32_t &gc, bool q_issued,
                                                     bool qprod, uint32_t &qc, PF prefetch) {
    constexpr int BN = CF::BN, KS = CF::KS, VS = CF::VS;
    constexpr int ROWS = KV_SM90_ROWS;
    constexpr int SN = BN / 2;
    constexpr int ON = DP / 2;
    constexpr int KQ = DP / 16;
    constexpr int KP = BN / 16;
    const int ctid = threadIdx.x - 128, wg = ctid >> 7, wtid = ctid & 127, warp = (ctid >> 5) & 3,
              lane = threadIdx.x & 31;
    const int gq = lane >> 2, tq = lane & 3;
    const int b = it.b, kvh = it.kv_head;
    const kv_item_facts f = kv_item_facts_get(p, b);
    const kv_seq s = f.s;
    const int32_t s_k = f.s_k;
    const int G = f.G, D = f.D;
    const float scale = f.scale;
    const bool plain = f.plain;
    const int32_t kt_begin = it.klo / BN;
    const int32_t kt_end = (int32_t)kv_ceil_div64(it.khi, BN);
    const int32_t n_kt = it.khi > it.klo ? kt_end - kt_begin : 0;

    KV_WS_T(tl0);
    /* 1. this warpgroup's 64 Q rows: copied by the producer (qprod: wait for them), or issued here unless the
     * previous item's tail already issued them (q_issued) */
    if (qprod) {
        if (n_kt > 0) {
            kv_mbar_wait(kv_smem_u32(&bars->q_full), qc & 1);
            kv_fence_proxy_async();
        }
    } else {
        if (n_kt > 0 && !q_issued) kv_ws_q_issue<T, DP>(p, it, f, sQ, wg, wtid);
        if (n_kt > 0 || q_issued) kv_cp_async_wait<0>(); /* (q_issued may differ between warps: no barrier here) */
        if (n_kt > 0) {
            kv_fence_proxy_async();
            kv_bar_sync(2 + wg, 128);
        }
    }
    KV_WS_T(tl1);
    KV_WS_ADD(threadIdx.x == 128, 0, 1);          /* items */
    KV_WS_ADD(threadIdx.x == 128, 1, n_kt);       /* KV tiles */
    KV_WS_ADD(threadIdx.x == 128, 2, tl1 - tl0);  /* entry to Q rows in smem (facts, Q issue and wait) */
    KV_WS_ADD(threadIdx.x == 128, 10, q_issued);  /* items whose Q rows the previous item's tail issued */

    /* per-thread rows: rr = 64 wg + 16 warp + gq + 8 h2 */
    const int rr0 = wg * 64 + warp * 16 + gq;
    kv_sm90_rows w;
    kv_sm90_rows_get(w, p, it, s, s_k, G, b, kvh, rr0);
    float o[ON];
#pragma unroll
    for (int k = 0; k < ON; k++) o[k] = 0.0f;
    float m2[2] = {-CUDART_INF_F, -CUDART_INF_F};
    float l[2] = {0.0f, 0.0f};
    float sc[SN];
    uint32_t pf[KP][4];
    const uint64_t dq0 = kv_sm90_desc(sQ + wg * 64 * 128, 16, 1024);

    auto fence_all = [&]() {
        kv_fence_regs<SN>(sc);
        kv_fence_regs<ON>(o);
        kv_fence_regs<KP * 4>(&pf[0][0]);
        kv_wgmma_fence();
    };
    auto products_done = [&]() {
        kv_wgmma_wait<0>();
        kv_fence_regs<ON>(o);
        kv_fence_regs<KP * 4>(&pf[0][0]);
    };
    /* the products reading K (V) tile g are complete in this warp: one arrival per consumer warp frees its stage */
    auto release_k = [&](uint32_t g) {
        kv_mbar_arrive_warp(kv_smem_u32(&bars->empty_k[g % KS]));
    };
    auto release_v = [&](uint32_t g) {
        kv_mbar_arrive_warp(kv_smem_u32(&bars->empty_v[g % VS]));
    };
    auto wait_k = [&](uint32_t g) { kv_mbar_wait(kv_smem_u32(&bars->full_k[g % KS]), (g / KS) & 1); };
    auto wait_v = [&](uint32_t g) { kv_mbar_wait(kv_smem_u32(&bars->full_v[g % VS]), (g / VS) & 1); };
    auto rescale_o = [&](const float *corr) {
#pragma unroll
        for (int k = 0; k < ON; k++) o[k] *= corr[(k >> 1) & 1];
    };
    auto issue_s = [&](uint32_t g) {
        const uint64_t dk0 = kv_sm90_desc(sK + (g % KS) * CF::KV_BYTES, 16, 1024);
#pragma unroll
        for (int kk = 0; kk < KQ; kk++) {
            const uint32_t qoff = (kk >> 2) * (ROWS * 128) + (kk & 3) * 32;
            const uint32_t koff = (kk >> 2) * (BN * 128) + (kk & 3) * 32;
            if constexpr (BN == 128) kv_wgmma<T>::ss128(sc, dq0 + (qoff >> 4), dk0 + (koff >> 4), kk > 0);
            else kv_wgmma<T>::ss64(sc, dq0 + (qoff >> 4), dk0 + (koff >> 4), kk > 0);
        }
        kv_wgmma_commit();
    };
    auto issue_pv = [&](uint32_t g) {
        const uint64_t dv0 = kv_sm90_desc(sV + (g % VS) * CF::KV_BYTES, BN * 128, 1024);
#pragma unroll
        for (int kk = 0; kk < KP; kk++) {
            const uint64_t dv = dv0 + ((kk * 16 * 128) >> 4);
            if constexpr (DP == 64) kv_wgmma<T>::rs64(o, pf[kk], dv, 1);
            else if constexpr (DP == 128) kv_wgmma<T>::rs128(o, pf[kk], dv, 1);
            else kv_wgmma<T>::rs256(o, pf[kk], dv, 1);
        }
        kv_wgmma_commit();
    };
    auto softmax_body = [&](auto general, int32_t jt, float *corr) {
        kv_sm90_softmax<decltype(general)::value, SN>(p, sc, m2, l, corr, w, jt, scale, plain, tq);
    };
    auto pack_p = [&]() { kv_sm90_pack_p<T, KP>(pf, sc); };

    /* 2-3. pipeline over tiles g0 .. g0 + n_kt - 1 of the block's sequence */
    if (n_kt > 0) {
        const uint32_t g0 = gc;
        wait_k(g0);
        KV_WS_T(tl2);
        KV_WS_ADD(threadIdx.x == 128, 3, tl2 - tl1); /* Q in smem to K_0 landed (row set-up, the wait) */
        kv_fence_proxy_async();
        fence_all();
        issue_s(g0);
        kv_wgmma_wait<0>();
        kv_fence_regs<SN>(sc);
        release_k(g0);
        /* tiles [t_fast_lo, t_fast_hi) take the plain softmax, the first one too (a short item's first softmax
         * overlaps nothing: its cost is the item's) */
        int32_t t_fast_lo, t_fast_hi;
        kv_sm90_fast_tiles<BN>(p, it, s, s_k, G, plain, kt_begin, n_kt, 0, &t_fast_lo, &t_fast_hi);
        float corr[2];
        if (t_fast_lo == 0 && t_fast_hi > 0) softmax_body(kv_sm90_bool<false>(), kt_begin * BN, corr);
        else softmax_body(kv_sm90_bool<true>(), kt_begin * BN, corr);
        KV_WS_T(tl3);
        KV_WS_ADD(threadIdx.x == 128, 4, tl3 - tl2); /* the first S alone and its softmax */
        /* iteration t: K_t and V_{t-1} landed; P_{t-2} V_{t-2} complete (V_{t-2} released), rescale O,
         * P_{t-1} -> registers; issue S_t and O += P_{t-1} V_{t-1}; S_t complete (K_t released); softmax of S_t
         * overlapping P V */
        auto step = [&](auto general, int32_t t) {
            const uint32_t g = g0 + t;
            wait_k(g);
            wait_v(g - 1);
            kv_fence_proxy_async();
            products_done();
            if (t >= 2) release_v(g - 2);
            rescale_o(corr);
            pack_p();
            fence_all();
            issue_s(g);
            issue_pv(g - 1);
            kv_wgmma_wait<1>();
            kv_fence_regs<SN>(sc);
            release_k(g);
            softmax_body(general, (kt_begin + t) * BN, corr);
            kv_fence_regs<SN>(sc);
        };
        for (int32_t t = 1; t < n_kt; t++) {
            if (t >= t_fast_lo && t < t_fast_hi) step(kv_sm90_bool<false>(), t);
            else step(kv_sm90_bool<true>(), t);
        }
        const uint32_t gl = g0 + n_kt - 1;
        KV_WS_T(tl4);
        KV_WS_ADD(threadIdx.x == 128, 5, tl4 - tl3); /* the steps of tiles 1 .. n - 1 */
        wait_v(gl);
        kv_fence_proxy_async();
        products_done();
        if (n_kt >= 2) release_v(gl - 1);
        rescale_o(corr);
        pack_p();
        fence_all();
        issue_pv(gl);
        if (qprod) { /* S_{n-1} is complete: this warp's reads of sQ are done */
            kv_mbar_arrive_warp(kv_smem_u32(&bars->q_empty));
            qc++;
        } else {
            prefetch(); /* S_{n-1} is complete: this warpgroup's Q rows are free for the next item's */
        }
        products_done();
        release_v(gl);
        gc = g0 + n_kt;
        KV_WS_T(tl5);
        KV_WS_ADD(threadIdx.x == 128, 6, tl5 - tl4); /* the last P V alone (and the next item's Q issue) */
    }

    /* 4. epilogue */
    KV_WS_T(tl6);
    kv_sm90_epilogue<T, DP>(p, a, it, s, G, D, b, kvh, o, m2, l, rr0, tq);
    KV_WS_T(tl7);
    KV_WS_ADD(threadIdx.x == 128, 7, tl7 - tl6); /* the epilogue */
}

/* Persistent warp-specialized prefill kernel: num_SMs blocks of 384 threads, kv_ws_cfg<T, DP>::SMEM_BYTES of
 * dynamic smem. */
template <typename T, int DP, bool TMA>
__global__ void __launch_bounds__(384, 1)
    kv_prefill_ws_kernel(const __grid_constant__ kvattn_params p, kv_attn_args a, kv_item_list list,
                         const __grid_constant__ kv_ws_tmaps tm) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef kv_ws_cfg<T, DP> CF;
    extern __shared__ __align__(1024) unsigned char kv_ws_smem[];
    __shared__ __align__(16) uint64_t s_addr[CF::ASLOTS][2 * CF::BN]; /* the producer's row addresses of a step (K_t, V_{t-1}) */
    __shared__ kv_ws_bars<CF::KS, CF::VS> bars;
    __shared__ int s_flag;
    const uint32_t sbase = (kv_smem_u32(kv_ws_smem) + 1023u) & ~1023u;
    const uint32_t sQ = sbase, sK = sbase + CF::Q_BYTES, sV = sK + CF::KS * CF::KV_BYTES;
    if (threadIdx.x == 0) {
        for (int i = 0; i < CF::KS; i++) {
            kv_mbar_init(kv_smem_u32(&bars.full_k[i]), 128);
            kv_mbar_init(kv_smem_u32(&bars.empty_k[i]), 8);
        }
        for (int i = 0; i < CF::VS; i++) {
            kv_mbar_init(kv_smem_u32(&bars.full_v[i]), 128);
            kv_mbar_init(kv_smem_u32(&bars.empty_v[i]), 8);
        }
        for (int i = 0; i < 2; i++) {
            kv_mbar_init(kv_smem_u32(&bars.ring_full[i]), 1);
            kv_mbar_init(kv_smem_u32(&bars.ring_empty[i]), 8);
        }
        kv_mbar_init(kv_smem_u32(&bars.q_full), 128);
        kv_mbar_init(kv_smem_u32(&bars.q_empty), 8);
    }
    /* items (scheduler) and appended rows (append kernel): as kv_prefill_sm90_kernel */
    KV_TL(1, 0, Min);
    if (a.no_wait & KV_EARLY_START) {
        if (threadIdx.x == 0)
            while (kv_ld_acquire(&a.hdr->sched_done) == 0) __nanosleep(64);
    } else if (!(a.no_wait & KV_NO_WAIT_PREFILL)) {
        kv_grid_wait();
    }
    __syncthreads(); /* (also publishes the barriers' initialization) */
    KV_TL(1, 1, Min);
    KV_TL(1, 2, Max);
    kv_grid_launch_dependents();
    const int count = __ldcg(list.count);
    /* v92: the producer copies Q (block-uniform) */
    const bool qprod = KV_WS_QPROD && (DP != 128 || KV_WS_QPROD128) && p.rotary_cos == NULL;
    if (threadIdx.x < 128) { /* the producer */
        kv_setmaxnreg_dec<CF::PREG>();
        if (TMA && threadIdx.x == 0) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&tm.k) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&tm.v) : "memory");
        }
        uint32_t gp = 0, qp = 0; /* tiles and Q rows copied */
#pragma unroll 1
        for (int n = 0;; n++) {
            if (threadIdx.x == 0) {
                KV_WS_T(tc0);
                const int idx = atomicAdd(list.counter, 1);
                bars.pidx = idx;
                kv_mbar_wait(kv_smem_u32(&bars.ring_empty[n & 1]), ((n >> 1) & 1) ^ 1);
                bars.ring[n & 1] = idx;
                kv_mbar_arrive(kv_smem_u32(&bars.ring_full[n & 1]));
                KV_WS_ADD(true, 12, KV_WS_CLK_NOW() - tc0); /* the claim and the ring's free slot */
                KV_WS_ADD(idx < count, 11, 1);               /* items produced */
            }
            kv_bar_sync(1, 128);
            const int idx = bars.pidx;
            kv_bar_sync(1, 128); /* pidx read by all before thread 0 writes the next one */
            if (idx >= count) break;
            const kv_item it = kv_item_ldcg(list.items, idx);
            kv_ws_produce<T, DP, CF, TMA>(p, it, sQ, sK, sV, s_addr, &bars, gp, qprod, qp, tm);
        }
    } else { /* the consumers */
        kv_setmaxnreg_inc<CF::CREG>();
        uint32_t gc = 0, n = 0, qc = 0; /* tiles, items and Q rows taken */
        auto take = [&]() -> int {
            kv_mbar_wait(kv_smem_u32(&bars.ring_full[n & 1]), (n >> 1) & 1);
            const int idx = bars.ring[n & 1];
            kv_mbar_arrive_warp(kv_smem_u32(&bars.ring_empty[n & 1]));
            n++;
            return idx;
        };
        const int wg = (threadIdx.x - 128) >> 7, wtid = threadIdx.x & 127;
        int idx = take();
        bool q_issued = false;
#pragma unroll 1
        while (idx < count) {
            const kv_item it = kv_item_ldcg(list.items, idx);
            /* KV_WS_QPF: in the item's tail, take the next item and issue its Q rows */
            int next = -1;
            KV_WS_T(tk0);
            kv_ws_consume<T, DP, CF>(p, a, it, sQ, sK, sV, &bars, gc, q_issued, qprod, qc, [&]() {
                if (!KV_WS_QPF) return;
                /* only if the producer has published the next item already (the warp decides as one: each warp
                 * takes every item once, here or after the epilogue; a warp that did not issue its Q rows here
                 * issues them at the item's start). Waiting here would hold this item's stores back. */
                if (!__all_sync(0xffffffffu, kv_mbar_test(kv_smem_u32(&bars.ring_full[n & 1]), (n >> 1) & 1)))
                    return;
                next = take();
                if (next < count) {
                    const kv_item nt = kv_item_ldcg(list.items, next);
                    kv_ws_q_issue<T, DP>(p, nt, kv_item_facts_get(p, nt.b), sQ, wg, wtid);
                }
            });
            KV_WS_T(tk1);
            /* a split piece: the consumers (named barrier 4) count it and merge the task if it was the last */
            if (it.comb >= 0) kv_attn_piece_done<T, false, KV_COMBINE_FEW, 128, 256, 4>(p, a, it.comb, it.b, &s_flag);
            q_issued = next >= 0;
            idx = next >= 0 ? next : take();
            KV_WS_ADD(threadIdx.x == 128, 8, tk1 - tk0);        /* the whole item in kv_ws_consume */
            KV_WS_ADD(threadIdx.x == 128, 9, KV_WS_CLK_NOW() - tk1); /* the merge and the hand-off */
        }
#ifdef KVATTN_TIMELINE
        if (threadIdx.x == 128) {
            atomicMin(&kv_tl[1][3], kv_gtime());
            atomicMax(&kv_tl[1][4], kv_gtime());
        }
#endif
    }
#else
    __trap(); /* sm_90a only: never launched on other targets */
#endif
}

#endif
