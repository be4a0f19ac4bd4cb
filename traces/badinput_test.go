package traces

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoSpans: a file or URL source in which no span can be read is an
// error naming the source and the reason (what was left out first, or
// where the format keeps spans, and what the content looks like when the
// format was forced), not an empty result.
func TestNoSpans(t *testing.T) {
	good := otlpLine(tidA, "m", otlpSpanJSON(tidA, "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj"))
	cases := []struct {
		name   string
		in     string
		format string
		want   string
	}{
		{"otlp without spans", `{"resourceSpans":[]}`, "", "no span read (otlp-json): want spans in resourceSpans[].scopeSpans[].spans[]"},
		{"resourceSpans not an array", `{"resourceSpans": 3}`, "", `no span read (otlp-json): 1 left out, the first at `},
		{"every span bad", `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x"}]}]}]}`, "",
			`no span read (otlp-json): 1 left out, the first at `},
		{"jaeger without traces", `{"data":[]}`, "", "no span read (jaeger-v1): want spans in data[].spans[]"},
		{"kineto without kernels", `{"traceEvents":[{"name":"k","ts":1,"dur":2}]}`, "", `no span read (kineto): want complete events ("ph": "X") of GPU kernels`},
		{"otlp read as jaeger", good, FormatJaegerV1, "it was read as jaeger-v1 as asked, but its content looks like otlp-json"},
		{"jaeger read as otlp", `{"data":[{"spans":[]}]}`, FormatOTLPJSON, "it was read as otlp-json as asked, but its content looks like jaeger-v1"},
		// OTLP's JSON lines read as one Chrome trace object: the reader
		// breaks at the second line, which says less than what the
		// content is (it had said "invalid JSON ... after the trace").
		{"otlp lines read as kineto", good + "\n" + good + "\n", FormatKineto, "no span read (kineto): want complete events (\"ph\": \"X\") of GPU kernels (\"cat\": \"kernel\") in traceEvents[]; it was read as kineto as asked, but its content looks like otlp-json"},
		{"otlp read as kineto", good, FormatKineto, "it was read as kineto as asked, but its content looks like otlp-json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.json")
			if err := os.WriteFile(path, []byte(c.in), 0o644); err != nil {
				t.Fatal(err)
			}
			var opts []ReadOption
			if c.format != "" {
				opts = append(opts, WithFormat(c.format))
			}
			res, err := ReadAll(context.Background(), path, opts...)
			if err == nil {
				t.Fatalf("%d spans, no error", len(res.Spans))
			}
			msg := err.Error()
			if !errors.Is(err, ErrNoSpans) || !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line wrapping ErrNoSpans, starting with %s and saying %q", msg, path, c.want)
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		for _, n := range []string{"a.json", "b.json"} {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(`{"resourceSpans":[]}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := ReadAll(context.Background(), dir)
		if !errors.Is(err, ErrNoSpans) || !strings.HasPrefix(err.Error(), dir+" (2 files): no span read") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("url", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Write([]byte(`{"resourceSpans":[]}`))
		}))
		defer srv.Close()
		_, err := ReadAll(context.Background(), srv.URL+"/trace.json")
		if !errors.Is(err, ErrNoSpans) || !strings.HasPrefix(err.Error(), srv.URL+"/trace.json: no span read (otlp-json)") {
			t.Errorf("error %v", err)
		}
	})
}

// TestJaegerLimit: a search that returns as many traces as its limit says
// that Jaeger may hold more (a Skip entry on the Result); one below the
// limit, or a fetch by trace ID, does not. The fake Jaeger serves the UI
// download fixture: one trace of 3 spans.
func TestJaegerLimit(t *testing.T) {
	body, err := os.ReadFile("testdata/jaeger_ui_download.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	cases := []struct {
		name  string
		query string
		want  bool
	}{
		{"at the limit", "?api=v1&limit=1", true},
		{"below the limit", "?api=v1&limit=2", false},
		{"one trace by ID", "?api=v1&limit=1&trace=0102030405060708090a0b0c0d0e0f10", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := ReadAll(context.Background(), "jaeger://"+host+c.query)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Spans) != 3 {
				t.Fatalf("%d spans, want 3", len(res.Spans))
			}
			got := false
			for _, s := range res.Skipped {
				if strings.Contains(s.Reason, "the query returned 1 traces, its limit: Jaeger may hold more") {
					got = true
				}
			}
			if got != c.want {
				t.Errorf("limit warning %v, want %v (skipped %v)", got, c.want, res.Skipped)
			}
		})
	}
}

// FuzzReadAll: any file content read through Open gives spans or a
// one-line error naming the file, never an empty result. A break is a
// *PartialError within the file's bytes; read with WithAllowPartial,
// every trace kept of it is a complete step (its root read, no span
// without its parent), and an intact file reads as without the option.
func FuzzReadAll(f *testing.F) {
	good := otlpLine(tidA, "m", otlpSpanJSON(tidA, "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj"))
	two := good + otlpLine(tidB, "m", otlpSpanJSON(tidB, "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj"))
	f.Add([]byte(two[:len(two)*3/4]))
	f.Add(gzipAll([]byte(two))[:40])
	if b, err := os.ReadFile("testdata/jaeger_ui_download.json"); err == nil {
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(`{"resourceSpans":[]}`))
	f.Add([]byte(`{"resourceSpans":3}`))
	f.Add([]byte(`{"data":[]}`))
	f.Add([]byte(`{"traceEvents":[{"name":"k","ts":1,"dur":2}]}`))
	f.Add([]byte(`[{"name":"x"}]`))
	f.Add([]byte(`{"resourceSpans":[`))
	f.Add([]byte(""))
	f.Add([]byte(otlpLine(tidA, "m", otlpSpanJSON(tidA, "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj"))))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "in.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := ReadAll(context.Background(), path)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, path) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming the file", msg)
			}
			var pe *PartialError
			if errors.As(err, &pe) && (pe.Source != path || pe.Offset < 0 || pe.Offset > int64(len(data)) || pe.Line < 0) {
				t.Fatalf("PartialError %+v: want the file, an offset in 0..%d and a line >= 0", pe, len(data))
			}
		} else if len(res.Spans) == 0 {
			t.Fatal("no spans and no error")
		}
		part, perr := ReadAll(context.Background(), path, WithAllowPartial(true))
		switch {
		case err == nil && (perr != nil || part.Partial != nil || len(part.Spans) != len(res.Spans)):
			t.Fatalf("intact input read with WithAllowPartial: error %v, %d spans, want the %d spans of the plain read", perr, len(part.Spans), len(res.Spans))
		case perr != nil:
			if msg := perr.Error(); !strings.HasPrefix(msg, path) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming the file", msg)
			}
			return
		case len(part.Spans) == 0:
			t.Fatal("no spans and no error with WithAllowPartial")
		}
		if p := part.Partial; p != nil {
			if p.StepsKept < 0 || p.StepsKept > p.Steps || p.SpansDropped < 0 {
				t.Fatalf("Partial %+v", p)
			}
			for _, tr := range SplitTraces(part.Spans) {
				if tr[0].kernel {
					continue
				}
				ids, root := map[[8]byte]bool{}, false
				for i := range tr {
					ids[tr[i].SpanID] = true
					root = root || tr[i].Name == "step" && tr[i].IsRoot()
				}
				for i := range tr {
					if !root || !tr[i].IsRoot() && !ids[tr[i].ParentID] {
						t.Fatalf("kept trace %s of damaged input is not a complete step (root %v)", tr[0].TraceID, root)
					}
				}
			}
		}
	})
}
