package serving

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ParseError is a request file's error: the file, the line (1-based) and
// the field it is about (empty when the line as a whole is wrong).
type ParseError struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *ParseError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s:%d: field %q: %v", e.File, e.Line, e.Field, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// Column names of a request file.
const (
	colArrival = "arrival_s"
	colPrompt  = "prompt_tokens"
	colOutput  = "output_tokens"
)

// LoadRequests reads a request file (see ReadTrace) and returns its
// requests.
func LoadRequests(path string) ([]Request, error) {
	tr, err := LoadTrace(path)
	if err != nil {
		return nil, err
	}
	return tr.Requests, nil
}

// LoadTrace reads a request trace file (ReadTrace); the extension hints
// the syntax (.jsonl, .json, .ndjson: JSON lines; .csv: CSV), else the
// first byte.
func LoadTrace(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("requests: %w", err)
	}
	defer f.Close()
	format := ""
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".json", ".ndjson":
		format = "jsonl"
	case ".csv":
		format = "csv"
	}
	return ReadTrace(f, path, format)
}

// maxRequestFileBytes bounds a request file (1 GiB).
const maxRequestFileBytes = 1 << 30

// ReadRequests parses a request file (ReadTrace) and returns its
// requests.
func ReadRequests(r io.Reader, name, format string) ([]Request, error) {
	tr, err := ReadTrace(r, name, format)
	if err != nil {
		return nil, err
	}
	return tr.Requests, nil
}

// TraceFormat names a request trace's format.
type TraceFormat string

const (
	// TraceTpscope is tpscope's own: JSON lines of arrival_s,
	// prompt_tokens, output_tokens (and optionally hash_ids, session,
	// delay_s), or CSV with a header naming the first three.
	TraceTpscope TraceFormat = "tpscope"
	// TraceMooncake is the Mooncake FAST'25 traces (kvcache-ai/Mooncake
	// FAST25-release/README.md): JSON lines of timestamp (ms from the
	// start), input_length, output_length and hash_ids (the prompt's
	// 512-token blocks, equal IDs for equal prefixes); aiperf's
	// multi-turn variant adds session_id and delay (ms after the
	// previous turn).
	TraceMooncake TraceFormat = "mooncake"
	// TraceAzure is Azure's LLM inference trace 2023 (Splitwise, ISCA'24;
	// Azure/AzurePublicDataset AzureLLMInferenceDataset2023.md): CSV of
	// TIMESTAMP (date and time), ContextTokens, GeneratedTokens.
	TraceAzure TraceFormat = "azure-llm-2023"
	// TraceBurstGPT is BurstGPT's CSV (HPMLL/BurstGPT): Timestamp (s from
	// the start), Model, Request tokens, Response tokens, Total tokens,
	// Log Type; a failed request has 0 response tokens.
	TraceBurstGPT TraceFormat = "burstgpt"
)

// Trace is a request file read: the requests sorted by arrival, the
// format, the hash block size its hash IDs name, and the rows left out.
type Trace struct {
	File     string      `json:"file"`
	Format   TraceFormat `json:"format"`
	Requests []Request   `json:"-"`
	// HashBlockTokens is the tokens a hash ID names (Mooncake: 512; 0:
	// the trace has no hash IDs).
	HashBlockTokens int `json:"hash_block_tokens,omitempty"`
	// Skipped counts rows left out (a failed request's zero tokens);
	// FirstSkipped is the first one's line.
	Skipped      int `json:"skipped,omitempty"`
	FirstSkipped int `json:"first_skipped_line,omitempty"`
	// Sessions counts the distinct sessions (multi-turn traces).
	Sessions int `json:"sessions,omitempty"`
}

// SpanS is the time from the first arrival to the last.
func (t *Trace) SpanS() float64 {
	if len(t.Requests) == 0 {
		return 0
	}
	return t.Requests[len(t.Requests)-1].ArrivalS - t.Requests[0].ArrivalS
}

