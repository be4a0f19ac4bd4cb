package sim

import (
	"fmt"
	"slices"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
)

// Caveats lists what a prediction of sc is known to get wrong on this box
// and which measurement would fix it. Each rule encodes a gap measured
// against public runs of 8x RTX PRO 6000 boxes (public_test.go, README
// "How accurate it is") and stays silent once the cost parameters it is
// about carry a calibration or the ops it is about are priced from a
// measured table (UseCostSource). Nil when none applies.
// NVFP4SM12Caveat is the caveat on NVFP4 experts on SM12x. Its figures
// are the seed's scenario's (Kimi-K2.5, vLLM 0.24 on 8x RTX PRO 6000,
// one request, BF16 KV, context 4096, LL, P2P SYS), each checked
// against a fresh prediction (sim TestPublicNVFP4RatioPairs,
// TestPublicNVFP4RatioTables, TestNVFP4CaveatExperts): the ratio
// depends on the scenario's shared time, so a figure of another
// scenario (0.82 under the nightly profile at NCCL's default protocol,
// quoted here until 2026-12-07) misstates what this user's step shows.
const NVFP4SM12Caveat = "NVFP4 experts on SM12x: public Kimi-K2.5 runs decode 25-45 % slower with NVFP4 than with INT4 experts; tpscope's priors price the FP4 kernels' 128-row tiles and the CUTLASS MoE runner's helper kernels at the MoE kernel floor each (NVFP4 / INT4 0.79 on Kimi-K2.5 at one request, context 4096, vLLM 0.24 on 8x RTX PRO 6000), the routed experts about 22 us a layer under vLLM's table at one token: likely optimistic; vLLM 0.24's measured MoE rows put the ratio at 0.70 (fix: --perf-db with aiconfigurator's tables, or tpscope calibrate --trace on this server's trace)"

