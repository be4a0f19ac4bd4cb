package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/serving"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// engineFlags are the serving engine's settings, as simulate and
// calibrate --serving take them: vLLM's scheduler arguments, the
// scheduling policy, prefix caching, and the engine's overheads outside
// the GPU step. The step budget and running limit
// (--max-num-batched-tokens, --max-num-seqs) are scenario options
// (sim.Options), which also size vLLM's KV pool in predict, plan, advise
// and model show: one definition of each flag for every verb.
type engineFlags struct {
	blockSize, gpuBlocks int
	longPrefill          int
	noChunked, noFullISL bool
	chunked              bool
	watermark            float64
	policy               string
	noPrefixCache        bool
	recvInterval         int
	streamInterval       int
	overheadsFile        string
}

func (f *engineFlags) bind(fs *pflag.FlagSet) {
	countVar(fs, &f.blockSize, "block-size", "vLLM block_size, tokens per KV block (0 = the engine's default: vLLM's 16, but for an MLA model the page its backend forces: FlashMLA's 64 on Hopper unless another backend is named, FlashInfer-MLA's 64 and CUTLASS_MLA's 128 on Blackwell, 64 for a sparse model; TensorRT-LLM's tokens_per_block 32; SGLang's page_size 1, 64 under flashmla, trtllm_mla and nsa); a size the engine would replace with its page is refused")
	countVar(fs, &f.gpuBlocks, "num-gpu-blocks-override", "vLLM num_gpu_blocks_override: KV blocks per scheduler (0 = from the memory model)")
	countVar(fs, &f.longPrefill, "long-prefill-token-threshold", "vLLM long_prefill_token_threshold: most prompt tokens of one request per step (0 = no limit)")
	fs.BoolVar(&f.noChunked, "no-enable-chunked-prefill", f.noChunked, "vLLM --no-enable-chunked-prefill: prompts are not cut to the step's budget")
	fs.BoolVar(&f.chunked, "enable-chunked-prefill", f.chunked, "TensorRT-LLM enable_chunked_prefill: cut prompts to the step's budget under an engine whose default is off (trtllm)")
	fs.BoolVar(&f.noFullISL, "no-scheduler-reserve-full-isl", f.noFullISL, "vLLM --no-scheduler-reserve-full-isl: admit on the first chunk's blocks, not the whole input's")
	fs.Float64Var(&f.watermark, "watermark", f.watermark, "vLLM --watermark: fraction of KV blocks kept free when admitting while others run (0 = off)")
	fs.StringVar(&f.policy, "policy", f.policy, "the engine's scheduling policy, which --engine decides (vllm and trtllm: prefill mixed with decode in one step, running requests first; sglang: a prefill batch whenever a prompt waits, else decode); given, it must be the engine's")
	wantWhenEmpty(fs, "policy", "the engine's scheduling policy by name")
	fs.BoolVar(&f.noPrefixCache, "no-enable-prefix-caching", f.noPrefixCache, "vLLM --no-enable-prefix-caching: requests with hash IDs or sessions reuse nothing")
	fs.IntVar(&f.recvInterval, "scheduler-recv-interval", f.recvInterval, "SGLang --scheduler-recv-interval: the scheduler reads new requests once per this many decode steps (and after every prefill); 0 or 1 = every step, the default")
	fs.IntVar(&f.streamInterval, "stream-interval", f.streamInterval, "the engine's --stream-interval: the first token goes out at once, then one chunk per this many tokens, which ITL then measures (0 or 1 = every token, the default)")
	fs.StringVar(&f.overheadsFile, "serving-overheads", f.overheadsFile, "the engine's overheads outside the GPU step, as calibrate --serving writes them (JSON); refused when fitted under another engine or on another GPU")
}

// engine returns the options and overheads the flags give for the
// scenario's engine prof; errors name the flag. The scheduling policy is
// the engine's (its profile's scheduler): --policy may repeat it, and
// another one is refused, since SGLang's kernels under vLLM's scheduler
// (or the reverse) is a scenario no engine runs. An engine that serves no
// requests (the executor) is refused.
// checkPrefixCache refuses --no-enable-prefix-caching where no load
// names what a prefix cache reuses (serving.Traffic.NamesPrefixes): the
// flag would change nothing. loads are the loads simulated; none (a
// measured benchmark's levels) names any.
func (f *engineFlags) checkPrefixCache(loads ...*serving.Traffic) error {
	if !f.noPrefixCache {
		return nil
	}
	for _, t := range loads {
		if t.NamesPrefixes() {
			return nil
		}
	}
	return flagError("--no-enable-prefix-caching", nil, "no request of the load names its prompt blocks or a session (hash IDs or sessions: only a --requests-file trace such as Mooncake's carries them), so there is no prefix to reuse and nothing to turn off: leave it out")
}

