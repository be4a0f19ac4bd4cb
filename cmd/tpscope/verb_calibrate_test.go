package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/calibrate"
	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

func TestCalibrateNCCLTests(t *testing.T) {
	out := filepath.Join(t.TempDir(), "box.json")
	code, stdout, errs := runCLI(t, "calibrate", "--nccl-tests", "../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt", "--topo", "rtxpro6000-2s", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "Simple") || !strings.Contains(stdout, "wrote "+out) {
		t.Errorf("report:\n%s", stdout)
	}
	tp, err := topology.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if tp.Calibration == nil || len(tp.Calibration.Collectives) == 0 || !strings.Contains(tp.Calibration.Source, "all_reduce_perf_8x_pcie.txt") {
		t.Errorf("calibration section: %+v", tp.Calibration)
	}
	if code, stdout, _ = runCLI(t, "collective", "--topo", out, "--sizes", "64K", "--output", "json"); code != 0 || !strings.Contains(stdout, `"calibrated": true`) {
		t.Errorf("calibrated topology not used by collective: exit %d\n%s", code, stdout)
	}
}

// TestCalibrateNCCLTestsMustFitTheLog: a log is fitted only as what it
// measured: on a box of the GPU its rank lines name (the H200 log on the
// default RTX PRO 6000 box, or on one named by --topo, is refused naming
// the file, both GPUs and --topo), as the collective its text or name says
// (--op naming another is refused naming both), and on a box with as many
// GPUs as its ranks (--gpus 2 under an 8-rank log: exit 2, one prefix).
// The times of tpscope's CPU ranks are no GPU box's: such a log on the
// default box or a GPU box named by --topo is refused, and a GPU's log on
// the CPU box. A GPU the catalog does not know must be the box's own
// device (a rank line naming NVIDIA L20 on the RTX PRO 6000 box is
// refused naming both). Each refusal is one line, exit 2, nothing
// written. The CPU-rank log is fitted on its CPU box, and --op naming the
// log's own collective is taken.
func TestCalibrateNCCLTestsMustFitTheLog(t *testing.T) {
	const h200Log = "../../calibrate/testdata/nccltests/all_reduce_perf_8x_h200_I1.txt"
	agLog := filepath.Join(cpuRanksDir, "cpu4-all_gather_perf.txt")
	cpuBox := filepath.Join(cpuRanksDir, "cpu-4r.json")
	dir := t.TempDir()
	out := filepath.Join(dir, "box.json")
	// The hand-made RTX PRO 6000 log with its rank lines naming a GPU the
	// catalog has no entry for.
	pcie, err := os.ReadFile("../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt")
	if err != nil {
		t.Fatal(err)
	}
	l20Log := filepath.Join(dir, "all_reduce_perf_l20.txt")
	if err := os.WriteFile(l20Log, []byte(strings.ReplaceAll(string(pcie), "NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA L20")), 0o644); err != nil {
		t.Fatal(err)
	}
	// The same log of one rank (nccl-tests -g 1): nothing crosses a link.
	var one []string
	for _, l := range strings.SplitAfter(string(pcie), "\n") {
		if strings.HasPrefix(l, "#  Rank") && !strings.HasPrefix(l, "#  Rank  0 ") {
			continue
		}
		one = append(one, strings.Replace(l, "nGpus 8", "nGpus 1", 1))
	}
	oneLog := filepath.Join(dir, "all_reduce_perf_1.txt")
	if err := os.WriteFile(oneLog, []byte(strings.Join(one, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	rtx, err := topology.Preset("rtxpro6000-2s")
	if err != nil {
		t.Fatal(err)
	}
	if _, known := rtx.RunsOn("NVIDIA L20"); known {
		t.Fatal("the catalog knows NVIDIA L20: pick a GPU it does not know")
	}
	const cpuRanks = " was measured on tpscope's CPU ranks (goroutines in host memory: not GPU figures)"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"default box", []string{"--nccl-tests", h200Log},
			"usage: " + h200Log + " ran on NVIDIA H200; the default box rtxpro6000-2s has NVIDIA RTX PRO 6000 Blackwell Server Edition: pass --topo with the box the log ran on"},
		{"--topo", []string{"--nccl-tests", h200Log, "--topo", "rtxpro6000-2s"},
			"usage: --topo rtxpro6000-2s: its GPUs are NVIDIA RTX PRO 6000 Blackwell Server Edition, and " + h200Log + " ran on NVIDIA H200: pass a box of that GPU"},
		{"--op", []string{"--nccl-tests", agLog, "--op", "allreduce"},
			"usage: --op allreduce: " + agLog + " measured allgather (its text or file name says so); --op is only for a log that does not say"},
		{"--gpus", []string{"--nccl-tests", h200Log, "--topo", "h200-nvswitch", "--gpus", "2"},
			"usage: --gpus 2: " + h200Log + " measured 8 ranks: want at least as many GPUs"},
		{"CPU ranks, default box", []string{"--nccl-tests", agLog},
			"usage: " + agLog + cpuRanks + "; the default box rtxpro6000-2s has NVIDIA RTX PRO 6000 Blackwell Server Edition: pass --topo with the JSON 'tpscope calibrate --backend cpu' wrote"},
		{"CPU ranks, --topo", []string{"--nccl-tests", agLog, "--topo", "h200-nvswitch"},
			"usage: --topo h200-nvswitch: its GPUs are NVIDIA H200, and " + agLog + cpuRanks + ": pass --topo with the JSON 'tpscope calibrate --backend cpu' wrote"},
		{"GPU log, CPU box", []string{"--nccl-tests", h200Log, "--topo", cpuBox},
			"usage: --topo " + cpuBox + ": it is a box of CPU ranks ('tpscope calibrate --backend cpu'), and " + h200Log + " was measured on NVIDIA H200: pass --topo with the box it ran on"},
		// It had ended with exit 1 asking for a box with at least as
		// many GPUs as the 1 rank, beside the default box's 8.
		{"one rank", []string{"--nccl-tests", oneLog},
			"usage: " + oneLog + " measured 1 rank: a collective of one rank crosses no link, so it has nothing to fit (run nccl-tests over several GPUs: -g N, or N processes)"},
		{"GPU the catalog does not know", []string{"--nccl-tests", l20Log, "--topo", "rtxpro6000-2s"},
			"usage: --topo rtxpro6000-2s: its GPUs are NVIDIA RTX PRO 6000 Blackwell Server Edition, and " + l20Log + " ran on NVIDIA L20 (a GPU the catalog does not know): pass a box of that GPU"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"calibrate", "-o", out}, tc.args...)...)
			if code != 2 || stderr != "tpscope calibrate: "+tc.want+"\n" {
				t.Errorf("exit %d, stderr %q; want 2 and the one line %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s was written", out)
			}
		})
	}
	for _, args := range [][]string{
		{"--nccl-tests", h200Log, "--topo", "h200-nvswitch"},
		{"--nccl-tests", agLog, "--topo", cpuBox},
		{"--nccl-tests", agLog, "--op", "ag", "--topo", cpuBox},
	} {
		if code, _, stderr := runCLI(t, append([]string{"calibrate", "-o", out}, args...)...); code != 0 || strings.Contains(stderr, "ran on") {
			t.Errorf("%q: exit %d, stderr %q; want the fit", args, code, stderr)
		}
	}
}

