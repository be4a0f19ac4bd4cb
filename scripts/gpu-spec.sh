#!/usr/bin/env bash
# Speculative steps on one GPU: `tpscope verdict` of the EAGLE-3 and
# draft-model entries on the Kimi-K2.5 TP-8 rank-0 shard at batch 1 and 8,
# each entry's verify + draft step measured against its prediction.
# Needs $BIN/tpscope built with cgo (see scripts/gpu-verdict.sh); writes
# log.txt, verdict-b{1,8}.json and .md under $OUT.
set -u
B=${BIN:-bin}
OUT=${OUT:-out/gpu-spec}
STEPS=${STEPS:-6}
TOPO=${TOPO:-nvswitch:8xh100-sxm}
mkdir -p "$OUT"
T=$(mktemp -d)
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
$B/tpscope --version
for b in ${BATCHES:-1 8}; do
  echo "== verdict b$b"
  timeout 280 $B/tpscope verdict --backend cuda --model kimi-k2.5 --tp 8 --local-ranks 0 --batch "$b" \
    --kv-dtype bf16 --topo "$TOPO" --entries spec-eagle3,spec-draft --steps "$STEPS" -o "$T/b$b" ||
    echo "VERDICT b$b FAILED"
  cp "$T/b$b/verdict.json" "$OUT/verdict-b$b.json" 2>/dev/null
  cp "$T/b$b/verdict.md" "$OUT/verdict-b$b.md" 2>/dev/null
  # Each run's step, predicted against measured (the acceptance is an input).
  python3 - "$T/b$b/verdict.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["runs"]:
    m, p = r["median_us"], r["predicted_as_run_us"]
    print(f'{r["label"]:12s} measured {m:10.1f} us [{r["p10_us"]:.1f}..{r["p90_us"]:.1f}]  predicted {p:10.1f} us  ({(p - m) / m * 100:+.1f} %)')
PY
done
