package sim

import (
	"math"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestSpecAcceptForms: each text form, its positions, and what Validate
// refuses; expected values by hand.
func TestSpecAcceptForms(t *testing.T) {
	cases := []struct {
		in    string
		steps int
		want  []float64
	}{
		{"0.8", 3, []float64{0.8, 0.64, 0.512}},
		// Past the list the ratio of the last two carries on: 0.6/0.8.
		{"0.8,0.6", 4, []float64{0.8, 0.6, 0.45, 0.3375}},
		{"0.9,0.7,0.5", 2, []float64{0.9, 0.7}},
	}
	for _, c := range cases {
		s, err := parseSpecAccept(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if s.String() != c.in {
			t.Errorf("%q renders %q", c.in, s.String())
		}
		got := s.Positions(c.steps)
		for i := range c.want {
			if !near(got[i], c.want[i], 1e-12) {
				t.Errorf("%s: position %d = %v, want %v", c.in, i+1, got[i], c.want[i])
			}
		}
	}
	// A mean length of 2.5 at K = 3: a + a^2 + a^3 = 1.5, checked by
	// substitution; a draft rate of 0.5 at K = 3 is the same chain.
	for _, in := range []string{"len=2.5@3", "rate=0.5@3"} {
		s, err := parseSpecAccept(in)
		if err != nil {
			t.Fatal(err)
		}
		q := s.Positions(3)
		if a := q[0]; !near(a+a*a+a*a*a, 1.5, 1e-9) || !near(q[2], a*a*a, 1e-12) {
			t.Errorf("%s: positions %v", in, q)
		}
	}
	for _, bad := range []string{"1.2", "0", "0.5,0.7", "len=0.5", "len=5@3", "rate=2", "x=1", "0.8,abc", "len=2@0"} {
		if _, err := parseSpecAccept(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSpecYieldSaysExtrapolation: per-position rates for fewer positions
// than the step drafts are extended, and the step's line says which
// positions were given (measured, from a file) and how the rest were
// extrapolated; a rate per token, or as many positions as the step
// drafts, say nothing of it.
func TestSpecYieldSaysExtrapolation(t *testing.T) {
	w := model.Workload{Phase: model.Decode, Batch: 1, Context: 1024, SpecTokens: 3}
	spec := model.Spec{Method: model.SpecNgram}
	for _, c := range []struct {
		name  string
		in    SpecAccept
		given int
		ratio float64
		want  string // the line's end; "" none
	}{
		// vLLM /metrics with position 0 only: 80 accepted of 100 drafts.
		{"one measured position", SpecAccept{PerPosition: []float64{0.8}, Source: "vLLM /metrics: 100 drafts (m.prom)"}, 1, 0.8,
			"from vLLM /metrics: 100 drafts (m.prom); position 1 measured, positions 2-3 extrapolated (x0.80 a position: position 1's rate as a per-token chain)"},
		// 0.6 / 0.9 = 0.667 carries on to position 3.
		{"two typed positions", SpecAccept{PerPosition: []float64{0.9, 0.6}}, 2, 0.6 / 0.9,
			"from --spec-accept 0.9,0.6; positions 1-2 given, position 3 extrapolated (x0.67 a position: the ratio of positions 1 and 2)"},
		{"every position", SpecAccept{PerPosition: []float64{0.9, 0.6, 0.3}, Source: "f"}, 0, 0, ""},
		{"a chain", SpecAccept{PerToken: 0.8}, 0, 0, ""},
		// A mean length or draft rate measured at the step's drafts, or
		// at no stated count, gives every position.
		{"a mean length at the step's drafts", SpecAccept{MeanLength: 2.5, AtTokens: 3}, 0, 0, ""},
		{"a mean length at no stated drafts", SpecAccept{MeanLength: 2.5}, 0, 0, ""},
		// Measured at fewer drafts than the step makes, the chain that
		// gives it (ratio: a + a^2 = 1.2 at K = 2, a = (sqrt(5.8) - 1) / 2
		// = 0.7042) carries on past them.
		{"a draft rate at fewer drafts", SpecAccept{DraftRate: 0.6, AtTokens: 2}, 2, (math.Sqrt(5.8) - 1) / 2,
			"from --spec-accept rate=0.6@2; positions 1-2 given, position 3 extrapolated (x0.70 a position: the per-token chain positions 1-2 follow)"},
		{"a cited mean length at fewer drafts", SpecAccept{MeanLength: 1.7, AtTokens: 1, Source: "a card: 1.7 at K = 1"}, 1, 0.7,
			"from a card: 1.7 at K = 1; position 1 measured, positions 2-3 extrapolated (x0.70 a position: position 1's rate as a per-token chain)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			y := specYield(Options{SpecAccept: c.in}, spec, w, nil)
			if y.GivenPositions != c.given || !near(y.ExtrapolationRatio, c.ratio, 1e-9) {
				t.Errorf("given %d, ratio %v; want %d, %v", y.GivenPositions, y.ExtrapolationRatio, c.given, c.ratio)
			}
			line := (&SpecStep{SpecYield: *y, Spec: "ngram k3"}).String()
			switch {
			case c.want != "" && !strings.HasSuffix(line, c.want):
				t.Errorf("line %q\nwant it to end %q", line, c.want)
			case c.want == "" && strings.Contains(line, "extrapolated"):
				t.Errorf("line %q says extrapolated", line)
			}
		})
	}
}

// TestSpecYieldCitedDefaultExtrapolation: Kimi's EAGLE-3 default is a
// model card's accept length of 2.94 at 3 steps; a step of 6 drafts takes
// positions 1-3 from it (the chain a + a^2 + a^3 = 1.94) and extrapolates
// 4-6, and its line says so as a file's measured positions do.
func TestSpecYieldCitedDefaultExtrapolation(t *testing.T) {
	a, err := model.Preset("kimi-k2.5")
	if err != nil {
		t.Fatal(err)
	}
	w := model.Workload{Phase: model.Decode, Batch: 1, Context: 1024, SpecTokens: 6}
	y := specYield(Options{}, model.Spec{Method: model.SpecEagle3}, w, a)
	r := y.ExtrapolationRatio
	if !y.Default || y.GivenPositions != 3 || !near(r+r*r+r*r*r, 1.94, 1e-9) {
		t.Fatalf("default %v, given %d, ratio %v; want the default, 3 positions given, a chain of mean 1.94 over 3", y.Default, y.GivenPositions, r)
	}
	line := (&SpecStep{SpecYield: *y, Spec: "eagle3 k6", Steps: 6}).String()
	want := "accept length 2.94 on MT-Bench (3 steps, topk 1); positions 1-3 measured, positions 4-6 extrapolated (x0.80 a position: the per-token chain positions 1-3 follow)"
	if !strings.HasSuffix(line, want) {
		t.Errorf("line %q\nwant it to end %q", line, want)
	}
}

// TestMTPAcceptOnlyMTP: --mtp-accept is the acceptance of the MTP
// layers' drafts; an EAGLE-3 head, a draft model or the host's n-grams
// keep their own figure (Kimi's EAGLE-3 head: accept length 2.94 at 3
// steps), and an MTP step takes it: 1 + 0.5 + 0.25 + 0.125 = 1.875
// tokens at K = 3.
func TestMTPAcceptOnlyMTP(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5")
	w := model.Workload{Phase: model.Decode, Batch: 1, Context: 1024, SpecTokens: 3}
	o := Options{MTPAcceptFrac: 0.5}
	for _, m := range []model.SpecMethod{model.SpecEagle3, model.SpecDraftModel, model.SpecNgram, model.SpecSuffix} {
		y := specYield(o, model.Spec{Method: m}, w, a)
		d := defaultSpecAccept(m, a)
		if want, _ := yieldOf(d.Positions(3)); !y.Default || !near(y.TokensPerStep, want, 1e-9) || strings.Contains(y.Source, "--mtp-accept") {
			t.Errorf("%s: %v tokens per step from %q, want its own %v (%s)", m, y.TokensPerStep, y.Source, want, d.Source)
		}
	}
	y := specYield(o, model.Spec{Method: model.SpecMTP}, w, a)
	if !near(y.TokensPerStep, 1.875, 1e-9) || y.Source != "--mtp-accept 0.5" {
		t.Errorf("mtp: %v tokens per step from %q, want 1.875 from --mtp-accept 0.5", y.TokensPerStep, y.Source)
	}
}

// TestYieldOf: q = 0.8, 0.5, 0.2 gives P(A = 0..3) = 0.2, 0.3, 0.3, 0.2:
// E[A] = 1.5, E[A^2] = 0.3 + 1.2 + 1.8 = 3.3, Var = 3.3 - 2.25 = 1.05.
func TestYieldOf(t *testing.T) {
	m, v := yieldOf([]float64{0.8, 0.5, 0.2})
	if !near(m, 2.5, 1e-12) || !near(v, 1.05, 1e-12) {
		t.Errorf("mean %v var %v, want 2.5 and 1.05", m, v)
	}
}

// TestSpecHostUs: n-gram drafting at batch 1 over 4096 tokens is the fixed
// 20 us and 4096 x 1 ns; at batch 20 over 8 threads, 3 rounds.
func TestSpecHostUs(t *testing.T) {
	sc := Scenario{Workload: model.Workload{Batch: 1, Context: 4096, SpecTokens: 3}, Build: model.BuildOptions{Spec: model.Spec{Method: model.SpecNgram}}}
	if got := specHostUs(sc); !near(got, 24.096, 1e-9) {
		t.Errorf("ngram b1: %v us", got)
	}
	sc.Workload.Batch = 20
	if got := specHostUs(sc); !near(got, 20+3*4.096, 1e-9) {
		t.Errorf("ngram b20: %v us", got)
	}
	sc.Build.Spec.Method = model.SpecEagle3
	if specHostUs(sc) != 0 {
		t.Error("eagle3 drafts on the device")
	}
}

// TestDefaultSpecAccept: each method and family gets its cited figure.
func TestDefaultSpecAccept(t *testing.T) {
	kimi, glm, ds := mustPreset(t, "kimi-k2.5-nvfp4"), mustPreset(t, "glm-5-nvfp4"), mustPreset(t, "deepseek-v3")
	cases := []struct {
		m    model.SpecMethod
		a    *model.Arch
		k    int
		want float64 // tokens per step
	}{
		{model.SpecEagle3, kimi, 3, 2.94},
		{model.SpecMTP, glm, 3, 1 + 0.80 + 0.575 + 0.295},
		{model.SpecMTP, ds, 1, 1.85},
		{model.SpecNgram, kimi, 5, 2.96},
		{model.SpecSuffix, kimi, 1, 16993.0 / (16993 - 1226)},
	}
	for _, c := range cases {
		d := defaultSpecAccept(c.m, c.a)
		if d.Source == "" {
			t.Errorf("%s/%s: no source", c.m, c.a.Name)
		}
		if m, _ := yieldOf(d.Positions(c.k)); !near(m, c.want, 1e-6) {
			t.Errorf("%s/%s: %v tokens per step at k %d, want %v", c.m, c.a.Name, m, c.k, c.want)
		}
	}
	if d := defaultSpecAccept(model.SpecDraftModel, kimi); !strings.Contains(d.Source, "no published acceptance") {
		t.Errorf("draft default source %q: want it flagged as a stand-in", d.Source)
	}
}

// TestSpecEngineRefusals: what an engine lacks is one line naming the
// flag.
func TestSpecEngineRefusals(t *testing.T) {
	topo, err := topology.Resolve("rtxpro6000-2s", 0)
	if err != nil {
		t.Fatal(err)
	}
	kimi := mustPreset(t, "kimi-k2.5")
	moon, _ := model.ResolveDrafter("moonlight-16b-a3b")
	head, _ := model.ResolveDrafter("kimi-k2.5-eagle3-mla")
	sc := func(engine string, spec model.Spec) Scenario {
		ref, err := engprof.ParseRef(engine)
		if err != nil {
			t.Fatal(err)
		}
		return Scenario{Arch: kimi, Plan: model.Plan{TP: 8}, Topo: topo, Options: Options{Engine: ref},
			Workload: model.Workload{Batch: 1, Context: 100, SpecTokens: 3}, Build: model.BuildOptions{Spec: spec}}
	}
	cases := []struct {
		engine string
		spec   model.Spec
		want   string
	}{
		{"sglang@0.5", model.Spec{Method: model.SpecSuffix}, "--spec suffix: sglang@0.5 has no speculative method suffix"},
		{"vllm@0.24", model.Spec{Method: model.SpecEagle3, Drafter: head, TopK: 2, Steps: 2}, "--spec-topk 2: vllm@0.24 drafts no tree"},
		{"vllm@0.24", model.Spec{Method: model.SpecDraftModel, Drafter: moon, DraftTP: 1}, "--draft-tp 1: vllm@0.24 runs a draft model at the target's TP 8 only"},
	}
	for _, c := range cases {
		err := sc(c.engine, c.spec).CheckEngine()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s %+v: err %v, want %q", c.engine, c.spec.Method, err, c.want)
		}
	}
	h200 := sc("trtllm@1.3", model.Spec{Method: model.SpecNgram})
	h200.Topo, _ = topology.Resolve("h200-nvswitch", 0)
	h200.Arch = mustPreset(t, "deepseek-v3") // FP8 experts: TensorRT-LLM's CUTLASS MoE
	if err := h200.CheckEngine(); err == nil || !strings.HasPrefix(err.Error(), "--spec ngram: trtllm@1.3 has no speculative method ngram") {
		t.Errorf("trtllm ngram: %v", err)
	}
	for _, ok := range []struct {
		engine string
		spec   model.Spec
	}{
		{"sglang@0.5", model.Spec{Method: model.SpecEagle3, Drafter: head, TopK: 2, Steps: 2}},
		{"executor", model.Spec{Method: model.SpecDraftModel, Drafter: moon, DraftTP: 1}},
		{"vllm@0.24", model.Spec{Method: model.SpecSuffix}},
	} {
		if err := sc(ok.engine, ok.spec).CheckEngine(); err != nil {
			t.Errorf("%s %s: %v", ok.engine, ok.spec.Method, err)
		}
	}
}

// TestSpecCaptureSGLang: SGLang captures its spec list in sequences, each
// verifying 1 + K tokens: 5 sequences x 4 tokens = 20 is captured as is,
// where vLLM's token list pads 20 to 24 tokens.
func TestSpecCaptureSGLang(t *testing.T) {
	topo, err := topology.Resolve("rtxpro6000-2s", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		engine string
		graph  int
	}{{"sglang@0.5", 20}, {"vllm@0.24", 24}} {
		ref, _ := engprof.ParseRef(c.engine)
		sc := Scenario{Arch: mustPreset(t, "kimi-k2.5"), Plan: model.Plan{TP: 8}, Topo: topo, Options: Options{Engine: ref, CUDAGraphs: true},
			Workload: model.Workload{Batch: 5, Context: 100, SpecTokens: 3}, Build: model.BuildOptions{Spec: model.Spec{Method: model.SpecNgram}}}
		_, s, err := Predict(sc)
		if err != nil {
			t.Fatal(err)
		}
		if s.Deploy.GraphTokens != c.graph || !s.Deploy.Graphed || s.Deploy.SeqsPerGroup != 5 {
			t.Errorf("%s: graph of %d tokens over %d sequences (graphed %v), want %d over 5", c.engine, s.Deploy.GraphTokens, s.Deploy.SeqsPerGroup, s.Deploy.Graphed, c.graph)
		}
	}
}

// TestEvaluatorSpecCapture: the Evaluator's schedules serve every box and
// option set that lays the same step, so its key must be the deployment
// the scenario's engine decides: the same n-gram step under vLLM (padded
// to 24 tokens) and SGLang (its spec list: 20 as is) evaluated by one
// Evaluator, in either order, gives each engine's own step.
func TestEvaluatorSpecCapture(t *testing.T) {
	topo, err := topology.Resolve("rtxpro6000-2s", 0)
	if err != nil {
		t.Fatal(err)
	}
	kimi := mustPreset(t, "kimi-k2.5")
	scen := func(engine string) Scenario {
		ref, _ := engprof.ParseRef(engine)
		return Scenario{Arch: kimi, Plan: model.Plan{TP: 8}, Topo: topo, Options: Options{Engine: ref, CUDAGraphs: true},
			Workload: model.Workload{Batch: 5, Context: 100, SpecTokens: 3}, Build: model.BuildOptions{Spec: model.Spec{Method: model.SpecNgram}}}
	}
	want := map[string]Summary{}
	for _, e := range []string{"vllm@0.24", "sglang@0.5"} {
		var ev Evaluator
		s, err := ev.Evaluate(scen(e))
		if err != nil {
			t.Fatal(err)
		}
		want[e] = s
	}
	if want["vllm@0.24"].GraphTokens != 24 || want["sglang@0.5"].GraphTokens != 20 {
		t.Fatalf("graph tokens vLLM %d, SGLang %d: want 24 and 20", want["vllm@0.24"].GraphTokens, want["sglang@0.5"].GraphTokens)
	}
	for _, order := range [][]string{{"vllm@0.24", "sglang@0.5"}, {"sglang@0.5", "vllm@0.24"}} {
		var ev Evaluator
		for _, e := range order {
			got, err := ev.Evaluate(scen(e))
			if err != nil {
				t.Fatal(err)
			}
			if got.GraphTokens != want[e].GraphTokens || got.StepUs != want[e].StepUs {
				t.Errorf("%v: %s: graph %d, step %.3f us; alone: graph %d, step %.3f us", order, e, got.GraphTokens, got.StepUs, want[e].GraphTokens, want[e].StepUs)
			}
		}
	}
}

// TestSpecCaptureTRTLLM: TensorRT-LLM keys a decode graph by the batch's
// requests and their draft length (cuda_graph_runner: key (batch_size,
// draft_len), each request max_draft_len + 1 tokens) and, unpadded by
// default, replays one only for a captured batch size (1-32, 64, 128).
// With MTP K = 1 a batch of 20 requests replays the batch-20 graph of 40
// tokens; 33 requests (66 tokens) and 48 (96) have none and run eagerly;
// 64 requests replay the batch-64 graph of 128 tokens.
func TestSpecCaptureTRTLLM(t *testing.T) {
	topo, err := topology.Resolve("h200-nvswitch", 0)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := engprof.ParseRef("trtllm@1.3")
	for _, c := range []struct {
		batch, graph int
		graphed      bool
	}{{1, 2, true}, {20, 40, true}, {32, 64, true}, {33, 66, false}, {48, 96, false}, {64, 128, true}, {128, 256, true}, {129, 258, false}} {
		sc := Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8}, Topo: topo, Options: Options{Engine: ref, CUDAGraphs: true},
			Workload: model.Workload{Batch: c.batch, Context: 1024, SpecTokens: 1}}
		_, s, err := Predict(sc)
		if err != nil {
			t.Fatal(err)
		}
		if s.Deploy.Graphed != c.graphed || (c.graphed && s.Deploy.GraphTokens != c.graph) || s.Deploy.SeqsPerGroup != c.batch {
			t.Errorf("trtllm MTP k1 batch %d: graphed %v, graph of %d tokens over %d sequences; want graphed %v (%d tokens) over %d",
				c.batch, s.Deploy.Graphed, s.Deploy.GraphTokens, s.Deploy.SeqsPerGroup, c.graphed, c.graph, c.batch)
		}
	}
}

// TestSpecEngineFlagLiftsSGLangLimit: SGLang runs at most 48 requests
// under speculation, each DP rank's scheduler 48 // dp of them, so the
// engine flag of a step whose DP group holds more carries
// --max-running-requests with the least limit whose share holds it
// (--batch counts every group's sequences): DeepSeek-V3 MTP 2 at 64
// requests adds 64, at 8 nothing; DP 4 of 16 requests (4 a group, of 12)
// adds nothing, of 48 (12 a group) nothing, of 49 (13 in the fullest
// group) 13 x 4 = 52; DP 8 of 49 (7 a group, of 6) 56; vLLM has no such
// limit.
func TestSpecEngineFlagLiftsSGLangLimit(t *testing.T) {
	for _, c := range []struct {
		engine    string
		tp, dp    int
		batch     int
		want, not string
	}{
		{"sglang", 8, 1, 64, "--max-running-requests 64", ""},
		{"sglang", 8, 1, 8, "", "--max-running-requests"},
		{"sglang", 2, 4, 16, "", "--max-running-requests"},
		{"sglang", 2, 4, 48, "", "--max-running-requests"},
		{"sglang", 2, 4, 49, "--max-running-requests 52", ""},
		{"sglang", 1, 8, 49, "--max-running-requests 56", ""},
		{"vllm", 8, 1, 64, "", "max-running"},
	} {
		ref, err := engprof.ParseRef(c.engine)
		if err != nil {
			t.Fatal(err)
		}
		sc := Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: c.tp, DP: c.dp, EP: c.dp > 1},
			Options:  Options{CUDAGraphs: true, Engine: ref},
			Workload: model.Workload{Phase: model.Decode, Batch: c.batch, Context: 1024, SpecTokens: 2}}
		f := sc.SpecEngineFlag()
		if !strings.Contains(f, "--speculative") && !strings.Contains(f, "speculative_config") && !strings.Contains(f, "mtp") {
			t.Errorf("%s tp%d dp%d b%d: engine flag %q does not turn speculation on", c.engine, c.tp, c.dp, c.batch, f)
		}
		if c.want != "" && !strings.HasSuffix(f, " "+c.want) {
			t.Errorf("%s tp%d dp%d b%d: engine flag %q, want it to end %q", c.engine, c.tp, c.dp, c.batch, f, c.want)
		}
		if c.not != "" && strings.Contains(f, c.not) {
			t.Errorf("%s tp%d dp%d b%d: engine flag %q has %q", c.engine, c.tp, c.dp, c.batch, f, c.not)
		}
	}
}

