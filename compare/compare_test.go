package compare_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The synthetic end-to-end case: a prediction of a known scenario, and a
// "measurement" made by perturbing the cost model in two known ways:
//
//   - every dense GEMM (kind gemm) runs at 0.6 x its prior compute
//     efficiency: true time = overhead + max(min kernel, ramp +
//     max(ComputeUs / 0.6, MemoryUs)) from the op's prior cost terms (the
//     form sim prices a kernel in), plus its companion kernels at their
//     prior (the NVFP4 linear's input quantization that the engine
//     profile adds);
//   - every all-reduce takes 15 us longer than predicted;
//
// everything else takes its predicted time. Each op's time is multiplied
// by log-normal noise (sigma 2 %, seeded), the host launch of every op takes
// 5 us (the preset's prior is 10 us), and ops run back to back on each rank.
const (
	gemmEffFactor = 0.6
	arExtraUs     = 15.0
	noiseSigma    = 0.02
	hostLaunchUs  = 5.0
)

// synthScenario: Kimi-K2.5 NVFP4 on the seed box, TP 8, one 2048-token
// prefill: its dense GEMMs are compute-bound (bf16 and nvfp4 families),
// MoE GEMMs and norms memory-bound, all-reduces link-bound.
var synthScenario = spec{Model: "kimi-k2.5-nvfp4", Topology: "rtxpro6000-2s", Plan: "tp8", Workload: "prefill b1 ctx2048"}

// trueUs is the perturbed (noise-free) time of op i of the prediction.
func trueUs(op *sim.OpResult, sop *model.Op) float64 {
	switch {
	case op.Kind == model.KindGEMM && !op.Cost.Fused:
		c := op.Cost
		return op.OverheadUs + math.Max(c.MinKernelUs, c.RampUs+math.Max(c.ComputeUs/gemmEffFactor, c.MemoryUs)) + c.ExtraKernelsUs
	case op.Kind == model.KindCollective && sop.Collective == model.AllReduce:
		return op.Us + arExtraUs
	}
	return op.Us
}

type synth struct {
	pr    *sim.Prediction
	sched *model.Schedule
	truth []float64 // per pr.Ops index
	// omit, when set, says which ops the written run leaves out (a
	// program that differs from the schedule).
	omit func(op *model.Op) bool
	// rankSkew, when set, starts rank r's ops r x rankSkew after the
	// step's start (ranks launched one after another).
	rankSkew time.Duration
}

func newSynth(t testing.TB, spec spec) *synth {
	t.Helper()
	return newSynthTruth(t, spec, trueUs)
}

// newSynthTruth is newSynth with another perturbation: truth gives the
// measured (noise-free) time of each op.
func newSynthTruth(t testing.TB, spec spec, truth func(*sim.OpResult, *model.Op) float64) *synth {
	t.Helper()
	pr, sched, err := sim.Predict(spec.scenario(t))
	if err != nil {
		t.Fatal(err)
	}
	if !pr.Symmetric {
		t.Fatal("synthetic scenario expected to be symmetric")
	}
	s := &synth{pr: pr, sched: sched, truth: make([]float64, len(pr.Ops))}
	for i := range pr.Ops {
		s.truth[i] = truth(&pr.Ops[i], &sched.Ranks[0][i])
	}
	return s
}

