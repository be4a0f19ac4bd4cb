package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
)

// CustomAR selects the all-reduce implementation for TP all-reduces.
type CustomAR string

const (
	// CustomARAuto follows vLLM: its custom all-reduce runs only on 2 GPUs
	// or on NVLink-fully-connected GPUs, for messages up to 8 MB, one-shot
	// below 256 KB and two-shot above (serving-facts.md "Custom
	// all-reduce"); otherwise NCCL.
	CustomARAuto CustomAR = ""
	// CustomAROff: NCCL carries every all-reduce.
	CustomAROff CustomAR = "off"
	// CustomAROneShot: a one-shot P2P all-reduce (every rank reads every
	// peer's buffer and reduces locally) for messages up to 8 MB, on any
	// box where P2P is allowed between all members (the out-of-tree PCIe
	// optimization of serving-facts.md).
	CustomAROneShot CustomAR = "oneshot"
	// CustomARTwoShot: reduce-scatter + all-gather over P2P, up to 8 MB.
	CustomARTwoShot CustomAR = "twoshot"
)

// Toggle is an option a deployment may leave to its engine, turn on, or
// turn off; the engine's default is the zero value. Its JSON is absent
// (the engine's default), true or false, as a bool field was before the
// third state: a recording that says true reads as on.
type Toggle uint8

const (
	// ToggleDefault: the engine's own default (its profile).
	ToggleDefault Toggle = iota
	// ToggleOn: on, whatever the engine's default.
	ToggleOn
	// ToggleOff: off, whatever the engine's default (where the engine has
	// a switch for it: CheckEngine refuses it otherwise).
	ToggleOff
)

// String is "" (the engine's default), "true" or "false": the text codec's
// spelling (optionFields).
func (t Toggle) String() string {
	switch t {
	case ToggleOn:
		return "true"
	case ToggleOff:
		return "false"
	}
	return ""
}

// MarshalJSON writes on as true and off as false (the engine's default is
// left out by omitempty).
func (t Toggle) MarshalJSON() ([]byte, error) {
	if t == ToggleDefault {
		return []byte("null"), nil
	}
	return []byte(strconv.FormatBool(t == ToggleOn)), nil
}

// UnmarshalJSON reads true, false or null (the engine's default).
func (t *Toggle) UnmarshalJSON(b []byte) error {
	switch strings.TrimSpace(string(b)) {
	case "true":
		*t = ToggleOn
	case "false":
		*t = ToggleOff
	case "null":
		*t = ToggleDefault
	default:
		return fmt.Errorf("%s: want true, false or null (the engine's default)", b)
	}
	return nil
}

// Custom all-reduce limits (vLLM distributed/device_communicators/
// custom_all_reduce.py, as summarized in serving-facts.md).
const (
	customARMaxBytes     = 8 << 20   // max_size: 8 MB
	customAROneShotBytes = 256 << 10 // one-shot below 256 KB on 8 GPUs
)

// parseCustomAR accepts auto, off, oneshot, twoshot. Torch's
// symmetric-memory multimem all-reduce is refused with the reason: it is
// not a kernel to force on every all-reduce of a step but one of the
// engine's own paths, which auto already takes where the engine does
// (engine.Profile.AllReducePath: GPUs sharing an NVSwitch, messages
// between the custom all-reduce's cap and its own).
func parseCustomAR(s string) (CustomAR, error) {
	switch strings.ToLower(s) {
	case "multimem", "symm-mem", "symmetric-memory":
		return "", fmt.Errorf("custom all-reduce %q is the engine's own choice, not one to force: auto runs torch's symmetric-memory multimem all-reduce where the engine does (GPUs that share an NVSwitch, messages above its custom all-reduce's cap; the engine line says so); want auto, off, oneshot or twoshot", s)
	case "", "auto":
		return CustomARAuto, nil
	case "off", "none", "nccl":
		return CustomAROff, nil
	case "oneshot", "one-shot", "1shot":
		return CustomAROneShot, nil
	case "twoshot", "two-shot", "2shot":
		return CustomARTwoShot, nil
	}
	return "", fmt.Errorf("unknown custom all-reduce %q: want auto, off, oneshot or twoshot", s)
}

