package advise

import (
	"github.com/tpscope/tpscope/internal/testfix"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
)

// mustPreset and mustTopo resolve the scenario's model and box (testfix).
var mustPreset, mustTopo = testfix.Arch, testfix.Box

// seedOptions is what the seed scenario's users run (seed-scenario.md):
// CUDA graphs, NCCL_PROTO=LL, NCCL_P2P_LEVEL=SYS.
var seedOptions = sim.Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}
