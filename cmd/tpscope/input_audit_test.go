package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestFloatFlagsRefuseNonFinite: every float flag of every verb refuses
// NaN, the infinities and a number past float64's range, as a usage error
// of one line naming the flag, before any work: a NaN passed range checks
// written as "x <= lo || x >= hi" (advise --threshold NaN ranked entries
// against a NaN threshold; model show --gpu-mem-gb Inf printed a KV
// capacity of -9223372036854775808 tokens).
func TestFloatFlagsRefuseNonFinite(t *testing.T) {
	n := 0
	for _, v := range verbs {
		bindFlags(v).VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() != "float64" {
				return
			}
			for _, val := range []string{"NaN", "Inf", "-Inf", "1e400"} {
				n++
				args := append(strings.Fields(v.Name()), "--"+f.Name, val)
				code, stdout, stderr := runCLI(t, args...)
				want := `invalid argument "` + val + `" for "--` + f.Name + `" flag: want a finite number`
				if code != 2 || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 || stdout != "" {
					t.Errorf("%s: exit %d, stdout %d bytes, stderr %q; want exit 2 and one line with %q", strings.Join(args, " "), code, len(stdout), stderr, want)
				}
			}
		})
	}
	if n < 4*10 {
		t.Errorf("%d cases: want the float flags of advise, model show, plan, simulate, run and verdict", n)
	}
}

// TestModelArgumentAndFlagRefused: model show's argument and --model name
// the same thing, and model load's model is its argument: a --model beside
// them was dropped without a word ('model show deepseek-v3 --model glm-5'
// showed deepseek-v3; 'model load DIR --model deepseek-v3' showed DIR).
func TestModelArgumentAndFlagRefused(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"show", []string{"model", "show", "deepseek-v3", "--model", "glm-5"}, `--model glm-5: the argument "deepseek-v3" names the model too: give it once`},
		{"load", []string{"model", "load", "../../serving/testdata/models/glm-5-fp8", "--model", "deepseek-v3"},
			"--model deepseek-v3: model load reads the model from DIR_OR_FILE (../../serving/testdata/models/glm-5-fp8): leave --model out"},
	})
	// Each alone still works.
	for _, args := range [][]string{{"model", "show", "--model", "glm-5"}, {"model", "show", "glm-5"}, {"model", "load", "../../serving/testdata/models/glm-5-fp8"}} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}

// TestVerdictRefusesUnrealizedFlagsBeforeOut: verdict refuses a flag its
// backend would run without (NCCL's settings and CUDA graphs on the cpu
// backend) before it makes -o: the refusal came once the baseline was
// prepared, after the directory was made, leaving an empty one behind.
func TestVerdictRefusesUnrealizedFlagsBeforeOut(t *testing.T) {
	for _, flag := range [][]string{{"--nccl-proto", "LL"}, {"--p2p-level", "SYS"}, {"--cuda-graphs"}, {"--graph-sizes", "1,2"}} {
		t.Run(flag[0], func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "traces")
			args := append([]string{"verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "64",
				"--steps", "1", "--warmup", "0", "--topo", "testdata/cpu-ranks/cpu-4r.json", "--entries", "fp8-kv", "-o", out}, flag...)
			code, _, stderr := runCLI(t, args...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, flag[0]) || !strings.Contains(stderr, "the cpu backend") {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line naming %s and the cpu backend", code, stderr, flag[0])
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("-o %s was made", out)
			}
		})
	}
}