// TestCalibrateNCCLTestsRecordedSettings: the NCCL settings a log records
// (NCCL's "set by environment" lines under NCCL_DEBUG=INFO) are the fit's:
// the hand-made RTX PRO 6000 log with NCCL_P2P_LEVEL=SYS and NCCL_PROTO=LL
// recorded is fitted as LL under SYS (every parameter set labelled SYS, no
// Simple one), without a flag; the calibrated box prices a 64 KiB
// all-reduce with the fit under --p2p-level SYS only, as under any other
// level the entries do not apply. The report's first line names the box
// (the default one) and the settings; the provenance records them. A flag
// that contradicts the log is refused in one line naming the flag, the
// file and the recorded value; one that agrees is taken.
func TestCalibrateNCCLTestsRecordedSettings(t *testing.T) {
	log, out := pcieLogWithEnv(t, "NCCL_P2P_LEVEL set by environment to SYS", "NCCL_PROTO set by environment to LL")
	code, stdout, stderr := runCLI(t, "calibrate", "--nccl-tests", log, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	const first = "# fit of box rtxpro6000-2s (the default; --topo names the box the log ran on), 8 ranks (devices 0-7 of its 8); " +
		"NCCL settings NCCL_P2P_LEVEL=SYS NCCL_PROTO=LL (recorded in the log: NCCL_PROTO, NCCL_P2P_LEVEL; not recorded, NCCL's default assumed: NCCL_ALGO, NCCL_P2P_DISABLE, NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS)\n"
	if !strings.HasPrefix(stdout, first) {
		t.Errorf("report starts\n%s\nwant\n%s", stdout, first)
	}
	box, err := topology.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(box.Calibration.Source, "NCCL settings NCCL_P2P_LEVEL=SYS NCCL_PROTO=LL (recorded in the log") {
		t.Errorf("provenance %q does not record the settings", box.Calibration.Source)
	}
	for _, p := range box.Calibration.Collectives {
		if p.P2PLevel != "SYS" || p.Proto != "LL" {
			t.Errorf("fitted %+v: want LL under SYS (the log's settings)", p)
		}
	}
	for _, tc := range []struct {
		level      string
		calibrated bool
	}{{"SYS", true}, {"PXB", false}} {
		code, stdout, stderr := runCLI(t, "collective", "--topo", out, "--sizes", "64K", "--nccl-proto", "LL", "--p2p-level", tc.level, "--output", "json")
		if code != 0 || !strings.Contains(stdout, fmt.Sprintf(`"calibrated": %v`, tc.calibrated)) {
			t.Errorf("collective under --p2p-level %s: exit %d, want calibrated %v:\n%s%s", tc.level, code, tc.calibrated, stdout, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "calibrate", "--nccl-tests", log, "-o", out, "--p2p-level", "PXB"); code != 2 ||
		stderr != "tpscope calibrate: usage: --p2p-level PXB: "+log+" records NCCL_P2P_LEVEL=SYS at line 15: the fit is of the settings the run had (drop --p2p-level)\n" {
		t.Errorf("contradicting flag: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, "calibrate", "--nccl-tests", log, "-o", out, "--p2p-level", "sys", "--nccl-proto", "LL"); code != 0 {
		t.Errorf("agreeing flags: exit %d, %q", code, stderr)
	}
}

// TestCalibrateNCCLTestsChannels: a log run with NCCL_MIN_NCHANNELS=8
// (NCCL's INFO line for an integer parameter ends in a period) is fitted
// under it: the report names it as recorded, the entries record the 8
// channels the dual-socket ring ran (NCCL's own 2 raised to 8), and a
// --nccl-min-channels that contradicts the log is refused in one line.
func TestCalibrateNCCLTestsChannels(t *testing.T) {
	log, out := pcieLogWithEnv(t, "NCCL_P2P_LEVEL set by environment to SYS", "NCCL_MIN_NCHANNELS set by environment to 8.")
	code, stdout, stderr := runCLI(t, "calibrate", "--nccl-tests", log, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "NCCL settings NCCL_MIN_NCHANNELS=8 NCCL_P2P_LEVEL=SYS (recorded in the log: NCCL_P2P_LEVEL, NCCL_MIN_NCHANNELS;") {
		t.Errorf("report\n%s\nwant the settings recorded in the log named", stdout)
	}
	box, err := topology.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range box.Calibration.Collectives {
		if p.Channels != 8 || p.P2PLevel != "SYS" {
			t.Errorf("fitted %+v: want 8 channels under SYS", p)
		}
	}
	if code, _, stderr := runCLI(t, "calibrate", "--nccl-tests", log, "-o", out, "--nccl-min-channels", "4"); code != 2 ||
		stderr != "tpscope calibrate: usage: --nccl-min-channels 4: "+log+" records NCCL_MIN_NCHANNELS=8 at line 16: the fit is of the settings the run had (drop --nccl-min-channels)\n" {
		t.Errorf("contradicting flag: exit %d, %q", code, stderr)
	}
}

// TestCalibrateModeFlags: a flag the chosen mode does not read is refused
// in one line naming it and what reads it, before any work: another mode's
// own flag, and a scenario flag the mode has no use for (the cpu mode
// writes a box of its own; an nccl-tests log reads only the box and the
// NCCL settings).
func TestCalibrateModeFlags(t *testing.T) {
	const h200 = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b32-catalog.otlp.jsonl.gz"
	const arLog = "../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt"
	out := filepath.Join(t.TempDir(), "box.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace", h200, "--ranks", "2"}, "--ranks: used by calibrate --backend cpu only"},
		{[]string{"--trace", h200, "--bench-ms", "5"}, "--bench-ms: used by calibrate --backend cpu only"},
		{[]string{"--trace", h200, "--seed", "3"}, "--seed: used by calibrate --serving RESULT... only"},
		{[]string{"--trace", h200, "--fit-levels", "1"}, "--fit-levels: used by calibrate --serving RESULT... only"},
		{[]string{"--backend", "cpu", "--holdout", h200}, "--holdout: used by calibrate --trace SRC only"},
		{[]string{"--backend", "cpu", "--topo", "h200-nvswitch"}, "--topo h200-nvswitch: not used by calibrate --backend cpu: "},
		{[]string{"--backend", "cpu", "--model", "glm-5"}, "--model glm-5: not used by calibrate --backend cpu: "},
		{[]string{"--backend", "cpu", "--batch", "64"}, "--batch 64: not used by calibrate --backend cpu: "},
		{[]string{"--backend", "cpu", "--nccl-proto", "LL"}, "--nccl-proto LL: not used by calibrate --backend cpu: "},
		{[]string{"--nccl-tests", arLog, "--batch", "64"}, "--batch 64: not used by calibrate --nccl-tests FILE: "},
	} {
		code, _, stderr := runCLI(t, append([]string{"calibrate", "-o", out}, tc.args...)...)
		if code != 2 || !strings.HasPrefix(stderr, "tpscope calibrate: usage: "+tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line starting %q", tc.args, code, stderr, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%q: %s was written", tc.args, out)
		}
	}
	// The NCCL settings the log ran with are the nccl-tests mode's.
	if code, _, stderr := runCLI(t, "calibrate", "--nccl-tests", arLog, "--nccl-proto", "LL", "--topo", "rtxpro6000-2s", "-o", out); code != 0 {
		t.Errorf("--nccl-proto with --nccl-tests: exit %d: %s", code, stderr)
	}
}

func TestCalibrateUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no mode", []string{"-o", "x.json"}, 2, "no measurements: pass one of "},
		{"no -o", []string{"--nccl-tests", "f.txt"}, 2, "-o FILE is required: where to write the calibrated topology"},
		{"no -o for overheads", []string{"--serving", "r.json"}, 2, "-o FILE is required: where to write the fitted overheads"},
		{"missing file", []string{"--nccl-tests", "does-not-exist.txt", "-o", "x.json"}, 2, "--nccl-tests does-not-exist.txt: no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := runCLI(t, append([]string{"calibrate"}, c.args...)...)
			if code != c.code || !strings.Contains(errs, c.want) || (c.name == "no mode" && !strings.Contains(errs, "--nccl-tests FILE")) {
				t.Errorf("exit %d, stderr %q; want %d containing %q", code, errs, c.code, c.want)
			}
		})
	}
}

