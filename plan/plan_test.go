package plan

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// TestPlansFor: Kimi-K2.5 on 8 GPUs. By hand from the config: 64 heads,
// dense intermediate 18,432, moe_intermediate 2,048, one shared expert,
// 384 experts: TP 8 divides all; EP over 8 ranks gives 48 experts each;
// DCP 2, 4, 8 divide TP 8; DP 2, 4, 8 divide 8 (TP 4, 2, 1, all dividing
// the heads; 384 experts over 8 ranks); DP 3, 5, 6, 7 do not divide 8.
func TestPlansFor(t *testing.T) {
	cases := []struct {
		model string
		n     int
		want  []string
	}{
		{"kimi-k2.5-nvfp4", 8, []string{"tp8", "tp8-ep", "tp8-dcp2", "tp8-dcp4", "tp8-dcp8", "tp4-dp2-ep", "tp2-dp4-ep", "tp1-dp8-ep"}},
		// 2 GPUs: TP 2, EP, DCP 2, DP 2 x TP 1.
		{"kimi-k2.5-nvfp4", 2, []string{"tp2", "tp2-ep", "tp2-dcp2", "tp1-dp2-ep"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/gpus=%d", c.model, c.n), func(t *testing.T) {
			var got []string
			for _, p := range PlansFor(mustPreset(t, c.model), c.n) {
				got = append(got, p.String())
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("plans %v, want %v", got, c.want)
			}
		})
	}
}

func TestParetoFront(t *testing.T) {
	// (per-GPU, per-request): C is dominated by B; E duplicates A.
	pts := []Point{
		{Plan: "A", TokensPerSPerGPU: 10, TokensPerSPerRequest: 100},
		{Plan: "B", TokensPerSPerGPU: 50, TokensPerSPerRequest: 60},
		{Plan: "C", TokensPerSPerGPU: 40, TokensPerSPerRequest: 50},
		{Plan: "D", TokensPerSPerGPU: 200, TokensPerSPerRequest: 10},
		{Plan: "E", TokensPerSPerGPU: 10, TokensPerSPerRequest: 100},
	}
	got := ParetoFront(pts, []int{0, 1, 2, 3, 4})
	var names []string
	for _, i := range got {
		names = append(names, pts[i].Plan)
	}
	if fmt.Sprint(names) != "[A B D]" {
		t.Errorf("front %v, want [A B D]", names)
	}
}

// TestSummarizeCounts: the counts are of the swept configurations; the
// points added at full load are counted apart, whatever they give. By
// hand: of the four swept points one fails, one does not fit, one misses
// the 50 ms SLO (80 ms) and one meets it (20 ms); the three at full load
// (one missing the SLO, one not fitting) add to FullLoad only.
func TestSummarizeCounts(t *testing.T) {
	pts := []Point{
		{Plan: "a", Error: "boom"},
		{Plan: "b", Fits: false},
		{Plan: "c", Fits: true, MsPerToken: 80, SLO: SLOMissed},
		{Plan: "d", Fits: true, MsPerToken: 20, SLO: SLOMet, TokensPerSPerGPU: 5},
		{Plan: "d", Fits: true, MsPerToken: 90, SLO: SLOMissed, AtCapacity: true},
		{Plan: "d", Fits: false, AtCapacity: true},
		{Plan: "c", Fits: true, MsPerToken: 30, SLO: SLOMet, TokensPerSPerGPU: 50, AtCapacity: true},
	}
	r := Summarize(pts, 50)
	got := [5]int{r.Evaluated, r.Errors, r.NotFitting, r.MissSLO, r.FullLoad}
	if want := [5]int{4, 1, 1, 1, 3}; got != want {
		t.Errorf("evaluated, errors, not fitting, missing the SLO, full load = %v, want %v", got, want)
	}
	if r.Best != 3 {
		t.Errorf("best %d, want 3 (the one swept point within the SLO)", r.Best)
	}
}

