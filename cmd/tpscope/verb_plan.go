package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func init() {
	register(&Verb{
		Name:  "plan",
		Short: "capacity planning: sweep boxes, plans, batch, context and KV dtype; max concurrency, throughput per GPU, Pareto front",
		Long: `Sweeps every combination of box (--topo, a comma list of presets or
files, at --gpus GPU counts), parallel plan (TP, EP, DP attention + EP,
DCP; all valid ones unless --tp/--dp/--dcp/--ep narrow them), batch,
context, KV dtype and MTP tokens (--batch, --context, --kv-dtype, --mtp:
the scenario flags of the other verbs, as lists); predicts each with the fast evaluator (a short copy of the model
simulated on the discrete-event engine and extrapolated per layer, checked
against the full engine in sim's tests) and checks the memory fit.

Reports the Pareto front of throughput per GPU against per-request
tokens/s, the best configuration (within the per-token latency SLO when
--slo-ms gives one, in ms per token per request), the maximum concurrency
per box, plan, KV dtype and context, and every configuration that does not
fit with its shortfall in GB (they are reported, not dropped). Picks come
from the lists given: the box at full load (batch = max concurrency) is
shown beside each capacity row, never picked. --plot draws all fitting
points and the front. A progress bar appears on stderr when the sweep runs
longer than a second.

A combination of the lists that can never run (TP x DP above or not
dividing a --gpus count, a count above the box's GPUs, degrees the model
cannot run, --mtp on a model without MTP) is left out and counted, with
its reason; when nothing is left, it is a usage error naming the flags.

Run-time options are the other verbs' flags with their defaults (a stock
deployment: CUDA graphs, NCCL's own choices); pass the seed's settings
with --nccl-proto LL --p2p-level SYS.`,
		Example: `tpscope plan --model kimi-k2.5-nvfp4 --topo rtxpro6000-2s,h200-nvswitch --gpus 8 --context 4096,32768 --nccl-proto LL --p2p-level SYS --slo-ms 50 --plot pareto.png`,
		Flags: func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error {
			// The scenario flags, with the swept ones as lists of the same
			// names: --topo, --gpus, --tp, --dp, --dcp, --ep, --batch,
			// --context, --kv-dtype, --mtp.
			sc := newScenarioFlags(fs)
			sc.addModelFlags()
			topos := fs.StringSlice("topo", []string{topology.DefaultPreset}, "boxes (a list); each "+topoHelp)
			gpuCounts := newIntList(fs, "gpus", nil, 1, "GPU counts to use on each box (default: powers of two up to the box's GPUs, and its count)")
			plans := fs.StringSlice("plan", nil, "plans to try, e.g. tp8,tp8-ep,tp4-dp2-ep,tp8-dcp4 (default: every valid plan, or the --tp/--dp/--dcp/--ep lists)")
			tps := newIntList(fs, "tp", nil, 1, "tensor-parallel degrees (default: every valid plan)")
			dps := newIntList(fs, "dp", nil, 1, "data-parallel attention degrees (default: every valid plan)")
			dcps := newIntList(fs, "dcp", nil, 1, "decode context parallel degrees (default: every valid plan)")
			eps := fs.String("ep", "both", "expert parallelism: true, false or both")
			fs.Lookup("ep").NoOptDefVal = "true"
			_ = fs.SetAnnotation("ep", valuesAnnotation, []string{"true", "false", "both"})
			batches := newIntList(fs, "batch", sim.DefaultAdviseBatches, 1, "batch sizes")
			contexts := newIntList(fs, "context", sim.DefaultAdviseContexts, 1, "context lengths (4K = 4096)")
			kvs := fs.StringSlice("kv-dtype", []string{"bf16", "fp8"}, "KV-cache dtypes")
			specs := newIntList(fs, "mtp", []int{0}, 0, "MTP speculative tokens (left out, and said, on models without MTP)")
			sc.addCostFlags()
			sc.addOptionFlags()
			slo := fs.Float64("slo-ms", 0, "per-request latency SLO in ms per token (0 = none)")
			output := addOutputFlag(fs, "one row per configuration", allFormats...)
			plotFile := fs.String("plot", "", "write the throughput/GPU vs per-request tokens/s scatter and Pareto front to FILE.png or FILE.svg")
			top := fs.Int("top", 20, "rows of the front and of the capacity table to print (0 = all)")
			workers := fs.Int("workers", runtime.NumCPU(), "goroutines evaluating the sweep")
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("unexpected arguments %q", args)
				}
				if err := checkOutput(*output, allFormats...); err != nil {
					return err
				}
				if *workers < 1 {
					return usageErrorf("--workers %d: want at least 1", *workers)
				}
				if *slo < 0 {
					return usageErrorf("--slo-ms %v: want 0 (none) or a positive latency", *slo)
				}
				if err := checkPlotPath(*plotFile); err != nil {
					return err
				}
				a, err := sc.modelArch()
				if err != nil {
					return err
				}
				build, err := sc.build()
				if err != nil {
					return err
				}
				space := sim.PlanSpace{Arch: a, Build: build, ImplyDenseDSA: !fs.Changed("dense-dsa"), MaxMsPerToken: *slo, GPUCounts: gpuCounts.v,
					Batches: batches.v, Contexts: contexts.v, SpecTokens: specs.v}
				for _, name := range *topos {
					sc.topo = name
					t, _, err := sc.box()
					if err != nil {
						return err
					}
					space.Topologies = append(space.Topologies, t)
				}
				if len(space.Topologies) == 0 {
					return usageErrorf("--topo: no box named")
				}
				if space.Options, err = sc.options(); err != nil {
					return err
				}
				if space.Lists, err = planLists(tps.v, dps.v, dcps.v, *eps, fs); err != nil {
					return err
				}
				for _, ps := range *plans {
					p, err := model.ParsePlan(ps)
					if err != nil || p.TP == 0 {
						return usageErrorf("--plan %q: want tpN[-dpN][-ep][-dcpN], e.g. tp8, tp8-ep, tp4-dp2-ep, tp8-dcp4", ps)
					}
					if err := p.Validate(a); err != nil {
						return usageErrorf("--plan %s: %s: %s", ps, a.Name, flagWords(err))
					}
					space.Plans = append(space.Plans, p)
				}
				for _, s := range *kvs {
					d, err := model.ParseDtype(s)
					if err != nil || (d != model.BF16 && d != model.FP16 && d != model.FP8) {
						return usageErrorf("--kv-dtype %q: want bf16, fp16 or fp8", s)
					}
					space.KVDtypes = append(space.KVDtypes, d)
				}
				for _, k := range specs.v {
					if k > 16 {
						return usageErrorf("--mtp %d: want integers from 0 to 16", k)
					}
				}
				// The lists are checked before any cost source is loaded:
				// a combination that can never run is the flags' fault.
				if _, _, err := space.Enumerate(); err != nil {
					return planSpaceUsage(err, len(space.Topologies))
				}
				for _, t := range space.Topologies {
					// A box whose GPU the perf DB has no tables of is
					// priced from the priors, and the sweep says so.
					src, err := sc.costs(t, build.Routing, space.Options)
					if err != nil && sc.perfDB != "" && len(*topos) > 1 {
						fmt.Fprintf(stderr, "plan: %s priced from the priors: %v\n", t.Name, err)
						src, err = nil, nil
					}
					if err != nil {
						return err
					}
					space.Costs = append(space.Costs, src)
				}
				cfgs, cov, err := space.Enumerate()
				if err != nil {
					return planSpaceUsage(err, len(space.Topologies))
				}
				start := time.Now()
				points := evaluateParallel(cfgs, *slo, *workers, newLazyBar(stderr, "plan sweep"))
				elapsed := time.Since(start)
				res := sim.SummarizePlan(points, *slo)
				res.Coverage = cov
				if elapsed > 0 {
					fmt.Fprintf(stderr, "plan: %d configurations evaluated in %.2f s (%.0f/s)\n", res.Evaluated, elapsed.Seconds(), float64(res.Evaluated)/elapsed.Seconds())
				}
				res.Caveats = sim.PlanCaveats(cfgs, res)
				if *plotFile != "" {
					if err := writePlanPlot(*plotFile, a.Name, res); err != nil {
						return err
					}
				}
				switch *output {
				case "json":
					enc := json.NewEncoder(stdout)
					enc.SetIndent("", " ")
					return enc.Encode(res)
				case formatMarkdown:
					return writePlanText(stdout, a.Name, res, len(space.Topologies), *top, true)
				case formatCSV:
					return writePlanCSV(stdout, res)
				}
				return writePlanText(stdout, a.Name, res, len(space.Topologies), *top, false)
			}
		},
	})
}

