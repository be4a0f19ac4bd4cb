package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

var predictVerb = &Verb{
	UsageLine: "predict [flags]",
	Short:     "predict one step of a model on a box: step time, tokens/s, where the time goes",
	Long: `Builds the step's schedule (model, plan, workload), prices every op on the
topology (compute roofline per kernel family, NCCL collectives per
algorithm x protocol on the box's links) and runs the discrete-event engine
(host launch queue, streams, collectives synchronizing their groups).

Prints the step time, tokens/s per request and in aggregate, the time by op
kind, by block and by op name, the communication share, the longest ops and
the per-GPU memory fit. --output json holds every op row (id, kind, bound,
flops, bytes, comm_bytes, us and the cost parameters used) so each number
traces back to its inputs. --plot writes a PNG or SVG of the breakdown.

A scenario whose weights and KV cache do not fit in GPU memory is an error
that names the shortfall in GB.`,
	Example: `tpscope predict --model kimi-k2.5-nvfp4 --tp 8 --batch 1 --context 4096 --kv-dtype bf16 --nccl-proto LL --p2p-level SYS`,
	New:     func() Options { return newPredictOptions() },
}

// predictOptions are predict's flags.
type predictOptions struct {
	sc     *scenarioFlags
	output string
	plot   string // --plot FILE.png|svg, "" for none
	top    int    // op names and ops in the table
}

func newPredictOptions() *predictOptions {
	o := &predictOptions{sc: newScenarioFlags(), output: formatTable, top: 10}
	o.sc.counts = []countFlag{{"top", &o.top}}
	return o
}

func (o *predictOptions) Bind(fs *pflag.FlagSet) {
	o.sc.Bind(fs)
	bindOutputFlag(fs, &o.output, "one row per op of every simulated rank", allFormats...)
	fs.StringVar(&o.plot, "plot", o.plot, "write a breakdown chart to FILE.png or FILE.svg")
	fs.IntVar(&o.top, "top", o.top, "how many op names and longest ops to list in the table, 0 = all (--output json's top_ops lists the same ops)")
}

func (o *predictOptions) Run(ctx context.Context, args []string, std IO) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if err := checkOutput(o.output, allFormats...); err != nil {
		return err
	}
	if err := checkPlotPath(o.plot); err != nil {
		return err
	}
	scen, err := o.sc.scenario()
	if err != nil {
		return err
	}
	// Its scheduler limits size the engine's KV pool only: refused where
	// they size nothing of it.
	if err := scen.CheckSchedulerLimits(); err != nil {
		return usageErrorf("%v", err)
	}
	pr, _, err := sim.Predict(scen)
	if err != nil {
		var pe *model.PlanError
		if errors.As(err, &pe) {
			return planFlagError("", err)
		}
		return err
	}
	if err := memoryFitError(scen, pr); err != nil {
		return err
	}
	// The longest ops the table lists are --top of them (0: all), and
	// the JSON holds the same list.
	pr.TopOps = pr.LongestOps(o.top)
	var files []func() error
	if o.plot != "" {
		files = append(files, func() error { return writePredictPlot(o.plot, pr) })
	}
	return renderThen(std.Stdout, o.output, view{
		JSON: pr,
		CSV:  func(w io.Writer) error { return writePredictCSV(w, pr) },
		Text: func(w io.Writer, md bool) error { return writePredictTable(w, pr, o.top, md) },
	}, files...)
}

func gb(b int64) float64 { return float64(b) / 1e9 }

// kvDefaultNote says where an engine-chosen KV dtype came from, after
// the dtype: " (sglang@0.5's default for a DSA model on SM100)"; "" when
// the user named it or the checkpoint decided.
func kvDefaultNote(d *sim.KVDefault) string {
	if d == nil {
		return ""
	}
	return " (" + d.String() + ")"
}

