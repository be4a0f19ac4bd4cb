package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/calibrate/nccltests"
	"github.com/tpscope/tpscope/exec/collbench"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

var collectiveVerb = &Verb{
	UsageLine: "collective [flags]",
	Short:     "predict a collective's time, algbw and busbw per message size on a topology",
	Long: `Predicts one NCCL collective (or a custom one-/two-shot all-reduce) per message size, in
nccl-tests conventions: size in bytes (all-reduce: the buffer; all-gather: the gathered output),
each --sizes value rounded down as nccl-tests sizes its buffers (whole float elements; all-gather,
reduce-scatter and all-to-all a multiple of 16 B a rank; a note on stderr names the sizes moved),
time in microseconds, algbw = size / time and busbw = algbw x 2(n-1)/n (all-reduce) or (n-1)/n
(others), in GB/s. The algorithm/protocol is NCCL's own choice (its cost model replayed on the
topology) unless --nccl-proto / --nccl-algo restrict it; nccl_us is NCCL's estimate, time_us tpscope's
(achieved link bandwidths, host-memory hops beyond --p2p-level, calibration when the topology
carries it). The group is the first --ranks GPUs.

--measure also runs the collective through tpscope's executor at each size (exec/collbench: one
step holds --iters back-to-back ops per size; warm-up steps, then --steps measured steps) on
--backend cuda (NCCL on the first --ranks GPUs of this process; the NCCL flags are exported as
NCCL_* variables) or cpu (goroutine ranks, shared-memory ring collectives checked against a serial
sum), and prints the measured time (mean over steps, iterations and ranks, as nccl-tests reports
it) beside the prediction on --topo's box; on the cpu backend only when --topo is given (goroutine
ranks are no GPU box: without it the table says no prediction is beside them). -o FILE writes the measurement as nccl-tests output, which
'calibrate --nccl-tests FILE' reads; --reference FILE shows another nccl-tests log of the same
collective (nccl-tests itself, or scripts/gpu-collectives-torch.py) beside it.`,
	Example: "tpscope collective --topo rtxpro6000-2s --op allreduce --ranks 8 --sizes 512:512M\ntpscope collective --topo h200-nvswitch --op allgather --sizes 1K:1G --output json\ntpscope collective --op allreduce --sizes 8K:1M --p2p-level SYS --custom-ar oneshot\ntpscope collective --topo h200-nvswitch --op allreduce --sizes 256K:64M --custom-ar multimem\ntpscope collective --measure --backend cuda --topo h200-nvswitch --ranks 8 --op allreduce --sizes 512:512M -o all_reduce_perf.txt --reference torch-all_reduce_perf.txt\ntpscope collective --measure --backend cpu --ranks 4 --op allgather --sizes 512:1M --iters 3 -o all_gather_perf.txt",
	New:     func() Options { return newCollectiveOptions() },
}

// collectiveOptions are collective's flags.
type collectiveOptions struct {
	boundFlags
	topo     string
	op       string
	ranks    int // the first N GPUs; 0 = all
	sizes    string
	nccl     sim.Options // the NCCL options (the fields that set an NCCL variable), bound through the options' codec
	customAR string
	noCal    bool
	output   string
	meas     *measureFlags
}

func newCollectiveOptions() *collectiveOptions {
	return &collectiveOptions{topo: topology.DefaultPreset, op: "allreduce", sizes: "512:512M", output: formatTable, meas: newMeasureFlags()}
}

func (o *collectiveOptions) Bind(fs *pflag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.topo, "topo", o.topo, topoHelp)
	wantWhenEmpty(fs, "topo", topoWant)
	fs.StringVar(&o.op, "op", o.op, "collective: allreduce, allgather, reducescatter, alltoall")
	fs.IntVar(&o.ranks, "ranks", o.ranks, "ranks taking part: the first N GPUs of --topo (0 = all); --measure on the cpu backend without --topo: N goroutine ranks, which it needs")
	fs.StringVar(&o.sizes, "sizes", o.sizes, "sizes MIN:MAX (doubling, K/M/G = 1024 multiples) or one size")
	// The NCCL flags are the scenario verbs' own definitions (one per
	// field of sim.Options that sets an NCCL variable).
	for _, of := range sim.OptionFields() {
		if of.Env == "" {
			continue
		}
		fs.Var(&optionValue{f: of, o: &o.nccl}, of.Name, of.Help)
		if of.Kind == sim.OptionBool {
			fs.Lookup(of.Name).NoOptDefVal = "true"
		}
	}
	fs.StringVar(&o.customAR, "custom-ar", o.customAR, "all-reduce only: oneshot or twoshot custom all-reduce over P2P, or multimem (torch's symmetric-memory all-reduce, which vLLM runs on GPUs that share an NVSwitch of Hopper or later, whose multicast memory it needs), instead of NCCL")
	wantWhenEmpty(fs, "custom-ar", "oneshot, twoshot or multimem")
	fs.BoolVar(&o.noCal, "no-calibration", o.noCal, "ignore calibrated parameters in the topology file")
	bindOutputFlag(fs, &o.output, "one row per size", allFormats...)
	o.meas.bind(fs)
}

