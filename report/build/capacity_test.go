package build

import (
	"testing"

	"github.com/tpscope/tpscope/serving"
)

// TestServingScatterNoEmptySeries: when every run misses the SLO the
// capacity chart has no "runs within the SLO" entry (the PNG left it out;
// the HTML listed it with no point), and every series drawn has points.
func TestServingScatterNoEmptySeries(t *testing.T) {
	f := &serving.Frontier{
		Group: "ISL 1024 / OSL 256", SLO: serving.SLO{TPOTMs: 50},
		Points: []serving.FrontierPoint{
			{Run: 0, Load: "qps 0.5", TokensPerSPerGPU: 16.7, TokensPerSPerUser: 15.5, SLO: "missed"},
			{Run: 1, Load: "qps 1", TokensPerSPerGPU: 32.4, TokensPerSPerUser: 10.2, SLO: "missed"},
		},
		Front: []int{0, 1}, Chosen: -1,
	}
	sc := ServingScatter(f)
	var names []string
	for _, s := range sc.Series {
		names = append(names, s.Name)
		if len(s.Points) == 0 {
			t.Errorf("series %q has no point", s.Name)
		}
	}
	if len(names) != 2 || names[0] != "runs missing the SLO, too short to judge or overloaded" || names[1] != "Pareto front" {
		t.Errorf("series %q, want the missed runs and the front", names)
	}
}
