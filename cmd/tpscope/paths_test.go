package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/topology"
)

// pathCase is a command line whose input or output path a flag names is
// refused before any work: exit 2, one line on stderr holding every want,
// nothing on stdout (the verb printed no result), and none of the paths
// in absent created. In args, want and absent "@" stands for the case's
// temporary directory, which holds dir/ (an empty directory) and file (a
// file).
type pathCase struct {
	name   string
	args   []string
	want   []string
	absent []string
}

// The files the cases read that are there and fine: a trace of the tiny
// model on four CPU ranks and an nccl-tests log of the same box.
var (
	goodTrace = filepath.Join(cpuRanksDir, "cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz")
	goodLog   = filepath.Join(cpuRanksDir, "cpu4-all_reduce_perf.txt")
)

func checkPathCases(t *testing.T, cases []pathCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			at := func(s string) string { return strings.ReplaceAll(s, "@", dir+string(filepath.Separator)) }
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = at(a)
			}
			code, stdout, stderr := runCLI(t, args...)
			if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
				t.Fatalf("exit %d, stdout %q, stderr %q: want exit 2, no output and one line", code, stdout, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, at(w)) {
					t.Errorf("stderr %q lacks %q", stderr, at(w))
				}
			}
			for _, p := range c.absent {
				if _, err := os.Stat(at(p)); err == nil {
					t.Errorf("%s was created", at(p))
				}
			}
		})
	}
}