// TestSimulateTimelineWhereDrawn: --timeline N sizes the timeline table,
// which simulate draws for one simulated run in the table or markdown
// output; elsewhere it was accepted and sized nothing (two loads, a
// search, --compare, --output json printed the same with and without it).
func TestSimulateTimelineWhereDrawn(t *testing.T) {
	result := "../../serving/testdata/bench/generated/vllm-detailed.json"
	checkUsageErrors(t, []usageCase{
		{"two loads", []string{"simulate", "--qps", "1,2", "--requests", "20", "--timeline", "5"}, "--timeline 5: 2 runs, and the timeline is drawn for one simulated run"},
		{"json", []string{"simulate", "--qps", "1", "--requests", "20", "--timeline", "5", "--output", "json"}, "--timeline 5: --output json carries every window"},
		{"search", []string{"simulate", "--sweep-qps", "--slo-ttft-ms", "2000", "--requests", "20", "--timeline", "5"}, "--timeline 5: a search runs many loads"},
		{"compare", []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--compare", result, "--timeline", "5"}, "--timeline 5: --compare simulates each measured level"},
	})
	// One run draws it, with as many rows as asked at most; 0 draws none
	// anywhere.
	code, out, stderr := runCLI(t, "simulate", "--qps", "1", "--requests", "20", "--timeline", "3")
	if code != 0 || !strings.Contains(out, "timeline (time-weighted means per window)") {
		t.Errorf("one run: exit %d, stderr %q, timeline table missing:\n%s", code, stderr, out)
	}
	for _, args := range [][]string{{"--qps", "1,2"}, {"--qps", "1", "--output", "json"}} {
		if code, _, stderr := runCLI(t, append([]string{"simulate", "--requests", "20", "--timeline", "0"}, args...)...); code != 0 {
			t.Errorf("%v --timeline 0: exit %d: %s", args, code, stderr)
		}
	}
}

// TestRepeatedFlagRefused: a flag of one value given twice is refused
// naming the flag and both values, before any work; pflag kept the last
// ('predict --tp 8 --tp 4' predicted tp4 without a word). List flags
// take a value per use.
func TestRepeatedFlagRefused(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "p.svg")
	checkUsageErrors(t, []usageCase{
		{"int", []string{"predict", "--tp", "8", "--tp", "4", "--plot", plot}, `invalid argument "4" for "--tp" flag: given twice (first 8): give it once`},
		{"string", []string{"simulate", "--qps", "1", "--qps", "2"}, `invalid argument "2" for "--qps" flag: given twice (first 1): give it once`},
		{"bool", []string{"schedule", "--ep", "--ep=false"}, `invalid argument "false" for "--ep" flag: given twice (first true): give it once`},
		{"float", []string{"advise", "--threshold", "0.1", "--threshold", "0.2"}, `invalid argument "0.2" for "--threshold" flag: given twice (first 0.1): give it once`},
		{"count", []string{"predict", "--context", "4K", "--context", "8K"}, `invalid argument "8K" for "--context" flag: given twice (first 4096): give it once`},
		{"option", []string{"predict", "--nccl-proto", "LL", "--nccl-proto", "Simple"}, `for "--nccl-proto" flag: given twice (first LL): give it once`},
		{"empty first", []string{"advise", "--compare-topos=", "--compare-topos", "h200-nvswitch"}, `for "--compare-topos" flag: given twice (first ""): give it once`},
	})
	if _, err := os.Stat(plot); err == nil {
		t.Errorf("--plot %s was written", plot)
	}
	// Lists still take several.
	code, _, stderr := runCLI(t, "plan", "--tp", "4", "--tp", "8", "--batch", "1", "--context", "4096", "--output", "json")
	if code != 0 {
		t.Errorf("plan --tp 4 --tp 8: exit %d: %s", code, stderr)
	}
}

// TestTopoShowP2PFlags: topo show takes NCCL's P2P settings as predict
// does: --p2p-disable and --p2p-level together are refused (one of them
// was dropped), and neither goes with --output dot, the link graph they
// do not change (it printed the same graph with and without them).
func TestTopoShowP2PFlags(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"both", []string{"topo", "show", "h200-nvswitch", "--p2p-level", "NVL", "--p2p-disable"},
			"--p2p-disable and --p2p-level NVL: give one: NCCL_P2P_DISABLE=1 turns P2P off at every level"},
		{"dot level", []string{"topo", "show", "rtxpro6000-2s", "--output", "dot", "--p2p-level", "SYS"},
			"--p2p-level: --output dot draws the link graph, which NCCL's P2P settings do not change"},
		{"dot disable", []string{"topo", "show", "rtxpro6000-2s", "--output", "dot", "--p2p-disable"},
			"--p2p-disable: --output dot draws the link graph, which NCCL's P2P settings do not change"},
	})
	// Each alone shapes the table.
	_, plain, _ := runCLI(t, "topo", "show", "rtxpro6000-2s")
	for _, f := range [][]string{{"--p2p-level", "SYS"}, {"--p2p-disable"}} {
		code, out, stderr := runCLI(t, append([]string{"topo", "show", "rtxpro6000-2s"}, f...)...)
		if code != 0 || out == plain {
			t.Errorf("%v: exit %d (%s), output the same as without it: %v", f, code, stderr, out == plain)
		}
	}
}

// TestTraceSourceGivenTwice: trace read refuses a source named twice (as
// an argument and by --trace, or by another spelling of its path), as
// compare does: it read and listed the trace twice. compare's check sees
// the other spelling too.
func TestTraceSourceGivenTwice(t *testing.T) {
	tr := "testdata/cpu-ranks/cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz"
	checkUsageErrors(t, []usageCase{
		{"argument and --trace", []string{"trace", "read", tr, "--trace", tr}, "trace source " + tr + ": given twice (by --trace or as an argument): give each trace once"},
		{"two spellings", []string{"trace", "read", tr, "./" + tr}, "trace source ./" + tr + ": given twice"},
		{"compare two spellings", []string{"compare", "--trace", tr, "--trace", "./" + tr}, "--trace ./" + tr + ": given twice: give each trace once"},
	})
}

