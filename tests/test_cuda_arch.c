/* test_cuda_arch.c — the CUDA backend's availability: which devices a build's kernels run on, and what asking costs.
 * (1) The rule kvattn applies to the build's CUDA_ARCH and a device's compute capability (kv_arch_runs_on, api.c; an
 *     internal function, so this test links the static library), on a table written from the driver's rule for
 *     SASS: same major and a minor at least the build's, "a" builds only their own version, "f" builds their major.
 * (2) On a GPU, in a fresh process: kvattn_backend_available and kvattn_workspace_size create no CUDA context on the
 *     current device (a process that only asks must not hold ~500 MB of device memory), while the first kernel-side
 *     call does; the primary context's state is read through the driver's own cuDevicePrimaryCtxGetState. The
 *     reason left by an unavailable backend is checked in test_bad_input. */
#include "test_cuda_common.h"

/* internal (src/internal.h); the static library exports it */
int kv_arch_runs_on(const char *arch, int major, int minor);

typedef struct {
    const char *arch;
    int major, minor, runs;
} arch_case;

static const arch_case k_cases[] = {
    {"90a", 9, 0, 1},  {"90a", 9, 1, 0},  {"90a", 8, 0, 0},   {"90a", 10, 0, 0}, {"90", 9, 0, 1},   {"90", 10, 0, 0},
    {"80", 8, 0, 1},   {"80", 8, 6, 1},   {"80", 8, 9, 1},    {"80", 9, 0, 0},   {"80", 7, 5, 0},   {"86", 8, 0, 0},
    {"86", 8, 6, 1},   {"86", 8, 9, 1},   {"89", 8, 6, 0},    {"100a", 10, 0, 1}, {"100a", 10, 3, 0},
    {"100f", 10, 0, 1},
    {"100f", 10, 3, 1}, {"100f", 11, 0, 0}, {"100f", 12, 0, 0}, {"100", 9, 0, 0}, {"120f", 12, 1, 1}, {"120", 12, 0, 1},
    /* not of the Makefile's form: not judged */
    {"", 7, 0, 1},     {"9", 9, 0, 1},    {"sm_90a", 8, 0, 1}, {"90ax", 8, 0, 1}, {"90af", 8, 0, 1},
};

#ifdef KVATTN_HAVE_CUDA
typedef int (*primary_state_fn)(int dev, unsigned int *flags, int *active); /* CUresult (CUdevice, ...) */

/* 1 / 0: the current device's primary context is active / not; -1: cannot tell (the reason in why). */
static int primary_active(primary_state_fn f, int dev, char *why, size_t n) {
    unsigned int flags = 0;
    int active = -1;
    const int r = f(dev, &flags, &active);
    if (r != 0) {
        snprintf(why, n, "cuDevicePrimaryCtxGetState: CUresult %d", r);
        return -1;
    }
    return active ? 1 : 0;
}
#endif

int main(void) {
    kvt_init("test_cuda_arch");
    /* (2) first, while nothing in this process has touched the device */
    kvt_case_begin("no CUDA context from kvattn_backend_available or kvattn_workspace_size");
#ifdef KVATTN_HAVE_CUDA
    int dev = 0;
    void *fp = NULL;
    enum cudaDriverEntryPointQueryResult q;
    char why[160] = "";
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fp, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fp) {
        (void)cudaGetLastError();
        kvt_case_skip("no CUDA device or driver");
    } else {
        primary_state_fn f = (primary_state_fn)fp;
        const int a0 = primary_active(f, dev, why, sizeof why);
        const int avail = kvattn_backend_available(KVATTN_BACKEND_CUDA);
        const int a1 = primary_active(f, dev, why, sizeof why);
        kvattn_params p = kvt_fake_paged_call(8, 8, 32, 8, 128, 16, 512); /* 8 x 8192 decode, page 16 */
        size_t ws = 0;
        const int wst = kvattn_workspace_size(&p, KVATTN_BACKEND_CUDA, &ws);
        const int a2 = primary_active(f, dev, why, sizeof why);
        if (a0 == 1) {
            kvt_case_skip("a primary context was active before any kvattn call (the probe itself made one)");
        } else {
            if (a0 < 0 || a1 < 0 || a2 < 0) kvt_failf("%s", why);
            if (a1 == 1) kvt_failf("kvattn_backend_available created a CUDA context (it returned %d)", avail);
            if (a2 == 1)
                kvt_failf("kvattn_workspace_size created a CUDA context (%s, %zu bytes)", kvattn_status_string(wst),
                          ws);
            if (wst != KVATTN_OK || ws == 0)
                kvt_failf("workspace_size: %s, %zu bytes (%s)", kvattn_status_string(wst), ws, kvattn_last_error());
            /* the probe can see a context: the runtime's first real call makes one */
            if (cudaFree(NULL) != cudaSuccess) kvt_failf("cudaFree(NULL) failed");
            if (primary_active(f, dev, why, sizeof why) != 1) kvt_failf("no context seen after cudaFree(NULL) %s", why);
            kvt_case_end();
        }
    }
#else
    kvt_case_skip("the CUDA backend is not built");
#endif
    /* (1) the rule */
    kvt_case_begin("kv_arch_runs_on, %d (arch, compute capability) pairs", (int)(sizeof k_cases / sizeof k_cases[0]));
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const arch_case *c = &k_cases[i];
        const int got = kv_arch_runs_on(c->arch, c->major, c->minor);
        if (got != c->runs)
            kvt_failf("CUDA_ARCH=\"%s\" on %d.%d: %d, want %d", c->arch, c->major, c->minor, got, c->runs);
    }
    kvt_case_end();
    return kvt_finish();
}
