package serving

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCalibrateOneLoadTerms: fitted on levels of one load, which shows
// one TTFT and one TPOT, the default fit moves the two terms that load
// tells apart, the decode scale and the frontend; the per-step and
// per-sequence host costs and the prefill scale keep the deployment's
// values and a note says so. Named terms are fitted as named, but for
// the per-sequence cost, which one load cannot tell from the per-step
// one. Fitted on two loads every term is fitted.
func TestCalibrateOneLoadTerms(t *testing.T) {
	var levels []Measured
	for _, f := range []string{"conc16.json", "conc64.json"} {
		ms, err := LoadMeasured(filepath.Join("testdata", "bench", "inferencex-dsr1-fp4-b200-sglang-tp8ep8", f))
		if err != nil {
			t.Fatal(err)
		}
		levels = append(levels, ms...)
	}
	if len(levels) != 2 || levels[0].Concurrency == levels[1].Concurrency {
		t.Fatalf("levels %d, concurrencies want two different loads", len(levels))
	}
	// Only which terms are fitted is checked: any deployment will do.
	d := kimiDeployment(t)
	d.Overheads = Overheads{StepUs: 7, PerSeqUs: 3, PrefillScale: 1.5}
	for _, c := range []struct {
		fit       []int
		terms     []CalibrateTerm
		loads     int
		note      string // a note that must be there ("": none)
		kept      bool   // step, per-seq and prefill keep the deployment's values
		perSeqNot bool   // per-seq keeps the deployment's value
	}{
		{[]int{0}, nil, 1, "step, per-seq, prefill, prefill-step not fitted: the fitted levels run 1 load(s) and 1 shape(s)", true, true},
		{[]int{0}, []CalibrateTerm{TermStepUs, TermPerSeqUs, TermFrontendMs}, 1, "per-seq not fitted", false, true},
		{[]int{0, 1}, nil, 2, "", false, false},
	} {
		if got, shapes := distinctLoads(levels, c.fit); got != c.loads || shapes != c.loads {
			t.Errorf("fit %v: %d distinct loads, %d shapes, want %d of each", c.fit, got, shapes, c.loads)
		}
		cal, err := Calibrate(d, levels, CalibrateOptions{Fit: c.fit, Terms: c.terms, MaxEvals: 12})
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(cal.Notes, "; ")
		if (c.note == "") != (len(cal.Notes) == 0) || !strings.Contains(joined, c.note) {
			t.Errorf("fit %v, terms %v: notes %q, want %q", c.fit, c.terms, cal.Notes, c.note)
		}
		o := cal.Overheads
		if kept := o.StepUs == 7 && o.PerSeqUs == 3 && o.PrefillScale == 1.5; c.kept && !kept {
			t.Errorf("fit %v, terms %v: overheads %+v, want step, per-seq and prefill kept at 7, 3, 1.5", c.fit, c.terms, o)
		}
		if c.perSeqNot && o.PerSeqUs != 3 {
			t.Errorf("fit %v, terms %v: per-seq %v us moved from the deployment's 3", c.fit, c.terms, o.PerSeqUs)
		}
	}
}

// TestCalibrateOneLoadSGLang: on one load under SGLang's scheduler, whose
// prefill batches run eagerly, the default fit moves the decode scale and
// the host time of a prefill step, and leaves the frontend at the
// deployment's value with a note naming it.
func TestCalibrateOneLoadSGLang(t *testing.T) {
	ms, err := LoadMeasured(filepath.Join("testdata", "bench", "inferencex-dsr1-fp4-b200-sglang-tp8ep8", "conc16.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := kimiDeployment(t)
	d.Engine.Policy = PolicySGLang
	d.Overheads = Overheads{FrontendMs: 4, PrefillStepUs: 1}
	cal, err := Calibrate(d, ms, CalibrateOptions{MaxEvals: 12})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(cal.Notes, "; ")
	if !strings.Contains(joined, "step, per-seq, prefill, frontend not fitted") || strings.Contains(joined, "prefill-step not fitted") {
		t.Errorf("notes %q: want the frontend among the terms left and the prefill step fitted", cal.Notes)
	}
	if o := cal.Overheads; o.FrontendMs != 4 || o.PrefillStepUs == 1 {
		t.Errorf("overheads %+v: want the frontend kept at 4 ms and the prefill step moved from 1 us", o)
	}
}

// TestCheckCalibrateTermsOneLoad: one load of one shape shows one median
// TTFT and one median TPOT, so it fits two named terms, not two that move
// its TPOT alike (step and decode) nor two that move its TTFT alike
// (frontend and the prefill scale); the per-sequence cost, which
// Calibrate leaves out on one load with a note, is not counted. Levels
// of two loads take every term. Calibrate refuses what the check
// refuses.
func TestCheckCalibrateTermsOneLoad(t *testing.T) {
	var levels []Measured
	for _, f := range []string{"conc16.json", "conc64.json"} {
		ms, err := LoadMeasured(filepath.Join("testdata", "bench", "inferencex-dsr1-fp4-b200-sglang-tp8ep8", f))
		if err != nil {
			t.Fatal(err)
		}
		levels = append(levels, ms...)
	}
	for _, c := range []struct {
		fit   []int
		terms []CalibrateTerm
		want  string // "" = accepted
	}{
		{nil, []CalibrateTerm{TermStepUs, TermDecodeScale, TermPrefillStep, TermFrontendMs}, "fits 2 terms"},
		{nil, []CalibrateTerm{TermStepUs, TermDecodeScale}, "step and decode both move its TPOT"},
		{nil, []CalibrateTerm{TermFrontendMs, TermPrefillScale}, "frontend and prefill both move its TTFT"},
		{nil, []CalibrateTerm{TermDecodeScale, TermPrefillStep}, ""},
		{nil, []CalibrateTerm{TermStepUs, TermPerSeqUs, TermFrontendMs}, ""},
		{[]int{0, 1}, AllCalibrateTerms, ""},
	} {
		err := CheckCalibrateTerms(levels, c.fit, c.terms)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("fit %v, terms %v: %v; want %q", c.fit, c.terms, err, c.want)
		}
	}
	if _, err := Calibrate(kimiDeployment(t), levels, CalibrateOptions{Terms: []CalibrateTerm{TermStepUs, TermDecodeScale}, MaxEvals: 12}); err == nil || !strings.Contains(err.Error(), "fits 2 terms") {
		t.Errorf("Calibrate of step and decode on one load: %v; want the refusal", err)
	}
}
