package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// flagSetOf builds a verb's flags as dispatch does.
func flagSetOf(t *testing.T, name string) *pflag.FlagSet {
	t.Helper()
	v, _ := findVerb(strings.Fields(name))
	if v == nil {
		t.Fatalf("no verb %q", name)
	}
	return bindFlags(v)
}

// bindFlags is v's flag set as dispatch binds it, its usage output
// discarded.
func bindFlags(v *Verb) *pflag.FlagSet {
	fs := pflag.NewFlagSet(v.Name(), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	v.New().Bind(fs)
	return fs
}

// TestScenarioFlagsIdentical: every verb that takes a scenario has each
// scenario flag with the same type, default and help as scenarioFlags.Bind
// gives (plan: the flags it sweeps as lists of the same names, the rest
// identical; run: --engine, whose only engine is the executor, says so).
func TestScenarioFlagsIdentical(t *testing.T) {
	ref := pflag.NewFlagSet("ref", pflag.ContinueOnError)
	newScenarioFlags().Bind(ref)
	swept := map[string]bool{"topo": true, "gpus": true, "tp": true, "dp": true, "dcp": true, "ep": true,
		"batch": true, "context": true, "kv-dtype": true, "mtp": true, "phase": true}
	for _, name := range []string{"predict", "advise", "run", "schedule", "model show", "model load", "compare", "calibrate", "report", "plan"} {
		t.Run(name, func(t *testing.T) {
			if v, _ := findVerb(strings.Fields(name)); v == nil {
				t.Skipf("no verb %q in this build", name)
			}
			fs := flagSetOf(t, name)
			n := 0
			ref.VisitAll(func(want *pflag.Flag) {
				got := fs.Lookup(want.Name)
				if name == "plan" && swept[want.Name] {
					if got == nil && want.Name != "phase" {
						t.Errorf("--%s: plan lacks its list form", want.Name)
					}
					return
				}
				if got == nil {
					t.Errorf("--%s missing", want.Name)
					return
				}
				if name == "run" && want.Name == "engine" {
					if got.Value.Type() != want.Value.Type() || !strings.HasSuffix(got.Usage, "(default: executor)") {
						t.Errorf("--engine: %s %q, want %s and the executor as the default", got.Value.Type(), got.Usage, want.Value.Type())
					}
					n++
					return
				}
				if got.Value.Type() != want.Value.Type() || got.DefValue != want.DefValue || got.Usage != want.Usage {
					t.Errorf("--%s: %s %q %q, want %s %q %q", want.Name, got.Value.Type(), got.DefValue, got.Usage, want.Value.Type(), want.DefValue, want.Usage)
				}
				n++
			})
			if n < 15 {
				t.Errorf("checked %d shared flags", n)
			}
		})
	}
}

var outputFormats = regexp.MustCompile(`^output format: ([a-z, ]+?)(?: \(|$)`)

// TestOutputFormatsParse: each format a verb's --output help lists
// parses: JSON as JSON, CSV as one table (a header and rows of its width),
// markdown as a markdown table (header, separator, rows), table as text.
func TestOutputFormatsParse(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "run.json")
	writeExactRun(t, trace, 2)
	cases := []struct {
		verb string
		args []string
	}{
		{"predict", nil},
		{"advise", []string{"--no-sweep", "--entries", "cuda-graphs,fp8-kv", "--transfer", ""}},
		{"plan", []string{"--gpus", "8", "--plan", "tp8", "--batch", "1,8", "--context", "4096"}},
		{"schedule", []string{"--model", "tiny-mla-moe", "--tp", "2"}},
		{"collective", []string{"--sizes", "512:4K"}},
		{"model list", nil},
		{"model show", nil},
		{"run", []string{"--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "64", "--steps", "1", "--warmup", "0", "--trace", "none"}},
		{"compare", []string{"--trace", trace}},
		{"trace read", []string{"--trace", trace, "--spans", "5"}},
		{"topo show", []string{"rtxpro6000-2s"}},
		{"topo gpus", nil},
	}
	for _, tc := range cases {
		fs := flagSetOf(t, tc.verb)
		out := fs.Lookup("output")
		if out == nil {
			t.Errorf("%s: no --output", tc.verb)
			continue
		}
		m := outputFormats.FindStringSubmatch(out.Usage)
		if m == nil {
			t.Errorf("%s: --output help %q does not list its formats", tc.verb, out.Usage)
			continue
		}
		for _, f := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ',' || r == ' ' }) {
			if f == "or" || f == "dot" {
				continue
			}
			t.Run(tc.verb+"/"+f, func(t *testing.T) {
				args := append(append(strings.Fields(tc.verb), tc.args...), "--output", f)
				var o, e bytes.Buffer
				if code := dispatch(args, &o, &e); code != 0 {
					t.Fatalf("exit %d: %s", code, e.String())
				}
				checkFormat(t, f, o.String())
			})
		}
	}
}

var mdSeparator = regexp.MustCompile(`^\|(-+\|)+$`)

func checkFormat(t *testing.T, format, out string) {
	t.Helper()
	switch format {
	case formatJSON:
		if !json.Valid([]byte(out)) {
			t.Errorf("not JSON: %.200s", out)
		}
	case formatCSV:
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil || len(recs) < 2 {
			t.Errorf("CSV: %d records, %v: %.200s", len(recs), err, out)
		}
	case formatMarkdown:
		lines := strings.Split(out, "\n")
		for i := 1; i+1 < len(lines); i++ {
			if mdSeparator.MatchString(strings.TrimSpace(lines[i])) && strings.HasPrefix(lines[i-1], "|") && strings.HasPrefix(lines[i+1], "|") &&
				strings.Count(lines[i-1], "|") == strings.Count(lines[i], "|") {
				return
			}
		}
		t.Errorf("no markdown table: %.300s", out)
	default:
		if strings.TrimSpace(out) == "" {
			t.Error("empty table output")
		}
	}
}