// defaultMTPAcceptFrac is the default acceptance rate of one MTP draft
// token (DefaultOptions, and advise's MTP entry): 0.85, the low end of
// the 85-90 % acceptance of the second token that the DeepSeek-V3
// Technical Report (arXiv:2412.19437, section 5.4.3) gives for its MTP
// module. Acceptance depends on the model and the traffic; it is an
// input (serving-facts.md), so advise and plan take it as a flag.
const defaultMTPAcceptFrac = 0.85

// Options are the run-time choices a prediction depends on besides the
// schedule (model, plan, workload) and the topology. Every optimization
// of the catalog that is not a change of plan, workload or box is a field
// here. The zero value is the stock configuration: eager execution, NCCL
// with its defaults (NCCL_P2P_LEVEL=PXB, NCCL picks algorithm and
// protocol), vLLM's custom all-reduce rule, no fusion, no overlap, no MTP
// acceptance.
type Options struct {
	// NCCL is NCCL's environment (NCCL_PROTO, NCCL_ALGO, NCCL_P2P_LEVEL,
	// NCCL_P2P_DISABLE, NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS); the zero
	// value is NCCL's defaults.
	NCCL ncclenv.Settings `json:"nccl"`

	// CUDAGraphs replays the decode step as a captured CUDA graph: one host
	// launch per step instead of one per kernel, Device.LaunchGraphUs of
	// device time per kernel instead of the larger stream-launch gap
	// (Device.KernelGapEagerUs), and the step's tokens padded up to the
	// next captured size (GraphSizes; nil = vLLM's default list, see
	// CaptureSizes).
	CUDAGraphs bool  `json:"cuda_graphs,omitempty"`
	GraphSizes []int `json:"graph_sizes,omitempty"`

	// CustomAR picks the TP all-reduce implementation.
	CustomAR CustomAR `json:"custom_ar,omitempty"`
	// ARNormFusion on fuses every all-reduce with the RMSNorm (and
	// residual add) that follows it: the norm kernel disappears (no
	// launch, no device time) and its memory traffic rides on the
	// all-reduce. Left to the engine, the engine's profile says whether
	// it fuses (TensorRT-LLM does by default, on its custom all-reduce);
	// off, none is fused, which an engine that fuses by default must
	// have a switch for (its profile's fusions[].off).
	ARNormFusion Toggle `json:"ar_norm_fusion,omitempty"`
	// Overlap puts collectives on a separate communication stream so they
	// overlap with compute the schedule marks independent (Op.Deps).
	// Without it every op of a rank runs on one stream, as vLLM does.
	Overlap bool `json:"overlap,omitempty"`

	// MTPAcceptFrac is the probability that one MTP speculative token is
	// accepted (0..1). With k = Workload.SpecTokens a step yields
	// 1 + a + a^2 + ... + a^k tokens per sequence (a draft token counts
	// only if every earlier one was accepted).
	MTPAcceptFrac float64 `json:"mtp_accept_frac,omitempty"`
	// SpecAccept is the acceptance of speculative drafts of any method
	// (spec.go); zero: MTPAcceptFrac when set and the method is MTP,
	// else the method's cited default for the model's family
	// (Scenario.SpecYield says which).
	SpecAccept SpecAccept `json:"spec_accept,omitzero"`

	// GPUMemUtilFrac is the fraction of device memory the engine sizes
	// its KV pool in, as the engine's profile reads it (kv_pool): vLLM's
	// gpu_memory_utilization, for weights, workspace, the CUDA-graph
	// estimate and KV cache (0 = the profile's default: 0.92 from vLLM
	// 0.21.0, PR #38284, 0.9 before); SGLang's mem_fraction_static, for weights and KV cache (0 = its
	// default from the reserved memory); TensorRT-LLM's
	// free_gpu_memory_fraction, of the memory weights and workspace leave,
	// for the KV cache (0 = 0.9).
	GPUMemUtilFrac float64 `json:"gpu_mem_util_frac,omitempty"`

	// CUDAGraphMem is the estimate of its CUDA graphs' memory the engine
	// took off its KV pool, as its start-up log prints it, where the
	// engine's profile deducts one (kv_pool.cuda_graph_estimate: vLLM
	// from 0.21.0). Not given is not 0 (KVBudget.GraphUnpriced).
	CUDAGraphMem CUDAGraphMem `json:"cuda_graph_mem_gib,omitzero"`

	// MaxModelLen is the engine's max_model_len (vLLM's --max-model-len),
	// the longest sequence it serves; 0 = the model's
	// (model.Arch.MaxModelLenTokens). vLLM sizes a DSA indexer's
	// profiling workspace by it (kv_pool.indexer_workspace_per_max_len).
	MaxModelLen int `json:"max_model_len,omitempty"`

	// MaxNumBatchedTokens and MaxNumSeqs are the engine's scheduler
	// limits (vLLM's --max-num-batched-tokens and --max-num-seqs; 0 = the
	// engine's defaults, its profile's scheduler.batch_defaults). vLLM's
	// profiling run at start-up is a forward of max_num_batched_tokens
	// tokens and a sampler over min(that, max_num_seqs) rows, whose peak
	// comes off its KV pool (KVBudget.ProfileTokens); the serving
	// simulation schedules by them (SGLang: --chunked-prefill-size and
	// --max-running-requests; TensorRT-LLM: max_num_tokens and
	// max_batch_size).
	MaxNumBatchedTokens int `json:"max_num_batched_tokens,omitempty"`
	MaxNumSeqs          int `json:"max_num_seqs,omitempty"`

	// Engine names the serving engine's profile (package engine): which
	// attention backend, MoE and GEMM kernels run each op and what they
	// launch beside it (OpCost.ExtraKernels), its fusions, CUDA-graph
	// capture sizes, custom all-reduce rules and whether DSA runs dense.
	// The zero value is the default engine (vLLM's default version);
	// engprof.ExecutorRef is tpscope's executor, which launches exactly the
	// schedule's kernels (set by run). Scenarios recorded before profiles
	// wrote "executor": true instead (UnmarshalJSON reads it).
	Engine engprof.Ref `json:"engine,omitzero"`

	// MoEKernel picks the engine's fused-MoE kernel by name (SGLang's
	// --moe-runner-backend); "" takes the engine's choice for the
	// experts' weight format.
	MoEKernel string `json:"moe_kernel,omitempty"`

	// TimingEventsPerOp is how many CUDA events the measuring harness
	// records around each kernel: tpscope's CUDA executor brackets every
	// op with two (start and end); a serving engine records none (0). Each
	// is one more node the device front end steps through and the next
	// kernel waits on, Device.TimingEventUs apiece in a graph (1.81 us on
	// Hopper, against 0.28 us for a kernel node: measured), so a
	// prediction of an instrumented run prices them; a prediction of the
	// engine leaves them out.
	TimingEventsPerOp int `json:"timing_events_per_op,omitempty"`

	// AttentionBackend picks one of the engine's MLA attention backends
	// by name or alias (vLLM's TRITON_MLA, SGLang's flashinfer, ...); ""
	// takes the engine's own choice for the GPU family and KV dtype
	// (engprof.Profile.Backend).
	AttentionBackend AttentionBackend `json:"attention_backend,omitempty"`
}

