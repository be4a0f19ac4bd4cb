package serving

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// near reports whether got is want within 1e-9 relative, NaN matching NaN.
func near(got, want float64) bool {
	if math.IsNaN(want) {
		return math.IsNaN(got)
	}
	return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want))
}

func sameLatency(t *testing.T, what string, got, want Latency) {
	t.Helper()
	if !near(got.Mean, want.Mean) || !near(got.P50, want.P50) || !near(got.P90, want.P90) || !near(got.P99, want.P99) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

var nan = math.NaN()

// TestReadMeasured reads one file of each format and checks the level
// against values worked out from the file by hand:
//
//   - vllm detailed: 4 requests; TTFT 100..400 ms: mean 250, p90 by
//     numpy's interpolation at rank 2.7 = 300 + 0.7 x 100 = 370 (the
//     summary has no p90); TPOT of the three outputs over one token
//     (0.2-0.1)/2, (0.3-0.2)/2, (0.4-0.3)/1 s: 50, 50, 100 ms, mean
//     66.67; ITL over the five gaps 50, 50, 60, 40, 100 ms: mean 60,
//     median 50; sends at 0, 0, 0.2, 0.3 s;
//   - InferenceX DSR1 at 16 clients (real): 160 requests at 2.2379 req/s:
//     71.50 s; 1121.53 output tok/s x 71.50 s = 80,185 output tokens;
//     (2287.87 - 1121.53) x 71.50 = 83,390 prompt tokens;
//   - InferenceX GLM-5 token position (real, seconds): ISL 1024 at 16
//     clients, median TTFT 0.29140 s = 291.40 ms;
//   - SGLang: Infinity read as no rate; 16 clients; range ratio 0.5;
//   - aiperf: TPOT from inter_token_latency; 16 clients, 100 requests;
//   - GuideLLM: benchmark 1 concurrent 4, request latency 5.2 s = 5200 ms,
//     104 s long; benchmark 2 at 2 req/s, constant;
//   - request log (real, LLMServingSim): 300 requests, median TTFT 138.8
//     ms as its SOURCE.md checked independently.
func TestReadMeasured(t *testing.T) {
	gen := "testdata/bench/generated/"
	cases := []struct {
		file   string
		levels int
		check  func(t *testing.T, ms []Measured)
	}{
		{gen + "vllm-detailed.json", 1, func(t *testing.T, ms []Measured) {
			m := ms[0]
			if m.Format != FormatVLLM || m.Concurrency != 2 || m.QPS != 0 || m.Completed != 4 || len(m.Requests) != 4 {
				t.Fatalf("format %s, concurrency %d, qps %v, completed %d, %d requests", m.Format, m.Concurrency, m.QPS, m.Completed, len(m.Requests))
			}
			sameLatency(t, "TTFT", m.TTFTMs, Latency{250, 250, 370, 397})
			sameLatency(t, "TPOT", m.TPOTMs, Latency{200.0 / 3, 50, 90, 99})
			sameLatency(t, "ITL", m.ITLMs, Latency{60, 50, 84, 98.4})
			sameLatency(t, "E2E", m.E2EMs, Latency{325, 350, 400, 400})
			if got := []float64{m.Requests[0].SentS, m.Requests[2].SentS, m.Requests[3].SentS}; !near(got[0], 0) || !near(got[1], 0.2) || !near(got[2], 0.3) {
				t.Errorf("send times %v, want 0, 0.2, 0.3", got)
			}
		}},
		{gen + "vllm-append.jsonl", 2, func(t *testing.T, ms []Measured) {
			if ms[0].QPS != 2 || ms[0].Concurrency != 0 || ms[1].QPS != 4 || ms[1].Burstiness != 0.5 || ms[1].Concurrency != 64 || ms[1].Failed != 1 || ms[1].Record != 2 {
				t.Errorf("levels %+v", ms)
			}
			sameLatency(t, "TTFT", ms[0].TTFTMs, Latency{180.5, 170.25, 230, 310.75})
		}},
		{"testdata/bench/inferencex-dsr1-fp4-b200-sglang-tp8ep8/conc16.json", 1, func(t *testing.T, ms []Measured) {
			m := ms[0]
			if m.Format != FormatInferenceX || m.Concurrency != 16 || m.Completed != 160 || m.NominalPrompt != 1024 {
				t.Fatalf("%+v", m)
			}
			if math.Abs(m.DurationS-71.498) > 0.01 || math.Abs(float64(m.OutputTokens)-80185) > 2 || math.Abs(float64(m.PromptTokens)-83390) > 2 {
				t.Errorf("duration %.3f s, %d output, %d prompt tokens; want 71.50, 80185, 83390", m.DurationS, m.OutputTokens, m.PromptTokens)
			}
			sameLatency(t, "TTFT", m.TTFTMs, Latency{nan, 358.53034793399274, nan, 547.9667304037138})
			if r, ok := m.EngineRef(); !ok || r.Name != "sglang" || m.Engine != "sglang" || m.GPU != "b200" {
				t.Errorf("engine %q (%v %v), GPU %q; want the file's framework sglang and hw b200", m.Engine, r, ok, m.GPU)
			}
		}},
		{"testdata/bench/inferencex-glm5-fp8-vllm-tp8-tokenpos/results/glm5_fp8_vllm_tp8_isl1024_osl128_conc16.json", 1, func(t *testing.T, ms []Measured) {
			m := ms[0]
			if m.Format != FormatSecondsSummary || m.Concurrency != 16 || m.PromptTokens != 163840 || m.OutputTokens != 20480 {
				t.Fatalf("%+v", m)
			}
			sameLatency(t, "TTFT", m.TTFTMs, Latency{nan, 291.39942955225706, nan, 2077.586937993753})
		}},
		{gen + "sglang.jsonl", 2, func(t *testing.T, ms []Measured) {
			m := ms[0]
			if m.Format != FormatSGLang || m.QPS != 0 || m.Concurrency != 16 || m.RangeRatio != 0.5 || m.NominalPrompt != 1024 {
				t.Fatalf("%+v", m)
			}
			sameLatency(t, "E2E", m.E2EMs, Latency{11800, 11700, nan, 16500})
		}},
		{gen + "profile_export_aiperf.json", 1, func(t *testing.T, ms []Measured) {
			m := ms[0]
			if m.Format != FormatAIPerf || m.Concurrency != 16 || m.Completed != 100 || m.PromptTokens != 204800 || m.DurationS != 40 {
				t.Fatalf("%+v", m)
			}
			sameLatency(t, "TPOT", m.TPOTMs, Latency{24.5, 24.25, 26, 27.5})
		}},
		{gen + "benchmarks.json", 2, func(t *testing.T, ms []Measured) {
			if ms[0].Format != FormatGuideLLM || ms[0].Concurrency != 4 || ms[0].Completed != 80 || ms[0].DurationS != 104 {
				t.Fatalf("%+v", ms[0])
			}
			sameLatency(t, "E2E", ms[0].E2EMs, Latency{5200, 5100, 5600, 6000})
			if ms[1].QPS != 2 || !math.IsInf(ms[1].Burstiness, 1) || ms[1].Record != 2 {
				t.Errorf("second benchmark %+v", ms[1])
			}
		}},
		{"testdata/bench/llmservingsim-rtxpro6000-qwen3-30b-a3b-dp2ep/vllm_requests.jsonl", 1, func(t *testing.T, ms []Measured) {
			m := ms[0]
			if m.Format != FormatRequestLog || m.Completed != 300 || !m.ArrivalsRecorded || math.Abs(m.TTFTMs.P50-138.8) > 0.05 {
				t.Errorf("format %s, %d requests, median TTFT %.2f ms", m.Format, m.Completed, m.TTFTMs.P50)
			}
		}},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			ms, err := LoadMeasured(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) != c.levels {
				t.Fatalf("%d levels, want %d", len(ms), c.levels)
			}
			c.check(t, ms)
		})
	}
}

