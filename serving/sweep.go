package serving

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// SweepOptions bound a search for the largest load that meets an SLO.
type SweepOptions struct {
	// StartQPS is the first rate tried (0 = 1 request/s); StartConcurrency
	// the first client count (0 = 1).
	StartQPS         float64
	StartConcurrency int
	// RelTol ends a QPS search when the bracket is this narrow relative to
	// its lower end (0 = 0.02).
	RelTol float64
	// MaxRuns bounds the runs of one search (0 = 40).
	MaxRuns int
	// TimelineWindows of each run (see RunOptions).
	TimelineWindows int
}

// Sweep is the outcome of a search: every run, by load, and the best.
type Sweep struct {
	SLO SLO `json:"slo"`
	// Runs are the runs made, sorted by QPS (or concurrency).
	Runs []*Result `json:"runs"`
	// Best indexes Runs: the largest load that meets the SLO (-1 none).
	Best int `json:"best"`
	// MaxQPS / MaxConcurrency is that load; Bracket the smallest failing
	// load tried above it (0 when none failed).
	MaxQPS         float64 `json:"max_qps,omitempty"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"`
	Bracket        float64 `json:"bracket,omitempty"`
	// Lengthened counts the runs made longer than the traffic asked, to
	// reach steady state (steadyRun).
	Lengthened int `json:"lengthened,omitempty"`
}

func (o *SweepOptions) defaults() {
	if o.StartQPS <= 0 {
		o.StartQPS = 1
	}
	if o.StartConcurrency <= 0 {
		o.StartConcurrency = 1
	}
	if o.RelTol <= 0 {
		o.RelTol = 0.02
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 40
	}
}

