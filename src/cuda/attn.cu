/* attn.cu — the attention half of the CUDA backend (see cuda_internal.cuh): support check, workspace size and
 * the launch of scheduling, attention and combine kernels on the caller's stream.
 * B sequences, H query heads, Hk KV heads, G = H / Hk, D head dim, DP = D padded to a multiple of 32. */
#include <cudaTypedefs.h>
#include <stdio.h>
#include <stdlib.h>
#include <type_traits>
#include "cuda/cuda_internal.cuh"
#include "cuda/attn_kernels.cuh"

/* The sm_90a prefill kernel of padded head dim DP: the warp-specialized form (attn_prefill_ws.cuh) for DP 64, 128
 * and 256 unless built with KV_PREFILL_WS=0 (or KV_PREFILL_WS256=0 for DP 256), else kv_prefill_sm90_kernel; its
 * launch configuration. One place for the plan's smem size and the launch (launch_sm90_dp). */
template <int DP> static constexpr bool kv_prefill_ws() { return KV_PREFILL_WS && (DP <= 128 || KV_PREFILL_WS256); }
template <typename T, int DP>
using kv_prefill_cfg = typename std::conditional<kv_prefill_ws<DP>(), kv_ws_cfg<T, DP>,
                                                 kv_sm90_cfg<T, DP>>::type;

/* Everything the three entry points decide, made in one place so that they can never disagree. */
typedef struct attn_plan {
    int dp;                /* padded head dim: the kernel variant (the decode kernel's, and the mma.sync prefill's) */
    int pdp;               /* padded head dim of the sm90 prefill kernel (dp, or 128 / 256 for the head dims it pads
                            * further); also the pitch of the split pieces' partial rows (kv_attn_args.dp) */
    int stages;            /* KV smem stages of the prefill kernel */
    int dec_stages;        /* KV smem stages of the decode kernel */
    size_t smem;           /* dynamic smem of the prefill kernel (the larger one: decides the fast path) */
    size_t smem_dec;       /* dynamic smem of the decode kernel */
    int64_t max_items, max_combine, max_part_rows;
    int prefill_rows;      /* packed rows per prefill item of the prefill variant */
    int split_fit;         /* decode blocks per SM the auto split may aim at (those that fit by smem; workspace bound) */
    int sm90;              /* prefill items run on the sm_90a wgmma kernel (attn_prefill_sm90.cuh) */
    size_t off_prefix, off_items, off_pitems, off_combine, off_comb_done, off_part_o, off_part_ml, off_rot_k, bytes;
} attn_plan;

/* (new row x kv head) units an early step may append (kv_attn_early) */
#define KV_SCHED_APPEND_UNITS 1024
static size_t round256(size_t x) { return (x + 255) & ~(size_t)255; }
static int64_t cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0); } /* a >= 0, b > 0; no overflow at INT64_MAX */
/* a * b for counts >= 0, saturated at INT64_MAX: the workspace bounds below are capped after these products, so a
 * product of absurd but valid sizes must not wrap to a small (or negative) count first */
static int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

/* THE variant table: padded head dim and pipeline depth for a head dim (STYLE rule 7). */
static int attn_variant(int head_dim, int *dp, int *stages) {
    switch ((head_dim + 31) / 32) {
    case 1: *dp = 32; *stages = 4; return 1;
    case 2: *dp = 64; *stages = 4; return 1;
    case 3: *dp = 96; *stages = 4; return 1;
    case 4: *dp = 128; *stages = 3; return 1;
    case 5: *dp = 160; *stages = 2; return 1;
    case 6: *dp = 192; *stages = 2; return 1;
    case 7: *dp = 224; *stages = 2; return 1;
    case 8: *dp = 256; *stages = 2; return 1;
    default: return 0;
    }
}

/* The dev build's other decode pipeline depths, one table for the plan (which sizes the smem) and launch_fast_dp
 * (which instantiates them): bit d set = depth d has kernels (any dtype at DP 128: 2 - 6; bf16 only at DP 64: 2, 3, 5,
 * 6, 8, and DP 96: 2, 3; DP 96 at 2: 52 KiB, three blocks per SM by its 168 registers). None in the default build. */
static constexpr unsigned kv_dev_depths(int dp, bool bf16) {
#ifdef KVATTN_DEV_VARIANTS
    return dp == 128 ? 0x7cu : !bf16 ? 0u : dp == 64 ? 0x16cu : dp == 96 ? 0xcu : 0u;
#else
    (void)dp;
    (void)bf16;
    return 0u;
#endif
}

#ifdef KVATTN_DEV_VARIANTS
int kv_attn_dev_stages = 0; /* dev/attn_test.cu (else KVATTN_DEV_STAGES): another decode pipeline depth, where
                             * kv_dev_depths has kernels for it; attn_plan_make */
int kv_attn_dev_pctas = 0;  /* dev/attn_test.cu: blocks of the sm90 prefill kernel (0 = one per SM) */
int kv_attn_dev_splitx = 1; /* dev/attn_test.cu: auto split aims at this many times more pieces */
int kv_attn_dev_splitb = 0; /* dev/attn_test.cu: auto split aims at this many blocks (0 = the grid's; raise
                              * kv_attn_dev_splitx with it, which scales the workspace bound) */
int kv_attn_dev_order = 0;  /* dev/attn_test.cu: a call with both lists runs the decode kernel first (1) or the
                              * prefill kernel first (2); 0: launch_fast's rule */
