package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// halfTrace writes the recorded 5-step H200 trace cut at half its bytes
// (inside its gzip stream) to dir, and returns the path, the cut size and,
// counted with the standard library in the text that survives, the
// complete steps (root spans "step" in whole lines: each step's root line
// follows its op line) and the steps with spans read (distinct trace IDs).
func halfTrace(t *testing.T, dir string) (path string, size, kept, steps int) {
	t.Helper()
	b, err := os.ReadFile("../../exec/cuda/testdata/h200/h200-tiny-mla-moe-tp1-eager.otlp.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	cut := b[:len(b)/2]
	path = filepath.Join(dir, "half.otlp.jsonl.gz")
	if err := os.WriteFile(path, cut, 0o644); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(zr) // ends with the missing end of the stream
	whole := text[:bytes.LastIndexByte(text, '\n')+1]
	for _, line := range bytes.Split(bytes.TrimSpace(whole), []byte("\n")) {
		var req struct {
			ResourceSpans []struct {
				ScopeSpans []struct {
					Spans []struct {
						Name   string `json:"name"`
						Parent string `json:"parentSpanId"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(line, &req); err != nil {
			t.Fatal(err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if s.Name == "step" && s.Parent == "" {
						kept++
					}
				}
			}
		}
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`"traceId":"([0-9a-f]{32})"`).FindAllSubmatch(text, -1) {
		ids[string(m[1])] = true
	}
	if kept == 0 || kept >= len(ids) {
		t.Fatalf("fixture: %d complete steps of %d: want a cut inside a step", kept, len(ids))
	}
	return path, len(cut), kept, len(ids)
}

// TestPartialTraceVerbs: every verb that reads traces refuses a cut trace
// with exit 1 and one line naming the file, the byte where the gzip stream
// ends and that the file was cut, writing nothing; calibrate refuses it
// even with --allow-partial. With --allow-partial, trace read, compare and
// report keep the complete steps (counted in the text that survives) and
// say on stderr how many steps were dropped.
func TestPartialTraceVerbs(t *testing.T) {
	dir := t.TempDir()
	half, size, kept, steps := halfTrace(t, dir)
	cutMsg := fmt.Sprintf("%s: gzip stream ends at byte %d before its end: the file was cut (its text ends at byte ", half, size)
	refused := "calibrate refuses damaged input, even with --allow-partial"
	cases := []struct {
		name string
		args []string
		want string // the one line on stderr starts with it
		also string // and contains it
		out  string // a file that must not be written
	}{
		{name: "trace read", args: []string{"trace", "read", half, "--spans", "0"}, want: "tpscope trace read: " + cutMsg},
		{name: "compare", args: []string{"compare", "--trace", half, "--plot", filepath.Join(dir, "p.svg")}, want: "tpscope compare: " + cutMsg, out: "p.svg"},
		{name: "report", args: []string{"report", "--trace", half, "-o", filepath.Join(dir, "r.html")}, want: "tpscope report: " + cutMsg, out: "r.html"},
		{name: "calibrate", args: []string{"calibrate", "--trace", half, "-o", filepath.Join(dir, "cal.json")}, want: "tpscope calibrate: " + cutMsg, also: refused, out: "cal.json"},
		{name: "calibrate with --allow-partial", args: []string{"calibrate", "--allow-partial", "--trace", half, "-o", filepath.Join(dir, "cal.json")},
			want: "tpscope calibrate: " + cutMsg, also: refused, out: "cal.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, c.args...)
			if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, c.want) || !strings.Contains(stderr, c.also) {
				t.Fatalf("exit %d, stderr %q: want exit 1 and one line starting %q", code, stderr, c.want)
			}
			if c.out != "" {
				if _, err := os.Stat(filepath.Join(dir, c.out)); err == nil {
					t.Errorf("%s written from a cut trace", c.out)
				}
			}
		})
	}

	note := fmt.Sprintf("%s: --allow-partial: kept %d complete steps of %d; dropped %d step", half, kept, steps, steps-kept)
	t.Run("trace read --allow-partial", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "trace", "read", "--allow-partial", half, "--spans", "0", "--output", "json")
		if code != 0 || !strings.HasPrefix(stderr, note) {
			t.Fatalf("exit %d, stderr %q: want 0 and %q", code, stderr, note)
		}
		var doc struct {
			Summary struct {
				Traces  int `json:"traces"`
				Partial struct {
					Steps     int `json:"steps"`
					StepsKept int `json:"steps_kept"`
				} `json:"partial"`
			} `json:"summary"`
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatal(err)
		}
		if s := doc.Summary; s.Traces != kept || s.Partial.StepsKept != kept || s.Partial.Steps != steps {
			t.Errorf("summary %+v: want %d traces, %d of %d steps kept", s, kept, kept, steps)
		}
	})
	t.Run("compare --allow-partial", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "compare", "--allow-partial", "--trace", half, "--output", "json")
		if code != 0 || !strings.HasPrefix(stderr, note) {
			t.Fatalf("exit %d, stderr %q: want 0 and %q", code, stderr, note)
		}
		var rep struct {
			Scenarios []struct {
				Steps int `json:"steps"`
			} `json:"scenarios"`
		}
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Scenarios) != 1 || rep.Scenarios[0].Steps != kept {
			t.Errorf("scenarios %+v: want one of %d steps", rep.Scenarios, kept)
		}
	})
	t.Run("report --allow-partial", func(t *testing.T) {
		out := filepath.Join(dir, "partial.html")
		code, _, stderr := runCLI(t, "report", "--allow-partial", "--trace", half, "-o", out)
		if code != 0 || !strings.HasPrefix(stderr, note) {
			t.Fatalf("exit %d, stderr %q: want 0 and %q", code, stderr, note)
		}
		if _, err := os.Stat(out); err != nil {
			t.Error(err)
		}
	})
}
