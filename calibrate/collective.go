package calibrate

// Calibration of the collective model from measured times (an nccl-tests
// log, the executor's own collectives).
//
// Every sample is assigned to the (algorithm, protocol) NCCL would run at
// its size (the replay of NCCL's choice under the measurement's NCCL
// options, or the pair the options force), then each pair's three
// parameters are fitted by minimizing, over x = (ln baseLat, ln hwLat,
// ln busBw),
//
//	mean_i (ln t_model(x, bytes_i) - ln t_i)^2 + w * |x - x_prior|^2
//
// with Nelder-Mead (gonum/optimize). Log space makes every size count by
// its relative error; the prior (NCCL's constants, the modeled bus
// bandwidth) keeps parameters the data cannot separate where NCCL puts
// them: one rank count cannot tell baseLat from steps x hwLat, and a
// protocol run only on small messages says little about its bandwidth.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/gonum/optimize"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// CollectiveSample is one measured collective time.
type CollectiveSample struct {
	Bytes  int64
	TimeUs float64
}

// CollectiveOptions describe the measurement. The zero value means: an
// all-reduce over every GPU of the topology under NCCL's defaults.
type CollectiveOptions struct {
	Op model.Collective // "" = all-reduce
	// Ranks: the measured group is the first Ranks GPUs (0 = all).
	Ranks int
	// NCCL holds the environment of the measurement: Proto/Algo restrict
	// which pair a sample is assigned to; P2PLevel/P2PDisable are recorded
	// in the fitted entries (sim applies them only under the same setting);
	// MinChannels/MaxChannels set the channels the prior prices and the
	// entries record (sim scales the bandwidth to the channels it prices).
	NCCL ncclenv.Settings
	// PriorWeight is w above (0 = DefaultCollectivePriorWeight).
	PriorWeight float64
	// Source and Created are stored as the calibration's provenance.
	Source, Created string
}

// DefaultCollectivePriorWeight weighs the prior against the mean squared log error
// of the data: moving a parameter by a factor e costs as much as a mean
// log error of sqrt(0.001) = 3 % (assumption; enough to pin directions the
// data leave free, such as baseLat versus hwLat, while biasing those they
// determine by well under 1 %).
const DefaultCollectivePriorWeight = 0.001

// CollectiveFit is the result of Collective.
type CollectiveFit struct {
	// Params holds one entry per (algo, proto) that received samples.
	Params []topology.CollectiveParams
	// Topology is a copy of the input with the entries merged into its
	// Calibration (entries for other ops, pairs or P2P settings are kept).
	Topology *topology.Topology
	// RMSErrFrac is the RMS relative error of the calibrated model over all
	// samples; PriorRMSErrFrac that of the uncalibrated one.
	RMSErrFrac, PriorRMSErrFrac float64
	Samples                     int
	// OneSize lists the entries of Params whose samples are all of one
	// message size: one time per pair cannot tell its latency from its
	// bandwidth, so the fit moves both from the prior by their shares of
	// that time, and a report must not present them as measured.
	OneSize []OneSizeFit
}

// OneSizeFit is a pair fitted on samples of a single message size.
type OneSizeFit struct {
	Algo    string `json:"algo"`
	Proto   string `json:"proto"`
	Bytes   int64  `json:"bytes"`
	Samples int    `json:"samples"`
}

// FittedCollectives are the collectives Collective fits: those whose
// time the model prices from NCCL's ring and tree algorithms.
var FittedCollectives = []model.Collective{model.AllReduce, model.AllGather, model.ReduceScatter}

