package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// Speculative decoding in pricing. A step of a speculative scenario is its
// schedule (model/build_spec.go: the verify pass at T = batch x (1 + K)
// tokens, the rejection sampler, the draft passes) priced like any other,
// plus, for the methods that draft on the host (ngram, suffix), the host's
// drafting time, which sits on the critical path between steps (vLLM PR
// #24986: the n-gram lookup "is CPU overhead and adds to the critical path
// of inference"). What the step yields is the acceptance's business:
//
// Acceptance. q_i is the chance that a step accepts at least i drafts of
// a sequence (vLLM's per-position acceptance rate of position i-1:
// accepted drafts at that position over all drafts, so q_1 >= q_2 >= ...).
// A step yields 1 + A tokens per sequence, A the accepted drafts (the
// bonus or recovered token is the 1), with E[A] = sum_i q_i and
// P(A >= i) = q_i, so Var[A] = sum_i (2i - 1) q_i - E[A]^2. A chain of
// per-token acceptance a has q_i = a^i. The input (Options.SpecAccept) is
// one of a per-token rate, per-position rates, a mean acceptance length or
// a draft acceptance rate (accepted / drafted tokens) measured at some K;
// the last two become the per-token rate a that gives them at that K.
// Without an input the method's cited figure for the model's family is
// used (specDefaults), each with its source.

// SpecAccept is an acceptance input (Options.SpecAccept): one of its
// forms, the others zero.
type SpecAccept struct {
	// PerToken is a chain's per-token acceptance: draft i is accepted
	// with PerToken^i.
	PerToken float64 `json:"per_token,omitempty"`
	// PerPosition are vLLM's per-position acceptance rates q_1, q_2, ...
	// (non-increasing); past the last the ratio of the last two carries on.
	PerPosition []float64 `json:"per_position,omitempty"`
	// MeanLength is the tokens a step yields per sequence, the bonus
	// included (vLLM's "Mean acceptance length", SGLang's "accept len");
	// DraftRate is accepted over drafted tokens (vLLM's "Avg Draft
	// acceptance rate"); either measured with AtTokens drafts per step
	// (0: the scenario's).
	MeanLength float64 `json:"mean_length,omitempty"`
	DraftRate  float64 `json:"draft_rate,omitempty"`
	AtTokens   int     `json:"at_tokens,omitempty"`
	// Source says where the figure comes from (a file read, a default's
	// citation); "" for a flag's value.
	Source string `json:"source,omitempty"`
}

// IsZero reports an unset acceptance (for omitzero).
func (s SpecAccept) IsZero() bool {
	return s.PerToken == 0 && len(s.PerPosition) == 0 && s.MeanLength == 0 && s.DraftRate == 0
}

// parseSpecAccept reads the text form: "0.8" (per token), "0.9,0.8,0.7"
// (per position), "len=2.94" or "len=2.94@3" (mean acceptance length at
// 3 drafts), "rate=0.316@3" (draft acceptance rate).
func parseSpecAccept(v string) (SpecAccept, error) {
	var s SpecAccept
	v = strings.TrimSpace(v)
	if v == "" {
		return s, nil
	}
	want := `a rate in (0, 1] ("0.8"), per-position rates ("0.9,0.8,0.7"), "len=2.94[@K]" or "rate=0.6[@K]"`
	if k, val, ok := strings.Cut(v, "="); ok {
		num, at, hasAt := strings.Cut(val, "@")
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil {
			return s, fmt.Errorf("%q: want %s", v, want)
		}
		if hasAt {
			if s.AtTokens, err = strconv.Atoi(strings.TrimSpace(at)); err != nil || s.AtTokens < 1 || s.AtTokens > 16 {
				return s, fmt.Errorf("%q: @%s: want the draft tokens (1 to 16) the figure was measured with", v, at)
			}
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "len", "length", "mean-length", "accept-len":
			s.MeanLength = f
		case "rate", "draft-rate", "accept-rate":
			s.DraftRate = f
		default:
			return s, fmt.Errorf("%q: want %s", v, want)
		}
		return s, s.Validate()
	}
	parts := strings.Split(v, ",")
	vals := make([]float64, 0, len(parts))
	for _, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return s, fmt.Errorf("%q: want %s", v, want)
		}
		vals = append(vals, f)
	}
	if len(vals) == 1 {
		if !(vals[0] > 0 && vals[0] <= 1) {
			return s, fmt.Errorf("%q: want %s", v, want)
		}
		s.PerToken = vals[0]
	} else {
		s.PerPosition = vals
	}
	return s, s.Validate()
}

