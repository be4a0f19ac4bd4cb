#!/usr/bin/env bash
# tpscope's collectives and TP-N decode steps on N GPUs of one host, in one
# invocation; everything lands in $OUT (at most 8 files).
#
#   scripts/gpu-multi.sh N [PHASE...]      N = 2, 4 or 8; PHASEs: bench steps fault (default: all)
#
# Needs $BIN/tpscope built on the development machine (cgo for NVML):
#   CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" go build -o bin/tpscope ./cmd/tpscope
# and, for the reference harness, python3 with torch (scripts/gpu-collectives-torch.py).
#
# Always first (phase topo): nvidia-smi and `nvidia-smi topo -m` (env.txt), `tpscope topo
# discover` (discover.json: the box every prediction below uses, unless TOPO names one).
#   bench  all-reduce, all-gather, reduce-scatter and all-to-all from 512 B to 512 MB
#          (SIZES), eager and CUDA graphs (MODES): through PyTorch's torch.distributed (NCCL)
#          first, then through tpscope's executor (`collective --measure`, that log as
#          --reference), both written as nccl-tests logs; calibrate --nccl-tests on the
#          executor's. collectives.md (the tables), collectives.tar.gz (the logs).
#   steps  `tpscope run` of each model (MODELS) at TP N, decode batch 1/8/32 (BATCHES),
#          context 4096, CUDA graphs and eager, NCCL defaults and NCCL_PROTO=LL, every
#          collective executed, traced; then compare (per kind, collectives included, and
#          the graphs/LL verdicts) and calibrate --trace (fit on even steps, judged on odd
#          ones) per trace. steps.md; traces.tar (the traces matching KEEP, gzipped, up to
#          15 MB).
#   fault  rank N-1 never enters L01.attn.allreduce (run --fault-hang), eager and graphs:
#          every rank must end with the watchdog's error within WATCHDOG, no hang. fault.txt.
#
# One command of the device tool may run 10 minutes: split the phases, e.g.
#   scripts/gpu-multi.sh 8 bench;  MODELS=kimi-k2.5 scripts/gpu-multi.sh 8 steps
#   MODELS=glm-5-nvfp4 scripts/gpu-multi.sh 8 steps;  scripts/gpu-multi.sh 8 fault
# BACKEND=cpu rehearses the whole script on CPU goroutine ranks (tiny model, small sizes,
# no nvidia-smi; the torch reference is skipped where torch is missing): that is what
# cmd/tpscope's TestBenchGPUMultiScriptCPU runs.
set -u
set -o pipefail

N=${1:-}
case "$N" in
  [1-9]|[1-9][0-9]) ;;
  *) echo "usage: $0 N [bench] [steps] [fault]   (N: GPUs of this host to use, e.g. 2, 4 or 8)" >&2; exit 2 ;;
esac
shift
PHASES=${*:-bench steps fault}
for p in $PHASES; do
  case "$p" in bench|steps|fault) ;; *) echo "$0: unknown phase '$p': want bench, steps or fault" >&2; exit 2 ;; esac
done

BACKEND=${BACKEND:-cuda}
B=${BIN:-bin}
TPS="$B/tpscope"
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-out/gpu-multi-$N}
LIMIT=${LIMIT:-600}  # seconds per step
if [ "$BACKEND" = cpu ]; then
  SIZES=${SIZES:-512:64K}; MODES=${MODES:-eager}; MODELS=${MODELS:-tiny-mla-moe}; BATCHES=${BATCHES:-1 8}
  CONTEXT=${CONTEXT:-512}; WATCHDOG=${WATCHDOG:-1s}; FAULT_MODEL=${FAULT_MODEL:-tiny-mla-moe}; FAULT_MODES=${FAULT_MODES:-eager}
  NCCLS=${NCCLS:-default}  # goroutine ranks run no NCCL: run refuses its settings there
else
  SIZES=${SIZES:-512:512M}; MODES=${MODES:-eager graph}; MODELS=${MODELS:-kimi-k2.5 glm-5-nvfp4}; BATCHES=${BATCHES:-1 8 32}
  CONTEXT=${CONTEXT:-4096}; WATCHDOG=${WATCHDOG:-30s}; FAULT_MODEL=${FAULT_MODEL:-kimi-k2.5}; FAULT_MODES=${FAULT_MODES:-eager graph}
  NCCLS=${NCCLS:-default LL}
