package traces

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Step splitting of a Kineto trace (rules: StepRule* in schema_kineto.go).
//
// Step ranges the engines write, checked against their sources:
//
//   - vLLM (vllm/v1/worker/gpu_worker.py Worker.annotate_profile, with
//     vllm/v1/utils.py compute_iteration_details and the record_function of
//     vllm/profiler/wrapper.py TorchProfilerWrapper.annotate_context_manager)
//     wraps model_runner.execute_model in
//     "execute_context_{ctx reqs}({ctx tokens})_generation_{gen reqs}({gen tokens})",
//     a request counting as context until it has produced a token (so a
//     chunk of a chunked prefill is context). Older versions wrote
//     "execute_new_{new reqs}_cached_{cached reqs}". ProfilerStep#N appears
//     only when the profiler runs with a schedule. The sampler runs in
//     sample_tokens, outside the range, in versions with the context form.
//     The inner "gpu_model_runner: preprocess / forward / postprocess /
//     sample" scopes (VLLM_CUSTOM_SCOPES_FOR_PROFILING=1) nest inside the
//     range and are not steps.
//   - SGLang (python/sglang/srt/utils/profile_utils.py build_step_span_name,
//     used by ModelRunner.forward through torch.profiler.record_function)
//     writes "step[EXTEND bs=B toks=T]" or "step[DECODE bs=B]" (other modes:
//     MIXED, IDLE, TARGET_VERIFY, ...), optionally followed by
//     " g_sq=... " annotations, and "draft step[...]" for the speculative
//     draft model's forward, which belongs to the target step before it.
//   - TensorRT-LLM (tensorrt_llm/_torch/pyexecutor/py_executor.py
//     PyExecutor._forward_step) names its step
//     "[Executor] _forward_step {iter}: {n} ctx reqs, {m} gen reqs" — an NVTX
//     range, which the PyTorch profiler does not record; its torch traces
//     (TLLM_TORCH_PROFILE_TRACE) therefore split by graph launches or the
//     layer pattern, unless the range was also recorded as a profiler
//     range, in which case it is read here.

// rangeKind says what a step range marks.
type rangeKind uint8

const (
	rangeEngine       rangeKind = iota + 1 // an engine's iteration
	rangeDraft                             // a speculative draft forward (belongs to the iteration before it)
	rangeProfilerStep                      // ProfilerStep#N
	rangeFrame                             // the engine's Python frame that runs one iteration
)

// rangeInfo is what a step range's name says.
type rangeInfo struct {
	kind                             rangeKind
	engine                           string
	profStep                         int
	phase                            string
	ctxReqs, ctxTok, genReqs, genTok int
}

// kinetoRange is a step range of the trace.
type kinetoRange struct {
	lo, hi int64 // ns, relative
	gpu    bool  // gpu_user_annotation (bounds kernel times) or user_annotation (bounds launch times)
	ext    int64 // External id linking a GPU range to its CPU range; -1 when absent
	name   string
	info   rangeInfo
}

// stepMeta is one step of a file.
type stepMeta struct {
	number int // Span.Step: N of ProfilerStep#N, else the step's order in the file from 0
	rng    string
	info   rangeInfo
	graphs int // graph launches in the step
}

func (s *stepMeta) report(rank int, rule string) KinetoStep {
	return KinetoStep{Step: s.number, Rank: rank, Rule: rule, Range: s.rng, Phase: s.info.phase,
		ContextReqs: s.info.ctxReqs, ContextTokens: s.info.ctxTok, DecodeReqs: s.info.genReqs, DecodeTokens: s.info.genTok,
		GraphLaunches: s.graphs}
}

// phaseOf names an iteration of ctx context and gen decode requests.
func phaseOf(ctx, gen int) string {
	switch {
	case ctx > 0 && gen > 0:
		return PhaseMixed
	case ctx > 0:
		return PhasePrefill
	case gen > 0:
		return PhaseDecode
	}
	return PhaseIdle
}

