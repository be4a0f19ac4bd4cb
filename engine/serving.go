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

// vLLM's OpenAI-server defaults (EngineArgs.get_batch_defaults): the
// large tier from 70 GiB of GPU memory, A100s excepted.
const (
	vllmLargeGPUBytes         = 70 << 30
	vllmLargeMaxBatchedTokens = 8192
	vllmLargeMaxNumSeqs       = 1024
	vllmSmallMaxBatchedTokens = 2048
	vllmSmallMaxNumSeqs       = 256
)

// VLLMBatchDefaults is vLLM's default max_num_batched_tokens and
// max_num_seqs for the OpenAI server on a GPU of memBytes named name
// (EngineArgs.get_batch_defaults: 8192 and 1024 on a GPU of 70 GiB or
// more that is not an A100, else 2048 and 256). The scheduler's
// defaults and the profiling forward that sizes the KV pool both take
// them, so both read this one rule.
func VLLMBatchDefaults(memBytes int64, name string) (tokens, seqs int) {
	if memBytes >= vllmLargeGPUBytes && !containsFold(name, "a100") {
		return vllmLargeMaxBatchedTokens, vllmLargeMaxNumSeqs
	}
	return vllmSmallMaxBatchedTokens, vllmSmallMaxNumSeqs
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
