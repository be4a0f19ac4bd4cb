package advise

import (
	"fmt"
	"math"
	"strings"

	"github.com/tpscope/tpscope/sim"
)

// Where a speculative method pays. A speculative step costs more than a
// plain one (the verify pass runs batch x (1 + K) tokens, the draft passes
// their own kernels and all-reduces) and yields more tokens per sequence,
// as many as the acceptance gives; so it pays where
//
//	tokens per step (acceptance) / spec step >= 1 / plain step,
//
// and breaks even at tokens per step = spec step / plain step. advise
// prices both steps at each batch of its sweep (the baseline's context)
// and reports, per batch, that break-even as a per-token acceptance of a
// chain (a + a^2 + ... + a^K = break-even - 1) and as a draft acceptance
// rate (vLLM's accepted / drafted: (break-even - 1) / K); and, per
// acceptance level, the largest batch up to which the method pays
// (gains at least the threshold at every batch of the sweep up to it).
// The step times do not depend on the acceptance, so one pair of
// predictions per batch answers every level.

// SpecAdvice is a speculative row's break-even and where it pays.
type SpecAdvice struct {
	Method string `json:"method"`
	// Tokens is K, Steps the draft passes (K for a chain).
	Tokens int `json:"spec_tokens"`
	Steps  int `json:"draft_steps"`
	// TokensPerStep is what the row was priced at, and AcceptSource the
	// figure it came from.
	TokensPerStep float64 `json:"tokens_per_step"`
	AcceptSource  string  `json:"accept_source"`
	// PricedPerToken is that figure as a chain's per-token acceptance.
	PricedPerToken float64 `json:"priced_per_token"`
	// BreakEven at the baseline's batch and context.
	BreakEven SpecBreakEven `json:"break_even"`
	// ByBatch: the sweep's batches at the baseline's context.
	ByBatch []SpecBatch `json:"by_batch,omitempty"`
	// PaysUpTo: per acceptance level (a chain's per-token rate), the
	// largest batch of the sweep up to which the method gains at least the
	// threshold at every batch (0: not even the first).
	PaysUpTo []SpecPays `json:"pays_up_to,omitempty"`
	Context  int        `json:"context"`
}

// SpecBreakEven is the acceptance at which a speculative step yields as
// many tokens per second as the plain step.
type SpecBreakEven struct {
	// TokensPerStep = spec step / plain step.
	TokensPerStep float64 `json:"tokens_per_step"`
	// PerToken is a chain's per-token acceptance giving it, DraftRate the
	// draft acceptance rate; Never when even every draft accepted (1 + K
	// tokens) falls short.
	PerToken  float64 `json:"per_token"`
	DraftRate float64 `json:"draft_rate"`
	Never     bool    `json:"never,omitempty"`
}

// SpecBatch is one batch of the sweep.
type SpecBatch struct {
	Batch      int     `json:"batch"`
	StepUs     float64 `json:"step_us"`
	BaseStepUs float64 `json:"base_step_us"`
	// GainFrac is the tokens/s gain at the priced acceptance.
	GainFrac  float64       `json:"gain_frac"`
	BreakEven SpecBreakEven `json:"break_even"`
	Fits      bool          `json:"fits"`
}

// SpecPays is one acceptance level's reach.
type SpecPays struct {
	PerToken  float64 `json:"per_token"`
	UpToBatch int     `json:"up_to_batch"`
}

// specAcceptLevels are the per-token acceptance levels advise reports.
var specAcceptLevels = []float64{0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}

// breakEven is the acceptance at which a spec step of specUs matches a
// plain step of baseUs with steps draft passes.
func breakEven(specUs, baseUs float64, steps int) SpecBreakEven {
	be := SpecBreakEven{TokensPerStep: specUs / baseUs}
	need := be.TokensPerStep - 1
	switch {
	case need <= 0:
		return be // pays at any acceptance
	case need > float64(steps):
		be.Never, be.PerToken, be.DraftRate = true, 1, 1
		return be
	}
	be.PerToken = perTokenForMean(need, steps)
	be.DraftRate = need / float64(steps)
	return be
}

// perTokenForMean is the per-token rate a whose chain of k drafts accepts
// mean drafts on average (a + a^2 + ... + a^k = mean; 1 when mean >= k):
// sim's conversion of a draft acceptance rate measured at k drafts.
func perTokenForMean(mean float64, k int) float64 {
	if mean <= 0 || k <= 0 {
		return 0
	}
	return sim.SpecAccept{DraftRate: mean / float64(k), AtTokens: k}.Positions(k)[0]
}

// chainTokens is 1 + a + ... + a^k.
func chainTokens(a float64, k int) float64 {
	t, p := 1.0, 1.0
	for i := 0; i < k; i++ {
		p *= a
		t += p
	}
	return t
}