// writePredictTable renders the prediction for people: key lines, then
// tables (markdown tables under headings with md).
func writePredictTable(w io.Writer, pr *sim.Prediction, top int, md bool) error {
	kv := [][2]string{
		{"model", pr.Model},
		{"topology", pr.Topology},
		{"plan", pr.Plan.String()},
		{"workload", fmt.Sprintf("%s batch %d (%s), context %d, spec tokens %d, kv %s%s", pr.Workload.Phase, pr.Sequences, graphNote(pr.GraphTokens, pr.Plan), pr.Workload.Context, pr.Workload.SpecTokens, pr.Workload.KVDtype, kvDefaultNote(pr.KVDefault))},
		{"options", pr.OptionsLabel()},
	}
	kv = append(kv, pricedByOf(pr, "").lines("engine")...)
	kv = append(kv, [][2]string{
		{"step", fmt.Sprintf("%.1f us (%d kernels per rank, host launch %.0f us, idle %.0f us)", pr.StepUs, pr.Kernels, pr.HostUs, pr.IdleUs)},
	}...)
	if pr.Workload.Phase == model.Prefill {
		// A prefill step ends with every prompt's first token.
		prompt := float64(pr.Sequences) * float64(pr.Workload.Context)
		kv = append(kv, [2]string{"time to first token", fmt.Sprintf("%.2f ms for %d prompts of %d tokens", pr.StepUs/1e3, pr.Sequences, pr.Workload.Context)},
			[2]string{"prompt tokens/s", fmt.Sprintf("%.0f", prompt/(pr.StepUs*1e-6))})
	} else {
		kv = append(kv, [2]string{"tokens/s", fmt.Sprintf("%.1f per request, %.1f aggregate (%.2f tokens per step per request)", pr.TokensPerSPerRequest, pr.TokensPerS, pr.TokensPerStep)})
	}
	if pr.Spec != nil {
		kv = append(kv, [2]string{"speculative", pr.Spec.String()})
		if pr.SpecHostUs > 0 {
			kv = append(kv, [2]string{"host drafting", fmt.Sprintf("%.0f us a step, in the step time", pr.SpecHostUs)})
		}
		if pr.Spec.EngineFlag != "" {
			kv = append(kv, [2]string{"engine flag", pr.Spec.EngineFlag})
		}
	}
	kv = append(kv, [2]string{"communication", fmt.Sprintf("%.1f us, %.1f %% of the step", pr.CommUs, 100*pr.CommShareFrac)},
		[2]string{"critical path", criticalPathString(pr)})
	if m := pr.Memory; m != nil {
		kv = append(kv, [2]string{"memory per GPU", fmt.Sprintf("weights %.1f GB + activations %.1f GB + KV %.2f GB (%d tokens x %.0f B) of %.1f GB usable at %s; KV capacity %d tokens",
			gb(m.WeightBytes), gb(m.ActivationBytes), gb(m.KVBytes), m.KVTokensNeeded, m.KVBytesPerToken, gb(m.UsableBytes), kvBudgetText(m.Budget), m.KVCapacityTokens)})
		// The pool priced without the engine's CUDA-graph estimate is
		// said where the pool is, not as a guess priced as known.
		if c := m.Budget.GraphCaveat(); c != "" {
			kv = append(kv, [2]string{"caveat", c})
		}
	}
	for _, c := range pr.Caveats {
		kv = append(kv, [2]string{"caveat", c})
	}
	if md {
		for i := range kv {
			kv[i][1] = mdCell(kv[i][1])
		}
	}
	if err := writeKV(w, md, kv); err != nil {
		return err
	}
	section := func(title string, rows []sim.Share, n int) error {
		var cells [][]string
		for i, r := range rows {
			if n > 0 && i >= n {
				break
			}
			cells = append(cells, []string{r.Name, fmt.Sprintf("%.1f", r.Us), fmt.Sprintf("%.1f %%", 100*r.ShareFrac), fmt.Sprint(r.Count)})
		}
		return writeTable(w, title, "", []string{"name", "us", "share", "count"}, cells, md)
	}
	for _, sec := range []struct {
		title string
		rows  []sim.Share
		n     int
	}{{"time by op kind (rank 0)", pr.ByKind, 0}, {"time by block", pr.ByBlock, 0}, {"time by op name, all layers", pr.ByName, top}} {
		if err := section(sec.title, sec.rows, sec.n); err != nil {
			return err
		}
	}
	var cells [][]string
	for _, k := range pr.TopOps {
		op := &pr.Ops[k]
		d := costDetail(op)
		if md {
			d = mdCell(d)
		}
		cells = append(cells, []string{op.ID, fmt.Sprintf("%.1f", op.Us), op.Bound.String(), d})
	}
	return writeTable(w, "longest ops", "", []string{"id", "us", "bound", "detail"}, cells, md)
}

// pricedBy is what priced a prediction's step: the engine profile and its
// kernels, the MoE routing the schedule was built under, and the measured
// tables consulted before the priors with the ops they priced (the
// Prediction's Engine, MoERouting, CostSource and MeasuredOps). predict
// says it of its step; simulate and plan, which price many steps, say it
// of the one step they name (Step).
type pricedBy struct {
	Engine      string        `json:"engine,omitempty"`
	MoERouting  model.Routing `json:"moe_routing,omitzero"`
	CostSource  string        `json:"cost_source,omitempty"`
	MeasuredOps int           `json:"measured_ops,omitempty"`
	Ops         int           `json:"ops"`
	// Step names the step the ops were counted on ("" for predict's
	// own), e.g. "a decode step at batch 1, context 4096".
	Step string `json:"step,omitempty"`
	// RoutingSplit is plan's: how its configurations split between the
	// tables' routing and uniform under --perf-db's default (nil
	// elsewhere); the moe routing line says so when they differ.
	RoutingSplit *routingSplit `json:"moe_routing_split,omitempty"`
}

func pricedByOf(pr *sim.Prediction, step string) *pricedBy {
	return &pricedBy{Engine: pr.Engine, MoERouting: pr.MoERouting, CostSource: pr.CostSource, MeasuredOps: pr.MeasuredOps,
		Ops: len(pr.Ops), Step: step}
}

