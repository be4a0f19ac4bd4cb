package engine

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestParseSpecAcceptance reads each format; expected values worked out
// from the inputs by hand.
func TestParseSpecAcceptance(t *testing.T) {
	prom := `# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="kimi"} 1000.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="kimi"} 3000.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="kimi"} 1650.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="kimi",position="0"} 800.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="kimi",position="1"} 550.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="kimi",position="2"} 300.0
`
	// Two log lines of 100 and 300 drafts (accepted / (mean - 1)).
	log := `(APIServer pid=1) INFO 08-04 20:51:08 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 150 tokens, Drafted: 300 tokens, Per-position acceptance rate: 0.800, 0.500, 0.200, Avg Draft acceptance rate: 50.0%
(APIServer pid=1) INFO 08-04 20:51:18 [loggers.py:310] Engine 000: Avg prompt throughput: 0.0 tokens/s
(APIServer pid=1) INFO 08-04 20:51:28 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.00, Accepted throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 300 tokens, Drafted: 900 tokens, Per-position acceptance rate: 0.600, 0.300, 0.100, Avg Draft acceptance rate: 33.3%
`
	sg := `[2026-05-01 10:00:00] Decode batch, #running-req: 1, #token: 2048, token usage: 0.01, accept len: 2.60, accept rate: 0.53, cuda graph: True, gen throughput (token/s): 95.10, #queue-req: 0
[2026-05-01 10:00:10] Decode batch, #running-req: 1, #token: 2090, token usage: 0.01, accept len: 2.80, accept rate: 0.60, cuda graph: True, gen throughput (token/s): 99.00, #queue-req: 0
`
	cases := []struct {
		name, in string
		pos      []float64
		mean     float64
	}{
		{"prometheus", prom, []float64{0.8, 0.55, 0.3}, 0},
		{"vllm log", log, []float64{(100*0.8 + 300*0.6) / 400, (100*0.5 + 300*0.3) / 400, (100*0.2 + 300*0.1) / 400}, 0},
		{"sglang log", sg, nil, 2.7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseSpecAcceptance("in", []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.PerPosition) != len(c.pos) || math.Abs(got.MeanLength-c.mean) > 1e-9 {
				t.Fatalf("got %+v, want positions %v mean %v", got, c.pos, c.mean)
			}
			for i := range c.pos {
				if math.Abs(got.PerPosition[i]-c.pos[i]) > 1e-9 {
					t.Errorf("position %d: %v, want %v", i, got.PerPosition[i], c.pos[i])
				}
			}
		})
	}
	if _, err := ParseSpecAcceptance("x.txt", []byte("nothing here\n")); err == nil || !strings.Contains(err.Error(), "x.txt") {
		t.Errorf("err = %v, want one naming the input", err)
	}
}

// TestParseSpecAcceptanceDraftTokens: a vLLM /metrics text without the
// per-position counters gives a mean acceptance length, which means
// nothing without the drafts it was measured at: vLLM counts them
// (vllm:spec_decode_num_draft_tokens_total over
// vllm:spec_decode_num_drafts_total, 3000 / 1000 = 3 here), and the
// reading carries that K. It had been dropped, so the length was read as
// measured at whatever K the scenario drafts.
func TestParseSpecAcceptanceDraftTokens(t *testing.T) {
	prom := `vllm:spec_decode_num_drafts_total{engine="0"} 1000.0
vllm:spec_decode_num_draft_tokens_total{engine="0"} 3000.0
vllm:spec_decode_num_accepted_tokens_total{engine="0"} 1650.0
`
	got, err := ParseSpecAcceptance("m.txt", []byte(prom))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.MeanLength-2.65) > 1e-9 || got.AtTokens != 3 {
		t.Errorf("got %+v, want mean length 2.65 measured at 3 draft tokens", got)
	}
	// Drafts of no whole number of tokens are not one K.
	bad := strings.Replace(prom, "3000.0", "2500.0", 1)
	if _, err := ParseSpecAcceptance("m.txt", []byte(bad)); err == nil || !strings.Contains(err.Error(), "m.txt") || !strings.Contains(err.Error(), "draft_tokens") {
		t.Errorf("2.5 draft tokens a draft: err %v, want one naming the file and the counter", err)
	}
}

