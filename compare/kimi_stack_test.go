package compare_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// TestCalibrateKimiStackHoldOut: real traces of a naive PyTorch MLA + MoE
// stack on one H100 (traces/testdata/real/kimi-stack): calibrate on one
// batch, hold out the other (1 -> 32 and 32 -> 1, eager and CUDA graph).
// The calibrated box must predict the held-out batch no worse than the
// uncalibrated one — op RMS and step error, measured here by compare on
// the held-out trace with each box, not by Calibrate's own figures — or
// say it is worse (Calibration.Worse: the CLI then refuses to write it).
// The trace's program differs from the schedule: the script leaves out
// TP 8's all-reduces (two per layer, the embedding's and the logits'
// gather: 2 x 6 + 2 of config.json's 6 layers), said before any fit.
func TestCalibrateKimiStackHoldOut(t *testing.T) {
	dir := filepath.Join("..", "traces", "testdata", "real", "kimi-stack")
	arch, err := model.Resolve(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	box, err := topology.Resolve("nvswitch:8xh100-sxm", 0)
	if err != nil {
		t.Fatal(err)
	}
	scenario := func(batch int, graphs bool) *sim.Scenario {
		o := sim.DefaultOptions()
		o.CUDAGraphs = graphs
		return &sim.Scenario{Arch: arch, Plan: model.Plan{TP: 8}, Workload: model.Workload{Phase: model.Decode, Batch: batch, Context: 4096, KVDtype: model.BF16},
			Options: o, Topo: box}
	}
	read := func(mode string, batch int) *traces.Result {
		res, err := traces.ReadAll(context.Background(), filepath.Join(dir, fmt.Sprintf("kimi-stack-%s-b%d.pt.trace.json.gz", mode, batch)))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// heldOut is compare's account of a box on the held-out trace: the
	// RMS of its ops' errors and its step error.
	heldOut := func(res *traces.Result, sc *sim.Scenario, topo *topology.Topology) (rms, step float64) {
		s := *sc
		s.Topo = topo
		rep, err := compare.Compare([]*traces.Result{res}, compare.Options{Scenarios: compare.Scenarios{Default: &s}})
		if err != nil {
			t.Fatal(err)
		}
		sr := &rep.Scenarios[0]
		n := 0
		for _, o := range sr.Ops {
			if o.MedianUs > 0 {
				rms += o.ErrPct * o.ErrPct
				n++
			}
		}
		return math.Sqrt(rms / float64(n)), sr.Step.ErrPct
	}
	const tol = compare.HeldOutTolerancePts
	for _, mode := range []string{"graph", "eager"} {
		for _, pair := range [][2]int{{1, 32}, {32, 1}} {
			fitB, holdB := pair[0], pair[1]
			t.Run(fmt.Sprintf("%s/fit-b%d/holdout-b%d", mode, fitB, holdB), func(t *testing.T) {
				graphs := mode == "graph"
				fit, hold := read(mode, fitB), read(mode, holdB)
				cal, err := compare.Calibrate([]*traces.Result{fit}, compare.CalibrateOptions{
					Scenarios: compare.Scenarios{Default: scenario(fitB, graphs)}, Created: "2026-12-06T00:00:00Z",
					HoldOut: []*traces.Result{hold}, HoldOutScenarios: compare.Scenarios{Default: scenario(holdB, graphs)}})
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(cal.Program, "14 of ") || !strings.Contains(cal.Program, "allreduce") {
					t.Errorf("program line %q, want the 14 all-reduces never measured", cal.Program)
				}
				rmsB, stepB := heldOut(hold, scenario(holdB, graphs), box)
				rmsA, stepA := heldOut(hold, scenario(holdB, graphs), cal.Topology)
				t.Logf("held-out batch %d: op RMS %.1f %% -> %.1f %%, step %+.1f %% -> %+.1f %% (Calibrate says %.1f -> %.1f, %+.1f -> %+.1f, worse %v)",
					holdB, rmsB, rmsA, stepB, stepA, cal.Before.OpRMSErrPct, cal.After.OpRMSErrPct, cal.Before.StepErrPct, cal.After.StepErrPct, cal.Worse)
				for _, ch := range cal.Choices {
					if ch.Kept {
						t.Logf("  kept %s", ch)
					}
				}
				worse := rmsA > rmsB+tol || math.Abs(stepA) > math.Abs(stepB)+tol
				if worse != cal.Worse {
					t.Errorf("compare finds the calibrated box worse: %v; Calibrate says %v", worse, cal.Worse)
				}
				if math.Abs(rmsB-cal.Before.OpRMSErrPct) > 0.05 || math.Abs(rmsA-cal.After.OpRMSErrPct) > 0.05 {
					t.Errorf("held-out op RMS: compare %.2f -> %.2f, Calibrate %.2f -> %.2f", rmsB, rmsA, cal.Before.OpRMSErrPct, cal.After.OpRMSErrPct)
				}
			})
		}
	}
}
