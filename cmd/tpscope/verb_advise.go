package main

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/internal/chart"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var adviseVerb = &Verb{
	UsageLine: "advise [flags]",
	Short:     "rank optimizations (NCCL, graphs, FP8 KV, EP, DP attention, one-shot AR, fusion, MTP, another box) by predicted gain",
	Long: `Predicts the baseline (the configuration given by the flags: what runs
today), the stock configuration (eager, default NCCL) and, for every entry
of the optimization catalog, the same configuration with the entry turned
on (or, when the baseline already has it, turned off, to show what it is
worth). Each row gives the predicted step time, the speedup in tokens/s,
what changed (compute, communication and launch time, kernels, collectives,
bytes moved, KV capacity: computed by diffing the two predictions), whether
the entry applies on this box and why, and how to run it.

A sweep over batch x context says where each optimization starts to pay:
the first (batch, context), by KV tokens held, at which tokens/s change by
--threshold or more, and the first one only the optimization makes fit.

With no flags it predicts a stock deployment of Kimi-K2.5-NVFP4 on
rtxpro6000-2s (TP 8, batch 1, context 4096, the checkpoint's FP8 KV, vLLM's
CUDA graphs, NCCL's own choices); the seed user's settings are
--kv-dtype bf16 --nccl-proto LL --p2p-level SYS (what 'make run' passes).
The MTP entry's acceptance rate is --mtp-accept (default 0.85: low end of
the DeepSeek-V3 report's 85-90 %).`,
	Example: `tpscope advise --model kimi-k2.5-nvfp4 --topo rtxpro6000-2s --tp 8 --batch 1 --context 4096 --kv-dtype bf16 --nccl-proto LL --p2p-level SYS --plot advise.png`,
	New:     func() Options { return newAdviseOptions() },
}

// sweepContexts is the sweep's contexts: --sweep-context, every one at
// most the model's max_model_len (a longer one is a step no engine serves:
// its cells would read as not fitting), or the defaults up to it, the
// rest left out with a line on stderr. A sweep flag beside --no-sweep
// would change nothing and is refused.
func (o *adviseOptions) sweepContexts(a *model.Arch, std IO) ([]int, error) {
	if o.noSweep {
		for _, name := range []string{"sweep-batch", "sweep-context"} {
			if o.changed(name) {
				return nil, flagError("--"+name, o.fs.Lookup(name).Value.String(), "want no sweep grid beside --no-sweep, which skips the sweep")
			}
		}
		return o.contexts.v, nil
	}
	lim := a.MaxModelLenTokens
	if lim <= 0 {
		return o.contexts.v, nil
	}
	var keep, over []string
	var kept []int
	for _, c := range o.contexts.v {
		if c > lim {
			over = append(over, strconv.Itoa(c))
			continue
		}
		kept = append(kept, c)
		keep = append(keep, strconv.Itoa(c))
	}
	switch {
	case len(over) == 0:
		return kept, nil
	case o.changed("sweep-context"):
		return nil, flagError("--sweep-context", o.fs.Lookup("sweep-context").Value.String(), "want contexts of at most %d tokens, the max_model_len %s is served at (%s above it)", lim, a.Name, strings.Join(over, ", "))
	case len(kept) == 0:
		return nil, flagError("--sweep-context", nil, "want contexts of at most %d tokens, the max_model_len %s is served at: every default context is above it", lim, a.Name)
	}
	fmt.Fprintf(std.Stderr, "advise: the sweep leaves out the default contexts %s, above the max_model_len %s is served at (%d tokens)\n", strings.Join(over, ", "), a.Name, lim)
	return kept, nil
}

// adviseOptions are advise's flags.
type adviseOptions struct {
	boundFlags
	sc           *scenarioFlags
	output       string
	plot         string
	threshold    float64
	batches      intList // the sweep's
	contexts     intList
	noSweep      bool
	mtpTokens    int
	compareTopos string // comma list of boxes, each as --topo takes it
	entries      string // comma list; "" all
	transfer     string // comma list of other models
}

func newAdviseOptions() *adviseOptions {
	return &adviseOptions{sc: newScenarioFlags(), output: formatTable, threshold: 0.05,
		batches: intList{v: advise.DefaultBatches, min: 1}, contexts: intList{v: advise.DefaultContexts, min: 1},
		mtpTokens: 1, compareTopos: strings.Join(advise.DefaultCatalogTopologies, ","), transfer: "glm-5-nvfp4"}
}

