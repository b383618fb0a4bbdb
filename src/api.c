/* api.c — the public entry points of kvattn: version, status strings, the thread-local last error, and the
 * one place where a call is validated and dispatched to a backend (CPU or CUDA). */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

void kv_clear_error(void) { last_error[0] = '\0'; }

int kv_set_error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

unsigned kvattn_version_number(void) { return KVATTN_VERSION_NUMBER; }

#define KV_STR2(x) #x
#define KV_STR(x) KV_STR2(x)
const char *kvattn_version_string(void) {
    return KV_STR(KVATTN_VERSION_MAJOR) "." KV_STR(KVATTN_VERSION_MINOR) "." KV_STR(KVATTN_VERSION_PATCH);
}

const char *kvattn_status_string(int status) {
    switch (status) {
    case KVATTN_OK: return "KVATTN_OK";
    case KVATTN_ERR_INVALID_ARGUMENT: return "KVATTN_ERR_INVALID_ARGUMENT";
    case KVATTN_ERR_UNSUPPORTED: return "KVATTN_ERR_UNSUPPORTED";
    case KVATTN_ERR_WORKSPACE: return "KVATTN_ERR_WORKSPACE";
    case KVATTN_ERR_BAD_DATA: return "KVATTN_ERR_BAD_DATA";
    case KVATTN_ERR_NOT_AVAILABLE: return "KVATTN_ERR_NOT_AVAILABLE";
    case KVATTN_ERR_OUT_OF_PAGES: return "KVATTN_ERR_OUT_OF_PAGES";
    case KVATTN_ERR_OUT_OF_MEMORY: return "KVATTN_ERR_OUT_OF_MEMORY";
    case KVATTN_ERR_CUDA: return "KVATTN_ERR_CUDA";
    case KVATTN_ERR_INTERNAL: return "KVATTN_ERR_INTERNAL";
    default: return "KVATTN_ERR_UNKNOWN";
    }
}

const char *kvattn_last_error(void) { return last_error; }

/* The build holds SASS for one arch and no PTX, so the driver's rule for SASS applies: the same major, and a minor
 * at least the build's; an arch-specific build ("a") runs only on its own version, a family build ("f") on its
 * major's later minors. Pure arithmetic on the device's attributes: asking the runtime about a kernel instead would
 * create a CUDA context, which kvattn_backend_available must not do. */
int kv_arch_runs_on(const char *arch, int major, int minor) {
    int n = 0, i = 0;
    while (arch[i] >= '0' && arch[i] <= '9' && i < 4) n = n * 10 + (arch[i++] - '0');
    if (i < 2) return 1;
    const int bmajor = n / 10, bminor = n % 10;
    if (arch[i] == 'a' && arch[i + 1] == '\0') return major == bmajor && minor == bminor;
    if (arch[i] != '\0' && !(arch[i] == 'f' && arch[i + 1] == '\0')) return 1;
    return major == bmajor && minor >= bminor;
}

int kvattn_backend_available(int backend) {
    kv_clear_error();
    if (backend == KVATTN_BACKEND_CPU) return 1;
    if (backend == KVATTN_BACKEND_CUDA) return kv_cuda_available() ? 1 : 0;
    kv_set_error(KVATTN_ERR_INVALID_ARGUMENT,
                 "backend: %d is neither KVATTN_BACKEND_CPU (0) nor KVATTN_BACKEND_CUDA (1)", backend);
    return 0;
}

size_t kvattn_params_size(void) { return sizeof(kvattn_params); }

kvattn_params kvattn_params_default(void) {
    kvattn_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = (int64_t)sizeof(kvattn_params);
    p.dtype = KVATTN_F16;
    p.rotary_dtype = KVATTN_F32;
    p.rotary_interleaved = 1;
    p.window_left = -1;
    p.window_right = -1;
    int64_t *strides[] = {
        &p.q_batch_stride, &p.q_row_stride, &p.q_head_stride, &p.knew_batch_stride, &p.knew_row_stride,
        &p.knew_head_stride, &p.vnew_batch_stride, &p.vnew_row_stride, &p.vnew_head_stride, &p.k_batch_stride,
        &p.k_row_stride, &p.k_head_stride, &p.v_batch_stride, &p.v_row_stride, &p.v_head_stride,
        &p.block_table_batch_stride, &p.rotary_row_stride, &p.alibi_batch_stride, &p.out_batch_stride,
        &p.out_row_stride, &p.out_head_stride, &p.lse_batch_stride, &p.lse_head_stride, &p.lse_row_stride};
    for (size_t i = 0; i < sizeof strides / sizeof strides[0]; i++) *strides[i] = KVATTN_STRIDE_PACKED;
    return p;
}

