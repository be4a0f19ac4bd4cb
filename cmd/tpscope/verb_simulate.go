package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/internal/chart"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/report/build"
	"github.com/tpscope/tpscope/serving"
	"github.com/tpscope/tpscope/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var simulateVerb = &Verb{
	UsageLine: "simulate (--qps R,... | --concurrency N,... | --requests-file FILE | --sweep-qps | --sweep-concurrency | --compare RESULT) [flags]",
	Short:     "capacity in requests: simulate vLLM's scheduler under a load; TTFT, TPOT, goodput, the largest QPS within an SLO",
	Long: `Simulates the serving engine request by request: vLLM v1's scheduler
(continuous batching, max_num_seqs, a token budget of max_num_batched_tokens
per step, chunked prefill, running requests first, a paged KV cache whose
blocks come from the memory model, preemption by recompute) as a
discrete-event simulation whose steps are priced by the same step model as
predict (each step's mix of decode tokens and prefill chunks, with CUDA-graph
padding), memoized within 3.1 % (see sim.IterationBucketBound).

Load: an open loop (--qps, Poisson by default, --arrival constant|gamma;
--burstiness X, as vllm bench serve's, draws gamma-distributed gaps of
shape X and implies --arrival gamma), a closed loop (--concurrency clients, as
vllm bench serve --max-concurrency), or a request trace (--requests-file:
tpscope's JSON lines or CSV of arrival_s, prompt_tokens, output_tokens and
optionally hash_ids, session, delay_s; Mooncake JSON lines with hash IDs;
Azure's 2023 CSV; BurstGPT's CSV; with --qps or --concurrency only its
lengths are used, with --replay-qps it is replayed time-scaled to each
rate). Prefix caching is priced for requests that name their blocks (hash
IDs, sessions) unless --no-enable-prefix-caching. --qps and --concurrency take comma
lists: one run per value. Lengths: --isl/--osl with --isl-dist/--osl-dist
fixed|uniform|lognormal and --isl-spread/--osl-spread (the uniform half-width
or the log-normal coefficient of variation, as a fraction of the mean),
refused with --requests-file and --compare, whose requests have their own
lengths; --arrival is refused where nothing arrives at a rate (a closed
loop, a trace's own times, a measured load). One --seed drives every draw (arrival gaps, lengths, accepted drafts); it is refused where nothing is drawn. The load ends after --requests requests or
--duration seconds (1000 requests when neither is given); requests in flight
then complete.

Reports TTFT, TPOT, ITL and end-to-end latency at p50/p90/p99, throughput
(tokens/s, requests/s, per GPU), the offered request rate against the rate
served (over the second half of the arrivals), goodput (the served rate of
requests meeting --slo-ttft-ms and --slo-tpot-ms, on the same window),
KV-cache use and preemptions, and for a single run a timeline of them. A
run whose queue grows by more than 5 % of the offered rate (read from the
rise of TTFT with arrival time) is overloaded: it says "overloaded: offered
X req/s, served Y req/s, queue grows by Z requests/s", prints its TTFT and
E2E as "unbounded" (null in JSON) since they grow with the run's length,
and meets no SLO. A run whose arrivals span less than 4 median end-to-end
latencies, or whose running batch still grows by as much with its TPOT
rising by more than 5 %, never reached steady state: it is "too short",
meets no SLO, and says how many requests would tell. --sweep-qps (or
--sweep-concurrency) searches the largest load whose --slo-percentile (99)
TTFT and TPOT meet the SLO, lengthening runs too short to judge; a batch
that still grows in a lengthened run is overloaded (its TPOT and E2E
unbounded). --plot draws latency percentiles against load (PNG or
SVG): the offered rate, the clients of closed loops, or the rate served
where both kinds (or a trace) share the chart, the rates as the table's
req/s offered/served.

--compare RESULT (repeatable) reads a measured serving benchmark (vllm bench
serve --save-result JSON, SGLang bench_serving JSONL, aiperf's
profile_export_aiperf.json, GuideLLM's benchmarks.json, InferenceX
summaries, a request log), simulates each load level as measured and prints
predicted beside measured for mean/p50/p90/p99 of TTFT, TPOT, ITL and E2E
and the throughputs; with an SLO, the simulation's verdict and goodput
beside the measured level's verdict by its own percentiles. The engine the results name (their backend or
framework) prices and schedules the run unless --engine names another;
a GPU they name other than the box's is refused, and so is a model they
name that is not the scenario's (without --model, any but the default's
checkpoint; with a --model preset, another preset's checkpoint). The plan
they record (InferenceX's tp, ep, dp and GPU count) is the scenario's
where --tp, --dp or --ep is not given; a plan flag that contradicts it, or
a box of fewer GPUs, is refused. The
scheduler is the
engine's (--engine sglang: SGLang's prefill-first scheduler; vllm and
trtllm: vLLM's mixed steps). --serving-overheads takes the overheads
calibrate --serving fitted, under the engine and on the GPU they were
fitted on (another box, model, engine version, plan, attention backend, MoE
kernel or options: a caveat line).

--pareto draws output tokens/s per GPU against tokens/s per user (1000 /
median TPOT) of the runs with their front, the SLO and the run chosen,
one chart per load shape (measured levels of another ISL or OSL have
their own); --frontier writes them as CSV, --report as an HTML report. With
--sweep-qps, --for-qps N says how many copies of the deployment, GPUs and
boxes carry N requests/s within the SLO.

Plans with DP attention run one scheduler per DP rank; --instances runs
several engines behind --router round-robin|least-loaded. Run-time options
are the other verbs' flags with their defaults (a stock deployment; the
seed's settings are --nccl-proto LL --p2p-level SYS). With --spec, a
decoding request schedules 1 + K tokens a step and gains 1 + A, A drawn
per request and step from the acceptance: TPOT is a distribution. Not
modelled: asynchronous scheduling, DCP with prefill.`,
	Example: `tpscope simulate --model kimi-k2.5 --tp 8 --kv-dtype fp8 --qps 0.5,1,2,3 --isl 1024 --osl 256 --slo-ttft-ms 2000 --slo-tpot-ms 50 --plot latency.png
tpscope simulate --model glm-5-nvfp4 --dense-dsa --kv-dtype bf16 --concurrency 1,8,64 --isl 100 --osl 1000 --output markdown
tpscope simulate --model kimi-k2.5 --kv-dtype fp8 --sweep-qps --isl 2000 --isl-dist lognormal --isl-spread 0.5 --osl 300 --duration 600 --slo-ttft-ms 2000 --slo-tpot-ms 50
tpscope simulate --model deepseek-v3 --topo h200-nvswitch --sweep-qps --for-qps 50 --isl 1024 --osl 256 --slo-ttft-ms 2000 --slo-tpot-ms 50 --pareto pareto.png --report capacity.html
tpscope simulate --model deepseek-v3 --topo h200-nvswitch --compare vllm-bench-result.json --serving-overheads overheads.json
tpscope simulate --model kimi-k2.5 --kv-dtype fp8 --spec eagle3 --concurrency 1,8 --isl 1024 --osl 256
tpscope simulate --model kimi-k2.5 --topo h200-nvswitch --requests-file mooncake_trace.jsonl --replay-qps 0.5,1`,
	New: func() Options { return newSimulateOptions() },
}

// simulateOptions are simulate's flags: the scenario flags and its own.
type simulateOptions struct {
	boundFlags
	sc *scenarioFlags
	simulateFlags
}

func newSimulateOptions() *simulateOptions {
	return &simulateOptions{sc: newScenarioFlags(), simulateFlags: simulateFlags{arrival: "poisson", burstiness: 1, isl: 1024, osl: 256,
		islDist: "fixed", oslDist: "fixed", sloPct: 99, instances: 1, router: "round-robin", output: formatTable, timeline: 12}}
}

func (o *simulateOptions) Bind(fs *pflag.FlagSet) {
	o.fs = fs
	o.sc.Bind(fs)
	o.simulateFlags.bind(fs)
}

func (o *simulateOptions) Run(ctx context.Context, args []string, std IO) error {
	if err := noArgs(args); err != nil {
		return err
	}
	for _, n := range []string{"phase", "batch", "context"} {
		if o.changed(n) {
			return flagError("--"+n, nil, "not used by simulate (the scheduler forms the steps; the load is --qps, --concurrency or --requests-file)")
		}
	}
	o.arrivalGiven = o.given("arrival", o.arrival != "poisson")
	o.burstinessGiven = o.given("burstiness", o.burstiness != 1)
	def := newSimulateOptions()
	for _, l := range []struct {
		name       string
		nonDefault bool
	}{
		{"isl", o.isl != def.isl}, {"osl", o.osl != def.osl}, {"isl-dist", o.islDist != def.islDist}, {"osl-dist", o.oslDist != def.oslDist},
		{"isl-spread", o.islSpread != def.islSpread}, {"osl-spread", o.oslSpread != def.oslSpread},
	} {
		if o.given(l.name, l.nonDefault) {
			o.lengthsGiven = append(o.lengthsGiven, "--"+l.name)
		}
	}
	o.requestsGiven = o.given("requests", o.requests != 0)
	o.routerGiven = o.given("router", o.router != def.router)
	o.durationGiven = o.given("duration", o.durationS != 0)
	o.sloPctGiven = o.given("slo-percentile", o.sloPct != def.sloPct)
	o.forQPSGiven = o.given("for-qps", o.forQPS != 0)
	o.seedGiven = o.given("seed", o.seed != 0)
	o.timelineGiven = o.given("timeline", o.timeline != def.timeline)
	return runSimulate(o.sc, &o.simulateFlags, std.Stdout, std.Stderr)
}

