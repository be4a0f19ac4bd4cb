package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/tpscope/tpscope/internal/units"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/calibrate/nccltests"
	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/collbench"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/pipeline"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces/schema"
)

// measureFlags are the flags of collective --measure: the collective is
// also run through the executor (exec/collbench) on a backend, its time set
// beside the prediction (and a reference log), and written as nccl-tests
// output with -o.
type measureFlags struct {
	boundFlags
	on        bool
	backend   string
	steps     int
	warmup    int
	iters     int
	graphs    bool
	out       string
	reference string
	watchdog  time.Duration
}

// measureOnly are the flags that mean something only with --measure.
var measureOnly = []string{"backend", "steps", "warmup", "iters", "cuda-graphs", "out", "reference", "watchdog"}

func newMeasureFlags() *measureFlags {
	return &measureFlags{backend: "cpu", steps: exec.DefaultSteps, warmup: exec.DefaultWarmup, iters: collbench.DefaultIters}
}

func (m *measureFlags) bind(fs *pflag.FlagSet) {
	m.fs = fs
	fs.BoolVar(&m.on, "measure", m.on, "also run the collective through the executor (--backend) at each size and print the measured time beside the prediction (on the cpu backend only when --topo names a box)")
	fs.StringVar(&m.backend, "backend", m.backend, "--measure: where to run: cpu (goroutine ranks) or cuda (one process, NCCL on the first --ranks GPUs)")
	fs.IntVar(&m.steps, "steps", m.steps, "--measure: measured steps (each runs every size --iters times)")
	fs.IntVar(&m.warmup, "warmup", m.warmup, "--measure: warm-up steps before the measured ones")
	fs.IntVar(&m.iters, "iters", m.iters, "--measure: back-to-back ops per size and step (nccl-tests' iterations)")
	fs.BoolVar(&m.graphs, "cuda-graphs", m.graphs, "--measure: capture one step as a CUDA graph and replay it (cuda backend)")
	fs.StringVarP(&m.out, "out", "o", m.out, "--measure: write the measured times to FILE as nccl-tests output with its per-iteration (-I) columns, or as its -J JSON when FILE ends in .json (both read by calibrate --nccl-tests)")
	fs.StringVar(&m.reference, "reference", m.reference, "--measure: nccl-tests log of the same collective and ranks (nccl-tests, or scripts/gpu-collectives-torch.py) to show beside the measurement")
	fs.DurationVar(&m.watchdog, "watchdog", m.watchdog, "--measure: how long a rank waits for its peers before the run ends with an error (0: the backend's default, 5m)")
}

// check refuses bad --measure flags before any work and returns the
// reference log (nil without --reference).
func (m *measureFlags) check(coll model.Collective, ranks int, sizes []int64, custom string) (*nccltests.Log, error) {
	if !m.on {
		for _, name := range measureOnly {
			if m.changed(name) {
				return nil, flagError("--"+name, nil, "needs --measure")
			}
		}
		return nil, nil
	}
	if custom != "" {
		return nil, flagError("--custom-ar", custom+" with --measure", "the executor runs NCCL's all-reduce, not a custom one")
	}
	if err := checkBackend(m.backend); err != nil {
		return nil, err
	}
	if m.steps < 1 || m.warmup < 0 {
		return nil, flagError(fmt.Sprintf("--steps %d --warmup %d", m.steps, m.warmup), nil, "want steps >= 1 and warmup >= 0")
	}
	if m.iters < 1 || m.iters > 1000 {
		return nil, flagError("--iters", m.iters, "want 1..1000")
	}
	if m.watchdog < 0 {
		return nil, flagError("--watchdog", m.watchdog, "want > 0, or 0 for the backend's default")
	}
	if _, _, err := collbench.Schedule(m.config(coll, ranks, sizes)); err != nil {
		var ce *collbench.ConfigError
		if !errors.As(err, &ce) {
			return nil, err
		}
		return nil, &usageError{Flag: "--sizes", Value: fmt.Sprintf("%s over --ranks %d", fmtSizes(sizes), ranks), Want: ce.Msg, Err: err}
	}
	if err := checkOutputFile("-o", m.out); err != nil {
		return nil, err
	}
	if m.reference == "" {
		return nil, nil
	}
	if err := checkInputFile("--reference", m.reference, "an nccl-tests log"); err != nil {
		return nil, err
	}
	if err := checkNotInput("-o", m.out, input{"--reference", m.reference}); err != nil {
		return nil, err
	}
	ref, err := nccltests.ParseFile(m.reference)
	if err != nil {
		return nil, err
	}
	if ref.Op != string(coll) {
		return nil, flagError("--reference", m.reference, "measured %q, want %s (--op)", ref.Op, coll)
	}
	if ref.Ranks != 0 && ref.Ranks != ranks {
		return nil, flagError("--reference", m.reference, "%d ranks, want %d (--ranks)", ref.Ranks, ranks)
	}
	return ref, nil
}

