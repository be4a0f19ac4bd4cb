package serving

import (
	"fmt"
	"math"
)

// MetricCompare is one statistic of a level, predicted against measured.
type MetricCompare struct {
	// Metric is ttft_ms, tpot_ms, itl_ms, e2e_ms, output_tokens_per_s,
	// total_tokens_per_s or requests_per_s; Stat is mean, p50, p90 or
	// p99 for a latency, "" for a throughput.
	Metric    string  `json:"metric"`
	Stat      string  `json:"stat,omitempty"`
	Predicted float64 `json:"predicted"`
	// Measured is NaN (null) when the benchmark did not report it.
	Measured float64 `json:"measured"`
	// Unbounded: the simulation is overloaded and this latency grows with
	// its length (Result.Overloaded), so Predicted is the figure of this
	// run's length only: it is printed "unbounded", written null, and has
	// no error. Predicted keeps the number for a fit that must steer away
	// from the overload (Calibrate).
	Unbounded bool `json:"unbounded,omitempty"`
}

// ErrFrac is predicted / measured - 1 (NaN when either is missing, the
// measurement is 0 or the prediction is unbounded).
func (c MetricCompare) ErrFrac() float64 {
	if math.IsNaN(c.Measured) || math.IsNaN(c.Predicted) || c.Measured == 0 || c.Unbounded {
		return math.NaN()
	}
	return c.Predicted/c.Measured - 1
}

// MarshalJSON writes NaN as null, an unbounded prediction as null with
// "unbounded": true, and adds err_frac.
func (c MetricCompare) MarshalJSON() ([]byte, error) {
	stat := ""
	if c.Stat != "" {
		stat = fmt.Sprintf(`"stat":%q,`, c.Stat)
	}
	pred, unbounded := jsonNum(c.Predicted), ""
	if c.Unbounded {
		pred, unbounded = "null", `,"unbounded":true`
	}
	return []byte(fmt.Sprintf(`{"metric":%q,%s"predicted":%s,"measured":%s,"err_frac":%s%s}`,
		c.Metric, stat, pred, jsonNum(c.Measured), jsonNum(c.ErrFrac()), unbounded)), nil
}

// LevelComparison is one measured load level beside the simulation of the
// same load.
type LevelComparison struct {
	Measured *Measured `json:"measured"`
	// Load is the load simulated, TrafficNotes how it was rebuilt from the
	// file (Measured.Traffic).
	Load         string          `json:"load"`
	TrafficNotes []string        `json:"traffic_notes,omitempty"`
	Result       *Result         `json:"predicted"`
	Metrics      []MetricCompare `json:"metrics"`
	// Notes: what makes a row not comparable.
	Notes []string `json:"notes,omitempty"`
	// MeasuredMeetsSLO is the measured level judged by the SLO's
	// percentiles (SLO.MeetsMeasured); nil without an SLO or where the
	// level does not report them. The predicted side's verdict and
	// goodput are Result's.
	MeasuredMeetsSLO *bool `json:"measured_meets_slo,omitempty"`
}

// Get returns the row of metric and stat (a zero row with NaNs when
// absent).
func (l *LevelComparison) Get(metric, stat string) MetricCompare {
	for _, c := range l.Metrics {
		if c.Metric == metric && c.Stat == stat {
			return c
		}
	}
	return MetricCompare{Metric: metric, Stat: stat, Predicted: math.NaN(), Measured: math.NaN()}
}

// Latency statistics and throughputs a comparison holds, in order.
var (
	compareStats     = []string{"mean", "p50", "p90", "p99"}
	compareLatencies = []string{"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"}
	compareRates     = []string{"output_tokens_per_s", "total_tokens_per_s", "requests_per_s"}
)

// chunkedITLRatio: a measured median ITL this many times the median TPOT
// means the server streams several tokens per chunk (SGLang's
// --stream-interval, a detokenizer batching tokens): ITL then measures
// chunks, which the simulation's per-token gaps do not.
const chunkedITLRatio = 3

