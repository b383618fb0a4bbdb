/* ref.c — naive float64 reference of SPEC.md: checks, append (rotary on new keys), then attention with every
 * score of a row materialized. Written from the spec's formulas only; no code shared with the backends.
 * B sequences, H query heads, Hk key/value heads, D head dim. */
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- element types --------------------------------------------------------------------------------------
 * A binary format with `prec` significand bits (implicit bit included), smallest normal exponent `emin` and
 * largest finite value `maxv`: x is rounded to the nearest representable value, ties to even. */
static double round_format(double x, int prec, int emin, double maxv) {
    if (x == 0.0 || isnan(x) || isinf(x)) return x;
    int ex;
    frexp(x, &ex); /* |x| in [2^(ex-1), 2^ex) */
    int e = ex - 1;
    if (e < emin) e = emin; /* subnormal range: fixed spacing */
    double ulp = ldexp(1.0, e - (prec - 1));
    double r = nearbyint(x / ulp) * ulp; /* default rounding mode: ties to even */
    if (fabs(r) > maxv) return x > 0 ? INFINITY : -INFINITY;
    return r;
}
#define F16_MAX 65504.0
#define BF16_MAX 3.38953138925153547590470800371487866880e+38

double kvref_round(int dtype, double x) {
    switch (dtype) {
    case KVATTN_F16: return round_format(x, 11, -14, F16_MAX);
    case KVATTN_BF16: return round_format(x, 8, -126, BF16_MAX);
    default: return (double)(float)x;
    }
}

double kvref_ulp(int dtype, double x) {
    int prec = dtype == KVATTN_F16 ? 11 : dtype == KVATTN_BF16 ? 8 : 24;
    int emin = dtype == KVATTN_F16 ? -14 : -126;
    int ex = 0;
    if (x != 0.0) frexp(x, &ex);
    int e = x == 0.0 ? emin : ex - 1;
    if (e < emin) e = emin;
    return ldexp(1.0, e - (prec - 1));
}

int kvref_dtype_size(int dtype) { return dtype == KVATTN_F32 ? 4 : 2; }

static uint16_t f16_encode(double r) { /* r is exactly representable in fp16 (or inf/nan) */
    uint16_t sign = (r < 0 || (r == 0 && signbit(r))) ? 0x8000 : 0;
    double a = fabs(r);
    if (isnan(r)) return 0x7e00;
    if (isinf(r)) return sign | 0x7c00;
    if (a == 0.0) return sign;
    if (a < ldexp(1.0, -14)) return sign | (uint16_t)(a / ldexp(1.0, -24));
    int ex;
    frexp(a, &ex);
    int e = ex - 1;
    uint16_t mant = (uint16_t)((a / ldexp(1.0, e) - 1.0) * 1024.0);
    return sign | (uint16_t)((e + 15) << 10) | mant;
}

uint16_t kvref_f32_to_f16(float x) { return f16_encode(kvref_round(KVATTN_F16, (double)x)); }

static float f16_decode(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? NAN : INFINITY;
    else if (e == 0) v = ldexp((double)m, -24);
    else v = ldexp(1.0 + m / 1024.0, e - 15);
    return (float)(sign ? -v : v);
}

/* table-driven: the reference decodes many elements */
float kvref_f16_to_f32(uint16_t h) {
    static float table[65536];
    static int ready = 0;
    if (!ready) {
        for (uint32_t i = 0; i < 65536; i++) table[i] = f16_decode((uint16_t)i);
        ready = 1;
    }
    return table[h];
}

static uint16_t bf16_encode(double r) {
    float f = (float)r; /* exact: r is representable in bf16 */
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isnan(r)) return 0x7fc0;
    return (uint16_t)(u >> 16);
}

uint16_t kvref_f32_to_bf16(float x) { return bf16_encode(kvref_round(KVATTN_BF16, (double)x)); }

float kvref_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

double kvref_load(int dtype, const void *base, int64_t idx) {
    switch (dtype) {
    case KVATTN_F16: return kvref_f16_to_f32(((const uint16_t *)base)[idx]);
    case KVATTN_BF16: return kvref_bf16_to_f32(((const uint16_t *)base)[idx]);
    default: return ((const float *)base)[idx];
    }
}

void kvref_store(int dtype, void *base, int64_t idx, double x) {
    switch (dtype) {
    case KVATTN_F16: ((uint16_t *)base)[idx] = f16_encode(kvref_round(KVATTN_F16, x)); break;
    case KVATTN_BF16: ((uint16_t *)base)[idx] = bf16_encode(kvref_round(KVATTN_BF16, x)); break;
    default: ((float *)base)[idx] = (float)x; break;
    }
}