// TestInputFlagMissingFile: each flag that names a file or directory to
// read refuses one that is not there, or a directory where it reads a
// file, naming the flag and the path (exit 2), before any work: the output
// a command writes is not written, and with several inputs the good ones
// are not read first (nothing printed).
func TestInputFlagMissingFile(t *testing.T) {
	checkPathCases(t, []pathCase{
		{"compare --trace", []string{"compare", "--trace", "@none.json"}, []string{"--trace @none.json: no such file"}, nil},
		{"compare argument", []string{"compare", "@none.json"}, []string{"@none.json: no such file"}, nil},
		{"compare --trace: the second missing", []string{"compare", "--trace", goodTrace, "--trace", "@none.json"}, []string{"--trace @none.json: no such file"}, nil},
		{"compare --trace empty directory", []string{"compare", "--trace", "@dir"}, []string{"--trace", "@dir", "no *.json"}, nil},
		{"calibrate --trace", []string{"calibrate", "--trace", "@none.json", "-o", "@cal.json"}, []string{"--trace @none.json: no such file"}, []string{"@cal.json"}},
		{"report --trace", []string{"report", "--trace", "@none.json", "-o", "@r.html"}, []string{"--trace @none.json: no such file"}, []string{"@r.html"}},
		{"trace read --trace", []string{"trace", "read", "--trace", "@none.json"}, []string{"--trace @none.json: no such file"}, nil},
		{"trace read: the second argument missing", []string{"trace", "read", goodTrace, "@none.json"}, []string{"@none.json: no such file"}, nil},
		{"calibrate --nccl-tests", []string{"calibrate", "--nccl-tests", "@none.txt", "-o", "@cal.json"}, []string{"--nccl-tests @none.txt: no such file"}, []string{"@cal.json"}},
		{"calibrate --nccl-tests directory", []string{"calibrate", "--nccl-tests", "@dir", "-o", "@cal.json"}, []string{"--nccl-tests @dir: a directory, want an nccl-tests log"}, []string{"@cal.json"}},
		{"collective --reference", []string{"collective", "--measure", "--ranks", "2", "--sizes", "1K", "--reference", "@none.txt", "-o", "@m.txt"},
			[]string{"--reference @none.txt: no such file"}, []string{"@m.txt"}},
		{"report --from", []string{"report", "--from", "@none.json", "-o", "@r.html"}, []string{"--from @none.json: no such file"}, []string{"@r.html"}},
		{"report --from directory", []string{"report", "--from", "@dir", "-o", "@r.html"}, []string{"--from @dir: a directory"}, []string{"@r.html"}},
		{"simulate --requests-file", []string{"simulate", "--qps", "1", "--requests-file", "@none.jsonl"}, []string{"--requests-file @none.jsonl: no such file"}, nil},
		{"simulate --requests-file directory", []string{"simulate", "--qps", "1", "--requests-file", "@dir"}, []string{"--requests-file @dir: a directory"}, nil},
		{"predict --perf-db", []string{"predict", "--perf-db", "@none"}, []string{"--perf-db @none: no such file"}, nil},
		{"plan --perf-db", []string{"plan", "--perf-db", "@none", "--plan", "tp8", "--batch", "1", "--context", "4096"}, []string{"--perf-db @none: no such file"}, nil},
		{"compare --perf-db", []string{"compare", "--trace", goodTrace, "--perf-db", "@none"}, []string{"--perf-db @none: no such file"}, nil},
		{"predict --topo", []string{"predict", "--topo", "@none.json"}, []string{"--topo @none.json", "no such file"}, nil},
		{"collective --topo", []string{"collective", "--topo", "@none.json"}, []string{"--topo", "@none.json", "no such file"}, nil},
		{"topo show argument", []string{"topo", "show", "@none.json", "-o", "@copy.json"}, []string{"@none.json", "no such file"}, []string{"@copy.json"}},
		// A value that reads as a path (a separator, a .json ending) and is
		// not there is a missing file, not an unknown preset; a bare word
		// is a name, and the presets are what it wants.
		{"predict --model", []string{"predict", "--model", "@none"}, []string{"--model @none: no such file"}, nil},
		{"predict --model in a missing directory", []string{"predict", "--model", "@missing/config.json"}, []string{"--model @missing/config.json: no such file"}, nil},
		{"predict --model name.json", []string{"predict", "--model", "nope.json"}, []string{"--model nope.json: no such file"}, nil},
		// A preset's Hugging Face id is not there as a path either: the
		// line names the preset to pass.
		{"predict --model a preset's Hugging Face id", []string{"predict", "--model", "deepseek-ai/DeepSeek-V3"},
			[]string{"--model deepseek-ai/DeepSeek-V3: no such file", "preset deepseek-v3's checkpoint: pass --model deepseek-v3"}, nil},
		{"predict --draft-model a preset's Hugging Face id", []string{"predict", "--model", "kimi-k2.5", "--spec", "draft", "--draft-model", "nvidia/Kimi-K2.5-NVFP4"},
			[]string{"--draft-model nvidia/Kimi-K2.5-NVFP4: no such file", "pass --draft-model kimi-k2.5-nvfp4"}, nil},
		// So is a built-in drafter's (the README promises it for
		// --draft-model): the line named no drafter.
		{"predict --draft-model a built-in drafter's Hugging Face id", []string{"predict", "--model", "kimi-k2.5", "--spec", "eagle3", "--draft-model", "lightseekorg/kimi-k2.5-eagle3-mla"},
			[]string{"--draft-model lightseekorg/kimi-k2.5-eagle3-mla: no such file", "built-in drafter kimi-k2.5-eagle3-mla's checkpoint: pass --draft-model kimi-k2.5-eagle3-mla"}, nil},
		{"predict --draft-model a built-in drafter's local checkout", []string{"predict", "--model", "kimi-k2.5", "--spec", "draft", "--draft-model", "@models/moonshotai/Moonlight-16B-A3B-Instruct"},
			[]string{"no such file", "built-in drafter moonlight-16b-a3b's checkpoint: pass --draft-model moonlight-16b-a3b"}, nil},
		{"predict --model a bare name", []string{"predict", "--model", "nope"}, []string{"--model", "unknown model \"nope\"", "want a preset"}, nil},
		{"predict --draft-model name.json", []string{"predict", "--model", "deepseek-v3", "--spec", "draft", "--draft-model", "nope.json"}, []string{"--draft-model nope.json: no such file"}, nil},
		{"predict --draft-model in a missing directory", []string{"predict", "--model", "deepseek-v3", "--spec", "draft", "--draft-model", "@missing/config.json"}, []string{"--draft-model @missing/config.json: no such file"}, nil},
		{"predict --draft-model a bare name", []string{"predict", "--model", "deepseek-v3", "--spec", "draft", "--draft-model", "nope"}, []string{"--draft-model nope", "unknown draft model"}, nil},
		{"predict --model directory without config.json", []string{"predict", "--model", "@dir"}, []string{"--model @dir/config.json: no such file"}, nil},
		{"model load argument", []string{"model", "load", "@none"}, []string{"@none: no such file"}, nil},
	})
}

