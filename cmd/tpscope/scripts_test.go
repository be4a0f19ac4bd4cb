package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/calibrate/nccltests"
)

// envAsCLI makes the test binary run as the tpscope command (dispatch on
// its arguments) instead of running tests, so scripts can call it as
// $BIN/tpscope without a separate build.
const envAsCLI = "TPSCOPE_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(envAsCLI) == "1" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// cliBin returns a directory holding "tpscope": this test binary, which
// runs as the command when envAsCLI is set.
func cliBin(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, "tpscope")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
}

// TestBenchScriptsSyntax: the GPU scripts parse (bash -n; python3's compiler),
// and the multi-GPU script refuses a missing N or an unknown phase with
// exit 2 before doing anything.
func TestBenchScriptsSyntax(t *testing.T) {
	needTools(t, "bash")
	for _, s := range []string{"gpu-multi.sh", "gpu-validate.sh", "gpu-moe-helpers.sh"} {
		if out, err := exec.Command("bash", "-n", filepath.Join("..", "..", "scripts", s)).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
	for _, args := range [][]string{nil, {"x"}, {"4", "benchmark"}} {
		cmd := exec.Command("bash", append([]string{filepath.Join("..", "..", "scripts", "gpu-multi.sh")}, args...)...)
		cmd.Env = append(os.Environ(), "OUT="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "usage") && !strings.Contains(string(out), "unknown phase") {
			t.Errorf("gpu-multi.sh %q: %v\n%s", args, err, out)
		}
	}
	if _, err := exec.LookPath("python3"); err == nil {
		cmd := exec.Command("python3", "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", filepath.Join("..", "..", "scripts", "gpu-collectives-torch.py"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("gpu-collectives-torch.py does not parse: %v\n%s", err, out)
		}
	}
}

// TestBenchTorchHarnessFormat: the PyTorch reference harness's nccl-tests
// output (here its --selftest-format log, made-up times of 10 us + 1 us
// per kB, no torch needed) reads back through tpscope's parser as the same
// collective, 8 ranks and sizes 512 B to 4 KiB, with the times in the
// column the harness puts them (all-reduce in place, the others out of
// place) and nccl-tests' bandwidths: algbw = bytes / 1e3 / time, busbw =
// algbw x 2 x 7/8 (all-reduce) or 7/8, to the format's two decimals.
func TestBenchTorchHarnessFormat(t *testing.T) {
	needTools(t, "python3")
	for _, op := range []string{"allreduce", "allgather", "reducescatter", "alltoall"} {
		t.Run(op, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "torch.txt")
			cmd := exec.Command("python3", filepath.Join("..", "..", "scripts", "gpu-collectives-torch.py"), "--selftest-format", path, "--op", op, "--nprocs", "8", "--sizes", "512:4K")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			lg, err := nccltests.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if lg.Op != op || lg.Ranks != 8 || len(lg.Rows) != 4 || lg.Skipped != 0 || len(lg.Warnings) != 0 {
				t.Fatalf("op %q ranks %d rows %d skipped %d warnings %v", lg.Op, lg.Ranks, len(lg.Rows), lg.Skipped, lg.Warnings)
			}
			factor := 7.0 / 8
			if op == "allreduce" {
				factor = 2 * 7.0 / 8
			}
			for i, r := range lg.Rows {
				b := int64(512) << i
				want := 10 + float64(b)/1000
				tm, alg, bus := r.OutTimeUs, r.OutAlgBWGBps, r.OutBusBWGBps
				if op == "allreduce" {
					tm, alg, bus = r.InTimeUs, r.InAlgBWGBps, r.InBusBWGBps
				}
				if r.Bytes != b || r.Count != b/2 || r.Type != "bfloat16" || absDiff(tm, want) > 0.005 ||
					absDiff(alg, float64(b)/1e3/want) > 0.005 || absDiff(bus, factor*float64(b)/1e3/want) > 0.005 || len(r.Times()) != 1 {
					t.Errorf("row %d: %+v (want %d B in %.3f us)", i, r, b, want)
				}
			}
		})
	}
}

