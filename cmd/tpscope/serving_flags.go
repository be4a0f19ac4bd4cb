package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/serving"
)

// engineFlags are the serving engine's settings, as simulate and
// calibrate --serving take them: vLLM's scheduler arguments, the
// scheduling policy, prefix caching, and the engine's overheads outside
// the GPU step.
type engineFlags struct {
	maxSeqs, maxTokens   int
	blockSize, gpuBlocks int
	longPrefill          int
	noChunked, noFullISL bool
	watermark            float64
	policy               string
	noPrefixCache        bool
	overheadsFile        string
}

func (f *engineFlags) bind(fs *pflag.FlagSet) {
	fs.IntVar(&f.maxSeqs, "max-num-seqs", f.maxSeqs, "vLLM max_num_seqs (SGLang --max-running-requests) per scheduler (0 = vLLM's default: 1024 on GPUs of 70 GiB or more, else 256)")
	fs.IntVar(&f.maxTokens, "max-num-batched-tokens", f.maxTokens, "vLLM max_num_batched_tokens (SGLang --chunked-prefill-size), the token budget of a step (0 = 8192 on GPUs of 70 GiB or more, else 2048)")
	fs.IntVar(&f.blockSize, "block-size", f.blockSize, "vLLM block_size, tokens per KV block (0 = 16)")
	fs.IntVar(&f.gpuBlocks, "num-gpu-blocks-override", f.gpuBlocks, "vLLM num_gpu_blocks_override: KV blocks per scheduler (0 = from the memory model)")
	fs.IntVar(&f.longPrefill, "long-prefill-token-threshold", f.longPrefill, "vLLM long_prefill_token_threshold: most prompt tokens of one request per step (0 = no limit)")
	fs.BoolVar(&f.noChunked, "no-enable-chunked-prefill", f.noChunked, "vLLM --no-enable-chunked-prefill: prompts are not cut to the step's budget")
	fs.BoolVar(&f.noFullISL, "no-scheduler-reserve-full-isl", f.noFullISL, "vLLM --no-scheduler-reserve-full-isl: admit on the first chunk's blocks, not the whole input's")
	fs.Float64Var(&f.watermark, "watermark", f.watermark, "vLLM --watermark: fraction of KV blocks kept free when admitting while others run (0 = off)")
	fs.StringVar(&f.policy, "policy", f.policy, "scheduling policy: vllm (chunked prefill mixed with decode, running requests first) or sglang (a prefill batch whenever a prompt waits, else decode)")
	fs.BoolVar(&f.noPrefixCache, "no-enable-prefix-caching", f.noPrefixCache, "vLLM --no-enable-prefix-caching: requests with hash IDs or sessions reuse nothing")
	fs.StringVar(&f.overheadsFile, "serving-overheads", f.overheadsFile, "the engine's overheads outside the GPU step, as calibrate --serving writes them (JSON)")
}

// engine returns the options and overheads the flags give; errors name
// the flag.
func (f *engineFlags) engine() (serving.EngineOptions, serving.Overheads, error) {
	pol, err := serving.ParsePolicy(f.policy)
	if err != nil {
		return serving.EngineOptions{}, serving.Overheads{}, causeError("--policy", nil, err)
	}
	e := serving.EngineOptions{MaxNumSeqs: f.maxSeqs, MaxNumBatchedTokens: f.maxTokens, BlockSize: f.blockSize,
		NumGPUBlocksOverride: f.gpuBlocks, LongPrefillTokenThreshold: f.longPrefill, DisableChunkedPrefill: f.noChunked,
		NoSchedulerReserveFullISL: f.noFullISL, Watermark: f.watermark, Policy: pol, NoPrefixCaching: f.noPrefixCache}
	if err := e.Validate(); err != nil {
		return e, serving.Overheads{}, causeError("", nil, err)
	}
	var o serving.Overheads
	if f.overheadsFile != "" {
		if err := checkInputFile("--serving-overheads", f.overheadsFile, "a JSON file of overheads (calibrate --serving -o)"); err != nil {
			return e, o, err
		}
		if o, err = serving.LoadOverheads(f.overheadsFile); err != nil {
			return e, o, causeError("--serving-overheads", nil, err)
		}
	}
	return e, o, nil
}

// engineLine is the engine's settings in one line.
func engineLine(e serving.EngineOptions, kvBlocks, schedulers, instances int, router string, o serving.Overheads) string {
	s := fmt.Sprintf("engine: %s policy, max_num_seqs %d, max_num_batched_tokens %d, block_size %d; %d KV blocks per scheduler (%d tokens); %d scheduler(s), %d instance(s), router %s",
		e.Policy, e.MaxNumSeqs, e.MaxNumBatchedTokens, e.BlockSize, kvBlocks, kvBlocks*e.BlockSize, schedulers, instances, router)
	if !o.IsZero() {
		s += "; overheads " + o.String()
	}
	return s
}
