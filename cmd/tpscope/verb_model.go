package main

import (
	"context"
	"fmt"
	engprof "github.com/tpscope/tpscope/engine"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tpscope/tpscope/internal/units"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// memFlags is model show's what-if memory size: another GPU memory than
// the box's (--topo) for the capacity figures.
type memFlags struct {
	gb float64
}

func (m *memFlags) bind(fs *pflag.FlagSet) {
	fs.Float64Var(&m.gb, "gpu-mem-gb", m.gb, "GPU memory in GB (1e9 B) for the KV capacity and the engine's defaults that follow it, as vLLM's step budget and running limit checked against --max-num-seqs (default: the memory of --topo's GPUs)")
}

// bytes is the memory per GPU the engine's pool is sized in.
func (m *memFlags) bytes(sc *sim.Scenario) (int64, error) {
	if m.gb < 0 {
		return 0, flagError("--gpu-mem-gb", m.gb, "want a positive size")
	}
	if m.gb > 0 {
		return int64(m.gb * 1e9), nil
	}
	return sc.Topo.DeviceOf(0).MemBytes, nil
}

var modelShowVerb = &Verb{
	UsageLine: "model show [MODEL] [flags]",
	Short:     "summarize a model: dims, quantization, parameters, weights and KV per GPU, KV capacity",
	Long: `Shows a built-in model (or a config file or directory) under a parallel plan:
parameter counts (total and active per token), which components are quantized
to which dtype, weight bytes per GPU by component (replicated vs sharded),
KV-cache bytes per token per GPU for bf16 and fp8, the activation workspace
estimate, and how many tokens of KV cache fit per GPU at the given memory size
and utilization. It prices no step: the flags of a step's workload, kernels,
collectives and cost tables (--batch, --context, --phase, --nccl-proto,
--perf-db, ...) change nothing it shows and are refused. --engine names the
engine whose KV-pool rule sizes the capacity, the pool predict's memory line
gives for the same flags (vLLM's gpu_memory_utilization, SGLang's
mem_fraction_static, TensorRT-LLM's free_gpu_memory_fraction of the memory
weights and activations leave, the executor's whole memory), and for a DSA
model decides its dense or sparse attention.`,
	Example: "tpscope model show kimi-k2.5-nvfp4 --tp 8 --output json\ntpscope model show glm-5-nvfp4 --tp 8 --dcp 8 --dense-dsa --gpu-mem-gb 96",
	New:     func() Options { return newModelShowOptions() },
}

// modelShowOptions are the flags of model show and model load.
type modelShowOptions struct {
	sc     *scenarioFlags
	mem    memFlags
	output string
}

func newModelShowOptions() *modelShowOptions {
	return &modelShowOptions{sc: newScenarioFlags(), output: formatTable}
}

func (o *modelShowOptions) Bind(fs *pflag.FlagSet) {
	o.sc.Bind(fs)
	o.mem.bind(fs)
	fs.StringVar(&o.output, "output", o.output, "output format: table or json")
}

func (o *modelShowOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(args) > 1 {
		return usageErrorf("model show takes at most one model name, got %q", args)
	}
	if len(args) == 1 {
		// The argument and --model name the same thing: with both, one
		// of them would be dropped without a word.
		if o.sc.changed("model") {
			return flagError("--model", o.sc.model, "the argument %q names the model too: give it once", args[0])
		}
		o.sc.model = args[0]
	}
	return showModel(o.sc, &o.mem, o.output, std.Stdout)
}

var modelLoadVerb = &Verb{
	UsageLine: "model load DIR_OR_FILE [flags]",
	Short:     "parse a user's config.json (+ hf_quant_config.json) and show its summary",
	Long: `Loads DIR_OR_FILE: a model directory holding config.json and optionally
hf_quant_config.json, or a single config file (one named *config.json reads
the hf_quant_config.json beside it; one named PREFIX_config.json reads
PREFIX_hf_quant_config.json when there is one). hf_quant_config.json sets the
quantization only when the config has no quantization_config of its own, as
vLLM reads them; the source line names the file that set it. Prints the same
summary as 'model show'. Errors name the file, the field and what was
expected.`,
	Example: "tpscope model load ./Kimi-K2.5-NVFP4 --tp 8\ntpscope model load ./GLM-5/config.json --output json",
	New:     func() Options { return &modelLoadOptions{*newModelShowOptions()} },
}

// modelLoadOptions are model show's, with the model an argument.
type modelLoadOptions struct{ modelShowOptions }

func (o *modelLoadOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(args) != 1 {
		return usageErrorf("model load takes one DIR_OR_FILE argument, got %d", len(args))
	}
	// The model is the argument; --model, which model show and every
	// other verb take, would be dropped without a word.
	if o.sc.changed("model") {
		return flagError("--model", o.sc.model, "model load reads the model from DIR_OR_FILE (%s): leave --model out, or use model show --model", args[0])
	}
	if err := checkInputPath("", args[0], "a model directory or its config.json"); err != nil {
		return err
	}
	if err := checkModelPath("", args[0]); err != nil {
		return err
	}
	a, err := model.Load(args[0])
	if err != nil {
		return err
	}
	o.sc.arch = a
	return showModel(o.sc, &o.mem, o.output, std.Stdout)
}

var modelListVerb = &Verb{
	UsageLine: "model list [flags]",
	Short:     "list the built-in models",
	Example:   "tpscope model list --output json",
	New:       func() Options { return &modelListOptions{output: formatTable} },
}

// modelListOptions are model list's flags.
type modelListOptions struct{ output string }

func (o *modelListOptions) Bind(fs *pflag.FlagSet) {
	bindOutputFlag(fs, &o.output, "one row per model", allFormats...)
}

func (o *modelListOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(args) > 0 {
		return usageErrorf("model list takes no arguments, got %q", args)
	}
	if err := checkOutput(o.output, allFormats...); err != nil {
		return err
	}
	return listModels(o.output, std.Stdout)
}

// showKeeps are the scenario flags that change what model show prints:
// the model and its build (DSA mode, speculative decoding and its
// drafter), the plan, the KV dtype, the box and its GPU memory (--topo,
// --gpus, --gpu-mem-util), vLLM's profiling step (--max-num-batched-tokens,
// --max-num-seqs), the capture sizes where the engine's default pool
// reserves for the largest (SGLang's mem_fraction_static; refused by
// showModel under a pool they do not enter) and the engine (its KV-pool
// rule; for a DSA model, its default decides dense or sparse attention).
var showKeeps = []string{"model", "tp", "ep", "dp", "dcp", "mtp", "kv-dtype", "dense-dsa", "topo", "gpus",
	"spec", "spec-tokens", "spec-topk", "spec-steps", "draft-model", "draft-tp", "gpu-mem-util", "cuda-graph-mem-gib", "max-model-len",
	"max-num-batched-tokens", "max-num-seqs", "graph-sizes", "engine"}

// unusedByShow refuses a scenario flag that changes nothing model show
// prints (a step's workload, its routing and dispatch, the cost source,
// the kernels and collectives, the drafts' acceptance): no step is priced,
// only weights, KV bytes and KV capacity per GPU.
func unusedByShow(sc *scenarioFlags) error {
	var err error
	sc.visitChanged(func(fl *pflag.Flag) {
		if err != nil || !sc.isScenarioFlag(fl.Name) || slices.Contains(showKeeps, fl.Name) {
			return
		}
		err = flagError("--"+fl.Name, fl.Value.String(), "model show prices no step, only weights, KV bytes and KV capacity per GPU, which this flag does not change: leave it out (predict prices a step)")
	})
	return err
}

func showModel(sc *scenarioFlags, mem *memFlags, out string, w io.Writer) error {
	if err := checkOutput(out, "table", "json"); err != nil {
		return err
	}
	if err := unusedByShow(sc); err != nil {
		return err
	}
	scen, err := sc.scenario()
	if err != nil {
		return err
	}
	memBytes, err := mem.bytes(&scen)
	if err != nil {
		return err
	}
	// Its scheduler limits size the engine's KV pool only: refused where
	// they size nothing of it, and checked against the engine's defaults
	// at the memory the pool is sized at (--gpu-mem-gb's, else the box's
	// GPU's), as predict checks them on a box of that GPU.
	if err := scen.CheckSchedulerLimitsOn(memBytes); err != nil {
		return usageErrorf("%v", err)
	}
	// A running limit that sizes nothing of the pool (SGLang's) bounds
	// only a step's batch and capture, which model show does not price.
	if prof, err := engprof.Lookup(scen.Options.Engine); err == nil && scen.Options.MaxNumSeqs > 0 && prof.KVPool.KVPoolRule() != engprof.KVPoolGPUMemUtil {
		return flagError("--max-num-seqs", scen.Options.MaxNumSeqs, "%s's running limit sizes nothing of its KV pool, and model show prices no step it would bound: leave it out (predict and plan take it)", prof.Name())
	}
	prof, err := engprof.Lookup(scen.Options.Engine)
	if err != nil {
		return err
	}
	// The capture sizes size a pool whose default reserves for the
	// largest captured batch (SGLang's cuda_graph_max_bs), as predict's
	// memory line gives it; a fixed fraction reads none of them.
	if b, fixed := sim.FixedKVBudget(prof, scen.Options); fixed && sc.changed("graph-sizes") {
		return flagError("--graph-sizes", graphSizesText(scen.Options), "%s's KV pool is %s, which no capture size enters, and model show prices no step they would pad: leave it out (predict prices a step)", prof.Name(), b)
	}
	// The engine's KV pool on a GPU of that memory, sized by the one
	// path predict's memory fit takes (sim.KVBudgetFor: the rule, its
	// fraction given or the engine's default, SGLang's from the step
	// budget, graphs and ranks, vLLM's profiling step), for the
	// scenario's workload; its capacity by the budget's rule.
	devName := ""
	if dev := scen.Topo.DeviceOf(0); dev != nil {
		devName = dev.Name
	}
	pool := sim.KVBudgetFor(prof, scen.Options, scen, scen.Workload, memBytes, devName, 0, 0)
	// A default fraction of 0 or less sizes no pool: the engine does not
	// start, as predict says.
	if err := pool.NoPool(); err != nil {
		return fmt.Errorf("%s %s on %s: %w", scen.Arch.Name, scen.Plan.Normalized(), scen.Topo.Name, err)
	}
	s := model.Summarize(scen.Arch, scen.Plan, scen.Workload, scen.Build, float64(memBytes), pool.Frac, pool.Capacity())
	if pool.Rule != engprof.KVPoolGPUMemUtil {
		// The table's utilization line is vLLM's; another rule is said
		// whole.
		s.KVPool = kvBudgetText(pool)
	}
	s.ProfileStep = pool.GivenBy().ProfileStep()
	s.CUDAGraphCaveat = pool.GraphCaveat()
	// The summary, and where the engine chose the selected KV dtype
	// (Scenario.KVDefault).
	// The box the plan is laid on and whose GPU's memory sizes the
	// capacity (unless --gpu-mem-gb gives another), named even when it is
	// the default.
	// The engine whose rule sized the pool, and the budget it sized.
	js := struct {
		model.Summary
		Topology  string         `json:"topology"`
		KVDefault *sim.KVDefault `json:"kv_default,omitempty"`
		Engine    string         `json:"engine"`
		KVBudget  sim.KVBudget   `json:"kv_budget"`
	}{s, scen.Topo.Name, scen.KVDefault, prof.Name(), pool}
	return render(w, out, view{
		JSON: js,
		Text: func(w io.Writer, _ bool) error { return writeModelSummary(w, &s, &scen, prof.Name(), pool, mem.gb > 0) },
	})
}

// writeModelSummary is model show's table.
// engine and pool: the engine whose budget sized the capacity, and the
// budget. memGiven: --gpu-mem-gb gave the memory, not the box's GPU.
func writeModelSummary(w io.Writer, s *model.Summary, scen *sim.Scenario, engine string, pool sim.KVBudget, memGiven bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s (%s)\n", s.Model, s.ModelType)
	if s.QuantSource != "" {
		fmt.Fprintf(tw, "source\t%s; quantization from %s\n", s.Source, s.QuantSource)
	} else {
		fmt.Fprintf(tw, "source\t%s\n", s.Source)
	}
	fmt.Fprintf(tw, "plan\t%s on %d GPUs of %s\n", s.Plan, s.GPUs, scen.Topo.Name)
	d := s.Dims
	fmt.Fprintf(tw, "dims\t%d layers (%d dense), hidden %d, %d heads, q_lora %d, kv_lora %d + rope %d, nope %d, v %d\n",
		d.Layers, d.DenseLayers, d.Hidden, d.Heads, d.QLoraRank, d.KVLoraRank, d.QKRopeHeadDim, d.QKNopeHeadDim, d.VHeadDim)
	fmt.Fprintf(tw, "moe\t%d routed experts top-%d + %d shared, expert dim %d, dense dim %d, vocab %d, MTP layers %d\n",
		d.RoutedExperts, d.TopK, d.SharedExperts, d.MoEIntermediate, d.Intermediate, d.Vocab, d.MTPLayers)
	if s.MaxModelLenTokens > 0 {
		from := "max_position_embeddings"
		if s.MaxModelLenTokens != d.MaxPositions {
			from = fmt.Sprintf("max_position_embeddings %d scaled by rope_scaling", d.MaxPositions)
		}
		if n := scen.Options.MaxModelLen; n > 0 {
			fmt.Fprintf(tw, "max context\t%d tokens (--max-model-len; the model's is %d, vLLM's max_model_len from %s; a longer --context is refused)\n", n, s.MaxModelLenTokens, from)
		} else {
			fmt.Fprintf(tw, "max context\t%d tokens (vLLM's max_model_len from %s; a longer --context is refused)\n", s.MaxModelLenTokens, from)
		}
	}
	if len(s.Defaults) > 0 {
		ds := make([]string, len(s.Defaults))
		for i, fd := range s.Defaults {
			ds[i] = fd.String()
		}
		fmt.Fprintf(tw, "defaults\tabsent from the config, set to its class's default: %s\n", strings.Join(ds, ", "))
	}
	if d.IndexHeads > 0 {
		fmt.Fprintf(tw, "dsa indexer\t%d heads x %d, top-%d tokens\n", d.IndexHeads, d.IndexHeadDim, d.IndexTopK)
		// Whether the step runs it: chosen (--dense-dsa) or the box's engines'.
		mode := "sparse: the indexer picks the top-k tokens attention reads"
		if scen.Build.DenseDSA {
			mode = "dense: attention over the whole context, no indexer cache or ops"
		}
		why := "--dense-dsa"
		if !scen.DenseDSAChosen {
			why = "as the engines of " + scen.Topo.Name + " run it (--dense-dsa chooses)"
		}
		fmt.Fprintf(tw, "dsa runs\t%s (%s)\n", mode, why)
	}
	fmt.Fprintf(tw, "params\t%s total, %s active per token, %s MTP\n", units.Count(s.ParamsTotal), units.Count(s.ParamsActive), units.Count(s.ParamsMTP))
	base := ""
	if b := s.Quant["base_from"]; b != "" {
		base = " (" + b + ")"
	}
	fmt.Fprintf(tw, "quantization\t%s, KV cache %s%s\n", s.Quant["method"], s.Quant["kv_cache"], base)
	fmt.Fprintln(tw, "\ncomponent\tdtype\tplacement\tbytes/GPU")
	for _, c := range s.WeightComponents {
		if c.Bytes == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Component, c.Dtype, c.Placement, units.Bytes(c.Bytes))
	}
	fmt.Fprintf(tw, "weights\t\t\t%s\n", units.Bytes(s.WeightBytesPerGPU))
	memFrom := scen.Topo.DeviceOf(0).Name + "'s"
	if memGiven {
		memFrom = "--gpu-mem-gb"
	}
	if s.KVPool != "" {
		fmt.Fprintf(tw, "\nGPU memory\t%s (%s), KV pool at %s\n", units.Bytes(s.GPUMemBytes), memFrom, s.KVPool)
	} else {
		fmt.Fprintf(tw, "\nGPU memory\t%s (%s) x %.2f utilization\n", units.Bytes(s.GPUMemBytes), memFrom, s.GPUMemUtilFrac)
	}
	// Whose rule sized the capacity below, and what comes off the memory
	// around its fraction.
	fmt.Fprintf(tw, "KV pool rule\t%s's %s: %s\n", engine, pool.Rule, pool.PoolLess())
	if pool.Rule == engprof.KVPoolMemFractionStatic {
		// SGLang's pool takes no activation estimate: they are in what
		// the fraction leaves.
		fmt.Fprintf(tw, "activations\tin the reserve %s leaves, not taken off the pool\n", pool.Rule)
	} else if s.ProfileStep != "" {
		fmt.Fprintf(tw, "activations (estimate)\t%s, vLLM's %s\n", units.Bytes(s.ActivationBytes), s.ProfileStep)
	} else {
		fmt.Fprintf(tw, "activations (estimate)\t%s\n", units.Bytes(s.ActivationBytes))
	}
	if s.CUDAGraphBytes > 0 {
		fmt.Fprintf(tw, "CUDA graphs\t%s, the engine's estimate (given by --cuda-graph-mem-gib)\n", units.Bytes(s.CUDAGraphBytes))
	}
	if s.CUDAGraphCaveat != "" {
		fmt.Fprintf(tw, "caveat\t%s\n", s.CUDAGraphCaveat)
	}
	if s.WeightsShortBytes > 0 {
		fmt.Fprintf(tw, "KV cache\tnone: weights + activations exceed the budget by %s\n", units.Bytes(s.WeightsShortBytes))
	} else {
		fmt.Fprintf(tw, "KV cache per GPU\t%s\n", units.Bytes(s.KVCacheBytes))
	}
	if d := scen.KVDefault; d != nil {
		fmt.Fprintf(tw, "KV dtype\t%s, %s (--kv-dtype names another)\n", d.Dtype, d)
	}
	fmt.Fprintln(tw, "\nKV dtype\tbytes/token/GPU\tcapacity tokens")
	for _, kd := range s.KVDtypeRows() {
		mark := ""
		if string(kd) == s.KVDtype {
			mark = " (selected)"
		}
		fmt.Fprintf(tw, "%s%s\t%.0f\t%d\n", kd, mark, s.KVBytesPerToken[string(kd)], s.KVCapacityByDtype[string(kd)])
	}
	return tw.Flush()
}

