package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// badCase is one command line that must be refused before any work: exit
// code, exactly one line on stderr that contains every want (the file,
// field or flag, and the expectation), no Go internals in it, and no file
// written at out. In args, want and out, "@" stands for the case's
// temporary directory; files are written there first.
type badCase struct {
	name  string
	files map[string]string // name under @ -> content
	args  []string
	code  int
	want  []string
	out   string // a path the command would write on success ("" none)
}

// goInternals are traces of Go in a message meant for people: a stack, a
// Go type or package-qualified name, encoding/json's wording, a bare EOF.
var goInternals = regexp.MustCompile(`goroutine|panic|\bmain\.|\[\]interface|\*json\.|Go value|\b(model|topology|sim|traces|nccltests|exec|json|pflag)\.[A-Z]|(^|[^a-z ]\s*|: )EOF\b|unexpected EOF`)

// tinyCfg is a small valid deepseek_v3 config.json (tiny-mla-moe's dims)
// with edit applied.
func tinyCfg(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	m := map[string]any{
		"model_type": "deepseek_v3", "hidden_size": 256, "num_hidden_layers": 4, "first_k_dense_replace": 1,
		"num_attention_heads": 8, "q_lora_rank": 128, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
		"v_head_dim": 32, "intermediate_size": 512, "moe_intermediate_size": 128, "n_routed_experts": 16,
		"n_shared_experts": 1, "num_experts_per_tok": 4, "vocab_size": 1024,
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// boxJSON is the rtxpro6000-switch preset as JSON with edit applied: cpu0
// <- hb0 <- sw0..sw3 (links 1, 4, 7, 10) <- two GPUs each (gpu0, gpu1 under
// sw0; gpu2, gpu3 under sw1; ...).
func boxJSON(t *testing.T, edit func(m map[string]any)) string {
	t.Helper()
	p, err := topology.Preset("rtxpro6000-switch")
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func addBoxLink(m map[string]any, a, b, typ string) {
	l := map[string]any{"a": a, "b": b, "type": typ, "bw_gbps": 54.0, "lat_us": 0.2}
	if typ == "pcie" {
		l["gen"], l["width"] = 5.0, 16.0
	}
	m["links"] = append(m["links"].([]any), l)
}

func boxGPU(m map[string]any, i int) map[string]any { return m["gpus"].([]any)[i].(map[string]any) }

// TestBadInput runs every case and checks the promises of badCase.
func TestBadInput(t *testing.T) {
	arLog, err := os.ReadFile("../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt")
	if err != nil {
		t.Fatal(err)
	}
	allReduce := string(arLog)
	// The same log as all_gather_perf output (redop "none"), and that with
	// 2 ranks instead of 8.
	allGather := strings.NewReplacer("all_reduce_perf", "all_gather_perf", "   sum  ", "  none  ").Replace(allReduce)
	twoRanks := strings.Replace(allGather, "nThread 1 nGpus 8", "nThread 1 nGpus 2", 1)
	otlpNoSpans := `{"resourceSpans":[]}`
	otlpBadSpan := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"L00.attn.o_proj","traceId":"zz"}]}]}]}`

	cases := []badCase{
		// ---- flags: usage errors (exit 2) naming the flag ----
		{name: "flag/tp 0", args: []string{"predict", "--tp", "0", "--plot", "@p.svg"}, code: 2, want: []string{"--tp 0", "want an integer from 1"}, out: "@p.svg"},
		{name: "flag/dp 0", args: []string{"predict", "--dp", "0"}, code: 2, want: []string{"--dp 0", "want an integer from 1"}},
		{name: "flag/dcp 0", args: []string{"predict", "--dcp", "0"}, code: 2, want: []string{"--dcp 0", "want an integer from 1"}},
		{name: "flag/tp negative", args: []string{"schedule", "--tp", "-8"}, code: 2, want: []string{"--tp -8", "want an integer from 1"}},
		{name: "flag/tp not a number", args: []string{"predict", "--tp", "eight"}, code: 2, want: []string{`"--tp"`, "must be an integer"}},
		{name: "flag/gpus negative", args: []string{"predict", "--gpus", "-1"}, code: 2, want: []string{"--gpus -1", "want 0 (all) or more"}},
		{name: "flag/top negative (predict)", args: []string{"predict", "--top", "-1", "--plot", "@p.svg"}, code: 2, want: []string{"--top -1", "want 0 (all) or more"}, out: "@p.svg"},
		{name: "flag/top negative (plan)", args: []string{"plan", "--top", "-2", "--plot", "@p.svg"}, code: 2, want: []string{"--top -2", "want 0 (all) or more"}, out: "@p.svg"},
		{name: "flag/top negative (compare)", files: map[string]string{"run.json": otlpNoSpans},
			args: []string{"compare", "--trace", "@run.json", "--top", "-1", "--plot", "@p.svg"}, code: 2, want: []string{"--top -1", "want 0 (all) or more"}, out: "@p.svg"},
		{name: "flag/steps negative", args: []string{"run", "--steps", "-1", "--trace", "file:@t.jsonl"}, code: 2, want: []string{"--steps -1", "want steps >= 1"}, out: "@t.jsonl"},
		{name: "flag/warmup negative", args: []string{"run", "--warmup", "-1", "--trace", "file:@t.jsonl"}, code: 2, want: []string{"--warmup -1", "warmup >= 0"}, out: "@t.jsonl"},
		{name: "flag/batch 0", args: []string{"predict", "--batch", "0"}, code: 2, want: []string{"--batch 0", "want an integer from 1"}},
		{name: "flag/context negative", args: []string{"advise", "--context", "-5"}, code: 2, want: []string{"--context -5", "want an integer from 1"}},
		// 10^6 x 1.6 x 10^7 = 1.6e13 tokens of KV cache > 2^40.
		{name: "flag/batch x context overflow", args: []string{"predict", "--batch", "1000000", "--context", "16000000"}, code: 2,
			want: []string{"--batch 1000000", "batch x context at most 1099511627776"}},
		// nvidia/Kimi-K2.5-NVFP4: max_position_embeddings 262144 (yarn
		// 64 x 4096), the max_model_len vLLM serves it at.
		{name: "flag/context above max_model_len", args: []string{"predict", "--model", "kimi-k2.5-nvfp4", "--topo", "nvswitch:8xb200", "--context", "1M"}, code: 2,
			want: []string{"--context 1048576", "at most 262144 tokens"}},
		{name: "flag/context above max_model_len (plan)", args: []string{"plan", "--plan", "tp8", "--context", "4K,300K"}, code: 2,
			want: []string{"--context 307200", "at most 262144 tokens"}},
		{name: "flag/mtp negative", args: []string{"predict", "--mtp", "-1"}, code: 2, want: []string{"--mtp -1", "want an integer from 0 to 16"}},
		{name: "flag/kv dtype", args: []string{"predict", "--kv-dtype", "int4"}, code: 2, want: []string{"--kv-dtype", "want bf16, fp16 or fp8"}},
		// Unknown to every parser and a weight format: the same list, the KV dtypes'.
		{name: "flag/kv dtype unknown", args: []string{"predict", "--kv-dtype", "int8"}, code: 2, want: []string{`--kv-dtype "int8": want bf16, fp16 or fp8`}},
		{name: "flag/kv dtype weight format", args: []string{"predict", "--kv-dtype", "nvfp4"}, code: 2, want: []string{`--kv-dtype "nvfp4": want bf16, fp16 or fp8`}},
		{name: "flag/kv dtype plan", args: []string{"plan", "--kv-dtype", "int8"}, code: 2, want: []string{`--kv-dtype "int8": want bf16, fp16 or fp8`}},
		{name: "flag/moe routing", args: []string{"predict", "--moe-routing", "zipf", "--plot", "@p.svg"}, code: 2,
			want: []string{`--moe-routing "zipf"`, "want uniform, balanced or power-law-ALPHA"}, out: "@p.svg"},
		{name: "flag/moe routing exponent", args: []string{"plan", "--moe-routing", "power-law-0.9", "--plan", "tp8", "--batch", "1", "--context", "4096"}, code: 2,
			want: []string{`--moe-routing "power-law-0.9"`, "ALPHA above 1"}},
		{name: "flag/output format", args: []string{"predict", "--output", "xml"}, code: 2, want: []string{`--output "xml"`, "want one of"}},
		{name: "flag/schedule rank", args: []string{"schedule", "--rank", "99"}, code: 2, want: []string{"--rank 99", "want -1 or 0..7"}},
		{name: "flag/calibrate cpu ranks", args: []string{"calibrate", "--backend", "cpu", "--ranks", "0", "-o", "@cal.json"}, code: 2,
			want: []string{"--ranks 0", "want 1..64"}, out: "@cal.json"},
		{name: "flag/custom ar multimem", args: []string{"predict", "--custom-ar", "multimem", "--topo", "h200-nvswitch"}, code: 2,
			want: []string{`"--custom-ar"`, `"multimem" is the engine's own choice`, "auto runs torch's symmetric-memory multimem all-reduce where the engine does"}},
		{name: "flag/nccl algo NVLS", args: []string{"predict", "--nccl-algo", "NVLS", "--topo", "h200-nvswitch"}, code: 2,
			want: []string{"--nccl-algo NVLS", "NVLS is not modelled"}},
		{name: "flag/verdict backend", args: []string{"verdict", "--backend", "gpu", "-o", "@v"}, code: 2,
			want: []string{`--backend "gpu": want one of cpu, cuda`}, out: "@v"},
		{name: "flag/gpu mem util", args: []string{"predict", "--gpu-mem-util", "1.5"}, code: 2, want: []string{"--gpu-mem-util 1.5", "(0,1]"}},

		// ---- configs: --model FILE is a usage error naming the flag, the file
		// and the field (exit 2), as --topo FILE is; model load FILE exit 1 ----
		{name: "config/empty", files: map[string]string{"m/config.json": ""}, args: []string{"predict", "--model", "@m/config.json", "--plot", "@p.svg"},
			code: 2, want: []string{"--model: @m/config.json: empty: want a JSON object"}, out: "@p.svg"},
		{name: "config/array", files: map[string]string{"m/config.json": "[1, 2]"}, args: []string{"model", "load", "@m/config.json"},
			code: 1, want: []string{"@m/config.json: got an array, want a JSON object"}},
		{name: "config/truncated", files: map[string]string{"m/config.json": `{"model_type": "deepseek_v3", "hidden_size": `}, args: []string{"model", "show", "--model", "@m"},
			code: 2, want: []string{"--model: @m/config.json: truncated"}},
		{name: "config/not JSON", files: map[string]string{"m/config.json": "model_type = deepseek_v3"}, args: []string{"predict", "--model", "@m/config.json"},
			code: 2, want: []string{"@m/config.json: line 1: not JSON"}},
		{name: "config/unknown model_type", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) { m["model_type"] = "llama" })},
			args: []string{"predict", "--model", "@m/config.json"}, code: 2, want: []string{`field "model_type"`, "want one of deepseek_v3"}},
		{name: "config/missing field", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) { delete(m, "hidden_size") })},
			args: []string{"predict", "--model", "@m/config.json"}, code: 2, want: []string{`@m/config.json: field "hidden_size": missing, want a positive integer`}},
		{name: "config/negative dim", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) { m["num_attention_heads"] = -8 })},
			args: []string{"schedule", "--model", "@m/config.json"}, code: 2, want: []string{`field "num_attention_heads": got -8, want a positive integer`}},
		{name: "config/string dim", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) { m["vocab_size"] = "1024" })},
			args: []string{"predict", "--model", "@m/config.json"}, code: 2, want: []string{`field "vocab_size": got string "1024"`}},
		{name: "config/hidden above its bound", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) { m["hidden_size"] = 1 << 21 })},
			args: []string{"predict", "--model", "@m/config.json"}, code: 2, want: []string{`field "hidden_size": got 2097152`, "at most 1048576"}},
		{name: "config/head dim above its bound", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) { m["v_head_dim"] = 1 << 20 })},
			args: []string{"predict", "--model", "@m/config.json"}, code: 2, want: []string{`field "v_head_dim"`, "at most 4096"}},
		// Every dim at its bound, the product not: 1023 MoE layers x 2^14
		// experts x 3 x 2^20 x 2^20 = 5.53e19 parameters > 2^50 (the config
		// that printed "weights -9223372036.9 GB" before).
		{name: "config/parameters overflow", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) {
			m["num_hidden_layers"], m["n_routed_experts"], m["hidden_size"], m["moe_intermediate_size"] = 1024, 1<<14, 1<<20, 1<<20
		})}, args: []string{"predict", "--model", "@m/config.json", "--plot", "@p.svg"}, code: 2,
			want: []string{`field "num_hidden_layers x n_routed_experts x hidden_size x moe_intermediate_size"`, "5.53e+19 of them in routed experts", "want at most 1125899906842624 (2^50) parameters"}, out: "@p.svg"},
		// 1024 layers x (65536 + 4096) values x 4 B = 285,212,672 B per token.
		{name: "config/kv per token overflow", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) {
			m["num_hidden_layers"], m["kv_lora_rank"], m["qk_rope_head_dim"] = 1024, 1<<16, 1<<12
		})}, args: []string{"model", "show", "--model", "@m/config.json"}, code: 2,
			want: []string{"(kv_lora_rank + qk_rope_head_dim)", "got 285212672 bytes of KV cache per token", "want at most 4194304"}},
		{name: "config/top-k above experts", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) { m["num_experts_per_tok"] = 17 })},
			args: []string{"predict", "--model", "@m/config.json"}, code: 2, want: []string{`field "num_experts_per_tok": 17`, "at most n_routed_experts (16)"}},
		{name: "config/quantization not an object", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) { m["quantization_config"] = []int{1} })},
			args: []string{"predict", "--model", "@m/config.json"}, code: 2, want: []string{`field "quantization_config": got an array, want an object`}},
		{name: "config/unknown quant method", files: map[string]string{"m/config.json": tinyCfg(t, func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "gptq"}
		})}, args: []string{"predict", "--model", "@m/config.json"}, code: 2, want: []string{`field "quantization_config.quant_method": "gptq"`, `want one of "fp8"`}},
		{name: "config/hf_quant_config algo", files: map[string]string{"m/config.json": tinyCfg(t, nil), "m/hf_quant_config.json": `{"quantization": {"quant_algo": "INT8"}}`},
			args: []string{"predict", "--model", "@m"}, code: 2, want: []string{`@m/hf_quant_config.json: field "quantization.quant_algo": "INT8", want "NVFP4" or "FP8"`}},
		{name: "config/draft model truncated", files: map[string]string{"d/config.json": `{"model_type": "deepseek_v3", "hidden_size": `},
			args: []string{"predict", "--spec", "draft", "--draft-model", "@d/config.json"}, code: 2, want: []string{"--draft-model: @d/config.json: truncated"}},
		{name: "config/advise transfer truncated", files: map[string]string{"m/config.json": `{"model_type": "deepseek_v3", "hidden_size": `},
			args: []string{"advise", "--transfer", "@m/config.json", "--plot", "@p.svg"}, code: 2, want: []string{"--transfer: @m/config.json: truncated"}, out: "@p.svg"},
		{name: "config/directory without config.json", files: map[string]string{"m/README.md": "weights elsewhere"},
			args: []string{"predict", "--model", "@m"}, code: 2, want: []string{"--model @m/config.json: no such file or directory, want a config.json"}},

		// ---- topologies: --topo FILE is a usage error (exit 2), topo show FILE exit 1 ----
		{name: "topo/empty", files: map[string]string{"box.json": ""}, args: []string{"predict", "--topo", "@box.json"}, code: 2,
			want: []string{"--topo @box.json", "box.json: empty: want a JSON object"}},
		{name: "topo/array", files: map[string]string{"box.json": "[]"}, args: []string{"predict", "--topo", "@box.json"}, code: 2,
			want: []string{"box.json: line 1: want a JSON object, got an array"}},
		{name: "topo/truncated", files: map[string]string{"box.json": `{"name": "x", "gpus": [`}, args: []string{"advise", "--topo", "@box.json"}, code: 2,
			want: []string{"box.json: truncated"}},
		{name: "topo/field of the wrong kind", files: map[string]string{"box.json": boxJSON(t, func(m map[string]any) { m["gpus"] = map[string]any{} })},
			args: []string{"predict", "--topo", "@box.json"}, code: 2, want: []string{`box.json: line 1: field "gpus": want a JSON array, got an object`}},
		{name: "topo/string for integer", files: map[string]string{"box.json": boxJSON(t, func(m map[string]any) { boxGPU(m, 0)["pcie_gen"] = "5" })},
			args: []string{"predict", "--topo", "@box.json"}, code: 2, want: []string{`field "gpus.pcie_gen": want an integer, got a string`}},
		{name: "topo/unknown field", files: map[string]string{"box.json": boxJSON(t, func(m map[string]any) { m["nvlinks"] = 4 })},
			args: []string{"predict", "--topo", "@box.json"}, code: 2, want: []string{`box.json: unknown field "nvlinks"`}},
		{name: "topo/gpu with two parents", files: map[string]string{"box.json": boxJSON(t, func(m map[string]any) { addBoxLink(m, "gpu3", "sw2", "pcie") })},
			args: []string{"predict", "--topo", "@box.json", "--plot", "@p.svg"}, code: 2, want: []string{`gpu "gpu3": 2 PCIe parents ("sw1", "sw2"): want one`}, out: "@p.svg"},
		{name: "topo/cycle", files: map[string]string{"box.json": boxJSON(t, func(m map[string]any) { addBoxLink(m, "sw1", "sw0", "pcie") })},
			args: []string{"topo", "show", "@box.json", "-o", "@copy.json"}, code: 1,
			want: []string{`node "sw1" closes a cycle in the PCIe tree (sw0 - hb0 - sw1 - sw0)`}, out: "@copy.json"},
		{name: "topo/switch under two CPUs", files: map[string]string{"box.json": boxJSON(t, func(m map[string]any) {
			m["nodes"] = append(m["nodes"].([]any), map[string]any{"id": "cpu1", "kind": "cpu", "socket": 1}, map[string]any{"id": "hb1", "kind": "host_bridge", "socket": 1})
			addBoxLink(m, "hb1", "cpu1", "internal")
			addBoxLink(m, "cpu0", "cpu1", "xgmi")
			addBoxLink(m, "sw3", "hb1", "pcie")
		})}, args: []string{"predict", "--topo", "@box.json"}, code: 2, want: []string{`node "sw3" hangs under two CPUs through PCIe (cpu0 - hb0 - sw3 - hb1 - cpu1)`}},
		{name: "topo/no gpus", files: map[string]string{"box.json": boxJSON(t, func(m map[string]any) { m["gpus"] = []any{} })},
			args: []string{"topo", "show", "@box.json"}, code: 1, want: []string{"gpus: no GPU"}},

		// ---- nccl-tests logs (calibrate --nccl-tests, exit 1, nothing written) ----
		{name: "nccl-tests/two collectives", files: map[string]string{"both.txt": allReduce + allGather},
			args: []string{"calibrate", "--nccl-tests", "@both.txt", "-o", "@cal.json"}, code: 1,
			want: []string{"@both.txt:", "all_gather_perf starts after 27 result rows of all_reduce_perf", "split the file before line"}, out: "@cal.json"},
		{name: "nccl-tests/two rank counts", files: map[string]string{"both.txt": allGather + twoRanks},
			args: []string{"calibrate", "--nccl-tests", "@both.txt", "-o", "@cal.json"}, code: 1,
			want: []string{"a run with nThread 1 nGpus 2 starts after 27 result rows of a run with nThread 1 nGpus 8"}, out: "@cal.json"},
		{name: "nccl-tests/no rows", files: map[string]string{"log.txt": "# nThread 1 nGpus 8\nNCCL INFO hello\n"},
			args: []string{"calibrate", "--nccl-tests", "@log.txt", "-o", "@cal.json"}, code: 1,
			want: []string{"@log.txt:2: no nccl-tests result rows", "want lines like"}, out: "@cal.json"},
		// The 8-rank log cut inside its row of 134217728 B (line 45), and
		// after that row, before the table's closing lines.
		{name: "nccl-tests/cut mid-row", files: map[string]string{"log.txt": allReduce[:strings.Index(allReduce, "11424.39   11.75")+len("11424.39   ")]},
			args: []string{"calibrate", "--nccl-tests", "@log.txt", "-o", "@cal.json"}, code: 1,
			want: []string{"@log.txt:45: the nccl-tests log is cut or damaged: the log ends mid-row", "the file was cut"}, out: "@cal.json"},
		{name: "nccl-tests/cut after a row", files: map[string]string{"log.txt": allReduce[:strings.Index(allReduce, "   268435456")]},
			args: []string{"calibrate", "--nccl-tests", "@log.txt", "-o", "@cal.json"}, code: 1,
			want: []string{"@log.txt:45: the nccl-tests log is cut or damaged: the table headed at line 19 stops after 25 result rows"}, out: "@cal.json"},
		{name: "nccl-tests/missing file", args: []string{"calibrate", "--nccl-tests", "@none.txt", "-o", "@cal.json"}, code: 2,
			want: []string{"--nccl-tests @none.txt: no such file"}, out: "@cal.json"},

		// ---- traces (exit 1, nothing written) ----
		{name: "trace/empty file", files: map[string]string{"t.json": ""}, args: []string{"trace", "read", "@t.json"}, code: 1,
			want: []string{"@t.json: empty: want OTLP JSON, Jaeger JSON or a Chrome/Kineto trace"}},
		{name: "trace/not a trace", files: map[string]string{"t.json": `{"model_type": "deepseek_v3"}`}, args: []string{"trace", "read", "@t.json"}, code: 1,
			want: []string{"@t.json: unknown trace format", `want a top-level "resourceSpans"`}},
		{name: "trace/otlp without spans", files: map[string]string{"t.json": otlpNoSpans}, args: []string{"trace", "read", "@t.json"}, code: 1,
			want: []string{"@t.json: no span read (otlp-json): want spans in resourceSpans[].scopeSpans[].spans[]"}},
		{name: "trace/every span bad", files: map[string]string{"t.json": otlpBadSpan}, args: []string{"compare", "--trace", "@t.json", "--plot", "@p.svg"}, code: 1,
			want: []string{"@t.json: no span read (otlp-json): 1 left out", `traceId "zz" is not 32 hex digits`}, out: "@p.svg"},
		{name: "trace/truncated", files: map[string]string{"t.json": `{"resourceSpans":[{"scopeSpans":[`}, args: []string{"trace", "read", "@t.json"}, code: 1,
			want: []string{"@t.json: JSON ends inside resourceSpans[0].scopeSpans at byte 33 (line 1): the file was cut"}},
		{name: "trace/wrong forced format", files: map[string]string{"t.json": otlpBadSpan}, args: []string{"trace", "read", "--format", "jaeger-v1", "@t.json"}, code: 1,
			want: []string{"no span read (jaeger-v1)", "read as jaeger-v1 as asked, but its content looks like otlp-json"}},
		{name: "trace/kineto without ph and cat", files: map[string]string{"t.json": `{"traceEvents":[{"name":"fused_moe_kernel","ts":1,"dur":2}]}`},
			args: []string{"trace", "read", "@t.json"}, code: 1, want: []string{"@t.json: no span read (kineto)", `want complete events ("ph": "X")`}},
		{name: "trace/calibrate from no spans", files: map[string]string{"t.json": otlpNoSpans}, args: []string{"calibrate", "--trace", "@t.json", "-o", "@cal.json"}, code: 1,
			want: []string{"@t.json: no span read"}, out: "@cal.json"},

		// ---- serving results and request traces: one line naming the
		// file and field, before any work ----
		{name: "serving/result field", files: map[string]string{"r.json": `{"median_ttft_ms": "fast", "completed": 4, "duration": 2, "total_input_tokens": 40, "total_output_tokens": 8}`},
			args: []string{"simulate", "--compare", "@r.json", "--pareto", "@p.png"}, code: 2, want: []string{`@r.json:1: field "median_ttft_ms": want a number, got "fast"`}, out: "@p.png"},
		{name: "serving/result unknown", files: map[string]string{"r.json": `{"qps": 3}`},
			args: []string{"calibrate", "--serving", "@r.json", "-o", "@o.json"}, code: 2, want: []string{"@r.json:1", "not a serving benchmark result"}, out: "@o.json"},
		{name: "serving/result second line", files: map[string]string{"r.jsonl": "{\"mean_e2e_latency_ms\": 5, \"completed\": 2, \"duration\": 1, \"total_input_tokens\": 4, \"total_output_tokens\": 4}\n{\"mean_e2e_latency_ms\": [1]}\n"},
			args: []string{"simulate", "--compare", "@r.jsonl"}, code: 2, want: []string{`@r.jsonl:2: field "mean_e2e_latency_ms"`}},
		{name: "serving/compare with a load", files: map[string]string{"r.json": "{}"},
			args: []string{"simulate", "--compare", "@r.json", "--qps", "2"}, code: 2, want: []string{"--compare with --qps", "drop --qps"}},
		{name: "serving/mooncake hash", files: map[string]string{"t.jsonl": `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": ["a"]}`},
			args: []string{"simulate", "--requests-file", "@t.jsonl", "--report", "@r.html"}, code: 2, want: []string{`@t.jsonl:1: field "hash_ids"`, "want a list of integers"}, out: "@r.html"},
		{name: "serving/replay without a trace", args: []string{"simulate", "--replay-qps", "2"}, code: 2, want: []string{"--replay-qps 2", "needs --requests-file"}},
		{name: "serving/for-qps without a sweep", args: []string{"simulate", "--qps", "1", "--for-qps", "20"}, code: 2, want: []string{"--for-qps 20", "needs --sweep-qps"}},
		{name: "serving/policy", args: []string{"simulate", "--qps", "1", "--policy", "trtllm"}, code: 2, want: []string{"--policy", "want vllm or sglang"}},
		{name: "serving/overheads file", files: map[string]string{"o.json": `{"overheads": {"step_us": -3}}`},
			args: []string{"simulate", "--qps", "1", "--serving-overheads", "@o.json"}, code: 2, want: []string{"@o.json:1", "step_us = -3"}},
		{name: "nccl-tests/cut JSON", files: map[string]string{"a.json": `{"version":3,"args":["all_reduce_perf"],"results":[{"size":1024,`},
			args: []string{"calibrate", "--nccl-tests", "@a.json", "-o", "@cal.json"}, code: 1, want: []string{"@a.json:1", "before its closing brace"}, out: "@cal.json"},
	}
	if len(cases) < 40 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			at := func(s string) string { return strings.ReplaceAll(s, "@", dir+string(filepath.Separator)) }
			for name, body := range c.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := make([]string, len(c.args))
			for i, a := range c.args {
				args[i] = at(a)
			}
			code, _, stderr := runCLI(t, args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, stderr)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
				t.Errorf("stderr is not one line: %q", stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, at(w)) {
					t.Errorf("stderr %q lacks %q", stderr, at(w))
				}
			}
			if m := goInternals.FindString(stderr); m != "" {
				t.Errorf("stderr %q shows Go internals (%q)", stderr, m)
			}
			if c.out != "" {
				if _, err := os.Stat(at(c.out)); err == nil {
					t.Errorf("%s was written", at(c.out))
				}
			}
		})
	}
}