/* ---- lengths and addresses ------------------------------------------------------------------------------ */
kvref_seq kvref_seq_of(const kvattn_params *p, int b) {
    kvref_seq s;
    if (p->cu_seqlens_q) {
        s.q_row0 = p->cu_seqlens_q[b];
        s.n_q = p->cu_seqlens_q[b + 1] - p->cu_seqlens_q[b];
    } else {
        s.q_row0 = b * p->seqlen_q;
        s.n_q = p->seqlen_q;
    }
    s.n_new = 0;
    s.new_row0 = 0;
    if (p->k_new) {
        if (p->cu_seqlens_knew) {
            s.new_row0 = p->cu_seqlens_knew[b];
            s.n_new = p->cu_seqlens_knew[b + 1] - p->cu_seqlens_knew[b];
        } else {
            s.new_row0 = b * p->seqlen_knew;
            s.n_new = p->seqlen_knew;
        }
    }
    s.S = p->cache_seqlens[b];
    s.L = p->cache_leftpad ? p->cache_leftpad[b] : 0;
    s.C = p->block_table ? p->max_pages_per_seq * p->page_size : p->cache_capacity;
    s.cache_row = p->block_table ? -1 : (p->cache_batch_idx ? p->cache_batch_idx[b] : b);
    return s;
}

int64_t kvref_rows(const kvattn_params *p) {
    return p->cu_seqlens_q ? (int64_t)p->total_q : (int64_t)p->batch * p->seqlen_q;
}

int64_t kvref_cache_offset(const kvattn_params *p, int b, int32_t pos, int kv_head, int which) {
    int64_t bs = which ? p->v_batch_stride : p->k_batch_stride;
    int64_t rs = which ? p->v_row_stride : p->k_row_stride;
    int64_t hs = which ? p->v_head_stride : p->k_head_stride;
    if (pos < 0) return -1;
    if (p->block_table) {
        int64_t slot = pos / p->page_size;
        if (slot >= p->max_pages_per_seq) return -1;
        int32_t page = p->block_table[(int64_t)b * p->block_table_batch_stride + slot];
        if (page < 0 || page >= p->num_pages) return -1;
        return (int64_t)page * bs + (int64_t)(pos % p->page_size) * rs + (int64_t)kv_head * hs;
    }
    int32_t row = p->cache_batch_idx ? p->cache_batch_idx[b] : b;
    if (row < 0 || row >= p->cache_batch || pos >= p->cache_capacity) return -1;
    return (int64_t)row * bs + (int64_t)pos * rs + (int64_t)kv_head * hs;
}

/* a row of a row tensor (q, k_new, v_new, out): varlen rows are global, fixed rows are b*batch + i*row */
static int64_t row_offset(int varlen, int b, int32_t row0, int32_t i, int64_t bstride, int64_t rstride) {
    return varlen ? (int64_t)(row0 + i) * rstride : (int64_t)b * bstride + (int64_t)i * rstride;
}

static int cu_ok(const int32_t *cu, int B, int32_t total) {
    if (cu[0] != 0) return 0;
    for (int b = 0; b < B; b++)
        if (cu[b + 1] < cu[b]) return 0;
    return cu[B] <= total;
}

/* 1 when sequence b is left out: it is skip_seq, or skip_mask (optional, [B]) is nonzero at b */
static int is_skipped(int b, int skip_seq, const unsigned char *skip_mask) {
    return b == skip_seq || (skip_mask && skip_mask[b]);
}

/* kvref_check, leaving out sequence skip_seq (-1: none) and those of skip_mask (NULL: none) */
static int check_skip(const kvattn_params *p, int *bad_seq, int skip_seq, const unsigned char *skip_mask) {
    *bad_seq = -1;
    if (p->batch <= 0) return 0;
    if (p->cu_seqlens_q && !cu_ok(p->cu_seqlens_q, p->batch, p->total_q)) return KVATTN_FLAG_BAD_CU_SEQLENS;
    if (p->k_new && p->cu_seqlens_knew && !cu_ok(p->cu_seqlens_knew, p->batch, p->total_knew))
        return KVATTN_FLAG_BAD_CU_SEQLENS;
    for (int b = 0; b < p->batch; b++) {
        if (is_skipped(b, skip_seq, skip_mask)) continue;
        kvref_seq s = kvref_seq_of(p, b);
        *bad_seq = b;
        if (s.S < 0 || s.L < 0 || s.L > s.S) return KVATTN_FLAG_BAD_LEFTPAD;
        if (!p->block_table && (s.cache_row < 0 || s.cache_row >= p->cache_batch)) return KVATTN_FLAG_BATCH_IDX;
        if ((int64_t)s.S + s.n_new > s.C) return KVATTN_FLAG_CAPACITY;
        if (p->block_table && s.S + s.n_new > s.L) {
            for (int32_t slot = s.L / p->page_size; slot <= (s.S + s.n_new - 1) / p->page_size; slot++) {
                int32_t page = p->block_table[(int64_t)b * p->block_table_batch_stride + slot];
                if (page < 0 || page >= p->num_pages) return KVATTN_FLAG_PAGE_INDEX;
            }
        }
        if (p->rotary_cos && ((int64_t)s.S + s.n_new > p->rotary_max_pos || s.n_q > s.S + s.n_new))
            return KVATTN_FLAG_ROTARY_RANGE;
    }
    *bad_seq = -1;
    return 0;
}

