package sim

import "github.com/tpscope/tpscope/model"

// memoryFit checks that the scenario's weights, activation workspace and
// the KV cache its sequences need fit in one GPU (model.KVCapacity: vLLM's
// budget, gpu_memory_utilization x memory). The KV cache needed is the
// real sequences per attention group (d.SeqsPerGroup: padding holds no
// cache) x (context + the step's new tokens) x bytes per token per GPU;
// every rank of a group holds the same latent cache (serving-facts.md),
// divided by DCP.
func (p *Predictor) memoryFit(sc Scenario, d model.Deployment) *MemoryFit {
	plan := sc.Plan.Normalized()
	w := sc.Workload
	c := model.KVCapacity(sc.Arch, plan, w, sc.Build, float64(p.dev.MemBytes), p.opts.GPUMemUtilFrac)
	tokens := int64(d.SeqsPerGroup) * int64(w.Context+1+w.SpecTokens)
	m := &MemoryFit{
		DeviceBytes:      p.dev.MemBytes,
		UsableBytes:      int64(c.Utilization * c.GPUMemBytes),
		WeightBytes:      int64(c.WeightBytes),
		ActivationBytes:  int64(c.ActivationBytes),
		KVBytesPerToken:  c.KVBytesPerToken,
		KVBytes:          int64(float64(tokens) * c.KVBytesPerToken),
		KVCapacityTokens: c.KVCapacityTokens,
		KVTokensNeeded:   tokens,
	}
	short := c.WeightsDoNotFitBy
	if tokens > c.KVCapacityTokens {
		short += float64(m.KVBytes) - c.KVBytes
	}
	m.Fits = short <= 0
	if !m.Fits {
		m.ShortfallGB = short / 1e9
	}
	return m
}
