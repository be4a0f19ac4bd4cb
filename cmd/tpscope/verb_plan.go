package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/internal/chart"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/plan"
	"github.com/tpscope/tpscope/report"
	reportbuild "github.com/tpscope/tpscope/report/build"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var planVerb = &Verb{
	UsageLine: "plan [flags]",
	Short:     "capacity planning: sweep boxes, plans, batch, context and KV dtype; max concurrency, throughput per GPU, Pareto front",
	Long: `Sweeps every combination of box (--topo, a comma list of presets or
files, at --gpus GPU counts), parallel plan (TP, EP, DP attention + EP,
DCP; all valid ones unless --tp/--dp/--dcp/--ep narrow them), batch,
context, KV dtype and MTP tokens (--batch, --context, --kv-dtype, --mtp:
the scenario flags of the other verbs, as lists); predicts each with the fast evaluator (a short copy of the model
simulated on the discrete-event engine and extrapolated per layer, checked
against the full engine in sim's tests) and checks the memory fit.

Reports the Pareto front of throughput per GPU against per-request
tokens/s of each context and box (the plane is per sequence length; the
same fronts in the text, JSON, --frontier CSV and --plot), each context's
best configuration (within the per-token latency SLO when
--slo-ms gives one, in ms per token per request), the maximum concurrency
per box, plan, KV dtype and context, and every configuration that does not
fit with its shortfall in GB (they are reported, not dropped). Picks come
from the lists given: the box at full load (batch = max concurrency) is
shown beside each capacity row, never picked. --plot draws all fitting
points and the fronts; when none fits, the table and the other files are
written and the chart alone is refused (exit 1). A progress bar appears on stderr when the sweep runs
longer than a second.

A combination of the lists that can never run (TP x DP above or not
dividing a --gpus count, a count above the box's GPUs, degrees the model
cannot run, --mtp on a model without MTP) is left out and counted, with
its reason; so is a configuration the engine cannot run (predict's
refusal: an attention backend, KV dtype or MoE kernel it lacks on the
box's GPU, an option or speculative method it has not). When nothing is
left, it is a usage error naming the flags, or predict's one line when
the engine refuses every configuration for one reason.

Run-time options are the other verbs' flags with their defaults (a stock
deployment: CUDA graphs, NCCL's own choices); pass the seed's settings
with --nccl-proto LL --p2p-level SYS.`,
	Example: `tpscope plan --model kimi-k2.5-nvfp4 --topo rtxpro6000-2s,h200-nvswitch --gpus 8 --context 4096,32768 --nccl-proto LL --p2p-level SYS --slo-ms 50 --plot pareto.png`,
	New:     func() Options { return newPlanOptions() },
}

// planOptions are plan's flags: the scenario flags, with the swept ones as
// lists of the same names (--topo, --gpus, --tp, --dp, --dcp, --ep,
// --batch, --context, --kv-dtype, --mtp).
type planOptions struct {
	boundFlags
	sc           *scenarioFlags
	topos        []string
	gpus         intList
	plans        []string
	tp, dp, dcp  intList
	ep           string // true, false or both
	batch, ctx   intList
	kvDtypes     []string
	mtp          intList
	sloMs        float64
	output, plot string
	frontier     string
	reportFile   string
	top, workers int
}

func newPlanOptions() *planOptions {
	o := &planOptions{sc: newScenarioFlags(), topos: []string{topology.DefaultPreset}, gpus: intList{min: 1},
		tp: intList{min: 1}, dp: intList{min: 1}, dcp: intList{min: 1}, ep: "both",
		batch: intList{v: advise.DefaultBatches, min: 1}, ctx: intList{v: advise.DefaultContexts, min: 1},
		kvDtypes: []string{"bf16", "fp8"}, mtp: intList{v: []int{0}}, output: formatTable, top: 20, workers: runtime.NumCPU()}
	o.sc.planFlags = false
	o.sc.counts = []countFlag{{"top", &o.top}}
	return o
}