func (f *engineFlags) engine(prof *engprof.Profile, o sim.Options, policyGiven bool) (serving.EngineOptions, error) {
	if !prof.Serves() {
		return serving.EngineOptions{}, flagError("--engine", prof.Name(), "want an engine that serves requests (vllm, sglang or trtllm): %s runs one step of a given workload and has no scheduler", prof.Name())
	}
	pol, err := serving.ParsePolicy(prof.Scheduler.Policy)
	if err != nil {
		return serving.EngineOptions{}, causeError("--engine", prof.Name(), err)
	}
	if policyGiven {
		p, err := serving.ParsePolicy(f.policy)
		if err != nil {
			return serving.EngineOptions{}, causeError("--policy", nil, err)
		}
		if p != pol {
			return serving.EngineOptions{}, flagError("--policy", f.policy,
				"want %s's own scheduler, %s (another engine's scheduler over its kernels is a scenario no engine runs; --engine picks the engine whose scheduler is %s)", prof.Name(), pol, p)
		}
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"--scheduler-recv-interval", f.recvInterval}, {"--stream-interval", f.streamInterval}} {
		if c.v < 0 {
			return serving.EngineOptions{}, flagError(c.flag, c.v, "want a count of steps or tokens, 1 or more (0 or 1: every one)")
		}
	}
	if f.recvInterval > 1 && pol != serving.PolicySGLang {
		return serving.EngineOptions{}, flagError("--scheduler-recv-interval", f.recvInterval,
			"want 0 or 1 under %s: SGLang's option, and %s's scheduler reads new requests every step", prof.Name(), prof.Name())
	}
	// vLLM's SchedulerConfig settings: TensorRT-LLM (GUARANTEED_NO_EVICT
	// admission, no watermark, no per-request prefill cap) and SGLang have
	// none of them, and pricing them under those engines would price a
	// scheduler no engine runs.
	if prof.Engine != engprof.DefaultEngine {
		for _, c := range []struct {
			flag  string
			v     any
			given bool
		}{{"--watermark", f.watermark, f.watermark != 0}, {"--long-prefill-token-threshold", f.longPrefill, f.longPrefill != 0},
			{"--no-scheduler-reserve-full-isl", nil, f.noFullISL}} {
			if c.given {
				return serving.EngineOptions{}, flagError(c.flag, c.v,
					"vLLM's option, which %s's scheduler has no counterpart of: leave it out, or pass --engine vllm to price vLLM's scheduler", prof.Name())
			}
		}
	}
	// --enable-chunked-prefill turns on what an engine leaves off by
	// default (TensorRT-LLM); where chunking is already the default (vLLM,
	// SGLang: scheduler.chunked_prefill unstated or true) it asks for
	// nothing.
	if f.chunked {
		if c := prof.Scheduler.ChunkedPrefill; c == nil || *c {
			return serving.EngineOptions{}, flagError("--enable-chunked-prefill", nil,
				"%s cuts prompts to the step's budget by default: the flag turns on what TensorRT-LLM leaves off; leave it out", prof.Name())
		}
	}
	// --no-enable-chunked-prefill turns off what vLLM and SGLang do by
	// default; under an engine that leaves chunking off (TensorRT-LLM's
	// enable_chunked_prefill False) it asks for nothing, as
	// --enable-chunked-prefill under vLLM does.
	if f.noChunked {
		if c := prof.Scheduler.ChunkedPrefill; c != nil && !*c {
			return serving.EngineOptions{}, flagError("--no-enable-chunked-prefill", nil,
				"%s leaves prompts whole by default (chunked prefill off): the flag turns off what vLLM and SGLang do; leave it out", prof.Name())
		}
	}
	e := serving.EngineOptions{MaxNumSeqs: o.MaxNumSeqs, MaxNumBatchedTokens: o.MaxNumBatchedTokens, BlockSize: f.blockSize,
		NumGPUBlocksOverride: f.gpuBlocks, LongPrefillTokenThreshold: f.longPrefill, DisableChunkedPrefill: f.noChunked, EnableChunkedPrefill: f.chunked,
		NoSchedulerReserveFullISL: f.noFullISL, Watermark: f.watermark, Policy: pol, NoPrefixCaching: f.noPrefixCache,
		SchedulerRecvInterval: f.recvInterval, StreamInterval: f.streamInterval}
	if err := e.Validate(); err != nil {
		return e, causeError("", nil, err)
	}
	return e, nil
}

