package cpu_test

import (
	"context"
	"testing"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces/schema"
)

// TestSpecSchedules runs speculative steps of the tiny model on goroutine
// ranks, every op of the verify pass, the rejection sampler and each
// method's draft passes (an EAGLE-3 head; a draft model at a TP of its own,
// its collectives over groups of 2; n-gram, which drafts on the host), and
// counts a span for every op of every rank.
func TestSpecSchedules(t *testing.T) {
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	head, err := model.ResolveDrafter("tiny-mla-moe-eagle3")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		spec model.Spec
	}{
		{"eagle3", model.Spec{Method: model.SpecEagle3, Draft: head.Ref, Drafter: head}},
		{"draft tp2", model.Spec{Method: model.SpecDraftModel, Draft: a.Ref, Drafter: a, DraftTP: 2}},
		{"ngram", model.Spec{Method: model.SpecNgram}},
		{"eagle3 tree", model.Spec{Method: model.SpecEagle3, Draft: head.Ref, Drafter: head, TopK: 2, Steps: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := model.BuildWith(a, model.Plan{TP: 4}, model.Workload{Batch: 2, Context: 128, SpecTokens: 3}, model.BuildOptions{Spec: c.spec})
			if err != nil {
				t.Fatal(err)
			}
			if err := exec.ValidateSchedule(s); err != nil {
				t.Fatal(err)
			}
			tp, rec := exectest.NewRecorder()
			defer tp.Shutdown(context.Background())
			const steps = 2
			if _, err := exec.Run(context.Background(), s, cpu.New(), exec.WithTracerProvider(tp), exec.WithSteps(steps), exec.WithWarmup(1)); err != nil {
				t.Fatal(err)
			}
			ops, spec := 0, 0
			for _, sp := range rec.Ended() {
				n := sp.Name()
				if n == schema.SpanStep || len(n) > 5 && n[:5] == "rank/" {
					continue
				}
				ops++
				if len(n) > 6 && (n[:6] == "eagle." || n[:6] == "draft." || n[:5] == "spec.") {
					spec++
				}
			}
			if want := s.NumOps() * steps; ops != want || spec == 0 {
				t.Errorf("%d op spans (%d of the speculative ops), want %d", ops, spec, want)
			}
		})
	}
}
