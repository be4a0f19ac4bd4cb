package engine

import (
	"strings"
	"testing"
)

// TestSGLangChunkTiers: SGLang's chunked_prefill_size by GPU memory
// (server_args.py _handle_gpu_memory_settings, MiB): 2048 on a 24 GiB L4,
// 2048 on a 32 GiB RTX 5090, 4096 on a 45 GiB L40S, 8192 on an 80 GiB
// H100 and a 141 GB H200, 16384 on a 180 GiB B200; vLLM's profile states
// none. A tier that does not rise, or an open tier before the last, is
// refused in one line naming it.
func TestSGLangChunkTiers(t *testing.T) {
	sg, err := Lookup(Ref{Name: "sglang"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		memBytes int64
		want     int
	}{{24 << 30, 2048}, {32 << 30, 2048}, {46068 * MiB, 4096}, {80 << 30, 8192}, {141e9, 8192}, {180 << 30, 16384}} {
		if got := sg.Scheduler.DefaultChunkTokens(c.memBytes); got != c.want {
			t.Errorf("%d MiB: chunk %d, want %d", c.memBytes/MiB, got, c.want)
		}
	}
	vl, _ := Lookup(Ref{Name: "vllm"})
	if got := vl.Scheduler.DefaultChunkTokens(180 << 30); got != 0 {
		t.Errorf("vLLM: chunk %d, want none stated", got)
	}
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	for _, c := range []struct{ edit, with, field string }{
		{"{below_mib: 61440, tokens: 4096}", "{below_mib: 20000, tokens: 4096}", "scheduler.chunk_tokens[2]"},
		{"{below_mib: 35840, tokens: 2048}", "{tokens: 2048}", "scheduler.chunk_tokens[1]"},
		{"{tokens: 16384}", "{below_mib: 300000, tokens: 16384}", "scheduler.chunk_tokens[4]"},
		{"pool_min: 2048, pool_max: 4096", "pool_min: 2048, pool_max: 1024", "scheduler.max_running"},
	} {
		data := strings.Replace(base, c.edit, c.with, 1)
		if data == base {
			t.Fatalf("edit %q not found", c.edit)
		}
		if _, err := Parse([]byte(data), "edited.yaml"); !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.with, err, c.field)
		}
	}
}

