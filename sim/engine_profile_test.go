package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// TestOptionsEngineCodec: --engine round-trips through names and JSON;
// scenarios recorded before engine profiles ("executor": true in JSON,
// the name "executor" on spans) read back as --engine executor; an
// unknown field is still an error.
func TestOptionsEngineCodec(t *testing.T) {
	o, unknown, err := ParseNames([]string{"engine=sglang@0.5", "cuda-graphs"})
	if err != nil || len(unknown) != 0 || o.Engine != (engprof.Ref{Name: "sglang", Version: "0.5"}) {
		t.Fatalf("ParseNames: %+v %v %v", o, unknown, err)
	}
	if got := strings.Join(o.Names(), " "); got != "cuda-graphs engine=sglang@0.5" {
		t.Errorf("names %q", got)
	}
	legacy, _, err := ParseNames([]string{"cuda-graphs", "executor"})
	if err != nil || !legacy.Engine.IsExecutor() || strings.Contains(strings.Join(legacy.Names(), " "), "executor=") {
		t.Errorf("legacy name: %+v %v (names %v)", legacy, err, legacy.Names())
	}
	for _, c := range []struct {
		in   string
		want engprof.Ref
		bad  string
	}{
		{`{"nccl":{},"cuda_graphs":true,"executor":true}`, engprof.ExecutorRef, ""},
		{`{"nccl":{},"engine":"vllm@0.16-nightly"}`, engprof.Ref{Name: "vllm", Version: "0.16-nightly"}, ""},
		{`{"nccl":{}}`, engprof.Ref{}, ""},
		{`{"nccl":{},"engine":"sglang","executor":true}`, engprof.Ref{}, "want one engine"},
		{`{"nccl":{},"executer":true}`, engprof.Ref{}, "unknown field"},
		{`{"nccl":{},"engine":"vllm@"}`, engprof.Ref{}, "want NAME or NAME@VERSION"},
	} {
		var o Options
		err := json.Unmarshal([]byte(c.in), &o)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%s: %v, want error %q", c.in, err, c.bad)
			}
			continue
		}
		if err != nil || o.Engine != c.want {
			t.Errorf("%s: %+v %v, want engine %v", c.in, o.Engine, err, c.want)
		}
		b, _ := json.Marshal(o)
		if strings.Contains(string(b), "executor\":") || (c.want.IsZero() && strings.Contains(string(b), "engine")) {
			t.Errorf("%s re-encoded as %s", c.in, b)
		}
	}
}

// TestCheckEngine: a scenario the engine cannot run is refused in one line
// naming the flag; one it can run passes.
func TestCheckEngine(t *testing.T) {
	cases := []struct {
		name  string
		model string
		topo  string
		opts  Options
		kv    model.Dtype
		dcp   int
		want  string // "" = accepted, else a prefix of the error
	}{
		{"seed", "kimi-k2.5-nvfp4", "rtxpro6000-2s", Options{}, model.BF16, 1, ""},
		{"no FA2 MLA in vLLM", "kimi-k2.5", "rtxpro6000-2s", Options{AttentionBackend: "flashinfer"}, model.BF16, 1, "--attention-backend flashinfer: vllm@0.24 has no attention backend"},
		{"SGLang FA2 MLA", "kimi-k2.5", "rtxpro6000-2s", Options{Engine: engprof.Ref{Name: "sglang"}, AttentionBackend: "flashinfer"}, model.BF16, 1, ""},
		{"SGLang FA2 MLA fp8", "kimi-k2.5", "rtxpro6000-2s", Options{Engine: engprof.Ref{Name: "sglang"}, AttentionBackend: "flashinfer"}, model.FP8, 1, "--attention-backend flashinfer: sglang@0.5's attention backend flashinfer takes an fp8 KV cache on sm100 only"},
		{"FlashMLA on SM120", "kimi-k2.5", "rtxpro6000-2s", Options{AttentionBackend: AttnFlashMLA}, model.BF16, 1, "--attention-backend flashmla: vllm@0.24's attention backend FLASHMLA runs on sm90, sm100 only"},
		{"no MLA in TRT-LLM on SM120", "kimi-k2.5", "rtxpro6000-2s", Options{Engine: engprof.Ref{Name: "trtllm"}}, model.BF16, 1, "--engine trtllm@1.3: trtllm@1.3 has no MLA attention backend on sm120"},
		// Under DCP the fault is still the engine's: no plan runs MLA
		// there, so --dcp is not named (it was, as if TP 8 alone ran).
		{"no MLA in TRT-LLM on SM120 under DCP", "kimi-k2.5", "rtxpro6000-2s", Options{Engine: engprof.Ref{Name: "trtllm"}}, model.BF16, 2, "--engine trtllm@1.3: trtllm@1.3 has no MLA attention backend on sm120"},
		// SGLang's triton runs TP 8 but returns no log-sum-exp for DCP.
		{"SGLang triton under DCP", "kimi-k2.5", "rtxpro6000-2s", Options{Engine: engprof.Ref{Name: "sglang"}}, model.BF16, 2, "--dcp 2: sglang@0.5 has no MLA attention backend for sm120 with a bf16 KV cache"},
		{"executor one-shot", "kimi-k2.5", "h200-nvswitch", Options{Engine: engprof.ExecutorRef, CustomAR: CustomAROneShot}, model.BF16, 1, "--custom-ar oneshot: executor@1 has no custom all-reduce kernel"},
		{"moe kernel for the format", "kimi-k2.5", "rtxpro6000-2s", Options{Engine: engprof.Ref{Name: "sglang"}, MoEKernel: "triton"}, model.BF16, 1, "--moe-kernel triton: sglang@0.5's MoE kernel triton does not take int4-g32 experts"},
		{"DCP with FlashInfer-MLA picks CUTLASS_MLA", "deepseek-v3", "nvswitch:8xb200-sxm", Options{}, model.BF16, 8, ""},
		{"DCP with FlashInfer-MLA forced", "deepseek-v3", "nvswitch:8xb200-sxm", Options{AttentionBackend: "FLASHINFER_MLA"}, model.BF16, 8, "--attention-backend FLASHINFER_MLA: vllm@0.24's attention backend FLASHINFER_MLA returns no log-sum-exp"},
		{"unknown engine", "kimi-k2.5", "rtxpro6000-2s", Options{Engine: engprof.Ref{Name: "lmdeploy"}}, model.BF16, 1, "--engine lmdeploy: no engine profile lmdeploy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topo, err := topology.Resolve(c.topo, 0)
			if err != nil {
				t.Fatal(err)
			}
			sc := Scenario{Arch: mustPreset(t, c.model), Topo: topo, Options: c.opts, Plan: model.Plan{TP: 8, DCP: c.dcp},
				Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: c.kv}}
			err = sc.CheckEngine()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
				t.Errorf("error %v, want one line starting %q", err, c.want)
			}
		})
	}
}

