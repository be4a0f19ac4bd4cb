package engine

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

//go:embed profiles/*.yaml
var embedded embed.FS

// ParseError is a profile that does not decode or validate: the file,
// the field (a YAML path such as attention.backends[2].grid.kind) and
// what was wrong.
type ParseError struct {
	File  string
	Field string
	Err   error
}

func (e *ParseError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("engine profile %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("engine profile %s: %s: %v", e.File, e.Field, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// Parse decodes and validates one profile; file names it in errors.
// Decoding is strict: an unknown field, a second document or a value of
// the wrong type is an error, as is a profile that fails validation (see
// validate).
func Parse(data []byte, file string) (*Profile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var p Profile
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ParseError{File: file, Err: errors.New("empty document: want a profile")}
		}
		return nil, &ParseError{File: file, Err: oneLine(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &ParseError{File: file, Err: errors.New("more than one YAML document: want one profile per file")}
	}
	p.file = file
	if err := p.validate(); err != nil {
		return nil, err
	}
	p.name = p.Ref().String()
	p.defaultFrom = p.name + "'s default"
	return &p, nil
}

func oneLine(err error) error {
	return errors.New(strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "yaml: ", "")), " "))
}

// maxCaptureSize bounds a profile's CUDA-graph capture sizes (engines
// capture at most a few thousand tokens; TensorRT-LLM recipes list up to
// 8192).
const maxCaptureSize = 1 << 16

// maxEagerHostUs bounds a profile's eager host time per kernel: 1 ms, two
// orders of magnitude above the Python eager paths measured (tens of us).
const maxEagerHostUs = 1000

// maxEagerPrefillLayerHostUs bounds a profile's eager prefill host time
// per decoder layer: 20 ms, seven times the 3 ms measured for SGLang
// (a typo's factor of ten is refused).
const maxEagerPrefillLayerHostUs = 20000

