package plan

import (
	"github.com/tpscope/tpscope/serving"
	"slices"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// TestPlanRunningLimit: a sweep under a running limit given
// (--max-num-seqs) prices no step the engine never runs and reports the
// concurrency the engine allows. DeepSeek-V3 on an H200 box, FP8 KV,
// context 4096, the default batches 1..512:
//
//   - vLLM, --max-num-seqs 32: each DP group's scheduler runs at most 32,
//     so TP 8 (one scheduler) sweeps 1..32 and leaves 64, 128, 256 and 512
//     out; TP 2 x DP 4 (four schedulers, 128 at once) sweeps 1..128 and
//     leaves 256 and 512 out. The KV cache holds hundreds of sequences of
//     4097 tokens on either, so the maximum concurrency is the limit:
//     32 and 4 x 32 = 128, said to be the running limit's; both are swept
//     batches, so no full-load point is added.
//   - SGLang, --max-num-seqs 102 (its --max-running-requests, the
//     engine's): TP 8 runs 102 at once; under DP 4 each rank's scheduler
//     runs 102 // 4 = 25, 100 at once. 128..512 are left out on both, and
//     the full load is 102 and 100 sequences (not among the batches: one
//     point each, at capacity).
func TestPlanRunningLimit(t *testing.T) {
	a := mustPreset(t, "deepseek-v3")
	box := mustTopo(t, "h200-nvswitch")
	plans := []model.Plan{{TP: 8}, {TP: 2, DP: 4, EP: true}}
	for _, c := range []struct {
		engine     string
		limit      int
		swept      map[string][]int // plan -> swept batches evaluated
		leftOut    map[string][]int // plan -> batches left out
		conc       map[string]int   // plan -> max concurrency
		atCapacity map[string]int   // plan -> the full-load batch added (0: none)
	}{
		{"vllm", 32,
			map[string][]int{"tp8": {1, 2, 4, 8, 16, 32}, "tp2-dp4-ep": {1, 2, 4, 8, 16, 32, 64, 128}},
			map[string][]int{"tp8": {64, 128, 256, 512}, "tp2-dp4-ep": {256, 512}},
			map[string]int{"tp8": 32, "tp2-dp4-ep": 128}, map[string]int{}},
		{"sglang", 102,
			map[string][]int{"tp8": {1, 2, 4, 8, 16, 32, 64}, "tp2-dp4-ep": {1, 2, 4, 8, 16, 32, 64}},
			map[string][]int{"tp8": {128, 256, 512}, "tp2-dp4-ep": {128, 256, 512}},
			map[string]int{"tp8": 102, "tp2-dp4-ep": 100}, map[string]int{"tp8": 102, "tp2-dp4-ep": 100}},
	} {
		t.Run(c.engine, func(t *testing.T) {
			ref, err := engprof.ParseRef(c.engine)
			if err != nil {
				t.Fatal(err)
			}
			s := &Space{Arch: a, Topologies: []*topology.Topology{box}, Plans: plans, Contexts: []int{4096}, KVDtypes: []model.Dtype{model.FP8},
				Options: sim.Options{CUDAGraphs: true, Engine: ref, MaxNumSeqs: c.limit}}
			res, err := Run(s, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			swept, full := sweptAndFull(t, res)
			for _, p := range res.Points {
				if p.MaxConcurrency != c.conc[p.Plan] || p.ConcurrencyBound != BoundRunningLimit {
					t.Errorf("%s batch %d: max concurrency %d (%s), want %d (%s)", p.Plan, p.Batch, p.MaxConcurrency, p.ConcurrencyBound, c.conc[p.Plan], BoundRunningLimit)
				}
				// The KV cache holds more: the limit is the bound.
				dp := map[string]int64{"tp8": 1, "tp2-dp4-ep": 4}[p.Plan]
				if kv := p.KVCapacityTokens / 4097 * dp; kv <= int64(c.conc[p.Plan]) {
					t.Errorf("%s: the KV cache holds %d sequences, not more than the limit's %d: the case tests nothing", p.Plan, kv, c.conc[p.Plan])
				}
			}
			for pl, want := range c.swept {
				if got := swept[pl]; !slices.Equal(got, want) {
					t.Errorf("%s: swept batches %v, want %v", pl, got, want)
				}
			}
			left := map[string][]int{}
			for _, l := range res.Coverage.LeftOut {
				if l.Reason != LeftOutRunningLimit || l.Detail == "" {
					t.Errorf("left out %+v: want only batches above the running limit, with predict's reason", l)
					continue
				}
				left[l.Plan] = append(left[l.Plan], l.Batch)
			}
			for pl, want := range c.leftOut {
				if got := left[pl]; !slices.Equal(got, want) {
					t.Errorf("%s: left out %v, want %v", pl, got, want)
				}
			}
			if len(full) != len(c.atCapacity) {
				t.Errorf("full-load points %v, want %v", full, c.atCapacity)
			}
			for pl, want := range c.atCapacity {
				if full[pl] != want {
					t.Errorf("%s: full load at batch %d, want %d", pl, full[pl], want)
				}
			}
			for _, r := range res.Capacity {
				if r.MaxConcurrency != c.conc[r.Plan] || r.ConcurrencyBound != BoundRunningLimit || r.Full < 0 || res.Points[r.Full].Batch != c.conc[r.Plan] {
					t.Errorf("capacity row %s: %d (%s), full %d, want %d (%s) with its full-load point", r.Plan, r.MaxConcurrency, r.ConcurrencyBound, r.Full, c.conc[r.Plan], BoundRunningLimit)
				}
			}
		})
	}
}

// TestPlanRunningLimitAboveKV: a running limit above what the KV cache
// holds leaves the KV cache the bound: DeepSeek-V3 at TP 8 on an H200 box
// with BF16 KV at context 131072 holds a few sequences, far below
// --max-num-seqs 1024, so nothing of the default batches up to 512 is
// left out for the limit and the concurrency is the KV cache's.
func TestPlanRunningLimitAboveKV(t *testing.T) {
	ref, err := engprof.ParseRef("vllm")
	if err != nil {
		t.Fatal(err)
	}
	s := &Space{Arch: mustPreset(t, "deepseek-v3"), Topologies: []*topology.Topology{mustTopo(t, "h200-nvswitch")}, Plans: []model.Plan{{TP: 8}},
		Contexts: []int{131072}, KVDtypes: []model.Dtype{model.BF16}, Options: sim.Options{CUDAGraphs: true, Engine: ref, MaxNumSeqs: 1024}}
	res, err := Run(s, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Coverage.LeftOut) != 0 {
		t.Errorf("left out %+v, want nothing", res.Coverage.LeftOut)
	}
	for _, r := range res.Capacity {
		p := &res.Points[r.Full]
		if want := int(p.KVCapacityTokens / 131073); r.MaxConcurrency != want || r.ConcurrencyBound != BoundKVCache || want >= 1024 {
			t.Errorf("capacity %d (%s), want the KV cache's %d (%s) below the limit", r.MaxConcurrency, r.ConcurrencyBound, want, BoundKVCache)
		}
	}
}

// TestPlanEngineDefaultRunningLimit: with no --max-num-seqs plan bounds
// the sweep by the running limit the engine starts with, as the server
// launched without the flag runs, and says so. Tiny-MLA-MoE (its KV
// cache holds far more than any limit here) at context 1024, FP8 KV
// (BF16 on the A100, where vLLM has no FP8 MLA cache):
//
//   - vLLM's max_num_seqs default (EngineArgs.get_batch_defaults, the
//     profile's batch_defaults): 256 a DP group on an L40S (48 GB, below
//     70 GiB) and on an A100 SXM (80 GB, at least 70 GiB but named
//     A100), 1024 on an H200 SXM (141 GB). At 256, TP 8 (one scheduler)
//     leaves 512 out and runs 256 at once, a swept batch (no full-load
//     point); TP 4 x DP 2 runs 512 (256 a group), 512 swept. At 1024
//     nothing is left out and the full load is 1024 and 2048, beside the
//     swept batches.
//   - SGLang's max_running_requests default, each DP rank's from its own
//     pool: min(pool / 2, min(max(pool / 163840 x 512, 2048), 4096))
//     (engine's max_running facts; 163840 the model's
//     max_position_embeddings): a pool of millions of tokens gives the
//     4096 cap, so 4096 at TP 8 and 8192 at DP 2, both full loads.
//
// The bound is said in JSON with the engine's default, and simulate's
// serving run of the same scenario runs the same limit (a scheduler's x
// DP). predict still prices a batch above vLLM's default (with a caveat).
func TestPlanEngineDefaultRunningLimit(t *testing.T) {
	a := mustPreset(t, "tiny-mla-moe")
	if a.MaxPositionEmbeddings != 163840 {
		t.Fatalf("tiny-mla-moe max_position_embeddings %d, want 163840 (the SGLang case's rule)", a.MaxPositionEmbeddings)
	}
	plans := []model.Plan{{TP: 8}, {TP: 4, DP: 2, EP: true}}
	all := []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	for _, c := range []struct {
		engine, box string
		kv          model.Dtype
		perGroup    int    // the default a scheduler, derived above
		from        string // concurrency_limit_from
		leftOut     map[string][]int
		full        map[string]int // the full-load batch added (0: a swept one)
	}{
		{"vllm", "pcie-2s:8xl40s", model.FP8, 256, "vllm@0.24's default max_num_seqs 256",
			map[string][]int{"tp8": {512}}, map[string]int{}},
		{"vllm", "nvswitch:8xa100-sxm", model.BF16, 256, "vllm@0.24's default max_num_seqs 256",
			map[string][]int{"tp8": {512}}, map[string]int{}},
		{"vllm", "nvswitch:8xh200-sxm", model.FP8, 1024, "vllm@0.24's default max_num_seqs 1024",
			map[string][]int{}, map[string]int{"tp8": 1024, "tp4-dp2-ep": 2048}},
		{"sglang", "pcie-2s:8xl40s", model.FP8, 4096, "sglang@0.5's default max_running_requests 4096",
			map[string][]int{}, map[string]int{"tp8": 4096, "tp4-dp2-ep": 8192}},
	} {
		t.Run(c.engine+"/"+c.box, func(t *testing.T) {
			ref, err := engprof.ParseRef(c.engine)
			if err != nil {
				t.Fatal(err)
			}
			box, err := topology.Resolve(c.box, 0)
			if err != nil {
				t.Fatal(err)
			}
			s := &Space{Arch: a, Topologies: []*topology.Topology{box}, Plans: plans, Contexts: []int{1024}, KVDtypes: []model.Dtype{c.kv},
				Options: sim.Options{CUDAGraphs: true, Engine: ref}}
			res, err := Run(s, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			dp := map[string]int{"tp8": 1, "tp4-dp2-ep": 2}
			swept, full := sweptAndFull(t, res)
			for _, p := range res.Points {
				want := c.perGroup * dp[p.Plan]
				if p.MaxConcurrency != want || p.ConcurrencyBound != BoundEngineDefault || p.ConcurrencyLimitFrom != c.from {
					t.Errorf("%s batch %d: max concurrency %d (%s, %s), want %d (%s, %s)", p.Plan, p.Batch, p.MaxConcurrency, p.ConcurrencyBound, p.ConcurrencyLimitFrom, want, BoundEngineDefault, c.from)
				}
				if kv := p.KVCapacityTokens / 1025 * int64(dp[p.Plan]); kv <= int64(want) {
					t.Fatalf("%s: the KV cache holds %d sequences, not more than the limit's %d: the case tests nothing", p.Plan, kv, want)
				}
				if c.engine == "sglang" && (p.KVCapacityTokens/2 <= 4096 || p.KVCapacityTokens/163840*512 <= 4096) {
					t.Fatalf("%s: pool of %d tokens: below SGLang's 4096 cap, the case's derivation does not hold", p.Plan, p.KVCapacityTokens)
				}
			}
			for _, pl := range []string{"tp8", "tp4-dp2-ep"} {
				var want []int
				for _, b := range all {
					if !slices.Contains(c.leftOut[pl], b) {
						want = append(want, b)
					}
				}
				if !slices.Equal(swept[pl], want) || full[pl] != c.full[pl] {
					t.Errorf("%s: swept %v, full load %d; want %v, %d", pl, swept[pl], full[pl], want, c.full[pl])
				}
			}
			var left []int
			for _, l := range res.Coverage.LeftOut {
				if l.Reason != LeftOutRunningLimit || !l.EngineDefault || !strings.Contains(l.Detail, c.from) {
					t.Errorf("left out %+v: want the engine's default limit (%s)", l, c.from)
				}
				left = append(left, l.Batch)
			}
			if !slices.Equal(left, c.leftOut["tp8"]) {
				t.Errorf("left out batches %v, want %v", left, c.leftOut["tp8"])
			}
			for _, cr := range res.Capacity {
				if cr.ConcurrencyBound != BoundEngineDefault || cr.ConcurrencyLimitFrom != c.from {
					t.Errorf("capacity %s: bound %q (%s), want %q (%s)", cr.Plan, cr.ConcurrencyBound, cr.ConcurrencyLimitFrom, BoundEngineDefault, c.from)
				}
			}
			// simulate's serving run of the scenario runs the same limit.
			for _, p := range plans {
				sc := sim.Scenario{Arch: a, Topo: box, Plan: p, Workload: model.Workload{KVDtype: c.kv}, Options: s.Options}
				sv, err := serving.New(serving.Deployment{Scenario: sc})
				if err != nil {
					t.Fatal(err)
				}
				if got := sv.Engine().MaxNumSeqs; got != c.perGroup {
					t.Errorf("%s: simulate runs %d a scheduler, plan %d", p.Normalized(), got, c.perGroup)
				}
			}
			// predict prices a batch above vLLM's default, with a caveat.
			if c.engine == "vllm" && c.perGroup == 256 {
				sc := sim.Scenario{Arch: a, Topo: box, Plan: model.Plan{TP: 8}, Workload: model.Workload{Phase: model.Decode, Batch: 512, Context: 1024, KVDtype: c.kv}, Options: s.Options}
				if err := sc.CheckSchedulerLimits(); err != nil {
					t.Errorf("predict refuses batch 512 under the default: %v", err)
				}
			}
		})
	}
}

// sweptAndFull splits a sweep's points by plan into the batches swept and
// the batch priced at full load (AtCapacity), failing on a point that
// errs.
func sweptAndFull(t *testing.T, res *Result) (swept map[string][]int, full map[string]int) {
	t.Helper()
	swept, full = map[string][]int{}, map[string]int{}
	for _, p := range res.Points {
		if p.Error != "" {
			t.Fatalf("%s batch %d: %s", p.Plan, p.Batch, p.Error)
		}
		if p.AtCapacity {
			full[p.Plan] = p.Batch
		} else {
			swept[p.Plan] = append(swept[p.Plan], p.Batch)
		}
	}
	return swept, full
}
