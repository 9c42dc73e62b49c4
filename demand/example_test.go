package demand_test

import (
	"fmt"

	"github.com/shale-db/shale/demand"
)

// Fold a shard's events in memory. A merge reported generation 40 merged under writer
// epoch 1; a new writer (epoch 2) then flushed generation 60. Generation numbers continue
// across writer claims, so 20 generations are pending, in whatever order the events
// arrive. In a program the WAL writer hands such events to a demand.Publisher
// (Publisher.Publish after each flush, Publisher.PublishMerged after each merge), and a
// planner reads them back with Records.ReadAll.
func Example() {
	merge := demand.MergedEvent("0", 40, 1, 1_733_000_000_000)
	merge.WriterEpoch = 1 // a scan or merge that knows the epoch may say so; MergedEvent uses 0
	flush := demand.Event{
		Shard: "0", IncarnationSince: 1, WriterEpoch: 2, SealedThrough: 60,
		SealedBytesThrough: 60 << 20, FlushedAtMs: 1_733_000_060_000, Source: demand.SourceWriter,
	}
	for _, order := range [][]demand.Event{{merge, flush}, {flush, merge}} {
		td := demand.NewTableDemand("events")
		for _, e := range order {
			if _, err := td.Fold(e, 0, 0); err != nil {
				fmt.Println(err)
				return
			}
		}
		s := td.Shards["0"]
		fmt.Printf("sealed %v merged %v: %d pending, oldest %v\n", s.Sealed, s.Merged, td.PendingGenerations(), td.OldestPending().Kind)
	}
	// Output:
	// sealed 60@e2 merged 40@e1: 20 pending, oldest upper bound
	// sealed 60@e2 merged 40@e1: 20 pending, oldest upper bound
}