// TestSGLangGraphMaxBSTiers: SGLang's cuda_graph_max_bs by GPU memory
// and tp_size (server_args.py _handle_gpu_memory_settings, MiB): 8 below
// 20 GiB; 24 below 35 GiB at TP < 4, 80 at TP >= 4; 32 below 60 GiB at
// TP < 4, 160 at TP >= 4; 256 below 160 GiB at TP < 4, 512 at TP >= 4;
// 512 above. The capture list stops there (its largest size is the
// tier's: every tier value is on SGLang's list). vLLM's profile states no
// tiers: its whole list on every GPU. A tier out of order, one without a
// row for TP 1, or a max_bs off the capture list's range is refused in
// one line naming it.
func TestSGLangGraphMaxBSTiers(t *testing.T) {
	sg := mustLookup(t, "sglang@0.5")
	for _, c := range []struct {
		memBytes int64
		tp, want int
	}{
		{16 << 30, 8, 8},
		{24 << 30, 1, 24}, {24 << 30, 4, 80}, {32 << 30, 2, 24}, {32 << 30, 8, 80},
		{46068 * MiB, 1, 32}, {46068 * MiB, 3, 32}, {46068 * MiB, 4, 160}, {46068 * MiB, 8, 160},
		{80 << 30, 2, 256}, {80 << 30, 8, 512}, {141e9, 1, 256}, {141e9, 8, 512}, {97887 * MiB, 8, 512},
		{180 << 30, 1, 512}, {180 << 30, 8, 512},
	} {
		got, last := sg.GraphMaxBS(c.memBytes, c.tp), 0
		if s := sg.CaptureSizesFor(c.memBytes, c.tp); len(s) > 0 {
			last = s[len(s)-1]
		}
		if got != c.want || last != c.want {
			t.Errorf("%d MiB at TP %d: cuda_graph_max_bs %d, capture list to %d, want %d", c.memBytes/MiB, c.tp, got, last, c.want)
		}
	}
	vl := mustLookup(t, "vllm@0.24")
	if got, s := vl.GraphMaxBS(46068*MiB, 1), vl.CaptureSizesFor(46068*MiB, 1); got != 512 || len(s) != len(vl.CaptureSizes()) {
		t.Errorf("vLLM on an L40S at TP 1: max %d over %d sizes, want 512 over its whole list of %d", got, len(s), len(vl.CaptureSizes()))
	}
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	for _, c := range []struct{ edit, with, field string }{
		{"{below_mib: 61440, bs: 32}", "{below_mib: 30000, bs: 32}", "cuda_graphs.max_bs[3]"},
		{"{below_mib: 61440, min_tp: 4, bs: 160}", "{below_mib: 61440, min_tp: 1, bs: 160}", "cuda_graphs.max_bs[4]"},
		{"{below_mib: 61440, bs: 32}", "{below_mib: 61440, min_tp: 2, bs: 32}", "cuda_graphs.max_bs[3]"},
		{"{below_mib: 20480, bs: 8}", "{below_mib: 20480, bs: 0}", "cuda_graphs.max_bs[0].bs"},
		{"{below_mib: 20480, bs: 8}", "{below_mib: 20480, bs: 1024}", "cuda_graphs.max_bs[0].bs"},
		{"{bs: 512}", "{below_mib: 300000, bs: 512}", "cuda_graphs.max_bs[7]"},
		{"{below_mib: 20480, bs: 8}", "{bs: 8}", "cuda_graphs.max_bs[0]"},
	} {
		if !strings.Contains(base, c.edit) {
			t.Fatalf("edit %q not found", c.edit)
		}
		if err := parseEdited(base, c.edit, c.with); !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.with, err, c.field)
		}
	}
}