// overheads reads --serving-overheads (none without it) for the
// deployment scen priced and scheduled by engine prof. Its terms are the
// engine's host time and its kernels' error against the step model on
// one GPU: overheads fitted under another engine or on another GPU are
// refused. Fitted on another box of the same GPU, another model, another
// version of the engine, another plan, attention backend, MoE kernel,
// options, KV dtype or scheduler settings (eng's), they apply with a
// caveat (note), as do overheads whose origin
// (or whose plan, kernels and options) the file does not record.
func (f *engineFlags) overheads(prof *engprof.Profile, scen sim.Scenario, eng serving.EngineOptions) (o serving.Overheads, note string, err error) {
	if f.overheadsFile == "" {
		return o, "", nil
	}
	path := f.overheadsFile
	if err := checkInputFile("--serving-overheads", path, "a JSON file of overheads (calibrate --serving -o)"); err != nil {
		return o, "", err
	}
	file, err := serving.LoadOverheadsFile(path)
	if err != nil {
		return o, "", causeError("--serving-overheads", nil, err)
	}
	from := file.FittedOn
	if from == nil {
		return file.Overheads, fmt.Sprintf("overheads from %s: where they were fitted is not recorded (engine, GPU, model): applied as given", path), nil
	}
	here := serving.OriginOf(scen, prof.Ref(), eng)
	if from.Engine.Name != here.Engine.Name {
		return o, "", flagError("--serving-overheads", path, "want overheads fitted under this run's engine: fitted under %s, this run is %s (the terms are an engine's host time and its kernels' error)", from.Engine, here.Engine)
	}
	if same, known := scen.Topo.RunsOn(from.GPU); from.GPU != here.GPU && !(known && same) {
		return o, "", flagError("--serving-overheads", path, "want overheads fitted on this box's GPU: fitted on %s (%s), the box %s has %s (the terms are that host's and GPU's)", from.GPU, from.Topology, here.Topology, here.GPU)
	}
	differ, unrecorded := from.Differences(here)
	switch {
	case len(differ) > 0 && unrecorded:
		note = fmt.Sprintf("overheads from %s were fitted on another deployment (%s; the plan, kernels and options not recorded): applied as given", path, strings.Join(differ, "; "))
	case len(differ) > 0:
		note = fmt.Sprintf("overheads from %s were fitted on another deployment (%s): applied as given", path, strings.Join(differ, "; "))
	case unrecorded:
		note = fmt.Sprintf("overheads from %s record the engine, box and model they were fitted on, not the plan, kernels and options: applied as given", path)
	}
	return file.Overheads, note, nil
}