func planSpace(t testing.TB) *Space {
	return &Space{Arch: mustPreset(t, "kimi-k2.5-nvfp4"), Options: seedOptions,
		Topologies: []*topology.Topology{mustTopo(t, "rtxpro6000-2s")}, GPUCounts: []int{4, 8},
		Plans: nil, Batches: []int{1, 64}, Contexts: []int{4096}, KVDtypes: []model.Dtype{model.BF16, model.FP8}}
}

// TestPlanSweep checks that configurations that do not fit are kept with
// their shortfall, capacity follows the KV bytes per token, and the SLO
// filters.
func TestPlanSweep(t *testing.T) {
	s := planSpace(t)
	res, err := Run(s, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 8 GPUs: 8 plans; 4 GPUs: tp4, tp4-ep, tp4-dcp2, tp4-dcp4, tp2-dp2-ep,
	// tp1-dp4-ep = 6; x 2 batches x 1 context x 2 KV dtypes.
	swept := 0
	for i := range res.Points {
		if !res.Points[i].AtCapacity {
			swept++
		}
	}
	if want := (8 + 6) * 2 * 2; swept != want {
		t.Fatalf("evaluated %d swept points, want %d", swept, want)
	}
	t.Run("at-capacity", func(t *testing.T) {
		// The point added at the maximum concurrency fits exactly: its
		// sequences' KV tokens are within the capacity, one more
		// sequence per DP group would not be.
		n := 0
		for _, p := range res.Points {
			if !p.AtCapacity {
				continue
			}
			n++
			if p.Batch != p.MaxConcurrency || !p.Fits {
				t.Errorf("%s %s %s: batch %d, max concurrency %d, fits %v", p.Topology, p.Plan, p.KVDtype, p.Batch, p.MaxConcurrency, p.Fits)
			}
		}
		if n == 0 {
			t.Error("no point at capacity")
		}
	})
	find := func(gpus int, plan string, batch int, kv string) *Point {
		for i := range res.Points {
			p := &res.Points[i]
			if p.GPUs == gpus && p.Plan == plan && p.Batch == batch && p.KVDtype == kv {
				return p
			}
		}
		t.Fatalf("no point %d GPUs %s batch %d %s", gpus, plan, batch, kv)
		return nil
	}
	t.Run("not-fitting-kept", func(t *testing.T) {
		// NVFP4 Kimi-K2.5 is about 1.03T parameters x 0.5625 B = ~580 GB
		// of weights; on 4 GPUs ~145 GB each against 92.4 GB usable: tens
		// of GB short.
		p := find(4, "tp4", 1, "bf16")
		if p.Fits || p.ShortfallGB < 40 {
			t.Errorf("tp4 on 4 GPUs: fits %v, shortfall %.1f GB; want no fit, > 40 GB short", p.Fits, p.ShortfallGB)
		}
		if res.NotFitting == 0 {
			t.Error("no configuration reported as not fitting")
		}
	})
	t.Run("capacity", func(t *testing.T) {
		bf, f8 := find(8, "tp8", 1, "bf16"), find(8, "tp8", 1, "fp8")
		// fp8 halves the bytes per token (70,272 -> 35,136).
		if r := float64(f8.KVCapacityTokens) / float64(bf.KVCapacityTokens); math.Abs(r-2) > 1e-4 {
			t.Errorf("KV capacity fp8/bf16 %.5f, want 2", r)
		}
		// Sequences of 4096 + 1 tokens.
		if want := int(bf.KVCapacityTokens / 4097); bf.MaxConcurrency != want {
			t.Errorf("max concurrency %d, want capacity / 4097 = %d", bf.MaxConcurrency, want)
		}
		dp := find(8, "tp2-dp4-ep", 1, "bf16")
		if dp.Fits && dp.MaxConcurrency != int(dp.KVCapacityTokens/4097)*4 {
			t.Errorf("DP 4 max concurrency %d, want 4 groups x %d", dp.MaxConcurrency, dp.KVCapacityTokens/4097)
		}
	})
	t.Run("per-gpu", func(t *testing.T) {
		p := find(8, "tp8", 64, "fp8")
		if math.Abs(p.TokensPerSPerGPU*8-p.TokensPerS) > 1e-9*p.TokensPerS || math.Abs(p.TokensPerSPerRequest*64-p.TokensPerS) > 1e-9*p.TokensPerS {
			t.Errorf("per GPU %.2f, per request %.2f, aggregate %.2f", p.TokensPerSPerGPU, p.TokensPerSPerRequest, p.TokensPerS)
		}
		if math.Abs(p.MsPerToken-p.StepUs/1e3) > 1e-9 {
			t.Errorf("ms/token %.4f, step %.1f us", p.MsPerToken, p.StepUs)
		}
	})
	t.Run("pareto-fits", func(t *testing.T) {
		if len(res.Fronts) == 0 || res.Best < 0 {
			t.Fatal("empty front")
		}
		for _, f := range res.Fronts {
			for _, i := range f.Points {
				if !res.Points[i].Fits {
					t.Errorf("front point %+v does not fit", res.Points[i])
				}
			}
		}
	})
	t.Run("slo", func(t *testing.T) {
		// No decode step of a 61-layer model is under 1 us per token.
		s2 := *s
		s2.MaxMsPerToken = 0.001
		r2, err := Run(&s2, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Best != -1 || len(r2.Fronts) != 0 || len(r2.BestByContext) != 0 || r2.MissSLO == 0 {
			t.Errorf("SLO 1 us/token: best %d, fronts %d, missing %d", r2.Best, len(r2.Fronts), r2.MissSLO)
		}
	})
}

func TestPlanSpaceErrors(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	box := mustTopo(t, "rtxpro6000-2s")
	cases := []struct {
		name string
		s    Space
	}{
		{"no-arch", Space{Topologies: []*topology.Topology{box}}},
		{"batch-0", Space{Arch: kimi, Topologies: []*topology.Topology{box}, Batches: []int{0}}},
		{"context-0", Space{Arch: kimi, Topologies: []*topology.Topology{box}, Contexts: []int{0}}},
		{"gpus-too-many", Space{Arch: kimi, Topologies: []*topology.Topology{box}, GPUCounts: []int{16}}},
		{"bad-plan", Space{Arch: kimi, Topologies: []*topology.Topology{box}, GPUCounts: []int{8}, Plans: []model.Plan{{TP: 8, DP: 1, DCP: 3}}}},
		{"negative-slo", Space{Arch: kimi, Topologies: []*topology.Topology{box}, MaxMsPerToken: -1}},
		// tp8-ep runs on 8 GPUs; an EP-off list beside it asks for
		// the opposite, so neither may silently win.
		{"plans-and-lists", Space{Arch: kimi, Topologies: []*topology.Topology{box}, GPUCounts: []int{8},
			Plans: []model.Plan{{TP: 8, EP: true}}, Lists: Lists{EP: []bool{false}}}},
		// tp8 and tp8-dcp1 are one plan: swept once, the repeat would
		// pass unsaid; swept twice, counted twice.
		{"plan-twice", Space{Arch: kimi, Topologies: []*topology.Topology{box}, GPUCounts: []int{8},
			Plans: []model.Plan{{TP: 8}, {TP: 4, DP: 2, EP: true}, {TP: 8, DP: 1, DCP: 1}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.s.Configs(); err == nil {
				t.Error("want an error")
			}
		})
	}
}

// TestPlanWorkersDeterministic: splitting the sweep does not change it.
func TestPlanWorkersDeterministic(t *testing.T) {
	s := planSpace(t)
	cfgs, err := s.Configs()
	if err != nil {
		t.Fatal(err)
	}
	one := Evaluate(cfgs, 0, 1, nil)
	for _, workers := range []int{2, 3} {
		other := Evaluate(cfgs, 0, workers, nil)
		for i := range one {
			if one[i] != other[i] {
				t.Fatalf("%d workers: point %d differs: %+v vs %+v", workers, i, one[i], other[i])
			}
		}
	}
}

// cpuSeconds is the CPU time of the process so far (user + system).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// BenchmarkPlan measures tpscope plan's default sweep shape for
// Kimi-K2.5-NVFP4 over the three preset boxes at 4 and 8 GPUs, every valid
// plan, 10 batches x 6 contexts x 2 KV dtypes, on 1 and 2 workers
// (Evaluate), and reports configurations per second of wall time and per
// second of the process's CPU time. The targets (issue 29): 50,000 per
// second on 2 cores, 2 workers at least 1.7x one.
func BenchmarkPlan(b *testing.B) {
	var topos []*topology.Topology
	for _, n := range []string{"rtxpro6000-2s", "rtxpro6000-switch", "h200-nvswitch"} {
		topos = append(topos, mustTopo(b, n))
	}
	s := &Space{Arch: mustPreset(b, "kimi-k2.5-nvfp4"), Options: seedOptions, Topologies: topos, GPUCounts: []int{4, 8}}
	cfgs, err := s.Configs()
	if err != nil {
		b.Fatal(err)
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d/configs=%d", workers, len(cfgs)), func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				pts := Evaluate(cfgs, 0, workers, nil)
				Summarize(pts, 0)
			}
			b.ReportMetric(float64(len(cfgs)*b.N)/b.Elapsed().Seconds(), "configs/s")
			// CPU time of the process, so a number taken on a busy machine
			// still says what one core does.
			if cpu := cpuSeconds() - cpu0; cpu > 0 {
				b.ReportMetric(float64(len(cfgs)*b.N)/cpu, "configs/cpu-s")
			}
		})
	}
}

