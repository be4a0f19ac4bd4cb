package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// SpecAcceptance is what a serving engine reported of its speculative
// decoding: the per-position acceptance rates (vLLM: position i's
// accepted drafts over all drafts, so non-increasing, the chance that a
// draft's i-th token is accepted) or, when the engine reports no
// positions, the mean acceptance length (tokens a step yields per
// sequence, the bonus token included: vLLM's "Mean acceptance length",
// SGLang's "accept len").
type SpecAcceptance struct {
	PerPosition []float64 `json:"per_position,omitempty"`
	MeanLength  float64   `json:"mean_length,omitempty"`
	// AtTokens is the draft tokens per draft MeanLength was measured at,
	// where the input says (vLLM's draft tokens over its drafts); 0 when
	// it does not (SGLang's log lines).
	AtTokens int `json:"at_tokens,omitempty"`
	// Source says what was read: the format and how many lines or
	// samples.
	Source string `json:"source"`
}

// Prometheus counters of vLLM's SpecDecodingProm (v1/spec_decode/metrics.py),
// exported with the _total suffix.
var (
	promDrafts    = "vllm:spec_decode_num_drafts_total"
	promDraftToks = "vllm:spec_decode_num_draft_tokens_total"
	promAccepted  = "vllm:spec_decode_num_accepted_tokens_total"
	promPerPos    = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
	promLabelPos  = regexp.MustCompile(`position="(\d+)"`)
	vllmLogLine   = regexp.MustCompile(`SpecDecoding metrics:.*`)
	vllmMeanLen   = regexp.MustCompile(`Mean acceptance length: ([0-9.]+)`)
	vllmAccepted  = regexp.MustCompile(`Accepted: ([0-9]+) tokens`)
	vllmDrafted   = regexp.MustCompile(`Drafted: ([0-9]+) tokens`)
	vllmPerPos    = regexp.MustCompile(`Per-position acceptance rate: \[?([0-9., ]+?)\]?(?:,\s*Avg|$)`)
	sglangAccLen  = regexp.MustCompile(`accept len: ([0-9.]+)`)
	sglangSteps   = regexp.MustCompile(`server_args=ServerArgs\(.*\bspeculative_num_steps=(\d+)`)
	sglangDecoder = regexp.MustCompile(`Decode batch`)
	// vllm bench serve's "Speculative Decoding" section (benchmarks/serve.py
	// print_section: "{:<40} {:<10}" rows, the rates in percent).
	benchHeader  = regexp.MustCompile(`^-+Speculative Decoding-+\s*$`)
	benchRow     = regexp.MustCompile(`^\s*(Acceptance rate \(%\)|Acceptance length|Drafts|Draft tokens|Accepted tokens|Position (\d+)):\s+(\S+)\s*$`)
	benchPerPos  = regexp.MustCompile(`^\s*Per-position acceptance \(%\):\s*$`)
	sglangBench  = regexp.MustCompile(`(?m)^Accept length:[ \t]+(\S+)[ \t\r]*$`)
	jsonLeadByte = regexp.MustCompile(`^\s*\{`)
)

// ParseSpecAcceptance reads an engine's acceptance from one of:
//
//   - vLLM's Prometheus /metrics text: the per-position counters
//     vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}
//     over vllm:spec_decode_num_drafts_total (summed over engines);
//   - vLLM's log lines "SpecDecoding metrics: Mean acceptance length: M,
//     ..., Accepted: A tokens, Drafted: D tokens, Per-position acceptance
//     rate: r0, r1, ..., Avg Draft acceptance rate: P%": the per-position
//     rates averaged over the lines, weighted by their drafts (D over the
//     K rates a line lists; without "Drafted", A / (M - 1));
//   - SGLang's "Decode batch" log lines with "accept len: L": the mean of
//     L over the lines;
//   - what the benchmark clients report of the server they ran against:
//     vllm bench serve's "Speculative Decoding" section (its printed
//     output) and its --save-result JSON (spec_decode_* keys), SGLang
//     bench_serving's "Accept length:" line and its JSONL results
//     (accept_length).
//
// name names the input in errors. An input with none of them is an error
// saying what was looked for.
func ParseSpecAcceptance(name string, data []byte) (SpecAcceptance, error) {
	switch {
	case bytes.Contains(data, []byte(promPerPos)) || bytes.Contains(data, []byte(promDrafts)):
		return parseProm(name, data)
	case vllmLogLine.Match(data):
		return parseVLLMLog(name, data)
	case bytes.Contains(data, []byte("Speculative Decoding---")):
		return parseVLLMBench(name, data)
	case sglangAccLen.Match(data):
		return parseSGLangLog(name, data)
	case jsonLeadByte.Match(data):
		return parseBenchJSON(name, data)
	case sglangBench.Match(data):
		return parseSGLangBench(name, data)
	}
	return SpecAcceptance{}, fmt.Errorf("%s: no speculative-decoding acceptance found: want vLLM's /metrics text (%s{position=...}), vLLM's \"SpecDecoding metrics:\" log lines, SGLang's \"accept len:\" log lines, or a benchmark's report of them (vllm bench serve's \"Speculative Decoding\" section or --save-result JSON, SGLang bench_serving's \"Accept length:\" or JSONL)", name, promPerPos)
}

