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
	"github.com/tpscope/tpscope/traces"
)

// calibrateRefusesPartial ends calibrate's error for damaged input.
const calibrateRefusesPartial = "calibrate refuses damaged input, even with --allow-partial: a box fitted to part of a run would look as if fitted to all of it (re-export the trace; 'tpscope trace read --allow-partial' shows what survives)"

// traceCalibrateMode is the --trace mode of calibrate.
type traceCalibrateMode struct {
	srcs []string // --trace
}

func (m *traceCalibrateMode) flag() (string, string) { return "trace", "SRC" }

func (m *traceCalibrateMode) chosen(c *calibrateOptions) bool {
	return c.given("trace", len(m.srcs) > 0)
}

func (m *traceCalibrateMode) bind(fs *pflag.FlagSet) {
	bindTraceFlag(fs, &m.srcs, "fit compute efficiencies per kernel family, the host launch cost and collective latency/bandwidth to measured spans; several workloads of one box are fitted together; fit on even steps, error shown on odd steps")
}

func (m *traceCalibrateMode) run(ctx context.Context, c *calibrateOptions, std IO) error {
	if err := c.sc.checkPassed(); err != nil {
		return err
	}
	if err := checkTraceSources("--trace", m.srcs); err != nil {
		return err
	}
	results, err := readTraces(ctx, m.srcs, std.Stderr, false)
	if err != nil {
		var pe *traces.PartialError
		if errors.As(err, &pe) {
			return fmt.Errorf("%w; %s", err, calibrateRefusesPartial)
		}
		return err
	}
	scs, err := c.sc.traceScenarios(results, true)
	if err != nil {
		return err
	}
	tc, err := compare.Calibrate(results, compare.CalibrateOptions{Scenarios: scs, Source: strings.Join(m.srcs, ",")})
	if err != nil {
		return err
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
	fmt.Fprintf(w, "# fit on %d even steps: %d compute samples, %d collective samples\n", tc.FitSteps, tc.ComputeSamples, tc.CollSamples)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "family\tsamples\tcompute-bound\tefficiency\tprior\tmemory-bound\tmem eff\tprior\tramp us\tfit rms err\tprior rms err\t")
	val := func(ok bool, v float64) string {
		if !ok {
			return "(prior)"
		}
		return fmt.Sprintf("%.4g", v)
	}
	for _, f := range tc.Families {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.4g\t%d\t%s\t%.4g\t%s\t%.1f %%\t%.1f %%\t\n", f.Family, f.Samples, f.ComputeBound, val(f.ComputeDetermined, f.EfficiencyFrac), f.PriorEfficiencyFrac,
			f.MemoryBound, val(f.MemoryDetermined, f.MemEfficiencyFrac), f.PriorMemEfficiencyFrac, val(f.RampDetermined, f.RampUs), 100*f.RMSErrFrac, 100*f.PriorRMSErrFrac)
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
	fmt.Fprintf(w, "held-out odd steps (%d): op RMS error %.1f %% -> %.1f %%, mean |error| %.1f %% -> %.1f %%, %s %+.1f %% -> %+.1f %%\n",
		tc.After.Steps, tc.Before.OpRMSErrPct, tc.After.OpRMSErrPct, tc.Before.OpMeanAbsErrPct, tc.After.OpMeanAbsErrPct, stepWord, tc.Before.StepErrPct, tc.After.StepErrPct)
	fmt.Fprintf(w, "wrote %s\n", out)
	return nil
}
