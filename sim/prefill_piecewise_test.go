package sim

import (
	"math"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// mlaOpRoles are the roles of the ops vLLM's MLA custom op
// (unified_mla_attention, a splitting op) launches: MLAAttention.
// forward_impl writes the cache, runs the decode tokens through W_UK_T,
// forward_mqa and _v_up_proj and the prompt tokens through forward_mha
// (kv_b_proj with its input's quantization, the prefill attention, the
// cached prefix's gather, kv_b_proj, attention and merge), and under DCP
// the decode's query all-gather and the output's LSE all-gather and
// reduce-scatter (forward_impl's cp_lse_ag_out_rs). Listed here from
// vLLM's source, not read from the profile.
var mlaOpRoles = []model.Role{
	model.RoleKVCacheWrite, model.RoleWUK, model.RoleMLADecode, model.RoleWUV,
	model.RoleDCPQAllGather, model.RoleDCPLSEAllGather, model.RoleDCPOutReduceScatter,
	model.RoleKVBProjQuant, model.RoleKVBProj, model.RoleMLAPrefill,
	model.RolePrefillCtxGather, model.RolePrefillCtxKVBProjQuant, model.RolePrefillCtxKVBProj,
	model.RoleMLAPrefillCtx, model.RolePrefillCtxMerge,
}

// mlaOpRole is the role of op ID id when it is one of mlaOpRoles'.
func mlaOpRole(id string) (model.Role, bool) {
	for _, r := range mlaOpRoles {
		if id == string(r) || strings.HasSuffix(id, "."+string(r)) {
			return r, true
		}
	}
	return "", false
}

// piecewiseHostUs is the host time of a graphed step of pr's ops (rank 0,
// in issue order) captured piecewise around the MLA op: one graph launch
// for the step (the device's eager launch), each kernel of an op of the
// MLA op an eager launch at eagerUs, and the first op after a run of them
// one more graph launch for the piece it opens. It also says which roles
// ran eagerly, how many kernels, and how many pieces the step replayed.
func piecewiseHostUs(pr *Prediction, dev *topology.Device, eagerUs float64) (hostUs float64, roles map[model.Role]int, kernels, pieces int) {
	hostUs, roles, pieces = dev.LaunchEagerUs, map[model.Role]int{}, 1
	inPiece := true
	for _, o := range pr.Ops {
		if o.Rank != 0 {
			break
		}
		if r, ok := mlaOpRole(o.ID); ok {
			k := 1 + o.Cost.ExtraKernels
			hostUs += eagerUs * float64(k)
			roles[r]++
			kernels += k
			inPiece = false
			continue
		}
		if !inPiece {
			hostUs += dev.LaunchEagerUs
			inPiece = true
			pieces++
		}
	}
	return hostUs, roles, kernels, pieces
}

// checkPieces: vLLM splits a piecewise graph at each splitting op it
// calls, the MLA attention op once a layer (MultiHeadLatentAttentionWrapper
// .forward runs the rotary embedding, and a DSA model's indexer, before
// it, o_proj after it: layers/mla.py), so a step of layers decoder layers
// replays layers + 1 pieces.
func checkPieces(t *testing.T, name string, pieces, layers int) {
	t.Helper()
	if pieces != layers+1 {
		t.Errorf("%s: %d graph pieces, want %d: one before the first layer's attention op and one after each layer's", name, pieces, layers+1)
	}
}

// vllmEagerHostUs is vLLM 0.24's host time per eagerly launched kernel
// on dev (its profile's eager_host_us, else the device's launch cost).
func vllmEagerHostUs(t *testing.T, dev *topology.Device) float64 {
	t.Helper()
	prof, err := engprof.Lookup(engprof.Ref{Name: "vllm", Version: "0.24"})
	if err != nil {
		t.Fatal(err)
	}
	if prof.Graphs.EagerHostUs > 0 {
		return prof.Graphs.EagerHostUs
	}
	return dev.LaunchEagerUs
}

// TestPrefillCapturesPiecewise: vLLM's FULL_AND_PIECEWISE replays a FULL
// graph only for a uniform decode batch (CudagraphDispatcher keys FULL
// graphs uniform_decode=True); a prefill step of 256 tokens, which fits a
// capture size, replays the PIECEWISE graphs, the MLA custom op's
// kernels launched eagerly between the pieces. Its host time is the
// step's graph launch, an eager launch for each kernel of the op's ops
// (the cache write, kv_b_proj and its quantization, the prefill
// attention: three ops a layer at least) and one graph launch for each
// piece after them. A uniform decode step of the same engine stays one
// full graph: one launch, no eager op.
func TestPrefillCapturesPiecewise(t *testing.T) {
	box := mustTopo(t, "rtxpro6000-2s")
	dev := box.DeviceOf(0)
	eagerUs := vllmEagerHostUs(t, dev)
	eagerGap, graphGap := eagerKernelGapUs(dev), dev.LaunchGraphUs
	if !(eagerGap > graphGap) || !(eagerUs > 0) {
		t.Fatalf("eager gap %v us, graph gap %v us, eager host %v us: the test needs the gaps apart", eagerGap, graphGap, eagerUs)
	}
	arch := mustPreset(t, "kimi-k2.5")
	o := Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}
	pr := predictEngine(t, box, "vllm@0.24", o, Scenario{Arch: arch, Plan: model.Plan{TP: 8},
		Workload: model.Workload{Phase: model.Prefill, Batch: 1, Context: 256, KVDtype: model.FP8}})
	if !pr.Graphed {
		t.Fatal("a prefill step of 256 tokens ran eagerly: the test needs it graphed")
	}
	const line = "CUDA graphs piecewise: attention eager between captured pieces (vllm@0.24 replays a step with prefill tokens as piecewise graphs, FULL_AND_PIECEWISE)"
	if !strings.Contains(pr.Engine, line) {
		t.Errorf("prefill step: engine line %q, want %q", pr.Engine, line)
	}
	want, roles, kernels, pieces := piecewiseHostUs(pr, dev, eagerUs)
	layers := arch.Layers
	checkPieces(t, "prefill step", pieces, layers)
	for _, r := range []model.Role{model.RoleKVCacheWrite, model.RoleKVBProj, model.RoleMLAPrefill} {
		if roles[r] != layers {
			t.Errorf("%s: %d ops, want one in each of the %d layers", r, roles[r], layers)
		}
	}
	for _, r := range []model.Role{model.RoleWUK, model.RoleMLADecode, model.RoleWUV} {
		if roles[r] != 0 {
			t.Errorf("%s: %d ops in a prefill step", r, roles[r])
		}
	}
	if kernels < 3*layers {
		t.Errorf("%d eager kernels, want at least %d", kernels, 3*layers)
	}
	if math.Abs(pr.HostUs-want) > 1e-6*want {
		t.Errorf("prefill step: host %.3f us, want %.3f (one graph launch, %d eager kernels at %.2f us, a graph launch for each piece after them)", pr.HostUs, want, kernels, eagerUs)
	}
	for _, op := range pr.Ops {
		_, eager := mlaOpRole(op.ID)
		gap := graphGap
		if eager {
			gap = eagerGap
		}
		if want := gap * float64(1+op.Cost.ExtraKernels); math.Abs(op.OverheadUs-want) > 1e-9 && op.OverheadUs != 0 {
			t.Errorf("prefill %s: overhead %.3f us, want %.3f (eager %v)", op.ID, op.OverheadUs, want, eager)
			break
		}
	}

	dec := predictEngine(t, box, "vllm@0.24", o, Scenario{Arch: arch, Plan: model.Plan{TP: 8},
		Workload: model.Workload{Phase: model.Decode, Batch: 8, Context: 4096, KVDtype: model.FP8}})
	if strings.Contains(dec.Engine, "piecewise") {
		t.Errorf("uniform decode step: engine line %q says piecewise", dec.Engine)
	}
	if !dec.Graphed || dec.HostUs != dev.LaunchEagerUs {
		t.Errorf("uniform decode step: graphed %v, host %.3f us, want one full graph's launch, %.3f us", dec.Graphed, dec.HostUs, dev.LaunchEagerUs)
	}
}

