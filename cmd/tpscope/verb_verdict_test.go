package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces"
)

// testKVBackend replays CUDA graphs on a virtual device clock where only the
// KV cache costs time: an op takes 1 ms per 5,242,880 bytes of KV it reads
// (tiny-mla-moe's latent cache at batch 8, context 4096: 8 x 4096 x 80
// values x 2 bytes) and 1 ns otherwise (so every op counts as run). Gains
// measured on it follow from the schedules' KV bytes alone.
const testKVBackend = "test-kv"

const tinyKVBytes = 8 * 4096 * 80 * 2

func init() {
	exec.RegisterBackend(testKVBackend, func(exec.BackendConfig) (exec.Backend, error) {
		return exectest.New(exectest.WithName(testKVBackend), exectest.WithGraphs(),
			exectest.WithDelay(func(_ int, op *model.Op) time.Duration {
				return time.Nanosecond + time.Duration(op.KVBytes/tinyKVBytes*float64(time.Millisecond))
			})), nil
	})
}

// TestVerdictMeasuresEntries runs verdict on one rank of tiny-mla-moe at
// TP 2 on the KV-timed backend and checks each entry's status and, where
// the KV bytes decide it, the measured gain (tokens/s, derived by hand):
//
//   - fp8-kv: every attention op reads half the bytes; the step halves:
//     +100 %.
//   - dcp: each rank keeps half of the context (4096 / 2 tokens): +100 %.
//   - dp-attn-ep (TP 1 x DP 2): a DP rank serves 4 of the 8 sequences:
//     +100 % for the box.
//   - mtp: one more attention op (the MTP layer's) over the same cache: the
//     step takes 5/4, and yields 1 + 0.85 tokens per sequence: 1.85 x 4/5
//   - 1 = +48 %.
//   - expert-parallel: no KV change: 0 %.
//
// Collectives only (NCCL settings) need both ranks; one-shot all-reduce is
// not built; the box moves are not run; tiny-mla-moe has no DSA indexer and
// 2 GPUs make no two DP groups of TP 2.
func TestVerdictMeasuresEntries(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "verdict", "--backend", testKVBackend, "--model", "tiny-mla-moe", "--tp", "2", "--local-ranks", "0",
		"--batch", "8", "--context", "4096", "--kv-dtype", "bf16", "--topo", "h200-nvswitch", "--steps", "3", "--warmup", "1",
		"--output", "json", "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep verdictReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !rep.Shard || rep.Ranks != 2 || len(rep.LocalRanks) != 1 {
		t.Fatalf("ran %v of %d ranks (shard %v), want rank 0 of 2", rep.LocalRanks, rep.Ranks, rep.Shard)
	}
	// Baseline: four attention ops of 1 ms each.
	if b := rep.Baseline; math.Abs(b.MedianUs-4000) > 100 || b.Steps != 3 {
		t.Fatalf("baseline %+v: want 3 steps of about 4000 us", b)
	}
	byName := map[string]verdictEntry{}
	for _, e := range rep.Entries {
		byName[e.Entry] = e
	}
	wantGain := map[string]float64{"fp8-kv": 100, "dcp": 100, "dp-attn-ep": 100, "mtp": 48, "expert-parallel": 0}
	for name, g := range wantGain {
		t.Run(name, func(t *testing.T) {
			e, ok := byName[name]
			if !ok || e.Status != compare.VerdictMeasured || e.Verdict == nil {
				t.Fatalf("row %+v: want it measured", e)
			}
			v := e.Verdict
			if got := v.Measured.TokensPerSPct; math.Abs(got-g) > 3 {
				t.Errorf("measured tokens/s gain %+.1f %%, want %+.0f %%", got, g)
			}
			// The spread's ends and the median are computed from different
			// steps' ratios: equal steps may differ in the last bits.
			const ulpPct = 1e-9
			if !(v.MeasuredLow.TokensPerSPct <= v.Measured.TokensPerSPct+ulpPct && v.Measured.TokensPerSPct <= v.MeasuredHigh.TokensPerSPct+ulpPct) {
				t.Errorf("spread [%.2f, %.2f] does not hold the median gain %.2f", v.MeasuredLow.TokensPerSPct, v.MeasuredHigh.TokensPerSPct, v.Measured.TokensPerSPct)
			}
			// The fake backend runs every op: the prediction as run is the
			// whole box's.
			if v.Predicted != v.PredictedBox || v.With.NotRunOps != 0 {
				t.Errorf("predicted as run %+v, box %+v, %d ops not run", v.Predicted, v.PredictedBox, v.With.NotRunOps)
			}
			if v.Held != (v.PredPays == v.MeasPays) || v.MeasPays != (v.Measured.TokensPerSPct >= 5) {
				t.Errorf("pays predicted %v measured %v held %v at %+.1f %%", v.PredPays, v.MeasPays, v.Held, v.Measured.TokensPerSPct)
			}
			if len(v.Off) == 0 {
				t.Errorf("no op deltas")
			}
			if _, err := os.Stat(v.With.Trace); err != nil && !e.InBaseline {
				t.Errorf("trace of the run: %v", err)
			}
		})
	}
	for name, status := range map[string]compare.VerdictStatus{
		"cuda-graphs": compare.VerdictMeasured, "ar-norm-fusion": compare.VerdictMeasured,
		"nccl-proto-ll": compare.VerdictNeedsGPUs, "nccl-p2p-sys": compare.VerdictNeedsGPUs, "nccl-p2p-disable": compare.VerdictNeedsGPUs,
		"oneshot-ar": compare.VerdictNotBuilt, "box-rtxpro6000-switch": compare.VerdictAnotherBox, "box-h200-nvswitch": compare.VerdictAnotherBox,
		"dsa": compare.VerdictNotApplicable, "dp-attn-ep-tp2": compare.VerdictNotApplicable,
	} {
		if e := byName[name]; e.Status != status {
			t.Errorf("%s: status %q (%s), want %q", name, e.Status, e.Reason, status)
		}
	}
	if e := byName["cuda-graphs"]; !e.InBaseline || e.Verdict == nil || e.Verdict.Without.Label != "without-cuda-graphs" {
		t.Errorf("cuda-graphs: %+v: want it measured by turning it off", e)
	}
	// The report beside the traces.
	for _, f := range []string{"verdict.json", "verdict.md"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || !strings.Contains(string(b), "fp8-kv") {
			t.Errorf("%s: %v", f, err)
		}
	}
	// Every run's trace records the scenario it ran.
	res, err := traces.ReadAll(context.Background(), filepath.Join(dir, "fp8-kv.otlp.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scenarios) != 1 || !strings.Contains(res.Scenarios[0].Workload, "kv=fp8") || res.Scenarios[0].JSON == "" {
		t.Fatalf("fp8-kv trace scenarios %+v", res.Scenarios)
	}
}

