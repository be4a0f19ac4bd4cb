package build

import (
	"os"
	"strings"
	"testing"
)

// TestReadSavedSaysATraceIsATrace: a trace given where a saved result is
// read (report --from) is named as a trace, of its format, with the flag
// that reads it, where the error was the JSON decoder's ("invalid
// character '{' after top-level value" for OTLP's JSON lines, '\x1f' for
// a gzip Kineto file) or a list of the Kineto object's keys.
func TestReadSavedSaysATraceIsATrace(t *testing.T) {
	// Two OTLP JSON lines, as run --trace file:PATH writes them.
	const otlpLines = `{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}` + "\n" + `{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}` + "\n"
	kinetoGz, err := os.ReadFile("../../traces/testdata/kineto/vllm_tiny_tp4_rank0_eager.pt.trace.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	kineto, err := os.ReadFile("../../traces/testdata/kineto_two_steps.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, in, format string
	}{
		{"otlp json lines", otlpLines, "otlp-json"},
		{"gzip kineto", string(kinetoGz), "kineto"},
		{"kineto object", string(kineto), "kineto"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadSaved(strings.NewReader(c.in), "run.trace")
			want := "run.trace: a trace (" + c.format + "), not a saved advise, compare or predict result: the report reads traces with --trace"
			if err == nil || err.Error() != want {
				t.Errorf("error %v, want %q", err, want)
			}
		})
	}
	// A JSON object of another kind is still listed by its keys.
	_, err = ReadSaved(strings.NewReader(`{"name":"cpu-2r","devices":[]}`), "box.json")
	if err == nil || !strings.Contains(err.Error(), "keys devices, name; want the output of") {
		t.Errorf("a topology: error %v, want its keys listed", err)
	}
}

// TestSavedKind: SavedKind names the verb of a saved result by ReadSaved's
// keys, and nothing of a trace or a topology.
func TestSavedKind(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{savedAdvice, "advise"},
		{savedPrediction, "predict"},
		{`{"sources":[],"scenarios":[]}`, "compare"},
		{`{"resourceSpans":[]}`, ""},
		{`{"name":"box","gpus":[],"links":[]}`, ""},
	} {
		if got := SavedKind([]byte(c.doc)); got != c.want {
			t.Errorf("SavedKind(%.40s) = %q, want %q", c.doc, got, c.want)
		}
	}
}
