package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// graphMaxBSScenario is a decode step of the tiny model under SGLang 0.5
// with CUDA graphs (its default) on box at tp, batch sequences.
func graphMaxBSScenario(t *testing.T, box string, tp, batch int, sizes []int) Scenario {
	t.Helper()
	ref, err := engprof.ParseRef("sglang@0.5")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Resolve(box, 0)
	if err != nil {
		t.Fatal(err)
	}
	return Scenario{Arch: mustPreset(t, "tiny-mla-moe"), Plan: model.Plan{TP: tp}, Topo: topo,
		Options:  Options{Engine: ref, CUDAGraphs: true, GraphSizes: sizes},
		Workload: model.Workload{Phase: model.Decode, Batch: batch, Context: 4096}}
}

// TestSGLangGraphMaxBSByGPU: SGLang captures decode graphs only up to its
// cuda_graph_max_bs, which it sets by the GPU's memory and tp_size
// (server_args.py _handle_gpu_memory_settings: 32 below 60 GiB at TP < 4,
// 160 at TP >= 4; 256 below 160 GiB at TP < 4, 512 at TP >= 4). A decode
// batch above it runs eagerly: one host launch per kernel, at the
// profile's eager host cost (47 us), where a graph is one launch. The
// same value sizes the KV reserve: reserved = 512 + 1.5 x max(chunk,
// 2048) + 2 x cuda_graph_max_bs + 1024 x tp / 8 MiB (at least 10240 above
// 60 GiB), mem_fraction_static = round((MiB - reserved) / MiB, 3).
//
//   - L40S (46068 MiB), TP 8: chunk 4096, max bs 160: 512 + 6144 + 320 +
//     1024 = 8000 MiB, (46068 - 8000) / 46068 = 0.82634 -> 0.826.
//   - L40S, TP 8, --graph-sizes to 512 (SGLang's --cuda-graph-bs: its
//     largest is cuda_graph_max_bs): 512 + 6144 + 1024 + 1024 = 8704 MiB,
//     37364 / 46068 = 0.81106 -> 0.811; 200 is captured.
//   - H100 (81920 MiB), TP 2: chunk 8192, max bs 256: 512 + 12288 + 512 +
//     256 = 13568 MiB (above the 10240 floor), 68352 / 81920 = 0.834375
//     -> 0.834.
//   - H100, TP 8: max bs 512: 512 + 12288 + 1024 + 1024 = 14848 MiB,
//     67072 / 81920 = 0.81875 -> 0.819.
//   - H200 (143771 MiB, what nvidia-smi reports and SGLang reads), TP 8:
//     max bs 512: 14848 MiB, 128923 / 143771 = 0.89672 -> 0.897 (the
//     "stock mem_fraction_static=0.897" public SGLang runs of DeepSeek-V3.2
//     at TP 8 on 8 x H200 report).
//   - RTX PRO 6000 (97887 MiB), TP 8: chunk 8192, max bs 512: 14848 MiB,
//     83039 / 97887 = 0.84832 -> 0.848.
func TestSGLangGraphMaxBSByGPU(t *testing.T) {
	for _, c := range []struct {
		name      string
		box       string
		tp, batch int
		sizes     []int
		graph     int // tokens of the graph replayed; 0: eager
		maxBS     int
		frac      float64
	}{
		{"L40S tp8 above 160", "pcie-2s:8xl40s", 8, 200, nil, 0, 160, 0.826},
		{"L40S tp8 at 160", "pcie-2s:8xl40s", 8, 160, nil, 160, 160, 0.826},
		{"L40S tp8 --graph-sizes to 512", "pcie-2s:8xl40s", 8, 200, []int{1, 2, 4, 8, 200, 512}, 200, 512, 0.811},
		{"H100 tp2 above 256", "nvswitch:8xh100-sxm", 2, 300, nil, 0, 256, 0.834},
		{"H100 tp8", "nvswitch:8xh100-sxm", 8, 300, nil, 304, 512, 0.819},
		{"H200 tp8", "nvswitch:8xh200-sxm", 8, 500, nil, 512, 512, 0.897},
		{"RTX PRO 6000 tp8", "rtxpro6000-2s", 8, 500, nil, 512, 512, 0.848},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := graphMaxBSScenario(t, c.box, c.tp, c.batch, c.sizes)
			pr, s, err := Predict(sc)
			if err != nil {
				t.Fatal(err)
			}
			if pr.GraphTokens != c.graph || pr.Graphed != (c.graph > 0) || s.Deploy.Graphed != (c.graph > 0) {
				t.Errorf("graph of %d tokens (graphed %v, schedule %v), want %d (0: eager)", pr.GraphTokens, pr.Graphed, s.Deploy.Graphed, c.graph)
			}
			// Eager, the host launches every kernel at 47 us; a graph
			// is one launch.
			if eager := float64(pr.Kernels) * 47; (c.graph == 0) != (pr.HostUs >= eager) {
				t.Errorf("host launch %.0f us for %d kernels: want %s %.0f us", pr.HostUs, pr.Kernels, map[bool]string{true: "at least", false: "below"}[c.graph == 0], eager)
			}
			b := pr.Memory.Budget
			if want := fmt.Sprintf("cuda_graph_max_bs %d,", c.maxBS); !strings.Contains(b.From, want) || math.Abs(b.Frac-c.frac) > 1e-9 {
				t.Errorf("kv budget %.3f (%s), want %.3f with %q", b.Frac, b.From, c.frac, want)
			}
		})
	}
}

