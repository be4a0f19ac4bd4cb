package sim

import (
	"math"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// An all-reduce fused with the RMSNorm after it runs as FlashInfer's
// all-reduce + RMSNorm kernel, not as the engine's standalone all-reduce:
// a table of the latter (vLLM's custom_allreduce_perf) does not price it.
// The fused op keeps the priors' price, the same as with no tables at
// all; without the fusion the same all-reduces take the table's.
func TestFusedAllReduceNotFromCustomTable(t *testing.T) {
	fusion := Options{CUDAGraphs: true, ARNormFusion: true}
	priors := tinyPredict(t, "h200-nvswitch", fusion, nil)
	tables := tinyPredict(t, "h200-nvswitch", fusion, &fakeSource{checkOK: true, collUs: 7})
	apart := tinyPredict(t, "h200-nvswitch", Options{CUDAGraphs: true}, &fakeSource{checkOK: true, collUs: 7})
	if len(priors.Ops) != len(tables.Ops) || len(apart.Ops) != len(tables.Ops) {
		t.Fatalf("%d / %d / %d ops", len(priors.Ops), len(tables.Ops), len(apart.Ops))
	}
	n := 0
	for i, o := range tables.Ops {
		if o.Kind != model.KindCollective || !strings.HasSuffix(o.ID, ".allreduce") {
			continue
		}
		if i+1 >= len(tables.Ops) || !tables.Ops[i+1].Cost.Fused {
			t.Errorf("%s: no norm fused after it under --ar-norm-fusion", o.ID)
			continue
		}
		n++
		if o.Cost.Source != SourcePrior || math.Abs(o.Cost.Us-priors.Ops[i].Cost.Us) > 1e-9 {
			t.Errorf("%s fused: %.3f us from %q, want the priors' %.3f us", o.ID, o.Cost.Us, o.Cost.Source, priors.Ops[i].Cost.Us)
		}
		if src := apart.Ops[i].Cost.Source; src != "fake collective" {
			t.Errorf("%s unfused: priced from %q, want the table", o.ID, src)
		}
	}
	if n == 0 {
		t.Fatal("no all-reduce found")
	}
}

// SGLang fuses an all-reduce with its RMSNorm only up to 2,048 tokens a
// step (its profile's max_tokens, FUSE_ALLREDUCE_MAX_BATCH_SIZE): a
// longer prefill keeps its norms.
func TestFusionTokenCap(t *testing.T) {
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{CUDAGraphs: true, ARNormFusion: true, Engine: engprof.Ref{Name: "sglang"}}
	p, err := New(mustTopo(t, "h200-nvswitch"), opts)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := engprof.Lookup(opts.Engine)
	if err != nil {
		t.Fatal(err)
	}
	limit := prof.FusionMaxTokens(engprof.FuseAllReduceRMSNorm)
	if limit != 2048 {
		t.Fatalf("sglang's all-reduce + RMSNorm fusion caps at %d tokens, want 2048", limit)
	}
	for _, tc := range []struct {
		tokens int
		fused  bool
	}{{limit, true}, {limit + 1, false}} {
		pr, err := p.PredictScenario(Scenario{Arch: a, Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Prefill, Batch: 1, Context: tc.tokens, KVDtype: model.BF16}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, o := range pr.Ops {
			if o.Kind == model.KindNorm && i > 0 && pr.Ops[i-1].Kind == model.KindCollective {
				n++
				if o.Cost.Fused != tc.fused {
					t.Errorf("%d tokens: %s fused %v, want %v", tc.tokens, o.ID, o.Cost.Fused, tc.fused)
				}
			}
		}
		if n == 0 {
			t.Fatalf("%d tokens: no norm after an all-reduce", tc.tokens)
		}
	}
}
