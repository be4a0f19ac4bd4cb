package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// TestEmbeddedProfiles: every embedded profile decodes strictly and
// validates; each engine has one default; the default engine is vLLM.
func TestEmbeddedProfiles(t *testing.T) {
	ps, err := Profiles()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"executor@1", "sglang@0.5", "trtllm@1.3", "vllm@0.16-nightly", "vllm@0.24"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("profiles %v, want %v", got, want)
	}
	for _, p := range ps {
		if p.File() == "" || p.Title == "" {
			t.Errorf("%s: file %q title %q", p.Name(), p.File(), p.Title)
		}
	}
	if d := MustDefault(); d.Name() != "vllm@0.24" {
		t.Errorf("default profile %s, want vllm@0.24", d.Name())
	}
}

// oneLineWith reports whether err is a one-line error containing sub:
// how a profile's mistakes are told.
func oneLineWith(err error, sub string) bool {
	return err != nil && strings.Contains(err.Error(), sub) && !strings.Contains(err.Error(), "\n")
}

// parseEdited parses profile text base with its first old replaced by
// new.
func parseEdited(base, old, new string) error {
	_, err := Parse([]byte(strings.Replace(base, old, new, 1)), "edited.yaml")
	return err
}

func mustLookup(t *testing.T, s string) *Profile {
	t.Helper()
	r, err := ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Lookup(r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLookup: names, versions and prefixes resolve as documented; an
// unknown one is one line naming it and the profiles there are.
func TestLookup(t *testing.T) {
	cases := []struct {
		ref, want string
	}{
		{"", "vllm@0.24"},
		{"vllm", "vllm@0.24"},
		{"VLLM@0.24", "vllm@0.24"},
		{"vllm@0.16-nightly", "vllm@0.16-nightly"},
		{"vllm@0.16", "vllm@0.16-nightly"},
		{"sglang", "sglang@0.5"},
		{"sglang@0.5", "sglang@0.5"},
		{"trtllm@1", "trtllm@1.3"},
		{"executor", "executor@1"},
	}
	for _, c := range cases {
		if got := mustLookup(t, c.ref).Name(); got != c.want {
			t.Errorf("%q: %s, want %s", c.ref, got, c.want)
		}
	}
	for _, bad := range []string{"vllm@0.9", "tensorrt", "sglang@0.4"} {
		r, _ := ParseRef(bad)
		_, err := Lookup(r)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "vllm@0.24") {
			t.Errorf("%q: error %v, want one line naming it and the profiles", bad, err)
		}
	}
	for _, bad := range []string{"vllm@", "@0.24", "vllm 0.24", "vllm@0.24;rm"} {
		if _, err := ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q) accepted", bad)
		}
	}
}

// TestAttentionSelection: the backend each engine picks per family and
// KV dtype, with the sources the profiles cite: vLLM's priority lists
// (cuda.py) and the backends aiconfigurator's vLLM 0.24 tables record per
// GPU; SGLang's per-family default (server_args.py).
func TestAttentionSelection(t *testing.T) {
	cases := []struct {
		engine   string
		arch     Arch
		kv       KVDtype
		qkNope   int
		dcp      bool
		override string
		want     string // backend name, or "error: <substring>"
	}{
		// aiconfigurator vLLM 0.24: TRITON_MLA on RTX PRO 6000 and L40S.
		{"vllm", SM120, KV16, 128, false, "", "TRITON_MLA"},
		{"vllm", SM120, KVFP8, 128, false, "", "TRITON_MLA"},
		{"vllm", SM89, KV16, 128, false, "", "TRITON_MLA"},
		// ... FLASH_ATTN_MLA with a bf16 cache, FLASHMLA with fp8 on H200.
		{"vllm", SM90, KV16, 128, false, "", "FLASH_ATTN_MLA"},
		{"vllm", SM90, KVFP8, 128, false, "", "FLASHMLA"},
		// ... FLASHINFER_MLA on B200; qk_nope 192 (GLM-5) or DCP: CUTLASS_MLA.
		{"vllm", SM100, KV16, 128, false, "", "FLASHINFER_MLA"},
		{"vllm", SM100, KV16, 192, false, "", "CUTLASS_MLA"},
		{"vllm", SM100, KV16, 128, true, "", "CUTLASS_MLA"},
		// Triton's FP8 path needs SM89+ (fp8e4nv).
		{"vllm", SM80, KVFP8, 128, false, "", "error: fp8"},
		{"vllm", SM120, KV16, 128, false, "flashmla", "error: runs on sm90, sm100 only"},
		{"vllm", SM120, KV16, 128, false, "flashinfer", "error: no attention backend \"flashinfer\""},
		{"vllm", SM120, KV16, 128, false, "triton", "TRITON_MLA"},
		{"sglang", SM120, KV16, 128, false, "", "triton"},
		{"sglang", SM120, KV16, 192, false, "flashinfer", "flashinfer"},
		{"sglang", SM120, KVFP8, 128, false, "flashinfer", "error: fp8 KV cache on sm100 only"},
		{"sglang", SM90, KV16, 128, false, "", "fa3"},
		{"sglang", SM90, KVFP8, 128, false, "", "flashmla"},
		{"sglang", SM100, KV16, 128, false, "", "flashinfer"},
		{"trtllm", SM120, KV16, 128, false, "", "error: no MLA attention backend on sm120"},
		{"trtllm", SM90, KVFP8, 128, false, "", "TRTLLM"},
		{"executor", SM90, KV16, 128, false, "", "executor_mla"},
		{"executor", ArchUnknown, KVFP8, 192, true, "", "executor_mla"},
	}
	for _, c := range cases {
		p := mustLookup(t, c.engine)
		b, err := p.Backend(MLAUse{Arch: c.arch, KV: c.kv, QKNope: c.qkNope, DCP: c.dcp}, c.override)
		name := c.engine + " " + c.arch.String() + " " + c.kv.String() + " " + c.override
		if sub, ok := strings.CutPrefix(c.want, "error: "); ok {
			if !oneLineWith(err, sub) {
				t.Errorf("%s: %v, %v; want one-line error containing %q", name, b, err, sub)
			}
			continue
		}
		if err != nil || b.Name != c.want {
			t.Errorf("%s: %v %v, want %s", name, b, err, c.want)
		}
	}
}

