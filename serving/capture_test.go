package serving

import (
	"slices"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/internal/testfix"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// vllmCapture is vLLM's default capture list for a scheduler of seqs
// running requests, k speculative tokens and a step budget of budget
// tokens, as _set_cudagraph_sizes builds it: [1, 2, 4] + range(8, 256, 8)
// + range(256, largest + 1, 16) up to largest = min(seqs x (1 + k) x 2,
// 512, budget).
func vllmCapture(seqs, k, budget int) []int {
	return testfix.VLLMCaptureGrid(min(seqs*(1+k)*2, 512, budget))
}

// TestVLLMCaptureFollowsMaxNumSeqs: under vLLM --max-num-seqs 32 captures
// graphs up to 64 tokens, so a mixed step of 100 tokens (20 decodes and an
// 80-token chunk, between the new largest size and the old 512) runs
// eagerly: priced as the same step with graphs off, not as the graph of
// 104 tokens it was priced as before. With the engine's defaults on an
// H200 (max_num_seqs 1024, 8192 tokens) the list is the whole 512 one and
// that step stays graphed.
func TestVLLMCaptureFollowsMaxNumSeqs(t *testing.T) {
	sc := sim.Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8}, Topo: mustBox(t, "h200-nvswitch"),
		Workload: model.Workload{KVDtype: model.FP8}, Options: sim.Options{CUDAGraphs: true}}
	var mixed model.Iteration
	for range 20 {
		mixed.AddDecode(2000)
	}
	mixed.AddChunk(80, 0)
	if n := mixed.Tokens(); n != 100 {
		t.Fatalf("mixed step of %d tokens, want 100", n)
	}
	eager := sc
	eager.Options.CUDAGraphs = false
	eagerUs, err := mustNew(t, Deployment{Scenario: eager}).coster.StepUs(mixed)
	if err != nil {
		t.Fatal(err)
	}

	s32 := mustNew(t, Deployment{Scenario: sc, Engine: EngineOptions{MaxNumSeqs: 32}})
	if got, want := s32.coster.CaptureSizes(), vllmCapture(32, 0, 8192); !slices.Equal(got, want) {
		t.Fatalf("--max-num-seqs 32: capture sizes %v, want %v", got, want)
	}
	us32, err := s32.coster.StepUs(mixed)
	if err != nil {
		t.Fatal(err)
	}
	if us32 != eagerUs {
		t.Errorf("--max-num-seqs 32: the 100-token mixed step costs %.1f us, want the eager %.1f us (above the largest capture size, 64)", us32, eagerUs)
	}

	def := mustNew(t, Deployment{Scenario: sc})
	if got, want := def.coster.CaptureSizes(), vllmCapture(1024, 0, 8192); !slices.Equal(got, want) || want[len(want)-1] != 512 {
		t.Fatalf("defaults: capture sizes %v, want %v", got, want)
	}
	usDef, err := def.coster.StepUs(mixed)
	if err != nil {
		t.Fatal(err)
	}
	if usDef == eagerUs {
		t.Errorf("defaults: the 100-token mixed step costs the eager %.1f us, want it graphed (captured up to 512)", usDef)
	}

	// MTP 2 at --max-num-seqs 32: up to 32 x 3 x 2 = 192 tokens, every
	// size rounded up to a multiple of 3 (decode graphs are full here).
	spec := sc
	spec.Workload.SpecTokens = 2
	sp := mustNew(t, Deployment{Scenario: spec, Engine: EngineOptions{MaxNumSeqs: 32}})
	var want []int
	for _, s := range vllmCapture(32, 2, 8192) {
		if u := (s + 2) / 3 * 3; u <= 192 && !slices.Contains(want, u) {
			want = append(want, u)
		}
	}
	if got := sp.coster.CaptureSizes(); !slices.Equal(got, want) {
		t.Errorf("MTP 2, --max-num-seqs 32: capture sizes %v, want %v", got, want)
	}
}

// TestSGLangSpecCaptureFollowsRequestPool: under speculation SGLang
// captures its verify graphs for the batches of its speculative list up
// to its request pool, max_running_requests (48 unless given, the whole
// engine's, whole on every DP rank), the pool's size added where the list
// ran past it (cuda_graph_runner.py get_batch_sizes_to_capture), x (1 +
// K) tokens: the serving run replays the sizes a step is priced with. On
// an H200 at TP 8, MTP 1: the defaults capture 1..8, 10..32 step 2, 40,
// 44, 48 sequences (not the list to 512); --max-num-seqs 100 adds
// 52..64 step 4, 72..96 step 8 and 100; DP 8 (each rank's scheduler
// running 48 / 8 = 6) still captures to 48.
func TestSGLangSpecCaptureFollowsRequestPool(t *testing.T) {
	ref, err := engprof.ParseRef("sglang@0.5")
	if err != nil {
		t.Fatal(err)
	}
	first48 := []int{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 40, 44, 48}
	tokens := func(seqs []int) []int {
		out := make([]int, len(seqs))
		for i, s := range seqs {
			out[i] = 2 * s
		}
		return out
	}
	for _, c := range []struct {
		name    string
		tp, dp  int
		maxSeqs int
		want    []int
	}{
		{"defaults", 8, 1, 0, first48},
		{"--max-num-seqs 100", 8, 1, 100, append(slices.Clone(first48), 52, 56, 60, 64, 72, 80, 88, 96, 100)},
		{"DP 8", 1, 8, 0, first48},
	} {
		sc := sim.Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: c.tp, DP: c.dp, EP: c.dp > 1}, Topo: mustBox(t, "h200-nvswitch"),
			Workload: model.Workload{KVDtype: model.FP8, SpecTokens: 1}, Options: sim.Options{CUDAGraphs: true, Engine: ref},
			Build: model.BuildOptions{Spec: model.Spec{Method: model.SpecMTP}}}
		s := mustNew(t, Deployment{Scenario: sc, Engine: EngineOptions{MaxNumSeqs: c.maxSeqs}})
		if got, want := s.coster.CaptureSizes(), tokens(c.want); !slices.Equal(got, want) {
			t.Errorf("%s: capture sizes %v, want %v", c.name, got, want)
		}
	}
}

