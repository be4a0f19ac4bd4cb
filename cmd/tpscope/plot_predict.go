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
	rows := append([]sim.Share(nil), pr.ByKind...)
	n := min(12, len(pr.ByName))
	rows = append(rows, sim.Share{})
	rows = append(rows, pr.ByName[:n]...)
	vals := make(plotter.Values, len(rows))
	labels := make([]string, len(rows))
	for i, r := range rows {
		// plotter draws bottom-up; list the first row at the top.
		j := len(rows) - 1 - i
		vals[j] = r.Us
		labels[j] = r.Name
		if r.Name != "" {
			labels[j] = fmt.Sprintf("%s %.0f%%", r.Name, 100*r.ShareFrac)
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s %s on %s: %.0f us/step, %.1f tok/s, comm %.0f%%",
		pr.Model, pr.Plan, pr.Topology, pr.StepUs, pr.TokensPerSPerRequest, 100*pr.CommShareFrac)
	p.X.Label.Text = "us per step (rank 0): by op kind, then by op name"
	bars, err := plotter.NewBarChart(vals, vg.Points(10))
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	bars.Horizontal = true
	p.Add(bars)
	p.NominalY(labels...)
	chart.FitBarAxisX(p, vals)
	return chart.SaveOne(path, 9*vg.Inch, vg.Points(float64(14*len(rows)+90)), p)
}
