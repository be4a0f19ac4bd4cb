package engine

import (
	"fmt"
	"strings"
)

// MiB is the unit SGLang sizes its memory in (nvidia-smi's memory.total,
// server_args' gpu_mem).
const MiB = 1 << 20

// MemTier is one step of a default chosen by the GPU's memory: it applies
// to a GPU of less than BelowMiB (0: any larger GPU, the last tier).
type MemTier struct {
	BelowMiB int64 `yaml:"below_mib"`
	Tokens   int   `yaml:"tokens"`
}

// tierFor is the first tier the memory falls in (tiers are increasing
// and the last one is open); 0 when there are none.
func tierFor(tiers []MemTier, memBytes int64) int {
	mib := memBytes / MiB
	for _, t := range tiers {
		if t.BelowMiB == 0 || mib < t.BelowMiB {
			return t.Tokens
		}
	}
	return 0
}

// DefaultChunkTokens is the engine's default step token budget on a GPU
// of memBytes (SGLang's chunked_prefill_size by GPU memory); 0 when the
// profile states none (the serving simulation's built-in vLLM rule).
func (s *SchedulerFacts) DefaultChunkTokens(memBytes int64) int {
	return tierFor(s.ChunkTokens, memBytes)
}

// BatchDefaultFacts are vLLM's max_num_batched_tokens and max_num_seqs
// where the user sets neither (EngineArgs.get_batch_defaults for the
// OpenAI server, vllm serve): Large on a GPU of LargeFromGiB or more of
// memory whose name contains none of LargeExcept, else Small. The
// scheduler's defaults and the profiling forward that sizes the KV pool
// both take them, so both read this one rule.
type BatchDefaultFacts struct {
	LargeFromGiB int64    `yaml:"large_from_gib"`
	LargeExcept  []string `yaml:"large_except"`
	Large        Batch    `yaml:"large"`
	Small        Batch    `yaml:"small"`
	Cite         []string `yaml:"cite"`
}

// Batch is a pair of vLLM's scheduler limits: the step's token budget
// and the running requests.
type Batch struct {
	MaxNumBatchedTokens int `yaml:"max_num_batched_tokens"`
	MaxNumSeqs          int `yaml:"max_num_seqs"`
}

// For is the pair on a GPU of memBytes named name (vLLM compares the
// name lowercased: "a100" not in device_name.lower()).
func (b *BatchDefaultFacts) For(memBytes int64, name string) Batch {
	if memBytes < b.LargeFromGiB<<30 {
		return b.Small
	}
	for _, x := range b.LargeExcept {
		if containsFold(name, x) {
			return b.Small
		}
	}
	return b.Large
}

// DefaultBatch is the engine's default scheduler limits on a GPU of
// memBytes named name where its profile states vLLM's rule
// (scheduler.batch_defaults); ok is false for an engine whose defaults
// are stated otherwise (chunk_tokens, max_seqs, max_running).
func (s *SchedulerFacts) DefaultBatch(memBytes int64, name string) (b Batch, ok bool) {
	if s == nil || s.BatchDefaults == nil {
		return Batch{}, false
	}
	return s.BatchDefaults.For(memBytes, name), true
}

// MaxRunningFacts are SGLang's default max_running_requests, from its KV
// pool: min(pool tokens / KVTokensPerRequest, the request pool), the
// request pool min(max(pool tokens / context_len x PoolPerContext,
// PoolMin), PoolMax).
type MaxRunningFacts struct {
	KVTokensPerRequest int `yaml:"kv_tokens_per_request"`
	PoolPerContext     int `yaml:"pool_per_context"`
	PoolMin            int `yaml:"pool_min"`
	PoolMax            int `yaml:"pool_max"`
}

// DefaultMaxRunning is the engine's default limit on running requests for
// a KV pool of kvTokens and a model of contextLen tokens; 0 when the
// profile states none (the serving simulation's vLLM rule).
func (s *SchedulerFacts) DefaultMaxRunning(kvTokens int64, contextLen int) int {
	m := s.MaxRunning
	if m == nil || contextLen < 1 {
		return 0
	}
	pool := min(max(int(float64(kvTokens)/float64(contextLen)*float64(m.PoolPerContext)), m.PoolMin), m.PoolMax)
	return int(min(kvTokens/int64(m.KVTokensPerRequest), int64(pool)))
}

