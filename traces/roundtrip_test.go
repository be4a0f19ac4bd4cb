package traces_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/jaegertest"
	"github.com/tpscope/tpscope/traces/schema"
)

// emitted is what the test step writes for one op span, kept to check the
// read-back against values set here, not values read elsewhere.
type emitted struct {
	op          model.Op
	start       time.Time
	dur         time.Duration
	predictedUs float64
	extra       []attribute.KeyValue
}

// testOps is one decoder layer plus the LM head on one rank, sizes of
// DeepSeek-V3 decode at batch 1 with TP=2 (the numbers only have to
// survive the round trip; they are not checked against a cost model).
func testOps(rank int) []model.Op {
	return []model.Op{
		{ID: "L00.attn.q_a_proj", Kind: model.KindGEMM, Layer: 0, Block: "attn", Name: "q_a_proj", Rank: rank,
			FLOPs: 2 * 7168 * 1536, BytesRead: 7168 * 1536, WeightDtype: model.Dtype("fp8")},
		{ID: "L00.attn.core", Kind: model.KindAttention, Layer: 0, Block: "attn", Name: "core", Rank: rank,
			FLOPs: 2 * 64 * 4096 * 576 * 2, BytesRead: 4096 * 576 * 2, ActDtype: model.Dtype("bf16")},
		{ID: "L00.attn.allreduce", Kind: model.KindCollective, Layer: 0, Block: "attn", Name: "allreduce", Rank: rank,
			Collective: model.AllReduce, CommBytes: 7168 * 2, Group: []int{0, 1}, ActDtype: model.Dtype("bf16")},
		{ID: "L00.moe.experts", Kind: model.KindMoEGEMM, Layer: 0, Block: "moe", Name: "experts", Rank: rank,
			FLOPs: 3 * 2 * 7168 * 2048 * 8, BytesRead: 3 * 7168 * 2048 * 8 / 2, WeightDtype: model.Dtype("nvfp4")},
		{ID: "head.lm_head", Kind: model.KindGEMM, Layer: -1, Block: "head", Name: "lm_head", Rank: rank,
			FLOPs: 2 * 7168 * 64800, BytesRead: 7168 * 64800 * 2, WeightDtype: model.Dtype("bf16")},
	}
}

// emitStep writes one predicted-plus-measured step with explicit times
// (nanosecond fractions included) and returns what each op span carries.
func emitStep(t *testing.T, tr trace.Tracer, base time.Time, ranks int) (root trace.SpanContext, ops []emitted) {
	t.Helper()
	ctx, step := tr.Start(context.Background(), schema.SpanStep, trace.WithTimestamp(base), trace.WithAttributes(
		schema.AttrModel.String("deepseek-v3"), schema.AttrTopology.String("rtxpro6000-2s"),
		schema.AttrPlan.String("tp=2"), schema.AttrWorkload.String("decode batch=1 ctx=4096"),
		schema.AttrOptions.StringSlice([]string{"cuda-graphs", "fp8-kv"}), schema.AttrStep.Int(7), schema.AttrRanks.Int(ranks),
		schema.AttrBackend.String("cpu")))
	end := base
	for r := 0; r < ranks; r++ {
		rstart := base.Add(time.Duration(1000+r) * time.Nanosecond)
		rctx, rs := tr.Start(ctx, schema.RankSpanName(r), trace.WithTimestamp(rstart), trace.WithAttributes(schema.AttrRank.Int(r)))
		at := rstart.Add(333 * time.Nanosecond)
		for i, op := range testOps(r) {
			op := op
			dur := time.Duration(5000+1237*i+r) * time.Nanosecond
			e := emitted{op: op, start: at, dur: dur, predictedUs: 4.75 + float64(i)}
			attrs := schema.OpAttributes(&op)
			attrs = append(attrs,
				schema.AttrPredictedUs.Float64(e.predictedUs),
				schema.AttrDeviceUs.Float64(float64(dur)/1e3),
				schema.AttrHostLaunchUs.Float64(2.5),
				schema.AttrHostLaunchUnixNano.Int64(at.Add(-700*time.Nanosecond).UnixNano()),
				schema.AttrTiming.String(schema.TimingHostClock))
			switch op.Name {
			case "experts":
				attrs = append(attrs, schema.AttrSubstituted.Bool(true), schema.AttrSubstitution.String("bf16 grouped GEMM for nvfp4"), schema.AttrScale.Float64(0.25))
			case "lm_head":
				attrs = append(attrs, schema.AttrSkipped.Bool(true), schema.AttrSkipReason.String("vocab GEMM off in this run"))
			}
			e.extra = attrs
			_, s := tr.Start(rctx, op.ID, trace.WithTimestamp(at), trace.WithAttributes(attrs...))
			s.End(trace.WithTimestamp(at.Add(dur)))
			ops = append(ops, e)
			at = at.Add(dur + 211*time.Nanosecond)
		}
		rs.End(trace.WithTimestamp(at))
		if at.After(end) {
			end = at
		}
	}
	step.End(trace.WithTimestamp(end.Add(17 * time.Nanosecond)))
	return step.SpanContext(), ops
}

