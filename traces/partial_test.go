package traces

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// h200Eager is a recorded OTLP JSON Lines trace of 5 steps: per step one
// line of its 78 op spans, then one line of its rank and root spans.
const h200Eager = "../exec/cuda/testdata/h200/h200-tiny-mla-moe-tp1-eager.otlp.jsonl.gz"

func gunzipFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// gzipUpTo compresses text, flushes the stream after text[:at] and returns
// the compressed bytes up to that flush: a gzip file cut where its text
// ends at byte at. It checks that the standard library's reader gives back
// exactly text[:at] and then reports the missing end.
func gzipUpTo(t *testing.T, text []byte, at int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(text[:at])
	zw.Flush()
	n := b.Len()
	zw.Write(text[at:])
	zw.Close()
	cut := b.Bytes()[:n]
	got, err := io.ReadAll(mustGzipReader(t, cut))
	if !bytes.Equal(got, text[:at]) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("fixture: the cut gzip stream gives %d bytes (%v), want %d and the missing end", len(got), err, at)
	}
	return cut
}

func gzipAll(text []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(text)
	zw.Close()
	return b.Bytes()
}

func mustGzipReader(t *testing.T, b []byte) *gzip.Reader {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return zr
}

// textOf is the text the standard library's gzip reader gives of data
// before it fails (data itself when it is not gzip).
func textOf(t *testing.T, data []byte) []byte {
	if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
		return data
	}
	text, _ := io.ReadAll(mustGzipReader(t, data))
	return text
}

// liteSpan is what the tests read of an OTLP span, with encoding/json.
type liteSpan struct {
	TraceID string `json:"traceId"`
	SpanID  string `json:"spanId"`
	Parent  string `json:"parentSpanId"`
	Name    string `json:"name"`
}

