package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/advise"
	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// specFlags are the speculative-decoding flags of every verb that takes a
// scenario: --spec METHOD with its drafter (--draft-model, --draft-tp), K
// (--spec-tokens; --mtp N is --spec mtp --spec-tokens N), a tree
// (--spec-topk, --spec-steps) and the acceptance read from an engine's
// metrics (--spec-accept-file; --spec-accept is an option, sim.Options).
type specFlags struct {
	specMethod     string
	specTokens     int
	specTopK       int
	specSteps      int
	draftModel     string
	draftTP        int
	specAcceptFile string
}

func (f *scenarioFlags) bindSpecFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.specMethod, "spec", f.specMethod, "speculative decoding: mtp (the checkpoint's MTP layers), eagle3 (a draft head: --draft-model), draft (a draft model: --draft-model), ngram or suffix (drafts from the context, on the host)")
	fs.IntVar(&f.specTokens, "spec-tokens", f.specTokens, "draft tokens verified per sequence and step, K (default with --spec: 1 for mtp, 3 for the others); a tree's tokens with --spec-topk")
	fs.IntVar(&f.specTopK, "spec-topk", f.specTopK, "a tree: branches each draft pass expands (SGLang --speculative-eagle-topk; 0 or 1 = a chain)")
	fs.IntVar(&f.specSteps, "spec-steps", f.specSteps, "a tree's depth: draft passes per step (SGLang --speculative-num-steps; default: the spec tokens, a chain)")
	fs.StringVar(&f.draftModel, "draft-model", f.draftModel, "the EAGLE-3 head or draft model: a built-in drafter ("+strings.Join(model.DrafterPresetNames(), ", ")+"), a model preset, or a config.json (default: the model family's built-in)")
	fs.IntVar(&f.draftTP, "draft-tp", f.draftTP, "the draft model's tensor-parallel degree, a divisor of --tp (default: --tp); smaller groups each draft for themselves")
	fs.StringVar(&f.specAcceptFile, "spec-accept-file", f.specAcceptFile, "read the acceptance from an engine's metrics: vLLM's /metrics text (per-position accepted-token counters), its \"SpecDecoding metrics\" log lines, or SGLang's \"accept len\" log lines; or from a benchmark client's report of them: vllm bench serve's \"Speculative Decoding\" section or --save-result JSON, SGLang bench_serving's \"Accept length:\" row or JSONL")
	wantWhenEmpty(fs, "spec", "a speculative decoding method: mtp, eagle3, draft, ngram or suffix")
	wantWhenEmpty(fs, "draft-model", "a built-in drafter, a model preset or a config.json")
	wantWhenEmpty(fs, "spec-accept-file", "an engine's metrics or log file, or a benchmark's output or results")
}

// specFlagNames are the flags bindSpecFlags registers.
var specFlagNames = []string{"spec", "spec-tokens", "spec-topk", "spec-steps", "draft-model", "draft-tp", "spec-accept-file"}

// specMethod is the method the flags name: --spec, or mtp for --mtp N.
func (f *scenarioFlags) specMethodFlag() (model.SpecMethod, error) {
	m, err := model.ParseSpecMethod(f.specMethod)
	if err != nil {
		return "", causeError("--spec", quote(f.specMethod), err)
	}
	if f.changed("mtp") && f.mtp != 0 {
		if m != "" && m != model.SpecMTP {
			return "", flagError(fmt.Sprintf("--mtp %d and --spec %s", f.mtp, m), nil, "--mtp N is --spec mtp --spec-tokens N: use --spec-tokens with --spec %s", m)
		}
		if f.changed("spec-tokens") && f.specTokens != f.mtp {
			return "", flagError(fmt.Sprintf("--mtp %d and --spec-tokens %d", f.mtp, f.specTokens), nil, "give one of them")
		}
	}
	return m, nil
}

// specTokensFlag is K: --spec-tokens, --mtp, or the method's default.
func (f *scenarioFlags) specTokensFlag(m model.SpecMethod) int {
	switch {
	case f.changed("spec-tokens"):
		return f.specTokens
	case f.mtp != 0:
		return f.mtp
	case m == model.SpecMTP:
		return 1
	case m != "":
		return advise.DefaultSpecTokens
	}
	return 0
}

// rowSpecTokens is K of the speculative catalog rows other than MTP
// (advise's and verdict's): --spec-tokens when given, else 0 for the
// catalog's default. --mtp N is the baseline's MTP, not the rows' K.
func (f *scenarioFlags) rowSpecTokens() int {
	if f.changed("spec-tokens") {
		return f.specTokens
	}
	return 0
}

