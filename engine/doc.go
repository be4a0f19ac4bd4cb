// Package engine holds serving-engine profiles as data: for each engine
// and version (vLLM, SGLang, TensorRT-LLM, and tpscope's own executor),
// per GPU architecture family, weight format, KV-cache dtype and phase,
// which kernels run a step of an MLA + MoE model — the MLA attention
// backends (dense, and the sparse ones a DSA model run sparse takes), the
// default one per architecture and KV dtype with its
// split-KV grid and the kernels it launches, the MoE kernel per weight
// format and its launches, the dense-GEMM kernel per format, the
// compiler's fusions, the CUDA-graph mode and capture sizes, the custom
// all-reduce rules and, where GPUs share an NVSwitch, the
// symmetric-memory all-reduce that takes over above their cap, how the
// tokens reach the routed experts under DP attention + EP by default and
// by which of the engine's settings (all-gather + reduce-scatter or
// all-to-all), whether DSA sparse attention runs dense, the KV-cache
// dtype it runs when none is named (its own default, or which
// checkpoints' KV schemes its 'auto' reads), and the options the engine
// has no implementation of. Every fact names its
// source (the engine's code, documentation, issues or a published
// measurement), in the profile's sources table.
//
// The profiles are YAML files embedded in the binary (profiles/*.yaml),
// read with a strict decoder: an unknown field, a kernel a selection
// rule names but the profile does not define, a fact without a source,
// or a value outside its type is an error naming the file and the field.
//
// The package is on the ground floor: it imports nothing of tpscope's,
// and carries its own small typed vocabulary (Arch, WeightFormat,
// KVDtype, Phase), each with one text codec. Package sim reads a profile
// to choose the kernel that prices each op; package perfdb reads it to
// pick the measured tables of the engine's own kernels.
//
// Units: sizes in bytes, counts in kernels or thread blocks; no times
// (a profile says which kernels run, the cost models say how long).
package engine