// walkJSON walks one JSON value of dec and decodes every complete element
// of the arrays under key arrayKey into out, stopping at the first error
// (the end of a cut text).
func walkJSON[T any](dec *json.Decoder, key, arrayKey string, out *[]T) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			if err := walkJSON(dec, k.(string), arrayKey, out); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		for dec.More() {
			if key == arrayKey {
				var v T
				if err := dec.Decode(&v); err != nil {
					return err
				}
				*out = append(*out, v)
			} else if err := walkJSON(dec, key, arrayKey, out); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// otlpWant is what reading a cut OTLP JSON Lines text with
// WithAllowPartial must keep, derived from the text with encoding/json
// and the rule of Result.keepComplete: a step (trace) is kept when its
// root span "step" is in a complete line, every span's parent was read,
// and none of its spans is in the line the cut broke.
type otlpWant struct {
	steps, kept, spansKept, spansDropped int
}

func otlpExpect(t *testing.T, text []byte) otlpWant {
	t.Helper()
	var spans []liteSpan
	inCutLine := map[string]bool{}
	for len(text) > 0 {
		line, rest, complete := bytes.Cut(text, []byte("\n"))
		text = rest
		var got []liteSpan
		walkJSON(json.NewDecoder(bytes.NewReader(line)), "", "spans", &got)
		if !complete {
			for _, s := range got {
				inCutLine[s.TraceID] = true
			}
		}
		spans = append(spans, got...)
	}
	type tr struct {
		root  bool
		ids   map[string]bool
		spans []liteSpan
	}
	trs := map[string]*tr{}
	for _, s := range spans {
		x := trs[s.TraceID]
		if x == nil {
			x = &tr{ids: map[string]bool{}}
			trs[s.TraceID] = x
		}
		x.ids[s.SpanID] = true
		x.spans = append(x.spans, s)
		x.root = x.root || (s.Name == "step" && s.Parent == "")
	}
	var w otlpWant
	for id, x := range trs {
		w.steps++
		ok := x.root && !inCutLine[id]
		for _, s := range x.spans {
			if s.Parent != "" && !x.ids[s.Parent] {
				ok = false
			}
		}
		if ok {
			w.kept++
			w.spansKept += len(x.spans)
		} else {
			w.spansDropped += len(x.spans)
		}
	}
	return w
}

// TestPartialOTLP: an OTLP JSON Lines trace cut at any point (inside the
// gzip stream, where its text ends at a line boundary, mid-line, before
// the gzip trailer, or a plain file cut mid-line) is a *PartialError that
// names the file, the byte where it ends (the compressed byte for gzip),
// the line of the text and what is missing; read with WithAllowPartial the
// complete steps are kept and the counts of Result.Partial match what
// encoding/json finds in the text that survived.
func TestPartialOTLP(t *testing.T) {
	text := gunzipFile(t, h200Eager)
	lineEnd := func(n int) int { return nthIndex(text, "\n", n) + 1 } // offset after line n (1-based)
	gzFile, err := os.ReadFile(h200Eager)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		data  []byte
		plain bool   // the file is not gzip
		what  string // in the message, after the file name
		// want kept/steps, derived by hand from the layout (line 2k-1:
		// step k's op spans, line 2k: its rank and root spans).
		kept, steps int
	}{
		// Half the compressed bytes end inside line 5: step 3's op spans.
		{name: "gzip cut at half its bytes", data: gzFile[:len(gzFile)/2], what: fmt.Sprintf("gzip stream ends at byte %d before its end: the file was cut (its text ends at byte ", len(gzFile)/2),
			kept: 2, steps: 3},
		// Text ends after line 5: step 3's op spans without their root.
		{name: "gzip text ends at a line boundary", data: gzipUpTo(t, text, lineEnd(5)), what: "before its end: the file was cut (its text ends at byte " + fmt.Sprint(lineEnd(5)) + ", line 6, between documents)",
			kept: 2, steps: 3},
		// Text ends after line 6: three whole steps, still cut.
		{name: "gzip text ends after a root line", data: gzipUpTo(t, text, lineEnd(6)), what: "between documents)", kept: 3, steps: 3},
		// Text ends in the middle of line 6 (step 3's rank and root spans).
		{name: "gzip text ends mid-line", data: gzipUpTo(t, text, lineEnd(5)+(lineEnd(6)-lineEnd(5))/2), what: ", line 6, inside resourceSpans[0]", kept: 2, steps: 3},
		// All the text, but the 8-byte trailer (CRC-32, size) is missing.
		{name: "gzip without its trailer", data: gzFile[:len(gzFile)-8], what: fmt.Sprintf("gzip stream ends at byte %d before its end", len(gzFile)-8), kept: 5, steps: 5},
		{name: "plain text cut mid-line", data: text[:len(text)/2], plain: true,
			what: fmt.Sprintf(" at byte %d (line %d): the file was cut", len(text)/2, bytes.Count(text[:len(text)/2], []byte("\n"))+1), kept: 2, steps: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cut.otlp.jsonl.gz")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			survived := textOf(t, c.data)
			res, err := ReadAll(context.Background(), path)
			var pe *PartialError
			if !errors.As(err, &pe) {
				t.Fatalf("result %v, error %v: want a *PartialError", res != nil, err)
			}
			wantLine := int64(bytes.Count(survived, []byte("\n")) + 1)
			if pe.Source != path || pe.Offset != int64(len(c.data)) || pe.Line != wantLine || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("PartialError{%q, offset %d, line %d, cause %v}, want {%q, %d, %d, unexpected EOF}", pe.Source, pe.Offset, pe.Line, pe.Err, path, len(c.data), wantLine)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, c.what) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line starting with %s and saying %q", msg, path, c.what)
			}
			if !c.plain && !strings.Contains(msg, fmt.Sprintf("its text ends at byte %d, line %d", len(survived), wantLine)) {
				t.Errorf("error %q: want where its text ends (byte %d, line %d)", msg, len(survived), wantLine)
			}

			res, err = ReadAll(context.Background(), path, WithAllowPartial(true))
			if err != nil {
				t.Fatal(err)
			}
			want := otlpExpect(t, survived)
			if want.kept != c.kept || want.steps != c.steps {
				t.Fatalf("fixture: the text keeps %d of %d steps, the layout says %d of %d", want.kept, want.steps, c.kept, c.steps)
			}
			p := res.Partial
			if p == nil || p.Steps != want.steps || p.StepsKept != want.kept || p.SpansDropped != want.spansDropped || len(p.Breaks) != 1 {
				t.Fatalf("Partial %+v, want %d steps, %d kept, %d spans dropped, one break", p, want.steps, want.kept, want.spansDropped)
			}
			roots := 0
			for i := range res.Spans {
				if res.Spans[i].Name == "step" && res.Spans[i].IsRoot() {
					roots++
				}
			}
			if len(res.Spans) != want.spansKept || roots != want.kept || countTraces(res.Spans) != want.kept {
				t.Errorf("%d spans in %d traces with %d roots, want %d spans in %d steps", len(res.Spans), countTraces(res.Spans), roots, want.spansKept, want.kept)
			}
			if len(res.Skipped) == 0 || !strings.Contains(res.Skipped[0].Reason, fmt.Sprintf("kept %d complete", want.kept)) {
				t.Errorf("first skip entry %v, want the partial read reported", res.Skipped)
			}
		})
	}
}

