package sim

import (
	"errors"
	"fmt"

	"github.com/tpscope/tpscope/model"
)

// Scenario is what to predict: an architecture laid out by a plan, running
// a workload. PredictScenario builds its schedule (model.BuildWith) for the
// padded CUDA-graph batch, predicts it and checks the memory fit.
type Scenario struct {
	Arch     *model.Arch
	Plan     model.Plan
	Workload model.Workload
	Build    model.BuildOptions
}

// Summary is the cheap part of a prediction: what a sweep keeps per
// configuration.
type Summary struct {
	StepUs               float64    `json:"step_us"`
	Sequences            int        `json:"sequences"`
	TokensPerStep        float64    `json:"tokens_per_step"`
	TokensPerSPerRequest float64    `json:"tokens_per_s_per_request"`
	TokensPerS           float64    `json:"tokens_per_s"`
	CommShare            float64    `json:"comm_share"`
	Graphed              bool       `json:"graphed"`
	PaddedBatch          int        `json:"padded_batch"`
	Memory               *MemoryFit `json:"memory,omitempty"`
}

// ErrDoesNotFit is wrapped by the error of a scenario whose weights and KV
// cache do not fit in device memory (see MemoryFit.ShortfallGB).
var ErrDoesNotFit = errors.New("does not fit in GPU memory")

// schedule validates the scenario and builds the schedule the engine
// runs: under CUDA graphs the per-group token count is padded up to the
// next captured size (vLLM pads decode batches; serving-facts.md).
func (p *Predictor) schedule(sc Scenario) (s *model.Schedule, padded int, graphed bool, err error) {
	if sc.Arch == nil {
		return nil, 0, false, errors.New("sim: scenario has no architecture")
	}
	w := sc.Workload
	if w.Phase == "" {
		w.Phase = model.Decode
	}
	if w.Batch <= 0 {
		return nil, 0, false, fmt.Errorf("sim: workload batch %d: want at least 1 sequence", w.Batch)
	}
	plan := sc.Plan.Normalized()
	if world := plan.World(); world > p.topo.NumGPUs() {
		return nil, 0, false, fmt.Errorf("sim: plan %s needs %d GPUs; topology %s has %d", plan, world, p.topo.Name, p.topo.NumGPUs())
	}
	padded, graphed = graphStep(&p.opts, plan, w)
	bw := w
	bw.Batch = padded
	s, err = model.BuildWith(sc.Arch, sc.Plan, bw, sc.Build)
	if err != nil {
		return nil, 0, false, err
	}
	return s, padded, graphed, nil
}

// PredictScenario predicts one step of the scenario with per-op detail and
// the memory fit. A scenario that does not fit is still predicted; its
// Memory says so (Fits false, ShortfallGB), and the error is nil: callers
// decide (the CLI refuses, a planner reports the shortfall).
func (p *Predictor) PredictScenario(sc Scenario) (*Prediction, error) {
	pr, _, err := p.PredictScenarioSchedule(sc)
	return pr, err
}

// PredictScenarioSchedule is PredictScenario that also returns the
// schedule it predicted (batch padded as under CUDA graphs), for callers
// that align predicted ops with measured ones or read op fields a
// Prediction does not carry (advise).
func (p *Predictor) PredictScenarioSchedule(sc Scenario) (*Prediction, *model.Schedule, error) {
	s, padded, graphed, err := p.schedule(sc)
	if err != nil {
		return nil, nil, err
	}
	pr, err := p.predict(s, symBuilt, graphed)
	if err != nil {
		return nil, nil, err
	}
	p.fixTokens(&pr.Summary, sc, padded)
	pr.Workload.Batch = sc.Workload.Batch
	pr.Memory = p.memoryFit(sc)
	pr.Caveats = p.Caveats(sc)
	return pr, s, nil
}

// Evaluate is PredictScenario without per-op results, for sweeps.
func (p *Predictor) Evaluate(sc Scenario) (Summary, error) {
	s, padded, graphed, err := p.schedule(sc)
	if err != nil {
		return Summary{}, err
	}
	step, err := p.stepUs(s, symBuilt, graphed)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{StepUs: step, Graphed: graphed}
	if step > 0 {
		comm := 0.0
		for g := int32(0); g < p.eng.rankOff[1]; g++ {
			if p.eng.ops[g].coll {
				comm += p.eng.ops[g].durUs
			}
		}
		sum.CommShare = comm / step
	}
	p.fixTokens(&sum, sc, padded)
	sum.Memory = p.memoryFit(sc)
	return sum, nil
}

// fixTokens counts tokens of the real sequences, not the padding.
func (p *Predictor) fixTokens(sum *Summary, sc Scenario, padded int) {
	sum.Sequences = sc.Workload.Batch
	sum.PaddedBatch = padded
	sum.TokensPerStep = p.opts.TokensPerStep(sc.Workload.SpecTokens)
	if sum.StepUs > 0 {
		sum.TokensPerSPerRequest = sum.TokensPerStep / (sum.StepUs * 1e-6)
		sum.TokensPerS = sum.TokensPerSPerRequest * float64(sum.Sequences)
	}
}
