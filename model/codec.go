package model

import (
	"fmt"
	"strconv"
	"strings"
)

// The text forms of Plan and Workload: String writes them, ParsePlan and
// ParseWorkload read them back (and the key=value spellings people type),
// and MarshalText / UnmarshalText make them the JSON form of both types.

// ParsePlan reads a plan in Plan's String form ("tp8", "tp1-dp8-ep",
// "tp8-dcp2") or the key=value form ("tp=8,ep,dp=2").
func ParsePlan(s string) (Plan, error) {
	var p Plan
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return p, fmt.Errorf("plan is empty: want e.g. tp8 or tp=8")
	}
	for _, part := range strings.FieldsFunc(t, func(r rune) bool { return r == '-' || r == ',' || r == ' ' }) {
		part = strings.ReplaceAll(part, "=", "")
		if part == "ep" {
			p.EP = true
			continue
		}
		var dst *int
		var num string
		switch {
		case strings.HasPrefix(part, "tp"):
			dst, num = &p.TP, part[2:]
		case strings.HasPrefix(part, "dp"):
			dst, num = &p.DP, part[2:]
		case strings.HasPrefix(part, "dcp"):
			dst, num = &p.DCP, part[3:]
		default:
			return p, fmt.Errorf("plan %q: unknown part %q (want tpN, dpN, dcpN, ep)", s, part)
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || n > 1<<16 {
			return p, fmt.Errorf("plan %q: %q needs a positive integer", s, part)
		}
		*dst = n
	}
	return p, nil
}

// ParseWorkload reads a workload in Workload's String form
// ("decode b1 ctx8192 spec2 kv=fp8"; "mtp2" is read as spec2) or the key=value form ("decode
// batch=32 ctx=4096 spec=2 kv=fp8").
func ParseWorkload(s string) (Workload, error) {
	w := Workload{Phase: Decode}
	seen := false
	for _, f := range strings.Fields(strings.ToLower(s)) {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			i := strings.IndexFunc(f, func(r rune) bool { return r >= '0' && r <= '9' })
			if i < 0 {
				key = f
			} else {
				key, val = f[:i], f[i:]
			}
		}
		num := func(dst *int) error {
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return fmt.Errorf("workload %q: %s needs a non-negative integer, got %q", s, key, val)
			}
			*dst = n
			seen = true
			return nil
		}
		var err error
		switch key {
		case "decode":
			w.Phase = Decode
		case "prefill":
			w.Phase = Prefill
		case "b", "batch":
			err = num(&w.Batch)
		case "ctx", "context":
			err = num(&w.Context)
		case "mtp", "spec", "spec_tokens":
			err = num(&w.SpecTokens)
		case "kv":
			// The one KV dtype codec (as --kv-dtype reads it): a weight
			// format such as nvfp4 is refused here, naming the field,
			// not later by Validate.
			d, kerr := ParseKVDtype(val)
			if kerr != nil {
				return w, fmt.Errorf("workload %q: kv %q: %w", s, val, kerr)
			}
			w.KVDtype = d
		default:
			err = fmt.Errorf("workload %q: unknown field %q (want decode|prefill, b/batch, ctx/context, mtp/spec, kv)", s, f)
		}
		if err != nil {
			return w, err
		}
	}
	if !seen {
		return w, fmt.Errorf("workload %q: want e.g. \"decode b1 ctx4096\"", s)
	}
	if err := w.Validate(); err != nil {
		return w, fmt.Errorf("workload %q: %w", s, err)
	}
	return w, nil
}

// MarshalText writes the plan's String form ("tp8-ep").
func (p Plan) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads a plan with ParsePlan.
func (p *Plan) UnmarshalText(b []byte) error {
	v, err := ParsePlan(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// MarshalText writes the workload's String form ("decode b8 ctx4096 kv=fp8").
func (w Workload) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// UnmarshalText reads a workload with ParseWorkload.
func (w *Workload) UnmarshalText(b []byte) error {
	v, err := ParseWorkload(string(b))
	if err != nil {
		return err
	}
	*w = v
	return nil
}
