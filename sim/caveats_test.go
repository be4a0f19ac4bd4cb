package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/internal/topofiletest"

	engprof "github.com/tpscope/tpscope/engine"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// described is the box of a description (FABRIC:NxGPU).
func described(t *testing.T, desc string) *topology.Topology {
	t.Helper()
	tp, err := topology.Resolve(desc, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// TestCaveats checks each caveat rule fires exactly where its gap was
// measured (public_test.go) and goes quiet once the parameters it is about
// are calibrated.
func TestCaveats(t *testing.T) {
	const (
		nvfp4   = "NVFP4 experts on SM12x"
		longCtx = "long context on TRITON_MLA"
		nccl    = "NCCL collectives priced"
		custom  = "custom all-reduce across CPU sockets"
		shm     = "host-memory ring hops"
		hbm     = "one-request decode on an HBM datacenter GPU"
		// vLLM 0.24's profile runs its custom all-reduce on at most 2
		// PCIe-only GPUs: 8 forced onto one need a kernel of their own.
		// vLLM's and SGLang's profiles list the all-reduce + RMSNorm
		// fusion on sm90 and sm100 only (TensorRT-LLM's there too, on
		// by default).
		arNormSM120 = "--ar-norm-fusion on sm120: vllm@0.24 fuses the all-reduce with RMSNorm only on sm90, sm100"
		forced      = "--custom-ar oneshot on 8 GPUs: vllm@0.24 runs its custom all-reduce on at most 2 PCIe-only GPUs (its profile), so this needs an out-of-tree"
		// NCCL may take NVLS where the list allows it; tpscope prices
		// Ring alone then.
		nvls = "--nccl-algo Ring,NVLS: NVLS not modelled; the collectives are priced with Ring alone"
	)
	// calibrated returns the 2-socket preset with a calibrated ring LL
	// all-reduce under P2P SYS and a trace-calibrated family (calibrate's
	// source format).
	calibrated := func(family string) *topology.Topology {
		tp := mustTopo(t, "rtxpro6000-2s")
		tp.Calibration = &topology.Calibration{Source: "test", Collectives: []topology.CollectiveParams{
			{Algo: "Ring", Proto: "LL", Ranks: 8, P2PLevel: "SYS", BaseLatUs: 6.6, HwLatUs: 1.4, BusBWGBps: 20}}}
		tp.Devices[0].Sources["efficiency.mem/"+family] = "calibrated: test trace; 10 samples, 10 memory-bound, prior 0.8"
		return tp
	}
	cases := []struct {
		name  string
		model string
		topo  *topology.Topology
		plan  model.Plan
		ctx   int
		opts  Options
		want  []string
	}{
		{"seed: Kimi NVFP4 on the 2-socket box", "kimi-k2.5-nvfp4", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 4096, tuned, []string{nvfp4, nccl}},
		{"INT4 experts", "kimi-k2.5", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 4096, tuned, []string{nccl}},
		// The NVFP4 gap is the padded FP4 tiles of the CUTLASS runners:
		// a kernel without them prices none of what the caveat says.
		{"NVFP4 experts under Marlin", "kimi-k2.5-nvfp4", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, MoEKernel: "marlin", NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}, []string{nccl}},
		{"NVFP4 experts, the executor's kernels", "kimi-k2.5-nvfp4", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, Engine: engprof.ExecutorRef, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}, []string{nccl}},
		{"NVFP4 experts under SGLang's cutlass", "kimi-k2.5-nvfp4", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "sglang"}, MoEKernel: "cutlass", NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}, []string{nvfp4, nccl}},
		{"128K without DCP", "kimi-k2.5", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 131072, tuned, []string{longCtx, nccl}},
		{"128K with DCP 8", "kimi-k2.5", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8, DCP: 8}, 131072, tuned, []string{nccl}},
		{"one GPU: no collectives", "tiny-mla-moe", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 1}, 4096, tuned, nil},
		{"H200 NVSwitch: FlashMLA, NVLink, no FP4", "kimi-k2.5-nvfp4", mustTopo(t, "h200-nvswitch"), model.Plan{TP: 8}, 131072, tuned, []string{hbm}},
		{"H200, the executor's kernels", "kimi-k2.5-nvfp4", mustTopo(t, "h200-nvswitch"), model.Plan{TP: 8}, 131072, Options{CUDAGraphs: true, Engine: engprof.ExecutorRef}, nil},
		{"one-shot across sockets", "kimi-k2.5", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, CustomAR: CustomAROneShot, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}, []string{nccl, custom, forced}},
		{"one-shot on the switch box", "kimi-k2.5", mustTopo(t, "rtxpro6000-switch"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, CustomAR: CustomAROneShot, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}, []string{nccl, forced}},
		{"AR+norm fusion on SM120", "kimi-k2.5", mustTopo(t, "rtxpro6000-switch"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, ARNormFusion: ToggleOn}, []string{nccl, shm, arNormSM120}},
		{"AR+norm fusion on H200: vLLM's own", "kimi-k2.5-nvfp4", mustTopo(t, "h200-nvswitch"), model.Plan{TP: 8}, 131072,
			Options{CUDAGraphs: true, ARNormFusion: ToggleOn}, []string{hbm}},
		// TensorRT-LLM fuses it by default on SM90 (its profile's fusions):
		// nothing out of tree to say.
		{"AR+norm fusion under TensorRT-LLM", "deepseek-v3", mustTopo(t, "h200-nvswitch"), model.Plan{TP: 8}, 131072,
			Options{CUDAGraphs: true, ARNormFusion: ToggleOn, Engine: engprof.Ref{Name: "trtllm"}}, []string{hbm}},
		{"one-shot on NVSwitch: the engine's own kernel", "kimi-k2.5-nvfp4", mustTopo(t, "h200-nvswitch"), model.Plan{TP: 8}, 131072,
			Options{CUDAGraphs: true, CustomAR: CustomAROneShot}, []string{hbm}},
		{"calibrated collectives and MoE GEMMs", "kimi-k2.5-nvfp4", calibrated("moe_gemm/nvfp4"), model.Plan{TP: 8}, 4096, tuned, nil},
		{"collective calibration under another P2P level", "kimi-k2.5-nvfp4", calibrated("moe_gemm"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true}, []string{nccl, shm}},
		{"P2P disabled", "kimi-k2.5", mustTopo(t, "rtxpro6000-switch"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PDisable: true}}, []string{nccl, shm}},
		{"calibrated attention", "kimi-k2.5", calibrated("attention/bf16"), model.Plan{TP: 8}, 131072, tuned, nil},
		{"NVLS allowed beside Ring", "kimi-k2.5-nvfp4", mustTopo(t, "h200-nvswitch"), model.Plan{TP: 8}, 131072,
			Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Algo: "Ring,NVLS"}}, []string{hbm, nvls}},
		{"NVLS excluded", "kimi-k2.5-nvfp4", mustTopo(t, "h200-nvswitch"), model.Plan{TP: 8}, 131072,
			Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Algo: "^NVLS"}}, []string{hbm}},
		// The NCCL caveat is about PCIe collectives: a TP-2 group NVLink
		// bridges (the first pair of an nvl box, whose pairs PCIe joins)
		// runs none, whatever the rest of the box.
		{"TP 2 on an NVLink pair", "tiny-mla-moe", described(t, "nvl:8xh100-nvl"), model.Plan{TP: 2}, 4096, Options{CUDAGraphs: true}, []string{hbm}},
		{"TP 4 across NVLink pairs", "tiny-mla-moe", described(t, "nvl:8xh100-nvl"), model.Plan{TP: 4}, 4096, Options{CUDAGraphs: true}, []string{nccl, shm, hbm}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(c.topo, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, c.model), Plan: c.plan,
				Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: c.ctx, KVDtype: model.BF16}})
			if err != nil {
				t.Fatal(err)
			}
			if len(pr.Caveats) != len(c.want) {
				t.Fatalf("caveats %q, want ones starting %q", pr.Caveats, c.want)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(pr.Caveats[i], w) {
					t.Errorf("caveat %d = %q, want it to start %q", i, pr.Caveats[i], w)
				}
			}
		})
	}
}

