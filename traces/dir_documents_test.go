package traces

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDirectoryLeavesOutOtherDocuments reads a directory holding a trace
// beside JSON documents of other kinds, as verdict -o DIR writes
// verdict.json by its runs' traces and a profile directory keeps the
// model's config.json: the trace's spans are read, each other document is
// left out and said, a damaged file still fails the read, and a directory
// of no trace at all is an error naming what it held.
func TestDirectoryLeavesOutOtherDocuments(t *testing.T) {
	kineto, err := os.ReadFile("testdata/kineto_two_steps.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("rank3.json", string(kineto))
	write("verdict.json", `{"scenario": "tiny-mla-moe tp2 decode b4", "backend": "cpu", "steps": 3}`)
	write("config.json", `{"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168}`)
	res, err := ReadAll(context.Background(), dir)
	if err != nil {
		t.Fatalf("directory with a trace and two other documents: %v", err)
	}
	// The fixture: 2 steps x 11 kernels of rank 3.
	if len(res.Spans) != 22 || res.Format != FormatKineto {
		t.Fatalf("%d spans of %s, want the trace's 22 of kineto", len(res.Spans), res.Format)
	}
	left := map[string]string{} // the files left out as not traces
	for _, s := range res.Skipped {
		if strings.HasPrefix(s.Reason, "not a trace") {
			left[filepath.Base(s.Where)] = s.Reason
		}
	}
	for _, name := range []string{"verdict.json", "config.json"} {
		if !strings.Contains(left[name], "not a trace") {
			t.Errorf("%s: left out as %q, want said as not a trace", name, left[name])
		}
	}
	if _, ok := left["rank3.json"]; ok {
		t.Errorf("the trace itself was left out as not a trace: %s", left["rank3.json"])
	}

	// A file that is not JSON at all is damaged input, not another kind
	// of document: the read still fails on it.
	write("rank4.json", "garbage")
	if _, err := ReadAll(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "rank4.json") {
		t.Errorf("a damaged file in the directory: err %v, want one naming rank4.json", err)
	}

	// Only other documents: no trace, an error naming the first of them.
	only := t.TempDir()
	if err := os.WriteFile(filepath.Join(only, "config.json"), []byte(`{"hidden_size": 7168}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadAll(context.Background(), only)
	if !errors.Is(err, ErrNoSpans) || !strings.Contains(err.Error(), "config.json: not a trace") || strings.Contains(err.Error(), "()") {
		t.Errorf("a directory of no trace: err %v, want no span read naming config.json as not a trace", err)
	}

	// Named alone, the same document is an error, as before.
	if _, err := ReadAll(context.Background(), filepath.Join(dir, "verdict.json")); err == nil || !strings.Contains(err.Error(), "unknown trace format") {
		t.Errorf("verdict.json named alone: err %v, want unknown trace format", err)
	}
}
