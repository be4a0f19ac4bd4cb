package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/internal/units"
	"github.com/tpscope/tpscope/traces"
)

// calibrateRefusesPartial ends calibrate's error for damaged input.
const calibrateRefusesPartial = "calibrate refuses damaged input, even with --allow-partial: a box fitted to part of a run would look as if fitted to all of it (re-export the trace; 'tpscope trace read --allow-partial' shows what survives)"

// traceCalibrateMode is the --trace mode of calibrate.
type traceCalibrateMode struct {
	srcs      []string // --trace
	holdout   []string // --holdout: traces only evaluated
	holdBatch int      // --holdout-batch: their batch when they record no scenario
	force     bool     // --force: write a box that predicts the held-out steps worse
}

func (m *traceCalibrateMode) flag() (string, string) { return "trace", "SRC" }

func (m *traceCalibrateMode) chosen(c *calibrateOptions) bool {
	return c.given("trace", len(m.srcs) > 0)
}

func (m *traceCalibrateMode) bind(fs *pflag.FlagSet) {
	bindTraceFlag(fs, &m.srcs, "fit compute efficiencies per kernel family, the host launch cost and collective latency/bandwidth to measured spans; several workloads of one box are fitted together; fit on even steps, error shown on odd steps; a fitted parameter is kept only when the held-out ops it prices are predicted no worse with it")
	fs.StringSliceVar(&m.holdout, "holdout", m.holdout, "SRC: traces of the same box held out whole (another load: fit on batch 1, judge on batch 32): every step of --trace is fitted and the error is shown on these; repeat or comma-separate for several")
	countVar(fs, &m.holdBatch, "holdout-batch", "the batch of the --holdout traces that record no scenario (profiler traces) when their engine's ranges do not name one (naming another is refused); default: --batch")
	fs.BoolVar(&m.force, "force", m.force, "write the calibrated topology even when it predicts the held-out steps worse than the prior (op RMS or step error); without it that is an error and nothing is written")
}

// usesScenarioFlag: every scenario flag says what a trace measured (a
// trace without a recorded scenario needs them) or re-prices it.
func (m *traceCalibrateMode) usesScenarioFlag(string) (bool, string) { return true, "" }

func (m *traceCalibrateMode) run(ctx context.Context, c *calibrateOptions, std IO) error {
	if err := c.sc.checkPassed(); err != nil {
		return err
	}
	if err := checkTraceSources("--trace", m.srcs); err != nil {
		return err
	}
	// A held-out trace judges a fit it took no part in: one the fit also
	// reads would be judged on itself.
	for _, h := range m.holdout {
		if slices.Contains(m.srcs, h) {
			return flagError("--holdout", h, "given to --trace too: a held-out trace judges a fit it took no part in (give it to one of them)")
		}
	}
	results, err := readTraces(ctx, m.srcs, false)
	if err != nil {
		var pe *traces.PartialError
		if errors.As(err, &pe) {
			return fmt.Errorf("%w; %s", err, calibrateRefusesPartial)
		}
		return err
	}
	scs, err := c.sc.traceScenarios(results, traceUse{calibrate: true})
	if err != nil {
		return err
	}
	noteSources(std.Stderr, results, "")
	opts := compare.CalibrateOptions{Scenarios: scs, Source: strings.Join(m.srcs, ",")}
	if m.holdBatch != 0 && len(m.holdout) == 0 {
		return flagError("--holdout-batch", m.holdBatch, "needs --holdout")
	}
	if len(m.holdout) > 0 {
		if opts.HoldOut, opts.HoldOutScenarios, err = m.readHoldout(ctx, c, std, results); err != nil {
			return err
		}
	}
	tc, err := compare.Calibrate(results, opts)
	if err != nil {
		return err
	}
	if tc.Worse && !m.force {
		return fmt.Errorf("%s; %s not written (--force writes it)", tc.WorseError(), c.out)
	}
	if err := tc.Topology.Save(c.out); err != nil {
		return err
	}
	return render(std.Stdout, c.output, view{
		JSON: struct {
			Out string `json:"out"`
			*compare.Calibration
		}{c.out, tc},
		Text: func(w io.Writer, _ bool) error { return writeTraceCalibration(w, c.out, tc) },
	})
}

