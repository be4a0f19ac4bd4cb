package serving

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// EngineOptions are the scheduler's settings, named as vLLM's engine
// arguments name them. The zero value of a field means vLLM's default.
type EngineOptions struct {
	// MaxNumSeqs is max_num_seqs (SGLang's max_running_requests):
	// requests running at once per scheduler (per DP rank). 0: the
	// engine's default, its profile's scheduler.max_running from the KV
	// pool (SGLang's: min(pool tokens / 2, the request pool of 2048 to
	// 4096)), else vLLM's for the OpenAI server, 1024 on GPUs with at
	// least 70 GiB that are not A100s, else 256
	// (EngineArgs.get_batch_defaults), at most MaxNumBatchedTokens
	// (withDefaults).
	MaxNumSeqs int `json:"max_num_seqs"`
	// MaxNumBatchedTokens is max_num_batched_tokens (SGLang's
	// chunked_prefill_size): the token budget of one step. 0: the
	// engine's default for the GPU, its profile's scheduler.chunk_tokens
	// (SGLang's, by GPU memory), else vLLM's: 8192 on GPUs with at least
	// 70 GiB that are not A100s, else 2048 (same rule), the model's
	// max_model_len where larger with chunked prefill off (withDefaults).
	MaxNumBatchedTokens int `json:"max_num_batched_tokens"`
	// BlockSize is block_size: tokens per KV-cache block (0: 16).
	BlockSize int `json:"block_size"`
	// NumGPUBlocksOverride is num_gpu_blocks_override: KV blocks per
	// scheduler; 0 sizes the pool from tpscope's memory model
	// (sim.IterationCoster.KVCapacityTokens / block_size).
	NumGPUBlocksOverride int `json:"num_gpu_blocks_override,omitempty"`
	// LongPrefillTokenThreshold is long_prefill_token_threshold: a prompt
	// gets at most this many tokens per step (0: no limit).
	LongPrefillTokenThreshold int `json:"long_prefill_token_threshold,omitempty"`
	// DisableChunkedPrefill is --no-enable-chunked-prefill: a waiting
	// prompt that does not fit the step's remaining budget waits (and the
	// waiting queue with it) instead of being cut.
	DisableChunkedPrefill bool `json:"disable_chunked_prefill,omitempty"`
	// EnableChunkedPrefill is TensorRT-LLM's enable_chunked_prefill: true
	// under an engine whose default is off (its profile's
	// scheduler.chunked_prefill), which DisableChunkedPrefill otherwise
	// becomes.
	EnableChunkedPrefill bool `json:"enable_chunked_prefill,omitempty"`
	// Admission is how a waiting request is admitted ("": the engine's
	// default, its profile's scheduler.admission, else vLLM's rule above;
	// engprof.AdmitGuaranteedNoEvict: TensorRT-LLM's GUARANTEED_NO_EVICT,
	// admitWaiting).
	Admission string `json:"admission,omitempty"`
	// NewTokenRatio are the engine's new-token-ratio constants under
	// engprof.AdmitNewTokenRatio (SGLang's), from its profile
	// (withDefaults); not an option of its own.
	NewTokenRatio *engprof.NewTokenRatioFacts `json:"-"`
	// FirstPromptWhole: with chunked prefill off, the first waiting prompt
	// of a step is admitted whole whatever the budget (SGLang's
	// PrefillAdder, its profile's scheduler.max_prefill_tokens); not an
	// option of its own.
	FirstPromptWhole bool `json:"-"`
	// NoSchedulerReserveFullISL is --no-scheduler-reserve-full-isl. By
	// default (vLLM since 2026, SchedulerConfig.scheduler_reserve_full_isl)
	// a waiting request is admitted only when the blocks of its whole
	// input (prompt, plus the output of a preempted request) are free, not
	// just those of its first chunk.
	NoSchedulerReserveFullISL bool `json:"no_scheduler_reserve_full_isl,omitempty"`
	// Watermark is --watermark (SchedulerConfig.watermark, vLLM PR 44594):
	// the fraction of all blocks kept free when admitting a waiting or
	// preempted request while others run, so running requests can grow
	// into it instead of preempting the newly admitted (0 = off, vLLM's
	// default).
	Watermark float64 `json:"watermark,omitempty"`
	// Policy is the scheduling policy of the engine being modelled ("" =
	// vLLM v1's; see Policy).
	Policy Policy `json:"policy,omitempty"`
	// NoPrefixCaching is --no-enable-prefix-caching: requests that carry
	// prefix-block hashes (Request.HashIDs, sessions) reuse nothing. vLLM
	// v1 caches prefixes by default (CacheConfig.enable_prefix_caching).
	NoPrefixCaching bool `json:"no_prefix_caching,omitempty"`
	// SchedulerRecvInterval is SGLang's --scheduler-recv-interval (PolicySGLang
	// only; 0 or 1: its default, every iteration): the scheduler reads new
	// requests from its socket only when a counter, raised each iteration
	// by the weight of the batch it last ran, reaches it (recvWeight), so a
	// request may wait that many decode steps before it is seen.
	SchedulerRecvInterval int `json:"scheduler_recv_interval,omitempty"`
	// StreamInterval is the engines' --stream-interval (0 or 1: every
	// token): a request's first token goes out at once, then one chunk per
	// this many tokens and the last at its end (SGLang's output streamer,
	// len(output_ids) % interval == 1; vLLM's OutputProcessor), so the
	// client's inter-token latency measures chunks.
	StreamInterval int `json:"stream_interval,omitempty"`

	// budgetOfModelLen: vLLM's rule gave the step budget the model's
	// max_model_len, chunked prefill being off (withDefaults).
	budgetOfModelLen bool
	// seqsCapped: vLLM's rule cut its default max_num_seqs to the step
	// budget (withDefaults).
	seqsCapped bool
}

