/* test_cuda_graph.c — a decode step captured in a CUDA graph (cudaStreamBeginCapture on a non-default stream,
 * global capture mode, so any sync or legacy-stream use inside kvattn_forward fails the capture) and replayed
 * with new cache_seqlens, block tables, queries and new tokens of the same shapes, updated by cudaMemcpy
 * before each replay (outside the graph). Each replay is checked against the float64 reference: out, lse and
 * both caches. Paged (page 16, reshuffled pool every replay) and contiguous, all taking the early start (attn.cu
 * kv_attn_early: the scheduler stores the new rows while the decode kernel runs): without rotary (the decode items
 * read the new rows from k_new / v_new) and with rotary, full (128, halves paired) or partial (64, interleaved
 * pairs): the decode items rotate their new keys into the workspace and read them there; and, at head dim 32 with
 * rotary, the plain order (the append kernel, then the attention: attn.cu KV_APPEND_MIN_DP). */
#include "test_cuda_common.h"

#define NB 8
#define MAXS 700
#define REPLAYS 6

#ifdef KVATTN_HAVE_CUDA
/* out/lse against the reference: out to the harness's 4u + 2u|ref| per element, lse to 1e-3 relative (tighter than
 * the harness's 8u), each plus the harness's term for the kernels' rounding of the rotated query to the element type
 * (dq = (u/2) q_sens, kvref_forward_sens: scores move by up to dq, so lse by dq and out by 2 max|v| dq, |v| <= 1).
 * Without that term a result within it failed: bf16, rotary 128, lse -0.01488 against -0.01386 (forty-eighth
 * session, KVATTN_TEST_SEED=913149870784; attn_notes.md, forty-ninth session). The worst error over the case, as a
 * fraction of its bound, is kept in worst[0] (out) and worst[1] (lse) for the case's summary line. */
static void check_out(const kvt_problem *P, const double *oref, const double *lref, const double *qsens,
                      double worst[2]) {
    const kvattn_params *p = &P->ph;
    const int H = p->num_heads, D = p->head_dim, dt = p->dtype;
    const double u = dt == KVATTN_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
    unsigned char *o = malloc(P->out.bytes);
    float *l = malloc(P->lse.bytes);
    if (kvt_download(&P->out.dev, o, P->out.bytes) || kvt_download(&P->lse.dev, l, P->lse.bytes)) {
        kvt_failf("download failed");
    } else {
        int bad = 0;
        for (int64_t r = 0; r < p->total_q; r++)
            for (int h = 0; h < H; h++) {
                const double dq = 0.5 * u * qsens[r * H + h];
                for (int c = 0; c < D; c++) {
                    int64_t e = r * p->out_row_stride + (int64_t)h * p->out_head_stride + c;
                    double g = kvref_load(dt, o, e), want = oref[(r * H + h) * D + c];
                    double err = fabs(g - want), tol = 4 * u + 2 * u * fabs(want) + 2 * dq;
                    if (err / tol > worst[0] || !(err == err)) worst[0] = err == err ? err / tol : INFINITY;
                    if (!(err <= tol) && bad++ < 3)
                        kvt_failf("out row %lld head %d ch %d: got %.6g want %.6g (bound %.3g)", (long long)r, h, c, g,
                                  want, tol);
                }
                double gl = l[(int64_t)h * p->lse_head_stride + r * p->lse_row_stride], wl = lref[r * H + h];
                const double err = fabs(gl - wl), tol = 1e-3 * (1 + fabs(wl)) + dq;
                if (err / tol > worst[1] || !(err == err)) worst[1] = err == err ? err / tol : INFINITY;
                if (!(err <= tol) && bad++ < 3)
                    kvt_failf("lse row %lld head %d: got %.7g want %.7g (bound %.3g, of it %.3g for the rotated query's "
                              "rounding)", (long long)r, h, gl, wl, tol, dq);
            }
    }
    free(o);
    free(l);
}