// evaluateParallel splits the sweep into contiguous ranges, one Evaluator
// per goroutine (consecutive configurations share schedules), and reports
// progress from all of them.
func evaluateParallel(cfgs []sim.PlanConfig, slo float64, workers int, bar *lazyBar) []sim.PlanPoint {
	out := make([]sim.PlanPoint, len(cfgs))
	if len(cfgs) == 0 {
		return out
	}
	workers = min(workers, len(cfgs))
	chunk := (len(cfgs) + workers - 1) / workers
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for lo := 0; lo < len(cfgs); lo += chunk {
		hi := min(lo+chunk, len(cfgs))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ev sim.Evaluator
			last := 0
			sim.EvaluatePlan(&ev, cfgs[lo:hi], out[lo:hi], slo, func(d int) {
				if d-last < 64 && d != hi-lo {
					return
				}
				mu.Lock()
				done += d - last
				bar.update(done, len(cfgs))
				mu.Unlock()
				last = d
			})
		}()
	}
	wg.Wait()
	bar.finish()
	return out
}

// planLists binds the --tp/--dp/--dcp/--ep lists the user gave (a list
// not given stays free: see sim.PlanLists); which combinations can run is
// the sweep's to say (sim.PlanSpace.Enumerate).
func planLists(tps, dps, dcps []int, ep string, fs *pflag.FlagSet) (sim.PlanLists, error) {
	var l sim.PlanLists
	for _, d := range []struct {
		flag string
		v    []int
		dst  *[]int
	}{{"tp", tps, &l.TP}, {"dp", dps, &l.DP}, {"dcp", dcps, &l.DCP}} {
		if !fs.Changed(d.flag) {
			continue
		}
		for _, x := range d.v {
			if x < 1 {
				return l, usageErrorf("--%s %d: want positive degrees", d.flag, x)
			}
		}
		*d.dst = d.v
	}
	var eps []bool
	switch ep {
	case "both":
		eps = []bool{false, true}
	case "true":
		eps = []bool{true}
	case "false":
		eps = []bool{false}
	default:
		return l, usageErrorf("--ep %q: want true, false or both", ep)
	}
	if fs.Changed("ep") {
		l.EP = eps
	}
	return l, nil
}