// TestCheckEngineUnknownFamily: a GPU whose compute capability is of no
// family the profiles state (7.5, Turing) is refused naming --topo and
// the capability; it had been priced with the kernels the profiles list
// for any family (TRITON_MLA and Marlin for Kimi-K2.5), as an SM120 box.
func TestCheckEngineUnknownFamily(t *testing.T) {
	topo := mustTopo(t, "rtxpro6000-2s").Clone()
	topo.Devices[0].ComputeCapability = "7.5"
	if err := topo.Validate(); err != nil {
		t.Fatal(err)
	}
	sc := Scenario{Arch: mustPreset(t, "kimi-k2.5"), Topo: topo, Plan: model.Plan{TP: 8},
		Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16}}
	err := sc.CheckEngine()
	if err == nil || !strings.HasPrefix(err.Error(), "--topo rtxpro6000-2s: its GPU NVIDIA RTX PRO 6000 Blackwell Server Edition has compute capability 7.5, of no architecture family") {
		t.Errorf("err %v, want one naming --topo and compute capability 7.5", err)
	}
}

// TestEngineKernelsPriced: the profile's kernels change what is priced:
// the fixed-split nightly is slower than vLLM 0.24 at long context and
// batch 1 (4 CTAs walk the cache); the executor launches no companion
// kernels; vLLM's NVFP4 shared-expert GEMM pays its input quantization
// but the down projection after SiLU does not (fuse_act_quant).
func TestEngineKernelsPriced(t *testing.T) {
	pred := func(o Options, modelName string, ctx int) *Prediction {
		t.Helper()
		o.CUDAGraphs = true
		o.NCCL = ncclenv.Settings{P2PLevel: "SYS"}
		p, err := New(mustTopo(t, "rtxpro6000-2s"), o)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, modelName), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: ctx, KVDtype: model.BF16}})
		if err != nil {
			t.Fatal(err)
		}
		return pr
	}
	attnUs := func(pr *Prediction) float64 {
		for _, o := range pr.Ops {
			if strings.HasSuffix(o.ID, "L05.attn.mla_decode") {
				return o.Us
			}
		}
		t.Fatal("no L05.attn.mla_decode")
		return 0
	}
	v24 := pred(Options{}, "kimi-k2.5", 150_000)
	nightly := pred(Options{Engine: engprof.Ref{Name: "vllm", Version: "0.16-nightly"}}, "kimi-k2.5", 150_000)
	if a, b := attnUs(v24), attnUs(nightly); !(b > 3*a) {
		t.Errorf("attention at 150K: vllm@0.24 %.1f us, 4-split nightly %.1f us: want the nightly several times slower", a, b)
	}
	seed := pred(Options{}, "kimi-k2.5-nvfp4", 4096)
	exe := pred(Options{Engine: engprof.ExecutorRef}, "kimi-k2.5-nvfp4", 4096)
	for _, o := range exe.Ops {
		if o.Cost.ExtraKernels != 0 {
			t.Errorf("executor: %s has %d companion kernels", o.ID, o.Cost.ExtraKernels)
		}
	}
	want := map[string]int{"L05.moe.shared_gate_up": 1, "L05.moe.shared_down": 0, "L05.moe.experts_gate_up": 5, "L05.attn.mla_decode": 4}
	for _, o := range seed.Ops {
		if n, ok := want[o.ID]; ok {
			if o.Cost.ExtraKernels != n {
				t.Errorf("vllm: %s has %d companion kernels, want %d", o.ID, o.Cost.ExtraKernels, n)
			}
			delete(want, o.ID)
		}
	}
	if len(want) != 0 {
		t.Errorf("ops not found: %v", want)
	}
	if !strings.HasPrefix(seed.Engine, "vllm@0.24 (the default engine") || !strings.Contains(seed.Engine, "attention TRITON_MLA") || !strings.Contains(seed.Engine, "MoE flashinfer_cutlass") {
		t.Errorf("engine line %q", seed.Engine)
	}
}

