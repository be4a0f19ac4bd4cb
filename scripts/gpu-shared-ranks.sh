#!/usr/bin/env bash
# The multi-process NCCL path of the CUDA executor, rehearsed on ONE GPU.
#
#   scripts/gpu-shared-ranks.sh [N]        N processes (default 2), all on GPU 0
#
# Each process is one rank of a TP-N run, launched as torchrun would (RANK, WORLD_SIZE,
# LOCAL_RANK=0, MASTER_ADDR/PORT). NCCL refuses two ranks of one communicator on one GPU
# of one host, so every process gets its own NCCL_HOSTID: NCCL then takes them for
# separate hosts and joins them through its socket transport on loopback. Their kernels
# share the GPU by time slices, so the timings mean nothing. What it checks, on real NCCL:
#   ok-eager, ok-graph   a TP-N decode step with every collective executed (the trace has
#                        no skipped collective), eager and captured in a CUDA graph;
#   fault-eager, fault-graph
#                        rank N-1 never enters L01.attn.allreduce (run --fault-hang): the
#                        other ranks end with the watchdog's error and the stalled one with
#                        the fault's own, every process exits 1 and none is killed by the
#                        time limit (a hang), its communicator aborted (exec.Aborter);
#   verdict-nccl         one tpscope verdict of a TP-N plan whose entries change NCCL's
#                        per-process settings (NCCL_PROTO=LL, NCCL_P2P_LEVEL=SYS), with
#                        TPSCOPE_SHARED_GPU=1: every run in fresh processes, one per rank on
#                        GPU 0. Every rank span of each run's trace must record (tpscope.nccl_env)
#                        exactly its entry's settings and none of another run's; NCCL's own
#                        logs (NCCL_DEBUG_FILE, one per process) are kept and quoted beside.
# CHECKS picks some of them (default: all five). A process still running after LIMIT seconds
# gets SIGQUIT, so its output ends with every goroutine's stack (where it hung).
# Results in $OUT (default out/gpu-shared-ranks): shared-ranks.txt (verdicts and the end of
# every process's output), logs.tar.gz (whole outputs). Needs $BIN/tpscope (see
# scripts/gpu-multi.sh for the build line).
set -u
set -o pipefail

N=${1:-2}
case "$N" in
  [2-8]) ;;
  *) echo "usage: $0 [N]   (N: 2..8 processes on GPU 0)" >&2; exit 2 ;;
esac
B=${BIN:-bin}
TPS="$B/tpscope"
OUT=${OUT:-out/gpu-shared-ranks}
MODEL=${MODEL:-tiny-mla-moe}
WATCHDOG=${WATCHDOG:-10s}
LIMIT=${LIMIT:-150}  # seconds per process
PORT=${PORT:-29610}
CHECKS=${CHECKS:-ok-eager ok-graph fault-eager fault-graph verdict-nccl}

if [ ! -x "$TPS" ]; then echo "! $TPS not found or not executable: build it first" >&2; exit 1; fi
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d) || exit 1
trap 'rm -rf "$W"' EXIT
REPORT="$OUT/shared-ranks.txt"
: > "$REPORT"
FAILS=0

# One host per process for NCCL, joined over loopback; NVLink multicast off on shared hosts.
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}