// CUDAGraphMem is the CUDA-graph memory estimate a vLLM engine takes off
// its KV pool, in GiB as its log prints it ("Estimated CUDA graph memory:
// 4.77 GiB total"). tpscope captures no graph and vLLM's estimate
// (GPUModelRunner.profile_cudagraph_memory, a dummy capture of the two
// largest sizes of each mode) depends on what the capture allocates, so
// only the user knows it: Given says they stated it, 0 included (the
// engine took none: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 or a build
// before 0.21.0).
type CUDAGraphMem struct {
	GiB   float64
	Given bool
}

// Bytes is the estimate in bytes (0 when not given).
func (g CUDAGraphMem) Bytes() float64 { return g.GiB * float64(1<<30) }

// IsZero is not given (omitzero).
func (g CUDAGraphMem) IsZero() bool { return !g.Given }

// String is the GiB given, "" when not given.
func (g CUDAGraphMem) String() string {
	if !g.Given {
		return ""
	}
	return strconv.FormatFloat(g.GiB, 'g', -1, 64)
}

// ParseCUDAGraphMem reads the GiB a start-up log printed: a finite
// number >= 0.
func ParseCUDAGraphMem(v string) (CUDAGraphMem, error) {
	f, err := parseFloat(v)
	if err != nil {
		return CUDAGraphMem{}, err
	}
	g := CUDAGraphMem{GiB: f, Given: true}
	return g, g.Validate()
}

