package advise

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// The speculative-decoding entries of the catalog, one per method
// (specMethods): "mtp" (its name from before methods had names),
// "spec-eagle3", "spec-draft", "spec-ngram", "spec-suffix". Each turns the
// method on with its drafter (the built-in head or draft model of the
// model's family, scaled as the model is) and K draft tokens, or off when
// the baseline has it; a baseline with another method is compared with
// this one in its place. Acceptance is an input: each row says which
// figure priced it and advise adds the acceptance at which it breaks even
// (advise_spec.go).

// DefaultSpecTokens is the draft tokens of the EAGLE-3, draft-model,
// n-gram and suffix entries: 3, the k of lightseekorg's Kimi EAGLE-3
// recipe (--speculative-num-steps 3, num_speculative_tokens 3) and of the
// public Kimi-K2.6 runs on 8x RTX PRO 6000 (sim/public_spec_test.go's
// rows K20-K25).
const DefaultSpecTokens = 3

// specEntryName is the catalog name of method m's entry.
func specEntryName(m model.SpecMethod) string {
	if m == model.SpecMTP {
		return "mtp"
	}
	return "spec-" + string(m)
}

// specMethods are the methods the catalog has an entry for, in its order:
// every method model.ParseSpecMethod reads.
var specMethods = []model.SpecMethod{model.SpecMTP, model.SpecEagle3, model.SpecDraftModel, model.SpecNgram, model.SpecSuffix}

// specEntries are the speculative-decoding entries.
func specEntries(o CatalogOptions) []Entry {
	var out []Entry
	for _, m := range specMethods {
		out = append(out, specEntry(o, m))
	}
	return out
}

// specTokensFor is the K an entry applies: MTPTokens for MTP (default 1,
// the one MTP layer DeepSeek-V3 and GLM-5 ship), SpecTokens (default
// DefaultSpecTokens) for the others.
func specTokensFor(o CatalogOptions, m model.SpecMethod) int {
	if m == model.SpecMTP {
		return max(1, o.MTPTokens)
	}
	if o.SpecTokens > 0 {
		return o.SpecTokens
	}
	return DefaultSpecTokens
}

func specEntry(o CatalogOptions, m model.SpecMethod) Entry {
	k := specTokensFor(o, m)
	title := map[model.SpecMethod]string{
		model.SpecMTP:        "MTP speculative decoding (the checkpoint's MTP layers)",
		model.SpecEagle3:     "EAGLE-3 speculative decoding (a draft head over the target's hidden states)",
		model.SpecDraftModel: "speculative decoding with a draft model",
		model.SpecNgram:      "n-gram speculative decoding (prompt lookup on the host)",
		model.SpecSuffix:     "suffix-tree speculative decoding (on the host)",
	}[m]
	title += fmt.Sprintf(", %d draft token", k)
	if k > 1 {
		title += "s"
	}
	apply := func(c sim.Scenario) (sim.Scenario, error) {
		if why := model.NoMTPDraft(c.Arch); m == model.SpecMTP && why != "" {
			// In the row's words, not the builder's field.
			return c, errors.New(why + "; the spec-eagle3, spec-draft, spec-ngram and spec-suffix rows draft without one")
		}
		spec, k := model.Spec{Method: m}, k
		if own := c.Build.Spec.MethodFor(c.Workload); own != "" && own != m {
			// The acceptance given beside a baseline that speculates is
			// its method's (an EAGLE-3 head's measured rate is not what
			// suffix decoding accepts): this method keeps its own cited
			// figure, as another method keeps its own beside
			// --mtp-accept. Without a method in the baseline the
			// acceptance is every row's.
			c.Options.SpecAccept = sim.SpecAccept{}
		}
		if c.Build.Spec.MethodFor(c.Workload) == m {
			// The baseline's own method: its row is the baseline, at the
			// baseline's K (its reason, how and break-even say so), not
			// the catalog's.
			spec, k = c.Build.Spec, c.Workload.SpecTokens
		} else if d, err := m.DefaultDrafter(c.Arch); err != nil {
			return c, err
		} else if d != nil {
			spec.Draft, spec.Drafter = d.Ref, d
		}
		if m == model.SpecMTP {
			spec.Method = "" // scenarios before methods had names spelled MTP so
			if o.MTPAcceptFrac > 0 {
				// --mtp-accept is the MTP layers' own acceptance: it
				// prices this row over an acceptance given for every
				// row (--spec-accept beside a baseline that drafts
				// nothing), which sim's yield would read first.
				c.Options.MTPAcceptFrac = o.MTPAcceptFrac
				c.Options.SpecAccept = sim.SpecAccept{}
			}
		}
		c.Build.Spec = spec
		c.Workload.SpecTokens = k
		if err := model.Validate(c.Arch, c.Plan, c.Workload, c.Build); err != nil {
			return c, err
		}
		return c, nil
	}
	return Entry{
		Name: specEntryName(m), Title: title, Kind: "speculative",
		Enabled: func(c sim.Scenario) bool { return c.Build.Spec.MethodFor(c.Workload) == m },
		Apply:   apply,
		Revert: func(c sim.Scenario) (sim.Scenario, error) {
			c.Workload.SpecTokens = 0
			c.Build.Spec = model.Spec{}
			return c, nil
		},
		Check: func(c sim.Scenario) Applicability { return checkSpecEntry(c, m, apply) },
		HowTo: func(c sim.Scenario) How {
			w, err := apply(c)
			if err != nil {
				return How{}
			}
			h := How{Exec: specExecFlags(w)}
			if f := w.SpecEngineFlag(); f != "" {
				h.Engine = []string{f}
				if p := profileOf(w); p != nil {
					h.EngineName = p.Name()
				}
			}
			return h
		},
		Sweep: true,
	}
}

