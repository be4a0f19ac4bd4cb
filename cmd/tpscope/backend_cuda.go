package main

// The CUDA backend registers itself as "cuda" (exec.RegisterBackend); it
// loads the NVIDIA libraries only when a run asks for it, so the binary
// still runs on machines without them.
import _ "github.com/tpscope/tpscope/exec/cuda"
