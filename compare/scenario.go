package compare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tpscope/tpscope/engine"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
	"go.opentelemetry.io/otel/attribute"
)

// Scenarios says which scenario each trace is predicted with. A trace's
// step root records its scenario: the whole value as JSON
// (schema.AttrScenario, read with sim.DecodeScenario), or, in traces
// recorded before that attribute existed, the short attributes (model,
// topology, plan, workload, option names), read with their codecs. The
// root's schema.AttrGraphs says whether the measured steps replayed CUDA
// graphs, and decides the prediction's CUDAGraphs.
type Scenarios struct {
	// Default is the scenario of traces that record none (profiler
	// traces of a serving engine), built from the caller's flags; nil
	// means such traces take their source's only recorded scenario, or
	// are left out and reported.
	Default *sim.Scenario
	// Override changes every recorded scenario before it is predicted
	// (the flags a user set); nil predicts them as recorded.
	Override func(*sim.Scenario) error
	// Topology, when not nil, replaces the recorded box (a calibrated
	// topology the caller resolved).
	Topology *topology.Topology
	// Passed names what the caller set, as the user wrote it ("--topo
	// cpu.json", "--batch 32"): said beside every recorded scenario it
	// changed (Override and Topology) and every scenario built from it
	// (Default), so no field's origin is silent.
	Passed []string
	// DefaultFrom says where Default's fields come from, for traces that
	// record no scenario ("the flags --model kimi-k2.5 --batch 32 ...;
	// tp 8 from the trace's world size").
	DefaultFrom string
	// Fill gives what the caller's flags name for the fields a trace
	// recorded before the whole scenario was (its step root's short
	// attributes) may lack; a field of Fill left nil leaves a missing one
	// an error naming the flags that give it. From says which were filled.
	Fill Fill
}

// Fill is the model, plan and workload the caller's flags name, each nil
// when the flags that give it were not set (Scenarios.Fill).
type Fill struct {
	Arch     *model.Arch
	Plan     *model.Plan
	Workload *model.Workload
}

// Where a scenario's fields come from (ScenarioReport.From).
const (
	FromTrace = "recorded in the trace"
	FromFlags = "from the flags (the trace records no scenario)"
)

// from says where a scenario resolved for a recorded one (recorded true)
// or for a trace without one came from, in words; overridden says the
// flags passed changed the recorded one, filled which fields the trace
// lacked came from elsewhere (resolve).
func (s *Scenarios) from(recorded, overridden bool, filled []string) string {
	if !recorded {
		if s.DefaultFrom != "" {
			return FromFlags + ": " + s.DefaultFrom
		}
		return FromFlags
	}
	from := FromTrace
	if len(filled) > 0 {
		from += "; what its step span lacks: " + strings.Join(filled, ", ")
	}
	if len(s.Passed) == 0 || !overridden {
		return from
	}
	return from + "; overridden by " + strings.Join(s.Passed, ", ")
}

// resolve turns a recorded scenario into the one to predict; unknown lists
// option names of an older trace that sim does not model. overridden is
// false when what the caller passed (Override, Topology) left a recorded
// scenario as it was, the two encoded alike but for the box's name
// (--topo h200-nvswitch over a trace recorded on that box, by that name or
// as nvswitch:8xh200-sxm): nothing was overridden, and from says so.
func (s *Scenarios) resolve(rec *traces.Scenario) (sc sim.Scenario, unknown []string, overridden bool, filled []string, err error) {
	sc, unknown, filled, err = s.resolveScenario(rec)
	if err != nil || (s.Override == nil && s.Topology == nil) {
		return sc, unknown, false, filled, err
	}
	asRecorded := *s
	asRecorded.Override, asRecorded.Topology = nil, nil
	was, _, _, err := asRecorded.resolveScenario(rec)
	if err != nil {
		return sc, unknown, true, filled, nil // the flags were needed (a perf DB's tables)
	}
	if was.Topo.SameBox(sc.Topo) {
		// One box under two names (a preset over its description): the
		// name alone changed, which prices nothing.
		was.Topo, was.TopoRef = sc.Topo, sc.TopoRef
	}
	if was.Arch != nil && sc.Arch != nil && was.Workload.KVDtypeFor(was.Arch) == sc.Workload.KVDtypeFor(sc.Arch) {
		// The KV dtype the trace ran with, named (--kv-dtype bf16 over
		// a trace whose unnamed cache was the checkpoint's bf16): the
		// same cache, priced alike.
		was.Workload.KVDtype, was.KVDefault = sc.Workload.KVDtype, sc.KVDefault
	}
	a, errA := json.Marshal(was)
	b, errB := json.Marshal(sc)
	return sc, unknown, errA != nil || errB != nil || !bytes.Equal(a, b), filled, nil
}

// Recorded is the scenario rec records, read as resolve reads it (on the
// caller's Topology when set) but without Override: what the trace
// measured, for a caller to hold its flags against before any work.
func (s *Scenarios) Recorded(rec *traces.Scenario) (sim.Scenario, error) {
	sc, _, _, err := s.decode(rec)
	return sc, err
}

