/* dev/pdl_visibility.cu: does a kernel launched with programmatic dependent launch (PDL), which never calls
 * griddepcontrol.wait, see the writes its predecessor made before it triggered the launch?
 *
 * kvattn's early start relies on it (DECISIONS.md, "What the early start relies on"). Each call's scheduler
 * resets the verdict bytes (seq_ok = KV_SEQ_PENDING) and the flags (items_ready = sched_done = 0), fences, and
 * only then triggers the decode kernel's launch. The decode blocks read the verdicts and poll items_ready with
 * relaxed GPU-scope loads; the prefill kernel of a decode-first call, a PDL dependent of the decode kernel (two
 * hops from the scheduler), polls sched_done with acquire loads; none of them waits for the scheduler's grid. Had
 * one read a verdict or a flag as the previous call left it, it would write an output, or read item lists, of the
 * previous call. The PTX memory model orders a trigger with nothing (only griddepcontrol.wait makes the
 * primary's writes visible), so this harness checks the hardware's behaviour with the same pattern:
 *   K1 (the scheduler: one block of 1024 threads, launched without PDL, as kvattn launches it when it fuses the
 *      checks): stores PENDING to NSEQ verdict bytes and 0 to both flags, __threadfence, a block barrier,
 *      triggers; then spins d1, writes this call's list (NLIST words = call), fences, releases ready; spins d2,
 *      stores the verdicts (1 on even calls, 0 on odd ones); spins d3, writes the prefill list, fences, releases done.
 *   K2 (the decode kernel: two blocks of 128 threads per SM; PDL after K1, triggers its own dependents first,
 *      never waits): thread 0 of a block reads its verdict byte at once (relaxed), polls ready (relaxed, then
 *      fence.acq_rel), reads the list by __ldcg, then polls its verdict until it is not PENDING.
 *   K3 (the prefill kernel: one block per SM; PDL after K2, never waits): polls done (acquire), reads the
 *      prefill list by __ldcg.
 * A violation: a first verdict read that is the previous call's final value, a list word that is not this
 * call's, or a final verdict that is not this call's. Also counted: reads that saw PENDING or a flag 0 (the
 * dependents ran while K1 still worked, so the overlap the check needs really happened).
 * Calls are numbered across rounds, so verdicts alternate from call to call. Calls go back to back in one
 * stream (as a model's layers issue them); in a second round each is followed by a stream synchronization
 * (isolated); in a third, the three kernels are captured once in a CUDA graph (each PDL launch becomes a
 * programmatic edge) and replayed back to back, the call number set in the kernel nodes before each replay.
 * Usage: pdl_visibility [calls (20000)] [mutant]; exit 0: no violation and overlap seen in every round, 1: a
 * violation, 2: a round without overlap (nothing tested) or bad arguments.
 * Build: make dev (build/dev/pdl_visibility), or nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Iinclude
 *        -Isrc --expt-relaxed-constexpr dev/pdl_visibility.cu -o pdl_visibility */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
/* the library's own flag and verdict helpers (kv_ld_relaxed, kv_ld_relaxed_s8, kv_ld_acquire, kv_st_release,
 * kv_lists_acquire, kv_seq_verdict) and constants (KV_SEQ_PENDING, KV_SCHED_THREADS), so that the harness runs
 * the very loads the kernels run */
#include "cuda/attn_kernels.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

#define NSEQ 64
#define NLIST 512
#define PENDING KV_SEQ_PENDING
#define SCHED_THREADS KV_SCHED_THREADS

/* the harness's own mutant (argument `mutant`): the scheduler triggers before its resets, as a scheduler that
 * broke the rule would; the check must then see stale reads (exit 1), or it could not fail */
__constant__ int kTriggerFirst;

struct shared_state {
    int32_t ready, done; /* items_ready, sched_done */
    int list[NLIST];     /* the decode items */
    int plist[NLIST];    /* the prefill items */
    int8_t verdict[NSEQ];
};
struct counters {
    unsigned long long stale_first, bad_list, bad_final, bad_plist; /* violations */
    unsigned long long first_pending, flag_zero, done_zero;         /* overlap seen */
};

static __device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
static __device__ __forceinline__ void spin(unsigned ns) {
    const unsigned long long t0 = gtime();
    while (gtime() - t0 < ns) { }
}

/* the scheduler: resets, fence, barrier, trigger; then the lists (released on ready), the verdicts, and last the
 * prefill lists (released on done), as kv_attn_schedule_kernel orders them in an early-start call */
