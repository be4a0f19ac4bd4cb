package serving

import (
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// Simulator runs loads against one deployment. Build it once (New) and
// call Run or the sweeps many times: the step-cost memo is shared by the
// runs (its prices do not depend on what was priced before, so a run's
// result does not either). Not safe for concurrent use.
type Simulator struct {
	d      Deployment
	engine EngineOptions // defaults filled
	coster *sim.IterationCoster
	blocks int // KV blocks per scheduler
	// budget is the KV-pool rule the blocks were sized by (zero with
	// NumGPUBlocksOverride).
	budget sim.KVBudget
	dp     int
	inst   int
	// prof is the engine whose scheduler defaults filled engine's zero
	// fields (DefaultsUsed).
	prof *engprof.Profile
	// pageFrom names the attention backend whose forced page size set
	// the block size ("" when the scheduler's default or the user's did).
	pageFrom string
	// specSeqsFrom names the speculative method whose own running-request
	// limit set max_num_seqs ("" when another rule did).
	specSeqsFrom string
	// chunkOfDP is the engine-wide step budget a DP rank's share was
	// cut from (0: no share taken).
	chunkOfDP int
	// seqsOfDP is the engine-wide running-request limit a DP rank's
	// share was taken of (DPDividesRunning; 0: none taken).
	seqsOfDP int
}

// New validates the deployment, sizes the KV pool and prepares the step
// pricing; every configuration error is reported here, before any run.
func New(d Deployment) (*Simulator, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	p, err := d.Scenario.NewPredictor()
	if err != nil {
		return nil, err
	}
	c, err := sim.NewIterationCoster(p, d.Scenario)
	if err != nil {
		return nil, err
	}
	d.Router, _ = ParseRouter(string(d.Router)) // canonical name (validate accepted it)
	prof, err := engprof.Lookup(d.Scenario.Options.Engine)
	if err != nil {
		return nil, err
	}
	eng, pageFrom, err := withBackendPage(d.Engine, p, d.Scenario, prof)
	if err != nil {
		return nil, err
	}
	s := &Simulator{d: d, engine: eng.withDefaults(d.Scenario.Topo.DeviceOf(0), &prof.Scheduler, d.Scenario.Arch.MaxModelLenTokens), coster: c,
		dp: d.Scenario.Plan.Normalized().DP, inst: max(1, d.Instances), prof: prof, pageFrom: pageFrom}
	if err := s.engine.verifyVLLMBudget(d.Engine, &prof.Scheduler, d.Scenario.Arch.MaxModelLenTokens, prof.Name()); err != nil {
		return nil, err
	}
	if s.engine.NumGPUBlocksOverride > 0 {
		// vLLM allocates the blocks it is told to; more than the GPU
		// holds beside the weights and activations fail at start-up.
		m := c.KVMemory(s.engine.MaxNumBatchedTokens, s.engine.MaxNumSeqs)
		free := float64(m.DeviceBytes - m.WeightBytes - m.ActivationBytes)
		if most := int(min(free/(m.KVBytesPerToken*float64(s.engine.BlockSize)), 1<<30)); m.KVBytesPerToken > 0 && s.engine.NumGPUBlocksOverride > most {
			want := fmt.Sprintf("want at most %d: %d blocks of %d tokens are %.1f GB of KV a GPU at %.0f B a token, and the GPU's %.1f GB less %.1f GB of weights and %.1f GB of activations holds %d",
				max(most, 0), s.engine.NumGPUBlocksOverride, s.engine.BlockSize,
				float64(s.engine.NumGPUBlocksOverride)*float64(s.engine.BlockSize)*m.KVBytesPerToken/1e9, m.KVBytesPerToken,
				float64(m.DeviceBytes)/1e9, float64(m.WeightBytes)/1e9, float64(m.ActivationBytes)/1e9, max(most, 0))
			return nil, &FieldError{Field: "engine.num_gpu_blocks_override", Want: want,
				Err: fmt.Errorf("engine: num_gpu_blocks_override = %d: %s", s.engine.NumGPUBlocksOverride, want)}
		}
		s.blocks = s.engine.NumGPUBlocksOverride
	} else {
		tokens, budget, err := c.KVCapacityTokens(s.engine.MaxNumBatchedTokens, s.engine.MaxNumSeqs)
		if err != nil {
			return nil, err
		}
		s.budget = budget
		s.blocks = int(min(tokens/int64(s.engine.BlockSize), 1<<30))
	}
	if s.blocks < 1 {
		return nil, fmt.Errorf("serving: the KV cache holds less than one block of %d tokens", s.engine.BlockSize)
	}
	s.deploymentDefaults(d, prof)
	if s.engine.MaxNumSeqs == 0 {
		// The engine's default from its pool (withDefaults left it).
		ctx := d.Scenario.Arch.MaxPositionEmbeddings
		if ctx < 1 {
			return nil, fmt.Errorf("serving: %s states no max_position_embeddings, from which %s's default max_running_requests follows: give --max-num-seqs", d.Scenario.Arch.Name, prof.Name())
		}
		s.engine.MaxNumSeqs = max(1, prof.Scheduler.DefaultMaxRunning(int64(s.blocks)*int64(s.engine.BlockSize), ctx))
	}
	// The engine sizes its CUDA-graph capture by its scheduler's limits
	// (vLLM: up to min(max_num_seqs x (1 + k) x 2, 512,
	// max_num_batched_tokens)), a scheduler's own, and by its request
	// pool, the running limit over every DP rank (SGLang under
	// speculation: its list up to max_running_requests).
	c.LimitCapture(s.engine.MaxNumSeqs, s.engine.MaxNumBatchedTokens, s.RequestPool())
	return s, nil
}

// deploymentDefaults fills the engine's defaults that depend on the
// deployment, once the pool is sized: under DP attention the ranks'
// shares (SGLang's step budget / dp and its conservativeness on the
// new-token ratio) and an engine's own running-request limit for the
// speculative method.
func (s *Simulator) deploymentDefaults(d Deployment, prof *engprof.Profile) {
	// Under DP attention an engine that shares its step budget among the
	// DP ranks (SGLang) gives each rank's scheduler budget / dp, after the
	// pool's reserve was sized by the whole budget. With chunked prefill
	// off there is no chunk to share: SGLang divides chunked_prefill_size
	// (-1 // dp_size stays -1, off) and leaves max_prefill_tokens, the
	// prefill batch's budget then, whole on every rank.
	if prof.Scheduler.DPDividesChunk && s.dp > 1 && !s.engine.DisableChunkedPrefill {
		s.chunkOfDP = s.engine.MaxNumBatchedTokens
		s.engine.MaxNumBatchedTokens = max(1, s.engine.MaxNumBatchedTokens/s.dp)
	}
	// Under DP attention SGLang scales its schedule_conservativeness, and
	// with it where its new-token ratio starts (the floor follows it).
	if f := s.engine.NewTokenRatio; f != nil && f.DPConservativeness > 0 && s.dp > 1 {
		g := *f
		g.Init *= f.DPConservativeness
		s.engine.NewTokenRatio = &g
	}
	// An engine that sets its own limit for the speculative method
	// (SGLang: 48 running requests) where the user gave none.
	if d.Engine.MaxNumSeqs == 0 {
		m := d.Scenario.Build.Spec.MethodFor(d.Scenario.Workload)
		if f, ok := prof.SpecMethod(string(m)); m != "" && ok && f.MaxRunning > 0 {
			s.engine.MaxNumSeqs, s.specSeqsFrom = f.MaxRunning, f.Name
		}
	}
	// A limit set on the server, given or the speculative method's, is
	// the engine's: under DP attention each rank's scheduler runs its
	// share (SGLang's max_running_requests // dp_size). The pool's own
	// rule, filled later, is a rank's already.
	if (d.Engine.MaxNumSeqs != 0 || s.specSeqsFrom != "") && prof.Scheduler.DPDividesRunning && s.dp > 1 {
		s.seqsOfDP = s.engine.MaxNumSeqs
		s.engine.MaxNumSeqs = max(1, s.engine.MaxNumSeqs/s.dp)
	}
}

// RequestPool is the engine's limit on running requests over every DP
// rank (SGLang's max_running_requests, its request pool): the limit each
// scheduler runs a share of where the engine divides it among its DP
// ranks, else a scheduler's own.
func (s *Simulator) RequestPool() int {
	if s.seqsOfDP > 0 {
		return s.seqsOfDP
	}
	return s.engine.MaxNumSeqs
}

// Engine returns the scheduler settings with the engine's defaults filled.
func (s *Simulator) Engine() EngineOptions { return s.engine }

// SeedDraws reports whether a run of t takes any draw from its Seed: the
// load's (Traffic.Draws) or speculative decoding's accepted drafts.
func (s *Simulator) SeedDraws(t *Traffic) bool {
	return t.Draws() || newSpecState(s.d.Scenario, t.Seed, 0) != nil
}

// DefaultsUsed names each scheduler setting the deployment left to the
// engine's default, with the value used and whose default it is: the
// engine's profile (its scheduler facts) or vLLM's rule, which fills what
// a profile does not state.
func (s *Simulator) DefaultsUsed() string {
	g, e, sc := s.d.Engine, s.engine, &s.prof.Scheduler
	own := s.prof.Name() + "'s"
	whose := func(stated bool) string {
		if stated {
			return own
		}
		return "vLLM's"
	}
	var parts []string
	if g.MaxNumSeqs == 0 || s.seqsOfDP > 0 {
		from := whose(sc.MaxSeqs > 0)
		if sc.MaxRunning != nil {
			from = own + ", from its KV pool"
		}
		if s.specSeqsFrom != "" {
			from = fmt.Sprintf("%s for %s speculative decoding", own, s.specSeqsFrom)
		}
		if g.MaxNumSeqs != 0 {
			from = own // the given limit, divided as the engine divides it
		}
		if e.seqsCapped {
			from += ", at most max_num_batched_tokens"
		}
		if s.seqsOfDP > 0 {
			from += fmt.Sprintf(": a DP rank's share, %d / %d", s.seqsOfDP, s.dp)
		}
		parts = append(parts, fmt.Sprintf("max_num_seqs %d (%s)", e.MaxNumSeqs, from))
	}
	if g.MaxNumBatchedTokens == 0 || s.chunkOfDP > 0 {
		from := whose(len(sc.ChunkTokens) > 0)
		if g.MaxNumBatchedTokens == 0 && e.FirstPromptWhole {
			from = own + " max_prefill_tokens with chunked prefill off"
		}
		if e.budgetOfModelLen {
			from += ": max_model_len with chunked prefill off"
		}
		if s.chunkOfDP > 0 {
			from = fmt.Sprintf("%s: a DP rank's share, %d / %d", own, s.chunkOfDP, s.dp)
		}
		parts = append(parts, fmt.Sprintf("max_num_batched_tokens %d (%s)", e.MaxNumBatchedTokens, from))
	}
	if g.BlockSize == 0 {
		from := whose(sc.BlockTokens > 0)
		if s.pageFrom != "" {
			from = fmt.Sprintf("%s, the page %s forces", own, s.pageFrom)
		}
		parts = append(parts, fmt.Sprintf("block_size %d (%s)", e.BlockSize, from))
	}
	if !g.DisableChunkedPrefill && !g.EnableChunkedPrefill {
		on := "on"
		if e.DisableChunkedPrefill {
			on = "off"
		}
		parts = append(parts, fmt.Sprintf("chunked prefill %s (%s)", on, whose(sc.ChunkedPrefill != nil)))
	}
	if g.Admission == "" && !g.NoSchedulerReserveFullISL {
		adm := "whole input's blocks free"
		switch f := e.NewTokenRatio; {
		case e.Admission == engprof.AdmitNewTokenRatio && f != nil:
			adm = fmt.Sprintf("input + clipped output within the free tokens less new_token_ratio %.3g..%.3g of the running outputs", f.Init, f.Init*f.MinFactor)
		case e.Admission != "":
			adm = e.Admission
		}
		parts = append(parts, fmt.Sprintf("admission %s (%s)", adm, whose(sc.Admission != "")))
	}
	return strings.Join(parts, ", ")
}

// KVBlocks is the KV pool of one scheduler in blocks of Engine().BlockSize
// tokens.
func (s *Simulator) KVBlocks() int { return s.blocks }

// KVBudget is the engine's KV-pool rule and fraction the pool was sized
// by; zero when NumGPUBlocksOverride gave the blocks.
func (s *Simulator) KVBudget() sim.KVBudget { return s.budget }

// GPUs is the number of GPUs the deployment uses (instances x plan).
func (s *Simulator) GPUs() int { return s.inst * s.d.Scenario.Plan.World() }

// Schedulers is the number of schedulers: instances x DP ranks.
func (s *Simulator) Schedulers() int { return s.inst * s.dp }

// KVDtype is the KV-cache dtype the deployment runs with.
func (s *Simulator) KVDtype() model.Dtype { return s.coster.KVDtype() }

// RequestResult is one request's outcome.
type RequestResult struct {
	Request
	// DueS is when the load wanted the request sent: its ArrivalS (when
	// it was sent) unless a concurrency cap held it in the client
	// (Traffic.Concurrency with QPS), or a session turn waited for its
	// predecessor.
	DueS        float64 `json:"due_s"`
	FirstTokenS float64 `json:"first_token_s"`
	FinishS     float64 `json:"finish_s"`
	Preemptions int     `json:"preemptions"`
	Scheduler   int     `json:"scheduler"`
}

// TTFTS is the time to first token; E2ES the end-to-end latency; TPOTS
// the time per output token after the first, (E2E - TTFT) / (output - 1),
// 0 for a one-token output (vllm bench serve's definitions).
func (r *RequestResult) TTFTS() float64 { return r.FirstTokenS - r.ArrivalS }
func (r *RequestResult) E2ES() float64  { return r.FinishS - r.ArrivalS }
func (r *RequestResult) TPOTS() float64 {
	if r.OutputTokens <= 1 {
		return 0
	}
	return (r.FinishS - r.FirstTokenS) / float64(r.OutputTokens-1)
}

// SLO is a latency objective: TTFTMs and TPOTMs (0 = none) at a
// percentile (0 = 99). A request is good when its TTFT and TPOT both meet
// the limits (goodput); a run meets the SLO when the percentile of each
// over its requests does.
type SLO struct {
	TTFTMs     float64 `json:"ttft_ms,omitempty"`
	TPOTMs     float64 `json:"tpot_ms,omitempty"`
	Percentile float64 `json:"percentile,omitempty"`
}

func (o SLO) set() bool { return o.TTFTMs > 0 || o.TPOTMs > 0 }

// IsZero reports an objective that sets no limit, whatever its
// percentile: JSON leaves it out (omitzero) rather than speak of an SLO
// nobody gave.
func (o SLO) IsZero() bool { return !o.set() }

// String is the objective as printed: "p99 TTFT <= 2000 ms, TPOT <= 50
// ms", or "none".
func (o SLO) String() string {
	var parts []string
	if o.TTFTMs > 0 {
		parts = append(parts, fmt.Sprintf("TTFT <= %g ms", o.TTFTMs))
	}
	if o.TPOTMs > 0 {
		parts = append(parts, fmt.Sprintf("TPOT <= %g ms", o.TPOTMs))
	}
	if len(parts) == 0 {
		return "none"
	}
	return fmt.Sprintf("p%g %s", o.percentile(), strings.Join(parts, ", "))
}

func (o SLO) percentile() float64 {
	if o.Percentile == 0 {
		return 99
	}
	return o.Percentile
}

func (o SLO) validate() error {
	if !(o.TTFTMs >= 0) || !(o.TPOTMs >= 0) || math.IsInf(o.TTFTMs+o.TPOTMs, 0) {
		return fmt.Errorf("slo: ttft %v ms, tpot %v ms: want finite limits >= 0 (0 = none)", o.TTFTMs, o.TPOTMs)
	}
	if o.Percentile != 0 && o.Percentile != 50 && o.Percentile != 90 && o.Percentile != 99 {
		return fmt.Errorf("slo: percentile %v: want 50, 90 or 99", o.Percentile)
	}
	return nil
}

// good reports whether one request meets both limits.
func (o SLO) good(r *RequestResult) bool {
	return (o.TTFTMs == 0 || r.TTFTS()*1e3 <= o.TTFTMs) && (o.TPOTMs == 0 || r.TPOTS()*1e3 <= o.TPOTMs)
}

// Meets reports whether a run's percentiles meet the objective.
func (o SLO) Meets(r *Result) bool {
	p := o.percentile()
	return (o.TTFTMs == 0 || r.TTFTMs.Percentile(p) <= o.TTFTMs) && (o.TPOTMs == 0 || r.TPOTMs.Percentile(p) <= o.TPOTMs)
}

// MeetsMeasured judges a measured level as Meets does a run, by the
// level's own percentile of TTFT and TPOT; known is false when a limit's
// percentile is not reported and no reported one fails. The measured
// level has no requests to count goodput by.
func (o SLO) MeetsMeasured(m *Measured) (meets, known bool) {
	stat := fmt.Sprintf("p%g", o.percentile())
	known = true
	for _, c := range []struct {
		limit float64
		got   Latency
	}{{o.TTFTMs, m.TTFTMs}, {o.TPOTMs, m.TPOTMs}} {
		if c.limit == 0 {
			continue
		}
		v := c.got.Get(stat)
		switch {
		case math.IsNaN(v):
			known = false
		case v > c.limit:
			return false, true
		}
	}
	return known, known
}

// Result is one run.
type Result struct {
	// Load describes the traffic ("qps 10 poisson", "concurrency 8",
	// "trace"); QPS and Concurrency repeat its rate or client count.
	Load        string  `json:"load"`
	QPS         float64 `json:"qps,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`

	Requests int `json:"requests"`
	// DurationS runs from time 0 (the first request) to the last
	// completion.
	DurationS float64 `json:"duration_s"`

	TTFTMs Stats `json:"ttft_ms"`
	TPOTMs Stats `json:"tpot_ms"`
	// ITLMs: gaps between consecutive tokens of a request, over every
	// token (percentiles within 0.39 %, see logHist).
	ITLMs Stats `json:"itl_ms"`
	E2EMs Stats `json:"e2e_ms"`
	// TPOTRequests counts the requests TPOT and ITL were timed over:
	// those of more than one output token (TPOT is timed over the tokens
	// after the first). 0: none was (TPOTTimed), and TPOTMs and ITLMs
	// are no figures, not times of 0: JSON null, tables "-".
	TPOTRequests int `json:"tpot_requests"`

	OutputTokensPerS       float64 `json:"output_tokens_per_s"`
	TotalTokensPerS        float64 `json:"total_tokens_per_s"` // prompt + output
	RequestsPerS           float64 `json:"requests_per_s"`
	OutputTokensPerSPerGPU float64 `json:"output_tokens_per_s_per_gpu"`
	GPUs                   int     `json:"gpus"`

	// SLO is the objective of the run (none when zero); GoodRequests meet
	// it request by request (over the whole run); GoodputRequestsPerS is
	// the rate they are served at on the window of OfferedRequestsPerS
	// and ServedRequestsPerS: the served rate times the fraction of that
	// window's requests that meet the SLO, so it never exceeds the served
	// rate (GoodRequests / DurationS when the arrivals span no time);
	// MeetsSLO: the SLO's percentiles meet it, the run is not overloaded
	// and reached steady state (TooShort). Without an SLO, JSON has none
	// of the four.
	SLO                 SLO     `json:"slo,omitzero"`
	GoodRequests        int     `json:"good_requests"`
	GoodputRequestsPerS float64 `json:"goodput_requests_per_s"`
	MeetsSLO            bool    `json:"meets_slo"`

	// MeanConcurrency is the time-average number of requests in the
	// system (arrived, not finished) over the run; MeanRunning and
	// MeanWaiting split it into those in a running batch and those queued.
	MeanConcurrency float64 `json:"mean_concurrency"`
	MeanRunning     float64 `json:"mean_running"`
	MeanWaiting     float64 `json:"mean_waiting"`

	// KV cache: blocks per scheduler, the block size, the time-average and
	// peak fraction of all blocks held, and the preemptions.
	// PromptTokens is the prompt tokens of the run's requests;
	// CachedPromptTokens those a prefix-cache hit spared computing
	// (prefix caching, prefix.go), PrefixHitFrac their ratio.
	PromptTokens       int64   `json:"prompt_tokens"`
	CachedPromptTokens int64   `json:"cached_prompt_tokens"`
	PrefixHitFrac      float64 `json:"prefix_hit_frac"`

	KVBlocks      int     `json:"kv_blocks"`
	BlockSize     int     `json:"block_size"`
	MeanKVUseFrac float64 `json:"mean_kv_use_frac"`
	PeakKVUseFrac float64 `json:"peak_kv_use_frac"`
	Preemptions   int     `json:"preemptions"`

	// Steps: engine steps run (per instance, summed); MixedSteps those
	// holding decode tokens and prefill tokens together; MeanStepMs their
	// mean duration.
	Steps      int     `json:"steps"`
	MixedSteps int     `json:"mixed_steps"`
	MeanStepMs float64 `json:"mean_step_ms"`
	// Pricing counts the step-cost memo's lookups and distinct buckets
	// priced (cumulative over the Simulator's runs).
	Pricing sim.IterationCostStats `json:"pricing"`

	// WindowOutputTokensPerS is the output rate inside the measurement
	// window of RunOptions (0 without one).
	WindowOutputTokensPerS float64 `json:"window_output_tokens_per_s,omitempty"`

	// Load against capacity, over the requests arriving in the second
	// half of the span of arrivals (the overload rule, OverloadGrowthFrac):
	// OfferedRequestsPerS is their arrival rate, ServedRequestsPerS the
	// rate they left the queue for the running batch, QueueGrowthPerS =
	// offered - served (negative while the queue drains); both read from
	// the trend of TTFT against arrival time (loadBalance). All 0 when
	// fewer than three requests arrive in that half or the arrivals span
	// no time.
	OfferedRequestsPerS float64 `json:"offered_requests_per_s"`
	ServedRequestsPerS  float64 `json:"served_requests_per_s"`
	QueueGrowthPerS     float64 `json:"queue_growth_requests_per_s"`
	// Overloaded: the queue grows by more than OverloadGrowthFrac of the
	// offered rate (QueueGrows), or, in a sweep's run, the run stayed not
	// steady (TooShort) through runs lengthened to tell (steadyRun): its
	// running batch kept growing (TPOTRises) or its end-to-end latency
	// kept pace with its length.
	// The latencies that grow then measure the run's length, not the
	// deployment: E2E always, TTFT when the queue grows, TPOT when the
	// batch does; TTFTMs, TPOTMs and E2EMs still hold this run's figures,
	// JSON writes those null, and the run does not meet an SLO (MeetsSLO
	// false).
	Overloaded bool `json:"overloaded"`
	QueueGrows bool `json:"queue_grows,omitempty"`
	// TPOTRises: over the window, the requests in the system grow by more
	// than OverloadGrowthFrac of the offered rate and the TPOT of the
	// requests completing there rises by more than that fraction of
	// itself (BatchGrowthPerS, TPOTRiseFrac; 0 when not measured: a run
	// too short, a closed loop, no window). One run cannot tell an engine
	// that falls behind from one still filling: the run is TooShort, and
	// Overloaded once the rise outlasts lengthening (steadyRun).
	TPOTRises       bool    `json:"tpot_rises,omitempty"`
	TPOTRiseFrac    float64 `json:"tpot_rise_frac"`
	BatchGrowthPerS float64 `json:"batch_growth_requests_per_s"`

	// Steady state (SteadyStateE2Es). ArrivalSpanS is the time from the
	// first request's due time to the last's. TooShort: a run whose queue
	// does not grow but that did not reach steady state: its arrivals
	// span less than MinArrivalSpanS = SteadyStateE2Es x its median
	// end-to-end latency, or its running batch still grows (TPOTRises). It
	// meets no SLO; MinRequests is about how many requests at this run's
	// rate would span that (with a margin), or twice as many for a batch
	// still growing; 0 when the arrivals span no time.
	ArrivalSpanS    float64 `json:"arrival_span_s"`
	TooShort        bool    `json:"too_short,omitempty"`
	MinArrivalSpanS float64 `json:"min_arrival_span_s,omitempty"`
	MinRequests     int     `json:"min_requests,omitempty"`

	// Timeline: TimelineWindows equal slices of [0, DurationS).
	Timeline []Window `json:"timeline"`
	// PerRequest holds every request's outcome, in issue order.
	PerRequest []RequestResult `json:"-"`
}

// The overload rule. A run is overloaded when, over the requests that
// arrive in the second half of the span of arrivals (the first half is the
// ramp-up, from an empty engine), the queue in front of the running batch
// grows by more than OverloadGrowthFrac of the offered rate, and the rise
// of time to first token that shows it stands at least overloadSigmas
// standard errors above zero (loadBalance). A deployment that carries its
// load keeps TTFT stationary however long the run, so neither holds; one
// that cannot grows TTFT in proportion to arrival time. The trend is read
// from TTFT rather than from the count of requests in the system, which
// rises through the ramp-up even when the load is carried, and over many
// requests rather than from the queue length at two instants, which
// swings with the KV cache's fill-and-preempt cycles. A closed loop's
// queue is bounded by its clients: never overloaded.
//
// A queue in front of the running batch is not the only way to fall
// behind: an engine whose batch cap and KV cache are large admits every
// arrival at once, so TTFT stays flat while the running batch itself
// grows and every step slows. Over the same window the requests in the
// system then grow by more than OverloadGrowthFrac of the offered rate
// (batchTrend) and TPOT rises by more than OverloadGrowthFrac of its mean
// (tpotTrend), each at overloadSigmas standard errors (Result.TPOTRises).
// TPOT alone is not enough: at a light load it follows every swing of the
// arrivals (a step of 10 requests costs much more than one of 2), and a
// swing is not a growth. Nor is one run: an engine whose steps slow as
// its batch grows also fills slowly, approaching its steady batch over
// about E2E x TPOT / (TPOT of a lone request), several end-to-end
// latencies (DeepSeek-V3 at TP 4 x DP 2 on B200s, 32 req/s of 1024 / 256
// tokens: the batch and TPOT still rise 8 % over the second half of 2000
// requests, and are level over 4000). A run that shows the rise is not
// steady (Result.TooShort); a sweep lengthens it, and one whose rise
// outlasts the lengthening is overloaded (steadyRun). The test is made
// only on a run whose arrivals span SteadyStateE2Es.
const (
	OverloadGrowthFrac = 0.05
	overloadSigmas     = 3
)

// SteadyStateE2Es is how many median end-to-end latencies a run's
// arrivals must span to be judged against an SLO. The engine fills from
// empty over about one end-to-end latency (a request arriving then is the
// first to find every earlier one still running), and the overload rule
// reads the second half of the arrivals: spanning four latencies puts
// that half past the ramp-up with two latencies of steady state in it. A
// shorter run's percentiles are those of a filling engine: they fall
// with the run's length below the steady state's, and a sweep judged on
// them answers more the shorter its runs (SweepQPS lengthens them).
const SteadyStateE2Es = 4

// minRequestsMargin pads Result.MinRequests against the end-to-end
// latency growing in the longer run.
const minRequestsMargin = 1.25

// MarshalJSON writes r with the latencies that grow with the run null
// when it is overloaded (E2E; TTFT when the queue grows, TPOT when it
// rises: their percentiles describe the run's length), TPOT and ITL null
// when no request was timed for them (TPOTTimed), and
// without the SLO's verdict, good requests and goodput when the run has
// no SLO (there is nothing they were judged against), and without good
// requests and goodput where the run's goodput is not judged
// (GoodputJudged).
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	out := struct {
		plain
		TTFTMs              *Stats   `json:"ttft_ms"`
		TPOTMs              *Stats   `json:"tpot_ms"`
		ITLMs               *Stats   `json:"itl_ms"`
		E2EMs               *Stats   `json:"e2e_ms"`
		GoodRequests        *int     `json:"good_requests,omitempty"`
		GoodputRequestsPerS *float64 `json:"goodput_requests_per_s,omitempty"`
		MeetsSLO            *bool    `json:"meets_slo,omitempty"`
	}{plain: plain(r)}
	if !r.QueueGrows {
		out.TTFTMs = &r.TTFTMs
	}
	if !r.TPOTUnbounded() && r.TPOTTimed() {
		out.TPOTMs = &r.TPOTMs
	}
	if r.TPOTTimed() {
		out.ITLMs = &r.ITLMs
	}
	if !r.Overloaded {
		out.E2EMs = &r.E2EMs
	}
	if r.SLO.set() {
		out.MeetsSLO = &r.MeetsSLO
	}
	if r.GoodputJudged() {
		out.GoodRequests, out.GoodputRequestsPerS = &r.GoodRequests, &r.GoodputRequestsPerS
	}
	return json.Marshal(out)
}

