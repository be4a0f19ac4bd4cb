package build

import (
	"testing"

	"github.com/tpscope/tpscope/advise"
)

// TestAdviceSectionsQualified: the HTML report's advice bars and table
// say what the CLI's say of a row: an upper bound, a conditional entry,
// a variant that does not fit. The report drew them as plain gains
// (dp-attn-ep at x0.951 with no word that it does not fit; oneshot-ar's
// x2.65 upper bound as a gain).
func TestAdviceSectionsQualified(t *testing.T) {
	fits := &advise.Variant{StepUs: 15540, Footprint: advise.Footprint{Fits: true}}
	adv := &advise.Advice{Model: "m", Plan: "tp8", Topology: "box", Workload: "decode b1",
		Rows: []advise.Row{
			{Entry: "plain", With: fits, Gain: advise.Gain{TokensPerSPct: 50}},
			{Entry: "oneshot-ar", With: fits, Gain: advise.Gain{TokensPerSPct: 164.6}, Applicability: advise.Applicability{Status: advise.Conditional, UpperBound: true}},
			{Entry: "needs", With: fits, Gain: advise.Gain{TokensPerSPct: 20}, Applicability: advise.Applicability{Status: advise.Conditional}},
			{Entry: "dp-attn-ep", With: &advise.Variant{StepUs: 43240, Footprint: advise.Footprint{ShortfallGB: 1.8}}, Gain: advise.Gain{TokensPerSPct: -4.9}},
		}}
	labels := map[string]bool{}
	steps := map[string]string{}
	for _, s := range adviceSections(adv) {
		if s.Bars != nil {
			for _, r := range s.Bars.Rows {
				labels[r.Label] = true
			}
		}
		if s.Table != nil && s.Title == "Catalog entries" {
			for _, r := range s.Table.Rows {
				steps[r.Cells[0]] = r.Cells[3]
			}
		}
	}
	for _, want := range []string{"plain", "oneshot-ar (upper bound)", "needs (conditional)", "dp-attn-ep (no fit: -1.8 GB)"} {
		if !labels[want] {
			t.Errorf("no bar labelled %q (labels %v)", want, labels)
		}
	}
	if got := steps["dp-attn-ep"]; got != "43.24 (no fit: -1.8 GB)" {
		t.Errorf("dp-attn-ep's step cell %q, want %q as the CLI's table writes it", got, "43.24 (no fit: -1.8 GB)")
	}
}