func absDiff(a, b float64) float64 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestBenchGPUMultiScriptCPU rehearses scripts/gpu-multi.sh on CPU goroutine
// ranks (BACKEND=cpu: 2 ranks, tiny-mla-moe, 512 B to 16 KiB), with this
// test binary as $BIN/tpscope: every phase must run without a failed step
// and leave its files, no more than the device tool's 8: the executor's
// nccl-tests log of each collective (6 sizes, 2 ranks, readable by the
// parser), the two traced runs (graphs and eager; NCCL's defaults only,
// since goroutine ranks run no NCCL and run refuses its settings there)
// each compared per kind with the collectives among the kinds and
// calibrated with a held-out line, the kept trace, and the fault check
// passed (the watchdog ended a run whose rank 1 never entered a
// collective).
func TestBenchGPUMultiScriptCPU(t *testing.T) {
	needTools(t, "bash", "timeout", "tar", "gzip", "stat")
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "gpu-multi.sh"), "2")
	cmd.Env = append(os.Environ(), envAsCLI+"=1", "BACKEND=cpu", "BIN="+cliBin(t), "OUT="+out, "CAL_MS=50",
		"SIZES=512:16K", "BENCH_STEPS=2", "ITERS=2", "RUN_STEPS=4", "BATCHES=8", "LIMIT=120")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		t.Fatalf("gpu-multi.sh: %v\n%s", err, log.String())
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"collectives.md", "collectives.tar.gz", "discover.json", "env.txt", "fault.txt", "log.txt", "steps.md", "traces.tar"}
	if !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if l := read("log.txt"); !strings.Contains(l, ": 0 failed step(s)") {
		t.Errorf("log.txt does not end with 0 failed steps:\n%s", l)
	}

	logs := untar(t, filepath.Join(out, "collectives.tar.gz"), true)
	for op, bin := range map[string]string{"allreduce": "all_reduce_perf", "allgather": "all_gather_perf", "reducescatter": "reduce_scatter_perf", "alltoall": "alltoall_perf"} {
		name := "exec-eager-" + bin + ".txt"
		lg, err := nccltests.Parse(bytes.NewReader(logs[name]), name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if lg.Op != op || lg.Ranks != 2 || len(lg.Rows) != 6 {
			t.Errorf("%s: op %q ranks %d rows %d", name, lg.Op, lg.Ranks, len(lg.Rows))
		}
	}

	steps := read("steps.md")
	for _, run := range []string{"b8-graph-default", "b8-eager-default"} {
		name := "tiny-mla-moe-tp2-" + run
		for _, want := range []string{"## run " + name, "## compare " + name, "## calibrate " + name} {
			if !strings.Contains(steps, want+"\n") && !strings.Contains(steps, want+" ") {
				t.Errorf("steps.md lacks %q", want)
			}
		}
	}
	// Each calibration is judged on its held-out steps: written (the
	// held-out line) or refused as worse than the prior (which of the two
	// depends on this machine's timings, CPU ranks time-sharing its cores).
	written := strings.Count(steps, "held-out odd steps (2):")
	refused := strings.Count(steps, "refused: the calibrated box predicts the held-out steps worse")
	if written+refused != 2 {
		t.Errorf("%d held-out lines and %d refusals in steps.md, want 2 together (one per trace)", written, refused)
	}
	if n := strings.Count(steps, "| collective | 10 |"); n < 4 {
		t.Errorf("%d per-kind collective rows in steps.md, want one per run and per compare (4)", n)
	}
	if strings.Contains(steps, "-LL") {
		t.Errorf("steps.md holds an LL run: goroutine ranks run no NCCL")
	}
	if traces := untar(t, filepath.Join(out, "traces.tar"), false); len(traces) != 1 || traces["tiny-mla-moe-tp2-b8-graph-default.otlp.jsonl.gz"] == nil {
		t.Errorf("traces.tar holds %d files, want the graph-default trace", len(traces))
	}
	if f := read("fault.txt"); !strings.HasPrefix(f, "fault eager: PASS") || !strings.Contains(f, "which never arrived (collective watchdog") {
		t.Errorf("fault.txt:\n%s", f)
	}
}

// untar reads a tar (gzipped when zipped) into name -> content.
func untar(t *testing.T, path string, zipped bool) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if zipped {
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	tr := tar.NewReader(r)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}
