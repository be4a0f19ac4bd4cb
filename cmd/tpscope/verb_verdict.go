package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/pipeline"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

var verdictVerb = &Verb{
	UsageLine: "verdict [flags]",
	Short:     "measure each optimization on the executor and set its gain beside the predicted one",
	Long: `For the scenario the flags give (the baseline), runs the schedule on the
backend, then, for every optimization of the catalog (and the plan entries:
decode context parallelism, DSA against dense attention) that the executor
can realize here, the same scenario with the optimization turned on (or,
when the baseline has it, turned off), each with the same seed, schedule
rules and warm-up, several measured steps each. Each row gives:

  pred box     the predicted tokens/s gain over the whole box (what advise
               ranks by), collectives included
  pred run     the predicted gain of what ran: a one-rank shard
               (--local-ranks 0 of a TP 8 plan on one GPU) skips the
               collectives, so their predicted time comes off both steps
  measured     the measured gain of the median steps, with its spread [the
               slowest decile against the fastest, and the reverse]
  err          predicted (as run) minus measured, percentage points
  pays         whether the gain reaches --threshold (5 %), predicted/measured;
               held: the two agree
  why          where the verdict did not hold: the ops whose change of time
               was mispredicted the most (an op ID without its layer), the
               predicted and the measured change per step

A row is inconclusive when the measured spread straddles the threshold:
the measurements then say neither that it pays nor that it does not (more
steps, or a quieter machine). Entries that change nothing where they run
say "not on this backend": the NCCL settings and one-shot all-reduce on
the CPU backend's goroutine ranks, CUDA graphs on a backend that runs
every step eagerly. Entries that change only collectives need the plan's
ranks on as many GPUs and say so in a one-rank shard; the "move to
another box" entries are not run. All-reduce + RMSNorm fusion runs the
fused kernel's local part (the norm on the reduced buffer); its reduction
waits for several GPUs. MTP's tokens per step count the acceptance
--mtp-accept (an input, as in advise).

Each run predicts and measures the executor's own kernels, as run does.
An entry that changes a setting NCCL keeps for the life of a process (the
protocol, the algorithm, the P2P level, P2P disable) runs in fresh
processes of this binary, so no run inherits another's NCCL settings.
--backend cpu needs --topo: the JSON 'tpscope calibrate --backend cpu'
writes (a GPU box, the default one included, is refused).

-o/--out DIR writes every run's trace (DIR/<run>.otlp.jsonl), for 'tpscope
compare' and Jaeger, and the report as DIR/verdict.json and DIR/verdict.md;
a DIR holding an earlier verdict's report or a trace (*.otlp.jsonl) is
refused before any run.
Ctrl-C stops the run in progress after its current op, prints the entries
that finished, writes the report (saying which run was cut; its trace is
kept as DIR/<run>.partial.otlp.jsonl) and exits with code 130.`,
	Example: `tpscope verdict --backend cuda --model kimi-k2.5 --tp 8 --local-ranks 0 --batch 32 --context 4096 --kv-dtype bf16 --topo h200-nvswitch --steps 10 -o verdict-traces`,
	New:     func() Options { return newVerdictOptions() },
}

// verdictOptions are verdict's flags.
type verdictOptions struct {
	boundFlags
	sc         *scenarioFlags
	backend    string
	entries    string // comma list; "" every entry
	steps      int
	warmup     int
	outDir     string // -o DIR
	output     string
	seed       int64
	threshold  float64
	mtpTokens  int
	localRanks []int
	scale      float64
}

func newVerdictOptions() *verdictOptions {
	return &verdictOptions{sc: newScenarioFlags(), backend: "cuda", steps: 10, warmup: 3, output: formatTable, seed: 1, threshold: 0.05, mtpTokens: 1, scale: 1}
}