// TestMTPDefaultSaysExtrapolation: the DeepSeek-V3 report's figure (85 %
// acceptance of the second token) is one position measured, at K = 1; a
// step of 3 MTP drafts carries it on as a per-token chain, 0.85, 0.7225,
// 0.614125 (3.186 tokens per step), and its line says positions 2-3 were
// extrapolated, as it says of every other cited figure measured at fewer
// drafts than the step makes. It had given the three as the report's,
// with nothing extrapolated.
func TestMTPDefaultSaysExtrapolation(t *testing.T) {
	ds := mustPreset(t, "deepseek-v3")
	w := model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, SpecTokens: 3}
	y := specYield(Options{}, model.Spec{Method: model.SpecMTP}, w, ds)
	if !near(y.TokensPerStep, 1+0.85+0.7225+0.614125, 1e-9) || y.GivenPositions != 1 {
		t.Fatalf("%.6f tokens per step, %d positions measured; want 3.186625 and 1", y.TokensPerStep, y.GivenPositions)
	}
	line := (&SpecStep{SpecYield: *y, Spec: "mtp k3", Steps: 3}).String()
	if want := "; position 1 measured, positions 2-3 extrapolated (x0.85 a position: position 1's rate as a per-token chain)"; !strings.HasSuffix(line, want) {
		t.Errorf("line %q\nwant it to end %q", line, want)
	}
	// At the report's own K nothing is extrapolated.
	w.SpecTokens = 1
	if y := specYield(Options{}, model.Spec{Method: model.SpecMTP}, w, ds); y.GivenPositions != 0 || !near(y.TokensPerStep, 1.85, 1e-9) {
		t.Errorf("k1: %+v", y)
	}
}

