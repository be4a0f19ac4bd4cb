// Package topology describes a box: device specs and the link graph
// between GPUs, with path queries, presets that cite their sources, JSON
// load/save and discovery through NVML.
package topology