// TestOutputFlagMissingDirectory: each flag that names a file to write
// (or verdict's directory) refuses one whose directory is not there, or a
// directory where it writes a file, naming the flag (exit 2) before any
// work: the verb printed nothing (no prediction, fit, measurement or
// table), discovered nothing and created no directory.
func TestOutputFlagMissingDirectory(t *testing.T) {
	called := false
	old := discover
	t.Cleanup(func() { discover = old })
	discover = func() (*topology.Topology, *topology.Probe, error) {
		called = true
		return old()
	}
	checkPathCases(t, []pathCase{
		{"predict --plot", []string{"predict", "--plot", "@no/p.png"}, []string{"--plot @no/p.png: directory @no does not exist"}, []string{"@no"}},
		{"advise --plot", []string{"advise", "--no-sweep", "--plot", "@no/a.svg"}, []string{"--plot @no/a.svg: directory @no does not exist"}, nil},
		{"plan --plot", []string{"plan", "--plan", "tp8", "--batch", "1", "--context", "4096", "--plot", "@no/p.png"}, []string{"--plot @no/p.png: directory @no"}, nil},
		{"compare --plot", []string{"compare", "--trace", goodTrace, "--plot", "@no/c.png"}, []string{"--plot @no/c.png: directory @no"}, nil},
		{"simulate --plot", []string{"simulate", "--qps", "1", "--requests", "10", "--plot", "@no/s.png"}, []string{"--plot @no/s.png: directory @no"}, nil},
		{"calibrate --nccl-tests -o", []string{"calibrate", "--nccl-tests", goodLog, "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"), "-o", "@no/cal.json"},
			[]string{"-o @no/cal.json: directory @no does not exist"}, nil},
		{"calibrate --backend cpu -o", []string{"calibrate", "--backend", "cpu", "-o", "@no/cal.json"}, []string{"-o @no/cal.json: directory @no"}, nil},
		{"calibrate -o a directory", []string{"calibrate", "--nccl-tests", goodLog, "-o", "@dir"}, []string{"-o @dir: a directory, want a file"}, nil},
		{"report -o", []string{"report", "--model", "tiny-mla-moe", "--tp", "2", "-o", "@no/r.html"}, []string{"-o @no/r.html: directory @no"}, nil},
		{"topo show -o", []string{"topo", "show", "rtxpro6000-2s", "-o", "@no/t.json"}, []string{"-o @no/t.json: directory @no"}, nil},
		{"topo discover -o", []string{"topo", "discover", "-o", "@no/box.json"}, []string{"-o @no/box.json: directory @no"}, nil},
		{"topo discover --probe-out", []string{"topo", "discover", "--probe-out", "@no/probe.json"}, []string{"--probe-out @no/probe.json: directory @no"}, nil},
		{"collective --measure -o", []string{"collective", "--measure", "--ranks", "2", "--sizes", "1K", "-o", "@no/m.txt"}, []string{"-o @no/m.txt: directory @no"}, nil},
		{"run --trace file:", []string{"run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--steps", "1", "--warmup", "0", "--trace", "file:@no/t.jsonl"},
			[]string{"--trace @no/t.jsonl: directory @no"}, nil},
		{"verdict -o with a missing parent", []string{"verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"),
			"--steps", "1", "--warmup", "0", "-o", "@no/sub/traces"}, []string{"-o @no/sub/traces: directory @no/sub does not exist"}, []string{"@no"}},
		{"verdict -o a file", []string{"verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"),
			"--steps", "1", "--warmup", "0", "-o", "@file"}, []string{"-o @file: not a directory"}, nil},
	})
	if called {
		t.Error("topo discover read the box although its output could not be written")
	}
}

// TestOutputIsNotAnInput: a file a verb writes may not be one it reads
// its measurements from. calibrate --trace t.jsonl -o t.jsonl had fitted
// the trace and written the calibrated box over it ("wrote t.jsonl",
// exit 0): the measurement was gone. Each such command line is refused in
// one line naming both flags before any work, and the input is untouched;
// the same file under another name (./t, a link) is the same file.
func TestOutputIsNotAnInput(t *testing.T) {
	dir := t.TempDir()
	copyTo := func(src, name string) string {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	trace, log := copyTo(goodTrace, "t.otlp.jsonl.gz"), copyTo(goodLog, "all_reduce_perf.txt")
	bench := copyTo(dsr1Dir+"conc16.json", "conc16.json")
	link := filepath.Join(dir, "link.txt")
	if err := os.Symlink(log, link); err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, p := range []string{trace, log, bench} {
		before[p], _ = os.ReadFile(p)
	}
	sameDir := filepath.Join(dir, ".", filepath.Base(trace))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"calibrate --trace", []string{"calibrate", "--trace", trace, "-o", sameDir}, "-o " + sameDir + ": the file --trace reads"},
		{"calibrate --holdout", []string{"calibrate", "--trace", goodTrace, "--holdout", trace, "-o", trace}, "-o " + trace + ": the file --holdout reads"},
		{"calibrate --nccl-tests through a link", []string{"calibrate", "--nccl-tests", log, "-o", link}, "-o " + link + ": the file --nccl-tests reads"},
		{"calibrate --serving", append([]string{"calibrate", "--serving", bench, "-o", bench}, dsr1Run...), "-o " + bench + ": the file --serving reads"},
		{"collective --reference", []string{"collective", "--measure", "--backend", "cpu", "--ranks", "4", "--sizes", "512", "--reference", log, "-o", log}, "-o " + log + ": the file --reference reads"},
		{"simulate --frontier", []string{"simulate", "--compare", bench, "--frontier", bench}, "--frontier " + bench + ": the file --compare reads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 || stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, stdout, stderr, c.want)
			}
		})
	}
	for p, b := range before {
		if got, _ := os.ReadFile(p); string(got) != string(b) {
			t.Errorf("%s was written over", p)
		}
	}
}