// TestBadInputWarnings: input that can be used but is suspect is used,
// with one warning line each on stderr. An nccl-tests row whose #wrong is
// not 0 (the first row, line 21 of the log) is fitted and warned about.
func TestBadInputWarnings(t *testing.T) {
	b, err := os.ReadFile("../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if !strings.HasPrefix(strings.TrimSpace(lines[20]), "8 ") || !strings.HasSuffix(lines[20], "0") {
		t.Fatalf("line 21 is not the first result row: %q", lines[20])
	}
	lines[20] = lines[20][:len(lines[20])-1] + "3"
	dir := t.TempDir()
	log, out := filepath.Join(dir, "all_reduce_perf.txt"), filepath.Join(dir, "cal.json")
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "calibrate", "--nccl-tests", log, "--topo", "rtxpro6000-2s", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := log + ": warning: 1 of 27 rows report #wrong > 0 (first at line 21)"
	if !strings.Contains(stderr, want) {
		t.Errorf("stderr %q lacks %q", stderr, want)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("calibrated topology not written: %v", err)
	}
}

// TestBadInputHowIsCLI: what advise prints as "tpscope <Exec>" for each
// optimization is a command line tpscope accepts (its verb and flags
// parse), with no internal API name in it.
func TestBadInputHowIsCLI(t *testing.T) {
	a, err := model.Preset("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	box, err := topology.Resolve("rtxpro6000-2s", 0)
	if err != nil {
		t.Fatal(err)
	}
	sc := sim.Scenario{Arch: a, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 1, Context: 4096}, Topo: box, Options: sim.DefaultOptions()}
	apiName := regexp.MustCompile(`\b[a-z]+\.[A-Z][A-Za-z]*`)
	n := 0
	for _, e := range advise.Catalog(advise.CatalogOptions{}) {
		if e.HowTo == nil {
			continue
		}
		h := e.HowTo(sc)
		if h.Exec == "" {
			continue
		}
		n++
		t.Run(e.Name, func(t *testing.T) {
			if m := apiName.FindString(h.Exec); m != "" {
				t.Errorf("Exec %q names %q", h.Exec, m)
			}
			line, _, _ := strings.Cut(h.Exec, " (") // a parenthesis explains
			args := strings.Fields(line)
			v, rest := findVerb(args)
			if v == nil {
				t.Fatalf("Exec %q: no verb %q", h.Exec, args[0])
			}
			if err := bindFlags(v).Parse(rest); err != nil {
				t.Errorf("Exec %q: %v", h.Exec, err)
			}
		})
	}
	if n < 4 {
		t.Errorf("%d entries with Exec, want the graphs, KV, one-shot, fusion and box entries", n)
	}
}