// validate checks what the decoder cannot: required fields, names unique
// and referenced ones defined, every fact cited from Sources, sizes and
// grid parameters in range.
func (p *Profile) validate() error {
	bad := func(field, format string, a ...any) error {
		return &ParseError{File: p.file, Field: field, Err: fmt.Errorf(format, a...)}
	}
	if _, err := ParseRef(p.Engine); err != nil || p.Engine == "" || strings.Contains(p.Engine, "@") {
		return bad("engine", "%q: want a lower-case engine name", p.Engine)
	}
	if p.Version == "" {
		return bad("version", "missing: want the engine version the facts hold for")
	}
	if _, err := ParseRef(p.Engine + "@" + p.Version); err != nil {
		return bad("version", "%v", err)
	}
	if len(p.Sources) == 0 {
		return bad("sources", "missing: every fact cites a source")
	}
	cite := func(field string, keys []string) error {
		if len(keys) == 0 {
			return bad(field+".cite", "missing: want the source keys of this fact")
		}
		for _, k := range keys {
			if _, ok := p.Sources[k]; !ok {
				return bad(field+".cite", "%q is not a key of sources", k)
			}
		}
		return nil
	}
	if p.PerfDB.Framework != "" {
		if p.PerfDB.Version == "" {
			return bad("perfdb.version", "missing: want the table version of %s", p.PerfDB.Framework)
		}
		if err := cite("perfdb", p.PerfDB.Cite); err != nil {
			return err
		}
	}
	// Attention.
	seen := map[string]bool{}
	for i := range p.Attention.Backends {
		b := &p.Attention.Backends[i]
		f := fmt.Sprintf("attention.backends[%d]", i)
		if b.Name == "" {
			return bad(f+".name", "missing")
		}
		own := map[string]bool{}
		for _, n := range append([]string{b.Name}, b.Aliases...) {
			k := normName(n)
			if seen[k] && !own[k] {
				return bad(f+".name", "%q names two backends", n)
			}
			seen[k], own[k] = true, true
		}
		if len(b.Archs) == 0 {
			return bad(f+".archs", "missing: want the families it runs on")
		}
		if len(b.KV) == 0 {
			return bad(f+".kv", "missing: want the KV dtypes it takes")
		}
		switch b.Grid.Kind {
		case GridSMFill:
			g := b.Grid
			if g.SerialMerge {
				return bad(f+".grid.serial_merge", "true: want it only on a split_kv grid (an sm_fill kernel merges in the kernel: merge_us)")
			}
			if g.MergeUs < 0 || math.IsNaN(g.MergeUs) || math.IsInf(g.MergeUs, 0) {
				return bad(f+".grid.merge_us", "%v: want a time of 0 us or more", g.MergeUs)
			}
			if g.MergeUs > 0 && (g.RowsPerCTA < 1 || !(g.SplitBelowSMFrac > 0 && g.SplitBelowSMFrac <= 1)) {
				return bad(f+".grid", "merge_us needs rows_per_cta >= 1 and split_below_sm_frac in (0, 1]")
			}
		case GridSplitKV:
			g := b.Grid
			if g.BlockH < 1 || g.BlockN < 1 || g.Stages < 1 {
				return bad(f+".grid", "split_kv needs block_h, block_n and stages of at least 1")
			}
			if g.FixedSplits < 0 || (g.FixedSplits == 0 && (g.MinWorkPerSplit < 1 || g.SplitOccupancy < 1)) {
				return bad(f+".grid", "split_kv needs fixed_splits >= 1, or min_work_per_split and split_occupancy >= 1")
			}
		default:
			return bad(f+".grid.kind", "%q: want %s or %s", b.Grid.Kind, GridSplitKV, GridSMFill)
		}
		if b.Kernel == "" {
			return bad(f+".kernel", "missing: want the decode kernel's name")
		}
		if b.CUDAGraph != "full" && b.CUDAGraph != "piecewise" {
			return bad(f+".cuda_graph", "%q: want full or piecewise", b.CUDAGraph)
		}
		if b.PageTokens < 0 {
			return bad(f+".page_tokens", "%d: want a page size in tokens (0: the scheduler's block size)", b.PageTokens)
		}
		if b.PageTokens == 0 && (b.PageMultiples || len(b.PageKeeps) > 0) {
			return bad(f+".page_tokens", "missing: page_multiples and page_keeps qualify a page_tokens")
		}
		for _, k := range b.PageKeeps {
			if k < 1 {
				return bad(f+".page_keeps", "%d: want block sizes of 1 token or more", k)
			}
		}
		if c := b.FP8KVNeeds; c != nil {
			if len(c.Archs) == 0 || c.Why == "" || c.Needs == "" {
				return bad(f+".fp8_kv_needs", "want archs, why and needs")
			}
			if err := cite(f+".fp8_kv_needs", c.Cite); err != nil {
				return err
			}
		}
		if err := cite(f, b.Cite); err != nil {
			return err
		}
	}
	for i, r := range p.Attention.Select {
		f := fmt.Sprintf("attention.select[%d]", i)
		if len(r.Archs) == 0 || len(r.Order) == 0 {
			return bad(f, "want archs and a non-empty order")
		}
		if slices.Contains(r.ModelTypes, "") {
			return bad(f+".model_types", "an empty model_type: want config model_type names")
		}
		if r.PageTokens < 0 || (r.PageTokens > 0) != (r.PageOf != "") || (r.PageTokens == 0 && r.PageMultiples) {
			return bad(f+".page_tokens", "%d (page_of %q): want a page in tokens with the backend whose page it is, or neither", r.PageTokens, r.PageOf)
		}
		for _, n := range r.Order {
			if p.backend(n) == nil {
				return bad(f+".order", "%q is not a backend of this profile", n)
			}
		}
		if err := cite(f, r.Cite); err != nil {
			return err
		}
	}
	// MoE and linear kernels.
	names := map[string]bool{}
	for i := range p.MoE.Kernels {
		k := &p.MoE.Kernels[i]
		f := fmt.Sprintf("moe.kernels[%d]", i)
		if k.Name == "" || names[k.Name] {
			return bad(f+".name", "%q: want a unique name", k.Name)
		}
		names[k.Name] = true
		if len(k.Formats) == 0 || len(k.Archs) == 0 || k.Kernel == "" {
			return bad(f, "want formats, archs and kernel")
		}
		switch k.Grid {
		case GridPersistent:
		case GridTiles:
			if k.TileM < 1 || k.TileN < 1 {
				return bad(f, "grid tiles needs tile_m and tile_n of at least 1")
			}
		default:
			return bad(f+".grid", "%q: want %s or %s", k.Grid, GridPersistent, GridTiles)
		}
		if err := cite(f, k.Cite); err != nil {
			return err
		}
		if err := checkPadded(f+".padded", k.Padded, k.Formats, bad, cite); err != nil {
			return err
		}
		narrowed := map[WeightFormat]bool{}
		for j, fa := range k.FormatArchs {
			g := fmt.Sprintf("%s.format_archs[%d]", f, j)
			if !slices.Contains(k.Formats, fa.Format) || narrowed[fa.Format] {
				return bad(g+".format", "%q: want one of the kernel's formats, once", fa.Format)
			}
			narrowed[fa.Format] = true
			if len(fa.Archs) == 0 {
				return bad(g+".archs", "missing: want the families the kernel runs %s weights on", fa.Format)
			}
			for _, a := range fa.Archs {
				if !k.Archs.Has(a) {
					return bad(g+".archs", "%s: want families among the kernel's archs", a)
				}
			}
			if err := cite(g, fa.Cite); err != nil {
				return err
			}
		}
		if w := k.SerialWalk; w != nil {
			if !slices.Contains(k.Companions, w.Companion) {
				return bad(f+".serial_walk.companion", "%q: want one of the kernel's companions", w.Companion)
			}
			if !(w.CyclesPerExpert > 0) || math.IsInf(w.CyclesPerExpert, 0) {
				return bad(f+".serial_walk.cycles_per_expert", "%v: want a measured count of cycles above 0", w.CyclesPerExpert)
			}
			if err := cite(f+".serial_walk", w.Cite); err != nil {
				return err
			}
		}
		if s := k.SMStream; s != nil {
			if !(s.BytesPerClk > 0) || math.IsInf(s.BytesPerClk, 0) {
				return bad(f+".sm_stream.bytes_per_clk", "%v: want a measured rate above 0", s.BytesPerClk)
			}
			if len(s.Formats) == 0 {
				return bad(f+".sm_stream.formats", "want the formats the rate was measured on")
			}
			for _, x := range s.Formats {
				if !slices.Contains(k.Formats, x) {
					return bad(f+".sm_stream.formats", "%s: not a format of the kernel", x)
				}
			}
			if !(s.CallCycles >= 0 && s.CallCycles <= maxCallCycles) {
				return bad(f+".sm_stream.call_cycles", "%v: want 0 (none) to %g measured cycles", s.CallCycles, maxCallCycles)
			}
			if err := cite(f+".sm_stream", s.Cite); err != nil {
				return err
			}
		}
	}
	moeKernel := func(n string, f WeightFormat) ([]WeightFormat, ArchSet, bool) {
		for _, k := range p.MoE.Kernels {
			if k.Name == n {
				return k.Formats, k.ArchsFor(f), true
			}
		}
		return nil, nil, false
	}
	if err := p.checkRules("moe.select", p.MoE.Select, moeKernel, cite); err != nil {
		return err
	}
	for i := range p.MoE.Kernels {
		k := &p.MoE.Kernels[i]
		f := fmt.Sprintf("moe.kernels[%d].runs", i)
		if err := p.checkRules(f, k.Runs, moeKernel, cite); err != nil {
			return err
		}
		for j, r := range k.Runs {
			if r.Kernel == k.Name || slices.Contains(k.Formats, r.Format) {
				return bad(fmt.Sprintf("%s[%d]", f, j), "%s to %s: want a format %s does not run itself, handed to another kernel", r.Format, r.Kernel, k.Name)
			}
		}
	}
	lnames := map[string]bool{}
	for i := range p.Linear.Kernels {
		k := &p.Linear.Kernels[i]
		f := fmt.Sprintf("linear.kernels[%d]", i)
		if k.Name == "" || lnames[k.Name] {
			return bad(f+".name", "%q: want a unique name", k.Name)
		}
		lnames[k.Name] = true
		if len(k.Formats) == 0 || len(k.Archs) == 0 {
			return bad(f, "want formats and archs")
		}
		if k.FusedBy != "" && !slices.ContainsFunc(p.Fusions, func(x Fusion) bool { return x.Name == k.FusedBy }) {
			return bad(f+".fused_by", "%q is not a fusion of this profile", k.FusedBy)
		}
		if err := cite(f, k.Cite); err != nil {
			return err
		}
		if err := checkPadded(f+".padded", k.Padded, k.Formats, bad, cite); err != nil {
			return err
		}
		if r := k.SplitKReduce; r != nil {
			if r.Kernel == "" || r.MinK < 1 || len(r.ByTokens) == 0 || len(r.Archs) == 0 {
				return bad(f+".split_k_reduce", "want the kernel, min_k of at least 1, by_tokens and the archs it is stated for")
			}
			for j, b := range r.ByTokens {
				if b.MaxM < 1 || !(b.MaxNOverK > 0) || j > 0 && b.MaxM <= r.ByTokens[j-1].MaxM {
					return bad(fmt.Sprintf("%s.split_k_reduce.by_tokens[%d]", f, j), "max_m %d, max_n_over_k %g: want max_m of at least 1, rising, and a ratio above 0", b.MaxM, b.MaxNOverK)
				}
			}
			if err := cite(f+".split_k_reduce", r.Cite); err != nil {
				return err
			}
		}
	}
	if err := p.checkRules("linear.select", p.Linear.Select, func(n string, _ WeightFormat) ([]WeightFormat, ArchSet, bool) {
		for _, k := range p.Linear.Kernels {
			if k.Name == n {
				return k.Formats, k.Archs, true
			}
		}
		return nil, nil, false
	}, cite); err != nil {
		return err
	}
	for i, r := range p.Linear.Select {
		if r.EP != nil {
			return bad(fmt.Sprintf("linear.select[%d].ep", i), "%v: want none: expert parallelism decides only among MoE kernels (moe.select)", *r.EP)
		}
	}
	fnames := map[string]bool{}
	for i, fu := range p.Fusions {
		f := fmt.Sprintf("fusions[%d]", i)
		switch fu.Name {
		case FuseAllReduceRMSNorm, FuseActQuant, FuseNormQuant:
		default:
			return bad(f+".name", "%q: want %s, %s or %s", fu.Name, FuseAllReduceRMSNorm, FuseActQuant, FuseNormQuant)
		}
		if fnames[fu.Name] {
			return bad(f+".name", "%q listed twice", fu.Name)
		}
		fnames[fu.Name] = true
		if fu.MinTP < 0 {
			return bad(f+".min_tp", "%d: want 0 or more", fu.MinTP)
		}
		for _, c := range []struct {
			field string
			caps  map[string]map[int]float64
		}{{".max_input_mib", fu.MaxInputMiB}, {".oneshot_max_input_mib", fu.OneShotMaxInputMiB}} {
			field := c.field
			for cc, byTP := range c.caps {
				a, ok := ArchOf(cc)
				if !ok || !fu.Archs.Has(a) {
					return bad(f+field, "%q: want the compute capability of a device of the fusion's families (%v), as \"9.0\"", cc, fu.Archs)
				}
				for tp, mib := range byTP {
					if tp < 2 || !(mib > 0) {
						return bad(f+field, "%s: TP %d at %g MiB: want a TP degree of 2 or more and a cap above 0 MiB", cc, tp, mib)
					}
				}
			}
		}
		if len(fu.OneShotMaxInputMiB) > 0 && fu.Name != FuseAllReduceRMSNorm {
			return bad(f+".oneshot_max_input_mib", "stated on %s: only the %s fusion runs an all-reduce kernel", fu.Name, FuseAllReduceRMSNorm)
		}
		if fu.Off != "" && !fu.Default {
			return bad(f+".off", "%q: only a default fusion has a switch that turns it off (default: true)", fu.Off)
		}
		if (len(fu.ModelTypes) > 0 || len(fu.ExceptDevices) > 0) && !fu.Default {
			return bad(f, "model_types %v, except_devices %v: only a default fusion is limited to models or devices (default: true)", fu.ModelTypes, fu.ExceptDevices)
		}
		if slices.Contains(fu.ModelTypes, "") || slices.Contains(fu.ExceptDevices, "") {
			return bad(f, "an empty model_type or device name: want config model_type names and device names as nvidia-smi prints them")
		}
		if fu.DPAttention && !fu.Default {
			return bad(f+".dp_attention", "true: only a default fusion says whether it stays on under DP attention (default: true)")
		}
		if fu.MaxTokens < 0 {
			return bad(f+".max_tokens", "%d: want 0 (no limit) or more", fu.MaxTokens)
		}
		if err := cite(f, fu.Cite); err != nil {
			return err
		}
	}
	// Graphs.
	g := p.Graphs
	for i, s := range g.Sizes {
		if s < 1 || s > maxCaptureSize {
			return bad(fmt.Sprintf("cuda_graphs.sizes[%d]", i), "%d: want a batch size from 1 to %d", s, maxCaptureSize)
		}
	}
	for i, r := range g.Ranges {
		if r.From < 1 || r.Step < 1 || r.To < r.From || r.To > maxCaptureSize {
			return bad(fmt.Sprintf("cuda_graphs.ranges[%d]", i), "from %d to %d step %d: want 1 <= from <= to <= %d, step >= 1", r.From, r.To, r.Step, maxCaptureSize)
		}
	}
	if p.sizes = g.CaptureSizes(); len(p.sizes) == 0 {
		return bad("cuda_graphs", "no capture sizes: want sizes or ranges")
	}
	if err := validateGraphMaxBS(g.MaxBS, p.sizes[len(p.sizes)-1], bad); err != nil {
		return err
	}
	if r := g.ServingMax; r != nil {
		if r.SeqsFactor < 1 {
			return bad("cuda_graphs.serving_max.seqs_factor", "%d: want 1 or more, the times max_num_seqs x (1 + k) the largest size counts", r.SeqsFactor)
		}
		if len(g.MaxBS) > 0 {
			return bad("cuda_graphs.serving_max", "set beside max_bs: want one rule for the largest size")
		}
		if err := cite("cuda_graphs.serving_max", r.Cite); err != nil {
			return err
		}
	}
	for i, b := range p.Attention.Backends {
		if b.CUDAGraph == "piecewise" && len(g.PiecewiseEager) == 0 {
			return bad("cuda_graphs.piecewise_eager", "missing: attention.backends[%d] (%s) captures piecewise: want the roles a piecewise graph launches eagerly", i, b.Name)
		}
	}
	if g.MixedPiecewise() {
		if g.PrefillEager {
			return bad("cuda_graphs.prefill_eager", "set under mode %s, which replays steps with prefill tokens as piecewise graphs: want one of them", g.Mode)
		}
		if len(g.PiecewiseEager) == 0 || len(g.PiecewiseEagerPrefill) == 0 {
			return bad("cuda_graphs.piecewise_eager_prefill", "missing: mode %s captures a step with prefill tokens piecewise: want the roles its attention op launches eagerly in decode (piecewise_eager) and in prefill (piecewise_eager_prefill)", g.Mode)
		}
	} else if len(g.PiecewiseEagerPrefill) > 0 {
		return bad("cuda_graphs.piecewise_eager_prefill", "set under mode %q, which captures no step with prefill tokens piecewise: want FULL_AND_PIECEWISE or PIECEWISE, or no list", g.Mode)
	}
	if g.DCPPiecewise && len(g.PiecewiseEager) == 0 {
		return bad("cuda_graphs.piecewise_eager", "missing: dcp_piecewise needs the roles a piecewise graph launches eagerly")
	}
	if !(g.EagerHostUs >= 0 && g.EagerHostUs <= maxEagerHostUs) {
		return bad("cuda_graphs.eager_host_us", "%g: want 0 (the device's launch cost) to %g us per kernel", g.EagerHostUs, float64(maxEagerHostUs))
	}
	if !(g.EagerPrefillLayerHostUs >= 0 && g.EagerPrefillLayerHostUs <= maxEagerPrefillLayerHostUs) {
		return bad("cuda_graphs.eager_prefill_layer_host_us", "%g: want 0 (eager_host_us a kernel) to %g us per layer", g.EagerPrefillLayerHostUs, float64(maxEagerPrefillLayerHostUs))
	}
	if g.EagerPrefillLayerHostUs > 0 && !g.PrefillEager {
		return bad("cuda_graphs.eager_prefill_layer_host_us", "%g set where prefill_eager is false: want it only for an engine that runs its prefill steps eagerly", g.EagerPrefillLayerHostUs)
	}
	if err := cite("cuda_graphs", g.Cite); err != nil {
		return err
	}
	// Custom all-reduce.
	c := p.AllReduce
	if c.Enabled {
		if len(c.WorldSizes) == 0 || c.MaxBytes < 1 || c.OneShotBelowBytes < 0 || c.PCIeMaxGPUs < 0 {
			return bad("custom_allreduce", "enabled needs world_sizes, max_bytes >= 1, oneshot_below_bytes and pcie_max_gpus >= 0")
		}
	}
	for _, n := range slices.Sorted(maps.Keys(c.OneShotBelowBytesByWorld)) {
		if !slices.Contains(c.WorldSizes, n) || c.OneShotBelowBytesByWorld[n] < 0 {
			return bad("custom_allreduce.oneshot_below_bytes_by_world", "%d: %d: want a world size of world_sizes and bytes >= 0", n, c.OneShotBelowBytesByWorld[n])
		}
	}
	for _, n := range c.OneShotAlways {
		if !slices.Contains(c.WorldSizes, n) {
			return bad("custom_allreduce.oneshot_always", "%d: want a world size of world_sizes", n)
		}
	}
	if err := validateStrategyTable(c, bad); err != nil {
		return err
	}
	if err := cite("custom_allreduce", c.Cite); err != nil {
		return err
	}
	for i, r := range p.SymmMem.Rules {
		f := fmt.Sprintf("symm_mem_allreduce.rules[%d]", i)
		if len(r.Archs) == 0 || len(r.MaxBytes) == 0 {
			return bad(f, "want archs and max_bytes (per world size)")
		}
		for _, n := range slices.Sorted(maps.Keys(r.MaxBytes)) {
			if b := r.MaxBytes[n]; n < 2 || b < 1 {
				return bad(f+".max_bytes", "%d: %d: want a world size >= 2 and bytes >= 1", n, r.MaxBytes[n])
			}
		}
		for _, n := range slices.Sorted(maps.Keys(r.CustomMaxBytes)) {
			if _, ok := r.MaxBytes[n]; !ok || r.CustomMaxBytes[n] < 0 {
				return bad(f+".custom_max_bytes", "%d: %d: want a world size of max_bytes and bytes >= 0", n, r.CustomMaxBytes[n])
			}
		}
		for _, n := range r.Multimem {
			if _, ok := r.MaxBytes[n]; !ok {
				return bad(f+".multimem_world_sizes", "%d: want a world size of max_bytes", n)
			}
		}
		for _, cc := range r.Capabilities {
			if a, ok := ArchOf(cc); !ok || !r.Archs.Has(a) || !strings.Contains(cc, ".") {
				return bad(f+".capabilities", "%q: want a compute capability major.minor of the rule's archs", cc)
			}
		}
	}
	if len(p.SymmMem.Rules) > 0 || len(p.SymmMem.Cite) > 0 {
		if err := cite("symm_mem_allreduce", p.SymmMem.Cite); err != nil {
			return err
		}
	}
	switch p.Scheduler.Policy {
	case "":
		if len(p.Scheduler.Cite) > 0 {
			return bad("scheduler.policy", "missing: want vllm or sglang beside its cite")
		}
	case SchedulerVLLM, SchedulerSGLang:
		if err := cite("scheduler", p.Scheduler.Cite); err != nil {
			return err
		}
	default:
		return bad("scheduler.policy", "%q: want %s or %s", p.Scheduler.Policy, SchedulerVLLM, SchedulerSGLang)
	}
	if err := cite("dsa", p.DSA.Cite); err != nil {
		return err
	}
	if err := p.validateDispatch(bad, cite); err != nil {
		return err
	}
	if err := p.validateSpec(bad, cite); err != nil {
		return err
	}
	if err := p.validateServing(bad, cite); err != nil {
		return err
	}
	if err := p.validateKVPool(bad, cite); err != nil {
		return err
	}
	if err := p.validateKVDefault(bad, cite); err != nil {
		return err
	}
	for i, r := range p.Unsupported {
		f := fmt.Sprintf("unsupported[%d]", i)
		if r.Option == "" || r.Why == "" {
			return bad(f, "want option and why")
		}
		if err := cite(f, r.Cite); err != nil {
			return err
		}
	}
	return nil
}

