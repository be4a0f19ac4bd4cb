package traces

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/tpscope/tpscope/traces/schema"
)

func TestJaegerUIDownload(t *testing.T) {
	res, err := ReadAll(context.Background(), "testdata/jaeger_ui_download.json")
	if err != nil {
		t.Fatal(err)
	}
	if res.Format != FormatJaegerV1 || res.SkippedTotal != 0 || len(res.Spans) != 3 {
		t.Fatalf("format %s, %d spans, skipped %v; want jaeger-v1, 3 spans, none skipped", res.Format, len(res.Spans), res.Skipped)
	}
	// Sorted by start: step (…000), rank/0 (…100), the op (…123); values
	// from the fixture, microseconds turned into nanoseconds.
	step, rank, op := res.Spans[0], res.Spans[1], res.Spans[2]
	if step.Name != "step" || !step.IsRoot() || step.Status != "error" || step.StatusMessage != "rank 5 timed out" || step.Step != 4 {
		t.Errorf("step span %+v", step)
	}
	if rank.Name != "rank/0" || rank.SpanID.String() != "00f067aa0ba902b7" || rank.ParentID != step.SpanID || rank.Rank != 0 {
		t.Errorf("rank span %s id %s parent %s rank %d", rank.Name, rank.SpanID, rank.ParentID, rank.Rank)
	}
	if op.OpID != "L03.attn.allreduce" || op.OpKind != "collective" || op.Layer != 3 || op.PredictedUs != 35.5 ||
		op.Start != 1764633600000123000 || op.Duration != 41*time.Microsecond || op.ParentID != rank.SpanID ||
		op.Scope != "github.com/tpscope/tpscope" || op.SpanKind != "internal" || op.Step != 4 || op.Seq != 0 || op.KindSeq != 0 {
		t.Errorf("op span %+v", op)
	}
	if _, ok := op.Attr("otel.scope.name"); ok {
		t.Error("otel.scope.name kept as an attribute; want it in Scope only")
	}
	if v, _ := op.Resource.Attr(string(schema.ResHostName)); v.String() != "gpu-box-1" || op.Service != "tpscope" {
		t.Errorf("resource host %q service %q", v.String(), op.Service)
	}
}