// String is the text form parseSpecAccept reads ("" for the zero value).
func (s SpecAccept) String() string {
	at := ""
	if s.AtTokens > 0 {
		at = "@" + strconv.Itoa(s.AtTokens)
	}
	switch {
	case s.PerToken > 0:
		return floatText(s.PerToken)
	case len(s.PerPosition) > 0:
		p := make([]string, len(s.PerPosition))
		for i, v := range s.PerPosition {
			p[i] = floatText(v)
		}
		return strings.Join(p, ",")
	case s.MeanLength > 0:
		return "len=" + floatText(s.MeanLength) + at
	case s.DraftRate > 0:
		return "rate=" + floatText(s.DraftRate) + at
	}
	return ""
}

// Validate checks one form is set and in range: rates in (0, 1],
// per-position rates non-increasing (every accepted draft at position i
// had its earlier ones accepted), a mean length of at least 1 and at most
// 1 + AtTokens when that is given.
func (s SpecAccept) Validate() error {
	n := 0
	for _, set := range []bool{s.PerToken != 0, len(s.PerPosition) > 0, s.MeanLength != 0, s.DraftRate != 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return errors.New("spec acceptance: give one of per-token, per-position, mean length or draft rate")
	}
	rate := func(v float64) bool { return v > 0 && v <= 1 }
	switch {
	case s.PerToken != 0 && !rate(s.PerToken):
		return fmt.Errorf("spec acceptance %v: want a rate in (0, 1]", s.PerToken)
	case s.DraftRate != 0 && !rate(s.DraftRate):
		return fmt.Errorf("spec acceptance rate=%v: want a rate in (0, 1]", s.DraftRate)
	case s.MeanLength != 0 && !(s.MeanLength >= 1 && s.MeanLength <= 17):
		return fmt.Errorf("spec acceptance len=%v: want a mean acceptance length from 1 to 17 tokens", s.MeanLength)
	case s.MeanLength != 0 && s.AtTokens > 0 && s.MeanLength > float64(1+s.AtTokens):
		return fmt.Errorf("spec acceptance len=%v@%d: want at most 1 + %d tokens", s.MeanLength, s.AtTokens, s.AtTokens)
	}
	for i, v := range s.PerPosition {
		if !rate(v) || (i > 0 && v > s.PerPosition[i-1]) {
			return fmt.Errorf("spec acceptance %v: want per-position rates in (0, 1], non-increasing (position %d accepts only after position %d)", s.PerPosition, i+1, i)
		}
	}
	return nil
}

// Positions is q_1..q_steps for a step of steps draft passes (a tree's
// depth; see the model above).
func (s SpecAccept) Positions(steps int) []float64 {
	q := make([]float64, steps)
	if steps <= 0 {
		return q
	}
	// Past the given positions, the ratio of the last two carries on (of
	// the one given: a chain at that rate).
	perToken := func(a float64) {
		p := 1.0
		for i := range q {
			p *= a
			q[i] = p
		}
	}
	at := s.AtTokens
	if at <= 0 {
		at = steps
	}
	switch {
	case s.PerToken > 0:
		perToken(s.PerToken)
	case len(s.PerPosition) > 0:
		r, ratio := s.PerPosition, s.positionRatio()
		for i := range q {
			if i < len(r) {
				q[i] = r[i]
			} else {
				q[i] = q[i-1] * ratio
			}
		}
	case s.MeanLength > 0:
		perToken(perTokenForMean(s.MeanLength-1, at))
	case s.DraftRate > 0:
		perToken(perTokenForMean(s.DraftRate*float64(at), at))
	}
	return q
}

// positionRatio is the factor per position that Positions carries the
// per-position rates on with past the last one given: the ratio of the
// last two, or the one rate given (a chain at that rate).
func (s SpecAccept) positionRatio() float64 {
	r := s.PerPosition
	if len(r) == 0 {
		return 0
	}
	ratio := r[0]
	if n := len(r); n >= 2 && r[n-2] > 0 {
		ratio = r[n-1] / r[n-2]
	}
	return ratio
}

// perTokenForMean is the per-token rate a whose chain of k drafts accepts
// mean drafts on average: a + a^2 + ... + a^k = mean (bisection; 1 when
// mean >= k).
func perTokenForMean(mean float64, k int) float64 {
	if mean <= 0 {
		return 0
	}
	if mean >= float64(k) {
		return 1
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		a := (lo + hi) / 2
		s, p := 0.0, 1.0
		for i := 0; i < k; i++ {
			p *= a
			s += p
		}
		if s < mean {
			lo = a
		} else {
			hi = a
		}
	}
	return (lo + hi) / 2
}

