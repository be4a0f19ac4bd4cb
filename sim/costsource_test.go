package sim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// fakeSource measures what its maps say: a module per first-op name
// (covering the named ops that follow it in the same layer), single ops
// by name, and every collective at collUs (recording the queries).
type fakeSource struct {
	modules map[string]struct {
		n  int     // ops covered, from the named one
		us float64 // measured time
	}
	single  map[string]float64
	collUs  float64
	queries []CollectiveQuery
	checkOK bool
}

func (f *fakeSource) Name() string { return "fake" }

func (f *fakeSource) OpCost(ops []model.Op, mods model.Modules, i int, dev *topology.Device) (Measured, bool) {
	for j := i; j >= 0 && j > i-8; j-- {
		if m, ok := f.modules[ops[j].Name]; ok && ops[j].Layer == ops[i].Layer && i < j+m.n {
			return Measured{Us: m.us, First: j, Last: j + m.n - 1, GapsIncluded: true, Where: "fake module " + ops[j].Name}, true
		}
	}
	if us, ok := f.single[ops[i].Name]; ok {
		return Measured{Us: us, First: i, Last: i, GapsIncluded: true, Where: "fake " + ops[i].Name}, true
	}
	return Measured{}, false
}

func (f *fakeSource) CollectiveCost(q CollectiveQuery) (Measured, bool) {
	f.queries = append(f.queries, q)
	if f.collUs <= 0 {
		return Measured{}, false
	}
	return Measured{Us: f.collUs, GapsIncluded: true, Where: "fake collective"}, true
}

func (f *fakeSource) Check(dev *topology.Device) error {
	if !f.checkOK {
		return errors.New("measured elsewhere")
	}
	return nil
}

func tinyPredict(t *testing.T, topo string, opts Options, src CostSource) *Prediction {
	t.Helper()
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(mustTopo(t, topo), opts)
	if err != nil {
		t.Fatal(err)
	}
	if src != nil {
		if err := p.UseCostSource(src); err != nil {
			t.Fatal(err)
		}
	}
	pr, err := p.PredictScenario(Scenario{Arch: a, Plan: model.Plan{TP: 8},
		Workload: model.Workload{Phase: model.Decode, Batch: 4, Context: 1000, KVDtype: model.BF16}})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// A module measurement is shared over its ops by their prior times and
// sums to the measurement (graph gaps included, as the table's graph
// replay included them); single ops cost their row; everything else
// keeps the prior and says so.
func TestCostSourceModules(t *testing.T) {
	opts := Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}
	base := tinyPredict(t, "rtxpro6000-2s", opts, nil)
	src := &fakeSource{checkOK: true, single: map[string]float64{"o_proj": 20}}
	src.modules = map[string]struct {
		n  int
		us float64
	}{"experts_gate_up": {3, 50}}
	pr := tinyPredict(t, "rtxpro6000-2s", opts, src)
	gap := mustTopo(t, "rtxpro6000-2s").DeviceOf(0).LaunchGraphUs
	modules, singles := 0, 0
	for i := range pr.Ops {
		o, b := &pr.Ops[i], &base.Ops[i]
		switch {
		case o.Layer >= 1 && strings.HasPrefix(o.ID[4:], "moe.experts_gate_up"):
			modules++
			act, down := &pr.Ops[i+1], &pr.Ops[i+2]
			sum := o.Us + act.Us + down.Us
			if math.Abs(sum-50) > 1e-9 {
				t.Errorf("%s: module ops sum to %.4f us, want the measured 50", o.ID, sum)
			}
			// Shares follow the prior: gate_up's share of the 50 - 3 gaps.
			priorSum := b.Cost.Us + base.Ops[i+1].Cost.Us + base.Ops[i+2].Cost.Us
			if want := (50 - 3*gap) * b.Cost.Us / priorSum; math.Abs(o.Cost.Us-want) > 1e-9 {
				t.Errorf("%s: share %.4f us, want %.4f", o.ID, o.Cost.Us, want)
			}
			if o.Cost.PriorUs != b.Cost.Us || !strings.HasPrefix(o.Cost.Source, "fake module experts_gate_up, share ") {
				t.Errorf("%s: prior %v source %q", o.ID, o.Cost.PriorUs, o.Cost.Source)
			}
		case strings.HasSuffix(o.ID, "attn.o_proj"):
			singles++
			if math.Abs(o.Us-20) > 1e-9 || o.Cost.Source != "fake o_proj" {
				t.Errorf("%s: %.4f us from %q, want the measured 20 from fake", o.ID, o.Us, o.Cost.Source)
			}
		case strings.Contains(o.ID, "experts_"):
		default:
			if o.Cost.Source != SourcePrior || o.Us != b.Us {
				t.Errorf("%s: %v us from %q, want the prior's %v", o.ID, o.Us, o.Cost.Source, b.Us)
			}
		}
	}
	// tiny-mla-moe: 4 layers, the first dense: 3 MoE layers, 4 o_proj.
	if modules != 3 || singles != 4 {
		t.Errorf("%d expert modules and %d o_proj measured, want 3 and 4", modules, singles)
	}
}

