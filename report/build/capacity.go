package build

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/tpscope/tpscope/plan"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/serving"
)

// The capacity charts: throughput per GPU against per-user speed, from a
// request-level simulation (serving.Frontier) or a static plan sweep
// (plan.Result). The same report.Scatter is drawn in the HTML page
// and, by the CLI, as PNG or SVG.

// Axis labels of the capacity plane.
const (
	AxisUserTokensPerS = "tokens/s per user"
	AxisGPUTokensPerS  = "output tokens/s per GPU"
)

// ServingScatter places a frontier's runs: the runs within the objective
// (or all, without one), those that miss it or overload (muted), the front
// joined, the TPOT objective as a vertical line at 1000 / its limit, and
// the chosen run marked.
func ServingScatter(f *serving.Frontier) *report.Scatter {
	sc := &report.Scatter{XLabel: AxisUserTokensPerS + " (1000 / median TPOT)", YLabel: AxisGPUTokensPerS}
	in := report.ScatterSeries{Name: "runs"}
	if f.SLO.TTFTMs > 0 || f.SLO.TPOTMs > 0 {
		in.Name = "runs within the SLO"
	}
	out := report.ScatterSeries{Name: "runs missing the SLO, too short to judge or overloaded", Faint: true}
	for _, p := range f.Points {
		if p.TokensPerSPerUser <= 0 {
			continue
		}
		xy := [2]float64{p.TokensPerSPerUser, p.TokensPerSPerGPU}
		if p.Overloaded || (p.SLO != "" && p.SLO != serving.SLOMet) {
			out.Points, out.Labels = append(out.Points, xy), append(out.Labels, p.Load)
		} else {
			in.Points, in.Labels = append(in.Points, xy), append(in.Labels, p.Load)
		}
	}
	front := report.ScatterSeries{Name: "Pareto front", Line: true}
	for _, i := range f.Front {
		p := f.Points[i]
		front.Points, front.Labels = append(front.Points, [2]float64{p.TokensPerSPerUser, p.TokensPerSPerGPU}), append(front.Labels, p.Load)
	}
	// Points first, the front over them in their colour; a series with
	// no point (no run within the SLO) is no legend entry.
	for _, s := range []report.ScatterSeries{in, out, front} {
		if len(s.Points) > 0 {
			sc.Series = append(sc.Series, s)
		}
	}
	if u := f.UserFloor(); u > 0 {
		pct := f.SLO.Percentile
		if pct == 0 {
			pct = 99
		}
		sc.VLines = append(sc.VLines, report.RefLine{At: u, Label: fmt.Sprintf("SLO: TPOT %g ms (judged at p%g)", f.SLO.TPOTMs, pct)})
	}
	if f.Chosen >= 0 && f.Points[f.Chosen].TokensPerSPerUser > 0 {
		p := f.Points[f.Chosen]
		sc.Marks = append(sc.Marks, report.Mark{X: p.TokensPerSPerUser, Y: p.TokensPerSPerGPU, Label: "chosen: " + p.Load})
	}
	return sc
}

// PlanScatter places a plan sweep's fitting points at one context, one
// series per box (topology and GPU count) with its own front (the
// result's, plan.Result.Fronts), the points missing the SLO muted, the SLO
// as a vertical line at 1000 / its ms per token, and the context's best
// point marked (plan.Result.BestByContext).
func PlanScatter(res *plan.Result, context int) *report.Scatter {
	sc := &report.Scatter{XLabel: AxisUserTokensPerS, YLabel: "tokens/s per GPU"}
	type boxKey struct {
		topo string
		gpus int
	}
	var keys []boxKey
	byBox := map[boxKey][]int{}
	var missed report.ScatterSeries
	missed.Name, missed.Faint = "misses the SLO", true
	for i := range res.Points {
		p := &res.Points[i]
		if p.Error != "" || !p.Fits || p.AtCapacity || p.Context != context {
			continue
		}
		if !p.WithinSLO() {
			missed.Points = append(missed.Points, [2]float64{p.TokensPerSPerRequest, p.TokensPerSPerGPU})
			missed.Labels = append(missed.Labels, PlanPointLabel(p))
			continue
		}
		k := boxKey{p.Topology, p.GPUs}
		if _, ok := byBox[k]; !ok {
			keys = append(keys, k)
		}
		byBox[k] = append(byBox[k], i)
	}
	for _, k := range keys {
		name := fmt.Sprintf("%s x%d", k.topo, k.gpus)
		pts := report.ScatterSeries{Name: name}
		for _, i := range byBox[k] {
			p := &res.Points[i]
			pts.Points = append(pts.Points, [2]float64{p.TokensPerSPerRequest, p.TokensPerSPerGPU})
			pts.Labels = append(pts.Labels, PlanPointLabel(p))
		}
		front := report.ScatterSeries{Name: name + " front", Line: true}
		for _, f := range res.Fronts {
			if f.Context != context || f.Topology != k.topo || f.GPUs != k.gpus {
				continue
			}
			for _, i := range f.Points {
				p := &res.Points[i]
				front.Points = append(front.Points, [2]float64{p.TokensPerSPerRequest, p.TokensPerSPerGPU})
				front.Labels = append(front.Labels, PlanPointLabel(p))
			}
		}
		sc.Series = append(sc.Series, pts, front)
	}
	if len(missed.Points) > 0 {
		sc.Series = append(sc.Series, missed)
	}
	if res.SLOMs > 0 {
		sc.VLines = append(sc.VLines, report.RefLine{At: 1000 / res.SLOMs, Label: fmt.Sprintf("SLO: %g ms/token", res.SLOMs)})
	}
	for _, i := range res.BestByContext {
		if p := &res.Points[i]; p.Context == context {
			sc.Marks = append(sc.Marks, report.Mark{X: p.TokensPerSPerRequest, Y: p.TokensPerSPerGPU, Label: "best: " + PlanPointLabel(p)})
		}
	}
	return sc
}

// PlanPointLabel names a plan point as the charts and the fronts' CSV do:
// "h200-nvswitch x8 tp8 fp8 b64 ctx4096".
func PlanPointLabel(p *plan.Point) string {
	s := fmt.Sprintf("%s x%d %s %s b%d ctx%d", p.Topology, p.GPUs, p.Plan, p.KVDtype, p.Batch, p.Context)
	if p.SpecTokens > 0 {
		s += " spec" + strconv.Itoa(p.SpecTokens)
	}
	return s
}

// PlanContexts lists the contexts of a sweep's fitting points, ascending:
// one chart each, the plane being per ISL/OSL.
func PlanContexts(res *plan.Result) []int {
	seen := map[int]bool{}
	var out []int
	for _, p := range res.Points {
		if p.Error == "" && p.Fits && !seen[p.Context] {
			seen[p.Context] = true
			out = append(out, p.Context)
		}
	}
	sort.Ints(out)
	return out
}
