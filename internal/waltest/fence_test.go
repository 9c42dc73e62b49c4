package waltest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// collect deletes what gc may delete of a shard once a writer flushed everything: every
// entry below the last one of its epoch (the last, for a fenced epoch its fence, must
// stay), and every shard manifest version below the newest, replaced by a tombstone
// (wal.ExpireShardManifest, as gc does). It returns the entries deleted and the versions
// expired.
func collect(t *testing.T, ctx context.Context, s store.Store, table, shard string) (deleted, expired int) {
	t.Helper()
	objs, err := s.List(ctx, wal.EntriesDir(table, shard), 0)
	if err != nil {
		t.Fatal(err)
	}
	last := map[uint64]uint64{}
	var ps []wal.Position
	for _, o := range objs {
		p, err := wal.ParseEntryKey(table, shard, o.Key)
		if err != nil {
			continue
		}
		ps = append(ps, p)
		last[p.Epoch] = max(last[p.Epoch], p.Pos)
	}
	for _, p := range ps {
		if p.Pos < last[p.Epoch] {
			if err := s.Delete(ctx, wal.EntryKey(table, shard, p)); err != nil {
				t.Fatal(err)
			}
			deleted++
		}
	}
	latest, err := wal.LatestVersion(ctx, s, table, shard)
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v < latest; v++ {
		if err := wal.ExpireShardManifest(ctx, s, table, shard, v); err != nil {
			t.Fatal(err)
		}
		expired++
	}
	return deleted, expired
}