// TestSGLangStaticFrac: SGLang's default mem_fraction_static
// (server_args.py _handle_gpu_memory_settings), worked by hand from its
// formula, reserved = 512 + 1.5 x max(chunk, 2048) + 2 x cuda_graph_max_bs
// + 1024 x tp / 8 (+ 3 and 1.5 x cuda_graph_max_bs x dp with DP attention
// above 300), at least 10240 on GPUs above 60 GiB, + 2048 for an EAGLE or
// NEXTN draft and 6144 for a STANDALONE one, then round((mem -
// reserved) / mem, 3), mem in MiB.
func TestSGLangStaticFrac(t *testing.T) {
	sg, err := Lookup(Ref{Name: "sglang"})
	if err != nil {
		t.Fatal(err)
	}
	if sg.KVPool.KVPoolRule() != KVPoolMemFractionStatic {
		t.Fatalf("SGLang's rule %q", sg.KVPool.KVPoolRule())
	}
	for _, c := range []struct {
		name     string
		in       StaticFracInput
		reserved float64
		frac     float64
	}{
		// 512 + 24576 + 1024 + 1024 = 27136; 157184 / 184320 = 0.85278.
		{"B200 tp8", StaticFracInput{GPUMemBytes: 180 << 30, ChunkTokens: 16384, GraphMaxBS: 512, Ranks: 8}, 27136, 0.853},
		// 512 + 12288 + 1024 + 1024 = 14848; 67072 / 81920 = 0.81875.
		{"H100 tp8", StaticFracInput{GPUMemBytes: 80 << 30, ChunkTokens: 8192, GraphMaxBS: 512, Ranks: 8}, 14848, 0.819},
		// 512 + 12288 + 512 + 128 = 13440; 68480 / 81920 = 0.83594.
		{"H100 tp1", StaticFracInput{GPUMemBytes: 80 << 30, ChunkTokens: 8192, GraphMaxBS: 256, Ranks: 1}, 13440, 0.836},
		// 512 + 3072 + 48 + 128 = 3760, no floor at 32 GiB; 29008 / 32768 = 0.88525.
		{"RTX 5090 tp1", StaticFracInput{GPUMemBytes: 32 << 30, ChunkTokens: 2048, GraphMaxBS: 24, Ranks: 1}, 3760, 0.885},
		// 512 + 3072 (chunk 1024 counts as 2048) + 16 + 128 = 3728, raised to 10240; 174080 / 184320 = 0.94444.
		{"B200 floor", StaticFracInput{GPUMemBytes: 180 << 30, ChunkTokens: 1024, GraphMaxBS: 8, Ranks: 1}, 10240, 0.944},
		// 141e9 B = 134468 MiB; 512 + 12288 + 1024 + 1024 + 12288 + 6144 = 33280; 101188 / 134468 = 0.75251.
		{"H200 dp attention 8", StaticFracInput{GPUMemBytes: 141e9, ChunkTokens: 8192, GraphMaxBS: 512, Ranks: 8, DPAttention: 8}, 33280, 0.753},
		// 27136 + 2048 = 29184; 155136 / 184320 = 0.84167.
		{"B200 mtp", StaticFracInput{GPUMemBytes: 180 << 30, ChunkTokens: 16384, GraphMaxBS: 512, Ranks: 8, Draft: "mtp"}, 29184, 0.842},
		// 27136 + 6144 = 33280; 151040 / 184320 = 0.81944.
		{"B200 draft model", StaticFracInput{GPUMemBytes: 180 << 30, ChunkTokens: 16384, GraphMaxBS: 512, Ranks: 8, Draft: "draft"}, 33280, 0.819},
		{"B200 ngram", StaticFracInput{GPUMemBytes: 180 << 30, ChunkTokens: 16384, GraphMaxBS: 512, Ranks: 8, Draft: "ngram"}, 27136, 0.853},
	} {
		frac, res := sg.KVPool.Reserve.StaticFrac(c.in)
		if frac != c.frac || res != c.reserved {
			t.Errorf("%s: fraction %v reserving %v MiB, want %v reserving %v", c.name, frac, res, c.frac, c.reserved)
		}
	}
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	for _, c := range []struct{ edit, with, field string }{
		{"  rule: mem_fraction_static", "  rule: fraction", "kv_pool.rule"},
		{"    digits: 3", "    digits: 0", "kv_pool.reserve.digits"},
		{"draft_mib: {mtp: 2048,", "draft_mib: {suffix: 2048,", "kv_pool.reserve.draft_mib"},
		{"  cite: [mem-fraction-static, kv-pool]", "  cite: []", "kv_pool.cite"},
	} {
		data := strings.Replace(base, c.edit, c.with, 1)
		if data == base {
			t.Fatalf("edit %q not found", c.edit)
		}
		if _, err := Parse([]byte(data), "edited.yaml"); !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.with, err, c.field)
		}
	}
}

// TestTRTLLMKVPoolRule: TensorRT-LLM sizes its KV pool as
// KvCacheConfig.free_gpu_memory_fraction (default 0.9) of the memory free
// after the weights and a profiling forward (KvCacheCreator
// _cal_max_memory: (total - peak) x fraction), and its profile says so
// with a cite naming that source.
func TestTRTLLMKVPoolRule(t *testing.T) {
	tr, err := Lookup(Ref{Name: "trtllm"})
	if err != nil {
		t.Fatal(err)
	}
	k := tr.KVPool
	if k.KVPoolRule() != KVPoolFreeGPUMemFrac || k.UtilFrac != 0.9 {
		t.Fatalf("TensorRT-LLM's pool: rule %q at %v, want %s at 0.9", k.KVPoolRule(), k.UtilFrac, KVPoolFreeGPUMemFrac)
	}
	var cited string
	for _, key := range k.Cite {
		cited += tr.Sources[key] + "\n"
	}
	for _, want := range []string{"free_gpu_memory_fraction", "_cal_max_memory", "KvCacheConfig", "0.9"} {
		if !strings.Contains(cited, want) {
			t.Errorf("kv_pool's sources do not name %q:\n%s", want, cited)
		}
	}
	base := string(mustRead(t, "profiles/trtllm-1.3.yaml"))
	for _, c := range []struct{ edit, with, field string }{
		{"  util_frac: 0.9", "  util_frac: 1.5", "kv_pool.util_frac"},
		{"  cite: [kv-pool-trtllm]", "  cite: []", "kv_pool.cite"},
	} {
		data := strings.Replace(base, c.edit, c.with, 1)
		if data == base {
			t.Fatalf("edit %q not found", c.edit)
		}
		if _, err := Parse([]byte(data), "edited.yaml"); !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.with, err, c.field)
		}
	}
}

