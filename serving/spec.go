package serving

import (
	"math/rand/v2"

	"github.com/tpscope/tpscope/sim"
)

// Speculative decoding at request level. With a speculative method (the
// deployment's Scenario: Build.Spec and Workload.SpecTokens = K), every
// decoding request schedules 1 + K tokens a step (the last accepted token
// and K drafts: vLLM's num_scheduled_tokens, counted against
// max_num_batched_tokens, their KV slots allocated), the step is priced
// with its verify pass and draft passes (sim.IterationCoster), and at the
// step's end the request gains 1 + A tokens, A the drafts accepted, drawn
// per request and step from the acceptance (sim.SpecYield: position i
// accepted with q_i / q_{i-1} once the earlier ones were), from one PCG
// stream seeded by the load's seed. The rejected drafts' slots stay
// allocated and are written over the next step, as vLLM rolls back
// num_computed_tokens. So a request's time per output token is a random
// variable, spread as the acceptance is: the TPOT percentiles of a run
// are the distribution, not step / mean tokens per step.

// specState is one scheduler's speculative decoding.
type specState struct {
	k    int
	cond []float64 // conditional acceptance of position i given i-1
	rng  *rand.Rand
}

// newSpecState returns the scheduler's speculative state for the
// deployment (nil without speculation); seed and stream pick its draws.
func newSpecState(sc sim.Scenario, seed uint64, stream uint64) *specState {
	y := sc.SpecYield()
	if y == nil || sc.Workload.SpecTokens <= 0 {
		return nil
	}
	st := &specState{k: sc.Workload.SpecTokens, rng: rand.New(rand.NewPCG(seed, 0x7370_6563_0000_0000+stream))}
	prev := 1.0
	for _, q := range y.Positions {
		c := 0.0
		if prev > 0 {
			c = min(1, q/prev)
		}
		st.cond = append(st.cond, c)
		prev = q
	}
	return st
}

// accepted draws the drafts one verify accepts (0..len(cond)).
func (s *specState) accepted() int {
	a := 0
	for _, c := range s.cond {
		if s.rng.Float64() >= c {
			break
		}
		a++
	}
	return a
}

// specScheduled is the tokens a request schedules: 1 + K when it decodes
// (it has sampled a token and its cache holds all but its last) and the
// replica speculates, n otherwise (a prompt whose prefix cache holds all
// but its last token computes that one alone: no drafts yet).
func (rp *replica) specScheduled(r *reqState, n int) int {
	if rp.spec != nil && n == 1 && r.generated > 0 {
		return 1 + rp.spec.k
	}
	return n
}

// decodeWidth is the tokens a decoding request schedules a step: 1 + K
// speculating, else 1.
func (rp *replica) decodeWidth() int {
	if rp.spec != nil {
		return 1 + rp.spec.k
	}
	return 1
}

// decoding reports whether a share of n tokens of r is a decode: one
// token over a cache, or, speculating, the 1 + K tokens of a decoding
// request.
func (rp *replica) decoding(r *reqState, n int) bool {
	if r.computed == 0 {
		return false
	}
	return n == 1 || (rp.spec != nil && r.generated > 0 && r.tokens()-r.computed == 1)
}

// gained is what a scheduled share computes and yields at the step's end:
// a speculative decode advances the cache by 1 + A and yields 1 + A
// tokens; any other share computes its n tokens and yields at most one.
func (rp *replica) gained(s scheduledReq) (computed, tokens int) {
	if rp.spec == nil || !s.spec {
		return s.n, 1
	}
	g := 1 + rp.spec.accepted()
	return g, g
}
