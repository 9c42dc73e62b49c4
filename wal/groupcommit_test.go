package wal

import (
	"sync"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/faults"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// TestGroupCommitKeepsConcurrentAppendersTogether: 8 goroutines append one after another
// while each entry put takes 5 ms. The appenders an entry acknowledged come back within
// microseconds, so the next entry should carry all 8 of them. Before the committer waited
// for them (gatherLocked) the next entry left at once with only the appends queued during
// the put, and the appenders settled into two alternating cohorts of about 4, each entry
// half as large as it could be (the group commit inefficiency the wal benchmark showed:
// 800 rows per entry for 16 appenders of 100 rows, and half the rows/s).
func TestGroupCommitKeepsConcurrentAppendersTogether(t *testing.T) {
	fs := faults.NewStore(storetest.Local(t), 1)
	fs.Add(faults.Rule{Name: "slow-entry-put", Ops: []store.Op{store.OpPutIfAbsent}, Key: "*/entries/*", Kind: faults.Delay, Delay: 5 * time.Millisecond})
	w := open(t, fs, opts())
	const goroutines, appends = 8, 25
	var mu sync.Mutex
	entries := map[Position]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range appends {
				from := int64(g*1000 + i)
				a := appendRange(t, w, from, from+1)
				mu.Lock()
				entries[a.Position]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	per := float64(goroutines*appends) / float64(len(entries))
	t.Logf("%d appends in %d entries: %.1f appends per entry", goroutines*appends, len(entries), per)
	if per < 0.75*goroutines {
		t.Fatalf("%.1f appends per entry from %d concurrent appenders: the group commit splits them", per, goroutines)
	}
}

// TestGatherWait: the committer waits for expected appends at most a quarter of the last
// put's time, and never more than maxGatherWait.
func TestGatherWait(t *testing.T) {
	for _, c := range []struct{ put, want time.Duration }{
		{0, 0}, {2 * time.Millisecond, 500 * time.Microsecond}, {20 * time.Millisecond, maxGatherWait},
	} {
		if got := gatherWait(c.put); got != c.want {
			t.Errorf("gatherWait(%v) = %v, want %v", c.put, got, c.want)
		}
	}
}