// TestPartialOTLPBetweenBatches: an OTLP JSON Lines trace that ends
// after a complete line, between a step's batch of op spans and the batch
// with its rank and root spans (a plain file cut there, a writer stopped
// there, a gzip stream closed there), is a *PartialError naming the file
// and its end, not a trace read whole: every document in it parses, and
// the last step's op spans were read as a step of their own (trace read
// counted it, compare pooled it with the complete steps). With
// WithAllowPartial the complete steps are kept and the cut one dropped,
// as encoding/json finds them in the text.
func TestPartialOTLPBetweenBatches(t *testing.T) {
	text := gunzipFile(t, h200Eager)
	cut := text[:nthIndex(text, "\n", 5)+1] // lines 1-5: steps 1 and 2 whole, step 3's op spans
	for _, c := range []struct {
		name, file string
		data       []byte
	}{
		{"plain", "cut.otlp.jsonl", cut},
		{"gzip closed", "cut.otlp.jsonl.gz", gzipAll(cut)},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.file)
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := ReadAll(context.Background(), path)
			var pe *PartialError
			if !errors.As(err, &pe) {
				t.Fatalf("result %v, error %v: want a *PartialError", res != nil, err)
			}
			msg := err.Error()
			if pe.Source != path || pe.Offset != int64(len(c.data)) || !strings.HasPrefix(msg, path+": ") || strings.Contains(msg, "\n") ||
				!strings.Contains(msg, fmt.Sprintf("ends between a step's batches, at byte %d", len(c.data))) {
				t.Errorf("error %q (offset %d): want one line naming %s and its end at byte %d between a step's batches", msg, pe.Offset, path, len(c.data))
			}
			res, err = ReadAll(context.Background(), path, WithAllowPartial(true))
			if err != nil {
				t.Fatal(err)
			}
			want := otlpExpect(t, cut)
			if want.kept != 2 || want.steps != 3 {
				t.Fatalf("fixture: the text keeps %d of %d steps, the layout says 2 of 3", want.kept, want.steps)
			}
			p := res.Partial
			if p == nil || p.Steps != 1 || p.StepsKept != 0 || p.SpansDropped != want.spansDropped {
				t.Fatalf("Partial %+v, want the cut step dropped with its %d spans", p, want.spansDropped)
			}
			if len(res.Spans) != want.spansKept || countTraces(res.Spans) != want.kept {
				t.Errorf("%d spans in %d traces, want %d spans in %d steps", len(res.Spans), countTraces(res.Spans), want.spansKept, want.kept)
			}
		})
	}
}

