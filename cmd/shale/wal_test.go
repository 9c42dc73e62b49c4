package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type walStatusJSON struct {
	Table   string           `json:"table"`
	Version uint64           `json:"version"`
	Shards  []walShardStatus `json:"shards"`
}

func (e *env) walStatus(table string) walStatusJSON {
	e.t.Helper()
	var st walStatusJSON
	if err := json.Unmarshal([]byte(e.ok("wal", "status", table, "--json")), &st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// TestWALCommands: wal append enables a WAL on a table without one and says so, the rows
// are read by queries at once and shown as backlog by wal status and status, a delete
// refuses while they are unmerged, wal merge commits them once (a second merge is a
// no-op), and verify, gc and wal scan see the shard.
func TestWALCommands(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("walcmd")
	e.ok("create", tbl, "--schema", "id:int64,name:string")
	in := e.file("rows.csv", "id,name\n1,a\n2,b\n3,c\n")

	e.fails(1, []string{"table has no WAL", "wal append"}, "wal", "status", tbl)
	e.fails(1, []string{"table has no WAL", "--shard 1"}, "wal", "append", in, "--table", tbl, "--shard", "1")
	r := e.run("wal", "append", in, "--table", tbl)
	if r.code != 0 || !strings.Contains(r.stdout, "Appended 3 rows to "+tbl+" through WAL shard 0 (writer epoch 1)") ||
		!strings.Contains(r.stdout, "flushed as generation 1,") || !strings.Contains(r.stdout, "shale wal merge "+tbl) ||
		!strings.Contains(r.stderr, "had no WAL: enabled one shard (shale.wal.shards=1") {
		t.Fatalf("wal append: %v", r)
	}
	if out := e.ok("query", tbl, "--count"); !strings.HasPrefix(out, "3 rows") {
		t.Fatalf("query --count with the rows in the WAL: %q", out)
	}
	// --explain says how many unmerged generations the query read (issue 11 item 5).
	if out := e.ok("query", tbl, "--explain"); !strings.Contains(out, "wal        1 shard read: 1 unmerged generation scanned") ||
		!strings.Contains(out, "3 rows returned") {
		t.Fatalf("query --explain with the rows in the WAL:\n%s", out)
	}
	st := e.walStatus(tbl)
	if len(st.Shards) != 1 {
		t.Fatalf("wal status: %+v", st)
	}
	if s := st.Shards[0]; s.State != "active" || s.Epoch != 1 || s.Sealed != 1 || s.Merged != 0 || s.PendingGenerations != 1 ||
		s.PendingGenerationRows != 3 || s.BacklogRows != 3 || s.BacklogBytes <= 0 || s.LogEntries != 0 || s.OldestUnmerged == nil || !s.OldestIsLowerBound {
		t.Fatalf("wal status after the append: %+v", s)
	}
	if out := e.ok("wal", "status", tbl); !strings.Contains(out, "1 generation") || !strings.Contains(out, "3 rows") || !strings.Contains(out, "at least") {
		t.Fatalf("wal status:\n%s", out)
	}
	var status struct {
		Tables []statusRow `json:"tables"`
	}
	if err := json.Unmarshal([]byte(e.ok("status", "--json")), &status); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, row := range status.Tables {
		if row.Table == tbl {
			found = row.WAL != nil && row.WAL.Shards == 1 && row.WAL.PendingGenerations == 1 && row.WAL.BacklogRows == 3
		}
	}
	if !found {
		t.Fatalf("status --json lacks %s's WAL backlog: %+v", tbl, status.Tables)
	}
	if out := e.ok("status"); !strings.Contains(out, "1 shard: 1 generation, 0 log rows") {
		t.Fatalf("status:\n%s", out)
	}
	e.fails(1, []string{"rows are in the WAL", "shale wal merge " + tbl}, "delete", tbl, "--where", "id = 1")

	// Bad input.
	e.fails(1, []string{"WAL shard out of range", "--shard 1", "0 to 0"}, "wal", "append", in, "--table", tbl, "--shard", "1")
	e.fails(2, []string{"--shard must be 0 or more"}, "wal", "append", in, "--table", tbl, "--shard", "-1")
	e.fails(2, []string{"required flag", "table"}, "wal", "append", in)
	e.fails(1, []string{"table not found", "wal append needs an existing table"}, "wal", "append", in, "--table", e.table("nosuch"))
	e.fails(1, []string{"schema", "x"}, "wal", "append", e.file("other.csv", "x,y\n1,2\n"), "--table", tbl)
	e.fails(1, []string{"WAL shard out of range"}, "wal", "merge", tbl, "--shard", "5")
	e.fails(1, []string{"table not found"}, "wal", "merge", e.table("nosuch"))
	e.fails(1, []string{"table not found"}, "wal", "scan", e.table("nosuch"))
	e.fails(2, []string{"wal needs a command"}, "wal")
	e.fails(2, []string{"unknown wal command"}, "wal", "bogus")
	e.fails(2, []string{"status needs TABLE", "shale wal status --help"}, "wal", "status")
	if n := e.walStatus(tbl).Shards[0].BacklogRows; n != 3 {
		t.Fatalf("after the refused commands the backlog is %d rows, want 3", n)
	}

	var merged walMergeResult
	if err := json.Unmarshal([]byte(e.ok("wal", "merge", tbl, "--json")), &merged); err != nil {
		t.Fatal(err)
	}
	if !merged.Committed || merged.Rows != 3 || len(merged.Shards) != 1 || merged.Shards[0].From != 0 || merged.Shards[0].To != 1 {
		t.Fatalf("wal merge: %+v", merged)
	}
	if out := e.ok("wal", "merge", tbl); !strings.Contains(out, "Nothing to merge in "+tbl) {
		t.Fatalf("second wal merge: %q", out)
	}
	if s := e.walStatus(tbl).Shards[0]; s.Merged != 1 || s.PendingGenerations != 0 || s.BacklogRows != 0 || s.OldestUnmerged != nil {
		t.Fatalf("wal status after the merge: %+v", s)
	}
	if out := e.ok("query", tbl, "--count"); !strings.HasPrefix(out, "3 rows") {
		t.Fatalf("query --count after the merge: %q", out)
	}
	if out := e.ok("query", tbl, "--explain"); !strings.Contains(out, "1 shard read: 0 unmerged generations") || !strings.Contains(out, "3 rows returned") {
		t.Fatalf("query --explain after the merge:\n%s", out)
	}
	if out := e.ok("delete", tbl, "--where", "id = 1"); !strings.Contains(out, "Deleted 1 row") {
		t.Fatalf("delete after the merge: %q", out)
	}
	var scan struct {
		Records   []walScanRecord `json:"records"`
		Published bool            `json:"published"`
	}
	if err := json.Unmarshal([]byte(e.ok("wal", "scan", tbl, "--json")), &scan); err != nil {
		t.Fatal(err)
	}
	if len(scan.Records) != 1 || !scan.Published || scan.Records[0].Sealed != 1 || scan.Records[0].Merged != 1 || scan.Records[0].Pending != 0 ||
		scan.Records[0].WriterEpoch != 1 || scan.Records[0].SealedBytes == 0 || scan.Records[0].FlushedAtMs == 0 {
		t.Fatalf("wal scan: %+v", scan)
	}
	// A second scan finds its own event joined already: it changes nothing.
	if err := json.Unmarshal([]byte(e.ok("wal", "scan", tbl, "--json")), &scan); err != nil {
		t.Fatal(err)
	}
	if len(scan.Records) != 1 || scan.Records[0].Changed {
		t.Fatalf("second wal scan: %+v", scan)
	}
	if out := e.ok("verify", tbl); !strings.Contains(out, "WAL: 1 shard") || !strings.Contains(out, "no faults") {
		t.Fatalf("verify:\n%s", out)
	}
	if out := e.ok("gc", tbl, "--grace", "0", "--no-writers"); !strings.Contains(out, "WAL shard 0: shard manifest version 2 (epoch 1") {
		t.Fatalf("gc:\n%s", out)
	}
}

// TestWALAppendWhoseFlushFailsLeavesTheRowsInTheLog: when the closing flush of wal append
// fails, the command says the acknowledged rows are durable; wal status counts them as log
// entries (their age exact: no generation is pending), queries read them, and the next
// append (a new writer epoch) replays and flushes them with its own rows: nothing is lost
// or doubled.
func TestWALAppendWhoseFlushFailsLeavesTheRowsInTheLog(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("walflush")
	e.ok("create", tbl, "--schema", "id:int64,name:string")
	r := e.runEnv([]string{"SHALE_FAILPOINTS=wal.flush_files=error(disk full)"}, "wal", "append", e.file("two.csv", "id,name\n2,b\n3,c\n"), "--table", tbl)
	if r.code != 1 || !strings.Contains(r.stderr, "all 2 rows are durable in WAL shard 0") || !strings.Contains(r.stderr, "disk full") {
		t.Fatalf("wal append with a failing flush: %v", r)
	}
	s := e.walStatus(tbl).Shards[0]
	if s.LogEntries != 1 || s.LogRows != 2 || s.PendingGenerations != 0 || s.BacklogRows != 2 || s.OldestUnmerged == nil || s.OldestIsLowerBound {
		t.Fatalf("wal status: %+v", s)
	}
	if out := e.ok("query", tbl, "--count"); !strings.HasPrefix(out, "2 rows") {
		t.Fatalf("query --count: %q", out)
	}
	if out := e.ok("wal", "append", e.file("one.csv", "id,name\n1,a\n"), "--table", tbl); !strings.Contains(out, "writer epoch 2") {
		t.Fatalf("second append: %q", out)
	}
	s = e.walStatus(tbl).Shards[0]
	if s.LogEntries != 0 || s.PendingGenerations != 1 || s.PendingGenerationRows != 3 || !s.OldestIsLowerBound {
		t.Fatalf("wal status after the replaying append: %+v", s)
	}
	e.ok("wal", "merge", tbl)
	if out := e.ok("query", tbl, "--format", "csv", "--columns", "id"); !sameLines(out, "id\n1\n2\n3\n") {
		t.Fatalf("rows after the merge: %q", out)
	}
}

// sameLines reports whether a and b hold the same lines, in any order.
func sameLines(a, b string) bool {
	la, lb := strings.Split(strings.TrimSpace(a), "\n"), strings.Split(strings.TrimSpace(b), "\n")
	if len(la) != len(lb) {
		return false
	}
	seen := map[string]int{}
	for _, l := range la {
		seen[l]++
	}
	for _, l := range lb {
		seen[l]--
		if seen[l] < 0 {
			return false
		}
	}
	return true
}

// TestWALAppendInterrupted: Ctrl-C while wal append's third entry is durable but not yet
// acknowledged: the command says how many rows were appended (durable, flushed before it
// exits) and that the batch in flight may be in the log; wal status shows that entry
// above the replay position, queries read it, and the next writer replays it once.
func TestWALAppendInterrupted(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("walint")
	e.ok("create", tbl, "--schema", "n:int64")
	big := e.bigCSV("big.csv", 200000) // 4 batches of up to 65,536 rows: 4 entries
	never := filepath.Join(e.dir, "never")
	r := e.interruptAt("wal.entry_durable=after(2)->block("+never+")",
		func() bool { return e.count(tbl+"/_wal/0/entries/*/*.arrows")() == 3 }, "wal", "append", big, "--table", tbl)
	if r.code != 1 || !strings.Contains(r.stderr, "interrupted: 131,072 rows appended to "+tbl) ||
		!strings.Contains(r.stderr, "the next 65,536 rows were being written when it stopped: they may be in the log") {
		t.Fatalf("interrupted wal append: %v", r)
	}
	s := e.walStatus(tbl).Shards[0]
	if s.PendingGenerationRows != 131072 || s.LogEntries != 1 || s.LogRows != 65536 {
		t.Fatalf("wal status after the interrupt: %+v", s)
	}
	if out := e.ok("query", tbl, "--count"); !strings.HasPrefix(out, "196,608 rows") {
		t.Fatalf("query --count: %q", out)
	}
	e.ok("wal", "append", e.file("one.csv", "n\n-1\n"), "--table", tbl)
	e.ok("wal", "merge", tbl)
	if out := e.ok("query", tbl, "--count"); !strings.HasPrefix(out, "196,609 rows") {
		t.Fatalf("query --count after the next writer replayed the entry: %q", out)
	}
}

// TestConcurrentFirstWALAppendsEnableTheWALIdempotently: three `shale wal append` on a
// table without a WAL, held at the commit point of their enabling (SHALE_FAILPOINTS:
// manifest.before_version_put blocks on a file) so that all three set
// shale.wal.shards=1 on the same read version, then released together. One enabling
// commits; the other two meet it as a retryable conflict on the same key, find the WAL
// enabled and append without failing (before: "retryable conflict … both set
// configuration keys [shale.wal.shards]").
func TestConcurrentFirstWALAppendsEnableTheWALIdempotently(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("walrace")
	e.ok("create", tbl, "--schema", "id:int64")
	records := e.txnRecords(tbl)
	gate := filepath.Join(e.dir, "go")
	const n = 3
	done := make(chan result, n)
	for i := range n {
		in := e.file(fmt.Sprintf("rows%d.csv", i), fmt.Sprintf("id\n%d\n%d\n", 2*i, 2*i+1))
		go func() {
			done <- e.runEnv([]string{"SHALE_FAILPOINTS=manifest.before_version_put=block(" + gate + ")"}, "wal", "append", in, "--table", tbl)
		}()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for e.txnRecords(tbl) < records+n { // each has written its transaction record: it is at its commit point
		if time.Now().After(deadline) {
			t.Fatalf("the appends never all reached their commit point (%d records)", e.txnRecords(tbl))
		}
		time.Sleep(10 * time.Millisecond) // polling the store directory
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	enabled := 0
	for range n {
		r := <-done
		if strings.Contains(r.stderr, "both set configuration keys") || strings.Contains(r.stderr, "enable the WAL") {
			t.Fatalf("a concurrent first wal append failed enabling the WAL: %v", r)
		}
		// Opening the shard fences its current writer: an append may lose the shard to
		// another (its acknowledged rows stay, the new writer flushes them). That is
		// wal append's documented concurrency, not the enabling under test.
		if r.code != 0 && !strings.Contains(r.stderr, "another writer opened WAL shard 0") {
			t.Fatalf("wal append: %v", r)
		}
		if strings.Contains(r.stderr, "had no WAL: enabled one shard") {
			enabled++
		}
	}
	if enabled != 1 {
		t.Fatalf("%d appends say they enabled the WAL, want 1", enabled)
	}
	if st := e.walStatus(tbl); len(st.Shards) != 1 {
		t.Fatalf("wal status: %+v", st)
	}
}

// TestWALAppendTakenOverSaysWhereItsRowsAre: a wal append (A) whose closing flush is held
// (wal.flush_files) loses its shard to a second append (B), held after fencing A
// (wal.fenced), so that A's rows are flushed later by B's epoch, in generation 2. A,
// released first, does not claim "flushed through generation 1" (the shard's sealed
// generation, which does not hold its rows): it says they are not flushed yet and which
// writer epoch flushes them; B then flushes them with its own in generation 2.
func TestWALAppendTakenOverSaysWhereItsRowsAre(t *testing.T) {
	e := sharedEnv(t)
	tbl := e.table("waltake")
	e.ok("create", tbl, "--schema", "id:int64")
	if r := e.run("wal", "append", e.file("r0.csv", "id\n0\n"), "--table", tbl); r.code != 0 || !strings.Contains(r.stdout, "flushed as generation 1,") {
		t.Fatalf("first wal append: %v", r)
	}
	gateA, gateB := filepath.Join(e.dir, "goA"), filepath.Join(e.dir, "goB")
	doneA, doneB := make(chan result, 1), make(chan result, 1)
	go func() {
		doneA <- e.runEnv([]string{"SHALE_FAILPOINTS=wal.flush_files=block(" + gateA + ")"}, "wal", "append", e.file("a.csv", "id\n1\n2\n"), "--table", tbl, "--json")
	}()
	shardDir := filepath.Join(e.home, "store", tbl, "_wal", "0")
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond) // polling the store directory
		}
	}
	waitUntil("A's flush to write its generation's files", func() bool {
		gens, _ := filepath.Glob(filepath.Join(shardDir, "gen-*"))
		return len(gens) >= 2
	})
	go func() {
		doneB <- e.runEnv([]string{"SHALE_FAILPOINTS=wal.fenced=block(" + gateB + ")"}, "wal", "append", e.file("b.csv", "id\n3\n"), "--table", tbl, "--json")
	}()
	waitUntil("B to take the shard over", func() bool {
		st := e.walStatus(tbl)
		return len(st.Shards) == 1 && st.Shards[0].Epoch == 3
	})
	if err := os.WriteFile(gateA, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rA := <-doneA
	var a walAppendResult
	if err := json.Unmarshal([]byte(rA.stdout), &a); rA.code != 0 || err != nil {
		t.Fatalf("append A: %v (%v)", rA, err)
	}
	if a.Epoch != 2 || a.Rows != 2 || !a.Unflushed || a.ShardEpoch != 3 || a.LastGeneration != 0 {
		t.Fatalf("append A reports %+v, want its 2 rows unflushed, the shard taken over by epoch 3", a)
	}
	if err := os.WriteFile(gateB, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rB := <-doneB
	if rB.code != 0 {
		t.Fatalf("append B: %v", rB)
	}
	st := e.walStatus(tbl)
	if s := st.Shards[0]; s.Sealed != 2 || s.PendingGenerationRows != 4 || s.LogEntries != 0 {
		t.Fatalf("wal status after both: %+v (want A's and B's rows in generation 2)", s)
	}
	// The sentence A would print, for the record of its wording.
	if got := a.whereFlushed(); !strings.Contains(got, "not flushed yet: writer epoch 3, which took the shard over, flushes them") {
		t.Fatalf("A's summary: %q", got)
	}
}
