package sim

import (
	"fmt"
	"math"
	"sync"
	"syscall"
	"testing"

	"github.com/tpscope/tpscope/model"
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
	pts := []PlanPoint{
		{Plan: "A", TokensPerSPerGPU: 10, TokensPerSPerRequest: 100},
		{Plan: "B", TokensPerSPerGPU: 50, TokensPerSPerRequest: 60},
		{Plan: "C", TokensPerSPerGPU: 40, TokensPerSPerRequest: 50},
		{Plan: "D", TokensPerSPerGPU: 200, TokensPerSPerRequest: 10},
		{Plan: "E", TokensPerSPerGPU: 10, TokensPerSPerRequest: 100},
	}
	got := paretoFront(pts, []int{0, 1, 2, 3, 4})
	var names []string
	for _, i := range got {
		names = append(names, pts[i].Plan)
	}
	if fmt.Sprint(names) != "[A B D]" {
		t.Errorf("front %v, want [A B D]", names)
	}
}

func planSpace(t testing.TB) *PlanSpace {
	return &PlanSpace{Arch: mustPreset(t, "kimi-k2.5-nvfp4"), Options: seedOptions,
		Topologies: []*topology.Topology{mustTopo(t, "rtxpro6000-2s")}, GPUCounts: []int{4, 8},
		Plans: nil, Batches: []int{1, 64}, Contexts: []int{4096}, KVDtypes: []model.Dtype{model.BF16, model.FP8}}
}

// TestPlanSweep checks that configurations that do not fit are kept with
// their shortfall, capacity follows the KV bytes per token, and the SLO
// filters.
func TestPlanSweep(t *testing.T) {
	s := planSpace(t)
	res, err := RunPlan(s, nil)
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
	find := func(gpus int, plan string, batch int, kv string) *PlanPoint {
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
		if len(res.Pareto) == 0 || res.Best < 0 {
			t.Fatal("empty front")
		}
		for _, i := range res.Pareto {
			if !res.Points[i].Fits {
				t.Errorf("front point %+v does not fit", res.Points[i])
			}
		}
	})
	t.Run("slo", func(t *testing.T) {
		// No decode step of a 61-layer model is under 1 us per token.
		s2 := *s
		s2.MaxMsPerToken = 0.001
		r2, err := RunPlan(&s2, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Best != -1 || len(r2.Pareto) != 0 || r2.MissSLO == 0 {
			t.Errorf("SLO 1 us/token: best %d, front %d, missing %d", r2.Best, len(r2.Pareto), r2.MissSLO)
		}
	})
}

func TestPlanSpaceErrors(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	box := mustTopo(t, "rtxpro6000-2s")
	cases := []struct {
		name string
		s    PlanSpace
	}{
		{"no-arch", PlanSpace{Topologies: []*topology.Topology{box}}},
		{"batch-0", PlanSpace{Arch: kimi, Topologies: []*topology.Topology{box}, Batches: []int{0}}},
		{"context-0", PlanSpace{Arch: kimi, Topologies: []*topology.Topology{box}, Contexts: []int{0}}},
		{"gpus-too-many", PlanSpace{Arch: kimi, Topologies: []*topology.Topology{box}, GPUCounts: []int{16}}},
		{"bad-plan", PlanSpace{Arch: kimi, Topologies: []*topology.Topology{box}, GPUCounts: []int{8}, Plans: []model.Plan{{TP: 8, DP: 1, DCP: 3}}}},
		{"negative-slo", PlanSpace{Arch: kimi, Topologies: []*topology.Topology{box}, MaxMsPerToken: -1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.s.Configs(); err == nil {
				t.Error("want an error")
			}
		})
	}
}

// runPlanWorkers evaluates cfgs on workers goroutines, each with its own
// Evaluator over a contiguous range (as tpscope plan does).
func runPlanWorkers(cfgs []PlanConfig, slo float64, workers int) []PlanPoint {
	out := make([]PlanPoint, len(cfgs))
	var wg sync.WaitGroup
	chunk := (len(cfgs) + workers - 1) / workers
	for lo := 0; lo < len(cfgs); lo += chunk {
		hi := min(lo+chunk, len(cfgs))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ev Evaluator
			EvaluatePlan(&ev, cfgs[lo:hi], out[lo:hi], slo, nil)
		}()
	}
	wg.Wait()
	return out
}

// TestPlanWorkersDeterministic: splitting the sweep does not change it.
func TestPlanWorkersDeterministic(t *testing.T) {
	s := planSpace(t)
	cfgs, err := s.Configs()
	if err != nil {
		t.Fatal(err)
	}
	one := runPlanWorkers(cfgs, 0, 1)
	two := runPlanWorkers(cfgs, 0, 2)
	for i := range one {
		if one[i] != two[i] {
			t.Fatalf("point %d differs: %+v vs %+v", i, one[i], two[i])
		}
	}
}

// BenchmarkPlan measures tpscope plan's default sweep shape for
// Kimi-K2.5-NVFP4 over the three preset boxes at 4 and 8 GPUs, every valid
// plan, 10 batches x 6 contexts x 2 KV dtypes, and reports
// configurations per second. The target (issue 4) is 10,000 per second on
// 2 cores.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func BenchmarkPlan(b *testing.B) {
	var topos []*topology.Topology
	for _, n := range []string{"rtxpro6000-2s", "rtxpro6000-switch", "h200-nvswitch"} {
		topos = append(topos, mustTopo(b, n))
	}
	s := &PlanSpace{Arch: mustPreset(b, "kimi-k2.5-nvfp4"), Options: seedOptions, Topologies: topos, GPUCounts: []int{4, 8}}
	cfgs, err := s.Configs()
	if err != nil {
		b.Fatal(err)
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d/configs=%d", workers, len(cfgs)), func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuSeconds()
			for i := 0; i < b.N; i++ {
				pts := runPlanWorkers(cfgs, 0, workers)
				SummarizePlan(pts, 0)
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