// TestTRTLLMSchedulerDefaults: TensorRT-LLM's own scheduling defaults
// (llm_args.py BaseLlmArgs max_batch_size 2048, max_num_tokens 8192 on
// every GPU, enable_chunked_prefill False, KvCacheConfig.tokens_per_block
// 32, SchedulerConfig.capacity_scheduler_policy GUARANTEED_NO_EVICT) are
// stated in its profile with cites naming those fields; vLLM's profile
// states none of them (the serving simulation's vLLM rule). A bad
// admission or a negative count is refused in one line naming it.
func TestTRTLLMSchedulerDefaults(t *testing.T) {
	tr, err := Lookup(Ref{Name: "trtllm"})
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Scheduler
	if s.MaxSeqs != 2048 || s.BlockTokens != 32 || s.ChunkedPrefill == nil || *s.ChunkedPrefill || s.Admission != AdmitGuaranteedNoEvict || s.MaxRunning != nil {
		t.Errorf("TensorRT-LLM's scheduler: max_seqs %d, block_tokens %d, chunked_prefill %v, admission %q, max_running %v; want 2048, 32, false, %s, none",
			s.MaxSeqs, s.BlockTokens, s.ChunkedPrefill, s.Admission, s.MaxRunning, AdmitGuaranteedNoEvict)
	}
	for _, mem := range []int64{24 << 30, 80 << 30, 141e9, 180 << 30} {
		if got := s.DefaultChunkTokens(mem); got != 8192 {
			t.Errorf("%d MiB: max_num_tokens %d, want 8192 on every GPU", mem/MiB, got)
		}
	}
	var cited string
	for _, key := range s.Cite {
		cited += tr.Sources[key] + "\n"
	}
	for _, want := range []string{"max_batch_size default 2048", "max_num_tokens default 8192", "enable_chunked_prefill default False", "tokens_per_block default 32", "GUARANTEED_NO_EVICT", "GuaranteedNoEvictScheduler"} {
		if !strings.Contains(cited, want) {
			t.Errorf("scheduler's sources do not name %q:\n%s", want, cited)
		}
	}
	vl, _ := Lookup(Ref{Name: "vllm"})
	if v := vl.Scheduler; v.MaxSeqs != 0 || v.BlockTokens != 0 || v.ChunkedPrefill != nil || v.Admission != "" {
		t.Errorf("vLLM's profile states %+v, want none of TensorRT-LLM's defaults", v)
	}
	base := string(mustRead(t, "profiles/trtllm-1.3.yaml"))
	for _, c := range []struct{ edit, with, field string }{
		{"admission: guaranteed_no_evict", "admission: max_utilization", "scheduler.admission"},
		{"block_tokens: 32", "block_tokens: -1", "scheduler"},
	} {
		data := strings.Replace(base, c.edit, c.with, 1)
		if data == base {
			t.Fatalf("edit %q not found", c.edit)
		}
		if _, err := Parse([]byte(data), "edited.yaml"); !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.with, err, c.field)
		}
	}
}

