package serving

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadTraceFormats reads each trace format. Mooncake (real, first
// 1000 lines): 1000 requests over 0..330 s, the second with hash IDs 0,
// 14, 15, ... and 512-token blocks. Azure conversation (real, 3000
// rows): 18:15:46.68059 to 18:26:15.383898 is 628.703398 s, first
// request 374/44 tokens. BurstGPT (a generated excerpt in its column
// layout): the failed row (0 response tokens) is left out and counted.
// tpscope JSON lines with sessions: names numbered from 1 by first
// appearance, delay_s kept.
func TestReadTraceFormats(t *testing.T) {
	cases := []struct {
		name, file, text string
		format           TraceFormat
		n, skipped       int
		spanS            float64
		first            Request
		hashTokens       int
	}{
		{name: "mooncake", file: "testdata/traces/mooncake-fast25/conversation_trace.first1000.jsonl", format: TraceMooncake, n: 1000, spanS: 330,
			first: Request{PromptTokens: 6758, OutputTokens: 500, HashIDs: []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}}, hashTokens: 512},
		{name: "azure conversation", file: "testdata/traces/azure-llm-inference-2023/AzureLLMInferenceTrace_conv.first3000.csv", format: TraceAzure, n: 3000,
			spanS: 628.703398, first: Request{PromptTokens: 374, OutputTokens: 44}},
		{name: "burstgpt", file: "burst.csv", format: TraceBurstGPT, n: 2, skipped: 1, spanS: 10,
			text:  "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n10,ChatGPT,1000,0,1000,Conversation log\n15,GPT-4,1200,300,1500,API log\n",
			first: Request{PromptTokens: 472, OutputTokens: 18}},
		{name: "sessions", file: "s.jsonl", format: TraceTpscope, n: 3, spanS: 2,
			text:  `{"arrival_s": 1, "prompt_tokens": 100, "output_tokens": 10, "session": "alice"}` + "\n" + `{"arrival_s": 1, "prompt_tokens": 50, "output_tokens": 5, "session": 9}` + "\n" + `{"arrival_s": 3, "prompt_tokens": 200, "output_tokens": 20, "session": "alice", "delay_s": 2.5}` + "\n",
			first: Request{PromptTokens: 100, OutputTokens: 10, Session: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tr *Trace
			var err error
			if c.text != "" {
				tr, err = ReadTrace(strings.NewReader(c.text), c.file, "")
			} else {
				tr, err = LoadTrace(c.file)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr.Format != c.format || len(tr.Requests) != c.n || tr.Skipped != c.skipped || math.Abs(tr.SpanS()-c.spanS) > 1e-6 || tr.HashBlockTokens != c.hashTokens {
				t.Errorf("format %s, %d requests, %d skipped, span %v s, hash block %d; want %s, %d, %d, %v, %d",
					tr.Format, len(tr.Requests), tr.Skipped, tr.SpanS(), tr.HashBlockTokens, c.format, c.n, c.skipped, c.spanS, c.hashTokens)
			}
			got := tr.Requests[0]
			if got.ArrivalS != 0 || got.PromptTokens != c.first.PromptTokens || got.OutputTokens != c.first.OutputTokens || got.Session != c.first.Session ||
				len(got.HashIDs) != len(c.first.HashIDs) {
				t.Errorf("first request %+v, want %+v at 0", got, c.first)
			}
		})
	}
	tr, err := ReadTrace(strings.NewReader(cases[3].text), "s.jsonl", "")
	if err != nil {
		t.Fatal(err)
	}
	if r := tr.Requests[2]; r.Session != 1 || r.DelayS != 2.5 || tr.Requests[1].Session != 2 || tr.Sessions != 2 {
		t.Errorf("sessions: %+v, %d sessions", tr.Requests, tr.Sessions)
	}
}

// TestReadTraceErrors: one *ParseError naming the file, line and field.
func TestReadTraceErrors(t *testing.T) {
	cases := []struct {
		name, text string
		line       int
		field      string
	}{
		{"mooncake bad hash", `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1, -2]}`, 1, "hash_ids"},
		{"mooncake no input", "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n{\"timestamp\": 5, \"output_length\": 1}\n", 2, "input_length"},
		{"azure bad time", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,1\nyesterday,10,1\n", 3, "TIMESTAMP"},
		{"burstgpt bad tokens", "Timestamp,Model,Request tokens,Response tokens\n0,x,ten,1\n", 2, "Request tokens"},
		{"session out of order", `{"arrival_s": 5, "prompt_tokens": 1, "output_tokens": 1, "session": 1}` + "\n" + `{"arrival_s": 2, "prompt_tokens": 1, "output_tokens": 1, "session": 1}`, 1, "session"},
		{"all failed", "Timestamp,Model,Request tokens,Response tokens\n0,x,10,0\n", 1, ""},
		// A JSON-lines field as a CSV column is not read: refused, not
		// left out (sessions ran as independent requests).
		{"csv session", "arrival_s,prompt_tokens,output_tokens,session,delay_s\n0,1,1,a,0\n5,1,1,a,2\n", 1, "session"},
		{"csv hash_ids", "arrival_s,hash_ids,prompt_tokens,output_tokens\n0,1 2,1,1\n", 1, "hash_ids"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(c.text), "t", "")
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != c.line || pe.Field != c.field {
				t.Errorf("error %v; want a *ParseError at line %d, field %q", err, c.line, c.field)
			}
		})
	}
}