func parseProm(name string, data []byte) (SpecAcceptance, error) {
	var drafts, draftTokens, accepted float64
	sawAccepted := false
	perPos := map[int]float64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		metric, val, ok := cutValue(t)
		if !ok {
			// A counter of ours without its value is a line cut short
			// (a file saved mid-write), not a line of another metric.
			if strings.HasPrefix(t, "vllm:spec_decode_") {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: %q has no value: the line is cut (want METRIC{LABELS} VALUE)", name, line, t)
			}
			continue
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return SpecAcceptance{}, fmt.Errorf("%s:%d: %s: value %q: want a count", name, line, metric, val)
		}
		switch {
		case strings.HasPrefix(metric, promPerPos):
			m := promLabelPos.FindStringSubmatch(metric)
			if m == nil {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: %s without a position label", name, line, promPerPos)
			}
			i, _ := strconv.Atoi(m[1])
			if i > 64 {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: position %d: want at most 64", name, line, i)
			}
			perPos[i] += v
		case strings.HasPrefix(metric, promDraftToks):
			draftTokens += v
		case strings.HasPrefix(metric, promDrafts):
			drafts += v
		case strings.HasPrefix(metric, promAccepted):
			accepted += v
			sawAccepted = true
		}
	}
	if err := sc.Err(); err != nil {
		return SpecAcceptance{}, fmt.Errorf("%s: %w", name, err)
	}
	if drafts <= 0 {
		return SpecAcceptance{}, fmt.Errorf("%s: %s is missing or 0: no drafts to divide the accepted tokens by", name, promDrafts)
	}
	out := SpecAcceptance{Source: fmt.Sprintf("vLLM /metrics: %.0f drafts", drafts)}
	// Drafts without a count of what was accepted of them is a partial
	// scrape, not an acceptance of 0.
	if len(perPos) == 0 && !sawAccepted {
		return SpecAcceptance{}, fmt.Errorf("%s: %s{position=...} and %s are missing: no accepted tokens to divide the drafts by", name, promPerPos, promAccepted)
	}
	if len(perPos) == 0 {
		out.MeanLength = 1 + accepted/drafts
		// A mean length is of the drafts' K: every draft of vLLM's
		// proposers is num_speculative_tokens long, so the draft tokens
		// over the drafts give it.
		if draftTokens > 0 {
			k := draftTokens / drafts
			if math.Abs(k-math.Round(k)) > 0.01 || k < 1 {
				return SpecAcceptance{}, fmt.Errorf("%s: %s / %s = %.3f: want a whole number of draft tokens per draft (the K the mean length was measured at)", name, promDraftToks, promDrafts, k)
			}
			out.AtTokens = int(math.Round(k))
			out.Source += fmt.Sprintf(" of %d draft tokens", out.AtTokens)
		}
		return out, nil
	}
	n := 0
	for i := range perPos {
		n = max(n, i+1)
	}
	for i := 0; i < n; i++ {
		// vLLM exports every position up to num_speculative_tokens, 0
		// included: one missing is a partial scrape, not a rate of 0.
		if _, ok := perPos[i]; !ok {
			return SpecAcceptance{}, fmt.Errorf("%s: %s{position=\"%d\"} is missing (the last position is %d): want every position from 0", name, promPerPos, i, n-1)
		}
		out.PerPosition = append(out.PerPosition, math.Min(1, perPos[i]/drafts))
	}
	return out, nil
}