// TestCalibrateTraceRefusesWorse: a calibration that predicts the held-out
// steps worse is not written (exit 1, both figures in the message) unless
// --force. The fitted run's dense GEMMs take 1.25 x their predicted time;
// the held-out run's too, and its routed experts give the time back, so
// the prior predicts its step exactly: the GEMMs' fit (kept: their ops
// improve) makes the held-out step error worse.
func TestCalibrateTraceRefusesWorse(t *testing.T) {
	dir := t.TempDir()
	slow := func(op *sim.OpResult) float64 {
		if op.Kind == model.KindGEMM {
			return op.Us * 1.25
		}
		return op.Us
	}
	fit, hold := filepath.Join(dir, "fit.json"), filepath.Join(dir, "hold.json")
	writeScaledRun(t, fit, 2, slow)
	// The experts' share of the GEMMs' extra time, from one step's prediction.
	var extra, moe float64
	writeScaledRun(t, filepath.Join(dir, "probe.json"), 1, func(op *sim.OpResult) float64 {
		switch op.Kind {
		case model.KindGEMM:
			extra += op.Us * 0.25
		case model.KindMoEGEMM:
			moe += op.Us
		}
		return op.Us
	})
	f := 1 - extra/moe
	if f < 0.2 {
		t.Fatalf("the experts (%.1f us) cannot give back %.1f us", moe, extra)
	}
	writeScaledRun(t, hold, 2, func(op *sim.OpResult) float64 {
		if op.Kind == model.KindMoEGEMM {
			return op.Us * f
		}
		return slow(op)
	})
	out := filepath.Join(dir, "box.json")
	code, _, errs := runCLI(t, "calibrate", "--trace", fit, "--holdout", hold, "-o", out)
	if code != 1 || !strings.Contains(errs, "op RMS error") || !strings.Contains(errs, "step error ") || !strings.Contains(errs, "--force") {
		t.Fatalf("exit %d, stderr %q; want 1 naming the op RMS and step errors before and after", code, errs)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written although refused", out)
	}
	code, stdout, errs := runCLI(t, "calibrate", "--trace", fit, "--holdout", hold, "-o", out, "--force")
	if code != 0 || !strings.Contains(stdout, "warning: the calibrated box predicts the held-out steps worse") {
		t.Fatalf("--force: exit %d, stderr %q, stdout:\n%s", code, errs, stdout)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("--force: %v", err)
	}
	if code, _, errs = runCLI(t, "calibrate", "--trace", fit, "--holdout-batch", "4", "-o", out); code != 2 || !strings.Contains(errs, "--holdout-batch") {
		t.Errorf("--holdout-batch without --holdout: exit %d, %q", code, errs)
	}
}