// SweepQPS finds the largest open-loop rate at which the traffic meets
// the SLO: from StartQPS it doubles (or halves) until the SLO's verdict
// changes, then bisects the bracket to RelTol. Traffic.QPS is overwritten
// by each run's rate; a seeded run at another rate draws the same
// requests at proportionally scaled times, so the verdict moves with the
// rate alone. The SLO must set a limit; a load that meets it at no rate
// tried down to StartQPS / 2^20 returns Best -1 and no error.
func (s *Simulator) SweepQPS(t Traffic, slo SLO, o SweepOptions) (*Sweep, error) {
	if !slo.set() {
		return nil, errors.New("serving: sweep: the SLO sets no limit (want a TTFT or TPOT limit)")
	}
	if t.Concurrency > 0 {
		return nil, errors.New("serving: sweep over qps: traffic is a closed loop (concurrency set)")
	}
	o.defaults()
	sw := &Sweep{SLO: slo, Best: -1}
	runAt := func(q float64) (bool, error) {
		t.QPS = q
		return s.sweepRun(sw, t, slo, &o)
	}
	lo, hi := 0.0, 0.0 // lo meets, hi fails (0 = not found yet)
	q := o.StartQPS
	ok, err := runAt(q)
	if err != nil {
		return nil, err
	}
	if ok {
		lo = q
		for hi == 0 {
			q *= 2
			if ok, err = runAt(q); err != nil {
				return nil, err
			}
			if ok {
				lo = q
			} else {
				hi = q
			}
		}
	} else {
		hi = q
		for i := 0; lo == 0 && i < 20; i++ {
			q /= 2
			if ok, err = runAt(q); err != nil {
				return nil, err
			}
			if ok {
				lo = q
			} else {
				hi = q
			}
		}
	}
	for lo > 0 && (hi-lo)/lo > o.RelTol {
		mid := math.Sqrt(lo * hi)
		if ok, err = runAt(mid); err != nil {
			return nil, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	sort.SliceStable(sw.Runs, func(i, j int) bool { return sw.Runs[i].QPS < sw.Runs[j].QPS })
	for i, r := range sw.Runs {
		if r.QPS == lo && lo > 0 {
			sw.Best = i
		}
	}
	sw.MaxQPS, sw.Bracket = lo, hi
	return sw, nil
}

// SweepConcurrency finds the largest closed-loop client count at which
// the traffic meets the SLO: doubling from StartConcurrency until it
// fails, then bisecting the integers in between. Traffic.Concurrency is
// overwritten by each run's count.
func (s *Simulator) SweepConcurrency(t Traffic, slo SLO, o SweepOptions) (*Sweep, error) {
	if !slo.set() {
		return nil, errors.New("serving: sweep: the SLO sets no limit (want a TTFT or TPOT limit)")
	}
	if t.QPS > 0 {
		return nil, errors.New("serving: sweep over concurrency: traffic is an open loop (qps set)")
	}
	o.defaults()
	sw := &Sweep{SLO: slo, Best: -1}
	runAt := func(n int) (bool, error) {
		t.Concurrency = n
		return s.sweepRun(sw, t, slo, &o)
	}
	lo, hi := 0, 0
	n := o.StartConcurrency
	for hi == 0 {
		ok, err := runAt(n)
		if err != nil {
			return nil, err
		}
		if !ok {
			hi = n
			break
		}
		lo = n
		if n >= 1<<20 {
			break
		}
		n *= 2
	}
	for hi > 0 && hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := runAt(mid)
		if err != nil {
			return nil, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	sort.SliceStable(sw.Runs, func(i, j int) bool { return sw.Runs[i].Concurrency < sw.Runs[j].Concurrency })
	for i, r := range sw.Runs {
		if r.Concurrency == lo && lo > 0 {
			sw.Best = i
		}
	}
	sw.MaxConcurrency, sw.Bracket = lo, float64(hi)
	return sw, nil
}

// sweepRun runs t once for a sweep (lengthened to steady state,
// steadyRun), appends the result to sw.Runs and says whether it met the
// SLO; a sweep that has used o.MaxRuns stops.
func (s *Simulator) sweepRun(sw *Sweep, t Traffic, slo SLO, o *SweepOptions) (bool, error) {
	if len(sw.Runs) >= o.MaxRuns {
		return false, fmt.Errorf("serving: sweep: %d runs without converging", o.MaxRuns)
	}
	res, longer, err := s.steadyRun(t, RunOptions{SLO: slo, TimelineWindows: o.TimelineWindows})
	if err != nil {
		return false, err
	}
	if longer {
		sw.Lengthened++
	}
	if res.TooShort && len(t.Requests) > 0 {
		// No answer rather than one bracketed by a run that never
		// reached steady state.
		return false, fmt.Errorf("serving: sweep: the run at %s is too short to reach steady state (%d requests over %.1f s, E2E p50 %.1f s: want arrivals over %.1f s, %d x E2E p50), and a trace's requests cannot be lengthened: give a longer trace",
			res.Load, res.Requests, res.ArrivalSpanS, res.E2EMs.P50*1e-3, res.MinArrivalSpanS, SteadyStateE2Es)
	}
	sw.Runs = append(sw.Runs, res)
	return res.MeetsSLO, nil
}

// maxLengthenings bounds how many times steadyRun lengthens one run, and
// maxSteadyRequests the requests it lengthens one to (unless the traffic
// asked for more): a load whose end-to-end latency keeps pace with the
// run's length never reaches steady state however long it runs.
const (
	maxLengthenings   = 4
	maxSteadyRequests = 100_000
)

// steadyRun runs t and, while the run is too short to reach steady state
// (Result.TooShort) and its requests are drawn rather than a trace's,
// runs it again with Result.MinRequests requests, at least twice as many
// (a load that ends by duration: as much longer), up to maxLengthenings
// times. An open loop still not steady in a run lengthened so (its
// running batch still grows, Result.TPOTRises, or its end-to-end latency
// keeps pace with its length) is overloaded, not filling: the result
// says so. Else it says whether it is still too short (a trace's
// requests): a judge of it must not take its verdict. longer says
// whether it was lengthened. The
// longer runs draw the same first requests (one seeded stream), so the
// result stays deterministic.
func (s *Simulator) steadyRun(t Traffic, o RunOptions) (res *Result, longer bool, err error) {
	done := func(i int) (*Result, bool, error) {
		settleLengthened(res, i > 0, t.QPS > 0)
		return res, i > 0, nil
	}
	for i := 0; ; i++ {
		if res, err = s.Run(t, o); err != nil {
			return nil, false, err
		}
		if !res.TooShort || len(t.Requests) > 0 || i == maxLengthenings {
			return done(i)
		}
		next := t
		if t.NumRequests > 0 {
			// At least double: arrivals that span no time (a closed loop
			// of as many clients as requests) give no MinRequests.
			next.NumRequests = max(res.MinRequests, 2*t.NumRequests)
		}
		if t.DurationS > 0 {
			// As long as MinRequests asks, in time at this run's rate.
			next.DurationS = t.DurationS * math.Max(2, float64(res.MinRequests)/float64(res.Requests))
		}
		limit := max(maxSteadyRequests, t.NumRequests)
		next.NumRequests = min(next.NumRequests, limit)
		if next.QPS > 0 && next.DurationS > 0 {
			next.DurationS = math.Min(next.DurationS, math.Max(t.DurationS, float64(limit)/next.QPS))
		}
		if next.NumRequests == t.NumRequests && next.DurationS == t.DurationS {
			return done(i)
		}
		t = next
	}
}

// settleLengthened judges the last run of steadyRun: an open loop still
// not steady after it was lengthened (at least doubled) falls behind, it
// is not filling: its running batch still grows (TPOTRises), or its
// end-to-end latency keeps pace with its length. It is overloaded. A
// closed loop's clients bound it, and a run not lengthened has not been
// given the chance: they stay too short.
func settleLengthened(res *Result, lengthened, openLoop bool) {
	if lengthened && openLoop && res.TooShort {
		res.Overloaded, res.TooShort, res.MinRequests = true, false, 0
	}
}
