package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tpscope/tpscope/internal/units"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/exec/cuda"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/pipeline"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

var runVerb = &Verb{
	UsageLine: "run [flags]",
	Short:     "run a scenario's schedule on a backend (cpu or cuda), time every op, export the trace",
	Long: `Builds the schedule of the scenario (the same one predict uses), runs it on the
chosen backend with one goroutine per rank — warm-up steps first, then the
measured steps — and exports one OpenTelemetry trace per measured step: a
root span "step", a span per rank, a span per op named by its op ID with the
measured time, the host launch time and, when a topology is given, sim's
predicted time.

--backend cpu runs real arithmetic at the schedule's shapes on this machine
(gonum BLAS, absorbed MLA over a real latent cache, routed expert GEMMs,
shared-memory ring collectives checked against a serial sum). --scale F
shrinks the model's widths by F first (model.ScaleArch) for models too big for
the machine; the prediction is then made for the same scaled model.
--backend cuda runs on the local GPUs when the CUDA backend is built in.

--trace takes the destinations of the traces package: file:PATH (OTLP JSON
lines), otlp://HOST:4317, otlphttp://HOST:4318, none; empty uses the
OTEL_EXPORTER_OTLP_* variables. --compare (needs --topo: a preset, or for
the CPU backend the JSON written by 'tpscope calibrate --backend cpu', as
a GPU box is refused there) prints measured against predicted time per op
kind and for the step.
Ctrl-C stops after the current op, exports the spans of the finished steps,
prints their summary and exits with code 130.

--watchdog D bounds how long a rank waits for its peers (cpu: inside each
collective; cuda: a step with NCCL work, then the communicators are
aborted); the run then ends on every rank with an error naming the wait.
--fault-hang RANK:OP_ID tests that: rank RANK never issues the collective
OP_ID (from step --fault-step on, warm-up steps counted), so its peers
must give up; the run is expected to fail (exit 1) with the watchdog's
error, and the stalled rank itself gives up after 3 x the watchdog saying
that none fired.`,
	Example: `tpscope run --backend cpu --model tiny-mla-moe --tp 4 --batch 8 --context 512 --steps 20 --trace file:run.otlp.jsonl --topo cpu.json --compare`,
	New:     func() Options { return newRunOptions() },
}

// runOptions are run's flags.
type runOptions struct {
	boundFlags
	sc         *scenarioFlags
	backend    string
	steps      int
	warmup     int
	trace      string // span destination
	seed       int64
	scale      float64
	compare    bool
	output     string
	localRanks []int
	watchdog   time.Duration
	faultHang  string // RANK:OP_ID
	faultStep  int
}

func newRunOptions() *runOptions {
	return &runOptions{sc: newScenarioFlags(), backend: "cpu", steps: exec.DefaultSteps, warmup: exec.DefaultWarmup, seed: 1, scale: 1, output: formatTable}
}

func (o *runOptions) Bind(fs *pflag.FlagSet) {
	o.fs = fs
	o.sc.Bind(fs)
	o.sc.runsExecutor(fs)
	fs.StringVar(&o.backend, "backend", o.backend, "where to run: cpu or cuda")
	fs.IntVar(&o.steps, "steps", o.steps, "measured steps")
	fs.IntVar(&o.warmup, "warmup", o.warmup, "warm-up steps before the measured ones (no spans)")
	fs.StringVar(&o.trace, "trace", o.trace, "span destination: file:PATH (a file not there yet: a trace is never overwritten), otlp://HOST:PORT, otlphttp://HOST:PORT, none (empty: OTEL_EXPORTER_OTLP_* variables)")
	fs.Int64Var(&o.seed, "seed", o.seed, "seed of weights, inputs and MoE routing")
	fs.Float64Var(&o.scale, "scale", o.scale, "divide the model's widths by this factor before building the schedule (cpu backend; >= 1)")
	fs.BoolVar(&o.compare, "compare", o.compare, "print measured vs predicted time per op kind (needs --topo)")
	bindOutputFlag(fs, &o.output, "one row per op kind", allFormats...)
	fs.IntSliceVar(&o.localRanks, "local-ranks", o.localRanks, "ranks this process runs (default: all of the plan's ranks); e.g. --tp 8 --local-ranks 0 runs one rank's shard on one GPU, its collectives skipped and marked on the spans")
	fs.DurationVar(&o.watchdog, "watchdog", o.watchdog, "how long a rank waits for its peers before the run ends with an error (0: the backend's default, 5m)")
	fs.StringVar(&o.faultHang, "fault-hang", o.faultHang, "RANK:OP_ID: inject a fault: that rank never issues that collective, to check that the watchdog ends every rank (the run then fails)")
	fs.IntVar(&o.faultStep, "fault-step", o.faultStep, "with --fault-hang: the first step (warm-up included, from 0) in which the rank stalls")
}