/* a * b * c for the packed strides: 0 if a size is negative (validation names that size), INT64_MAX if the
 * product overflows (validation then reports the tensor's offsets overflowing int64) */
static int64_t packed3(int64_t a, int64_t b, int64_t c) {
    if (a < 0 || b < 0 || c < 0) return 0;
    int64_t ab, abc;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return INT64_MAX;
    return abc;
}

#define PACK(field, value)                                                                                   \
    do {                                                                                                     \
        if (r->field == KVATTN_STRIDE_PACKED) r->field = (value);                                            \
    } while (0)

/* The params a call runs with: a copy in *r of *p with each KVATTN_STRIDE_PACKED stride replaced by the one that
 * packs its documented shape (kvattn.h), so that validation and the backends see ordinary strides only; p itself
 * when it cannot be read (NULL, or another struct_size: validation reports it). */
static const kvattn_params *with_strides(const kvattn_params *p, kvattn_params *r) {
    if (p == NULL || p->struct_size != (int64_t)sizeof(kvattn_params)) return p;
    *r = *p;
    const int64_t H = p->num_heads, Hk = p->num_kv_heads, D = p->head_dim;
    const int q_varlen = p->cu_seqlens_q != NULL, n_varlen = p->cu_seqlens_knew != NULL;
    PACK(q_head_stride, packed3(D, 1, 1));
    PACK(q_row_stride, packed3(H, D, 1));
    PACK(q_batch_stride, q_varlen ? 0 : packed3(p->seqlen_q, H, D));
    PACK(out_head_stride, packed3(D, 1, 1));
    PACK(out_row_stride, packed3(H, D, 1));
    PACK(out_batch_stride, q_varlen ? 0 : packed3(p->seqlen_q, H, D));
    PACK(lse_row_stride, 1);
    PACK(lse_head_stride, q_varlen ? packed3(p->total_q, 1, 1) : packed3(p->seqlen_q, 1, 1));
    PACK(lse_batch_stride, q_varlen ? 0 : packed3(H, p->seqlen_q, 1));
    PACK(knew_head_stride, packed3(D, 1, 1));
    PACK(knew_row_stride, packed3(Hk, D, 1));
    PACK(knew_batch_stride, n_varlen ? 0 : packed3(p->seqlen_knew, Hk, D));
    PACK(vnew_head_stride, packed3(D, 1, 1));
    PACK(vnew_row_stride, packed3(Hk, D, 1));
    PACK(vnew_batch_stride, n_varlen ? 0 : packed3(p->seqlen_knew, Hk, D));
    const int64_t rows = p->block_table ? p->page_size : p->cache_capacity;
    PACK(k_head_stride, packed3(D, 1, 1));
    PACK(k_row_stride, packed3(Hk, D, 1));
    PACK(k_batch_stride, packed3(rows, Hk, D));
    PACK(v_head_stride, packed3(D, 1, 1));
    PACK(v_row_stride, packed3(Hk, D, 1));
    PACK(v_batch_stride, packed3(rows, Hk, D));
    PACK(block_table_batch_stride, packed3(p->max_pages_per_seq, 1, 1));
    PACK(rotary_row_stride, 0); /* 0 means rotary_dim / 2 */
    PACK(alibi_batch_stride, 0);
    return r;
}
#undef PACK

/* Everything visible from the arguments; for CUDA also what the kernels support. Sets the last error. given: the
 * caller's params, p: with_strides' result (the same pointer when nothing could be resolved). */
