package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/traces"
)

// addTraceFlag registers --trace: trace sources (file, directory, Jaeger
// URL), repeatable and comma-separated.
func addTraceFlag(fs *pflag.FlagSet, what string) *[]string {
	return fs.StringSlice("trace", nil, "SRC: trace source (OTLP-JSON file, directory, jaeger://host:16686?service=tpscope, Kineto JSON); repeat or comma-separate for several; "+what)
}

// addAllowPartialFlag registers --allow-partial on a verb that reads
// traces to show or compare them.
func addAllowPartialFlag(fs *pflag.FlagSet) *bool {
	return fs.Bool("allow-partial", false, "read a cut or damaged trace (a file that ends early, a gzip stream without its end, bytes that are not JSON) by keeping its complete steps and dropping the steps the break cut short; without it such input is an error")
}

// readTraces reads every source; Ctrl-C stops a long read. A source that
// ends early or breaks is an error unless allowPartial, which keeps its
// complete steps and says on stderr what was dropped.
func readTraces(srcs []string, stderr io.Writer, allowPartial bool) ([]*traces.Result, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var out []*traces.Result
	for _, src := range srcs {
		res, err := traces.ReadAll(ctx, src, traces.WithAllowPartial(allowPartial))
		if err != nil {
			return nil, err
		}
		notePartial(stderr, src, res)
		if n := res.SkippedTotal - partialSkips(res); n > 0 {
			fmt.Fprintf(stderr, "%s: left out %d items (see the report)\n", src, n)
		}
		out = append(out, res)
	}
	return out, nil
}

// notePartial says on stderr what --allow-partial kept of a damaged source.
func notePartial(stderr io.Writer, src string, res *traces.Result) {
	if res.Partial != nil {
		fmt.Fprintf(stderr, "%s: --allow-partial: %s\n", src, res.Partial)
	}
}

// partialSkips is the number of Skipped entries that report the damage
// (the first one, when the source was read partially).
func partialSkips(res *traces.Result) int {
	if res.Partial != nil {
		return 1
	}
	return 0
}

func init() {
	register(&Verb{
		Name:  "compare",
		Short: "compare measured traces with the prediction, per op, per kind and per step",
		Long: `Reads traces (OTLP-JSON files from 'tpscope run', Jaeger, or PyTorch-profiler
Kineto traces), predicts the scenario each step span records (the whole scenario as
tpscope.scenario, its box included, so a moved trace compares anywhere; a scenario
flag you pass overrides its field and is named in the output, a default never does)
and aligns measured spans with predicted ops. A Kineto trace records no scenario: it
needs --model, --batch and --context (its world size gives --tp unless you pass it;
--topo must be a box of the GPU it ran on). Alignment: by op ID, or for Kineto traces by
kernel kind and order (the k-th attention kernel of a step to the k-th attention op;
NCCL kernels to the collectives in order; per layer or per step when the counts differ).

Reports the step time, each kind and each op: predicted, measured median and p10-p90
over steps and ranks, and error = (predicted - measured) / measured; ops with the
largest absolute error first. A source that mixes scenarios is compared per scenario.
Traces of one scenario run with different options give each optimization's predicted
and measured gain and a verdict: worth it, not worth it, or model wrong here by X %.
Spans without op IDs, unknown op IDs and ops never measured are counted with
their reason. A cut or damaged trace (a file that ends early, a gzip stream
without its end, bytes that are not JSON) is an error naming the file and the
byte where it ends; --allow-partial compares its complete steps instead and
says how many steps and spans it dropped.`,
		Example: `tpscope compare --trace run.json
tpscope compare --trace base.json --trace graphs.json --output markdown --plot cmp.png
tpscope compare --trace rank0.pt.trace.json.gz --model kimi-k2.5-nvfp4 --tp 8 --batch 8 --context 4096`,
		Flags: func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error {
			srcs := addTraceFlag(fs, "the measurements to compare")
			sc := addScenarioFlags(fs)
			output := addOutputFlag(fs, "one row per compared op of every scenario", allFormats...)
			plotFile := fs.String("plot", "", "write a predicted-vs-measured scatter and per-kind bars to FILE.png or FILE.svg")
			top := fs.Int("top", 20, "op rows per scenario in table and markdown output (0 = all)")
			allowPartial := addAllowPartialFlag(fs)
			return func(args []string, stdout, stderr io.Writer) error {
				*srcs = append(*srcs, args...)
				if len(*srcs) == 0 {
					return usageErrorf("no trace: pass --trace SRC")
				}
				if err := checkOutput(*output, allFormats...); err != nil {
					return err
				}
				if err := checkPlotPath(*plotFile); err != nil {
					return err
				}
				if err := sc.checkPassed(); err != nil {
					return err
				}
				results, err := readTraces(*srcs, stderr, *allowPartial)
				if err != nil {
					return err
				}
				scs, err := sc.traceScenarios(results, false)
				if err != nil {
					return err
				}
				rep, err := compare.Compare(results, compare.Options{Scenarios: scs})
				if err != nil {
					return err
				}
				if *plotFile != "" {
					if err := compare.WritePlot(*plotFile, rep); err != nil {
						return err
					}
				}
				switch *output {
				case "json":
					return rep.WriteJSON(stdout)
				case formatMarkdown:
					return rep.WriteMarkdown(stdout, *top)
				case formatCSV:
					return rep.WriteCSV(stdout)
				}
				return rep.WriteTable(stdout, *top)
			}
		},
	})
}
