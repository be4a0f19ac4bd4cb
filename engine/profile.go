package engine

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Profile is one engine version's facts (see the package doc). Field
// names are the YAML keys; every fact carries Cite, keys into Sources.
type Profile struct {
	Engine  string `yaml:"engine"`
	Version string `yaml:"version"`
	// Default marks the version a Ref without one means.
	Default bool   `yaml:"default"`
	Title   string `yaml:"title"`
	// Sources maps a citation key to the source it stands for (repository,
	// path and version, issue or document).
	Sources map[string]string `yaml:"sources"`

	// PerfDB names the engine's directory and version in aiconfigurator's
	// systems/data tree (systems/data/<system>/<family>/<framework>/<version>),
	// the tables measured with this engine; empty Framework: none.
	PerfDB PerfDBRef `yaml:"perfdb"`

	Attention AttentionFacts `yaml:"attention"`
	MoE       MoEFacts       `yaml:"moe"`
	Linear    LinearFacts    `yaml:"linear"`
	Fusions   []Fusion       `yaml:"fusions"`
	Graphs    CUDAGraphs     `yaml:"cuda_graphs"`
	AllReduce CustomAR       `yaml:"custom_allreduce"`
	SymmMem   SymmMemAR      `yaml:"symm_mem_allreduce"`
	DSA       DSAFacts       `yaml:"dsa"`
	// Dispatch is how the engine moves tokens to the routed experts and
	// back under DP attention + EP.
	Dispatch DispatchFacts `yaml:"moe_dispatch"`
	// Scheduler is how the engine forms a serving step out of its running
	// and waiting requests; none for an engine that serves no requests
	// (the executor runs one step of a given workload).
	Scheduler SchedulerFacts `yaml:"scheduler"`
	// KVPool is how the engine sizes its KV-cache pool (kvpool.go).
	KVPool KVPoolFacts `yaml:"kv_pool"`
	// KVDefaults is the KV-cache dtype the engine runs when none is
	// named (kvdefault.go).
	KVDefaults KVDefaultFacts `yaml:"kv_default"`
	// Speculative are the speculative-decoding methods (spec.go).
	Speculative SpecFacts `yaml:"speculative"`
	// Unsupported lists options (as tpscope's flags name them) the engine
	// has no implementation of; a scenario that sets one is refused.
	Unsupported []Refusal `yaml:"unsupported"`

	file  string // where the profile was read from, for error messages
	sizes []int  // Graphs.CaptureSizes(), computed once by validate
	// name and defaultFrom are Name() and DefaultFrom(), set once by
	// Parse: a plan sweep asks for them for every configuration.
	name, defaultFrom string
}

// CaptureSizes are the CUDA-graph capture sizes of the profile, increasing
// (Graphs.CaptureSizes, computed once; callers must not modify it).
func (p *Profile) CaptureSizes() []int {
	if p.sizes == nil {
		p.sizes = p.Graphs.CaptureSizes()
	}
	return p.sizes
}

// SchedulerFacts name the engine's scheduling policy as the serving
// simulation spells it (package serving's Policy: "vllm", a token budget
// per step spent on running requests first with prefill chunks mixed in;
// "sglang", a prefill batch whenever a prompt waits, else decode); ""
// when the engine serves no requests.
type SchedulerFacts struct {
	Policy string `yaml:"policy"`
	// ChunkTokens is the default step token budget by the GPU's memory
	// (SGLang's chunked_prefill_size, DefaultChunkTokens); none: vLLM's
	// rule, BatchDefaults.
	ChunkTokens []MemTier `yaml:"chunk_tokens"`
	// MaxRunning is the default limit on running requests from the KV
	// pool (SGLang's max_running_requests, DefaultMaxRunning); none:
	// BatchDefaults' or MaxSeqs.
	MaxRunning *MaxRunningFacts `yaml:"max_running"`
	// BatchDefaults is vLLM's rule for both the step budget and the
	// running limit, by the GPU (EngineArgs.get_batch_defaults); stated
	// alone, without ChunkTokens, MaxRunning, MaxSeqs or
	// MaxPrefillTokens.
	BatchDefaults *BatchDefaultFacts `yaml:"batch_defaults"`
	// MaxSeqs is a fixed default limit on running requests per scheduler
	// (TensorRT-LLM's max_batch_size); 0: MaxRunning's or vLLM's rule.
	MaxSeqs int `yaml:"max_seqs"`
	// BlockTokens is the default tokens per KV block (TensorRT-LLM's
	// tokens_per_block, SGLang's page_size 1); 0: vLLM's 16. A backend's
	// PageTokens takes its place while that backend runs.
	BlockTokens int `yaml:"block_tokens"`
	// ChunkedPrefill is whether a prompt is cut to the step's token budget
	// by default; unstated (nil): on, as vLLM v1 and SGLang do.
	ChunkedPrefill *bool `yaml:"chunked_prefill"`
	// DPDividesChunk: under DP attention the step budget (given or
	// default) is the whole engine's, each DP rank's scheduler taking an
	// equal share (SGLang: chunked_prefill_size //= dp_size), with
	// chunked prefill on (off, the prefill batch's MaxPrefillTokens is
	// every rank's whole); false: each DP rank has the whole budget
	// (vLLM's per-engine max_num_batched_tokens).
	DPDividesChunk bool `yaml:"dp_divides_chunk"`
	// MaxPrefillTokens, when set, is the prefill step's budget with
	// chunked prefill off (SGLang's --max-prefill-tokens), within which
	// the first waiting prompt is admitted whatever its length; 0: the
	// step budget holds and a longer prompt never runs (vLLM's, TensorRT-
	// LLM's max_num_tokens).
	MaxPrefillTokens int `yaml:"max_prefill_tokens"`
	// DPDividesRunning: under DP attention a running-request limit the
	// engine is given (or sets itself, as SGLang does for speculation)
	// is the whole engine's, each DP rank's scheduler taking an equal
	// share (SGLang: max_running_requests // dp_size).
	DPDividesRunning bool `yaml:"dp_divides_running"`
	// Admission is how a waiting request is admitted when unstated by the
	// user: "" is vLLM's (the blocks of its whole input free);
	// AdmitGuaranteedNoEvict is TensorRT-LLM's GUARANTEED_NO_EVICT.
	Admission string `yaml:"admission"`
	// NewTokenRatio, with Admission AdmitNewTokenRatio, is SGLang's
	// estimate of the output its running requests will still produce.
	NewTokenRatio *NewTokenRatioFacts `yaml:"new_token_ratio"`
	Cite          []string            `yaml:"cite"`
}

// NewTokenRatioFacts are SGLang's new-token-ratio constants (environ.py):
// a running request is counted for Ratio x min(its remaining output,
// ClipMaxNewTokens) tokens of future KV, the ratio starting at Init (x
// --schedule-conservativeness, 1), falling by (Init - Init x MinFactor) /
// DecaySteps on each decode batch that did not retract, back to Init
// when the scheduler is idle, and set by a retraction to (the decoded
// tokens + RetractDecodeSteps a request) / the requests' maximum outputs.
type NewTokenRatioFacts struct {
	Init               float64 `yaml:"init"`
	MinFactor          float64 `yaml:"min_factor"`
	DecaySteps         int     `yaml:"decay_steps"`
	ClipMaxNewTokens   int     `yaml:"clip_max_new_tokens"`
	RetractDecodeSteps int     `yaml:"retract_decode_steps"`
	// DPConservativeness, when set, scales Init under DP attention
	// (SGLang multiplies its schedule_conservativeness by 0.3 there, and
	// the ratio starts at 0.7 x it); 0: no change.
	DPConservativeness float64 `yaml:"dp_conservativeness"`
}

// AdmitGuaranteedNoEvict is TensorRT-LLM's capacity scheduler policy
// GUARANTEED_NO_EVICT: a request is admitted only when the KV blocks of
// its whole length (prompt plus maximum output) fit beside what the
// running requests still need to finish theirs, so nothing is evicted.
const AdmitGuaranteedNoEvict = "guaranteed_no_evict"

// AdmitNewTokenRatio is SGLang's PrefillAdder: a waiting request is
// admitted while its input plus its (clipped) maximum output fit the free
// KV tokens less what the running requests are estimated to still need
// (NewTokenRatioFacts) and what the requests admitted before it in the
// step take.
const AdmitNewTokenRatio = "new_token_ratio"

// The scheduling policies a profile may state (serving.Policy's values).
const (
	SchedulerVLLM   = "vllm"
	SchedulerSGLang = "sglang"
)

// Serves reports whether the engine serves requests (states a scheduler).
func (p *Profile) Serves() bool { return p.Scheduler.Policy != "" }

// PerfDBRef names an engine's tables in aiconfigurator's tree.
type PerfDBRef struct {
	Framework string   `yaml:"framework"`
	Version   string   `yaml:"version"`
	Cite      []string `yaml:"cite"`
}

// Ref is the profile's own Ref (engine@version).
func (p *Profile) Ref() Ref { return Ref{Name: p.Engine, Version: p.Version} }

// Name is engine@version.
func (p *Profile) Name() string {
	if p.name != "" {
		return p.name
	}
	return p.Ref().String()
}

// DefaultFrom says that a figure is the engine's own default ("vllm@0.24's
// default"), where a pool or limit names its source.
func (p *Profile) DefaultFrom() string {
	if p.defaultFrom != "" {
		return p.defaultFrom
	}
	return p.Name() + "'s default"
}

// File is where the profile was read from.
func (p *Profile) File() string { return p.file }

// ------------------------------------------------------------ attention

// AttentionFacts are the MLA attention backends and how the engine picks
// one.
type AttentionFacts struct {
	Backends []AttentionBackend `yaml:"backends"`
	// Select is the automatic choice: per family, the backends in the
	// engine's priority order; the first one valid for the KV dtype and
	// model wins (vLLM get_valid_backends; SGLang's default per family).
	Select []AttentionRule `yaml:"select"`
}

