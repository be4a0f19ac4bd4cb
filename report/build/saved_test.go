package build

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/sim"
)

const (
	savedAdvice = `{"model":"m","topology":"t","plan":"tp8","workload":"decode b1 ctx4096","threshold_frac":0.05,"baseline":{"name":"baseline","step_us":1000,"tokens_per_s":1000},"rows":[{"entry":"cuda-graphs","gain":{"tokens_per_s_gain_pct":20},"with":{"step_us":800,"tokens_per_s":1250},"without":{"step_us":1000,"tokens_per_s":1000}}]}`
	// savedPrediction is a symmetric TP 2 step of two ops, as 'predict
	// --output json' writes one: q_proj 0-10 us, then the all-reduce
	// 10-15 us, released by q_proj (dep).
	savedPrediction = `{"model":"m","topology":"t","plan":"tp2","workload":"decode b1 ctx4096","options":{"nccl":{}},"step_us":15,"symmetric":true,` +
		`"ops":[{"id":"L00.attn.q_proj","kind":"gemm","block":"attn","layer":0,"rank":0,"start_us":0,"us":10,"waited_on":"launch","bound":"memory","cost":{"us":10,"bound":"memory"}},` +
		`{"id":"L00.attn.allreduce","kind":"collective","block":"attn","layer":0,"rank":0,"start_us":10,"us":5,"waited_on":"dep","bound":"latency","cost":{"us":5,"bound":"latency"}}],` +
		`"top_ops":[0,1],"critical_path":[0,1]}`
	savedCompare = `{"sources":[{"source":"run.json","format":"otlp-json","spans":10}],"scenarios":[{"scenario":{"model":{"name":"m"},"plan":"tp8","workload":"decode b1 ctx4096","topology":{"name":"t"}},"mode":"op-id","step":{"predicted_us":10,"median_us":12,"n":3},"kinds":[{"kind":"gemm","units":2,"predicted_us":5,"median_us":6,"n":3}]}]}`
)

