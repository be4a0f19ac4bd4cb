package model

import (
	"fmt"
	"strings"
	"testing"
)

// vocabSchedules builds steps that together lay every role of the
// tables: DeepSeek-V3 (FP8 block-scaled Linears, MTP) in decode, prefill
// and under DCP and DP attention with sequence-parallel MoE; GLM-5 with
// its DSA indexer, with FP8 block-scaled indexer Linears too; Kimi with
// TP 1 (no collectives); and engine iterations with a cached prefix.
func vocabSchedules(t *testing.T) map[string]*Schedule {
	t.Helper()
	ds, glm, kimi := mustPreset(t, "deepseek-v3"), mustPreset(t, "glm-5"), mustPreset(t, "kimi-k2.5-nvfp4")
	glmFP8 := *glm
	glmFP8.Quant.Indexer = FP8Block128
	out := map[string]*Schedule{}
	add := func(name string, s *Schedule, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = s
	}
	s, err := BuildWith(ds, Plan{TP: 8}, Workload{Batch: 3, Context: 300, SpecTokens: 2}, BuildOptions{})
	add("deepseek tp8 decode mtp2", s, err)
	s, err = BuildWith(ds, Plan{TP: 8}, Workload{Phase: Prefill, Batch: 2, Context: 300, SpecTokens: 1}, BuildOptions{})
	add("deepseek tp8 prefill mtp1", s, err)
	s, err = BuildWith(ds, Plan{TP: 8, DCP: 4}, Workload{Batch: 3, Context: 300}, BuildOptions{})
	add("deepseek tp8 dcp4", s, err)
	s, err = BuildWith(ds, Plan{TP: 2, DP: 4, EP: true}, Workload{Batch: 9, Context: 300}, BuildOptions{})
	add("deepseek tp2 dp4 ep", s, err)
	s, err = BuildWith(&glmFP8, Plan{TP: 8}, Workload{Batch: 2, Context: 5000, SpecTokens: 1}, BuildOptions{})
	add("glm-5 fp8 indexer tp8", s, err)
	s, err = BuildWith(kimi, Plan{TP: 1}, Workload{Batch: 1, Context: 100}, BuildOptions{})
	add("kimi tp1", s, err)
	var it Iteration
	it.AddDecode(1000)
	it.AddChunk(300, 200)
	s, err = BuildIteration(ds, Plan{TP: 8}, it, BuildOptions{})
	add("deepseek iteration with prefix", s, err)
	s, err = BuildIteration(glm, Plan{TP: 8}, it, BuildOptions{})
	add("glm-5 iteration", s, err)
	head, err := ResolveDrafter("kimi-k2.5-eagle3-mla")
	if err != nil {
		t.Fatal(err)
	}
	s, err = BuildWith(kimi, Plan{TP: 8}, Workload{Batch: 2, Context: 300, SpecTokens: 3},
		BuildOptions{Spec: Spec{Method: SpecEagle3, Draft: head.Ref, Drafter: head}})
	add("kimi tp8 eagle3", s, err)
	moon, err := ResolveDrafter("moonlight-16b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	s, err = BuildWith(kimi, Plan{TP: 8}, Workload{Batch: 2, Context: 300, SpecTokens: 2},
		BuildOptions{Spec: Spec{Method: SpecDraftModel, Draft: moon.Ref, Drafter: moon, DraftTP: 2}})
	add("kimi tp8 draft tp2", s, err)
	return out
}

// TestOpsCarryTheirRoles: every op's role is a table's, and its ID, name,
// block and kind follow from it; the schedules lay every role at least
// once.
func TestOpsCarryTheirRoles(t *testing.T) {
	laid := map[Role]bool{}
	for name, s := range vocabSchedules(t) {
		for _, op := range s.Ranks[0] {
			r := op.Role
			if r.Kind() == "" {
				t.Fatalf("%s: op %s has role %q, not a table's", name, op.ID, r)
			}
			laid[r] = true
			prefix := strings.TrimSuffix(op.ID, string(r))
			wantBlock := r.Block()
			for _, pass := range []string{"mtp", "eagle", "draft"} {
				if strings.HasPrefix(op.ID, pass+".s") {
					wantBlock = pass
				}
			}
			if prefix == op.ID || op.Name != r.Name() || op.Block != wantBlock || op.Kind != r.Kind() {
				t.Errorf("%s: op %s (name %q, block %q, kind %s) does not follow its role %s (name %q, block %q, kind %s)",
					name, op.ID, op.Name, op.Block, op.Kind, r, r.Name(), wantBlock, r.Kind())
			}
		}
	}
	for _, r := range Roles() {
		if !laid[r] {
			t.Errorf("role %s is in no schedule", r)
		}
	}
}

