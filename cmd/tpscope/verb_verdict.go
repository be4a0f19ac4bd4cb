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
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
)

func init() {
	register(&Verb{
		Name:  "verdict",
		Short: "measure each optimization on the executor and set its gain beside the predicted one",
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

Entries that change only collectives (the NCCL settings, one-shot
all-reduce) need the plan's ranks on as many GPUs and say so in a one-rank
shard; the "move to another box" entries are not run. All-reduce + RMSNorm
fusion runs the fused kernel's local part (the norm on the reduced buffer);
its reduction waits for several GPUs. MTP's tokens per step count the
acceptance --mtp-accept (an input, as in advise).

-o/--out DIR writes every run's trace (DIR/<run>.otlp.jsonl), for 'tpscope
compare' and Jaeger, and the report as DIR/verdict.json and DIR/verdict.md.`,
		Example: `tpscope verdict --backend cuda --model kimi-k2.5 --tp 8 --local-ranks 0 --batch 32 --context 4096 --kv-dtype bf16 --topo h200-nvswitch --steps 10 -o verdict-traces`,
		Flags: func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error {
			sc := addScenarioFlags(fs)
			backend := fs.String("backend", "cuda", "where to run: cuda or cpu")
			only := fs.String("entries", "", "only these entries (comma list; default every entry)")
			steps := fs.Int("steps", 10, "measured steps per run")
			warmup := fs.Int("warmup", 3, "warm-up steps per run before the measured ones")
			outDir := fs.StringP("out", "o", "", "write every run's trace to DIR/<run>.otlp.jsonl")
			output := fs.String("output", "table", "output format: table, json or markdown")
			seed := fs.Int64("seed", 1, "seed of weights, inputs and MoE routing, the same for every run")
			threshold := fs.Float64("threshold", 0.05, "relative change of tokens/s at which an optimization pays")
			mtpTokens := fs.Int("mtp-tokens", 1, "speculative tokens of the MTP entry")
			localRanks := fs.IntSlice("local-ranks", nil, "ranks this process runs (default: all of the plan's ranks); --tp 8 --local-ranks 0 runs one rank's shard on one GPU")
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("unexpected arguments %q", args)
				}
				if err := checkOutput(*output, "table", "json", "markdown"); err != nil {
					return err
				}
				if *steps < 1 || *warmup < 0 {
					return usageErrorf("--steps %d --warmup %d: want steps >= 1 and warmup >= 0", *steps, *warmup)
				}
				if *threshold <= 0 || *threshold >= 1 {
					return usageErrorf("--threshold %v: want a fraction in (0,1)", *threshold)
				}
				if *mtpTokens < 1 || *mtpTokens > 16 {
					return usageErrorf("--mtp-tokens %d: want 1 to 16", *mtpTokens)
				}
				base, err := sc.scenario()
				if err != nil {
					return err
				}
				if base.Workload.KVDtype == "" {
					base.Workload.KVDtype = base.Workload.KVDtypeFor(base.Arch)
				}
				cat := append(sim.Catalog(sim.CatalogOptions{MTPTokens: *mtpTokens, MTPAcceptFrac: base.Options.MTPAcceptFrac}), sim.PlanEntries()...)
				if *only != "" {
					if cat, err = filterEntries(cat, splitList(*only)); err != nil {
						return err
					}
				}
				sched, _, err := sim.BuildSchedule(base)
				if err != nil {
					var pe *model.PlanError
					if errors.As(err, &pe) {
						return usageErrorf("%v", flagWords(err))
					}
					return err
				}
				world := len(sched.Ranks)
				for _, r := range *localRanks {
					if r < 0 || r >= world {
						return usageErrorf("--local-ranks %v: rank %d is not one of the plan's %d ranks", *localRanks, r, world)
					}
				}
				if *outDir != "" {
					if err := os.MkdirAll(*outDir, 0o755); err != nil {
						return fmt.Errorf("--out %s: %w", *outDir, err)
					}
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				v := &verdictRunner{backend: *backend, seed: *seed, steps: *steps, warmup: *warmup,
					local: *localRanks, outDir: *outDir, stderr: stderr}
				rep, err := v.verdict(ctx, base, cat, world, 100**threshold)
				if err != nil {
					return err
				}
				if *outDir != "" {
					if err := saveVerdict(*outDir, rep); err != nil {
						return err
					}
				}
				switch *output {
				case "json":
					enc := json.NewEncoder(stdout)
					enc.SetIndent("", " ")
					return enc.Encode(rep)
				case "markdown":
					return writeVerdict(stdout, rep, true)
				}
				return writeVerdict(stdout, rep, false)
			}
		},
	})
}

