package plan

import (
	"math"

	"github.com/tpscope/tpscope/sim"
)

// Speculative decoding in plans: a step yields a random number of tokens
// per sequence (sim.SpecYield: mean E, variance V per step), so the time per
// output token differs from request to request. A request of L output
// tokens needs about L / E steps; by the renewal central limit theorem
// the steps it needs have variance L V / E^3, so its time per output
// token, step x steps / L, has mean step / E and standard deviation
// step x sqrt(V / (L E^3)). Plans report the 90th percentile of that
// distribution for a request of TPOTOutputTokens outputs and judge a
// latency SLO by it (the mean when nothing is speculated, whose TPOT does
// not vary).

// TPOTOutputTokens is the output length the TPOT percentile of a plan
// point is given for: 256 tokens (the outputs simulate's default load
// writes).
const TPOTOutputTokens = 256

// z90 is the standard normal's 90th percentile.
const z90 = 1.2815515655446004

// SpecTPOTQuantileMs is the time per output token (ms) at standard-normal
// quantile z of a request of outputTokens outputs, for steps of stepUs
// yielding tokens per step of mean and variance (see above).
func SpecTPOTQuantileMs(stepUs, mean, variance float64, outputTokens int, z float64) float64 {
	if mean <= 0 || outputTokens < 1 {
		return 0
	}
	sd := math.Sqrt(math.Max(0, variance) / (float64(outputTokens) * mean * mean * mean))
	return stepUs / 1e3 * (1/mean + z*sd)
}

// specPoint adds a speculative point's tokens per step and TPOT
// percentile (nothing without speculation).
func specPoint(pt *Point, sum sim.Summary) {
	pt.TokensPerStep = sum.TokensPerStep
	if sum.TokensPerStepVar <= 0 {
		return
	}
	pt.MsPerTokenP90 = SpecTPOTQuantileMs(sum.StepUs, sum.TokensPerStep, sum.TokensPerStepVar, TPOTOutputTokens, z90)
}