fi
OPS=${OPS:-allreduce allgather reducescatter alltoall}
BENCH_STEPS=${BENCH_STEPS:-10}; BENCH_WARMUP=${BENCH_WARMUP:-2}; ITERS=${ITERS:-5}
RUN_STEPS=${RUN_STEPS:-6}; RUN_WARMUP=${RUN_WARMUP:-2}
KEEP=${KEEP:-*-graph-default.otlp.jsonl.gz}
CAL_MS=${CAL_MS:-300}

# NVLink multicast stays off on shared hosts (NVLS is not modeled either).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d) || exit 1
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/coll" "$W/traces" "$W/cal"
exec > >(tee -a "$OUT/log.txt") 2>&1

# step LIMIT CMD...: run one step under a time limit (then SIGQUIT: tpscope's
# output ends with every goroutine's stack, where it hung), logged; a failure is
# recorded in $W/failed (steps may run inside pipelines, i.e. subshells) and
# does not stop the script.
step() {
  local limit=$1; shift
  echo "+ [$(date -u +%H:%M:%S)] $*"
  GOTRACEBACK=all timeout --signal=QUIT --kill-after=20 "$limit" "$@"
  local rc=$?
  if [ $rc -ne 0 ]; then
    local why="exit $rc"
    [ $rc -eq 124 ] && why="timed out after ${limit}s"
    echo "! $why: $*"
    echo "$why: $*" >> "$W/failed"
  fi
  return $rc
}

# calibrate_trace TRACE NAME: calibrate --trace on one run, as step does; a
# box the held-out steps predict worse than the prior is refused by tpscope
# (exit 1, nothing written, both figures said): an outcome to report, not a
# failure of the run.
calibrate_trace() {
  local t=$1 name=$2 log="$W/cal/$2.log"
  echo "+ [$(date -u +%H:%M:%S)] $TPS calibrate --trace $t ${BOX[*]} --tp $N -o $W/cal/$name.json"
  GOTRACEBACK=all timeout --signal=QUIT --kill-after=20 "$LIMIT" "$TPS" calibrate --trace "$t" "${BOX[@]}" --tp "$N" -o "$W/cal/$name.json" > "$log" 2>&1
  local rc=$?
  cat "$log"
  if [ $rc -eq 1 ] && grep -q -- "--force writes it" "$log"; then
    echo "refused: the calibrated box predicts the held-out steps worse (reported above, nothing written)"
  elif [ $rc -ne 0 ]; then
    local why="exit $rc"
    [ $rc -eq 124 ] && why="timed out after ${LIMIT}s"
    echo "! $why: calibrate --trace $t"
    echo "$why: calibrate --trace $t" >> "$W/failed"
  fi
}

echo "== gpu-multi.sh N=$N phases: $PHASES backend=$BACKEND $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if [ ! -x "$TPS" ]; then echo "! $TPS not found or not executable: build it first (see the header)"; exit 1; fi
"$TPS" version

# ---- topo: always ----
{
  echo "# $(date -u)  N=$N backend=$BACKEND"
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|CUDA_VISIBLE)' | sort
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi
    nvidia-smi topo -m
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.max.sm,memory.total --format=csv
  else
    echo "nvidia-smi: not found (BACKEND=$BACKEND)"
  fi
  if "$PY" -c 'import torch' 2>/dev/null; then
    "$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "-", "devices", torch.cuda.device_count())'
  else
    echo "python torch: not importable"
  fi
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if [ -n "${TOPO:-}" ]; then
  echo "topology: $TOPO (TOPO)"
elif [ "$BACKEND" = cpu ]; then
  step "$LIMIT" "$TPS" calibrate --backend cpu --ranks "$N" --bench-ms "$CAL_MS" -o "$OUT/discover.json" && TOPO="$OUT/discover.json"
else
  step "$LIMIT" "$TPS" topo discover -o "$OUT/discover.json" && TOPO="$OUT/discover.json"
fi
if [ -z "${TOPO:-}" ]; then
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
    *H100*) TOPO=nvswitch:8xh100-sxm ;;
    *) TOPO=h200-nvswitch ;;
  esac
  echo "! no discovered topology: predicting on the $TOPO preset"
