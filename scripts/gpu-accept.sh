#!/usr/bin/env bash
# One GPU, one call: the measurements behind the closing notes of the
# scenario, catalog and DP+EP work. Everything lands in $OUT.
#   discover: topo discover (and --as nvswitch:8) on this GPU
#   shard:    Kimi-K2.5 TP-8 rank-0 shard, batch 8 and 32, context 4096,
#             CUDA graphs, priced from the catalog box with no calibration
#   dpep:     Kimi-K2.5 DP 8 + EP rank 0, batch 64: the MoE GEMM spans must
#             carry the schedule's rows and experts
# Needs $BIN/tpscope (CGO build). PARTS picks parts (default all).
set -u
B=${BIN:-bin}
OUT=${OUT:-out/gpu}
PARTS=${PARTS:-"discover shard dpep"}
STEPS=${STEPS:-6}
# The catalog's 8-GPU box of this GPU (run refuses a box of another GPU).
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) BOX=${BOX:-nvswitch:8xh200-sxm} ;;
  *) BOX=${BOX:-nvswitch:8xh100-sxm} ;;
esac
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
has() { [[ " $PARTS " == *" $1 "* ]]; }
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
fail=0
step() { # name timeout cmd...
  local name=$1 t=$2; shift 2
  echo "== $name: $*"
  local t0=$(date +%s)
  timeout "$t" "$@"; local rc=$?
  echo "== $name rc=$rc $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || fail=$((fail+1))
}
if has discover; then
  step discover 60 $B/tpscope topo discover -o "$OUT/discover.json" --probe-out "$OUT/probe.json"
  step discover-as 60 $B/tpscope topo discover --as nvswitch:8 -o "$OUT/discover-nvswitch8.json"
fi
R="$B/tpscope run --backend cuda --model kimi-k2.5 --context 4096 --warmup 3"
if has shard; then
  for b in 8 32; do
    step shard-b$b 200 $R --steps $STEPS --tp 8 --local-ranks 0 --batch $b --topo "$BOX" --compare \
      --trace "file:$OUT/shard-b$b.otlp.jsonl"
  done
fi
if has dpep; then
  step dpep 240 $R --tp 1 --dp 8 --ep --batch 64 --local-ranks 0 --topo "$BOX" --steps 3 \
    --trace "file:$OUT/dpep.otlp.jsonl"
fi
gzip -f "$OUT"/*.otlp.jsonl 2>/dev/null
ls -l "$OUT"
echo "failed steps: $fail"
date -u