// SpecYield is what a speculative step yields per sequence.
type SpecYield struct {
	Method model.SpecMethod `json:"method"`
	// Positions are q_1..q_steps.
	Positions []float64 `json:"per_position"`
	// TokensPerStep = 1 + sum q_i; TokensVar its variance per step.
	TokensPerStep float64 `json:"tokens_per_step"`
	TokensVar     float64 `json:"tokens_per_step_var"`
	// Source says where the acceptance came from: the flag, a file, or
	// the method's cited default for the family.
	Source string `json:"source"`
	// Default: no input was given; the figure is the method's default.
	Default bool `json:"default,omitempty"`
	// GivenPositions, when the input gave per-position rates for fewer
	// positions than the step drafts, is how many it gave (measured, for
	// a file or a cited figure): Positions past them are extrapolated, each
	// the one before times ExtrapolationRatio (SpecAccept.Positions). 0:
	// every position is the input's, or follows from one figure of a
	// chain (a per-token rate, a mean length, a draft rate).
	GivenPositions     int     `json:"given_positions,omitempty"`
	ExtrapolationRatio float64 `json:"extrapolation_ratio,omitempty"`
	// ChainForTreeTopK, when a tree's step (topk > 1) yields at a cited
	// default, is the tree's topk: every default was measured on a chain
	// (topk 1), whose per-depth acceptance a tree's branches only raise,
	// so the yield is a lower bound. 0: a chain, or a figure given.
	ChainForTreeTopK int `json:"chain_for_tree_topk,omitempty"`
}

// yieldOf is the yield of positions q (see the model above).
func yieldOf(q []float64) (mean, variance float64) {
	ea, ea2 := 0.0, 0.0
	for i, v := range q {
		ea += v
		ea2 += float64(2*(i+1)-1) * v
	}
	return 1 + ea, math.Max(0, ea2-ea*ea)
}

// SpecYield is the scenario's yield: its acceptance input, or the
// method's default for the model's family; nil without speculation.
func (sc Scenario) SpecYield() *SpecYield {
	return specYield(sc.Options, sc.Build.Spec, sc.Workload, sc.Arch)
}

func specYield(o Options, spec model.Spec, w model.Workload, a *model.Arch) *SpecYield {
	m := spec.MethodFor(w)
	if m == "" {
		return nil
	}
	steps := spec.DraftSteps(w)
	in, src, def := o.SpecAccept, o.SpecAccept.Source, false
	switch {
	case !in.IsZero():
		if src == "" {
			src = "--spec-accept " + in.String()
		}
	case o.MTPAcceptFrac > 0 && m == model.SpecMTP:
		// The MTP layers' acceptance: another method's drafts (an
		// EAGLE-3 head, a draft model, the host's n-grams) keep their
		// own figure.
		in, src = SpecAccept{PerToken: o.MTPAcceptFrac}, "--mtp-accept "+floatText(o.MTPAcceptFrac)
	default:
		d := defaultSpecAccept(m, a)
		in, src, def = d, d.Source, true
	}
	y := &SpecYield{Method: m, Positions: in.Positions(steps), Source: src, Default: def}
	if def && spec.TopK > 1 {
		y.ChainForTreeTopK = spec.TopK
	}
	switch n, at := len(in.PerPosition), in.AtTokens; {
	case n > 0 && n < steps:
		y.GivenPositions, y.ExtrapolationRatio = n, in.positionRatio()
	case (in.MeanLength > 0 || in.DraftRate > 0) && at > 0 && at < steps:
		// A figure measured at fewer drafts than the step makes gives
		// positions 1..at; its chain carries on past them at its
		// per-token rate, q_1.
		y.GivenPositions, y.ExtrapolationRatio = at, y.Positions[0]
	}
	y.TokensPerStep, y.TokensVar = yieldOf(y.Positions)
	return y
}

// specFamily names the model family the defaults are kept per: kimi
// (Kimi-K2.x: kimi_k2, kimi_k25, or DeepSeek-V3's structure with Kimi's
// 163840-token vocabulary), glm5 (glm_moe_dsa), deepseek (deepseek_v3,
// deepseek_v32), or "" for another.
func specFamily(a *model.Arch) string {
	if a == nil {
		return ""
	}
	switch {
	case strings.HasPrefix(a.ModelType, "kimi") || (a.ModelType == "deepseek_v3" && a.Vocab == 163840):
		return "kimi"
	case a.ModelType == "glm_moe_dsa":
		return "glm5"
	case strings.HasPrefix(a.ModelType, "deepseek"):
		return "deepseek"
	}
	return ""
}