// TestCaveatHBMOneRequest: the HBM one-request rule speaks at one and two
// requests on the H200 and the B200 and is quiet from 8 requests, on
// PCIe GPUs and when the tables price the MLA module and the experts.
func TestCaveatHBMOneRequest(t *testing.T) {
	const hbm = "one-request decode on an HBM datacenter GPU"
	for _, c := range []struct {
		topo  string
		batch int
		want  bool
	}{{"h200-nvswitch", 1, true}, {"h200-nvswitch", 2, true}, {"h200-nvswitch", 8, false}, {"nvswitch:8xb200", 1, true}, {"rtxpro6000-2s", 1, false}} {
		p, err := New(collTopo(t, c.topo, 0), Options{CUDAGraphs: true})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "kimi-k2.5"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: c.batch, Context: 4096, KVDtype: model.BF16}})
		if err != nil {
			t.Fatal(err)
		}
		got := false
		for _, cv := range pr.Caveats {
			got = got || strings.HasPrefix(cv, hbm)
		}
		if got != c.want {
			t.Errorf("%s, %d requests: HBM one-request caveat %v, want %v (%q)", c.topo, c.batch, got, c.want, pr.Caveats)
		}
	}
}

// TestCaveatHBMOneRequestEngine: the rule's evidence is vLLM's kernels,
// so under another engine it names the engine whose own kernels were not
// measured; under vLLM it speaks of the engine's kernels.
func TestCaveatHBMOneRequestEngine(t *testing.T) {
	const hbm = "one-request decode on an HBM datacenter GPU"
	for _, c := range []struct {
		engine, want string
	}{{"sglang", "(sglang@0.5's own were not measured)"}, {"trtllm", "(trtllm@1.3's own were not measured)"}, {"vllm", "the engine's one-token MLA"}} {
		p, err := New(collTopo(t, "h200-nvswitch", 0), Options{CUDAGraphs: true, Engine: engprof.Ref{Name: c.engine}})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16}})
		if err != nil {
			t.Fatalf("%s: %v", c.engine, err)
		}
		found := false
		for _, cv := range pr.Caveats {
			if strings.HasPrefix(cv, hbm) {
				found = true
				if !strings.Contains(cv, c.want) {
					t.Errorf("%s: caveat %q, want it to contain %q", c.engine, cv, c.want)
				}
			}
		}
		if !found {
			t.Errorf("%s: no HBM one-request caveat in %q", c.engine, pr.Caveats)
		}
	}
}

