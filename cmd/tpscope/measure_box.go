package main

// checkMeasuredBox is the one rule for a measurement set beside a
// prediction (run --compare, verdict): the prediction prices --topo's box,
// so that box must be the one that runs. A CPU backend never runs on the
// default box (a GPU box): it needs --topo, the JSON 'tpscope calibrate
// --backend cpu' writes, or the comparison prices a GPU against this CPU.
// everyBackend asks for --topo whatever the backend (run --compare prints
// the prediction's own numbers). what names the request ("--compare",
// "verdict"). It is a usage error, before any work.
func checkMeasuredBox(what, backend string, topoGiven, everyBackend bool) error {
	switch {
	case topoGiven:
		return nil
	case everyBackend:
		return usageErrorf("%s needs --topo (a preset, or the JSON of 'tpscope calibrate --backend cpu' for the cpu backend)", what)
	case backend == "cpu":
		return usageErrorf("%s --backend cpu needs --topo: the JSON of 'tpscope calibrate --backend cpu' (the default box is a GPU box, which these ranks are not)", what)
	}
	return nil
}