// TestRoleRelations: the quantization op of each FP8 block-scaled Linear
// and back, and the modules roles belong to, as the builder's doc lists
// them.
func TestRoleRelations(t *testing.T) {
	quant := []struct{ linear, quant Role }{
		{RoleFusedQKVAProj, RoleFusedQKVAProjQuant}, {RoleQBProj, RoleQBProjQuant}, {RoleKVBProj, RoleKVBProjQuant},
		{RolePrefillCtxKVBProj, RolePrefillCtxKVBProjQuant}, {RoleOProj, RoleOProjQuant},
		{RoleIndexerWQB, RoleIndexerWQBQuant}, {RoleIndexerWK, RoleIndexerWKQuant},
		{RoleMLPGateUp, RoleMLPGateUpQuant}, {RoleMLPDown, RoleMLPDownQuant},
		{RoleSharedGateUp, RoleSharedGateUpQuant}, {RoleSharedDown, RoleSharedDownQuant},
	}
	for _, q := range quant {
		if q.linear.ActQuant() != q.quant || q.quant.Quantizes() != q.linear || string(q.quant) != string(q.linear)+actQuantSuffix {
			t.Errorf("%s: ActQuant %q, %s quantizes %q", q.linear, q.linear.ActQuant(), q.quant, q.quant.Quantizes())
		}
	}
	if RoleWUK.ActQuant() != "" || RoleMoEGate.ActQuant() != "" || RoleLMHead.ActQuant() != "" {
		t.Error("a GEMM vLLM runs without input quantization has a quantization role")
	}
	modules := []struct {
		r Role
		m ModuleKind
	}{
		{RoleEmbedLookup, ModEmbedding}, {RoleInputNorm, ModAttention}, {RoleMLADecode, ModAttention},
		{RoleIndexerWQBQuant, ModIndexer}, {RoleIndexerScore, ModIndexer}, {RoleMoEGate, ModMoE}, {RoleMoEDispatch, ModMoE},
		{RoleExpertsAct, ModRoutedExperts}, {RoleSharedGateUpQuant, ModSharedExperts}, {RoleMLPAct, ModDenseMLP},
		{RoleLogitsAllGather, ModLMHead}, {RoleMTPEHProj, ModMTP},
	}
	for _, c := range modules {
		if c.r.Module() != c.m {
			t.Errorf("%s: module %q, want %q", c.r, c.r.Module(), c.m)
		}
	}
	for _, r := range []Role{RoleEmbedAllReduce, RoleFinalNorm, RoleSharedHeadNorm, RoleLMHead} {
		if r.OfLayer() {
			t.Errorf("%s: of a layer, want outside the layers", r)
		}
	}
	if !RoleMTPENorm.OfLayer() || !RoleAttnAllReduce.OfLayer() {
		t.Error("a layer's role reported outside the layers")
	}
}