fi
# --gpus takes the first N GPUs of the box (0 = all).
BOX=(--topo "$TOPO" --gpus "$N")

has() { case " $PHASES " in *" $1 "*) return 0 ;; esac; return 1; }
bin_of() { case "$1" in allreduce) echo all_reduce_perf ;; allgather) echo all_gather_perf ;; reducescatter) echo reduce_scatter_perf ;; alltoall) echo alltoall_perf ;; esac; }

# ---- bench: collectives by size, executor against PyTorch ----
if has bench; then
  echo "== bench: $OPS, sizes $SIZES, modes $MODES"
  TORCH=0
  if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.device_count() >= '"$N"' else 1)' 2>/dev/null; then TORCH=1; else echo "! no torch with $N GPUs: the executor runs without a reference"; fi
  : > "$OUT/collectives.md"
  for op in $OPS; do
    bin=$(bin_of "$op")
    for mode in $MODES; do
      g=(); tg=()
      [ "$mode" = graph ] && g=(--cuda-graphs) && tg=(--graphs)
      ref="$W/coll/torch-$mode-$bin.txt"; exe="$W/coll/exec-$mode-$bin.txt"
      refarg=()
      if [ $TORCH = 1 ] && step "$LIMIT" "$PY" "$HERE/gpu-collectives-torch.py" --nprocs "$N" --op "$op" --sizes "$SIZES" \
          --steps "$BENCH_STEPS" --warmup "$BENCH_WARMUP" --iters "$ITERS" "${tg[@]}" --out "$ref"; then
        refarg=(--reference "$ref")
      fi
      {
        echo; echo "## $op, $mode, $N ranks"
      } >> "$OUT/collectives.md"
      step "$LIMIT" "$TPS" collective --measure --backend "$BACKEND" --topo "$TOPO" --ranks "$N" --op "$op" --sizes "$SIZES" \
        --steps "$BENCH_STEPS" --warmup "$BENCH_WARMUP" --iters "$ITERS" "${g[@]}" --watchdog "$WATCHDOG" -o "$exe" "${refarg[@]}" \
        --output markdown | tee -a "$OUT/collectives.md"
      if [ -s "$exe" ] && [ "$op" != alltoall ]; then
        step "$LIMIT" "$TPS" calibrate --nccl-tests "$exe" "${BOX[@]}" -o "$W/cal/nccltests-$mode-$op.json" | tee -a "$OUT/collectives.md"
      fi
    done
  done
  (cd "$W/coll" && ls -1 *.txt >/dev/null 2>&1 && tar czf "$OUT/collectives.tar.gz" *.txt) || echo "! no collective logs to bundle"
  echo "== bench: largest executor/reference differences (acceptance: within 10 % at every size)"
  grep -h "largest difference" "$OUT/collectives.md" | sed 's#'"$W"'/coll/##' || echo "(no reference comparison)"
fi