#endif
#ifndef KVATTN_SM90A
#define KVATTN_SM90A 0
#endif
int kv_attn_no_sm90 = 0; /* dev/attn_test.cu: route prefill items through the mma.sync kernel */
static_assert(KV_SM90_ROWS <= KV_MAX_TILE_ROWS && KV_PREFILL_ROWS <= KV_MAX_TILE_ROWS, "workspace bound");
static void attn_plan_make(const kvattn_params *p, const kv_device_info *dev, attn_plan *pl) {
    const int64_t B = p->batch, H = p->num_heads, Hk = p->num_kv_heads > 0 ? p->num_kv_heads : 1;
    const int64_t G = H / Hk > 0 ? H / Hk : 1;
    if (!attn_variant(p->head_dim, &pl->dp, &pl->stages)) { pl->dp = 256; pl->stages = 2; }
    pl->dec_stages = pl->stages;
#ifdef KVATTN_DEV_VARIANTS
    {
        static int env_stages = -1; /* KVATTN_DEV_STAGES for programs other than attn_test (bench_cuda) */
        if (env_stages < 0) {
            env_stages = getenv("KVATTN_DEV_STAGES") ? atoi(getenv("KVATTN_DEV_STAGES")) : 0;
            /* the auto split's knobs too, read as attn_test reads them (it sets the same globals, from the same
             * variables, before its first call): the first plan, a size query included, sees them */
            if (getenv("KVATTN_DEV_SPLITX")) kv_attn_dev_splitx = atoi(getenv("KVATTN_DEV_SPLITX"));
            if (getenv("KVATTN_DEV_SPLITB")) kv_attn_dev_splitb = atoi(getenv("KVATTN_DEV_SPLITB"));
        }
        const int st = kv_attn_dev_stages ? kv_attn_dev_stages : env_stages;
        if (st >= 2 && st < 32 && (kv_dev_depths(pl->dp, p->dtype == KVATTN_BF16) >> st & 1u)) pl->dec_stages = st;
    }
#endif
    pl->smem = (size_t)((pl->dp > 128 ? KV_PREFILL_ROWS : 0) + 2 * pl->stages * KV_BN) * (pl->dp + 8) * 2;
    pl->smem_dec = (size_t)((pl->dp > 128 ? KV_PREFILL_ROWS : 0) + 2 * pl->dec_stages * KV_BN) *
                   kv_smem_row(true, pl->dp) * 2;
    /* prefill on Hopper: the wgmma kernel for DP 64, 128 and 256 (a build for sm_90a on a 9.0 device); the head dims
     * of DP 96 run it at 128 and those of DP 160 - 224 at 256 (zero-filled channels): 1.5x - 3.6x faster than
     * the mma.sync kernel at their own DP (attn_notes.md, seventeenth session). Their decode kernel keeps its DP
     * (padded to 256, head dim 192 decoded 7.7% slower). */
    pl->sm90 = KVATTN_SM90A && dev->sm90 && !kv_attn_no_sm90 && kv_sm90_dp(pl->dp) > 0;
    pl->pdp = pl->sm90 ? kv_sm90_dp(pl->dp) : pl->dp;
    if (pl->sm90) {
        pl->smem = pl->pdp == 64    ? kv_prefill_cfg<__half, 64>::SMEM_BYTES
                   : pl->pdp == 128 ? kv_prefill_cfg<__half, 128>::SMEM_BYTES
                                    : kv_prefill_cfg<__half, 256>::SMEM_BYTES;
    }
    if (pl->smem_dec > pl->smem) pl->smem = pl->smem_dec;
    const int64_t rows_q = p->cu_seqlens_q ? (int64_t)p->total_q : B * (int64_t)p->seqlen_q;
    const int64_t C = p->block_table ? (int64_t)p->max_pages_per_seq * p->page_size : (int64_t)p->cache_capacity;
    const int64_t tiles_max = cdiv(sat_mul(rows_q, G), KV_DECODE_ROWS) + B; /* any tile height >= 16 */
    pl->prefill_rows = pl->sm90 ? KV_SM90_ROWS : KV_PREFILL_ROWS;
    const int num_sms = dev->num_sms > 0 ? dev->num_sms : 132;
    int64_t extra_items = 0, part_rows = 0;
    /* v107: the split aims at every decode block that runs (launch_fast), so the bound takes the blocks that fit by
     * smem: the stages, the static smem (NS KiB of row addresses + under 1 KiB, ptxas -v) and the 1 KiB the driver
     * reserves per block; registers only lower the occupancy query's count. At least 2, at most the 8 that
     * attn_blocks_per_sm allows. launch_fast aims at no more than this, so a static smem that shrinks stays safe. */
    {
        const int64_t per = (int64_t)pl->smem_dec + (int64_t)(pl->dec_stages + 1) * 1024 + 1024;
        const int64_t fit = dev->smem_per_sm > 0 ? dev->smem_per_sm / per : 2;
        pl->split_fit = fit < 2 ? 2 : fit > 8 ? 8 : (int)fit;
    }
    if (p->num_splits != 1 && p->batch_invariant) {
        int64_t pinv = cdiv(C, KV_INV_SPLIT_KEYS) + 1;
        /* 64-bit: num_splits = INT32_MAX (no cap) is valid */
        if (p->num_splits > 1 && pinv > (int64_t)p->num_splits + 1) pinv = (int64_t)p->num_splits + 1;
        extra_items = sat_mul(sat_mul(Hk, B), pinv);
        /* kv_sched_split splits, in this mode, only sequences of at most KV_PREFILL_ROWS packed rows (all of a
         * sequence's rows, whatever the variant's tile), so the split rows are at most KV_PREFILL_ROWS per sequence
         * and rows_q * G in all; each piece of such a sequence writes its rows once per KV head. The scheduler
         * checks the bound again at run time (a plan past it is not split: never written out of bounds). */
        const int64_t rows_all = sat_mul(rows_q, G);
        const int64_t rows = rows_all < KV_PREFILL_ROWS * B ? rows_all : KV_PREFILL_ROWS * B;
        part_rows = sat_mul(sat_mul(Hk, pinv), rows);
    } else if (p->num_splits != 1) {
        int64_t pmax = cdiv(C, KV_BN * KV_MIN_CHUNK_TILES) + 1;
        if (p->num_splits > 1 && pmax > p->num_splits) pmax = p->num_splits;
        /* the scheduler aims at W / chunk <= KV_SPLIT_PIECES_PER_CTA * split_blocks chunks, split_blocks <= split_fit
         * * num_sms; a split tile has fewer than 2 * ktiles / chunk pieces, so pieces < 2 * KV_SPLIT_PIECES_PER_CTA *
         * split_fit * num_sms */
        extra_items = 2 * KV_SPLIT_PIECES_PER_CTA * (int64_t)pl->split_fit * num_sms;
#ifdef KVATTN_DEV_VARIANTS
        extra_items *= kv_attn_dev_splitx > 1 ? kv_attn_dev_splitx : 1;
#endif
        part_rows = extra_items * KV_MAX_TILE_ROWS;
        const int64_t rows_all = sat_mul(sat_mul(rows_q, H), pmax);
        if (rows_all < part_rows) part_rows = rows_all;
    }
    pl->max_items = sat_mul(Hk, tiles_max);
    pl->max_items = pl->max_items > INT64_MAX - extra_items ? INT64_MAX : pl->max_items + extra_items;
    if (pl->max_items > 0x7fffffff) pl->max_items = 0x7fffffff;
    pl->max_combine = part_rows > 0 ? pl->max_items : 0;
    pl->max_part_rows = part_rows > 0x7fffffff ? 0x7fffffff : part_rows;
    size_t off = round256(sizeof(kv_attn_ws_header));
    pl->off_prefix = off;
    off += round256((size_t)(B + 1) * sizeof(int32_t));
    pl->off_items = off;
    off += round256((size_t)pl->max_items * sizeof(kv_item));
    pl->off_pitems = off;
    off += round256((size_t)pl->max_items * sizeof(kv_item));
    pl->off_combine = off;
    off += round256((size_t)pl->max_combine * sizeof(kv_combine));
    pl->off_comb_done = off;
    off += round256((size_t)pl->max_combine * sizeof(int32_t));
    pl->off_part_o = off;
    off += round256((size_t)pl->max_part_rows * pl->pdp * sizeof(float));
    pl->off_part_ml = off;
    off += round256((size_t)pl->max_part_rows * sizeof(float2));
    /* the rotated new keys of an early step that appends with rotary (kv_attn_early, kv_attn_item): every call that
     * appends with rotary reserves them, whatever the device's flags, and a call past KV_SCHED_APPEND_UNITS (plain
     * order) reserves as many as the largest early one, so that a workspace sized for a larger call also serves a
     * smaller one */
    pl->off_rot_k = off; /* = off_part_ml + round256(its bytes): kv_rot_k derives it so */
    if (p->rotary_cos && kv_new_rows(p) > 0) {
        const int64_t units = kv_new_rows(p) * Hk;
        off += round256((size_t)(units < KV_SCHED_APPEND_UNITS ? units : KV_SCHED_APPEND_UNITS) * p->head_dim * 2);
    }
    pl->bytes = off;
}