// AttentionRule is one family group's priority list.
type AttentionRule struct {
	Archs ArchSet `yaml:"archs"`
	// ModelTypes, when stated, limit the rule to models of these config
	// model_types: an engine that picks a backend for a model
	// architecture before its general rule (SGLang's
	// _handle_model_specific_adjustments sets trtllm_mla for DeepSeek-V3
	// and Kimi-K2.5 on SM100). Rules are tried in order.
	ModelTypes []string `yaml:"model_types"`
	Order      []string `yaml:"order"`
	// PageTokens, when stated, is the KV page the engine sets on these
	// families for an MLA model before it picks the backend itself (none
	// named), whichever backend it then picks: vLLM's config step
	// presumes FlashMLA on Hopper and forces its page of 64 even where
	// FLASH_ATTN_MLA then runs. PageMultiples and PageOf as a backend's.
	PageTokens    int      `yaml:"page_tokens"`
	PageMultiples bool     `yaml:"page_multiples"`
	PageOf        string   `yaml:"page_of"`
	Cite          []string `yaml:"cite"`
}

// GridKind is how an attention backend lays its decode work over the
// GPU.
type GridKind string

const (
	// GridSplitKV: one CTA per (query token, head block, KV split), the
	// splits a fixed count or sized from the sequence (Grid's fields):
	// Triton's grouped MLA decode.
	GridSplitKV GridKind = "split_kv"
	// GridSMFill: a scheduler splits the KV sequence until every SM has
	// work (FlashMLA num_sm_parts, FA3's scheduler metadata, FlashInfer's
	// plan).
	GridSMFill GridKind = "sm_fill"
)

// Grid are a backend's decode-grid facts.
type Grid struct {
	Kind GridKind `yaml:"kind"`
	// FixedSplits > 0: that many KV splits always; 0: sized from the
	// longest sequence, next_pow2(max(1, seq / MinWorkPerSplit)), at most
	// SplitOccupancy x the SM count.
	FixedSplits     int `yaml:"fixed_splits"`
	MinWorkPerSplit int `yaml:"min_work_per_split"`
	SplitOccupancy  int `yaml:"split_occupancy"`
	// BlockH heads per CTA, BlockN cached tokens per loop iteration,
	// Stages software-pipeline depth (split_kv).
	BlockH int `yaml:"block_h"`
	BlockN int `yaml:"block_n"`
	Stages int `yaml:"stages"`
	// MergeUs > 0 (sm_fill): the kernel merges its KV splits itself, and
	// that merge costs a fixed time after the last byte of the cache is
	// read (the splits' barrier, then the L2 reads of their partials),
	// whatever the bytes. The launch is split when its blocks, one per
	// (sequence, group of RowsPerCTA query rows), fill at most
	// SplitBelowSMFrac of the SMs; a launch that fills more runs unsplit
	// and merges nothing. 0: the backend merges in a companion kernel
	// (Companions) or not at all.
	MergeUs          float64 `yaml:"merge_us"`
	RowsPerCTA       int     `yaml:"rows_per_cta"`
	SplitBelowSMFrac float64 `yaml:"split_below_sm_frac"`
	// SerialMerge (split_kv): the companion that merges the splits walks
	// them one after another, one program per (query token, head), each
	// non-empty split's partial (its output over the latent and its
	// log-sum-exp, fp32) read before the next (the Triton decode
	// kernels' _fwd_kernel_stage2): a dependent read per split, so its
	// time grows with the splits a sequence fills, whatever the bytes.
	SerialMerge bool `yaml:"serial_merge"`
}

// AttentionBackend is one MLA attention backend.
type AttentionBackend struct {
	// Name is the engine's spelling (TRITON_MLA, flashinfer); Aliases
	// are other spellings --attention-backend accepts.
	Name    string    `yaml:"name"`
	Aliases []string  `yaml:"aliases"`
	Archs   ArchSet   `yaml:"archs"`
	KV      []KVDtype `yaml:"kv"`
	// FP8KVArchs narrows an FP8 cache to these families (empty: Archs).
	FP8KVArchs ArchSet `yaml:"fp8_kv_archs"`
	// FP8KVNeeds, when set, is what an FP8 cache on the backend needs of
	// the engine's build on the families it names (vLLM's TRITON_MLA on
	// SM120 refused one until 2026): a caveat of a prediction that runs
	// it, and the condition advise's FP8-KV entry states.
	FP8KVNeeds *Condition `yaml:"fp8_kv_needs"`
	// QKNope, when set, lists the qk_nope_head_dim values the backend
	// runs (FlashInfer's trtllm-gen MLA: 128 only).
	QKNope []int `yaml:"qk_nope"`
	Grid   Grid  `yaml:"grid"`
	// Kernel is the decode kernel the schedule's attention op stands
	// for; Companions the other kernels one decode call launches (split
	// merges, metadata, buffer fills, query concatenation).
	Kernel     string   `yaml:"kernel"`
	Companions []string `yaml:"companions"`
	// CUDAGraph: "full" (decode captured whole) or "piecewise" (the
	// attention call runs eagerly between captured pieces).
	CUDAGraph string `yaml:"cuda_graph"`
	// DCP: the backend returns the log-sum-exp decode context
	// parallelism merges with.
	DCP bool `yaml:"dcp"`
	// Table is the kernel_source of its rows in aiconfigurator's MLA
	// module tables ("" when none were measured). NoStandIn: another
	// backend's or version's module rows must not price it (a split rule
	// that decides its time at long context differs from theirs); its
	// modules keep the priors.
	Table     string `yaml:"table"`
	NoStandIn bool   `yaml:"no_stand_in"`
	// Sparse: the backend runs DSA sparse attention (the query attends
	// to the indexer's top-k cached tokens) and nothing else; a dense one
	// cannot run a sparse model (vLLM's is_sparse, matched against the
	// model's use_sparse in backend selection).
	Sparse bool `yaml:"sparse"`
	// PageTokens is the KV page size the engine forces while this backend
	// runs (SGLang sets page_size 64 for flashmla, trtllm_mla and its DSA
	// backend whatever --page-size says); 0: the scheduler's block size
	// (SchedulerFacts.BlockTokens). It sets the pool's allocation unit.
	PageTokens int `yaml:"page_tokens"`
	// PageMultiples: a block size that is a multiple of PageTokens
	// stands (vLLM's 'block_size % 64 != 0' test for FlashMLA); else
	// only PageTokens and PageKeeps do. PageKeeps are the other sizes the
	// backend takes as given (TensorRT-LLM MLA's 32).
	PageMultiples bool     `yaml:"page_multiples"`
	PageKeeps     []int    `yaml:"page_keeps"`
	Cite          []string `yaml:"cite"`
}

// PageStep is one KV page rule an engine applies to the block size: a
// size it does not take becomes Tokens. Of names whose rule it is.
type PageStep struct {
	Tokens    int
	Multiples bool
	Keeps     []int
	Of        string
}

// takes reports whether the rule leaves block as it is.
func (s PageStep) takes(block int) bool {
	return block == s.Tokens || slices.Contains(s.Keeps, block) || (s.Multiples && block > 0 && block%s.Tokens == 0)
}

// KVPage is the page rules an engine applies, in order, to the KV block
// size of an MLA model before it runs (vLLM's check_and_update_config:
// the page of the backend it presumes, then the sparse backend's), none
// when it keeps the block size it is given.
type KVPage []PageStep

// Force is the block size the engine runs when block is asked for, and
// the rule that set it ("" when block stands).
func (k KVPage) Force(block int) (int, string) {
	of := ""
	for _, s := range k {
		if !s.takes(block) {
			block, of = s.Tokens, s.Of
		}
	}
	return block, of
}

// KVPage is the page rules the engine applies for use u with the
// attention backend override names ("" the engine's own choice): the
// page its choice on the GPU family sets before any backend is picked
// where its rule states one (AttentionRule.PageTokens), then the page of
// the backend that runs. nil when neither states one, or no backend runs.
func (p *Profile) KVPage(u MLAUse, override string) KVPage {
	b, err := p.Backend(u, override)
	if err != nil || b == nil {
		return nil
	}
	var k KVPage
	if override == "" {
		if r := p.rule(u); r != nil && r.PageTokens > 0 {
			k = append(k, PageStep{Tokens: r.PageTokens, Multiples: r.PageMultiples, Of: r.PageOf})
		}
	}
	if b.PageTokens > 0 {
		k = append(k, PageStep{Tokens: b.PageTokens, Multiples: b.PageMultiples, Keeps: b.PageKeeps, Of: b.Name})
	}
	return k
}

// rule is the automatic choice's rule that applies to u (the first whose
// families and model types match), nil when none does.
func (p *Profile) rule(u MLAUse) *AttentionRule {
	for i := range p.Attention.Select {
		r := &p.Attention.Select[i]
		if r.Archs.Has(u.Arch) && (len(r.ModelTypes) == 0 || slices.Contains(r.ModelTypes, u.ModelType)) {
			return r
		}
	}
	return nil
}

// MLAUse is what an MLA decode backend's validity depends on: the GPU
// family, the KV dtype, the model's qk_nope_head_dim (0: not checked),
// whether decode context parallelism merges partial results by their
// log-sum-exp, and whether the engine runs the model's DSA sparse
// attention sparse here (an indexer model not run dense: not
// --dense-dsa, nor a family the profile's dsa.dense_archs name).
type MLAUse struct {
	Arch   Arch
	KV     KVDtype
	QKNope int
	DCP    bool
	Sparse bool
	// ModelType is the model's config model_type ("": not known), which
	// a rule of the engine's may pick a backend by (AttentionRule).
	ModelType string
}

// Condition is what an engine's build must have for a fact of its
// profile to hold on the families Archs: Why says what builds without it
// did, Needs what the build must have.
type Condition struct {
	Archs ArchSet  `yaml:"archs"`
	Why   string   `yaml:"why"`
	Needs string   `yaml:"needs"`
	Cite  []string `yaml:"cite"`
}

// On reports whether the condition holds for family a (false for nil).
func (c *Condition) On(a Arch) bool { return c != nil && c.Archs.Has(a) }

