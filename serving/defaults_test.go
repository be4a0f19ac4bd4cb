package serving

import (
	"errors"
	"math"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// sglangDeployment is DeepSeek-V3 (FP8) at TP 8 on box under SGLang, with
// an FP8 cache and CUDA graphs.
func sglangDeployment(t testing.TB, box string) Deployment {
	return Deployment{Scenario: sim.Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8}, Workload: model.Workload{KVDtype: model.FP8},
		Topo: mustBox(t, box), Options: sim.Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "sglang"}}}}
}

// mustBox resolves a preset or a box description ("nvswitch:8xb200").
func mustBox(t testing.TB, box string) *topology.Topology {
	t.Helper()
	tp, err := topology.Resolve(box, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// TestSGLangChunkedPrefillDefault: with no --max-num-batched-tokens the
// step budget under SGLang is its chunked_prefill_size for the GPU's
// memory (server_args.py _handle_gpu_memory_settings): 16384 on a B200
// (180 GiB, not below 160 GiB), 8192 on an H100 (80 GiB, below 90), 4096
// on an L40S (45 GiB, below 60; vLLM's rule gives 2048 there, under 70
// GiB); under vLLM the B200 keeps vLLM's 8192. A given budget stays.
func TestSGLangChunkedPrefillDefault(t *testing.T) {
	for _, c := range []struct {
		box    string
		engine string
		given  int
		want   int
	}{
		{"nvswitch:8xb200", "sglang", 0, 16384},
		{"nvswitch:8xh100-sxm", "sglang", 0, 8192},
		{"pcie-2s:8xl40s", "sglang", 0, 4096},
		{"nvswitch:8xb200", "vllm", 0, 8192},
		{"nvswitch:8xb200", "sglang", 4096, 4096},
	} {
		d := sglangDeployment(t, c.box)
		d.Scenario.Options.Engine = engprof.Ref{Name: c.engine}
		// DeepSeek-V3 does not fit 8 x 80 GiB or 8 x 45 GiB (nor would a
		// pool given outright: vLLM and SGLang allocate it beside the
		// weights); the budget depends on the GPU's memory alone, so a
		// model that fits stands in.
		d.Scenario.Arch = mustPreset(t, "tiny-mla-moe")
		d.Engine.MaxNumBatchedTokens = c.given
		s, err := New(d)
		if err != nil {
			t.Fatalf("%s on %s: %v", c.engine, c.box, err)
		}
		if got := s.Engine().MaxNumBatchedTokens; got != c.want {
			t.Errorf("%s on %s, given %d: budget %d tokens, want %d", c.engine, c.box, c.given, got, c.want)
		}
	}
}

// TestSGLangKVPool: under SGLang the pool of DeepSeek-V3 at TP 8 on a
// B200 (180 GiB = 184320 MiB) with a 16384-token budget holds
// mem_fraction_static x memory less the weights, the fraction SGLang's
// default: reserved 512 + 1.5 x 16384 + 2 x 512 (the profile's largest
// capture size) + 1024 x 8 / 8 = 27136 MiB, round(157184 / 184320, 3) =
// 0.853; the activations are in that reserve, not subtracted again. A
// given fraction (--gpu-mem-util 0.8) is SGLang's mem_fraction_static
// there. Under vLLM the same box keeps 0.9 x memory less weights and
// activations. The weights and per-token bytes are model.KVCapacity's;
// the blocks are SGLang's pages of 64 tokens (trtllm_mla's, the backend
// it runs DeepSeek-V3 on there) and vLLM's blocks of 16.
func TestSGLangKVPool(t *testing.T) {
	d := sglangDeployment(t, "nvswitch:8xb200")
	d.Engine.MaxNumBatchedTokens = 16384
	sc := d.Scenario
	mem := float64(sc.Topo.DeviceOf(0).MemBytes)
	if mem != 180<<30 {
		t.Fatalf("B200 memory %v B, want 180 GiB", mem)
	}
	c := model.KVCapacity(sc.Arch, sc.Plan, model.Workload{KVDtype: model.FP8}, sc.Build, mem, 0.9)
	// vLLM's profiling step is the scheduler's: 16384 tokens, its
	// default 1024 seqs on a B200.
	vllmAct := model.KVCapacityProfiled(16384, 1024)(sc.Arch, sc.Plan, model.Workload{KVDtype: model.FP8}, sc.Build, mem, 0.9).ActivationBytes
	blocks := func(frac, less float64, block int64) int {
		return int(int64((frac*mem-c.WeightBytes-less)/c.KVBytesPerToken) / block)
	}
	for _, x := range []struct {
		engine string
		given  float64
		want   int
		rule   string
		from   string
		// graphGiB is the CUDA-graph estimate given (0: none).
		graphGiB float64
	}{
		{"sglang", 0, blocks(0.853, 0, 64), engprof.KVPoolMemFractionStatic, "184320 MiB GPU less 27136 MiB reserved", 0},
		{"sglang", 0.8, blocks(0.8, 0, 64), engprof.KVPoolMemFractionStatic, "given", 0},
		// vLLM's blocks are FlashInfer-MLA's page of 64 on the B200, its
		// pool 0.92 of the memory (vLLM 0.24's default, PR #38284) less
		// the weights, activations of its 16384-token profiling step and
		// the CUDA-graph estimate given.
		{"vllm", 0, blocks(0.92, vllmAct, 64), engprof.KVPoolGPUMemUtil, "vllm@0.24's default", 0},
		{"vllm", 0, blocks(0.92, vllmAct+3*(1<<30), 64), engprof.KVPoolGPUMemUtil, "vllm@0.24's default", 3},
	} {
		d.Scenario.Options.Engine = engprof.Ref{Name: x.engine}
		d.Scenario.Options.GPUMemUtilFrac = x.given
		d.Scenario.Options.CUDAGraphMem = sim.CUDAGraphMem{}
		if x.graphGiB > 0 {
			d.Scenario.Options.CUDAGraphMem = sim.CUDAGraphMem{GiB: x.graphGiB, Given: true}
		}
		s := mustNew(t, d)
		b := s.KVBudget()
		if s.KVBlocks() != x.want || b.Rule != x.rule || !strings.Contains(b.From, x.from) {
			t.Errorf("%s, fraction given %v: %d blocks by %+v, want %d by %s (%s)", x.engine, x.given, s.KVBlocks(), b, x.want, x.rule, x.from)
		}
	}
}

// TestSGLangMaxRunningDefault: with no --max-num-seqs SGLang runs up to
// min(pool tokens / 2, its request pool), the request pool min(max(pool
// tokens / context_len x 512, 2048), 4096) (model_runner_kv_cache_mixin.py
// init_memory_pool, model_runner.py max_running_requests), context_len
// DeepSeek-V3's max_position_embeddings 163840. A pool of 1,000,000
// tokens (15625 of SGLang's 64-token pages under trtllm_mla): 3125 (1e6 /
// 163840 x 512); of 3008 (47 pages): 1504, half the pool, below the 2048
// floor; the B200's own pool of millions: 4096. vLLM keeps its 1024; a
// given count stays.
func TestSGLangMaxRunningDefault(t *testing.T) {
	for _, c := range []struct {
		engine      string
		blocks      int
		given, want int
	}{
		{"sglang", 15625, 0, 3125},
		{"sglang", 47, 0, 1504},
		{"sglang", 0, 0, 4096},
		{"vllm", 15625, 0, 1024}, // 1 M tokens in vLLM's blocks of 64 there
		{"sglang", 15625, 256, 256},
	} {
		d := sglangDeployment(t, "nvswitch:8xb200")
		d.Scenario.Options.Engine = engprof.Ref{Name: c.engine}
		d.Engine.NumGPUBlocksOverride = c.blocks
		d.Engine.MaxNumSeqs = c.given
		s := mustNew(t, d)
		if c.blocks == 0 && s.KVBlocks()*s.Engine().BlockSize < 4096*163840/512 {
			t.Fatalf("B200 pool %d blocks: too small to reach the 4096 cap", s.KVBlocks())
		}
		if got := s.Engine().MaxNumSeqs; got != c.want {
			t.Errorf("%s, %d blocks, given %d: %d running at most, want %d", c.engine, c.blocks, c.given, got, c.want)
		}
	}
}

// TestTRTLLMSchedulerDefaults: under TensorRT-LLM the settings the user
// leaves out are its own defaults (llm_args.py): max_batch_size 2048
// running requests, max_num_tokens 8192 a step, tokens_per_block 32,
// chunked prefill off, GUARANTEED_NO_EVICT admission; on the same H200
// vLLM's are 1024 (a GPU of 70 GiB or more), 8192, 16, chunked prefill
// on, its whole-input rule. Given settings stay (--max-num-seqs 64,
// --block-size 16, --enable-chunked-prefill), and the defaults line names
// only what was left out, each with whose default it is.
func TestTRTLLMSchedulerDefaults(t *testing.T) {
	for _, c := range []struct {
		engine      string
		given       EngineOptions
		seqs, block int
		noChunk     bool
		admission   string
		line        string
	}{
		{"trtllm", EngineOptions{}, 2048, 32, true, engprof.AdmitGuaranteedNoEvict,
			"max_num_seqs 2048 (trtllm@1.3's), max_num_batched_tokens 8192 (trtllm@1.3's), block_size 32 (trtllm@1.3's), chunked prefill off (trtllm@1.3's), admission guaranteed_no_evict (trtllm@1.3's)"},
		{"trtllm", EngineOptions{MaxNumSeqs: 64, BlockSize: 16, EnableChunkedPrefill: true}, 64, 16, false, engprof.AdmitGuaranteedNoEvict,
			"max_num_batched_tokens 8192 (trtllm@1.3's), admission guaranteed_no_evict (trtllm@1.3's)"},
		// On the H200 vLLM forces FlashMLA's page of 64 (TestSGLangPageSize).
		{"vllm", EngineOptions{}, 1024, 64, false, "",
			"max_num_seqs 1024 (vLLM's), max_num_batched_tokens 8192 (vLLM's), block_size 64 (vllm@0.24's, the page FLASHMLA forces), chunked prefill on (vLLM's), admission whole input's blocks free (vLLM's)"},
	} {
		d := sglangDeployment(t, "nvswitch:8xh200")
		d.Scenario.Options.Engine = engprof.Ref{Name: c.engine}
		d.Engine = c.given
		d.Engine.NumGPUBlocksOverride = 1024
		s, err := New(d)
		if err != nil {
			t.Fatalf("%s: %v", c.engine, err)
		}
		e := s.Engine()
		if e.MaxNumSeqs != c.seqs || e.MaxNumBatchedTokens != 8192 || e.BlockSize != c.block || e.DisableChunkedPrefill != c.noChunk || e.Admission != c.admission {
			t.Errorf("%s given %+v: max_num_seqs %d, budget %d, block %d, no chunking %v, admission %q; want %d, 8192, %d, %v, %q",
				c.engine, c.given, e.MaxNumSeqs, e.MaxNumBatchedTokens, e.BlockSize, e.DisableChunkedPrefill, e.Admission, c.seqs, c.block, c.noChunk, c.admission)
		}
		if got := s.DefaultsUsed(); got != c.line {
			t.Errorf("%s given %+v: defaults line\n%s\nwant\n%s", c.engine, c.given, got, c.line)
		}
	}
}

// TestUnchunkedPromptOverBudget: with chunked prefill off (TensorRT-LLM's
// default) a prompt is scheduled whole within the step's budget, so a
// 10000-token prompt never fits max_num_tokens 8192: the run is refused
// before it starts, in one line naming the prompt, the budget and the
// way out, instead of stalling. With --enable-chunked-prefill it runs; an
// 8192-token prompt fits the budget exactly and runs unchunked.
func TestUnchunkedPromptOverBudget(t *testing.T) {
	d := sglangDeployment(t, "nvswitch:8xh200")
	d.Scenario.Options.Engine = engprof.Ref{Name: "trtllm"}
	d.Engine.NumGPUBlocksOverride = 4096
	s, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	long := Traffic{Requests: []Request{{PromptTokens: 10000, OutputTokens: 4}}}
	_, err = s.Run(long, RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "10000-token prompt") || !strings.Contains(err.Error(), "max_num_batched_tokens 8192") || strings.Contains(err.Error(), "\n") {
		t.Errorf("10000-token prompt without chunking: error %v, want one line naming the prompt and the 8192-token budget", err)
	}
	if _, err := s.Run(Traffic{Requests: []Request{{PromptTokens: 8192, OutputTokens: 4}}}, RunOptions{}); err != nil {
		t.Errorf("8192-token prompt without chunking: %v", err)
	}
	d.Engine.EnableChunkedPrefill = true
	s, err = New(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(long, RunOptions{}); err != nil {
		t.Errorf("10000-token prompt with chunked prefill: %v", err)
	}
}

// TestSGLangPageSize: SGLang allocates its KV pool token by token
// (--page-size defaults to 1) unless the attention backend forces a page:
// flashmla and trtllm_mla take 64 (server_args.py: "FlashMLA only
// supports a page_size of 64", "TensorRT-LLM MLA only supports page_size
// of 32 or 64, changing page_size from 1 to 64"). DeepSeek-V3 under
// SGLang runs trtllm_mla on a B200 and flashmla with an FP8 cache on an
// H200 (page 64), fa3 with a bf16 cache on the H200 (page 1). The defaults
// line names the backend that forced the page, and chunked prefill is
// SGLang's own default.
//
// vLLM forces pages too (platforms/cuda.py check_and_update_config): on a
// B200 FlashInfer-MLA's 64 (32 or a multiple of 64 stand), CUTLASS_MLA's
// 128; on an H200 with no backend named FlashMLA's 64 (a multiple of 64
// stands) whichever backend then runs, FLASH_ATTN_MLA with a bf16 cache
// included, but not when FLASH_ATTN_MLA is named; on the RTX PRO 6000
// (TRITON_MLA, no FlashMLA) its 16 stays. A block size the engine would
// replace is refused in one line naming the size it runs.
func TestSGLangPageSize(t *testing.T) {
	for _, c := range []struct {
		box     string
		engine  string
		kv      model.Dtype
		backend string
		given   int
		block   int
		line    string // the block_size part of the defaults line ("" absent)
		err     string // a refusal's words
	}{
		{"nvswitch:8xb200", "sglang", model.FP8, "", 0, 64, "block_size 64 (sglang@0.5's, the page trtllm_mla forces)", ""},
		{"nvswitch:8xh200", "sglang", model.FP8, "", 0, 64, "block_size 64 (sglang@0.5's, the page flashmla forces)", ""},
		{"nvswitch:8xh200", "sglang", model.BF16, "", 0, 1, "block_size 1 (sglang@0.5's)", ""},
		{"nvswitch:8xb200", "sglang", model.FP8, "", 32, 32, "", ""},
		{"nvswitch:8xb200", "sglang", model.FP8, "", 16, 0, "", "block_size = 16: want 64"},
		{"nvswitch:8xh200", "sglang", model.BF16, "", 16, 16, "", ""},
		{"nvswitch:8xb200", "vllm", model.FP8, "", 0, 64, "block_size 64 (vllm@0.24's, the page FLASHINFER_MLA forces)", ""},
		{"nvswitch:8xb200", "vllm", model.FP8, "CUTLASS_MLA", 0, 128, "block_size 128 (vllm@0.24's, the page CUTLASS_MLA forces)", ""},
		{"nvswitch:8xb200", "vllm", model.FP8, "", 32, 32, "", ""},
		{"nvswitch:8xb200", "vllm", model.FP8, "", 16, 0, "", "block_size = 16: want 64"},
		{"nvswitch:8xh200", "vllm", model.BF16, "", 0, 64, "block_size 64 (vllm@0.24's, the page FLASHMLA forces)", ""},
		{"nvswitch:8xh200", "vllm", model.BF16, "", 128, 128, "", ""},
		{"nvswitch:8xh200", "vllm", model.BF16, "FLASH_ATTN_MLA", 0, 16, "block_size 16 (vLLM's)", ""},
		{"pcie-2s:8xrtx-pro-6000-server", "vllm", model.FP8, "", 0, 16, "block_size 16 (vLLM's)", ""},
	} {
		d := sglangDeployment(t, c.box)
		d.Scenario.Options.Engine = engprof.Ref{Name: c.engine}
		d.Scenario.Options.AttentionBackend = sim.AttentionBackend(c.backend)
		d.Scenario.Workload.KVDtype = c.kv
		d.Engine.BlockSize = c.given
		d.Engine.NumGPUBlocksOverride = 1024 // the page, not the memory
		s, err := New(d)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s on %s given block %d: error %v, want one line saying %q", c.engine, c.box, c.given, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s on %s (%s): %v", c.engine, c.box, c.kv, err)
		}
		if got := s.Engine().BlockSize; got != c.block {
			t.Errorf("%s on %s (%s, %q), given %d: block %d tokens, want %d", c.engine, c.box, c.kv, c.backend, c.given, got, c.block)
		}
		line := s.DefaultsUsed()
		if c.line != "" && !strings.Contains(line, c.line) {
			t.Errorf("%s on %s (%s, %q): defaults line %q lacks %q", c.engine, c.box, c.kv, c.backend, line, c.line)
		}
		if c.line == "" && strings.Contains(line, "block_size") {
			t.Errorf("%s on %s given block %d: defaults line %q names the block size", c.engine, c.box, c.given, line)
		}
		if c.engine == "sglang" && !strings.Contains(line, "chunked prefill on (sglang@0.5's)") {
			t.Errorf("%s on %s: defaults line %q does not give chunked prefill as SGLang's default", c.engine, c.box, line)
		}
	}
}

// TestSGLangSpecMaxRunning: SGLang resets max_running_requests to 48 for
// its speculative methods when the user gives none (server_args.py
// _handle_speculative_decoding: "Max running requests is reset to 48 for
// speculative decoding"), so DeepSeek-V3 with MTP (NEXTN) on an H200 runs
// at most 48 requests where without speculation its KV pool's rule gives
// thousands; a given --max-num-seqs stays, and vLLM, which sets no such
// limit, keeps its 1024.
func TestSGLangSpecMaxRunning(t *testing.T) {
	for _, c := range []struct {
		engine string
		spec   int
		given  int
		want   int
		from   string
	}{
		{"sglang", 2, 0, 48, "max_num_seqs 48 (sglang@0.5's for NEXTN speculative decoding)"},
		{"sglang", 2, 128, 128, ""},
		{"vllm", 2, 0, 1024, "max_num_seqs 1024 (vLLM's)"},
	} {
		d := sglangDeployment(t, "nvswitch:8xh200")
		d.Scenario.Options.Engine = engprof.Ref{Name: c.engine}
		d.Scenario.Workload.SpecTokens = c.spec
		d.Engine.MaxNumSeqs = c.given
		s := mustNew(t, d)
		if got := s.Engine().MaxNumSeqs; got != c.want {
			t.Errorf("%s, MTP %d, given %d: %d running at most, want %d", c.engine, c.spec, c.given, got, c.want)
		}
		line := s.DefaultsUsed()
		if c.from != "" && !strings.Contains(line, c.from) {
			t.Errorf("%s, MTP %d: defaults line %q lacks %q", c.engine, c.spec, line, c.from)
		}
		if c.from == "" && strings.Contains(line, "max_num_seqs") {
			t.Errorf("%s given %d: defaults line %q names max_num_seqs", c.engine, c.given, line)
		}
	}
	// Without speculation SGLang's limit comes from its pool again.
	d := sglangDeployment(t, "nvswitch:8xh200")
	if got := mustNew(t, d).Engine().MaxNumSeqs; got <= 48 {
		t.Errorf("sglang without speculation: %d running at most, want its KV pool's rule (above 48)", got)
	}
}

// TestSGLangDPDividesChunk: under DP attention SGLang divides its
// chunked_prefill_size by dp_size (server_args.py _handle_data_parallelism:
// "The chunked prefill size is adjusted to ..."), given or defaulted, so
// each of 8 DP ranks on a B200 takes 16384 / 8 = 2048 tokens a step, and a
// given 8192 becomes 1024; vLLM gives every DP engine its whole
// max_num_batched_tokens (8192 on the B200); without DP SGLang keeps 16384.
// With chunked prefill off (--chunked-prefill-size -1) the division
// leaves -1 (-1 // 8 in Python), still off, and the prefill batch's
// budget, max_prefill_tokens (16384), is not divided: every rank takes
// 16384 (tpscope gave each 16384 / 8 = 2048).
func TestSGLangDPDividesChunk(t *testing.T) {
	for _, c := range []struct {
		engine      string
		tp, dp      int
		given, want int
		line        string
		noChunk     bool
	}{
		{"sglang", 1, 8, 0, 16384, "max_num_batched_tokens 16384 (sglang@0.5's max_prefill_tokens with chunked prefill off)", true},
		{"sglang", 1, 8, 0, 2048, "max_num_batched_tokens 2048 (sglang@0.5's: a DP rank's share, 16384 / 8)", false},
		{"sglang", 1, 8, 8192, 1024, "max_num_batched_tokens 1024 (sglang@0.5's: a DP rank's share, 8192 / 8)", false},
		{"sglang", 8, 1, 0, 16384, "max_num_batched_tokens 16384 (sglang@0.5's)", false},
		{"vllm", 1, 8, 0, 8192, "max_num_batched_tokens 8192 (vLLM's)", false},
	} {
		d := sglangDeployment(t, "nvswitch:8xb200")
		d.Scenario.Options.Engine = engprof.Ref{Name: c.engine}
		d.Scenario.Plan = model.Plan{TP: c.tp, DP: c.dp, EP: true}
		d.Engine.NumGPUBlocksOverride = 4096
		d.Engine.MaxNumBatchedTokens = c.given
		d.Engine.DisableChunkedPrefill = c.noChunk
		s := mustNew(t, d)
		if got := s.Engine().MaxNumBatchedTokens; got != c.want {
			t.Errorf("%s tp%d dp%d given %d: %d tokens a step per scheduler, want %d", c.engine, c.tp, c.dp, c.given, got, c.want)
		}
		if line := s.DefaultsUsed(); !strings.Contains(line, c.line) {
			t.Errorf("%s tp%d dp%d given %d: defaults line %q lacks %q", c.engine, c.tp, c.dp, c.given, line, c.line)
		}
	}
}

// TestSGLangSpecMaxRunningDP: the 48 running requests SGLang sets for its
// speculative methods are the engine's, and under DP attention each DP
// rank's scheduler takes max_running_requests // dp_size (tp_worker.py /
// model_runner.py: "server_args.max_running_requests // (dp_size if
// enable_dp_attention else 1)", applied to any value set, the one
// _handle_speculative_decoding sets included): 48 / 8 = 6 a rank at DP 8,
// 48 / 4 = 12 at DP 4; without DP the engine's one scheduler keeps 48.
func TestSGLangSpecMaxRunningDP(t *testing.T) {
	for _, c := range []struct {
		tp, dp, want int
		line         string
	}{
		{1, 8, 6, "max_num_seqs 6 (sglang@0.5's for NEXTN speculative decoding: a DP rank's share, 48 / 8)"},
		{2, 4, 12, "max_num_seqs 12 (sglang@0.5's for NEXTN speculative decoding: a DP rank's share, 48 / 4)"},
		{8, 1, 48, "max_num_seqs 48 (sglang@0.5's for NEXTN speculative decoding)"},
	} {
		d := sglangDeployment(t, "nvswitch:8xb200")
		d.Scenario.Plan = model.Plan{TP: c.tp, DP: c.dp, EP: true}
		d.Scenario.Workload.SpecTokens = 2
		d.Engine.NumGPUBlocksOverride = 4096
		s := mustNew(t, d)
		if got := s.Engine().MaxNumSeqs; got != c.want {
			t.Errorf("tp%d dp%d MTP 2: %d running at most per scheduler, want %d", c.tp, c.dp, got, c.want)
		}
		if line := s.DefaultsUsed(); !strings.Contains(line, c.line) {
			t.Errorf("tp%d dp%d: defaults line %q lacks %q", c.tp, c.dp, line, c.line)
		}
	}
}

// TestSGLangGivenMaxRunningDP: SGLang divides a running-request limit
// set on the server among its DP ranks whatever set it (model_runner.py:
// "server_args.max_running_requests // dp_size" under DP attention), so
// --max-num-seqs 64 at DP 2 runs 32 a rank's scheduler, 64 in all; tpscope
// divided only the 48 of its speculative default and ran 64 on each rank,
// twice the server's requests. vLLM, each of whose DP ranks is an engine
// with its own max_num_seqs, keeps 64 a rank.
func TestSGLangGivenMaxRunningDP(t *testing.T) {
	for _, c := range []struct {
		engine string
		want   int
		line   string // "" : the line names no max_num_seqs (given, kept)
	}{
		{"sglang", 32, "max_num_seqs 32 (sglang@0.5's: a DP rank's share, 64 / 2)"},
		{"vllm", 64, ""},
	} {
		d := sglangDeployment(t, "nvswitch:8xb200")
		d.Scenario.Options.Engine = engprof.Ref{Name: c.engine}
		d.Scenario.Plan = model.Plan{TP: 4, DP: 2, EP: true}
		d.Engine.MaxNumSeqs = 64
		d.Engine.NumGPUBlocksOverride = 4096
		s := mustNew(t, d)
		if got := s.Engine().MaxNumSeqs; got != c.want {
			t.Errorf("%s tp4 dp2, --max-num-seqs 64: %d running at most per scheduler, want %d", c.engine, got, c.want)
		}
		line := s.DefaultsUsed()
		if c.line != "" && !strings.Contains(line, c.line) {
			t.Errorf("%s: defaults line %q lacks %q", c.engine, line, c.line)
		}
		if c.line == "" && strings.Contains(line, "max_num_seqs") {
			t.Errorf("%s: defaults line %q names the given max_num_seqs", c.engine, line)
		}
	}
}

// TestNewTokenRatioLine: under DP attention SGLang scales its new-token
// ratio (schedule_conservativeness 0.3: 0.7 x 0.3 = 0.21, its floor 0.14
// of that, 0.0294); the defaults line printed the floor as
// 0.029400000000000003, the float's every digit. It reads 0.21..0.0294.
func TestNewTokenRatioLine(t *testing.T) {
	d := sglangDeployment(t, "nvswitch:8xb200")
	d.Scenario.Plan = model.Plan{TP: 4, DP: 2, EP: true}
	d.Engine.NumGPUBlocksOverride = 4096
	line := mustNew(t, d).DefaultsUsed()
	if !strings.Contains(line, "new_token_ratio 0.21..0.0294 of") {
		t.Errorf("defaults line %q: want new_token_ratio 0.21..0.0294", line)
	}
}

// TestSGLangUnchunkedDefaults: with --no-enable-chunked-prefill SGLang's
// prefill batch takes --max-prefill-tokens (16384) and its first prompt
// whole, so a 20,000-token prompt runs; vLLM's default budget is then
// DeepSeek-V3's max_model_len, 163840 (max(max_model_len, 8192):
// TestVLLMBatchDefaults), so it runs there too. TensorRT-LLM's fixed
// 8192 refuses it (TestUnchunkedPromptOverBudget).
func TestSGLangUnchunkedDefaults(t *testing.T) {
	long := Traffic{Requests: []Request{{PromptTokens: 20000, OutputTokens: 4}}}
	for _, c := range []struct {
		engine string
		budget int
		runs   bool
	}{{"sglang", 16384, true}, {"vllm", 163840, true}} {
		d := sglangDeployment(t, "nvswitch:8xh200")
		d.Scenario.Options.Engine = engprof.Ref{Name: c.engine}
		d.Engine.DisableChunkedPrefill = true
		s := mustNew(t, d)
		if got := s.Engine().MaxNumBatchedTokens; got != c.budget {
			t.Errorf("%s: budget %d, want %d", c.engine, got, c.budget)
		}
		res, err := s.Run(long, RunOptions{})
		if c.runs && (err != nil || res == nil || len(res.PerRequest) != 1) {
			t.Errorf("%s: the 20,000-token prompt did not run: %v", c.engine, err)
		}
		if !c.runs && (err == nil || strings.Contains(err.Error(), "\n")) {
			t.Errorf("%s: %v, want a one-line refusal", c.engine, err)
		}
	}
}

// TestSGLangDPConservativeness: under DP attention SGLang multiplies its
// schedule_conservativeness by 0.3 (_handle_data_parallelism), and its
// new-token ratio starts at 0.7 x 0.3 = 0.21 (floor 0.21 x 0.14 =
// 0.0294); without DP it starts at 0.7; the profile's facts are not
// changed in place.
func TestSGLangDPConservativeness(t *testing.T) {
	for _, c := range []struct {
		tp, dp int
		init   float64
	}{{1, 8, 0.21}, {8, 1, 0.7}} {
		d := sglangDeployment(t, "nvswitch:8xb200")
		d.Scenario.Plan = model.Plan{TP: c.tp, DP: c.dp, EP: c.dp > 1}
		d.Engine.NumGPUBlocksOverride = 4096
		s := mustNew(t, d)
		f := s.Engine().NewTokenRatio
		if f == nil || math.Abs(f.Init-c.init) > 1e-12 {
			t.Errorf("tp%d dp%d: new-token ratio facts %+v, want init %v", c.tp, c.dp, f, c.init)
		}
	}
	if p, err := engprof.Lookup(engprof.Ref{Name: "sglang"}); err != nil || p.Scheduler.NewTokenRatio.Init != 0.7 {
		t.Errorf("the profile's init changed: %v %v", p.Scheduler.NewTokenRatio, err)
	}
}

// TestNumGPUBlocksOverrideFitsTheGPU: vLLM allocates the blocks
// num_gpu_blocks_override names; more than the GPU's memory holds beside
// the weights and activations fail at start-up, so a simulation of them
// prices a pool no engine has. DeepSeek-V3 at TP 8 on an H200 (bf16
// cache, vLLM's blocks of 64 there): the memory model's whole GPU less
// weights and activations, over the KV bytes of a block, bounds it.
// Ten times that is refused in one line naming the field; half of it
// runs with exactly that many blocks.
func TestNumGPUBlocksOverrideFitsTheGPU(t *testing.T) {
	d := sglangDeployment(t, "nvswitch:8xh200")
	d.Scenario.Options.Engine = engprof.Ref{Name: "vllm"}
	d.Scenario.Workload.KVDtype = model.BF16
	sc := d.Scenario
	mem := float64(sc.Topo.DeviceOf(0).MemBytes)
	c := model.KVCapacity(sc.Arch, sc.Plan, model.Workload{KVDtype: model.BF16}, sc.Build, mem, 1)
	most := int((mem - c.WeightBytes - c.ActivationBytes) / (c.KVBytesPerToken * 64))
	if most < 1000 {
		t.Fatalf("%d blocks fit: the scenario leaves no room to test", most)
	}
	d.Engine.NumGPUBlocksOverride = 10 * most
	if _, err := New(d); err == nil || !strings.Contains(err.Error(), "num_gpu_blocks_override") || strings.Contains(err.Error(), "\n") {
		t.Errorf("%d blocks where %d fit: error %v, want one line naming num_gpu_blocks_override", 10*most, most, err)
	}
	d.Engine.NumGPUBlocksOverride = most / 2
	s, err := New(d)
	if err != nil {
		t.Fatalf("%d blocks: %v", most/2, err)
	}
	if s.KVBlocks() != most/2 {
		t.Errorf("%d blocks given: %d blocks", most/2, s.KVBlocks())
	}
}

// TestVLLMBatchDefaults: vLLM fills an unset step budget and running
// limit by EngineArgs._set_default_max_num_seqs_and_batched_tokens_args
// (vllm/engine/arg_utils.py): the OpenAI server's 8192 tokens and 1024
// requests on a GPU of 70 GiB or more that is not an A100 (2048 and 256
// below), then with chunked prefill off the budget is max(max_model_len,
// 8192), since a prompt is scheduled whole (and
// SchedulerConfig.verify_max_model_len refuses a budget below
// max_model_len without chunking), at most max_num_seqs x max_model_len;
// and an unset max_num_seqs is at most the budget (verify_max_model_len
// refuses max_num_batched_tokens < max_num_seqs). tpscope kept 8192 with
// chunking off, refusing any prompt above it that vLLM runs, and kept
// 1024 requests under a given budget of 512.
func TestVLLMBatchDefaults(t *testing.T) {
	short := mustPreset(t, "tiny-mla-moe")
	short.MaxModelLenTokens = 4096
	for _, c := range []struct {
		name         string
		box, model   string
		arch         *model.Arch
		given        EngineOptions
		seqs, budget int
		line         string
	}{
		// DeepSeek-V3 is served at max_position_embeddings, 163840 tokens.
		{name: "chunking off", box: "nvswitch:8xh200", model: "deepseek-v3", given: EngineOptions{DisableChunkedPrefill: true},
			seqs: 1024, budget: 163840, line: "max_num_batched_tokens 163840 (vLLM's: max_model_len with chunked prefill off)"},
		{name: "chunking on", box: "nvswitch:8xh200", model: "deepseek-v3",
			seqs: 1024, budget: 8192, line: "max_num_seqs 1024 (vLLM's), max_num_batched_tokens 8192 (vLLM's)"},
		{name: "budget 512", box: "nvswitch:8xh200", model: "deepseek-v3", given: EngineOptions{MaxNumBatchedTokens: 512},
			seqs: 512, budget: 512, line: "max_num_seqs 512 (vLLM's, at most max_num_batched_tokens)"},
		{name: "budget 4096", box: "nvswitch:8xh200", model: "deepseek-v3", given: EngineOptions{MaxNumBatchedTokens: 4096},
			seqs: 1024, budget: 4096, line: "max_num_seqs 1024 (vLLM's)"},
		// Under 70 GiB: 256 requests, cut to a given budget of 128.
		{name: "l40s budget 128", box: "pcie-2s:8xl40s", model: "tiny-mla-moe", given: EngineOptions{MaxNumBatchedTokens: 128},
			seqs: 128, budget: 128, line: "max_num_seqs 128 (vLLM's, at most max_num_batched_tokens)"},
		// A model served at 4096 tokens with one request a step: the
		// budget is at most 1 x 4096.
		{name: "one request", box: "nvswitch:8xh200", arch: short, given: EngineOptions{MaxNumSeqs: 1},
			seqs: 1, budget: 4096, line: "max_num_batched_tokens 4096 (vLLM's)"},
	} {
		d := sglangDeployment(t, c.box)
		d.Scenario.Options.Engine = engprof.Ref{Name: "vllm"}
		if c.arch != nil {
			d.Scenario.Arch = c.arch
		} else {
			d.Scenario.Arch = mustPreset(t, c.model)
		}
		d.Engine = c.given
		d.Engine.NumGPUBlocksOverride = 1024
		s := mustNew(t, d)
		if e := s.Engine(); e.MaxNumSeqs != c.seqs || e.MaxNumBatchedTokens != c.budget {
			t.Errorf("%s: max_num_seqs %d, max_num_batched_tokens %d; want %d, %d", c.name, e.MaxNumSeqs, e.MaxNumBatchedTokens, c.seqs, c.budget)
		}
		if got := s.DefaultsUsed(); !strings.Contains(got, c.line) {
			t.Errorf("%s: defaults line %q lacks %q", c.name, got, c.line)
		}
	}
}

// TestVLLMBudgetRefusals: vLLM refuses at start-up a step budget below
// max_num_seqs and, with chunked prefill off, one below the model's
// max_model_len (SchedulerConfig.verify_max_model_len); tpscope ran
// --max-num-batched-tokens 512 beside 1024 running requests, and 4096
// running requests on an L40S beside vLLM's 2048-token default there.
// Each is refused in one line naming the option that set it: the budget
// where given, else max_num_seqs. TensorRT-LLM (whose LLM args only warn
// when max_batch_size exceeds max_num_tokens) and SGLang take theirs.
func TestVLLMBudgetRefusals(t *testing.T) {
	for _, c := range []struct {
		name, box, model, engine string
		given                    EngineOptions
		field, want              string
	}{
		{"budget below seqs", "nvswitch:8xh200", "deepseek-v3", "vllm", EngineOptions{MaxNumBatchedTokens: 512, MaxNumSeqs: 1024},
			"engine.max_num_batched_tokens", "max_num_batched_tokens (512) at least max_num_seqs (1024)"},
		// Under 70 GiB vLLM's default budget is 2048.
		{"seqs above the default budget", "pcie-2s:8xl40s", "tiny-mla-moe", "vllm", EngineOptions{MaxNumSeqs: 4096},
			"engine.max_num_seqs", "max_num_batched_tokens (2048) at least max_num_seqs (4096)"},
		// DeepSeek-V3's max_model_len is 163840.
		{"unchunked budget below max_model_len", "nvswitch:8xh200", "deepseek-v3", "vllm", EngineOptions{MaxNumBatchedTokens: 8192, DisableChunkedPrefill: true},
			"engine.max_num_batched_tokens", "max_num_batched_tokens (8192) at least the model's max_model_len (163840)"},
		{"budget equals seqs", "nvswitch:8xh200", "deepseek-v3", "vllm", EngineOptions{MaxNumBatchedTokens: 8192, MaxNumSeqs: 8192}, "", ""},
		{"trtllm", "nvswitch:8xh200", "deepseek-v3", "trtllm", EngineOptions{MaxNumBatchedTokens: 512, MaxNumSeqs: 1024, EnableChunkedPrefill: true}, "", ""},
		{"sglang", "nvswitch:8xh200", "deepseek-v3", "sglang", EngineOptions{MaxNumBatchedTokens: 512, MaxNumSeqs: 1024}, "", ""},
	} {
		d := sglangDeployment(t, c.box)
		d.Scenario.Options.Engine = engprof.Ref{Name: c.engine}
		d.Scenario.Arch = mustPreset(t, c.model)
		d.Engine = c.given
		d.Engine.NumGPUBlocksOverride = 1024
		_, err := New(d)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line on %s saying %q", c.name, err, c.field, c.want)
		}
	}
}
