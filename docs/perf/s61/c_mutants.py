# Mutant list: (id, file, old, new, description). `old` must occur exactly once in the file (unless nth is given).
M = []
def m(mid, f, old, new, desc, nth=None):
    M.append(dict(id=mid, file=f, old=old, new=new, desc=desc, nth=nth))

V = "src/validate.c"; P = "src/pages.c"; A = "src/api.c"

# ---------------- validate.c: max_offset / dims_by_stride / may_overlap ----------------
m("V01", V, "        if (extent[k] <= 0) return 0;\n    for (int k = 0; k < n; k++) {\n        int64_t term;",
           "        if (extent[k] < 0) return 0;\n    for (int k = 0; k < n; k++) {\n        int64_t term;",
  "max_offset: empty-extent test <= 0 -> < 0")
m("V02", V, "if (__builtin_add_overflow(off, 1, &bytes) || __builtin_mul_overflow(bytes, (int64_t)esize, &bytes)) return -1;",
           "if (__builtin_add_overflow(off, 1, &bytes)) return -1;",
  "max_offset: drop byte-offset (x esize) overflow guard")
m("V03", V, "if (__builtin_add_overflow(off, term, &off)) return -1;",
           "off = (int64_t)((uint64_t)off + (uint64_t)term);",
  "max_offset: drop overflow guard on the SUM of terms (wraps)")
m("V04", V, "if (__builtin_mul_overflow(extent[k] - 1, stride[k], &term)) return -1;",
           "term = (int64_t)((uint64_t)(extent[k] - 1) * (uint64_t)stride[k]);",
  "max_offset: drop overflow guard on (extent-1)*stride (wraps)")
m("V05", V, "        if (extent[k] > 1) idx[m++] = k;", "        if (extent[k] >= 1) idx[m++] = k;",
  "dims_by_stride: include extent-1 dims (> 1 -> >= 1)")
m("V06", V, "stride[idx[c]] < stride[idx[c - 1]]", "stride[idx[c]] > stride[idx[c - 1]]",
  "dims_by_stride: sort descending instead of ascending")
m("V07", V, "        if (stride[idx[a]] <= reach) return 1;", "        if (stride[idx[a]] < reach) return 1;",
  "may_overlap: stride <= reach -> stride < reach (stride == reach accepted)")
m("V08", V, "        reach += (extent[idx[a]] - 1) * stride[idx[a]];", "        reach = (extent[idx[a]] - 1) * stride[idx[a]];",
  "may_overlap: reach not accumulated (= instead of +=)")
m("V09", V, "        if (extent[k] <= 0) return 0; /* empty: nothing is written */", "        ; /* mutant: empty-tensor return dropped */",
  "may_overlap: drop the empty-tensor early return")
# ---------------- validate.c: mixed strides ----------------
m("V10", V, "ext[k] = t->given[k] == 0 ? 1 : t->ext[k]; /* a broadcast", "ext[k] = t->ext[k]; /* a broadcast",
  "check_mixed: explicit-0 (broadcast) dims no longer left out")
m("V11", V, "    if (may_overlap(t->n, ext_set, str)) return KVATTN_OK;\n", "",
  "check_mixed: drop 'set strides overlap on their own -> leave to validation'")
m("V12", V, "char *dst = t->given[k] == KVATTN_STRIDE_PACKED ? u : s;", "char *dst = t->given[k] == KVATTN_STRIDE_PACKED ? s : u;",
  "check_mixed message: unset/set field lists swapped")
m("V13", V, "const int used[7] = {1, 1, r->k_new != NULL, r->v_new != NULL, 1, 1, r->softmax_lse != NULL};",
           "const int used[7] = {1, 1, 1, r->v_new != NULL, 1, 1, r->softmax_lse != NULL};",
  "kv_check_mixed_strides: k_new checked even when k_new is NULL")
m("V14", V, "const int used[7] = {1, 1, r->k_new != NULL, r->v_new != NULL, 1, 1, r->softmax_lse != NULL};",
           "const int used[7] = {1, 1, r->k_new != NULL, r->v_new != NULL, 1, 1, 0};",
  "kv_check_mixed_strides: softmax_lse never checked")
m("V15", V, "        else if (t->given[k] < 0) return KVATTN_OK; /* validation names it */", "",
  "check_mixed: negative given stride no longer left to validation")
# ---------------- validate.c: written tensors sharing memory ----------------
m("V16", V, "if (a->lo == a->hi || b->lo == b->hi || a->hi <= b->lo || b->hi <= a->lo) return 0;",
           "if (a->lo == a->hi || b->lo == b->hi || a->hi < b->lo || b->hi <= a->lo) return 0;",
  "written_share: a->hi <= b->lo -> < (adjacent ranges intersect)")
m("V17", V, "    if (!same) return 1;", "    if (!same) return 0;",
  "written_share: different layouts whose ranges intersect accepted")
m("V18", V, "const int64_t d = (int64_t)(b0 - a0), q = d / a->esize - (d % a->esize != 0 && d < 0);",
           "const int64_t d = (int64_t)(b0 - a0), q = d / a->esize;",
  "written_share: floor correction for negative misaligned d dropped")
m("V19", V, "    for (int64_t k = c; k <= c + 1; k++) {", "    for (int64_t k = c; k <= c; k++) {",
  "is_offset_difference: only floor(d/s) tried, not +1")
m("V20", V, "        if (k < -e || k > e) continue;", "        if (k < -e || k >= e) continue;",
  "is_offset_difference: coefficient bound k > e -> k >= e")
m("V21", V, "if (r >= -reach && r <= reach && is_offset_difference", "if (r >= -reach && r < reach && is_offset_difference",
  "is_offset_difference: remainder bound r <= reach -> r < reach")
m("V22", V, "    if (d % s != 0 && d < 0) c--; /* floor */", "",
  "is_offset_difference: floor for negative d dropped (truncation)")
m("V23", V, "    if (p->softmax_lse) {\n        w[nw] =", "    if (0) {\n        w[nw] =",
  "written_list: softmax_lse not in the written list")
