package traces

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tpscope/tpscope/traces/schema"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Option configures Setup.
type Option func(*exportConfig)

type exportConfig struct {
	resAttrs      []attribute.KeyValue
	fallbackPath  string
	batchTimeout  time.Duration
	maxBatch      int
	queueSize     int
	exportTimeout time.Duration
	retryDown     time.Duration
	sync          bool
	copyPath      string
}

// WithCopyFile also writes every span to an OTLP JSON file at path (its
// own batch queue), e.g. to keep a local copy of what went to Jaeger.
func WithCopyFile(path string) Option { return func(c *exportConfig) { c.copyPath = path } }

// WithResource adds resource attributes (ResGPUModel, ResGPUDriver,
// ResNCCLVersion, ...) to service.name=tpscope and host.name.
func WithResource(kv ...attribute.KeyValue) Option {
	return func(c *exportConfig) { c.resAttrs = append(c.resAttrs, kv...) }
}

// WithFallbackFile sets where spans go when the collector cannot take them.
func WithFallbackFile(path string) Option { return func(c *exportConfig) { c.fallbackPath = path } }

// WithBatchTimeout sets the longest a span waits in the batch queue.
func WithBatchTimeout(d time.Duration) Option { return func(c *exportConfig) { c.batchTimeout = d } }

// WithMaxBatchSize sets the most spans per export call.
func WithMaxBatchSize(n int) Option { return func(c *exportConfig) { c.maxBatch = n } }

// WithExportTimeout bounds one export call, retries included, and each
// shutdown step.
func WithExportTimeout(d time.Duration) Option { return func(c *exportConfig) { c.exportTimeout = d } }

// WithSyncExport exports each span when it ends, without batching (tests,
// debugging). Slow with a remote collector.
func WithSyncExport() Option { return func(c *exportConfig) { c.sync = true } }

// Exporter owns the tracer provider and the exporter chain set up by
// Setup. Call Shutdown once, on every exit path (normal end, error,
// Ctrl-C via signal.NotifyContext); it flushes queued spans.
type Exporter struct {
	dest     string
	provider *sdktrace.TracerProvider // nil when disabled
	counted  *countingExporter
	hasCopy  bool // WithCopyFile: a second queue hangs off the provider only
	closed   sync.Once
	closeErr error
}

// Setup builds the tracer provider for dest:
//
//	otlp://host:4317        OTLP/gRPC, plaintext (otlps:// for TLS)
//	otlphttp://host:4318    OTLP/HTTP protobuf, plaintext, path /v1/traces (otlphttps:// for TLS; a URL path replaces /v1/traces)
//	file:PATH               OTLP JSON Lines file (FileExporter)
//	""                      the standard OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT/PROTOCOL/HEADERS
//	                        variables; tracing is off when no endpoint variable is set
//	none, off               tracing off (a no-op provider)
//
// Defaults: batch timeout 1 s, 512 spans per batch, queue 8192 spans with
// blocking enqueue (a full queue slows the caller, it never drops spans),
// export timeout 10 s, fallback file os.TempDir()/tpscope-spans-PID.otlp.jsonl
// (created only when needed). For OTLP destinations every batch the
// collector refuses or does not answer within the export timeout is
// written to the fallback file; for 30 s after a failure batches go there
// directly. Stats reports how many spans went where.
func Setup(ctx context.Context, dest string, opts ...Option) (*Exporter, error) {
	c := exportConfig{
		batchTimeout:  time.Second,
		maxBatch:      512,
		queueSize:     8192,
		exportTimeout: 10 * time.Second,
		retryDown:     30 * time.Second,
		fallbackPath:  filepath.Join(os.TempDir(), fmt.Sprintf("tpscope-spans-%d.otlp.jsonl", os.Getpid())),
	}
	for _, o := range opts {
		o(&c)
	}
	switch {
	case c.batchTimeout <= 0:
		return nil, fmt.Errorf("trace export: batch timeout %v: want > 0", c.batchTimeout)
	case c.maxBatch <= 0:
		return nil, fmt.Errorf("trace export: max batch size %d: want > 0", c.maxBatch)
	case c.exportTimeout <= 0:
		return nil, fmt.Errorf("trace export: export timeout %v: want > 0", c.exportTimeout)
	}
	if c.queueSize < c.maxBatch {
		c.queueSize = c.maxBatch
	}

	exp, err := newSpanExporter(ctx, dest, &c)
	if err != nil {
		return nil, err
	}
	shown := dest // where the export line says the spans went
	if k, ep := endpointEnv(); dest == "" && exp != nil && ep != "" {
		shown = ep + " (" + k + ")"
	}
	if exp == nil {
		return &Exporter{dest: shown}, nil
	}
	host, _ := os.Hostname()
	attrs := []attribute.KeyValue{semconv.ServiceName(schema.ServiceName)}
	if host != "" {
		attrs = append(attrs, semconv.HostName(host))
	}
	attrs = append(attrs, c.resAttrs...)
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, attrs...))
	if err != nil {
		return nil, fmt.Errorf("trace export: resource: %w", err)
	}
	counted := &countingExporter{next: exp}
	var sp sdktrace.SpanProcessor
	if c.sync {
		sp = sdktrace.NewSimpleSpanProcessor(counted)
	} else {
		sp = sdktrace.NewBatchSpanProcessor(counted,
			sdktrace.WithBatchTimeout(c.batchTimeout),
			sdktrace.WithMaxExportBatchSize(c.maxBatch),
			sdktrace.WithMaxQueueSize(c.queueSize),
			sdktrace.WithExportTimeout(2*c.exportTimeout), // the fallback write comes after a timed-out attempt
			sdktrace.WithBlocking(),
		)
	}
	popts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithSpanProcessor(sp),
	}
	if c.copyPath != "" {
		fe, err := NewFileExporter(c.copyPath)
		if err != nil {
			_ = exp.Shutdown(ctx)
			return nil, err
		}
		popts = append(popts, sdktrace.WithSpanProcessor(sdktrace.NewBatchSpanProcessor(fe,
			sdktrace.WithBatchTimeout(c.batchTimeout), sdktrace.WithMaxExportBatchSize(c.maxBatch),
			sdktrace.WithMaxQueueSize(c.queueSize), sdktrace.WithBlocking())))
	}
	tp := sdktrace.NewTracerProvider(popts...)
	return &Exporter{dest: shown, provider: tp, counted: counted, hasCopy: c.copyPath != ""}, nil
}