static void graph_case(int paged, int dtype, int rotary, int head_dim) {
    kvt_case_begin("graph replay, %s, %s, head dim %d, %s", paged ? "paged 16" : "contiguous",
                   dtype == KVATTN_BF16 ? "bf16" : "fp16", head_dim,
                   !rotary                ? "no rotary"
                   : head_dim < 64        ? "rotary 32, halves (plain order)"
                   : dtype == KVATTN_BF16 ? "rotary 128, halves"
                                          : "rotary 64, interleaved");
    int n_q[NB], n_new[NB], S[NB];
    for (int b = 0; b < NB; b++) {
        n_q[b] = n_new[b] = 1;
        S[b] = MAXS; /* shapes sized for the longest cache of any replay */
    }
    cu_spec sp = cu_spec_default();
    sp.dtype = dtype;
    sp.B = NB;
    sp.n_q = n_q;
    sp.n_new = n_new;
    sp.S = S;
    sp.paged = paged;
    sp.extra_pages = 16;
    sp.D = head_dim;
    sp.rotary_dim = !rotary ? 0 : head_dim < 64 ? head_dim : dtype == KVATTN_BF16 ? 128 : 64;
    sp.rotary_interleaved = rotary && head_dim >= 64 && dtype == KVATTN_F16;
    kvt_problem P;
    cu_build(&P, &sp);
    cudaStream_t stream = NULL;
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    kvt_buf ws = {0};
    size_t ws_bytes = 0;
    double *oref = calloc((size_t)NB * sp.H * sp.D, sizeof(double)), *lref = calloc((size_t)NB * sp.H, sizeof(double));
    double *qsens = calloc((size_t)NB * sp.H, sizeof(double)), worst[2] = {0, 0};
    if (kvt_problem_upload(&P, 1) || kvattn_workspace_size(&P.pd, KVATTN_BACKEND_CUDA, &ws_bytes) != KVATTN_OK) {
        kvt_failf("setup: %s", kvattn_last_error());
        goto done;
    }
    ws = kvt_alloc(KVATTN_BACKEND_CUDA, ws_bytes);
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        kvt_failf("stream create failed");
        goto done;
    }
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess) {
        kvt_failf("begin capture failed");
        goto done;
    }
    int st = kvattn_forward(&P.pd, KVATTN_BACKEND_CUDA, ws.ptr, ws_bytes, stream);
    cudaError_t ce = cudaStreamEndCapture(stream, &graph);
    if (st != KVATTN_OK || ce != cudaSuccess) {
        kvt_failf("capture: forward %s (%s), end capture %s", kvattn_status_string(st), kvattn_last_error(),
                  cudaGetErrorString(ce));
        goto done;
    }
    size_t n_nodes = 0;
    cudaGraphGetNodes(graph, NULL, &n_nodes);
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        kvt_failf("instantiate failed");
        goto done;
    }
    for (int r = 0; r < REPLAYS && !kvt_case_failed(); r++) {
        /* new lengths, block tables, q, k_new, v_new (same shapes), written into the same device buffers */
        kvattn_params *p = &P.ph;
        int32_t *sl = P.seqlens.host;
        for (int b = 0; b < NB; b++) sl[b] = r == 0 ? kvt_randint(0, 3) : kvt_randint(0, MAXS);
        if (paged) {
            int32_t *perm = malloc((size_t)p->num_pages * 4), *bt = P.block_table.host;
            for (int i = 0; i < p->num_pages; i++) perm[i] = i;
            kvt_shuffle(perm, p->num_pages);
            int next = 0;
            for (int b = 0; b < NB; b++) {
                int np = (sl[b] + 1 + p->page_size - 1) / p->page_size;
                for (int s = 0; s < p->max_pages_per_seq; s++) bt[b * p->max_pages_per_seq + s] = s < np ? perm[next++] : -1;
            }
            free(perm);
        }
        kvt_fill(dtype, P.q.host, (int64_t)NB * sp.H * sp.D, -1, 1);
        kvt_fill(dtype, P.k_new.host, (int64_t)NB * sp.Hk * sp.D, -1, 1);
        kvt_fill(dtype, P.v_new.host, (int64_t)NB * sp.Hk * sp.D, -1, 1);
        kvt_arr *upd[] = {&P.seqlens, &P.block_table, &P.q, &P.k_new, &P.v_new};
        for (size_t i = 0; i < sizeof upd / sizeof upd[0]; i++)
            if (upd[i]->used) kvt_upload(&upd[i]->dev, upd[i]->host, upd[i]->bytes);
        cudaMemset(P.out.dev.ptr, 0xFF, P.out.bytes);
        cudaMemset(P.lse.dev.ptr, 0xFF, P.lse.bytes);
        cudaDeviceSynchronize(); /* the updates ran on the legacy stream; the graph runs on a non-blocking one */
        if (cudaGraphLaunch(exec, stream) != cudaSuccess || cudaStreamSynchronize(stream) != cudaSuccess) {
            kvt_failf("replay %d: launch/sync failed", r);
            break;
        }
        kvattn_device_status ds;
        if (kvattn_device_status_read(ws.ptr, stream, &ds) != KVATTN_OK || ds.flags || ds.num_failed)
            kvt_failf("replay %d: device status flags 0x%x failed %d", r, ds.flags, ds.num_failed);
#ifdef KVT_GRAPH_MUTANT /* (mutation check of the bounds, not in the build: the reference drops each non-empty cache's
                         * first key, as a kernel reading a stale length or a wrong page would; must fail) */
        kvattn_params pm = *p;
        int32_t lp[NB];
        for (int b = 0; b < NB; b++) lp[b] = sl[b] > 0;
        pm.cache_leftpad = lp;
        if (kvref_forward_sens(&pm, oref, lref, -1, qsens)) {
#else
        if (kvref_forward_sens(p, oref, lref, -1, qsens)) {
#endif
            kvt_failf("replay %d: the reference rejected the input (test bug)", r);
            break;
        }
        check_out(&P, oref, lref, qsens, worst);
        kvt_arr *caches[2] = {&P.k_cache, &P.v_cache};
        for (int w = 0; w < 2; w++) {
            void *g = malloc(caches[w]->bytes);
            if (kvt_download(&caches[w]->dev, g, caches[w]->bytes)) kvt_failf("download of %s failed", caches[w]->name);
            else {
                kvt_check_cache(p, w, caches[w]->host, g, caches[w]->bytes, -1, 1, 0);
                memcpy(caches[w]->host, g, caches[w]->bytes);
            }
            free(g);
        }
        kvt_arr *all[] = {&P.q, &P.k_new, &P.v_new, &P.out, &P.lse, &P.k_cache, &P.v_cache, &P.block_table, &P.seqlens};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i]->used && !kvt_guards_ok(&all[i]->dev)) kvt_failf("replay %d: guards around %s", r, all[i]->name);
    }
    printf("  graph of %zu nodes replayed %d times; worst error / bound: out %.2f, lse %.2f\n", n_nodes, REPLAYS,
           worst[0], worst[1]);
done:
    cu_sync_ok("graph case");
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (stream) cudaStreamDestroy(stream);
    kvt_free(&ws);
    free(oref);
    free(lref);
    free(qsens);
    kvt_problem_free(&P);
    kvt_case_end();
}
#endif

int main(void) {
    kvt_init("test_cuda_graph");
    if (!cu_gpu_or_skip(10)) return kvt_finish();
#ifdef KVATTN_HAVE_CUDA
    for (int rotary = 1; rotary >= 0; rotary--) {
        graph_case(1, KVATTN_BF16, rotary, 128);
        graph_case(0, KVATTN_BF16, rotary, 128);
        graph_case(1, KVATTN_F16, rotary, 128);
        graph_case(0, KVATTN_F16, rotary, 128);
    }
    graph_case(1, KVATTN_BF16, 1, 32);
    graph_case(0, KVATTN_F16, 1, 32);
#endif
    return kvt_finish();
}