# launch NAME FAULT ARGS...: the N processes of one run; FAULT non-empty puts --fault-hang on
# rank N-1 and runs without a trace, else each rank traces to $W/NAME.rR.otlp.jsonl. Writes
# $W/NAME.rR.out, .rc and .secs per rank.
launch() {
  local name=$1 fault=$2; shift 2
  local pids=() r
  PORT=$((PORT + 2))
  for r in $(seq 0 $((N - 1))); do
    local extra=()
    if [ -z "$fault" ]; then
      extra=(--trace "file:$W/$name.r$r.otlp.jsonl")
    else
      extra=(--trace none)
      [ "$r" -eq $((N - 1)) ] && extra+=(--fault-hang "$((N - 1)):L01.attn.allreduce")
    fi
    (
      t0=$(date +%s.%N)
      RANK=$r WORLD_SIZE=$N LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT NCCL_HOSTID="tpscope-shared-$r" \
        GOTRACEBACK=all timeout --signal=QUIT --kill-after=10 "$LIMIT" "$TPS" run --backend cuda --model "$MODEL" --tp "$N" --local-ranks "$r" \
        --batch 1 --context 4096 --custom-ar off --steps 3 --warmup 1 --watchdog "$WATCHDOG" "$@" "${extra[@]}" \
        > "$W/$name.r$r.out" 2>&1
      echo $? > "$W/$name.r$r.rc"
      echo "$(date +%s.%N) $t0" | awk '{printf "%.1f\n", $1 - $2}' > "$W/$name.r$r.secs"
    ) &
    pids+=($!)
  done
  wait "${pids[@]}"
}

# verdict NAME PASS|FAIL WHY
verdict() {
  local r
  [ "$2" = FAIL ] && FAILS=$((FAILS + 1))
  {
    echo "$1: $2: $3"
    for r in $(seq 0 $((N - 1))); do
      echo "  rank $r: exit $(cat "$W/$1.r$r.rc"), $(cat "$W/$1.r$r.secs") s"
      sed 's/^/    /' "$W/$1.r$r.out" | tail -40
    done
  } | tee -a "$REPORT"
}

echo "== gpu-shared-ranks.sh N=$N model=$MODEL watchdog=$WATCHDOG $(date -u +%Y-%m-%dT%H:%M:%SZ)" | tee -a "$REPORT"
"$TPS" version | tee -a "$REPORT"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$REPORT"

has() { case " $CHECKS " in *" $1 "*) return 0 ;; esac; return 1; }