// cutValue splits a Prometheus sample line into its metric (with labels)
// and its value (a timestamp after it is ignored).
func cutValue(t string) (metric, value string, ok bool) {
	end := strings.LastIndexByte(t, '}')
	rest := t
	if end >= 0 {
		metric, rest = t[:end+1], t[end+1:]
	} else {
		i := strings.IndexAny(t, " \t")
		if i < 0 {
			return "", "", false
		}
		metric, rest = t[:i], t[i:]
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return "", "", false
	}
	return metric, f[0], true
}

func parseVLLMLog(name string, data []byte) (SpecAcceptance, error) {
	var sum []float64
	var weight float64
	lines, k, kLine := 0, 0, 0
	for ln, raw := range strings.Split(string(data), "\n") {
		m := vllmLogLine.FindString(raw)
		if m == "" {
			continue
		}
		pp := vllmPerPos.FindStringSubmatch(m)
		if pp == nil {
			continue
		}
		var rates []float64
		for _, f := range strings.Split(pp[1], ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			v, err := strconv.ParseFloat(f, 64)
			if err != nil || v < 0 || v > 1 {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: per-position acceptance rate %q: want rates in [0, 1]", name, ln+1, f)
			}
			rates = append(rates, v)
		}
		if len(rates) == 0 {
			continue
		}
		// One server drafts K tokens a draft, and lists K rates: lines of
		// another K are another server's, whose positions do not average.
		if k != 0 && len(rates) != k {
			return SpecAcceptance{}, fmt.Errorf("%s:%d: %d per-position rates after %d on line %d: want one server's log (num_speculative_tokens of one value)", name, ln+1, len(rates), k, kLine)
		}
		k, kLine = len(rates), ln+1
		// Weight by the line's drafts: its drafted tokens over the K
		// positions it lists (every draft is K tokens), which counts an
		// interval that accepted nothing as the drafts it made; else
		// accepted / (mean length - 1); else once.
		w := 1.0
		if dr := vllmDrafted.FindStringSubmatch(m); dr != nil {
			d, _ := strconv.ParseFloat(dr[1], 64)
			w = d / float64(len(rates))
		} else if ml, ac := vllmMeanLen.FindStringSubmatch(m), vllmAccepted.FindStringSubmatch(m); ml != nil && ac != nil {
			mean, _ := strconv.ParseFloat(ml[1], 64)
			acc, _ := strconv.ParseFloat(ac[1], 64)
			if mean > 1 && acc > 0 {
				w = acc / (mean - 1)
			}
		}
		if w <= 0 {
			continue // no drafts: nothing to average
		}
		if len(rates) > len(sum) {
			sum = append(sum, make([]float64, len(rates)-len(sum))...)
		}
		for i, r := range rates {
			sum[i] += w * r
		}
		weight += w
		lines++
	}
	if lines == 0 {
		return SpecAcceptance{}, fmt.Errorf("%s: \"SpecDecoding metrics:\" lines without a per-position acceptance rate", name)
	}
	out := SpecAcceptance{Source: fmt.Sprintf("vLLM log: %d SpecDecoding metrics lines", lines)}
	for _, s := range sum {
		out.PerPosition = append(out.PerPosition, s/weight)
	}
	return out, nil
}

