package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/ncclenv"
)

// The text codec of Options: one table (optionFields) gives every field its
// name, the same word as the command-line flag that sets it
// ("nccl-proto=LL", "cuda-graphs"), how to read and write its value, and
// its help line. Names renders the non-default fields, ParseNames reads them
// back, the CLI registers its flags from OptionFields, and the span
// attribute tpscope.options carries the names; ncclenv.Settings.Env is the
// same NCCL fields in NCCL's spelling. The JSON form is the struct tags.

// OptionKind is the value type of an option field.
type OptionKind string

const (
	OptionBool   OptionKind = "bool"
	OptionString OptionKind = "string"
	OptionFloat  OptionKind = "float"
	OptionInt    OptionKind = "int"
	// OptionCount is an integer count of tokens or sequences, written as
	// an integer; the CLI takes it with K and M suffixes, as every
	// verb's count flags.
	OptionCount OptionKind = "count"
	OptionInts  OptionKind = "ints" // a list of positive integers, '+'-separated in names
)

// OptionField is one field of Options in the text codec.
type OptionField struct {
	Name string     // flag and option name, e.g. "nccl-proto"
	Kind OptionKind // value type
	Help string     // one line for --help
	// Env is the NCCL variable the field sets ("" when none).
	Env string
	// Hidden marks a field the measuring harness sets (run), not a user:
	// it is accepted but left out of help.
	Hidden bool
	// ReadOnly marks a spelling older recordings wrote for a field that
	// now has another name: read (Set), never written (Get is "").
	ReadOnly bool
	// Get renders the field's value ("" for the zero value); Set parses a
	// value into the field, erroring with what is accepted.
	Get func(o *Options) string
	Set func(o *Options, v string) error
}

// OptionFields lists the fields of Options in the text codec, in a fixed
// order.
func OptionFields() []OptionField { return slices.Clone(optionFields) }

