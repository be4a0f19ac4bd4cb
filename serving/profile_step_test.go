package serving

import (
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// profileActivationBytes is the activation peak of vLLM's profiling run
// (gpu_model_runner.py profile_run: _dummy_run(max_num_batched_tokens),
// then _dummy_sampler_run over min(tokens, max_num_seqs) rows), derived
// here from the model's dims at TP 1, in bf16 with fp32 logits: per
// token the hidden state, residual and norm output (3 x hidden), the
// query/key/value of the heads (heads x (2 x qk_head_dim + v_head_dim)),
// the dense MLP's gate_up output (2 x the larger of the dense and shared
// intermediates), and the routed experts' top_k copies of the input and
// their gate_up output (top_k x (hidden + 2 x moe_intermediate)); per
// sampled row vocab fp32 logits.
func profileActivationBytes(a *model.Arch, tokens, seqs int) float64 {
	mlp := max(a.Intermediate, a.SharedExperts*a.MoEIntermediate)
	perToken := 3*a.Hidden + a.Heads*(2*(a.QKNopeHeadDim+a.QKRopeHeadDim)+a.VHeadDim) + 2*mlp +
		a.TopK*(a.Hidden+2*a.MoEIntermediate)
	return float64(tokens)*float64(perToken)*2 + float64(min(tokens, seqs))*float64(a.Vocab)*4
}

// tinyVLLM is tiny-mla-moe at TP 1 under vLLM on box.
func tinyVLLM(t *testing.T, box string, tokens, seqs int) Deployment {
	return Deployment{Scenario: sim.Scenario{Arch: mustPreset(t, "tiny-mla-moe"), Plan: model.Plan{TP: 1},
		Topo: mustBox(t, box), Options: sim.Options{CUDAGraphs: true}},
		Engine: EngineOptions{MaxNumBatchedTokens: tokens, MaxNumSeqs: seqs}}
}

// wantBlocks is vLLM's pool under gpu_memory_utilization for simulator s
// with an activation peak of act bytes: frac x memory - weights - act, in
// whole tokens, in whole blocks. The weights and the bytes per token come
// from the model's own capacity arithmetic (not what is tested here).
func wantBlocks(s *Simulator, d Deployment, act float64) int {
	sc := d.Scenario
	mem := float64(sc.Topo.DeviceOf(0).MemBytes)
	c := model.KVCapacity(sc.Arch, sc.Plan, model.Workload{}, sc.Build, mem, s.KVBudget().Frac)
	return int(int64((s.KVBudget().Frac*mem-c.WeightBytes-act)/c.KVBytesPerToken) / int64(s.engine.BlockSize))
}

// TestVLLMProfileStepSizesPool: vLLM's pool is what its profiling step
// leaves, and that step is the scheduler's max_num_batched_tokens and
// max_num_seqs. tiny-mla-moe at TP 1: 3 x 256 + 8 x (2 x 48 + 32) + 2 x
// 512 + 4 x (256 + 2 x 128) = 4864 bf16 values a token, 9728 B; a
// sampled row is 1024 x 4 B of logits. At 2048 tokens rather than 8192
// (max_num_seqs 1024 both, so 1024 sampled rows both) the pool is larger
// by exactly 6144 x 9728 B = 59,768,832 B, the terms that scale with the
// tokens.
func TestVLLMProfileStepSizesPool(t *testing.T) {
	a := mustPreset(t, "tiny-mla-moe")
	if got := profileActivationBytes(a, 1, 0); got != 9728 {
		t.Fatalf("tiny-mla-moe activations a token: %v B, want 9728 (the dims above)", got)
	}
	blocks, blockTokens := map[int]int{}, 0
	for _, tokens := range []int{2048, 8192} {
		d := tinyVLLM(t, "nvswitch:8xh200", tokens, 1024)
		s := mustNew(t, d)
		b := s.KVBudget()
		if b.ProfileTokens != tokens || b.ProfileSeqs != 1024 {
			t.Errorf("--max-num-batched-tokens %d: profiling step %d tokens, %d seqs, want %d, 1024", tokens, b.ProfileTokens, b.ProfileSeqs, tokens)
		}
		if want := wantBlocks(s, d, profileActivationBytes(a, tokens, 1024)); s.KVBlocks() != want {
			t.Errorf("--max-num-batched-tokens %d: %d KV blocks, want %d", tokens, s.KVBlocks(), want)
		}
		blocks[tokens] = s.KVBlocks() * s.engine.BlockSize
		blockTokens = s.engine.BlockSize
	}
	d := tinyVLLM(t, "nvswitch:8xh200", 0, 0)
	c := model.KVCapacity(a, d.Scenario.Plan, model.Workload{}, d.Scenario.Build, float64(d.Scenario.Topo.DeviceOf(0).MemBytes), 0.9)
	const diff = 6144 * 9728
	if got := float64(blocks[2048]-blocks[8192]) * c.KVBytesPerToken; math.Abs(got-diff) > float64(2*blockTokens)*c.KVBytesPerToken {
		t.Errorf("pool at 2048 tokens less the pool at 8192: %.0f B, want %d B (within the blocks' rounding)", got, diff)
	}
}

// TestVLLMProfileStepDefaults: with no scheduler limits vLLM profiles its
// serve defaults for the GPU (EngineArgs.get_batch_defaults): 2048 tokens
// and 256 seqs on an L40S (48 GB, under 70 GiB), 8192 and 1024 on an
// H200. simulate's pool and predict's activations agree on them.
func TestVLLMProfileStepDefaults(t *testing.T) {
	a := mustPreset(t, "tiny-mla-moe")
	for _, c := range []struct {
		box          string
		tokens, seqs int
	}{{"pcie-switch:8xl40s", 2048, 256}, {"nvswitch:8xh200", 8192, 1024}} {
		d := tinyVLLM(t, c.box, 0, 0)
		s := mustNew(t, d)
		act := profileActivationBytes(a, c.tokens, c.seqs)
		if s.engine.MaxNumBatchedTokens != c.tokens || s.engine.MaxNumSeqs != c.seqs {
			t.Errorf("%s: scheduler %d tokens, %d seqs, want %d, %d", c.box, s.engine.MaxNumBatchedTokens, s.engine.MaxNumSeqs, c.tokens, c.seqs)
		}
		if want := wantBlocks(s, d, act); s.KVBlocks() != want {
			t.Errorf("%s simulate: %d KV blocks, want %d (activations %.0f B)", c.box, s.KVBlocks(), want, act)
		}
		p, err := sim.New(d.Scenario.Topo, d.Scenario.Options)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(sim.Scenario{Arch: a, Plan: d.Scenario.Plan,
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 1024}})
		if err != nil {
			t.Fatal(err)
		}
		if got := float64(pr.Memory.ActivationBytes); math.Abs(got-act) > 1 {
			t.Errorf("%s predict: activations %.0f B, want %.0f", c.box, got, act)
		}
	}
}

