package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/internal/units"

	"github.com/spf13/pflag"
	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// scheduleOpJSON is one op in `tpscope schedule --output json`; field
// names are the CLI's contract (id, kind, flops, bytes, comm_bytes, rank at
// least).
type scheduleOpJSON struct {
	ID           string  `json:"id"`
	Rank         int     `json:"rank"`
	Kind         string  `json:"kind"`
	Layer        int     `json:"layer"`
	Block        string  `json:"block"`
	Name         string  `json:"name"`
	M            int64   `json:"m,omitempty"`
	N            int64   `json:"n,omitempty"`
	K            int64   `json:"k,omitempty"`
	Batch        float64 `json:"batch,omitempty"`
	WeightDtype  string  `json:"weight_dtype,omitempty"`
	ActDtype     string  `json:"act_dtype,omitempty"`
	KVDtype      string  `json:"kv_dtype,omitempty"`
	FLOPs        float64 `json:"flops"`
	Bytes        float64 `json:"bytes"`
	BytesRead    float64 `json:"bytes_read"`
	BytesWritten float64 `json:"bytes_written"`
	WeightBytes  float64 `json:"weight_bytes"`
	KVBytes      float64 `json:"kv_bytes"`
	Collective   string  `json:"collective,omitempty"`
	CommBytes    int64   `json:"comm_bytes"`
	Group        []int   `json:"group,omitempty"`
	// MoE is the routing shape of a routed-expert op.
	MoE *model.MoEShape `json:"moe,omitempty"`
}

type scheduleJSON struct {
	Model    string `json:"model"`
	Plan     string `json:"plan"`
	Workload string `json:"workload"`
	// Topology and Engine are the box and the engine profile the step was
	// laid for: the box's GPU decides a DSA model's attention and the
	// engine's capture sizes, the KV dtype's default; Deploy is what they
	// made of the workload (the CUDA graph it replays and its padding).
	Topology string           `json:"topology"`
	Engine   string           `json:"engine"`
	Deploy   model.Deployment `json:"deploy"`
	Ranks    int              `json:"ranks"`
	Ops      []scheduleOpJSON `json:"ops"`
}

var scheduleVerb = &Verb{
	UsageLine: "schedule [flags]",
	Short:     "print the per-rank op list of one decode or prefill step",
	Long: `Builds the Schedule of one step — the model's ops on every rank, as vLLM lays the
model out under the plan, before an engine's kernels and fusions — with GEMM shapes
and dtypes, FLOPs, bytes read and written (weights and KV cache separately) and
collective sizes and groups. Op IDs (L07.attn.o_proj, L07.moe.allreduce, embed.*,
head.*, mtp.*) are the ones predictions and traces are joined on. The executor
(run, --engine executor) runs exactly these ops; predict prices each as the
engine's kernels (companion kernels, fused all-reduce + norm, its MoE kernel), so
its kernel count per rank differs from the op count here.
A graphed decode step (--cuda-graphs, --graph-sizes, the engine's capture sizes;
vLLM's default) pads its tokens up to the next capture size: the padding runs
through every op but attention, RoPE and the KV-cache write, which serve the
batch's sequences only, as vLLM runs them. A flag that changes only the pricing
(NCCL settings, --custom-ar, --ar-norm-fusion, --overlap, --moe-kernel,
--attention-backend, acceptance rates, --gpu-mem-util, --cuda-graph-mem-gib, --perf-db) is refused: pass
it to predict. By default only rank 0 is printed; --rank -1 prints every rank.`,
	Example: "tpscope schedule --model kimi-k2.5-nvfp4 --tp 8 --batch 4 --context 8192\n" +
		"tpscope schedule --model glm-5 --tp 8 --output json --rank -1",
	New: func() Options { return &scheduleOptions{sc: newScenarioFlags(), output: formatTable} },
}

// graphNote says the CUDA graph a step replays: "graph of 8 tokens" (per
// DP group when there are several), or "eager" (graphTokens 0).
func graphNote(graphTokens int, p model.Plan) string {
	if graphTokens <= 0 {
		return "eager"
	}
	s := fmt.Sprintf("graph of %d tokens", graphTokens)
	if graphTokens == 1 {
		s = "graph of 1 token"
	}
	if p.Normalized().DP > 1 {
		s += " per DP group"
	}
	return s
}

// scheduleOptions are schedule's flags.
type scheduleOptions struct {
	sc     *scenarioFlags
	output string
	rank   int // -1: every rank
}

func (o *scheduleOptions) Bind(fs *pflag.FlagSet) {
	o.sc.Bind(fs)
	bindOutputFlag(fs, &o.output, "every column of every op", allFormats...)
	fs.IntVar(&o.rank, "rank", o.rank, "rank to print; -1 for all ranks")
}

