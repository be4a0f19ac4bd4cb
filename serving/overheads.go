package serving

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// Overheads are what a serving engine spends outside the GPU step that
// sim prices, the terms a static step model cannot know: the host's work
// between steps, the per-request share of scheduling and sampling, how
// fast the engine's prefill kernels really run against sim's prices, and
// the API server in front of the engine. The zero value adds nothing;
// calibrate --serving fits them from measured benchmark results
// (Calibrate), and a saved calibration is passed back with
// --serving-overheads.
//
// A step of the simulation lasts
//
//	StepUs + PerSeqUs x (requests in the step) + DecodeScale x decode part + PrefillScale x prefill part
//	  [+ PrefillStepUs when it holds prefill tokens]
//
// where the decode part is the price of the step's decode tokens alone
// and the prefill part the step's price less it (sim.IterationCoster,
// both memoized), and a request reaches the scheduler FrontendMs after
// the client sends it (tokenization, HTTP and the engine's input
// processing), which TTFT and end-to-end latency include.
type Overheads struct {
	// StepUs is host time per engine step in microseconds (input
	// preparation, the scheduler's own pass, launching the step) that the
	// GPU does not hide.
	StepUs float64 `json:"step_us,omitempty"`
	// PerSeqUs is host time per request in a step in microseconds
	// (sampling, detokenization and streaming of its token).
	PerSeqUs float64 `json:"per_seq_us,omitempty"`
	// PrefillScale multiplies the prefill part of every step (0 = 1): the
	// engine's prefill kernels and chunking against sim's prices.
	PrefillScale float64 `json:"prefill_scale,omitempty"`
	// PrefillStepUs is host time in microseconds of every step that holds
	// prefill tokens, beyond sim's price of it: an engine that runs such a
	// step eagerly (SGLang's extend batches) spends its framework's time
	// per launched op, whatever the tokens. Unlike the frontend, it holds
	// the running requests' decode as well.
	PrefillStepUs float64 `json:"prefill_step_us,omitempty"`
	// DecodeScale multiplies the decode part of every step (0 = 1): the
	// engine's decode kernels against sim's prices, the step model's own
	// error, which shows as a ratio at every load where a host cost per
	// step shows as a difference.
	DecodeScale float64 `json:"decode_scale,omitempty"`
	// FrontendMs is the time from the client sending a request to the
	// scheduler seeing it, in milliseconds.
	FrontendMs float64 `json:"frontend_ms,omitempty"`
}

// Bounds of the overheads (Validate): far beyond any engine, so that a
// fit that wanders out is refused rather than simulated.
const (
	maxOverheadStepUs   = 1e6
	maxOverheadPerSeqUs = 1e5
	maxPrefillScale     = 100
	maxDecodeScale      = 100
	maxFrontendMs       = 1e5
)

// Validate checks every field is finite and within its bound; the error
// names the field.
func (o Overheads) Validate() error {
	check := func(name string, v, hi float64) error {
		if !(v >= 0 && v <= hi) {
			return fmt.Errorf("overheads: %s = %v: want 0 to %g", name, v, hi)
		}
		return nil
	}
	for _, c := range []struct {
		name  string
		v, hi float64
	}{
		{"step_us", o.StepUs, maxOverheadStepUs},
		{"per_seq_us", o.PerSeqUs, maxOverheadPerSeqUs},
		{"prefill_scale", o.PrefillScale, maxPrefillScale},
		{"prefill_step_us", o.PrefillStepUs, maxOverheadStepUs},
		{"decode_scale", o.DecodeScale, maxDecodeScale},
		{"frontend_ms", o.FrontendMs, maxFrontendMs},
	} {
		if err := check(c.name, c.v, c.hi); err != nil {
			return err
		}
	}
	return nil
}

// IsZero reports whether the overheads add nothing.
func (o Overheads) IsZero() bool {
	return o.StepUs == 0 && o.PerSeqUs == 0 && o.PrefillStepUs == 0 && o.prefillScale() == 1 && o.decodeScale() == 1 && o.FrontendMs == 0
}