// resolveScenario is resolve's scenario.
func (s *Scenarios) resolveScenario(rec *traces.Scenario) (sc sim.Scenario, unknown, filled []string, err error) {
	if sc, unknown, filled, err = s.decode(rec); err != nil {
		if rec.JSON != "" {
			// The recorded value that would not read, named as the
			// trace holds it.
			err = fmt.Errorf("the step span's %s: %w", schema.AttrScenario, err)
		}
		return sc, nil, nil, err
	}
	if s.Override != nil {
		if err := s.Override(&sc); err != nil {
			return sc, nil, nil, err
		}
	}
	if err := checkBackend(rec.Backend, sc.Topo); err != nil {
		return sc, nil, nil, err
	}
	if err := checkGPU(rec.GPU, sc.Topo); err != nil {
		return sc, nil, nil, err
	}
	if err := checkCosts(&sc); err != nil {
		return sc, nil, nil, err
	}
	return sc, unknown, filled, nil
}

// decode reads the scenario rec records, on s.Topology when set; filled
// says which fields an older trace lacked and where they came from
// (legacy).
func (s *Scenarios) decode(rec *traces.Scenario) (sc sim.Scenario, unknown, filled []string, err error) {
	if rec.JSON != "" {
		if sc, err = sim.DecodeScenario([]byte(rec.JSON), s.Topology); err != nil {
			return sc, nil, nil, err
		}
		if rec.Backend != "" && sc.Options.Engine.IsZero() {
			// Recorded by tpscope's executor before scenarios named their
			// engine: its kernels ran, not a serving engine's.
			sc.Options.Engine = engine.ExecutorRef
		}
	} else if sc, unknown, filled, err = s.legacy(rec); err != nil {
		return sc, nil, nil, err
	}
	if rec.Graphs != "" {
		sc.Options.CUDAGraphs = rec.Graphs == "true"
	}
	return sc, unknown, filled, nil
}

// checkCosts refuses to re-predict a scenario recorded with a cost source
// (a perf DB) from other tables or none: its predicted times would not
// be the ones the run recorded.
func checkCosts(sc *sim.Scenario) error {
	rec := sc.CostsName
	if rec == "" {
		return nil
	}
	switch {
	case sc.Costs == nil:
		return fmt.Errorf("the trace was priced with %s: pass --perf-db with those tables (and --perf-db-transfer for a transfer)", rec)
	case sc.Costs.Name() != rec:
		return fmt.Errorf("the trace was priced with %s; --perf-db gives %s", rec, sc.Costs.Name())
	}
	return nil
}

// legacy reads a scenario from the short step-root attributes. A model,
// plan or workload the step span lacks is taken from s.Fill (the
// caller's flags) where it has one, and filled says so; without one it is
// an error naming the flags that give it. A span that names no box is
// priced on s.Topology, or on the default box, and filled says that too.
func (s *Scenarios) legacy(rec *traces.Scenario) (sc sim.Scenario, unknown, filled []string, err error) {
	var lacks MissingError
	if rec.Model == "" && s.Fill.Arch == nil {
		lacks.add(schema.AttrModel, "--model")
	}
	if rec.Plan == "" && s.Fill.Plan == nil {
		lacks.add(schema.AttrPlan, "--tp (and --dp, --ep, --dcp as it ran)")
	}
	if rec.Workload == "" && s.Fill.Workload == nil {
		lacks.add(schema.AttrWorkload, "--batch and --context (and --phase for a prefill step)")
	}
	if len(lacks.Attrs) > 0 {
		return sc, nil, nil, &lacks
	}
	var a *model.Arch
	switch {
	case rec.Model != "":
		if a, err = model.Resolve(rec.Model); err != nil {
			return sc, nil, nil, fmt.Errorf("recorded model %q: %w", rec.Model, err)
		}
	default:
		a = s.Fill.Arch
		filled = append(filled, "model "+a.Name+" from --model")
	}
	var p model.Plan
	switch {
	case rec.Plan != "":
		if p, err = model.ParsePlan(rec.Plan); err != nil {
			return sc, nil, nil, fmt.Errorf("recorded %w", err)
		}
		if err := p.Validate(a); err != nil {
			return sc, nil, nil, fmt.Errorf("recorded plan %q: %w", rec.Plan, err)
		}
	default:
		p = *s.Fill.Plan
		if err := p.Validate(a); err != nil {
			return sc, nil, nil, fmt.Errorf("plan %s from --tp/--dp/--ep/--dcp: %w", p, err)
		}
		filled = append(filled, "plan "+p.String()+" from --tp/--dp/--ep/--dcp")
	}
	var w model.Workload
	switch {
	case rec.Workload != "":
		if w, err = model.ParseWorkload(rec.Workload); err != nil {
			return sc, nil, nil, fmt.Errorf("recorded %w", err)
		}
	default:
		w = *s.Fill.Workload
		filled = append(filled, "workload "+w.String()+" from --phase/--batch/--context")
	}
	o, unknown, err := sim.ParseNames(traces.OptionNames(rec.Options))
	if err != nil {
		return sc, nil, nil, fmt.Errorf("recorded options %q: %w", rec.Options, err)
	}
	if rec.Backend != "" {
		// A trace with a backend is tpscope's executor's: the schedule's
		// kernels only; its CUDA backend has always bracketed each op with
		// two timing events. Traces from before the scenario JSON do not
		// say.
		o.Engine = engine.ExecutorRef
		if rec.Backend == "cuda" {
			o.TimingEventsPerOp = 2
		}
	}
	sc = sim.Scenario{Arch: a, Plan: p, Workload: w, Options: o, Topo: s.Topology}
	if sc.Topo == nil {
		if sc.TopoRef, err = topology.NewRef(rec.Topology, 0); err != nil {
			return sc, nil, nil, err
		}
		if sc.Topo, err = sc.TopoRef.Resolve(); err != nil {
			return sc, nil, nil, fmt.Errorf("recorded topology %q: %w (pass --topo)", rec.Topology, err)
		}
		if rec.Topology == "" {
			filled = append(filled, "box "+sc.TopoRef.String()+", the default (pass --topo with the box it ran on)")
		}
	}
	return sc, unknown, filled, nil
}

