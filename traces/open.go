package traces

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Reader reads one trace source into the normalized span list.
//
// Read is called once, from one goroutine; it blocks until the source is
// read, ctx is done, or a fatal error occurs. Problems with parts of an
// intact source (a span without IDs, an unknown value type, a kernel
// outside every step) are not errors: the parts are left out and listed
// in Result.Skipped. A source that ends early or breaks (a cut file, a
// gzip stream without its end, bytes that are not JSON) is a
// *PartialError, unless WithAllowPartial(true) keeps its complete steps.
// Other errors mean nothing usable could be read (missing file, unknown
// format, collector unreachable). Every error names the source.
type Reader interface {
	Read(ctx context.Context) (*Result, error)
	// Source is what Open was given.
	Source() string
}

// ReadOption configures Open.
type ReadOption func(*readConfig)

type readConfig struct {
	client       *http.Client
	format       string
	noPlace      bool
	allowPartial bool
	table        *kernelTable
}

// WithHTTPClient sets the client for jaeger:// and http(s):// sources.
// Default: a client with a 60 s timeout.
func WithHTTPClient(c *http.Client) ReadOption { return func(rc *readConfig) { rc.client = c } }

// WithFormat forces the format (FormatOTLPJSON, FormatJaegerV1,
// FormatJaegerV3, FormatKineto) instead of sniffing it from the content.
func WithFormat(format string) ReadOption { return func(rc *readConfig) { rc.format = format } }

// CheckFormat checks a format name WithFormat would take ("" = by
// content).
func CheckFormat(format string) error {
	switch format {
	case "", FormatOTLPJSON, FormatJaegerV1, FormatJaegerV3, FormatKineto:
		return nil
	}
	return fmt.Errorf("trace format %q: want %s, %s, %s or %s", format, FormatOTLPJSON, FormatJaegerV1, FormatJaegerV3, FormatKineto)
}

// WithKernelPlacement says whether the kernels of Kineto traces get the
// op IDs of the (layer, role) they implement (kineto_layers.go). Default
// true; false leaves them without op IDs, for alignment by kind and order.
func WithKernelPlacement(on bool) ReadOption { return func(rc *readConfig) { rc.noPlace = !on } }

// Open returns the reader for src:
//
//	jaeger://host:16686?service=S&limit=N&api=v3|v1&lookback=24h&trace=ID   Jaeger query API over HTTP
//	http://... or https://...        a URL whose body is any of the formats below
//	file:PATH or PATH                a file, plain or gzip (by content, not name)
//	DIR                              every *.json, *.jsonl, *.json.gz, *.jsonl.gz in DIR, by name;
//	                                 a JSON document of no trace format among them is left out and said
//
// File formats are told apart by content (the first top-level key):
// OTLP JSON ("resourceSpans", JSON Lines allowed), Jaeger API v3
// ("result"), Jaeger JSON from API v1 or the UI's download ("data"), and
// Chrome trace / Kineto ("traceEvents", or a bare array of events).
// Open checks src's syntax and that a file exists; Read does the work.
func Open(src string, opts ...ReadOption) (Reader, error) {
	rc := readConfig{client: &http.Client{Timeout: 60 * time.Second}}
	for _, o := range opts {
		o(&rc)
	}
	if err := CheckFormat(rc.format); err != nil {
		return nil, err
	}
	switch {
	case src == "":
		return nil, fmt.Errorf("trace source is empty: want a file, directory, jaeger://host:port or http(s) URL")
	case strings.HasPrefix(src, "jaeger://") || strings.HasPrefix(src, "jaegers://"):
		q, err := ParseJaegerURL(src)
		if err != nil {
			return nil, err
		}
		return &jaegerReader{src: src, q: q, rc: rc}, nil
	case strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://"):
		return &urlReader{src: src, rc: rc}, nil
	}
	path := strings.TrimPrefix(src, "file:")
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("trace source: %w", err)
	}
	if fi.IsDir() {
		var files []string
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("trace source: %w", err)
		}
		for _, e := range ents {
			n := e.Name()
			if !e.IsDir() && (strings.HasSuffix(n, ".json") || strings.HasSuffix(n, ".jsonl") || strings.HasSuffix(n, ".json.gz") || strings.HasSuffix(n, ".jsonl.gz")) {
				files = append(files, filepath.Join(path, n))
			}
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("trace source %s: directory has no *.json, *.jsonl, *.json.gz or *.jsonl.gz files", path)
		}
		return &fileReader{src: src, paths: files, dir: true, rc: rc}, nil
	}
	return &fileReader{src: src, paths: []string{path}, rc: rc}, nil
}