// defaultSpecAccept is the cited acceptance a method gets without an
// input, per model family (Source says which figure):
//
//   - mtp: GLM-5: GLM-5.1-NVFP4's per-position rates with MTP k = 3 on
//     8x RTX PRO 6000 at one request, the midpoints of 0.75-0.85,
//     0.50-0.65, 0.24-0.35 (sjug/rtx6kpro@738985bb
//     models/glm5.1/benchmarks/glm51-v2-full-68b3569f-20260514/glm-dcp1-mtp1
//     final.log, SpecDecoding metrics lines); else the DeepSeek-V3
//     Technical Report's 85 % acceptance of the second token
//     (arXiv:2412.19437 5.4.3, the low end of 85-90 %).
//   - eagle3: Kimi: lightseekorg/kimi-k2.5-eagle3-mla's accept length of
//     2.94 on MT-Bench with 3 steps, topk 1 (its model card); else an
//     EAGLE-3 head's per-position rates on MT-Bench (vLLM PR #26498,
//     K = 10: 0.74, 0.54, 0.41, 0.30, 0.22, 0.16, 0.12, 0.08, 0.05, 0.02).
//     Public Kimi-K2.6 serving runs on 8x RTX PRO 6000 measured draft
//     acceptance rates of 0.32-0.49 at k = 3 (rows K20, K23, K25 of
//     sim/public_spec_test.go): traffic matters.
//   - draft: no published acceptance of a small model drafting for these
//     families; the family's EAGLE-3 figure stands in, flagged as such (a
//     model not trained on the target's outputs usually accepts less).
//   - ngram: vLLM PR #24344's n-gram run on BlazEdit (an editing dataset),
//     K = 5: 2.96 tokens per step over every step ("seq normalized
//     acceptance length"; 4.59 over the steps that found a match); chat
//     repeats far less.
//   - suffix: vLLM PR #24852's suffix decoding on MT-Bench, K = 1: 1226
//     accepted drafts over 16993 output tokens, 1.08 tokens per step (0.62
//     acceptance of the steps that drafted).
//
// The host methods draft only where the context repeats; their figures
// are per step over every step, and each step is priced as verifying K
// drafts (an upper bound of the verify pass's cost for them).
func defaultSpecAccept(m model.SpecMethod, a *model.Arch) SpecAccept {
	fam := specFamily(a)
	eagle := func() SpecAccept {
		if fam == "kimi" {
			return SpecAccept{MeanLength: 2.94, AtTokens: 3, Source: "lightseekorg/kimi-k2.5-eagle3-mla model card: accept length 2.94 on MT-Bench (3 steps, topk 1)"}
		}
		return SpecAccept{PerPosition: []float64{0.74, 0.54, 0.41, 0.30, 0.22, 0.16, 0.12, 0.08, 0.05, 0.02},
			Source: "an EAGLE-3 head on MT-Bench, vLLM PR #26498 (K = 10)"}
	}
	switch m {
	case model.SpecMTP:
		if fam == "glm5" {
			return SpecAccept{PerPosition: []float64{0.80, 0.575, 0.295},
				Source: "GLM-5.1-NVFP4 MTP k=3 on 8x RTX PRO 6000, one request: per-position 0.75-0.85 / 0.50-0.65 / 0.24-0.35 (sjug/rtx6kpro glm51-v2 glm-dcp1-mtp1 log), midpoints"}
		}
		// One position measured (the second token, K = 1): a step of
		// more drafts carries it on as a per-token chain, and says so.
		return SpecAccept{PerPosition: []float64{defaultMTPAcceptFrac}, Source: "DeepSeek-V3 Technical Report: 85-90 % acceptance of the second token (low end)"}
	case model.SpecEagle3:
		return eagle()
	case model.SpecDraftModel:
		d := eagle()
		d.Source = "no published acceptance of a draft model for this family: the family's EAGLE-3 figure stands in (" + d.Source + "); a model not trained on the target's outputs usually accepts less"
		return d
	case model.SpecNgram:
		return SpecAccept{MeanLength: 2.96, AtTokens: 5,
			Source: "n-gram drafts on BlazEdit (an editing dataset), vLLM PR #24344: 2.96 tokens per step over every step, K = 5 (4.59 over the steps that drafted); chat repeats far less"}
	case model.SpecSuffix:
		return SpecAccept{MeanLength: 1 + 1226.0/(16993-1226), AtTokens: 1,
			Source: "suffix decoding on MT-Bench, vLLM PR #24852, K = 1: 1226 drafts accepted over 16993 tokens, 1.08 tokens per step (0.62 of the steps that drafted)"}
	}
	return SpecAccept{}
}