// prefillScale is PrefillScale with 0 read as 1.
func (o Overheads) prefillScale() float64 { return oneIfZero(o.PrefillScale) }

// decodeScale is DecodeScale with 0 read as 1.
func (o Overheads) decodeScale() float64 { return oneIfZero(o.DecodeScale) }

func oneIfZero(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}

// splitsParts reports whether a step's price must be split into its
// decode and prefill parts: it has both and a scale tells them apart.
func (o Overheads) splitsParts(hasPrefill, hasDecode bool) bool {
	return hasPrefill && hasDecode && o.prefillScale() != o.decodeScale()
}

// String is the overheads in one phrase.
func (o Overheads) String() string {
	if o.IsZero() {
		return "none"
	}
	return fmt.Sprintf("step %.0f us, per request %.1f us, decode x%.3f, prefill x%.3f, prefill step %.0f us, frontend %.1f ms", o.StepUs, o.PerSeqUs, o.decodeScale(), o.prefillScale(), o.PrefillStepUs, o.FrontendMs)
}

// OverheadsFile is the JSON a calibration writes: the overheads and where
// they came from.
type OverheadsFile struct {
	Overheads Overheads `json:"overheads"`
	// FittedOn is the deployment they were fitted on; nil in a file
	// written before it was recorded, or a bare Overheads object.
	FittedOn *OverheadsOrigin `json:"fitted_on,omitempty"`
	// Source says what they were fitted on (files, load levels) and how
	// well.
	Source []string `json:"source,omitempty"`
}

// OverheadsOrigin is the deployment overheads were fitted on. Its terms
// are that engine's host time and its kernels' error against the step
// model on that GPU for that model: they describe another engine or GPU
// no better than none.
type OverheadsOrigin struct {
	// Engine is the engine profile that priced and scheduled the fit
	// ("sglang@0.5").
	Engine engprof.Ref `json:"engine"`
	// Topology is the box's name, GPU its GPU's ("NVIDIA B200").
	Topology string `json:"topology"`
	GPU      string `json:"gpu"`
	// Model is the architecture: a preset's name or a config's absolute
	// path (model.Ref.String).
	Model string `json:"model"`
	// Plan is the parallel plan (model.Plan.String: "tp8-ep"); Attention
	// and MoEKernel the attention backend and fused-MoE kernel the engine
	// ran the steps with (sim.Predictor.Kernels: a decode scale fitted on
	// one kernel's error is not another's); Options the run-time options
	// but the engine (sim.Options.Label). Empty in a file written before
	// they were recorded, and then not compared.
	Plan      string `json:"plan,omitempty"`
	Attention string `json:"attention,omitempty"`
	MoEKernel string `json:"moe_kernel,omitempty"`
	Options   string `json:"options,omitempty"`
	// KVDtype is the KV cache's dtype (the checkpoint's where the
	// workload names none): the attention kernels read it, so a decode
	// scale fitted over one cache is another kernel's error over the
	// other. Scheduler is the scheduler's settings (EngineOptions.Label):
	// they decide which steps ran and how long requests waited, which the
	// host times were fitted to. Empty in a file written before they were
	// recorded, and then not compared.
	KVDtype   string `json:"kv_dtype,omitempty"`
	Scheduler string `json:"scheduler,omitempty"`
}