// TestSparseAttentionSelection: a DSA model run sparse (GLM-5 not under
// --dense-dsa) takes vLLM 0.24's sparse MLA backend on every family that
// has one, whatever its KV dtype and qk_nope_head_dim: vLLM's
// validate_configuration refuses every backend whose is_sparse differs
// from the model's use_sparse (hasattr(hf_config, "index_topk")), and
// _get_backend_priorities lists FLASHMLA_SPARSE on SM10x and the other
// families alike (vllm/platforms/cuda.py at 002db495);
// FlashMLASparseBackend.supports_compute_capability takes majors 9 and
// 10, its supported_kv_cache_dtypes bfloat16 and fp8_ds_mla
// (flashmla_sparse.py). A dense backend named for a sparse model is
// refused, as vLLM's get_attn_backend_cls raises for a selected backend
// that is not valid; the sparse one named for a dense model likewise.
// SGLang 0.5 runs a DSA model on its nsa backend on SM90 and SM100
// whatever the KV dtype (server_args _handle_model_specific_adjustments
// sets attention_backend "nsa" for it; its nsa_backend.py asserts a DSA
// model and runs on FlashMLA, FA3 and trtllm-gen kernels only), so its
// dense backends are refused for one there the same way. A profile that
// states no sparse backend (TensorRT-LLM 1.3's) keeps pricing its dense
// choice.
func TestSparseAttentionSelection(t *testing.T) {
	for _, c := range []struct {
		engine   string
		arch     Arch
		kv       KVDtype
		sparse   bool
		override string
		want     string // backend name, or "error: <substring>"
	}{
		// B200 (was CUTLASS_MLA for GLM-5's qk_nope 192) and H200 (was
		// FLASHMLA with an FP8 cache, FLASH_ATTN_MLA with bf16).
		{"vllm", SM100, KVFP8, true, "", "FLASHMLA_SPARSE"},
		{"vllm", SM100, KV16, true, "", "FLASHMLA_SPARSE"},
		{"vllm", SM90, KVFP8, true, "", "FLASHMLA_SPARSE"},
		{"vllm", SM90, KV16, true, "", "FLASHMLA_SPARSE"},
		{"vllm", SM90, KVFP8, true, "flashmla_sparse", "FLASHMLA_SPARSE"},
		// No sparse MLA kernel for SM 8.x or SM12x in 0.24.
		{"vllm", SM120, KVFP8, true, "", "error: no sparse MLA attention backend for sm120"},
		{"vllm", SM80, KV16, true, "", "error: FLASHMLA_SPARSE runs on sm90, sm100 only"},
		// A dense backend for a sparse model, and the reverse.
		{"vllm", SM100, KVFP8, true, "CUTLASS_MLA", "error: CUTLASS_MLA is a dense MLA backend"},
		{"vllm", SM90, KVFP8, true, "flashmla", "error: FLASHMLA is a dense MLA backend: a DSA model's sparse attention runs on a sparse one (FLASHMLA_SPARSE; --dense-dsa"},
		{"vllm", SM90, KVFP8, false, "FLASHMLA_SPARSE", "error: runs DSA sparse attention only"},
		// The dense choice is unchanged by the sparse backend's presence.
		{"vllm", SM90, KVFP8, false, "", "FLASHMLA"},
		{"vllm", SM100, KV16, false, "", "CUTLASS_MLA"},
		// SGLang: nsa on SM90 / SM100 (was flashmla on the H200 with an
		// FP8 cache, fa3 with bf16, flashinfer on the B200), none below
		// SM90; a dense backend named for the sparse model is refused
		// naming nsa, nsa named for a dense model likewise.
		{"sglang", SM100, KVFP8, true, "", "nsa"},
		{"sglang", SM100, KV16, true, "", "nsa"},
		{"sglang", SM90, KVFP8, true, "", "nsa"},
		{"sglang", SM90, KV16, true, "", "nsa"},
		{"sglang", SM90, KV16, true, "NSA", "nsa"},
		{"sglang", SM80, KV16, true, "", "error: nsa runs on sm90, sm100 only; --dense-dsa prices the model dense)"},
		{"sglang", SM100, KVFP8, true, "flashinfer", "error: flashinfer is a dense MLA backend: a DSA model's sparse attention runs on a sparse one (nsa; --dense-dsa"},
		{"sglang", SM90, KV16, true, "fa3", "error: fa3 is a dense MLA backend"},
		{"sglang", SM100, KVFP8, false, "nsa", "error: runs DSA sparse attention only"},
		{"sglang", SM90, KVFP8, false, "", "flashmla"},
		{"sglang", SM100, KV16, false, "", "flashinfer"},
		// No sparse backend stated: the dense choice prices it.
		{"trtllm", SM90, KVFP8, true, "", "TRTLLM"},
	} {
		p := mustLookup(t, c.engine)
		u := MLAUse{Arch: c.arch, KV: c.kv, QKNope: 192, Sparse: c.sparse}
		b, err := p.Backend(u, c.override)
		name := fmt.Sprintf("%s %+v %q", c.engine, u, c.override)
		if sub, ok := strings.CutPrefix(c.want, "error: "); ok {
			if !oneLineWith(err, sub) {
				t.Errorf("%s: %v, %v; want one-line error containing %q", name, b, err, sub)
			}
			continue
		}
		if err != nil || b.Name != c.want {
			t.Errorf("%s: %v %v, want %s", name, b, err, c.want)
		}
	}
	// What the sparse decode launches besides its kernel (flashmla_sparse.py
	// forward_mqa, FP8 cache at fewer than 64 heads a rank): concat_mla_q,
	// the top-k conversion, the padded query's fill and copy, and the merge
	// of the KV splits; its grid fills the SMs (num_sm_parts), no module
	// table measured it.
	b, err := mustLookup(t, "vllm").Backend(MLAUse{Arch: SM100, KV: KVFP8, Sparse: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !b.Sparse || len(b.Companions) != 5 || b.Grid.Kind != GridSMFill || b.Table != "" || !b.NoStandIn || b.CUDAGraph != "full" {
		t.Errorf("FLASHMLA_SPARSE: %+v", b)
	}
	// SGLang's nsa decode with its default FP8 cache (flashmla_kv,
	// nsa_backend.py forward_decode): the query's nope and rope halves
	// concatenated (_concat_mla_absorb_q_general), then FlashMLA's sparse
	// FP8 decode over the top-k (the index transform fused into the
	// indexer's top-k, SGLANG_NSA_FUSE_TOPK on by default), whose KV
	// splits over the SMs (get_mla_metadata's num_splits, computed once a
	// step) are merged by its combine kernel: two companions; captured in
	// the decode graph; no module table measured it.
	b, err = mustLookup(t, "sglang").Backend(MLAUse{Arch: SM100, KV: KVFP8, QKNope: 192, Sparse: true}, "")
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "nsa" || !b.Sparse || len(b.Companions) != 2 || b.Grid.Kind != GridSMFill || b.Table != "" || !b.NoStandIn || b.CUDAGraph != "full" || b.DCP {
		t.Errorf("nsa: %+v", b)
	}
}

// TestSplitRules: the KV-split rule is the profile's: vLLM 0.24 sizes by
// length, the Feb-Mar 2026 nightly splits 4 ways, SGLang's triton 8.
func TestSplitRules(t *testing.T) {
	for _, c := range []struct {
		engine         string
		fixed, minWork int
		blockH, blockN int
		companions     int
	}{
		{"vllm@0.24", 0, 512, 16, 32, 4},
		{"vllm@0.16-nightly", 4, 0, 16, 32, 4},
		{"sglang", 8, 0, 16, 32, 2},
	} {
		p := mustLookup(t, c.engine)
		b, err := p.Backend(MLAUse{Arch: SM120, KV: KV16, QKNope: 128}, "")
		if err != nil {
			t.Fatal(err)
		}
		g := b.Grid
		if g.Kind != GridSplitKV || g.FixedSplits != c.fixed || g.MinWorkPerSplit != c.minWork || g.BlockH != c.blockH || g.BlockN != c.blockN || len(b.Companions) != c.companions {
			t.Errorf("%s: %+v with %d companions", c.engine, g, len(b.Companions))
		}
	}
}

// TestMoESelection: the MoE kernel per weight format and family.
func TestMoESelection(t *testing.T) {
	cases := []struct {
		engine   string
		arch     Arch
		f        WeightFormat
		override string
		want     string
		grid     GEMMGrid
	}{
		{"vllm", SM120, INT4, "", "marlin", GridPersistent},
		{"vllm", SM120, NVFP4, "", "flashinfer_cutlass", GridTiles},
		{"vllm", SM100, NVFP4, "", "flashinfer_trtllm", GridTiles},
		{"vllm", SM90, FP8Block, "", "triton", GridTiles},
		{"vllm", SM90, NVFP4, "", "marlin", GridPersistent},
		// modelopt_fp4 needs compute capability 10.0 in SGLang.
		{"sglang", SM90, NVFP4, "", "error: sglang@0.5 has no MoE kernel for nvfp4 experts on sm90", ""},
		// auto stays auto on SM120 in SGLang 0.5.x: cutlass_moe_fp4.
		{"sglang", SM120, NVFP4, "", "cutlass", GridTiles},
		// SGLang 0.5 hands NVFP4 experts to cutlass_moe_fp4 under its
		// triton backend (modelopt_quant.py's apply falls through).
		{"sglang", SM120, NVFP4, "triton", "cutlass", GridTiles},
		{"sglang", SM120, BF16, "triton", "triton", GridTiles},
		{"sglang", SM90, NVFP4, "triton", "error: does not take nvfp4", ""},
		{"sglang", SM120, INT4, "flashinfer_cutlass", "error: does not take int4-g32", ""},
		{"sglang", SM120, NVFP4, "b12x", "error: no MoE kernel \"b12x\"", ""},
		{"trtllm", SM90, INT4, "", "error: no MoE kernel", ""},
		{"executor", SM120, NVFP4, "", "cublas", GridTiles},
	}
	for _, c := range cases {
		p := mustLookup(t, c.engine)
		k, err := p.MoEKernel(c.arch, c.f, false, c.override)
		name := c.engine + " " + c.arch.String() + " " + c.f.String() + " " + c.override
		if sub, ok := strings.CutPrefix(c.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), sub) {
				t.Errorf("%s: %v, %v; want error containing %q", name, k, err, sub)
			}
			continue
		}
		if err != nil || k.Name != c.want || k.Grid != c.grid {
			t.Errorf("%s: %v %v, want %s (%s)", name, k, err, c.want, c.grid)
		}
	}
}

// TestCustomAllReduceRules: vLLM's and SGLang's custom all-reduce runs on
// 2 GPUs or NVLink-connected ones, up to 8 MiB, one-shot below 256 KiB;
// vLLM's one-stage kernel (and SGLang's copy of it) also runs below 512 KiB
// on 4 GPUs and at every size on 2 (csrc/custom_all_reduce.cuh); the
// executor has none.
func TestCustomAllReduceRules(t *testing.T) {
	cases := []struct {
		engine      string
		n           int
		nvlink      bool
		bytes       int64
		ok, oneShot bool
	}{
		{"vllm", 8, false, 14336, false, false},
		{"vllm", 2, false, 14336, true, true},
		{"vllm", 8, true, 14336, true, true},
		{"vllm", 8, true, 512 << 10, true, false},
		{"vllm", 4, true, 384 << 10, true, true},
		{"vllm", 4, true, 512 << 10, true, false},
		{"vllm", 2, false, 4 << 20, true, true},
		{"sglang", 4, true, 384 << 10, true, true},
		{"sglang", 8, true, 384 << 10, true, false},
		{"vllm", 8, true, 16 << 20, false, false},
		{"vllm", 16, true, 14336, false, false},
		{"sglang", 8, false, 14336, false, false},
		{"sglang", 4, true, 14336, true, true},
		{"trtllm", 2, false, 14336, false, false},
		{"executor", 8, true, 14336, false, false},
	}
	for _, c := range cases {
		ok, one := mustLookup(t, c.engine).AllReduce.Runs(c.n, c.nvlink, c.bytes)
		if ok != c.ok || one != c.oneShot {
			t.Errorf("%s %d GPUs nvlink %v %d B: runs %v one-shot %v, want %v %v", c.engine, c.n, c.nvlink, c.bytes, ok, one, c.ok, c.oneShot)
		}
	}
}

// TestAllReducePaths: vLLM's dispatch of a TP all-reduce (the custom
// all-reduce below its cap, torch symmetric memory below its own, NCCL
// above) on 8 GPUs sharing an NVSwitch: Hopper caps the custom all-reduce
// at 256 KiB and runs multimem to 64 MiB; Blackwell caps it at 1 MiB
// (two-shot from 256 KiB) and runs multimem to 128 MiB; 2 Blackwell GPUs
// run symmetric memory's two-shot kernel above 2 MiB. Without an NVSwitch
// (no multicast) symmetric memory does not run and the custom all-reduce
// keeps its 8 MiB; SGLang has no symmetric-memory rules. SM 10.3 GPUs
// (B300) take vLLM's limits for that capability, not the family's.
func TestAllReducePaths(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	cases := []struct {
		engine           string
		arch             Arch
		cc               string
		n                int
		nvlink, nvswitch bool
		bytes            int64
		want             ARPath
	}{
		{"vllm", SM90, "9.0", 8, true, true, 14336, ARCustomOneShot},
		{"vllm", SM90, "9.0", 8, true, true, 256*kib - 16, ARCustomOneShot},
		{"vllm", SM90, "9.0", 8, true, true, 256 * kib, ARSymmMultimem},
		{"vllm", SM90, "9.0", 8, true, true, 458752, ARSymmMultimem},
		{"vllm", SM90, "9.0", 8, true, true, 64 * mib, ARNCCL},
		{"vllm", SM100, "10.0", 8, true, true, 128 * kib, ARCustomOneShot},
		{"vllm", SM100, "10.0", 8, true, true, 458752, ARCustomTwoShot},
		{"vllm", SM100, "10.0", 8, true, true, 1 * mib, ARSymmMultimem},
		{"vllm", SM100, "10.0", 8, true, true, 128 * mib, ARNCCL},
		{"vllm", SM100, "10.0", 2, true, true, 4 * mib, ARSymmTwoShot},
		{"vllm", SM90, "9.0", 8, true, false, 458752, ARCustomTwoShot},
		{"vllm", SM90, "9.0", 8, true, false, 16 * mib, ARNCCL},
		{"vllm", SM120, "12.0", 8, false, false, 14336, ARNCCL},
		{"vllm", SM120, "12.0", 2, false, false, 14336, ARCustomOneShot},
		{"sglang", SM90, "9.0", 8, true, true, 458752, ARCustomTwoShot},
		{"executor", SM90, "9.0", 8, true, true, 14336, ARNCCL},
		// SM 10.3 (B300) has limits of its own: the custom all-reduce to 4
		// MiB on 8 GPUs, multimem from there to 64 MiB; on 2 GPUs both
		// stop at 4 MiB.
		{"vllm", SM100, "10.3", 8, true, true, 458752, ARCustomTwoShot},
		{"vllm", SM100, "10.3", 8, true, true, 2 * mib, ARCustomTwoShot},
		{"vllm", SM100, "10.3", 8, true, true, 4 * mib, ARSymmMultimem},
		{"vllm", SM100, "10.3", 8, true, true, 64 * mib, ARNCCL},
		{"vllm", SM100, "10.3", 2, true, true, 3 * mib, ARCustomOneShot},
		{"vllm", SM100, "10.3", 2, true, true, 4 * mib, ARNCCL},
	}
	for _, c := range cases {
		if got := mustLookup(t, c.engine).AllReducePath(c.arch, c.cc, c.n, c.nvlink, c.nvswitch, ARMessage{Bytes: c.bytes}); got != c.want {
			t.Errorf("%s %s (%s) %d GPUs nvlink %v nvswitch %v %d B: %s, want %s", c.engine, c.arch, c.cc, c.n, c.nvlink, c.nvswitch, c.bytes, got, c.want)
		}
	}
}

