/* cpu.c — the CPU backend of SPEC.md, in three phases: (1) every data-dependent check for every sequence, so a
 * failing call writes nothing; (2) the append of k_new/v_new into the cache (rotary on keys only), on the calling
 * thread; (3) the attention: keys in tiles of KT with an online softmax (no full score row is ever stored), work items
 * (sequence, group of kv heads, query tile, key split) spread over OpenMP threads, the G = H / Hk query heads of a kv
 * head processed together, and the key splits of a group combined in a fixed order by whichever thread finishes the
 * group's last split. A decode item covers all kv heads of its sequence, so that it reads whole token rows.
 * Two ways to read a tile: converted once to fp32 (prefill: many query rows reuse it), or, on the AVX-512 decode path,
 * the fp16/bf16 cache rows read in place while the next tile is prefetched in memory order (docs/perf/cpu.md says
 * why). Every step is deterministic; split decisions depend only on the sequence's own lengths, so the results are
 * always batch invariant.
 * B sequences, H query heads, Hk KV heads, G = H / Hk, D head dim (Dp: D rounded up to 16 for fp32 scratch). */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h> /* vcvtph2ps: fp16 -> fp32 in one instruction (exact, like f16_to_f32) */
#endif

#define KT 32             /* keys per tile */
#define ROWS_PER_ITEM 64  /* target (query heads x query rows) per kv head per work item */
#define ITEM_ROWS 128     /* at most this many rows (kv heads x query heads x query rows) per work item, unless one
                             kv head alone has more */
#define MIN_WORK_PER_THREAD (1 << 24) /* multiply-adds (about 0.5 ms of one core) worth waking another thread for */
#define SPLIT_KEYS 1024   /* automatic split: keys per split for single-query-tile (decode-like) sequences */
#define ALIGN 64
#define PREFETCH_LEVEL 2  /* __builtin_prefetch locality: 2 = L2 (AMD fills L1 too) */

/* A multiply-add for the portable kernels and kv_exp. fmaf is one instruction only when the target has FMA; on
 * targets without it (-march=x86-64, x86-64-v2) it is a libm call per element that also stops vectorization: the
 * decode bench ran 50x slower (fifty-second session). There the kernels multiply and add (one more rounding). */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define KV_FMA(a, b, c) fmaf(a, b, c)
#else
#define KV_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* ---- element conversions (round to nearest even), fp32 <-> fp16 / bf16 --------------------------------- */
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float f16_to_f32(uint16_t h) {
    /* exponent and mantissa moved into place, then one multiply rebiases normals and subnormals alike */
    uint32_t em = (uint32_t)(h & 0x7fff) << 13;
    uint32_t r = f32_bits(bits_f32(em) * 0x1p112f);
    if ((h & 0x7c00) == 0x7c00) r = em | 0x7f800000; /* inf, nan (payload kept) */
    return bits_f32(r | ((uint32_t)(h & 0x8000) << 16));
}
static inline uint16_t f32_to_f16(float f) {
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff)); /* quiet nan */
    if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00);                      /* >= 65520 rounds to inf */
    if (a < 0x38800000) { /* below 2^-14: a subnormal half; the float add rounds to nearest even */
        float units = bits_f32(a) * 0x1p24f;
        return (uint16_t)(sign | (uint32_t)((units + 0x1p23f) - 0x1p23f));
    }
    uint32_t r = a - 0x38000000; /* rebias 127 -> 15 */
    r += 0xfff + ((r >> 13) & 1);
    return (uint16_t)(sign | (r >> 13));
}
static inline float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }
static inline uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* n elements of `dtype` at base + off (in elements) to fp32 dst */
static inline void load_row(int dtype, const void *base, int64_t off, float *restrict dst, int n) {
    if (dtype == KVATTN_F32) {
        memcpy(dst, (const float *)base + off, (size_t)n * 4);
    } else if (dtype == KVATTN_F16) {
        const uint16_t *restrict src = (const uint16_t *)base + off;
        int d = 0;
#if defined(__AVX512F__)
        for (; d + 16 <= n; d += 16)
            _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + d))));
#elif defined(__F16C__)
        for (; d + 8 <= n; d += 8) _mm256_storeu_ps(dst + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + d))));
#endif
        for (; d < n; d++) dst[d] = f16_to_f32(src[d]); /* the portable path, and the tail */
    } else {
        const uint16_t *restrict src = (const uint16_t *)base + off;
        for (int d = 0; d < n; d++) dst[d] = bf16_to_f32(src[d]); /* a shift: gcc vectorizes it */
    }
}
static inline void store_row(int dtype, void *base, int64_t off, const float *restrict src, int n) {
    if (dtype == KVATTN_F32) {
        memcpy((float *)base + off, src, (size_t)n * 4);
    } else if (dtype == KVATTN_F16) {
        uint16_t *restrict dst = (uint16_t *)base + off;
        for (int d = 0; d < n; d++) dst[d] = f32_to_f16(src[d]);
    } else {
        uint16_t *restrict dst = (uint16_t *)base + off;
        for (int d = 0; d < n; d++) dst[d] = f32_to_bf16(src[d]);
    }
}

/* exp for the softmax, branch-free so that gcc vectorizes the loops calling it (about 1 ulp; 0 below -87; NaN for
 * NaN, whose clamp is written so that the int conversion below never sees a NaN: that would be undefined) */
static inline float kv_exp(float x) {
    float xc = x > -87.0f ? (x < 88.0f ? x : 88.0f) : -87.0f;
    float n = rintf(xc * 1.44269504088896341f);
    float r = KV_FMA(n, -0.693145751953125f, xc);
    r = KV_FMA(n, -1.428606765330187e-06f, r);
    float q = KV_FMA(r, 1.0f / 720.0f, 1.0f / 120.0f);
    q = KV_FMA(q, r, 1.0f / 24.0f);
    q = KV_FMA(q, r, 1.0f / 6.0f);
    q = KV_FMA(q, r, 0.5f);
    q = KV_FMA(q, r, 1.0f);
    q = KV_FMA(q, r, 1.0f);
    float y = q * bits_f32((uint32_t)((int32_t)n + 127) << 23);
    return x < -87.0f ? 0.0f : (x == x ? y : x);
}

