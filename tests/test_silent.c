/* test_silent.c — SPEC.md "Bad input": the library never prints on its own. Standard output and standard error
 * (file descriptors 1 and 2) are sent to a temporary file while the library runs valid calls, calls that
 * argument checks reject, calls with bad data (a length past the capacity, a page outside the pool), status
 * reads and page-manager errors, on the CPU and (when present) on CUDA; the file must stay empty. Nothing of the
 * test itself prints while the descriptors are redirected: failures are collected and reported afterwards. */
#include "test_cuda_common.h"

#include <unistd.h>

typedef struct silent_run {
    int fd_out, fd_err; /* the saved descriptors */
    FILE *sink;
} silent_run;

static int silence(silent_run *r) {
    fflush(stdout);
    fflush(stderr);
    r->sink = tmpfile();
    if (!r->sink) return 1;
    r->fd_out = dup(1);
    r->fd_err = dup(2);
    if (r->fd_out < 0 || r->fd_err < 0 || dup2(fileno(r->sink), 1) < 0 || dup2(fileno(r->sink), 2) < 0) return 1;
    return 0;
}

/* Restores fds 1 and 2 and returns how many bytes were written to them meanwhile (-1: cannot tell). */
static long unsilence(silent_run *r) {
    fflush(stdout);
    fflush(stderr);
    dup2(r->fd_out, 1);
    dup2(r->fd_err, 2);
    close(r->fd_out);
    close(r->fd_err);
    if (fseek(r->sink, 0, SEEK_END)) return -1;
    long n = ftell(r->sink);
    fclose(r->sink);
    return n;
}

/* One valid call, the same call with each of three argument errors, and two bad-data calls (one length past
 * the capacity; one page index past the pool). Returns a bitmask of the calls whose status was not the expected
 * one (reported after the descriptors are back). */
static unsigned calls(int backend, int paged) {
    unsigned wrong = 0;
    int n_q[3] = {1, 5, 2}, n_new[3] = {1, 5, 2}, S[3] = {kvt_randint(1, 40), kvt_randint(0, 40), 7};
    cu_spec sp = cu_spec_default();
    sp.backend = backend;
    sp.B = 3;
    sp.H = 4;
    sp.Hk = 2;
    sp.D = 64;
    sp.n_q = n_q;
    sp.n_new = n_new;
    sp.S = S;
    sp.paged = paged;
    sp.rotary_dim = 32;
    kvt_problem P;
    cu_build(&P, &sp);
    if (kvt_problem_upload(&P, 1)) {
        kvt_problem_free(&P);
        return 1u << 31;
    }
    kvattn_params p = P.pd;
    size_t ws = 0;
    if (kvattn_workspace_size(&p, backend, &ws) != KVATTN_OK) wrong |= 1u << 0;
    kvt_buf w = kvt_alloc(backend, ws ? ws : 16);
    void *wp = ws ? w.ptr : NULL;
    if (kvattn_forward(&p, backend, wp, ws, NULL) != KVATTN_OK) wrong |= 1u << 1;

    kvattn_params bad = p;
    bad.head_dim = 0;
    if (kvattn_forward(&bad, backend, wp, ws, NULL) != KVATTN_ERR_INVALID_ARGUMENT) wrong |= 1u << 2;
    bad = p;
    bad.q = NULL;
    if (kvattn_forward(&bad, backend, wp, ws, NULL) != KVATTN_ERR_INVALID_ARGUMENT) wrong |= 1u << 3;
    if (kvattn_forward(NULL, backend, wp, ws, NULL) != KVATTN_ERR_INVALID_ARGUMENT) wrong |= 1u << 4;
    if (ws && kvattn_forward(&p, backend, wp, 8, NULL) != KVATTN_ERR_WORKSPACE) wrong |= 1u << 5;

    /* bad data: the CPU refuses the call, CUDA skips the sequence and flags it */
    const int want_bad = backend == KVATTN_BACKEND_CPU ? KVATTN_ERR_BAD_DATA : KVATTN_OK;
    int32_t *sl = P.seqlens.host, keep = sl[1];
    sl[1] = 1 << 20; /* past the capacity */
    if (kvt_upload(&P.seqlens.dev, sl, P.seqlens.bytes) || kvattn_forward(&p, backend, wp, ws, NULL) != want_bad)
        wrong |= 1u << 6;
    sl[1] = keep;
    kvt_upload(&P.seqlens.dev, sl, P.seqlens.bytes);
    if (paged) {
        int32_t *bt = P.block_table.host, keep_bt = bt[0];
        bt[0] = p.num_pages + 7; /* past the pool */
        if (kvt_upload(&P.block_table.dev, bt, P.block_table.bytes) ||
            kvattn_forward(&p, backend, wp, ws, NULL) != want_bad)
            wrong |= 1u << 7;
        bt[0] = keep_bt;
    }
    if (backend == KVATTN_BACKEND_CUDA) {
        kvattn_device_status ds;
        if (kvattn_device_status_read(w.ptr, NULL, &ds) != KVATTN_OK || (paged && !ds.flags)) wrong |= 1u << 8;
        if (kvattn_device_status_read(NULL, NULL, &ds) != KVATTN_ERR_INVALID_ARGUMENT) wrong |= 1u << 9;
#ifdef KVATTN_HAVE_CUDA
        if (cudaDeviceSynchronize() != cudaSuccess) wrong |= 1u << 10;
#endif
    }
    kvt_free(&w);
    kvt_problem_free(&P);
    return wrong;
}

