package waltest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/recovery"
)

// TestMultiProcessBoundedRun: two writer processes append continuously through shards 0
// and 1 (four goroutines each, flushing every 8 acknowledged batches; now and then one is
// SIGKILLed anywhere and started again, claiming its shard back); a merger process
// merges in a loop and is SIGKILLed at a random merge seam (after a random number of
// passes) or, if it outlives its incarnation's time, anywhere, then recovery resolves its
// sidecar and it is started again; reader goroutines query throughout, each query checked
// against the journals: it never returns a row twice, never misses a row acknowledged
// before it began, and never returns a row nobody appended. At the end the writers close,
// a last recovery and merge leave every acknowledged row exactly once in the base table,
// and a repeated merge is a no-op. Seeded (SHALE_SEED replays the merger's kills);
// SHALE_SLOW=1 runs 90 s instead of 10 s.
func TestMultiProcessBoundedRun(t *testing.T) {
	ctx := context.Background()
	rng := newRand(seed(t))
	d := 10 * time.Second
	if slow() {
		d = 90 * time.Second
	}
	s, db, dir := setup(t, "t", 2, nil)
	// Writer incarnation inc of shard sh journals as w<sh>.<inc> and appends ids from
	// (sh+1)·10⁹ + inc·10⁷.
	var (
		jmu      sync.Mutex
		journals []string
		procs    = make([]*childProc, 2)
		incs     = make([]int, 2)
	)
	startWriter := func(sh int) {
		name := fmt.Sprintf("w%d.%d", sh, incs[sh])
		procs[sh] = start(t, s, childConfig{Role: roleWriter, Name: name, Dir: dir, Table: "t", Shard: sh,
			From: int64(sh+1)*1_000_000_000 + int64(incs[sh])*10_000_000, Rows: 50, Goroutines: 4, FlushEvery: 8, Pace: 2 * time.Millisecond}, "")
		jmu.Lock()
		journals = append(journals, name)
		jmu.Unlock()
		incs[sh]++
	}
	writers := func() []string {
		jmu.Lock()
		defer jmu.Unlock()
		return slices.Clone(journals)
	}
	startWriter(0)
	startWriter(1)

	// Readers: each query reads the acknowledgements first, then scans, then the attempts.
	var (
		queries, retries atomic.Int64
		readErr          = make(chan error, 2)
		stopReaders      = make(chan struct{})
		rwg              sync.WaitGroup
	)
	for r := range 2 {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for q := 0; ; q++ {
				select {
				case <-stopReaders:
					return
				default:
				}
				if err := query(ctx, db, dir, writers, r, q, &retries); err != nil {
					readErr <- err
					return
				}
				queries.Add(1)
			}
		}()
	}

	// The merger, killed and restarted.
	seams := map[string]int{}
	var kills, anywhere, incarnations, writerKills int
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		incarnations++
		c := mergeSeams[rng.Intn(len(mergeSeams))]
		spec := fmt.Sprintf("%s=after(%d)->kill", c.seam, rng.Intn(3))
		life := time.Duration(500+rng.Intn(2000)) * time.Millisecond
		m := start(t, s, childConfig{Role: roleMerger, Name: "merger", Dir: dir, Table: "t", Loop: true, Pace: 20 * time.Millisecond}, spec)
		select {
		case <-m.done:
		case <-time.After(life):
			_ = m.cmd.Process.Kill()
			anywhere++
		case err := <-readErr:
			t.Fatal(err)
		}
		e := m.wait(t, time.Minute)
		if !e.Killed {
			t.Fatalf("merger ended without being killed: %+v\n%s", e, m.out)
		}
		kills++
		seams[c.seam]++
		enginetest.ExpireHolds(t, db, "t")
		if rep, err := recovery.Recover(ctx, s, db.Catalog(), "t", recovery.Options{MinAge: -1}); err != nil {
			t.Fatalf("recover after merger incarnation %d: %v (%+v)", incarnations, err, rep)
		}
		if rng.Intn(3) == 0 {
			// SIGKILL a writer wherever it is and start it again: its successor claims
			// the shard and replays what it left in the log.
			sh := rng.Intn(2)
			_ = procs[sh].cmd.Process.Kill()
			if e := procs[sh].wait(t, time.Minute); !e.Killed {
				t.Fatalf("writer %s ended before the kill: %+v\n%s", procs[sh].cfg.Name, e, procs[sh].out)
			}
			writerKills++
			startWriter(sh)
		}
	}
	if err := os.WriteFile(stopFile(dir), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if e := p.wait(t, time.Minute); e != (exit{}) {
			t.Fatalf("writer %s: %+v\n%s", p.cfg.Name, e, p.out)
		}
	}
	close(stopReaders)
	rwg.Wait()
	select {
	case err := <-readErr:
		t.Fatal(err)
	default:
	}
	l, err := readLedger(dir, append(writers(), "merger")...)
	if err != nil {
		t.Fatal(err)
	}
	l.withBase()
	if l.merges == 0 {
		t.Fatal("the merger never merged")
	}
	rec := recoverAll(t, db, "t", []int{0, 1})
	for sh, n := range rec.Replayed {
		if n != 0 {
			t.Fatalf("shard %d: %d rows replayed after its writer closed", sh, n)
		}
	}
	unacked := checkRecovered(t, db, "t", []int{0, 1}, l)
	if writerKills == 0 && unacked != 0 {
		t.Fatalf("%d unacknowledged rows present (no writer was killed)", unacked)
	}
	var names []string
	for s, n := range seams {
		names = append(names, fmt.Sprintf("%s×%d", s, n))
	}
	sort.Strings(names)
	t.Logf("%s: %d rows acknowledged by %d writer incarnations on 2 shards (%d SIGKILLed anywhere and restarted; %d rows present unacknowledged), %d merges committed by %d merger incarnations (%d killed, %d of them not at a seam but at the end of their time; seams armed: %s), %d queries checked (%d re-read after a merge moved under them), last merge %d shards",
		d, len(l.acked)-baseRows, len(writers()), writerKills, unacked, l.merges, incarnations, kills, anywhere, strings.Join(names, ", "), queries.Load(), retries.Load(), len(rec.Merge.Shards))
}

// query runs one checked query: reader r's q-th, judged by the journals writers names
// (before the query for what must be present, after it for what may be). Even
// queries scan every row, odd ones the rows of one shard (a filtered scan statistics can
// prune).
func query(ctx context.Context, db *engine.DB, dir string, writers func() []string, r, q int, retries *atomic.Int64) error {
	before, err := readLedger(dir, writers()...)
	if err != nil {
		return err
	}
	before.withBase()
	filter := ""
	if q%2 == 1 {
		sh := int64((r + q/2) % 2) // shard sh's writers append ids in [(sh+1)·10⁹, (sh+2)·10⁹)
		filter = fmt.Sprintf("id >= %d AND id < %d", (sh+1)*1_000_000_000, (sh+2)*1_000_000_000)
		for id := range before.acked {
			if id/1_000_000_000 != sh+1 {
				delete(before.acked, id)
			}
		}
	}
	ids, n, err := scanIDs(ctx, db, "t", filter)
	retries.Add(int64(n))
	if err != nil {
		return fmt.Errorf("query %d.%d (%q): %w", r, q, filter, err)
	}
	after, err := readLedger(dir, writers()...) // the journals again: a writer started meanwhile has one
	if err != nil {
		return err
	}
	after.withBase()
	after.acked = before.acked // missing: judged by what was acknowledged before the query
	if _, err := checkOnce(ids, after); err != nil {
		return fmt.Errorf("query %d.%d (%q): %w", r, q, filter, err)
	}
	return nil
}