m("V24", V, "    if (p->k_new) {\n        const int64_t rows = p->block_table ? p->num_pages : p->cache_batch,",
           "    if (0) {\n        const int64_t rows = p->block_table ? p->num_pages : p->cache_batch,",
  "written_list: caches not in the written list when appending")
m("V25", V, "                      cap = p->block_table ? p->page_size : p->cache_capacity;\n        w[nw++]",
           "                      cap = p->cache_capacity;\n        w[nw++]",
  "written_list: paged cache extent uses cache_capacity instead of page_size")
m("V26", V, "{p->v_batch_stride, p->v_row_stride, p->v_head_stride, 1}, 0, 0};\n    }\n    for",
           "{p->k_batch_stride, p->k_row_stride, p->k_head_stride, 1}, 0, 0};\n    }\n    for",
  "written_list: v_cache given k_cache's strides")
m("V27", V, "        if (t->ext[k] <= 0) return;", "        if (t->ext[k] < 0) return;",
  "set_range: empty tensor gets a one-element range (<= 0 -> < 0)")
m("V28", V, "(uintptr_t)(max_offset(t->n, t->ext, t->str, t->esize) + 1) * (uintptr_t)t->esize;",
           "(uintptr_t)(max_offset(t->n, t->ext, t->str, t->esize)) * (uintptr_t)t->esize;",
  "set_range: range ends one element short (drop +1)")
m("V29", V, "    KV_INDEX(cu_seqlens_q, B + 1);", "    KV_INDEX(cu_seqlens_q, B);",
  "index_list: cu_seqlens_q has B entries, not B + 1")
m("V30", V, "    if (p->k_new) KV_INDEX(cu_seqlens_knew, B + 1);", "    KV_INDEX(cu_seqlens_knew, B + 1);",
  "index_list: cu_seqlens_knew listed even without k_new")
m("V31", V, "    KV_INDEX(cache_leftpad, B);\n", "",
  "index_list: cache_leftpad dropped")
m("V32", V, "(const char *)p->block_table, 2, 4, {B, p->max_pages_per_seq},", "(const char *)p->block_table, 2, 4, {B - 1, p->max_pages_per_seq},",
  "index_list: block_table's last row left out")
m("V33", V, "    else\n        KV_INDEX(cache_batch_idx, B);", "    else\n        ;",
  "index_list: cache_batch_idx dropped")
m("V34", V, "    n += index_list(p, t + n);\n", "",
  "kv_check_workspace_disjoint: index arrays not checked against the workspace")
m("V35", V, "        RETURN_IF(written_share(&ws, &t[a]), KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(0 && written_share(&ws, &t[a]), KVATTN_ERR_INVALID_ARGUMENT,",
  "kv_check_workspace_disjoint: check deleted")
# ---------------- validate.c: check_rows / check_cache ----------------
m("V36", V, "    RETURN_IF(batch_stride < 0 || row_stride < 0 || head_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,\n              \"%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0\", name, (long long)batch_stride,\n              (long long)row_stride, (long long)head_stride);\n    int64_t ext[4], str[4];",
           "    RETURN_IF(batch_stride < 0 || row_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,\n              \"%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0\", name, (long long)batch_stride,\n              (long long)row_stride, (long long)head_stride);\n    int64_t ext[4], str[4];",
  "check_rows: negative head_stride no longer refused")
m("V37", V, "    RETURN_IF(batch_stride < 0 || row_stride < 0 || head_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,\n              \"%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0\", name, (long long)batch_stride,\n              (long long)row_stride, (long long)head_stride);\n    int64_t ext[4], str[4];",
           "    RETURN_IF(row_stride < 0 || head_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,\n              \"%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0\", name, (long long)batch_stride,\n              (long long)row_stride, (long long)head_stride);\n    int64_t ext[4], str[4];",
  "check_rows: negative batch_stride no longer refused (varlen leaves it unused)")
m("V38", V, "    if (!varlen) { ext[n] = B; str[n++] = batch_stride; }\n    ext[n] = rows;", "    if (0) { ext[n] = B; str[n++] = batch_stride; }\n    ext[n] = rows;",
  "check_rows: fixed-mode batch dimension ignored")
m("V39", V, "    RETURN_IF(written && may_overlap(n, ext, str), KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(0 && written && may_overlap(n, ext, str), KVATTN_ERR_INVALID_ARGUMENT,",
  "check_rows: self-overlap of out no longer refused")
m("V40", V, "    RETURN_IF(max_offset(n, ext, str, esize) < 0, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(max_offset(n, ext, str, 1) < 0, KVATTN_ERR_INVALID_ARGUMENT,",
  "check_rows: byte overflow checked with element size 1")
m("V41", V, "    RETURN_IF(batch_stride < 0 || row_stride < 0 || head_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,\n              \"%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0\", name, (long long)batch_stride,\n              (long long)row_stride, (long long)head_stride);\n    int64_t ext[4] = {",
           "    RETURN_IF(batch_stride < 0 || head_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,\n              \"%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0\", name, (long long)batch_stride,\n              (long long)row_stride, (long long)head_stride);\n    int64_t ext[4] = {",
  "check_cache: negative row_stride no longer refused")
m("V42", V, "    RETURN_IF(batch_stride < 0 || row_stride < 0 || head_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,\n              \"%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0\", name, (long long)batch_stride,\n              (long long)row_stride, (long long)head_stride);\n    int64_t ext[4] = {",
           "    RETURN_IF(row_stride < 0 || head_stride < 0, KVATTN_ERR_INVALID_ARGUMENT,\n              \"%s: strides (batch=%lld, row=%lld, head=%lld) must be >= 0\", name, (long long)batch_stride,\n              (long long)row_stride, (long long)head_stride);\n    int64_t ext[4] = {",
  "check_cache: negative batch_stride no longer refused")
m("V43", V, "    int64_t ext[4] = {p->block_table ? p->num_pages : p->cache_batch,", "    int64_t ext[4] = {p->cache_batch,",
  "check_cache: paged extent uses cache_batch instead of num_pages")
