package main

import (
	"strings"
	"testing"
)

// TestCollectiveNCCLProtoGrammar: --nccl-proto reads NCCL_PROTO as NCCL
// 2.24+ does (tuning.cc's parseList, NCCL_ALGO's grammar). A
// per-collective list, which NCCL accepts and tpscope had refused as an
// unknown protocol, prices each op with its own clause: under
// "Simple;allreduce:LL" the all-reduce runs LL and the all-gather Simple.
// " LL", which NCCL refuses (strcasecmp, no trimming) and tpscope had
// trimmed and priced, is refused in one line naming the flag. A clause
// that leaves the logits' all-gather no protocol is refused where the
// step runs it, naming --nccl-proto, as NCCL fails the call; a step that
// gathers nothing (TP 1, DP attention with an all-to-all dispatch) runs.
func TestCollectiveNCCLProtoGrammar(t *testing.T) {
	for _, c := range []struct{ op, proto string }{{"allreduce", "LL"}, {"allgather", "Simple"}} {
		for _, r := range collectiveRows(t, c.op, "--nccl-proto", "Simple;allreduce:LL") {
			if f := strings.Split(r, ","); f[5] != c.proto {
				t.Errorf("--op %s under Simple;allreduce:LL: row %q runs %s, want %s", c.op, r, f[5], c.proto)
			}
		}
	}
	oneLineUsage(t, []string{"collective", "--topo", "h200-nvswitch", "--sizes", "1M", "--nccl-proto", " LL"},
		"usage: --nccl-proto  LL:", `unknown protocol " LL"`)
	oneLineUsage(t, []string{"collective", "--op", "allgather", "--sizes", "1K", "--nccl-proto", "LL;allgather:^LL,LL128,Simple"},
		"--nccl-proto LL;allgather:^LL,LL128,Simple", "no protocol for --op allgather", "ncclInvalidUsage")
	for _, verb := range [][]string{{"predict"}, {"advise", "--no-sweep"}, {"plan", "--tp", "8", "--batch", "1", "--context", "4096"}, {"simulate", "--qps", "1", "--requests", "5", "--isl", "128", "--osl", "8"}} {
		oneLineUsage(t, append(append([]string(nil), verb...), "--nccl-proto", "Simple;allgather:,"), "--nccl-proto Simple;allgather:,", "no protocol", "head.logits_allgather", "ncclInvalidUsage")
	}
	oneLineUsage(t, []string{"predict", "--nccl-proto", "allreduce:,"}, "--nccl-proto allreduce:,", "leaves allreduce no protocol")
	dp := []string{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "1", "--dp", "8", "--ep", "--batch", "8", "--nccl-proto", "Simple;allgather:,", "--moe-dispatch", "alltoall"}
	for _, args := range [][]string{dp, {"collective", "--op", "allreduce", "--sizes", "1K", "--nccl-proto", "Simple;allgather:,"}} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
}

// TestNVLSWithoutSimpleRefused: NCCL runs NVLS with Simple alone
// (tuning.cc), so --nccl-algo allgather:nvls --nccl-proto allgather:LL
// leaves the all-gather no algorithm/protocol pair on an NVLink SHARP box
// and NCCL fails it; predict had priced the step's logits all-gather as
// Ring LL under a caveat, and collective had printed Ring LL rows. Both
// refuse it in one line naming both flags; with Simple kept for the
// all-gather the step runs.
func TestNVLSWithoutSimpleRefused(t *testing.T) {
	oneLineUsage(t, []string{"predict", "--topo", "h200-nvswitch", "--model", "deepseek-v3", "--tp", "8", "--nccl-algo", "allgather:nvls", "--nccl-proto", "allgather:LL"},
		"--nccl-algo allgather:nvls with --nccl-proto allgather:LL", "no algorithm/protocol pair for an all-gather", "head.logits_allgather", "Simple only", "ncclInvalidUsage")
	oneLineUsage(t, []string{"collective", "--topo", "h200-nvswitch", "--op", "allgather", "--sizes", "1K", "--nccl-algo", "allgather:nvls", "--nccl-proto", "allgather:LL"},
		"--nccl-algo allgather:nvls and --nccl-proto allgather:LL:", "no algorithm/protocol pair for --op allgather", "Simple only", "ncclInvalidUsage")
	args := []string{"predict", "--topo", "h200-nvswitch", "--model", "deepseek-v3", "--tp", "8", "--nccl-algo", "allgather:nvls", "--nccl-proto", "allgather:LL,Simple"}
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Errorf("%v: exit %d, %s", args, code, stderr)
	}
}