// checkRules checks selection rules against their kernels: kernel
// returns a kernel's formats and the families it runs format f on.
func (p *Profile) checkRules(field string, rules []FormatRule, kernel func(name string, f WeightFormat) ([]WeightFormat, ArchSet, bool), cite func(string, []string) error) error {
	for i, r := range rules {
		f := fmt.Sprintf("%s[%d]", field, i)
		formats, archs, ok := kernel(r.Kernel, r.Format)
		if !ok {
			return &ParseError{File: p.file, Field: f + ".kernel", Err: fmt.Errorf("%q is not a kernel of this profile", r.Kernel)}
		}
		if r.Format == FormatUnknown || len(r.Archs) == 0 {
			return &ParseError{File: p.file, Field: f, Err: errors.New("want format and archs")}
		}
		if !slices.Contains(formats, r.Format) {
			return &ParseError{File: p.file, Field: f, Err: fmt.Errorf("kernel %s does not take %s weights", r.Kernel, r.Format)}
		}
		for _, a := range r.Archs {
			if !archs.Has(a) {
				return &ParseError{File: p.file, Field: f, Err: fmt.Errorf("kernel %s does not run on %s", r.Kernel, a)}
			}
		}
		if err := cite(f, r.Cite); err != nil {
			return err
		}
	}
	return nil
}

