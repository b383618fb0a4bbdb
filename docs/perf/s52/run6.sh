#!/bin/bash
# s52 call 6: bench_cuda's appended-row check with rotary now takes rope from the reference (kvref_rope_channel)
# instead of its own GPT-J loop: the rotary branch (KVATTN_BENCH_APPEND=2) at two decode shapes, quick. The library
# is the committed one (dev/bin/s52/tree/libkvattn.so = call 3's build).
T=dev/bin/s52/tree
mkdir -p $OUT/logs
KVATTN_BENCH_DECODE=8x8192,64x4096 KVATTN_BENCH_APPEND=2 timeout 120 $T/bench_cuda --quick > $OUT/logs/bench_rope.log 2>&1
echo "rc=$?"; grep -E "8x8192|64x4096|FAIL|ok \(" $OUT/logs/bench_rope.log | head -14
# Outcome (run6/bench_rope_before.log): every decode row passed but at 0.98-1.00 of its bound, and the inflight step
# FAILED its check at 13.39 of its bound. The bench's rotary bounds (this session's) had no room for rope(q) rounded
# to bf16 (the tests' dq term) nor for cancellation between x cos and y sin in the appended keys. Fixed in the next
# commit with the tests' own bounds; no device time was left to run it again (the rotary branch is not part of the
# default bench run, whose rows all passed at 0.32-0.52 of their bounds in call 3).
