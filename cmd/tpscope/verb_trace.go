package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/traces"
)

var traceReadVerb = &Verb{
	UsageLine: "trace read [--trace] SRC... [flags]",
	Short:     "read a trace source and print its normalized spans",
	Long: `Reads one trace source into the normalized span list that compare and
calibrate use, and prints a summary (format, traces, steps, ranks, op spans
per kind, scenarios, what was left out and why) and the spans.

Sources: an OTLP JSON file (what --trace file:PATH writes, or the
OpenTelemetry Collector's file exporter), Jaeger JSON downloaded from its UI,
a Chrome/Kineto trace from the PyTorch profiler (.json or .json.gz; GPU
kernels are classified into op kinds), a directory of such files (its
other JSON documents, such as verdict -o's verdict.json or a model's
config.json, left out and said), an http(s) URL, or Jaeger's query API:
jaeger://HOST:16686?service=tpscope&limit=20&api=v3|v1&lookback=24h&trace=ID.

A cut or damaged source (a file that ends early, a gzip stream without its
end, bytes that are not JSON, a tpscope trace that ends between a step's
batches: op spans whose rank and root spans never came) is an error naming
the file, the byte (and line) where it ends or breaks and what is missing; --allow-partial reads it anyway,
keeping the complete steps (a trace with its root "step" span and every
span's parent, none of it in the batch the break cut; of a profiler trace,
the steps that ended before the last kernel read started) and saying how
many steps and spans were dropped.

Several sources are read before anything is printed, and each machine
format is one document: --output json is one source's object, or the
objects of several under "sources"; --output csv one table whose first
column names the source of each span, its name whole.

Times: start is Unix nanoseconds; durations in microseconds (the table and
CSV's dur_us), in nanoseconds in JSON (duration_ns).`,
	Example: `tpscope trace read run.otlp.jsonl
tpscope trace read --trace run-a.otlp.jsonl,run-b.otlp.jsonl --spans 0
tpscope trace read 'jaeger://127.0.0.1:16686?service=tpscope&limit=5' --spans 0
tpscope trace read rank0.pt.trace.json.gz --output json > spans.json
tpscope trace read --allow-partial cut.otlp.jsonl.gz --spans 0`,
	New: func() Options { return &traceReadOptions{output: formatTable, spans: 50} },
}

// traceReadOptions are trace read's flags.
type traceReadOptions struct {
	traces       []string // --trace sources
	output       string
	spans        int    // spans to list per source: -1 all
	format       string // forced source format
	allowPartial bool
	fs           *pflag.FlagSet
}

func (o *traceReadOptions) Bind(fs *pflag.FlagSet) {
	o.fs = fs
	bindTraceFlag(fs, &o.traces, "the sources to read (also as arguments)")
	bindOutputFlag(fs, &o.output, "one row per listed span", allFormats...)
	fs.IntVar(&o.spans, "spans", o.spans, "spans to list per source (0: none, -1: all); the table and markdown list 50 unless it is given, JSON and CSV every span")
	fs.StringVar(&o.format, "format", o.format, "force the source format: otlp-json, jaeger-v1, jaeger-v3, kineto (default: from the content)")
	bindAllowPartialFlag(fs, &o.allowPartial)
}

func (o *traceReadOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(o.traces)+len(args) == 0 {
		return usageErrorf("no source: pass --trace SRC (or SRC as an argument)")
	}
	if err := checkOutput(o.output, allFormats...); err != nil {
		return err
	}
	if o.spans < -1 {
		return flagError("--spans", o.spans, "want -1 (all), 0 (none) or a count")
	}
	// A JSON or CSV document is the span list a program reads (the
	// example's "--output json > spans.json"): it holds every span unless
	// --spans cuts it, which is then said on stderr, as the table says it
	// under its list.
	machine := o.output == formatJSON || o.output == formatCSV
	if machine && !o.fs.Changed("spans") {
		o.spans = -1
	}
	if err := traces.CheckFormat(o.format); err != nil {
		return causeError("--format", nil, err)
	}
	opts := []traces.ReadOption{traces.WithAllowPartial(o.allowPartial)}
	if o.format != "" {
		opts = append(opts, traces.WithFormat(o.format))
	}
	if err := checkTraceSources("--trace", o.traces, opts...); err != nil {
		return err
	}
	if err := checkTraceSources("", args, opts...); err != nil {
		return err
	}
	// A source named twice (as an argument and by --trace, or twice by
	// either) would be read and listed twice.
	if src, ok := repeatedSource(append(slices.Clip(o.traces), args...)); ok {
		return flagError("trace source", src, "given twice (by --trace or as an argument): give each trace once")
	}
	// Every source is read before anything is printed: the output is one
	// document (one JSON value, one CSV table) however many sources, and a
	// source that cannot be read stops the verb before it.
	var read []traceRead
	for i, src := range append(slices.Clip(o.traces), args...) {
		r, err := traces.Open(src, opts...)
		if err != nil {
			return err
		}
		res, err := r.Read(ctx)
		if err != nil {
			flag := "--trace"
			if i >= len(o.traces) {
				flag = "trace source"
			}
			return notATrace(err, flag, "compare, report and calibrate take it with --topo %s")
		}
		notePartial(std.Stderr, src, res)
		spans := res.Spans
		if o.spans >= 0 && len(spans) > o.spans {
			spans = spans[:o.spans]
			if machine {
				fmt.Fprintf(std.Stderr, "%s: %d of %d spans listed (--spans -1 lists all)\n", src, len(spans), len(res.Spans))
			}
		}
		read = append(read, traceRead{src: src, res: res, sum: traces.Summarize(res), spans: spans})
	}
	return writeTraceRead(std.Stdout, read, o.output)
}

