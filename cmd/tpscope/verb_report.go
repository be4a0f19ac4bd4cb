package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/report/build"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

var reportVerb = &Verb{
	UsageLine: "report -o FILE.html [--trace SRC...] [--from FILE...] [flags]",
	Short:     "write one self-contained HTML report: timeline per rank predicted vs measured, bars, tables",
	Long: `Writes one HTML file (-o FILE) that opens from disk with no network: the data
embedded as JSON, its script and styles inline.

It shows a zoomable timeline of one step per rank, the predicted lane above the
measured lane, ops coloured by kind, collectives linked across the ranks of their
group and the critical path marked; hovering an op shows its FLOPs, bytes, bound,
cost parameters and measured median and spread. Bars compare predicted and
measured time per op kind and per layer; tables list the ops with the largest
error and, when given, the advice with its gains and caveats.

Inputs (any combination):
  --trace SRC    traces, as 'tpscope compare' reads them (OTLP JSON from
                 'tpscope run', Jaeger, PyTorch-profiler Kineto JSON);
                 repeatable. Each scenario they record is predicted and
                 compared as compare does: --model, the plan and workload
                 flags, --cuda-graphs, --graph-sizes and --engine must agree
                 with it, --topo and the other options override it (all of
                 them are the scenario of Kineto traces, which record none);
                 one step is drawn (the one nearest the median step time)
                 and every op's hover holds its median and
                 spread over all steps. A cut or damaged trace is an error
                 naming the file and the byte where it ends; with
                 --allow-partial its complete steps are drawn instead.
  --from FILE    a saved 'tpscope predict', 'advise' or 'compare' result
                 (--output json); repeatable. A saved comparison has no op
                 timings: it gives bars and tables, not a timeline; a saved
                 prediction has no schedule: its collectives are not linked
                 across ranks. Beside --trace, a saved prediction or advice
                 must be of a step the traces measured (every option
                 counted, the executor's timing events too).
  scenario flags (--model, --tp, --batch, --cuda-graphs, ..., as 'tpscope
                 predict' takes them) without --trace: the predicted step.
                 Used when neither --trace nor --from is given, or when one
                 of them is set next to --from: then the step must be the
                 saved result's (a saved advice's baseline, one of a saved
                 comparison's scenarios; the flags that made it), as a
                 report shows one scenario.`,
	Example: `tpscope report --model kimi-k2.5-nvfp4 --tp 8 --batch 1 --context 4096 --cuda-graphs -o predicted.html
tpscope report --trace exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph.otlp.jsonl.gz -o h200.html
tpscope advise --output json > advice.json && tpscope report --from advice.json -o advice.html
tpscope report --trace rank0.pt.trace.json.gz --model kimi-k2.5-nvfp4 --tp 8 --batch 8 --context 4096 -o vllm.html`,
	New: func() Options { return newReportOptions() },
}

// reportOptions are report's flags.
type reportOptions struct {
	boundFlags
	traces       []string // --trace sources
	sc           *scenarioFlags
	saved        []string // --from files
	out          string
	title        string
	top          int
	allowPartial bool
}

func newReportOptions() *reportOptions {
	return &reportOptions{sc: newScenarioFlags(), top: build.DefaultMaxOpRows}
}

func (o *reportOptions) Bind(fs *pflag.FlagSet) {
	o.fs = fs
	bindTraceFlag(fs, &o.traces, "the measurements to draw and compare")
	o.sc.Bind(fs)
	fs.StringArrayVar(&o.saved, "from", o.saved, "a saved 'predict', 'advise' or 'compare' result (--output json); repeat for several")
	fs.StringVarP(&o.out, "out", "o", o.out, "the HTML file to write (required; .html or .htm)")
	fs.StringVar(&o.title, "title", o.title, "the report's title (default: the scenarios shown)")
	fs.IntVar(&o.top, "top", o.top, "op rows per table")
	bindAllowPartialFlag(fs, &o.allowPartial)
}

