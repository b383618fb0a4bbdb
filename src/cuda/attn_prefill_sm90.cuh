/* attn_prefill_sm90.cuh — the Hopper (sm_90a) prefill kernel: the item semantics of kv_attn_item<..., false>
 * (attn_kernels.cuh) computed with warpgroup MMA (wgmma). Included by attn_kernels.cuh after its helpers.
 * B sequences, H query heads, Hk KV heads, G = H / Hk, D head dim, DP = padded head dim (64, 128 or 256), BN keys
 * per KV tile. A packed row r of (sequence, kv_head) is query i = r / G of head kv_head * G + r % G.
 *
 * One block = 2 warpgroups (256 threads), KV_SM90_ROWS = 128 packed rows, warpgroup w owns rows [64w, 64w + 64);
 * one block per SM (persistent). Per item (see kv_sm90_item):
 * 1. Q tile -> smem in the 128-byte swizzled layout that wgmma reads (cp.async; with rotary through registers,
 *    rotated and rounded to T as kv_attn_item does);
 * 2. K and V tiles of BN keys stream through KS (K) and KS + 1 (V) smem stages by 16-byte cp.async (every thread
 *    of the block issues a share), KS - 1 tiles ahead; each row's address is resolved once per tile by
 *    kv_cache_offset into s_addr one iteration before its copy (paged caches with any page size: no TMA); rows
 *    outside [klo, khi), unmapped pages and channels >= D are zero-filled, never read;
 * 3. iteration t of a warpgroup: wait for P_{t-2} V_{t-2}, rescale O; issue S_t = Q K_t^T (wgmma m64nBNk16, both
 *    operands from smem) and O += P_{t-1} V_{t-1} (wgmma m64nDPk16, P from registers, V from smem N-major); the
 *    softmax of S_t (scale, softcap, ALiBi, masks only on the tiles that need them, log2 units, ex2.approx) runs
 *    while P_{t-1} V_{t-1} is still in flight;
 * 4. out = O / l and lse = ln(l) + max (0 and -inf for rows without keys), or the normalized fp32 partial of a
 *    split piece.
 * Measured on an H200 (dev/prefill_sm90_test.cu, causal bf16 D 128, H 32 / Hk 8, 16k tokens): BN 64 with 4 K
 * stages 177 / 293 / 356 TFLOP/s at B x L = 16 x 1024 / 4 x 4096 / 1 x 16384; BN 128 with 2 stages 73 / 174 / 301.
 * The kernel body exists only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); other targets compile an empty trap. */
#ifndef KVATTN_ATTN_PREFILL_SM90_CUH
#define KVATTN_ATTN_PREFILL_SM90_CUH

#define KV_SM90_ROWS 128 /* packed rows per prefill item */
#ifndef KV_SM90_EPI_PIN
#define KV_SM90_EPI_PIN 1 /* kv_sm90_epilogue: its pointers read once, converged (see there) */
#endif

/* The item list the kernel consumes: items[0, *count), handed out in order by atomicAdd on *counter. */
typedef struct kv_item_list {
    const kv_item *items;
    const int32_t *count;
    int32_t *counter;
} kv_item_list;

/* Launch configuration. BN = keys per KV tile, KS = smem stages of K: copies run KS - 1 tiles ahead (the copies,
 * not the tensor cores, bound the speed: deeper beats wider, see the figures above). VS = stages of V: KS + 1 when
 * the wait for P V is deferred to the next iteration (LATE, DP <= 128), else KS (DP = 256, whose smem holds no
 * extra V stage: it waits for P V at the end of each iteration, so its softmax does not overlap P V).
 * Dynamic smem: Q tile, KS stages of K, VS of V, plus 1 KB so the base can be aligned to the 1024-byte swizzle
 * atom (DP 128: 177 KiB dynamic + 5 KiB static). Supported DP: 64, 128, 256. BN_ and KS_ are for experiments (dev/). */
template <typename T, int DP, int BN_ = 64, int KS_ = (DP > 128 ? 2 : 4)> struct kv_sm90_cfg {
    static_assert(DP == 64 || DP == 128 || DP == 256, "kv_prefill_sm90_kernel: DP must be 64, 128 or 256");
    static_assert(BN_ % 32 == 0 && BN_ <= 128 && KS_ >= 2, "kv_prefill_sm90_kernel: BN and KS");
    static constexpr int BN = BN_;
    static constexpr int KS = KS_;
    static constexpr bool LATE = DP <= 128;
    static constexpr int VS = LATE ? KS + 1 : KS;
    static constexpr int NSLOT = KS + 1; /* row-address slots: tiles t+KS-2 .. t+KS of iteration t */
    static constexpr int THREADS = 256;
    static constexpr int Q_BYTES = KV_SM90_ROWS * DP * 2;
    static constexpr int KV_BYTES = BN * DP * 2; /* one stage of K or of V */
    static constexpr int SMEM_BYTES = Q_BYTES + (KS + VS) * KV_BYTES + 1024;
};