/* page-manager errors: a page size of 0, out of pages, an unknown id, a fork of a partial page */
static unsigned page_calls(void) {
    unsigned wrong = 0;
    kvattn_pages *pool = NULL;
    int32_t a = -1, f = -1;
    if (kvattn_pages_create(&pool, 4, 0) == KVATTN_OK) wrong |= 1u << 0; /* page_size 0 */
    if (kvattn_pages_create(&pool, 4, 16) != KVATTN_OK) return wrong | 1u << 1;
    if (kvattn_pages_add_seq(pool, &a) != KVATTN_OK) wrong |= 1u << 2;
    if (kvattn_pages_append(pool, a, 1000) != KVATTN_ERR_OUT_OF_PAGES) wrong |= 1u << 3;
    if (kvattn_pages_release(pool, a + 99) == KVATTN_OK) wrong |= 1u << 4;
    if (kvattn_pages_append(pool, a, 20) != KVATTN_OK) wrong |= 1u << 5;
    if (kvattn_pages_fork(pool, a, 20, &f) == KVATTN_OK) wrong |= 1u << 6; /* not a multiple of the page size */
    kvattn_pages_destroy(pool);
    return wrong;
}

static void run(int backend, int paged) {
    kvt_case_begin("%s, %s: valid calls, argument errors, bad data", backend ? "CUDA" : "CPU",
                   paged ? "paged" : "contiguous");
    silent_run r;
    if (silence(&r)) {
        kvt_failf("cannot redirect stdout / stderr");
        kvt_case_end();
        return;
    }
    unsigned wrong = calls(backend, paged);
    unsigned wrong_pages = backend == KVATTN_BACKEND_CPU && !paged ? page_calls() : 0;
    long printed = unsilence(&r);
    if (printed != 0) kvt_failf("the library wrote %ld bytes to stdout / stderr", printed);
    if (wrong) kvt_failf("calls with an unexpected status (bitmask 0x%x; see calls())", wrong);
    if (wrong_pages) kvt_failf("page-manager calls with an unexpected status (bitmask 0x%x)", wrong_pages);
    kvt_case_end();
}

int main(void) {
    kvt_init("test_silent");
    run(KVATTN_BACKEND_CPU, 0);
    run(KVATTN_BACKEND_CPU, 1);
    if (cu_gpu_or_skip(2)) {
        run(KVATTN_BACKEND_CUDA, 0);
        run(KVATTN_BACKEND_CUDA, 1);
    }
    return kvt_finish();
}
