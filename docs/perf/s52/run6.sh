#!/bin/bash
# s52 call 6: bench_cuda's appended-row check with rotary now takes rope from the reference (kvref_rope_channel)
# instead of its own GPT-J loop: the rotary branch (KVATTN_BENCH_APPEND=2) at two decode shapes, quick. The library
# is the committed one (dev/bin/s52/tree/libkvattn.so = call 3's build).
T=dev/bin/s52/tree
mkdir -p $OUT/logs
KVATTN_BENCH_DECODE=8x8192,64x4096 KVATTN_BENCH_APPEND=2 timeout 120 $T/bench_cuda --quick > $OUT/logs/bench_rope.log 2>&1
echo "rc=$?"; grep -E "8x8192|64x4096|FAIL|ok \(" $OUT/logs/bench_rope.log | head -14