// interruptible: a --measure run stops its ranks when ctx ends.
func (o *collectiveOptions) interruptible() {}

func (o *collectiveOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(args) > 0 {
		return usageErrorf("collective takes no arguments, got %q", args)
	}
	if err := checkOutput(o.output, allFormats...); err != nil {
		return err
	}
	coll, err := parseCollective(o.op)
	if err != nil {
		return causeError("--op", nil, err)
	}
	sz, err := parseSizeRange(o.sizes)
	if err != nil {
		return causeError("--sizes", nil, err)
	}
	if o.customAR != "" && o.customAR != "oneshot" && o.customAR != "twoshot" && o.customAR != "multimem" {
		return flagError("--custom-ar", quote(o.customAR), "want oneshot, twoshot or multimem")
	}
	if o.customAR != "" && coll != model.AllReduce {
		return flagError("--custom-ar", o.customAR, "an all-reduce kernel; --op is %s", coll)
	}
	// Each NCCL flag read alone with NCCL's grammar, before any work: a
	// refusal names its flag.
	if err := checkOptionFlags(&o.nccl, func(of sim.OptionField) bool { return of.Env != "" }); err != nil {
		return err
	}
	if coll == model.AllToAll && o.fs.Changed("nccl-algo") {
		// NCCL_ALGO picks among the collective algorithms; an all-to-all
		// is grouped point-to-point sends and receives (its protocol
		// still follows NCCL_PROTO).
		return flagError("--nccl-algo", o.nccl.NCCL.Algo, "NCCL runs alltoall as grouped point-to-point sends and receives, which NCCL_ALGO does not choose among: drop it")
	}
	if o.customAR != "" {
		// A custom all-reduce (P2P loads and stores, or multimem) runs no
		// NCCL: NCCL's protocol, algorithm and channels price nothing
		// beside it. The P2P settings are the box's (the same command
		// with and without --custom-ar compares the two on it), and
		// NCCL_P2P_DISABLE is its own refusal: the kernel needs P2P.
		for _, of := range sim.OptionFields() {
			if of.Env == "" || of.Name == "p2p-disable" || of.Name == "p2p-level" || !o.fs.Changed(of.Name) {
				continue
			}
			return flagError("--"+of.Name, of.Get(&o.nccl), "--custom-ar %s prices a custom all-reduce, which runs no NCCL (%s does not apply): drop one", o.customAR, of.Env)
		}
	}
	t, err := topology.Resolve(o.topo, 0)
	if err != nil {
		return causeError("--topo", nil, err)
	}
	// --measure on the cpu backend without --topo runs goroutine ranks
	// and predicts nothing: no box's GPUs bound or count them.
	cpuNoBox := o.meas.on && o.meas.backend == "cpu" && !o.given("topo", o.topo != topology.DefaultPreset)
	if o.noCal && cpuNoBox {
		// No prediction is set beside the measurement: nothing is
		// priced, calibrated or not.
		return flagError("--no-calibration", nil, "sets aside a box's calibration in the prediction, and --measure on the cpu backend without --topo predicts nothing: drop it, or name the box with --topo")
	}
	if o.noCal && (t.Calibration == nil || len(t.Calibration.Collectives) == 0) {
		// The calibration is the only thing it sets aside (sim's
		// CollectiveModel reads nothing else of it): on a box without
		// one the rows are NCCL's constants either way.
		return flagError("--no-calibration", nil, "--topo %s carries no calibrated collective parameters, so its rows are priced from NCCL's constants with or without it: drop it ('tpscope calibrate' writes a calibrated box)", o.topo)
	}
	n := o.ranks
	switch {
	case cpuNoBox && n == 0:
		// "All" GPUs of a box not named: it had measured the default
		// preset's 8 goroutine ranks.
		return flagError("--ranks", nil, "--measure on the cpu backend without --topo runs goroutine ranks, no box's GPUs: name how many (2 to %d), or the box with --topo", collbench.MaxRanks)
	case cpuNoBox && n > collbench.MaxRanks:
		return flagError("--ranks", n, "the cpu backend runs 2 to %d goroutine ranks", collbench.MaxRanks)
	case cpuNoBox:
	case n == 0:
		n = t.NumGPUs()
		fallthrough
	default:
		if n < 1 || n > t.NumGPUs() {
			return flagError("--ranks", n, "topology %s has %d GPUs", t.Name, t.NumGPUs())
		}
	}
	if n == 1 {
		// One rank moves nothing between GPUs, predicted or measured
		// (the executor's collective benchmark needs peers).
		if o.ranks == 0 {
			return flagError("--ranks", nil, "topology %s has one GPU, and a collective of one rank moves no bytes between GPUs: want a box of 2 or more", t.Name)
		}
		return flagError("--ranks", n, "a collective of one rank moves no bytes between GPUs: want 2 or more")
	}
	// A prediction is of the sizes nccl-tests runs; a measurement runs
	// its own (exec/collbench) and predicts beside them.
	note := ""
	if !o.meas.on {
		if sz, note, err = sizesAsRun(o.sizes, coll, n, sz); err != nil {
			return err
		}
	}
	if nvls := sim.NVLSAmong(t, n); (coll == model.AllGather || coll == model.ReduceScatter) && o.nccl.NCCL.Fails(ncclenv.Collective(coll), nvls) {
		// NCCL has no Tree all-gather or reduce-scatter, and NVLS only
		// over NVLink SHARP: under a list (the op's own clause, where
		// NCCL_ALGO has one) of neither it fails the call instead of
		// running Ring.
		if o.nccl.NCCL.NVLSWithoutSimple(ncclenv.Collective(coll), nvls) {
			// NCCL runs NVLS with Simple alone
			// (ncclenv.Settings.NVLSWithoutSimple).
			return flagError("--nccl-algo "+o.nccl.NCCL.Algo+" and --nccl-proto", o.nccl.NCCL.Proto, "they leave NCCL no algorithm/protocol pair for --op %s on the first %d GPUs of %s: NVLS alone, which NCCL runs with Simple only, and Simple off, so NCCL fails the call (\"no algorithm/protocol available for function\", ncclInvalidUsage): keep Simple for it or Ring among the algorithms", coll, n, t.Name)
		}
		if o.nccl.NCCL.NoProtocol(ncclenv.Collective(coll)) {
			return flagError("--nccl-proto", o.nccl.NCCL.Proto, "it leaves NCCL no protocol for --op %s (its %s clause enables none of LL, LL128, Simple), so NCCL fails the call (\"no algorithm/protocol available for function\", ncclInvalidUsage): keep one for it or drop it", coll, coll)
		}
		have := "Ring alone for it: no NVLink SHARP for NVLS among them"
		if nvls {
			have = "Ring and NVLS for it"
		}
		return flagError("--nccl-algo", o.nccl.NCCL.Algo, "it leaves NCCL no algorithm for --op %s on the first %d GPUs of %s (NCCL has %s), so NCCL fails the call (\"no algorithm/protocol available for function\", ncclInvalidUsage): keep Ring among them (Ring,Tree) or drop it", coll, n, t.Name, have)
	}
	group := make([]int, n)
	for i := range group {
		group[i] = i
	}
	if o.customAR == "multimem" && !sim.MulticastJoined(t, group) {
		why := "do not share an NVSwitch"
		if t.NVSwitchJoined(group) {
			why = fmt.Sprintf("share an NVSwitch of SM %s GPUs (%s), which maps none: multicast needs Hopper (SM 9.0) or later", t.DeviceOf(0).ComputeCapability, t.DeviceOf(0).Name)
		}
		return flagError("--custom-ar", "multimem", "the multimem all-reduce needs GPUs whose NVSwitch maps multicast memory; the first %d GPUs of %s %s", n, t.Name, why)
	}
	no := o.nccl.NCCL
	no.IgnoreCalibration = o.noCal
	if err := no.Validate(); err != nil {
		return causeError("", nil, err)
	}
	ref, err := o.meas.check(coll, n, sz, o.customAR)
	if err != nil {
		return err
	}
	// P2P off between GPUs of two Graces (an NVL72 rack's slice): the
	// group's hops through host memory have no route to price.
	if err := sim.HostRouteRefusal(t, no, group); err != nil {
		return usageErrorf("%v", err)
	}
	m, err := sim.NewCollectiveModel(t, no)
	if err != nil {
		return causeError("", nil, err)
	}
	// An algorithm NCCL may run for the op that the rows do not price
	// (NVLS on an NVSwitch): the caveat a prediction gives, of this op.
	caveat := ""
	if coll != model.AllToAll && o.customAR == "" {
		caveat = sim.UnmodelledAlgoCaveat(no, sim.NVLSAmong(t, n), ncclenv.Collective(coll))
	}
	if o.meas.on {
		// CPU ranks are no GPU box: their times are set beside a box's
		// prediction only when --topo names the box (as run --compare
		// asks for one).
		predicted, box := m, t.Name
		if o.meas.backend == "cpu" && !o.given("topo", o.topo != topology.DefaultPreset) {
			predicted, box = nil, ""
		}
		mr, pred, err := o.meas.run(ctx, coll, n, sz, no, predicted, ref, std.Stderr)
		if err != nil {
			return err
		}
		if caveat != "" && predicted != nil {
			fmt.Fprintln(std.Stderr, "caveat: "+caveat)
		}
		return writeMeasured(std.Stdout, o.output, box, coll, n, m.Options(), mr, pred)
	}
	rows, err := sweepCollective(m, coll, group, sz, o.customAR)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(std.Stderr, note)
	}
	if caveat != "" {
		fmt.Fprintln(std.Stderr, "caveat: "+caveat)
	}
	if note := calibrationElsewhere(t, coll, m.Options().P2PCondition()); note != "" && !o.noCal {
		fmt.Fprintln(std.Stderr, note)
	}
	chans := ""
	for _, v := range []struct {
		env string
		n   int
	}{{ncclenv.EnvMinChannels, no.MinChannels}, {ncclenv.EnvMaxChannels, no.MaxChannels}} {
		if v.n != 0 {
			chans += fmt.Sprintf(" %s=%d", v.env, v.n)
		}
	}
	title := fmt.Sprintf("%s on %d ranks of %s (NCCL_PROTO=%q NCCL_ALGO=%q NCCL_P2P_LEVEL=%s%s%s)",
		coll, n, t.Name, no.Proto, no.Algo, m.Options().P2PCondition(), chans, map[bool]string{true: " custom=" + o.customAR, false: ""}[o.customAR != ""])
	// The table rounds to two decimals; the CSV, read by programs, keeps
	// the values (a small size's algbw is thousandths of a GB/s).
	cellsOf := func(num func(float64) string) [][]string {
		cells := make([][]string, 0, len(rows))
		for _, r := range rows {
			cells = append(cells, []string{strconv.FormatInt(r.Bytes, 10), num(r.TimeUs), num(r.AlgBWGBps), num(r.BusBWGBps),
				r.Algo, r.Proto, num(r.NCCLTimeUs), strconv.Itoa(r.SHMHops), strconv.FormatBool(r.Calibrated)})
		}
		return cells
	}
	cells, csvCells := cellsOf(func(v float64) string { return fmt.Sprintf("%.2f", v) }), cellsOf(csvNum)
	header := []string{"size_bytes", "time_us", "algbw_GBps", "busbw_GBps", "algo", "proto", "nccl_us", "shm_hops", "calibrated"}
	return render(std.Stdout, o.output, view{
		JSON: struct {
			Topology string           `json:"topology"`
			Op       string           `json:"op"`
			Ranks    int              `json:"ranks"`
			Options  ncclenv.Settings `json:"options"`
			Rows     []collectiveRow  `json:"rows"`
		}{t.Name, string(coll), n, m.Options(), rows},
		CSV:  func(w io.Writer) error { return writeCSV(w, header, csvCells) },
		Text: func(w io.Writer, md bool) error { return writeFirstTable(w, title, "", header, cells, md) },
	})
}