func (o *reportOptions) Run(ctx context.Context, args []string, std IO) error {
	sc := o.sc
	if o.out == "" {
		return usageErrorf("no output file: pass -o FILE.html")
	}
	// The file is HTML whatever its name: a name that says otherwise
	// (report.png) would open as something it is not.
	if err := checkOutputExt("-o", o.out, ".html", ".htm"); err != nil {
		return err
	}
	if o.top < 1 {
		return flagError("--top", o.top, "want at least 1")
	}
	if err := checkTraceSources("--trace", o.traces); err != nil {
		return err
	}
	if err := checkTraceSources("", args); err != nil {
		return err
	}
	srcs := append(slices.Clip(o.traces), args...)
	if o.allowPartial && len(srcs) == 0 {
		// It reads a cut trace's complete steps; a saved result or the
		// scenario flags have none to cut, and the report would be the
		// same without it.
		return flagError("--allow-partial", nil, "reads cut or damaged traces, and no --trace is given (a saved result or the scenario flags have no steps to cut): drop it")
	}
	scenarioSet := false
	o.visitChanged(func(f *pflag.Flag) { scenarioSet = scenarioSet || sc.isScenarioFlag(f.Name) })
	in := build.Input{Title: o.title, MaxOpRows: o.top}
	var advicePath, comparisonPath, predictionPath string // the --from files that gave them
	// Saved results first: a bad file fails before any work.
	for _, path := range o.saved {
		if err := checkInputFile("--from", path, "a saved 'predict', 'advise' or 'compare' result"); err != nil {
			return err
		}
	}
	for _, path := range o.saved {
		s, err := build.ReadSavedFile(path)
		if err != nil {
			return causeError("--from", nil, err)
		}
		switch {
		case s.Advice != nil && in.Advice != nil:
			return flagError("--from", path, "a second advise result; a report shows one")
		case s.Advice != nil:
			in.Advice, advicePath = s.Advice, path
		case s.Prediction != nil && in.Prediction != nil:
			return flagError("--from", path, "a second prediction; a report shows one")
		case s.Prediction != nil:
			in.Prediction, predictionPath = s.Prediction, path
		case in.Comparison != nil:
			return flagError("--from", path, "a second compare result; a report shows one (compare several traces in one run instead)")
		default:
			in.Comparison, comparisonPath = s.Comparison, path
		}
	}
	if len(srcs) > 0 && in.Comparison != nil {
		return flagError("--trace and --from", nil, "both give measurements (a saved compare result); pass one")
	}
	// Without traces the scenario flags name a step to predict: always
	// when nothing was saved, else only when one is set.
	predict := len(srcs) == 0 && (len(o.saved) == 0 || scenarioSet)
	if len(srcs) > 0 {
		if err := sc.checkPassed(); err != nil {
			return err
		}
		results, err := readTraces(ctx, srcs, o.allowPartial)
		if err != nil {
			return err
		}
		scs, err := sc.traceScenarios(results, traceUse{allowPartial: o.allowPartial})
		if err != nil {
			return err
		}
		noteSources(std.Stderr, results, "")
		if in.Comparison, err = compare.Compare(results, compare.Options{Scenarios: scs}); err != nil {
			return err
		}
		// A saved result beside the traces must be of a step they
		// measured, or the report would pair two scenarios as one.
		if err := checkSavedBesideTraces(advicePath, in.Advice, predictionPath, in.Prediction, in.Comparison); err != nil {
			return err
		}
	}
	if predict {
		scen, pr, sched, err := predictForReport(sc)
		if err != nil {
			return err
		}
		// A saved result beside the flags' step must be of that step, or
		// the report would set one scenario's timeline beside another's
		// advice or measurements.
		if err := checkSavedScenario(advicePath, in.Advice, comparisonPath, in.Comparison, scen, pr); err != nil {
			return err
		}
		if in.Prediction == nil {
			in.Prediction, in.Schedule = pr, sched
		} else if err := checkSavedPrediction(predictionPath, in.Prediction, scen, pr); err != nil {
			// A saved prediction is drawn as saved when the flags name
			// its step, and refused beside another.
			return err
		}
		// The flags' step that does not fit is refused as predict
		// refuses it, not drawn with "fits: false" as a step the engine
		// would run.
		if err := memoryFitError(scen, pr); err != nil {
			return err
		}
	}
	if o.fs.Changed("top") && in.Prediction == nil && in.Comparison == nil {
		// Advice alone has no op table: its rows are every entry.
		return flagError("--top", o.top, "sets the rows of the op tables, and saved advice alone has none (its table lists every entry): drop it")
	}
	r, err := build.Build(in)
	if err != nil {
		return err
	}
	if err := report.WriteFile(o.out, r); err != nil {
		return err
	}
	st, err := os.Stat(o.out)
	if err != nil {
		return err
	}
	fmt.Fprintf(std.Stdout, "wrote %s (%.2f MB): %d sections, %d op boxes\n", o.out, float64(st.Size())/1e6, len(r.Sections), r.BoxCount())
	return nil
}