// TestCalibrateRampTable: the ramp column is microseconds to the
// hundredth, a fitted ramp that rounds to zero there is 0 (a fit's
// 5.259e-14 us printed as such before), and an undetermined one (prior).
func TestCalibrateRampTable(t *testing.T) {
	tc := &compare.Calibration{Families: []calibrate.FamilyFit{
		{Family: "moe_gemm/int4-g32", RampUs: 5.259e-14, RampDetermined: true},
		{Family: "router", RampUs: 4.286, RampDetermined: true},
		{Family: "gemm/bf16", RampUs: 1.5},
	}}
	var b strings.Builder
	if err := writeTraceCalibration(&b, "", tc); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"moe_gemm/int4-g32": "0", "router": "4.29", "gemm/bf16": "(prior)"}
	for _, line := range strings.Split(b.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || want[f[0]] == "" {
			continue
		}
		// family, samples, compute-bound, efficiency, prior, memory-bound,
		// mem eff, prior, ramp us: the 9th column.
		if f[8] != want[f[0]] {
			t.Errorf("%s: ramp %q, want %q\n%s", f[0], f[8], want[f[0]], line)
		}
		delete(want, f[0])
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v\n%s", want, b.String())
	}
}

// TestCalibrateHoldoutBatch: held-out traces that record no scenario are
// predicted at the batch their engine's ranges name (the vLLM tiny
// fixture's generation ranges: 8), and a --holdout-batch naming another is
// refused in one line;
// where they name none (the naive PyTorch kimi-stack profile), at
// --holdout-batch, else at --batch, said in the held-out scenario's line
// and recorded in the calibration's provenance.
func TestCalibrateHoldoutBatch(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "box.json")
	heldOut := func(stdout string) string {
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(l, "# held out: ") {
				return l
			}
		}
		return ""
	}
	const stack = "../../traces/testdata/real/kimi-stack/"
	stackArgs := []string{"calibrate", "--trace", stack + "kimi-stack-graph-b1.pt.trace.json.gz", "--holdout", stack + "kimi-stack-graph-b32.pt.trace.json.gz",
		"--model", stack + "config.json", "--batch", "1", "--context", "4096", "--topo", "nvswitch:8xh100-sxm", "--tp", "8", "--cuda-graphs", "--engine", "vllm", "--force", "-o", out}
	for _, tc := range []struct {
		args         []string
		batch, cause string
	}{
		{nil, "b1", "; batch 1 from --batch: the held-out traces do not record theirs (--holdout-batch sets it)\n"},
		{[]string{"--holdout-batch", "32"}, "b32", "; batch 32 from --holdout-batch\n"},
	} {
		code, stdout, errs := runCLI(t, append(stackArgs, tc.args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.args, code, errs)
		}
		if l := heldOut(stdout); !strings.Contains(l, " decode "+tc.batch+" ctx4096 ") || !strings.Contains(stdout, tc.cause) {
			t.Errorf("%q: held-out line %q; want decode %s, and the scenario's origin ending %q:\n%s", tc.args, l, tc.batch, tc.cause, stdout)
		}
		box, err := topology.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		prov := strings.Join(box.Sources, "\n")
		_, held, _ := strings.Cut(prov, "held out: other traces, predicted as ")
		if !strings.Contains(held, "config.json tp8 decode "+tc.batch+" ctx4096") {
			t.Errorf("%q: provenance %q does not record the held-out batch %s", tc.args, prov, tc.batch)
		}
	}

	// vLLM's ranges of the held-out rank name its batch (8); the fitted
	// trace is another rank of the same run (a trace held out must not be
	// one the fit reads).
	const kineto = "../../traces/testdata/kineto/"
	const fitted, vllm = kineto + "vllm_tiny_tp4_rank0_eager.pt.trace.json.gz", kineto + "vllm_tiny_tp4_rank1_eager.pt.trace.json.gz"
	vllmArgs := []string{"calibrate", "--trace", fitted, "--holdout", vllm, "--model", "tiny-mla-moe", "--batch", "8", "--context", "512",
		"--topo", "nvswitch:8xh200-sxm", "--force", "-o", out}
	code, stdout, errs := runCLI(t, vllmArgs...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if l := heldOut(stdout); !strings.Contains(l, " decode b8 ctx512 ") || !strings.Contains(stdout, "; batch 8 from the held-out traces' engine ranges\n") {
		t.Errorf("held-out line %q; want decode b8 from the engine ranges:\n%s", l, stdout)
	}
	if code, _, errs = runCLI(t, append(vllmArgs, "--holdout-batch", "8")...); code != 0 {
		t.Errorf("--holdout-batch agreeing with the ranges: exit %d: %s", code, errs)
	}
	code, _, errs = runCLI(t, append(vllmArgs, "--holdout-batch", "16")...)
	const want = "tpscope calibrate: usage: --holdout-batch 16: " + vllm + " measured decode batch 8 per rank (its engine ranges): a profiler trace's engine, world size, phase, batch and CUDA graphs are what it ran (pass --holdout-batch 8)\n"
	if code != 2 || !strings.HasSuffix(errs, want) {
		t.Errorf("--holdout-batch 16: exit %d, stderr ends %q; want 2 and %q", code, errs, want)
	}
}

