// Package schema is the span schema of tpscope's traces: span names,
// attribute keys and the static attributes of an op's span. The executor
// writes it (exec imports this package and nothing else of traces), the
// readers in package traces read it. Keys carry their unit in the name
// (_us microseconds, bytes); times on spans are Unix nanoseconds.
package schema

import (
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/model"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The span schema (DESIGN.md "Op IDs and the span schema").
//
// One trace per measured step:
//
//	step                      root span; attributes AttrModel, AttrTopology, AttrPlan,
//	│                         AttrWorkload, AttrOptions (+ AttrStep, AttrRanks, AttrBackend)
//	├── rank/0                one child per rank; attribute AttrRank
//	│   ├── L00.attn.q_a_proj one grandchild per op, named by its op ID; attributes below
//	│   └── ...
//	└── rank/N
//
// Op span times are device times (from GPU events where the backend has them,
// see AttrTiming) mapped onto the wall clock; the host-side launch is recorded
// separately in AttrHostLaunchUs and AttrHostLaunchUnixNano.
//
// Every key is an attribute.Key so emitters write schema.AttrOpID.String(id)
// and readers compare with string(schema.AttrOpID).

// Span names.
const (
	// SpanStep names the root span of a step's trace.
	SpanStep = "step"
	// SpanRankPrefix prefixes the per-rank child span: "rank/0", "rank/1", ...
	SpanRankPrefix = "rank/"
)

// RankSpanName is the name of rank r's span: "rank/r".
func RankSpanName(rank int) string { return SpanRankPrefix + strconv.Itoa(rank) }

// ParseRankSpanName returns r for a span named "rank/r" (r >= 0) and whether
// the name has that form.
func ParseRankSpanName(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, SpanRankPrefix)
	if !ok || s == "" || len(s) > 6 {
		return 0, false
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 || strconv.Itoa(r) != s {
		return 0, false
	}
	return r, true
}

// AttrPrefix prefixes every tpscope span attribute.
const AttrPrefix = "tpscope."

// Op span attributes.
const (
	AttrOpID        attribute.Key = "tpscope.op.id"        // string: op ID, L{layer:02}.{block}.{name}; equals the span name
	AttrOpKind      attribute.Key = "tpscope.op.kind"      // string: model.OpKind (gemm, moe_gemm, attention, norm, elementwise, router, embedding, collective)
	AttrLayer       attribute.Key = "tpscope.layer"        // int64: decoder layer index; -1 for embed/head ops
	AttrRank        attribute.Key = "tpscope.rank"         // int64: rank (also on the rank/N span)
	AttrFLOPs       attribute.Key = "tpscope.flops"        // float64: floating-point operations (multiply-add = 2)
	AttrBytes       attribute.Key = "tpscope.bytes"        // float64: device-memory bytes read + written
	AttrCommBytes   attribute.Key = "tpscope.comm.bytes"   // int64: collective message bytes per rank (nccl-tests convention)
	AttrDtype       attribute.Key = "tpscope.dtype"        // string: weight dtype (activation dtype when the op has no weights)
	AttrCollective  attribute.Key = "tpscope.collective"   // string: model.Collective (allreduce, allgather, ...) for collective ops
	AttrPredictedUs attribute.Key = "tpscope.predicted_us" // float64: sim's predicted duration in microseconds, when a prediction is at hand

	// AttrDeviceUs is the measured device time of the op in microseconds
	// (GPU event pair, or the CPU backend's clock). The span's duration is
	// the same interval on the wall clock; this attribute keeps the exact
	// value when the mapping rounds.
	AttrDeviceUs attribute.Key = "tpscope.device_us" // float64
	// AttrHostLaunchUs is the host-side time spent issuing the op (the
	// launch API call(s)), in microseconds.
	AttrHostLaunchUs attribute.Key = "tpscope.host.launch_us" // float64
	// AttrHostLaunchUnixNano is when the host issued the op, Unix nanoseconds.
	AttrHostLaunchUnixNano attribute.Key = "tpscope.host.launch_unix_nano" // int64
	// AttrTiming says where the span times come from: TimingDeviceEvents or TimingHostClock.
	AttrTiming attribute.Key = "tpscope.timing" // string

	// AttrSubstituted marks an op the backend ran with a stand-in (e.g. a
	// dense GEMM of the same shape for an unsupported quantized kernel);
	// AttrSubstitution says what was run instead.
	AttrSubstituted  attribute.Key = "tpscope.substituted"  // bool
	AttrSubstitution attribute.Key = "tpscope.substitution" // string
	// AttrSkipped marks an op the backend did not run (the span has zero
	// length); AttrSkipReason says why. Readers keep such spans but
	// comparisons must not use their durations.
	AttrSkipped    attribute.Key = "tpscope.skipped"     // bool
	AttrSkipReason attribute.Key = "tpscope.skip.reason" // string
	// AttrScale is the factor the measured time was multiplied by to stand
	// for the full-size op (a scaled-down problem run on a small device);
	// absent or 1 means unscaled.
	AttrScale attribute.Key = "tpscope.scale" // float64

	// AttrMoERows and AttrMoEExperts are the token-expert rows and the
	// distinct experts a routed-expert op ran (model.MoEShape.Executed for
	// tpscope's backends), so a reader can check them against the schedule.
	AttrMoERows    attribute.Key = "tpscope.moe.rows"    // int64
	AttrMoEExperts attribute.Key = "tpscope.moe.experts" // int64

	// AttrKernel is the raw kernel name (Kineto traces, or the CUDA backend's kernel).
	AttrKernel attribute.Key = "tpscope.kernel" // string
)

// OptionCUDAGraphs is the option name of CUDA-graph replay in AttrOptions;
// the runner drops it when graphs were requested and the backend ran
// eagerly (AttrGraphs false).
const OptionCUDAGraphs = "cuda-graphs"

// Values of AttrTiming.
const (
	TimingDeviceEvents = "device_events" // CUDA events around the op on its stream
	TimingHostClock    = "host_clock"    // host monotonic clock (CPU backend)
)

// Step root span attributes.
const (
	AttrModel    attribute.Key = "tpscope.model"    // string: architecture name (preset or config path)
	AttrTopology attribute.Key = "tpscope.topology" // string: topology preset name or file
	AttrPlan     attribute.Key = "tpscope.plan"     // string: parallel plan, e.g. "tp=8" (model.Plan's String form)
	AttrWorkload attribute.Key = "tpscope.workload" // string: workload, e.g. "decode batch=32 ctx=4096"
	AttrOptions  attribute.Key = "tpscope.options"  // []string: names of the optimizations applied, sorted (readers also accept one comma-separated string); Jaeger API v1 turns the array into JSON text, which the v1 reader turns back into an array
	AttrStep     attribute.Key = "tpscope.step"     // int64: step index within the run (0-based)
	AttrRanks    attribute.Key = "tpscope.ranks"    // int64: number of ranks
	AttrBackend  attribute.Key = "tpscope.backend"  // string: exec backend (cuda, cpu)

	// AttrScenario is the whole scenario as one machine-readable value:
	// the JSON of sim.Scenario (model reference and build options, plan,
	// workload, run-time options incl. NCCL's, topology reference, the
	// batch the schedule ran). The short attributes above are for people;
	// a comparison re-predicts from this one.
	AttrScenario attribute.Key = "tpscope.scenario" // string (JSON)

	// AttrGraphs says whether the measured steps were replayed CUDA graphs
	// (true) or eager launches (false); the runner writes it only when
	// graphs were requested (exec.WithGraphs).
	AttrGraphs attribute.Key = "tpscope.graphs" // bool
	// AttrScheduleScale (step and op spans) is the factor by which the run
	// schedule was shrunk from the real model's (exec.WithScheduleScale).
	// Unlike AttrScale, the measured time is NOT multiplied by it; a
	// prediction of the real model does not apply to such a trace.
	AttrScheduleScale attribute.Key = "tpscope.schedule.scale" // float64
)

// ScopeName is the instrumentation scope of tpscope's spans.
const ScopeName = "github.com/tpscope/tpscope"

// Resource attributes. service.name and host.name are the OpenTelemetry
// semantic conventions of the SDK's semconv version (v1.43.0); the rest are ours.
const (
	ServiceName = "tpscope" // value of service.name

	ResServiceName                  = semconv.ServiceNameKey // "service.name"
	ResHostName                     = semconv.HostNameKey    // "host.name"
	ResGPUModel       attribute.Key = "tpscope.gpu.model"    // string: e.g. "NVIDIA RTX PRO 6000 Blackwell Server Edition"
	ResGPUCount       attribute.Key = "tpscope.gpu.count"    // int64
	ResGPUDriver      attribute.Key = "tpscope.gpu.driver"   // string: driver version, e.g. "580.65.06"
	ResCUDAVersion    attribute.Key = "tpscope.cuda.version" // string: CUDA driver API version, e.g. "13.0"
	ResNCCLVersion    attribute.Key = "tpscope.nccl.version" // string: e.g. "2.28.3"
	ResTpscopeVersion attribute.Key = "tpscope.version"      // string: tpscope build version
)

// OpAttributes returns the static attributes of op's span (everything but
// the measured and predicted times), in a fixed order. Emitters append
// AttrDeviceUs, AttrHostLaunchUs, AttrTiming and, when known, AttrPredictedUs.
func OpAttributes(op *model.Op) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 10)
	kv = append(kv,
		AttrOpID.String(op.ID),
		AttrOpKind.String(string(op.Kind)),
		AttrLayer.Int(op.Layer),
		AttrRank.Int(op.Rank),
		AttrFLOPs.Float64(op.FLOPs),
		AttrBytes.Float64(op.Bytes()),
	)
	dt := op.WeightDtype
	if dt == "" {
		dt = op.ActDtype
	}
	if dt != "" {
		kv = append(kv, AttrDtype.String(string(dt)))
	}
	if op.IsCollective() {
		kv = append(kv, AttrCommBytes.Int64(op.CommBytes), AttrCollective.String(string(op.Collective)))
	}
	return kv
}
