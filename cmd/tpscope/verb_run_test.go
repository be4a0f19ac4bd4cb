package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
)

// TestRunCPUFileTrace runs the CPU backend end to end through the CLI and
// reads the trace file back: every op of every rank of every measured step
// has one span (count = ops x ranks x steps, here 88 x 4 x 2 = 704 for
// tiny-mla-moe at TP 4 per model.Build), each named by an op ID of the
// schedule, and the root spans carry the scenario.
func TestRunCPUFileTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.otlp.jsonl")
	var out, errOut bytes.Buffer
	code := dispatch([]string{"run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--batch", "8", "--context", "512",
		"--steps", "2", "--warmup", "1", "--trace", "file:" + path}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "step time  median") || !strings.Contains(out.String(), "spans exported to file:") {
		t.Errorf("summary:\n%s", out.String())
	}
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	s, err := model.Build(a, model.Plan{TP: 4}, model.Workload{Phase: model.Decode, Batch: 8, Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, op := range s.Ranks[0] {
		ids[op.ID] = true
	}
	res, err := traces.ReadAll(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ops, roots := 0, 0
	perRankStep := map[[2]int]int{}
	for _, sp := range res.Spans {
		switch {
		case sp.IsRoot():
			roots++
		case sp.OpID != "":
			if !ids[sp.OpID] {
				t.Errorf("span %q is not an op of the schedule", sp.OpID)
			}
			ops++
			perRankStep[[2]int{sp.Rank, sp.Step}]++
		}
	}
	if want := s.NumOps() * 2; ops != want || roots != 2 {
		t.Errorf("%d op spans (want %d = %d ops x 2 steps), %d roots (want 2)", ops, want, s.NumOps(), roots)
	}
	for rank := range 4 {
		for step := range 2 {
			if n := perRankStep[[2]int{rank, step}]; n != len(s.Ranks[rank]) {
				t.Errorf("rank %d step %d: %d op spans, want %d", rank, step, n, len(s.Ranks[rank]))
			}
		}
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"compare-without-topo", []string{"--compare"}, "--compare needs --topo"},
		{"scale-below-1", []string{"--scale", "0.5"}, "--scale 0.5: want a finite factor >= 1"},
		{"steps-0", []string{"--steps", "0"}, "--steps 0 --warmup 2"},
		{"unknown-backend", []string{"--backend", "tpu"}, `usage: --backend "tpu": want one of cpu, cuda`},
		{"local-ranks-repeated", []string{"--backend", "cpu", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"), "--local-ranks", "0,0"},
			"usage: --local-ranks [0 0]: rank 0 after rank 0: want the ranks in ascending order, each once"},
		{"local-ranks-descending", []string{"--backend", "cpu", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"), "--local-ranks", "1,0"},
			"usage: --local-ranks [1 0]: rank 0 after rank 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"run", "--model", "tiny-mla-moe", "--tp", "2", "--trace", "none"}, tc.args...)
			if code := dispatch(args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want a usage error (2) containing %q", code, errOut.String(), tc.want)
			}
			if strings.Count(strings.TrimSpace(errOut.String()), "\n") > 0 {
				t.Errorf("error is not one line: %q", errOut.String())
			}
		})
	}
}

// TestExecutorVerbsEngine: run and verdict execute tpscope's own kernels,
// so their engine is the executor. Another --engine, or an option only a
// serving engine has (the executor's profile has no custom all-reduce, its
// one attention backend is executor_mla and its one MoE kernel cublas), is
// refused in one line before any work, saying why; --engine's help gives
// the executor as the default.
func TestExecutorVerbsEngine(t *testing.T) {
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	run := []string{"run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--topo", box, "--trace", "none"}
	verdict := []string{"verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--topo", box}
	const why = "run and verdict execute tpscope's executor kernels, not a serving engine's"
	var cases []usageCase
	for _, verb := range [][]string{run, verdict} {
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"engine-sglang", []string{"--engine", "sglang"}, "--engine sglang: " + why},
			{"engine-vllm-with-backend", []string{"--engine", "vllm", "--attention-backend", "TRITON_MLA"}, "--engine vllm: " + why},
			{"attention-backend", []string{"--attention-backend", "TRITON_MLA"}, `--attention-backend triton_mla: executor@1 has no attention backend "triton_mla"`},
			{"moe-kernel", []string{"--moe-kernel", "triton"}, `--moe-kernel triton: executor@1 has no MoE kernel "triton"`},
			{"custom-ar-oneshot", []string{"--custom-ar", "oneshot", "--compare"}, "--custom-ar oneshot: executor@1 has no custom all-reduce kernel"},
			// An engine's KV pool fraction sizes nothing the executor runs.
			{"gpu-mem-util", []string{"--gpu-mem-util", "0.5"}, "--gpu-mem-util 0.5: run and verdict allocate the measured step's KV cache, not a serving engine's KV pool"},
		} {
			args := append(append([]string{}, verb...), c.args...)
			if verb[0] == "verdict" && c.name == "custom-ar-oneshot" {
				args = args[:len(args)-1] // verdict compares without --compare
			}
			cases = append(cases, usageCase{verb[0] + "/" + c.name, args, c.want})
		}
	}
	checkUsageErrors(t, cases)
	for _, c := range cases {
		if c.name == "run/attention-backend" || c.name == "verdict/custom-ar-oneshot" {
			_, _, stderr := runCLI(t, c.args...)
			if !strings.Contains(stderr, why) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("%s: %q; want one line saying %q", c.name, stderr, why)
			}
		}
	}
	for _, verb := range []string{"run", "verdict"} {
		code, stdout, stderr := runCLI(t, verb, "--help")
		help := stdout + stderr
		i := strings.Index(help, "--engine ")
		if code != 0 || i < 0 {
			t.Fatalf("%s --help: exit %d, no --engine in %q", verb, code, help)
		}
		line, _, _ := strings.Cut(help[i:], "\n")
		if !strings.Contains(line, "(default: executor)") || strings.Contains(line, "vllm") {
			t.Errorf("%s --help: %q; want the executor as --engine's default, no serving engine", verb, line)
		}
	}
}