// TestCalibrateHoldoutNotFitted: a held-out trace must not be one the fit
// reads. The same trace given to --trace and --holdout (by name, as a copy,
// or among several fitted ones) is refused in one line before anything is
// fitted, nothing written: it had been fitted and then judged on itself,
// 'held-out traces' steps (6): ... step error -61.9 % -> -7.1 %', and the
// box written on that validation.
func TestCalibrateHoldoutNotFitted(t *testing.T) {
	b1 := filepath.Join(cpuRanksDir, "cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz")
	b8 := filepath.Join(cpuRanksDir, "cpu4-tiny-mla-moe-tp4-b8-eager.otlp.jsonl.gz")
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	dir := t.TempDir()
	out := filepath.Join(dir, "box.json")
	cp := filepath.Join(dir, "copy-b1.otlp.jsonl.gz")
	raw, err := os.ReadFile(b1)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cal := func(args ...string) []string {
		return append([]string{"calibrate", "--topo", box, "-o", out}, args...)
	}
	for _, tc := range []usageCase{
		{"same name", cal("--trace", b1, "--holdout", b1), "--holdout " + b1 + ": given to --trace too: a held-out trace judges a fit it took no part in"},
		{"among the fitted", cal("--trace", b1+","+b8, "--holdout", b8), "--holdout " + b8 + ": given to --trace too"},
		{"a copy", cal("--trace", b1, "--holdout", cp), "--holdout " + cp + ": 2142 of its spans repeat spans of " + b1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stdout %d bytes, stderr %q; want 2, nothing on stdout and one line with %q", code, len(stdout), stderr, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s was written", out)
			}
		})
	}
}