// ReadTrace parses a request trace named name in syntax "jsonl" or "csv"
// ("": JSON lines when the first non-blank byte is '{', else CSV); the
// format (TraceFormat) comes from the first line's keys or the CSV
// header:
//
//   - tpscope JSON lines: arrival_s (seconds from the start, >= 0),
//     prompt_tokens and output_tokens (integers from 1 to 2^24), and
//     optionally hash_ids (a list of integers), session (an integer or a
//     string) and delay_s; other keys are ignored; blank lines and lines
//     starting with '#' are skipped; tpscope CSV: a header naming
//     arrival_s, prompt_tokens and output_tokens (any order, other
//     columns ignored but hash_ids, session and delay_s, which it does
//     not read and refuses), then one request per row;
//   - Mooncake JSON lines (TraceMooncake): timestamp in ms, input_length,
//     output_length, hash_ids, optionally session_id and delay (ms);
//   - Azure 2023 CSV (TraceAzure) and BurstGPT CSV (TraceBurstGPT).
//
// A trace's rows with zero prompt or output tokens (failed requests) are
// left out and counted. Requests are returned sorted by arrival time
// (stable: file order on a tie; a session's turns must be in order). An
// empty file, a missing column, a malformed line or a value out of range
// is a *ParseError naming the file, the line and the field.
func ReadTrace(r io.Reader, name, format string) (*Trace, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxRequestFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > maxRequestFileBytes {
		return nil, &ParseError{File: name, Line: 1, Err: fmt.Errorf("file larger than %d bytes", maxRequestFileBytes)}
	}
	if format == "" {
		format = "csv"
		if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
			format = "jsonl"
		}
	}
	tr := &Trace{File: name}
	switch format {
	case "jsonl":
		err = readJSONL(data, tr)
	case "csv":
		err = readCSV(data, tr)
	default:
		return nil, fmt.Errorf("%s: format %q: want jsonl or csv", name, format)
	}
	if err != nil {
		return nil, err
	}
	if len(tr.Requests) == 0 {
		why := "no requests"
		if tr.Skipped > 0 {
			why = fmt.Sprintf("no requests: all %d rows have zero prompt or output tokens", tr.Skipped)
		}
		return nil, &ParseError{File: name, Line: 1, Err: errors.New(why)}
	}
	// Times from the first arrival; a session's turns keep their order.
	t0 := math.Inf(1)
	for _, q := range tr.Requests {
		t0 = math.Min(t0, q.ArrivalS)
	}
	last := map[int64]float64{}
	for i := range tr.Requests {
		q := &tr.Requests[i]
		q.ArrivalS -= t0
		if q.Session != 0 {
			if prev, ok := last[q.Session]; ok && q.ArrivalS < prev {
				return nil, &ParseError{File: name, Line: 1, Field: "session", Err: fmt.Errorf("request %d, a turn of session %d, arrives before the session's previous turn: want turns in order", i, q.Session)}
			}
			last[q.Session] = q.ArrivalS
		}
	}
	tr.Sessions = len(last)
	sort.SliceStable(tr.Requests, func(i, j int) bool { return tr.Requests[i].ArrivalS < tr.Requests[j].ArrivalS })
	return tr, nil
}

// skip counts a left-out row.
func (t *Trace) skip(line int) {
	t.Skipped++
	if t.FirstSkipped == 0 {
		t.FirstSkipped = line
	}
}

// sessionIDs numbers a trace's session names from 1 in order of first
// appearance (so strings and numbers both name sessions, and the
// simulation never depends on a hash of a name).
type sessionIDs map[string]int64

func (s sessionIDs) id(name string) int64 {
	if v, ok := s[name]; ok {
		return v
	}
	s[name] = int64(len(s) + 1)
	return s[name]
}

