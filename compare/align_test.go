package compare_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// tinySpec is the small test model on 8 GPUs: 88 kernels per rank and
// step, every compute op at its kind's minimum kernel time (the catalog's
// SM120 floors, 1.03-2.74 us).
var tinySpec = spec{Model: "tiny-mla-moe", Topology: "rtxpro6000-2s", Plan: "tp8", Workload: "decode b8 ctx512"}

// kinetoKernelName is a real kernel name of each kind (vLLM on SM120,
// cuBLASLt nvjet, NCCL), as ClassifyKernel knows them.
var kinetoKernelName = map[model.OpKind]string{
	model.KindGEMM:        "nvjet_tst_64x8_64x16_4x1_v_bz_TNT",
	model.KindMoEGEMM:     "fused_moe_kernel",
	model.KindNorm:        "void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(c10::BFloat16*, c10::BFloat16 const*, long, c10::BFloat16 const*, float, int, int)",
	model.KindElementwise: "void vllm::act_and_mul_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, int)",
	model.KindRouter:      "void vllm::moe::topkGatingSoftmax<8, 16, 4, 16>(float const*, bool const*, float*, int, int*, int*, int, int, int)",
	model.KindEmbedding:   "void vllm::vocab_embedding_kernel<c10::BFloat16>(long const*, c10::BFloat16*)",
}

// TestAlignKinetoByKindOrder writes a profiler trace of rank 0 for three
// decode steps of tiny-mla-moe TP 8 in which
//
//   - every GEMM kernel takes 1.1 x its predicted time (error 1/1.1 - 1 =
//     -9.09 %), every other kernel its predicted time;
//   - attention runs as two kernels per op (Triton MLA stage 1 + stage 2,
//     half the time each), so 8 attention kernels face 4 predicted ops:
//     compared per layer, the pair's sum against the layer's op (error 0);
//   - collectives are NCCL kernels, matched to the schedule's in order;
//   - step 2 lacks its last norm kernel: that step's norms are left out and
//     reported.
func TestAlignKinetoByKindOrder(t *testing.T) {
	pr, sched, err := sim.Predict(tinySpec.scenario(t))
	if err != nil {
		t.Fatal(err)
	}
	var ev []string
	ts := 1000.0 // us
	const steps = 3
	for step := 0; step < steps; step++ {
		start := ts
		lastNorm := -1
		for i := range pr.Ops {
			if pr.Ops[i].Kind == model.KindNorm {
				lastNorm = i
			}
		}
		for i := range pr.Ops {
			op := &pr.Ops[i]
			if step == 2 && i == lastNorm {
				continue
			}
			kernel := func(name string, us float64) {
				ev = append(ev, fmt.Sprintf(`{"ph":"X","cat":"kernel","name":%q,"pid":0,"tid":7,"ts":%.3f,"dur":%.3f,"args":{"device":0,"stream":7}}`, name, ts, us))
				ts += us + 0.5
			}
			switch op.Kind {
			case model.KindGEMM:
				kernel(kinetoKernelName[op.Kind], op.Us*1.1)
			case model.KindAttention:
				kernel("_fwd_grouped_kernel_stage1", op.Us/2)
				kernel("_fwd_kernel_stage2", op.Us/2)
			case model.KindCollective:
				name := "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
				if sched.Ranks[0][i].Collective == model.AllGather {
					name = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
				}
				kernel(name, op.Us)
			default:
				kernel(kinetoKernelName[op.Kind], op.Us)
			}
		}
		ev = append(ev, fmt.Sprintf(`{"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#%d","pid":0,"tid":7,"ts":%.3f,"dur":%.3f}`, step, start-0.1, ts-start+0.2))
		ts += 100
	}
	doc := `{"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":0,"world_size":8},"traceEvents":[` + strings.Join(ev, ",\n") + "]}"
	path := filepath.Join(t.TempDir(), "rank0.pt.trace.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	// Without op IDs: this test is about alignment by kind and order.
	res, err := traces.ReadAll(context.Background(), path, traces.WithKernelPlacement(false))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := compare.Compare([]*traces.Result{res}, compare.Options{Scenarios: compare.Scenarios{Default: ptr(tinySpec.scenario(t))}})
	if err != nil {
		t.Fatal(err)
	}
	sr := &rep.Scenarios[0]
	if sr.Mode != compare.AlignByKindOrder || sr.Steps != steps {
		t.Fatalf("mode %s, %d steps; want %s, %d", sr.Mode, sr.Steps, compare.AlignByKindOrder, steps)
	}
	rows := map[string]compare.OpRow{}
	for _, r := range sr.Ops {
		rows[r.Key] = r
	}
	tests := []struct {
		key     string
		wantErr float64 // %
		wantN   int
	}{
		{"L00.attn.fused_qkv_a_proj", (1/1.1 - 1) * 100, steps},
		{"head.lm_head", (1/1.1 - 1) * 100, steps},
		{"L00:attention", 0, steps},
		{"L03:attention", 0, steps},
		{"L00.attn.allreduce", 0, steps},
		{"embed.allreduce", 0, steps},
		{"head.logits_allgather", 0, steps},
		{"L01.moe.experts_gate_up", 0, steps},
		{"L00.attn.input_norm", 0, steps - 1}, // step 2 left out
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			r, ok := rows[tc.key]
			if !ok {
				t.Fatalf("no row %s; rows: %d", tc.key, len(rows))
			}
			if math.Abs(r.ErrPct-tc.wantErr) > 0.1 || r.N != tc.wantN {
				t.Errorf("error %.3f %% over %d samples, want %.3f %% over %d", r.ErrPct, r.N, tc.wantErr, tc.wantN)
			}
		})
	}
	wantIssues := map[string]int{compare.IssueKindGrouped: 1, compare.IssueCountMismatch: 1}
	for _, is := range sr.Issues {
		if want, ok := wantIssues[is.Reason]; !ok || is.Count != want {
			t.Errorf("issue %q x %d (%v), want one of %v", is.Reason, is.Count, is.Examples, wantIssues)
		}
		delete(wantIssues, is.Reason)
	}
	if len(wantIssues) > 0 {
		t.Errorf("issues not reported: %v", wantIssues)
	}
}

