package main

import (
	"strings"
	"testing"
)

// TestCollectiveNCCLAlgoGrammar: --nccl-algo reads NCCL_ALGO as NCCL
// 2.24+ does. "CollNet", which NCCL refuses (it knows CollNetDirect and
// CollNetChain), had priced rows; it is refused in one line naming the
// flag. A per-collective list, which NCCL accepts and tpscope had
// refused, prices each op with its own clause: the all-reduce with Tree,
// the all-gather with Ring.
func TestCollectiveNCCLAlgoGrammar(t *testing.T) {
	oneLineUsage(t, []string{"collective", "--topo", "h200-nvswitch", "--sizes", "1M", "--nccl-algo", "CollNet,Ring"},
		"usage: --nccl-algo CollNet,Ring:", `unknown algorithm "CollNet"`, "CollNetDirect, CollNetChain")
	oneLineUsage(t, []string{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "8", "--nccl-algo", "allreduce:tree;ring"},
		"usage: --nccl-algo allreduce:tree;ring:", "every clause but the first needs one")
	for _, c := range []struct{ op, algo string }{{"allreduce", "Tree"}, {"allgather", "Ring"}} {
		for _, r := range collectiveRows(t, c.op, "--nccl-algo", "allreduce:tree;allgather:ring") {
			if f := strings.Split(r, ","); f[4] != c.algo {
				t.Errorf("--op %s under allreduce:tree;allgather:ring: row %q runs %s, want %s", c.op, r, f[4], c.algo)
			}
		}
	}
}

// collectiveRows are the CSV rows of the collective verb's --op op on
// h200-nvswitch from 64K to 64M under an NCCL flag and its value: one a
// size, 11.
func collectiveRows(t *testing.T, op, flag, value string) []string {
	t.Helper()
	code, out, stderr := runCLI(t, "collective", "--topo", "h200-nvswitch", "--op", op, "--sizes", "64K:64M", flag, value, "--output", "csv")
	if code != 0 {
		t.Fatalf("--op %s %s %s: exit %d, %q", op, flag, value, code, stderr)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")[1:]
	if len(rows) != 11 {
		t.Fatalf("--op %s %s %s: %d rows, want 11 (64K to 64M): %q", op, flag, value, len(rows), out)
	}
	return rows
}

// TestCollectiveNCCLAlgoCaveat: the collective verb says what predict
// says of an algorithm NCCL may run that the rows do not price. --op
// allgather --nccl-algo ^Ring on h200-nvswitch had printed Ring rows,
// where NCCL runs NVLS (the only all-gather it has left there), with no
// word; it now prints predict's caveat for the op. A PCIe box, which has
// no NVLS, says nothing.
func TestCollectiveNCCLAlgoCaveat(t *testing.T) {
	code, out, stderr := runCLI(t, "collective", "--topo", "h200-nvswitch", "--op", "allgather", "--sizes", "1M", "--nccl-algo", "^Ring")
	want := "caveat: --nccl-algo ^Ring: NVLS not modelled; NCCL runs any all-gather with NVLS, priced as Ring: read them as an upper bound\n"
	if code != 0 || !strings.Contains(out, "Ring") || stderr != want {
		t.Errorf("--op allgather --nccl-algo ^Ring on h200-nvswitch: exit %d, stderr %q; want %q", code, stderr, want)
	}
	code, _, stderr = runCLI(t, "collective", "--topo", "h200-nvswitch", "--op", "allreduce", "--sizes", "1M", "--nccl-algo", "Ring,NVLS")
	if want := "the all-reduces are priced with Ring alone, where NCCL may pick NVLS"; code != 0 || !strings.Contains(stderr, want) {
		t.Errorf("--op allreduce --nccl-algo Ring,NVLS on h200-nvswitch: exit %d, stderr %q; want it to say %q", code, stderr, want)
	}
	if code, _, stderr := runCLI(t, "collective", "--topo", "rtxpro6000-2s", "--op", "allreduce", "--sizes", "1M", "--nccl-algo", "Ring,NVLS"); code != 0 || strings.Contains(stderr, "NVLS") {
		t.Errorf("--nccl-algo Ring,NVLS on a PCIe box: exit %d, stderr %q; NCCL has no NVLS there", code, stderr)
	}
}