func (m *measureFlags) config(coll model.Collective, ranks int, sizes []int64) collbench.Config {
	return collbench.Config{Op: coll, Ranks: ranks, Sizes: sizes, Iters: m.iters}
}

func fmtSizes(sizes []int64) string {
	if len(sizes) == 1 {
		return strconv.FormatInt(sizes[0], 10)
	}
	return fmt.Sprintf("%d:%d", sizes[0], sizes[len(sizes)-1])
}

// measured is one size of a --measure run, beside its prediction and
// reference.
type measured struct {
	Bytes     int64   `json:"bytes"`
	TimeUs    float64 `json:"time_us"` // mean over steps, iterations and ranks
	MinUs     float64 `json:"min_us"`
	MaxUs     float64 `json:"max_us"`
	AlgBWGBps float64 `json:"algbw_GBps"`
	BusBWGBps float64 `json:"busbw_GBps"`
	// PredictedUs is the prediction at this size and ErrPct (predicted -
	// measured) / measured; both nil when nothing is predicted (CPU
	// ranks without --topo).
	PredictedUs *float64 `json:"predicted_us,omitempty"`
	ErrPct      *float64 `json:"err_pct,omitempty"`
	// ReferenceUs is the reference log's time at this size (out-of-place,
	// else in-place; 0 when the log has no such size); VsReferencePct is
	// (measured - reference) / reference.
	ReferenceUs    float64 `json:"reference_us,omitempty"`
	VsReferencePct float64 `json:"vs_reference_pct,omitempty"`
}

// measureRun is what collective --measure reports besides the predictions.
type measureRun struct {
	Backend   string     `json:"backend"`
	Timing    string     `json:"timing"`
	Graphs    bool       `json:"graphs"`
	Steps     int        `json:"steps"`
	Warmup    int        `json:"warmup"`
	Iters     int        `json:"iters"`
	Reference string     `json:"reference,omitempty"`
	Out       string     `json:"out,omitempty"`
	Rows      []measured `json:"rows"`
}

// run measures cfg through the executor, returns the result beside the
// predictions of cm (rows, at the sizes as run; none when cm is nil) and
// writes -o.
func (m *measureFlags) run(ctx context.Context, coll model.Collective, ranks int, sizes []int64, no ncclenv.Settings, cm *sim.CollectiveModel, ref *nccltests.Log, stderr io.Writer) (*measureRun, []collectiveRow, error) {
	p, err := pipeline.PrepareCollective(pipeline.CollectiveSpec{Backend: m.backend, NCCL: no, Bench: m.config(coll, ranks, sizes),
		Steps: m.steps, Warmup: m.warmup, Graphs: m.graphs, Watchdog: m.watchdog})
	if err != nil {
		return nil, nil, err
	}
	graphs := ""
	if m.graphs {
		graphs = "cuda-graphs"
	}
	if err := checkRealized(m.fs, m.backend, pipeline.CapabilitiesOf(p.Backend), graphs); err != nil {
		return nil, nil, err
	}
	b := p.Backend
	if me, ok := b.(exec.MemoryEstimator); ok {
		if est, err := me.EstimateMemory(p.Schedule, nil); err == nil && est.NeedBytes > est.FreeBytes {
			return nil, nil, usageErrorf("the %s backend would allocate %s of %s for %d x %s of %s over %d ranks; %s available: use fewer --iters or smaller --sizes",
				b.Name(), units.Bytes(float64(est.NeedBytes)), est.Where, m.iters, coll, fmtSizes(sizes), ranks, units.Bytes(float64(est.FreeBytes)))
		}
	}
	var progress func(done, total int)
	if isTerminal(stderr) {
		bar := progressbar.NewOptions(m.warmup+m.steps, progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("measure "+string(coll)), progressbar.OptionClearOnFinish())
		progress = func(done, total int) { _ = bar.Set(done) }
		defer bar.Finish()
	}
	res, err := p.Measure(ctx, progress)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%w: %v", errInterrupted, err)
		}
		return nil, nil, err
	}
	sizes = res.Config.Sizes
	group := make([]int, ranks)
	for i := range group {
		group[i] = i
	}
	var pred []collectiveRow
	if cm != nil {
		if pred, err = sweepCollective(cm, coll, group, sizes, ""); err != nil {
			return nil, nil, err
		}
	}
	factor, err := nccltests.BusFactor(string(coll), ranks)
	if err != nil {
		return nil, nil, err
	}
	refUs := map[int64]float64{}
	if ref != nil {
		for _, r := range ref.Rows {
			if t := r.Times(); len(t) > 0 {
				refUs[r.Bytes] = t[0]
			}
		}
	}
	mr := &measureRun{Backend: b.Name(), Timing: res.Run.Timing, Graphs: res.Run.Graphs, Steps: res.Run.Steps, Warmup: res.Run.Warmup,
		Iters: res.Config.Iters, Reference: m.reference, Out: m.out}
	for i, r := range res.Rows {
		row := measured{Bytes: r.Bytes, TimeUs: r.TimeUs, MinUs: r.MinUs, MaxUs: r.MaxUs}
		row.AlgBWGBps = float64(r.Bytes) / 1e3 / r.TimeUs
		row.BusBWGBps = row.AlgBWGBps * factor
		if pred != nil {
			p, e := pred[i].TimeUs, 100*(pred[i].TimeUs-r.TimeUs)/r.TimeUs
			row.PredictedUs, row.ErrPct = &p, &e
		}
		if u, ok := refUs[r.Bytes]; ok {
			row.ReferenceUs = u
			row.VsReferencePct = 100 * (r.TimeUs - u) / u
		}
		mr.Rows = append(mr.Rows, row)
	}
	if m.out != "" {
		if err := writeMeasuredLog(m.out, res, mr, no, ranks); err != nil {
			return nil, nil, err
		}
	}
	return mr, pred, nil
}