// TestPlanEnumerateLeftOut: combinations of the lists that can never run
// are left out with their reason, the rest run, and when nothing is left
// the error is a *SpaceError. By hand for Kimi-K2.5 (64 heads, 384
// experts, no MTP layer) on rtxpro6000-2s (8 GPUs; default counts 2, 4,
// 8): TP 8 runs only on 8 GPUs (DP 1, EP off or on); DP 2 with TP 8 needs
// 16; TP 2 on 8 GPUs is DP 4, which needs EP. A DCP list not given
// takes 1 and each power of two dividing TP: with TP 8 (dividing the 64
// heads, moe_intermediate 2,048 and the shared expert's 2,048; 384
// experts over 8 ranks) that is DCP 1, 2, 4, 8, each with EP off and on.
func TestPlanEnumerateLeftOut(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	tp8 := []string{"8:tp8", "8:tp8-ep", "8:tp8-dcp2", "8:tp8-ep-dcp2", "8:tp8-dcp4", "8:tp8-ep-dcp4", "8:tp8-dcp8", "8:tp8-ep-dcp8"}
	box := mustTopo(t, "rtxpro6000-2s")
	type lo struct {
		reason     LeftOutReason
		gpus, tp   int
		dp         int
		plan       string
		specTokens int
	}
	for _, tc := range []struct {
		name     string
		s        Space
		combos   int
		leftOut  []lo
		plans    []string // plans run, in order, with their GPU count
		runSpecs []int
		fails    bool
	}{
		{name: "tp 8 on 3 GPUs", s: Space{GPUCounts: []int{3}, Lists: Lists{TP: []int{8}}},
			combos: 1, leftOut: []lo{{reason: LeftOutPlanGPUs, gpus: 3, tp: 8}}, fails: true},
		{name: "tp 8 on 4 and 8 GPUs", s: Space{GPUCounts: []int{4, 8}, Lists: Lists{TP: []int{8}}},
			combos: 2, leftOut: []lo{{reason: LeftOutPlanGPUs, gpus: 4, tp: 8}}, plans: tp8},
		{name: "tp 8, dp 1 or 2, default counts", s: Space{Lists: Lists{TP: []int{8}, DP: []int{1, 2}}},
			combos: 2, leftOut: []lo{{reason: LeftOutPlanGPUs, tp: 8, dp: 2}}, plans: tp8},
		{name: "tp 8, dcp 1 listed", s: Space{GPUCounts: []int{8}, Lists: Lists{TP: []int{8}, DCP: []int{1}}},
			combos: 1, plans: []string{"8:tp8", "8:tp8-ep"}},
		// EP off: TP 1, 2 and 4 on 8 GPUs are DP 8, 4, 2, which need EP;
		// TP 8 keeps its DCP degrees, as in PlansFor.
		{name: "ep off, dcp free", s: Space{GPUCounts: []int{8}, Lists: Lists{EP: []bool{false}}},
			combos: 1, plans: []string{"8:tp8", "8:tp8-dcp2", "8:tp8-dcp4", "8:tp8-dcp8"}},
		// EP on: every TP dividing 8 with DP 8 / TP and the DCP degrees
		// dividing that TP (384 experts over the 8 ranks each time).
		{name: "ep on, dcp free", s: Space{GPUCounts: []int{8}, Lists: Lists{EP: []bool{true}}},
			combos: 1, plans: []string{"8:tp1-dp8-ep", "8:tp2-dp4-ep", "8:tp2-dp4-ep-dcp2", "8:tp4-dp2-ep", "8:tp4-dp2-ep-dcp2", "8:tp4-dp2-ep-dcp4",
				"8:tp8-ep", "8:tp8-ep-dcp2", "8:tp8-ep-dcp4", "8:tp8-ep-dcp8"}},
		{name: "16 GPUs on an 8-GPU box", s: Space{GPUCounts: []int{8, 16}, Plans: []model.Plan{{TP: 8}}},
			combos: 2, leftOut: []lo{{reason: LeftOutBoxGPUs, gpus: 16, plan: "tp8"}}, plans: []string{"8:tp8"}},
		{name: "explicit plans on other counts", s: Space{GPUCounts: []int{4, 8}, Plans: []model.Plan{{TP: 8}, {TP: 4}}},
			combos: 4, leftOut: []lo{{reason: LeftOutPlanGPUs, gpus: 4, plan: "tp8"}, {reason: LeftOutPlanGPUs, gpus: 8, plan: "tp4"}},
			plans: []string{"4:tp4", "8:tp8"}},
		{name: "tp 2 without ep on 8 GPUs", s: Space{GPUCounts: []int{8}, Lists: Lists{TP: []int{2}, EP: []bool{false}}},
			combos: 1, leftOut: []lo{{reason: LeftOutPlanModel, gpus: 8, tp: 2}}, fails: true},
		// 3 does not divide Kimi's 64 heads: the model's fault on every
		// count, before TP x DP meets none of 2, 4 and 8.
		{name: "tp 3 beside tp 8", s: Space{Lists: Lists{TP: []int{8, 3}}},
			combos: 2, leftOut: []lo{{reason: LeftOutPlanModel, tp: 3}}, plans: tp8},
		{name: "mtp on a model without MTP", s: Space{GPUCounts: []int{8}, Plans: []model.Plan{{TP: 8}}, SpecTokens: []int{0, 1}},
			combos: 1, leftOut: []lo{{reason: LeftOutNoMTP, specTokens: 1}}, plans: []string{"8:tp8"}, runSpecs: []int{0}},
		{name: "only mtp", s: Space{GPUCounts: []int{8}, Plans: []model.Plan{{TP: 8}}, SpecTokens: []int{2}},
			combos: 1, leftOut: []lo{{reason: LeftOutNoMTP, specTokens: 2}}, fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.Arch, s.Topologies, s.Batches, s.Contexts, s.KVDtypes = kimi, []*topology.Topology{box}, []int{1}, []int{4096}, []model.Dtype{model.BF16}
			cfgs, cov, err := s.Enumerate()
			var se *SpaceError
			if tc.fails != (err != nil) || (err != nil && !errors.As(err, &se)) {
				t.Fatalf("error %v (%T), want a *PlanSpaceError: %v", err, err, tc.fails)
			}
			if cov.Combinations != tc.combos {
				t.Errorf("%d combinations, want %d", cov.Combinations, tc.combos)
			}
			var got []lo
			for _, l := range cov.LeftOut {
				got = append(got, lo{l.Reason, l.GPUs, l.TP, l.DP, l.Plan, l.SpecTokens})
				if l.Detail == "" {
					t.Errorf("left out %+v without a detail", l)
				}
			}
			if !slices.Equal(got, tc.leftOut) {
				t.Errorf("left out %+v, want %+v", got, tc.leftOut)
			}
			var plans []string
			specs := map[int]bool{}
			for _, c := range cfgs {
				specs[c.Scenario.Workload.SpecTokens] = true
				if c.AtCapacity {
					continue
				}
				p := fmt.Sprintf("%d:%s", c.Scenario.Topo.NumGPUs(), c.Scenario.Plan.Normalized())
				if !slices.Contains(plans, p) {
					plans = append(plans, p)
				}
			}
			if !slices.Equal(plans, tc.plans) {
				t.Errorf("plans run %v, want %v", plans, tc.plans)
			}
			if tc.runSpecs != nil && (len(specs) != len(tc.runSpecs) || !specs[tc.runSpecs[0]]) {
				t.Errorf("MTP tokens run %v, want %v", specs, tc.runSpecs)
			}
		})
	}
}