// MissingError is an older trace's step span (short attributes, no
// scenario JSON) that lacks fields no flag filled (Scenarios.Fill): the
// attributes, and the flags that give each.
type MissingError struct {
	Attrs []attribute.Key
	Flags []string
}

func (e *MissingError) add(k attribute.Key, flags string) {
	e.Attrs, e.Flags = append(e.Attrs, k), append(e.Flags, flags)
}

func (e *MissingError) Error() string {
	attrs := make([]string, len(e.Attrs))
	for i, k := range e.Attrs {
		attrs[i] = string(k)
	}
	return fmt.Sprintf("the trace's step span lacks %s: pass %s", strings.Join(attrs, ", "), strings.Join(e.Flags, "; "))
}

// checkBackend refuses a CPU run priced on a GPU box and a GPU run priced
// on a CPU calibration: either would be priced silently wrong.
func checkBackend(backend string, t *topology.Topology) error {
	if t == nil || len(t.Devices) == 0 {
		return nil
	}
	cpuBox := t.IsCPUBox()
	switch {
	case backend == "cpu" && !cpuBox:
		return fmt.Errorf("a CPU run (%s cpu) compared against the GPU box %s: pass --topo with the JSON 'tpscope calibrate --backend cpu' wrote", schema.AttrBackend, t.Name)
	case backend != "" && backend != "cpu" && cpuBox:
		return fmt.Errorf("a %s run compared against the CPU calibration %s: pass --topo with the GPU box", backend, t.Name)
	}
	return nil
}

// checkGPU refuses to predict a run on a box of another GPU than the one
// it ran on (by the catalog entry each name stands for: "NVIDIA H100 80GB
// HBM3" is an H100 SXM): the measured and predicted steps would be of two
// machines. A GPU the trace does not name, or the catalog does not know,
// is not checked.
func checkGPU(ran string, t *topology.Topology) error {
	if same, known := t.RunsOn(ran); same || !known {
		return nil
	}
	return fmt.Errorf("the trace ran on %s (%s) and the box %s has %s: pass --topo with a box of that GPU", ran, schema.ResGPUModel, t.Name, t.DeviceOf(0).Name)
}

// scenarioKey is the scenario's encoding: two traces of one scenario share
// it.
func scenarioKey(sc sim.Scenario) string {
	b, err := sc.MarshalJSON()
	if err != nil {
		return sc.String()
	}
	return string(b)
}

// baseKey is scenarioKey without the options: two scenarios with one base
// key differ only by run-time options.
func baseKey(sc sim.Scenario) string {
	sc.Options = sim.Options{}
	return scenarioKey(sc)
}

// errNoScenario: a trace without a step root and no scenario to give it.
var errNoScenario = errors.New("trace without a step root span and no scenario given (pass --model, --tp, --batch, --context and --topo, or record the trace with tpscope run)")

// runBatchIssue says when the schedule rebuilt for a trace does not run
// the step the trace recorded: other tokens per DP group (capture sizes
// changed since, say), or, in a trace recorded when graphs padded whole
// sequences, another batch.
func runBatchIssue(sc *sim.Scenario, s *model.Schedule) string {
	if sc.RunTokens > 0 && s.Deploy.TokensPerGroup != sc.RunTokens {
		return "the trace ran " + strconv.FormatInt(sc.RunTokens, 10) + " tokens per DP group; the scenario now builds " + strconv.FormatInt(s.Deploy.TokensPerGroup, 10)
	}
	if sc.RunBatch > 0 && s.Workload.Batch != sc.RunBatch {
		return "the trace ran batch " + strconv.Itoa(sc.RunBatch) + " (CUDA-graph padding as whole sequences); the scenario now builds batch " +
			strconv.Itoa(s.Workload.Batch) + " (padding as tokens)"
	}
	return ""
}