func (o *verdictOptions) Bind(fs *pflag.FlagSet) {
	o.fs = fs
	o.sc.Bind(fs)
	o.sc.runsExecutor(fs)
	fs.StringVar(&o.backend, "backend", o.backend, "where to run: cuda or cpu")
	fs.StringVar(&o.entries, "entries", o.entries, "only these entries (comma list; default every entry)")
	fs.IntVar(&o.steps, "steps", o.steps, "measured steps per run")
	fs.IntVar(&o.warmup, "warmup", o.warmup, "warm-up steps per run before the measured ones")
	fs.StringVarP(&o.outDir, "out", "o", o.outDir, "write every run's trace to DIR/<run>.otlp.jsonl")
	fs.StringVar(&o.output, "output", o.output, "output format: table, json or markdown")
	fs.Int64Var(&o.seed, "seed", o.seed, "seed of weights, inputs and MoE routing, the same for every run")
	fs.Float64Var(&o.threshold, "threshold", o.threshold, "relative change of tokens/s at which an optimization pays")
	fs.IntVar(&o.mtpTokens, "mtp-tokens", o.mtpTokens, "speculative tokens of the MTP entry")
	fs.IntSliceVar(&o.localRanks, "local-ranks", o.localRanks, "ranks this process runs (default: all of the plan's ranks); --tp 8 --local-ranks 0 runs one rank's shard on one GPU")
	fs.Float64Var(&o.scale, "scale", o.scale, "divide the model's widths (and its drafter's) by this factor before building the schedule (cpu backend; >= 1)")
}

// interruptible: Run saves what it finished when ctx ends.
func (o *verdictOptions) interruptible() {}

func (o *verdictOptions) Run(ctx context.Context, args []string, std IO) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if err := checkOutput(o.output, formatTable, formatJSON, formatMarkdown); err != nil {
		return err
	}
	if o.steps < 1 || o.warmup < 0 {
		return flagError(fmt.Sprintf("--steps %d --warmup %d", o.steps, o.warmup), nil, "want steps >= 1 and warmup >= 0")
	}
	if o.threshold <= 0 || o.threshold >= 1 {
		return flagError("--threshold", o.threshold, "want a fraction in (0,1)")
	}
	if o.mtpTokens < 1 || o.mtpTokens > 16 {
		return flagError("--mtp-tokens", o.mtpTokens, "want 1 to 16")
	}
	if err := checkOutputDir("-o", o.outDir); err != nil {
		return err
	}
	if err := checkVerdictDir(o.outDir); err != nil {
		return err
	}
	if err := checkBackend(o.backend); err != nil {
		return err
	}
	if !(o.scale >= 1) || math.IsInf(o.scale, 0) {
		return flagError("--scale", o.scale, "want a finite factor >= 1")
	}
	if o.scale != 1 && o.backend != "cpu" {
		return flagError("--scale", o.scale, "only the cpu backend runs a scaled model (got --backend %s)", o.backend)
	}
	// --moe-dispatch and --dispatch-dtype price the DP-attention rows,
	// the acceptance flags the speculative ones.
	o.sc.variants = true
	base, err := o.sc.scenario()
	if err != nil {
		return err
	}
	if err := checkMeasuredBox("verdict", o.backend, o.given("topo", o.sc.topo != topology.DefaultPreset), false, base.Topo); err != nil {
		return err
	}
	if o.scale != 1 {
		if err := scaleScenario(&base, o.scale); err != nil {
			return causeError("--scale", nil, err)
		}
	}
	if base.Workload.KVDtype == "" {
		base.Workload.KVDtype = base.Workload.KVDtypeFor(base.Arch)
	}
	cat := append(advise.Catalog(advise.CatalogOptions{MTPTokens: o.mtpTokens, MTPAcceptFrac: base.Options.MTPAcceptFrac, SpecTokens: o.sc.rowSpecTokens()}), advise.PlanEntries()...)
	if o.entries != "" {
		if cat, err = filterEntries(cat, splitList(o.entries)); err != nil {
			return err
		}
	}
	if err := checkRowFlags(o.sc, o.mtpTokens, base, cat); err != nil {
		return err
	}
	sched, err := sim.BuildSchedule(base)
	if err != nil {
		var pe *model.PlanError
		if errors.As(err, &pe) {
			return planFlagError("", err)
		}
		return err
	}
	world := len(sched.Ranks)
	if err := checkLocalRanks(o.localRanks, world); err != nil {
		return err
	}
	// What the backend realizes is known before any run: a flag it would
	// drop (NCCL's settings on the cpu backend, CUDA graphs where steps
	// run eagerly) is refused before -o is made.
	b, err := exec.NewBackend(o.backend, pipeline.BackendConfig(base, o.seed))
	if err != nil {
		return err
	}
	if err := checkRealized(o.fs, o.backend, pipeline.CapabilitiesOf(b), o.sc.graphsFlag()); err != nil {
		return err
	}
	if o.outDir != "" {
		if err := mkdirOutput("-o", o.outDir); err != nil {
			return err
		}
	}
	// interrupt stops the verdict as Ctrl-C does (tests call it through
	// verdictProgress).
	ctx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	v := &verdictRunner{backend: o.backend, scale: o.scale, seed: o.seed, steps: o.steps, warmup: o.warmup,
		local: o.localRanks, outDir: o.outDir, stderr: std.Stderr, interrupt: interrupt,
		runner: pipeline.NewRunner(pipeline.WithStderr(std.Stderr), pipeline.WithSharedDevice(os.Getenv(pipeline.SharedDeviceEnv) == "1"))}
	rep, err := v.verdict(ctx, base, cat, world, 100*o.threshold)
	if err != nil {
		return err
	}
	if o.outDir != "" {
		if err := saveVerdict(o.outDir, rep); err != nil {
			return err
		}
	}
	if err := render(std.Stdout, o.output, view{
		JSON: rep,
		Text: func(w io.Writer, md bool) error { return writeVerdict(w, rep, md) },
	}); err != nil {
		return err
	}
	if in := rep.Interrupted; in != nil {
		done := 0
		for _, e := range rep.Entries {
			if e.Status != compare.VerdictInterrupted {
				done++
			}
		}
		return fmt.Errorf("%w during the %s run: %d of %d entries finished (report above)", errInterrupted, in.Run, done, len(cat))
	}
	return nil
}