// ReadAll opens src and reads it.
func ReadAll(ctx context.Context, src string, opts ...ReadOption) (*Result, error) {
	r, err := Open(src, opts...)
	if err != nil {
		return nil, err
	}
	return r.Read(ctx)
}

type fileReader struct {
	src   string
	paths []string
	dir   bool // src is a directory: paths are its files by name
	rc    readConfig
}

func (f *fileReader) Source() string { return f.src }

func (f *fileReader) Read(ctx context.Context) (*Result, error) {
	res := &Result{Source: f.src, noKernelPlacement: f.rc.noPlace, kernelTable: f.rc.table}
	looks := ""
	var breaks []breakRange
	for _, p := range f.paths {
		lo := res.count()
		res.files = append(res.files, fileStart{path: p, span: lo, kineto: len(res.Kineto)})
		format, l, err := readFile(ctx, p, f.rc.format, res)
		if err != nil && f.dir && errors.Is(err, errNotTrace) {
			// A directory of traces also holds what was written beside
			// them (verdict -o writes verdict.json by its runs' traces,
			// a profile directory keeps the model's config.json): a
			// JSON document that is no trace format is left out and
			// said, where a file named alone is an error.
			res.files = res.files[:len(res.files)-1]
			res.skip(p, "not a trace: a JSON document with none of the trace formats' top-level keys (resourceSpans, result, data, traceEvents); left out of the directory")
			continue
		}
		if err != nil {
			var pe *PartialError
			if !f.rc.allowPartial || !errors.As(err, &pe) {
				return nil, err
			}
			breaks = append(breaks, breakRange{err: pe, lo: lo, hi: res.count()})
		}
		if res.Format == "" {
			res.Format = format
		} else if res.Format != format {
			res.Format = "mixed"
		}
		if looks == "" {
			looks = l
		}
	}
	if b, ok := res.cutBetweenBatches(breaks); ok {
		if !f.rc.allowPartial {
			return nil, b.err
		}
		breaks = append(breaks, b)
	}
	res.keepComplete(breaks)
	res.finish()
	if len(res.Spans) == 0 {
		if res.Partial != nil {
			return nil, noCompleteStep(res.Partial)
		}
		what := f.src
		if len(f.paths) > 1 {
			what = fmt.Sprintf("%s (%d files)", f.src, len(f.paths))
		}
		return nil, noSpans(res, what, f.rc.format, looks)
	}
	return res, nil
}

// noCompleteStep is the error for partial input of which no step was
// complete: the first break, which it wraps, and that nothing was kept.
func noCompleteStep(p *Partial) error {
	return fmt.Errorf("%w; no step read before it is complete, so none is kept", p.Breaks[0])
}

// ErrNoSpans is wrapped by the error of a file or URL source in which no
// span could be read: not a trace, the wrong forced format, or every span
// left out. (A Jaeger query that matches nothing is an empty result, not
// an error: traces become queryable some time after they are exported.)
var ErrNoSpans = errors.New("no span")

