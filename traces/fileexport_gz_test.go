package traces_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tpscope/tpscope/traces"
)

// TestFileExporterGzipByName: a trace file named .gz is gzip (it starts
// with the gzip magic, 1f 8b), and each exported batch is complete on
// disk as soon as it is exported, as a plain file's line is: after the
// first of two batches the file reads back with that batch's spans and
// no damage; after both, with all of them.
func TestFileExporterGzipByName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.otlp.jsonl.gz")
	exp, err := traces.NewFileExporter(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	batch := func(b byte, n int) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		for i := range n {
			sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{b}, SpanID: trace.SpanID{b, byte(i + 1)}, TraceFlags: trace.FlagsSampled})
			out = append(out, tracetest.SpanStub{Name: "L00.attn.o_proj", SpanContext: sc, StartTime: now, EndTime: now.Add(time.Microsecond)}.Snapshot())
		}
		return out
	}
	for i, n := range []int{3, 4} {
		if err := exp.ExportSpans(ctx, batch(byte(i+1), n)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Fatalf("after batch %d the file starts %x, want the gzip magic 1f8b", i+1, b[:min(len(b), 4)])
		}
		res, err := traces.ReadAll(ctx, path)
		if err != nil {
			t.Fatalf("after batch %d: %v", i+1, err)
		}
		if want := []int{3, 7}[i]; len(res.Spans) != want || res.Partial != nil {
			t.Errorf("after batch %d: %d spans (partial %v), want %d", i+1, len(res.Spans), res.Partial, want)
		}
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
