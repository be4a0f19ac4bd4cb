package serving

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Arrival is the process of an open loop's request times.
type Arrival string

const (
	// Poisson: exponential gaps of mean 1/QPS (vllm bench serve's default).
	Poisson Arrival = "poisson"
	// Constant: gaps of exactly 1/QPS.
	Constant Arrival = "constant"
	// Gamma: gamma-distributed gaps of mean 1/QPS and shape Burstiness
	// (vllm bench serve --burstiness: 1 is Poisson, below 1 burstier,
	// above 1 more regular).
	Gamma Arrival = "gamma"
)

// ParseArrival accepts poisson, constant and gamma ("" is poisson).
func ParseArrival(s string) (Arrival, error) {
	switch Arrival(strings.ToLower(s)) {
	case "", Poisson:
		return Poisson, nil
	case Constant:
		return Constant, nil
	case Gamma, "burst", "bursty":
		return Gamma, nil
	}
	return "", fmt.Errorf("arrival %q: want poisson, constant or gamma", s)
}

// Dist is the distribution of a length.
type Dist string

const (
	// Fixed: every request has the mean.
	Fixed Dist = "fixed"
	// Uniform: integers uniform in [mean(1-spread), mean(1+spread)].
	Uniform Dist = "uniform"
	// LogNormal: log-normal of the given mean and coefficient of variation
	// spread (standard deviation / mean), rounded to an integer.
	LogNormal Dist = "lognormal"
)

// ParseDist accepts fixed, uniform and lognormal ("" is fixed).
func ParseDist(s string) (Dist, error) {
	switch Dist(strings.ToLower(s)) {
	case "", Fixed:
		return Fixed, nil
	case Uniform:
		return Uniform, nil
	case LogNormal, "log-normal":
		return LogNormal, nil
	}
	return "", fmt.Errorf("distribution %q: want fixed, uniform or lognormal", s)
}

// Lengths is how many tokens a prompt or an output has.
type Lengths struct {
	Dist Dist `json:"dist"`
	// Mean tokens (at least 1).
	Mean int `json:"mean"`
	// Spread: the uniform half-width or the log-normal coefficient of
	// variation, as a fraction of the mean (0 for Fixed).
	Spread float64 `json:"spread,omitempty"`
}

// maxLengthTokens bounds a drawn or read length.
const maxLengthTokens = 1 << 24

// validate checks the lengths named name ("prompt", "output"); an error
// is a *FieldError of field name.dist, name.mean or name.spread.
func (l Lengths) validate(name string) error {
	switch l.Dist {
	case "", Fixed, Uniform, LogNormal:
	default:
		return trafficFieldError(name+".dist", "want fixed, uniform or lognormal", "traffic: %s: distribution %q", name, l.Dist)
	}
	if l.Mean < 1 || l.Mean > maxLengthTokens {
		return trafficFieldError(name+".mean", fmt.Sprintf("want 1 to %d tokens", maxLengthTokens), "traffic: %s: mean %d tokens", name, l.Mean)
	}
	if !(l.Spread >= 0) || math.IsInf(l.Spread, 0) {
		return trafficFieldError(name+".spread", "want a finite fraction >= 0", "traffic: %s: spread %v", name, l.Spread)
	}
	if l.Dist == Uniform && l.Spread > 1 {
		return trafficFieldError(name+".spread", "want at most 1 with a uniform distribution (lengths from mean x (1 - spread))", "traffic: %s: uniform spread %v", name, l.Spread)
	}
	if (l.Dist == "" || l.Dist == Fixed) && l.Spread != 0 {
		return trafficFieldError(name+".spread", "want 0 with a fixed length, or a uniform or lognormal distribution", "traffic: %s: spread %v with a fixed length", name, l.Spread)
	}
	return nil
}

