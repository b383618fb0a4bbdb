/* bench_kernels.cu — the two helper kernels of bench_cuda.c (read ceiling, random fill), compiled to PTX with
 *   nvcc -ptx -arch=compute_90 bench/bench_kernels.cu -o - | python3 bench/embed_ptx.py > bench/bench_kernels_ptx.h
 * and loaded at run time with cudaLibraryLoadData, because the Makefile builds benchmarks with the C compiler. */
#include <stdint.h>

/* Sums n16 16-byte words (uint4) of src; one partial per block into out[blockIdx.x] (so nothing is elided). */
extern "C" __global__ void bench_read_sum(const uint4 *__restrict__ src, unsigned long long n16, unsigned *out) {
    unsigned acc = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 a = __ldg(src + i), b = __ldg(src + i + stride), c = __ldg(src + i + 2 * stride), d = __ldg(src + i + 3 * stride);
        acc += (a.x ^ a.y ^ a.z ^ a.w) + (b.x ^ b.y ^ b.z ^ b.w) + (c.x ^ c.y ^ c.z ^ c.w) + (d.x ^ d.y ^ d.z ^ d.w);
    }
    for (; i < n16; i += stride) {
        uint4 a = __ldg(src + i);
        acc += a.x ^ a.y ^ a.z ^ a.w;
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out + blockIdx.x, acc);
}

/* Fills n bf16 values with uniform [-1, 1) from a counter hash (seeded). */
extern "C" __global__ void bench_fill_bf16(uint16_t *dst, unsigned long long n, unsigned seed) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned long long z = i * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float u = (float)(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
        unsigned bits = __float_as_uint(u);
        bits += 0x7FFF + ((bits >> 16) & 1); /* round to nearest even */
        dst[i] = (uint16_t)(bits >> 16);
    }
}
