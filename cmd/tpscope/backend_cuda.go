package main

import (
	"go.opentelemetry.io/otel/attribute"

	// The CUDA backend registers itself as "cuda" (exec.RegisterBackend); it
	// loads the NVIDIA libraries only when a run asks for it, so the binary
	// still runs on machines without them.
	"github.com/tpscope/tpscope/exec/cuda"
)

// backendResource returns the trace resource attributes a backend knows
// about the machine (GPU model, driver, CUDA and NCCL versions for cuda;
// nothing for cpu), for the given local device ordinals.
func backendResource(backend string, ordinals []int) []attribute.KeyValue {
	if backend != "cuda" {
		return nil
	}
	if len(ordinals) == 0 {
		ordinals = []int{0}
	}
	return cuda.ResourceAttributes(ordinals...)
}