// TestTreeDefaultSaysChain: a tree's step (topk 2, 3 deep, 6 tokens) is
// priced with its tree's verify and draft passes, but the cited default
// it yields at is a chain's (Kimi's EAGLE-3 head: accept length 2.94 at
// 3 steps, topk 1), whose positions a tree's branches can only raise. The
// yield is that chain's, 2.94 tokens per step, and the line says so (a
// lower bound) rather than passing a chain's figure off as the tree's. A
// per-depth figure the user gives is the tree's own and says nothing.
func TestTreeDefaultSaysChain(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5")
	w := model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, SpecTokens: 6}
	tree := model.Spec{Method: model.SpecEagle3, TopK: 2, Steps: 3}
	y := specYield(Options{}, tree, w, kimi)
	if !near(y.TokensPerStep, 2.94, 1e-9) || y.ChainForTreeTopK != 2 {
		t.Fatalf("%.4f tokens per step, chain for a tree of topk %d; want 2.94 and 2", y.TokensPerStep, y.ChainForTreeTopK)
	}
	line := (&SpecStep{SpecYield: *y, Spec: "eagle3 k6 tree 3x2", Steps: 3}).String()
	if want := "; a chain's figure (topk 1) for a tree of topk 2: its branches priced as accepting what one chain does, a lower bound"; !strings.HasSuffix(line, want) {
		t.Errorf("line %q\nwant it to end %q", line, want)
	}
	given := specYield(Options{SpecAccept: SpecAccept{MeanLength: 3.4}}, tree, w, kimi)
	if given.ChainForTreeTopK != 0 {
		t.Errorf("a given per-depth figure: %+v, want it taken as the tree's", given)
	}
}

