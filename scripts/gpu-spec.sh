#!/usr/bin/env bash
# Speculative steps on one GPU: `tpscope verdict` of the EAGLE-3 and
# draft-model entries on the Kimi-K2.5 TP-8 rank-0 shard at batch 1 and 8,
# each entry's verify + draft step measured against its prediction.
# Then, as a user holding the baseline's trace would: calibrate the box on
# the batch-1 baseline alone and run both batches' verdicts against it
# (the speculative steps and batch 8 are held out). Needs $BIN/tpscope
# built with cgo (see scripts/gpu-verdict.sh); writes log.txt,
# verdict-b{1,8}.json, the calibrated box and the per-kind comparison of
# the batch-1 draft-model step under $OUT.
set -u
B=${BIN:-bin}
OUT=${OUT:-out/gpu-spec}
STEPS=${STEPS:-6}
# The box is the catalog's 8-GPU box of this GPU (run and verdict refuse a
# box of another GPU).
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*) GPU_BOX=nvswitch:8xh200-sxm GPU=h200 ;;
  *) GPU_BOX=nvswitch:8xh100-sxm GPU=h100 ;;
esac
TOPO=${TOPO:-$GPU_BOX}
mkdir -p "$OUT"
T=$(mktemp -d)
exec > >(tee "$OUT/log.txt") 2>&1
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv
$B/tpscope --version
verdicts() { # topo suffix
  for b in ${BATCHES:-1 8}; do
    echo "== verdict b$b on $1"
    timeout 200 $B/tpscope verdict --backend cuda --model kimi-k2.5 --tp 8 --local-ranks 0 --batch "$b" \
      --kv-dtype bf16 --topo "$1" --entries spec-eagle3,spec-draft --steps "$STEPS" -o "$T/b$b$2" ||
      echo "VERDICT b$b$2 FAILED"
    cp "$T/b$b$2/verdict.json" "$OUT/verdict-b$b$2.json" 2>/dev/null
    steps "$T/b$b$2/verdict.json"
  done
}
steps() {
  # Each run's step, predicted against measured (the acceptance is an input).
  python3 - "$1" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["runs"]:
    m, p = r["median_us"], r["predicted_as_run_us"]
    print(f'{r["label"]:12s} measured {m:10.1f} us [{r["p10_us"]:.1f}..{r["p90_us"]:.1f}]  predicted {p:10.1f} us  ({(p - m) / m * 100:+.1f} %)')
PY
}
verdicts "$TOPO" ""
echo "== compare: the batch-1 draft-model step by kind"
$B/tpscope compare --trace "$T/b1/spec-draft.otlp.jsonl" > "$OUT/compare-b1-draft.txt" 2>&1
sed -n '/^per kind/,/^$/p' "$OUT/compare-b1-draft.txt"
if [ "${CAL:-1}" = 1 ]; then
  echo "== calibrate on the batch-1 baseline's trace"
  $B/tpscope calibrate --trace "$T/b1/baseline.otlp.jsonl" -o "$OUT/$GPU-cal-b1.json" || echo "CALIBRATE FAILED"
  [ -s "$OUT/$GPU-cal-b1.json" ] && verdicts "$OUT/$GPU-cal-b1.json" "-cal"
fi