// simulateFlags are simulate's own flags.
type simulateFlags struct {
	qps, concurrency string
	arrival          string
	burstiness       float64
	// arrivalGiven and burstinessGiven: the command line set --arrival,
	// --burstiness (a burstiness implies gamma arrivals unless --arrival
	// says otherwise, which is refused).
	arrivalGiven, burstinessGiven bool
	// lengthsGiven lists the length flags set (--isl, --isl-dist, ...);
	// requestsGiven and durationGiven: --requests, --duration were set.
	// A load that comes from a file takes none of them, or not all.
	lengthsGiven                 []string
	requestsGiven, durationGiven bool
	// routerGiven: --router was set (it routes nothing to one scheduler).
	routerGiven bool
	// sloPctGiven: --slo-percentile was set (it judges nothing without
	// an SLO); forQPSGiven: --for-qps was (0 is no rate to carry).
	sloPctGiven, forQPSGiven bool
	// seedGiven: --seed was set (it is refused where nothing is drawn).
	seedGiven bool
	// timelineGiven: --timeline was set (it sizes a table drawn for one
	// simulated run only).
	timelineGiven        bool
	isl, osl             int
	islDist, oslDist     string
	islSpread, oslSpread float64
	requests             int
	durationS            float64
	requestsFile         string
	seed                 uint64
	sloTTFT, sloTPOT     float64
	sloPct               float64
	sweepQPS, sweepConc  bool
	engineFlags
	instances        int
	router           string
	output, plotFile string
	timeline         int
	compare          []string
	replayQPS        string
	forQPS           float64
	paretoFile       string
	frontierFile     string
	reportFile       string
}

func (f *simulateFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.qps, "qps", f.qps, "open loop: request rates per second (comma list, one run each)")
	fs.StringVar(&f.concurrency, "concurrency", f.concurrency, "closed loop: client counts (comma list, one run each; vllm bench serve --max-concurrency)"+countSuffixHelp)
	fs.StringVar(&f.arrival, "arrival", f.arrival, "open-loop arrivals: poisson, constant or gamma")
	fs.Float64Var(&f.burstiness, "burstiness", f.burstiness, "open-loop arrivals with gamma-distributed gaps of this shape, as vllm bench serve --burstiness (1 = Poisson, < 1 burstier, > 1 more regular); another value than 1 implies --arrival gamma")
	countVar(fs, &f.isl, "isl", "mean prompt tokens")
	countVar(fs, &f.osl, "osl", "mean output tokens")
	fs.StringVar(&f.islDist, "isl-dist", f.islDist, "prompt lengths: fixed, uniform or lognormal")
	fs.StringVar(&f.oslDist, "osl-dist", f.oslDist, "output lengths: fixed, uniform or lognormal")
	fs.Float64Var(&f.islSpread, "isl-spread", f.islSpread, "prompt spread: uniform half-width or log-normal coefficient of variation, a fraction of --isl")
	fs.Float64Var(&f.oslSpread, "osl-spread", f.oslSpread, "output spread: uniform half-width or log-normal coefficient of variation, a fraction of --osl")
	countVar(fs, &f.requests, "requests", "requests per run (default 1000 unless --duration)")
	fs.Float64Var(&f.durationS, "duration", f.durationS, "seconds of load per run (requests stop arriving then; those in flight complete)")
	fs.StringVar(&f.requestsFile, "requests-file", f.requestsFile, "request file: JSON lines or CSV of arrival_s, prompt_tokens, output_tokens")
	fs.Uint64Var(&f.seed, "seed", f.seed, "seed of every random draw (lengths, arrivals)")
	fs.Float64Var(&f.sloTTFT, "slo-ttft-ms", f.sloTTFT, "SLO: time to first token in ms (0 = none)")
	fs.Float64Var(&f.sloTPOT, "slo-tpot-ms", f.sloTPOT, "SLO: time per output token in ms (0 = none)")
	fs.Float64Var(&f.sloPct, "slo-percentile", f.sloPct, "percentile the SLO is judged at: 50, 90 or 99")
	fs.BoolVar(&f.sweepQPS, "sweep-qps", f.sweepQPS, "search the largest QPS meeting the SLO (from the first --qps, default 1)")
	fs.BoolVar(&f.sweepConc, "sweep-concurrency", f.sweepConc, "search the largest client count meeting the SLO")
	f.engineFlags.bind(fs)
	fs.IntVar(&f.instances, "instances", f.instances, "engine instances, each its own copy of the plan")
	fs.StringVar(&f.router, "router", f.router, "request router over instances and DP ranks: round-robin or least-loaded (refused with one scheduler, which has nothing to route)")
	fs.StringVar(&f.output, "output", f.output, "output format: table, json or markdown")
	fs.StringVar(&f.plotFile, "plot", f.plotFile, "write latency percentiles against load to FILE.png or FILE.svg")
	fs.IntVar(&f.timeline, "timeline", f.timeline, "timeline rows of a single run (0 = none)")
	fs.StringArrayVar(&f.compare, "compare", f.compare, "a measured benchmark result (vllm bench serve --save-result JSON, SGLang bench_serving JSONL, aiperf profile_export_aiperf.json, GuideLLM benchmarks.json, a request log): simulate each of its load levels and set predicted beside measured; repeatable")
	fs.StringVar(&f.replayQPS, "replay-qps", f.replayQPS, "with --requests-file: replay the trace time-scaled to these request rates (comma list, one run each; its bursts and lulls kept; the requests a run takes by --requests or --duration arrive at the rate)")
	fs.Float64Var(&f.forQPS, "for-qps", f.forQPS, "with --sweep-qps: how many instances, GPUs and boxes carry this many requests/s within the SLO")
	fs.StringVar(&f.paretoFile, "pareto", f.paretoFile, "draw output tokens/s per GPU against tokens/s per user (1000 / median TPOT) of the runs, the front, the SLO and the chosen run, to FILE.png or FILE.svg")
	fs.StringVar(&f.frontierFile, "frontier", f.frontierFile, "write every run's tokens/s per GPU and per user, on the front or not, as CSV to FILE")
	fs.StringVar(&f.reportFile, "report", f.reportFile, "write a self-contained HTML report of the runs (the Pareto chart, the runs' table, comparisons) to FILE.html")
}

// seedRuns are the loads of the runs (a search's as its first run's),
// for whether any draws from the seed (seedDraws).
func seedRuns(f *simulateFlags, traffic serving.Traffic, loads []simLoad, replay bool) []serving.Traffic {
	switch {
	case f.sweepQPS:
		traffic.QPS = 1 // the search's rates: any draws as the first's
	case f.sweepConc:
		traffic.Concurrency = 1
	case replay || len(loads) == 0:
	default:
		var runs []serving.Traffic
		for _, l := range loads {
			t := traffic
			t.QPS, t.Concurrency = l.qps, l.concurrency
			runs = append(runs, t)
		}
		return runs
	}
	return []serving.Traffic{traffic}
}

// seedDraws reports whether a run of runs draws from the seed (serving's
// Simulator.SeedDraws: its arrival gaps, lengths or accepted drafts).
func seedDraws(s *serving.Simulator, runs []serving.Traffic) bool {
	for i := range runs {
		if s.SeedDraws(&runs[i]) {
			return true
		}
	}
	return false
}

// seedNotDrawn refuses --seed where no run draws from it (fixed lengths
// in a closed loop, a trace at its own or rescaled times, constant
// arrivals of fixed lengths, no speculative decoding): it was accepted
// and printed on the load line as though it had picked the requests. A
// measured load (--compare) draws its lengths from what was measured.
func seedNotDrawn(f *simulateFlags, traffic serving.Traffic, loads []simLoad, replay bool) error {
	var what string
	switch t := seedRuns(f, traffic, loads, replay)[0]; {
	case len(t.Requests) > 0 && t.QPS == 0 && t.Concurrency == 0:
		what = "a trace replayed at its own times, its own lengths"
		if replay {
			what = "a trace replayed at its times rescaled, its own lengths"
		}
	case len(t.Requests) > 0 && t.QPS > 0:
		what = "a trace's lengths at constant arrivals"
	case len(t.Requests) > 0:
		what = "a trace's lengths in a closed loop"
	case t.QPS > 0:
		what = "fixed lengths at constant arrivals"
	default:
		what = "fixed lengths in a closed loop"
	}
	return flagError("--seed", f.seed, "nothing in this run is drawn (%s, no speculative decoding): drop --seed", what)
}

// simLoad is one run's load: a QPS or a client count.
type simLoad struct {
	qps         float64
	concurrency int
}

// checkOutputExt refuses an output file flag names whose extension is
// none of exts, or that cannot be written; "" passes.
func checkOutputExt(flag, path string, exts ...string) error {
	if path == "" {
		return nil
	}
	ext := strings.ToLower(filepath.Ext(path))
	if !slices.Contains(exts, ext) {
		return flagError(flag, path, "want a %s file", strings.Join(exts, " or "))
	}
	return checkOutputFile(flag, path)
}