// TestFusedAllReducePaths: a message the engine hands its all-reduce +
// RMSNorm fusion runs in FlashInfer's fused kernel, one-shot or two-shot
// by the fusion's own rule, not the custom all-reduce's 256 KiB switch nor
// vLLM's symmetric-memory caps. SGLang passes no use_oneshot, so
// FlashInfer's heuristic decides: tokens x hidden x 2 x world x 2 bytes
// at most 42 MiB on 8 GPUs, i.e. up to 192 tokens of DeepSeek-V3's 7,168
// (2,752,512 bytes); vLLM's table: 1 MiB on SM 10.0, 2 MiB on SM 10.3,
// 0.5 MiB on SM 9.0 at TP 8. The same bytes unfused take the custom
// all-reduce's rule, and TensorRT-LLM keeps its strategy table.
func TestFusedAllReducePaths(t *testing.T) {
	const kib, mib, hidden = 1 << 10, 1 << 20, 7168
	tok := func(n int64) int64 { return n * hidden * 2 }
	cases := []struct {
		engine string
		arch   Arch
		cc     string
		n      int
		bytes  int64
		fused  bool
		want   ARPath
	}{
		{"sglang", SM100, "10.0", 8, tok(24), true, ARCustomOneShot},
		{"sglang", SM100, "10.0", 8, tok(24), false, ARCustomTwoShot},
		{"sglang", SM100, "10.0", 8, tok(192), true, ARCustomOneShot},
		{"sglang", SM100, "10.0", 8, tok(193), true, ARCustomTwoShot},
		{"sglang", SM90, "9.0", 4, 8 * mib, true, ARCustomOneShot},
		{"sglang", SM90, "9.0", 4, 8*mib + 2, true, ARCustomTwoShot},
		{"vllm", SM100, "10.0", 8, 458752, true, ARCustomOneShot},
		{"vllm", SM100, "10.0", 8, 458752, false, ARCustomTwoShot},
		{"vllm", SM90, "9.0", 8, 458752, true, ARCustomOneShot},
		{"vllm", SM90, "9.0", 8, 458752, false, ARSymmMultimem},
		{"vllm", SM100, "10.3", 8, 2 * mib, true, ARCustomOneShot},
		{"vllm", SM100, "10.3", 8, 3 * mib, true, ARCustomTwoShot},
		{"vllm", SM100, "10.0", 8, 128 * kib, true, ARCustomOneShot},
	}
	for _, c := range cases {
		m := ARMessage{Bytes: c.bytes, Tokens: c.bytes / (2 * hidden), Hidden: hidden, Fused: c.fused}
		if got := mustLookup(t, c.engine).AllReducePath(c.arch, c.cc, c.n, true, true, m); got != c.want {
			t.Errorf("%s %s %d GPUs %d B fused %v: %s, want %s", c.engine, c.cc, c.n, c.bytes, c.fused, got, c.want)
		}
	}
	// TensorRT-LLM states no such rule: its AUTO table picks for a fused
	// message as for any (SM100, TP 8, residual_rms_norm, 4,096 hidden:
	// as Pick says).
	trt := mustLookup(t, "trtllm")
	m := ARMessage{Bytes: tok(24), Tokens: 24, Hidden: hidden, Fused: true}
	ok, one := trt.AllReduce.Pick("10.0", 8, true, m)
	want := ARNCCL
	if ok && one {
		want = ARCustomOneShot
	} else if ok {
		want = ARCustomTwoShot
	}
	if got := trt.AllReducePath(SM100, "10.0", 8, true, true, m); got != want {
		t.Errorf("trtllm fused 24 tokens: %s, want the strategy table's %s", got, want)
	}
	if _, ok := trt.FusedOneShotMaxBytes("10.0", 8); ok {
		t.Error("trtllm states a fused one-shot rule; want none")
	}
}

// The fused kernel's one-shot rule is checked as the fusion's size caps
// are: a capability outside the fusion's families, a cap of 0 MiB, and
// the rule on a fusion that runs no all-reduce are one line each.
func TestFusedOneShotRuleChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	const rule = `oneshot_max_input_mib: {"9.0": {2: 128, 4: 8, 8: 2.625},`
	if !strings.Contains(base, rule) {
		t.Fatalf("the SGLang profile lacks %q", rule)
	}
	for _, c := range []struct{ new, want string }{
		{`oneshot_max_input_mib: {"12.0": {2: 128, 4: 8, 8: 2.625},`, `fusions[0].oneshot_max_input_mib: "12.0": want the compute capability of a device of the fusion's families`},
		{`oneshot_max_input_mib: {"9.0": {2: 128, 4: 8, 8: 0},`, "fusions[0].oneshot_max_input_mib: 9.0: TP 8 at 0 MiB: want a TP degree of 2 or more and a cap above 0 MiB"},
	} {
		if err := parseEdited(base, rule, c.new); !oneLineWith(err, c.want) {
			t.Errorf("%s: error %v, want one line naming %s", c.new, err, c.want)
		}
	}
	vllm := string(mustRead(t, "profiles/vllm-0.24.yaml"))
	const aq = "- {name: act_quant, archs: any, default: true, cite: [fusions-doc]}"
	if !strings.Contains(vllm, aq) {
		t.Fatalf("the vLLM profile lacks %q", aq)
	}
	err := parseEdited(vllm, aq, `- {name: act_quant, archs: any, default: true, oneshot_max_input_mib: {"9.0": {8: 1}}, cite: [fusions-doc]}`)
	if want := "fusions[1].oneshot_max_input_mib: stated on act_quant: only the allreduce_rmsnorm fusion runs an all-reduce kernel"; !oneLineWith(err, want) {
		t.Errorf("error %v, want one line naming %s", err, want)
	}
}

// TestFactsPerArch: DSA dense on SM120 for vLLM and SGLang (no sparse MLA
// kernels there), the executor runs what the schedule has; graph sizes;
// refusals; fusions.
func TestFactsPerArch(t *testing.T) {
	for _, c := range []struct {
		engine string
		arch   Arch
		dense  bool
	}{{"vllm", SM120, true}, {"vllm", SM90, false}, {"sglang", SM120, true}, {"sglang", SM100, false}, {"executor", SM120, false}, {"trtllm", SM120, false}} {
		if got := mustLookup(t, c.engine).DenseDSA(c.arch); got != c.dense {
			t.Errorf("%s on %s: dense DSA %v, want %v", c.engine, c.arch, got, c.dense)
		}
	}
	v := mustLookup(t, "vllm").CaptureSizes()
	if len(v) != 51 || v[0] != 1 || v[3] != 8 || v[33] != 248 || v[34] != 256 || v[50] != 512 {
		t.Errorf("vLLM capture sizes %v: want 1, 2, 4, 8..248 step 8, 256..512 step 16 (51 sizes)", v)
	}
	s := mustLookup(t, "sglang").CaptureSizes()
	if !slices.Contains(s, 12) || slices.Contains(s, 264) || s[len(s)-1] != 512 {
		t.Errorf("SGLang capture sizes %v: want 12 and 512 captured, 264 not", s)
	}
	if tr := mustLookup(t, "trtllm").CaptureSizes(); tr[len(tr)-1] != 128 {
		t.Errorf("TensorRT-LLM capture sizes end at %d, want 128", tr[len(tr)-1])
	}
	if err := mustLookup(t, "executor").Refuse("custom-ar", "oneshot", SM90); err == nil || !strings.HasPrefix(err.Error(), "--custom-ar oneshot: executor@1 ") {
		t.Errorf("executor one-shot: %v", err)
	}
	if err := mustLookup(t, "executor").Refuse("custom-ar", "off", SM90); err != nil {
		t.Errorf("executor custom-ar off refused: %v", err)
	}
	if err := mustLookup(t, "vllm").Refuse("custom-ar", "oneshot", SM120); err != nil {
		t.Errorf("vllm one-shot what-if refused: %v", err)
	}
	vl := mustLookup(t, "vllm")
	if !vl.Fused(FuseActQuant, SM120, 8) || vl.Fused(FuseAllReduceRMSNorm, SM120, 8) || vl.Fused(FuseNormQuant, SM90, 8) {
		t.Errorf("vLLM fusions: act_quant on, all-reduce + RMSNorm off on SM120, norm_quant off")
	}
	// vLLM's TRITON_MLA refused an FP8 cache until 2026 (PR #34597): on
	// SM120, where it is the only MLA backend, an FP8 cache needs a
	// build with it; on SM90 FLASHMLA reads FP8 and TRITON_MLA has no
	// such condition there.
	for _, c := range []struct {
		arch Arch
		want string // the backend's condition, "" none
	}{{SM120, "a vLLM build whose TRITON_MLA reads FP8 KV"}, {SM90, ""}} {
		b, err := vl.Backend(MLAUse{Arch: c.arch, KV: KVFP8, QKNope: 128}, "TRITON_MLA")
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if b.FP8KVNeeds.On(c.arch) {
			got = b.FP8KVNeeds.Needs
		}
		if got != c.want || c.want != "" && !strings.Contains(b.FP8KVNeeds.String(), "NotImplementedError for FP8 KV") {
			t.Errorf("vLLM TRITON_MLA FP8 KV on %s needs %q (%v), want %q", c.arch, got, b.FP8KVNeeds, c.want)
		}
	}
	lk := vl.LinearKernel(SM120, NVFP4)
	if lk == nil || len(lk.Companions) != 1 || lk.FusedBy != FuseActQuant {
		t.Errorf("vLLM NVFP4 linear on SM120: %+v", lk)
	}
	// bf16 linears are cuBLAS's, with no companion; its split-K
	// reduction is a kernel of its own where it was measured, on SM90
	// (splitk-0012-1208): a router gate (7168 x 384) at 1 token and at
	// 128, a 7168 x 7168 GEMM at 1 token but not at 32, a 2048 x 512
	// never, nor more than 128 tokens, nor on SM120.
	bf := vl.LinearKernel(SM120, BF16)
	if bf == nil || len(bf.Companions) != 0 || bf.SplitKReduce.Splits(SM120, 1, 7168, 384) {
		t.Errorf("vLLM bf16 linear on SM120: %+v", bf)
	}
	r := bf.SplitKReduce
	for _, c := range []struct {
		m, k, n int64
		want    bool
	}{{1, 7168, 384, true}, {128, 7168, 384, true}, {1, 7168, 7168, true}, {32, 7168, 7168, false}, {32, 7168, 4096, true}, {128, 7168, 2112, true}, {128, 7168, 3072, false}, {1, 2048, 512, false}, {1, 3072, 3072, true}, {1, 3072, 4096, false}, {256, 7168, 384, false}} {
		if got := r.Splits(SM90, c.m, c.k, c.n); got != c.want {
			t.Errorf("vLLM bf16 linear's split-K reduction at M %d, K %d, N %d on SM90: %v, want %v", c.m, c.k, c.n, got, c.want)
		}
	}
}