// TestPartialJaeger: a Jaeger JSON download cut inside a trace object is
// a *PartialError naming the span being read; WithAllowPartial keeps the
// traces whose objects were whole, and a file with no whole step is still
// an error. The two-trace file is the UI download fixture and a copy of
// its trace under another trace ID.
func TestPartialJaeger(t *testing.T) {
	one, err := os.ReadFile("testdata/jaeger_ui_download.json")
	if err != nil {
		t.Fatal(err)
	}
	const head, tail = `{"data":[`, `],"total":0,"limit":0,"offset":0,"errors":null}`
	inner, ok := bytes.CutPrefix(bytes.TrimSpace(one), []byte(head))
	if inner, ok = bytes.CutSuffix(inner, []byte(tail)); !ok {
		t.Fatal("fixture: not " + head + "trace" + tail)
	}
	second := bytes.ReplaceAll(inner, []byte("4bf92f3577b34da6a3ce929d0e0e4736"), []byte("5bf92f3577b34da6a3ce929d0e0e4736"))
	two := []byte(head + string(inner) + ",\n" + string(second) + "]}\n")
	// The second trace's object starts after head, the first and ",\n";
	// 2/3 of its bytes end inside its third span, as in the first case.
	secondAt := len(head) + len(inner) + 2
	cases := []struct {
		name string
		in   []byte
		what string
		// kept/steps with WithAllowPartial; -1: still an error
		kept, steps int
	}{
		// 2/3 of the bytes end on line 4, inside the third span.
		{name: "cut in the only trace", in: one[:len(one)*2/3], what: "JSON ends inside data[0].spans[2] at byte 1307 (line 4): the file was cut", kept: -1},
		{name: "cut in the second trace", in: two[:secondAt+len(inner)*2/3], what: "JSON ends inside data[1].spans[2]", kept: 1, steps: 2},
		{name: "cut after the data array", in: two[:len(two)-2], what: "JSON ends in the top-level object at byte", kept: 2, steps: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jaeger.json")
			if err := os.WriteFile(path, c.in, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadAll(context.Background(), path)
			var pe *PartialError
			if !errors.As(err, &pe) || pe.Offset != int64(len(c.in)) || !strings.HasPrefix(err.Error(), path+": "+c.what) {
				t.Fatalf("error %v, want a *PartialError at byte %d: %s: %s", err, len(c.in), path, c.what)
			}
			res, err := ReadAll(context.Background(), path, WithAllowPartial(true))
			if c.kept < 0 {
				if !errors.As(err, &pe) || !strings.Contains(err.Error(), "no step read before it is complete") {
					t.Fatalf("error %v, want the break and that no step is complete", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p := res.Partial; p == nil || p.StepsKept != c.kept || p.Steps != c.steps || countTraces(res.Spans) != c.kept || len(res.Spans) != 3*c.kept {
				t.Errorf("Partial %+v, %d spans: want %d of %d steps of 3 spans", res.Partial, len(res.Spans), c.kept, c.steps)
			}
		})
	}
}

// TestPartialJaegerHTTP: a Jaeger query whose response is cut off (fewer
// bytes than its Content-Length) is a *PartialError naming the query URL;
// WithAllowPartial keeps the trace whose object was whole. The body is
// the two-trace download of TestPartialJaeger cut inside the second trace.
func TestPartialJaegerHTTP(t *testing.T) {
	one, err := os.ReadFile("testdata/jaeger_ui_download.json")
	if err != nil {
		t.Fatal(err)
	}
	const head, tail = `{"data":[`, `],"total":0,"limit":0,"offset":0,"errors":null}`
	inner := bytes.TrimSuffix(bytes.TrimPrefix(bytes.TrimSpace(one), []byte(head)), []byte(tail))
	second := bytes.ReplaceAll(inner, []byte("4bf92f3577b34da6a3ce929d0e0e4736"), []byte("5bf92f3577b34da6a3ce929d0e0e4736"))
	body := []byte(head + string(inner) + ",\n" + string(second) + tail)
	sent := len(head) + len(inner) + 2 + len(inner)*2/3
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.Write(body[:sent]) // the handler returns early: the connection closes short
	}))
	defer srv.Close()
	src := "jaeger://" + strings.TrimPrefix(srv.URL, "http://") + "?api=v1&trace=0102030405060708090a0b0c0d0e0f10"
	_, err = ReadAll(context.Background(), src)
	var pe *PartialError
	want := fmt.Sprintf("the data ends at byte %d before its end, inside data[1].spans[2]", sent)
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Source, srv.URL+"/api/traces/") || pe.Offset != int64(sent) ||
		!strings.HasPrefix(pe.What, want) || !strings.HasSuffix(pe.What, ": the transfer or read was cut") {
		t.Fatalf("error %v: want a *PartialError on the query URL saying %q ...: the transfer or read was cut", err, want)
	}
	res, err := ReadAll(context.Background(), src, WithAllowPartial(true))
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Partial; p == nil || p.StepsKept != 1 || p.Steps != 2 || len(res.Spans) != 3 {
		t.Errorf("Partial %+v, %d spans: want 1 of 2 steps kept, its 3 spans", res.Partial, len(res.Spans))
	}
}