__global__ void k_sched(shared_state *s, int call, unsigned d1, unsigned d2, unsigned d3) {
    if (kTriggerFirst) { /* the mutant: trigger, let the dependents start, then reset */
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
        if (threadIdx.x == 0) spin(20000);
        __syncthreads();
    }
    for (int b = threadIdx.x; b < NSEQ; b += blockDim.x) s->verdict[b] = PENDING;
    if (threadIdx.x == 0) s->ready = s->done = 0;
    __threadfence();
    __syncthreads();
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (threadIdx.x == 0) spin(d1);
    __syncthreads();
    for (int i = threadIdx.x; i < NLIST; i += blockDim.x) s->list[i] = call;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) kv_st_release(&s->ready, 1);
    if (threadIdx.x == 0) spin(d2);
    __syncthreads();
    for (int b = threadIdx.x; b < NSEQ; b += blockDim.x) s->verdict[b] = (int8_t)((call & 1) ? 0 : 1);
    if (threadIdx.x == 0) spin(d3); /* (so that the prefill kernel, launched a hop later, finds done still 0) */
    __syncthreads();
    for (int i = threadIdx.x; i < NLIST; i += blockDim.x) s->plist[i] = call;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) kv_st_release(&s->done, 1);
}

/* the early decode kernel: triggers its dependents first (as a self-starting block does), never waits */
__global__ void __launch_bounds__(128, 2) k_decode(shared_state *s, counters *c, int call) {
    extern __shared__ char pad[]; /* ~100 KB, so that two blocks share an SM as the decode kernel's do */
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (threadIdx.x != 0) return;
    pad[0] = 0;
    const int b = blockIdx.x % NSEQ;
    const int mine = (call & 1) ? 0 : 1, prev = 1 - mine;
    const int v0 = kv_ld_relaxed_s8(&s->verdict[b]);
    if (v0 == PENDING) atomicAdd(&c->first_pending, 1ull);
    else if (v0 == prev) atomicAdd(&c->stale_first, 1ull);
    if (kv_ld_relaxed(&s->ready) == 0) atomicAdd(&c->flag_zero, 1ull);
    kv_lists_acquire(&s->ready); /* relaxed polls, then a fence, as the decode kernel waits for its lists */
    int bad = 0;
    for (int i = (blockIdx.x * 8) % NLIST, k = 0; k < 8; k++) bad |= __ldcg(&s->list[i + k]) != call;
    if (bad) atomicAdd(&c->bad_list, 1ull);
    if (kv_seq_verdict(s->verdict, b, v0) != mine) atomicAdd(&c->bad_final, 1ull);
}

/* the prefill kernel after an early decode kernel: a PDL dependent of the decode kernel (two hops from the
 * scheduler), never waits; polls done with acquire loads, then reads its list from L2 */
__global__ void k_prefill(shared_state *s, counters *c, int call) {
    if (threadIdx.x != 0) return;
    int d = kv_ld_acquire(&s->done);
    if (d == 0) atomicAdd(&c->done_zero, 1ull);
    while (d == 0) { /* as the prefill kernel waits for sched_done */
        __nanosleep(64);
        d = kv_ld_acquire(&s->done);
    }
    int bad = 0;
    for (int i = (blockIdx.x * 8) % NLIST, k = 0; k < 8; k++) bad |= __ldcg(&s->plist[i + k]) != call;
    if (bad) atomicAdd(&c->bad_plist, 1ull);
}