func (o *adviseOptions) Bind(fs *pflag.FlagSet) {
	o.fs = fs
	o.sc.Bind(fs)
	bindOutputFlag(fs, &o.output, "one row per catalog entry", allFormats...)
	fs.StringVar(&o.plot, "plot", o.plot, "write a bar chart of the speedups to FILE.png or FILE.svg (upper bounds, conditional entries and variants that do not fit in colours of their own, labelled as in the table)")
	fs.Float64Var(&o.threshold, "threshold", o.threshold, "relative change of tokens/s at which an optimization pays")
	fs.Var(&o.batches, "sweep-batch", "batch sizes of the sweep"+countSuffixHelp)
	fs.Var(&o.contexts, "sweep-context", "context lengths of the sweep"+countSuffixHelp)
	fs.BoolVar(&o.noSweep, "no-sweep", o.noSweep, "skip the batch x context sweep")
	fs.IntVar(&o.mtpTokens, "mtp-tokens", o.mtpTokens, "speculative tokens of the MTP entry")
	fs.StringVar(&o.compareTopos, "compare-topos", o.compareTopos, "boxes the 'move to' entries try, each a preset, a box description or a topology JSON as --topo takes (comma list; '' for none)")
	fs.StringVar(&o.entries, "entries", o.entries, "only these catalog entries (comma list; default all)")
	fs.StringVar(&o.transfer, "transfer", o.transfer, "other models on which to compare the baseline's settings with stock (comma list; '' for none)")
}

func (o *adviseOptions) Run(ctx context.Context, args []string, std IO) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if err := checkOutput(o.output, allFormats...); err != nil {
		return err
	}
	if err := checkPlotPath(o.plot); err != nil {
		return err
	}
	if o.threshold <= 0 || o.threshold >= 1 {
		return flagError("--threshold", o.threshold, "want a fraction in (0,1)")
	}
	if o.mtpTokens < 1 || o.mtpTokens > 16 {
		return flagError("--mtp-tokens", o.mtpTokens, "want 1 to 16")
	}
	// The boxes the "move to" entries try, checked before any work: a
	// misspelt one is the flag's fault, not a row that does not apply;
	// '' tries none (a nil list would be the catalog's defaults). Each is
	// read as --topo reads its box (a preset, a description or a topology
	// JSON), and a box named twice would be two rows of one box.
	topos := []string{}
	var boxes []*topology.Topology
	for _, name := range splitList(o.compareTopos) {
		ref, err := topology.NewRef(name, 0)
		if err != nil {
			return causeError("--compare-topos", name, err)
		}
		t, err := ref.Resolve()
		if err != nil {
			return causeError("--compare-topos", name, err)
		}
		for j, prev := range boxes {
			if prev.SameBox(t) {
				what := fmt.Sprintf("%s and %s are the same box", topos[j], name)
				if topos[j] == name {
					what = name + " is named twice"
				}
				return flagError("--compare-topos", quote(o.compareTopos), "%s: name each box once", what)
			}
		}
		topos, boxes = append(topos, name), append(boxes, t)
	}
	// --dense-dsa on a model without DSA still prices the --transfer
	// models that have it.
	o.sc.otherModels = len(splitList(o.transfer)) > 0
	// --moe-dispatch and --dispatch-dtype price the DP-attention rows,
	// the acceptance flags the speculative ones.
	o.sc.variants = true
	base, err := o.sc.scenario()
	if err != nil {
		return err
	}
	// Its scheduler limits size the engine's KV pool only: refused where
	// they size nothing of it.
	if err := base.CheckSchedulerLimits(); err != nil {
		return usageErrorf("%v", err)
	}
	a, opts := base.Arch, base.Options
	contexts, err := o.sweepContexts(a, std)
	if err != nil {
		return err
	}
	// K of the speculative rows (the baseline's own method keeps the
	// baseline's K, the same when --spec names it).
	co := advise.CatalogOptions{MTPTokens: o.mtpTokens, MTPAcceptFrac: opts.MTPAcceptFrac, Topologies: topos, SpecTokens: o.sc.rowSpecTokens(), Reprice: o.sc.boxReprice}
	cat := advise.Catalog(co)
	if o.entries != "" {
		if cat, err = filterEntries(cat, splitList(o.entries)); err != nil {
			return err
		}
	}
	if err := o.checkUnused(base, cat); err != nil {
		return err
	}
	var others []*model.Arch
	for _, name := range splitList(o.transfer) {
		if name == a.Name {
			continue
		}
		m, err := resolveModel("--transfer", name)
		if err != nil {
			return err
		}
		for _, prev := range others {
			if prev.Name == m.Name {
				return flagError("--transfer", quote(o.transfer), "%s is given twice: name each model once", m.Name)
			}
		}
		others = append(others, m)
	}
	in := advise.Input{Transfer: others, Base: base, ImplyDenseDSA: !o.changed("dense-dsa"), Reprice: o.sc.priceOnBox,
		Entries: cat, Batches: o.batches.v, Contexts: contexts, NoSweep: o.noSweep, ThresholdFrac: o.threshold, BaseArgs: o.sc.givenArgs()}
	bar := newLazyBar(std.Stderr, "advise sweep")
	in.Progress = bar.update
	adv, err := advise.Advise(in)
	bar.finish()
	if err != nil {
		return err
	}
	if m := adv.Baseline.Footprint; m.NoPool != "" {
		fmt.Fprintf(std.Stderr, "warning: the baseline does not fit in GPU memory: %s\n", m.NoPool)
	} else if !m.Fits {
		fmt.Fprintf(std.Stderr, "warning: the baseline does not fit in GPU memory: short by %.1f GB per GPU\n", m.ShortfallGB)
	}
	var files []func() error
	if o.plot != "" {
		files = append(files, func() error { return writeAdvisePlot(o.plot, adv) })
	}
	return renderThen(std.Stdout, o.output, view{
		JSON: adv,
		CSV:  func(w io.Writer) error { return writeAdviceCSV(w, adv) },
		Text: func(w io.Writer, md bool) error {
			if md {
				return writeAdviceMarkdown(w, adv)
			}
			return writeAdviceTable(w, adv)
		},
	}, files...)
}