// newSpanExporter returns the exporter for dest, or nil for "off".
// CheckDestination checks a destination Setup would take, without
// connecting or creating anything, so a caller refuses a bad one before
// its work starts.
func CheckDestination(dest string) error {
	switch {
	case dest == "" || dest == "none" || dest == "off":
		return nil
	case strings.HasPrefix(dest, "file:"):
		if dest == "file:" {
			return fmt.Errorf("trace destination %q: want file:PATH", dest)
		}
		return nil
	}
	u, err := url.Parse(dest)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("trace destination %q: want otlp://host:4317, otlphttp://host:4318, file:PATH, none, or empty for OTEL_EXPORTER_OTLP_* variables", dest)
	}
	switch u.Scheme {
	case "otlp", "otlps", "grpc", "otlphttp", "otlphttps":
		return nil
	}
	return fmt.Errorf("trace destination %q: unknown scheme %q: want otlp, otlphttp, file", dest, u.Scheme)
}

// CheckNew refuses a file: destination that names an existing file, with
// a free path beside it (FreePath) to name instead; other destinations
// pass. A trace is a measurement: a run cannot make the one a file holds
// again, so it is not truncated. Not a temporary file renamed at the end
// either: the file is written as the run goes so that a crash or a hang
// keeps what was exported where it was asked for, and a killed run would
// leave the old trace at the path, to be read as the new run's.
func CheckNew(dest string) error {
	path, ok := strings.CutPrefix(dest, "file:")
	if !ok || path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return fmt.Errorf("trace destination %s: the file exists (a trace is not overwritten): remove it or name another, e.g. file:%s", dest, FreePath(path))
	}
	return nil
}

// FreePath is a path beside path that names no file: its name with -2,
// -3, ... before its extensions (run.otlp.jsonl.gz: run-2.otlp.jsonl.gz),
// path itself when it is free.
func FreePath(path string) string {
	if _, err := os.Lstat(path); err != nil {
		return path
	}
	dir, base := filepath.Split(path)
	stem, ext := base, ""
	if i := strings.Index(base[min(1, len(base)):], "."); i >= 0 {
		// From the first dot after the first character: a dot file
		// (.trace) keeps its name whole.
		stem, ext = base[:i+1], base[i+1:]
	}
	for n := 2; ; n++ {
		p := dir + stem + "-" + strconv.Itoa(n) + ext
		if _, err := os.Lstat(p); err != nil {
			return p
		}
	}
}

