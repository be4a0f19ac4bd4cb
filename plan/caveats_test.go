package plan

import (
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
)

// TestPlanCaveats: a sweep's caveats are the capacity caveat, the pool
// priced without vLLM 0.24's CUDA-graph estimate (none given), then the
// best point's own (the seed box, Kimi NVFP4: NVFP4 experts and
// uncalibrated NCCL); without a best point only the capacity caveat.
func TestPlanCaveats(t *testing.T) {
	res, err := Run(planSpace(t), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Best < 0 {
		t.Fatal("no best point")
	}
	want := []string{"KV capacity and max concurrency", "KV pool priced without the engine's CUDA-graph memory estimate", "NVFP4 experts on SM12x", "NCCL collectives priced"}
	if len(res.Caveats) != len(want) {
		t.Fatalf("caveats %q, want ones starting %q", res.Caveats, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(res.Caveats[i], w) {
			t.Errorf("caveat %d = %q, want it to start %q", i, res.Caveats[i], w)
		}
	}
	if c := Caveats(nil, &Result{Best: -1}); len(c) != 1 || !strings.HasPrefix(c[0], want[0]) {
		t.Errorf("no best point: caveats %q, want the capacity caveat alone", c)
	}
}

// TestPlanCapacityCaveatByEngine: the capacity caveat's evidence is
// vLLM's pools (public RTX PRO 6000 pools, the seed's report); a sweep
// under another engine keeps the upper-bound caveat without citing them.
func TestPlanCapacityCaveatByEngine(t *testing.T) {
	for _, c := range []struct {
		engine string
		vllm   bool
	}{{"", true}, {"vllm@0.24", true}, {"trtllm@1.3", false}, {"sglang@0.5", false}} {
		var cfg Config
		if c.engine != "" {
			r, err := engprof.ParseRef(c.engine)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Scenario.Options.Engine = r
		}
		got := Caveats([]Config{cfg}, &Result{Best: -1})
		if len(got) != 1 || !strings.Contains(got[0], "read them as upper bounds") {
			t.Fatalf("%q: caveats %q, want the capacity caveat alone", c.engine, got)
		}
		if cites := strings.Contains(got[0], "public vLLM pools"); cites != c.vllm {
			t.Errorf("%q: caveat %q cites vLLM's pools %v, want %v", c.engine, got[0], cites, c.vllm)
		}
	}
}
