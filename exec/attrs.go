package exec

import (
	"os"
	"slices"
	"strings"

	"github.com/tpscope/tpscope/traces/schema"
	"go.opentelemetry.io/otel/attribute"
)

// Attributes the runner writes besides the span schema's (traces/schema.go).
const (
	// AttrGraphs on the step span: whether the measured steps were
	// replayed CUDA graphs (true) or eager launches (false). Written only
	// when graphs were requested (WithGraphs). Defined by the schema
	// (schema.AttrGraphs), whose readers act on it.
	AttrGraphs = schema.AttrGraphs // bool
	// AttrScheduleScale on step and op spans: the factor by which the run
	// schedule was shrunk from the real model's (WithScheduleScale). Unlike
	// schema.AttrScale, the measured time is NOT multiplied by it; the
	// prediction is made for the same shrunk schedule. Defined by the
	// schema (schema.AttrScheduleScale), whose comparison refuses it.
	AttrScheduleScale = schema.AttrScheduleScale // float64
	// AttrReplayUs on a rank span: host time of launching the replayed
	// graph of the step, microseconds (graph mode only).
	AttrReplayUs attribute.Key = "tpscope.graph.replay_us" // float64
	// AttrStepUs on step and rank spans: the measured step time in
	// microseconds (rank span: BeginStep to the end of EndStep on that rank).
	AttrStepUs attribute.Key = "tpscope.step_us" // float64
	// AttrWarmup on the step span: number of warm-up steps before the
	// measured ones.
	AttrWarmup attribute.Key = "tpscope.warmup" // int64
	// AttrNCCLEnv on a rank span: the NCCL_* variables of the rank's
	// process when its session opened (NCCLEnviron), so a sequence of
	// runs can be checked for settings that leaked from one run into the
	// next (and, on the CUDA backend, for what NCCL was told).
	AttrNCCLEnv attribute.Key = "tpscope.nccl_env" // string
)

// NCCLEnviron is the process's NCCL_* variables as AttrNCCLEnv records
// them: sorted "KEY=VALUE" pairs joined by spaces ("" when none).
func NCCLEnviron() string {
	var kv []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "NCCL_") {
			kv = append(kv, e)
		}
	}
	slices.Sort(kv)
	return strings.Join(kv, " ")
}