/* The fast kernels load 16-byte chunks of q and the caches and store element pairs of out. A varlen call's q and
 * out batch strides are unused (kvattn.h; kv_row_offset never reads them), so any value there keeps the fast path. */
static int attn_fast_layout_ok(const kvattn_params *p) {
    const uintptr_t mis = ((uintptr_t)p->q | (uintptr_t)p->k_cache | (uintptr_t)p->v_cache) & 15;
    const int varlen = p->cu_seqlens_q != NULL;
    const int64_t s8 = (varlen ? 0 : p->q_batch_stride) | p->q_row_stride | p->q_head_stride | p->k_batch_stride |
                       p->k_row_stride | p->k_head_stride | p->v_batch_stride | p->v_row_stride | p->v_head_stride;
    const int64_t s2 = (varlen ? 0 : p->out_batch_stride) | p->out_row_stride | p->out_head_stride;
    return mis == 0 && ((uintptr_t)p->out & 3) == 0 && (s8 & 7) == 0 && (s2 & 1) == 0;
}

int kv_attn_supported(const kvattn_params *p) {
    int dp, stages;
    RETURN_IF(p->dtype != KVATTN_F16 && p->dtype != KVATTN_BF16, KVATTN_ERR_UNSUPPORTED,
              "dtype=%d: the CUDA backend supports fp16 (%d) and bf16 (%d)", p->dtype, KVATTN_F16, KVATTN_BF16);
    RETURN_IF(p->head_dim % 8 != 0 || !attn_variant(p->head_dim, &dp, &stages) || p->head_dim < 8,
              KVATTN_ERR_UNSUPPORTED, "head_dim=%d: the CUDA backend supports multiples of 8 from 8 to 256",
              p->head_dim);
    RETURN_IF(p->rotary_cos && p->rotary_dtype != KVATTN_F32 && p->rotary_dtype != p->dtype, KVATTN_ERR_UNSUPPORTED,
              "rotary_dtype=%d: must be fp32 (%d) or the dtype of q (%d)", p->rotary_dtype, KVATTN_F32, p->dtype);
    /* the kernels pack a sequence's query rows with its heads (n_q x H/Hk rows, kv_seq_rows) in int32 tiles */
    const int64_t q_rows = p->cu_seqlens_q ? p->total_q : p->seqlen_q;
    RETURN_IF(p->num_kv_heads > 0 && q_rows * (p->num_heads / p->num_kv_heads) > KV_MAX_PACKED_ROWS,
              KVATTN_ERR_UNSUPPORTED,
              "%s=%lld x H/Hk=%d: the CUDA backend packs at most %d query rows x heads per sequence",
              p->cu_seqlens_q ? "total_q" : "seqlen_q", (long long)q_rows, p->num_heads / p->num_kv_heads,
              KV_MAX_PACKED_ROWS);
    return KVATTN_OK;
}

size_t kv_attn_workspace_bytes(const kvattn_params *p, const kv_device_info *dev) {
    attn_plan pl;
    attn_plan_make(p, dev, &pl);
    return pl.bytes;
}

template <typename T>
static int launch_v0(const kvattn_params *p, const int8_t *seq_ok, const kv_device_info *dev, cudaStream_t stream) {
    const unsigned grid = dev->num_sms * 8;
    /* launched through kv_launch, which returns this launch's own status: cudaGetLastError would also return
     * (and clear) an error that the caller's code left pending */
    cudaError_t e;
    switch ((p->head_dim + 31) / 32) {
    case 1: e = kv_launch(kv_attn_v0_kernel<T, 1>, grid, 256, 0, stream, 0, *p, seq_ok); break;
    case 2: e = kv_launch(kv_attn_v0_kernel<T, 2>, grid, 256, 0, stream, 0, *p, seq_ok); break;
    case 3: e = kv_launch(kv_attn_v0_kernel<T, 3>, grid, 256, 0, stream, 0, *p, seq_ok); break;
    case 4: e = kv_launch(kv_attn_v0_kernel<T, 4>, grid, 256, 0, stream, 0, *p, seq_ok); break;
    case 5: e = kv_launch(kv_attn_v0_kernel<T, 5>, grid, 256, 0, stream, 0, *p, seq_ok); break;
    case 6: e = kv_launch(kv_attn_v0_kernel<T, 6>, grid, 256, 0, stream, 0, *p, seq_ok); break;
    case 7: e = kv_launch(kv_attn_v0_kernel<T, 7>, grid, 256, 0, stream, 0, *p, seq_ok); break;
    case 8: e = kv_launch(kv_attn_v0_kernel<T, 8>, grid, 256, 0, stream, 0, *p, seq_ok); break;
    default: return kv_set_error(KVATTN_ERR_INTERNAL, "head_dim=%d: no v0 kernel", p->head_dim);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* the failure is reported here, not left for the caller's next check */
        return kv_set_error(KVATTN_ERR_CUDA, "kv_attn_v0_kernel launch (head_dim=%d): %s", p->head_dim,
                            cudaGetErrorString(e));
    }
    return KVATTN_OK;
}

/* Blocks per SM of one attention kernel, after raising its smem limit once per device (both are host-side
 * attribute calls, no synchronization). One cache per kernel instantiation (the template arguments). */
#define KV_MAX_DEVICES 64
/* head dims whose decode steps may append early (kv_attn_early): DP 32's APPEND kernel spilled 64 bytes */
#define KV_APPEND_MIN_DP 64
template <typename T, int DP, int NS, bool DECODE, bool EARLY = false, bool SELF = false, bool APPEND = false,
          bool ROPE = false>