// Differences lists, one phrase each, how the deployment o describes
// differs from here, beyond the engine's name and the GPU (which overheads
// must share, and their user checks first): the engine's version, the
// box, the model, and where o records them the plan, the attention
// backend, the MoE kernel and the options; unrecorded is true when o does
// not record those (a file written before they were).
func (o OverheadsOrigin) Differences(here OverheadsOrigin) (out []string, unrecorded bool) {
	for _, f := range []struct{ what, from, here string }{
		{"engine", o.Engine.String(), here.Engine.String()},
		{"box", o.Topology, here.Topology},
		{"model", o.Model, here.Model},
	} {
		if f.from != f.here {
			out = append(out, fmt.Sprintf("%s %s, not %s", f.what, f.from, f.here))
		}
	}
	if o.Plan == "" {
		return out, true
	}
	for _, f := range []struct {
		what, from, here string
		later            bool // recorded since: not compared when absent
	}{
		{"plan", o.Plan, here.Plan, false},
		{"attention", o.Attention, here.Attention, false},
		{"MoE kernel", o.MoEKernel, here.MoEKernel, false},
		{"options", o.Options, here.Options, false},
		{"KV dtype", o.KVDtype, here.KVDtype, true},
		{"scheduler", o.Scheduler, here.Scheduler, true},
	} {
		if f.from != f.here && !(f.later && f.from == "") {
			out = append(out, fmt.Sprintf("%s %s, not %s", f.what, orNone(f.from), orNone(f.here)))
		}
	}
	return out, false
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// OriginOf is the origin of overheads fitted on sc under engine, its
// scheduler set by eng.
func OriginOf(sc sim.Scenario, engine engprof.Ref, eng EngineOptions) OverheadsOrigin {
	o := OverheadsOrigin{Engine: engine, Plan: sc.Plan.Normalized().String()}
	var dev *topology.Device
	if sc.Topo != nil {
		dev = sc.Topo.DeviceOf(0)
	}
	var sched *engprof.SchedulerFacts
	prof, err := engprof.Lookup(engine)
	if err == nil {
		sched = &prof.Scheduler
	} else {
		prof = nil
	}
	var p *sim.Predictor
	if sc.Topo != nil && sc.Arch != nil {
		if pr, err := sc.NewPredictor(); err == nil {
			p = pr
			o.Attention, o.MoEKernel = p.Kernels(sc)
		}
	}
	if paged, _, err := withBackendPage(eng, p, sc, prof); err == nil {
		eng = paged // a block size the engine refuses is named as given
	}
	maxModelLen := 0
	if sc.Arch != nil {
		maxModelLen = sc.Arch.MaxModelLenTokens
	}
	o.Scheduler = eng.Label(dev, sched, maxModelLen)
	if sc.Arch != nil {
		o.KVDtype = string(sc.Workload.KVDtypeFor(sc.Arch))
	}
	opts := sc.Options
	opts.Engine = engprof.Ref{} // the origin's own field
	// The scheduler's limits are the scheduler's label's, resolved.
	opts.MaxNumBatchedTokens, opts.MaxNumSeqs = 0, 0
	o.Options = opts.Label()
	if t := sc.Topo; t != nil {
		o.Topology = t.Name
		if d := t.DeviceOf(0); d != nil {
			o.GPU = d.Name
		}
	}
	if a := sc.Arch; a != nil {
		if o.Model = a.Ref.String(); o.Model == "" {
			o.Model = a.Name
		}
	}
	return o
}

// LoadOverheadsFile reads an OverheadsFile (or a bare Overheads object,
// with no origin).
func LoadOverheadsFile(path string) (OverheadsFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return OverheadsFile{}, fmt.Errorf("overheads: %w", err)
	}
	return ReadOverheadsFile(data, path)
}

// ReadOverheadsFile parses an OverheadsFile (or a bare Overheads object)
// named path; errors are a *ParseError naming the file and field.
// overheadTerms are Overheads' JSON keys.
var overheadTerms = []string{"step_us", "per_seq_us", "prefill_scale", "prefill_step_us", "decode_scale", "frontend_ms"}