/* ---- rotary ----------------------------------------------------------------------------------------------- */
/* Rotates the first R channels of x (fp32, in place) for position pos; tmp holds 2*(R/2) + R floats. */
static void rope_row(const kvattn_params *p, float *restrict x, int32_t pos, float *restrict tmp) {
    const int R = p->rotary_dim, half = R / 2, il = p->rotary_interleaved;
    const int64_t row = (int64_t)pos * (p->rotary_row_stride ? p->rotary_row_stride : half);
    float *cs = tmp, *sn = tmp + half, *xin = tmp + 2 * half;
    load_row(p->rotary_dtype, p->rotary_cos, row, cs, half);
    load_row(p->rotary_dtype, p->rotary_sin, row, sn, half);
    memcpy(xin, x, (size_t)R * 4);
    for (int c = 0; c < R; c++) {
        int pair = kv_rope_pair(c, R, il);
        x[c] = xin[c] * cs[pair] - xin[kv_rope_partner(c, R, il)] * sn[pair] * kv_rope_sign(c, R, il);
    }
}

/* ---- phase 1: data-dependent checks ---------------------------------------------------------------------- */
static int check_cu(const char *name, const char *total_name, const int32_t *cu, int32_t B, int32_t total) {
    RETURN_IF(cu[0] != 0, KVATTN_ERR_BAD_DATA, "%s[0]=%d must be 0", name, cu[0]);
    for (int32_t b = 0; b < B; b++)
        RETURN_IF(cu[b + 1] < cu[b], KVATTN_ERR_BAD_DATA, "%s: sequence %d: cu[%d]=%d < cu[%d]=%d (must not decrease)",
                  name, b, b + 1, cu[b + 1], b, cu[b]);
    RETURN_IF(cu[B] > total, KVATTN_ERR_BAD_DATA, "%s[%d]=%d exceeds %s=%d (the rows of the tensor)", name, B, cu[B],
              total_name, total);
    return KVATTN_OK;
}

static int check_data(const kvattn_params *p) {
    const int32_t B = p->batch;
    int st;
    if (p->cu_seqlens_q && (st = check_cu("cu_seqlens_q", "total_q", p->cu_seqlens_q, B, p->total_q))) return st;
    if (p->k_new && p->cu_seqlens_knew &&
        (st = check_cu("cu_seqlens_knew", "total_knew", p->cu_seqlens_knew, B, p->total_knew)))
        return st;
    for (int32_t b = 0; b < B; b++) {
        const kv_seq s = kv_seq_get(p, b);
        RETURN_IF(s.S < 0, KVATTN_ERR_BAD_DATA, "sequence %d: cache_seqlens=%d must be >= 0", b, s.S);
        RETURN_IF(s.L < 0 || s.L > s.S, KVATTN_ERR_BAD_DATA, "sequence %d: cache_leftpad=%d must be in [0, cache_seqlens=%d]",
                  b, s.L, s.S);
        const int64_t end = (int64_t)s.S + s.n_new;
        RETURN_IF(end > s.C, KVATTN_ERR_BAD_DATA,
                  "sequence %d: cache_seqlens=%d + n_new=%d exceeds the capacity %d (%s)", b, s.S, s.n_new, s.C,
                  p->block_table ? "max_pages_per_seq x page_size" : "cache_capacity");
        if (p->block_table) {
            const int32_t *row = p->block_table + (int64_t)b * p->block_table_batch_stride;
            if (end > s.L)
                for (int64_t slot = s.L / p->page_size; slot <= (end - 1) / p->page_size; slot++)
                    RETURN_IF(row[slot] < 0 || row[slot] >= p->num_pages, KVATTN_ERR_BAD_DATA,
                              "sequence %d: block_table[%d][%lld]=%d is outside [0, num_pages=%d)", b, b,
                              (long long)slot, row[slot], p->num_pages);
        } else {
            const int32_t crow = p->cache_batch_idx ? p->cache_batch_idx[b] : b;
            RETURN_IF(crow < 0 || crow >= p->cache_batch, KVATTN_ERR_BAD_DATA,
                      "sequence %d: cache_batch_idx=%d is outside [0, cache_batch=%d)", b, crow, p->cache_batch);
        }
        if (p->rotary_cos) {
            RETURN_IF(end > p->rotary_max_pos, KVATTN_ERR_BAD_DATA,
                      "sequence %d: position cache_seqlens=%d + n_new=%d exceeds rotary_max_pos=%d", b, s.S, s.n_new,
                      p->rotary_max_pos);
            RETURN_IF(s.n_q > end, KVATTN_ERR_BAD_DATA,
                      "sequence %d: n_q=%d > cache_seqlens=%d + n_new=%d gives queries a negative rotary position",
                      b, s.n_q, s.S, s.n_new);
        }
    }
    return KVATTN_OK;
}

/* ---- phase 2: append ------------------------------------------------------------------------------------- */
static void append_seq(const kvattn_params *p, int32_t b, float *restrict tmp) {
    const kv_seq s = kv_seq_get(p, b);
    const int varlen = p->cu_seqlens_knew != NULL, D = p->head_dim, esize = kv_dtype_size(p->dtype);
    const int32_t crow = p->cache_batch_idx ? p->cache_batch_idx[b] : b;
    float *x = tmp, *rtmp = tmp + D;
    for (int32_t t = 0; t < s.n_new; t++) {
        for (int kvh = 0; kvh < p->num_kv_heads; kvh++) {
            int64_t ko = kv_cache_offset(p, b, crow, s.S + t, kvh, p->k_batch_stride, p->k_row_stride, p->k_head_stride);
            int64_t vo = kv_cache_offset(p, b, crow, s.S + t, kvh, p->v_batch_stride, p->v_row_stride, p->v_head_stride);
            if (ko < 0 || vo < 0) continue; /* cannot happen after check_data */
            int64_t kn = kv_row_offset(varlen, b, s.new_row0, t, p->knew_batch_stride, p->knew_row_stride) +
                         (int64_t)kvh * p->knew_head_stride;
            int64_t vn = kv_row_offset(varlen, b, s.new_row0, t, p->vnew_batch_stride, p->vnew_row_stride) +
                         (int64_t)kvh * p->vnew_head_stride;
            if (p->rotary_cos) {
                load_row(p->dtype, p->k_new, kn, x, D);
                rope_row(p, x, s.S + t, rtmp);
                store_row(p->dtype, p->k_cache, ko, x, D);
            } else {
                memmove((char *)p->k_cache + ko * esize, (const char *)p->k_new + kn * esize, (size_t)D * esize);
            }
            /* memmove: a k_new / v_new that overlaps the cache gives an unspecified result (kvattn.h), not UB */
            memmove((char *)p->v_cache + vo * esize, (const char *)p->v_new + vn * esize, (size_t)D * esize);
        }
    }
}

/* ---- phase 3: attention ---------------------------------------------------------------------------------- */
typedef struct work_item {
    int32_t b;
    int32_t kv_head0, n_kv; /* kv heads [kv_head0, kv_head0 + n_kv): a cache position keeps its heads side by side
                               (NHD), so an item over all of them reads whole token rows: streaming, not 2 KiB jumps */
    int32_t q0, nq;      /* query rows [q0, q0 + nq) of the sequence */
    int32_t klo, khi;    /* key indices (relative to L) this item reads */
    int32_t split, nsplit;
    int64_t part;        /* first partial row (nsplit > 1) */
    int64_t group;       /* index of its split group's completion counter (nsplit > 1) */
} work_item;

