package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/report/build"
	"github.com/tpscope/tpscope/serving"
)

// servingCalibrateMode is calibrate --serving: the engine's overheads
// outside the GPU step (serving.Overheads) fitted to measured serving
// benchmarks on some load levels, every level reported before and after.
type servingCalibrateMode struct {
	files []string // --serving
	fit   string   // --fit-levels: 1-based indexes over the levels of every file, in order
	terms string   // --terms
	seed  uint64
	engineFlags
}

func (m *servingCalibrateMode) flag() (string, string) { return "serving", "RESULT..." }

func (m *servingCalibrateMode) chosen(c *calibrateOptions) bool {
	return c.given("serving", len(m.files) > 0)
}

func (m *servingCalibrateMode) bind(fs *pflag.FlagSet) {
	fs.StringArrayVar(&m.files, "serving", m.files, "RESULT: fit the engine's overheads (host time per step and per request, decode and prefill scales, frontend latency) to measured serving benchmarks (vllm bench serve, SGLang bench_serving, aiperf, GuideLLM, request logs); repeatable, comma-free paths")
	fs.StringVar(&m.fit, "fit-levels", m.fit, "with --serving: the load levels to fit on, 1-based over every file's levels in order (default 1); the others are held out and reported")
	fs.StringVar(&m.terms, "terms", m.terms, "with --serving: the overheads to fit: step, per-seq, decode, prefill, prefill-step, frontend, or all (comma list; default: what the fitted levels tell apart: decode and frontend on one load, decode and prefill-step there under SGLang, whose prefill batches run eagerly, every term on two or more; on one load at most two named, three over two lengths)")
	wantWhenEmpty(fs, "terms", "a comma list of step, per-seq, decode, prefill, prefill-step, frontend or all")
	fs.Uint64Var(&m.seed, "seed", m.seed, "with --serving: seed of the simulated loads' draws")
	m.engineFlags.bind(fs)
}

// usesScenarioFlag: the scenario flags are the deployment simulated.
func (m *servingCalibrateMode) usesScenarioFlag(string) (bool, string) { return true, "" }

func (m *servingCalibrateMode) run(ctx context.Context, c *calibrateOptions, std IO) error {
	// Every input is read before any work.
	var levels []serving.Measured
	for _, path := range m.files {
		if err := checkInputFile("--serving", path, "a serving benchmark result"); err != nil {
			return err
		}
		ms, err := serving.LoadMeasured(path)
		if err != nil {
			return causeError("--serving", nil, err)
		}
		levels = append(levels, ms...)
	}
	terms, err := serving.ParseCalibrateTerms(m.terms)
	if err != nil {
		return causeError("--terms", nil, err)
	}
	var fit []int
	if m.fit != "" {
		l := &intList{min: 1}
		if err := l.Set(m.fit); err != nil {
			return causeError("--fit-levels", nil, err)
		}
		for _, v := range l.v {
			if v > len(levels) {
				return flagError("--fit-levels", v, "want 1 to %d (the load levels of the files given)", len(levels))
			}
			fit = append(fit, v-1)
		}
	}
	// Terms the fitted levels cannot tell apart are refused before any
	// work, not split at will by the fit.
	if err := serving.CheckCalibrateTerms(levels, fit, terms); err != nil {
		return causeError("--terms", m.terms, err)
	}
	engineNote, err := resultsEngine(c.sc, "--serving", levels)
	if err != nil {
		return err
	}
	planNote, err := resultsPlan(c.sc, "--serving", levels)
	if err != nil {
		return err
	}
	if err := resultsRanOn(c.sc, "--serving", levels); err != nil {
		return err
	}
	scen, err := c.sc.scenario()
	if err != nil {
		return err
	}
	defaultsNote := resultsDefaults(c.sc, levels, scen)
	prof, err := engprof.Lookup(scen.Options.Engine)
	if err != nil {
		return causeError("--engine", scen.Options.Engine, err)
	}
	// The measured levels name no prompt blocks or sessions.
	if err := m.engineFlags.checkPrefixCache(); err != nil {
		return err
	}
	engine, err := m.engineFlags.engine(prof, scen.Options, c.sc.changed("policy"))
	if err != nil {
		return err
	}
	overheads, overheadsNote, err := m.engineFlags.overheads(prof, scen, engine)
	if err != nil {
		return err
	}
	dep := serving.Deployment{Scenario: scen, Engine: engine, Overheads: overheads}
	cal, err := serving.Calibrate(dep, levels, serving.CalibrateOptions{Fit: fit, Terms: terms, Seed: m.seed})
	if err != nil {
		return err
	}
	var src []string
	for i := range levels {
		if cal.Fitted[i] {
			src = append(src, fmt.Sprintf("fitted on %s record %d (%s)", levels[i].File, levels[i].Record, levels[i].Label()))
		}
	}
	if engineNote != "" {
		src = append(src, engineNote)
	}
	if planNote != "" {
		src = append(src, planNote)
	}
	if defaultsNote != "" {
		src = append(src, defaultsNote)
	}
	if overheadsNote != "" {
		src = append(src, overheadsNote)
	}
	src = append(src, fmt.Sprintf("%s %s on %s, %s policy; objective (squared log errors of median TTFT, median TPOT, output throughput%s) %.4g -> %.4g in %d evaluations",
		scen.Arch.Name, scen.Plan.Normalized(), scen.Topo.Name, engine.Policy, meansFitted(cal), cal.ObjectiveBefore, cal.ObjectiveAfter, cal.Evals))
	origin := serving.OriginOf(scen, prof.Ref(), engine)
	if err := writeJSONFile("-o", c.out, serving.OverheadsFile{Overheads: cal.Overheads, FittedOn: &origin, Source: src}); err != nil {
		return err
	}
	return render(std.Stdout, c.output, view{
		JSON: cal,
		Text: func(w io.Writer, md bool) error { return writeServingCalibration(w, c.out, cal, src) },
	})
}