func listModels(out string, w io.Writer) error {
	type row struct {
		Name          string  `json:"name"`
		ModelType     string  `json:"model_type"`
		Layers        int     `json:"num_hidden_layers"`
		Experts       int     `json:"n_routed_experts"`
		ParamsTotal   float64 `json:"params_total"`
		ParamsActive  float64 `json:"params_active"`
		RoutedExperts string  `json:"routed_experts_dtype"`
		KVCache       string  `json:"kv_cache_dtype"`
		Source        string  `json:"source"`
		Default       bool    `json:"default,omitempty"`
	}
	var rows []row
	for _, n := range model.PresetNames() {
		a, err := model.Preset(n)
		if err != nil {
			return err
		}
		p := a.Params()
		rows = append(rows, row{n, a.ModelType, a.Layers, a.RoutedExperts, p.Total, p.Active,
			string(a.Quant.RoutedExperts), string(a.Quant.KV), a.Source, n == model.DefaultPreset})
	}
	// The table's cells; CSV's keep the name bare and the parameter
	// counts whole.
	table := func(csv bool) ([]string, [][]string) {
		header := []string{"name", "model_type", "layers", "experts", "params", "active", "experts dtype", "KV"}
		cells := make([][]string, 0, len(rows))
		for _, r := range rows {
			name, total, active := r.Name, units.Count(r.ParamsTotal), units.Count(r.ParamsActive)
			if r.Default && !csv {
				name += " (default)"
			}
			if csv {
				total, active = strconv.FormatFloat(r.ParamsTotal, 'g', -1, 64), strconv.FormatFloat(r.ParamsActive, 'g', -1, 64)
			}
			cells = append(cells, []string{name, r.ModelType, strconv.Itoa(r.Layers), strconv.Itoa(r.Experts),
				total, active, r.RoutedExperts, r.KVCache})
		}
		if csv {
			header[4], header[5] = "params_total", "params_active"
		}
		return header, cells
	}
	return render(w, out, view{
		JSON: rows,
		CSV: func(w io.Writer) error {
			header, cells := table(true)
			return writeCSV(w, header, cells)
		},
		Text: func(w io.Writer, md bool) error {
			header, cells := table(false)
			return writeRows(w, header, cells, md)
		},
	})
}
