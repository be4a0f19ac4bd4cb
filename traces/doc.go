// Package traces exports and reads OpenTelemetry spans of steps. It knows
// the span schema (package traces/schema) and model's op kinds, nothing of
// predictions: comparing and calibrating live in package compare.
//
// Export (export.go): Setup builds a tracer provider for one destination
// string — otlp://host:4317 (OTLP/gRPC), otlphttp://host:4318 (OTLP/HTTP),
// file:PATH (OTLP JSON Lines), or "" for the standard OTEL_EXPORTER_OTLP_*
// variables — with batched export, and a fallback file that takes every
// batch the collector refuses, so an unreachable collector loses no span;
// Exporter.Stats says how many went where. Callers Shutdown on every exit.
//
// Span schema (traces/schema, shared with the executor, which writes it):
// one trace per step; root span "step" with the scenario (the whole value
// as JSON in AttrScenario, and short forms for people: AttrModel,
// AttrTopology, AttrPlan, AttrWorkload, AttrOptions), child "rank/N" per
// rank, grandchild per op named by its op ID with tpscope.* attributes
// (AttrOpID, AttrOpKind, AttrLayer, AttrRank, AttrFLOPs, AttrBytes,
// AttrCommBytes, AttrDtype, AttrPredictedUs, AttrDeviceUs, ...). Readers
// keep a step root's scenario attributes, as recorded, in Result.Scenarios.
//
// Reading (open.go): Open/ReadAll turn any source — OTLP JSON files, Jaeger's
// query API v3 or v1 (jaeger://host:16686?service=...), Jaeger JSON from its
// UI, Chrome/Kineto traces from the PyTorch profiler (.json, .json.gz) — into
// one normalized, time-ordered []Span plus a report of what was left out and
// why (Result.Skipped). A source that ends early or breaks (a cut file, a
// gzip stream without its end, bytes that are not JSON) is a *PartialError
// naming the byte, the line and the place in the document (partial.go);
// WithAllowPartial keeps its complete steps instead (Result.Partial). Files are streamed through a small JSON lexer
// (lexer.go): memory holds the span list, not the document. Kineto traces
// (kineto.go) are split into steps by the serving engine's step ranges,
// ProfilerStep#N, the engine's iteration frames (execute_model,
// forward_batch_generation), CUDA-graph replays or the layer pattern of
// eager kernels (kineto_steps.go, StepRule*), a kernel belonging to the
// step its launch came from; within a step the decoder layers are
// recovered from the collectives and norms around attention (or, in a
// model run op by op in PyTorch, around its unfused softmax attention),
// and every kernel gets the op ID of the (layer, role) it implements as
// model.Build names ops — by its name where a KernelTable names it
// (kineto_table.go), else by its class and position in the layer
// (kineto_layers.go, kineto_glue.go) — fused kernels listing all their
// ops (AttrKinetoOps); Result.Kineto reports the rule, the steps and the
// share of kernel time placed by name, by position and not at all, and
// unplaced kernels are reported by name. ClassifyKernel maps kernel names to op kinds (kineto_kernels.go);
// Span.Seq/KindSeq give the kernels' order per step and rank, so an
// aligner can also match the n-th kernel of a kind with the n-th
// predicted op of that kind (WithKernelPlacement(false)).
//
// Units: Span.Start is Unix nanoseconds, Span.Duration a time.Duration
// (nanoseconds); attributes ending in _us are microseconds. Jaeger API v1
// has microsecond resolution.
package traces