// leftOutFlags names a left-out combination by the flags that make it:
// "--gpus 3 --tp 8", "--mtp 1"; --topo only among several boxes.
func leftOutFlags(l sim.PlanLeftOut, boxes int) string {
	var f []string
	if l.Topology != "" && (boxes > 1 || l.Reason == sim.LeftOutBoxGPUs) {
		f = append(f, "--topo "+l.Topology)
	}
	if l.GPUs > 0 {
		f = append(f, "--gpus "+strconv.Itoa(l.GPUs))
	}
	if l.Plan != "" {
		f = append(f, "--plan "+l.Plan)
	}
	for _, d := range []struct {
		flag string
		v    int
	}{{"--tp", l.TP}, {"--dp", l.DP}, {"--dcp", l.DCP}} {
		if d.v != 0 {
			f = append(f, fmt.Sprintf("%s %d", d.flag, d.v))
		}
	}
	if l.EP != "" {
		f = append(f, "--ep "+map[string]string{"on": "true", "off": "false"}[l.EP])
	}
	if l.SpecTokens > 0 {
		f = append(f, "--mtp "+strconv.Itoa(l.SpecTokens))
	}
	if len(f) == 0 {
		return "the default plans"
	}
	return strings.Join(f, " ")
}

// planSpaceUsage turns a sweep with nothing left to run into a usage
// error naming the flags of each combination and why it cannot run.
func planSpaceUsage(err error, boxes int) error {
	var se *sim.PlanSpaceError
	if !errors.As(err, &se) {
		return usageErrorf("%v", err)
	}
	var parts []string
	for i, l := range se.Coverage.LeftOut {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("and %d more", len(se.Coverage.LeftOut)-i))
			break
		}
		parts = append(parts, leftOutFlags(l, boxes)+": "+l.Detail)
	}
	return usageErrorf("%s (no combination of the lists can run)", strings.Join(parts, "; "))
}