// TestReadMeasuredErrors: a file that is no result, or a field of the
// wrong type, is one *ParseError naming the file, line and field.
func TestReadMeasuredErrors(t *testing.T) {
	cases := []struct {
		name, text string
		line       int
		field, msg string
	}{
		{"empty", "  \n", 1, "", "empty file"},
		{"not json", "size,count\n1,2\n", 1, "", "not JSON"},
		{"unknown keys", `{"foo": 1, "bar": 2}`, 1, "", "not a serving benchmark result"},
		{"wrong type", `{"median_ttft_ms": "fast", "completed": 1, "duration": 1, "total_input_tokens": 1, "total_output_tokens": 1}`, 1, "median_ttft_ms", `want a number, got "fast"`},
		// A JSON value over lines is shown on one, as its JSON text.
		{"wrong type, an object", "{\"median_ttft_ms\": {\n \"p50\": 1\n}, \"completed\": 1, \"duration\": 1, \"total_input_tokens\": 1, \"total_output_tokens\": 1}", 1, "median_ttft_ms", `want a number, got {"p50":1}`},
		{"second line broken", "{\"median_ttft_ms\": 1, \"completed\": 1, \"duration\": 1, \"total_input_tokens\": 1, \"total_output_tokens\": 1}\n{oops\n", 2, "", "one JSON object per line"},
		// A figure both clients always write, missing, is named as
		// missing: not read as 0 requests or NaN seconds.
		{"no duration", `{"median_ttft_ms": 1, "completed": 3, "total_input_tokens": 3, "total_output_tokens": 3}`, 1, "duration", "missing: want the run's duration in seconds"},
		{"no completed", `{"median_ttft_ms": 1, "duration": 1, "total_input_tokens": 3, "total_output_tokens": 3}`, 1, "completed", "missing: want the count of completed requests"},
		{"null completed", `{"median_ttft_ms": 1, "completed": null, "duration": 1, "total_input_tokens": 3, "total_output_tokens": 3}`, 1, "completed", "missing"},
		{"no prompt total", `{"median_ttft_ms": 1, "completed": 3, "duration": 1, "total_output_tokens": 3}`, 1, "total_input_tokens", "missing: want the total of prompt tokens"},
		{"sglang, no output total", `{"mean_e2e_latency_ms": 1, "completed": 3, "duration": 1, "total_input_tokens": 3}`, 1, "total_output_tokens", "missing: want the total of output tokens, which sglang-bench-serving writes"},
		{"ragged lists", `{"median_ttft_ms": 1, "completed": 2, "duration": 1, "total_input_tokens": 2, "total_output_tokens": 2, "ttfts": [0.1, 0.2], "input_lens": [1], "output_lens": [1, 1]}`, 1, "input_lens", "one per request"},
		// aiperf's time units are ns, us, ms and sec: another is no
		// time it can be read in (as ms it was a thousandth off).
		{"aiperf unit", `{"time_to_first_token": {"unit": "seconds", "avg": 0.15}, "request_count": {"avg": 4}, "benchmark_duration": {"unit": "sec", "avg": 2}}`, 1, "time_to_first_token.unit", `"seconds", want a time unit: ns, us, ms or sec`},
		{"aiperf no unit", `{"time_to_first_token": {"unit": "ms", "avg": 150}, "request_count": {"avg": 4}, "benchmark_duration": {"avg": 2}}`, 1, "benchmark_duration.unit", "missing, want a time unit"},
		// A count every export holds, missing, is named: it had been read
		// as 0 requests or 0 tokens ("guidellm: 0 completed requests").
		{"aiperf no count", `{"time_to_first_token": {"unit": "ms", "avg": 150}, "benchmark_duration": {"unit": "sec", "avg": 2}}`, 1, "request_count", "missing: want the count of completed requests"},
		{"aiperf no prompt tokens", `{"time_to_first_token": {"unit": "ms", "avg": 150}, "request_count": {"avg": 4}, "benchmark_duration": {"unit": "sec", "avg": 2}, "total_osl": {"avg": 8}}`, 1, "total_isl", "missing, and so is input_sequence_length"},
		{"guidellm no prompt counts", `{"benchmarks": [{"config": {"strategy": {"type_": "concurrent", "streams": 4}}, "metrics": {"output_token_count": {"successful": {"count": 4, "total_sum": 8}}}}]}`, 1, "benchmarks[0].metrics.prompt_token_count", "missing: want the successful requests' token counts"},
		{"inferencex no requests", `{"hw": "b200", "framework": "sglang", "conc": 16, "metrics": {"median_ttft_ms": 1, "total_token_throughput": 20, "output_token_throughput": 10, "request_throughput": 1}}`, 1, "metrics.successful_requests", "missing: want it, as InferenceX writes it"},
		{"inferencex no output rate", `{"hw": "b200", "framework": "sglang", "conc": 16, "metrics": {"median_ttft_ms": 1, "successful_requests": 16, "total_token_throughput": 20, "request_throughput": 1}}`, 1, "metrics.output_token_throughput", "missing"},
		{"guidellm strategy", `{"benchmarks": [{"metrics": {}}]}`, 1, "benchmarks[0].config.strategy", "missing"},
		// A speculating server's mean acceptance length is at least the
		// one token a step yields without drafts.
		{"vllm acceptance below 1", `{"backend": "vllm", "median_ttft_ms": 1, "completed": 1, "duration": 1, "total_input_tokens": 1, "total_output_tokens": 1, "spec_decode_acceptance_length": 0.8}`, 1, "spec_decode_acceptance_length", "at least 1"},
		{"sglang acceptance a string", `{"backend": "sglang", "mean_e2e_latency_ms": 1, "completed": 1, "duration": 1, "total_input_tokens": 1, "total_output_tokens": 1, "accept_length": "long"}`, 1, "accept_length", "want a number"},
		{"log out of order", `{"input_toks": 1, "output_toks": 1, "arrival_time": 1, "queued_ts": 5, "first_token_ts": 4, "last_token_ts": 6}`, 1, "first_token_ts", "in that order"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadMeasured(strings.NewReader(c.text), "res.json")
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v, want a *ParseError", err)
			}
			if pe.File != "res.json" || pe.Line != c.line || pe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q (line %d, field %q); want line %d, field %q, mentioning %q", err, pe.Line, pe.Field, c.line, c.field, c.msg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// TestMeasuredTraffic: the load rebuilt from a level. A detailed closed
// loop keeps its requests' lengths in send order; an open loop with send
// times replays them; InferenceX's DSR1 means (521 and 501 of a nominal
// 1024) make uniform lengths up to 1024; SGLang's range ratio 0.5 makes
// them uniform in [512, 1024] (mean 768, spread 256/768); a fixed-length
// GLM-5 level keeps 1024 and 128.
func TestMeasuredTraffic(t *testing.T) {
	load := func(path string) []Measured {
		ms, err := LoadMeasured(path)
		if err != nil {
			t.Fatal(err)
		}
		return ms
	}
	m := load("testdata/bench/generated/vllm-detailed.json")[0]
	tr, _, err := m.Traffic(1)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Concurrency != 2 || len(tr.Requests) != 4 || tr.Requests[2].PromptTokens != 300 || tr.Requests[3].OutputTokens != 1 {
		t.Errorf("detailed: %+v", tr)
	}
	x := load("testdata/bench/inferencex-dsr1-fp4-b200-sglang-tp8ep8/conc16.json")[0]
	tr, _, err = x.Traffic(1)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Prompt.Dist != Uniform || tr.Prompt.Mean != 521 || math.Abs(tr.Prompt.Spread-503.0/521) > 1e-12 || tr.Output.Mean != 501 || tr.Concurrency != 16 || tr.NumRequests != 160 {
		t.Errorf("inferencex: prompt %+v output %+v, %d clients, %d requests", tr.Prompt, tr.Output, tr.Concurrency, tr.NumRequests)
	}
	s := load("testdata/bench/generated/sglang.jsonl")[0]
	tr, _, err = s.Traffic(1)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Prompt != (Lengths{Dist: Uniform, Mean: 768, Spread: 256.0 / 768}) || tr.Output != (Lengths{Dist: Uniform, Mean: 384, Spread: 128.0 / 384}) {
		t.Errorf("sglang: prompt %+v, output %+v", tr.Prompt, tr.Output)
	}
	g := load("testdata/bench/inferencex-glm5-fp8-vllm-tp8-tokenpos/results/glm5_fp8_vllm_tp8_isl1024_osl128_conc16.json")[0]
	tr, _, err = g.Traffic(1)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Prompt != (Lengths{Mean: 1024}) || tr.Output != (Lengths{Mean: 128}) || tr.Concurrency != 16 {
		t.Errorf("glm-5: prompt %+v, output %+v, %d clients", tr.Prompt, tr.Output, tr.Concurrency)
	}
	l := load("testdata/bench/llmservingsim-rtxpro6000-qwen3-30b-a3b-dp2ep/vllm_requests.jsonl")[0]
	tr, _, err = l.Traffic(1)
	if err != nil {
		t.Fatal(err)
	}
	if tr.QPS != 0 || tr.Concurrency != 0 || len(tr.Requests) != 300 || tr.Requests[0].ArrivalS != 0 || tr.Requests[0].PromptTokens != 2361 {
		t.Errorf("request log: qps %v, %d clients, %d requests, first %+v", tr.QPS, tr.Concurrency, len(tr.Requests), tr.Requests[0])
	}
}

// FuzzReadMeasured: every input is levels that validate or one
// single-line *ParseError; never a panic. Seeded with every fixture.
func FuzzReadMeasured(f *testing.F) {
	for _, glob := range []string{"testdata/bench/generated/*.json*", "testdata/bench/*/*.json", "testdata/bench/*/results/*isl1024*conc4.json"} {
		files, _ := filepath.Glob(glob)
		for _, p := range files {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(string(b))
			}
		}
	}
	for _, s := range []string{`{}`, `[]`, `[{"median_ttft_ms": 1}]`, "{\"a\":NaN}", `{"benchmarks": null}`, "{\"input_toks\":1,\"first_token_ts\":1}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		ms, err := ReadMeasured(strings.NewReader(text), "fuzz")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		for i := range ms {
			if err := ms[i].validate(); err != nil {
				t.Fatalf("level %d invalid: %v", i, err)
			}
			if ms[i].Completed > 1e5 {
				continue // a million requests drawn per input would only slow the fuzzer
			}
			if _, _, err := ms[i].Traffic(1); err != nil && !strings.Contains(err.Error(), "traffic") {
				t.Fatalf("level %d: traffic: %v", i, err)
			}
		}
	})
}

