package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestEmptyFlagValueRefused runs every verb with each of its flags that
// takes a value given empty ("") and blank (" "): each is refused in one
// line naming the flag, exit 2, with nothing on stdout, where pflag had
// read it as the flag left out ('verdict --model ""' ran the default
// model). The flags come from the verbs' own flag sets, so that a new flag
// is covered without a new row; those of emptyAllowed are run instead
// (TestEmptyFlagValueAllowed).
func TestEmptyFlagValueRefused(t *testing.T) {
	n := 0
	for _, v := range verbs {
		bindFlags(v).VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() == "bool" || emptyAllowed[v.Name()+" --"+f.Name] {
				return
			}
			for _, args := range [][]string{{"--" + f.Name, ""}, {"--" + f.Name, " "}, {"--" + f.Name + "="}} {
				n++
				code, stdout, stderr := runCLI(t, append(strings.Fields(v.Name()), args...)...)
				want := `--` + f.Name + `" flag: empty: want `
				if f.NoOptDefVal != "" && len(args) == 2 {
					// '--ep ""' is a bare --ep and an argument "", which
					// the verb refuses as the flag's value (optionalValueError).
					want = `--` + f.Name + ` "` + args[1] + `": want `
				}
				if code != exitUsage || stdout != "" || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
					t.Errorf("tpscope %s %q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", v.Name(), args, code, stdout, stderr, want)
				}
				// What the flag takes, its help cut short, reads whole.
				if strings.Count(stderr, "(") != strings.Count(stderr, ")") || strings.Contains(stderr, "want a value ()") {
					t.Errorf("tpscope %s %q: %q: the expectation is cut or empty", v.Name(), args, stderr)
				}
			}
		})
	}
	// Refused before any work: verdict's -o directory is not made.
	out := filepath.Join(t.TempDir(), "verdict")
	if code, _, _ := runCLI(t, "verdict", "--backend", "cpu", "--model", "", "-o", out); code != exitUsage {
		t.Errorf("verdict --model '': exit %d, want 2", code)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("verdict --model '' made -o %s", out)
	}
	// The scenario flags of predict alone are dozens; a flag set
	// that lost them would pass vacuously.
	if n < 200 {
		t.Errorf("only %d empty values tried: the verbs' flag sets were not read", n)
	}
}

// TestEmptyFlagValueAllowed runs each flag whose empty value is documented
// (emptyAllowed) with it: it is a choice there ('advise
// --compare-topos=' tries no box), not a value refused; an entry that
// names no flag of its verb is a stale allowance.
func TestEmptyFlagValueAllowed(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	runs := map[string][]string{
		"advise --compare-topos": {"advise", "--model", "tiny-mla-moe", "--tp", "2", "--no-sweep", "--entries", "fp8-kv", "--transfer", "glm-5-nvfp4", "--compare-topos", ""},
		"advise --transfer":      {"advise", "--model", "tiny-mla-moe", "--tp", "2", "--no-sweep", "--entries", "fp8-kv", "--compare-topos", "h200-nvswitch", "--transfer", ""},
		"run --trace": {"run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "1", "--context", "64",
			"--steps", "1", "--warmup", "0", "--trace", ""},
	}
	for key := range emptyAllowed {
		verb, flag, _ := strings.Cut(key, " --")
		i := slices.IndexFunc(verbs, func(v *Verb) bool { return v.Name() == verb })
		if i < 0 {
			t.Errorf("emptyAllowed %q: no verb %q", key, verb)
			continue
		}
		fs := pflag.NewFlagSet(verb, pflag.ContinueOnError)
		verbs[i].New().Bind(fs)
		if fs.Lookup(flag) == nil {
			t.Errorf("emptyAllowed %q: %s has no flag --%s", key, verb, flag)
			continue
		}
		args, ok := runs[key]
		if !ok {
			t.Errorf("emptyAllowed %q: no command line here runs it", key)
			continue
		}
		if code, _, stderr := runCLI(t, args...); code != exitOK {
			t.Errorf("%q: exit %d, stderr %q; want it run", args, code, stderr)
		}
	}
}

// TestSeparatorsOnlyFlagValueRefused runs every verb with each of its
// flags that takes a value given only separators (",", ",,", " , "): each
// is refused in one line naming the flag, exit 2, nothing on stdout. A
// comma list dropped its empty items, so such a value became the empty
// list and ran as something else: 'advise --compare-topos ,' tried no box,
// '--graph-sizes ,' captured the engine's default sizes, '--transfer ,'
// priced no other model. The flags come from the verbs' own flag sets;
// the list flags among them (a list type, or a help that says it takes a
// comma list) are counted, so that a flag set that lost them fails.
func TestSeparatorsOnlyFlagValueRefused(t *testing.T) {
	lists := map[string]bool{}
	for _, v := range verbs {
		bindFlags(v).VisitAll(func(f *pflag.Flag) {
			if f.Value.Type() == "bool" {
				return
			}
			switch f.Value.Type() {
			case "ints", "intSlice", "stringSlice", "stringArray":
				lists[v.Name()+" --"+f.Name] = true
			}
			if strings.Contains(f.Usage, "comma list") || strings.Contains(f.Usage, "comma-separate") {
				lists[v.Name()+" --"+f.Name] = true
			}
			for _, val := range []string{",", ",,", " , "} {
				args := []string{"--" + f.Name, val}
				if f.NoOptDefVal != "" {
					// '--ep ,' is a bare --ep and an argument ","
					// (TestEmptyFlagValueRefused); the value is given
					// with '='.
					args = []string{"--" + f.Name + "=" + val}
				}
				code, stdout, stderr := runCLI(t, append(strings.Fields(v.Name()), args...)...)
				want := `--` + f.Name + `" flag: only separators, naming nothing: want `
				if code != exitUsage || stdout != "" || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
					t.Errorf("tpscope %s %q: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", v.Name(), args, code, stdout, stderr, want)
				}
			}
		})
	}
	for _, k := range []string{"advise --entries", "advise --compare-topos", "advise --transfer", "advise --sweep-batch",
		"verdict --entries", "plan --topo", "plan --batch", "plan --kv-dtype", "plan --plan", "simulate --qps", "simulate --concurrency",
		"simulate --replay-qps", "compare --trace", "calibrate --holdout", "run --local-ranks", "predict --graph-sizes", "predict --nccl-algo"} {
		if !lists[k] {
			t.Errorf("%s: not found as a list flag: the verbs' flag sets were not read", k)
		}
	}
	if len(lists) < 60 {
		t.Errorf("only %d list flags found: the verbs' flag sets were not read", len(lists))
	}
}
