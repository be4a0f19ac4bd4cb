package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOptionalValueFlags: a flag whose value is optional also takes it as
// the next word, as people type it: "plan --ep both" (on fb5e1b0:
// unexpected arguments ["both"]), "predict --ep true", "--cuda-graphs
// false"; a word the flag does not take stays an argument.
func TestOptionalValueFlags(t *testing.T) {
	same := []struct {
		name       string
		spaced, eq []string
	}{
		{"plan-ep-both", []string{"plan", "--ep", "both", "--tp", "8", "--batch", "1", "--context", "4K", "--kv-dtype", "fp8"},
			[]string{"plan", "--ep=both", "--tp", "8", "--batch", "1", "--context", "4K", "--kv-dtype", "fp8"}},
		{"predict-ep-true", []string{"predict", "--ep", "true"}, []string{"predict", "--ep=true"}},
		{"predict-graphs-false", []string{"predict", "--cuda-graphs", "false"}, []string{"predict", "--cuda-graphs=false"}},
	}
	for _, tc := range same {
		t.Run(tc.name, func(t *testing.T) {
			c1, o1, e1 := runCLI(t, tc.spaced...)
			c2, o2, e2 := runCLI(t, tc.eq...)
			if c1 != 0 || c2 != 0 {
				t.Fatalf("exit %d (%s) and %d (%s), want 0", c1, e1, c2, e2)
			}
			if o1 != o2 {
				t.Fatalf("%v and %v print different results", tc.spaced, tc.eq)
			}
		})
	}
	// "model load --dense-dsa DIR": DIR is not a boolean, so it stays the
	// verb's argument. A DSA model's config (--dense-dsa on a model
	// without DSA is refused).
	dir := t.TempDir()
	data, err := os.ReadFile("../../model/presets/glm-5-nvfp4.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "model", "load", "--dense-dsa", dir); code != 0 {
		t.Fatalf("model load --dense-dsa DIR: exit %d: %s", code, stderr)
	}
}

// TestOptionalValueFlagLists: a comma list of values after a flag whose
// value is optional is that flag's value, refused by the flag in one line
// naming it ("plan --ep true,false" said unexpected arguments
// ["true,false"], naming no flag).
func TestOptionalValueFlagLists(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"plan", []string{"plan", "--ep", "true,false"}, `--ep "true,false": want one of true, false or both`},
		{"plan-both", []string{"plan", "--ep", "both,true", "--tp", "8"}, `--ep "both,true": want one of true, false or both`},
		{"predict", []string{"predict", "--ep", "true,false"}, `invalid argument "true,false" for "--ep" flag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(errs, tc.want) || strings.Contains(errs, "unexpected arguments") ||
				strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("exit %d (want 2), stdout %q, stderr %q (want one line with %q)", code, out, errs, tc.want)
			}
		})
	}
}

// TestOptionalValueFlagStrayWord: a word after a flag whose value is
// optional that the flag does not take, given to a verb that takes no
// argument, was meant as that flag's value: the refusal names the flag
// and the values it takes ("plan --ep maybe" said unexpected arguments
// ["maybe"], naming no flag). A verb that takes arguments keeps the word
// as one, and a word after no such flag stays an unexpected argument.
func TestOptionalValueFlagStrayWord(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"plan", []string{"plan", "--ep", "maybe", "--tp", "8"}, `--ep "maybe": want one of true, false or both (a bare --ep means true)`},
		{"predict-bool", []string{"predict", "--ep", "maybe"}, `--ep "maybe": want true or false (a bare --ep means true)`},
		{"simulate-bool", []string{"simulate", "--qps", "1", "--sweep-qps", "often"}, `--sweep-qps "often": want true or false`},
		{"not-after-a-flag", []string{"predict", "foo"}, `unexpected arguments ["foo"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("exit %d (want 2), stdout %q, stderr %q (want one line with %q)", code, out, errs, tc.want)
			}
		})
	}
}

// TestVersionHelpVerb: --version and -V print the version line (on
// fb5e1b0: unknown verb); "help VERB" prints the verb's help (on fb5e1b0:
// the verb list).
func TestVersionHelpVerb(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-V"}, {"version"}} {
		if code, out, stderr := runCLI(t, args...); code != 0 || !strings.HasPrefix(out, "tpscope ") {
			t.Errorf("%v: exit %d, %q %q", args, code, out, stderr)
		}
	}
	code, out, _ := runCLI(t, "help", "predict")
	if code != 0 || !strings.HasPrefix(out, "Usage: tpscope predict") || !strings.Contains(out, "--batch") {
		t.Errorf("help predict: exit %d, %q", code, out[:min(200, len(out))])
	}
	code, out, _ = runCLI(t, "help", "model", "show")
	if code != 0 || !strings.HasPrefix(out, "Usage: tpscope model show") {
		t.Errorf("help model show: exit %d, %q", code, out[:min(200, len(out))])
	}
}