// TestProfileStepFromOptions: the scheduler limits a scenario's options
// give (--max-num-batched-tokens, --max-num-seqs on predict, plan,
// advise, model show and simulate alike) are vLLM's profiling step:
// predict's activations are the step's (profileActivationBytes at 2048
// tokens and 32 sampled rows on an H200, where the defaults are 8192 and
// 1024), simulate's pool is sized at the same step, and both say the
// figures were given; unset, the step is the profile's defaults and says
// so. A model served at 4096 tokens with one request a step profiles
// min(1 x 4096, 8192) = 4096 tokens, as vLLM fills an unset budget.
func TestProfileStepFromOptions(t *testing.T) {
	a := mustPreset(t, "tiny-mla-moe")
	short := mustPreset(t, "tiny-mla-moe")
	short.MaxModelLenTokens = 4096
	for _, c := range []struct {
		name                 string
		arch                 *model.Arch
		given                sim.Options
		tokens, seqs         int
		tokensFrom, seqsFrom string
	}{
		{"given", a, sim.Options{MaxNumBatchedTokens: 2048, MaxNumSeqs: 32}, 2048, 32, "given", "given"},
		{"defaults", a, sim.Options{}, 8192, 1024, "vllm@0.24's default", "vllm@0.24's default"},
		{"one request of 4096 tokens", short, sim.Options{MaxNumSeqs: 1}, 4096, 1, "vllm@0.24's default", "given"},
	} {
		d := tinyVLLM(t, "nvswitch:8xh200", 0, 0)
		d.Scenario.Arch = c.arch
		d.Scenario.Options.MaxNumBatchedTokens, d.Scenario.Options.MaxNumSeqs = c.given.MaxNumBatchedTokens, c.given.MaxNumSeqs
		// simulate takes the options' limits as its scheduler's.
		d.Engine.MaxNumBatchedTokens, d.Engine.MaxNumSeqs = c.given.MaxNumBatchedTokens, c.given.MaxNumSeqs
		act := profileActivationBytes(c.arch, c.tokens, c.seqs)
		p, err := sim.New(d.Scenario.Topo, d.Scenario.Options)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(sim.Scenario{Arch: c.arch, Plan: d.Scenario.Plan,
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 1024}})
		if err != nil {
			t.Fatal(err)
		}
		b := pr.Memory.Budget
		if got := float64(pr.Memory.ActivationBytes); math.Abs(got-act) > 1 {
			t.Errorf("%s predict: activations %.0f B, want %.0f (%d tokens, %d rows)", c.name, got, act, c.tokens, min(c.tokens, c.seqs))
		}
		if b.ProfileTokens != c.tokens || b.ProfileSeqs != c.seqs || b.ProfileTokensFrom != c.tokensFrom || b.ProfileSeqsFrom != c.seqsFrom {
			t.Errorf("%s predict: profiling step %d tokens (%s), %d seqs (%s); want %d (%s), %d (%s)", c.name,
				b.ProfileTokens, b.ProfileTokensFrom, b.ProfileSeqs, b.ProfileSeqsFrom, c.tokens, c.tokensFrom, c.seqs, c.seqsFrom)
		}
		s := mustNew(t, d)
		if got := s.KVBudget(); got.ProfileTokens != c.tokens || got.ProfileSeqs != c.seqs || got.ProfileTokensFrom != c.tokensFrom || got.ProfileSeqsFrom != c.seqsFrom {
			t.Errorf("%s simulate: profiling step %d tokens (%s), %d seqs (%s); want %d (%s), %d (%s)", c.name,
				got.ProfileTokens, got.ProfileTokensFrom, got.ProfileSeqs, got.ProfileSeqsFrom, c.tokens, c.tokensFrom, c.seqs, c.seqsFrom)
		}
		if want := wantBlocks(s, d, act); s.KVBlocks() != want {
			t.Errorf("%s simulate: %d KV blocks, want %d", c.name, s.KVBlocks(), want)
		}
	}
}
