package main

import (
	"strings"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// simFlags are the box and run-time option flags shared by predict, advise
// and plan: which topology, and every sim.Options field.
type simFlags struct {
	topo       string
	gpus       int
	proto      string
	algo       string
	p2pLevel   string
	p2pDisable bool
	graphs     bool
	customAR   string
	fusion     bool
	overlap    bool
	mtpAccept  float64
	memUtil    float64
	attn       string
}

// addSimFlags registers the flags on fs.
func addSimFlags(fs *pflag.FlagSet) *simFlags {
	f := &simFlags{}
	fs.StringVar(&f.topo, "topo", topology.DefaultPreset, "topology preset ("+strings.Join(topology.PresetNames(), ", ")+") or JSON file")
	fs.IntVar(&f.gpus, "gpus", 0, "use only the first N GPUs of the topology (0 = all)")
	fs.StringVar(&f.proto, "nccl-proto", "", "NCCL_PROTO: LL, LL128, Simple, a comma list or ^exclusions (default: NCCL's choice)")
	fs.StringVar(&f.algo, "nccl-algo", "", "NCCL_ALGO: Ring, Tree (default: NCCL's choice)")
	fs.StringVar(&f.p2pLevel, "p2p-level", "", "NCCL_P2P_LEVEL: LOC, NVL, PIX, PXB, PHB, SYS (default PXB)")
	fs.BoolVar(&f.p2pDisable, "p2p-disable", false, "NCCL_P2P_DISABLE=1: every GPU-GPU hop through host memory")
	fs.BoolVar(&f.graphs, "cuda-graphs", false, "replay decode as CUDA graphs (batch padded to vLLM's capture sizes)")
	fs.StringVar(&f.customAR, "custom-ar", "auto", "TP all-reduce: auto (vLLM rule), off (NCCL), oneshot, twoshot")
	fs.BoolVar(&f.fusion, "ar-norm-fusion", false, "fuse each all-reduce with the RMSNorm after it")
	fs.BoolVar(&f.overlap, "overlap", false, "run collectives on a separate stream, overlapping independent compute")
	fs.Float64Var(&f.mtpAccept, "mtp-accept", 0, "MTP acceptance rate per speculative token (0..1)")
	fs.Float64Var(&f.memUtil, "gpu-mem-util", 0, "vLLM gpu_memory_utilization (0 = 0.9)")
	fs.StringVar(&f.attn, "attention-backend", "", "MLA decode kernel: triton_mla or flashmla (default: by compute capability)")
	return f
}

// resolve returns the topology and options the flags name; errors are
// usage errors.
func (f *simFlags) resolve() (*topology.Topology, sim.Options, error) {
	t, err := resolveTopology(f.topo, f.gpus)
	if err != nil {
		return nil, sim.Options{}, err
	}
	o, err := f.options()
	if err != nil {
		return nil, sim.Options{}, err
	}
	return t, o, nil
}

// resolveTopology resolves one --topo name (preset or JSON file) at gpus
// GPUs (0 = all); errors are usage errors naming --topo.
func resolveTopology(name string, gpus int) (*topology.Topology, error) {
	t, err := topology.Resolve(name, gpus)
	if err != nil {
		return nil, usageErrorf("--topo %s: %v", name, err)
	}
	return t, nil
}

// options returns the sim.Options the run-time flags name; errors are
// usage errors.
func (f *simFlags) options() (sim.Options, error) {
	ar, err := sim.ParseCustomAR(f.customAR)
	if err != nil {
		return sim.Options{}, usageErrorf("--custom-ar: %v", err)
	}
	if _, err := topology.ParseP2PLevel(f.p2pLevel); err != nil {
		return sim.Options{}, usageErrorf("--p2p-level: %v", err)
	}
	o := sim.Options{NCCLProto: f.proto, NCCLAlgo: f.algo, P2PLevel: f.p2pLevel, P2PDisable: f.p2pDisable,
		CUDAGraphs: f.graphs, CustomAR: ar, ARNormFusion: f.fusion, Overlap: f.overlap,
		MTPAcceptRate: f.mtpAccept, GPUMemUtilization: f.memUtil, AttentionBackend: sim.AttentionBackend(f.attn)}
	if err := o.Validate(); err != nil {
		return sim.Options{}, usageErrorf("%v", err)
	}
	return o, nil
}

// simScenario resolves the shared model scenario flags into a sim.Scenario.
func simScenario(f *scenarioFlags) (sim.Scenario, error) {
	a, p, w, err := f.resolve()
	if err != nil {
		return sim.Scenario{}, err
	}
	return sim.Scenario{Arch: a, Plan: p, Workload: w, Build: f.buildOptions()}, nil
}
