package exec_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/traces/schema"
)

// TestRunnerWritesMeasuredOptions: the option names on the step span say
// what was measured: graphs asked for on a backend that cannot capture
// drop "cuda-graphs"; otherwise the names stand as given (the scenario
// JSON and schema.AttrGraphs carry the rest).
func TestRunnerWritesMeasuredOptions(t *testing.T) {
	cases := []struct {
		name    string
		backend []exectest.Option
		graphs  bool
		opts    []string
		want    []string
	}{
		{"replayed, options silent", []exectest.Option{exectest.WithGraphs()}, true, []string{"nccl-proto=LL"}, []string{"nccl-proto=LL"}},
		{"replayed, options say so", []exectest.Option{exectest.WithGraphs()}, true, []string{"cuda-graphs"}, []string{"cuda-graphs"}},
		{"fell back to eager", nil, true, []string{"nccl-proto=LL", "cuda-graphs"}, []string{"nccl-proto=LL"}},
		{"graphs not requested", nil, false, []string{"cuda-graphs"}, []string{"cuda-graphs"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp, rec := exectest.NewRecorder()
			defer tp.Shutdown(context.Background())
			_, err := exec.Run(context.Background(), exectest.Schedule(1, 1), exectest.New(tc.backend...),
				exec.WithTracerProvider(tp), exec.WithSteps(1), exec.WithGraphs(tc.graphs), exec.WithScenario("", "", tc.opts))
			if err != nil {
				t.Fatal(err)
			}
			steps := 0
			for _, sp := range rec.Ended() {
				if sp.Name() != schema.SpanStep {
					continue
				}
				steps++
				for _, kv := range sp.Attributes() {
					if kv.Key == schema.AttrOptions {
						if got := kv.Value.AsStringSlice(); !slices.Equal(got, tc.want) {
							t.Errorf("options %q, want %q", got, tc.want)
						}
					}
				}
			}
			if steps == 0 {
				t.Fatal("no step span")
			}
		})
	}
}
