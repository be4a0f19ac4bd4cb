package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tpscope/tpscope/internal/units"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/exec/cuda"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/pipeline"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
)

func init() {
	register(&Verb{
		Name:  "run",
		Short: "run a scenario's schedule on a backend (cpu or cuda), time every op, export the trace",
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
the CPU backend the JSON written by 'tpscope calibrate --backend cpu')
prints measured against predicted time per op kind and for the step.
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
		Flags: func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error {
			sc := addScenarioFlags(fs)
			backend := fs.String("backend", "cpu", "where to run: cpu or cuda")
			steps := fs.Int("steps", exec.DefaultSteps, "measured steps")
			warmup := fs.Int("warmup", exec.DefaultWarmup, "warm-up steps before the measured ones (no spans)")
			trace := fs.String("trace", "", "span destination: file:PATH, otlp://HOST:PORT, otlphttp://HOST:PORT, none (empty: OTEL_EXPORTER_OTLP_* variables)")
			seed := fs.Int64("seed", 1, "seed of weights, inputs and MoE routing")
			scale := fs.Float64("scale", 1, "divide the model's widths by this factor before building the schedule (cpu backend; >= 1)")
			compare := fs.Bool("compare", false, "print measured vs predicted time per op kind (needs --topo)")
			output := addOutputFlag(fs, "one row per op kind", allFormats...)
			localRanks := fs.IntSlice("local-ranks", nil, "ranks this process runs (default: all of the plan's ranks); e.g. --tp 8 --local-ranks 0 runs one rank's shard on one GPU, its collectives skipped and marked on the spans")
			watchdog := fs.Duration("watchdog", 0, "how long a rank waits for its peers before the run ends with an error (0: the backend's default, 5m)")
			faultHang := fs.String("fault-hang", "", "RANK:OP_ID: inject a fault: that rank never issues that collective, to check that the watchdog ends every rank (the run then fails)")
			faultStep := fs.Int("fault-step", 0, "with --fault-hang: the first step (warm-up included, from 0) in which the rank stalls")
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("unexpected arguments %q", args)
				}
				if err := checkOutput(*output, allFormats...); err != nil {
					return err
				}
				if *steps < 1 || *warmup < 0 {
					return usageErrorf("--steps %d --warmup %d: want steps >= 1 and warmup >= 0", *steps, *warmup)
				}
				if !(*scale >= 1) || math.IsInf(*scale, 0) {
					return usageErrorf("--scale %v: want a finite factor >= 1", *scale)
				}
				if *scale != 1 && *backend != "cpu" {
					return usageErrorf("--scale is for the cpu backend (got --backend %s)", *backend)
				}
				if err := traces.CheckDestination(*trace); err != nil {
					return usageErrorf("--trace: %v", err)
				}
				if *watchdog < 0 {
					return usageErrorf("--watchdog %v: want > 0, or 0 for the backend's default", *watchdog)
				}
				if fs.Changed("fault-step") && *faultHang == "" {
					return usageErrorf("--fault-step needs --fault-hang")
				}
				withTopo := fs.Changed("topo")
				if *compare {
					if err := checkMeasuredBox("--compare", *backend, withTopo, true); err != nil {
						return err
					}
				}
				scen, err := sc.scenario()
				if err != nil {
					return err
				}
				if *scale != 1 {
					if scen.Arch, err = model.ScaleArch(scen.Arch, *scale); err != nil {
						return usageErrorf("--scale: %v", err)
					}
				}
				// One path to a measurement (pipeline): the backend is told
				// what the scenario asks (NCCL settings, all-reduce + RMSNorm
				// fusion), and the prediction prices what runs.
				p, err := pipeline.Prepare(pipeline.Spec{Scenario: scen, Backend: *backend, Seed: *seed,
					Steps: *steps, Warmup: *warmup, LocalRanks: *localRanks, Watchdog: *watchdog,
					ScheduleScale: *scale, Predict: withTopo, Trace: *trace})
				if err != nil {
					var pe *model.PlanError
					if errors.As(err, &pe) {
						return usageErrorf("%v", flagWords(err))
					}
					return err
				}
				scen, sched, pred := p.Scenario, p.Schedule, p.Prediction

				for _, r := range *localRanks {
					if r < 0 || r >= len(sched.Ranks) {
						return usageErrorf("--local-ranks %v: rank %d is not one of the plan's %d ranks", *localRanks, r, len(sched.Ranks))
					}
				}
				var fault *exec.Fault
				if *faultHang != "" {
					if fault, err = parseFault(*faultHang, *faultStep, *watchdog, sched, *localRanks); err != nil {
						return err
					}
					if total := *warmup + *steps; fault.Step >= total {
						return usageErrorf("--fault-step %d: the run has %d steps (--warmup + --steps), so the fault would never fire", fault.Step, total)
					}
				}
				if err := checkRunMemory(p.Backend, scen, sched, *localRanks); err != nil {
					return err
				}

				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				ro := pipeline.RunOptions{Fault: fault}
				if fault != nil {
					fmt.Fprintf(stderr, "tpscope run: injected fault: %s; expecting the watchdog to end the run\n", fault)
				}
				var bar *progressbar.ProgressBar
				if isTerminal(stderr) {
					bar = progressbar.NewOptions(*warmup+*steps, progressbar.OptionSetWriter(stderr),
						progressbar.OptionSetDescription("run "+*backend), progressbar.OptionClearOnFinish())
					ro.Progress = func(done, total int) { _ = bar.Set(done) }
				}

				out, runErr := pipeline.NewRunner(pipeline.WithStderr(stderr)).Run(ctx, p, ro)
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
						fmt.Fprintf(stderr, "tpscope run: %d of %d measured steps finished before the error; %s\n", res.Steps, *steps, stats)
					}
					return runErr
				}
				var cmp *exec.Comparison
				if *compare && res.Steps > 0 {
					c := res.Compare(sched, p.PredictedUs, pred.StepUs)
					cmp = &c
				}
				if res.Steps > 0 {
					if err := writeRun(stdout, *output, scen, res, sched, cmp, stats); err != nil {
						return err
					}
				}
				switch {
				case interrupted:
					return fmt.Errorf("%w after %d of %d measured steps (summary above, spans of finished steps exported: %s)", errInterrupted, res.Steps, *steps, stats)
				case stats.Lost > 0 || stats.FallbackSpans > 0:
					return fmt.Errorf("trace export failed: %s", stats)
				}
				return nil
			}
		},
	})
}