// interruptible: Run saves what it finished when ctx ends.
func (o *runOptions) interruptible() {}

func (o *runOptions) Run(ctx context.Context, args []string, std IO) error {
	stdout, stderr := std.Stdout, std.Stderr
	if err := noArgs(args); err != nil {
		return err
	}
	if err := checkOutput(o.output, allFormats...); err != nil {
		return err
	}
	if o.steps < 1 || o.warmup < 0 {
		return flagError(fmt.Sprintf("--steps %d --warmup %d", o.steps, o.warmup), nil, "want steps >= 1 and warmup >= 0")
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
	if err := traces.CheckDestination(o.trace); err != nil {
		return causeError("--trace", nil, err)
	}
	if path, ok := strings.CutPrefix(o.trace, "file:"); ok {
		if err := checkOutputFile("--trace", path); err != nil {
			return err
		}
		if err := checkNotScenarioInput("--trace", path, o.sc.inputFiles()...); err != nil {
			return err
		}
		if err := traces.CheckNew(o.trace); err != nil {
			return causeError("--trace", nil, err)
		}
	}
	if o.watchdog < 0 {
		return flagError("--watchdog", o.watchdog, "want > 0, or 0 for the backend's default")
	}
	if o.changed("fault-step") && o.faultHang == "" {
		return flagError("--fault-step", nil, "needs --fault-hang")
	}
	withTopo := o.given("topo", o.sc.topo != topology.DefaultPreset)
	scen, err := o.sc.scenario()
	if err != nil {
		return err
	}
	if o.compare {
		if err := checkMeasuredBox("--compare", o.backend, withTopo, true, scen.Topo); err != nil {
			return err
		}
	}
	if o.scale != 1 {
		if err = scaleScenario(&scen, o.scale); err != nil {
			return causeError("--scale", nil, err)
		}
	}
	if err := checkLocalRanks(o.localRanks, scen.Plan.World()); err != nil {
		return err
	}
	// One path to a measurement (pipeline): the backend is told what the
	// scenario asks (NCCL settings, all-reduce + RMSNorm fusion), and the
	// prediction prices what runs.
	p, err := pipeline.Prepare(pipeline.Spec{Scenario: scen, Backend: o.backend, Seed: o.seed,
		Steps: o.steps, Warmup: o.warmup, LocalRanks: o.localRanks, Watchdog: o.watchdog,
		ScheduleScale: o.scale, Predict: withTopo, Trace: o.trace})
	if err != nil {
		return prepareError(err)
	}
	if err := checkRealized(o.fs, o.backend, p.Capabilities, o.sc.graphsFlag()); err != nil {
		return err
	}
	scen, sched, pred := p.Scenario, p.Schedule, p.Prediction

	var fault *exec.Fault
	if o.faultHang != "" {
		if fault, err = parseFault(o.faultHang, o.faultStep, o.watchdog, sched, o.localRanks); err != nil {
			return err
		}
		if total := o.warmup + o.steps; fault.Step >= total {
			return flagError("--fault-step", fault.Step, "the run has %d steps (--warmup + --steps), so the fault would never fire", total)
		}
	}
	if err := checkRunMemory(p.Backend, scen, sched, o.localRanks); err != nil {
		return err
	}

	ro := pipeline.RunOptions{Fault: fault}
	if fault != nil {
		fmt.Fprintf(stderr, "tpscope run: injected fault: %s; expecting the watchdog to end the run\n", fault)
	}
	var bar *progressbar.ProgressBar
	if isTerminal(stderr) {
		bar = progressbar.NewOptions(o.warmup+o.steps, progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("run "+o.backend), progressbar.OptionClearOnFinish())
		ro.Progress = func(done, total int) { _ = bar.Set(done) }
	}

	out, runErr := pipeline.NewRunner(pipeline.WithStderr(stderr), pipeline.WithSharedDevice(os.Getenv(pipeline.SharedDeviceEnv) == "1")).Run(ctx, p, ro)
	if bar != nil {
		_ = bar.Finish()
	}
	var te *pipeline.TraceSetupError
	if errors.As(runErr, &te) {
		return fmt.Errorf("--trace %s: %w", te.Dest, te.Err)
	}
	var res *exec.Result
	var stats traces.ExportStats
	if out != nil {
		res, stats = out.Run, out.Trace
	}
	interrupted := ctx.Err() != nil
	if runErr != nil && !(interrupted && res != nil) {
		if res != nil && res.Steps > 0 {
			fmt.Fprintf(stderr, "tpscope run: %d of %d measured steps finished before the error; %s\n", res.Steps, o.steps, stats)
		}
		return runErr
	}
	var cmp *compare.RunComparison
	if o.compare && res.Steps > 0 {
		c := compare.Run(res, sched, pred)
		// The CPU box's rates are of its ranks sharing the cores: a run
		// of another count of ranks at once is priced at their speed.
		if cv := scen.Topo.CPURanksCaveat(len(res.LocalRanks)); cv != "" {
			c.Caveats = append(c.Caveats, cv)
		}
		cmp = &c
	}
	if res.Steps > 0 {
		if err := writeRun(stdout, o.output, scen, res, sched, cmp, stats); err != nil {
			return err
		}
	}
	switch {
	case interrupted:
		return interruptedError(res.Steps, o.steps, stats)
	case stats.Lost > 0 || stats.FallbackSpans > 0:
		return fmt.Errorf("trace export failed: %s", stats)
	}
	return nil
}

// interruptedError is run's error when Ctrl-C cut it after done of steps
// measured steps: the summary of those is printed above it, where there
// are any; cut before the first finished, there is none to point to.
func interruptedError(done, steps int, stats traces.ExportStats) error {
	if done == 0 {
		return fmt.Errorf("%w before the first of %d measured steps finished: nothing measured to summarize (%s)", errInterrupted, steps, stats)
	}
	return fmt.Errorf("%w after %d of %d measured steps (summary above, spans of finished steps exported: %s)", errInterrupted, done, steps, stats)
}

// checkRunMemory refuses, before anything is allocated, a run whose
// backend says it needs more memory than is free, naming both figures and
// the ways out: a --scale that fits (the model's widths divided: weights
// shrink by about its square), one rank's shard, a smaller model (not
// when the smallest, smallModel, already runs: then a smaller batch or
// context, whose KV cache is what is left to shrink).
func checkRunMemory(b exec.Backend, sc sim.Scenario, sched *model.Schedule, local []int) error {
	me, ok := b.(exec.MemoryEstimator)
	if !ok {
		return nil
	}
	est, err := me.EstimateMemory(sched, local)
	if err != nil || est.NeedBytes <= est.FreeBytes {
		return err
	}
	ranks := len(local)
	if ranks == 0 {
		ranks = len(sched.Ranks)
	}
	var ways []string
	// A scaled model scales again by f (model.ScaleArch): the flag to
	// give is the product.
	given := max(1, sc.Arch.Ref.Scale)
	for f := 2.0; f <= 1024; f *= 2 {
		s := sc
		if err := scaleScenario(&s, f); err != nil {
			break
		}
		ss, err := sim.BuildSchedule(s)
		if err != nil {
			break
		}
		if e, err := me.EstimateMemory(ss, local); err == nil && e.NeedBytes <= est.FreeBytes*8/10 {
			ways = append(ways, fmt.Sprintf("--scale %g (about %s)", f*given, units.Bytes(float64(e.NeedBytes))))
			break
		}
	}
	if ranks > 1 {
		ways = append(ways, "one rank's shard (--local-ranks 0)")
	}
	if sc.Arch.Ref.Name != smallModel {
		ways = append(ways, "a smaller model (--model "+smallModel+")")
	} else {
		ways = append(ways, "a smaller step (--batch or --context)")
	}
	return usageErrorf("the %s backend would allocate at least %s of %s for %s %s (%d ranks here); %s available: run %s",
		b.Name(), units.Bytes(float64(est.NeedBytes)), est.Where, sc.Arch.Name, sched.Plan, ranks, units.Bytes(float64(est.FreeBytes)), orList(ways))
}

// smallModel is the smallest preset, tpscope's own model with
// DeepSeek-V3's structure, which any machine runs.
const smallModel = "tiny-mla-moe"

// orList joins alternatives as a sentence does: "a", "a or b", "a, b,
// or c".
func orList(items []string) string {
	switch n := len(items); {
	case n == 2:
		return items[0] + " or " + items[1]
	case n > 2:
		return strings.Join(items[:n-1], ", ") + ", or " + items[n-1]
	}
	return strings.Join(items, "")
}

// writeRun prints the run's summary (and comparison) in the output format.
func writeRun(w io.Writer, format string, scen sim.Scenario, res *exec.Result, sched *model.Schedule, cmp *compare.RunComparison, stats traces.ExportStats) error {
	return render(w, format, view{
		JSON: struct {
			Scenario    sim.Scenario           `json:"scenario"`
			Result      *exec.Result           `json:"result"`
			Comparison  *compare.RunComparison `json:"comparison,omitempty"`
			Speculative *compare.SpecRunYield  `json:"speculative,omitempty"`
			Trace       string                 `json:"trace"`
		}{scen, res, cmp, compare.NewSpecRunYield(scen, res.Summary.StepMedianUs), stats.String()},
		CSV: func(w io.Writer) error { return writeCSV(w, runKindHeader(cmp), runKindRows(res, cmp)) },
		Text: func(w io.Writer, md bool) error {
			writeRunSummary(w, res, sched, cmp, md)
			writeRunSpec(w, scen, res)
			_, err := fmt.Fprintf(w, "trace: %s\n", stats)
			return err
		},
	})
}

// isTerminal reports whether w is a character device (progress bars only
// go to a terminal, not to logs).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func writeRunSummary(w io.Writer, res *exec.Result, s *model.Schedule, cmp *compare.RunComparison, md bool) {
	sm := res.Summary
	mode := res.Timing
	if res.Graphs {
		mode += ", cuda graphs"
	}
	fmt.Fprintf(w, "%s %s %s on %s: %d ranks, %d measured steps after %d warm-up (%s)\n",
		s.Model, s.Plan, s.Workload, res.Backend, len(res.LocalRanks), res.Steps, res.Warmup, mode)
	fmt.Fprintf(w, "step time  median %.1f us   p10 %.1f us   p90 %.1f us   (min %.1f, max %.1f)\n",
		sm.StepMedianUs, sm.StepP10Us, sm.StepP90Us, sm.StepMinUs, sm.StepMaxUs)
	if wl := s.Workload; wl.Phase != model.Prefill && wl.SpecTokens > 0 {
		// A speculative step verifies each sequence's drafts and the
		// token after them; what it yields is the acceptance's
		// (writeRunSpec), not this.
		fmt.Fprintf(w, "throughput %.0f tokens/s verified (%.0f tokens per step: 1 + %d drafted per sequence; the tokens yielded are on the speculative line)\n",
			sm.TokensPerS, sm.TokensPerStep, wl.SpecTokens)
	} else {
		fmt.Fprintf(w, "throughput %.0f tokens/s (%.0f tokens per step)\n", sm.TokensPerS, sm.TokensPerStep)
	}
	if cmp != nil {
		fmt.Fprintf(w, "predicted  %.1f us per step (%+.1f %% vs measured median)\n", cmp.PredictedStepUs, cmp.StepErrPct)
		for _, cv := range cmp.Caveats {
			fmt.Fprintf(w, "caveat     %s\n", cv)
		}
	}
	_ = writeTable(w, "time per op kind and step", "", runKindHeader(cmp), runKindRows(res, cmp), md)
	if cmp != nil && len(cmp.Unpredicted) > 0 {
		fmt.Fprintf(w, "no prediction for %d op IDs: %s\n", len(cmp.Unpredicted), strings.Join(cmp.Unpredicted[:min(5, len(cmp.Unpredicted))], ", "))
	}
}

