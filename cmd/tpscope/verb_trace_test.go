package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/traces"
)

func TestTraceRead(t *testing.T) {
	const kineto = "../../traces/testdata/kineto_two_steps.json"
	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string // in stdout (code 0) or stderr
	}{
		// The fixture has 22 kernels in steps 1 and 2 of rank 3, 4 of them
		// collectives (two NCCL all-reduces, two vLLM custom all-reduces).
		{"kineto table", []string{"trace", "read", kineto, "--spans", "5"}, 0, []string{"kineto", "ranks             3", "kind collective   4 spans", "(5 of 22 spans", "ncclDevKernel_AllReduce"}},
		{"markdown", []string{"trace", "read", kineto, "--output", "markdown", "--spans", "0"}, 0, []string{"| format | kineto |"}},
		{"csv", []string{"trace", "read", kineto, "--output", "csv", "--spans", "2"}, 0, []string{"trace,span,parent,name,op_id,rank"}},
		// A Kineto kernel's op ID is the op it was placed on: the third
		// kernel of the vLLM fixture, the embedding's index_select, is
		// embed.lookup (its name is the kernel's).
		{"csv op ids", []string{"trace", "read", "../../traces/testdata/kineto/vllm_tiny_tp4_rank0_eager.pt.trace.json.gz", "--output", "csv", "--spans", "3"}, 0,
			[]string{",_compute_slot_mapping_kernel,-,0,0,", ",embed.lookup,0,0,elementwise,2,"}},
		{"table op ids", []string{"trace", "read", "../../traces/testdata/kineto/vllm_tiny_tp4_rank0_eager.pt.trace.json.gz", "--spans", "3"}, 0, []string{"op_id", " embed.lookup "}},
		{"missing file", []string{"trace", "read", "no/such/file.json"}, 2, []string{"no/such/file.json: no such file"}},
		{"bad output", []string{"trace", "read", kineto, "--output", "xml"}, 2, []string{"--output"}},
		{"bad format", []string{"trace", "read", kineto, "--format", "zipkin"}, 2, []string{`trace format "zipkin"`}},
		{"no source", []string{"trace", "read"}, 2, []string{"no source: pass --trace SRC"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(tc.args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errb.String())
			}
			text := out.String()
			if code != 0 {
				text = errb.String()
			}
			for _, c := range tc.contains {
				if !strings.Contains(text, c) {
					t.Errorf("output lacks %q:\n%s", c, text)
				}
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := dispatch([]string{"trace", "read", kineto, "--output", "json", "--spans", "-1"}, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var doc struct {
			Summary struct {
				Spans int `json:"spans"`
			} `json:"summary"`
			Spans []struct {
				OpKind     string         `json:"op_kind"`
				Attributes map[string]any `json:"attributes"`
			} `json:"spans"`
		}
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Summary.Spans != 22 || len(doc.Spans) != 22 || doc.Spans[0].OpKind != "norm" || doc.Spans[0].Attributes["tpscope.kineto.graph"] != false {
			t.Errorf("json: %d/%d spans, first %+v", doc.Summary.Spans, len(doc.Spans), doc.Spans[0])
		}
	})
}

// TestSpanTableMarkdownEscapes: a "||" in a span name is escaped in the
// markdown table (it would end the cell) and left alone in the text table.
func TestSpanTableMarkdownEscapes(t *testing.T) {
	spans := []traces.Span{{Name: "a||b", Rank: -1, Step: -1, Seq: -1}}
	var md, text bytes.Buffer
	if err := writeSpanTable(&md, spans, true); err != nil {
		t.Fatal(err)
	}
	if err := writeSpanTable(&text, spans, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), ` | a\|\|b | `) {
		t.Errorf("markdown lacks the escaped name:\n%s", md.String())
	}
	if !strings.Contains(text.String(), "  a||b  ") {
		t.Errorf("text lacks the name as is:\n%s", text.String())
	}
}