static int attn_blocks_per_sm(const kv_device_info *dev, size_t smem, int *blocks) {
    /* 0 = not yet. Host threads may race here: the value is published with release after the attribute is set
     * (as g_device_info_ready in backend.cu), so a reader that sees it also launches with the raised limit; two
     * first callers only repeat the calls. */
    static int cached[KV_MAX_DEVICES];
    const int d = dev->device >= 0 && dev->device < KV_MAX_DEVICES ? dev->device : 0;
    const int have = __atomic_load_n(&cached[d], __ATOMIC_ACQUIRE);
    if (have > 0) { *blocks = have; return KVATTN_OK; }
    KV_CUDA_CHECK_RET(cudaFuncSetAttribute(kv_attn_kernel<T, DP, NS, DECODE, EARLY, SELF, APPEND, ROPE>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int n = 0;
    KV_CUDA_CHECK_RET(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kv_attn_kernel<T, DP, NS, DECODE, EARLY, SELF, APPEND, ROPE>, KV_THREADS,
                                                      smem));
    if (n < 1) n = 1;
    if (n > 8) n = 8; /* the workspace bound assumes at most 8 * num_sms blocks */
#ifdef KVATTN_DEV_VARIANTS
    if (getenv("KVATTN_DEV_OCC_LOG")) { /* dev: what the occupancy query gave, once per kernel and device */
        cudaFuncAttributes fa;
        if (cudaFuncGetAttributes(&fa, kv_attn_kernel<T, DP, NS, DECODE, EARLY, SELF, APPEND, ROPE>) == cudaSuccess)
            fprintf(stderr, "kvattn occupancy: dtype %s DP %d NS %d decode %d early %d self %d append %d rope %d: %d "
                    "registers, %zu static + %zu dynamic smem bytes -> %d blocks per SM\n",
                    std::is_same<T, __half>::value ? "f16" : "bf16", DP, NS, (int)DECODE, (int)EARLY,
                    (int)SELF, (int)APPEND, (int)ROPE, fa.numRegs, fa.sharedSizeBytes, smem, n);
    }
#endif
    __atomic_store_n(&cached[d], n, __ATOMIC_RELEASE);
    *blocks = n;
    return KVATTN_OK;
}

/* The driver's tensor-map encoder, looked up once through the runtime (no link against libcuda); NULL when the
 * driver has none. Host threads may race here: they store the same value, published with release. */
static PFN_cuTensorMapEncodeTiled_v12000 kv_tmap_encoder(void) {
    static void *fn;
    static int state; /* 0: not looked up, 1: found, 2: none */
    int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (st == 0) {
        void *f = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
        if (e != cudaSuccess) (void)cudaGetLastError(); /* this lookup's own error: not left for the caller */
        const bool ok = e == cudaSuccess && q == cudaDriverEntryPointSuccess && f != NULL;
        if (ok) __atomic_store_n(&fn, f, __ATOMIC_RELAXED);
        st = ok ? 1 : 2;
        __atomic_store_n(&state, st, __ATOMIC_RELEASE);
    }
    return st == 1 ? (PFN_cuTensorMapEncodeTiled_v12000)__atomic_load_n(&fn, __ATOMIC_RELAXED) : NULL;
}

/* One cache tensor's map for the ws producer (kv_ws_tmaps): {D, Hk, rows, outer} elements with the tensor's strides,
 * boxes {64, 1, R, 1}. A dimension of extent 1 is never stepped: its stride is replaced by a valid one (the tensor's
 * own may be 0, e.g. flash_attn_varlen_func's packed keys, batch stride 0). False when TMA cannot serve the tensor. */
static bool kv_tmap_encode(PFN_cuTensorMapEncodeTiled_v12000 enc, CUtensorMap *m, const kvattn_params *p,
                           const void *base, int64_t bs, int64_t rs, int64_t hs, int64_t rows, int64_t outer, int R,
                           CUtensorMapL2promotion l2, bool log) {
    const int64_t D = p->head_dim, Hk = p->num_kv_heads;
    if (((uintptr_t)base & 15) != 0 || D < 1 || Hk < 1 || rows < 1 || outer < 1) {
        if (log) fprintf(stderr, "kvattn: tensor map: base %p or extents not served\n", base);
        return false;
    }
    /* a dimension of extent 1 gets the stride that packs it after the ones below it (the encoder's documentation
     * asks each stride to cover the dimensions below it) */
    int64_t st[3];
    st[0] = Hk > 1 ? hs * 2 : (D * 2 + 15) / 16 * 16;
    st[1] = rows > 1 ? rs * 2 : st[0] * Hk;
    st[2] = outer > 1 ? bs * 2 : st[1] * rows;
    for (int i = 0; i < 3; i++)
        if (st[i] <= 0 || st[i] % 16 != 0 || st[i] >= ((int64_t)1 << 40)) {
            if (log) fprintf(stderr, "kvattn: tensor map: stride %d (%lld bytes) not served\n", i, (long long)st[i]);
            return false;
        }
    const cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)Hk, (cuuint64_t)rows, (cuuint64_t)outer};
    const cuuint64_t strides[3] = {(cuuint64_t)st[0], (cuuint64_t)st[1], (cuuint64_t)st[2]};
    const cuuint32_t box[4] = {64, 1, (cuuint32_t)R, 1}, estr[4] = {1, 1, 1, 1};
    const CUresult r = enc(m, p->dtype == KVATTN_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                           4, (void *)base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                           CU_TENSOR_MAP_SWIZZLE_128B, l2,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS && log)
        fprintf(stderr, "kvattn: tensor map not encoded (CUresult %d): dims %lld %lld %lld %lld, strides %lld %lld %lld, "
                "box rows %d\n", (int)r, (long long)D, (long long)Hk, (long long)rows, (long long)outer,
                (long long)st[0], (long long)st[1], (long long)st[2], R);
    return r == CUDA_SUCCESS;
}

/* The ws producer's tensor maps for this call (KV_WS_TMA): rows R per box = BN for contiguous caches and for pages of
 * a multiple of BN rows, page_size for pages of 8 .. BN / 2 rows that divide BN; off (rows 0) for other page sizes,
 * unaligned tensors or strides, KVATTN_NO_TMA, or a driver without the encoder. Host work only (no CUDA call past
 * the encoder's one lookup), so it is the same inside a stream capture. */
static void kv_ws_tmaps_make(const kvattn_params *p, const kv_device_info *dev, int DP, int BN, kv_ws_tmaps *tm) {
    memset(tm, 0, sizeof *tm);
    if (!KV_WS_TMA || !kv_ws_tma_dp(DP) || !dev->tma || (p->dtype != KVATTN_BF16 && p->dtype != KVATTN_F16)) return;
    /* every box of 64 channels must start inside the head dim: boxes wholly past it (head dims <= DP - 64, e.g. 136 -
     * 192 at DP 256) were never run on the GPU, so those head dims keep the cp.async copies; boxes partly past it (the
     * channels >= D zero-filled) were, at DP 64 and 128 (test_grid's head dims 59 and 80) */
    if (p->head_dim <= DP - 64) return;
    const CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    const bool paged = p->block_table != NULL;
    const int ps = p->page_size;
    const int R = !paged ? BN : ps % BN == 0 ? BN : (ps >= 8 && BN % ps == 0) ? ps : 0;
    if (R == 0) return;
    PFN_cuTensorMapEncodeTiled_v12000 enc = kv_tmap_encoder();
    if (!enc) {
        if (dev->tma_log) fprintf(stderr, "kvattn: no tensor-map encoder in the driver\n");
        return;
    }
    /* cache rows at batch stride 0 are one row (flash_attn_varlen_func's packed keys: every sequence reads the same
     * storage): one outer coordinate, 0 */
    const bool outer0 = !paged && p->k_batch_stride == 0 && p->v_batch_stride == 0;
    const int64_t rows = paged ? ps : p->cache_capacity, outer = paged ? p->num_pages : outer0 ? 1 : p->cache_batch;
    if (!kv_tmap_encode(enc, &tm->k, p, p->k_cache, p->k_batch_stride, p->k_row_stride, p->k_head_stride, rows, outer,
                        R, l2, dev->tma_log) ||
        !kv_tmap_encode(enc, &tm->v, p, p->v_cache, p->v_batch_stride, p->v_row_stride, p->v_head_stride, rows, outer,
                        R, l2, dev->tma_log))
        return;
    tm->rows = R;
    tm->outer0 = outer0;
    if (dev->tma_log)
        fprintf(stderr, "kvattn: ws prefill K / V by tensor maps, boxes of %d rows%s\n", R, outer0 ? " (one row)" : "");
}