func (o *scheduleOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(args) > 0 {
		return usageErrorf("schedule takes no arguments, got %q (use --model)", args)
	}
	if err := checkOutput(o.output, allFormats...); err != nil {
		return err
	}
	if err := o.checkPricingFlags(); err != nil {
		return err
	}
	scen, err := o.sc.scenario()
	if err != nil {
		return err
	}
	if err := o.checkRequestPool(scen); err != nil {
		return err
	}
	s, err := sim.BuildSchedule(scen)
	if err != nil {
		return planFlagError("", err)
	}
	if o.rank < -1 || o.rank >= len(s.Ranks) {
		return flagError("--rank", o.rank, "want -1 or 0..%d", len(s.Ranks)-1)
	}
	return printSchedule(s, scheduleLaidFor(scen), o.rank, o.output, std.Stdout)
}

// scheduleFlags are the scenario flags the Schedule depends on: the model,
// plan, workload and build options (model.BuildWith's inputs), the box
// (its GPU count bounds the plan; its GPU decides how a DSA model runs)
// and what sets the CUDA-graph capture the batch is padded to (the
// engine's capture sizes, its eager prefill and speculative capture).
// Every other scenario flag only prices the ops (sim.Predictor), and is
// refused rather than ignored; a flag added later is refused until it is
// listed here.
var scheduleFlags = map[string]bool{
	"model": true, "tp": true, "ep": true, "dp": true, "dcp": true, "phase": true, "batch": true, "context": true,
	"mtp": true, "kv-dtype": true, "dense-dsa": true, "moe-dispatch": true, "dispatch-dtype": true, "moe-routing": true,
	"spec": true, "spec-tokens": true, "spec-topk": true, "spec-steps": true, "draft-model": true, "draft-tp": true,
	"topo": true, "gpus": true, "cuda-graphs": true, "graph-sizes": true, "engine": true, "executor": true,
}

