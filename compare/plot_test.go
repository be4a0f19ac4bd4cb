package compare

import (
	"image/color"
	"testing"

	"github.com/tpscope/tpscope/internal/chart"
	"github.com/tpscope/tpscope/model"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
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

// legendColors draws p and returns the colour of each legend entry's
// glyph: the last colour other than the text's black set before the
// entry's text.
func legendColors(t *testing.T, p *plot.Plot) map[string]color.Color {
	t.Helper()
	var rec recorder.Canvas
	chart.Draw(draw.NewCanvas(&rec, 7*vg.Inch, 5*vg.Inch), [][]*plot.Plot{{p}}, draw.Tiles{})
	out := map[string]color.Color{}
	var last color.Color
	for _, a := range rec.Actions {
		switch a := a.(type) {
		case *recorder.SetColor:
			if a.Color == nil {
				continue
			}
			if r, g, b, _ := a.Color.RGBA(); r|g|b != 0 {
				last = a.Color
			}
		case *recorder.FillString:
			out[a.String] = last
		}
	}
	return out
}

// TestScatterKindColors: in the per-op scatter each kind has a colour of
// its own, and the same colour in every scenario's panel. Coloured by its
// place among the scenario's kinds, the eighth kind (collective, in any
// multi-rank trace) took the first one's (attention's) colour, and a kind
// changed colour between two scenarios with different kinds.
func TestScatterKindColors(t *testing.T) {
	seven := []model.OpKind{model.KindAttention, model.KindElementwise, model.KindEmbedding, model.KindGEMM, model.KindMoEGEMM, model.KindNorm, model.KindRouter}
	report := func(kinds []model.OpKind) *ScenarioReport {
		sr := &ScenarioReport{}
		for i, k := range kinds {
			sr.Ops = append(sr.Ops, OpRow{Kind: k, Stat: Stat{PredictedUs: float64(i + 1), MedianUs: float64(i + 2)}})
		}
		return sr
	}
	colorsOf := func(kinds []model.OpKind) map[string]color.Color {
		p, err := scatterPlot(report(kinds))
		if err != nil {
			t.Fatal(err)
		}
		return legendColors(t, p)
	}
	a := colorsOf(seven)
	b := colorsOf(append([]model.OpKind{model.KindCollective}, seven...))
	seen := map[color.Color]string{}
	for _, k := range append([]model.OpKind{model.KindCollective}, seven...) {
		c := b[string(k)]
		if c == nil {
			t.Fatalf("no legend entry for %s", k)
		}
		if other, ok := seen[c]; ok {
			t.Errorf("%s and %s share the colour %v", k, other, c)
		}
		seen[c] = string(k)
		if k != model.KindCollective && a[string(k)] != c {
			t.Errorf("%s is %v beside seven kinds and %v beside eight", k, a[string(k)], c)
		}
	}
}

// TestScatterLogTicksLabelled: each axis of the log-log scatter has at
// least three labelled ticks: on an H200 trace's ops (3.4 to 90 us
// measured, 3.5 to 85 predicted) gonum's log ticks labelled the powers of
// ten alone, "10" on each axis.
func TestScatterLogTicksLabelled(t *testing.T) {
	sr := &ScenarioReport{}
	for _, o := range [][2]float64{{3.4, 3.5}, {5.1, 4.4}, {21, 19}, {48, 41}, {90, 85}} {
		sr.Ops = append(sr.Ops, OpRow{Kind: model.KindGEMM, Stat: Stat{MedianUs: o[0], PredictedUs: o[1]}})
	}
	p, err := scatterPlot(sr)
	if err != nil {
		t.Fatal(err)
	}
	for _, ax := range []struct {
		name string
		a    plot.Axis
	}{{"x", p.X}, {"y", p.Y}} {
		var labels []string
		for _, tk := range ax.a.Tick.Marker.Ticks(ax.a.Min, ax.a.Max) {
			if tk.Label != "" && tk.Value >= ax.a.Min && tk.Value <= ax.a.Max { // gonum draws no tick off the axis
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) < 3 {
			t.Errorf("%s axis %v to %v labelled %q, want at least 3 labels", ax.name, ax.a.Min, ax.a.Max, labels)
		}
	}
}