// The embedded profiles, read once.
var (
	loadOnce sync.Once
	loaded   []*Profile
	loadErr  error
)

func load() ([]*Profile, error) {
	loadOnce.Do(func() { loaded, loadErr = loadFS(embedded, "profiles") })
	return loaded, loadErr
}

// loadFS reads every *.yaml under dir, checks that no two profiles share
// engine@version and that each engine has exactly one default version.
func loadFS(fsys fs.FS, dir string) ([]*Profile, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("engine profiles: %w", err)
	}
	var out []*Profile
	byRef := map[string]string{}
	defaults := map[string]string{}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		file := path.Join(dir, e.Name())
		data, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("engine profile %s: %w", file, err)
		}
		p, err := Parse(data, file)
		if err != nil {
			return nil, err
		}
		if f, ok := byRef[p.Name()]; ok {
			return nil, &ParseError{File: file, Field: "version", Err: fmt.Errorf("%s is also defined by %s", p.Name(), f)}
		}
		byRef[p.Name()] = file
		if p.Default {
			if f, ok := defaults[p.Engine]; ok {
				return nil, &ParseError{File: file, Field: "default", Err: fmt.Errorf("%s's default version is also set by %s", p.Engine, f)}
			}
			defaults[p.Engine] = file
		}
		out = append(out, p)
	}
	for _, p := range out {
		if _, ok := defaults[p.Engine]; !ok {
			return nil, &ParseError{File: p.file, Field: "default", Err: fmt.Errorf("no profile of %s is its default version", p.Engine)}
		}
	}
	if _, ok := defaults[DefaultEngine]; !ok {
		return nil, fmt.Errorf("engine profiles: none for the default engine %s", DefaultEngine)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Profiles returns the embedded profiles, sorted by engine@version.
func Profiles() ([]*Profile, error) { return load() }

// Names lists the embedded profiles' engine@version, sorted.
func Names() []string {
	ps, _ := load()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name()
	}
	return out
}