// kinetoEvent is what the tests read of a trace event, with encoding/json.
type liteEvent struct {
	Ph, Cat, Name string
	Ts, Dur       float64
}

// TestPartialKineto: a PyTorch-profiler trace cut inside its gzip stream
// (or a plain one cut inside an event) is a *PartialError; read with
// WithAllowPartial it holds exactly the steps of the whole file that ended
// before the last kernel the cut file still has started (the profiler
// writes events in time order), with the same spans, and none of the
// steps after.
func TestPartialKineto(t *testing.T) {
	two, err := os.ReadFile("testdata/kineto_two_steps.json")
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name, file string
		data       []byte // the cut file
		what       string
	}
	var cases []tc
	for _, f := range []string{"vllm_tiny_tp4_rank0_eager.pt.trace.json.gz", "sglang_tiny_tp2_rank0_graph.trace.json.gz", "vllm_tiny_tp4_rank0_piecewise_noranges.pt.trace.json.gz"} {
		full := filepath.Join("testdata", "kineto", f)
		b, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		for _, frac := range []float64{0.5, 0.8} {
			n := int(float64(len(b)) * frac)
			cases = append(cases, tc{name: fmt.Sprintf("%s cut at %.0f %%", f, 100*frac), file: full, data: b[:n],
				what: fmt.Sprintf("gzip stream ends at byte %d before its end: the file was cut (its text ends at byte ", n)})
		}
	}
	// Inside the 17th kernel event, event 43: step 1's 11 kernels stay.
	cut := nthIndex(two, `"cat": "kernel"`, 17)
	cases = append(cases, tc{name: "plain two steps cut in step 2", file: "testdata/kineto_two_steps.json", data: two[:cut],
		what: fmt.Sprintf("JSON ends inside traceEvents[43] at byte %d (line %d): the file was cut", cut, bytes.Count(two[:cut], []byte("\n"))+1)})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cut.json.gz")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadAll(context.Background(), path)
			var pe *PartialError
			if !errors.As(err, &pe) || pe.Offset != int64(len(c.data)) || !strings.HasPrefix(err.Error(), path+": "+c.what) {
				t.Fatalf("error %v, want a *PartialError at byte %d: %s", err, len(c.data), c.what)
			}
			whole, err := ReadAll(context.Background(), c.file)
			if err != nil {
				t.Fatal(err)
			}
			// The kernels the cut text still has, by start (ns after
			// baseTimeNanoseconds: the microsecond text times 1000).
			var events []liteEvent
			walkJSON(json.NewDecoder(bytes.NewReader(textOf(t, c.data))), "", "traceEvents", &events)
			base := kinetoBase(textOf(t, c.data))
			have := map[string]bool{}
			last := int64(math.MinInt64)
			for _, e := range events {
				if e.Ph == "X" && e.Cat == "kernel" {
					ns := base + int64(math.Round(e.Ts*1000))
					have[fmt.Sprint(ns, e.Name)] = true
					last = max(last, ns)
				}
			}
			// Steps of the whole file: kept when every kernel is in the
			// cut text and the step ended before the last kernel started.
			type stepKey struct{ step, rank int }
			complete := map[stepKey]bool{}
			for i := range whole.Spans {
				s := &whole.Spans[i]
				k := stepKey{s.Step, s.Rank}
				if _, ok := complete[k]; !ok {
					complete[k] = true
				}
				if !have[fmt.Sprint(s.Start, s.Name)] || s.End() > last {
					complete[k] = false
				}
			}
			var want []string
			steps := map[stepKey]bool{}
			cutOne := false // the cut text holds kernels of a step not kept
			for i := range whole.Spans {
				s := &whole.Spans[i]
				if complete[stepKey{s.Step, s.Rank}] {
					want = append(want, spanLine(s))
					steps[stepKey{s.Step, s.Rank}] = true
				} else if have[fmt.Sprint(s.Start, s.Name)] {
					cutOne = true
				}
			}

			res, err := ReadAll(context.Background(), path, WithAllowPartial(true))
			if len(want) == 0 {
				if err == nil {
					t.Fatalf("%d spans kept, want none (no whole step before the cut)", len(res.Spans))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i := range res.Spans {
				got = append(got, spanLine(&res.Spans[i]))
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("kept %d spans, want the %d of the whole file's %d complete steps:\n got %.600s\nwant %.600s", len(got), len(want), len(steps), strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// The kernels of the step the cut broke were read: they are
			// counted, in a dropped step or after the last step read.
			if p := res.Partial; p == nil || p.StepsKept != len(steps) || p.Steps < p.StepsKept || cutOne && p.SpansDropped+p.SpansAfter == 0 ||
				len(got)+p.SpansDropped+p.SpansAfter > len(have) {
				t.Errorf("Partial %+v, want %d steps kept, the cut step's kernels counted (%v), at most the %d kernels read in all", res.Partial, len(steps), cutOne, len(have))
			}
		})
	}
}