func (o *planOptions) Bind(fs *pflag.FlagSet) {
	o.fs = fs
	o.sc.bindModelFlags(fs)
	fs.StringSliceVar(&o.topos, "topo", o.topos, "boxes (a list); each "+topoHelp)
	wantWhenEmpty(fs, "topo", "boxes (a list), each "+topoWant)
	fs.Var(&o.gpus, "gpus", "GPU counts to use on each box (default: powers of two up to the box's GPUs, and its count)")
	fs.StringSliceVar(&o.plans, "plan", o.plans, "plans to try, e.g. tp8,tp8-ep,tp4-dp2-ep,tp8-dcp4, instead of the --tp/--dp/--dcp/--ep lists (default: every valid plan)")
	fs.Var(&o.tp, "tp", "tensor-parallel degrees (default: every valid plan)")
	fs.Var(&o.dp, "dp", "data-parallel attention degrees (default: every valid plan)")
	fs.Var(&o.dcp, "dcp", "decode context parallel degrees (default: every valid plan; beside --tp/--dp/--ep, DCP 1 and each power of two dividing the plan's TP)")
	fs.StringVar(&o.ep, "ep", o.ep, "expert parallelism: true, false or both (every plan, EP off and on: the same as leaving it out)")
	fs.Lookup("ep").NoOptDefVal = "true"
	_ = fs.SetAnnotation("ep", valuesAnnotation, []string{"true", "false", "both"})
	fs.Var(&o.batch, "batch", "batch sizes"+countSuffixHelp)
	fs.Var(&o.ctx, "context", "context lengths"+countSuffixHelp)
	fs.StringSliceVar(&o.kvDtypes, "kv-dtype", o.kvDtypes, "KV-cache dtypes: "+model.KVDtypesAccepted)
	fs.Var(&o.mtp, "mtp", "MTP speculative tokens (left out, and said, on models without MTP); with --spec, the speculative tokens of its method")
	o.sc.bindSpecFlags(fs)
	o.sc.bindCostFlags(fs)
	o.sc.bindOptionFlags(fs)
	fs.Float64Var(&o.sloMs, "slo-ms", o.sloMs, "per-request latency SLO in ms per token (0 = none)")
	bindOutputFlag(fs, &o.output, "one row per configuration", allFormats...)
	fs.StringVar(&o.plot, "plot", o.plot, "draw throughput per GPU against per-request tokens/s, one panel per context: every fitting point by box, each box's Pareto front, the SLO and the context's best point, to FILE.png or FILE.svg")
	fs.StringVar(&o.frontier, "frontier", o.frontier, "write the Pareto front of each context and box (tokens/s per GPU and per request) as CSV to FILE")
	fs.StringVar(&o.reportFile, "report", o.reportFile, "write a self-contained HTML report of the sweep (a capacity chart per context, the fronts) to FILE.html")
	fs.IntVar(&o.top, "top", o.top, "rows of each front and of the capacity table to print (0 = all)")
	fs.IntVar(&o.workers, "workers", o.workers, "goroutines evaluating the sweep")
}

