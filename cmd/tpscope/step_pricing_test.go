package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestOverlapRefused: --overlap moves collectives to a second stream, which
// overlaps only compute the schedule marks independent of them; the
// builder marks none (every op waits for the one before), so the flag
// priced the same step and only blanked its idle time. Every verb that
// prices a step refuses it in one line naming the flag.
func TestOverlapRefused(t *testing.T) {
	for _, args := range [][]string{
		{"predict", "--overlap"},
		{"predict", "--overlap", "--ep", "--dp", "2", "--tp", "4", "--batch", "8"},
		{"predict", "--overlap", "--model", "deepseek-v3", "--topo", "nvswitch:8xb200", "--phase", "prefill", "--context", "1024"},
		{"advise", "--overlap"},
		{"plan", "--overlap", "--tp", "8", "--batch", "1", "--context", "4096"},
		{"run", "--overlap", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "1", "--topo", "pcie-1s:1xl4"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, stderr := runCLI(t, args...)
			if code != 2 || !strings.Contains(stderr, "--overlap: the step's schedule marks no op independent") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q: want exit 2 and one line refusing --overlap", code, out, stderr)
			}
		})
	}
}

// TestPredictTopCounts: --top N lists N longest ops as it lists N op
// names, 0 lists all (its own error says "0 (all)"), and the JSON's
// top_ops holds the ops the table lists. The table listed at most the 10
// the prediction kept and none at --top 0.
func TestPredictTopCounts(t *testing.T) {
	longest := func(out string) []string {
		_, after, ok := strings.Cut(out, "longest ops\n")
		if !ok {
			t.Fatalf("no longest ops table in %q", out)
		}
		lines := strings.Split(strings.TrimSpace(after), "\n")
		return lines[1:] // the header
	}
	m := predictJSONObject(t, "--model", "tiny-mla-moe", "--tp", "2", "--top", "0")
	ops := m["ops"].([]any)
	rank0 := 0
	for _, o := range ops {
		if o.(map[string]any)["rank"].(float64) == 0 {
			rank0++
		}
	}
	if got := len(m["top_ops"].([]any)); got != rank0 {
		t.Errorf("--top 0: JSON top_ops has %d ops, want all %d of rank 0", got, rank0)
	}
	for _, c := range []struct {
		top  string
		want int
	}{{"0", rank0}, {"20", 20}, {"3", 3}} {
		code, out, stderr := runCLI(t, "predict", "--model", "tiny-mla-moe", "--tp", "2", "--top", c.top)
		if code != 0 {
			t.Fatalf("--top %s: exit %d: %s", c.top, code, stderr)
		}
		if got := len(longest(out)); got != c.want {
			t.Errorf("--top %s: %d longest ops listed, want %d", c.top, got, c.want)
		}
		m := predictJSONObject(t, "--model", "tiny-mla-moe", "--tp", "2", "--top", c.top)
		if got := len(m["top_ops"].([]any)); got != c.want {
			t.Errorf("--top %s: JSON top_ops has %d ops, want the table's %d", c.top, got, c.want)
		}
	}
}

// TestModelShowFP16Selected: --kv-dtype takes fp16, and model show marks
// the row the capacity is for; it listed bf16 and fp8 only, neither
// selected. Kimi-K2.5's 61 layers x 576 latent values x 2 bytes over TP 8
// (every rank holds the whole latent) are 70272 B a token, bf16's too.
func TestModelShowFP16Selected(t *testing.T) {
	code, out, stderr := runCLI(t, "model", "show", "kimi-k2.5", "--kv-dtype", "fp16")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var selected []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "(selected)") {
			selected = append(selected, strings.Join(strings.Fields(l), " "))
		}
	}
	if want := "fp16 (selected) 70272"; len(selected) != 1 || !strings.HasPrefix(selected[0], want) {
		t.Fatalf("selected rows %q, want one starting %q in:\n%s", selected, want, out)
	}
	code, out, stderr = runCLI(t, "model", "show", "kimi-k2.5", "--kv-dtype", "fp16", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, `"fp16": 70272`) {
		t.Errorf("JSON holds no fp16 bytes per token: %s", out)
	}
}

// TestKVDtypeFlagAnyCase: --kv-dtype FP8 is fp8 (model.ParseKVDtype reads
// the names in any case): it had been refused while fp8 was taken. The
// row it selects is fp8's, as the lowercase flag's.
func TestKVDtypeFlagAnyCase(t *testing.T) {
	code, out, stderr := runCLI(t, "model", "show", "kimi-k2.5", "--kv-dtype", "FP8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "fp8 (selected)") {
		t.Errorf("--kv-dtype FP8 selected no fp8 row:\n%s", out)
	}
}