// specExecFlags is the tpscope command line that prices the scenario's
// speculative method.
func specExecFlags(c sim.Scenario) string {
	s := c.Build.Spec
	m := s.MethodFor(c.Workload)
	f := []string{"predict --spec " + string(m), fmt.Sprintf("--spec-tokens %d", c.Workload.SpecTokens)}
	if d := s.Draft.String(); d != "" {
		f = append(f, "--draft-model "+d)
	}
	if s.TopK > 1 {
		f = append(f, fmt.Sprintf("--spec-topk %d --spec-steps %d", s.TopK, s.DraftSteps(c.Workload)))
	}
	return strings.Join(f, " ")
}

// checkSpecEntry: the model must have what the method drafts with (MTP
// layers, a head or draft model of its family, built in or given), the
// engine must implement it; the status is conditional where the priced
// acceptance is no measurement of this pairing (a stand-in figure) or
// depends on the traffic's repetition (ngram, suffix).
func checkSpecEntry(c sim.Scenario, m model.SpecMethod, apply func(sim.Scenario) (sim.Scenario, error)) Applicability {
	// The engine's methods first: a drafter to pass (--draft-model) is no
	// way to run a method the engine has no implementation of, which
	// predict refuses whatever drafts.
	if p := profileOf(c); p != nil {
		if _, ok := p.SpecMethod(string(m)); !ok {
			probe := c
			probe.Build.Spec, probe.Workload.SpecTokens = model.Spec{Method: m}, 1
			if err := probe.CheckSpec(); err != nil {
				return Applicability{Status: NotApplicable, Reason: err.Error()}
			}
		}
	}
	w, err := apply(c)
	if err != nil {
		return Applicability{Status: NotApplicable, Reason: err.Error()}
	}
	if err := w.CheckSpec(); err != nil {
		return Applicability{Status: NotApplicable, Reason: err.Error()}
	}
	y := w.SpecYield()
	r := fmt.Sprintf("%s; %.2f tokens per step at the acceptance priced (%s)", w.Build.Spec.String(w.Workload), y.TokensPerStep, y.Source)
	switch m {
	case model.SpecMTP:
		r = fmt.Sprintf("%d MTP layer(s) in the checkpoint; ", c.Arch.MTPLayers) + r
	case model.SpecDraftModel:
		if y.Default {
			return Applicability{Status: Conditional, Reason: r, Needs: "a draft model that accepts as well as the figure priced (none is published for this family)",
				UpperBound: true, Caution: "the acceptance priced is an EAGLE-3 head's, trained on the target's outputs; a draft model not trained on them accepts less"}
		}
	case model.SpecNgram, model.SpecSuffix:
		a := Applicability{Status: Conditional, Reason: r, Needs: "traffic that repeats its context (code edits, agents); drafting runs on the host between steps"}
		if y.Default && m == model.SpecNgram {
			a.UpperBound, a.Caution = true, "the acceptance priced is an editing dataset's; chat traffic repeats far less"
		}
		return a
	}
	return Applicability{Status: Applies, Reason: r}
}