// kinetoBase reads baseTimeNanoseconds of a Kineto text that may be cut
// (it comes before traceEvents); 0 when absent.
func kinetoBase(text []byte) int64 {
	dec := json.NewDecoder(bytes.NewReader(text))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil || k == "traceEvents" {
			return 0
		}
		if k == "baseTimeNanoseconds" {
			var v int64
			dec.Decode(&v)
			return v
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return 0
		}
	}
	return 0
}

// TestPartialKinetoWhole: a Kineto trace whose JSON is whole but whose
// gzip stream lost its trailer (CRC-32 and size, 8 bytes) cannot be
// checked: an error; read with WithAllowPartial, every step is complete
// and the spans are those of the intact file.
func TestPartialKinetoWhole(t *testing.T) {
	full := "testdata/kineto/vllm_tiny_tp4_rank0_eager.pt.trace.json.gz"
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cut.json.gz")
	if err := os.WriteFile(path, b[:len(b)-8], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadAll(context.Background(), path)
	var pe *PartialError
	if !errors.As(err, &pe) || pe.Offset != int64(len(b)-8) || !strings.Contains(err.Error(), "before its end: the file was cut") || !strings.HasSuffix(err.Error(), ", after the trace)") {
		t.Fatalf("error %v: want a *PartialError at byte %d, after the trace", err, len(b)-8)
	}
	whole, err := ReadAll(context.Background(), full)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ReadAll(context.Background(), path, WithAllowPartial(true))
	if err != nil {
		t.Fatal(err)
	}
	steps := countTraces(whole.Spans)
	if p := res.Partial; p == nil || p.Steps != steps || p.StepsKept != steps || p.SpansDropped != 0 || len(res.Spans) != len(whole.Spans) {
		t.Errorf("Partial %+v, %d spans: want all %d steps and %d spans kept", res.Partial, len(res.Spans), steps, len(whole.Spans))
	}
}

// spanLine is a Kineto kernel span as one comparable line.
func spanLine(s *Span) string {
	return fmt.Sprintf("step %d rank %d %s %d+%d op %s layer %d", s.Step, s.Rank, s.Name, s.Start, s.Duration, s.OpID, s.Layer)
}

// TestDamagedInput: input that is not cut but broken is a *PartialError
// naming the byte, the line and what is wrong there; WithAllowPartial
// keeps the complete steps before it. A bare-array Chrome trace may end
// without its closing ']' (the Trace Event Format allows it): not an error.
func TestDamagedInput(t *testing.T) {
	a := otlpLine(tidA, "m", otlpSpanJSON(tidA, "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj"))
	b := otlpLine(tidB, "m", otlpSpanJSON(tidB, "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj"))
	// A line with ',' dropped between two spans: the byte where '{' comes
	// instead of ',' or ']'.
	bad := strings.Replace(b, `},{"traceId"`, `}{"traceId"`, 1)
	badAt := len(a) + strings.Index(bad, `}{"traceId"`) + 1
	gz := gzipAll([]byte(a + b))
	flip := append([]byte(nil), gz...)
	flip[len(flip)-8] ^= 0xff // the CRC-32 of the trailer
	kinetoObj := `{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2}]}`
	bareArray := `[{"ph":"X","cat":"kernel","name":"fused_moe_kernel","ts":1,"dur":2},` + "\n" + `{"ph":"X","cat":"kernel","name":"fused_moe_kernel","ts":4,"dur":2}`
	cases := []struct {
		name  string
		in    []byte
		what  string // after "PATH: "; "" = no error
		kept  int    // steps kept with WithAllowPartial
		spans int    // spans read when there is no error
	}{
		{name: "garbage line", in: []byte(a + "xyz\n" + b), what: fmt.Sprintf("invalid JSON at byte %d (line 2), between documents: want a JSON object", len(a)), kept: 1},
		{name: "missing comma", in: []byte(a + bad), what: fmt.Sprintf("invalid JSON at byte %d (line 2), inside resourceSpans[0].scopeSpans[0].spans: want ',' or ']' in array, got '{'", badAt), kept: 1},
		{name: "gzip checksum", in: flip, what: fmt.Sprintf("gzip stream is damaged at byte %d (its checksum does not match its content)", len(flip)), kept: 2},
		{name: "bytes after a Kineto trace", in: []byte(kinetoObj + "\nnot json"), what: fmt.Sprintf("invalid JSON at byte %d (line 2), after the trace: want the end of the input after the trace, got 'n'", len(kinetoObj)+1)},
		{name: "bare array without its ]", in: []byte(bareArray), spans: 2},
		{name: "bare array ending with a comma", in: []byte(bareArray + ",\n"), spans: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.json")
			if err := os.WriteFile(path, c.in, 0o644); err != nil {
				t.Fatal(err)
			}
			// Without placement the kernels of the bare arrays need no note.
			res, err := ReadAll(context.Background(), path, WithKernelPlacement(false))
			if c.what == "" {
				if err != nil || len(res.Spans) != c.spans || res.SkippedTotal != 0 {
					t.Fatalf("error %v, skipped %v: want %d spans, nothing left out", err, res.Skipped, c.spans)
				}
				return
			}
			var pe *PartialError
			if !errors.As(err, &pe) || !strings.HasPrefix(err.Error(), path+": "+c.what) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want a one-line *PartialError %s: %s", err, path, c.what)
			}
			if c.kept == 0 {
				return
			}
			res, err = ReadAll(context.Background(), path, WithAllowPartial(true))
			if err != nil || res.Partial == nil || res.Partial.StepsKept != c.kept || countTraces(res.Spans) != c.kept {
				t.Fatalf("error %v, partial %+v: want %d steps kept", err, res.Partial, c.kept)
			}
		})
	}
}