// TestVLLMCUDAGraphEstimate: vLLM from 0.21.0 takes the estimate of its
// CUDA graphs' memory off the pool (gpu_worker.py
// cudagraph_memory_estimate_applied; VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS,
// added off by PR #30515, on by default since PR #38284); vllm@0.24 states
// it with cites naming those sources. The nightly of 0.16 predates it, and
// no other engine takes an estimate off its pool; the fact is refused
// under another rule than gpu_memory_utilization.
func TestVLLMCUDAGraphEstimate(t *testing.T) {
	v, err := Lookup(Ref{Name: "vllm", Version: "0.24"})
	if err != nil {
		t.Fatal(err)
	}
	k := v.KVPool
	if k.KVPoolRule() != KVPoolGPUMemUtil || !k.CUDAGraphEstimate {
		t.Fatalf("vllm@0.24's pool: rule %q, graph estimate %v; want %s with the estimate", k.KVPoolRule(), k.CUDAGraphEstimate, KVPoolGPUMemUtil)
	}
	var cited string
	for _, key := range k.Cite {
		cited += v.Sources[key] + "\n"
	}
	for _, want := range []string{"PR #30515", "PR #38284", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "cudagraph_memory_estimate_applied", "Enabled by default as of v0.21.0", "#53013"} {
		if !strings.Contains(cited, want) {
			t.Errorf("vllm@0.24's kv_pool sources do not name %q:\n%s", want, cited)
		}
	}
	for _, ref := range []Ref{{Name: "vllm", Version: "0.16-nightly"}, {Name: "sglang"}, {Name: "trtllm"}, ExecutorRef} {
		p, err := Lookup(ref)
		if err != nil {
			t.Fatal(err)
		}
		if p.KVPool.CUDAGraphEstimate {
			t.Errorf("%s takes a CUDA-graph estimate off its pool, want none", p.Name())
		}
	}
	base := string(mustRead(t, "profiles/trtllm-1.3.yaml"))
	data := strings.Replace(base, "  util_frac: 0.9\n", "  util_frac: 0.9\n  cuda_graph_estimate: true\n", 1)
	if data == base {
		t.Fatal("edit not found")
	}
	if _, err := Parse([]byte(data), "edited.yaml"); !oneLineWith(err, "kv_pool.cuda_graph_estimate") {
		t.Errorf("an estimate under free_gpu_memory_fraction: error %v, want one line naming kv_pool.cuda_graph_estimate", err)
	}
}

// TestVLLMKVPoolFraction: vLLM 0.24 sizes its pool at
// gpu_memory_utilization 0.92 (PR #38284 raised the default from 0.9 for
// v0.21.0; vllm/config/cache.py Field(default=0.92)), and its profile says
// so with a cite naming those sources; the nightly of 0.16 predates it
// and states no pool (vLLM's 0.9).
func TestVLLMKVPoolFraction(t *testing.T) {
	v, err := Lookup(Ref{Name: "vllm", Version: "0.24"})
	if err != nil {
		t.Fatal(err)
	}
	k := v.KVPool
	if k.KVPoolRule() != KVPoolGPUMemUtil || k.UtilFrac != 0.92 {
		t.Fatalf("vllm@0.24's pool: rule %q at %v, want %s at 0.92", k.KVPoolRule(), k.UtilFrac, KVPoolGPUMemUtil)
	}
	var cited string
	for _, key := range k.Cite {
		cited += v.Sources[key] + "\n"
	}
	for _, want := range []string{"PR #38284", "default=0.92", "0.9 before"} {
		if !strings.Contains(cited, want) {
			t.Errorf("vllm@0.24's kv_pool sources do not name %q:\n%s", want, cited)
		}
	}
	if n, _ := Lookup(Ref{Name: "vllm", Version: "0.16-nightly"}); n.KVPool.Rule != "" || n.KVPool.UtilFrac != 0 {
		t.Errorf("vllm@0.16-nightly states a pool (%+v), want none: vLLM's 0.9", n.KVPool)
	}
}