// TestCaveatHBMOneRequestNamesTheModelsKernels: the rule names the
// one-token MLA kernels, for every model's experts: the INT4 Marlin
// experts' excess over their bytes, which it also named before, is priced
// since the Marlin call's fixed cycles (engprof.SMStream.CallCycles), so
// Kimi-K2.5's INT4 checkpoint reads as DeepSeek-V3's FP8 and the NVFP4
// ones, under vLLM and under another engine.
func TestCaveatHBMOneRequestNamesTheModelsKernels(t *testing.T) {
	const hbm = "one-request decode on an HBM datacenter GPU"
	for _, c := range []struct {
		model, engine, want string
	}{
		{"kimi-k2.5", "vllm", "the engine's one-token MLA kernels take more"},
		{"deepseek-v3", "vllm", "the engine's one-token MLA kernels take more"},
		{"kimi-k2.5-nvfp4", "vllm", "the engine's one-token MLA kernels take more"},
		{"glm-5-nvfp4", "vllm", "the engine's one-token MLA kernels take more"},
		{"deepseek-v3", "sglang", "vLLM's one-token MLA kernels take (sglang@0.5's own were not measured) more"},
		{"kimi-k2.5", "sglang", "vLLM's one-token MLA kernels take (sglang@0.5's own were not measured) more"},
	} {
		p, err := New(collTopo(t, "h200-nvswitch", 0), Options{CUDAGraphs: true, Engine: engprof.Ref{Name: c.engine}})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, c.model), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16}})
		if err != nil {
			t.Fatalf("%s under %s: %v", c.model, c.engine, err)
		}
		found := false
		for _, cv := range pr.Caveats {
			if strings.HasPrefix(cv, hbm) {
				found = true
				if !strings.Contains(cv, c.want) {
					t.Errorf("%s under %s: caveat %q, want it to contain %q", c.model, c.engine, cv, c.want)
				}
			}
		}
		if !found {
			t.Errorf("%s under %s: no HBM one-request caveat in %q", c.model, c.engine, pr.Caveats)
		}
	}
}