// TestMoEBackendRunsAnotherKernel: SGLang 0.5 hands NVFP4 experts to
// cutlass_moe_fp4 when --moe-runner-backend triton is asked for
// (modelopt_quant.py's apply falls through), so the step prices that
// kernel's chain (13 kernels besides the two GEMMs and the activation,
// counted in cutlass_moe.py and sgl-kernel) exactly as when cutlass is
// named, and the engine line says which kernel ran for the name asked.
func TestMoEBackendRunsAnotherKernel(t *testing.T) {
	pred := func(moe string) *Prediction {
		t.Helper()
		p, err := New(mustTopo(t, "rtxpro6000-2s"), Options{Engine: engprof.Ref{Name: "sglang"}, MoEKernel: moe, CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS"}})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "kimi-k2.5-nvfp4"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 512, KVDtype: model.FP8}})
		if err != nil {
			t.Fatal(err)
		}
		return pr
	}
	asked, named := pred("triton"), pred("cutlass")
	if asked.StepUs != named.StepUs || asked.Kernels != named.Kernels {
		t.Errorf("triton backend: step %.1f us, %d kernels; cutlass: %.1f us, %d kernels: want the same", asked.StepUs, asked.Kernels, named.StepUs, named.Kernels)
	}
	for _, o := range asked.Ops {
		if o.ID == "L05.moe.experts_gate_up" && o.Cost.ExtraKernels != 13 {
			t.Errorf("%s: %d companion kernels, want 13", o.ID, o.Cost.ExtraKernels)
		}
	}
	if !strings.Contains(asked.Engine, "MoE cutlass for nvfp4 experts (what --moe-kernel triton runs for them, 13 companion kernels)") {
		t.Errorf("engine line %q", asked.Engine)
	}
	if strings.Contains(named.Engine, "what --moe-kernel") {
		t.Errorf("engine line %q names a hand-over that did not happen", named.Engine)
	}
}

// TestPiecewiseAttentionEager: the nightly's TRITON_MLA captures
// piecewise only, so a graphed decode step runs the ops of vLLM's MLA
// custom op (the profile's piecewise_eager roles) eagerly between the
// captured pieces: each of their kernels pays the eager gap on the device
// and an eager launch on the host, and the op after them a graph launch;
// the captured ops keep the graph's gap. vLLM 0.24's TRITON_MLA captures
// whole: no op of its step is eager. Every profile's eager roles are
// roles of the schedule.
func TestPiecewiseAttentionEager(t *testing.T) {
	known := map[model.Role]bool{}
	for _, r := range model.Roles() {
		known[r] = true
	}
	profs, err := engprof.Profiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, prof := range profs {
		for _, r := range prof.Graphs.PiecewiseEager {
			if !known[model.Role(r)] {
				t.Errorf("%s: cuda_graphs.piecewise_eager %q is no role of the schedule", prof.Name(), r)
			}
		}
		for _, r := range prof.Graphs.PiecewiseEagerPrefill {
			if !known[model.Role(r)] {
				t.Errorf("%s: cuda_graphs.piecewise_eager_prefill %q is no role of the schedule", prof.Name(), r)
			}
		}
	}
	pred := func(engine string) *Prediction {
		t.Helper()
		return predictEngine(t, mustTopo(t, "rtxpro6000-2s"), engine, Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS"}},
			Scenario{Arch: mustPreset(t, "kimi-k2.5"), Plan: model.Plan{TP: 8},
				Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 512, KVDtype: model.FP8}})
	}
	dev := mustTopo(t, "rtxpro6000-2s").DeviceOf(0)
	eagerGap, graphGap := eagerKernelGapUs(dev), dev.LaunchGraphUs
	if !(eagerGap > graphGap) {
		t.Fatalf("eager gap %v us, graph gap %v us: the test needs them apart", eagerGap, graphGap)
	}
	for _, c := range []struct {
		engine string
		eager  map[string]bool // op IDs of layer 5 expected eager
	}{
		{"vllm@0.16-nightly", map[string]bool{"L05.attn.kv_cache_write": true, "L05.attn.w_uk": true, "L05.attn.mla_decode": true, "L05.attn.w_uv": true}},
		{"vllm@0.24", map[string]bool{}},
	} {
		pr := pred(c.engine)
		seen := 0
		for _, o := range pr.Ops {
			if !strings.HasPrefix(o.ID, "L05.attn.") {
				continue
			}
			seen++
			k := float64(1 + o.Cost.ExtraKernels)
			want := graphGap * k
			if c.eager[o.ID] {
				want = eagerGap * k
			}
			if math.Abs(o.OverheadUs-want) > 1e-9 {
				t.Errorf("%s %s: overhead %.3f us, want %.3f (eager %v)", c.engine, o.ID, o.OverheadUs, want, c.eager[o.ID])
			}
		}
		if seen < 8 {
			t.Errorf("%s: %d attention ops of layer 5", c.engine, seen)
		}
	}
}

// TestPaddedFP4Tiles: on SM120 the engines' FP4 GEMMs run 128-row tiles,
// one CTA per tile over the whole K (the profiles' padded tiles). The
// shared experts' gate/up GEMM of Kimi-K2.5-NVFP4 at TP 8 (N = 2 x 2048 /
// 8 = 512, K = 7168) then launches ceil(512 / 128) = 4 CTAs and does the
// tensor work of 128 rows whatever the tokens: at 1 and at 64 requests
// its compute term is 2 x 128 x 512 x 7168 FLOP over 4 SMs at the
// device's FP4 rate (the catalog's peak over its SMs), the same at both;
// the INT4 checkpoint's BF16 shared experts and the B200 (whose
// trtllm-gen MoE and CuteDSL linear state no padding) are priced as
// before, without padded work.
func TestPaddedFP4Tiles(t *testing.T) {
	price := func(modelName, topo string, batch int) OpCost {
		t.Helper()
		a, err := model.Preset(modelName)
		if err != nil {
			t.Fatal(err)
		}
		tp, err := topology.Resolve(topo, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(tp, Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "vllm", Version: "0.24"}})
		if err != nil {
			t.Fatal(err)
		}
		return opCost(t, p, Scenario{Arch: a, Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: batch, Context: 4096, KVDtype: model.BF16}}, "L05.moe.shared_gate_up")
	}
	box, err := topology.Preset("rtxpro6000-2s")
	if err != nil {
		t.Fatal(err)
	}
	dev := box.DeviceOf(0)
	fp4, ok := dev.TFLOPS("fp4")
	if !ok {
		t.Fatal("no FP4 peak for the RTX PRO 6000")
	}
	wantUs := 2 * 128 * 512 * 7168 / (fp4 * 1e6 * 4 / float64(dev.SMs))
	for _, b := range []int{1, 64} {
		c := price("kimi-k2.5-nvfp4", "rtxpro6000-2s", b)
		if c.CTAs != 4 || math.Abs(c.ComputeUs/wantUs-1) > 1e-9 || c.PaddedFLOPs != 2*128*512*7168 {
			t.Errorf("batch %d: %v CTAs, compute %.2f us, padded %.3g FLOP; want 4 CTAs and %.2f us", b, c.CTAs, c.ComputeUs, c.PaddedFLOPs, wantUs)
		}
	}
	if c := price("kimi-k2.5", "rtxpro6000-2s", 1); c.PaddedFLOPs != 0 {
		t.Errorf("BF16 shared experts: padded %.3g FLOP, want none", c.PaddedFLOPs)
	}
	if c := price("kimi-k2.5-nvfp4", "nvswitch:8xb200", 1); c.PaddedFLOPs != 0 {
		t.Errorf("B200: padded %.3g FLOP, want none", c.PaddedFLOPs)
	}
}