func TestReportReadSaved(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    string // "advice", "comparison", or an error substring
		advRows int
	}{
		{"advice", savedAdvice, "advice", 1},
		{"comparison", savedCompare, "comparison", 0},
		{"prediction", savedPrediction, "prediction", 0},
		{"prediction without ops", `{"step_us":1,"ops":[]}`, `"ops" is empty`, 0},
		{"prediction with an unknown bound", strings.Replace(savedPrediction, `"bound":"latency"}`, `"bound":"fast"}`, 1), `bound "fast"`, 0},
		{"prediction op on a rank the plan lacks", strings.Replace(savedPrediction, `"layer":0,"rank":0,"start_us":10`, `"layer":0,"rank":2,"start_us":10`, 1),
			`"ops"[1] (L00.attn.allreduce): rank 2: want 0 to 1`, 0},
		{"prediction critical path out of range", strings.Replace(savedPrediction, `"critical_path":[0,1]`, `"critical_path":[0,2]`, 1), `"critical_path"[1] = 2`, 0},
		{"prediction plan of too many ranks", strings.Replace(savedPrediction, `"plan":"tp2"`, `"plan":"tp8192"`, 1), `"plan" tp8192: want 1 to 4096 ranks`, 0},
		{"array", `[1,2]`, "not a JSON object", 0},
		{"empty", ``, "not a JSON object", 0},
		{"other object", `{"a":1,"b":2}`, "keys a, b; want the output of 'tpscope advise", 0},
		{"advice with a null baseline", `{"baseline":null,"rows":[]}`, `field "baseline" is null`, 0},
		// A variant that lost its step time or throughput drew "step
		// 0.00 ms" and gains against zero.
		{"advice baseline without step_us", strings.Replace(savedAdvice, `"step_us":1000,"tokens_per_s":1000},"rows"`, `"tokens_per_s":1000},"rows"`, 1),
			`"baseline.step_us" 0: want the step's time in us, above 0`, 0},
		{"advice row variant without tokens_per_s", strings.Replace(savedAdvice, `"with":{"step_us":800,"tokens_per_s":1250}`, `"with":{"step_us":800}`, 1),
			`"rows[0].with.tokens_per_s" 0: want the step's throughput, above 0 (missing from the file?) (entry "cuda-graphs")`, 0},
		{"advice rows of the wrong type", `{"baseline":{},"rows":{"x":1}}`, "advise result saved.json", 0},
		{"comparison scenarios of the wrong type", `{"sources":[],"scenarios":3}`, "compare result saved.json", 0},
		// The scenario's model is a model.Ref object, not a bare name.
		{"comparison scenario model of the wrong type", `{"sources":[],"scenarios":[{"scenario":{"model":"m"}}]}`, "compare result saved.json", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ReadSaved(strings.NewReader(c.in), "saved.json")
			switch c.want {
			case "advice":
				if err != nil || s.Advice == nil || s.Comparison != nil || s.Prediction != nil || len(s.Advice.Rows) != c.advRows || s.Advice.Rows[0].Gain.TokensPerSPct != 20 {
					t.Fatalf("ReadSaved = %+v, %v; want advice of %d rows", s, err, c.advRows)
				}
			case "comparison":
				if err != nil || s.Comparison == nil || s.Advice != nil || s.Prediction != nil || len(s.Comparison.Scenarios) != 1 || s.Comparison.Scenarios[0].Kinds[0].MedianUs != 6 {
					t.Fatalf("ReadSaved = %+v, %v; want one compared scenario", s, err)
				}
				// The scenario's references name it: model m, box t, tp8.
				sc := &s.Comparison.Scenarios[0].Scenario
				if got := fmt.Sprintf("%s %s on %s", modelName(sc), sc.Plan, boxName(sc)); got != "m tp8 on t" {
					t.Errorf("saved scenario reads as %q, want \"m tp8 on t\"", got)
				}
			case "prediction":
				if err != nil || s.Prediction == nil || s.Advice != nil || s.Comparison != nil {
					t.Fatalf("ReadSaved = %+v, %v; want a prediction", s, err)
				}
				p := s.Prediction
				if len(p.Ops) != 2 || p.Ops[1].Bound != sim.BoundLatency || p.Ops[1].WaitedOn.String() != "dep" || p.Plan.TP != 2 {
					t.Fatalf("prediction %+v: want two ops, the all-reduce latency-bound and released by dep, TP 2", p)
				}
				// Drawn for both ranks of TP 2, two boxes each; no schedule, so
				// no link.
				r, err := Build(Input{Prediction: p})
				if err != nil {
					t.Fatal(err)
				}
				var tl *report.Timeline
				for _, sec := range r.Sections {
					if sec.Timeline != nil {
						tl = sec.Timeline
					}
				}
				if tl == nil || len(tl.Lanes) != 2 || len(tl.Lanes[0].Boxes) != 2 || len(tl.Lanes[1].Boxes) != 2 || len(tl.Links) != 0 {
					t.Fatalf("timeline %+v: want 2 lanes of 2 boxes, no link", tl)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "saved.json") {
					t.Fatalf("ReadSaved error %v, want one naming saved.json and containing %q", err, c.want)
				}
			}
		})
	}
}

// FuzzReadSaved: any input gives either an error or exactly one result,
// and a result builds into a valid report.
func FuzzReadSaved(f *testing.F) {
	for _, s := range []string{savedAdvice, savedCompare, savedPrediction, `{"step_us":1,"ops":[]}`, `{}`, `null`, `{"baseline":{},"rows":[{"with":{"step_us":-1},"gain":{"tokens_per_s_gain_pct":-300}}]}`,
		`{"sources":[],"scenarios":[{"kinds":[{"kind":"gemm","median_us":1e400,"n":1}]}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSaved(strings.NewReader(string(data)), "fuzz.json")
		if err != nil {
			return
		}
		n := 0
		for _, set := range []bool{s.Advice != nil, s.Comparison != nil, s.Prediction != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("ReadSaved gave %+v: want exactly one result", s)
		}
		if _, err := Build(Input{Advice: s.Advice, Comparison: s.Comparison, Prediction: s.Prediction}); err != nil && !strings.Contains(err.Error(), "invalid report") {
			t.Fatalf("Build of a read result: %v", err)
		}
	})
}