# ---- steps: TP-N decode steps, traced, compared, calibrated ----
if has steps; then
  echo "== steps: $MODELS at TP $N, batches $BATCHES, context $CONTEXT, graphs + eager, NCCL $NCCLS"
  : > "$OUT/steps.md"
  for model in $MODELS; do
    traces=()
    for b in $BATCHES; do
      for mode in graph eager; do
        for nccl in $NCCLS; do
          name="$model-tp$N-b$b-$mode-$nccl"
          opt=(--custom-ar off)  # the executor runs NCCL's all-reduce: predict that
          [ "$mode" = eager ] && opt+=(--cuda-graphs=false)
          [ "$nccl" != default ] && opt+=(--nccl-proto "$nccl")
          echo; echo "## run $name" >> "$OUT/steps.md"
          if step "$LIMIT" "$TPS" run --backend "$BACKEND" --model "$model" --tp "$N" "${BOX[@]}" --batch "$b" --context "$CONTEXT" "${opt[@]}" \
              --steps "$RUN_STEPS" --warmup "$RUN_WARMUP" --watchdog "$WATCHDOG" --trace "file:$W/traces/$name.otlp.jsonl" --compare \
              --output markdown | tee -a "$OUT/steps.md"; then
            traces+=("$W/traces/$name.otlp.jsonl")
          fi
        done
      done
    done
    for t in "${traces[@]}"; do
      name=$(basename "$t" .otlp.jsonl)
      echo; echo "## compare $name" >> "$OUT/steps.md"
      step "$LIMIT" "$TPS" compare --trace "$t" "${BOX[@]}" --tp "$N" --top 10 --output markdown | tee -a "$OUT/steps.md"
      echo; echo "## calibrate $name (fit on even steps, held-out odd steps)" >> "$OUT/steps.md"
      calibrate_trace "$t" "$name" | tee -a "$OUT/steps.md"
    done
    if [ ${#traces[@]} -gt 1 ]; then
      list=$(IFS=,; echo "${traces[*]}")
      echo; echo "## compare $model, all runs (optimization verdicts)" >> "$OUT/steps.md"
      step "$LIMIT" "$TPS" compare --trace "$list" "${BOX[@]}" --tp "$N" --top 5 --output markdown | tee -a "$OUT/steps.md"
    fi
  done
  echo "== steps: held-out odd steps after calibration (acceptance: within 10 %)"
  grep -h -E "^## calibrate|held-out odd steps|^refused:" "$OUT/steps.md" | sed 's#'"$W"'/traces/##'
  # Bring back the traces matching KEEP, gzipped, while they fit 15 MB.
  (
    cd "$W/traces" || exit 0
    for f in *.otlp.jsonl; do [ -e "$f" ] && gzip -9 "$f"; done
    kept=(); total=0
    for f in $KEEP; do
      [ -e "$f" ] || continue
      sz=$(stat -c %s "$f")
      if [ $((total + sz)) -gt $((15 * 1024 * 1024)) ]; then echo "trace left out (15 MB bundle full): $f"; continue; fi
      kept+=("$f"); total=$((total + sz))
    done
    if [ ${#kept[@]} -gt 0 ]; then tar cf "$OUT/traces.tar" "${kept[@]}" && echo "traces.tar: ${kept[*]}"; else echo "no trace matches KEEP=$KEEP"; fi
  )
fi

# ---- fault: a rank that never enters a collective ----
if has fault; then
  echo "== fault: rank $((N - 1)) never enters L01.attn.allreduce; watchdog $WATCHDOG"
  : > "$OUT/fault.txt"
  for mode in $FAULT_MODES; do
    opt=(--custom-ar off)
    [ "$mode" = eager ] && opt+=(--cuda-graphs=false)
    t0=$(date +%s)
    GOTRACEBACK=all timeout --signal=QUIT --kill-after=20 "$LIMIT" "$TPS" run --backend "$BACKEND" --model "$FAULT_MODEL" --tp "$N" "${BOX[@]}" --batch 1 --context "$CONTEXT" "${opt[@]}" \
      --steps 3 --warmup 1 --trace none --watchdog "$WATCHDOG" --fault-hang "$((N - 1)):L01.attn.allreduce" > "$W/fault.out" 2>&1
    rc=$?
    took=$(( $(date +%s) - t0 ))
    verdict=PASS
    why="exit 1 with the watchdog's error after ${took}s (setup included)"
    if [ $rc -ne 1 ]; then verdict=FAIL; why="exit $rc, want 1"; [ $rc -eq 124 ] && why="still running after ${LIMIT}s: a hang"
    elif ! grep -q "watchdog" "$W/fault.out"; then verdict=FAIL; why="the error does not name the watchdog"
    elif grep -q "no watchdog ended the run" "$W/fault.out"; then verdict=FAIL; why="no watchdog fired: the stalled rank's hold ended the run"
    elif grep -q "did not stop within" "$W/fault.out"; then verdict=FAIL; why="a rank did not stop after the cancellation (cleanup timeout)"
    fi
    [ $verdict = FAIL ] && echo "fault $mode: $why" >> "$W/failed"
    { echo "fault $mode: $verdict: $why"; sed 's/^/  /' "$W/fault.out"; } | tee -a "$OUT/fault.txt"
  done
fi

FAILS=0
[ -f "$W/failed" ] && FAILS=$(wc -l < "$W/failed")
echo "== done $(date -u +%Y-%m-%dT%H:%M:%SZ): $FAILS failed step(s); files in $OUT:"
[ -f "$W/failed" ] && sed 's/^/  failed: /' "$W/failed"
ls -l "$OUT"
[ "$FAILS" -eq 0 ]
