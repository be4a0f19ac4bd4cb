package traces

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gzipCopy writes src's bytes gzipped to dst, as `gzip -k` leaves a
// trace beside its plain copy.
func gzipCopy(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(b)
	zw.Close()
	if err := os.WriteFile(dst, z.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// rewrite writes src's bytes to dst with old replaced by new.
func rewrite(t *testing.T, src, dst, old, new string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s lacks %q", src, old)
	}
	if err := os.WriteFile(dst, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A span read twice into one source is kept once and said: a directory
// holding a trace and its gzip copy, a file that holds a batch twice,
// the same Kineto file twice. Two profiler sessions of one rank (other
// kernel times) are no repeat: each keeps its steps, in traces of its
// own. The counts are the generators' (n spans; Kineto steps of 1000
// kernels).
func TestReadRepeatsKeptOnce(t *testing.T) {
	const otlpN, kinetoN = 1000, 3000
	// The OTLP file's spans: its op spans, one step's root and the spans
	// of its two ranks (976 op spans a rank).
	const otlpSpans = otlpN + 1 + 2
	for _, tc := range []struct {
		name   string
		files  func(t *testing.T, dir string)
		spans  int
		traces int
		kineto int
		note   string // in the one skip that says the repeat; "" for none
	}{
		{"otlp-and-gzip-copy", func(t *testing.T, dir string) {
			if _, err := writeOTLPBench(filepath.Join(dir, "run.otlp.jsonl"), otlpN); err != nil {
				t.Fatal(err)
			}
			gzipCopy(t, filepath.Join(dir, "run.otlp.jsonl"), filepath.Join(dir, "run.otlp.jsonl.gz"))
		}, otlpSpans, 1, 0, "1003 spans repeat those of DIR/run.otlp.jsonl"},
		{"otlp-batch-twice-in-one-file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "a.jsonl")
			if _, err := writeOTLPBench(p, otlpN); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, b...), 0o644)
		}, otlpSpans, 1, 0, "DIR/a.jsonl: 1003 spans repeat spans read before from the same file"},
		{"kineto-and-copy", func(t *testing.T, dir string) {
			if err := writeKinetoBench(filepath.Join(dir, "a.json"), kinetoN); err != nil {
				t.Fatal(err)
			}
			gzipCopy(t, filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json.gz"))
		}, kinetoN, 3, 1, "3000 spans repeat those of DIR/a.json"},
		{"kineto-two-sessions", func(t *testing.T, dir string) {
			a := filepath.Join(dir, "a.json")
			if err := writeKinetoBench(a, kinetoN); err != nil {
				t.Fatal(err)
			}
			rewrite(t, a, filepath.Join(dir, "b.json"), `"baseTimeNanoseconds":1764633600000000000`, `"baseTimeNanoseconds":1764633700000000000`)
		}, 2 * kinetoN, 6, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.files(t, dir)
			res, err := ReadAll(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Spans) != tc.spans || countTraces(res.Spans) != tc.traces || len(res.Kineto) != tc.kineto {
				t.Errorf("%d spans in %d traces, %d Kineto reports; want %d, %d, %d", len(res.Spans), countTraces(res.Spans), len(res.Kineto), tc.spans, tc.traces, tc.kineto)
			}
			var notes []string
			for _, sk := range res.Skipped {
				if strings.Contains(sk.Reason, "repeat") {
					notes = append(notes, sk.String())
				}
			}
			switch want := strings.ReplaceAll(tc.note, "DIR", dir); {
			case want == "" && len(notes) > 0:
				t.Errorf("repeats said where there are none: %v", notes)
			case want != "" && (len(notes) != 1 || !strings.Contains(notes[0], want)):
				t.Errorf("repeat notes %v, want one saying %q", notes, want)
			}
			if tc.note == "" {
				return
			}
			// The copy's own items left out are the original's, said once.
			want := 1
			if ents, _ := os.ReadDir(dir); len(ents) > 1 {
				alone, err := ReadAll(context.Background(), filepath.Join(dir, ents[0].Name()))
				if err != nil {
					t.Fatal(err)
				}
				want += alone.SkippedTotal
			}
			if res.SkippedTotal != want {
				t.Errorf("%d items left out, want %d (the original's and the repeat): %v", res.SkippedTotal, want, res.Skipped)
			}
		})
	}
}

// Repeats finds a source's spans in another source read apart (the same
// file given twice); another profiler session of the same rank and steps,
// whose synthesized IDs are the same but whose kernels start at other
// times, repeats nothing.
func TestRepeatsAcrossSources(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json.gz"), filepath.Join(dir, "c.json")
	if err := writeKinetoBench(a, 2000); err != nil {
		t.Fatal(err)
	}
	gzipCopy(t, a, b)
	rewrite(t, a, c, `"baseTimeNanoseconds":1764633600000000000`, `"baseTimeNanoseconds":1764633700000000000`)
	read := func(p string) *Result {
		res, err := ReadAll(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ra, rb, rc := read(a), read(b), read(c)
	if n := Repeats(ra, rb); n != 2000 {
		t.Errorf("a file and its copy: %d repeats, want 2000", n)
	}
	if n := Repeats(ra, rc); n != 0 {
		t.Errorf("two sessions: %d repeats, want 0", n)
	}
}