// SGLang's iteration weights toward the receive interval
// (python/sglang/srt/managers/scheduler_components/recv_skipper.py with
// environ.py's SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_*): a decode batch
// (and a speculative verify) or an idle iteration adds 1; any other
// batch, an extend (prefill, alone or mixed), adds the default 1000, so
// the iteration after a prefill always reads the socket.
const (
	recvWeightDecode = 1
	recvWeightExtend = 1000
)

// Policy is how a scheduler forms a step out of its running and waiting
// requests.
type Policy string

const (
	// PolicyVLLM is vLLM v1's Scheduler.schedule
	// (vllm/v1/core/sched/scheduler.py): one token budget per step spent
	// first on the running requests (decode tokens, the next chunk of a
	// prompt being prefilled), then on waiting ones; decode and prefill
	// share a step (chunked prefill).
	PolicyVLLM Policy = "vllm"
	// PolicySGLang is SGLang's Scheduler.get_next_batch_to_run
	// (python/sglang/srt/managers/scheduler.py) without
	// --enable-mixed-chunk: a step is a prefill batch whenever a prompt
	// waits (the chunked request first, then the waiting queue in order,
	// up to chunked_prefill_size tokens, here MaxNumBatchedTokens, and
	// max_running_requests, here MaxNumSeqs), else a decode batch of
	// every running request. Prefill runs before decode, so a new
	// request's first token is not held behind decode steps, and running
	// requests pause while a prompt is prefilled.
	PolicySGLang Policy = "sglang"
)

// ParsePolicy accepts vllm and sglang ("" is vllm).
func ParsePolicy(s string) (Policy, error) {
	switch Policy(strings.ToLower(s)) {
	case "", PolicyVLLM, "vllm-v1":
		return PolicyVLLM, nil
	case PolicySGLang:
		return PolicySGLang, nil
	}
	return "", fmt.Errorf("scheduling policy %q: want vllm or sglang", s)
}

// Defaults of EngineOptions (vLLM's EngineArgs.get_batch_defaults for the
// OpenAI API server, and CacheConfig's block size).
const (
	defaultBlockSize       = 16
	maxEngineOptionsBudget = 1 << 20
)

