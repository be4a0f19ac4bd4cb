package plan

// capacityCaveat: sim's TestPublicKimiKVCapacity and the seed scenario's
// report.
const capacityCaveat = "KV capacity and max concurrency leave out CUDA-graph pools, NCCL buffers and the CUDA context: public vLLM pools on 8x RTX PRO 6000 measured 8 % below tpscope's, and the seed scenario reported ~11.7 GB of KV per GPU where tpscope gives 14.6 GB: read them as upper bounds"

// Caveats lists the caveats of a sweep: the capacity caveat, then those
// of the best point's scenario on its box (sim.Predictor.Caveats, which
// every prediction carries); cfgs and r.Points are index-aligned
// (Evaluate).
func Caveats(cfgs []Config, r *Result) []string {
	out := []string{capacityCaveat}
	if r == nil || r.Best < 0 || r.Best >= len(cfgs) {
		return out
	}
	c := &cfgs[r.Best].Scenario
	p, err := c.NewPredictor()
	if err != nil {
		return out
	}
	return append(out, p.Caveats(*c)...)
}