func readJSONL(data []byte, tr *Trace) error {
	name := tr.File
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	sessions := sessionIDs{}
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			if tr.Format == "" && json.Valid(data) {
				// The first line opens a document the file closes
				// later: a pretty-printed JSON file (a benchmark's
				// result, a config), which no line of holds a request.
				return &ParseError{File: name, Line: line, Err: fmt.Errorf("one JSON document over %d lines, not JSON lines: want one request object per line", bytes.Count(bytes.TrimSpace(data), []byte("\n"))+1)}
			}
			return &ParseError{File: name, Line: line, Err: fmt.Errorf("want a JSON object%s", jsonWhy(err))}
		}
		if tr.Format == "" {
			has := func(keys ...string) bool {
				for _, k := range keys {
					if _, ok := m[k]; ok {
						return true
					}
				}
				return false
			}
			switch {
			case has("input_length"):
				tr.Format = TraceMooncake
				tr.HashBlockTokens = defaultHashBlockTokens
			case has(colPrompt, colOutput, colArrival):
				tr.Format = TraceTpscope
			default:
				// No key of a request of either schema: another kind
				// of JSON lines (a benchmark's results), named as such
				// rather than as a request missing its arrival.
				return &ParseError{File: name, Line: line, Err: fmt.Errorf("not a request trace: no %s, %s, %s (tpscope) or input_length (Mooncake); keys: %s", colArrival, colPrompt, colOutput, someKeys(m))}
			}
		}
		r, skip, err := jsonRequest(m, tr.Format, sessions)
		if err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return &ParseError{File: name, Line: line, Field: fe.field, Err: fe.err}
			}
			return &ParseError{File: name, Line: line, Err: err}
		}
		if skip {
			tr.skip(line)
			continue
		}
		if len(r.HashIDs) > 0 && tr.HashBlockTokens == 0 {
			tr.HashBlockTokens = defaultHashBlockTokens
		}
		tr.Requests = append(tr.Requests, r)
		if len(tr.Requests) > maxRequests {
			return &ParseError{File: name, Line: line, Err: fmt.Errorf("more than %d requests", maxRequests)}
		}
	}
	if err := sc.Err(); err != nil {
		return &ParseError{File: name, Line: line + 1, Err: err}
	}
	return nil
}

// someKeys lists an object's keys, sorted, the first six.
func someKeys(m map[string]json.RawMessage) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 6 {
		keys = append(keys[:6], "...")
	}
	return strings.Join(keys, ", ")
}

// jsonRequest reads one JSON line of format f: the request, or skip for a
// trace row with zero tokens.
func jsonRequest(m map[string]json.RawMessage, f TraceFormat, sessions sessionIDs) (Request, bool, error) {
	var r Request
	keys := struct{ arrival, prompt, output, session, delay string }{colArrival, colPrompt, colOutput, "session", "delay_s"}
	arrivalScale, delayScale := 1.0, 1.0
	if f == TraceMooncake {
		keys = struct{ arrival, prompt, output, session, delay string }{"timestamp", "input_length", "output_length", "session_id", "delay"}
		arrivalScale, delayScale = 1e-3, 1e-3
	}
	var err error
	_, hasArrival := m[keys.arrival]
	_, hasSession := m[keys.session]
	if hasArrival || !hasSession {
		if r.ArrivalS, err = jsonNumber(m, keys.arrival); err != nil {
			return r, false, err
		}
		r.ArrivalS *= arrivalScale
		if err := arrivalOK(keys.arrival, r.ArrivalS); err != nil {
			return r, false, err
		}
	}
	p, err := jsonNumber(m, keys.prompt)
	if err != nil {
		return r, false, err
	}
	o, err := jsonNumber(m, keys.output)
	if err != nil {
		return r, false, err
	}
	if f != TraceTpscope && (p == 0 || o == 0) {
		return r, true, nil
	}
	if r.PromptTokens, err = tokenCount(keys.prompt, p); err != nil {
		return r, false, err
	}
	if r.OutputTokens, err = tokenCount(keys.output, o); err != nil {
		return r, false, err
	}
	if raw, ok := m["hash_ids"]; ok && string(raw) != "null" {
		var hs []float64
		if err := json.Unmarshal(raw, &hs); err != nil {
			return r, false, &fieldError{"hash_ids", fmt.Errorf("want a list of integers, got %s", shortenJSON(raw))}
		}
		r.HashIDs = make([]uint64, len(hs))
		for i, h := range hs {
			if !(h >= 0 && h <= 1<<53) || h != math.Trunc(h) {
				return r, false, &fieldError{"hash_ids", fmt.Errorf("entry %d: %v: want an integer from 0 to 2^53", i, h)}
			}
			r.HashIDs[i] = uint64(h)
		}
	}
	if raw, ok := m[keys.session]; ok && string(raw) != "null" {
		var sname string
		if json.Unmarshal(raw, &sname) != nil {
			var v float64
			if err := json.Unmarshal(raw, &v); err != nil {
				return r, false, &fieldError{keys.session, fmt.Errorf("want a string or a number, got %s", shortenJSON(raw))}
			}
			sname = strconv.FormatFloat(v, 'g', -1, 64)
		}
		r.Session = sessions.id(sname)
		if _, ok := m[keys.delay]; ok {
			d, err := jsonNumber(m, keys.delay)
			if err != nil {
				return r, false, err
			}
			r.DelayS = d * delayScale
			if !(r.DelayS >= 0) || math.IsInf(r.DelayS, 0) {
				return r, false, &fieldError{keys.delay, fmt.Errorf("want a finite time >= 0, got %v", d)}
			}
		}
	}
	return r, false, nil
}

