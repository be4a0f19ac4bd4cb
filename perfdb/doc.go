// Package perfdb reads a measured per-op performance database in NVIDIA
// aiconfigurator's format and serves it to sim as a cost source.
//
// Format. A systems/ root holds one YAML per system (GPU peaks, memory
// bandwidth, node bandwidths, NCCL version; Spec) and, under the YAML's
// data_dir, Parquet tables per family, engine and version:
// <family>/<engine>/<version>/<table>.parquet (comm/nccl/<version>/ for
// nccl-tests). Every row carries framework, version, device, op_name,
// kernel_source and latency in ms; the key columns per family are in
// ../shared/reference/perfdb/README.md. Tables load into typed columns
// (GEMMTable, MoETable, MLAModuleTable, MLABMMTable, AttentionTable,
// NCCLTable, CustomARTable), keyed by system (GPU), engine and version.
//
// Laziness. Open reads a directory listing; a system's YAML is parsed on
// first use and each table is read on first use, once, decoding only the
// columns tpscope reads. Bad files fail with one-line *FileError naming
// the file and the field or column (and the row).
//
// Interpolation (aiconfigurator docs/design/perf_interp_design.md): per
// categorical key a grid over the numeric axes; an exact hit returns the
// measured row verbatim; inside the grid each axis is blended linearly
// between its two bracketing measured values (in latency, or for GEMM's
// n and k, whose sites are distinct shapes, in utilization); beyond the
// measured range, or where a ragged branch is missing, the nearest
// measured point's utilization (speed of light / measured) is held and
// rescaled to the query's speed of light. Nothing is fabricated: a key
// the table did not measure, or an axis measured at a single value, is a
// miss, and sim keeps its prior. See grid.
//
// MoE routing. MoE rows were measured under a routing distribution
// (balanced, power_law_ALPHA), read as model.Routing with model's codec. A
// schedule's routed-expert ops carry the routing they were built under
// (model.MoEShape.Routing) and are priced from that distribution's rows;
// Source.CheckRouting refuses a routing the table has no rows of, so the
// schedule and its prices state one routing. The MoE speed of light uses
// the same routing's shape.
//
// Speed of light per family is a roofline from the system YAML:
// max(FLOPs / tensor peak, bytes / mem_bw) for compute families,
// p2p_latency + bus bytes / intra_node_bw for collectives. It only
// shapes ratios (util holds); its absolute scale never reaches a result.
//
// Units: tables state ms; everything here is in us (Result.Us), bytes,
// GB/s and TFLOPS.
package perfdb