// memoryBackend is a backend whose runs need needAtScale1 / s^2 bytes for
// a model scaled by s (its name's @scale= factors: weights shrink with the
// square of the widths), with 1 GB free; it never runs.
type memoryBackend struct{ needAtScale1 float64 }

func (memoryBackend) Name() string { return "mem" }

func (memoryBackend) Open(context.Context, *model.Schedule, exec.SessionConfig) (exec.Session, error) {
	return nil, errors.New("memoryBackend does not run")
}

func (b memoryBackend) EstimateMemory(s *model.Schedule, _ []int) (exec.MemoryEstimate, error) {
	scale := 1.0
	parts := strings.Split(s.Model, "@scale=")
	for _, p := range parts[1:] {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return exec.MemoryEstimate{}, err
		}
		scale *= f
	}
	return exec.MemoryEstimate{NeedBytes: int64(b.needAtScale1 / (scale * scale)), FreeBytes: 1e9, Where: "RAM"}, nil
}

// TestRunMemoryAdvice: a run that does not fit is refused with the ways
// out that apply. With 1 GB free and 64 GB needed unscaled, a scale fits
// within 80 % of the free memory from s^2 >= 80, the power of two 16
// (64/256 = 0.25 GB); a model already scaled by 2 needs the same total
// --scale 16. A model that fits at no scale of 2..1024 (1e15 B) gets no
// --scale. The smaller model is suggested only when another runs: on
// tiny-mla-moe the step is what is left to shrink.
func TestRunMemoryAdvice(t *testing.T) {
	for _, c := range []struct {
		name    string
		model   string
		scale   float64
		need    float64
		want    []string
		wantNot []string
	}{
		{"big model", "deepseek-v3", 1, 64e9,
			[]string{"run --scale 16 (about 250.00 MB), one rank's shard (--local-ranks 0), or a smaller model (--model tiny-mla-moe)"}, nil},
		{"big model scaled by 2", "deepseek-v3", 2, 64e9,
			[]string{"run --scale 16 (about 250.00 MB),"}, []string{"--scale 8 "}},
		{"tiny model", "tiny-mla-moe", 1, 1e15,
			[]string{"run one rank's shard (--local-ranks 0) or a smaller step (--batch or --context)"}, []string{"--model tiny-mla-moe", "--scale"}},
		{"tiny model scaled", "tiny-mla-moe", 4, 1e15,
			[]string{"or a smaller step (--batch or --context)"}, []string{"--model tiny-mla-moe"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := model.Preset(c.model)
			if err != nil {
				t.Fatal(err)
			}
			sc := sim.Scenario{Arch: a, Plan: model.Plan{TP: 4}, Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 64}}
			if c.scale != 1 {
				if err := scaleScenario(&sc, c.scale); err != nil {
					t.Fatal(err)
				}
			}
			sched, err := sim.BuildSchedule(sc)
			if err != nil {
				t.Fatal(err)
			}
			err = checkRunMemory(memoryBackend{c.need}, sc, sched, nil)
			if err == nil {
				t.Fatal("no error; want the run refused")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant %q", err, w)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant no %q", err, w)
				}
			}
		})
	}
}