// parseStepRange recognises the step ranges of the engines and
// ProfilerStep#N; other annotations are not steps.
func parseStepRange(b []byte) (rangeInfo, bool) {
	name := string(b)
	if n, ok := parseStepName(name); ok {
		return rangeInfo{kind: rangeProfilerStep, profStep: n}, true
	}
	if ri, ok, isCtx := parseVLLMContext(name); isCtx {
		return ri, ok
	}
	if rest, ok := strings.CutPrefix(name, "execute_new_"); ok {
		newS, cached, ok := strings.Cut(rest, "_cached_")
		n, err1 := strconv.Atoi(newS)
		m, err2 := strconv.Atoi(cached)
		if ok && err1 == nil && err2 == nil && n >= 0 && m >= 0 {
			// A cached request continues: it decodes, or runs a later chunk
			// of a chunked prefill (the name does not tell which).
			return rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: phaseOf(n, m), ctxReqs: n, genReqs: m}, true
		}
		return rangeInfo{}, false
	}
	draft := false
	s := name
	if rest, ok := strings.CutPrefix(s, "draft "); ok {
		draft, s = true, rest
	}
	if rest, ok := strings.CutPrefix(s, "step["); ok && strings.HasSuffix(rest, "]") {
		return parseSGLangStep(rest[:len(rest)-1], draft)
	}
	if rest, ok := strings.CutPrefix(name, "[Executor] _forward_step "); ok {
		return parseTRTLLMStep(rest)
	}
	return rangeInfo{}, false
}

// parseStepFrame recognises the Python frames (python_function events,
// recorded with with_stack=True, vLLM's and SGLang's default) of the call
// that runs one engine iteration:
//
//   - vLLM V1: "vllm/v1/worker/gpu_model_runner.py(2907): execute_model"
//     (GPUModelRunner.execute_model, once per scheduler step; the file's
//     line number changes between versions);
//   - SGLang: "sglang/srt/managers/tp_worker.py(445): forward_batch_generation"
//     (TpModelWorker.forward_batch_generation, once per batch the
//     scheduler runs).
//
// They say nothing of the phase. The frames inside them (the model's
// forward, the sampler) are not steps.
func parseStepFrame(b []byte) (rangeInfo, bool) {
	// The suffix first: a with_stack trace holds millions of frames.
	switch {
	case bytes.HasSuffix(b, frameExecuteModel) && bytes.Contains(b, fileModelRunner):
		return rangeInfo{kind: rangeFrame, engine: EngineVLLM}, true
	case bytes.HasSuffix(b, frameForwardBatch) && bytes.Contains(b, fileTPWorker):
		return rangeInfo{kind: rangeFrame, engine: EngineSGLang}, true
	}
	return rangeInfo{}, false
}

var (
	frameExecuteModel = []byte("): execute_model")
	fileModelRunner   = []byte("gpu_model_runner.py(")
	frameForwardBatch = []byte("): forward_batch_generation")
	fileTPWorker      = []byte("tp_worker.py(")
)

// parseVLLMContext reads vLLM's iteration range in the forms seen in
// real traces: "execute_context_{n}({tok})_generation_{m}({tok})" (stock),
// "execute_context_1(888_788544)_generation_0(0)" (a build that appends the
// sum of query x key lengths to the token count: 888 x 888 = 788544 on a
// real B200 trace), and TraceLens' "execute_{tokens}_context_{n}(sq{tok}sk...)
// _generation_{m}(sq{tok}sk...)". isCtx is false when name is not of the
// execute_..._context_ family at all (other parsers then try it).
func parseVLLMContext(name string) (ri rangeInfo, ok, isCtx bool) {
	rest, found := strings.CutPrefix(name, "execute_")
	if !found {
		return ri, false, false
	}
	if !strings.HasPrefix(rest, "context_") {
		// "{tokens}_context_": the iteration's scheduled tokens first.
		tok, after, cut := strings.Cut(rest, "_")
		if !cut || !strings.HasPrefix(after, "context_") {
			return ri, false, false
		}
		if n, err := strconv.Atoi(tok); err != nil || n < 0 {
			return ri, false, true
		}
		rest = after
	}
	rest = strings.TrimPrefix(rest, "context_")
	ctx, rest, ok1 := cutCount(rest)
	rest, ok2 := strings.CutPrefix(rest, "_generation_")
	gen, rest, ok3 := cutCount(rest)
	if !ok1 || !ok2 || !ok3 || rest != "" {
		return ri, false, true
	}
	return rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: phaseOf(ctx[0], gen[0]),
		ctxReqs: ctx[0], ctxTok: ctx[1], genReqs: gen[0], genTok: gen[1]}, true, true
}

