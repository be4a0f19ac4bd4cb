package plan

import (
	"strings"
	"testing"
)

// TestPlanCaveats: a sweep's caveats are the capacity caveat, then the
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
	want := []string{"KV capacity and max concurrency", "NVFP4 experts on SM12x", "NCCL collectives priced"}
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