func runKindHeader(cmp *compare.RunComparison) []string {
	if cmp == nil {
		return []string{"kind", "ops/rank", "us/step", "share"}
	}
	return []string{"kind", "ops/rank", "measured us", "predicted us", "error"}
}

// runKindRows is the per-kind table of a run (measured against predicted
// when cmp is set).
func runKindRows(res *exec.Result, cmp *compare.RunComparison) [][]string {
	sm := res.Summary
	var rows [][]string
	if cmp == nil {
		for _, k := range sm.ByKind {
			rows = append(rows, []string{string(k.Kind), strconv.Itoa(k.Ops), fmt.Sprintf("%.1f", k.Us), fmt.Sprintf("%.1f %%", 100*k.ShareFrac)})
		}
		return rows
	}
	ops := map[model.OpKind]int{}
	for _, k := range sm.ByKind {
		ops[k.Kind] = k.Ops
	}
	for _, k := range cmp.ByKind {
		if k.NotRun > 0 && k.MeasuredUs == 0 {
			rows = append(rows, []string{string(k.Kind), strconv.Itoa(ops[k.Kind]), "-", fmt.Sprintf("%.1f", k.PredictedUs),
				fmt.Sprintf("not run (%d skipped per rank; left out of the predicted step)", k.NotRun)})
			continue
		}
		rows = append(rows, []string{string(k.Kind), strconv.Itoa(ops[k.Kind]), fmt.Sprintf("%.1f", k.MeasuredUs), fmt.Sprintf("%.1f", k.PredictedUs), fmt.Sprintf("%+.1f %%", k.ErrPct)})
	}
	return rows
}