// Verdict row statuses.
const (
	verdictMeasured      = "measured"
	verdictNeedsGPUs     = "needs several GPUs"
	verdictNotBuilt      = "not in the executor"
	verdictAnotherBox    = "another box"
	verdictNotApplicable = "not applicable"
	verdictError         = "error"
)

// verdictEntry is one catalog entry's row.
type verdictEntry struct {
	Entry      string `json:"entry"`
	Title      string `json:"title"`
	Kind       string `json:"kind"`
	Status     string `json:"status"`
	Reason     string `json:"reason,omitempty"`
	InBaseline bool   `json:"in_baseline"`
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
}

type verdictRunner struct {
	backend       string
	seed          int64
	steps, warmup int
	local         []int
	outDir        string
	stderr        io.Writer
}

// peersOnly reports entries whose whole effect is on collectives.
func peersOnly(e *sim.Entry) bool { return e.Kind == "nccl" || e.Name == "oneshot-ar" }

// verdict runs the baseline and every entry the executor can realize.
func (v *verdictRunner) verdict(ctx context.Context, base sim.Scenario, cat []sim.Entry, world int, thresholdPct float64) (*verdictReport, error) {
	local := v.local
	if len(local) == 0 {
		for r := 0; r < world; r++ {
			local = append(local, r)
		}
	}
	shard := len(local) < world
	rep := &verdictReport{Scenario: base.String(), Backend: v.backend, Ranks: world, LocalRanks: local, Shard: shard,
		Steps: v.steps, Warmup: v.warmup, ThresholdPct: thresholdPct}
	baseRun, err := v.run(ctx, "baseline", base)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	rep.Baseline = baseRun.Stats()
	rep.Runs = append(rep.Runs, rep.Baseline)
	for i := range cat {
		e := &cat[i]
		row := verdictEntry{Entry: e.Name, Title: e.Title, Kind: e.Kind}
		ap := e.Check(base)
		switch {
		case ap.Status == sim.NotApplicable:
			row.Status, row.Reason = verdictNotApplicable, ap.Reason
		case e.Kind == "box":
			row.Status, row.Reason = verdictAnotherBox, "runs on "+strings.TrimPrefix(e.Name, "box-")+": "+ap.Reason
		case e.Name == "oneshot-ar":
			row.Status, row.Reason = verdictNotBuilt, "the executor's all-reduces are NCCL's: a one-shot P2P kernel is not built; "+ap.Reason
		case peersOnly(e) && shard:
			row.Status, row.Reason = verdictNeedsGPUs, fmt.Sprintf("changes only collectives, which a one-rank shard skips: run the plan's %d ranks on %d GPUs", world, world)
		}
		if row.Status != "" {
			rep.Entries = append(rep.Entries, row)
			continue
		}
		var other sim.Scenario
		label := e.Name
		if e.Enabled(base) {
			row.InBaseline = true
			other, err = e.Revert(base)
			label = "without-" + e.Name
		} else {
			other, err = e.Apply(base)
		}
		var run *compare.VerdictRun
		if err == nil {
			run, err = v.run(ctx, label, other)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			row.Status, row.Reason = verdictError, err.Error()
			rep.Entries = append(rep.Entries, row)
			continue
		}
		row.Status = verdictMeasured
		if e.Name == "ar-norm-fusion" && shard {
			row.Reason = "the fused kernel's local part runs (residual add + RMSNorm of the reduced buffer); the reduction waits for several GPUs"
		}
		without, with := baseRun, run
		if row.InBaseline {
			without, with = run, baseRun
		}
		vr := compare.Verdict(without, with, thresholdPct)
		row.Verdict = &vr
		rep.Runs = append(rep.Runs, run.Stats())
		rep.Entries = append(rep.Entries, row)
	}
	return rep, nil
}