int kvref_check(const kvattn_params *p, int *bad_seq) { return check_skip(p, bad_seq, -1, NULL); }
int kvref_check_mask(const kvattn_params *p, const unsigned char *skip_mask, int *bad_seq) {
    return check_skip(p, bad_seq, -1, skip_mask);
}

/* ---- rotary: pairs (2i, 2i+1) interleaved, else (i, i + R/2); the first of a pair gets x cos - y sin, the
 * second y cos + x sin, with cos/sin of pair i at position pos. */
static double rope_at(const kvattn_params *p, int dtype, const void *row, int c, int32_t pos, double *mag) {
    double x = kvref_load(dtype, row, c);
    int R = p->rotary_cos ? p->rotary_dim : 0;
    if (c >= R) {
        if (mag) *mag = fabs(x);
        return x;
    }
    int half = R / 2, pair, partner, first;
    if (p->rotary_interleaved) {
        pair = c / 2;
        partner = c ^ 1;
        first = (c % 2) == 0;
    } else {
        pair = c < half ? c : c - half;
        partner = c < half ? c + half : c - half;
        first = c < half;
    }
    int64_t rs = p->rotary_row_stride ? p->rotary_row_stride : half;
    double cs = kvref_load(p->rotary_dtype, p->rotary_cos, (int64_t)pos * rs + pair);
    double sn = kvref_load(p->rotary_dtype, p->rotary_sin, (int64_t)pos * rs + pair);
    double y = kvref_load(dtype, row, partner);
    double a = x * cs, bterm = first ? -y * sn : y * sn;
    if (mag) *mag = fabs(a) + fabs(bterm);
    return a + bterm;
}

double kvref_rope_channel(const kvattn_params *p, const void *row, int c, int32_t pos, double *magnitude) {
    return rope_at(p, p->dtype, row, c, pos, magnitude);
}

