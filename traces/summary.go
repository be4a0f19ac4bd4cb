package traces

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
)

// Summary counts what a Result holds, for a quick look at a source.
type Summary struct {
	Source    string      `json:"source"`
	Format    string      `json:"format"`
	Spans     int         `json:"spans"`
	Traces    int         `json:"traces"`
	OpSpans   int         `json:"op_spans"` // op spans as compare counts them (isOpSpan): spans with an op ID, children of rank spans, Kineto kernels
	Ranks     []int       `json:"ranks"`    // distinct ranks of op spans, sorted
	Steps     []int       `json:"steps"`    // distinct steps, sorted
	Kinds     []KindCount `json:"kinds"`    // op spans per kind, by kind name
	Services  []string    `json:"services"` // distinct service names, sorted
	Scenarios []Scenario  `json:"scenarios"`
	Partial   *Partial    `json:"partial,omitempty"` // what was kept of a damaged source (WithAllowPartial)
	// Kineto: per profiler trace file, its steps (the rule that found
	// them, phases) and how its kernel time was placed.
	Kineto       []KinetoFile `json:"kineto,omitempty"`
	SkippedTotal int          `json:"skipped_total"`
	Skipped      []Skip       `json:"skipped"`
}

// KindCount is the number and total duration of the op spans of one kind.
type KindCount struct {
	Kind    string  `json:"kind"`
	Spans   int     `json:"spans"`
	TotalUs float64 `json:"total_us"`
}

// Summarize counts res's spans by trace, rank, step, kind and service.
func Summarize(res *Result) Summary {
	s := Summary{Source: res.Source, Format: res.Format, Spans: len(res.Spans), Scenarios: res.Scenarios,
		Partial: res.Partial, SkippedTotal: res.SkippedTotal, Skipped: res.Skipped, Kineto: res.Kineto}
	ranks, steps, svcs := map[int]bool{}, map[int]bool{}, map[string]bool{}
	kinds := map[string]*KindCount{}
	for i := range res.Spans {
		sp := &res.Spans[i]
		if i == 0 || sp.TraceID != res.Spans[i-1].TraceID {
			s.Traces++
		}
		if sp.Service != "" {
			svcs[sp.Service] = true
		}
		if sp.Step >= 0 {
			steps[sp.Step] = true
		}
		if !IsOpSpan(sp) {
			continue
		}
		s.OpSpans++
		if sp.Rank >= 0 {
			ranks[sp.Rank] = true
		}
		k := kinds[sp.OpKind]
		if k == nil {
			k = &KindCount{Kind: sp.OpKind}
			kinds[sp.OpKind] = k
		}
		k.Spans++
		k.TotalUs += float64(sp.Duration) / 1e3
	}
	for r := range ranks {
		s.Ranks = append(s.Ranks, r)
	}
	sort.Ints(s.Ranks)
	for st := range steps {
		s.Steps = append(s.Steps, st)
	}
	sort.Ints(s.Steps)
	for v := range svcs {
		s.Services = append(s.Services, v)
	}
	sort.Strings(s.Services)
	for _, k := range kinds {
		s.Kinds = append(s.Kinds, *k)
	}
	sort.Slice(s.Kinds, func(i, j int) bool { return s.Kinds[i].Kind < s.Kinds[j].Kind })
	return s
}

// MarshalJSON writes the value as plain JSON: a string, number, bool, or
// the array's JSON text; NaN and infinities as strings (JSON has no such
// numbers).
func (v Value) MarshalJSON() ([]byte, error) {
	switch v.typ {
	case TypeString:
		return json.Marshal(v.str)
	case TypeInt:
		return strconv.AppendInt(nil, v.AsInt(), 10), nil
	case TypeFloat:
		f := v.AsFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return json.Marshal(strconv.FormatFloat(f, 'g', -1, 64))
		}
		return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
	case TypeBool:
		return strconv.AppendBool(nil, v.AsBool()), nil
	case TypeArray:
		if json.Valid([]byte(v.str)) {
			return []byte(v.str), nil
		}
		return json.Marshal(v.str)
	}
	return []byte("null"), nil
}