typedef struct scratch { /* one thread's fp32 scratch, rows of Dp floats, 64-byte aligned */
    float *q, *acc, *m, *l, *prob, *tmp;
    float *k, *v;          /* the key tile in fp32: [kv head of the item][KT][Dp], K and V */
    int64_t *k_off, *v_off; /* cache offsets (kv head 0) of the tile's positions */
    int64_t *next_k_off, *next_v_off; /* and of the next tile's (decode path) */
    int32_t *jlo, *jhi;     /* visible part of the tile, per query of the item */
} scratch;

typedef struct plan {
    int G, Dp, QT, KH; /* KH: kv heads per work item */
    float scale;
    float *part_acc, *part_ml; /* split partials: acc rows [*, Dp] and (m, l) pairs */
} plan;

/* Sum of 16 lanes as a tree (gcc turns it into a few vector adds, unlike a sequential scalar sum). */
static inline float hsum16(const float *restrict a) {
    float b[8], c[4];
    for (int u = 0; u < 8; u++) b[u] = a[u] + a[u + 8];
    for (int u = 0; u < 4; u++) c[u] = b[u] + b[u + 4];
    return (c[0] + c[2]) + (c[1] + c[3]);
}

/* Where a tile's keys (or values) are: rows of an fp32 tile [KT][Dp], or, on the AVX-512 decode path, the cache
 * rows themselves (fp16/bf16, row j at raw + off[j], D a multiple of 16), converted in registers: with up to 32 query
 * rows per kv head (decode, speculative steps of up to 8 tokens at G = 4), writing and re-reading an fp32 copy costs
 * more than converting the rows again for every 4 of them (measured: n_q = 7, G = 4, one thread: 21.8 -> 18.1 ms). */
typedef struct prefetch_cursor prefetch_cursor;
typedef struct key_rows {
    const float *f32;
    const uint16_t *raw;
    const int64_t *off;
    int bf16;
    prefetch_cursor *next; /* raw rows only: the next tile's rows, asked for as these are read */
} key_rows;

/* Walks the cache lines of the next tile's token rows (the item's kv heads) in memory order, a few at a time. The
 * kernels read a tile kv head by kv head (rows 2 KiB apart), which the hardware prefetcher does not follow (a third
 * of the streaming bandwidth); asking for one line of the next tile, in address order, per line read fixes that.
 * A prefetch never faults, so a line past a row's end would be harmless. */
struct prefetch_cursor {
    const char *cache;
    const int64_t *off;          /* element offsets (kv head 0) of the next tile's positions, -1 = skip */
    int n_pos, pos, head, kv_head0, n_kv, esize;
    int64_t head_stride, byte, row_bytes;
};
static inline __attribute__((always_inline)) void prefetch_next(prefetch_cursor *c, int lines) {
    for (; lines > 0 && c->pos < c->n_pos; lines--) {
        if (c->off[c->pos] >= 0)
            __builtin_prefetch(c->cache + (c->off[c->pos] + (int64_t)(c->kv_head0 + c->head) * c->head_stride) * c->esize +
                                   c->byte, 0, PREFETCH_LEVEL);
        c->byte += 64;
        if (c->byte >= c->row_bytes) {
            c->byte = 0;
            if (++c->head == c->n_kv) c->head = 0, c->pos++;
        }
    }
}

#if defined(__AVX512F__)
/* channels [d0, d0 + 16) of row j, as fp32 */
static inline __m512 load16(const key_rows kr, int j, int d0, int Dp) {
    if (kr.f32) return _mm512_loadu_ps(kr.f32 + (int64_t)j * Dp + d0);
    const __m256i h = _mm256_loadu_si256((const __m256i *)(kr.raw + kr.off[j] + d0));
    return kr.bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

/* {sum(a), sum(b), sum(c), sum(d)}: four 16-lane sums reduced together in a fixed order (gcc makes the scalar
 * tree of hsum16 into ~15 scalar shuffles and adds per row, which cost as much as the dot product itself). */
static inline __m128 hsum4_avx512(__m512 a, __m512 b, __m512 c, __m512 d) {
#define KV_HALVES(x) _mm256_add_ps(_mm512_castps512_ps256(x), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)))
    const __m256 ab = _mm256_hadd_ps(KV_HALVES(a), KV_HALVES(b)), cd = _mm256_hadd_ps(KV_HALVES(c), KV_HALVES(d));
#undef KV_HALVES
    const __m256 abcd = _mm256_hadd_ps(ab, cd); /* [a b c d] partial sums in each 128-bit half */
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* tile_scores for AVX-512: the same dot products, 16 lanes per register, the four rows reduced at once */
static inline __attribute__((always_inline)) void tile_scores(const int NR, const float *restrict qr, int Dp,
                                                              const key_rows kt, int jlo, int jhi,
                                                              float *restrict prob) {
    const float *q0 = qr, *q1 = qr + (NR > 1 ? Dp : 0), *q2 = qr + (NR > 2 ? 2 * Dp : 0),
                *q3 = qr + (NR > 3 ? 3 * Dp : 0);
    int j = jlo;
    for (; j + 2 <= jhi; j += 2) { /* two keys per pass: each q load serves two FMAs */
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int d0 = 0; d0 < Dp; d0 += 16) {
            const __m512 ka = load16(kt, j, d0, Dp), kb = load16(kt, j + 1, d0, Dp);
            __m512 qd = _mm512_loadu_ps(q0 + d0);
            a0 = _mm512_fmadd_ps(qd, ka, a0);
            b0 = _mm512_fmadd_ps(qd, kb, b0);
            if (NR > 1) {
                qd = _mm512_loadu_ps(q1 + d0);
                a1 = _mm512_fmadd_ps(qd, ka, a1);
                b1 = _mm512_fmadd_ps(qd, kb, b1);
            }
            if (NR > 2) {
                qd = _mm512_loadu_ps(q2 + d0);
                a2 = _mm512_fmadd_ps(qd, ka, a2);
                b2 = _mm512_fmadd_ps(qd, kb, b2);
            }
            if (NR > 3) {
                qd = _mm512_loadu_ps(q3 + d0);
                a3 = _mm512_fmadd_ps(qd, ka, a3);
                b3 = _mm512_fmadd_ps(qd, kb, b3);
            }
        }
        if (kt.next) prefetch_next(kt.next, (int)(2 * kt.next->row_bytes / 64));
        float sa[4], sb[4];
        _mm_storeu_ps(sa, hsum4_avx512(a0, a1, a2, a3));
        _mm_storeu_ps(sb, hsum4_avx512(b0, b1, b2, b3));
        for (int r = 0; r < NR; r++) {
            prob[r * KT + j] = sa[r];
            prob[r * KT + j + 1] = sb[r];
        }
    }
    for (; j < jhi; j++) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int d0 = 0; d0 < Dp; d0 += 16) {
            const __m512 kd = load16(kt, j, d0, Dp);
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q0 + d0), kd, a0);
            if (NR > 1) a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q1 + d0), kd, a1);
            if (NR > 2) a2 = _mm512_fmadd_ps(_mm512_loadu_ps(q2 + d0), kd, a2);
            if (NR > 3) a3 = _mm512_fmadd_ps(_mm512_loadu_ps(q3 + d0), kd, a3);
        }
        float sums[4];
        _mm_storeu_ps(sums, hsum4_avx512(a0, a1, a2, a3));
        prob[j] = sums[0];
        if (NR > 1) prob[KT + j] = sums[1];
        if (NR > 2) prob[2 * KT + j] = sums[2];
        if (NR > 3) prob[3 * KT + j] = sums[3];
    }
}
#else
/* Scores of NR query rows (sharing one mask) against keys [jlo, jhi) of the tile, written to prob rows.
 * Each dot product keeps 16 lanes of partial sums in a register (Dp is a multiple of 16). */