// TestHiddenHarnessFlags: the flags the measuring harness sets are not in
// help (on fb5e1b0 --executor and --timing-events were), and are still
// accepted.
func TestHiddenHarnessFlags(t *testing.T) {
	_, help, _ := runCLI(t, "predict", "--help")
	for _, f := range []string{"--executor", "--timing-events"} {
		if strings.Contains(help, f) {
			t.Errorf("predict --help shows %s", f)
		}
	}
	if code, _, stderr := runCLI(t, "predict", "--executor", "--timing-events", "2"); code != 0 {
		t.Errorf("predict --executor --timing-events 2: exit %d: %s", code, stderr)
	}
}

// TestGBpsColumns: bandwidth columns say gigabytes (GBps), not gigabits.
func TestGBpsColumns(t *testing.T) {
	code, out, stderr := runCLI(t, "collective", "--output", "csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	head := strings.SplitN(out, "\n", 2)[0]
	if !strings.Contains(head, "algbw_GBps") || !strings.Contains(head, "busbw_GBps") || strings.Contains(head, "gbps") {
		t.Errorf("header %q: want algbw_GBps and busbw_GBps", head)
	}
}

// TestCompletionScripts: "completion bash" completes verbs, a group's
// verbs and a verb's flags in a real bash; zsh and fish scripts name
// every verb; an unknown shell is a usage error.
func TestCompletionScripts(t *testing.T) {
	code, script, stderr := runCLI(t, "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: exit %d: %s", code, stderr)
	}
	for _, sh := range []string{"zsh", "fish"} {
		code, out, stderr := runCLI(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "predict") || !strings.Contains(out, "model") {
			t.Errorf("completion %s: exit %d %s", sh, code, stderr)
		}
	}
	checkUsageErrors(t, []usageCase{{"unknown-shell", []string{"completion", "tcsh"}, "want bash, zsh or fish"}})
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here to run the script")
	}
	file := filepath.Join(t.TempDir(), "tpscope.bash")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words string
		want  []string
	}{
		{"tpscope pre", []string{"predict"}},
		{"tpscope model s", []string{"show"}},
		{"tpscope predict --mo", []string{"--model", "--moe-dispatch", "--moe-kernel", "--moe-routing"}},
		{"tpscope model show --gpu-m", []string{"--gpu-mem-gb", "--gpu-mem-util"}},
	} {
		w := strings.Fields(tc.words)
		cmd := exec.Command(bash, "-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _tpscope; echo "${COMPREPLY[@]}"`, "x", file)
		cmd.Args = append(cmd.Args, w...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", tc.words, err)
		}
		if got := strings.Fields(string(out)); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: completes %v, want %v", tc.words, got, tc.want)
		}
	}
}

// TestListValuesGivenTwice: a value named twice in a list flag is refused
// in one line naming the flag, before any work. On 601a891 plan swept it
// twice ("plan --batch 1,1 --tp 8 ...": 2 configurations of one, every
// count doubled, as was --kv-dtype fp8,fp8 and --gpus 8 --gpus 8), advise
// printed a row twice and ranked it twice in its answer, and simulate ran
// a load twice.
func TestListValuesGivenTwice(t *testing.T) {
	one := []string{"--context", "1024", "--tp", "8", "--ep", "false", "--dcp", "1"}
	checkUsageErrors(t, []usageCase{
		{"plan-batch", append([]string{"plan", "--batch", "1,1", "--kv-dtype", "fp8"}, one...), `invalid argument "1,1" for "--batch" flag: 1 is given twice`},
		{"plan-gpus-repeated", append([]string{"plan", "--gpus", "8", "--gpus", "8", "--batch", "1", "--kv-dtype", "fp8"}, one...), `for "--gpus" flag: 8 is given twice`},
		{"plan-context-suffix", []string{"plan", "--context", "1K,1024", "--batch", "1"}, `for "--context" flag: 1024 is given twice`},
		{"plan-kv", append([]string{"plan", "--batch", "1", "--kv-dtype", "fp8,fp8"}, one...), `--kv-dtype "fp8,fp8": fp8 is given twice`},
		{"advise-entries", []string{"advise", "--no-sweep", "--entries", "spec-eagle3,spec-eagle3"}, `--entries: "spec-eagle3" is given twice`},
		{"advise-transfer", []string{"advise", "--no-sweep", "--transfer", "deepseek-v3,deepseek-v3"}, `--transfer "deepseek-v3,deepseek-v3": deepseek-v3 is given twice`},
		{"advise-sweep", []string{"advise", "--sweep-batch", "1,2,1"}, `for "--sweep-batch" flag: 1 is given twice`},
		{"simulate-qps", []string{"simulate", "--qps", "1,1.0"}, `--qps "1,1.0": 1.0 is given twice`},
		{"simulate-concurrency", []string{"simulate", "--concurrency", "2,2"}, `--concurrency: 2 is given twice`},
	})
}