// TestExecutorDraftsNothingOnHost: tpscope's executor verifies the drafts
// it is given and runs no n-gram or suffix proposer (its profile says
// so), so its step of a host method has no host drafting in it: run and
// verdict compare the prediction with a step that never waited for one.
// A serving engine's step of the same scenario waits 20 us + 4096 tokens
// x 1 ns for one request's KMP scan.
func TestExecutorDraftsNothingOnHost(t *testing.T) {
	sc := Scenario{Workload: model.Workload{Batch: 1, Context: 4096, SpecTokens: 3}, Build: model.BuildOptions{Spec: model.Spec{Method: model.SpecNgram}}}
	if got := specHostUs(sc); !near(got, 24.096, 1e-9) {
		t.Errorf("vLLM (the default engine): %v us, want 24.096", got)
	}
	sc.Options.Engine = engprof.ExecutorRef
	if got := specHostUs(sc); got != 0 {
		t.Errorf("executor: %v us of host drafting, want 0", got)
	}
	sc.Build.Spec.Method = model.SpecSuffix
	if got := specHostUs(sc); got != 0 {
		t.Errorf("executor, suffix: %v us of host drafting, want 0", got)
	}
}

// TestSpecEngineRefusesDPAttention: SGLang raises for STANDALONE (a draft
// model) and NGRAM under DP attention (server_args.py
// _handle_speculative_decoding: "Currently ngram speculative decoding
// does not support dp attention."); tpscope simulated both at DP 4,
// printing SGLang's 48 / 4 running requests a rank as its default. The
// refusal is one line naming --dp; NEXTN (MTP) and EAGLE3 run under DP
// attention, and vLLM's ngram too.
func TestSpecEngineRefusesDPAttention(t *testing.T) {
	topo, err := topology.Resolve("nvswitch:8xh200-sxm", 0)
	if err != nil {
		t.Fatal(err)
	}
	moon, _ := model.ResolveDrafter("moonlight-16b-a3b")
	sc := func(engine string, arch *model.Arch, spec model.Spec) Scenario {
		ref, err := engprof.ParseRef(engine)
		if err != nil {
			t.Fatal(err)
		}
		return Scenario{Arch: arch, Plan: model.Plan{TP: 2, DP: 4, EP: true}, Topo: topo, Options: Options{Engine: ref},
			Workload: model.Workload{Batch: 4, Context: 100, SpecTokens: 3}, Build: model.BuildOptions{Spec: spec}}
	}
	tiny, kimi := mustPreset(t, "tiny-mla-moe"), mustPreset(t, "kimi-k2.5")
	for _, c := range []struct {
		engine string
		arch   *model.Arch
		spec   model.Spec
		want   string
	}{
		{"sglang@0.5", tiny, model.Spec{Method: model.SpecNgram}, "--dp 4: sglang@0.5 refuses NGRAM speculative decoding under DP attention"},
		{"sglang@0.5", kimi, model.Spec{Method: model.SpecDraftModel, Drafter: moon}, "--dp 4: sglang@0.5 refuses STANDALONE speculative decoding under DP attention"},
		{"sglang@0.5", tiny, model.Spec{Method: model.SpecMTP}, ""},
		{"vllm@0.24", tiny, model.Spec{Method: model.SpecNgram}, ""},
	} {
		err := sc(c.engine, c.arch, c.spec).CheckEngine()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s at DP 4: %v, want it run", c.engine, c.spec.Method, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s %s at DP 4: err %v, want one line %q", c.engine, c.spec.Method, err, c.want)
		}
	}
}