m("V44", V, "    RETURN_IF(max_offset(4, ext, str, kv_dtype_size(p->dtype)) < 0, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(max_offset(4, ext, str, 1) < 0, KVATTN_ERR_INVALID_ARGUMENT,",
  "check_cache: byte overflow checked with element size 1")
m("V45", V, "    RETURN_IF(p->k_new && may_overlap(4, ext, str), KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(0 && p->k_new && may_overlap(4, ext, str), KVATTN_ERR_INVALID_ARGUMENT,",
  "check_cache: self-overlap of appended cache no longer refused")
m("V46", V, "check_cache(\"v_cache\", p, p->v_batch_stride, p->v_row_stride, p->v_head_stride)", "check_cache(\"v_cache\", p, p->v_batch_stride, p->k_row_stride, p->v_head_stride)",
  "v_cache checked with k_row_stride")
m("V47", V, "check_cache(\"v_cache\", p, p->v_batch_stride, p->v_row_stride, p->v_head_stride)", "check_cache(\"k_cache\", p, p->v_batch_stride, p->v_row_stride, p->v_head_stride)",
  "v_cache errors name k_cache (wrong name in message)")
# ---------------- validate.c: kv_validate_args scalars ----------------
m("V48", V, "    RETURN_IF(p == NULL, KVATTN_ERR_INVALID_ARGUMENT, \"params: NULL\");\n", "",
  "kv_validate_args: NULL params check deleted")
m("V49", V, "    RETURN_IF(p->struct_size != (int64_t)sizeof(kvattn_params), KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(0 && p->struct_size != (int64_t)sizeof(kvattn_params), KVATTN_ERR_INVALID_ARGUMENT,",
  "struct_size check deleted")
m("V50", V, "    RETURN_IF(backend == KVATTN_BACKEND_CUDA && p->dtype == KVATTN_F32, KVATTN_ERR_UNSUPPORTED,", "    RETURN_IF(0 && backend == KVATTN_BACKEND_CUDA && p->dtype == KVATTN_F32, KVATTN_ERR_UNSUPPORTED,",
  "CUDA f32 UNSUPPORTED check deleted (validate.c, reachable via kvattn_validate(CUDA) without a GPU)")
m("V51", V, "    RETURN_IF(B > KV_MAX_TOKENS, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(B >= KV_MAX_TOKENS, KVATTN_ERR_INVALID_ARGUMENT,",
  "batch bound > -> >= (B == 2^31-2^16 refused)")
m("V52", V, "    RETURN_IF(H % Hk != 0,", "    RETURN_IF(0 && H % Hk != 0,",
  "H % Hk check deleted")
m("V53", V, "    RETURN_IF(backend == KVATTN_BACKEND_CUDA && D > 256, KVATTN_ERR_UNSUPPORTED,", "    RETURN_IF(backend == KVATTN_BACKEND_CUDA && D > 512, KVATTN_ERR_UNSUPPORTED,",
  "CUDA head_dim bound 256 -> 512 (validate.c, reachable via kvattn_validate(CUDA) without a GPU)")
m("V54", V, "    RETURN_IF(D > 65536, KVATTN_ERR_UNSUPPORTED,", "    RETURN_IF(D >= 65536, KVATTN_ERR_UNSUPPORTED,",
  "head_dim bound > 65536 -> >= (D == 65536 refused)")
m("V55", V, "    FLAG01(batch_invariant);\n", "",
  "batch_invariant 0/1 check deleted")
m("V56", V, "    RETURN_IF(p->softmax_scale > 2.3e38f, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(p->softmax_scale > 3.3e38f, KVATTN_ERR_INVALID_ARGUMENT,",
  "softmax_scale bound 2.3e38 -> 3.3e38")
m("V57", V, "    RETURN_IF(isnan(p->softcap) || isinf(p->softcap) || p->softcap < 0.0f,", "    RETURN_IF(isnan(p->softcap) || p->softcap < 0.0f,",
  "softcap: inf accepted")
m("V58", V, "    RETURN_IF(p->window_right < -1, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(p->window_right < -3, KVATTN_ERR_INVALID_ARGUMENT,",
  "window_right bound -1 -> -3")
m("V59", V, "    RETURN_IF(p->num_splits < 0, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(p->num_splits < -1, KVATTN_ERR_INVALID_ARGUMENT,",
  "num_splits bound off by one (-1 accepted)")
m("V60", V, "        RETURN_IF((int64_t)B * p->seqlen_q > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF((int64_t)B * p->seqlen_q >= INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,",
  "B*seqlen_q bound > INT32_MAX -> >= (exactly 2^31-1 rows refused)")
m("V61", V, "        RETURN_IF((int64_t)B * p->seqlen_q > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF((int64_t)p->seqlen_q > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,",
  "B*seqlen_q overflow guard drops B")
m("V62", V, "        RETURN_IF(B > 0 && p->total_q != 0 && (int64_t)p->total_q != (int64_t)B * p->seqlen_q,", "        RETURN_IF(p->total_q != 0 && (int64_t)p->total_q != (int64_t)B * p->seqlen_q,",
  "forgotten cu_seqlens_q check: B > 0 guard dropped (B = 0 with total_q set refused)")
m("V63", V, "        RETURN_IF(B > 0 && p->total_q != 0 && (int64_t)p->total_q != (int64_t)B * p->seqlen_q,", "        RETURN_IF(B > 0 && p->total_q > 0 && (int64_t)p->total_q != (int64_t)B * p->seqlen_q,",
  "forgotten cu_seqlens_q check: total_q != 0 -> total_q > 0 (negative total_q in fixed mode accepted)")
m("V64", V, "    if (B > 0) {\n        RETURN_IF(p->q == NULL,", "    if (B > 1) {\n        RETURN_IF(p->q == NULL,",
  "NULL-pointer checks only for B > 1")
m("V65", V, "        RETURN_IF(p->cache_seqlens == NULL, KVATTN_ERR_INVALID_ARGUMENT, \"cache_seqlens: NULL with batch=%d\", B);\n", "",
  "cache_seqlens NULL check deleted")