// Host drafting (ngram, suffix): the CPU time between two steps, which
// the next step waits for. Assumptions, not measurements (no public
// figure gives a per-request time): the n-gram proposer's KMP walks each
// request's tokens (prompt and output) at about a nanosecond a token
// (a compiled int32 compare loop), over at most 8 threads (vLLM PR
// #24986's cap); a suffix-tree lookup costs about specSuffixLookupUs per
// request whatever its length; and a step with drafts pays
// specHostFixedUs of proposer call and host-to-device copy of the drafts.
const (
	specNgramNsPerToken = 1.0
	specNgramThreads    = 8
	specSuffixLookupUs  = 10.0
	specHostFixedUs     = 20.0
)

// specHostUs is the host drafting time of a step of sc (0 for the methods
// that draft on the device).
func specHostUs(sc Scenario) float64 {
	m := sc.Build.Spec.MethodFor(sc.Workload)
	if !draftsOnHost(sc.Options.Engine, m) {
		return 0
	}
	return specHostDraftUs(m, sc.Workload.Batch, float64(sc.Workload.Context))
}

// draftsOnHost reports whether a step of method m under engine e waits
// for the host's drafting: a host method (ngram, suffix) under an engine
// that runs its proposer, not one that verifies drafts it is given
// (engprof.SpecMethodFacts.NoHostDraft: tpscope's executor).
func draftsOnHost(e engprof.Ref, m model.SpecMethod) bool {
	if m == "" || m.OnDevice() {
		return false
	}
	if p, err := engprof.Lookup(e); err == nil {
		if f, ok := p.SpecMethod(string(m)); ok && f.NoHostDraft {
			return false
		}
	}
	return true
}

// specHostDraftUs is the host drafting time of a step in which seqs
// sequences of contextTokens tokens each (a mean, for a serving step's
// mix) draft by method m: a step's (specHostUs) and a serving
// iteration's (IterationCoster) are this one time.
func specHostDraftUs(m model.SpecMethod, seqs int, contextTokens float64) float64 {
	if seqs <= 0 {
		return 0
	}
	b := float64(seqs)
	switch m {
	case model.SpecNgram:
		per := contextTokens * specNgramNsPerToken / 1000
		return specHostFixedUs + per*math.Ceil(b/specNgramThreads)
	case model.SpecSuffix:
		return specHostFixedUs + specSuffixLookupUs*math.Ceil(b/specNgramThreads)
	}
	return 0
}

// stepCapture is the CUDA-graph capture of a step of sc on the
// Predictor's GPU: the engine's own sizes for the step where it has a
// rule of its own (engineCaptureSizes: with speculation SGLang's
// speculative list and TensorRT-LLM's, whose graphs are keyed by
// requests, that many sequences x the tokens each verifies; SGLang's
// decode list stopped at its request pool), replayed as the decode list
// is (decode steps only, padded or at a captured size exactly);
// otherwise the options' capture (captureOf). The request pool is the one
// the step's engine runs with (requestPool).
func (p *Predictor) stepCapture(sc Scenario) *model.GraphCapture {
	k, world := sc.Workload.SpecTokens, sc.Plan.World()
	capture := p.captureOf(world)
	if s, ok := p.engineCaptureSizes(capture, k, world, requestPool(sc)); ok {
		return &model.GraphCapture{Sizes: s, DecodeOnly: capture.DecodeOnly, Exact: capture.Exact}
	}
	return capture
}