// parseSGLangLog reads the "accept len" of SGLang's decode-batch lines: a
// mean acceptance length of the draft passes the server ran, which its
// launch line names (server_args=ServerArgs(..., speculative_num_steps=N,
// ...), printed after the defaults are filled in): AtTokens. A log
// without it leaves AtTokens 0 and its Source says so; two launches of
// different steps are an error (their lengths do not average).
func parseSGLangLog(name string, data []byte) (SpecAcceptance, error) {
	var vals []float64
	steps, stepsLine := 0, 0
	for ln, raw := range strings.Split(string(data), "\n") {
		if m := sglangSteps.FindStringSubmatch(raw); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil || n < 1 {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: speculative_num_steps=%s: want the draft steps, at least 1", name, ln+1, m[1])
			}
			if steps != 0 && n != steps {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: speculative_num_steps=%d after speculative_num_steps=%d on line %d: want one server's log (accept lengths of different steps do not average)", name, ln+1, n, steps, stepsLine)
			}
			steps, stepsLine = n, ln+1
			continue
		}
		m := sglangAccLen.FindStringSubmatch(raw)
		if m == nil || !sglangDecoder.MatchString(raw) && !strings.Contains(raw, "accept rate") {
			continue
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil || v < 1 {
			return SpecAcceptance{}, fmt.Errorf("%s:%d: accept len %q: want a length of at least 1", name, ln+1, m[1])
		}
		vals = append(vals, v)
	}
	if len(vals) == 0 {
		return SpecAcceptance{}, fmt.Errorf("%s: no SGLang \"Decode batch ... accept len:\" line", name)
	}
	sort.Float64s(vals)
	s := 0.0
	for _, v := range vals {
		s += v
	}
	out := SpecAcceptance{MeanLength: s / float64(len(vals)), AtTokens: steps, Source: fmt.Sprintf("SGLang log: %d decode batch lines", len(vals))}
	if steps > 0 {
		out.Source += fmt.Sprintf(" at speculative_num_steps %d", steps)
	} else {
		out.Source += ", no speculative_num_steps in its server_args: read at the step's draft passes"
	}
	return out, nil
}

// benchRun is one benchmark run's report of the server's speculative
// decoding: its drafts and draft tokens (0 where not reported), its mean
// acceptance length (0 where not reported) and its per-position rates.
type benchRun struct {
	drafts, draftTokens float64
	meanLen             float64
	perPos              []float64
	at                  int // the line (or 0) it was read from, for errors
}

// k is the draft tokens per draft the run measured (0 when not known):
// its positions where it lists them (a server that varies its depth
// drafts fewer on average, never more), else its draft tokens over its
// drafts, a whole number for a server of one K.
func (r benchRun) k(name string) (int, error) {
	if n := len(r.perPos); n > 0 {
		if r.drafts > 0 && r.draftTokens/r.drafts > float64(n)+0.01 {
			return 0, fmt.Errorf("%s:%d: %.3f draft tokens a draft over %d per-position rates: want a rate for every draft position", name, r.at, r.draftTokens/r.drafts, n)
		}
		return n, nil
	}
	if r.drafts <= 0 || r.draftTokens <= 0 {
		return 0, nil
	}
	k := r.draftTokens / r.drafts
	if math.Abs(k-math.Round(k)) > 0.01 || k < 1 {
		return 0, fmt.Errorf("%s:%d: draft tokens / drafts = %.3f: want a whole number of draft tokens per draft (the K the acceptance was measured at)", name, r.at, k)
	}
	return int(math.Round(k)), nil
}

// combineRuns averages the runs of one server: per position when every
// run lists its positions, else their mean acceptance lengths; each run
// weighted by its drafts where they are reported (all or none), as the
// engine's own counters would add up. Runs of different K are another
// server's and do not average.
func combineRuns(name, what string, runs []benchRun) (SpecAcceptance, error) {
	if len(runs) == 0 {
		return SpecAcceptance{}, fmt.Errorf("%s: %s without an acceptance", name, what)
	}
	k, kAt := 0, 0
	weighted := true
	perPos := true
	for _, r := range runs {
		rk, err := r.k(name)
		if err != nil {
			return SpecAcceptance{}, err
		}
		if k != 0 && rk != 0 && rk != k {
			return SpecAcceptance{}, fmt.Errorf("%s:%d: %d draft tokens a draft after %d at line %d: want one server's runs (acceptances of different K do not average)", name, r.at, rk, k, kAt)
		}
		if rk != 0 && k == 0 {
			k, kAt = rk, r.at
		}
		weighted = weighted && r.drafts > 0
		perPos = perPos && len(r.perPos) > 0
	}
	out := SpecAcceptance{Source: fmt.Sprintf("%s: %d run(s)", what, len(runs))}
	var wsum float64
	for _, r := range runs {
		w := 1.0
		if weighted {
			w = r.drafts
		}
		wsum += w
		if perPos {
			if len(out.PerPosition) < len(r.perPos) {
				out.PerPosition = append(out.PerPosition, make([]float64, len(r.perPos)-len(out.PerPosition))...)
			}
			for i, v := range r.perPos {
				out.PerPosition[i] += w * v
			}
			continue
		}
		l := r.meanLen
		if l < 1 && len(r.perPos) > 0 {
			// A run that lists positions and no length, among runs that
			// give lengths: vLLM's length is 1 + the positions' sum.
			l = 1
			for _, v := range r.perPos {
				l += v
			}
		}
		if l < 1 {
			return SpecAcceptance{}, fmt.Errorf("%s:%d: neither per-position rates nor an acceptance length: want one of them", name, r.at)
		}
		out.MeanLength += w * l
	}
	for i := range out.PerPosition {
		out.PerPosition[i] /= wsum
	}
	if !perPos {
		out.MeanLength /= wsum
		out.AtTokens = k
		if k > 0 {
			out.Source += fmt.Sprintf(" of %d draft tokens", k)
		}
	}
	return out, nil
}

