/* test_rounding.c — the CPU backend rounds what it stores in a 16-bit type (fp16, bf16) to nearest: the rotated keys
 * it appends to the cache and the outputs. The harness (kvt_problem_run) allows an appended rotated key one ulp and an
 * output 4u max|v| + 2u |ref|, which a conversion that truncates (or rounds the wrong way) also passes: truncation is
 * off by less than one ulp. Here every such element must lie within half an ulp of its exact value, plus the fp32
 * arithmetic's own error: a rotated key element within 0.5 ulp + 8 x 2^-24 (|x cos| + |y sin|) of rope(k_new) in
 * float64, and an out element within 0.5 ulp + 2e-5 of the float64 attention over the very cache rows the call
 * wrote (|v| <= 1). On the CPU backend the excess over half an ulp stayed below 0.2 of those allowances for the keys
 * and 0.01 for out in 18 full runs (printed at the end); a conversion that truncates is off by up to a whole ulp and
 * failed every case of its type. Fresh random inputs per run (decode and prefill rows, GPT-J and GPT-NeoX rotary,
 * head dims with and without a tail of 16), poisoned outputs, and every check of kvt_problem_run besides. CPU only:
 * the CUDA kernels round P to the element type before P x V (harness.c, "tolerances"), which this bound does not
 * allow.
 * B sequences, H query heads, Hk key/value heads, D head dim. */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define B 2
#define H 4
#define HK 2

/* the largest excess over half an ulp seen in passing elements, as a fraction of the allowance for the fp32 arithmetic
 * (how close the passing elements came to failing: a half-ulp error itself is normal, at a midpoint) */
static double g_worst_k, g_worst_o;