// adviseSpec fills the speculative rows' SpecAdvice (see the model
// above); rows without a prediction are left alone.
func adviseSpec(adv *Advice, in Input, ev *sim.Evaluator, b sim.Scenario) {
	entries := map[string]*Entry{}
	for i := range in.Entries {
		entries[in.Entries[i].Name] = &in.Entries[i]
	}
	for i := range adv.Rows {
		r := &adv.Rows[i]
		e := entries[r.Entry]
		if r.Kind != "speculative" || r.Error != "" || r.With == nil || r.Without == nil || e == nil {
			continue
		}
		with, without := b, b
		var err error
		if r.InBaseline {
			without, err = e.Revert(b)
		} else {
			with, err = e.Apply(b)
		}
		if err != nil {
			continue
		}
		y := with.SpecYield()
		if y == nil {
			continue
		}
		steps := with.Build.Spec.DraftSteps(with.Workload)
		sa := &SpecAdvice{Method: string(y.Method), Tokens: with.Workload.SpecTokens, Steps: steps, TokensPerStep: y.TokensPerStep,
			AcceptSource: y.Source, PricedPerToken: perTokenForMean(y.TokensPerStep-1, steps), Context: b.Workload.Context}
		sa.BreakEven = breakEven(r.With.StepUs, r.Without.StepUs, steps)
		if !in.NoSweep {
			batches := in.Batches
			for _, bt := range batches {
				cw, cb := with, without
				cw.Workload.Batch, cb.Workload.Batch = bt, bt
				sw, err1 := ev.Evaluate(cw)
				sb, err2 := ev.Evaluate(cb)
				if err1 != nil || err2 != nil || sw.StepUs <= 0 || sb.StepUs <= 0 {
					continue
				}
				c := SpecBatch{Batch: bt, StepUs: sw.StepUs, BaseStepUs: sb.StepUs, BreakEven: breakEven(sw.StepUs, sb.StepUs, steps),
					Fits: sw.Memory != nil && sw.Memory.Fits && sb.Memory != nil && sb.Memory.Fits}
				c.GainFrac = y.TokensPerStep*sb.StepUs/sw.StepUs - 1
				sa.ByBatch = append(sa.ByBatch, c)
			}
			for _, a := range specAcceptLevels {
				p := SpecPays{PerToken: a}
				for _, c := range sa.ByBatch {
					if !c.Fits || chainTokens(a, steps)*c.BaseStepUs/c.StepUs-1 < in.ThresholdFrac {
						break
					}
					p.UpToBatch = c.Batch
				}
				sa.PaysUpTo = append(sa.PaysUpTo, p)
			}
		}
		r.Spec = sa
	}
}

// String says where the method pays in one line: its break-even at the
// baseline and per batch, and how far each acceptance level carries it.
func (sa *SpecAdvice) String() string {
	if sa == nil {
		return ""
	}
	be := func(b SpecBreakEven) string {
		switch {
		case b.Never:
			return "never (not even with every draft accepted)"
		case b.PerToken <= 0:
			return "any acceptance"
		}
		return fmt.Sprintf("per-token %.2f (draft rate %.2f, %.2f tokens/step)", b.PerToken, b.DraftRate, b.TokensPerStep)
	}
	parts := []string{fmt.Sprintf("k %d at %.2f tokens/step (per-token %.2f); breaks even at %s", sa.Tokens, sa.TokensPerStep, sa.PricedPerToken, be(sa.BreakEven))}
	var byB []string
	for _, c := range sa.ByBatch {
		if c.BreakEven.Never {
			byB = append(byB, fmt.Sprintf("b%d:never", c.Batch))
		} else {
			byB = append(byB, fmt.Sprintf("b%d:%.2f", c.Batch, c.BreakEven.PerToken))
		}
	}
	if len(byB) > 0 {
		parts = append(parts, fmt.Sprintf("break-even per-token acceptance by batch at context %d: %s", sa.Context, strings.Join(byB, " ")))
	}
	// Each reach once, at the lowest level that attains it: "up to batch
	// 8 at acceptance >= 0.6".
	var pays []string
	last := 0
	for _, p := range sa.PaysUpTo {
		if p.UpToBatch > last {
			pays = append(pays, fmt.Sprintf("up to batch %d at acceptance >= %.1f", p.UpToBatch, p.PerToken))
			last = p.UpToBatch
		}
	}
	switch {
	case len(pays) > 0:
		parts = append(parts, "pays "+strings.Join(pays, ", "))
	case len(sa.PaysUpTo) > 0:
		parts = append(parts, fmt.Sprintf("pays at no batch of the sweep even at per-token acceptance %.1f", sa.PaysUpTo[len(sa.PaysUpTo)-1].PerToken))
	}
	return strings.Join(parts, "; ")
}

// BestSpecBreakEven is the lowest break-even per-token acceptance over a
// row's batches (for ranking); NaN without a sweep.
func (sa *SpecAdvice) BestSpecBreakEven() float64 {
	if sa == nil || len(sa.ByBatch) == 0 {
		return math.NaN()
	}
	best := math.Inf(1)
	for _, c := range sa.ByBatch {
		if !c.BreakEven.Never && c.BreakEven.PerToken < best {
			best = c.BreakEven.PerToken
		}
	}
	return best
}
