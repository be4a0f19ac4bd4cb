package main

import "github.com/tpscope/tpscope/topology"

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