// lines are predict's engine (keyed engineKey: simulate's "engine" is
// its scheduler), moe routing and costs lines.
func (p *pricedBy) lines(engineKey string) [][2]string {
	var kv [][2]string
	if p.Engine != "" {
		kv = append(kv, [2]string{engineKey, p.Engine})
	}
	switch r := p.RoutingSplit; {
	case r != nil && r.Tables > 0 && r.Uniform > 0:
		kv = append(kv, [2]string{"moe routing", fmt.Sprintf("%s where the tables' MoE rows price the routed experts (%d of %d configurations), uniform elsewhere",
			r.Routing, r.Tables, r.Tables+r.Uniform)})
	case !p.MoERouting.IsZero():
		kv = append(kv, [2]string{"moe routing", p.MoERouting.String()})
	}
	if p.CostSource != "" {
		of := ""
		if p.Step != "" {
			of = " of " + p.Step
		}
		kv = append(kv, [2]string{"costs", fmt.Sprintf("%s: %d of %d ops%s priced from its tables, the rest from the priors", p.CostSource, p.MeasuredOps, p.Ops, of)})
	}
	return kv
}

// writePredictCSV writes one row per op of the prediction (rank 0's when
// the prediction is symmetric, every rank's otherwise).
func writePredictCSV(w io.Writer, pr *sim.Prediction) error {
	rows := make([][]string, 0, len(pr.Ops))
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	for i := range pr.Ops {
		op := &pr.Ops[i]
		rows = append(rows, []string{strconv.Itoa(op.Rank), op.ID, string(op.Kind), op.Block, strconv.Itoa(op.Layer), f(op.StartUs), f(op.Us),
			f(op.OverheadUs), op.Bound.String(), f(op.FLOPs), f(op.Bytes), strconv.FormatInt(op.CommBytes, 10)})
	}
	return writeCSV(w, []string{"rank", "id", "kind", "block", "layer", "start_us", "us", "overhead_us", "bound", "flops", "bytes", "comm_bytes"}, rows)
}

// costDetail explains one op's cost in a line.
func costDetail(op *sim.OpResult) string {
	c := &op.Cost
	if c.Source != "" && c.Source != sim.SourcePrior {
		return fmt.Sprintf("measured: %s (prior %.1f us)", c.Source, c.PriorUs)
	}
	if op.Kind == model.KindCollective {
		return fmt.Sprintf("%d B, %s/%s, latency %.1f us + link %.1f us", op.CommBytes, c.Algo, c.Proto, c.LatencyUs, c.LinkUs)
	}
	d := fmt.Sprintf("%.3g FLOP, %.3g B; compute %.1f us (%s %.0f TF x eff %.2f x fill %.2f), memory %.1f us (%.0f GB/s, %.0f CTAs)",
		op.FLOPs, op.Bytes, c.ComputeUs, c.ComputeDtype, c.PeakTFLOPS, c.Efficiency, c.Fill, c.MemoryUs, c.MemGBps, c.CTAs)
	if c.RampUs > 0 {
		d += fmt.Sprintf(" + ramp %.1f us", c.RampUs)
	}
	if c.MergeUs > 0 {
		d += fmt.Sprintf(" + split merge %.1f us", c.MergeUs)
	}
	if c.ExtraKernels > 0 {
		d += fmt.Sprintf(" + %d companion kernels %.1f us", c.ExtraKernels, c.ExtraKernelsUs)
	}
	if c.SerialWalkUs > 0 {
		d += fmt.Sprintf(" + one-thread expert walk %.1f us", c.SerialWalkUs)
	}
	return d
}

// criticalPathString summarizes the critical path: its length and what
// released its ops (host launches, dependencies, collective peers).
func criticalPathString(pr *sim.Prediction) string {
	counts := map[sim.Wait]int{}
	for _, i := range pr.CriticalPath {
		counts[pr.Ops[i].WaitedOn]++
	}
	var parts []string
	for w := sim.Wait(0); int(w) < 5; w++ {
		if n := counts[w]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", w, n))
		}
	}
	return fmt.Sprintf("%d ops, released by: %s", len(pr.CriticalPath), strings.Join(parts, ", "))
}

// memoryFitError is the one-line error of a step whose weights, activations
// and KV cache do not fit the engine's pool on its GPUs (nil when they
// fit): every verb that prices one step of the flags' scenario refuses it,
// as the engine would not start.
func memoryFitError(scen sim.Scenario, pr *sim.Prediction) error {
	m := pr.Memory
	if m == nil || m.Fits {
		return nil
	}
	if err := m.Budget.NoPool(); err != nil {
		return fmt.Errorf("%s %s on %s: %w", scen.Arch.Name, scen.Plan.Normalized(), scen.Topo.Name, err)
	}
	return fmt.Errorf("%s %s on %s does not fit in GPU memory: short by %.1f GB per GPU (weights %.1f GB + activations %.1f GB + KV %.1f GB for %d tokens, usable %.1f GB of %.1f GB)",
		scen.Arch.Name, scen.Plan.Normalized(), scen.Topo.Name, m.ShortfallGB, gb(m.WeightBytes), gb(m.ActivationBytes), gb(m.KVBytes), m.KVTokensNeeded, gb(m.UsableBytes), gb(m.DeviceBytes))
}
