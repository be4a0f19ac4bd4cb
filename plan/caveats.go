package plan

import (
	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/sim"
)

// capacityCaveat: sim's TestPublicKimiKVCapacity and the seed scenario's
// report, both vLLM's pools; what the pools leave out depends on the
// engine's rule (engine profiles' kv_pool): vLLM's fraction is of the
// whole GPU less weights and activations, SGLang's reserve (1 -
// mem_fraction_static) holds its graphs and activations, TensorRT-LLM's
// fraction is of what its profiling forward leaves.
const (
	capacityCaveat      = "KV capacity and max concurrency leave out CUDA-graph pools (but the estimate --cuda-graph-mem-gib gives), NCCL buffers and the CUDA context: public vLLM pools on 8x RTX PRO 6000 measured 11 % below tpscope's at the runs' own --max-num-batched-tokens, and the seed scenario reported ~11.7 GB of KV per GPU where tpscope gives 14.6 GB at gpu_memory_utilization 0.9 (16.6 at vLLM 0.24's 0.92): read them as upper bounds"
	capacityCaveatOther = "KV capacity and max concurrency leave out the CUDA context and NCCL buffers (and what the engine's own rule keeps outside its pool beyond what its profile states): read them as upper bounds"
)

// capacityCaveatFor is the capacity caveat of a sweep whose best point
// runs under eng (the zero Ref: vLLM, the default).
func capacityCaveatFor(eng engprof.Ref) string {
	if eng.Name == "" || eng.Name == engprof.DefaultEngine {
		return capacityCaveat
	}
	return capacityCaveatOther
}

// Caveats lists the caveats of a sweep: the capacity caveat (its evidence
// vLLM's, said only of vLLM's pools), then those of the best point's
// scenario on its box (sim.Predictor.Caveats, which every prediction
// carries); cfgs and r.Points are index-aligned (Evaluate).
func Caveats(cfgs []Config, r *Result) []string {
	if r == nil || r.Best < 0 || r.Best >= len(cfgs) {
		eng := engprof.Ref{}
		if len(cfgs) > 0 {
			eng = cfgs[0].Scenario.Options.Engine
		}
		return []string{capacityCaveatFor(eng)}
	}
	c := &cfgs[r.Best].Scenario
	out := []string{capacityCaveatFor(c.Options.Engine)}
	// The best point's pool priced without the CUDA-graph estimate its
	// engine takes off it (sim.KVBudget.GraphUnpriced).
	if prof, err := engprof.Lookup(c.Options.Engine); err == nil {
		if b, ok := sim.FixedKVBudget(prof, c.Options); ok && b.GraphCaveat() != "" {
			out = append(out, b.GraphCaveat())
		}
	}
	p, err := c.NewPredictor()
	if err != nil {
		return out
	}
	return append(out, p.Caveats(*c)...)
}