// cutCount reads "{n}({detail})" from the start of s: n requests, and
// their tokens as the detail's first number ("512", "888_788544",
// "sq8155sk8430...").
func cutCount(s string) ([2]int, string, bool) {
	open := strings.IndexByte(s, '(')
	closeAt := strings.IndexByte(s, ')')
	if open <= 0 || closeAt < open {
		return [2]int{}, s, false
	}
	n, err1 := strconv.Atoi(s[:open])
	detail := strings.TrimPrefix(s[open+1:closeAt], "sq")
	end := 0
	for end < len(detail) && detail[end] >= '0' && detail[end] <= '9' {
		end++
	}
	t, err2 := strconv.Atoi(detail[:end])
	if err1 != nil || err2 != nil || n < 0 || t < 0 {
		return [2]int{}, s, false
	}
	if end < len(detail) && detail[end] != '_' && detail[end] != 's' {
		return [2]int{}, s, false // "512x": not a count
	}
	return [2]int{n, t}, s[closeAt+1:], true
}

// parseSGLangStep reads "MODE bs=B[ toks=T][ key=value...]".
func parseSGLangStep(s string, draft bool) (rangeInfo, bool) {
	fields := strings.Fields(s)
	if len(fields) < 2 || !strings.HasPrefix(fields[1], "bs=") {
		return rangeInfo{}, false
	}
	bs, err := strconv.Atoi(strings.TrimPrefix(fields[1], "bs="))
	if err != nil || bs < 0 {
		return rangeInfo{}, false
	}
	toks := -1
	for _, f := range fields[2:] {
		if v, ok := strings.CutPrefix(f, "toks="); ok {
			if t, err := strconv.Atoi(v); err == nil && t >= 0 {
				toks = t
			}
		}
	}
	ri := rangeInfo{kind: rangeEngine, engine: EngineSGLang}
	if draft {
		ri.kind = rangeDraft
	}
	// ForwardMode names (python/sglang/srt/model_executor/forward_batch_info.py).
	switch fields[0] {
	case "EXTEND", "SPLIT_PREFILL", "PREBUILT":
		ri.phase, ri.ctxReqs = PhasePrefill, bs
		if toks >= 0 {
			ri.ctxTok = toks
		}
	case "DECODE":
		ri.phase, ri.genReqs, ri.genTok = PhaseDecode, bs, bs
	case "TARGET_VERIFY", "DRAFT_EXTEND", "DRAFT_EXTEND_V2":
		ri.phase, ri.genReqs = PhaseDecode, bs
	case "MIXED":
		ri.phase = PhaseMixed
		if toks >= 0 {
			ri.ctxTok = toks
		}
	case "IDLE", "DUMMY_FIRST":
		ri.phase = PhaseIdle
	default:
		return rangeInfo{}, false
	}
	return ri, true
}

// parseTRTLLMStep reads "{iter}: {n} ctx reqs[, {t} ctx tokens], {m} gen reqs".
func parseTRTLLMStep(s string) (rangeInfo, bool) {
	_, rest, ok := strings.Cut(s, ": ")
	if !ok {
		return rangeInfo{}, false
	}
	ri := rangeInfo{kind: rangeEngine, engine: EngineTRTLLM}
	var haveCtx, haveGen bool
	for _, part := range strings.Split(rest, ", ") {
		num, what, ok := strings.Cut(strings.TrimSpace(part), " ")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 0 {
			return rangeInfo{}, false
		}
		switch what {
		case "ctx reqs":
			ri.ctxReqs, haveCtx = n, true
		case "ctx tokens":
			ri.ctxTok = n
		case "gen reqs":
			ri.genReqs, haveGen = n, true
		}
	}
	if !haveCtx || !haveGen {
		return rangeInfo{}, false
	}
	ri.phase = phaseOf(ri.ctxReqs, ri.genReqs)
	return ri, true
}