/* ---- the call --------------------------------------------------------------------------------------------- */
int kvref_forward_mask(const kvattn_params *p, double *out_ref, double *lse_ref, int skip_seq,
                       const unsigned char *skip_mask, double *q_sens) {
    int bad;
    int flag = check_skip(p, &bad, skip_seq, skip_mask);
    if (flag) return flag;
    const int B = p->batch, H = p->num_heads, Hk = p->num_kv_heads, D = p->head_dim, dt = p->dtype;
    const int es = kvref_dtype_size(dt);
    const int group = H / Hk;
    const double scale = p->softmax_scale != 0.0f ? (double)p->softmax_scale : 1.0 / sqrt((double)D);

    /* 1. append: the cache at position S + t receives rope(k_new[t], S + t) and v_new[t] */
    for (int b = 0; b < B; b++) {
        if (is_skipped(b, skip_seq, skip_mask)) continue;
        kvref_seq s = kvref_seq_of(p, b);
        for (int32_t t = 0; t < s.n_new; t++) {
            for (int kh = 0; kh < Hk; kh++) {
                int vl = p->cu_seqlens_knew != NULL;
                const char *krow = (const char *)p->k_new +
                    (row_offset(vl, b, s.new_row0, t, p->knew_batch_stride, p->knew_row_stride) +
                     (int64_t)kh * p->knew_head_stride) * es;
                const char *vrow = (const char *)p->v_new +
                    (row_offset(vl, b, s.new_row0, t, p->vnew_batch_stride, p->vnew_row_stride) +
                     (int64_t)kh * p->vnew_head_stride) * es;
                int64_t ko = kvref_cache_offset(p, b, s.S + t, kh, 0);
                int64_t vo = kvref_cache_offset(p, b, s.S + t, kh, 1);
                /* compute the whole rotated row before storing (k_new and the cache never alias, but be plain) */
                for (int c = 0; c < D; c++) kvref_store(dt, p->k_cache, ko + c, rope_at(p, dt, krow, c, s.S + t, NULL));
                memcpy((char *)p->v_cache + vo * es, vrow, (size_t)D * es);
            }
        }
    }

    /* 2. attend. The visible window [L, S + n_new) of one kv head is read once into doubles. */
    double *qv = malloc(sizeof(double) * (D > 0 ? D : 1));
    for (int b = 0; b < B; b++) {
        if (is_skipped(b, skip_seq, skip_mask)) continue;
        kvref_seq s = kvref_seq_of(p, b);
        const int32_t s_k = s.S + s.n_new - s.L;
        const size_t nk = s_k > 0 ? (size_t)s_k : 1;
        double *score = malloc(sizeof(double) * nk);
        double *K = malloc(sizeof(double) * nk * (D > 0 ? D : 1));
        double *V = malloc(sizeof(double) * nk * (D > 0 ? D : 1));
        char *vis = malloc(nk);
        int vl = p->cu_seqlens_q != NULL;
        for (int kh = 0; kh < Hk; kh++) {
            if (s.n_q == 0) break;
            for (int32_t j = 0; j < s_k; j++) {
                int64_t ko = kvref_cache_offset(p, b, s.L + j, kh, 0);
                int64_t vo = kvref_cache_offset(p, b, s.L + j, kh, 1);
                for (int c = 0; c < D; c++) {
                    K[(size_t)j * D + c] = kvref_load(dt, p->k_cache, ko + c);
                    V[(size_t)j * D + c] = kvref_load(dt, p->v_cache, vo + c);
                }
            }
            for (int h = kh * group; h < (kh + 1) * group; h++) {
                double slope = p->alibi_slopes ? p->alibi_slopes[(int64_t)b * p->alibi_batch_stride + h] : 0.0;
                for (int32_t i = 0; i < s.n_q; i++) {
                    int64_t orow = (int64_t)s.q_row0 + i;
                    const int64_t qk = (int64_t)i + s_k - s.n_q; /* the query's key index (bottom-right aligned) */
                    const int32_t qpos = s.S + s.n_new - s.n_q + i; /* its absolute (rotary) position */
                    const char *qrow = (const char *)p->q +
                        (row_offset(vl, b, s.q_row0, i, p->q_batch_stride, p->q_row_stride) +
                         (int64_t)h * p->q_head_stride) * es;
                    for (int c = 0; c < D; c++) qv[c] = rope_at(p, dt, qrow, c, qpos, NULL);
                    const int R = p->rotary_cos ? (p->rotary_dim < D ? p->rotary_dim : D) : 0;
                    double sens = 0; /* max over visible j of sum_{c < R} |qv_c| |k_jc| */
                    double mx = -INFINITY;
                    for (int32_t j = 0; j < s_k; j++) {
                        int v = 1;
                        if (p->causal && j > qk) v = 0;
                        if (p->window_left >= 0 && j < qk - p->window_left) v = 0;
                        if (p->window_right >= 0 && j > qk + p->window_right) v = 0;
                        vis[j] = (char)v;
                        if (!v) continue;
                        const double *kj = K + (size_t)j * D;
                        double dot = 0;
                        for (int c = 0; c < D; c++) dot += qv[c] * kj[c];
                        if (R) {
                            double sj = 0;
                            for (int c = 0; c < R; c++) sj += fabs(qv[c] * kj[c]);
                            if (sj > sens) sens = sj;
                        }
                        double sc = scale * dot;
                        if (p->softcap > 0) sc = p->softcap * tanh(sc / p->softcap);
                        if (p->alibi_slopes) sc -= slope * fabs((double)(qk - j));
                        score[j] = sc;
                        if (sc > mx) mx = sc;
                    }
                    if (q_sens) q_sens[orow * H + h] = scale * sens; /* softcap's tanh has slope <= 1 */
                    double *o = out_ref + (orow * H + h) * D;
                    for (int c = 0; c < D; c++) o[c] = 0;
                    if (mx == -INFINITY) { /* no visible key: out = 0, lse = -inf */
                        lse_ref[orow * H + h] = -INFINITY;
                        continue;
                    }
                    double sum = 0;
                    for (int32_t j = 0; j < s_k; j++) {
                        if (!vis[j]) continue;
                        double w = exp(score[j] - mx);
                        sum += w;
                        const double *vj = V + (size_t)j * D;
                        for (int c = 0; c < D; c++) o[c] += w * vj[c];
                    }
                    for (int c = 0; c < D; c++) o[c] /= sum;
                    lse_ref[orow * H + h] = mx + log(sum);
                }
            }
        }
        free(score);
        free(K);
        free(V);
        free(vis);
    }
    free(qv);
    return 0;
}

int kvref_forward_sens(const kvattn_params *p, double *out_ref, double *lse_ref, int skip_seq, double *q_sens) {
    return kvref_forward_mask(p, out_ref, lse_ref, skip_seq, NULL, q_sens);
}

int kvref_forward_skip(const kvattn_params *p, double *out_ref, double *lse_ref, int skip_seq) {
    return kvref_forward_sens(p, out_ref, lse_ref, skip_seq, NULL);
}

int kvref_forward(const kvattn_params *p, double *out_ref, double *lse_ref) {
    return kvref_forward_skip(p, out_ref, lse_ref, -1);
}