// run builds, predicts and runs one scenario.
func (v *verdictRunner) run(ctx context.Context, label string, scen sim.Scenario) (*compare.VerdictRun, error) {
	sched, graphed, err := sim.BuildSchedule(scen)
	if err != nil {
		return nil, err
	}
	scen.RunBatch = sched.Workload.Batch
	pr, _, err := sim.Predict(scen)
	if err != nil {
		return nil, fmt.Errorf("predict: %w", err)
	}
	scenJSON, err := scen.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b, err := exec.NewBackend(v.backend, exec.BackendConfig{Seed: v.seed, Env: scen.Options.NCCL.Env(), ARNormFusion: scen.Options.ARNormFusion})
	if err != nil {
		return nil, err
	}
	dest := "none"
	if v.outDir != "" {
		dest = "file:" + filepath.Join(v.outDir, label+".otlp.jsonl")
	}
	exp, err := traces.Setup(ctx, dest, traces.WithResource(backendResource(v.backend, nil)...))
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", dest, err)
	}
	opts := []exec.Option{
		exec.WithTracerProvider(exp.TracerProvider()), exec.WithSpanExporter(exp.SpanExporter()),
		exec.WithSteps(v.steps), exec.WithWarmup(v.warmup), exec.WithGraphs(graphed),
		exec.WithScenario(string(scenJSON), scen.TopoRef.String(), scen.Options.Names()),
		exec.WithPredictedUs(predictedByOpID(pr)),
	}
	if len(v.local) > 0 {
		opts = append(opts, exec.WithLocalRanks(v.local...))
	}
	fmt.Fprintf(v.stderr, "verdict: running %s (%s)\n", label, scen)
	res, runErr := exec.Run(ctx, sched, b, opts...)
	shutErr := exp.Shutdown(context.Background())
	if runErr != nil {
		return nil, runErr
	}
	if shutErr != nil {
		return nil, fmt.Errorf("flush trace %s: %w", dest, shutErr)
	}
	rank := res.LocalRanks[0]
	opUs := make([]float64, len(sched.Ranks[rank]))
	col := make([]float64, len(res.OpUs))
	for i := range opUs {
		for s := range res.OpUs {
			col[s] = res.OpUs[s][0][i]
		}
		sort.Float64s(col)
		opUs[i] = col[len(col)/2]
	}
	trace := ""
	if v.outDir != "" {
		trace = strings.TrimPrefix(dest, "file:")
	}
	return &compare.VerdictRun{Label: label, Scenario: scen, Prediction: pr, Schedule: sched, Rank: rank,
		StepUs: res.StepUs, OpUs: opUs, Trace: trace}, nil
}

// saveVerdict writes the report beside the traces, as JSON and markdown.
func saveVerdict(dir string, rep *verdictReport) error {
	js, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "verdict.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
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
			rows = append(rows, []string{name, e.Status, "-", "-", "-", "-", "-", "-", e.Reason})
			continue
		}
		why := e.Reason
		if !r.Held {
			why = strings.TrimPrefix(why+"; "+whyCell(r), "; ")
		}
		rows = append(rows, []string{name, e.Status, pct(r.PredictedBox.TokensPerSPct), pct(r.Predicted.TokensPerSPct),
			fmt.Sprintf("%s [%+.1f..%+.1f]", pct(r.Measured.TokensPerSPct), r.MeasuredLow.TokensPerSPct, r.MeasuredHigh.TokensPerSPct),
			fmt.Sprintf("%+.1f", r.ErrPts), yesNo(r.PredPays) + "/" + yesNo(r.MeasPays), yesNo(r.Held), why})
	}
	if md {
		for _, r := range rows {
			for i := range r {
				r[i] = strings.ReplaceAll(r[i], "|", "/")
			}
		}
	}
	return writeRows(w, header, rows, md)
}