func newSpanExporter(ctx context.Context, dest string, c *exportConfig) (sdktrace.SpanExporter, error) {
	retry := otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: c.exportTimeout / 2}
	if dest == "none" || dest == "off" {
		return nil, nil
	}
	if path, ok := strings.CutPrefix(dest, "file:"); ok {
		if path == "" {
			return nil, fmt.Errorf("trace destination %q: want file:PATH", dest)
		}
		return NewFileExporter(path)
	}
	var exp sdktrace.SpanExporter
	var err error
	if dest == "" {
		ep := firstEnv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
		if ep == "" {
			return nil, nil
		}
		proto := firstEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
		switch proto {
		case "grpc":
			exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithRetry(retry), otlptracegrpc.WithTimeout(c.exportTimeout))
		case "", "http/protobuf":
			// The OTLP exporter specification's default protocol is http/protobuf.
			exp, err = otlptracehttp.New(ctx, otlptracehttp.WithRetry(otlptracehttp.RetryConfig(retry)), otlptracehttp.WithTimeout(c.exportTimeout))
		default:
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want grpc or http/protobuf", proto)
		}
		if err != nil {
			return nil, fmt.Errorf("trace export to %s: %w", ep, err)
		}
		return &fallbackExporter{next: exp, dest: ep, cfg: c}, nil
	}
	u, perr := url.Parse(dest)
	if perr != nil || u.Host == "" || u.Opaque != "" {
		return nil, fmt.Errorf("trace destination %q: want otlp://host:4317, otlphttp://host:4318, file:PATH, none, or empty for OTEL_EXPORTER_OTLP_* variables", dest)
	}
	switch u.Scheme {
	case "otlp", "otlps", "grpc":
		o := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host), otlptracegrpc.WithRetry(retry), otlptracegrpc.WithTimeout(c.exportTimeout)}
		if u.Scheme != "otlps" {
			o = append(o, otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, o...)
	case "otlphttp", "otlphttps":
		o := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithRetry(otlptracehttp.RetryConfig(retry)), otlptracehttp.WithTimeout(c.exportTimeout)}
		if u.Scheme == "otlphttp" {
			o = append(o, otlptracehttp.WithInsecure())
		}
		if u.Path != "" && u.Path != "/" {
			o = append(o, otlptracehttp.WithURLPath(u.Path))
		}
		exp, err = otlptracehttp.New(ctx, o...)
	default:
		return nil, fmt.Errorf("trace destination %q: unknown scheme %q: want otlp, otlphttp, file", dest, u.Scheme)
	}
	if err != nil {
		return nil, fmt.Errorf("trace export to %s: %w", dest, err)
	}
	return &fallbackExporter{next: exp, dest: dest, cfg: c}, nil
}

// endpointEnv is the OTEL_EXPORTER_OTLP_* variable an empty destination
// exports to and its value ("" when none is set).
func endpointEnv() (key, value string) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(k); v != "" {
			return k, v
		}
	}
	return "", ""
}

func firstEnv(keys ...string) string {
	for _, k := range keys {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}

// Enabled reports whether spans are recorded (false for "none" or an
// empty destination without OTEL_EXPORTER_OTLP_* endpoint variables).
func (e *Exporter) Enabled() bool { return e.provider != nil }

// TracerProvider is the provider to create tracers from (a no-op one when
// tracing is off).
func (e *Exporter) TracerProvider() trace.TracerProvider {
	if e.provider == nil {
		return noop.NewTracerProvider()
	}
	return e.provider
}

// Tracer is the tracer for tpscope's spans, scope name ScopeName.
func (e *Exporter) Tracer() trace.Tracer { return e.TracerProvider().Tracer(schema.ScopeName) }

// ForceFlush exports every span ended so far.
func (e *Exporter) ForceFlush(ctx context.Context) error {
	if e.provider == nil {
		return nil
	}
	return e.provider.ForceFlush(ctx)
}

// Shutdown flushes the queue and closes the exporter chain; later calls
// return the first call's result. The error is non-nil only when spans
// were lost (the collector and the fallback file both failed) or the
// flush did not finish before ctx ended; spans saved to the fallback file
// are reported by Stats, not as an error.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.closed.Do(func() {
		if e.provider == nil {
			return
		}
		err := e.provider.Shutdown(ctx)
		st := e.Stats()
		if st.Lost > 0 {
			err = errors.Join(err, fmt.Errorf("trace export to %s: %d spans lost: %v", e.dest, st.Lost, st.LastError))
		}
		e.closeErr = err
	})
	return e.closeErr
}

