package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/calibrate"
	"github.com/tpscope/tpscope/calibrate/nccltests"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

var calibrateVerb = &Verb{
	UsageLine: "calibrate (--nccl-tests FILE | --trace SRC | --serving RESULT... | --backend cpu) -o FILE [flags]",
	Short:     "fit cost parameters to measurements and write a calibrated topology",
	Long: `Fits cost parameters of a topology to measurements and writes the calibrated topology
(JSON with a "calibration" section saying where the numbers came from); pass it anywhere a
preset name is accepted. Choose the source of measurements with exactly one mode flag.

--nccl-tests FILE: the text output of nccl-tests. Every size is assigned to the algorithm and
protocol NCCL would pick (or the one --nccl-proto/--nccl-algo force, as the run's
NCCL_PROTO/NCCL_ALGO did), then per pair the base latency, per-step latency and bus bandwidth
are fitted in log space with NCCL's constants as the prior. The parameters apply only under
the NCCL settings the run had: those the log records (NCCL's "set by environment" lines under
NCCL_DEBUG=INFO, nccl-tests -J's env list, the header collective --measure writes) are the
fit's, and a flag that contradicts one is refused; give the NCCL flags for the others. The
report's first line names the box and the settings the fit is of. The log's GPU must be the
box's (a GPU the catalog does not know, the box's own device name), and a log of tpscope's CPU
ranks fits only the CPU box 'calibrate --backend cpu' writes.

--trace SRC: measured spans (see --help of the flag); --backend cpu: this machine.

A flag the chosen mode does not read is refused, not ignored: another mode's own flag
(--ranks under --trace), a scenario flag under --backend cpu (it writes a box of its
own), and under --nccl-tests any scenario flag but --topo, --gpus and the NCCL settings.

--serving RESULT (repeatable): measured serving benchmarks (vllm bench serve --save-result
JSON, SGLang bench_serving JSONL, aiperf, GuideLLM, request logs; simulate --compare reads the
same). The terms the static step model cannot know are fitted by simulating each fitted load
level as measured: host time per engine step (step), per request in a step (per-seq:
scheduling, sampling, streaming), a scale on every step's prefill part (prefill) and the
frontend's latency before the scheduler sees a request (frontend). --fit-levels picks the
levels to fit on (default the first); every level is reported before and after, the others
held out. -o writes the overheads as JSON with the deployment they were fitted on (engine,
box, GPU, model), which simulate and calibrate take back with --serving-overheads: refused
under another engine or on another GPU, applied with a caveat line on another box, model or
engine version, or when the file does not record its origin. Pass the deployment as simulate takes it (scenario flags, --policy,
--max-num-seqs, --max-num-batched-tokens); the engine, GPU and model the results name are
taken or checked as simulate --compare does.

Calibrate never writes a calibrated box from partial input: a cut or damaged trace or
nccl-tests log is an error naming the file and where it ends, even with --allow-partial
(which compare, report and trace read take to keep the complete steps).`,
	Example: "tpscope calibrate --nccl-tests all_reduce_perf.txt --topo rtxpro6000-2s -o box.json\ntpscope calibrate --nccl-tests ar_ll.txt --nccl-proto LL --p2p-level SYS -o box.json\ntpscope calibrate --trace run.otlp.jsonl --topo h200-nvswitch -o h200.json\ntpscope calibrate --serving conc16.json --serving conc64.json --fit-levels 1 --model deepseek-v3 --topo h200-nvswitch --tp 8 -o overheads.json",
	New:     func() Options { return newCalibrateOptions() },
}

// calibrateOptions are calibrate's flags: those every mode shares (the
// scenario flags: the box to calibrate, the NCCL settings the
// measurements ran with, and, for traces, overrides of what they
// recorded; where to write the result and the report format) and each
// mode's own.
type calibrateOptions struct {
	boundFlags
	sc           *scenarioFlags
	out          string // -o: the calibrated topology JSON
	output       string // table or json report on stdout
	allowPartial bool   // refused: see its help
	// modes are the sources of measurements, sorted by flag; exactly one
	// is chosen per run, by giving its flag.
	modes []calibrateMode
	// owner is the mode that registered each mode's own flag (--ranks:
	// the cpu mode), for refusing it under another mode (Bind).
	owner map[string]calibrateMode
}

