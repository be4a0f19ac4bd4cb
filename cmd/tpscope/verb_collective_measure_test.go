package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/calibrate/nccltests"
)

// measuredJSON is what collective --measure --output json holds.
type measuredJSON struct {
	Op    string `json:"op"`
	Ranks int    `json:"ranks"`
	Rows  []struct {
		Bytes  int64   `json:"bytes"`
		TimeUs float64 `json:"time_us"`
		Proto  string  `json:"proto"`
	} `json:"rows"`
	Measured struct {
		Backend string     `json:"backend"`
		Steps   int        `json:"steps"`
		Iters   int        `json:"iters"`
		Rows    []measured `json:"rows"`
	} `json:"measured"`
}

// TestCollectiveMeasureCPU runs each collective through the executor on 4
// CPU goroutine ranks at 512 B to 64 KiB (8 sizes) and checks the whole
// path the GPU measurements will take: the JSON sets a positive measured
// time beside the prediction at every size, with algbw = bytes / time and
// busbw = algbw x nccl-tests' factor (2 x 3/4 for all-reduce, 3/4 for the
// others); -o writes nccl-tests output that the parser reads back as the
// same collective, 4 ranks and the same times; and calibrate --nccl-tests
// accepts it on the box of CPU ranks (all-to-all: refused by calibrate, which fits only the other
// three, with a one-line error).
func TestCollectiveMeasureCPU(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		op, bin string
		factor  float64
	}{
		{"allreduce", "all_reduce_perf", 1.5},
		{"allgather", "all_gather_perf", 0.75},
		{"reducescatter", "reduce_scatter_perf", 0.75},
		{"alltoall", "alltoall_perf", 0.75},
	} {
		t.Run(tc.op, func(t *testing.T) {
			log := filepath.Join(dir, "cpu4-"+tc.bin+".txt")
			code, out, errs := runCLI(t, "collective", "--measure", "--backend", "cpu", "--ranks", "4", "--topo", "rtxpro6000-2s", "--op", tc.op,
				"--sizes", "512:64K", "--iters", "2", "--steps", "3", "--warmup", "1", "-o", log, "--output", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var res measuredJSON
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			m := res.Measured
			if res.Op != tc.op || res.Ranks != 4 || m.Backend != "cpu" || m.Steps != 3 || m.Iters != 2 || len(m.Rows) != 8 || len(res.Rows) != 8 {
				t.Fatalf("op %s ranks %d backend %s steps %d iters %d, %d measured and %d predicted rows; want %s, 4, cpu, 3, 2, 8 and 8",
					res.Op, res.Ranks, m.Backend, m.Steps, m.Iters, len(m.Rows), len(res.Rows), tc.op)
			}
			for i, r := range m.Rows {
				if want := int64(512) << i; r.Bytes != want || res.Rows[i].Bytes != want {
					t.Errorf("row %d: %d B measured, %d B predicted; want %d", i, r.Bytes, res.Rows[i].Bytes, want)
				}
				alg := float64(r.Bytes) / 1e3 / r.TimeUs
				if !(r.TimeUs > 0) || math.Abs(r.AlgBWGBps-alg) > 1e-9*alg || math.Abs(r.BusBWGBps-tc.factor*alg) > 1e-9*alg ||
					r.PredictedUs == nil || r.ErrPct == nil || *r.PredictedUs != res.Rows[i].TimeUs || math.Abs(*r.ErrPct-100*(*r.PredictedUs-r.TimeUs)/r.TimeUs) > 1e-9 {
					t.Errorf("row %d: %+v (predicted %v)", i, r, res.Rows[i].TimeUs)
				}
			}
			lg, err := nccltests.ParseFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if lg.Op != tc.op || lg.Ranks != 4 || len(lg.Rows) != 8 || lg.Skipped != 0 || lg.Devices[0] != "CPU goroutine rank (tpscope exec/cpu)" {
				t.Fatalf("log: op %q ranks %d rows %d skipped %d devices %q", lg.Op, lg.Ranks, len(lg.Rows), lg.Skipped, lg.Devices)
			}
			for i, r := range lg.Rows {
				if r.Bytes != m.Rows[i].Bytes || math.Abs(r.OutTimeUs-m.Rows[i].TimeUs) > nccltests.ReadBackTolUs(m.Rows[i].TimeUs) || r.InTimeUs != 0 || r.Type != "float" || r.Count != r.Bytes/4 {
					t.Errorf("log row %d: %+v, measured %+v (read back within %v us)", i, r, m.Rows[i], nccltests.ReadBackTolUs(m.Rows[i].TimeUs))
				}
			}
			// CPU ranks are fitted on a box of CPU ranks only.
			code, out, errs = runCLI(t, append([]string{"calibrate", "--nccl-tests", log, "-o", filepath.Join(dir, tc.op+"-cal.json")}, cpuRanksBox...)...)
			if tc.op == "alltoall" {
				if code != 1 || !strings.Contains(errs, "measured alltoall: calibrate --nccl-tests fits allreduce, allgather and reducescatter") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
					t.Errorf("calibrate all-to-all: exit %d, %q", code, errs)
				}
				return
			}
			if code != 0 || !strings.Contains(out, "# "+tc.op+": 8 samples") {
				t.Errorf("calibrate: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}

// TestCollectiveMeasureReference: a second measurement against the first
// one's log as the reference shows both times per size and the difference
// (measured - reference) / reference, and names the largest one.
func TestCollectiveMeasureReference(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "all_gather_perf.txt")
	args := []string{"collective", "--measure", "--ranks", "2", "--op", "allgather", "--sizes", "1K:4K", "--iters", "2", "--steps", "2", "--warmup", "0"}
	if code, _, errs := runCLI(t, append(args, "-o", ref)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, out, errs := runCLI(t, append(args, "--reference", ref, "--output", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res measuredJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	lg, err := nccltests.ParseFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res.Measured.Rows {
		if r.ReferenceUs != lg.Rows[i].OutTimeUs || math.Abs(r.VsReferencePct-100*(r.TimeUs-r.ReferenceUs)/r.ReferenceUs) > 1e-9 {
			t.Errorf("row %d: reference %v us (log %v), difference %v %%", i, r.ReferenceUs, lg.Rows[i].OutTimeUs, r.VsReferencePct)
		}
	}
	code, out, errs = runCLI(t, append(args, "--reference", ref)...)
	if code != 0 || !strings.Contains(out, "reference_us") || !strings.Contains(out, "largest difference from "+ref) {
		t.Errorf("table: exit %d\n%s%s", code, out, errs)
	}
}

// TestCollectiveMeasureRefused: --measure's flags are refused before any
// work with one line naming the flag, and nothing is written.
func TestCollectiveMeasureRefused(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "x.txt")
	arRef := filepath.Join(dir, "all_reduce_perf.txt")
	if code, _, errs := runCLI(t, "collective", "--measure", "--ranks", "2", "--sizes", "1K", "--steps", "1", "--warmup", "0", "-o", arRef); code != 0 {
		t.Fatalf("reference: exit %d: %s", code, errs)
	}
	m := []string{"collective", "--measure", "--ranks", "4", "--sizes", "512:2K", "-o", log}
	cases := []usageCase{
		{"steps without measure", []string{"collective", "--steps", "3"}, "--steps: needs --measure"},
		{"out without measure", []string{"collective", "-o", log}, "--out: needs --measure"},
		{"reference without measure", []string{"collective", "--reference", arRef}, "--reference: needs --measure"},
		{"custom all-reduce", append(m, "--custom-ar", "oneshot"), "--custom-ar oneshot with --measure"},
		{"unknown backend", append(m, "--backend", "tpu"), `--backend "tpu": want one of`},
		{"iters", append(m, "--iters", "0"), "--iters 0: want 1..1000"},
		{"steps", append(m, "--steps", "0"), "--steps 0 --warmup 2: want steps >= 1"},
		{"watchdog", append(m, "--watchdog", "-1s"), "--watchdog -1s: want > 0"},
		{"size below 4 B per rank", []string{"collective", "--measure", "--ranks", "4", "--sizes", "8", "-o", log}, "--sizes 8 over --ranks 4: size 8 B: want 16 B"},
		{"out directory", []string{"collective", "--measure", "--ranks", "2", "--sizes", "1K", "-o", filepath.Join(dir, "no", "x.txt")}, "directory " + filepath.Join(dir, "no") + " does not exist"},
		{"reference of another collective", append(m, "--op", "allgather", "--reference", arRef), `measured "allreduce", want allgather (--op)`},
		{"reference of other ranks", append(m, "--reference", arRef), "2 ranks, want 4 (--ranks)"},
	}
	checkUsageErrors(t, cases)
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Errorf("%s written by a refused command", log)
	}
	for _, tc := range cases {
		code, _, errs := runCLI(t, tc.args...)
		if n := strings.Count(strings.TrimSpace(errs), "\n"); code != 2 || n != 0 {
			t.Errorf("%s: exit %d, %d extra stderr lines", tc.name, code, n)
		}
	}
	if code, _, errs := runCLI(t, append(m, "--reference", filepath.Join(dir, "missing.txt"))...); code != 2 || !strings.Contains(errs, "--reference "+filepath.Join(dir, "missing.txt")+": no such file") {
		t.Errorf("missing reference: exit %d %q", code, errs)
	}
}

// TestRunFaultWatchdog: tpscope run with rank 3 of 4 CPU ranks never
// issuing L02.attn.allreduce fails (exit 1) with the watchdog's error
// naming the collective and the missing rank, after saying which fault it
// injected; bad --fault-hang values are usage errors before any work.
// The missing ranks are those not yet arrived when a waiting rank's
// watchdog fires: rank 3 always, and on a loaded machine possibly a peer
// whose goroutine has not been scheduled within the 300 ms, so the check
// is that rank 3 is among them, not that it is alone.
func TestRunFaultWatchdog(t *testing.T) {
	code, _, errs := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--batch", "2", "--context", "64",
		"--steps", "2", "--warmup", "1", "--trace", "none", "--watchdog", "300ms", "--fault-hang", "3:L02.attn.allreduce")
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	for _, want := range []string{
		"injected fault: rank 3 never issues op L02.attn.allreduce (from step 0), for at most 900ms",
		"allreduce L02.attn.allreduce over ranks [0 1 2 3]", "which never arrived (collective watchdog",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	m := regexp.MustCompile(`rank ([0-2]) waited 300ms for rank\(s\) \[([0-3 ]+)\], which never arrived`).FindStringSubmatch(errs)
	if m == nil || !slices.Contains(strings.Fields(m[2]), "3") || slices.Contains(strings.Fields(m[2]), m[1]) {
		t.Errorf("stderr does not name rank 3 among the ranks a waiting rank missed for 300ms:\n%s", errs)
	}
	base := []string{"run", "--model", "tiny-mla-moe", "--tp", "4", "--trace", "none"}
	checkUsageErrors(t, []usageCase{
		{"not RANK:OP", append(base, "--fault-hang", "L02.attn.allreduce"), `--fault-hang "L02.attn.allreduce": want RANK:OP_ID`},
		{"unknown op", append(base, "--fault-hang", "1:L09.attn.allreduce"), `op "L09.attn.allreduce": rank 1 has no op with that ID`},
		{"not a collective", append(base, "--fault-hang", "1:L00.attn.o_proj"), "is a gemm over 1 rank(s): want a collective with peers"},
		{"rank out of range", append(base, "--fault-hang", "4:L00.attn.allreduce"), "rank 4: not a rank this run executes"},
		{"rank not local", append(base, "--local-ranks", "0", "--fault-hang", "1:L00.attn.allreduce"), "rank 1: not a rank this run executes (local ranks [0])"},
		{"step without fault", append(base, "--fault-step", "1"), "--fault-step: needs --fault-hang"},
		{"negative step", append(base, "--fault-hang", "1:L00.attn.allreduce", "--fault-step", "-1"), "--fault-step -1: want 0 or more"},
		{"step after the run", append(base, "--fault-hang", "1:L00.attn.allreduce", "--fault-step", "12"), "--fault-step 12: the run has 12 steps"},
		{"negative watchdog", append(base, "--watchdog", "-2s"), "--watchdog -2s: want > 0"},
	})
}

// TestCollectiveMeasureFormats: each --output format of collective holds
// the measured table too (checkFormat: JSON, one CSV table, a markdown
// table, text).
func TestCollectiveMeasureFormats(t *testing.T) {
	for _, f := range allFormats {
		t.Run(f, func(t *testing.T) {
			code, out, errs := runCLI(t, "collective", "--measure", "--ranks", "2", "--sizes", "512:2K", "--steps", "1", "--warmup", "0", "--iters", "1", "--output", f)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			checkFormat(t, f, out)
			if f != formatJSON && !strings.Contains(out, "measured_us") {
				t.Errorf("no measured column:\n%s", out)
			}
		})
	}
}

// TestCollectiveMeasureCPUNoBox: CPU ranks are no GPU box, so without
// --topo no prediction is set beside their times (no predicted columns,
// no predicted rows or errors in the JSON, one line saying so); with
// --topo the box's prediction is there (TestCollectiveMeasureCPU).
func TestCollectiveMeasureCPUNoBox(t *testing.T) {
	args := []string{"collective", "--measure", "--backend", "cpu", "--ranks", "2", "--op", "allgather", "--sizes", "512:2K", "--iters", "1", "--steps", "1", "--warmup", "0"}
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, "predicted") || strings.Contains(out, "rtxpro6000") || strings.Contains(out, "error") ||
		!strings.Contains(out, "no prediction beside it: the cpu backend's ranks are no GPU box (--topo names one to compare against)\n") {
		t.Errorf("table compares CPU ranks with a box, or does not say it does not:\n%s", out)
	}
	code, out, errs = runCLI(t, append(args, "--output", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res map[string]json.RawMessage
	var mj measuredJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &mj); err != nil {
		t.Fatal(err)
	}
	_, topo := res["topology"]
	_, rows := res["rows"]
	if topo || rows || len(mj.Measured.Rows) != 3 {
		t.Fatalf("JSON: topology %v, predicted rows %v, %d measured rows; want no box, no predictions and 3 sizes", topo, rows, len(mj.Measured.Rows))
	}
	for _, r := range mj.Measured.Rows {
		if r.PredictedUs != nil || r.ErrPct != nil || !(r.TimeUs > 0) {
			t.Errorf("row %+v: want a measured time and no prediction", r)
		}
	}
}

// TestCollectiveMeasureCPURanksOfNoBox: without --topo the cpu backend's
// ranks are goroutines, which no box's GPU count bounds or sets: --ranks
// 10 had been refused as "topology rtxpro6000-2s has 8 GPUs", a box the
// command never named, and --ranks left out measured that box's 8. It is
// now asked for, and bounded by what the executor's benchmark runs. One
// rank is refused naming --ranks, as a prediction of one is, where the
// line had named --sizes ("--sizes 1024 over --ranks 1").
func TestCollectiveMeasureCPURanksOfNoBox(t *testing.T) {
	m := []string{"collective", "--measure", "--backend", "cpu", "--sizes", "1K", "--iters", "1", "--steps", "1", "--warmup", "0"}
	checkUsageErrors(t, []usageCase{
		{"ranks left out", m, "--ranks: --measure on the cpu backend without --topo runs goroutine ranks, no box's GPUs: name how many (2 to 4096), or the box with --topo"},
		{"more ranks than the benchmark runs", append(slices.Clone(m), "--ranks", "5000"), "--ranks 5000: the cpu backend runs 2 to 4096 goroutine ranks"},
		{"one rank", append(slices.Clone(m), "--ranks", "1"), "--ranks 1: a collective of one rank moves no bytes between GPUs"},
		{"more ranks than the named box", append(slices.Clone(m), "--ranks", "10", "--topo", "h200-nvswitch"), "--ranks 10: topology h200-nvswitch has 8 GPUs"},
	})
	code, out, errs := runCLI(t, append(slices.Clone(m), "--ranks", "10", "--output", "json")...)
	if code != 0 {
		t.Fatalf("--ranks 10: exit %d: %s", code, errs)
	}
	var mj measuredJSON
	if err := json.Unmarshal([]byte(out), &mj); err != nil {
		t.Fatal(err)
	}
	if mj.Ranks != 10 || len(mj.Measured.Rows) != 1 {
		t.Errorf("--ranks 10: %d ranks, %d rows: want 10 goroutine ranks and one size", mj.Ranks, len(mj.Measured.Rows))
	}
}