// engineCaptureSizes are the capture sizes in tokens an engine takes for
// a step of k speculative tokens a sequence in an engine of world GPUs
// whose request pool holds pool requests (0: unknown), where they are its
// own: with k > 0 its speculative capture list (engprof.Profile.
// SpecCaptureSizes); without, its decode list stopped at the pool where
// the engine's capture lists stop there (Profile.PoolCaptureSizes,
// cuda_graphs.capture_pool: SGLang's get_batch_sizes_to_capture serves
// both lists). Sizes given (Options.GraphSizes, SGLang's --cuda-graph-bs)
// replace the engine's list but not its pool rule: SGLang's
// get_batch_sizes_to_capture starts from server_args.cuda_graph_bs,
// given or its default alike, and stops it at req_to_token_pool.size
// (engine profile source graphs-pool), so without speculation the given
// list stops at the pool too. ok false where the options' capture
// stands: graphs off (capture nil), no pool or no such rule, and sizes
// given with speculation (they are tokens, SGLang's list sequences: the
// given sizes stand as they are). The one rule a step
// (stepCapture), a serving run (IterationCoster.LimitCapture), the
// engine line (EngineSummary) and the scenario's capture sizes
// (Scenario.CaptureSizes, which advise reads) follow.
func (p *Predictor) engineCaptureSizes(capture *model.GraphCapture, k, world, pool int) ([]int, bool) {
	if capture == nil {
		return nil, false
	}
	return engineCaptureSizesOn(&p.opts, p.dev.MemBytes, k, world, pool)
}

// engineCaptureSizesOn is engineCaptureSizes for options o on a GPU of
// memBytes, graphs on.
func engineCaptureSizesOn(o *Options, memBytes int64, k, world, pool int) ([]int, bool) {
	prof, err := engprof.Lookup(o.Engine)
	if err != nil {
		return nil, false
	}
	if len(o.GraphSizes) > 0 {
		if k > 0 || !prof.Graphs.CapturePool || pool <= 0 {
			return nil, false
		}
		return prof.StopAtPool(o.GraphSizes, pool), true
	}
	if k > 0 {
		s := prof.SpecCaptureSizes(k, memBytes, world, pool)
		return s, len(s) > 0
	}
	if !prof.Graphs.CapturePool || pool <= 0 {
		return nil, false
	}
	// A decode sequence is one token: the batches are the sizes.
	return prof.PoolCaptureSizes(memBytes, world, pool), true
}

// CheckSpec refuses, in one line naming the flag, a speculative method, a
// tree or a draft TP the scenario's engine has no implementation of (nil
// without speculation, and for an engine not found: CheckEngine says so).
func (sc Scenario) CheckSpec() error {
	p, err := engprof.Lookup(sc.Options.Engine)
	if err != nil {
		return nil
	}
	return checkSpecEngine(sc, p)
}

// checkSpecEngine refuses a speculative method, a tree or a draft TP the
// engine has no implementation of, in one line naming the flag.
func checkSpecEngine(sc Scenario, p *engprof.Profile) error {
	m := sc.Build.Spec.MethodFor(sc.Workload)
	if m == "" {
		return nil
	}
	f, ok := p.SpecMethod(string(m))
	if !ok {
		has := p.SpecMethodNames()
		list := "none"
		if len(has) > 0 {
			list = strings.Join(has, ", ")
		}
		flag := "--spec " + string(m)
		if sc.Build.Spec.Method == "" {
			flag = fmt.Sprintf("--mtp %d", sc.Workload.SpecTokens)
		}
		return fmt.Errorf("%s: %s has no speculative method %s (it has %s)", flag, p.Name(), m, list)
	}
	if dp := sc.Plan.Normalized().DP; dp > 1 && f.NoDPAttention {
		return fmt.Errorf("--dp %d: %s refuses %s speculative decoding under DP attention; drop --dp or take another method", dp, p.Name(), f.Name)
	}
	if sc.Build.Spec.TopK > 1 && !f.Tree {
		return fmt.Errorf("--spec-topk %d: %s drafts no tree with %s, a chain only", sc.Build.Spec.TopK, p.Name(), f.Name)
	}
	if err := checkPagedTree(sc, p, f, m); err != nil {
		return err
	}
	if dtp := sc.Build.Spec.DraftTP; dtp > 0 && dtp != sc.Plan.Normalized().TP && !f.DraftTP {
		return fmt.Errorf("--draft-tp %d: %s runs a draft model at the target's TP %d only", dtp, p.Name(), sc.Plan.Normalized().TP)
	}
	return nil
}

