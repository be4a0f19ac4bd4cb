package exec_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/jaegertest"
	"github.com/tpscope/tpscope/traces/schema"
)

// TestRunSpanExporterJaeger sends the same run to a real Jaeger twice,
// once with every span through the SDK tracer and once with
// WithSpanExporter(traces.Exporter.SpanExporter()), reads both back through
// Jaeger's query API and compares what the reader sees of every span but
// IDs and measured times: tree, names, service and resource, scope, kind,
// status and attributes.
func TestRunSpanExporterJaeger(t *testing.T) {
	j := jaegertest.Start(t)
	ctx := context.Background()
	const ranks, layers, steps = 2, 1, 2
	s := exectest.Schedule(ranks, layers)
	pred := map[string]float64{"L00.attn.q_proj": 7.5}
	for _, mode := range []string{"sdk", "bulk"} {
		exp, err := traces.Setup(ctx, "otlp://"+j.OTLPGRPC, traces.WithBatchTimeout(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		opts := []exec.Option{exec.WithTracerProvider(exp.TracerProvider()), exec.WithSteps(steps), exec.WithWarmup(0),
			exec.WithPredictedUs(pred), exec.WithScenario("", mode, nil)}
		if mode == "bulk" {
			sink := exp.SpanExporter()
			if sink == nil {
				t.Fatal("SpanExporter() = nil for an OTLP destination")
			}
			opts = append(opts, exec.WithSpanExporter(sink))
		}
		_, runErr := exec.Run(ctx, s, exectest.New(), opts...)
		if err := exp.Shutdown(ctx); err != nil || runErr != nil {
			t.Fatalf("%s: run %v, shutdown %v", mode, runErr, err)
		}
		if st := exp.Stats(); st.FallbackSpans != 0 || st.Lost != 0 {
			t.Fatalf("%s: %v", mode, st)
		}
	}

	perRun := steps * (1 + ranks + s.NumOps())
	src := "jaeger://" + strings.TrimPrefix(j.QueryHTTP, "http://") + "?service=tpscope&limit=100"
	var spans []traces.Span
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		res, err := traces.ReadAll(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		spans = res.Spans
		if len(spans) >= 2*perRun || time.Now().After(deadline) {
			break
		}
	}
	if len(spans) != 2*perRun {
		t.Fatalf("Jaeger has %d spans, want 2 runs x %d", len(spans), perRun)
	}

	byID := map[[8]byte]traces.Span{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
	}
	shapes := map[string][]string{}
	for _, sp := range spans {
		path, root := sp.Name, sp
		for root.ParentID.IsValid() {
			p, ok := byID[root.ParentID]
			if !ok || p.TraceID != root.TraceID {
				t.Fatalf("span %s: parent %s missing from its trace", root.Name, root.ParentID)
			}
			path, root = p.Name+"/"+path, p
		}
		mode := "?"
		var kv []string
		for _, a := range root.Attrs {
			if a.Key == string(schema.AttrTopology) {
				mode = a.Value.String()
			}
		}
		for _, a := range sp.Attrs {
			v := a.Value.String()
			if volatile[attributeKey(a.Key)] || a.Key == string(schema.AttrTopology) {
				v = "*"
			}
			kv = append(kv, a.Key+"="+v)
		}
		var res []string
		for _, a := range sp.Resource.Attrs {
			res = append(res, a.String())
		}
		shapes[mode] = append(shapes[mode], fmt.Sprintf("%s service=%s res=%v scope=%s kind=%s status=%s:%q attrs=%v",
			path, sp.Service, res, sp.Scope, sp.SpanKind, sp.Status, sp.StatusMessage, kv))
	}
	t.Logf("Jaeger at %s returned %d spans; e.g. %s", j.OTLPGRPC, len(spans), shapes["bulk"][0])
	a, b := shapes["sdk"], shapes["bulk"]
	slices.Sort(a)
	slices.Sort(b)
	if len(a) != perRun || len(b) != perRun {
		t.Fatalf("spans per run: sdk %d, bulk %d; want %d", len(a), len(b), perRun)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("span %d differs:\n sdk  %s\n bulk %s", i, a[i], b[i])
		}
	}
}