// checkAgainstEmitted checks every emitted op span arrived with its
// attributes, times (to res) and parentage, and the step and rank spans.
func checkAgainstEmitted(t *testing.T, got []traces.Span, rootSC trace.SpanContext, ops []emitted, ranks int, res time.Duration) {
	t.Helper()
	if want := 1 + ranks + len(ops); len(got) != want {
		t.Fatalf("%d spans, want %d (1 step + %d ranks + %d ops)", len(got), want, ranks, len(ops))
	}
	byName := map[string]traces.Span{}
	for _, s := range got {
		if s.TraceID != rootSC.TraceID() {
			t.Errorf("span %s: trace %s, want %s", s.Name, s.TraceID, rootSC.TraceID())
		}
		if s.Service != schema.ServiceName {
			t.Errorf("span %s: service %q, want %q", s.Name, s.Service, schema.ServiceName)
		}
		byName[fmt.Sprintf("%s@%d", s.Name, s.Rank)] = s
	}
	root, ok := byName[schema.SpanStep+"@-1"]
	if !ok || root.SpanID != rootSC.SpanID() || !root.IsRoot() {
		t.Fatalf("no root step span with ID %s", rootSC.SpanID())
	}
	for k, want := range map[attribute.Key]string{schema.AttrModel: "deepseek-v3", schema.AttrPlan: "tp=2", schema.AttrOptions: `["cuda-graphs","fp8-kv"]`} {
		if v, _ := root.Attr(string(k)); v.String() != want {
			t.Errorf("step %s = %q, want %q", k, v.String(), want)
		}
	}
	for _, e := range ops {
		s, ok := byName[fmt.Sprintf("%s@%d", e.op.ID, e.op.Rank)]
		if !ok {
			t.Errorf("op span %s rank %d missing", e.op.ID, e.op.Rank)
			continue
		}
		rank := byName[fmt.Sprintf("%s@%d", schema.RankSpanName(e.op.Rank), e.op.Rank)]
		if s.ParentID != rank.SpanID || rank.ParentID != root.SpanID {
			t.Errorf("%s: parent chain %s -> %s, want rank span %s -> step %s", e.op.ID, s.ParentID, rank.ParentID, rank.SpanID, root.SpanID)
		}
		if s.OpID != e.op.ID || s.OpKind != string(e.op.Kind) || s.Layer != e.op.Layer || s.Rank != e.op.Rank || s.Step != 7 {
			t.Errorf("%s: typed fields op=%q kind=%q layer=%d rank=%d step=%d", e.op.ID, s.OpID, s.OpKind, s.Layer, s.Rank, s.Step)
		}
		if s.PredictedUs != e.predictedUs {
			t.Errorf("%s: predicted_us %v, want %v", e.op.ID, s.PredictedUs, e.predictedUs)
		}
		wantStart := e.start.UnixNano() / int64(res) * int64(res)
		wantDur := e.dur / res * res
		if s.Start != wantStart || s.Duration != wantDur {
			t.Errorf("%s: start %d dur %d, want %d %d", e.op.ID, s.Start, s.Duration, wantStart, wantDur)
		}
		if len(s.Attrs) != len(e.extra) {
			t.Errorf("%s: %d attributes %v, want %d", e.op.ID, len(s.Attrs), s.Attrs, len(e.extra))
		}
		for _, kv := range e.extra {
			v, ok := s.Attr(string(kv.Key))
			if !ok || v.String() != kv.Value.Emit() {
				t.Errorf("%s: %s = %v (present %v), want %s", e.op.ID, kv.Key, v, ok, kv.Value.Emit())
			}
		}
	}
}

