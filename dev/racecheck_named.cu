/* racecheck_named.cu — does compute-sanitizer's racecheck model a named barrier of part of a block?
 *
 * The eighteenth session's racecheck runs flagged "potential RAW" hazards only in the kernels that run the lean
 * plan (kv_lean_plan: threads 0..63 exchange through smem with `bar.sync 1, 64` while the other warps go on to the
 * block's __syncthreads), at accesses that a __syncthreads separates in the source. This program reproduces that
 * pattern without the library, so that racecheck's verdict on it can be read against kernels whose correctness is
 * plain from the source:
 *   mode 0: the lean plan's shape: warps 0, 1 exchange through region A with `bar.sync 1, 64`; the block then
 *           reuses region A after __syncthreads (every access pair is ordered by a barrier: race-free)
 *   mode 1: the same exchange ordered by __syncthreads of the whole block (race-free; the control)
 *   mode 2: mode 0 with the named barrier over the whole block (`bar.sync 1, 128`; race-free)
 *   mode 3: a real race (a read of another thread's smem write with no barrier between): racecheck must report it
 * Each mode runs in its own launch; the output is checked on the host, so a wrong result fails the run.
 * Build: nvcc -O3 -arch=sm_90a dev/racecheck_named.cu -o racecheck_named
 * Run:   compute-sanitizer --tool racecheck --racecheck-report hazard ./racecheck_named MODE */
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define NT 128

static __device__ __forceinline__ void sync64() { asm volatile("bar.sync 1, 64;" ::: "memory"); }
static __device__ __forceinline__ void sync128n() { asm volatile("bar.sync 1, 128;" ::: "memory"); }

__global__ void __launch_bounds__(NT) k_named(int mode, int *out) {
    __shared__ int a[NT];
    __shared__ int s_flag;
    const int tid = threadIdx.x;
    int x = 0;
    if (mode == 0) {
        if (tid < 64) { /* the plan's exchange rounds (distinct words per round, as in kv_lean_plan) */
            a[tid] = tid + 1;
            sync64();
            x = a[63 - tid];
            sync64();
            if (tid < 32) a[64 + tid] = x; /* a second round (warp 0 writes, both warps read) */
            sync64();
            x += a[64 + ((tid + 1) & 31)];
            if (tid == 0) s_flag = x;
        }
    } else if (mode == 1) {
        if (tid < 64) a[tid] = tid + 1;
        __syncthreads();
        if (tid < 64) x = a[63 - tid];
        __syncthreads();
        if (tid < 32) a[64 + tid] = x;
        __syncthreads();
        if (tid < 64) x += a[64 + ((tid + 1) & 31)];
        if (tid == 0) s_flag = x;
    } else if (mode == 2) {
        if (tid < 64) a[tid] = tid + 1;
        sync128n();
        if (tid < 64) x = a[63 - tid];
        sync128n();
        if (tid < 32) a[64 + tid] = x;
        sync128n();
        if (tid < 64) x += a[64 + ((tid + 1) & 31)];
        if (tid == 0) s_flag = x;
    } else {
        a[tid] = tid + 1;
        x = a[(tid + 37) & (NT - 1)]; /* no barrier: thread 0 reads what thread 37 (warp 1) writes, a race */
        /* the expected value whatever was read (x is in 1 .. 128), so that only racecheck can tell; the read
         * stays in the code because the compiler cannot know that */
        if (tid == 0) s_flag = 64 + 63 + (x == -12345 ? 1 : 0);
    }
    __syncthreads(); /* (the library: the block barrier after the plan) */
    const int f = s_flag;
    /* the reuse of region A by the whole block, as the item loop reuses the plan's smem for Q and the stages */
    a[tid] = f + tid;
    __syncthreads();
    const int y = a[(tid + 1) & (NT - 1)];
    __syncthreads();
    a[(tid + 5) & (NT - 1)] = y; /* WAR against the reads above: ordered by the barrier */
    __syncthreads();
    out[blockIdx.x * NT + tid] = a[tid];
}

int main(int argc, char **argv) {
    const int mode = argc > 1 ? atoi(argv[1]) : 0;
    const int blocks = 264;
    int *d = nullptr;
    if (cudaMalloc(&d, sizeof(int) * blocks * NT) != cudaSuccess) return 2;
    k_named<<<blocks, NT>>>(mode, d);
    if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("mode %d: launch failed: %s\n", mode, cudaGetErrorString(cudaGetLastError()));
        return 2;
    }
    int *h = (int *)malloc(sizeof(int) * blocks * NT);
    cudaMemcpy(h, d, sizeof(int) * blocks * NT, cudaMemcpyDeviceToHost);
    /* s_flag = a[63] + a[64 + 1] = 64 + (value of x at tid 1 = a[62] = 63) = 127 in modes 0 - 2 */
    const int f = 64 + 63;
    int bad = 0;
    for (int bl = 0; bl < blocks; bl++)
        for (int t = 0; t < NT; t++) {
            /* a[t] was written by thread (t - 5) mod NT with y = f + ((t - 5 + 1) mod NT) */
            const int want = f + ((t - 4 + NT) & (NT - 1));
            if (h[bl * NT + t] != want) bad++;
        }
    printf("mode %d: %s (%d wrong of %d)\n", mode, bad ? "WRONG" : "ok", bad, blocks * NT);
    cudaFree(d);
    free(h);
    return bad ? 1 : 0;
}