// String is the condition for people, one clause: "WHY: needs NEEDS".
func (c *Condition) String() string { return c.Why + ": needs " + c.Needs }

// Matches reports whether s names the backend (its name or an alias,
// case and '-'/'_' ignored).
func (b *AttentionBackend) Matches(s string) bool {
	k := normName(s)
	if k == normName(b.Name) {
		return true
	}
	for _, a := range b.Aliases {
		if k == normName(a) {
			return true
		}
	}
	return false
}

func normName(s string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "-", "_")
}

// valid reports why the backend cannot run u (qkNope 0 = unknown, not
// checked; an FP8 cache is not gated on a device no family covers, a CPU
// stand-in; dcp: under decode context parallelism, which merges partial
// results by their log-sum-exp; sparse: a DSA model run sparse, where
// strict says the profile states sparse backends, so a dense one cannot
// stand in), "" when it can.
func (b *AttentionBackend) valid(u MLAUse, strict bool) string {
	a, kv, qkNope, dcp := u.Arch, u.KV, u.QKNope, u.DCP
	switch {
	case strict && !b.Sparse:
		return "is a dense MLA backend: a DSA model's sparse attention runs on a sparse one"
	case b.Sparse && !u.Sparse:
		return "runs DSA sparse attention only (the model's attention is dense here)"
	}
	if !b.Archs.Has(a) {
		return fmt.Sprintf("runs on %s only", archList(b.Archs))
	}
	if !slices.Contains(b.KV, kv) {
		return fmt.Sprintf("has no %s KV cache (it takes %s)", kv, kvList(b.KV))
	}
	if kv == KVFP8 && len(b.FP8KVArchs) > 0 && !b.FP8KVArchs.Has(a) && a != ArchUnknown {
		return fmt.Sprintf("takes an fp8 KV cache on %s only", archList(b.FP8KVArchs))
	}
	if qkNope > 0 && len(b.QKNope) > 0 && !slices.Contains(b.QKNope, qkNope) {
		return fmt.Sprintf("needs qk_nope_head_dim %v (the model has %d)", b.QKNope, qkNope)
	}
	if dcp && !b.DCP {
		return "returns no log-sum-exp for decode context parallelism"
	}
	return ""
}

// Backend returns the backend that runs MLA decode for u: the one named
// by override when set (an error when the engine has no such backend or
// it cannot run here), else the first valid one of the family's priority
// list. A sparse u takes only a sparse backend where the profile states
// any; a profile that states none prices its dense backends for it.
func (p *Profile) Backend(u MLAUse, override string) (*AttentionBackend, error) {
	a, kv := u.Arch, u.KV
	strict := u.Sparse && p.statesSparse()
	if override != "" {
		for i := range p.Attention.Backends {
			b := &p.Attention.Backends[i]
			if !b.Matches(override) {
				continue
			}
			if why := b.valid(u, strict); why != "" {
				if strict && !b.Sparse {
					// The engine's own refusal: every dense MLA backend
					// is invalid for a model that uses sparse attention.
					why += fmt.Sprintf(" (%s; --dense-dsa prices the model dense)", strings.Join(p.sparseNames(), ", "))
				}
				return nil, fmt.Errorf("%s's attention backend %s %s", p.Name(), b.Name, why)
			}
			return b, nil
		}
		return nil, fmt.Errorf("%s has no attention backend %q (it has %s)", p.Name(), override, strings.Join(p.backendNames(), ", "))
	}
	for _, r := range p.Attention.Select {
		if !r.Archs.Has(a) || (len(r.ModelTypes) > 0 && !slices.Contains(r.ModelTypes, u.ModelType)) {
			continue
		}
		var whys []string
		for _, n := range r.Order {
			b := p.backend(n)
			if b == nil {
				continue
			}
			why := b.valid(u, strict)
			if why == "" {
				return b, nil
			}
			whys = append(whys, b.Name+" "+why)
		}
		what := "MLA"
		if strict {
			// Priced as dense MLA the model still runs here.
			what = "sparse MLA"
			whys = append(whys, "--dense-dsa prices the model dense")
		}
		return nil, fmt.Errorf("%s has no %s attention backend for %s with a %s KV cache (%s)", p.Name(), what, a, kv, strings.Join(whys, "; "))
	}
	return nil, fmt.Errorf("%s has no MLA attention backend on %s", p.Name(), a)
}

// statesSparse reports whether the profile states a sparse MLA backend.
func (p *Profile) statesSparse() bool {
	return slices.ContainsFunc(p.Attention.Backends, func(b AttentionBackend) bool { return b.Sparse })
}

// sparseNames are the profile's sparse MLA backends.
func (p *Profile) sparseNames() []string {
	var out []string
	for _, b := range p.Attention.Backends {
		if b.Sparse {
			out = append(out, b.Name)
		}
	}
	return out
}

func (p *Profile) backend(name string) *AttentionBackend {
	for i := range p.Attention.Backends {
		if p.Attention.Backends[i].Name == name {
			return &p.Attention.Backends[i]
		}
	}
	return nil
}

func (p *Profile) backendNames() []string {
	out := make([]string, len(p.Attention.Backends))
	for i, b := range p.Attention.Backends {
		out[i] = b.Name
	}
	return out
}

// ------------------------------------------------------------------ MoE

// MoEFacts are the fused-MoE kernels and the choice per family and
// weight format.
type MoEFacts struct {
	Kernels []MoEKernel  `yaml:"kernels"`
	Select  []FormatRule `yaml:"select"`
}

// GEMMGrid is how a (grouped) GEMM kernel lays its work over the GPU.
type GEMMGrid string

const (
	// GridPersistent: one CTA per SM striping the whole problem
	// (Marlin): every SM streams weights whatever the token count.
	GridPersistent GEMMGrid = "persistent"
	// GridTiles: one CTA per TileM x TileN output tile of each expert
	// with rows, split along K only when SplitK (CUTLASS grouped GEMM,
	// Triton fused_moe).
	GridTiles GEMMGrid = "tiles"
)

// MoEKernel is one fused-MoE implementation.
type MoEKernel struct {
	Name    string         `yaml:"name"`
	Formats []WeightFormat `yaml:"formats"`
	Archs   ArchSet        `yaml:"archs"`
	Grid    GEMMGrid       `yaml:"grid"`
	TileM   int            `yaml:"tile_m"`
	TileN   int            `yaml:"tile_n"`
	SplitK  bool           `yaml:"split_k"`
	// Kernel is the expert GEMM kernel; Companions the kernels one layer
	// call launches besides the schedule's gate_up GEMM, activation and
	// down GEMM (alignment and sort, activation quantization, row
	// expansion, finalize / top-k sum).
	Kernel     string   `yaml:"kernel"`
	Companions []string `yaml:"companions"`
	// Table is a substring of the kernel_source of its rows in
	// aiconfigurator's MoE tables.
	Table string   `yaml:"table"`
	Cite  []string `yaml:"cite"`
	// Padded, where stated, is how its MMAs fill whole tiles.
	Padded *PaddedTiles `yaml:"padded"`
	// SerialWalk, where stated, is a companion that one thread runs
	// over every local expert in turn (SGLang's offsets walk, launched
	// <<<1, 1>>>): its time grows with the expert count, not a floor.
	SerialWalk *SerialWalk `yaml:"serial_walk"`
	// SMStream, where stated, is the most weight bytes one SM of the
	// kernel's grid turns into MMA operands per SM cycle: a kernel that
	// dequantizes on the CUDA cores and multiplies with mma.sync (Marlin)
	// is bound there, not by the DRAM, on a GPU whose SMs x clock x
	// this is below its memory bandwidth.
	SMStream *SMStream `yaml:"sm_stream"`
	// FormatArchs narrows a weight format to fewer of the kernel's
	// families than Archs: FlashInfer's CUTLASS MoE runs BF16 and FP8
	// experts on SM90 but NVFP4 ones only on GPUs with FP4 tensor cores
	// (ArchsFor).
	FormatArchs []FormatArchs `yaml:"format_archs"`
	// Runs names, per weight format the backend does not run itself,
	// the profile's kernel that the engine hands such weights to when
	// this backend is asked for (SGLang 0.5's triton backend runs NVFP4
	// experts through cutlass_moe_fp4): the user's spelling is kept, the
	// kernel that runs is priced.
	Runs []FormatRule `yaml:"runs"`
	// WorkspaceCaches says the kernel's intermediate caches (the
	// modular experts' workspace13 and workspace2 of (M, topk, ...)
	// values) come from the worker's one workspace buffer (vLLM's
	// WorkspaceManager), which a DSA indexer's profiling workspace
	// shares: that buffer is the larger of the two, not their sum
	// (model.WithIndexerWorkspace).
	WorkspaceCaches bool `yaml:"workspace_caches"`
}

// FormatArchs are the families a kernel runs weights of one format on,
// where they are fewer than all the kernel's families.
type FormatArchs struct {
	Format WeightFormat `yaml:"format"`
	Archs  ArchSet      `yaml:"archs"`
	Cite   []string     `yaml:"cite"`
}

// ArchsFor are the families k runs weights f on: its FormatArchs entry
// for f, else all of Archs.
func (k *MoEKernel) ArchsFor(f WeightFormat) ArchSet {
	for _, fa := range k.FormatArchs {
		if fa.Format == f {
			return fa.Archs
		}
	}
	return k.Archs
}

// SerialWalk is a companion kernel whose one thread loops over the
// layer's local experts, a few dependent global loads and stores each:
// it costs CyclesPerExpert SM cycles an expert on top of a kernel's
// floor.
type SerialWalk struct {
	// Companion names the kernel among the MoE kernel's companions.
	Companion string `yaml:"companion"`
	// CyclesPerExpert is measured: the walk's time per expert at a
	// known SM clock (the slope over expert counts), in cycles.
	CyclesPerExpert float64  `yaml:"cycles_per_expert"`
	Cite            []string `yaml:"cite"`
}