func writeTraceCalibration(w io.Writer, out string, tc *compare.Calibration) error {
	for i, sc := range tc.Scenarios {
		fmt.Fprintf(w, "# %s\n", sc)
		if i < len(tc.From) {
			fmt.Fprintf(w, "#   scenario %s\n", tc.From[i])
		}
	}
	for i, sc := range tc.HeldOut {
		fmt.Fprintf(w, "# held out: %s\n", sc)
		if i < len(tc.HeldOutFrom) {
			fmt.Fprintf(w, "#   scenario %s\n", tc.HeldOutFrom[i])
		}
	}
	if tc.Program != "" {
		fmt.Fprintf(w, "# %s\n", tc.Program)
	}
	fitWhat := "even steps"
	if tc.HeldOutTraces {
		fitWhat = "steps (all; held out: the --holdout traces)"
	}
	fmt.Fprintf(w, "# fit on %d %s: %d compute samples, %d collective samples\n", tc.FitSteps, fitWhat, tc.ComputeSamples, tc.CollSamples)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "family\tsamples\tcompute-bound\tefficiency\tprior\tmemory-bound\tmem eff\tprior\tramp us\tfit rms err\tprior rms err\t")
	val := func(ok bool, v float64) string {
		if !ok {
			return "(prior)"
		}
		return fmt.Sprintf("%.4g", v)
	}
	// The ramp in microseconds to the hundredth, as the notes say it.
	us := func(ok bool, v float64) string {
		if !ok {
			return "(prior)"
		}
		return units.Us(v)
	}
	for _, f := range tc.Families {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.4g\t%d\t%s\t%.4g\t%s\t%.1f %%\t%.1f %%\t\n", f.Family, f.Samples, f.ComputeBound, val(f.ComputeDetermined, f.EfficiencyFrac), f.PriorEfficiencyFrac,
			f.MemoryBound, val(f.MemoryDetermined, f.MemEfficiencyFrac), f.PriorMemEfficiencyFrac, us(f.RampDetermined, f.RampUs), 100*f.RMSErrFrac, 100*f.PriorRMSErrFrac)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if tc.Device.LaunchEagerUs > 0 {
		fmt.Fprintf(w, "launch_eager_us %.3g\n", tc.Device.LaunchEagerUs)
	}
	if tc.Device.MinKernelUs > 0 {
		fmt.Fprintf(w, "min_kernel_us %.3g", tc.Device.MinKernelUs)
		for _, k := range slices.Sorted(maps.Keys(tc.Device.MinKernelUsByKind)) {
			fmt.Fprintf(w, ", %s %.3g", k, tc.Device.MinKernelUsByKind[k])
		}
		fmt.Fprintln(w)
	}
	for _, p := range tc.Coll {
		fmt.Fprintf(w, "%s %s/%s %d ranks: base_lat %.3g us, hw_lat %.3g us, busbw %.3g GB/s (%d samples, rms err %.1f %%)\n", p.Op, p.Algo, p.Proto, p.Ranks, p.BaseLatUs, p.HwLatUs, p.BusBWGBps, p.Samples, 100*p.RMSRelErr)
	}
	for _, n := range tc.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	stepWord := "step error"
	if len(tc.PerScenario) > 1 {
		for _, h := range tc.PerScenario {
			fmt.Fprintf(w, "held-out, %s: op RMS error %.1f %% -> %.1f %%, step error %+.1f %% -> %+.1f %%\n",
				h.Scenario.Workload, h.Before.OpRMSErrPct, h.After.OpRMSErrPct, h.Before.StepErrPct, h.After.StepErrPct)
		}
		stepWord = "mean step error"
	}
	held := "held-out odd steps"
	if tc.HeldOutTraces {
		held = "held-out traces' steps"
	}
	fmt.Fprintf(w, "%s (%d): op RMS error %.1f %% -> %.1f %%, mean |error| %.1f %% -> %.1f %%, %s %+.1f %% -> %+.1f %%\n",
		held, tc.After.Steps, tc.Before.OpRMSErrPct, tc.After.OpRMSErrPct, tc.Before.OpMeanAbsErrPct, tc.After.OpMeanAbsErrPct, stepWord, tc.Before.StepErrPct, tc.After.StepErrPct)
	if tc.Worse {
		fmt.Fprintf(w, "warning: %s (written because of --force)\n", tc.WorseError())
	}
	fmt.Fprintf(w, "wrote %s\n", out)
	return nil
}