// TestParseSGLangLogDraftSteps: SGLang's "accept len" is a mean
// acceptance length, of the draft passes the server ran: its log's
// server_args line names them (speculative_num_steps=3), and the reading
// carries them. A log without that line says the length's K is not known
// (its source says so); two runs of different steps in one log are one
// line naming the file.
func TestParseSGLangLogDraftSteps(t *testing.T) {
	args := "[2026-05-01 09:59:00] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', tp_size=8, speculative_algorithm='EAGLE3', speculative_draft_model_path='lightseekorg/kimi-k2.5-eagle3-mla', speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, enable_metrics=True)\n"
	lines := "[2026-05-01 10:00:00] Decode batch, #running-req: 1, #token: 2048, token usage: 0.01, accept len: 2.60, accept rate: 0.65, cuda graph: True, gen throughput (token/s): 95.10, #queue-req: 0\n" +
		"[2026-05-01 10:00:10] Decode batch, #running-req: 1, #token: 2090, token usage: 0.01, accept len: 2.80, accept rate: 0.70, cuda graph: True, gen throughput (token/s): 99.00, #queue-req: 0\n"
	got, err := ParseSpecAcceptance("sg.log", []byte(args+lines))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.MeanLength-2.7) > 1e-9 || got.AtTokens != 3 || !strings.Contains(got.Source, "speculative_num_steps 3") {
		t.Errorf("got %+v; want mean length 2.7 at 3 draft steps, the source naming them", got)
	}
	got, err = ParseSpecAcceptance("sg.log", []byte(lines))
	if err != nil {
		t.Fatal(err)
	}
	if got.AtTokens != 0 || !strings.Contains(got.Source, "no speculative_num_steps") {
		t.Errorf("without server_args: %+v; want no K and a source saying the log names none", got)
	}
	other := strings.Replace(args, "speculative_num_steps=3", "speculative_num_steps=5", 1)
	if _, err := ParseSpecAcceptance("sg.log", []byte(args+lines+other+lines)); err == nil || !strings.Contains(err.Error(), "sg.log") || !strings.Contains(err.Error(), "speculative_num_steps") {
		t.Errorf("two runs of 3 and 5 steps: err %v, want one naming the file and the field", err)
	}
}

// TestParseVLLMLogWeightsByDrafts: vLLM's "SpecDecoding metrics" lines
// are averaged per position weighted by each line's drafts, Drafted
// tokens over the K positions it lists: here 100 drafts at 0.8, 0.5, 0.2
// and 100 that accepted nothing (an n-gram interval whose lookups matched
// no continuation), so 0.4, 0.25, 0.1. A line without accepted tokens had
// counted as one draft (its weight came from Accepted / (mean - 1)), so
// the mean was 0.79, 0.50, 0.20: the intervals that accepted nothing all
// but left out.
func TestParseVLLMLogWeightsByDrafts(t *testing.T) {
	log := `INFO 08-04 20:51:08 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 150 tokens, Drafted: 300 tokens, Per-position acceptance rate: 0.800, 0.500, 0.200, Avg Draft acceptance rate: 50.0%
INFO 08-04 20:51:18 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 1.00, Accepted throughput: 0.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 0 tokens, Drafted: 300 tokens, Per-position acceptance rate: 0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.0%
`
	got, err := ParseSpecAcceptance("v.log", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.4, 0.25, 0.1}
	if len(got.PerPosition) != 3 {
		t.Fatalf("got %+v, want 3 positions", got)
	}
	for i := range want {
		if math.Abs(got.PerPosition[i]-want[i]) > 1e-9 {
			t.Errorf("position %d: %v, want %v", i+1, got.PerPosition[i], want[i])
		}
	}
}

// TestParseVLLMLogOneK: every "SpecDecoding metrics" line of one server
// lists K per-position rates; lines of 3 and of 5 are two servers' (or a
// restart at another num_speculative_tokens), whose positions 4-5 the
// 3-token lines never drafted: averaged over both, position 4 came out
// at the 5-token server's rate times its share of the drafts. One line
// naming the file, the line and both K.
func TestParseVLLMLogOneK(t *testing.T) {
	log := `INFO [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.50, Accepted: 150 tokens, Drafted: 300 tokens, Per-position acceptance rate: 0.800, 0.500, 0.200, Avg Draft acceptance rate: 50.0%
INFO [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.60, Accepted: 160 tokens, Drafted: 500 tokens, Per-position acceptance rate: 0.800, 0.500, 0.200, 0.080, 0.020, Avg Draft acceptance rate: 32.0%
`
	_, err := ParseSpecAcceptance("v.log", []byte(log))
	if err == nil || !strings.Contains(err.Error(), "v.log:2") || !strings.Contains(err.Error(), "5 per-position rates") || !strings.Contains(err.Error(), "3") {
		t.Errorf("err %v; want one naming v.log:2 and its 5 rates against the 3 before", err)
	}
}