// TestEagerHostPerKernel: a kernel of an eager decode step costs the
// engine's host time (the profile's cuda_graphs.eager_host_us: 47 us for
// SGLang's Python forward), or the device's launch_eager_us where the
// profile states none (vLLM 0.24, 10 us on the H200) or a trace
// calibrated it (20 us here, under SGLang too); a graph's launch
// stays one device launch. Each eager compute op is charged its kernels
// (its own and the companions it launches) times that cost, and an
// eager SGLang decode step of one token is host-bound: its step is the
// host's time to launch every kernel. (A step with prompt tokens takes
// the profile's per-layer prefill figure: TestEagerPrefillHostPerLayer.)
func TestEagerHostPerKernel(t *testing.T) {
	topo := mustTopo(t, "h200-nvswitch")
	dev := topo.DeviceOf(0)
	// A box whose launch_eager_us a trace calibrated keeps it under every
	// engine: the user's measurement wins over the profile's figure.
	cal := eagerCalibrated(topo, 20)
	for _, c := range []struct {
		topo   *topology.Topology
		engine string
		hostUs float64
	}{{topo, "sglang@0.5", 47}, {topo, "vllm@0.24", dev.LaunchEagerUs}, {cal, "sglang@0.5", 20}} {
		topo := c.topo
		pr := predictEngine(t, topo, c.engine, Options{}, Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 1, KVDtype: model.BF16}})
		n, reduces := 0, 0
		for _, o := range pr.Ops {
			if o.Rank != 0 || o.Kind == model.KindCollective || o.Cost.Fused {
				continue
			}
			n++
			// A split-K reduction is launched within its GEMM's
			// library call: no host launch of its own.
			hostK := 1 + o.Cost.ExtraKernels
			if o.Cost.SplitKReduce {
				hostK--
				reduces++
			}
			if want := c.hostUs * float64(hostK); math.Abs(o.LaunchUs-want) > 1e-9 {
				t.Errorf("%s %s: host launch %.3f us, want %.3f", c.engine, o.ID, o.LaunchUs, want)
			}
		}
		if n < 1000 || reduces == 0 {
			t.Errorf("%s: %d eager compute ops on rank 0, %d split-K reductions (want some on the H200)", c.engine, n, reduces)
		}
		if c.hostUs > dev.LaunchEagerUs && !(pr.HostUs >= c.hostUs*float64(hostLaunched(pr)) && pr.StepUs >= pr.HostUs) {
			t.Errorf("%s: step %.1f us, host %.1f us for %d kernels the host launches: want a host-bound step of at least %g us a kernel", c.engine, pr.StepUs, pr.HostUs, hostLaunched(pr), c.hostUs)
		}
		// The profile's figure is sglang PR #12160's 82.6 ms eager
		// forward of a one-token prefill over its kernels (the profile's
		// eager-host source), run by an October 2025 build that fused
		// no all-reduce with its norm off SM100: the schedule with the
		// norms apart must still launch about as many, or the
		// derivation is stale.
		if c.engine == "sglang@0.5" && c.hostUs == 47 {
			apart := predictEngine(t, topo, c.engine, Options{ARNormFusion: ToggleOff}, Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8},
				Workload: model.Workload{Phase: model.Prefill, Batch: 1, Context: 1, KVDtype: model.BF16}})
			if perKernel := 82640.6 / float64(hostLaunched(apart)); math.Abs(perKernel-c.hostUs) > 1 {
				t.Errorf("%s: 82.6 ms over %d kernels is %.1f us a kernel, the profile states %g: re-derive cuda_graphs.eager_host_us", c.engine, hostLaunched(apart), perKernel, c.hostUs)
			}
		}
	}
}

