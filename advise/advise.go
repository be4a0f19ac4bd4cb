package advise

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/perfdb"
	"github.com/tpscope/tpscope/sim"
)

// Advise: rank the catalog's optimizations for one Scenario.
//
// For the Scenario itself (the baseline: what the user runs), for Stock(c)
// (eager, default NCCL) and for every entry, advise predicts the step with
// per-op detail (Predictor.PredictScenario) and diffs each prediction
// against the baseline's: step time, tokens/s, device time by category
// (compute, communication, host launch, graph overhead), kernels,
// collectives and their bytes, bytes streamed from device memory (weights,
// KV cache) and KV capacity. An entry that the baseline already has is
// measured by removing it (the row then says what it is worth). Entries
// are ranked by speedup.
//
// Where an optimization starts to pay: advise sweeps batch x context with
// the fast Evaluator for every entry marked Sweep and reports, per cell,
// the change of aggregate tokens/s; PaysFrom is the cell with the fewest
// KV tokens (batch x context, ties by smaller batch) at which the gain
// reaches Input.ThresholdFrac while both configurations fit in memory,
// and FitsFrom the first cell only the optimization makes fit.

// Footprint is what one prediction moved and spent on rank 0 during one
// step: the basis of "what an optimization changes".
type Footprint struct {
	StepUs     float64 `json:"step_us"`
	ComputeUs  float64 `json:"compute_us"`  // device time of non-collective ops (incl. graph overhead)
	CommUs     float64 `json:"comm_us"`     // device time of collectives
	LaunchUs   float64 `json:"launch_us"`   // host launch time (eager: per kernel; graphs: one launch)
	OverheadUs float64 `json:"overhead_us"` // per-kernel graph replay overhead on the device
	IdleUs     float64 `json:"idle_us"`     // device waiting (host, peers)

	Kernels       int     `json:"kernels"`         // kernels (fused ops excluded)
	HostLaunches  int     `json:"host_launches"`   // launches the host issues (1 under a graph)
	Collectives   int     `json:"collectives"`     // collective calls
	CommBytes     int64   `json:"comm_bytes"`      // sum of collective message sizes
	AllToAllBytes int64   `json:"alltoall_bytes"`  // part of CommBytes in all-to-all
	MemBytes      float64 `json:"mem_bytes"`       // bytes read + written in device memory
	WeightBytes   float64 `json:"weight_bytes"`    // weights streamed
	KVBytes       float64 `json:"kv_bytes"`        // KV cache read by attention
	FLOPs         float64 `json:"flops"`           // floating-point work
	TokensPerStep float64 `json:"tokens_per_step"` // per sequence
	KVBytesPerTok float64 `json:"kv_bytes_per_token"`
	// KVCapacityToks is the tokens of context the whole deployment can
	// cache: one attention group's pool times its DP groups (each DP
	// group caches its own requests), so a DP plan and a TP plan of the
	// same GPUs compare.
	KVCapacityToks int64   `json:"kv_capacity_tokens"`
	Fits           bool    `json:"fits"`
	ShortfallGB    float64 `json:"shortfall_gb,omitempty"`
	// NoPool says why the engine sizes no KV pool at all (sim's
	// KVBudget.NoPoolWhy: SGLang's default fraction at 0 or less, with
	// which it does not start); ShortfallGB is then no amount to add.
	NoPool string `json:"no_pool,omitempty"`
}

// FootprintOf summarizes a prediction (rank 0's ops).
func FootprintOf(pr *sim.Prediction) Footprint {
	f := Footprint{StepUs: pr.StepUs, CommUs: pr.CommUs, IdleUs: pr.IdleUs, LaunchUs: pr.HostUs,
		Kernels: pr.Kernels, TokensPerStep: pr.TokensPerStep}
	for i := range pr.Ops {
		op := &pr.Ops[i]
		if op.Rank != 0 {
			continue
		}
		f.OverheadUs += op.OverheadUs
		f.MemBytes += op.Bytes
		f.FLOPs += op.FLOPs
		if op.Kind == model.KindCollective {
			f.Collectives++
			f.CommBytes += op.CommBytes
			continue
		}
		f.ComputeUs += op.Us
	}
	f.HostLaunches = f.Kernels
	if pr.Graphed {
		f.HostLaunches = 1
	}
	if m := pr.Memory; m != nil {
		f.KVBytesPerTok, f.KVCapacityToks, f.Fits, f.ShortfallGB = m.KVBytesPerToken, m.KVCapacityTokens*int64(pr.Plan.Normalized().DP), m.Fits, m.ShortfallGB
		f.NoPool = m.Budget.NoPoolWhy()
	}
	return f
}