// writeMeasuredLog writes the measurement as nccl-tests output, its header
// saying what ran where and how it was timed.
func writeMeasuredLog(path string, res *collbench.Result, mr *measureRun, no ncclenv.Settings, ranks int) error {
	typ, elem := "bfloat16", 2
	if mr.Backend == "cpu" {
		typ, elem = "float", 4 // the CPU backend moves float32 values
	}
	op := string(res.Config.Op)
	// exec/cuda runs NCCL's all-reduce in place (one buffer), its other
	// collectives and all of exec/cpu's out of place: the time goes in
	// that column.
	inPlace := mr.Backend == "cuda" && res.Config.Op == model.AllReduce
	lg := &nccltests.Log{Name: path, Op: op, Ranks: ranks}
	iters := perIterTimes(res)
	for j, r := range res.Rows {
		out, in := r.TimeUs, 0.0
		if inPlace {
			out, in = 0, r.TimeUs
		}
		row, err := nccltests.NewRow(op, ranks, r.Bytes, elem, typ, out, in)
		if err != nil {
			return fmt.Errorf("-o %s: %w", path, err)
		}
		// nccl-tests -I: each iteration's slowest rank, summarized.
		if j < len(iters) && len(iters[j]) > 0 {
			it, err := nccltests.IterStats(iters[j], 0)
			if err != nil {
				return fmt.Errorf("-o %s: %w", path, err)
			}
			if inPlace {
				row.InIter = it
			} else {
				row.OutIter = it
			}
		}
		lg.Rows = append(lg.Rows, row)
	}
	// The settings and the CPU ranks go in the comments the reader takes
	// back (nccltests.SettingsComment, CPURanksComment, CPURankDevice):
	// calibrate fits the log under those settings, on a CPU box only.
	env := nccltests.SettingsComment(no)
	comments := []string{
		fmt.Sprintf("tpscope collective --measure: %s over %d ranks through the executor (exec/collbench) on the %s backend, %s",
			op, ranks, mr.Backend, time.Now().UTC().Format("2006-01-02 15:04 UTC")),
		fmt.Sprintf("time: %s per op, mean over %d measured steps x %d back-to-back ops per size x %d ranks (nccl-tests -a 1), after %d warm-up steps; %s; %s",
			mr.Timing, mr.Steps, mr.Iters, ranks, mr.Warmup, map[bool]string{true: "CUDA graphs", false: "eager launches"}[mr.Graphs],
			map[bool]string{true: "in place (out-of-place columns zeros)", false: "out of place (in-place columns zeros)"}[inPlace]),
		"per-iteration columns (nccl-tests -I 1): each measured step's back-to-back ops, the slowest rank's time each, summarized as nccl-tests does",
		env,
	}
	var dev string
	if mr.Backend == "cpu" {
		comments = append(comments, fmt.Sprintf("%s %d goroutines sharing %d cores (GOMAXPROCS %d), shared-memory ring collectives; not GPU figures",
			nccltests.CPURanksComment, ranks, runtime.NumCPU(), runtime.GOMAXPROCS(0)))
		dev = nccltests.CPURankDevice
	} else {
		var facts []string
		for _, kv := range backendResource(mr.Backend, nil) {
			switch kv.Key {
			case schema.ResGPUModel:
				dev = kv.Value.AsString()
			case schema.ResGPUDriver:
				facts = append(facts, "driver "+kv.Value.AsString())
			case schema.ResCUDAVersion:
				facts = append(facts, "CUDA "+kv.Value.AsString())
			case schema.ResNCCLVersion:
				facts = append(facts, "NCCL "+kv.Value.AsString())
			}
		}
		if len(facts) > 0 {
			comments = append(comments, strings.Join(facts, ", "))
		}
	}
	for range ranks {
		lg.Devices = append(lg.Devices, dev)
	}
	host, _ := os.Hostname()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	write := nccltests.Write
	if strings.EqualFold(filepath.Ext(path), ".json") {
		write = nccltests.WriteJSON // nccl-tests -J
	}
	werr := write(f, lg, nccltests.WriteOptions{Comments: comments, Host: host, Pid: os.Getpid(), Warmup: mr.Warmup, Iters: mr.Iters, Graph: mr.Graphs})
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("-o %s: %w", path, err)
	}
	return nil
}