// withBackendPage is o with the KV block size the engine runs for sc's
// MLA model on p's engine (engprof.KVPage: SGLang's flashmla, trtllm_mla
// and DSA pages, vLLM's FlashMLA, FlashInfer-MLA, CUTLASS_MLA and sparse
// ones) where o gives none and the engine's default block (sched's, else
// vLLM's 16) is one it changes, and the backend whose page that is (""
// when the default stands). A block size o gives that the engine would
// change is an error: the engine runs another one, with a log line. The
// simulation and the origin of fitted overheads both size blocks through
// it.
func withBackendPage(o EngineOptions, p *sim.Predictor, sc sim.Scenario, prof *engprof.Profile) (EngineOptions, string, error) {
	if p == nil || prof == nil {
		return o, "", nil
	}
	page := p.KVPage(sc)
	if o.BlockSize != 0 {
		if runs, of := page.Force(o.BlockSize); runs != o.BlockSize {
			want := fmt.Sprintf("want %d, or the engine's own: %s forces %s's KV page of %d tokens here, replacing a block size of %d (with a log line)",
				runs, prof.Name(), of, runs, o.BlockSize)
			return o, "", &FieldError{Field: "engine.block_size", Want: want, Err: fmt.Errorf("engine: block_size = %d: %s", o.BlockSize, want)}
		}
		return o, "", nil
	}
	def := defaultBlockSize
	if prof.Scheduler.BlockTokens > 0 {
		def = prof.Scheduler.BlockTokens
	}
	runs, of := page.Force(def)
	if of == "" {
		return o, "", nil
	}
	o.BlockSize = runs
	return o, of, nil
}

// withDefaults fills the zero fields for device dev under the engine
// whose scheduler facts are sched (the profile's defaults where it states
// them, vLLM's where not), for a model served at maxModelLen tokens (0:
// not known).
//
// vLLM's rule is EngineArgs._set_default_max_num_seqs_and_batched_tokens_args
// (vllm/engine/arg_utils.py): the step budget left unset is the usage
// context's default (get_batch_defaults: the OpenAI server's 8192 or
// 2048), max(max_model_len, that) with chunked prefill off (a prompt is
// scheduled whole, and SchedulerConfig.verify_max_model_len refuses a
// budget below max_model_len then), at most max_num_seqs x max_model_len;
// a max_num_seqs left unset is then at most the budget
// (verify_max_model_len refuses a budget below max_num_seqs).
func (o EngineOptions) withDefaults(dev *topology.Device, sched *engprof.SchedulerFacts, maxModelLen int) EngineOptions {
	var def engprof.Batch
	if dev != nil {
		def, _ = sched.DefaultBatch(dev.MemBytes, dev.Name)
	} else {
		def, _ = sched.DefaultBatch(0, "")
	}
	defTokens, defSeqs := def.MaxNumBatchedTokens, def.MaxNumSeqs
	if sched != nil {
		// The engine's own fixed defaults (TensorRT-LLM's max_batch_size,
		// tokens_per_block, enable_chunked_prefill, capacity policy).
		if o.MaxNumSeqs == 0 {
			o.MaxNumSeqs = sched.MaxSeqs
		}
		if o.BlockSize == 0 {
			o.BlockSize = sched.BlockTokens
		}
		if sched.ChunkedPrefill != nil && !*sched.ChunkedPrefill && !o.EnableChunkedPrefill {
			o.DisableChunkedPrefill = true
		}
		if o.Admission == "" {
			o.Admission = sched.Admission
		}
		if o.Admission == engprof.AdmitNewTokenRatio && o.NewTokenRatio == nil {
			o.NewTokenRatio = sched.NewTokenRatio
		}
	}
	// An engine whose default depends on the KV pool (SGLang) fills it
	// once the pool is sized (Simulator.New).
	vllmSeqs := o.MaxNumSeqs == 0 && (sched == nil || sched.MaxRunning == nil)
	if vllmSeqs {
		o.MaxNumSeqs = defSeqs
	}
	if sched != nil && sched.MaxPrefillTokens > 0 && o.DisableChunkedPrefill {
		// Chunking off: the prefill batch's own budget, its first prompt
		// whole (SGLang's --max-prefill-tokens).
		if o.MaxNumBatchedTokens == 0 {
			o.MaxNumBatchedTokens = sched.MaxPrefillTokens
		}
		o.FirstPromptWhole = true
	}
	if o.MaxNumBatchedTokens == 0 && dev != nil && sched != nil {
		o.MaxNumBatchedTokens = sched.DefaultChunkTokens(dev.MemBytes)
	}
	if o.MaxNumBatchedTokens == 0 {
		o.MaxNumBatchedTokens = defTokens
		if o.DisableChunkedPrefill && maxModelLen > o.MaxNumBatchedTokens {
			o.MaxNumBatchedTokens, o.budgetOfModelLen = maxModelLen, true
		}
		if maxModelLen > 0 && o.MaxNumSeqs > 0 {
			o.MaxNumBatchedTokens = int(min(int64(o.MaxNumSeqs)*int64(maxModelLen), int64(o.MaxNumBatchedTokens)))
		}
	}
	if vllmSeqs && o.MaxNumSeqs > o.MaxNumBatchedTokens {
		o.MaxNumSeqs, o.seqsCapped = o.MaxNumBatchedTokens, true
	}
	if o.BlockSize == 0 {
		o.BlockSize = defaultBlockSize
	}
	o.Policy, _ = ParsePolicy(string(o.Policy))
	return o
}