m("V66", V, "        RETURN_IF(p->lse_batch_stride < 0 || p->lse_head_stride < 0 || p->lse_row_stride < 0,", "        RETURN_IF(p->lse_head_stride < 0 || p->lse_row_stride < 0,",
  "softmax_lse: negative batch stride accepted")
m("V67", V, "\"softmax_lse: strides (batch=%lld, head=%lld, row=%lld) must be >= 0\"", "\"out: strides (batch=%lld, head=%lld, row=%lld) must be >= 0\"",
  "softmax_lse negative-stride message names out")
m("V68", V, "        RETURN_IF(max_offset(q_varlen ? 2 : 3, q_varlen ? ext + 1 : ext, q_varlen ? str + 1 : str, 4) < 0,", "        RETURN_IF(max_offset(q_varlen ? 2 : 3, q_varlen ? ext + 1 : ext, q_varlen ? str + 1 : str, 1) < 0,",
  "softmax_lse: byte overflow checked with element size 1")
m("V69", V, "        RETURN_IF(may_overlap(q_varlen ? 2 : 3, q_varlen ? ext + 1 : ext, q_varlen ? str + 1 : str),", "        RETURN_IF(may_overlap(2, ext + 1, str + 1),",
  "softmax_lse overlap: batch dimension ignored in fixed mode")
m("V70", V, "        if ((st = check_rows(\"k_new\", n_varlen, B, n_rows, Hk, D, esize, 0, p->knew_batch_stride,\n                             p->knew_row_stride, p->knew_head_stride)))\n            return st;\n", "",
  "k_new: check_rows call deleted")
m("V71", V, "            RETURN_IF(p->total_knew < 0, KVATTN_ERR_INVALID_ARGUMENT, \"total_knew: %d must be >= 0\", p->total_knew);\n", "",
  "total_knew < 0 check deleted")
m("V72", V, "            RETURN_IF((int64_t)B * p->seqlen_knew > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,", "            RETURN_IF(0 && (int64_t)B * p->seqlen_knew > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,",
  "B*seqlen_knew overflow guard deleted")
m("V73", V, "        RETURN_IF(p->num_pages < 0, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(p->num_pages < -1, KVATTN_ERR_INVALID_ARGUMENT,",
  "num_pages bound off by one (-1 accepted)")
m("V74", V, "        RETURN_IF((int64_t)p->max_pages_per_seq * p->page_size > KV_MAX_TOKENS, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF((int64_t)p->max_pages_per_seq * p->page_size >= KV_MAX_TOKENS, KVATTN_ERR_INVALID_ARGUMENT,",
  "paged capacity bound > -> >=")
m("V75", V, "        RETURN_IF(p->block_table_batch_stride < p->max_pages_per_seq, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(p->block_table_batch_stride < p->max_pages_per_seq - 1, KVATTN_ERR_INVALID_ARGUMENT,",
  "block_table_batch_stride bound off by one")
m("V76", V, "        RETURN_IF(max_offset(2, ext, str, 4) < 0, KVATTN_ERR_INVALID_ARGUMENT,\n                  \"block_table:", "        RETURN_IF(max_offset(2, ext, str, 1) < 0, KVATTN_ERR_INVALID_ARGUMENT,\n                  \"block_table:",
  "block_table: byte overflow checked with element size 1")
m("V77", V, "        RETURN_IF(p->cache_batch <= 0 && B > 0, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(p->cache_batch < 0 && B > 0, KVATTN_ERR_INVALID_ARGUMENT,",
  "cache_batch >= 1 check: <= 0 -> < 0")
m("V78", V, "        RETURN_IF(p->cache_batch < 0, KVATTN_ERR_INVALID_ARGUMENT, \"k_cache: cache_batch=%d must be >= 0\",\n                  p->cache_batch);\n", "",
  "cache_batch < 0 check (B = 0 case) deleted")
m("V79", V, "        RETURN_IF(p->cache_capacity > KV_MAX_TOKENS, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(p->cache_capacity > KV_MAX_TOKENS + 1, KVATTN_ERR_INVALID_ARGUMENT,",
  "cache_capacity bound off by one")
m("V80", V, "        RETURN_IF(p->cache_batch_idx == NULL && B > p->cache_batch, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(p->cache_batch_idx == NULL && B > p->cache_batch + 1, KVATTN_ERR_INVALID_ARGUMENT,",
  "B > cache_batch bound off by one")
m("V81", V, "        RETURN_IF(R <= 0 || R % 2 != 0 || R > D, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(R < 0 || R % 2 != 0 || R > D, KVATTN_ERR_INVALID_ARGUMENT,",
  "rotary_dim 0 accepted (<= 0 -> < 0)")
m("V82", V, "        RETURN_IF(p->rotary_max_pos < 0, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(p->rotary_max_pos < -1, KVATTN_ERR_INVALID_ARGUMENT,",
  "rotary_max_pos bound off by one")
m("V83", V, "        RETURN_IF(p->rotary_row_stride < 0 || (p->rotary_row_stride != 0 && p->rotary_row_stride < R / 2),", "        RETURN_IF((p->rotary_row_stride != 0 && p->rotary_row_stride < R / 2),",
  "rotary_row_stride < 0 accepted")
m("V84", V, "        RETURN_IF(max_offset(2, ext, str, kv_dtype_size(p->rotary_dtype)) < 0, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(max_offset(2, ext, str, 1) < 0, KVATTN_ERR_INVALID_ARGUMENT,",
  "rotary tables: byte overflow checked with element size 1")
m("V85", V, "        RETURN_IF(p->alibi_batch_stride != 0 && p->alibi_batch_stride < H, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(p->alibi_batch_stride > 0 && p->alibi_batch_stride < H, KVATTN_ERR_INVALID_ARGUMENT,",
  "alibi_batch_stride: negative accepted (!= 0 -> > 0)")