// parseVLLMBench reads vllm bench serve's printed "Speculative Decoding"
// sections (one per run the file holds).
func parseVLLMBench(name string, data []byte) (SpecAcceptance, error) {
	var runs []benchRun
	var cur *benchRun
	inPos := false
	for ln, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimRight(raw, "\r")
		if benchHeader.MatchString(line) {
			runs = append(runs, benchRun{at: ln + 1})
			cur, inPos = &runs[len(runs)-1], false
			continue
		}
		if cur == nil {
			continue
		}
		if benchPerPos.MatchString(line) {
			inPos = true
			continue
		}
		m := benchRow.FindStringSubmatch(line)
		if m == nil {
			// The section ends at the next rule or section.
			if t := strings.TrimSpace(line); strings.HasPrefix(t, "==") || strings.HasPrefix(t, "--") {
				cur, inPos = nil, false
			}
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return SpecAcceptance{}, fmt.Errorf("%s:%d: %s %q: want a number", name, ln+1, m[1], m[3])
		}
		switch {
		case m[2] != "":
			i, _ := strconv.Atoi(m[2])
			if !inPos || i != len(cur.perPos) {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: Position %d: want positions 0, 1, ... in order under \"Per-position acceptance (%%):\"", name, ln+1, i)
			}
			if v > 100 {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: Position %d: %s %%: want a rate of at most 100 %%", name, ln+1, i, m[3])
			}
			cur.perPos = append(cur.perPos, v/100)
		case m[1] == "Acceptance length":
			if v < 1 {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: Acceptance length %s: want at least 1 (the bonus token included)", name, ln+1, m[3])
			}
			cur.meanLen = v
		case m[1] == "Drafts":
			cur.drafts = v
		case m[1] == "Draft tokens":
			cur.draftTokens = v
		}
	}
	var kept []benchRun
	for _, r := range runs {
		if r.meanLen > 0 || len(r.perPos) > 0 {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		return SpecAcceptance{}, fmt.Errorf("%s: a \"Speculative Decoding\" section without \"Acceptance length:\" or \"Per-position acceptance (%%):\" rows", name)
	}
	return combineRuns(name, "vllm bench serve output", kept)
}

// parseSGLangBench reads SGLang bench_serving's printed "Accept length:"
// rows (one per run): mean acceptance lengths of draft passes the output
// does not name.
func parseSGLangBench(name string, data []byte) (SpecAcceptance, error) {
	var runs []benchRun
	for ln, raw := range strings.Split(string(data), "\n") {
		m := sglangBench.FindStringSubmatch(strings.TrimRight(raw, "\r"))
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil || !(v >= 1) || math.IsInf(v, 0) {
			return SpecAcceptance{}, fmt.Errorf("%s:%d: Accept length %q: want a length of at least 1", name, ln+1, m[1])
		}
		runs = append(runs, benchRun{meanLen: v, at: ln + 1})
	}
	out, err := combineRuns(name, "SGLang bench_serving output", runs)
	if err == nil {
		out.Source += ", its draft passes not named: read at the step's"
	}
	return out, err
}