// TestVLLMIndexerWorkspace: vLLM's profiling run reserves a DSA model's
// indexer K-gather workspace of max_model_len x 40 entries
// (get_max_prefill_buffer_size), kept by its WorkspaceManager; vllm@0.24
// states the 40 with a cite naming both sources. No other profile states
// one, and the fact is refused negative or under another rule than
// gpu_memory_utilization, whose pool is what the profiling run leaves.
func TestVLLMIndexerWorkspace(t *testing.T) {
	v, err := Lookup(Ref{Name: "vllm", Version: "0.24"})
	if err != nil {
		t.Fatal(err)
	}
	if n := v.KVPool.IndexerWorkspacePerMaxLen; n != 40 {
		t.Errorf("vllm@0.24: indexer workspace %d entries per max_model_len token, want get_max_prefill_buffer_size's 40", n)
	}
	var cited string
	for _, key := range v.KVPool.Cite {
		cited += v.Sources[key] + "\n"
	}
	for _, want := range []string{"get_max_prefill_buffer_size", "max_model_len x 40", "get_simultaneous", "_gather_workspace_shapes"} {
		if !strings.Contains(cited, want) {
			t.Errorf("vllm@0.24's kv_pool sources do not name %q", want)
		}
	}
	// The modular Triton and Marlin experts take their intermediate
	// caches from the same workspace buffer; FlashInfer's CUTLASS runner
	// and trtllm-gen allocate theirs inside their own op.
	for _, k := range v.MoE.Kernels {
		want := k.Name == "triton" || k.Name == "marlin"
		if k.WorkspaceCaches != want {
			t.Errorf("vllm@0.24 MoE kernel %s: workspace_caches %v, want %v", k.Name, k.WorkspaceCaches, want)
		}
		if want && !strings.Contains(strings.Join(citedOf(v, k.Cite), "\n"), "current_workspace_manager().get_simultaneous") {
			t.Errorf("vllm@0.24 MoE kernel %s: its cites do not name the workspace manager", k.Name)
		}
	}
	for _, ref := range []Ref{{Name: "vllm", Version: "0.16-nightly"}, {Name: "sglang"}, {Name: "trtllm"}, ExecutorRef} {
		p, err := Lookup(ref)
		if err != nil {
			t.Fatal(err)
		}
		if p.KVPool.IndexerWorkspacePerMaxLen != 0 {
			t.Errorf("%s states an indexer workspace, want none", p.Name())
		}
	}
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	data := strings.Replace(base, "  rule: mem_fraction_static\n", "  rule: mem_fraction_static\n  indexer_workspace_per_max_len: 40\n", 1)
	if data == base {
		t.Fatal("edit not found")
	}
	if _, err := Parse([]byte(data), "edited.yaml"); !oneLineWith(err, "kv_pool.indexer_workspace_per_max_len") {
		t.Errorf("a workspace under mem_fraction_static: error %v, want one line naming kv_pool.indexer_workspace_per_max_len", err)
	}
	base = string(mustRead(t, "profiles/vllm-0.24.yaml"))
	data = strings.Replace(base, "  indexer_workspace_per_max_len: 40\n", "  indexer_workspace_per_max_len: -40\n", 1)
	if data == base {
		t.Fatal("edit not found")
	}
	if _, err := Parse([]byte(data), "edited.yaml"); !oneLineWith(err, "kv_pool.indexer_workspace_per_max_len") {
		t.Errorf("a negative workspace: error %v, want one line naming kv_pool.indexer_workspace_per_max_len", err)
	}
}

// citedOf is the source texts of keys in p.
func citedOf(p *Profile, keys []string) []string {
	var out []string
	for _, k := range keys {
		out = append(out, p.Sources[k])
	}
	return out
}