/* The sm_90a prefill kernel for DP 64 / 128 / 256 (others never get here): raises its smem limit once per
 * device (a == NULL: only that, and the tensor-map encoder's lookup), then launches the persistent grid over the
 * prefill list. */
template <typename T, int DP>
static cudaError_t launch_sm90_dp(const kvattn_params *p, const kv_attn_args *a, kv_item_list list,
                                  const kv_device_info *dev, cudaStream_t stream) {
    typedef kv_prefill_cfg<T, DP> CF;
    auto kernel = [] {
        if constexpr (kv_prefill_ws<DP>()) return kv_prefill_ws_kernel<T, DP, false>;
        else return kv_prefill_sm90_kernel<T, DP>;
    }();
    static int ready[KV_MAX_DEVICES];
    const int d = dev->device >= 0 && dev->device < KV_MAX_DEVICES ? dev->device : 0;
    if (!__atomic_load_n(&ready[d], __ATOMIC_ACQUIRE)) {
        cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, CF::SMEM_BYTES);
        if (e != cudaSuccess) return e;
        if constexpr (kv_prefill_ws<DP>() && kv_ws_tma_dp(DP)) { /* its tensor-map form */
            e = cudaFuncSetAttribute(kv_prefill_ws_kernel<T, DP, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     CF::SMEM_BYTES);
            if (e != cudaSuccess) return e;
        }
        __atomic_store_n(&ready[d], 1, __ATOMIC_RELEASE);
    }
    if (a == NULL) {
        if (kv_prefill_ws<DP>() && KV_WS_TMA && kv_ws_tma_dp(DP) && dev->tma) (void)kv_tmap_encoder();
        return cudaSuccess;
    }
    int ctas = dev->num_sms;
#ifdef KVATTN_DEV_VARIANTS
    if (kv_attn_dev_pctas > 0 && kv_attn_dev_pctas < ctas) ctas = kv_attn_dev_pctas;
#endif
    if constexpr (kv_prefill_ws<DP>()) {
        kv_ws_tmaps tm;
        kv_ws_tmaps_make(p, dev, DP, CF::BN, &tm); /* (rows 0 unless kv_ws_tma_dp(DP)) */
        auto with_tma = [] {
            if constexpr (kv_ws_tma_dp(DP)) return kv_prefill_ws_kernel<T, DP, true>;
            else return kv_prefill_ws_kernel<T, DP, false>;
        }();
        return kv_launch(tm.rows > 0 ? with_tma : kernel, ctas, CF::THREADS, CF::SMEM_BYTES, stream, dev->pdl, *p, *a,
                         list, tm);
    } else {
        return kv_launch(kernel, ctas, CF::THREADS, CF::SMEM_BYTES, stream, dev->pdl, *p, *a, list);
    }
}
template <typename T>
static int launch_sm90(int pdp, const kvattn_params *p, const kv_attn_args *a, kv_item_list list,
                       const kv_device_info *dev, cudaStream_t stream) {
    cudaError_t e = cudaSuccess;
    if (pdp == 64) e = launch_sm90_dp<T, 64>(p, a, list, dev, stream);
    else if (pdp == 128) e = launch_sm90_dp<T, 128>(p, a, list, dev, stream);
    else if (pdp == 256) e = launch_sm90_dp<T, 256>(p, a, list, dev, stream);
    else return kv_set_error(KVATTN_ERR_INTERNAL, "sm90 prefill kernel: no variant for DP %d", pdp);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* reported here, not left for the caller's next check */
        return kv_set_error(KVATTN_ERR_CUDA, "sm90 prefill kernel (DP %d): %s", pdp, cudaGetErrorString(e));
    }
    return KVATTN_OK;
}

/* Packed query rows of the longest sequence at most (total_q or seqlen_q, times G): no more than KV_DECODE_ROWS
 * means the call has only decode items */
static int64_t attn_max_rows(const kvattn_params *p) {
    const int64_t G = p->num_heads / (p->num_kv_heads > 0 ? p->num_kv_heads : 1);
    return (p->cu_seqlens_q ? (int64_t)p->total_q : (int64_t)p->seqlen_q) * G;
}
/* Whether a call with both lists runs the decode kernel first (see launch_fast) */
static bool attn_decode_first(const kvattn_params *p, const kv_device_info *dev) {
    return attn_max_rows(p) > KV_DECODE_ROWS && dev->overlap && p->cu_seqlens_q && p->total_q <= p->batch;
}

/* The scheduler (with the finalize step), then the prefill kernel over the prefill items and the decode kernel
 * over the decode items; the split combine runs inside them. mode: 0 = scheduler only (the prologue), 1 =
 * attention kernels only, -1 = prepare (attributes and occupancy, launches nothing). */