// GoodputJudged reports whether the run's goodput describes the box: it
// has an SLO, reached steady state (a run too short to judge holds the
// latencies of a filling engine, lower the shorter the run), and the
// latencies its SLO limits are bounded (an overloaded run's TTFT while
// its queue grows, and its TPOT while its batch grows, describe the
// run's length, and so does a count of the requests within a limit on
// them). A TPOT-only SLO still judges an overloaded run whose TPOT holds.
func (r *Result) GoodputJudged() bool {
	switch {
	case !r.SLO.set() || r.TooShort:
		return false
	case r.QueueGrows && r.SLO.TTFTMs > 0:
		return false
	case r.TPOTUnbounded() && r.SLO.TPOTMs > 0:
		return false
	}
	return true
}

// TPOTTimed reports whether any request had a token after its first to
// time TPOT and ITL by (TPOTRequests).
func (r *Result) TPOTTimed() bool { return r.TPOTRequests > 0 }

// TPOTUnbounded reports whether the run's TPOT grows with its length:
// it is overloaded and its running batch kept growing (TPOTRises).
func (r *Result) TPOTUnbounded() bool { return r.Overloaded && r.TPOTRises }

// loadBalance measures, from the requests' due times (RequestResult.DueS:
// a request a capped client held waits in the client's queue, which is
// where an open loop's overload then shows) over the judging window of OverloadGrowthFrac
// (the requests arriving in the second half of the span of arrivals), the
// offered rate, the rate the queue admits requests (served) and its
// growth, from the trend of time to first token against arrival time.
//
// A request waits in the queue for those ahead of it; when requests
// arrive at rate offered and leave the queue at rate served, the one
// arriving at t has its first token at about t x offered / served, so its
// TTFT rises with slope s = offered / served - 1 while the queue grows by
// offered - served = offered x s / (1 + s). s is the least-squares slope
// of TTFT on arrival time over the window's requests; sigmas is s over
// its standard error (how clearly the trend stands out of the requests'
// scatter). A load that is carried has no trend: s is noise around 0.
// All zero when fewer than three requests arrive in the window or the
// arrivals span no time.
func loadBalance(reqs []RequestResult) (offered, served, growth, sigmas float64) {
	a, b, ok := judgingWindow(reqs)
	if !ok {
		return 0, 0, 0, 0
	}
	var xs, ys []float64
	for i := range reqs {
		if t := reqs[i].DueS; t >= a && t <= b {
			xs, ys = append(xs, t), append(ys, reqs[i].FirstTokenS-t)
		}
	}
	slope, _, sigmas, ok := fit(xs, ys)
	if !ok {
		return 0, 0, 0, 0
	}
	offered = float64(len(xs)) / (b - a)
	// A queue emptying faster than half its arrivals' span is a
	// transient the rates cannot describe: the slope is held at -1/2
	// (served twice the offered rate) so served stays finite.
	slope = math.Max(slope, -0.5)
	served = offered / (1 + slope)
	return offered, served, offered - served, sigmas
}

