package compare_test

import (
	"bytes"
	"math"
	"strconv"
	"strings"
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

// A run that leaves ops of the schedule out (here every collective and
// every attention o_proj, as a one-GPU PyTorch stack leaves out TP's
// all-reduces): its measured step and kinds hold no time of them, so the
// predicted step is the prediction less their time, each kind's predicted
// total that of its ops measured, and the output says so, with the
// program line calibrate prints.
func TestCompareLeavesNeverMeasuredOpsOutOfTheSums(t *testing.T) {
	omit := func(op *model.Op) bool {
		return op.Kind == model.KindCollective || strings.HasSuffix(op.ID, ".attn.o_proj")
	}
	s := newSynthTruth(t, tinyScenario, func(op *sim.OpResult, _ *model.Op) float64 { return op.Us })
	s.omit = omit
	res := readSource(t, s.write(t, t.TempDir(), "run.json", tinyScenario, 2, 1))
	rep, err := compare.Compare([]*traces.Result{res}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sr := &rep.Scenarios[0]
	never, neverUs := 0, 0.0
	kindUs := map[model.OpKind]float64{}
	for i := range s.pr.Ops {
		op := &s.pr.Ops[i]
		switch {
		case op.Cost.Fused:
		case omit(&s.sched.Ranks[0][i]):
			never++
			neverUs += op.Us
		default:
			kindUs[op.Kind] += op.Us - op.SpanGapUs
		}
	}
	if never < 10 {
		t.Fatalf("%d ops left out: the scenario no longer has the collectives and o_proj ops the test leaves out", never)
	}
	if sr.NeverMeasured != never || math.Abs(sr.NeverMeasuredUs-neverUs) > 1e-6 {
		t.Errorf("never measured: %d ops, %.3f us; want %d, %.3f", sr.NeverMeasured, sr.NeverMeasuredUs, never, neverUs)
	}
	if want := s.pr.StepUs - neverUs; math.Abs(sr.Step.PredictedUs-want) > 1e-6 {
		t.Errorf("predicted step %.3f us, want %.3f (the prediction %.3f less the ops never measured)", sr.Step.PredictedUs, want, s.pr.StepUs)
	}
	for _, k := range sr.Kinds {
		if k.Kind == model.KindCollective {
			t.Errorf("kind row for collectives, none of which was measured: %+v", k)
		}
		if math.Abs(k.PredictedUs-kindUs[k.Kind]) > 1e-6 {
			t.Errorf("kind %s: predicted %.3f us, want %.3f (its ops measured)", k.Kind, k.PredictedUs, kindUs[k.Kind])
		}
	}
	if !strings.HasPrefix(sr.Program, "the traces' program differs from the schedule: ") || !strings.Contains(sr.Program, "never measured") {
		t.Errorf("program line %q, want the one calibrate prints for ops never measured", sr.Program)
	}
	var b bytes.Buffer
	if err := rep.WriteTable(&b, 5); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{sr.Program, "leave out the " + strconv.Itoa(never) + " predicted ops never measured"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
