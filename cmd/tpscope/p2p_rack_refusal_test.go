package main

import (
	"testing"
)

// TestP2POffRackRefusal: with P2P off on an NVL72 rack's slice
// (nvswitch:8xgb200), a hop between GPUs of two Grace superchips has no
// route through host memory; the refusal checks the GPUs the plan (or
// --ranks) uses, and is a one-line usage error naming the flag. --tp 2
// --p2p-disable, both GPUs on one Grace, had been refused for the box's
// other pairs, as a plain error (exit 1) naming NCCL_P2P_DISABLE.
func TestP2POffRackRefusal(t *testing.T) {
	pred := []string{"predict", "--model", "tiny-mla-moe", "--topo", "nvswitch:8xgb200", "--context", "1024"}
	if code, _, stderr := runCLI(t, append(pred, "--tp", "2", "--p2p-disable")...); code != 0 {
		t.Errorf("--tp 2 --p2p-disable on nvswitch:8xgb200 (one Grace): exit %d, %q", code, stderr)
	}
	oneLineUsage(t, append(pred, "--tp", "4", "--p2p-disable"), "usage: --p2p-disable", "gpu0 and gpu2 of nvswitch:8xgb200 hang off CPUs no link joins")
	oneLineUsage(t, append(pred, "--tp", "4", "--p2p-level", "LOC"), "usage: --p2p-level LOC", "gpu0 and gpu2")
	coll := []string{"collective", "--topo", "nvswitch:8xgb200", "--sizes", "1M", "--p2p-disable"}
	if code, _, stderr := runCLI(t, append(coll, "--ranks", "2")...); code != 0 {
		t.Errorf("collective --ranks 2 --p2p-disable on nvswitch:8xgb200: exit %d, %q", code, stderr)
	}
	oneLineUsage(t, coll, "usage: --p2p-disable", "gpu0 and gpu2")
}
