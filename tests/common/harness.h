/* harness.h — what every kvattn test shares: backend memory with guard bytes (host or CUDA), poisoned outputs,
 * seeded random fills, a "problem" (host mirror + backend copy of every tensor of one call), and the checks
 * of a backend's result against the float64 reference (ref.h) with per-dtype tolerances.
 * B sequences, H query heads, Hk key/value heads, D head dim. */
#ifndef KVATTN_TEST_HARNESS_H
#define KVATTN_TEST_HARNESS_H

#include "kvattn.h"
#include "ref.h"
#include <stddef.h>
#include <stdint.h>

/* ---- counting, reporting ---------------------------------------------------------------------------- */
/* Prints "<name>: seed=..." and seeds the generator (KVATTN_TEST_SEED fixes the seed). */
void kvt_init(const char *test_name);
int kvt_quick(void);   /* KVATTN_TEST_QUICK=1: smaller grids (sanitizers) */
void kvt_case_begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kvt_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* marks the case failed */
int kvt_case_failed(void);
void kvt_case_end(void);                   /* counts the case as passed or failed */
void kvt_case_skip(const char *why);       /* counts the case as skipped (never as passed) */
void kvt_note_failure(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* a failure outside cases */
/* Prints "<name>: N passed, M failed, K skipped" and returns the exit code (nonzero on any failure). */
int kvt_finish(void);

/* ---- random ------------------------------------------------------------------------------------------ */
uint64_t kvt_rand_u64(void);
int kvt_randint(int lo, int hi);             /* uniform in [lo, hi] */
double kvt_uniform(double lo, double hi);
int kvt_pick(const int *values, int n);      /* one of values[0..n) */
void kvt_shuffle(int32_t *a, int n);
/* Fills n elements of a typed array (rounded to dtype) with uniform values in [lo, hi). */
uint64_t kvt_rng_get(void);                  /* the generator's state, to replay a case on another backend */
void kvt_rng_set(uint64_t state);
void kvt_fill(int dtype, void *base, int64_t n, double lo, double hi);

/* ---- backend memory with guards -----------------------------------------------------------------------
 * KVT_GUARD bytes of a fixed pattern before and after every allocation, checked after each call (on CUDA by
 * downloading the guard regions). KVATTN_TEST_EXACT_ALLOC=1 (sanitizer runs): no guards, each allocation exactly
 * its bytes, so that memcheck / ASan also see reads past a tensor (a read of a guard byte changes nothing). */
#define KVT_GUARD 256
typedef struct kvt_buf {
    int backend;
    size_t bytes;
    unsigned char *raw; /* host or device base of the whole allocation (guards included) */
    void *ptr;          /* raw + guard */
    size_t guard;       /* KVT_GUARD, or 0 with KVATTN_TEST_EXACT_ALLOC */
} kvt_buf;
kvt_buf kvt_alloc(int backend, size_t bytes);              /* ptr == NULL on failure */
void kvt_free(kvt_buf *b);
int kvt_upload(kvt_buf *b, const void *host, size_t bytes);  /* returns 0 on success */
int kvt_download(const kvt_buf *b, void *host, size_t bytes);
int kvt_guards_ok(const kvt_buf *b);                        /* 1 if both guard regions are intact */

/* A tensor with a host mirror (what the reference reads and writes) and a backend copy. */
typedef struct kvt_arr {
    const char *name;
    int used;     /* 0: the params field stays NULL */
    size_t offset_bytes; /* the params field points this far into the allocation (a view) */
    size_t bytes;
    void *host;
    kvt_buf dev;
} kvt_arr;

/* ---- one call: every tensor of kvattn_params twice ------------------------------------------------------ */
typedef struct kvt_problem {
    int backend;
    kvattn_params ph; /* host pointers: what the reference gets */
    kvattn_params pd; /* backend pointers: what kvattn_forward gets */
    kvt_arr q, k_new, v_new, k_cache, v_cache, out, lse;
    kvt_arr cu_q, cu_knew, seqlens, leftpad, batch_idx, block_table, rot_cos, rot_sin, alibi;
    kvt_buf workspace;
    int ws_override;  /* 1: pass ws_bytes as the workspace size instead of the queried one (bad-input test) */
    size_t ws_bytes;
    int last_status;       /* what kvattn_forward returned in the last kvt_problem_run */
    char last_error[512];  /* kvattn_last_error() right after that call */
} kvt_problem;

/* Starts an empty problem: zeroes P, sets its backend, and ph to kvattn_params_default() with these sizes. */
void kvt_problem_init(kvt_problem *P, int backend, int dtype, int B, int H, int Hk, int D);
/* Replaces each KVATTN_STRIDE_PACKED stride of p by the stride that packs its tensor's documented shape
 * (kvattn.h), written here apart from the library's own resolution: kvt_problem_upload gives the backend the
 * strides as the test left them (so unset strides go through the library's resolution) and the reference these. */
void kvt_resolve_packed(kvattn_params *p);
/* Allocates a tensor of `bytes` (host zeroed, at least 16 bytes) and marks it used. */
void kvt_arr_alloc(kvt_problem *P, kvt_arr *a, const char *name, size_t bytes);
/* Frees every tensor but the two caches (which persist across the steps of a generation loop). */
void kvt_problem_free_io(kvt_problem *P);
void kvt_problem_free(kvt_problem *P);
/* Copies scalars and strides of ph into pd, points both at their tensors, poisons out/lse (host and backend)
 * and uploads every tensor. upload_caches = 0 keeps the backend caches as they are. Returns 0 on success. */
int kvt_problem_upload(kvt_problem *P, int upload_caches);

/* What a call should do: status, and on CUDA the device flag and the skipped sequence. */
typedef struct kvt_expect {
    int status;    /* expected return of kvattn_forward */
    int flag;      /* CUDA: expected KVATTN_FLAG_* bit in the device status (0 = none) */
    int skip_seq;  /* CUDA bad data: the sequence that must be left untouched (-1 none) */
    int no_change; /* 1: nothing may change at all (the call is rejected) */
    int any_seq;   /* CUDA bad cu_seqlens: do not check which sequences were computed */
    /* CUDA bad data in several sequences (NULL: skip_seq alone): [B], nonzero = that sequence must be left
     * untouched. With it, the device status must hold exactly flags == flag, num_failed == the number of
     * marked sequences and first_failed == the smallest of them (-1 when none). */
    const unsigned char *skip_mask;
} kvt_expect;
kvt_expect kvt_expect_ok(void);

/* Runs kvattn_forward on the backend and the reference on the host mirror, then checks status, guards,
 * out (every element written, right values, padding untouched), softmax_lse, and both caches (appended rows
 * within tolerance, all other bytes identical). Returns 1 if the backend answered KVATTN_ERR_UNSUPPORTED where
 * e.status is another status (before comparing statuses: a test case calls kvt_problem_run_case, which tells a
 * skip from a failure), else 0; failures are recorded with kvt_failf. */
int kvt_problem_run(kvt_problem *P, kvt_expect e);

/* kvt_problem_run for a test case, with what an answer of KVATTN_ERR_UNSUPPORTED (from workspace_size or forward)
 * means there. Where e.status is KVATTN_OK, the backend does not implement this valid call: returns 1, and the
 * caller counts the case as skipped (kvt_case_skip, not kvt_case_end: a skipped case never counts as passed).
 * Where another error was expected (INVALID_ARGUMENT, WORKSPACE, BAD_DATA), the call was rejected for the wrong
 * reason (validation and forward must agree on why): the case fails, P->last_status / last_error say
 * UNSUPPORTED, and it returns 0. Else kvt_problem_run's checks ran and it returns 0. */
int kvt_problem_run_case(kvt_problem *P, kvt_expect e);

/* 1 when the element of es bytes at e still holds the poison (all bytes 0xFF: NaN in fp32, fp16 and bf16) that
 * kvt_problem_upload writes into out and softmax_lse */
int kvt_is_poison(const void *e, int es);

/* Element-level comparisons used by kvt_problem_run (exposed for the inflight test's whole-cache check). */
void kvt_check_cache(const kvattn_params *ph, int which, const void *expect, const void *got, size_t bytes,
                     int skip_seq, int appended, int64_t view_offset);
/* expect/got are whole allocations; view_offset (elements) is where ph's cache pointer starts in them. */

/* A paged varlen call of B sequences and total_q query rows (H / Hk / D, bf16, causal, capacity max_pages x page)
 * at fake, aligned, well-separated addresses: for kvattn_validate and kvattn_workspace_size only (they read no data). */
kvattn_params kvt_fake_paged_call(int B, int total_q, int H, int Hk, int D, int page, int max_pages);

#endif