func (p *Predictor) Caveats(sc Scenario) []string {
	var out []string
	a := sc.Arch
	if a == nil {
		return nil
	}
	measured := p.measuredOps(sc)
	plan := sc.Plan.Normalized()
	major, _ := p.dev.CCVersion()
	sm12 := major == 12

	// A box calibrated on a trace of another engine's kernels (its
	// efficiencies, ramps and floors are those kernels' figures) prices
	// this engine's kernels with them.
	if ce, name := p.dev.CalibratedEngine, p.cm.prof.Name(); ce != "" && ce != name {
		out = append(out, fmt.Sprintf("%s: its kernel figures were calibrated on %s's kernels (calibrate --trace of its run, or calibrate --backend cpu of the executor's), and this prices %s's with them: read the calibrated families as %s's (fix: calibrate on a trace of %s's run, or --engine %s)", p.topo.Name, ce, name, ce, name, ce))
	}

	// A topology file that left priced device fields out had them taken
	// from the GPU catalog (topology.Parse): the step is priced with
	// figures nobody wrote for this box.
	if c := p.dev.FromCatalog; c != nil {
		out = append(out, fmt.Sprintf("%s: device %q does not state %s; taken from the GPU catalog's %s (fix: state them in the topology file, or calibrate)", p.topo.Name, p.dev.Name, strings.Join(c.Fields, ", "), c.GPU))
	}

	// TestPublicNVFP4Ratio: NVFP4 experts decode 25-45 % slower than INT4
	// ones on SM120; the priors price the padded FP4 tiles, not the MoE
	// runner's helper kernels. The gap is that of a kernel with the
	// padded FP4 tiles the caveat names (the CUTLASS runners): under one
	// without them (--moe-kernel marlin, the executor's cuBLAS) the step
	// prices none of what it describes.
	if sm12 && a.RoutedExperts > 0 && a.Quant.Dtype(model.CompRoutedExperts) == model.NVFP4 && p.moePaddedFP4() && !p.calibratedFamily("moe_gemm") && !measured.role[model.RoleExpertsGateUp] {
		out = append(out, NVFP4SM12Caveat)
	}

	// What SM12x engines run of a DSA model (ImpliedDenseDSA).
	if sm12 && a.HasIndexer() {
		if sc.Build.DenseDSA {
			out = append(out, fmt.Sprintf("%s on SM12x: priced as dense MLA over the whole context without the indexer, as engines there run it (no DSA sparse kernels for SM12x); --dense-dsa=false prices the DSA path", a.Name))
		} else {
			out = append(out, fmt.Sprintf("%s on SM12x: priced with DSA sparse attention (--dense-dsa=false), which engines there do not run (no DSA sparse kernels for SM12x): read it as what such kernels would give", a.Name))
		}
	}

	// A DSA model the engine runs sparse on this family, under a profile
	// that states no sparse MLA backend: Profile.Backend prices a dense
	// one for it, whose kernel reads the indexer's top-k tokens in the
	// step as priced, though no engine runs a dense MLA kernel for a
	// sparse model (vLLM refuses every dense backend for one: its
	// sparse-select fact). The engine line names that backend; this says
	// it stands in.
	if k := &p.cm.engineKernels; a.HasIndexer() && !sc.Build.DenseDSA {
		kv := kvOf(sc.Workload.KVDtypeFor(a))
		if b := p.decodeBackend(sc); b != nil && !b.Sparse && sc.mlaUse(k.prof, k.arch, kv).Sparse {
			fix := ""
			if alt := sparseEngines(sc, k.arch, kv); len(alt) > 0 {
				fix = " (fix: --engine " + strings.Join(alt, " or ") + ", whose profile states a sparse MLA backend for it here)"
			}
			out = append(out, fmt.Sprintf("%s runs DSA sparse attention, and %s's profile states no sparse MLA backend: its dense %s stands in, priced over the indexer's top-k tokens, for the engine's sparse kernel, which is not priced%s", a.Name, k.prof.Name(), b.Name, fix))
		}
	}

	// What an FP8 cache on the decode backend needs of the engine's
	// build on this GPU family (the profile's fp8_kv_needs; advise's
	// fp8-kv entry states the same condition).
	if b := p.decodeBackend(sc); b != nil && kvOf(sc.Workload.KVDtypeFor(a)) == engprof.KVFP8 && b.FP8KVNeeds.On(p.cm.arch) {
		out = append(out, fmt.Sprintf("FP8 KV cache with %s on %s: %s", b.Name, strings.ToUpper(p.cm.arch.String()), b.FP8KVNeeds))
	}

	// TestPublicLongContextNoDCPGap: how many CTAs read a long cache at
	// small batch depends on the vLLM build (SetTritonMLASplits).
	w := sc.Workload
	if b := p.decodeBackend(sc); (w.Phase == "" || w.Phase == model.Decode) && b != nil && b.Grid.Kind == engprof.GridSplitKV && b.Grid.FixedSplits == 0 && p.cm.tritonFixedSplits == 0 && plan.DCP <= 1 && w.Context >= 65536 && !p.calibratedFamily("attention") && !measured.role[model.RoleMLADecode] {
		out = append(out, fmt.Sprintf("long context on %s without DCP: tpscope prices %s, which splits the cache over up to %dx the SMs; builds with a fixed 4 KV splits are several times slower here (a public 150K-token run: ~6-7 tok/s, which --engine vllm@0.16-nightly reproduces) (fix: --dcp, or tpscope calibrate --trace)", b.Name, p.cm.prof.Name(), b.Grid.SplitOccupancy))
	}

	// TestPublicAllReduce, TestPublicBatchTrend and the seed: small NCCL
	// all-reduces on PCIe boxes differ from NCCL's constants, in both
	// directions.
	// The plan's GPUs, not the box's: a TP group NVLink joins on a box
	// whose other GPUs only PCIe reaches (nvl:8x pairs, --gpus) has no
	// PCIe collective to speak of.
	if cm, ok := p.coll.(*CollectiveModel); ok && plan.World() > 1 && !NVLinkAmong(p.topo, plan.World()) && !cm.calibrated() && !measured.allReduce {
		out = append(out, "NCCL collectives priced with NCCL's stock constants: on PCIe boxes small all-reduces measure off them in both directions (they predict 18-42 % above the measured time up to 64 KB on a public 8-GPU switch box, 17-37 % above public loops below 100 KB on a dual-socket box of the seed's class) (fix: tpscope calibrate --nccl-tests on this box's all_reduce_perf log)")
		// TestPublicSHMGap: ring steps through host memory.
		if g := cm.group(FirstRanks(plan.TP)); g.shmHops > 0 {
			out = append(out, fmt.Sprintf("host-memory ring hops: %d of %d go through host memory (P2P level or P2P disabled), priced at %.3g us a step, the cudaMemcpy bounce latency; a public run with P2P disabled and 32-64 NCCL channels implied ~2.4 us: these collectives may be priced too slow (fix: tpscope calibrate --nccl-tests under the same P2P setting)",
				g.shmHops, g.n, p.topo.Host.SHMLatUs))
		}
	}

	// TestLeaveOneSystemOut, TestUnseenGPUTables: on HBM datacenter GPUs
	// (SM 9.x, 10.x) the priors run 9-24 % under vLLM 0.24's measured
	// tables at one request (2026-12-08, the medians this caveat quotes),
	// where the engine's one-token MLA kernels take more than their bytes
	// and the catalog's floors (the INT4 Marlin experts' excess is priced
	// since, engprof.SMStream.CallCycles); within 15 % from 8 requests but
	// the GB200's and GB300's 11-12 %; the transfer within 1-16 % at one
	// request. tpscope's own kernels (the executor profile) are what the
	// priors describe.
	hbm := major == 9 || major == 10
	if hbm && p.cm.prof.Engine != engprof.ExecutorRef.Name && (w.Phase == "" || w.Phase == model.Decode) && w.Batch >= 1 && w.Batch <= 2 &&
		!measured.role[model.RoleMLADecode] && !p.calibratedFamily("attention") {
		// The evidence is vLLM's kernels: under another engine the caveat
		// says its own one-token kernels were not measured.
		whose := "the engine's one-token MLA kernels take"
		if p.cm.prof.Engine != "vllm" {
			whose = fmt.Sprintf("vLLM's one-token MLA kernels take (%s's own were not measured)", p.cm.prof.Name())
		}
		out = append(out, "one-request decode on an HBM datacenter GPU: held out against vLLM 0.24's measured tables the priors run 9-24 % under at one request (median: H100 SXM 24 %, H200 15 %, GB200 13 %, GB300 11 %, B300 10 %, B200 9 %; within 15 % from 8 requests): "+whose+" more than their bytes and the catalog's floors: likely optimistic (fix: --perf-db with this GPU's tables, or another GPU's with --perf-db-transfer: within 1-16 % at one request; or tpscope calibrate --trace on this server's trace)")
	}

	// A decode batch above the running limit the engine starts with on
	// this GPU (vLLM's max_num_seqs default, EngineArgs.get_batch_defaults:
	// the profile's scheduler.batch_defaults) is a step the default server
	// never runs: it was launched with a larger --max-num-seqs, which
	// also sizes the profiling step its KV pool is measured after, so the
	// step is priced as given and the pool at the default's step.
	// The limit is plan's (Scenario.RunningLimitOf), which leaves such a
	// batch out; SGLang's default, from its pool, is not taken here.
	// The predictor's box and options are the scenario's (PredictScenario
	// takes a scenario without them).
	onBox := sc
	onBox.Topo, onBox.Options = p.topo, p.opts
	if l := onBox.RunningLimitOf(0); l.Default && l.PerGroupSeqs > 0 && (w.Phase == "" || w.Phase == model.Decode) {
		if per := (w.Batch + plan.DP - 1) / plan.DP; per > l.PerGroupSeqs {
			out = append(out, fmt.Sprintf("decode batch of %d sequences a scheduler (DP group): %s runs at most %d by default on this GPU (%s), so the server ran with --max-num-seqs of at least %d, which also sizes the profiling step its KV pool is measured after (fix: --max-num-seqs as the server was launched)", per, p.cm.prof.Name(), l.PerGroupSeqs, l.Knob, per))
		}
	}

	// Known biases of measured tables that kept ops at their priors or
	// corrected a measurement (perfdb.Source.Notes).
	if n, ok := p.src.(interface{ Notes() []string }); ok && measured.role != nil {
		out = append(out, n.Notes()...)
	}

	// checkOneShot: a public one-shot kernel lost to NCCL on dual-CPU
	// boxes; the model prices cross-socket reads optimistically.
	if (p.opts.CustomAR == CustomAROneShot || p.opts.CustomAR == CustomARTwoShot) && p.topo.SpansSockets(plan.TP) && !NVLinkAmong(p.topo, plan.TP) {
		out = append(out, "custom all-reduce across CPU sockets: a public one-shot PCIe kernel ran slower than NCCL on dual-CPU boxes; read this prediction as an upper bound")
	}
	// NCCL_ALGO letting NCCL use an algorithm tpscope does not price
	// where the box has it (Ring,NVLS or ^Ring on an NVSwitch with NVLink
	// SHARP; ncclenv.Settings.Algorithms): the collectives are Ring's or
	// Tree's, where NCCL may pick NVLS. A name the box lacks (NVLS on
	// PCIe) enables nothing there, and says nothing.
	if c := UnmodelledAlgoCaveat(p.opts.NCCL, NVLSAmong(p.topo, plan.World()), pricedCollectives...); c != "" {
		out = append(out, c)
	}
	// --ar-norm-fusion where the engine's profile lists no all-reduce +
	// RMSNorm fusion for this GPU family: advise prices it as a kernel to
	// build (its ar-norm-fusion row), so it is priced, not refused, and
	// said so.
	if p.opts.ARNormFusion == ToggleOn && plan.TP > 1 {
		name := p.cm.prof.Name()
		switch archs, listed := p.cm.prof.FusionArchs(engprof.FuseAllReduceRMSNorm); {
		case !listed:
			out = append(out, fmt.Sprintf("--ar-norm-fusion: %s's profile records no all-reduce + RMSNorm fusion, so this needs a fused kernel loaded into it; read this prediction as what such a kernel would give", name))
		case !archs.Has(p.cm.arch):
			fams := make([]string, len(archs))
			for i, a := range archs {
				fams[i] = a.String()
			}
			out = append(out, fmt.Sprintf("--ar-norm-fusion on %s: %s fuses the all-reduce with RMSNorm only on %s (its profile's fusions), so this needs an out-of-tree fused kernel; read this prediction as what such a kernel would give", p.cm.arch, name, strings.Join(fams, ", ")))
		}
	}
	// A forced custom all-reduce the engine does not run on this group
	// (its profile's custom_allreduce rules) is a kernel someone must
	// build and load beside it: the price is what it would give.
	if forced := p.opts.CustomAR; (forced == CustomAROneShot || forced == CustomARTwoShot) && plan.TP > 1 {
		nvl := NVLinkAmong(p.topo, plan.TP)
		if ok, _ := p.cm.prof.AllReduce.Runs(plan.TP, nvl, 0); !ok {
			why := "has no custom all-reduce"
			switch ar := p.cm.prof.AllReduce; {
			case ar.Enabled && !nvl && ar.PCIeMaxGPUs < 2:
				why = "runs its custom all-reduce only on GPUs joined by NVLink"
			case ar.Enabled && !nvl && plan.TP > ar.PCIeMaxGPUs:
				why = fmt.Sprintf("runs its custom all-reduce on at most %d PCIe-only GPUs", ar.PCIeMaxGPUs)
			case ar.Enabled:
				why = fmt.Sprintf("runs no custom all-reduce on %d GPUs", plan.TP)
			}
			out = append(out, fmt.Sprintf("--custom-ar %s on %d GPUs: %s %s (its profile), so this needs an out-of-tree %s all-reduce kernel loaded into it; read this prediction as what such a kernel would give (--custom-ar auto prices what the engine runs)", forced, plan.TP, p.cm.prof.Name(), why, forced))
		}
	}
	return out
}

