package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/traces"
)

// Isolation says when the Runner runs a run's ranks in fresh processes.
type Isolation uint8

const (
	// IsolateAuto (the default): a run whose NCCL settings that NCCL keeps
	// per process (ncclenv.Cached) differ from those an earlier run of
	// this Runner fixed in this process runs in fresh processes, on a
	// backend whose collectives read those settings
	// (Capabilities.CollectiveSettings); every other run runs here.
	IsolateAuto Isolation = iota
	// IsolateAlways runs every run in fresh processes.
	IsolateAlways
	// IsolateNever runs every run in this process.
	IsolateNever
)

// String is the mode's name.
func (i Isolation) String() string {
	switch i {
	case IsolateAuto:
		return "auto"
	case IsolateAlways:
		return "always"
	case IsolateNever:
		return "never"
	}
	return fmt.Sprintf("isolation(%d)", uint8(i))
}

// Runner runs prepared runs one after another, each in this process or in
// fresh processes of this binary (see Isolation). It remembers which NCCL
// settings this process has fixed, so use one Runner for a sequence of
// runs (a verdict's baseline and entries). A Runner is not safe for
// concurrent use: runs share the process's environment and devices.
type Runner struct {
	isolation Isolation
	command   []string
	stderr    io.Writer
	shared    bool // WithSharedDevice
	// cached is what the first run here that NCCL read fixed for the
	// process (nil before it).
	cached *ncclenv.Cached
}

// Option configures NewRunner.
type Option func(*Runner)

// WithIsolation sets when runs go to fresh processes. Default IsolateAuto.
func WithIsolation(i Isolation) Option { return func(r *Runner) { r.isolation = i } }

// SharedDeviceEnv, set to 1, asks the CLI for WithSharedDevice: the
// one-GPU rehearsal of the multi-process path.
const SharedDeviceEnv = "TPSCOPE_SHARED_GPU"

// WithSharedDevice rehearses the multi-process path on one GPU: every run
// with several ranks runs one fresh process per rank, all on device 0,
// each with its own NCCL host id (NCCL_HOSTID), so NCCL takes them for
// separate hosts and joins them through its socket transport (it refuses
// two ranks of a communicator on one GPU of one host). The processes
// time-slice the GPU: the runs are correct, their timings mean nothing.
func WithSharedDevice(on bool) Option { return func(r *Runner) { r.shared = on } }

// WithChildCommand sets the command line a child process starts with; the
// Runner appends "--spec FILE --result FILE". Default: this executable
// (os.Executable) and ChildVerb. A test binary passes itself and arranges
// to call RunChild when started so.
func WithChildCommand(argv ...string) Option {
	return func(r *Runner) { r.command = append([]string(nil), argv...) }
}

// WithStderr is where child processes' standard output and error go.
// Default os.Stderr.
func WithStderr(w io.Writer) Option { return func(r *Runner) { r.stderr = w } }

// NewRunner returns a Runner. Defaults: IsolateAuto, this executable with
// ChildVerb as the child command, children's output to os.Stderr.
func NewRunner(opts ...Option) *Runner {
	r := &Runner{stderr: os.Stderr}
	for _, o := range opts {
		o(r)
	}
	return r
}

// RunOptions are the parts of one run that are not what it measures.
type RunOptions struct {
	// Fault injects a rank that never issues a collective (exec.WithFault),
	// to check that the watchdog ends the run. Runs in this process only.
	Fault *exec.Fault
	// Progress is called after every step, warm-up included
	// (exec.WithProgress); not called for a run in fresh processes.
	Progress func(done, total int)
}

// Result is what a run measured and where its spans went.
type Result struct {
	// Run is the runner's result: per-op and per-step times of the
	// measured steps finished (nil when the run did not start). For a run
	// over several processes, the processes' results merged
	// (exec.MergeResults).
	Run *exec.Result
	// Trace counts the spans exported, summed over processes.
	Trace traces.ExportStats
	// TracePath is the file the spans went to for a file: destination
	// ("" otherwise).
	TracePath string
	// Processes is how many fresh processes ran the ranks (0: this one).
	Processes int
	// Interrupted: the context was cancelled (Ctrl-C) before the run
	// finished; Run holds the steps finished before.
	Interrupted bool
}

// TraceSetupError is a trace destination the exporter could not set up;
// a caller names its own flag.
type TraceSetupError struct {
	Dest string
	Err  error
}

func (e *TraceSetupError) Error() string {
	return fmt.Sprintf("trace destination %s: %v", e.Dest, e.Err)
}
func (e *TraceSetupError) Unwrap() error { return e.Err }