// TestEagerPrefillHostPerLayer: an eager step with prompt tokens under
// SGLang costs the profile's prefill host time a decoder layer
// (cuda_graphs.eager_prefill_layer_host_us, 3,065 us, measured as a
// lightly loaded server's TTFT), shared by the kernels the host launches
// for that layer, NCCL collectives keeping their enqueue extra; the ops
// outside the layers keep the per-kernel eager_host_us (47 us). A
// one-token prefill is host-bound at about 61 x 3,065 us; a long prompt's
// step, whose kernels take longer, is not lengthened by it (the host runs
// ahead). vLLM 0.24, which states no such figure, keeps its per-kernel
// cost; a trace's calibrated launch_eager_us (20 us a kernel) wins under
// SGLang too.
func TestEagerPrefillHostPerLayer(t *testing.T) {
	topo := mustTopo(t, "h200-nvswitch")
	prof, err := engprof.Lookup(engprof.Ref{Name: "sglang", Version: "0.5"})
	if err != nil {
		t.Fatal(err)
	}
	layerUs, kernelUs := prof.Graphs.EagerPrefillLayerHostUs, prof.Graphs.EagerHostUs
	if layerUs != 3065 || kernelUs != 47 {
		t.Fatalf("the SGLang profile's eager host times are %g us a prefill layer and %g us a kernel, want 3065 and 47 (the test's premise)", layerUs, kernelUs)
	}
	arch := mustPreset(t, "deepseek-v3")
	prefill := func(topo *topology.Topology, engine string, tokens int) *Prediction {
		return predictEngine(t, topo, engine, Options{}, Scenario{Arch: arch, Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Prefill, Batch: 1, Context: tokens, KVDtype: model.BF16}})
	}
	// perLayer sums rank 0's host launch time by layer (-1: outside the
	// layers) less the NCCL collectives' extra, and the kernels the host
	// launches there.
	perLayer := func(pr *Prediction) (hostUs, kernels map[int]float64, total float64) {
		hostUs, kernels = map[int]float64{}, map[int]float64{}
		for _, o := range pr.Ops {
			if o.Rank != 0 || o.Cost.Fused {
				continue
			}
			total += o.LaunchUs
			h := o.LaunchUs
			if o.Kind == model.KindCollective && ncclAlgo(o.Cost.Algo) {
				h -= ncclHostExtraUs
			}
			hostUs[o.Layer] += h
			kernels[o.Layer] += hostKernels(o.Cost)
		}
		return
	}
	one := prefill(topo, "sglang@0.5", 1)
	// The engine line says so for a prefill step, not for a decode one.
	const said = "prefill eager, the host's iteration 3065 us a decoder layer"
	if !strings.Contains(one.Engine, said) {
		t.Errorf("SGLang prefill engine line %q: want %q", one.Engine, said)
	}
	dec := predictEngine(t, topo, "sglang@0.5", Options{CUDAGraphs: true}, Scenario{Arch: arch, Plan: model.Plan{TP: 8},
		Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 1024, KVDtype: model.BF16}})
	if strings.Contains(dec.Engine, "prefill eager") {
		t.Errorf("SGLang decode engine line %q: want no prefill host time", dec.Engine)
	}
	host, kernels, total := perLayer(one)
	if len(host) != arch.Layers+1 {
		t.Fatalf("%d layers and the rest priced, want %d and the rest", len(host)-1, arch.Layers)
	}
	for l, h := range host {
		want := layerUs
		if l < 0 {
			want = kernelUs * kernels[l]
		}
		if math.Abs(h-want) > 1e-6*want {
			t.Errorf("SGLang one-token prefill, layer %d: host %.3f us for %g kernels, want %.3f", l, h, kernels[l], want)
		}
	}
	if !(one.StepUs >= total && one.StepUs < 1.2*total && total >= float64(arch.Layers)*layerUs) {
		t.Errorf("SGLang one-token prefill: step %.1f us, host %.1f: want host-bound at %d layers x %g us or more", one.StepUs, total, arch.Layers, layerUs)
	}
	// A 16K-token prompt's kernels outlast the host's share: its step is
	// its device time, the host hidden.
	long := prefill(topo, "sglang@0.5", 16384)
	if _, _, lt := perLayer(long); !(long.StepUs > 1.5*lt) {
		t.Errorf("SGLang 16K-token prefill: step %.1f us, host %.1f: want a step its kernels bound", long.StepUs, lt)
	}
	// vLLM states no prefill figure, nor does a box whose trace calibrated
	// the launch: every kernel pays the device's launch_eager_us.
	cal := eagerCalibrated(topo, 20)
	for _, c := range []struct {
		name      string
		pr        *Prediction
		perKernel float64
	}{{"vLLM", prefill(topo, "vllm@0.24", 1), topo.DeviceOf(0).LaunchEagerUs}, {"SGLang on a calibrated box", prefill(cal, "sglang@0.5", 1), 20}} {
		if strings.Contains(c.pr.Engine, "prefill eager") {
			t.Errorf("%s engine line %q: want no prefill host time", c.name, c.pr.Engine)
		}
		h, k, _ := perLayer(c.pr)
		for l := range h {
			if math.Abs(h[l]-c.perKernel*k[l]) > 1e-6*h[l] {
				t.Errorf("%s one-token prefill, layer %d: host %.3f us for %g kernels, want %g us a kernel", c.name, l, h[l], k[l], c.perKernel)
			}
		}
	}
}

