package sim_test

import (
	"fmt"
	"math"
	"sort"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/perfdb"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// arRow is one measured all-reduce: message bytes and microseconds.
type arRow struct{ bytes, us float64 }

// collectiveModelOf is the collective model of box topo under NCCL's
// defaults.
func collectiveModelOf(t *testing.T, topo string) *sim.CollectiveModel {
	t.Helper()
	tp, err := topology.Resolve(topo, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.NewCollectiveModel(tp, ncclenv.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sampleSystemOrNil is the sample database's system name, nil without
// the sample.
func sampleSystemOrNil(t *testing.T, name string) *perfdb.System {
	t.Helper()
	db := sampleDBOrNil(t)
	if db == nil {
		return nil
	}
	sys, err := db.System(name)
	if err != nil {
		t.Fatal(err)
	}
	return sys
}

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
	m := collectiveModelOf(t, "nvswitch:8xb200")
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
	sys := sampleSystemOrNil(t, "b200_sxm")
	if sys == nil {
		return
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
		path := prof.AllReducePath(engprof.SM100, "10.0", n, true, true, engprof.ARMessage{Bytes: int64(b)})
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

// TestNCCLBlackwell: NCCL's collectives on datacenter Blackwell take
// ncclBlackwellStepUs more a ring or tree step than NCCL's own model
// (sim/collective.go). The anchor is vLLM's SM 10.3 pynccl row (PR
// #37756: 29 us at 16 KiB, 8 GPUs); held out:
//
//   - aiconfigurator's b200_sxm NCCL table (NCCL 2.29.2), every
//     all-reduce, all-gather and reduce-scatter row on 2-8 GPUs from 4 KiB
//     to 64 MiB;
//   - vLLM PR #24111's B200 pynccl rows (TP 4 / 6 / 8, 0.5-4 MB).
//
// Bounds are the measured errors (2026-12-06): the table's medians 5.6-19.4
// % per op and world size (ncclB200Bounds; 26-38 % before), its 8-GPU
// all-reduce median 9.6 %, worst +31 % (2 MiB: NCCL leaves LL there, the
// model does not), -42 to -47 % below 256 KiB before; PR #24111's rows
// -18.6 to +23.6 %. Hopper keeps NCCL's model: the h200_sxm table's 8-GPU
// all-reduce at 4 KiB (16.0 us) is within 10 % without a step term.
func TestNCCLBlackwell(t *testing.T) {
	const kib = 1 << 10
	group := func(n int) []int {
		g := make([]int, n)
		for i := range g {
			g[i] = i
		}
		return g
	}
	b := collectiveModelOf(t, "nvswitch:8xb200")
	c := b.Cost(model.AllReduce, group(8), 16*kib)
	if c.Algo != "Ring" || c.Proto != "LL" || math.Abs(c.TimeUs-29) > 0.5 {
		t.Errorf("16 KiB on 8 B200s: %.2f us (%s/%s), want the cited 29 by Ring/LL", c.TimeUs, c.Algo, c.Proto)
	}
	if h := collectiveModelOf(t, "nvswitch:8xh200-sxm").Cost(model.AllReduce, group(8), 4*kib); math.Abs(h.TimeUs/16.0-1) > 0.10 {
		t.Errorf("4 KiB on 8 H200s: %.1f us, the h200_sxm table 16.0", h.TimeUs)
	}
	for _, r := range []struct {
		n    int
		rows []arRow
		tol  float64
	}{
		{4, []arRow{{512 * kib, 17}, {1 << 20, 19}, {1536 * kib, 22}, {2 << 20, 26}, {3 << 20, 31}, {4 << 20, 37}}, 0.24},
		{6, []arRow{{512 * kib, 23}, {1 << 20, 25}, {1536 * kib, 32}, {2 << 20, 43}, {3 << 20, 47}, {4 << 20, 53}}, 0.24},
		{8, []arRow{{512 * kib, 28}, {1 << 20, 30}, {1536 * kib, 32}, {2 << 20, 34}, {3 << 20, 46}, {4 << 20, 54}}, 0.24},
	} {
		for _, row := range r.rows {
			got := b.Cost(model.AllReduce, group(r.n), int64(row.bytes)).TimeUs
			e := got/row.us - 1
			t.Logf("PR #24111 B200 pynccl %d GPUs %8.0f B: %5.1f us, measured %5.1f (%+5.1f %%)", r.n, row.bytes, got, row.us, 100*e)
			if math.Abs(e) > r.tol {
				t.Errorf("PR #24111 B200 pynccl, %d GPUs, %.0f B: %.1f us against %.1f (%+.1f %%, bound %.0f %%)", r.n, row.bytes, got, row.us, 100*e, 100*r.tol)
			}
		}
	}
	sys := sampleSystemOrNil(t, "b200_sxm")
	if sys == nil {
		return
	}
	vs := sys.Versions("comm", "nccl")
	if len(vs) == 0 {
		t.Fatal("b200_sxm: no NCCL tables")
	}
	tb, err := sys.NCCL(vs[len(vs)-1])
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]model.Collective{"all_reduce": model.AllReduce, "all_gather": model.AllGather, "reduce_scatter": model.ReduceScatter}
	errs := map[string][]float64{}
	for i := range tb.Us {
		op, ok := ops[tb.Op[i]]
		bytes := tb.MessageElems[i] * 2
		if !ok || (tb.Dtype[i] != "half" && tb.Dtype[i] != "bfloat16") || bytes < 4*kib || bytes > 64<<20 || tb.GPUs[i] < 2 || tb.GPUs[i] > 8 {
			continue
		}
		k := fmt.Sprintf("%s/%d", tb.Op[i], tb.GPUs[i])
		errs[k] = append(errs[k], b.Cost(op, group(int(tb.GPUs[i])), bytes).TimeUs/tb.Us[i]-1)
	}
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := errs[k]
		abs := make([]float64, len(e))
		worst := 0.0
		for i, x := range e {
			abs[i] = math.Abs(x)
			if math.Abs(x) > math.Abs(worst) {
				worst = x
			}
		}
		sort.Float64s(abs)
		med := abs[len(abs)/2]
		t.Logf("b200_sxm NCCL %-18s %2d rows: median |error| %5.1f %%, worst %+6.1f %%", k, len(e), 100*med, 100*worst)
		if bound, ok := ncclB200Bounds[k]; ok && (med > bound[0] || math.Abs(worst) > bound[1]) {
			t.Errorf("b200_sxm NCCL %s: median %.1f %% (bound %.0f), worst %+.1f %% (bound %.0f)", k, 100*med, 100*bound[0], 100*worst, 100*bound[1])
		}
	}
	if len(keys) == 0 {
		t.Fatal("no b200_sxm NCCL rows compared")
	}
}

// ncclB200Bounds: median and worst |error| per table op and world size,
// as measured (2026-12-06; before ncclBlackwellStepUs the medians were
// 26-38 % and the worst -46 to -55 %). The worst are the largest
// messages (32-64 MiB), where the model's LL128 and Simple bandwidths
// run over what NCCL reaches on these GPUs.
var ncclB200Bounds = map[string][2]float64{
	"all_gather/2": {0.20, 0.48}, "all_gather/4": {0.11, 0.44}, "all_gather/8": {0.08, 0.45},
	"all_reduce/2": {0.10, 0.41}, "all_reduce/4": {0.06, 0.40}, "all_reduce/8": {0.10, 0.31},
	"reduce_scatter/2": {0.17, 0.50}, "reduce_scatter/4": {0.09, 0.41}, "reduce_scatter/8": {0.06, 0.41},
}
