package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Normalized returns p with zero fields replaced by their defaults (TP 1,
// DP 1, DCP 1).
func (p Plan) Normalized() Plan {
	if p.TP == 0 {
		p.TP = 1
	}
	if p.DP == 0 {
		p.DP = 1
	}
	if p.DCP == 0 {
		p.DCP = 1
	}
	return p
}

// World is the number of GPUs (ranks) of the plan: TP x DP.
func (p Plan) World() int {
	p = p.Normalized()
	return p.TP * p.DP
}

// ExpertRanks is the number of ranks the routed experts are spread over as
// whole experts: TP x DP under EP, 0 (experts sharded by TP) otherwise.
func (p Plan) ExpertRanks() int {
	if !p.EP {
		return 0
	}
	return p.World()
}

// DispatchesMoE reports whether tokens reach a's routed experts by a
// dispatch and come back by a combine (moe.dispatch, moe.combine: the MoE
// table's CondDP slots): under DP attention (DP > 1, which needs EP) on a
// model with routed experts. Only then do BuildOptions.MoEDispatch and
// DispatchDtype price anything.
func (p Plan) DispatchesMoE(a *Arch) bool {
	return p.Normalized().DP > 1 && a != nil && a.RoutedExperts > 0
}

// String renders the plan compactly: "tp8", "tp8-ep", "tp1-dp8-ep", "tp8-dcp8".
func (p Plan) String() string {
	p = p.Normalized()
	s := "tp" + strconv.Itoa(p.TP)
	if p.DP > 1 {
		s += "-dp" + strconv.Itoa(p.DP)
	}
	if p.EP {
		s += "-ep"
	}
	if p.DCP > 1 {
		s += "-dcp" + strconv.Itoa(p.DCP)
	}
	return s
}

// ValidateTP checks what a needs of every plan of tensor-parallel degree
// tp, whatever its DP, EP and DCP: tp divides the attention heads and,
// with dense layers, their intermediate size. The error is a *PlanError
// of field "tp".
func ValidateTP(a *Arch, tp int) error {
	perr := func(want string) error {
		return &PlanError{What: "plan", Field: "tp", Value: strconv.Itoa(tp), Want: want}
	}
	if tp < 1 {
		return perr("an integer from 1")
	}
	if a.Heads%tp != 0 {
		return perr(fmt.Sprintf("a divisor of num_attention_heads (%d)", a.Heads))
	}
	if a.DenseLayers > 0 && a.Intermediate%tp != 0 {
		return perr(fmt.Sprintf("a divisor of intermediate_size (%d)", a.Intermediate))
	}
	return nil
}

// Validate checks the plan against the architecture: TP divides the
// attention heads (and the sharded intermediate sizes), DP > 1 needs EP,
// under EP the experts divide evenly over the ranks, DCP divides TP.
// Errors are *PlanError naming the field and the expectation.
func (p Plan) Validate(a *Arch) error {
	perr := func(field string, v int, want string) error {
		return &PlanError{What: "plan", Field: field, Value: strconv.Itoa(v), Want: want}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"tp", p.TP}, {"dp", p.DP}, {"dcp", p.DCP}} {
		if f.v < 0 || f.v > 4096 {
			return perr(f.name, f.v, "an integer from 1 to 4096 (0 means 1)")
		}
	}
	p = p.Normalized()
	if a == nil {
		return nil
	}
	if err := ValidateTP(a, p.TP); err != nil {
		return err
	}
	if a.SharedExperts > 0 && p.DP == 1 && (a.SharedExperts*a.MoEIntermediate)%p.TP != 0 {
		return perr("tp", p.TP, fmt.Sprintf("a divisor of the shared experts' intermediate size (%d)", a.SharedExperts*a.MoEIntermediate))
	}
	if !p.EP && a.MoEIntermediate%p.TP != 0 {
		return perr("tp", p.TP, fmt.Sprintf("a divisor of moe_intermediate_size (%d) when experts are TP-sharded", a.MoEIntermediate))
	}
	if p.DP > 1 && !p.EP {
		return perr("dp", p.DP, "1 unless ep is on (data-parallel attention needs expert parallelism)")
	}
	if p.EP && a.RoutedExperts%p.World() != 0 {
		return &PlanError{What: "plan", Field: "ep", Value: fmt.Sprintf("on over %d ranks", p.World()),
			Want: fmt.Sprintf("n_routed_experts (%d) divisible by the expert ranks tp x dp (%d)", a.RoutedExperts, p.World())}
	}
	if p.TP%p.DCP != 0 {
		return perr("dcp", p.DCP, fmt.Sprintf("a divisor of tp (%d)", p.TP))
	}
	return nil
}

// maxKVTokens bounds batch x context of a workload (see Validate).
const maxKVTokens = 1 << 40