// SMStream is a measured per-SM streaming rate of a kernel (MoEKernel.
// SMStream) for the weight formats named.
type SMStream struct {
	// BytesPerClk is weight bytes (packed values and their scales) per SM
	// per SM cycle at the catalog's sustained clock.
	BytesPerClk float64        `yaml:"bytes_per_clk"`
	Formats     []WeightFormat `yaml:"formats"`
	// CallCycles, where stated, is the fused MoE call's fixed latency in
	// SM cycles beyond its streaming and its kernels' floors, measured
	// where the rate binds: the time the call takes at one token above
	// the per-expert stream. Where the DRAM binds instead, streaming
	// hides it (0 there).
	CallCycles float64  `yaml:"call_cycles"`
	Cite       []string `yaml:"cite"`
}

// maxCallCycles bounds SMStream.CallCycles: 1M cycles, half a
// millisecond at 2 GHz, thirty times the 32,400 measured for Marlin.
const maxCallCycles = 1e6

// GBps is the rate's ceiling on a device of sms SMs at clockMHz: sms x
// BytesPerClk x clock, in GB/s; 0 (no ceiling) for a nil rate, a format
// it does not name or a device without SMs or clock.
func (s *SMStream) GBps(f WeightFormat, sms, clockMHz float64) float64 {
	if s == nil || !slices.Contains(s.Formats, f) || !(sms > 0) || !(clockMHz > 0) {
		return 0
	}
	return sms * s.BytesPerClk * clockMHz / 1e3
}

// PaddedTiles say that a GEMM kernel's MMAs compute every row of their
// TileM x TileN output tiles however few tokens fill them, each tile one
// CTA that walks the whole K (no split-K), for the formats and families
// named: block-scaled FP4 tiles are at least 128 rows (the scale
// factors' 128-row atom), so at decode a tile of one token does the
// tensor work of 128, one K step after another on one SM.
type PaddedTiles struct {
	TileM   int            `yaml:"tile_m"`
	TileN   int            `yaml:"tile_n"`
	Formats []WeightFormat `yaml:"formats"`
	Archs   ArchSet        `yaml:"archs"`
	Cite    []string       `yaml:"cite"`
}

// On reports whether the tiles pad weights f on family a (false for nil).
func (t *PaddedTiles) On(a Arch, f WeightFormat) bool {
	return t != nil && t.Archs.Has(a) && slices.Contains(t.Formats, f)
}

// FormatRule picks a kernel for a weight format on some families.
type FormatRule struct {
	Archs  ArchSet      `yaml:"archs"`
	Format WeightFormat `yaml:"format"`
	Kernel string       `yaml:"kernel"`
	// EP, where stated (MoE rules only), limits the rule to experts
	// spread over more than one GPU by expert parallelism (true) or to
	// experts sharded by TP or on one GPU (false): vLLM's FP8 oracle
	// orders its backends by the MoE parallel config's ep_size on
	// Hopper.
	EP   *bool    `yaml:"ep"`
	Cite []string `yaml:"cite"`
}

// MoEKernel returns the fused-MoE kernel the engine runs for weights f on
// family a with experts spread over GPUs by expert parallelism or not
// (ep: EP over more than one GPU, vLLM's ep_size > 1): the one named by
// override when set (an error when the engine has no such kernel or it
// cannot run f here), else the first selection rule that matches.
func (p *Profile) MoEKernel(a Arch, f WeightFormat, ep bool, override string) (*MoEKernel, error) {
	if override != "" {
		for i := range p.MoE.Kernels {
			k := &p.MoE.Kernels[i]
			if !k.Is(override) {
				continue
			}
			if !slices.Contains(k.Formats, f) {
				if t := p.moeByRule(k.Runs, a, f, ep); t != nil {
					return t, nil
				}
				return nil, fmt.Errorf("%s's MoE kernel %s does not take %s experts", p.Name(), k.Name, f)
			}
			if archs := k.ArchsFor(f); !archs.Has(a) {
				if len(k.FormatArchs) > 0 {
					return nil, fmt.Errorf("%s's MoE kernel %s runs %s experts on %s only", p.Name(), k.Name, f, archList(archs))
				}
				return nil, fmt.Errorf("%s's MoE kernel %s runs on %s only", p.Name(), k.Name, archList(archs))
			}
			return k, nil
		}
		names := make([]string, len(p.MoE.Kernels))
		for i, k := range p.MoE.Kernels {
			names[i] = k.Name
		}
		return nil, fmt.Errorf("%s has no MoE kernel %q (it has %s)", p.Name(), override, strings.Join(names, ", "))
	}
	if k := p.moeByRule(p.MoE.Select, a, f, ep); k != nil {
		return k, nil
	}
	// No cited rule picks one, but a kernel the profile lists for these
	// weights on this family runs when named: say which, rather than
	// guess the engine's default.
	var runs []string
	for _, k := range p.MoE.Kernels {
		if slices.Contains(k.Formats, f) && k.ArchsFor(f).Has(a) {
			runs = append(runs, k.Name)
		}
	}
	if len(runs) > 0 {
		return nil, fmt.Errorf("%s has no default MoE kernel for %s experts on %s: pass --moe-kernel %s", p.Name(), f, a, strings.Join(runs, " or "))
	}
	return nil, fmt.Errorf("%s has no MoE kernel for %s experts on %s", p.Name(), f, a)
}

// Is reports whether name (a user's spelling: case, dashes) names k.
func (k *MoEKernel) Is(name string) bool { return normName(name) == normName(k.Name) }

// moeByRule is the MoE kernel the first of rules (the profile's select
// rules, or a kernel's Runs) names for weights f on family a with expert
// parallelism ep (a rule stating EP holds for that one only), nil when
// none matches.
func (p *Profile) moeByRule(rules []FormatRule, a Arch, f WeightFormat, ep bool) *MoEKernel {
	for _, r := range rules {
		if r.Format != f || !r.Archs.Has(a) || (r.EP != nil && *r.EP != ep) {
			continue
		}
		for i := range p.MoE.Kernels {
			if p.MoE.Kernels[i].Name == r.Kernel {
				return &p.MoE.Kernels[i]
			}
		}
	}
	return nil
}

// --------------------------------------------------------------- linear

// LinearFacts are the dense-GEMM kernels per weight format.
type LinearFacts struct {
	Kernels []LinearKernel `yaml:"kernels"`
	Select  []FormatRule   `yaml:"select"`
}

// LinearKernel is a dense GEMM (nn.Linear) implementation.
type LinearKernel struct {
	Name    string         `yaml:"name"`
	Formats []WeightFormat `yaml:"formats"`
	Archs   ArchSet        `yaml:"archs"`
	// Companions are kernels each call launches besides the GEMM (the
	// input's quantization for a W4A4 or W8A8 kernel), unless a fusion
	// named in FusedBy folds them into the op before.
	Companions []string `yaml:"companions"`
	FusedBy    string   `yaml:"fused_by"`
	Table      string   `yaml:"table"`
	Cite       []string `yaml:"cite"`
	// Padded, where stated, is how its MMAs fill whole tiles.
	Padded *PaddedTiles `yaml:"padded"`
	// SplitKReduce, where stated, is the reduction kernel the library
	// launches after a GEMM whose K it split (cuBLAS's
	// cublasLt::splitKreduce_kernel at decode sizes), one more kernel on
	// the op.
	SplitKReduce *SplitKReduce `yaml:"split_k_reduce"`
}

// SplitKReduce is a dense-GEMM library's split-K reduction as a kernel of
// its own: on the families Archs, a GEMM of M tokens, K values along K
// and N outputs is split along K, and Kernel sums the partial products
// after it, when K is at least MinK and N at most the ratio of K that
// the first of ByTokens covering M allows (a GEMM of more tokens than the
// last covers runs unsplit: not seen).
type SplitKReduce struct {
	Kernel   string          `yaml:"kernel"`
	MinK     int64           `yaml:"min_k"`
	ByTokens []SplitKByToken `yaml:"by_tokens"`
	Archs    ArchSet         `yaml:"archs"`
	Cite     []string        `yaml:"cite"`
}

// SplitKByToken bounds the outputs a split GEMM of at most MaxM tokens
// has: N <= MaxNOverK x K.
type SplitKByToken struct {
	MaxM      int64   `yaml:"max_m"`
	MaxNOverK float64 `yaml:"max_n_over_k"`
}

// Splits reports whether a GEMM of m tokens, k values along K and n
// outputs runs the reduction kernel on family a (false for nil).
func (r *SplitKReduce) Splits(a Arch, m, k, n int64) bool {
	if r == nil || !r.Archs.Has(a) || k < r.MinK {
		return false
	}
	for _, b := range r.ByTokens {
		if m <= b.MaxM {
			return float64(n) <= b.MaxNOverK*float64(k)
		}
	}
	return false
}

// LinearKernel returns the dense-GEMM kernel for weights f on family a;
// nil (no error) when the profile states none for f, which then runs as
// the schedule lists it.
func (p *Profile) LinearKernel(a Arch, f WeightFormat) *LinearKernel {
	for _, r := range p.Linear.Select {
		if r.Format != f || !r.Archs.Has(a) {
			continue
		}
		for i := range p.Linear.Kernels {
			if p.Linear.Kernels[i].Name == r.Kernel {
				return &p.Linear.Kernels[i]
			}
		}
	}
	return nil
}

// ------------------------------------------------------------- fusions

// Fusion names, as profiles spell them.
const (
	// FuseAllReduceRMSNorm: the all-reduce and the residual add + RMSNorm
	// after it run as one kernel (vLLM fuse_allreduce_rms).
	FuseAllReduceRMSNorm = "allreduce_rmsnorm"
	// FuseActQuant: SiLU-and-mul and the next GEMM's input quantization
	// in one kernel (vLLM fuse_act_quant).
	FuseActQuant = "act_quant"
	// FuseNormQuant: RMSNorm and the next GEMM's input quantization in
	// one kernel (vLLM fuse_norm_quant).
	FuseNormQuant = "norm_quant"
)