// The table and markdown say the same rows; markdown escapes its pipes.
func TestVerdictTableAndMarkdown(t *testing.T) {
	args := []string{"verdict", "--backend", testKVBackend, "--model", "tiny-mla-moe", "--tp", "2", "--local-ranks", "0",
		"--batch", "8", "--context", "4096", "--kv-dtype", "bf16", "--topo", "h200-nvswitch", "--steps", "2", "--warmup", "0",
		"--entries", "fp8-kv,nccl-proto-ll"}
	code, table, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"rank [0] of 2: one rank's shard", "baseline: measured", "fp8-kv", "measured", "nccl-proto-ll", "needs several GPUs"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	code, md, errs := runCLI(t, append(args, "--output", "markdown")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasPrefix(md, "## tpscope verdict") || strings.Count(md, "\n| fp8-kv |") != 1 || strings.Count(md, "\n| nccl-proto-ll |") != 1 {
		t.Errorf("markdown:\n%s", md)
	}
}

func TestVerdictUsageErrors(t *testing.T) {
	base := []string{"verdict", "--backend", testKVBackend, "--model", "tiny-mla-moe", "--tp", "2"}
	checkUsageErrors(t, []usageCase{
		{"steps", append(base, "--steps", "0"), "--steps 0"},
		{"threshold", append(base, "--threshold", "5"), "--threshold 5"},
		{"output", append(base, "--output", "csv"), `--output "csv"`},
		{"entry", append(base, "--entries", "warp-drive"), `unknown entry "warp-drive"`},
		{"local ranks", append(base, "--local-ranks", "2"), "rank 2 is not one of the plan's 2 ranks"},
		{"mtp tokens", append(base, "--mtp-tokens", "0"), "--mtp-tokens 0"},
		{"args", append(base, "extra"), "unexpected arguments"},
	})
}

// TestVerdictSpecRowsAsAdvise: verdict measures the speculative entries
// "as advise prices them": their K is --spec-tokens, default 3, whatever
// --mtp puts in the baseline (MTP 2 drafts here). verdict had taken --mtp
// 2 as the EAGLE-3 entry's K too, running eagle3 k2 where advise prices
// k3 for the same flags.
func TestVerdictSpecRowsAsAdvise(t *testing.T) {
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	common := []string{"--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256", "--topo", box, "--mtp", "2", "--entries", "spec-eagle3"}
	code, out, errs := runCLI(t, append([]string{"advise", "--no-sweep", "--transfer", "", "--output", "json"}, common...)...)
	if code != 0 {
		t.Fatalf("advise: exit %d: %s", code, errs)
	}
	var adv struct {
		Rows []struct {
			Spec struct {
				Tokens int `json:"spec_tokens"`
			} `json:"spec"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &adv); err != nil {
		t.Fatal(err)
	}
	if len(adv.Rows) != 1 || adv.Rows[0].Spec.Tokens != 3 {
		t.Fatalf("advise rows %+v: want the spec-eagle3 row at k 3", adv.Rows)
	}
	code, out, errs = runCLI(t, append([]string{"verdict", "--backend", "cpu", "--steps", "1", "--warmup", "0", "-o", t.TempDir(), "--output", "json"}, common...)...)
	if code != 0 {
		t.Fatalf("verdict: exit %d: %s", code, errs)
	}
	var vd struct {
		Runs []struct {
			Label       string `json:"label"`
			Speculative *struct {
				Spec string `json:"spec"`
			} `json:"speculative"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &vd); err != nil {
		t.Fatal(err)
	}
	for _, r := range vd.Runs {
		if r.Label == "spec-eagle3" && (r.Speculative == nil || r.Speculative.Spec != "eagle3(tiny-mla-moe-eagle3) k3") {
			t.Errorf("verdict's spec-eagle3 run: %+v; want eagle3(tiny-mla-moe-eagle3) k3, as advise prices it", r.Speculative)
		}
	}
}

// TestVerdictRefusesEarlierVerdictDir: -o into a directory that holds an
// earlier verdict's report or traces is refused in one line naming -o and
// the file, before any run, and leaves the files as they were: the new
// traces would lie beside the old verdict's trace of an entry this one
// does not run, and compare over the directory would read both verdicts'
// runs as one.
func TestVerdictRefusesEarlierVerdictDir(t *testing.T) {
	for _, old := range []string{"fp8-kv.otlp.jsonl", "verdict.json"} {
		dir := t.TempDir()
		stale := filepath.Join(dir, old)
		if err := os.WriteFile(stale, []byte("earlier\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runCLI(t, "verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "1", "--context", "64",
			"--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"), "--steps", "1", "--warmup", "0", "--entries", "expert-parallel", "-o", dir)
		if code != 2 || out != "" || !strings.HasPrefix(errs, "tpscope verdict: usage: -o "+dir+": it holds "+old) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("-o over %s: exit %d, stdout %q, stderr %q; want exit 2 and one line naming -o and %s", old, code, out, errs, old)
		}
		ents, _ := os.ReadDir(dir)
		if got, _ := os.ReadFile(stale); string(got) != "earlier\n" || len(ents) != 1 {
			t.Errorf("-o over %s: the directory was written (%d files, %q)", old, len(ents), got)
		}
	}
}