// defaultWatchdog is the longer of the backends' own watchdogs (used when
// --watchdog is 0).
var defaultWatchdog = max(cpu.DefaultWatchdog, cuda.DefaultWatchdog)

// faultHoldFactor: a stalled rank (--fault-hang) gives up this many
// watchdog periods after it stalled, so a run whose watchdog never fires
// still ends, saying so.
const faultHoldFactor = 3

// parseFault reads --fault-hang RANK:OP_ID and checks it against the
// schedule, before any work.
func parseFault(v string, step int, watchdog time.Duration, sched *model.Schedule, local []int) (*exec.Fault, error) {
	rs, id, ok := strings.Cut(v, ":")
	rank, err := strconv.Atoi(rs)
	if !ok || err != nil || id == "" {
		return nil, flagError("--fault-hang", quote(v), "want RANK:OP_ID, e.g. 1:L03.attn.allreduce")
	}
	if step < 0 {
		return nil, flagError("--fault-step", step, "want 0 or more")
	}
	if watchdog == 0 {
		watchdog = defaultWatchdog
	}
	f := &exec.Fault{Rank: rank, OpID: id, Step: step, Hold: faultHoldFactor * watchdog}
	if err := f.Check(sched, local); err != nil {
		var fe *exec.FaultError
		if errors.As(err, &fe) {
			return nil, &usageError{Flag: "--fault-hang", Value: v, Want: fe.Msg, Err: err}
		}
		return nil, causeError("--fault-hang", v, err)
	}
	return f, nil
}

