package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// Saved is a result a verb wrote with --output json: exactly one of its
// fields is set.
type Saved struct {
	Advice *advise.Advice // tpscope advise --output json
	// Prediction is 'tpscope predict --output json': the predicted step
	// without its schedule (no collective is linked across ranks).
	Prediction *sim.Prediction
	// Comparison is 'tpscope compare --output json'. Its scenarios hold
	// their model and box by reference (Scenario.Arch has just its
	// Ref, Scenario.TopoRef is set): enough to name
	// them, without reading configs or topology files that may live on
	// another machine; Scenario.Topo is the box it recorded by value,
	// where it did. It has no prediction or spans to draw.
	Comparison *compare.Report
}

// savedRefs are the references a saved comparison's scenarios record
// (sim.Scenario's JSON: "model" a model.Ref, "topology" a topology.Ref).
type savedRefs struct {
	Scenarios []struct {
		Scenario struct {
			Model    model.Ref    `json:"model"`
			Topology topology.Ref `json:"topology"`
			// The box by value, as the scenario was priced on it.
			Box       json.RawMessage `json:"box"`
			BoxSHA256 string          `json:"box_sha256"`
		} `json:"scenario"`
	} `json:"scenarios"`
}

// maxSavedBytes bounds a saved result read into memory (a compare JSON of
// a large run is a few MB).
const maxSavedBytes = 256 << 20

// ReadSaved reads the JSON of `tpscope advise --output json`, `tpscope
// compare --output json` or `tpscope predict --output json` from r; name
// (the file) is used in errors. The kind is told by the top-level keys:
// advice has "baseline" and "rows", a comparison "sources" and
// "scenarios", a prediction "ops" and "step_us". Anything else is an error
// that says what was found and what is expected.
func ReadSaved(r io.Reader, name string) (*Saved, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSavedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > maxSavedBytes {
		return nil, fmt.Errorf("%s: larger than %d MB: not a saved advise, compare or predict result", name, maxSavedBytes>>20)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		if err := savedTrace(data, name); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: not a JSON object (want the output of 'tpscope advise', 'compare' or 'predict' with --output json): %w", name, err)
	}
	decode := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	switch savedKindOf(top) {
	case kindAdvise:
		var a advise.Advice
		if err := decode(&a); err != nil {
			return nil, fmt.Errorf("advise result %w", err)
		}
		if a.Baseline == nil {
			return nil, fmt.Errorf("%s: advise result without a baseline (field \"baseline\" is null)", name)
		}
		if err := checkSavedAdvice(&a); err != nil {
			return nil, fmt.Errorf("advise result %s: %w", name, err)
		}
		return &Saved{Advice: &a}, nil
	case kindCompare:
		// sim.Scenario has no JSON decoder of its own (sim.DecodeScenario
		// resolves the references): plan, workload, build and options
		// decode through their codecs, the references separately.
		var c compare.Report
		var refs savedRefs
		if err := decode(&c); err != nil {
			return nil, fmt.Errorf("compare result %w", err)
		}
		if err := decode(&refs); err != nil {
			return nil, fmt.Errorf("compare result %w", err)
		}
		for i := range c.Scenarios {
			r := refs.Scenarios[i].Scenario
			if r.Model.Name != "" || r.Model.Path != "" {
				c.Scenarios[i].Scenario.Arch = &model.Arch{Ref: r.Model}
			}
			c.Scenarios[i].Scenario.TopoRef = r.Topology
			if len(r.Box) > 0 {
				// The box it was priced on names it, as compare named
				// it (a file's path names a box only on the machine that
				// read it).
				t, err := sim.DecodeRecordedBox(r.Topology, r.Box, r.BoxSHA256)
				if err != nil {
					return nil, fmt.Errorf("compare result %s: scenarios[%d]: %w", name, i, err)
				}
				c.Scenarios[i].Scenario.Topo = t
			}
		}
		return &Saved{Comparison: &c}, nil
	case kindPredict:
		var p sim.Prediction
		if err := decode(&p); err != nil {
			return nil, fmt.Errorf("prediction %w", err)
		}
		if err := checkSavedPrediction(&p); err != nil {
			return nil, fmt.Errorf("prediction %s: %w", name, err)
		}
		return &Saved{Prediction: &p}, nil
	}
	if err := savedTrace(data, name); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 8 {
		keys = append(keys[:8], "...")
	}
	return nil, fmt.Errorf("%s: a JSON object with keys %s; want the output of 'tpscope advise --output json' (keys baseline, rows), 'tpscope compare --output json' (keys sources, scenarios) or 'tpscope predict --output json' (keys ops, step_us)", name, strings.Join(keys, ", "))
}

// The kinds of saved result, as SavedKind names them.
const (
	kindAdvise  = "advise"
	kindCompare = "compare"
	kindPredict = "predict"
)