m("V86", V, "        RETURN_IF(max_offset(2, ext, str, 4) < 0, KVATTN_ERR_INVALID_ARGUMENT,\n                  \"alibi_slopes:", "        RETURN_IF(max_offset(2, ext, str, 1) < 0, KVATTN_ERR_INVALID_ARGUMENT,\n                  \"alibi_slopes:",
  "alibi_slopes: byte overflow checked with element size 1")
# alignment
m("V87", V, "{\"softmax_lse\", p->softmax_lse, 4},", "{\"softmax_lse\", p->softmax_lse, 2},",
  "alignment: softmax_lse checked against 2 bytes")
m("V88", V, "{\"rotary_cos\", p->rotary_cos, rsize}, {\"rotary_sin\", p->rotary_sin, rsize},", "{\"rotary_cos\", p->rotary_cos, esize}, {\"rotary_sin\", p->rotary_sin, esize},",
  "alignment: rotary tables checked against esize instead of rotary dtype size")
m("V89", V, "        for (size_t k = 0; k < sizeof a / sizeof a[0]; k++)", "        for (size_t k = 0; k < sizeof a / sizeof a[0] - 1; k++)",
  "alignment: last entry (alibi_slopes) not checked")
m("V90", V, "{\"k_new\", p->k_new, esize}, {\"v_new\", p->v_new, esize},", "{\"k_new\", p->k_new, esize}, {\"v_new\", p->v_new, 1},",
  "alignment: v_new not checked")
# pairwise loops
m("V91", V, "    if (B > 0) {\n        /* tensors the call writes, pairwise", "    if (B > 1) {\n        /* tensors the call writes, pairwise",
  "sharing checks run only for B > 1")
m("V92", V, "            for (int b = a + 1; b < nw; b++)", "            for (int b = a + 2; b < nw; b++)",
  "written pairs: adjacent pairs (out/lse, k/v) skipped")
m("V93", V, "            for (int a = 0; a < nw; a++)\n                RETURN_IF(written_share(&ix[i], &w[a])", "            for (int a = 0; a < nw - 1; a++)\n                RETURN_IF(written_share(&ix[i], &w[a])",
  "index arrays not checked against the last written tensor (v_cache)")
m("V94", V, "        for (int i = 0; i < nix; i++)", "        for (int i = 1; i < nix; i++)",
  "first index array not checked against written tensors")
m("V95", V, "                          p->k_new && b >= nw - 2 ? \" (k_new/v_new", "                          p->k_new && b >= nw - 1 ? \" (k_new/v_new",
  "message hint about appends: b >= nw-2 -> nw-1 (cosmetic)")

# ---------------- api.c ----------------
m("A01", A, "int kvattn_validate(const kvattn_params *p_, int backend) {\n    kv_clear_error();", "int kvattn_validate(const kvattn_params *p_, int backend) {",
  "kvattn_validate: kv_clear_error removed")
m("A02", A, "int kvattn_workspace_size(const kvattn_params *p_, int backend, size_t *bytes) {\n    kv_clear_error();", "int kvattn_workspace_size(const kvattn_params *p_, int backend, size_t *bytes) {",
  "kvattn_workspace_size: kv_clear_error removed")
m("A03", A, "int kvattn_forward(const kvattn_params *p_, int backend, void *workspace, size_t workspace_bytes, void *stream) {\n    kv_clear_error();", "int kvattn_forward(const kvattn_params *p_, int backend, void *workspace, size_t workspace_bytes, void *stream) {",
  "kvattn_forward: kv_clear_error removed")
m("A04", A, "int kvattn_backend_available(int backend) {\n    kv_clear_error();", "int kvattn_backend_available(int backend) {",
  "kvattn_backend_available: kv_clear_error removed")
m("A05", A, "    if (p != given && (st == KVATTN_OK || strstr(last_error, \"overlap\") != NULL)) {", "    if (p != given && (st == KVATTN_OK)) {",
  "validate(): mixed-stride check only when validation passed")
m("A06", A, "            if (st == KVATTN_OK || (n > 0 && strncmp(first, last_error, n) == 0)) return ms;", "            if (st == KVATTN_OK) return ms;",
  "validate(): same-tensor overlap error not replaced by the mixed-stride one")
m("A07", A, "            memcpy(last_error, first, strlen(first) + 1);\n", "",
  "validate(): validation's first error not restored (message of another tensor)")
m("A08", A, "            if (st == KVATTN_OK || (n > 0 && strncmp(first, last_error, n) == 0)) return ms;", "            if (st == KVATTN_OK || (strncmp(first, last_error, n) == 0)) return ms;",
  "validate(): n > 0 guard dropped")
m("A09", A, "    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return INT64_MAX;", "    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) return 0;",
  "packed3: overflow saturates to 0 (broadcast) instead of INT64_MAX")
m("A10", A, "    PACK(lse_head_stride, q_varlen ? packed3(p->total_q, 1, 1) : packed3(p->seqlen_q, 1, 1));", "    PACK(lse_head_stride, packed3(p->seqlen_q, 1, 1));",
  "with_strides: varlen lse head stride from seqlen_q")
m("A11", A, "    const int64_t rows = p->block_table ? p->page_size : p->cache_capacity;", "    const int64_t rows = p->cache_capacity;",
  "with_strides: paged cache batch stride from cache_capacity")
m("A12", A, "    PACK(knew_batch_stride, n_varlen ? 0 : packed3(p->seqlen_knew, Hk, D));", "    PACK(knew_batch_stride, n_varlen ? 0 : packed3(p->seqlen_q, Hk, D));",
  "with_strides: k_new batch stride from seqlen_q")
m("A13", A, "    PACK(block_table_batch_stride, packed3(p->max_pages_per_seq, 1, 1));", "    PACK(block_table_batch_stride, packed3(p->num_pages, 1, 1));",
  "with_strides: block_table_batch_stride from num_pages")
m("A14", A, "    if (p == NULL || p->struct_size != (int64_t)sizeof(kvattn_params)) return p;", "    if (p == NULL) return p;",
  "with_strides: reads a struct of another struct_size")