// TestMixedIterationCapturesPiecewise: a serving step of vLLM that
// carries a prompt's chunk beside decodes (a mixed chunked-prefill step)
// fits a capture size and replays the PIECEWISE graphs: the coster prices
// the step its schedule's prediction gives, whose host time holds an
// eager launch for every kernel of the MLA op's decode and prefill ops (a
// cache write, W_UK, the decode attention, W_UV, kv_b_proj, the prefill
// attention and the cached prefix's gather, kv_b_proj, attention and
// merge in each layer) and a graph launch for each piece after them. A
// step of decodes only stays one full graph.
func TestMixedIterationCapturesPiecewise(t *testing.T) {
	box := mustTopo(t, "rtxpro6000-2s")
	dev := box.DeviceOf(0)
	eagerUs := vllmEagerHostUs(t, dev)
	arch := mustPreset(t, "kimi-k2.5")
	p, err := New(box, Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS"}, Engine: engprof.Ref{Name: "vllm", Version: "0.24"}})
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenario{Arch: arch, Plan: model.Plan{TP: 8}, Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.FP8}}
	c, err := NewIterationCoster(p, sc)
	if err != nil {
		t.Fatal(err)
	}
	var mixed, decode model.Iteration
	for range 6 {
		mixed.AddDecode(3000)
		decode.AddDecode(3000)
	}
	mixed.AddChunk(200, 1000)
	for _, x := range []struct {
		name  string
		it    model.Iteration
		roles []model.Role // one op of each per layer
	}{
		{"mixed", mixed, []model.Role{model.RoleKVCacheWrite, model.RoleWUK, model.RoleMLADecode, model.RoleWUV,
			model.RoleKVBProj, model.RoleMLAPrefill, model.RolePrefillCtxGather, model.RolePrefillCtxKVBProj, model.RoleMLAPrefillCtx, model.RolePrefillCtxMerge}},
		{"decode", decode, nil},
	} {
		padded, graphed := c.capture.Step(&x.it)
		if !graphed {
			t.Fatalf("%s step %s runs eagerly: the test needs it graphed", x.name, x.it)
		}
		it := x.it
		it.PadTokens = int(padded - it.Tokens())
		it.KVDtype = c.kv
		o := c.build
		o.Graphs = c.capture
		s, err := model.BuildIteration(arch, c.plan, it, o)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.Predict(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.ExactStepUs(x.it)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-pr.StepUs) > 1e-6*pr.StepUs {
			t.Errorf("%s: coster %.3f us, the schedule's prediction %.3f", x.name, got, pr.StepUs)
		}
		if x.roles == nil {
			if pr.HostUs != dev.LaunchEagerUs {
				t.Errorf("%s: host %.3f us, want one full graph's launch, %.3f us", x.name, pr.HostUs, dev.LaunchEagerUs)
			}
			continue
		}
		want, roles, kernels, pieces := piecewiseHostUs(pr, dev, eagerUs)
		checkPieces(t, x.name, pieces, arch.Layers)
		for _, r := range x.roles {
			if roles[r] != arch.Layers {
				t.Errorf("%s: %s: %d ops, want one in each of the %d layers", x.name, r, roles[r], arch.Layers)
			}
		}
		if math.Abs(pr.HostUs-want) > 1e-6*want {
			t.Errorf("%s: host %.3f us, want %.3f (one graph launch, %d eager kernels at %.2f us, a graph launch for each piece after them)", x.name, pr.HostUs, want, kernels, eagerUs)
		}
	}
}