// TestReadTraceNotATrace: a file of another kind is named as not a
// request trace in one line, with what it holds, instead of as a request
// missing its arrival: a pretty-printed JSON document (a GuideLLM report,
// a config), JSON lines of a benchmark's results, a CSV of other columns.
// They said "want a JSON object: unexpected end of JSON input" (of a JSON
// object) and 'field "arrival_s": missing'.
func TestReadTraceNotATrace(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"json document", "{\n  \"benchmarks\": [\n    {\"a\": 1}\n  ]\n}\n", "t:1: one JSON document over 5 lines, not JSON lines: want one request object per line"},
		{"results lines", `{"backend": "vllm", "completed": 3, "median_ttft_ms": 1}`, "t:1: not a request trace: no arrival_s, prompt_tokens, output_tokens (tpscope) or input_length (Mooncake); keys: backend, completed, median_ttft_ms"},
		{"other csv", "size,count,type\n1024,256,float\n", `t:1: not a request trace: want a header naming arrival_s, prompt_tokens, output_tokens (or Azure's TIMESTAMP, ContextTokens, GeneratedTokens, or BurstGPT's Timestamp, Request tokens, Response tokens), got "size,count,type"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(c.text), "t", "")
			var pe *ParseError
			if !errors.As(err, &pe) || err.Error() != c.want {
				t.Errorf("error %v, want a *ParseError %q", err, c.want)
			}
		})
	}
	// A trace's own line missing a field still names the field.
	_, err := ReadTrace(strings.NewReader(`{"arrival_s": 0, "output_tokens": 1}`), "t", "")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "prompt_tokens" {
		t.Errorf("tpscope line without prompt_tokens: %v, want the field named", err)
	}
}

// TestScaleToQPS: 5 requests over 8 s arrive at 0.5 req/s; replayed at 2
// req/s every time shrinks 4x (a request at 6 s comes at 1.5 s), delays
// too; fewer than two requests or no span has no rate to scale.
func TestScaleToQPS(t *testing.T) {
	reqs := []Request{{ArrivalS: 2}, {ArrivalS: 3}, {ArrivalS: 8, DelayS: 4}, {ArrivalS: 9}, {ArrivalS: 10}}
	out, err := ScaleToQPS(reqs, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0, 0.25, 1.5, 1.75, 2} {
		if math.Abs(out[i].ArrivalS-want) > 1e-12 {
			t.Errorf("request %d at %v s, want %v", i, out[i].ArrivalS, want)
		}
	}
	if out[2].DelayS != 1 || reqs[2].ArrivalS != 8 {
		t.Errorf("delay %v (want 1); input changed: %v", out[2].DelayS, reqs[2].ArrivalS)
	}
	for _, bad := range [][]Request{{{ArrivalS: 1}}, {{ArrivalS: 1}, {ArrivalS: 1}}} {
		if _, err := ScaleToQPS(bad, 1); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestReplayAtTakesThenScales: a replay cut short by a count or a
// duration offers the rate asked over the requests it takes. Four
// requests a second apart, then one 97 s later: the whole trace has 4
// gaps over 100 s, so scaled whole to 2 req/s (4 gaps in 2 s) its first
// four come 0.02 s apart, 50 req/s. Taken first, the four span 3 gaps,
// 1.5 s at 2 req/s; a run of 1.2 s at 2 req/s takes ceil(2.4) = 3,
// arriving at 0, 0.5 and 1 s.
func TestReplayAtTakesThenScales(t *testing.T) {
	reqs := []Request{{ArrivalS: 0}, {ArrivalS: 1}, {ArrivalS: 2}, {ArrivalS: 3}, {ArrivalS: 100}}
	for _, c := range []struct {
		n    int
		durS float64
		want []float64
	}{
		{4, 0, []float64{0, 0.5, 1, 1.5}},
		{0, 1.2, []float64{0, 0.5, 1}},
		{0, 0, []float64{0, 0.02, 0.04, 0.06, 2}},
	} {
		out, err := ReplayAt(reqs, 2, c.n, c.durS)
		if err != nil {
			t.Fatalf("n %d, duration %v: %v", c.n, c.durS, err)
		}
		if len(out) != len(c.want) {
			t.Fatalf("n %d, duration %v: %d requests, want %d", c.n, c.durS, len(out), len(c.want))
		}
		for i, w := range c.want {
			if math.Abs(out[i].ArrivalS-w) > 1e-12 {
				t.Errorf("n %d, duration %v: request %d at %v s, want %v", c.n, c.durS, i, out[i].ArrivalS, w)
			}
		}
	}
}

// FuzzReadTrace: any input is sorted valid requests or a *ParseError.
// Seeded with each format's first lines.
func FuzzReadTrace(f *testing.F) {
	for _, s := range []string{
		`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2]}` + "\n" + `{"timestamp": 3000, "input_length": 10, "output_length": 0}`,
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n",
		"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n",
		`{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1, "session": "a", "delay_s": 1}`,
		`{"session_id": 3, "input_length": 5, "output_length": 2, "delay": 100}`,
	} {
		f.Add(s)
	}
	// The public traces' first lines, and files of other kinds a user
	// passes by mistake (a results document over lines, results' JSON
	// lines).
	for _, glob := range []string{"testdata/traces/*/*.jsonl", "testdata/traces/*/*.csv", "testdata/bench/generated/*.json*"} {
		files, _ := filepath.Glob(glob)
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				lines := strings.SplitAfter(string(b), "\n")
				f.Add(strings.Join(lines[:min(len(lines), 40)], ""))
			}
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		tr, err := ReadTrace(strings.NewReader(text), "fuzz", "")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		for i, r := range tr.Requests {
			if err := r.validate(); err != nil {
				t.Fatalf("request %d invalid: %v", i, err)
			}
			if i > 0 && r.ArrivalS < tr.Requests[i-1].ArrivalS {
				t.Fatalf("not sorted at %d", i)
			}
		}
	})
}