// traceRead is one source as trace read lists it: its summary and the
// spans to list (the first --spans of them).
type traceRead struct {
	src   string
	res   *traces.Result
	sum   traces.Summary
	spans []traces.Span
}

// writeTraceRead prints each source's summary and listed spans: as text,
// one block per source; as JSON, one source's object, or several sources'
// objects under "sources" (one document either way); as CSV, one table of
// every listed span with the source it came from.
func writeTraceRead(w io.Writer, read []traceRead, output string) error {
	var js any
	if output == formatJSON {
		docs := make([]traceReadJSON, len(read))
		for i, r := range read {
			docs[i] = traceJSON(r.sum, r.spans)
		}
		js = docs[0]
		if len(docs) > 1 {
			js = struct {
				Sources []traceReadJSON `json:"sources"`
			}{docs}
		}
	}
	return render(w, output, view{
		JSON: js,
		CSV:  func(w io.Writer) error { return writeTraceCSV(w, read) },
		Text: func(w io.Writer, md bool) error {
			for i, r := range read {
				if i > 0 {
					fmt.Fprintln(w)
				}
				writeTraceSummary(w, r.sum, md)
				if len(r.spans) > 0 {
					fmt.Fprintln(w)
					if err := writeSpanTable(w, r.spans, md); err != nil {
						return err
					}
					if len(r.spans) < len(r.res.Spans) {
						fmt.Fprintf(w, "(%d of %d spans; --spans -1 lists all)\n", len(r.spans), len(r.res.Spans))
					}
				}
			}
			return nil
		},
	})
}