// TestVLLMBatchDefaultsStated: vLLM's max_num_batched_tokens and max_num_seqs
// where unset are vllm serve's (EngineArgs.get_batch_defaults,
// UsageContext.OPENAI_API_SERVER): 8192 and 1024 on a GPU of 70 GiB
// (70 x 2^30 B) or more whose name lacks "a100", in any case, else 2048
// and 256; both vLLM profiles state the rule (scheduler.batch_defaults)
// with a source naming get_batch_defaults, and no other engine does. A
// profile that serves with no default budget, the rule beside SGLang's
// tiers, a zero count or threshold is refused in one line naming it.
func TestVLLMBatchDefaultsStated(t *testing.T) {
	large, small := Batch{MaxNumBatchedTokens: 8192, MaxNumSeqs: 1024}, Batch{MaxNumBatchedTokens: 2048, MaxNumSeqs: 256}
	for _, ref := range []string{"vllm@0.24", "vllm@0.16-nightly"} {
		p := mustLookup(t, ref)
		for _, c := range []struct {
			memBytes int64
			name     string
			want     Batch
		}{
			{143771 * MiB, "NVIDIA H200", large},
			{80 << 30, "NVIDIA H100 80GB HBM3", large},
			{97887 * MiB, "NVIDIA RTX PRO 6000 Blackwell Server Edition", large},
			{70 << 30, "a GPU of exactly 70 GiB", large},
			{70<<30 - 1, "one byte under 70 GiB", small},
			{80 << 30, "NVIDIA A100-SXM4-80GB", small},
			{80 << 30, "nvidia a100 80gb pcie", small},
			{46068 * MiB, "NVIDIA L40S", small},
			{0, "", small},
		} {
			got, ok := p.Scheduler.DefaultBatch(c.memBytes, c.name)
			if !ok || got != c.want {
				t.Errorf("%s on %s (%d MiB): %+v (stated %v), want %+v", ref, c.name, c.memBytes/MiB, got, ok, c.want)
			}
		}
		var cited string
		for _, key := range p.Scheduler.BatchDefaults.Cite {
			cited += p.Sources[key]
		}
		for _, want := range []string{"get_batch_defaults", "70 * GiB_bytes", "'a100' not in device_name", "OPENAI_API_SERVER"} {
			if !strings.Contains(cited, want) {
				t.Errorf("%s: scheduler.batch_defaults' sources do not name %q", ref, want)
			}
		}
	}
	for _, ref := range []string{"sglang", "trtllm", "executor"} {
		if _, ok := mustLookup(t, ref).Scheduler.DefaultBatch(80<<30, "NVIDIA H100"); ok {
			t.Errorf("%s states vLLM's batch defaults", ref)
		}
	}
	vllm := string(mustRead(t, "profiles/vllm-0.24.yaml"))
	sglang := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	for _, c := range []struct{ base, edit, with, field string }{
		{vllm, "large_from_gib: 70", "large_from_gib: 0", "scheduler.batch_defaults.large_from_gib"},
		{vllm, "small: {max_num_batched_tokens: 2048, max_num_seqs: 256}", "small: {max_num_batched_tokens: 2048, max_num_seqs: 0}", "scheduler.batch_defaults.small"},
		{vllm, "large_except: [a100]", "large_except: [\"\"]", "scheduler.batch_defaults.large_except[0]"},
		{vllm, "  batch_defaults:\n    large_from_gib: 70\n    large_except: [a100]\n    large: {max_num_batched_tokens: 8192, max_num_seqs: 1024}\n    small: {max_num_batched_tokens: 2048, max_num_seqs: 256}\n    cite: [batch-defaults]\n", "", "scheduler"},
		{sglang, "scheduler:\n  policy: sglang\n", "scheduler:\n  policy: sglang\n  batch_defaults: {large_from_gib: 70, large: {max_num_batched_tokens: 8192, max_num_seqs: 1024}, small: {max_num_batched_tokens: 2048, max_num_seqs: 256}}\n", "scheduler.batch_defaults"},
	} {
		data := strings.Replace(c.base, c.edit, c.with, 1)
		if data == c.base {
			t.Fatalf("edit %q not found", c.edit)
		}
		if _, err := Parse([]byte(data), "edited.yaml"); !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.with, err, c.field)
		}
	}
}
