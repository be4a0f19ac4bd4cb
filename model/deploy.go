package model

import (
	"math"
	"slices"
)

// GraphCapture is a serving engine's CUDA-graph capture: the token counts
// per attention (DP) group it captured graphs for (vLLM's
// cudagraph_capture_sizes; vLLM captures per engine, that is per DP
// group). A step whose tokens per group fit one replays that graph, its
// tokens padded so each group fills it (Deployment); larger steps run
// eagerly (serving-facts.md "CUDA graphs"), and so do steps with prefill
// tokens under a DecodeOnly capture. A nil *GraphCapture is no
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
	// Exact: only a step of a captured size replays a graph, unpadded; any
	// other runs eagerly (TensorRT-LLM without enable_padding).
	Exact bool
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
	if g.Exact {
		return n, slices.Contains(g.Sizes, n)
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
//
// A graphed step pads TOKENS, not sequences: its main-model token ops
// (embedding, norms, projections, MoE, collectives) run the captured
// size's tokens, while attention, the KV cache it reads and writes, the
// logits and the draft passes' per-sequence work cover the real sequences
// only. vLLM v1 does this (vllm/v1/worker/gpu_model_runner.py,
// GPUModelRunner): the step's num_input_tokens is pad_for_cudagraph of its
// scheduled tokens, while _prepare_inputs sets seq_lens for the real
// requests and fills the rest with 0 ("Fill unused with 0 for full cuda
// graph mode"), so the attention kernels do no work for the padding.
// The engine iterations of the serving simulation follow the same rule
// (Iteration.PadTokens).
type Deployment struct {
	// Batch is the workload's batch as asked: the sequences (decode) or
	// prompts (prefill) the step serves over all DP groups.
	Batch int `json:"batch"`
	// SeqsPerGroup is ceil(Batch / DP): the sequences of the fullest DP
	// group, whose KV cache a GPU of the group holds and whose attention,
	// logits and draft passes the step computes (an iteration's requests).
	SeqsPerGroup int `json:"seqs_per_group"`
	// TokensPerSeq is the tokens a sequence adds to the main model's ops:
	// 1 + SpecTokens in decode, Context in prefill (0 in an engine
	// iteration, whose sequences differ).
	TokensPerSeq int64 `json:"tokens_per_seq"`
	// TokensPerGroup is T, the tokens through each rank's main-model token
	// ops: GraphTokens when graphed, else SeqsPerGroup x TokensPerSeq (an
	// iteration's tokens with its padding). Every DP group runs the
	// fullest group's count (vLLM pads every DP rank to it).
	TokensPerGroup int64 `json:"tokens_per_group"`
	// PadTokens is the CUDA-graph padding among TokensPerGroup: tokens of
	// no sequence, which attention, RoPE and the KV-cache write skip.
	PadTokens int64 `json:"pad_tokens,omitempty"`
	// Graphed: the step replays a captured CUDA graph of GraphTokens
	// tokens per group (0 when eager).
	Graphed     bool `json:"graphed"`
	GraphTokens int  `json:"graph_tokens,omitempty"`
}

// RealTokensPerGroup is the tokens of the group's sequences:
// TokensPerGroup less the padding.
func (d Deployment) RealTokensPerGroup() int64 { return d.TokensPerGroup - d.PadTokens }

// NewDeployment is BuildWith's decision for a step of w under plan p with
// capture g: a decode step is graphed when its tokens per DP group,
// ceil(batch / DP) x (1 + SpecTokens), fit a captured size, and its
// token ops then run that size, the rest padding (see Deployment); the
// sequences stay the batch's. The inputs are taken as valid (Validate);
// callers that need the decision before a build (a cache key) call it
// with the builder's inputs.
func NewDeployment(p Plan, w Workload, g *GraphCapture) Deployment {
	p, w = p.Normalized(), w.Normalized()
	d := Deployment{Batch: w.Batch, SeqsPerGroup: ceilDiv(w.Batch, p.DP)}
	d.TokensPerSeq = int64(1 + w.SpecTokens)
	if w.Phase == Prefill {
		d.TokensPerSeq = int64(w.Context)
	}
	d.TokensPerGroup = int64(d.SeqsPerGroup) * d.TokensPerSeq
	if w.ReplaysGraphs(g) {
		if pt, ok := g.Tokens(int(d.TokensPerGroup)); ok {
			d.Graphed, d.GraphTokens = true, pt
			d.PadTokens = int64(pt) - d.TokensPerGroup
			d.TokensPerGroup = int64(pt)
		}
	}
	return d
}

// ReplaysGraphs reports whether a step of w can replay a graph of capture
// g (NewDeployment pads it to a captured size where its tokens fit one):
// a decode step can, and a prefill step unless the engine replays decode
// steps only (DecodeOnly: SGLang's, TensorRT-LLM's), as an engine
// iteration with prefill tokens does (GraphCapture.Step: vLLM v1 runs
// such a step as piecewise graphs). Under no capture, none can.
func (w Workload) ReplaysGraphs(g *GraphCapture) bool {
	return g != nil && (w.Normalized().Phase == Decode || !g.DecodeOnly)
}

// iterationDeployment is the deployment of an engine iteration (one DP
// group): its requests, its tokens with their padding, graphed when they
// fit a captured size (GraphCapture.Step).
func iterationDeployment(it *Iteration, g *GraphCapture) Deployment {
	n := it.Requests()
	d := Deployment{Batch: n, SeqsPerGroup: n, TokensPerGroup: it.Tokens() + int64(it.PadTokens), PadTokens: int64(it.PadTokens)}
	if pt, ok := g.Step(it); ok {
		d.Graphed, d.GraphTokens = true, int(pt)
	}
	return d
}

// GraphedUnder reports whether the step, as built (its tokens padded or
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