template <typename T, int DP, int NS, int NSD>
static int launch_fast(const kvattn_params *p, const attn_plan *pl, const kv_attn_args *args, const kv_device_info *dev,
                       int mode, cudaStream_t stream) {
    int per_dec = 1, per_pre = 1;
    int per_early = 1; /* the early-start decode kernel (kv_attn_early): same smem, its own registers */
    int st = attn_blocks_per_sm<T, DP, NSD, true>(dev, pl->smem_dec, &per_dec);
    if (st == KVATTN_OK) st = attn_blocks_per_sm<T, DP, NSD, true, true>(dev, pl->smem_dec, &per_early);
    int per_self = 1; /* (its smem attribute; launched on the early kernel's grid, which the plans assume) */
    if (st == KVATTN_OK) st = attn_blocks_per_sm<T, DP, NSD, true, true, true>(dev, pl->smem_dec, &per_self);
    /* a decode step that appends and starts early (kv_attn_early, DP >= KV_APPEND_MIN_DP) runs the APPEND
     * instantiations, so that the others keep their code (their tile loop's SASS) */
    const bool app = DP >= KV_APPEND_MIN_DP && args && (args->no_wait & KV_EARLY_START) && kv_new_rows(p) > 0;
    const bool rope = app && p->rotary_cos; /* (the ROPE instantiations: the items rotate their new keys) */
    int per_app = 1, per_app_self = 1; /* (per_app_self: its smem attribute, as per_self) */
    if constexpr (DP >= KV_APPEND_MIN_DP) {
        if (st == KVATTN_OK && ((app && !rope) || mode < 0)) /* (prepare, mode -1: args NULL) */
            st = attn_blocks_per_sm<T, DP, NSD, true, true, false, true>(dev, pl->smem_dec, &per_app);
        if (st == KVATTN_OK && ((app && !rope) || mode < 0))
            st = attn_blocks_per_sm<T, DP, NSD, true, true, true, true>(dev, pl->smem_dec, &per_app_self);
        if (st == KVATTN_OK && (rope || (mode < 0 && p->rotary_cos)))
            st = attn_blocks_per_sm<T, DP, NSD, true, true, false, true, true>(dev, pl->smem_dec, &per_app);
        if (st == KVATTN_OK && (rope || (mode < 0 && p->rotary_cos)))
            st = attn_blocks_per_sm<T, DP, NSD, true, true, true, true, true>(dev, pl->smem_dec, &per_app_self);
    }
    if (st == KVATTN_OK && !pl->sm90) st = attn_blocks_per_sm<T, DP, NS, false>(dev, pl->smem, &per_pre);
    if (st == KVATTN_OK && pl->sm90) st = launch_sm90<T>(pl->pdp, p, NULL, kv_item_list(), dev, stream);
    if (st != KVATTN_OK || mode < 0) return st;
    kv_attn_args a = *args;
    const int32_t early = a.no_wait & KV_EARLY_START; /* set by the caller (kv_attn_early): scheduler and decode */
    const int32_t lean = a.no_wait & KV_LEAN_SCHED;   /* (attn_no_wait): scheduler and early decode kernel */
    if (early) per_dec = app ? per_app : per_early; /* the grid the scheduler splits for is the early kernel's */
    a.grid_ctas = dev->num_sms * per_dec;
    /* v107: the split aims at every block of the grid (before, at 2 per SM whenever more fit, which left the others
     * without an item in lean plans); split_fit bounds it as the workspace does */
    a.split_blocks = (per_dec < pl->split_fit ? per_dec : pl->split_fit) * dev->num_sms;
#ifdef KVATTN_DEV_VARIANTS
    a.split_blocks *= kv_attn_dev_splitx > 1 ? kv_attn_dev_splitx : 1;
    if (kv_attn_dev_splitb > 0) a.split_blocks = kv_attn_dev_splitb;
#endif
    a.prefill_rows = pl->prefill_rows;
#ifdef KVATTN_DEV_VARIANTS
    if (getenv("KVATTN_DEV_OCC_LOG") && mode == 1) { /* dev: the decode grid and the block count the split aims at */
        static int said[2][2][2];
        int &s = said[early ? 1 : 0][lean ? 1 : 0][app ? 1 : 0];
        if (!s) {
            s = 1;
            fprintf(stderr, "kvattn decode grid: DP %d NS %d early %d lean %d append %d: %d blocks per SM, grid %d, split "
                    "aims at %d blocks\n", DP, NSD, early ? 1 : 0, lean ? 1 : 0, app ? 1 : 0, per_dec, a.grid_ctas,
                    a.split_blocks);
        }
    }
#endif
    if (mode == 0) {
        /* with the checks fused in, the scheduler is the call's first kernel: launched plainly (cuda_internal.cuh) */
        /* APPEND: the scheduler stores the new rows; ROPE: it rotates those it stores (kv_sched_append) */
        const bool ls = (a.no_wait & KV_LEAN_SCHED) != 0;
        void (*sched)(kvattn_params, kv_attn_args) =
            rope  ? (ls ? kv_attn_schedule_kernel<true, true, true> : kv_attn_schedule_kernel<false, true, true>)
            : app ? (ls ? kv_attn_schedule_kernel<true, true> : kv_attn_schedule_kernel<false, true>)
                  : (ls ? kv_attn_schedule_kernel<true> : kv_attn_schedule_kernel<false>);
        KV_CUDA_CHECK_RET(kv_launch(sched, 1, KV_SCHED_THREADS, 0, stream, a.fused_check ? 0 : dev->pdl, *p, a));
        return KVATTN_OK;
    }
    /* which lists can be non-empty is known from the shapes: a fixed-length batch of one query row per
     * sequence (and G <= 16) has only decode items; otherwise both kernels run (an empty list exits at once) */
    /* decode-first order for varlen calls: the decode kernel first, the prefill kernel's blocks starting on the
     * SMs that decode blocks leave (their items are short: 32 queries x their keys), so the prompts fill the
     * decode kernel's tail. The inflight step of PERF.md (60 decodes + 4 prompts of 512): 348.5 -> 338.8 us in
     * bench_cuda (thirty-first session, attn_notes.md); before, the prompts ran first and the decode kernel's long
     * items (up to a whole cache) formed the call's tail. A varlen call without decode items pays the empty decode
     * kernel's start (~3 us measured at 4 prompts of 512: +3.7%). A varlen call with no more query rows than
     * sequences (a decode step, attn_decode_first) also starts early (kv_attn_early). Fixed-length calls with more
     * than KV_DECODE_ROWS rows per sequence have no decode items: prefill kernel first. The second kernel of either
     * order does not wait for the first (see kv_attn_kernel). */
    const bool both = attn_max_rows(p) > KV_DECODE_ROWS;
    bool decode_first = both && dev->overlap && p->cu_seqlens_q; /* (includes every attn_decode_first call) */
#ifdef KVATTN_DEV_VARIANTS
    if (kv_attn_dev_order == 1 && both && dev->overlap) decode_first = true;
    if (kv_attn_dev_order == 2 && !attn_decode_first(p, dev)) decode_first = false;
#endif
    auto launch_prefill = [&](int32_t no_wait) -> int {
        a.no_wait = no_wait | early; /* early: only in decode-first order (kv_attn_early); starts on sched_done */
        if (pl->sm90) {
            kv_item_list list;
            list.items = a.pitems;
            list.count = &a.hdr->n_pitems;
            list.counter = &a.hdr->pitem_counter;
            return launch_sm90<T>(pl->pdp, p, &a, list, dev, stream);
        }
        KV_CUDA_CHECK_RET(kv_launch(kv_attn_kernel<T, DP, NS, false>, dev->num_sms * per_pre, KV_THREADS, pl->smem,
                                    stream, dev->pdl, *p, a));
        return KVATTN_OK;
    };
    auto launch_decode = [&](int32_t no_wait) -> int {
        a.no_wait = no_wait | early | lean;
        /* early && lean: its first item from its own lean plan (kv_attn_kernel); app implies early */
        void (*dec)(kvattn_params, kv_attn_args) =
            !early ? kv_attn_kernel<T, DP, NSD, true>
            : lean ? kv_attn_kernel<T, DP, NSD, true, true, true>
                   : kv_attn_kernel<T, DP, NSD, true, true>;
        if constexpr (DP >= KV_APPEND_MIN_DP) {
            if (early && rope)
                dec = lean ? kv_attn_kernel<T, DP, NSD, true, true, true, true, true>
                           : kv_attn_kernel<T, DP, NSD, true, true, false, true, true>;
            else if (early && app)
                dec = lean ? kv_attn_kernel<T, DP, NSD, true, true, true, true>
                           : kv_attn_kernel<T, DP, NSD, true, true, false, true>;
        }
        KV_CUDA_CHECK_RET(kv_launch(dec, a.grid_ctas, KV_THREADS, pl->smem_dec, stream, dev->pdl, *p, a));
        return KVATTN_OK;
    };
    if (decode_first) {
        st = launch_decode(0);
        return st != KVATTN_OK ? st : launch_prefill(KV_NO_WAIT_PREFILL);
    }
    if (both) {
        st = launch_prefill(0);
        if (st != KVATTN_OK) return st;
    }
    return launch_decode(both && dev->overlap ? KV_NO_WAIT_DECODE : 0);
}