func runSimulate(sc *scenarioFlags, f *simulateFlags, stdout, stderr io.Writer) error {
	// Every flag is checked, and every input read, before any work.
	if err := checkOutput(f.output, "table", "json", "markdown"); err != nil {
		return err
	}
	if err := checkPlotPath(f.plotFile); err != nil {
		return err
	}
	if err := checkOutputExt("--pareto", f.paretoFile, ".png", ".svg"); err != nil {
		return err
	}
	if err := checkOutputExt("--report", f.reportFile, ".html", ".htm"); err != nil {
		return err
	}
	if err := checkOutputFile("--frontier", f.frontierFile); err != nil {
		return err
	}
	if err := checkInputFile("--requests-file", f.requestsFile, "a request trace (tpscope JSON lines or CSV, Mooncake JSON lines, Azure 2023 or BurstGPT CSV)"); err != nil {
		return err
	}
	if len(f.compare) > 0 {
		for _, n := range []struct {
			flag string
			set  bool
		}{{"--qps", f.qps != ""}, {"--concurrency", f.concurrency != ""}, {"--requests-file", f.requestsFile != ""}, {"--sweep-qps", f.sweepQPS},
			{"--sweep-concurrency", f.sweepConc}, {"--replay-qps", f.replayQPS != ""}, {"--for-qps", f.forQPS != 0},
			{"--arrival", f.arrivalGiven}, {"--requests", f.requestsGiven}, {"--duration", f.durationGiven}} {
			if n.set {
				return flagError("--compare with "+n.flag, nil, "the measured result sets the load: drop %s", n.flag)
			}
		}
		if len(f.lengthsGiven) > 0 {
			return flagError("--compare with "+f.lengthsGiven[0], nil, "the measured result sets the load, its prompt and output lengths included: drop %s", f.lengthsGiven[0])
		}
	}
	// 0 is how the load says "not given"; typed, it would run the
	// default 1000 requests (or the whole trace), not the zero asked for.
	if f.requestsGiven && f.requests == 0 {
		return flagError("--requests", 0, "want 1 or more requests per run (leave it out for 1000, or give --duration)")
	}
	// Likewise the deployment reads 0 instances as one: typed, it would
	// run one engine, not the none asked for.
	if f.instances < 1 || f.instances > serving.MaxInstances {
		return flagError("--instances", f.instances, "want 1 to %d engine instances, each its own copy of the plan", serving.MaxInstances)
	}
	if f.durationGiven && f.durationS == 0 {
		return flagError("--duration", 0, "want a time above 0 s (leave it out to run --requests, 1000 by default)")
	}
	if f.requestsFile != "" && len(f.lengthsGiven) > 0 {
		return flagError("--requests-file with "+f.lengthsGiven[0], nil, "the trace gives every request's prompt and output tokens: drop %s", f.lengthsGiven[0])
	}
	if f.arrivalGiven {
		switch {
		case f.concurrency != "" || f.sweepConc:
			return flagError("--arrival with --concurrency", nil, "a closed loop has no arrival process: its clients send the next request when the last completes")
		case f.requestsFile != "" && f.qps == "" && !f.sweepQPS:
			return flagError("--arrival with --requests-file", nil, "the trace's own arrival times are replayed: drop --arrival, or give --qps for arrivals at a rate")
		}
	}
	// A side file may not be written over an input: the results or
	// request trace the run was made of.
	ins := []input{{"--requests-file", f.requestsFile}, {"--serving-overheads", f.overheadsFile}}
	for _, path := range f.compare {
		ins = append(ins, input{"--compare", path})
	}
	for _, o := range []struct{ flag, path string }{{"--plot", f.plotFile}, {"--pareto", f.paretoFile}, {"--report", f.reportFile}, {"--frontier", f.frontierFile}} {
		if err := checkNotInput(o.flag, o.path, ins...); err != nil {
			return err
		}
	}
	var measured []serving.Measured
	for _, path := range f.compare {
		if err := checkInputFile("--compare", path, "a serving benchmark result"); err != nil {
			return err
		}
		ms, err := serving.LoadMeasured(path)
		if err != nil {
			return causeError("--compare", nil, err)
		}
		measured = append(measured, ms...)
	}
	var loads []simLoad
	if f.qps != "" {
		qs, err := parseFloats("--qps", f.qps)
		if err != nil {
			return err
		}
		for _, q := range qs {
			loads = append(loads, simLoad{qps: q})
		}
	}
	if f.concurrency != "" {
		l := &intList{min: 1}
		if err := l.Set(f.concurrency); err != nil {
			return causeError("--concurrency", nil, err)
		}
		cs := l.v
		if f.qps != "" {
			return flagError("--qps and --concurrency", nil, "want an open loop (--qps) or a closed loop (--concurrency), not both")
		}
		for _, c := range cs {
			loads = append(loads, simLoad{concurrency: c})
		}
	}
	var replay []float64
	if f.replayQPS != "" {
		if f.requestsFile == "" {
			return flagError("--replay-qps", f.replayQPS, "needs --requests-file: the trace to replay")
		}
		if len(loads) > 0 || f.sweepQPS || f.sweepConc {
			return flagError("--replay-qps with --qps, --concurrency or a sweep", nil, "the rates of a replay are the trace's, scaled: drop the others")
		}
		var err error
		if replay, err = parseFloats("--replay-qps", f.replayQPS); err != nil {
			return err
		}
	}
	switch {
	case f.sweepQPS && f.sweepConc:
		return flagError("--sweep-qps and --sweep-concurrency", nil, "want one search")
	case f.sweepQPS && f.concurrency != "":
		return flagError("--sweep-qps with --concurrency", nil, "the search sets the rate; use --sweep-concurrency for clients")
	case f.sweepConc && f.qps != "":
		return flagError("--sweep-concurrency with --qps", nil, "the search sets the clients; use --sweep-qps for rates")
	case (f.sweepQPS || f.sweepConc) && f.sloTTFT <= 0 && f.sloTPOT <= 0:
		return flagError("--sweep-qps/--sweep-concurrency", nil, "need an SLO: --slo-ttft-ms and/or --slo-tpot-ms")
	case (f.sweepQPS || f.sweepConc) && len(loads) > 1:
		return flagError("--qps/--concurrency", nil, "a sweep takes at most one starting --qps or --concurrency, got %d", len(loads))
	case f.forQPS < 0 || math.IsNaN(f.forQPS) || math.IsInf(f.forQPS, 0) || (f.forQPS == 0 && f.forQPSGiven):
		return flagError("--for-qps", f.forQPS, "want a rate above 0")
	case f.forQPS > 0 && !f.sweepQPS:
		return flagError("--for-qps", f.forQPS, "needs --sweep-qps: the largest rate one instance carries within the SLO")
	case len(loads) == 0 && f.requestsFile == "" && !f.sweepQPS && !f.sweepConc && len(measured) == 0:
		return usageErrorf("no load: want --qps, --concurrency, --requests-file, --sweep-qps, --sweep-concurrency or --compare")
	}
	if f.sloTTFT < 0 || f.sloTPOT < 0 {
		return flagError(fmt.Sprintf("--slo-ttft-ms %v, --slo-tpot-ms %v", f.sloTTFT, f.sloTPOT), nil, "want 0 (none) or positive limits")
	}
	if f.sloPct != 50 && f.sloPct != 90 && f.sloPct != 99 {
		return flagError("--slo-percentile", f.sloPct, "want 50, 90 or 99")
	}
	if f.sloPctGiven && f.sloTTFT == 0 && f.sloTPOT == 0 {
		return flagError("--slo-percentile", f.sloPct, "needs an SLO to judge at that percentile: --slo-ttft-ms and/or --slo-tpot-ms")
	}
	if f.timeline < 0 || f.timeline > maxTimelineRows {
		return flagError("--timeline", f.timeline, "want 0 to %d rows", maxTimelineRows)
	}
	// The timeline table is drawn for one simulated run, in the table
	// and markdown output; elsewhere --timeline N sized nothing (0, no
	// table, is what those outputs draw anyway).
	if f.timelineGiven && f.timeline > 0 {
		switch runs := len(loads) + len(replay); {
		case f.output == formatJSON:
			return flagError("--timeline", f.timeline, "--output json carries every window of each run's timeline; the flag sizes the table output's: leave it out")
		case f.sweepQPS || f.sweepConc:
			return flagError("--timeline", f.timeline, "a search runs many loads, and the timeline is drawn for one simulated run: leave it out")
		case len(measured) > 0:
			return flagError("--timeline", f.timeline, "--compare simulates each measured level, and the timeline is drawn for one simulated run: leave it out")
		case runs > 1:
			return flagError("--timeline", f.timeline, "%d runs, and the timeline is drawn for one simulated run: leave it out, or give one load", runs)
		}
	}
	arrival, err := serving.ParseArrival(f.arrival)
	if err != nil {
		return causeError("--arrival", nil, err)
	}
	if arrival, err = f.arrivalWithBurstiness(arrival); err != nil {
		return err
	}
	router, err := serving.ParseRouter(f.router)
	if err != nil {
		return causeError("--router", nil, err)
	}
	islDist, err := serving.ParseDist(f.islDist)
	if err != nil {
		return causeError("--isl-dist", nil, err)
	}
	oslDist, err := serving.ParseDist(f.oslDist)
	if err != nil {
		return causeError("--osl-dist", nil, err)
	}
	// A distribution without a spread draws its mean every time: fixed
	// lengths under another name, the run the flag's absence gives.
	for _, l := range []struct {
		dist, spreadFlag string
		d                serving.Dist
		spread           float64
	}{{"--isl-dist", "--isl-spread", islDist, f.islSpread}, {"--osl-dist", "--osl-spread", oslDist, f.oslSpread}} {
		if (l.d == serving.Uniform || l.d == serving.LogNormal) && l.spread == 0 {
			return flagError(l.dist, l.d, "want %s above 0 with it: a spread of 0 draws the mean every time, fixed lengths (leave %s out for those)", l.spreadFlag, l.dist)
		}
	}
	traffic := serving.Traffic{Arrival: arrival, NumRequests: f.requests, DurationS: f.durationS, Seed: f.seed,
		Prompt: serving.Lengths{Dist: islDist, Mean: f.isl, Spread: f.islSpread},
		Output: serving.Lengths{Dist: oslDist, Mean: f.osl, Spread: f.oslSpread}}
	if arrival == serving.Gamma {
		traffic.Burstiness = f.burstiness
	}
	var trace *serving.Trace
	var replayed [][]serving.Request // per --replay-qps rate
	if f.requestsFile != "" {
		if trace, err = serving.LoadTrace(f.requestsFile); err != nil {
			return causeError("--requests-file", nil, err)
		}
		traffic.Requests = trace.Requests
		traffic.HashBlockTokens = trace.HashBlockTokens
		ownTimes := len(loads) == 0 && len(replay) == 0 && !f.sweepQPS && !f.sweepConc
		if err := trace.CheckTake(f.requests, f.durationS, ownTimes); err != nil {
			return f.trafficFlagError(err)
		}
		// Each replay is the requests its run takes (--requests,
		// --duration), scaled to its rate: the run offers the rate asked.
		for _, q := range replay {
			reqs, err := serving.ReplayAt(trace.Requests, q, f.requests, f.durationS)
			var fe *serving.FieldError
			if errors.As(err, &fe) {
				return f.trafficFlagError(err)
			} else if err != nil {
				return causeError("--replay-qps", nil, err)
			}
			replayed = append(replayed, reqs)
		}
	} else if f.requests == 0 && f.durationS == 0 {
		traffic.NumRequests = 1000
	}
	// The traffic's own check, once per load, names the flag's field.
	if len(measured) == 0 {
		check := traffic
		switch {
		case len(loads) > 0:
			check.QPS, check.Concurrency = loads[0].qps, loads[0].concurrency
		case len(replayed) > 0:
			check.Requests = replayed[0]
		case f.sweepQPS:
			check.QPS = 1
		case f.sweepConc:
			check.Concurrency = 1
		}
		if err := check.Validate(); err != nil {
			return f.trafficFlagError(err)
		}
		if f.sloTPOT > 0 && check.OneTokenOutputs() {
			outputs := "--osl " + strconv.Itoa(f.osl)
			if check.Requests != nil {
				outputs = "the trace's"
			}
			return flagError("--slo-tpot-ms", f.sloTPOT, "every request of the load outputs one token (%s), and TPOT is timed over the tokens after the first: there is none to judge: drop --slo-tpot-ms, or give longer outputs", outputs)
		}
	}
	var simulated []*serving.Traffic
	if len(measured) == 0 {
		simulated = append(simulated, &traffic)
	}
	if err := f.engineFlags.checkPrefixCache(simulated...); err != nil {
		return err
	}
	engineNote, err := resultsEngine(sc, "--compare", measured)
	if err != nil {
		return err
	}
	planNote, err := resultsPlan(sc, "--compare", measured)
	if err != nil {
		return err
	}
	if err := resultsRanOn(sc, "--compare", measured); err != nil {
		return err
	}
	scen, err := sc.scenario()
	if err != nil {
		return err
	}
	if err := resultsInstances(scen.Plan, f.instances, "--compare", measured); err != nil {
		return err
	}
	defaultsNote := resultsDefaults(sc, measured, scen)
	topo, opts := scen.Topo, scen.Options
	prof, err := engprof.Lookup(opts.Engine)
	if err != nil {
		return causeError("--engine", opts.Engine, err)
	}
	engine, err := f.engineFlags.engine(prof, opts, sc.changed("policy"))
	if err != nil {
		return err
	}
	overheads, overheadsNote, err := f.engineFlags.overheads(prof, scen, engine)
	if err != nil {
		return err
	}
	dep := serving.Deployment{Scenario: scen, Engine: engine, Instances: f.instances, Router: router, Overheads: overheads}
	s, err := serving.New(dep)
	if err != nil {
		// A deployment that does not fit in memory is a finding; any
		// other refusal is about the flags.
		if errors.Is(err, sim.ErrDoesNotFit) {
			return err
		}
		var pe *model.PlanError
		if errors.As(err, &pe) {
			return planFlagError("", err) // the plan flag it is about
		}
		// An engine option the deployment refuses names its flag.
		var fe *serving.FieldError
		if errors.As(err, &fe) {
			if fl, ok := map[string]struct {
				flag  string
				value int
			}{"engine.block_size": {"--block-size", f.engineFlags.blockSize}, "engine.num_gpu_blocks_override": {"--num-gpu-blocks-override", f.engineFlags.gpuBlocks},
				"engine.max_num_batched_tokens": {"--max-num-batched-tokens", opts.MaxNumBatchedTokens}, "engine.max_num_seqs": {"--max-num-seqs", opts.MaxNumSeqs}}[fe.Field]; ok {
				e := flagError(fl.flag, fl.value, "%s", fe.Want).(*usageError)
				e.Err = err
				return e
			}
		}
		return causeError("", nil, err)
	}
	if f.routerGiven && s.Schedulers() == 1 {
		return flagError("--router", f.router, "one scheduler takes every request (1 instance, DP 1), so nothing is routed: the router spreads requests over --instances x DP ranks; drop --router or give --instances 2 or more")
	}
	seedDrawn := len(measured) > 0 || seedDraws(s, seedRuns(f, traffic, loads, len(replay) > 0))
	if f.seedGiven && !seedDrawn {
		return seedNotDrawn(f, traffic, loads, len(replay) > 0)
	}
	// The steps are priced by the scenario's engine, routing and cost
	// source: say so as predict does, counting the tables' ops on the
	// step predict would price with these flags, under the engine's
	// running limit the run serves with (its speculative capture stops at
	// that request pool).
	scen.MaxRunning = s.RequestPool()
	pr, _, err := sim.Predict(scen)
	if err != nil {
		return err
	}
	priced := pricedByOf(pr, fmt.Sprintf("a %s step at batch %d, context %d", pr.Workload.Phase, pr.Sequences, pr.Workload.Context))
	slo := serving.SLO{TTFTMs: f.sloTTFT, TPOTMs: f.sloTPOT, Percentile: f.sloPct}
	out := simulateOutput{Model: scen.Arch.Name, Topology: topo.Name, Plan: scen.Plan.Normalized().String(), GPUs: s.GPUs(),
		KVDtype: string(s.KVDtype()), KVDefault: scen.KVDefault, Options: opts, Engine: s.Engine(), Overheads: overheads, KVBlocks: s.KVBlocks(), KVBudget: s.KVBudget(), Schedulers: s.Schedulers(),
		Instances: max(1, f.instances), Router: string(router), Traffic: traffic, SLO: slo, Trace: trace, EngineNote: engineNote, PlanNote: planNote,
		DefaultsNote: defaultsNote, OverheadsNote: overheadsNote, PricedBy: priced, SchedulerDefaults: s.DefaultsUsed(), SeedDrawn: seedDrawn}
	if y := scen.SpecYield(); y != nil {
		out.Spec = y
		out.SpecLine = fmt.Sprintf("speculative: %s; %.2f tokens per step per request (sd %.2f), drawn per request and step from %s%s",
			scen.Build.Spec.String(scen.Workload), y.TokensPerStep, math.Sqrt(y.TokensVar), y.Source, y.Caveats())
	}
	ro := serving.RunOptions{SLO: slo}
	// The table's timeline is the run's, cut into as many windows as
	// --timeline asks: merging the run's default windows gave at most
	// that many, 30 rows for 50 (60 windows two to a row) and 60 for any
	// number above.
	if f.output != formatJSON && f.timeline > 0 && len(measured) == 0 && !f.sweepQPS && !f.sweepConc {
		ro.TimelineWindows = f.timeline
	}
	switch {
	case len(measured) > 0:
		for i := range measured {
			lc, err := s.CompareMeasured(&measured[i], f.seed, ro)
			if err != nil {
				return err
			}
			out.Compare = append(out.Compare, lc)
			out.Runs = append(out.Runs, lc.Result)
		}
	case f.sweepQPS || f.sweepConc:
		so := serving.SweepOptions{}
		var sw *serving.Sweep
		if f.sweepQPS {
			if len(loads) > 0 {
				so.StartQPS = loads[0].qps
			}
			sw, err = s.SweepQPS(traffic, slo, so)
		} else {
			if len(loads) > 0 {
				so.StartConcurrency = loads[0].concurrency
			}
			sw, err = s.SweepConcurrency(traffic, slo, so)
		}
		if err != nil {
			return err
		}
		out.Runs, out.Sweep = sw.Runs, sw
		if f.forQPS > 0 {
			if out.Capacity, err = s.CapacityFor(traffic, slo, sw, f.forQPS); err != nil {
				return err
			}
		}
	case len(replay) > 0:
		for i, q := range replay {
			t := traffic
			t.Requests = replayed[i]
			res, err := s.Run(t, ro)
			if err != nil {
				return err
			}
			res.Load = fmt.Sprintf("trace at %s req/s", strconv.FormatFloat(q, 'g', 4, 64))
			out.Runs = append(out.Runs, res)
		}
	case len(loads) == 0:
		res, err := s.Run(traffic, ro)
		if err != nil {
			return err
		}
		out.Runs = []*serving.Result{res}
	default:
		for _, l := range loads {
			t := traffic
			t.QPS, t.Concurrency = l.qps, l.concurrency
			res, err := s.Run(t, ro)
			if err != nil {
				return err
			}
			out.Runs = append(out.Runs, res)
		}
	}
	for _, g := range out.loadGroups() {
		out.Frontiers = append(out.Frontiers, serving.NewFrontierOf(out.Runs, g.runs, slo, g.name, out.chosenRun(g.runs)))
	}
	var files []func() error
	if f.plotFile != "" {
		files = append(files, func() error { return writeSimulatePlot(f.plotFile, &out) })
	}
	if f.paretoFile != "" {
		files = append(files, func() error { return writeParetoPlot(f.paretoFile, &out) })
	}
	if f.frontierFile != "" {
		files = append(files, func() error {
			return writeFileWith(f.frontierFile, func(w io.Writer) error { return serving.WriteFrontiersCSV(w, out.Frontiers) })
		})
	}
	if f.reportFile != "" {
		files = append(files, func() error {
			var groups []string
			for _, fr := range out.Frontiers {
				groups = append(groups, fr.Group)
			}
			rep := build.Serving(build.ServingInput{Title: out.paretoTitle(), Subtitle: strings.Join(groups, "; "), Setup: out.headLines(),
				Runs: out.Runs, Frontiers: out.Frontiers, Compare: out.Compare, Capacity: out.Capacity})
			return report.WriteFile(f.reportFile, rep)
		})
	}
	return renderThen(stdout, f.output, view{
		JSON: &out,
		Text: func(w io.Writer, md bool) error { return writeSimulateTables(w, &out, f.timeline, md) },
	}, files...)
}