var optionFields = []OptionField{
	{Name: "cuda-graphs", Kind: OptionBool, Help: "replay decode steps as captured CUDA graphs, their tokens padded to the capture sizes (vLLM's default; false = --enforce-eager)",
		Get: func(o *Options) string { return boolText(o.CUDAGraphs) },
		Set: func(o *Options, v string) (err error) { o.CUDAGraphs, err = parseBool(v); return }},
	{Name: "graph-sizes", Kind: OptionInts, Help: "CUDA-graph capture sizes in tokens, increasing; the largest is the largest graphed batch, as SGLang's --cuda-graph-bs sets its cuda_graph_max_bs, and SGLang stops the list at its request pool (--max-num-seqs given) as it does its own (default: the engine's list: vLLM's 1, 2, 4, 8..512; SGLang's up to its cuda_graph_max_bs for the GPU's memory and TP size, 512 on 80 GiB and larger GPUs at TP >= 4)",
		Get: func(o *Options) string { return intsText(o.GraphSizes) },
		Set: func(o *Options, v string) (err error) { o.GraphSizes, err = parseInts(v); return }},
	{Name: "nccl-proto", Kind: OptionString, Env: ncclenv.EnvProto, Help: "NCCL_PROTO: LL, LL128, Simple, a comma list, ^exclusions, or per collective as LL,Simple;allreduce:^LL (default: NCCL's choice)",
		Get: func(o *Options) string { return o.NCCL.Proto },
		Set: func(o *Options, v string) error { o.NCCL.Proto = v; return nil }},
	{Name: "nccl-algo", Kind: OptionString, Env: ncclenv.EnvAlgo, Help: "NCCL_ALGO: Ring, Tree, a comma list or ^exclusions, per collective as allreduce:tree;allgather:ring (default: NCCL's choice)",
		Get: func(o *Options) string { return o.NCCL.Algo },
		Set: func(o *Options, v string) error { o.NCCL.Algo = v; return nil }},
	{Name: "p2p-level", Kind: OptionString, Env: ncclenv.EnvP2PLevel, Help: "NCCL_P2P_LEVEL: LOC, NVL, NVB, PIX, PXB, PXN, PHB, SYS (default: NCCL's PXB)",
		Get: func(o *Options) string { return o.NCCL.P2PLevel },
		Set: func(o *Options, v string) error { o.NCCL.P2PLevel = v; return nil }},
	{Name: "p2p-disable", Kind: OptionBool, Env: ncclenv.EnvP2PDisable, Help: "NCCL_P2P_DISABLE=1: every GPU-to-GPU hop through host memory",
		Get: func(o *Options) string { return boolText(o.NCCL.P2PDisable) },
		Set: func(o *Options, v string) (err error) { o.NCCL.P2PDisable, err = parseBool(v); return }},
	// The channel counts read as NCCL reads them (ncclenv.Settings.SetEnv:
	// integers, 1 to NCCL's MAXCHANNELS).
	{Name: "nccl-min-channels", Kind: OptionInt, Env: ncclenv.EnvMinChannels, Help: fmt.Sprintf("NCCL_MIN_NCHANNELS: run collectives over at least N channels, 1-%d (default: NCCL's own count; tpscope models 2 on a dual-socket PCIe box, 4 through PCIe switches, 16 over NVLink)", ncclenv.ChannelCap),
		Get: func(o *Options) string { return intText(o.NCCL.MinChannels) },
		Set: func(o *Options, v string) error { return o.NCCL.SetEnv(ncclenv.EnvMinChannels, v) }},
	{Name: "nccl-max-channels", Kind: OptionInt, Env: ncclenv.EnvMaxChannels, Help: fmt.Sprintf("NCCL_MAX_NCHANNELS: run collectives over at most N channels, 1-%d (default: NCCL's own count; a --nccl-min-channels above it wins, as in NCCL)", ncclenv.ChannelCap),
		Get: func(o *Options) string { return intText(o.NCCL.MaxChannels) },
		Set: func(o *Options, v string) error { return o.NCCL.SetEnv(ncclenv.EnvMaxChannels, v) }},
	{Name: "custom-ar", Kind: OptionString, Help: "TP all-reduce: auto (the engine's rule: its custom all-reduce, and torch's symmetric-memory multimem all-reduce where GPUs share an NVSwitch), off (NCCL), oneshot, twoshot",
		Get: func(o *Options) string { return string(o.CustomAR) },
		Set: func(o *Options, v string) (err error) { o.CustomAR, err = parseCustomAR(v); return }},
	{Name: "ar-norm-fusion", Kind: OptionBool, Help: "fuse each all-reduce with the RMSNorm after it (default: the engine's, as its engine line says: vLLM 0.24 on SM 9.0 and 10.x up to its size cap, SGLang 0.5 for DeepSeek-V3 and Kimi-K2.x on SM90/SM100 up to 2,048 tokens a step, TensorRT-LLM on its custom all-reduce); =false turns an engine's default fusion off (vLLM: -cc.pass_config.fuse_allreduce_rms=False; SGLang: --enforce-disable-flashinfer-allreduce-fusion; TensorRT-LLM: TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1)",
		Get: func(o *Options) string { return o.ARNormFusion.String() },
		Set: func(o *Options, v string) error {
			b, err := parseBool(v)
			if err != nil {
				return err
			}
			o.ARNormFusion = ToggleOff
			if b {
				o.ARNormFusion = ToggleOn
			}
			return nil
		}},
	{Name: "overlap", Kind: OptionBool, Help: "run collectives on a second stream, overlapping compute the schedule marks independent of them (refused where it marks none, as in every schedule the builder lays: each op waits for the one before)",
		Get: func(o *Options) string { return boolText(o.Overlap) },
		Set: func(o *Options, v string) (err error) { o.Overlap, err = parseBool(v); return }},
	{Name: "mtp-accept", Kind: OptionFloat, Help: "probability that one MTP speculative token is accepted (0..1)",
		Get: func(o *Options) string { return floatText(o.MTPAcceptFrac) },
		Set: func(o *Options, v string) (err error) { o.MTPAcceptFrac, err = parseFloat(v); return }},
	{Name: "spec-accept", Kind: OptionString, Help: `acceptance of speculative drafts: a per-token rate ("0.8"), vLLM's per-position rates ("0.9,0.8,0.7"), a mean acceptance length "len=2.94[@K]" or a draft acceptance rate "rate=0.6[@K]" measured at K drafts (default: the method's published figure for the model family)`,
		Get: func(o *Options) string { return o.SpecAccept.String() },
		Set: func(o *Options, v string) (err error) { o.SpecAccept, err = parseSpecAccept(v); return }},
	{Name: "gpu-mem-util", Kind: OptionFloat, Help: "the engine's memory fraction: vLLM's gpu_memory_utilization, the pool being the fraction less weights, activations and, from vLLM 0.21.0, its CUDA-graph estimate (0 = the profile's default: 0.92 for vLLM 0.24, 0.9 before 0.21); SGLang's --mem-fraction-static, the pool being the fraction less weights (0 = its default from the memory it reserves for the step budget, CUDA graphs and TP size); TensorRT-LLM's free_gpu_memory_fraction, the pool being the fraction of the memory free after weights and activations (0 = 0.9)",
		Get: func(o *Options) string { return floatText(o.GPUMemUtilFrac) },
		Set: func(o *Options, v string) (err error) { o.GPUMemUtilFrac, err = parseFloat(v); return }},
	{Name: "cuda-graph-mem-gib", Kind: OptionFloat, Help: "the CUDA-graph memory, GiB, the engine took off its KV pool, as its start-up log prints it ('Estimated CUDA graph memory: X GiB total'; vLLM from 0.21.0, refused for an engine that takes none); 0 where it took none (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0); not given, the pool is priced without it and a caveat says so",
		Get: func(o *Options) string { return o.CUDAGraphMem.String() },
		Set: func(o *Options, v string) (err error) { o.CUDAGraphMem, err = ParseCUDAGraphMem(v); return }},
	{Name: "max-model-len", Kind: OptionInt, Help: "the engine's max_model_len, tokens (vLLM's --max-model-len): the longest context served, at most the model's ('model show' gives it; 0 = the model's); vLLM 0.24 reserves a DSA model's indexer workspace in proportion to it, 40 x max_model_len x 132 B off the KV pool for GLM-5",
		Get: func(o *Options) string { return intText(o.MaxModelLen) },
		Set: func(o *Options, v string) (err error) { o.MaxModelLen, err = parseInt(v); return }},
	{Name: "max-num-batched-tokens", Kind: OptionCount, Help: "the engine's step token budget: vLLM's --max-num-batched-tokens, the tokens of the profiling forward whose activations come off its KV pool and of each scheduled step (SGLang: --chunked-prefill-size, which its default --mem-fraction-static reserves for; TensorRT-LLM: max_num_tokens, simulate only); default: the engine's, vllm serve's 8192 on a GPU of 70 GiB or more not named A100, else 2048, the model's max_model_len if larger with --no-enable-chunked-prefill; SGLang's by GPU memory, 16384 from 160 GiB, 8192 from 60 GiB, 4096 from 35 GiB, else 2048; TensorRT-LLM's 8192",
		Get: func(o *Options) string { return intText(o.MaxNumBatchedTokens) },
		Set: func(o *Options, v string) (err error) { o.MaxNumBatchedTokens, err = parseInt(v); return }},
	{Name: "max-num-seqs", Kind: OptionCount, Help: "the engine's running-request limit per scheduler: vLLM's --max-num-seqs, the rows of the profiling run's sampler (min(it, the budget)) whose logits come off its KV pool, at most --max-num-batched-tokens (vLLM refuses more); a decode batch above it a scheduler is refused by predict (above the default: a caveat) and left out by plan (the default too), whose max concurrency it caps (SGLang: --max-running-requests, the engine's, each DP rank running its share, and the request pool its CUDA-graph lists stop at; TensorRT-LLM: max_batch_size, simulate only); default: the engine's, vllm serve's 1024 on a GPU of 70 GiB or more not named A100, else 256, at most the budget; SGLang's from its KV pool; TensorRT-LLM's 2048",
		Get: func(o *Options) string { return intText(o.MaxNumSeqs) },
		Set: func(o *Options, v string) (err error) { o.MaxNumSeqs, err = parseInt(v); return }},
	{Name: "engine", Kind: OptionString, Help: "serving engine whose kernels price the step: " + strings.Join(engprof.Names(), ", ") + ", or a name alone for its default version (default: " + engprof.DefaultEngine + "); executor is tpscope's own kernels",
		Get: func(o *Options) string { return o.Engine.String() },
		Set: func(o *Options, v string) (err error) { o.Engine, err = engprof.ParseRef(v); return }},
	// executor: the spelling scenarios recorded before engine profiles
	// wrote (tpscope.options "executor"); read as --engine executor,
	// never written.
	{Name: "executor", Kind: OptionBool, Hidden: true, ReadOnly: true, Help: "the same as --engine executor (older recordings)",
		Get: func(o *Options) string { return "" },
		Set: func(o *Options, v string) error {
			b, err := parseBool(v)
			if err == nil && b {
				o.Engine = engprof.ExecutorRef
			}
			return err
		}},
	{Name: "moe-kernel", Kind: OptionString, Help: "the engine's fused-MoE kernel by name (SGLang's --moe-runner-backend: marlin, flashinfer_cutlass, cutlass, triton, ...; default: the engine's choice for the experts' format)",
		Get: func(o *Options) string { return o.MoEKernel },
		Set: func(o *Options, v string) error { o.MoEKernel = strings.ToLower(strings.TrimSpace(v)); return nil }},
	{Name: "timing-events", Kind: OptionInt, Hidden: true, Help: "CUDA events a measuring harness records around each kernel (tpscope's CUDA executor: 2; set by run, 0 for a serving engine)",
		Get: func(o *Options) string { return intText(o.TimingEventsPerOp) },
		Set: func(o *Options, v string) (err error) { o.TimingEventsPerOp, err = parseInt(v); return }},
	{Name: "attention-backend", Kind: OptionString, Help: "the engine's MLA attention backend by name (vLLM: TRITON_MLA, FLASHMLA, FLASH_ATTN_MLA, FLASHINFER_MLA, CUTLASS_MLA, and FLASHMLA_SPARSE for a DSA model run sparse; SGLang: triton, flashinfer, fa3, flashmla, trtllm_mla, and nsa for a DSA model run sparse; TensorRT-LLM: TRTLLM; default: the engine's choice for the GPU, KV dtype and model)",
		Get: func(o *Options) string { return string(o.AttentionBackend) },
		Set: func(o *Options, v string) error {
			o.AttentionBackend = AttentionBackend(strings.ToLower(strings.TrimSpace(v)))
			return nil
		}},
}

