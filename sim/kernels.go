package sim

import "fmt"

// tritonMLAFixedSplits is NUM_KV_SPLITS of the vLLM builds whose
// TRITON_MLA used a fixed split count (v1/attention/backends/mla/
// triton_mla.py: num_kv_splits = 4, including the builds that first
// carried FP8 KV support, vLLM PR #34597): the vllm@0.16-nightly profile.
// vLLM 0.24 sizes the splits from the sequence length and the SM count
// instead (the vllm@0.24 profile's split rule).
const tritonMLAFixedSplits = 4

// SetTritonMLASplits prices a split_kv attention backend (TRITON_MLA)
// with a fixed KV-split count of n whatever the engine profile says, or,
// with n = 0 (the default), as the profile says. The engine build decides
// how many CTAs read a long cache at small batch: 4 splits leave batch 1
// at 150K tokens to 4 SMs. Prefer --engine vllm@0.16-nightly, whose
// profile carries the fixed 4.
func (p *Predictor) SetTritonMLASplits(n int) error {
	if n < 0 || n > 1<<16 {
		return fmt.Errorf("sim: TRITON_MLA splits %d: want 0 (the engine profile's) or a fixed count >= 1", n)
	}
	p.cm.tritonFixedSplits = n
	return nil
}
