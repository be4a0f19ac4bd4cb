package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/compare"
	reportbuild "github.com/tpscope/tpscope/report/build"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// bindTraceFlag registers --trace on *v: trace sources (file, directory,
// Jaeger URL), repeatable and comma-separated.
func bindTraceFlag(fs *pflag.FlagSet, v *[]string, what string) {
	fs.StringSliceVar(v, "trace", *v, "SRC: trace source (OTLP-JSON file, directory, jaeger://host:16686?service=tpscope, Kineto JSON); repeat or comma-separate for several; "+what)
}

// bindAllowPartialFlag registers --allow-partial on *v, for a verb that
// reads traces to show or compare them.
func bindAllowPartialFlag(fs *pflag.FlagSet, v *bool) {
	fs.BoolVar(v, "allow-partial", *v, "read a cut or damaged trace (a file that ends early, a gzip stream without its end, bytes that are not JSON) by keeping its complete steps and dropping the steps the break cut short; without it such input is an error")
}

// repeatedSource returns the first trace source of srcs that names one
// before it: the same string, or the same file by another spelling
// (./run.json, run.json). Read twice, its spans would count twice.
func repeatedSource(srcs []string) (string, bool) {
	key := func(s string) string {
		if strings.Contains(s, "://") {
			return s
		}
		return filepath.Clean(s)
	}
	for i, src := range srcs {
		for _, before := range srcs[:i] {
			if key(before) == key(src) {
				return src, true
			}
		}
	}
	return "", false
}