// noSpans is the one-line error for a source that yielded no span: the
// first thing left out, or where the format keeps its spans; when the
// format was forced and the content looks like another, it says which.
func noSpans(res *Result, src, forced, looks string) error {
	var why string
	switch {
	case res.SkippedTotal > 0:
		sk := res.Skipped[0]
		why = fmt.Sprintf("%d left out, the first at %s: %s", res.SkippedTotal, sk.Where, strings.ReplaceAll(sk.Reason, "\n", " "))
	default:
		why = "want " + spansWhere(res.Format)
	}
	if forced != "" && looks != "" && looks != forced {
		why += fmt.Sprintf("; it was read as %s as asked, but its content looks like %s", forced, looks)
	}
	if res.Format == "" {
		// No file was read as a trace (a directory of other documents).
		return fmt.Errorf("%s: %w read: %s", src, ErrNoSpans, why)
	}
	return fmt.Errorf("%s: %w read (%s): %s", src, ErrNoSpans, res.Format, why)
}

// spansWhere says where a format keeps its spans.
func spansWhere(format string) string {
	switch format {
	case FormatOTLPJSON:
		return "spans in resourceSpans[].scopeSpans[].spans[]"
	case FormatJaegerV3:
		return "spans in result.resourceSpans[].scopeSpans[].spans[]"
	case FormatJaegerV1:
		return "spans in data[].spans[]"
	case FormatKineto:
		return `complete events ("ph": "X") of GPU kernels ("cat": "kernel") in traceEvents[]`
	}
	return "OTLP JSON, Jaeger JSON or a Chrome/Kineto trace with spans"
}

func readFile(ctx context.Context, path, format string, res *Result) (string, string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", "", fmt.Errorf("trace source: %w", err)
	}
	defer fh.Close()
	return readBodyLooks(ctx, fh, path, format, res)
}

// readBody un-gzips when the content starts with the gzip magic, sniffs the
// format unless given, and reads.
func readBody(ctx context.Context, r io.Reader, src, format string, res *Result) (string, error) {
	f, _, err := readBodyLooks(ctx, r, src, format, res)
	return f, err
}

// readBodyLooks is readBody that also returns the format the content looks
// like when format was given and the content sniffs as another ("" when
// they agree or the content cannot be told). Input that ends early or
// breaks is a *PartialError; the format is returned with it, and the
// spans read before the break are in res.
func readBodyLooks(ctx context.Context, r io.Reader, src, format string, res *Result) (string, string, error) {
	br := bufio.NewReaderSize(&ctxReader{ctx: ctx, r: r}, 1<<16)
	var gz *countReader
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz = &countReader{r: br}
		zr, err := gzip.NewReader(gz)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return "", "", fmt.Errorf("%s: %w", src, cerr)
			}
			return "", "", gzipHeaderError(src, gz.n, err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	looks := ""
	head, herr := br.Peek(1 << 16)
	if len(head) == 0 && herr != nil && herr != io.EOF && ctx.Err() == nil && gz != nil {
		// The gzip stream failed before its first byte of text.
		b := &streamBreak{err: &readError{herr}, where: "before any text"}
		return format, "", partialError(b, src, gz)
	}
	if format == "" {
		var err error
		if format, err = sniff(head); err != nil {
			if errors.Is(err, errNotTrace) {
				return "", "", &NotTraceError{Source: src, Err: err}
			}
			return "", "", fmt.Errorf("%s: %w", src, err)
		}
	} else if f, err := sniff(head); err == nil && f != format {
		looks = f
	}
	var err error
	before := res.count()
	switch format {
	case FormatOTLPJSON, FormatJaegerV3:
		err = readOTLPStream(br, res, src)
	case FormatJaegerV1:
		err = readJaegerV1Stream(br, res, src)
	case FormatKineto:
		err = readKinetoStream(br, res, src)
	}
	if cerr := ctx.Err(); cerr != nil {
		return "", "", fmt.Errorf("%s: %w", src, cerr)
	}
	if err != nil && looks != "" && res.count() == before {
		// Forced onto another format's content, the reader broke before
		// any span (OTLP's JSON lines read as one Kineto object break at
		// the second line): what the content is says more than where
		// the reader broke, as it does for a read that ends with no span.
		return format, looks, noSpans(&Result{Format: format}, src, format, looks)
	}
	return format, looks, partialError(err, src, gz)
}

