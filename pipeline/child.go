package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
)

// ChildVerb is the hidden verb of the tpscope binary that runs one process
// of a run in fresh processes:
//
//	tpscope internal-run --spec SPEC.json --result RESULT.json
//
// The command registers it (and keeps it out of its help); the Runner
// starts it. SPEC.json is a run spec the Runner wrote (the scenario in
// its codec, the backend and its configuration, steps, ranks, trace
// destination); the child rebuilds the schedule from the scenario, runs
// its ranks and writes RESULT.json (op and step times, span counts, the
// error if any), also when the run failed or was interrupted. See
// RunChild.
const ChildVerb = "internal-run"

// childSpecVersion is the run spec's format; a child refuses another.
const childSpecVersion = 1

// childSpec is one child's run.
type childSpec struct {
	Version  int             `json:"version"`
	Scenario json.RawMessage `json:"scenario"` // sim.Scenario's codec
	Backend  string          `json:"backend"`
	// Config is the backend's configuration (BackendConfig of the
	// scenario; Devices narrowed to this child's ranks).
	Config        exec.BackendConfig `json:"backend_config"`
	Steps         int                `json:"steps"`
	Warmup        int                `json:"warmup"`
	LocalRanks    []int              `json:"local_ranks,omitempty"`
	WatchdogNs    time.Duration      `json:"watchdog_ns,omitempty"`
	ScheduleScale float64            `json:"schedule_scale,omitempty"`
	PredictedUs   map[string]float64 `json:"predicted_us,omitempty"`
	Trace         string             `json:"trace"`
	// Graphed and OpsPerRank describe the schedule the parent built; the
	// child checks that it rebuilt the same one.
	Graphed    bool  `json:"graphed"`
	OpsPerRank []int `json:"ops_per_rank"`
}

// childResult is what a child writes.
type childResult struct {
	Run         *exec.Result `json:"run,omitempty"`
	Trace       exportStats  `json:"trace"`
	Interrupted bool         `json:"interrupted,omitempty"`
	Err         string       `json:"error,omitempty"`
}

// exportStats is traces.ExportStats with its error as text.
type exportStats struct {
	Dest          string `json:"dest"`
	Exported      int    `json:"exported"`
	FallbackSpans int    `json:"fallback_spans,omitempty"`
	FallbackPath  string `json:"fallback_path,omitempty"`
	Lost          int    `json:"lost,omitempty"`
	LastError     string `json:"last_error,omitempty"`
}

func toExportStats(s traces.ExportStats) exportStats {
	e := exportStats{Dest: s.Dest, Exported: s.Exported, FallbackSpans: s.FallbackSpans, FallbackPath: s.FallbackPath, Lost: s.Lost}
	if s.LastError != nil {
		e.LastError = s.LastError.Error()
	}
	return e
}

// RunChild is the child's side (ChildVerb): it reads the run spec at
// specPath, rebuilds the schedule from its scenario, checks it is the one
// the parent built, runs its ranks on the named backend with its trace
// destination, and writes the result to resultPath, also after a failure
// or an interruption (ctx cancelled: the steps finished before). The
// returned error is the run's.
func RunChild(ctx context.Context, specPath, resultPath string) error {
	res, runErr := runChild(ctx, specPath)
	out := childResult{Interrupted: ctx.Err() != nil}
	if res != nil {
		out.Run, out.Trace = res.Run, toExportStats(res.Trace)
	}
	if runErr != nil {
		out.Err = runErr.Error()
	}
	js, err := json.Marshal(out)
	if err == nil {
		err = os.WriteFile(resultPath, js, 0o644)
	}
	if err != nil {
		return errors.Join(runErr, fmt.Errorf("--result %s: %w", resultPath, err))
	}
	return runErr
}

func runChild(ctx context.Context, specPath string) (*Result, error) {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return nil, fmt.Errorf("--spec: %w", err)
	}
	var spec childSpec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("--spec %s: %w", specPath, err)
	}
	if spec.Version != childSpecVersion {
		return nil, fmt.Errorf("--spec %s: version %d: want %d (parent and child are different builds)", specPath, spec.Version, childSpecVersion)
	}
	sc, err := sim.DecodeScenario(spec.Scenario, nil)
	if err != nil {
		return nil, fmt.Errorf("--spec %s: %w", specPath, err)
	}
	sched, err := sim.BuildSchedule(sc)
	if err != nil {
		return nil, fmt.Errorf("--spec %s: %w", specPath, err)
	}
	ops := opsPerRank(sched)
	if graphed := sched.Deploy.Graphed; graphed != spec.Graphed || !slices.Equal(ops, spec.OpsPerRank) {
		return nil, fmt.Errorf("--spec %s: the schedule rebuilt here (%d ranks, ops per rank %v, graphed %v) is not the parent's (%v, graphed %v)",
			specPath, len(ops), ops, graphed, spec.OpsPerRank, spec.Graphed)
	}
	b, err := exec.NewBackend(spec.Backend, spec.Config)
	if err != nil {
		return nil, err
	}
	return runHere(ctx, sched, b, runParams{
		steps: spec.Steps, warmup: spec.Warmup, local: spec.LocalRanks, watchdog: spec.WatchdogNs,
		scale: spec.ScheduleScale, predicted: spec.PredictedUs,
		scenarioJSON: string(spec.Scenario), topology: sc.TopoRef.String(), options: sc.Options.Names(),
		trace: spec.Trace, resource: resource(b, nil),
	})
}