// TestModules: a schedule's modules, counted from the architecture
// (Kimi-K2.5: 61 layers, the first dense, shared experts; DeepSeek-V3 with
// 2 speculative tokens: 2 MTP passes over its one MTP layer, 61), and
// each one's ops: contiguous, of its layer and pass, with roles of its
// kind (a block's table, or the sub-module its slots name).
func TestModules(t *testing.T) {
	cases := []struct {
		name   string
		preset string
		plan   Plan
		w      Workload
		want   map[ModuleKind]int
	}{
		// embedding, 61 layers of an MLA block each, 1 dense MLP, 60 MoE
		// blocks with routed and shared experts, the head.
		{"kimi tp8", "kimi-k2.5-nvfp4", Plan{TP: 8}, Workload{Batch: 4, Context: 100},
			map[ModuleKind]int{ModEmbedding: 1, ModDecoderLayer: 61, ModAttention: 61, ModDenseMLP: 1, ModMoE: 60,
				ModRoutedExperts: 60, ModSharedExperts: 60, ModLMHead: 1}},
		// 3 dense layers; two draft passes of one MoE layer each with
		// their embedding and head.
		{"deepseek mtp2", "deepseek-v3", Plan{TP: 8}, Workload{Batch: 2, Context: 100, SpecTokens: 2},
			map[ModuleKind]int{ModEmbedding: 3, ModDecoderLayer: 63, ModAttention: 63, ModDenseMLP: 3, ModMoE: 60,
				ModRoutedExperts: 60, ModSharedExperts: 60, ModLMHead: 3, ModMTP: 2, ModSpecVerify: 1}},
		// 78 layers with an indexer each.
		{"glm-5 tp8", "glm-5", Plan{TP: 8}, Workload{Batch: 1, Context: 4096},
			map[ModuleKind]int{ModEmbedding: 1, ModDecoderLayer: 78, ModAttention: 78, ModIndexer: 78, ModDenseMLP: 3,
				ModMoE: 75, ModRoutedExperts: 75, ModSharedExperts: 75, ModLMHead: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustBuild(t, mustPreset(t, c.preset), c.plan, c.w, BuildOptions{})
			checkModules(t, s, c.want)
		})
	}
	for name, s := range vocabSchedules(t) {
		t.Run(name, func(t *testing.T) { checkModules(t, s, nil) })
	}
}

func checkModules(t *testing.T, s *Schedule, want map[ModuleKind]int) {
	t.Helper()
	ops := s.Ranks[0]
	got := map[ModuleKind]int{}
	prev := -1
	for _, m := range s.Modules {
		got[m.Kind]++
		if m.First < prev || m.First >= m.End || m.End > len(ops) {
			t.Fatalf("module %+v out of order or out of the %d ops", m, len(ops))
		}
		prev = m.First
		for i := m.First; i < m.End; i++ {
			op := &ops[i]
			passOf := ""
			for _, p := range []string{"mtp", "eagle", "draft"} {
				if strings.HasPrefix(op.ID, p+".s") {
					passOf = p
				}
			}
			in := (op.Layer == m.Layer || m.Kind == ModDraftPass) && (m.Pass < 0) == (passOf == "")
			if m.Pass >= 0 {
				in = in && strings.HasPrefix(op.ID, fmt.Sprintf("%s.s%d.", passOf, m.Pass))
			}
			switch m.Kind {
			case ModDecoderLayer, ModMTP, ModEagle3, ModDraftPass:
			case ModAttention, ModMoE:
				// A block holds its sub-modules' ops too.
				in = in && m.Kind.Table() != nil && hasRole(m.Kind.Table(), op.Role)
			default:
				in = in && (op.Role.Module() == m.Kind || hasRole(m.Kind.Table(), op.Role))
			}
			if !in {
				t.Fatalf("module %+v holds op %d %s", m, i, op.ID)
			}
		}
		if got, ok := s.Modules.At(m.First, m.Kind); !ok || got != m {
			t.Errorf("Modules.At(%d, %s) = %+v, %v; want %+v", m.First, m.Kind, got, ok, m)
		}
	}
	// Every op is in its role's module.
	for i := range ops {
		if _, ok := s.Modules.At(i, ops[i].Role.Module()); !ok {
			t.Errorf("op %d %s: in no %s module", i, ops[i].ID, ops[i].Role.Module())
		}
	}
	if want != nil {
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%d %s modules, want %d", got[k], k, n)
			}
		}
		for k, n := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%d unexpected %s modules", n, k)
			}
		}
	}
}

func hasRole(tbl []Slot, r Role) bool {
	for _, s := range tbl {
		if s.Role == r {
			return true
		}
	}
	return false
}

