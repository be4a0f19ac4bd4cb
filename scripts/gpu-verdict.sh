#!/usr/bin/env bash
# Kernel checks, kernel timings against the measured copy bandwidth, and
# `tpscope verdict` on one GPU; everything lands in $OUT (at most 8 files).
# Needs $B/cudacheck and $B/tpscope, built on any machine with Go:
#   CGO_ENABLED=0 go build -o $B/cudacheck ./exec/cuda/internal/cudacheck
#   CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -o $B/tpscope ./cmd/tpscope
# PARTS picks what runs: kernels bench kimi32 kimi1 glm ncu (default all).
set -u
B=${BIN:-bin}
OUT=${OUT:-out/gpu}
PARTS=${PARTS:-"kernels bench kimi32 kimi1 glm"}
STEPS=${STEPS:-8}
mkdir -p "$OUT"
T=$(mktemp -d)
exec > >(tee "$OUT/log.txt") 2>&1
has() { [[ " $PARTS " == *" $1 "* ]]; }
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
$B/cudacheck info
if has kernels; then
  echo "== kernel checks"
  timeout 120 $B/cudacheck kernels || echo "KERNEL CHECKS FAILED"
fi
if has bench; then
  echo "== kernel timings"
  timeout 420 $B/cudacheck bench -json "$OUT/bench.jsonl" || echo "BENCH FAILED"
fi
# The catalog's 8-GPU box of this GPU (verdict refuses a box of another GPU).
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) BOX=${BOX:-h200-nvswitch} ;;
  *) BOX=${BOX:-nvswitch:8xh100-sxm} ;;
esac
V="$B/tpscope verdict --backend cuda --tp 8 --local-ranks 0 --context 4096 --topo $BOX --steps $STEPS --warmup 3"
verdict() { # name args...
  local name=$1; shift
  echo "== verdict $name"
  mkdir -p "$T/$name"
  timeout 200 $V "$@" -o "$T/$name" || echo "VERDICT $name FAILED"
  cp "$T/$name/verdict.json" "$OUT/verdict-$name.json" 2>/dev/null
}
has kimi32 && verdict kimi-b32 --model kimi-k2.5 --batch 32 --kv-dtype bf16
has kimi1 && verdict kimi-b1 --model kimi-k2.5 --batch 1 --kv-dtype bf16
has glm && verdict glm5-b8 --model glm-5-nvfp4 --batch 8 --kv-dtype bf16
if has ncu; then
  echo "== ncu: the executor's two 8-row MLA kernels at B=32 H=8 ctx=4096 (throughputs, pipes, warp stalls)"
  timeout 180 ncu --clock-control none -k regex:'mla_(ds_fp8c_r8_t64_s4_w16_b|tc_bf16_r8_t64_s2)$' -c 2 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section WarpStateStats --section Occupancy \
    $B/cudacheck bench -only mla -mla-shapes 32x8x1x4096 > "$OUT/ncu.txt" 2>&1 || echo "NCU FAILED"
fi
# The baseline traces (the other runs' stay on the machine: they exceed what comes back).
(cd "$T" && tar czf "$OUT/traces.tgz" */baseline.otlp.jsonl */verdict.md 2>/dev/null)
ls -l "$OUT"
date -u