// verdictEntry is one catalog entry's row.
type verdictEntry struct {
	Entry      string                `json:"entry"`
	Title      string                `json:"title"`
	Kind       string                `json:"kind"`
	Status     compare.VerdictStatus `json:"status"`
	Reason     string                `json:"reason,omitempty"`
	InBaseline bool                  `json:"in_baseline"`
	// Verdict: the run with the optimization against the run without it
	// (one of them the baseline).
	Verdict *compare.VerdictRow `json:"verdict,omitempty"`
}

// verdictReport is what verdict prints.
type verdictReport struct {
	Scenario     string             `json:"scenario"`
	Backend      string             `json:"backend"`
	Ranks        int                `json:"ranks"`
	LocalRanks   []int              `json:"local_ranks"`
	Shard        bool               `json:"shard"`
	Steps        int                `json:"steps"`
	Warmup       int                `json:"warmup"`
	ThresholdPct float64            `json:"threshold_pct"`
	Baseline     compare.RunStats   `json:"baseline"`
	Entries      []verdictEntry     `json:"entries"`
	Runs         []compare.RunStats `json:"runs"`
	// Caveats say where the predictions price other runs than these (a
	// CPU box measured with another number of ranks at once).
	Caveats []string `json:"caveats,omitempty"`
	// Interrupted says which run Ctrl-C cut and what was not run; nil
	// when every entry ran.
	Interrupted *verdictInterruption `json:"interrupted,omitempty"`
}

// verdictInterruption is where a verdict was cut.
type verdictInterruption struct {
	// Run is the label of the run that was cut: "baseline", an entry's
	// name or "without-" and its name.
	Run string `json:"run"`
	// Trace is that run's partial trace file ("" when it wrote none).
	Trace string `json:"partial_trace,omitempty"`
	// NotRun are the entries after it, which did not run.
	NotRun []string `json:"not_run,omitempty"`
}

// verdictProgress, when set (by tests), is called after every step of
// every run with the run's label, the steps done (warm-up included) and
// the function that interrupts the verdict as Ctrl-C does.
var verdictProgress func(label string, done int, interrupt func())

type verdictRunner struct {
	backend       string
	scale         float64 // the model's widths divided by it (--scale)
	seed          int64
	steps, warmup int
	local         []int
	outDir        string
	stderr        io.Writer
	// runner runs every run of the verdict, in this process or in fresh
	// ones where NCCL's per-process settings would leak (pipeline).
	runner *pipeline.Runner
	// interrupt stops the verdict as Ctrl-C does.
	interrupt func()
	// caps are the backend's capabilities, known once the baseline is
	// prepared.
	caps pipeline.Capabilities
	// baseRan is the baseline scenario as it ran (the report's head).
	baseRan string
}

// peersOnly reports entries whose whole effect is on collectives.
func peersOnly(e *advise.Entry) bool { return e.Kind == "nccl" || e.Name == "oneshot-ar" }

