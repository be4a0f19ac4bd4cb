package traces_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/jaegertest"
	"github.com/tpscope/tpscope/traces/schema"
)

// emitN ends n op spans under one root and returns their span IDs.
func emitN(tr trace.Tracer, n int, prefix string) []string {
	ctx, root := tr.Start(context.Background(), schema.SpanStep)
	ids := []string{root.SpanContext().SpanID().String()}
	for i := 0; i < n-1; i++ {
		_, s := tr.Start(ctx, "L00.attn.o_proj", trace.WithAttributes(schema.AttrOpID.String("L00.attn.o_proj"), schema.AttrRank.Int(i)))
		s.End()
		ids = append(ids, s.SpanContext().SpanID().String())
	}
	root.End()
	return ids
}

func spanIDSet(t *testing.T, src string) map[string]bool {
	t.Helper()
	res, err := traces.ReadAll(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, s := range res.Spans {
		m[s.SpanID.String()] = true
	}
	return m
}

// TestCollectorKilled kills a real Jaeger between two halves of a run: the
// first half must be in Jaeger, the second in the fallback file, none lost.
func TestCollectorKilled(t *testing.T) {
	j := jaegertest.Start(t)
	ctx := context.Background()
	fallback := filepath.Join(t.TempDir(), "fallback.otlp.jsonl")
	exp, err := traces.Setup(ctx, "otlp://"+j.OTLPGRPC, traces.WithFallbackFile(fallback),
		traces.WithBatchTimeout(20*time.Millisecond), traces.WithMaxBatchSize(16), traces.WithExportTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	first := emitN(exp.Tracer(), 50, "a")
	if err := exp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	var inJaeger map[string]bool
	src := "jaeger://" + strings.TrimPrefix(j.QueryHTTP, "http://") + "?service=tpscope&limit=100"
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if inJaeger = spanIDSet(t, src); len(inJaeger) >= len(first) {
			break
		}
	}
	j.Kill()
	second := emitN(exp.Tracer(), 50, "b")
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := exp.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	t.Logf("shutdown with the collector dead took %v; %v", time.Since(start), exp.Stats())
	st := exp.Stats()
	if st.Exported != 50 || st.FallbackSpans != 50 || st.Lost != 0 || st.FallbackPath != fallback || st.LastError == nil {
		t.Errorf("stats %+v, want 50 exported, 50 to %s, 0 lost, an error recorded", st, fallback)
	}
	inFile := spanIDSet(t, fallback)
	for _, id := range first {
		if !inJaeger[id] {
			t.Errorf("span %s of the first half not in Jaeger", id)
		}
	}
	for _, id := range second {
		if !inFile[id] {
			t.Errorf("span %s of the second half not in the fallback file", id)
		}
	}
}

// otlpSink is an in-process OTLP/HTTP collector that records span IDs.
type otlpSink struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	s.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.ids[trace.SpanID(sp.SpanId).String()] = true
			}
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Write(out)
}

// TestCollectorStoppedMidRun stops an in-process OTLP/HTTP collector while
// a producer is still ending spans: every span is in the collector or in
// the fallback file (a batch may be in both if the collector stored it and
// the response was lost), and Stats accounts for all of them.
func TestCollectorStoppedMidRun(t *testing.T) {
	sink := &otlpSink{ids: map[string]bool{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	ctx := context.Background()
	fallback := filepath.Join(t.TempDir(), "fallback.otlp.jsonl")
	exp, err := traces.Setup(ctx, "otlphttp://"+strings.TrimPrefix(srv.URL, "http://"), traces.WithFallbackFile(fallback),
		traces.WithBatchTimeout(5*time.Millisecond), traces.WithMaxBatchSize(8), traces.WithExportTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	tr := exp.Tracer()
	var all []string
	for round := 0; round < 40; round++ {
		all = append(all, emitN(tr, 10, "")...)
		if round == 20 {
			srv.CloseClientConnections()
			srv.Close() // mid-run: later batches fail to connect
		}
		time.Sleep(time.Millisecond)
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st := exp.Stats()
	inFile := map[string]bool{}
	if st.FallbackSpans > 0 {
		inFile = spanIDSet(t, fallback)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	lost := 0
	for _, id := range all {
		if !sink.ids[id] && !inFile[id] {
			lost++
		}
	}
	if lost > 0 || st.Lost != 0 {
		t.Errorf("%d of %d spans in neither the collector nor the fallback file; stats %v", lost, len(all), st)
	}
	if st.FallbackSpans == 0 || st.Exported+st.FallbackSpans != len(all) || len(inFile) != st.FallbackSpans {
		t.Errorf("stats %+v: want exported+fallback = %d, fallback > 0 and equal to the file's %d spans", st, len(all), len(inFile))
	}
	if !strings.Contains(st.String(), "saved to "+fallback) {
		t.Errorf("summary %q does not say where the spans went", st.String())
	}
}

// TestSetupErrors checks destinations Setup must refuse.
func TestSetupErrors(t *testing.T) {
	for _, dest := range []string{"otlp:/nohost", "kafka://h:1", "file:", "otlp://"} {
		t.Run(dest, func(t *testing.T) {
			if _, err := traces.Setup(context.Background(), dest); err == nil {
				t.Errorf("Setup(%q) = nil error", dest)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
		for _, dest := range []string{"", "none"} {
			exp, err := traces.Setup(context.Background(), dest)
			if err != nil || exp.Enabled() {
				t.Errorf("Setup(%q) = enabled %v, %v; want off", dest, exp != nil && exp.Enabled(), err)
			}
			if err := exp.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
}

// TestCollectorNeverThere exports to a port nobody listens on: every span
// lands in the fallback file.
func TestCollectorNeverThere(t *testing.T) {
	for _, scheme := range []string{"otlp", "otlphttp"} {
		t.Run("export="+scheme, func(t *testing.T) {
			// Shutdown must leave no exporter goroutine behind.
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			srv := httptest.NewServer(http.NotFoundHandler())
			addr := strings.TrimPrefix(srv.URL, "http://")
			srv.Close() // the port is now closed
			fallback := filepath.Join(t.TempDir(), "fallback.otlp.jsonl")
			exp, err := traces.Setup(context.Background(), scheme+"://"+addr, traces.WithFallbackFile(fallback), traces.WithExportTimeout(300*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			ids := emitN(exp.Tracer(), 25, "")
			if err := exp.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			st := exp.Stats()
			inFile := spanIDSet(t, fallback)
			if st.Exported != 0 || st.FallbackSpans != len(ids) || len(inFile) != len(ids) {
				t.Errorf("stats %v, %d spans in the file; want all %d in the fallback file", st, len(inFile), len(ids))
			}
		})
	}
}

// TestSetupFromEnvironment: an empty destination takes the standard
// OTEL_EXPORTER_OTLP_* variables (here OTLP/HTTP to an in-process collector).
func TestSetupFromEnvironment(t *testing.T) {
	sink := &otlpSink{ids: map[string]bool{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	exp, err := traces.Setup(context.Background(), "", traces.WithFallbackFile(filepath.Join(t.TempDir(), "fb.jsonl")))
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Enabled() {
		t.Fatal("Setup(\"\") with OTEL_EXPORTER_OTLP_ENDPOINT set is off")
	}
	ids := emitN(exp.Tracer(), 7, "")
	if err := exp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, id := range ids {
		if !sink.ids[id] {
			t.Errorf("span %s did not reach the collector; stats %v", id, exp.Stats())
		}
	}
}