// TestOpsFollowTheTables: within each block, the ops come in their
// table's order.
func TestOpsFollowTheTables(t *testing.T) {
	for name, s := range vocabSchedules(t) {
		ops := s.Ranks[0]
		for _, m := range s.Modules {
			tbl := m.Kind.Table()
			if tbl == nil || m.Kind == ModMTP || m.Kind == ModEagle3 {
				continue
			}
			pos := -1
			for i := m.First; i < m.End; i++ {
				k := slotIndex(tbl, ops[i].Role)
				if k <= pos {
					t.Errorf("%s: module %s at op %d: %s after a later slot of the table", name, m.Kind, i, ops[i].ID)
				}
				pos = k
			}
		}
	}
}

func slotIndex(tbl []Slot, r Role) int {
	for i, s := range tbl {
		if s.Role == r {
			return i
		}
	}
	return -1
}

// TestNewDeployment: sequences and tokens per DP group, the padding and
// the graph decision, derived by hand against vLLM's capture sizes
// (1, 2, 4, 8, 16, ..., 512: multiples of 8 to 248, of 16 to 512).
func TestNewDeployment(t *testing.T) {
	vllm := &GraphCapture{Sizes: []int{1, 2, 4}}
	for b := 8; b <= 248; b += 8 {
		vllm.Sizes = append(vllm.Sizes, b)
	}
	for b := 256; b <= 512; b += 16 {
		vllm.Sizes = append(vllm.Sizes, b)
	}
	cases := []struct {
		name string
		plan Plan
		w    Workload
		g    *GraphCapture
		want Deployment
	}{
		// 13 tokens fit 16: 3 padding tokens, still 13 sequences.
		{"b13 graphed", Plan{TP: 8}, Workload{Batch: 13, Context: 100}, vllm,
			Deployment{Batch: 13, SeqsPerGroup: 13, TokensPerSeq: 1, TokensPerGroup: 16, PadTokens: 3, Graphed: true, GraphTokens: 16}},
		// 8 tokens are a captured size: no padding.
		{"b8 exact", Plan{TP: 8}, Workload{Batch: 8, Context: 100}, vllm,
			Deployment{Batch: 8, SeqsPerGroup: 8, TokensPerSeq: 1, TokensPerGroup: 8, Graphed: true, GraphTokens: 8}},
		// Without a capture every step is eager at its own batch.
		{"b13 eager", Plan{TP: 8}, Workload{Batch: 13, Context: 100}, nil,
			Deployment{Batch: 13, SeqsPerGroup: 13, TokensPerSeq: 1, TokensPerGroup: 13}},
		// 2 speculative tokens: 13 x 3 = 39 tokens fit 40, one padding
		// token (not 14 whole sequences of 42 tokens).
		{"b13 mtp2", Plan{TP: 8}, Workload{Batch: 13, Context: 100, SpecTokens: 2}, vllm,
			Deployment{Batch: 13, SeqsPerGroup: 13, TokensPerSeq: 3, TokensPerGroup: 40, PadTokens: 1, Graphed: true, GraphTokens: 40}},
		// DP 4: ceil(9/4) = 3 sequences per group, their 3 tokens on the
		// graph of 4.
		{"b9 dp4", Plan{TP: 2, DP: 4, EP: true}, Workload{Batch: 9, Context: 100}, vllm,
			Deployment{Batch: 9, SeqsPerGroup: 3, TokensPerSeq: 1, TokensPerGroup: 4, PadTokens: 1, Graphed: true, GraphTokens: 4}},
		// DP 8: 65 per group fit 72 (the whole batch exceeds 512 tokens,
		// no group does).
		{"b520 dp8", Plan{TP: 1, DP: 8, EP: true}, Workload{Batch: 520, Context: 100}, vllm,
			Deployment{Batch: 520, SeqsPerGroup: 65, TokensPerSeq: 1, TokensPerGroup: 72, PadTokens: 7, Graphed: true, GraphTokens: 72}},
		// Past the largest size: eager.
		{"b520 tp8", Plan{TP: 8}, Workload{Batch: 520, Context: 100}, vllm,
			Deployment{Batch: 520, SeqsPerGroup: 520, TokensPerSeq: 1, TokensPerGroup: 520}},
		// A prefill step replays a graph where its tokens fit one, as an
		// engine iteration with prefill tokens does (vLLM v1's piecewise
		// graphs): 3 prompts of 100 tokens on the graph of 304.
		{"prefill", Plan{TP: 8}, Workload{Phase: Prefill, Batch: 3, Context: 100}, vllm,
			Deployment{Batch: 3, SeqsPerGroup: 3, TokensPerSeq: 100, TokensPerGroup: 304, PadTokens: 4, Graphed: true, GraphTokens: 304}},
		// Under a capture of decode steps only (SGLang's) it runs eagerly.
		{"prefill decode-only", Plan{TP: 8}, Workload{Phase: Prefill, Batch: 3, Context: 100}, &GraphCapture{Sizes: vllm.Sizes, DecodeOnly: true},
			Deployment{Batch: 3, SeqsPerGroup: 3, TokensPerSeq: 100, TokensPerGroup: 300}},
		// Past the largest size: eager, as a decode step.
		{"prefill b6", Plan{TP: 8}, Workload{Phase: Prefill, Batch: 6, Context: 100}, vllm,
			Deployment{Batch: 6, SeqsPerGroup: 6, TokensPerSeq: 100, TokensPerGroup: 600}},
	}
	ds := mustPreset(t, "deepseek-v3") // with an MTP layer for the speculative tokens
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := NewDeployment(c.plan, c.w, c.g); got != c.want {
				t.Fatalf("NewDeployment = %+v\nwant            %+v", got, c.want)
			}
			s := mustBuild(t, ds, c.plan, c.w, BuildOptions{Graphs: c.g})
			if s.Deploy != c.want || s.Workload.Batch != c.w.Batch {
				t.Errorf("schedule: deploy %+v, batch %d; want %+v", s.Deploy, s.Workload.Batch, c.want)
			}
			// The first layer's ops are sized for the group's tokens.
			if op := find(t, s, 0, "L00.attn.input_norm"); op.M != c.want.TokensPerGroup {
				t.Errorf("input norm of %d tokens, want %d", op.M, c.want.TokensPerGroup)
			}
			// The schedule as built replays a graph under the capture it was
			// built with exactly when the deployment says so.
			if s.GraphedUnder(c.g) != c.want.Graphed {
				t.Errorf("GraphedUnder = %v, want %v", s.GraphedUnder(c.g), c.want.Graphed)
			}
		})
	}
}

