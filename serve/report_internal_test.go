package serve

import (
	"testing"
	"time"

	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// report says when no executor is live, and only then.
func TestReportNoExecutors(t *testing.T) {
	snap := &state.Snapshot{}
	in := plan.Input{Now: time.Now(), Tables: []plan.TableState{{Table: "t", PendingGenerations: 2, PendingBytes: 1 << 20}}}
	if r := report(in, plan.Plan(in), snap, "t"); !r.NoExecutors {
		t.Fatalf("no executors: %+v", r)
	}
	in.Executors = []plan.Executor{{ID: "e", Slots: map[plan.Kind]int{plan.KindMergeWAL: 1}, Bytes: 1 << 30}}
	if r := report(in, plan.Plan(in), snap, "t"); r.NoExecutors {
		t.Fatalf("one executor: %+v", r)
	}
}

// EffectivePolicy: stored knobs win over the config's, the built-in defaults fill the
// rest, and a paused default cannot be unpaused by a table.
func TestEffectivePolicy(t *testing.T) {
	base := plan.Policy{MinGenerations: 20, Paused: true}.WithDefaults()
	got := EffectivePolicy(plan.Policy{MinGenerations: 4, MaxAge: time.Minute}, base)
	want := plan.DefaultPolicy()
	want.MinGenerations, want.MaxAge, want.Paused = 4, time.Minute, true
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := EffectivePolicy(plan.Policy{}, plan.Policy{}); got != plan.DefaultPolicy() {
		t.Fatalf("nothing stored: %+v", got)
	}
}
