package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
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