// opsPerRank is the length of every rank's op list.
func opsPerRank(s *model.Schedule) []int {
	n := make([]int, len(s.Ranks))
	for r := range s.Ranks {
		n[r] = len(s.Ranks[r])
	}
	return n
}

// childProc is one fresh process of a run: the ranks it runs and the
// launcher variables it gets (none when it holds every local rank).
type childProc struct {
	local  []int
	device []int // BackendConfig.Devices for its ranks (nil: the backend's default)
	env    []string
}

// childWaitDelay bounds how long an interrupted child may take to drain,
// export the finished steps and write its result before it is killed.
const childWaitDelay = 2 * exec.DefaultCleanupTimeout

// launchedHere reports whether this process was itself started by a
// launcher (torchrun, Slurm): its children then inherit its place in the
// launch and hold its ranks.
func launchedHere() bool {
	return os.Getenv("RANK") != "" && os.Getenv("WORLD_SIZE") != "" ||
		os.Getenv("SLURM_PROCID") != "" && os.Getenv("SLURM_NTASKS") != ""
}

// placement splits p's ranks over fresh processes: one per rank, launched
// as torchrun would, where the backend runs ranks in separate processes
// and this process runs every rank of the plan (not a shard, not itself
// one process of a launch); else one process holding all of p's local
// ranks. shared puts every rank's process on device 0 with its own NCCL
// host id (WithSharedDevice).
func placement(p *Prepared, launched, shared bool) ([]childProc, error) {
	local := p.localRanks()
	if launched || !p.Capabilities.MultiProcess || len(local) < len(p.Schedule.Ranks) || len(local) < 2 {
		return []childProc{{local: p.Spec.LocalRanks, device: p.BackendConfig.Devices}}, nil
	}
	master, err := freePort()
	if err != nil {
		return nil, err
	}
	rdzv, err := freePort()
	if err != nil {
		return nil, err
	}
	procs := make([]childProc, len(local))
	for k, r := range local {
		// The device of the k-th local rank, as in a single process; 0
		// for every rank when they share it.
		dev := k
		if shared {
			dev = 0
		}
		procs[k] = childProc{local: []int{r}, env: []string{
			"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(len(p.Schedule.Ranks)),
			"LOCAL_RANK=" + strconv.Itoa(dev),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(master), "TPSCOPE_RDZV_PORT=" + strconv.Itoa(rdzv),
		}}
		if d := p.BackendConfig.Devices; len(d) == len(local) {
			procs[k].device = []int{d[k]}
		}
		if shared {
			// A host of its own for NCCL (WithSharedDevice).
			procs[k].env = append(procs[k].env, "NCCL_HOSTID=tpscope-shared-"+strconv.Itoa(r))
			procs[k].device = []int{0}
		}
	}
	return procs, nil
}

// freePort is a loopback TCP port free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pipeline: a free port for the ranks' rendezvous: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// childEnv is base with settings (the run's NCCL environment) and extra
// ("KEY=VALUE" launcher variables) in place of any value base has for
// their keys: a fresh process starts with exactly its run's settings over
// this process's environment.
func childEnv(base []string, settings map[string]string, extra []string) []string {
	over := map[string]string{}
	var keys []string
	for k, v := range settings {
		over[k] = v
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := over[k]; !dup {
			keys = append(keys, k)
		}
		over[k] = v
	}
	env := make([]string, 0, len(base)+len(keys))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; !ok {
			env = append(env, kv)
		}
	}
	for _, k := range keys {
		env = append(env, k+"="+over[k])
	}
	return env
}

