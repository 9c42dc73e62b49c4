package waltest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/wal"
)

// seamsRun collects the seams the crash tests killed a child at, for the summary line.
func logSeams(t *testing.T, what string, seams []string) {
	t.Logf("%s: SIGKILL at %d seams: %s", what, len(seams), strings.Join(seams, ", "))
}

// preWriter is the state every crash test starts from: a writer of an earlier epoch that
// appended batches (one flushed generation, the rest only in the log) and died.
func preWriter(dir, name string, shard int, from int64) childConfig {
	return childConfig{Role: roleWriter, Name: name, Dir: dir, Table: "t", Shard: shard, From: from, Rows: 50,
		Batches: 6, FlushEvery: 4, Abandon: true}
}

// TestCrashWriterAtEverySeam: a writer child appending from 4 goroutines (with explicit
// flushes) or a child opening the shard is SIGKILLed at each WAL seam, on a shard an
// earlier writer left with a flushed generation and unflushed entries. After recovery every
// acknowledged row is present exactly once, and so is the entry that was durable but not
// yet acknowledged when the kill came at wal.entry_durable.
func TestCrashWriterAtEverySeam(t *testing.T) {
	cases := []struct {
		seam    string
		spec    string
		victim  func(dir string) childConfig
		unacked bool // rows durable but never acknowledged must be present after recovery
	}{
		{"wal.entry_durable", "wal.entry_durable=after(5)->kill", writerVictim, true},
		{"wal.flush_files", "wal.flush_files=after(1)->kill", writerVictim, false},
		{"wal.flushed", "wal.flushed=after(1)->kill", writerVictim, false},
		{"wal.claimed", "wal.claimed=kill", replayVictim, false},
		{"wal.fenced", "wal.fenced=kill", replayVictim, false},
	}
	var ran []string
	for _, c := range cases {
		t.Run(c.seam, func(t *testing.T) {
			s, db, dir := setup(t, "t", 1, nil)
			if e, out := run(t, s, preWriter(dir, "pre", 0, 1_000_000), ""); e != (exit{}) {
				t.Fatalf("pre-writer: %+v\n%s", e, out)
			}
			v := c.victim(dir)
			e, out := run(t, s, v, c.spec)
			if !e.Killed {
				t.Fatalf("victim was not killed at %s: %+v\n%s", c.seam, e, out)
			}
			l, err := readLedger(dir, "pre", v.Name)
			if err != nil {
				t.Fatal(err)
			}
			l.withBase()
			rec := recoverAll(t, db, "t", []int{0})
			unacked := checkRecovered(t, db, "t", []int{0}, l)
			if c.unacked && unacked == 0 {
				t.Fatalf("the entry durable at the kill was not replayed (no unacknowledged row present)")
			}
			t.Logf("%s: %d rows acknowledged, %d present unacknowledged, %d replayed, merged %+v", c.seam, len(l.acked), unacked, rec.Replayed[0], rec.Merge.Shards)
			ran = append(ran, c.seam)
		})
	}
	logSeams(t, "writer", ran)
}

func writerVictim(dir string) childConfig {
	return childConfig{Role: roleWriter, Name: "victim", Dir: dir, Table: "t", Shard: 0, From: 2_000_000, Rows: 100,
		Batches: 40, Goroutines: 4, FlushEvery: 4}
}

func replayVictim(dir string) childConfig {
	return childConfig{Role: roleReplay, Name: "victim", Dir: dir, Table: "t", Shard: 0}
}