// calibrateMode is one source of measurements for calibrate, selected by
// its flag (--nccl-tests FILE, --trace SRC, --backend cpu).
type calibrateMode interface {
	// flag is the selecting flag's name and its value's placeholder
	// ("nccl-tests", "FILE").
	flag() (name, arg string)
	// chosen reports whether the mode was selected: by the command line,
	// or, for options built in code, by a value in its flag.
	chosen(c *calibrateOptions) bool
	// bind registers the selecting flag and the mode's own flags.
	bind(fs *pflag.FlagSet)
	// usesScenarioFlag reports whether the mode reads the scenario flag
	// name; when not, why says in a clause what the mode reads instead.
	usesScenarioFlag(name string) (uses bool, why string)
	// run checks the mode's flags and inputs, then measures or reads,
	// fits and writes c.out.
	run(ctx context.Context, c *calibrateOptions, std IO) error
}

func newCalibrateOptions() *calibrateOptions {
	return &calibrateOptions{sc: newScenarioFlags(), output: formatTable,
		modes: []calibrateMode{newCPUCalibrateMode(), &ncclTestsMode{}, &servingCalibrateMode{}, &traceCalibrateMode{}}}
}

func (c *calibrateOptions) Bind(fs *pflag.FlagSet) {
	c.fs = fs
	c.sc.Bind(fs)
	fs.StringVarP(&c.out, "out", "o", c.out, "write the result here (required): the calibrated topology JSON, or with --serving the fitted overheads JSON")
	fs.StringVar(&c.output, "output", c.output, "report format on stdout: table or json")
	fs.BoolVar(&c.allowPartial, "allow-partial", c.allowPartial, "not honoured here: calibrate refuses a cut or damaged trace or nccl-tests log even with it (a box fitted to part of a run would look as if fitted to all of it)")
	c.owner = map[string]calibrateMode{}
	for _, m := range c.modes {
		before := map[string]bool{}
		fs.VisitAll(func(f *pflag.Flag) { before[f.Name] = true })
		m.bind(fs)
		fs.VisitAll(func(f *pflag.Flag) {
			if !before[f.Name] {
				c.owner[f.Name] = m
			}
		})
	}
}

// checkModeFlags refuses a flag the chosen mode does not read, which would
// change nothing and say nothing: another mode's own flag (--ranks under
// --trace), or a scenario flag the mode has no use for (--model under
// --backend cpu).
func (c *calibrateOptions) checkModeFlags(chosen calibrateMode) error {
	name, arg := chosen.flag()
	var err error
	c.visitChanged(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		if m, ok := c.owner[f.Name]; ok && m != chosen {
			on, onArg := m.flag()
			err = flagError("--"+f.Name, nil, "used by calibrate --%s %s only", on, onArg)
			return
		}
		if !c.sc.isScenarioFlag(f.Name) {
			return
		}
		if uses, why := chosen.usesScenarioFlag(f.Name); !uses {
			err = flagError("--"+f.Name, f.Value.String(), "not used by calibrate --%s %s: %s", name, arg, why)
		}
	})
	return err
}

func (c *calibrateOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(args) > 0 {
		return usageErrorf("calibrate takes no arguments, got %q", args)
	}
	if err := checkOutput(c.output, formatTable, formatJSON); err != nil {
		return err
	}
	var chosen calibrateMode
	for _, m := range c.modes {
		if !m.chosen(c) {
			continue
		}
		if chosen != nil {
			a, _ := chosen.flag()
			b, _ := m.flag()
			return flagError("--"+a+" and --"+b, nil, "choose one source of measurements")
		}
		chosen = m
	}
	if chosen == nil {
		var opts []string
		for _, m := range c.modes {
			name, arg := m.flag()
			opts = append(opts, "--"+name+" "+arg)
		}
		return usageErrorf("no measurements: pass one of %s", strings.Join(opts, ", "))
	}
	if c.out == "" {
		what := "the calibrated topology"
		if _, serving := chosen.(*servingCalibrateMode); serving {
			what = "the fitted overheads (JSON, for --serving-overheads)"
		}
		return usageErrorf("-o FILE is required: where to write %s", what)
	}
	if err := checkOutputFile("-o", c.out); err != nil {
		return err
	}
	if err := checkNotInput("-o", c.out, measurementInputs(chosen)...); err != nil {
		return err
	}
	if _, serving := chosen.(*servingCalibrateMode); c.sc.perfDB != "" && !serving {
		return flagError("--perf-db", c.sc.perfDB, "calibrate fits tpscope's own cost parameters, and ops priced from tables have none to fit (drop --perf-db here; pass it to predict with the calibrated topology)")
	}
	if err := c.checkModeFlags(chosen); err != nil {
		return err
	}
	return chosen.run(ctx, c, std)
}

