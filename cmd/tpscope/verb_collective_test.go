package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestCollectiveVerb(t *testing.T) {
	code, out, errs := runCLI(t, "collective", "--topo", "rtxpro6000-2s", "--op", "allreduce", "--ranks", "8", "--sizes", "512:2K", "--nccl-proto", "LL", "--p2p-level", "SYS", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3 {
		t.Fatalf("%d rows, want 3 (512, 1K, 2K)", len(res.Rows))
	}
	for _, k := range []string{"bytes", "time_us", "algo", "proto", "algbw_GBps", "busbw_GBps"} {
		if _, ok := res.Rows[0][k]; !ok {
			t.Errorf("row lacks %q: %v", k, res.Rows[0])
		}
	}
	// Ring LL at SYS: 20.6 us (nccl-model.md latency) + 14 steps x 0.4 us
	// (the ring's cross-socket hop, 0.8 us path, beyond the fastest pair's
	// 0.4 us; sim/collective.go "Hop latency") + 512 B / (1000 x 11.1 x
	// 8/14 GB/s): the ring's bus bandwidth is its channels (2 on the
	// dual-socket box, NCCL's search.cc/connect.cc) x 11.1 GB/s per PCIe
	// channel (sim/collective.go), x 0.5 for LL.
	want := 20.6 + 14*0.4 + 512/(1000*11.1*8.0/14)
	if got := res.Rows[0]["time_us"].(float64); math.Abs(got-want) > 1e-9 || res.Rows[0]["proto"] != "LL" {
		t.Errorf("512 B: %v us %v, want %.4f LL", got, res.Rows[0]["proto"], want)
	}
	code, out, _ = runCLI(t, "collective", "--sizes", "1M")
	if code != 0 || !strings.Contains(out, "busbw_GBps") || !strings.Contains(out, "1048576") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--op", "bcast"}, {"--sizes", "x"}, {"--ranks", "9"}, {"--nccl-proto", "LL7"}, {"--output", "xml"}, {"--custom-ar", "threeshot"}} {
		if code, _, _ := runCLI(t, append([]string{"collective"}, bad...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
	if code, out, _ := runCLI(t, "collective", "--p2p-level", "SYS", "--custom-ar", "oneshot", "--sizes", "8K"); code != 0 || !strings.Contains(out, "OneShot") {
		t.Errorf("one-shot: exit %d\n%s", code, out)
	}
	// torch's multimem all-reduce: on an NVSwitch box 8.65 us + 38.55 us
	// per MiB of a rank's share (sim.TestMultimemMatchesVLLM derives the
	// figures from vLLM's measurement); refused before any work on a PCIe
	// box and for another collective.
	code, out, _ = runCLI(t, "collective", "--topo", "h200-nvswitch", "--custom-ar", "multimem", "--sizes", "8M", "--output", "json")
	var mm struct {
		Rows []map[string]any `json:"rows"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &mm) != nil || len(mm.Rows) != 1 {
		t.Fatalf("multimem: exit %d\n%s", code, out)
	}
	if got, want := mm.Rows[0]["time_us"].(float64), 8.65+38.55*8/8; math.Abs(got-want) > 1e-9 || mm.Rows[0]["algo"] != "Multimem" {
		t.Errorf("multimem 8 MiB on 8 GPUs: %v us (%v), want %.2f", got, mm.Rows[0]["algo"], want)
	}
	for _, bad := range [][]string{{"--topo", "rtxpro6000-2s", "--custom-ar", "multimem"}, {"--topo", "h200-nvswitch", "--op", "allgather", "--custom-ar", "multimem"},
		{"--topo", "nvswitch:8xa100-sxm", "--custom-ar", "multimem"}} {
		code, _, errOut := runCLI(t, append([]string{"collective", "--sizes", "1M"}, bad...)...)
		if code != 2 || !strings.Contains(errOut, "--custom-ar multimem") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, %q: want one usage line naming --custom-ar multimem", bad, code, errOut)
		}
	}
}

// TestTableVerbsStartWithTheTable: collective's and schedule's output is
// the table, its title the first line (no blank line before it), in
// table and markdown output.
func TestTableVerbsStartWithTheTable(t *testing.T) {
	for _, c := range []struct {
		args  []string
		first string
	}{
		{[]string{"collective", "--sizes", "8K"}, "allreduce on 8 ranks of rtxpro6000-2s"},
		{[]string{"collective", "--sizes", "8K", "--output", "markdown"}, "### allreduce on 8 ranks of rtxpro6000-2s"},
		{[]string{"schedule", "--model", "tiny-mla-moe", "--tp", "2"}, "tiny-mla-moe  tp2  decode"},
		{[]string{"schedule", "--model", "tiny-mla-moe", "--tp", "2", "--output", "markdown"}, "### tiny-mla-moe  tp2  decode"},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if !strings.HasPrefix(out, c.first) {
			t.Errorf("%v: output starts %q, want %q", c.args, out[:min(len(out), 60)], c.first)
		}
	}
}

// TestCollectiveCSVKeepsPrecision: the CSV is for programs, so its numbers
// are the values, not the table's two decimals. A 1 KiB all-reduce on the
// default box takes about 217 us: its algorithm bandwidth, 1024 B / 217 us
// = 0.0047 GB/s, had been written "0.00", and busbw "0.01". Each row's
// algbw_GBps x time_us x 1000 must give its size back.
func TestCollectiveCSVKeepsPrecision(t *testing.T) {
	code, out, errs := runCLI(t, "collective", "--sizes", "1K:4K", "--output", "csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 4 {
		t.Fatalf("%d records (%v), want a header and 3 sizes:\n%s", len(recs), err, out)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, r := range recs[1:] {
		num := func(name string) float64 {
			v, err := strconv.ParseFloat(r[col[name]], 64)
			if err != nil {
				t.Fatalf("%s %q: %v", name, r[col[name]], err)
			}
			return v
		}
		size, us, algbw := num("size_bytes"), num("time_us"), num("algbw_GBps")
		if got := algbw * us * 1e3; math.Abs(got-size) > 1e-4*size {
			t.Errorf("%v B: algbw %v GB/s x %v us = %v B: the CSV rounded the figures", size, algbw, us, got)
		}
	}
}

// TestCollectiveSaysCalibrationElsewhere: a box calibrated from a log run
// under NCCL_P2P_LEVEL=SYS (as the README's calibrate example runs it)
// prices an all-reduce under the default PXB with NCCL's constants, as
// sim applies an entry only under its own setting: a line on stderr says
// so and names the flag that prices with the fit; under SYS, or for a
// collective the box has no fit of, nothing is said. Its "calibrated
// false" column had been the only sign.
func TestCollectiveSaysCalibrationElsewhere(t *testing.T) {
	out := filepath.Join(t.TempDir(), "box.json")
	if code, _, errs := runCLI(t, "calibrate", "--nccl-tests", "../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt", "--p2p-level", "SYS", "-o", out); code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, errs)
	}
	want := "note: the calibration of allreduce in rtxpro6000-2s (" + out + ") was fitted under NCCL_P2P_LEVEL=SYS and applies only there; this prediction is under NCCL_P2P_LEVEL=PXB, so it prices NCCL's constants (--p2p-level SYS prices with it)\n"
	for _, c := range []struct {
		args []string
		note string
	}{
		{[]string{"--op", "allreduce"}, want},
		{[]string{"--op", "allreduce", "--p2p-level", "SYS"}, ""},
		{[]string{"--op", "allgather"}, ""},
	} {
		code, stdout, stderr := runCLI(t, append([]string{"collective", "--topo", out, "--sizes", "64K"}, c.args...)...)
		if code != 0 || stderr != c.note || !strings.Contains(stdout, "65536") {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.args, code, stderr, c.note)
		}
	}
}

// TestCollectiveSizesAsNCCLTestsRuns: a size is predicted as nccl-tests
// runs it, and a note on stderr says so: all_reduce_perf -b 1001 runs 250
// floats, 1000 B; all_gather_perf on 8 ranks 31 floats a rank rounded
// down to 28 (16 B multiples), 896 B (nccl-tests src/common.cu setupArgs,
// src/all_gather.cu). A size of no whole element is refused in one line.
// The prediction had been of 1001 B, a size nccl-tests never prints.
func TestCollectiveSizesAsNCCLTestsRuns(t *testing.T) {
	for _, c := range []struct {
		op    string
		bytes int64
		note  string
	}{
		{"allreduce", 1000, "1001 -> 1000 B"},
		{"allgather", 896, "1001 -> 896 B"},
	} {
		code, out, errs := runCLI(t, "collective", "--topo", "rtxpro6000-2s", "--ranks", "8", "--op", c.op, "--sizes", "1001", "--output", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.op, code, errs)
		}
		var got struct {
			Rows []collectiveRow `json:"rows"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Rows) != 1 || got.Rows[0].Bytes != c.bytes {
			t.Errorf("%s --sizes 1001: rows %+v, want one of %d B", c.op, got.Rows, c.bytes)
		}
		if !strings.Contains(errs, "rounded down") || !strings.Contains(errs, c.note) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s --sizes 1001: stderr %q, want one note saying %q", c.op, errs, c.note)
		}
	}
	code, out, errs := runCLI(t, "collective", "--topo", "rtxpro6000-2s", "--ranks", "8", "--op", "allgather", "--sizes", "100")
	if code != 2 || out != "" || !strings.Contains(errs, "--sizes 100") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("allgather --sizes 100 on 8 ranks: exit %d, stdout %q, stderr %q; want one usage line naming --sizes 100", code, out, errs)
	}
	// Sizes nccl-tests runs as given print no note.
	if code, _, errs := runCLI(t, "collective", "--topo", "rtxpro6000-2s", "--sizes", "1K:4K"); code != 0 || errs != "" {
		t.Errorf("--sizes 1K:4K: exit %d, stderr %q; want no note", code, errs)
	}
}