// TestParsePromPartial: a /metrics text that lost part of what the
// acceptance is computed from is refused, naming the file and the
// counter, not read as an acceptance of 0: drafts without any accepted
// counter, a per-position counter of position 2 without position 1, and
// the accepted counter's line cut before its value.
func TestParsePromPartial(t *testing.T) {
	drafts := "vllm:spec_decode_num_drafts_total 100\n"
	pos := func(i, v int) string {
		return fmt.Sprintf("vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"%d\"} %d\n", i, v)
	}
	cases := []struct{ name, in, want string }{
		{"no accepted counter", drafts, "m.prom: vllm:spec_decode_num_accepted_tokens_per_pos_total{position=...} and vllm:spec_decode_num_accepted_tokens_total are missing"},
		{"position gap", drafts + pos(0, 80) + pos(2, 40), `m.prom: vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"} is missing (the last position is 2)`},
		{"cut line", drafts + "vllm:spec_decode_num_accepted_tokens_total\n", `m.prom:2: "vllm:spec_decode_num_accepted_tokens_total" has no value: the line is cut`},
		{"cut label", drafts + pos(0, 80) + `vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"`, "m.prom:3:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseSpecAcceptance("m.prom", []byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %+v, err %v; want an error with %q", got, err, c.want)
			}
		})
	}
	// Whole, the same counters read: 80 and 40 of 100 drafts at
	// positions 0 and 1.
	got, err := ParseSpecAcceptance("m.prom", []byte(drafts+pos(0, 80)+pos(1, 40)))
	if err != nil || len(got.PerPosition) != 2 || got.PerPosition[0] != 0.8 || got.PerPosition[1] != 0.4 {
		t.Errorf("got %+v, %v; want positions 0.8, 0.4", got, err)
	}
}

