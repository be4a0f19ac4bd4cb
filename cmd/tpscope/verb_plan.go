package main

import (
	"encoding/json"
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
	"github.com/tpscope/tpscope/traces"
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
files, at --gpu-counts GPUs), parallel plan (TP, EP, DP attention + EP,
DCP; all valid ones unless --plans), batch, context, KV dtype and MTP
tokens; predicts each with the fast evaluator (a short copy of the model
simulated on the discrete-event engine and extrapolated per layer, checked
against the full engine in sim's tests) and checks the memory fit.

Reports the Pareto front of throughput per GPU against per-request
tokens/s, the best configuration under the per-token latency SLO
(--slo-ms, ms per token per request), the maximum concurrency per box,
plan, KV dtype and context, and every configuration that does not fit with
its shortfall in GB (they are reported, not dropped). --plot draws all
fitting points and the front. A progress bar appears on stderr when the
sweep runs longer than a second.

Run-time options default to the seed's settings: CUDA graphs, NCCL_PROTO=LL,
NCCL_P2P_LEVEL=SYS.`,
		Example: `tpscope plan --model kimi-k2.5-nvfp4 --topo rtxpro6000-2s,h200-nvswitch --gpu-counts 8 --contexts 4096,32768 --slo-ms 50 --plot pareto.png`,
		Flags: func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error {
			var modelName string
			var denseDSA bool
			addModelFlag(fs, &modelName)
			addDenseDSAFlag(fs, &denseDSA)
			sf := addSimFlags(fs)
			setFlagDefault(fs, "cuda-graphs", "true")
			setFlagDefault(fs, "nccl-proto", "LL")
			setFlagDefault(fs, "p2p-level", "SYS")
			fs.Lookup("topo").Usage = "topologies: comma list of presets (" + strings.Join(topology.PresetNames(), ", ") + ") or JSON files"
			gpuCounts := fs.String("gpu-counts", "", "GPU counts to use on each box (comma list; default powers of two up to the box's GPUs, and its count)")
			plans := fs.String("plans", "", "plans to try, e.g. tp8,tp8-ep,tp4-dp2-ep,tp8-dcp4 (default: every valid plan)")
			batches := fs.String("batches", joinInts(sim.DefaultAdviseBatches), "batch sizes (comma list)")
			contexts := fs.String("contexts", joinInts(sim.DefaultAdviseContexts), "context lengths (comma list; 4K = 4096)")
			kvs := fs.String("kv-dtypes", "bf16,fp8", "KV-cache dtypes (comma list)")
			specs := fs.String("spec-tokens", "0", "MTP speculative tokens (comma list; skipped on models without MTP)")
			slo := fs.Float64("slo-ms", 0, "per-request latency SLO in ms per token (0 = none)")
			output := fs.String("output", "table", "output format: table, json or markdown")
			plotFile := fs.String("plot", "", "write the throughput/GPU vs per-request tokens/s scatter and Pareto front to FILE.png or FILE.svg")
			top := fs.Int("top", 20, "rows of the front and of the capacity table to print (0 = all)")
			workers := fs.Int("workers", runtime.NumCPU(), "goroutines evaluating the sweep")
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("unexpected arguments %q", args)
				}
				if err := checkOutput(*output, "table", "json", "markdown"); err != nil {
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
				a, err := resolveModel(modelName)
				if err != nil {
					return err
				}
				space := sim.PlanSpace{Arch: a, Build: model.BuildOptions{DenseDSA: denseDSA}, MaxMsPerToken: *slo}
				for _, name := range splitList(sf.topo) {
					t, err := resolveTopology(name, 0)
					if err != nil {
						return err
					}
					space.Topologies = append(space.Topologies, t)
				}
				if len(space.Topologies) == 0 {
					return usageErrorf("--topo: no topology named")
				}
				if space.Options, err = sf.options(); err != nil {
					return err
				}
				if sf.gpus > 0 {
					space.GPUCounts = []int{sf.gpus}
				}
				if *gpuCounts != "" {
					if space.GPUCounts, err = parseInts("--gpu-counts", *gpuCounts); err != nil {
						return err
					}
				}
				if *plans != "" {
					for _, s := range splitList(*plans) {
						p, err := parsePlan(s)
						if err != nil {
							return err
						}
						if err := p.Validate(a); err != nil {
							return usageErrorf("--plans %s: %s: %v", s, a.Name, err)
						}
						space.Plans = append(space.Plans, p)
					}
				}
				if space.Batches, err = parseInts("--batches", *batches); err != nil {
					return err
				}
				if space.Contexts, err = parseInts("--contexts", *contexts); err != nil {
					return err
				}
				for _, s := range splitList(*kvs) {
					d, err := model.ParseDtype(s)
					if err != nil || (d != model.BF16 && d != model.FP16 && d != model.FP8) {
						return usageErrorf("--kv-dtypes %q: want bf16, fp16 or fp8", s)
					}
					space.KVDtypes = append(space.KVDtypes, d)
				}
				for _, s := range splitList(*specs) {
					k, err := strconv.Atoi(s)
					if err != nil || k < 0 || k > 16 {
						return usageErrorf("--spec-tokens %q: want integers from 0 to 16", s)
					}
					space.SpecTokens = append(space.SpecTokens, k)
				}
				cfgs, err := space.Configs()
				if err != nil {
					return usageErrorf("%v", err)
				}
				start := time.Now()
				points := evaluateParallel(cfgs, *slo, *workers, newLazyBar(stderr, "plan sweep"))
				elapsed := time.Since(start)
				res := sim.SummarizePlan(points, *slo)
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
				case "markdown":
					return writePlanText(stdout, a.Name, res, elapsed, *top, true)
				}
				return writePlanText(stdout, a.Name, res, elapsed, *top, false)
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

// parsePlan reads one --plans entry with traces.ParsePlan (the Plan.String
// form tp8, tp8-ep, tp4-dp2-ep, tp8-dcp4; parts may also be spelled tp=8);
// a plan must name its TP degree.
func parsePlan(s string) (model.Plan, error) {
	p, err := traces.ParsePlan(s)
	if err != nil {
		return model.Plan{}, usageErrorf("--plans: %v", err)
	}
	if p.TP == 0 {
		return model.Plan{}, usageErrorf("--plans: %q: want tpN[-dpN][-ep][-dcpN], e.g. tp8, tp8-ep, tp4-dp2-ep, tp8-dcp4", s)
	}
	return p, nil
}

func pointCells(p *sim.PlanPoint) []string {
	slo := "yes"
	if !p.MeetsSLO {
		slo = "no"
	}
	return []string{p.Topology, strconv.Itoa(p.GPUs), p.Plan, p.KVDtype, strconv.Itoa(p.SpecTokens), strconv.Itoa(p.Context), strconv.Itoa(p.Batch),
		fmt.Sprintf("%.2f", p.MsPerToken), fmt.Sprintf("%.1f", p.TokensPerSPerRequest), fmt.Sprintf("%.1f", p.TokensPerS),
		fmt.Sprintf("%.1f", p.TokensPerSPerGPU), strconv.Itoa(p.MaxConcurrency), fitCell(p.Fits, p.ShortfallGB), slo}
}

var pointHeader = []string{"topology", "gpus", "plan", "kv", "mtp", "context", "batch", "ms/token", "tok/s/req", "tok/s", "tok/s/GPU", "max conc.", "fits", "slo"}

// writePlanText renders the plan as aligned text or markdown tables.
func writePlanText(w io.Writer, modelName string, res *sim.PlanResult, elapsed time.Duration, top int, md bool) error {
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
	rate := 0.0
	if elapsed > 0 {
		rate = float64(res.Evaluated) / elapsed.Seconds()
	}
	slo := "none"
	if res.SLOMs > 0 {
		slo = fmt.Sprintf("%.2f ms/token per request", res.SLOMs)
	}
	fmt.Fprintf(w, "plan: %s, %d configurations in %.2f s (%.0f/s); %d do not fit, %d miss the SLO (%s), %d invalid\n",
		modelName, res.Evaluated, elapsed.Seconds(), rate, res.NotFitting, res.MissSLO, slo, res.Errors)
	if res.Best >= 0 {
		b := &res.Points[res.Best]
		fmt.Fprintf(w, "best throughput per GPU within the SLO: %s x%d %s, kv %s, batch %d at context %d: %.1f tok/s/GPU, %.1f tok/s per request (%.2f ms/token)\n",
			b.Topology, b.GPUs, b.Plan, b.KVDtype, b.Batch, b.Context, b.TokensPerSPerGPU, b.TokensPerSPerRequest, b.MsPerToken)
	} else {
		fmt.Fprintln(w, "no configuration fits and meets the SLO")
	}
	for _, c := range res.Caveats {
		fmt.Fprintf(w, "caveat: %s\n", c)
	}
	var rows [][]string
	for _, i := range res.Pareto[:limit(len(res.Pareto))] {
		rows = append(rows, pointCells(&res.Points[i]))
	}
	if err := table(fmt.Sprintf("Pareto front: throughput per GPU vs per-request tokens/s (%d points)", len(res.Pareto)), pointHeader, rows); err != nil {
		return err
	}
	rows = rows[:0]
	capHeader := []string{"topology", "gpus", "plan", "kv", "mtp", "context", "max concurrency", "best batch", "tok/s/GPU", "tok/s/req", "ms/token", "full: tok/s/GPU", "full: ms/token"}
	var fitting []sim.CapacityRow
	for _, c := range res.Capacity {
		if c.MaxConcurrency > 0 {
			fitting = append(fitting, c)
		}
	}
	for _, c := range fitting[:limit(len(fitting))] {
		r := []string{c.Topology, strconv.Itoa(c.GPUs), c.Plan, c.KVDtype, strconv.Itoa(c.SpecTokens), strconv.Itoa(c.Context), strconv.Itoa(c.MaxConcurrency), "-", "-", "-", "-", "-", "-"}
		if c.Best >= 0 {
			p := &res.Points[c.Best]
			r[7], r[8], r[9], r[10] = strconv.Itoa(p.Batch), fmt.Sprintf("%.1f", p.TokensPerSPerGPU), fmt.Sprintf("%.1f", p.TokensPerSPerRequest), fmt.Sprintf("%.2f", p.MsPerToken)
		}
		if c.Full >= 0 {
			p := &res.Points[c.Full]
			r[11], r[12] = fmt.Sprintf("%.1f", p.TokensPerSPerGPU), fmt.Sprintf("%.2f", p.MsPerToken)
		}
		rows = append(rows, r)
	}
	if err := table(fmt.Sprintf("capacity: sequences of each context that fit (KV cache), best batch within the SLO, and the box at full load (%d of %d rows have room; all in --output json)", len(fitting), len(res.Capacity)), capHeader, rows); err != nil {
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
		if p.MeetsSLO {
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