// writeSpans writes steps of tiny-mla-moe's rank-0..7 op spans with the
// spec's step attributes, each op at its predicted time, plus extra spans
// per rank from extra; returns the file.
func writeSpans(t *testing.T, path string, specs []spec, extra func(tr trace.Tracer, rctx context.Context, at time.Time), rootAttrs ...attribute.KeyValue) string {
	t.Helper()
	exp, err := traces.NewFileExporter(path)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tp.Tracer(schema.ScopeName)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for step, spec := range specs {
		pr, sched, err := sim.Predict(spec.scenario(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, root := tr.Start(context.Background(), schema.SpanStep, trace.WithTimestamp(at), trace.WithAttributes(
			schema.AttrModel.String(spec.Model), schema.AttrTopology.String(spec.Topology), schema.AttrPlan.String(spec.Plan),
			schema.AttrWorkload.String(spec.Workload), schema.AttrOptions.String(spec.Options), schema.AttrStep.Int(step)))
		root.SetAttributes(rootAttrs...)
		end := at
		for r := range sched.Ranks {
			rctx, rsp := tr.Start(ctx, schema.RankSpanName(r), trace.WithTimestamp(at))
			cur := at
			for i := range sched.Ranks[r] {
				op := &sched.Ranks[r][i]
				_, sp := tr.Start(rctx, op.ID, trace.WithTimestamp(cur), trace.WithAttributes(schema.OpAttributes(op)...))
				cur = cur.Add(time.Duration(pr.Ops[i].Us * 1e3))
				sp.End(trace.WithTimestamp(cur))
			}
			if extra != nil {
				extra(tr, rctx, cur)
			}
			rsp.End(trace.WithTimestamp(cur))
			end = cur
		}
		root.End(trace.WithTimestamp(end))
		at = end.Add(time.Millisecond)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCompareBadTraces: damaged or odd traces give a report of what was
// left out and why, never a crash.
func TestCompareBadTraces(t *testing.T) {
	dir := t.TempDir()
	other := tinySpec
	other.Workload = "decode b16 ctx512"

	t.Run("spans without ID and unknown IDs", func(t *testing.T) {
		path := writeSpans(t, filepath.Join(dir, "odd.json"), []spec{tinySpec, tinySpec}, func(tr trace.Tracer, rctx context.Context, at time.Time) {
			_, a := tr.Start(rctx, "mystery_kernel", trace.WithTimestamp(at))
			a.End(trace.WithTimestamp(at.Add(time.Microsecond)))
			_, b := tr.Start(rctx, "L99.attn.o_proj", trace.WithTimestamp(at), trace.WithAttributes(schema.AttrOpID.String("L99.attn.o_proj")))
			b.End(trace.WithTimestamp(at.Add(time.Microsecond)))
		})
		rep, err := compare.Compare([]*traces.Result{readSource(t, path)}, compare.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// 2 steps x 8 ranks of each odd span.
		want := map[string]int{compare.IssueNoOpID: 16, compare.IssueUnknownOpID: 16}
		got := map[string]int{}
		for _, is := range rep.Scenarios[0].Issues {
			got[is.Reason] = is.Count
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %d, want %d (all issues %v)", k, got[k], v, rep.Scenarios[0].Issues)
			}
		}
		if rep.Scenarios[0].Matched != 2*8*88 {
			t.Errorf("matched %d, want %d", rep.Scenarios[0].Matched, 2*8*88)
		}
	})

	t.Run("truncated file", func(t *testing.T) {
		full := writeSpans(t, filepath.Join(dir, "full.json"), []spec{tinySpec, tinySpec, tinySpec}, nil)
		b, err := os.ReadFile(full)
		if err != nil {
			t.Fatal(err)
		}
		cut := filepath.Join(dir, "cut.json")
		// One span per line, all lines of one length, each step's root
		// last: 2/3 of the bytes is a line boundary inside the third step;
		// 17 bytes more cut a span in half. A cut file is an error; read
		// with WithAllowPartial, the two steps before the cut compare.
		if err := os.WriteFile(cut, b[:len(b)*2/3+17], 0o644); err != nil {
			t.Fatal(err)
		}
		var pe *traces.PartialError
		if _, err := traces.ReadAll(context.Background(), cut); !errors.As(err, &pe) {
			t.Fatalf("error %v, want a *traces.PartialError", err)
		}
		res, err := traces.ReadAll(context.Background(), cut, traces.WithAllowPartial(true))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := compare.Compare([]*traces.Result{res}, compare.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Sources[0].SkippedTotal == 0 || len(rep.Sources[0].Skipped) == 0 {
			t.Errorf("truncation not reported: %+v", rep.Sources[0])
		}
		if len(rep.Scenarios) != 1 || rep.Scenarios[0].Steps != 2 {
			t.Fatalf("want the 2 complete steps compared, got %+v", rep.Scenarios)
		}
	})

	t.Run("mixed scenarios", func(t *testing.T) {
		path := writeSpans(t, filepath.Join(dir, "mixed.json"), []spec{tinySpec, other, tinySpec}, nil)
		res := readSource(t, path)
		rep, err := compare.Compare([]*traces.Result{res}, compare.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Scenarios) != 2 || rep.Scenarios[0].Steps != 2 || rep.Scenarios[1].Steps != 1 {
			t.Fatalf("want 2 scenarios of 2 and 1 steps, got %d", len(rep.Scenarios))
		}
		// Scenarios of one box are calibrated together, but each needs an
		// even step to fit and an odd one to hold out; here the first
		// scenario has steps 0 and 2, the second step 1: the error names
		// the first.
		_, err = compare.Calibrate([]*traces.Result{res}, compare.CalibrateOptions{})
		if err == nil || !strings.Contains(err.Error(), tinySpec.Workload) || !strings.Contains(err.Error(), "even and one odd step") {
			t.Errorf("calibrate on mixed scenarios: error %v, want one naming the scenario without an odd step (%s)", err, tinySpec.Workload)
		}
	})

	t.Run("shrunk schedule", func(t *testing.T) {
		path := writeSpans(t, filepath.Join(dir, "scaled.json"), []spec{tinySpec}, nil, attribute.Float64("tpscope.schedule.scale", 4))
		rep, err := compare.Compare([]*traces.Result{readSource(t, path)}, compare.Options{})
		if err == nil || !strings.Contains(err.Error(), "shrunk") {
			t.Fatalf("error %v, want one saying the schedule was shrunk", err)
		}
		// No "compare: " of its own: the verb's prefix ("tpscope
		// compare: ") is the only one the line gets.
		if !strings.HasPrefix(err.Error(), "no scenario of the traces could be compared: ") {
			t.Errorf("error %q, want it to start \"no scenario of the traces could be compared: \"", err)
		}
		if len(rep.Issues) != 1 || rep.Issues[0].Count != 1+8+8*88 {
			t.Errorf("issues %+v, want the trace's %d spans left out", rep.Issues, 1+8+8*88)
		}
	})

	t.Run("scenario that cannot be resolved", func(t *testing.T) {
		bad := tinySpec
		bad.Model = "no-such-model"
		path := writeSpans(t, filepath.Join(dir, "badmodel.json"), []spec{tinySpec}, nil)
		res := readSource(t, path)
		_, err := compare.Compare([]*traces.Result{res}, compare.Options{Scenarios: compare.Scenarios{Override: func(sc *sim.Scenario) (err error) { sc.Arch, err = model.Resolve(bad.Model); return err }}})
		if err == nil || !strings.Contains(err.Error(), "no-such-model") {
			t.Errorf("error %v, want one naming the model", err)
		}
	})
}