// TestMeasuredEngineRef: the clients' backend names map to the engine
// profiles; an API's name names no engine.
func TestMeasuredEngineRef(t *testing.T) {
	for name, want := range map[string]string{"vllm": "vllm", "VLLM": "vllm", "sglang": "sglang", "sglang-oai": "sglang", "sglang-native": "sglang",
		"trt": "trtllm", "tensorrt-llm": "trtllm", "openai": "", "openai-chat": "", "": "", "lmdeploy": ""} {
		m := Measured{Engine: name}
		r, ok := m.EngineRef()
		if ok != (want != "") || r.Name != want {
			t.Errorf("%q: %v %v, want %q", name, r, ok, want)
		}
	}
}

// TestMeasuredPlan: an InferenceX summary records the plan its server
// ran: the DSR1 files' "tp": 8, "ep": 8 and "gpu": {"n_gpus": 8} are TP 8
// with the experts spread whole (tp8-ep); an EP size of 1 is no EP; a DP
// is the plan's, and SGLang's DP attention within the TP group (tp 8, dp
// 8 on 8 GPUs) is TP 1 x DP 8. A file with no tp records no plan.
func TestMeasuredPlan(t *testing.T) {
	ms, err := LoadMeasured("testdata/bench/inferencex-dsr1-fp4-b200-sglang-tp8ep8/conc16.json")
	if err != nil {
		t.Fatal(err)
	}
	if m := ms[0]; m.TP != 8 || m.EP != 8 || m.DP != 0 || m.GPUs != 8 {
		t.Errorf("conc16.json: tp %d, ep %d, dp %d, %d GPUs; want 8, 8, 0, 8", m.TP, m.EP, m.DP, m.GPUs)
	}
	const body = `"hw": "b200", "framework": "sglang", "isl": 1024, "osl": 1024, "conc": 8, "metrics": {"successful_requests": 80, "total_token_throughput": 2000, "output_token_throughput": 1000, "request_throughput": 2, "median_ttft_ms": 300}`
	for _, c := range []struct {
		name, fields string
		want         string
		ok           bool
	}{
		{"DSR1's", `"tp": 8, "ep": 8, "gpu": {"n_gpus": 8}`, "tp8-ep", true},
		{"no EP", `"tp": 4, "ep": 1, "gpu": {"n_gpus": 4}`, "tp4", true},
		{"DP attention within TP", `"tp": 8, "ep": 8, "dp": 8, "gpu": {"n_gpus": 8}`, "tp1-dp8-ep", true},
		{"TP x DP GPUs", `"tp": 4, "ep": 8, "dp": 2, "gpu": {"n_gpus": 8}`, "tp4-dp2-ep", true},
		{"none recorded", `"model": "m"`, "", false},
	} {
		ms, err := ReadMeasured(strings.NewReader("{"+c.fields+", "+body+"}"), c.name+".json")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p, _, ok := ms[0].Plan()
		if ok != c.ok || (ok && p.String() != c.want) {
			t.Errorf("%s: plan %s (%v), want %s (%v)", c.name, p, ok, c.want, c.ok)
		}
	}
	if _, err := ReadMeasured(strings.NewReader(`{"tp": "eight", `+body+`}`), "bad.json"); err == nil || !strings.Contains(err.Error(), `field "tp"`) {
		t.Errorf("a tp that is not a number: %v, want an error naming the field", err)
	}
}