// TestPlanPicksWithinLists: the best point, the front and each capacity
// row's best batch are swept points, so every pick is a batch of the
// list given; the point at capacity (batch = max concurrency, here about
// 100 sequences of 4097 tokens for TP 8 in bf16: 207,317 tokens / 4097)
// is evaluated and reported, never picked.
func TestPlanPicksWithinLists(t *testing.T) {
	s := &Space{Arch: mustPreset(t, "kimi-k2.5-nvfp4"), Options: seedOptions, Topologies: []*topology.Topology{mustTopo(t, "rtxpro6000-2s")},
		GPUCounts: []int{8}, Plans: []model.Plan{{TP: 8}, {TP: 8, EP: true}}, Batches: []int{1, 8}, Contexts: []int{4096}, KVDtypes: []model.Dtype{model.BF16}}
	res, err := Run(s, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	atCap := 0
	for _, p := range res.Points {
		if p.AtCapacity && p.Fits && p.Batch > 8 {
			atCap++
		}
	}
	if atCap == 0 {
		t.Fatal("no fitting point at capacity above the listed batches: the test needs one")
	}
	listed := func(i int) bool {
		p := &res.Points[i]
		return !p.AtCapacity && (p.Batch == 1 || p.Batch == 8) && p.Context == 4096
	}
	if res.Best < 0 || !listed(res.Best) {
		t.Errorf("best %d: %+v, want a point of batch 1 or 8", res.Best, res.Points[max(res.Best, 0)])
	}
	for _, f := range res.Fronts {
		for _, i := range f.Points {
			if !listed(i) {
				t.Errorf("front point %+v is not of the lists", res.Points[i])
			}
		}
	}
	for _, c := range res.Capacity {
		if c.Best >= 0 && !listed(c.Best) {
			t.Errorf("capacity row %s %s: best batch %d, not of the lists", c.Plan, c.KVDtype, res.Points[c.Best].Batch)
		}
		if c.Full < 0 || !res.Points[c.Full].AtCapacity {
			t.Errorf("capacity row %s %s: no point at full load", c.Plan, c.KVDtype)
		}
	}
}

// TestPlanSLOVerdict: without an SLO no point is said to meet or miss
// one; with 100 ms/token, a TP 8 step of batch 1 (about 16 ms, one token
// per step) meets it.
func TestPlanSLOVerdict(t *testing.T) {
	for _, tc := range []struct {
		slo  float64
		want SLOVerdict
	}{{0, NoSLO}, {100, SLOMet}, {0.001, SLOMissed}} {
		s := &Space{Arch: mustPreset(t, "kimi-k2.5-nvfp4"), Options: seedOptions, Topologies: []*topology.Topology{mustTopo(t, "rtxpro6000-2s")},
			GPUCounts: []int{8}, Plans: []model.Plan{{TP: 8}}, Batches: []int{1}, Contexts: []int{4096}, KVDtypes: []model.Dtype{model.BF16}, MaxMsPerToken: tc.slo}
		res, err := Run(s, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Points {
			if !p.AtCapacity && p.SLO != tc.want {
				t.Errorf("SLO %v ms/token: batch %d at %.2f ms/token: %q, want %q", tc.slo, p.Batch, p.MsPerToken, p.SLO, tc.want)
			}
		}
		if tc.want == NoSLO && res.MissSLO != 0 {
			t.Errorf("no SLO: %d points miss it", res.MissSLO)
		}
	}
}

// TestPlanFullLoadUnderEngineKVPool: the box at full load is the
// concurrency the engine's own KV pool holds, the capacity predict states
// for the scenario (SGLang sizes its pool by mem_fraction_static less the
// weights, not by vLLM's gpu_memory_utilization less weights and
// activations). The full-load point was laid at vLLM's concurrency
// (300 sequences of DeepSeek-V3 at 4K on eight B200s) where SGLang's pool
// holds 276: it did not fit, and the capacity row had no full column.
func TestPlanFullLoadUnderEngineKVPool(t *testing.T) {
	box, err := topology.Resolve("nvswitch:8xb200", 0)
	if err != nil {
		t.Fatal(err)
	}
	opts := sim.Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "sglang"}}
	s := &Space{Arch: mustPreset(t, "deepseek-v3"), Topologies: []*topology.Topology{box}, GPUCounts: []int{8},
		Lists: Lists{TP: []int{8}, EP: []bool{false}, DCP: []int{1}}, Batches: []int{1}, Contexts: []int{4096},
		KVDtypes: []model.Dtype{model.BF16}, Options: opts}
	res, err := Run(s, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := sim.Scenario{Arch: s.Arch, Plan: model.Plan{TP: 8}, Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16},
		Options: opts, Topo: box}
	p, err := sc.NewPredictor()
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.PredictScenario(sc)
	if err != nil {
		t.Fatal(err)
	}
	want := int(pr.Memory.KVCapacityTokens / (4096 + 1))
	if len(res.Capacity) != 1 {
		t.Fatalf("%d capacity rows, want 1", len(res.Capacity))
	}
	row := res.Capacity[0]
	if row.MaxConcurrency != want || row.Full < 0 {
		t.Fatalf("capacity row: max concurrency %d, full point %d; want %d (predict's KV capacity %d tokens / 4097) and a full point",
			row.MaxConcurrency, row.Full, want, pr.Memory.KVCapacityTokens)
	}
	for _, pt := range res.Points {
		if pt.AtCapacity && (pt.Batch != want || !pt.Fits) {
			t.Errorf("full-load point: batch %d, fits %v; want batch %d, fitting", pt.Batch, pt.Fits, want)
		}
	}
}

