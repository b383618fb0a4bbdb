#!/bin/bash
# s53 call 4: the rest of test-knobs. Call 3 ran each switch over test_grid, test_inflight and test_cuda_graph (all
# passed) but its 55 s per switch ran out inside test_cuda_split. Here the six switches run at the same time (one
# process chain each; the float64 references are host-bound and the device has 16 cores) over test_cuda_split,
# test_cuda_packed and test_fuzz_bad_data, quick.
T=dev/bin/s53/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st start
for k in KVATTN_NO_PDL KVATTN_NO_OVERLAP KVATTN_NO_EARLY KVATTN_NO_EARLY_APPEND KVATTN_NO_LEAN KVATTN_NO_TMA; do
  ( env $k=1 KVATTN_TEST_QUICK=1 timeout 400 bash tests/run_all.sh $T/test_cuda_split $T/test_cuda_packed \
      $T/test_fuzz_bad_data > $L/knob2_$k.log 2>&1; echo "rc=$?" >> $L/knob2_$k.log ) &
done
wait
for k in KVATTN_NO_PDL KVATTN_NO_OVERLAP KVATTN_NO_EARLY KVATTN_NO_EARLY_APPEND KVATTN_NO_LEAN KVATTN_NO_TMA; do
  echo "$k: $(grep -E '^test_[a-z_]+: [0-9]+ passed|^rc=' $L/knob2_$k.log | paste -sd' ')"; grep -E "^FAIL" $L/knob2_$k.log | head -3
done
pack
st done
