package advise

import (
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// The plan entries' rules: DCP over the TP ranks needs TP > 1 and, on a
// DSA model, dense attention (model.Plan.Validate); DSA applies only to a
// model with an indexer and is in GLM-5's baseline.
func TestPlanEntries(t *testing.T) {
	kimi, err := model.Resolve("kimi-k2.5")
	if err != nil {
		t.Fatal(err)
	}
	glm, err := model.Resolve("glm-5")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Entry{}
	for _, e := range PlanEntries() {
		byName[e.Name] = e
	}
	sc := func(a *model.Arch, tp int, dense bool) sim.Scenario {
		return sim.Scenario{Arch: a, Plan: model.Plan{TP: tp}, Build: model.BuildOptions{DenseDSA: dense},
			Workload: model.Workload{Phase: model.Decode, Batch: 8, Context: 4096}}
	}
	for _, c := range []struct {
		name    string
		entry   string
		sc      sim.Scenario
		status  Status
		enabled bool
		check   func(sim.Scenario) bool // of Apply's result; nil: Apply must fail
	}{
		{"dcp kimi tp8", "dcp", sc(kimi, 8, false), Applies, false, func(s sim.Scenario) bool { return s.Plan.Normalized().DCP == 8 }},
		{"dcp tp1", "dcp", sc(kimi, 1, false), NotApplicable, false, nil},
		{"dcp glm sparse", "dcp", sc(glm, 8, false), NotApplicable, false, nil},
		{"dcp glm dense", "dcp", sc(glm, 8, true), Applies, false, func(s sim.Scenario) bool { return s.Plan.Normalized().DCP == 8 }},
		{"dsa glm", "dsa", sc(glm, 8, false), Applies, true, func(s sim.Scenario) bool { return !s.Build.DenseDSA }},
		{"dsa glm dense", "dsa", sc(glm, 8, true), Applies, false, func(s sim.Scenario) bool { return !s.Build.DenseDSA }},
		{"dsa kimi", "dsa", sc(kimi, 8, false), NotApplicable, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := byName[c.entry]
			if got := e.Check(c.sc); got.Status != c.status || got.Reason == "" {
				t.Errorf("check %+v, want %s with a reason", got, c.status)
			}
			if got := e.Enabled(c.sc); got != c.enabled {
				t.Errorf("enabled %v, want %v", got, c.enabled)
			}
			s, err := e.Apply(c.sc)
			if c.check == nil {
				if err == nil {
					t.Errorf("apply succeeded: %+v", s.Plan)
				}
				return
			}
			if err != nil || !c.check(s) {
				t.Errorf("apply: %v, plan %s, build %+v", err, s.Plan.Normalized(), s.Build)
			}
			if r, err := e.Revert(s); err != nil || e.Enabled(r) {
				t.Errorf("revert: %v, still enabled %v", err, e.Enabled(r))
			}
		})
	}
}