// TestGraphSizesUnused: capture sizes pad a graphed step and size
// SGLang's default KV reserve; an eager step (graphs off, or a prefill
// step of an engine that replays decode steps only) under a KV budget no
// capture size enters was priced the same under any list while the
// options line printed it. Refused there in one line; kept where it
// prices something (a vLLM prefill step whose tokens fit a size).
func TestGraphSizesUnused(t *testing.T) {
	trt := []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--engine", "trtllm"}
	checkUsageErrors(t, []usageCase{
		{"prefill", append([]string{"predict", "--phase", "prefill", "--graph-sizes", "1,2,4"}, trt...), "--graph-sizes 1+2+4: a prefill step runs eagerly (trtllm@1.3 replays CUDA graphs for decode steps only)"},
		{"eager", []string{"predict", "--cuda-graphs=false", "--graph-sizes", "1,2"}, "--graph-sizes 1+2: the step runs eagerly (--cuda-graphs=false)"},
		{"SGLang prefill at a given fraction", []string{"predict", "--engine", "sglang", "--phase", "prefill", "--graph-sizes", "1,2", "--gpu-mem-util", "0.8"}, "mem_fraction_static 0.8, given"},
		{"schedule prefill", append([]string{"schedule", "--phase", "prefill", "--graph-sizes", "1,2"}, trt...), "--graph-sizes 1+2: a prefill step runs eagerly"},
	})
	if w := predictLines(t, "--phase", "prefill", "--context", "100", "--graph-sizes", "1,2,4,128")["workload"]; !strings.Contains(w, "graph of 128 tokens") {
		t.Errorf("vLLM prefill of 100 tokens under --graph-sizes 1,2,4,128: workload %q, want the graph of 128 tokens", w)
	}
	// SGLang's default reserve counts the largest captured batch whether
	// graphs run or not: the list moves its KV pool.
	pool := func(args ...string) string {
		l := predictLines(t, append([]string{"--engine", "sglang"}, args...)...)["memory per GPU"]
		if l == "" {
			t.Fatalf("no memory line for %v", args)
		}
		return l
	}
	if a, b := pool("--phase", "prefill", "--graph-sizes", "1,2"), pool("--phase", "prefill"); a == b || !strings.Contains(a, "cuda_graph_max_bs 2") {
		t.Errorf("SGLang prefill: the capture list did not reach the KV reserve: %q vs %q", a, b)
	}
	if code, _, stderr := runCLI(t, "advise", "--cuda-graphs=false", "--graph-sizes", "1,2"); code != 0 {
		t.Errorf("advise prices the cuda-graphs entry with the list, yet exit %d: %s", code, stderr)
	}
}

// TestCUDAGraphsUnusedOnPrefill: a prefill step that replays no graph
// (an engine that graphs decode steps only, or tokens above the largest
// capture size) was priced the same with --cuda-graphs on and off, the
// options line alone saying "eager" (sim's TestCUDAGraphsUnused prices
// both). Refused in one line there; a vLLM prefill that fits a capture
// size, which it replays piecewise, keeps the flag, and advise still
// prices its cuda-graphs entry.
func TestCUDAGraphsUnusedOnPrefill(t *testing.T) {
	const decodeOnly = " replays CUDA graphs for decode steps only), so the flag changes nothing of it: leave it out"
	checkUsageErrors(t, []usageCase{
		{"vllm", []string{"predict", "--engine", "vllm@0.16-nightly", "--phase", "prefill", "--cuda-graphs=false"}, "--cuda-graphs false: a prefill step of 4096 tokens a group is above vllm@0.16-nightly's largest CUDA-graph capture size (512 tokens): it runs eagerly with graphs on or off, so the flag changes nothing of it"},
		{"on", []string{"predict", "--engine", "vllm@0.16-nightly", "--phase", "prefill", "--cuda-graphs"}, "--cuda-graphs true: a prefill step of 4096 tokens"},
		{"sglang", []string{"predict", "--engine", "sglang", "--phase", "prefill", "--cuda-graphs=false"}, "--cuda-graphs false: a prefill step runs eagerly (sglang@0.5" + decodeOnly},
		{"executor", []string{"predict", "--engine", "executor", "--model", "tiny-mla-moe", "--tp", "2", "--phase", "prefill", "--cuda-graphs=false"}, "--cuda-graphs false: a prefill step of 4096 tokens a group is above executor@1's largest"},
		{"trtllm", []string{"predict", "--engine", "trtllm", "--topo", "h200-nvswitch", "--model", "deepseek-v3", "--tp", "8", "--phase", "prefill", "--cuda-graphs=false"}, "--cuda-graphs false: a prefill step runs eagerly (trtllm@1.3" + decodeOnly},
		{"schedule", []string{"schedule", "--engine", "vllm@0.16-nightly", "--phase", "prefill", "--cuda-graphs=false"}, "--cuda-graphs false: a prefill step of 4096 tokens"},
	})
	for _, args := range [][]string{
		{"predict", "--phase", "decode", "--cuda-graphs=false"},
		{"predict", "--phase", "prefill", "--context", "256", "--cuda-graphs=false"},
		// vLLM 0.24 takes its graphs' estimate off the pool only with
		// graphs on: the flag sizes another pool whatever the step runs.
		{"predict", "--phase", "prefill", "--cuda-graphs=false"},
		{"advise", "--phase", "prefill", "--cuda-graphs=false", "--no-sweep", "--transfer", "", "--compare-topos", "", "--entries", "cuda-graphs"},
	} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}