// fieldError is an error about one field, before the line is known.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return fmt.Sprintf("field %q: %v", e.field, e.err) }

func jsonNumber(m map[string]json.RawMessage, key string) (float64, error) {
	raw, ok := m[key]
	if !ok {
		return 0, &fieldError{key, errors.New("missing")}
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, &fieldError{key, fmt.Errorf("want a number, got %s", shortenJSON(raw))}
	}
	return v, nil
}

// tokenCount checks a token count read as a number: an integer from 1 to
// maxLengthTokens.
func tokenCount(field string, v float64) (int, error) {
	if !(v >= 1 && v <= maxLengthTokens) || v != math.Trunc(v) {
		return 0, &fieldError{field, fmt.Errorf("want an integer from 1 to %d, got %v", maxLengthTokens, v)}
	}
	return int(v), nil
}

func arrivalOK(field string, v float64) error {
	if !(v >= 0) || math.IsInf(v, 0) {
		return &fieldError{field, fmt.Errorf("want a finite time >= 0, got %v", v)}
	}
	return nil
}

// csvSchema is a CSV trace's columns: arrival, prompt, output, and how
// an arrival cell reads (seconds, or a date and time).
type csvSchema struct {
	format                  TraceFormat
	arrival, prompt, output string
	dateTime                bool
}

var csvSchemas = []csvSchema{
	{TraceTpscope, colArrival, colPrompt, colOutput, false},
	{TraceAzure, "TIMESTAMP", "ContextTokens", "GeneratedTokens", true},
	{TraceBurstGPT, "Timestamp", "Request tokens", "Response tokens", false},
}

// azureTime is the layout of Azure's TIMESTAMP (seven fractional
// digits, no zone: the trace's own clock).
const azureTime = "2006-01-02 15:04:05.999999999"