// Benchmark clients' and servers' reports as published, each with its
// source; the readers are held to them (expected values worked out from
// the numbers by hand) and the fuzz test starts from them.
var (
	// vllm-project/vllm PR #48892 (2026-08-03, a comment): vllm bench
	// serve's section of an MTP 8 run (gsm8k, temperature 0), as quoted.
	specBenchVLLM = "---------------Speculative Decoding---------------\n" +
		"Acceptance rate (%):                     43.71     \n" +
		"Acceptance length:                       4.50      \n" +
		"Drafts:                                  11043     \n" +
		"Draft tokens:                            88344     \n" +
		"Accepted tokens:                         38611     \n" +
		"Per-position acceptance (%):\n" +
		"  Position 0:                            76.17     \n" +
		"  Position 1:                            61.58     \n" +
		"  Position 2:                            51.25     \n" +
		"  Position 3:                            42.43     \n" +
		"  Position 4:                            36.40     \n" +
		"  Position 5:                            30.94     \n" +
		"  Position 6:                            27.22     \n" +
		"  Position 7:                            23.65     \n" +
		"==================================================\n"
	// The same PR, its MTP 1 run's section.
	specBenchVLLM1 = "---------------Speculative Decoding---------------\n" +
		"Acceptance rate (%):                     83.39     \n" +
		"Acceptance length:                       1.83      \n" +
		"Drafts:                                  26407     \n" +
		"Draft tokens:                            26407     \n" +
		"Accepted tokens:                         22021     \n" +
		"Per-position acceptance (%):\n" +
		"  Position 0:                            83.39     \n" +
		"==================================================\n"
	// vllm-project/vllm-ascend issue #13664 (2026-08-06): two of vLLM's
	// SpecDecoding log lines, 7 draft tokens (DeepSeek-V4-Flash, DSpark).
	specLogVLLM = "(APIServer pid=79) INFO 08-05 12:25:03 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.91, Accepted throughput: 0.72 tokens/s, Drafted throughput: 2.64 tokens/s, Accepted: 44 tokens, Drafted: 161 tokens, Per-position acceptance rate: 0.739, 0.478, 0.261, 0.174, 0.130, 0.087, 0.043, Avg Draft acceptance rate: 27.3%\n" +
		"\n" +
		"(APIServer pid=79) INFO 08-05 12:25:13 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.93, Accepted throughput: 10.60 tokens/s, Drafted throughput: 38.50 tokens/s, Accepted: 106 tokens, Drafted: 385 tokens, Per-position acceptance rate: 0.691, 0.418, 0.382, 0.182, 0.127, 0.073, 0.055, Avg Draft acceptance rate: 27.5%\n"
	// sgl-project/sglang issue #4759 (2025-03-24): a decode batch line of
	// an EAGLE server's log.
	specLogSGLang = "[2025-03-24 02:56:41 TP0] Decode batch. #running-req: 32, #token: 7352, token usage: 0.01, accept len: 2.54, gen throughput (token/s): 39.33, largest-len: 0, #queue-req: 68, \n"
	// sgl-project/sglang PR #13376 (2025-11): bench_serving's result block
	// against an NGRAM server, its rows to the accept length.
	specBenchSGLang = "============ Serving Benchmark Result ============\n" +
		"Backend:                                 sglang    \n" +
		"Traffic request rate:                    256.0     \n" +
		"Max request concurrency:                 256       \n" +
		"Successful requests:                     256       \n" +
		"Benchmark duration (s):                  83.27     \n" +
		"Total input tokens:                      85028     \n" +
		"Total generated tokens:                  512000    \n" +
		"Request throughput (req/s):              3.07      \n" +
		"Output token throughput (tok/s):         6148.70   \n" +
		"Concurrency:                             142.34    \n" +
		"Accept length:                           5.86      \n"
	// vllm bench serve --save-result keys (benchmarks/serve.py
	// _add_spec_decode_result: rates as fractions, the acceptance rate in
	// percent), holding the MTP 8 run above: generated, not published.
	specResultVLLM = `{"backend": "vllm", "completed": 80, "spec_decode_acceptance_rate": 43.71, "spec_decode_acceptance_length": 4.5, "spec_decode_num_drafts": 11043, "spec_decode_draft_tokens": 88344, "spec_decode_accepted_tokens": 38611, "spec_decode_per_position_acceptance_rates": [0.7617, 0.6158, 0.5125, 0.4243, 0.364, 0.3094, 0.2722, 0.2365]}`
	// SGLang bench_serving's JSONL (a line per run, accept_length from
	// the server's avg_spec_accept_length): generated, not published.
	specResultSGLang = `{"backend": "sglang", "request_rate": 4.0, "output_throughput": 900.5, "accept_length": 2.6}` + "\n" +
		`{"backend": "sglang", "request_rate": 8.0, "output_throughput": 1500.2, "accept_length": 2.8}` + "\n"
)

