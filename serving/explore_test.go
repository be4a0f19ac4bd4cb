package serving

import (
	"fmt"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

func TestExploreDSR1(t *testing.T) {
	a, err := model.Load("testdata/models/deepseek-r1-0528-fp4")
	if err != nil { t.Fatal(err) }
	bx, err := topology.ParseBox("nvswitch:8xb200")
	if err != nil { t.Fatal(err) }
	topo, err := bx.Build()
	if err != nil { t.Fatal(err) }
	for _, pol := range []Policy{PolicyVLLM, PolicySGLang} {
	d := Deployment{Scenario: sim.Scenario{Arch: a, Plan: model.Plan{TP: 8, EP: true}, Workload: model.Workload{KVDtype: model.FP8}, Topo: topo,
		Options: sim.Options{CUDAGraphs: true}}, Engine: EngineOptions{MaxNumSeqs: 256, MaxNumBatchedTokens: 16384, Policy: pol}}
	s := mustNew(t, d)
	for _, c := range []string{"16", "64", "128", "256"} {
		ms, err := LoadMeasured("testdata/bench/inferencex-dsr1-fp4-b200-sglang-tp8ep8/conc" + c + ".json")
		if err != nil { t.Fatal(err) }
		lc, err := s.CompareMeasured(&ms[0], 0, RunOptions{})
		if err != nil { t.Fatal(err) }
		f := func(m, st string) string { x := lc.Get(m, st); return fmt.Sprintf("%.1f/%.1f(%+.0f%%)", x.Predicted, x.Measured, 100*x.ErrFrac()) }
		fmt.Println(pol, c, "ttft", f("ttft_ms","p50"), "tpot", f("tpot_ms","p50"), "out", f("output_tokens_per_s",""), "e2e", f("e2e_ms","p50"))
	}
	}
}