// perIterTimes are, per size of res, the time of every measured
// iteration (step x back-to-back op) as nccl-tests -I takes it: the
// slowest rank's.
func perIterTimes(res *collbench.Result) [][]float64 {
	if res.Run == nil {
		return nil
	}
	out := make([][]float64, len(res.Rows))
	for j := range res.Rows {
		for st := range res.Run.OpUs {
			for k := range res.Config.Iters {
				i := j*res.Config.Iters + k
				worst := 0.0
				for r := range res.Run.OpUs[st] {
					if i < len(res.Run.OpUs[st][r]) {
						worst = math.Max(worst, res.Run.OpUs[st][r][i])
					}
				}
				out[j] = append(out[j], worst)
			}
		}
	}
	return out
}

// measuredTable is the table of a --measure run; without predictions
// (pred nil) it has no predicted columns. For CSV (csv true) the numbers
// are the values and the errors plain percentages (error_pct,
// vs_reference_pct), an empty cell where there is none; the table rounds
// them and writes "+1.2 %" and "-".
func measuredTable(mr *measureRun, pred []collectiveRow, csv bool) ([]string, [][]string) {
	num := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	pct := func(v float64) string { return fmt.Sprintf("%+.1f %%", v) }
	none, errCol, vsCol := "-", "error", "vs_reference"
	if csv {
		num, pct, none, errCol, vsCol = csvNum, csvNum, "", "error_pct", "vs_reference_pct"
	}
	header := []string{"size_bytes", "measured_us", "min_us", "max_us", "busbw_GBps"}
	if pred != nil {
		header = append(header, "predicted_us", errCol, "algo", "proto")
	}
	if mr.Reference != "" {
		header = append(header, "reference_us", vsCol)
	}
	var rows [][]string
	for i, r := range mr.Rows {
		row := []string{strconv.FormatInt(r.Bytes, 10), num(r.TimeUs), num(r.MinUs), num(r.MaxUs), num(r.BusBWGBps)}
		if pred != nil {
			row = append(row, num(*r.PredictedUs), pct(*r.ErrPct), pred[i].Algo, pred[i].Proto)
		}
		if mr.Reference != "" {
			if r.ReferenceUs > 0 {
				row = append(row, num(r.ReferenceUs), pct(r.VsReferencePct))
			} else {
				row = append(row, none, none)
			}
		}
		rows = append(rows, row)
	}
	return header, rows
}

// worstVsReference is the largest |measured - reference| / reference over
// the sizes both have, in percent (NaN when none).
func worstVsReference(mr *measureRun) (pct float64, bytes int64) {
	pct = math.NaN()
	for _, r := range mr.Rows {
		if r.ReferenceUs > 0 && (math.IsNaN(pct) || math.Abs(r.VsReferencePct) > math.Abs(pct)) {
			pct, bytes = r.VsReferencePct, r.Bytes
		}
	}
	return pct, bytes
}