// TestSGLangDecodeCaptureFollowsRequestPool: without speculation SGLang's
// decode graphs stop at the request pool by the same rule
// (get_batch_sizes_to_capture keeps bs <= req_to_token_pool.size and adds
// the pool's size where cuda_graph_bs ran past it): on an H200 at TP 8
// (cuda_graph_max_bs 512) --max-num-seqs 100 (its --max-running-requests)
// captures 1, 2, 4, 8, 12, 16..96 step 8 and 100, so a decode step of 97
// to 100 sequences pads to 100, not to the list's 104, and one of 101
// runs eagerly; under DP 2 the pool is the whole engine's 100 (each rank
// scheduling 50), the same list; the defaults (a pool of at least 2,048)
// keep the list to 512.
func TestSGLangDecodeCaptureFollowsRequestPool(t *testing.T) {
	ref, err := engprof.ParseRef("sglang@0.5")
	if err != nil {
		t.Fatal(err)
	}
	to100 := []int{1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 100}
	var to512 []int
	to512 = append(to512, 1, 2, 4, 8, 12)
	for b := 16; b <= 256; b += 8 {
		to512 = append(to512, b)
	}
	for b := 272; b <= 496; b += 16 {
		to512 = append(to512, b)
	}
	to512 = append(to512, 512)
	for _, c := range []struct {
		name    string
		tp, dp  int
		maxSeqs int
		want    []int
	}{
		{"--max-num-seqs 100", 8, 1, 100, to100},
		{"--max-num-seqs 100, DP 2", 4, 2, 100, to100},
		{"defaults", 8, 1, 0, to512},
	} {
		sc := sim.Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: c.tp, DP: c.dp, EP: c.dp > 1}, Topo: mustBox(t, "h200-nvswitch"),
			Workload: model.Workload{KVDtype: model.FP8}, Options: sim.Options{CUDAGraphs: true, Engine: ref}}
		s := mustNew(t, Deployment{Scenario: sc, Engine: EngineOptions{MaxNumSeqs: c.maxSeqs}})
		if got := s.coster.CaptureSizes(); !slices.Equal(got, c.want) {
			t.Errorf("%s: capture sizes %v, want %v", c.name, got, c.want)
		}
		if c.maxSeqs != 100 {
			continue
		}
		g := model.GraphCapture{Sizes: s.coster.CaptureSizes()}
		for n := 97; n <= 100; n++ {
			if got, graphed := g.Tokens(n); got != 100 || !graphed {
				t.Errorf("%s: a step of %d pads to %d (graphed %v), want 100", c.name, n, got, graphed)
			}
		}
		if _, graphed := g.Tokens(101); graphed {
			t.Errorf("%s: a step of 101 graphed, want eager above the pool", c.name)
		}
	}
}

// TestSGLangGivenCaptureFollowsRequestPool: a list given (--graph-sizes,
// SGLang's --cuda-graph-bs) stops at the request pool by the same rule as
// the engine's own (get_batch_sizes_to_capture starts from
// server_args.cuda_graph_bs, given or not): on an H200 at TP 8, 1, 2, 4,
// 8, 16, 32, 64, 128 under --max-num-seqs 48 serves 1..32 and 48; under
// the engine's own pool (at least 2,048) the given list stands.
func TestSGLangGivenCaptureFollowsRequestPool(t *testing.T) {
	ref, err := engprof.ParseRef("sglang@0.5")
	if err != nil {
		t.Fatal(err)
	}
	given := []int{1, 2, 4, 8, 16, 32, 64, 128}
	for _, c := range []struct {
		maxSeqs int
		want    []int
	}{{48, []int{1, 2, 4, 8, 16, 32, 48}}, {0, given}} {
		sc := sim.Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8}, Topo: mustBox(t, "h200-nvswitch"),
			Workload: model.Workload{KVDtype: model.FP8}, Options: sim.Options{CUDAGraphs: true, Engine: ref, GraphSizes: given}}
		s := mustNew(t, Deployment{Scenario: sc, Engine: EngineOptions{MaxNumSeqs: c.maxSeqs}})
		if got := s.coster.CaptureSizes(); !slices.Equal(got, c.want) {
			t.Errorf("--max-num-seqs %d: capture sizes %v, want %v", c.maxSeqs, got, c.want)
		}
	}
}