// Lookup returns the profile r names: the zero Ref the default engine's
// default version; a name alone that engine's default version; a version
// the profile with that version, or the only one whose version starts
// with it followed by '.' or '-' ("0" for 0.24 when it is the only 0.x).
// The error is one line naming r and the profiles there are.
func Lookup(r Ref) (*Profile, error) {
	ps, err := load()
	if err != nil {
		return nil, err
	}
	if r.IsZero() {
		r = Ref{Name: DefaultEngine}
	}
	var cands []*Profile
	for _, p := range ps {
		if p.Engine != r.Name {
			continue
		}
		switch {
		case r.Version == "" && p.Default, r.Version == p.Version:
			return p, nil
		case r.Version != "" && (strings.HasPrefix(p.Version, r.Version+".") || strings.HasPrefix(p.Version, r.Version+"-")):
			cands = append(cands, p)
		}
	}
	if len(cands) == 1 {
		return cands[0], nil
	}
	return nil, fmt.Errorf("no engine profile %s (there are %s)", r, strings.Join(Names(), ", "))
}

// MustDefault is the default engine's default profile; it panics only
// when the embedded profiles are broken, which TestEmbeddedProfiles
// rules out.
func MustDefault() *Profile {
	p, err := Lookup(Ref{})
	if err != nil {
		panic(err)
	}
	return p
}

