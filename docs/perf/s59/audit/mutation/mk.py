import json
M = {}
def m(id, file, old, new, what): M[id] = dict(file=file, old=old, new=new, what=what)
# ---- CPU backend / shared helpers
m("C1", "src/internal.h", "if (wr >= 0 && qpos + wr + 1 < hi) hi = qpos + wr + 1;", "if (wr >= 0 && qpos + wr + 2 < hi) hi = qpos + wr + 2;", "causal/window_right bound one key too far")
m("C2", "src/internal.h", "if (window_left >= 0 && qpos - window_left > lo) lo = qpos - window_left;", "if (window_left >= 0 && qpos - window_left + 1 > lo) lo = qpos - window_left + 1;", "window_left one key too short")
m("C3", "src/cpu.c", "if (p->rotary_cos) rope_row(p, qr, s.S + s.n_new - s.n_q + i, w->tmp);", "if (p->rotary_cos) rope_row(p, qr, s.S + s.n_new - s.n_q + i - s.L, w->tmp);", "query rotary position minus leftpad")
m("C4", "src/cpu.c", """    if (p->softcap > 0.0f)
        for (int j = jlo; j < jhi; j++) prob[j] = kv_softcap(prob[j], p->softcap);
    if (p->alibi_slopes)
        for (int j = jlo; j < jhi; j++) prob[j] += kv_alibi_bias(slope, qpos, kt0 + j);
""", """    if (p->alibi_slopes)
        for (int j = jlo; j < jhi; j++) prob[j] += kv_alibi_bias(slope, qpos, kt0 + j);
    if (p->softcap > 0.0f)
        for (int j = jlo; j < jhi; j++) prob[j] = kv_softcap(prob[j], p->softcap);
""", "softcap applied after ALiBi instead of before")
m("C5", "src/cpu.c", "(int64_t)((it->kv_head0 + hh) * G + g) * p->q_head_stride;", "(int64_t)((it->kv_head0 + hh) + g * p->num_kv_heads) * p->q_head_stride;", "GQA: query head h = kvh + g*Hk (h % Hk mapping) for q loads")
m("C6", "src/internal.h", "return -slope * (float)(d < 0 ? -d : d);", "return -slope * (float)d;", "ALiBi: signed distance (no |.|)")
m("C7", "src/cpu.c", "p->softmax_lse[lo + (int64_t)h * p->lse_head_stride] = L > 0.0f ? M + logf(L) : -INFINITY;", "p->softmax_lse[lo + (int64_t)h * p->lse_head_stride] = L > 0.0f ? M + log2f(L) : -INFINITY;", "split-combine lse in base 2")
m("C8", "src/cpu.c", "    r += 0xfff + ((r >> 13) & 1);\n", "", "f32->f16: rounding step skipped (truncation)")
m("C9", "src/cpu.c", "if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00);", "if (a >= 0x477fe000) return (uint16_t)(sign | 0x7c00);", "f32->f16: overflow-to-inf threshold 65504 instead of 65520")
m("C10", "src/cpu.c", "memcpy((char *)p->v_cache + vo * esize, (const char *)p->v_new + vn * esize, (size_t)D * esize);", "memcpy((char *)p->v_cache + vo * esize, (const char *)p->v_new + kn * esize, (size_t)D * esize);", "append: v_new addressed with k_new strides")
m("C11", "src/cpu.c", "float *scr = alloc_floats(per_thread * nthreads, Dp != D);", "float *scr = alloc_floats(per_thread * nthreads, 0);", "scratch pads [D, Dp) left uninitialized")
m("C12", "src/cpu.c", "for (int64_t slot = s.L / p->page_size; slot <= (end - 1) / p->page_size; slot++)", "for (int64_t slot = s.L / p->page_size; slot < (end - 1) / p->page_size; slot++)", "page check skips the last touched page")
m("C13", "src/cpu.c", "    for (int32_t b = 0; b < B; b++) {\n        const kv_seq s = kv_seq_get(p, b);\n        RETURN_IF(s.S < 0", "    for (int32_t b = 0; b < B - 1; b++) {\n        const kv_seq s = kv_seq_get(p, b);\n        RETURN_IF(s.S < 0", "data checks skip the last sequence")
m("C14", "src/cpu.c", "RETURN_IF(s.n_q > end, KVATTN_ERR_BAD_DATA,", "RETURN_IF(s.n_q > end + 1, KVATTN_ERR_BAD_DATA,", "rotary n_q <= S+n_new check weakened by one")
m("C15", "src/cpu.c", "    for (int32_t t = 0; t < s.n_new; t++) {\n        for (int kvh = 0; kvh < p->num_kv_heads; kvh++) {\n            int64_t ko", "    for (int32_t t = 0; t <= s.n_new; t++) {\n        for (int kvh = 0; kvh < p->num_kv_heads; kvh++) {\n            int64_t ko", "append writes one row past")
m("C16", "src/cpu.c", "w->v_off[j] = kv_cache_offset(p, b, crow, s.L + kt0 + j, 0, p->v_batch_stride, p->v_row_stride, p->v_head_stride);", "w->v_off[j] = kv_cache_offset(p, b, crow, kt0 + j, 0, p->v_batch_stride, p->v_row_stride, p->v_head_stride);", "leftpad ignored for V tile offsets")
# ---- validation / api
m("V1", "src/validate.c", """{"cache_batch_idx", p->cache_batch_idx, 4}, {"block_table", p->block_table, 4},""", """{"cache_batch_idx", p->cache_batch_idx, 4},""", "alignment check of block_table removed")
m("V2", "src/validate.c", "        if (stride[idx[a]] <= reach) return 1;", "        if (stride[idx[a]] < reach) return 1;", "may_overlap: stride == reach accepted")
m("V3", "src/validate.c", "RETURN_IF(p->alibi_batch_stride != 0 && p->alibi_batch_stride < H,", "RETURN_IF(p->alibi_batch_stride != 0 && p->alibi_batch_stride < H - 1,", "alibi_batch_stride >= H weakened to >= H-1")
m("A1", "src/api.c", "PACK(knew_batch_stride, n_varlen ? 0 : packed3(p->seqlen_knew, Hk, D));", "PACK(knew_batch_stride, n_varlen ? 0 : packed3(p->seqlen_q, Hk, D));", "packed k_new batch stride from seqlen_q")
# ---- page manager
m("P1", "src/pages.c", "RETURN_IF(n > 1 && block_table_stride < max_pages_per_seq,", "RETURN_IF(n > 2 && block_table_stride < max_pages_per_seq,", "fill: overlapping rows accepted for n == 2")
m("P2", "src/pages.c", "st = reserve_pages(&pool->seqs[id_peek], shared, \"kvattn_pages_fork\");", "st = reserve_pages(&pool->seqs[id_peek], shared - 1, \"kvattn_pages_fork\");", "fork: child page list one entry short (heap overflow)")
m("P3", "src/pages.c", "RETURN_IF(pool->refcount[last] != 1, KVATTN_ERR_INVALID_ARGUMENT,", "RETURN_IF(pool->refcount[last] > 2, KVATTN_ERR_INVALID_ARGUMENT,", "truncate inside a page shared with one fork allowed")
m("P4", "src/pages.c", "if (!pool || seq_id < 0 || seq_id >= pool->num_seqs || !pool->seqs[seq_id].active) return NULL;", "if (!pool || seq_id < 0 || seq_id > pool->num_seqs || !pool->seqs[seq_id].active) return NULL;", "find_seq: id == num_seqs accepted (reads past)")
m("P5", "src/pages.c", "if (--pool->refcount[page] == 0) pool->free_list[pool->num_free++] = page;", "if (--pool->refcount[page] <= 1) pool->free_list[pool->num_free++] = page;", "drop: page still held by one other seq freed")
m("P6", "src/pages.c", "RETURN_IF(needed > pool->num_free, KVATTN_ERR_OUT_OF_PAGES,", "RETURN_IF(needed > pool->num_free + 1, KVATTN_ERR_OUT_OF_PAGES,", "append: one page more than free accepted")
json.dump(M, open("mutrun/mutants.json", "w"), indent=1)
for k in M:
    s = open(M[k]["file"]).read(); n = s.count(M[k]["old"])
    print(k, n, M[k]["what"])
