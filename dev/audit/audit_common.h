/* audit_common.h — helpers shared by the kvattn CUDA memory-safety audit programs (/tmp/audit).
 * Device tensors are separate cudaMalloc allocations of their exact size, each followed by a 1 MiB "spacer"
 * allocation that is freed just before the call, so that an access just past a tensor lands in unallocated
 * memory (compute-sanitizer memcheck then reports it instead of silently hitting a neighbouring tensor). */
#ifndef AUDIT_COMMON_H
#define AUDIT_COMMON_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvattn.h"
#ifndef AUDIT_SELFTEST
#include <cuda_runtime.h>
#else
/* Self-test of the harness on a machine without a GPU: "device" memory is host memory and the CUDA call is the
 * CPU backend over the whole batch (after kvattn_validate and kvattn_workspace_size for the CUDA backend, so every
 * case is known to pass the CUDA backend's host validation). Build with -DAUDIT_SELFTEST. */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
static const char *cudaGetErrorString(cudaError_t e) { return e ? "error" : "no error"; }
static cudaError_t cudaMalloc(void **p, size_t n) { *p = malloc(n ? n : 1); return *p ? 0 : 2; }
static cudaError_t cudaFree(void *p) { free(p); return 0; }
static cudaError_t cudaMemcpy(void *d, const void *s, size_t n, int k) { (void)k; memcpy(d, s, n); return 0; }
static cudaError_t cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return 0; }
static cudaError_t cudaDeviceSynchronize(void) { return 0; }
static cudaError_t cudaGetLastError(void) { return 0; }
static int g_selftest_rejected; /* the CPU backend returned BAD_DATA (it checks everything before writing) */
static int selftest_forward(const kvattn_params *p, int backend, void *ws, size_t wsb, void *stream) {
    if (backend != KVATTN_BACKEND_CUDA) return kvattn_forward(p, backend, ws, wsb, stream);
    int st = kvattn_validate(p, KVATTN_BACKEND_CUDA);
    if (st) return st;
    size_t need = 0;
    st = kvattn_workspace_size(p, KVATTN_BACKEND_CUDA, &need);
    if (st) return st;
    if (wsb < need) return KVATTN_ERR_WORKSPACE;
    st = kvattn_forward(p, KVATTN_BACKEND_CPU, NULL, 0, NULL);
    g_selftest_rejected = st == KVATTN_ERR_BAD_DATA;
    return st == KVATTN_ERR_BAD_DATA ? KVATTN_OK : st;
}
static int selftest_status(const void *ws, void *stream, kvattn_device_status *o) {
    o->flags = 0; o->num_failed = 0; o->first_failed = -1; o->reserved = 0;
    return 0;
}
static int selftest_available(int b) { return 1; }
#define kvattn_forward selftest_forward
#define kvattn_device_status_read selftest_status
#define kvattn_backend_available selftest_available
#endif

#define CK(x)                                                                                                   \
    do {                                                                                                        \
        cudaError_t e_ = (x);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                \
            printf("FATAL CUDA error: %s -> %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__);       \
            printf("RESULT: FAIL (CUDA error; the context is unusable)\n");                                   \
            exit(2);                                                                                            \
        }                                                                                                       \
    } while (0)

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static inline uint64_t rnd64(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static inline float rndf(void) { return (float)((rnd64() >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f; }

/* fp16 / bf16 bit conversions (round to nearest even) */
static inline uint16_t f2h(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t mant = x & 0x7fffffu;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
    return (uint16_t)(sign | h);
}
static inline float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    if (exp == 0) {
        if (mant == 0) x = sign;
        else {
            int e = -1;
            do { mant <<= 1; e++; } while (!(mant & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) x = sign | 0x7f800000u | (mant << 13);
    else x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static inline uint16_t f2b(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}
static inline float b2f(uint16_t b) {
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static inline uint16_t to_el(int dt, float f) { return dt == KVATTN_BF16 ? f2b(f) : f2h(f); }
static inline float from_el(int dt, uint16_t v) { return dt == KVATTN_BF16 ? b2f(v) : h2f(v); }

/* ---- device allocations with spacers ------------------------------------------------------------------ */
#define MAX_ALLOCS 256
static void *g_allocs[MAX_ALLOCS];
static int g_nallocs;
static void *g_spacers[MAX_ALLOCS];
static int g_nspacers;
static void spacer(void) {
    void *s = NULL;
    if (g_nspacers < MAX_ALLOCS && cudaMalloc(&s, 1 << 20) == cudaSuccess) g_spacers[g_nspacers++] = s;
    else (void)cudaGetLastError();
}
static void *dalloc(size_t bytes) {
    void *p = NULL;
    if (g_nallocs == 0) spacer();
    CK(cudaMalloc(&p, bytes ? bytes : 16));
    g_allocs[g_nallocs++] = p;
    spacer();
    return p;
}
static void *dupload(const void *h, size_t bytes) {
    void *d = dalloc(bytes);
    if (bytes) CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}
static void free_spacers(void) {
    for (int i = 0; i < g_nspacers; i++) CK(cudaFree(g_spacers[i]));
    g_nspacers = 0;
}
static void free_all(void) {
    free_spacers();
    for (int i = 0; i < g_nallocs; i++) CK(cudaFree(g_allocs[i]));
    g_nallocs = 0;
}

static int g_pass, g_fail;
static char g_fails[64][200];
static int g_nfails_listed;
static void verdict(const char *name, int ok, const char *detail) {
    if (ok) g_pass++;
    else {
        g_fail++;
        if (g_nfails_listed < 64) snprintf(g_fails[g_nfails_listed++], 200, "%s", name);
    }
    printf("%s  %s%s%s\n", ok ? "PASS" : "FAIL", name, detail && detail[0] ? " -- " : "", detail ? detail : "");
    fflush(stdout);
}
static int summary(const char *prog) {
    printf("\n%s: %d passed, %d failed\n", prog, g_pass, g_fail);
    for (int i = 0; i < g_nfails_listed; i++) printf("  failed: %s\n", g_fails[i]);
    printf("RESULT: %s\n", g_fail ? "FAIL" : "PASS");
    return g_fail ? 1 : 0;
}
#endif