// TestCrashDuringReplay: an earlier writer left 6 unflushed entries (a pre-writer with one
// goroutine and no flush, so exactly 6 positions); a child opening the shard fences that
// epoch (a 7th position) and replays 7 steps. It is killed before step n+1 for every n
// (wal.replay_entry after(n)), then a second child is killed at the same step of its own
// replay (which now also passes the first's fence), then recovery replays in full:
// every acknowledged row is present exactly once. With n = 7 the first child completes.
func TestCrashDuringReplay(t *testing.T) {
	const entries = 6
	var ran []string
	for n := 0; n <= entries+1; n++ {
		name := fmt.Sprintf("after(%d)", n)
		t.Run(name, func(t *testing.T) {
			s, db, dir := setup(t, "t", 1, nil)
			pre := childConfig{Role: roleWriter, Name: "pre", Dir: dir, Table: "t", Shard: 0, From: 1_000_000, Rows: 50,
				Batches: entries, Abandon: true}
			if e, out := run(t, s, pre, ""); e != (exit{}) {
				t.Fatalf("pre-writer: %+v\n%s", e, out)
			}
			spec := fmt.Sprintf("wal.replay_entry=after(%d)->kill", n)
			v1 := childConfig{Role: roleReplay, Name: "replay1", Dir: dir, Table: "t", Shard: 0}
			e, out := run(t, s, v1, spec)
			if want := n < entries+1; e.Killed != want || (!want && e != (exit{})) {
				t.Fatalf("first replay at after(%d): %+v, want killed %v\n%s", n, e, want, out)
			}
			v2 := childConfig{Role: roleReplay, Name: "replay2", Dir: dir, Table: "t", Shard: 0}
			e2, out := run(t, s, v2, spec)
			if !e2.Killed && e2 != (exit{}) {
				t.Fatalf("second replay: %+v\n%s", e2, out)
			}
			l, err := readLedger(dir, "pre")
			if err != nil {
				t.Fatal(err)
			}
			if len(l.acked) != entries*50 {
				t.Fatalf("pre-writer acknowledged %d rows, want %d", len(l.acked), entries*50)
			}
			l.withBase()
			rec := recoverAll(t, db, "t", []int{0})
			if unacked := checkRecovered(t, db, "t", []int{0}, l); unacked != 0 {
				t.Fatalf("%d unacknowledged rows present (the pre-writer's appends were all acknowledged)", unacked)
			}
			t.Logf("%s: first replay killed %v, second killed %v, recovery replayed %d rows", name, e.Killed, e2.Killed, rec.Replayed[0])
			if e.Killed {
				ran = append(ran, "wal.replay_entry "+name)
			}
		})
	}
	logSeams(t, "replay", ran)
}

// mergeSeams are the seams a WAL merge passes, in order, and what recovery.Recover must
// do after a SIGKILL there.
var mergeSeams = []struct {
	seam   string
	action string
}{
	{"engine.merge_planned", recovery.RolledBack},
	{"manifest.before_txn_put", recovery.RolledBack},
	{"manifest.before_version_put", recovery.RolledBack},
	{"manifest.after_version_put", recovery.RolledForward},
	{"engine.before_publish", recovery.RolledForward},
	{"engine.after_publish", recovery.AlreadyPublished},
	{"engine.merge_committed", recovery.AlreadyPublished},
}

// TestCrashMergeAtEverySeam: two shards, each left by a dead writer with two flushed
// generations and unflushed entries; a merger child with recovery sidecars is SIGKILLed at
// each merge seam. Recover resolves its sidecar as the seam demands (a merge that landed is
// published, one that did not is fenced), the shards are reopened, flushed and merged
// again: every acknowledged row exactly once, published = HEAD, and a second recovery and
// merge are no-ops.
func TestCrashMergeAtEverySeam(t *testing.T) {
	var ran []string
	for _, c := range mergeSeams {
		t.Run(c.seam, func(t *testing.T) {
			ctx := context.Background()
			s, db, dir := setup(t, "t", 2, nil)
			for sh := range 2 {
				pre := childConfig{Role: roleWriter, Name: fmt.Sprintf("pre%d", sh), Dir: dir, Table: "t", Shard: sh,
					From: int64(sh+1) * 1_000_000, Rows: 50, Batches: 8, FlushEvery: 3, Abandon: true}
				if e, out := run(t, s, pre, ""); e != (exit{}) {
					t.Fatalf("pre-writer %d: %+v\n%s", sh, e, out)
				}
			}
			m := childConfig{Role: roleMerger, Name: "merger", Dir: dir, Table: "t"}
			e, out := run(t, s, m, c.seam+"=kill")
			if !e.Killed {
				t.Fatalf("merger was not killed at %s: %+v\n%s", c.seam, e, out)
			}
			pending, err := recovery.Pending(ctx, s, "t")
			if err != nil {
				t.Fatal(err)
			}
			if len(pending) != 1 {
				t.Fatalf("after the kill at %s: sidecars %v, want one", c.seam, pending)
			}
			l, err := readLedger(dir, "pre0", "pre1")
			if err != nil {
				t.Fatal(err)
			}
			l.withBase()
			rec := recoverAll(t, db, "t", []int{0, 1})
			if len(rec.Outcomes) != 1 || rec.Outcomes[0].Action != c.action {
				t.Fatalf("recover: %+v, want one %s", rec.Outcomes, c.action)
			}
			// What the merge after recovery merged: everything (4 generations and the
			// 2 flushed by recovery) when the killed merge was rolled back, only the 2
			// generations recovery flushed when it landed.
			wantGens := 2
			if c.action == recovery.RolledBack {
				wantGens = 6
			}
			gens := 0
			for _, sm := range rec.Merge.Shards {
				gens += sm.Generations
			}
			if gens != wantGens {
				t.Fatalf("the merge after recovery merged %d generations (%+v), want %d", gens, rec.Merge.Shards, wantGens)
			}
			if unacked := checkRecovered(t, db, "t", []int{0, 1}, l); unacked != 0 {
				t.Fatalf("%d unacknowledged rows present", unacked)
			}
			t.Logf("%s: recover %s, then merged %d generations", c.seam, rec.Outcomes[0].Action, gens)
			ran = append(ran, c.seam)
		})
	}
	logSeams(t, "merge", ran)
}

