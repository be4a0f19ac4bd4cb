package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/report/build"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
)

// predictOnlyFlags are the scenario flags of a report without traces;
// with --trace the traces record the scenario and --model, --plan,
// --workload, --options and --topo override it.
var predictOnlyFlags = []string{"tp", "ep", "dp", "dcp", "phase", "batch", "context", "mtp", "spec-tokens", "kv-dtype", "dense-dsa",
	"moe-dispatch", "gpus", "nccl-proto", "nccl-algo", "p2p-level", "p2p-disable", "cuda-graphs", "custom-ar", "ar-norm-fusion",
	"overlap", "mtp-accept", "gpu-mem-util", "attention-backend"}

func init() {
	register(&Verb{
		Name:  "report",
		Short: "write one self-contained HTML report: timeline per rank predicted vs measured, bars, tables",
		Long: `Writes one HTML file (-o FILE) that opens from disk with no network: the data
embedded as JSON, its script and styles inline.

It shows a zoomable timeline of one step per rank, the predicted lane above the
measured lane, ops coloured by kind, collectives linked across the ranks of their
group and the critical path marked; hovering an op shows its FLOPs, bytes, bound,
cost parameters and measured median and spread. Bars compare predicted and
measured time per op kind and per layer; tables list the ops with the largest
error and, when given, the advice with its gains and caveats.

Inputs (any combination):
  --trace SRC    traces compare reads (OTLP JSON from 'tpscope run', Jaeger,
                 PyTorch-profiler Kineto JSON); repeatable. Each scenario they
                 record is predicted and compared as 'tpscope compare' does;
                 one step is drawn (the one nearest the median step time) and
                 every op's hover holds its median and spread over all steps.
                 --model, --plan, --workload, --options and --topo override
                 the recorded scenario (and are needed for Kineto traces).
  --from FILE    a saved 'tpscope advise --output json' or 'tpscope compare
                 --output json' result; repeatable. A saved comparison has no
                 op timings: it gives bars and tables, not a timeline.
  scenario flags without --trace (--model, --tp, --batch, --cuda-graphs, ...,
                 as 'tpscope predict' takes them): the predicted step alone.
                 Used when neither --trace nor --from is given, or when one of
                 them is set next to --from.`,
		Example: `tpscope report --model kimi-k2.5-nvfp4 --tp 8 --batch 1 --context 4096 --cuda-graphs -o predicted.html
tpscope report --trace exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph.otlp.jsonl.gz -o h200.html
tpscope advise --output json > advice.json && tpscope report --from advice.json -o advice.html`,
		Flags: func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error {
			sc := addModelScenarioFlags(fs)
			sf := addSimFlags(fs)
			var srcs, saved []string
			fs.StringArrayVar(&srcs, "trace", nil, "trace source (file, directory, jaeger://host:16686?service=tpscope, URL); repeat for several")
			fs.StringArrayVar(&saved, "from", nil, "a saved 'advise --output json' or 'compare --output json' result; repeat for several")
			tf := &traceScenarioFlags{}
			fs.StringVar(&tf.plan, "plan", "", `with --trace: parallel plan, e.g. "tp8" (default: the traces' tpscope.plan)`)
			fs.StringVar(&tf.workload, "workload", "", `with --trace: workload, e.g. "decode b8 ctx4096 kv=fp8" (default: the traces' tpscope.workload)`)
			fs.StringVar(&tf.options, "options", "", "with --trace: optimizations, comma-separated, as compare takes them (default: the traces' tpscope.options)")
			out := fs.StringP("out", "o", "", "the HTML file to write (required)")
			title := fs.String("title", "", "the report's title (default: the scenarios shown)")
			top := fs.Int("top", build.DefaultMaxOpRows, "op rows per table")
			return func(args []string, stdout, stderr io.Writer) error {
				srcs = append(srcs, args...)
				if *out == "" {
					return usageErrorf("no output file: pass -o FILE.html")
				}
				if *top < 1 {
					return usageErrorf("--top %d: want at least 1", *top)
				}
				var setPredict []string
				for _, n := range predictOnlyFlags {
					if fs.Changed(n) {
						setPredict = append(setPredict, "--"+n)
					}
				}
				if len(srcs) > 0 && len(setPredict) > 0 {
					return usageErrorf("%s: with --trace the traces record the scenario; override it with --model, --plan, --workload, --options or --topo", strings.Join(setPredict, ", "))
				}
				if len(srcs) == 0 {
					for _, n := range []string{"plan", "workload", "options"} {
						if fs.Changed(n) {
							return usageErrorf("--%s applies with --trace; without traces give the scenario as 'tpscope predict' does (--tp, --batch, --cuda-graphs, ...)", n)
						}
					}
				}
				in := build.Input{Title: *title, MaxOpRows: *top}
				// Saved results first: a bad file fails before any work.
				for _, path := range saved {
					s, err := build.ReadSavedFile(path)
					if err != nil {
						return usageErrorf("--from %v", err)
					}
					switch {
					case s.Advice != nil && in.Advice != nil:
						return usageErrorf("--from %s: a second advise result; a report shows one", path)
					case s.Advice != nil:
						in.Advice = s.Advice
					case in.Comparison != nil:
						return usageErrorf("--from %s: a second compare result; a report shows one (compare several traces in one run instead)", path)
					default:
						in.Comparison = s.Comparison
					}
				}
				if len(srcs) > 0 {
					if in.Comparison != nil {
						return usageErrorf("--trace and a saved compare result (--from) both give measurements; pass one")
					}
					if fs.Changed("model") {
						tf.model = sc.model
					}
					results, err := readTraces(srcs, stderr)
					if err != nil {
						return err
					}
					spec := tf.spec(fs, sf.topo)
					rep, err := traces.Compare(results, traces.CompareOptions{Override: spec})
					if err != nil {
						return err
					}
					in.Comparison, in.Traces, in.Override = rep, results, spec
				}
				scenarioSet := len(setPredict) > 0 || fs.Changed("model") || fs.Changed("topo")
				if len(srcs) == 0 && (len(saved) == 0 || scenarioSet) {
					pr, sched, err := predictForReport(sc, sf)
					if err != nil {
						return err
					}
					in.Prediction, in.Schedule = pr, sched
				}
				r, err := build.Build(in)
				if err != nil {
					return err
				}
				if err := report.WriteFile(*out, r); err != nil {
					return err
				}
				st, err := os.Stat(*out)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "wrote %s (%.2f MB): %d sections, %d op boxes\n", *out, float64(st.Size())/1e6, len(r.Sections), r.BoxCount())
				return nil
			}
		},
	})
}

// predictForReport predicts the scenario the flags name, with its schedule
// (the collectives' groups link the ranks' lanes).
func predictForReport(sc *scenarioFlags, sf *simFlags) (*sim.Prediction, *model.Schedule, error) {
	scen, err := simScenario(sc)
	if err != nil {
		return nil, nil, err
	}
	topo, opts, err := sf.resolve()
	if err != nil {
		return nil, nil, err
	}
	p, err := sim.New(topo, opts)
	if err != nil {
		return nil, nil, err
	}
	pr, sched, err := p.PredictScenarioSchedule(scen)
	if err != nil {
		var pe *model.PlanError
		if errors.As(err, &pe) {
			return nil, nil, usageErrorf("%v", err)
		}
		return nil, nil, err
	}
	return pr, sched, nil
}
