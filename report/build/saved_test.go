package build

import (
	"strings"
	"testing"
)

const (
	savedAdvice  = `{"model":"m","topology":"t","plan":"tp8","workload":"decode b1 ctx4096","threshold":0.05,"baseline":{"name":"baseline","step_us":1000},"rows":[{"entry":"cuda-graphs","speedup":1.2,"with":{"step_us":800},"without":{"step_us":1000}}]}`
	savedCompare = `{"sources":[{"source":"run.json","format":"otlp-json","spans":10}],"scenarios":[{"scenario":{"model":"m"},"mode":"op-id","step":{"predicted_us":10,"median_us":12,"n":3},"kinds":[{"kind":"gemm","units":2,"predicted_us":5,"median_us":6,"n":3}]}]}`
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
		{"prediction", `{"step_us":1,"ops":[]}`, "this is a prediction", 0},
		{"array", `[1,2]`, "not a JSON object", 0},
		{"empty", ``, "not a JSON object", 0},
		{"other object", `{"a":1,"b":2}`, "keys a, b; want the output of 'tpscope advise", 0},
		{"advice with a null baseline", `{"baseline":null,"rows":[]}`, `field "baseline" is null`, 0},
		{"advice rows of the wrong type", `{"baseline":{},"rows":{"x":1}}`, "advise result saved.json", 0},
		{"comparison scenarios of the wrong type", `{"sources":[],"scenarios":3}`, "compare result saved.json", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ReadSaved(strings.NewReader(c.in), "saved.json")
			switch c.want {
			case "advice":
				if err != nil || s.Advice == nil || s.Comparison != nil || len(s.Advice.Rows) != c.advRows || s.Advice.Rows[0].Speedup != 1.2 {
					t.Fatalf("ReadSaved = %+v, %v; want advice of %d rows", s, err, c.advRows)
				}
			case "comparison":
				if err != nil || s.Comparison == nil || s.Advice != nil || len(s.Comparison.Scenarios) != 1 || s.Comparison.Scenarios[0].Kinds[0].MedianUs != 6 {
					t.Fatalf("ReadSaved = %+v, %v; want one compared scenario", s, err)
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
	for _, s := range []string{savedAdvice, savedCompare, `{"step_us":1,"ops":[]}`, `{}`, `null`, `{"baseline":{},"rows":[{"with":{"step_us":-1},"speedup":-3}]}`,
		`{"sources":[],"scenarios":[{"kinds":[{"kind":"gemm","median_us":1e400,"n":1}]}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSaved(strings.NewReader(string(data)), "fuzz.json")
		if err != nil {
			return
		}
		if (s.Advice == nil) == (s.Comparison == nil) {
			t.Fatalf("ReadSaved gave %+v: want exactly one result", s)
		}
		if _, err := Build(Input{Advice: s.Advice, Comparison: s.Comparison}); err != nil && !strings.Contains(err.Error(), "invalid report") {
			t.Fatalf("Build of a read result: %v", err)
		}
	})
}
