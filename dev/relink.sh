#!/bin/bash
# dev/relink.sh BUILD OUTDIR [SRCROOT]: the binaries a device script runs (tests, bench_cuda, demo, decode_step),
# linked to BUILD/libkvattn.so with rpath $ORIGIN, in OUTDIR (e.g. dev/bin/sNN/t; carry that folder to the device)
set -e
B=$1; T=$2; R=${3:-.}
CU=/usr/local/cuda
mkdir -p $T/obj
cp $B/libkvattn.so $T/
CF="-std=c11 -Wall -Wextra -Wno-unused-parameter -fPIC -I$R/include -I$R/src -D_GNU_SOURCE -DKVATTN_HAVE_CUDA=1 -I$CU/include -O3 -march=x86-64-v2 -fopenmp -I$R/tests/common"
LK="-L$T -lkvattn -Wl,-rpath,\$ORIGIN -L$CU/lib64 -L$CU/targets/x86_64-linux/lib -lcudart_static -ldl -lrt -lstdc++ -lm -fopenmp -lpthread"
for c in $R/tests/common/*.c; do gcc $CF -c $c -o $T/obj/$(basename $c .c).o; done
OBJ=$(ls $T/obj/*.o)
# test_overlap and test_cuda_arch call library-internal functions (hidden in the .so): linked to the static library
SLK="$B/libkvattn.a -L$CU/lib64 -L$CU/targets/x86_64-linux/lib -lcudart_static -ldl -lrt -lstdc++ -lm -fopenmp -lpthread"
for t in $R/tests/test_*.c; do
  if [ "$(basename $t)" = test_overlap.c ] || [ "$(basename $t)" = test_cuda_arch.c ]; then gcc $CF $t $OBJ $SLK -o $T/$(basename $t .c) &
  else gcc $CF $t $OBJ $LK -o $T/$(basename $t .c) & fi
done; wait
gcc $CF $R/bench/bench_cuda.c $OBJ $LK -o $T/bench_cuda &
gcc $CF $R/examples/demo.c $OBJ $LK -o $T/demo &
gcc $CF $R/examples/decode_step.c $LK -o $T/decode_step &
wait
rm -rf $T/obj
du -sh $T