m("A15", A, "    RETURN_IF(bytes == NULL, KVATTN_ERR_INVALID_ARGUMENT, \"bytes: NULL output pointer\");\n", "",
  "workspace_size: bytes NULL check deleted")
m("A16", A, "    *bytes = 0;\n", "",
  "workspace_size: *bytes not zeroed")
m("A17", A, "    if (p->batch == 0 && (backend == KVATTN_BACKEND_CPU || workspace == NULL)) return KVATTN_OK;", "    if (p->batch == 0 && (backend == KVATTN_BACKEND_CPU)) return KVATTN_OK;",
  "forward: B = 0 CUDA no-op without workspace goes on")
m("A18", A, "    RETURN_IF(out == NULL, KVATTN_ERR_INVALID_ARGUMENT, \"out: NULL output pointer\");\n", "",
  "device_status_read: out NULL check deleted")
m("A19", A, "    return major == bmajor && minor >= bminor;", "    return major == bmajor && minor > bminor;",
  "kv_arch_runs_on: minor >= -> >")
m("A20", A, "    if (arch[i] == 'a' && arch[i + 1] == '\\0') return major == bmajor && minor == bminor;", "    if (arch[i] == 'a' && arch[i + 1] == '\\0') return major == bmajor && minor >= bminor;",
  "kv_arch_runs_on: 'a' build runs on later minors")
m("A21", A, "    kv_set_error(KVATTN_ERR_INVALID_ARGUMENT,\n                 \"backend: %d is neither", "    if (0) kv_set_error(KVATTN_ERR_INVALID_ARGUMENT,\n                 \"backend: %d is neither",
  "backend_available: no reason for a bad backend")
m("A22", A, "    vsnprintf(last_error, sizeof last_error, fmt, ap);", "    vsnprintf(last_error, 64, fmt, ap);",
  "kv_set_error: message truncated to 64 bytes")

# ---------------- pages.c ----------------
m("P01", P, "    return na > 0 && nb > 0 && a0 < b0 + (uintptr_t)nb * sizeof(int32_t) && b0 < a0 + (uintptr_t)na * sizeof(int32_t);",
           "    return na > 0 && nb > 0 && a0 <= b0 + (uintptr_t)nb * sizeof(int32_t) && b0 < a0 + (uintptr_t)na * sizeof(int32_t);",
  "kv_ranges_overlap: a0 < b_end -> <= (adjacent counted as overlap)")
m("P02", P, "    return na > 0 && nb > 0 && a0 < b0 + (uintptr_t)nb * sizeof(int32_t) && b0 < a0 + (uintptr_t)na * sizeof(int32_t);",
           "    return na > 0 && nb > 0 && a0 < b0 + (uintptr_t)nb * sizeof(int32_t) && b0 < a0 + (uintptr_t)(na - 1) * sizeof(int32_t);",
  "kv_ranges_overlap: a's last element left out")
m("P03", P, "    if (!pool || seq_id < 0 || seq_id >= pool->num_seqs || !pool->seqs[seq_id].active) return NULL;",
           "    if (!pool || seq_id < 0 || seq_id > pool->num_seqs || !pool->seqs[seq_id].active) return NULL;",
  "find_seq: seq_id >= num_seqs -> > (reads record num_seqs)")
m("P04", P, "    if (!pool || seq_id < 0 || seq_id >= pool->num_seqs || !pool->seqs[seq_id].active) return NULL;",
           "    if (!pool || seq_id >= pool->num_seqs || !pool->seqs[seq_id].active) return NULL;",
  "find_seq: negative id not refused")
m("P05", P, "    if (!pool || seq_id < 0 || seq_id >= pool->num_seqs || !pool->seqs[seq_id].active) return NULL;",
           "    if (!pool || seq_id < 0 || seq_id >= pool->num_seqs) return NULL;",
  "find_seq: released ids still live")
m("P06", P, "    while (cap < need) cap *= 2;", "    while (cap < need - 1) cap *= 2;",
  "reserve_pages: capacity one short (heap overflow)")
m("P07", P, "    if (pool->num_free_ids > 0 || pool->num_seqs < pool->seqs_capacity) return KVATTN_OK;", "    if (pool->num_free_ids > 0 || pool->num_seqs <= pool->seqs_capacity) return KVATTN_OK;",
  "reserve_seq_slot: < -> <= (no growth when full: OOB record)")
m("P08", P, "    memset(seqs + pool->seqs_capacity, 0, (size_t)(cap - pool->seqs_capacity) * sizeof(kv_page_seq));\n", "",
  "reserve_seq_slot: new records not zeroed")
m("P09", P, "    seq->num_pages = 0;\n    return id;", "    return id;",
  "take_seq_id: num_pages not reset (redundant with release)")
m("P10", P, "    for (int32_t i = seq->num_pages - 1; i >= keep; i--) {", "    for (int32_t i = seq->num_pages - 1; i > keep; i--) {",
  "drop_pages: page at index keep not dropped")
m("P11", P, "        if (--pool->refcount[page] == 0) pool->free_list[pool->num_free++] = page;", "        --pool->refcount[page]; pool->free_list[pool->num_free++] = page;",
  "drop_pages: shared pages freed too")
m("P12", P, "    RETURN_IF(num_pages < 0, KVATTN_ERR_INVALID_ARGUMENT, \"kvattn_pages_create: num_pages=%d must be >= 0\",", "    RETURN_IF(num_pages < -1, KVATTN_ERR_INVALID_ARGUMENT, \"kvattn_pages_create: num_pages=%d must be >= 0\",",
  "pages_create: num_pages -1 accepted")
m("P13", P, "    *out = NULL;\n    RETURN_IF(num_pages < 0", "    RETURN_IF(num_pages < 0",
  "pages_create: *out not NULLed on failure")
m("P14", P, "    for (int32_t i = 0; i < num_pages; i++) pool->free_list[i] = num_pages - 1 - i;", "    for (int32_t i = 0; i < num_pages; i++) pool->free_list[i] = i;",
  "pages_create: free list order reversed (highest page first)")