// write exports steps x ranks of measured spans through traces'
// OTLP-JSON file exporter and returns the file.
func (s *synth) write(t testing.TB, dir, name string, spec spec, steps int, seed uint64) string {
	t.Helper()
	path := filepath.Join(dir, name)
	exp, err := traces.NewFileExporter(path)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(1<<16),
		sdktrace.WithMaxExportBatchSize(4096), sdktrace.WithBlocking(), sdktrace.WithBatchTimeout(time.Hour)))
	tr := tp.Tracer(schema.ScopeName)
	rng := rand.New(rand.NewPCG(seed, 7))
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ranks := len(s.sched.Ranks)
	for step := 0; step < steps; step++ {
		ctx, root := tr.Start(context.Background(), schema.SpanStep, trace.WithTimestamp(at), trace.WithAttributes(
			schema.AttrModel.String(spec.Model), schema.AttrTopology.String(spec.Topology), schema.AttrPlan.String(spec.Plan),
			schema.AttrWorkload.String(spec.Workload), schema.AttrOptions.String(spec.Options),
			schema.AttrStep.Int(step), schema.AttrRanks.Int(ranks)))
		stepEnd := at
		for r := 0; r < ranks; r++ {
			cur := at.Add(time.Duration(r) * s.rankSkew)
			rctx, rs := tr.Start(ctx, schema.RankSpanName(r), trace.WithTimestamp(cur), trace.WithAttributes(schema.AttrRank.Int(r)))
			for i := range s.sched.Ranks[r] {
				op := &s.sched.Ranks[r][i]
				if s.pr.Ops[i].Cost.Fused || (s.omit != nil && s.omit(op)) {
					continue
				}
				us := s.truth[i] * math.Exp(noiseSigma*rng.NormFloat64())
				attrs := append(schema.OpAttributes(op), schema.AttrDeviceUs.Float64(us),
					schema.AttrHostLaunchUs.Float64(hostLaunchUs*math.Exp(noiseSigma*rng.NormFloat64())))
				_, sp := tr.Start(rctx, op.ID, trace.WithTimestamp(cur), trace.WithAttributes(attrs...))
				cur = cur.Add(time.Duration(us * 1e3))
				sp.End(trace.WithTimestamp(cur))
			}
			rs.End(trace.WithTimestamp(cur))
			if cur.After(stepEnd) {
				stepEnd = cur
			}
		}
		root.End(trace.WithTimestamp(stepEnd))
		at = stepEnd.Add(time.Millisecond)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path
}

