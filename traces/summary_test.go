package traces

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSummaryCountsOpSpans: `trace read` (Summarize) counts the op spans
// IsOpSpan names, as compare does: one with an op ID and one under a rank
// span without one (which compare reports as lacking an op ID); the step
// and rank spans are not op spans.
func TestSummaryCountsOpSpans(t *testing.T) {
	span := func(id, parent, name, attrs string) string {
		return `,{"traceId":"` + tidA + `","spanId":"` + id + `","parentSpanId":"` + parent + `","name":"` + name +
			`","startTimeUnixNano":"2000","endTimeUnixNano":"3000","attributes":[` + attrs + `]}`
	}
	doc := otlpLine(tidA, "deepseek-v3",
		span("0000000000000002", "0000000000000001", "rank/0", `{"key":"tpscope.rank","value":{"intValue":"0"}}`),
		span("0000000000000003", "0000000000000002", "L00.attn.o_proj", `{"key":"tpscope.op.id","value":{"stringValue":"L00.attn.o_proj"}}`),
		span("0000000000000004", "0000000000000002", "some_kernel", ""))
	path := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := ReadAll(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range res.Spans {
		if IsOpSpan(&res.Spans[i]) {
			n++
		}
	}
	if s := Summarize(res); s.Spans != 4 || s.OpSpans != 2 || n != 2 {
		t.Errorf("trace read: %d spans, %d op spans; IsOpSpan: %d; want 4, 2, 2", s.Spans, s.OpSpans, n)
	}
}

// TestSkipIn: a skip said under its source names the source once: the
// reason alone where Where is the source (Kineto's notes), the byte
// offset where Where is SRC:byte N, and Where whole otherwise (a span).
func TestSkipIn(t *testing.T) {
	const src = "run/a.json"
	for _, c := range []struct {
		sk   Skip
		want string
	}{
		{Skip{Where: src, Reason: "8 gpu_memcpy events are copies"}, "8 gpu_memcpy events are copies"},
		{Skip{Where: src + ":byte 42", Reason: "span: not a JSON object"}, "byte 42: span: not a JSON object"},
		{Skip{Where: "span 00000000000000aa", Reason: "op ID bad"}, "span 00000000000000aa: op ID bad"},
		{Skip{Where: src + "x", Reason: "r"}, src + "x: r"},
	} {
		if got := c.sk.In(src); got != c.want {
			t.Errorf("%+v.In(%q) = %q, want %q", c.sk, src, got, c.want)
		}
	}
}

// TestScenarioLineNamesWhereItRan: a scenario's line names the backend and
// GPU the run executed on and whether it replayed CUDA graphs, as the
// step span records them (the H200 fixtures: one eager, one graphed run of
// tiny-mla-moe), so runs that differ only there read as two scenarios,
// and a CPU run, which records the default GPU box as its topology, says
// it ran on the CPU.
func TestScenarioLineNamesWhereItRan(t *testing.T) {
	eager, err := ReadAll(context.Background(), h200Eager)
	if err != nil {
		t.Fatal(err)
	}
	graph, err := ReadAll(context.Background(), "../exec/cuda/testdata/h200/h200-tiny-mla-moe-tp1-graph.otlp.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	if len(eager.Scenarios) != 1 || len(graph.Scenarios) != 1 {
		t.Fatalf("scenarios: %d eager, %d graphed; want one each", len(eager.Scenarios), len(graph.Scenarios))
	}
	e, g := eager.Scenarios[0].String(), graph.Scenarios[0].String()
	for _, want := range []string{"backend=cuda", `gpu="NVIDIA H200"`} {
		if !strings.Contains(e, want) || !strings.Contains(g, want) {
			t.Errorf("scenario lines lack %s:\n%s\n%s", want, e, g)
		}
	}
	if !strings.Contains(g, "graphs=true") {
		t.Errorf("graphed run's line does not say it replayed graphs: %s", g)
	}
	// Differing only where and how it ran: two keys, two lines.
	cpu := eager.Scenarios[0]
	cpu.Backend, cpu.GPU = "cpu", ""
	if cpu.Key() == eager.Scenarios[0].Key() || cpu.String() == e {
		t.Errorf("a CPU run of the same scenario reads as the GPU run: %s", cpu.String())
	}
	if !strings.Contains(cpu.String(), "backend=cpu") {
		t.Errorf("CPU run's line does not say so: %s", cpu.String())
	}
}