// splitSteps assigns every kernel a step (kinetoKernel.step) by the first
// rule that applies and records the rule.
func (kr *kinetoRead) splitSteps() {
	var draft, prof []kinetoRange
	engines := map[string][]kinetoRange{}
	frames := map[string][]kinetoRange{}
	for _, r := range kr.ranges {
		switch r.info.kind {
		case rangeEngine:
			engines[r.info.engine] = append(engines[r.info.engine], r)
		case rangeDraft:
			draft = append(draft, r)
		case rangeProfilerStep:
			prof = append(prof, r)
		case rangeFrame:
			frames[r.info.engine] = append(frames[r.info.engine], r)
		}
	}
	switch {
	case len(engines) > 0:
		kr.rule = StepRuleEngineRange
		kr.engine = kr.pickFamily(engines, "range")
		kr.stepsFromRanges(engines[kr.engine], draft, false)
	case len(prof) > 0:
		kr.rule = StepRuleProfilerStep
		kr.stepsFromRanges(prof, nil, true)
	case len(frames) > 0:
		kr.rule = StepRuleEngineFrame
		kr.engine = kr.pickFamily(frames, "frame")
		kr.stepsFromRanges(frames[kr.engine], nil, false)
	case kr.hasGraphKernels():
		kr.rule = StepRuleGraphLaunch
		kr.stepsFromGraphs()
	default:
		kr.rule = StepRuleLayerPattern
		if !kr.stepsFromLayerPattern() {
			kr.rule = StepRuleNone
			kr.steps = []stepMeta{{number: 0}}
			for i := range kr.kernels.len() {
				kr.kernels.at(i).step = 0
			}
		}
	}
	kr.countGraphLaunches()
}

// pickFamily chooses, when the ranges (or frames) of more than one
// engine's form mark the iterations, the one that makes the steps: the
// form with the most CPU ranges, and among equals the innermost (the least
// total CPU time: it bounds the launches most tightly). TraceLens writes
// its own vLLM-form "execute_{tokens}_context_..." range around SGLang's
// step[...] in the SGLang traces it keeps; both mark one iteration, and
// SGLang's own is the inner one. The other forms are noted.
func (kr *kinetoRead) pickFamily(fams map[string][]kinetoRange, what string) string {
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	slices.Sort(names)
	count := func(v []kinetoRange) (n int, ns int64) {
		for _, r := range v {
			if !r.gpu {
				n++
				ns += r.hi - r.lo
			}
		}
		return n, ns
	}
	best := names[0]
	for _, n := range names[1:] {
		c, d := count(fams[n])
		bc, bd := count(fams[best])
		if c > bc || (c == bc && d < bd) {
			best = n
		}
	}
	for _, n := range names {
		if n != best {
			c, _ := count(fams[n])
			kr.stepNotes = append(kr.stepNotes, fmt.Sprintf("%d %s %s(s) (%q) mark the same iterations as %s's; steps from %s's", c, n, what, truncName(fams[n][0].name), best, best))
		}
	}
	return best
}

func (kr *kinetoRead) hasGraphKernels() bool {
	for i := range kr.kernels.len() {
		if kr.kernels.at(i).flags&kfGraph != 0 {
			return true
		}
	}
	return false
}

// findRange returns the index of the range in v (sorted by lo) that
// contains t, or -1.
func findRange(v []kinetoRange, t int64) int {
	i, _ := slices.BinarySearchFunc(v, t, func(r kinetoRange, t int64) int {
		if r.lo <= t {
			return -1
		}
		return 1
	})
	i--
	if i >= 0 && t <= v[i].hi {
		return i
	}
	return -1
}

