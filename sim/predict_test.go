package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// fixedColl prices every collective at a fixed time (a test double).
type fixedColl struct{ us float64 }

func (f fixedColl) Cost(op model.Collective, group []int, bytes int64) CollectiveCost {
	return CollectiveCost{TimeUs: f.us, LatencyUs: f.us, Algo: "Ring", Proto: "LL"}
}

// tinySchedule is two ranks of: norm (at its floor), all-reduce, norm.
func tinySchedule(ranks int) *model.Schedule {
	group := make([]int, ranks)
	for i := range group {
		group[i] = i
	}
	s := &model.Schedule{Workload: model.Workload{Phase: model.Decode, Batch: 1}}
	for r := 0; r < ranks; r++ {
		s.Ranks = append(s.Ranks, []model.Op{
			{ID: "L00.attn.input_norm", Kind: model.KindNorm, Block: "attn", Name: "input_norm", M: 1, BytesRead: 100, Rank: r},
			{ID: "L00.attn.allreduce", Kind: model.KindCollective, Block: "attn", Name: "allreduce", Collective: model.AllReduce, CommBytes: 14336, Group: group, Rank: r},
			{ID: "L00.moe.post_attn_norm", Kind: model.KindNorm, Block: "moe", Name: "post_attn_norm", M: 1, BytesRead: 100, Rank: r},
		})
	}
	return s
}

// Step times below follow from the RTX PRO 6000 preset's catalog device
// (topology/catalog.json, arch blackwell-sm120): norm floor (600 + 200 +
// 300 cycles) / 1650 MHz + 2 x 0.55 us = 1.77 us, also the norm's ramp, so
// a norm of 100 B (one CTA, 32 KiB / 0.6 us = 54.613 GB/s: 0.001831 us)
// costs 1.771831 us; LaunchEagerUs 10, KernelGapEagerUs 1.6, LaunchGraphUs
// 0.28 (a kernel node), TimingEventUs 1.81 and TimingEventGapUs 1.3 (a
// harness's timing events); ncclHostExtraUs 10 (the fixed all-reduce says Ring, so it is
// NCCL's), and a 20 us all-reduce.
func TestPredictOptions(t *testing.T) {
	const normUs = 1.77 + 100/(32768/0.6) // floor + 100 B at one CTA's 32 KiB per 0.6 us
	topo := mustTopo(t, "rtxpro6000-2s")
	cases := []struct {
		name     string
		opts     Options
		wantStep float64
		kernels  int
	}{
		// Eager: host launches end at 10, 30 (10 + 10 NCCL extra), 40;
		// each kernel carries the 1.6 us stream gap: norm 10-13.371831,
		// all-reduce 30-51.6 (launch-bound), norm 51.6-54.971831.
		{"eager", Options{}, 51.6 + 1.6 + normUs, 3},
		// Graph: one 10 us graph launch, then 3 kernels each +0.28 us:
		// 10 + (1.771831+0.28) + (20+0.28) + (1.771831+0.28) = 34.383662.
		{"graph", Options{CUDAGraphs: true}, 10 + 2*(normUs+0.28) + 20.28, 3},
		// Fusion removes the second norm (its 100 B ride on the all-reduce
		// at 1597 x 0.8 = 1277.6 GB/s: +0.0000783 us): launches end at 10,
		// 30; norm 10-13.371831, all-reduce 30-51.6000783.
		{"eager fused", Options{ARNormFusion: ToggleOn}, 51.6 + 100/1277.6e3, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr := predictTiny(t, topo, tc.opts)
			if math.Abs(pr.StepUs-tc.wantStep) > 1e-6 {
				t.Errorf("step %.6f us, want %.6f", pr.StepUs, tc.wantStep)
			}
			if pr.Kernels != tc.kernels {
				t.Errorf("kernels %d, want %d", pr.Kernels, tc.kernels)
			}
			if !pr.Symmetric || len(pr.Ops) != 3 {
				t.Errorf("symmetric %v with %d op rows, want true with 3", pr.Symmetric, len(pr.Ops))
			}
			if n := len(pr.CriticalPath); n == 0 || pr.CriticalPath[0] != 0 {
				t.Errorf("critical path %v does not start at the first op", pr.CriticalPath)
			} else if last := pr.Ops[pr.CriticalPath[n-1]]; math.Abs(last.StartUs+last.Us-pr.StepUs) > 1e-9 {
				t.Errorf("critical path %v ends at %.3f us, step %.3f us", pr.CriticalPath, last.StartUs+last.Us, pr.StepUs)
			}
			// 1 token per step: tokens/s = 1e6 / step.
			if !relNear(pr.TokensPerS, 1e6/tc.wantStep, 1e-9) {
				t.Errorf("tokens/s %.3f, want %.3f", pr.TokensPerS, 1e6/tc.wantStep)
			}
			if !relNear(pr.CommShareFrac, pr.CommUs/pr.StepUs, 1e-12) || pr.CommUs < 20 {
				t.Errorf("comm %.3f us share %.3f", pr.CommUs, pr.CommShareFrac)
			}
		})
	}
}

