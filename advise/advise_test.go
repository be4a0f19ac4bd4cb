package advise

import (
	"math"
	"slices"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

func rowByEntry(t *testing.T, adv *Advice, name string) *Row {
	t.Helper()
	for i := range adv.Rows {
		if adv.Rows[i].Entry == name {
			return &adv.Rows[i]
		}
	}
	t.Fatalf("no advice row %q", name)
	return nil
}

// TestAdviseSeed runs advise on the seed scenario (seed-scenario.md:
// Kimi-K2.5-NVFP4, rtxpro6000-2s, TP 8, batch 1, context 4096, CUDA graphs
// + NCCL_PROTO=LL + NCCL_P2P_LEVEL=SYS, bf16 KV) and checks the changes
// each entry makes against counts derived from the architecture and
// serving-facts.md.
func TestAdviseSeed(t *testing.T) {
	glm := mustPreset(t, "glm-5-nvfp4")
	adv, err := Advise(Input{Base: seedConfig(t), Batches: []int{1, 2, 32, 256}, Contexts: []int{4096, 131072},
		Transfer: []*model.Arch{glm}})
	if err != nil {
		t.Fatal(err)
	}
	// Kimi-K2.5: 61 layers, 2 all-reduces per layer + 1 for the
	// embedding = 123 all-reduces, + 1 logits all-gather (serving-facts.md).
	if got := adv.Baseline.Footprint.Collectives; got != 124 {
		t.Errorf("baseline collectives %d, want 2 x 61 + 1 all-reduces + 1 all-gather = 124", got)
	}
	if adv.StockGain.Speedup() <= 1 {
		t.Errorf("graphs + LL + SYS over stock: speedup %.2f, want > 1 (the seed saw 20 -> 57 tok/s on GLM-5)", adv.StockGain.Speedup())
	}

	t.Run("transfer", func(t *testing.T) {
		if len(adv.Transfer) != 2 || adv.Transfer[1].Model != "glm-5-nvfp4" || adv.Transfer[1].Error != "" {
			t.Fatalf("transfer rows %+v", adv.Transfer)
		}
		g := adv.Transfer[1]
		// GLM-5: 78 layers, 2 x 78 + 1 = 157 all-reduces + 1 logits
		// all-gather (serving-facts.md).
		if g.Collectives != 158 {
			t.Errorf("GLM-5 collectives %d, want 158", g.Collectives)
		}
		if g.Gain.Speedup() <= 1 || adv.Transfer[0].Gain != adv.StockGain {
			t.Errorf("speedups: GLM-5 %.2f, Kimi %.2f (stock speedup %.2f)", g.Gain.Speedup(), adv.Transfer[0].Gain.Speedup(), adv.StockGain.Speedup())
		}
	})

	t.Run("fp8-kv", func(t *testing.T) {
		r := rowByEntry(t, adv, "fp8-kv")
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		// Acceptance (issue 4): at batch 1, context 4096 the step changes
		// by less than 10 %.
		if d := math.Abs(r.Change.StepUs) / r.Without.StepUs; d >= 0.10 {
			t.Errorf("step changes by %.1f %%, want < 10 %%", 100*d)
		}
		// KV capacity doubles: 70,272 B/token bf16 vs 35,136 fp8
		// (serving-facts.md), same memory left for the cache.
		if math.Abs(r.Change.KVCapacityFrac-70272.0/35136.0) > 0.001 {
			t.Errorf("KV capacity ratio %.4f, want 2", r.Change.KVCapacityFrac)
		}
		// Attention reads one byte less per cached value: 61 layers x
		// (4096 context tokens) x 576 latent values x 1 B.
		if want := -61.0 * 4096 * 576; math.Abs(r.Change.KVBytes-want) > 1e-6*math.Abs(want) {
			t.Errorf("KV bytes read change %.0f, want %.0f", r.Change.KVBytes, want)
		}
		if r.Change.Collectives != 0 || r.Change.CommBytes != 0 {
			t.Errorf("FP8 KV changed collectives: %+d calls, %+d bytes", r.Change.Collectives, r.Change.CommBytes)
		}
		// At large batch x long context it helps: either a measurable speedup
		// where both fit, or a configuration only FP8 holds. Batch 2 x
		// 131,072 tokens needs 262,146 x 70,272 B = 18.4 GB of bf16 cache, more
		// than the ~16.6 GB left after 75.6 GB of weights and 2.2 GB of
		// workspace in 94.4 GB usable (vLLM 0.24's 0.92); in fp8 it needs
		// 9.2 GB.
		sw := r.Sweep
		if sw == nil {
			t.Fatal("no sweep")
		}
		if sw.FitsFrom == nil || sw.FitsFrom.Batch != 2 || sw.FitsFrom.Context != 131072 {
			t.Errorf("fits-only-with-fp8 from %+v, want batch 2 x context 131072", sw.FitsFrom)
		}
	})

	t.Run("ar-norm-fusion", func(t *testing.T) {
		r := rowByEntry(t, adv, "ar-norm-fusion")
		// Every all-reduce is followed by an RMSNorm (post-attention norm,
		// next layer's input norm, the final norm): 123 kernels fewer.
		if r.Change.Kernels != -123 {
			t.Errorf("kernels change %d, want -123", r.Change.Kernels)
		}
		if r.Change.Collectives != 0 {
			t.Errorf("collectives change %d, want 0", r.Change.Collectives)
		}
		if r.Gain.Speedup() <= 1 {
			t.Errorf("speedup %.3f, want > 1", r.Gain.Speedup())
		}
	})

	t.Run("oneshot-ar", func(t *testing.T) {
		r := rowByEntry(t, adv, "oneshot-ar")
		if r.Change.Collectives != 0 || r.Change.CommBytes != 0 {
			t.Errorf("one-shot changed the collectives themselves: %+d calls, %+d B", r.Change.Collectives, r.Change.CommBytes)
		}
		if r.Change.CommUs >= 0 {
			t.Errorf("communication time change %.1f us, want < 0", r.Change.CommUs)
		}
	})

	t.Run("expert-parallel", func(t *testing.T) {
		r := rowByEntry(t, adv, "expert-parallel")
		// EP with DP 1: still one all-reduce per MoE layer, no all-to-all.
		if r.Change.Collectives != 0 || r.With.Footprint.AllToAllBytes != 0 {
			t.Errorf("EP (DP 1) collectives change %d, all-to-all bytes %d; want 0 and 0", r.Change.Collectives, r.With.Footprint.AllToAllBytes)
		}
	})

	t.Run("dp-attn-ep-tp2", func(t *testing.T) {
		r := rowByEntry(t, adv, "dp-attn-ep-tp2")
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		// DP > 1 + EP adds a dispatch and a combine per MoE layer (60
		// MoE layers): the seed's vLLM all-gathers the tokens and
		// reduce-scatters the outputs (its default all2all_backend), so
		// no byte moves by all-to-all.
		if r.With.Footprint.AllToAllBytes != 0 {
			t.Errorf("%d all-to-all bytes under vLLM's DP attention, want none: it all-gathers", r.With.Footprint.AllToAllBytes)
		}
		if !strings.Contains(r.Applicability.Reason, "vllm@0.24 moves the tokens to the experts by all-gather + reduce-scatter (its default: --all2all-backend allgather_reducescatter)") {
			t.Errorf("reason %q: want it to name vLLM's default dispatch", r.Applicability.Reason)
		}
		if r.Change.Collectives != 2*60 {
			t.Errorf("collectives change %d, want +120 (dispatch + combine x 60 MoE layers)", r.Change.Collectives)
		}
	})

	t.Run("cuda-graphs", func(t *testing.T) {
		r := rowByEntry(t, adv, "cuda-graphs")
		if !r.InBaseline {
			t.Fatal("graphs are in the seed baseline")
		}
		// One graph launch instead of one launch per kernel.
		if r.With.Footprint.HostLaunches != 1 || r.Without.Footprint.HostLaunches != r.Without.Footprint.Kernels {
			t.Errorf("host launches with %d / without %d (kernels %d)", r.With.Footprint.HostLaunches, r.Without.Footprint.HostLaunches, r.Without.Footprint.Kernels)
		}
	})

	t.Run("mtp", func(t *testing.T) {
		r := rowByEntry(t, adv, "mtp")
		if r.Applicability.Status != NotApplicable || r.Error == "" {
			t.Errorf("Kimi-K2.5 has no MTP layer: status %s, error %q", r.Applicability.Status, r.Error)
		}
	})

	t.Run("nccl-p2p-disable", func(t *testing.T) {
		r := rowByEntry(t, adv, "nccl-p2p-disable")
		if r.Gain.Speedup() >= 1 {
			t.Errorf("P2P disabled: speedup %.2f, want < 1", r.Gain.Speedup())
		}
	})

	t.Run("ranking", func(t *testing.T) {
		for i := 1; i < len(adv.Rows); i++ {
			a, b := adv.Rows[i-1], adv.Rows[i]
			if a.Error == "" && b.Error == "" && a.Gain.TokensPerSPct < b.Gain.TokensPerSPct {
				t.Errorf("row %d (%s %.3f) ranked above %s %.3f", i-1, a.Entry, a.Gain.Speedup(), b.Entry, b.Gain.Speedup())
			}
		}
	})
}

// TestSummarizeSweep checks the "where it pays" rules on hand-made cells.
func TestSummarizeSweep(t *testing.T) {
	cells := []SweepCell{
		{Batch: 1, Context: 1024, With: 100, Without: 100, WithFits: true, WithoutFits: true},
		{Batch: 1, Context: 65536, With: 110, Without: 100, WithFits: true, WithoutFits: true},
		{Batch: 64, Context: 1024, With: 106, Without: 100, WithFits: true, WithoutFits: true},
		{Batch: 64, Context: 65536, With: 50, Without: 0, WithFits: true, WithoutFits: false},
		{Batch: 8, Context: 1024, With: 90, Without: 100, WithFits: true, WithoutFits: true},
	}
	for i := range cells {
		if cells[i].WithFits && cells[i].WithoutFits {
			cells[i].GainFrac = cells[i].With/cells[i].Without - 1
		}
	}
	sw := &EntrySweep{Cells: cells, MinContextByBatch: map[int]int{}}
	summarizeSweep(sw, 0.05)
	// KV tokens: 1x65536 = 65,536 < 64x1024 = 65,536? equal: the smaller
	// batch wins the tie.
	if sw.PaysFrom == nil || sw.PaysFrom.Batch != 1 || sw.PaysFrom.Context != 65536 {
		t.Errorf("pays from %+v, want batch 1 x 65536", sw.PaysFrom)
	}
	if sw.HurtsFrom == nil || sw.HurtsFrom.Batch != 8 {
		t.Errorf("hurts from %+v, want batch 8 x 1024", sw.HurtsFrom)
	}
	if sw.FitsFrom == nil || sw.FitsFrom.Batch != 64 || sw.FitsFrom.Context != 65536 {
		t.Errorf("fits from %+v, want batch 64 x 65536", sw.FitsFrom)
	}
	if sw.MaxGain == nil || math.Abs(sw.MaxGain.GainFrac-0.10) > 1e-12 {
		t.Errorf("max gain %+v, want 0.10", sw.MaxGain)
	}
	want := map[int]int{1: 65536, 64: 1024, 8: 0}
	for b, c := range want {
		if sw.MinContextByBatch[b] != c {
			t.Errorf("min context at batch %d: %d, want %d", b, sw.MinContextByBatch[b], c)
		}
	}
}

// TestAdviseMTP: GLM-5 ships one MTP layer. With one speculative token and
// acceptance a a step yields 1 + a tokens per sequence; the draft pass
// adds its embedding all-reduce, one decoder layer's two all-reduces and
// the logits all-gather of its shared head: 4 collectives.
func TestAdviseMTP(t *testing.T) {
	c := seedConfig(t)
	c.Arch = mustPreset(t, "glm-5-nvfp4")
	const accept = 0.7
	var mtp []Entry
	for _, e := range Catalog(CatalogOptions{MTPAcceptFrac: accept}) {
		if e.Name == "mtp" {
			mtp = append(mtp, e)
		}
	}
	adv, err := Advise(Input{Base: c, Entries: mtp, NoSweep: true})
	if err != nil {
		t.Fatal(err)
	}
	r := rowByEntry(t, adv, "mtp")
	if r.Error != "" || r.Applicability.Status != Applies {
		t.Fatalf("mtp on GLM-5: %s %s %s", r.Applicability.Status, r.Applicability.Reason, r.Error)
	}
	if got := r.With.Footprint.TokensPerStep; math.Abs(got-(1+accept)) > 1e-12 {
		t.Errorf("tokens per step %.3f, want 1 + %.2f", got, accept)
	}
	if r.Change.Collectives != 4 {
		t.Errorf("collectives change %d, want +4", r.Change.Collectives)
	}
	// Speedup is per token: tokens/s with over without.
	want := (1 + accept) / r.With.StepUs * r.Without.StepUs
	if math.Abs(r.Gain.Speedup()-want) > 1e-9*want {
		t.Errorf("speedup %.4f, want %.4f from the step times", r.Gain.Speedup(), want)
	}
}

// TestWorthBuilding: "worth building next" lists the predicted software
// entries not in the baseline and not refused whose gain reaches the
// threshold, best first; an entry whose applicability is an upper bound
// goes to the upper bounds instead, whatever its gain; one whose step
// does not fit in GPU memory where the baseline's does goes to the
// no-fit list (an MTP row short by 0.1 GB had been named worth building
// at a load predict refuses with it).
func TestWorthBuilding(t *testing.T) {
	fits := &Variant{Footprint: Footprint{Fits: true}}
	row := func(name string, pct float64, a Applicability) Row {
		return Row{Entry: name, Kind: "collective", Applicability: a, Gain: Gain{TokensPerSPct: pct}, With: fits, Without: fits}
	}
	applies := Applicability{Status: Applies}
	cond := Applicability{Status: Conditional, Needs: "a kernel"}
	upper := Applicability{Status: Conditional, Needs: "a kernel", UpperBound: true, Caution: "measured slower"}
	inBase := row("in-base", 30, applies)
	inBase.InBaseline = true
	failed := row("failed", 30, applies)
	failed.Error = "cannot apply"
	box := row("box-x", 40, cond)
	box.Kind = "box"
	noFit := row("mtp", 50, applies)
	noFit.With = &Variant{Footprint: Footprint{ShortfallGB: 0.1}}
	bothShort := row("fp8-kv", 20, applies)
	bothShort.With, bothShort.Without = &Variant{Footprint: Footprint{ShortfallGB: 1}}, &Variant{Footprint: Footprint{ShortfallGB: 2}}
	for _, tc := range []struct {
		name        string
		rows        []Row
		sure, upper []string
	}{
		{"upper bound kept apart", []Row{row("oneshot", 15.7, upper), row("fusion", 3.5, cond)}, nil, []string{"oneshot"}},
		{"sure first, then upper", []Row{row("oneshot", 20, upper), row("fusion", 8, cond), row("ep", 6, applies)}, []string{"fusion", "ep"}, []string{"oneshot"}},
		{"below threshold, refused, in baseline, failed, box", []Row{inBase, failed, box, row("no", 50, Applicability{Status: NotApplicable}), row("small", 4.9, applies), row("small-upper", 4.9, upper)}, nil, nil},
		{"at the threshold", []Row{row("edge", 5, applies)}, []string{"edge"}, nil},
		// The no-fit row is left out; a row as short as the baseline (no
		// load fits either) stays, the baseline's warning saying so.
		{"no fit where the baseline fits", []Row{noFit, bothShort, row("ep", 6, applies)}, []string{"fp8-kv", "ep"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sure, up, nf := worthBuilding(tc.rows, 0.05)
			if want := tc.name == "no fit where the baseline fits"; want != (len(nf) == 1 && nf[0].Entry == "mtp" && nf[0].ShortfallGB == 0.1) {
				t.Errorf("no fit %+v", nf)
			}
			names := func(ps []Pick) []string {
				var out []string
				for _, p := range ps {
					out = append(out, p.Entry)
				}
				return out
			}
			if got := names(sure); !slices.Equal(got, tc.sure) {
				t.Errorf("worth building %v, want %v", got, tc.sure)
			}
			if got := names(up); !slices.Equal(got, tc.upper) {
				t.Errorf("upper bounds %v, want %v", got, tc.upper)
			}
			for _, p := range up {
				if !p.Applicability.UpperBound || p.Applicability.Caution == "" {
					t.Errorf("%s: upper bound without its caution: %+v", p.Entry, p.Applicability)
				}
			}
		})
	}
}

// TestAdviseOneShotUpperBound: on the seed's dual-socket box the one-shot
// all-reduce gains the threshold (it removes most of the 124 collectives'
// NCCL latency) but is only an upper bound there, so advise does not name
// it worth building and carries its caution; on the one-CPU switch box
// the same entry is worth building, qualified by what it needs.
func TestAdviseOneShotUpperBound(t *testing.T) {
	seed := seedConfig(t)
	sw := seed
	sw.Topo = mustTopo(t, "rtxpro6000-switch")
	for _, tc := range []struct {
		name      string
		base      sim.Scenario
		wantUpper bool
	}{{"rtxpro6000-2s", seed, true}, {"rtxpro6000-switch", sw, false}} {
		t.Run(tc.name, func(t *testing.T) {
			adv, err := Advise(Input{Base: tc.base, Entries: []Entry{entryByName(t, "oneshot-ar")}, NoSweep: true})
			if err != nil {
				t.Fatal(err)
			}
			if r := rowByEntry(t, adv, "oneshot-ar"); r.Gain.TokensPerSPct < 5 {
				t.Fatalf("oneshot-ar gains %.1f %%: the test needs a gain above the 5 %% threshold", r.Gain.TokensPerSPct)
			}
			list, other := adv.WorthBuilding, adv.UpperBounds
			if tc.wantUpper {
				list, other = other, list
			}
			if len(list) != 1 || list[0].Entry != "oneshot-ar" || len(other) != 0 {
				t.Fatalf("worth building %+v, upper bounds %+v", adv.WorthBuilding, adv.UpperBounds)
			}
			if a := list[0].Applicability; a.UpperBound != tc.wantUpper || a.Needs == "" {
				t.Errorf("applicability %+v: want upper bound %v and what it needs", a, tc.wantUpper)
			}
		})
	}
}

// TestAdviseDoesNotPriceWhatCannotRun: a row the engine cannot run is not
// priced (no step, no sweep, no break-even, never worth building), its
// reason saying why. By the engine profiles: TensorRT-LLM 1.3 speculates
// only with MTP (no ngram, no suffix) and has no MLA attention backend on
// SM120 (the RTX PRO 6000 boxes), where vLLM runs TRITON_MLA; MTP runs.
func TestAdviseDoesNotPriceWhatCannotRun(t *testing.T) {
	base := func(engine string) sim.Scenario {
		ref, err := engprof.ParseRef(engine)
		if err != nil {
			t.Fatal(err)
		}
		return sim.Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Batch: 1, Context: 4096, KVDtype: model.BF16},
			Options:  sim.Options{CUDAGraphs: true, Engine: ref}, Topo: mustTopo(t, "h200-nvswitch")}
	}
	adv, err := Advise(Input{Base: base("trtllm"), Batches: []int{1, 8}, Contexts: []int{4096}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ entry, reason string }{
		{"spec-ngram", "has no speculative method ngram"},
		{"spec-suffix", "has no speculative method suffix"},
		{"box-rtxpro6000-switch", "has no MLA attention backend on sm120"},
	} {
		r := rowByEntry(t, adv, tc.entry)
		if r.Applicability.Status != NotApplicable || !strings.Contains(r.Applicability.Reason, tc.reason) {
			t.Errorf("%s: %s: %q; want no, with %q", tc.entry, r.Applicability.Status, r.Applicability.Reason, tc.reason)
		}
		if r.Error == "" || r.With != nil || r.Without != nil || r.Sweep != nil || r.Spec != nil || r.Gain != (Gain{}) {
			t.Errorf("%s priced: error %q, with %v, sweep %v, spec %v, gain %+v", tc.entry, r.Error, r.With, r.Sweep, r.Spec, r.Gain)
		}
		for _, p := range slices.Concat(adv.WorthBuilding, adv.UpperBounds) {
			if p.Entry == tc.entry {
				t.Errorf("%s is worth building", tc.entry)
			}
		}
	}
	if r := rowByEntry(t, adv, "mtp"); r.Error != "" || r.With == nil || r.Sweep == nil || r.Spec == nil {
		t.Errorf("mtp under trtllm not priced: %q", r.Error)
	}
	vllm, err := Advise(Input{Base: base("vllm"), NoSweep: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := rowByEntry(t, vllm, "box-rtxpro6000-switch"); r.Applicability.Status == NotApplicable || r.Error != "" || r.With == nil {
		t.Errorf("box-rtxpro6000-switch under vllm: %s %q, error %q; want it priced", r.Applicability.Status, r.Applicability.Reason, r.Error)
	}
}

// TestAdviseSpeaksForItsEngine: under another engine than vLLM, no reason
// or how line states a vLLM fact. TensorRT-LLM 1.3's profile captures
// decode graphs up to 128 tokens (1, 2, 4, then 8..128 step 8) and runs its
// custom all-reduce one-shot below 256 KB on NVLink; SGLang's spec flag is
// its profile's --speculative-algorithm. A predict line names the engine,
// and a box row names the engine's kernels on that box.
func TestAdviseSpeaksForItsEngine(t *testing.T) {
	for _, eng := range []string{"trtllm", "sglang"} {
		ref, err := engprof.ParseRef(eng)
		if err != nil {
			t.Fatal(err)
		}
		base := sim.Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{Batch: 1, Context: 4096, KVDtype: model.BF16},
			Options:  sim.Options{CUDAGraphs: true, Engine: ref}, Topo: mustTopo(t, "h200-nvswitch")}
		adv, err := Advise(Input{Base: base, NoSweep: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range adv.Rows {
			// A cited measurement may come from vLLM's tracker ("vLLM PR
			// #24344"); a fact about the engine may not.
			reason := strings.ReplaceAll(r.Applicability.Reason, "vLLM PR", "")
			if h := r.How.String(); strings.Contains(h, "vLLM") || strings.Contains(reason, "vLLM") {
				t.Errorf("%s %s: reason %q, how %q: states vLLM", eng, r.Entry, r.Applicability.Reason, h)
			}
			if h := r.How.String(); strings.Contains(h, "tpscope predict") && !strings.Contains(h, "predict --engine "+eng) {
				t.Errorf("%s %s: how %q does not name the engine", eng, r.Entry, h)
			}
		}
		if eng == "trtllm" {
			if r := rowByEntry(t, adv, "cuda-graphs"); !strings.Contains(r.Applicability.Reason, "up to 128 tokens") {
				t.Errorf("trtllm cuda-graphs: %q, want its capture limit of 128", r.Applicability.Reason)
			}
			if r := rowByEntry(t, adv, "oneshot-ar"); !strings.Contains(r.Applicability.Reason, "trtllm@1.3's custom all-reduce already runs one-shot where its AUTO table picks it here (its profile: one-shot up to 127 tokens, NCCL (norm apart) from 128 tokens)") {
				t.Errorf("trtllm oneshot-ar: %q", r.Applicability.Reason)
			}
			// TensorRT-LLM fuses the all-reduce with the RMSNorm by default
			// on SM90 (its profile's fusions).
			if r := rowByEntry(t, adv, "ar-norm-fusion"); r.Applicability.Status != Applies || !strings.Contains(r.Applicability.Reason, "trtllm@1.3 fuses each all-reduce its custom kernel carries with the RMSNorm after it by default") {
				t.Errorf("trtllm ar-norm-fusion: %s %q", r.Applicability.Status, r.Applicability.Reason)
			}
			if h := rowByEntry(t, adv, "dp-attn-ep").How.String(); strings.Contains(h, "--tensor-parallel-size") || !strings.Contains(h, "in trtllm@1.3") {
				t.Errorf("trtllm dp-attn-ep how %q: want the setting named in trtllm, no vLLM flag", h)
			}
		} else {
			if h := rowByEntry(t, adv, "mtp").How.String(); !strings.HasPrefix(h, "sglang@0.5 --speculative-algorithm NEXTN") {
				t.Errorf("sglang mtp how %q", h)
			}
			r := rowByEntry(t, adv, "box-rtxpro6000-switch")
			if r.With == nil || !strings.Contains(r.Applicability.Reason, "engine there: sglang@0.5, attention triton") {
				t.Errorf("sglang box row: %q, want the engine's backends on that box", r.Applicability.Reason)
			}
		}
	}
}

// TestFootprintKVCapacityAcrossDPGroups: under DP attention each DP group
// caches its own requests, so the deployment's KV capacity is one group's
// pool times the groups; advise's KV cap column compares that, so a DP
// plan and a TP plan of the same 8 GPUs compare (DeepSeek-V3 on H200:
// TP 1 x DP 8 caches 8 x its group's tokens).
func TestFootprintKVCapacityAcrossDPGroups(t *testing.T) {
	c := seedConfig(t)
	c.Topo = mustTopo(t, "h200-nvswitch")
	c.Arch = mustPreset(t, "deepseek-v3")
	c.Workload.KVDtype = "fp8"
	c.Plan = model.Plan{TP: 1, DP: 8, EP: true}
	pr, _, err := sim.Predict(c)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Memory == nil || pr.Memory.KVCapacityTokens <= 0 {
		t.Fatalf("no KV capacity predicted: %+v", pr.Memory)
	}
	if got, want := FootprintOf(pr).KVCapacityToks, 8*pr.Memory.KVCapacityTokens; got != want {
		t.Errorf("footprint KV capacity %d tokens, want 8 DP groups x %d = %d", got, pr.Memory.KVCapacityTokens, want)
	}
}

// TestARNormFusionRowUnderTRTLLM: TensorRT-LLM fuses each all-reduce its
// custom kernel carries with the RMSNorm after it by default, and
// TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1 turns that off (its profile):
// the ar-norm-fusion row is in the baseline, priced against the baseline
// with the fusion off (one norm kernel back after every fused
// all-reduce, the step longer), and says the switch; it was an "added"
// row at x1.000 that changed nothing.
func TestARNormFusionRowUnderTRTLLM(t *testing.T) {
	c := seedConfig(t)
	c.Topo = mustTopo(t, "h200-nvswitch")
	c.Arch = mustPreset(t, "deepseek-v3")
	c.Options.Engine, _ = engprof.ParseRef("trtllm@1.3")
	adv, err := Advise(Input{Base: c, Entries: []Entry{entryByName(t, "ar-norm-fusion")}, NoSweep: true})
	if err != nil {
		t.Fatal(err)
	}
	r := rowByEntry(t, adv, "ar-norm-fusion")
	if r.Error != "" || !r.InBaseline {
		t.Fatalf("in baseline %v, error %q: want in the baseline, priced", r.InBaseline, r.Error)
	}
	// The norms fused by default: every RMSNorm right after a TP
	// all-reduce, 2 a layer and the first layer's input norm after the
	// embedding's all-reduce (the 2 x 61 + 1 all-reduces of
	// TestAdviseSeed).
	want := 2*c.Arch.Layers + 1
	if got := -r.Change.Kernels; got != want {
		t.Errorf("kernels %+d with the fusion, want -%d (one norm after each all-reduce)", r.Change.Kernels, want)
	}
	if r.Gain.Speedup() <= 1 {
		t.Errorf("speedup x%.3f, want above 1: the fused norms cost nothing", r.Gain.Speedup())
	}
	if len(r.How.Engine) != 1 || !strings.Contains(r.How.Engine[0], "TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1 turns it off") {
		t.Errorf("how %+v: want the engine's default and its switch", r.How)
	}
}