// checkPadded validates a kernel's padded tiles (nil: none stated): tile
// sizes of at least 1, formats the kernel takes, families and a source.
func checkPadded(f string, t *PaddedTiles, formats []WeightFormat, bad func(string, string, ...any) error, cite func(string, []string) error) error {
	if t == nil {
		return nil
	}
	if t.TileM < 1 || t.TileN < 1 {
		return bad(f, "want tile_m and tile_n of at least 1")
	}
	if len(t.Formats) == 0 || len(t.Archs) == 0 {
		return bad(f, "want the formats and archs whose tiles are padded")
	}
	for _, x := range t.Formats {
		if !slices.Contains(formats, x) {
			return bad(f+".formats", "%s: not a format of the kernel", x)
		}
	}
	return cite(f, t.Cite)
}

// validateGraphMaxBS checks cuda_graphs.max_bs: tiers of rising
// below_mib, the open one (0) last, each with a row for TP 1 first and
// its rows rising in min_tp, so every GPU and TP size has one value; each
// bs from 1 to the largest capture size (the list must reach it).
func validateGraphMaxBS(tiers []GraphMaxBSTier, largest int, bad func(field, format string, a ...any) error) error {
	for i, t := range tiers {
		f := fmt.Sprintf("cuda_graphs.max_bs[%d]", i)
		if t.BS < 1 || t.BS > largest {
			return bad(f+".bs", "%d: want 1 to %d, the largest capture size", t.BS, largest)
		}
		var ok bool
		switch {
		case t.BelowMiB < 0 || t.MinTP < 0:
		case i > 0 && t.BelowMiB == tiers[i-1].BelowMiB:
			// A further row of the tier: a larger TP size.
			ok = t.MinTP > max(1, tiers[i-1].MinTP)
		default:
			// A tier's first row: every TP size from 1, a larger GPU than
			// the tier before, which is not the open one.
			ok = t.MinTP <= 1 && (i == 0 || (tiers[i-1].BelowMiB != 0 && (t.BelowMiB == 0 || t.BelowMiB > tiers[i-1].BelowMiB)))
		}
		if ok && t.BelowMiB != 0 {
			ok = i < len(tiers)-1 // the last tier is open
		} else if ok {
			ok = i == len(tiers)-1 || tiers[i+1].BelowMiB == 0 // and only the last
		}
		if !ok {
			return bad(f, "{below_mib: %d, min_tp: %d, bs: %d}: want below_mib rising from tier to tier, 0 (any larger GPU) on the last tier only, and each tier's rows from min_tp 1 (or none) rising", t.BelowMiB, t.MinTP, t.BS)
		}
	}
	return nil
}