// TestSpecPagedTreeRefused: SGLang raises for a tree of drafts
// (speculative_eagle_topk > 1) on a KV page above one token with any
// attention backend but flashinfer, and NGRAM's drafts are always a tree
// (speculative_eagle_topk = speculative_ngram_max_bfs_breadth, 10):
// DeepSeek-V3 on a B200 runs trtllm_mla, which forces 64-token pages, and
// on an H200 with an FP8 cache flashmla, 64 too; tpscope simulated both.
// A chain runs there, a tree runs on fa3 (an H200 with a BF16 cache, page
// 1) and with flashinfer named, and vLLM's ngram is a chain.
func TestSpecPagedTreeRefused(t *testing.T) {
	ds := mustPreset(t, "deepseek-v3")
	sc := func(engine, box string, kv model.Dtype, backend string, spec model.Spec) Scenario {
		ref, err := engprof.ParseRef(engine)
		if err != nil {
			t.Fatal(err)
		}
		topo, err := topology.Resolve(box, 0)
		if err != nil {
			t.Fatal(err)
		}
		return Scenario{Arch: ds, Plan: model.Plan{TP: 8}, Topo: topo, Options: Options{Engine: ref, AttentionBackend: AttentionBackend(backend)},
			Workload: model.Workload{Batch: 4, Context: 100, SpecTokens: 3, KVDtype: kv}, Build: model.BuildOptions{Spec: spec}}
	}
	tree := model.Spec{Method: model.SpecMTP, TopK: 4, Steps: 3}
	for _, c := range []struct {
		engine, box string
		kv          model.Dtype
		backend     string
		spec        model.Spec
		want        string
	}{
		{"sglang@0.5", "nvswitch:8xb200", "", "", tree, "--spec-topk 4: sglang@0.5 drafts a tree on a KV page above one token only with flashinfer, and trtllm_mla runs 64-token pages here"},
		{"sglang@0.5", "nvswitch:8xh200", model.FP8, "", tree, "--spec-topk 4: sglang@0.5 drafts a tree on a KV page above one token only with flashinfer, and flashmla runs 64-token pages here"},
		{"sglang@0.5", "nvswitch:8xb200", "", "", model.Spec{Method: model.SpecNgram}, "--spec ngram: NGRAM's drafts are a tree 10 wide"},
		{"sglang@0.5", "nvswitch:8xb200", "", "", model.Spec{Method: model.SpecMTP}, ""},
		{"sglang@0.5", "nvswitch:8xh200", model.BF16, "", tree, ""},
		{"sglang@0.5", "nvswitch:8xh200", model.BF16, "", model.Spec{Method: model.SpecNgram}, ""},
		{"sglang@0.5", "nvswitch:8xb200", "", "flashinfer", tree, ""},
		{"vllm@0.24", "nvswitch:8xb200", "", "", model.Spec{Method: model.SpecNgram}, ""},
	} {
		err := sc(c.engine, c.box, c.kv, c.backend, c.spec).CheckEngine()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s on %s kv %q backend %q, %s topk %d: %v, want it run", c.engine, c.box, c.kv, c.backend, c.spec.Method, c.spec.TopK, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s on %s kv %q, %s topk %d: err %v, want one line %q", c.engine, c.box, c.kv, c.spec.Method, c.spec.TopK, err, c.want)
		}
	}
}
