package advise

import (
	"math"
	"testing"
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