func TestArchOf(t *testing.T) {
	for cc, want := range map[string]Arch{"8.0": SM80, "8.6": SM80, "8.9": SM89, "9.0": SM90, "10.0": SM100, "10.3": SM100, "12.0": SM120, "12.1": SM120, "7.5": ArchUnknown, "": ArchUnknown, "x": ArchUnknown} {
		if got, _ := ArchOf(cc); got != want {
			t.Errorf("ArchOf(%q) = %s, want %s", cc, got, want)
		}
	}
}

// TestParseErrors: a broken profile is one error naming the file and the
// field.
func TestParseErrors(t *testing.T) {
	base, err := embedded.ReadFile("profiles/vllm-0.24.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, edit, with, field string
	}{
		{"unknown field", "title:", "titel:", "field titel not found"},
		{"second document", "dsa:\n", "---\nengine: x\n---\ndsa:\n", "more than one YAML document"},
		{"bad arch", "archs: [sm100]\n      order", "archs: [sm110]\n      order", "architecture \"sm110\""},
		{"uncited", "      cite: [flashmla, backends-doc, aic-mla, kv-block-force]", "      cite: []", "attention.backends[1].cite"},
		{"unknown source", "cite: [custom-ar, custom-ar-stages]", "cite: [custom-ar, nowhere]", "custom_allreduce.cite: \"nowhere\" is not a key of sources"},
		{"one-shot world size", "oneshot_always: [2]", "oneshot_always: [3]", "custom_allreduce.oneshot_always: 3"},
		{"one-shot threshold world size", "oneshot_below_bytes_by_world: {4: 524288}", "oneshot_below_bytes_by_world: {5: 524288}", "custom_allreduce.oneshot_below_bytes_by_world: 5"},
		{"unknown backend in order", "order: [FLASHINFER_MLA, CUTLASS_MLA", "order: [FLASHINFER, CUTLASS_MLA", "attention.select[0].order: \"FLASHINFER\""},
		{"bad grid", "kind: split_kv", "kind: splitkv", "attention.backends[0].grid.kind"},
		{"bad format", "format: int4-g32, kernel: marlin", "format: int3, kernel: marlin", "weight format \"int3\""},
		{"kernel without format", "format: int4-g32, kernel: marlin", "format: bf16, kernel: marlin", "kernel marlin does not take bf16"},
		{"bad graph range", "{from: 8, to: 248, step: 8}", "{from: 8, to: 248, step: 0}", "cuda_graphs.ranges[0]"},
		{"missing version", "version: \"0.24\"", "version: \"\"", "version: missing"},
		{"bad fusion", "name: norm_quant", "name: rope_quant", "fusions[2].name"},
		{"bad scheduler", "policy: vllm", "policy: fifo", "scheduler.policy: \"fifo\": want vllm or sglang"},
		{"uncited scheduler", "    cite: [batch-defaults]\n  cite: [scheduler, batch-defaults]", "    cite: [batch-defaults]\n  cite: []", "scheduler.cite: missing"},
		{"uncited batch defaults", "    cite: [batch-defaults]\n  cite: [scheduler", "    cite: []\n  cite: [scheduler", "scheduler.batch_defaults.cite: missing"},
		{"negative merge", "grid: {kind: sm_fill}", "grid: {kind: sm_fill, merge_us: -1}", "attention.backends[1].grid.merge_us: -1: want a time of 0 us or more"},
		{"merge without rows", "grid: {kind: sm_fill}", "grid: {kind: sm_fill, merge_us: 5}", "attention.backends[1].grid: merge_us needs rows_per_cta"},
		{"serial merge on an sm_fill grid", "grid: {kind: sm_fill}", "grid: {kind: sm_fill, serial_merge: true}", "attention.backends[1].grid.serial_merge: true: want it only on a split_kv grid"},
		{"padded tile of 0 rows", "padded: {tile_m: 128, tile_n: 128, formats: [nvfp4]", "padded: {tile_m: 0, tile_n: 128, formats: [nvfp4]", "moe.kernels[1].padded: want tile_m and tile_n of at least 1"},
		{"padded format not the kernel's", "      padded: {tile_m: 128, tile_n: 128, formats: [nvfp4], archs: [sm120], cite: [fp4-tiles-sm120]}\n    - name: flashinfer_trtllm", "      padded: {tile_m: 128, tile_n: 128, formats: [int4-g32], archs: [sm120], cite: [fp4-tiles-sm120]}\n    - name: flashinfer_trtllm", "moe.kernels[1].padded.formats: int4-g32: not a format of the kernel"},
		{"padded uncited", "archs: [sm120], cite: [fp4-tiles-sm120]}", "archs: [sm120], cite: []}", "moe.kernels[1].padded.cite: missing"},
		{"split-K reduction without its bounds", "min_k: 3072, by_tokens: [{max_m: 8, max_n_over_k: 1.0}, {max_m: 32, max_n_over_k: 0.75}, {max_m: 128, max_n_over_k: 0.295}], ", "min_k: 3072, ", "linear.kernels[1].split_k_reduce: want the kernel, min_k of at least 1, by_tokens"},
		{"split-K reduction tokens falling", "{max_m: 32, max_n_over_k: 0.75}", "{max_m: 4, max_n_over_k: 0.75}", "linear.kernels[1].split_k_reduce.by_tokens[1]: max_m 4"},
		{"split-K reduction uncited", "archs: [sm90], cite: [splitk-reduce]}", "archs: [sm90], cite: []}", "linear.kernels[1].split_k_reduce.cite: missing"},
		{"fp8 kv needs uncited", "        cite: [triton-mla, backends-doc]\n", "        cite: []\n", "attention.backends[0].fp8_kv_needs.cite: missing"},
		{"fp8 kv needs without needs", "        needs: \"a vLLM build whose TRITON_MLA reads FP8 KV\"\n", "", "attention.backends[0].fp8_kv_needs: want archs, why and needs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := strings.Replace(string(base), c.edit, c.with, 1)
			if data == string(base) {
				t.Fatalf("edit %q not found in the profile", c.edit)
			}
			_, err := Parse([]byte(data), "edited.yaml")
			var pe *ParseError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.field) || !strings.HasPrefix(err.Error(), "engine profile edited.yaml: ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line naming edited.yaml and %q", err, c.field)
			}
		})
	}
}

// TestLoadFSRules: two profiles of one engine@version, or an engine
// without a default version, are refused.
func TestLoadFSRules(t *testing.T) {
	base, _ := embedded.ReadFile("profiles/executor.yaml")
	dup := fstest.MapFS{"p/a.yaml": {Data: base}, "p/b.yaml": {Data: base}, "p/v.yaml": {Data: mustRead(t, "profiles/vllm-0.24.yaml")}}
	if _, err := loadFS(dup, "p"); err == nil || !strings.Contains(err.Error(), "also defined by") {
		t.Errorf("duplicate: %v", err)
	}
	nodef := fstest.MapFS{"p/a.yaml": {Data: []byte(strings.Replace(string(base), "default: true", "default: false", 1))}, "p/v.yaml": {Data: mustRead(t, "profiles/vllm-0.24.yaml")}}
	if _, err := loadFS(nodef, "p"); err == nil || !strings.Contains(err.Error(), "no profile of executor is its default") {
		t.Errorf("no default: %v", err)
	}
	novllm := fstest.MapFS{"p/a.yaml": {Data: base}}
	if _, err := loadFS(novllm, "p"); err == nil || !strings.Contains(err.Error(), "default engine vllm") {
		t.Errorf("no vllm: %v", err)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := embedded.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParse: any input either parses into a profile that validates and
// answers every query without panicking, or is a ParseError naming the
// file.
func FuzzParse(f *testing.F) {
	ents, _ := embedded.ReadDir("profiles")
	for _, e := range ents {
		b, _ := embedded.ReadFile("profiles/" + e.Name())
		f.Add(b)
	}
	f.Add([]byte("engine: x\nversion: 1\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "fuzz.yaml")
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.File != "fuzz.yaml" {
				t.Fatalf("error %v is not a ParseError naming the file", err)
			}
			return
		}
		for _, a := range anyArch() {
			for _, kv := range []KVDtype{KV16, KVFP8} {
				_, _ = p.Backend(MLAUse{Arch: a, KV: kv, QKNope: 128}, "")
				_, _ = p.Backend(MLAUse{Arch: a, KV: kv, QKNope: 192, DCP: true}, "triton")
				_, _ = p.Backend(MLAUse{Arch: a, KV: kv, QKNope: 192, Sparse: true}, "")
			}
			for f := BF16; f <= INT4; f++ {
				_, _ = p.MoEKernel(a, f, false, "")
				_ = p.LinearKernel(a, f)
			}
			_ = p.Refuse("custom-ar", "oneshot", a)
			_ = p.DenseDSA(a)
		}
		_, _ = p.AllReduce.Runs(8, false, 1<<14)
		if s := p.CaptureSizes(); len(s) == 0 || !slices.IsSorted(s) {
			t.Fatalf("capture sizes %v", s)
		}
	})
}

// TestPiecewiseNeedsEagerRoles: a profile with a backend that captures
// piecewise only must say which of the schedule's ops its pieces leave
// eager; the error names the field and the backend.
func TestPiecewiseNeedsEagerRoles(t *testing.T) {
	base := string(mustRead(t, "profiles/vllm-0.16-nightly.yaml"))
	i := strings.Index(base, "  piecewise_eager: [")
	if i < 0 || !strings.Contains(base, "cuda_graph: piecewise") {
		t.Fatal("the nightly profile has no piecewise backend with its eager roles")
	}
	j := strings.Index(base[i:], "\n")
	if _, err := Parse([]byte(base), "nightly.yaml"); err != nil {
		t.Fatalf("the profile as it is: %v", err)
	}
	_, err := Parse([]byte(base[:i]+base[i+j+1:]), "edited.yaml")
	if err == nil || !strings.Contains(err.Error(), "cuda_graphs.piecewise_eager: missing: attention.backends[0] (TRITON_MLA) captures piecewise") {
		t.Errorf("error %v", err)
	}
}

// TestMixedPiecewiseNeedsPrefillRoles: a profile whose mode captures a
// step with prefill tokens piecewise (vLLM's FULL_AND_PIECEWISE) must say
// which ops its attention op launches eagerly in prefill, cannot also run
// such a step eagerly, and a mode that captures no such step piecewise
// takes no prefill list; each is one error naming the field.
func TestMixedPiecewiseNeedsPrefillRoles(t *testing.T) {
	vllm := string(mustRead(t, "profiles/vllm-0.24.yaml"))
	i := strings.Index(vllm, "  piecewise_eager_prefill: [")
	if i < 0 || !strings.Contains(vllm, "  mode: FULL_AND_PIECEWISE\n") {
		t.Fatal("the vLLM 0.24 profile has no FULL_AND_PIECEWISE mode with its prefill eager roles")
	}
	j := strings.Index(vllm[i:], "\n")
	line := vllm[i : i+j+1]
	sglang := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	k := strings.Index(sglang, "\ncuda_graphs:\n")
	if k < 0 {
		t.Fatal("the SGLang profile has no cuda_graphs")
	}
	k += len("\ncuda_graphs:\n")
	for _, c := range []struct {
		name, text, want string
	}{
		{"vllm as it is", vllm, ""},
		{"no prefill list", vllm[:i] + vllm[i+j+1:], "cuda_graphs.piecewise_eager_prefill: missing: mode FULL_AND_PIECEWISE"},
		{"prefill eager", vllm[:i] + line + "  prefill_eager: true\n" + vllm[i+j+1:], "cuda_graphs.prefill_eager: set under mode FULL_AND_PIECEWISE"},
		{"sglang as it is", sglang, ""},
		{"sglang with a prefill list", sglang[:k] + line + sglang[k:], "cuda_graphs.piecewise_eager_prefill: set under mode"},
	} {
		_, err := Parse([]byte(c.text), c.name+".yaml")
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line with %q", c.name, err, c.want)
		}
	}
}