// verdict runs the baseline and every entry the executor can realize. An
// interruption (ctx cancelled) ends it with the report of what finished
// and rep.Interrupted set; the error is for failures only.
func (v *verdictRunner) verdict(ctx context.Context, base sim.Scenario, cat []advise.Entry, world int, thresholdPct float64) (*verdictReport, error) {
	local := v.local
	if len(local) == 0 {
		for r := 0; r < world; r++ {
			local = append(local, r)
		}
	}
	shard := len(local) < world
	rep := &verdictReport{Scenario: base.String(), Backend: v.backend, Ranks: world, LocalRanks: local, Shard: shard,
		Steps: v.steps, Warmup: v.warmup, ThresholdPct: thresholdPct}
	// The CPU box's rates are of its ranks sharing the cores: every run
	// here has len(local) ranks at once.
	if cv := base.Topo.CPURanksCaveat(len(local)); cv != "" {
		rep.Caveats = append(rep.Caveats, cv)
	}
	names := func(es []advise.Entry) []string {
		var n []string
		for i := range es {
			n = append(n, es[i].Name)
		}
		return n
	}
	baseRun, partial, err := v.run(ctx, "baseline", base)
	if err != nil {
		if ctx.Err() != nil {
			rep.Interrupted = &verdictInterruption{Run: "baseline", Trace: partial, NotRun: names(cat)}
			return rep, nil
		}
		var ue *usageError
		if errors.As(err, &ue) {
			return nil, err // a flag, said before anything ran
		}
		return nil, fmt.Errorf("baseline: %w", err)
	}
	rep.Baseline = baseRun.Stats()
	rep.Runs = append(rep.Runs, rep.Baseline)
	rep.Scenario = v.baseRan
	for i := range cat {
		e := &cat[i]
		// In the baseline as it ran: a backend that cannot capture runs
		// it eagerly (its head says "eager"), whatever --cuda-graphs.
		row := verdictEntry{Entry: e.Name, Title: e.Title, Kind: e.Kind, InBaseline: e.Enabled(baseRun.Scenario)}
		ap := e.Check(base)
		switch {
		case ap.Status == advise.NotApplicable:
			row.Status, row.Reason = compare.VerdictNotApplicable, ap.Reason
		case e.Kind == "box":
			row.Status, row.Reason = compare.VerdictAnotherBox, ap.Reason
		case peersOnly(e) && !v.caps.CollectiveSettings:
			row.Status, row.Reason = compare.VerdictNotOnBackend, fmt.Sprintf("changes only the collectives; the %s backend's collectives are its own, which neither NCCL's settings nor the choice of all-reduce reach", v.backend)
		case e.Name == "oneshot-ar":
			row.Status, row.Reason = compare.VerdictNotBuilt, "the executor's all-reduces are NCCL's: a one-shot P2P kernel is not built; "+ap.Reason
		case peersOnly(e) && shard:
			row.Status, row.Reason = compare.VerdictNeedsGPUs, fmt.Sprintf("changes only collectives, which a one-rank shard skips: run the plan's %d ranks on %d GPUs", world, world)
		case e.Name == "cuda-graphs" && !v.caps.Graphs:
			row.Status, row.Reason = compare.VerdictNotOnBackend, fmt.Sprintf("the %s backend runs every step eagerly: graphs change nothing it runs", v.backend)
		}
		if row.Status != 0 {
			rep.Entries = append(rep.Entries, row)
			continue
		}
		var other sim.Scenario
		label := e.Name
		if row.InBaseline {
			other, err = e.Revert(base)
			label = "without-" + e.Name
		} else {
			other, err = e.Apply(base)
		}
		var run *compare.VerdictRun
		if err == nil {
			run, partial, err = v.run(ctx, label, other)
		}
		if err != nil {
			if ctx.Err() != nil {
				row.Status, row.Reason = compare.VerdictInterrupted, "interrupted during its run"
				rep.Entries = append(rep.Entries, row)
				rep.Interrupted = &verdictInterruption{Run: label, Trace: partial, NotRun: names(cat[i+1:])}
				return rep, nil
			}
			row.Status, row.Reason = compare.VerdictError, err.Error()
			rep.Entries = append(rep.Entries, row)
			continue
		}
		if e.Name == "ar-norm-fusion" && shard {
			row.Reason = "the fused kernel's local part runs (residual add + RMSNorm of the reduced buffer); the reduction waits for several GPUs"
		}
		without, with := baseRun, run
		if row.InBaseline {
			without, with = run, baseRun
		}
		vr := compare.Verdict(without, with, thresholdPct)
		row.Status, row.Verdict = vr.Status, &vr
		if vr.Status == compare.VerdictInconclusive {
			row.Reason = strings.TrimPrefix(row.Reason+"; "+fmt.Sprintf("the measured spread %+.1f..%+.1f %% straddles the %.0f %% threshold: the steps say neither that it pays nor that it does not (more --steps, or a quieter machine)",
				vr.MeasuredLow.TokensPerSPct, vr.MeasuredHigh.TokensPerSPct, thresholdPct), "; ")
		}
		rep.Runs = append(rep.Runs, run.Stats())
		rep.Entries = append(rep.Entries, row)
	}
	return rep, nil
}