// vllmRule reports whether the engine whose scheduler facts are sched
// takes vLLM's rule for its step budget and running limit (its profile
// states scheduler.batch_defaults).
func vllmRule(sched *engprof.SchedulerFacts) bool {
	_, ok := sched.DefaultBatch(0, "")
	return ok
}

// verifyVLLMBudget refuses what vLLM refuses at start-up
// (vllm/config/scheduler.py SchedulerConfig.verify_max_model_len) for a
// resolved o under vLLM's rule: a step budget below max_num_seqs, and
// with chunked prefill off a budget below the model's max_model_len (a
// prompt is scheduled whole). given is the deployment's own options, to
// name the flag that set the value: the budget where given, else the
// running limit.
func (o EngineOptions) verifyVLLMBudget(given EngineOptions, sched *engprof.SchedulerFacts, maxModelLen int, engine string) error {
	if !vllmRule(sched) {
		return nil
	}
	field, name := "engine.max_num_seqs", "max_num_seqs"
	if given.MaxNumBatchedTokens != 0 {
		field, name = "engine.max_num_batched_tokens", "max_num_batched_tokens"
	}
	if o.MaxNumBatchedTokens < o.MaxNumSeqs {
		want := fmt.Sprintf("want max_num_batched_tokens (%d) at least max_num_seqs (%d): %s refuses a step budget below its running limit at start-up", o.MaxNumBatchedTokens, o.MaxNumSeqs, engine)
		return &FieldError{Field: field, Want: want, Err: fmt.Errorf("engine: %s: %s", name, want)}
	}
	if o.DisableChunkedPrefill && maxModelLen > 0 && o.MaxNumBatchedTokens < maxModelLen {
		field, name = "engine.max_num_batched_tokens", "max_num_batched_tokens"
		want := fmt.Sprintf("want max_num_batched_tokens (%d) at least the model's max_model_len (%d) with chunked prefill off: %s schedules a prompt whole and refuses a smaller budget at start-up; enable chunked prefill or raise the budget", o.MaxNumBatchedTokens, maxModelLen, engine)
		return &FieldError{Field: field, Want: want, Err: fmt.Errorf("engine: %s: %s", name, want)}
	}
	return nil
}

// Extras are the scheduler's settings beyond the step budgets and the
// block size, each where o sets one (a resolved o: the engine's defaults
// included), in words: "long_prefill_token_threshold 512", "chunked
// prefill off", "admission on the first chunk's blocks", "watermark
// 0.05", "prefix caching off", "scheduler_recv_interval 30",
// "stream_interval 10". An engine line names them beside the others.
func (o EngineOptions) Extras() []string {
	var parts []string
	if o.LongPrefillTokenThreshold > 0 {
		parts = append(parts, fmt.Sprintf("long_prefill_token_threshold %d", o.LongPrefillTokenThreshold))
	}
	if o.DisableChunkedPrefill {
		parts = append(parts, "chunked prefill off")
	}
	if o.NoSchedulerReserveFullISL {
		parts = append(parts, "admission on the first chunk's blocks")
	}
	if o.Watermark > 0 {
		parts = append(parts, "watermark "+strconv.FormatFloat(o.Watermark, 'g', -1, 64))
	}
	if o.NoPrefixCaching {
		parts = append(parts, "prefix caching off")
	}
	if o.SchedulerRecvInterval > 1 {
		parts = append(parts, fmt.Sprintf("scheduler_recv_interval %d", o.SchedulerRecvInterval))
	}
	if o.StreamInterval > 1 {
		parts = append(parts, fmt.Sprintf("stream_interval %d", o.StreamInterval))
	}
	return parts
}