// eagerCalibrated is a copy of topo whose devices' launch_eager_us a trace
// calibrated to us.
func eagerCalibrated(topo *topology.Topology, us float64) *topology.Topology {
	cal := topo.Clone()
	for i := range cal.Devices {
		d := &cal.Devices[i]
		d.LaunchEagerUs = us
		d.Sources = maps.Clone(d.Sources)
		d.Sources["launch_eager_us"] = "calibrated: trace run.json"
	}
	return cal
}

// hostLaunched counts the kernels of pr's step the host launches: every
// kernel (Prediction.Kernels) but the split-K reductions a GEMM library
// launches within its GEMM's call.
func hostLaunched(pr *Prediction) int {
	n := pr.Kernels
	first := -1
	for _, o := range pr.Ops {
		if first < 0 {
			first = o.Rank
		}
		if o.Rank == first && !o.Cost.Fused && o.Cost.SplitKReduce {
			n--
		}
	}
	return n
}

// predictEngine predicts sc on topo under engine (a profile reference)
// with the options o.
func predictEngine(t *testing.T, topo *topology.Topology, engine string, o Options, sc Scenario) *Prediction {
	t.Helper()
	ref, err := engprof.ParseRef(engine)
	if err != nil {
		t.Fatal(err)
	}
	o.Engine = ref
	p, err := New(topo, o)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.PredictScenario(sc)
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// TestEngineLineSaysPiecewise: vLLM 0.16-nightly runs TRITON_MLA with a
// fixed 4 KV splits, a backend its profile captures piecewise only, so
// with graphs on the engine line says attention runs eagerly between the
// captured pieces; 0.24's TRITON_MLA captures full graphs, and an eager
// step has no pieces.
func TestEngineLineSaysPiecewise(t *testing.T) {
	const piecewise = "CUDA graphs piecewise: attention eager between captured pieces"
	line := func(o Options) string {
		t.Helper()
		p, err := New(mustTopo(t, "rtxpro6000-2s"), o)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "kimi-k2.5"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16}})
		if err != nil {
			t.Fatal(err)
		}
		return pr.Engine
	}
	nightly := engprof.Ref{Name: "vllm", Version: "0.16-nightly"}
	if l := line(Options{CUDAGraphs: true, Engine: nightly}); !strings.Contains(l, piecewise) {
		t.Errorf("0.16-nightly with graphs: %q, want %q", l, piecewise)
	}
	if l := line(Options{CUDAGraphs: true}); strings.Contains(l, piecewise) {
		t.Errorf("0.24 with graphs: %q", l)
	}
	if l := line(Options{Engine: nightly}); strings.Contains(l, piecewise) {
		t.Errorf("0.16-nightly eager: %q", l)
	}
}

// TestDCPCapturesPiecewise: vLLM 0.24 overrides its FULL_AND_PIECEWISE
// graphs to PIECEWISE under decode context parallelism (platforms/cuda.py
// check_and_update_config: DCP's per-step KV lengths would be captured as
// constants), so on an H200, whose FLASH_ATTN_MLA otherwise captures the
// decode step whole, a --dcp 2 step runs the ops of the MLA custom op
// eagerly between the captured pieces: each of their kernels pays the
// eager gap on the device, the ops outside keep the graph's. The same
// step without DCP has no eager op, and the engine line says which.
func TestDCPCapturesPiecewise(t *testing.T) {
	const piecewise = "CUDA graphs piecewise: attention eager between captured pieces"
	box := mustTopo(t, "h200-nvswitch")
	dev := box.DeviceOf(0)
	eagerGap, graphGap := eagerKernelGapUs(dev), dev.LaunchGraphUs
	if !(eagerGap > graphGap) {
		t.Fatalf("eager gap %v us, graph gap %v us: the test needs them apart", eagerGap, graphGap)
	}
	eager := map[string]bool{"L05.attn.kv_cache_write": true, "L05.attn.w_uk": true, "L05.attn.mla_decode": true, "L05.attn.w_uv": true}
	for _, dcp := range []int{1, 2} {
		pr := predictEngine(t, box, "vllm@0.24", Options{CUDAGraphs: true},
			Scenario{Arch: mustPreset(t, "kimi-k2.5"), Plan: model.Plan{TP: 8, DCP: dcp},
				Workload: model.Workload{Phase: model.Decode, Batch: 8, Context: 4096, KVDtype: model.BF16}})
		if got := strings.Contains(pr.Engine, piecewise+" (vllm@0.24 captures piecewise under DCP)"); got != (dcp > 1) {
			t.Errorf("DCP %d: engine line %q; piecewise said %v, want %v", dcp, pr.Engine, got, dcp > 1)
		}
		seen := 0
		for _, o := range pr.Ops {
			if !eager[o.ID] && o.ID != "L05.attn.q_b_proj" {
				continue
			}
			seen++
			k := float64(1 + o.Cost.ExtraKernels)
			want := graphGap * k
			if dcp > 1 && eager[o.ID] {
				want = eagerGap * k
			}
			if math.Abs(o.OverheadUs-want) > 1e-9 {
				t.Errorf("DCP %d %s: overhead %.3f us, want %.3f", dcp, o.ID, o.OverheadUs, want)
			}
		}
		if seen < len(eager)+1 {
			t.Errorf("DCP %d: %d of the %d checked ops of layer 5 found", dcp, seen, len(eager)+1)
		}
	}
}

