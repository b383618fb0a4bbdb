/* dev/pdl_order.cu: does stream order stay transitive when the last kernel of a chain is launched with
 * programmatic dependent launch (PDL) and never waits for its predecessor?
 *
 * kvattn's calls end with a kernel that does not wait for the kernel before it (decode-first order: the empty
 * prefill kernel after the decode kernel; prefill-first order: the decode kernel after the prefill kernel; see
 * DECISIONS.md). If such a kernel could complete, and so release the stream, before its predecessor, the caller's
 * next kernel (or a copy of `out`) could run before the attention finished. This harness builds that pattern
 * with a slow predecessor and checks what the stream's next operations see:
 *   K1: one block, triggers its dependents at once, spins `spin` us, then stores flag = 1 (the result).
 *   K2: launched with PDL after K1, never calls griddepcontrol.wait (as kvattn's last kernel); it records whether
 *       K1's flag was still 0 when it ran ("K2 ran before K1 ended": the overlap the check needs).
 *   then, per repetition, one of:
 *     a) a plain kernel K3 in the same stream that reads the flag;
 *     b) a K3 launched with PDL that calls griddepcontrol.wait first, then reads the flag;
 *     c) cudaMemcpyAsync of the flag to pinned host memory, same stream;
 *     d) cudaEventRecord + cudaEventSynchronize, then the host reads the flag (in mapped host memory);
 *     e) the same event sync, then a copy of the (device) flag on a second stream;
 *     f) a second stream waits on the event, then its kernel reads the flag.
 * A violation is a read that saw 0. Usage: pdl_order [reps (200)] [spin us (200)]; exit 0: order held, 1: a
 * violation, 2: K2 never ran while K1 spun (nothing tested).
 * Build: nvcc -O2 -gencode arch=compute_90a,code=sm_90a dev/pdl_order.cu -o pdl_order (sm_90 or newer). */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

static __device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void k1_slow(volatile int *flag, unsigned spin_ns) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    const unsigned long long t0 = gtime();
    while (gtime() - t0 < spin_ns) { }
    __threadfence_system();
    *flag = 1;
    __threadfence_system();
}
__global__ void k2_nowait(int *marker) { /* no griddepcontrol.wait: like kvattn's last kernel */
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    /* marker[1]: K1's flag as K2 saw it (0: K2 ran while K1 still spun, so the PDL overlap really happened) */
    if (threadIdx.x == 0) marker[0] = *(volatile int *)(marker + 1) ? 1 : 0;
}
__global__ void k3_read(const volatile int *flag, int *seen, int pdl_wait) {
    if (pdl_wait) asm volatile("griddepcontrol.wait;" ::: "memory");
    *seen = *flag;
}

