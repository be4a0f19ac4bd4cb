package compare

import (
	"fmt"

	"github.com/tpscope/tpscope/calibrate"
	"github.com/tpscope/tpscope/topology"
)

// fitCollectives fits each (collective, ranks, NCCL setting) the samples
// hold on top of out; a key that cannot be fitted is a note.
func fitCollectives(out *topology.Topology, smp *samples, prov, created string, c *Calibration) *topology.Topology {
	for _, k := range smp.collKeys {
		fit, err := calibrate.Collective(out, smp.coll[k], calibrate.CollectiveOptions{Op: k.op, Ranks: k.ranks, NCCL: k.nccl, Source: prov, Created: created})
		if err != nil {
			c.Notes = append(c.Notes, fmt.Sprintf("%s over %d ranks: %v", k.op, k.ranks, err))
			continue
		}
		out = fit.Topology
		c.Coll = append(c.Coll, fit.Params...)
	}
	return out
}