// TestSGLangSparseDecodeBackendPriced: under SGLang 0.5 a DSA model run
// sparse on SM90 / SM100 is priced on its nsa backend (server_args sets
// attention_backend "nsa" for such a model), not the dense backend its
// family and KV dtype would pick for a dense one (flashinfer on the B200,
// one companion; fa3 on the H200 with a bf16 cache): the decode op gets
// nsa's two companions (the query concatenation and FlashMLA's split
// merge, nsa_backend.py forward_decode), each at the op's kernel floor,
// and the engine line names it. Run dense (--dense-dsa) the dense choice
// stays; on SM120, where SGLang runs GLM-5 dense, nothing changes.
func TestSGLangSparseDecodeBackendPriced(t *testing.T) {
	fp8Ckpt, err := model.Load("../serving/testdata/models/glm-5-fp8")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		arch   *model.Arch
		topo   string
		dense  bool
		kv     model.Dtype
		want   int
		engine string
	}{
		{"B200 fp8", mustPreset(t, "glm-5-nvfp4"), "nvswitch:8xb200", false, model.FP8, 2, "attention nsa (sm_fill, 2 companion kernels)"},
		{"H200 bf16", fp8Ckpt, "h200-nvswitch", false, model.BF16, 2, "attention nsa (sm_fill, 2 companion kernels)"},
		{"H200 fp8", fp8Ckpt, "h200-nvswitch", false, model.FP8, 2, "attention nsa (sm_fill, 2 companion kernels)"},
		{"B200 dense", mustPreset(t, "glm-5-nvfp4"), "nvswitch:8xb200", true, model.FP8, 1, "attention flashinfer (sm_fill, 1 companion kernel)"},
		{"SM120", mustPreset(t, "glm-5-nvfp4"), "rtxpro6000-2s", true, model.BF16, 2, "attention triton (8 KV splits, 2 companion kernels)"},
	} {
		topo, opts := collTopo(t, c.topo, 0), Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "sglang"}}
		p, err := New(topo, opts)
		if err != nil {
			t.Fatal(err)
		}
		sc := Scenario{Arch: c.arch, Plan: model.Plan{TP: 8}, Build: model.BuildOptions{DenseDSA: c.dense}, Options: opts, Topo: topo,
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: c.kv}}
		pr, err := p.PredictScenario(sc)
		if err != nil {
			t.Fatal(err)
		}
		checkDecodeCompanions(t, c.name, pr, c.want)
		if !strings.Contains(pr.Engine, c.engine) || (c.dense && strings.Contains(pr.Engine, "nsa")) {
			t.Errorf("%s: engine line %q, want %q", c.name, pr.Engine, c.engine)
		}
		if err := sc.CheckEngine(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestSparseDecodeBackendPriced: GLM-5's sparse decode on SM90 / SM100 is
// priced with vLLM 0.24's sparse MLA backend, FLASHMLA_SPARSE, not the
// dense one its KV dtype and qk_nope_head_dim would pick (CUTLASS_MLA on
// the B200, FLASHMLA on the H200, two companions each): the schedule's
// indexer ops make the decode sparse, and its companions are the five
// kernels flashmla_sparse.py's FP8 decode launches besides
// flash_mla_with_kvcache at 8 heads a rank (concat_mla_q, the top-k
// conversion, the padded query's fill and copy, the split merge), each at
// the op's kernel floor. Run dense (--dense-dsa) the dense backend stays.
func TestSparseDecodeBackendPriced(t *testing.T) {
	for _, c := range []struct {
		topo   string
		dense  bool
		want   int
		engine string
	}{
		{"nvswitch:8xb200", false, 5, "attention FLASHMLA_SPARSE"},
		{"h200-nvswitch", false, 5, "attention FLASHMLA_SPARSE"},
		{"nvswitch:8xb200", true, 2, "attention CUTLASS_MLA"},
		{"h200-nvswitch", true, 2, "attention FLASHMLA "},
	} {
		p, err := New(collTopo(t, c.topo, 0), Options{CUDAGraphs: true})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "glm-5-nvfp4"), Plan: model.Plan{TP: 8}, Build: model.BuildOptions{DenseDSA: c.dense},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.FP8}})
		if err != nil {
			t.Fatal(err)
		}
		checkDecodeCompanions(t, fmt.Sprintf("%s dense %v", c.topo, c.dense), pr, c.want)
		if !strings.Contains(pr.Engine, c.engine) {
			t.Errorf("%s dense %v: engine line %q, want %q", c.topo, c.dense, pr.Engine, c.engine)
		}
	}
}