// resultsEngine is the engine the measured results name (their
// framework or backend field, Measured.EngineRef), set as the scenario's
// when the command line names none: the run the results measured is the
// scenario to price, as a trace's recorded scenario is. The note says
// where the engine came from, or which flag overrode the results' (a
// default never does); results naming two engines are an error. Results
// that name no engine (an API's backend, aiperf, GuideLLM) leave the
// scenario as the flags give it.
func resultsEngine(sc *scenarioFlags, flag string, levels []serving.Measured) (note string, err error) {
	var ref engprof.Ref
	var from *serving.Measured
	for i := range levels {
		if m := &levels[i]; m.EngineUnprofiled() {
			// An engine tpscope has no profile of ran them: the default
			// engine would price a run they never measured.
			if !sc.changed("engine") {
				var serve []string
				for _, n := range engprof.Names() {
					if !strings.HasPrefix(n, "executor@") { // serves no requests
						serve = append(serve, n)
					}
				}
				return "", flagError(flag, nil, "%s ran under %q, an engine tpscope has no profile of (it has %s): pass --engine to price it as one of those",
					m.File, m.Engine, strings.Join(serve, ", "))
			}
			if note == "" {
				note = fmt.Sprintf("engine recorded in the results: %q (in %s), which tpscope has no profile of; priced as --engine %s", m.Engine, m.File, sc.opts.Engine)
			}
		}
	}
	for i := range levels {
		r, ok := levels[i].EngineRef()
		if !ok {
			continue
		}
		if from != nil && r != ref {
			return "", flagError(flag, nil, "want results of one engine: %s names %s (%q) and %s names %s (%q)",
				from.File, ref, from.Engine, levels[i].File, r, levels[i].Engine)
		}
		if from == nil {
			ref, from = r, &levels[i]
		}
	}
	if from == nil {
		return note, nil
	}
	if note != "" {
		// Results naming an engine tpscope knows and one it does not are
		// two engines.
		return "", flagError(flag, nil, "want results of one engine: %s names %s (%q), another file names one tpscope has no profile of", from.File, ref, from.Engine)
	}
	prof, err := engprof.Lookup(ref)
	if err != nil {
		return "", causeError(flag, from.File, err)
	}
	if sc.changed("engine") {
		if sc.opts.Engine.Name != ref.Name {
			return fmt.Sprintf("engine recorded in the results: %s (%q in %s); overridden by --engine %s", ref, from.Engine, from.File, sc.opts.Engine), nil
		}
		return "", nil
	}
	sc.opts.Engine = ref
	return fmt.Sprintf("engine %s: recorded in the results (%q in %s)", prof.Name(), from.Engine, from.File), nil
}

// resultsPlan is the parallel plan the measured results record
// (InferenceX's tp, ep, dp and GPU count, Measured.Plan), set as the
// scenario's where the command line does not give it, as resultsEngine
// sets the engine: the plan the results measured is the scenario to
// price. A plan flag the user gave that contradicts it is refused in one
// line naming the flag, the file and what it recorded (their latencies
// are another plan's), and so is a box with fewer GPUs than the results
// ran on; results recording two plans are an error. The note says what
// came from the results. Results that record no plan leave the flags as
// they are.
func resultsPlan(sc *scenarioFlags, flag string, levels []serving.Measured) (note string, err error) {
	var rec model.Plan
	var from *serving.Measured
	var what string
	for i := range levels {
		p, w, ok := levels[i].Plan()
		if !ok {
			continue
		}
		if from != nil && p != rec {
			return "", flagError(flag, nil, "want results of one plan: %s records %s (%s) and %s records %s (%s)", from.File, rec, what, levels[i].File, p, w)
		}
		if from == nil {
			rec, from, what = p, &levels[i], w
		}
	}
	if from == nil {
		return "", nil
	}
	var taken []string
	for _, c := range []struct {
		name            string
		given, recorded any
		set             func()
	}{
		{"tp", sc.tp, rec.TP, func() { sc.tp = rec.TP }},
		{"dp", sc.dp, rec.DP, func() { sc.dp = rec.DP }},
		{"ep", sc.ep, rec.EP, func() { sc.ep = rec.EP }},
	} {
		switch differ := c.given != c.recorded; {
		case sc.changed(c.name) && differ:
			return "", flagError("--"+c.name, c.given, "want the plan the %s results ran: %s records %s, which is %s (--%s %v)", flag, from.File, what, rec, c.name, c.recorded)
		case !sc.changed(c.name):
			switch {
			case differ && c.recorded == true:
				taken = append(taken, "--"+c.name)
			case differ:
				taken = append(taken, fmt.Sprintf("--%s=%v", c.name, c.recorded))
			}
			c.set()
		}
	}
	if from.GPUs > 0 {
		box, _, err := sc.box()
		if err != nil {
			return "", err
		}
		if n := box.NumGPUs(); n < from.GPUs {
			name, value := "--topo", any(sc.topo)
			if sc.changed("gpus") {
				name, value = "--gpus", sc.gpus
			}
			return "", flagError(name, value, "want a box of the %d GPUs the %s results ran on: %s records %s, the box has %d", from.GPUs, flag, from.File, what, n)
		}
	}
	if len(taken) == 0 {
		return "", nil
	}
	return fmt.Sprintf("plan %s: recorded in the results (%s in %s), as %s", rec, what, from.File, strings.Join(taken, " ")), nil
}