// predictForReport predicts the scenario the flags name, with its schedule
// (the collectives' groups link the ranks' lanes). A scenario that does
// not fit in GPU memory is still drawn: its memory line says by how much.
func predictForReport(sc *scenarioFlags) (sim.Scenario, *sim.Prediction, *model.Schedule, error) {
	scen, err := sc.scenario()
	if err != nil {
		return scen, nil, nil, err
	}
	// The pool flags size the engine's KV pool the memory line states,
	// as predict's: refused where they size nothing of it.
	if err := scen.CheckSchedulerLimits(); err != nil {
		return scen, nil, nil, usageErrorf("%v", err)
	}
	pr, sched, err := sim.Predict(scen)
	if err != nil {
		var pe *model.PlanError
		if errors.As(err, &pe) {
			return scen, nil, nil, planFlagError("", err)
		}
		return scen, nil, nil, err
	}
	return scen, pr, sched, nil
}

// reportScenario is a step as a saved result names it: model, plan,
// workload (its KV dtype resolved), options and box, each as the
// scenario's codecs write it.
type reportScenario struct{ model, plan, workload, options, box string }

func (r reportScenario) String() string {
	return fmt.Sprintf("%s %s %s on %s (options %s)", r.model, r.plan, r.workload, r.box, r.options)
}

// predictedStep is the step a prediction prices, as a saved result
// names it.
func predictedStep(pr *sim.Prediction) reportScenario {
	return reportScenario{pr.Model, pr.Plan.String(), pr.Workload.String(), pr.Options.Label(), pr.Topology}
}

// adviceStep is the step saved advice is the advice of: its baseline.
func adviceStep(a *advise.Advice) reportScenario {
	return reportScenario{a.Model, a.Plan, a.Workload, a.Baseline.Options.Label(), a.Topology}
}

// checkSavedBesideTraces refuses saved advice or a saved prediction of
// another step than every scenario the traces measured (c, their
// comparison: each scenario's prediction names its step as a saved one
// does), naming both: a report shows one scenario. Every option counts,
// the measuring harness's timing events too (they lengthen the step). The
// box is the same under two names when the saved one resolves to the
// traces' box (h200-nvswitch over a trace recorded as nvswitch:8xh200-sxm).
func checkSavedBesideTraces(advicePath string, a *advise.Advice, predPath string, p *sim.Prediction, c *compare.Report) error {
	var measured []reportScenario
	var boxes []*topology.Topology
	for i := range c.Scenarios {
		if sr := &c.Scenarios[i]; sr.Prediction != nil {
			measured = append(measured, predictedStep(sr.Prediction))
			boxes = append(boxes, sr.Scenario.Topo)
		}
	}
	check := func(path, what string, saved reportScenario) error {
		for i, m := range measured {
			box := saved.box
			if t, err := topology.Resolve(box, 0); err == nil && t.SameBox(boxes[i]) {
				box = m.box
			}
			if saved.model == m.model && saved.plan == m.plan && saved.workload == m.workload && saved.options == m.options && box == m.box {
				return nil
			}
		}
		if len(measured) == 0 {
			return nil
		}
		others := ""
		if len(measured) > 1 {
			others = fmt.Sprintf(" (and %d more)", len(measured)-1)
		}
		return flagError("--from", path, "%s of %s, and the traces measured %s%s: a report shows one scenario (pass the result made for the traces' scenario, or leave --from out)", what, saved, measured[0], others)
	}
	if a != nil {
		if err := check(advicePath, "advice", adviceStep(a)); err != nil {
			return err
		}
	}
	if p != nil {
		return check(predPath, "a prediction", predictedStep(p))
	}
	return nil
}