// moePaddedFP4 reports whether the engine's MoE kernel for NVFP4 experts
// on this GPU family computes padded tiles (engprof.PaddedTiles), the
// mechanism the NVFP4 caveat is about.
func (p *Predictor) moePaddedFP4() bool {
	mk := p.cm.engineKernels.moeKernel(model.NVFP4)
	return mk != nil && mk.Padded.On(p.cm.arch, engprof.NVFP4)
}

// measured says which ops of a scenario's rank-0 schedule the cost
// source prices: per role, its first instance; allReduce, the first
// all-reduce. Zero without a source.
type measured struct {
	role      map[model.Role]bool
	allReduce bool
}

// measuredOps prices the first instance of every role of sc's rank-0
// schedule the way a prediction does, so a caveat goes quiet exactly when
// the table is used.
func (p *Predictor) measuredOps(sc Scenario) measured {
	if p.src == nil {
		return measured{}
	}
	s, err := p.schedule(sc)
	if err != nil || len(s.Ranks) == 0 {
		return measured{}
	}
	saved := p.graphed
	p.graphed, p.mods = s.Deploy.Graphed, s.Modules
	p.cm.noteSchedule(s) // the backends and their grids are this schedule's
	defer func() { p.graphed = saved; p.endRun() }()
	out := measured{role: map[model.Role]bool{}}
	seen := map[model.Role]bool{}
	firstAR := true
	ops := s.Ranks[0]
	fuseAR, caps := p.arFusion(s)
	for i := range ops {
		op := &ops[i]
		ar := firstAR && op.Collective == model.AllReduce
		if ar {
			firstAR = false
		}
		if seen[op.Role] {
			continue
		}
		seen[op.Role] = true
		var c OpCost
		if op.IsCollective() {
			if c, err = p.collectiveCost(op, fuseAR && normFusable(ops, i+1, caps)); err != nil {
				continue
			}
		} else {
			c = p.computeCost(ops, i)
		}
		out.role[op.Role] = c.Source != SourcePrior
		if ar {
			out.allReduce = out.role[op.Role]
		}
	}
	return out
}

