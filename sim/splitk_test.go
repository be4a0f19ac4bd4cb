package sim_test

import (
	"math"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/perfdb"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// TestSplitKReduceKernel: cuBLAS splits the K of a bf16 GEMM of K 3072
// or more whose outputs are few for its K (up to K at one token) and sums
// the splits in a kernel of its own on Hopper (engine profile
// split_k_reduce, measured on an H100), so Kimi-K2.5's router gate (7168
// x 384) launches two kernels under the executor and under vLLM on an
// H100 box, each paying the GEMM's floor and a graph node; o_proj (K
// 1024) one; and on an RTX PRO 6000 (SM120, where it was not measured)
// the gate one.
func TestSplitKReduceKernel(t *testing.T) {
	a, err := model.Preset("kimi-k2.5")
	if err != nil {
		t.Fatal(err)
	}
	ops := func(box, eng string, graphs ...bool) map[model.Role]sim.OpResult {
		t.Helper()
		topo, err := topology.Resolve(box, 0)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := engprof.ParseRef(eng)
		if err != nil {
			t.Fatal(err)
		}
		pr, sched, err := sim.Predict(sim.Scenario{Arch: a, Plan: model.Plan{TP: 8}, Topo: topo,
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16},
			Options:  sim.Options{CUDAGraphs: len(graphs) == 0 || graphs[0], Engine: ref}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[model.Role]sim.OpResult{}
		for i, op := range pr.Ops {
			if op.Rank == 0 && op.Layer == 3 {
				out[sched.Ranks[0][i].Role] = op
			}
		}
		return out
	}
	for _, eng := range []string{"executor", "vllm@0.24"} {
		h := ops("nvswitch:8xh100-sxm", eng)
		gate, oproj := h[model.RoleMoEGate], h[model.RoleOProj]
		if !gate.Cost.SplitKReduce || gate.Cost.ExtraKernels != 1 {
			t.Errorf("%s, H100: the router gate (K %d) has split_k_reduce %v and %d extra kernels, want the reduction as one", eng, 7168, gate.Cost.SplitKReduce, gate.Cost.ExtraKernels)
		}
		if oproj.Cost.SplitKReduce || oproj.Cost.ExtraKernels != 0 {
			t.Errorf("%s, H100: o_proj (K 1024) has split_k_reduce %v and %d extra kernels, want one kernel", eng, oproj.Cost.SplitKReduce, oproj.Cost.ExtraKernels)
		}
		if want := gate.Cost.MinKernelUs; math.Abs(gate.Cost.ExtraKernelsUs-want) > 1e-9 {
			t.Errorf("%s, H100: the reduction costs %.3f us, want the GEMM's floor %.3f", eng, gate.Cost.ExtraKernelsUs, want)
		}
		r := ops("rtxpro6000-2s", eng)[model.RoleMoEGate]
		if r.Cost.SplitKReduce || r.Cost.ExtraKernels != 0 {
			t.Errorf("%s, RTX PRO 6000: the router gate has split_k_reduce %v, %d extra kernels, want one kernel (not seen on SM120)", eng, r.Cost.SplitKReduce, r.Cost.ExtraKernels)
		}
	}
	// The node gap: the executor's gate pays two of the H100's. Run
	// eagerly, the reduction is launched within cuBLAS's call: one host
	// launch for the gate's two kernels (the device's LaunchEagerUs
	// under the executor, which states no eager host time of its own).
	topo, _ := topology.Resolve("nvswitch:8xh100-sxm", 0)
	gate := ops("nvswitch:8xh100-sxm", "executor")[model.RoleMoEGate]
	if want := 2 * topo.DeviceOf(0).LaunchGraphUs; math.Abs(gate.OverheadUs-want) > 1e-9 {
		t.Errorf("executor, H100: the gate's overhead %.3f us, want two graph nodes, %.3f", gate.OverheadUs, want)
	}
	eager := ops("nvswitch:8xh100-sxm", "executor", false)[model.RoleMoEGate]
	if want := topo.DeviceOf(0).LaunchEagerUs; !eager.Cost.SplitKReduce || math.Abs(eager.LaunchUs-want) > 1e-9 {
		t.Errorf("executor, H100, eager: the gate's host launch %.3f us (split-K reduction %v), want one launch, %.3f", eager.LaunchUs, eager.Cost.SplitKReduce, want)
	}
}

// TestSplitKReduceMeasuredGEMM: a GEMM priced from a measured table holds
// its library's kernels in the measurement, the split-K reduction
// included: no extra kernel, and, eager, its one host launch (it had
// none when the reduction stayed marked on a measured op).
func TestSplitKReduceMeasuredGEMM(t *testing.T) {
	db := sampleDB(t)
	a, err := model.Preset("kimi-k2.5")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Resolve("nvswitch:8xh200-sxm", 0)
	if err != nil {
		t.Fatal(err)
	}
	src, err := perfdb.NewSource(db, perfdb.SourceConfig{Device: topo.DeviceOf(0).Name, Profile: engprof.Ref{Name: "vllm"}})
	if err != nil {
		t.Fatal(err)
	}
	sc := sim.Scenario{Arch: a, Plan: model.Plan{TP: 8}, Topo: topo, Costs: src,
		Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16},
		Options:  sim.Options{Engine: engprof.Ref{Name: "vllm"}}}
	pr, sched, err := sim.Predict(sc)
	if err != nil {
		t.Fatal(err)
	}
	measured := 0
	for i, op := range pr.Ops {
		if op.Rank != 0 || sched.Ranks[0][i].Role != model.RoleMoEGate || op.Cost.Source == sim.SourcePrior {
			continue
		}
		measured++
		if op.Cost.SplitKReduce || op.Cost.ExtraKernels != 0 || !(op.LaunchUs > 0) {
			t.Errorf("%s from %s: split-K reduction %v, %d extra kernels, host launch %.2f us; want none, none and one launch", op.ID, op.Cost.Source, op.Cost.SplitKReduce, op.Cost.ExtraKernels, op.LaunchUs)
		}
	}
	if measured == 0 {
		t.Skip("no router gate priced from the tables here")
	}
}