// TestTraceReadSeveralSources: trace read of two sources is one document
// in each machine format: one JSON value (the sources' objects under
// "sources"), one CSV table with one header, whose rows say the source
// they came from and hold the kernel's name whole. It had printed two JSON
// values one after the other (no JSON reader takes them), two CSV headers,
// rows that could not be told apart (two profiler files may hold the same
// trace and span IDs) and names cut to 57 characters and "...".
func TestTraceReadSeveralSources(t *testing.T) {
	const a, b = "../../traces/testdata/kineto_two_steps.json", "../../traces/testdata/kineto/vllm_tiny_tp4_rank0_eager.pt.trace.json.gz"
	code, stdout, stderr := runCLI(t, "trace", "read", a, b, "--output", "json", "--spans", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc struct {
		Sources []struct {
			Summary struct {
				Source string `json:"source"`
			} `json:"summary"`
			Spans []json.RawMessage `json:"spans"`
		} `json:"sources"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not one JSON value: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value:\n%s", stdout)
	}
	if len(doc.Sources) != 2 || doc.Sources[0].Summary.Source != a || doc.Sources[1].Summary.Source != b ||
		len(doc.Sources[0].Spans) != 2 || len(doc.Sources[1].Spans) != 2 {
		t.Fatalf("sources %+v: want %s then %s, 2 spans each", doc.Sources, a, b)
	}

	code, stdout, stderr = runCLI(t, "trace", "read", a, b, "--output", "csv", "--spans", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs, err := csv.NewReader(strings.NewReader(stdout)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+3+3 || recs[0][0] != "source" || recs[0][1] != "trace" {
		t.Fatalf("%d records, header %v: want one header (source first) and 3 spans of each source", len(recs), recs[0])
	}
	for i, r := range recs[1:] {
		if want := map[bool]string{true: a, false: b}[i < 3]; r[0] != want {
			t.Errorf("row %d: source %q, want %q", i+1, r[0], want)
		}
	}
	// The third span of the vLLM fixture is the embedding's index_select,
	// whose kernel name runs past 60 characters.
	if name := recs[6][4]; !strings.HasPrefix(name, "void at::native::") || len(name) <= 60 || strings.HasSuffix(name, "...") {
		t.Errorf("kernel name %q: want it whole", name)
	}
}

// TestTraceReadMachineFormatsListEverySpan: JSON and CSV are the span list
// a program reads (the help's "--output json > spans.json"), so without
// --spans they hold every span of the source (the vLLM fixture's 354, as
// traces.ReadAll reads them), where they held the table's first 50 and
// said nothing; --spans cutting them is said on stderr; the table keeps
// its 50 and its note.
func TestTraceReadMachineFormatsListEverySpan(t *testing.T) {
	const src = "../../traces/testdata/kineto/vllm_tiny_tp4_rank0_eager.pt.trace.json.gz"
	res, err := traces.ReadAll(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	total := len(res.Spans)
	if total <= 50 {
		t.Fatalf("the fixture has %d spans; the test wants more than the table's 50", total)
	}
	code, out, stderr := runCLI(t, "trace", "read", src, "--output", "json")
	if code != 0 {
		t.Fatalf("json: exit %d: %s", code, stderr)
	}
	var doc struct {
		Spans []json.RawMessage `json:"spans"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Spans) != total || stderr != "" {
		t.Errorf("json: %d spans listed, want all %d; stderr %q", len(doc.Spans), total, stderr)
	}
	code, out, stderr = runCLI(t, "trace", "read", src, "--output", "csv")
	if code != 0 {
		t.Fatalf("csv: exit %d: %s", code, stderr)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != total+1 || stderr != "" {
		t.Errorf("csv: %d rows, want a header and all %d spans; stderr %q", len(rows), total, stderr)
	}
	code, out, stderr = runCLI(t, "trace", "read", src, "--output", "csv", "--spans", "3")
	if code != 0 {
		t.Fatalf("csv --spans 3: exit %d: %s", code, stderr)
	}
	if n := strings.Count(out, "\n"); n != 4 || stderr != fmt.Sprintf("%s: 3 of %d spans listed (--spans -1 lists all)\n", src, total) {
		t.Errorf("csv --spans 3: %d lines, stderr %q; want 4 lines and the cut said", n, stderr)
	}
	code, out, _ = runCLI(t, "trace", "read", src)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("(50 of %d spans; --spans -1 lists all)", total)) {
		t.Errorf("table: exit %d, want its 50 spans and the note:\n%s", code, out)
	}
}
