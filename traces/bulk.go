package traces

import (
	"context"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// SpanExporter returns the exporter chain behind e's tracer provider — the
// span counting of Stats and, for OTLP destinations, the fallback file — for
// callers that build finished spans themselves and export them in bulk
// (exec.WithSpanExporter), bypassing the SDK's per-span cost. Spans given to
// it are counted, sent, and saved to the fallback file when the collector
// refuses them, exactly like the batches of the provider's own queue; it may
// be called concurrently with that queue. Its Shutdown does nothing: e's
// Shutdown closes the chain. The caller's spans must carry the provider's
// resource and scope (take them from a span the provider made).
//
// It returns nil — use the provider — when tracing is off, or with a copy
// file (WithCopyFile), whose queue hangs off the provider only and would
// miss the bulk spans. The file exporter of file: destinations serializes
// its writes, so bulk and queued batches may interleave there too.
func (e *Exporter) SpanExporter() sdktrace.SpanExporter {
	if e.provider == nil || e.counted == nil || e.hasCopy {
		return nil
	}
	return bulkExporter{e.counted}
}

// bulkExporter is the chain without its Shutdown.
type bulkExporter struct{ next *countingExporter }

func (b bulkExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	return b.next.ExportSpans(ctx, spans)
}

func (bulkExporter) Shutdown(context.Context) error { return nil }