// validateDispatch checks the MoE dispatch facts: the engine's setting
// named, a default kind (and the NVLink one, when stated) the engine has
// an implementation of, each implementation named once, and a source.
func (p *Profile) validateDispatch(bad func(string, string, ...any) error, cite func(string, []string) error) error {
	d := &p.Dispatch
	if d.Option == "" {
		return bad("moe_dispatch.option", "missing: want the engine's setting that picks the dispatch (vLLM's --all2all-backend)")
	}
	names := map[string]bool{}
	for _, k := range []Dispatch{DispatchAllToAll, DispatchAllGather} {
		for i, n := range d.Names(k) {
			f := fmt.Sprintf("moe_dispatch.%s[%d]", k, i)
			if strings.TrimSpace(n) == "" || names[n] {
				return bad(f, "%q: want a unique name of the engine's", n)
			}
			names[n] = true
		}
	}
	for _, c := range []struct {
		field string
		k     Dispatch
		need  bool
	}{{"moe_dispatch.default", d.Default, true}, {"moe_dispatch.nvlink_default", d.NVLinkDefault, false}, {"moe_dispatch.nvlink_only", d.NVLinkOnly, false}} {
		switch {
		case c.k == DispatchUnknown && !c.need:
		case c.k == DispatchUnknown:
			return bad(c.field, "missing: want %s or %s", DispatchAllToAll, DispatchAllGather)
		case len(d.Names(c.k)) == 0:
			return bad(c.field, "%s: the engine lists no implementation of it (moe_dispatch.%s)", c.k, c.k)
		}
	}
	if d.NVLinkOnly != DispatchUnknown && d.NVLinkOnly == d.Default {
		return bad("moe_dispatch.nvlink_only", "%s: the default, which runs where NVLink does not join the GPUs: want the other kind or none", d.NVLinkOnly)
	}
	if len(d.AllGatherPayload) > 0 && len(d.AllGather) == 0 {
		return bad("moe_dispatch.allgather_payload", "stated for an engine with no all-gather dispatch (moe_dispatch.%s)", DispatchAllGather)
	}
	for i, pl := range d.AllGatherPayload {
		f := fmt.Sprintf("moe_dispatch.allgather_payload[%d]", i)
		if pl.Format == FormatUnknown || pl.Format == BF16 {
			return bad(f+".format", "%s: want the quantized weight format of the experts (bf16 experts gather bf16 without a fact)", pl.Format)
		}
		switch pl.Payload {
		case BF16, FP8, FP8Block, NVFP4:
		default:
			// W4A16 experts take 16-bit activations: no 4-bit tokens.
			return bad(f+".payload", "%s: want a format activations travel in (bf16, fp8, fp8-block128, nvfp4)", pl.Payload)
		}
		if len(pl.Kernels) == 0 {
			return bad(f+".kernels", "missing: want the MoE kernels (moe.kernels) the payload is stated for")
		}
		for j, name := range pl.Kernels {
			k := p.moeKernelNamed(name)
			if k == nil || !slices.Contains(k.Formats, pl.Format) {
				return bad(fmt.Sprintf("%s.kernels[%d]", f, j), "%q: want a kernel of moe.kernels that runs %s experts", name, pl.Format)
			}
		}
		if err := cite(f, pl.Cite); err != nil {
			return err
		}
	}
	return cite("moe_dispatch", d.Cite)
}