// checkUnused refuses flags that would price nothing: the MTP row's
// --mtp-tokens (and an --mtp-accept no MTP step reads) when that row is
// left out by --entries or the model has no MTP layer to draft with, and
// an acceptance (--spec-accept, --spec-accept-file) when neither the
// baseline nor a row left by --entries drafts (the sweep's lists beside
// --no-sweep are sweepContexts'). Taken in silence, each would read as
// part of the advice. verdict's rows take the same flags.
func (o *adviseOptions) checkUnused(base sim.Scenario, cat []advise.Entry) error {
	return checkRowFlags(o.sc, o.mtpTokens, base, cat)
}

// checkRowFlags is checkUnused for a verb that prices the catalog's rows
// cat beside base (advise, verdict).
func checkRowFlags(sc *scenarioFlags, mtpTokens int, base sim.Scenario, cat []advise.Entry) error {
	if other := sc.acceptFlag(); other != "" && base.Build.Spec.DraftSteps(base.Workload) == 0 &&
		!slices.ContainsFunc(cat, func(e advise.Entry) bool { return e.Kind == "speculative" }) {
		name, value, _ := strings.Cut(other, " ")
		return flagError(name, value, "prices only speculative steps: the baseline drafts none, and --entries leaves out every speculative row")
	}
	mtpRow := slices.ContainsFunc(cat, func(e advise.Entry) bool { return e.Name == "mtp" })
	why := model.NoMTPDraft(base.Arch)
	if why == "" && !mtpRow {
		why = "--entries leaves out the mtp row"
	}
	if why == "" {
		return nil
	}
	if sc.changed("mtp-tokens") {
		return flagError("--mtp-tokens", mtpTokens, "prices only the mtp row, and %s", why)
	}
	if sc.changed("mtp-accept") && base.Build.Spec.MethodFor(base.Workload) != model.SpecMTP {
		return flagError("--mtp-accept", base.Options.MTPAcceptFrac, "prices only MTP steps: the baseline drafts none, and %s", why)
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func filterEntries(cat []advise.Entry, names []string) ([]advise.Entry, error) {
	// An --entries of only commas and blanks names nothing: taken as the
	// empty list, the catalog's nil, it priced every entry and the boxes'
	// besides.
	if len(names) == 0 {
		return nil, flagError("--entries", nil, "names no entry: want a comma list of entry names (leave the flag out for every entry)")
	}
	var out []advise.Entry
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			// A row twice, and twice in every answer that ranks them.
			return nil, flagError("--entries", nil, "%q is given twice: name each entry once", n)
		}
		found := false
		for _, e := range cat {
			if e.Name == n {
				out, found = append(out, e), true
			}
		}
		if !found {
			var all []string
			for _, e := range cat {
				all = append(all, e.Name)
			}
			return nil, flagError("--entries", nil, "unknown entry %q (want one of %s)", n, strings.Join(all, ", "))
		}
	}
	return out, nil
}

// lazyBar shows a progress bar on stderr, with the time left predicted
// from the rate so far, only when stderr is a terminal and once the work
// has run for a second (short sweeps and logs get nothing).
type lazyBar struct {
	w     io.Writer
	desc  string
	start time.Time
	bar   *progressbar.ProgressBar
	off   bool
}