// stepsFromRanges makes one step per range. CPU ranges define the steps
// and bound the kernels' launch times; GPU ranges (linked to their CPU
// range by External id, else taken in order) bound the times of kernels
// that have no launch event. byNumber: the step is ProfilerStep's N.
func (kr *kinetoRead) stepsFromRanges(target, draft []kinetoRange, byNumber bool) {
	byLo := func(a, b kinetoRange) int { return cmp.Compare(a.lo, b.lo) }
	var cpu, gpu, cpuDraft []kinetoRange
	for _, r := range target {
		if r.gpu {
			gpu = append(gpu, r)
		} else {
			cpu = append(cpu, r)
		}
	}
	for _, r := range draft {
		if !r.gpu {
			cpuDraft = append(cpuDraft, r)
		}
	}
	slices.SortStableFunc(cpu, byLo)
	slices.SortStableFunc(gpu, byLo)
	slices.SortStableFunc(cpuDraft, byLo)
	defs := cpu
	if len(defs) == 0 {
		defs = gpu
	}
	stepOf := map[int]int32{}
	newStep := func(n int, r kinetoRange) int32 {
		s, ok := stepOf[n]
		if !ok {
			s = int32(len(kr.steps))
			stepOf[n] = s
			kr.steps = append(kr.steps, stepMeta{number: n, rng: r.name, info: r.info})
		}
		return s
	}
	defStep := make([]int32, len(defs))
	gpuStep := make([]int32, len(gpu))
	switch {
	case byNumber:
		// ProfilerStep#N names its step on either timeline (and may appear
		// on several threads): one step per N.
		for i, r := range cpu {
			defStep[i] = newStep(r.info.profStep, r)
		}
		for i, r := range gpu {
			gpuStep[i] = newStep(r.info.profStep, r)
		}
		if len(cpu) == 0 {
			copy(defStep, gpuStep)
		}
	case len(cpu) == 0:
		for i, r := range gpu {
			defStep[i] = newStep(i, r)
		}
		copy(gpuStep, defStep)
	default:
		// Engine ranges: the CPU ranges (one per iteration, GPU work or
		// not) are the steps, numbered in order; a GPU range is its CPU
		// range's copy, linked by External id, else by order when both
		// timelines have every range.
		byExt := map[int64]int32{}
		for i, r := range cpu {
			defStep[i] = newStep(i, r)
			if r.ext >= 0 {
				byExt[r.ext] = defStep[i]
			}
		}
		for i, r := range gpu {
			gpuStep[i] = -1
			if s, ok := byExt[r.ext]; ok && r.ext >= 0 {
				gpuStep[i] = s
			} else if len(gpu) == len(cpu) {
				gpuStep[i] = defStep[i]
			}
		}
	}
	for i := range kr.kernels.len() {
		k := kr.kernels.at(i)
		k.step = -1
		t, launched := kr.launchTs(k)
		if launched && len(cpu) > 0 {
			if j := findRange(cpu, t); j >= 0 {
				k.step = defStep[j]
				continue
			}
			if d := findRange(cpuDraft, t); d >= 0 {
				// The draft forward belongs to the last iteration before it.
				if j := findRange(cpu, cpuDraft[d].lo); j >= 0 {
					k.step = defStep[j]
				} else if j := lastBefore(cpu, cpuDraft[d].lo); j >= 0 {
					k.step = defStep[j]
				}
				continue
			}
		}
		// A kernel launched outside every CPU range was not launched by a
		// step. Where the profiler recorded launches, a kernel without one
		// was launched before the recording began (the replay of a warm-up
		// step still running when the first step's GPU range opens, on a
		// real CUDA-graph trace): inside a step's GPU window, yet not the
		// step's. GPU ranges place kernels only in traces without launches.
		if !launched && kr.launched && len(cpu) > 0 {
			continue
		}
		if len(gpu) > 0 && (!launched || len(cpu) == 0) {
			if j := findRange(gpu, k.start); j >= 0 && gpuStep[j] >= 0 {
				k.step = gpuStep[j]
				continue
			}
		}
		if !launched && len(cpu) > 0 {
			if j := findRange(cpu, k.start); j >= 0 {
				k.step = defStep[j]
			}
		}
	}
}