static inline __attribute__((always_inline)) void tile_scores(const int NR, const float *restrict qr, int Dp,
                                                              const key_rows keys, int jlo, int jhi,
                                                              float *restrict prob) {
    const float *restrict kt = keys.f32; /* the portable path always has an fp32 tile */
    const float *q0 = qr, *q1 = qr + (NR > 1 ? Dp : 0), *q2 = qr + (NR > 2 ? 2 * Dp : 0),
                *q3 = qr + (NR > 3 ? 3 * Dp : 0);
    for (int j = jlo; j < jhi; j++) {
        const float *restrict k = kt + (int64_t)j * Dp;
        float a0[16] = {0}, a1[16] = {0}, a2[16] = {0}, a3[16] = {0};
        for (int d0 = 0; d0 < Dp; d0 += 16) {
            for (int u = 0; u < 16; u++) {
                const float kd = k[d0 + u];
                a0[u] = KV_FMA(q0[d0 + u], kd, a0[u]);
                if (NR > 1) a1[u] = KV_FMA(q1[d0 + u], kd, a1[u]);
                if (NR > 2) a2[u] = KV_FMA(q2[d0 + u], kd, a2[u]);
                if (NR > 3) a3[u] = KV_FMA(q3[d0 + u], kd, a3[u]);
            }
        }
        prob[j] = hsum16(a0);
        if (NR > 1) prob[KT + j] = hsum16(a1);
        if (NR > 2) prob[2 * KT + j] = hsum16(a2);
        if (NR > 3) prob[3 * KT + j] = hsum16(a3);
    }
}
#endif

/* tile_pv sums one tile's products in fresh registers and then adds them to the row's accumulator: a running fp32
 * sum fed one key at a time over a whole long cache drifts systematically (3e-3 in fp32 at 262k keys of constant
 * values: docs/perf/s53/cpu_drift_old_new.txt); per tile, the accumulator takes one rounding per KT keys. */
#if defined(__AVX512F__)
static inline __attribute__((always_inline)) void acc_add(float *restrict a, __m512 x) {
    _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), x));
}
/* tile_pv for AVX-512: accumulators as named registers (the portable arrays end up on the stack in the big
 * function this is inlined into, a store and reload per key), 32 channels per pass to halve the prob broadcasts */
static inline __attribute__((always_inline)) void tile_pv(const int NR, float *restrict acc, int Dp,
                                                          const key_rows vt, int jlo, int jhi,
                                                          const float *restrict prob) {
    float *acc1 = acc + (NR > 1 ? Dp : 0), *acc2 = acc + (NR > 2 ? 2 * Dp : 0), *acc3 = acc + (NR > 3 ? 3 * Dp : 0);
    int d0 = 0;
    for (; d0 + 32 <= Dp; d0 += 32) {
        __m512 a0 = _mm512_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0, a3 = a0, b3 = a0;
        for (int j = jlo; j < jhi; j++) {
            const __m512 v = load16(vt, j, d0, Dp), w = load16(vt, j, d0 + 16, Dp);
            if (vt.next) prefetch_next(vt.next, 1); /* 32 fp16/bf16 channels: one line read */
            const __m512 p0 = _mm512_set1_ps(prob[j]);
            a0 = _mm512_fmadd_ps(p0, v, a0);
            b0 = _mm512_fmadd_ps(p0, w, b0);
            if (NR > 1) {
                const __m512 p1 = _mm512_set1_ps(prob[KT + j]);
                a1 = _mm512_fmadd_ps(p1, v, a1);
                b1 = _mm512_fmadd_ps(p1, w, b1);
            }
            if (NR > 2) {
                const __m512 p2 = _mm512_set1_ps(prob[2 * KT + j]);
                a2 = _mm512_fmadd_ps(p2, v, a2);
                b2 = _mm512_fmadd_ps(p2, w, b2);
            }
            if (NR > 3) {
                const __m512 p3 = _mm512_set1_ps(prob[3 * KT + j]);
                a3 = _mm512_fmadd_ps(p3, v, a3);
                b3 = _mm512_fmadd_ps(p3, w, b3);
            }
        }
        acc_add(acc + d0, a0), acc_add(acc + d0 + 16, b0);
        if (NR > 1) acc_add(acc1 + d0, a1), acc_add(acc1 + d0 + 16, b1);
        if (NR > 2) acc_add(acc2 + d0, a2), acc_add(acc2 + d0 + 16, b2);
        if (NR > 3) acc_add(acc3 + d0, a3), acc_add(acc3 + d0 + 16, b3);
    }
    for (; d0 < Dp; d0 += 16) {
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int j = jlo; j < jhi; j++) {
            const __m512 v = load16(vt, j, d0, Dp);
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(prob[j]), v, a0);
            if (NR > 1) a1 = _mm512_fmadd_ps(_mm512_set1_ps(prob[KT + j]), v, a1);
            if (NR > 2) a2 = _mm512_fmadd_ps(_mm512_set1_ps(prob[2 * KT + j]), v, a2);
            if (NR > 3) a3 = _mm512_fmadd_ps(_mm512_set1_ps(prob[3 * KT + j]), v, a3);
        }
        acc_add(acc + d0, a0);
        if (NR > 1) acc_add(acc1 + d0, a1);
        if (NR > 2) acc_add(acc2 + d0, a2);
        if (NR > 3) acc_add(acc3 + d0, a3);
    }
}
#else
/* acc rows += prob rows x V tile over keys [jlo, jhi), 16 channels at a time held in registers. */
static inline __attribute__((always_inline)) void tile_pv(const int NR, float *restrict acc, int Dp,
                                                          const key_rows values, int jlo, int jhi,
                                                          const float *restrict prob) {
    const float *restrict vt = values.f32; /* the portable path always has an fp32 tile */
    for (int d0 = 0; d0 < Dp; d0 += 16) {
        float a0[16], a1[16], a2[16], a3[16];
        for (int u = 0; u < 16; u++) a0[u] = a1[u] = a2[u] = a3[u] = 0.0f;
        for (int j = jlo; j < jhi; j++) {
            const float *restrict v = vt + (int64_t)j * Dp + d0;
            const float p0 = prob[j], p1 = NR > 1 ? prob[KT + j] : 0.0f, p2 = NR > 2 ? prob[2 * KT + j] : 0.0f,
                        p3 = NR > 3 ? prob[3 * KT + j] : 0.0f;
            for (int u = 0; u < 16; u++) {
                a0[u] = KV_FMA(p0, v[u], a0[u]);
                if (NR > 1) a1[u] = KV_FMA(p1, v[u], a1[u]);
                if (NR > 2) a2[u] = KV_FMA(p2, v[u], a2[u]);
                if (NR > 3) a3[u] = KV_FMA(p3, v[u], a3[u]);
            }
        }
        for (int u = 0; u < 16; u++) {
            acc[d0 + u] += a0[u];
            if (NR > 1) acc[Dp + d0 + u] += a1[u];
            if (NR > 2) acc[2 * Dp + d0 + u] += a2[u];
            if (NR > 3) acc[3 * Dp + d0 + u] += a3[u];
        }
    }
}
#endif

