package compaction

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// TestRewriteReadAhead: a group's reader runs ahead of its writer, in table order, with
// at most readAhead batches between them, and every batch in flight is released when
// either side fails.
//
// One group of 11 fragments of 1,000 rows (with deleted rows) is rewritten into files of
// 1,000 rows. The store (a real local store, wrapped) holds the first new data file's Put
// until the reader has asked for the data file of fragment 4: only a reader that runs
// ahead gets there (fragments 2 and 3 then wait in the channel), so a synchronous rewrite
// fails the test at the gate's deadline. Then:
//   - ok: the Put proceeds; rows come out in table order and no batch stays allocated.
//   - put fails: the Put fails; Run returns its error, commits nothing, and the batches
//     in flight are released.
//   - input missing: fragment 4's data file is gone; Run returns ErrNotFound naming
//     table, version and key, commits nothing, and the batches in flight (written or
//     not) are released.
func TestRewriteReadAhead(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, storetest.Local(t))
	schema, batches := intBatches(12, 1000)
	// What fragment.OpenFile leaves allocated per file opened (0 since its schema message
	// buffer is released; internal/fragment pins that), so that "released" below means
	// nothing but that.
	perOpen := func() int {
		tbl := appendEach(t, db, "probe", schema, batches[:1])
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		rd, err := fragment.OpenFile(ctx, db.Store(), tbl.Manifest().Fragments[0].Files[0], mem)
		if err != nil {
			t.Fatal(err)
		}
		rd.Close()
		return mem.CurrentAlloc()
	}()

	// build makes table name: 12 appended fragments, then a delete that removes
	// fragment 3 whole and every 7th row of the others (11 fragments, one group).
	build := func(name string) (*engine.Table, []string) {
		tbl := appendEach(t, db, name, schema, batches)
		if _, err := tbl.Delete(ctx, "id >= 3000 AND id < 4000 OR id % 7 = 0"); err != nil {
			t.Fatal(err)
		}
		return tbl, rowsOf(t, tbl)
	}
	run := func(t *testing.T, tbl *engine.Table, putErr error) (Stats, error) {
		t.Helper()
		fs := tbl.Manifest().Fragments
		gs := &gatedStore{Store: db.Store(), table: tbl.Name(), gateKey: fs[4].Files[0].Key, putErr: putErr,
			opened: make(chan struct{})}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		ex := New(db)
		ex.Store = gs
		ex.Allocator = mem // the reader's: decoded and filtered batches, those in flight
		ex.Write.Allocator = memory.DefaultAllocator
		ex.Write.MaxRowsPerFile = 1000
		st, err := ex.Run(ctx, tbl.Name(), Options{TargetRows: 100_000})
		if gs.timedOut.Load() {
			t.Fatalf("the first data file's Put waited 10 s and the reader never asked for %s: it does not read ahead", gs.gateKey)
		}
		if gs.puts.Load() == 0 {
			t.Fatal("no data file was put: the gate was not exercised")
		}
		if n := mem.CurrentAlloc(); n > len(fs)*perOpen {
			t.Fatalf("%d bytes of Arrow memory still allocated after Run, more than %d (%d per data file opened): a batch was not released",
				n, len(fs)*perOpen, perOpen)
		}
		return st, err
	}

	t.Run("ok", func(t *testing.T) {
		tbl, want := build("ok")
		st, err := run(t, tbl, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.Groups != 1 || st.FragmentsBefore != 11 || st.FragmentsRemoved != 11 || st.RowsRewritten != int64(len(want)) || st.RowsRewritten+st.RowsDropped != 11_000 {
			t.Fatalf("stats %+v, want 11 fragments in one group, %d live rows", st, len(want))
		}
		if st.FragmentsAdded != (len(want)+999)/1000 {
			t.Fatalf("%d fragments added, want %d of up to 1,000 rows", st.FragmentsAdded, (len(want)+999)/1000)
		}
		equalRows(t, "after compaction", rowsOf(t, openAt(t, db, "ok", st.Version)), want)
	})

	t.Run("put fails", func(t *testing.T) {
		tbl, want := build("putfail")
		errPut := errors.New("injected put failure")
		st, err := run(t, tbl, errPut)
		if !errors.Is(err, errPut) || !strings.Contains(err.Error(), `table "putfail"`) {
			t.Fatalf("Run = %+v, %v; want the Put's error naming the table", st, err)
		}
		equalRows(t, "after the failed compaction", rowsOf(t, openAt(t, db, "putfail", tbl.Version())), want)
	})

	t.Run("input missing", func(t *testing.T) {
		tbl, _ := build("missing")
		key := tbl.Manifest().Fragments[4].Files[0].Key
		if err := db.Store().Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		_, err := run(t, tbl, nil)
		var oe *manifest.ObjectError
		if !errors.Is(err, store.ErrNotFound) || !errors.As(err, &oe) || oe.Key != key || oe.Table != "missing" || oe.Version != tbl.Version() {
			t.Fatalf("Run: %v; want ErrNotFound in an ObjectError naming table, version %d and %s", err, tbl.Version(), key)
		}
		openAt(t, db, "missing", tbl.Version()) // not scanned: one of its data files is gone
	})
}

// gatedStore is a real store whose Puts of table's data files wait (up to 10 s) until
// gateKey has been read, then fail with putErr (when set) or go through.
type gatedStore struct {
	store.Store
	table   string
	gateKey string
	putErr  error

	once     sync.Once
	opened   chan struct{} // closed at the first read of gateKey
	puts     atomic.Int64
	timedOut atomic.Bool
}

func (s *gatedStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if key == s.gateKey {
		s.once.Do(func() { close(s.opened) })
	}
	return s.Store.GetRange(ctx, key, off, n)
}

func (s *gatedStore) Put(ctx context.Context, key string, data []byte) error {
	if !strings.HasPrefix(key, s.table+"/data/") {
		return s.Store.Put(ctx, key, data)
	}
	s.puts.Add(1)
	select {
	case <-s.opened:
	case <-time.After(10 * time.Second):
		s.timedOut.Store(true)
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.putErr != nil {
		return s.putErr
	}
	return s.Store.Put(ctx, key, data)
}

// openAt opens table at its published version, failing the test unless that is version v.
func openAt(t *testing.T, db *engine.DB, table string, v uint64) *engine.Table {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	if tbl.Version() != v {
		t.Fatalf("table %q is at version %d, want %d", table, tbl.Version(), v)
	}
	return tbl
}