M2 = {}
def m2(id, file, old, new, what): M2[id] = dict(file=file, old=old, new=new, what=what)
m2("C17", "src/cpu.c", "    u += 0x7fff + ((u >> 16) & 1);\n", "", "f32->bf16: rounding step skipped (truncation)")
m2("C18", "src/cpu.c", "for (int64_t slot = s.L / p->page_size; slot <= (end - 1) / p->page_size; slot++)", "for (int64_t slot = (s.L + 1) / p->page_size; slot <= (end - 1) / p->page_size; slot++)", "page check starts one position late (page holding L unchecked when L % ps == ps-1)")
m2("V4", "src/validate.c", "    KV_INDEX(cu_seqlens_q, B + 1);", "    KV_INDEX(cu_seqlens_q, B);", "index/written overlap check: cu_seqlens_q extent B instead of B+1")
m2("P7", "src/pages.c", """    RETURN_IF(n_tokens % pool->page_size != 0, KVATTN_ERR_INVALID_ARGUMENT,
              "kvattn_pages_fork: n_tokens=%d must be a multiple of page_size=%d", n_tokens, pool->page_size);
""", "", "fork: partial-page share accepted")
M.update(M2)
json.dump(M, open("mutrun/mutants.json", "w"), indent=1)
for k in M2:
    s = open(M2[k]["file"]).read(); print(k, s.count(M2[k]["old"]))
M3 = {}
def m3(id, file, old, new, what): M3[id] = dict(file=file, old=old, new=new, what=what)
m3("C19", "src/cpu.c", "const key_rows vt = {NULL, (const uint16_t *)p->v_cache + (int64_t)kvh * p->v_head_stride, w->v_off, bf16,", "const key_rows vt = {NULL, (const uint16_t *)p->v_cache + (int64_t)kvh * p->k_head_stride, w->v_off, bf16,", "decode (AVX-512 direct) path: V rows addressed with k_head_stride")
m3("C20", "src/cpu.c", "nsplit = p->num_splits > 1 ? p->num_splits : (khi - klo + SPLIT_KEYS - 1) / SPLIT_KEYS;", "nsplit = p->num_splits > 1 ? p->num_splits : (khi - klo + SPLIT_KEYS - 1) / (p->batch > 1 ? SPLIT_KEYS / 2 : SPLIT_KEYS);", "automatic split count depends on the batch size (breaks batch invariance)")
M.update(M3)
json.dump(M, open("mutrun/mutants.json", "w"), indent=1)
for k in M3:
    s = open(M3[k]["file"]).read(); print(k, s.count(M3[k]["old"]))