// savedKindOf tells a saved result's kind by its top-level keys: advice
// has "baseline" and "rows", a comparison "sources" and "scenarios", a
// prediction "ops" and "step_us"; "" for none.
func savedKindOf(top map[string]json.RawMessage) string {
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := top[k]; !ok {
				return false
			}
		}
		return true
	}
	switch {
	case has("baseline", "rows"):
		return kindAdvise
	case has("sources", "scenarios"):
		return kindCompare
	case has("ops", "step_us"):
		return kindPredict
	}
	return ""
}

// SavedKind is the verb whose --output json data is ("advise", "compare"
// or "predict", as ReadSaved tells them), "" when it is none: for a verb
// that reads other documents (a trace) to say that a file it was given is
// a saved result, which report --from reads.
func SavedKind(data []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return ""
	}
	return savedKindOf(top)
}

// savedTrace is the error for data that is a trace (OTLP JSON lines, a
// gzip Kineto file, ...), not a saved result: what it is and where the
// report takes it, where the JSON error ("invalid character '{' after
// top-level value") or the list of its keys said neither; nil otherwise.
func savedTrace(data []byte, name string) error {
	f := traces.Sniff(data)
	if f == "" {
		return nil
	}
	return fmt.Errorf("%s: a trace (%s), not a saved advise, compare or predict result: the report reads traces with --trace", name, f)
}

// maxSavedRanks bounds the ranks of a saved prediction's plan: the
// timeline draws a lane per rank (a box of 4096 GPUs is far beyond what
// one step's report can show).
const maxSavedRanks = 4096

// checkSavedPrediction rejects a prediction whose indices or times the
// report cannot draw, naming the field.
func checkSavedPrediction(p *sim.Prediction) error {
	pl := p.Plan.Normalized()
	world := 0
	if pl.TP >= 1 && pl.TP <= maxSavedRanks && pl.DP >= 1 && pl.DP <= maxSavedRanks { // no overflow in TP x DP
		world = pl.World()
	}
	switch {
	case len(p.Ops) == 0:
		return errors.New(`"ops" is empty: want the predicted ops`)
	case world < 1 || world > maxSavedRanks:
		return fmt.Errorf(`"plan" %s: want 1 to %d ranks (TP x DP)`, p.Plan, maxSavedRanks)
	case p.StepUs < 0:
		return fmt.Errorf(`"step_us" %v: want a time >= 0`, p.StepUs)
	}
	for i := range p.Ops {
		op := &p.Ops[i]
		switch {
		case op.Rank < 0 || op.Rank >= world || (p.Symmetric && op.Rank != 0):
			return fmt.Errorf(`"ops"[%d] (%s): rank %d: want 0 to %d (0 when "symmetric")`, i, op.ID, op.Rank, world-1)
		case op.StartUs < 0 || op.Us < 0:
			return fmt.Errorf(`"ops"[%d] (%s): start_us %v, us %v: want times >= 0`, i, op.ID, op.StartUs, op.Us)
		}
	}
	for _, f := range []struct {
		name string
		idx  []int
	}{{"top_ops", p.TopOps}, {"critical_path", p.CriticalPath}} {
		for k, i := range f.idx {
			if i < 0 || i >= len(p.Ops) {
				return fmt.Errorf(`"%s"[%d] = %d: want an index into the %d ops`, f.name, k, i, len(p.Ops))
			}
		}
	}
	return nil
}

// checkSavedAdvice rejects an advice whose variants lost their step time
// or throughput, naming the field: every variant advise writes is a
// priced step (time and tokens/s above 0), and one without them drew
// "step 0.00 ms" and speedups against zero.
func checkSavedAdvice(a *advise.Advice) error {
	check := func(field string, v *advise.Variant) error {
		switch {
		case v == nil:
			return nil
		case !(v.StepUs > 0):
			return fmt.Errorf(`"%s.step_us" %v: want the step's time in us, above 0 (missing from the file?)`, field, v.StepUs)
		case !(v.TokensPerS > 0):
			return fmt.Errorf(`"%s.tokens_per_s" %v: want the step's throughput, above 0 (missing from the file?)`, field, v.TokensPerS)
		}
		return nil
	}
	if err := check("baseline", a.Baseline); err != nil {
		return err
	}
	if err := check("stock", a.Stock); err != nil {
		return err
	}
	for i := range a.Rows {
		r := &a.Rows[i]
		for _, v := range []struct {
			side string
			v    *advise.Variant
		}{{"with", r.With}, {"without", r.Without}} {
			if err := check(fmt.Sprintf("rows[%d].%s", i, v.side), v.v); err != nil {
				return fmt.Errorf("%w (entry %q)", err, r.Entry)
			}
		}
	}
	return nil
}

// ReadSavedFile is ReadSaved of a file.
func ReadSavedFile(path string) (*Saved, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadSaved(f, path)
}