// TestGraphCaptureStep: an engine iteration replays the smallest captured
// size at or above its tokens; under a decode-only capture (SGLang's) a
// step with prefill tokens, alone or beside decodes, runs eagerly at its
// own tokens whatever its size, and a decode-only step still replays.
func TestGraphCaptureStep(t *testing.T) {
	sizes := []int{1, 2, 4, 8, 16}
	dec := Iteration{}
	dec.AddDecode(10)
	dec.AddDecode(10)
	dec.AddDecode(10) // 3 tokens
	mixed := dec
	mixed.AddChunk(5, 0) // 8 tokens
	pre := Iteration{}
	pre.AddChunk(12, 0)
	for _, c := range []struct {
		name       string
		decodeOnly bool
		it         Iteration
		want       int64
		graphed    bool
	}{
		{"decode", false, dec, 4, true},
		{"mixed", false, mixed, 8, true},
		{"prefill", false, pre, 16, true},
		{"decode, decode-only", true, dec, 4, true},
		{"mixed, decode-only", true, mixed, 8, false},
		{"prefill, decode-only", true, pre, 12, false},
	} {
		g := &GraphCapture{Sizes: sizes, DecodeOnly: c.decodeOnly}
		n, ok := g.Step(&c.it)
		if n != c.want || ok != c.graphed {
			t.Errorf("%s: Step = %d, %v; want %d, %v", c.name, n, ok, c.want, c.graphed)
		}
		if d := iterationDeployment(&c.it, g); d.Graphed != c.graphed {
			t.Errorf("%s: deployment graphed %v, want %v", c.name, d.Graphed, c.graphed)
		}
	}
	var none *GraphCapture
	if n, ok := none.Step(&pre); n != 12 || ok {
		t.Errorf("no capture: Step = %d, %v; want 12, false", n, ok)
	}
}