// Ops of the same shape but different names are priced apart when a
// source is in use (the cost memo then keys on the name too): two
// same-shaped norms built by hand, the fake measuring only the first.
func TestCostSourceMemoByName(t *testing.T) {
	a := model.Op{ID: "L00.attn.a", Name: "a", Kind: model.KindNorm, Layer: 0, Block: "attn", M: 4, N: 512, FLOPs: 8192, BytesRead: 8192, BytesWritten: 4096, ActDtype: model.BF16}
	b := a
	b.ID, b.Name = "L00.attn.b", "b"
	s := &model.Schedule{Model: "hand", Plan: model.Plan{TP: 1}, Workload: model.Workload{Phase: model.Decode, Batch: 1},
		Ranks: [][]model.Op{{a, b}}}
	p, err := New(mustTopo(t, "rtxpro6000-2s"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.UseCostSource(&fakeSource{checkOK: true, single: map[string]float64{"a": 40}}); err != nil {
		t.Fatal(err)
	}
	pr, err := p.Predict(s)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Ops[0].Cost.Source != "fake a" || pr.Ops[1].Cost.Source != SourcePrior || pr.Ops[1].Cost.Us >= pr.Ops[0].Cost.Us {
		t.Errorf("a: %v from %q; b: %v from %q: want a measured, b its prior", pr.Ops[0].Cost.Us, pr.Ops[0].Cost.Source, pr.Ops[1].Cost.Us, pr.Ops[1].Cost.Source)
	}
	if err := p.UseCostSource(&fakeSource{}); err == nil || !strings.Contains(err.Error(), "measured elsewhere") {
		t.Errorf("a source refusing the device: %v", err)
	}
}

// Collectives take the table only where its conditions hold (see
// collectiveMeasured).
func TestCostSourceCollectives(t *testing.T) {
	cases := []struct {
		name     string
		topo     string
		opts     Options
		measured bool
		custom   bool
		fabric   Fabric
	}{
		// P2P on every hop, NCCL free to choose: the table applies.
		{"p2p sys", "rtxpro6000-2s", Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}, true, false, FabricPCIe},
		// NCCL_PROTO=LL: NCCL picks LL for these small messages anyway.
		{"LL forced, same pick", "rtxpro6000-2s", Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS", Proto: "LL"}}, true, false, FabricPCIe},
		// Simple forced: not what the table measured at these sizes.
		{"Simple forced", "rtxpro6000-2s", Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS", Proto: "Simple"}}, false, false, ""},
		// NCCL_MIN_NCHANNELS=8: the ring runs 8 channels where the table
		// measured NCCL's own 2; NCCL_MAX_NCHANNELS=2 leaves NCCL's 2.
		{"more channels", "rtxpro6000-2s", Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS", MinChannels: 8}}, false, false, ""},
		{"max channels at NCCL's count", "rtxpro6000-2s", Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS", MaxChannels: 2}}, true, false, FabricPCIe},
		// Default P2P level: cross-socket hops through host memory.
		{"host-memory hops", "rtxpro6000-2s", Options{CUDAGraphs: true}, false, false, ""},
		// A one-shot kernel forced where vLLM would not run one.
		{"forced one-shot", "rtxpro6000-2s", Options{CUDAGraphs: true, CustomAR: CustomAROneShot, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}, false, false, ""},
		// NVLink box: vLLM's custom all-reduce, its own table (with its
		// default all-reduce + RMSNorm fusion off: the fused kernel is
		// FlashInfer's, which the table did not measure,
		// TestFusedAllReduceNotFromCustomTable).
		{"nvlink custom", "h200-nvswitch", Options{CUDAGraphs: true, ARNormFusion: ToggleOff}, true, true, FabricNVLink},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{checkOK: true, collUs: 7}
			pr := tinyPredict(t, tc.topo, tc.opts, src)
			gap := mustTopo(t, tc.topo).DeviceOf(0).LaunchGraphUs
			n := 0
			for i, o := range pr.Ops {
				if o.Kind != model.KindCollective || o.CommBytes != 4*256*2 {
					continue // the all-reduces of T x hidden x 2 B
				}
				n++
				if tc.measured != (o.Cost.Source == "fake collective") {
					t.Errorf("%s: source %q (%s/%s), measured %v wanted", o.ID, o.Cost.Source, o.Cost.Algo, o.Cost.Proto, tc.measured)
				}
				// vLLM fuses the RMSNorm after an all-reduce into it on
				// SM90 (the vllm@0.24 profile): the norm's traffic rides on
				// the measured all-reduce.
				fused := 0.0
				if i+1 < len(pr.Ops) && pr.Ops[i+1].Cost.Fused {
					fused = pr.Ops[i+1].Cost.MemoryUs
				}
				if tc.measured && (math.Abs(o.Cost.Us-(7-gap+fused)) > 1e-9 || o.Cost.PriorUs <= 0) {
					t.Errorf("%s: %.3f us (prior %.3f), want 7 - one graph gap", o.ID, o.Cost.Us, o.Cost.PriorUs)
				}
			}
			if n == 0 {
				t.Fatal("no all-reduce found")
			}
			if tc.measured {
				q := src.queries[0]
				if q.Custom != tc.custom || q.Fabric != tc.fabric || q.Ranks != 8 || !q.Graphed {
					t.Errorf("query %+v, want custom %v fabric %s 8 ranks graphed", q, tc.custom, tc.fabric)
				}
			}
		})
	}
}
