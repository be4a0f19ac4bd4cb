package main

import (
	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/pipeline"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// checkMeasuredBox is the one rule for a measurement set beside a
// prediction (run --compare, verdict): the prediction prices --topo's box,
// so that box must be the one that runs. A CPU backend never runs on a GPU
// box, the default one included: it needs --topo, the JSON 'tpscope
// calibrate --backend cpu' writes, or the comparison prices a GPU against
// this CPU. everyBackend asks for --topo whatever the backend (run
// --compare prints the prediction's own numbers). what names the request
// ("--compare", "verdict"); box is the box the flags resolved (nil: not
// checked). It is a usage error, before any work.
func checkMeasuredBox(what, backend string, topoGiven, everyBackend bool, box *topology.Topology) error {
	switch {
	case topoGiven && backend == "cpu" && box != nil && !box.IsCPUBox():
		gpu := "GPUs"
		if d := box.DeviceOf(0); d != nil {
			gpu = d.Name + " GPUs"
		}
		return flagError("--topo", box.Name, "the cpu backend's ranks are CPU cores, and this box's devices are %s: %s needs a CPU box, the JSON of 'tpscope calibrate --backend cpu'", gpu, what)
	case topoGiven:
		return nil
	case everyBackend:
		return usageErrorf("%s needs --topo (a preset, or the JSON of 'tpscope calibrate --backend cpu' for the cpu backend)", what)
	case backend == "cpu":
		return usageErrorf("%s --backend cpu needs --topo: the JSON of 'tpscope calibrate --backend cpu' (the default box is a GPU box, which these ranks are not)", what)
	}
	return nil
}

// ncclFlagNames are the flags that set NCCL's variables, on every verb
// that has them: the option fields with an NCCL variable.
var ncclFlagNames = func() []string {
	var names []string
	for _, of := range sim.OptionFields() {
		if of.Env != "" {
			names = append(names, of.Name)
		}
	}
	return names
}()

// checkRealized refuses, before a run, a flag of fs the user set that asks
// the backend for what it does not realize (caps, as the backend says):
// NCCL's settings on a backend whose collectives are its own, and CUDA
// graphs on one that runs every step eagerly (graphFlag: the flag that
// asked for them, "" when none did). The run would go without them and
// say nothing, while its trace or nccl-tests log recorded them as run.
func checkRealized(fs *pflag.FlagSet, backend string, caps pipeline.Capabilities, graphFlag string) error {
	if !caps.CollectiveSettings {
		for _, name := range ncclFlagNames {
			if fl := fs.Lookup(name); fl != nil && fs.Changed(name) && fl.Value.String() != "false" {
				return flagError("--"+name, fl.Value.String(), "the %s backend's collectives are its own, which NCCL's settings do not reach: the run would go without it while recording it as run (leave it out)", backend)
			}
		}
	}
	if !caps.Graphs && graphFlag != "" {
		fix := "leave it out"
		if graphFlag == "cuda-graphs" {
			fix += ", or pass --cuda-graphs=false"
		}
		return flagError("--"+graphFlag, fs.Lookup(graphFlag).Value.String(), "the %s backend runs every step eagerly: the run would go without CUDA graphs (%s)", backend, fix)
	}
	return nil
}

// graphsFlag is the flag of f that asks a run for CUDA graphs: --graph-sizes
// when set, else --cuda-graphs when set to true; "" when neither asks (the
// default of --cuda-graphs is no request of the user's).
func (f *scenarioFlags) graphsFlag() string {
	switch {
	case f.changed("graph-sizes"):
		return "graph-sizes"
	case f.changed("cuda-graphs") && f.opts.CUDAGraphs:
		return "cuda-graphs"
	}
	return ""
}