// trafficFlagError is the traffic's own refusal (serving.Traffic.Validate)
// as a usage error naming the flag that set the field, with the flag's
// value; a field no flag sets keeps the traffic's words.
func (f *simulateFlags) trafficFlagError(err error) error {
	var fe *serving.FieldError
	if !errors.As(err, &fe) {
		return causeError("", nil, err)
	}
	flags := map[string]struct {
		flag  string
		value any
	}{
		"prompt.mean": {"--isl", f.isl}, "prompt.spread": {"--isl-spread", f.islSpread}, "prompt.dist": {"--isl-dist", quote(f.islDist)},
		"output.mean": {"--osl", f.osl}, "output.spread": {"--osl-spread", f.oslSpread}, "output.dist": {"--osl-dist", quote(f.oslDist)},
		"burstiness": {"--burstiness", f.burstiness}, "num_requests": {"--requests", f.requests}, "duration_s": {"--duration", f.durationS},
	}
	fl, ok := flags[fe.Field]
	if !ok {
		return causeError("", nil, err)
	}
	e := flagError(fl.flag, fl.value, "%s", fe.Want).(*usageError)
	e.Err = err
	return e
}

// arrivalWithBurstiness is the arrival process --arrival and --burstiness
// name together, as vllm bench serve reads --burstiness: the shape of
// gamma-distributed gaps (1 = Poisson). A burstiness other than 1 implies
// gamma arrivals when --arrival is not given; one that cannot shape the
// arrivals (another --arrival, a closed loop, a trace's own times, a
// measured result's load) is refused.
func (f *simulateFlags) arrivalWithBurstiness(arrival serving.Arrival) (serving.Arrival, error) {
	if !f.burstinessGiven {
		return arrival, nil
	}
	b := strconv.FormatFloat(f.burstiness, 'g', -1, 64)
	switch {
	case !(f.burstiness > 0):
		// A Traffic's burstiness 0 is "not gamma", which Validate
		// cannot tell from a shape given as 0: refused here.
		return "", flagError("--burstiness", b, "%s", serving.BurstinessWant)
	case f.concurrency != "" || f.sweepConc:
		return "", flagError("--burstiness with --concurrency", nil, "a closed loop has no arrival process: its clients send the next request when the last completes")
	case len(f.compare) > 0:
		return "", flagError("--burstiness with --compare", nil, "the measured result sets the load, its burstiness included: drop --burstiness")
	case f.requestsFile != "" && f.qps == "" && !f.sweepQPS:
		return "", flagError("--burstiness with --requests-file", nil, "the trace's own arrival times are replayed: drop --burstiness, or give --qps for arrivals at a rate")
	case f.burstiness == 1 || arrival == serving.Gamma:
		return arrival, nil
	case f.arrivalGiven:
		return "", flagError("--arrival "+string(arrival)+" with --burstiness "+b, nil, "the burstiness is the shape of gamma arrivals: drop --arrival, or use --arrival gamma")
	}
	return serving.Gamma, nil
}