// calibratedFamily reports whether trace calibration set a parameter of
// the kernel family (calibrate.ApplyCompute writes "efficiency.<family>[/<dtype>]",
// "efficiency.mem/<family>[/<dtype>]" and "ramp_us.<family>[/<dtype>]"
// sources starting "calibrated").
func (p *Predictor) calibratedFamily(family string) bool {
	for k, v := range p.dev.Sources {
		if !strings.HasPrefix(v, "calibrated") {
			continue
		}
		k = strings.TrimPrefix(k, "ramp_us.")
		k = strings.TrimPrefix(k, "efficiency.")
		k = strings.TrimPrefix(k, "mem/")
		if k == family || strings.HasPrefix(k, family+"/") {
			return true
		}
	}
	return false
}

// calibrated reports whether any collective cost of the model comes from a
// calibration that applies under its P2P setting.
func (m *CollectiveModel) calibrated() bool {
	for oi := range m.calib {
		for a := range m.calib[oi] {
			for pr := range m.calib[oi][a] {
				if m.calib[oi][a][pr] != nil {
					return true
				}
			}
		}
	}
	return false
}

// FirstRanks is the group 0..n-1: the GPUs of a plan's first group of n
// ranks (model's schedule lays each group over consecutive ranks).
func FirstRanks(n int) []int {
	g := make([]int, n)
	for i := range g {
		g[i] = i
	}
	return g
}