// Run runs p: in this process, or in fresh processes (see Isolation). The
// error is the run's first error (exec.Run's, a child's, or the trace
// flush's); on an interruption it wraps context.Canceled and Result says
// what finished. Result is non-nil whenever the run started.
func (r *Runner) Run(ctx context.Context, p *Prepared, o RunOptions) (*Result, error) {
	if r.freshProcesses(p) {
		if o.Fault != nil {
			return nil, errors.New("pipeline: an injected fault runs in this process only")
		}
		return r.runChildren(ctx, p)
	}
	res, err := runHere(ctx, p.Schedule, p.Backend, runParams{
		steps: p.Spec.Steps, warmup: p.Spec.Warmup, local: p.Spec.LocalRanks, watchdog: p.Spec.Watchdog,
		scale: p.Spec.ScheduleScale, predicted: p.PredictedUs,
		scenarioJSON: string(p.scenarioJSON), topology: p.Scenario.TopoRef.String(), options: p.Scenario.Options.Names(),
		trace: p.Spec.Trace, resource: resource(p.Backend, nil), fault: o.Fault, progress: o.Progress,
	})
	if p.Capabilities.CollectiveSettings && r.cached == nil && res != nil {
		c := p.Scenario.Options.NCCL.CachedPerProcess()
		r.cached = &c
	}
	return res, err
}

// freshProcesses decides where p runs (see Isolation).
func (r *Runner) freshProcesses(p *Prepared) bool {
	if r.shared && p.Capabilities.MultiProcess && len(p.localRanks()) > 1 {
		return true
	}
	switch r.isolation {
	case IsolateAlways:
		return true
	case IsolateNever:
		return false
	}
	return needsFreshProcess(r.cached, p.Capabilities.CollectiveSettings, p.Scenario.Options.NCCL)
}

// needsFreshProcess: a run with NCCL settings o may not share a process
// whose NCCL already holds cached (nil: none yet) when its backend's
// collectives read the settings and they differ.
func needsFreshProcess(cached *ncclenv.Cached, readsSettings bool, o ncclenv.Settings) bool {
	return readsSettings && cached != nil && *cached != o.CachedPerProcess()
}

// runParams are what runHere needs besides the schedule and the backend,
// the same whether the run is this process's or a child's.
type runParams struct {
	steps, warmup int
	local         []int
	watchdog      time.Duration
	scale         float64
	predicted     map[string]float64
	scenarioJSON  string
	topology      string
	options       []string
	trace         string
	resource      []attribute.KeyValue
	fault         *exec.Fault
	progress      func(done, total int)
}

// runHere sets up the exporter, runs sched on b in this process and
// flushes the spans.
func runHere(ctx context.Context, sched *model.Schedule, b exec.Backend, prm runParams) (*Result, error) {
	exp, err := traces.Setup(ctx, prm.trace, traces.WithResource(prm.resource...))
	if err != nil {
		return nil, &TraceSetupError{Dest: prm.trace, Err: err}
	}
	opts := []exec.Option{
		exec.WithTracerProvider(exp.TracerProvider()),
		// Op spans built in bulk off the launch path (nil: the SDK path).
		exec.WithSpanExporter(exp.SpanExporter()),
		exec.WithSteps(prm.steps), exec.WithWarmup(prm.warmup),
		// The step replays a CUDA graph when the schedule's builder
		// decided it does (sim.BuildSchedule under the scenario's capture).
		exec.WithGraphs(sched.Deploy.Graphed),
		exec.WithScenario(prm.scenarioJSON, prm.topology, prm.options),
	}
	if prm.scale > 1 {
		opts = append(opts, exec.WithScheduleScale(prm.scale))
	}
	if prm.predicted != nil {
		opts = append(opts, exec.WithPredictedUs(prm.predicted))
	}
	if len(prm.local) > 0 {
		opts = append(opts, exec.WithLocalRanks(prm.local...))
	}
	if prm.watchdog > 0 {
		opts = append(opts, exec.WithWatchdog(prm.watchdog))
	}
	if prm.fault != nil {
		opts = append(opts, exec.WithFault(*prm.fault))
	}
	if prm.progress != nil {
		opts = append(opts, exec.WithProgress(prm.progress))
	}
	run, runErr := exec.Run(ctx, sched, b, opts...)
	shutErr := exp.Shutdown(context.Background())
	res := &Result{Run: run, Trace: exp.Stats(), Interrupted: ctx.Err() != nil}
	if path, ok := strings.CutPrefix(prm.trace, "file:"); ok {
		res.TracePath = path
	}
	if runErr != nil {
		return res, runErr
	}
	if shutErr != nil {
		return res, fmt.Errorf("flush trace: %w; %s", shutErr, res.Trace)
	}
	return res, nil
}
