#!/bin/bash
# Builds the audit programs into dev/bin/ against a kvattn build (default: this checkout's build/libkvattn.a,
# from `make lib` with nvcc present).
set -e
KV=${KV:-$(cd "$(dirname "$0")/../.." && pwd)}
LIB=${LIB:-$KV/build/libkvattn.a}
CUDA_HOME=${CUDA_HOME:-$(dirname $(dirname $(realpath $(which nvcc))))}
cd "$(dirname "$0")" && mkdir -p ../bin
for p in ${@:-audit_main audit_overflow}; do
  gcc -std=c11 -O2 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -I$KV/include -I$CUDA_HOME/include $p.c $LIB \
      -L$CUDA_HOME/lib64 -L$CUDA_HOME/targets/x86_64-linux/lib -lcudart_static -ldl -lrt -lstdc++ -lm -fopenmp -lpthread -o ../bin/$p
  echo built $p
done
