package advise

import (
	"fmt"
	"github.com/tpscope/tpscope/sim"
)

// PlanEntries are optimizations of the plan and the build that the
// executor runs and Catalog does not list: decode context parallelism, and
// DSA's sparse attention (GLM-5) against the dense MLA that engines without
// its kernels run. They have Catalog's shape, so advise and verdict take
// them the same way.
func PlanEntries() []Entry {
	return []Entry{
		{
			Name: "dcp", Title: "decode context parallelism over the TP ranks", Kind: "parallelism",
			Enabled: func(c sim.Scenario) bool { return c.Plan.Normalized().DCP > 1 },
			Apply: func(c sim.Scenario) (sim.Scenario, error) {
				tp := c.Plan.Normalized().TP
				if tp < 2 {
					return c, fmt.Errorf("plan %s: decode context parallelism needs TP > 1", c.Plan.Normalized())
				}
				if c.Arch.HasIndexer() && !c.Build.DenseDSA {
					return c, fmt.Errorf("%s: decode context parallelism with DSA sparse attention is not modeled (the dense-DSA build is)", c.Arch.Name)
				}
				c.Plan.DCP = tp
				return c, c.Plan.Validate(c.Arch)
			},
			Revert: func(c sim.Scenario) (sim.Scenario, error) {
				c.Plan.DCP = 1
				return c, c.Plan.Validate(c.Arch)
			},
			Check: func(c sim.Scenario) Applicability {
				tp := c.Plan.Normalized().TP
				if tp < 2 {
					return Applicability{Status: NotApplicable, Reason: "needs TP > 1: the KV cache splits by tokens over the TP ranks"}
				}
				if c.Arch.HasIndexer() && !c.Build.DenseDSA {
					return Applicability{Status: NotApplicable, Reason: fmt.Sprintf("%s runs DSA sparse attention: decode context parallelism is modeled for the dense-DSA build only (--dense-dsa)", c.Arch.Name)}
				}
				p := c.Plan
				p.DCP = tp
				if err := p.Validate(c.Arch); err != nil {
					return Applicability{Status: NotApplicable, Reason: err.Error()}
				}
				return Applicability{Status: Applies, Reason: fmt.Sprintf("each rank keeps 1/%d of every sequence's KV cache and attends all heads over it; per layer a q all-gather, an LSE all-gather and an output reduce-scatter", tp)}
			},
			HowTo: func(c sim.Scenario) How {
				tp := c.Plan.Normalized().TP
				return engineHow(c, fmt.Sprintf("--decode-context-parallel-size %d", tp), fmt.Sprintf("decode context parallelism %d", tp))
			},
		},
		{
			Name: "dsa", Title: "DSA sparse attention (indexer top-k) instead of dense MLA", Kind: "attention",
			Enabled: func(c sim.Scenario) bool { return c.Arch.HasIndexer() && !c.Build.DenseDSA },
			Apply: func(c sim.Scenario) (sim.Scenario, error) {
				if !c.Arch.HasIndexer() {
					return c, fmt.Errorf("%s has no DSA indexer", c.Arch.Name)
				}
				c.Build.DenseDSA = false
				return c, nil
			},
			Revert: func(c sim.Scenario) (sim.Scenario, error) {
				c.Build.DenseDSA = true
				return c, nil
			},
			Check: func(c sim.Scenario) Applicability {
				if !c.Arch.HasIndexer() {
					return Applicability{Status: NotApplicable, Reason: fmt.Sprintf("%s has no DSA indexer (index_n_heads = 0)", c.Arch.Name)}
				}
				return Applicability{Status: Applies, Reason: "the indexer scores the whole context, then attention reads only the top-k tokens; engines without DSA kernels (SM120) run dense MLA over the whole context"}
			},
			HowTo: func(sim.Scenario) How {
				return How{Exec: "model.BuildOptions.DenseDSA false (--dense-dsa=false)"}
			},
		},
	}
}
