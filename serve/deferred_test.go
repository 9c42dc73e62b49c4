package serve

import (
	"fmt"
	"testing"

	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/serve/plan"
)

// TestRecoveryThatOnlySkipsIsDeferredAndBacksOff: a recover run whose every sidecar was
// skipped (young, live, claimed) resolved nothing and ends with ErrRecoveryDeferred, a
// retryable failure, so the ledger backs the unit off instead of the planner placing it
// again at once (a fresh-user trial saw ~100 placements a second while a killed index
// build's sidecar was young). A run that resolved anything, or had nothing pending, is a
// success.
func TestRecoveryThatOnlySkipsIsDeferredAndBacksOff(t *testing.T) {
	rep := func(actions ...string) recovery.Report {
		var r recovery.Report
		for _, a := range actions {
			r.Outcomes = append(r.Outcomes, recovery.Outcome{Action: a})
		}
		return r
	}
	for _, c := range []struct {
		rep  recovery.Report
		want bool
	}{
		{rep(), false},
		{rep(recovery.SkippedYoung), true},
		{rep(recovery.SkippedLive, recovery.SkippedClaimed), true},
		{rep(recovery.SkippedYoung, recovery.RolledBack), false},
		{rep(recovery.RolledForward), false},
		{rep(recovery.Gone), false},
		{rep(recovery.Failed), false},
	} {
		if got := recoveryDeferred(c.rep); got != c.want {
			t.Errorf("recoveryDeferred(%+v) = %v, want %v", c.rep.Outcomes, got, c.want)
		}
	}
	err := fmt.Errorf("table %q: %w", "t", ErrRecoveryDeferred)
	if c := Classify(err); c != plan.FailureRetryable {
		t.Fatalf("Classify(deferred) = %q, want retryable", c)
	}
	if r := plan.RetryAfter(plan.Failure{Attempts: 1, Class: Classify(err)}, 0); r.NeedsAttention || r.Delay <= 0 {
		t.Fatalf("a deferred recovery's back-off: %+v, want a delay", r)
	}
}
