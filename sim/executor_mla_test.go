package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// The executor's cudacheck bench (`cudacheck bench -only mla`): every MLA
// decode launch of the Kimi-K2.5 TP-8 shapes, and the floor kernels that
// stream the same cache without arithmetic (mla_floor_*), alone and with
// the in-kernel merge; on one H200 (the merge constant's source) and one
// H100.
var (
	benchH200 = filepath.Join("..", "exec", "cuda", "testdata", "h200", "kernels-floor.jsonl")
	benchH100 = filepath.Join("..", "exec", "cuda", "testdata", "h100", "kernels-bench-1033.jsonl")
)

type benchRow struct {
	Kernel  string  `json:"kernel"`
	Shape   string  `json:"shape"`
	Us      float64 `json:"us"`
	GraphUs float64 `json:"graph_us"`
	Note    string  `json:"note"`
}

func readBenchRows(t *testing.T, path string) []benchRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []benchRow
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r benchRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// mergeTails are a bench's merge tails: each floor launch's "stream + the
// L2 merge" less its "stream only".
func mergeTails(rows []benchRow) []float64 {
	type key struct{ kernel, shape, launch string }
	floor := map[key]map[string]float64{}
	for _, r := range rows {
		launch, mode, ok := strings.Cut(r.Note, ", ")
		if !strings.HasPrefix(r.Kernel, "mla_floor_") || !ok {
			continue
		}
		k := key{r.Kernel, r.Shape, launch}
		if floor[k] == nil {
			floor[k] = map[string]float64{}
		}
		floor[k][mode] = r.GraphUs
	}
	var tails []float64
	for _, m := range floor {
		s, ok1 := m["stream only"]
		sm, ok2 := m["stream + the L2 merge"]
		if ok1 && ok2 {
			tails = append(tails, sm-s)
		}
	}
	return tails
}

// TestExecutorMLAMergeAgainstBench: the executor profile's merge time is
// the H200 bench's median merge tail, and the H100's is within 15 % of
// it (the same GH100 die and L2). With it the executor's MLA decode
// kernels, which the constant was not taken from, are priced within 25 %
// each and 8 % at the median over batch 1-128 and context 4K-128K on the
// H200, and within 30 % each and 12 % at the median on the H100; without
// it the small launches, where the merge is most of the kernel, are priced
// at a third of their time. The H100 launches are priced on a four-layer
// Kimi-K2.5 (the same attention; the whole model does not fit its box).
func TestExecutorMLAMergeAgainstBench(t *testing.T) {
	prof, err := engprof.Lookup(engprof.ExecutorRef)
	if err != nil {
		t.Fatal(err)
	}
	b, err := prof.Backend(engprof.MLAUse{Arch: engprof.SM90, KV: engprof.KV16, QKNope: 128}, "")
	if err != nil {
		t.Fatal(err)
	}
	h200, h100 := readBenchRows(t, benchH200), readBenchRows(t, benchH100)
	tails200, tails100 := mergeTails(h200), mergeTails(h100)
	if len(tails200) < 10 || len(tails100) < 10 {
		t.Fatalf("%d and %d merge tails in the H200 and H100 benches", len(tails200), len(tails100))
	}
	if med := median(tails200); math.Abs(b.Grid.MergeUs-med) > 0.05 {
		t.Errorf("executor_mla merge_us %.2f; the H200 bench's median merge tail over %d launches is %.2f us", b.Grid.MergeUs, len(tails200), med)
	}
	if med := median(tails100); math.Abs(med/b.Grid.MergeUs-1) > 0.15 {
		t.Errorf("the H100 bench's median merge tail %.2f us is not within 15 %% of merge_us %.2f", med, b.Grid.MergeUs)
	}
	kimi4 := *mustPreset(t, "kimi-k2.5")
	kimi4.Layers = 4
	for _, c := range []struct {
		name, box         string
		arch              *model.Arch
		rows              []benchRow
		each, med, bareAt float64
	}{
		{"H200", "h200-nvswitch", mustPreset(t, "kimi-k2.5"), h200, 0.25, 0.08, 0.5},
		{"H100", "nvswitch:8xh100-sxm", &kimi4, h100, 0.30, 0.12, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs, bare := priceBench(t, c.box, c.arch, c.rows, c.each)
			if len(errs) < 16 {
				t.Fatalf("%d kernel rows priced, want the bench's 20", len(errs))
			}
			if m := median(errs); m > c.med {
				t.Errorf("median |error| %.1f %% over %d launches, want %.0f %% or less", 100*m, len(errs), 100*c.med)
			}
			if m := slices.Max(bare); m < c.bareAt {
				t.Errorf("without the merge the worst launch is off by %.0f %% only: the bench no longer shows the merge", 100*m)
			}
		})
	}
}

// opCost is the priced cost of op id in p's prediction of sc.
func opCost(t *testing.T, p *Predictor, sc Scenario, id string) OpCost {
	t.Helper()
	pr, err := p.PredictScenario(sc)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pr.Ops, func(o OpResult) bool { return o.ID == id })
	if i < 0 {
		t.Fatalf("no %s in the prediction", id)
	}
	return pr.Ops[i].Cost
}

// plannerMLAKernels are the kernels the executor's planner launches for 8
// query rows a sequence (exec/cuda MLAFwdKernel: the first family's
// 8-row variant per KV dtype); a bench also times the other variants.
var plannerMLAKernels = map[string]bool{"mla_tc_bf16_r8_t64_s2": true, "mla_ds_fp8c_r8_t64_s4_w16_b": true}

