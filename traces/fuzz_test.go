package traces

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/traces/internal/kinetogen"
)

// fuzzRead reads data as the given format ("" = sniff) and checks the
// reader's promises: no panic, and every span it returns is usable.
func fuzzRead(t *testing.T, data []byte, format string) {
	res := &Result{Source: "fuzz"}
	_, err := readBody(context.Background(), bytes.NewReader(data), "fuzz", format, res)
	if err != nil {
		return
	}
	res.finish()
	if res.SkippedTotal < len(res.Skipped) || len(res.Skipped) > MaxSkipDetails {
		t.Fatalf("skip counts %d total, %d listed", res.SkippedTotal, len(res.Skipped))
	}
	for i := range res.Spans {
		s := &res.Spans[i]
		if !s.TraceID.IsValid() || !s.SpanID.IsValid() {
			t.Fatalf("span %d %q has an invalid ID %s/%s", i, s.Name, s.TraceID, s.SpanID)
		}
		if s.Duration < 0 {
			t.Fatalf("span %d %q: negative duration %d", i, s.Name, s.Duration)
		}
		if s.OpID != "" && !ValidOpID(s.OpID) {
			t.Fatalf("span %d: malformed op ID %q kept", i, s.OpID)
		}
		for j := 1; j < len(s.Attrs); j++ {
			if s.Attrs[j-1].Key > s.Attrs[j].Key {
				t.Fatalf("span %d: attributes not sorted: %v", i, s.Attrs)
			}
		}
	}
}

func addFile(f *testing.F, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
}