// Validate refuses a negative or non-finite estimate.
func (g CUDAGraphMem) Validate() error {
	if g.Given && !(g.GiB >= 0 && !math.IsInf(g.GiB, 1)) {
		return fmt.Errorf("%v: want the GiB the engine's log prints ('Estimated CUDA graph memory: X GiB total'), a finite number >= 0", g.GiB)
	}
	return nil
}

// MarshalJSON writes the GiB (omitted when not given: omitzero).
func (g CUDAGraphMem) MarshalJSON() ([]byte, error) { return json.Marshal(g.GiB) }

// UnmarshalJSON reads the GiB, given.
func (g *CUDAGraphMem) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*g = CUDAGraphMem{GiB: f, Given: true}
	return g.Validate()
}

// OptionsError is an option value Validate refuses. Msg names the field
// and what it wants without the "options: " Error prefixes, for a caller
// that names its own flag instead.
type OptionsError struct {
	Msg string
	Err error // the cause, when there is one
}

func (e *OptionsError) Error() string { return "options: " + e.Msg }

func (e *OptionsError) Unwrap() error { return e.Err }

func optionsErrorf(format string, a ...any) error {
	return &OptionsError{Msg: fmt.Sprintf(format, a...)}
}

// Validate checks the options; an error is an *OptionsError naming the
// field.
func (o *Options) Validate() error {
	if !(o.MTPAcceptFrac >= 0 && o.MTPAcceptFrac <= 1) {
		return optionsErrorf("mtp_accept_rate must be in [0,1], got %v", o.MTPAcceptFrac)
	}
	if err := o.SpecAccept.Validate(); err != nil {
		return &OptionsError{Msg: err.Error(), Err: err}
	}
	if !(o.GPUMemUtilFrac >= 0 && o.GPUMemUtilFrac <= 1) {
		return optionsErrorf("gpu_mem_utilization must be in (0,1], got %v", o.GPUMemUtilFrac)
	}
	if err := o.CUDAGraphMem.Validate(); err != nil {
		return optionsErrorf("cuda_graph_mem_gib %v", err)
	}
	// vLLM's SchedulerConfig: Field(ge=1) for both (0 here is the
	// engine's default).
	if o.MaxNumBatchedTokens < 0 {
		return optionsErrorf("max_num_batched_tokens %d: want a count of 1 or more (vLLM refuses less; leave it out for the engine's default)", o.MaxNumBatchedTokens)
	}
	if o.MaxNumSeqs < 0 {
		return optionsErrorf("max_num_seqs %d: want a count of 1 or more (vLLM refuses less; leave it out for the engine's default)", o.MaxNumSeqs)
	}
	switch o.CustomAR {
	case CustomARAuto, CustomAROff, CustomAROneShot, CustomARTwoShot:
	default:
		return optionsErrorf("custom_ar %q: want auto, off, oneshot or twoshot", o.CustomAR)
	}
	if _, err := engprof.Lookup(o.Engine); err != nil {
		return &OptionsError{Msg: err.Error(), Err: err}
	}
	if err := o.NCCL.Validate(); err != nil {
		return &OptionsError{Msg: err.Error(), Err: err}
	}
	if o.TimingEventsPerOp < 0 || o.TimingEventsPerOp > 8 {
		return optionsErrorf("timing_events_per_op %d: want 0 to 8", o.TimingEventsPerOp)
	}
	for i, s := range o.GraphSizes {
		if s <= 0 || (i > 0 && s <= o.GraphSizes[i-1]) {
			return optionsErrorf("graph_sizes must be positive and increasing, got %v", o.GraphSizes)
		}
	}
	return nil
}

