package build

import (
	"strings"
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

// TestCapacityLineCounts: the capacity line names one of a thing in the
// singular ("1 copy", "1 box", "1 instance"), where it said "1 copies"
// and "1 boxes", and the plural for more.
func TestCapacityLineCounts(t *testing.T) {
	check := &serving.Result{QPS: 1}
	one := CapacityLine(&serving.Capacity{TargetQPS: 1, PerCopyQPS: 12.6, Copies: 1, GPUsPerCopy: 6, GPUs: 6, BoxGPUs: 8, InstanceGPUs: 6, InstancesPerBox: 1, Boxes: 1, Check: check})
	for _, want := range []string{": 1 copy of the deployment (", "6 GPUs each) = 6 GPUs on 1 box of 8 GPUs (1 instance of 6 GPUs a box, 2 GPUs idle in each)"} {
		if !strings.Contains(one, want) {
			t.Errorf("line %q lacks %q", one, want)
		}
	}
	two := CapacityLine(&serving.Capacity{TargetQPS: 30, PerCopyQPS: 12.6, Copies: 3, GPUsPerCopy: 1, GPUs: 3, BoxGPUs: 8, InstanceGPUs: 1, InstancesPerBox: 8, Boxes: 1, Check: check})
	if want := ": 3 copies of the deployment (12.6 req/s each at most, 1 GPU each) = 3 GPUs on 1 box of 8 GPUs;"; !strings.Contains(two, want) {
		t.Errorf("line %q lacks %q", two, want)
	}
}
