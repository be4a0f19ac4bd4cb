package engine

import (
	"fmt"
	"slices"
	"strings"
)

// SpecFacts are an engine's speculative-decoding methods: which of
// tpscope's methods (model.SpecMethod's names: mtp, eagle3, draft, ngram,
// suffix) it implements, under which name, whether it drafts trees and a
// draft model at a TP of its own, and the CUDA-graph capture it uses for
// the verify pass when its list differs from the decode list.
type SpecFacts struct {
	Methods []SpecMethodFacts `yaml:"methods"`
	// CaptureBatches and CaptureRanges, when set, are the capture sizes in
	// sequences with speculation on (SGLang's spec capture list); each
	// captures that many sequences x the tokens each verifies. Empty: the
	// decode list (cuda_graphs) holds, in tokens.
	CaptureBatches []int       `yaml:"capture_batches"`
	CaptureRanges  []SizeRange `yaml:"capture_ranges"`
	// The list stops at the engine's request pool where the decode list
	// does (cuda_graphs.capture_pool: one function captures both); the
	// verify pass and the draft passes capture the same batches.
	CaptureCite []string `yaml:"capture_cite"`

	batches []int // computed once by validate
}

// SpecMethodFacts is one speculative method of an engine.
type SpecMethodFacts struct {
	// Method is tpscope's name; Name the engine's (vLLM's
	// speculative_config method, SGLang's --speculative-algorithm).
	Method string `yaml:"method"`
	Name   string `yaml:"name"`
	// Tree: drafts a tree (topk > 1 branches per draft pass).
	Tree bool `yaml:"tree"`
	// DraftTP: a draft model may run at a TP below the target's.
	DraftTP bool `yaml:"draft_tp"`
	// NoHostDraft: the engine verifies the drafts it is given and runs
	// no proposer on the host for a method that drafts there (ngram,
	// suffix): tpscope's executor, whose drafts are the schedule's
	// placeholder tokens. Its step has no host drafting in it.
	NoHostDraft bool `yaml:"no_host_draft"`
	// Flag is how to turn it on, with placeholders {k} (speculative tokens
	// per sequence), {draft} (the drafter), {steps} (draft passes), {topk}
	// (branches), {tokens} (1 + k: SGLang's num-draft-tokens counts the
	// root) and {tree} (tpscope's own tree flags, " --spec-topk {topk}
	// --spec-steps {steps}" for a tree, nothing for a chain); FlagFor
	// fills them.
	Flag string `yaml:"flag"`
	// MaxRunning, when set, is the limit on running requests the engine
	// sets for the method when the user gives none (SGLang resets
	// max_running_requests to 48 for EAGLE, EAGLE3, STANDALONE, NEXTN and
	// NGRAM); 0: the scheduler's rule holds.
	MaxRunning int `yaml:"max_running"`
	// MaxRunningFlag, with MaxRunning, is the engine's option that lifts
	// that limit, with {n} for the count (SGLang's
	// --max-running-requests {n}).
	MaxRunningFlag string `yaml:"max_running_flag"`
	// NoDPAttention: the engine refuses the method under DP attention
	// (SGLang's _handle_speculative_decoding raises for STANDALONE and
	// NGRAM with --enable-dp-attention).
	NoDPAttention bool `yaml:"no_dp_attention"`
	// PagedTreeBackends, when set, are the only attention backends the
	// engine drafts a tree on with a KV page above one token (SGLang's
	// _handle_speculative_decoding raises for speculative_eagle_topk > 1
	// with page_size > 1 on any backend but flashinfer).
	PagedTreeBackends []string `yaml:"paged_tree_backends"`
	// TreeAlways: the method drafts a tree whatever --spec-topk says
	// (SGLang's NGRAM sets speculative_eagle_topk to
	// speculative_ngram_max_bfs_breadth, 10 by default), TreeBranches
	// wide.
	TreeAlways   bool     `yaml:"tree_always"`
	TreeBranches int      `yaml:"tree_branches"`
	Cite         []string `yaml:"cite"`
}

// specMethodNames are the methods a profile may list (model's speculative
// methods, model.ParseSpecMethod).
var specMethodNames = []string{"mtp", "eagle3", "draft", "ngram", "suffix"}

// SpecMethod returns the engine's facts of method m (tpscope's name), false
// when the engine has no implementation of it.
func (p *Profile) SpecMethod(m string) (SpecMethodFacts, bool) {
	for _, f := range p.Speculative.Methods {
		if f.Method == m {
			return f, true
		}
	}
	return SpecMethodFacts{}, false
}

// SpecMethodNames lists the methods the engine implements, in its
// profile's order.
func (p *Profile) SpecMethodNames() []string {
	var n []string
	for _, f := range p.Speculative.Methods {
		n = append(n, f.Method)
	}
	return n
}

