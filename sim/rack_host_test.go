package sim

import (
	"strings"
	"testing"

	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// TestRackHostMemoryHopRefused: with P2P off, NCCL moves a hop through
// host memory; on an NVL72 rack's slice (nvswitch:8xgb200) the GPUs of two
// superchips hang off Grace CPUs no link of the box joins (two trays are
// two hosts), so the model refuses to price such a hop in one line rather
// than run it over a route of zero bandwidth. An HGX box's dual-socket
// host still carries it.
func TestRackHostMemoryHopRefused(t *testing.T) {
	rack, err := topology.Resolve("nvswitch:8xgb200", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []ncclenv.Settings{{P2PDisable: true}, {P2PLevel: "LOC"}} {
		_, err := NewCollectiveModel(rack, s)
		if err == nil || !strings.Contains(err.Error(), "gpu0 and gpu2 of nvswitch:8xgb200 hang off CPUs no link joins") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v on the rack: %v; want one line refusing the hop between Graces", s, err)
		}
	}
	if _, err := NewCollectiveModel(rack, ncclenv.Settings{}); err != nil {
		t.Errorf("P2P on, the rack: %v", err)
	}
	hgx, err := topology.Resolve("h200-nvswitch", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCollectiveModel(hgx, ncclenv.Settings{P2PDisable: true}); err != nil {
		t.Errorf("P2P off on h200-nvswitch: %v", err)
	}
}
