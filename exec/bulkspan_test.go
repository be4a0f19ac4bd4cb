package exec_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
)

// volatile are the attributes whose values are measurements, different in
// every run; shapeOf keeps their keys and drops their values.
var volatile = map[attribute.Key]bool{
	schema.AttrDeviceUs: true, schema.AttrHostLaunchUs: true, schema.AttrHostLaunchUnixNano: true,
	exec.AttrStepUs: true, exec.AttrReplayUs: true,
}

// shapeOf is everything a reader sees of the spans but the IDs and times:
// per span its path of names from the root, kind, status, scope, resource
// and attributes in order (measured values blanked), sorted. It also checks
// what must hold of the IDs and times: valid, unique span IDs, every parent
// present in the same trace, children inside their parents, and op spans
// as long as their device time.
func shapeOf(t *testing.T, spans tracetest.SpanStubs) []string {
	t.Helper()
	byID := map[[8]byte]tracetest.SpanStub{}
	for _, s := range spans {
		id := s.SpanContext.SpanID()
		if !s.SpanContext.IsValid() || !s.SpanContext.IsSampled() {
			t.Errorf("span %s: span context %v not valid and sampled", s.Name, s.SpanContext)
		}
		if _, dup := byID[id]; dup {
			t.Errorf("span %s: span ID %s used twice", s.Name, id)
		}
		byID[id] = s
	}
	var out []string
	for _, s := range spans {
		path := s.Name
		for p := s; p.Parent.IsValid(); {
			q, ok := byID[p.Parent.SpanID()]
			if !ok || q.SpanContext.TraceID() != p.SpanContext.TraceID() || !q.SpanContext.Equal(p.Parent) {
				t.Errorf("span %s: parent %s missing or in another trace", p.Name, p.Parent.SpanID())
				break
			}
			if p.StartTime.Before(q.StartTime) || p.EndTime.After(q.EndTime) {
				t.Errorf("span %s [%v, %v] outside its parent %s [%v, %v]", p.Name, p.StartTime, p.EndTime, q.Name, q.StartTime, q.EndTime)
			}
			path = q.Name + "/" + path
			p = q
		}
		var kv []string
		for _, a := range s.Attributes {
			v := a.Value.Emit()
			if volatile[a.Key] {
				v = "*"
			}
			if a.Key == schema.AttrDeviceUs {
				if d := float64(s.EndTime.Sub(s.StartTime).Nanoseconds()) / 1e3; d != a.Value.AsFloat64() {
					t.Errorf("span %s: %v long, device_us %v", s.Name, d, a.Value.AsFloat64())
				}
			}
			kv = append(kv, string(a.Key)+"="+v)
		}
		out = append(out, fmt.Sprintf("%s kind=%v status=%v:%q scope=%v res=%s links=%d events=%d dropped=%d attrs=[%s]",
			path, s.SpanKind, s.Status.Code, s.Status.Description, s.InstrumentationScope, s.Resource.Encoded(attribute.DefaultEncoder()),
			len(s.Links), len(s.Events), s.DroppedAttributes, strings.Join(kv, " ")))
	}
	slices.Sort(out)
	return out
}

// annotating adds an OpAnnotator to the fake backend's ranks: one new
// attribute, one that repeats a schema key (the later value must win in
// the earlier position, as the SDK records it) and an invalid one (dropped).
type annotating struct{ exec.Backend }
type annotSession struct{ exec.Session }
type annotRank struct{ exec.Rank }

func (b annotating) Open(ctx context.Context, s *model.Schedule, cfg exec.SessionConfig) (exec.Session, error) {
	sess, err := b.Backend.Open(ctx, s, cfg)
	return annotSession{sess}, err
}
func (s annotSession) OpenRank(ctx context.Context, rank int) (exec.Rank, error) {
	rk, err := s.Session.OpenRank(ctx, rank)
	return annotRank{rk}, err
}
func (annotRank) OpAttributes(i int) []attribute.KeyValue {
	return []attribute.KeyValue{schema.AttrKernel.String(fmt.Sprintf("k%d", i)), schema.AttrDtype.String("fp8"), {}}
}