func (o *planOptions) Run(ctx context.Context, args []string, std IO) error {
	sc := o.sc
	if err := noArgs(args); err != nil {
		return err
	}
	if err := checkOutput(o.output, allFormats...); err != nil {
		return err
	}
	if err := checkTopRows(o.sc.changed("top"), o.top, o.output, "point of the sweep"); err != nil {
		return err
	}
	if o.workers < 1 {
		return flagError("--workers", o.workers, "want at least 1")
	}
	if o.sloMs < 0 {
		return flagError("--slo-ms", o.sloMs, "want 0 (none) or a positive latency")
	}
	if err := o.checkPlanOrLists(); err != nil {
		return err
	}
	if err := checkPlotPath(o.plot); err != nil {
		return err
	}
	if err := checkOutputFile("--frontier", o.frontier); err != nil {
		return err
	}
	if err := checkOutputExt("--report", o.reportFile, ".html", ".htm"); err != nil {
		return err
	}
	if err := sc.checkPerfDB(); err != nil {
		return err
	}
	a, err := sc.modelArch()
	if err != nil {
		return err
	}
	if err := sc.checkDenseDSA(a); err != nil {
		return err
	}
	build, err := sc.build()
	if err != nil {
		return err
	}
	specs := o.mtp.v
	m, err := model.ParseSpecMethod(sc.specMethod)
	if err != nil {
		return causeError("--spec", quote(sc.specMethod), err)
	}
	// Without --spec the spec flags still travel, so that a tree, a
	// drafter or a draft TP the sweep cannot use is refused (Enumerate).
	if build.Spec, err = sc.spec(a, m); err != nil {
		return err
	}
	switch {
	case o.changed("spec-tokens") && o.changed("mtp"):
		// One list of speculative tokens: the other would be dropped.
		return flagError("--spec-tokens", sc.specTokens, "leave it out beside --mtp %s: --mtp lists the speculative tokens the sweep takes", joinInts(o.mtp.v))
	case o.changed("spec-tokens") && m == "" && a.MTPLayers == 0 && sc.specTokens > 0:
		// Without --spec, K tokens are MTP's, as predict takes them.
		return flagError("--spec-tokens", sc.specTokens, "want 0: %s (--spec eagle3, draft, ngram or suffix draft without one)", model.NoMTPDraft(a))
	case o.changed("spec-tokens") || m != "" && !o.changed("mtp"):
		specs = []int{sc.specTokensFlag(m)}
	}
	space := plan.Space{Arch: a, Build: build, ImplyDenseDSA: !o.changed("dense-dsa"), MaxMsPerToken: o.sloMs, GPUCounts: o.gpus.v,
		Batches: o.batch.v, Contexts: o.ctx.v, SpecTokens: specs}
	if !o.changed("context") {
		// The default list: a context longer than the model is served
		// at is left out (and said), not refused.
		space.Contexts = nil
	}
	for i, name := range o.topos {
		// An empty element would be the default box, and a box named
		// twice (a preset and its description are one box) would be
		// swept twice, every row written twice.
		if strings.TrimSpace(name) == "" {
			return flagError("--topo", quote(strings.Join(o.topos, ",")), "element %d of the list is empty: want a preset, a box description or a topology JSON", i+1)
		}
		sc.topo = name
		t, _, err := sc.box()
		if err != nil {
			return err
		}
		for j, prev := range space.Topologies {
			if prev.SameBox(t) {
				what := fmt.Sprintf("%s and %s are the same box", o.topos[j], name)
				if o.topos[j] == name {
					what = name + " is named twice"
				}
				return flagError("--topo", quote(strings.Join(o.topos, ",")), "%s: name each box once", what)
			}
		}
		// Two boxes of one name (a box and its calibrated copy, which
		// keeps the name) would be one box in every row and table, the
		// capacity rows of one lost: each is named by its --topo element
		// too, as a file named like a preset it is not is.
		for j, prev := range space.Topologies {
			if prev.Name == t.Name {
				prev.Name = fmt.Sprintf("%s (%s)", prev.Name, o.topos[j])
				t.Name = fmt.Sprintf("%s (%s)", t.Name, name)
			}
		}
		space.Topologies = append(space.Topologies, t)
	}
	if len(space.Topologies) == 0 {
		return flagError("--topo", nil, "no box named")
	}
	if space.Options, err = sc.options(); err != nil {
		return err
	}
	if err := sc.specAccept(&space.Options); err != nil {
		return err
	}
	// The acceptance is checked as predict checks it, against the
	// sweep's deepest step: none drafting refuses it, and so do more
	// per-position rates than that step drafts.
	deepest := 0
	for _, k := range specs {
		deepest = max(deepest, k)
	}
	if err := sc.checkAccept(sim.Scenario{Arch: a, Build: build, Workload: model.Workload{Phase: model.Decode, SpecTokens: deepest}}); err != nil {
		return err
	}
	// The scheduler limits size each box's KV pool (vLLM's profiling
	// step) and nothing else a sweep prices: refused where they size
	// nothing of it, or where the engine refuses them on a box's GPU.
	for _, t := range space.Topologies {
		if err := (sim.Scenario{Arch: a, Topo: t, Options: space.Options}).CheckSchedulerLimits(); err != nil {
			return usageErrorf("%v", err)
		}
	}
	if space.Lists, err = o.planLists(); err != nil {
		return err
	}
	for _, ps := range o.plans {
		p, err := model.ParsePlan(ps)
		if err != nil || p.TP == 0 {
			return flagError("--plan", quote(ps), "want tpN[-dpN][-ep][-dcpN], e.g. tp8, tp8-ep, tp4-dp2-ep, tp8-dcp4")
		}
		if err := p.Validate(a); err != nil {
			return &usageError{Flag: "--plan", Value: ps, Want: a.Name + ": " + planFlagError("", err).Error(), Err: err}
		}
		space.Plans = append(space.Plans, p)
		if i, j := plan.RepeatedPlan(space.Plans); j >= 0 {
			// As every other list flag refuses a value given twice.
			what := ps
			if o.plans[i] != ps {
				what = fmt.Sprintf("%s (as %s and %s)", p.Normalized(), quote(o.plans[i]), quote(ps))
			}
			return flagError("--plan", quote(strings.Join(o.plans, ",")), "%s is given twice: name each plan once", what)
		}
	}
	for _, s := range o.kvDtypes {
		d, err := model.ParseKVDtype(s)
		if err != nil {
			return causeError("--kv-dtype", quote(s), err)
		}
		if slices.Contains(space.KVDtypes, d) {
			// Swept twice, every configuration of it counted twice.
			return flagError("--kv-dtype", quote(strings.Join(o.kvDtypes, ",")), "%s is given twice: name each KV dtype once", d)
		}
		space.KVDtypes = append(space.KVDtypes, d)
	}
	for _, k := range o.mtp.v {
		if k > 16 {
			return flagError("--mtp", k, "want integers from 0 to 16")
		}
	}
	// The lists are checked before any cost source is loaded: a
	// combination that can never run is the flags' fault.
	first, _, err := space.Enumerate()
	if err != nil {
		var pe *model.PlanError
		if errors.As(err, &pe) {
			// The speculative flags, checked once for the sweep.
			return sc.specFlagError(buildFlagError(a, err))
		}
		return planSpaceUsage(err, len(space.Topologies))
	}
	if err := sc.checkSweepDispatch(a, first); err != nil {
		return err
	}
	sc.perfDBBoxes = len(space.Topologies) > 1
	for _, t := range space.Topologies {
		// A box whose GPU the perf DB has no tables of is priced from
		// the priors (or, with --perf-db-transfer, from the others'
		// tables), and the sweep says so.
		// The routing is held against the tables per configuration
		// (planRouting), as predict holds it against one scenario's.
		src, err := sc.costs(t, build.Routing, space.Options, space.Arch.ModelType, func(sim.CostSource) bool { return false })
		if err != nil && sc.perfDB != "" && len(o.topos) > 1 {
			fmt.Fprintf(std.Stderr, "plan: %s priced from the priors: %v\n", t.Name, err)
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
	split, err := sc.planRouting(cfgs, space.Topologies, space.Costs, o.workers, std.Stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	bar := newLazyBar(std.Stderr, "plan sweep")
	points := plan.Evaluate(cfgs, o.sloMs, o.workers, bar.update)
	bar.finish()
	elapsed := time.Since(start)
	res := plan.Summarize(points, o.sloMs)
	res.Coverage = cov
	if elapsed > 0 {
		full := ""
		if res.FullLoad > 0 {
			full = fmt.Sprintf(" and %d full-load points", res.FullLoad)
		}
		fmt.Fprintf(std.Stderr, "plan: %d configurations%s evaluated in %.2f s (%.0f/s)\n", res.Evaluated, full, elapsed.Seconds(), float64(len(points))/elapsed.Seconds())
	}
	res.Caveats = plan.Caveats(cfgs, res)
	priced, err := planPricedBy(cfgs, res)
	if err != nil {
		return err
	}
	if priced != nil {
		priced.RoutingSplit = split
	}
	var files []func() error
	if o.plot != "" {
		files = append(files, func() error { return writePlanPlot(o.plot, a.Name, res) })
	}
	if o.frontier != "" {
		files = append(files, func() error {
			return writeFileWith(o.frontier, func(w io.Writer) error { return writePlanFrontierCSV(w, res) })
		})
	}
	if o.reportFile != "" {
		files = append(files, func() error {
			lines := []string{fmt.Sprintf("%s: %d configurations; %d do not fit, %d invalid%s", a.Name, res.Evaluated, res.NotFitting, res.Errors, fullLoadText(res))}
			if res.SLOMs > 0 {
				lines = append(lines, fmt.Sprintf("SLO: %.2f ms per token per request (%d configurations miss it)", res.SLOMs, res.MissSLO))
			}
			for _, i := range res.BestByContext {
				b := &res.Points[i]
				lines = append(lines, fmt.Sprintf("best throughput per GPU at context %d: %s x%d %s, kv %s%s, batch %d: %.1f tok/s/GPU, %.1f tok/s per request",
					b.Context, b.Topology, b.GPUs, b.Plan, b.KVDtype, b.SpecText(), b.Batch, b.TokensPerSPerGPU, b.TokensPerSPerRequest))
			}
			for _, kv := range priced.lines(planEngineKey(res)) {
				lines = append(lines, kv[0]+": "+kv[1])
			}
			lines = append(lines, res.Caveats...)
			return report.WriteFile(o.reportFile, reportbuild.Plan(a.Name+": capacity plan", lines, res))
		})
	}
	return renderThen(std.Stdout, o.output, view{
		// The model and the run-time options every configuration was
		// priced with, as predict's JSON names them.
		JSON: struct {
			Model   string      `json:"model"`
			Options sim.Options `json:"options"`
			*plan.Result
			PricedBy *pricedBy `json:"priced_by,omitempty"`
		}{a.Name, space.Options, res, priced},
		CSV: func(w io.Writer) error { return writePlanCSV(w, res) },
		Text: func(w io.Writer, md bool) error {
			return writePlanText(w, a.Name, res, priced, len(space.Topologies), o.top, md)
		},
	}, files...)
}

// checkSweepDispatch refuses --moe-dispatch and --dispatch-dtype on a
// sweep none of whose plans dispatches tokens to the experts (only DP
// attention does), where they would price nothing, as the other verbs
// refuse them on such a plan (checkDispatch).
func (f *scenarioFlags) checkSweepDispatch(a *model.Arch, cfgs []plan.Config) error {
	if len(cfgs) == 0 {
		return nil
	}
	var plans []string
	for i := range cfgs {
		p := cfgs[i].Scenario.Plan
		if p.DispatchesMoE(a) {
			return nil
		}
		if n := p.Normalized().String(); !slices.Contains(plans, n) {
			plans = append(plans, n)
		}
	}
	if name, v, ok := f.dispatchFlag(); ok {
		return flagError("--"+name, v, "no plan of the sweep (%s) has a MoE dispatch to price: tokens reach the experts by a dispatch only under DP attention (--dp > 1 with --ep)", strings.Join(plans, ", "))
	}
	return nil
}

// planPricedBy is what priced the sweep's steps, as predict says it, for
// one configuration: the best (whose caveats the sweep prints too), else
// the first evaluated; nil when none was.
func planPricedBy(cfgs []plan.Config, res *plan.Result) (*pricedBy, error) {
	i := res.Best
	if i < 0 {
		for k := range res.Points {
			if res.Points[k].Error == "" {
				i = k
				break
			}
		}
	}
	if i < 0 || i >= len(cfgs) {
		return nil, nil
	}
	pr, _, err := sim.Predict(cfgs[i].Scenario)
	if err != nil {
		return nil, err
	}
	p := &res.Points[i]
	which := "the best configuration"
	if i != res.Best {
		which = "the first configuration"
	}
	return pricedByOf(pr, fmt.Sprintf("%s's step (%s x%d %s, kv %s%s, batch %d, context %d)", which, p.Topology, p.GPUs, p.Plan, p.KVDtype, p.SpecText(), p.Batch, p.Context)), nil
}

// planRouting decides each configuration's MoE routing with --perf-db as
// scenario decides one scenario's: under the default, the tables'
// routing where their MoE rows price the configuration's routed experts
// (moePricedByTables) and uniform where none does, or where the box is
// priced from the priors, as without tables; a routing a box's tables
// lack is refused where they price any configuration's experts (in a
// sweep of several boxes that box is priced from the priors instead, with
// a line on stderr, as for a box without tables). It returns how the
// swept configurations (not the full-load points) split under the
// default, nil without --perf-db or with --moe-routing.
func (f *scenarioFlags) planRouting(cfgs []plan.Config, topos []*topology.Topology, costs []sim.CostSource, workers int, stderr io.Writer) (*routingSplit, error) {
	if f.perfDB == "" {
		return nil, nil
	}
	// The routed experts' shape (tokens routed, local experts, weight
	// dtype) follows from the plan, the batch, the speculative tokens and
	// the build, not from the context or the KV cache's dtype: one
	// answer serves the configurations that differ only in those.
	type shape struct {
		box   int
		plan  model.Plan
		w     model.Workload
		build model.BuildOptions
	}
	keyOf := make([]int, len(cfgs)) // index into first, -1 without tables
	index := map[shape]int{}
	var first []int // a configuration of each shape
	for i := range cfgs {
		c := &cfgs[i]
		keyOf[i] = -1
		if c.Scenario.Costs == nil {
			continue
		}
		k := shape{c.Box, c.Scenario.Plan, c.Scenario.Workload, c.Scenario.Build}
		k.w.Context, k.w.KVDtype = 0, ""
		j, ok := index[k]
		if !ok {
			j = len(first)
			index[k], first = j, append(first, i)
		}
		keyOf[i] = j
	}
	// Each answer builds a step's schedule (a sweep's worth: hundreds),
	// so they are shared out over the sweep's workers; the cost sources
	// are safe for concurrent use, as the sweep's own workers need.
	answers := make([]bool, len(first))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(workers, len(first))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := int(next.Add(1)) - 1; j < len(first); j = int(next.Add(1)) - 1 {
				c := &cfgs[first[j]]
				answers[j] = moePricedByTables(c.Scenario, c.Scenario.Costs)
			}
		}()
	}
	wg.Wait()
	priced := make([]bool, len(cfgs))
	for i, j := range keyOf {
		priced[i] = j >= 0 && answers[j]
	}
	var routing model.Routing
	if len(cfgs) > 0 {
		routing = cfgs[0].Scenario.Build.Routing
	}
	// Each box named shares its cost source with its GPU-count subsets
	// (the configurations hold the same pointer: perfdb's sources).
	for t, src := range costs {
		if src == nil {
			continue
		}
		prices := false
		for i := range cfgs {
			prices = prices || priced[i] && cfgs[i].Scenario.Costs == src
		}
		rc, ok := src.(interface{ CheckRouting(model.Routing) error })
		if !prices || !ok {
			continue
		}
		err := rc.CheckRouting(routing)
		if err == nil {
			continue
		}
		err = f.routingError(routing, err)
		if len(topos) < 2 {
			return nil, err
		}
		fmt.Fprintf(stderr, "plan: %s priced from the priors: %v\n", topos[t].Name, err)
		for i := range cfgs {
			if cfgs[i].Scenario.Costs == src {
				cfgs[i].Scenario.Costs, priced[i] = nil, false
			}
		}
		costs[t] = nil
	}
	if f.changed("moe-routing") {
		return nil, nil
	}
	split := &routingSplit{Routing: routing}
	for i := range cfgs {
		c := &cfgs[i]
		if !priced[i] {
			c.Scenario.Build.Routing = model.UniformRouting
		}
		switch {
		case c.AtCapacity:
		case priced[i]:
			split.Tables++
		default:
			split.Uniform++
		}
	}
	return split, nil
}

// routingSplit is how a plan sweep's configurations split under
// --perf-db's default MoE routing: Tables under the tables' Routing
// (their rows price the routed experts), Uniform under uniform routing
// (the priors price them).
type routingSplit struct {
	Routing model.Routing `json:"routing"`
	Tables  int           `json:"tables"`
	Uniform int           `json:"uniform"`
}

// planEngineKey keys the engine line by the configuration it describes
// (planPricedBy's: the best, else the first evaluated), as its costs
// line says of the step; other configurations may get other kernels.
func planEngineKey(res *plan.Result) string {
	if res.Best >= 0 {
		if len(res.BestByContext) > 1 {
			// Several best lines: say which one's step it is.
			return fmt.Sprintf("engine (best at context %d)", res.Points[res.Best].Context)
		}
		return "engine (best)"
	}
	return "engine (first)"
}

// checkPlanOrLists refuses --plan beside a degree list: --plan names
// whole plans and the lists build plans from degrees, so together one
// would either widen the other (a union prices plans a list excludes:
// --plan tp8-ep --ep false) or be ignored; neither says what was asked.
func (o *planOptions) checkPlanOrLists() error {
	if !o.given("plan", len(o.plans) > 0) {
		return nil
	}
	var lists []string
	for _, d := range []struct {
		flag string
		set  bool
	}{{"tp", len(o.tp.v) > 0}, {"dp", len(o.dp.v) > 0}, {"dcp", len(o.dcp.v) > 0}, {"ep", o.ep != "both"}} {
		if o.given(d.flag, d.set) {
			lists = append(lists, "--"+d.flag)
		}
	}
	if len(lists) == 0 {
		return nil
	}
	return flagError("--plan and "+strings.Join(lists, ", "), nil,
		"give one: --plan names whole plans (tp8-ep), --tp/--dp/--dcp/--ep build the plans from degrees")
}

// planLists binds the --tp/--dp/--dcp/--ep lists the user gave (a list
// not given stays free: see plan.Lists; options built in code give
// the lists that are not empty; --ep both is free too); which
// combinations can run is the sweep's to say (plan.Space.Enumerate).
func (o *planOptions) planLists() (plan.Lists, error) {
	var l plan.Lists
	for _, d := range []struct {
		flag string
		v    []int
		dst  *[]int
	}{{"tp", o.tp.v, &l.TP}, {"dp", o.dp.v, &l.DP}, {"dcp", o.dcp.v, &l.DCP}} {
		if !o.given(d.flag, len(d.v) > 0) {
			continue
		}
		for _, x := range d.v {
			if x < 1 {
				return l, flagError("--"+d.flag, x, "want positive degrees")
			}
		}
		*d.dst = d.v
	}
	// "both" is the free EP list (off and on, with every plan PlansFor
	// gives), whether or not it was typed: a list of false and true
	// would sweep every TP x DP x DCP with EP off and on, plans (DCP with
	// EP or DP attention) the default sweep leaves out.
	switch o.ep {
	case "both":
	case "true":
		l.EP = []bool{true}
	case "false":
		l.EP = []bool{false}
	default:
		return l, flagError("--ep", quote(o.ep), "want one of true, false or both (both sweeps EP off and on)")
	}
	return l, nil
}

// leftOutFlags names a left-out combination by the flags that make it:
// "--gpus 3 --tp 8", "--mtp 1" (--spec-tokens 3 for a method --spec
// names); --topo only among several boxes.
func leftOutFlags(l plan.LeftOut, boxes int) string {
	var f []string
	if l.Topology != "" && (boxes > 1 || l.Reason == plan.LeftOutBoxGPUs) {
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
	if l.KVDtype != "" {
		f = append(f, "--kv-dtype "+l.KVDtype)
	}
	switch {
	case l.SpecTokens > 0 && l.SpecMethod != "":
		// K of the method --spec named, not --mtp's MTP.
		f = append(f, "--spec-tokens "+strconv.Itoa(l.SpecTokens))
	case l.SpecTokens > 0:
		f = append(f, "--mtp "+strconv.Itoa(l.SpecTokens))
	}
	if l.Context > 0 {
		f = append(f, "--context "+strconv.Itoa(l.Context))
	}
	if l.Batch > 0 {
		f = append(f, "--batch "+strconv.Itoa(l.Batch))
	}
	if len(f) == 0 {
		return "the default plans"
	}
	return strings.Join(f, " ")
}

// planSpaceUsage turns a sweep with nothing left to run into a usage
// error naming the flags of each combination and why it cannot run.
func planSpaceUsage(err error, boxes int) error {
	var ee *plan.EngineError
	if errors.As(err, &ee) {
		// Every configuration refused for one reason: predict's line.
		return usageErrorf("%v", ee.Err)
	}
	var se *plan.SpaceError
	if !errors.As(err, &se) {
		return causeError("", nil, err)
	}
	var parts []string
	shown, seen := 0, map[string]bool{}
	for _, l := range se.Coverage.LeftOut {
		if l.Reason == plan.LeftOutEngine || l.Reason == plan.LeftOutBuild {
			// The engine refuses many configurations for one reason:
			// said once, with its first configuration.
			if seen[l.Detail] {
				continue
			}
			seen[l.Detail] = true
		}
		if len(parts) == 4 {
			break
		}
		shown++
		parts = append(parts, leftOutFlags(l, boxes)+": "+l.Detail)
	}
	if n := len(se.Coverage.LeftOut) - shown; n > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", n))
	}
	return &usageError{Want: strings.Join(parts, "; ") + " (no combination of the lists can run)", Err: err}
}

// leftOutLines say, per reason, how many combinations of the lists were
// left out, with up to three of them by their flags.
func leftOutLines(cov plan.Coverage, boxes int) []string {
	var out []string
	for _, reason := range []plan.LeftOutReason{plan.LeftOutBoxGPUs, plan.LeftOutPlanGPUs, plan.LeftOutPlanModel, plan.LeftOutNoMTP, plan.LeftOutContext, plan.LeftOutEngine, plan.LeftOutBuild, plan.LeftOutRunningLimit} {
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
		why := map[plan.LeftOutReason]string{
			plan.LeftOutBoxGPUs:   "GPU count above the box's",
			plan.LeftOutPlanGPUs:  "TP x DP is not the GPU count",
			plan.LeftOutPlanModel: "the model runs none of these plans",
			plan.LeftOutNoMTP:     "no MTP layer",
		}[reason]
		if reason == plan.LeftOutEngine || reason == plan.LeftOutBuild {
			// Configurations, not combinations of the lists: the engine's
			// refusal, and the builder's, depend on the box, plan, KV
			// dtype and spec tokens.
			more := ""
			if n > len(ex) {
				more = fmt.Sprintf(", and %d more", n-len(ex))
			}
			who := "the engine cannot run"
			if reason == plan.LeftOutBuild {
				who = "the model builds no step of"
			}
			out = append(out, fmt.Sprintf("left out %d configurations (box x plan x KV dtype x spec tokens) %s: %s%s", n, who, strings.Join(ex, "; "), more))
			continue
		}
		if reason == plan.LeftOutContext {
			// One reason for every context: the model's max_model_len.
			var cs []string
			for _, l := range cov.LeftOut {
				if l.Reason == reason {
					cs = append(cs, strconv.Itoa(l.Context))
				}
			}
			first := cov.LeftOut[slices.IndexFunc(cov.LeftOut, func(l plan.LeftOut) bool { return l.Reason == reason })]
			out = append(out, fmt.Sprintf("left out the default contexts %s: %s", strings.Join(cs, ", "), first.Detail))
			continue
		}
		if reason == plan.LeftOutNoMTP {
			out = append(out, fmt.Sprintf("left out: %s", strings.Join(ex, ", ")))
			continue
		}
		if reason == plan.LeftOutRunningLimit {
			// Batches, not combinations of the lists: the limit is the
			// plan's (its DP groups) on each box.
			more := ""
			if n > len(ex) {
				more = fmt.Sprintf(", and %d more", n-len(ex))
			}
			whose := "the running limit given"
			if first := cov.LeftOut[slices.IndexFunc(cov.LeftOut, func(l plan.LeftOut) bool { return l.Reason == reason })]; first.EngineDefault {
				// None given: the engine's default, which the server
				// launched without --max-num-seqs runs.
				whose = "the engine's default running limit (none given; lift it with --max-num-seqs, as the server would be launched)"
			}
			out = append(out, fmt.Sprintf("left out %d batches (box x plan x batch) above %s, steps the engine never runs: %s%s", n, whose, strings.Join(ex, "; "), more))
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

// concurrencyCell is a maximum concurrency as the tables show it: the
// count, marked where the running limit given bounds it rather than the
// KV cache, or the engine's default where none was given ("default":
// the line under the capacity table names it and how to lift it).
func concurrencyCell(n int, bound plan.ConcurrencyBound) string {
	switch bound {
	case plan.BoundEngineDefault:
		return strconv.Itoa(n) + " (default)"
	case plan.BoundRunningLimit:
		return strconv.Itoa(n) + " (--max-num-seqs)"
	}
	return strconv.Itoa(n)
}

// defaultLimitLine says in how many capacity rows the engine's default
// running limit bounds the max concurrency, which default, and how to
// lift it; "" where it bounds none.
func defaultLimitLine(res *plan.Result) string {
	var from []string
	n := 0
	for _, c := range res.Capacity {
		if c.ConcurrencyBound != plan.BoundEngineDefault {
			continue
		}
		n++
		if f := c.ConcurrencyLimitFrom; !slices.Contains(from, f) {
			from = append(from, f)
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("max concurrency bound by the engine's default running limit in %d of %d capacity rows (marked default; none given: %s a scheduler (DP group)): lift it with --max-num-seqs N, as the server would be launched", n, len(res.Capacity), strings.Join(from, ", "))
}

// pointCells are a point's table cells; the "slo" column only when the
// sweep has an SLO.
func pointCells(p *plan.Point, withSLO bool) []string {
	cells := []string{p.Topology, strconv.Itoa(p.GPUs), p.Plan, p.KVDtype, strconv.Itoa(p.SpecTokens), strconv.Itoa(p.Context), strconv.Itoa(p.Batch),
		fmt.Sprintf("%.2f", p.MsPerToken), fmt.Sprintf("%.1f", p.TokensPerSPerRequest), fmt.Sprintf("%.1f", p.TokensPerS),
		fmt.Sprintf("%.1f", p.TokensPerSPerGPU), concurrencyCell(p.MaxConcurrency, p.ConcurrencyBound), fitCell(p.Fits, p.ShortfallGB)}
	if withSLO {
		cells = append(cells, map[plan.SLOVerdict]string{plan.SLOMet: "yes", plan.SLOMissed: "no"}[p.SLO])
	}
	return cells
}

func pointHeader(withSLO bool) []string {
	h := []string{"topology", "gpus", "plan", "kv", "spec", "context", "batch", "ms/token", "tok/s/req", "tok/s", "tok/s/GPU", "max conc.", "fits"}
	if withSLO {
		h = append(h, "slo")
	}
	return h
}

// fullLoadText is what the count of configurations adds for the points
// at full load: evaluated beside them, shown in the capacity table's full
// columns, not configurations of the lists (plan.Result.FullLoad).
func fullLoadText(res *plan.Result) string {
	if res.FullLoad == 0 {
		return ""
	}
	return fmt.Sprintf("; %d full-load points beside them (the capacity table's full columns)", res.FullLoad)
}

// writePlanText renders the plan as aligned text or markdown tables. It
// speaks of an SLO only when the sweep has one.
func writePlanText(w io.Writer, modelName string, res *plan.Result, priced *pricedBy, boxes, top int, md bool) error {
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
		// A speculative point is judged by its 90th percentile (plan's
		// specPoint), not by the mean its rows print: said once.
		judged := ""
		for i := range res.Points {
			if res.Points[i].MsPerTokenP90 > 0 {
				judged = fmt.Sprintf("; a speculative point's 90th percentile of a %d-token request", plan.TPOTOutputTokens)
				break
			}
		}
		fmt.Fprintf(w, "plan: %s, %d configurations; %d do not fit, %d miss the SLO (%.2f ms/token per request%s), %d invalid%s\n",
			modelName, res.Evaluated, res.NotFitting, res.MissSLO, res.SLOMs, judged, res.Errors, fullLoadText(res))
	} else {
		fmt.Fprintf(w, "plan: %s, %d configurations; %d do not fit, %d invalid%s\n", modelName, res.Evaluated, res.NotFitting, res.Errors, fullLoadText(res))
	}
	for _, l := range leftOutLines(res.Coverage, boxes) {
		fmt.Fprintln(w, l)
	}
	if l := defaultLimitLine(res); l != "" {
		fmt.Fprintln(w, l)
	}
	within, none := "", "no swept configuration fits"
	if withSLO {
		within, none = " within the SLO", "no swept configuration fits and meets the SLO"
	}
	// One best per context: throughput per GPU falls with the context at
	// every batch, so a best over all contexts is always the shortest's.
	for _, i := range res.BestByContext {
		b := &res.Points[i]
		p90 := ""
		if b.MsPerTokenP90 > 0 {
			p90 = fmt.Sprintf(", p90 %.2f", b.MsPerTokenP90)
		}
		fmt.Fprintf(w, "best throughput per GPU%s at context %d: %s x%d %s, kv %s%s, batch %d: %.1f tok/s/GPU, %.1f tok/s per request (%.2f ms/token%s)\n",
			within, b.Context, b.Topology, b.GPUs, b.Plan, b.KVDtype, b.SpecText(), b.Batch, b.TokensPerSPerGPU, b.TokensPerSPerRequest, b.MsPerToken, p90)
	}
	if len(res.BestByContext) == 0 {
		fmt.Fprintln(w, none)
	}
	if priced != nil {
		for _, kv := range priced.lines(planEngineKey(res)) {
			fmt.Fprintf(w, "%s: %s\n", kv[0], kv[1])
		}
	}
	for _, c := range res.Caveats {
		fmt.Fprintf(w, "caveat: %s\n", c)
	}
	// The fronts, one per (context, box) as --frontier and --plot draw
	// them; --top bounds each front's rows.
	var rows [][]string
	for _, f := range res.Fronts {
		rows = rows[:0]
		for _, i := range f.Points[:limit(len(f.Points))] {
			rows = append(rows, pointCells(&res.Points[i], withSLO))
		}
		if err := table(fmt.Sprintf("Pareto front at context %d on %s: throughput per GPU vs per-request tokens/s (%d points)", f.Context, f.Box(), len(f.Points)), pointHeader(withSLO), rows); err != nil {
			return err
		}
	}
	rows = rows[:0]
	capHeader := []string{"topology", "gpus", "plan", "kv", "spec", "context", "max concurrency", "best batch", "tok/s/GPU", "tok/s/req", "ms/token", "full: batch", "full: tok/s/GPU", "full: ms/token"}
	var fitting []plan.CapacityRow
	for _, c := range res.Capacity {
		if c.MaxConcurrency > 0 {
			fitting = append(fitting, c)
		}
	}
	for _, c := range fitting[:limit(len(fitting))] {
		r := []string{c.Topology, strconv.Itoa(c.GPUs), c.Plan, c.KVDtype, strconv.Itoa(c.SpecTokens), strconv.Itoa(c.Context), concurrencyCell(c.MaxConcurrency, c.ConcurrencyBound), "-", "-", "-", "-", "-", "-", "-"}
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
	what := "sequences of each context that fit (KV cache)"
	if slices.ContainsFunc(fitting, func(c plan.CapacityRow) bool { return c.ConcurrencyBound == plan.BoundRunningLimit }) {
		what = "sequences of each context the box runs at once (the KV cache's, or the running limit given where marked --max-num-seqs)"
	} else if slices.ContainsFunc(fitting, func(c plan.CapacityRow) bool { return c.ConcurrencyBound == plan.BoundEngineDefault }) {
		what = "sequences of each context the box runs at once (the KV cache's, or the engine's default running limit where marked default)"
	}
	if err := table(fmt.Sprintf("capacity: %s, best swept batch%s, and the box at full load (%d of %d rows have room; all in --output json)", what, within, len(fitting), len(res.Capacity)), capHeader, rows); err != nil {
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
		if p.Error != "" || p.Fits || p.AtCapacity || seen[k] {
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

// writePlanPlot draws, per context (the plane is per ISL/OSL), every
// fitting point by box with each box's own Pareto front, the points that
// miss the SLO muted, the SLO as a vertical line and the best point
// marked (build.PlanScatter), panels two to a row.
func writePlanPlot(path, modelName string, res *plan.Result) error {
	ctxs := reportbuild.PlanContexts(res)
	if len(ctxs) == 0 {
		return fmt.Errorf("plot %s: no configuration fits, nothing to draw (the sweep's table says why)", path)
	}
	cols := min(2, len(ctxs))
	rows := (len(ctxs) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, cx := range ctxs {
		p, err := scatterPlot(fmt.Sprintf("%s, context %d: throughput per GPU vs per-request speed", modelName, cx), reportbuild.PlanScatter(res, cx))
		if err != nil {
			return err
		}
		grid[i/cols][i%cols] = p
	}
	w := vg.Length(cols) * 8 * vg.Inch
	h := vg.Length(rows) * 5.5 * vg.Inch
	return chart.Save(path, w, h, grid, draw.Tiles{PadX: vg.Points(24), PadY: vg.Points(24)})
}

// writePlanFrontierCSV writes each (context, box) Pareto front of the
// sweep's fitting points within the SLO: one row per point on a front.
func writePlanFrontierCSV(w io.Writer, res *plan.Result) error {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	var rows [][]string
	for _, fr := range res.Fronts {
		for _, i := range fr.Points {
			p := &res.Points[i]
			rows = append(rows, []string{strconv.Itoa(fr.Context), fr.Box(), reportbuild.PlanPointLabel(p), f(p.TokensPerSPerRequest), f(p.TokensPerSPerGPU)})
		}
	}
	return writeCSV(w, []string{"context", "box", "configuration", "tokens_per_s_per_request", "tokens_per_s_per_gpu"}, rows)
}

// writePlanCSV writes every configuration of the sweep, one per row.
func writePlanCSV(w io.Writer, res *plan.Result) error {
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
