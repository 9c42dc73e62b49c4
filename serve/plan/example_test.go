package plan_test

import (
	"fmt"
	"time"

	"github.com/shale-db/shale/serve/plan"
)

// Plan one pass over two tables and one executor with two merge slots. "events" has a
// WAL backlog of 300 generations (Critical), and has taken the last two write turns
// while a committed compaction waits for its publish, so fairness gives the publish the
// turn. "logs" has a backlog that waited 90 minutes (exact age), so it is promoted.
// Why explains one table, as `shale why` does.
func Example() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	in := plan.Input{
		Now: now,
		Tables: []plan.TableState{
			{Table: "events", PendingGenerations: 300, PendingBytes: 300 << 20, Drift: 1},
			{Table: "logs", PendingGenerations: 3, PendingBytes: 3 << 20,
				OldestPending: now.Add(-90 * time.Minute), AgeKnown: true, AgeExact: true},
		},
		Executors: []plan.Executor{{ID: "serve-1", Bytes: 4 << 30,
			Slots: map[plan.Kind]int{plan.KindMergeWAL: 2, plan.KindPublish: 1}}},
		Histories: map[string]plan.History{"events": {Turns: []plan.Kind{plan.KindMergeWAL, plan.KindMergeWAL}}},
	}
	out := plan.Plan(in)
	for _, p := range out.Placements {
		fmt.Printf("place %s/%s on %s (class %d, %s, %d MiB)\n", p.Unit.Table, p.Unit.Kind, p.Executor,
			p.Unit.Class, p.Unit.Reason, p.Bytes>>20)
	}
	ex, _ := plan.Why(in, "events")
	for _, e := range ex {
		if e.Skip != nil && e.Skip.Reason != plan.SkipNoWork {
			fmt.Printf("why events/%s: %s (%s)\n", e.Kind, e.Skip.Reason, e.Skip.Detail)
		}
	}
	// Output:
	// place logs/merge_wal on serve-1 (class 1, promoted_for_age, 2 MiB)
	// place events/publish on serve-1 (class 2, drift_to_publish, 64 MiB)
	// why events/merge_wal: fairness_yield (merge_wal took the last 2 write turns; publish waits)
}
