package servetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/verify"
	"github.com/shale-db/shale/wal"
)

// env is one test's store, catalog prefix, DB of the parent and directory of journals.
type env struct {
	s      store.Store
	prefix string
	db     *engine.DB
	dir    string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := storetest.Local(t)
	prefix := "/servetest/" + t.Name()
	return &env{s: s, prefix: prefix, db: enginetest.OpenDB(t, s, dbOptions(s, prefix)), dir: t.TempDir()}
}

// ledger is what the writers' journals say about one table's rows.
type ledger struct {
	attempted map[int64]bool
	acked     map[int64]bool
}

// readLedgers reads the journals of names in dir, by table.
func readLedgers(dir string, names ...string) (map[string]*ledger, error) {
	out := map[string]*ledger{}
	get := func(table string) *ledger {
		if out[table] == nil {
			out[table] = &ledger{attempted: map[int64]bool{}, acked: map[int64]bool{}}
		}
		return out[table]
	}
	for _, name := range names {
		lines, err := readLines(journalPath(dir, name))
		if err != nil {
			return nil, err
		}
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) < 4 || (f[0] != "T" && f[0] != "A") {
				continue
			}
			first, err1 := strconv.ParseInt(f[2], 10, 64)
			n, err2 := strconv.ParseInt(f[3], 10, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("journal %s: bad line %q", name, line)
			}
			l := get(f[1])
			m := l.attempted
			if f[0] == "A" {
				m = l.acked
			}
			for id := first; id < first+n; id++ {
				m[id] = true
			}
		}
	}
	return out, nil
}

// add records rows the parent appended itself (acknowledged).
func (l *ledger) add(from, n int64) {
	for id := from; id < from+n; id++ {
		l.attempted[id], l.acked[id] = true, true
	}
}

// scanIDs reads the ids of every row at the table's published version, WAL included,
// retrying a read that met a merge and a flush moving under it.
func scanIDs(ctx context.Context, db *engine.DB, table string) ([]int64, error) {
	for retries := 0; ; retries++ {
		ids, err := scanOnce(ctx, db, table)
		if err == nil || !(errors.Is(err, engine.ErrWALAhead) || errors.Is(err, wal.ErrBusy)) || retries >= 50 {
			return ids, err
		}
	}
}

func scanOnce(ctx context.Context, db *engine.DB, table string) ([]int64, error) {
	tbl, err := db.OpenTable(ctx, table)
	if err != nil {
		return nil, err
	}
	sc, err := tbl.Scan(ctx, engine.ScanOptions{Columns: []string{"id"}})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	var out []int64
	for sc.Next() {
		out = append(out, sc.RecordBatch().Column(0).(*array.Int64).Int64Values()...)
	}
	return out, sc.Err()
}

// checkOnce checks the table's rows against the ledger: no id twice, every acknowledged
// id present, no id nobody appended. It returns the count of rows present but never
// acknowledged.
func checkOnce(t *testing.T, db *engine.DB, table string, l *ledger) (rows, unacked int) {
	t.Helper()
	ids, err := scanIDs(context.Background(), db, table)
	if err != nil {
		t.Fatalf("scan %s: %v", table, err)
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("table %s: row %d is present twice", table, id)
		}
		seen[id] = true
		if !l.attempted[id] {
			t.Fatalf("table %s: row %d is present but was never appended", table, id)
		}
		if !l.acked[id] {
			unacked++
		}
	}
	var lost []int64
	for id := range l.acked {
		if !seen[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		t.Fatalf("table %s: %d acknowledged rows are missing (first %v)", table, len(lost), lost[:min(len(lost), 10)])
	}
	return len(ids), unacked
}