// TestParseSpecAcceptanceBenchmarks: each benchmark client's report (and
// the published engine logs above) read to the acceptance it states.
func TestParseSpecAcceptanceBenchmarks(t *testing.T) {
	mtp8 := []float64{0.7617, 0.6158, 0.5125, 0.4243, 0.3640, 0.3094, 0.2722, 0.2365}
	// The two vLLM log lines weigh by their drafts: 161 and 385 drafted
	// tokens over 7 positions, 23 and 55 drafts.
	w1, w2 := 161.0/7, 385.0/7
	logPos := []float64{0.739, 0.478, 0.261, 0.174, 0.130, 0.087, 0.043}
	logPos2 := []float64{0.691, 0.418, 0.382, 0.182, 0.127, 0.073, 0.055}
	var logWant []float64
	for i := range logPos {
		logWant = append(logWant, (w1*logPos[i]+w2*logPos2[i])/(w1+w2))
	}
	// Two vllm bench serve sections of one server (K 8) weigh by their
	// drafts; here the MTP 8 section and the same again.
	cases := []struct {
		name, in string
		pos      []float64
		mean     float64
		at       int
	}{
		{"vllm bench serve, MTP 8", specBenchVLLM, mtp8, 0, 0},
		{"vllm bench serve, MTP 1", specBenchVLLM1, []float64{0.8339}, 0, 0},
		{"vllm bench serve, two runs", specBenchVLLM + "\nsome other output\n" + specBenchVLLM, mtp8, 0, 0},
		{"vllm bench serve --save-result", specResultVLLM, mtp8, 0, 0},
		{"vllm log (vllm-ascend #13664)", specLogVLLM, logWant, 0, 0},
		{"sglang log (sglang #4759)", specLogSGLang, nil, 2.54, 0},
		{"sglang bench_serving output", specBenchSGLang, nil, 5.86, 0},
		{"sglang bench_serving JSONL", specResultSGLang, nil, 2.7, 0},
		{"vllm --save-result, lengths only", `{"spec_decode_num_drafts": 1000, "spec_decode_draft_tokens": 3000, "spec_decode_acceptance_length": 2.65}`, nil, 2.65, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseSpecAcceptance("in", []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.PerPosition) != len(c.pos) || math.Abs(got.MeanLength-c.mean) > 1e-9 || got.AtTokens != c.at {
				t.Fatalf("got %+v, want positions %v, mean %v at %d", got, c.pos, c.mean, c.at)
			}
			for i := range c.pos {
				if math.Abs(got.PerPosition[i]-c.pos[i]) > 1e-9 {
					t.Errorf("position %d: %v, want %v", i, got.PerPosition[i], c.pos[i])
				}
			}
			if got.Source == "" {
				t.Error("no source")
			}
		})
	}
}

// TestParseSpecAcceptanceBenchmarksRefused: a report that cannot be one
// server's acceptance is one line naming the input and what is wrong.
func TestParseSpecAcceptanceBenchmarksRefused(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"sections of two K", specBenchVLLM + specBenchVLLM1, "do not average"},
		{"a rate above 100 %", strings.Replace(specBenchVLLM, "76.17", "176.17", 1), "at most 100"},
		{"positions out of order", strings.Replace(specBenchVLLM, "Position 1:", "Position 3:", 1), "in order"},
		{"more draft tokens than positions", strings.Replace(specBenchVLLM, "88344", "99387", 1), "a rate for every draft position"},
		{"a length below 1", strings.Replace(specBenchVLLM1, "1.83", "0.83", 1), "at least 1"},
		{"a result without speculation", `{"backend": "vllm", "completed": 80, "mean_ttft_ms": 120.5}`, "ran no speculative decoding"},
		{"rates in percent", `{"spec_decode_per_position_acceptance_rates": [90.0, 60.0]}`, "fraction"},
		{"lengths of no whole K", `{"spec_decode_num_drafts": 1000, "spec_decode_draft_tokens": 2500, "spec_decode_acceptance_length": 2.2}`, "whole number"},
		{"both engines", specResultVLLM + "\n" + `{"accept_length": 2.5}` + "\n", "one engine"},
		{"a JSONL line cut short", `{"accept_length": 2.6}` + "\n" + `{"accept_len`, "not a JSON object"},
		{"an SGLang length below 1", strings.Replace(specBenchSGLang, "5.86", "0.5", 1), "at least 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpecAcceptance("r.txt", []byte(c.in))
			if err == nil || !strings.HasPrefix(err.Error(), "r.txt") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line naming r.txt and %q", err, c.want)
			}
		})
	}
}

// FuzzParseSpecAcceptance: the reader never panics, and what it accepts
// is an acceptance: rates in [0, 1] or a mean length of at least 1, a
// non-negative K and a source; what it refuses is one line naming the
// input. Seeded with every format's sample above.
func FuzzParseSpecAcceptance(f *testing.F) {
	for _, s := range []string{specBenchVLLM, specBenchVLLM1, specLogVLLM, specLogSGLang, specBenchSGLang, specResultVLLM, specResultSGLang,
		"vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 7\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseSpecAcceptance("f", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f") {
				t.Fatalf("error %q does not name the input", err)
			}
			return
		}
		if len(got.PerPosition) == 0 && !(got.MeanLength >= 1) {
			t.Fatalf("accepted %+v: neither rates nor a length of at least 1", got)
		}
		for _, v := range got.PerPosition {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("accepted a rate %v outside [0, 1]: %+v", v, got)
			}
		}
		if got.AtTokens < 0 || got.Source == "" || math.IsInf(got.MeanLength, 0) {
			t.Fatalf("accepted %+v", got)
		}
	})
}