// predictTiny predicts tinySchedule(8) on topo with every collective
// priced at 20 us.
func predictTiny(t *testing.T, topo *topology.Topology, opts Options) *Prediction {
	t.Helper()
	p, err := newWithCollectives(topo, opts, fixedColl{20})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Predict(tinySchedule(8))
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// TestSpanGapUs: with a harness's timing events each op is three graph
// nodes, the kernel's (0.28 us) and its two events' (1.81 us each, the
// catalog's measured figures), of which the span from the opening event
// to the closing one holds all but the transition after the closing
// event, the op's SpanGapUs (1.3 us, measured between consecutive event
// nodes). Eager, the gaps are the 1.6 us stream gap and the events 1.3 us
// each (sim/predict.go): 1.6 + 2 x 1.3. With no events nothing lies
// between spans.
func TestSpanGapUs(t *testing.T) {
	topo := mustTopo(t, "rtxpro6000-2s")
	for _, tc := range []struct {
		name               string
		opts               Options
		overheadUs, spanUs float64
	}{
		{"graph, events", Options{CUDAGraphs: true, TimingEventsPerOp: 2}, 0.28 + 2*1.81, 1.3},
		{"eager, events", Options{TimingEventsPerOp: 2}, 1.6 + 2*1.3, 1.6},
		{"graph, no events", Options{CUDAGraphs: true}, 0.28, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := predictTiny(t, topo, tc.opts)
			op := pr.Ops[0] // the first norm: one kernel
			if math.Abs(op.OverheadUs-tc.overheadUs) > 1e-9 || math.Abs(op.SpanGapUs-tc.spanUs) > 1e-9 {
				t.Errorf("overhead %.3f us, span gap %.3f us; want %.3f and %.3f", op.OverheadUs, op.SpanGapUs, tc.overheadUs, tc.spanUs)
			}
		})
	}
}

