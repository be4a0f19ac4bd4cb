package compare

import (
	"fmt"
	"image/color"
	"math"
	"slices"

	"github.com/tpscope/tpscope/internal/chart"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WritePlot draws, per scenario, predicted against measured median time
// per op (log-log scatter with the y = x line) and the per-kind time per
// step as paired bars (predicted, measured), to a PNG or SVG file chosen by
// the extension of path (chart.Save: legends beside the data, titles
// inside their panel, the file written whole or not at all).
func WritePlot(path string, r *Report) error {
	if err := chart.CheckPath(path); err != nil {
		return err
	}
	if len(r.Scenarios) == 0 {
		return fmt.Errorf("plot %s: the report has no scenario", path)
	}
	rows := len(r.Scenarios)
	plots := make([][]*plot.Plot, rows)
	for i := range r.Scenarios {
		sc, err := scatterPlot(&r.Scenarios[i])
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		bars, err := kindBars(&r.Scenarios[i])
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		plots[i] = []*plot.Plot{sc, bars}
	}
	tiles := draw.Tiles{PadX: vg.Millimeter * 10, PadY: vg.Millimeter * 6}
	return chart.Save(path, 14*vg.Inch, vg.Length(rows)*5*vg.Inch, plots, tiles)
}

func scatterPlot(sr *ScenarioReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: predicted vs measured per op", sr.Scenario)
	p.X.Label.Text = "measured median us (log)"
	p.Y.Label.Text = "predicted us (log)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = chart.LogTicks{}, chart.LogTicks{}
	byKind := map[string]plotter.XYs{}
	var kinds []string
	lo, hi := math.Inf(1), 0.0
	for _, o := range sr.Ops {
		if o.MedianUs <= 0 || o.PredictedUs <= 0 {
			continue
		}
		k := string(o.Kind)
		if _, ok := byKind[k]; !ok {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], plotter.XY{X: o.MedianUs, Y: o.PredictedUs})
		lo = math.Min(lo, math.Min(o.MedianUs, o.PredictedUs))
		hi = math.Max(hi, math.Max(o.MedianUs, o.PredictedUs))
	}
	if hi == 0 {
		return p, nil
	}
	slices.Sort(kinds)
	glyphs := chart.KindGlyphs(kinds)
	for i, k := range kinds {
		s, err := plotter.NewScatter(byKind[k])
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = glyphs[i]
		p.Add(s)
		p.Legend.Add(k, s)
	}
	line, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
	if err != nil {
		return nil, err
	}
	line.Color = color.Gray{Y: 128}
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(line)
	p.Legend.Add("predicted = measured", line)
	return p, nil
}

func kindBars(sr *ScenarioReport) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("per kind, us per step (step: predicted %.0f, measured %.0f us)", sr.Step.PredictedUs, sr.Step.MedianUs)
	p.Y.Label.Text = "us per step and rank"
	pred := make(plotter.Values, len(sr.Kinds))
	meas := make(plotter.Values, len(sr.Kinds))
	names := make([]string, len(sr.Kinds))
	for i, k := range sr.Kinds {
		pred[i], meas[i], names[i] = k.PredictedUs, k.MedianUs, string(k.Kind)
	}
	if len(names) == 0 {
		return p, nil
	}
	width := vg.Points(14)
	bp, err := plotter.NewBarChart(pred, width)
	if err != nil {
		return nil, err
	}
	bp.Color, bp.Offset = plotutil.Color(0), -width/2
	bm, err := plotter.NewBarChart(meas, width)
	if err != nil {
		return nil, err
	}
	bm.Color, bm.Offset = plotutil.Color(1), width/2
	p.Add(bp, bm)
	p.Legend.Add("predicted", bp)
	p.Legend.Add("measured (median)", bm)
	p.NominalX(names...)
	chart.FitBarAxisY(p, pred, meas)
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	return p, nil
}