// judgingWindow is the overload rule's window of due times, [a, b]: the
// second half of the span of the requests' due times; ok is false when
// there are fewer than three requests, the arrivals span no time, or
// fewer than three fall in it.
func judgingWindow(reqs []RequestResult) (a, b float64, ok bool) {
	if len(reqs) < 3 {
		return 0, 0, false
	}
	first, last := math.Inf(1), math.Inf(-1)
	for i := range reqs {
		first, last = math.Min(first, reqs[i].DueS), math.Max(last, reqs[i].DueS)
	}
	a, b = first+(last-first)/2, last
	if !(b > a) {
		return 0, 0, false
	}
	n := 0
	for i := range reqs {
		if t := reqs[i].DueS; t >= a && t <= b {
			n++
		}
	}
	return a, b, n >= 3
}

// fit is the least-squares slope of ys on xs, the mean of ys, and the
// slope over its standard error (+Inf or -Inf when every point is on the
// line); ok is false with fewer than three points or when they share one
// x.
func fit(xs, ys []float64) (slope, mean, sigmas float64, ok bool) {
	n := float64(len(xs))
	if len(xs) < 3 {
		return 0, 0, 0, false
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return 0, my, 0, false
	}
	slope = sxy / sxx
	var sse float64
	for i := range xs {
		e := ys[i] - my - slope*(xs[i]-mx)
		sse += e * e
	}
	if se := math.Sqrt(sse / (n - 2) / sxx); se > 0 {
		sigmas = slope / se
	} else if slope > 0 {
		sigmas = math.Inf(1) // every point on the line
	} else if slope < 0 {
		sigmas = math.Inf(-1)
	}
	return slope, my, sigmas, true
}

