// Package model turns a Hugging Face config (or a built-in preset) into the
// Schedule of one decode or prefill step: every op on every rank with its
// shapes, dtypes, FLOPs, bytes and collectives, laid out as vLLM runs
// DeepSeek-V3-family and GLM-5 models (MLA attention + MoE). It also owns
// dtypes with their scale overhead, parallel plans, workloads, the memory
// footprint and KV capacity.
//
// Units: bytes, FLOPs (a multiply-add counts 2), parameter counts. model knows
// nothing about time or hardware speed.
package model
