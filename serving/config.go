package serving

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// EngineOptions are the scheduler's settings, named as vLLM's engine
// arguments name them. The zero value of a field means vLLM's default.
type EngineOptions struct {
	// MaxNumSeqs is max_num_seqs: requests running at once per scheduler
	// (per DP rank). 0: vLLM's default for the OpenAI server, 1024 on GPUs
	// with at least 70 GiB that are not A100s, else 256
	// (EngineArgs.get_batch_defaults).
	MaxNumSeqs int `json:"max_num_seqs"`
	// MaxNumBatchedTokens is max_num_batched_tokens: the token budget of
	// one step. 0: 8192 on GPUs with at least 70 GiB that are not A100s,
	// else 2048 (same rule).
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
}

// Defaults of EngineOptions (vLLM's EngineArgs.get_batch_defaults for the
// OpenAI API server, and CacheConfig's block size).
const (
	defaultBlockSize       = 16
	largeGPUBytes          = 70 << 30
	largeMaxNumSeqs        = 1024
	largeMaxBatchedTokens  = 8192
	smallMaxNumSeqs        = 256
	smallMaxBatchedTokens  = 2048
	maxEngineOptionsBudget = 1 << 20
)

// withDefaults fills the zero fields for device dev.
func (o EngineOptions) withDefaults(dev *topology.Device) EngineOptions {
	large := dev != nil && dev.MemBytes >= largeGPUBytes && !strings.Contains(strings.ToLower(dev.Name), "a100")
	if o.MaxNumSeqs == 0 {
		o.MaxNumSeqs = smallMaxNumSeqs
		if large {
			o.MaxNumSeqs = largeMaxNumSeqs
		}
	}
	if o.MaxNumBatchedTokens == 0 {
		o.MaxNumBatchedTokens = smallMaxBatchedTokens
		if large {
			o.MaxNumBatchedTokens = largeMaxBatchedTokens
		}
	}
	if o.BlockSize == 0 {
		o.BlockSize = defaultBlockSize
	}
	return o
}

// Validate checks the options; the error names the field (vLLM's name).
func (o EngineOptions) Validate() error {
	check := func(name string, v, lo, hi int) error {
		if v != 0 && (v < lo || v > hi) {
			return fmt.Errorf("engine: %s = %d: want %d to %d (0 = vLLM's default)", name, v, lo, hi)
		}
		return nil
	}
	var wm error
	if !(o.Watermark >= 0 && o.Watermark < 1) {
		wm = fmt.Errorf("engine: watermark = %v: want a fraction in [0, 1)", o.Watermark)
	}
	return errors.Join(
		wm,
		check("max_num_seqs", o.MaxNumSeqs, 1, 1<<16),
		check("max_num_batched_tokens", o.MaxNumBatchedTokens, 1, maxEngineOptionsBudget),
		check("block_size", o.BlockSize, 1, 1024),
		check("num_gpu_blocks_override", o.NumGPUBlocksOverride, 1, 1<<30),
		check("long_prefill_token_threshold", o.LongPrefillTokenThreshold, 1, maxEngineOptionsBudget),
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
}

// validate checks the deployment before any work; errors name the field.
func (d *Deployment) validate() error {
	if d.Scenario.Topo == nil {
		return errors.New("serving: deployment has no topology")
	}
	if d.Scenario.Arch == nil {
		return errors.New("serving: deployment has no model")
	}
	if d.Instances < 0 || d.Instances > 1024 {
		return fmt.Errorf("serving: instances = %d: want 1 to 1024 (0 = 1)", d.Instances)
	}
	if _, err := ParseRouter(string(d.Router)); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	if err := d.Engine.Validate(); err != nil {
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
