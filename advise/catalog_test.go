package advise

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

func entryByName(t *testing.T, name string) Entry {
	t.Helper()
	for _, e := range Catalog(CatalogOptions{}) {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no catalog entry %q", name)
	return Entry{}
}

func seedConfig(t testing.TB) sim.Scenario {
	return sim.Scenario{Arch: mustPreset(t, "kimi-k2.5-nvfp4"), Plan: model.Plan{TP: 8},
		Workload: model.Workload{Batch: 1, Context: 4096, KVDtype: model.BF16},
		Options:  seedOptions, Topo: mustTopo(t, "rtxpro6000-2s")}
}

// TestFP8KVConditionOneSource: the condition advise's fp8-kv row states
// on SM120 (TRITON_MLA, the only MLA backend there, raised
// NotImplementedError for an FP8 cache until 2026) is the caveat of a
// prediction that runs an FP8 cache there, word for word after its
// prefix; a BF16 cache, or an FP8 one on H200 (FLASHMLA reads it), has
// no such caveat.
func TestFP8KVConditionOneSource(t *testing.T) {
	seed := seedConfig(t)
	fp8 := seed
	fp8.Workload.KVDtype = model.FP8
	h200 := fp8
	h200.Topo = mustTopo(t, "h200-nvswitch")
	const prefix = "FP8 KV cache with TRITON_MLA on SM120: "
	caveat := func(sc sim.Scenario) string {
		pr, _, err := sim.Predict(sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range pr.Caveats {
			if strings.HasPrefix(c, "FP8 KV cache") {
				return c
			}
		}
		return ""
	}
	got := caveat(fp8)
	row := entryByName(t, "fp8-kv").Check(seed)
	if !strings.HasPrefix(got, prefix) || !strings.Contains(got, "NotImplementedError for FP8 KV") || row.Reason != "SM120: "+strings.TrimPrefix(got, prefix) {
		t.Errorf("prediction caveat %q and advise reason %q: want one condition, %q then the reason's text after \"SM120: \"", got, row.Reason, prefix)
	}
	for name, sc := range map[string]sim.Scenario{"bf16": seed, "h200": h200} {
		if c := caveat(sc); c != "" {
			t.Errorf("%s: caveat %q, want none", name, c)
		}
	}
}

// TestCatalogApplicability checks each rule against the fact it encodes
// (serving-facts.md, hardware.md): SM120 vs SM90, PCIe vs NVLink, more
// than two GPUs, MTP layers in the config.
func TestCatalogApplicability(t *testing.T) {
	seed := seedConfig(t)
	h200 := seed
	h200.Topo = mustTopo(t, "h200-nvswitch")
	two := seed
	two.Plan = model.Plan{TP: 2}
	var err error
	if two.Topo, err = seed.Topo.Subset(2); err != nil {
		t.Fatal(err)
	}
	noP2P := seed
	noP2P.Options.NCCL.P2PDisable = true
	ds := seed
	ds.Arch = mustPreset(t, "deepseek-v3")
	cases := []struct {
		entry string
		c     sim.Scenario
		want  Status
	}{
		// TRITON_MLA is the only MLA backend on SM120 and needs the 2026
		// dequantize-on-load support; FlashMLA reads FP8 on SM90.
		{"fp8-kv", seed, Conditional},
		{"fp8-kv", h200, Applies},
		// vLLM's custom all-reduce: off on > 2 PCIe GPUs, on with 2 GPUs
		// or NVLink; a one-shot all-reduce needs P2P.
		{"oneshot-ar", seed, Conditional},
		{"oneshot-ar", two, Applies},
		{"oneshot-ar", h200, Applies},
		{"oneshot-ar", noP2P, NotApplicable},
		{"ar-norm-fusion", seed, Conditional},
		{"ar-norm-fusion", h200, Applies},
		// Kimi-K2.5: num_nextn_predict_layers 0; DeepSeek-V3: 1.
		{"mtp", seed, NotApplicable},
		{"mtp", ds, Applies},
		// Kimi-K2.5 has a built-in EAGLE-3 head and draft model; the draft
		// model's acceptance is a stand-in figure; host drafting depends
		// on the traffic; DeepSeek-V3 has no built-in head.
		{"spec-eagle3", seed, Applies},
		{"spec-draft", seed, Conditional},
		{"spec-ngram", seed, Conditional},
		{"spec-suffix", seed, Conditional},
		{"spec-eagle3", ds, NotApplicable},
		// 384 experts over 8 ranks: 48 each.
		{"expert-parallel", seed, Applies},
		{"dp-attn-ep", seed, Applies},
		{"dp-attn-ep", two, Applies},
		{"dp-attn-ep-tp2", two, NotApplicable}, // 2 GPUs make one DP group of TP 2
		{"nccl-p2p-sys", seed, Applies},
		{"nccl-min-channels-8", seed, Applies},
		{"box-h200-nvswitch", seed, Conditional},
		{"cuda-graphs", seed, Applies},
	}
	for _, c := range cases {
		t.Run(c.entry+"/"+c.c.Topo.Name+"/"+c.c.Arch.Name+"/"+c.c.Plan.String(), func(t *testing.T) {
			got := entryByName(t, c.entry).Check(c.c)
			if got.Status != c.want {
				t.Errorf("status %s (%s), want %s", got.Status, got.Reason, c.want)
			}
			if got.Reason == "" {
				t.Error("no reason given")
			}
		})
	}
}

// TestOneShotCrossSocketCaveat: on the dual-socket preset the one-shot
// row carries the public report that such a kernel ran slower than NCCL
// on dual-CPU boxes (catalog.go checkOneShot) as a typed upper bound with
// its short cause, and says what it needs; on the one-CPU switch box, and
// on the GPUs of one socket (TP 4 on gpu0-3), it is no upper bound. The
// sockets are the presets' (topo show: rtxpro6000-2s puts gpu0-3 on
// socket 0 and gpu4-7 on socket 1; rtxpro6000-switch has one CPU).
func TestOneShotCrossSocketCaveat(t *testing.T) {
	seed := seedConfig(t)
	sw := seed
	sw.Topo = mustTopo(t, "rtxpro6000-switch")
	four := seed
	four.Plan = model.Plan{TP: 4}
	for _, c := range []struct {
		name string
		c    sim.Scenario
		want bool
	}{{"2-socket tp8", seed, true}, {"switch tp8", sw, false}, {"2-socket tp4 (socket 0)", four, false}} {
		a := entryByName(t, "oneshot-ar").Check(c.c)
		if a.UpperBound != c.want || (a.Caution != "") != c.want {
			t.Errorf("%s: upper bound %v, caution %q; want upper bound %v with a caution only then", c.name, a.UpperBound, a.Caution, c.want)
		}
		if a.Status == Conditional && a.Needs == "" {
			t.Errorf("%s: conditional without what it needs", c.name)
		}
	}
}

// TestMinChannelsEntry: NCCL_MIN_NCHANNELS=8 is priced as the scenario
// with the setting, and its row says what NCCL runs without it (tpscope's
// model of its search: 2 channels on the dual-socket preset, whose socket
// link NCCL sees at 16 GB/s, 4 through the switch preset's, 16 over
// NVLink): on the dual-socket seed it lifts the ring from 2 x 11.1 = 22.2
// GB/s to the socket link's 45 and the step gains; on the switch box its
// gain is an upper bound (the public switch boxes measured none); over
// NVLink it changes nothing.
func TestMinChannelsEntry(t *testing.T) {
	e := entryByName(t, "nccl-min-channels-8")
	seed := seedConfig(t)
	sw := seed
	sw.Topo = mustTopo(t, "rtxpro6000-switch")
	h200 := seed
	h200.Topo = mustTopo(t, "h200-nvswitch")
	for _, c := range []struct {
		name   string
		c      sim.Scenario
		reason string
		upper  bool
		gains  bool
	}{
		{"2-socket", seed, "NCCL runs 2 channels", false, true},
		{"switch", sw, "NCCL runs 4 channels", true, true},
		{"nvlink", h200, "no effect on this box: NCCL already runs 16 channels", false, false},
	} {
		a := e.Check(c.c)
		if a.Status != Applies || !strings.Contains(a.Reason, c.reason) || a.UpperBound != c.upper || (a.Caution != "") != c.upper {
			t.Errorf("%s: %s %q (upper bound %v, caution %q); want applies, %q, upper bound %v", c.name, a.Status, a.Reason, a.UpperBound, a.Caution, c.reason, c.upper)
		}
		on, err := e.Apply(c.c)
		if err != nil {
			t.Fatal(err)
		}
		if on.Options.NCCL.MinChannels != 8 || on.Options.NCCL.Env()["NCCL_MIN_NCHANNELS"] != "8" || e.HowTo(c.c).String() != "env NCCL_MIN_NCHANNELS=8" {
			t.Errorf("%s: applied %+v, how %q", c.name, on.Options.NCCL, e.HowTo(c.c))
		}
		base, _, err := sim.Predict(c.c)
		if err != nil {
			t.Fatal(err)
		}
		with, _, err := sim.Predict(on)
		if err != nil {
			t.Fatal(err)
		}
		if gained := with.StepUs < base.StepUs; gained != c.gains || with.StepUs > base.StepUs {
			t.Errorf("%s: step %.1f -> %.1f us with 8 channels; want a gain %v and never a loss", c.name, base.StepUs, with.StepUs, c.gains)
		}
	}
}

// TestMTPRuleMatchesConfig reads the real Kimi-K2.5-NVFP4 config: the
// catalog must say "no MTP" exactly because num_nextn_predict_layers is 0.
func TestMTPRuleMatchesConfig(t *testing.T) {
	path := filepath.Join("..", "..", "shared", "reference", "configs", "nvidia--Kimi-K2.5-NVFP4_config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("reference configs not available: %v", err)
	}
	var cfg struct {
		TextConfig struct {
			MTP *int `json:"num_nextn_predict_layers"`
		} `json:"text_config"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.TextConfig.MTP == nil {
		t.Fatal("config has no text_config.num_nextn_predict_layers")
	}
	got := entryByName(t, "mtp").Check(seedConfig(t))
	if want := *cfg.TextConfig.MTP == 0; (got.Status == NotApplicable) != want {
		t.Errorf("num_nextn_predict_layers = %d but mtp status %s", *cfg.TextConfig.MTP, got.Status)
	}
}

// TestCatalogApplyRevert: every entry turns itself on and off.
func TestCatalogApplyRevert(t *testing.T) {
	base := seedConfig(t)
	base.Options = sim.Options{} // stock: nothing enabled
	base.Arch = mustPreset(t, "deepseek-v3")
	for _, e := range Catalog(CatalogOptions{}) {
		t.Run(e.Name, func(t *testing.T) {
			base := base
			if e.Name == "spec-eagle3" || e.Name == "spec-draft" {
				base.Arch = mustPreset(t, "kimi-k2.5-nvfp4") // the family with built-in drafters
			}
			if e.Enabled(base) {
				t.Fatal("enabled on the stock configuration")
			}
			on, err := e.Apply(base)
			if err != nil {
				t.Fatal(err)
			}
			if !e.Enabled(on) {
				t.Fatal("not enabled after Apply")
			}
			if e.Kind == "box" {
				return
			}
			off, err := e.Revert(on)
			if err != nil {
				t.Fatal(err)
			}
			if e.Enabled(off) {
				t.Fatal("still enabled after Revert")
			}
		})
	}
}

func TestStock(t *testing.T) {
	c := seedConfig(t)
	c.Options.ARNormFusion, c.Options.CustomAR, c.Options.GPUMemUtilFrac = sim.ToggleOn, sim.CustomAROneShot, 0.8
	c.Options.MaxNumBatchedTokens, c.Options.MaxNumSeqs = 4096, 128
	s := Stock(c)
	want := sim.Options{GPUMemUtilFrac: 0.8, MaxNumBatchedTokens: 4096, MaxNumSeqs: 128}
	if !reflect.DeepEqual(s.Options, want) {
		t.Errorf("stock options %+v, want %+v", s.Options, want)
	}
	// Stock is the same engine's defaults: the engine and its MoE kernel
	// stay, so the baseline's gain over stock never includes an engine change.
	c.Options.Engine, c.Options.MoEKernel = engprof.Ref{Name: "sglang"}, "flashinfer_cutlass"
	if s := Stock(c); s.Options.Engine != c.Options.Engine || s.Options.MoEKernel != c.Options.MoEKernel {
		t.Errorf("stock engine %v kernel %q, want %v %q", s.Options.Engine, s.Options.MoEKernel, c.Options.Engine, c.Options.MoEKernel)
	}
	if s.Plan != c.Plan || s.Workload != c.Workload || s.Topo != c.Topo {
		t.Error("stock changed plan, workload or box")
	}
}

// TestFP8KVReasonNamesPricedBackend: on SM90 and SM100 the fp8-kv row
// names the backend the scenario's engine runs with an FP8 cache there
// (the one its prediction prices), not FlashMLA whatever the engine:
// TensorRT-LLM's own MLA kernel on an H200, vLLM's FLASHMLA there, and an
// engine whose named backend takes no FP8 cache (SGLang's fa3) is refused
// for that reason alone.
func TestFP8KVReasonNamesPricedBackend(t *testing.T) {
	h200 := seedConfig(t)
	h200.Topo = mustTopo(t, "h200-nvswitch")
	h200.Arch = mustPreset(t, "deepseek-v3")
	trt, sgl := h200, h200
	trt.Options.Engine, _ = engprof.ParseRef("trtllm@1.3")
	sgl.Options.Engine, _ = engprof.ParseRef("sglang@0.5")
	sgl.Options.AttentionBackend = "fa3"
	for _, c := range []struct {
		name   string
		c      sim.Scenario
		status Status
		reason string
	}{
		{"trtllm", trt, Applies, "SM9.0: TRTLLM reads an FP8 KV cache"},
		{"vllm", h200, Applies, "SM9.0: FLASHMLA reads an FP8 KV cache"},
		{"sglang fa3", sgl, NotApplicable, "SM9.0: sglang@0.5's attention backend fa3 has no fp8 KV cache (it takes bf16)"},
	} {
		got := entryByName(t, "fp8-kv").Check(c.c)
		if got.Status != c.status || got.Reason != c.reason {
			t.Errorf("%s: %s %q, want %s %q", c.name, got.Status, got.Reason, c.status, c.reason)
		}
	}
}

// TestARNormFusionEngineDefault: TensorRT-LLM fuses the all-reduce with
// the RMSNorm after it by default on an NVLink box (its profile's
// fusions, modeling_deepseekv3.py): the ar-norm-fusion row says the
// engine already runs it and how is the engine's default, not FlashInfer
// kernels to turn on; under vLLM the row keeps its reason.
func TestARNormFusionEngineDefault(t *testing.T) {
	h200 := seedConfig(t)
	h200.Topo = mustTopo(t, "h200-nvswitch")
	h200.Arch = mustPreset(t, "deepseek-v3")
	trt := h200
	trt.Options.Engine, _ = engprof.ParseRef("trtllm@1.3")
	e := entryByName(t, "ar-norm-fusion")
	got := e.Check(trt)
	if got.Status != Applies || !strings.HasPrefix(got.Reason, "trtllm@1.3 fuses each all-reduce its custom kernel carries with the RMSNorm after it by default") {
		t.Errorf("trtllm: %s %q, want applies, fused by the engine's default", got.Status, got.Reason)
	}
	if how := e.HowTo(trt); how.EngineName != "trtllm@1.3" || len(how.Engine) != 1 || !strings.HasPrefix(how.Engine[0], "default") {
		t.Errorf("trtllm: how %+v, want the engine's default", how)
	}
	// vLLM 0.24 fuses by default on SM 9.0 too (PR #34299), up to its
	// 0.5 MiB cap at TP 8 there; the February-March 2026 nightly, which
	// does not, applies through FlashInfer's kernels as a flag.
	if got := e.Check(h200); got.Status != Applies || !strings.HasPrefix(got.Reason, "vllm@0.24 fuses each all-reduce its custom kernel carries with the RMSNorm after it by default, for messages up to 512 KiB here") {
		t.Errorf("vllm@0.24: %s %q, want applies, fused by the engine's default up to 512 KiB", got.Status, got.Reason)
	}
	nightly := h200
	nightly.Options.Engine, _ = engprof.ParseRef("vllm@0.16-nightly")
	if got := e.Check(nightly); got.Status != Applies || !strings.Contains(got.Reason, "FlashInfer") {
		t.Errorf("vllm@0.16-nightly: %s %q, want applies through FlashInfer's kernels", got.Status, got.Reason)
	}
}

// TestFP8KVEntryEngineDefault: the fp8-kv entry sets the KV dtype, so a
// scenario whose dtype the engine chose (sim.Scenario.KVDefault) says so
// only while the dtype is still the engine's: reverting SGLang's fp8
// default to bf16, or applying fp8 over its bf16 one, leaves no
// KVDefault; applying fp8 over its fp8 one keeps it.
func TestFP8KVEntryEngineDefault(t *testing.T) {
	var e *Entry
	entries := Catalog(CatalogOptions{})
	for i := range entries {
		if entries[i].Name == "fp8-kv" {
			e = &entries[i]
		}
	}
	if e == nil {
		t.Fatal("no fp8-kv entry")
	}
	fp8 := &sim.KVDefault{Dtype: model.FP8, Engine: "sglang@0.5", Why: "for a DSA model on SM100"}
	bf16 := &sim.KVDefault{Dtype: model.BF16, Engine: "sglang@0.5", Why: "for a DSA model on SM90"}
	for _, c := range []struct {
		name  string
		def   *sim.KVDefault
		apply bool
		keep  bool
	}{
		{"revert fp8 default", fp8, false, false},
		{"apply over bf16 default", bf16, true, false},
		{"apply over fp8 default", fp8, true, true},
	} {
		sc := sim.Scenario{Workload: model.Workload{KVDtype: c.def.Dtype}, KVDefault: c.def}
		f := e.Revert
		if c.apply {
			f = e.Apply
		}
		got, err := f(sc)
		if err != nil {
			t.Fatal(err)
		}
		if (got.KVDefault != nil) != c.keep {
			t.Errorf("%s: kv %q, kv_default %v; want kept %v", c.name, got.Workload.KVDtype, got.KVDefault, c.keep)
		}
	}
}

// TestDPRowsNameEngineDispatch: the DP-attention rows say how the
// scenario's engine moves the tokens to the experts (the dispatch their
// prediction prices): vLLM all-gathers and reduce-scatters by default,
// TensorRT-LLM takes its NVLink all-to-all on an NVLink box; a
// --moe-dispatch vLLM does not run by default adds the setting it needs
// to the row's how.
func TestDPRowsNameEngineDispatch(t *testing.T) {
	h200 := seedConfig(t)
	h200.Topo = mustTopo(t, "h200-nvswitch")
	h200.Arch = mustPreset(t, "deepseek-v3")
	trt, a2a := h200, h200
	trt.Options.Engine, _ = engprof.ParseRef("trtllm@1.3")
	a2a.Build.MoEDispatch = model.DispatchAllToAll
	e := entryByName(t, "dp-attn-ep")
	for _, c := range []struct {
		name   string
		c      sim.Scenario
		reason string
	}{
		{"vllm", h200, "needs EP; vllm@0.24 moves the tokens to the experts by all-gather + reduce-scatter (its default: --all2all-backend allgather_reducescatter)"},
		{"trtllm", trt, "needs EP; trtllm@1.3 moves the tokens to the experts by all-to-all (its default where NVLink joins the GPUs: TRTLLM_FORCE_COMM_METHOD NVLINK_ONE_SIDED)"},
		{"vllm alltoall", a2a, "needs EP; vllm@0.24 moves the tokens to the experts by all-to-all (--moe-dispatch: --all2all-backend deepep_high_throughput | deepep_low_latency | flashinfer_nvlink_one_sided | flashinfer_nvlink_two_sided; its default is all-gather + reduce-scatter)"},
	} {
		if got := e.Check(c.c); got.Status != Applies || !strings.HasPrefix(got.Reason, c.reason) {
			t.Errorf("%s: %s %q\nwant applies, %q", c.name, got.Status, got.Reason, c.reason)
		}
	}
	if how := e.HowTo(a2a); len(how.Engine) != 1 || !strings.HasSuffix(how.Engine[0], "--enable-expert-parallel --all2all-backend deepep_high_throughput | deepep_low_latency | flashinfer_nvlink_one_sided | flashinfer_nvlink_two_sided") {
		t.Errorf("vllm alltoall: how %+v, want vLLM's flags with its all2all backend", how)
	}
	if how := e.HowTo(h200); len(how.Engine) != 1 || strings.Contains(how.Engine[0], "all2all") {
		t.Errorf("vllm: how %+v, want no all2all backend: the default dispatch needs none", how)
	}
}

// TestBoxEntryEngineChoicesFollowTheBox: a box row moves the scenario to
// another GPU, where the engine decides again what the user left to it:
// whether a DSA model runs sparse (sim.ImpliedDenseDSA: vLLM runs GLM-5
// dense on SM120 and sparse on SM90) and the KV dtype (sim.ImpliedKVDefault:
// SGLang's fp8 for a DSA model on SM100 and SM120, bf16 on SM90), as
// 'predict --topo' of the row's how does. What the user chose moves
// unchanged.
func TestBoxEntryEngineChoicesFollowTheBox(t *testing.T) {
	glm := mustPreset(t, "glm-5-nvfp4")
	e := entryByName(t, "box-h200-nvswitch")

	// vLLM on the dual-socket SM120 box, --dense-dsa left unchosen.
	pcie := mustTopo(t, "rtxpro6000-2s")
	vllm := sim.Scenario{Arch: glm, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 8, Context: 4096},
		Options: sim.Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "vllm"}}, Topo: pcie}
	vllm.Build.DenseDSA = sim.ImpliedDenseDSA(glm, pcie, vllm.Options.Engine)
	if !vllm.Build.DenseDSA {
		t.Fatal("vLLM runs GLM-5 sparse on SM120: the premise moved")
	}
	got, err := e.Apply(vllm)
	if err != nil {
		t.Fatal(err)
	}
	if got.Build.DenseDSA {
		t.Error("moved to the H200 box, vLLM's implied dense DSA stayed: it runs GLM-5 sparse on SM90")
	}
	chosen := vllm
	chosen.DenseDSAChosen = true
	if got, err = e.Apply(chosen); err != nil {
		t.Fatal(err)
	}
	if !got.Build.DenseDSA {
		t.Error("a chosen --dense-dsa was dropped by the move")
	}

	// SGLang's KV default: bf16 for a DSA model on SM90, fp8 on SM100.
	box, err := topology.ParseBox("nvswitch:8xb200")
	if err != nil {
		t.Fatal(err)
	}
	b200, err := box.Build()
	if err != nil {
		t.Fatal(err)
	}
	sgl := sim.Scenario{Arch: glm, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 8, Context: 4096},
		Options: sim.Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "sglang"}}, Topo: b200}
	sgl.KVDefault = &sim.KVDefault{Dtype: model.FP8, Engine: "sglang@0.5", Why: "for a DSA model on SM100"}
	sgl.Workload.KVDtype = model.FP8
	if got, err = e.Apply(sgl); err != nil {
		t.Fatal(err)
	}
	if got.Workload.KVDtype != model.BF16 || got.KVDefault == nil || got.KVDefault.Why != "for a DSA model on SM90" {
		t.Errorf("moved to SM90: kv %q, kv_default %+v; want bf16, SGLang's default for a DSA model on SM90", got.Workload.KVDtype, got.KVDefault)
	}
	named := sgl
	named.KVDefault = nil
	if got, err = e.Apply(named); err != nil {
		t.Fatal(err)
	}
	if got.Workload.KVDtype != model.FP8 || got.KVDefault != nil {
		t.Errorf("a named --kv-dtype fp8 moved as kv %q, kv_default %+v; want fp8 as named", got.Workload.KVDtype, got.KVDefault)
	}
}

// TestBoxEntryOnItsOwnBoxDescribed: a preset is a name for a box
// description (h200-nvswitch is nvswitch:8xh200-sxm, the same box from the
// same catalog entry), so a baseline given as the description, in any
// spelling the catalog resolves, is on the preset's box: the box entry is
// in the baseline and says so, rather than "another box" priced at x1.00.
// A box of another GPU or fabric is not.
func TestBoxEntryOnItsOwnBoxDescribed(t *testing.T) {
	e := entryByName(t, "box-h200-nvswitch")
	c := seedConfig(t)
	mustTopo := func(t *testing.T, box string) *topology.Topology {
		t.Helper()
		tp, err := topology.Resolve(box, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	for _, box := range []string{"h200-nvswitch", "nvswitch:8xh200-sxm", "nvswitch:8xh200", "NVSwitch:8xH200-SXM"} {
		c.Topo = mustTopo(t, box)
		if !e.Enabled(c) {
			t.Errorf("--topo %s: the entry is not in the baseline", box)
		}
		if a := e.Check(c); strings.Contains(a.Reason, "another box") || a.Status != Applies {
			t.Errorf("--topo %s: %s %q, want the baseline's own box", box, a.Status, a.Reason)
		}
	}
	for _, box := range []string{"nvswitch:8xh100-sxm", "pcie-switch:8xh200-nvl", "rtxpro6000-2s"} {
		c.Topo = mustTopo(t, box)
		if e.Enabled(c) {
			t.Errorf("--topo %s: taken for h200-nvswitch", box)
		}
		if a := e.Check(c); !strings.HasPrefix(a.Reason, "another box: h200-nvswitch") {
			t.Errorf("--topo %s: reason %q, want another box", box, a.Reason)
		}
	}
}

// TestCUDAGraphsEntrySaysTheModePriced: the cuda-graphs row names the
// capture the step is priced under: vLLM 0.24's FULL_AND_PIECEWISE on the
// seed, but piecewise under DCP (vLLM overrides the mode there: the MLA
// custom op's ops run eagerly between the pieces) and under the 0.16
// nightly, whose TRITON_MLA captures piecewise only (README "Engines"), as
// the engine line says; the row claimed FULL_AND_PIECEWISE in both.
func TestCUDAGraphsEntrySaysTheModePriced(t *testing.T) {
	e := entryByName(t, "cuda-graphs")
	seed := seedConfig(t)
	if r := e.Check(seed).Reason; !strings.Contains(r, "(FULL_AND_PIECEWISE)") {
		t.Errorf("seed: %q, want vLLM's FULL_AND_PIECEWISE", r)
	}
	dcp := seed
	dcp.Plan.DCP = 8
	if r := e.Check(dcp).Reason; strings.Contains(r, "FULL_AND_PIECEWISE") || !strings.Contains(r, "piecewise under DCP") {
		t.Errorf("--dcp 8: %q, want the piecewise capture vLLM runs under DCP", r)
	}
	nightly := seed
	nightly.Options.Engine, _ = engprof.ParseRef("vllm@0.16-nightly")
	if r := e.Check(nightly).Reason; strings.Contains(r, "FULL_AND_PIECEWISE") || !strings.Contains(r, "TRITON_MLA captures piecewise only") {
		t.Errorf("vllm@0.16-nightly: %q, want the piecewise capture of its TRITON_MLA", r)
	}
}

// TestChecksJudgeThePlansGPUs: the collective rows judge the GPUs the
// plan runs on, not the whole box. nvl:8xh100-nvl joins GPU pairs by an
// NVLink bridge and the pairs over PCIe: TP 2 on its first pair is an
// NVLink group, where vLLM 0.24's custom all-reduce runs (one-shot below
// its cap) and carries the all-reduce + RMSNorm fusion it runs by default
// on SM 9.0, as on h200-nvswitch; TP 4 spans two pairs, where PCIe joins
// some GPUs, so neither runs by default there.
func TestChecksJudgeThePlansGPUs(t *testing.T) {
	pair := sim.Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 2},
		Workload: model.Workload{Batch: 1, Context: 4096, KVDtype: model.BF16},
		Options:  seedOptions}
	var err error
	if pair.Topo, err = topology.Resolve("nvl:8xh100-nvl", 0); err != nil {
		t.Fatal(err)
	}
	four := pair
	four.Plan = model.Plan{TP: 4}
	oneshot, fusion, p2p := entryByName(t, "oneshot-ar"), entryByName(t, "ar-norm-fusion"), entryByName(t, "nccl-p2p-sys")
	for _, c := range []struct {
		name string
		c    sim.Scenario
		want Status
		fuse bool
	}{{"TP 2 on an NVLink pair", pair, Applies, true}, {"TP 4 across pairs", four, Conditional, false}} {
		if got := oneshot.Check(c.c); got.Status != c.want {
			t.Errorf("%s: oneshot-ar %s (%s), want %s", c.name, got.Status, got.Reason, c.want)
		}
		if got := fusion.Check(c.c); got.Status != c.want {
			t.Errorf("%s: ar-norm-fusion %s (%s), want %s", c.name, got.Status, got.Reason, c.want)
		}
		if got := fusion.Enabled(c.c); got != c.fuse {
			t.Errorf("%s: ar-norm-fusion enabled %v, want %v (vLLM 0.24 fuses by default where its custom all-reduce runs)", c.name, got, c.fuse)
		}
		// NCCL_P2P_LEVEL=SYS: the pair already runs P2P over its bridge.
		if got := p2p.Check(c.c); strings.HasPrefix(got.Reason, "no effect") != c.fuse {
			t.Errorf("%s: nccl-p2p-sys %q, want no effect %v", c.name, got.Reason, c.fuse)
		}
		how := oneshot.HowTo(c.c)
		if byEngine := how.EngineName != "" && len(how.Engine) == 1 && strings.HasPrefix(how.Engine[0], "default"); byEngine != c.fuse {
			t.Errorf("%s: oneshot-ar how %+v: the engine's default %v, want %v", c.name, how, byEngine, c.fuse)
		}
	}
}
