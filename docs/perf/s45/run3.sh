#!/bin/bash
# s45 call 3: ncu of the decode kernel, b98 (HEAD, v98) against fin (v100 + v101 + v102), at 8x8192 and 12x4096
# contiguous: executed instructions, warp stalls, per-instruction source counters
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for shape in 8x8192 12x4096; do
  for b in b98 fin; do
    st ncu $b $shape
    KVATTN_BENCH_DECODE=$shape timeout 140 ncu --clock-control none -k regex:kv_attn_kernel -s 3 -c 1 \
      --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
      --metrics smsp__inst_executed.sum,smsp__cycles_active.avg,sm__cycles_elapsed.max,gpu__time_duration.sum \
      -o $L/${b}_$shape dev/bin/s45/$b/bench_cuda --quick > $L/ncu_${b}_$shape.txt 2>&1
    echo "ncu rc=$?"
    ncu -i $L/${b}_$shape.ncu-rep --page details > $L/${b}_$shape.details.txt 2>&1
    ncu -i $L/${b}_$shape.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $L/${b}_$shape.sass.csv.gz
    grep -E "inst_executed|Duration|cycles_active|elapsed.max|Issued Ipc|Warp Cycles Per Issued|Registers Per|Achieved Occ" $L/${b}_$shape.details.txt | head -12
    rm -f $L/${b}_$shape.ncu-rep
    pack
  done
done
st done