// writeServingCalibration writes the fit and, per level, the headline
// statistics before and after, held-out levels marked.
func writeServingCalibration(w io.Writer, out string, cal *serving.Calibration, src []string) error {
	fmt.Fprintf(w, "serving overheads: %s\n", cal.Overheads)
	for _, s := range src {
		fmt.Fprintf(w, "  %s\n", s)
	}
	for _, n := range cal.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	header := []string{"level", "load", "role", "TTFT p50 before", "TTFT p50 after", "TPOT p50 before", "TPOT p50 after", "out tok/s before", "out tok/s after"}
	var rows [][]string
	for i := range cal.Before {
		b, a := cal.Before[i], cal.After[i]
		role := "held out"
		if cal.Fitted[i] {
			role = "fitted"
		}
		// The statistic fitted: a level whose result reports no median is
		// fitted on its mean, and its cell under the p50 header says so.
		cell := func(lc *serving.LevelComparison, metric string) string {
			c := lc.CalibrateTarget(metric)
			if c.Stat == "mean" {
				return "mean " + build.CompareCell(c)
			}
			return build.CompareCell(c)
		}
		rows = append(rows, []string{fmt.Sprint(i + 1), b.Measured.Label(), role,
			cell(b, "ttft_ms"), cell(a, "ttft_ms"), cell(b, "tpot_ms"), cell(a, "tpot_ms"),
			cell(b, "output_tokens_per_s"), cell(a, "output_tokens_per_s")})
	}
	if err := writeTable(w, "levels", "levels (predicted / measured (error)), before and after the fit", header, rows, false); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n", out)
	return nil
}

// meansFitted names, for the objective's line, the fitted levels whose
// results report a mean and no median of TTFT or TPOT, which the fit takes
// in the median's place (serving.LevelComparison.CalibrateTarget); "" when
// every fitted level reports its medians.
func meansFitted(cal *serving.Calibration) string {
	var out []string
	for _, metric := range []struct{ key, name string }{{"ttft_ms", "TTFT"}, {"tpot_ms", "TPOT"}} {
		var levels []string
		for i, lc := range cal.Before {
			if cal.Fitted[i] && lc.CalibrateTarget(metric.key).Stat == "mean" {
				levels = append(levels, fmt.Sprint(i+1))
			}
		}
		switch len(levels) {
		case 0:
		case 1:
			out = append(out, fmt.Sprintf("the mean %s of level %s, whose result reports no median", metric.name, levels[0]))
		default:
			out = append(out, fmt.Sprintf("the mean %s of levels %s, whose results report no median", metric.name, strings.Join(levels, ", ")))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}