/* ---- wgmma wrappers --------------------------------------------------------------------------------------
 * Accumulator layout (m64nN, fp32): warp w of the warpgroup holds rows 16w + lane/4 (d[4n], d[4n+1]) and
 * 16w + lane/4 + 8 (d[4n+2], d[4n+3]) at columns 8n + 2 (lane % 4) + {0, 1}: the mma.sync m16n8 C layout
 * repeated over n. Register A (m64k16) is the mma.sync m16n8k16 A layout of each warp's 16 rows.
 * ssN: B K-major (trans-b 0); rsN: B N-major (trans-b 1). acc = 0 overwrites D. */
template <typename T> struct kv_wgmma;
#define KV_SM90_DEFINE_WGMMA(T, TY)                                                                 \
    template <> struct kv_wgmma<T> {                                                                \
        /* D(64x64 fp32) (+)= A(64x16, smem desc) * B(16x64, smem desc, K-major) */ \
        static __device__ __forceinline__ void ss64(float *d, uint64_t da, uint64_t db, int acc) { \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                   \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
                         : "l"(da), "l"(db), "r"(acc));                                      \
        }                                                                                     \
        /* D(64x96 fp32) (+)= A(64x16, smem desc) * B(16x96, smem desc, K-major) */ \
        static __device__ __forceinline__ void ss96(float *d, uint64_t da, uint64_t db, int acc) { \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"                                   \
                         "wgmma.mma_async.sync.aligned.m64n96k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, %48, %49, p, 1, 1, 0, 0;\n}\n" \
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]) \
                         : "l"(da), "l"(db), "r"(acc));                                      \
        }                                                                                     \
        /* D(64x128 fp32) (+)= A(64x16, smem desc) * B(16x128, smem desc, K-major) */ \
        static __device__ __forceinline__ void ss128(float *d, uint64_t da, uint64_t db, int acc) { \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                   \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                         : "l"(da), "l"(db), "r"(acc));                                      \
        }                                                                                     \
        /* D(64x64 fp32) += A(64x16, registers) * B(16x64, smem desc, MN-major) */ \
        static __device__ __forceinline__ void rs64(float *d, const uint32_t *a, uint64_t db, int acc) { \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                   \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n" \
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));             \
        }                                                                                     \
        /* D(64x128 fp32) += A(64x16, registers) * B(16x128, smem desc, MN-major) */ \
        static __device__ __forceinline__ void rs128(float *d, const uint32_t *a, uint64_t db, int acc) { \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                   \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n" \
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));             \
        }                                                                                     \
        /* D(64x256 fp32) += A(64x16, registers) * B(16x256, smem desc, MN-major) */ \
        static __device__ __forceinline__ void rs256(float *d, const uint32_t *a, uint64_t db, int acc) { \
            asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                   \
                         "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n" \
                         : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));             \
        }                                                                                     \
    };

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
KV_SM90_DEFINE_WGMMA(__nv_bfloat16, "bf16")
KV_SM90_DEFINE_WGMMA(__half, "f16")
#endif

static __device__ __forceinline__ void kv_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void kv_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void kv_wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Pins registers that an in-flight wgmma reads or writes, for the compiler (ptxas tracks wgmma registers itself
 * and waits for a product before any instruction that writes one of its registers). */
template <int N> static __device__ __forceinline__ void kv_fence_regs(float *r) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> static __device__ __forceinline__ void kv_fence_regs(uint32_t *r) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+r"(r[i])::"memory");
}
/* Generic-proxy smem writes (st.shared, cp.async) made visible to the async proxy (wgmma operand reads). */
static __device__ __forceinline__ void kv_fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/* Shared memory matrix descriptor, 128-byte swizzle: start address, leading / stride byte offsets. */
static __device__ __forceinline__ uint64_t kv_sm90_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((saddr & 0x3ffff) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
           (1ull << 62);
}
/* Byte offsets of the descriptors (checked by the unit test of dev/prefill_sm90_test.cu on an H200):
 * K-major, 128B swizzle (Q, K): LBO unused (16), SBO = 1024 between 8-row groups;
 * N-major, 128B swizzle (V): LBO = between 64-channel blocks (BN * 128 B), SBO = 1024 between 8-key groups. */

/* Byte offset of 16-byte chunk `ch` (channels 8ch .. 8ch+7) of row r in a tile of R rows: the tile is stored as
 * DP/64 column blocks of R rows x 128 bytes, chunk positions XOR-swizzled by r % 8 (the wgmma 128B swizzle;
 * 8 consecutive chunks of one row, as one quarter-warp writes them, hit all 32 banks once). */
template <int R> static __device__ __forceinline__ uint32_t kv_sw128(int r, int ch) {
    return (uint32_t)((ch >> 3) * (R * 128) + r * 128 + (((ch & 7) ^ (r & 7)) << 4));
}

template <bool B> struct kv_sm90_bool { static constexpr bool value = B; };

/* ---- pieces of an item's computation shared with kv_ws_consume (attn_prefill_ws.cuh) ------------------------
 * A thread holds rows rr0 and rr0 + 8 of its warpgroup's 64 (rr0 = 64 wg + 16 warp + lane / 4) and, per tile, the
 * scores sc[SN] of the m64nBN accumulator layout (key jt + 8 (k / 4) + 2 (lane % 4) + k % 2 of row h2 = k / 2 % 2). */