// TestJaegerParentReference: a CHILD_OF reference names the parent in
// whatever order the references come; FOLLOWS_FROM only when there is no
// CHILD_OF. The fixture's op span (child of rank/0, 00f067aa0ba902b7) is
// given a FOLLOWS_FROM reference to the step (0a0b0c0d0e0f1011) first.
func TestJaegerParentReference(t *testing.T) {
	b, err := os.ReadFile("testdata/jaeger_ui_download.json")
	if err != nil {
		t.Fatal(err)
	}
	const childOf = `{"refType":"CHILD_OF","traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"00f067aa0ba902b7"}`
	const followsFrom = `{"refType":"FOLLOWS_FROM","traceID":"4bf92f3577b34da6a3ce929d0e0e4736","spanID":"0a0b0c0d0e0f1011"}`
	if !bytes.Contains(b, []byte(`"references":[`+childOf+`]`)) {
		t.Fatal("fixture: the op span's CHILD_OF reference is not where the test expects it")
	}
	for _, tc := range []struct {
		name, refs, parent string
	}{
		{"FOLLOWS_FROM before CHILD_OF", followsFrom + "," + childOf, "00f067aa0ba902b7"},
		{"CHILD_OF before FOLLOWS_FROM", childOf + "," + followsFrom, "00f067aa0ba902b7"},
		{"FOLLOWS_FROM alone", followsFrom, "0a0b0c0d0e0f1011"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := bytes.Replace(b, []byte(`"references":[`+childOf+`]`), []byte(`"references":[`+tc.refs+`]`), 1)
			path := filepath.Join(t.TempDir(), "in.json")
			if err := os.WriteFile(path, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := ReadAll(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			for _, sp := range res.Spans {
				if sp.OpID == "L03.attn.allreduce" && sp.ParentID.String() != tc.parent {
					t.Errorf("op span parent %s, want %s", sp.ParentID, tc.parent)
				}
			}
		})
	}
}

// otlpLine builds a one-trace OTLP JSON request line for bad-input tests.
func otlpLine(traceID, model string, spans ...string) string {
	return `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"tpscope"}}]},"scopeSpans":[{"scope":{"name":"t"},"spans":[` +
		`{"traceId":"` + traceID + `","spanId":"0000000000000001","name":"step","startTimeUnixNano":"1000","endTimeUnixNano":"9000","attributes":[{"key":"tpscope.model","value":{"stringValue":"` + model + `"}}]}` +
		strings.Join(spans, "") + `]}]}]}` + "\n"
}

func otlpSpanJSON(traceID, spanID, name, opID string) string {
	return `,{"traceId":"` + traceID + `","spanId":"` + spanID + `","parentSpanId":"0000000000000001","name":"` + name +
		`","startTimeUnixNano":"2000","endTimeUnixNano":"3000","attributes":[{"key":"tpscope.op.id","value":{"stringValue":"` + opID + `"}}]}`
}

const (
	tidA = "0102030405060708090a0b0c0d0e0f10"
	tidB = "1102030405060708090a0b0c0d0e0f10"
)

// TestBadTraces: bad input yields a report of what was skipped and why, and
// the usable rest; only input with nothing usable is an error.
func TestBadTraces(t *testing.T) {
	good := otlpLine(tidA, "deepseek-v3", otlpSpanJSON(tidA, "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj"))
	kineto, err := os.ReadFile("testdata/kineto_two_steps.json")
	if err != nil {
		t.Fatal(err)
	}
	jaegerUI, err := os.ReadFile("testdata/jaeger_ui_download.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		in        string
		wantErr   string   // substring of the error; "" = no error
		wantSpans int      // spans kept
		wantSkips []string // substrings of skip reasons, in order
		scenarios int
	}{
		// A cut file is an error (TestPartialInput reads it with WithAllowPartial).
		{name: "otlp/truncated", in: good + good[:len(good)/2], wantErr: "the file was cut"},
		{name: "otlp/span without trace ID", in: otlpLine(tidA, "m", otlpSpanJSON("", "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj")),
			wantSpans: 1, wantSkips: []string{`traceId "" is not 32 hex digits`}, scenarios: 1},
		{name: "otlp/span without span ID", in: otlpLine(tidA, "m", otlpSpanJSON(tidA, "", "L00.attn.o_proj", "L00.attn.o_proj")),
			wantSpans: 1, wantSkips: []string{`spanId "" is not 16 hex digits`}, scenarios: 1},
		{name: "otlp/malformed op ID", in: otlpLine(tidA, "m", otlpSpanJSON(tidA, "0000000000000002", "x", "layer seven o_proj")),
			wantSpans: 1, wantSkips: []string{`op ID "layer seven o_proj" is not`}, scenarios: 1},
		{name: "otlp/wrong value type", in: strings.Replace(good, `"startTimeUnixNano":"2000"`, `"startTimeUnixNano":{"x":1}`, 1),
			wantSpans: 1, wantSkips: []string{"startTimeUnixNano is not an integer"}, scenarios: 1},
		{name: "otlp/ends before start", in: strings.Replace(good, `"endTimeUnixNano":"3000"`, `"endTimeUnixNano":"1500"`, 1),
			wantSpans: 1, wantSkips: []string{"ends (1500) before it starts (2000)"}, scenarios: 1},
		// A time the span lost read as 0 (1970): a span lasting 57 years.
		{name: "otlp/no start time", in: strings.Replace(good, `"startTimeUnixNano":"2000",`, ``, 1),
			wantSpans: 1, wantSkips: []string{"no startTimeUnixNano"}, scenarios: 1},
		{name: "otlp/no end time", in: strings.Replace(good, `,"endTimeUnixNano":"3000"`, ``, 1),
			wantSpans: 1, wantSkips: []string{"no endTimeUnixNano"}, scenarios: 1},
		{name: "otlp/mixed scenarios", in: good + otlpLine(tidB, "kimi-k2.5"), wantSpans: 3, scenarios: 2},
		// good[:40] is `{"resourceSpans":[{"resource":{"attribut`.
		{name: "otlp/truncated in first document", in: good[:40], wantErr: "JSON ends inside resourceSpans[0].resource at byte 40 (line 1): the file was cut"},
		{name: "not json", in: "hello", wantErr: "not JSON"},
		{name: "empty", in: "  \n", wantErr: "empty"},
		{name: "unknown object", in: `{"foo":1}`, wantErr: "unknown trace format"},
		// 2/3 of the fixture's bytes end on line 4, its third span (data[0].spans[2]).
		{name: "jaeger/truncated", in: string(jaegerUI[:len(jaegerUI)*2/3]), wantErr: "JSON ends inside data[0].spans[2] at byte 1307 (line 4)"},
		{name: "jaeger/bad tag type", in: strings.Replace(string(jaegerUI), `"type":"int64","value":3`, `"type":"int64","value":"three"`, 1),
			wantSpans: 3, wantSkips: []string{`tag "tpscope.layer": want an int64 value`}, scenarios: 1},
		{name: "jaeger/span without ID", in: strings.Replace(string(jaegerUI), `"spanID":"a1b2c3d4e5f60718"`, `"spanID":""`, 1),
			wantSpans: 2, wantSkips: []string{`spanID "" is not hex`}, scenarios: 1},
		// Cut inside the 17th kernel event, event 43 of traceEvents.
		{name: "kineto/truncated", in: string(kineto[:nthIndex(kineto, `"cat": "kernel"`, 17)]), wantErr: "JSON ends inside traceEvents[43]"},
		// Cut before any event is complete.
		{name: "kineto/truncated before any event", in: string(kineto[:nthIndex(kineto, `"traceEvents"`, 1)+20]), wantErr: "JSON ends inside traceEvents[0]"},
		// Event 4 is step 1's first kernel: 22 step kernels less that one.
		{name: "kineto/bad ts", in: strings.Replace(string(kineto), `"ts": 1012.0`, `"ts": "soon"`, 1), wantSpans: 21,
			wantSkips: []string{"kernel event 4 "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.json")
			if err := os.WriteFile(path, []byte(tc.in), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := ReadAll(context.Background(), path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want one naming %s and saying %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Spans) != tc.wantSpans {
				t.Errorf("%d spans, want %d; skipped %v", len(res.Spans), tc.wantSpans, res.Skipped)
			}
			text := skipText(res)
			for _, w := range tc.wantSkips {
				i := strings.Index(text, w)
				if i < 0 {
					t.Errorf("skip report lacks %q:\n%s", w, text)
					continue
				}
				text = text[i+len(w):]
			}
			if len(tc.wantSkips) == 0 && res.SkippedTotal != 0 {
				t.Errorf("unexpected skips: %v", res.Skipped)
			}
			if tc.scenarios != 0 && len(res.Scenarios) != tc.scenarios {
				t.Errorf("%d scenarios %v, want %d", len(res.Scenarios), res.Scenarios, tc.scenarios)
			}
		})
	}
}

func TestParseJaegerURL(t *testing.T) {
	tests := []struct {
		src     string
		wantURL string // prefix of the query URL
		wantErr string
	}{
		{"jaeger://localhost:16686", "http://localhost:16686/api/v3/traces?query.num_traces=20&query.service_name=tpscope&query.start_time_max=", ""},
		{"jaeger://h:1?service=vllm&limit=5&api=v1", "http://h:1/api/traces?limit=5&service=vllm", ""},
		{"jaeger://h:1?api=v1&trace=abc", "http://h:1/api/traces/abc", ""},
		{"jaeger://h:1?trace=abc", "http://h:1/api/v3/traces/abc", ""},
		{"jaeger://h:1?limit=0", "", "limit"},
		{"jaeger://h:1?api=v2", "", "want v1 or v3"},
		{"jaeger://h:1?lookback=yesterday", "", "lookback"},
		{"jaeger://h:1?svc=x", "", `unknown parameter "svc"`},
		{"jaeger://?service=x", "", "want jaeger://host:port"},
		{"jaeger://h:1?trace=xyz", "", "hex trace ID"},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			q, err := ParseJaegerURL(tc.src)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u := q.URL(time.Unix(0, 0)); !strings.HasPrefix(u, tc.wantURL) {
				t.Errorf("URL %s, want prefix %s", u, tc.wantURL)
			}
		})
	}
}

