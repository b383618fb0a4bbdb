#!/bin/bash
# s53 call 3: (a) `make test-knobs` as run on the device: each CUDA environment switch alone (KVATTN_NO_PDL,
# _NO_OVERLAP, _NO_EARLY, _NO_EARLY_APPEND, _NO_LEAN, _NO_TMA) over test_grid, test_inflight, test_cuda_graph,
# test_cuda_split, test_cuda_packed and test_fuzz_bad_data, quick grids (KVATTN_TEST_QUICK=1); no test set any of
# them before this session. (b) The library built for sm_90 instead of sm_90a (CUDA_ARCH=90: KVATTN_SM90A=0, so every
# prefill item runs on the mma.sync kernel, the path of non-Hopper devices, never run on a GPU by a test before),
# dev/bin/s53/lib90, with the same test binaries beside it (they load the libkvattn.so of their own folder).
T=dev/bin/s53/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
KT="$T/test_grid $T/test_inflight $T/test_cuda_graph $T/test_cuda_split $T/test_cuda_packed $T/test_fuzz_bad_data"
for k in KVATTN_NO_PDL KVATTN_NO_OVERLAP KVATTN_NO_EARLY KVATTN_NO_EARLY_APPEND KVATTN_NO_LEAN KVATTN_NO_TMA; do
  st $k
  env $k=1 KVATTN_TEST_QUICK=1 timeout 55 bash tests/run_all.sh $KT > $L/knob_$k.log 2>&1; echo "$k rc=$?"
  grep -E "^[0-9]+ passed|^FAIL" $L/knob_$k.log | head -5
  pack
done
st sm_90 build
mkdir -p /tmp/t90 && cp $T/test_* $T/decode_step /tmp/t90/ && cp dev/bin/s53/lib90/libkvattn.so /tmp/t90/
ldd /tmp/t90/test_grid | grep kvattn > $L/sm90_ldd.txt; md5sum /tmp/t90/libkvattn.so $T/libkvattn.so >> $L/sm90_ldd.txt
timeout 170 bash tests/run_all.sh /tmp/t90/test_grid /tmp/t90/test_inflight /tmp/t90/test_cuda_packed \
  /tmp/t90/test_cuda_split /tmp/t90/test_cuda_invariance /tmp/t90/test_cuda_graph /tmp/t90/test_cuda_stress \
  > $L/sm90_suite.log 2>&1; echo "sm_90 rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|^FAIL" $L/sm90_suite.log | head -20
pack
st done