// readTraces reads every source; ctx's end (Ctrl-C) stops a long read. A
// source that repeats spans of another is a usage error naming both. A
// source that ends early or breaks is an error unless allowPartial, which
// keeps its complete steps. What was dropped or left out is the caller's
// to say (noteSources) once the traces are taken: notes printed before a
// refusal of the flags over them would promise a listing that never
// comes, and make the refusal more than one line.
func readTraces(ctx context.Context, srcs []string, allowPartial bool) ([]*traces.Result, error) {
	var out []*traces.Result
	// The same source named twice is refused before anything is read.
	if src, ok := repeatedSource(srcs); ok {
		return nil, flagError("--trace", src, "given twice: give each trace once")
	}
	for _, src := range srcs {
		res, err := traces.ReadAll(ctx, src, traces.WithAllowPartial(allowPartial))
		if err != nil {
			// compare, report and calibrate all take a box with --topo.
			return nil, notATrace(err, "--trace", "give it with --topo %s")
		}
		// A source given twice (or a file and a directory holding it)
		// would count every span twice.
		for _, prev := range out {
			if n := traces.Repeats(prev, res); n > 0 {
				return nil, flagError("--trace", src, "%d of its spans repeat spans of %s (same trace ID, span ID and start: the same trace read twice); give each trace once", n, prev.Source)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// noteSources says on stderr, per source, what --allow-partial kept of a
// damaged one and what its reader left out (events that are no spans:
// copies, kernels outside every step): listedIn names where the verb's
// output lists the items; "" lists them here.
func noteSources(stderr io.Writer, results []*traces.Result, listedIn string) {
	for _, res := range results {
		notePartial(stderr, res.Source, res)
		noteLeftOut(stderr, res.Source, res, listedIn)
	}
}

// maxLeftOutLines bounds the items noteLeftOut lists.
const maxLeftOutLines = 10

// noteLeftOut says on stderr how many items a source's reader left out,
// and where they are listed (listedIn) or, for "", lists them.
func noteLeftOut(stderr io.Writer, src string, res *traces.Result, listedIn string) {
	n := res.SkippedTotal - partialSkips(res)
	if n <= 0 {
		return
	}
	if listedIn != "" {
		fmt.Fprintf(stderr, "%s: left out %d items (listed in %s)\n", src, n, listedIn)
		return
	}
	fmt.Fprintf(stderr, "%s: left out %d items:\n", src, n)
	skips := res.Skipped[partialSkips(res):]
	for i, sk := range skips {
		if i == maxLeftOutLines {
			break
		}
		fmt.Fprintf(stderr, "  %s\n", sk.In(src))
	}
	if n > min(len(skips), maxLeftOutLines) {
		fmt.Fprintf(stderr, "  ... %d more\n", n-min(len(skips), maxLeftOutLines))
	}
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

var compareVerb = &Verb{
	UsageLine: "compare [--trace] SRC... [flags]",
	Short:     "compare measured traces with the prediction, per op, per kind and per step",
	Long: `Reads traces (OTLP-JSON files from 'tpscope run', Jaeger, or PyTorch-profiler
Kineto traces), predicts the scenario each step span records (the whole scenario as
tpscope.scenario, its box included, so a moved trace compares anywhere; --model and
the plan and workload flags, --cuda-graphs, --graph-sizes and --engine (how it ran)
must agree with what it measured; --topo and the other options override their field and are named in the
output, a default never does)
and aligns measured spans with predicted ops. A Kineto trace records no scenario: it
needs --model, --batch and --context; what its steps record is taken and checked, not
defaulted (its world size gives --tp unless you pass --tp/--dp, whose product must be it;
its engine's ranges give the phase, whose other steps are left out and counted, the
batch per rank, which --batch over --dp must be, and --engine, which a trace no engine's
ranges split must be given; its graph launches give --cuda-graphs);
--topo must be a box of the GPU it ran on. Alignment: by op ID, or for Kineto traces by
kernel kind and order (the k-th attention kernel of a step to the k-th attention op;
NCCL kernels to the collectives in order; per layer or per step when the counts differ).

Reports the step time, each kind and each op: predicted, measured median and p10-p90
over the steps of every trace and the ranks (two runs of a scenario are twice the
steps), and error = (predicted - measured) / measured; ops with the largest absolute
error first. Predicted ops no span measured are left out of the predicted step and
kinds, and said, with the line calibrate prints when the traces' program differs
from the schedule. A source that repeats another's spans (the same trace given
twice) is refused; a directory holding a trace and its copy keeps each span once.
A source that mixes scenarios is compared per scenario. Traces of one scenario run
with different options give each optimization's predicted and measured gain and a
verdict: worth it, not worth it, or model wrong here by X %.
Spans without op IDs, unknown op IDs and ops never measured are counted with
their reason. A cut or damaged trace (a file that ends early, a gzip stream
without its end, bytes that are not JSON) is an error naming the file and the
byte where it ends; --allow-partial compares its complete steps instead and
says how many steps and spans it dropped.`,
	Example: `tpscope compare --trace run.json
tpscope compare --trace base.json --trace graphs.json --output markdown --plot cmp.png
tpscope compare --trace rank0.pt.trace.json.gz --model kimi-k2.5-nvfp4 --tp 8 --batch 8 --context 4096`,
	New: func() Options { return newCompareOptions() },
}

// compareOptions are compare's flags.
type compareOptions struct {
	traces       []string // --trace sources
	sc           *scenarioFlags
	output       string
	plot         string
	top          int
	allowPartial bool
}

func newCompareOptions() *compareOptions {
	o := &compareOptions{sc: newScenarioFlags(), output: formatTable, top: 20}
	o.sc.counts = []countFlag{{"top", &o.top}}
	return o
}

func (o *compareOptions) Bind(fs *pflag.FlagSet) {
	bindTraceFlag(fs, &o.traces, "the measurements to compare")
	o.sc.Bind(fs)
	bindOutputFlag(fs, &o.output, "one row per compared op of every scenario", allFormats...)
	fs.StringVar(&o.plot, "plot", o.plot, "write a predicted-vs-measured scatter and per-kind bars to FILE.png or FILE.svg")
	fs.IntVar(&o.top, "top", o.top, "op rows per scenario in table and markdown output (0 = all)")
	bindAllowPartialFlag(fs, &o.allowPartial)
}

func (o *compareOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(o.traces)+len(args) == 0 {
		return usageErrorf("no trace: pass --trace SRC")
	}
	if err := checkOutput(o.output, allFormats...); err != nil {
		return err
	}
	if err := checkTopRows(o.sc.changed("top"), o.top, o.output, "compared op of every scenario"); err != nil {
		return err
	}
	if err := checkPlotPath(o.plot); err != nil {
		return err
	}
	if err := o.sc.checkPassed(); err != nil {
		return err
	}
	if err := checkTraceSources("--trace", o.traces); err != nil {
		return err
	}
	if err := checkTraceSources("", args); err != nil {
		return err
	}
	srcs := append(slices.Clip(o.traces), args...)
	results, err := readTraces(ctx, srcs, o.allowPartial)
	if err != nil {
		return err
	}
	scs, err := o.sc.traceScenarios(results, traceUse{allowPartial: o.allowPartial})
	if err != nil {
		return err
	}
	rep, err := compare.Compare(results, compare.Options{Scenarios: scs})
	if err != nil {
		return err
	}
	// The table, markdown and JSON list each source's left-out items;
	// the CSV is the ops alone, so they are listed on stderr there.
	listedIn := "the output, under its sources"
	if o.output == "csv" {
		listedIn = ""
	}
	noteSources(std.Stderr, results, listedIn)
	var files []func() error
	if o.plot != "" {
		files = append(files, func() error { return compare.WritePlot(o.plot, rep) })
	}
	return renderThen(std.Stdout, o.output, view{
		JSON: rep,
		CSV:  rep.WriteCSV,
		Text: func(w io.Writer, md bool) error {
			if md {
				return rep.WriteMarkdown(w, o.top)
			}
			return rep.WriteTable(w, o.top)
		},
	}, files...)
}

// maxNamedDocBytes bounds what notATrace reads of a file that is no
// trace to name what it is (a saved compare result of a large run is a
// few MB).
const maxNamedDocBytes = 256 << 20

// notATrace words the error of a trace source that is a JSON document of
// another kind tpscope reads, naming what it is and the flag that takes
// it: a topology (a calibrate or topo discover output) goes to --topo, a
// saved advise, compare or predict result to report --from; the readers'
// "unknown trace format" said neither. flag is where the source came
// from ("--trace", or "" for an argument); topoHint how this verb takes
// a box. Any other error is returned as it is.
func notATrace(err error, flag, topoHint string) error {
	var nt *traces.NotTraceError
	if !errors.As(err, &nt) {
		return err
	}
	fh, oerr := os.Open(nt.Source)
	if oerr != nil {
		return err
	}
	defer fh.Close()
	data, rerr := io.ReadAll(io.LimitReader(fh, maxNamedDocBytes))
	if rerr != nil {
		return err
	}
	if box := topology.Sniff(data); box != "" {
		return flagError(flag, nt.Source, "a topology JSON (box %s), not a trace: %s", box, fmt.Sprintf(topoHint, nt.Source))
	}
	if kind := reportbuild.SavedKind(data); kind != "" {
		return flagError(flag, nt.Source, "a saved 'tpscope %s --output json' result, not a trace: 'tpscope report --from %s' reads it", kind, nt.Source)
	}
	return err
}