// TestMeasuredPlanPartial: an InferenceX summary whose plan is recorded in
// part, or as tpscope cannot price it, or whose client count is missing,
// is refused in one line naming the file's field. On 601a891 an ep or dp
// beside no tp (or a tp of 0) recorded no plan, so the flags' plan priced
// the level; an ep of 4 under tp 8 was priced as EP over all 8 ranks; and
// a missing conc made the level's load "all at once".
func TestMeasuredPlanPartial(t *testing.T) {
	const body = `"hw": "b200", "framework": "sglang", "isl": 1024, "osl": 1024, "metrics": {"successful_requests": 80, "total_token_throughput": 2000, "output_token_throughput": 1000, "request_throughput": 2, "median_ttft_ms": 300}`
	for _, c := range []struct {
		name, fields, want string
	}{
		{"ep without tp", `"ep": 8, "conc": 8`, `x.json:1: field "tp": missing: the file records an ep or dp size but no tp`},
		{"dp without tp", `"dp": 2, "conc": 8`, `field "tp": missing`},
		{"tp 0", `"tp": 0, "ep": 8, "conc": 8`, `field "tp": want the run's tensor-parallel size, 1 or more, got 0`},
		{"ep of part of the ranks", `"tp": 8, "ep": 4, "conc": 8`, `field "ep": 4: tpscope spreads whole experts over every rank of the plan (tp8-ep, 8 ranks): want 1 or 8`},
		{"ep under TP x DP", `"tp": 4, "dp": 2, "ep": 4, "conc": 8, "gpu": {"n_gpus": 8}`, `field "ep": 4: tpscope spreads whole experts over every rank of the plan (tp4-dp2-ep, 8 ranks): want 1 or 8`},
		{"no conc", `"tp": 8, "ep": 8`, `field "conc": want the run's client count, 1 or more (InferenceX runs a closed loop of conc clients); it is missing`},
		{"conc 0", `"tp": 8, "ep": 8, "conc": 0`, `field "conc": want the run's client count, 1 or more (InferenceX runs a closed loop of conc clients); got 0`},
	} {
		_, err := ReadMeasured(strings.NewReader("{"+c.fields+", "+body+"}"), "x.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", c.name, err, c.want)
		}
	}
}