// ExportStats says where the spans went.
type ExportStats struct {
	Dest          string // destination given to Setup
	Exported      int    // spans the destination accepted
	FallbackSpans int    // spans written to FallbackPath instead
	FallbackPath  string // "" when the fallback file was never needed
	Lost          int    // spans neither destination took
	LastError     error  // the last export error, nil if none
}

// String is a one-line summary for the user.
func (s ExportStats) String() string {
	msg := fmt.Sprintf("%d spans exported to %s", s.Exported, s.Dest)
	if s.Dest == "" {
		// An empty destination without an OTEL_EXPORTER_OTLP_* endpoint.
		msg = fmt.Sprintf("%d spans exported: no destination (none given and no OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT set)", s.Exported)
	}
	if s.FallbackSpans > 0 {
		msg += fmt.Sprintf("; %d spans could not be sent (%v) and were saved to %s", s.FallbackSpans, s.LastError, s.FallbackPath)
	}
	if s.Lost > 0 {
		msg += fmt.Sprintf("; %d spans LOST (%v)", s.Lost, s.LastError)
	}
	return msg
}

// Stats reports the spans exported so far; complete after Shutdown.
func (e *Exporter) Stats() ExportStats {
	st := ExportStats{Dest: e.dest}
	if e.counted == nil {
		return st
	}
	e.counted.mu.Lock()
	st.Exported, st.Lost, st.LastError = e.counted.ok, e.counted.lost, e.counted.lastErr
	e.counted.mu.Unlock()
	if fb, ok := e.counted.next.(*fallbackExporter); ok {
		fb.mu.Lock()
		st.Exported -= fb.fellBack
		st.FallbackSpans = fb.fellBack
		if fb.file != nil {
			st.FallbackPath = fb.file.Path()
		}
		if fb.lastErr != nil {
			st.LastError = fb.lastErr
		}
		fb.mu.Unlock()
	}
	return st
}

// countingExporter counts spans per outcome.
type countingExporter struct {
	next    sdktrace.SpanExporter
	mu      sync.Mutex
	ok      int
	lost    int
	lastErr error
}

func (c *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.next.ExportSpans(ctx, spans)
	c.mu.Lock()
	if err != nil {
		c.lost += len(spans)
		c.lastErr = err
	} else {
		c.ok += len(spans)
	}
	c.mu.Unlock()
	return err
}

func (c *countingExporter) Shutdown(ctx context.Context) error { return c.next.Shutdown(ctx) }

// fallbackExporter sends batches to next and, when that fails, appends
// them to an OTLP JSON file, so an unreachable collector loses no span.
// ExportSpans is called by the batch processor's goroutine (one at a time)
// and returns an error only if the fallback file fails too.
type fallbackExporter struct {
	next sdktrace.SpanExporter
	dest string
	cfg  *exportConfig

	mu        sync.Mutex
	file      *FileExporter
	fellBack  int
	lastErr   error
	downUntil time.Time
}

func (f *fallbackExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	f.mu.Lock()
	down := time.Now().Before(f.downUntil)
	f.mu.Unlock()
	if !down {
		cctx, cancel := context.WithTimeout(ctx, f.cfg.exportTimeout)
		err := f.next.ExportSpans(cctx, spans)
		cancel()
		if err == nil {
			return nil
		}
		f.mu.Lock()
		f.lastErr = fmt.Errorf("export to %s: %w", f.dest, err)
		f.downUntil = time.Now().Add(f.cfg.retryDown)
		f.mu.Unlock()
	}
	return f.toFile(spans)
}

func (f *fallbackExporter) toFile(spans []sdktrace.ReadOnlySpan) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.file == nil {
		fe, err := NewFileExporter(f.cfg.fallbackPath)
		if err != nil {
			return fmt.Errorf("%v; fallback: %w", f.lastErr, err)
		}
		f.file = fe
	}
	if err := f.file.ExportSpans(context.Background(), spans); err != nil {
		return fmt.Errorf("%v; fallback: %w", f.lastErr, err)
	}
	f.fellBack += len(spans)
	return nil
}

func (f *fallbackExporter) Shutdown(ctx context.Context) error {
	// The gRPC exporter's Shutdown waits for its connection; bound it.
	cctx, cancel := context.WithTimeout(ctx, f.cfg.exportTimeout)
	err := f.next.Shutdown(cctx)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		err = nil // nothing is queued in the OTLP exporter itself; the batch processor flushed before
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.file != nil {
		if ferr := f.file.Shutdown(ctx); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return err
}