// runChildren runs p in fresh processes of this binary and joins what
// they measured.
func (r *Runner) runChildren(ctx context.Context, p *Prepared) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run not started: %w", err)
	}
	argv := r.command
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("pipeline: this executable, to start a fresh process: %w", err)
		}
		argv = []string{exe, ChildVerb}
	}
	procs, err := placement(p, launchedHere(), r.shared)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tpscope-run-")
	if err != nil {
		return nil, fmt.Errorf("pipeline: a directory for the run's spec: %w", err)
	}
	defer os.RemoveAll(dir)
	tracePath, toFile := strings.CutPrefix(p.Spec.Trace, "file:")
	base := childSpec{Version: childSpecVersion, Scenario: p.scenarioJSON, Backend: p.Spec.Backend, Config: p.BackendConfig,
		Steps: p.Spec.Steps, Warmup: p.Spec.Warmup, WatchdogNs: p.Spec.Watchdog, ScheduleScale: p.Spec.ScheduleScale,
		PredictedUs: p.PredictedUs, Trace: p.Spec.Trace, Graphed: p.Schedule.Deploy.Graphed, OpsPerRank: opsPerRank(p.Schedule)}
	cmds := make([]*osexec.Cmd, len(procs))
	results := make([]string, len(procs))
	parts := make([]string, len(procs))
	for i, pr := range procs {
		spec := base
		spec.LocalRanks, spec.Config.Devices = pr.local, pr.device
		if toFile && len(procs) > 1 {
			// One file per process, joined in rank order afterwards.
			parts[i] = filepath.Join(dir, fmt.Sprintf("trace-%d.otlp.jsonl", i))
			spec.Trace = "file:" + parts[i]
		}
		js, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		specPath := filepath.Join(dir, fmt.Sprintf("spec-%d.json", i))
		results[i] = filepath.Join(dir, fmt.Sprintf("result-%d.json", i))
		if err := os.WriteFile(specPath, js, 0o644); err != nil {
			return nil, fmt.Errorf("pipeline: run spec: %w", err)
		}
		cmd := osexec.CommandContext(ctx, argv[0], append(argv[1:len(argv):len(argv)], "--spec", specPath, "--result", results[i])...)
		// Ctrl-C reaches a child as it would a process of its own: it
		// stops after the current op and writes what it finished.
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = childWaitDelay
		cmd.Env = childEnv(os.Environ(), p.BackendConfig.NCCL.Env(), pr.env)
		cmd.Stdout, cmd.Stderr = r.stderr, r.stderr
		cmds[i] = cmd
	}
	var startErr error
	started := 0
	for _, cmd := range cmds {
		if startErr = cmd.Start(); startErr != nil {
			break
		}
		started++
	}
	waitErrs := make([]error, len(cmds))
	for i := range started {
		waitErrs[i] = cmds[i].Wait()
	}
	if startErr != nil {
		return nil, fmt.Errorf("pipeline: start %s: %w", argv[0], startErr)
	}

	res := &Result{Processes: len(procs), Trace: traces.ExportStats{Dest: p.Spec.Trace}, Interrupted: ctx.Err() != nil}
	if toFile {
		res.TracePath = tracePath
	}
	var errs []error
	runs := make([]*exec.Result, 0, len(procs))
	for i := range procs {
		cr, err := readChildResult(results[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("process of ranks %v ended without a result (%v): %w", procs[i].local, waitErrs[i], err))
			continue
		}
		res.Interrupted = res.Interrupted || cr.Interrupted
		st := cr.Trace
		if p.Spec.Trace == "" && st.Dest != "" {
			// An empty destination: the children exported where the
			// environment's OTLP endpoint says, which they name.
			res.Trace.Dest = st.Dest
		}
		res.Trace.Exported += st.Exported
		res.Trace.FallbackSpans += st.FallbackSpans
		res.Trace.Lost += st.Lost
		if st.FallbackPath != "" {
			res.Trace.FallbackPath = st.FallbackPath
		}
		if st.LastError != "" && res.Trace.LastError == nil {
			res.Trace.LastError = errors.New(st.LastError)
		}
		if cr.Err != "" {
			errs = append(errs, fmt.Errorf("ranks %v: %s", procs[i].local, cr.Err))
		}
		if cr.Run != nil {
			runs = append(runs, cr.Run)
		}
	}
	if toFile && len(procs) > 1 {
		if err := joinFiles(tracePath, parts); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case len(runs) == 1 && len(procs) == 1:
		res.Run = runs[0]
	case len(runs) == len(procs):
		if res.Run, err = exec.MergeResults(p.Schedule, runs...); err != nil {
			errs = append(errs, err)
		}
	}
	err = errors.Join(errs...)
	if res.Interrupted {
		// Callers tell an interruption by context.Canceled, as from a
		// run in this process.
		err = errors.Join(err, fmt.Errorf("run in fresh processes: %w", context.Canceled))
	}
	return res, err
}

func readChildResult(path string) (*childResult, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cr childResult
	if err := json.Unmarshal(data, &cr); err != nil {
		return nil, fmt.Errorf("result %s: %w", path, err)
	}
	return &cr, nil
}

// joinFiles writes parts, in order, into path (parts that do not exist
// add nothing: a process that exported no span).
func joinFiles(path string, parts []string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("trace file %s: %w", path, err)
	}
	for _, part := range parts {
		in, err := os.Open(part)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("trace file %s: %w", path, err)
		}
		_, err = io.Copy(f, in)
		in.Close()
		if err != nil {
			f.Close()
			return fmt.Errorf("trace file %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trace file %s: %w", path, err)
	}
	return nil
}