// leftOutLines say, per reason, how many combinations of the lists were
// left out, with up to three of them by their flags.
func leftOutLines(cov sim.PlanCoverage, boxes int) []string {
	var out []string
	for _, reason := range []sim.LeftOutReason{sim.LeftOutBoxGPUs, sim.LeftOutPlanGPUs, sim.LeftOutPlanModel, sim.LeftOutNoMTP} {
		var ex []string
		n := 0
		for _, l := range cov.LeftOut {
			if l.Reason != reason {
				continue
			}
			n++
			if len(ex) < 3 {
				ex = append(ex, leftOutFlags(l, boxes)+" ("+l.Detail+")")
			}
		}
		if n == 0 {
			continue
		}
		why := map[sim.LeftOutReason]string{
			sim.LeftOutBoxGPUs:   "GPU count above the box's",
			sim.LeftOutPlanGPUs:  "TP x DP is not the GPU count",
			sim.LeftOutPlanModel: "the model runs none of these plans",
			sim.LeftOutNoMTP:     "no MTP layer",
		}[reason]
		if reason == sim.LeftOutNoMTP {
			out = append(out, fmt.Sprintf("left out: %s", strings.Join(ex, ", ")))
			continue
		}
		more := ""
		if n > len(ex) {
			more = fmt.Sprintf(", and %d more", n-len(ex))
		}
		out = append(out, fmt.Sprintf("left out %d of %d combinations of the lists (box x GPU count x plan), %s: %s%s", n, cov.Combinations, why, strings.Join(ex, "; "), more))
	}
	return out
}

// pointCells are a point's table cells; the "slo" column only when the
// sweep has an SLO.
func pointCells(p *sim.PlanPoint, withSLO bool) []string {
	cells := []string{p.Topology, strconv.Itoa(p.GPUs), p.Plan, p.KVDtype, strconv.Itoa(p.SpecTokens), strconv.Itoa(p.Context), strconv.Itoa(p.Batch),
		fmt.Sprintf("%.2f", p.MsPerToken), fmt.Sprintf("%.1f", p.TokensPerSPerRequest), fmt.Sprintf("%.1f", p.TokensPerS),
		fmt.Sprintf("%.1f", p.TokensPerSPerGPU), strconv.Itoa(p.MaxConcurrency), fitCell(p.Fits, p.ShortfallGB)}
	if withSLO {
		cells = append(cells, map[sim.SLOVerdict]string{sim.SLOMet: "yes", sim.SLOMissed: "no"}[p.SLO])
	}
	return cells
}

func pointHeader(withSLO bool) []string {
	h := []string{"topology", "gpus", "plan", "kv", "mtp", "context", "batch", "ms/token", "tok/s/req", "tok/s", "tok/s/GPU", "max conc.", "fits"}
	if withSLO {
		h = append(h, "slo")
	}
	return h
}