// CaptureSizes returns the CUDA-graph capture sizes in tokens on a GPU of
// memBytes in an engine of ranks GPUs: GraphSizes when given (they win,
// as SGLang's --cuda-graph-bs and vLLM's cudagraph_capture_sizes do;
// SGLang's request pool still stops them, Scenario.CaptureSizes), or
// the engine profile's default list up to its largest captured batch
// there (engprof.Profile.CaptureSizesFor: SGLang's cuda_graph_max_bs by
// GPU memory and tp_size; vLLM's 1, 2, 4, 8..248 step 8, 256..512 step
// 16 on every GPU, serving-facts.md "CUDA graphs"; TensorRT-LLM's in its
// profile).
func (o *Options) CaptureSizes(memBytes int64, ranks int) []int {
	if len(o.GraphSizes) > 0 {
		return o.GraphSizes
	}
	if p, err := engprof.Lookup(o.Engine); err == nil {
		return p.CaptureSizesFor(memBytes, ranks)
	}
	return defaultCaptureSizes
}

var defaultCaptureSizes = func() []int {
	s := []int{1, 2, 4}
	for b := 8; b <= 248; b += 8 {
		s = append(s, b)
	}
	for b := 256; b <= 512; b += 16 {
		s = append(s, b)
	}
	return s
}()

// GraphCapture is the CUDA-graph capture the options ask of the serving
// engine on a GPU of memBytes in an engine of ranks GPUs, as the
// schedule's builder takes it (model.BuildOptions.Graphs): nil when
// CUDAGraphs is off, else the capture sizes (CaptureSizes).
func (o *Options) GraphCapture(memBytes int64, ranks int) *model.GraphCapture {
	if !o.CUDAGraphs {
		return nil
	}
	return &model.GraphCapture{Sizes: o.CaptureSizes(memBytes, ranks), DecodeOnly: o.decodeOnlyGraphs(), Exact: o.unpaddedGraphs()}
}

// decodeOnlyGraphs reports whether the engine replays graphs for decode
// steps only (its profile's cuda_graphs.prefill_eager).
func (o *Options) decodeOnlyGraphs() bool {
	p, err := engprof.Lookup(o.Engine)
	return err == nil && p.Graphs.PrefillEager
}

// unpaddedGraphs reports whether the engine replays a graph only at a
// captured size exactly (its profile's cuda_graphs.unpadded).
func (o *Options) unpaddedGraphs() bool {
	p, err := engprof.Lookup(o.Engine)
	return err == nil && p.Graphs.Unpadded
}

// GraphTokens is the token count a CUDA-graph step runs for tokens real
// tokens on a GPU of memBytes in an engine of ranks GPUs: the smallest
// capture size >= tokens, or tokens itself when graphs are off or tokens
// exceeds the largest size (the engine then runs eagerly);
// model.GraphCapture.Tokens decides.
func (o *Options) GraphTokens(tokens int, memBytes int64, ranks int) (padded int, graphed bool) {
	if !o.CUDAGraphs {
		return tokens, false
	}
	g := model.GraphCapture{Sizes: o.CaptureSizes(memBytes, ranks), Exact: o.unpaddedGraphs()}
	return g.Tokens(tokens)
}

// TokensPerStep is the expected tokens one sequence gains per decode step
// with k speculative tokens: 1 + a + ... + a^k (a = MTPAcceptFrac).
func (o *Options) TokensPerStep(k int) float64 {
	t, p := 1.0, 1.0
	for i := 0; i < k; i++ {
		p *= o.MTPAcceptFrac
		t += p
	}
	return t
}