// FieldError is a field of a Traffic that Validate refused, or of the
// engine's options a deployment refused: Field names it as Traffic's JSON
// does ("prompt.mean", "output.spread", "burstiness", "num_requests",
// "duration_s") or as the engine's under "engine." ("engine.block_size",
// "engine.num_gpu_blocks_override"), so that a command line names the
// flag that set it; Want says what the field takes.
type FieldError struct {
	Field string
	Want  string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// trafficFieldError is the FieldError of field: the message format (the field
// and its value), then want.
func trafficFieldError(field, want, format string, a ...any) error {
	return &FieldError{Field: field, Want: want, Err: fmt.Errorf(format+": "+want, a...)}
}

// draw returns one length from r (one or two uniform draws, whatever the
// distribution, so the streams of different distributions stay aligned
// request by request: fixed and uniform use one, lognormal the normal's).
func (l Lengths) draw(r *rand.Rand) int {
	m := float64(l.Mean)
	var v float64
	switch l.Dist {
	case Uniform:
		lo, hi := math.Round(m*(1-l.Spread)), math.Round(m*(1+l.Spread))
		v = lo + math.Floor(r.Float64()*(hi-lo+1))
	case LogNormal:
		s2 := math.Log1p(l.Spread * l.Spread)
		v = math.Round(math.Exp(math.Log(m) - s2/2 + math.Sqrt(s2)*r.NormFloat64()))
	default:
		r.Float64() // keep the stream aligned with the other distributions
		v = m
	}
	return int(math.Max(1, math.Min(v, maxLengthTokens)))
}

// Request is one request of a load: when it arrives (seconds from the
// start) and its prompt and output lengths in tokens; optionally the
// hashes of its prompt's blocks (prefix caching) and the session it is a
// turn of.
type Request struct {
	ArrivalS     float64 `json:"arrival_s"`
	PromptTokens int     `json:"prompt_tokens"`
	OutputTokens int     `json:"output_tokens"`
	// HashIDs name the prompt's leading blocks of Traffic.HashBlockTokens
	// tokens, in order (Mooncake's hash_ids): two requests whose first k
	// IDs agree share their first k blocks. Only whole blocks are named.
	HashIDs []uint64 `json:"hash_ids,omitempty"`
	// Session, when not 0, makes the request a turn of that session: its
	// prompt is the conversation so far (the previous turns' prompts and
	// outputs, then the new message), and it is sent DelayS seconds after
	// the previous turn completes, or at ArrivalS if that is later.
	// Without HashIDs its blocks are named by the session (so a turn hits
	// the previous turn's cached blocks).
	Session int64   `json:"session,omitempty"`
	DelayS  float64 `json:"delay_s,omitempty"`
}

// Traffic is the load offered to a deployment. Exactly one of QPS (open
// loop), Concurrency (closed loop) or Requests alone (a trace replayed at
// its own times) sets the arrivals; Requests, when given, also supplies
// the lengths (in file order), otherwise Prompt and Output draw them.
type Traffic struct {
	// QPS > 0: open loop, requests arrive at this rate by the Arrival
	// process (Burstiness is the gamma shape; 0 = 1). The first arrives at
	// time 0.
	QPS        float64 `json:"qps,omitempty"`
	Arrival    Arrival `json:"arrival,omitempty"`
	Burstiness float64 `json:"burstiness,omitempty"`
	// Concurrency > 0: closed loop, this many clients each send a request
	// at time 0 and the next one the moment the previous completes. With
	// QPS too, an open loop of at most Concurrency requests in flight
	// (vllm bench serve --request-rate R --max-concurrency C): a request
	// due while C are in flight is sent when one completes.
	Concurrency int `json:"concurrency,omitempty"`
	// Requests: a trace (see ReadRequests).
	Requests []Request `json:"-"`
	// HashBlockTokens is the tokens of one block the requests' HashIDs
	// name (0: 512, Mooncake's, when a request has HashIDs; else the
	// engine's block size for sessions' blocks).
	HashBlockTokens int `json:"hash_block_tokens,omitempty"`
	// NumRequests stops issuing after this many requests, DurationS after
	// this much time (whichever comes first; a trace stops at its end).
	// Requests in flight then run to completion.
	NumRequests int     `json:"num_requests,omitempty"`
	DurationS   float64 `json:"duration_s,omitempty"`
	// Prompt and Output lengths of generated requests.
	Prompt Lengths `json:"prompt"`
	Output Lengths `json:"output"`
	// Seed drives every random draw (lengths, gaps).
	Seed uint64 `json:"seed"`
}

// BurstinessWant is what a burstiness takes: a gamma shape; 0 is a
// Traffic's "not gamma", never a shape.
const BurstinessWant = "want a gamma shape above 0 and at most 1000 (1 = Poisson)"

// NamesPrefixes reports whether the traffic's requests name what a
// prefix cache reuses: their prompt blocks (HashIDs) or a multi-turn
// session. Only a request trace carries either; drawn lengths and a
// measured benchmark's levels reuse nothing, so prefix caching (on or
// off) changes nothing for them.
func (t *Traffic) NamesPrefixes() bool {
	for i := range t.Requests {
		if len(t.Requests[i].HashIDs) > 0 || t.Requests[i].Session != 0 {
			return true
		}
	}
	return false
}

// Draws reports whether the load takes any draw from Seed: an open
// loop's gaps (Poisson or gamma; constant gaps draw nothing) or generated
// lengths with a spread (fixed lengths, or a spread of 0, come out the
// same whatever the draw; a trace's lengths and times are its own).
func (t *Traffic) Draws() bool {
	if t.QPS > 0 && t.Arrival != Constant {
		return true
	}
	if len(t.Requests) > 0 {
		return false
	}
	spreads := func(l Lengths) bool { return (l.Dist == Uniform || l.Dist == LogNormal) && l.Spread > 0 }
	return spreads(t.Prompt) || spreads(t.Output)
}

// OneTokenOutputs reports whether every request of the load outputs a
// single token: a trace's whose outputs are all one token, or lengths
// drawn that can be nothing else (fixed or uniform at most one token; a
// log-normal spread can draw more). TPOT is timed over the tokens after
// the first, so such a load has none to time, and a TPOT limit would be
// met by no measurement at all (TPOTS is 0 for a one-token output).
func (t *Traffic) OneTokenOutputs() bool {
	if len(t.Requests) > 0 {
		for i := range t.Requests {
			if t.Requests[i].OutputTokens > 1 {
				return false
			}
		}
		return true
	}
	if t.Output.Dist == LogNormal && t.Output.Spread > 0 {
		return false
	}
	return maxLen(t.Output) <= 1
}

// maxRequests bounds the requests of one run.
const maxRequests = 1 << 24

// Validate checks the traffic; errors name the field. Run calls it first.
func (t *Traffic) Validate() error {
	modes := 0
	if t.QPS != 0 {
		modes++
		if !(t.QPS > 0) || math.IsInf(t.QPS, 0) || t.QPS > 1e7 {
			return fmt.Errorf("traffic: qps %v: want a rate above 0 and at most 1e7 per second", t.QPS)
		}
	}
	if t.Concurrency != 0 {
		modes++
		if t.Concurrency < 0 || t.Concurrency > 1<<20 {
			return fmt.Errorf("traffic: concurrency %d: want 1 to 1048576 clients", t.Concurrency)
		}
	}
	if modes == 0 && len(t.Requests) == 0 {
		return errors.New("traffic: no load: want qps, concurrency or a request file")
	}
	if _, err := ParseArrival(string(t.Arrival)); err != nil {
		return fmt.Errorf("traffic: %w", err)
	}
	if t.Burstiness != 0 && (!(t.Burstiness > 0) || t.Burstiness > 1e3) {
		return trafficFieldError("burstiness", BurstinessWant, "traffic: burstiness %v", t.Burstiness)
	}
	if t.NumRequests < 0 || t.NumRequests > maxRequests {
		return trafficFieldError("num_requests", fmt.Sprintf("want 0 to %d", maxRequests), "traffic: requests %d", t.NumRequests)
	}
	if !(t.DurationS >= 0) || math.IsInf(t.DurationS, 0) {
		return trafficFieldError("duration_s", "want a finite time >= 0 s", "traffic: duration %v s", t.DurationS)
	}
	if len(t.Requests) == 0 {
		if t.NumRequests == 0 && t.DurationS == 0 {
			return errors.New("traffic: neither a request count nor a duration: want one to end the load")
		}
		if err := t.Prompt.validate("prompt"); err != nil {
			return err
		}
		if err := t.Output.validate("output"); err != nil {
			return err
		}
	}
	if t.QPS > 0 && t.DurationS > 0 && t.NumRequests == 0 && t.QPS*t.DurationS > maxRequests {
		return fmt.Errorf("traffic: %v qps for %v s is %.0f requests: want at most %d", t.QPS, t.DurationS, t.QPS*t.DurationS, maxRequests)
	}
	if t.HashBlockTokens < 0 || t.HashBlockTokens > 1<<20 {
		return fmt.Errorf("traffic: hash_block_tokens %d: want 1 to %d (0 = default)", t.HashBlockTokens, 1<<20)
	}
	replay := t.QPS == 0 && t.Concurrency == 0
	for i, r := range t.Requests {
		if err := r.validate(); err != nil {
			return fmt.Errorf("traffic: request %d: %w", i, err)
		}
		if replay && i > 0 && r.ArrivalS < t.Requests[i-1].ArrivalS {
			return fmt.Errorf("traffic: request %d: arrival_s %v before the previous request's %v: want a trace sorted by arrival (ReadRequests sorts)", i, r.ArrivalS, t.Requests[i-1].ArrivalS)
		}
	}
	return nil
}

func (r Request) validate() error {
	switch {
	case !(r.ArrivalS >= 0) || math.IsInf(r.ArrivalS, 0):
		return fmt.Errorf("arrival_s %v: want a finite time >= 0", r.ArrivalS)
	case r.PromptTokens < 1 || r.PromptTokens > maxLengthTokens:
		return fmt.Errorf("prompt_tokens %d: want 1 to %d", r.PromptTokens, maxLengthTokens)
	case r.OutputTokens < 1 || r.OutputTokens > maxLengthTokens:
		return fmt.Errorf("output_tokens %d: want 1 to %d", r.OutputTokens, maxLengthTokens)
	case !(r.DelayS >= 0) || math.IsInf(r.DelayS, 0):
		return fmt.Errorf("delay_s %v: want a finite time >= 0", r.DelayS)
	case r.Session < 0:
		return fmt.Errorf("session %d: want >= 0 (0 = none)", r.Session)
	}
	return nil
}

// source issues the traffic's requests in order: lengths (drawn or from
// the trace) and, for open loops and traces, arrival times. Draws come
// from one PCG stream seeded by Traffic.Seed, request by request: prompt,
// output, then the gap to the next arrival (a standard exponential or
// gamma variate scaled by 1/QPS, so runs at different rates see the same
// requests at proportional times).
type source struct {
	t      *Traffic
	rng    *rand.Rand
	issued int
	nextS  float64 // arrival of the next open-loop request
}

func newSource(t *Traffic) *source {
	return &source{t: t, rng: rand.New(rand.NewPCG(t.Seed, 0x7470_7363_6f70_6521))}
}

// done reports whether the load has ended for a request arriving at
// arrivalS: the count reached, the trace exhausted or the duration over.
func (s *source) done(arrivalS float64) bool {
	t := s.t
	return (t.NumRequests > 0 && s.issued >= t.NumRequests) ||
		(len(t.Requests) > 0 && s.issued >= len(t.Requests)) ||
		(t.DurationS > 0 && arrivalS >= t.DurationS)
}

// next returns the next request, arriving at the open loop's next time,
// at the trace's time, or (closed loop) at nowS; false when the load has
// ended.
func (s *source) next(nowS float64) (Request, bool) {
	t := s.t
	at := nowS
	switch {
	case t.QPS > 0:
		at = s.nextS
	case t.Concurrency == 0 && s.issued < len(t.Requests):
		at = t.Requests[s.issued].ArrivalS
	}
	if s.done(at) {
		return Request{}, false
	}
	var r Request
	if len(t.Requests) > 0 {
		r = t.Requests[s.issued]
	} else {
		r.PromptTokens = t.Prompt.draw(s.rng)
		r.OutputTokens = t.Output.draw(s.rng)
	}
	r.ArrivalS = at
	if t.QPS > 0 {
		s.nextS = at + s.gap()
	}
	s.issued++
	return r, true
}

// gap draws the time to the next open-loop arrival.
func (s *source) gap() float64 {
	t := s.t
	switch t.Arrival {
	case Constant:
		return 1 / t.QPS
	case Gamma:
		k := t.Burstiness
		if k == 0 {
			k = 1
		}
		return gammaVariate(s.rng, k) / (k * t.QPS)
	}
	return s.rng.ExpFloat64() / t.QPS
}

// gammaVariate draws Gamma(shape k, scale 1) by Marsaglia and Tsang's
// method (ACM TOMS 26(3), 2000), with the U^(1/k) boost for k < 1.
func gammaVariate(r *rand.Rand, k float64) float64 {
	boost := 1.0
	if k < 1 {
		boost = math.Pow(r.Float64(), 1/k)
		k++
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v * boost
		}
	}
}