// Fusion is a compiler fusion at the profile's version.
type Fusion struct {
	Name string `yaml:"name"`
	// Archs the pass applies on; Default whether it is on without a
	// flag; MinTP the smallest tensor-parallel degree it applies at.
	Archs   ArchSet `yaml:"archs"`
	Default bool    `yaml:"default"`
	MinTP   int     `yaml:"min_tp"`
	// MaxTokens is the most tokens a step may carry for the fused kernel
	// to run (0: no limit the profile knows of); above it the engine runs
	// the unfused ops (SGLang's FUSE_ALLREDUCE_MAX_BATCH_SIZE: a larger
	// prefill chunk all-reduces and normalizes apart).
	MaxTokens int `yaml:"max_tokens"`
	// MaxInputMiB caps the all-reduce input the fused kernel takes, in
	// MiB, by the device's exact compute capability ("9.0") and the TP
	// degree (vLLM's FI_ALLREDUCE_FUSION_MAX_SIZE_MB): a larger message
	// all-reduces and normalizes apart, and where the fusion states caps
	// a capability or TP degree it lists none for runs no fusion at all
	// (vLLM disables the pass for a world size its table lacks). None:
	// no cap by size.
	MaxInputMiB map[string]map[int]float64 `yaml:"max_input_mib"`
	// OneShotMaxInputMiB, where stated, is how the fused kernel picks its
	// algorithm, keyed as MaxInputMiB: a message of at most this many MiB
	// runs its one-shot (Lamport) kernel, a larger one its two-shot one.
	// The fused kernel is FlashInfer's trtllm_allreduce_fusion, not the
	// engine's custom all-reduce, so the custom all-reduce's byte rule
	// (and the symmetric-memory caps on it) do not pick for it: vLLM
	// passes use_oneshot by its own table (_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB),
	// SGLang passes none and FlashInfer's heuristic decides
	// (_should_use_oneshot). Unstated: the custom all-reduce's rule.
	OneShotMaxInputMiB map[string]map[int]float64 `yaml:"oneshot_max_input_mib"`
	// Off is how a deployment turns a default fusion off ("" where the
	// profile states no switch: then it cannot be priced off), e.g.
	// TensorRT-LLM's TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1; only a
	// default fusion states one.
	Off string `yaml:"off"`
	// ModelTypes, when stated, limit the default to models of these
	// config model_types: an engine that turns the fusion on for a list
	// of model architectures (SGLang's _handle_model_specific_adjustments:
	// DeepseekV3ForCausalLM and KimiK25ForConditionalGeneration, not
	// GLM-5's GlmMoeDsaForCausalLM); another model runs it only behind
	// the engine's flag. Only a default fusion states them.
	ModelTypes []string `yaml:"model_types"`
	// ExceptDevices are the device names (nvidia-smi's, as the topology
	// catalog holds them) the engine leaves the default off on (SGLang
	// skips the H20 for a FlashInfer bug there). Only a default fusion
	// states them.
	ExceptDevices []string `yaml:"except_devices"`
	// DPAttention: a default fusion stays on under DP attention (TP > 1
	// inside each of DP > 1 ranks), as vLLM's fuse_allreduce_rms does
	// since its data_parallel_size == 1 gate went (PR #41458). Unset,
	// the engine fuses only without DP attention.
	DPAttention bool     `yaml:"dp_attention"`
	Cite        []string `yaml:"cite"`
}

// FusionUse is what a fusion's default depends on: the device's compute
// capability ("9.0") and name (nvidia-smi's), the TP degree, the DP
// attention ranks (0 or 1: none) and the model's config model_type.
type FusionUse struct {
	CC, Device string
	TP, DP     int
	ModelType  string
}

// defaultHolds reports whether f, a default fusion, is on for u's model
// and device (its ModelTypes and ExceptDevices; its families and TP are
// the caller's to check).
func (f *Fusion) defaultHolds(u FusionUse) bool {
	return (len(f.ModelTypes) == 0 || slices.Contains(f.ModelTypes, u.ModelType)) && !slices.Contains(f.ExceptDevices, u.Device)
}

// FusionMaxTokens is the most tokens a step may carry for fusion name to
// apply (0: no limit stated).
func (p *Profile) FusionMaxTokens(name string) int {
	if f := p.fusion(name); f != nil {
		return f.MaxTokens
	}
	return 0
}

// fusion is the profile's fusion name (names are unique: validate), nil
// where it lists none.
func (p *Profile) fusion(name string) *Fusion {
	for i := range p.Fusions {
		if p.Fusions[i].Name == name {
			return &p.Fusions[i]
		}
	}
	return nil
}

// FusionArchs are the families the profile lists fusion name on, by
// default or behind a flag; false when it lists the fusion nowhere.
func (p *Profile) FusionArchs(name string) (ArchSet, bool) {
	var out ArchSet
	listed := false
	for _, f := range p.Fusions {
		if f.Name == name {
			out, listed = append(out, f.Archs...), true
		}
	}
	return out, listed
}

// Fused reports whether fusion name is on by default on family a at
// tensor-parallel degree tp.
func (p *Profile) Fused(name string, a Arch, tp int) bool {
	for _, f := range p.Fusions {
		if f.Name == name && f.Default && f.Archs.Has(a) && tp >= f.MinTP {
			return true
		}
	}
	return false
}

// FusedOn reports whether fusion name is on by default for u: Fused on
// its device's family at its TP degree, for its model and device (the
// fusion's ModelTypes and ExceptDevices), and, where the fusion states
// size caps (MaxInputMiB), a cap for its capability and TP degree
// (without one the engine runs no fusion there).
func (p *Profile) FusedOn(name string, u FusionUse) bool {
	return p.defaultFusion(name, u) != nil
}

// defaultFusion is fusion name where it is on by default for u; nil
// where it is not.
func (p *Profile) defaultFusion(name string, u FusionUse) *Fusion {
	a, _ := ArchOf(u.CC)
	for i := range p.Fusions {
		f := &p.Fusions[i]
		if f.Name != name || !f.Default || !f.Archs.Has(a) || u.TP < f.MinTP || (u.DP > 1 && !f.DPAttention) || !f.defaultHolds(u) {
			continue
		}
		if len(f.MaxInputMiB) > 0 {
			if _, ok := f.MaxInputMiB[u.CC][u.TP]; !ok {
				return nil
			}
		}
		return f
	}
	return nil
}

// FusionMaxInputBytes is the largest all-reduce input, in bytes, fusion
// name's kernel takes on a device of compute capability cc at TP degree
// tp; 0 where the profile states no cap there.
func (p *Profile) FusionMaxInputBytes(name, cc string, tp int) int64 {
	if f := p.fusion(name); f != nil {
		return int64(f.MaxInputMiB[cc][tp] * (1 << 20))
	}
	return 0
}

// FusedOneShotMaxBytes is the largest all-reduce input, in bytes, the
// all-reduce + RMSNorm fusion's kernel runs one-shot on a device of
// compute capability cc at TP degree tp; ok false where the fusion
// states no such rule there (Fusion.OneShotMaxInputMiB).
func (p *Profile) FusedOneShotMaxBytes(cc string, tp int) (maxBytes int64, ok bool) {
	if f := p.fusion(FuseAllReduceRMSNorm); f != nil {
		mib, has := f.OneShotMaxInputMiB[cc][tp]
		return int64(mib * (1 << 20)), has
	}
	return 0, false
}

// FusionOff is the switch that turns fusion name off where it is on by
// default for u (FusedOn): fused says whether it is on by default there,
// off the profile's switch ("" when it states none).
func (p *Profile) FusionOff(name string, u FusionUse) (off string, fused bool) {
	if f := p.defaultFusion(name, u); f != nil {
		return f.Off, true
	}
	return "", false
}

// ---------------------------------------------------------- CUDA graphs