// gzipHeaderError is the error for a gzip header that ends early or is
// damaged (n: the bytes of it read).
func gzipHeaderError(src string, n int64, err error) error {
	pe := &PartialError{Source: src, Offset: n, Err: err}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		pe.Err = io.ErrUnexpectedEOF
		pe.What = fmt.Sprintf("gzip header ends at byte %d: the file was cut", n)
	} else {
		pe.What = fmt.Sprintf("gzip header is damaged at byte %d: %v", n, err)
	}
	return pe
}

// Sniff is the trace format data looks like (its first bytes, plain or
// gzip), "" when it looks like none: for a verb that reads other JSON
// documents to say that a file it was given is a trace.
func Sniff(data []byte) string {
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return ""
		}
		defer zr.Close()
		head := make([]byte, 1<<16)
		n, _ := io.ReadFull(zr, head)
		data = head[:n]
	}
	head := data[:min(len(data), 1<<16)]
	f, err := sniff(head)
	if err != nil {
		return ""
	}
	if t := bytes.TrimLeft(head, " \t\r\n\ufeff"); t[0] == '[' && !bytes.Contains(t, []byte(`"ph"`)) {
		// A bare array is a Chrome trace only of events, each with
		// its phase ("ph"); sniff reads any array so, for the reader
		// to say what it lacks.
		return ""
	}
	return f
}

// sniff tells the format from the first bytes of a document.
func sniff(head []byte) (string, error) {
	t := bytes.TrimLeft(head, " \t\r\n\ufeff")
	if len(t) == 0 {
		return "", fmt.Errorf("empty: want OTLP JSON, Jaeger JSON or a Chrome/Kineto trace")
	}
	if t[0] == '[' {
		return FormatKineto, nil
	}
	if t[0] != '{' {
		return "", fmt.Errorf("not JSON (starts with %q): want OTLP JSON, Jaeger JSON or a Chrome/Kineto trace", t[:min(len(t), 16)])
	}
	// The first top-level key decides; Kineto writes other keys
	// (schemaVersion, deviceProperties) before traceEvents, so fall back to
	// searching the head for the telling keys.
	dec := json.NewDecoder(bytes.NewReader(t))
	if _, err := dec.Token(); err == nil {
		if tok, err := dec.Token(); err == nil {
			if key, ok := tok.(string); ok {
				if f := formatOfKey(key); f != "" {
					return f, nil
				}
			}
		}
	}
	for _, k := range []string{`"traceEvents"`, `"resourceSpans"`, `"data"`} {
		if bytes.Contains(t, []byte(k)) {
			return formatOfKey(strings.Trim(k, `"`)), nil
		}
	}
	return "", fmt.Errorf("%w: want a top-level \"resourceSpans\" (OTLP JSON), \"result\" (Jaeger API v3), \"data\" (Jaeger JSON) or \"traceEvents\" (Chrome/Kineto) key", errNotTrace)
}

// NotTraceError is the error for a file that is a JSON object with none
// of the trace formats' keys: a document of another kind, which the
// caller, knowing the documents it reads elsewhere (a topology, a saved
// result), may name from Source.
type NotTraceError struct {
	Source string // the file, as the source named it
	Err    error  // sniff's, wrapping errNotTrace
}

func (e *NotTraceError) Error() string { return e.Source + ": " + e.Err.Error() }
func (e *NotTraceError) Unwrap() error { return e.Err }

// errNotTrace is wrapped by sniff's error for a JSON object with none of
// the trace formats' keys: a document of another kind, not a damaged
// trace.
var errNotTrace = errors.New("unknown trace format")

func formatOfKey(key string) string {
	switch key {
	case "resourceSpans":
		return FormatOTLPJSON
	case "result":
		return FormatJaegerV3
	case "data":
		return FormatJaegerV1
	case "traceEvents", "schemaVersion", "deviceProperties", "distributedInfo", "displayTimeUnit", "baseTimeNanoseconds", "traceName":
		return FormatKineto
	}
	return ""
}