func readCSV(data []byte, tr *Trace) error {
	name := tr.File
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return &ParseError{File: name, Line: 1, Err: errors.New("no header: want a row naming arrival_s, prompt_tokens, output_tokens (or Azure's TIMESTAMP, ContextTokens, GeneratedTokens, or BurstGPT's Timestamp, Request tokens, Response tokens)")}
	}
	if err != nil {
		return csvError(name, err)
	}
	idx := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, ok := idx[h]; !ok {
			idx[h] = i
		}
	}
	line, _ := cr.FieldPos(0)
	sc, found := csvSchemas[0], false
	for _, c := range csvSchemas {
		_, p := idx[c.prompt]
		_, o := idx[c.output]
		if p || o {
			sc, found = c, true
			break
		}
	}
	if !found {
		// No schema's length column: not a trace's header (another
		// tool's table, or a log whose first data row was read as one).
		return &ParseError{File: name, Line: line, Err: fmt.Errorf("not a request trace: want a header naming %s, %s, %s (or Azure's TIMESTAMP, ContextTokens, GeneratedTokens, or BurstGPT's Timestamp, Request tokens, Response tokens), got %s", colArrival, colPrompt, colOutput, shorten(strings.Join(header, ",")))}
	}
	tr.Format = sc.format
	if sc.format == TraceTpscope {
		// The JSON-lines fields this reader does not read: left out,
		// a multi-turn trace ran as independent requests and a prefix
		// trace without its reuse, without a word.
		for _, c := range []string{"hash_ids", "session", "delay_s"} {
			if _, ok := idx[c]; ok {
				return &ParseError{File: name, Line: line, Field: c, Err: fmt.Errorf("a column the CSV reader does not read (it reads %s, %s, %s): write the trace as JSON lines to keep hash_ids, session and delay_s", colArrival, colPrompt, colOutput)}
			}
		}
	}
	for _, c := range []string{sc.arrival, sc.prompt, sc.output} {
		if _, ok := idx[c]; !ok {
			return &ParseError{File: name, Line: line, Field: c, Err: errors.New("missing column in the header")}
		}
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return csvError(name, err)
		}
		line, _ = cr.FieldPos(0)
		cell := func(c string) (string, error) {
			i := idx[c]
			if i >= len(rec) {
				return "", &fieldError{c, fmt.Errorf("missing: the row has %d columns", len(rec))}
			}
			return strings.TrimSpace(rec[i]), nil
		}
		get := func(c string) (float64, error) {
			s, err := cell(c)
			if err != nil {
				return 0, err
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return 0, &fieldError{c, fmt.Errorf("want a number, got %s", shorten(s))}
			}
			return v, nil
		}
		var r Request
		var p, o float64
		if sc.dateTime {
			var s string
			if s, err = cell(sc.arrival); err == nil {
				ts, perr := time.Parse(azureTime, s)
				if perr != nil {
					err = &fieldError{sc.arrival, fmt.Errorf("want a date and time like 2023-11-16 18:17:03.9799600, got %s", shorten(s))}
				} else {
					r.ArrivalS = float64(ts.UnixNano()) * 1e-9
				}
			}
		} else if r.ArrivalS, err = get(sc.arrival); err == nil {
			err = arrivalOK(sc.arrival, r.ArrivalS)
		}
		if err == nil {
			p, err = get(sc.prompt)
		}
		if err == nil {
			o, err = get(sc.output)
		}
		if err == nil && sc.format != TraceTpscope && (p == 0 || o == 0) {
			tr.skip(line)
			continue
		}
		if err == nil {
			r.PromptTokens, err = tokenCount(sc.prompt, p)
		}
		if err == nil {
			r.OutputTokens, err = tokenCount(sc.output, o)
		}
		if err != nil {
			fe := err.(*fieldError)
			return &ParseError{File: name, Line: line, Field: fe.field, Err: fe.err}
		}
		tr.Requests = append(tr.Requests, r)
		if len(tr.Requests) > maxRequests {
			return &ParseError{File: name, Line: line, Err: fmt.Errorf("more than %d requests", maxRequests)}
		}
	}
	return nil
}

// ScaleToQPS returns the requests with their arrival times scaled so that
// they arrive at qps requests per second on average over their span
// ((n - 1) / (last - first)): the trace's shape (bursts, lulls) kept, its
// rate set. An error when the trace has fewer than two requests or its
// arrivals span no time.
func ScaleToQPS(reqs []Request, qps float64) ([]Request, error) {
	if !(qps > 0) || math.IsInf(qps, 0) {
		return nil, fmt.Errorf("replay rate %v: want a positive rate", qps)
	}
	if len(reqs) < 2 {
		return nil, fmt.Errorf("replay at %v req/s: the trace has %d request(s), want at least 2 to have a rate", qps, len(reqs))
	}
	span := reqs[len(reqs)-1].ArrivalS - reqs[0].ArrivalS
	if !(span > 0) {
		return nil, fmt.Errorf("replay at %v req/s: the trace's %d requests all arrive at once: it has no rate to scale", qps, len(reqs))
	}
	k := span / float64(len(reqs)-1) * qps // native rate / target rate
	out := slices.Clone(reqs)
	for i := range out {
		out[i].ArrivalS = (reqs[i].ArrivalS - reqs[0].ArrivalS) / k
		out[i].DelayS = reqs[i].DelayS / k
	}
	return out, nil
}