// CUDAGraphs is the engine's default graph mode and capture sizes.
type CUDAGraphs struct {
	// Mode: the engine's name for its default (FULL_AND_PIECEWISE, ...).
	Mode string `yaml:"mode"`
	// Sizes are the captured batch sizes in tokens: the listed ones and
	// every Ranges entry's From, From+Step, ... up to To.
	Sizes  []int       `yaml:"sizes"`
	Ranges []SizeRange `yaml:"ranges"`
	// PiecewiseEager are the schedule's roles (model.Role's text) that a
	// piecewise graph leaves out of its captured pieces: the ops inside
	// the engine's attention custom op, launched eagerly between pieces
	// (vLLM's splitting ops). A step runs piecewise when its decode
	// attention backend captures piecewise only (AttentionBackend.CUDAGraph).
	PiecewiseEager []string `yaml:"piecewise_eager"`
	// PiecewiseEagerPrefill are the roles the same custom op launches for
	// a step's prompt tokens (vLLM's MLA forward_mha: the latent's
	// kv_b_proj expansion, the prefill attention, the cached prefix's
	// chunks), eager between the pieces of a step that has prefill tokens
	// and is captured piecewise (MixedPiecewise), beside PiecewiseEager's.
	PiecewiseEagerPrefill []string `yaml:"piecewise_eager_prefill"`
	// PrefillEager: graphs replay decode steps only, and a step with
	// prefill tokens (a prompt's chunk, alone or beside decodes) runs
	// eagerly (SGLang's CudaGraphRunner). Otherwise a step whose tokens fit
	// a captured size replays one (vLLM v1's piecewise graphs for mixed
	// steps).
	PrefillEager bool `yaml:"prefill_eager"`
	// Unpadded: a step replays a graph only when its batch is a captured
	// size exactly, and runs eagerly otherwise (TensorRT-LLM's default,
	// CudaGraphConfig.enable_padding false); else it pads up to the next
	// captured size.
	Unpadded bool `yaml:"unpadded"`
	// DCPPiecewise: under decode context parallelism the engine captures
	// piecewise whatever the attention backend (vLLM overrides
	// FULL_AND_PIECEWISE to PIECEWISE: DCP's per-step KV lengths would be
	// frozen into a full graph), so the PiecewiseEager ops run eagerly.
	DCPPiecewise bool `yaml:"dcp_piecewise"`
	// EagerHostUs is the host time per kernel of the engine's eager
	// forward, microseconds: its Python model code, framework dispatch and
	// launch, spread over the kernels tpscope schedules. It replaces the
	// device's launch_eager_us (the catalog's assumption for a plain eager
	// launch path) for the kernels this engine launches outside a graph,
	// and decides how long an eager step that is host-bound takes; a
	// launch_eager_us calibrated from a trace is kept. 0: the device's.
	EagerHostUs float64 `yaml:"eager_host_us"`
	// EagerPrefillLayerHostUs is the host time of an eager step that
	// carries prompt tokens (an extend batch), per decoder layer the rank
	// runs, microseconds: the engine's Python prefill iteration (its
	// prefill attention path, batch preparation, sampling and the first
	// token's output), measured as the time to first token of a lightly
	// loaded server. It replaces EagerHostUs for such a step's layers,
	// each layer's time shared by the kernels the host launches for it, so
	// a step that is host-bound takes it and one whose kernels take longer
	// hides it.
	// 0: EagerHostUs a kernel. A launch_eager_us calibrated from a trace is
	// kept, as for EagerHostUs.
	EagerPrefillLayerHostUs float64 `yaml:"eager_prefill_layer_host_us"`
	// MaxBS is the largest decode batch the engine captures by default,
	// by the GPU's memory and the engine's TP size (SGLang's
	// cuda_graph_max_bs): the capture list stops at it, so a larger batch
	// runs eagerly, and the engine's KV reserve counts it (kv_pool). None:
	// the whole list on every GPU.
	MaxBS []GraphMaxBSTier `yaml:"max_bs"`
	// ServingMax, when set, is the engine's rule for the largest capture
	// size from its scheduler's limits (vLLM's _set_cudagraph_sizes): the
	// list stops there, so a larger step runs eagerly. None: the list as
	// it stands whatever the limits.
	ServingMax *GraphServingMax `yaml:"serving_max"`
	// CapturePool: every capture list of the engine (this decode list,
	// and its speculative one) stops at its request pool, the pool's own
	// size added where the list runs past it (StopAtPool; SGLang's
	// get_batch_sizes_to_capture keeps the batches <=
	// req_to_token_pool.size, whose size is max_running_requests where a
	// limit is set on the server, given or 48 under speculation; without
	// one at least 2,048, above every cuda_graph_max_bs).
	CapturePool bool     `yaml:"capture_pool"`
	Cite        []string `yaml:"cite"`
}

// MixedPiecewise reports whether the engine's mode captures a step with
// prefill tokens (a prompt's chunk, alone or beside decodes) piecewise:
// vLLM's FULL_AND_PIECEWISE (mixed_mode PIECEWISE; only a uniform decode
// batch dispatches to a FULL graph, CudagraphDispatcher) and PIECEWISE.
func (g *CUDAGraphs) MixedPiecewise() bool {
	return g.Mode == "FULL_AND_PIECEWISE" || g.Mode == "PIECEWISE"
}

// GraphServingMax is an engine's rule for its capture sizes under a
// scheduler's limits (ServingCaptureSizes): the listed sizes up to
// min(max_num_seqs x (1 + k) x SeqsFactor, the list's largest,
// max_num_batched_tokens), k the speculative tokens a decoding sequence
// verifies.
type GraphServingMax struct {
	// SeqsFactor: the running requests' decode tokens are counted this
	// many times over (vLLM's 2), so a full decode batch fits well inside.
	SeqsFactor int `yaml:"seqs_factor"`
	// AddBudget: max_num_batched_tokens is captured too when it is the
	// largest size, on the grid or not (vLLM PR #40734).
	AddBudget bool `yaml:"add_budget"`
	// SpecMultiple: with speculative tokens, where decode steps capture
	// full graphs, every size rounds up to a multiple of 1 + k and those
	// above the largest drop out, or 1 + k alone where none stays (vLLM's
	// adjust_cudagraph_sizes_for_spec_decode: a uniform decode batch is
	// 1 + k tokens a request).
	SpecMultiple bool     `yaml:"spec_multiple"`
	Cite         []string `yaml:"cite"`
}

// ServingCaptureSizes are the capture sizes in tokens of an engine whose
// scheduler runs at most maxSeqs requests in a step of at most
// budgetTokens tokens, each decoding sequence verifying k speculative
// tokens, its decode steps captured full (fullDecode) or piecewise, by the
// profile's cuda_graphs.serving_max; ok is false where the profile states
// no such rule (the list stands). Empty only where 1 + k exceeds every
// size, which the engine refuses at start-up.
func (p *Profile) ServingCaptureSizes(maxSeqs, budgetTokens, k int, fullDecode bool) (sizes []int, ok bool) {
	r := p.Graphs.ServingMax
	grid := p.CaptureSizes()
	if r == nil || len(grid) == 0 || maxSeqs < 1 || budgetTokens < 1 {
		return nil, false
	}
	q := 1 + max(k, 0)
	largest := min(int64(maxSeqs)*int64(q)*int64(r.SeqsFactor), int64(grid[len(grid)-1]), int64(budgetTokens))
	for _, s := range grid {
		if int64(s) <= largest {
			sizes = append(sizes, s)
		}
	}
	if r.AddBudget && int64(budgetTokens) == largest && !slices.Contains(sizes, budgetTokens) {
		sizes = append(sizes, budgetTokens)
	}
	if !r.SpecMultiple || q == 1 || !fullDecode || len(sizes) == 0 {
		return sizes, true
	}
	top := sizes[len(sizes)-1]
	var rounded []int
	for _, s := range sizes {
		if u := (s + q - 1) / q * q; u <= top {
			rounded = append(rounded, u)
		}
	}
	slices.Sort(rounded)
	rounded = slices.Compact(rounded)
	if len(rounded) == 0 && q <= top {
		rounded = []int{q}
	}
	return rounded, true
}

// GraphMaxBSTier is one row of CUDAGraphs.MaxBS: on a GPU of less than
// BelowMiB (0: any larger GPU, the last tier) and a TP size of at least
// MinTP (0 or 1: any), the largest captured batch is BS. A tier's rows
// share BelowMiB and rise in MinTP; the GPU's tier takes the last row
// its TP size reaches.
type GraphMaxBSTier struct {
	BelowMiB int64 `yaml:"below_mib"`
	MinTP    int   `yaml:"min_tp"`
	BS       int   `yaml:"bs"`
}

// GraphMaxBS is the largest batch the engine captures by default on a GPU
// of memBytes in an engine of tpSize GPUs (CUDAGraphs.MaxBS; SGLang's
// cuda_graph_max_bs, which its tp_size counts every GPU of the engine
// for), or the largest capture size when the profile states no tiers.
func (p *Profile) GraphMaxBS(memBytes int64, tpSize int) int {
	sizes := p.CaptureSizes()
	if len(p.Graphs.MaxBS) == 0 {
		if len(sizes) == 0 {
			return 0
		}
		return sizes[len(sizes)-1]
	}
	mib := memBytes / MiB
	bs, tier, found := 0, int64(0), false
	for _, t := range p.Graphs.MaxBS {
		switch {
		case found && t.BelowMiB != tier:
			return bs // past the GPU's tier
		case !found && t.BelowMiB != 0 && mib >= t.BelowMiB:
			continue // a smaller GPU's tier
		}
		found, tier = true, t.BelowMiB
		if tpSize >= t.MinTP {
			bs = t.BS
		}
	}
	return bs
}

// CaptureSizesFor are the capture sizes on a GPU of memBytes in an engine
// of tpSize GPUs: CaptureSizes up to GraphMaxBS (callers must not modify
// it).
func (p *Profile) CaptureSizesFor(memBytes int64, tpSize int) []int {
	s := p.CaptureSizes()
	n, _ := slices.BinarySearch(s, p.GraphMaxBS(memBytes, tpSize)+1)
	return s[:n:n]
}

// PoolCaptureSizes are the decode capture sizes on a GPU of memBytes in
// an engine of tpSize GPUs whose request pool holds pool requests (0:
// unknown): CaptureSizesFor stopped at the pool (StopAtPool). A decode
// sequence is one token, so the batches are the sizes.
func (p *Profile) PoolCaptureSizes(memBytes int64, tpSize, pool int) []int {
	return p.StopAtPool(p.CaptureSizesFor(memBytes, tpSize), pool)
}

// SizeRange is From, From+Step, ..., up to To inclusive.
type SizeRange struct {
	From int `yaml:"from"`
	To   int `yaml:"to"`
	Step int `yaml:"step"`
}