// measurementInputs are the files mode m fits: what -o may not overwrite.
func measurementInputs(m calibrateMode) []input {
	var in []input
	switch m := m.(type) {
	case *ncclTestsMode:
		in = append(in, input{"--nccl-tests", m.file})
	case *traceCalibrateMode:
		for _, s := range m.srcs {
			in = append(in, input{"--trace", s})
		}
		for _, s := range m.holdout {
			in = append(in, input{"--holdout", s})
		}
	case *servingCalibrateMode:
		for _, s := range m.files {
			in = append(in, input{"--serving", s})
		}
	}
	return in
}

// ncclTestsMode is the --nccl-tests mode.
type ncclTestsMode struct {
	file string // --nccl-tests
	op   string // --op
}

func (m *ncclTestsMode) flag() (string, string) { return "nccl-tests", "FILE" }

func (m *ncclTestsMode) chosen(c *calibrateOptions) bool {
	return c.given("nccl-tests", m.file != "")
}

func (m *ncclTestsMode) bind(fs *pflag.FlagSet) {
	fs.StringVar(&m.file, "nccl-tests", m.file, "FILE: fit collective latency/bandwidth per protocol to an nccl-tests log (all_reduce_perf, all_gather_perf, reduce_scatter_perf); the NCCL flags say how it ran")
	fs.StringVar(&m.op, "op", m.op, "collective of the log when neither its text nor its file name says (allreduce, allgather, reducescatter); naming another than the log says is refused")
}

// usesScenarioFlag: a log is fitted on the box of --topo and --gpus under
// the NCCL settings the run had; nothing else of a scenario enters it.
func (m *ncclTestsMode) usesScenarioFlag(name string) (bool, string) {
	if name == "topo" || name == "gpus" {
		return true, ""
	}
	var nccl []string
	for _, of := range sim.OptionFields() {
		if of.Env == "" {
			continue
		}
		if of.Name == name {
			return true, ""
		}
		nccl = append(nccl, "--"+of.Name)
	}
	return false, "it fits the log on the box of --topo and --gpus under the NCCL settings the run had (" + strings.Join(nccl, ", ") + ")"
}