// footprintDetail adds what OpResult does not carry (weight and KV bytes,
// all-to-all bytes) from the schedule's ops.
func footprintDetail(f *Footprint, s *model.Schedule) {
	for i := range s.Ranks[0] {
		op := &s.Ranks[0][i]
		f.WeightBytes += op.WeightBytes
		f.KVBytes += op.KVBytes
		if op.Collective == model.AllToAll {
			f.AllToAllBytes += op.CommBytes
		}
	}
}

// Delta is b - a for every field that has a meaning as a difference.
type Delta struct {
	StepUs        float64 `json:"step_us"`
	ComputeUs     float64 `json:"compute_us"`
	CommUs        float64 `json:"comm_us"`
	LaunchUs      float64 `json:"launch_us"`
	OverheadUs    float64 `json:"overhead_us"`
	Kernels       int     `json:"kernels"`
	HostLaunches  int     `json:"host_launches"`
	Collectives   int     `json:"collectives"`
	CommBytes     int64   `json:"comm_bytes"`
	AllToAllBytes int64   `json:"alltoall_bytes"`
	MemBytes      float64 `json:"mem_bytes"`
	WeightBytes   float64 `json:"weight_bytes"`
	KVBytes       float64 `json:"kv_bytes"`
	// KVCapacityFrac is b's KV capacity over a's (tokens; 2 = twice).
	KVCapacityFrac float64 `json:"kv_capacity_frac"`
}

// Diff returns b - a.
func Diff(a, b Footprint) Delta {
	d := Delta{StepUs: b.StepUs - a.StepUs, ComputeUs: b.ComputeUs - a.ComputeUs, CommUs: b.CommUs - a.CommUs,
		LaunchUs: b.LaunchUs - a.LaunchUs, OverheadUs: b.OverheadUs - a.OverheadUs, Kernels: b.Kernels - a.Kernels,
		HostLaunches: b.HostLaunches - a.HostLaunches, Collectives: b.Collectives - a.Collectives,
		CommBytes: b.CommBytes - a.CommBytes, AllToAllBytes: b.AllToAllBytes - a.AllToAllBytes,
		MemBytes: b.MemBytes - a.MemBytes, WeightBytes: b.WeightBytes - a.WeightBytes, KVBytes: b.KVBytes - a.KVBytes}
	if a.KVCapacityToks > 0 {
		d.KVCapacityFrac = float64(b.KVCapacityToks) / float64(a.KVCapacityToks)
	}
	return d
}

// Input is what Advise needs. Zero fields take the documented
// defaults.
type Input struct {
	// Base is the configuration the user runs (the baseline).
	Base sim.Scenario
	// Entries to rank; nil = Catalog(CatalogOptions{}).
	Entries []Entry
	// Batches and Contexts span the sweep grid; nil = DefaultBatches
	// and DefaultContexts. NoSweep skips the sweep.
	Batches  []int
	Contexts []int
	NoSweep  bool
	// ThresholdFrac is the relative change of tokens/s at which an
	// optimization "pays" (default 0.05).
	ThresholdFrac float64
	// Progress, when set, is called after each sweep cell with the cells
	// done and the total.
	Progress func(done, total int)
	// Transfer lists other architectures on which to predict the
	// baseline's options against Stock (same box, plan, workload and flags,
	// each model as predict --model prices it: transferScenario): do
	// the earlier optimizations carry over from one model to the next?
	Transfer []*model.Arch
	// ImplyDenseDSA: the user did not choose --dense-dsa, so a Transfer
	// model with a DSA indexer runs as the box's engines run it
	// (ImpliedDenseDSA).
	ImplyDenseDSA bool
	// Reprice re-derives, on the baseline moved to a Transfer model,
	// the cost source and MoE routing the flags left to the model
	// (--perf-db's tables read for its type, the routing they default
	// to where their rows price its experts), as 'predict --model' does;
	// its error is the row's. Nil: the baseline's are kept.
	Reprice func(sim.Scenario) (sim.Scenario, error)
	// BaseArgs are the flags that set the baseline, as the user gave
	// them ("--kv-dtype=bf16", "--ep"): every row's 'tpscope predict'
	// line repeats them (commandFor), so that the line run as printed
	// prices the row's scenario, not the default one with the entry's
	// flags on it.
	BaseArgs []string
}

