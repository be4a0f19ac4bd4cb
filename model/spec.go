package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Speculative decoding. A speculative decode step of K draft tokens per
// sequence (Workload.SpecTokens) is, per engine step (vLLM v1
// spec_decode/eagle.py and draft_model.py; SGLang eagle_worker.py):
//
//   - the verify pass: the target model over T = batch x (1 + K) tokens
//     (the last accepted token and the K drafts of each sequence; a tree
//     verifies its tree tokens instead of a chain), its logits for every
//     token, then the rejection sampler (spec.rejection_sample);
//   - the draft passes, Spec.DraftSteps of them, one after another: the
//     first over every token the target just verified (it extends the
//     drafter's own KV cache), each later one over one token per sequence
//     (topk per sequence in a tree), each with its own kernels and, at
//     TP > 1, its own all-reduces.
//
// What drafts depends on the method: the checkpoint's MTP layers (mtp), an
// EAGLE-3 head (eagle3), a whole small model (draft), or nothing on the
// device (ngram, suffix: the drafts come from the context on the host; the
// step is the verify pass alone). The expected tokens a step yields come
// from the acceptance, an input the pricing side owns.

// SpecMethod is a speculative-decoding method.
type SpecMethod string

const (
	SpecMTP        SpecMethod = "mtp"    // the checkpoint's MTP layers (vLLM method mtp, SGLang NEXTN)
	SpecEagle3     SpecMethod = "eagle3" // an EAGLE-3 head over the target's hidden states
	SpecDraftModel SpecMethod = "draft"  // a whole small model (vLLM draft_model, SGLang STANDALONE)
	SpecNgram      SpecMethod = "ngram"  // prompt lookup on the host (vLLM ngram, SGLang NGRAM)
	SpecSuffix     SpecMethod = "suffix" // suffix-tree lookup on the host (vLLM suffix, Arctic Inference)
)

// specMethods lists the methods in a fixed order.
var specMethods = []SpecMethod{SpecMTP, SpecEagle3, SpecDraftModel, SpecNgram, SpecSuffix}

// ParseSpecMethod reads a method name; "" is none.
func ParseSpecMethod(s string) (SpecMethod, error) {
	k := SpecMethod(strings.ToLower(strings.TrimSpace(s)))
	switch k {
	case "", "none", "off":
		return "", nil
	case "eagle-3", "eagle":
		return SpecEagle3, nil
	case "draft_model", "draft-model", "standalone":
		return SpecDraftModel, nil
	case "nextn", "deepseek_mtp":
		return SpecMTP, nil
	}
	for _, m := range specMethods {
		if k == m {
			return m, nil
		}
	}
	names := make([]string, len(specMethods))
	for i, m := range specMethods {
		names[i] = string(m)
	}
	return "", fmt.Errorf("speculative method %q: want one of %s", s, strings.Join(names, ", "))
}

// OnDevice reports whether the method drafts with a model on the GPUs.
func (m SpecMethod) OnDevice() bool { return m == SpecMTP || m == SpecEagle3 || m == SpecDraftModel }

// Spec is the speculative-decoding method of a scenario's steps
// (BuildOptions.Spec); the zero value with Workload.SpecTokens > 0 is MTP,
// as scenarios before methods were named meant.
type Spec struct {
	Method SpecMethod `json:"method,omitempty"`
	// Steps is the draft passes per step, the depth of a tree; 0 means
	// Workload.SpecTokens (a chain of that many drafts).
	Steps int `json:"steps,omitempty"`
	// TopK is the branches a tree expands at each draft pass (SGLang's
	// --speculative-eagle-topk); 0 or 1 is a chain. With a tree,
	// Workload.SpecTokens is the draft tokens the target verifies per
	// sequence (SGLang's --speculative-num-draft-tokens less its root).
	TopK int `json:"topk,omitempty"`
	// Draft names the EAGLE-3 head (eagle3) or the draft model (draft):
	// a built-in drafter, a model preset or a config file (Ref's forms).
	Draft Ref `json:"draft,omitzero"`
	// DraftTP is the draft model's tensor-parallel degree, a divisor of
	// the target's TP (0: the target's). With fewer ranks the draft runs
	// in groups of DraftTP consecutive ranks, each group drafting for
	// itself (the others' copy of it), as vLLM's draft TP of 1 does.
	DraftTP int `json:"draft_tp,omitempty"`
	// Drafter is Draft resolved (ResolveDrafter, DecodeScenario); the
	// builder reads it, the JSON records Draft.
	Drafter *Arch `json:"-"`
}

// IsZero reports an unset spec (for omitzero).
func (s Spec) IsZero() bool {
	return s.Method == "" && s.Steps == 0 && s.TopK == 0 && s.Draft == (Ref{}) && s.DraftTP == 0 && s.Drafter == nil
}