// ctxReader stops reading when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

type jaegerReader struct {
	src string
	q   JaegerQuery
	rc  readConfig
}

func (j *jaegerReader) Source() string { return j.src }

func (j *jaegerReader) Read(ctx context.Context) (*Result, error) {
	res := &Result{Source: j.src}
	if err := readJaegerHTTP(ctx, j.rc.client, j.q, res, j.src); err != nil {
		var pe *PartialError
		if !j.rc.allowPartial || !errors.As(err, &pe) {
			return nil, err
		}
		res.keepComplete([]breakRange{{err: pe, lo: 0, hi: res.count()}})
	}
	res.finish()
	if len(res.Spans) == 0 && res.Partial != nil {
		return nil, noCompleteStep(res.Partial)
	}
	// Jaeger answers at most limit traces: as many means there may be
	// more, and what was read is not all the service recorded.
	if n := countTraces(res.Spans); j.q.TraceID == "" && n >= j.q.Limit {
		res.skip(j.src, fmt.Sprintf("the query returned %d traces, its limit: Jaeger may hold more of service %q (raise limit=%d in the source to read them)", n, j.q.Service, j.q.Limit))
	}
	return res, nil
}

func countTraces(spans []Span) int {
	ids := map[trace.TraceID]bool{}
	for i := range spans {
		ids[spans[i].TraceID] = true
	}
	return len(ids)
}

type urlReader struct {
	src string
	rc  readConfig
}

func (u *urlReader) Source() string { return u.src }

func (u *urlReader) Read(ctx context.Context) (*Result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.src, nil)
	if err != nil {
		return nil, fmt.Errorf("trace source %s: %w", u.src, err)
	}
	resp, err := u.rc.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("trace source: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("trace source %s: %s: %s", u.src, resp.Status, strings.TrimSpace(string(b)))
	}
	res := &Result{Source: u.src, noKernelPlacement: u.rc.noPlace, kernelTable: u.rc.table}
	format, looks, err := readBodyLooks(ctx, resp.Body, u.src, u.rc.format, res)
	if err != nil {
		var pe *PartialError
		if !u.rc.allowPartial || !errors.As(err, &pe) {
			return nil, err
		}
		res.keepComplete([]breakRange{{err: pe, lo: 0, hi: res.count()}})
	}
	res.Format = format
	res.finish()
	if len(res.Spans) == 0 {
		if res.Partial != nil {
			return nil, noCompleteStep(res.Partial)
		}
		return nil, noSpans(res, u.src, u.rc.format, looks)
	}
	return res, nil
}

// Repeats counts the spans of b that repeat spans of a: the same trace
// ID, span ID and start, as a source read twice (the same file given
// twice, a file and its gzip copy, a directory and a file in it) has
// them. Such spans would count twice in every sum over the sources;
// a caller refuses the pair. Spans of both are in the order Read leaves
// them (trace by trace, within a trace by start and span ID), so the
// cost is linear in the spans of the traces both hold.
func Repeats(a, b *Result) int {
	at := map[trace.TraceID][]Span{}
	for _, tr := range SplitTraces(a.Spans) {
		at[tr[0].TraceID] = tr
	}
	n := 0
	for _, tb := range SplitTraces(b.Spans) {
		ta := at[tb[0].TraceID]
		for i, j := 0, 0; i < len(ta) && j < len(tb); {
			x, y := &ta[i], &tb[j]
			c := cmp.Compare(x.Start, y.Start)
			if c == 0 {
				c = bytes.Compare(x.SpanID[:], y.SpanID[:])
			}
			switch {
			case c < 0:
				i++
			case c > 0:
				j++
			default:
				if y.SpanID.IsValid() {
					n++
				}
				i++
				j++
			}
		}
	}
	return n
}
