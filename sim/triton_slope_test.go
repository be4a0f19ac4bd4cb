package sim_test

import (
	"testing"

	"github.com/tpscope/tpscope/perfdb"
	"github.com/tpscope/tpscope/topology"
)

// TestTritonMLAContextSlope checks what the serial split merge
// (sim.serialMergeUs, measured on an H100) does on GPUs it was not
// measured on: vLLM 0.24's own MLA module tables of the RTX PRO 6000
// (SM120) and the L40S (SM89), where TRITON_MLA is the backend vLLM ran
// (aiconfigurator's collector, live sequence lengths), grow with the
// context at one request: from 4,096 to 32,768 cached tokens the split
// rule goes from 8 to 64 splits a sequence, and the priors' MLA block
// must grow as the table's does. Without the merge the priors grew by 2 %
// of the RTX PRO 6000 table's growth and 63 % of the L40S's.
func TestTritonMLAContextSlope(t *testing.T) {
	db := sampleDB(t)
	a := mustArch(t, "kimi-k2.5")
	for _, s := range losoSystems {
		if s.system != "rtx_pro_6000_server" && s.system != "l40s" {
			continue
		}
		topo, err := topology.Resolve(s.box, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.opts.GraphSizes = []int{1, 8}
		own, err := perfdb.NewSource(db, perfdb.SourceConfig{System: s.system})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []int{1, 8} {
			var tab, pri [2]float64
			for i, ctx := range []int{4096, 32768} {
				po := losoPredict(t, topo, s.opts, own, a, b, ctx)
				for j := range po.Ops {
					if o := &po.Ops[j]; losoFamily(o) == "mla" && o.Cost.Source == "prior" && o.Kind == "attention" {
						t.Fatalf("%s b%d ctx %d: %s priced by the priors in the tables' prediction: want the module table's row", s.system, b, ctx, o.ID)
					}
				}
				tab[i] = families(po)["mla"]
				pri[i] = families(losoPredict(t, topo, s.opts, nil, a, b, ctx))["mla"]
			}
			r := (pri[1] - pri[0]) / (tab[1] - tab[0])
			t.Logf("%s b%d: MLA block 4K -> 32K tokens: table %.0f -> %.0f us, priors %.0f -> %.0f us; growth priors / table %.2f", s.system, b, tab[0], tab[1], pri[0], pri[1], r)
			if b == 1 && (r < 0.7 || r > 1.4) {
				t.Errorf("%s b%d: the priors' MLA block grows %.2f x the table's from 4K to 32K tokens, want 0.7-1.4", s.system, b, r)
			}
		}
	}
}
