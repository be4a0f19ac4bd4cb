package cpu_test

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces"
)

func tinySchedule(t testing.TB, p model.Plan, w model.Workload) *model.Schedule {
	t.Helper()
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	s, err := model.Build(a, p, w)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTinyTP4 runs the tiny MLA+MoE model at TP 4 on goroutine ranks and
// counts spans: every op of every rank of every measured step, plus one
// root and one rank span per rank per step.
func TestTinyTP4(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := tinySchedule(t, model.Plan{TP: 4}, model.Workload{Phase: model.Decode, Batch: 8, Context: 512})
	const steps = 3
	tp, rec := exectest.NewRecorder()
	defer tp.Shutdown(context.Background())
	res, err := exec.Run(context.Background(), s, cpu.New(), exec.WithTracerProvider(tp), exec.WithSteps(steps), exec.WithWarmup(1))
	if err != nil {
		t.Fatal(err)
	}
	var ops, roots, rankSpans int
	for _, sp := range rec.Ended() {
		switch {
		case sp.Name() == traces.SpanStep:
			roots++
		case len(sp.Name()) > 5 && sp.Name()[:5] == "rank/":
			rankSpans++
		default:
			ops++
		}
	}
	if want := s.NumOps() * steps; ops != want || roots != steps || rankSpans != 4*steps {
		t.Errorf("op spans %d (want %d = %d ops x %d steps), roots %d, rank spans %d", ops, want, s.NumOps(), steps, roots, rankSpans)
	}
	t.Logf("step median %.0f us p10 %.0f p90 %.0f tokens/s %.0f", res.Summary.StepMedianUs, res.Summary.StepP10Us, res.Summary.StepP90Us, res.Summary.TokensPerS)
	for _, k := range res.Summary.ByKind {
		t.Logf("  %-12s %3d ops %8.1f us %5.1f%%", k.Kind, k.Ops, k.Us, 100*k.Share)
	}
}