// resultsDefaults says, in one line, what the measured results leave to
// the defaults: when none of them names a model and --model is not
// given, the default model prices them; when none names a GPU and --topo
// is not given, the default box runs them. Results of another model or
// box (LLMServingSim's Qwen3-30B log on 2 GPUs) are then compared against
// a deployment they never ran, which the output must not hide. "" when
// the results or the flags name both.
func resultsDefaults(sc *scenarioFlags, levels []serving.Measured, scen sim.Scenario) string {
	if len(levels) == 0 {
		return ""
	}
	named, gpu := false, false
	for i := range levels {
		named = named || levels[i].Model != ""
		gpu = gpu || levels[i].GPU != ""
	}
	var notes []string
	noModel, noGPU := !named && !sc.changed("model"), !gpu && !sc.changed("topo")
	switch {
	case noModel && noGPU:
		notes = append(notes, fmt.Sprintf("the results name no model and no GPU: priced as the default model %s on the default box %s (--model and --topo name the ones they ran)", scen.Arch.Name, scen.Topo.Name))
	case noModel:
		notes = append(notes, fmt.Sprintf("the results name no model: priced as the default model %s (--model names the one they ran)", scen.Arch.Name))
	case noGPU:
		notes = append(notes, fmt.Sprintf("the results name no GPU: priced on the default box %s (--topo names the one they ran)", scen.Topo.Name))
	}
	// A checkpoint no preset is of, priced as the --model preset the
	// user named (resultsModel does not judge it): said, since the
	// preset's quantization or weights may not be the checkpoint's
	// (DeepSeek-R1-0528-FP4's results priced as deepseek-v3's FP8).
	if scen.Arch.Ref.Path == "" {
		for i := range levels {
			if m := levels[i].Model; m != "" {
				if _, known := model.PresetOf(m); !known {
					notes = append(notes, fmt.Sprintf("the results ran %q, which is no preset's checkpoint: priced as preset %s, as --model names it (--model with the checkpoint's config.json prices the checkpoint itself)", m, scen.Arch.Name))
					break
				}
			}
		}
	}
	return strings.Join(notes, "; ")
}

// resultsRanOn runs resultsGPU and resultsModel on the box and model the
// flags name, before the scenario is built: a scenario of the wrong box
// fails on what the box lacks (an engine with no kernel for the
// results' experts on its GPU), which hid that the results ran on
// another GPU.
func resultsRanOn(sc *scenarioFlags, flag string, levels []serving.Measured) error {
	if len(levels) == 0 {
		return nil
	}
	box, _, err := sc.box()
	if err != nil {
		return err
	}
	if err := resultsGPU(box, flag, levels); err != nil {
		return err
	}
	a, err := sc.modelArch()
	if err != nil {
		return err
	}
	return resultsModel(a, sc.changed("model"), flag, levels)
}

// resultsGPU refuses results that name a GPU (InferenceX's hw) other than
// the box's (Topology.RunsOn, as for a trace's GPU): their latencies are
// another GPU's. A GPU name the catalog does not know is not judged.
func resultsGPU(topo *topology.Topology, flag string, levels []serving.Measured) error {
	if err := resultsOne(flag, "GPU", levels, func(m *serving.Measured) (string, string) {
		return m.GPU, strings.ToLower(strings.TrimSpace(m.GPU))
	}); err != nil {
		return err
	}
	for i := range levels {
		m := &levels[i]
		if same, known := topo.RunsOn(m.GPU); known && !same {
			return flagError("--topo", topo.Name, "want a box of the GPU the %s results ran on: %s ran on %q, the box has %s", flag, m.File, m.GPU, topo.DeviceOf(0).Name)
		}
	}
	return nil
}