// writeFileWith creates path and writes it with write.
func writeFileWith(path string, write func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := write(fh); err != nil {
		fh.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// simulateOutput is what simulate reports (its JSON form).
type simulateOutput struct {
	// SeedDrawn: a run drew from the seed, so the load line names it.
	SeedDrawn bool   `json:"-"`
	Model     string `json:"model"`
	Topology  string `json:"topology"`
	Plan      string `json:"plan"`
	GPUs      int    `json:"gpus"`
	KVDtype   string `json:"kv_dtype"`
	// KVDefault says the engine chose KVDtype (Scenario.KVDefault).
	KVDefault *sim.KVDefault        `json:"kv_default,omitempty"`
	Options   sim.Options           `json:"options"`
	Engine    serving.EngineOptions `json:"engine"`
	Overheads serving.Overheads     `json:"overheads"`
	KVBlocks  int                   `json:"kv_blocks_per_scheduler"`
	// KVBudget is the engine's rule the blocks were sized by (zero with
	// --num-gpu-blocks-override).
	KVBudget   sim.KVBudget               `json:"kv_budget,omitzero"`
	Schedulers int                        `json:"schedulers"`
	Instances  int                        `json:"instances"`
	Router     string                     `json:"router"`
	Traffic    serving.Traffic            `json:"traffic"`
	Trace      *serving.Trace             `json:"trace,omitempty"`
	SLO        serving.SLO                `json:"slo,omitzero"`
	Runs       []*serving.Result          `json:"runs"`
	Sweep      *serving.Sweep             `json:"sweep,omitempty"`
	Capacity   *serving.Capacity          `json:"capacity,omitempty"`
	Compare    []*serving.LevelComparison `json:"compare,omitempty"`
	// Frontiers are the runs on the capacity plane, one per load shape
	// (loadGroups).
	Frontiers []*serving.Frontier `json:"frontiers"`
	// Spec is the speculative method the steps run and its acceptance
	// (each request's tokens per step drawn from it), nil without.
	Spec *sim.SpecYield `json:"spec,omitempty"`
	// SpecLine describes it for people.
	SpecLine string `json:"-"`
	// EngineNote says where the engine came from when measured results
	// named one (resultsEngine).
	EngineNote string `json:"engine_note,omitempty"`
	// PlanNote says which plan flags the measured results' recorded plan
	// set (resultsPlan); DefaultsNote that the default model or box
	// prices results that name none (resultsDefaults).
	PlanNote     string `json:"plan_note,omitempty"`
	DefaultsNote string `json:"defaults_note,omitempty"`
	// SchedulerDefaults names the scheduler settings left to the engine's
	// defaults, the values used and whose they are
	// (serving.Simulator.DefaultsUsed).
	SchedulerDefaults string `json:"scheduler_defaults,omitempty"`
	// OverheadsNote is the caveat of --serving-overheads fitted on
	// another box or model, or of unrecorded origin.
	OverheadsNote string `json:"overheads_note,omitempty"`
	// PricedBy is what priced the step model (predict's engine, moe
	// routing and costs lines).
	PricedBy *pricedBy `json:"priced_by,omitempty"`
}

// loadGroup is the runs of one load shape: its name ("ISL 1024 / OSL
// 256", the trace's, a measured level's lengths) and the runs' indexes.
type loadGroup struct {
	name string
	runs []int
}

// sameShapeFrac is how far apart two measured levels' prompt (or output)
// lengths may be and still share a plane: a random dataset's draws move
// a level's mean a few percent from another's (InferenceX's DSR1 levels:
// 517 to 521 prompt tokens of a nominal 1024), another ISL moves it
// several fold.
const sameShapeFrac = 0.1

// loadGroups splits the runs by load shape, one capacity plane each (as
// plan does per context): the runs of a sweep, of --qps or --concurrency
// lists and of a replayed trace share theirs; measured levels go by their
// lengths, a level joining the first group whose first level's mean
// prompt and output lengths are within sameShapeFrac of its own, groups
// in the order of their first level.
func (o *simulateOutput) loadGroups() []loadGroup {
	if len(o.Compare) == 0 {
		name := fmt.Sprintf("ISL %s / OSL %s", lengthsString(o.Traffic.Prompt), lengthsString(o.Traffic.Output))
		if o.Trace != nil {
			name = fmt.Sprintf("trace %s", filepath.Base(o.Trace.File))
		}
		g := loadGroup{name: name}
		for i := range o.Runs {
			g.runs = append(g.runs, i)
		}
		return []loadGroup{g}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= sameShapeFrac*math.Max(a, b) }
	var groups []loadGroup
	var first []*serving.Measured
	for i, lc := range o.Compare {
		m := lc.Measured
		k := slices.IndexFunc(first, func(f *serving.Measured) bool {
			return near(f.MeanPrompt(), m.MeanPrompt()) && near(f.MeanOutput(), m.MeanOutput())
		})
		if k < 0 {
			k = len(groups)
			first = append(first, m)
			groups = append(groups, loadGroup{name: fmt.Sprintf("ISL %.0f / OSL %.0f (measured)", m.MeanPrompt(), m.MeanOutput())})
		}
		groups[k].runs = append(groups[k].runs, i)
	}
	return groups
}

// chosenRun is, among the runs of one group, the run a sweep picked, else
// the one with the most output tokens/s per GPU among those meeting the
// SLO (without one: neither overloaded nor too short to reach steady
// state, as an SLO's verdict asks: a filling engine's throughput is not
// the deployment's); -1 when none qualifies.
func (o *simulateOutput) chosenRun(group []int) int {
	if o.Sweep != nil {
		return o.Sweep.Best
	}
	best := -1
	for _, i := range group {
		r := o.Runs[i]
		ok := !r.Overloaded && !r.TooShort && (!(o.SLO.TTFTMs > 0 || o.SLO.TPOTMs > 0) || r.MeetsSLO)
		if ok && (best < 0 || r.OutputTokensPerSPerGPU > o.Runs[best].OutputTokensPerSPerGPU) {
			best = i
		}
	}
	return best
}

// parseFloats parses a comma list of positive numbers.
func parseFloats(flag, s string) ([]float64, error) {
	var out []float64
	for _, p := range splitList(s) {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0) || v > 1e7 {
			return nil, flagError(flag, nil, "%q is not a positive number up to 1e7", p)
		}
		if slices.Contains(out, v) {
			return nil, flagError(flag, quote(s), "%s is given twice: name each rate once", p)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, flagError(flag, nil, "no value")
	}
	return out, nil
}

func lengthsString(l serving.Lengths) string {
	if l.Dist == serving.Fixed || l.Dist == "" {
		return fmt.Sprintf("%d fixed", l.Mean)
	}
	return fmt.Sprintf("%d %s (spread %g)", l.Mean, l.Dist, l.Spread)
}

// paretoTitle names the deployment the charts and report are of.
func (o *simulateOutput) paretoTitle() string {
	return fmt.Sprintf("%s %s on %s (%d GPUs): throughput per GPU against speed per user", o.Model, o.Plan, o.Topology, o.GPUs)
}

// headLines are the lines above the runs' table: the deployment, the
// engine, the load, a sweep's answer, a capacity answer.
func (o *simulateOutput) headLines() []string {
	e := o.Engine
	load := "prompts " + lengthsString(o.Traffic.Prompt) + ", outputs " + lengthsString(o.Traffic.Output)
	if t := o.Trace; t != nil {
		load = fmt.Sprintf("trace %s (%s): %d requests over %.1f s", t.File, t.Format, len(t.Requests), t.SpanS())
		if t.Sessions > 0 {
			load += fmt.Sprintf(", %d sessions", t.Sessions)
		}
		if t.HashBlockTokens > 0 {
			load += fmt.Sprintf(", prefix hashes of %d-token blocks", t.HashBlockTokens)
		}
		if t.Skipped > 0 {
			load += fmt.Sprintf("; %d rows with zero tokens left out (first at line %d)", t.Skipped, t.FirstSkipped)
		}
		// --requests and --duration cut the trace short: the runs take
		// only part of what the line above describes.
		if n := o.Traffic.NumRequests; n > 0 && n < len(t.Requests) {
			load += fmt.Sprintf("; each run takes its first %d (--requests %d)", n, n)
		}
		if d := o.Traffic.DurationS; d > 0 {
			load += fmt.Sprintf("; each run takes the requests arriving in its first %g s (--duration %g)", d, d)
		}
	} else if len(o.Traffic.Requests) > 0 {
		load = fmt.Sprintf("%d requests from a file", len(o.Traffic.Requests))
	}
	if len(o.Compare) > 0 {
		load = fmt.Sprintf("%d measured load level(s), each simulated as measured", len(o.Compare))
	}
	// The scheduler's limits are the engine line's, resolved.
	opts := o.Options
	opts.MaxNumBatchedTokens, opts.MaxNumSeqs = 0, 0
	head := []string{
		fmt.Sprintf("simulate: %s %s on %s (%d GPUs), kv %s%s, %s", o.Model, o.Plan, o.Topology, o.GPUs, o.KVDtype, kvDefaultNote(o.KVDefault), opts.Label()),
		engineLine(e, o.KVBlocks, o.Schedulers, o.Instances, o.Router, o.Overheads),
	}
	if o.SchedulerDefaults != "" {
		head = append(head, "engine defaults: "+o.SchedulerDefaults)
	}
	if o.KVBudget.Rule != "" {
		head = append(head, "kv pool: "+kvBudgetText(o.KVBudget)+"; the pool is "+o.KVBudget.PoolLess())
		if c := o.KVBudget.GraphCaveat(); c != "" {
			head = append(head, "caveat: "+c)
		}
	}
	if o.OverheadsNote != "" {
		head = append(head, o.OverheadsNote)
	}
	if o.PricedBy != nil {
		// "engine" above is the scheduler; these are the step's kernels.
		for _, kv := range o.PricedBy.lines("step engine") {
			head = append(head, kv[0]+": "+kv[1])
		}
	}
	seed := ""
	if o.SeedDrawn {
		seed = fmt.Sprintf(", seed %d", o.Traffic.Seed)
	}
	head = append(head, fmt.Sprintf("load: %s%s; SLO %s", load, seed, o.SLO))
	if o.EngineNote != "" {
		head = append(head, o.EngineNote)
	}
	if o.PlanNote != "" {
		head = append(head, o.PlanNote)
	}
	if o.DefaultsNote != "" {
		head = append(head, o.DefaultsNote)
	}
	if o.SpecLine != "" {
		head = append(head, o.SpecLine)
	}
	if s := o.Sweep; s != nil {
		switch {
		case s.Best < 0:
			head = append(head, "sweep: no load tried meets the SLO")
		case s.MaxQPS > 0:
			head = append(head, fmt.Sprintf("sweep: largest QPS meeting the SLO %.3f (fails at %.3f), %.1f output tok/s, %.1f per GPU",
				s.MaxQPS, s.Bracket, s.Runs[s.Best].OutputTokensPerS, s.Runs[s.Best].OutputTokensPerSPerGPU))
		default:
			head = append(head, fmt.Sprintf("sweep: largest concurrency meeting the SLO %d (fails at %.0f), %.1f output tok/s, %.1f per GPU",
				s.MaxConcurrency, s.Bracket, s.Runs[s.Best].OutputTokensPerS, s.Runs[s.Best].OutputTokensPerSPerGPU))
		}
	}
	if s := o.Sweep; s != nil && s.Lengthened > 0 {
		head = append(head, fmt.Sprintf("sweep: %d of %d runs lengthened to reach steady state (arrivals over at least %d x E2E p50, a running batch no longer growing)", s.Lengthened, len(s.Runs), serving.SteadyStateE2Es))
	}
	if c := o.Capacity; c != nil {
		head = append(head, "capacity: "+build.CapacityLine(c))
	}
	return head
}

func writeSimulateTables(w io.Writer, o *simulateOutput, timelineRows int, md bool) error {
	for _, h := range o.headLines() {
		if md {
			fmt.Fprintf(w, "%s  \n", h)
		} else {
			fmt.Fprintln(w, h)
		}
	}
	if len(o.Compare) > 0 {
		return writeCompareTables(w, o.Compare, md)
	}
	header := []string{"load", "requests", "duration s", "TTFT ms p50/p90/p99", "TPOT ms p50/p90/p99", "ITL ms p50/p99",
		"E2E s p50/p90/p99", "out tok/s", "tok/s/GPU", "req/s offered/served", "goodput req/s", "in system", "KV peak", "preemptions", "SLO"}
	var rows [][]string
	var overloaded []string
	for _, r := range o.Runs {
		slo, goodput := "-", "-"
		if r.SLO.TTFTMs > 0 || r.SLO.TPOTMs > 0 {
			slo = "no"
			if r.GoodputJudged() {
				goodput = fmt.Sprintf("%.3f", r.GoodputRequestsPerS)
			}
			switch {
			case r.MeetsSLO:
				slo = "yes"
			case r.TooShort:
				slo = "too short"
			}
		}
		// An overloaded run's latencies that grow with it (E2E; TTFT when
		// its queue grows, TPOT when it rises) are the run's length's: no
		// percentile of them describes the box.
		ttft := fmt.Sprintf("%.0f / %.0f / %.0f", r.TTFTMs.P50, r.TTFTMs.P90, r.TTFTMs.P99)
		tpot := fmt.Sprintf("%.1f / %.1f / %.1f", r.TPOTMs.P50, r.TPOTMs.P90, r.TPOTMs.P99)
		e2e := fmt.Sprintf("%.2f / %.2f / %.2f", r.E2EMs.P50/1e3, r.E2EMs.P90/1e3, r.E2EMs.P99/1e3)
		if r.QueueGrows {
			ttft = "unbounded"
		}
		itl := fmt.Sprintf("%.1f / %.1f", r.ITLMs.P50, r.ITLMs.P99)
		if r.TPOTUnbounded() {
			tpot = "unbounded"
		}
		if !r.TPOTTimed() {
			// No request had a token after its first: nothing timed.
			tpot, itl = "-", "-"
		}
		if r.Overloaded {
			e2e = "unbounded"
			overloaded = append(overloaded, fmt.Sprintf("%s: %s", r.Load, overloadText(r)))
		}
		if r.TooShort {
			overloaded = append(overloaded, fmt.Sprintf("%s: %s", r.Load, tooShortText(r, o.Traffic)))
		}
		rows = append(rows, []string{r.Load, strconv.Itoa(r.Requests), fmt.Sprintf("%.1f", r.DurationS), ttft, tpot,
			itl, e2e,
			fmt.Sprintf("%.1f", r.OutputTokensPerS), fmt.Sprintf("%.1f", r.OutputTokensPerSPerGPU), rateCell(r),
			goodput, fmt.Sprintf("%.1f", r.MeanConcurrency),
			fmt.Sprintf("%.0f %%", 100*r.PeakKVUseFrac), strconv.Itoa(r.Preemptions), slo})
	}
	if err := writeTable(w, "runs", "runs (TTFT, TPOT, ITL, end-to-end latency; throughput over the run; request rates, goodput included, over the second half of the arrivals; KV peak of all blocks)", header, rows, md); err != nil {
		return err
	}
	for _, r := range o.Runs {
		if r.CachedPromptTokens > 0 {
			overloaded = append(overloaded, fmt.Sprintf("%s: prefix cache: %.1f %% of the prompt tokens hit (%d of %d)", r.Load, 100*r.PrefixHitFrac, r.CachedPromptTokens, r.PromptTokens))
		}
	}
	for _, l := range overloaded {
		if md {
			fmt.Fprintf(w, "\n%s  \n", l)
		} else {
			fmt.Fprintln(w, l)
		}
	}
	if len(o.Runs) != 1 || timelineRows == 0 {
		return nil
	}
	r := o.Runs[0]
	tl := coarsen(r.Timeline, timelineRows)
	var trows [][]string
	for _, win := range tl {
		trows = append(trows, []string{fmt.Sprintf("%.1f-%.1f", win.StartS, win.EndS), fmt.Sprintf("%.1f", win.OutputTokensPerS),
			fmt.Sprintf("%.1f", win.Running), fmt.Sprintf("%.1f", win.Waiting), fmt.Sprintf("%.1f %%", 100*win.KVUseFrac),
			fmt.Sprintf("%.1f %%", 100*win.PeakKVUseFrac), strconv.Itoa(win.Preemptions)})
	}
	return writeTable(w, "timeline", "timeline (time-weighted means per window)",
		[]string{"time s", "out tok/s", "running", "waiting", "KV use", "KV peak", "preemptions"}, trows, md)
}

// overloadText is the overload verdict of a run in one phrase: the queue
// that grows, or the running batch that kept growing through a
// lengthened run, and which latencies grow with them.
func overloadText(r *serving.Result) string {
	switch {
	case !r.QueueGrows && r.TPOTRises:
		return fmt.Sprintf("overloaded: offered %s req/s; the requests in the system grow by %s/s and TPOT rises by %.0f %% across the second half of the arrivals, still in a run of %d requests (TPOT and end-to-end latency grow with the run's length)",
			sig3(r.OfferedRequestsPerS), sig3(r.BatchGrowthPerS), 100*r.TPOTRiseFrac, r.Requests)
	case !r.QueueGrows:
		return fmt.Sprintf("overloaded: offered %s req/s; E2E p50 %.1f s against arrivals over %.1f s, still in a run of %d requests (end-to-end latency grows with the run's length)",
			sig3(r.OfferedRequestsPerS), r.E2EMs.P50/1e3, r.ArrivalSpanS, r.Requests)
	}
	return fmt.Sprintf("overloaded: offered %s req/s, served %s req/s, queue grows by %s requests/s (TTFT and end-to-end latency grow with the run's length)",
		sig3(r.OfferedRequestsPerS), sig3(r.ServedRequestsPerS), sig3(r.QueueGrowthPerS))
}

// tooShortText says a run never reached steady state, and what load
// would: more requests, or a longer --duration, at the same rate (a
// trace's own requests cannot be lengthened); for a running batch that
// still grows, a run twice as long tells whether it is filling or falling
// behind.
func tooShortText(r *serving.Result, t serving.Traffic) string {
	s := fmt.Sprintf("too short to reach steady state: %d requests over %.1f s, E2E p50 %.1f s", r.Requests, r.ArrivalSpanS, r.E2EMs.P50/1e3)
	// The verdict withheld is spoken of only where an SLO was given.
	noVerdict := ""
	if !r.SLO.IsZero() {
		noVerdict = "; no SLO verdict"
	}
	want := fmt.Sprintf("(arrivals over at least %d x E2E p50)%s", serving.SteadyStateE2Es, noVerdict)
	if r.TPOTRises {
		s = fmt.Sprintf("not steady: the requests in the system grow by %s/s and TPOT rises by %.0f %% across the second half of the arrivals (an engine still filling, or one falling behind)",
			sig3(r.BatchGrowthPerS), 100*r.TPOTRiseFrac)
		want = "to tell" + noVerdict
	}
	switch {
	case len(t.Requests) > 0 || r.MinRequests == 0:
		return s + "; a longer load would tell" + noVerdict
	case t.DurationS > 0 && t.NumRequests == 0:
		return s + fmt.Sprintf("; pass --duration >= %.0f %s", math.Ceil(t.DurationS*float64(r.MinRequests)/float64(r.Requests)), want)
	default:
		return s + fmt.Sprintf("; pass --requests >= %d %s", r.MinRequests, want)
	}
}

// sig3 writes a rate with three significant digits and no bare point
// ("124", "30.1", "9.00", "0.456"), where %#.3g writes "124.".
func sig3(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	// Round to three digits first, so that 99.96 counts as 100.
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	decimals := max(0, 2-int(math.Floor(math.Log10(math.Abs(r)))))
	return strconv.FormatFloat(r, 'f', decimals, 64)
}

// rateCell is the offered and served request rates of a run, "-" where
// the arrivals span no time.
func rateCell(r *serving.Result) string {
	if r.OfferedRequestsPerS == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f / %.3f", r.OfferedRequestsPerS, r.ServedRequestsPerS)
}

// maxTimelineRows bounds --timeline: a table, not a trace of every step.
const maxTimelineRows = 1000

// coarsen merges the timeline's windows into at most n rows.
func coarsen(tl []serving.Window, n int) []serving.Window {
	if n <= 0 || len(tl) <= n {
		return tl
	}
	k := (len(tl) + n - 1) / n
	var out []serving.Window
	for i := 0; i < len(tl); i += k {
		j := min(i+k, len(tl))
		m := serving.Window{StartS: tl[i].StartS, EndS: tl[j-1].EndS}
		for _, w := range tl[i:j] {
			d := w.EndS - w.StartS
			m.OutputTokensPerS += w.OutputTokensPerS * d
			m.Running += w.Running * d
			m.Waiting += w.Waiting * d
			m.KVUseFrac += w.KVUseFrac * d
			m.BusyFrac += w.BusyFrac * d
			m.PeakKVUseFrac = max(m.PeakKVUseFrac, w.PeakKVUseFrac)
			m.Preemptions += w.Preemptions
		}
		if d := m.EndS - m.StartS; d > 0 {
			m.OutputTokensPerS /= d
			m.Running /= d
			m.Waiting /= d
			m.KVUseFrac /= d
			m.BusyFrac /= d
		}
		out = append(out, m)
	}
	return out
}

// writeParetoPlot draws the capacity plane of each load shape
// (build.ServingScatter), panels two to a row, each titled by its shape.
func writeParetoPlot(path string, o *simulateOutput) error {
	if len(o.Frontiers) == 1 {
		p, err := scatterPlot(o.paretoTitle(), build.ServingScatter(o.Frontiers[0]))
		if err != nil {
			return err
		}
		w, h := paretoChartSize(p)
		return chart.SaveWith(path, w, h, func(dc draw.Canvas) { drawParetoChart(dc, p) })
	}
	cols := min(2, len(o.Frontiers))
	rows := (len(o.Frontiers) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, fr := range o.Frontiers {
		p, err := scatterPlot(fmt.Sprintf("%s %s on %s, %s", o.Model, o.Plan, o.Topology, fr.Group), build.ServingScatter(fr))
		if err != nil {
			return err
		}
		grid[i/cols][i%cols] = p
	}
	return chart.Save(path, vg.Length(cols)*8*vg.Inch, vg.Length(rows)*5.5*vg.Inch, grid, draw.Tiles{PadX: vg.Points(24), PadY: vg.Points(24)})
}

// paretoChartSize is the size of one capacity chart p drawn with its
// legend under the axis (chart.DrawLegendBelow): the legend's long entries
// ("runs missing the SLO, too short to judge or overloaded") beside the
// data had taken about 40 % of its width.
func paretoChartSize(p *plot.Plot) (w, h vg.Length) {
	return 10 * vg.Inch, 6.5*vg.Inch + chart.LegendBelowHeight(p)
}

// drawParetoChart draws one capacity chart p into dc, its legend under
// the axis (paretoChartSize).
func drawParetoChart(dc draw.Canvas, p *plot.Plot) { chart.DrawLegendBelow(dc, p) }

// plotLoadAxis is the load axis of the latency chart and the runs in its
// order: the offered rate when every run is an open loop, the clients
// when every run is a closed loop, else (traces, or measured levels of
// both kinds: GuideLLM's concurrency levels beside vllm bench's rates) the
// rate each run served, which places every kind on one axis. A client
// count on a rate axis would sit at 0; lines join the runs sorted by x,
// not in file order.
//
// The offered and served rates are the table's (its "req/s offered/served"
// column, over the second half of the arrivals): the chart's "offered
// load" had been the nominal --qps, 0.5 where the table's offered rate of
// the same run said 0.597. A run that column has no rate for ("-": fewer
// than three requests in that half) puts every run at its nominal --qps,
// or its rate served over the whole run, and the label says which.
func plotLoadAxis(runs []*serving.Result) (sorted []*serving.Result, xOf func(*serving.Result) float64, label string) {
	open, closed, rated := true, true, true
	for _, r := range runs {
		open = open && r.QPS > 0
		closed = closed && r.QPS == 0 && r.Concurrency > 0
		rated = rated && r.OfferedRequestsPerS > 0 && r.ServedRequestsPerS > 0
	}
	switch {
	case open && rated:
		xOf, label = func(r *serving.Result) float64 { return r.OfferedRequestsPerS }, "offered load, requests/s (as the table's req/s offered)"
	case open:
		xOf, label = func(r *serving.Result) float64 { return r.QPS }, "nominal load (--qps), requests/s"
	case closed:
		xOf, label = func(r *serving.Result) float64 { return float64(r.Concurrency) }, "concurrent clients"
	case rated:
		xOf, label = func(r *serving.Result) float64 { return r.ServedRequestsPerS }, "requests/s served (as the table's req/s served)"
	default:
		xOf, label = func(r *serving.Result) float64 { return r.RequestsPerS }, "requests/s served over the whole run"
	}
	sorted = slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b *serving.Result) int { return cmp.Compare(xOf(a), xOf(b)) })
	return sorted, xOf, label
}

// writeSimulatePlot draws TTFT (top) and TPOT (bottom) percentiles
// against the load of each run (simulatePlots).
func writeSimulatePlot(path string, o *simulateOutput) error {
	top, bottom, err := simulatePlots(o)
	if err != nil {
		return err
	}
	return chart.Save(path, 9*vg.Inch, 8*vg.Inch, [][]*plot.Plot{{top}, {bottom}}, draw.Tiles{PadY: vg.Points(18)})
}

// simulatePlots are the latency chart's panels: TTFT and TPOT
// percentiles against the load of each run (plotLoadAxis), each latency
// axis from 0 to past its largest value and SLO.
func simulatePlots(o *simulateOutput) (top, bottom *plot.Plot, err error) {
	runs, xOf, xLabel := plotLoadAxis(o.Runs)
	// An overloaded run's TTFT (its queue grows) or TPOT (its batch does)
	// grows with the run: its points are left out of that panel (the
	// title says how many).
	panel := func(title, unit string, get func(r *serving.Result) serving.Stats, limit float64, unbounded, untimed func(r *serving.Result) bool) (*plot.Plot, error) {
		runs := runs
		{
			var kept []*serving.Result
			nUnbounded, nUntimed := 0, 0
			for _, r := range runs {
				switch {
				case untimed(r):
					nUntimed++
				case unbounded(r):
					nUnbounded++
				default:
					kept = append(kept, r)
				}
			}
			if nUnbounded > 0 {
				title += fmt.Sprintf(" (%d overloaded run(s) left out: unbounded)", nUnbounded)
			}
			if nUntimed > 0 {
				title += fmt.Sprintf(" (%d run(s) left out: one-token outputs, nothing timed)", nUntimed)
			}
			runs = kept
		}
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = xLabel
		p.Y.Label.Text = unit
		p.X.Tick.Marker, p.Y.Tick.Marker = chart.PlainTicks{}, chart.PlainTicks{}
		series := []struct {
			name string
			v    func(s serving.Stats) float64
			c    color.RGBA
		}{
			{"p50", func(s serving.Stats) float64 { return s.P50 }, color.RGBA{R: 60, G: 110, B: 200, A: 255}},
			{"p90", func(s serving.Stats) float64 { return s.P90 }, color.RGBA{R: 230, G: 150, B: 30, A: 255}},
			{"p99", func(s serving.Stats) float64 { return s.P99 }, color.RGBA{R: 200, G: 40, B: 40, A: 255}},
		}
		for _, s := range series {
			if len(runs) == 0 {
				break
			}
			xy := make(plotter.XYs, len(runs))
			for i, r := range runs {
				xy[i] = plotter.XY{X: xOf(r), Y: s.v(get(r))}
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, fmt.Errorf("plot: %w", err)
			}
			l.Color, pts.Color = s.c, s.c
			p.Add(l, pts)
			p.Legend.Add(s.name, l, pts)
		}
		if limit > 0 && len(runs) > 0 {
			lo, hi := xOf(runs[0]), xOf(runs[len(runs)-1])
			if hi <= lo {
				hi = lo + 1
			}
			l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: limit}, {X: hi, Y: limit}})
			if err != nil {
				return nil, fmt.Errorf("plot: %w", err)
			}
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			l.Color = color.RGBA{A: 255}
			p.Add(l)
			p.Legend.Add("SLO", l)
		}
		// From 0, as the HTML report's axes: gonum spans the data alone,
		// so the largest p99 sat on the axis' end with no tick above it
		// and the smallest on its start, a latency axis not from 0.
		hi := limit
		for _, r := range runs {
			hi = max(hi, get(r).P99, get(r).P90, get(r).P50)
		}
		if hi > 0 {
			p.Y.Min, p.Y.Max = 0, hi*1.06
		}
		return p, nil
	}
	top, err = panel(fmt.Sprintf("%s %s on %s: time to first token", o.Model, o.Plan, o.Topology), "ms",
		func(r *serving.Result) serving.Stats { return r.TTFTMs }, o.SLO.TTFTMs, func(r *serving.Result) bool { return r.QueueGrows },
		func(*serving.Result) bool { return false }) // every request has its first token timed
	if err != nil {
		return nil, nil, err
	}
	bottom, err = panel("time per output token", "ms", func(r *serving.Result) serving.Stats { return r.TPOTMs }, o.SLO.TPOTMs, func(r *serving.Result) bool { return r.TPOTUnbounded() },
		func(r *serving.Result) bool { return !r.TPOTTimed() })
	if err != nil {
		return nil, nil, err
	}
	return top, bottom, nil
}

