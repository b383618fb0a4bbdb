/* dev/pdl_visibility.cu: does a kernel launched with programmatic dependent launch (PDL), which never calls
 * griddepcontrol.wait, see the writes its predecessor made before it triggered the launch?
 *
 * kvattn's early-start decode kernel relies on it (DECISIONS.md, "What the early start relies on"). Each call's
 * scheduler resets the verdict bytes (seq_ok = KV_SEQ_PENDING) and the list flag (items_ready = 0), fences, and
 * only then triggers the decode kernel's launch; the decode blocks read the verdicts and poll the flag with relaxed
 * GPU-scope loads and never wait for the scheduler's grid. Had a decode block read a verdict or the flag as the
 * previous call left it, it would write an output, or read item lists, of the previous call. The PTX memory model
 * orders a trigger with nothing (only griddepcontrol.wait makes the primary's writes visible), so this harness
 * checks the hardware's behaviour with the same pattern, at the kernel's own grid size:
 *   K1 (the scheduler: one block of 256 threads, launched without PDL, as kvattn launches it when it fuses the
 *      checks): stores PENDING to NSEQ verdict bytes and 0 to the flag, __threadfence, a block barrier, triggers;
 *      then spins d1, writes this call's list (NLIST words = call), fences, releases the flag (st.release 1);
 *      spins d2 and stores the verdicts: 1 on even calls, 0 on odd ones.
 *   K2 (the decode kernel: 264 blocks of 128 threads, two per SM; launched with PDL after K1, never waits): thread
 *      0 of a block reads its verdict byte at once (relaxed), polls the flag (relaxed, then fence.acq_rel), reads
 *      the list by __ldcg, then polls its verdict until it is not PENDING. A violation: a first verdict read that
 *      is the previous call's final value, a list word that is not this call's, or a final verdict that is not
 *      this call's. Also counted: reads that saw PENDING / the flag 0 (K2 ran while K1 still worked, so the
 *      overlap the check needs really happened).
 * Calls go back to back in one stream (as a model's layers issue them); in a second round each is followed by a
 * stream synchronization (isolated); in a third, the pair is captured once in a CUDA graph (the PDL launch becomes
 * a programmatic edge) and replayed back to back, the call number set in both kernel nodes before each replay.
 * Usage: pdl_visibility [calls (20000)] [mutant]; exit 0: no violation and overlap seen in every round, 1: a violation,
 * 2: a round without overlap.
 * Build: nvcc -O2 -gencode arch=compute_90a,code=sm_90a dev/pdl_visibility.cu -o pdl_visibility */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

#define NSEQ 64
#define NLIST 512
#define PENDING 2
#define GRID 264

/* the harness's own mutant (argument `mutant`): the scheduler triggers before its resets, as a scheduler that
 * broke the rule would; the check must then see stale reads (exit 1), or it could not fail */
__constant__ int kTriggerFirst;

struct shared_state {
    int ready;
    int list[NLIST];
    signed char verdict[NSEQ];
};
struct counters {
    unsigned long long stale_first, bad_list, bad_final; /* violations */
    unsigned long long first_pending, flag_zero;         /* overlap seen */
};

