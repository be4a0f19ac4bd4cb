package serving

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// Measured serving benchmarks: the results a client (vllm bench serve,
// SGLang's bench_serving, NVIDIA's aiperf, GuideLLM, InferenceX's runners)
// or a server's request log recorded for one load level, read into one
// value (Measured) that a simulation of the same load is set beside
// (CompareMeasured) and that the engine's overheads are fitted on
// (Calibrate).
//
// Units: latencies in milliseconds (fields ending in Ms), durations and
// times in seconds (S), rates per second (PerS), whatever the file used.

// BenchFormat names the format a result was read from.
type BenchFormat string

const (
	// FormatVLLM is `vllm bench serve --save-result` (and the older
	// benchmarks/benchmark_serving.py): one JSON object per load level
	// (one per line with --append-result) with mean_/median_/std_/pNN_
	// {ttft,tpot,itl,e2el}_ms, and with --save-detailed the per-request
	// input_lens, output_lens, ttfts, itls, latencies and start_times in
	// seconds (vllm/benchmarks/serve.py, main_async and benchmark).
	FormatVLLM BenchFormat = "vllm-bench-serve"
	// FormatSGLang is SGLang's python -m sglang.bench_serving: one JSON
	// line per run appended to --output-file, with
	// {mean,median,std,p99}_e2e_latency_ms and ttft/tpot/itl statistics,
	// and with --output-details the per-request lists
	// (python/sglang/bench_serving.py, benchmark). Python writes an
	// infinite request rate as the bare token Infinity.
	FormatSGLang BenchFormat = "sglang-bench-serving"
	// FormatAIPerf is aiperf's profile_export_aiperf.json: one object per
	// metric ({"unit", "avg", "p50", "p90", "p99", ...}) and input_config
	// (docs/tutorials/working-with-profile-exports.md). Its
	// inter_token_latency is each request's (latency - TTFT) / (output -
	// 1), vllm's TPOT.
	FormatAIPerf BenchFormat = "aiperf"
	// FormatGuideLLM is GuideLLM's benchmarks.json: one benchmark per
	// strategy (synchronous, concurrent, constant, poisson, throughput),
	// metrics as status distributions ({"successful": {"mean", "median",
	// "percentiles": {"p50", ...}}}), request_latency in seconds
	// (src/guidellm/benchmark/schemas/generative/metrics.py).
	FormatGuideLLM BenchFormat = "guidellm"
	// FormatInferenceX is the summary InferenceX's runners keep per run:
	// hw, framework, isl, osl, conc and a metrics object of
	// successful_requests, throughputs, median_/p99_ ttft, tpot, itl and
	// e2el in ms (together_runner baselines).
	FormatInferenceX BenchFormat = "inferencex"
	// FormatSecondsSummary is vllm's summary keys without the _ms suffix,
	// in seconds (median_ttft, p99_tpot, ...), as InferenceX's
	// token-position client writes them.
	FormatSecondsSummary BenchFormat = "seconds-summary"
	// FormatRequestLog is a server-side request log, one JSON line per
	// request with input_toks, output_toks, arrival_time (s, any epoch),
	// queued_ts, first_token_ts and last_token_ts (s, one monotonic
	// clock), as LLMServingSim records vLLM's per-request stats.
	FormatRequestLog BenchFormat = "request-log"
)

// Latency is one latency over a benchmark's requests (ITL: over its
// tokens) in milliseconds; a NaN field was not reported.
type Latency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

func nanLatency() Latency { return Latency{math.NaN(), math.NaN(), math.NaN(), math.NaN()} }

// Get returns the statistic named mean, p50, p90 or p99.
func (l Latency) Get(stat string) float64 {
	switch stat {
	case "mean":
		return l.Mean
	case "p50":
		return l.P50
	case "p90":
		return l.P90
	case "p99":
		return l.P99
	}
	return math.NaN()
}

// MarshalJSON writes a NaN field as null.
func (l Latency) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`{"mean":%s,"p50":%s,"p90":%s,"p99":%s}`, jsonNum(l.Mean), jsonNum(l.P50), jsonNum(l.P90), jsonNum(l.P99))), nil
}

// jsonNum is v as JSON, null when NaN or infinite.
func jsonNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "null"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// fill sets l's missing statistics from o.
func (l *Latency) fill(o Latency) {
	for _, p := range []struct{ dst, src *float64 }{{&l.Mean, &o.Mean}, {&l.P50, &o.P50}, {&l.P90, &o.P90}, {&l.P99, &o.P99}} {
		if math.IsNaN(*p.dst) {
			*p.dst = *p.src
		}
	}
}

// latencyOf summarizes values in ms like numpy (mean, linear-interpolated
// percentiles); all NaN when there is none.
func latencyOf(v []float64) Latency {
	if len(v) == 0 {
		return nanLatency()
	}
	s := statsOf(v)
	return Latency{s.Mean, s.P50, s.P90, s.P99}
}

// MeasuredRequest is one successful request as the benchmark recorded
// it.
type MeasuredRequest struct {
	// SentS is when it was sent, in seconds from the first request's send
	// (NaN: not recorded).
	SentS        float64 `json:"sent_s"`
	PromptTokens int     `json:"prompt_tokens"`
	OutputTokens int     `json:"output_tokens"`
	TTFTMs       float64 `json:"ttft_ms"`
	E2EMs        float64 `json:"e2e_ms"`
}