func ReadOverheadsFile(data []byte, path string) (OverheadsFile, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return OverheadsFile{}, &ParseError{File: path, Line: 1, Err: fmt.Errorf("want a JSON object%s", jsonWhy(err))}
	}
	var f OverheadsFile
	body := data
	if b, ok := raw["overheads"]; ok {
		body = b
	}
	// A key the file's schema does not name is refused: a misspelt
	// term ("decode_scal") or wrapper ("overhead") read as none applied
	// zero overheads without a word. A bare object holds the terms
	// beside fitted_on and source.
	_, wrapped := raw["overheads"]
	terms := raw // the object holding the terms
	if wrapped {
		for _, k := range slices.Sorted(maps.Keys(raw)) {
			if k != "overheads" && k != "fitted_on" && k != "source" {
				return OverheadsFile{}, &ParseError{File: path, Line: 1, Field: k, Err: errors.New("unknown field: want overheads, fitted_on and source")}
			}
		}
		terms = nil
		if err := json.Unmarshal(body, &terms); err != nil {
			return OverheadsFile{}, &ParseError{File: path, Line: 1, Field: "overheads", Err: errors.New("want an object of the numbers " + strings.Join(overheadTerms, ", "))}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(terms)) {
		if !wrapped && (k == "fitted_on" || k == "source") || slices.Contains(overheadTerms, k) {
			continue
		}
		if wrapped {
			return OverheadsFile{}, &ParseError{File: path, Line: 1, Field: "overheads." + k, Err: fmt.Errorf("unknown field: want the terms %s", strings.Join(overheadTerms, ", "))}
		}
		return OverheadsFile{}, &ParseError{File: path, Line: 1, Field: k, Err: fmt.Errorf("unknown field: want overheads, fitted_on and source (or the terms %s at the top)", strings.Join(overheadTerms, ", "))}
	}
	// A file of neither form (no "overheads" object, no term at the top:
	// {} or a fitted file that lost its "overheads") is no overheads, not
	// overheads of zero.
	if !wrapped && !slices.ContainsFunc(overheadTerms, func(k string) bool { _, ok := terms[k]; return ok }) {
		return OverheadsFile{}, &ParseError{File: path, Line: 1, Field: "overheads", Err: fmt.Errorf("missing: want the object calibrate --serving -o writes (or the terms %s at the top)", strings.Join(overheadTerms, ", "))}
	}
	if err := json.Unmarshal(body, &f.Overheads); err != nil {
		return OverheadsFile{}, &ParseError{File: path, Line: 1, Field: "overheads", Err: errors.New("want an object of the numbers step_us, per_seq_us, prefill_scale, prefill_step_us, decode_scale, frontend_ms")}
	}
	if err := f.Overheads.Validate(); err != nil {
		return OverheadsFile{}, &ParseError{File: path, Line: 1, Err: err}
	}
	if b, ok := raw["fitted_on"]; ok && string(b) != "null" {
		var o OverheadsOrigin
		if err := json.Unmarshal(b, &o); err != nil || o.Engine.IsZero() || o.GPU == "" || o.Model == "" {
			return OverheadsFile{}, &ParseError{File: path, Line: 1, Field: "fitted_on", Err: errors.New("want an object of the strings engine (NAME@VERSION), topology, gpu and model")}
		}
		f.FittedOn = &o
	}
	if b, ok := raw["source"]; ok {
		_ = json.Unmarshal(b, &f.Source) // prose: kept when it reads as strings
	}
	return f, nil
}

// stepS is the duration in seconds of a step whose iteration sim prices
// at us microseconds (decodeUs its decode tokens alone, meaningful when
// splitsParts), serving seqs requests.
func (o Overheads) stepS(us, decodeUs float64, hasPrefill, hasDecode bool, seqs int) float64 {
	switch {
	case o.splitsParts(hasPrefill, hasDecode):
		us = o.decodeScale()*decodeUs + o.prefillScale()*math.Max(0, us-decodeUs)
	case hasPrefill:
		us *= o.prefillScale()
	default:
		us *= o.decodeScale()
	}
	if hasPrefill {
		us += o.PrefillStepUs
	}
	return (us + o.StepUs + o.PerSeqUs*float64(seqs)) * 1e-6
}