// CompareMeasured simulates the load of m (Measured.Traffic with seed) on
// s and sets every statistic beside the measured one.
func (s *Simulator) CompareMeasured(m *Measured, seed uint64, o RunOptions) (*LevelComparison, error) {
	t, notes, err := m.Traffic(seed)
	if err != nil {
		return nil, err
	}
	if o.TimelineWindows == 0 {
		o.TimelineWindows = -1
	}
	res, err := s.Run(t, o)
	if err != nil {
		return nil, fmt.Errorf("%s record %d (%s): %w", m.File, m.Record, m.Label(), err)
	}
	lc := &LevelComparison{Measured: m, Load: res.Load, TrafficNotes: notes, Result: res}
	if o.SLO.set() {
		if meets, known := o.SLO.MeetsMeasured(m); known {
			lc.MeasuredMeetsSLO = &meets
		}
	}
	pred := map[string]Stats{"ttft_ms": res.TTFTMs, "tpot_ms": res.TPOTMs, "itl_ms": res.ITLMs, "e2e_ms": res.E2EMs}
	meas := map[string]Latency{"ttft_ms": m.TTFTMs, "tpot_ms": m.TPOTMs, "itl_ms": m.ITLMs, "e2e_ms": m.E2EMs}
	// An overloaded run's E2E, and its TTFT when its queue grows (its
	// TPOT when its batch does), grow with the run (Result.Overloaded): no
	// figure of them is a prediction.
	unbounded := map[string]bool{"ttft_ms": res.QueueGrows, "tpot_ms": res.TPOTUnbounded(), "e2e_ms": res.Overloaded}
	for _, k := range compareLatencies {
		p := pred[k]
		pl := Latency{p.Mean, p.P50, p.P90, p.P99}
		for _, st := range compareStats {
			lc.Metrics = append(lc.Metrics, MetricCompare{Metric: k, Stat: st, Predicted: pl.Get(st), Measured: meas[k].Get(st), Unbounded: unbounded[k]})
		}
	}
	measRates := []float64{m.OutputTokensPerS, m.TotalTokensPerS, m.RequestsPerS}
	// A benchmark that did not report a rate still has its totals over
	// its duration, the definition vllm bench serve uses.
	if d := m.DurationS; d > 0 {
		derived := []float64{float64(m.OutputTokens) / d, float64(m.OutputTokens+m.PromptTokens) / d, float64(m.Completed) / d}
		for i := range measRates {
			if math.IsNaN(measRates[i]) {
				measRates[i] = derived[i]
			}
		}
	}
	predRates := []float64{res.OutputTokensPerS, res.TotalTokensPerS, res.RequestsPerS}
	for i, k := range compareRates {
		lc.Metrics = append(lc.Metrics, MetricCompare{Metric: k, Predicted: predRates[i], Measured: measRates[i]})
	}
	switch itl, tpot := m.ITLMs.P50, m.TPOTMs.P50; {
	case s.engine.StreamInterval > 1:
		lc.Notes = append(lc.Notes, fmt.Sprintf("ITL compared per chunk: the engine streams its tokens %d at a time (--stream-interval %d), the simulation times the same chunks", s.engine.StreamInterval, s.engine.StreamInterval))
	case itl > chunkedITLRatio*tpot:
		lc.Notes = append(lc.Notes, fmt.Sprintf("measured median ITL %.1f ms is %.1fx the median TPOT %.1f ms: the server streamed several tokens per chunk, so ITL measures chunks and is not compared (--stream-interval, the server's setting, times the same chunks)", itl, itl/tpot, tpot))
		for i := range lc.Metrics {
			if lc.Metrics[i].Metric == "itl_ms" {
				lc.Metrics[i].Measured = math.NaN()
			}
		}
	}
	switch {
	case res.QueueGrows:
		lc.Notes = append(lc.Notes, fmt.Sprintf("the simulation is overloaded at this load (offered %.3g, served %.3g req/s): its TTFT and end-to-end latency grow with the run's length", res.OfferedRequestsPerS, res.ServedRequestsPerS))
	case res.TPOTRises:
		lc.Notes = append(lc.Notes, fmt.Sprintf("the simulation is not steady at this load: the requests in the system grow by %.3g/s and TPOT rises %.0f %% across the second half of the arrivals (an engine still filling, or one falling behind); it is judged against no SLO",
			res.BatchGrowthPerS, 100*res.TPOTRiseFrac))
	case res.TooShort:
		lc.Notes = append(lc.Notes, fmt.Sprintf("the load is too short to reach steady state (%d requests over %.1f s, E2E p50 %.1f s: want arrivals over %d x E2E p50): its figures are those of a filling engine, as the measured run's are, and it is judged against no SLO",
			res.Requests, res.ArrivalSpanS, res.E2EMs.P50*1e-3, SteadyStateE2Es))
	}
	if l := m.SpecAcceptLength; l > 0 {
		// The server's speculative decoding is part of the scenario the
		// file measured: a simulation without it prices another.
		if y := s.d.Scenario.SpecYield(); y == nil {
			lc.Notes = append(lc.Notes, fmt.Sprintf("the measured server decoded speculatively (%.2f tokens a step, as the file reports) and this simulation drafts nothing: --spec METHOD with --spec-accept-file %s prices it", l, m.File))
		} else {
			lc.Notes = append(lc.Notes, fmt.Sprintf("acceptance: the simulation yields %.2f tokens a step (%s), the measured server %.2f (as the file reports; --spec-accept-file %s takes it)", y.TokensPerStep, y.Source, l, m.File))
		}
	}
	if m.Format == FormatRequestLog {
		lc.Notes = append(lc.Notes, "measured TTFT is server-side (queued to first token): set no frontend latency when comparing it")
	}
	return lc, nil
}