// spec is the speculative method the flags name, its drafter resolved
// (the family's built-in when none is named); a bad flag is a usage error
// naming it.
func (f *scenarioFlags) spec(a *model.Arch, m model.SpecMethod) (model.Spec, error) {
	s := model.Spec{Method: m, TopK: f.specTopK, Steps: f.specSteps, DraftTP: f.draftTP}
	if m == model.SpecMTP && !f.changed("spec") {
		s.Method = "" // --mtp N: recorded as scenarios before methods had names
	}
	switch {
	case f.draftModel != "":
		if err := checkModelPath("--draft-model", f.draftModel); err != nil {
			return s, err
		}
		d, err := model.ResolveDrafter(f.draftModel)
		if err != nil {
			// A config that does not parse names its file and field.
			var ce *model.ConfigError
			if errors.As(err, &ce) {
				return s, causeError("--draft-model", nil, err)
			}
			return s, causeError("--draft-model", f.draftModel, err)
		}
		if a != nil && a.Ref.Scale > 1 {
			if d, err = model.ScaleArch(d, a.Ref.Scale); err != nil {
				return s, causeError("--draft-model", f.draftModel, err)
			}
		}
		s.Draft, s.Drafter = d.Ref, d
	case m == model.SpecEagle3 || m == model.SpecDraftModel:
		d, err := m.DefaultDrafter(a)
		if err != nil {
			return s, flagError("--spec "+string(m), nil, "%v", err)
		}
		s.Draft, s.Drafter = d.Ref, d
	}
	return s, nil
}

// specAccept reads --spec-accept-file into the options' acceptance (a
// file and --spec-accept together are refused).
func (f *scenarioFlags) specAccept(o *sim.Options) error {
	if f.specAcceptFile == "" {
		return nil
	}
	if f.changed("spec-accept") {
		return flagError("--spec-accept and --spec-accept-file", nil, "give one of them")
	}
	if err := checkInputFile("--spec-accept-file", f.specAcceptFile, "an engine's metrics text or log, or a benchmark's output or results"); err != nil {
		return err
	}
	data, err := os.ReadFile(f.specAcceptFile)
	if err != nil {
		return causeError("--spec-accept-file", f.specAcceptFile, err)
	}
	got, err := engprof.ParseSpecAcceptance(f.specAcceptFile, data)
	if err != nil {
		return causeError("--spec-accept-file", f.specAcceptFile, err)
	}
	// One position read stays one position (not a per-token rate), so
	// that the step says which positions were measured and which carried
	// on from it (sim.SpecYield).
	a := sim.SpecAccept{PerPosition: got.PerPosition, MeanLength: got.MeanLength, AtTokens: got.AtTokens, Source: got.Source + " (" + f.specAcceptFile + ")"}
	if err := a.Validate(); err != nil {
		return causeError("--spec-accept-file", f.specAcceptFile, err)
	}
	o.SpecAccept = a
	return nil
}

// checkAccept refuses an acceptance (--spec-accept, --spec-accept-file,
// --mtp-accept) on a scenario without draft tokens to accept, unless the
// verb also prices speculative variants (advise's and verdict's rows),
// and a per-position --spec-accept with more rates than the step has
// draft positions (a chain's tokens, a tree's depth), of which the rest
// would be dropped.
func (f *scenarioFlags) checkAccept(sc sim.Scenario) error {
	steps := sc.Build.Spec.DraftSteps(sc.Workload)
	if steps == 0 && !f.variants {
		for _, name := range acceptFlagNames {
			if !f.changed(name) {
				continue
			}
			return flagError("--"+name, f.fs.Lookup(name).Value.String(), "want no acceptance without --spec or --mtp: the step drafts no tokens to accept")
		}
	}
	// --mtp-accept is the MTP layers' acceptance: a step drafting by
	// another method would not take it, nor would any row of a model
	// without MTP layers (sim.specYield).
	if f.changed("mtp-accept") {
		m := sc.Build.Spec.MethodFor(sc.Workload)
		switch why := model.NoMTPDraft(sc.Arch); {
		case f.variants && why != "":
			return flagError("--mtp-accept", f.fs.Lookup("mtp-accept").Value.String(), "want no MTP acceptance: %s for it to price (--spec-accept gives the other methods' acceptance)", why)
		case !f.variants && m != "" && m != model.SpecMTP:
			return flagError("--mtp-accept", f.fs.Lookup("mtp-accept").Value.String(), "want --spec mtp: it is the MTP layers' acceptance, and --spec %s drafts without them (--spec-accept gives its acceptance)", m)
		}
		// One step, one acceptance: --spec-accept (or its file) prices
		// the MTP drafts too (sim.specYield), so beside it --mtp-accept
		// would be printed and priced nowhere.
		if other := f.acceptFlag(); other != "" && !f.variants {
			return flagError("--mtp-accept "+f.fs.Lookup("mtp-accept").Value.String()+" and "+other, nil, "give one: both set the MTP drafts' acceptance, and %s would price it, --mtp-accept nothing", strings.Fields(other)[0])
		}
	}
	n := len(f.opts.SpecAccept.PerPosition)
	if !f.changed("spec-accept") || steps == 0 || n <= steps {
		return nil
	}
	k := fmt.Sprintf("--spec %s", sc.Build.Spec.MethodFor(sc.Workload))
	switch {
	case f.changed("spec-steps"):
		k = fmt.Sprintf("--spec-steps %d", f.specSteps)
	case f.changed("spec-tokens"):
		k = fmt.Sprintf("--spec-tokens %d", f.specTokens)
	case f.changed("mtp"):
		// The flag's own text: plan's --mtp is a list.
		k = "--mtp " + f.fs.Lookup("mtp").Value.String()
	}
	return flagError(fmt.Sprintf("--spec-accept %s and %s", f.opts.SpecAccept, k), nil,
		"want at most %d per-position rates, one per draft position of the step (%d given)", steps, n)
}

