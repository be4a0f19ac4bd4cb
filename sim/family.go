package sim

import "github.com/tpscope/tpscope/model"

// CostFamily is the kernel family an op's compute cost is keyed on, with
// the prior parameters the Predictor used for it.
type CostFamily struct {
	// Key is the Device.Efficiency key: "<opkind>/<dtype>" ("gemm/nvfp4",
	// "attention/bf16") or "<opkind>" for ops without a dtype ("norm").
	Key  string
	Kind model.OpKind
	// Efficiency is the compute efficiency used; MemEfficiency the memory
	// efficiency; MemGBps the device-limited achieved bandwidth
	// (MemBWGBps x MemEfficiency) before the per-SM limit.
	EfficiencyFrac    float64
	MemEfficiencyFrac float64
	MemGBps           float64
}

// CostFamily returns op's kernel family under the Predictor's device, the
// same (kind, dtype) cell compute.go's cost reads (computeModel.cell):
// attention is keyed by its KV dtype, other ops by their weight dtype, ops
// without weights by kind alone. Collectives have no compute family (Key
// "").
func (p *Predictor) CostFamily(op *model.Op) CostFamily {
	if op.Kind == model.KindCollective {
		return CostFamily{Kind: op.Kind}
	}
	cell, dt := p.cm.cell(op)
	key := string(op.Kind)
	if dt != "" {
		key += "/" + string(dt)
	}
	return CostFamily{Key: key, Kind: op.Kind, EfficiencyFrac: cell.efficiency, MemEfficiencyFrac: cell.memEff, MemGBps: cell.memGBps}
}