// TestPlanLeavesOutWhatTheModelCannotBuild: GLM-5 on an H200 box runs its
// DSA attention sparse, and tpscope builds no DCP step of sparse DSA
// (model.Validate, the line predict refuses --dcp 4 with). Under an
// engine whose profile does not itself refuse DCP there (the executor),
// a sweep of DCP 1 and 4 leaves each DCP 4 configuration out with that
// reason, before any is evaluated, and runs DCP 1 alone; a sweep of DCP 4
// only is the builder's error, the *model.PlanError naming the dcp field,
// not a sweep of invalid points that "do not fit".
func TestPlanLeavesOutWhatTheModelCannotBuild(t *testing.T) {
	glm := mustPreset(t, "glm-5")
	box := mustTopo(t, "h200-nvswitch")
	space := func(dcp ...int) Space {
		return Space{Arch: glm, ImplyDenseDSA: true, Build: model.BuildOptions{DenseDSA: false}, Topologies: []*topology.Topology{box},
			GPUCounts: []int{8}, Lists: Lists{TP: []int{8}, DCP: dcp, EP: []bool{false}},
			Batches: []int{1}, Contexts: []int{4096}, KVDtypes: []model.Dtype{model.FP8},
			Options: sim.Options{CUDAGraphs: true, Engine: engprof.ExecutorRef}}
	}
	s := space(1, 4)
	cfgs, cov, err := s.Enumerate()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfgs {
		if d := c.Scenario.Plan.Normalized().DCP; d != 1 {
			t.Errorf("configuration %s of DCP %d enumerated", c.Scenario.Plan.Normalized(), d)
		}
	}
	if len(cfgs) == 0 {
		t.Error("no DCP 1 configuration enumerated")
	}
	var built []LeftOut
	for _, l := range cov.LeftOut {
		if l.Reason == LeftOutBuild {
			built = append(built, l)
		}
	}
	if len(built) != 1 || built[0].Plan != "tp8-dcp4" || !strings.Contains(built[0].Detail, `"dcp" = 4`) || !strings.Contains(built[0].Detail, "DSA sparse attention") {
		t.Errorf("left out by the builder %+v, want tp8-dcp4 once, its detail naming dcp 4 and DSA sparse attention", built)
	}
	for _, p := range Evaluate(cfgs, 0, 1, nil) {
		if p.Error != "" {
			t.Errorf("%s: evaluated invalid: %s", p.Plan, p.Error)
		}
	}

	s = space(4)
	_, _, err = s.Enumerate()
	var pe *model.PlanError
	if !errors.As(err, &pe) || pe.Field != "dcp" || pe.Value != "4" {
		t.Errorf("DCP 4 only: error %v (%T), want the builder's *model.PlanError on dcp 4", err, err)
	}
}