// TestRunShardCompareLeavesOutSkipped: a one-rank shard on the CPU backend
// skips the collectives (their peers run nowhere) and marks them skipped
// on the spans. run --compare counts them as not run and leaves their
// predicted time out of the predicted step, as compare does with the
// run's trace: the two predicted steps agree (to 0.1 %). The host clock
// had timed each skip at about 0.06 us, so run --compare priced the
// collectives that never ran (collective +6785.5 %, the step 47.7 us
// above compare's).
func TestRunShardCompareLeavesOutSkipped(t *testing.T) {
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	trace := filepath.Join(t.TempDir(), "shard.otlp.jsonl")
	code, out, stderr := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--local-ranks", "0", "--batch", "1", "--context", "64",
		"--steps", "2", "--warmup", "1", "--topo", box, "--trace", "file:"+trace, "--compare", "--output", "json")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	var run struct {
		Comparison struct {
			PredictedStepUs float64 `json:"predicted_step_us"`
			ByKind          []struct {
				Kind       string  `json:"kind"`
				MeasuredUs float64 `json:"measured_us"`
				NotRun     int     `json:"not_run"`
			} `json:"by_kind"`
		} `json:"comparison"`
	}
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatal(err)
	}
	collectives := 0
	for _, k := range run.Comparison.ByKind {
		if k.Kind == "collective" {
			collectives = k.NotRun
			if k.MeasuredUs != 0 {
				t.Errorf("collective measured %.3f us per step: want 0 (every one skipped)", k.MeasuredUs)
			}
		}
	}
	if collectives == 0 {
		t.Errorf("collectives not run: %d, want every collective of the shard", collectives)
	}
	code, out, stderr = runCLI(t, "compare", "--trace", trace, "--output", "json")
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	var rep struct {
		Scenarios []struct {
			Step struct {
				PredictedUs float64 `json:"predicted_us"`
			} `json:"step"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
		t.Fatalf("%v, %d scenarios", err, len(rep.Scenarios))
	}
	if got, want := run.Comparison.PredictedStepUs, rep.Scenarios[0].Step.PredictedUs; math.Abs(got-want) > 1e-3*want {
		t.Errorf("run --compare predicted step %.1f us, compare of its trace %.1f us: want one step", got, want)
	}
}

// TestExecutorEngineRefusesGPUMemUtil: the executor allocates the step's
// own KV cache and sizes no serving engine's pool, so run and verdict
// refuse --gpu-mem-util (TestExecutorVerbsEngine); predict, advise and
// plan pricing the executor's step (--engine executor) must refuse it
// too, in one line naming the flag, instead of shrinking the memory
// they fit the step in by a fraction the executor never applies (the
// H200 step then "does not fit" at 0.5 where run runs it).
func TestExecutorEngineRefusesGPUMemUtil(t *testing.T) {
	scen := []string{"--model", "kimi-k2.5", "--topo", "h200-nvswitch", "--engine", "executor", "--gpu-mem-util", "0.5"}
	const want = "--gpu-mem-util 0.5: executor@1 allocates the step's own KV cache"
	var cases []usageCase
	for _, verb := range [][]string{{"predict"}, {"advise", "--no-sweep"}, {"plan", "--tp", "8", "--batch", "1", "--context", "4K"}} {
		cases = append(cases, usageCase{verb[0], append(append([]string{}, verb...), scen...), want})
	}
	checkUsageErrors(t, cases)
	for _, c := range cases {
		_, _, stderr := runCLI(t, c.args...)
		if n := strings.Count(strings.TrimSpace(stderr), "\n"); n > 0 {
			t.Errorf("%s: %q; want one line", c.name, stderr)
		}
	}
}

// TestRunSpecYieldInEveryFormat: a speculative run measures its step (the
// verify and draft passes) and yields tokens at the acceptance given as an
// input. The JSON holds the yield the table's speculative line prints: at
// --spec-accept 0.5 a 3-token chain yields 1 + 0.5 + 0.25 + 0.125 = 1.875
// tokens per step per sequence, so 2 sequences make 2 x 1.875 / the
// measured median step; and the table's throughput line, of the 2 x 4
// tokens a step verifies, says that they are verified, not yielded.
func TestRunSpecYieldInEveryFormat(t *testing.T) {
	args := []string{"run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--batch", "2", "--spec", "eagle3", "--spec-accept", "0.5",
		"--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"), "--steps", "2", "--warmup", "0", "--trace", "none"}
	code, out, errs := runCLI(t, append(args, "--output", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Result struct {
			Summary exec.Summary `json:"summary"`
		} `json:"result"`
		Speculative *struct {
			Acceptance struct {
				TokensPerStep float64 `json:"tokens_per_step"`
			} `json:"acceptance"`
			TokensPerSPerRequest float64 `json:"tokens_per_s_per_request"`
			TokensPerS           float64 `json:"tokens_per_s"`
		} `json:"speculative"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	sm := got.Result.Summary
	if got.Speculative == nil || !(sm.StepMedianUs > 0) {
		t.Fatalf("no speculative yield in the JSON (step median %v us):\n%s", sm.StepMedianUs, out)
	}
	const yield = 1.875
	perReq := yield / (sm.StepMedianUs / 1e6)
	if y := got.Speculative; math.Abs(y.Acceptance.TokensPerStep-yield) > 1e-9 || math.Abs(y.TokensPerSPerRequest-perReq) > 1e-6*perReq ||
		math.Abs(y.TokensPerS-2*perReq) > 1e-6*perReq {
		t.Errorf("speculative %+v; want %.3f tokens per step, %.3f tokens/s per request, %.3f in all", *y, yield, perReq, 2*perReq)
	}
	if sm.TokensPerStep != 8 {
		t.Errorf("summary tokens per step %v, want 8 (2 sequences x 4 verified)", sm.TokensPerStep)
	}
	code, out, errs = runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, " tokens/s verified (8 tokens per step: 1 + 3 drafted per sequence; the tokens yielded are on the speculative line)\n") ||
		!strings.Contains(out, "1.88 tokens per step per sequence from --spec-accept 0.5") {
		t.Errorf("table:\n%s", out)
	}
}