// checkRunMemory refuses, before anything is allocated, a run whose
// backend says it needs more memory than is free, naming both figures and
// the ways out: a --scale that fits (the model's widths divided: weights
// shrink by about its square), one rank's shard, a smaller model.
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
	way := ""
	for f := 2.0; f <= 1024; f *= 2 {
		a, err := model.ScaleArch(sc.Arch, f)
		if err != nil {
			break
		}
		s := sc
		s.Arch = a
		ss, err := sim.BuildSchedule(s)
		if err != nil {
			break
		}
		if e, err := me.EstimateMemory(ss, local); err == nil && e.NeedBytes <= est.FreeBytes*8/10 {
			way = fmt.Sprintf("--scale %g (about %s), ", f, units.Bytes(float64(e.NeedBytes)))
			break
		}
	}
	if ranks > 1 {
		way += "one rank's shard (--local-ranks 0), "
	}
	return usageErrorf("the %s backend would allocate at least %s of %s for %s %s (%d ranks here); %s available: run %sor a smaller model (--model tiny-mla-moe)",
		b.Name(), units.Bytes(float64(est.NeedBytes)), est.Where, sc.Arch.Name, sched.Plan, ranks, units.Bytes(float64(est.FreeBytes)), way)
}

// writeRun prints the run's summary (and comparison) in the output format.
func writeRun(w io.Writer, format string, scen sim.Scenario, res *exec.Result, sched *model.Schedule, cmp *exec.Comparison, stats traces.ExportStats) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(struct {
			Scenario   sim.Scenario     `json:"scenario"`
			Result     *exec.Result     `json:"result"`
			Comparison *exec.Comparison `json:"comparison,omitempty"`
			Trace      string           `json:"trace"`
		}{scen, res, cmp, stats.String()})
	}
	if format == formatCSV {
		return writeCSV(w, runKindHeader(cmp), runKindRows(res, cmp))
	}
	md := format == formatMarkdown
	writeRunSummary(w, res, sched, cmp, md)
	fmt.Fprintf(w, "trace: %s\n", stats)
	return nil
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

func writeRunSummary(w io.Writer, res *exec.Result, s *model.Schedule, cmp *exec.Comparison, md bool) {
	sm := res.Summary
	mode := res.Timing
	if res.Graphs {
		mode += ", cuda graphs"
	}
	fmt.Fprintf(w, "%s %s %s on %s: %d ranks, %d measured steps after %d warm-up (%s)\n",
		s.Model, s.Plan, s.Workload, res.Backend, len(res.LocalRanks), res.Steps, res.Warmup, mode)
	fmt.Fprintf(w, "step time  median %.1f us   p10 %.1f us   p90 %.1f us   (min %.1f, max %.1f)\n",
		sm.StepMedianUs, sm.StepP10Us, sm.StepP90Us, sm.StepMinUs, sm.StepMaxUs)
	fmt.Fprintf(w, "throughput %.0f tokens/s (%.0f tokens per step)\n", sm.TokensPerS, sm.TokensPerStep)
	if cmp != nil {
		fmt.Fprintf(w, "predicted  %.1f us per step (%+.1f %% vs measured median)\n", cmp.PredictedStepUs, cmp.StepErrPct)
	}
	_ = writeTable(w, "time per op kind and step", "", runKindHeader(cmp), runKindRows(res, cmp), md)
	if cmp != nil && len(cmp.Unpredicted) > 0 {
		fmt.Fprintf(w, "no prediction for %d op IDs: %s\n", len(cmp.Unpredicted), strings.Join(cmp.Unpredicted[:min(5, len(cmp.Unpredicted))], ", "))
	}
}

func runKindHeader(cmp *exec.Comparison) []string {
	if cmp == nil {
		return []string{"kind", "ops/rank", "us/step", "share"}
	}
	return []string{"kind", "ops/rank", "measured us", "predicted us", "error"}
}

// runKindRows is the per-kind table of a run (measured against predicted
// when cmp is set).
func runKindRows(res *exec.Result, cmp *exec.Comparison) [][]string {
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
		return nil, usageErrorf("--fault-hang %q: want RANK:OP_ID, e.g. 1:L03.attn.allreduce", v)
	}
	if step < 0 {
		return nil, usageErrorf("--fault-step %d: want 0 or more", step)
	}
	if watchdog == 0 {
		watchdog = defaultWatchdog
	}
	f := &exec.Fault{Rank: rank, OpID: id, Step: step, Hold: faultHoldFactor * watchdog}
	if err := f.Check(sched, local); err != nil {
		return nil, usageErrorf("--fault-hang %s: %s", v, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "exec options: "), "fault "))
	}
	return f, nil
}
