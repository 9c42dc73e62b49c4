package serve

import "github.com/shale-db/shale/internal/failpoint"

// The runtime's named seams (internal/failpoint): a crash test kills an executor or a
// planner at each of them (SHALE_FAILPOINTS="serve.after_bind=kill").
var (
	// seamAfterBind: an executor bound an assignment (state running) and has not started
	// the work.
	seamAfterBind = failpoint.Seam("serve.after_bind")
	// seamBeforeRelease: the work ended (either way) and the release transaction is next.
	seamBeforeRelease = failpoint.Seam("serve.before_release")
	// seamBeforePlace: the planner decided a placement and its transaction is next.
	seamBeforePlace = failpoint.Seam("serve.before_place")
	// seamExecute: inside the execution, before the work's first storage request (a
	// test blocks here to stall an execution).
	seamExecute = failpoint.Seam("serve.execute")
)