// acceptFlag is the acceptance flag other than --mtp-accept the user set,
// with its value ("--spec-accept 0.8", "--spec-accept-file m.txt"); "" for
// none.
func (f *scenarioFlags) acceptFlag() string {
	switch {
	case f.changed("spec-accept"):
		return "--spec-accept " + f.fs.Lookup("spec-accept").Value.String()
	case f.specAcceptFile != "":
		return "--spec-accept-file " + f.specAcceptFile
	}
	return ""
}

// acceptFlagNames are the flags that give the acceptance: what a
// speculative step yields, not what it runs.
var acceptFlagNames = []string{"spec-accept", "spec-accept-file", "mtp-accept"}

// specFieldFlags are the flags that set the fields of a *model.PlanError
// about speculation.
var specFieldFlags = map[string]string{"method": "--spec", "draft_model": "--draft-model", "draft_tp": "--draft-tp", "spec_topk": "--spec-topk", "spec_steps": "--spec-steps"}

// specFlagError names the flag a speculative PlanError is about: the
// spec's fields, and K as --spec-tokens when the user gave that or --spec
// (--mtp otherwise).
func (f *scenarioFlags) specFlagError(err error) error {
	var ue *usageError
	var pe *model.PlanError
	if !errors.As(err, &ue) || !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.What == "spec" && specFieldFlags[pe.Field] != "":
		ue.Flag, ue.Value, ue.Want, ue.Of = specFieldFlags[pe.Field], pe.Value, "want "+pe.Want, ""
	case pe.Field == "spec_tokens" && (f.changed("spec-tokens") || f.changed("spec")):
		ue.Flag = "--spec-tokens"
	}
	return err
}

// applySpec sets the field one speculative flag names on a recorded
// scenario (compare, calibrate), the rest of its speculation as recorded:
// --spec-tokens is K, --spec-topk, --spec-steps, --draft-model and
// --draft-tp their field of the recorded spec; --spec naming the recorded
// method keeps it whole, another method starts from the flags (its
// drafter the one --draft-model names or the family's built-in).
func (f *scenarioFlags) applySpec(name string, sc *sim.Scenario) error {
	m, err := f.specMethodFlag()
	if err != nil {
		return err
	}
	was := sc.Build.Spec.MethodFor(sc.Workload)
	if m == "" {
		m = was
	}
	switch name {
	case "spec-accept-file":
		return f.specAccept(&sc.Options)
	case "spec":
		if m == was && was != "" {
			return nil
		}
		s, err := f.spec(sc.Arch, m)
		if err != nil {
			return err
		}
		sc.Build.Spec = s
		if !f.changed("spec-tokens") {
			sc.Workload.SpecTokens = f.specTokensFlag(m)
		}
	case "spec-tokens":
		sc.Workload.SpecTokens = f.specTokensFlag(m)
	case "spec-topk":
		sc.Build.Spec.TopK = f.specTopK
	case "spec-steps":
		sc.Build.Spec.Steps = f.specSteps
	case "draft-tp":
		sc.Build.Spec.DraftTP = f.draftTP
	case "draft-model":
		s, err := f.spec(sc.Arch, m)
		if err != nil {
			return err
		}
		sc.Build.Spec.Draft, sc.Build.Spec.Drafter = s.Draft, s.Drafter
	}
	return nil
}

// scaleScenario divides the widths of the scenario's model and of its
// drafter by factor (run and verdict --scale).
func scaleScenario(sc *sim.Scenario, factor float64) error {
	var err error
	if sc.Arch, err = model.ScaleArch(sc.Arch, factor); err != nil {
		return err
	}
	if d := sc.Build.Spec.Drafter; d != nil {
		if sc.Build.Spec.Drafter, err = model.ScaleArch(d, factor); err != nil {
			return err
		}
		sc.Build.Spec.Draft = sc.Build.Spec.Drafter.Ref
	}
	return nil
}