// TestCaveatDeviceFromCatalog: a topology file that leaves device fields
// out (the H200 preset as 'topo show -o' writes it, without its
// efficiencies and its CUDA-graph node gap) is priced with the catalog's
// h200-sxm figures, the same step as the preset, and the prediction
// names the fields taken. Before, the left-out fields read as 0: every
// kernel at the full compute peak, graph nodes free, a shorter step
// without a word.
func TestCaveatDeviceFromCatalog(t *testing.T) {
	const caveat = `does not state launch_graph_us, efficiency; taken from the GPU catalog's h200-sxm`
	preset := collTopo(t, "h200-nvswitch", 0)
	full := topofiletest.Write(t, preset, "h200.json")
	cut := topofiletest.EditDevice(t, full, "cut.json", func(dev map[string]any) {
		delete(dev, "launch_graph_us")
		delete(dev, "efficiency")
	})
	predict := func(tp *topology.Topology) *Prediction {
		p, err := New(tp, Options{CUDAGraphs: true})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "kimi-k2.5"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16}})
		if err != nil {
			t.Fatal(err)
		}
		return pr
	}
	named := func(pr *Prediction) bool {
		return slices.ContainsFunc(pr.Caveats, func(c string) bool { return strings.Contains(c, caveat) })
	}
	want := predict(preset)
	if named(want) {
		t.Errorf("preset: caveat %q where the catalog's figures are the box's own", caveat)
	}
	tp, err := topology.Load(cut)
	if err != nil {
		t.Fatal(err)
	}
	got := predict(tp)
	if got.StepUs != want.StepUs || !named(got) {
		t.Errorf("file without launch_graph_us and efficiency: step %.1f us (preset %.1f), caveats %q; want the preset's step and %q", got.StepUs, want.StepUs, got.Caveats, caveat)
	}
}

// TestCaveatBatchAboveDefaultRunningLimit: vLLM 0.24 starts on an H200
// (141 GB, >= 70 GiB, not an A100) with max_num_seqs 1024
// (EngineArgs.get_batch_defaults), so a decode batch of 1,100 sequences
// a scheduler is a server launched with a larger --max-num-seqs, and the
// prediction says so; quiet at 1,024, at 1,100 over DP 2 (550 a group),
// with the limit given, and under SGLang, whose profile states no such
// default.
func TestCaveatBatchAboveDefaultRunningLimit(t *testing.T) {
	const caveat = "runs at most 1024 by default on this GPU (max_num_seqs)"
	for _, c := range []struct {
		name    string
		engine  string
		batch   int
		plan    model.Plan
		maxSeqs int
		want    bool
	}{
		{"above the default", "vllm", 1100, model.Plan{TP: 8}, 0, true},
		{"at the default", "vllm", 1024, model.Plan{TP: 8}, 0, false},
		{"over DP 2", "vllm", 1100, model.Plan{TP: 4, DP: 2, EP: true}, 0, false},
		{"limit given", "vllm", 1100, model.Plan{TP: 8}, 2048, false},
		{"sglang", "sglang", 1100, model.Plan{TP: 8}, 0, false},
	} {
		p, err := New(collTopo(t, "h200-nvswitch", 0), Options{CUDAGraphs: true, Engine: engprof.Ref{Name: c.engine}, MaxNumSeqs: c.maxSeqs})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: c.plan,
			Workload: model.Workload{Phase: model.Decode, Batch: c.batch, Context: 512, KVDtype: model.FP8}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := slices.ContainsFunc(pr.Caveats, func(s string) bool { return strings.Contains(s, caveat) })
		if got != c.want {
			t.Errorf("%s: caveat %v, want %v: %q", c.name, got, c.want, pr.Caveats)
		}
	}
}