func (m *ncclTestsMode) run(ctx context.Context, c *calibrateOptions, std IO) error {
	if m.file == "" {
		return flagError("--nccl-tests", quote(m.file), "want an nccl-tests log")
	}
	if err := checkInputFile("--nccl-tests", m.file, "an nccl-tests log"); err != nil {
		return err
	}
	flags, err := c.sc.options()
	if err != nil {
		return err
	}
	t, _, err := c.sc.box()
	if err != nil {
		return err
	}
	lg, err := nccltests.ParseFile(m.file)
	if err != nil {
		return err
	}
	coll, err := m.collective(lg)
	if err != nil {
		return err
	}
	settings, err := m.settings(c, lg, flags)
	if err != nil {
		return err
	}
	if err := checkLogBox(m.file, lg, t, c.sc.topoArg()); err != nil {
		return err
	}
	ranks := lg.Ranks
	if ranks == 0 {
		ranks = t.NumGPUs()
		fmt.Fprintf(std.Stderr, "%s: rank count not in the log; assuming %d (all GPUs of %s)\n", m.file, ranks, t.Name)
	}
	if err := checkLogRanks(c.sc, m.file, ranks, t); err != nil {
		return err
	}
	if lg.Skipped > 0 {
		fmt.Fprintf(std.Stderr, "%s: skipped %d lines that are not results (first at line %d)\n", m.file, lg.Skipped, lg.FirstSkipped)
	}
	for _, w := range lg.Warnings {
		fmt.Fprintf(std.Stderr, "%s: warning: %s\n", m.file, w)
	}
	var samples []calibrate.CollectiveSample
	for _, r := range lg.Rows {
		for _, tm := range r.Times() {
			samples = append(samples, calibrate.CollectiveSample{Bytes: r.Bytes, TimeUs: tm})
		}
	}
	of := fitOf{Topology: t.Name, DefaultTopology: !c.sc.changed("topo"), Ranks: ranks, GPUs: t.NumGPUs(), logSettings: settings}
	fit, err := calibrate.Collective(t, samples, calibrate.CollectiveOptions{
		Op: coll, Ranks: ranks,
		NCCL:    settings.NCCL,
		Source:  fmt.Sprintf("nccl-tests %s, %d ranks, %d sizes; %s", m.file, ranks, len(lg.Rows), settings),
		Created: time.Now().UTC().Format(time.RFC3339),
	})
	if err != nil {
		return fmt.Errorf("%s: %w", m.file, err)
	}
	if err := fit.Topology.Save(c.out); err != nil {
		return err
	}
	return reportFit(std.Stdout, c.output, c.out, coll, of, fit)
}

// logSettings are the NCCL settings an nccl-tests log is fitted under,
// and where each variable's value came from.
type logSettings struct {
	NCCL ncclenv.Settings `json:"nccl"`
	// From says per NCCL variable (NCCL_PROTO, ...) where its value came
	// from: "log" (the log records it), "flag" (the NCCL flag, the log
	// does not record it) or "assumed" (neither says: NCCL's default).
	From map[string]string `json:"nccl_from"`
}

// String is the settings and their origin, as the report and the
// calibration's provenance say them: "NCCL settings NCCL_P2P_LEVEL=SYS
// (recorded in the log)".
func (s logSettings) String() string {
	env := s.NCCL.Env()
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		kv = append(kv, k+"="+env[k])
	}
	text := "NCCL's defaults"
	if len(kv) > 0 {
		text = strings.Join(kv, " ")
	}
	by := map[string][]string{}
	for _, v := range nccltests.SettingVars {
		by[s.From[v]] = append(by[s.From[v]], v)
	}
	all := len(nccltests.SettingVars)
	var parts []string
	for _, src := range []struct{ key, what string }{
		{"log", "recorded in the log"}, {"flag", "from the flags"}, {"assumed", "not recorded, NCCL's default assumed"},
	} {
		switch n := len(by[src.key]); {
		case n == all:
			parts = append(parts, src.what)
		case n > 0:
			parts = append(parts, src.what+": "+strings.Join(by[src.key], ", "))
		}
	}
	return "NCCL settings " + text + " (" + strings.Join(parts, "; ") + ")"
}

// settings are the NCCL settings the log is fitted under: per variable,
// the value the log records, else the NCCL flag's, else NCCL's default.
// A flag set to another value than the log records is refused: the
// calibration applies only under the settings its times were measured
// with, so fitting them as another's would price that one with them.
func (m *ncclTestsMode) settings(c *calibrateOptions, lg *nccltests.Log, flags sim.Options) (logSettings, error) {
	s := logSettings{NCCL: flags.NCCL, From: map[string]string{}}
	for _, of := range sim.OptionFields() {
		if of.Env == "" {
			continue
		}
		line, recorded := lg.NCCLRecorded[of.Env]
		switch {
		case recorded:
			want, got := lg.NCCL.Env()[of.Env], flags.NCCL.Env()[of.Env]
			if c.sc.changed(of.Name) && !nccltests.SameSetting(of.Env, want, got) {
				at := ""
				if line > 0 {
					at = fmt.Sprintf(" at line %d", line)
				}
				val := of.Env + "=" + want
				if want == "" {
					val = of.Env + " unset (NCCL's default)"
				}
				return s, flagError("--"+of.Name, of.Get(&flags), "%s records %s%s: the fit is of the settings the run had (drop --%s)", m.file, val, at, of.Name)
			}
			// As the log spells it: its value, read back through the one
			// codec (Env omits a default, which SetEnv reads as unset).
			if err := s.NCCL.SetEnv(of.Env, lg.NCCL.Env()[of.Env]); err != nil {
				return s, err
			}
			s.From[of.Env] = "log"
		case c.sc.changed(of.Name):
			s.From[of.Env] = "flag"
		default:
			s.From[of.Env] = "assumed"
		}
	}
	return s, nil
}