func readSource(t testing.TB, src string) *traces.Result {
	t.Helper()
	res, err := traces.ReadAll(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// synthRun is the perturbed run shared by the compare and calibrate
// tests: synthSteps steps of synthScenario, written and read once.
var synthRun struct {
	once sync.Once
	s    *synth
	res  *traces.Result
	dir  string
}

const synthSteps = 4

func sharedRun(t *testing.T) (*synth, *traces.Result) {
	synthRun.once.Do(func() {
		dir, err := os.MkdirTemp("", "tpscope-synth")
		if err != nil {
			t.Fatal(err)
		}
		synthRun.dir = dir
		synthRun.s = newSynth(t, synthScenario)
		synthRun.res = readSource(t, synthRun.s.write(t, dir, "run.json", synthScenario, synthSteps, 1))
		os.RemoveAll(dir)
	})
	if synthRun.res == nil {
		t.Fatal("synthetic run not written")
	}
	return synthRun.s, synthRun.res
}

func TestCompareSyntheticPerturbation(t *testing.T) {
	s, res := sharedRun(t)
	dir := t.TempDir()
	const steps = synthSteps
	rep, err := compare.Compare([]*traces.Result{res}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 1 {
		t.Fatalf("scenarios: got %d, want 1", len(rep.Scenarios))
	}
	sr := &rep.Scenarios[0]
	if sr.Mode != compare.AlignByOpID || sr.Steps != steps || sr.Ranks != 8 || sr.Matched != sr.Spans {
		t.Fatalf("alignment: mode %s, %d steps, %d ranks, %d of %d spans matched; issues %v", sr.Mode, sr.Steps, sr.Ranks, sr.Matched, sr.Spans, sr.Issues)
	}
	if len(sr.Issues) != 0 {
		t.Errorf("issues on a clean trace: %v", sr.Issues)
	}
	// Per op: error = predicted / measured - 1 with measured the
	// perturbed time. Compute-bound GEMMs: (gap + ComputeUs) / (gap +
	// ComputeUs / 0.6) - 1, -40 % for a zero per-kernel gap; all-reduces: -15 / (pred + 15); others 0. The median of
	// 32 samples with 2 % noise has a standard error of 1.25 x 2 % /
	// sqrt(32) = 0.44 %; over ~1300 rows the largest deviation stays within
	// 4 standard errors (1.8 %); tolerance 2 points.
	const tolPts = 2.0
	idx := map[string]int{}
	for i := range s.pr.Ops {
		idx[s.pr.Ops[i].ID] = i
	}
	var gemmCompute, ar, other int
	for _, row := range sr.Ops {
		i := idx[row.Key]
		op := &s.pr.Ops[i]
		want := 0.0
		switch {
		case op.Kind == model.KindGEMM && op.Bound == sim.BoundCompute:
			// (overhead + compute) / (overhead + compute / 0.6) - 1: -40 %
			// when the per-kernel overhead is zero, a little less otherwise.
			want = (op.Us/s.truth[i] - 1) * 100
			if want > -30 || want < (gemmEffFactor-1)*100-tolPts {
				t.Errorf("%s: compute-bound gemm expected near -40 %%, derived %.1f %%", row.Key, want)
			}
			gemmCompute++
		case op.Kind == model.KindCollective && s.sched.Ranks[0][i].Collective == model.AllReduce:
			want = -arExtraUs / (op.Us + arExtraUs) * 100
			ar++
		case op.Kind != model.KindGEMM:
			other++
		default:
			want = (op.Us/s.truth[i] - 1) * 100
		}
		if math.Abs(row.ErrPct-want) > tolPts {
			t.Errorf("%s (%s, %s): error %.2f %%, want %.2f %% ± %.1f", row.Key, row.Kind, row.Bound, row.ErrPct, want, tolPts)
		}
		if row.N != steps*8 {
			t.Errorf("%s: %d samples, want %d", row.Key, row.N, steps*8)
		}
	}
	if gemmCompute < 100 || ar < 100 || other < 100 {
		t.Fatalf("rows: %d compute-bound gemm, %d all-reduce, %d other: the scenario no longer exercises the perturbation", gemmCompute, ar, other)
	}
	// Largest absolute error first.
	for i := 1; i < len(sr.Ops); i++ {
		if sr.Ops[i].AbsErrUs > sr.Ops[i-1].AbsErrUs {
			t.Fatalf("ops not sorted by absolute error at %d", i)
		}
	}
	// Step: measured = sum of the perturbed times (ops back to back), the
	// noise of ~1300 ops averaging out well below 0.5 %.
	sum := 0.0
	for i := range s.truth {
		if !s.pr.Ops[i].Cost.Fused {
			sum += s.truth[i]
		}
	}
	if math.Abs(sr.Step.MedianUs/sum-1) > 0.005 {
		t.Errorf("measured step %.1f us, want %.1f us (sum of perturbed op times) ± 0.5 %%", sr.Step.MedianUs, sum)
	}
	if want := (s.pr.StepUs - sum) / sum * 100; math.Abs(sr.Step.ErrPct-want) > 0.5 {
		t.Errorf("step error %.2f %%, want %.2f %%", sr.Step.ErrPct, want)
	}
	// Per kind: gemm's measured sum is the sum of the perturbed GEMM times.
	for _, k := range sr.Kinds {
		want := 0.0
		for i := range s.truth {
			if s.pr.Ops[i].Kind == k.Kind && !s.pr.Ops[i].Cost.Fused {
				want += s.truth[i]
			}
		}
		if math.Abs(k.MedianUs/want-1) > 0.01 {
			t.Errorf("kind %s: measured %.1f us per step, want %.1f ± 1 %%", k.Kind, k.MedianUs, want)
		}
	}
	// Renderers carry the numbers.
	for name, f := range map[string]func(*bytes.Buffer) error{
		"table":    func(b *bytes.Buffer) error { return rep.WriteTable(b, 5) },
		"markdown": func(b *bytes.Buffer) error { return rep.WriteMarkdown(b, 5) },
		"json":     func(b *bytes.Buffer) error { return rep.WriteJSON(b) },
	} {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(b.String(), sr.Ops[0].Key) {
			t.Errorf("%s output lacks the top op %s", name, sr.Ops[0].Key)
		}
	}
	// Plot.
	for _, ext := range []string{".png", ".svg"} {
		if err := compare.WritePlot(filepath.Join(dir, "cmp"+ext), rep); err != nil {
			t.Errorf("plot %s: %v", ext, err)
		}
	}
}

func TestCalibrateSyntheticRecoversPerturbation(t *testing.T) {
	s, res := sharedRun(t)
	tc, err := compare.Calibrate([]*traces.Result{res}, compare.CalibrateOptions{Created: "2026-12-02T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	// GEMM families: the fitted efficiency is 0.6 x the preset's prior
	// (topology/catalog.json arch blackwell-sm120: gemm/bf16 0.70,
	// gemm/nvfp4 1.0, the padded FP4 tiles' rate), within 2 %.
	// Families left alone keep a compute scale of 1 within 2 %.
	want := map[string]float64{"gemm/bf16": 0.70 * gemmEffFactor, "gemm/nvfp4": 1.0 * gemmEffFactor}
	seen := 0
	for _, f := range tc.Families {
		if w, ok := want[f.Family]; ok {
			seen++
			if !f.ComputeDetermined || math.Abs(f.EfficiencyFrac/w-1) > 0.02 {
				t.Errorf("%s: efficiency %.4f (determined %v), want %.4f ± 2 %%", f.Family, f.EfficiencyFrac, f.ComputeDetermined, w)
			}
			continue
		}
		if math.Abs(f.ComputeScale-1) > 0.02 || math.Abs(f.MemoryScale-1) > 0.02 {
			t.Errorf("%s: scales %.4f / %.4f, want 1 ± 2 %% (not perturbed)", f.Family, f.ComputeScale, f.MemoryScale)
		}
	}
	if seen != 2 {
		t.Fatalf("fitted families %v lack gemm/bf16 or gemm/nvfp4", tc.Families)
	}
	// All-reduce: at the measured size the calibrated model takes 15 us
	// more than NCCL's constants (±3 us: 2 % noise on ~2.2 ms samples
	// averages to ~1 us over the even steps' samples).
	var arBytes int64
	for i := range s.sched.Ranks[0] {
		if op := &s.sched.Ranks[0][i]; op.Collective == model.AllReduce {
			arBytes = op.CommBytes
			break
		}
	}
	group := []int{0, 1, 2, 3, 4, 5, 6, 7}
	prior, err := sim.NewCollectiveModel(tc.Topology, ncclenv.Settings{IgnoreCalibration: true})
	if err != nil {
		t.Fatal(err)
	}
	cal, err := sim.NewCollectiveModel(tc.Topology, ncclenv.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	d := cal.Cost(model.AllReduce, group, arBytes).TimeUs - prior.Cost(model.AllReduce, group, arBytes).TimeUs
	t.Logf("all-reduce of %d B: calibrated - prior = %.2f us", arBytes, d)
	if math.Abs(d-arExtraUs) > 3 {
		t.Errorf("calibrated all-reduce of %d B: +%.2f us over the prior, want +%.0f ± 3", arBytes, d, arExtraUs)
	}
	if math.Abs(tc.Device.LaunchEagerUs-hostLaunchUs) > 0.1 {
		t.Errorf("launch_eager_us %.3f, want %.1f ± 0.1", tc.Device.LaunchEagerUs, hostLaunchUs)
	}
	for _, f := range tc.Families {
		t.Logf("%-16s efficiency %.4f (prior %.4f, determined %v) mem %.4f (prior %.4f)", f.Family, f.EfficiencyFrac, f.PriorEfficiencyFrac, f.ComputeDetermined, f.MemEfficiencyFrac, f.PriorMemEfficiencyFrac)
	}
	t.Logf("held out: op RMS error %.2f %% -> %.2f %%, step error %.2f %% -> %.2f %%", tc.Before.OpRMSErrPct, tc.After.OpRMSErrPct, tc.Before.StepErrPct, tc.After.StepErrPct)
	// Held out (odd steps): the perturbation makes the prior wrong by tens
	// of % on GEMMs; the calibrated box leaves the noise (~0.5 % on a
	// median of 16 samples).
	if tc.Before.OpRMSErrPct < 10 || tc.After.OpRMSErrPct > 1.5 || tc.After.Units == 0 {
		t.Errorf("held-out op RMS error: before %.2f %%, after %.2f %% (%d units); want before > 10, after < 1.5", tc.Before.OpRMSErrPct, tc.After.OpRMSErrPct, tc.After.Units)
	}
	// Provenance travels in the file.
	b, err := tc.Topology.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"calibrated: trace", "2026-12-02T00:00:00Z", "efficiency.gemm/nvfp4", "\"calibration\""} {
		if !bytes.Contains(b, []byte(w)) {
			t.Errorf("calibrated topology lacks %q", w)
		}
	}
}

func TestCompareGainVerdict(t *testing.T) {
	// Two runs of the same scenario; the "optimized" one is a trace whose
	// options name ar-norm-fusion but whose measured times are those of the
	// baseline: the measured gain is 0, the predicted gain is what sim says
	// fusion saves, so the verdict must be "model wrong here" when sim
	// predicts more than 5 points, "not worth it" otherwise.
	base := synthScenario
	opt := synthScenario
	opt.Options = "ar-norm-fusion"
	s := newSynth(t, base)
	dir := t.TempDir()
	pa := s.write(t, dir, "base.json", base, 2, 3)
	pb := s.write(t, dir, "opt.json", opt, 2, 4)
	rep, err := compare.Compare([]*traces.Result{readSource(t, pa), readSource(t, pb)}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 2 || len(rep.Gains) != 1 {
		t.Fatalf("scenarios %d, gains %d; want 2 and 1", len(rep.Scenarios), len(rep.Gains))
	}
	g := rep.Gains[0]
	if g.Options != "ar-norm-fusion" || g.Baseline != "none" {
		t.Errorf("gain row %+v", g)
	}
	if math.Abs(g.Measured.StepPct) > 0.5 {
		t.Errorf("measured gain %.2f %%, want 0 ± 0.5 (same measured times)", g.Measured.StepPct)
	}
	pb2 := rep.Scenarios[1].Step.PredictedUs
	pb1 := rep.Scenarios[0].Step.PredictedUs
	wantGain := (pb1 - pb2) / pb1 * 100
	if math.Abs(g.Predicted.StepPct-wantGain) > 1e-9 {
		t.Errorf("predicted gain %.3f, want %.3f", g.Predicted.StepPct, wantGain)
	}
	wantVerdict := "not worth it"
	if math.Abs(wantGain-g.Measured.StepPct) > compare.DefaultGainTolerancePts {
		wantVerdict = "model wrong here"
	}
	if !strings.HasPrefix(g.Verdict, wantVerdict) {
		t.Errorf("verdict %q, want %q...", g.Verdict, wantVerdict)
	}
}

// TestCompareStepSpansItsRanks: a step's measured time is from the
// earliest op start on any rank of its trace to the latest op end, the
// step time run measures and records: with rank r started r x 2 ms late,
// each step is its ranks' union (read here from the spans), 6 ms longer
// than any one rank's own extent, and the median is over those.
func TestCompareStepSpansItsRanks(t *testing.T) {
	sc := spec{Model: "tiny-mla-moe", Topology: "h200-nvswitch", Plan: "tp4", Workload: "decode b1 ctx4096"}
	s := newSynth(t, sc)
	const skew = 2 * time.Millisecond
	s.rankSkew = skew
	res := readSource(t, s.write(t, t.TempDir(), "skew.json", sc, 3, 1))
	type extent struct{ lo, hi int64 }
	type rankKey struct {
		trace trace.TraceID
		rank  int
	}
	union := map[trace.TraceID]extent{}  // per trace
	longest := map[trace.TraceID]int64{} // per trace: the longest rank's own extent
	perRank := map[rankKey]extent{}
	for _, sp := range res.Spans {
		if !traces.IsOpSpan(&sp) {
			continue
		}
		u, ok := union[sp.TraceID]
		if !ok {
			u = extent{sp.Start, sp.End()}
		}
		union[sp.TraceID] = extent{min(u.lo, sp.Start), max(u.hi, sp.End())}
		k := rankKey{sp.TraceID, sp.Rank}
		r, ok := perRank[k]
		if !ok {
			r = extent{sp.Start, sp.End()}
		}
		perRank[k] = extent{min(r.lo, sp.Start), max(r.hi, sp.End())}
	}
	for k, r := range perRank {
		longest[k.trace] = max(longest[k.trace], r.hi-r.lo)
	}
	var steps []float64
	for id, u := range union {
		if gap := u.hi - u.lo - longest[id]; gap < int64(3*skew)-int64(time.Millisecond) {
			t.Fatalf("trace %s: its ranks' union is %d ns longer than its longest rank; want about %d", id, gap, 3*skew)
		}
		steps = append(steps, float64(u.hi-u.lo)/1e3)
	}
	if len(steps) != 3 {
		t.Fatalf("%d traces, want 3", len(steps))
	}
	slices.Sort(steps)
	rep, err := compare.Compare([]*traces.Result{res}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 1 {
		t.Fatalf("scenarios: %d, want 1", len(rep.Scenarios))
	}
	st := rep.Scenarios[0].Step
	if st.N != 3 || math.Abs(st.MedianUs-steps[1]) > 1e-6 {
		t.Errorf("measured step: median %.3f us over %d steps; want %.3f us (the ranks' union; steps %v)", st.MedianUs, st.N, steps[1], steps)
	}
}