// writePlanText renders the plan as aligned text or markdown tables. It
// speaks of an SLO only when the sweep has one.
func writePlanText(w io.Writer, modelName string, res *sim.PlanResult, boxes, top int, md bool) error {
	table := func(title string, header []string, rows [][]string) error {
		return writeTable(w, title, "", header, rows, md)
	}
	limit := func(n int) int {
		if top > 0 && n > top {
			return top
		}
		return n
	}
	if md {
		fmt.Fprintln(w, "## tpscope plan")
		fmt.Fprintln(w)
	}
	withSLO := res.SLOMs > 0
	if withSLO {
		fmt.Fprintf(w, "plan: %s, %d configurations; %d do not fit, %d miss the SLO (%.2f ms/token per request), %d invalid\n",
			modelName, res.Evaluated, res.NotFitting, res.MissSLO, res.SLOMs, res.Errors)
	} else {
		fmt.Fprintf(w, "plan: %s, %d configurations; %d do not fit, %d invalid\n", modelName, res.Evaluated, res.NotFitting, res.Errors)
	}
	for _, l := range leftOutLines(res.Coverage, boxes) {
		fmt.Fprintln(w, l)
	}
	within, none := "", "no swept configuration fits"
	if withSLO {
		within, none = " within the SLO", "no swept configuration fits and meets the SLO"
	}
	if res.Best >= 0 {
		b := &res.Points[res.Best]
		fmt.Fprintf(w, "best throughput per GPU%s: %s x%d %s, kv %s, batch %d at context %d: %.1f tok/s/GPU, %.1f tok/s per request (%.2f ms/token)\n",
			within, b.Topology, b.GPUs, b.Plan, b.KVDtype, b.Batch, b.Context, b.TokensPerSPerGPU, b.TokensPerSPerRequest, b.MsPerToken)
	} else {
		fmt.Fprintln(w, none)
	}
	for _, c := range res.Caveats {
		fmt.Fprintf(w, "caveat: %s\n", c)
	}
	var rows [][]string
	for _, i := range res.Pareto[:limit(len(res.Pareto))] {
		rows = append(rows, pointCells(&res.Points[i], withSLO))
	}
	if err := table(fmt.Sprintf("Pareto front: throughput per GPU vs per-request tokens/s (%d points)", len(res.Pareto)), pointHeader(withSLO), rows); err != nil {
		return err
	}
	rows = rows[:0]
	capHeader := []string{"topology", "gpus", "plan", "kv", "mtp", "context", "max concurrency", "best batch", "tok/s/GPU", "tok/s/req", "ms/token", "full: batch", "full: tok/s/GPU", "full: ms/token"}
	var fitting []sim.CapacityRow
	for _, c := range res.Capacity {
		if c.MaxConcurrency > 0 {
			fitting = append(fitting, c)
		}
	}
	for _, c := range fitting[:limit(len(fitting))] {
		r := []string{c.Topology, strconv.Itoa(c.GPUs), c.Plan, c.KVDtype, strconv.Itoa(c.SpecTokens), strconv.Itoa(c.Context), strconv.Itoa(c.MaxConcurrency), "-", "-", "-", "-", "-", "-", "-"}
		if c.Best >= 0 {
			p := &res.Points[c.Best]
			r[7], r[8], r[9], r[10] = strconv.Itoa(p.Batch), fmt.Sprintf("%.1f", p.TokensPerSPerGPU), fmt.Sprintf("%.1f", p.TokensPerSPerRequest), fmt.Sprintf("%.2f", p.MsPerToken)
		}
		if c.Full >= 0 {
			p := &res.Points[c.Full]
			r[11], r[12], r[13] = strconv.Itoa(p.Batch), fmt.Sprintf("%.1f", p.TokensPerSPerGPU), fmt.Sprintf("%.2f", p.MsPerToken)
		}
		rows = append(rows, r)
	}
	if err := table(fmt.Sprintf("capacity: sequences of each context that fit (KV cache), best swept batch%s, and the box at full load (%d of %d rows have room; all in --output json)", within, len(fitting), len(res.Capacity)), capHeader, rows); err != nil {
		return err
	}
	// Configurations that do not fit: one row per (box, plan, kv, mtp),
	// the smallest shortfall first seen, so a plan that never fits shows.
	rows = rows[:0]
	type key struct {
		topo, plan, kv string
		gpus, spec     int
	}
	seen := map[key]bool{}
	for i := range res.Points {
		p := &res.Points[i]
		k := key{p.Topology, p.Plan, p.KVDtype, p.GPUs, p.SpecTokens}
		if p.Error != "" || p.Fits || seen[k] {
			continue
		}
		seen[k] = true
		rows = append(rows, []string{p.Topology, strconv.Itoa(p.GPUs), p.Plan, p.KVDtype, strconv.Itoa(p.Context), strconv.Itoa(p.Batch), fmt.Sprintf("%.1f", p.ShortfallGB)})
	}
	if len(rows) > 0 {
		if err := table(fmt.Sprintf("does not fit (%d configurations; first per box/plan/kv; all in --output json)", res.NotFitting),
			[]string{"topology", "gpus", "plan", "kv", "context", "batch", "short GB/GPU"}, rows[:limit(len(rows))]); err != nil {
			return err
		}
	}
	return nil
}

