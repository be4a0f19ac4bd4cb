package compare_test

import (
	"math"
	"testing"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
)

// tinyScenario is small enough to write several runs of quickly.
var tinyScenario = spec{Model: "tiny-mla-moe", Topology: "rtxpro6000-2s", Plan: "tp2", Workload: "decode b1 ctx1024"}

// Two runs of one scenario number their steps alike (0, 1, 2): each of
// their 6 steps is a sample of its own. Every op takes its predicted time
// (2 % noise), so a kind's measured time per step and rank is the sum of
// its ops' predicted times, within the noise averaged over its ops (1 %),
// whatever the number of runs; the step is the sum of all ops (ops back
// to back). Keyed by step alone, the runs' same-numbered steps added up
// to twice that, over 3 steps.
func TestCompareTwoRunsOfOneScenarioAreSixSteps(t *testing.T) {
	s := newSynthTruth(t, tinyScenario, func(op *sim.OpResult, _ *model.Op) float64 { return op.Us })
	dir := t.TempDir()
	a := readSource(t, s.write(t, dir, "a.json", tinyScenario, 3, 1))
	b := readSource(t, s.write(t, dir, "b.json", tinyScenario, 3, 2))
	rep, err := compare.Compare([]*traces.Result{a, b}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 1 {
		t.Fatalf("%d scenarios, want 1", len(rep.Scenarios))
	}
	sr := &rep.Scenarios[0]
	ranks := len(s.sched.Ranks)
	if sr.Traces != 6 || sr.Steps != 6 || sr.Step.N != 6 {
		t.Errorf("%d traces, %d steps, step n %d; want 6, 6, 6", sr.Traces, sr.Steps, sr.Step.N)
	}
	stepUs := 0.0
	for _, k := range sr.Kinds {
		want := 0.0
		for i := range s.pr.Ops {
			if op := &s.pr.Ops[i]; op.Kind == k.Kind && !op.Cost.Fused {
				want += op.Us
			}
		}
		stepUs += want
		if k.N != 6*ranks || math.Abs(k.MedianUs/want-1) > 0.01 {
			t.Errorf("kind %s: measured %.2f us over %d samples, want %.2f us ± 1 %% over %d", k.Kind, k.MedianUs, k.N, want, 6*ranks)
		}
	}
	if math.Abs(sr.Step.MedianUs/stepUs-1) > 0.01 {
		t.Errorf("step: measured %.2f us, want %.2f us ± 1 %%", sr.Step.MedianUs, stepUs)
	}
}