// TestPausedWriterIsFenced: writer process A appends from two goroutines (flushing every
// 5 acknowledged batches) and is paused with SIGSTOP; writer process B claims the shard,
// appends, flushes and closes; then everything gc may collect is collected (all entries
// below each epoch's last, and every shard manifest version below the newest), and A gets
// SIGCONT. A's next append collides with its fence and fails with wal.ErrFenced, a flush
// fails the same way, the rows of its fenced appends are nowhere, and every row either
// process acknowledged is present exactly once, before and after recovery. No lease or
// clock is involved: A is paused as long as the test likes.
func TestPausedWriterIsFenced(t *testing.T) {
	ctx := context.Background()
	s, db, dir := setup(t, "t", 1, nil)
	a := start(t, s, childConfig{Role: roleWriter, Name: "a", Dir: dir, Table: "t", Shard: 0, From: 1_000_000, Rows: 100,
		Goroutines: 2, FlushEvery: 5, Pace: time.Millisecond}, "")
	waitFor(t, 30*time.Second, "A's first acknowledgements", func() bool {
		l, err := readLedger(dir, "a")
		return err == nil && len(l.acked) >= 1500
	})
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	atPause, err := readLedger(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	b := childConfig{Role: roleWriter, Name: "b", Dir: dir, Table: "t", Shard: 0, From: 2_000_000, Rows: 100, Batches: 12, FlushEvery: 5}
	if e, out := run(t, s, b, ""); e != (exit{}) {
		t.Fatalf("writer B: %+v\n%s", e, out)
	}
	deleted, expired := collect(t, ctx, s, "t", "0")
	// A is still paused: the table holds every row either acknowledged, once.
	l, err := readLedger(dir, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	l.withBase()
	ids, _, err := scanIDs(ctx, db, "t", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkOnce(ids, l); err != nil {
		t.Fatalf("with A paused, after B's flush and collection: %v", err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if e := a.wait(t, time.Minute); e.Code != exitFenced {
		t.Fatalf("writer A after SIGCONT: %+v, want exit %d (fenced)\n%s", e, exitFenced, a.out)
	}
	l, err = readLedger(dir, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	l.withBase()
	if len(l.fencedIDs) == 0 {
		t.Fatalf("A's journal records no append failing with ErrFenced:\n%s", a.out)
	}
	if l.flushes["ok"] < 1 || l.flushes["fenced"] < 1 {
		t.Fatalf("flushes %v: want A's (and B's) ok flushes and A's fenced one", l.flushes)
	}
	ids, _, err = scanIDs(ctx, db, "t", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkOnce(ids, l); err != nil {
		t.Fatalf("after A resumed: %v", err)
	}
	absent := func(ids []int64) {
		t.Helper()
		for _, id := range ids {
			if l.fencedIDs[id] {
				t.Fatalf("row %d of an append A was told was fenced is present", id)
			}
		}
	}
	absent(ids)
	recoverAll(t, db, "t", []int{0})
	checkRecovered(t, db, "t", []int{0}, l)
	ids, _, err = scanIDs(ctx, db, "t", "")
	if err != nil {
		t.Fatal(err)
	}
	absent(ids)
	t.Logf("A acknowledged %d rows before the pause (%d by its end), B %d; gc-like collection deleted %d entries and expired %d shard manifests; A's fenced appends: %d rows, none present",
		len(atPause.acked), countPrefix(l.acked, 1_000_000), countPrefix(l.acked, 2_000_000), deleted, expired, len(l.fencedIDs))
}

// countPrefix counts the ids in [from, 2*from).
func countPrefix(m map[int64]bool, from int64) int {
	n := 0
	for id := range m {
		if id >= from && id < 2*from {
			n++
		}
	}
	return n
}

// TestRacingClaimsLoseNoAcknowledgedRow: two writer processes take one shard from each
// other over and over (each, when fenced, claims it back) while appending from two
// goroutines and flushing; after a dozen claims they stop. Every row either acknowledged
// is present exactly once after recovery, and no epoch was claimed twice.
func TestRacingClaimsLoseNoAcknowledgedRow(t *testing.T) {
	s, db, dir := setup(t, "t", 1, nil)
	var procs []*childProc
	for i, name := range []string{"c1", "c2"} {
		procs = append(procs, start(t, s, childConfig{Role: roleWriter, Name: name, Dir: dir, Table: "t", Shard: 0,
			From: int64(i+1) * 1_000_000_000, Rows: 20, Goroutines: 2, FlushEvery: 7, Reclaim: true}, ""))
	}
	claims := 12
	if slow() {
		claims = 100
	}
	waitFor(t, time.Minute, fmt.Sprintf("%d claims", claims), func() bool {
		l, err := readLedger(dir, "c1", "c2")
		return err == nil && len(l.epochs) >= claims
	})
	if err := os.WriteFile(stopFile(dir), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if e := p.wait(t, time.Minute); e != (exit{}) {
			t.Fatalf("writer %s: %+v\n%s", p.cfg.Name, e, p.out)
		}
	}
	l, err := readLedger(dir, "c1", "c2")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, e := range l.epochs {
		if seen[e] {
			t.Fatalf("epoch %d claimed twice (epochs %v)", e, l.epochs)
		}
		seen[e] = true
	}
	l.withBase()
	recoverAll(t, db, "t", []int{0})
	unacked := checkRecovered(t, db, "t", []int{0}, l)
	t.Logf("%d claims, %d rows acknowledged (c1 %d, c2 %d), %d appends fenced, %d rows present unacknowledged",
		len(l.epochs), len(l.acked)-baseRows, countPrefix(l.acked, 1_000_000_000), countPrefix(l.acked, 2_000_000_000), len(l.fencedIDs)/20, unacked)
}

// TestPausedMergerMergesNothingTwice: a merger process armed its sidecar and planned its
// merge (held at engine.merge_planned), is paused with SIGSTOP, and its hold's lease runs
// out (revoked here, as etcd does one TTL after the last keep-alive). Recovery rolls its
// merge back (an abort version fences its transaction), and this process merges the same
// generations. Then SIGCONT: the paused merge must not land a second time (its
// transaction is fenced, or its rebase finds the watermarks moved and re-plans nothing),
// so every acknowledged row is present exactly once.
func TestPausedMergerMergesNothingTwice(t *testing.T) {
	ctx := context.Background()
	s, db, dir := setup(t, "t", 2, nil)
	for sh := range 2 {
		pre := childConfig{Role: roleWriter, Name: fmt.Sprintf("pre%d", sh), Dir: dir, Table: "t", Shard: sh,
			From: int64(sh+1) * 1_000_000, Rows: 50, Batches: 8, FlushEvery: 4}
		if e, out := run(t, s, pre, ""); e != (exit{}) {
			t.Fatalf("writer %d: %+v\n%s", sh, e, out)
		}
	}
	gate := filepath.Join(dir, "go")
	m := start(t, s, childConfig{Role: roleMerger, Name: "merger", Dir: dir, Table: "t"}, "engine.merge_planned=block("+gate+")")
	waitFor(t, 30*time.Second, "the merger's sidecar", func() bool {
		p, err := recovery.Pending(ctx, s, "t")
		return err == nil && len(p) == 1
	})
	if err := m.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	enginetest.ExpireHolds(t, db, "t")
	rep, err := recovery.Recover(ctx, s, db.Catalog(), "t", recovery.Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != recovery.RolledBack {
		t.Fatalf("recover with the merger paused: %+v, %v; want its merge rolled back", rep.Outcomes, err)
	}
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	mr, err := tbl.MergeWAL(ctx, engine.MergeWALOptions{})
	if err != nil || len(mr.Shards) != 2 {
		t.Fatalf("merge while the other merger is paused: %+v, %v", mr, err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	e := m.wait(t, time.Minute)
	lines, err := readLines(journalPath(dir, "merger"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || !(strings.HasPrefix(lines[0], "X ") || lines[0] == fmt.Sprintf("M %d 0", mr.Version)) {
		t.Fatalf("the paused merger after SIGCONT: exit %+v, journal %q; want a rejected merge or one that merged nothing\n%s", e, lines, m.out)
	}
	l, err := readLedger(dir, "pre0", "pre1")
	if err != nil {
		t.Fatal(err)
	}
	l.withBase()
	recoverAll(t, db, "t", []int{0, 1})
	checkRecovered(t, db, "t", []int{0, 1}, l)
	t.Logf("the paused merger after recovery fenced it and another merge ran: %q", lines)
}