// checkDecodeCompanions checks that layer 5's MLA decode op of pr is
// priced with want companion kernels, each at the op's kernel floor.
func checkDecodeCompanions(t *testing.T, name string, pr *Prediction, want int) {
	t.Helper()
	for _, o := range pr.Ops {
		if o.ID != "L05.attn.mla_decode" {
			continue
		}
		if o.Cost.ExtraKernels != want || o.Cost.ExtraKernelsUs != float64(want)*o.Cost.MinKernelUs {
			t.Errorf("%s: %s has %d companion kernels (%.2f us at a %.2f us floor), want %d", name, o.ID, o.Cost.ExtraKernels, o.Cost.ExtraKernelsUs, o.Cost.MinKernelUs, want)
		}
		return
	}
	t.Errorf("%s: no L05.attn.mla_decode", name)
}

// vLLM 0.24 runs DeepSeek-V3's block-scaled FP8 experts on an H200 with
// FlashInfer's CUTLASS MoE under expert parallelism and Triton's
// fused_moe with them sharded by TP (its FP8 oracle's Hopper rule, the
// profile's moe-fp8-hopper-ep): the same box and batch, --ep or not,
// price different kernels, and the engine line names each.
func TestVLLMHopperFP8MoEKernelByEP(t *testing.T) {
	a, err := model.Preset("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(mustTopo(t, "h200-nvswitch"), Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "vllm", Version: "0.24"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ep   bool
		want string
	}{{false, "MoE triton for fp8-block128 experts"}, {true, "MoE flashinfer_cutlass for fp8-block128 experts"}} {
		pr, err := p.PredictScenario(Scenario{Arch: a, Plan: model.Plan{TP: 8, EP: c.ep},
			Workload: model.Workload{Phase: model.Decode, Batch: 8, Context: 1000, KVDtype: model.BF16}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(pr.Engine, c.want) {
			t.Errorf("TP 8 EP %v: engine %q, want %q", c.ep, pr.Engine, c.want)
		}
	}
}

// TestEngineLineEagerStepNoPieces: a step that replays no graph with
// graphs on (more tokens than the largest capture size: vLLM's 512, or a
// --graph-sizes list that stops below the batch) captures no pieces, so
// the engine line says nothing of attention running eagerly between
// them, whatever would make the capture piecewise (DCP under vLLM 0.24,
// 0.16-nightly's TRITON_MLA, a prefill step of vLLM); the same scenario
// at a batch a capture size holds still says it.
func TestEngineLineEagerStepNoPieces(t *testing.T) {
	const piecewise = "CUDA graphs piecewise"
	box := mustTopo(t, "rtxpro6000-2s")
	arch := mustPreset(t, "kimi-k2.5")
	for _, c := range []struct {
		name, engine string
		o            Options
		plan         model.Plan
		graphed      model.Workload
		eager        model.Workload
	}{
		{"dcp", "vllm@0.24", Options{CUDAGraphs: true}, model.Plan{TP: 8, DCP: 4},
			model.Workload{Phase: model.Decode, Batch: 8, Context: 1024, KVDtype: model.FP8},
			model.Workload{Phase: model.Decode, Batch: 1024, Context: 1024, KVDtype: model.FP8}},
		{"nightly graph sizes", "vllm@0.16-nightly", Options{CUDAGraphs: true, GraphSizes: []int{1, 2, 4}}, model.Plan{TP: 8},
			model.Workload{Phase: model.Decode, Batch: 4, Context: 4096, KVDtype: model.FP8},
			model.Workload{Phase: model.Decode, Batch: 8, Context: 4096, KVDtype: model.FP8}},
		{"prefill", "vllm@0.24", Options{CUDAGraphs: true}, model.Plan{TP: 8},
			model.Workload{Phase: model.Prefill, Batch: 1, Context: 256, KVDtype: model.FP8},
			model.Workload{Phase: model.Prefill, Batch: 1, Context: 8192, KVDtype: model.FP8}},
	} {
		g := predictEngine(t, box, c.engine, c.o, Scenario{Arch: arch, Plan: c.plan, Workload: c.graphed})
		if !g.Graphed || !strings.Contains(g.Engine, piecewise) {
			t.Errorf("%s, %d tokens: graphed %v, engine line %q: want a graphed step said piecewise", c.name, c.graphed.Batch*c.graphed.Context, g.Graphed, g.Engine)
		}
		e := predictEngine(t, box, c.engine, c.o, Scenario{Arch: arch, Plan: c.plan, Workload: c.eager})
		if e.Graphed {
			t.Fatalf("%s: the eager case replayed a graph: the test needs it eager", c.name)
		}
		if strings.Contains(e.Engine, piecewise) {
			t.Errorf("%s: eager step's engine line %q says its attention runs between captured pieces", c.name, e.Engine)
		}
	}
}