// TestSGLangGraphMaxBSServingAndSpec: the serving simulation's steps and
// a speculative step stop at the same cuda_graph_max_bs. On an L40S at TP
// 8 (160) a decode iteration of 200 sequences runs eagerly and one of 160
// replays its graph; SGLang's speculative list (sequences <= 160 of
// 1..8, 10..32/2, 40..64/4, 72..256/8, 272../16) x (1 + 3) tokens
// verifies 160 MTP sequences in a graph of 640 tokens and runs 161
// eagerly, where an H200 at TP 8 (512) captures 161 sequences, 644
// tokens: the engine runs 161 requests with --max-running-requests 161,
// and its list stops at that request pool with the pool's size added
// (cuda_graph_runner.py get_batch_sizes_to_capture), rather than padding
// to the list's 168.
func TestSGLangGraphMaxBSServingAndSpec(t *testing.T) {
	sc := graphMaxBSScenario(t, "pcie-2s:8xl40s", 8, 1, nil)
	p, err := sc.NewPredictor()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewIterationCoster(p, sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		seqs    int
		graphed bool
	}{{160, true}, {200, false}} {
		_, graphed, err := c.graph(model.Iteration{DecodeSeqs: d.seqs, DecodeKVTokens: int64(d.seqs) * 4096})
		if err != nil || graphed != d.graphed {
			t.Errorf("L40S serving iteration of %d decodes: graphed %v (%v), want %v", d.seqs, graphed, err, d.graphed)
		}
	}
	for _, d := range []struct {
		box          string
		batch, graph int
	}{{"pcie-2s:8xl40s", 160, 640}, {"pcie-2s:8xl40s", 161, 0}, {"nvswitch:8xh200-sxm", 161, 644}} {
		sc := graphMaxBSScenario(t, d.box, 8, d.batch, nil)
		sc.Workload.SpecTokens = 3
		sc.Build.Spec = model.Spec{Method: model.SpecMTP}
		pr, _, err := Predict(sc)
		if err != nil {
			t.Fatal(err)
		}
		if pr.GraphTokens != d.graph || pr.Graphed != (d.graph > 0) {
			t.Errorf("%s MTP 3, batch %d: graph of %d tokens (graphed %v), want %d (0: eager)", d.box, d.batch, pr.GraphTokens, pr.Graphed, d.graph)
		}
	}
}