func TestSniff(t *testing.T) {
	tests := []struct{ head, want string }{
		{`{"resourceSpans":[]}`, FormatOTLPJSON},
		{"\n {\"result\":{}}", FormatJaegerV3},
		{`{"data":[]}`, FormatJaegerV1},
		{`{"schemaVersion":1,"traceEvents":[]}`, FormatKineto},
		{`[{"ph":"X"}]`, FormatKineto},
		{`{"foo":1,"traceEvents":[]}`, FormatKineto},
	}
	for _, tc := range tests {
		t.Run(tc.want+"/"+tc.head[:min(len(tc.head), 20)], func(t *testing.T) {
			got, err := sniff([]byte(tc.head))
			if err != nil || got != tc.want {
				t.Errorf("sniff = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestOpenDirectory reads a directory of files (per-rank Kineto traces,
// here the same rank twice with rank 5 patched in) into one list where the
// same step of both ranks shares a trace.
func TestOpenDirectory(t *testing.T) {
	kineto, err := os.ReadFile("testdata/kineto_two_steps.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "rank3.json"), kineto, 0o644)
	os.WriteFile(filepath.Join(dir, "rank5.json"), bytes.Replace(kineto, []byte(`"rank": 3`), []byte(`"rank": 5`), 1), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a trace"), 0o644)
	res, err := ReadAll(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	perTraceRank := map[string]map[int]int{}
	for _, s := range res.Spans {
		k := s.TraceID.String()
		if perTraceRank[k] == nil {
			perTraceRank[k] = map[int]int{}
		}
		perTraceRank[k][s.Rank]++
	}
	// 2 steps x 2 ranks x 11 kernels (fixture).
	if len(res.Spans) != 44 || len(perTraceRank) != 2 {
		t.Fatalf("%d spans in %d traces, want 44 in 2", len(res.Spans), len(perTraceRank))
	}
	for tr, ranks := range perTraceRank {
		if ranks[3] != 11 || ranks[5] != 11 {
			t.Errorf("trace %s: kernels per rank %v, want 11 for ranks 3 and 5", tr, ranks)
		}
	}
}

// nthIndex is the byte offset of the n-th (1-based) occurrence of sep in b.
func nthIndex(b []byte, sep string, n int) int {
	off := 0
	for i := 0; i < n; i++ {
		j := bytes.Index(b[off:], []byte(sep))
		if j < 0 {
			return -1
		}
		off += j + 1
	}
	return off - 1
}

// TestReadOneByteAtATime reads each fixture through a reader that returns
// one byte per call, so every token straddles a buffer refill, and checks
// the result equals a normal read.
func TestReadOneByteAtATime(t *testing.T) {
	otlpPath := filepath.Join(t.TempDir(), "spans.jsonl")
	if _, err := writeOTLPBench(otlpPath, 1500); err != nil {
		t.Fatal(err)
	}
	kinetoPath := filepath.Join(t.TempDir(), "kineto.json")
	if err := writeKinetoBench(kinetoPath, 2500); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"testdata/kineto_two_steps.json", "testdata/jaeger_ui_download.json", otlpPath, kinetoPath} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			read := func(r io.Reader) *Result {
				res := &Result{Source: "x"}
				if _, err := readBody(context.Background(), r, "x", "", res); err != nil {
					t.Fatal(err)
				}
				res.finish()
				return res
			}
			whole := read(bytes.NewReader(b))
			slow := read(iotest.OneByteReader(bytes.NewReader(b)))
			if len(whole.Spans) == 0 || whole.SkippedTotal != slow.SkippedTotal || !reflect.DeepEqual(whole.Spans, slow.Spans) {
				t.Errorf("one byte at a time: %d spans, %d skipped; whole: %d spans, %d skipped %v", len(slow.Spans), slow.SkippedTotal, len(whole.Spans), whole.SkippedTotal, slow.Skipped[:min(3, len(slow.Skipped))])
			}
		})
	}
}
