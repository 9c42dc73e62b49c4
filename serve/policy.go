package serve

import "github.com/shale-db/shale/serve/plan"

// EffectivePolicy is the policy the planner applies to a table whose stored policy is
// stored (the zero Policy when none is stored), when base is the default per-table policy
// of the stored planner-wide config (state.Config.Policy): each knob stored wins, the
// others are base's, then the built-in defaults (plan.Policy.WithDefaults). Paused is
// stored's or base's. Pure.
func EffectivePolicy(stored, base plan.Policy) plan.Policy {
	return mergePolicy(stored, base).WithDefaults()
}