// readSeed reads a seed file, or fails the fuzz test.
func readSeed(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// cutSeeds adds data cut at a quarter, half and three quarters of its
// bytes: inputs that end early, which readers must report, not panic on.
func cutSeeds(f *testing.F, data []byte) {
	for _, frac := range []int{1, 2, 3} {
		f.Add(data[:len(data)*frac/4])
	}
}

func FuzzReadOTLPJSON(f *testing.F) {
	good := otlpLine(tidA, "m", otlpSpanJSON(tidA, "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj"))
	f.Add([]byte(good))
	cutSeeds(f, []byte(good+otlpLine(tidB, "m", otlpSpanJSON(tidB, "0000000000000002", "L00.attn.o_proj", "L00.attn.o_proj"))))
	f.Add([]byte(strings.Replace(good, `},{"traceId"`, `}{"traceId"`, 1))) // a comma missing
	f.Add([]byte(`{"result":{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"AQIDBAUGBwgJCgsMDQ4PEA==","spanId":"AQIDBAUGBwg=","name":"x","kind":"SPAN_KIND_SERVER","status":{"code":"STATUS_CODE_ERROR"},"attributes":[{"key":"a","value":{"arrayValue":{"values":[{"intValue":"1"},{"doubleValue":"NaN"}]}}}]}]}],"resource":{"attributes":[]}}]}}`))
	f.Add([]byte(`{"resourceSpans":null}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, data, FormatOTLPJSON) })
}

func FuzzReadJaegerV1(f *testing.F) {
	addFile(f, "testdata/jaeger_ui_download.json")
	cutSeeds(f, readSeed(f, "testdata/jaeger_ui_download.json"))
	f.Add([]byte(`{"data":[{"spans":[{"traceID":"1","spanID":"2","startTime":1,"duration":-1,"tags":[{"key":"k","type":"float64","value":"NaN"}]}]}],"errors":[{"code":1,"msg":"m"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, data, FormatJaegerV1) })
}

func FuzzReadKineto(f *testing.F) {
	addFile(f, "testdata/kineto_two_steps.json")
	cutSeeds(f, readSeed(f, "testdata/kineto_two_steps.json"))
	f.Add([]byte(`[{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2},`)) // an open array (allowed)
	// Engine ranges, piecewise graph replays, layers to place: one-step
	// traces of a 2-layer model (written by TestKinetoFuzzSeedsUpToDate).
	for _, name := range kinetoFuzzSeedFiles {
		addFile(f, name)
	}
	f.Add([]byte(`[{"ph":"X","cat":"user_annotation","name":"execute_context_0(0)_generation_1(1)","ts":0,"dur":100},{"ph":"X","cat":"cuda_runtime","name":"cudaGraphLaunch","ts":1,"dur":2,"args":{"correlation":5}},{"ph":"X","cat":"kernel","name":"_fwd_grouped_kernel_stage1","ts":5,"dur":1,"args":{"correlation":5}},{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce","ts":7,"dur":1,"args":{"correlation":5}}]`))
	f.Add([]byte(`[{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_bf16_RING_LL","ts":1.5,"dur":2,"pid":0,"tid":7,"args":{"correlation":1}}]`))
	f.Add([]byte(`{"distributedInfo":{"rank":-3},"baseTimeNanoseconds":9223372036854775807,"traceEvents":[{"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#0","ts":0,"dur":1e9},{"ph":"X","cat":"kernel","name":"k","ts":"1","dur":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, data, FormatKineto) })
}

// FuzzOpenSniff feeds any bytes through format sniffing (gzip included)
// and every reader. Seeds are small: the per-format fuzzers above take the
// large fixtures.
func FuzzOpenSniff(f *testing.F) {
	addFile(f, "testdata/jaeger_ui_download.json")
	f.Add([]byte(`{"schemaVersion":1,"traceEvents":[{"ph":"X","cat":"kernel","name":"fused_moe_kernel","ts":1,"dur":2}]}`))
	f.Add([]byte(otlpLine(tidA, "m")))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	// A gzip stream cut in its data and before its trailer.
	gz := gzipAll([]byte(otlpLine(tidA, "m") + otlpLine(tidB, "m")))
	f.Add(gz[:len(gz)/2])
	f.Add(gz[:len(gz)-8])
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRead(t, data, "") })
}

// kinetoFuzzSeedFiles are one-step traces of a 2-layer model in three
// structures (kinetoFuzzSeeds).
var kinetoFuzzSeedFiles = []string{
	"testdata/kineto/fuzz_seed_vllm_eager.json",
	"testdata/kineto/fuzz_seed_vllm_piecewise_noranges.json",
	"testdata/kineto/fuzz_seed_trtllm_graph.json",
}

// kinetoFuzzSeeds writes the seeds: vLLM eager with its ranges, vLLM
// piecewise graphs without ranges, TensorRT-LLM graph replays.
func kinetoFuzzSeeds() ([][]byte, error) {
	two := kinetogen.Model{Name: "two-layer", Layers: 2, DenseLayers: 1}
	sc := kinetogen.Scenario{Model: two, Dur: kinetogen.TinyDecode, World: 2, Steps: 1, Batch: 2, Seed: 1}
	var out [][]byte
	for _, write := range []func(*kinetogen.Writer){
		func(w *kinetogen.Writer) { kinetogen.VLLMEager(w, sc, true) },
		func(w *kinetogen.Writer) {
			kinetogen.VLLMPiecewise(w, sc, []kinetogen.StepKind{kinetogen.PrefillPiecewise}, false)
		},
		func(w *kinetogen.Writer) { kinetogen.TRTLLMGraphDecode(w, sc) },
	} {
		var b bytes.Buffer
		w := kinetogen.NewWriter(&b, kinetogen.Meta{World: 2, Device: "NVIDIA H200", SM: [2]int{9, 0}, Minimal: true})
		write(w)
		if err := w.Close(); err != nil {
			return nil, err
		}
		out = append(out, b.Bytes())
	}
	return out, nil
}

// TestKinetoFuzzSeedsUpToDate: the seed files are what kinetoFuzzSeeds
// writes (-update-kineto rewrites them).
func TestKinetoFuzzSeedsUpToDate(t *testing.T) {
	seeds, err := kinetoFuzzSeeds()
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range kinetoFuzzSeedFiles {
		if *updateKineto {
			if err := os.WriteFile(name, seeds[i], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		have, err := os.ReadFile(name)
		if err != nil || !bytes.Equal(have, seeds[i]) {
			t.Errorf("%s is not what kinetoFuzzSeeds writes (rerun with -update-kineto): %v", name, err)
		}
	}
}
