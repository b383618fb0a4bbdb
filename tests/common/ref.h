/* ref.h — the naive float64 reference of SPEC.md used by the tests. Written from the spec alone: it shares no
 * code with the backends (it does not include src/internal.h) and materializes every score of a row.
 * B sequences, H query heads, Hk key/value heads, D head dim. */
#ifndef KVATTN_TEST_REF_H
#define KVATTN_TEST_REF_H

#include "kvattn.h"
#include <stddef.h>
#include <stdint.h>

/* ---- element types (round to nearest even) ----------------------------------------------------------- */
uint16_t kvref_f32_to_f16(float x);
float kvref_f16_to_f32(uint16_t h);
uint16_t kvref_f32_to_bf16(float x);
float kvref_bf16_to_f32(uint16_t h);
/* Element idx of a typed array as double / stores a double (rounded once to the type; via fp32 first for
 * the 16-bit types would double-round, so 16-bit types are rounded directly from the double). */
double kvref_load(int dtype, const void *base, int64_t idx);
void kvref_store(int dtype, void *base, int64_t idx, double x);
/* Rounds a double to the value that kvref_store would keep. */
double kvref_round(int dtype, double x);
/* Distance of x to the next representable value above |x| in the type (one ulp). */
double kvref_ulp(int dtype, double x);
int kvref_dtype_size(int dtype);

/* ---- one sequence, as the spec names its lengths ------------------------------------------------------ */
typedef struct kvref_seq {
    int32_t n_q, q_row0;     /* q_row0: global row of query 0 (varlen: cu_seqlens_q[b]; fixed: b*seqlen_q) */
    int32_t n_new, new_row0; /* same for k_new/v_new */
    int32_t S, L, C;         /* cache_seqlens, cache_leftpad, capacity */
    int32_t cache_row;       /* contiguous: cache_batch_idx[b] or b */
} kvref_seq;
kvref_seq kvref_seq_of(const kvattn_params *p, int b);

/* Number of rows of out / softmax_lse as the reference indexes them (varlen: total_q; fixed: B*seqlen_q). */
int64_t kvref_rows(const kvattn_params *p);

/* Element offset of (position pos, kv head) of sequence b in the k cache (which=0) or v cache (which=1),
 * or -1 if that position has no valid address. */
int64_t kvref_cache_offset(const kvattn_params *p, int b, int32_t pos, int kv_head, int which);

/* Returns 0 if every sequence passes the spec's data-dependent checks, else a KVATTN_FLAG_* bit of the
 * first failure and *bad_seq its sequence (-1 for a batch-wide cu_seqlens problem). */
int kvref_check(const kvattn_params *p, int *bad_seq);
/* kvref_check leaving out the sequences b with skip_mask[b] != 0 (skip_mask NULL: none). */
int kvref_check_mask(const kvattn_params *p, const unsigned char *skip_mask, int *bad_seq);

/* The whole call on HOST pointers: checks (returns nonzero and changes nothing on failure), appends the new
 * tokens into the host caches (rotated and rounded to the element type), then computes
 * out_ref[kvref_rows(p), H, D] and lse_ref[kvref_rows(p), H] in double (rows indexed like out).
 * `skip_seq` >= 0 names one sequence to leave out entirely (used by the CUDA bad-data tests); else -1. */
int kvref_forward_skip(const kvattn_params *p, double *out_ref, double *lse_ref, int skip_seq);
/* As kvref_forward_skip, and (q_sens != NULL, [kvref_rows(p), H]) each row's score sensitivity to a rounding of
 * its rotated query: scale * max over visible keys j of sum over rotated channels c of |rope(q)_c| |k_jc| (0
 * without rotary). A backend that rounds rope(q) to the element type (relative error <= u/2 per channel) moves
 * every score by at most (u/2) * q_sens, hence lse by as much and out by at most 2 max|v| times it. */
int kvref_forward_sens(const kvattn_params *p, double *out_ref, double *lse_ref, int skip_seq, double *q_sens);
/* As kvref_forward_sens, leaving out a set of sequences as well: those b with skip_mask[b] != 0 (skip_mask NULL:
 * none; [B] otherwise), used by the randomized bad-data test for several failing sequences at once. */
int kvref_forward_mask(const kvattn_params *p, double *out_ref, double *lse_ref, int skip_seq,
                       const unsigned char *skip_mask, double *q_sens);
int kvref_forward(const kvattn_params *p, double *out_ref, double *lse_ref);

/* The exact (double) rotated value of channel c of a new key row, before rounding to the element type,
 * and the magnitude |x*cos| + |y*sin| of its terms (for the cache tolerance). Returns the plain value when
 * c >= rotary_dim or rotary is off. `row` points at the k_new row of one head (element type). */
double kvref_rope_channel(const kvattn_params *p, const void *row, int c, int32_t pos, double *magnitude);

#endif
