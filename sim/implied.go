package sim

import (
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// ImpliedDenseDSA reports whether engines on box t run a's DSA sparse
// attention as dense MLA (no indexer, attention over the whole context):
// the case for a DSA model (an indexer) on SM12x GPUs, for which the
// engines build no sparse-MLA kernels (vLLM's FLASHMLA_SPARSE backend and
// the FlashMLA sparse kernels it wraps are built for SM 9.0 and 10.x
// only), so GLM-5 serves there as dense MLA. A scenario whose user did
// not choose --dense-dsa takes this value; one that chose otherwise is
// priced as chosen and its prediction carries a caveat (Caveats).
func ImpliedDenseDSA(a *model.Arch, t *topology.Topology) bool {
	return a != nil && a.HasIndexer() && ccMajor(t) == 12
}
