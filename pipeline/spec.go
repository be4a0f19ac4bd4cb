package pipeline

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces/schema"
)

// Spec is one run: what to run, on which backend, for how long, and where
// its spans go. The zero value of a field is its default, as noted.
type Spec struct {
	// Scenario is what runs: its schedule (sim.BuildSchedule), its
	// prediction on Scenario.Topo (with Predict) and the backend's settings
	// (BackendConfig) all come from it.
	Scenario sim.Scenario
	// Backend is a registered backend's name (exec.Backends).
	Backend string
	// Seed seeds the backend's weights, inputs and MoE routing.
	Seed int64
	// Steps is the number of measured steps (0: exec.DefaultSteps);
	// Warmup the warm-up steps run before them (0: none).
	Steps, Warmup int
	// LocalRanks are the ranks to run (nil: every rank of the plan).
	LocalRanks []int
	// Watchdog bounds how long a rank waits for its peers (0: the
	// backend's default).
	Watchdog time.Duration
	// ScheduleScale is the factor the model's widths were divided by
	// (model.ScaleArch) before Scenario was made, recorded on the spans
	// (0 or 1: not scaled).
	ScheduleScale float64
	// Predict prices the schedule on Scenario.Topo; each op span then
	// carries its predicted time.
	Predict bool
	// Trace is the span destination traces.Setup takes (file:PATH,
	// otlp://HOST:PORT, otlphttp://HOST:PORT, none; "" the
	// OTEL_EXPORTER_OTLP_* variables).
	Trace string
}

// Prepared is a Spec made ready to run: the scenario as run, its schedule
// and prediction, and the backend built with its configuration. Nothing
// has run yet; a caller may still refuse the run (a memory estimate, a
// fault that does not fit the schedule) before Runner.Run.
type Prepared struct {
	Spec Spec
	// Scenario is Spec.Scenario as run: the executor's kernels
	// (Options.Engine = executor), the backend's timing events per op, and
	// RunTokens the tokens per DP group the schedule's token ops run (the
	// captured size under a CUDA graph).
	Scenario sim.Scenario
	// Schedule is what every rank runs; its Deploy says whether the step
	// is captured and replayed as a CUDA graph, and of how many tokens.
	Schedule *model.Schedule
	// Prediction is the whole scenario's prediction (nil without
	// Spec.Predict); PredictedUs its predicted span per op ID on the
	// first rank it holds (PredictedByOpID).
	Prediction  *sim.Prediction
	PredictedUs map[string]float64
	// Backend is the backend, built with BackendConfig.
	Backend       exec.Backend
	BackendConfig exec.BackendConfig
	// Capabilities are what the backend says a run can show there.
	Capabilities Capabilities

	scenarioJSON []byte
}

// Capabilities are what a backend says, before a run, about what its runs
// can show: a setting that changes nothing where it runs cannot be
// measured there.
type Capabilities struct {
	// CollectiveSettings: NCCL's settings and the choice of all-reduce
	// change what the ranks run (exec.CollectiveSettingsReader; a backend
	// that does not say is taken to read them).
	CollectiveSettings bool
	// Graphs: steps are captured and replayed as CUDA graphs when asked
	// (exec.GraphSupporter; a backend that does not say is taken to).
	Graphs bool
	// MultiProcess: ranks can run one per process under a launcher
	// (exec.MultiProcessRanker; a backend that does not say runs all its
	// ranks in one process).
	MultiProcess bool
}

// CapabilitiesOf asks b (see Capabilities for the fallbacks).
func CapabilitiesOf(b exec.Backend) Capabilities {
	c := Capabilities{CollectiveSettings: true, Graphs: true}
	if r, ok := b.(exec.CollectiveSettingsReader); ok {
		c.CollectiveSettings = r.ReadsCollectiveSettings()
	}
	if g, ok := b.(exec.GraphSupporter); ok {
		c.Graphs = g.SupportsGraphs()
	}
	if m, ok := b.(exec.MultiProcessRanker); ok {
		c.MultiProcess = m.MultiProcessRanks()
	}
	return c
}

// BackendConfig is the backend's configuration for a run of sc: the one
// place where a scenario's options become what the backend is told.
// Seed seeds the backend; the NCCL settings (sc.Options.NCCL) travel as
// the one typed value (exec.BackendConfig.NCCL), whose environment a
// backend with NCCL sets for the session and puts back afterwards;
// all-reduce + RMSNorm fusion (sc.Options.ARNormFusion)
// asks for the fused kernel. The other options change the schedule
// (sim.BuildSchedule) or the runner (CUDA graphs: exec.WithGraphs), not
// the backend.
func BackendConfig(sc sim.Scenario, seed int64) exec.BackendConfig {
	return exec.BackendConfig{Seed: seed, NCCL: sc.Options.NCCL, ARNormFusion: sc.Options.ARNormFusion == sim.ToggleOn}
}