// Normalized returns w with defaults filled: phase decode.
func (w Workload) Normalized() Workload {
	if w.Phase == "" {
		w.Phase = Decode
	}
	return w
}

// Validate checks the workload: phase decode or prefill, batch >= 1,
// context >= 1, 0 <= spec tokens <= 16 (speculative decoding is a decode
// feature; in prefill they only add the MTP draft pass), a known KV dtype.
func (w Workload) Validate() error {
	w = w.Normalized()
	werr := func(field, v, want string) error {
		return &PlanError{What: "workload", Field: field, Value: v, Want: want}
	}
	if w.Phase != Decode && w.Phase != Prefill {
		return werr("phase", strconv.Quote(string(w.Phase)), `"decode" or "prefill"`)
	}
	if w.Batch < 1 || w.Batch > 1<<20 {
		return werr("batch", strconv.Itoa(w.Batch), "an integer from 1 to 1048576")
	}
	if w.Context < 1 || w.Context > 1<<24 {
		return werr("context", strconv.Itoa(w.Context), "an integer from 1 to 16777216 tokens")
	}
	if w.SpecTokens < 0 || w.SpecTokens > 16 {
		return werr("spec_tokens", strconv.Itoa(w.SpecTokens), "an integer from 0 to 16")
	}
	if w.Phase == Prefill && int64(w.Batch)*int64(w.Context) > 1<<26 {
		return werr("batch", strconv.Itoa(w.Batch), "batch x context at most 67108864 tokens in one prefill step")
	}
	// The KV cache of batch x context tokens times maxKVBytesPerToken must
	// fit int64 bytes: 2^40 tokens, a million times what a GPU box holds.
	if int64(w.Batch)*int64(w.Context) > maxKVTokens {
		return werr("batch", strconv.Itoa(w.Batch), fmt.Sprintf("batch x context at most %d cached tokens", int64(maxKVTokens)))
	}
	if w.KVDtype != "" && !IsKVDtype(w.KVDtype) {
		return werr("kv_dtype", strconv.Quote(string(w.KVDtype)), KVDtypesAccepted)
	}
	return nil
}

// ValidateFor is Validate, and checks the workload against the
// architecture: speculative tokens need the checkpoint's MTP layers (a
// model without one has nothing to draft with; pricing the verify pass
// alone would count tokens no step produces). Errors are *PlanError.
func (w Workload) ValidateFor(a *Arch) error {
	if err := w.Validate(); err != nil {
		return err
	}
	if a != nil && w.SpecTokens > 0 && a.MTPLayers == 0 {
		return &PlanError{What: "workload", Field: "spec_tokens", Value: strconv.Itoa(w.SpecTokens),
			Want: fmt.Sprintf("0: %s has no MTP layer (num_nextn_predict_layers 0), so it has no MTP draft", a.Name)}
	}
	return nil
}

// CheckMaxModelLen refuses a workload whose context is longer than a is
// served at (Arch.MaxModelLenTokens; 0: not known, not checked): vLLM
// refuses a max_model_len above the one it derives from the config
// (_get_and_verify_max_len: "User-specified max_model_len ... is greater
// than the derived max_model_len"), so no sequence is longer. The error is
// a *PlanError of field "context".
func (w Workload) CheckMaxModelLen(a *Arch) error {
	if limit := a.MaxModelLenTokens; limit > 0 && w.Context > limit {
		return &PlanError{What: "workload", Field: "context", Value: strconv.Itoa(w.Context),
			Want: fmt.Sprintf("at most %d tokens, the max_model_len %s is served at (vLLM derives it from the config's max_position_embeddings and RoPE scaling (rope_scaling or rope_parameters) and refuses a longer one)",
				limit, a.Name)}
	}
	return nil
}

// String renders the workload compactly: "decode b1 ctx8192 spec2 kv=fp8"
// (spec: the speculative tokens a sequence verifies per step, whichever
// method drafts them; the scenario names the method).
func (w Workload) String() string {
	w = w.Normalized()
	var b strings.Builder
	fmt.Fprintf(&b, "%s b%d ctx%d", w.Phase, w.Batch, w.Context)
	if w.SpecTokens > 0 {
		fmt.Fprintf(&b, " spec%d", w.SpecTokens)
	}
	if w.KVDtype != "" {
		fmt.Fprintf(&b, " kv=%s", w.KVDtype)
	}
	return b.String()
}

// KVDtypeFor returns the KV-cache dtype the workload runs with on a: its
// own KVDtype, or the checkpoint's.
func (w Workload) KVDtypeFor(a *Arch) Dtype {
	if w.KVDtype != "" {
		return w.KVDtype
	}
	if a.Quant.KV != "" {
		return a.Quant.KV
	}
	return BF16
}