// fitOf is what an nccl-tests fit is of: the box (named, and whether it
// is the default one no flag chose), the ranks of its GPUs the log
// measured, and the NCCL settings.
type fitOf struct {
	Topology        string `json:"topology"`
	DefaultTopology bool   `json:"default_topology,omitempty"`
	Ranks           int    `json:"ranks"`
	GPUs            int    `json:"gpus"`
	logSettings
}

// String says it in a line: "box rtxpro6000-2s (the default; --topo
// names the box the log ran on), 4 ranks (devices 0-3 of its 8); NCCL
// settings ...".
func (f fitOf) String() string {
	box := "box " + f.Topology
	if f.DefaultTopology {
		box += " (the default; --topo names the box the log ran on)"
	}
	return fmt.Sprintf("%s, %d ranks (devices 0-%d of its %d); %s", box, f.Ranks, f.Ranks-1, f.GPUs, f.logSettings)
}

// collective is the collective the log measured: what its text or file
// name says (lg.Op), else --op; --op naming another than the log's is
// refused, as fitting one collective's times as another's would be.
func (m *ncclTestsMode) collective(lg *nccltests.Log) (model.Collective, error) {
	if m.op == "" {
		if lg.Op == "" {
			return "", flagError("--op", nil, "%s does not say which collective it measured; pass it", m.file)
		}
		// A collective the fit does not take is said before anything
		// else (the log's skipped lines, its settings), naming what it
		// takes: parseCollective's list names alltoall, which the
		// executor runs but the fit refuses.
		if coll, err := parseCollective(lg.Op); err != nil || !slices.Contains(calibrate.FittedCollectives, coll) {
			return "", fmt.Errorf("%s measured %s: calibrate --nccl-tests fits %s", m.file, lg.Op, collectiveList(calibrate.FittedCollectives))
		}
		return model.Collective(lg.Op), nil
	}
	coll, err := parseCollective(m.op)
	if err != nil {
		return "", causeError("--op", quote(m.op), err)
	}
	if !slices.Contains(calibrate.FittedCollectives, coll) {
		return "", flagError("--op", m.op, "calibrate --nccl-tests fits %s", collectiveList(calibrate.FittedCollectives))
	}
	if lg.Op != "" && lg.Op != string(coll) {
		return "", flagError("--op", m.op, "%s measured %s (its text or file name says so); --op is only for a log that does not say", m.file, lg.Op)
	}
	return coll, nil
}

// checkLogBox refuses to fit a log on a box it did not run on, as
// compare's checkBackend refuses to price a trace there: the times of
// tpscope's CPU ranks (goroutines in host memory) on a box of GPUs, a
// GPU's log on the CPU box 'calibrate --backend cpu' writes, and GPUs
// other than the box's (checkRanOn). topoArg is --topo as given, ""
// when the box is the default.
func checkLogBox(file string, lg *nccltests.Log, t *topology.Topology, topoArg string) error {
	cpuBox := t.IsCPUBox()
	switch {
	case lg.CPURanks && cpuBox:
		return nil
	case lg.CPURanks && topoArg != "":
		return flagError("--topo", topoArg, "its GPUs are %s, and %s was measured on tpscope's CPU ranks (goroutines in host memory: not GPU figures): pass --topo with the JSON 'tpscope calibrate --backend cpu' wrote", t.DeviceOf(0).Name, file)
	case lg.CPURanks:
		return usageErrorf("%s was measured on tpscope's CPU ranks (goroutines in host memory: not GPU figures); the default box %s has %s: pass --topo with the JSON 'tpscope calibrate --backend cpu' wrote", file, t.Name, t.DeviceOf(0).Name)
	case cpuBox:
		ran := "GPUs"
		if len(lg.Devices) > 0 && lg.Devices[0] != "" && lg.Devices[0] != "-" {
			ran = lg.Devices[0]
		}
		return flagError("--topo", cmp.Or(topoArg, t.Name), "it is a box of CPU ranks ('tpscope calibrate --backend cpu'), and %s was measured on %s: pass --topo with the box it ran on", file, ran)
	}
	return checkRanOn(file, "the log", lg.Devices, t, topoArg)
}