// TestEagerHostUsBounds: a profile's eager host time per kernel must be 0
// (the device's) up to 1 ms; anything else is one error naming the field.
func TestEagerHostUsBounds(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	if !strings.Contains(base, "  eager_host_us: 47\n") {
		t.Fatal("the SGLang profile states no eager host time")
	}
	for _, v := range []string{"0", "1000"} {
		if err := parseEdited(base, "eager_host_us: 47", "eager_host_us: "+v); err != nil {
			t.Errorf("eager_host_us %s: %v", v, err)
		}
	}
	for _, v := range []string{"-1", "1001", ".nan"} {
		err := parseEdited(base, "eager_host_us: 47", "eager_host_us: "+v)
		if err == nil || !strings.Contains(err.Error(), "cuda_graphs.eager_host_us") {
			t.Errorf("eager_host_us %s: error %v, want one naming cuda_graphs.eager_host_us", v, err)
		}
	}
}

// TestEagerPrefillLayerHostBounds: a profile's eager prefill host time
// per layer must be 0 (eager_host_us a kernel) up to 20 ms, and only where
// the engine runs its prefill steps eagerly; anything else is one error
// naming the field.
func TestEagerPrefillLayerHostBounds(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	const line = "eager_prefill_layer_host_us: 3065"
	if !strings.Contains(base, "  "+line+"\n") {
		t.Fatal("the SGLang profile states no eager prefill host time")
	}
	for _, v := range []string{"0", "20000"} {
		if err := parseEdited(base, line, "eager_prefill_layer_host_us: "+v); err != nil {
			t.Errorf("eager_prefill_layer_host_us %s: %v", v, err)
		}
	}
	for _, v := range []string{"-1", "20001", ".nan"} {
		err := parseEdited(base, line, "eager_prefill_layer_host_us: "+v)
		if err == nil || !strings.Contains(err.Error(), "cuda_graphs.eager_prefill_layer_host_us") {
			t.Errorf("eager_prefill_layer_host_us %s: error %v, want one naming cuda_graphs.eager_prefill_layer_host_us", v, err)
		}
	}
	err := parseEdited(base, "  prefill_eager: true\n", "")
	if err == nil || !strings.Contains(err.Error(), "cuda_graphs.eager_prefill_layer_host_us") || !strings.Contains(err.Error(), "prefill_eager is false") {
		t.Errorf("eager_prefill_layer_host_us without prefill_eager: error %v, want one naming the field and prefill_eager", err)
	}
}

// TestSymmMemRulesChecked: a symmetric-memory rule whose custom cap,
// multimem world size or size names a world size it has no maximum for,
// that names a compute capability outside its families, or that has no
// citation, is one error naming the field.
func TestSymmMemRulesChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/vllm-0.24.yaml"))
	for _, c := range []struct{ old, new, field string }{
		{"multimem_world_sizes: [6, 8]", "multimem_world_sizes: [6, 8, 16]", "symm_mem_allreduce.rules[1].multimem_world_sizes"},
		{"custom_max_bytes: {2: 2097152,", "custom_max_bytes: {3: 1, 2: 2097152,", "symm_mem_allreduce.rules[1].custom_max_bytes"},
		{"max_bytes: {2: 67108864, 4: 33554432, 6: 67108864", "max_bytes: {2: 0, 4: 33554432, 6: 67108864", "symm_mem_allreduce.rules[0].max_bytes"},
		{"  cite: [symm-mem, symm-mem-sm103]\n", "  cite: []\n", "symm_mem_allreduce.cite"},
		// A capability outside the rule's family, or not major.minor.
		{`capabilities: ["10.3"]`, `capabilities: ["9.0"]`, "symm_mem_allreduce.rules[2].capabilities"},
		{`capabilities: ["10.3"]`, `capabilities: ["10"]`, "symm_mem_allreduce.rules[2].capabilities"},
	} {
		if !strings.Contains(base, c.old) {
			t.Fatalf("the vLLM profile lacks %q", c.old)
		}
		err := parseEdited(base, c.old, c.new)
		if !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.new, err, c.field)
		}
	}
}

// TestMoERunsChecked: a backend's hand-over of a weight format to another
// kernel names a kernel of the profile that takes the format on those
// families, a format the backend does not run itself, and its source;
// anything else is one error naming the field.
func TestMoERunsChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	const rule = "{archs: [sm100, sm120], format: nvfp4, kernel: cutlass, cite: [fp4-moe-apply, triton-nvfp4-row]}"
	for _, c := range []struct{ new, field string }{
		{"{archs: [sm100, sm120], format: nvfp4, kernel: cutlas, cite: [fp4-moe-apply]}", `moe.kernels[3].runs[0].kernel: "cutlas" is not a kernel of this profile`},
		{"{archs: [sm90], format: nvfp4, kernel: cutlass, cite: [fp4-moe-apply]}", "moe.kernels[3].runs[0]: kernel cutlass does not run on sm90"},
		{"{archs: [sm120], format: int4-g32, kernel: cutlass, cite: [fp4-moe-apply]}", "moe.kernels[3].runs[0]: kernel cutlass does not take int4-g32"},
		{"{archs: [sm120], format: nvfp4, kernel: triton, cite: [fp4-moe-apply]}", "moe.kernels[3].runs[0]: kernel triton does not take nvfp4"},
		{"{archs: [sm120], format: nvfp4, kernel: cutlass, cite: []}", "moe.kernels[3].runs[0].cite: missing"},
	} {
		if !strings.Contains(base, rule) {
			t.Fatalf("the SGLang profile lacks %q", rule)
		}
		err := parseEdited(base, rule, c.new)
		if !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.new, err, c.field)
		}
	}
	// A format the backend runs itself cannot also be handed over.
	data := strings.Replace(base, "formats: [fp8-block128, fp8, bf16]\n      archs: any\n      grid: tiles\n      tile_m: 64", "formats: [nvfp4, fp8-block128, fp8, bf16]\n      archs: any\n      grid: tiles\n      tile_m: 64", 1)
	if data == base {
		t.Fatal("the SGLang profile's triton formats moved")
	}
	if _, err := Parse([]byte(data), "edited.yaml"); err == nil || !strings.Contains(err.Error(), "moe.kernels[3].runs[0]: nvfp4 to cutlass: want a format triton does not run itself") {
		t.Errorf("a format run and handed over: error %v", err)
	}
}

// TestMoEKernelNoDefaultSaysWhichRun: where a profile has no cited rule
// picking a kernel for a format on a family, yet lists one that runs it
// there, the refusal names the --moe-kernel that runs them, which then
// prices (an SGLang profile edited to let flashinfer_cutlass take NVFP4
// experts on sm90, which the real one does not: TestNVFP4MoENeedsFP4Cores).
// Where no listed kernel takes the weights on the family the refusal
// stays as it was.
func TestMoEKernelNoDefaultSaysWhichRun(t *testing.T) {
	data := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	const narrow = "        - {format: nvfp4, archs: [sm100, sm120], cite: [modelopt-fp4-cc, dynamo-g4]}\n"
	if !strings.Contains(data, narrow) {
		t.Fatal("the SGLang profile's flashinfer_cutlass NVFP4 families moved")
	}
	p, err := Parse([]byte(strings.Replace(data, "      format_archs:\n"+narrow, "", 1)), "edited.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.MoEKernel(SM90, NVFP4, false, "")
	want := "sglang@0.5 has no default MoE kernel for nvfp4 experts on sm90: pass --moe-kernel flashinfer_cutlass"
	if err == nil || err.Error() != want {
		t.Errorf("default on sm90: %v; want %q", err, want)
	}
	if k, err := p.MoEKernel(SM90, NVFP4, false, "flashinfer_cutlass"); err != nil || k.Name != "flashinfer_cutlass" {
		t.Errorf("--moe-kernel flashinfer_cutlass on sm90: %v, %v; want it to run", k, err)
	}
	// On sm80 none of its NVFP4 kernels runs (sm90 and up).
	_, err = p.MoEKernel(SM80, NVFP4, false, "")
	if want := "sglang@0.5 has no MoE kernel for nvfp4 experts on sm80"; err == nil || err.Error() != want {
		t.Errorf("default on sm80: %v; want %q", err, want)
	}
}

// TestFormatArchsChecked: a kernel's format_archs names one of its
// formats once, families among its own and its sources, and a selection
// rule may not pick the kernel for that format on a family it narrows
// away; each mistake is one line naming the field.
func TestFormatArchsChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/trtllm-1.3.yaml"))
	const fa = "        - {format: nvfp4, archs: [sm100], cite: [precision]}"
	if !strings.Contains(base, fa) {
		t.Fatalf("the TensorRT-LLM profile lacks %q", fa)
	}
	for _, c := range []struct{ new, want string }{
		{"        - {format: int4-g32, archs: [sm100], cite: [precision]}", `moe.kernels[0].format_archs[0].format: "int4-g32": want one of the kernel's formats, once`},
		{"        - {format: nvfp4, archs: [sm120], cite: [precision]}", "moe.kernels[0].format_archs[0].archs: sm120: want families among the kernel's archs"},
		{"        - {format: nvfp4, archs: [sm100], cite: [nowhere]}", `moe.kernels[0].format_archs[0].cite: "nowhere" is not a key of sources`},
		{"        - {format: bf16, archs: [sm100], cite: [precision]}", "moe.select[3]: kernel cutlass does not run on sm90"},
	} {
		err := parseEdited(base, fa, c.new)
		if !oneLineWith(err, c.want) {
			t.Errorf("%s: error %v; want one line with %q", c.new, err, c.want)
		}
	}
}

