package advise

// Gain is what an optimization is worth against a baseline, the one
// definition advise and compare share. StepPct = (base step - step) / base
// step x 100: how much shorter one step gets (negative: longer).
// TokensPerSPct = (tokens/s / base tokens/s - 1) x 100 sits beside it: it
// differs from the step's gain when the optimization changes what one step
// yields (accepted MTP drafts, another batch), and is what verdicts and
// rankings use.
type Gain struct {
	StepPct       float64 `json:"step_gain_pct"`
	TokensPerSPct float64 `json:"tokens_per_s_gain_pct"`
}

// GainOf is the gain of a step of stepUs serving tokPerS over a baseline
// step of baseUs serving baseTokPerS. Non-positive inputs give a zero
// Gain.
func GainOf(baseUs, stepUs, baseTokPerS, tokPerS float64) Gain {
	if baseUs <= 0 || stepUs <= 0 || baseTokPerS <= 0 || tokPerS <= 0 {
		return Gain{}
	}
	return Gain{StepPct: (baseUs - stepUs) / baseUs * 100, TokensPerSPct: (tokPerS/baseTokPerS - 1) * 100}
}

// Speedup is the tokens/s multiplier the gain stands for (1.25 for +25 %).
func (g Gain) Speedup() float64 { return 1 + g.TokensPerSPct/100 }

// StepSpeedup is base step / step (1.25 for a step 20 % shorter).
func (g Gain) StepSpeedup() float64 {
	if g.StepPct >= 100 {
		return 0
	}
	return 100 / (100 - g.StepPct)
}
