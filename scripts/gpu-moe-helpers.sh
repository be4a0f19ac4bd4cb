#!/usr/bin/env bash
# Measures the bookkeeping kernels around a grouped-GEMM MoE layer at one
# token (scripts/gpu-moe-helpers.cu), one kernel node each in a CUDA graph,
# on the machine's first GPU. Writes moe-helpers.jsonl (one line per case)
# and the GPU's clocks into ${OUT:-.}.
set -euo pipefail
out=${OUT:-.}
nvcc -O3 -arch=sm_90a -o /tmp/gpu-moe-helpers scripts/gpu-moe-helpers.cu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv >"$out/moe-helpers-clocks.csv"
/tmp/gpu-moe-helpers | tee "$out/moe-helpers.jsonl"
/tmp/gpu-moe-helpers >"$out/moe-helpers-second.jsonl"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader >>"$out/moe-helpers-clocks.csv"