// Label is the scheduler's settings on device dev under the engine whose
// scheduler facts are sched, for a model served at maxModelLen tokens (0:
// not known), as the flags name them, its defaults resolved (so that 0
// and the default it stands for read alike): the budgets and block size
// always, the others where set. A running-request limit the engine
// derives from its KV pool (SGLang) reads "kv-pool".
func (o EngineOptions) Label(dev *topology.Device, sched *engprof.SchedulerFacts, maxModelLen int) string {
	o = o.withDefaults(dev, sched, maxModelLen)
	seqs := strconv.Itoa(o.MaxNumSeqs)
	if o.MaxNumSeqs == 0 {
		seqs = "kv-pool"
	}
	parts := []string{"max-num-seqs=" + seqs, fmt.Sprintf("max-num-batched-tokens=%d", o.MaxNumBatchedTokens), fmt.Sprintf("block-size=%d", o.BlockSize)}
	for _, c := range []struct {
		name string
		v    int
	}{{"num-gpu-blocks-override", o.NumGPUBlocksOverride}, {"long-prefill-token-threshold", o.LongPrefillTokenThreshold},
		{"scheduler-recv-interval", o.SchedulerRecvInterval}, {"stream-interval", o.StreamInterval}} {
		// 0 is the default; 1 is every step or token, the same default.
		if c.v > 1 || c.v == 1 && !strings.HasSuffix(c.name, "interval") {
			parts = append(parts, fmt.Sprintf("%s=%d", c.name, c.v))
		}
	}
	for _, c := range []struct {
		name string
		on   bool
	}{{"no-enable-chunked-prefill", o.DisableChunkedPrefill}, {"no-scheduler-reserve-full-isl", o.NoSchedulerReserveFullISL}, {"no-enable-prefix-caching", o.NoPrefixCaching}} {
		if c.on {
			parts = append(parts, c.name)
		}
	}
	if o.Watermark > 0 {
		parts = append(parts, "watermark="+strconv.FormatFloat(o.Watermark, 'g', -1, 64))
	}
	return strings.Join(parts, " ")
}

// Validate checks the options; the error names the field (vLLM's name).
func (o EngineOptions) Validate() error {
	check := func(name string, v, lo, hi int) error {
		if v != 0 && (v < lo || v > hi) {
			return fmt.Errorf("engine: %s = %d: want %d to %d (0 = the engine's default)", name, v, lo, hi)
		}
		return nil
	}
	var wm, pol error
	if !(o.Watermark >= 0 && o.Watermark < 1) {
		wm = fmt.Errorf("engine: watermark = %v: want a fraction in [0, 1)", o.Watermark)
	}
	if o.EnableChunkedPrefill && o.DisableChunkedPrefill {
		wm = errors.Join(wm, fmt.Errorf("engine: enable_chunked_prefill and disable_chunked_prefill both set: want one"))
	}
	switch {
	case o.Admission == "", o.Admission == engprof.AdmitGuaranteedNoEvict:
	case o.Admission == engprof.AdmitNewTokenRatio && o.NewTokenRatio != nil:
	case o.Admission == engprof.AdmitNewTokenRatio:
		wm = errors.Join(wm, fmt.Errorf("engine: admission %s without the engine's new-token-ratio constants", o.Admission))
	default:
		wm = errors.Join(wm, fmt.Errorf("engine: admission %q: want %s, %s or none (vLLM's)", o.Admission, engprof.AdmitGuaranteedNoEvict, engprof.AdmitNewTokenRatio))
	}
	if p, err := ParsePolicy(string(o.Policy)); err != nil {
		pol = fmt.Errorf("engine: %w", err)
	} else if o.SchedulerRecvInterval > 1 && p != PolicySGLang {
		pol = fmt.Errorf("engine: scheduler_recv_interval = %d: SGLang's option; the %s scheduler reads its requests every step (want 0 or 1)", o.SchedulerRecvInterval, p)
	}
	return errors.Join(
		wm, pol,
		check("max_num_seqs", o.MaxNumSeqs, 1, 1<<16),
		check("max_num_batched_tokens", o.MaxNumBatchedTokens, 1, maxEngineOptionsBudget),
		check("block_size", o.BlockSize, 1, 1024),
		check("num_gpu_blocks_override", o.NumGPUBlocksOverride, 1, 1<<30),
		check("long_prefill_token_threshold", o.LongPrefillTokenThreshold, 1, maxEngineOptionsBudget),
		check("scheduler_recv_interval", o.SchedulerRecvInterval, 1, 1<<20),
		check("stream_interval", o.StreamInterval, 1, 1<<20),
	)
}