// TransferRow is the baseline's options against stock on one model. The
// communication time splits into what the box and its settings charge per
// collective (CommUsPerCall, the hardware's part) and how many
// collectives the model issues per step (Collectives, the model's part).
type TransferRow struct {
	Model              string  `json:"model"`
	Error              string  `json:"error,omitempty"`
	StepUs             float64 `json:"step_us"`
	StockStepUs        float64 `json:"stock_step_us"`
	TokensPerS         float64 `json:"tokens_per_s"`
	StockTokensPS      float64 `json:"stock_tokens_per_s"`
	Gain               Gain    `json:"gain"`
	CommShareFrac      float64 `json:"comm_share_frac"`
	StockCommShareFrac float64 `json:"stock_comm_share_frac"`
	Collectives        int     `json:"collectives"`
	CommUsPerCall      float64 `json:"comm_us_per_call"`
	StockPerCall       float64 `json:"stock_comm_us_per_call"`
	ComputeUs          float64 `json:"compute_us"`
	Fits               bool    `json:"fits"`
	ShortfallGB        float64 `json:"shortfall_gb,omitempty"`
}

// Default sweep grid of advise: batch sizes of vLLM's capture list and
// beyond, contexts from 1K to 128K tokens.
var (
	DefaultBatches  = []int{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
	DefaultContexts = []int{1024, 4096, 16384, 32768, 65536, 131072}
)

// Variant is one predicted configuration of the advice.
type Variant struct {
	Name          string      `json:"name"`
	StepUs        float64     `json:"step_us"`
	TokensPerS    float64     `json:"tokens_per_s"`
	PerRequest    float64     `json:"tokens_per_s_per_request"`
	CommShareFrac float64     `json:"comm_share_frac"`
	Footprint     Footprint   `json:"footprint"`
	Options       sim.Options `json:"options"`
	Plan          string      `json:"plan"`
	Workload      string      `json:"workload"`
	Topology      string      `json:"topology"`
	// Caveats: known gaps of this prediction on the box (Predictor.Caveats).
	Caveats []string `json:"caveats,omitempty"`
	// Engine: the engine profile and kernels that priced it
	// (Predictor.EngineSummary).
	Engine string `json:"engine,omitempty"`
}

// Row is one catalog entry's verdict.
type Row struct {
	Entry         string        `json:"entry"`
	Title         string        `json:"title"`
	Kind          string        `json:"kind"`
	Applicability Applicability `json:"applicability"`
	How           How           `json:"how"`
	// InBaseline: the baseline already has it; With is the baseline and
	// Without the baseline with the entry reverted.
	InBaseline bool `json:"in_baseline"`
	// Error is set when the entry cannot be applied to the Scenario (then
	// no numbers).
	Error string `json:"error,omitempty"`
	// With and Without are the two configurations compared.
	With    *Variant `json:"with,omitempty"`
	Without *Variant `json:"without,omitempty"`
	// Gain is With's over Without's (MTP's extra tokens counted in the
	// tokens/s gain).
	Gain Gain `json:"gain"`
	// Change is With - Without.
	Change Delta `json:"change"`
	// Sweep over batch x context (nil when not swept).
	Sweep *EntrySweep `json:"sweep,omitempty"`
	// Spec: a speculative entry's break-even acceptance and where it
	// pays (advise_spec.go).
	Spec *SpecAdvice `json:"spec,omitempty"`
}

// FitNote is what a row's step says when its variant does not fit in GPU
// memory, " (no fit: -1.8 GB)"; "" when it fits or was not priced. The
// CLI's table, its chart and the HTML report write it alike.
func (r *Row) FitNote() string {
	if r.Error != "" || r.With == nil || r.With.Footprint.Fits {
		return ""
	}
	return fmt.Sprintf(" (no fit: -%.1f GB)", r.With.Footprint.ShortfallGB)
}

// Qualifiers are the words a row's gain carries wherever it is drawn:
// " (upper bound)" (its evidence says it may not pay here), else
// " (conditional)" (it runs only given what its row needs), then FitNote.
func (r *Row) Qualifiers() string {
	q := ""
	switch a := r.Applicability; {
	case a.UpperBound:
		q = " (upper bound)"
	case a.Status == Conditional:
		q = " (conditional)"
	}
	return q + r.FitNote()
}

// SweepCell is one (batch, context) of an entry's sweep.
type SweepCell struct {
	Batch   int `json:"batch"`
	Context int `json:"context"`
	// Tokens/s aggregate with and without the optimization (0 when the
	// configuration could not be evaluated).
	With    float64 `json:"with_tokens_per_s"`
	Without float64 `json:"without_tokens_per_s"`
	// GainFrac is With/Without - 1 when both fit.
	GainFrac    float64 `json:"gain_frac"`
	WithFits    bool    `json:"with_fits"`
	WithoutFits bool    `json:"without_fits"`
}

// EntrySweep is where an optimization pays.
type EntrySweep struct {
	Cells []SweepCell `json:"cells"`
	// PaysFrom is the first cell (fewest KV tokens, then smallest batch)
	// where both fit and GainFrac >= ThresholdFrac; nil if none.
	PaysFrom *SweepCell `json:"pays_from,omitempty"`
	// HurtsFrom is the first cell where both fit and GainFrac <= -ThresholdFrac.
	HurtsFrom *SweepCell `json:"hurts_from,omitempty"`
	// FitsFrom is the first cell that fits only with the optimization.
	FitsFrom *SweepCell `json:"fits_from,omitempty"`
	// MaxGain is the largest GainFrac over cells where both fit.
	MaxGain *SweepCell `json:"max_gain,omitempty"`
	// MinContextByBatch: for each batch, the smallest swept context at
	// which GainFrac >= ThresholdFrac (both fitting); 0 when none.
	MinContextByBatch map[int]int `json:"min_context_by_batch,omitempty"`
}

// Advice is the result of Advise.
type Advice struct {
	Model    string `json:"model"`
	Topology string `json:"topology"`
	Plan     string `json:"plan"`
	Workload string `json:"workload"`
	// KVDefault says the engine chose the workload's KV dtype (the
	// baseline's Scenario.KVDefault).
	KVDefault     *sim.KVDefault `json:"kv_default,omitempty"`
	ThresholdFrac float64        `json:"threshold_frac"`
	Baseline      *Variant       `json:"baseline"`
	Stock         *Variant       `json:"stock"`
	// StockGain is the baseline's over stock's: what the earlier
	// optimizations are worth for this model on this box.
	StockGain   Gain  `json:"stock_gain"`
	StockChange Delta `json:"stock_change"` // baseline - stock
	// Rows, best speedup first (rows with errors last).
	Rows []Row `json:"rows"`
	// WorthBuilding answers "which optimization is worth building next":
	// the software entries (no box moves) not in the baseline, predicted,
	// not refused on this box, whose tokens/s gain reaches ThresholdFrac,
	// best first. An entry whose Applicability is an UpperBound is not
	// among them but in UpperBounds: its own evidence says it may not pay
	// here, so its gain is only the most it could give. One whose step
	// does not fit in GPU memory where the baseline's does is in NoFit:
	// at this load it does not run (predict refuses it).
	WorthBuilding []Pick `json:"worth_building"`
	UpperBounds   []Pick `json:"worth_building_upper_bounds,omitempty"`
	NoFit         []Pick `json:"worth_building_no_fit,omitempty"`
	// Transfer: the baseline model first, then Input.Transfer.
	Transfer []TransferRow `json:"transfer,omitempty"`
	Batches  []int         `json:"batches,omitempty"`
	Contexts []int         `json:"contexts,omitempty"`
}

// Pick is one entry of Advice.WorthBuilding or Advice.UpperBounds: its
// predicted tokens/s gain with the applicability that qualifies it.
type Pick struct {
	Entry         string        `json:"entry"`
	TokensPerSPct float64       `json:"tokens_per_s_gain_pct"`
	Applicability Applicability `json:"applicability"`
	// ShortfallGB: a NoFit pick's step is short of GPU memory by this
	// much per GPU.
	ShortfallGB float64 `json:"shortfall_gb,omitempty"`
}

// worthBuilding splits the ranked rows' candidates for "worth building
// next" into those the model stands behind, upper bounds, and those
// whose step does not fit in GPU memory where the baseline's does (rows
// are already best first).
func worthBuilding(rows []Row, thresholdFrac float64) (sure, upper, noFit []Pick) {
	sure = []Pick{} // JSON: an empty answer reads [], not null
	for i := range rows {
		r := &rows[i]
		if r.InBaseline || r.Error != "" || r.Applicability.Status == NotApplicable || r.Kind == "box" || r.Gain.TokensPerSPct < 100*thresholdFrac {
			continue
		}
		p := Pick{Entry: r.Entry, TokensPerSPct: r.Gain.TokensPerSPct, Applicability: r.Applicability}
		if r.With != nil && r.Without != nil && !r.With.Footprint.Fits && r.Without.Footprint.Fits {
			p.ShortfallGB = r.With.Footprint.ShortfallGB
			noFit = append(noFit, p)
			continue
		}
		if r.Applicability.UpperBound {
			upper = append(upper, p)
		} else {
			sure = append(sure, p)
		}
	}
	return sure, upper, noFit
}

// predictVariant predicts c with per-op detail.
func predictVariant(ev *sim.Evaluator, name string, c sim.Scenario) (*Variant, error) {
	p, err := ev.Predictor(&c)
	if err != nil {
		return nil, err
	}
	pr, s, err := p.PredictScenarioSchedule(c)
	if err != nil {
		return nil, err
	}
	f := FootprintOf(pr)
	footprintDetail(&f, s)
	// The KV capacity stated is priced without the engine's CUDA-graph
	// estimate where none was given (sim.KVBudget.GraphUnpriced).
	caveats := pr.Caveats
	if m := pr.Memory; m != nil && m.Budget.GraphCaveat() != "" {
		caveats = append([]string{m.Budget.GraphCaveat()}, caveats...)
	}
	return &Variant{Name: name, StepUs: pr.StepUs, TokensPerS: pr.TokensPerS, PerRequest: pr.TokensPerSPerRequest,
		CommShareFrac: pr.CommShareFrac, Footprint: f, Options: c.Options, Plan: c.Plan.Normalized().String(),
		Workload: c.Workload.Normalized().String(), Topology: c.Topo.Name, Caveats: caveats, Engine: pr.Engine}, nil
}

// transferScenario is the baseline b on model a, as 'predict --model a'
// with the baseline's flags prices it: what the user left to the engine
// it decides again for a (the KV dtype unless kvNamed, whether a DSA
// model runs dense under implyDenseDSA), and reprice (Input.Reprice)
// re-derives the cost source and MoE routing for a. A scenario predict
// would refuse (a plan, workload or speculative method a cannot run, an
// engine without a kernel for its experts on the box) is the error of
// its row, not a priced one.
func transferScenario(b sim.Scenario, a *model.Arch, kvNamed, implyDenseDSA bool, reprice func(sim.Scenario) (sim.Scenario, error)) (sim.Scenario, error) {
	c := b
	c.Arch = a
	if !kvNamed {
		c.Workload.KVDtype, c.KVDefault = "", nil
		if d := sim.ImpliedKVDefault(a, c.Topo, c.Options.Engine); d != nil {
			c.Workload.KVDtype, c.KVDefault = d.Dtype, d
		} else {
			c.Workload.KVDtype = c.Workload.KVDtypeFor(a)
		}
	}
	if implyDenseDSA {
		c.Build.DenseDSA = sim.ImpliedDenseDSA(a, c.Topo, c.Options.Engine)
	}
	if err := model.Validate(a, c.Plan, c.Workload, c.Build); err != nil {
		return c, err
	}
	if err := c.CheckEngine(); err != nil {
		return c, err
	}
	if reprice != nil {
		return reprice(c)
	}
	return c, nil
}

// Advise predicts the baseline, stock and every entry, and sweeps.
func Advise(in Input) (*Advice, error) {
	b := in.Base
	if b.Arch == nil || b.Topo == nil {
		return nil, errors.New("advise: the baseline needs an architecture and a topology")
	}
	if b.Workload.KVDtype == "" {
		b.Workload.KVDtype = b.Workload.KVDtypeFor(b.Arch)
	}
	if in.Entries == nil {
		in.Entries = Catalog(CatalogOptions{})
	}
	if in.ThresholdFrac <= 0 {
		in.ThresholdFrac = 0.05
	}
	if in.Batches == nil {
		in.Batches = DefaultBatches
	}
	if in.Contexts == nil {
		in.Contexts = DefaultContexts
	}
	var ev sim.Evaluator
	base, err := predictVariant(&ev, "baseline", b)
	if err != nil {
		return nil, fmt.Errorf("advise: baseline: %w", err)
	}
	stock, err := predictVariant(&ev, "stock", Stock(b))
	if err != nil {
		return nil, fmt.Errorf("advise: stock: %w", err)
	}
	adv := &Advice{Model: b.Arch.Name, Topology: b.Topo.Name, Plan: b.Plan.Normalized().String(),
		Workload: b.Workload.Normalized().String(), KVDefault: b.KVDefault, ThresholdFrac: in.ThresholdFrac, Baseline: base, Stock: stock,
		StockGain: gainOf(stock, base), StockChange: Diff(stock.Footprint, base.Footprint)}

	adv.Transfer = append(adv.Transfer, transferRow(b.Arch.Name, base, stock))
	// The user named the KV dtype (the baseline's is not the engine's
	// or the checkpoint's choice): every model keeps it.
	kvNamed := in.Base.Workload.KVDtype != "" && in.Base.KVDefault == nil
	for _, a := range in.Transfer {
		c, err := transferScenario(b, a, kvNamed, in.ImplyDenseDSA, in.Reprice)
		if err != nil {
			adv.Transfer = append(adv.Transfer, TransferRow{Model: a.Name, Error: err.Error()})
			continue
		}
		vb, err := predictVariant(&ev, "baseline", c)
		var vs *Variant
		if err == nil {
			vs, err = predictVariant(&ev, "stock", Stock(c))
		}
		if err != nil {
			adv.Transfer = append(adv.Transfer, TransferRow{Model: a.Name, Error: err.Error()})
			continue
		}
		adv.Transfer = append(adv.Transfer, transferRow(a.Name, vb, vs))
	}

	// One side of every pair is the baseline itself: baseWith says which.
	type pair struct {
		with, without sim.Scenario
		baseWith      bool
	}
	pairs := make([]*pair, len(in.Entries))
	for i, e := range in.Entries {
		row := Row{Entry: e.Name, Title: e.Title, Kind: e.Kind, Applicability: e.Check(b)}
		var pc pair
		if e.Enabled(b) {
			row.InBaseline = true
			pc.with, pc.baseWith = b, true
			pc.without, err = e.Revert(b)
		} else {
			pc.without = b
			pc.with, err = e.Apply(b)
		}
		row.How = commandFor(e.HowTo(b), b, pc.with, in.BaseArgs)
		if err == nil {
			err = runnable(&row, pc.with, pc.without)
		}
		if row.Applicability.Status == NotApplicable && !row.InBaseline {
			// A row that cannot run here has no command to run it, nor
			// an error of its own beside the reason: the reason says
			// why (the engine would refuse the line).
			row.How, err = How{}, errCannotRun
		}
		if err == nil {
			row.With, err = predictVariant(&ev, e.Name, pc.with)
		}
		if err == nil {
			row.Without = base
			if row.InBaseline {
				row.With = base
				row.Without, err = predictVariant(&ev, "without "+e.Name, pc.without)
			}
		}
		if err != nil {
			row.Error = err.Error()
			row.With, row.Without = nil, nil
		} else {
			if e.Kind == "box" && row.With.Engine != "" {
				// The box's own kernels price the row (another GPU
				// family may take another backend): say which.
				row.Applicability.Reason += "; engine there: " + row.With.Engine
			}
			row.Gain = gainOf(row.Without, row.With)
			row.Change = Diff(row.Without.Footprint, row.With.Footprint)
			if e.Sweep && !in.NoSweep {
				pairs[i] = &pc
			}
		}
		adv.Rows = append(adv.Rows, row)
	}

	if !in.NoSweep {
		adv.Batches, adv.Contexts = in.Batches, in.Contexts
		total := 0
		for _, pc := range pairs {
			if pc != nil {
				total += len(in.Batches) * len(in.Contexts)
			}
		}
		// The baseline's side of every pair, evaluated once per cell
		// (batch-major, as the cells below).
		type point struct {
			tps  float64
			fits bool
		}
		var baseGrid []point
		eval := func(c sim.Scenario, bt, cx int) (p point) {
			c.Workload.Batch, c.Workload.Context = bt, cx
			if sum, err := ev.Evaluate(c); err == nil {
				p = point{sum.TokensPerS, sum.Memory != nil && sum.Memory.Fits}
			}
			return p
		}
		if total > 0 {
			for _, bt := range in.Batches {
				for _, cx := range in.Contexts {
					baseGrid = append(baseGrid, eval(b, bt, cx))
				}
			}
		}
		done := 0
		for i, pc := range pairs {
			if pc == nil {
				continue
			}
			sw := &EntrySweep{MinContextByBatch: map[int]int{}}
			k := 0
			for _, bt := range in.Batches {
				for _, cx := range in.Contexts {
					cell := SweepCell{Batch: bt, Context: cx}
					with, without := baseGrid[k], baseGrid[k]
					k++
					if pc.baseWith {
						without = eval(pc.without, bt, cx)
					} else {
						with = eval(pc.with, bt, cx)
					}
					cell.With, cell.WithFits = with.tps, with.fits
					cell.Without, cell.WithoutFits = without.tps, without.fits
					if cell.WithFits && cell.WithoutFits && cell.Without > 0 {
						cell.GainFrac = cell.With/cell.Without - 1
					}
					sw.Cells = append(sw.Cells, cell)
					done++
					if in.Progress != nil {
						in.Progress(done, total)
					}
				}
			}
			summarizeSweep(sw, in.ThresholdFrac)
			adv.Rows[i].Sweep = sw
		}
	}
	adviseSpec(adv, in, &ev, b)
	sort.SliceStable(adv.Rows, func(i, j int) bool {
		a, b := &adv.Rows[i], &adv.Rows[j]
		if (a.Error == "") != (b.Error == "") {
			return a.Error == ""
		}
		return a.Gain.TokensPerSPct > b.Gain.TokensPerSPct
	})
	adv.WorthBuilding, adv.UpperBounds, adv.NoFit = worthBuilding(adv.Rows, in.ThresholdFrac)
	return adv, nil
}

// errCannotRun is the error of a row whose entry cannot run here: it is
// not priced (no numbers, no sweep, no break-even), its reason says why.
var errCannotRun = errors.New("it cannot run here (its reason says why)")

// runnable refuses to price a row that cannot run: an entry its own check
// says does not apply here, or whose configuration (the side of the pair
// that is not the baseline) the engine cannot run (sim's CheckEngine, as
// predict refuses it), which makes the entry not apply, the engine's
// reason added to its own. A row the baseline has is priced whatever its
// check says: the baseline runs, and the row is what removing it gives.
func runnable(row *Row, with, without sim.Scenario) error {
	changed := with
	if row.InBaseline {
		changed = without
	}
	if err := changed.CheckEngine(); err != nil {
		a := &row.Applicability
		if a.Status != NotApplicable {
			reason := err.Error()
			if a.Reason != "" {
				reason = a.Reason + "; " + reason
			}
			*a = Applicability{Status: NotApplicable, Reason: reason}
		}
		return errCannotRun
	}
	if row.Applicability.Status == NotApplicable && !row.InBaseline {
		return errCannotRun
	}
	// A collective's setting added where the step has no all-reduce it
	// would change (every one above the custom kernel's buffer or the
	// fusion's limits) is a line predict refuses: at this load it runs
	// nothing of the entry.
	if !row.InBaseline {
		err := with.CheckCustomAR()
		if err == nil {
			err = with.CheckARNormFusion()
		}
		if err != nil {
			reason := "not at this load: " + err.Error()
			if a := row.Applicability.Reason; a != "" {
				reason = a + "; " + reason
			}
			row.Applicability = Applicability{Status: NotApplicable, Reason: reason}
			return errCannotRun
		}
	}
	return nil
}

func transferRow(name string, b, s *Variant) TransferRow {
	r := TransferRow{Model: name, StepUs: b.StepUs, StockStepUs: s.StepUs, TokensPerS: b.TokensPerS, StockTokensPS: s.TokensPerS,
		Gain: gainOf(s, b), CommShareFrac: b.CommShareFrac, StockCommShareFrac: s.CommShareFrac,
		Collectives: b.Footprint.Collectives, ComputeUs: b.Footprint.ComputeUs, Fits: b.Footprint.Fits, ShortfallGB: b.Footprint.ShortfallGB}
	if n := b.Footprint.Collectives; n > 0 {
		r.CommUsPerCall = b.Footprint.CommUs / float64(n)
	}
	if n := s.Footprint.Collectives; n > 0 {
		r.StockPerCall = s.Footprint.CommUs / float64(n)
	}
	return r
}

// summarizeSweep finds where the optimization pays.
func summarizeSweep(sw *EntrySweep, th float64) {
	idx := make([]int, len(sw.Cells))
	for i := range idx {
		idx[i] = i
	}
	// Order by KV tokens held (batch x context), then batch.
	sort.SliceStable(idx, func(i, j int) bool {
		a, b := &sw.Cells[idx[i]], &sw.Cells[idx[j]]
		ka, kb := int64(a.Batch)*int64(a.Context), int64(b.Batch)*int64(b.Context)
		if ka != kb {
			return ka < kb
		}
		return a.Batch < b.Batch
	})
	for _, k := range idx {
		c := &sw.Cells[k]
		both := c.WithFits && c.WithoutFits
		if both && c.GainFrac >= th && sw.PaysFrom == nil {
			sw.PaysFrom = c
		}
		if both && c.GainFrac <= -th && sw.HurtsFrom == nil {
			sw.HurtsFrom = c
		}
		if c.WithFits && !c.WithoutFits && sw.FitsFrom == nil {
			sw.FitsFrom = c
		}
		if both && (sw.MaxGain == nil || c.GainFrac > sw.MaxGain.GainFrac) {
			sw.MaxGain = c
		}
	}
	for k := range sw.Cells {
		c := &sw.Cells[k]
		if c.WithFits && c.WithoutFits && c.GainFrac >= th {
			if m, ok := sw.MinContextByBatch[c.Batch]; !ok || m == 0 || c.Context < m {
				sw.MinContextByBatch[c.Batch] = c.Context
			}
		} else if _, ok := sw.MinContextByBatch[c.Batch]; !ok {
			sw.MinContextByBatch[c.Batch] = 0
		}
	}
}

// gainOf is the gain of variant v over base.
func gainOf(base, v *Variant) Gain {
	if base == nil || v == nil {
		return Gain{}
	}
	return GainOf(base.StepUs, v.StepUs, base.TokensPerS, v.TokensPerS)
}

// String is the cell for people: "batch 8 x context 4096".
func (c *SweepCell) String() string {
	return fmt.Sprintf("batch %d x context %d", c.Batch, c.Context)
}

// String summarizes the sweep in one line: where the entry starts to pay
// and to cost, its best cell, where only it fits, and the smallest paying
// context per batch; "" for a nil sweep.
func (sw *EntrySweep) String() string {
	if sw == nil {
		return ""
	}
	var parts []string
	if sw.PaysFrom != nil {
		parts = append(parts, fmt.Sprintf("pays from %s (%+.1f %%)", sw.PaysFrom, 100*sw.PaysFrom.GainFrac))
	} else {
		parts = append(parts, "never gains the threshold where both fit")
	}
	if sw.HurtsFrom != nil {
		parts = append(parts, fmt.Sprintf("costs from %s (%+.1f %%)", sw.HurtsFrom, 100*sw.HurtsFrom.GainFrac))
	}
	if sw.MaxGain != nil {
		parts = append(parts, fmt.Sprintf("best %+.1f %% at %s", 100*sw.MaxGain.GainFrac, sw.MaxGain))
	}
	if sw.FitsFrom != nil {
		parts = append(parts, "only fits with it from "+sw.FitsFrom.String())
	}
	var m []string
	for _, b := range slices.Sorted(maps.Keys(sw.MinContextByBatch)) {
		if c := sw.MinContextByBatch[b]; c > 0 {
			m = append(m, fmt.Sprintf("b%d:%d", b, c))
		}
	}
	if len(m) > 0 {
		parts = append(parts, "smallest paying context per batch "+strings.Join(m, " "))
	}
	return strings.Join(parts, "; ")
}

// commandFor makes a "tpscope predict" line of h price the row's
// scenario (with) as run back as printed: the baseline's own flags
// (baseArgs, as the user gave them) before the entry's, and the baseline's
// engine named (without --engine, predict prices the default engine).
// A baseline flag the entry's line sets again, or whose meaning the
// entry replaces, is left out: --gpus beside another --topo (the row
// prices that whole box), the speculative flags beside another --spec,
// an acceptance the row no longer prices (another method, or none), the
// DP dispatch flags on a plan without DP attention, the perf DB where
// the row's box is priced from the priors (advise prices a box without
// tables of its own so; predict refuses the DB there), and
// --perf-db-transfer where the row's box has tables of its own.
func commandFor(h How, b, with sim.Scenario, baseArgs []string) How {
	rest, ok := strings.CutPrefix(h.Exec, "predict")
	if !ok || (rest != "" && rest[0] != ' ') {
		return h
	}
	set := map[string]bool{"engine": true}
	for _, f := range strings.Fields(rest) {
		if strings.HasPrefix(f, "(") {
			break // the line's gloss
		}
		if name, ok := strings.CutPrefix(f, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			set[name] = true
		}
	}
	if set["topo"] {
		set["gpus"] = true
	}
	if set["spec"] {
		for _, n := range []string{"mtp", "spec-tokens", "spec-topk", "spec-steps", "draft-model", "draft-tp"} {
			set[n] = true
		}
	}
	speculates := with.Workload.SpecTokens > 0
	if !speculates || with.Options.SpecAccept.IsZero() {
		set["spec-accept"], set["spec-accept-file"] = true, true
	}
	if !speculates || with.Build.Spec.MethodFor(with.Workload) != model.SpecMTP {
		set["mtp-accept"] = true
	}
	if with.Plan.DP <= 1 {
		set["moe-dispatch"], set["dispatch-dtype"] = true, true
	}
	if with.Costs == nil {
		set["perf-db"], set["perf-db-system"], set["perf-db-transfer"] = true, true, true
	} else if _, moved := with.Costs.(*perfdb.Transfer); set["topo"] && !moved {
		// The row's box has tables of its own, which price it (the
		// transfer was the baseline GPU's): predict refuses
		// --perf-db-transfer there.
		set["perf-db-transfer"] = true
	}
	args := []string{"predict"}
	if eng := b.Options.Engine; !eng.IsZero() {
		args = append(args, "--engine "+eng.String())
	}
	for _, a := range baseArgs {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !set[name] {
			args = append(args, a)
		}
	}
	h.Exec = strings.Join(args, " ") + rest
	return h
}