static void rounding_case(int dt, int D, int NQ, int interleaved) {
    const int es = kvref_dtype_size(dt);
    int32_t S[B];
    int need = 0;
    for (int b = 0; b < B; b++) {
        S[b] = kvt_randint(0, 60);
        if (S[b] + NQ > need) need = S[b] + NQ;
    }
    const int C = need + kvt_randint(0, 3), R = kvt_randint(0, 1) ? D : 2 * kvt_randint(1, D / 2);
    const int causal = kvt_randint(0, 1);
    kvt_case_begin("cpu %s D=%d R=%d %s, %d new tokens and queries per sequence, cache_seqlens %d %d%s",
                   dt == KVATTN_F16 ? "f16" : "bf16", D, R, interleaved ? "gptj" : "neox", NQ, S[0], S[1],
                   causal ? ", causal" : "");
    kvt_problem P;
    kvt_problem_init(&P, KVATTN_BACKEND_CPU, dt, B, H, HK, D);
    kvattn_params *p = &P.ph; /* strides left packed: kvt_problem_upload resolves the host mirror's */
    p->seqlen_q = NQ;
    p->seqlen_knew = NQ;
    p->cache_batch = B;
    p->cache_capacity = C;
    p->causal = causal;
    kvt_arr_alloc(&P, &P.q, "q", (size_t)B * NQ * H * D * es);
    kvt_fill(dt, P.q.host, (int64_t)B * NQ * H * D, -2, 2);
    kvt_arr_alloc(&P, &P.k_new, "k_new", (size_t)B * NQ * HK * D * es);
    kvt_arr_alloc(&P, &P.v_new, "v_new", (size_t)B * NQ * HK * D * es);
    kvt_fill(dt, P.k_new.host, (int64_t)B * NQ * HK * D, -1, 1);
    kvt_fill(dt, P.v_new.host, (int64_t)B * NQ * HK * D, -1, 1);
    const int64_t cache_el = (int64_t)B * C * HK * D;
    kvt_arr_alloc(&P, &P.k_cache, "k_cache", (size_t)cache_el * es);
    kvt_arr_alloc(&P, &P.v_cache, "v_cache", (size_t)cache_el * es);
    kvt_fill(dt, P.k_cache.host, cache_el, -1, 1);
    kvt_fill(dt, P.v_cache.host, cache_el, -1, 1);
    kvt_arr_alloc(&P, &P.seqlens, "cache_seqlens", sizeof S);
    memcpy(P.seqlens.host, S, sizeof S);
    kvt_arr_alloc(&P, &P.out, "out", (size_t)B * NQ * H * D * es);
    kvt_arr_alloc(&P, &P.lse, "softmax_lse", (size_t)B * H * NQ * 4);
    const int half = R / 2, max_pos = need + 2;
    p->rotary_dim = R;
    p->rotary_max_pos = max_pos;
    p->rotary_interleaved = interleaved;
    p->rotary_dtype = KVATTN_F32;
    kvt_arr_alloc(&P, &P.rot_cos, "rotary_cos", (size_t)max_pos * half * 4);
    kvt_arr_alloc(&P, &P.rot_sin, "rotary_sin", (size_t)max_pos * half * 4);
    for (int pos = 0; pos < max_pos; pos++)
        for (int i = 0; i < half; i++) {
            const double theta = pos * pow(10000.0, -2.0 * i / R);
            ((float *)P.rot_cos.host)[pos * half + i] = (float)cos(theta);
            ((float *)P.rot_sin.host)[pos * half + i] = (float)sin(theta);
        }
    if (kvt_problem_upload(&P, 1) == 0 && !kvt_problem_run_case(&P, kvt_expect_ok()) && !kvt_case_failed()) {
        const kvattn_params *ph = &P.ph; /* its caches now hold the backend's bytes (kvt_problem_run) */
        int bad = 0;
        /* 1. appended keys: rope(k_new) rounded once, to nearest */
        for (int b = 0; b < B; b++)
            for (int t = 0; t < NQ; t++)
                for (int kh = 0; kh < HK; kh++) {
                    const char *row = (const char *)ph->k_new +
                                      ((int64_t)b * ph->knew_batch_stride + (int64_t)t * ph->knew_row_stride +
                                       (int64_t)kh * ph->knew_head_stride) * es;
                    const int64_t o = kvref_cache_offset(ph, b, S[b] + t, kh, 0);
                    for (int c = 0; c < D; c++) {
                        double mag;
                        const double x = kvref_rope_channel(ph, row, c, S[b] + t, &mag);
                        const double slack = 8 * ldexp(1.0, -24) * mag;
                        const double tol = 0.5 * kvref_ulp(dt, fabs(x) + slack) + slack;
                        const double g = kvref_load(dt, ph->k_cache, o + c), err = fabs(g - x);
                        if (!(err <= tol)) {
                            if (bad++ < 4)
                                kvt_failf("k_cache: b=%d t=%d kh=%d c=%d is %.9g, rope(k_new) = %.9g: off by %.3g ulp "
                                          "(round to nearest: <= 0.5)", b, t, kh, c, g, x, err / kvref_ulp(dt, x));
                        } else if ((err - (tol - slack)) / slack > g_worst_k) {
                            g_worst_k = (err - (tol - slack)) / slack;
                        }
                    }
                }
        /* 2. out: the float64 attention over the cache rows the call wrote (no append: cache_seqlens S + NQ, the
         * same query positions S + i), each element rounded once, to nearest */
        kvattn_params after = *ph;
        int32_t S_after[B];
        for (int b = 0; b < B; b++) S_after[b] = S[b] + NQ;
        after.k_new = after.v_new = NULL;
        after.cache_seqlens = S_after;
        double *oref = calloc((size_t)B * NQ * H * D, sizeof(double));
        double *lref = calloc((size_t)B * NQ * H, sizeof(double));
        unsigned char *got = malloc(P.out.bytes);
        if (kvref_forward(&after, oref, lref) != 0) kvt_failf("reference rejected the input: the test is wrong");
        else if (kvt_download(&P.out.dev, got, P.out.bytes)) kvt_failf("download of out failed");
        else
            for (int b = 0; b < B; b++)
                for (int i = 0; i < NQ; i++)
                    for (int h = 0; h < H; h++) {
                        const int64_t row = (int64_t)b * NQ + i;
                        if (lref[row * H + h] == -INFINITY) continue; /* (every row sees a key here) */
                        const int64_t e0 = (int64_t)b * ph->out_batch_stride + (int64_t)i * ph->out_row_stride +
                                           (int64_t)h * ph->out_head_stride;
                        for (int c = 0; c < D; c++) {
                            const double x = oref[(row * H + h) * D + c], slack = 2e-5;
                            const double tol = 0.5 * kvref_ulp(dt, fabs(x) + slack) + slack;
                            const double g = kvref_load(dt, got, e0 + c), err = fabs(g - x);
                            if (!(err <= tol)) {
                                if (bad++ < 8)
                                    kvt_failf("out: b=%d i=%d h=%d c=%d is %.9g, want %.9g: off by %.3g ulp (round to "
                                              "nearest: <= 0.5)", b, i, h, c, g, x, err / kvref_ulp(dt, x));
                            } else if ((err - (tol - slack)) / slack > g_worst_o) {
                                g_worst_o = (err - (tol - slack)) / slack;
                            }
                        }
                    }
        if (bad > 8) kvt_failf("... %d elements in all more than half an ulp off", bad);
        free(oref);
        free(lref);
        free(got);
    }
    kvt_case_end();
    kvt_problem_free(&P);
}

int main(void) {
    kvt_init("test_rounding");
    static const int dims[3] = {64, 72, 128}, nqs[3] = {1, 5, 16};
    const int reps = kvt_quick() ? 1 : 4;
    for (int r = 0; r < reps; r++)
        for (int dt = KVATTN_F16; dt <= KVATTN_BF16; dt++)
            for (int d = 0; d < 3; d++)
                for (int n = 0; n < 3; n++) rounding_case(dt, dims[d], nqs[n], kvt_randint(0, 1));
    printf("test_rounding: worst excess over half an ulp / fp32 allowance: k_cache %.3f, out %.3f\n", g_worst_k,
           g_worst_o);
    return kvt_finish();
}
