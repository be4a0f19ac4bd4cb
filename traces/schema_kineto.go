package traces

import "go.opentelemetry.io/otel/attribute"

// Kineto-specific span attributes (kernels read from PyTorch-profiler
// traces). The typed fields Step, Layer and OpID carry the step and the
// placement; these attributes say how the kernel was read.
const (
	AttrKinetoGraph    attribute.Key = "tpscope.kineto.graph"     // bool: launched from a CUDA graph (cudaGraphLaunch, or CUPTI's graph id)
	AttrKinetoStream   attribute.Key = "tpscope.kineto.stream"    // int64: CUDA stream
	AttrKinetoKindRule attribute.Key = "tpscope.kineto.kind_rule" // string: the ClassifyKernel rule that matched ("default" = none)
	// AttrKinetoOps lists every op ID a fused kernel implements, the span's
	// own op ID first (e.g. an all-reduce that also applies the next
	// RMSNorm: ["L07.attn.allreduce","L07.moe.post_attn_norm"]). Absent on
	// kernels that implement one op.
	AttrKinetoOps attribute.Key = "tpscope.kineto.ops" // []string
)

// Rules that split a Kineto trace into steps (KinetoFile.StepRule), in
// order of trust: the first that applies to a file decides.
const (
	// StepRuleEngineRange: the serving engine's own per-iteration
	// annotation — vLLM's execute_context_{n}({tok})_generation_{m}({tok})
	// (older execute_new_{n}_cached_{m}) around Worker.execute_model,
	// SGLang's step[MODE bs=B ...] around ModelRunner.forward, TensorRT-LLM's
	// "[Executor] _forward_step {i}: {n} ctx reqs, {m} gen reqs" when it is
	// recorded as a profiler range. Kernels belong to the range their
	// launch (the runtime call with the kernel's correlation ID, a
	// cudaGraphLaunch for graph replays) falls in.
	StepRuleEngineRange = "engine-range"
	// StepRuleProfilerStep: ProfilerStep#N ranges (torch.profiler with a
	// schedule); the step is N.
	StepRuleProfilerStep = "profiler-step"
	// StepRuleEngineFrame: no step range; the engine's Python frame that
	// runs one iteration (vLLM's gpu_model_runner.py execute_model,
	// SGLang's tp_worker.py forward_batch_generation; python_function
	// events, recorded with with_stack=True) is the step's CPU range, and
	// kernels belong to the frame their launch falls in. Piecewise CUDA
	// graphs launch tens of graphs per iteration: they are one step.
	StepRuleEngineFrame = "engine-frame"
	// StepRuleGraphLaunch: no step ranges; every kernel replayed by one
	// cudaGraphLaunch (all share its correlation ID) is one step, and
	// piecewise graphs — pieces joined by attention kernels launched
	// eagerly between them (vLLM's piecewise capture splits the forward at
	// attention) — make one step together.
	StepRuleGraphLaunch = "graph-launch"
	// StepRuleLayerPattern: eager kernels without ranges or graphs; a step
	// is a run of decoder layers (attention kernels at the layer period)
	// between the vocabulary-embedding lookups that start every forward,
	// cut at the longest GPU idle gap before the lookup (the host's turn
	// between iterations). Steps whose layer count differs from the most
	// common one (the profile cut a forward) are left out and reported.
	StepRuleLayerPattern = "layer-pattern"
	// StepRuleNone: nothing marks steps; the file is one step (0).
	StepRuleNone = "none"
)

// Engines named in KinetoFile.Engine, from the step ranges' form.
const (
	EngineVLLM   = "vllm"
	EngineSGLang = "sglang"
	EngineTRTLLM = "tensorrt-llm"
)

// Phases of a step (KinetoStep.Phase) as the engine's range names them.
const (
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
	PhaseMixed   = "mixed" // prefill (or a chunk of one) and decode in one iteration
	PhaseIdle    = "idle"
)