// TestExecutorSpecFlagKeepsTheTree: the executor drafts trees (tree: true
// for mtp, eagle3 and draft), so its run line for a 2x2 tree carries
// --spec-topk 2 --spec-steps 2; a chain's carries neither.
func TestExecutorSpecFlagKeepsTheTree(t *testing.T) {
	f, ok := mustLookup(t, "executor").SpecMethod("mtp")
	if !ok {
		t.Fatal("executor has no mtp")
	}
	if got, want := f.FlagFor(4, 2, 2, ""), "tpscope run --backend cuda --spec mtp --spec-tokens 4 --spec-topk 2 --spec-steps 2"; got != want {
		t.Errorf("tree flag %q, want %q", got, want)
	}
	if got, want := f.FlagFor(4, 4, 1, ""), "tpscope run --backend cuda --spec mtp --spec-tokens 4"; got != want {
		t.Errorf("chain flag %q, want %q", got, want)
	}
}

// TestSerialWalkChecked: a serial walk names one of its kernel's
// companions, a measured cycle count above 0 and its sources; each
// mistake is one line naming the field.
func TestSerialWalkChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	const walk = "serial_walk: {companion: compute_expert_blockscale_offsets, cycles_per_expert: 100, cite: [cutlass-moe-fp4, serial-walk-h100]}"
	if !strings.Contains(base, walk) {
		t.Fatalf("the SGLang profile lacks %q", walk)
	}
	p, err := Parse([]byte(base), "sglang.yaml")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range p.MoE.Kernels {
		if w := k.SerialWalk; w != nil {
			found = k.Name == "cutlass" && w.Companion == "compute_expert_blockscale_offsets" && w.CyclesPerExpert == 100
		}
	}
	if !found {
		t.Error("the cutlass kernel's serial walk was not read")
	}
	for _, c := range []struct{ new, field string }{
		{"serial_walk: {companion: compute_expert_offsets, cycles_per_expert: 100, cite: [serial-walk-h100]}", `moe.kernels[2].serial_walk.companion: "compute_expert_offsets": want one of the kernel's companions`},
		{"serial_walk: {companion: compute_expert_blockscale_offsets, cycles_per_expert: 0, cite: [serial-walk-h100]}", "moe.kernels[2].serial_walk.cycles_per_expert: 0: want a measured count of cycles above 0"},
		{"serial_walk: {companion: compute_expert_blockscale_offsets, cycles_per_expert: 100, cite: []}", "moe.kernels[2].serial_walk.cite: missing"},
	} {
		err := parseEdited(base, walk, c.new)
		if !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.new, err, c.field)
		}
	}
}

// TestSMStreamChecked: a kernel's SM streaming rate and its call's fixed
// cycles are read, and each mistake (a rate not above 0, no format, a
// format the kernel does not take, cycles below 0 or above 1M, no source)
// is one line naming the field.
func TestSMStreamChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/vllm-0.24.yaml"))
	const line = "sm_stream: {bytes_per_clk: 11.3, formats: [int4-g32], call_cycles: 32400, cite: [marlin-sm-stream, marlin-call-latency]}"
	if !strings.Contains(base, line) {
		t.Fatalf("the vLLM 0.24 profile lacks %q", line)
	}
	p, err := Parse([]byte(base), "vllm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got *SMStream
	for i := range p.MoE.Kernels {
		if k := &p.MoE.Kernels[i]; k.Name == "marlin" {
			got = k.SMStream
		}
	}
	// 132 SMs x 11.3 B x 1,830 MHz = 2,729.6 GB/s for INT4; none for NVFP4.
	if g := got.GBps(INT4, 132, 1830); math.Abs(g-2729.628) > 1e-6 {
		t.Errorf("marlin's INT4 stream on 132 SMs at 1,830 MHz: %v GB/s, want 2729.628", g)
	}
	if g := got.GBps(NVFP4, 132, 1830); g != 0 {
		t.Errorf("marlin's NVFP4 stream: %v GB/s, want none (not measured)", g)
	}
	if got.CallCycles != 32400 {
		t.Errorf("marlin's call: %v cycles, want 32400", got.CallCycles)
	}
	for _, c := range []struct{ new, field string }{
		{"sm_stream: {bytes_per_clk: 0, formats: [int4-g32], cite: [marlin-sm-stream]}", "moe.kernels[0].sm_stream.bytes_per_clk: 0: want a measured rate above 0"},
		{"sm_stream: {bytes_per_clk: 11.3, cite: [marlin-sm-stream]}", "moe.kernels[0].sm_stream.formats: want the formats"},
		{"sm_stream: {bytes_per_clk: 11.3, formats: [bf16], cite: [marlin-sm-stream]}", "moe.kernels[0].sm_stream.formats: bf16: not a format of the kernel"},
		{"sm_stream: {bytes_per_clk: 11.3, formats: [int4-g32], cite: []}", "moe.kernels[0].sm_stream.cite: missing"},
		{"sm_stream: {bytes_per_clk: 11.3, formats: [int4-g32], call_cycles: -1, cite: [marlin-sm-stream]}", "moe.kernels[0].sm_stream.call_cycles: -1: want 0 (none) to 1e+06 measured cycles"},
		{"sm_stream: {bytes_per_clk: 11.3, formats: [int4-g32], call_cycles: 2e6, cite: [marlin-sm-stream]}", "moe.kernels[0].sm_stream.call_cycles: 2e+06: want 0 (none) to 1e+06 measured cycles"},
	} {
		err := parseEdited(base, line, c.new)
		if !oneLineWith(err, c.field) {
			t.Errorf("%s: error %v, want one line naming %s", c.new, err, c.field)
		}
	}
}

// A fusion's token cap is read and checked: SGLang's all-reduce + RMSNorm
// fusion stops at 2,048 tokens; a negative cap is one line naming it.
func TestFusionMaxTokensChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	const line = "max_tokens: 2048,"
	if !strings.Contains(base, line) {
		t.Fatalf("the SGLang profile lacks %q", line)
	}
	p, err := Parse([]byte(base), "sglang.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.FusionMaxTokens(FuseAllReduceRMSNorm); got != 2048 {
		t.Errorf("cap %d tokens, want 2048", got)
	}
	if got := p.FusionMaxTokens(FuseActQuant); got != 0 {
		t.Errorf("a fusion the profile does not list: cap %d, want 0", got)
	}
	err = parseEdited(base, line, "max_tokens: -1,")
	if want := "fusions[0].max_tokens: -1: want 0 (no limit) or more"; !oneLineWith(err, want) {
		t.Errorf("error %v, want one line naming %s", err, want)
	}
}

// TestNVFP4MoENeedsFP4Cores: no engine runs NVFP4 (W4A4) experts through
// a CUTLASS grouped GEMM on SM90, which has no FP4 tensor cores: vLLM's
// FlashInferExperts takes an NVFP4 scheme on the SM100 family only (it
// runs BF16 and FP8 ones on SM90), SGLang refuses modelopt_fp4 below
// compute capability 10.0, TensorRT-LLM lists no FP4 precision for
// Hopper. Naming the kernel there is refused; vLLM falls back to Marlin's
// weight-only FP4 by default, SGLang and TensorRT-LLM have no kernel.
func TestNVFP4MoENeedsFP4Cores(t *testing.T) {
	for _, c := range []struct{ engine, kernel, want string }{
		{"vllm@0.24", "flashinfer_cutlass", "vllm@0.24's MoE kernel flashinfer_cutlass runs nvfp4 experts on sm100, sm120 only"},
		{"vllm@0.16-nightly", "flashinfer_cutlass", "vllm@0.16-nightly's MoE kernel flashinfer_cutlass runs nvfp4 experts on sm100, sm120 only"},
		{"sglang@0.5", "flashinfer_cutlass", "sglang@0.5's MoE kernel flashinfer_cutlass runs nvfp4 experts on sm100, sm120 only"},
		{"trtllm@1.3", "cutlass", "trtllm@1.3's MoE kernel cutlass runs nvfp4 experts on sm100 only"},
	} {
		p := mustLookup(t, c.engine)
		if k, err := p.MoEKernel(SM90, NVFP4, false, c.kernel); err == nil || err.Error() != c.want {
			t.Errorf("%s --moe-kernel %s for nvfp4 on sm90: %v, %v; want %q", c.engine, c.kernel, k, err, c.want)
		}
		// The same kernel keeps its other formats on SM90 and NVFP4 on SM100.
		other := BF16
		if k, err := p.MoEKernel(SM90, other, false, c.kernel); err != nil || k.Name != c.kernel {
			t.Errorf("%s --moe-kernel %s for bf16 on sm90: %v, %v; want it to run", c.engine, c.kernel, k, err)
		}
		if k, err := p.MoEKernel(SM100, NVFP4, false, c.kernel); err != nil || k.Name != c.kernel {
			t.Errorf("%s --moe-kernel %s for nvfp4 on sm100: %v, %v; want it to run", c.engine, c.kernel, k, err)
		}
	}
	if k, err := mustLookup(t, "vllm@0.24").MoEKernel(SM90, NVFP4, false, ""); err != nil || k.Name != "marlin" {
		t.Errorf("vllm@0.24's default for nvfp4 on sm90: %v, %v; want marlin", k, err)
	}
	for _, e := range []string{"sglang@0.5", "trtllm@1.3"} {
		want := e + " has no MoE kernel for nvfp4 experts on sm90"
		if k, err := mustLookup(t, e).MoEKernel(SM90, NVFP4, false, ""); err == nil || err.Error() != want {
			t.Errorf("%s's default for nvfp4 on sm90: %v, %v; want %q", e, k, err, want)
		}
	}
}