m("P15", P, "    RETURN_IF(n_tokens < 0 || n_tokens > par->length, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(n_tokens > par->length, KVATTN_ERR_INVALID_ARGUMENT,",
  "fork: negative n_tokens accepted")
m("P16", P, "    RETURN_IF(n_tokens < 0 || n_tokens > par->length, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(n_tokens < 0 || n_tokens >= par->length, KVATTN_ERR_INVALID_ARGUMENT,",
  "fork: n_tokens == length refused")
m("P17", P, "    RETURN_IF(n_tokens % pool->page_size != 0, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(0 && n_tokens % pool->page_size != 0, KVATTN_ERR_INVALID_ARGUMENT,",
  "fork: partial page shared")
m("P18", P, "    int32_t id_peek = pool->num_free_ids > 0 ? pool->free_ids[pool->num_free_ids - 1] : pool->num_seqs;", "    int32_t id_peek = pool->num_seqs;",
  "fork: child list reserved on the wrong record when a released id is reused")
m("P19", P, "        pool->refcount[par->pages[i]]++;\n", "",
  "fork: shared pages not ref-counted")
m("P20", P, "    child->length = n_tokens;", "    child->length = par->length;",
  "fork: child gets the parent's full length")
m("P21", P, "    *seq_id = id;\n    return KVATTN_OK;\n}\n\nint kvattn_pages_append", "    return KVATTN_OK;\n}\n\nint kvattn_pages_append",
  "fork: *seq_id not written")
m("P22", P, "    RETURN_IF(n_tokens < 0, KVATTN_ERR_INVALID_ARGUMENT, \"kvattn_pages_append: n_tokens=%d must be >= 0\", n_tokens);\n", "",
  "append: negative n_tokens accepted")
m("P23", P, "    RETURN_IF((int64_t)seq->length + n_tokens > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF((int64_t)seq->length + n_tokens >= INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,",
  "append: length reaching exactly INT32_MAX refused")
m("P24", P, "    RETURN_IF((int64_t)seq->length + n_tokens > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(0 && (int64_t)seq->length + n_tokens > INT32_MAX, KVATTN_ERR_INVALID_ARGUMENT,",
  "append: int32 length overflow guard deleted")
m("P25", P, "    if (n_tokens > 0 && seq->length % pool->page_size != 0) {", "    if (0) {",
  "append: shared-partial-last-page INTERNAL check deleted")
m("P26", P, "    RETURN_IF(needed > pool->num_free, KVATTN_ERR_OUT_OF_PAGES,", "    RETURN_IF(needed >= pool->num_free, KVATTN_ERR_OUT_OF_PAGES,",
  "append: exact exhaustion refused (> -> >=)")
m("P27", P, "    RETURN_IF(needed > pool->num_free, KVATTN_ERR_OUT_OF_PAGES,", "    RETURN_IF(needed > pool->num_free + 1, KVATTN_ERR_OUT_OF_PAGES,",
  "append: one page too many allowed (reads free_list[-1])")
m("P28", P, "static int64_t pages_for(int64_t tokens, int32_t page_size) { return (tokens + page_size - 1) / page_size; }", "static int64_t pages_for(int64_t tokens, int32_t page_size) { return (tokens + page_size) / page_size; }",
  "pages_for: ceil off by one")
m("P29", P, "    seq->length = new_length;\n    return KVATTN_OK;", "    return KVATTN_OK;",
  "append: length not updated")
m("P30", P, "    RETURN_IF(n_tokens < 0 || n_tokens > seq->length, KVATTN_ERR_INVALID_ARGUMENT,\n              \"kvattn_pages_truncate:", "    RETURN_IF(n_tokens < 0 || n_tokens >= seq->length, KVATTN_ERR_INVALID_ARGUMENT,\n              \"kvattn_pages_truncate:",
  "truncate: n_tokens == length refused")
m("P31", P, "    RETURN_IF(n_tokens < 0 || n_tokens > seq->length, KVATTN_ERR_INVALID_ARGUMENT,\n              \"kvattn_pages_truncate:", "    RETURN_IF(n_tokens > seq->length, KVATTN_ERR_INVALID_ARGUMENT,\n              \"kvattn_pages_truncate:",
  "truncate: negative n_tokens accepted")
m("P32", P, "        RETURN_IF(pool->refcount[last] != 1, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(0 && pool->refcount[last] != 1, KVATTN_ERR_INVALID_ARGUMENT,",
  "truncate: ending inside a shared page allowed")
m("P33", P, "    drop_pages(pool, seq, keep);\n    seq->length = n_tokens;", "    drop_pages(pool, seq, keep);",
  "truncate: length not updated")
m("P34", P, "    seq->active = 0;\n", "",
  "release: sequence stays active")
m("P35", P, "    pool->free_ids[pool->num_free_ids++] = seq_id; /* capacity", "    /* capacity",
  "release: id not pushed for reuse")
m("P36", P, "    drop_pages(pool, seq, 0);\n    seq->active = 0;\n    seq->length = 0;", "    drop_pages(pool, seq, 0);\n    seq->active = 0;",
  "release: length not reset (redundant with take_seq_id)")
m("P37", P, "    RETURN_IF(n < 0, KVATTN_ERR_INVALID_ARGUMENT, \"kvattn_pages_fill: n=%d must be >= 0\", n);", "    RETURN_IF(n < -1, KVATTN_ERR_INVALID_ARGUMENT, \"kvattn_pages_fill: n=%d must be >= 0\", n);",
  "fill: n = -1 accepted")
m("P38", P, "    if (n == 0) return KVATTN_OK;\n", "",
  "fill: n == 0 early return deleted (NULL arrays refused)")
m("P39", P, "    RETURN_IF(max_pages_per_seq < 0, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(max_pages_per_seq < -1, KVATTN_ERR_INVALID_ARGUMENT,",
  "fill: max_pages_per_seq -1 accepted")
m("P40", P, "    RETURN_IF(n > 1 && block_table_stride < max_pages_per_seq, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(n > 2 && block_table_stride < max_pages_per_seq, KVATTN_ERR_INVALID_ARGUMENT,",
  "fill: row-overlap check skipped for n == 2")
