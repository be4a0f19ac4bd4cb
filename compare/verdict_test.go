package compare

import (
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

func TestOpName(t *testing.T) {
	for id, want := range map[string]string{
		"L07.attn.o_proj":        "attn.o_proj",
		"L60.moe.experts_down":   "moe.experts_down",
		"mtp.s0.attn.mla_decode": "mtp.attn.mla_decode",
		"mtp.s2.mtp.eh_proj":     "mtp.mtp.eh_proj",
		"embed.allreduce":        "embed.allreduce",
		"head.lm_head":           "head.lm_head",
		"Lx.odd":                 "Lx.odd",
	} {
		if got := OpName(id); got != want {
			t.Errorf("OpName(%q) = %q, want %q", id, got, want)
		}
	}
}

// verdictRun predicts sc and makes a run of it on rank 0 whose ops all took
// opUs(op) and whose steps are steps.
func verdictRun(t *testing.T, label string, sc sim.Scenario, steps []float64, opUs func(op *model.Op) float64) *VerdictRun {
	t.Helper()
	pr, sched, err := sim.Predict(sc)
	if err != nil {
		t.Fatal(err)
	}
	r := &VerdictRun{Label: label, Scenario: sc, Prediction: pr, Schedule: sched, StepUs: steps}
	for i := range sched.Ranks[0] {
		r.OpUs = append(r.OpUs, opUs(&sched.Ranks[0][i]))
	}
	return r
}

func tinyScenario(t *testing.T) sim.Scenario {
	t.Helper()
	a, err := model.Resolve("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Preset("h200-nvswitch")
	if err != nil {
		t.Fatal(err)
	}
	return sim.Scenario{Arch: a, Plan: model.Plan{TP: 2}, Workload: model.Workload{Phase: model.Decode, Batch: 8, Context: 4096, KVDtype: model.BF16},
		Options: sim.Options{CUDAGraphs: true}, Topo: topo}
}

// A one-rank shard skips the collectives: the prediction as run is the
// predicted step less their predicted time; with all-reduce + RMSNorm
// fusion the norms after skipped all-reduces ran their local part, whose
// traffic (the fused norm's memory term) stays in.
func TestVerdictAsRun(t *testing.T) {
	sc := tinyScenario(t)
	// The base apart (vLLM 0.24 fuses by default on this box's SM 9.0).
	sc.Options.ARNormFusion = sim.ToggleOff
	skipColl := func(op *model.Op) float64 {
		if op.IsCollective() {
			return 0
		}
		return 1
	}
	r := verdictRun(t, "base", sc, []float64{100}, skipColl)
	var coll float64
	n := 0
	for _, o := range r.Prediction.Ops {
		if o.Rank == 0 && o.Kind == model.KindCollective {
			coll += o.Us
			n++
		}
	}
	st := r.Stats()
	if n == 0 || st.NotRunOps != n || math.Abs(st.AsRunUs-(r.Prediction.StepUs-coll)) > 1e-9 || math.Abs(st.NotRunUs-coll) > 1e-9 {
		t.Fatalf("as run %.3f us (%d ops not run, %.3f us), want %.3f - %.3f (%d collectives)", st.AsRunUs, st.NotRunOps, st.NotRunUs, r.Prediction.StepUs, coll, n)
	}

	sc.Options.ARNormFusion = sim.ToggleOn
	f := verdictRun(t, "fused", sc, []float64{100}, skipColl)
	var arUs, normMem float64
	fused := 0
	for _, o := range f.Prediction.Ops {
		if o.Rank != 0 {
			continue
		}
		if o.Kind == model.KindCollective {
			arUs += o.Us
		}
		if o.Cost.Fused {
			normMem += o.Cost.MemoryUs
			fused++
		}
	}
	fs := f.Stats()
	if fused == 0 || math.Abs(fs.AsRunUs-(f.Prediction.StepUs-arUs+normMem)) > 1e-9 {
		t.Fatalf("fused as run %.3f us, want %.3f - %.3f + %.3f (%d fused norms)", fs.AsRunUs, f.Prediction.StepUs, arUs, normMem, fused)
	}
}

// Gains, spread, pays and held from hand-picked steps: without the
// optimization the steps are 100, 110, 120 us (median 100 + 10 = 110, p10
// 102, p90 118 by linear interpolation); with it 80, 85, 90 (median 85, p10
// 81, p90 89). Tokens per step are the same on both sides (no MTP), so the
// tokens/s gain is 110/85 - 1 = +29.41 % and the step gain (110 - 85)/110 =
// 22.73 %; the spread: 102/89 - 1 = +14.61 % and 118/81 - 1 = +45.68 %.
func TestVerdictGains(t *testing.T) {
	sc := tinyScenario(t)
	one := func(*model.Op) float64 { return 1 }
	a := verdictRun(t, "without", sc, []float64{120, 100, 110}, one)
	b := verdictRun(t, "with", sc, []float64{90, 80, 85}, one)
	v := Verdict(a, b, 0)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"step gain", v.Measured.StepPct, 25.0 / 110 * 100},
		{"tokens/s gain", v.Measured.TokensPerSPct, (110.0/85 - 1) * 100},
		{"low", v.MeasuredLow.TokensPerSPct, (102.0/89 - 1) * 100},
		{"high", v.MeasuredHigh.TokensPerSPct, (118.0/81 - 1) * 100},
		// Same scenario on both sides: predicted gain 0.
		{"predicted", v.Predicted.TokensPerSPct, 0},
		{"error", v.ErrPts, -(110.0/85 - 1) * 100},
		{"threshold", v.ThresholdPct, 5},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: %.6f, want %.6f", c.name, c.got, c.want)
		}
	}
	if v.PredPays || !v.MeasPays || v.Held {
		t.Errorf("pays predicted %v measured %v, held %v: want no, yes, not held", v.PredPays, v.MeasPays, v.Held)
	}
	// With a threshold above the measured gain both say "does not pay".
	if v := Verdict(a, b, 30); v.MeasPays || !v.Held {
		t.Errorf("threshold 30 %%: pays %v held %v", v.MeasPays, v.Held)
	}
}

// The ops whose change was mispredicted come first: here the attention
// ops take 10 us more in the run with the optimization while nothing else
// moves, and the prediction (same scenario) expects no change.
func TestVerdictOff(t *testing.T) {
	sc := tinyScenario(t)
	a := verdictRun(t, "without", sc, []float64{500}, func(*model.Op) float64 { return 1 })
	b := verdictRun(t, "with", sc, []float64{540}, func(op *model.Op) float64 {
		if op.Name == "mla_decode" {
			return 11
		}
		return 1
	})
	v := Verdict(a, b, 0)
	// 4 layers x 10 us more.
	if len(v.Off) == 0 || v.Off[0].Op != "attn.mla_decode" || math.Abs(v.Off[0].MeasuredUs-40) > 1e-9 || v.Off[0].PredictedUs != 0 || math.Abs(v.Off[0].OffUs-40) > 1e-9 {
		t.Fatalf("off %+v: want attn.mla_decode measured +40 us, predicted 0", v.Off)
	}
	if len(v.Off) > 5 {
		t.Fatalf("%d op deltas, want at most 5", len(v.Off))
	}
}
