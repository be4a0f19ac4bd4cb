package sim

import "fmt"

// TritonMLAFixedSplits is NUM_KV_SPLITS of the vLLM builds whose
// TRITON_MLA used a fixed split count (v1/attention/backends/mla/
// triton_mla.py: num_kv_splits = 4, including the builds that first
// carried FP8 KV support, vLLM PR #34597); vLLM 0.24 sizes the splits
// from the sequence length and the SM count instead (tritonMLASplits).
const TritonMLAFixedSplits = 4

// SetTritonMLASplits prices TRITON_MLA decode with a fixed NUM_KV_SPLITS
// of n (TritonMLAFixedSplits for the vLLM builds that had one), or, with
// n = 0 (the default), with vLLM 0.24's sizing: the power of two at or
// above the longest sequence / 512, at most 2 x the SM count. The engine
// build decides how many CTAs read a long cache at small batch: 4 splits
// leave batch 1 at 150K tokens to 4 SMs.
func (p *Predictor) SetTritonMLASplits(n int) error {
	if n < 0 || n > 1<<16 {
		return fmt.Errorf("sim: TRITON_MLA splits %d: want 0 (vLLM 0.24's sizing) or a fixed count >= 1", n)
	}
	p.cm.tritonFixedSplits = n
	return nil
}