// checkSavedPrediction refuses a saved prediction (saved, read from path)
// of another step than the one the scenario flags predict (scen, priced as
// pr), naming both: a report shows one scenario. One box may go by two
// names (h200-nvswitch, nvswitch:8xh200-sxm).
func checkSavedPrediction(path string, saved *sim.Prediction, scen sim.Scenario, pr *sim.Prediction) error {
	flags, step := predictedStep(pr), predictedStep(saved)
	if t, err := topology.Resolve(step.box, 0); err == nil && scen.Topo != nil && t.SameBox(scen.Topo) {
		step.box = flags.box
	}
	if step == flags {
		return nil
	}
	return flagError("--from", path, "a prediction of %s, and the scenario flags name %s: a report shows one scenario (pass the flags the result was made with, or none)", predictedStep(saved), flags)
}

// checkSavedScenario refuses saved advice or a saved comparison of
// another step than the one the scenario flags predict (scen, priced as
// pr), naming both: a report shows one scenario. Advice records its
// baseline by name; a comparison records its scenarios by reference (the
// model's, the box's: a file by its content hash, wherever it lies), any
// of which may be the flags' step. Every option counts, the measuring
// harness's timing events too: the executor's two per op lengthen the
// step (the flags give them with --timing-events).
func checkSavedScenario(advicePath string, a *advise.Advice, cmpPath string, c *compare.Report, scen sim.Scenario, pr *sim.Prediction) error {
	flags := predictedStep(pr)
	refuse := func(path, what string, saved reportScenario, more int) error {
		others := ""
		if more > 0 {
			others = fmt.Sprintf(" (and %d more)", more)
		}
		return flagError("--from", path, "%s of %s%s, and the scenario flags name %s: a report shows one scenario (pass the flags the result was made with, or none)", what, saved, others, flags)
	}
	if a != nil {
		saved := adviceStep(a)
		// One box under two names (h200-nvswitch, nvswitch:8xh200-sxm).
		if t, err := topology.Resolve(saved.box, 0); err == nil && scen.Topo != nil && t.SameBox(scen.Topo) {
			saved.box = flags.box
		}
		if saved != flags {
			return refuse(advicePath, "advice", adviceStep(a), 0)
		}
	}
	if c == nil || len(c.Scenarios) == 0 {
		return nil
	}
	mine := flags
	mine.model, mine.box = scen.Arch.Ref.String(), scen.TopoRef.Key()
	for _, r := range c.Scenarios {
		rs := r.Scenario
		model := ""
		if rs.Arch != nil {
			model = rs.Arch.Ref.String()
		}
		w := rs.Workload
		if w.KVDtype == "" {
			// Recorded without a KV dtype: the checkpoint's, which is the
			// flags' model's where the models agree (else they differ
			// anyway).
			w.KVDtype = w.KVDtypeFor(scen.Arch)
		}
		box := rs.TopoRef.Key()
		saved := rs.Topo
		if saved == nil {
			// A comparison read back holds its box by reference: a
			// preset or description resolves here.
			saved, _ = topology.Resolve(rs.TopoRef.String(), 0)
		}
		if saved != nil && scen.Topo != nil && saved.SameBox(scen.Topo) {
			box = mine.box // one box under two names
		}
		if (reportScenario{model, rs.Plan.String(), w.String(), rs.Options.Label(), box}) == mine {
			return nil
		}
	}
	first := c.Scenarios[0].Scenario
	saved := reportScenario{"no model", first.Plan.String(), first.Workload.String(), first.Options.Label(), first.TopoRef.String()}
	if first.Arch != nil {
		saved.model = first.Arch.Ref.String()
	}
	return refuse(cmpPath, "a comparison", saved, len(c.Scenarios)-1)
}
