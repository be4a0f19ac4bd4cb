package compare_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// TestCompareBoxesOfOneName: two runs on two boxes that share a name (a
// box and its calibrated copy keep one name) are two scenarios whose
// lines name the boxes apart, each by its file; a scenario's line names
// a box by its name, so both would read "on my-box".
func TestCompareBoxesOfOneName(t *testing.T) {
	dir := t.TempDir()
	base, err := topology.Preset("h200-nvswitch")
	if err != nil {
		t.Fatal(err)
	}
	a, b := base.Clone(), base.Clone()
	a.Name, b.Name = "my-box", "my-box"
	b.Devices[0].MemBWGBps /= 2
	pa, pb := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := a.Save(pa); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(pb); err != nil {
		t.Fatal(err)
	}
	var results []*traces.Result
	for i, p := range []string{pa, pb} {
		sp := spec{Model: "tiny-mla-moe", Topology: p, Plan: "tp2", Workload: "decode b1 ctx256"}
		results = append(results, readSource(t, newSynth(t, sp).write(t, dir, []string{"a.otlp.json", "b.otlp.json"}[i], sp, 2, 1)))
	}
	rep, err := compare.Compare(results, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 2 {
		t.Fatalf("%d scenarios, want 2", len(rep.Scenarios))
	}
	for i, p := range []string{pa, pb} {
		if line := rep.Scenarios[i].Scenario.String(); !strings.Contains(line, " on my-box ("+p+"), ") {
			t.Errorf("scenario %d: %q, want the box named my-box (%s)", i+1, line, p)
		}
	}
}