// TestPartialDirectory: a directory with a cut file is an error naming
// that file; WithAllowPartial keeps every step of the whole file and the
// complete ones of the cut file.
func TestPartialDirectory(t *testing.T) {
	text := gunzipFile(t, h200Eager)
	dir := t.TempDir()
	// a.jsonl: steps 1-2 (lines 1-4), whole; b.jsonl: steps 3-5 cut in
	// the middle of its line 5 (step 5's op spans): steps 3 and 4 complete.
	a := text[:nthIndex(text, "\n", 4)+1]
	rest := text[len(a):]
	four := nthIndex(rest, "\n", 4) + 1
	b := rest[:four+(nthIndex(rest, "\n", 5)-four)/2]
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), a, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.jsonl"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadAll(context.Background(), dir)
	var pe *PartialError
	if !errors.As(err, &pe) || pe.Source != filepath.Join(dir, "b.jsonl") || pe.Offset != int64(len(b)) || pe.Line != 5 {
		t.Fatalf("error %v, want a *PartialError on b.jsonl at byte %d, line 5", err, len(b))
	}
	res, err := ReadAll(context.Background(), dir, WithAllowPartial(true))
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Partial; p == nil || p.Steps != 3 || p.StepsKept != 2 || countTraces(res.Spans) != 4 {
		t.Errorf("Partial %+v, %d traces: want 2 of b's 3 steps kept and 4 steps in all", res.Partial, countTraces(res.Spans))
	}
}
