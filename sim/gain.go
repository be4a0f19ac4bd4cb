package sim

// Gain is what an optimization is worth against a baseline, the one
// definition advise and compare share. StepPct = (base step - step) / base
// step x 100: how much shorter one step gets (negative: longer). Speedup =
// base step / step. TokensPerSPct = (tokens/s / base tokens/s - 1) x 100
// sits beside them: it differs from StepPct when the optimization changes
// what one step yields (accepted MTP drafts), and is what verdicts test.
type Gain struct {
	StepPct       float64 `json:"step_gain_pct"`
	Speedup       float64 `json:"speedup"`
	TokensPerSPct float64 `json:"tokens_per_s_gain_pct"`
}

// GainOf is the gain of a step of stepUs yielding tokens per sequence
// over a baseline step of baseUs yielding baseTokens. Zero or negative
// steps give a zero Gain.
func GainOf(baseUs, stepUs, baseTokens, tokens float64) Gain {
	if baseUs <= 0 || stepUs <= 0 {
		return Gain{}
	}
	if baseTokens <= 0 || tokens <= 0 {
		baseTokens, tokens = 1, 1
	}
	return Gain{
		StepPct:       (baseUs - stepUs) / baseUs * 100,
		Speedup:       baseUs / stepUs,
		TokensPerSPct: (tokens/stepUs/(baseTokens/baseUs) - 1) * 100,
	}
}
