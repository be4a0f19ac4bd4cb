package advise

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestBreakEven: a spec step twice the plain one needs 2 tokens per step:
// a chain of 3 with a + a^2 + a^3 = 1 (a = 0.543689, the real root of
// x^3 + x^2 + x - 1), a draft rate of 1/3; a spec step 5 times longer
// never pays with 3 drafts (at most 4 tokens).
func TestBreakEven(t *testing.T) {
	b := breakEven(20, 10, 3)
	if !near(b.TokensPerStep, 2, 1e-12) || !near(b.PerToken, 0.543689, 1e-6) || !near(b.DraftRate, 1.0/3, 1e-12) || b.Never {
		t.Errorf("break-even %+v", b)
	}
	if b := breakEven(50, 10, 3); !b.Never {
		t.Errorf("x5 step: %+v, want never", b)
	}
	if !near(chainTokens(0.5, 3), 1.875, 1e-12) {
		t.Error("chainTokens(0.5, 3)")
	}
}

// TestAdviseSpecRows: on the seed scenario advise ranks the speculative
// methods Kimi-K2.5 and vLLM allow (EAGLE-3, a draft model, n-gram,
// suffix; not MTP) with their break-even acceptance, the break-even at the
// baseline being the ratio of the two steps the row priced.
func TestAdviseSpecRows(t *testing.T) {
	base := seedConfig(t)
	var specs []Entry
	for _, e := range Catalog(CatalogOptions{}) {
		if e.Kind == "speculative" {
			specs = append(specs, e)
		}
	}
	adv, err := Advise(Input{Base: base, Entries: specs, Batches: []int{1, 8}, Contexts: []int{base.Workload.Context}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*Row{}
	for i := range adv.Rows {
		got[adv.Rows[i].Entry] = &adv.Rows[i]
	}
	for _, name := range []string{"spec-eagle3", "spec-draft", "spec-ngram", "spec-suffix"} {
		r := got[name]
		if r == nil || r.Error != "" || r.Spec == nil {
			t.Fatalf("%s: %+v", name, r)
		}
		want := r.With.StepUs / r.Without.StepUs
		if !near(r.Spec.BreakEven.TokensPerStep, want, 1e-9) || r.Spec.BreakEven.PerToken <= 0 || r.Spec.BreakEven.PerToken >= 1 {
			t.Errorf("%s: break-even %+v, want %.3f tokens per step at a per-token acceptance in (0, 1)", name, r.Spec.BreakEven, want)
		}
		if len(r.Spec.ByBatch) != 2 || len(r.Spec.PaysUpTo) != len(specAcceptLevels) {
			t.Errorf("%s: sweep %+v", name, r.Spec)
		}
		t.Logf("%s: %s", name, r.Spec)
	}
	if r := got["mtp"]; r == nil || r.Error == "" {
		t.Errorf("mtp on Kimi-K2.5 should not be predicted: %+v", r)
	}
}

// TestSpecRowInBaselineKeepsK: a baseline that already runs a method at K
// draft tokens has that method's row at its own K: the row compares the
// baseline with and without it, so its reason, how and break-even say K 5
// of an EAGLE-3 baseline at K 5. On 601a891 the row's reason and how said
// the catalog's K 3 while its numbers and break-even were the baseline's
// K 5; the other methods' rows keep the catalog's K.
func TestSpecRowInBaselineKeepsK(t *testing.T) {
	base := seedConfig(t)
	d, err := model.SpecEagle3.DefaultDrafter(base.Arch)
	if err != nil {
		t.Fatal(err)
	}
	base.Build.Spec = model.Spec{Method: model.SpecEagle3, Draft: d.Ref, Drafter: d}
	base.Workload.SpecTokens = 5
	var specs []Entry
	for _, e := range Catalog(CatalogOptions{}) {
		if e.Name == "spec-eagle3" || e.Name == "spec-ngram" {
			specs = append(specs, e)
		}
	}
	adv, err := Advise(Input{Base: base, Entries: specs, NoSweep: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range adv.Rows {
		k := map[string]int{"spec-eagle3": 5, "spec-ngram": DefaultSpecTokens}[r.Entry]
		if r.Error != "" || r.Spec == nil {
			t.Fatalf("%s: %+v", r.Entry, r)
		}
		if r.InBaseline != (r.Entry == "spec-eagle3") {
			t.Errorf("%s: in baseline %v", r.Entry, r.InBaseline)
		}
		if r.Spec.Tokens != k || !strings.Contains(r.Applicability.Reason, fmt.Sprintf(" k%d;", k)) || !strings.Contains(r.How.Exec, fmt.Sprintf("--spec-tokens %d", k)) {
			t.Errorf("%s: break-even at k %d, reason %q, how %q; want k %d throughout", r.Entry, r.Spec.Tokens, r.Applicability.Reason, r.How.Exec, k)
		}
	}
}

// TestMTPRowPricedAtMTPAccept: --mtp-accept is the MTP layers' own
// acceptance, so the MTP row is priced at it beside --spec-accept, with a
// baseline that drafts by another method (n-gram at K 3, whose acceptance
// --spec-accept then is) and with one that drafts nothing (where
// --spec-accept is every other row's): one MTP draft at 0.7 yields
// 1 + 0.7 = 1.7 tokens per step, not --spec-accept's 1 + 0.5. The other
// methods' rows keep --spec-accept where the baseline names no method.
func TestMTPRowPricedAtMTPAccept(t *testing.T) {
	plain := seedConfig(t)
	plain.Arch = mustPreset(t, "deepseek-v3")
	plain.Options.SpecAccept = sim.SpecAccept{PerToken: 0.5}
	ngram := plain
	ngram.Build.Spec = model.Spec{Method: model.SpecNgram}
	ngram.Workload.SpecTokens = 3
	var mtp, suffix Entry
	for _, e := range Catalog(CatalogOptions{MTPAcceptFrac: 0.7}) {
		switch e.Name {
		case "mtp":
			mtp = e
		case "spec-suffix":
			suffix = e
		}
	}
	for _, c := range []struct {
		name string
		base sim.Scenario
	}{{"no method", plain}, {"n-gram baseline", ngram}} {
		w, err := mtp.Apply(c.base)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		y := w.SpecYield()
		if y == nil || !near(y.TokensPerStep, 1.7, 1e-9) || y.Source != "--mtp-accept 0.7" {
			t.Errorf("%s: the MTP row priced at %+v, want 1.7 tokens per step from --mtp-accept 0.7", c.name, y)
		}
	}
	w, err := suffix.Apply(plain)
	if err != nil {
		t.Fatal(err)
	}
	if y := w.SpecYield(); y == nil || y.Positions[0] != 0.5 {
		t.Errorf("the suffix row beside a baseline of no method priced at %+v, want --spec-accept's 0.5", y)
	}
}
