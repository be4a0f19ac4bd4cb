package advise

import (
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

func mustPreset(t testing.TB, name string) *model.Arch {
	t.Helper()
	a, err := model.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustTopo(t testing.TB, name string) *topology.Topology {
	t.Helper()
	topo, err := topology.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// seedOptions is what the seed scenario's users run (seed-scenario.md):
// CUDA graphs, NCCL_PROTO=LL, NCCL_P2P_LEVEL=SYS.
var seedOptions = sim.Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}