// moeKernelNamed is the profile's MoE kernel called name, nil if none.
func (p *Profile) moeKernelNamed(name string) *MoEKernel {
	for i := range p.MoE.Kernels {
		if p.MoE.Kernels[i].Is(name) {
			return &p.MoE.Kernels[i]
		}
	}
	return nil
}

// validateStrategyTable refuses a malformed all-reduce strategy table: a
// row for an SM bucket the engine does not key by, a TP degree or hidden
// size that is not a power of two (the engine rounds both down to one),
// an unknown fusion op, codes other than the engine's one-shot, two-shot
// and NCCL values, or a key stated twice.
func validateStrategyTable(c CustomAR, bad func(field, format string, args ...any) error) error {
	if len(c.StrategyTable) > 0 && !c.Enabled {
		return bad("custom_allreduce.strategy_table", "stated with enabled false: want enabled true or no table")
	}
	if len(c.StrategyTable) > 0 && (c.OneShotBelowBytes != 0 || len(c.OneShotBelowBytesByWorld) > 0 || len(c.OneShotAlways) > 0) {
		return bad("custom_allreduce.strategy_table", "stated with a byte rule (oneshot_below_bytes, oneshot_below_bytes_by_world, oneshot_always): the table picks one-shot or two-shot; leave the byte rule out")
	}
	type key struct {
		sm, tp int
		f      ARFusion
		h      int64
	}
	seen := map[key]bool{}
	for i, r := range c.StrategyTable {
		f := fmt.Sprintf("custom_allreduce.strategy_table[%d]", i)
		switch {
		case r.SM != 90 && r.SM != 100:
			return bad(f+".sm", "%d: want 90 (every GPU before SM 10.0) or 100 (SM 10.0 and later)", r.SM)
		case r.TP < 2 || r.TP&(r.TP-1) != 0:
			return bad(f+".tp", "%d: want a power of two >= 2", r.TP)
		case r.Fusion != ARFusionNone && r.Fusion != ARFusionResidualRMSNorm:
			return bad(f+".fusion", "%q: want %s or %s", r.Fusion, ARFusionNone, ARFusionResidualRMSNorm)
		case r.Hidden < 1 || r.Hidden&(r.Hidden-1) != 0:
			return bad(f+".hidden", "%d: want a power of two", r.Hidden)
		case r.Codes == "" || len(r.Codes) > 62 || strings.Trim(r.Codes, "045") != "":
			return bad(f+".codes", "%q: want 1 to 62 strategy codes, one per power of two of tokens: 4 one-shot, 5 two-shot, 0 NCCL", r.Codes)
		}
		k := key{r.SM, r.TP, r.Fusion, r.Hidden}
		if seen[k] {
			return bad(f, "sm %d, tp %d, fusion %s, hidden %d stated twice", r.SM, r.TP, r.Fusion, r.Hidden)
		}
		seen[k] = true
	}
	return nil
}