// lastBefore is the index of the last range starting at or before t, or -1.
func lastBefore(v []kinetoRange, t int64) int {
	i, _ := slices.BinarySearchFunc(v, t, func(r kinetoRange, t int64) int {
		if r.lo <= t {
			return -1
		}
		return 1
	})
	return i - 1
}

// byDevice returns the kernel indices per device, each sorted by start.
func (kr *kinetoRead) byDevice() [][]int32 {
	idx := map[int32]int{}
	var out [][]int32
	var devs []int32
	for i := range kr.kernels.len() {
		d := kr.kernels.at(i).device
		j, ok := idx[d]
		if !ok {
			j = len(out)
			idx[d] = j
			out = append(out, nil)
			devs = append(devs, d)
		}
		out[j] = append(out[j], int32(i))
	}
	for _, v := range out {
		kr.sortByStart(v)
	}
	// Devices in order, so step numbers do not depend on map order.
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(devs[a], devs[b]) })
	sorted := make([][]int32, len(out))
	for i, j := range order {
		sorted[i] = out[j]
	}
	return sorted
}

func (kr *kinetoRead) sortByStart(v []int32) {
	slices.SortStableFunc(v, func(a, b int32) int {
		return cmp.Compare(kr.kernels.at(int(a)).start, kr.kernels.at(int(b)).start)
	})
}

// stepsFromGraphs: every graph replay (kernels sharing a graph launch's
// correlation ID) is one step, or a piece of one: consecutive replays on a
// device whose gap holds an attention kernel launched eagerly are the
// pieces of one piecewise-graph forward (vLLM captures the forward in
// pieces split at attention, which runs eagerly between them). Eager
// kernels inside such a step's span join it; other eager kernels (input
// preparation, sampling) belong to no step.
func (kr *kinetoRead) stepsFromGraphs() {
	for i := range kr.kernels.len() {
		kr.kernels.at(i).step = -1
	}
	next := make([]int, 0, 4) // next step number per device order
	for dev, ks := range kr.byDevice() {
		next = append(next, 0)
		var (
			cur       int32   = -1 // current step
			curCorr   int64   = -1 // correlation of the current piece
			pending   []int32      // eager kernels since the current piece's last kernel
			joinable  bool         // pending holds an eager attention kernel
			pieceOpen bool
		)
		for _, i := range ks {
			k := kr.kernels.at(int(i))
			if k.flags&kfGraph == 0 {
				if pieceOpen {
					pending = append(pending, i)
					if kr.info(k).class == clsAttn {
						joinable = true
					}
				}
				continue
			}
			if k.corr != curCorr || cur < 0 {
				// A new replay: a piece of the current step when eager
				// attention ran since the previous piece, else a new step.
				if cur >= 0 && joinable {
					for _, p := range pending {
						kr.kernels.at(int(p)).step = cur
					}
				} else {
					cur = int32(len(kr.steps))
					kr.steps = append(kr.steps, stepMeta{number: next[dev]})
					next[dev]++
				}
				curCorr, pending, joinable, pieceOpen = k.corr, pending[:0], false, true
			} else if len(pending) > 0 {
				// Eager kernels interleaved within one replay (another
				// stream): they ran inside the step.
				for _, p := range pending {
					kr.kernels.at(int(p)).step = cur
				}
				pending, joinable = pending[:0], false
			}
			k.step = cur
		}
	}
}

