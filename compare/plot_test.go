package compare

import (
	"testing"

	"github.com/tpscope/tpscope/model"
)

// TestKindBarsAxisPastTallest: the per-kind bars' value axis ends past
// the tallest bar, predicted or measured (the H200 trace's measured GEMM
// time, 4329.4 us, reached the top edge with no tick above 4000).
func TestKindBarsAxisPastTallest(t *testing.T) {
	sr := &ScenarioReport{Kinds: []KindRow{
		{Kind: model.KindGEMM, Stat: Stat{PredictedUs: 3691.2, MedianUs: 4329.4}},
		{Kind: model.KindNorm, Stat: Stat{PredictedUs: 1171.4, MedianUs: 1417.2}},
		{Kind: model.KindMoEGEMM, Stat: Stat{PredictedUs: 3500.6, MedianUs: 3651.4}},
	}}
	p, err := kindBars(sr)
	if err != nil {
		t.Fatal(err)
	}
	if !(p.Y.Max > 4329.4) {
		t.Errorf("value axis ends at %v, at or under the tallest bar (4329.4 us)", p.Y.Max)
	}
}