struct kv_sm90_rows {
    int32_t vlo[2], vhi[2], qkey[2]; /* the keys each row sees within the item, the row's query key position */
    float slope[2];                  /* ALiBi */
};
static __device__ __forceinline__ void kv_sm90_rows_get(kv_sm90_rows &w, const kvattn_params &p, const kv_item &it,
                                                        const kv_seq &s, int32_t s_k, int G, int b, int kvh, int rr0) {
#pragma unroll
    for (int h2 = 0; h2 < 2; h2++) {
        const int rr = rr0 + 8 * h2;
        const int32_t r = it.row0 + rr;
        w.vlo[h2] = 0;
        w.vhi[h2] = 0;
        w.qkey[h2] = 0;
        w.slope[h2] = 0.0f;
        if (rr < it.nrows) {
            const int32_t i = r / G;
            const kv_range vr = kv_visible_keys(i, s.n_q, s_k, p.causal, p.window_left, p.window_right);
            w.vlo[h2] = max(vr.lo, it.klo);
            w.vhi[h2] = min(vr.hi, it.khi);
            w.qkey[h2] = i + s_k - s.n_q;
            if (p.alibi_slopes) w.slope[h2] = p.alibi_slopes[(int64_t)b * p.alibi_batch_stride + kvh * G + (r - i * G)];
        }
    }
}
/* Tiles [*lo, *hi) of an item (relative to kt_begin, *lo >= t_min) where every row of the item sees every key:
 * their steps run the softmax without a mask (plain scores only; else the range is empty). */
template <int BN>
static __device__ __forceinline__ void kv_sm90_fast_tiles(const kvattn_params &p, const kv_item &it, const kv_seq &s,
                                                          int32_t s_k, int G, bool plain, int32_t kt_begin,
                                                          int32_t n_kt, int32_t t_min, int32_t *lo, int32_t *hi) {
    *lo = n_kt;
    *hi = n_kt;
    if (plain && it.nrows > 0) {
        const int32_t lo_max = max(kv_visible_keys((it.row0 + it.nrows - 1) / G, s.n_q, s_k, p.causal, p.window_left,
                                                   p.window_right).lo, it.klo);
        const int32_t hi_min = min(kv_visible_keys(it.row0 / G, s.n_q, s_k, p.causal, p.window_left,
                                                   p.window_right).hi, it.khi);
        *lo = max(t_min, (lo_max + BN - 1) / BN - kt_begin);
        *hi = max(*lo, min(n_kt, hi_min / BN - kt_begin));
    }
}
/* Softmax of the scores of the key tile starting at jt: masks, new max m2 (log2 units), P (fp32, in place in sc),
 * the thread's row sums l; corr = the rescale factor of the older O and l. GENERAL = false: plain full tiles (no
 * softcap, ALiBi or mask: the exponent is S * cs - max, one FFMA per score, no branch); GENERAL: the scores are
 * transformed to log2 units and masked first (the softcap / ALiBi transform a loop of its own, so that the common
 * masked tiles run, and fetch, only the short one). */
