package sim_test

import (
	"math"
	"sort"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/internal/testfix"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/perfdb"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// arRow is one measured all-reduce: message bytes and microseconds.
type arRow struct{ bytes, us float64 }

// TestCustomARBlackwell: vLLM's custom all-reduce kernels on datacenter
// Blackwell (sim/collective.go customARBlackwell). The model takes one
// point of vLLM's SM 10.3 table (PR #37756, 16 KiB); the table's other
// rows to 1 MiB, where vLLM runs these kernels on such GPUs, and two
// held-out sources of B200 measurements are compared:
//
//   - vLLM PR #24111's TP 4 / 6 / 8 tables, ca_1stage and ca_2stage at
//     0.5-1 MiB (16 KiB a token x 32 and 64 tokens). Their GPU is B200
//     as the PR's own dispatch limits read them: custom all-reduce wins
//     to 2 MB on 4 GPUs and to 0.5 MB on 8, which is SM 10.0's
//     CUSTOM_ALL_REDUCE_MAX_SIZES (4: 2 MiB, 8: 1 MiB), not SM 9.0's
//     (4: 32 MiB, 8: 256 KiB).
//   - aiconfigurator's b200_sxm custom all-reduce table (vLLM 0.24, CUDA
//     graph), every row below 1 MiB on 2, 4 and 8 GPUs where vLLM's
//     dispatch (the vllm@0.24 profile) runs the custom kernels; which
//     kernel (one- or two-stage) is the profile's rule.
//
// Bounds are the measured errors (2026-12-06):
//
//   - SM 10.3 rows: one-stage -11.6 to -0.5 %, two-stage -13.1 to -4.8 %.
//   - aiconfigurator's B200 table: 36 rows, median |error| 6.0 %, worst
//     one-stage -19.8 % (2 GPUs, 512 KiB), two-stage -24.5 % (8 GPUs, 256
//     KiB: 25.8 us against 19.5 priced). At the decode messages of an
//     8-GPU step (14-115 KiB) the one-stage kernel is -16 to -13 %.
//   - PR #24111's B200 rows: one-stage -39.4 to -13.1 %, two-stage -20.0
//     to +32.9 %. The one-stage kernel's time grows faster with bytes on
//     those B200s than the links price (6 GPUs, 1 MiB: 21 us against 12.7),
//     and the two-stage kernel's fixed time differs with the world size
//     (15-17 us on 6 GPUs, 25-26 on 8) in ways the model does not carry.
//
// Before, the model priced these kernels at 4.5-7 us on B200 (the table's
// 8-GPU rows -40 % one-stage, -75 % two-stage).
func TestCustomARBlackwell(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	tp, err := topology.Resolve("nvswitch:8xb200", 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.NewCollectiveModel(tp, ncclenv.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	price := func(n int, b float64, two bool) float64 {
		g := make([]int, n)
		for i := range g {
			g[i] = i
		}
		c, ok := m.CustomAllReduce(g, int64(b), two)
		if !ok {
			t.Fatalf("no custom all-reduce on %d B200s", n)
		}
		return c.TimeUs
	}
	check := func(name string, n int, two bool, rows []arRow, tol float64) {
		t.Helper()
		for _, r := range rows {
			got := price(n, r.bytes, two)
			e := got/r.us - 1
			t.Logf("%-28s %d GPUs %8.0f B: %5.1f us, measured %5.1f (%+5.1f %%)", name, n, r.bytes, got, r.us, 100*e)
			if math.Abs(e) > tol {
				t.Errorf("%s, %d GPUs, %.0f B: %.1f us against %.1f measured (%+.1f %%, bound %.0f %%)", name, n, r.bytes, got, r.us, 100*e, 100*tol)
			}
		}
	}
	// The anchor: the model reproduces the cited 16-KiB row exactly.
	if one, two := price(8, 16*kib, false), price(8, 16*kib, true); math.Abs(one-7) > 1e-9 || math.Abs(two-19) > 1e-9 {
		t.Errorf("16 KiB on 8 B200s: %.3f / %.3f us, want the cited 7 / 19", one, two)
	}
	sm103 := []arRow{{32 * kib, 8}, {64 * kib, 8}, {128 * kib, 8}, {256 * kib, 9}, {512 * kib, 11}, {mib, 17}}
	check("PR #37756 SM 10.3 ca_1stage", 8, false, sm103, 0.12)
	check("PR #37756 SM 10.3 ca_2stage", 8, true, []arRow{{32 * kib, 20}, {64 * kib, 21}, {128 * kib, 22}, {256 * kib, 22}, {512 * kib, 23}, {mib, 23}}, 0.14)
	for _, c := range []struct {
		n        int
		one, two []arRow
	}{
		{4, []arRow{{512 * kib, 10}, {mib, 15}}, []arRow{{512 * kib, 17}, {mib, 18}}},
		{6, []arRow{{512 * kib, 13}, {mib, 21}}, []arRow{{512 * kib, 15}, {mib, 17}}},
		{8, []arRow{{512 * kib, 13}, {mib, 20}}, []arRow{{512 * kib, 25}, {mib, 26}}},
	} {
		check("PR #24111 B200 ca_1stage", c.n, false, c.one, 0.40)
		check("PR #24111 B200 ca_2stage", c.n, true, c.two, 0.33)
	}

	// aiconfigurator's B200 table, by vLLM's dispatch.
	p := testfix.SamplePerfDB(t)
	if p == "" {
		return
	}
	db, err := perfdb.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := db.System("b200_sxm")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := sys.CustomAllReduce("vllm", "0.24.0")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := engprof.ParseRef("vllm@0.24")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := engprof.Lookup(ref)
	if err != nil {
		t.Fatal(err)
	}
	var errs []float64
	worst := map[bool]float64{}
	for i := range tb.Us {
		mode := "vllm_graph"
		if tb.Backend != nil {
			mode = tb.Backend[i]
		}
		n, b := int(tb.GPUs[i]), float64(tb.MessageElems[i]*2)
		if mode != "vllm_graph" || tb.Dtype[i] != "bfloat16" || b >= mib {
			continue
		}
		path := prof.AllReducePath(engprof.SM100, n, true, true, int64(b))
		if path != engprof.ARCustomOneShot && path != engprof.ARCustomTwoShot {
			continue
		}
		two := path == engprof.ARCustomTwoShot
		e := price(n, b, two)/tb.Us[i] - 1
		errs = append(errs, math.Abs(e))
		worst[two] = math.Max(worst[two], math.Abs(e))
		t.Logf("b200_sxm table %-16s %d GPUs %8.0f B: %5.1f us, table %5.1f (%+5.1f %%)", path, n, b, price(n, b, two), tb.Us[i], 100*e)
	}
	if len(errs) < 30 {
		t.Fatalf("%d table rows compared, want the 2-, 4- and 8-GPU rows below 1 MiB", len(errs))
	}
	sort.Float64s(errs)
	med := errs[len(errs)/2]
	t.Logf("b200_sxm table: %d rows, median |error| %.1f %%, worst one-stage %.1f %%, two-stage %.1f %%", len(errs), 100*med, 100*worst[false], 100*worst[true])
	if med > 0.07 || worst[false] > 0.20 || worst[true] > 0.25 {
		t.Errorf("b200_sxm table: median %.1f %% (bound 7), worst one-stage %.1f %% (20), two-stage %.1f %% (25)", 100*med, 100*worst[false], 100*worst[true])
	}
}