/* launch_fast at decode depth pl->dec_stages when kv_dev_depths has kernels for it, else at the shipped NS */
template <typename T, int DP, int NS, int D = 2>
static int launch_fast_depth(const kvattn_params *p, const attn_plan *pl, const kv_attn_args *args,
                             const kv_device_info *dev, int mode, cudaStream_t stream) {
    if constexpr (D > 8) {
        return launch_fast<T, DP, NS, NS>(p, pl, args, dev, mode, stream);
    } else {
        if constexpr (D != NS && (kv_dev_depths(DP, std::is_same<T, __nv_bfloat16>::value) >> D & 1u)) {
            if (pl->dec_stages == D) return launch_fast<T, DP, NS, D>(p, pl, args, dev, mode, stream);
        }
        return launch_fast_depth<T, DP, NS, D + 1>(p, pl, args, dev, mode, stream);
    }
}

template <typename T>
static int launch_fast_dp(const kvattn_params *p, const attn_plan *pl, const kv_attn_args *args,
                          const kv_device_info *dev, int mode, cudaStream_t stream) {
    switch (pl->dp) {
    case 32: return launch_fast_depth<T, 32, 4>(p, pl, args, dev, mode, stream);
    case 64: return launch_fast_depth<T, 64, 4>(p, pl, args, dev, mode, stream);
    case 96: return launch_fast_depth<T, 96, 4>(p, pl, args, dev, mode, stream);
    case 128: return launch_fast_depth<T, 128, 3>(p, pl, args, dev, mode, stream);
    case 160: return launch_fast_depth<T, 160, 2>(p, pl, args, dev, mode, stream);
    case 192: return launch_fast_depth<T, 192, 2>(p, pl, args, dev, mode, stream);
    case 224: return launch_fast_depth<T, 224, 2>(p, pl, args, dev, mode, stream);
    case 256: return launch_fast_depth<T, 256, 2>(p, pl, args, dev, mode, stream);
    default: return kv_set_error(KVATTN_ERR_INTERNAL, "head_dim=%d: no attention variant", p->head_dim);
    }
}

/* The element type's dispatch of launch_fast_dp (see launch_fast for mode). */
static int launch_fast_any(const kvattn_params *p, const attn_plan *pl, const kv_attn_args *args,
                           const kv_device_info *dev, int mode, cudaStream_t stream) {
    return p->dtype == KVATTN_F16 ? launch_fast_dp<__half>(p, pl, args, dev, mode, stream)
                                  : launch_fast_dp<__nv_bfloat16>(p, pl, args, dev, mode, stream);
}

/* The scheduler's and the kernels' shared flags: early start (kv_attn_early), and with it for at most
 * KV_LEAN_SEQS sequences the lean plan (two warps plan a decode-only batch, in the scheduler and in every early
 * decode block, which starts its first item from it; attn_kernels.cuh). Both launches must see the same flags. */
static int32_t attn_no_wait(const kvattn_params *p, const kv_device_info *dev, int fused_check) {
    if (!kv_attn_early(p, dev, fused_check)) return 0;
    return KV_EARLY_START | (dev->lean && p->batch <= KV_LEAN_SEQS ? KV_LEAN_SCHED : 0);
}

/* Set KVATTN_ATTN_FORCE_V0 (dev builds) to route every call through the scalar kernel. */
int kv_attn_force_v0 = 0;

/* The finalize step alone (one block), when the scheduler does not run: B = 0 or the scalar path. */
__global__ void __launch_bounds__(1024) kv_finalize_kernel(int B, int8_t *seq_ok, kvattn_device_status *status) {
    kv_grid_wait(); /* the check flags */
    kv_grid_launch_dependents();
    kv_finalize_block(B, seq_ok, status);
}

static bool attn_fast(const kvattn_params *p, const attn_plan *pl, const kv_device_info *dev) {
    return !kv_attn_force_v0 && attn_fast_layout_ok(p) && pl->smem <= (size_t)dev->max_smem_optin;
}

/* Everything of kv_attn_launch that can fail on the host, done before the host half writes anything (the
 * append kernel): support, the workspace size, and the variant's one-time smem attribute / occupancy query.
 * So a call that returns an error has changed nothing. */
int kv_attn_prepare(const kvattn_params *p, const kv_device_info *dev, size_t attn_ws_bytes) {
    int st = kv_attn_supported(p);
    if (st != KVATTN_OK || p->batch == 0) return st;
    attn_plan pl;
    attn_plan_make(p, dev, &pl);
    if (!attn_fast(p, &pl, dev)) return KVATTN_OK;
    RETURN_IF(attn_ws_bytes < pl.bytes, KVATTN_ERR_WORKSPACE, "workspace: attention needs %zu bytes, got %zu",
              pl.bytes, attn_ws_bytes);
    return launch_fast_any(p, &pl, NULL, dev, -1, NULL);
}

static void attn_args_make(const attn_plan *pl, const int8_t *seq_ok, kvattn_device_status *status, void *attn_ws,
                           kv_attn_args *args) {
    unsigned char *ws = (unsigned char *)attn_ws;
    args->seq_ok = seq_ok;
    args->status = status;
    args->hdr = (kv_attn_ws_header *)ws;
    args->tile_prefix = (int32_t *)(ws + pl->off_prefix);
    args->items = (kv_item *)(ws + pl->off_items);
    args->pitems = (kv_item *)(ws + pl->off_pitems);
    args->combine = (kv_combine *)(ws + pl->off_combine);
    args->comb_done = (int32_t *)(ws + pl->off_comb_done);
    args->part_o = (float *)(ws + pl->off_part_o);
    args->part_ml = (float2 *)(ws + pl->off_part_ml);
    args->max_items = pl->max_items;
    args->max_combine = pl->max_combine;
    args->max_part_rows = pl->max_part_rows;
    args->grid_ctas = args->split_blocks = 0; /* set per variant */
    args->prefill_rows = pl->prefill_rows;
    args->dp = pl->pdp;
    args->no_wait = args->fused_check = 0;
}

/* The scheduler's block also runs the checks (kv_check_seq, then every live page slot of the batch as one flat
 * range, 8 slots per lane and 8192 per round) when that stays cheap: B <= KV_SCHED_SEQS and, with
 * a block table, at most KV_FUSED_CHECK_SLOTS slots (B x max_pages_per_seq: at most eight rounds, fewer for the
 * live slots); otherwise the check kernel (a block per sequence) runs them. Saves the check kernel's launch, and
 * lets a decode step without an append start early (kv_attn_early): its slot pass then runs beside the decode
 * kernel. Measured (attn_notes.md, twelfth session; bench_cuda --quick, two rounds, a bound of 70000 standing
 * for 65536): 40960 -> 65536 took 8x8192 page 1 (65536 slots) from 99.2 - 99.8 to 87.8 - 88.1 us, 64x16384 page 16
 * (also 65536) unchanged; 262144 also took 64x4096 page 1 from ~283 to ~276 us, but 128x2048 page 1 from ~290 to
 * ~297 and 256x1024 page 1 from ~303 to ~342 us (short items then wait for their sequences' verdicts behind a long
 * slot pass). (v18/v19, before the coalesced slot pass and early start: 65536 slots made 8x8192 page 1 take 133 us
 * instead of 110 us.) */