// run builds, predicts and runs one scenario through the pipeline. When
// the run is interrupted its trace file, if any, is renamed to
// <label>.partial.otlp.jsonl and returned with the error.
func (v *verdictRunner) run(ctx context.Context, label string, scen sim.Scenario) (*compare.VerdictRun, string, error) {
	dest := "none"
	if v.outDir != "" {
		dest = "file:" + filepath.Join(v.outDir, label+".otlp.jsonl")
	}
	p, err := pipeline.Prepare(pipeline.Spec{Scenario: scen, Backend: v.backend, Seed: v.seed, Steps: v.steps, Warmup: v.warmup,
		LocalRanks: v.local, Predict: true, Trace: dest, ScheduleScale: v.scale})
	if err != nil {
		return nil, "", prepareError(err)
	}
	if label == "baseline" {
		v.caps = p.Capabilities
	}
	ro := pipeline.RunOptions{}
	if hook := verdictProgress; hook != nil {
		ro.Progress = func(done, _ int) { hook(label, done, v.interrupt) }
	}
	// The scenario as it runs on this backend (eager where it cannot
	// capture graphs, the executor's kernels).
	fmt.Fprintf(v.stderr, "verdict: running %s (%s)\n", label, p.Scenario)
	if label == "baseline" {
		v.baseRan = p.Scenario.String()
	}
	res, runErr := v.runner.Run(ctx, p, ro)
	if runErr != nil {
		partial := ""
		if ctx.Err() != nil && res != nil && res.TracePath != "" {
			partial = markPartial(res.TracePath)
		}
		return nil, partial, runErr
	}
	run := res.Run
	rank := run.LocalRanks[0]
	opUs := make([]float64, len(p.Schedule.Ranks[rank]))
	col := make([]float64, len(run.OpUs))
	for i := range opUs {
		for s := range run.OpUs {
			col[s] = run.OpUs[s][0][i]
		}
		sort.Float64s(col)
		opUs[i] = col[len(col)/2]
	}
	return &compare.VerdictRun{Label: label, Scenario: p.Scenario, Prediction: p.Prediction, Schedule: p.Schedule, Rank: rank,
		StepUs: run.StepUs, OpUs: opUs, Trace: res.TracePath}, "", nil
}

// partialSuffix names the trace of a run Ctrl-C cut: its steps are the
// ones that finished, and the last step's spans may be incomplete.
const partialSuffix = ".partial.otlp.jsonl"

// markPartial renames an interrupted run's trace file to say it is
// partial and returns the new path ("" when there is no file).
func markPartial(path string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	to := strings.TrimSuffix(path, ".otlp.jsonl") + partialSuffix
	if err := os.Rename(path, to); err != nil {
		return path
	}
	return to
}

// checkVerdictDir refuses, before any run, an -o directory that holds an
// earlier verdict's files (its report or a run's trace): the new runs'
// traces and report would lie beside the old runs' traces of entries this
// verdict does not run, and 'compare --trace DIR/*.otlp.jsonl' would read
// the runs of two verdicts (two machine states, two builds) as one.
func checkVerdictDir(dir string) error {
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // a new directory (checkOutputDir checked its parent)
	}
	for _, e := range entries {
		if n := e.Name(); n == "verdict.json" || n == "verdict.md" || strings.HasSuffix(n, ".otlp.jsonl") {
			return flagError("-o", dir, "it holds %s of an earlier verdict or run, which would lie beside this verdict's traces as though of this one: want a new or empty directory", n)
		}
	}
	return nil
}