// Router spreads requests over schedulers (engine instances x DP ranks).
type Router string

const (
	// RoundRobin sends request i to scheduler i mod n.
	RoundRobin Router = "round-robin"
	// LeastLoaded sends a request to the scheduler with the lowest
	// 4 x waiting + running (vLLM's DP load balancer score), the first one
	// on a tie.
	LeastLoaded Router = "least-loaded"
)

// ParseRouter accepts round-robin and least-loaded ("" is round-robin).
func ParseRouter(s string) (Router, error) {
	switch Router(strings.ToLower(s)) {
	case "", RoundRobin, "roundrobin", "rr":
		return RoundRobin, nil
	case LeastLoaded, "leastloaded", "ll":
		return LeastLoaded, nil
	}
	return "", fmt.Errorf("router %q: want round-robin or least-loaded", s)
}

// Deployment is what serves the requests: a model laid out by a plan on
// a box, under run-time options and the engine's scheduler settings.
type Deployment struct {
	// Scenario gives the architecture, plan, build options, KV dtype
	// (Workload.KVDtype), run-time options, box and cost source; its
	// batch, context and phase are not used: the scheduler forms the
	// steps.
	Scenario sim.Scenario
	Engine   EngineOptions
	// Instances is the number of engine instances, each its own copy of
	// the plan on its own GPUs (0 = 1). Every instance is priced as if on
	// the topology's first GPUs: on a box whose GPU groups differ, the
	// others may run faster or slower.
	Instances int
	// Router spreads requests over instances and DP ranks ("" =
	// round-robin).
	Router Router
	// Overheads are the engine's costs outside the GPU step that sim
	// prices (zero: none; calibrate --serving fits them).
	Overheads Overheads
}

// MaxInstances bounds a deployment's engine instances.
const MaxInstances = 1024

// validate checks the deployment before any work; errors name the field.
func (d *Deployment) validate() error {
	if d.Scenario.Topo == nil {
		return errors.New("serving: deployment has no topology")
	}
	if d.Scenario.Arch == nil {
		return errors.New("serving: deployment has no model")
	}
	if d.Instances < 0 || d.Instances > MaxInstances {
		return fmt.Errorf("serving: instances = %d: want 1 to %d (0 = 1)", d.Instances, MaxInstances)
	}
	if _, err := ParseRouter(string(d.Router)); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	if err := d.Engine.Validate(); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	if err := d.Overheads.Validate(); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	if err := d.Scenario.Plan.Validate(d.Scenario.Arch); err != nil {
		return err
	}
	world := d.Scenario.Plan.World()
	if n := max(1, d.Instances) * world; n > d.Scenario.Topo.NumGPUs() {
		return fmt.Errorf("serving: %d instances of plan %s need %d GPUs; topology %s has %d",
			max(1, d.Instances), d.Scenario.Plan.Normalized(), n, d.Scenario.Topo.Name, d.Scenario.Topo.NumGPUs())
	}
	if dcp := d.Scenario.Plan.Normalized().DCP; dcp > 1 {
		return &model.PlanError{What: "plan", Field: "dcp", Value: fmt.Sprint(dcp),
			Want: "1: decode context parallelism is modelled for decode steps only, and a served request needs prefill steps"}
	}
	return nil
}