func newLazyBar(w io.Writer, desc string) *lazyBar {
	return &lazyBar{w: w, desc: desc, start: time.Now(), off: !isTerminal(w)}
}

func (l *lazyBar) update(done, total int) {
	if l.off {
		return
	}
	if l.bar == nil {
		if time.Since(l.start) < time.Second || done >= total {
			return
		}
		l.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(l.w), progressbar.OptionSetDescription(l.desc),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	_ = l.bar.Set(done)
}

func (l *lazyBar) finish() {
	if l.bar != nil {
		_ = l.bar.Finish()
	}
}

// adviceCells are the table cells of one row, shared by table and markdown.
func adviceCells(r *advise.Row) []string {
	state := "added"
	if r.InBaseline {
		state = "in baseline"
	}
	if r.Error != "" {
		return []string{r.Entry, string(r.Applicability.Status), state, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"}
	}
	c := r.Change
	kvcap := "-"
	if c.KVCapacityFrac > 0 && c.KVCapacityFrac != 1 {
		kvcap = fmt.Sprintf("x%.2f", c.KVCapacityFrac)
	}
	return []string{r.Entry, string(r.Applicability.Status), state,
		fmt.Sprintf("%.2f", r.With.StepUs/1e3) + r.FitNote(),
		fmt.Sprintf("x%.3f", r.Gain.Speedup()),
		fmt.Sprintf("%.1f", r.With.TokensPerS),
		fmt.Sprintf("%+.0f", c.ComputeUs), fmt.Sprintf("%+.0f", c.CommUs), fmt.Sprintf("%+.0f", c.LaunchUs),
		fmt.Sprintf("%+d", c.Kernels), fmt.Sprintf("%+d", c.Collectives),
		fmt.Sprintf("%+.2f", float64(c.CommBytes)/1e6), fmt.Sprintf("%+.1f", c.MemBytes/1e6), kvcap}
}

// adviceCSVHeader is advise's CSV: one row per catalog entry, each column
// one quantity in the unit its name says (the table's d.* columns as
// d_*, the memory in bytes), the fit in columns of its own.
var adviceCSVHeader = []string{"entry", "applies", "upper_bound", "state", "step_ms", "speedup", "tokens_per_s",
	"d_compute_us", "d_comm_us", "d_launch_us", "d_kernels", "d_collectives", "d_comm_bytes", "d_mem_bytes", "kv_capacity_frac", "fits", "shortfall_gb"}

// writeAdviceCSV writes advise's rows as data: numbers bare, empty cells
// for a row that is not priced (and for a KV capacity it does not change
// or cannot say), where the table writes "x1.20", "+0", "-" and a step
// with "(no fit: -2.0 GB)".
func writeAdviceCSV(w io.Writer, adv *advise.Advice) error {
	cells := make([][]string, len(adv.Rows))
	for i := range adv.Rows {
		r := &adv.Rows[i]
		state := "added"
		if r.InBaseline {
			state = "in baseline"
		}
		row := []string{r.Entry, string(r.Applicability.Status), strconv.FormatBool(r.Applicability.UpperBound), state}
		if r.Error != "" || r.With == nil {
			cells[i] = append(row, make([]string, len(adviceCSVHeader)-len(row))...)
			continue
		}
		c := r.Change
		kvcap := ""
		if c.KVCapacityFrac > 0 {
			kvcap = csvNum(c.KVCapacityFrac)
		}
		cells[i] = append(row, csvNum(r.With.StepUs/1e3), csvNum(r.Gain.Speedup()), csvNum(r.With.TokensPerS),
			csvNum(c.ComputeUs), csvNum(c.CommUs), csvNum(c.LaunchUs), strconv.Itoa(c.Kernels), strconv.Itoa(c.Collectives),
			strconv.FormatInt(c.CommBytes, 10), csvNum(c.MemBytes), kvcap,
			strconv.FormatBool(r.With.Footprint.Fits), csvNum(r.With.Footprint.ShortfallGB))
	}
	return writeCSV(w, adviceCSVHeader, cells)
}

var adviceHeader = []string{"entry", "applies", "state", "step ms", "speedup", "tok/s", "d.compute us", "d.comm us", "d.launch us", "d.kernels", "d.collectives", "d.comm MB", "d.mem MB", "KV cap"}

func writeAdviceHead(w io.Writer, adv *advise.Advice) {
	b, s := adv.Baseline, adv.Stock
	bo, so := b.Options, s.Options
	if w, err := model.ParseWorkload(adv.Workload); err != nil || w.SpecTokens == 0 {
		// The acceptance rate matters only with speculative tokens.
		bo.MTPAcceptFrac, so.MTPAcceptFrac = 0, 0
		bo.SpecAccept, so.SpecAccept = sim.SpecAccept{}, sim.SpecAccept{}
	}
	fmt.Fprintf(w, "advise: %s on %s, %s, %s%s\n", adv.Model, adv.Topology, adv.Plan, adv.Workload, kvDefaultNote(adv.KVDefault))
	if b.Engine != "" {
		fmt.Fprintf(w, "engine: %s\n", b.Engine)
	}
	for _, a := range adviceAnswers(adv) {
		fmt.Fprintln(w, a)
	}
	fmt.Fprintf(w, "baseline (%s): step %.2f ms, %.1f tok/s per request, %.1f tok/s, communication %.0f %% of the step, KV capacity %d tokens%s\n",
		bo.Label(), b.StepUs/1e3, b.PerRequest, b.TokensPerS, 100*b.CommShareFrac, b.Footprint.KVCapacityToks, kvGroupsNote(b))
	for _, c := range b.Caveats {
		fmt.Fprintf(w, "caveat: %s\n", c)
	}
	fmt.Fprintf(w, "stock (%s): step %.2f ms, %.1f tok/s, communication %.0f %%; the baseline's settings are worth x%.2f here (compute %+.0f us, comm %+.0f us, launch %+.0f us)\n",
		so.Label(), s.StepUs/1e3, s.TokensPerS, 100*s.CommShareFrac, adv.StockGain.Speedup(),
		adv.StockChange.ComputeUs, adv.StockChange.CommUs, adv.StockChange.LaunchUs)
	for _, c := range s.Caveats {
		if !slices.Contains(b.Caveats, c) {
			fmt.Fprintf(w, "caveat (stock): %s\n", c)
		}
	}
	fmt.Fprintf(w, "rows: 'added' = the entry on top of the baseline; 'in baseline' = the baseline vs the baseline without it. d.* = with - without (rank 0, one step).\n")
}

func writeAdviceTable(w io.Writer, adv *advise.Advice) error {
	writeAdviceHead(w, adv)
	fmt.Fprintln(w)
	rows := make([][]string, len(adv.Rows))
	for i := range adv.Rows {
		rows[i] = adviceCells(&adv.Rows[i])
	}
	if err := writeRows(w, adviceHeader, rows, false); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nwhy, and how to run it")
	for i := range adv.Rows {
		r := &adv.Rows[i]
		fmt.Fprintf(w, "  %-22s %s: %s\n", r.Entry, r.Applicability.Status, r.Applicability.Reason)
		if h := r.How.String(); h != "" {
			fmt.Fprintf(w, "  %-22s how: %s\n", "", h)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "  %-22s not predicted: %s\n", "", r.Error)
		}
	}
	if len(adv.Batches) > 0 {
		fmt.Fprintf(w, "\nwhere it pays (sweep: batch %s x context %s; threshold %.0f %% of tokens/s)\n", joinInts(adv.Batches), joinInts(adv.Contexts), 100*adv.ThresholdFrac)
		for i := range adv.Rows {
			if s := adv.Rows[i].Sweep.String(); s != "" {
				fmt.Fprintf(w, "  %-22s %s\n", adv.Rows[i].Entry, s)
			}
		}
	}
	writeSpecAdvice(w, adv, false)
	return writeTransfer(w, adv, false)
}

// adviceAnswers answers the seed's questions (seed-scenario.md) in plain
// lines, each with the number behind it: do the settings transfer across
// models (and which part is the box's, which the model's); does FP8 KV
// speed decode or only add capacity, and where it starts to pay; which
// optimization is worth building next.
func adviceAnswers(adv *advise.Advice) []string {
	var out []string
	if len(adv.Transfer) > 1 {
		var gains, perCall, calls, compute []string
		for _, r := range adv.Transfer {
			if r.Error != "" {
				continue
			}
			gains = append(gains, fmt.Sprintf("x%.2f on %s", r.Gain.Speedup(), r.Model))
			perCall = append(perCall, fmt.Sprintf("%.1f vs %.1f us", r.CommUsPerCall, r.StockPerCall))
			calls = append(calls, strconv.Itoa(r.Collectives))
			compute = append(compute, fmt.Sprintf("%.0f", r.ComputeUs))
		}
		if len(gains) > 1 {
			out = append(out, fmt.Sprintf("settings transfer: the baseline's options over stock give %s. The box sets the price of a collective (%s per call, baseline vs stock); the model sets how many a step issues (%s) and its compute (%s us).",
				strings.Join(gains, " and "), strings.Join(perCall, "; "), strings.Join(calls, " vs "), strings.Join(compute, " vs ")))
		}
	}
	for i := range adv.Rows {
		r := &adv.Rows[i]
		if r.Entry != "fp8-kv" || r.Error != "" || r.With == nil {
			continue
		}
		g := r.Gain.TokensPerSPct
		if r.InBaseline {
			g = -g // the baseline has it: the row is its removal's opposite
		}
		verb := "does not speed decode here"
		switch {
		case g >= 100*adv.ThresholdFrac:
			verb = "speeds decode here"
		case g > 0:
			verb = fmt.Sprintf("below the %.0f %% threshold here", 100*adv.ThresholdFrac)
		}
		line := fmt.Sprintf("FP8 KV cache: %+.1f %% tokens/s at %s (%s), %s", g, adv.Workload, verb, kvCapacityChange(r))
		if sw := r.Sweep; sw != nil && sw.PaysFrom != nil {
			line += fmt.Sprintf("; it pays from batch %d x context %d (%+.1f %%)", sw.PaysFrom.Batch, sw.PaysFrom.Context, 100*sw.PaysFrom.GainFrac)
		} else if sw != nil {
			line += "; it never reaches the threshold in the sweep"
		}
		if r.Applicability.Status != advise.Applies {
			line += " (" + string(r.Applicability.Status) + " on this box: see its row)"
		}
		out = append(out, line+".")
	}
	pct := 100 * adv.ThresholdFrac
	var sure, upper []string
	for _, p := range adv.WorthBuilding {
		sure = append(sure, pickText(p))
	}
	for _, p := range adv.UpperBounds {
		upper = append(upper, pickText(p))
	}
	// Entries that gain but make the step too large for GPU memory at
	// this load, which the baseline's step fits: not worth building
	// here, said apart so that their gain is not read as on offer.
	noFit := ""
	if len(adv.NoFit) > 0 {
		var n []string
		for _, p := range adv.NoFit {
			n = append(n, fmt.Sprintf("%s %+.1f %% tokens/s, short by %.1f GB per GPU", p.Entry, p.TokensPerSPct, p.ShortfallGB))
		}
		noFit = "; not at this load, where the step with it does not fit in GPU memory: " + strings.Join(n, ", ")
	}
	switch {
	case len(sure) > 0 && len(upper) > 0:
		out = append(out, fmt.Sprintf("worth building next, on this box at this load: %s; upper bounds only: %s%s.", strings.Join(sure, ", then "), strings.Join(upper, ", then "), noFit))
	case len(sure) > 0:
		out = append(out, "worth building next, on this box at this load: "+strings.Join(sure, ", then ")+noFit+".")
	case len(upper) > 0:
		out = append(out, fmt.Sprintf("worth building next, on this box at this load: only upper bounds reach %.0f %%: %s%s.", pct, strings.Join(upper, ", then "), noFit))
	default:
		out = append(out, fmt.Sprintf("worth building next: no software entry gains %.0f %% tokens/s here on top of the baseline%s.", pct, noFit))
	}
	return out
}

// pickText is one entry of the "worth building next" answer with the
// qualifiers of its row: what a conditional entry needs, and for an upper
// bound that the gain is the most it gives and why it may not pay here.
func pickText(p advise.Pick) string {
	a := p.Applicability
	gain := fmt.Sprintf("%s %+.1f %% tokens/s", p.Entry, p.TokensPerSPct)
	var q []string
	if a.Status != advise.Applies && a.Needs != "" {
		q = append(q, string(a.Status)+": needs "+a.Needs)
	} else {
		q = append(q, string(a.Status))
	}
	if a.UpperBound {
		gain += " at most"
		q = append(q, "may not pay here: "+a.Caution)
	}
	return gain + " (" + strings.Join(q, "; ") + ")"
}

// writeTransfer renders question 1 of the seed: do the baseline's settings
// carry over to other models on this box, and which part of the
// communication is the box's (time per collective) and which the
// model's (collectives per step).
func writeTransfer(w io.Writer, adv *advise.Advice, md bool) error {
	if len(adv.Transfer) < 2 {
		return nil
	}
	header := []string{"model", "baseline tok/s", "stock tok/s", "speedup", "comm share", "stock comm share", "collectives/step", "us/collective", "stock us/collective", "compute us", "fits"}
	var rows [][]string
	for _, r := range adv.Transfer {
		if r.Error != "" {
			rows = append(rows, []string{r.Model, "-", "-", "-", "-", "-", "-", "-", "-", "-", r.Error})
			continue
		}
		rows = append(rows, []string{r.Model, fmt.Sprintf("%.1f", r.TokensPerS), fmt.Sprintf("%.1f", r.StockTokensPS), fmt.Sprintf("x%.2f", r.Gain.Speedup()),
			fmt.Sprintf("%.0f %%", 100*r.CommShareFrac), fmt.Sprintf("%.0f %%", 100*r.StockCommShareFrac), strconv.Itoa(r.Collectives),
			fmt.Sprintf("%.1f", r.CommUsPerCall), fmt.Sprintf("%.1f", r.StockPerCall), fmt.Sprintf("%.0f", r.ComputeUs), fitCell(r.Fits, r.ShortfallGB)})
	}
	title := "do the baseline's settings transfer? (same box, plan and workload; us/collective is the box's part, collectives/step the model's)"
	return writeTable(w, "Transfer", title, header, rows, md)
}

func writeAdviceMarkdown(w io.Writer, adv *advise.Advice) error {
	fmt.Fprintln(w, "## tpscope advise")
	fmt.Fprintln(w)
	writeAdviceHead(w, adv)
	fmt.Fprintln(w)
	rows := make([][]string, len(adv.Rows))
	for i := range adv.Rows {
		r := &adv.Rows[i]
		reason := r.Applicability.Reason
		if r.Error != "" {
			reason += "; " + r.Error
		}
		rows[i] = append(adviceCells(r), strings.ReplaceAll(reason, "|", "/"))
	}
	if err := writeRows(w, append(slices.Clip(adviceHeader), "reason"), rows, true); err != nil {
		return err
	}
	if len(adv.Batches) > 0 {
		fmt.Fprintf(w, "\n### Where it pays (threshold %.0f %%)\n\n", 100*adv.ThresholdFrac)
		for i := range adv.Rows {
			if s := adv.Rows[i].Sweep.String(); s != "" {
				fmt.Fprintf(w, "- **%s**: %s\n", adv.Rows[i].Entry, s)
			}
		}
	}
	writeSpecAdvice(w, adv, true)
	return writeTransfer(w, adv, true)
}

// adviseBar is how a bar of advise's chart is qualified, as its table row
// is: a variant that does not fit (the step column's "no fit"), an upper
// bound (its evidence says it may not pay here) or a conditional entry
// (the applies column's "conditional": it runs only given what its row
// needs) is drawn in a colour of its own, named in the legend and in the
// bar's label.
type adviseBar struct {
	legend string
	color  color.Color
}

var (
	barGain  = adviseBar{"predicted gain", chart.SeriesColors[0]}
	barUpper = adviseBar{"upper bound: may not pay here", chart.SeriesColors[1]}
	barCond  = adviseBar{"conditional: runs given what its row needs", chart.SeriesColors[4]}
	barNoFit = adviseBar{"does not fit in GPU memory", color.Gray{Y: 150}}
)

// adviseBarOf is row r's bar kind and its label's qualifiers: " (no fit:
// -1.8 GB)" in the table's words, " (upper bound)", " (conditional)"; an
// upper bound (itself conditional on what it needs) says the more, and
// not fitting wins the colour when it holds too.
func adviseBarOf(r *advise.Row) (adviseBar, string) {
	kind := barGain
	switch a := r.Applicability; {
	case a.UpperBound:
		kind = barUpper
	case a.Status == advise.Conditional:
		kind = barCond
	}
	if r.FitNote() != "" {
		kind = barNoFit
	}
	return kind, r.Qualifiers()
}

// writeAdvisePlot draws the speedup of every predicted entry as horizontal
// bars (1 = no change), best first at the top (advisePlot).
func writeAdvisePlot(path string, adv *advise.Advice) error {
	p, n, err := advisePlot(adv)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	w, h := adviseChartSize(p, n)
	return chart.SaveWith(path, w, h, func(dc draw.Canvas) { drawAdviseChart(dc, p) })
}

// drawAdviseChart draws advise's chart p into dc, its legend under the
// axis (chart.DrawLegendBelow).
func drawAdviseChart(dc draw.Canvas, p *plot.Plot) { chart.DrawLegendBelow(dc, p) }

// adviseChartSize is the size of advise's chart of n bars drawn by p: 16
// pt a bar and its legend under the axis (chart.DrawLegendBelow), so the
// bars keep the width the entries' labels leave them; the legend's long
// entries beside them took half of it.
func adviseChartSize(p *plot.Plot, n int) (w, h vg.Length) {
	return 9 * vg.Inch, vg.Points(float64(16*n+100)) + chart.LegendBelowHeight(p)
}

// advisePlot is advise's bar chart and its number of bars: a bar per
// predicted entry in its kind's colour (adviseBarOf), labelled with the
// entry, its state and speedup and the qualifiers its table row has.
func advisePlot(adv *advise.Advice) (*plot.Plot, int, error) {
	var rows []*advise.Row
	for i := range adv.Rows {
		if adv.Rows[i].Error == "" {
			rows = append(rows, &adv.Rows[i])
		}
	}
	if len(rows) == 0 {
		return nil, 0, errors.New("no entry was predicted")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s %s on %s, %s: speedup in tokens/s", adv.Model, adv.Plan, adv.Topology, adv.Workload)
	p.X.Label.Text = "speedup (with / without the optimization); 1 = no change"
	vals := make(plotter.Values, len(rows))
	labels := make([]string, len(rows))
	var shown []adviseBar
	for i, r := range rows {
		j := len(rows) - 1 - i // plotter draws bottom-up
		vals[j] = r.Gain.Speedup()
		state := ""
		if r.InBaseline {
			state = " (in baseline)"
		}
		kind, q := adviseBarOf(r)
		labels[j] = fmt.Sprintf("%s%s x%.2f%s", r.Entry, state, r.Gain.Speedup(), q)
		bar, err := plotter.NewBarChart(plotter.Values{vals[j]}, vg.Points(10))
		if err != nil {
			return nil, 0, err
		}
		bar.Horizontal, bar.XMin, bar.Color, bar.LineStyle.Width = true, float64(j), kind.color, 0
		p.Add(bar)
		if !slices.Contains(shown, kind) {
			shown = append(shown, kind)
			p.Legend.Add(kind.legend, bar)
		}
	}
	if len(shown) == 1 && shown[0] == barGain {
		p.Legend = plot.NewLegend() // nothing to tell apart
	}
	p.Legend.Padding = vg.Points(3)
	one, err := plotter.NewLine(plotter.XYs{{X: 1, Y: -0.5}, {X: 1, Y: float64(len(rows)) - 0.5}})
	if err == nil {
		one.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(one)
	}
	p.NominalY(labels...)
	chart.FitBarAxisX(p, vals)
	return p, len(rows), nil
}

// writeSpecAdvice prints, for each speculative row, its break-even
// acceptance and where it pays (advise.SpecAdvice); nothing without one.
func writeSpecAdvice(w io.Writer, adv *advise.Advice, md bool) {
	var rows []*advise.Row
	for i := range adv.Rows {
		if adv.Rows[i].Spec != nil {
			rows = append(rows, &adv.Rows[i])
		}
	}
	if len(rows) == 0 {
		return
	}
	head := "speculative decoding: the acceptance each row was priced at, where it breaks even (a chain's per-token acceptance; vLLM's draft acceptance rate; tokens per step) and how far each acceptance carries it (the acceptance is an input: the model prices the steps)"
	if md {
		fmt.Fprintf(w, "\n### Speculative decoding\n\n%s\n\n", head)
	} else {
		fmt.Fprintf(w, "\n%s\n", head)
	}
	for _, r := range rows {
		if md {
			fmt.Fprintf(w, "- **%s**: %s (acceptance: %s)\n", r.Entry, r.Spec, r.Spec.AcceptSource)
			continue
		}
		fmt.Fprintf(w, "  %-22s %s\n  %-22s acceptance: %s\n", r.Entry, r.Spec, "", r.Spec.AcceptSource)
	}
}

// kvGroupsNote says, for a plan of several DP groups, that the baseline's
// KV capacity is the whole deployment's (advise.Footprint.KVCapacityToks:
// each group's pool times the groups), where predict's memory line gives
// one group's pool: the same flags, two numbers, each named.
func kvGroupsNote(v *advise.Variant) string {
	p, err := model.ParsePlan(v.Plan)
	dp := p.Normalized().DP
	if err != nil || dp <= 1 {
		return ""
	}
	return fmt.Sprintf(" over its %d DP groups (%d each, predict's memory line)", dp, v.Footprint.KVCapacityToks/int64(dp))
}

// kvCapacityChange says what an entry does to the KV capacity: the ratio
// of the two configurations' capacities, or, where one holds none (its
// weights leave no room), the tokens each holds: a ratio over 0 is no
// figure.
func kvCapacityChange(r *advise.Row) string {
	var with, without int64
	if r.With != nil {
		with = r.With.Footprint.KVCapacityToks
	}
	if r.Without != nil {
		without = r.Without.Footprint.KVCapacityToks
	}
	switch {
	case with <= 0 && without <= 0:
		return "no KV capacity either way (the weights leave no room)"
	case without <= 0:
		return fmt.Sprintf("KV capacity %d tokens with it, none without (the weights leave no room)", with)
	}
	return fmt.Sprintf("x%.2f KV capacity", r.Change.KVCapacityFrac)
}