// diffSpans lists differences between two normalized span lists (both
// sorted by the reader), times compared at resolution res.
func diffSpans(a, b []traces.Span, res time.Duration) []string {
	var d []string
	if len(a) != len(b) {
		return []string{fmt.Sprintf("%d spans vs %d", len(a), len(b))}
	}
	sort.Slice(a, func(i, j int) bool { return a[i].SpanID.String() < a[j].SpanID.String() })
	sort.Slice(b, func(i, j int) bool { return b[i].SpanID.String() < b[j].SpanID.String() })
	for i := range a {
		x, y := a[i], b[i]
		id := x.Name + "/" + x.SpanID.String()
		if x.TraceID != y.TraceID || x.SpanID != y.SpanID || x.ParentID != y.ParentID || x.Name != y.Name {
			d = append(d, fmt.Sprintf("%s: ids/name %s %s %s %s vs %s %s %s %s", id, x.TraceID, x.SpanID, x.ParentID, x.Name, y.TraceID, y.SpanID, y.ParentID, y.Name))
		}
		if x.Start/int64(res) != y.Start/int64(res) || x.Duration/res != y.Duration/res {
			d = append(d, fmt.Sprintf("%s: time %d+%d vs %d+%d", id, x.Start, x.Duration, y.Start, y.Duration))
		}
		if x.Service != y.Service || x.Scope != y.Scope || x.SpanKind != y.SpanKind || x.Status != y.Status || x.StatusMessage != y.StatusMessage {
			d = append(d, fmt.Sprintf("%s: service/scope/kind/status %q %q %q %q vs %q %q %q %q", id, x.Service, x.Scope, x.SpanKind, x.Status, y.Service, y.Scope, y.SpanKind, y.Status))
		}
		if s1, s2 := attrsString(x.Attrs), attrsString(y.Attrs); s1 != s2 {
			d = append(d, fmt.Sprintf("%s: attributes\n  %s\nvs %s", id, s1, s2))
		}
		if s1, s2 := attrsString(x.Resource.Attrs), attrsString(y.Resource.Attrs); s1 != s2 {
			d = append(d, fmt.Sprintf("%s: resource\n  %s\nvs %s", id, s1, s2))
		}
	}
	return d
}

func attrsString(a []traces.Attr) string {
	var s []string
	for _, x := range a {
		s = append(s, x.Key+":"+x.Value.Type().String()+"="+x.Value.String())
	}
	return strings.Join(s, " ")
}

// TestFileRoundTrip exports a step to an OTLP JSON file and reads it back.
func TestFileRoundTrip(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "step.otlp.jsonl")
	ctx := context.Background()
	exp, err := traces.Setup(ctx, "file:"+path, traces.WithResource(schema.ResGPUModel.String("NVIDIA RTX PRO 6000 Blackwell Server Edition"), schema.ResNCCLVersion.String("2.28.3")))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Unix(1764633600, 123456789)
	rootSC, ops := emitStep(t, exp.Tracer(), base, 2)
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := exp.Stats(); st.Exported != 13 || st.FallbackSpans != 0 || st.Lost != 0 {
		t.Errorf("stats %+v, want 13 exported", st)
	}
	res, err := traces.ReadAll(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if res.Format != traces.FormatOTLPJSON || res.SkippedTotal != 0 {
		t.Errorf("format %s, skipped %v", res.Format, res.Skipped)
	}
	checkAgainstEmitted(t, res.Spans, rootSC, ops, 2, time.Nanosecond)
	if v, _ := res.Spans[0].Resource.Attr(string(schema.ResNCCLVersion)); v.String() != "2.28.3" {
		t.Errorf("resource nccl version %q, want 2.28.3", v.String())
	}
	if len(res.Scenarios) != 1 || res.Scenarios[0].Model != "deepseek-v3" || len(res.Scenarios[0].Traces) != 1 {
		t.Errorf("scenarios %v, want one deepseek-v3 scenario with one trace", res.Scenarios)
	}
}