// TestExecutorMemoryIsItsOwn: the executor allocates the step's own KV
// cache, no serving engine's pool (it refuses --gpu-mem-util), yet its
// predictions sized the memory as vLLM's pool at gpu_memory_utilization
// 0.9 and refused a step it runs: Kimi-K2.5's TP-8 shard at batch 8 on
// an 80 GiB H100, which the README's verdict runs measured. Its weights
// (76.2 GB) + activations (2.2 GB) + 8 x 4097 tokens x 70272 B (2.3 GB)
// fit in 80 GiB (85.9 GB) but not in 0.9 of it (77.3 GB).
func TestExecutorMemoryIsItsOwn(t *testing.T) {
	args := []string{"--model", "kimi-k2.5", "--topo", "nvswitch:8xh100-sxm", "--kv-dtype", "bf16", "--batch", "8"}
	if code, _, stderr := runCLI(t, append([]string{"predict"}, args...)...); code != 1 || !strings.Contains(stderr, "does not fit in GPU memory") {
		t.Fatalf("vLLM's pool: exit %d, %q: want the step refused at gpu_memory_utilization 0.9", code, stderr)
	}
	m := predictJSONObject(t, append(args, "--engine", "executor")...)["memory"].(map[string]any)
	const h100Bytes = 80 << 30
	if m["fits"] != true || m["usable_bytes"].(float64) != h100Bytes {
		t.Errorf("executor: fits %v, usable %v B: want it to fit in the whole %d B", m["fits"], m["usable_bytes"], h100Bytes)
	}
	if b := m["kv_budget"].(map[string]any); b["rule"] != "step_cache" {
		t.Errorf("executor's KV budget %v: want its own step cache, not a serving engine's pool", b)
	}
	l := predictLines(t, append(args, "--engine", "executor")...)["memory per GPU"]
	if strings.Contains(l, "gpu_memory_utilization") || !strings.Contains(l, "the whole GPU memory") {
		t.Errorf("memory line %q: want the whole GPU memory, no vLLM pool", l)
	}
}