// ReplayAt returns the requests of one run that replays the trace
// time-scaled to qps and stops after numRequests requests or at durationS
// seconds (0: no such limit): the requests the run takes, scaled so that
// those arrive at qps on average. Scaling the whole trace and then cutting
// it would give the run the rate of the trace's opening stretch, scaled,
// not the rate asked for. A run ending at durationS takes the first
// ceil(qps x durationS) requests: scaled, they span that count less one
// over qps, the last arriving before durationS; a trace with fewer ends
// before the duration, which Traffic.Validate refuses.
func ReplayAt(reqs []Request, qps float64, numRequests int, durationS float64) ([]Request, error) {
	if err := checkTake(len(reqs), numRequests); err != nil {
		return nil, err
	}
	n := len(reqs)
	if numRequests > 0 {
		n = numRequests
	}
	if durationS > 0 && qps > 0 && !math.IsInf(qps, 0) {
		switch m := math.Ceil(qps * durationS); {
		case m < float64(n):
			n = max(1, int(m))
		case numRequests == 0:
			// Scaled to qps, all n arrive within (n - 1) / qps <
			// durationS: the duration cuts nothing, and the load ends
			// with the trace, short of the time asked.
			span := float64(n-1) / qps
			return nil, trafficFieldError("duration_s", fmt.Sprintf("want at most %g s: at %g req/s the trace's %d requests arrive within it (leave it out for the whole trace)",
				span, qps, n), "traffic: duration %v s", durationS)
		}
	}
	return ScaleToQPS(reqs[:n], qps)
}

// CheckTake refuses a cut of a trace replayed at its own times that the
// trace cannot fill: more requests than it has (the run would stop at
// its end, short of the count asked), or a duration past its last
// arrival (the duration would cut nothing: the load ends with the trace,
// short of the time asked). A load that takes only the trace's lengths
// (an open or closed loop) is held to the count alone: its times are its
// own.
func (t *Trace) CheckTake(numRequests int, durationS float64, ownTimes bool) error {
	if err := checkTake(len(t.Requests), numRequests); err != nil {
		return err
	}
	if ownTimes && durationS > 0 && len(t.Requests) > 0 {
		if last := t.Requests[len(t.Requests)-1].ArrivalS; last < durationS {
			return trafficFieldError("duration_s", fmt.Sprintf("want at most %g s: the trace's last request arrives at %g s (leave it out for the whole trace)", last, last),
				"traffic: duration %v s", durationS)
		}
	}
	return nil
}

// checkTake refuses a count of requests beyond a trace's n.
func checkTake(n, numRequests int) error {
	if numRequests > n {
		return trafficFieldError("num_requests", fmt.Sprintf("want at most %d, the trace's requests (leave it out for them all)", n), "traffic: requests %d", numRequests)
	}
	return nil
}

func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: name, Line: pe.Line, Err: pe.Err}
	}
	return &ParseError{File: name, Line: 1, Err: err}
}

// shorten quotes s, cut to 40 bytes.
func shorten(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

// shortenJSON is a JSON value as a message shows it: its own text,
// compacted to one line and cut like shorten, but not quoted again (a
// JSON string already is: got "fast", not got "\"fast\"").
func shortenJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		// Not JSON (a value no decoder returned: none, or cut): its
		// bytes as they are, quoted.
		return shorten(string(raw))
	}
	s := b.String()
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}
