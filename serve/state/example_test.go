package state_test

import (
	"fmt"

	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// The key layout under a catalog prefix: one write turn and one preparation slot per
// table.
func ExampleNewKeys() {
	k := state.NewKeys("/shale/stores/01ABC")
	fmt.Println(k.Config())
	fmt.Println(k.Executor("host-1"))
	fmt.Println(k.Assignment("orders", state.SlotOf(plan.KindMergeWAL)))
	fmt.Println(k.Assignment("orders", state.SlotOf(plan.KindCompact)))
	fmt.Println(k.Failure("orders", plan.KindCompact))
	// Output:
	// /shale/stores/01ABC/serve/config
	// /shale/stores/01ABC/serve/executors/host-1
	// /shale/stores/01ABC/serve/assign/orders/turn
	// /shale/stores/01ABC/serve/assign/orders/prep
	// /shale/stores/01ABC/serve/failures/orders/compact
}
