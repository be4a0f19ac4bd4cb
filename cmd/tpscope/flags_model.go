package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/model"
)

// scenarioFlags are the model / plan / workload flags shared by the verbs
// that build a schedule (model show, schedule, and any verb that wants the
// same spelling: predict, advise, run).
type scenarioFlags struct {
	model    string
	tp, dp   int
	dcp      int
	ep       bool
	phase    string
	batch    int
	context  int
	mtp      int
	kvDtype  string
	denseDSA bool
	dispatch string

	// arch, when set, is used instead of resolving --model (model load).
	arch *model.Arch
}

// addModelScenarioFlags registers --model, --tp, --ep, --dp, --dcp,
// --phase, --batch, --context, --mtp (alias --spec-tokens), --kv-dtype and
// --dense-dsa on fs.
func addModelScenarioFlags(fs *pflag.FlagSet) *scenarioFlags {
	f := &scenarioFlags{}
	addModelFlag(fs, &f.model)
	fs.IntVar(&f.tp, "tp", 8, "tensor-parallel degree (must divide the attention heads)")
	fs.BoolVar(&f.ep, "ep", false, "expert parallelism: whole experts per rank (vLLM --enable-expert-parallel)")
	fs.IntVar(&f.dp, "dp", 1, "data-parallel attention degree; GPUs = tp x dp (needs --ep)")
	fs.IntVar(&f.dcp, "dcp", 1, "decode context parallelism: KV cache split by tokens over this many ranks (divides --tp)")
	fs.StringVar(&f.phase, "phase", "decode", "step to model: decode or prefill")
	fs.IntVar(&f.batch, "batch", 1, "concurrent sequences (decode) or prompts (prefill), over all DP groups")
	fs.IntVar(&f.context, "context", 4096, "tokens in each sequence's KV cache (decode) or prompt length (prefill)")
	fs.IntVar(&f.mtp, "mtp", 0, "MTP speculative tokens per sequence and step")
	fs.IntVar(&f.mtp, "spec-tokens", 0, "alias of --mtp")
	fs.StringVar(&f.kvDtype, "kv-dtype", "", "KV-cache dtype: bf16 or fp8 (default: the checkpoint's kv_cache_quant_algo / kv_cache_scheme)")
	addDenseDSAFlag(fs, &f.denseDSA)
	fs.StringVar(&f.dispatch, "moe-dispatch", model.DispatchAllToAll, "MoE dispatch under --dp > 1: alltoall or allgather_reducescatter (vLLM's all2all backend)")
	return f
}

// addModelFlag registers --model (a preset, config.json or model
// directory) on fs; plan shares it with the scenario flags.
func addModelFlag(fs *pflag.FlagSet, p *string) {
	fs.StringVar(p, "model", model.DefaultPreset, "model preset ("+strings.Join(model.PresetNames(), ", ")+") or a config.json / model directory")
}

// addDenseDSAFlag registers --dense-dsa on fs.
func addDenseDSAFlag(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "dense-dsa", false, "run a DSA model (GLM-5) as dense MLA without the indexer, as SM120 engines do")
}

// resolve turns the flags into an architecture, a plan and a workload.
// An unknown model name or an invalid plan/workload is a usage error; a
// config file that fails to parse is an ordinary error naming the file.
func (f *scenarioFlags) resolve() (*model.Arch, model.Plan, model.Workload, error) {
	a := f.arch
	if a == nil {
		var err error
		if a, err = resolveModel(f.model); err != nil {
			return nil, model.Plan{}, model.Workload{}, err
		}
	}
	w := model.Workload{Phase: model.Phase(f.phase), Batch: f.batch, Context: f.context, SpecTokens: f.mtp}
	if f.kvDtype != "" {
		d, err := model.ParseDtype(f.kvDtype)
		if err != nil {
			return nil, model.Plan{}, model.Workload{}, usageErrorf("--kv-dtype: %v", err)
		}
		w.KVDtype = d
	}
	p := model.Plan{TP: f.tp, EP: f.ep, DP: f.dp, DCP: f.dcp}
	if err := p.Validate(a); err != nil {
		return nil, model.Plan{}, model.Workload{}, usageErrorf("%s: %v", a.Name, err)
	}
	if err := w.Validate(); err != nil {
		return nil, model.Plan{}, model.Workload{}, usageErrorf("%v", err)
	}
	if f.dispatch != model.DispatchAllToAll && f.dispatch != model.DispatchAllGather {
		return nil, model.Plan{}, model.Workload{}, usageErrorf("--moe-dispatch %q: want %s or %s", f.dispatch, model.DispatchAllToAll, model.DispatchAllGather)
	}
	return a, p, w, nil
}

// buildOptions are the model.BuildOptions the flags ask for.
func (f *scenarioFlags) buildOptions() model.BuildOptions {
	return model.BuildOptions{DenseDSA: f.denseDSA, MoEDispatch: f.dispatch}
}

// resolveModel finds a preset or loads a config; a name that is neither
// is a usage error.
func resolveModel(name string) (*model.Arch, error) {
	a, err := model.Resolve(name)
	if err == nil {
		return a, nil
	}
	var ce *model.ConfigError
	if errors.As(err, &ce) {
		return nil, err
	}
	return nil, usageErrorf("--model: %v", err)
}

// checkOutput validates an --output value against the formats a verb has.
func checkOutput(got string, allowed ...string) error {
	for _, a := range allowed {
		if got == a {
			return nil
		}
	}
	return usageErrorf("--output %q: want one of %s", got, strings.Join(allowed, ", "))
}

// fmtBytes renders bytes in decimal units with the unit in the text.
func fmtBytes(b float64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}

// fmtCount renders a count with an SI suffix (params, FLOPs).
func fmtCount(n float64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.3fT", n/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