// saveVerdict writes the report beside the traces, as JSON and markdown.
func saveVerdict(dir string, rep *verdictReport) error {
	if err := writeJSONFile("--out", filepath.Join(dir, "verdict.json"), rep); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "verdict.md"))
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := writeVerdict(f, rep, true); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func pct(v float64) string { return fmt.Sprintf("%+.1f %%", v) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// whyCell names the mispredicted ops (two at most).
func whyCell(r *compare.VerdictRow) string {
	var parts []string
	for _, d := range r.Off {
		if len(parts) == 2 || math.Abs(d.OffUs) < 0.5 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s: predicted %+.0f us, measured %+.0f us", d.Op, d.PredictedUs, d.MeasuredUs))
	}
	return strings.Join(parts, "; ")
}

func writeVerdict(w io.Writer, rep *verdictReport, md bool) error {
	where := fmt.Sprintf("%d ranks", len(rep.LocalRanks))
	if rep.Shard {
		where = fmt.Sprintf("rank %v of %d: one rank's shard, collectives skipped", rep.LocalRanks, rep.Ranks)
	}
	head := fmt.Sprintf("%s on %s (%s), %d steps after %d warm-up each, pays at %.0f %% tokens/s",
		rep.Scenario, rep.Backend, where, rep.Steps, rep.Warmup, rep.ThresholdPct)
	b := rep.Baseline
	baseLine := fmt.Sprintf("baseline: measured %.1f us [%.1f..%.1f]; predicted %.1f us for the box, %.1f us as run (%d ops not run: %.1f us)",
		b.MedianUs, b.P10Us, b.P90Us, b.PredictedUs, b.AsRunUs, b.NotRunOps, b.NotRunUs)
	if in := rep.Interrupted; in != nil && in.Run == "baseline" {
		baseLine = "baseline: interrupted before it finished; no entry ran"
	}
	for i := range rep.Entries {
		if rep.Entries[i].Kind == "speculative" {
			baseLine += "\nspeculative entries: each step is measured (its verify pass, and the draft passes of a method that drafts on the device; no n-gram or suffix proposer runs on the host); the tokens a step yields are the acceptance's, an input (the executor's weights are random), as advise prices them"
			// Which acceptance each speculative run was priced at, as
			// its JSON records it (compare.SpecRunYield).
			var at []string
			for _, r := range rep.Runs {
				if y := r.Speculative; y != nil {
					at = append(at, fmt.Sprintf("%s at %.2f tokens per step per sequence from %s", r.Label, y.Acceptance.TokensPerStep, y.Acceptance.Source))
				}
			}
			if len(at) > 0 {
				baseLine += ": " + strings.Join(at, "; ")
			}
			break
		}
	}
	for _, cv := range rep.Caveats {
		baseLine += "\ncaveat: " + cv
	}
	if md {
		fmt.Fprintf(w, "## tpscope verdict\n\n%s\n\n%s\n\n", head, baseLine)
	} else {
		fmt.Fprintf(w, "%s\n%s\n", head, baseLine)
	}
	header := []string{"entry", "status", "pred box", "pred run", "measured [spread]", "err pts", "pays pred/meas", "held", "why / reason"}
	var rows [][]string
	for i := range rep.Entries {
		e := &rep.Entries[i]
		name := e.Entry
		if e.InBaseline {
			name += " (in baseline)"
		}
		r := e.Verdict
		if r == nil {
			rows = append(rows, []string{name, e.Status.String(), "-", "-", "-", "-", "-", "-", e.Reason})
			continue
		}
		why := e.Reason
		pays, held := yesNo(r.PredPays)+"/"+yesNo(r.MeasPays), yesNo(r.Held)
		switch {
		case r.Status == compare.VerdictInconclusive:
			// The measurements support neither answer.
			pays, held = yesNo(r.PredPays)+"/?", "-"
		case !r.Held:
			why = strings.TrimPrefix(why+"; "+whyCell(r), "; ")
		}
		rows = append(rows, []string{name, e.Status.String(), pct(r.PredictedBox.TokensPerSPct), pct(r.Predicted.TokensPerSPct),
			fmt.Sprintf("%s [%+.1f..%+.1f]", pct(r.Measured.TokensPerSPct), r.MeasuredLow.TokensPerSPct, r.MeasuredHigh.TokensPerSPct),
			fmt.Sprintf("%+.1f", r.ErrPts), pays, held, why})
	}
	if md {
		for _, r := range rows {
			for i := range r {
				r[i] = strings.ReplaceAll(r[i], "|", "/")
			}
		}
	}
	if err := writeRows(w, header, rows, md); err != nil {
		return err
	}
	if in := rep.Interrupted; in != nil {
		line := fmt.Sprintf("interrupted: the %s run was cut (Ctrl-C)", in.Run)
		if in.Trace != "" {
			line += "; its partial trace: " + in.Trace
		}
		if len(in.NotRun) > 0 {
			line += "; not run: " + strings.Join(in.NotRun, ", ")
		}
		if md {
			line = "\n**" + line + "**"
		}
		fmt.Fprintln(w, line)
	}
	return nil
}