// MethodFor is the method a step of w runs: Method, or MTP when none is
// named and w has speculative tokens; "" without speculation.
func (s Spec) MethodFor(w Workload) SpecMethod {
	if w.SpecTokens <= 0 {
		return ""
	}
	if s.Method == "" {
		return SpecMTP
	}
	return s.Method
}

// DraftSteps is the draft passes (a tree's depth) of a step of w: Steps,
// or w.SpecTokens for a chain; 0 without speculation.
func (s Spec) DraftSteps(w Workload) int {
	if w.SpecTokens <= 0 {
		return 0
	}
	if s.Steps > 0 {
		return s.Steps
	}
	return w.SpecTokens
}

// Branches is the tokens per sequence of each draft pass after the first:
// TopK for a tree, 1 for a chain.
func (s Spec) Branches() int { return max(1, s.TopK) }

// String renders the spec compactly: "eagle3(kimi-k2.5-eagle3-mla) k3",
// "draft(moonlight-16b-a3b, tp1) k3", "eagle3 k7 tree 3x4"; "" without
// speculation.
func (s Spec) String(w Workload) string {
	m := s.MethodFor(w)
	if m == "" {
		return ""
	}
	out := string(m)
	var in []string
	if d := s.Draft.String(); d != "" {
		in = append(in, d)
	}
	if s.DraftTP > 0 {
		in = append(in, "tp"+strconv.Itoa(s.DraftTP))
	}
	if len(in) > 0 {
		out += "(" + strings.Join(in, ", ") + ")"
	}
	out += " k" + strconv.Itoa(w.SpecTokens)
	if s.TopK > 1 {
		out += fmt.Sprintf(" tree %dx%d", s.DraftSteps(w), s.TopK)
	}
	return out
}

// NoMTPDraft says why a has no MTP draft, in words for people: it has no
// MTP layer; "" when it has one.
func NoMTPDraft(a *Arch) string {
	if a == nil || a.MTPLayers > 0 {
		return ""
	}
	return fmt.Sprintf("%s has no MTP layer (num_nextn_predict_layers 0), so it has no MTP draft", a.Name)
}