static __device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
static __device__ __forceinline__ int ld_relaxed(const int *p) {
    int v;
    asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ int ld_relaxed_s8(const signed char *p) {
    int v;
    asm volatile("ld.relaxed.gpu.global.s8 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
static __device__ __forceinline__ void spin(unsigned ns) {
    const unsigned long long t0 = gtime();
    while (gtime() - t0 < ns) { }
}

__global__ void k_sched(shared_state *s, int call, unsigned d1, unsigned d2) {
    if (kTriggerFirst) { /* the mutant: trigger, let the dependents start, then reset */
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
        if (threadIdx.x == 0) spin(20000);
        __syncthreads();
    }
    for (int b = threadIdx.x; b < NSEQ; b += blockDim.x) s->verdict[b] = PENDING;
    if (threadIdx.x == 0) s->ready = 0;
    __threadfence();
    __syncthreads();
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (threadIdx.x == 0) spin(d1);
    __syncthreads();
    for (int i = threadIdx.x; i < NLIST; i += blockDim.x) s->list[i] = call;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(&s->ready), "r"(1) : "memory");
    if (threadIdx.x == 0) spin(d2);
    __syncthreads();
    for (int b = threadIdx.x; b < NSEQ; b += blockDim.x) s->verdict[b] = (signed char)((call & 1) ? 0 : 1);
}

__global__ void __launch_bounds__(128, 2) k_decode(shared_state *s, counters *c, int call) {
    extern __shared__ char pad[]; /* ~100 KB, so that two blocks share an SM as the decode kernel's do */
    if (threadIdx.x != 0) return;
    pad[0] = 0;
    const int b = blockIdx.x % NSEQ;
    const int mine = (call & 1) ? 0 : 1, prev = 1 - mine;
    const int v0 = ld_relaxed_s8(&s->verdict[b]);
    if (v0 == PENDING) atomicAdd(&c->first_pending, 1ull);
    else if (v0 == prev) atomicAdd(&c->stale_first, 1ull);
    int r = ld_relaxed(&s->ready);
    if (r == 0) atomicAdd(&c->flag_zero, 1ull);
    while (r == 0) {
        __nanosleep(32);
        r = ld_relaxed(&s->ready);
    }
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    int bad = 0;
    for (int i = (blockIdx.x * 8) % NLIST, k = 0; k < 8; k++) bad |= __ldcg(&s->list[i + k]) != call;
    if (bad) atomicAdd(&c->bad_list, 1ull);
    int v = v0;
    while (v == PENDING) {
        __nanosleep(64);
        v = ld_relaxed_s8(&s->verdict[b]);
    }
    if (v != mine) atomicAdd(&c->bad_final, 1ull);
}

int main(int argc, char **argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 20000;
    const int mutant = argc > 2 && !strcmp(argv[2], "mutant");
    CK(cudaMemcpyToSymbol(kTriggerFirst, &mutant, sizeof mutant));
    if (mutant) printf("MUTANT: the scheduler triggers before its resets (a violation is expected)\n");
    shared_state *s;
    counters *c, h;
    CK(cudaMalloc(&s, sizeof *s));
    CK(cudaMalloc(&c, sizeof *c));
    CK(cudaMemset(s, 0, sizeof *s));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const int smem = 100 * 1024;
    CK(cudaFuncSetAttribute(k_decode, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(GRID);
    cfg.blockDim = dim3(128);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    /* round 2: the pair captured once; its two kernel nodes found by their function */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t nodes[8], n_sched = NULL, n_dec = NULL;
    {
        const int one = 1;
        const unsigned zero = 0;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        k_sched<<<1, 256, 0, st>>>(s, one, zero, zero);
        CK(cudaLaunchKernelEx(&cfg, k_decode, s, c, one));
        CK(cudaStreamEndCapture(st, &graph));
        size_t n = 8;
        CK(cudaGraphGetNodes(graph, nodes, &n));
        for (size_t k = 0; k < n; k++) {
            cudaKernelNodeParams kp;
            if (cudaGraphKernelNodeGetParams(nodes[k], &kp) != cudaSuccess) continue;
            if (kp.func == (void *)k_sched) n_sched = nodes[k];
            if (kp.func == (void *)k_decode) n_dec = nodes[k];
        }
        if (!n_sched || !n_dec) {
            fprintf(stderr, "pdl_visibility: the captured graph lacks a kernel node\n");
            return 1;
        }
        CK(cudaGraphInstantiate(&exec, graph, 0));
    }
    const char *round_name[3] = {"back to back", "isolated (sync after each call)", "graph replays, back to back"};
    int fail = 0, overlap = 1; /* overlap: every round saw the decode kernel run while the scheduler worked */
    for (int round = 0; round < 3; round++) {
        CK(cudaMemset(c, 0, sizeof *c));
        unsigned x = 12345u + round;
        for (int i = 1; i <= calls; i++) {
            x = x * 1664525u + 1013904223u;
            unsigned d1 = (x >> 8) % 4000u, d2 = (x >> 20) % 12000u; /* 0 - 4 us, 0 - 12 us */
            if (round == 2) {
                cudaKernelNodeParams kp;
                CK(cudaGraphKernelNodeGetParams(n_sched, &kp));
                void *sa[4] = {&s, &i, &d1, &d2};
                kp.kernelParams = sa;
                CK(cudaGraphExecKernelNodeSetParams(exec, n_sched, &kp));
                CK(cudaGraphKernelNodeGetParams(n_dec, &kp));
                void *da[3] = {&s, &c, &i};
                kp.kernelParams = da;
                CK(cudaGraphExecKernelNodeSetParams(exec, n_dec, &kp));
                CK(cudaGraphLaunch(exec, st));
                continue;
            }
            k_sched<<<1, 256, 0, st>>>(s, i, d1, d2);
            CK(cudaGetLastError());
            CK(cudaLaunchKernelEx(&cfg, k_decode, s, c, i));
            if (round == 1) CK(cudaStreamSynchronize(st));
        }
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(&h, c, sizeof h, cudaMemcpyDeviceToHost));
        const unsigned long long reads = (unsigned long long)calls * GRID;
        printf("%s: %d calls x %d blocks: stale first verdicts %llu, stale list words %llu, wrong final verdicts %llu;"
               " first verdict read PENDING %llu (%.1f%%), flag read 0 %llu (%.1f%%)\n",
               round_name[round], calls, GRID, h.stale_first, h.bad_list,
               h.bad_final, h.first_pending, 100.0 * h.first_pending / reads, h.flag_zero, 100.0 * h.flag_zero / reads);
        fail |= h.stale_first || h.bad_list || h.bad_final;
        if (!h.first_pending) printf("  (this round never overlapped: nothing tested in it)\n");
        overlap &= h.first_pending > 0;
    }
    printf("pdl_visibility: %s\n", fail ? "VIOLATION: a PDL kernel saw its predecessor's pre-trigger writes undone"
                                   : overlap ? "every read saw this call's values" : "NOT TESTED (a round without overlap)");
    return fail ? 1 : overlap ? 0 : 2;
}