// TestCalibratedEngineTravels: a box calibrated on a run records the
// engine whose kernels it was fitted on (the trace's scenario: vLLM's
// profile, the default engine it was priced under), and a prediction for
// another engine on that box says its kernel figures are that engine's;
// one for the same engine says nothing of it.
func TestCalibratedEngineTravels(t *testing.T) {
	dir := t.TempDir()
	slow := func(op *sim.OpResult) float64 {
		if op.Kind == model.KindGEMM {
			return op.Us * 1.25
		}
		return op.Us
	}
	fit, hold := filepath.Join(dir, "fit.json"), filepath.Join(dir, "hold.json")
	writeScaledRun(t, fit, 2, slow)
	writeScaledRun(t, hold, 2, slow)
	box := filepath.Join(dir, "box.json")
	if code, _, errs := runCLI(t, "calibrate", "--trace", fit, "--holdout", hold, "-o", box, "--force"); code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, errs)
	}
	raw, err := os.ReadFile(box)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Devices []struct {
			CalibratedEngine string `json:"calibrated_engine"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Devices) == 0 || f.Devices[0].CalibratedEngine != "vllm@0.24" {
		t.Fatalf("calibrated box's devices %+v: want calibrated_engine vllm@0.24 (the trace's engine)", f.Devices)
	}
	const note = "its kernel figures were calibrated on vllm@0.24's kernels"
	args := []string{"predict", "--model", "tiny-mla-moe", "--tp", "8", "--batch", "8", "--context", "512", "--topo", box}
	if code, out, errs := runCLI(t, args...); code != 0 || strings.Contains(out, note) {
		t.Errorf("predict on the engine it was fitted under: exit %d (%s), and a caveat where none is due:\n%s", code, errs, out)
	}
	code, out, errs := runCLI(t, append(args, "--engine", "executor")...)
	if code != 0 || !strings.Contains(out, note+" (calibrate --trace of its run, or calibrate --backend cpu of the executor's), and this prices executor@1's with them") {
		t.Errorf("predict --engine executor on a box calibrated under vLLM: exit %d (%s), want the caveat:\n%s", code, errs, out)
	}
}

// pcieLogWithEnv writes the public 8-GPU PCIe all_reduce_perf log with
// NCCL INFO lines saying each of env (as NCCL prints them after the rank
// lines, line 15) into a temporary directory: the log's path and a path
// for the calibrated box beside it.
func pcieLogWithEnv(t *testing.T, env ...string) (log, out string) {
	t.Helper()
	pcie, err := os.ReadFile("../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt")
	if err != nil {
		t.Fatal(err)
	}
	const rankLine = "NVIDIA RTX PRO 6000 Blackwell Server Edition\nbox01:"
	if !strings.Contains(string(pcie), rankLine) {
		t.Fatal("the log's last rank line is not followed by NCCL's output")
	}
	var info strings.Builder
	for _, e := range env {
		info.WriteString("box01:48213:48213 [0] NCCL INFO " + e + "\n")
	}
	text := strings.Replace(string(pcie), rankLine, "NVIDIA RTX PRO 6000 Blackwell Server Edition\n"+info.String()+"box01:", 1)
	dir := t.TempDir()
	log, out = filepath.Join(dir, "all_reduce_perf.txt"), filepath.Join(dir, "box.json")
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return log, out
}

// TestCalibrateNCCLTestsOneSize: a log of one message size under
// NCCL_PROTO=Simple NCCL_ALGO=Ring fits one pair on one time (out of place
// and in place), which cannot tell its latency from its bandwidth: the
// text report says so under the table, and the JSON report lists the pair
// under one_size. It had printed the three parameters with an RMS error
// of a few tenths of a percent, as if both were measured.
func TestCalibrateNCCLTestsOneSize(t *testing.T) {
	log, out := pcieLogWithEnv(t, "NCCL_PROTO set by environment to Simple", "NCCL_ALGO set by environment to Ring")
	text, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(text), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] != "16777216" && strings.Trim(f[0], "0123456789") == "" {
			continue // another size's row
		}
		keep = append(keep, l)
	}
	if err := os.WriteFile(log, []byte(strings.Join(keep, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "calibrate", "--nccl-tests", log, "--p2p-level", "SYS", "-o", out)
	const want = "# Ring/Simple: its 2 samples are of one size (16777216 B): one time cannot tell latency from bandwidth"
	if code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, stdout %q, stderr %q; want a line %q", code, stdout, stderr, want)
	}
	var rep struct {
		OneSize []calibrate.OneSizeFit `json:"one_size"`
	}
	runJSONInto(t, &rep, "calibrate", "--nccl-tests", log, "--p2p-level", "SYS", "-o", out, "--output", "json")
	if len(rep.OneSize) != 1 || rep.OneSize[0] != (calibrate.OneSizeFit{Algo: "Ring", Proto: "Simple", Bytes: 16 << 20, Samples: 2}) {
		t.Errorf("--output json one_size %+v, want Ring/Simple at 16777216 B, 2 samples", rep.OneSize)
	}
}

// TestCalibrateNCCLTestsCollectiveNotFitted: a log of a collective the fit
// does not take (alltoall, which --op's list and the executor know;
// sendrecv, which neither does) is one line naming the file, what it
// measured and what the fit takes, before any other output, and nothing
// is written; so is --op alltoall. The alltoall log had printed its
// skipped lines and then "only allreduce, allgather and reducescatter can
// be calibrated", and the sendrecv log "want allreduce, allgather,
// reducescatter or alltoall", offering alltoall.
func TestCalibrateNCCLTestsCollectiveNotFitted(t *testing.T) {
	pcie, err := os.ReadFile("../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "box.json")
	const fits = "calibrate --nccl-tests fits allreduce, allgather and reducescatter"
	for _, tc := range []struct {
		test, op, want string
		code           int
	}{
		{"alltoall_perf", "", " measured alltoall: " + fits, 1},
		{"sendrecv_perf", "", " measured sendrecv: " + fits, 1},
		{"all_reduce_perf", "alltoall", "usage: --op alltoall: " + fits, 2},
	} {
		log := filepath.Join(dir, tc.test+".txt")
		text := strings.ReplaceAll(string(pcie), "all_reduce_perf", tc.test)
		if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"calibrate", "--nccl-tests", log, "--p2p-level", "SYS", "-o", out}
		if tc.op != "" {
			args = append(args, "--op", tc.op)
		} else {
			tc.want = log + tc.want
		}
		code, stdout, stderr := runCLI(t, args...)
		if code != tc.code || stdout != "" || stderr != "tpscope calibrate: "+tc.want+"\n" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and only %q", tc.test, code, stdout, stderr, tc.code, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: %s was written", tc.test, out)
		}
	}
}

// TestWriteCPUCalibrationErrorInPercent: the CPU calibration's all-reduce
// fit error prints in percent, as the nccl-tests fit's does: an RMS
// relative error of 0.36 is 36.0 %. It printed "RMS rel. error 0.36",
// which reads as a third of a percent beside the other fits' figures.
func TestWriteCPUCalibrationErrorInPercent(t *testing.T) {
	rep := &cpu.CalibrateReport{Ranks: 4, Cores: 2, CPU: "test", AllReduce: make([]cpu.CollectiveSample, 8), AllReduceRMSRel: 0.36,
		AllReduceFit: topology.CollectiveParams{BaseLatUs: 1, HwLatUs: 0.5, BusBWGBps: 3.3}}
	var b strings.Builder
	if err := writeCPUCalibration(&b, "cpu-4r", "cpu.json", rep); err != nil {
		t.Fatal(err)
	}
	const want = "all-reduce fit (8 samples, RMS relative error 36.0 %): base 1.00 us + 0.50 us per ring step + bytes at 3.30 GB/s bus\n"
	if !strings.HasSuffix(b.String(), want) {
		t.Errorf("report:\n%s\nwant it to end with %q", b.String(), want)
	}
}