// CaptureSizes lists the capture sizes, increasing.
func (g *CUDAGraphs) CaptureSizes() []int {
	out := slices.Clone(g.Sizes)
	for _, r := range g.Ranges {
		for s := r.From; s <= r.To && r.Step > 0; s += r.Step {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ------------------------------------------------------ custom all-reduce

// CustomAR are the rules under which the engine runs its own all-reduce
// kernel instead of NCCL for a TP all-reduce.
type CustomAR struct {
	// Enabled: the engine has one at all.
	Enabled bool `yaml:"enabled"`
	// WorldSizes it supports; PCIeMaxGPUs the largest group it runs on
	// GPUs without NVLink between every pair (above it, NCCL).
	WorldSizes  []int `yaml:"world_sizes"`
	PCIeMaxGPUs int   `yaml:"pcie_max_gpus"`
	// MaxBytes the largest message; OneShotBelowBytes where it switches
	// from one-shot to two-shot, OneShotBelowBytesByWorld where that
	// differs by world size, and OneShotAlways the world sizes that run
	// one-shot at every size.
	MaxBytes                 int64         `yaml:"max_bytes"`
	OneShotBelowBytes        int64         `yaml:"oneshot_below_bytes"`
	OneShotBelowBytesByWorld map[int]int64 `yaml:"oneshot_below_bytes_by_world"`
	OneShotAlways            []int         `yaml:"oneshot_always"`
	// StrategyTable, when stated, is the engine's own pick among one-shot,
	// two-shot and NCCL for a message its kernel may carry (world size,
	// NVLink and MaxBytes hold), in place of OneShotBelowBytes: TensorRT-
	// LLM's AUTO lookup table, keyed by what the engine keys it by.
	StrategyTable []ARStrategyRow `yaml:"strategy_table"`
	Cite          []string        `yaml:"cite"`
}

// ARStrategyRow is one row of an all-reduce strategy table: for devices
// of SM bucket SM (90: every GPU before SM 10.0, 100: SM 10.0 and later),
// TP degree TP (a group's size rounded down to a power of two), fusion op
// Fusion and hidden size Hidden (the model's hidden size rounded down to a
// power of two), Codes holds the engine's strategy codes by token count:
// the i-th character is for 2^i to 2^(i+1)-1 tokens, '4' one-shot, '5'
// two-shot, '0' NCCL (AllReduceStrategyType's values); past the last
// character, NCCL.
type ARStrategyRow struct {
	SM     int      `yaml:"sm"`
	TP     int      `yaml:"tp"`
	Fusion ARFusion `yaml:"fusion"`
	Hidden int64    `yaml:"hidden"`
	Codes  string   `yaml:"codes"`
}

// ARFusion is the operation an all-reduce kernel applies after the
// reduction, by the engine's name (AllReduceFusionOp).
type ARFusion string

const (
	// ARFusionNone: a plain all-reduce.
	ARFusionNone ARFusion = "none"
	// ARFusionResidualRMSNorm: the residual add and the RMSNorm after the
	// all-reduce run in its kernel (RESIDUAL_RMS_NORM).
	ARFusionResidualRMSNorm ARFusion = "residual_rms_norm"
)

// ARMessage is one TP all-reduce as the engine's strategy choice sees
// it: its buffer in bytes, the tokens and hidden size it holds, and
// whether the engine asks its kernel to apply the residual add and RMSNorm
// after it (the fusion op it passes).
type ARMessage struct {
	Bytes, Tokens, Hidden int64
	Fused                 bool
}

// Fusion is the message's fusion op.
func (m ARMessage) Fusion() ARFusion {
	if m.Fused {
		return ARFusionResidualRMSNorm
	}
	return ARFusionNone
}

// strategySM is the table bucket of compute capability cc: 90 below SM
// 10.0, 100 from it (selectStrategyLookUpTable maps every earlier SM to
// 90 and every later one to 100); ok false for an unreadable cc.
func strategySM(cc string) (int, bool) {
	maj, _, _ := strings.Cut(strings.TrimSpace(cc), ".")
	major, err := strconv.Atoi(maj)
	if err != nil || major < 1 {
		return 0, false
	}
	if major < 10 {
		return 90, true
	}
	return 100, true
}

// floorPow2 is the largest power of two not above v (v >= 1).
func floorPow2(v int64) int64 {
	return int64(1) << (bits.Len64(uint64(v)) - 1)
}

// tableRow is the strategy table's row for a message of hidden size
// hidden and fusion f over n GPUs of compute capability cc; nil where
// the table has none (the engine's out-of-bounds fallback: NCCL).
func (c *CustomAR) tableRow(cc string, n int, f ARFusion, hidden int64) *ARStrategyRow {
	sm, ok := strategySM(cc)
	if !ok || n < 2 || hidden < 1 {
		return nil
	}
	tp, h := int(floorPow2(int64(n))), floorPow2(hidden)
	for i := range c.StrategyTable {
		r := &c.StrategyTable[i]
		if r.SM == sm && r.TP == tp && r.Fusion == f && r.Hidden == h {
			return r
		}
	}
	return nil
}

// code is the row's strategy for tokens tokens (the token count rounded
// down to a power of two); NCCL past the row's end.
func (r *ARStrategyRow) code(tokens int64) byte {
	if tokens < 1 {
		tokens = 1
	}
	i := bits.Len64(uint64(tokens)) - 1
	if r == nil || i >= len(r.Codes) {
		return '0'
	}
	return r.Codes[i]
}

// TableBands describes the table's choice for messages of hidden size
// hidden and fusion f over n GPUs of compute capability cc as token bands
// ("one-shot up to 127 tokens, NCCL (norm apart) from 128 tokens"), the
// custom kernel's bands
// ending where a message outgrows MaxBytes; "" without a table.
func (c *CustomAR) TableBands(cc string, n int, f ARFusion, hidden int64) string {
	if len(c.StrategyTable) == 0 || hidden < 1 {
		return ""
	}
	r := c.tableRow(cc, n, f, hidden)
	maxTok := c.MaxBytes / (hidden * 2) // bf16 activations
	type band struct {
		from, to int64 // to -1: no end
		code     byte
	}
	var bands []band
	add := func(from, to int64, code byte) {
		if k := len(bands); k > 0 && bands[k-1].code == code {
			bands[k-1].to = to
			return
		}
		bands = append(bands, band{from, to, code})
	}
	for i := 0; ; i++ {
		lo, hi := int64(1)<<i, int64(1)<<(i+1)-1
		code := r.code(lo)
		if r == nil || i >= len(r.Codes) || lo > maxTok {
			add(lo, -1, '0')
			break
		}
		if code != '0' && hi > maxTok {
			// The workspace cap cuts the band: above it, NCCL.
			add(lo, maxTok, code)
			add(maxTok+1, -1, '0')
			break
		}
		add(lo, hi, code)
	}
	name := map[byte]string{'4': "one-shot", '5': "two-shot", '0': "NCCL"}
	if f == ARFusionResidualRMSNorm {
		name['0'] = "NCCL (norm apart)"
	}
	parts := make([]string, len(bands))
	for k, b := range bands {
		if b.to < 0 {
			parts[k] = fmt.Sprintf("%s from %d tokens", name[b.code], b.from)
		} else {
			parts[k] = fmt.Sprintf("%s up to %d tokens", name[b.code], b.to)
		}
	}
	return strings.Join(parts, ", ")
}

// Runs reports whether the custom all-reduce may carry a group of n GPUs
// (allNVLink: NVLink joins every pair) for a message of b bytes, and
// whether one-shot by the byte rule (a profile with a StrategyTable picks
// by Pick instead).
func (c *CustomAR) Runs(n int, allNVLink bool, b int64) (ok, oneShot bool) {
	if !c.Enabled || n < 2 || b > c.MaxBytes || !slices.Contains(c.WorldSizes, n) {
		return false, false
	}
	if !allNVLink && n > c.PCIeMaxGPUs {
		return false, false
	}
	if slices.Contains(c.OneShotAlways, n) {
		return true, true
	}
	below := c.OneShotBelowBytes
	if v, ok := c.OneShotBelowBytesByWorld[n]; ok {
		below = v
	}
	return true, b < below
}

// ------------------------------------------ symmetric-memory all-reduce

// SymmMemAR is the engine's all-reduce over symmetric memory (vLLM's
// SymmMemCommunicator: torch's multimem_all_reduce_ on the world sizes
// that take it, two_shot_all_reduce_ on the rest). It runs on the listed
// families where the group's GPUs share an NVSwitch (it needs multicast
// memory), and there it also caps the custom all-reduce at smaller
// messages than the custom all-reduce's own maximum.
type SymmMemAR struct {
	Rules []SymmMemRule `yaml:"rules"`
	Cite  []string      `yaml:"cite"`
}

// SymmMemRule is the symmetric-memory all-reduce on some families, per
// world size.
type SymmMemRule struct {
	Archs ArchSet `yaml:"archs"`
	// Capabilities narrows the rule to devices of these exact compute
	// capabilities ("10.3"): vLLM keys its tables by the capability string
	// (all_reduce_utils.py), so SM 10.3 GPUs (B300, GB300) have limits of
	// their own within the sm100 family. A rule naming the device's
	// capability is taken before a rule of its family without any.
	Capabilities []string `yaml:"capabilities"`
	// CustomMaxBytes: the custom all-reduce carries messages below this
	// where symmetric memory runs (vLLM's CUSTOM_ALL_REDUCE_MAX_SIZES).
	CustomMaxBytes map[int]int64 `yaml:"custom_max_bytes"`
	// MaxBytes: symmetric memory carries the messages below this that the
	// custom all-reduce leaves (SYMM_MEM_ALL_REDUCE_MAX_SIZES); NCCL the
	// rest. A world size without an entry does not run it.
	MaxBytes map[int]int64 `yaml:"max_bytes"`
	// Multimem: the world sizes that run multimem_all_reduce_ (the others
	// two_shot_all_reduce_).
	Multimem []int `yaml:"multimem_world_sizes"`
}

// ARPath is what carries one TP all-reduce.
type ARPath uint8

const (
	ARNCCL ARPath = iota
	ARCustomOneShot
	ARCustomTwoShot
	// ARSymmMultimem and ARSymmTwoShot: the symmetric-memory all-reduce's
	// two kernels.
	ARSymmMultimem
	ARSymmTwoShot
)

var arPathNames = [...]string{"NCCL", "custom one-shot", "custom two-shot", "symmetric-memory multimem", "symmetric-memory two-shot"}

func (a ARPath) String() string {
	if int(a) < len(arPathNames) {
		return arPathNames[a]
	}
	return "ARPath(" + strconv.Itoa(int(a)) + ")"
}

// symmRule is the rule that runs symmetric memory on n GPUs of family a
// and compute capability cc sharing an NVSwitch (the one naming cc, else
// the first of the family naming none), or nil.
func (s *SymmMemAR) symmRule(a Arch, cc string, n int, nvswitch bool) *SymmMemRule {
	if !nvswitch {
		return nil
	}
	var family *SymmMemRule
	for i := range s.Rules {
		r := &s.Rules[i]
		if _, ok := r.MaxBytes[n]; !ok || !r.Archs.Has(a) {
			continue
		}
		switch {
		case slices.Contains(r.Capabilities, cc):
			return r
		case len(r.Capabilities) == 0 && family == nil:
			family = r
		}
	}
	return family
}

// Runs reports whether the symmetric-memory all-reduce runs on n GPUs of
// family a and compute capability cc (nvswitch: they share an NVSwitch).
func (s *SymmMemAR) Runs(a Arch, cc string, n int, nvswitch bool) bool {
	return s.symmRule(a, cc, n, nvswitch) != nil
}

// Pick is what carries all-reduce m over n GPUs of compute capability cc
// (allNVLink: NVLink joins every pair) under the custom all-reduce's own
// rules: ok false where its kernel may not carry it (NCCL does), else
// one-shot or two-shot by the strategy table where the profile has one
// (its NCCL cells give ok false: TensorRT-LLM's AllreduceOp runs NCCL and
// then the fusion's residual add and norm as kernels of their own), by
// the byte rule otherwise.
func (c *CustomAR) Pick(cc string, n int, allNVLink bool, m ARMessage) (ok, oneShot bool) {
	ok, one := c.Runs(n, allNVLink, m.Bytes)
	if !ok || len(c.StrategyTable) == 0 {
		return ok, one
	}
	switch c.tableRow(cc, n, m.Fusion(), m.Hidden).code(m.Tokens) {
	case '4':
		return true, true
	case '5':
		return true, false
	}
	return false, false
}

// AllReducePath is what carries TP all-reduce m over n GPUs of family a
// and compute capability cc (allNVLink: NVLink joins every pair;
// nvswitch: they share an NVSwitch, so multicast memory exists), in the
// engine's order: its custom all-reduce where its rules take the message
// (CustomAR.Pick), then symmetric memory below its own cap, then NCCL
// (vLLM CudaCommunicator.all_reduce).
func (p *Profile) AllReducePath(a Arch, cc string, n int, allNVLink, nvswitch bool, m ARMessage) ARPath {
	b := m.Bytes
	// A message the engine hands its all-reduce + RMSNorm fusion runs in
	// that fusion's own kernel where the fusion states how it picks
	// (FlashInfer's, over the same IPC buffers): one-shot or two-shot by
	// its rule, whatever the custom all-reduce's or symmetric memory's.
	if maxOne, ok := p.FusedOneShotMaxBytes(cc, n); ok && m.Fused {
		if b <= maxOne {
			return ARCustomOneShot
		}
		return ARCustomTwoShot
	}
	rule := p.SymmMem.symmRule(a, cc, n, nvswitch)
	if ok, one := p.AllReduce.Pick(cc, n, allNVLink, m); ok {
		capped := false
		if rule != nil {
			if m, has := rule.CustomMaxBytes[n]; has && b >= m {
				capped = true
			}
		}
		if !capped {
			if one {
				return ARCustomOneShot
			}
			return ARCustomTwoShot
		}
	}
	if rule != nil && b < rule.MaxBytes[n] {
		if slices.Contains(rule.Multimem, n) {
			return ARSymmMultimem
		}
		return ARSymmTwoShot
	}
	return ARNCCL
}

// ------------------------------------------------------------------ DSA

// DSAFacts say where the engine runs DeepSeek sparse attention (an
// indexer selecting the top-k cached tokens) as dense MLA.
type DSAFacts struct {
	DenseArchs ArchSet  `yaml:"dense_archs"`
	Cite       []string `yaml:"cite"`
}

// DenseDSA reports whether the engine runs a DSA model's attention dense
// (no indexer) on family a.
func (p *Profile) DenseDSA(a Arch) bool { return p.DSA.DenseArchs.Has(a) }

// --------------------------------------------------------- MoE dispatch

// DispatchFacts are how the engine moves the tokens of each DP attention
// group to the ranks holding their routed experts, and back, under DP
// attention + EP: what runs when its setting is left alone, and the
// implementations it offers of each kind, by its own names.
type DispatchFacts struct {
	// Option is the engine's own setting that picks the implementation
	// (vLLM's --all2all-backend, SGLang's --moe-a2a-backend).
	Option string `yaml:"option"`
	// Default is the kind that runs when Option is left alone;
	// NVLinkDefault, when stated, the kind that runs instead where NVLink
	// joins every GPU of the EP group (TensorRT-LLM tries its NVLink
	// all-to-all first and falls back to all-gather + reduce-scatter).
	Default       Dispatch `yaml:"default"`
	NVLinkDefault Dispatch `yaml:"nvlink_default"`
	// NVLinkOnly, when stated, is the kind none of whose implementations
	// starts unless NVLink joins every GPU of the EP group (TensorRT-LLM's
	// MNNVL workspaces and DeepEP's platform check): chosen elsewhere,
	// the engine fails at start-up, so a scenario that chooses it there
	// is refused (NeedsNVLink).
	NVLinkOnly Dispatch `yaml:"nvlink_only"`
	// AllToAll and AllGather are the engine's implementations of each
	// kind, by the names Option takes; the first of a default kind is
	// the one its default runs.
	AllToAll  []string `yaml:"alltoall"`
	AllGather []string `yaml:"allgather_reducescatter"`
	// AllGatherPayload is the format the all-gather dispatch moves each
	// token's hidden state in, by the MoE kernel that runs the routed
	// experts and their weight format: the engine quantizes the
	// activations to the experts' input format before the gather (and
	// gathers the scales with them) unless that kernel takes them
	// unquantized. A kernel and format no entry lists gathers the
	// model's 16-bit activations (weight-only and bf16 experts). The
	// combine's reduce-scatter always moves the experts' 16-bit outputs.
	AllGatherPayload []DispatchPayload `yaml:"allgather_payload"`
	Cite             []string          `yaml:"cite"`
}

// DispatchPayload is one AllGatherPayload fact: Kernels (MoE kernels of
// the profile, by name) running experts of weight format Format receive
// their tokens gathered as Payload.
type DispatchPayload struct {
	Kernels []string     `yaml:"kernels"`
	Format  WeightFormat `yaml:"format"`
	Payload WeightFormat `yaml:"payload"`
	Cite    []string     `yaml:"cite"`
}

// GatheredAs is the format the all-gather dispatch moves the tokens in
// when MoE kernel k runs experts of weight format f: the payload a fact
// states for them, else BF16 (the model's activations, unquantized).
func (d *DispatchFacts) GatheredAs(k *MoEKernel, f WeightFormat) WeightFormat {
	if k == nil {
		return BF16
	}
	for _, pl := range d.AllGatherPayload {
		if pl.Format == f && slices.ContainsFunc(pl.Kernels, k.Is) {
			return pl.Payload
		}
	}
	return BF16
}

// DefaultOn is the kind the engine runs when its setting is left alone
// (allNVLink: NVLink joins every GPU of the EP group).
func (d *DispatchFacts) DefaultOn(allNVLink bool) Dispatch {
	if allNVLink && d.NVLinkDefault != DispatchUnknown {
		return d.NVLinkDefault
	}
	return d.Default
}

// Names are the engine's implementations of kind k by its own names, in
// the profile's order (none: the engine has no implementation of k).
func (d *DispatchFacts) Names(k Dispatch) []string {
	switch k {
	case DispatchAllToAll:
		return d.AllToAll
	case DispatchAllGather:
		return d.AllGather
	}
	return nil
}

// NeedsNVLink returns an error naming the engine, its implementations
// of kind k and the NVLink they need when k is its NVLinkOnly kind and
// NVLink does not join every GPU of the EP group (allNVLink false), else
// nil.
func (p *Profile) NeedsNVLink(k Dispatch, allNVLink bool) error {
	d := &p.Dispatch
	if allNVLink || k == DispatchUnknown || k != d.NVLinkOnly {
		return nil
	}
	return fmt.Errorf("%s's %s (%s %s) needs NVLink between the GPUs, which does not join every GPU of this plan: it runs %s there (%s %s)",
		p.Name(), k.Words(), d.Option, strings.Join(d.Names(k), " | "), d.Default.Words(), d.Option, d.Names(d.Default)[0])
}

// CheckDispatch returns an error naming the engine and what it offers
// when it has no implementation of kind k, else nil.
func (p *Profile) CheckDispatch(k Dispatch) error {
	if len(p.Dispatch.Names(k)) > 0 {
		return nil
	}
	var has []string
	for _, o := range []Dispatch{DispatchAllToAll, DispatchAllGather} {
		if n := p.Dispatch.Names(o); len(n) > 0 {
			has = append(has, fmt.Sprintf("%s (%s %s)", o, p.Dispatch.Option, strings.Join(n, ", ")))
		}
	}
	return fmt.Errorf("%s has no %s MoE dispatch: it offers %s", p.Name(), k.Words(), strings.Join(has, "; "))
}

// ---------------------------------------------------------- refusals

// Refusal is an option the engine has no implementation of.
type Refusal struct {
	// Option is tpscope's flag name (custom-ar, dcp, attention-backend);
	// Values, when set, the values refused (else every non-default one);
	// Archs, when set, the families where (else all).
	Option string   `yaml:"option"`
	Values []string `yaml:"values"`
	Archs  ArchSet  `yaml:"archs"`
	Why    string   `yaml:"why"`
	Cite   []string `yaml:"cite"`
}

// Refuse returns an error naming the option when the engine has no
// implementation of option=value on family a, else nil. value "" (or
// "false", "0", "1" for a degree) is the option's default and never
// refused.
func (p *Profile) Refuse(option, value string, a Arch) error {
	for _, r := range p.Unsupported {
		if r.Option != option || (len(r.Archs) > 0 && !r.Archs.Has(a)) {
			continue
		}
		if len(r.Values) > 0 && !slices.ContainsFunc(r.Values, func(v string) bool { return strings.EqualFold(v, value) }) {
			continue
		}
		return fmt.Errorf("--%s %s: %s %s", option, value, p.Name(), r.Why)
	}
	return nil
}

func archList(s ArchSet) string {
	n := make([]string, len(s))
	for i, a := range s {
		n[i] = a.String()
	}
	return strings.Join(n, ", ")
}

func kvList(s []KVDtype) string {
	n := make([]string, len(s))
	for i, k := range s {
		n[i] = k.String()
	}
	return strings.Join(n, ", ")
}
