// Package model turns a Hugging Face config (or a built-in preset) into the
// Schedule of one decode or prefill step: every op on every rank with its
// shapes, dtypes, FLOPs, bytes and collectives, laid out as vLLM runs
// DeepSeek-V3-family and GLM-5 models (MLA attention + MoE). It also owns
// dtypes with their scale overhead, parallel plans, workloads, the memory
// footprint and KV capacity.
//
// Units: bytes, FLOPs (a multiply-add counts 2), parameter counts. model knows
// nothing about time or hardware speed.
//
// Pieces:
//
//   - Architectures: Load (a directory with config.json and optional
//     hf_quant_config.json, or one file), Ref.Resolve (a recorded config's
//     bytes), Preset / Resolve / PresetNames (hand-written presets in
//     presets/*.json, embedded); drafters (drafter.go): ResolveDrafter,
//     DrafterPresetNames, SpecMethod.DefaultDrafter. Errors are
//     *ConfigError naming file, field and expectation.
//   - Quantization as data: Quant gives each Component (attention, indexer,
//     dense MLP, router, shared and routed experts, lm_head, embedding, MTP)
//     its dtype, decided by the checkpoint's ignore / exclude lists, and the
//     KV-cache dtype from kv_cache_quant_algo / kv_cache_scheme.
//   - Plans and workloads: Plan.Validate, Workload.Validate, and Validate,
//     the one check BuildWith runs on plan, workload and build options
//     together (*PlanError naming the field).
//   - The op vocabulary: every op's Role (typed constants, roles.go), the
//     block tables the builder follows (table.go: the op order of the
//     embedding, attention with the DSA indexer, MoE, dense MLP, head and
//     MTP input), and the Schedule's Modules with their op ranges. Other
//     packages tell ops apart by role and module, never by name.
//   - The Schedule: Build / BuildWith (see BuildWith for the op list, the
//     token counts, EP, DP-attention + EP and DCP semantics), with its
//     Deployment (NewDeployment: sequences and tokens per DP group, the
//     tokens padded to a CUDA-graph capture size, graphed or not), decided
//     once.
//   - MoE routing: Routing (uniform, or the balanced and power-law routings
//     aiconfigurator's MoE tables were measured under) decides each
//     routed-expert op's MoEShape: expected rows and distinct experts on
//     the rank, and the integer shape executors run (MoEShape.Executed).
//   - Memory: Arch.Params, Arch.WeightMemory and KVCapacity (weights, activation
//     workspace and KV cache per GPU), and Summarize for the CLI's `model
//     show`.
//
// Complexity: Build is O(layers x ranks) ops; the op list of one rank is
// built once and copied to the others (every rank of a plan runs the same
// shapes under every Routing: balanced and power-law shapes are the timed
// rank's). A Builder, for sweeps, lays into memory it keeps between
// builds, and with OneRank lays that one list alone when it stands for
// every rank.
package model