// validateSpec checks the speculative method of a step of w against the
// target a and plan p: the method is known; it needs K >= 1 draft tokens;
// mtp needs the checkpoint's MTP layers; eagle3 needs an EAGLE-3 head whose
// widths and vocabulary are the target's (a head trained for another model
// is refused); draft needs a whole model of the target's vocabulary, at a
// TP that divides the target's and its own heads; ngram and suffix take no
// drafter; a tree (topk > 1) is the model-based methods' and verifies at
// least its depth in tokens. Errors are *PlanError: What "spec" (Field
// method, draft_model, draft_tp, spec_topk, spec_steps) or "workload" (spec_tokens).
func validateSpec(a *Arch, p Plan, w Workload, s Spec) error {
	serr := func(field, v, want string) error { return &PlanError{What: "spec", Field: field, Value: v, Want: want} }
	if s.Method != "" {
		if _, err := ParseSpecMethod(string(s.Method)); err != nil || s.Method != SpecMethod(strings.ToLower(string(s.Method))) {
			return serr("method", strconv.Quote(string(s.Method)), "one of mtp, eagle3, draft, ngram, suffix")
		}
		if w.SpecTokens < 1 {
			return &PlanError{What: "workload", Field: "spec_tokens", Value: strconv.Itoa(w.SpecTokens),
				Want: fmt.Sprintf("at least 1 draft token per step for --spec %s", s.Method)}
		}
	}
	m := s.MethodFor(w)
	if m == "" {
		// Without speculation a drafter, a tree or a draft TP would price
		// nothing.
		switch {
		case s.Drafter != nil || s.Draft != (Ref{}):
			return serr("draft_model", s.Draft.String(), "no draft model without --spec eagle3 or draft")
		case s.TopK != 0:
			return serr("spec_topk", strconv.Itoa(s.TopK), "no tree without --spec")
		case s.Steps != 0:
			return serr("spec_steps", strconv.Itoa(s.Steps), "no draft passes without --spec")
		case s.DraftTP != 0:
			return serr("draft_tp", strconv.Itoa(s.DraftTP), "no draft TP without --spec draft")
		}
		return nil
	}
	if w.Phase == Prefill && m != SpecMTP {
		return &PlanError{What: "workload", Field: "phase", Value: string(w.Phase), Want: "decode: a speculative step other than MTP is modelled for decode"}
	}
	if s.TopK < 0 || s.TopK > 16 {
		return serr("spec_topk", strconv.Itoa(s.TopK), "0 to 16 branches per draft pass (0 or 1: a chain)")
	}
	steps := s.DraftSteps(w)
	if s.Steps < 0 || steps > w.SpecTokens {
		return serr("spec_steps", strconv.Itoa(s.Steps), fmt.Sprintf("1 to the verified draft tokens (%d): a tree is at most as deep as it has tokens", w.SpecTokens))
	}
	if s.TopK > 1 {
		if !m.OnDevice() {
			return serr("spec_topk", strconv.Itoa(s.TopK), fmt.Sprintf("1: %s drafts one chain", m))
		}
		if maxTok := s.TopK * (1 + (steps-1)*s.TopK); w.SpecTokens > maxTok {
			return &PlanError{What: "workload", Field: "spec_tokens", Value: strconv.Itoa(w.SpecTokens),
				Want: fmt.Sprintf("at most %d tree tokens for depth %d and topk %d", maxTok, steps, s.TopK)}
		}
	} else if s.Steps > 0 && s.Steps != w.SpecTokens {
		return serr("spec_steps", strconv.Itoa(s.Steps), fmt.Sprintf("%d: a chain drafts as many tokens as it has passes (a tree needs --spec-topk > 1)", w.SpecTokens))
	}
	d := s.Drafter
	switch m {
	case SpecMTP:
		if why := NoMTPDraft(a); why != "" {
			if s.Method == SpecMTP {
				// Named (--spec mtp): the method is at fault, not K.
				return serr("method", string(SpecMTP), "a method with a draft: "+why+" (eagle3, draft, ngram or suffix draft without one)")
			}
			return &PlanError{What: "workload", Field: "spec_tokens", Value: strconv.Itoa(w.SpecTokens),
				Want: fmt.Sprintf("0: %s (--spec eagle3, draft, ngram or suffix draft without one)", why)}
		}
		if d != nil {
			return serr("draft_model", s.Draft.String(), "none: mtp drafts with the checkpoint's own MTP layers")
		}
	case SpecEagle3:
		if d == nil {
			return serr("draft_model", `""`, "an EAGLE-3 head (a built-in head, e.g. kimi-k2.5-eagle3-mla, or its config.json)")
		}
		if !d.IsEagle3Head() {
			return serr("draft_model", d.Name, "an EAGLE-3 head (its config names an Eagle3 architecture); a whole model drafts with --spec draft")
		}
		if d.eagle3.TargetHidden != a.Hidden || d.Vocab != a.Vocab {
			return serr("draft_model", d.Name, fmt.Sprintf("a head for %s: its target width %d and vocabulary %d are not the target's %d and %d (a head trained for another model)",
				a.Name, d.eagle3.TargetHidden, d.Vocab, a.Hidden, a.Vocab))
		}
		if err := (Plan{TP: p.TP}).Validate(d); err != nil {
			return serr("draft_model", d.Name, fmt.Sprintf("heads divisible by the target's TP %d (the head runs at the target's TP)", p.TP))
		}
	case SpecDraftModel:
		if d == nil {
			return serr("draft_model", `""`, "a draft model of the target's vocabulary (a preset, e.g. moonlight-16b-a3b for Kimi-K2.x, or a config.json)")
		}
		if d.IsEagle3Head() {
			return serr("draft_model", d.Name, "a whole model; an EAGLE-3 head drafts with --spec eagle3")
		}
		if d.Vocab != a.Vocab {
			return serr("draft_model", d.Name, fmt.Sprintf("a model with %s's vocabulary of %d tokens, not %d (drafts must be the target's tokens)", a.Name, a.Vocab, d.Vocab))
		}
		dtp := s.DraftTP
		if dtp == 0 {
			dtp = p.TP
		}
		if dtp < 1 || p.TP%dtp != 0 {
			return serr("draft_tp", strconv.Itoa(s.DraftTP), fmt.Sprintf("a divisor of the target's TP %d", p.TP))
		}
		if err := (Plan{TP: dtp}).Validate(d); err != nil {
			return serr("draft_tp", strconv.Itoa(dtp), fmt.Sprintf("a divisor of %s's %d heads", d.Name, d.Heads))
		}
		if p.Normalized().DCP > 1 {
			return serr("method", string(m), "a target plan without DCP (a draft model's passes under decode context parallelism are not modelled)")
		}
		// vLLM drafts only while the batch's longest sequence and its
		// drafts fit the draft model's max_model_len (the V1 runner's
		// _input_fits_in_drafter); past it the step drafts nothing and
		// verifies placeholders (vllm-project/vllm #58080, #57964), not
		// the speculative step priced here.
		if lim := d.MaxModelLenTokens; lim > 0 && w.Context+w.SpecTokens > lim {
			return &PlanError{What: "workload", Field: "context", Value: strconv.Itoa(w.Context),
				Want: fmt.Sprintf("at most %d tokens with --spec draft %s: its max_model_len is %d, and vLLM stops drafting once a sequence and its %d drafts pass it",
					lim-w.SpecTokens, d.Name, lim, w.SpecTokens)}
		}
	case SpecNgram, SpecSuffix:
		if d != nil {
			return serr("draft_model", s.Draft.String(), fmt.Sprintf("none: %s drafts from the context on the host", m))
		}
	}
	if s.DraftTP != 0 && m != SpecDraftModel {
		return serr("draft_tp", strconv.Itoa(s.DraftTP), "0: only a draft model runs at a TP of its own")
	}
	return nil
}
