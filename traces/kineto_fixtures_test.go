package traces

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces/internal/kinetogen"
)

var updateKineto = flag.Bool("update-kineto", false, "rewrite testdata/kineto/*.json.gz from traces/internal/kinetogen")

const kinetoFixtureDir = "testdata/kineto"

// TestKinetoFixturesUpToDate: the committed fixtures are what the
// generator writes (go test ./traces -run KinetoFixturesUpToDate
// -update-kineto rewrites them).
func TestKinetoFixturesUpToDate(t *testing.T) {
	for _, f := range kinetogen.Fixtures() {
		t.Run(f.Name, func(t *testing.T) {
			gz, _, err := f.Generate()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(kinetoFixtureDir, f.Name)
			if *updateKineto {
				if err := os.MkdirAll(kinetoFixtureDir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, gz, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			have, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-kineto to write it)", err)
			}
			if !bytes.Equal(have, gz) {
				t.Errorf("%s differs from the generator's output; rerun with -update-kineto and review", path)
			}
			if len(gz) > 1<<20 {
				t.Errorf("%s is %d bytes; fixtures stay under 1 MB", path, len(gz))
			}
		})
	}
}

// kinetoFixtureWant is what each fixture must read as. Rules follow from
// how the generator structured the file (kinetogen's scenario docs):
// engine ranges where it wrote them, graph replays without ranges, the
// layer pattern for bare eager kernels; step counts are the scenario's.
var kinetoFixtureWant = map[string]struct {
	rule, engine string
	steps        int
	// minPlacedFrac: the share of each step's kernel time that must be
	// placed on op IDs (the acceptance target for the Kimi fixture: 95 %).
	minPlacedFrac float64
}{
	"vllm_kimi-k2.5_tp8_rank0_graph_b32.pt.trace.json.gz":     {StepRuleEngineRange, EngineVLLM, 4, 0.95},
	"vllm_tiny_tp4_rank0_eager.pt.trace.json.gz":              {StepRuleEngineRange, EngineVLLM, 3, 0.5},
	"vllm_tiny_tp4_rank1_eager.pt.trace.json.gz":              {StepRuleEngineRange, EngineVLLM, 3, 0.5},
	"vllm_tiny_tp4_rank2_eager.pt.trace.json.gz":              {StepRuleEngineRange, EngineVLLM, 3, 0.5},
	"vllm_tiny_tp4_rank3_eager.pt.trace.json.gz":              {StepRuleEngineRange, EngineVLLM, 3, 0.5},
	"vllm_tiny_tp4_rank0_eager_noranges.pt.trace.json.gz":     {StepRuleLayerPattern, "", 3, 0.5},
	"vllm_tiny_tp4_rank0_piecewise.pt.trace.json.gz":          {StepRuleEngineRange, EngineVLLM, 4, 0.5},
	"vllm_tiny_tp4_rank0_piecewise_noranges.pt.trace.json.gz": {StepRuleGraphLaunch, "", 4, 0.5},
	"sglang_tiny_tp2_rank0_graph.trace.json.gz":               {StepRuleEngineRange, EngineSGLang, 4, 0.5},
	"sglang_tiny_tp2_rank1_graph.trace.json.gz":               {StepRuleEngineRange, EngineSGLang, 4, 0.5},
	"trtllm_tiny_tp4_rank0_graph.trace.json.gz":               {StepRuleGraphLaunch, "", 4, 0.5},
}

// readFixture reads one committed fixture and regenerates what was
// written into it.
func readFixture(t *testing.T, f kinetogen.Fixture) (*Result, []kinetogen.KernelTruth) {
	t.Helper()
	_, truth, err := f.Generate()
	if err != nil {
		t.Fatal(err)
	}
	res, err := ReadAll(context.Background(), filepath.Join(kinetoFixtureDir, f.Name))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kineto) != 1 {
		t.Fatalf("%d Kineto reports, want 1", len(res.Kineto))
	}
	return res, truth
}