// TestDSAIndexerEagerInPiecewise: vLLM's DSA indexer runs its key cache
// write, scores and top-k inside the custom op sparse_attn_indexer, one
// of the splitting ops (its projections, norm and rotary outside it), so
// a step captured piecewise launches those three kernels eagerly too:
// GLM-5-NVFP4's prefill of 256 tokens on 8 x B200 (DSA run sparse there)
// gains one eager launch per kernel of the three in each layer over the
// same step's host time without them, each op at the eager gap. A
// uniform decode step, one full graph, launches none of them eagerly.
func TestDSAIndexerEagerInPiecewise(t *testing.T) {
	box, err := topology.Resolve("nvswitch:8xb200", 0)
	if err != nil {
		t.Fatal(err)
	}
	dev := box.DeviceOf(0)
	eagerUs := vllmEagerHostUs(t, dev)
	arch := mustPreset(t, "glm-5-nvfp4")
	indexer := map[string]bool{string(model.RoleIndexerCacheWrite): true, string(model.RoleIndexerScore): true, string(model.RoleIndexerTopK): true}
	roleOf := func(id string) string {
		_, r, _ := strings.Cut(id, ".")
		return r
	}
	o := Options{CUDAGraphs: true}
	pr := predictEngine(t, box, "vllm@0.24", o, Scenario{Arch: arch, Plan: model.Plan{TP: 8},
		Workload: model.Workload{Phase: model.Prefill, Batch: 1, Context: 256, KVDtype: model.FP8}})
	if !pr.Graphed || !strings.Contains(pr.Engine, "DSA sparse") {
		t.Fatalf("the test needs a graphed sparse DSA prefill: graphed %v, engine %q", pr.Graphed, pr.Engine)
	}
	n, kernels := 0, 0
	for _, op := range pr.Ops {
		if op.Rank != 0 || !indexer[roleOf(op.ID)] {
			continue
		}
		n++
		k := 1 + op.Cost.ExtraKernels
		kernels += k
		if want := eagerKernelGapUs(dev) * float64(k); math.Abs(op.OverheadUs-want) > 1e-9 {
			t.Errorf("prefill %s: overhead %.3f us, want the eager gap %.3f", op.ID, op.OverheadUs, want)
		}
	}
	if n != 3*arch.Layers {
		t.Fatalf("%d indexer cache-write, score and top-k ops on rank 0, want 3 in each of %d layers", n, arch.Layers)
	}
	// The host time of the step's pieces with both ops' kernels eager:
	// one graph launch for the step, an eager launch for each kernel of
	// the two ops, a graph launch for each piece that opens after them.
	want, inPiece, pieces := dev.LaunchEagerUs, true, 1
	for _, op := range pr.Ops {
		if op.Rank != 0 {
			break
		}
		if _, mla := mlaOpRole(op.ID); mla || indexer[roleOf(op.ID)] {
			want += eagerUs * float64(1+op.Cost.ExtraKernels)
			inPiece = false
			continue
		}
		if !inPiece {
			want, inPiece, pieces = want+dev.LaunchEagerUs, true, pieces+1
		}
	}
	// The indexer op runs right before the attention op (mla.py), so the
	// two share the gap between a layer's pieces.
	checkPieces(t, "DSA prefill step", pieces, arch.Layers)
	if base, _, _, _ := piecewiseHostUs(pr, dev, eagerUs); math.Abs(pr.HostUs-want) > 1e-6*want || !(pr.HostUs >= base+eagerUs*float64(kernels)) {
		t.Errorf("prefill host %.3f us, want %.3f: the MLA op's launches and pieces alone give %.3f, the %d indexer kernels at %.2f us at least %.3f more", pr.HostUs, want, base, kernels, eagerUs, eagerUs*float64(kernels))
	}

	dec := predictEngine(t, box, "vllm@0.24", o, Scenario{Arch: arch, Plan: model.Plan{TP: 8},
		Workload: model.Workload{Phase: model.Decode, Batch: 8, Context: 4096, KVDtype: model.FP8}})
	if dec.HostUs != dev.LaunchEagerUs {
		t.Errorf("uniform decode step: host %.3f us, want one full graph's launch %.3f", dec.HostUs, dev.LaunchEagerUs)
	}
}