// stepsFromLayerPattern splits eager kernels without ranges at the
// embedding lookups that start every forward (see StepRuleLayerPattern).
// It reports false when no lookup and no step-sized idle gap is found.
func (kr *kinetoRead) stepsFromLayerPattern() bool {
	found := false
	for _, ks := range kr.byDevice() {
		for _, i := range ks {
			kr.kernels.at(int(i)).step = -1
		}
		runs := kr.attentionRuns(ks)
		if len(runs) < 2 {
			continue
		}
		// Cut points: one per gap between attention runs that holds a
		// lookup, at the largest idle time in that gap before the lookup.
		var cuts []int // positions in ks where a step starts
		for g := 0; g+1 < len(runs); g++ {
			lo, hi := runs[g][1], runs[g+1][0] // gap: ks[lo:hi]
			anchor := -1
			for p := lo; p < hi; p++ {
				ki := kr.info(kr.kernels.at(int(ks[p])))
				if ki.class == clsEmbed || ki.lookup {
					anchor = p
					break
				}
			}
			if anchor < 0 {
				continue
			}
			cut, best := anchor, int64(-1)
			for p := lo + 1; p <= anchor; p++ {
				prev := kr.kernels.at(int(ks[p-1]))
				if idle := kr.kernels.at(int(ks[p])).start - (prev.start + prev.dur); idle > best {
					cut, best = p, idle
				}
			}
			cuts = append(cuts, cut)
		}
		if len(cuts) == 0 {
			continue
		}
		found = true
		// Steps: [cut_i, cut_i+1); the kernels before the first cut and
		// after the last complete step are a forward the profile cut.
		bounds := append([]int{0}, cuts...)
		bounds = append(bounds, len(ks))
		layers := make([]int, len(bounds)-1)
		for s := range layers {
			layers[s] = countRunsIn(runs, bounds[s], bounds[s+1])
		}
		mode := modeOf(layers)
		n := 0
		for s := range layers {
			if layers[s] != mode {
				kr.stepNotes = append(kr.stepNotes, fmt.Sprintf("layer-pattern: a forward of %d attention layers (the others have %d) left out: the profile cut it", layers[s], mode))
				continue
			}
			st := int32(len(kr.steps))
			kr.steps = append(kr.steps, stepMeta{number: n})
			n++
			for p := bounds[s]; p < bounds[s+1]; p++ {
				kr.kernels.at(int(ks[p])).step = st
			}
		}
	}
	return found
}

// attentionRuns returns [start, end) positions in ks of maximal runs of
// attention kernels.
func (kr *kinetoRead) attentionRuns(ks []int32) [][2]int {
	var runs [][2]int
	for p := 0; p < len(ks); p++ {
		if kr.info(kr.kernels.at(int(ks[p]))).class != clsAttn {
			continue
		}
		q := p + 1
		for q < len(ks) && kr.info(kr.kernels.at(int(ks[q]))).class == clsAttn {
			q++
		}
		runs = append(runs, [2]int{p, q})
		p = q - 1
	}
	return runs
}

// countRunsIn counts the runs starting in [lo, hi); runs are sorted.
func countRunsIn(runs [][2]int, lo, hi int) int {
	first := func(x int) int {
		i, _ := slices.BinarySearchFunc(runs, x, func(r [2]int, x int) int { return cmp.Compare(r[0], x) })
		return i
	}
	return first(hi) - first(lo)
}

// modeOf is the most common value (the smallest on ties).
func modeOf(v []int) int {
	count := map[int]int{}
	best, bestN := 0, -1
	for _, x := range v {
		count[x]++
	}
	for x, n := range count {
		if n > bestN || (n == bestN && x < best) {
			best, bestN = x, n
		}
	}
	return best
}

// countGraphLaunches counts the distinct graph launches of each step.
func (kr *kinetoRead) countGraphLaunches() {
	seen := map[[2]int64]bool{}
	for i := range kr.kernels.len() {
		k := kr.kernels.at(i)
		if k.step < 0 || k.flags&kfGraph == 0 || k.corr < 0 {
			continue
		}
		key := [2]int64{int64(k.step), k.corr}
		if !seen[key] {
			seen[key] = true
			kr.steps[k.step].graphs++
		}
	}
}
