package model

import "math"

// GraphCapture is a serving engine's CUDA-graph capture: the token counts
// per attention (DP) group it captured graphs for (vLLM's
// cudagraph_capture_sizes; vLLM captures per engine, that is per DP
// group). A decode step whose tokens per group fit one replays that graph,
// its batch padded so each group fills it; larger steps and prefill run
// eagerly (serving-facts.md "CUDA graphs"). A nil *GraphCapture is no
// capture: every step runs eagerly. The sizes and their default are the
// caller's (sim.Options owns them).
type GraphCapture struct {
	// Sizes are the captured token counts, increasing.
	Sizes []int
	// DecodeOnly: only steps without prefill tokens replay a graph (SGLang's
	// CudaGraphRunner runs decode batches; an extend batch, prefill or
	// mixed, runs eagerly). Otherwise a step whose tokens fit replays one,
	// as vLLM v1's piecewise graphs run mixed steps.
	DecodeOnly bool
}

// Step is the captured size an engine iteration replays (Tokens of its
// tokens with their padding) and whether it replays one: never a step with
// prefill tokens under a DecodeOnly capture.
func (g *GraphCapture) Step(it *Iteration) (int64, bool) {
	n := it.Tokens() + int64(it.PadTokens)
	if g == nil || (g.DecodeOnly && it.PrefillSeqs > 0) || n > math.MaxInt32 {
		return n, false
	}
	s, ok := g.Tokens(int(n))
	return int64(s), ok
}

// Tokens is the captured size a step of n tokens per group replays: the
// smallest size at or above n, or n and false when none is (or g is nil).
func (g *GraphCapture) Tokens(n int) (int, bool) {
	if g == nil {
		return n, false
	}
	for _, s := range g.Sizes {
		if s >= n {
			return s, true
		}
	}
	return n, false
}

// Deployment is what one step serves per attention (DP) group and how it
// is launched, decided once from the plan, the workload and the CUDA-graph
// capture (NewDeployment) and carried on the schedule (Schedule.Deploy),
// where every package reads it.
type Deployment struct {
	// Batch is the workload's batch as asked: the sequences (decode) or
	// prompts (prefill) the step serves over all DP groups.
	Batch int `json:"batch"`
	// SeqsPerGroup is ceil(Batch / DP): the sequences of the fullest DP
	// group, whose KV cache a GPU of the group holds.
	SeqsPerGroup int `json:"seqs_per_group"`
	// PaddedBatch is the batch the schedule is built for: Batch, or under
	// a CUDA graph the batch whose groups fill the captured size (the
	// schedule's Workload.Batch).
	PaddedBatch int `json:"padded_batch"`
	// PaddedSeqsPerGroup is ceil(PaddedBatch / DP): the sequences each
	// group's ops are sized for (vLLM pads every DP rank to the fullest).
	PaddedSeqsPerGroup int `json:"padded_seqs_per_group"`
	// TokensPerSeq is the tokens a sequence adds to the main model's ops:
	// 1 + SpecTokens in decode, Context in prefill (0 in an engine
	// iteration, whose sequences differ).
	TokensPerSeq int64 `json:"tokens_per_seq"`
	// TokensPerGroup is T, the tokens through each rank's main-model ops:
	// PaddedSeqsPerGroup x TokensPerSeq (an iteration's tokens with its
	// padding).
	TokensPerGroup int64 `json:"tokens_per_group"`
	// Graphed: the step replays a captured CUDA graph of GraphTokens
	// tokens per group (0 when eager).
	Graphed     bool `json:"graphed"`
	GraphTokens int  `json:"graph_tokens,omitempty"`
}

// NewDeployment is BuildWith's decision for a step of w under plan p with
// capture g: a decode step is graphed when its tokens per DP group,
// ceil(batch / DP) x (1 + SpecTokens), fit a captured size, and its batch
// is then padded so each group fills that size; otherwise the batch stays.
// The inputs are taken as valid (Validate); callers that need the decision
// before a build (a cache key) call it with the builder's inputs.
func NewDeployment(p Plan, w Workload, g *GraphCapture) Deployment {
	p, w = p.Normalized(), w.Normalized()
	d := Deployment{Batch: w.Batch, SeqsPerGroup: ceilDiv(w.Batch, p.DP), PaddedBatch: w.Batch}
	d.TokensPerSeq = int64(1 + w.SpecTokens)
	if w.Phase == Prefill {
		d.TokensPerSeq = int64(w.Context)
	} else if g != nil {
		tok := d.SeqsPerGroup * (1 + w.SpecTokens)
		if pt, ok := g.Tokens(tok); ok {
			d.Graphed, d.GraphTokens = true, pt
			if pt != tok {
				d.PaddedBatch = (pt + w.SpecTokens) / (1 + w.SpecTokens) * p.DP
			}
		}
	}
	d.PaddedSeqsPerGroup = ceilDiv(d.PaddedBatch, p.DP)
	d.TokensPerGroup = int64(d.PaddedSeqsPerGroup) * d.TokensPerSeq
	return d
}

// iterationDeployment is the deployment of an engine iteration (one DP
// group): its requests, its tokens with their padding, graphed when they
// fit a captured size (GraphCapture.Step).
func iterationDeployment(it *Iteration, g *GraphCapture) Deployment {
	n := it.Requests()
	d := Deployment{Batch: n, SeqsPerGroup: n, PaddedBatch: n, PaddedSeqsPerGroup: n,
		TokensPerGroup: it.Tokens() + int64(it.PadTokens)}
	if pt, ok := g.Step(it); ok {
		d.Graphed, d.GraphTokens = true, int(pt)
	}
	return d
}

// GraphedUnder reports whether the step, as built (its batch padded or
// not), replays a CUDA graph under capture g: NewDeployment's decision
// for its plan and workload, or for an engine iteration whether its
// tokens fit a captured size. It answers for a schedule built under
// another capture (Deploy.Graphed answers for its own).
func (s *Schedule) GraphedUnder(g *GraphCapture) bool {
	if s.Iteration != nil {
		return iterationDeployment(s.Iteration, g).Graphed
	}
	return NewDeployment(s.Plan, s.Workload, g).Graphed
}