// writeRunSpec says, for a speculative run, what was measured and what
// was not (compare.SpecRunYield).
func writeRunSpec(w io.Writer, scen sim.Scenario, res *exec.Result) {
	r := compare.NewSpecRunYield(scen, res.Summary.StepMedianUs)
	if r == nil {
		return
	}
	fmt.Fprintf(w, "speculative %s: %s, %.2f tokens per step per sequence from %s: %.1f tokens/s per request, %.1f in all\n",
		r.Spec, r.Measured, r.Acceptance.TokensPerStep, r.Acceptance.Source, r.TokensPerSPerRequest, r.TokensPerS)
}

// prepareError names the flag behind a run the pipeline cannot prepare: a
// plan the model cannot take, or a box of another GPU than the one the
// backend runs on (--topo).
func prepareError(err error) error {
	var pe *model.PlanError
	if errors.As(err, &pe) {
		return planFlagError("", err)
	}
	var ge *pipeline.GPUMismatchError
	if errors.As(err, &ge) {
		return flagError("--topo", ge.Topology, "its GPUs are %s, and this run's GPU is %s: pass a box of that GPU (tpscope topo discover -o box.json describes this machine)", ge.BoxGPU, ge.RunGPU)
	}
	return err
}

// checkLocalRanks refuses, before any work, a --local-ranks that is not
// some of the plan's world ranks in ascending order, each once: exec runs
// them in that order (the k-th local rank on the k-th device), and a
// rank given twice would be two goroutines of one rank.
func checkLocalRanks(local []int, world int) error {
	for i, r := range local {
		if r < 0 || r >= world {
			return flagError("--local-ranks", fmt.Sprint(local), "rank %d is not one of the plan's %d ranks", r, world)
		}
		if i > 0 && r <= local[i-1] {
			return flagError("--local-ranks", fmt.Sprint(local), "rank %d after rank %d: want the ranks in ascending order, each once", r, local[i-1])
		}
	}
	return nil
}

// checkBackend refuses a --backend that this build has not registered,
// before any work, naming the ones it has (exec.Backends).
func checkBackend(name string) error {
	if !slices.Contains(exec.Backends(), name) {
		return flagError("--backend", quote(name), "want one of %s (the backends of this build)", strings.Join(exec.Backends(), ", "))
	}
	return nil
}