// TestTimingEventsOncePerOp: a harness's two timing events bracket an
// op, however many kernels it launches: an op the engine runs with
// companion kernels (vLLM's NVFP4 linear quantizes its input first on an
// RTX PRO 6000) pays the graph node gap per kernel, 0.28 us each, and the
// two events once, 1.81 us each (the catalog's measured figures): 2 x
// 0.28 + 2 x 1.81 for a GEMM with one companion, where every kernel had
// been charged the events too.
func TestTimingEventsOncePerOp(t *testing.T) {
	topo := mustTopo(t, "rtxpro6000-2s")
	a, err := model.Preset("kimi-k2.5-nvfp4")
	if err != nil {
		t.Fatal(err)
	}
	s, err := model.Build(a, model.Plan{TP: 8}, model.Workload{Phase: model.Decode, Batch: 1, Context: 2048})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(topo, Options{CUDAGraphs: true, TimingEventsPerOp: 2, Engine: engprof.Ref{Name: "vllm"}})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Predict(s)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, op := range pr.Ops {
		if op.Kind != model.KindGEMM || op.Cost.ExtraKernels != 1 {
			continue
		}
		if want := 2*0.28 + 2*1.81; math.Abs(op.OverheadUs-want) > 1e-9 {
			t.Fatalf("%s: overhead %.3f us, want %.3f (two kernels' node gaps, the op's two events)", op.ID, op.OverheadUs, want)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no GEMM with one companion kernel in the step")
	}
}

// The representative-rank shortcut must give exactly what simulating every
// rank gives.
func TestSymmetricEqualsAllRanks(t *testing.T) {
	topo := mustTopo(t, "rtxpro6000-2s")
	a, err := model.Preset("kimi-k2.5-nvfp4")
	if err != nil {
		t.Fatal(err)
	}
	s, err := model.Build(a, model.Plan{TP: 8}, model.Workload{Phase: model.Decode, Batch: 4, Context: 2048})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{}, {CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}} {
		p, err := New(topo, opts)
		if err != nil {
			t.Fatal(err)
		}
		sym, err := p.Predict(s)
		if err != nil {
			t.Fatal(err)
		}
		if !sym.Symmetric {
			t.Fatal("a TP-only build is not recognized as symmetric")
		}
		// Simulate every rank (collectives synchronizing their groups).
		if err := p.simulateRanks(s); err != nil {
			t.Fatal(err)
		}
		all := p.eng.end
		step := 0.0
		for _, e := range all[:len(p.eng.ops)] {
			step = math.Max(step, e)
		}
		if math.Abs(step-sym.StepUs) > 1e-6*sym.StepUs {
			t.Errorf("%+v: all ranks %.3f us, representative %.3f us", opts, step, sym.StepUs)
		}
	}
}

