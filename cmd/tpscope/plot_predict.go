package main

import (
	"fmt"

	"github.com/tpscope/tpscope/internal/chart"
	"github.com/tpscope/tpscope/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// writePredictPlot draws the step's time by op kind and by op name (the
// largest names) as horizontal bars, in microseconds, to a PNG or SVG.
func writePredictPlot(path string, pr *sim.Prediction) error {
	p, rows, err := predictPlot(pr)
	if err != nil {
		return err
	}
	return chart.SaveOne(path, 9*vg.Inch, vg.Points(float64(14*rows+90)), p)
}

// predictPlot is predict's chart and its number of rows: the kinds' bars,
// an empty row, the names' bars. The empty row gets a label and no bar: a
// bar of 0 us drew a zero-width mark on the axis.
func predictPlot(pr *sim.Prediction) (*plot.Plot, int, error) {
	rows := append([]sim.Share(nil), pr.ByKind...)
	n := min(12, len(pr.ByName))
	rows = append(rows, sim.Share{})
	rows = append(rows, pr.ByName[:n]...)
	vals := make([]float64, len(rows))
	labels := make([]string, len(rows))
	p := plot.New()
	for i, r := range rows {
		// plotter draws bottom-up; list the first row at the top.
		j := len(rows) - 1 - i
		vals[j] = r.Us
		if r.Name == "" {
			continue // the spacer
		}
		labels[j] = fmt.Sprintf("%s %.0f%%", r.Name, 100*r.ShareFrac)
		bar, err := plotter.NewBarChart(plotter.Values{r.Us}, vg.Points(10))
		if err != nil {
			return nil, 0, fmt.Errorf("plot: %w", err)
		}
		bar.Horizontal, bar.XMin = true, float64(j)
		p.Add(bar)
	}
	p.Title.Text = fmt.Sprintf("%s %s on %s: %.0f us/step, %.1f tok/s, comm %.0f%%",
		pr.Model, pr.Plan, pr.Topology, pr.StepUs, pr.TokensPerSPerRequest, 100*pr.CommShareFrac)
	p.X.Label.Text = "us per step (rank 0): by op kind, then by op name"
	p.NominalY(labels...)
	chart.FitBarAxisX(p, vals)
	return p, len(rows), nil
}