// TestCollectiveNoCalibrationOnlyWhereABoxHasOne: --no-calibration sets a
// box's calibrated collective parameters aside, and is refused in one
// line where there are none to set aside (a preset, or --measure on the
// cpu backend without --topo, which predicts nothing): it was taken
// there and changed no number. On a calibrated box it prices NCCL's
// constants, the preset's rows.
func TestCollectiveNoCalibrationOnlyWhereABoxHasOne(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"preset", []string{"collective", "--topo", "rtxpro6000-2s", "--sizes", "64K", "--no-calibration"},
			"--no-calibration: --topo rtxpro6000-2s carries no calibrated collective parameters"},
		{"cpu measurement without a box", []string{"collective", "--measure", "--ranks", "2", "--sizes", "1K", "--steps", "1", "--warmup", "0", "--no-calibration"},
			"--no-calibration: sets aside a box's calibration in the prediction, and --measure on the cpu backend without --topo predicts nothing"},
	})
	box := filepath.Join(t.TempDir(), "box.json")
	if code, _, errs := runCLI(t, "calibrate", "--nccl-tests", "../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt", "--p2p-level", "SYS", "-o", box); code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, errs)
	}
	timeOf := func(args ...string) (float64, bool) {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"collective", "--sizes", "64K", "--p2p-level", "SYS", "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		var res struct {
			Rows []collectiveRow `json:"rows"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Rows) != 1 {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		return res.Rows[0].TimeUs, res.Rows[0].Calibrated
	}
	preset, _ := timeOf("--topo", "rtxpro6000-2s")
	cal, calibrated := timeOf("--topo", box)
	uncal, uncalibrated := timeOf("--topo", box, "--no-calibration")
	if !calibrated || uncalibrated || uncal != preset || cal == uncal {
		t.Errorf("calibrated box %.3f us (calibrated %v), with --no-calibration %.3f us (calibrated %v); want the preset's %.3f us without it and another time with it",
			cal, calibrated, uncal, uncalibrated, preset)
	}
}