// writeCompareTables writes, per measured level, the simulated load's
// statistics beside the measured ones (build.ComparisonTable's cells) and
// what was inferred in rebuilding the load.
func writeCompareTables(w io.Writer, cmps []*serving.LevelComparison, md bool) error {
	for _, lc := range cmps {
		m := lc.Measured
		t := build.ComparisonTable(lc)
		header := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			header[i] = c.Name
		}
		header[1] = "mean (predicted / measured)"
		rows := make([][]string, len(t.Rows))
		for i, r := range t.Rows {
			rows[i] = r.Cells
		}
		title := fmt.Sprintf("%s record %d (%s): %s, %d requests, mean %.0f prompt / %.0f output tokens; simulated as %s",
			m.File, m.Record, m.Format, m.Label(), m.Completed, m.MeanPrompt(), m.MeanOutput(), lc.Load)
		if err := writeTable(w, "predicted vs measured: "+m.Label(), title, header, rows, md); err != nil {
			return err
		}
		notes := append(append(append([]string(nil), lc.TrafficNotes...), lc.Notes...), m.Notes...)
		if v := build.SLOVerdictLine(lc); v != "" {
			notes = append([]string{v}, notes...)
		}
		for _, n := range notes {
			if md {
				fmt.Fprintf(w, "\n%s  \n", n)
			} else {
				fmt.Fprintf(w, "  %s\n", n)
			}
		}
	}
	return nil
}
