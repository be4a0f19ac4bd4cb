package plan

import (
	"errors"
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestSpecTPOTQuantile: step 10 ms, 2 tokens per step with variance 1, a
// 256-token request: sd = sqrt(1 / (256 x 8)) = 0.0221, so the 90th
// percentile is (0.5 + 1.2816 x 0.0221) x 10 = 5.283 ms.
func TestSpecTPOTQuantile(t *testing.T) {
	if got := SpecTPOTQuantileMs(10000, 2, 1, 256, z90); !near(got, 5.2832, 1e-3) {
		t.Errorf("%v ms, want 5.283", got)
	}
}

// TestEnumerateChecksSpecOnce: a speculative method that cannot run (no
// draft token, a head for another model) is the sweep's error, a
// *model.PlanError naming the field, not a sweep priced without it.
func TestEnumerateChecksSpecOnce(t *testing.T) {
	head, err := model.ResolveDrafter("kimi-k2.5-eagle3-mla")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model string
		k     int
		field string
	}{{"kimi-k2.5", 0, "spec_tokens"}, {"glm-5-nvfp4", 3, "draft_model"}, {"kimi-k2.5", 3, ""}} {
		s := &Space{Arch: mustPreset(t, c.model), Options: seedOptions, Topologies: []*topology.Topology{mustTopo(t, "rtxpro6000-2s")},
			GPUCounts: []int{8}, Batches: []int{1}, Contexts: []int{4096}, SpecTokens: []int{c.k}}
		s.Build.Spec = model.Spec{Method: model.SpecEagle3, Draft: head.Ref, Drafter: head}
		_, _, err := s.Enumerate()
		var pe *model.PlanError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s k %d: %v, want a sweep", c.model, c.k, err)
		case c.field != "" && (!errors.As(err, &pe) || pe.Field != c.field):
			t.Errorf("%s k %d: %v, want a PlanError on %s", c.model, c.k, err, c.field)
		}
	}
}