// validateServing checks the scheduler defaults.
func (p *Profile) validateServing(bad func(field, format string, a ...any) error, cite func(string, []string) error) error {
	if err := p.validateBatchDefaults(bad, cite); err != nil {
		return err
	}
	var last int64
	for i, t := range p.Scheduler.ChunkTokens {
		f := fmt.Sprintf("scheduler.chunk_tokens[%d]", i)
		open := t.BelowMiB == 0
		if t.Tokens < 1 || t.BelowMiB < 0 || (!open && t.BelowMiB <= last) || open != (i == len(p.Scheduler.ChunkTokens)-1) {
			return bad(f, "{below_mib: %d, tokens: %d}: want tokens >= 1 and below_mib increasing, 0 (any larger GPU) on the last tier only", t.BelowMiB, t.Tokens)
		}
		last = t.BelowMiB
	}
	sc := p.Scheduler
	if sc.MaxSeqs < 0 || sc.BlockTokens < 0 || (sc.MaxSeqs > 0 && sc.MaxRunning != nil) {
		return bad("scheduler", "max_seqs %d, block_tokens %d: want counts >= 0, and max_seqs or max_running, not both", sc.MaxSeqs, sc.BlockTokens)
	}
	if sc.MaxPrefillTokens < 0 {
		return bad("scheduler.max_prefill_tokens", "%d: want a count of tokens (0: the step budget holds)", sc.MaxPrefillTokens)
	}
	switch sc.Admission {
	case "", AdmitGuaranteedNoEvict:
		if sc.NewTokenRatio != nil {
			return bad("scheduler.new_token_ratio", "stated with admission %q: want admission %s", sc.Admission, AdmitNewTokenRatio)
		}
	case AdmitNewTokenRatio:
		r := sc.NewTokenRatio
		if r == nil || !(r.Init > 0 && r.Init <= 1) || !(r.MinFactor > 0 && r.MinFactor <= 1) || r.DecaySteps < 1 || r.ClipMaxNewTokens < 1 || r.RetractDecodeSteps < 0 || !(r.DPConservativeness >= 0 && r.DPConservativeness <= 1) {
			return bad("scheduler.new_token_ratio", "want init and min_factor in (0, 1], decay_steps and clip_max_new_tokens >= 1, retract_decode_steps >= 0, dp_conservativeness in [0, 1] (admission %s)", AdmitNewTokenRatio)
		}
	default:
		return bad("scheduler.admission", "%q: want %s, %s or none (vLLM's)", sc.Admission, AdmitGuaranteedNoEvict, AdmitNewTokenRatio)
	}
	if m := p.Scheduler.MaxRunning; m != nil && (m.KVTokensPerRequest < 1 || m.PoolPerContext < 1 || m.PoolMin < 1 || m.PoolMax < m.PoolMin) {
		return bad("scheduler.max_running", "%+v: want kv_tokens_per_request, pool_per_context and pool_min >= 1, pool_max >= pool_min", *m)
	}
	return nil
}

// containsFold reports whether sub is in s, ignoring case, without the
// copy strings.ToLower makes (a plan sweep sizes a pool a configuration).
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// validateBatchDefaults checks vLLM's batch defaults: both pairs of
// counts >= 1, a memory threshold, and the rule stated alone, as the
// budget and running limit of an engine that serves; an engine that
// serves with none states its budget by chunk_tokens.
func (p *Profile) validateBatchDefaults(bad func(field, format string, a ...any) error, cite func(string, []string) error) error {
	sc := &p.Scheduler
	b := sc.BatchDefaults
	if b == nil {
		if p.Serves() && len(sc.ChunkTokens) == 0 {
			return bad("scheduler", "states no default step budget: want batch_defaults (vLLM's rule) or chunk_tokens")
		}
		return nil
	}
	if !p.Serves() {
		return bad("scheduler.batch_defaults", "stated for an engine that serves no requests (no scheduler.policy): leave it out")
	}
	if len(sc.ChunkTokens) > 0 || sc.MaxRunning != nil || sc.MaxSeqs > 0 || sc.MaxPrefillTokens > 0 {
		return bad("scheduler.batch_defaults", "stated beside chunk_tokens, max_running, max_seqs or max_prefill_tokens: want vLLM's rule alone or the others")
	}
	if b.LargeFromGiB < 1 {
		return bad("scheduler.batch_defaults.large_from_gib", "%d: want the GPU memory, GiB, from which the large pair holds (vLLM: 70)", b.LargeFromGiB)
	}
	for _, c := range []struct {
		field string
		v     Batch
	}{{"large", b.Large}, {"small", b.Small}} {
		if c.v.MaxNumBatchedTokens < 1 || c.v.MaxNumSeqs < 1 {
			return bad("scheduler.batch_defaults."+c.field, "{max_num_batched_tokens: %d, max_num_seqs: %d}: want both counts >= 1", c.v.MaxNumBatchedTokens, c.v.MaxNumSeqs)
		}
	}
	for i, x := range b.LargeExcept {
		if strings.TrimSpace(x) == "" {
			return bad(fmt.Sprintf("scheduler.batch_defaults.large_except[%d]", i), "empty: want a part of a GPU's name (vLLM: a100)")
		}
	}
	return cite("scheduler.batch_defaults", b.Cite)
}