template <bool GENERAL, int SN>
static __device__ __forceinline__ void kv_sm90_softmax(const kvattn_params &p, float *sc, float *m2, float *l,
                                                       float *corr, const kv_sm90_rows &w, int32_t jt, float scale,
                                                       bool plain, int tq) {
    const float LOG2E = 1.4426950408889634f;
    float cs = scale * LOG2E;
    if constexpr (GENERAL) {
        cs = 1.0f;
        if (plain) {
#pragma unroll
            for (int k = 0; k < SN; k++) sc[k] *= scale * LOG2E;
        } else {
#pragma unroll
            for (int k = 0; k < SN; k++) {
                const int h2 = (k >> 1) & 1;
                const int32_t j = jt + (k >> 2) * 8 + tq * 2 + (k & 1);
                float x = kv_softcap(sc[k] * scale, p.softcap);
                if (p.alibi_slopes) x += kv_alibi_bias(w.slope[h2], w.qkey[h2], j);
                sc[k] = x * LOG2E;
            }
        }
#pragma unroll
        for (int k = 0; k < SN; k++) {
            const int h2 = (k >> 1) & 1;
            const int32_t j = jt + (k >> 2) * 8 + tq * 2 + (k & 1);
            if (j < w.vlo[h2] || j >= w.vhi[h2]) sc[k] = -CUDART_INF_F;
        }
    }
#pragma unroll
    for (int h2 = 0; h2 < 2; h2++) {
        float mx = -CUDART_INF_F;
#pragma unroll
        for (int n = 0; n < SN / 4; n++) mx = fmaxf(mx, fmaxf(sc[4 * n + 2 * h2], sc[4 * n + 2 * h2 + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mnew = fmaxf(m2[h2], mx * cs);
        const float msafe = mnew == -CUDART_INF_F ? 0.0f : mnew;
        corr[h2] = kv_exp2(m2[h2] - msafe); /* m2 = -inf: 0 */
        m2[h2] = mnew;
        float sum = 0.0f;
#pragma unroll
        for (int n = 0; n < SN / 4; n++) {
            const float e0 = kv_exp2(fmaf(sc[4 * n + 2 * h2], cs, -msafe));
            const float e1 = kv_exp2(fmaf(sc[4 * n + 2 * h2 + 1], cs, -msafe));
            sc[4 * n + 2 * h2] = e0;
            sc[4 * n + 2 * h2 + 1] = e1;
            sum += e0 + e1;
        }
        l[h2] = l[h2] * corr[h2] + sum;
    }
}
/* P (fp32 in sc) -> the A fragments of the P V product; only once the previous P V product is complete: a register
 * written while an in-flight wgmma reads it makes ptxas wait for that product first */
template <typename T, int KP>
static __device__ __forceinline__ void kv_sm90_pack_p(uint32_t (*pf)[4], const float *sc) {
#pragma unroll
    for (int kk = 0; kk < KP; kk++) {
        pf[kk][0] = kv_mma<T>::pack(sc[8 * kk + 0], sc[8 * kk + 1]);
        pf[kk][1] = kv_mma<T>::pack(sc[8 * kk + 2], sc[8 * kk + 3]);
        pf[kk][2] = kv_mma<T>::pack(sc[8 * kk + 4], sc[8 * kk + 5]);
        pf[kk][3] = kv_mma<T>::pack(sc[8 * kk + 6], sc[8 * kk + 7]);
    }
}
/* out = O / l and lse = ln(l) + max of the thread's two rows (0 and -inf for rows without keys), or the normalized
 * fp32 partial of a split piece */
template <typename T, int DP>
static __device__ __forceinline__ void kv_sm90_epilogue(const kvattn_params &p, const kv_attn_args &a,
                                                        const kv_item &it, const kv_seq &s, int G, int D, int b,
                                                        int kvh, const float *o, const float *m2, float *l, int rr0,
                                                        int tq) {
    T *og = (T *)p.out;
    /* The pointers that the branches below use, read here, where the warp is converged, and held in registers (the
     * empty asm keeps them from being read again). Read inside `tq == 0`, the lse pointer compiled to an LDC whose
     * result the branch on it waited for: ~35% of the ws kernel's epilogue stall samples at D 128 (ncu, 1 x 16384,
     * thirty-ninth session). KV_SM90_EPI_PIN=0 builds the old form. */
    float *lse_g = p.softmax_lse, *part_o = a.part_o;
    float2 *part_ml = a.part_ml;
    if (KV_SM90_EPI_PIN) asm volatile("" : "+l"(lse_g), "+l"(part_o), "+l"(part_ml));
#pragma unroll
    for (int h2 = 0; h2 < 2; h2++) {
        l[h2] += __shfl_xor_sync(0xffffffffu, l[h2], 1);
        l[h2] += __shfl_xor_sync(0xffffffffu, l[h2], 2);
    }
#pragma unroll
    for (int h2 = 0; h2 < 2; h2++) {
        const int rr = rr0 + 8 * h2;
        if (rr >= it.nrows) continue;
        const int32_t r = it.row0 + rr;
        const float inv = l[h2] > 0.0f ? 1.0f / l[h2] : 0.0f;
        const float lse = l[h2] > 0.0f ? (m2[h2] + log2f(l[h2])) * 0.69314718055994531f : -CUDART_INF_F;
        if (it.part >= 0) {
            float *po = part_o + (int64_t)(it.part + rr) * DP;
#pragma unroll
            for (int n = 0; n < DP / 8; n++)
                *(float2 *)(po + n * 8 + tq * 2) = make_float2(o[4 * n + 2 * h2] * inv, o[4 * n + 2 * h2 + 1] * inv);
            if (tq == 0) part_ml[it.part + rr] = kv_piece_ml(m2[h2], l[h2]);
        } else {
            const int64_t oo =
                kv_out_offset(p, b, s, G, kvh, r, p.out_batch_stride, p.out_row_stride, p.out_head_stride);
#pragma unroll
            for (int n = 0; n < DP / 8; n++) {
                const int c = n * 8 + tq * 2;
                if (c < D) {
                    T pair[2];
                    kv_out_from_float(&pair[0], o[4 * n + 2 * h2] * inv);
                    kv_out_from_float(&pair[1], o[4 * n + 2 * h2 + 1] * inv);
                    *(uint32_t *)(og + oo + c) = *(const uint32_t *)pair;
                }
            }
            if (tq == 0 && lse_g) kv_store_lse_at(lse_g, p, b, s, G, kvh, r, lse);
        }
    }
}

/* ---- one item ------------------------------------------------------------------------------------------- */
template <typename T, int DP, typename CF>
static __device__ __forceinline__ void kv_sm90_item(const kvattn_params &p, const kv_attn_args &a, const kv_item &it,
                                                    uint32_t sbase, uint64_t (*s_addr)[2][CF::BN],
                                                    const kv_item *next_item, unsigned long long t_item) {
    constexpr int BN = CF::BN, KS = CF::KS, VS = CF::VS, NSLOT = CF::NSLOT;
    constexpr int DIST = KS - 1; /* iteration t issues the copies of iteration t + DIST */
    constexpr int ROWS = KV_SM90_ROWS;
    constexpr int CH = DP / 8;     /* 16-byte chunks per row */
    constexpr int SN = BN / 2;     /* S accumulators per thread */
    constexpr int ON = DP / 2;     /* O accumulators per thread */
    constexpr int KQ = DP / 16;    /* k16 steps of Q K^T */
    constexpr int KP = BN / 16;    /* k16 steps of P V */
    const uint32_t sQ = sbase, sK = sbase + CF::Q_BYTES, sV = sK + KS * CF::KV_BYTES;
    const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int gq = lane >> 2, tq = lane & 3;
    const int b = it.b, kvh = it.kv_head;
    const kv_item_facts f = kv_item_facts_get(p, b);
    const kv_seq s = f.s;
    const int32_t s_k = f.s_k, cache_row = f.cache_row;
    const int G = f.G, D = f.D;
    const float scale = f.scale;
    const bool plain = f.plain;
    const T *qg = (const T *)p.q;
    const int32_t kt_begin = it.klo / BN;
    const int32_t kt_end = (int32_t)kv_ceil_div64(it.khi, BN);
    const int32_t n_kt = it.khi > it.klo ? kt_end - kt_begin : 0;

    /* the block-table entry of the K (tid < BN) or V row tid % BN of KV tile t (relative index), read one
     * iteration before row_addresses needs it (so the table read never stalls the tile being computed) */
    kv_row_addresser ra; /* of the K (tid < BN) or V tensor; threads >= 2 BN never use it */
    ra.init(p, b, cache_row, kvh, tid >= BN);
    auto page_read = [&](int32_t t) -> int32_t {
        const int32_t j = (kt_begin + t) * BN + tid % BN;
        return ra.table && tid < 2 * BN && t < n_kt && j >= it.klo && j < it.khi ? ra.page(s.L + j) : 0;
    };
    /* global addresses of those rows of tile t into slot, given their page; 0 where the row lies outside
     * [klo, khi) or its page is unmapped */
    auto row_addresses = [&](int32_t t, int slot, int32_t page) {
        if (tid < 2 * BN) {
            const int rr = tid % BN, which = tid / BN;
            const int32_t j = (kt_begin + t) * BN + rr;
            s_addr[slot][which][rr] = t < n_kt && j >= it.klo && j < it.khi ? ra.addr(s.L + j, page) : 0;
        }
    };
    /* cp.async of one K (which = 0) or V (which = 1) tile from the addresses in slot into stage. Thread tid copies
     * chunk tid % CH of rows tid / CH + k * (THREADS / CH): a multiple of 8 rows apart, so the swizzle of its
     * destination is the same for every k. */
    constexpr int RSTEP = CF::THREADS / CH;
    const int my_ch = tid % CH, my_row = tid / CH;
    const uint64_t ch_mask = my_ch * 8 < D ? ~0ull : 0ull;
    const uint32_t my_dst = kv_sw128<BN>(my_row, my_ch);
    auto load_tile = [&](int which, int slot, int stage) {
        const uint32_t dst = (which ? sV : sK) + stage * CF::KV_BYTES + my_dst;
        const uint64_t *rows = s_addr[slot][which] + my_row;
#pragma unroll
        for (int k = 0; k < BN / RSTEP; k++) {
            kv_copy16_row(dst + k * RSTEP * 128, rows[k * RSTEP] & ch_mask, my_ch * 16);
        }
    };

    /* copy group g (g >= 1) = K_g and V_{g-1}, issued at iteration g - DIST (the prologue issues groups 0 .. DIST;
     * group 0 = Q and K_0). Tile g's row addresses sit in slot g % NSLOT, computed one iteration before use. */
    auto issue_group = [&](int32_t g) {
        if (g < n_kt) load_tile(0, g % NSLOT, g % KS);
        if (g >= 1 && g - 1 < n_kt) load_tile(1, (g - 1) % NSLOT, (g - 1) % VS);
        kv_cp_async_commit();
    };

    /* 1. Q tile and the first copy groups (the first DIST + 2 tiles' table entries read together). The loops
     * below that run once per item are kept rolled: unrolled, this per-item code made short items wait for
     * instruction fetch (attn_notes.md v20). */
    int32_t first_pages[DIST + 2];
#pragma unroll
    for (int g = 0; g < DIST + 2; g++) first_pages[g] = page_read(g);
#pragma unroll 1
    for (int g = 0; g <= DIST; g++) row_addresses(g, g, first_pages[g]);
    int32_t next_page = page_read(DIST + 2); /* of the tile whose addresses are resolved after DIST + 1 */
    __syncthreads();
    KV_TL_ADD(1, 8, KV_TL_NOW() - t_item); /* dev timeline: setup (sequence facts, page reads, addresses) */
    const bool rope = p.rotary_cos != NULL;
    if (!rope) { /* Q by cp.async in group 0 (zero rows beyond nrows and channels >= D) */
#pragma unroll 1
        for (int e = tid; e < ROWS * CH; e += CF::THREADS) {
            const int rr = e / CH, ch = e - rr * CH;
            uint64_t row = 0;
            if (rr < it.nrows && ch * 8 < D)
                row = (uint64_t)(qg + kv_out_offset(p, b, s, G, kvh, it.row0 + rr, p.q_batch_stride, p.q_row_stride,
                                                    p.q_head_stride));
            kv_copy16_row(sQ + kv_sw128<ROWS>(rr, ch), row, ch * 16);
        }
    }
    if (n_kt > 0) {
#pragma unroll 1
        for (int g = 0; g <= DIST; g++) issue_group(g);
        row_addresses(DIST + 1, (DIST + 1) % NSLOT, first_pages[DIST + 1]);
    } else {
        kv_cp_async_commit();
        kv_cp_async_wait<0>(); /* Q copies land before the smem is reused */
    }
    if (rope) { /* Q through registers: all loads of a thread first, then rotary, then the smem stores */
        constexpr int QN = ROWS * CH / CF::THREADS;
        uint4 qv[QN];
#pragma unroll
        for (int k = 0; k < QN; k++) {
            const int e = tid + k * CF::THREADS, rr = e / CH, ch = e - rr * CH;
            qv[k] = make_uint4(0, 0, 0, 0);
            if (rr < it.nrows && ch * 8 < D)
                qv[k] = *(const uint4 *)(qg + kv_out_offset(p, b, s, G, kvh, it.row0 + rr, p.q_batch_stride,
                                                            p.q_row_stride, p.q_head_stride) + ch * 8);
        }
        const int32_t rope_R = p.rotary_dim;
#pragma unroll
        for (int k = 0; k < QN; k++) {
            const int e = tid + k * CF::THREADS, rr = e / CH, ch = e - rr * CH, c0 = ch * 8;
            T *vals = (T *)&qv[k];
            if (rr < it.nrows && c0 < D && c0 < rope_R) {
                /* pos before qo: the other order changes the DP 256 kernel's schedule (3% slower at 1x16384) */
                const int32_t pos = s.S + s.n_new - s.n_q + (it.row0 + rr) / G;
                const int64_t qo =
                    kv_out_offset(p, b, s, G, kvh, it.row0 + rr, p.q_batch_stride, p.q_row_stride, p.q_head_stride);
                kv_rope_q8<T>(p, qg + qo, c0, rope_R, pos, vals);
            }
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(sQ + kv_sw128<ROWS>(rr, ch)), "r"(qv[k].x),
                         "r"(qv[k].y), "r"(qv[k].z), "r"(qv[k].w)
                         : "memory");
        }
    }

    /* per-thread rows: rr = 64 wg + 16 warp + gq + 8 h2 */
    const int rr0 = wg * 64 + warp * 16 + gq;
    kv_sm90_rows w;
    kv_sm90_rows_get(w, p, it, s, s_k, G, b, kvh, rr0);
    float o[ON];
#pragma unroll
    for (int k = 0; k < ON; k++) o[k] = 0.0f;
    float m2[2] = {-CUDART_INF_F, -CUDART_INF_F}; /* running max, log2 units */
    float l[2] = {0.0f, 0.0f};                    /* this thread's part of the row sums */
    float sc[SN];
    uint32_t pf[KP][4]; /* P of the tile in the P V product (A fragments) */

    /* descriptors: Q (this warpgroup's 64 rows) and K are K-major, V is N-major */
    const uint64_t dq0 = kv_sm90_desc(sQ + wg * 64 * 128, 16, 1024);

    /* before a batch of products: every register they read or write is final (no move may land after the fence) */
    auto fence_all = [&]() {
        kv_fence_regs<SN>(sc);
        kv_fence_regs<ON>(o);
        kv_fence_regs<KP * 4>(&pf[0][0]);
        kv_wgmma_fence();
    };
    /* after a batch of products: all of them complete, O and P final for the compiler */
    auto products_done = [&]() {
        kv_wgmma_wait<0>();
        kv_fence_regs<ON>(o);
        kv_fence_regs<KP * 4>(&pf[0][0]);
    };
    /* O rescaled by the softmax's correction of its rows (the running max moved) */
    auto rescale_o = [&](const float *corr) {
#pragma unroll
        for (int k = 0; k < ON; k++) o[k] *= corr[(k >> 1) & 1];
    };
    /* S = Q K^T for the K tile in stage st (issued, not waited) */
    auto issue_s = [&](int st) {
        const uint64_t dk0 = kv_sm90_desc(sK + st * CF::KV_BYTES, 16, 1024);
#pragma unroll
        for (int kk = 0; kk < KQ; kk++) {
            const uint32_t qoff = (kk >> 2) * (ROWS * 128) + (kk & 3) * 32;
            const uint32_t koff = (kk >> 2) * (BN * 128) + (kk & 3) * 32;
            if constexpr (BN == 128) kv_wgmma<T>::ss128(sc, dq0 + (qoff >> 4), dk0 + (koff >> 4), kk > 0);
            else if constexpr (BN == 96) kv_wgmma<T>::ss96(sc, dq0 + (qoff >> 4), dk0 + (koff >> 4), kk > 0);
            else kv_wgmma<T>::ss64(sc, dq0 + (qoff >> 4), dk0 + (koff >> 4), kk > 0);
        }
        kv_wgmma_commit();
    };
    /* O += P V for the V tile in stage st (issued, not waited) */
    auto issue_pv = [&](int st) {
        const uint64_t dv0 = kv_sm90_desc(sV + st * CF::KV_BYTES, BN * 128, 1024);
#pragma unroll
        for (int kk = 0; kk < KP; kk++) {
            const uint64_t dv = dv0 + ((kk * 16 * 128) >> 4);
            if constexpr (DP == 64) kv_wgmma<T>::rs64(o, pf[kk], dv, 1);
            else if constexpr (DP == 128) kv_wgmma<T>::rs128(o, pf[kk], dv, 1);
            else kv_wgmma<T>::rs256(o, pf[kk], dv, 1);
        }
        kv_wgmma_commit();
    };
    /* softmax of S (key tile starting at jt): masks, new max, P (fp32, in place in sc), row sums; corr = rescale
     * factor of the older O and l. Two versions: plain full tiles (no softcap, ALiBi or mask: the exponent is
     * S * cs - max, one FFMA per score, no branch) and the general one (scores transformed to log2 units and
     * masked first). */
    auto softmax_body = [&](auto general, int32_t jt, float *corr) {
        kv_sm90_softmax<decltype(general)::value, SN>(p, sc, m2, l, corr, w, jt, scale, plain, tq);
    };
    /* P (fp32 in sc) -> the A fragments of the P V product; only once the previous P V product is complete: a
     * register written while an in-flight wgmma reads it makes ptxas wait for that product first */
    auto pack_p = [&]() { kv_sm90_pack_p<T, KP>(pf, sc); };
    /* DP = 256 main-loop step after the products of tile t were issued: softmax of S_t, wait for P_{t-1} V_{t-1}
     * (ptxas moves this wait up to the previous one: no overlap), rescale O, P_t -> registers */
    auto softmax_step = [&](auto general, int32_t jt, float *corr) {
        kv_wgmma_wait<1>();
        kv_fence_regs<SN>(sc);
        softmax_body(general, jt, corr);
        kv_fence_regs<SN>(sc);
        products_done();
        rescale_o(corr);
        pack_p();
    };

    /* 2-3. pipeline */
#ifdef KVATTN_TIMELINE
    long long c_cp = 0, c_mma = 0; /* dev timeline: cycles waiting for copies (+ barrier), for products */
    const long long c_item0 = clock64();
#endif
    if (n_kt > 0) {
        KV_TL_ADD(1, 9, KV_TL_NOW() - t_item); /* dev timeline: setup + copies issued */
        kv_cp_async_wait<DIST>(); /* group 0: Q and K_0 */
        kv_fence_proxy_async();   /* Q (st.shared or cp.async) and K_0 -> wgmma */
        __syncthreads();
        fence_all();
        KV_TL_ADD(1, 5, KV_TL_NOW() - t_item);
        issue_s(0);
        if (tid == 0 && next_item) /* the next item's record into L1 while this item runs */
            asm volatile("prefetch.global.L1 [%0];\n" ::"l"(next_item));
        kv_wgmma_wait<0>();
        kv_fence_regs<SN>(sc);
        float corr[2];
        softmax_body(kv_sm90_bool<true>(), kt_begin * BN, corr);
        /* Tiles where every row of the block sees every key (plain scores) run a step whose softmax has no
         * branch; the tiles before and after (window / causal edges, ragged ends) and softcap / ALiBi problems
         * run the general softmax. One loop with two step bodies (not a loop per kind): the code a short item
         * runs stays small (short items were bound by instruction fetch, see attn_notes.md v20). */
        int32_t t_fast_lo, t_fast_hi;
        kv_sm90_fast_tiles<BN>(p, it, s, s_k, G, plain, kt_begin, n_kt, 1, &t_fast_lo, &t_fast_hi);
        if constexpr (CF::LATE) {
            /* iteration t: wait for P_{t-2} V_{t-2}, rescale O, P_{t-1} -> registers; issue S_t = Q K_t and
             * O += P_{t-1} V_{t-1}; next copies; softmax of S_t, overlapping P V (ptxas hoists a wait for the
             * products to the top of its basic block, so that wait sits after the next barrier, not here) */
            auto step = [&](auto general, int32_t t) {
                KV_TLC_T0(c0);
                kv_cp_async_wait<DIST - 1>(); /* group t: K_t, V_{t-1} */
                kv_fence_proxy_async();
                __syncthreads(); /* all warpgroups done with K_{t-1} and V_{t-3}; addresses of t+DIST visible */
                KV_TLC_ACC(c_cp, c0);
                KV_TLC_T0(c1);
                products_done();
                KV_TLC_ACC(c_mma, c1);
                rescale_o(corr);
                pack_p();
                fence_all();
                issue_s(t % KS);
                issue_pv((t - 1) % VS);
                issue_group(t + DIST); /* stages of K_{t-1} and V_{t-3}: no product reads them any more */
                row_addresses(t + DIST + 1, (t + DIST + 1) % NSLOT, next_page);
                next_page = page_read(t + DIST + 2);
                KV_TLC_T0(c2);
                kv_wgmma_wait<1>();
                kv_fence_regs<SN>(sc);
                KV_TLC_ACC(c_mma, c2);
                softmax_body(general, (kt_begin + t) * BN, corr);
                kv_fence_regs<SN>(sc);
            };
            for (int32_t t = 1; t < n_kt; t++) {
                if (t >= t_fast_lo && t < t_fast_hi) step(kv_sm90_bool<false>(), t);
                else step(kv_sm90_bool<true>(), t);
            }
            KV_TLC_T0(c3);
            kv_cp_async_wait<0>(); /* V_{n-1} */
            kv_fence_proxy_async();
            __syncthreads();
            KV_TLC_ACC(c_cp, c3);
            products_done(); /* P_{n-2} V_{n-2} */
            rescale_o(corr);
            pack_p();
            fence_all();
            issue_pv((n_kt - 1) % VS);
        } else {
            pack_p();
            /* iteration t: issue S_t and P_{t-1} V_{t-1}, next copies, softmax of S_t, wait for P V, rescale O */
            auto step = [&](auto general, int32_t t) {
                kv_cp_async_wait<DIST - 1>(); /* group t: K_t, V_{t-1} */
                kv_fence_proxy_async();
                __syncthreads(); /* every warpgroup is done with K_{t-1} and V_{t-2}; addresses visible */
                fence_all();
                issue_s(t % KS);
                issue_pv((t - 1) % VS);
                issue_group(t + DIST);
                row_addresses(t + DIST + 1, (t + DIST + 1) % NSLOT, next_page);
                next_page = page_read(t + DIST + 2);
                softmax_step(general, (kt_begin + t) * BN, corr);
            };
            for (int32_t t = 1; t < n_kt; t++) {
                if (t >= t_fast_lo && t < t_fast_hi) step(kv_sm90_bool<false>(), t);
                else step(kv_sm90_bool<true>(), t);
            }
            kv_cp_async_wait<0>(); /* V_{n-1} */
            kv_fence_proxy_async();
            __syncthreads();
            fence_all();
            issue_pv((n_kt - 1) % VS);
        }
        KV_TLC_T0(c4);
        products_done();
        KV_TLC_ACC(c_mma, c4);
    }
#ifdef KVATTN_TIMELINE
    const long long c_epi0 = clock64();
    KV_TL_ADD(1, 10, c_cp);
    KV_TL_ADD(1, 11, c_mma);
    KV_TL_ADD(1, 12, n_kt);
    KV_TL_ADD(1, 13, c_epi0 - c_item0);
#endif

    /* 4. epilogue */
    kv_sm90_epilogue<T, DP>(p, a, it, s, G, D, b, kvh, o, m2, l, rr0, tq);
#ifdef KVATTN_TIMELINE
    KV_TL_ADD(1, 14, clock64() - c_epi0);
    KV_TL_ADD(1, 15, clock64() - c_item0);
#endif
}

/* Persistent prefill kernel: launched with num_SMs blocks of kv_sm90_cfg<T, DP>::THREADS threads and
 * kv_sm90_cfg<T, DP>::SMEM_BYTES of dynamic smem; each block takes items in list order until none is left (the
 * next index is claimed when an item starts, so the atomic's latency hides behind the item). */
template <typename T, int DP, int BN_ = kv_sm90_cfg<T, DP>::BN, int KS_ = kv_sm90_cfg<T, DP>::KS>
__global__ void __launch_bounds__(256, 1)
    kv_prefill_sm90_kernel(const __grid_constant__ kvattn_params p, kv_attn_args a, kv_item_list list) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    typedef kv_sm90_cfg<T, DP, BN_, KS_> CF;
    extern __shared__ __align__(1024) unsigned char kv_sm90_smem[];
    __shared__ uint64_t s_addr[CF::NSLOT][2][CF::BN]; /* K and V row addresses of the tiles in flight */
    __shared__ int s_item;
    const uint32_t sbase = (kv_smem_u32(kv_sm90_smem) + 1023u) & ~1023u;
    __shared__ int s_flag;
    KV_TL(1, 0, Min);
    /* items (scheduler) and appended rows (append kernel): PDL, see cuda_internal.cuh; after the decode kernel of
     * the same call (a.no_wait & KV_NO_WAIT_PREFILL) no wait, as in kv_attn_kernel: the list is read from L2 */
    if (a.no_wait & KV_EARLY_START) { /* after an early decode kernel: the scheduler's end (kv_attn_kernel) */
        if (threadIdx.x == 0)
            while (kv_ld_acquire(&a.hdr->sched_done) == 0) __nanosleep(64);
        __syncthreads();
    } else if (!(a.no_wait & KV_NO_WAIT_PREFILL)) {
        kv_grid_wait();
    }
    KV_TL(1, 1, Min);
    KV_TL(1, 2, Max);
    kv_grid_launch_dependents();
    const int count = __ldcg(list.count);
    if (threadIdx.x == 0) s_item = atomicAdd(list.counter, 1);
    __syncthreads();
    int idx = s_item;
    while (idx < count) {
        const kv_item it = kv_item_ldcg(list.items, idx);
        int next = 0;
        if (threadIdx.x == 0) next = atomicAdd(list.counter, 1);
        const unsigned long long t_item = KV_TL_NOW();
        kv_sm90_item<T, DP, CF>(p, a, it, sbase, s_addr, threadIdx.x == 0 && next < count ? list.items + next : NULL,
                                t_item);
        if (it.comb >= 0) { /* a split piece: the block that finishes a tile's last piece merges them */
            __syncthreads();
            kv_attn_piece_done<T>(p, a, it.comb, it.b, &s_flag);
        }
        KV_TL_ADD(1, 6, KV_TL_NOW() - t_item);
        KV_TL_ADD(1, 7, 1);
        if (threadIdx.x == 0) s_item = next;
        __syncthreads(); /* s_item written; smem (Q, stages, addresses) is reused by the next item */
        idx = s_item;    /* read before the next item's first barrier, after which thread 0 may write it */
    }
    KV_TL(1, 3, Min);
    KV_TL(1, 4, Max);
#else
    __trap(); /* sm_90a only: never launched on other targets */
#endif
}

#endif