// TestRunSpanExporterSameSpans runs the same schedule with every span
// through the SDK tracer and with WithSpanExporter (op spans built by the
// runner) and compares what a reader sees: same tree, names, kinds,
// statuses, scope, resource and attributes.
func TestRunSpanExporterSameSpans(t *testing.T) {
	defer goleak.VerifyNone(t)
	res := resource.NewSchemaless(attribute.String("service.name", "tpscope"), attribute.String("host.name", "test"))
	pred := map[string]float64{"L01.attn.q_proj": 12.5, "L00.attn.allreduce": 3}
	cases := []struct {
		name    string
		backend exec.Backend
		opts    []exec.Option
	}{
		{"host-clock", exectest.New(), nil},
		{"device-times/scale=4", exectest.New(exectest.WithDeviceTimes()), []exec.Option{exec.WithScheduleScale(4)}},
		{"graphs", exectest.New(exectest.WithGraphs()), []exec.Option{exec.WithGraphs(true)}},
		{"annotated", annotating{exectest.New()}, nil},
		{"local-ranks", exectest.New(), []exec.Option{exec.WithLocalRanks(1, 2)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := func(bulk bool) tracetest.SpanStubs {
				mem := tracetest.NewInMemoryExporter()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem), sdktrace.WithResource(res))
				defer tp.Shutdown(context.Background())
				opts := append([]exec.Option{exec.WithTracerProvider(tp), exec.WithSteps(2), exec.WithWarmup(1),
					exec.WithPredictedUs(pred), exec.WithScenario("", "cpu.json", nil)}, tc.opts...)
				if bulk {
					opts = append(opts, exec.WithSpanExporter(mem))
				}
				if _, err := exec.Run(context.Background(), exectest.Schedule(3, 2), tc.backend, opts...); err != nil {
					t.Fatal(err)
				}
				return mem.GetSpans()
			}
			sdk, bulk := run(false), run(true)
			// 2 steps x (1 root + ranks + ranks x 10 ops).
			ranks := 3
			if tc.name == "local-ranks" {
				ranks = 2
			}
			if want := 2 * (1 + ranks + ranks*10); len(sdk) != want || len(bulk) != want {
				t.Fatalf("spans: sdk %d, bulk %d; want %d", len(sdk), len(bulk), want)
			}
			a, b := shapeOf(t, sdk), shapeOf(t, bulk)
			for i := range a {
				if a[i] != b[i] {
					t.Errorf("span %d differs:\n sdk  %s\n bulk %s", i, a[i], b[i])
				}
			}
		})
	}
}

// TestRunSpanExporterFailure: a failed op on one rank ends the run; the
// failed op's span has status Error "op failed" and the finished ops of the
// interrupted step are exported with that step's times (inside their rank
// span), on the bulk path as on the SDK path.
func TestRunSpanExporterFailure(t *testing.T) {
	for _, bulk := range []bool{false, true} {
		t.Run(fmt.Sprintf("bulk=%v", bulk), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			mem := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(mem))
			defer tp.Shutdown(context.Background())
			s := exectest.Schedule(1, 2)
			failID := s.Ranks[0][3].ID
			fail := exectest.WithFailure(func(rank, step int, op *model.Op) error {
				if step == 1 && op.ID == failID {
					return fmt.Errorf("injected")
				}
				return nil
			})
			opts := []exec.Option{exec.WithTracerProvider(tp), exec.WithSteps(3), exec.WithWarmup(0)}
			if bulk {
				opts = append(opts, exec.WithSpanExporter(mem))
			}
			_, err := exec.Run(context.Background(), s, exectest.New(fail), opts...)
			if err == nil || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("err = %v, want the injected failure", err)
			}
			spans := mem.GetSpans()
			// Step 0 complete (1 + 1 + 10), step 1 up to and including the
			// failed op (1 + 1 + 4).
			if want := 12 + 6; len(spans) != want {
				t.Fatalf("%d spans, want %d", len(spans), want)
			}
			failed := 0
			for _, sp := range spans {
				if sp.Status.Code == codes.Error && sp.Name == failID {
					failed++
					if sp.Status.Description != "op failed" {
						t.Errorf("failed op status %q", sp.Status.Description)
					}
				}
			}
			if failed != 1 {
				t.Errorf("%d failed op spans, want 1", failed)
			}
			shapeOf(t, spans) // checks every span lies inside its parent
		})
	}
}

// TestRunSpanExporterExportFails: an exporter error ends the run with an
// export error, as a flush error does on the SDK path.
func TestRunSpanExporterExportFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	tp, _ := exectest.NewRecorder()
	defer tp.Shutdown(context.Background())
	res, err := exec.Run(context.Background(), exectest.Schedule(2, 1), exectest.New(), exec.WithTracerProvider(tp),
		exec.WithSpanExporter(&exectest.FailingExporter{OK: 1}), exec.WithSteps(5), exec.WithWarmup(0))
	if err == nil || !strings.Contains(err.Error(), exectest.ErrExport.Error()) || !strings.Contains(err.Error(), "export spans") {
		t.Fatalf("err = %v, want the export error", err)
	}
	if res.Steps >= 5 {
		t.Errorf("ran all %d steps despite the export failure", res.Steps)
	}
}

// TestRunSpanExporterFallbackFile: with traces.Setup to a collector that is
// not there, the bulk op spans and the provider's step and rank spans all
// land in the fallback file and Stats counts them: none lost.
func TestRunSpanExporterFallbackFile(t *testing.T) {
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
	if sink == nil {
		t.Fatal("SpanExporter() = nil for an OTLP destination")
	}
	const ranks, steps = 2, 2
	s := exectest.Schedule(ranks, 1)
	if _, err := exec.Run(ctx, s, exectest.New(), exec.WithTracerProvider(exp.TracerProvider()), exec.WithSpanExporter(sink),
		exec.WithSteps(steps), exec.WithWarmup(0)); err != nil {
		t.Fatal(err)
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want := steps * (1 + ranks + s.NumOps())
	got, err := traces.ReadAll(ctx, fallback)
	if err != nil {
		t.Fatal(err)
	}
	st := exp.Stats()
	if len(got.Spans) != want || st.FallbackSpans != want || st.Lost != 0 {
		t.Errorf("%d spans in the fallback file, stats %v; want all %d there", len(got.Spans), st, want)
	}
}

func attributeKey(s string) attribute.Key { return attribute.Key(s) }