// TestSummarizeFrontsPerContextAndBox: the fronts are one per (context,
// box), as the charts and the fronts' CSV draw them, and the best is
// picked within each context. By hand: at context 4096 box a x8 has P
// (per GPU 100, per request 10) and Q (20, 50), neither dominating the
// other; box b x4 has R (90, 12), which P would dominate were the boxes
// pooled. At context 32768 box a x8 has S (30, 40) and T (25, 30), T
// dominated by S; S is dominated by Q in a front over all contexts. So:
// fronts (4096, a x8) [Q P], (4096, b x4) [R], (32768, a x8) [S]; the
// best of 4096 is P, of 32768 S; the best over all P.
func TestSummarizeFrontsPerContextAndBox(t *testing.T) {
	pt := func(name, topo string, gpus, ctx int, perGPU, perReq float64) Point {
		return Point{Plan: name, Topology: topo, GPUs: gpus, Context: ctx, Fits: true, TokensPerSPerGPU: perGPU, TokensPerSPerRequest: perReq}
	}
	pts := []Point{
		pt("S", "a", 8, 32768, 30, 40),
		pt("P", "a", 8, 4096, 100, 10),
		pt("R", "b", 4, 4096, 90, 12),
		pt("T", "a", 8, 32768, 25, 30),
		pt("Q", "a", 8, 4096, 20, 50),
	}
	r := Summarize(pts, 0)
	var got []string
	for _, f := range r.Fronts {
		var names []string
		for _, i := range f.Points {
			names = append(names, pts[i].Plan)
		}
		got = append(got, fmt.Sprintf("%d %s %v", f.Context, f.Box(), names))
	}
	want := []string{"4096 a x8 [Q P]", "4096 b x4 [R]", "32768 a x8 [S]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("fronts %q, want %q", got, want)
	}
	var best []string
	for _, i := range r.BestByContext {
		best = append(best, pts[i].Plan)
	}
	if fmt.Sprint(best) != "[P S]" || pts[r.Best].Plan != "P" {
		t.Errorf("best by context %v, best %s; want [P S], P", best, pts[r.Best].Plan)
	}
}