// parseBenchJSON reads a benchmark client's saved results: vllm bench
// serve's --save-result JSON (benchmarks/serve.py _add_spec_decode_result:
// spec_decode_num_drafts, spec_decode_draft_tokens,
// spec_decode_acceptance_length, spec_decode_per_position_acceptance_rates
// as fractions) or SGLang bench_serving's JSONL (a line per run,
// accept_length), one object or one object a line.
func parseBenchJSON(name string, data []byte) (SpecAcceptance, error) {
	var objs []map[string]json.RawMessage
	var lines []int
	var one map[string]json.RawMessage
	if err := json.Unmarshal(data, &one); err == nil {
		objs, lines = append(objs, one), append(lines, 1)
	} else {
		for ln, raw := range strings.Split(string(data), "\n") {
			t := strings.TrimSpace(raw)
			if t == "" {
				continue
			}
			var o map[string]json.RawMessage
			if err := json.Unmarshal([]byte(t), &o); err != nil {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: not a JSON object (%v): want vllm bench serve's --save-result JSON or SGLang bench_serving's JSONL", name, ln+1, err)
			}
			objs, lines = append(objs, o), append(lines, ln+1)
		}
	}
	var vllm, sglang []benchRun
	for i, o := range objs {
		r := benchRun{at: lines[i]}
		num := func(key string, min float64) (float64, bool, error) {
			raw, ok := o[key]
			if !ok || string(raw) == "null" {
				return 0, false, nil
			}
			var v float64
			if err := json.Unmarshal(raw, &v); err != nil || v < min || math.IsInf(v, 0) || math.IsNaN(v) {
				return 0, false, fmt.Errorf("%s:%d: %s %s: want a number of at least %g", name, lines[i], key, raw, min)
			}
			return v, true, nil
		}
		var err error
		var ok, any bool
		if r.drafts, ok, err = num("spec_decode_num_drafts", 0); err != nil {
			return SpecAcceptance{}, err
		}
		any = any || ok
		if r.draftTokens, ok, err = num("spec_decode_draft_tokens", 0); err != nil {
			return SpecAcceptance{}, err
		}
		any = any || ok
		if r.meanLen, ok, err = num("spec_decode_acceptance_length", 1); err != nil {
			return SpecAcceptance{}, err
		}
		any = any || ok
		if raw, ok := o["spec_decode_per_position_acceptance_rates"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &r.perPos); err != nil {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: spec_decode_per_position_acceptance_rates %s: want a list of rates", name, lines[i], raw)
			}
			for j, v := range r.perPos {
				if !(v >= 0 && v <= 1) {
					return SpecAcceptance{}, fmt.Errorf("%s:%d: spec_decode_per_position_acceptance_rates[%d] = %g: want a fraction in [0, 1], as vLLM writes them", name, lines[i], j, v)
				}
			}
			any = true
		}
		if any {
			if r.meanLen == 0 && len(r.perPos) == 0 {
				return SpecAcceptance{}, fmt.Errorf("%s:%d: spec_decode_* without spec_decode_acceptance_length or spec_decode_per_position_acceptance_rates: want one of them", name, lines[i])
			}
			vllm = append(vllm, r)
			continue
		}
		l, ok, err := num("accept_length", 1)
		if err != nil {
			return SpecAcceptance{}, err
		}
		if ok {
			sglang = append(sglang, benchRun{meanLen: l, at: lines[i]})
		}
	}
	switch {
	case len(vllm) > 0 && len(sglang) > 0:
		return SpecAcceptance{}, fmt.Errorf("%s: both vLLM's spec_decode_* (line %d) and SGLang's accept_length (line %d): want one engine's results", name, vllm[0].at, sglang[0].at)
	case len(vllm) > 0:
		return combineRuns(name, "vllm bench serve results", vllm)
	case len(sglang) > 0:
		out, err := combineRuns(name, "SGLang bench_serving results", sglang)
		if err == nil {
			out.Source += ", its draft passes not named: read at the step's"
		}
		return out, err
	}
	return SpecAcceptance{}, fmt.Errorf("%s: a JSON result without spec_decode_* (vllm bench serve) or accept_length (SGLang bench_serving): the server it measured ran no speculative decoding", name)
}
