#!/usr/bin/env bash
# Validate tpscope's CUDA backend on one GPU; everything lands in $OUT
# (at most 8 files). Needs $B/cudacheck and, if built, $B/tpscope:
#   CGO_ENABLED=0 go build -o bin/cudacheck ./exec/cuda/internal/cudacheck
#   CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -o bin/tpscope ./cmd/tpscope
set -u
B=${BIN:-bin}
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
T=$(mktemp -d)
LOG="$OUT/log.txt"
exec > >(tee "$LOG") 2>&1
export PYTHONUNBUFFERED=1
date -u
{ nvidia-smi; nvidia-smi topo -m; nvidia-smi -q | head -80; } > "$OUT/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
$B/cudacheck info
timeout 120 $B/cudacheck kernels || echo "KERNEL CHECKS FAILED"

SHAPES=${SHAPES:-"32x2112x7168:bf16 32x1536x1536:bf16 32x512x128x8:bf16 32x128x512x8:bf16 32x7168x1024:bf16 32x384x7168:bf16 32x512x7168:bf16 32x7168x256:bf16 32x20480x7168:bf16 32x208x256:bf16 32x256x256:bf16 4096x7168x2048:bf16 8192x8192x8192:bf16 2x288x7168x188:fp8 2x4032x256x188:fp8 32x2112x7168:fp8 4096x7168x2048:fp8 8192x8192x8192:fp8"}
if [ -z "${SKIP_GEMM:-}" ]; then
echo "== GEMM: cudacheck (purego cuBLAS/cuBLASLt)"
timeout 150 $B/cudacheck gemm -json "$OUT/gemm-go.jsonl" $SHAPES
echo "== GEMM: PyTorch"
timeout 150 python3 scripts/gpu-gemm-torch.py --json "$OUT/gemm-torch.jsonl" $SHAPES
python3 - "$OUT/gemm-go.jsonl" "$OUT/gemm-torch.jsonl" <<'PY'
import json, sys
go = {r["shape"]: r for r in map(json.loads, open(sys.argv[1]))}
th = {r["shape"]: r for r in map(json.loads, open(sys.argv[2]))}
print(f"{'shape':28s} {'go_us':>9s} {'torch_us':>9s} {'go/torch':>9s}")
for s, g in go.items():
    t = th.get(s, {})
    if "median_us" in t:
        print(f"{s:28s} {g['median_us']:9.2f} {t['median_us']:9.2f} {g['median_us']/t['median_us']:9.3f}")
    else:
        print(f"{s:28s} {g['median_us']:9.2f} {'-':>9s}")
PY
fi
echo "== MLA decode kernel"
timeout 120 $B/cudacheck bench -only mla -json "$T/mla.jsonl"

run() { # name tp local graphs trace steps extra...
  local name=$1 tp=$2 local=$3 graphs=$4 trace=$5 steps=$6; shift 6
  timeout 120 $B/cudacheck run -model "$name" -tp "$tp" -local-ranks "$local" -graphs="$graphs" -trace "$trace" -steps "$steps" -warmup 3 -json "$T/run.json" "$@" && cat "$T/run.json" >> "$OUT/runs.jsonl"
}
echo "== whole steps: tracing overhead (alternating untraced / traced)"
for rep in $(seq 1 ${REPS:-2}); do
  for g in false true; do
    run tiny-mla-moe 1 0 $g none 50
    run tiny-mla-moe 1 0 $g "file:$T/ovh.jsonl" 50
    run kimi-k2.5 8 0 $g none 20
    run kimi-k2.5 8 0 $g "file:$T/ovh.jsonl" 20
  done
done
echo "== other workloads (graphs, untraced)"
run kimi-k2.5 8 0 true none 20 -batch 1
run kimi-k2.5 8 0 false none 20 -batch 1
run kimi-k2.5 8 0 true none 20 -batch 128
run kimi-k2.5 8 0 true none 20 -kv fp8
run deepseek-v3 8 0 true none 20
run kimi-k2.5-nvfp4 8 0 true none 20
echo "== fixture traces"
mkdir -p "$T/traces"
run tiny-mla-moe 1 0 false "file:$T/traces/h200-tiny-mla-moe-tp1-eager.otlp.jsonl" 5
run tiny-mla-moe 1 0 true "file:$T/traces/h200-tiny-mla-moe-tp1-graph.otlp.jsonl" 5
run kimi-k2.5 8 0 false "file:$T/traces/h200-kimi-k2.5-tp8-rank0-eager.otlp.jsonl" 3
run kimi-k2.5 8 0 true "file:$T/traces/h200-kimi-k2.5-tp8-rank0-graph.otlp.jsonl" 3
if [ -x $B/tpscope ]; then
  timeout 60 $B/tpscope topo discover -o "$OUT/discover-h200.json" || echo "topo discover failed"
  if $B/tpscope run --help >/dev/null 2>&1; then
    echo "== tpscope run"
    timeout 120 $B/tpscope run --backend cuda --model tiny-mla-moe --tp 1 --steps 20 --trace none || echo "tpscope run failed"
    timeout 120 $B/tpscope run --backend cuda --model tiny-mla-moe --tp 1 --steps 20 --cuda-graphs --trace none --topo "$OUT/discover-h200.json" --compare || echo "tpscope run --compare failed"
  fi
fi
(cd "$T/traces" && for f in *.jsonl; do gzip -9 "$f"; done; tar cf "$OUT/traces.tar" *.gz)
ls -l "$OUT" "$T/traces"
date -u
