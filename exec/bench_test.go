package exec_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/traces/schema"
)

// discard is a span exporter that reads what an OTLP exporter reads of
// every span (IDs, parent, name, kind, times, status, attributes, resource,
// scope), so lazily computed fields are paid for, then drops the batch.
type discard struct{}

var discardSum int64

func (discard) ExportSpans(_ context.Context, spans []trace.ReadOnlySpan) error {
	var n int64
	for _, s := range spans {
		sc, p := s.SpanContext(), s.Parent()
		n += int64(sc.SpanID()[0]) + int64(p.SpanID()[0]) + int64(len(s.Name())) + int64(s.SpanKind())
		n += s.EndTime().UnixNano() - s.StartTime().UnixNano() + int64(s.Status().Code)
		n += int64(len(s.Attributes()) + s.DroppedAttributes() + len(s.Events()) + len(s.Links()))
		n += int64(s.Resource().Len() + len(s.InstrumentationScope().Name))
	}
	discardSum += n
	return nil
}
func (discard) Shutdown(context.Context) error { return nil }

// BenchmarkRunnerOverhead measures the runner's cost per op — host timing
// around Exec, the step barrier, span creation with all attributes and the
// hand-off to a (discarding) exporter, flushed every step — over a backend
// whose ops do nothing. tracer=sdk-batch creates every span through the
// SDK's tracer; tracer=sdk-bulk is the same provider with WithSpanExporter
// (op spans built by the runner, exported once per step). b.N is the number of measured steps;
// the custom metric ns/op-overhead divides the elapsed time by the ops run
// (ranks x ops per rank x steps). Target: under 2000 ns (issue 6).
func BenchmarkRunnerOverhead(b *testing.B) {
	for _, tracer := range []string{"noop", "sdk-batch", "sdk-bulk"} {
		for _, ranks := range []int{1, 4} {
			b.Run(fmt.Sprintf("tracer=%s/ranks=%d", tracer, ranks), func(b *testing.B) {
				s := exectest.Schedule(ranks, 20) // 100 ops per rank
				opsPerStep := float64(s.NumOps())
				var tp interface {
					ForceFlush(context.Context) error
				}
				opts := []exec.Option{exec.WithWarmup(0)}
				switch tracer {
				case "noop":
					opts = append(opts, exec.WithTracerProvider(noop.NewTracerProvider()))
				default:
					p := trace.NewTracerProvider(trace.WithBatcher(discard{}, trace.WithBlocking()))
					defer p.Shutdown(context.Background())
					tp = p
					opts = append(opts, exec.WithTracerProvider(p))
					if tracer == "sdk-bulk" {
						// Op spans built by the runner, exported in one batch per step.
						opts = append(opts, exec.WithSpanExporter(discard{}))
					}
				}
				_ = tp
				pred := map[string]float64{}
				for _, op := range s.Ranks[0] {
					pred[op.ID] = 1
				}
				opts = append(opts, exec.WithPredictedUs(pred))
				b.ReportAllocs()
				b.ResetTimer()
				res, err := exec.Run(context.Background(), s, exectest.NoOp(), append(opts, exec.WithSteps(b.N))...)
				b.StopTimer()
				if err != nil || res.Steps != b.N {
					b.Fatalf("steps %d err %v", res.Steps, err)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(opsPerStep*float64(b.N)), "ns/op-overhead")
			})
		}
	}
}

// BenchmarkSDKSpan is the reference for BenchmarkRunnerOverhead: what the
// OpenTelemetry SDK alone costs for one op span with the runner's 14
// attributes and explicit timestamps, batched to a discarding exporter.
func BenchmarkSDKSpan(b *testing.B) {
	p := trace.NewTracerProvider(trace.WithBatcher(discard{}, trace.WithBlocking()))
	defer p.Shutdown(context.Background())
	tr := p.Tracer("bench")
	s := exectest.Schedule(1, 1)
	op := &s.Ranks[0][0]
	kv := append(schema.OpAttributes(op), schema.AttrPredictedUs.Float64(1), schema.AttrDeviceUs.Float64(2),
		schema.AttrHostLaunchUs.Float64(3), schema.AttrHostLaunchUnixNano.Int64(4), schema.AttrTiming.String(schema.TimingHostClock))
	ctx, root := tr.Start(context.Background(), "rank/0")
	defer root.End()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_, sp := tr.Start(ctx, op.ID, oteltrace.WithTimestamp(now))
		sp.SetAttributes(kv...)
		sp.End(oteltrace.WithTimestamp(now))
	}
}