// checkLogRanks refuses a log of one rank, whose collective crosses no
// link, and a box with fewer GPUs than the ranks an nccl-tests log
// measured, naming the flag that chose it (--gpus, --topo) or the default
// box.
func checkLogRanks(sc *scenarioFlags, file string, ranks int, t *topology.Topology) error {
	if ranks == 1 {
		return usageErrorf("%s measured 1 rank: a collective of one rank crosses no link, so it has nothing to fit (run nccl-tests over several GPUs: -g N, or N processes)", file)
	}
	if ranks <= t.NumGPUs() {
		return nil
	}
	switch {
	case sc.changed("gpus"):
		return flagError("--gpus", sc.gpus, "%s measured %d ranks: want at least as many GPUs", file, ranks)
	case sc.changed("topo"):
		return flagError("--topo", sc.topo, "%s has %d GPUs and %s measured %d ranks: pass a box with at least as many", t.Name, t.NumGPUs(), file, ranks)
	}
	return usageErrorf("%s measured %d ranks; the default box %s has %d GPUs: pass --topo with the box the log ran on", file, ranks, t.Name, t.NumGPUs())
}

func reportFit(w io.Writer, format, out string, coll model.Collective, of fitOf, fit *calibrate.CollectiveFit) error {
	return render(w, format, view{
		JSON: struct {
			Out string `json:"out"`
			Op  string `json:"op"`
			fitOf
			Samples         int                         `json:"samples"`
			RMSErrFrac      float64                     `json:"rms_err_frac"`
			PriorRMSErrFrac float64                     `json:"prior_rms_err_frac"`
			Params          []topology.CollectiveParams `json:"params"`
			OneSize         []calibrate.OneSizeFit      `json:"one_size,omitempty"`
		}{out, string(coll), of, fit.Samples, fit.RMSErrFrac, fit.PriorRMSErrFrac, fit.Params, fit.OneSize},
		Text: func(w io.Writer, _ bool) error { return writeFit(w, out, coll, of, fit) },
	})
}

// writeFit is the table of an nccl-tests fit, after the line that says
// what it is of (the box, ranks and NCCL settings).
func writeFit(w io.Writer, out string, coll model.Collective, of fitOf, fit *calibrate.CollectiveFit) error {
	fmt.Fprintf(w, "# fit of %s\n", of)
	fmt.Fprintf(w, "# %s: %d samples; RMS relative error %.1f %% calibrated, %.1f %% with NCCL's constants\n",
		coll, fit.Samples, 100*fit.RMSErrFrac, 100*fit.PriorRMSErrFrac)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algo\tproto\tp2p\tranks\tbase_lat(us)\thw_lat(us)\tbusbw(GB/s)\tsamples\trms_err\t")
	for _, p := range fit.Params {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.3f\t%.3f\t%.2f\t%d\t%.1f%%\t\n", p.Algo, p.Proto, p.P2PLevel, p.Ranks, p.BaseLatUs, p.HwLatUs, p.BusBWGBps, p.Samples, 100*p.RMSRelErr)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, o := range fit.OneSize {
		fmt.Fprintf(w, "# %s/%s: its %d samples are of one size (%d B): one time cannot tell latency from bandwidth, so the fit moves both from NCCL's constants by their shares of it; other sizes of this protocol are extrapolated (measure several sizes in its range to fit both)\n",
			o.Algo, o.Proto, o.Samples, o.Bytes)
	}
	fmt.Fprintf(w, "wrote %s\n", out)
	return nil
}

// collectiveList names collectives as a message lists them: "a, b and c".
func collectiveList(cs []model.Collective) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = string(c)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
