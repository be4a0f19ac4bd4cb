package cpu_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces/schema"
)

func tinySchedule(t testing.TB, p model.Plan, w model.Workload) *model.Schedule {
	t.Helper()
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	s, err := model.Build(a, p, w)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTinyTP4 runs the tiny MLA+MoE model at TP 4 on goroutine ranks and
// counts spans: every op of every rank of every measured step, plus one
// root and one rank span per rank per step.
func TestTinyTP4(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := tinySchedule(t, model.Plan{TP: 4}, model.Workload{Phase: model.Decode, Batch: 8, Context: 512})
	const steps = 3
	tp, rec := exectest.NewRecorder()
	defer tp.Shutdown(context.Background())
	res, err := exec.Run(context.Background(), s, cpu.New(), exec.WithTracerProvider(tp), exec.WithSteps(steps), exec.WithWarmup(1))
	if err != nil {
		t.Fatal(err)
	}
	var ops, roots, rankSpans int
	for _, sp := range rec.Ended() {
		switch {
		case sp.Name() == schema.SpanStep:
			roots++
		case len(sp.Name()) > 5 && sp.Name()[:5] == "rank/":
			rankSpans++
		default:
			ops++
		}
	}
	if want := s.NumOps() * steps; ops != want || roots != steps || rankSpans != 4*steps {
		t.Errorf("op spans %d (want %d = %d ops x %d steps), roots %d, rank spans %d", ops, want, s.NumOps(), steps, roots, rankSpans)
	}
	t.Logf("step median %.0f us p10 %.0f p90 %.0f tokens/s %.0f", res.Summary.StepMedianUs, res.Summary.StepP10Us, res.Summary.StepP90Us, res.Summary.TokensPerS)
	for _, k := range res.Summary.ByKind {
		t.Logf("  %-12s %3d ops %8.1f us %5.1f%%", k.Kind, k.Ops, k.Us, 100*k.Share)
	}
}

// TestScaleArch: kimi-k2.5 scaled by 8 keeps its structure (layers, heads,
// experts, top-k, so the same op IDs) and divides widths: hidden 7168/8 =
// 896 (a multiple of 16), kv_lora 512/8 = 64, rope head dim 64/8 = 8.
func TestScaleArch(t *testing.T) {
	a, err := model.Preset("kimi-k2.5")
	if err != nil {
		t.Skip(err)
	}
	sa, err := model.ScaleArch(a, 8)
	if err != nil {
		t.Fatal(err)
	}
	if sa.Hidden != 896 || sa.KVLoraRank != 64 || sa.QKRopeHeadDim != 8 || sa.Layers != a.Layers || sa.Heads != a.Heads || sa.RoutedExperts != a.RoutedExperts || sa.TopK != a.TopK {
		t.Errorf("scaled %+v", sa)
	}
	w := model.Workload{Phase: model.Decode, Batch: 4, Context: 256}
	full, err := model.Build(a, model.Plan{TP: 8}, w)
	if err != nil {
		t.Fatal(err)
	}
	small, err := model.Build(sa, model.Plan{TP: 8}, w)
	if err != nil {
		t.Fatal(err)
	}
	if full.NumOps() != small.NumOps() {
		t.Fatalf("ops %d vs %d", full.NumOps(), small.NumOps())
	}
	for i := range full.Ranks[0] {
		if full.Ranks[0][i].ID != small.Ranks[0][i].ID {
			t.Fatalf("op %d: %s vs %s", i, full.Ranks[0][i].ID, small.Ranks[0][i].ID)
		}
	}
	for _, bad := range []float64{0.5, 0, math.Inf(1), math.NaN()} {
		if _, err := model.ScaleArch(a, bad); err == nil {
			t.Errorf("scale %v accepted", bad)
		}
	}
}

// TestTinyCancel: Ctrl-C in the middle of a CPU run (ranks possibly
// waiting inside a ring all-reduce) ends it with context.Canceled and no
// goroutine left.
func TestTinyCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := tinySchedule(t, model.Plan{TP: 4}, model.Workload{Phase: model.Decode, Batch: 8, Context: 512})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	steps := 0
	res, err := exec.Run(ctx, s, cpu.New(), exec.WithSteps(1000), exec.WithWarmup(0), exec.WithProgress(func(done, total int) {
		if steps++; steps == 2 {
			go cancel() // from outside the runner, as a signal handler would
		}
	}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res == nil || res.Steps < 2 || res.Steps >= 1000 {
		t.Errorf("completed steps %v", res)
	}
}

// TestTinySpanAttributes checks op span attributes on the real schedule
// against model.Build's numbers for tiny-mla-moe at TP 4, batch 8: the
// attention all-reduce moves 8 tokens x 256 hidden x 2 bytes = 4096 bytes.
func TestTinySpanAttributes(t *testing.T) {
	s := tinySchedule(t, model.Plan{TP: 4}, model.Workload{Phase: model.Decode, Batch: 8, Context: 512})
	tp, rec := exectest.NewRecorder()
	defer tp.Shutdown(context.Background())
	if _, err := exec.Run(context.Background(), s, cpu.New(), exec.WithTracerProvider(tp), exec.WithSteps(1), exec.WithWarmup(0)); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, sp := range rec.Ended() {
		if sp.Name() != "L01.attn.allreduce" {
			continue
		}
		found++
		for _, kv := range sp.Attributes() {
			switch kv.Key {
			case schema.AttrCommBytes:
				if kv.Value.AsInt64() != 4096 {
					t.Errorf("comm.bytes %d, want 4096", kv.Value.AsInt64())
				}
			case schema.AttrTiming:
				if kv.Value.AsString() != schema.TimingHostClock {
					t.Errorf("timing %q", kv.Value.AsString())
				}
			}
		}
	}
	if found != 4 {
		t.Errorf("%d L01.attn.allreduce spans, want one per rank (4)", found)
	}
}

// TestTinyPlans runs one step of tiny-mla-moe under every plan shape the
// builder has (TP, EP, DP attention with all-to-all, DCP with all-gather
// and reduce-scatter, prefill, MTP) with collective checks on: every op of
// every rank must run and every collective must match its serial result.
func TestTinyPlans(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    model.Plan
		w    model.Workload
	}{
		{"plan=tp2-ep", model.Plan{TP: 2, EP: true}, model.Workload{Phase: model.Decode, Batch: 4, Context: 128}},
		{"plan=tp2-dp2-ep", model.Plan{TP: 2, DP: 2, EP: true}, model.Workload{Phase: model.Decode, Batch: 8, Context: 128}},
		{"plan=tp4-dcp2", model.Plan{TP: 4, DCP: 2}, model.Workload{Phase: model.Decode, Batch: 4, Context: 128}},
		{"plan=tp2/prefill", model.Plan{TP: 2}, model.Workload{Phase: model.Prefill, Batch: 2, Context: 32}},
		{"plan=tp2/mtp1", model.Plan{TP: 2}, model.Workload{Phase: model.Decode, Batch: 4, Context: 64, SpecTokens: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tinySchedule(t, tc.p, tc.w)
			res, err := exec.Run(context.Background(), s, cpu.New(), exec.WithSteps(1), exec.WithWarmup(1))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for k := range res.OpUs[0] {
				n += len(res.OpUs[0][k])
			}
			if n != s.NumOps() {
				t.Errorf("timed %d ops, schedule has %d", n, s.NumOps())
			}
		})
	}
}

// TestMoERunsTheScheduleRouting runs tiny-mla-moe (16 routed experts,
// top-4) under TP, TP + EP and DP + EP (dispatch by all-to-all and by
// all-gather / reduce-scatter) and checks that every routed-expert GEMM
// span says it ran the rows and experts the schedule expects. By hand:
//   - tp2, batch 4: every rank sees the 4 tokens over all 16 experts:
//     rows 4 x 4 = 16, touched 16 x (1 - (12/16)^4) = 10.94 -> 11 experts.
//   - tp2-ep, batch 4: 8 experts per rank: rows 8, touched 8 x 0.684 = 5.47 -> 5.
//   - tp2-dp2-ep, batch 8: 4 sequences per DP group, 2 tokens per TP rank
//     (sequence-parallel MoE), dispatched over the 4 ranks: a pool of 8
//     tokens on 4 experts per rank: rows 8 x 4 x 4/16 = 8, touched 4 x (1 -
//     (12/16)^8) = 3.60 -> 4. (Before the shape travelled on the op, the
//     CPU backend ran only the rank's own 2 tokens: 2 rows.)
func TestMoERunsTheScheduleRouting(t *testing.T) {
	for _, tc := range []struct {
		name          string
		p             model.Plan
		batch         int
		dispatch      string
		rows, experts int64
	}{
		{"plan=tp2", model.Plan{TP: 2}, 4, "", 16, 11},
		{"plan=tp2-ep", model.Plan{TP: 2, EP: true}, 4, "", 8, 5},
		{"plan=tp2-dp2-ep/alltoall", model.Plan{TP: 2, DP: 2, EP: true}, 8, model.DispatchAllToAll, 8, 4},
		{"plan=tp2-dp2-ep/allgather", model.Plan{TP: 2, DP: 2, EP: true}, 8, model.DispatchAllGather, 8, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := model.Preset("tiny-mla-moe")
			if err != nil {
				t.Fatal(err)
			}
			s, err := model.BuildWith(a, tc.p, model.Workload{Batch: tc.batch, Context: 64}, model.BuildOptions{MoEDispatch: tc.dispatch})
			if err != nil {
				t.Fatal(err)
			}
			tp, rec := exectest.NewRecorder()
			defer tp.Shutdown(context.Background())
			if _, err := exec.Run(context.Background(), s, cpu.New(), exec.WithTracerProvider(tp), exec.WithSteps(1), exec.WithWarmup(0)); err != nil {
				t.Fatal(err)
			}
			checked := 0
			for _, sp := range rec.Ended() {
				attrs := map[string]int64{}
				kind := ""
				for _, kv := range sp.Attributes() {
					switch kv.Key {
					case schema.AttrMoERows, schema.AttrMoEExperts:
						attrs[string(kv.Key)] = kv.Value.AsInt64()
					case schema.AttrOpKind:
						kind = kv.Value.AsString()
					}
				}
				if kind != string(model.KindMoEGEMM) {
					continue
				}
				checked++
				if attrs[string(schema.AttrMoERows)] != tc.rows || attrs[string(schema.AttrMoEExperts)] != tc.experts {
					t.Fatalf("%s: ran %d rows on %d experts, want %d on %d", sp.Name(), attrs[string(schema.AttrMoERows)], attrs[string(schema.AttrMoEExperts)], tc.rows, tc.experts)
				}
			}
			// 3 MoE layers x 2 grouped GEMMs x ranks.
			if want := 3 * 2 * tc.p.World(); checked != want {
				t.Fatalf("checked %d moe_gemm spans, want %d", checked, want)
			}
		})
	}
}