// checkPagedTree refuses a tree of drafts (--spec-topk above 1, or a
// method that always drafts one) where the engine drafts trees on a KV
// page above one token only with some backends (f.PagedTreeBackends) and
// the backend that runs sc's MLA attention forces such a page on its
// default block.
func checkPagedTree(sc Scenario, p *engprof.Profile, f engprof.SpecMethodFacts, m model.SpecMethod) error {
	topk := sc.Build.Spec.TopK
	if f.TreeAlways {
		topk = max(topk, f.TreeBranches)
	}
	if len(f.PagedTreeBackends) == 0 || topk <= 1 || sc.Arch == nil || sc.Arch.KVLoraRank == 0 {
		return nil
	}
	override := string(sc.Options.AttentionBackend)
	u := sc.mlaUse(p, archOf(sc.Topo), kvOf(sc.Workload.KVDtypeFor(sc.Arch)))
	b, err := p.Backend(u, override)
	if err != nil || b == nil || slices.Contains(f.PagedTreeBackends, b.Name) {
		return nil // a backend that does not run is CheckEngine's to refuse
	}
	block := p.Scheduler.BlockTokens
	if block == 0 {
		block = 16
	}
	page, of := p.KVPage(u, override).Force(block)
	if page <= 1 {
		return nil
	}
	if of == "" {
		of = b.Name
	}
	want := fmt.Sprintf("%s drafts a tree on a KV page above one token only with %s, and %s runs %d-token pages here", p.Name(), strings.Join(f.PagedTreeBackends, ", "), of, page)
	if f.TreeAlways && sc.Build.Spec.TopK <= 1 {
		return fmt.Errorf("--spec %s: %s's drafts are a tree %d wide; %s", m, f.Name, f.TreeBranches, want)
	}
	return fmt.Errorf("--spec-topk %d: %s; draft a chain (--spec-topk 1) or name --attention-backend %s", topk, want, f.PagedTreeBackends[0])
}

// SpecEngineFlag is how the scenario's engine turns its speculative method
// on ("" without speculation, or when the engine has none).
func (sc Scenario) SpecEngineFlag() string {
	p, f, ok := specFactsOf(sc)
	if !ok {
		return ""
	}
	d := sc.Build.Spec.Draft.String()
	// A serving engine loads the drafter's checkpoint by its Hugging Face
	// id; tpscope's executor (tpscope run) takes the built-in's name and
	// refuses the id, a path that is not there.
	if n, ok := model.DrafterCheckpoint(d); ok && !p.Ref().IsExecutor() {
		d = n
	}
	flag := f.FlagFor(sc.Workload.SpecTokens, sc.Build.Spec.DraftSteps(sc.Workload), sc.Build.Spec.TopK, d)
	// An engine that limits its running requests under speculation
	// (SGLang: 48, shared by the DP ranks) runs the step's batch only
	// with the limit lifted (specRequestPool).
	if n := specRequestPool(sc); n > f.MaxRunning {
		flag += " " + strings.ReplaceAll(f.MaxRunningFlag, "{n}", strconv.Itoa(n))
	}
	return flag
}

// requestPool is the request pool sc's step runs under (SGLang's
// max_running_requests over every DP rank), which the engine's capture
// lists stop at (engineCaptureSizes): the one the scenario carries
// (Scenario.MaxRunning: a serving run's), else the running limit given
// (Options.MaxNumSeqs, SGLang's --max-running-requests) where the
// engine's lists stop at its pool, else the one the speculative method
// sets (specRequestPool); 0 where none is known (the engine's own from
// its KV pool, at least 2,048 requests under SGLang, stops no list).
func requestPool(sc Scenario) int {
	if sc.MaxRunning > 0 {
		return sc.MaxRunning
	}
	if n := sc.Options.MaxNumSeqs; n > 0 {
		if p, err := engprof.Lookup(sc.Options.Engine); err == nil && p.Graphs.CapturePool {
			return n
		}
	}
	return specRequestPool(sc)
}

// specRequestPool is the running-request limit over the whole engine
// (SGLang's max_running_requests, the size of its request pool) that
// serves sc's step where the engine sets its own limit for the
// speculative method (SGLang: 48): that limit where each scheduler's
// share of it holds the step's sequences per DP group, else lifted to the
// least that does (under DP attention each rank's scheduler runs
// max_running_requests // dp_size, scheduler.dp_divides_running, so
// ceil(Batch / DP) x DP; --batch counts every DP group's sequences); 0
// where the engine sets none. A limit the scenario carries
// (Scenario.MaxRunning: a serving run's), or the one given
// (Options.MaxNumSeqs, the step's batch within it: CheckSchedulerLimits),
// is the pool.
func specRequestPool(sc Scenario) int {
	p, f, ok := specFactsOf(sc)
	if !ok || f.MaxRunning <= 0 {
		return 0
	}
	if sc.MaxRunning > 0 {
		return sc.MaxRunning
	}
	if sc.Options.MaxNumSeqs > 0 {
		return sc.Options.MaxNumSeqs
	}
	ranks := 1
	if dp := sc.Plan.Normalized().DP; p.Scheduler.DPDividesRunning && dp > 1 {
		ranks = dp
	}
	seqs := (sc.Workload.Batch + sc.Plan.Normalized().DP - 1) / sc.Plan.Normalized().DP
	if seqs <= f.MaxRunning/ranks {
		return f.MaxRunning
	}
	return seqs * ranks
}

