package sim

import (
	"math"

	"github.com/tpscope/tpscope/model"
)

// bucketSpec is bucket for an iteration whose decoding sequences verify
// SpecTokens drafts each: the sequences are rounded up (their tokens are
// 1 + SpecTokens each, so rounding the sequences rounds the tokens by the
// same relative step), kept within the CUDA-graph size the real tokens
// padded to; the prefill part and the pair sums round as bucket rounds
// them. The bound of the memo's comment holds with the sequences in place
// of the tokens.
func (c *IterationCoster) bucketSpec(it model.Iteration, padded int64, graphed bool) (model.Iteration, iterKey, bool, error) {
	b := c.bits
	per := int64(1 + it.SpecTokens)
	rep := model.Iteration{KVDtype: it.KVDtype, SpecTokens: it.SpecTokens}
	if it.PrefillSeqs > 0 {
		rep.PrefillSeqs = int(roundUpBits(int64(it.PrefillSeqs), b))
		rep.PrefillTokens = max(rowUp(it.PrefillTokens, b), int64(rep.PrefillSeqs))
		rep.PrefillPrefixTokens = rowUp(it.PrefillPrefixTokens, b)
		fp, fx := float64(rep.PrefillTokens), float64(rep.PrefillPrefixTokens)
		rep.PrefillCausalPairs = math.Min(math.Max(float64(roundUpBits(int64(math.Ceil(it.PrefillCausalPairs)), b)), fp), fp*(fp+1)/2)
		rep.PrefillPrefixPairs = math.Min(float64(roundUpBits(int64(math.Ceil(it.PrefillPrefixPairs)), b)), fp*fx)
	}
	if it.DecodeSeqs > 0 {
		d := roundUpBits(int64(it.DecodeSeqs), b)
		if graphed {
			// Stay within the captured size the real tokens padded to.
			d = max(int64(it.DecodeSeqs), min(d, (padded-rep.PrefillTokens)/per))
		}
		rep.DecodeSeqs = int(d)
		rep.DecodeKVTokens = max(roundUpBits(it.DecodeKVTokens, b), d)
	}
	if graphed {
		rep.PadTokens = int(max(0, padded-rep.Tokens()))
	}
	return rep, iterKey{rep: rep, graphed: graphed}, graphed, nil
}
