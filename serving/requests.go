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
	"sort"
	"strconv"
	"strings"
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

// LoadRequests reads a request file (see ReadRequests); the format comes
// from the extension (.jsonl, .json, .csv), else from the first byte.
func LoadRequests(path string) ([]Request, error) {
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
	return ReadRequests(f, path, format)
}

// maxRequestFileBytes bounds a request file (1 GiB).
const maxRequestFileBytes = 1 << 30

// ReadRequests parses a request file named name in format "jsonl" or
// "csv" ("" = JSON lines when the first non-blank byte is '{', else CSV):
//
//   - JSON lines: one object per line with the numbers arrival_s
//     (seconds from the start, >= 0), prompt_tokens and output_tokens
//     (integers from 1 to 2^24); other keys are ignored; blank lines and
//     lines starting with '#' are skipped;
//   - CSV: a header naming the columns arrival_s, prompt_tokens and
//     output_tokens (any order, other columns ignored), then one request
//     per row.
//
// Requests are returned sorted by arrival time (stable: file order on a
// tie). An empty file, a missing column, a malformed line or a value out
// of range is a *ParseError naming the file, the line and the field.
func ReadRequests(r io.Reader, name, format string) ([]Request, error) {
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
	var out []Request
	switch format {
	case "jsonl":
		out, err = readJSONL(data, name)
	case "csv":
		out, err = readCSV(data, name)
	default:
		return nil, fmt.Errorf("%s: format %q: want jsonl or csv", name, format)
	}
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &ParseError{File: name, Line: 1, Err: errors.New("no requests")}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ArrivalS < out[j].ArrivalS })
	return out, nil
}

func readJSONL(data []byte, name string) ([]Request, error) {
	var out []Request
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("want a JSON object: %v", err)}
		}
		var r Request
		var err error
		if r.ArrivalS, err = jsonNumber(m, colArrival); err == nil {
			var p, o float64
			if p, err = jsonNumber(m, colPrompt); err == nil {
				if o, err = jsonNumber(m, colOutput); err == nil {
					r.PromptTokens, err = tokenCount(colPrompt, p)
					if err == nil {
						r.OutputTokens, err = tokenCount(colOutput, o)
					}
				}
			}
		}
		if err == nil {
			err = arrivalOK(r.ArrivalS)
		}
		if err != nil {
			var fe *fieldError
			if errors.As(err, &fe) {
				return nil, &ParseError{File: name, Line: line, Field: fe.field, Err: fe.err}
			}
			return nil, &ParseError{File: name, Line: line, Err: err}
		}
		out = append(out, r)
		if len(out) > maxRequests {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("more than %d requests", maxRequests)}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{File: name, Line: line + 1, Err: err}
	}
	return out, nil
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
		return 0, &fieldError{key, fmt.Errorf("want a number, got %s", shorten(string(raw)))}
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

func arrivalOK(v float64) error {
	if !(v >= 0) || math.IsInf(v, 0) {
		return &fieldError{colArrival, fmt.Errorf("want a finite time in seconds >= 0, got %v", v)}
	}
	return nil
}

func readCSV(data []byte, name string) ([]Request, error) {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{File: name, Line: 1, Err: errors.New("no header: want a row naming arrival_s, prompt_tokens, output_tokens")}
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	col := map[string]int{colArrival: -1, colPrompt: -1, colOutput: -1}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if j, ok := col[h]; ok && j < 0 {
			col[h] = i
		}
	}
	line, _ := cr.FieldPos(0)
	for _, c := range []string{colArrival, colPrompt, colOutput} {
		if col[c] < 0 {
			return nil, &ParseError{File: name, Line: line, Field: c, Err: errors.New("missing column in the header")}
		}
	}
	var out []Request
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(name, err)
		}
		line, _ = cr.FieldPos(0)
		get := func(c string) (float64, error) {
			i := col[c]
			if i >= len(rec) {
				return 0, &fieldError{c, fmt.Errorf("missing: the row has %d columns", len(rec))}
			}
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil {
				return 0, &fieldError{c, fmt.Errorf("want a number, got %s", shorten(rec[i]))}
			}
			return v, nil
		}
		var r Request
		r.ArrivalS, err = get(colArrival)
		if err == nil {
			err = arrivalOK(r.ArrivalS)
		}
		var v float64
		if err == nil {
			if v, err = get(colPrompt); err == nil {
				r.PromptTokens, err = tokenCount(colPrompt, v)
			}
		}
		if err == nil {
			if v, err = get(colOutput); err == nil {
				r.OutputTokens, err = tokenCount(colOutput, v)
			}
		}
		if err != nil {
			fe := err.(*fieldError)
			return nil, &ParseError{File: name, Line: line, Field: fe.field, Err: fe.err}
		}
		out = append(out, r)
		if len(out) > maxRequests {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("more than %d requests", maxRequests)}
		}
	}
	return out, nil
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
