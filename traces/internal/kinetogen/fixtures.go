package kinetogen

import (
	"bytes"
	"compress/gzip"
	"fmt"
)

// Fixture is one generated trace file.
type Fixture struct {
	Name  string // file name under traces/testdata/kineto/
	Write func(w *Writer)
	Meta  Meta
}

// Generate writes f and returns the gzipped file and what was written.
func (f *Fixture) Generate() ([]byte, []KernelTruth, error) {
	var raw bytes.Buffer
	w := NewWriter(&raw, f.Meta)
	f.Write(w)
	if err := w.Close(); err != nil {
		return nil, nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, nil, err
	}
	return gz.Bytes(), w.Truth, nil
}

// Fixtures are the committed traces (traces/testdata/kineto), each
// mimicking one engine's structure.
func Fixtures() []Fixture {
	var fs []Fixture
	add := func(name string, sc Scenario, extra string, write func(*Writer, Scenario)) {

		m := sc.meta(extra)
		fs = append(fs, Fixture{Name: name, Meta: m, Write: func(w *Writer) { write(w, sc) }})
	}
	vllmVersion := `"vllm_version":"0.11.0"`
	// Kimi-K2.5, TP 8, rank 0 on an H200: vLLM FULL CUDA graphs, decode
	// batch 32, FlashMLA, Marlin INT4 experts, custom all-reduce.
	add("vllm_kimi-k2.5_tp8_rank0_graph_b32.pt.trace.json.gz",
		Scenario{Model: KimiK25, Dur: KimiH200Decode32, Rank: 0, World: 8, Steps: 4, Batch: 32, Seed: 1, AllReduce: vllmCustomAR8},
		vllmVersion, VLLMGraphDecode)
	// The tiny model at TP 4, eager (--enforce-eager), one file per rank,
	// execute_new_{n}_cached_{m} ranges of earlier vLLM V1.
	for r := 0; r < 4; r++ {
		add(fmt.Sprintf("vllm_tiny_tp4_rank%d_eager.pt.trace.json.gz", r),
			Scenario{Model: TinyMLAMoE, Dur: TinyDecode, Rank: r, World: 4, Steps: 3, Batch: 8, Seed: uint64(10 + r), AllReduce: vllmCustomAR4},
			"", func(w *Writer, sc Scenario) { VLLMEager(w, sc, true) })
	}
	// The same without step ranges: a bare eager trace.
	add("vllm_tiny_tp4_rank0_eager_noranges.pt.trace.json.gz",
		Scenario{Model: TinyMLAMoE, Dur: TinyDecode, Rank: 0, World: 4, Steps: 3, Batch: 8, Seed: 20, AllReduce: vllmCustomAR4},
		"", func(w *Writer, sc Scenario) { VLLMEager(w, sc, false) })
	// FULL_AND_PIECEWISE: a prefill in piecewise graphs, then decodes in
	// full graphs; with and without the ranges.
	kinds := []StepKind{PrefillPiecewise, DecodeFullGraph, DecodeFullGraph, DecodeFullGraph}
	add("vllm_tiny_tp4_rank0_piecewise.pt.trace.json.gz",
		Scenario{Model: TinyMLAMoE, Dur: TinyDecode, Rank: 0, World: 4, Batch: 2, Seed: 30, AllReduce: vllmCustomAR4},
		vllmVersion, func(w *Writer, sc Scenario) { VLLMPiecewise(w, sc, kinds, true) })
	add("vllm_tiny_tp4_rank0_piecewise_noranges.pt.trace.json.gz",
		Scenario{Model: TinyMLAMoE, Dur: TinyDecode, Rank: 0, World: 4, Batch: 2, Seed: 31, AllReduce: vllmCustomAR4},
		"", func(w *Writer, sc Scenario) { VLLMPiecewise(w, sc, kinds, false) })
	// SGLang, TP 2, CUDA-graph decode with step[DECODE bs=8] ranges.
	for r := 0; r < 2; r++ {
		add(fmt.Sprintf("sglang_tiny_tp2_rank%d_graph.trace.json.gz", r),
			Scenario{Model: TinyMLAMoE, Dur: TinyDecode, Rank: r, World: 2, Steps: 4, Batch: 8, Seed: uint64(40 + r)},
			"", SGLangGraphDecode)
	}
	// TensorRT-LLM on SM100, TP 4: graph replays, no step ranges.
	add("trtllm_tiny_tp4_rank0_graph.trace.json.gz",
		Scenario{Model: TinyMLAMoE, Dur: TinyDecode, Rank: 0, World: 4, Steps: 4, Batch: 8, Seed: 50},
		"", TRTLLMGraphDecode)
	for i := range fs {
		if fs[i].Name[:6] == "trtllm" {
			fs[i].Meta.Device, fs[i].Meta.SM = "NVIDIA B200", [2]int{10, 0}
		}
	}
	return fs
}