// TestPausedEntryIsNotCoveredByAFlush (issue 11's acceptance): a writer child with one
// goroutine is held at wal.entry_durable on its 6th entry (durable, not in the memtable,
// not acknowledged) while its background flusher (shale.wal.flush_interval 20ms) flushes
// the memtable: the flush's replay position must stop at the 5th entry. Then the child is
// SIGKILLed; recovery replays the 6th entry, so its rows are present, once.
func TestPausedEntryIsNotCoveredByAFlush(t *testing.T) {
	ctx := context.Background()
	s, db, dir := setup(t, "t", 1, map[string]string{engine.ConfigWALFlushInterval: "20ms"})
	gate := filepath.Join(dir, "never")
	v := childConfig{Role: roleWriter, Name: "victim", Dir: dir, Table: "t", Shard: 0, From: 1_000_000, Rows: 100, Batches: 10}
	p := start(t, s, v, "wal.entry_durable=after(5)->block("+gate+")")
	var epoch uint64
	waitFor(t, 30*time.Second, "the child's claim", func() bool {
		l, err := readLedger(dir, "victim")
		if err == nil && len(l.epochs) == 1 {
			epoch = l.epochs[0]
		}
		return epoch != 0
	})
	held := wal.Position{Epoch: epoch, Pos: 6}
	waitFor(t, 30*time.Second, "entry "+held.String()+" durable", func() bool {
		_, err := s.Head(ctx, wal.EntryKey("t", "0", held))
		return err == nil
	})
	var m *wal.ShardManifest
	// Entries 1-5 were acknowledged before entry 6 was put; the background flusher
	// flushes them (earlier flushes may have covered fewer) and must stop there.
	waitFor(t, 30*time.Second, "a flush of the 5 acknowledged entries while the 6th is held", func() bool {
		var err error
		m, err = wal.LoadShard(ctx, s, "t", "0")
		return err == nil && m.Replay.Epoch == epoch && m.Replay.Pos >= 5
	})
	if !m.Replay.Less(held) || m.Replay.Pos != 5 {
		t.Fatalf("a flush moved the replay position to %s while entry %s was durable but not in the memtable", m.Replay, held)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if e := p.wait(t, 30*time.Second); !e.Killed {
		t.Fatalf("child: %+v\n%s", e, p.out)
	}
	l, err := readLedger(dir, "victim")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.acked) != 500 {
		t.Fatalf("acknowledged %d rows before the held entry, want 500", len(l.acked))
	}
	l.withBase()
	recoverAll(t, db, "t", []int{0})
	if unacked := checkRecovered(t, db, "t", []int{0}, l); unacked != 100 {
		t.Fatalf("%d unacknowledged rows present, want the held entry's 100", unacked)
	}
	t.Logf("flush while entry %s was held: replay position %s, generations %d; after recovery the held entry's rows are present once", held, m.Replay, len(m.Generations))
}