/* One block of `threads`, with the PDL attribute when pdl is set; `at` holds the attribute */
static cudaLaunchConfig_t config(unsigned threads, int pdl, cudaStream_t s, cudaLaunchAttribute *at) {
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(1);
    cfg.blockDim = dim3(threads);
    cfg.stream = s;
    at->id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at->val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    return cfg;
}
static cudaError_t launch2(cudaStream_t s, int *arg) {
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = config(32, 1, s, &at);
    return cudaLaunchKernelEx(&cfg, k2_nowait, arg);
}
static cudaError_t launch3(int pdl, cudaStream_t s, const int *flag, int *seen) {
    cudaLaunchAttribute at;
    const cudaLaunchConfig_t cfg = config(1, pdl, s, &at);
    return cudaLaunchKernelEx(&cfg, k3_read, (const volatile int *)flag, seen, pdl);
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 200;
    const unsigned spin_ns = argc > 2 ? (unsigned)atoi(argv[2]) * 1000u : 200000u;
    CK(cudaSetDeviceFlags(cudaDeviceMapHost));
    cudaStream_t s, s2;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    int *flag, *seen, *h_copy, *h_mapped, *d_mapped;
    CK(cudaMalloc(&flag, 2 * sizeof(int))); /* [1]: the flag; [0]: K2's view of it (k2_nowait) */
    CK(cudaMalloc(&seen, sizeof(int)));
    CK(cudaHostAlloc(&h_copy, sizeof(int), cudaHostAllocDefault));
    CK(cudaHostAlloc(&h_mapped, 2 * sizeof(int), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(&d_mapped, h_mapped, 0));
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    const char *name[6] = {"a) plain K3 reads the flag", "b) PDL K3 with griddepcontrol.wait",
                           "c) cudaMemcpyAsync of the flag", "d) event sync, host reads mapped flag",
                           "e) event sync, copy on another stream", "f) other stream waits on the event"};
    int bad_total = 0, overlapped_total = 0;
    for (int mode = 0; mode < 6; mode++) {
        int bad = 0, overlapped = 0;
        for (int r = 0; r < reps; r++) {
            int *fl = mode == 3 ? d_mapped + 1 : flag + 1;
            CK(cudaMemsetAsync(fl - 1, 0, 2 * sizeof(int), s));
            CK(cudaMemsetAsync(seen, 0xff, sizeof(int), s));
            CK(cudaStreamSynchronize(s));
            k1_slow<<<1, 32, 0, s>>>(fl, spin_ns);
            CK(cudaGetLastError());
            CK(launch2(s, fl - 1));
            int got = -1;
            if (mode == 0 || mode == 1) {
                CK(launch3(mode == 1, s, fl, seen));
                CK(cudaMemcpyAsync(h_copy, seen, sizeof(int), cudaMemcpyDeviceToHost, s));
                CK(cudaStreamSynchronize(s));
                got = *h_copy;
            } else if (mode == 2) {
                CK(cudaMemcpyAsync(h_copy, fl, sizeof(int), cudaMemcpyDeviceToHost, s));
                CK(cudaStreamSynchronize(s));
                got = *h_copy;
            } else if (mode == 3) {
                CK(cudaEventRecord(ev, s));
                CK(cudaEventSynchronize(ev));
                got = *(volatile int *)(h_mapped + 1);
                CK(cudaStreamSynchronize(s));
            } else if (mode == 4) { /* device flag, read by a copy on a second stream after the event fired */
                CK(cudaEventRecord(ev, s));
                CK(cudaEventSynchronize(ev));
                CK(cudaMemcpyAsync(h_copy, fl, sizeof(int), cudaMemcpyDeviceToHost, s2));
                CK(cudaStreamSynchronize(s2));
                got = *h_copy;
                CK(cudaStreamSynchronize(s));
            } else { /* a kernel on a second stream ordered after the event (a serving engine's pattern) */
                CK(cudaEventRecord(ev, s));
                CK(cudaStreamWaitEvent(s2, ev, 0));
                CK(launch3(0, s2, fl, seen));
                CK(cudaMemcpyAsync(h_copy, seen, sizeof(int), cudaMemcpyDeviceToHost, s2));
                CK(cudaStreamSynchronize(s2));
                got = *h_copy;
                CK(cudaStreamSynchronize(s));
            }
            if (got != 1) bad++;
            int k2_saw = 0;
            if (mode == 3) k2_saw = *(volatile int *)h_mapped; /* ([0]; the flag is [1]) */
            else CK(cudaMemcpy(&k2_saw, flag, sizeof(int), cudaMemcpyDeviceToHost));
            if (k2_saw == 0) overlapped++;
        }
        printf("%-42s reps %d, K2 ran before K1 ended: %d, the next operation saw K1 unfinished: %d\n", name[mode],
               reps, overlapped, bad);
        bad_total += bad;
        overlapped_total += overlapped;
    }
    CK(cudaDeviceSynchronize());
    /* exit 1: a violation; exit 2: K2 never overlapped K1, so nothing was tested (e.g. no PDL on this device) */
    const char *verdict = bad_total ? "STREAM ORDER NOT TRANSITIVE" : overlapped_total ? "stream order held"
                                                                                     : "NOT TESTED (K2 never overlapped K1)";
    printf("pdl_order: %s (spin %u us)\n", verdict, spin_ns / 1000);
    return bad_total ? 1 : overlapped_total ? 0 : 2;
}