// TestSGLangModelSpecificBackend: SGLang sets trtllm_mla for DeepSeek-V3
// and Kimi-K2.x on SM100 before its general rule
// (server_args.py _handle_model_specific_adjustments: DeepseekV3ForCausalLM
// and KimiK25ForConditionalGeneration, no backend named, sm100), which
// would give flashinfer; other MLA models, other families and a named
// backend are as before. A rule with an empty model_type is refused.
func TestSGLangModelSpecificBackend(t *testing.T) {
	p := mustLookup(t, "sglang")
	for _, c := range []struct {
		model    string
		arch     Arch
		override string
		want     string
	}{
		{"deepseek_v3", SM100, "", "trtllm_mla"},
		{"kimi_k2", SM100, "", "trtllm_mla"},
		{"kimi_k25", SM100, "", "trtllm_mla"},
		{"glm_moe_dsa", SM100, "", "flashinfer"},
		{"", SM100, "", "flashinfer"},
		{"deepseek_v3", SM90, "", "fa3"},
		{"deepseek_v3", SM100, "flashinfer", "flashinfer"},
	} {
		b, err := p.Backend(MLAUse{Arch: c.arch, KV: KV16, QKNope: 128, ModelType: c.model}, c.override)
		if err != nil || b.Name != c.want {
			t.Errorf("%s on %s (%q): %v %v, want %s", c.model, c.arch, c.override, b, err, c.want)
		}
	}
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	const rule = "model_types: [deepseek_v3, kimi_k2, kimi_k25]"
	if !strings.Contains(base, rule) {
		t.Fatalf("the profile no longer states %q", rule)
	}
	err := parseEdited(base, rule, "model_types: [deepseek_v3, '']")
	if !oneLineWith(err, "model_types") {
		t.Errorf("an empty model_type: %v, want one line naming model_types", err)
	}
}

// TestPageTokensChecked: a backend's forced KV page is a count of tokens;
// SGLang's profile states 64 for flashmla, trtllm_mla and nsa, and a
// negative page is one line naming the field.
func TestPageTokensChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	p, err := Parse([]byte(base), "sglang.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"flashmla": 64, "trtllm_mla": 64, "nsa": 64, "triton": 0, "flashinfer": 0, "fa3": 0}
	for _, b := range p.Attention.Backends {
		if w, ok := want[b.Name]; ok && b.PageTokens != w {
			t.Errorf("%s: page_tokens %d, want %d", b.Name, b.PageTokens, w)
		}
	}
	if p.Scheduler.BlockTokens != 1 || p.Scheduler.ChunkedPrefill == nil || !*p.Scheduler.ChunkedPrefill {
		t.Errorf("SGLang scheduler: block_tokens %d, chunked_prefill %v; want 1 and true", p.Scheduler.BlockTokens, p.Scheduler.ChunkedPrefill)
	}
	err = parseEdited(base, "page_tokens: 64", "page_tokens: -64")
	if !oneLineWith(err, "page_tokens") {
		t.Errorf("a negative page: %v, want one line naming page_tokens", err)
	}
}

// TestSpecMaxRunningChecked: SGLang's methods state the 48 running
// requests it resets to; a negative limit is one line naming the field.
func TestSpecMaxRunningChecked(t *testing.T) {
	p := mustLookup(t, "sglang@0.5")
	for _, m := range []string{"mtp", "eagle3", "draft", "ngram"} {
		if f, ok := p.SpecMethod(m); !ok || f.MaxRunning != 48 {
			t.Errorf("sglang %s: max_running %d (listed %v), want 48", m, f.MaxRunning, ok)
		}
	}
	if f, ok := mustLookup(t, "vllm@0.24").SpecMethod("mtp"); !ok || f.MaxRunning != 0 {
		t.Errorf("vllm mtp: max_running %d, want 0 (no limit of its own)", f.MaxRunning)
	}
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	if err := parseEdited(base, "max_running: 48", "max_running: -1"); !oneLineWith(err, "max_running") {
		t.Errorf("a negative limit: %v, want one line naming max_running", err)
	}
}

// TestDispatchFacts: each engine states how it moves the tokens to the
// experts under DP attention + EP when its setting is left alone, in its
// own setting's name: vLLM 0.24's all2all_backend defaults to
// allgather_reducescatter (ParallelConfig), SGLang 0.5 without
// --moe-a2a-backend gathers with DP attention's all-gather and
// reduce-scatter, TensorRT-LLM 1.3's communication factory takes its
// NVLink one-sided all-to-all where NVLink joins the GPUs and falls back
// to all-gather + reduce-scatter elsewhere; the executor runs the
// schedule's all-to-all.
func TestDispatchFacts(t *testing.T) {
	for _, c := range []struct {
		ref            string
		option         string
		plain, nvlink  Dispatch
		first, a2aName string
	}{
		{"vllm@0.24", "--all2all-backend", DispatchAllGather, DispatchAllGather, "allgather_reducescatter", "deepep_low_latency"},
		{"vllm@0.16-nightly", "--all2all-backend", DispatchAllGather, DispatchAllGather, "allgather_reducescatter", "deepep_low_latency"},
		{"sglang@0.5", "--moe-a2a-backend", DispatchAllGather, DispatchAllGather, "none", "deepep"},
		{"trtllm@1.3", "TRTLLM_FORCE_COMM_METHOD", DispatchAllGather, DispatchAllToAll, "ALLGATHER", "NVLINK_ONE_SIDED"},
		{"executor@1", "--moe-dispatch", DispatchAllToAll, DispatchAllToAll, "allgather_reducescatter", "alltoall"},
	} {
		r, err := ParseRef(c.ref)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Lookup(r)
		if err != nil {
			t.Fatal(err)
		}
		d := &p.Dispatch
		if d.Option != c.option || d.DefaultOn(false) != c.plain || d.DefaultOn(true) != c.nvlink {
			t.Errorf("%s: %s, default %s (NVLink: %s), want %s, %s (%s)", c.ref, d.Option, d.DefaultOn(false), d.DefaultOn(true), c.option, c.plain, c.nvlink)
		}
		if n := d.Names(DispatchAllGather); len(n) == 0 || n[0] != c.first {
			t.Errorf("%s: all-gather by %v, want %s first", c.ref, n, c.first)
		}
		if !slices.Contains(d.Names(DispatchAllToAll), c.a2aName) {
			t.Errorf("%s: all-to-all by %v, want %s among them", c.ref, d.Names(DispatchAllToAll), c.a2aName)
		}
		for _, k := range []Dispatch{DispatchAllToAll, DispatchAllGather} {
			if err := p.CheckDispatch(k); err != nil {
				t.Errorf("%s: %v", c.ref, err)
			}
		}
	}
}

// A profile's MoE dispatch facts are checked when it is read: a bad or
// missing kind, a default of a kind the engine lists no implementation
// of, a name twice and a missing setting or source are one-line errors
// naming the field.
func TestDispatchFactsChecked(t *testing.T) {
	base, err := embedded.ReadFile("profiles/trtllm-1.3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, edit, with, want string }{
		{"bad kind", "  default: allgather_reducescatter\n", "  default: all2all\n", "MoE dispatch \"all2all\": want alltoall or allgather_reducescatter"},
		{"no default", "  default: allgather_reducescatter\n", "", "moe_dispatch.default: missing: want alltoall or allgather_reducescatter"},
		{"default not offered", "  allgather_reducescatter: [ALLGATHER]\n", "", "moe_dispatch.default: allgather_reducescatter: the engine lists no implementation of it"},
		{"nvlink default not offered", "  alltoall: [NVLINK_ONE_SIDED, NVLINK_TWO_SIDED, DEEPEP, DEEPEPLOWLATENCY]\n", "", "moe_dispatch.nvlink_default: alltoall: the engine lists no implementation of it"},
		{"name twice", "[NVLINK_ONE_SIDED, NVLINK_TWO_SIDED,", "[NVLINK_ONE_SIDED, ALLGATHER,", "moe_dispatch.allgather_reducescatter[0]: \"ALLGATHER\": want a unique name"},
		{"nvlink-only default", "  nvlink_only: alltoall\n", "  nvlink_only: allgather_reducescatter\n", "moe_dispatch.nvlink_only: allgather_reducescatter: the default, which runs where NVLink does not join the GPUs"},
		{"no option", "  option: TRTLLM_FORCE_COMM_METHOD\n", "", "moe_dispatch.option: missing"},
		{"uncited", "  cite: [comm-factory, mnnvl]\n", "  cite: []\n", "moe_dispatch.cite: missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := strings.Replace(string(base), c.edit, c.with, 1)
			if data == string(base) {
				t.Fatalf("edit %q not found in the profile", c.edit)
			}
			_, err := Parse([]byte(data), "edited.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "engine profile edited.yaml: ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line naming %q", err, c.want)
			}
		})
	}
}

// vLLM 0.24's all-gather dispatch moves the tokens in the input format
// of the MoE kernel that runs the experts (naive_dp_ep.py quantizes
// before the gather unless the kernel defers): Triton and trtllm-gen
// FP8 block-128 experts take FP8 with 1 x 128 scales, per-tensor FP8
// experts FP8, trtllm-gen and FlashInfer CUTLASS NVFP4 experts NVFP4;
// Marlin (weight-only) and bf16 experts bf16. SGLang states none: bf16.
func TestAllGatherPayload(t *testing.T) {
	vllm, sgl := mustLookup(t, "vllm@0.24"), mustLookup(t, "sglang@0.5")
	for _, c := range []struct {
		p      *Profile
		kernel string
		f      WeightFormat
		want   WeightFormat
	}{
		{vllm, "triton", FP8Block, FP8Block},
		{vllm, "flashinfer_trtllm", FP8Block, FP8Block},
		{vllm, "triton", FP8, FP8},
		{vllm, "flashinfer_cutlass", FP8, FP8},
		{vllm, "flashinfer_trtllm", NVFP4, NVFP4},
		{vllm, "flashinfer_cutlass", NVFP4, NVFP4},
		{vllm, "marlin", NVFP4, BF16},
		{vllm, "marlin", INT4, BF16},
		{vllm, "triton", BF16, BF16},
	} {
		k := c.p.moeKernelNamed(c.kernel)
		if k == nil {
			t.Fatalf("%s has no MoE kernel %s", c.p.Name(), c.kernel)
		}
		if got := c.p.Dispatch.GatheredAs(k, c.f); got != c.want {
			t.Errorf("%s %s %s experts: gathered as %s, want %s", c.p.Name(), c.kernel, c.f, got, c.want)
		}
	}
	for _, k := range sgl.MoE.Kernels {
		for _, f := range k.Formats {
			if got := sgl.Dispatch.GatheredAs(&k, f); got != BF16 {
				t.Errorf("sglang %s %s experts: gathered as %s, want bf16 (no fact stated)", k.Name, f, got)
			}
		}
	}
	base := string(mustRead(t, "profiles/vllm-0.24.yaml"))
	fact := "    - {kernels: [triton, flashinfer_trtllm], format: fp8-block128, payload: fp8-block128, cite: [agrs-quant, agrs-quant-kernels]}\n"
	for _, c := range []struct{ name, with, want string }{
		{"kernel not running the format", strings.Replace(fact, "triton, flashinfer_trtllm", "marlin", 1), `moe_dispatch.allgather_payload[0].kernels[0]: "marlin": want a kernel of moe.kernels that runs fp8-block128 experts`},
		{"unknown kernel", strings.Replace(fact, "flashinfer_trtllm", "deep_gemm", 1), `moe_dispatch.allgather_payload[0].kernels[1]: "deep_gemm"`},
		{"4-bit tokens", strings.Replace(fact, "payload: fp8-block128", "payload: int4-g32", 1), "moe_dispatch.allgather_payload[0].payload: int4-g32: want a format activations travel in"},
		{"no kernels", strings.Replace(fact, "kernels: [triton, flashinfer_trtllm]", "kernels: []", 1), "moe_dispatch.allgather_payload[0].kernels: missing"},
		{"uncited", strings.Replace(fact, "cite: [agrs-quant, agrs-quant-kernels]", "cite: []", 1), "moe_dispatch.allgather_payload[0].cite: missing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, fact) {
				t.Fatalf("fact %q not in the profile", fact)
			}
			err := parseEdited(base, fact, c.with)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want one line naming %q", err, c.want)
			}
		})
	}
}