// specFactsOf are sc's engine and the facts of its speculative method
// there; false without speculation or where the engine has none of it.
func specFactsOf(sc Scenario) (*engprof.Profile, engprof.SpecMethodFacts, bool) {
	m := sc.Build.Spec.MethodFor(sc.Workload)
	if m == "" {
		return nil, engprof.SpecMethodFacts{}, false
	}
	p, err := engprof.Lookup(sc.Options.Engine)
	if err != nil {
		return nil, engprof.SpecMethodFacts{}, false
	}
	f, ok := p.SpecMethod(string(m))
	return p, f, ok
}

// SpecStep is a prediction's speculative method, as the CLI prints and
// JSON records it.
type SpecStep struct {
	SpecYield
	// Spec is the method in one line ("eagle3(kimi-k2.5-eagle3-mla) k3").
	Spec string `json:"spec"`
	// Steps is the draft passes; EngineFlag how the scenario's engine
	// turns the method on.
	Steps      int    `json:"draft_steps"`
	EngineFlag string `json:"engine_flag,omitempty"`
	// Weights says the run's acceptance is an input, not something the
	// executor's random weights could measure.
	Note string `json:"note"`
}

func specStepOf(sc Scenario) *SpecStep {
	y := sc.SpecYield()
	if y == nil {
		return nil
	}
	return &SpecStep{SpecYield: *y, Spec: sc.Build.Spec.String(sc.Workload), Steps: sc.Build.Spec.DraftSteps(sc.Workload),
		EngineFlag: sc.SpecEngineFlag(),
		Note:       "the acceptance is an input: tokens per step come from it, not from the model's weights (a run's weights are random)"}
}

// String is the step's speculation in one line.
func (s *SpecStep) String() string {
	if s == nil {
		return ""
	}
	q := make([]string, len(s.Positions))
	for i, v := range s.Positions {
		q[i] = fmt.Sprintf("%.2f", v)
	}
	passes := fmt.Sprintf("%d draft passes", s.Steps)
	if !s.Method.OnDevice() {
		passes = "drafted on the host"
	}
	return fmt.Sprintf("%s, %s; %.2f tokens per step (sd %.2f), per-position acceptance %s from %s%s", s.Spec, passes, s.TokensPerStep, math.Sqrt(s.TokensVar), strings.Join(q, ", "), s.Source, s.Caveats())
}

// Caveats is what a line giving the yield's source adds after it: which
// positions the input gave and which were extrapolated, and a chain's
// figure standing in for a tree's ("" when neither applies).
func (y *SpecYield) Caveats() string {
	out := y.extrapolation()
	if k := y.ChainForTreeTopK; k > 1 {
		out += fmt.Sprintf("; a chain's figure (topk 1) for a tree of topk %d: its branches priced as accepting what one chain does, a lower bound", k)
	}
	return out
}

// isChain reports whether positions 1..n are a per-token chain, q_i =
// q_1^i (a mean length or draft rate becomes one), to a relative 1e-9.
func (y *SpecYield) isChain(n int) bool {
	a, p := y.Positions[0], 1.0
	for i := range n {
		p *= a
		if math.Abs(y.Positions[i]-p) > 1e-9*p {
			return false
		}
	}
	return true
}

// extrapolation says which positions the input gave and which were
// extrapolated, and how ("" when the input gave them all).
func (y *SpecYield) extrapolation() string {
	n, k := y.GivenPositions, len(y.Positions)
	if n <= 0 || n >= k {
		return ""
	}
	span := func(lo, hi int) string {
		if lo == hi {
			return fmt.Sprintf("position %d", lo)
		}
		return fmt.Sprintf("positions %d-%d", lo, hi)
	}
	given := "given"
	if !strings.HasPrefix(y.Source, "--spec-accept ") {
		given = "measured" // a file read or a cited figure
	}
	how := fmt.Sprintf("the ratio of positions %d and %d", n-1, n)
	switch {
	case n == 1:
		how = "position 1's rate as a per-token chain"
	case y.isChain(n):
		how = fmt.Sprintf("the per-token chain %s follow", span(1, n))
	}
	return fmt.Sprintf("; %s %s, %s extrapolated (x%.2f a position: %s)", span(1, n), given, span(n+1, k), y.ExtrapolationRatio, how)
}
