package gc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// childEnv selects what the re-executed test binary does: "gc" (one Run of TABLE with
// KEEP_LAST and no grace) or "compact" (one compaction of TABLE; SIDECARS=1 turns on
// recovery sidecars; with MARK and GO set it creates MARK once every data file is
// written and waits for GO before committing).
const childEnv = "SHALE_GC_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if err := child(mode); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	enginetest.Main(m)
}

func child(mode string) error {
	ctx := context.Background()
	db, closeDB, err := enginetest.OpenChildDB(ctx, engine.Options{})
	if err != nil {
		return err
	}
	defer closeDB()
	s := db.Store()
	table := os.Getenv("TABLE")
	switch mode {
	case "gc":
		keep, _ := strconv.Atoi(os.Getenv("KEEP_LAST"))
		_, err := Run(ctx, s, db.Catalog(), table, Policy{KeepLast: keep, GracePeriod: -1})
		return err
	case "compact":
		e := compaction.New(db)
		if os.Getenv("SIDECARS") == "1" {
			recovery.Enable(e)
		}
		if mark, goFile := os.Getenv("MARK"), os.Getenv("GO"); mark != "" {
			e.Hooks.BeforeCommit = func(ctx context.Context, p *compaction.Plan) error {
				if err := os.WriteFile(mark, []byte(strconv.FormatUint(p.ReadVersion, 10)), 0o644); err != nil {
					return err
				}
				return waitFile(ctx, goFile, 60*time.Second)
			}
		}
		st, err := e.Run(ctx, table, compaction.Options{TargetRows: 1000})
		if err != nil {
			return err
		}
		if st.Version == 0 {
			return errors.New("nothing compacted")
		}
		return nil
	}
	return fmt.Errorf("unknown child mode %q", mode)
}

func waitFile(ctx context.Context, path string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %s", path, d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func openDB(t testing.TB, s store.Store) *engine.DB {
	return enginetest.OpenDB(t, s, engine.Options{})
}

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// makeTable creates name with n appends of rows rows each (ids from 0): n small fragments.
func makeTable(t testing.TB, db *engine.DB, name string, n, rows int) *engine.Table {
	t.Helper()
	tbl, err := db.CreateTable(context.Background(), name, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		appendRows(t, tbl, int64(i*rows), rows)
	}
	return tbl
}

func appendRows(t testing.TB, tbl *engine.Table, from int64, rows int) {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for id := from; id < from+int64(rows); id++ {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row-%d", id))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if _, err := tbl.AppendRecord(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// scanRows returns tbl's rows at its version, sorted, one string per row.
func scanRows(t testing.TB, tbl *engine.Table) []string {
	t.Helper()
	out := enginetest.Rows(t, tbl)
	slices.Sort(out)
	return out
}

// rowsAt scans table at version v.
func rowsAt(t testing.TB, db *engine.DB, table string, v uint64) []string {
	t.Helper()
	tbl, err := db.OpenTableAt(context.Background(), table, v)
	if err != nil {
		t.Fatalf("open %s at v%d: %v", table, v, err)
	}
	return scanRows(t, tbl)
}

// allRows maps every version present to its rows.
func allRows(t testing.TB, db *engine.DB, table string) map[uint64][]string {
	t.Helper()
	vs, err := manifest.Versions(context.Background(), db.Store(), table)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64][]string{}
	for _, v := range vs {
		if _, err := manifest.Load(context.Background(), db.Store(), table, v); errors.Is(err, manifest.ErrVersionExpired) {
			continue
		}
		out[v] = rowsAt(t, db, table, v)
	}
	return out
}

func root(t testing.TB, s store.Store) string {
	t.Helper()
	r, ok := s.(interface{ Root() string })
	if !ok {
		t.Fatalf("%s is not a local store", s.URL())
	}
	return r.Root()
}

// diskFiles walks the store directory: every regular file's key (relative path) and size.
func diskFiles(t testing.TB, s store.Store) map[string]int64 {
	t.Helper()
	dir := root(t, s)
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// age sets the modification time of every file in the store directory to d ago.
func age(t testing.TB, s store.Store, d time.Duration) {
	t.Helper()
	when := time.Now().Add(-d)
	for key := range diskFiles(t, s) {
		if err := os.Chtimes(filepath.Join(root(t, s), filepath.FromSlash(key)), when, when); err != nil {
			t.Fatal(err)
		}
	}
}

// plant writes a file at key in the store directory with its modification time d ago.
func plant(t testing.TB, s store.Store, key string, size int, d time.Duration) {
	t.Helper()
	p := filepath.Join(root(t, s), filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	when := time.Now().Add(-d)
	if err := os.Chtimes(p, when, when); err != nil {
		t.Fatal(err)
	}
}

// needed is the precise set of objects a table's retained versions need, with sizes:
// every retained version's manifest and its transaction record, every data file,
// deletion vector and index file they name, each expired version's tombstone (about 60
// bytes, kept so that its number is never reused), plus the store's fixed objects
// (_shale/…: the store id). Everything else on disk is garbage or young.
func needed(t testing.TB, s store.Store, tables ...string) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	disk := diskFiles(t, s)
	out := map[string]int64{}
	add := func(key string) {
		size, ok := disk[key]
		if !ok {
			t.Fatalf("object %s is needed by a retained version but missing", key)
		}
		out[key] = size
	}
	for key := range disk {
		if strings.HasPrefix(key, "_shale/") {
			add(key)
		}
	}
	for _, table := range tables {
		vs, err := manifest.Versions(ctx, s, table)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			m, err := manifest.Load(ctx, s, table, v)
			if errors.Is(err, manifest.ErrVersionExpired) {
				add(manifest.ManifestKey(table, v)) // its tombstone
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			add(m.Key())
			add(m.TxnKey)
			files := map[string]bool{}
			references(m, files)
			for k := range files {
				add(k)
			}
		}
	}
	return out
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// checkDiskIsNeeded asserts that the store directory holds exactly the needed objects
// plus the keys in young (files younger than the grace period).
func checkDiskIsNeeded(t testing.TB, s store.Store, young []string, tables ...string) {
	t.Helper()
	disk := diskFiles(t, s)
	want := needed(t, s, tables...)
	for _, k := range young {
		size, ok := disk[k]
		if !ok {
			t.Fatalf("young file %s was deleted", k)
		}
		want[k] = size
	}
	for k := range disk {
		if _, ok := want[k]; !ok {
			t.Errorf("on disk but neither needed nor young: %s (%d bytes)", k, disk[k])
		}
	}
	if got, w := sum(disk), sum(want); got != w {
		t.Fatalf("bytes on disk %d, want %d (needed + young)", got, w)
	}
}