// TestReadAIPerfUnits: aiperf's times are read in the unit each records:
// TTFT 0.15 sec is 150 ms, ITL 24500 us is 24.5 ms, and a
// benchmark_duration of 40000 ms is 40 s (it was read as 40000 s whatever
// its unit: 1/1000 of the rate its totals give).
func TestReadAIPerfUnits(t *testing.T) {
	const text = `{"time_to_first_token": {"unit": "sec", "avg": 0.15, "p50": 0.14},
	"inter_token_latency": {"unit": "us", "avg": 24500},
	"request_count": {"unit": "requests", "avg": 100},
	"benchmark_duration": {"unit": "ms", "avg": 40000},
	"total_isl": {"unit": "tokens", "avg": 204800}, "total_osl": {"unit": "tokens", "avg": 25600}}`
	ms, err := ReadMeasured(strings.NewReader(text), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	m := ms[0]
	if !near(m.TTFTMs.Mean, 150) || !near(m.TTFTMs.P50, 140) || !near(m.TPOTMs.Mean, 24.5) || !near(m.DurationS, 40) {
		t.Errorf("TTFT %+v ms, TPOT %+v ms, duration %v s; want mean 150 and p50 140, 24.5, 40", m.TTFTMs, m.TPOTMs, m.DurationS)
	}
}

// TestReadMeasuredSpecAcceptance: the mean acceptance length a client
// read off a speculating server is kept (vllm bench serve's
// spec_decode_acceptance_length, SGLang bench_serving's accept_length),
// and SGLang's null (a server without speculation) is none.
func TestReadMeasuredSpecAcceptance(t *testing.T) {
	base := `"median_ttft_ms": 1, "completed": 1, "duration": 1, "total_input_tokens": 1, "total_output_tokens": 1`
	for _, c := range []struct {
		text string
		want float64
	}{
		{`{"backend": "vllm", ` + base + `, "spec_decode_acceptance_length": 3.2, "spec_decode_per_position_acceptance_rates": [0.8, 0.7]}`, 3.2},
		{`{"backend": "sglang", "mean_e2e_latency_ms": 1, ` + base + `, "accept_length": 2.6}`, 2.6},
		{`{"backend": "sglang", "mean_e2e_latency_ms": 1, ` + base + `, "accept_length": null}`, 0},
		{`{"backend": "vllm", ` + base + `}`, 0},
	} {
		ms, err := ReadMeasured(strings.NewReader(c.text), "r.json")
		if err != nil {
			t.Fatal(err)
		}
		if got := ms[0].SpecAcceptLength; got != c.want {
			t.Errorf("%s: acceptance length %v, want %v", c.text, got, c.want)
		}
	}
}