// TestVerdictLocalRanksBeforeWork: verdict refuses a --local-ranks out of
// order in one line naming the flag (exit 2) before any work: no baseline
// run started, no output directory made.
func TestVerdictLocalRanksBeforeWork(t *testing.T) {
	out := filepath.Join(t.TempDir(), "vd")
	code, stdout, stderr := runCLI(t, "verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"),
		"--steps", "1", "--local-ranks", "1,0", "-o", out)
	if code != 2 || stdout != "" || stderr != "tpscope verdict: usage: --local-ranks [1 0]: rank 0 after rank 1: want the ranks in ascending order, each once\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("-o %s made: %v", out, err)
	}
}

// TestRunAndCompareOneStepTime: run's step time and compare's of the trace
// it wrote are one measurement: from the earliest op start on any rank to
// the latest op end, the calls a one-rank shard skipped included (run
// times them in its step). The median, p10 and p90 agree to the
// nanosecond, for all four ranks and for rank 0's shard, whose last op
// (the logits' all-gather) is a skipped call after every measured one.
func TestRunAndCompareOneStepTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{{"4-ranks", nil}, {"shard", []string{"--local-ranks", "0"}}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := filepath.Join(t.TempDir(), "run.otlp.jsonl")
			code, out, errs := runCLI(t, append([]string{"run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"),
				"--steps", "3", "--warmup", "0", "--trace", "file:" + tr, "--output", "json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("run: exit %d: %s", code, errs)
			}
			var run struct {
				Result struct {
					Summary exec.Summary `json:"summary"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(out), &run); err != nil {
				t.Fatal(err)
			}
			code, out, errs = runCLI(t, "compare", "--trace", tr, "--output", "json")
			if code != 0 {
				t.Fatalf("compare: exit %d: %s", code, errs)
			}
			var cmp struct {
				Scenarios []struct {
					Step struct {
						MedianUs float64 `json:"median_us"`
						P10Us    float64 `json:"p10_us"`
						P90Us    float64 `json:"p90_us"`
						N        int     `json:"n"`
					} `json:"step"`
				} `json:"scenarios"`
			}
			if err := json.Unmarshal([]byte(out), &cmp); err != nil {
				t.Fatal(err)
			}
			if len(cmp.Scenarios) != 1 {
				t.Fatalf("%d scenarios", len(cmp.Scenarios))
			}
			sm, st := run.Result.Summary, cmp.Scenarios[0].Step
			const nsUs = 1e-3
			if st.N != 3 || math.Abs(st.MedianUs-sm.StepMedianUs) > nsUs || math.Abs(st.P10Us-sm.StepP10Us) > nsUs || math.Abs(st.P90Us-sm.StepP90Us) > nsUs {
				t.Errorf("compare's step %+v; run's median %v, p10 %v, p90 %v us", st, sm.StepMedianUs, sm.StepP10Us, sm.StepP90Us)
			}
		})
	}
}

// TestRunTraceNotOverItsInputs: run's --trace file: may not be a file the
// scenario is read from, by its path or another name for it: the trace
// would replace the calibrated box (--topo) or the model's config
// (--model, a directory's config.json). Each is refused in one line naming
// both flags, before the run, and the file is left as it was.
func TestRunTraceNotOverItsInputs(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(cpuRanksDir, "cpu-4r.json"))
	if err != nil {
		t.Fatal(err)
	}
	box := filepath.Join(dir, "cpu.json")
	if err := os.WriteFile(box, src, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgSrc, err := os.ReadFile("../../traces/testdata/real/kimi-stack/config.json")
	if err != nil {
		t.Fatal(err)
	}
	mdir := filepath.Join(dir, "model")
	if err := os.Mkdir(mdir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(mdir, "config.json")
	if err := os.WriteFile(cfg, cfgSrc, 0o644); err != nil {
		t.Fatal(err)
	}
	run := []string{"run", "--backend", "cpu", "--tp", "4", "--topo", box, "--steps", "1", "--warmup", "0"}
	for _, tc := range []struct {
		name  string
		args  []string
		trace string
		want  string
	}{
		{"topo", []string{"--model", "tiny-mla-moe"}, box, "the file --topo reads (" + box + ")"},
		{"topo by another name", []string{"--model", "tiny-mla-moe"}, filepath.Join(dir, ".", "sub", "..", "cpu.json"), "the file --topo reads (" + box + ")"},
		{"model dir", []string{"--model", mdir, "--scale", "64"}, cfg, "the file --model reads (" + cfg + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "topo by another name" {
				if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := runCLI(t, append(append(run, tc.args...), "--trace", "file:"+tc.trace)...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "usage: --trace "+tc.trace+": "+tc.want+": writing it would replace that input") {
				t.Errorf("exit %d (want 2), stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
	for p, want := range map[string][]byte{box: src, cfg: cfgSrc} {
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s changed (%v)", p, err)
		}
	}
}

// TestRunInterruptedSaysWhatFinished: Ctrl-C before the first measured
// step finished leaves no summary, and the error says so instead of
// pointing to one above it; after some, it points to theirs. Both are
// the interruption (exit 130).
func TestRunInterruptedSaysWhatFinished(t *testing.T) {
	stats := traces.ExportStats{Dest: "file:t.jsonl"}
	none := interruptedError(0, 400, stats)
	if !errors.Is(none, errInterrupted) || strings.Contains(none.Error(), "summary above") ||
		none.Error() != "interrupted before the first of 400 measured steps finished: nothing measured to summarize (0 spans exported to file:t.jsonl)" {
		t.Errorf("0 of 400: %q", none)
	}
	stats.Exported = 714
	some := interruptedError(2, 400, stats)
	if !errors.Is(some, errInterrupted) || some.Error() != "interrupted after 2 of 400 measured steps (summary above, spans of finished steps exported: 714 spans exported to file:t.jsonl)" {
		t.Errorf("2 of 400: %q", some)
	}
}

// TestSpecRunJSONSaysAcceptanceIsInput: the executor's weights are random,
// so a speculative run measures its step and takes the tokens the step
// yields from the acceptance, an input. The text says so; the JSON had
// said nothing of it: run's "speculative" gave a yield and tokens/s
// beside the measured step with no word that they were not measured, and
// verdict's runs a tokens_per_step (and its entries a "measured"
// tokens/s gain) with neither the acceptance nor where it came from. Now
// run's JSON carries the sentence its table prints, and each speculative
// run of verdict the acceptance it was priced at, its source and the same
// word, which verdict's table names too.
func TestSpecRunJSONSaysAcceptanceIsInput(t *testing.T) {
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	const measured = "the step is measured (verify pass and draft passes); the tokens it yields are not: the weights are random, so the acceptance is an input"
	args := []string{"run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256", "--spec", "eagle3", "--spec-accept", "0.5",
		"--topo", box, "--steps", "1", "--warmup", "0", "--trace", "none"}
	code, out, errs := runCLI(t, append(args, "--output", "json")...)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	var run struct {
		Speculative *struct {
			Measured string `json:"measured"`
		} `json:"speculative"`
	}
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatal(err)
	}
	if run.Speculative == nil || run.Speculative.Measured != measured {
		t.Errorf("run JSON speculative %+v: want measured %q", run.Speculative, measured)
	}
	if code, out, errs = runCLI(t, args...); code != 0 || !strings.Contains(out, "speculative eagle3(tiny-mla-moe-eagle3) k3: "+measured+", 1.88 tokens per step per sequence from --spec-accept 0.5") {
		t.Errorf("run table (exit %d, %s): want the same sentence:\n%s", code, errs, out)
	}
	vargs := []string{"verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256", "--topo", box,
		"--steps", "1", "--warmup", "0", "--entries", "spec-eagle3", "--spec-accept", "0.5", "-o", t.TempDir()}
	code, out, errs = runCLI(t, append(vargs, "--output", "json")...)
	if code != 0 {
		t.Fatalf("verdict: exit %d: %s", code, errs)
	}
	var vd struct {
		Runs []struct {
			Label       string `json:"label"`
			Speculative *struct {
				Acceptance struct {
					TokensPerStep float64 `json:"tokens_per_step"`
					Source        string  `json:"source"`
				} `json:"acceptance"`
				Measured string `json:"measured"`
			} `json:"speculative"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &vd); err != nil {
		t.Fatal(err)
	}
	if len(vd.Runs) != 2 || vd.Runs[0].Speculative != nil {
		t.Fatalf("verdict runs %+v: want the baseline without speculation and one speculative run", vd.Runs)
	}
	if s := vd.Runs[1].Speculative; s == nil || math.Abs(s.Acceptance.TokensPerStep-1.875) > 1e-9 || s.Acceptance.Source != "--spec-accept 0.5" || s.Measured != measured {
		t.Errorf("verdict's %s run: speculative %+v; want 1.875 tokens per step from --spec-accept 0.5, measured %q", vd.Runs[1].Label, s, measured)
	}
	// A directory of its own: the first verdict's traces are in the other.
	vargs[len(vargs)-1] = t.TempDir()
	code, out, errs = runCLI(t, vargs...)
	if code != 0 || !strings.Contains(out, "spec-eagle3 at 1.88 tokens per step per sequence from --spec-accept 0.5") {
		t.Errorf("verdict table (exit %d, %s): want the acceptance spec-eagle3 was priced at:\n%s", code, errs, out)
	}
}

// TestRunHostMethodMeasuresVerifyOnly: a run of --spec ngram executes the
// verify pass over placeholder drafts: the executor runs no n-gram
// proposer, so its step holds no host drafting and no draft pass. The
// prediction it is compared with had added vLLM's host drafting (20 us +
// the KMP scan) to the step, and the run said it measured "verify pass
// and draft passes". Now the prediction as run has no host drafting
// (predict under the executor says none) and the run says what it ran.
func TestRunHostMethodMeasuresVerifyOnly(t *testing.T) {
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	sc := []string{"--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256", "--spec", "ngram", "--topo", box}
	code, out, errs := runCLI(t, append([]string{"predict", "--engine", "executor", "--output", "json"}, sc...)...)
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errs)
	}
	var pr struct {
		SpecHostUs float64 `json:"spec_host_us"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	if pr.SpecHostUs != 0 {
		t.Errorf("predict --engine executor --spec ngram: %v us of host drafting, want none", pr.SpecHostUs)
	}
	code, out, errs = runCLI(t, append([]string{"run", "--backend", "cpu", "--steps", "1", "--warmup", "0", "--trace", "none"}, sc...)...)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "speculative ngram k3: the step is measured (its verify pass, over placeholder drafts: no n-gram or suffix proposer runs on the host); the tokens it yields are not") {
		t.Errorf("run's speculative line does not say it ran the verify pass alone:\n%s", out)
	}
	// verdict's line over its speculative entries says the same.
	code, out, errs = runCLI(t, "verdict", "--backend", "cpu", "--steps", "1", "--warmup", "0", "--entries", "spec-ngram", "-o", t.TempDir(),
		"--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256", "--topo", box)
	if code != 0 {
		t.Fatalf("verdict: exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "speculative entries: each step is measured (its verify pass, and the draft passes of a method that drafts on the device; no n-gram or suffix proposer runs on the host)") {
		t.Errorf("verdict's line says the n-gram entry's draft passes were measured:\n%s", out)
	}
}

// TestCPUBoxRanksAtOnceCaveat: a CPU box's rates are those of its ranks
// measured at once, sharing the cores (calibrate --backend cpu --ranks 4
// writes cpu_ranks_at_once 4). A run of another count of ranks at once
// (a TP-2 plan, a one-rank shard) has ranks of another speed: run
// --compare and verdict say so beside their prediction, and a run of the
// box's own count says nothing.
func TestCPUBoxRanksAtOnceCaveat(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(cpuRanksDir, "cpu-4r.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	host := doc["host"].(map[string]any)
	host["cpu_ranks_at_once"], host["cpu_cores"] = 4, 2
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	box := filepath.Join(t.TempDir(), "cpu-4r.json")
	if err := os.WriteFile(box, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		base := []string{"--backend", "cpu", "--model", "tiny-mla-moe", "--batch", "1", "--context", "64", "--steps", "1", "--warmup", "0", "--topo", box}
		code, out, stderr := runCLI(t, append(append(args[:1:1], base...), args[1:]...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		return out
	}
	const measured = "its rates were measured with 4 goroutine ranks at once on 2 cores"
	for _, tc := range []struct {
		args []string
		ran  int // ranks at once; 4 = the box's
	}{
		{[]string{"run", "--tp", "2", "--trace", "none", "--compare"}, 2},
		{[]string{"run", "--tp", "4", "--local-ranks", "0", "--trace", "none", "--compare"}, 1},
		{[]string{"run", "--tp", "4", "--trace", "none", "--compare"}, 4},
		{[]string{"verdict", "--tp", "2", "--entries", "fp8-kv"}, 2},
		{[]string{"verdict", "--tp", "4", "--entries", "fp8-kv"}, 4},
	} {
		out := run(tc.args...)
		want := fmt.Sprintf("%s, and this run ran %d at once", measured, tc.ran)
		if tc.ran == 4 {
			if strings.Contains(out, measured) {
				t.Errorf("%v: a run of the box's 4 ranks says it ran another count:\n%s", tc.args, out)
			}
		} else if !strings.Contains(out, want) {
			t.Errorf("%v: want %q in:\n%s", tc.args, want, out)
		}
	}
}

// TestRunKeepsAnExistingTrace: run --trace file:PATH over an existing
// file is refused before any work, in one line naming the file and a
// free path beside it, and the file is left as it was, where it was
// truncated without a word (a measured trace lost).
func TestRunKeepsAnExistingTrace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.otlp.jsonl")
	if err := os.WriteFile(path, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// tiny-2 taken too: the suggestion is the first free name.
	if err := os.WriteFile(filepath.Join(dir, "tiny-2.otlp.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	oneLineUsage(t, []string{"run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--steps", "1", "--warmup", "0", "--trace", "file:" + path},
		"--trace", "file:"+path+": the file exists", "e.g. file:"+filepath.Join(dir, "tiny-3.otlp.jsonl"))
	if b, err := os.ReadFile(path); err != nil || string(b) != "kept\n" {
		t.Errorf("%s now holds %q (%v), want it kept", path, b, err)
	}
}