// priceBench prices each full MLA launch of a bench (Kimi-K2.5 TP-8
// shapes: 8 heads, one token, merged in the kernel or unsplit) on box and
// returns the |errors| with and without the merge; each beyond the band
// is an error.
func priceBench(t *testing.T, box string, arch *model.Arch, rows []benchRow, band float64) (errs, bare []float64) {
	t.Helper()
	topo, err := topology.Resolve(box, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(topo, Options{Engine: engprof.ExecutorRef, CUDAGraphs: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !plannerMLAKernels[r.Kernel] || strings.Contains(r.Note, "combine") || strings.Contains(r.Note, "cluster") {
			continue
		}
		var bsz, heads, tps, ctx int
		if _, err := fmt.Sscanf(r.Shape, "B=%d H=%d tps=%d ctx=%d", &bsz, &heads, &tps, &ctx); err != nil || heads != 8 || tps != 1 {
			continue // Kimi-K2.5 TP 8 decode: 8 heads, one token
		}
		kv := model.BF16
		if strings.Contains(r.Kernel, "fp8") {
			kv = model.FP8
		}
		c := opCost(t, p, Scenario{Arch: arch, Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: bsz, Context: ctx - 1, KVDtype: kv}}, "L01.attn.mla_decode")
		e := (c.Us - r.GraphUs) / r.GraphUs
		t.Logf("%-26s %-28s measured %6.2f us, priced %6.2f (%+5.1f %%), merge %.1f", r.Kernel, r.Shape, r.GraphUs, c.Us, 100*e, c.MergeUs)
		if math.Abs(e) > band {
			t.Errorf("%s %s: priced %.2f us, measured %.2f (%+.1f %%): want within %.0f %%", r.Kernel, r.Shape, c.Us, r.GraphUs, 100*e, 100*band)
		}
		errs = append(errs, math.Abs(e))
		bare = append(bare, math.Abs((c.Us-c.MergeUs-r.GraphUs)/r.GraphUs))
		if c.MergeUs > 0 && c.CTAs != float64(p.dev.SMs) {
			t.Errorf("%s: %v CTAs, want the sm_fill grid's %d", r.Shape, c.CTAs, p.dev.SMs)
		}
	}
	return errs, bare
}

// benchH100Groups: the same bench on one H100 (12:15 UTC) over shapes of
// several row groups a sequence (32 to 64 query rows: DP attention's
// heads, a speculative verify's tokens) and a split sweep.
var benchH100Groups = filepath.Join("..", "exec", "cuda", "testdata", "h100", "kernels-bench-groups-1215.jsonl")

// TestExecutorMLARowGroupsGap documents a known gap with its evidence:
// the executor's MLA launches over more than 8 query rows a sequence (its
// 16-row kernel filled, or several row groups each walking the cache:
// DP attention's heads, a speculative verify's tokens) measure 14-29 us
// on an H100 where sim prices one read of the cache plus the merge, 22-48
// % below; with 8 rows (Kimi-K2.5 at TP 8, one token) the same kernel is
// priced within 25 %. The split sweep shows a block's tile loop (2.1-2.4
// us a 64-token tile) and that more rows and more blocks cost more in the
// merge (8 query rows, 64 splits: 11.4 us; 16 rows: 14.5 us; 2 groups of
// 16: 19.6 us) than one read of the cache: what is missing is that cost
// of the partials and barriers, which no first-principles term here
// gives. The test fails when the gap closes (update the README and this
// test) or widens.
func TestExecutorMLARowGroupsGap(t *testing.T) {
	rows := readBenchRows(t, benchH100Groups)
	topo, err := topology.Resolve("nvswitch:8xh100-sxm", 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(topo, Options{Engine: engprof.ExecutorRef, CUDAGraphs: true})
	if err != nil {
		t.Fatal(err)
	}
	kimi4 := *mustPreset(t, "kimi-k2.5")
	kimi4.Layers = 4
	tpOf := map[int]int{8: 8, 16: 4, 32: 2, 64: 1} // Kimi-K2.5's 64 heads over TP
	seen := map[string]bool{}
	n := 0
	for _, r := range rows {
		var bsz, heads, tps, ctx int
		if _, err := fmt.Sscanf(r.Shape, "B=%d H=%d tps=%d ctx=%d", &bsz, &heads, &tps, &ctx); err != nil || tps != 1 || !strings.HasPrefix(r.Kernel, "mla_tc_bf16_r16") {
			continue
		}
		// A shape's first row of a kernel is the planner's launch.
		if key := r.Kernel + " " + r.Shape; seen[key] {
			continue
		} else {
			seen[key] = true
		}
		groups := (heads + 15) / 16 // rows = heads at one token
		c := opCost(t, p, Scenario{Arch: &kimi4, Plan: model.Plan{TP: tpOf[heads]},
			Workload: model.Workload{Phase: model.Decode, Batch: bsz, Context: ctx - 1, KVDtype: model.BF16}}, "L01.attn.mla_decode")
		e := c.Us/r.GraphUs - 1
		t.Logf("%-24s %-24s %d group(s): measured %6.2f us, priced %6.2f (%+5.1f %%)", r.Kernel, r.Shape, groups, r.GraphUs, c.Us, 100*e)
		switch {
		case heads <= 8 && math.Abs(e) > 0.25:
			t.Errorf("%s, 8 query rows: %+.1f %%, want within 25 %%", r.Shape, 100*e)
		case heads > 8 && (e < -0.55 || e > -0.15):
			t.Errorf("%s, %d query rows: %+.1f %%; the documented gap is -15 to -55 %%", r.Shape, heads, 100*e)
		}
		n++
	}
	if n < 4 {
		t.Fatalf("%d launches priced, want the bench's 5", n)
	}
}
