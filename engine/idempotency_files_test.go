package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/manifest"
)

// dataFiles lists the keys under table's data directory.
func dataFiles(t *testing.T, db *DB, table string) []string {
	t.Helper()
	objs, err := db.Store().List(context.Background(), manifest.DataDir(table)+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	return keys
}

// hookReader is a reader of one record that calls before the first time Next is called.
type hookReader struct {
	array.RecordReader
	before func()
	nexts  int
}

func (r *hookReader) Next() bool {
	if r.nexts++; r.nexts == 1 && r.before != nil {
		r.before()
	}
	return r.RecordReader.Next()
}

func oneRecordReader(t *testing.T, rec arrow.RecordBatch) array.RecordReader {
	t.Helper()
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}

// TestKeyedRerunReadsAndWritesNothing: a keyed write run again after it committed (an
// import run twice) finds its key in HEAD before it begins: it returns the Duplicate
// without reading its input, and writes no data file.
func TestKeyedRerunReadsAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "rerun", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	rec := kvBatch(0, 5)
	defer rec.Release()
	first, err := tbl.Append(ctx, oneRecordReader(t, rec), WithIdempotencyKey("file-1"))
	if err != nil || first.Duplicate {
		t.Fatalf("first run: %+v %v", first, err)
	}
	before := dataFiles(t, db, "rerun")
	for _, overwrite := range []bool{false, true} {
		rdr := &hookReader{RecordReader: oneRecordReader(t, rec)}
		var res CommitResult
		if overwrite {
			res, err = mustOpen(t, db, "rerun").Overwrite(ctx, rdr, WithIdempotencyKey("file-1"))
		} else {
			res, err = mustOpen(t, db, "rerun").Append(ctx, rdr, WithIdempotencyKey("file-1"))
		}
		if err != nil || !res.Duplicate || res.Version != first.Version || res.Rows != 0 {
			t.Fatalf("run again (overwrite %v): %+v %v; want the duplicate of v%d, no rows read", overwrite, res, err, first.Version)
		}
		if rdr.nexts != 0 {
			t.Errorf("run again (overwrite %v): the input was read (%d Next calls)", overwrite, rdr.nexts)
		}
		if after := dataFiles(t, db, "rerun"); !slices.Equal(after, before) {
			t.Errorf("run again (overwrite %v): data files %v, want only the first run's %v", overwrite, after, before)
		}
	}
	if got := ids(t, mustOpen(t, db, "rerun"), ""); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("rows %v, want the first run's once", got)
	}
}

// TestKeyedDuplicateAtCommitDeletesItsFiles: when the key commits while the write is
// writing (two runs of the same import at once), the commit loop finds it; the loser's
// transaction is decided (it never commits), and the data files it wrote are deleted, so
// a Duplicate leaves nothing behind.
func TestKeyedDuplicateAtCommitDeletesItsFiles(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "race", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 2)
	base := dataFiles(t, db, "race")
	rec := kvBatch(10, 15)
	defer rec.Release()
	var winner CommitResult
	rdr := &hookReader{RecordReader: oneRecordReader(t, rec), before: func() {
		// The other run commits the key after this run's check, before its files exist.
		var err error
		if winner, err = mustOpen(t, db, "race").Append(ctx, oneRecordReader(t, rec), WithIdempotencyKey("file-2")); err != nil {
			t.Errorf("the other run: %v", err)
		}
	}}
	res, err := tbl.Append(ctx, rdr, WithIdempotencyKey("file-2"))
	if err != nil || !res.Duplicate || res.Version != winner.Version || rdr.nexts == 0 {
		t.Fatalf("the loser: %+v %v (read %d times); want the duplicate of v%d found at commit", res, err, rdr.nexts, winner.Version)
	}
	var added []string
	for _, k := range dataFiles(t, db, "race") {
		if !slices.Contains(base, k) {
			added = append(added, k)
		}
	}
	dirs := map[string]bool{}
	for _, k := range added {
		dir, _, _ := strings.Cut(strings.TrimPrefix(k, manifest.DataDir("race")+"/"), "/")
		dirs[dir] = true
	}
	if len(dirs) != 1 {
		t.Fatalf("data files added %v: want the winner's transaction's alone", added)
	}
	if got := ids(t, mustOpen(t, db, "race"), ""); !slices.Equal(got, []int64{0, 1, 10, 11, 12, 13, 14}) {
		t.Fatalf("rows %v, want the batch once", got)
	}
}