static int validate(const kvattn_params *given, const kvattn_params *p, int backend) {
    int st = kv_validate_args(p, backend);
    /* a tensor whose set and unset strides overlap (kv_check_mixed_strides): refused when validation passed (a tensor
     * only read may overlap), and reported instead of validation's own overlap error for the same tensor, which would
     * quote strides the caller never set; any other error stands (its sizes may be what made the strides overlap) */
    if (p != given && (st == KVATTN_OK || strstr(last_error, "overlap") != NULL)) {
        char first[sizeof last_error];
        if (st != KVATTN_OK) memcpy(first, last_error, strlen(last_error) + 1);
        const int ms = kv_check_mixed_strides(given, p); /* sets the last error only when it fails */
        if (ms != KVATTN_OK) {
            const char *colon = strchr(last_error, ':');
            const size_t n = colon ? (size_t)(colon - last_error) + 1 : 0;
            if (st == KVATTN_OK || (n > 0 && strncmp(first, last_error, n) == 0)) return ms;
            memcpy(last_error, first, strlen(first) + 1);
        }
    }
    if (st != KVATTN_OK) return st;
    if (backend == KVATTN_BACKEND_CUDA) return kv_cuda_check(p);
    return KVATTN_OK;
}

int kvattn_validate(const kvattn_params *p_, int backend) {
    kv_clear_error();
    kvattn_params r;
    return validate(p_, with_strides(p_, &r), backend);
}

int kvattn_workspace_size(const kvattn_params *p_, int backend, size_t *bytes) {
    kv_clear_error();
    RETURN_IF(bytes == NULL, KVATTN_ERR_INVALID_ARGUMENT, "bytes: NULL output pointer");
    kvattn_params r;
    const kvattn_params *p = with_strides(p_, &r);
    *bytes = 0;
    int st = validate(p_, p, backend);
    if (st != KVATTN_OK) return st;
    if (backend == KVATTN_BACKEND_CUDA) *bytes = kv_cuda_workspace_size(p);
    return KVATTN_OK;
}

int kvattn_forward(const kvattn_params *p_, int backend, void *workspace, size_t workspace_bytes, void *stream) {
    kv_clear_error();
    kvattn_params r;
    const kvattn_params *p = with_strides(p_, &r);
    int st = validate(p_, p, backend);
    if (st != KVATTN_OK) return st;
    /* SPEC: B = 0 is a valid no-op. A CUDA call given a workspace still goes through kv_cuda_forward, whose
     * finalize kernel rewrites the status record (kvattn.h: every CUDA call rewrites it), so that a status read
     * after a B = 0 step does not report the failures of an earlier call. */
    if (p->batch == 0 && (backend == KVATTN_BACKEND_CPU || workspace == NULL)) return KVATTN_OK;
    if (backend == KVATTN_BACKEND_CPU) return kv_cpu_forward(p);
    /* no usable device: say so, rather than judge a workspace sized on the stand-in device */
    if ((st = kv_cuda_ready()) != KVATTN_OK) return st;
    size_t need = kv_cuda_workspace_size(p);
    RETURN_IF(workspace == NULL, KVATTN_ERR_WORKSPACE,
              "workspace: NULL, but the CUDA backend needs %zu bytes (kvattn_workspace_size)", need);
    RETURN_IF(workspace_bytes < need, KVATTN_ERR_WORKSPACE,
              "workspace_bytes=%zu is smaller than the %zu bytes kvattn_workspace_size() asks for",
              workspace_bytes, need);
    /* the kernels write the workspace's first `need` bytes (status record, plan, split partials) */
    if ((st = kv_check_workspace_disjoint(p, workspace, need)) != KVATTN_OK) return st;
    return kv_cuda_forward(p, workspace, workspace_bytes, stream);
}

size_t kvattn_device_status_offset(void) { return 0; }

int kvattn_device_status_read(const void *workspace, void *stream, kvattn_device_status *out) {
    kv_clear_error();
    RETURN_IF(out == NULL, KVATTN_ERR_INVALID_ARGUMENT, "out: NULL output pointer");
    RETURN_IF(workspace == NULL, KVATTN_ERR_INVALID_ARGUMENT, "workspace: NULL");
    return kv_cuda_status_read(workspace, stream, out);
}