// Prepare builds what spec runs, checking on the way what can be checked
// before any work: the backend exists (its constructor loads its
// libraries), the scenario builds a schedule (a *model.PlanError for a
// plan the model cannot take) and the schedule is priced when asked. The
// local ranks are checked against the schedule by the run (exec.Run); a
// caller that wants its own message checks Schedule first.
func Prepare(spec Spec) (*Prepared, error) {
	if spec.Backend == "" {
		return nil, errors.New("pipeline: no backend named")
	}
	if spec.Steps < 0 || spec.Warmup < 0 {
		return nil, fmt.Errorf("pipeline: steps %d, warmup %d: want steps >= 0 (0: the default) and warmup >= 0", spec.Steps, spec.Warmup)
	}
	if spec.Steps == 0 {
		spec.Steps = exec.DefaultSteps
	}
	scen := spec.Scenario
	cfg := BackendConfig(scen, spec.Seed)
	b, err := exec.NewBackend(spec.Backend, cfg)
	if err != nil {
		return nil, err
	}
	if spec.Predict && scen.Topo != nil {
		if err := checkDeviceGPU(b, scen.Topo); err != nil {
			return nil, err
		}
	}
	caps := CapabilitiesOf(b)
	if !caps.Graphs {
		// A backend that cannot capture runs the steps eagerly: the
		// scenario recorded and priced says so (compare prices what
		// ran, and run --compare must agree with it).
		scen.Options.CUDAGraphs = false
	}
	// The executor runs the schedule's kernels and nothing else.
	scen.Options.Engine = engine.ExecutorRef
	if te, ok := b.(exec.TimingEventer); ok {
		// What is measured is the instrumented run: price its timing
		// events (the scenario records them).
		scen.Options.TimingEventsPerOp = te.TimingEventsPerOp()
	}
	// The schedule the engine runs (its token ops padded to the CUDA
	// graph's size), which the prediction prices and the spans record.
	sched, err := sim.BuildSchedule(scen)
	if err != nil {
		return nil, err
	}
	scen.RunTokens = sched.Deploy.TokensPerGroup
	js, err := scen.MarshalJSON()
	if err != nil {
		return nil, err
	}
	p := &Prepared{Spec: spec, Scenario: scen, Schedule: sched, Backend: b, BackendConfig: cfg,
		Capabilities: caps, scenarioJSON: js}
	if spec.Predict {
		if scen.Topo == nil {
			return nil, errors.New("pipeline: a prediction needs the scenario's topology")
		}
		pr, err := scen.NewPredictor()
		if err != nil {
			return nil, err
		}
		if p.Prediction, _, err = pr.PredictScenarioSchedule(scen); err != nil {
			return nil, fmt.Errorf("predict on %s: %w", scen.Topo.Name, err)
		}
		p.PredictedUs = PredictedByOpID(p.Prediction)
	}
	return p, nil
}

// GPUMismatchError: the box a run is predicted on has other GPUs than
// the device the backend runs on, so the prediction and the measurement
// would be of two machines.
type GPUMismatchError struct {
	Topology string // the box's name
	BoxGPU   string // its GPUs
	RunGPU   string // the device the backend runs on
}

func (e *GPUMismatchError) Error() string {
	return fmt.Sprintf("the box %s has %s, and this run's GPU is %s: a prediction for that box would be judged against another GPU's measurement", e.Topology, e.BoxGPU, e.RunGPU)
}

// checkDeviceGPU refuses a box whose GPU is not the one the backend runs
// on (by the catalog entry each name stands for: "NVIDIA H100 80GB HBM3"
// is an H100 SXM). A backend that names no GPU (the CPU backend), or a
// GPU the catalog does not know, is not checked.
func checkDeviceGPU(b exec.Backend, t *topology.Topology) error {
	var run string
	for _, kv := range resource(b, nil) {
		if kv.Key == schema.ResGPUModel {
			run = kv.Value.AsString()
		}
	}
	if same, known := t.RunsOn(run); same || !known {
		return nil
	}
	return &GPUMismatchError{Topology: t.Name, BoxGPU: t.DeviceOf(0).Name, RunGPU: run}
}

// localRanks is Spec.LocalRanks, or every rank of the schedule.
func (p *Prepared) localRanks() []int {
	if len(p.Spec.LocalRanks) > 0 {
		return p.Spec.LocalRanks
	}
	all := make([]int, len(p.Schedule.Ranks))
	for r := range all {
		all[r] = r
	}
	return all
}

// resource is what the backend knows about the machine for the trace
// resource (exec.ResourceDescriber), nil when it says nothing.
func resource(b exec.Backend, ordinals []int) []attribute.KeyValue {
	if rd, ok := b.(exec.ResourceDescriber); ok {
		return rd.ResourceAttributes(ordinals...)
	}
	return nil
}

// PredictedByOpID maps op ID to its predicted span (us, sim.OpResult.SpanUs)
// on the first rank the prediction holds (every rank of a symmetric
// schedule): what the op's span measures, from its opening timing event to
// its closing one, which the span's predicted_us attribute is set beside.
// The transition after the closing event lies between spans, in the step.
func PredictedByOpID(pr *sim.Prediction) map[string]float64 {
	ops := pr.FirstRankOps()
	m := make(map[string]float64, len(ops))
	for i := range ops {
		m[ops[i].ID] = ops[i].SpanUs()
	}
	return m
}