// batchTrend is how fast the requests in the system (due, not finished:
// queued, running, or held by a capped client) grow over the judging
// window [a, b], in requests per second, and that slope's standard
// errors: their count as each request of the window arrives (an arrival
// sees the system as it is on average, Poisson arrivals see time
// averages), regressed on its due time. A carried load holds it level
// however long the run; one that falls behind grows it at offered -
// served. ok false as for fit.
func batchTrend(reqs []RequestResult, a, b float64) (growth, sigmas float64, ok bool) {
	due := make([]float64, len(reqs))
	done := make([]float64, len(reqs))
	for i := range reqs {
		due[i], done[i] = reqs[i].DueS, reqs[i].FinishS
	}
	sort.Float64s(due)
	sort.Float64s(done)
	var xs, ys []float64
	for i := range reqs {
		if t := reqs[i].DueS; t >= a && t <= b {
			// Due at or before t, not finished by t.
			in := sort.Search(len(due), func(k int) bool { return due[k] > t }) - sort.Search(len(done), func(k int) bool { return done[k] > t })
			xs, ys = append(xs, t), append(ys, float64(in))
		}
	}
	growth, _, sigmas, ok = fit(xs, ys)
	return growth, sigmas, ok
}

// tpotTrend is the rise of TPOT over the requests that complete within
// the judging window [a, b] (its least-squares slope on completion time
// times b - a, over its mean there) and that slope's standard errors;
// requests of one output token have no TPOT. Completions, not arrivals:
// a request arriving late in the window completes after the arrivals
// end, in a draining engine, so TPOT by arrival time falls at the end of
// every run; the requests completing while the load still arrives are
// alike in a steady state, and slower and slower in a running batch
// that grows. ok false as for fit.
func tpotTrend(reqs []RequestResult, a, b float64) (riseFrac, sigmas float64, ok bool) {
	var xs, ys []float64
	for i := range reqs {
		if r := &reqs[i]; r.OutputTokens > 1 && r.FinishS >= a && r.FinishS <= b {
			xs, ys = append(xs, r.FinishS), append(ys, r.TPOTS())
		}
	}
	slope, mean, sigmas, ok := fit(xs, ys)
	if !ok || !(mean > 0) {
		return 0, 0, false
	}
	return slope * (b - a) / mean, sigmas, true
}

