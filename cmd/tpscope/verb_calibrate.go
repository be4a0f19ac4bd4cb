package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/sim/nccltests"
	"github.com/tpscope/tpscope/topology"
)

// calibrateCommon holds the flags every calibrate mode shares: the
// scenario flags (the box to calibrate, the NCCL settings the measurements
// ran with, and, for traces, overrides of what they recorded), where to
// write the result and the report format.
type calibrateCommon struct {
	sc     *scenarioFlags
	out    string // -o: the calibrated topology JSON
	output string // table or json report on stdout
}

// calibrateMode is one source of measurements for 'tpscope calibrate'. A
// mode is selected by giving its flag (--nccl-tests FILE, --trace SRC,
// --backend cpu). Modes live in their own files and register in init with
// registerCalibrateMode; exactly one must be selected per run.
type calibrateMode struct {
	Flag string // the selecting flag's name, e.g. "nccl-tests"
	Arg  string // its value's placeholder, e.g. "FILE"
	// Bind registers the selecting flag and the mode's own flags on fs and
	// returns the run function.
	Bind func(fs *pflag.FlagSet) func(c *calibrateCommon, stdout, stderr io.Writer) error
}

var calibrateModes []calibrateMode

func registerCalibrateMode(m calibrateMode) { calibrateModes = append(calibrateModes, m) }

func init() {
	registerCalibrateMode(calibrateMode{Flag: "nccl-tests", Arg: "FILE", Bind: bindNCCLTestsMode})
	register(&Verb{
		Name:  "calibrate",
		Short: "fit cost parameters to measurements and write a calibrated topology",
		Long: `Fits cost parameters of a topology to measurements and writes the calibrated topology
(JSON with a "calibration" section saying where the numbers came from); pass it anywhere a
preset name is accepted. Choose the source of measurements with exactly one mode flag.

--nccl-tests FILE: the text output of nccl-tests. Every size is assigned to the algorithm and
protocol NCCL would pick (or the one --nccl-proto/--nccl-algo force, as the run's
NCCL_PROTO/NCCL_ALGO did), then per pair the base latency, per-step latency and bus bandwidth
are fitted in log space with NCCL's constants as the prior. Give --p2p-level/--p2p-disable as
the run had them: the parameters apply only under that setting.

--trace SRC: measured spans (see --help of the flag); --backend cpu: this machine.

Calibrate never writes a calibrated box from partial input: a cut or damaged trace or
nccl-tests log is an error naming the file and where it ends, even with --allow-partial
(which compare, report and trace read take to keep the complete steps).`,
		Example: "tpscope calibrate --nccl-tests all_reduce_perf.txt --topo rtxpro6000-2s -o box.json\ntpscope calibrate --nccl-tests ar_ll.txt --nccl-proto LL --p2p-level SYS -o box.json\ntpscope calibrate --trace run.otlp.jsonl --topo h200-nvswitch -o h200.json",
		Flags: func(fs *pflag.FlagSet) func([]string, io.Writer, io.Writer) error {
			c := &calibrateCommon{sc: addScenarioFlags(fs)}
			fs.StringVarP(&c.out, "out", "o", "", "write the calibrated topology JSON here (required)")
			fs.StringVar(&c.output, "output", "table", "report format on stdout: table or json")
			fs.Bool("allow-partial", false, "not honoured here: calibrate refuses a cut or damaged trace or nccl-tests log even with it (a box fitted to part of a run would look as if fitted to all of it)")
			sort.SliceStable(calibrateModes, func(i, j int) bool { return calibrateModes[i].Flag < calibrateModes[j].Flag })
			runs := make([]func(*calibrateCommon, io.Writer, io.Writer) error, len(calibrateModes))
			for i, m := range calibrateModes {
				runs[i] = m.Bind(fs)
			}
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("calibrate takes no arguments, got %q", args)
				}
				if err := checkOutput(c.output, "table", "json"); err != nil {
					return err
				}
				chosen := -1
				for i, m := range calibrateModes {
					if !fs.Changed(m.Flag) {
						continue
					}
					if chosen >= 0 {
						return usageErrorf("--%s and --%s: choose one source of measurements", calibrateModes[chosen].Flag, calibrateModes[i].Flag)
					}
					chosen = i
				}
				if chosen < 0 {
					var opts []string
					for _, m := range calibrateModes {
						opts = append(opts, "--"+m.Flag+" "+m.Arg)
					}
					return usageErrorf("no measurements: pass one of %s", strings.Join(opts, ", "))
				}
				if c.out == "" {
					return usageErrorf("-o FILE is required: where to write the calibrated topology")
				}
				if c.sc.perfDB != "" {
					return usageErrorf("--perf-db %s: calibrate fits tpscope's own cost parameters, and ops priced from tables have none to fit (drop --perf-db here; pass it to predict with the calibrated topology)", c.sc.perfDB)
				}
				return runs[chosen](c, stdout, stderr)
			}
		},
	})
}