// writePlanPlot draws every fitting point (throughput per GPU against
// per-request tokens/s) and the Pareto front as a line.
func writePlanPlot(path, modelName string, res *sim.PlanResult) error {
	var all, miss plotter.XYs
	for i := range res.Points {
		p := &res.Points[i]
		if p.Error != "" || !p.Fits {
			continue
		}
		xy := plotter.XY{X: p.TokensPerSPerRequest, Y: p.TokensPerSPerGPU}
		if p.WithinSLO() {
			all = append(all, xy)
		} else {
			miss = append(miss, xy)
		}
	}
	if len(all)+len(miss) == 0 {
		return fmt.Errorf("plot %s: no configuration fits", path)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: throughput per GPU vs per-request speed (fitting configurations)", modelName)
	p.X.Label.Text = "tokens/s per request"
	p.Y.Label.Text = "tokens/s per GPU"
	p.Legend.Top = true
	if len(all) > 0 {
		s, err := plotter.NewScatter(all)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		s.GlyphStyle.Radius = vg.Points(1.5)
		s.GlyphStyle.Color = color.RGBA{R: 90, G: 120, B: 200, A: 255}
		p.Add(s)
		p.Legend.Add("configuration", s)
	}
	if len(miss) > 0 {
		s, err := plotter.NewScatter(miss)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		s.GlyphStyle.Radius = vg.Points(1.5)
		s.GlyphStyle.Shape = draw.CrossGlyph{}
		s.GlyphStyle.Color = color.RGBA{R: 160, G: 160, B: 160, A: 255}
		p.Add(s)
		p.Legend.Add("misses the SLO", s)
	}
	if len(res.Pareto) > 0 {
		front := make(plotter.XYs, len(res.Pareto))
		for i, k := range res.Pareto {
			front[i] = plotter.XY{X: res.Points[k].TokensPerSPerRequest, Y: res.Points[k].TokensPerSPerGPU}
		}
		l, pts, err := plotter.NewLinePoints(front)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = color.RGBA{R: 200, G: 40, B: 40, A: 255}
		pts.Color = l.Color
		p.Add(l, pts)
		p.Legend.Add("Pareto front", l, pts)
	}
	if err := p.Save(9*vg.Inch, 6*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// writePlanCSV writes every configuration of the sweep, one per row.
func writePlanCSV(w io.Writer, res *sim.PlanResult) error {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	rows := make([][]string, 0, len(res.Points))
	for _, p := range res.Points {
		rows = append(rows, []string{p.Topology, strconv.Itoa(p.GPUs), p.Plan, strconv.Itoa(p.Batch), strconv.Itoa(p.Context), p.KVDtype, strconv.Itoa(p.SpecTokens),
			f(p.StepUs), f(p.MsPerToken), f(p.TokensPerS), f(p.TokensPerSPerGPU), f(p.TokensPerSPerRequest), strconv.FormatBool(p.Fits), f(p.ShortfallGB),
			strconv.FormatInt(p.KVCapacityTokens, 10), strconv.Itoa(p.MaxConcurrency), string(p.SLO), strconv.FormatBool(p.AtCapacity), p.Error})
	}
	// slo: met, missed, or empty when the sweep has no SLO.
	return writeCSV(w, []string{"topology", "gpus", "plan", "batch", "context", "kv_dtype", "spec_tokens", "step_us", "ms_per_token", "tokens_per_s",
		"tokens_per_s_per_gpu", "tokens_per_s_per_request", "fits", "shortfall_gb", "kv_capacity_tokens", "max_concurrency", "slo", "at_capacity", "error"}, rows)
}