// DefaultOptions are what a serving engine and NCCL do by themselves, so
// that a scenario nobody tuned predicts a stock deployment: vLLM captures
// decode CUDA graphs (its default; --enforce-eager turns them off), NCCL
// picks protocol, algorithm and P2P level (PXB), vLLM's custom all-reduce
// rule; speculative drafts are accepted at the method's published figure
// for the model family (Scenario.SpecYield says which; used only when the
// workload has speculative tokens).
func DefaultOptions() Options {
	return Options{CUDAGraphs: true}
}

// Names renders the fields of o that differ from zero as sorted option
// names: "cuda-graphs", "nccl-proto=LL", "mtp-accept=0.85". A bool field
// set is its bare name. ParseNames reads them back.
func (o Options) Names() []string {
	var out []string
	for _, f := range optionFields {
		v := f.Get(&o)
		switch {
		case v == "":
		case f.Kind == OptionBool && v == "true":
			out = append(out, f.Name)
		default:
			out = append(out, f.Name+"="+v)
		}
	}
	slices.Sort(out)
	return out
}

// String is the names joined by spaces, "none" for the zero value.
func (o Options) String() string {
	n := o.Names()
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, " ")
}

// Label names the options for people: the names, with "eager" first when
// CUDA graphs are off (a stock engine captures them), the default MTP
// acceptance left out, "none" when nothing is set.
func (o Options) Label() string {
	if o.MTPAcceptFrac == defaultMTPAcceptFrac {
		o.MTPAcceptFrac = 0 // the default draft acceptance goes without saying
	}
	n := o.Names()
	if !o.CUDAGraphs {
		n = append([]string{"eager"}, n...)
	}
	if len(n) == 0 {
		return "none"
	}
	return strings.Join(n, " ")
}