/* Online-softmax update of one row for keys [jlo, jhi) of the tile starting at key index kt0: softcap, ALiBi,
 * new running max, rescale of the running sum and accumulator; leaves exp(score - max) in prob. */
static inline void softmax_update(const kvattn_params *p, float *restrict prob, int jlo, int jhi, int32_t kt0,
                                  float slope, int32_t qpos, float *m, float *l, float *restrict acc, int Dp) {
    if (p->softcap > 0.0f)
        for (int j = jlo; j < jhi; j++) prob[j] = kv_softcap(prob[j], p->softcap);
    if (p->alibi_slopes)
        for (int j = jlo; j < jhi; j++) prob[j] += kv_alibi_bias(slope, qpos, kt0 + j);
    float mx = -INFINITY;
    for (int j = jlo; j < jhi; j++) mx = prob[j] > mx ? prob[j] : mx;
    const float m_new = mx > *m ? mx : *m;
    const float corr = *m == -INFINITY ? 0.0f : kv_exp(*m - m_new);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = jlo; j < jhi; j++) {
        float e = kv_exp(prob[j] - m_new);
        prob[j] = e;
        sum += e;
    }
    *l = *l * corr + sum;
    *m = m_new;
    if (corr != 1.0f)
        for (int d = 0; d < Dp; d++) acc[d] *= corr;
}

/* rows (query-major: row r = ii * G + g) of NR heads of one query against one tile */
static inline __attribute__((always_inline)) void tile_rows(const int NR, const kvattn_params *p, const plan *pl,
                                                            scratch *w, const key_rows kt, const key_rows vt, int r0,
                                                            int g0, int kv_head, int b, int jlo, int jhi, int32_t kt0,
                                                            int32_t qpos) {
    const int Dp = pl->Dp;
    tile_scores(NR, w->q + (int64_t)r0 * Dp, Dp, kt, jlo, jhi, w->prob);
    for (int r = 0; r < NR; r++) {
        float slope = 0.0f;
        if (p->alibi_slopes) slope = p->alibi_slopes[(int64_t)b * p->alibi_batch_stride + kv_head * pl->G + g0 + r];
        softmax_update(p, w->prob + r * KT, jlo, jhi, kt0, slope, qpos, w->m + r0 + r, w->l + r0 + r,
                       w->acc + (int64_t)(r0 + r) * Dp, Dp);
    }
    tile_pv(NR, w->acc + (int64_t)r0 * Dp, Dp, vt, jlo, jhi, w->prob);
}

/* Every row of kv head kv_head0 + hh of an item (its nq queries x G heads) against one tile, NR = 4, 2, 1 heads at
 * a time; queries whose visible keys miss the tile are skipped. */
static inline __attribute__((always_inline)) void tile_kv_head(const kvattn_params *p, const plan *pl,
                                                               const work_item *it, scratch *w, const key_rows kt,
                                                               const key_rows vt, int hh, int b, int32_t s_k,
                                                               int32_t n_q, int32_t kt0) {
    const int G = pl->G, RH = it->nq * G, kvh = it->kv_head0 + hh;
    for (int ii = 0; ii < it->nq; ii++) {
        if (w->jlo[ii] >= w->jhi[ii]) continue; /* this tile lies wholly outside the row's visible keys */
        const int32_t qpos = (it->q0 + ii - n_q) + s_k; /* each partial sum stays within int32 */
        const int r0 = hh * RH + ii * G;
        int g0 = 0;
        for (; g0 + 4 <= G; g0 += 4) tile_rows(4, p, pl, w, kt, vt, r0 + g0, g0, kvh, b, w->jlo[ii], w->jhi[ii], kt0, qpos);
        for (; g0 + 2 <= G; g0 += 2) tile_rows(2, p, pl, w, kt, vt, r0 + g0, g0, kvh, b, w->jlo[ii], w->jhi[ii], kt0, qpos);
        for (; g0 < G; g0++) tile_rows(1, p, pl, w, kt, vt, r0 + g0, g0, kvh, b, w->jlo[ii], w->jhi[ii], kt0, qpos);
    }
}

/* One work item: rows r = (hh * nq + ii) * G + g (kv head kv_head0 + hh, query q0 + ii, query head g of the group)
 * against keys [klo, khi) in tiles of KT. Per tile, the cache offsets of its positions are resolved once (the offset
 * of kv head h is that of head 0 plus h * head_stride, as in kv_cache_offset), then each kv head's K and V rows are
 * converted to fp32 and its G * nq rows updated. */