// bindNCCLTestsMode is the --nccl-tests mode.
func bindNCCLTestsMode(fs *pflag.FlagSet) func(*calibrateCommon, io.Writer, io.Writer) error {
	file := fs.String("nccl-tests", "", "FILE: fit collective latency/bandwidth per protocol to an nccl-tests log (all_reduce_perf, all_gather_perf, reduce_scatter_perf); the NCCL flags say how it ran")
	op := fs.String("op", "", "collective of the log when neither its text nor its file name says (allreduce, allgather, reducescatter)")
	return func(c *calibrateCommon, stdout, stderr io.Writer) error {
		opts, err := c.sc.options()
		if err != nil {
			return err
		}
		t, _, err := c.sc.box()
		if err != nil {
			return err
		}
		lg, err := nccltests.ParseFile(*file)
		if err != nil {
			return err
		}
		opName := lg.Op
		if *op != "" {
			opName = *op
		}
		if opName == "" {
			return usageErrorf("%s: the log does not say which collective it measured; pass --op", *file)
		}
		coll, err := sim.ParseCollective(opName)
		if err != nil {
			return fmt.Errorf("%s: %v", *file, err)
		}
		ranks := lg.Ranks
		if ranks == 0 {
			ranks = t.NumGPUs()
			fmt.Fprintf(stderr, "%s: rank count not in the log; assuming %d (all GPUs of %s)\n", *file, ranks, t.Name)
		}
		if lg.Skipped > 0 {
			fmt.Fprintf(stderr, "%s: skipped %d lines that are not results (first at line %d)\n", *file, lg.Skipped, lg.FirstSkipped)
		}
		for _, w := range lg.Warnings {
			fmt.Fprintf(stderr, "%s: warning: %s\n", *file, w)
		}
		var samples []sim.CalSample
		for _, r := range lg.Rows {
			for _, tm := range r.Times() {
				samples = append(samples, sim.CalSample{Bytes: r.Bytes, TimeUs: tm})
			}
		}
		fit, err := sim.Calibrate(t, samples, sim.CalibrateOptions{
			Op: coll, Ranks: ranks,
			NCCL:    opts.NCCL,
			Source:  fmt.Sprintf("nccl-tests %s, %d ranks, %d sizes", *file, ranks, len(lg.Rows)),
			Created: time.Now().UTC().Format(time.RFC3339),
		})
		if err != nil {
			return fmt.Errorf("%s: %w", *file, err)
		}
		if err := fit.Topology.Save(c.out); err != nil {
			return err
		}
		return reportFit(stdout, c.output, c.out, coll, fit)
	}
}

func reportFit(w io.Writer, format, out string, coll model.Collective, fit *sim.CalibrationFit) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Out             string                      `json:"out"`
			Op              string                      `json:"op"`
			Samples         int                         `json:"samples"`
			RMSErrFrac      float64                     `json:"rms_err_frac"`
			PriorRMSErrFrac float64                     `json:"prior_rms_err_frac"`
			Params          []topology.CollectiveParams `json:"params"`
		}{out, string(coll), fit.Samples, fit.RMSErrFrac, fit.PriorRMSErrFrac, fit.Params})
	}
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
	fmt.Fprintf(w, "wrote %s\n", out)
	return nil
}