// TestKinetoFixtureSteps: every fixture splits by the rule its structure
// calls for into the scenario's steps; each step holds exactly the
// kernels the generator wrote for it (so its kernel time equals the
// file's, to the nanosecond), and the kernels it wrote outside every step
// are left out.
func TestKinetoFixtureSteps(t *testing.T) {
	for _, f := range kinetogen.Fixtures() {
		want, ok := kinetoFixtureWant[f.Name]
		if !ok {
			t.Errorf("%s: no expectation", f.Name)
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			res, truth := readFixture(t, f)
			kf := &res.Kineto[0]
			if kf.StepRule != want.rule || kf.Engine != want.engine {
				t.Errorf("rule %q engine %q, want %q %q", kf.StepRule, kf.Engine, want.rule, want.engine)
			}
			byStart := map[int64]*kinetogen.KernelTruth{}
			wantNs := map[int]int64{}
			wantN := map[int]int{}
			outside := 0
			for i := range truth {
				kt := &truth[i]
				byStart[f.Meta.BaseNs+kt.StartNs] = kt
				if kt.Step >= 0 {
					wantNs[kt.Step] += kt.DurNs
					wantN[kt.Step]++
				} else {
					outside++
				}
			}
			if len(wantNs) != want.steps {
				t.Fatalf("the generator wrote %d steps, the table says %d", len(wantNs), want.steps)
			}
			haveNs := map[int]int64{}
			haveN := map[int]int{}
			for i := range res.Spans {
				s := &res.Spans[i]
				kt := byStart[s.Start]
				if kt == nil || kt.Name != s.Name {
					t.Fatalf("span %q at %d: no kernel written there", truncName(s.Name), s.Start)
				}
				if s.Step != kt.Step {
					t.Errorf("%q at %d: step %d, written for step %d", truncName(s.Name), kt.StartNs, s.Step, kt.Step)
				}
				if int64(s.Duration) != kt.DurNs {
					t.Errorf("%q: %d ns, written %d", truncName(s.Name), s.Duration, kt.DurNs)
				}
				haveNs[s.Step] += int64(s.Duration)
				haveN[s.Step]++
			}
			for st, ns := range wantNs {
				if haveNs[st] != ns || haveN[st] != wantN[st] {
					t.Errorf("step %d: %d kernels, %d ns; the file has %d kernels, %d ns", st, haveN[st], haveNs[st], wantN[st], ns)
				}
			}
			if len(kf.Steps) != want.steps {
				t.Errorf("%d steps reported, want %d", len(kf.Steps), want.steps)
			}
			for _, s := range kf.Steps {
				if s.KernelNs != wantNs[s.Step] || s.Kernels != wantN[s.Step] {
					t.Errorf("report step %d: %d kernels %d ns, want %d %d", s.Step, s.Kernels, s.KernelNs, wantN[s.Step], wantNs[s.Step])
				}
			}
			if outside > 0 && !strings.Contains(skipText(res), fmt.Sprintf("%d kernels run ", outside)) {
				t.Errorf("the %d kernels outside every step are not reported:\n%s", outside, skipText(res))
			}
		})
	}
}

// TestKinetoFixturePlacement: no kernel is placed on an op other than the
// one the generator wrote it for (glue on none), fused kernels list the
// ops the generator gave them, and each step places at least the table's
// share of its kernel time; kernels left unplaced are reported by name.
func TestKinetoFixturePlacement(t *testing.T) {
	for _, f := range kinetogen.Fixtures() {
		want := kinetoFixtureWant[f.Name]
		t.Run(f.Name, func(t *testing.T) {
			res, truth := readFixture(t, f)
			byStart := map[int64]*kinetogen.KernelTruth{}
			for i := range truth {
				byStart[f.Meta.BaseNs+truth[i].StartNs] = &truth[i]
			}
			wrong, missed := 0, map[string]int{}
			for i := range res.Spans {
				s := &res.Spans[i]
				kt := byStart[s.Start]
				var ops []string
				if v, ok := s.Attr(string(AttrKinetoOps)); ok {
					ops = decodeStringArray(v.AsString())
				}
				switch {
				case s.OpID == "" && kt.Op != "":
					missed[fmt.Sprintf("%s (%s)", truncName(s.Name), kt.Op)]++
				case s.OpID != kt.Op || !slices.Equal(ops, kt.Ops):
					if wrong < 10 {
						t.Errorf("step %d %q: op %q %v, written as %q %v", s.Step, truncName(s.Name), s.OpID, ops, kt.Op, kt.Ops)
					}
					wrong++
				}
				if s.OpID != "" && s.Layer >= 0 && !strings.HasPrefix(s.OpID, fmt.Sprintf("L%02d.", s.Layer)) {
					t.Errorf("%s: layer %d", s.OpID, s.Layer)
				}
			}
			if wrong > 0 {
				t.Errorf("%d of %d kernels placed on another op than written", wrong, len(res.Spans))
			}
			for m, n := range missed {
				t.Logf("left unplaced although written for an op: %s x%d", m, n)
			}
			kf := &res.Kineto[0]
			for _, s := range kf.Steps {
				frac := float64(s.PlacedNs) / float64(s.KernelNs)
				if frac < want.minPlacedFrac {
					t.Errorf("step %d: %.1f %% of kernel time placed, want >= %.0f %% (%s)", s.Step, 100*frac, 100*want.minPlacedFrac, s.Note)
				}
				t.Logf("step %d rank %d (%s, %s): %d layers, %d kernels, %.1f us, %.2f %% placed", s.Step, s.Rank, s.Phase, s.Range, s.Layers, s.Kernels, float64(s.KernelNs)/1e3, 100*frac)
			}
			for _, c := range kf.Unplaced {
				if !strings.Contains(skipText(res), truncName(c.Name)) && len(kf.Unplaced) <= maxUnplacedReported {
					t.Errorf("unplaced %q not in the skip report", c.Name)
				}
			}
		})
	}
}