static void run_item(const kvattn_params *p, const plan *pl, const work_item *it, scratch *w) {
    const int G = pl->G, Dp = pl->Dp, D = p->head_dim, b = it->b;
    const kv_seq s = kv_seq_get(p, b);
    const int32_t s_k = s.S + s.n_new - s.L, crow = p->cache_batch_idx ? p->cache_batch_idx[b] : b;
    const int varq = p->cu_seqlens_q != NULL;
    const int RH = G * it->nq, R = RH * it->n_kv; /* rows per kv head, rows of the item */

    /* queries: fp32, rotated, pre-multiplied by the softmax scale */
    for (int hh = 0; hh < it->n_kv; hh++)
        for (int ii = 0; ii < it->nq; ii++) {
            const int32_t i = it->q0 + ii;
            for (int g = 0; g < G; g++) {
                const int r = hh * RH + ii * G + g;
                float *qr = w->q + (int64_t)r * Dp;
                int64_t off = kv_row_offset(varq, b, s.q_row0, i, p->q_batch_stride, p->q_row_stride) +
                              (int64_t)((it->kv_head0 + hh) * G + g) * p->q_head_stride;
                load_row(p->dtype, p->q, off, qr, D);
                if (p->rotary_cos) rope_row(p, qr, s.S + s.n_new - s.n_q + i, w->tmp);
                for (int d = 0; d < D; d++) qr[d] *= pl->scale;
                w->m[r] = -INFINITY;
                w->l[r] = 0.0f;
                memset(w->acc + (int64_t)r * Dp, 0, (size_t)Dp * 4);
            }
        }

#if defined(__AVX512F__)
    const int direct = p->dtype != KVATTN_F32 && D % 16 == 0 && RH <= 32; /* see key_rows */
#else
    const int direct = 0;
#endif
    for (int32_t kt0 = it->klo; kt0 < it->khi; kt0 += KT) {
        const int nk = it->khi - kt0 < KT ? it->khi - kt0 : KT;
        /* cache offsets of the tile's positions, once per position: kv head h is at + h * head_stride from head 0
         * (kv_cache_offset is linear in the head) */
        int valid = 1;
        for (int j = 0; j < nk; j++) {
            w->k_off[j] = kv_cache_offset(p, b, crow, s.L + kt0 + j, 0, p->k_batch_stride, p->k_row_stride, p->k_head_stride);
            w->v_off[j] = kv_cache_offset(p, b, crow, s.L + kt0 + j, 0, p->v_batch_stride, p->v_row_stride, p->v_head_stride);
            valid &= w->k_off[j] >= 0 && w->v_off[j] >= 0; /* always, after check_data */
        }
        /* the visible part [jlo, jhi) of the tile for each query of the item */
        for (int ii = 0; ii < it->nq; ii++) {
            kv_range rg = kv_visible_keys(it->q0 + ii, s.n_q, s_k, p->causal, p->window_left, p->window_right);
            w->jlo[ii] = rg.lo - kt0 > 0 ? rg.lo - kt0 : 0;
            w->jhi[ii] = rg.hi - kt0 < nk ? rg.hi - kt0 : nk;
        }

        if (direct && valid) {
            /* Decode: each kv head's rows read in place (converted in registers), while the kernels ask for the
             * next tile's lines in memory order (see prefetch_cursor). The loop over kv heads repeats the general
             * one below on purpose: with key_rows known to be raw here, gcc specializes the inlined kernels (one
             * shared loop choosing key_rows at run time cost 15% more per key). */
            const int bf16 = p->dtype == KVATTN_BF16;
            const int32_t next0 = kt0 + KT, next_n = it->khi - next0 < KT ? (it->khi > next0 ? it->khi - next0 : 0) : KT;
            for (int j = 0; j < next_n; j++) {
                w->next_k_off[j] = kv_cache_offset(p, b, crow, s.L + next0 + j, 0, p->k_batch_stride, p->k_row_stride,
                                                   p->k_head_stride);
                w->next_v_off[j] = kv_cache_offset(p, b, crow, s.L + next0 + j, 0, p->v_batch_stride, p->v_row_stride,
                                                   p->v_head_stride);
            }
            const int esize = kv_dtype_size(p->dtype);
            prefetch_cursor next_k = {p->k_cache, w->next_k_off, next_n, 0, 0, it->kv_head0, it->n_kv,
                                      esize, p->k_head_stride, 0, (int64_t)D * esize};
            prefetch_cursor next_v = {p->v_cache, w->next_v_off, next_n, 0, 0, it->kv_head0, it->n_kv,
                                      esize, p->v_head_stride, 0, (int64_t)D * esize};
            for (int hh = 0; hh < it->n_kv; hh++) {
                const int kvh = it->kv_head0 + hh;
                const key_rows kt = {NULL, (const uint16_t *)p->k_cache + (int64_t)kvh * p->k_head_stride, w->k_off, bf16,
                                     &next_k};
                const key_rows vt = {NULL, (const uint16_t *)p->v_cache + (int64_t)kvh * p->v_head_stride, w->v_off, bf16,
                                     &next_v};
                tile_kv_head(p, pl, it, w, kt, vt, hh, b, s_k, s.n_q, kt0);
            }
            continue;
        }

        /* General: the tile's token rows, in memory order (position by position, its kv heads side by side) into
         * one fp32 tile per kv head, then each kv head's rows against it. */
        for (int j = 0; j < nk; j++)
            for (int hh = 0; hh < it->n_kv; hh++) {
                float *kf = w->k + ((int64_t)hh * KT + j) * Dp, *vf = w->v + ((int64_t)hh * KT + j) * Dp;
                const int kvh = it->kv_head0 + hh;
                if (w->k_off[j] < 0 || w->v_off[j] < 0) { /* never read out of bounds */
                    memset(kf, 0, (size_t)D * 4);
                    memset(vf, 0, (size_t)D * 4);
                    continue;
                }
                load_row(p->dtype, p->k_cache, w->k_off[j] + (int64_t)kvh * p->k_head_stride, kf, D);
                load_row(p->dtype, p->v_cache, w->v_off[j] + (int64_t)kvh * p->v_head_stride, vf, D);
            }
        for (int hh = 0; hh < it->n_kv; hh++) {
            const key_rows kt = {w->k + (int64_t)hh * KT * Dp, NULL, NULL, 0, NULL},
                           vt = {w->v + (int64_t)hh * KT * Dp, NULL, NULL, 0, NULL};
            tile_kv_head(p, pl, it, w, kt, vt, hh, b, s_k, s.n_q, kt0);
        }
    }

    /* results: partials of a split, or the final rows */
    for (int r = 0; r < R; r++) {
        const float *acc = w->acc + (int64_t)r * Dp;
        if (it->nsplit > 1) {
            const int64_t pr = it->part + (int64_t)it->split * R + r;
            memcpy(pl->part_acc + pr * Dp, acc, (size_t)Dp * 4);
            pl->part_ml[2 * pr] = w->m[r];
            pl->part_ml[2 * pr + 1] = w->l[r];
            continue;
        }
        const int32_t i = it->q0 + (r % RH) / G;
        const int h = (it->kv_head0 + r / RH) * G + r % G;
        float *o = w->tmp;
        const float inv = w->l[r] > 0.0f ? 1.0f / w->l[r] : 0.0f;
        for (int d = 0; d < D; d++) o[d] = acc[d] * inv;
        store_row(p->dtype, p->out,
                  kv_row_offset(varq, b, s.q_row0, i, p->out_batch_stride, p->out_row_stride) + (int64_t)h * p->out_head_stride,
                  o, D);
        if (p->softmax_lse) {
            int64_t lo = varq ? (int64_t)(s.q_row0 + i) * p->lse_row_stride
                              : (int64_t)b * p->lse_batch_stride + (int64_t)i * p->lse_row_stride;
            p->softmax_lse[lo + (int64_t)h * p->lse_head_stride] = w->l[r] > 0.0f ? w->m[r] + logf(w->l[r]) : -INFINITY;
        }
    }
}

