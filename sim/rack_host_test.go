package sim

import (
	"strings"

	"github.com/tpscope/tpscope/model"
	"testing"

	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// TestRackHostMemoryHopRefused: with P2P off, NCCL moves a hop through
// host memory; on an NVL72 rack's slice (nvswitch:8xgb200) the GPUs of two
// superchips hang off Grace CPUs no link of the box joins (two trays are
// two hosts), so a group holding two of them is refused in one line naming
// the flag, rather than priced over a route of zero bandwidth. Two GPUs of
// one Grace keep their route: the model, and a TP 2 plan, are not refused
// for the box's other pairs (every pair of the box had been checked, and
// --tp 2 --p2p-disable refused). An HGX box's dual-socket host still
// carries every hop.
func TestRackHostMemoryHopRefused(t *testing.T) {
	rack, err := topology.Resolve("nvswitch:8xgb200", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    ncclenv.Settings
		flag string
	}{{ncclenv.Settings{P2PDisable: true}, "--p2p-disable"}, {ncclenv.Settings{P2PLevel: "LOC"}, "--p2p-level LOC"}} {
		m, err := NewCollectiveModel(rack, c.s)
		if err != nil {
			t.Fatalf("%+v on the rack: %v; the model prices any group with a route", c.s, err)
		}
		if err := m.ValidateGroup([]int{0, 1}); err != nil {
			t.Errorf("%+v, gpu0 and gpu1 (one Grace): %v", c.s, err)
		}
		for _, g := range [][]int{nil, {0, 1, 2, 3}} {
			err := m.ValidateGroup(g)
			if err == nil || !strings.HasPrefix(err.Error(), c.flag) || !strings.Contains(err.Error(), "gpu0 and gpu2 of nvswitch:8xgb200 hang off CPUs no link joins") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%+v, group %v on the rack: %v; want one line naming %s and refusing the hop between Graces", c.s, g, err, c.flag)
			}
		}
		sc := Scenario{Arch: mustPreset(t, "tiny-mla-moe"), Topo: rack, Options: Options{NCCL: c.s}, Plan: model.Plan{TP: 2},
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 1024, KVDtype: model.BF16}}
		if err := sc.CheckEngine(); err != nil {
			t.Errorf("%+v, TP 2 on the rack: CheckEngine %v", c.s, err)
		}
		if _, _, err := Predict(sc); err != nil {
			t.Errorf("%+v, TP 2 on the rack: %v", c.s, err)
		}
		sc.Plan.TP = 4
		if err := sc.CheckEngine(); err == nil || !strings.HasPrefix(err.Error(), c.flag) {
			t.Errorf("%+v, TP 4 on the rack: CheckEngine %v; want the refusal naming %s", c.s, err, c.flag)
		}
		if _, _, err := Predict(sc); err == nil || !strings.HasPrefix(err.Error(), c.flag) {
			t.Errorf("%+v, TP 4 on the rack: Predict %v; want the refusal naming %s", c.s, err, c.flag)
		}
	}
	hgx, err := topology.Resolve("h200-nvswitch", 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewCollectiveModel(hgx, ncclenv.Settings{P2PDisable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ValidateGroup(nil); err != nil {
		t.Errorf("P2P off on h200-nvswitch: %v", err)
	}
}