// TestSGLangGivenGraphSizesStopAtRequestPool: SGLang's --cuda-graph-bs
// replaces its capture list but not its request-pool rule:
// get_batch_sizes_to_capture starts from server_args.cuda_graph_bs, given
// or its default alike, adds req_to_token_pool.size where the list's
// largest is above it and keeps bs <= that size. --graph-sizes 1, 2, 4,
// 8, 16, 32, 64, 128 with --max-num-seqs 48 (--max-running-requests 48)
// on an H200 at TP 8 captures 1, 2, 4, 8, 16, 32 and 48: a decode batch
// of 40 pads to 48, not 64, and the engine line says the given list stops
// at the pool; a pool of 49 captures a batch of 49 at 49, not 64. Without
// a limit (the engine's own pool, at least 2,048) and under vLLM, which
// has no such rule, the given list stands: 40 pads to 64.
func TestSGLangGivenGraphSizesStopAtRequestPool(t *testing.T) {
	given := []int{1, 2, 4, 8, 16, 32, 64, 128}
	vllm, err := engprof.ParseRef("vllm@0.24")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		vllm    bool
		maxSeqs int
		batch   int
		graph   int // 0: eager
		sizes   []int
		line    string
	}{
		{"sglang pool 48 b40", false, 48, 40, 48, []int{1, 2, 4, 8, 16, 32, 48}, "decode graphs to batch 48 (--graph-sizes up to the request pool, max_running_requests 48 as given, below the largest size given, 128; larger batches eager)"},
		{"sglang pool 48 b48", false, 48, 48, 48, []int{1, 2, 4, 8, 16, 32, 48}, "decode graphs to batch 48 (--graph-sizes"},
		{"sglang pool 32 b32", false, 32, 32, 32, []int{1, 2, 4, 8, 16, 32}, "decode graphs to batch 32 (--graph-sizes up to the request pool, max_running_requests 32 as given"},
		{"sglang no limit b40", false, 0, 40, 64, given, ""},
		{"vllm max-num-seqs 48 b40", true, 48, 40, 64, given, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := graphMaxBSScenario(t, "nvswitch:8xh200-sxm", 8, c.batch, given)
			sc.Options.MaxNumSeqs = c.maxSeqs
			if c.vllm {
				sc.Options.Engine = vllm
			}
			pr, s, err := Predict(sc)
			if err != nil {
				t.Fatal(err)
			}
			if s.Deploy.Graphed != (c.graph > 0) || (c.graph > 0 && s.Deploy.GraphTokens != c.graph) {
				t.Errorf("graphed %v, graph of %d tokens; want %d (0: eager)", s.Deploy.Graphed, s.Deploy.GraphTokens, c.graph)
			}
			if got, err := sc.CaptureSizes(); err != nil || !slices.Equal(got, c.sizes) {
				t.Errorf("capture sizes %v (%v), want %v", got, err, c.sizes)
			}
			if c.line != "" && !strings.Contains(pr.Engine, c.line) {
				t.Errorf("engine line %q, want %q", pr.Engine, c.line)
			}
			if c.line == "" && strings.Contains(pr.Engine, "request pool") {
				t.Errorf("engine line %q: no pool stops the given list", pr.Engine)
			}
		})
	}
	// The pool's own size is captured where the list ran past it.
	sc := graphMaxBSScenario(t, "nvswitch:8xh200-sxm", 8, 49, given)
	sc.Options.MaxNumSeqs = 49
	if _, s, err := Predict(sc); err != nil || !s.Deploy.Graphed || s.Deploy.GraphTokens != 49 {
		t.Errorf("--max-num-seqs 49, batch 49: graphed %v of %d tokens (%v), want the pool's own 49 graph", s.Deploy.Graphed, s.Deploy.GraphTokens, err)
	}
}