// SpecCaptureBatches are the batches in sequences the engine captures
// with speculation on, on a GPU of memBytes in an engine of tpSize GPUs
// whose request pool holds pool requests (SGLang's max_running_requests;
// 0: unknown, no limit): the spec capture list's batches up to
// GraphMaxBS (SGLang keeps the sequences <= cuda_graph_max_bs of its
// speculative list too) and, under cuda_graphs.capture_pool, up to the
// pool (StopAtPool). Nil when the profile has no spec capture list (the
// decode list holds).
func (p *Profile) SpecCaptureBatches(memBytes int64, tpSize, pool int) []int {
	s := &p.Speculative
	if len(s.batches) == 0 {
		return nil
	}
	maxBS := p.GraphMaxBS(memBytes, tpSize)
	n, _ := slices.BinarySearch(s.batches, maxBS+1)
	return p.StopAtPool(s.batches[:n:n], pool)
}

// StopAtPool is a capture list in sequences (increasing) as the engine
// captures it under a request pool of pool requests (0: unknown, no
// limit): under cuda_graphs.capture_pool the batches up to the pool, the
// pool's size added where the list ran past it (SGLang's
// get_batch_sizes_to_capture, for its decode list and its speculative
// one alike: capture_bs += [req_to_token_pool.size] where max(capture_bs)
// is above it, then bs <= req_to_token_pool.size); else the list as it
// stands. The list is not modified.
func (p *Profile) StopAtPool(list []int, pool int) []int {
	n := len(list)
	if !p.Graphs.CapturePool || pool <= 0 || n == 0 || list[n-1] <= pool {
		return list
	}
	m, found := slices.BinarySearch(list, pool)
	if found {
		return list[: m+1 : m+1]
	}
	return append(slices.Clone(list[:m]), pool)
}

// SpecCaptureSizes are the verify pass's capture sizes in tokens for k
// draft tokens per sequence: SpecCaptureBatches, each x (1 + k) (SGLang's
// target-verify graphs run num_draft_tokens a sequence); nil without k or
// without a spec capture list.
func (p *Profile) SpecCaptureSizes(k int, memBytes int64, tpSize, pool int) []int {
	b := p.SpecCaptureBatches(memBytes, tpSize, pool)
	if len(b) == 0 || k <= 0 {
		return nil
	}
	out := make([]int, len(b))
	for i, n := range b {
		out[i] = n * (1 + k)
	}
	return out
}

// validateSpec checks the speculative section: known method names, each
// once and cited, capture sizes in range.
func (p *Profile) validateSpec(bad func(field, format string, a ...any) error, cite func(string, []string) error) error {
	seen := map[string]bool{}
	for i, m := range p.Speculative.Methods {
		f := fmt.Sprintf("speculative.methods[%d]", i)
		if !slices.Contains(specMethodNames, m.Method) {
			return bad(f+".method", "%q: want one of %s", m.Method, strings.Join(specMethodNames, ", "))
		}
		if seen[m.Method] {
			return bad(f+".method", "%q listed twice", m.Method)
		}
		seen[m.Method] = true
		if m.Name == "" {
			return bad(f+".name", "missing: want the engine's name of the method")
		}
		if m.MaxRunning < 0 {
			return bad(f+".max_running", "%d: want a count of requests (0: the scheduler's rule)", m.MaxRunning)
		}
		if m.MaxRunning > 0 && !strings.Contains(m.MaxRunningFlag, "{n}") {
			return bad(f+".max_running_flag", "%q: want the engine's option that lifts max_running, with {n} for the count", m.MaxRunningFlag)
		}
		if err := cite(f, m.Cite); err != nil {
			return err
		}
	}
	s := &p.Speculative
	g := CUDAGraphs{Sizes: s.CaptureBatches, Ranges: s.CaptureRanges}
	for i, b := range g.Sizes {
		if b < 1 || b > maxCaptureSize {
			return bad(fmt.Sprintf("speculative.capture_batches[%d]", i), "%d: want 1 to %d", b, maxCaptureSize)
		}
	}
	for i, r := range g.Ranges {
		if r.From < 1 || r.Step < 1 || r.To < r.From || r.To > maxCaptureSize {
			return bad(fmt.Sprintf("speculative.capture_ranges[%d]", i), "from %d to %d step %d: want 1 <= from <= to <= %d, step >= 1", r.From, r.To, r.Step, maxCaptureSize)
		}
	}
	if s.batches = g.CaptureSizes(); len(s.batches) > 0 {
		if err := cite("speculative.capture", s.CaptureCite); err != nil {
			return err
		}
	}
	return nil
}

// FlagFor is the method's Flag with its placeholders filled.
func (f SpecMethodFacts) FlagFor(k, steps, topk int, draft string) string {
	if topk < 1 {
		topk = 1
	}
	tree := ""
	if topk > 1 {
		tree = fmt.Sprintf(" --spec-topk %d --spec-steps %d", topk, steps)
	}
	r := strings.NewReplacer("{k}", fmt.Sprint(k), "{draft}", draft, "{steps}", fmt.Sprint(steps),
		"{topk}", fmt.Sprint(topk), "{tokens}", fmt.Sprint(k+1), "{tree}", tree)
	return r.Replace(f.Flag)
}