// TestDCPDecodeCapturesPiecewise: vLLM captures decode piecewise under
// DCP (check_and_update_config overrides the mode), the MLA op's kernels
// (the cache write, W_UK, the query all-gather, the decode attention, the
// LSE all-gather and output reduce-scatter, W_UV) eager between the
// pieces; the rotary embedding runs before the op in a piece, so a
// Kimi-K2.5 decode step at DCP 4 replays one piece more than its layers.
func TestDCPDecodeCapturesPiecewise(t *testing.T) {
	box := mustTopo(t, "rtxpro6000-2s")
	dev := box.DeviceOf(0)
	eagerUs := vllmEagerHostUs(t, dev)
	arch := mustPreset(t, "kimi-k2.5")
	pr := predictEngine(t, box, "vllm@0.24", Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS"}},
		Scenario{Arch: arch, Plan: model.Plan{TP: 8, DCP: 4}, Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.FP8}})
	if !pr.Graphed || !strings.Contains(pr.Engine, "piecewise") {
		t.Fatalf("the test needs a piecewise decode step: graphed %v, engine %q", pr.Graphed, pr.Engine)
	}
	want, roles, kernels, pieces := piecewiseHostUs(pr, dev, eagerUs)
	checkPieces(t, "DCP decode step", pieces, arch.Layers)
	for _, r := range []model.Role{model.RoleKVCacheWrite, model.RoleWUK, model.RoleDCPQAllGather, model.RoleMLADecode, model.RoleDCPLSEAllGather, model.RoleDCPOutReduceScatter, model.RoleWUV} {
		if roles[r] != arch.Layers {
			t.Errorf("%s: %d eager ops, want one in each of the %d layers", r, roles[r], arch.Layers)
		}
	}
	// The collectives pay NCCL's host extra on top of their launch.
	var coll float64
	for _, o := range pr.Ops {
		if o.Rank == 0 && strings.Contains(o.ID, ".attn.dcp_") && ncclAlgo(o.Cost.Algo) {
			coll += ncclHostExtraUs
		}
	}
	if math.Abs(pr.HostUs-(want+coll)) > 1e-6*want {
		t.Errorf("DCP decode step: host %.3f us, want %.3f (one graph launch, %d eager kernels at %.2f us, NCCL's host extra %.3f us, a graph launch for each of %d pieces after the first)", pr.HostUs, want+coll, kernels, eagerUs, coll, pieces-1)
	}
}