int main(int argc, char **argv) {
    const int calls = argc > 1 ? atoi(argv[1]) : 20000;
    const int mutant = argc > 2 && !strcmp(argv[2], "mutant");
    if (calls < 2) {
        fprintf(stderr, "usage: pdl_visibility [calls >= 2 (20000)] [mutant]\n");
        return 2;
    }
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int grid = 2 * sms, pgrid = sms; /* the decode kernel's grid: two blocks per SM */
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaMemcpyToSymbolAsync(kTriggerFirst, &mutant, sizeof mutant, 0, cudaMemcpyHostToDevice, st));
    if (mutant) printf("MUTANT: the scheduler triggers before its resets (a violation is expected)\n");
    shared_state *s;
    counters *c, h;
    CK(cudaMalloc(&s, sizeof *s));
    CK(cudaMalloc(&c, sizeof *c));
    /* before call 1 (odd: its final verdict is 0), the state a call 0 would leave: lists 0, verdicts 1, flags set */
    CK(cudaMemsetAsync(s, 0, sizeof *s, st));
    CK(cudaMemsetAsync(s->verdict, 1, NSEQ, st));
    CK(cudaStreamSynchronize(st));
    {
        static const int ones[2] = {1, 1};
        CK(cudaMemcpy(&s->ready, ones, sizeof ones, cudaMemcpyHostToDevice)); /* ready and done */
    }
    const int smem = 100 * 1024;
    CK(cudaFuncSetAttribute(k_decode, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaLaunchAttribute at;
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg, pcfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(128);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    pcfg = cfg;
    pcfg.gridDim = dim3(pgrid);
    pcfg.dynamicSmemBytes = 0;
    /* round 2: the three kernels captured once; their nodes found by their function */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t nodes[8], n_sched = NULL, n_dec = NULL, n_pre = NULL;
    {
        const int one = 1;
        const unsigned zero = 0;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        k_sched<<<1, SCHED_THREADS, 0, st>>>(s, one, zero, zero, zero);
        CK(cudaLaunchKernelEx(&cfg, k_decode, s, c, one));
        CK(cudaLaunchKernelEx(&pcfg, k_prefill, s, c, one));
        CK(cudaStreamEndCapture(st, &graph));
        size_t n = 8;
        CK(cudaGraphGetNodes(graph, nodes, &n));
        for (size_t k = 0; k < n; k++) {
            cudaKernelNodeParams kp;
            if (cudaGraphKernelNodeGetParams(nodes[k], &kp) != cudaSuccess) continue;
            if (kp.func == (void *)k_sched) n_sched = nodes[k];
            if (kp.func == (void *)k_decode) n_dec = nodes[k];
            if (kp.func == (void *)k_prefill) n_pre = nodes[k];
        }
        if (!n_sched || !n_dec || !n_pre) {
            fprintf(stderr, "pdl_visibility: the captured graph lacks a kernel node\n");
            return 1;
        }
        CK(cudaGraphInstantiate(&exec, graph, 0));
    }
    const char *round_name[3] = {"back to back", "isolated (sync after each call)", "graph replays, back to back"};
    int fail = 0, overlap = 1; /* overlap: every round saw both dependents run while the scheduler worked */
    int call = 0;              /* numbered across rounds, so that verdicts alternate from call to call */
    for (int round = 0; round < 3; round++) {
        CK(cudaMemsetAsync(c, 0, sizeof *c, st));
        unsigned x = 12345u + round;
        for (int i = 1; i <= calls; i++) {
            call++;
            x = x * 1664525u + 1013904223u;
            unsigned d1 = (x >> 8) % 4000u, d2 = (x >> 20) % 12000u, d3 = (x >> 4) % 30000u; /* 0-4, 0-12, 0-30 us */
            if (round == 2) {
                cudaKernelNodeParams kp;
                CK(cudaGraphKernelNodeGetParams(n_sched, &kp));
                void *sa[5] = {&s, &call, &d1, &d2, &d3};
                kp.kernelParams = sa;
                CK(cudaGraphExecKernelNodeSetParams(exec, n_sched, &kp));
                void *da[3] = {&s, &c, &call};
                CK(cudaGraphKernelNodeGetParams(n_dec, &kp));
                kp.kernelParams = da;
                CK(cudaGraphExecKernelNodeSetParams(exec, n_dec, &kp));
                CK(cudaGraphKernelNodeGetParams(n_pre, &kp));
                kp.kernelParams = da;
                CK(cudaGraphExecKernelNodeSetParams(exec, n_pre, &kp));
                CK(cudaGraphLaunch(exec, st));
                continue;
            }
            k_sched<<<1, SCHED_THREADS, 0, st>>>(s, call, d1, d2, d3);
            CK(cudaGetLastError());
            CK(cudaLaunchKernelEx(&cfg, k_decode, s, c, call));
            CK(cudaLaunchKernelEx(&pcfg, k_prefill, s, c, call));
            if (round == 1) CK(cudaStreamSynchronize(st));
        }
        CK(cudaMemcpyAsync(&h, c, sizeof h, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        const double reads = (double)calls * grid, preads = (double)calls * pgrid;
        printf("%s: %d calls x %d decode blocks + %d prefill blocks: stale first verdicts %llu, stale list words %llu,"
               " wrong final verdicts %llu, stale prefill list words %llu; first verdict read PENDING %.1f%%, flag read"
               " 0 %.1f%%, prefill's first done read 0 %.1f%% (%llu)\n",
               round_name[round], calls, grid, pgrid, h.stale_first, h.bad_list, h.bad_final, h.bad_plist,
               100.0 * h.first_pending / reads, 100.0 * h.flag_zero / reads, 100.0 * h.done_zero / preads,
               h.done_zero);
        fail |= h.stale_first || h.bad_list || h.bad_final || h.bad_plist;
        if (!h.first_pending || !h.done_zero) printf("  (a dependent never overlapped the scheduler in this round)\n");
        overlap &= h.first_pending > 0 && h.done_zero > 0;
    }
    printf("pdl_visibility: %s\n", fail ? "VIOLATION: a PDL kernel saw its predecessor's pre-trigger writes undone"
                                   : overlap ? "every read saw this call's values" : "NOT TESTED (a round without overlap)");
    return fail ? 1 : overlap ? 0 : 2;
}