// TestCaveatNCCLAlgoFollowsBox: NCCL_ALGO's unmodelled algorithms are
// caveated only where NCCL has them for the box (ncclenv.Settings.
// Algorithms): NVLS needs NVLink SHARP (an NVSwitch of Hopper or later),
// so "Ring,NVLS" on a PCIe box prices exactly what NCCL runs, Ring, and
// says nothing of NVLS (it had said "where NCCL may pick NVLS"); "^Ring"
// on h200-nvswitch leaves the all-reduces Tree or NVLS and the all-gathers
// NVLS alone, which the caveat says are priced as Ring.
func TestCaveatNCCLAlgoFollowsBox(t *testing.T) {
	caveats := func(topo, algo string) []string {
		p, err := New(mustTopo(t, topo), Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Algo: algo}})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "kimi-k2.5-nvfp4"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16}})
		if err != nil {
			t.Fatal(err)
		}
		return pr.Caveats
	}
	for _, algo := range []string{"Ring,NVLS", "Ring,Tree,NVLS"} {
		for _, c := range caveats("rtxpro6000-2s", algo) {
			if strings.Contains(c, "NVLS") {
				t.Errorf("--nccl-algo %s on a PCIe box: caveat %q; NCCL has no NVLS there", algo, c)
			}
		}
	}
	// The gathers are not priced with Tree: the all-reduces are.
	want := "--nccl-algo ^Ring: NVLS not modelled; the all-reduces are priced with Tree alone, where NCCL may pick NVLS; NCCL runs any all-gather or reduce-scatter with NVLS, priced as Ring"
	if cs := caveats("h200-nvswitch", "^Ring"); !slices.ContainsFunc(cs, func(c string) bool { return strings.HasPrefix(c, want) }) {
		t.Errorf("--nccl-algo ^Ring on h200-nvswitch: caveats %q; want one starting %q", cs, want)
	}
}

// TestCaveatDefaultRunningLimitUnderBudget: vLLM fills an unset
// max_num_seqs with its GPU's default at most the step budget
// (EngineArgs._set_default_max_num_seqs_and_batched_tokens_args), so on
// an H200 with --max-num-batched-tokens 512 the server launched without
// --max-num-seqs runs at most min(1024, 512) = 512 sequences: a batch of
// 600 is above it and the caveat names 512 (it had named the GPU's 1024
// and stayed quiet), the limit plan stops the sweep at
// (Scenario.RunningLimitOf).
func TestCaveatDefaultRunningLimitUnderBudget(t *testing.T) {
	o := Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "vllm"}, MaxNumBatchedTokens: 512}
	box := collTopo(t, "h200-nvswitch", 0)
	p, err := New(box, o)
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8},
		Workload: model.Workload{Phase: model.Decode, Batch: 600, Context: 512, KVDtype: model.FP8}}
	pr, err := p.PredictScenario(sc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pr.Caveats, func(s string) bool {
		return strings.Contains(s, "runs at most 512 by default on this GPU (max_num_seqs)")
	}) {
		t.Errorf("batch 600 under a 512-token budget: caveats %q lack vLLM's default of 512", pr.Caveats)
	}
	sc.Topo, sc.Options = box, o
	if l := sc.RunningLimitOf(0); l.TotalSeqs != 512 || !l.Default || l.From() != "vllm@0.24's default max_num_seqs 512" {
		t.Errorf("running limit %+v (%s), want the default 512", l, l.From())
	}
}