// checkVerify: verify finds no fault in any version of table.
func checkVerify(t *testing.T, db *engine.DB, table string) {
	t.Helper()
	vr, err := verify.Table(context.Background(), db.Store(), db.Catalog(), table, verify.Options{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if !vr.OK() {
		t.Fatalf("verify %s: %v", table, vr.Err())
	}
}

// checkWatermarks checks that no WAL generation was merged twice: along the table's
// versions, each shard's merged watermark never moves back, so every merge took
// generations above the last one merged. It returns the number of versions that
// advanced a watermark (merge commits).
func checkWatermarks(t *testing.T, db *engine.DB, table string) int {
	t.Helper()
	ctx := context.Background()
	vs, err := manifest.Versions(ctx, db.Store(), table)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(vs)
	last := map[string]uint64{}
	merges := 0
	for _, v := range vs {
		m, err := manifest.Load(ctx, db.Store(), table, v)
		if err != nil {
			t.Fatalf("table %s v%d: %v", table, v, err)
		}
		advanced := false
		for sh, w := range m.WALMerged {
			if w < last[sh] {
				t.Fatalf("table %s v%d: shard %v merged watermark %d, below %d of an earlier version: generations merged twice", table, v, sh, w, last[sh])
			}
			if w > last[sh] {
				advanced = true
			}
			last[sh] = w
		}
		for sh := range last {
			if _, ok := m.WALMerged[sh]; !ok && last[sh] > 0 {
				t.Fatalf("table %s v%d: shard %v's merged watermark %d is gone", table, v, sh, last[sh])
			}
		}
		if advanced {
			merges++
		}
	}
	return merges
}

// pointerWatch records every value the table's published pointer took in etcd, from the
// revision the watch starts at.
type pointerWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	vs     []uint64
	err    error
}

func watchPointer(t *testing.T, db *engine.DB, table string) *pointerWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cli := db.Options().Etcd
	p, rev, err := db.Catalog().Get(ctx, table)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w := &pointerWatch{cancel: cancel, done: make(chan struct{}), vs: []uint64{p.Version}}
	ch := cli.Watch(ctx, db.Catalog().Key(table), clientv3.WithRev(rev+1))
	go func() {
		defer close(w.done)
		for resp := range ch {
			for _, ev := range resp.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				p, err := catalog.DecodePointer(ev.Kv.Value)
				if err != nil {
					w.err = err
					continue
				}
				w.vs = append(w.vs, p.Version)
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *pointerWatch) stop() { w.cancel(); <-w.done }

// check stops the watch and checks the pointer only moved forward.
func (w *pointerWatch) check(t *testing.T, table string) {
	t.Helper()
	w.stop()
	if w.err != nil {
		t.Fatal(w.err)
	}
	for i := 1; i < len(w.vs); i++ {
		if w.vs[i] < w.vs[i-1] {
			t.Fatalf("table %s: the published pointer moved back from v%d to v%d (%v)", table, w.vs[i-1], w.vs[i], w.vs)
		}
	}
}

// logEntry is one JSON line of a serve child's log.
type logEntry struct {
	Time       time.Time `json:"time"`
	Msg        string    `json:"msg"`
	Table      string    `json:"table"`
	Kind       string    `json:"kind"`
	Assignment string    `json:"assignment"`
	Phase      string    `json:"phase"`
	Err        string    `json:"err"`
}

// execution is one assignment a serve child ran: from its bind to its end (zero End:
// the log has no end; the process died or runs).
type execution struct {
	Proc       string
	Assignment string
	Table      string
	Kind       plan.Kind
	Start, End time.Time
	Phase      string // admin.PhaseSucceeded, …; "" without an end
	Err        string
}

// readExecutions reads the executions a serve child's log records; those without an end
// end at ended (the process's death), when given.
func readExecutions(dir, name string, ended time.Time) ([]execution, []logEntry, error) {
	lines, err := readLines(logPath(dir, name))
	if err != nil {
		return nil, nil, err
	}
	var out []execution
	var all []logEntry
	open := map[string]int{}
	for _, line := range lines {
		var e logEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, nil, fmt.Errorf("log %s: %q: %w", name, line, err)
		}
		all = append(all, e)
		switch e.Msg {
		case "serve: bound":
			open[e.Assignment] = len(out)
			out = append(out, execution{Proc: name, Assignment: e.Assignment, Table: e.Table, Kind: plan.Kind(e.Kind), Start: e.Time})
		case "serve: execution succeeded", "serve: execution ended":
			i, ok := open[e.Assignment]
			if !ok {
				return nil, nil, fmt.Errorf("log %s: an end of assignment %s never bound", name, e.Assignment)
			}
			delete(open, e.Assignment)
			out[i].End, out[i].Err = e.Time, e.Err
			out[i].Phase = e.Phase
			if e.Msg == "serve: execution succeeded" {
				out[i].Phase = admin.PhaseSucceeded
			}
		}
	}
	for _, i := range open {
		out[i].End = ended
	}
	return out, all, nil
}

// checkNoOverlap checks that no two executions of one table's write turn overlapped in
// time (each execution's interval is from its bind's log line to its end's: inside the
// real one, so an overlap found is real). An execution with no end fails the check.
func checkNoOverlap(t *testing.T, execs []execution) {
	t.Helper()
	by := map[string][]execution{}
	for _, e := range execs {
		if plan.TakesWriteTurn(e.Kind) {
			by[e.Table] = append(by[e.Table], e)
		}
	}
	for table, es := range by {
		slices.SortFunc(es, func(a, b execution) int { return a.Start.Compare(b.Start) })
		for i, e := range es {
			if e.End.IsZero() {
				t.Fatalf("table %s: execution %+v never ended", table, e)
			}
			if i > 0 && e.Start.Before(es[i-1].End) {
				t.Fatalf("table %s: write-turn executions overlapped:\n  %+v\n  %+v", table, es[i-1], e)
			}
		}
	}
}

// quiet reports whether nothing is left to do on table: no assignment, no pending
// generation or sidecar, and a planning pass would place nothing because there is no
// work (or only tail work).
func quiet(ctx context.Context, db *engine.DB, table string) (admin.TableReport, bool) {
	rep, err := serve.Explain(ctx, db, table)
	if err != nil {
		return rep, false
	}
	// Next "" for want of capacity elsewhere (no_capacity, a slot busy) is not quiet.
	idle := rep.Reason == string(plan.SkipNoWork) || rep.Reason == string(plan.SkipBelowThreshold)
	return rep, rep.Next == "" && idle && len(rep.Assignments) == 0 && rep.State.PendingGenerations == 0 &&
		rep.State.PendingSidecars == 0 && rep.State.Drift == 0
}

// checkWithinPolicy checks a quiet table's picture against its policy.
func checkWithinPolicy(t *testing.T, rep admin.TableReport) {
	t.Helper()
	st, p := rep.State, rep.Policy
	if st.PendingGenerations >= max(p.MinGenerations, 1) || st.SmallFragments >= p.MinSmallFragments ||
		st.UncoveredByIndex >= p.MinUncovered || st.PendingSidecars > 0 || st.Drift > 0 {
		t.Fatalf("table %s not within policy after the quiet period: state %+v, policy %+v", rep.Table, st, p)
	}
}

// pendingSidecars is the count of table's recovery sidecars.
func pendingSidecars(t *testing.T, db *engine.DB, table string) int {
	t.Helper()
	keys, err := recovery.Pending(context.Background(), db.Store(), table)
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

// quietLog discards a server's log.
func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// storeLocal is a fresh local-disk store.
func storeLocal(t *testing.T) store.Store { return storetest.Local(t) }