// TestJaegerRoundTrip exports a step to a real Jaeger over OTLP/gRPC with a
// file copy of the same spans, reads it back through the query API v3 and
// v1, and checks every span and attribute arrived and that file and Jaeger
// agree (v3 to the nanosecond, v1 to its microsecond resolution).
func TestJaegerRoundTrip(t *testing.T) {
	j := jaegertest.Start(t)
	for _, proto := range []string{"otlp", "otlphttp"} {
		t.Run("export="+proto, func(t *testing.T) {
			ctx := context.Background()
			addr := j.OTLPGRPC
			if proto == "otlphttp" {
				addr = j.OTLPHTTP
			}
			copyPath := filepath.Join(t.TempDir(), "copy.otlp.jsonl")
			service := "tpscope" // Jaeger search is by service; traces are told apart by ID
			exp, err := traces.Setup(ctx, proto+"://"+addr, traces.WithCopyFile(copyPath),
				traces.WithExportTimeout(5*time.Second), traces.WithFallbackFile(filepath.Join(t.TempDir(), "fallback.jsonl")))
			if err != nil {
				t.Fatal(err)
			}
			base := time.Now().Add(-time.Minute).Truncate(time.Second).Add(123456789)
			rootSC, ops := emitStep(t, exp.Tracer(), base, 2)
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			if err := exp.Shutdown(sctx); err != nil {
				t.Fatal(err)
			}
			if st := exp.Stats(); st.Exported != 13 || st.FallbackSpans != 0 {
				t.Fatalf("stats: %v", st)
			}
			file, err := traces.ReadAll(ctx, copyPath)
			if err != nil {
				t.Fatal(err)
			}
			host := strings.TrimPrefix(j.QueryHTTP, "http://")
			for _, api := range []string{"v3", "v1"} {
				t.Run("api="+api, func(t *testing.T) {
					src := fmt.Sprintf("jaeger://%s?service=%s&api=%s&trace=%s", host, service, api, rootSC.TraceID())
					var got *traces.Result
					// A flushed trace is queryable 0.1-0.7 s later (go-stack.md),
					// longer on a loaded machine: the loop ends once the spans are in.
					for deadline := time.Now().Add(60 * time.Second); ; {
						got, err = traces.ReadAll(ctx, src)
						if err == nil && len(got.Spans) == 13 || time.Now().After(deadline) {
							break
						}
						time.Sleep(100 * time.Millisecond)
					}
					if err != nil {
						t.Fatal(err)
					}
					res := time.Nanosecond
					if api == "v1" {
						res = time.Microsecond
					}
					t.Logf("%s: %d spans from Jaeger pid %d, %d from the file copy", src, len(got.Spans), j.PID, len(file.Spans))
					checkAgainstEmitted(t, got.Spans, rootSC, ops, 2, res)
					for _, d := range diffSpans(file.Spans, got.Spans, res) {
						t.Error(d)
					}
					if got.SkippedTotal != 0 {
						t.Errorf("skipped: %v", got.Skipped)
					}
				})
			}
		})
	}
	t.Run("search", func(t *testing.T) {
		// Search by service (no trace ID): both steps exported above come back.
		for _, api := range []string{"v3", "v1"} {
			res, err := traces.ReadAll(context.Background(), "jaeger://"+strings.TrimPrefix(j.QueryHTTP, "http://")+"?service=tpscope&limit=20&api="+api)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Spans) != 26 || len(res.Scenarios) != 1 || len(res.Scenarios[0].Traces) != 2 {
				t.Errorf("api %s: %d spans, scenarios %v; want 26 spans in 2 traces of one scenario", api, len(res.Spans), res.Scenarios)
			}
			// A service with no traces is an empty result, not an error
			// (API v3 answers it with 404 "No traces found").
			res, err = traces.ReadAll(context.Background(), "jaeger://"+strings.TrimPrefix(j.QueryHTTP, "http://")+"?service=nobody&api="+api)
			if err != nil || len(res.Spans) != 0 {
				t.Errorf("api %s, unknown service: %v, %d spans; want no error and no spans", api, err, len(res.Spans))
			}
		}
	})
}