// ParseNames reads option names into Options (fields not named keep their
// zero value). Besides Names' spelling it accepts NCCL's (NCCL_PROTO=LL,
// NCCL_P2P_DISABLE=1), underscores for dashes, a bare bool name or
// name=true|false, and case-insensitive names. Names it does not know come
// back in unknown; a known name with a bad value, or options that fail
// Validate, are an error naming the option.
func ParseNames(names []string) (o Options, unknown []string, err error) {
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || strings.EqualFold(n, "none") || strings.EqualFold(n, "eager") {
			continue
		}
		key, val, hasVal := strings.Cut(n, "=")
		f, ok := lookupOption(key)
		if !ok {
			unknown = append(unknown, n)
			continue
		}
		if f.Kind == OptionBool && !hasVal {
			val = "true"
		}
		if f.Env == ncclenv.EnvP2PDisable && val == "0" {
			val = "false"
		}
		if err := f.Set(&o, val); err != nil {
			return o, unknown, fmt.Errorf("option %q: %w", n, err)
		}
	}
	if err := o.Validate(); err != nil {
		return o, unknown, err
	}
	return o, unknown, nil
}

// lookupOption finds a field by its name, its NCCL variable or the
// underscore spelling of either, ignoring case.
func lookupOption(key string) (OptionField, bool) {
	k := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(key)), "_", "-")
	for _, f := range optionFields {
		if k == f.Name || (f.Env != "" && k == strings.ReplaceAll(strings.ToLower(f.Env), "_", "-")) {
			return f, true
		}
	}
	switch k { // spellings older traces wrote
	case "graphs", "cuda-graph":
		return lookupOption("cuda-graphs")
	case "mtp-accept-rate":
		return lookupOption("mtp-accept")
	case "gpu-mem-utilization", "gpu-memory-utilization", "mem-fraction-static":
		return lookupOption("gpu-mem-util")
	}
	return OptionField{}, false
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return ""
}

func parseBool(v string) (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("%q: want true or false", v)
	}
	return b, nil
}

func intText(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func parseInt(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%q: want an integer", v)
	}
	return n, nil
}

func floatText(f float64) string {
	if f == 0 {
		return ""
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func parseFloat(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want a number", v)
	}
	return f, nil
}

func intsText(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, "+")
}

func parseInts(v string) ([]int, error) {
	var out []int
	for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == '+' || r == ',' || r == ' ' }) {
		x, err := strconv.Atoi(p)
		if err != nil || x < 1 {
			return nil, fmt.Errorf("%q: want positive integers joined by +", v)
		}
		out = append(out, x)
	}
	// Separators alone ("+", ",") name no size: taken as the empty list,
	// the engine's default sizes, they would read as a choice.
	if len(out) == 0 && strings.TrimSpace(v) != "" {
		return nil, fmt.Errorf("%q: only separators, naming no size: want positive integers joined by +", v)
	}
	return out, nil
}