// sizesAsRun are the sizes predicted: each requested size as nccl-tests
// runs it (nccltests.SizeAsRun with its default float elements: whole
// elements; all-gather, reduce-scatter and all-to-all a multiple of 16
// bytes a rank), without repeats, and a note naming the sizes that moved
// ("" when none did); an error when a size holds no element to run. A
// size was predicted as given, 1001 B where all_reduce_perf -b 1001 runs
// and prints 1000.
func sizesAsRun(flag string, coll model.Collective, ranks int, sizes []int64) ([]int64, string, error) {
	var out []int64
	var moved []string
	for _, b := range sizes {
		r, err := nccltests.SizeAsRun(string(coll), ranks, b, nccltests.DefaultElemBytes)
		if err != nil {
			return nil, "", causeError("--sizes", nil, err)
		}
		if r == 0 {
			unit := "a float element (4 B)"
			if coll != model.AllReduce {
				unit = fmt.Sprintf("16 B a rank on %d ranks (%d B)", ranks, 16*ranks)
			}
			return nil, "", flagError("--sizes", flag, "%d B is less than %s: nccl-tests runs no bytes of it; want a size of at least that", b, unit)
		}
		if r != b {
			moved = append(moved, fmt.Sprintf("%d -> %d", b, r))
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	if len(moved) == 0 {
		return out, "", nil
	}
	rule := "whole float elements (4 B), as nccl-tests' default -d float"
	if coll != model.AllReduce {
		rule = fmt.Sprintf("float elements (4 B), a multiple of 16 B a rank on %d ranks, as nccl-tests' %s sizes its buffers", ranks, nccltests.Binary(string(coll)))
	}
	return out, fmt.Sprintf("note: sizes rounded down to %s: %s B", rule, strings.Join(moved, ", ")), nil
}

// writeMeasured prints a --measure run in the output format; topo "" and
// pred nil when no prediction is set beside it.
func writeMeasured(w io.Writer, format, topo string, coll model.Collective, n int, opts ncclenv.Settings, mr *measureRun, pred []collectiveRow) error {
	header, rows := measuredTable(mr, pred, false)
	csvHeader, csvRows := measuredTable(mr, pred, true)
	return render(w, format, view{
		JSON: struct {
			Topology string           `json:"topology,omitempty"`
			Op       string           `json:"op"`
			Ranks    int              `json:"ranks"`
			Options  ncclenv.Settings `json:"options"`
			Rows     []collectiveRow  `json:"rows,omitempty"`
			Measured *measureRun      `json:"measured"`
		}{topo, string(coll), n, opts, pred, mr},
		CSV:  func(w io.Writer) error { return writeCSV(w, csvHeader, csvRows) },
		Text: func(w io.Writer, md bool) error { return writeMeasuredTable(w, topo, coll, n, mr, header, rows, md) },
	})
}

// writeMeasuredTable is the table of a --measure run.
func writeMeasuredTable(w io.Writer, topo string, coll model.Collective, n int, mr *measureRun, header []string, rows [][]string, md bool) error {
	mode := "eager"
	if mr.Graphs {
		mode = "CUDA graphs"
	}
	title := fmt.Sprintf("%s on %d ranks: measured on the %s backend (%s, %s; %d steps x %d ops per size)",
		coll, n, mr.Backend, mr.Timing, mode, mr.Steps, mr.Iters)
	if topo != "" {
		title += " against the prediction on " + topo
	}
	if err := writeFirstTable(w, title, "", header, rows, md); err != nil {
		return err
	}
	if topo == "" {
		fmt.Fprintf(w, "no prediction beside it: the %s backend's ranks are no GPU box (--topo names one to compare against)\n", mr.Backend)
	}
	if pct, b := worstVsReference(mr); !math.IsNaN(pct) {
		fmt.Fprintf(w, "largest difference from %s: %+.1f %% at %d B\n", mr.Reference, pct, b)
	}
	if mr.Out != "" {
		fmt.Fprintf(w, "wrote %s (nccl-tests format)\n", mr.Out)
	}
	return nil
}

// calibrationElsewhere says, in one line, that the box's calibration of
// coll was fitted under other P2P settings than cond, the prediction's:
// sim applies an entry only under its own setting, so a box just
// calibrated from a log run under NCCL_P2P_LEVEL=SYS prices NCCL's
// constants under the default PXB, its "calibrated false" column the
// only sign. "" when an entry applies or there is none.
func calibrationElsewhere(t *topology.Topology, coll model.Collective, cond string) string {
	if t.Calibration == nil {
		return ""
	}
	var under, flags []string
	for _, p := range t.Calibration.Collectives {
		if p.Op != "" && p.Op != string(coll) {
			continue
		}
		if p.P2PLevel == "" || p.P2PLevel == cond {
			return ""
		}
		s, flag := "NCCL_P2P_LEVEL="+p.P2PLevel, "--p2p-level "+p.P2PLevel
		if p.P2PLevel == "disabled" {
			s, flag = "NCCL_P2P_DISABLE=1", "--p2p-disable"
		}
		if !slices.Contains(under, s) {
			under, flags = append(under, s), append(flags, flag)
		}
	}
	if len(under) == 0 {
		return ""
	}
	now := "NCCL_P2P_LEVEL=" + cond
	if cond == "disabled" {
		now = "NCCL_P2P_DISABLE=1"
	}
	return fmt.Sprintf("note: the calibration of %s in %s was fitted under %s and applies only there; this prediction is under %s, so it prices NCCL's constants (%s prices with it)",
		coll, t.Name, strings.Join(under, ", "), now, strings.Join(flags, " or "))
}