// TestUnmodelledAlgoCaveatPerOp: the caveat reads each op under its own
// NCCL_ALGO clause and speaks of the ops it is asked of: the collective
// verb's one op (--op allgather --nccl-algo ^Ring on an NVSwitch had
// printed Ring rows where NCCL runs NVLS, with no word), a prediction's
// three.
func TestUnmodelledAlgoCaveatPerOp(t *testing.T) {
	const tail = ": read them as an upper bound"
	for _, c := range []struct {
		algo string
		nvls bool
		ops  []ncclenv.Collective
		want string
	}{
		{"^Ring", true, []ncclenv.Collective{ncclenv.AllGather}, "--nccl-algo ^Ring: NVLS not modelled; NCCL runs any all-gather with NVLS, priced as Ring" + tail},
		{"^Ring", false, []ncclenv.Collective{ncclenv.AllReduce}, ""},
		{"Ring,NVLS", true, []ncclenv.Collective{ncclenv.AllReduce}, "--nccl-algo Ring,NVLS: NVLS not modelled; the all-reduces are priced with Ring alone, where NCCL may pick NVLS" + tail},
		{"Ring,NVLS", true, pricedCollectives, "--nccl-algo Ring,NVLS: NVLS not modelled; the collectives are priced with Ring alone, where NCCL may pick NVLS" + tail},
		{"Ring;allgather:nvls", true, pricedCollectives, "--nccl-algo Ring;allgather:nvls: NVLS not modelled; NCCL runs any all-gather with NVLS, priced as Ring" + tail},
		{"Ring;allgather:nvls", true, []ncclenv.Collective{ncclenv.ReduceScatter}, ""},
		{"allreduce:tree,nvls;allgather:ring,nvls", true, pricedCollectives,
			"--nccl-algo allreduce:tree,nvls;allgather:ring,nvls: NVLS not modelled; the all-reduces are priced with Tree alone, where NCCL may pick NVLS; " +
				"the all-gathers and reduce-scatters are priced with Ring alone, where NCCL may pick NVLS" + tail},
		{"", true, pricedCollectives, ""},
	} {
		if got := UnmodelledAlgoCaveat(ncclenv.Settings{Algo: c.algo}, c.nvls, c.ops...); got != c.want {
			t.Errorf("--nccl-algo %q, nvls %v, %v: caveat %q, want %q", c.algo, c.nvls, c.ops, got, c.want)
		}
	}
}

// TestCaveatDenseBackendStandsInForSparse: GLM-5 run sparse on a B200
// under vllm@0.16-nightly, whose profile states no sparse MLA backend, is
// priced with its dense CUTLASS_MLA over the indexer's top-k tokens (a
// backend vLLM refuses for a model with index_topk), which the engine
// line named as the attention backend with no word that it stands in.
// Under vllm@0.24 (FLASHMLA_SPARSE) and with the model run dense no such
// caveat.
func TestCaveatDenseBackendStandsInForSparse(t *testing.T) {
	const stands = "glm-5-nvfp4 runs DSA sparse attention, and vllm@0.16-nightly's profile states no sparse MLA backend: its dense CUTLASS_MLA stands in"
	for _, c := range []struct {
		engine string
		dense  bool
		want   bool
	}{{"vllm@0.16-nightly", false, true}, {"vllm@0.16-nightly", true, false}, {"vllm@0.24", false, false}} {
		ref, err := engprof.ParseRef(c.engine)
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(collTopo(t, "nvswitch:8xb200", 0), Options{CUDAGraphs: true, Engine: ref})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "glm-5-nvfp4"), Plan: model.Plan{TP: 8}, Build: model.BuildOptions{DenseDSA: c.dense},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.FP8}})
		if err != nil {
			t.Fatalf("%s dense %v: %v", c.engine, c.dense, err)
		}
		got := slices.ContainsFunc(pr.Caveats, func(cv string) bool { return strings.HasPrefix(cv, stands) })
		if got != c.want {
			t.Errorf("%s dense %v: stand-in caveat %v, want %v (%q)", c.engine, c.dense, got, c.want, pr.Caveats)
		}
		if c.want && !slices.ContainsFunc(pr.Caveats, func(cv string) bool { return strings.Contains(cv, "fix: --engine sglang@0.5 or vllm@0.24") }) {
			t.Errorf("%s: the caveat names no engine whose profile runs a sparse backend here: %q", c.engine, pr.Caveats)
		}
	}
}