// checkRequestPool takes --max-num-seqs where it sets the graph a decode
// step replays: SGLang's running limit (its --max-running-requests) is
// the request pool its capture lists stop at (cuda_graphs.capture_pool),
// so a step of 99 under --max-num-seqs 100 replays the 100 graph where it
// is padded to 104 without it, as predict pads it; a batch above it is
// refused as predict refuses it. Under an engine whose capture the limit
// does not bound, or with graphs off, it only prices the ops.
func (o *scheduleOptions) checkRequestPool(sc sim.Scenario) error {
	if !o.sc.changed("max-num-seqs") {
		return nil
	}
	prof, err := engprof.Lookup(sc.Options.Engine)
	if err != nil {
		return err
	}
	if !prof.Graphs.CapturePool || !sc.Options.CUDAGraphs {
		why := fmt.Sprintf("%s's capture sizes do not stop at it", prof.Name())
		if !sc.Options.CUDAGraphs {
			why = "the step replays no graph under --cuda-graphs=false"
		}
		return flagError("--max-num-seqs", sc.Options.MaxNumSeqs, "it only prices the ops (%s), and schedule lists them before pricing: pass it to predict", why)
	}
	if err := sc.CheckSchedulerLimits(); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

// checkPricingFlags refuses a scenario flag that changes only the pricing
// of the ops schedule prints (scheduleFlags); --max-num-seqs is
// checkRequestPool's.
func (o *scheduleOptions) checkPricingFlags() error {
	var err error
	o.sc.visitChanged(func(f *pflag.Flag) {
		if err != nil || !o.sc.isScenarioFlag(f.Name) || scheduleFlags[f.Name] || f.Name == "max-num-seqs" {
			return
		}
		why := "it only prices the ops, and schedule lists them before pricing: pass it to predict"
		if strings.HasPrefix(f.Name, "perf-db") {
			why += " (for the routing its MoE tables were measured under, pass --moe-routing balanced)"
		}
		err = flagError("--"+f.Name, f.Value.String(), "%s", why)
	})
	return err
}

func opsOf(s *model.Schedule, rank int) []*model.Op {
	var ops []*model.Op
	for r := range s.Ranks {
		if rank >= 0 && r != rank {
			continue
		}
		for i := range s.Ranks[r] {
			ops = append(ops, &s.Ranks[r][i])
		}
	}
	return ops
}

// laidFor is the box and the engine a schedule was laid for, which the
// flags may have left to their defaults.
type laidFor struct {
	Topology, Engine string
}

// scheduleLaidFor names sc's box and engine profile (the default's
// resolved name: "vllm@0.24").
func scheduleLaidFor(sc sim.Scenario) laidFor {
	l := laidFor{Engine: sc.Options.Engine.String()}
	if p, err := engprof.Lookup(sc.Options.Engine); err == nil {
		l.Engine = p.Name()
	}
	if sc.Topo != nil {
		l.Topology = sc.Topo.Name
	}
	return l
}

// printSchedule prints s's ops (of one rank, or every rank for -1); the
// title says the box and engine it was laid for and the CUDA graph a
// graphed step replays (graphNote).
func printSchedule(s *model.Schedule, on laidFor, rank int, out string, w io.Writer) error {
	ops := opsOf(s, rank)
	doc := scheduleJSON{Model: s.Model, Plan: s.Plan.String(), Workload: s.Workload.String(), Topology: on.Topology, Engine: on.Engine,
		Deploy: s.Deploy, Ranks: len(s.Ranks), Ops: make([]scheduleOpJSON, 0, len(ops))}
	if out == formatJSON {
		for _, op := range ops {
			doc.Ops = append(doc.Ops, scheduleOpJSON{op.ID, op.Rank, string(op.Kind), op.Layer, op.Block, op.Name,
				op.M, op.N, op.K, op.Batch, string(op.WeightDtype), string(op.ActDtype), string(op.KVDtype),
				op.FLOPs, op.Bytes(), op.BytesRead, op.BytesWritten, op.WeightBytes, op.KVBytes,
				string(op.Collective), op.CommBytes, op.Group, op.MoE})
		}
	}
	return render(w, out, view{
		JSON: doc,
		CSV:  func(w io.Writer) error { return writeScheduleCSV(w, ops) },
		Text: func(w io.Writer, md bool) error { return writeScheduleTable(w, s, on, rank, ops, md) },
	})
}

// writeScheduleCSV writes every column of every op.
func writeScheduleCSV(w io.Writer, ops []*model.Op) error {
	g := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	rows := make([][]string, 0, len(ops))
	for _, op := range ops {
		grp := ""
		for i, r := range op.Group {
			if i > 0 {
				grp += " "
			}
			grp += strconv.Itoa(r)
		}
		rows = append(rows, []string{strconv.Itoa(op.Rank), op.ID, string(op.Kind), strconv.Itoa(op.Layer), op.Block, op.Name,
			strconv.FormatInt(op.M, 10), strconv.FormatInt(op.N, 10), strconv.FormatInt(op.K, 10), g(op.Batch),
			string(op.WeightDtype), string(op.ActDtype), string(op.KVDtype), g(op.FLOPs), g(op.Bytes()),
			g(op.BytesRead), g(op.BytesWritten), g(op.WeightBytes), g(op.KVBytes), string(op.Collective),
			strconv.FormatInt(op.CommBytes, 10), grp})
	}
	return writeCSV(w, []string{"rank", "id", "kind", "layer", "block", "name", "m", "n", "k", "batch", "weight_dtype",
		"act_dtype", "kv_dtype", "flops", "bytes", "bytes_read", "bytes_written", "weight_bytes", "kv_bytes",
		"collective", "comm_bytes", "group"}, rows)
}

// writeScheduleTable is the schedule for people: one row per op and a
// total.
func writeScheduleTable(w io.Writer, s *model.Schedule, on laidFor, rank int, ops []*model.Op, md bool) error {
	rows := make([][]string, 0, len(ops)+1)
	for _, op := range ops {
		shape, dt, comm := "", string(op.WeightDtype), ""
		if op.M > 0 || op.N > 0 {
			shape = fmt.Sprintf("%dx%d", op.M, op.N)
			if op.K > 0 {
				shape += fmt.Sprintf("x%d", op.K)
			}
			if op.Batch > 1 {
				shape += fmt.Sprintf(" x%.4g", op.Batch)
			}
		}
		if op.Kind == model.KindAttention {
			dt = "kv " + string(op.KVDtype)
		}
		if op.IsCollective() {
			comm = fmt.Sprintf("%s %d B over %d", op.Collective, op.CommBytes, len(op.Group))
		}
		rows = append(rows, []string{strconv.Itoa(op.Rank), op.ID, string(op.Kind), shape, dt,
			units.Count(op.FLOPs), units.Bytes(op.Bytes()), units.Bytes(op.WeightBytes), units.Bytes(op.KVBytes), comm})
	}
	t := s.Totals(rank)
	rows = append(rows, []string{"total", fmt.Sprintf("%d ops", t.Ops), "", "", "", units.Count(t.FLOPs), units.Bytes(t.Bytes),
		units.Bytes(t.WeightBytes), units.Bytes(t.KVBytes), fmt.Sprintf("%d collectives, %s", t.Collectives, units.Bytes(float64(t.CommBytes)))})
	wl := s.Workload.String()
	if s.Deploy.PadTokens > 0 {
		wl += " (" + graphNote(s.Deploy.GraphTokens, s.Plan) + ": the padding runs every op but attention)"
	}
	title := fmt.Sprintf("%s  %s  %s  on %s under %s  (%d ranks; the model's ops, before an engine's kernels and fusions)", s.Model, s.Plan.String(), wl, on.Topology, on.Engine, len(s.Ranks))
	return writeFirstTable(w, title, "", []string{"rank", "id", "kind", "shape", "dtype", "flops", "bytes", "weights", "kv", "comm"}, rows, md)
}