func TestPredictErrors(t *testing.T) {
	topo := mustTopo(t, "rtxpro6000-2s")
	p, err := newWithCollectives(topo, Options{}, fixedColl{1})
	if err != nil {
		t.Fatal(err)
	}
	bad := tinySchedule(2)
	bad.Ranks[1][1].Group = []int{1, 1}
	tooMany := tinySchedule(9)
	badDep := tinySchedule(1)
	badDep.Ranks[0][0].Deps = []int{0}
	cases := []struct {
		name string
		s    *model.Schedule
		want string
	}{
		{"empty", &model.Schedule{}, "empty schedule"},
		{"more ranks than gpus", tooMany, "9 ranks but topology rtxpro6000-2s has 8 GPUs"},
		{"duplicate group member", bad, "names rank 1 twice"},
		{"dependency not earlier", badDep, "dependency 0 is not an earlier op"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Predict(tc.s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := newWithCollectives(topo, Options{MTPAcceptFrac: 1.5}, fixedColl{1}); err == nil || !strings.Contains(err.Error(), "mtp_accept_rate") {
		t.Errorf("accept rate 1.5: err %v", err)
	}
	if _, err := New(topo, Options{NCCL: ncclenv.Settings{P2PLevel: "FOO"}}); err == nil || !strings.Contains(err.Error(), "NCCL_P2P_LEVEL") {
		t.Errorf("bad P2P level: err %v", err)
	}
	// Options.Validate checks the level itself, naming the field, whatever
	// the collective model.
	if _, err := newWithCollectives(topo, Options{NCCL: ncclenv.Settings{P2PLevel: "FOO"}}, fixedColl{1}); err == nil || !strings.Contains(err.Error(), "p2p_level") {
		t.Errorf("bad P2P level with a custom collective model: err %v", err)
	}
	if err := (&Options{NCCL: ncclenv.Settings{P2PLevel: "sys"}}).Validate(); err != nil {
		t.Errorf("P2P level sys: %v", err)
	}
}

// Expected tokens per step with k draft tokens and acceptance a is
// 1 + a + ... + a^k: k=1, a=0.7 -> 1.7; k=3, a=0.5 -> 1.875.
func TestTokensPerStep(t *testing.T) {
	for _, c := range []struct {
		k    int
		a    float64
		want float64
	}{{0, 0.9, 1}, {1, 0.7, 1.7}, {3, 0.5, 1.875}, {2, 1, 3}} {
		o := Options{MTPAcceptFrac: c.a}
		if got := o.TokensPerStep(c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("k=%d a=%v: %v, want %v", c.k, c.a, got, c.want)
		}
	}
}

// vLLM's capture sizes (serving-facts.md): 1, 2, 4, 8..248 step 8,
// 256..512 step 16 on every GPU (here a 24 GiB one at TP 1, where SGLang
// would stop at 24); beyond 512 the step runs eagerly.
func TestGraphTokens(t *testing.T) {
	o := Options{CUDAGraphs: true}
	for _, c := range []struct {
		in, want int
		graphed  bool
	}{{1, 1, true}, {3, 4, true}, {5, 8, true}, {9, 16, true}, {249, 256, true}, {257, 272, true}, {512, 512, true}, {513, 513, false}} {
		got, g := o.GraphTokens(c.in, 24<<30, 1)
		if got != c.want || g != c.graphed {
			t.Errorf("GraphTokens(%d) = %d, %v; want %d, %v", c.in, got, g, c.want, c.graphed)
		}
	}
}

// Every cost field sameCost's fast path relies on must lie in the raw
// compared region [rawFrom, rawTo).
func TestRawCostLayout(t *testing.T) {
	var o model.Op
	fields := map[string]uintptr{
		"M": unsafe.Offsetof(o.M), "N": unsafe.Offsetof(o.N), "K": unsafe.Offsetof(o.K), "Batch": unsafe.Offsetof(o.Batch),
		"WeightDtype": unsafe.Offsetof(o.WeightDtype), "KVDtype": unsafe.Offsetof(o.KVDtype), "FLOPs": unsafe.Offsetof(o.FLOPs),
		"BytesRead": unsafe.Offsetof(o.BytesRead), "BytesWritten": unsafe.Offsetof(o.BytesWritten), "KVBytes": unsafe.Offsetof(o.KVBytes),
		"Collective": unsafe.Offsetof(o.Collective), "CommBytes": unsafe.Offsetof(o.CommBytes),
	}
	for name, off := range fields {
		if off < rawFrom || off >= rawTo {
			t.Errorf("model.Op.%s at offset %d is outside the compared region [%d, %d)", name, off, rawFrom, rawTo)
		}
	}
	a := model.Op{Kind: model.KindGEMM, M: 1, N: 2, K: 3, FLOPs: 4}
	for _, mut := range []func(*model.Op){
		func(o *model.Op) { o.N = 3 }, func(o *model.Op) { o.Batch = 2 }, func(o *model.Op) { o.WeightDtype = model.FP8 },
		func(o *model.Op) { o.KVBytes = 1 }, func(o *model.Op) { o.Kind = model.KindNorm }, func(o *model.Op) { o.Deps = []int{0} },
		func(o *model.Op) { o.CommBytes = 1 },
	} {
		b := a
		mut(&b)
		if sameCost(&a, &b) {
			t.Errorf("sameCost misses a change: %+v vs %+v", a, b)
		}
	}
	b := a
	b.ID, b.Rank = "other", 3
	if !sameCost(&a, &b) {
		t.Error("sameCost: ID and Rank must not matter")
	}
}

// builtSymmetric (used for schedules PredictScenario builds itself) must
// agree with the full check on every kind of plan model.Build makes.
func TestBuiltSymmetricMatchesCheck(t *testing.T) {
	for _, c := range []struct {
		model string
		plan  model.Plan
		w     model.Workload
	}{
		{"kimi-k2.5-nvfp4", model.Plan{TP: 8}, model.Workload{Batch: 3, Context: 1000}},
		{"deepseek-v3", model.Plan{TP: 8, EP: true}, model.Workload{Batch: 8, Context: 1000, SpecTokens: 1}},
		{"kimi-k2.5-nvfp4", model.Plan{TP: 2, DP: 4, EP: true}, model.Workload{Batch: 8, Context: 1000}},
		{"kimi-k2.5-nvfp4", model.Plan{TP: 8, DCP: 4}, model.Workload{Batch: 2, Context: 8000}},
		{"glm-5-nvfp4", model.Plan{TP: 4}, model.Workload{Batch: 1, Context: 4096}},
	} {
		a, err := model.Preset(c.model)
		if err != nil {
			t.Fatal(err)
		}
		c.w.Phase = model.Decode
		s, err := model.Build(a, c.plan, c.w)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := builtSymmetric(s), symmetric(s); got != want {
			t.Errorf("%s %s: builtSymmetric %v, full check %v", c.model, c.plan, got, want)
		}
	}
}

// TestLatestEnd: the step's end is math.Max folded over the ops' ends
// from 0, NaN included.
func TestLatestEnd(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, ends := range [][]float64{
		nil, {3}, {1, 5, 2}, {math.Copysign(0, -1)}, {-1, -2}, {2, nan, 7}, {inf, nan}, {nan, inf}, {1, inf},
	} {
		want := 0.0
		for _, e := range ends {
			want = math.Max(want, e)
		}
		got := latestEnd(ends)
		if !(got == want && math.Signbit(got) == math.Signbit(want)) && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Errorf("latestEnd(%v) = %v, want %v", ends, got, want)
		}
	}
}

// TestGraphTokensTRTLLM: TensorRT-LLM's default capture
// (CudaGraphConfig without batch_sizes or enable_padding): batches 1 to
// 32, 64 and 128, unpadded, so a batch of 40 or 100 runs eagerly at its
// own size while 17, 64 and 128 replay their own graphs; nothing above 128
// is graphed. Its steps with a prompt run eagerly (generation-only
// graphs). vLLM on the same batch of 40 replays its graph of 40.
func TestGraphTokensTRTLLM(t *testing.T) {
	o := Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "trtllm"}}
	want := []int{64, 128}
	for b := 1; b <= 32; b++ {
		want = append(want, b)
	}
	slices.Sort(want)
	if got := o.CaptureSizes(80<<30, 8); !slices.Equal(got, want) {
		t.Errorf("TensorRT-LLM capture sizes %v, want %v", got, want)
	}
	for _, c := range []struct {
		in, want int
		graphed  bool
	}{{1, 1, true}, {17, 17, true}, {33, 33, false}, {40, 40, false}, {64, 64, true}, {100, 100, false}, {128, 128, true}, {129, 129, false}} {
		if got, g := o.GraphTokens(c.in, 80<<30, 8); got != c.want || g != c.graphed {
			t.Errorf("trtllm GraphTokens(%d) = %d, %v; want %d, %v", c.in, got, g, c.want, c.graphed)
		}
	}
	if g := o.GraphCapture(80<<30, 8); !g.DecodeOnly || !g.Exact {
		t.Errorf("trtllm capture %+v: want decode-only and exact", g)
	}
	v := Options{CUDAGraphs: true}
	if got, g := v.GraphTokens(40, 80<<30, 8); got != 40 || !g {
		t.Errorf("vllm GraphTokens(40) = %d, %v; want 40, true", got, g)
	}
}

// TestFirstRankOps: the ops of the first rank a prediction holds, which
// need not be rank 0 (a prediction of local ranks 2 and 3), stopping at
// the next rank's first op.
func TestFirstRankOps(t *testing.T) {
	pr := &Prediction{Ops: []OpResult{{ID: "a", Rank: 2}, {ID: "b", Rank: 2}, {ID: "a", Rank: 3}, {ID: "b", Rank: 3}}}
	if got := pr.FirstRankOps(); len(got) != 2 || got[0].Rank != 2 || got[1].ID != "b" || got[1].Rank != 2 {
		t.Errorf("first rank's ops %+v, want rank 2's a and b", got)
	}
	if got := (&Prediction{}).FirstRankOps(); len(got) != 0 {
		t.Errorf("no ops: %+v", got)
	}
}
