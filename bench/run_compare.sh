#!/usr/bin/env bash
# bench/run_compare.sh — on the H200 machine: install the carried FlashInfer wheels, build kvattn (CUDA), run
# bench/compare.py with its outputs in $OUT. Extra arguments go to compare.py (e.g. --quick, --workloads decode).
#
# Device call (the `run` tool), from the repository root:
#   command: bash bench/run_compare.sh        carry: [".whl", ".fiaot"]        timeout_s: 600
# .whl   the wheels (flashinfer-python 0.6.3 py3-none-any, apache-tvm-ffi 0.1.15.post2 cp312); the other pure-Python
#        needs of flashinfer (click, einops, ninja, numpy, nvidia-ml-py, packaging, requests, tabulate, torch, tqdm,
#        typing-extensions) are already on the machine; nvidia-cutlass-dsl and nvidia-cudnn-frontend are only
#        imported by paths compare.py does not use.
# .fiaot FlashInfer modules prebuilt on the CPU machine (same nvcc 13.0, sm_90a; FLASHINFER_CUDA_ARCH_LIST=9.0a)
#        as mN.so with a MANIFEST of "mN.so <uri>" lines: the fa3 prefill kernels (used by its paged/ragged prefill and tensor-core decode
#        wrappers) for D 64/128/256, the CUDA-core decode for D 128, the cascade merge, and FA2 prefill D 128 (the
#        fallback if fa3 fails). Copied into flashinfer's AOT folder, they load without a JIT build; anything
#        missing is JIT-built on the device by compare.py's background prebuild within --flashinfer-jit-budget s.
# Rebuild them (on a machine with nvcc 13.0, ~15 min per fa3 module on 2 cores), with the wheels installed:
#   FLASHINFER_CUDA_ARCH_LIST=9.0a python3 -c "import torch; from flashinfer.jit.attention.modules import \
#     gen_batch_prefill_module as g; g('fa3', *[torch.bfloat16]*3, torch.int32, 128, 128, 0, False, False, False).build(False)"
#   then copy ~/.cache/flashinfer/0.6.3/90a/cached_ops/<uri>/<uri>.so to .fiaot/mN.so and add "mN.so <uri>" to
#   .fiaot/MANIFEST
# Both folders are ignored through .git/info/exclude. Without them, FlashInfer is listed as unavailable.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-compare-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl; then
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    if [ -f .fiaot/MANIFEST ]; then
      # MANIFEST lines: "<file>.so <uri>" -> flashinfer/data/aot/<uri>/<uri>.so (short names travel; long ones here)
      n=0
      while read -r f uri; do
        [ -n "$f" ] && [ -f ".fiaot/$f" ] || continue
        mkdir -p "/tmp/site/flashinfer/data/aot/$uri" && cp ".fiaot/$f" "/tmp/site/flashinfer/data/aot/$uri/$uri.so" && n=$((n+1))
      done < .fiaot/MANIFEST
      echo "flashinfer: $n prebuilt modules installed"
    fi
  else
    echo "run_compare.sh: wheel install failed; FlashInfer will be listed as unavailable"
  fi
fi
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/fiws}
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0a}
export MAX_JOBS=${MAX_JOBS:-14}
BUILD=${KVATTN_BUILD:-build}
echo "building kvattn ($BUILD) ..."
if ! make BUILD="$BUILD" lib -j16 > "$OUT/build.log" 2>&1; then
  echo "run_compare.sh: kvattn build failed (see build.log):"
  tail -30 "$OUT/build.log"
fi
export KVATTN_LIBRARY=$PWD/$BUILD/libkvattn.so
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
# the device runs one command for at most 600 s: leave compare.py what the install and build left of 560 s
BUDGET=$(( ${COMPARE_BUDGET_S:-560} - SECONDS ))
echo "compare.py time budget: ${BUDGET} s"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null || true
python3 bench/compare.py --out "$OUT" --time-budget "$BUDGET" "$@" 2>&1 | tee "$OUT/compare.log"
