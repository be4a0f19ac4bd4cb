package sim

import (
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
)

// TestSGLangVerifyGraphsStopAtRequestPool: under speculation SGLang
// captures its target-verify graphs (bs sequences x num_draft_tokens)
// for the batches of its speculative list up to cuda_graph_max_bs and up
// to its request pool, max_running_requests (48 unless given), with the
// pool's size added where the list ran past it (cuda_graph_runner.py
// get_batch_sizes_to_capture); the draft passes capture the same
// batches. On an H200 at TP 8 (cuda_graph_max_bs 512): MTP 1 at 45
// requests pads to the 48 graph, 96 tokens; at 50 the engine runs with
// --max-running-requests 50 and captures 50, 100 tokens (not 52, 104);
// MTP 3 at 100 captures 100, 400 tokens (not 104, 416); at 600 the pool
// is above 512 and the step runs eagerly; DP 8 of 49 (7 a group, pool
// 56) replays the 7 graph, 14 tokens; n-gram (K 3) at 50 captures 50, 200
// tokens, and drafts on the host: no draft passes. The engine line says
// the verify graphs stop there, not "decode graphs to batch 512", and the
// scenario's capture sizes (which advise reads) end at the same batch.
func TestSGLangVerifyGraphsStopAtRequestPool(t *testing.T) {
	for _, c := range []struct {
		name      string
		spec      model.SpecMethod
		k, tp, dp int
		batch     int
		graph     int // 0: eager
		top       int // the largest verify batch captured
		line, not string
	}{
		{"mtp1 b45", model.SpecMTP, 1, 8, 1, 45, 96, 48, "verify graphs to batch 48 of 2 tokens a sequence, the draft passes at the same batches (sglang@0.5's speculative list up to the request pool, max_running_requests 48 for NEXTN, below cuda_graph_max_bs 512", "decode graphs"},
		{"mtp1 b50", model.SpecMTP, 1, 8, 1, 50, 100, 50, "verify graphs to batch 50 of 2 tokens a sequence", "decode graphs"},
		{"mtp3 b100", model.SpecMTP, 3, 8, 1, 100, 400, 100, "verify graphs to batch 100 of 4 tokens a sequence", "decode graphs"},
		{"mtp1 b600", model.SpecMTP, 1, 8, 1, 600, 0, 512, "verify graphs to batch 512 of 2 tokens a sequence, the draft passes at the same batches (sglang@0.5's speculative list up to cuda_graph_max_bs 512 for 143771 MiB at tp_size 8, at most the request pool of 600; larger batches eager)", "decode graphs"},
		{"mtp1 dp8 b49", model.SpecMTP, 1, 1, 8, 49, 14, 56, "verify graphs to batch 56 of 2 tokens a sequence", "decode graphs"},
		{"ngram3 b50", model.SpecNgram, 3, 8, 1, 50, 200, 50, "verify graphs to batch 50 of 4 tokens a sequence (", "draft passes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := graphMaxBSScenario(t, "nvswitch:8xh200-sxm", c.tp, c.batch, nil)
			sc.Plan.DP, sc.Plan.EP = c.dp, c.dp > 1
			sc.Workload.SpecTokens = c.k
			sc.Workload.Context = 512
			sc.Build.Spec = model.Spec{Method: c.spec}
			pr, s, err := Predict(sc)
			if err != nil {
				t.Fatal(err)
			}
			if s.Deploy.Graphed != (c.graph > 0) || (c.graph > 0 && s.Deploy.GraphTokens != c.graph) {
				t.Errorf("graphed %v, graph of %d tokens; want %d (0: eager)", s.Deploy.Graphed, s.Deploy.GraphTokens, c.graph)
			}
			// The scenario's capture sizes (advise reads them) are the
			// ones priced: the largest, top x (1 + K) tokens.
			if sizes, err := sc.CaptureSizes(); err != nil || len(sizes) == 0 || sizes[len(sizes)-1] != c.top*(1+c.k) {
				t.Errorf("capture sizes %v (%v), want the largest %d x %d", sizes, err, c.top, 1+c.k)
			}
			if !strings.Contains(pr.Engine, c.line) || strings.Contains(pr.Engine, c.not) {
				t.Errorf("engine line %q: want %q in it, not %q", pr.Engine, c.line, c.not)
			}
		})
	}
	// Without speculation the decode list holds, to cuda_graph_max_bs.
	pr, _, err := Predict(graphMaxBSScenario(t, "nvswitch:8xh200-sxm", 8, 50, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pr.Engine, "decode graphs to batch 512 (cuda_graph_max_bs for 143771 MiB at tp_size 8") || strings.Contains(pr.Engine, "verify") {
		t.Errorf("no speculation: engine line %q, want the decode graphs to batch 512", pr.Engine)
	}
}
