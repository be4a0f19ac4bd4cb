package sim

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// TestCUDAGraphsUnused: CUDAGraphsUnused says a step is priced the same
// with graphs on and off exactly where it is: a prefill step under an
// engine that replays decode steps only (SGLang, TensorRT-LLM), or one
// whose tokens are above the largest capture size (vLLM's piecewise
// graphs and the executor's whole-step graph take a prefill that fits
// one); a decode step never. Each claim is checked by pricing the step
// both ways: everything a prediction holds but the options and the
// engine line (which state the setting) is the same where it says so,
// and differs where it does not.
func TestCUDAGraphsUnused(t *testing.T) {
	for _, c := range []struct {
		engine, box string
		context     int
		unused      string // "" where graphs price something
	}{
		{"vllm@0.24", "rtxpro6000-2s", 256, ""},
		// Above the capture sizes the step runs eagerly, but vLLM 0.24
		// takes its graphs' estimate off the pool only with graphs on.
		{"vllm@0.24", "rtxpro6000-2s", 2048, ""},
		{"vllm@0.16-nightly", "rtxpro6000-2s", 2048, "a prefill step of 2048 tokens a group is above vllm@0.16-nightly's largest CUDA-graph capture size (512 tokens)"},
		{"vllm@0.16-nightly", "rtxpro6000-2s", 256, ""},
		{"sglang@0.5", "rtxpro6000-2s", 256, "a prefill step runs eagerly (sglang@0.5 replays CUDA graphs for decode steps only)"},
		{"trtllm@1.3", "h200-nvswitch", 256, "a prefill step runs eagerly (trtllm@1.3 replays CUDA graphs for decode steps only)"},
		{"executor@1", "rtxpro6000-2s", 256, ""},
	} {
		for _, phase := range []model.Phase{model.Prefill, model.Decode} {
			sc := Scenario{Arch: mustPreset(t, "tiny-mla-moe"), Plan: model.Plan{TP: 2}, Topo: mustTopo(t, c.box),
				Workload: model.Workload{Phase: phase, Batch: 1, Context: c.context, KVDtype: model.BF16}}
			priced := func(graphs bool) map[string]any {
				pr := predictEngine(t, sc.Topo, c.engine, Options{CUDAGraphs: graphs}, sc)
				js, err := json.Marshal(pr)
				if err != nil {
					t.Fatal(err)
				}
				var m map[string]any
				if err := json.Unmarshal(js, &m); err != nil {
					t.Fatal(err)
				}
				delete(m, "options")
				delete(m, "engine")
				return m
			}
			on, off := priced(true), priced(false)
			same := maps.EqualFunc(on, off, func(a, b any) bool {
				ja, _ := json.Marshal(a)
				jb, _ := json.Marshal(b)
				return string(ja) == string(jb)
			})
			ref, err := engprof.ParseRef(c.engine)
			if err != nil {
				t.Fatal(err)
			}
			sc.Options.Engine = ref
			why := sc.CUDAGraphsUnused()
			want := c.unused
			if phase == model.Decode {
				want = ""
			}
			if same != (want != "") || !strings.HasPrefix(why, want) || (want == "") != (why == "") {
				t.Errorf("%s %s at %d tokens: priced the same with graphs on and off: %v; CUDAGraphsUnused %q, want %q", c.engine, phase, c.context, same, why, want)
			}
		}
	}
}
