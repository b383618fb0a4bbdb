/* dev/cluster_fit.cu: how many thread block clusters of a decode-kernel-shaped block fit on the device at once?
 *
 * attn_notes.md (forty-sixth session) names a candidate for decode 8x8192: 64 tasks of 2 pieces on 128 blocks, one
 * block per SM with a deep pipeline, each task's two pieces merged through distributed shared memory in a cluster
 * of 2. v74 (twenty-sixth session) had found that only 62 clusters of 4 fit at two decode blocks per SM. This
 * harness asks cudaOccupancyMaxActiveClusters for an empty kernel of 128 threads with a given dynamic shared memory
 * size (the decode kernel's stages: NS x 32 KiB at head dim 128, plus ~4 KiB static) and cluster sizes 1, 2 and 4,
 * and launches each fitting configuration once to check the count launches. It measures nothing else.
 * Usage: cluster_fit   (prints a table; exit 0).
 * Build: nvcc -O2 -gencode arch=compute_90a,code=sm_90a dev/cluster_fit.cu -o cluster_fit (sm_90 or newer). */
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void k_empty(int *out) {
    extern __shared__ unsigned char smem[];
    if (threadIdx.x == 0 && smem[0] == 0xff && out) out[blockIdx.x] = 1; /* never true: keeps the smem */
}

int main() {
    int dev = 0, sms = 0, smem_optin = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CK(cudaFuncSetAttribute(k_empty, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_optin));
    CK(cudaFuncSetAttribute(k_empty, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    printf("%d SMs, %d bytes of shared memory per block at most\n", sms, smem_optin);
    printf("stages (x 32 KiB) | smem bytes | blocks per SM | cluster | clusters at once | blocks in them\n");
    const int stages[] = {3, 5, 6};
    for (int st : stages) {
        const int bytes = st * 32768 + 4096 < smem_optin ? st * 32768 + 4096 : smem_optin;
        int per_sm = 0;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_empty, 128, bytes));
        for (int cs = 1; cs <= 4; cs *= 2) {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute attr[1];
            attr[0].id = cudaLaunchAttributeClusterDimension;
            attr[0].val.clusterDim.x = cs;
            attr[0].val.clusterDim.y = 1;
            attr[0].val.clusterDim.z = 1;
            cfg.gridDim = dim3(cs * 64, 1, 1);
            cfg.blockDim = dim3(128, 1, 1);
            cfg.dynamicSmemBytes = bytes;
            cfg.attrs = attr;
            cfg.numAttrs = 1;
            int n = 0;
            CK(cudaOccupancyMaxActiveClusters(&n, (void *)k_empty, &cfg));
            if (n > 0) { /* launch that many clusters once */
                cfg.gridDim = dim3(cs * n, 1, 1);
                CK(cudaLaunchKernelEx(&cfg, k_empty, (int *)nullptr));
                CK(cudaDeviceSynchronize());
            }
            printf("%17d | %10d | %13d | %7d | %16d | %d\n", st, bytes, per_sm, cs, n, n * cs);
        }
    }
    return 0;
}
