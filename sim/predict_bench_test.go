package sim

import (
	"testing"

	"github.com/tpscope/tpscope/model"
)

// benchPredict measures one decode-step prediction of a built schedule
// (the schedule is built once, outside the timer). detail=step is the
// sweep path (StepUs, no per-op rows), detail=ops the full Prediction;
// symmetry=built is the path PredictScenario/Evaluate take for schedules
// from model.BuildWith (collective groups compared), symmetry=checked the
// path Predict takes for any schedule (every rank's ops compared with
// rank 0's).
// seedBoxPredictor predicts on the seed box (rtxpro6000-2s) with the seed
// scenario's options (CUDA graphs, NCCL_PROTO=LL, NCCL_P2P_LEVEL=SYS).
func seedBoxPredictor(b *testing.B) *Predictor {
	b.Helper()
	p, err := New(mustTopo(b, "rtxpro6000-2s"), seedOptions)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func benchPredict(b *testing.B, name string, tp, batch int, full, check bool) {
	s, err := model.Build(mustPreset(b, name), model.Plan{TP: tp}, model.Workload{Phase: model.Decode, Batch: batch, Context: 4096})
	if err != nil {
		b.Fatal(err)
	}
	p := seedBoxPredictor(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mode := symBuilt
		if check {
			mode = symCheck
		}
		if full {
			if _, err := p.predict(s, mode, p.graphedAsBuilt(s)); err != nil {
				b.Fatal(err)
			}
		} else if _, err := p.stepUs(s, mode, p.graphedAsBuilt(s)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.NumOps()), "ops")
}

func BenchmarkPredict(b *testing.B) {
	for _, c := range []struct {
		model     string
		tp, batch int
	}{{"kimi-k2.5-nvfp4", 8, 1}, {"kimi-k2.5-nvfp4", 8, 64}, {"glm-5-nvfp4", 8, 1}} {
		for _, full := range []bool{false, true} {
			for _, check := range []bool{false, true} {
				name := "model=" + c.model + "/tp=" + itoa(c.tp) + "/batch=" + itoa(c.batch)
				name += map[bool]string{false: "/detail=step", true: "/detail=ops"}[full]
				name += map[bool]string{false: "/symmetry=built", true: "/symmetry=checked"}[check]
				b.Run(name, func(b *testing.B) { benchPredict(b, c.model, c.tp, c.batch, full, check) })
			}
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}

// BenchmarkPredictEvaluate is the sweep path: build the schedule (model.BuildWith)
// and predict its step without per-op rows.
func BenchmarkPredictEvaluate(b *testing.B) {
	for _, c := range []struct {
		model     string
		tp, batch int
	}{{"kimi-k2.5-nvfp4", 8, 1}, {"glm-5-nvfp4", 8, 1}} {
		b.Run("model="+c.model+"/tp="+itoa(c.tp)+"/batch="+itoa(c.batch), func(b *testing.B) {
			p := seedBoxPredictor(b)
			sc := Scenario{Arch: mustPreset(b, c.model), Plan: model.Plan{TP: c.tp}, Workload: model.Workload{Phase: model.Decode, Batch: c.batch, Context: 4096}}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := p.Evaluate(sc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
