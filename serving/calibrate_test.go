package serving

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCalibrateOneLoadKeepsPerSeq: fitted on levels of one load, the
// per-sequence host cost is not a term of the fit (it and the per-step
// cost move that load's TPOT alike) and a note says so; fitted on two
// loads it is.
func TestCalibrateOneLoadKeepsPerSeq(t *testing.T) {
	var levels []Measured
	for _, f := range []string{"conc16.json", "conc64.json"} {
		ms, err := LoadMeasured(filepath.Join("testdata", "bench", "inferencex-dsr1-fp4-b200-sglang-tp8ep8", f))
		if err != nil {
			t.Fatal(err)
		}
		levels = append(levels, ms...)
	}
	if len(levels) != 2 || levels[0].Concurrency == levels[1].Concurrency {
		t.Fatalf("levels %d, concurrencies want two different loads", len(levels))
	}
	// Only which terms are fitted is checked: any deployment will do.
	d := kimiDeployment(t)
	for _, c := range []struct {
		fit     []int
		noted   bool
		loads   int
		perSeq0 bool
	}{
		{[]int{0}, true, 1, true},
		{[]int{0, 1}, false, 2, false},
	} {
		if got := distinctLoads(levels, c.fit); got != c.loads {
			t.Errorf("fit %v: %d distinct loads, want %d", c.fit, got, c.loads)
		}
		cal, err := Calibrate(d, levels, CalibrateOptions{Fit: c.fit, MaxEvals: 3})
		if err != nil {
			t.Fatal(err)
		}
		noted := false
		for _, n := range cal.Notes {
			noted = noted || strings.Contains(n, string(TermPerSeqUs)+" not fitted")
		}
		if noted != c.noted {
			t.Errorf("fit %v: per-seq note %v, want %v (%q)", c.fit, noted, c.noted, cal.Notes)
		}
		if c.perSeq0 && cal.Overheads.PerSeqUs != d.Overheads.PerSeqUs {
			t.Errorf("fit %v: per-seq %v us moved from the deployment's %v", c.fit, cal.Overheads.PerSeqUs, d.Overheads.PerSeqUs)
		}
	}
}