// TestMTPAcceptBesideSpecAccept: --spec-accept (or its file) prices the
// MTP drafts too, so --mtp-accept beside it was printed in the options
// line and priced nowhere (the step took 0.8, not 0.9). Refused in one
// line; either alone prices the step at its figure (1 + a tokens a step
// at K = 1).
func TestMTPAcceptBesideSpecAccept(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/accept.log"
	if err := os.WriteFile(file, []byte("SpecDecoding metrics: Mean acceptance length: 1.80, Accepted throughput: 1 tokens/s, Drafted throughput: 1 tokens/s, Accepted: 8 tokens, Drafted: 10 tokens, Per-position acceptance rate: 0.800\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"predict", "--model", "deepseek-v3", "--topo", "nvswitch:8xb200", "--mtp", "1"}
	checkUsageErrors(t, []usageCase{
		{"spec-accept", append(base[:len(base):len(base)], "--mtp-accept", "0.9", "--spec-accept", "0.8"), "--mtp-accept 0.9 and --spec-accept 0.8: give one"},
		{"spec-accept-file", append(base[:len(base):len(base)], "--mtp-accept", "0.9", "--spec-accept-file", file), "--mtp-accept 0.9 and --spec-accept-file " + file + ": give one"},
	})
	for _, c := range []struct {
		flag, value string
		tokens      float64
	}{{"--mtp-accept", "0.9", 1.9}, {"--spec-accept", "0.8", 1.8}} {
		m := predictJSONObject(t, append(base[1:len(base):len(base)], c.flag, c.value)...)
		if got := m["tokens_per_step"].(float64); got < c.tokens-1e-9 || got > c.tokens+1e-9 {
			t.Errorf("%s %s alone: %v tokens per step, want %v", c.flag, c.value, got, c.tokens)
		}
	}
}

// TestScheduleNamesWhatLaidIt: the engine's capture list pads a graphed
// decode step (batch 10: vLLM's list 1, 2, 4, 8, 16 pads it to 16,
// SGLang's 1, 2, 4, 8, 12 to 12) and the box decides a DSA model's
// attention, yet schedule named neither, even when they were defaults,
// and its JSON held no graph at all where the table said "graph of 16
// tokens". The title and the JSON name both and the deployment.
func TestScheduleNamesWhatLaidIt(t *testing.T) {
	for _, c := range []struct {
		args           []string
		engine, topo   string
		graphTokens    float64
		padTokens      float64
		titleGraphNote string
	}{
		{nil, "vllm@0.24", "rtxpro6000-2s", 16, 6, "(graph of 16 tokens: "},
		{[]string{"--engine", "sglang", "--topo", "h200-nvswitch"}, "sglang@0.5", "h200-nvswitch", 12, 2, "(graph of 12 tokens: "},
	} {
		args := append([]string{"schedule", "--model", "kimi-k2.5", "--batch", "10"}, c.args...)
		code, out, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		title, _, _ := strings.Cut(out, "\n")
		if want := "on " + c.topo + " under " + c.engine; !strings.Contains(title, want) || !strings.Contains(title, c.titleGraphNote) {
			t.Errorf("%v: title %q, want %q and %q", args, title, want, c.titleGraphNote)
		}
		code, out, stderr = runCLI(t, append(args, "--output", "json", "--rank", "0")...)
		if code != 0 {
			t.Fatalf("%v json: exit %d: %s", args, code, stderr)
		}
		var doc struct {
			Topology, Engine string
			Deploy           struct {
				Graphed     bool    `json:"graphed"`
				GraphTokens float64 `json:"graph_tokens"`
				PadTokens   float64 `json:"pad_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Topology != c.topo || doc.Engine != c.engine || !doc.Deploy.Graphed || doc.Deploy.GraphTokens != c.graphTokens || doc.Deploy.PadTokens != c.padTokens {
			t.Errorf("%v: JSON says %+v, want %s, %s, a graph of %v tokens with %v padding", args, doc, c.topo, c.engine, c.graphTokens, c.padTokens)
		}
	}
}

// TestModelShowNamesTheBox: model show lays the plan on --topo's box and
// sizes the KV capacity by its GPU's memory, the default box's when none
// is named, yet named neither: "tp8 on 8 GPUs", "GPU memory 102.64 GB".
// The plan line names the box, the memory line where the size came from,
// and the JSON the box.
func TestModelShowNamesTheBox(t *testing.T) {
	for _, c := range []struct {
		args      []string
		plan, mem string
	}{
		{nil, "tp8 on 8 GPUs of rtxpro6000-2s", "102.64 GB (NVIDIA RTX PRO 6000 Blackwell Server Edition's)"},
		{[]string{"--topo", "nvswitch:8xh100-sxm", "--gpus", "4", "--tp", "4"}, "tp4 on 4 GPUs of nvswitch:8xh100-sxm/4gpu", "85.90 GB (NVIDIA H100 80GB HBM3's)"},
		{[]string{"--gpu-mem-gb", "96"}, "tp8 on 8 GPUs of rtxpro6000-2s", "96.00 GB (--gpu-mem-gb)"},
	} {
		args := append([]string{"model", "show", "tiny-mla-moe"}, c.args...)
		code, out, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if !strings.Contains(out, "plan          "+c.plan+"\n") || !strings.Contains(out, "GPU memory              "+c.mem) {
			t.Errorf("%v: want plan %q and GPU memory %q in:\n%s", args, c.plan, c.mem, out)
		}
	}
	code, out, stderr := runCLI(t, "model", "show", "tiny-mla-moe", "--output", "json")
	if code != 0 || !strings.Contains(out, `"topology": "rtxpro6000-2s"`) {
		t.Errorf("JSON: exit %d (%s), no topology in %s", code, stderr, out)
	}
}

// TestCollectiveOptionsWithoutCollectives: on one GPU the step runs no
// collective, and at TP 1 no TP all-reduce, yet NCCL's settings,
// --custom-ar and --ar-norm-fusion were printed among the options of a
// step they priced nothing of. Refused in one line naming the flag and
// the plan; kept where the collective is there (DP attention's dispatch
// runs on NCCL at TP 1).
func TestCollectiveOptionsWithoutCollectives(t *testing.T) {
	one := []string{"predict", "--model", "tiny-mla-moe", "--tp", "1"}
	with := func(args ...string) []string { return append(one[:len(one):len(one)], args...) }
	checkUsageErrors(t, []usageCase{
		{"nccl-proto", with("--nccl-proto", "LL"), "--nccl-proto LL: plan tp1 runs on one GPU, with no collective"},
		{"p2p-disable", with("--p2p-disable"), "--p2p-disable true: plan tp1 runs on one GPU"},
		{"nccl-min-channels", with("--nccl-min-channels", "8"), "--nccl-min-channels 8: plan tp1 runs on one GPU"},
		{"custom-ar", with("--custom-ar", "oneshot"), "--custom-ar oneshot: plan tp1 has no TP all-reduce"},
		{"ar-norm-fusion", with("--ar-norm-fusion"), "--ar-norm-fusion: plan tp1 has no TP all-reduce"},
		{"custom-ar under DP attention", with("--dp", "2", "--ep", "--custom-ar", "off"), "--custom-ar off: plan tp1-dp2-ep has no TP all-reduce"},
	})
	for _, args := range [][]string{with("--custom-ar", "auto"), with("--dp", "2", "--ep", "--nccl-proto", "LL"), {"predict", "--model", "tiny-mla-moe", "--tp", "2", "--ar-norm-fusion", "--nccl-proto", "LL"}} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}

// TestCustomARAboveItsBuffer: a prefill of 4096 tokens of Kimi-K2.5
// all-reduces 58.7 MB a call, above the custom all-reduce's 8 MiB
// buffer, so NCCL carries every one and --custom-ar oneshot priced the
// step as without it (845 ms either way) while its options, engine line
// ("oneshot all-reduce (forced)") and caveats said the custom kernel ran.
// Refused in one line; kept where some all-reduce fits the buffer.
func TestCustomARAboveItsBuffer(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"prefill oneshot", []string{"predict", "--phase", "prefill", "--custom-ar", "oneshot"}, "--custom-ar oneshot: every all-reduce of the step is above the custom all-reduce's 8 MiB buffer (the smallest 58.7 MB a call)"},
		{"report twoshot", []string{"report", "--phase", "prefill", "--custom-ar", "twoshot", "-o", t.TempDir() + "/r.html"}, "--custom-ar twoshot: every all-reduce of the step is above"},
	})
	for _, args := range [][]string{{"predict", "--phase", "prefill", "--context", "512", "--custom-ar", "oneshot"}, {"predict", "--custom-ar", "oneshot"}, {"predict", "--phase", "prefill", "--custom-ar", "off"}} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}

// TestARNormFusionBeyondItsLimits: on a prefill whose every all-reduce is
// above the engine's fusion cap (DeepSeek-V3 at 4096 tokens on an H200
// under vLLM's 512 KiB) --ar-norm-fusion and =false priced the same step
// and were listed among its options; refused in one line. In decode they
// price it.
func TestARNormFusionBeyondItsLimits(t *testing.T) {
	base := []string{"predict", "--phase", "prefill", "--topo", "h200-nvswitch", "--model", "deepseek-v3"}
	checkUsageErrors(t, []usageCase{
		{"on", append(base[:len(base):len(base)], "--ar-norm-fusion"), "--ar-norm-fusion: no all-reduce of the step is followed by an RMSNorm within vllm@0.24's fusion limits (messages up to 512 KiB)"},
		{"off", append(base[:len(base):len(base)], "--ar-norm-fusion=false"), "--ar-norm-fusion=false: no all-reduce of the step is followed by an RMSNorm within"},
	})
	for _, f := range []string{"--ar-norm-fusion", "--ar-norm-fusion=false"} {
		if code, _, stderr := runCLI(t, "predict", "--topo", "h200-nvswitch", "--model", "deepseek-v3", f); code != 0 {
			t.Errorf("decode %s: exit %d: %s", f, code, stderr)
		}
	}
}