func traceJoinInts(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	if len(v) > 2 && v[len(v)-1]-v[0] == len(v)-1 {
		return fmt.Sprintf("%d-%d", v[0], v[len(v)-1])
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func writeTraceSummary(w io.Writer, s traces.Summary, md bool) {
	rows := [][2]string{
		{"source", s.Source}, {"format", s.Format},
		{"traces", strconv.Itoa(s.Traces)}, {"spans", strconv.Itoa(s.Spans)}, {"op spans", strconv.Itoa(s.OpSpans)},
		{"steps", traceJoinInts(s.Steps)}, {"ranks", traceJoinInts(s.Ranks)}, {"services", strings.Join(s.Services, ",")},
	}
	for i := range s.Scenarios {
		rows = append(rows, [2]string{fmt.Sprintf("scenario %d", i+1), s.Scenarios[i].String()})
	}
	for _, k := range s.Kinds {
		rows = append(rows, [2]string{"kind " + k.Kind, fmt.Sprintf("%d spans, %.1f us total", k.Spans, k.TotalUs)})
	}
	for _, k := range s.Kineto {
		rows = append(rows, [2]string{"step rule", kinetoStepsLine(&k)}, [2]string{"placed", kinetoPlacedLine(&k)})
	}
	if s.Partial != nil {
		rows = append(rows, [2]string{"partial", s.Partial.String()})
	}
	rows = append(rows, [2]string{"left out", strconv.Itoa(s.SkippedTotal)})
	for i, sk := range s.Skipped {
		if i == 10 {
			rows = append(rows, [2]string{"", fmt.Sprintf("... %d more", s.SkippedTotal-10)})
			break
		}
		rows = append(rows, [2]string{"", sk.String()})
	}
	if md {
		fmt.Fprintln(w, "| | |\n|---|---|")
		for _, r := range rows {
			fmt.Fprintf(w, "| %s | %s |\n", r[0], strings.ReplaceAll(r[1], "|", `\|`))
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	tw.Flush()
}

// spanColumns: op_id is the span's op ID (for a Kineto kernel, the op it
// was placed on; its name is the kernel's), "-" when it has none.
var spanColumns = []string{"trace", "span", "parent", "name", "op_id", "rank", "step", "kind", "seq", "start_unix_ns", "dur_us", "predicted_us"}

// spanRow is a span's cells; short cuts a long name (a kernel's C++
// signature) to 60 characters for a table a person reads.
func spanRow(s *traces.Span, short bool) []string {
	parent := "-"
	if !s.IsRoot() {
		parent = s.ParentID.String()
	}
	num := func(i int) string {
		if i < 0 {
			return "-"
		}
		return strconv.Itoa(i)
	}
	pred := "-"
	if s.PredictedUs > 0 {
		pred = strconv.FormatFloat(s.PredictedUs, 'f', 3, 64)
	}
	name := s.Name
	if short && len(name) > 60 {
		name = name[:57] + "..."
	}
	opID := s.OpID
	if opID == "" {
		opID = "-"
	}
	return []string{s.TraceID.String(), s.SpanID.String(), parent, name, opID, num(s.Rank), num(s.Step), s.OpKind, num(s.Seq),
		strconv.FormatInt(s.Start, 10), strconv.FormatFloat(float64(s.Duration)/float64(time.Microsecond), 'f', 3, 64), pred}
}

func writeSpanTable(w io.Writer, spans []traces.Span, md bool) error {
	rows := make([][]string, len(spans))
	for i := range spans {
		rows[i] = spanRow(&spans[i], true)
		if md {
			for k, c := range rows[i] {
				rows[i][k] = strings.ReplaceAll(c, "||", `\|\|`)
			}
		}
	}
	return writeRows(w, spanColumns, rows, md)
}

// writeTraceCSV writes the listed spans of every source as one table, a
// row per span: the source it was read from first (two files may hold
// the same trace and span IDs), its name whole.
func writeTraceCSV(w io.Writer, read []traceRead) error {
	var rows [][]string
	for _, r := range read {
		for i := range r.spans {
			rows = append(rows, append([]string{r.src}, spanRow(&r.spans[i], false)...))
		}
	}
	return writeCSV(w, append([]string{"source"}, spanColumns...), rows)
}

type spanJSON struct {
	TraceID     string         `json:"trace_id"`
	SpanID      string         `json:"span_id"`
	ParentID    string         `json:"parent_id,omitempty"`
	Name        string         `json:"name"`
	Service     string         `json:"service,omitempty"`
	StartUnixNs int64          `json:"start_unix_ns"`
	DurationNs  int64          `json:"duration_ns"`
	Rank        int            `json:"rank"`
	Step        int            `json:"step"`
	OpID        string         `json:"op_id,omitempty"`
	OpKind      string         `json:"op_kind,omitempty"`
	Layer       int            `json:"layer"`
	Seq         int            `json:"seq"`
	KindSeq     int            `json:"kind_seq"`
	PredictedUs float64        `json:"predicted_us,omitempty"`
	DeviceUs    float64        `json:"device_us,omitempty"`
	Status      string         `json:"status,omitempty"`
	Attributes  map[string]any `json:"attributes,omitempty"`
}

// traceReadJSON is trace read's JSON output of one source.
type traceReadJSON struct {
	Summary traces.Summary `json:"summary"`
	Spans   []spanJSON     `json:"spans"`
}

// traceJSON is one source's summary and spans as trace read's JSON.
func traceJSON(sum traces.Summary, spans []traces.Span) traceReadJSON {
	out := traceReadJSON{Summary: sum, Spans: make([]spanJSON, 0, len(spans))}
	for i := range spans {
		s := &spans[i]
		j := spanJSON{TraceID: s.TraceID.String(), SpanID: s.SpanID.String(), Name: s.Name, Service: s.Service,
			StartUnixNs: s.Start, DurationNs: int64(s.Duration), Rank: s.Rank, Step: s.Step, OpID: s.OpID, OpKind: s.OpKind,
			Layer: s.Layer, Seq: s.Seq, KindSeq: s.KindSeq, PredictedUs: s.PredictedUs, DeviceUs: s.DeviceUs, Status: s.Status}
		if !s.IsRoot() {
			j.ParentID = s.ParentID.String()
		}
		if len(s.Attrs) > 0 {
			j.Attributes = make(map[string]any, len(s.Attrs))
			for _, a := range s.Attrs {
				j.Attributes[a.Key] = a.Value
			}
		}
		out.Spans = append(out.Spans, j)
	}
	return out
}

// kinetoStepsLine says which rule split a profiler trace into how many
// steps, with the phases its engine's ranges name.
func kinetoStepsLine(k *traces.KinetoFile) string {
	line := fmt.Sprintf("%s: %d steps", k.StepRule, len(k.Steps))
	if k.Engine != "" {
		line += " of " + k.Engine
	}
	phases := map[string]int{}
	var order []string
	for _, s := range k.Steps {
		if s.Phase == "" {
			continue
		}
		if phases[s.Phase] == 0 {
			order = append(order, s.Phase)
		}
		phases[s.Phase]++
	}
	for i, p := range order {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		line += fmt.Sprintf("%s%d %s", sep, phases[p], p)
		if i == len(order)-1 {
			line += ")"
		}
	}
	return line
}

// kinetoPlacedLine splits a profiler trace's kernel time by how it was
// placed on op IDs.
func kinetoPlacedLine(k *traces.KinetoFile) string {
	name, pos, none := k.Shares()
	return fmt.Sprintf("%.1f %% of the steps' kernel time by name, %.1f %% by position, %.1f %% not placed", 100*name, 100*pos, 100*none)
}