// readHoldout reads the --holdout traces and says how each is predicted:
// as the fitted traces are, with --holdout-batch for the batch of those
// that record no scenario. A held-out source that repeats spans of a
// fitted one (a copy of it, a directory holding it) is refused.
func (m *traceCalibrateMode) readHoldout(ctx context.Context, c *calibrateOptions, std IO, fitted []*traces.Result) ([]*traces.Result, compare.Scenarios, error) {
	if err := checkTraceSources("--holdout", m.holdout); err != nil {
		return nil, compare.Scenarios{}, err
	}
	if m.holdBatch < 0 {
		return nil, compare.Scenarios{}, flagError("--holdout-batch", m.holdBatch, "want a batch of 1 or more")
	}
	res, err := readTraces(ctx, m.holdout, false)
	if err != nil {
		var pe *traces.PartialError
		if errors.As(err, &pe) {
			return nil, compare.Scenarios{}, fmt.Errorf("%w; %s", err, calibrateRefusesPartial)
		}
		return nil, compare.Scenarios{}, err
	}
	for _, h := range res {
		for _, f := range fitted {
			if n := traces.Repeats(f, h); n > 0 {
				return nil, compare.Scenarios{}, flagError("--holdout", h.Source, "%d of its spans repeat spans of %s, which --trace fits (the same trace read twice): a held-out trace judges a fit it took no part in", n, f.Source)
			}
		}
	}
	hs, err := c.sc.traceScenarios(res, traceUse{calibrate: true, holdoutBatch: m.holdBatch})
	if err != nil {
		return nil, compare.Scenarios{}, err
	}
	noteSources(std.Stderr, res, "")
	if hs.Default == nil {
		return res, hs, nil
	}
	// The traces record no scenario: their batch is what their engine's
	// ranges name (vLLM's generation_32; traceScenarios refused a
	// --holdout-batch against it), else --holdout-batch, else --batch,
	// the fitted traces' load, said in the scenario's origin.
	d := *hs.Default
	switch batches := traceDecodeBatches(res); {
	case len(batches) > 1:
		return nil, compare.Scenarios{}, flagError("--holdout", strings.Join(m.holdout, ","), "the traces' engine ranges name decode batches %s: hold out one batch per run (the traces that record no scenario are predicted at one)", joinAnd(intsText(batches)))
	case len(batches) == 1:
		d.Workload.Batch = batches[0]
		hs.DefaultFrom += fmt.Sprintf("; batch %d from the held-out traces' engine ranges", batches[0])
	case m.holdBatch > 0:
		d.Workload.Batch = m.holdBatch
		hs.DefaultFrom += fmt.Sprintf("; batch %d from --holdout-batch", m.holdBatch)
	default:
		hs.DefaultFrom += fmt.Sprintf("; batch %d from --batch: the held-out traces do not record theirs (--holdout-batch sets it)", d.Workload.Batch)
	}
	hs.Default = &d
	return res, hs, nil
}

// intsText writes each of v in decimal.
func intsText(v []int) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = fmt.Sprint(x)
	}
	return out
}