// Collective fits per-protocol latency and bandwidth to samples.
func Collective(t *topology.Topology, samples []CollectiveSample, o CollectiveOptions) (*CollectiveFit, error) {
	if o.Op == "" {
		o.Op = model.AllReduce
	}
	if !slices.Contains(FittedCollectives, o.Op) {
		return nil, fmt.Errorf("collective %q: only allreduce, allgather and reducescatter can be calibrated", o.Op)
	}
	if o.Ranks == 0 {
		o.Ranks = t.NumGPUs()
	}
	switch {
	case o.Ranks < 2:
		return nil, fmt.Errorf("the measurement has %d rank(s): a collective needs 2 or more to cross a link", o.Ranks)
	case o.Ranks > t.NumGPUs():
		return nil, fmt.Errorf("the measurement has %d ranks; topology %q has %d GPUs (pass a topology with at least as many)", o.Ranks, t.Name, t.NumGPUs())
	}
	if o.PriorWeight <= 0 {
		o.PriorWeight = DefaultCollectivePriorWeight
	}
	prior := o.NCCL
	prior.IgnoreCalibration = true
	m, err := sim.NewCollectiveModel(t, prior)
	if err != nil {
		return nil, err
	}
	group := make([]int, o.Ranks)
	for i := range group {
		group[i] = i
	}

	type key struct {
		a ncclenv.Algorithm
		p ncclenv.Protocol
	}
	byPair := map[key][]CollectiveSample{}
	var priorSq float64
	n := 0
	for _, s := range samples {
		if s.Bytes <= 0 || !(s.TimeUs > 0) || math.IsInf(s.TimeUs, 0) {
			continue
		}
		c := m.Cost(o.Op, group, s.Bytes)
		a, _ := ncclenv.ParseAlgorithm(c.Algo)
		pr, _ := ncclenv.ParseProtocol(c.Proto)
		k := key{a, pr}
		byPair[k] = append(byPair[k], s)
		r := c.TimeUs/s.TimeUs - 1
		priorSq += r * r
		n++
	}
	if n == 0 {
		return nil, errors.New("no sample with bytes > 0 and time > 0")
	}
	keys := make([]key, 0, len(byPair))
	for k := range byPair {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return int(keys[i].a)*int(ncclenv.NumProtocols)+int(keys[i].p) < int(keys[j].a)*int(ncclenv.NumProtocols)+int(keys[j].p)
	})

	// The channels the ring ran, where the measurement's settings set
	// them (0 otherwise: NCCL's own count), so that sim scales the fitted
	// bandwidth to the channels a prediction runs.
	channels := 0
	if o.NCCL.MinChannels != 0 || o.NCCL.MaxChannels != 0 {
		channels = m.Channels(group)
	}
	fit := &CollectiveFit{Samples: n, PriorRMSErrFrac: math.Sqrt(priorSq / float64(n))}
	var sq float64
	for _, k := range keys {
		ss := byPair[k]
		// The prior is the uncalibrated model (sim.CollectiveModel.Prior):
		// a calibrated hwLat replaces its whole latency per step.
		pm, ok := m.Prior(o.Op, group, k.a, k.p)
		if !ok {
			return nil, fmt.Errorf("%s/%s: no such pair for %s on %d ranks", k.a, k.p, o.Op, o.Ranks)
		}
		st, ratio := pm.Steps, pm.BusToAlg
		x0 := []float64{math.Log(pm.BaseLatUs), math.Log(pm.StepLatUs), math.Log(pm.BusBWGBps)}
		predict := func(x []float64, b float64) float64 {
			return math.Exp(x[0]) + st*math.Exp(x[1]) + b/(1000*math.Exp(x[2])*ratio)
		}
		obj := func(x []float64) float64 {
			var f float64
			for _, s := range ss {
				d := math.Log(predict(x, float64(s.Bytes))) - math.Log(s.TimeUs)
				f += d * d
			}
			f /= float64(len(ss))
			for i := range x {
				d := x[i] - x0[i]
				f += o.PriorWeight * d * d
			}
			return f
		}
		res, err := optimize.Minimize(optimize.Problem{Func: obj}, append([]float64(nil), x0...),
			&optimize.Settings{FuncEvaluations: 20000, Converger: &optimize.FunctionConverge{Absolute: 1e-12, Relative: 1e-12, Iterations: 200}},
			&optimize.NelderMead{})
		if err != nil && res == nil {
			return nil, fmt.Errorf("%s/%s: %w", k.a, k.p, err)
		}
		x := res.X
		var psq float64
		for _, s := range ss {
			r := predict(x, float64(s.Bytes))/s.TimeUs - 1
			psq += r * r
		}
		sq += psq
		if oneSize(ss) {
			fit.OneSize = append(fit.OneSize, OneSizeFit{Algo: k.a.String(), Proto: k.p.String(), Bytes: ss[0].Bytes, Samples: len(ss)})
		}
		fit.Params = append(fit.Params, topology.CollectiveParams{
			Op: string(o.Op), Algo: k.a.String(), Proto: k.p.String(), Ranks: o.Ranks,
			P2PLevel: o.NCCL.P2PCondition(), Channels: channels,
			BaseLatUs: round4(math.Exp(x[0])), HwLatUs: round4(math.Exp(x[1])), BusBWGBps: round4(math.Exp(x[2])),
			Samples: len(ss), RMSRelErr: round4(math.Sqrt(psq / float64(len(ss)))),
		})
	}
	fit.RMSErrFrac = math.Sqrt(sq / float64(n))

	out := t.Clone()
	cal := &topology.Calibration{Source: o.Source, Created: o.Created}
	if out.Calibration != nil {
		for _, old := range out.Calibration.Collectives {
			replaced := false
			for _, p := range fit.Params {
				if old.Op == p.Op && old.Algo == p.Algo && old.Proto == p.Proto && old.P2PLevel == p.P2PLevel {
					replaced = true
				}
			}
			if !replaced {
				cal.Collectives = append(cal.Collectives, old)
			}
		}
		// The earlier provenance stays; a fit of the same measurement's
		// next collective (calibrate --trace fits all-reduce, then
		// all-gather, of one provenance) adds nothing to it: appended
		// again, the box said the trace was fitted twice.
		switch prev := out.Calibration.Source; {
		case prev == "":
		case o.Source == "" || prev == o.Source || strings.HasSuffix(prev, "; "+o.Source):
			cal.Source = prev
		default:
			cal.Source = prev + "; " + o.Source
		}
	}
	cal.Collectives = append(cal.Collectives, fit.Params...)
	out.Calibration = cal
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("fitted topology: %w", err)
	}
	fit.Topology = out
	return fit, nil
}

// oneSize reports whether every sample is of the first one's size.
func oneSize(ss []CollectiveSample) bool {
	for _, s := range ss {
		if s.Bytes != ss[0].Bytes {
			return false
		}
	}
	return true
}

// round4 keeps 4 significant digits so saved files stay readable.
func round4(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	e := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*e) / e
}