m("P41", P, "    RETURN_IF(n > 1 && block_table_stride < max_pages_per_seq, KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(n > 1 && block_table_stride < max_pages_per_seq - 1, KVATTN_ERR_INVALID_ARGUMENT,",
  "fill: row stride bound off by one")
m("P42", P, "    RETURN_IF(n > 1 && block_table_stride > (INT64_MAX / (int64_t)sizeof(int32_t) - max_pages_per_seq) / (n - 1),", "    RETURN_IF(0 && n > 1 && block_table_stride > (INT64_MAX / (int64_t)sizeof(int32_t) - max_pages_per_seq) / (n - 1),",
  "fill: int64 row-offset overflow guard deleted")
m("P43", P, "    RETURN_IF(n > 1 && block_table_stride > (INT64_MAX / (int64_t)sizeof(int32_t) - max_pages_per_seq) / (n - 1),", "    RETURN_IF(n > 1 && block_table_stride > (INT64_MAX - max_pages_per_seq) / (n - 1),",
  "fill: overflow guard in elements, not bytes (x4 dropped)")
m("P44", P, "        max_pages_per_seq == 0 ? 0 : (int64_t)(n - 1) * block_table_stride + max_pages_per_seq;", "        max_pages_per_seq == 0 ? 0 : (int64_t)(n - 1) * block_table_stride + max_pages_per_seq - 1;",
  "fill: written block_table span one element short")
m("P45", P, "        for (int o = 0; o < 2; o++)", "        for (int o = 0; o < 1; o++)",
  "fill: inputs not checked against cache_seqlens")
m("P46", P, "    for (int i = 0; i < 2; i++)\n        for (int o", "    for (int i = 0; i < 1; i++)\n        for (int o",
  "fill: pending not checked against the outputs")
m("P47", P, "    RETURN_IF(kv_ranges_overlap(block_table, table_elems, cache_seqlens, n), KVATTN_ERR_INVALID_ARGUMENT,", "    RETURN_IF(0 && kv_ranges_overlap(block_table, table_elems, cache_seqlens, n), KVATTN_ERR_INVALID_ARGUMENT,",
  "fill: block_table / cache_seqlens overlap check deleted")
m("P48", P, "        RETURN_IF(seq->num_pages > max_pages_per_seq, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(seq->num_pages > max_pages_per_seq + 1, KVATTN_ERR_INVALID_ARGUMENT,",
  "fill: one page more than max_pages_per_seq accepted")
m("P49", P, "        RETURN_IF(pend < 0 || pend > seq->length, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(pend < 0 || pend >= seq->length, KVATTN_ERR_INVALID_ARGUMENT,",
  "fill: pending == length refused")
m("P50", P, "        RETURN_IF(pend < 0 || pend > seq->length, KVATTN_ERR_INVALID_ARGUMENT,", "        RETURN_IF(pend > seq->length, KVATTN_ERR_INVALID_ARGUMENT,",
  "fill: negative pending accepted")
m("P51", P, "        RETURN_IF(!seq, KVATTN_ERR_INVALID_ARGUMENT, \"kvattn_pages_fill: seq_ids[%d]=%d is not a live sequence\", b,", "        RETURN_IF(0 && !seq, KVATTN_ERR_INVALID_ARGUMENT, \"kvattn_pages_fill: seq_ids[%d]=%d is not a live sequence\", b,",
  "fill: dead seq id accepted (crash-prone)")
m("P52", P, "        for (int32_t i = 0; i < max_pages_per_seq; i++) row[i] = i < seq->num_pages ? seq->pages[i] : -1;", "        for (int32_t i = 0; i < max_pages_per_seq; i++) row[i] = i < seq->num_pages ? seq->pages[i] : 0;",
  "fill: unused entries 0 instead of -1")
m("P53", P, "int kvattn_pages_truncate(kvattn_pages *pool, int32_t seq_id, int32_t n_tokens) {\n    kv_clear_error();", "int kvattn_pages_truncate(kvattn_pages *pool, int32_t seq_id, int32_t n_tokens) {",
  "truncate: kv_clear_error removed")
m("P54", P, "int kvattn_pages_release(kvattn_pages *pool, int32_t seq_id) {\n    kv_clear_error();", "int kvattn_pages_release(kvattn_pages *pool, int32_t seq_id) {",
  "release: kv_clear_error removed")
m("P55", P, "                      int32_t *cache_seqlens) {\n    kv_clear_error();", "                      int32_t *cache_seqlens) {",
  "fill: kv_clear_error removed")
m("P56", P, "int kvattn_pages_fork(kvattn_pages *pool, int32_t parent, int32_t n_tokens, int32_t *seq_id) {\n    kv_clear_error();", "int kvattn_pages_fork(kvattn_pages *pool, int32_t parent, int32_t n_tokens, int32_t *seq_id) {",
  "fork: kv_clear_error removed")
m("P57", P, "int kvattn_pages_append(kvattn_pages *pool, int32_t seq_id, int32_t n_tokens) {\n    kv_clear_error();", "int kvattn_pages_append(kvattn_pages *pool, int32_t seq_id, int32_t n_tokens) {",
  "append: kv_clear_error removed")
m("P58", P, "int32_t kvattn_pages_used_count(const kvattn_pages *pool) { return pool ? pool->num_pages - pool->num_free : -1; }", "int32_t kvattn_pages_used_count(const kvattn_pages *pool) { return pool ? pool->num_pages - pool->num_free : 0; }",
  "used_count(NULL) returns 0")
m("P59", P, "\"kvattn_pages_fork: parent=%d is not a live sequence\", parent);", "\"kvattn_pages_fork: seq_id=%d is not a live sequence\", parent);",
  "fork message names seq_id instead of parent")
m("P60", P, "    if (cap > INT32_MAX) cap = INT32_MAX;\n    int32_t *grown", "    int32_t *grown",
  "reserve_pages: cap clamp to INT32_MAX deleted")