// TestSpecMaxRunningFlagChecked: a method that states a running-request
// limit names the engine's option that lifts it, with {n}.
func TestSpecMaxRunningFlagChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	if f, _ := mustLookup(t, "sglang@0.5").SpecMethod("eagle3"); f.MaxRunningFlag != "--max-running-requests {n}" {
		t.Errorf("sglang eagle3: max_running_flag %q, want --max-running-requests {n}", f.MaxRunningFlag)
	}
	if err := parseEdited(base, `max_running_flag: "--max-running-requests {n}"`, `max_running_flag: "--max-running-requests"`); !oneLineWith(err, "max_running_flag") {
		t.Errorf("a flag without {n}: %v, want one line naming max_running_flag", err)
	}
}

// TestFusionOffSwitch: TensorRT-LLM's DeepSeek decoder fuses the
// all-reduce with the RMSNorm by default and reads
// TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED to turn it off (modeling_deepseekv3.py,
// the profile's cite): FusionOff gives that switch where the fusion is
// on, nothing below its TP or on a family it does not list; a switch on a
// fusion that is not on by default is refused in one line.
func TestFusionOffSwitch(t *testing.T) {
	base := string(mustRead(t, "profiles/trtllm-1.3.yaml"))
	p, err := Parse([]byte(base), "trtllm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if off, fused := p.FusionOff(FuseAllReduceRMSNorm, FusionUse{CC: "9.0", TP: 8}); !fused || off != "TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1" {
		t.Errorf("sm90 TP 8: off %q fused %v, want the engine's switch, fused", off, fused)
	}
	if off, fused := p.FusionOff(FuseAllReduceRMSNorm, FusionUse{CC: "9.0", TP: 1}); fused || off != "" {
		t.Errorf("TP 1: off %q fused %v, want not fused", off, fused)
	}
	if _, fused := p.FusionOff(FuseAllReduceRMSNorm, FusionUse{CC: "12.0", TP: 8}); fused {
		t.Error("sm120: fused, want not (the profile lists sm90 and sm100)")
	}
	const line = "default: true, min_tp: 2, off: \"TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1\""
	if !strings.Contains(base, line) {
		t.Fatalf("the TensorRT-LLM profile lacks %q", line)
	}
	err = parseEdited(base, line, "default: false, min_tp: 2, off: \"TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1\"")
	if want := "fusions[0].off: \"TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1\": only a default fusion has a switch"; !oneLineWith(err, want) {
		t.Errorf("error %v, want one line naming %s", err, want)
	}
}

// TestSGLangFusionDefaultByModel: SGLang's all-reduce + RMSNorm default
// holds for the DeepSeek-V3 and Kimi-K2.x model types only, off the H20
// (server_args.py _handle_model_specific_adjustments, the profile's
// ar-fusion-default); a model or device limit on a fusion that is not on
// by default is refused in one line.
func TestSGLangFusionDefaultByModel(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	p, err := Parse([]byte(base), "sglang.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		u    FusionUse
		want bool
	}{
		{FusionUse{CC: "9.0", Device: "NVIDIA H200", TP: 8, ModelType: "deepseek_v3"}, true},
		{FusionUse{CC: "10.0", Device: "NVIDIA B200", TP: 8, ModelType: "kimi_k25"}, true},
		{FusionUse{CC: "10.0", Device: "NVIDIA B200", TP: 8, ModelType: "kimi_k2"}, true},
		{FusionUse{CC: "10.0", Device: "NVIDIA B200", TP: 8, ModelType: "glm_moe_dsa"}, false},
		{FusionUse{CC: "9.0", Device: "NVIDIA H20", TP: 8, ModelType: "deepseek_v3"}, false},
		{FusionUse{CC: "12.0", Device: "NVIDIA RTX PRO 6000 Blackwell Server Edition", TP: 8, ModelType: "deepseek_v3"}, false},
		{FusionUse{CC: "9.0", Device: "NVIDIA H200", TP: 1, ModelType: "deepseek_v3"}, false},
	} {
		if got := p.FusedOn(FuseAllReduceRMSNorm, c.u); got != c.want {
			t.Errorf("%+v: fused %v, want %v", c.u, got, c.want)
		}
	}
	const line = "default: true, min_tp: 2, max_tokens: 2048,"
	const off = "off: \"--enforce-disable-flashinfer-allreduce-fusion\", "
	if !strings.Contains(base, line) || !strings.Contains(base, off) {
		t.Fatalf("the SGLang profile lacks %q or %q", line, off)
	}
	edited := strings.Replace(strings.Replace(base, off, "", 1), line, "default: false, min_tp: 2, max_tokens: 2048,", 1)
	_, err = Parse([]byte(edited), "edited.yaml")
	if want := "only a default fusion is limited to models or devices"; !oneLineWith(err, want) {
		t.Errorf("model_types on a fusion off by default: %v, want one line saying %s", err, want)
	}
}

// TestTRTLLMMoEAuto: TensorRT-LLM's MoeConfig.backend AUTO
// (model_config.py resolve_moe_backend, the profile's moe-auto) runs the
// CUTLASS MoE for an NVFP4 DeepSeek checkpoint on SM100 and for every
// format on SM90, and trtllm-gen only for FP8 block scales on SM100.
func TestTRTLLMMoEAuto(t *testing.T) {
	p := mustLookup(t, "trtllm")
	for _, c := range []struct {
		arch Arch
		f    WeightFormat
		want string
	}{{SM100, NVFP4, "cutlass"}, {SM100, FP8Block, "trtllm_gen"}, {SM90, FP8Block, "cutlass"}, {SM100, BF16, "cutlass"}} {
		k, err := p.MoEKernel(c.arch, c.f, false, "")
		if err != nil {
			t.Fatalf("%s %s: %v", c.arch, c.f, err)
		}
		if k.Name != c.want {
			t.Errorf("trtllm default MoE for %s on %s: %s, want %s", c.f, c.arch, k.Name, c.want)
		}
	}
	// A recipe's moe_config.backend TRTLLM still picks trtllm-gen.
	if k, err := p.MoEKernel(SM100, NVFP4, false, "trtllm_gen"); err != nil || k.Name != "trtllm_gen" {
		t.Errorf("--moe-kernel trtllm_gen for nvfp4 on sm100: %v, %v", k, err)
	}
}

// vLLM 0.24's all-reduce + RMSNorm fusion stays on under DP attention
// (enable_allreduce_rms_fusion has had no data_parallel_size term since
// PR #41458, the profile's ar-fusion-dp), TensorRT-LLM's does not; a
// dp_attention on a fusion that is not on by default (the nightly's) is
// refused in one line.
func TestFusionUnderDPAttention(t *testing.T) {
	v, err := Parse(mustRead(t, "profiles/vllm-0.24.yaml"), "vllm-0.24.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !v.FusedOn(FuseAllReduceRMSNorm, FusionUse{CC: "9.0", TP: 2, DP: 4}) || !v.FusedOn(FuseAllReduceRMSNorm, FusionUse{CC: "10.0", TP: 4, DP: 2}) {
		t.Error("vllm@0.24 TP 2 x DP 4 on 9.0, TP 4 x DP 2 on 10.0: not fused, want fused (no DP gate since vLLM PR #41458)")
	}
	trt, err := Parse(mustRead(t, "profiles/trtllm-1.3.yaml"), "trtllm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if trt.FusedOn(FuseAllReduceRMSNorm, FusionUse{CC: "9.0", TP: 2, DP: 4}) || !trt.FusedOn(FuseAllReduceRMSNorm, FusionUse{CC: "9.0", TP: 2, DP: 1}) {
		t.Error("trtllm: want fused at TP 2 without DP attention, not under it")
	}
	base := string(mustRead(t, "profiles/vllm-0.16-nightly.yaml"))
	const line = "{name: allreduce_rmsnorm, archs: [sm90, sm100], default: false, min_tp: 2"
	if !strings.Contains(base, line) {
		t.Fatalf("the nightly profile lacks %q", line)
	}
	err = parseEdited(base, line, line+", dp_attention: true")
	if want := "fusions[0].dp_attention: true: only a default fusion says"; !oneLineWith(err, want) {
		t.Errorf("error %v, want one line naming %s", err, want)
	}
}

// vLLM 0.24's FP8 MoE oracle on Hopper moves FlashInfer's CUTLASS MoE to
// the front for block-scaled FP8 experts when ep_size > 1 and Triton's
// fused_moe otherwise (fused_moe/oracle/fp8.py _get_priority_backends,
// the profile's moe-fp8-hopper-ep); on SM100 FlashInfer's trtllm-gen MoE
// leads the list either way, and FlashInfer's CUTLASS MoE takes block
// FP8 on SM 9.0 only, so SM120 keeps Triton. A linear rule stating ep is
// refused in one line.
func TestMoEKernelByExpertParallelism(t *testing.T) {
	p := mustLookup(t, "vllm@0.24")
	for _, c := range []struct {
		arch Arch
		ep   bool
		want string
	}{
		{SM90, false, "triton"},
		{SM90, true, "flashinfer_cutlass"},
		{SM100, false, "flashinfer_trtllm"},
		{SM100, true, "flashinfer_trtllm"},
		{SM120, true, "triton"},
	} {
		k, err := p.MoEKernel(c.arch, FP8Block, c.ep, "")
		if err != nil || k.Name != c.want {
			t.Errorf("%s fp8-block128 EP %v: %v %v, want %s", c.arch, c.ep, k, err, c.want)
		}
	}
	base := string(mustRead(t, "profiles/vllm-0.24.yaml"))
	const line = "{archs: [sm100, sm120], format: nvfp4, kernel: flashinfer_cutlass_nvfp4, cite: [linear-nvfp4]}"
	if !strings.Contains(base, line) {
		t.Fatalf("the vLLM 0.24 profile lacks %q", line)
	}
	err := parseEdited(base, line, strings.Replace(line, "kernel: flashinfer_cutlass_nvfp4,", "kernel: flashinfer_cutlass_nvfp4, ep: true,", 1))
	if want := "linear.select[0].ep: true: want none"; !oneLineWith(err, want) {
		t.Errorf("error %v, want one line naming %s", err, want)
	}
}