// collectiveNames are how the unmodelled-algorithm caveat names an NCCL
// collective: one of them, and their ops as a kind.
var collectiveNames = map[ncclenv.Collective][2]string{
	ncclenv.AllReduce:     {"all-reduce", "all-reduces"},
	ncclenv.AllGather:     {"all-gather", "all-gathers"},
	ncclenv.ReduceScatter: {"reduce-scatter", "reduce-scatters"},
}

// pricedCollectives are the collectives a step's schedule prices through
// NCCL_ALGO: what a prediction's caveat speaks of.
var pricedCollectives = []ncclenv.Collective{ncclenv.AllReduce, ncclenv.AllGather, ncclenv.ReduceScatter}

// UnmodelledAlgoCaveat is the caveat of an NCCL_ALGO under which NCCL may
// run an algorithm tpscope does not price for ops on the box (nvls:
// NVSwitch-joined GPUs of Hopper or later, NVLSAmong), each op under its
// own clause (ncclenv.Settings.Algorithms): the ops priced with Ring or
// Tree alone where NCCL may pick NVLS, and the ops the setting leaves
// NVLS alone (^Ring, allgather:nvls), priced as Ring; "" where NCCL_ALGO
// is not set or enables nothing unpriced here. Predictions ask it of the
// collectives a step runs; the collective verb of its one op.
func UnmodelledAlgoCaveat(s ncclenv.Settings, nvls bool, ops ...ncclenv.Collective) string {
	if strings.TrimSpace(s.Algo) == "" {
		return ""
	}
	type group struct {
		priced, un string
		names      []string
	}
	var partial, only []*group
	var un []string
	add := func(gs []*group, priced, u []string, name string) []*group {
		for _, g := range gs {
			if g.priced == strings.Join(priced, " and ") && g.un == strings.Join(u, " or ") {
				g.names = append(g.names, name)
				return gs
			}
		}
		return append(gs, &group{strings.Join(priced, " and "), strings.Join(u, " or "), []string{name}})
	}
	for _, op := range ops {
		priced, u := s.Algorithms(op, nvls)
		for _, a := range u {
			if !slices.Contains(un, a) {
				un = append(un, a)
			}
		}
		switch names := collectiveNames[op]; {
		case len(u) == 0:
		case len(priced) > 0:
			partial = add(partial, priced, u, names[1])
		default:
			only = add(only, priced, u, names[0])
		}
	}
	var parts []string
	for _, g := range partial {
		what := "the " + strings.Join(g.names, " and ")
		if len(g.names) == len(pricedCollectives) {
			what = "the collectives"
		}
		parts = append(parts, fmt.Sprintf("%s are priced with %s alone, where NCCL may pick %s", what, g.priced, g.un))
	}
	for _, g := range only {
		parts = append(parts, fmt.Sprintf("NCCL runs any %s with %s, priced as Ring", strings.Join(g.names, " or "), g.un))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("--nccl-algo %s: %s not modelled; %s: read them as an upper bound", s.Algo, strings.Join(un, ", "), strings.Join(parts, "; "))
}

// sparseEngines are the engine profiles that run sc's DSA model with a
// sparse MLA backend of their own on family a with KV dtype kv, as
// engine@version.
func sparseEngines(sc Scenario, a engprof.Arch, kv engprof.KVDtype) []string {
	profs, err := engprof.Profiles()
	if err != nil {
		return nil
	}
	var out []string
	for _, q := range profs {
		if b, err := q.Backend(sc.mlaUse(q, a, kv), ""); err == nil && b.Sparse {
			out = append(out, q.Name())
		}
	}
	return out
}
