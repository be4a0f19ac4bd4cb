package sim_test

import (
	"bufio"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// TestSpecStepsAgainstRecordedVerdicts: today's executor prices of the
// Kimi-K2.5 TP-8 rank-0 shard's speculative steps (baseline, EAGLE-3
// head, Moonlight draft model; 3 drafts, context 4096, BF16 KV), as the
// verdict runs them (CUDA graphs, two timing events an op, the skipped
// collectives out of the step), against the steps two GPUs measured:
// exec/cuda/testdata/h200/spec-2008-1207 (one H200, 2026-12-07 20:08),
// h100/spec-1645-1207 (one H100, 16:45), h100/spec-0012-1208 and
// spec-0033-1208 (H100s of 2026-12-08 00:12 and 00:33, the second at the
// commit that priced the measured split-K rule), read from their logs. Issue
// 32's band: every step within 15 %. (Priced then, the H200's draft
// model at batch 1 was -15.5 %; cuBLAS's split-K reduction kernel,
// priced since, is most of that point.)
func TestSpecStepsAgainstRecordedVerdicts(t *testing.T) {
	a, err := model.Preset("kimi-k2.5")
	if err != nil {
		t.Fatal(err)
	}
	moon, err := model.ResolveDrafter("moonlight-16b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	head, err := model.ResolveDrafter("kimi-k2.5-eagle3-mla")
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]struct {
		s model.Spec
		k int
	}{"baseline": {}, "spec-eagle3": {model.Spec{Method: model.SpecEagle3, Drafter: head}, 3}, "spec-draft": {model.Spec{Method: model.SpecDraftModel, Drafter: moon}, 3}}
	for _, run := range []struct{ dir, box string }{
		{filepath.Join("..", "exec", "cuda", "testdata", "h200", "spec-2008-1207"), "nvswitch:8xh200-sxm"},
		{filepath.Join("..", "exec", "cuda", "testdata", "h100", "spec-1645-1207"), "nvswitch:8xh100-sxm"},
		{filepath.Join("..", "exec", "cuda", "testdata", "h100", "spec-0012-1208"), "nvswitch:8xh100-sxm"},
		{filepath.Join("..", "exec", "cuda", "testdata", "h100", "spec-0033-1208"), "nvswitch:8xh100-sxm"},
	} {
		measured := readVerdictSteps(t, filepath.Join(run.dir, "log.txt"))
		if len(measured) != 6 {
			t.Fatalf("%s: %d measured steps, want baseline, spec-eagle3 and spec-draft at batch 1 and 8", run.dir, len(measured))
		}
		topo, err := topology.Resolve(run.box, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range slices.Sorted(maps.Keys(measured)) {
			m := measured[key]
			var b int
			var name string
			if _, err := fmt.Sscanf(key, "b%d %s", &b, &name); err != nil {
				t.Fatal(err)
			}
			sp := specs[name]
			pr, _, err := sim.Predict(sim.Scenario{Arch: a, Plan: model.Plan{TP: 8}, Topo: topo, Build: model.BuildOptions{Spec: sp.s},
				Workload: model.Workload{Phase: model.Decode, Batch: b, Context: 4096, KVDtype: model.BF16, SpecTokens: sp.k},
				Options:  sim.Options{CUDAGraphs: true, Engine: engprof.ExecutorRef, TimingEventsPerOp: 2}})
			if err != nil {
				t.Fatal(err)
			}
			asRun := pr.StepUs
			for _, op := range pr.Ops {
				if op.Rank == 0 && op.Kind == model.KindCollective {
					asRun -= op.Us // a one-rank shard runs no collective
				}
			}
			e := (asRun - m) / m
			t.Logf("%s %s: measured %.1f us, priced as run %.1f us (%+.1f %%)", run.box, key, m, asRun, 100*e)
			if math.Abs(e) > 0.15 {
				t.Errorf("%s %s: %+.1f %%, want within 15 %%", run.box, key, 100*e)
			}
		}
	}
}

// readVerdictSteps reads the measured steps of gpu-spec.sh's log (lines
// "spec-draft   measured    25221.9 us [...]" after "== verdict bN on
// BOX"), of the runs on the catalog box (before any "-cal" rerun), keyed
// "bN name".
func readVerdictSteps(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]float64{}
	batch := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "== verdict b") {
			if strings.Contains(line, ".json") {
				break // the calibrated reruns
			}
			if _, err := fmt.Sscanf(line, "== verdict b%d", &batch); err != nil {
				t.Fatalf("%s: %q: %v", path, line, err)
			}
			continue
		}
		var name string
		var us float64
		if n, _ := fmt.Sscanf(line, "%s measured %f us", &name, &us); n == 2 && batch > 0 && (name == "baseline" || strings.HasPrefix(name, "spec-")) {
			out[fmt.Sprintf("b%d %s", batch, name)] = us
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