// RunOptions are the reporting choices of a run.
type RunOptions struct {
	SLO SLO
	// TimelineWindows is the number of timeline slices (0 = 60, < 0 none).
	TimelineWindows int
	// MeasureFromS and MeasureToS, when MeasureToS > MeasureFromS, set a
	// measurement window: Result.WindowOutputTokensPerS counts the tokens
	// sampled in [MeasureFromS, MeasureToS) (a benchmark's steady-state
	// rate, away from the ramp-up and the drain).
	MeasureFromS, MeasureToS float64
}

// arrival is a request on its way in: when the client sends it
// (Request.ArrivalS), when the scheduler sees it (atS: the send time
// plus the frontend's latency, Overheads.FrontendMs), the order it was
// issued in (ties), the client that sent it (-1 open loop).
type arrival struct {
	Request
	atS    float64
	seq    int
	client int
	held   bool    // was held by the client (its successor already issued)
	dueS   float64 // when the load wanted it sent (before a concurrency cap held it)
	// turnDue: a session's turn released by its predecessor's completion.
	turnDue bool
}

type arrivalHeap []arrival

func (h arrivalHeap) Len() int { return len(h) }
func (h arrivalHeap) Less(i, j int) bool {
	if h[i].atS != h[j].atS {
		return h[i].atS < h[j].atS
	}
	return h[i].seq < h[j].seq
}
func (h arrivalHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *arrivalHeap) Push(x any)   { *h = append(*h, x.(arrival)) }
func (h *arrivalHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// instance is one engine: its DP ranks' schedulers stepping together.
type instance struct {
	reps   []*replica
	busy   bool
	startS float64
	endS   float64
	rec    int // index of the current step's record
}

// run is the state of one simulation.
type run struct {
	s     *Simulator
	t     Traffic
	src   *source
	arr   arrivalHeap
	insts []*instance
	reps  []*replica // all schedulers, instance-major
	rr    int

	reqs  []*reqState
	itl   logHist
	steps []stepRecord
	seq   int

	// Requests sent but held by the client: an open loop's requests due
	// while Traffic.Concurrency are in flight (capped), and the later
	// turns of a session whose turn is in flight (by session).
	capped    []arrival
	inFlight  int
	sessBusy  map[int64]bool
	sessHeld  map[int64][]arrival
	frontendS float64
	hashTok   int

	nowS              float64
	inSystem          int
	areaInSystem      float64
	areaRun, areaWait float64
	usedBlocks        int
	peakUsed          int
	areaUsed          float64
	preempts          int
	mixed             int
	stepSum           float64
	o                 RunOptions
	windowTokens      int
}

// Run simulates the traffic and returns its result. Every request runs
// to completion. Errors: invalid traffic, or a request whose prompt and
// output exceed the model's max_model_len or cannot fit the KV pool of
// one scheduler even alone.
func (s *Simulator) Run(t Traffic, o RunOptions) (*Result, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if err := o.SLO.validate(); err != nil {
		return nil, err
	}
	if o.SLO.TPOTMs > 0 && t.OneTokenOutputs() {
		return nil, fmt.Errorf("slo: tpot %v ms: every request outputs one token, and TPOT is timed over the tokens after the first: there is none to judge", o.SLO.TPOTMs)
	}
	t.Arrival, _ = ParseArrival(string(t.Arrival)) // canonical name (Validate accepted it)
	// A request fits when its cache at the last step, prompt + output - 1
	// tokens, fits the pool: checked now for bounded lengths, at issue for
	// drawn log-normal ones.
	for i, r := range t.Requests {
		if err := s.fits(r); err != nil {
			return nil, fmt.Errorf("serving: request %d: %w", i, err)
		}
	}
	if len(t.Requests) == 0 && t.Prompt.Dist != LogNormal && t.Output.Dist != LogNormal {
		worst := Request{PromptTokens: maxLen(t.Prompt), OutputTokens: maxLen(t.Output)}
		if err := s.fits(worst); err != nil {
			return nil, fmt.Errorf("serving: the longest request of the load: %w", err)
		}
	}
	if !(o.MeasureFromS >= 0) || !(o.MeasureToS >= 0) || math.IsInf(o.MeasureToS, 0) {
		return nil, fmt.Errorf("serving: measurement window [%v, %v) s: want finite times >= 0", o.MeasureFromS, o.MeasureToS)
	}
	r := &run{s: s, t: t, src: newSource(&t), o: o, frontendS: s.d.Overheads.FrontendMs * 1e-3,
		sessBusy: map[int64]bool{}, sessHeld: map[int64][]arrival{}}
	// Prefix caching applies when requests name their blocks (hashes or
	// sessions) and the engine caches.
	if t.NamesPrefixes() && !s.engine.NoPrefixCaching {
		hashed := false
		for i := range t.Requests {
			hashed = hashed || len(t.Requests[i].HashIDs) > 0
		}
		r.hashTok = t.HashBlockTokens
		if r.hashTok == 0 {
			r.hashTok = s.engine.BlockSize
			if hashed {
				r.hashTok = defaultHashBlockTokens
			}
		}
	}
	for i := 0; i < s.inst; i++ {
		in := &instance{}
		for j := 0; j < s.dp; j++ {
			rp := newReplica(s.engine, s.blocks)
			if r.hashTok > 0 {
				rp.cache = newPrefixCache(int(int64(s.blocks) * int64(s.engine.BlockSize) / int64(r.hashTok)))
				rp.hashTokens = r.hashTok
			}
			rp.spec = newSpecState(s.d.Scenario, t.Seed, uint64(len(r.reps)))
			in.reps = append(in.reps, rp)
			r.reps = append(r.reps, rp)
		}
		r.insts = append(r.insts, in)
	}
	if err := r.loop(); err != nil {
		return nil, err
	}
	return r.result(o), nil
}

// defaultHashBlockTokens is the block of a trace's hash IDs when the
// traffic does not say: Mooncake's 512 tokens (FAST'25 release README).
const defaultHashBlockTokens = 512

func maxLen(l Lengths) int {
	if l.Dist == Uniform {
		return int(math.Round(float64(l.Mean) * (1 + l.Spread)))
	}
	return l.Mean
}

func (s *Simulator) fits(r Request) error {
	// vLLM's server refuses a request whose prompt and max_tokens exceed
	// max_model_len (serving_engine's _validate_input: "This model's
	// maximum context length is ... However, you requested ..."); the
	// benchmarks ask for exactly the output length, so no such request
	// is ever served.
	if a := s.d.Scenario.Arch; a.MaxModelLenTokens > 0 && r.PromptTokens+r.OutputTokens > a.MaxModelLenTokens {
		return fmt.Errorf("%d prompt + %d output tokens exceed the max_model_len %d %s is served at: the server refuses such a request",
			r.PromptTokens, r.OutputTokens, a.MaxModelLenTokens, a.Name)
	}
	// Without chunked prefill a prompt is scheduled whole within one
	// step's budget (admitWaiting): a longer one would wait for ever.
	if e := s.engine; e.DisableChunkedPrefill && !e.FirstPromptWhole && r.PromptTokens > e.MaxNumBatchedTokens {
		return fmt.Errorf("a %d-token prompt exceeds max_num_batched_tokens %d with chunked prefill off (%s): it is scheduled whole in one step, so it never runs; enable chunked prefill or raise the budget",
			r.PromptTokens, e.MaxNumBatchedTokens, s.prof.Name())
	}
	// Under GUARANTEED_NO_EVICT a request enters only when its whole
	// length, prompt + output, fits (admitWaiting).
	last := r.PromptTokens + r.OutputTokens - 1
	if s.engine.Admission == engprof.AdmitGuaranteedNoEvict {
		last++
	}
	need := (last + s.engine.BlockSize - 1) / s.engine.BlockSize
	if need > s.blocks {
		return fmt.Errorf("%d prompt + %d output tokens need %d KV blocks of %d tokens; a scheduler has %d (%d tokens)",
			r.PromptTokens, r.OutputTokens, need, s.engine.BlockSize, s.blocks, s.blocks*s.engine.BlockSize)
	}
	return nil
}

// issue asks the source for the next request (at nowS for a closed
// loop's client) and queues its arrival.
func (r *run) issue(nowS float64, client int) error {
	q, ok := r.src.next(nowS)
	if !ok {
		return nil
	}
	if err := r.s.fits(q); err != nil {
		return fmt.Errorf("serving: request %d: %w", r.seq, err)
	}
	heap.Push(&r.arr, arrival{Request: q, atS: q.ArrivalS + r.frontendS, seq: r.seq, client: client, dueS: q.ArrivalS})
	r.seq++
	return nil
}

// closedLoop reports whether the traffic is a closed loop of clients
// (Concurrency without QPS).
func (r *run) closedLoop() bool { return r.t.Concurrency > 0 && r.t.QPS == 0 }

// release lets a held arrival go at nowS: the client sends it then, and
// the scheduler sees it after the frontend's latency.
func (r *run) release(a arrival, nowS float64) {
	a.ArrivalS = math.Max(a.ArrivalS, nowS)
	a.atS = a.ArrivalS + r.frontendS
	heap.Push(&r.arr, a)
}

// loop is the discrete-event simulation: at each event time, steps that
// end complete (engine order), arrivals due enter their scheduler (arrival
// order), and idle engines with work start a step.
func (r *run) loop() error {
	if r.closedLoop() {
		for c := 0; c < r.t.Concurrency; c++ {
			if err := r.issue(0, c); err != nil {
				return err
			}
		}
	} else if err := r.issue(0, -1); err != nil {
		return err
	}
	for {
		next := math.Inf(1)
		if len(r.arr) > 0 {
			next = r.arr[0].atS
		}
		for _, in := range r.insts {
			if in.busy && in.endS < next {
				next = in.endS
			}
		}
		if math.IsInf(next, 1) {
			return nil
		}
		r.advance(next)
		for _, in := range r.insts {
			if in.busy && in.endS == next {
				if err := r.finishStep(in); err != nil {
					return err
				}
			}
		}
		for len(r.arr) > 0 && r.arr[0].atS <= next {
			a := heap.Pop(&r.arr).(arrival)
			if a.client < 0 && !a.held {
				// The open loop's next request (issued once per request,
				// whether this one goes in now or is held).
				if err := r.issue(a.ArrivalS, -1); err != nil {
					return err
				}
			}
			switch {
			case a.Session != 0 && r.sessBusy[a.Session] && !a.turnDue:
				// A turn follows its predecessor: it is due only then.
				a.held = true
				r.sessHeld[a.Session] = append(r.sessHeld[a.Session], a)
			case !r.closedLoop() && r.t.Concurrency > 0 && r.inFlight >= r.t.Concurrency:
				a.held = true
				r.capped = append(r.capped, a)
			default:
				r.admit(a)
			}
		}
		for _, in := range r.insts {
			if !in.busy {
				if err := r.startStep(in); err != nil {
					return err
				}
			}
		}
	}
}

// advance integrates the time-weighted figures up to t.
func (r *run) advance(t float64) {
	dt := t - r.nowS
	if dt > 0 {
		r.areaInSystem += float64(r.inSystem) * dt
		r.areaUsed += float64(r.usedBlocks) * dt
		nr, nw := 0, 0
		for _, rp := range r.reps {
			nr += len(rp.running)
			nw += rp.queued()
		}
		r.areaRun += float64(nr) * dt
		r.areaWait += float64(nw) * dt
	}
	r.nowS = t
}

// admit routes an arriving request to a scheduler's waiting queue.
func (r *run) admit(a arrival) {
	n := len(r.reps)
	k := 0
	switch r.s.d.Router {
	case LeastLoaded:
		for i := 1; i < n; i++ {
			if r.reps[i].load() < r.reps[k].load() {
				k = i
			}
		}
	default:
		k = r.rr % n
		r.rr++
	}
	q := &reqState{Request: a.Request, id: len(r.reqs), client: a.client, replica: k, dueS: a.dueS}
	if r.hashTok > 0 {
		q.hashes = a.HashIDs
		if len(q.hashes) == 0 && a.Session != 0 {
			q.hashes = sessionHashes(a.Session, a.PromptTokens, r.hashTok)
		}
	}
	if a.Session != 0 {
		r.sessBusy[a.Session] = true
	}
	r.reqs = append(r.reqs, q)
	r.reps[k].send(q)
	r.inSystem++
	r.inFlight++
}

// startStep schedules every DP rank of the instance and prices the step
// as the largest of their iterations. A step that schedules nothing
// (every rank idle, or a rank that preempted its only request) starts
// nothing; a rank that preempted is scheduled again at once.
func (r *run) startStep(in *instance) error {
	rec := stepRecord{startS: r.nowS}
	for _, rp := range in.reps {
		rp.recv()
	}
	for attempt := 0; ; attempt++ {
		scheduled, work := false, false
		var it model.Iteration
		rec.decode, rec.prefill = 0, 0
		for _, rp := range in.reps {
			if !rp.hasWork() {
				continue
			}
			work = true
			if rp.schedule() {
				rp.lastExtend = rp.it.PrefillSeqs > 0
				scheduled = true
				it = maxIteration(it, rp.it)
				rec.decode += int32(rp.it.DecodeSeqs)
				rec.prefill += int32(rp.it.PrefillTokens)
			}
			rec.preempted += int32(rp.preempted)
			r.preempts += rp.preempted
		}
		if !work {
			return nil
		}
		if !scheduled {
			if attempt < 2 {
				continue // a preemption freed blocks: schedule again
			}
			return errors.New("serving: the scheduler made no progress (no request could be scheduled)")
		}
		d, err := r.s.stepS(it)
		if err != nil {
			return err
		}
		in.busy, in.startS, in.endS = true, r.nowS, r.nowS+d
		for _, rp := range in.reps {
			rec.usedBlocks += int32(rp.usedBlocks())
			rec.running += int32(len(rp.running))
			rec.waiting += int32(rp.queued())
		}
		r.usedBlocks = 0
		for _, rp := range r.reps {
			r.usedBlocks += rp.usedBlocks()
		}
		r.peakUsed = max(r.peakUsed, r.usedBlocks)
		if it.DecodeSeqs > 0 && it.PrefillSeqs > 0 {
			r.mixed++
		}
		r.stepSum += d
		rec.endS = in.endS
		in.rec = len(r.steps)
		r.steps = append(r.steps, rec)
		return nil
	}
}

// maxIteration is the elementwise largest of two iterations: what the
// slowest DP rank needs of every kind of work.
func maxIteration(a, b model.Iteration) model.Iteration {
	return model.Iteration{
		DecodeSeqs: max(a.DecodeSeqs, b.DecodeSeqs), DecodeKVTokens: max(a.DecodeKVTokens, b.DecodeKVTokens),
		PrefillSeqs: max(a.PrefillSeqs, b.PrefillSeqs), PrefillTokens: max(a.PrefillTokens, b.PrefillTokens),
		PrefillPrefixTokens: max(a.PrefillPrefixTokens, b.PrefillPrefixTokens),
		PrefillCausalPairs:  math.Max(a.PrefillCausalPairs, b.PrefillCausalPairs),
		PrefillPrefixPairs:  math.Max(a.PrefillPrefixPairs, b.PrefillPrefixPairs),
		SpecTokens:          max(a.SpecTokens, b.SpecTokens),
	}
}

// stream sends q's tokens sampled at t to its client when the engine's
// stream interval lets them go (every token by default; else the first
// at once, then a chunk per interval of tokens, and the last at the
// end) and records the gap since the previous chunk as an inter-token
// latency, as a client timing its chunks does.
func (r *run) stream(q *reqState, t float64) {
	n := max(1, r.s.engine.StreamInterval)
	if q.streamed > 0 && q.generated-q.streamed < n && q.generated < q.OutputTokens {
		return
	}
	if q.streamed > 0 {
		r.itl.add((t - q.streamS) * 1e3)
	}
	q.streamS, q.streamed = t, q.generated
}

// finishStep completes the instance's step at its end time: tokens are
// sampled, finished requests leave (a closed loop's client sends its next
// request at once).
func (r *run) finishStep(in *instance) error {
	now := in.endS
	in.busy = false
	sampled := 0
	var finished []*reqState
	for _, rp := range in.reps {
		sampled += rp.finish(now, func(q *reqState, t float64) {
			if q.generated == 1 {
				q.firstS = t
			}
			r.stream(q, t)
			q.lastS = t
			if q.generated >= q.OutputTokens {
				finished = append(finished, q)
			}
		})
	}
	r.steps[in.rec].sampled += int32(sampled)
	if now >= r.o.MeasureFromS && now < r.o.MeasureToS {
		r.windowTokens += sampled
	}
	r.usedBlocks = 0
	for _, rp := range r.reps {
		r.usedBlocks += rp.usedBlocks()
	}
	for _, q := range finished {
		r.inSystem--
		r.inFlight--
		if q.client >= 0 {
			if err := r.issue(now, q.client); err != nil {
				return err
			}
		}
		if q.Session != 0 {
			if held := r.sessHeld[q.Session]; len(held) > 0 {
				next := held[0]
				r.sessHeld[q.Session] = held[1:]
				next.dueS = math.Max(next.ArrivalS, now+next.DelayS)
				next.turnDue = true
				r.release(next, now+next.DelayS)
			} else {
				r.sessBusy[q.Session] = false
			}
		}
		if len(r.capped) > 0 && r.inFlight < r.t.Concurrency {
			next := r.capped[0]
			r.capped = r.capped[1:]
			r.release(next, now)
		}
	}
	return nil
}

// stepS is the duration in seconds of a step forming it: sim's price with
// the deployment's overheads (Overheads.stepS).
func (s *Simulator) stepS(it model.Iteration) (float64, error) {
	us, err := s.coster.StepUs(it)
	if err != nil {
		return 0, fmt.Errorf("serving: pricing step %s: %w", it, err)
	}
	o := s.d.Overheads
	if o.IsZero() {
		return us * 1e-6, nil
	}
	decodeUs := 0.0
	hasPrefill, hasDecode := it.PrefillSeqs > 0, it.DecodeSeqs > 0
	if o.splitsParts(hasPrefill, hasDecode) {
		dec := model.Iteration{DecodeSeqs: it.DecodeSeqs, DecodeKVTokens: it.DecodeKVTokens, KVDtype: it.KVDtype}
		if decodeUs, err = s.coster.StepUs(dec); err != nil {
			return 0, fmt.Errorf("serving: pricing step %s: %w", dec, err)
		}
	}
	return o.stepS(us, decodeUs, hasPrefill, hasDecode, it.Requests()), nil
}

// result summarizes the run.
func (r *run) result(o RunOptions) *Result {
	s := r.s
	res := &Result{QPS: r.t.QPS, Concurrency: r.t.Concurrency, GPUs: s.GPUs(), SLO: o.SLO,
		KVBlocks: s.blocks, BlockSize: s.engine.BlockSize, Preemptions: r.preempts,
		Steps: len(r.steps), MixedSteps: r.mixed, Pricing: s.coster.Stats()}
	switch {
	case r.t.QPS > 0:
		res.Load = fmt.Sprintf("qps %s %s", strconv.FormatFloat(r.t.QPS, 'g', 4, 64), r.t.Arrival)
		if r.t.Arrival == Gamma {
			b := r.t.Burstiness
			if b == 0 {
				b = 1
			}
			res.Load += fmt.Sprintf(" (burstiness %g)", b)
		}
		if r.t.Concurrency > 0 {
			res.Load += fmt.Sprintf(", max concurrency %d", r.t.Concurrency)
		}
	case r.t.Concurrency > 0:
		res.Load = fmt.Sprintf("concurrency %d", r.t.Concurrency)
	default:
		res.Load = "trace"
	}
	res.Requests = len(r.reqs)
	res.PerRequest = make([]RequestResult, len(r.reqs))
	ttft := make([]float64, 0, len(r.reqs))
	tpot := make([]float64, 0, len(r.reqs))
	e2e := make([]float64, 0, len(r.reqs))
	var outTok, inTok float64
	for i, q := range r.reqs {
		rr := RequestResult{Request: q.Request, DueS: q.dueS, FirstTokenS: q.firstS, FinishS: q.lastS, Preemptions: q.preempts, Scheduler: q.replica}
		res.PerRequest[i] = rr
		res.DurationS = math.Max(res.DurationS, rr.FinishS)
		ttft = append(ttft, rr.TTFTS()*1e3)
		e2e = append(e2e, rr.E2ES()*1e3)
		if q.OutputTokens > 1 {
			tpot = append(tpot, rr.TPOTS()*1e3)
		}
		outTok += float64(q.OutputTokens)
		inTok += float64(q.PromptTokens)
		res.PromptTokens += int64(q.PromptTokens)
		res.CachedPromptTokens += int64(q.cachedTokens)
		if o.SLO.set() && o.SLO.good(&rr) {
			res.GoodRequests++
		}
	}
	res.TTFTMs, res.TPOTMs, res.E2EMs, res.ITLMs = statsOf(ttft), statsOf(tpot), statsOf(e2e), r.itl.stats()
	res.TPOTRequests = len(tpot)
	if res.PromptTokens > 0 {
		res.PrefixHitFrac = float64(res.CachedPromptTokens) / float64(res.PromptTokens)
	}
	if d := res.DurationS; d > 0 {
		res.OutputTokensPerS = outTok / d
		res.TotalTokensPerS = (outTok + inTok) / d
		res.RequestsPerS = float64(res.Requests) / d
		res.OutputTokensPerSPerGPU = res.OutputTokensPerS / float64(res.GPUs)
		res.GoodputRequestsPerS = float64(res.GoodRequests) / d
		res.MeanConcurrency = r.areaInSystem / d
		res.MeanRunning = r.areaRun / d
		res.MeanWaiting = r.areaWait / d
		res.MeanKVUseFrac = r.areaUsed / d / float64(s.blocks*len(r.reps))
	}
	res.PeakKVUseFrac = float64(r.peakUsed) / float64(s.blocks*len(r.reps))
	if res.Steps > 0 {
		res.MeanStepMs = r.stepSum / float64(res.Steps) * 1e3
	}
	var sigmas float64
	res.OfferedRequestsPerS, res.ServedRequestsPerS, res.QueueGrowthPerS, sigmas = loadBalance(res.PerRequest)
	res.QueueGrows = !r.closedLoop() && res.OfferedRequestsPerS > 0 &&
		res.QueueGrowthPerS > OverloadGrowthFrac*res.OfferedRequestsPerS && sigmas >= overloadSigmas
	// Steady state: a queue that grows has no steady state to reach, and
	// its end-to-end latency is the queue's; any other run is judged on
	// the span of its arrivals.
	first, last := math.Inf(1), math.Inf(-1)
	for i := range res.PerRequest {
		first, last = math.Min(first, res.PerRequest[i].DueS), math.Max(last, res.PerRequest[i].DueS)
	}
	if len(res.PerRequest) > 0 {
		res.ArrivalSpanS = last - first
	}
	if !res.QueueGrows && res.Requests > 0 {
		res.MinArrivalSpanS = SteadyStateE2Es * res.E2EMs.P50 * 1e-3
		short := res.ArrivalSpanS < res.MinArrivalSpanS
		if a, b, ok := judgingWindow(res.PerRequest); ok && !r.closedLoop() && !short {
			rise, riseSig, ok1 := tpotTrend(res.PerRequest, a, b)
			growth, growthSig, ok2 := batchTrend(res.PerRequest, a, b)
			if ok1 && ok2 {
				res.TPOTRiseFrac, res.BatchGrowthPerS = rise, growth
				res.TPOTRises = rise > OverloadGrowthFrac && riseSig >= overloadSigmas &&
					growth > OverloadGrowthFrac*res.OfferedRequestsPerS && growthSig >= overloadSigmas
			}
		}
		res.TooShort = short || res.TPOTRises
		switch {
		case short && res.ArrivalSpanS > 0:
			res.MinRequests = int(math.Ceil(float64(res.Requests) * res.MinArrivalSpanS / res.ArrivalSpanS * minRequestsMargin))
		case res.TPOTRises:
			res.MinRequests = 2 * res.Requests
		}
		if !short {
			res.MinArrivalSpanS = 0
		}
	}
	res.Overloaded = res.QueueGrows
	// A rate the deployment cannot carry meets no latency objective: its
	// latencies grow with the run however the percentiles of this run
	// fall; nor does a run too short to show whether it carries it.
	res.MeetsSLO = o.SLO.set() && !res.Overloaded && !res.TooShort && o.SLO.Meets(res)
	if o.SLO.set() {
		if a, b, ok := judgingWindow(res.PerRequest); ok && res.ServedRequestsPerS > 0 {
			var n, good int
			for i := range res.PerRequest {
				if t := res.PerRequest[i].DueS; t >= a && t <= b {
					n++
					if o.SLO.good(&res.PerRequest[i]) {
						good++
					}
				}
			}
			res.GoodputRequestsPerS = res.ServedRequestsPerS * float64(good) / float64(n)
		}
	}
	if w := o.MeasureToS - o.MeasureFromS; w > 0 {
		res.WindowOutputTokensPerS = float64(r.windowTokens) / w
	}
	n := o.TimelineWindows
	if n == 0 {
		n = 60
	}
	res.Timeline = timeline(r.steps, res.DurationS, n, s.blocks*len(r.reps), s.inst)
	return res
}