for mode in eager graph; do
  opt=()
  [ "$mode" = eager ] && opt=(--cuda-graphs=false)
  name="ok-$mode"
  has "$name" || continue
  launch "$name" "" "${opt[@]}"
  why="every rank exit 0, every collective executed"
  res=PASS
  for r in $(seq 0 $((N - 1))); do
    rc=$(cat "$W/$name.r$r.rc")
    if [ "$rc" != 0 ]; then res=FAIL; why="rank $r exit $rc"; break; fi
  done
  if [ $res = PASS ]; then
    # Count collective spans, executed and skipped, in the trace file(s).
    counts=$(cat "$W/$name".r*.otlp.jsonl 2>/dev/null | python3 -c '
import json, sys
ran = skipped = 0
for line in sys.stdin:
    for rs in json.loads(line).get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                a = {x["key"]: list(x["value"].values())[0] for x in s.get("attributes", [])}
                if a.get("tpscope.op.kind") == "collective":
                    if a.get("tpscope.skipped"):
                        skipped += 1
                    else:
                        ran += 1
print(ran, skipped)')
    set -- $counts
    why="every rank exit 0; collective spans: ${1:-0} executed, ${2:-0} skipped"
    if [ "${1:-0}" -eq 0 ] || [ "${2:-0}" -ne 0 ]; then res=FAIL; fi
  fi
  verdict "$name" $res "$why"
done

for mode in eager graph; do
  opt=()
  [ "$mode" = eager ] && opt=(--cuda-graphs=false)
  name="fault-$mode"
  has "$name" || continue
  launch "$name" fault "${opt[@]}"
  res=PASS
  why="every process exit 1: the stalled rank with the fault's error, the others with the watchdog's"
  for r in $(seq 0 $((N - 1))); do
    rc=$(cat "$W/$name.r$r.rc")
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then res=FAIL; why="rank $r still running after ${LIMIT}s: a hang"; break; fi
    if [ "$rc" != 1 ]; then res=FAIL; why="rank $r exit $rc, want 1"; break; fi
    if [ "$r" -lt $((N - 1)) ] && ! grep -q "watchdog" "$W/$name.r$r.out"; then res=FAIL; why="rank $r: the error does not name the watchdog"; break; fi
    if [ "$r" -eq $((N - 1)) ] && ! grep -q "injected fault" "$W/$name.r$r.out"; then res=FAIL; why="rank $r: no injected-fault error"; break; fi
  done
  verdict "$name" $res "$why"
done

if has verdict-nccl; then
  name=verdict-nccl
  # A box of this GPU for the prediction (the timings mean nothing here).
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
    *H200*) box=nvswitch:8xh200-sxm ;;
    *) box=nvswitch:8xh100-sxm ;;
  esac
  mkdir -p "$W/nccl"
  t0=$(date +%s)
  TPSCOPE_SHARED_GPU=1 NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$W/nccl/nccl.%h.%p.log" GOTRACEBACK=all timeout --signal=QUIT --kill-after=10 $((4 * LIMIT)) \
    "$TPS" verdict --backend cuda --model "$MODEL" --tp "$N" --batch 1 --context 4096 --custom-ar off --topo "$box" --gpus "$N" \
    --entries nccl-proto-ll,nccl-p2p-sys --steps 3 --warmup 1 -o "$W/verdict" > "$W/$name.out" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  # What each run's rank processes held (tpscope.nccl_env on every rank
  # span of its trace): the entry's own settings, none of another run's.
  env=$(python3 - "$W/verdict" "$N" <<'PY'
import json, os, sys
d, n = sys.argv[1], int(sys.argv[2])
want = {"baseline": set(), "nccl-proto-ll": {"NCCL_PROTO=LL"}, "nccl-p2p-sys": {"NCCL_P2P_LEVEL=SYS"}}
watch = {"NCCL_PROTO=LL", "NCCL_P2P_LEVEL=SYS"}
bad = []
for run, w in want.items():
    path = os.path.join(d, run + ".otlp.jsonl")
    seen, ranks = set(), 0
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        bad.append(f"{run}: {e}"); continue
    for line in lines:
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    a = {x["key"]: list(x["value"].values())[0] for x in s.get("attributes", [])}
                    if "tpscope.nccl_env" in a:
                        ranks += 1
                        got = set(a["tpscope.nccl_env"].split()) & watch
                        if got != w:
                            bad.append(f"{run}: a rank span held {sorted(got)}, want {sorted(w)}")
    print(f"{run}: {ranks} rank spans")
    if ranks == 0:
        bad.append(f"{run}: no rank span records its NCCL environment")
for b in bad:
    print("BAD " + b)
PY
)
  nlogs=$(ls "$W/nccl" 2>/dev/null | wc -l)
  ncclsaid=$(cat "$W"/nccl/*.log 2>/dev/null | grep -E "NCCL_PROTO|NCCL_P2P_LEVEL" | sed 's/^[^ ]* //' | sort | uniq -c | tr '\n' ';')
  res=PASS
  why="exit 0 in ${secs}s; $(echo "$env" | grep -v '^BAD' | tr '\n' ';') NCCL logs of $nlogs processes say: ${ncclsaid:-nothing about NCCL_PROTO/NCCL_P2P_LEVEL}"
  if [ "$rc" != 0 ]; then res=FAIL; why="verdict exit $rc after ${secs}s"
  elif echo "$env" | grep -q '^BAD'; then res=FAIL; why="$why $(echo "$env" | grep '^BAD' | tr '\n' ';')"
  fi
  [ -f "$W/verdict/verdict.md" ] && cp "$W/verdict/verdict.md" "$OUT/verdict-nccl.md"
  [ $res = FAIL ] && FAILS=$((FAILS + 1))
  { echo "$name: $res: $why"; grep -v "NCCL INFO" "$W/$name.out" | tail -40 | sed 's/^/    /'; } | tee -a "$REPORT"
  (cd "$W/nccl" 2>/dev/null && tar czf "$OUT/nccl-logs.tar.gz" *.log 2>/dev/null)
fi

(cd "$W" && ls *.out >/dev/null 2>&1 && tar czf "$OUT/logs.tar.gz" *.out)
echo "== done $(date -u +%Y-%m-%dT%H:%M:%SZ): $FAILS failed check(s)" | tee -a "$REPORT"
[ "$FAILS" -eq 0 ]