/* Combines the nsplit partials of the item whose split is 0, in split order (deterministic). */
static void combine_item(const kvattn_params *p, const plan *pl, const work_item *it, float *restrict o) {
    const int G = pl->G, Dp = pl->Dp, D = p->head_dim, b = it->b, RH = G * it->nq, R = RH * it->n_kv;
    const kv_seq s = kv_seq_get(p, b);
    const int varq = p->cu_seqlens_q != NULL;
    for (int r = 0; r < R; r++) {
        float M = -INFINITY;
        for (int sp = 0; sp < it->nsplit; sp++) M = fmaxf(M, pl->part_ml[2 * (it->part + (int64_t)sp * R + r)]);
        float L = 0.0f;
        for (int d = 0; d < D; d++) o[d] = 0.0f;
        if (M != -INFINITY) {
            for (int sp = 0; sp < it->nsplit; sp++) {
                const int64_t pr = it->part + (int64_t)sp * R + r;
                const float ms = pl->part_ml[2 * pr];
                if (ms == -INFINITY) continue;
                const float wgt = kv_exp(ms - M);
                L += pl->part_ml[2 * pr + 1] * wgt;
                const float *restrict a = pl->part_acc + pr * Dp;
                for (int d = 0; d < D; d++) o[d] += a[d] * wgt;
            }
        }
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        for (int d = 0; d < D; d++) o[d] *= inv;
        const int32_t i = it->q0 + (r % RH) / G;
        const int h = (it->kv_head0 + r / RH) * G + r % G;
        store_row(p->dtype, p->out,
                  kv_row_offset(varq, b, s.q_row0, i, p->out_batch_stride, p->out_row_stride) + (int64_t)h * p->out_head_stride,
                  o, D);
        if (p->softmax_lse) {
            int64_t lo = varq ? (int64_t)(s.q_row0 + i) * p->lse_row_stride
                              : (int64_t)b * p->lse_batch_stride + (int64_t)i * p->lse_row_stride;
            p->softmax_lse[lo + (int64_t)h * p->lse_head_stride] = L > 0.0f ? M + logf(L) : -INFINITY;
        }
    }
}

/* The work items of sequence b (kv head groups of KH x query tiles x key splits, the splits of one group adjacent
 * and in order), written to out when not NULL; returns their number. Split decisions use only this sequence's own
 * lengths (so batch invariance holds); grouping kv heads into items changes no result, each head is computed alone. */
static int64_t seq_items(const kvattn_params *p, const plan *pl, int32_t b, work_item *out) {
    const kv_seq s = kv_seq_get(p, b);
    const int32_t s_k = s.S + s.n_new - s.L;
    const int32_t ntiles = (int32_t)(((int64_t)s.n_q + pl->QT - 1) / pl->QT); /* n_q may be near 2^31 */
    int64_t n = 0;
    for (int32_t h0 = 0; h0 < p->num_kv_heads; h0 += pl->KH)
        for (int32_t t = 0; t < ntiles; t++) {
            const int32_t q0 = t * pl->QT, nq = s.n_q - q0 < pl->QT ? s.n_q - q0 : pl->QT;
            int32_t klo = kv_visible_keys(q0, s.n_q, s_k, p->causal, p->window_left, p->window_right).lo;
            int32_t khi = kv_visible_keys(q0 + nq - 1, s.n_q, s_k, p->causal, p->window_left, p->window_right).hi;
            if (khi < klo) khi = klo;
            int32_t nsplit = 1;
            if (ntiles == 1 && p->num_splits != 1) {
                /* automatic: one split per SPLIT_KEYS keys; num_splits = n asks for n (at most one per key tile) */
                nsplit = p->num_splits > 1 ? p->num_splits : (khi - klo + SPLIT_KEYS - 1) / SPLIT_KEYS;
                if (nsplit > (khi - klo + KT - 1) / KT) nsplit = (khi - klo + KT - 1) / KT;
                if (nsplit < 1) nsplit = 1;
            }
            int32_t chunk = (khi - klo + nsplit - 1) / nsplit;
            chunk = (chunk + KT - 1) / KT * KT;
            if (chunk < KT) chunk = KT;
            if (nsplit > 1) nsplit = (int32_t)(((int64_t)khi - klo + chunk - 1) / chunk); /* past 2^31 at 2 splits */
            for (int32_t sp = 0; sp < nsplit; sp++) {
                if (out) {
                    work_item *it = &out[n];
                    it->b = b;
                    it->kv_head0 = h0;
                    it->n_kv = p->num_kv_heads - h0 < pl->KH ? p->num_kv_heads - h0 : pl->KH;
                    it->q0 = q0;
                    it->nq = nq;
                    it->klo = klo + sp * chunk;
                    /* in int64: rounding each split up to KT keys can carry klo + chunk past 2^31 - 1 */
                    it->khi = (int64_t)it->klo + chunk < khi ? it->klo + chunk : khi;
                    it->split = sp;
                    it->nsplit = nsplit;
                    it->part = -1;
                    it->group = -1;
                }
                n++;
            }
        }
    return n;
}

/* n floats, 64-byte aligned, zeroed if asked (the channels [D, Dp) of q rows and key tiles are read as zeros) */
static void *alloc_floats(int64_t n, int zero) {
    size_t bytes = ((size_t)(n > 0 ? n : 1) * 4 + ALIGN - 1) / ALIGN * ALIGN;
    void *ptr = aligned_alloc(ALIGN, bytes);
    if (ptr && zero) memset(ptr, 0, bytes);
    return ptr;
}

