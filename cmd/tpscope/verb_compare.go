package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// traceScenarioFlags are the scenario flags of compare and calibrate
// --trace: they override what the traces' step spans recorded and are the
// scenario of traces that record none (PyTorch-profiler traces).
type traceScenarioFlags struct {
	model, plan, workload, options string
}

func addTraceScenarioFlags(fs *pflag.FlagSet) *traceScenarioFlags {
	f := &traceScenarioFlags{}
	fs.StringVar(&f.model, "model", "", "model preset or config (default: the traces' tpscope.model)")
	fs.StringVar(&f.plan, "plan", "", `parallel plan, e.g. "tp8" or "tp1-dp8-ep" (default: the traces' tpscope.plan)`)
	fs.StringVar(&f.workload, "workload", "", `workload, e.g. "decode b8 ctx4096 kv=fp8" (default: the traces' tpscope.workload)`)
	fs.StringVar(&f.options, "options", "", "optimizations, comma-separated: cuda-graphs, ar-norm-fusion, overlap, p2p-disable, nccl-proto=P, nccl-algo=A, p2p-level=L, custom-ar=V, mtp-accept=R (default: the traces' tpscope.options)")
	return f
}

// spec returns the override spec; topo is the topology flag's value when
// the user set it.
func (f *traceScenarioFlags) spec(fs *pflag.FlagSet, topo string) traces.ScenarioSpec {
	s := traces.ScenarioSpec{Model: f.model, Plan: f.plan, Workload: f.workload, Options: f.options, OptionsSet: fs.Changed("options")}
	if fs.Changed("topo") {
		s.Topology = topo
	}
	return s
}

// readTraces reads every source; Ctrl-C stops a long read.
func readTraces(srcs []string, stderr io.Writer) ([]*traces.Result, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var out []*traces.Result
	for _, src := range srcs {
		res, err := traces.ReadAll(ctx, src)
		if err != nil {
			return nil, err
		}
		if res.SkippedTotal > 0 {
			fmt.Fprintf(stderr, "%s: left out %d items (see the report)\n", src, res.SkippedTotal)
		}
		out = append(out, res)
	}
	return out, nil
}

func init() {
	register(&Verb{
		Name:  "compare",
		Short: "compare measured traces with the prediction, per op, per kind and per step",
		Long: `Reads traces (OTLP-JSON files from 'tpscope run', Jaeger, or PyTorch-profiler
Kineto traces), predicts the scenario each step span records (model, topology, plan,
workload, options; flags override them and are needed for Kineto traces, which record
none) and aligns measured spans with predicted ops: by op ID, or for Kineto traces by
kernel kind and order (the k-th attention kernel of a step to the k-th attention op;
NCCL kernels to the collectives in order; per layer or per step when the counts differ).

Reports the step time, each kind and each op: predicted, measured median and p10-p90
over steps and ranks, and error = (predicted - measured) / measured; ops with the
largest absolute error first. A source that mixes scenarios is compared per scenario.
Traces of one scenario run with different options give each optimization's predicted
and measured gain and a verdict: worth it, not worth it, or model wrong here by X %.
Spans without op IDs, unknown op IDs, ops never measured and damaged input are
counted with their reason.`,
		Example: `tpscope compare --trace run.json
tpscope compare --trace base.json --trace graphs.json --output markdown --plot cmp.png
tpscope compare --trace rank0.pt.trace.json.gz --model kimi-k2.5-nvfp4 --plan tp8 --workload "decode b8 ctx4096"`,
		Flags: func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error {
			var srcs []string
			fs.StringArrayVar(&srcs, "trace", nil, "trace source (file, directory, jaeger://host:16686?service=tpscope, URL); repeat for several")
			topo := fs.String("topo", "", "topology preset or JSON file (default: the traces' tpscope.topology, else "+topology.DefaultPreset+")")
			sf := addTraceScenarioFlags(fs)
			output := fs.String("output", "table", "output format: table, markdown or json")
			plotFile := fs.String("plot", "", "write a predicted-vs-measured scatter and per-kind bars to FILE.png or FILE.svg")
			top := fs.Int("top", 20, "op rows per scenario in table and markdown output (0 = all)")
			return func(args []string, stdout, stderr io.Writer) error {
				srcs = append(srcs, args...)
				if len(srcs) == 0 {
					return usageErrorf("no trace: pass --trace SRC")
				}
				if err := checkOutput(*output, "table", "markdown", "json"); err != nil {
					return err
				}
				if err := checkPlotPath(*plotFile); err != nil {
					return err
				}
				results, err := readTraces(srcs, stderr)
				if err != nil {
					return err
				}
				rep, err := traces.Compare(results, traces.CompareOptions{Override: sf.spec(fs, *topo)})
				if err != nil {
					return err
				}
				if *plotFile != "" {
					if err := traces.WritePlot(*plotFile, rep); err != nil {
						return err
					}
				}
				switch *output {
				case "json":
					return rep.WriteJSON(stdout)
				case "markdown":
					return rep.WriteMarkdown(stdout, *top)
				}
				return rep.WriteTable(stdout, *top)
			}
		},
	})
}