// resultsModel refuses results that name a model (vllm bench's model_id,
// InferenceX's model) other than the scenario's, as resultsGPU does a
// GPU: their latencies are another model's. A checkpoint is a preset's by
// model.PresetOf. Without --model the default stands for no model the
// results ran, so a checkpoint other than the default's is refused,
// naming the --model to pass. A --model preset is refused against a
// checkpoint of another preset; a checkpoint no preset is of (another
// quantization, a fine-tune, a local path) against a --model the user
// chose, or a --model config file against any, is not judged: the user
// named what prices it.
func resultsModel(a *model.Arch, modelGiven bool, flag string, levels []serving.Measured) error {
	if err := resultsOne(flag, "model", levels, func(m *serving.Measured) (string, string) {
		if p, ok := model.PresetOf(m.Model); ok {
			return m.Model, p
		}
		// A checkpoint no preset is of, by its last path element: a hub
		// name and a local copy of it are one model.
		id := strings.ToLower(strings.TrimRight(strings.TrimSpace(m.Model), "/"))
		return m.Model, id[strings.LastIndex(id, "/")+1:]
	}); err != nil {
		return err
	}
	for i := range levels {
		m := &levels[i]
		if m.Model == "" {
			continue
		}
		preset, known := model.PresetOf(m.Model)
		switch {
		case known && a.Ref.Path == "" && preset == a.Ref.Name:
			continue
		case !modelGiven && known:
			return usageErrorf("%s ran %q; the default model is %s: pass --model %s", m.File, m.Model, a.Name, preset)
		case !modelGiven:
			return usageErrorf("%s ran %q; the default model is %s: pass --model with its config.json (a checkpoint directory or file)", m.File, m.Model, a.Name)
		case known && a.Ref.Path == "":
			return flagError("--model", a.Name, "want the model the %s results ran: %s ran %q, which is preset %s", flag, m.File, m.Model, preset)
		}
	}
	return nil
}

// resultsInstances refuses --instances above 1 against results that
// record the GPUs they ran on, when the copies of the plan take more of
// them: the results measured one server of their plan on those GPUs (the
// box may hold more; resultsPlan refuses fewer), and --instances 2 would
// serve the same load with twice the GPUs.
func resultsInstances(p model.Plan, instances int, flag string, levels []serving.Measured) error {
	if instances <= 1 {
		return nil
	}
	for i := range levels {
		m := &levels[i]
		if used := instances * p.World(); m.GPUs > 0 && used > m.GPUs {
			_, what, _ := m.Plan()
			return flagError("--instances", instances, "want the deployment the %s results ran: %s records %s, one server; %d copies of %s take %d GPUs",
				flag, m.File, what, instances, p.Normalized(), used)
		}
	}
	return nil
}

// resultsOne refuses results that name two of one thing (what: a model,
// a GPU) by key (name as the file writes it, and the identity compared;
// "" where a file names none), as resultsEngine and resultsPlan refuse two
// engines or plans: one scenario prices every level, so levels measured
// on two models or GPUs cannot all be its, whichever the flags name (a
// --model config file is not judged against a checkpoint's name, so
// without this a DeepSeek-R1 and a GLM-5 result were priced as one
// model).
func resultsOne(flag, what string, levels []serving.Measured, key func(*serving.Measured) (name, id string)) error {
	var from *serving.Measured
	var name, id string
	for i := range levels {
		n, k := key(&levels[i])
		if k == "" {
			continue
		}
		if from == nil {
			from, name, id = &levels[i], n, k
			continue
		}
		if k != id {
			return flagError(flag, nil, "want results of one %s: %s ran %q and %s ran %q", what, from.File, name, levels[i].File, n)
		}
	}
	return nil
}

// kvBudgetText is the engine's KV-pool fraction and where it came from,
// naming the flag when the command line gave it (sim.KVBudget.GivenBy).
func kvBudgetText(b sim.KVBudget) string {
	return b.GivenBy().String()
}

// engineLine is the engine's settings in one line.
func engineLine(e serving.EngineOptions, kvBlocks, schedulers, instances int, router string, o serving.Overheads) string {
	extras := ""
	for _, x := range e.Extras() {
		extras += ", " + x
	}
	s := fmt.Sprintf("engine: %s policy, max_num_seqs %d, max_num_batched_tokens %d, block_size %d%s; %d KV blocks per scheduler (%d tokens); %d scheduler(s), %d instance(s), router %s",
		e.Policy, e.MaxNumSeqs, e.MaxNumBatchedTokens, e.BlockSize, extras, kvBlocks, kvBlocks*e.BlockSize, schedulers, instances, router)
	if !o.IsZero() {
		s += "; overheads " + o.String()
	}
	return s
}
