package traces_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/traces"
)

// TestSpanExporterWhen: the bulk exporter is offered only where every span
// given to it reaches every destination the provider has.
func TestSpanExporterWhen(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	cases := []struct {
		name string
		dest string
		opts []traces.Option
		want bool
	}{
		{"dest=none", "none", nil, false},
		{"dest=file", "file:" + filepath.Join(dir, "a.jsonl"), nil, true},
		{"dest=file/copy", "file:" + filepath.Join(dir, "b.jsonl"), []traces.Option{traces.WithCopyFile(filepath.Join(dir, "d.jsonl"))}, false},
		{"dest=otlphttp", "otlphttp://127.0.0.1:1", nil, true},
		{"dest=otlp/copy", "otlp://127.0.0.1:1", []traces.Option{traces.WithCopyFile(filepath.Join(dir, "c.jsonl"))}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := traces.Setup(context.Background(), tc.dest, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer exp.Shutdown(context.Background())
			if got := exp.SpanExporter() != nil; got != tc.want {
				t.Errorf("SpanExporter() != nil is %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSpanExporterFallback: spans exported in bulk to a collector that is
// not there go to the fallback file and are counted by Stats, like the
// provider's own; the bulk exporter's Shutdown leaves the chain open.
func TestSpanExporterFallback(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // the port is now closed
	fallback := filepath.Join(t.TempDir(), "fallback.otlp.jsonl")
	ctx := context.Background()
	exp, err := traces.Setup(ctx, "otlphttp://"+addr, traces.WithFallbackFile(fallback), traces.WithExportTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sink := exp.SpanExporter()
	if err := sink.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// One span from the provider (the parent) and three built here under it.
	_, parent := exp.Tracer().Start(ctx, "rank/0")
	psc := parent.SpanContext()
	parent.End()
	want := map[string]bool{psc.SpanID().String(): true}
	var bulk []sdktrace.ReadOnlySpan
	for i := range 3 {
		sid := trace.SpanID{0xb, byte(i + 1)}
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: psc.TraceID(), SpanID: sid, TraceFlags: trace.FlagsSampled})
		now := time.Now()
		bulk = append(bulk, tracetest.SpanStub{Name: "L00.attn.o_proj", SpanContext: sc, Parent: psc, StartTime: now, EndTime: now.Add(time.Microsecond)}.Snapshot())
		want[sid.String()] = true
	}
	if err := sink.ExportSpans(ctx, bulk); err != nil {
		t.Fatalf("bulk export: %v", err)
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	inFile := spanIDSet(t, fallback)
	st := exp.Stats()
	if st.FallbackSpans != len(want) || st.Lost != 0 || len(inFile) != len(want) {
		t.Errorf("stats %v, %d spans in the file; want all %d in the fallback file", st, len(inFile), len(want))
	}
	for id := range want {
		if !inFile[id] {
			t.Errorf("span %s not in the fallback file", id)
		}
	}
}