// TestTopWithAllRowsOutput: compare's and plan's --top N limits the rows
// of the table and markdown output; with --output json or csv, which
// carry every row, it was accepted and changed nothing.
func TestTopWithAllRowsOutput(t *testing.T) {
	tr := "testdata/cpu-ranks/cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz"
	checkUsageErrors(t, []usageCase{
		{"compare json", []string{"compare", "--trace", tr, "--topo", "testdata/cpu-ranks/cpu-4r.json", "--top", "3", "--output", "json"},
			"--top 3: --output json carries every compared op of every scenario; the flag limits the table and markdown rows"},
		{"plan csv", []string{"plan", "--plan", "tp8", "--batch", "1", "--context", "4096", "--top", "1", "--output", "csv"},
			"--top 1: --output csv carries every point of the sweep"},
	})
	// --top 0 (all) agrees with them; the table takes any.
	for _, args := range [][]string{{"--top", "0", "--output", "json"}, {"--top", "1"}} {
		if code, _, stderr := runCLI(t, append([]string{"plan", "--plan", "tp8", "--batch", "1", "--context", "4096"}, args...)...); code != 0 {
			t.Errorf("plan %v: exit %d: %s", args, code, stderr)
		}
	}
}

// TestErrorLineWithControlCharacters: a value the user gave is echoed in
// the error, and one with a newline, a carriage return or a tab in it
// (found by fuzzing --topo's box descriptions) made the error several
// lines; each such character is shown escaped, on the one line.
func TestErrorLineWithControlCharacters(t *testing.T) {
	for _, args := range [][]string{
		{"predict", "--topo", "0\n\n:"},
		{"predict", "--topo", "0\u0194\r\u03f5"},
		{"predict", "--moe-routing", "power-law-\n1.2"},
		{"simulate", "--qps", "1", "--requests-file", "no\nsuch.jsonl"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") || strings.ContainsAny(stderr[:len(stderr)-1], "\r\n") {
			t.Errorf("%q: exit %d, stderr %q: want exit 2 and one line", args, code, stderr)
		}
	}
	if got := oneLine("--topo 0\n\t:\x00"); got != `--topo 0\n\t:\x00` {
		t.Errorf("oneLine = %q", got)
	}
}

// TestRowFlagsWithoutTheirRows: an acceptance prices only speculative
// steps, and --mtp-tokens and --mtp-accept only the mtp row: advise
// refused the MTP ones where --entries left the mtp row out, but took
// --spec-accept with no speculative row, and verdict took all three
// (its runs recorded mtp-accept=0.5 on steps that draft nothing).
func TestRowFlagsWithoutTheirRows(t *testing.T) {
	out := filepath.Join(t.TempDir(), "v")
	verdict := []string{"verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "64",
		"--steps", "1", "--warmup", "0", "--topo", "testdata/cpu-ranks/cpu-4r.json", "-o", out, "--entries", "fp8-kv"}
	checkUsageErrors(t, []usageCase{
		{"advise spec-accept", []string{"advise", "--no-sweep", "--compare-topos=", "--transfer=", "--entries", "fp8-kv", "--spec-accept", "0.7"},
			"--spec-accept 0.7: prices only speculative steps: the baseline drafts none, and --entries leaves out every speculative row"},
		{"verdict spec-accept", append(slices.Clone(verdict), "--spec-accept", "0.5"), "--spec-accept 0.5: prices only speculative steps"},
		{"verdict mtp-tokens", append(slices.Clone(verdict), "--mtp-tokens", "3"), "--mtp-tokens 3: prices only the mtp row, and --entries leaves out the mtp row"},
		{"verdict mtp-accept", append(slices.Clone(verdict), "--mtp-accept", "0.5"), "--mtp-accept 0.5: prices only MTP steps: the baseline drafts none"},
	})
	if _, err := os.Stat(out); err == nil {
		t.Errorf("verdict made -o %s", out)
	}
	// With a speculative row the acceptance prices it.
	if code, _, stderr := runCLI(t, "advise", "--no-sweep", "--compare-topos=", "--transfer=", "--entries", "fp8-kv,spec-eagle3", "--spec-accept", "0.7"); code != 0 {
		t.Errorf("advise with spec-eagle3: exit %d: %s", code, stderr)
	}
}

// TestEntriesNamingNothing: an --entries of commas and blanks names no
// entry; advise took it as the whole catalog (its rows and the boxes'),
// verdict ran every entry. It is refused at parse time, as every flag's
// value of separators alone is (TestSeparatorsOnlyFlagValueRefused).
func TestEntriesNamingNothing(t *testing.T) {
	out := filepath.Join(t.TempDir(), "v")
	checkUsageErrors(t, []usageCase{
		{"advise", []string{"advise", "--no-sweep", "--compare-topos=", "--transfer=", "--entries", " ,"}, `"--entries" flag: only separators, naming nothing`},
		{"verdict", []string{"verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "64", "--steps", "1", "--warmup", "0",
			"--topo", "testdata/cpu-ranks/cpu-4r.json", "-o", out, "--entries", ","}, `"--entries" flag: only separators, naming nothing`},
	})
	if _, err := os.Stat(out); err == nil {
		t.Errorf("verdict made -o %s", out)
	}
}