// Measured is one load level of a serving benchmark as measured.
type Measured struct {
	File   string      `json:"file"`
	Format BenchFormat `json:"format"`
	// Record is the level's place in the file: the 1-based line of a
	// JSON-lines file, the 1-based benchmark of a GuideLLM file, else 1.
	Record int    `json:"record"`
	Model  string `json:"model,omitempty"`
	// Engine is the serving engine or client backend the file names
	// (vllm bench's and bench_serving's "backend", InferenceX's
	// "framework"): "vllm", "sglang", or an API's name ("openai-chat");
	// EngineRef maps it to an engine profile. GPU is the GPU the file
	// names (InferenceX's "hw"), "" when it names none.
	Engine string `json:"engine,omitempty"`
	GPU    string `json:"gpu,omitempty"`
	// TP, EP and DP are the parallel sizes the file records the server
	// ran with (InferenceX's tp, ep and dp), GPUs the GPUs it ran on
	// (InferenceX's gpu.n_gpus); 0 where it records none. Plan reads them
	// as a plan.
	TP   int `json:"tp,omitempty"`
	EP   int `json:"ep,omitempty"`
	DP   int `json:"dp,omitempty"`
	GPUs int `json:"gpus,omitempty"`

	// The load: QPS > 0 an open loop at that rate (Burstiness its gamma
	// shape, 1 = Poisson); Concurrency > 0 at most that many requests in
	// flight (with QPS 0: a closed loop of that many clients). Both 0:
	// every request sent at once, or, with ArrivalsRecorded, at its
	// recorded time.
	QPS              float64 `json:"qps,omitempty"`
	Burstiness       float64 `json:"burstiness,omitempty"`
	Concurrency      int     `json:"concurrency,omitempty"`
	ArrivalsRecorded bool    `json:"arrivals_recorded,omitempty"`

	Completed int     `json:"completed"`
	Failed    int     `json:"failed,omitempty"`
	DurationS float64 `json:"duration_s"`
	// PromptTokens and OutputTokens are totals over the completed
	// requests.
	PromptTokens int64 `json:"prompt_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// NominalPrompt and NominalOutput are the lengths the benchmark asked
	// for (random datasets; 0: not recorded); RangeRatio, when not NaN,
	// makes them uniform in [L x RangeRatio, L] (SGLang's
	// --random-range-ratio).
	NominalPrompt int     `json:"nominal_prompt,omitempty"`
	NominalOutput int     `json:"nominal_output,omitempty"`
	RangeRatio    float64 `json:"-"`

	TTFTMs Latency `json:"ttft_ms"`
	TPOTMs Latency `json:"tpot_ms"`
	ITLMs  Latency `json:"itl_ms"`
	E2EMs  Latency `json:"e2e_ms"`
	// Throughputs over the run (NaN: not reported).
	OutputTokensPerS float64 `json:"-"`
	TotalTokensPerS  float64 `json:"-"`
	RequestsPerS     float64 `json:"-"`

	// SpecAcceptLength is the mean tokens a decode step yielded per
	// sequence, as the client read it off a server that decoded
	// speculatively (vllm bench serve's spec_decode_acceptance_length,
	// SGLang bench_serving's accept_length); 0 where the file reports none.
	SpecAcceptLength float64 `json:"spec_accept_length,omitempty"`

	// Requests, when the file records them, in send order.
	Requests []MeasuredRequest `json:"-"`
	// Notes say what was inferred rather than read.
	Notes []string `json:"notes,omitempty"`
}

// MarshalJSON writes the throughputs with NaN as null.
func (m Measured) MarshalJSON() ([]byte, error) {
	type plain Measured
	b, err := json.Marshal(plain(m))
	if err != nil {
		return nil, err
	}
	extra := fmt.Sprintf(`,"output_tokens_per_s":%s,"total_tokens_per_s":%s,"requests_per_s":%s,"per_request":%d}`,
		jsonNum(m.OutputTokensPerS), jsonNum(m.TotalTokensPerS), jsonNum(m.RequestsPerS), len(m.Requests))
	return append(b[:len(b)-1], extra...), nil
}

// Label names the level's load: "concurrency 16", "qps 2 (max
// concurrency 8)", "all at once", "recorded arrivals".
func (m *Measured) Label() string {
	switch {
	case m.QPS > 0 && m.Concurrency > 0:
		return fmt.Sprintf("qps %s, max concurrency %d", strconv.FormatFloat(m.QPS, 'g', 4, 64), m.Concurrency)
	case m.QPS > 0:
		return "qps " + strconv.FormatFloat(m.QPS, 'g', 4, 64)
	case m.Concurrency > 0:
		return fmt.Sprintf("concurrency %d", m.Concurrency)
	case m.ArrivalsRecorded:
		return "recorded arrivals"
	}
	return "all at once"
}

// MeanPrompt and MeanOutput are the mean lengths of the completed
// requests.
func (m *Measured) MeanPrompt() float64 {
	return float64(m.PromptTokens) / float64(max(1, m.Completed))
}
func (m *Measured) MeanOutput() float64 {
	return float64(m.OutputTokens) / float64(max(1, m.Completed))
}

// maxBenchFileBytes bounds a result file (256 MiB: a detailed vllm result
// of 100,000 requests is well under).
const maxBenchFileBytes = 256 << 20

// LoadMeasured reads a benchmark result file (ReadMeasured).
func LoadMeasured(path string) ([]Measured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("benchmark result: %w", err)
	}
	defer f.Close()
	return ReadMeasured(f, path)
}

// ReadMeasured reads the load levels of a serving benchmark result named
// name, detecting its format (BenchFormat) from its keys: a JSON object,
// a JSON array of objects, or JSON lines. Every level is checked before
// any is returned: a malformed file, an unknown format or a field of the
// wrong type is one *ParseError naming the file, the line and the field.
func ReadMeasured(r io.Reader, name string) ([]Measured, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBenchFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > maxBenchFileBytes {
		return nil, &ParseError{File: name, Line: 1, Err: fmt.Errorf("file larger than %d bytes", maxBenchFileBytes)}
	}
	data = pythonJSON(data)
	trim := bytes.TrimSpace(data)
	if len(trim) == 0 {
		return nil, &ParseError{File: name, Line: 1, Err: errors.New("empty file: want a serving benchmark result (JSON)")}
	}
	var recs []record
	switch trim[0] {
	case '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(trim, &m); err == nil {
			recs = []record{{obj: m, line: 1}}
			break
		}
		if recs, err = jsonLines(data, name); err != nil {
			return nil, err
		}
	case '[':
		var arr []map[string]json.RawMessage
		if err := json.Unmarshal(trim, &arr); err != nil {
			return nil, &ParseError{File: name, Line: lineOf(data, err), Err: fmt.Errorf("want a JSON array of result objects%s", jsonWhy(err))}
		}
		for i, m := range arr {
			recs = append(recs, record{obj: m, line: 1, index: i + 1})
		}
	default:
		return nil, &ParseError{File: name, Line: 1, Err: fmt.Errorf("not JSON (starts with %s): want vllm bench serve --save-result JSON, SGLang bench_serving JSONL, aiperf profile_export_aiperf.json, GuideLLM benchmarks.json or a request log", shorten(string(trim[:min(len(trim), 20)])))}
	}
	if len(recs) == 0 {
		return nil, &ParseError{File: name, Line: 1, Err: errors.New("no result record")}
	}
	// A request log is one level over all its lines.
	if isRequestLog(recs[0].obj) {
		m, err := readRequestLog(recs, name)
		if err != nil {
			return nil, err
		}
		return []Measured{*m}, nil
	}
	var out []Measured
	for _, rec := range recs {
		ms, err := readRecord(rec, name)
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	for i := range out {
		if err := out[i].validate(); err != nil {
			return nil, &ParseError{File: name, Line: out[i].Record, Err: err}
		}
	}
	return out, nil
}

// record is one JSON object of a result file and where it is.
type record struct {
	obj   map[string]json.RawMessage
	line  int
	index int // in a top-level array (1-based), 0 otherwise
}

// jsonLines splits data into one object per non-blank line.
func jsonLines(data []byte, name string) ([]record, error) {
	var out []record
	for i, ln := range bytes.Split(data, []byte("\n")) {
		ln = bytes.TrimSpace(ln)
		if len(ln) == 0 {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(ln, &m); err != nil {
			return nil, &ParseError{File: name, Line: i + 1, Err: fmt.Errorf("want one JSON object per line%s", jsonWhy(err))}
		}
		out = append(out, record{obj: m, line: i + 1})
	}
	return out, nil
}

// jsonWhy is ": " and a JSON syntax error's own words, or "" for any
// other error (a type mismatch, whose words name Go types).
func jsonWhy(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return ": " + se.Error()
	}
	return ""
}

// lineOf is the 1-based line of a JSON syntax error's offset.
func lineOf(data []byte, err error) int {
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Offset <= int64(len(data)) {
		return 1 + bytes.Count(data[:se.Offset], []byte("\n"))
	}
	return 1
}

// pythonJSON rewrites the non-JSON numbers Python's json module writes
// (NaN, Infinity, -Infinity) outside strings as null, so that a
// benchmark's infinite request rate reads as "not a rate".
func pythonJSON(data []byte) []byte {
	if !bytes.Contains(data, []byte("NaN")) && !bytes.Contains(data, []byte("Infinity")) {
		return data
	}
	out := make([]byte, 0, len(data))
	inStr, esc := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inStr {
			out = append(out, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
			out = append(out, c)
			continue
		}
		matched := false
		for _, tok := range []string{"-Infinity", "Infinity", "NaN"} {
			if bytes.HasPrefix(data[i:], []byte(tok)) {
				out = append(out, "null"...)
				i += len(tok) - 1
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, c)
		}
	}
	return out
}

// fields reads typed values out of one record, naming the field in its
// errors.
type fields struct {
	m     map[string]json.RawMessage
	file  string
	line  int
	where string // a prefix of field names ("metrics.")
}

func (f fields) err(key string, e error) error {
	return &ParseError{File: f.file, Line: f.line, Field: f.where + key, Err: e}
}

func (f fields) has(key string) bool {
	v, ok := f.m[key]
	return ok && string(bytes.TrimSpace(v)) != "null"
}

// num reads a number (a string holding one, or "inf", is accepted);
// missing or null gives NaN.
func (f fields) num(key string) (float64, error) {
	raw, ok := f.m[key]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return math.NaN(), nil
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err == nil {
		return v, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		s = strings.TrimSpace(strings.ToLower(s))
		if s == "inf" || s == "infinity" {
			return math.Inf(1), nil
		}
		if v, err := strconv.ParseFloat(s, 64); err == nil {
			return v, nil
		}
	}
	return 0, f.err(key, fmt.Errorf("want a number, got %s", shortenJSON(raw)))
}

// str reads a string; missing gives "".
func (f fields) str(key string) (string, error) {
	raw, ok := f.m[key]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var v float64
		if json.Unmarshal(raw, &v) == nil {
			return strconv.FormatFloat(v, 'g', -1, 64), nil
		}
		return "", f.err(key, fmt.Errorf("want a string, got %s", shortenJSON(raw)))
	}
	return s, nil
}

// obj reads a nested object; missing gives ok false.
func (f fields) obj(key string) (fields, bool, error) {
	raw, ok := f.m[key]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return fields{}, false, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fields{}, false, f.err(key, fmt.Errorf("want an object, got %s", shortenJSON(raw)))
	}
	return fields{m: m, file: f.file, line: f.line, where: f.where + key + "."}, true, nil
}

// nums reads a list of numbers (null entries are NaN); missing gives nil.
func (f fields) nums(key string) ([]float64, error) {
	raw, ok := f.m[key]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var v []*float64
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, f.err(key, fmt.Errorf("want a list of numbers, got %s", shortenJSON(raw)))
	}
	out := make([]float64, len(v))
	for i, p := range v {
		out[i] = math.NaN()
		if p != nil {
			out[i] = *p
		}
	}
	return out, nil
}

// latency reads prefix+{mean,median,p50,p90,p99}+suffix, scaled by
// scale (to ms).
func (f fields) latency(prefix, suffix string, scale float64) (Latency, error) {
	l := nanLatency()
	for _, k := range []struct {
		name string
		dst  *float64
	}{{"mean", &l.Mean}, {"median", &l.P50}, {"p50", &l.P50}, {"p90", &l.P90}, {"p99", &l.P99}} {
		v, err := f.num(k.name + "_" + prefix + suffix)
		if err != nil {
			return l, err
		}
		if !math.IsNaN(v) {
			*k.dst = v * scale
		}
	}
	return l, nil
}

// isRequestLog reports whether a record is one request of a server log.
func isRequestLog(m map[string]json.RawMessage) bool {
	_, a := m["first_token_ts"]
	_, b := m["input_toks"]
	return a && b
}

// readRecord reads one record in the format its keys show.
func readRecord(rec record, name string) ([]Measured, error) {
	f := fields{m: rec.obj, file: name, line: rec.line}
	var m *Measured
	var err error
	switch {
	case f.has("benchmarks"):
		return readGuideLLM(f)
	case f.has("metrics") && isInferenceX(f):
		m, err = readInferenceX(f)
	case f.has("time_to_first_token") || f.has("records"):
		m, err = readAIPerf(f)
	case f.has("mean_e2e_latency_ms") || f.has("median_e2e_latency_ms"):
		m, err = readVLLMLike(f, FormatSGLang)
	case f.has("median_ttft_ms") || f.has("mean_ttft_ms") || f.has("ttfts"):
		m, err = readVLLMLike(f, FormatVLLM)
	case f.has("median_ttft") || f.has("mean_ttft"):
		m, err = readSecondsSummary(f)
	default:
		keys := make([]string, 0, len(rec.obj))
		for k := range rec.obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) > 6 {
			keys = append(keys[:6], "...")
		}
		return nil, &ParseError{File: name, Line: rec.line, Err: fmt.Errorf("not a serving benchmark result: no median_ttft_ms (vllm bench serve), mean_e2e_latency_ms (SGLang bench_serving), time_to_first_token (aiperf), benchmarks (GuideLLM) or first_token_ts (request log); keys: %s", strings.Join(keys, ", "))}
	}
	if err != nil {
		return nil, err
	}
	m.File, m.Record = name, rec.line
	if rec.index > 0 {
		m.Record = rec.index
	}
	return []Measured{*m}, nil
}

// validate checks what a comparison needs: completed requests, a
// duration, token totals and a TTFT or throughput to compare.
func (m *Measured) validate() error {
	switch {
	case m.Completed < 1:
		return fmt.Errorf("%s: %d completed requests: want at least 1", m.Format, m.Completed)
	case !(m.DurationS > 0) || math.IsInf(m.DurationS, 0):
		return fmt.Errorf("%s: duration %v s: want a positive time", m.Format, m.DurationS)
	case m.PromptTokens < int64(m.Completed) || m.OutputTokens < int64(m.Completed):
		return fmt.Errorf("%s: %d prompt and %d output tokens over %d requests: want at least one of each per request", m.Format, m.PromptTokens, m.OutputTokens, m.Completed)
	case m.MeanPrompt() > maxLengthTokens || m.MeanOutput() > maxLengthTokens:
		return fmt.Errorf("%s: mean lengths %.0f / %.0f tokens: want at most %d", m.Format, m.MeanPrompt(), m.MeanOutput(), maxLengthTokens)
	case m.Concurrency < 0 || m.Concurrency > 1<<20:
		return fmt.Errorf("%s: max concurrency %d: want 1 to %d", m.Format, m.Concurrency, 1<<20)
	case m.QPS < 0 || math.IsNaN(m.QPS) || m.QPS > 1e7:
		return fmt.Errorf("%s: request rate %v: want a rate up to 1e7 per second", m.Format, m.QPS)
	case m.Completed > maxRequests:
		return fmt.Errorf("%s: %d requests: want at most %d", m.Format, m.Completed, maxRequests)
	}
	for _, l := range []Latency{m.TTFTMs, m.TPOTMs, m.ITLMs, m.E2EMs} {
		for _, v := range []float64{l.Mean, l.P50, l.P90, l.P99} {
			if !math.IsNaN(v) && (v < 0 || math.IsInf(v, 0)) {
				return fmt.Errorf("%s: a latency of %v ms: want finite and >= 0", m.Format, v)
			}
		}
	}
	for i, r := range m.Requests {
		if r.PromptTokens < 1 || r.OutputTokens < 1 || r.PromptTokens > maxLengthTokens || r.OutputTokens > maxLengthTokens {
			return fmt.Errorf("%s: request %d: %d prompt and %d output tokens: want 1 to %d each", m.Format, i, r.PromptTokens, r.OutputTokens, maxLengthTokens)
		}
		if !math.IsNaN(r.SentS) && (r.SentS < 0 || math.IsInf(r.SentS, 0)) {
			return fmt.Errorf("%s: request %d: sent at %v s: want a finite time >= 0", m.Format, i, r.SentS)
		}
	}
	return nil
}

// newMeasured is a level with every optional number unknown.
func newMeasured(format BenchFormat) *Measured {
	return &Measured{Format: format, RangeRatio: math.NaN(), TTFTMs: nanLatency(), TPOTMs: nanLatency(), ITLMs: nanLatency(), E2EMs: nanLatency(),
		OutputTokensPerS: math.NaN(), TotalTokensPerS: math.NaN(), RequestsPerS: math.NaN(), Burstiness: 1}
}

// intOf converts a count read as a number: NaN reads as 0.
func intOf(f fields, key string, v float64) (int, error) {
	if math.IsNaN(v) {
		return 0, nil
	}
	if v < 0 || v > 1<<40 || v != math.Trunc(v) {
		return 0, f.err(key, fmt.Errorf("want a count, got %v", v))
	}
	return int(v), nil
}

// readNums reads several numbers at once, stopping at the first error.
func readNums(f fields, keys ...string) ([]float64, error) {
	out := make([]float64, len(keys))
	for i, k := range keys {
		v, err := f.num(k)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// vllmLikeRequired are the figures vllm bench serve and SGLang
// bench_serving write in every result: one missing is a file cut or
// edited, not a run of 0 requests or of NaN seconds, which is what
// validate would otherwise say of the zero it reads as. (A detailed
// result's per-request lists count its completed requests.)
var vllmLikeRequired = []struct{ key, what string }{
	{"duration", "the run's duration in seconds"},
	{"completed", "the count of completed requests"},
	{"total_input_tokens", "the total of prompt tokens"},
	{"total_output_tokens", "the total of output tokens"},
}

// readVLLMLike reads vllm bench serve's and SGLang bench_serving's
// results (the same lineage: SGLang's client is an adaptation of vllm's).
func readVLLMLike(f fields, format BenchFormat) (*Measured, error) {
	m := newMeasured(format)
	var err error
	if m.Model, err = f.str("model_id"); err != nil {
		return nil, err
	}
	if m.Engine, err = f.str("backend"); err != nil {
		return nil, err
	}
	v, err := readNums(f, "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
		"total_input_tokens", "total_output_tokens", "output_throughput", "request_throughput", "random_input_len", "random_output_len", "random_range_ratio")
	if err != nil {
		return nil, err
	}
	if q := v[0]; q > 0 && !math.IsInf(q, 1) {
		m.QPS = q
	}
	if !math.IsNaN(v[1]) {
		m.Burstiness = v[1]
	}
	if m.Concurrency, err = intOf(f, "max_concurrency", v[2]); err != nil {
		return nil, err
	}
	m.DurationS = v[3]
	if m.Completed, err = intOf(f, "completed", v[4]); err != nil {
		return nil, err
	}
	if m.Failed, err = intOf(f, "failed", v[5]); err != nil {
		return nil, err
	}
	pt, err := intOf(f, "total_input_tokens", v[6])
	if err != nil {
		return nil, err
	}
	ot, err := intOf(f, "total_output_tokens", v[7])
	if err != nil {
		return nil, err
	}
	m.PromptTokens, m.OutputTokens = int64(pt), int64(ot)
	m.OutputTokensPerS, m.RequestsPerS = v[8], v[9]
	if tt, err := f.num("total_token_throughput"); err != nil {
		return nil, err
	} else if !math.IsNaN(tt) {
		m.TotalTokensPerS = tt
	} else if tt, err := f.num("total_throughput"); err != nil {
		return nil, err
	} else {
		m.TotalTokensPerS = tt
	}
	if format == FormatSGLang {
		if m.NominalPrompt, err = intOf(f, "random_input_len", v[10]); err != nil {
			return nil, err
		}
		if m.NominalOutput, err = intOf(f, "random_output_len", v[11]); err != nil {
			return nil, err
		}
		ds, err := f.str("dataset_name")
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(ds, "random") && !math.IsNaN(v[12]) && v[12] >= 0 && v[12] <= 1 {
			m.RangeRatio = v[12]
		} else {
			m.NominalPrompt, m.NominalOutput = 0, 0
		}
	}
	e2eKey := "e2el"
	if format == FormatSGLang {
		e2eKey = "e2e_latency"
	}
	for _, l := range []struct {
		key string
		dst *Latency
	}{{"ttft", &m.TTFTMs}, {"tpot", &m.TPOTMs}, {"itl", &m.ITLMs}, {e2eKey, &m.E2EMs}} {
		if *l.dst, err = f.latency(l.key, "_ms", 1); err != nil {
			return nil, err
		}
	}
	// A speculating server's mean acceptance length, which each client
	// writes under its own key (vllm: benchmarks/serve.py
	// _add_spec_decode_result; SGLang: bench_serving.py from the server's
	// avg_spec_accept_length, null when the server does not speculate).
	specKey := "spec_decode_acceptance_length"
	if format == FormatSGLang {
		specKey = "accept_length"
	}
	if l, err := f.num(specKey); err != nil {
		return nil, err
	} else if !math.IsNaN(l) {
		if !(l >= 1) || math.IsInf(l, 0) {
			return nil, f.err(specKey, fmt.Errorf("want a mean acceptance length of at least 1 token a step, got %v", l))
		}
		m.SpecAcceptLength = l
	}
	if err := readVLLMDetails(f, m); err != nil {
		return nil, err
	}
	if m.Completed == 0 && len(m.Requests) > 0 {
		m.Completed = len(m.Requests)
	}
	for _, r := range vllmLikeRequired {
		if !f.has(r.key) && !(r.key == "completed" && len(m.Requests) > 0) {
			return nil, f.err(r.key, fmt.Errorf("missing: want %s, which %s writes in every result", r.what, format))
		}
	}
	return m, nil
}

// readVLLMDetails reads the per-request lists of a detailed result
// (--save-detailed, --output-details): the successful requests (error
// "") with their lengths, TTFT, inter-token gaps and latency, and
// recomputes every statistic the summary leaves out the way vllm does
// (TPOT = (latency - TTFT) / (output - 1) for outputs over one token; ITL
// over every gap).
func readVLLMDetails(f fields, m *Measured) error {
	ttfts, err := f.nums("ttfts")
	if err != nil || ttfts == nil {
		return err
	}
	in, err := f.nums("input_lens")
	if err != nil {
		return err
	}
	out, err := f.nums("output_lens")
	if err != nil {
		return err
	}
	lat, err := f.nums("latencies")
	if err != nil {
		return err
	}
	starts, err := f.nums("start_times")
	if err != nil {
		return err
	}
	var itls [][]float64
	if raw, ok := f.m["itls"]; ok {
		if err := json.Unmarshal(raw, &itls); err != nil {
			return f.err("itls", fmt.Errorf("want a list of lists of seconds, got %s", shortenJSON(raw)))
		}
	}
	var errs []string
	if raw, ok := f.m["errors"]; ok {
		if err := json.Unmarshal(raw, &errs); err != nil {
			return f.err("errors", fmt.Errorf("want a list of strings, got %s", shortenJSON(raw)))
		}
	}
	n := len(ttfts)
	for _, l := range []struct {
		key string
		n   int
	}{{"input_lens", len(in)}, {"output_lens", len(out)}, {"itls", len(itls)}, {"latencies", len(lat)}, {"start_times", len(starts)}, {"errors", len(errs)}} {
		if l.n != 0 && l.n != n {
			return f.err(l.key, fmt.Errorf("%d entries for %d ttfts: want one per request", l.n, n))
		}
	}
	if len(in) == 0 || len(out) == 0 {
		return f.err("input_lens", errors.New("per-request ttfts without input_lens and output_lens"))
	}
	t0 := math.Inf(1)
	for _, s := range starts {
		t0 = math.Min(t0, s)
	}
	var ttft, tpot, itl, e2e []float64
	for i := 0; i < n; i++ {
		if (len(errs) > 0 && errs[i] != "") || math.IsNaN(ttfts[i]) || !(out[i] >= 1) || !(in[i] >= 1) {
			continue
		}
		l := ttfts[i]
		if len(itls) > 0 {
			for _, g := range itls[i] {
				l += g
				itl = append(itl, g*1e3)
			}
		}
		if len(lat) > 0 && !math.IsNaN(lat[i]) {
			l = lat[i]
		}
		ttft = append(ttft, ttfts[i]*1e3)
		e2e = append(e2e, l*1e3)
		if out[i] > 1 {
			tpot = append(tpot, (l-ttfts[i])/(out[i]-1)*1e3)
		}
		r := MeasuredRequest{SentS: math.NaN(), PromptTokens: int(in[i]), OutputTokens: int(out[i]), TTFTMs: ttfts[i] * 1e3, E2EMs: l * 1e3}
		if len(starts) > 0 {
			r.SentS = starts[i] - t0
		}
		m.Requests = append(m.Requests, r)
	}
	m.TTFTMs.fill(latencyOf(ttft))
	m.TPOTMs.fill(latencyOf(tpot))
	m.E2EMs.fill(latencyOf(e2e))
	if len(itl) > 0 {
		m.ITLMs.fill(latencyOf(itl))
	}
	if m.PromptTokens == 0 || m.OutputTokens == 0 {
		for _, r := range m.Requests {
			m.PromptTokens += int64(r.PromptTokens)
			m.OutputTokens += int64(r.OutputTokens)
		}
	}
	if len(starts) > 0 && m.QPS > 0 {
		// An open loop's send times are the load itself.
		m.ArrivalsRecorded = true
	}
	return nil
}

// readSecondsSummary reads vllm's summary keys in seconds (InferenceX's
// token-position client).
func readSecondsSummary(f fields) (*Measured, error) {
	m, err := readVLLMLike(f, FormatSecondsSummary)
	if err != nil {
		return nil, err
	}
	for _, l := range []struct {
		key string
		dst *Latency
	}{{"ttft", &m.TTFTMs}, {"tpot", &m.TPOTMs}, {"itl", &m.ITLMs}, {"e2el", &m.E2EMs}} {
		if *l.dst, err = f.latency(l.key, "", 1e3); err != nil {
			return nil, err
		}
	}
	if it, err := f.num("input_throughput"); err != nil {
		return nil, err
	} else if !math.IsNaN(it) && !math.IsNaN(m.OutputTokensPerS) {
		m.TotalTokensPerS = it + m.OutputTokensPerS
	}
	return m, nil
}

// isInferenceX reports whether a record is an InferenceX run summary.
func isInferenceX(f fields) bool {
	mf, ok, err := f.obj("metrics")
	return err == nil && ok && (mf.has("median_ttft_ms") || mf.has("output_token_throughput")) && (f.has("framework") || f.has("hw") || f.has("conc"))
}

// readInferenceX reads an InferenceX summary: the lengths are the nominal
// isl/osl, and the means come from the throughputs (tokens/s over
// requests/s), since random datasets draw around the nominal lengths.
func readInferenceX(f fields) (*Measured, error) {
	m := newMeasured(FormatInferenceX)
	var err error
	if m.Model, err = f.str("model"); err != nil {
		return nil, err
	}
	if m.Engine, err = f.str("framework"); err != nil {
		return nil, err
	}
	if m.GPU, err = f.str("hw"); err != nil {
		return nil, err
	}
	v, err := readNums(f, "isl", "osl", "conc", "tp", "ep", "dp")
	if err != nil {
		return nil, err
	}
	for i, k := range []struct {
		key string
		dst *int
	}{{"tp", &m.TP}, {"ep", &m.EP}, {"dp", &m.DP}} {
		if *k.dst, err = intOf(f, k.key, v[3+i]); err != nil {
			return nil, err
		}
	}
	if g, ok, err := f.obj("gpu"); err != nil {
		return nil, err
	} else if ok {
		n, err := g.num("n_gpus")
		if err != nil {
			return nil, err
		}
		if m.GPUs, err = intOf(g, "n_gpus", n); err != nil {
			return nil, err
		}
	}
	if m.NominalPrompt, err = intOf(f, "isl", v[0]); err != nil {
		return nil, err
	}
	if m.NominalOutput, err = intOf(f, "osl", v[1]); err != nil {
		return nil, err
	}
	if m.Concurrency, err = intOf(f, "conc", v[2]); err != nil {
		return nil, err
	}
	// An InferenceX run is a closed loop of conc clients: without them
	// the level's load would be a guess (all at once).
	if m.Concurrency < 1 {
		got := fmt.Sprintf("got %d", m.Concurrency)
		if !f.has("conc") {
			got = "it is missing"
		}
		return nil, f.err("conc", fmt.Errorf("want the run's client count, 1 or more (InferenceX runs a closed loop of conc clients); %s", got))
	}
	if err := checkRecordedPlan(f, m); err != nil {
		return nil, err
	}
	mf, _, err := f.obj("metrics")
	if err != nil {
		return nil, err
	}
	keys := []string{"successful_requests", "total_token_throughput", "output_token_throughput", "request_throughput"}
	// The level's requests, duration and token totals come from these
	// four: one missing is a file cut or edited, named as such rather
	// than as 0 requests or a NaN rate under another field's name.
	for _, k := range keys {
		if !mf.has(k) {
			return nil, mf.err(k, errors.New("missing: want it, as InferenceX writes it in every run summary (the level's requests, duration and token totals come from it)"))
		}
	}
	w, err := readNums(mf, keys...)
	if err != nil {
		return nil, err
	}
	if m.Completed, err = intOf(mf, "successful_requests", w[0]); err != nil {
		return nil, err
	}
	m.TotalTokensPerS, m.OutputTokensPerS, m.RequestsPerS = w[1], w[2], w[3]
	if !(m.RequestsPerS > 0) || !(m.OutputTokensPerS > 0) || !(m.TotalTokensPerS >= m.OutputTokensPerS) {
		return nil, mf.err("request_throughput", fmt.Errorf("request %v/s, output %v and total %v tokens/s: want positive rates, total >= output", m.RequestsPerS, m.OutputTokensPerS, m.TotalTokensPerS))
	}
	m.DurationS = float64(m.Completed) / m.RequestsPerS
	m.OutputTokens = int64(math.Round(m.OutputTokensPerS * m.DurationS))
	m.PromptTokens = int64(math.Round((m.TotalTokensPerS - m.OutputTokensPerS) * m.DurationS))
	m.Notes = append(m.Notes, fmt.Sprintf("duration and token totals from the throughputs: %.1f s, mean %.0f prompt and %.0f output tokens (nominal %d / %d)",
		m.DurationS, m.MeanPrompt(), m.MeanOutput(), m.NominalPrompt, m.NominalOutput))
	for _, l := range []struct {
		key string
		dst *Latency
	}{{"ttft", &m.TTFTMs}, {"tpot", &m.TPOTMs}, {"itl", &m.ITLMs}, {"e2el", &m.E2EMs}} {
		if *l.dst, err = mf.latency(l.key, "_ms", 1); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// aiperfMetric reads an aiperf metric object's statistics in its own
// unit (a count, a rate); aiperfTime reads a time's.
func aiperfMetric(f fields, key string) (Latency, float64, error) {
	o, ok, err := f.obj(key)
	if err != nil || !ok {
		return nanLatency(), math.NaN(), err
	}
	l, err := aiperfStats(o)
	return l, l.Mean, err
}

// aiperfStats are a metric object's avg, p50, p90 and p99 in its own unit.
func aiperfStats(o fields) (Latency, error) {
	v, err := readNums(o, "avg", "p50", "p90", "p99")
	if err != nil {
		return nanLatency(), err
	}
	return Latency{v[0], v[1], v[2], v[3]}, nil
}

// aiperfTime reads an aiperf time metric's statistics in ms, from the
// unit it records (aiperf's MetricTimeUnit: ns, us, ms, sec). A unit it
// does not name is refused: read as ms, a time in seconds was taken as
// a thousandth of itself (and benchmark_duration, read as seconds
// whatever its unit, the other way).
func aiperfTime(f fields, key string) (Latency, error) {
	o, ok, err := f.obj(key)
	if err != nil || !ok {
		return nanLatency(), err
	}
	unit, err := o.str("unit")
	if err != nil {
		return nanLatency(), err
	}
	var msPer float64
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "ns":
		msPer = 1e-6
	case "us":
		msPer = 1e-3
	case "ms":
		msPer = 1
	case "s", "sec":
		msPer = 1e3
	default:
		got := "missing"
		if unit != "" {
			got = strconv.Quote(unit)
		}
		return nanLatency(), o.err("unit", fmt.Errorf("%s, want a time unit: ns, us, ms or sec", got))
	}
	l, err := aiperfStats(o)
	return Latency{l.Mean * msPer, l.P50 * msPer, l.P90 * msPer, l.P99 * msPer}, err
}

// readAIPerf reads aiperf's aggregate export.
func readAIPerf(f fields) (*Measured, error) {
	m := newMeasured(FormatAIPerf)
	body := f
	if r, ok, err := f.obj("records"); err != nil {
		return nil, err
	} else if ok {
		body = r
	}
	var err error
	if m.TTFTMs, err = aiperfTime(body, "time_to_first_token"); err != nil {
		return nil, err
	}
	if m.TPOTMs, err = aiperfTime(body, "inter_token_latency"); err != nil {
		return nil, err
	}
	if m.E2EMs, err = aiperfTime(body, "request_latency"); err != nil {
		return nil, err
	}
	var avg float64
	for _, k := range []struct {
		key string
		dst *float64
	}{{"output_token_throughput", &m.OutputTokensPerS}, {"request_throughput", &m.RequestsPerS}, {"total_token_throughput", &m.TotalTokensPerS}} {
		if _, avg, err = aiperfMetric(body, k.key); err != nil {
			return nil, err
		}
		*k.dst = avg
	}
	if !body.has("request_count") {
		// Missing, the count is a file cut or edited, not 0 requests.
		return nil, body.err("request_count", errors.New("missing: want the count of completed requests, which aiperf writes in every export"))
	}
	if _, avg, err = aiperfMetric(body, "request_count"); err != nil {
		return nil, err
	}
	if m.Completed, err = intOf(body, "request_count", avg); err != nil {
		return nil, err
	}
	dur, err := aiperfTime(body, "benchmark_duration")
	if err != nil {
		return nil, err
	}
	m.DurationS = dur.Mean / 1e3
	for _, k := range []struct {
		total, mean string
		dst         *int64
	}{{"total_isl", "input_sequence_length", &m.PromptTokens}, {"total_osl", "output_sequence_length", &m.OutputTokens}} {
		_, t, err := aiperfMetric(body, k.total)
		if err != nil {
			return nil, err
		}
		if math.IsNaN(t) {
			_, mean, err := aiperfMetric(body, k.mean)
			if err != nil {
				return nil, err
			}
			if math.IsNaN(mean) {
				return nil, body.err(k.total, fmt.Errorf("missing, and so is %s: want the requests' token total or mean length, which aiperf writes", k.mean))
			}
			t = mean * float64(m.Completed)
		}
		if !math.IsNaN(t) {
			*k.dst = int64(math.Round(t))
		}
	}
	if math.IsNaN(m.DurationS) && m.RequestsPerS > 0 {
		m.DurationS = float64(m.Completed) / m.RequestsPerS
	}
	if ic, ok, err := f.obj("input_config"); err != nil {
		return nil, err
	} else if ok {
		if lg, ok, err := ic.obj("loadgen"); err != nil {
			return nil, err
		} else if ok {
			v, err := readNums(lg, "concurrency", "request_rate")
			if err != nil {
				return nil, err
			}
			if m.Concurrency, err = intOf(lg, "concurrency", v[0]); err != nil {
				return nil, err
			}
			if v[1] > 0 && !math.IsInf(v[1], 0) {
				m.QPS = v[1]
			}
		}
		if ep, ok, err := ic.obj("endpoint"); err != nil {
			return nil, err
		} else if ok {
			if raw, ok := ep.m["model_names"]; ok {
				var names []string
				if json.Unmarshal(raw, &names) == nil && len(names) > 0 {
					m.Model = names[0]
				}
			}
		}
	}
	return m, nil
}

// guideDist reads a GuideLLM status distribution's successful requests:
// mean, median and the p50/p90/p99 percentiles, scaled; and its count
// and sum.
func guideDist(f fields, key string, scale float64) (l Latency, count, sum float64, err error) {
	l = nanLatency()
	count, sum = math.NaN(), math.NaN()
	d, ok, err := f.obj(key)
	if err != nil || !ok {
		return l, count, sum, err
	}
	s, ok, err := d.obj("successful")
	if err != nil || !ok {
		return l, count, sum, err
	}
	v, err := readNums(s, "mean", "median", "count", "total_sum")
	if err != nil {
		return l, count, sum, err
	}
	l.Mean, l.P50 = v[0]*scale, v[1]*scale
	count, sum = v[2], v[3]
	if p, ok, err := s.obj("percentiles"); err != nil {
		return l, count, sum, err
	} else if ok {
		w, err := readNums(p, "p50", "p90", "p99")
		if err != nil {
			return l, count, sum, err
		}
		if !math.IsNaN(w[0]) {
			l.P50 = w[0] * scale
		}
		l.P90, l.P99 = w[1]*scale, w[2]*scale
	}
	return l, count, sum, nil
}

// readGuideLLM reads every benchmark of a GuideLLM report.
func readGuideLLM(f fields) ([]Measured, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(f.m["benchmarks"], &list); err != nil {
		return nil, f.err("benchmarks", fmt.Errorf("want a list of benchmarks, got %s", shortenJSON(f.m["benchmarks"])))
	}
	if len(list) == 0 {
		return nil, f.err("benchmarks", errors.New("empty list"))
	}
	var out []Measured
	for i, raw := range list {
		var bm map[string]json.RawMessage
		where := fmt.Sprintf("benchmarks[%d].", i)
		if err := json.Unmarshal(raw, &bm); err != nil {
			return nil, &ParseError{File: f.file, Line: f.line, Field: where, Err: fmt.Errorf("want an object, got %s", shortenJSON(raw))}
		}
		b := fields{m: bm, file: f.file, line: f.line, where: where}
		m := newMeasured(FormatGuideLLM)
		m.File, m.Record = f.file, i+1
		if err := guideStrategy(b, m); err != nil {
			return nil, err
		}
		mt, ok, err := b.obj("metrics")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, b.err("metrics", errors.New("missing"))
		}
		if m.TTFTMs, _, _, err = guideDist(mt, "time_to_first_token_ms", 1); err != nil {
			return nil, err
		}
		if m.TPOTMs, _, _, err = guideDist(mt, "time_per_output_token_ms", 1); err != nil {
			return nil, err
		}
		if m.ITLMs, _, _, err = guideDist(mt, "inter_token_latency_ms", 1); err != nil {
			return nil, err
		}
		if m.E2EMs, _, _, err = guideDist(mt, "request_latency", 1e3); err != nil {
			return nil, err
		}
		var l Latency
		var n, sum float64
		// The token counts are the level's completed requests and its
		// lengths: missing, they are a file cut or edited, not a level of
		// 0 requests (as validate would say of the zero they read as).
		for _, k := range []string{"prompt_token_count", "output_token_count"} {
			if !mt.has(k) {
				return nil, mt.err(k, errors.New("missing: want the successful requests' token counts, which GuideLLM writes in every benchmark"))
			}
		}
		if _, n, sum, err = guideDist(mt, "prompt_token_count", 1); err != nil {
			return nil, err
		}
		if m.Completed, err = intOf(mt, "prompt_token_count.successful.count", n); err != nil {
			return nil, err
		}
		if !math.IsNaN(sum) {
			m.PromptTokens = int64(math.Round(sum))
		}
		if _, _, sum, err = guideDist(mt, "output_token_count", 1); err != nil {
			return nil, err
		}
		if !math.IsNaN(sum) {
			m.OutputTokens = int64(math.Round(sum))
		}
		if l, _, _, err = guideDist(mt, "output_tokens_per_second", 1); err != nil {
			return nil, err
		}
		m.OutputTokensPerS = l.Mean
		if l, _, _, err = guideDist(mt, "tokens_per_second", 1); err != nil {
			return nil, err
		}
		m.TotalTokensPerS = l.Mean
		if l, _, _, err = guideDist(mt, "requests_per_second", 1); err != nil {
			return nil, err
		}
		m.RequestsPerS = l.Mean
		if err := guideDuration(b, m); err != nil {
			return nil, err
		}
		out = append(out, *m)
	}
	return out, nil
}

// guideStrategy finds the benchmark's scheduling strategy (under
// config, args or scheduler in the versions seen, or at the top) and sets
// the load: synchronous is one client, concurrent N clients, constant and
// poisson a rate, throughput everything at once.
func guideStrategy(b fields, m *Measured) error {
	var st fields
	found := false
	for _, parent := range []string{"config", "args", "scheduler", ""} {
		p := b
		if parent != "" {
			var ok bool
			var err error
			if p, ok, err = b.obj(parent); err != nil {
				return err
			} else if !ok {
				continue
			}
		}
		if s, ok, err := p.obj("strategy"); err != nil {
			return err
		} else if ok {
			st, found = s, true
			break
		}
	}
	if !found {
		return b.err("config.strategy", errors.New("missing: want the benchmark's strategy (type_ and streams or rate)"))
	}
	typ, err := st.str("type_")
	if err != nil {
		return err
	}
	v, err := readNums(st, "streams", "rate", "max_concurrency")
	if err != nil {
		return err
	}
	switch typ {
	case "synchronous":
		m.Concurrency = 1
	case "concurrent":
		if m.Concurrency, err = intOf(st, "streams", v[0]); err != nil {
			return err
		}
		if m.Concurrency < 1 {
			return st.err("streams", fmt.Errorf("%v: want a positive count of streams", v[0]))
		}
	case "constant", "poisson", "async":
		if !(v[1] > 0) {
			return st.err("rate", fmt.Errorf("%v: want a positive request rate", v[1]))
		}
		m.QPS = v[1]
		if typ == "constant" {
			m.Burstiness = math.Inf(1)
		}
		if c, err := intOf(st, "max_concurrency", v[2]); err == nil && c > 0 {
			m.Concurrency = c
		}
	case "throughput":
		if c, err := intOf(st, "max_concurrency", v[2]); err == nil && c > 0 {
			m.Concurrency = c
		}
	default:
		return st.err("type_", fmt.Errorf("%s: want synchronous, concurrent, constant, poisson or throughput", shorten(typ)))
	}
	return nil
}

// guideDuration is the benchmark's measured span: its run_stats' or
// scheduler metrics' start and end, else requests over their rate.
func guideDuration(b fields, m *Measured) error {
	for _, k := range []struct{ obj, start, end string }{
		{"run_stats", "start_time", "end_time"},
		{"scheduler_metrics", "measure_start_time", "measure_end_time"},
		{"", "start_time", "end_time"},
	} {
		p := b
		if k.obj != "" {
			var ok bool
			var err error
			if p, ok, err = b.obj(k.obj); err != nil {
				return err
			} else if !ok {
				continue
			}
		}
		v, err := readNums(p, k.start, k.end)
		if err != nil {
			return err
		}
		if v[1] > v[0] {
			m.DurationS = v[1] - v[0]
			return nil
		}
	}
	if m.RequestsPerS > 0 {
		m.DurationS = float64(m.Completed) / m.RequestsPerS
		return nil
	}
	return b.err("run_stats", errors.New("no start and end times and no request rate: want the benchmark's duration"))
}

// readRequestLog reads a server's per-request log: TTFT from queueing to
// the first token, end-to-end to the last, sends at the recorded arrival
// times; the level is the whole file.
func readRequestLog(recs []record, name string) (*Measured, error) {
	m := newMeasured(FormatRequestLog)
	m.File, m.Record, m.ArrivalsRecorded = name, 1, true
	type row struct {
		arrival, queued, first, last float64
		in, out                      int
	}
	rows := make([]row, 0, len(recs))
	t0, start, end := math.Inf(1), math.Inf(1), math.Inf(-1)
	for _, rec := range recs {
		f := fields{m: rec.obj, file: name, line: rec.line}
		v, err := readNums(f, "arrival_time", "queued_ts", "first_token_ts", "last_token_ts", "input_toks", "output_toks")
		if err != nil {
			return nil, err
		}
		for i, k := range []string{"arrival_time", "queued_ts", "first_token_ts", "last_token_ts", "input_toks", "output_toks"} {
			if math.IsNaN(v[i]) || math.IsInf(v[i], 0) || v[i] < 0 {
				return nil, f.err(k, fmt.Errorf("want a finite number >= 0, got %v", v[i]))
			}
		}
		if !(v[1] <= v[2] && v[2] <= v[3]) {
			return nil, f.err("first_token_ts", fmt.Errorf("queued %v, first token %v, last token %v: want them in that order", v[1], v[2], v[3]))
		}
		in, err := intOf(f, "input_toks", v[4])
		if err != nil {
			return nil, err
		}
		out, err := intOf(f, "output_toks", v[5])
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{v[0], v[1], v[2], v[3], in, out})
		t0 = math.Min(t0, v[0])
		start, end = math.Min(start, v[1]), math.Max(end, v[3])
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].arrival < rows[j].arrival })
	var ttft, tpot, e2e []float64
	for _, r := range rows {
		mr := MeasuredRequest{SentS: r.arrival - t0, PromptTokens: r.in, OutputTokens: r.out,
			TTFTMs: (r.first - r.queued) * 1e3, E2EMs: (r.last - r.queued) * 1e3}
		m.Requests = append(m.Requests, mr)
		ttft, e2e = append(ttft, mr.TTFTMs), append(e2e, mr.E2EMs)
		if r.out > 1 {
			tpot = append(tpot, (r.last-r.first)/float64(r.out-1)*1e3)
		}
		m.PromptTokens += int64(r.in)
		m.OutputTokens += int64(r.out)
	}
	m.Completed = len(rows)
	m.DurationS = end - start
	m.TTFTMs, m.TPOTMs, m.E2EMs = latencyOf(ttft), latencyOf(tpot), latencyOf(e2e)
	if m.DurationS > 0 {
		m.OutputTokensPerS = float64(m.OutputTokens) / m.DurationS
		m.TotalTokensPerS = float64(m.OutputTokens+m.PromptTokens) / m.DurationS
		m.RequestsPerS = float64(m.Completed) / m.DurationS
	}
	m.Notes = append(m.Notes, "server-side times: TTFT from queueing to the first token, no client or network in them")
	if err := m.validate(); err != nil {
		return nil, &ParseError{File: name, Line: 1, Err: err}
	}
	return m, nil
}

// Traffic is the load that reproduces the level, with a note per choice
// made where the file is silent: the requests' own lengths (in send order)
// when recorded, else the mean lengths (uniform around them when the file
// says or the means say the benchmark drew them, see lengthsOf); the
// recorded send times of an open loop or a log; the rate and burstiness
// of an open loop, the clients of a closed loop; the completed requests'
// count.
func (m *Measured) Traffic(seed uint64) (Traffic, []string, error) {
	t := Traffic{Seed: seed, NumRequests: m.Completed}
	var notes []string
	if m.Burstiness != 1 && !math.IsInf(m.Burstiness, 1) && m.Burstiness > 0 {
		t.Arrival, t.Burstiness = Gamma, m.Burstiness
	} else if math.IsInf(m.Burstiness, 1) {
		t.Arrival = Constant
	}
	t.QPS, t.Concurrency = m.QPS, m.Concurrency
	switch {
	case len(m.Requests) > 0:
		reqs := make([]Request, len(m.Requests))
		recorded := m.ArrivalsRecorded && m.Concurrency == 0
		for i, r := range m.Requests {
			reqs[i] = Request{PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens}
			if recorded {
				reqs[i].ArrivalS = r.SentS
			}
		}
		if recorded {
			sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].ArrivalS < reqs[j].ArrivalS })
			t.QPS = 0
			notes = append(notes, fmt.Sprintf("%d requests sent at their recorded times, with their recorded lengths", len(reqs)))
		} else {
			notes = append(notes, fmt.Sprintf("%d requests with their recorded lengths, in send order", len(reqs)))
		}
		t.Requests = reqs
		t.NumRequests = 0
	default:
		p, pn := m.lengthsOf(true)
		o, on := m.lengthsOf(false)
		t.Prompt, t.Output = p, o
		notes = append(notes, pn, on)
	}
	if t.QPS == 0 && t.Concurrency == 0 && len(t.Requests) == 0 {
		// Every request at once: a trace of simultaneous arrivals.
		r := rand0(t)
		t.Requests = r
		t.NumRequests = 0
		notes = append(notes, fmt.Sprintf("all %d requests sent at time 0 (request rate inf, no max concurrency)", len(r)))
	}
	if err := t.Validate(); err != nil {
		return t, notes, fmt.Errorf("%s record %d: %w", m.File, m.Record, err)
	}
	return t, notes, nil
}

// rand0 draws t's requests (its lengths, by its seed) all arriving at 0.
func rand0(t Traffic) []Request {
	src := newSource(&Traffic{Prompt: t.Prompt, Output: t.Output, Seed: t.Seed, NumRequests: t.NumRequests, Concurrency: 1})
	out := make([]Request, 0, t.NumRequests)
	for {
		r, ok := src.next(0)
		if !ok {
			return out
		}
		out = append(out, r)
	}
}

// lengthsOf is the prompt (or output) length distribution of the level
// and a note saying where it came from: uniform in [L x RangeRatio, L]
// when the file records the range; uniform from 1 (or 2m - L) to the
// nominal L when the mean m is below 95 % of it (a random dataset drawing
// from a range, as InferenceX's range ratio 0 does); else fixed at the
// mean.
func (m *Measured) lengthsOf(prompt bool) (Lengths, string) {
	name, mean, nominal := "prompt", m.MeanPrompt(), m.NominalPrompt
	if !prompt {
		name, mean, nominal = "output", m.MeanOutput(), m.NominalOutput
	}
	mi := max(1, int(math.Round(mean)))
	if nominal > 0 && !math.IsNaN(m.RangeRatio) {
		lo := max(1, int(float64(nominal)*m.RangeRatio))
		mid := (lo + nominal) / 2
		if lo == nominal || mid < 1 {
			return Lengths{Mean: nominal}, fmt.Sprintf("%s lengths %d fixed (range ratio %g)", name, nominal, m.RangeRatio)
		}
		return Lengths{Dist: Uniform, Mean: mid, Spread: math.Min(1, float64(nominal-mid)/float64(mid))},
			fmt.Sprintf("%s lengths uniform in [%d, %d] (range ratio %g)", name, lo, nominal, m.RangeRatio)
	}
	if nominal > 0 && mean < 0.95*float64(nominal) {
		lo := max(1, 2*mi-nominal)
		return Lengths{Dist: Uniform, Mean: mi, Spread: math.Min(1, float64(nominal-mi)/float64(mi))},
			fmt.Sprintf("%s lengths uniform in [%d, %d]: the mean %.0f is below the nominal %d, as a random dataset drawing up to it", name, lo, nominal, mean, nominal)
	}
	return Lengths{Mean: mi}, fmt.Sprintf("%s lengths %d fixed (the mean)", name, mi)
}

// SortLevels orders levels by load (rate, then concurrency), stable.
func SortLevels(ms []Measured) {
	slices.SortStableFunc(ms, func(a, b Measured) int {
		if a.QPS != b.QPS {
			return cmpF(a.QPS, b.QPS)
		}
		return a.Concurrency - b.Concurrency
	})
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// EngineRef is the engine profile the level's Engine names, by the names
// the benchmark clients give their backends (vllm bench serve --backend
// vllm; SGLang bench_serving --backend sglang, sglang-native, sglang-oai;
// InferenceX's framework vllm, sglang, trt); ok is false for an API's
// name (openai, openai-chat: any server) or none.
func (m *Measured) EngineRef() (engprof.Ref, bool) {
	switch n := strings.ToLower(strings.TrimSpace(m.Engine)); {
	case n == "vllm" || strings.HasPrefix(n, "vllm-"):
		// bench_serving's vllm-chat, vllm bench's vllm-pooling: vLLM's
		// own server.
		return engprof.Ref{Name: "vllm"}, true
	case n == "sglang" || strings.HasPrefix(n, "sglang-"):
		return engprof.Ref{Name: "sglang"}, true
	case n == "trt" || n == "trtllm" || n == "tensorrt-llm" || n == "tensorrt_llm":
		return engprof.Ref{Name: "trtllm"}, true
	}
	return engprof.Ref{}, false
}

// checkRecordedPlan refuses a plan the file records only in part, or as
// tpscope cannot price it: Plan reads one from a TP, so an EP or DP beside
// no TP (or a TP of 0) would leave the flags' plan in its place, and an EP
// size other than 1 or every rank of the plan (tpscope spreads whole
// experts over all TP x DP ranks) would be priced as EP over all of them.
func checkRecordedPlan(f fields, m *Measured) error {
	switch {
	case f.has("tp") && m.TP < 1:
		return f.err("tp", fmt.Errorf("want the run's tensor-parallel size, 1 or more, got %d", m.TP))
	case !f.has("tp") && (f.has("ep") || f.has("dp")):
		return f.err("tp", errors.New("missing: the file records an ep or dp size but no tp, so not the plan it ran"))
	}
	if p, _, ok := m.Plan(); ok && m.EP > 1 && m.EP != p.TP*p.DP {
		return f.err("ep", fmt.Errorf("%d: tpscope spreads whole experts over every rank of the plan (%s, %d ranks): want 1 or %d", m.EP, p, p.TP*p.DP, p.TP*p.DP))
	}
	return nil
}

// EngineUnprofiled reports whether the level names a serving engine that
// EngineRef maps to no profile (InferenceX's dynamo-sglang, dynamo-trt or
// atom; bench_serving's lmdeploy; vllm bench's tgi): its latencies are
// another engine's, so the default engine would price a run it never
// measured. An API's name (openai, openai-chat: any server behind it) or
// none is not an engine.
func (m *Measured) EngineUnprofiled() bool {
	n := strings.ToLower(strings.TrimSpace(m.Engine))
	if _, ok := m.EngineRef(); ok || n == "" || strings.HasPrefix(n, "openai") {
		return false
	}
	return true
}

// Plan is the parallel plan the level's server ran, as tpscope spells it,
// and what it was read from; ok is false when the file records no TP.
// The experts are spread whole (EP) when the recorded EP size is above 1
// (tpscope spreads them over every rank: TP x DP). A DP the file records
// is the plan's; one with TP equal to the GPUs and DP dividing it is
// SGLang's DP attention within the TP group (--tp 8 --dp 8 on 8 GPUs),
// which tpscope spells TP / DP x DP.
func (m *Measured) Plan() (p model.Plan, from string, ok bool) {
	if m.TP < 1 {
		return p, "", false
	}
	p = model.Plan{TP: m.TP, DP: max(1, m.DP), EP: m.EP > 1}
	if m.GPUs > 0 && p.DP > 1 && p.TP*p.DP != m.GPUs && p.TP == m.GPUs && p.TP%p.DP == 0 {
		p.TP /= p.DP
	}
	from = fmt.Sprintf("tp %d", m.TP)
	if m.EP > 0 {
		from += fmt.Sprintf(", ep %d", m.EP)
	}
	if m.DP > 0 {
		from += fmt.Sprintf(", dp %d", m.DP)
	}
	if m.GPUs > 0 {
		from += fmt.Sprintf(" on %d GPUs", m.GPUs)
	}
	return p, from, true
}