#define KV_FUSED_CHECK_SLOTS 65536
int kv_attn_check_fused(const kvattn_params *p, const kv_device_info *dev) {
    if (p->batch <= 0 || p->batch > KV_SCHED_SEQS || kv_attn_supported(p) != KVATTN_OK) return 0;
    if (p->block_table && (int64_t)p->batch * p->max_pages_per_seq > KV_FUSED_CHECK_SLOTS) return 0;
    attn_plan pl;
    attn_plan_make(p, dev, &pl);
    return attn_fast(p, &pl, dev) ? 1 : 0;
}

/* Early start (KV_EARLY_START): a call whose checks the scheduler runs (fused) and that runs the decode kernel
 * first (only decode items, or the decode-first order of launch_fast) lets the decode kernel start on the
 * scheduler's items_ready flag, before the scheduler's page-slot pass and finalize step. A sequence's output is
 * then written only once its seq_ok is final (decode items gate their writes; the prefill items of a failed
 * sequence are emptied before the prefill kernel starts on sched_done). The page-slot pass is on the decode
 * kernel's critical path otherwise (~3 kcycles for 2048 slots, ~9.5 for 16384: attn_notes.md).
 * A call that appends starts early only when it has head_dim > 32, 16-byte aligned k_new / v_new rows and at most
 * KV_SCHED_APPEND_UNITS (new row, kv head) units. Then there is no append kernel: the decode items read their new
 * keys from k_new / v_new (without rotary: the bits the cache will hold, since the append copies) or, with rotary,
 * rotate them into the workspace first and read them there (kv_attn_item; kv_rope_k8 gives the append kernel's bits),
 * so no attention item waits for a store; the scheduler stores the rows of the ok sequences while the decode kernel
 * runs (kv_sched_append, attn_kernels.cuh), before sched_done, on which the prefill items of a decode-first call
 * start (with rotary: the values and the keys no decode item holds; a decode item stores its rotated keys at its
 * end, once its sequence's verdict is final). So a row that one sequence appends and another reads in the same call
 * (shared pages or cache rows) may be read before or after its store (docs/DECISIONS.md). The scheduler is one
 * block: a larger append keeps the append kernel. Measured against that plain order (attn_notes.md): without rotary
 * (thirty-fourth session) back to back 14% faster at 8x8192, up to 31% at 16x512; with rotary (thirty-fifth) 17% at
 * 8x8192, 14 - 35% at caches of 256 - 512; no eligible shape slower beyond noise. */
int kv_attn_early(const kvattn_params *p, const kv_device_info *dev, int fused_check) {
    if (!dev->early || !fused_check || p->batch <= 0 || p->batch > KV_SCHED_SEQS) return 0;
    if (!(attn_max_rows(p) <= KV_DECODE_ROWS || attn_decode_first(p, dev))) return 0;
    if (kv_new_rows(p) == 0) return 1;
    int dp = 0, ns = 0; /* (the APPEND kernels exist for DP >= KV_APPEND_MIN_DP) */
    if (!attn_variant(p->head_dim, &dp, &ns) || dp < KV_APPEND_MIN_DP) return 0;
    return dev->early_append && kv_append_vectorizable(p) &&
                   kv_new_rows(p) * p->num_kv_heads <= KV_SCHED_APPEND_UNITS
               ? 1
               : 0;
}

int kv_attn_launch_prologue(const kvattn_params *p, int8_t *seq_ok, kvattn_device_status *status, void *attn_ws,
                            size_t attn_ws_bytes, const kv_device_info *dev, int fused_check, cudaStream_t stream) {
#if KV_DEV_PLAN_DELAY /* dev builds only (attn_kernels.cuh): the lean plan's spin, from KVATTN_DEV_PLAN_DELAY, once */
    static int delay_set;
    if (!delay_set) {
        const int d = getenv("KVATTN_DEV_PLAN_DELAY") ? atoi(getenv("KVATTN_DEV_PLAN_DELAY")) : 0;
        KV_CUDA_CHECK_RET(cudaMemcpyToSymbol(kv_dev_plan_delay, &d, sizeof d));
        delay_set = 1;
    }
#endif
    attn_plan pl;
    bool fast = false;
    if (p->batch > 0 && kv_attn_supported(p) == KVATTN_OK) {
        attn_plan_make(p, dev, &pl);
        fast = attn_fast(p, &pl, dev);
    }
    if (fused_check && !fast) return kv_set_error(KVATTN_ERR_INTERNAL, "fused check without the fast kernels");
    if (!fast) {
        KV_CUDA_CHECK_RET(kv_launch(kv_finalize_kernel, 1, 1024, 0, stream, dev->pdl, (int)p->batch, seq_ok, status));
        return KVATTN_OK;
    }
    RETURN_IF(attn_ws == NULL || attn_ws_bytes < pl.bytes, KVATTN_ERR_WORKSPACE,
              "workspace: attention needs %zu bytes, got %zu", pl.bytes, attn_ws ? attn_ws_bytes : (size_t)0);
    kv_attn_args args;
    attn_args_make(&pl, seq_ok, status, attn_ws, &args);
    args.fused_check = fused_check;
    args.no_wait = attn_no_wait(p, dev, fused_check);
    return launch_fast_any(p, &pl, &args, dev, 0, stream);
}

int kv_attn_launch(const kvattn_params *p, const int8_t *seq_ok, void *attn_ws, size_t attn_ws_bytes,
                   const kv_device_info *dev, int fused_check, cudaStream_t stream) {
    int st = kv_attn_supported(p);
    if (st != KVATTN_OK) return st;
    if (p->batch == 0) return KVATTN_OK;
    attn_plan pl;
    attn_plan_make(p, dev, &pl);
    if (!attn_fast(p, &pl, dev))
        return p->dtype == KVATTN_F16 ? launch_v0<__half>(p, seq_ok, dev, stream)
                                      : launch_v0<__nv_bfloat16>(p, seq_ok, dev, stream);
    RETURN_IF(attn_ws == NULL || attn_ws_bytes < pl.bytes, KVATTN_ERR_WORKSPACE,
              "workspace: attention needs %zu bytes, got %zu", pl.bytes, attn_ws ? attn_ws_bytes : (size_t)0);
    kv_attn_args args;
    attn_args_make(&pl, seq_ok, NULL, attn_ws, &args);
    args.fused_check = fused_check;
    args.no_wait = attn_no_wait(p, dev, fused_check);
    return launch_fast_any(p, &pl, &args, dev, 1, stream);
}