/* One thread's scratch, carved from `base` (per_thread floats, see kv_cpu_forward) for items of at most `rows` rows. */
static scratch scratch_at(float *base, const plan *pl, int64_t rows) {
    const int64_t Dp = pl->Dp;
    scratch w;
    w.q = base;
    w.acc = w.q + rows * Dp;
    w.k = w.acc + rows * Dp;
    w.v = w.k + (int64_t)pl->KH * KT * Dp;
    w.prob = w.v + (int64_t)pl->KH * KT * Dp; /* [4 rows][KT] */
    w.k_off = (int64_t *)(w.prob + 4 * KT);
    w.v_off = w.k_off + KT;
    w.next_k_off = w.v_off + KT;
    w.next_v_off = w.next_k_off + KT;
    w.jlo = (int32_t *)(w.next_v_off + KT);
    w.jhi = w.jlo + pl->QT;
    w.m = (float *)(w.jhi + pl->QT);
    w.l = w.m + rows;
    w.tmp = w.l + rows; /* 4 * Dp + 64 floats */
    return w;
}

int kv_cpu_forward(const kvattn_params *p) {
    const int32_t B = p->batch, Hk = p->num_kv_heads, D = p->head_dim;
    if (B == 0) return KVATTN_OK;
    int st = check_data(p);
    if (st != KVATTN_OK) return st;

    plan pl;
    pl.G = p->num_heads / Hk;
    pl.Dp = (D + 15) / 16 * 16;
    pl.QT = ROWS_PER_ITEM / pl.G > 1 ? ROWS_PER_ITEM / pl.G : 1;
    pl.scale = kv_softmax_scale(p);
    int32_t max_nq = 0;
    for (int32_t b = 0; b < B; b++) {
        kv_seq s = kv_seq_get(p, b);
        if (s.n_q > max_nq) max_nq = s.n_q;
    }
    if (pl.QT > max_nq && max_nq > 0) pl.QT = max_nq;

    /* kv heads per item: as many as keep the item's rows within ITEM_ROWS (all of them for decode) */
    pl.KH = ITEM_ROWS / (pl.G * pl.QT);
    if (pl.KH < 1) pl.KH = 1;
    if (pl.KH > Hk) pl.KH = Hk;

    /* the flat work list, and its size in multiply-adds (which decides how many threads it is worth) */
    int64_t n_items = 0;
    for (int32_t b = 0; b < B; b++) n_items += seq_items(p, &pl, b, NULL);
    work_item *items = malloc((size_t)(n_items > 0 ? n_items : 1) * sizeof *items);
    if (!items) return kv_set_error(KVATTN_ERR_OUT_OF_MEMORY, "cpu: cannot allocate %lld work items", (long long)n_items);
    int64_t n = 0, part_rows = 0, n_groups = 0;
    double work = 0; /* only sizes the thread count; a double cannot overflow on the largest calls */
    for (int32_t b = 0; b < B; b++) {
        const int64_t k = seq_items(p, &pl, b, items + n);
        for (int64_t x = n; x < n + k; x++) {
            work_item *it = &items[x];
            if (it->nsplit > 1) {
                if (it->split == 0) {
                    it->part = part_rows;
                    it->group = n_groups++;
                    part_rows += (int64_t)it->nsplit * it->n_kv * pl.G * it->nq;
                } else {
                    it->part = (it - it->split)->part;
                    it->group = (it - it->split)->group;
                }
            }
            work += (double)(it->khi - it->klo) * it->n_kv * (2.0 * pl.G * it->nq + 2) * D;
        }
        n += k;
        if (p->k_new) work += (double)kv_seq_get(p, b).n_new * Hk * D * 2;
    }

    /* threads: one per MIN_WORK_PER_THREAD multiply-adds, so a small call (a decode step over short caches) runs on
     * the calling thread and never waits at a barrier for a thread the OS has not scheduled */
#ifdef _OPENMP
    int nthreads = omp_get_max_threads();
#else
    int nthreads = 1;
#endif
    if (nthreads > 1 + work / MIN_WORK_PER_THREAD) nthreads = (int)(1 + work / MIN_WORK_PER_THREAD);
    if (nthreads > n_items) nthreads = (int)n_items;
    if (nthreads < 1) nthreads = 1;

    const int64_t rows = (int64_t)pl.KH * pl.G * pl.QT, Dp = pl.Dp;
    const int64_t tmp_floats = 4 * Dp + 64; /* rope_row / append_seq / the output row */
    const int64_t per_thread = ((rows * Dp) * 2 + rows * 2 + 2 * pl.KH * KT * Dp + 4 * KT + 8 * KT + 2 * pl.QT + tmp_floats + 15) / 16 * 16;
    float *scr = alloc_floats(per_thread * nthreads, Dp != D); /* every element is written before it is read, but pads */
    pl.part_acc = part_rows ? alloc_floats(part_rows * Dp, 0) : NULL;  /* whole rows written by run_item */
    pl.part_ml = part_rows ? alloc_floats(part_rows * 2, 0) : NULL;
    int32_t *done = n_groups ? calloc((size_t)n_groups, sizeof *done) : NULL; /* splits finished, per group */
    if (!scr || (part_rows && (!pl.part_acc || !pl.part_ml)) || (n_groups && !done)) {
        free(items);
        free(scr);
        free(pl.part_acc);
        free(pl.part_ml);
        free(done);
        return kv_set_error(KVATTN_ERR_OUT_OF_MEMORY, "cpu: cannot allocate %lld bytes of scratch",
                            (long long)((per_thread * nthreads + part_rows * (Dp + 2)) * 4));
    }

    /* phase 2: append (after every check passed), on the calling thread: a few rows per sequence, little next to
     * the attention over them, and one barrier fewer */
    if (p->k_new) {
        const scratch w0 = scratch_at(scr, &pl, rows);
        for (int32_t b = 0; b < B; b++) append_seq(p, b, w0.tmp);
    }

    /* phase 3: attention; the thread that finishes the last split of a group combines the group (in split order,
     * so the result does not depend on which thread it is). One barrier per call: the end of the region. */
#pragma omp parallel num_threads(nthreads) if (nthreads > 1)
    {
#ifdef _OPENMP
        const int tid = omp_get_thread_num();
#else
        const int tid = 0;
#endif
        scratch w = scratch_at(scr + tid * per_thread, &pl, rows);
#pragma omp for schedule(dynamic) nowait
        for (int64_t x = 0; x < n_items; x++) {
            const work_item *it = &items[x];
            run_item(p, &pl, it, &w);
            if (it->nsplit > 1) {
                int32_t finished;
#pragma omp atomic capture seq_cst
                finished = ++done[it->group];
                if (finished == it->nsplit) combine_item(p, &pl, it - it->split, w.tmp);
            }
        }
    }

    free(items);
    free(scr);
    free(pl.part_acc);
    free(pl.part_ml);
    free(done);
    return KVATTN_OK;
}
