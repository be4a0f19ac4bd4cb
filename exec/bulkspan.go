package exec

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Bulk op spans (WithSpanExporter). The OpenTelemetry SDK spends about
// 3-5 us per span on this machine (a recording span with a mutex, attribute
// normalisation, a de-duplication map at End, a snapshot copy and a queue
// hand-off; see BenchmarkSDKSpan), more than the 2 us per op the runner may
// cost (issue 6). With an exporter at hand the runner builds each op span as
// a finished read-only span itself, from preallocated per-op attributes and
// the recorded times, and hands a step's op spans to the exporter in one
// call between steps. The step and rank spans still go through the tracer
// provider, so the op spans take their resource, instrumentation scope and
// parent from the rank span the SDK made: a reader cannot tell the two paths
// apart (same IDs layout, parents, names, kind, times, attributes, status).

// opSpan is a finished op span. It implements sdktrace.ReadOnlySpan; the
// embedded interface (always nil) only supplies the SDK's unexported marker
// method, every exported method is defined below. What all op spans of a
// rank and step share is in head, so a span is about 100 bytes besides its
// attributes.
type opSpan struct {
	sdktrace.ReadOnlySpan

	head       *opSpanHead
	name       string
	id         trace.SpanID
	start, end int64 // ns since head.anchor
	attrs      []attribute.KeyValue
	dropped    int32 // invalid attributes left out, as the SDK counts them
	failed     bool  // status Error "op failed"
}

// opSpanHead is what the op spans of one rank and step share.
type opSpanHead struct {
	parent trace.SpanContext // the rank span
	anchor time.Time         // origin of the recorded times (runner.anchor)
	scope  instrumentation.Scope
	res    *resource.Resource
}

// failedStatus is the status of a failed op's span (as emitRank sets it).
var failedStatus = sdktrace.Status{Code: codes.Error, Description: "op failed"}

func (s *opSpan) Name() string { return s.name }
func (s *opSpan) SpanContext() trace.SpanContext {
	p := s.head.parent
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: p.TraceID(), SpanID: s.id, TraceFlags: p.TraceFlags(), TraceState: p.TraceState(),
	})
}
func (s *opSpan) Parent() trace.SpanContext        { return s.head.parent }
func (s *opSpan) SpanKind() trace.SpanKind         { return trace.SpanKindInternal }
func (s *opSpan) StartTime() time.Time             { return s.head.anchor.Add(time.Duration(s.start)) }
func (s *opSpan) EndTime() time.Time               { return s.head.anchor.Add(time.Duration(s.end)) }
func (s *opSpan) Attributes() []attribute.KeyValue { return s.attrs }
func (s *opSpan) Links() []sdktrace.Link           { return nil }
func (s *opSpan) Events() []sdktrace.Event         { return nil }
func (s *opSpan) Status() sdktrace.Status {
	if s.failed {
		return failedStatus
	}
	return sdktrace.Status{}
}
func (s *opSpan) InstrumentationScope() instrumentation.Scope     { return s.head.scope }
func (s *opSpan) Resource() *resource.Resource                    { return s.head.res }
func (s *opSpan) DroppedAttributes() int                          { return int(s.dropped) }
func (s *opSpan) DroppedLinks() int                               { return 0 }
func (s *opSpan) DroppedEvents() int                              { return 0 }
func (s *opSpan) ChildSpanCount() int                             { return 0 }
func (s *opSpan) InstrumentationLibrary() instrumentation.Library { return s.head.scope } //nolint:staticcheck // part of sdktrace.ReadOnlySpan

// newSpanID returns a random non-zero span ID (math/rand/v2's generator is
// seeded from the operating system and needs no lock).
func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.LittleEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// bulkOpSpans builds the op spans 0..n-1 of rs for the step under rspan (an
// SDK span, which gives the resource, scope and parent) and appends them to
// rs.pending; timing is the AttrTiming attribute. It returns false when rspan is not an SDK span; the caller
// then uses the tracer. It runs on rs's goroutine.
func (r *runner) bulkOpSpans(rs *rankState, rspan trace.Span, n int, timing attribute.KeyValue) bool {
	ro, ok := rspan.(sdktrace.ReadOnlySpan)
	if !ok {
		return false
	}
	head := &opSpanHead{parent: rspan.SpanContext(), anchor: r.anchor, scope: ro.InstrumentationScope(), res: ro.Resource()}
	spans := make([]opSpan, n)
	attrs := make([]attribute.KeyValue, 0, rs.attrsPerStep)
	for i := range n {
		a0 := len(attrs)
		attrs = r.appendOpAttrs(attrs, rs, i, timing)
		sp := &spans[i]
		if rs.annot != nil {
			var dropped int
			attrs, dropped = appendDedup(attrs, a0, rs.annot.OpAttributes(i))
			sp.dropped = int32(dropped)
		}
		sp.head, sp.name, sp.id = head, rs.ops[i].ID, newSpanID()
		sp.start, sp.end = rs.start[i], rs.end[i]
		sp.attrs = attrs[a0:len(attrs):len(attrs)]
		sp.failed = i == rs.failed
		rs.pending = append(rs.pending, sp)
	}
	if len(attrs) > rs.attrsPerStep {
		rs.attrsPerStep = len(attrs)
	}
	return true
}

// appendDedup appends extra to attrs the way the SDK records a span's
// attributes: invalid ones are dropped (and counted), and a key already
// present in attrs[from:] keeps its position and takes the later value.
func appendDedup(attrs []attribute.KeyValue, from int, extra []attribute.KeyValue) (_ []attribute.KeyValue, dropped int) {
next:
	for _, a := range extra {
		if !a.Valid() {
			dropped++
			continue
		}
		for j := from; j < len(attrs); j++ {
			if attrs[j].Key == a.Key {
				attrs[j] = a
				continue next
			}
		}
		attrs = append(attrs, a)
	}
	return attrs, dropped
}

// exportPending hands every rank's pending op spans to the span exporter
// in one call and clears them. It runs while no rank goroutine emits
// (under the step barrier, or after the rank goroutines returned).
func (r *runner) exportPending(ctx context.Context) error {
	if r.cfg.spanExporter == nil {
		return nil
	}
	total := 0
	for _, rs := range r.ranks {
		total += len(rs.pending)
	}
	if total == 0 {
		return nil
	}
	batch := make([]sdktrace.ReadOnlySpan, 0, total)
	for _, rs := range r.ranks {
		for _, sp := range rs.pending {
			batch = append(batch, sp)
		}
		clear(rs.pending)
		rs.pending = rs.pending[:0]
	}
	return r.cfg.spanExporter.ExportSpans(ctx, batch)
}