// TestKinetoFixtureRanks reads the four rank files of one run together:
// every step is one trace holding all four ranks.
func TestKinetoFixtureRanks(t *testing.T) {
	dir := t.TempDir()
	for r := 0; r < 4; r++ {
		name := fmt.Sprintf("vllm_tiny_tp4_rank%d_eager.pt.trace.json.gz", r)
		b, err := os.ReadFile(filepath.Join(kinetoFixtureDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ReadAll(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kineto) != 4 {
		t.Fatalf("%d files read, want 4", len(res.Kineto))
	}
	trs := SplitTraces(res.Spans)
	if len(trs) != 3 {
		t.Fatalf("%d traces, want 3 (one per step)", len(trs))
	}
	for _, tr := range trs {
		ranks := map[int]bool{}
		for i := range tr {
			ranks[tr[i].Rank] = true
			if tr[i].Step != tr[0].Step {
				t.Errorf("trace of step %d holds a kernel of step %d", tr[0].Step, tr[i].Step)
			}
		}
		if len(ranks) != 4 {
			t.Errorf("step %d: ranks %v, want 0-3", tr[0].Step, ranks)
		}
	}
}

// TestKinetoKimiFixtureJoinsSchedule: the op IDs placed on the Kimi
// fixture (rank 0 of Kimi-K2.5 at TP 8, decode batch 32) are op IDs of
// model.Build's schedule for that scenario, and every op of rank 0's
// schedule is measured in every step (by its own kernels or a fused
// kernel that lists it), so a comparison joins measurement and
// prediction op by op.
func TestKinetoKimiFixtureJoinsSchedule(t *testing.T) {
	f := kinetogen.Fixtures()[0]
	a, err := model.Preset("kimi-k2.5")
	if err != nil {
		t.Fatal(err)
	}
	sched, err := model.Build(a, model.Plan{TP: 8}, model.Workload{Phase: model.Decode, Batch: 32, Context: 4096})
	if err != nil {
		t.Fatal(err)
	}
	inSched := map[string]bool{}
	for _, op := range sched.Ranks[0] {
		inSched[op.ID] = true
	}
	res, _ := readFixture(t, f)
	measured := map[int]map[string]bool{}
	for i := range res.Spans {
		s := &res.Spans[i]
		if s.OpID == "" {
			continue
		}
		ops := []string{s.OpID}
		if v, ok := s.Attr(string(AttrKinetoOps)); ok {
			ops = decodeStringArray(v.AsString())
		}
		for _, id := range ops {
			if !inSched[id] {
				t.Errorf("step %d: %s placed on %s, not an op of the schedule", s.Step, truncName(s.Name), id)
			}
			if measured[s.Step] == nil {
				measured[s.Step] = map[string]bool{}
			}
			measured[s.Step][id] = true
		}
	}
	if len(measured) != 4 {
		t.Fatalf("%d steps with placed kernels, want 4", len(measured))
	}
	for step, m := range measured {
		var missing []string
		for _, op := range sched.Ranks[0] {
			if !m[op.ID] {
				missing = append(missing, op.ID)
			}
		}
		if len(missing) > 0 {
			t.Errorf("step %d: %d of %d schedule ops not measured: %v", step, len(missing), len(sched.Ranks[0]), missing[:min(len(missing), 10)])
		}
	}
}

// TestKinetoFixtureARNormFusion: each step reports how its all-reduces
// met the RMSNorm after them, against what the generator wrote: in the
// TensorRT-LLM fixture every all-reduce kernel is allreduce_fusion (it
// carries the norm: the kernel lists a norm op beside the all-reduce), in
// the vLLM and SGLang ones a norm kernel of its own follows each.
func TestKinetoFixtureARNormFusion(t *testing.T) {
	for _, f := range kinetogen.Fixtures() {
		t.Run(f.Name, func(t *testing.T) {
			res, truth := readFixture(t, f)
			wantFused, wantApart := map[int]int{}, map[int]int{}
			// The generator writes one stream: its kernels by start time.
			slices.SortStableFunc(truth, func(a, b kinetogen.KernelTruth) int { return cmp.Compare(a.StartNs, b.StartNs) })
			for i, kt := range truth {
				if kt.Step < 0 || !strings.HasSuffix(kt.Op, "allreduce") {
					continue
				}
				if slices.ContainsFunc(kt.Ops, func(op string) bool { return strings.HasSuffix(op, "norm") }) {
					wantFused[kt.Step]++
					continue
				}
				// The next kernel written for an op: a norm of its own?
				for _, nt := range truth[i+1:] {
					if nt.Op != "" {
						if strings.HasSuffix(nt.Op, "norm") {
							wantApart[kt.Step]++
						}
						break
					}
				}
			}
			for _, s := range res.Kineto[0].Steps {
				if s.ARNormFused != wantFused[s.Step] || s.ARNormApart != wantApart[s.Step] {
					t.Errorf("step %d: %d all-reduces with the norm fused, %d apart; the generator wrote %d and %d", s.Step, s.ARNormFused, s.ARNormApart, wantFused[s.Step], wantApart[s.Step])
				}
			}
		})
	}
}
