package compaction_test

// The flights-3m acceptance test lives in the external test package because it compacts
// with recovery sidecars, and recovery imports compaction. The package's TestMain
// (enginetest.Main, one embedded etcd) serves it too.

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/verify"
)

const (
	flightsAppends    = 300
	flightsAppendRows = 10_000
	// flightsSampleEvery: versions whose every column is hashed (besides the first and the
	// last); aggregates are compared at every version.
	flightsSampleEvery = 25
)

// flightsFilters are the filtered queries compared at HEAD before and after compaction.
var flightsFilters = []string{
	"origin = 'SFO'",
	"delay BETWEEN 30 AND 60",
	"origin = 'ORD' AND delay > 120",
	"date BETWEEN '2001-03-01' AND '2001-03-07 23:59:59'",
}

// TestFlights3MCompaction (SHALE_SLOW=1) imports testdata/flights-3m.parquet as 300
// appends of 10,000 rows (versions 2..301 after CreateTable's version 1), compacts with
// recovery sidecars and the default options (target 1,048,576 rows per fragment), and
// checks:
//
//   - at most 4 fragments at HEAD, the compaction published, no sidecar left, and
//     verify.Table (every version) finds no fault;
//   - at EVERY version 1..301, after compaction exactly as before: the live row count
//     (manifest), and from a scan of delay and distance the row count, the sums of delay
//     and of distance and their null counts;
//   - at versions 1, 2, every 25th and 301, after compaction exactly as before: a full-row
//     digest over all five columns (row count, an order-independent sum and an
//     order-dependent chain of per-row hashes, nulls distinguished);
//   - the new HEAD (302) has exactly version 301's aggregates and full-row digest
//     (compaction keeps row order, so the order-dependent chain must match too);
//   - each of flightsFilters at HEAD: the same count and full-row digest at 302 as at 301
//     before compaction.
//
// It logs the time of each phase.
func TestFlights3MCompaction(t *testing.T) {
	if os.Getenv("SHALE_SLOW") != "1" {
		t.Skip("SHALE_SLOW=1 runs the flights-3m compaction test (3M rows in 300 appends; about a minute or two)")
	}
	path := flights3mPath()
	if path == "" {
		t.Skip("testdata/flights-3m.parquet not found")
	}
	ctx := context.Background()
	start := time.Now()
	phase := func(what string, t0 time.Time) { t.Logf("%-58s %8v", what, time.Since(t0).Round(time.Millisecond)) }

	t0 := time.Now()
	schema, batches := readFixed(t, path, flightsAppendRows)
	if len(batches) != flightsAppends {
		t.Fatalf("read %d batches of %d rows, want %d", len(batches), flightsAppendRows, flightsAppends)
	}
	phase("read parquet into 300 batches (untimed setup)", t0)

	store := storetest.Local(t)
	db := enginetest.OpenDB(t, store, engine.Options{})
	const name = "flights3m"
	t0 = time.Now()
	tbl, err := db.CreateTable(ctx, name, schema)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range batches {
		if _, err := tbl.AppendRecord(ctx, b); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	last := tbl.Version()
	if last != flightsAppends+1 || len(tbl.Manifest().Fragments) != flightsAppends {
		t.Fatalf("after import: version %d with %d fragments, want %d and %d", last, len(tbl.Manifest().Fragments), flightsAppends+1, flightsAppends)
	}
	phase("import: 300 appends of 10,000 rows", t0)

	sampled := func(v uint64) bool { return v <= 2 || v == last || v%flightsSampleEvery == 0 }
	t0 = time.Now()
	before := make(map[uint64]versionDigest, last)
	for v := uint64(1); v <= last; v++ {
		before[v] = digestAt(t, db, name, v, sampled(v))
	}
	phase("digests before: aggregates at 301 versions, all columns at 15", t0)
	if d := before[last]; d.Rows != 3_000_000 || d.Agg.Rows != 3_000_000 {
		t.Fatalf("version %d: %d rows (%d scanned), want 3,000,000", last, d.Rows, d.Agg.Rows)
	}
	t0 = time.Now()
	head := mustCheckout(t, db, name, last)
	filtersBefore := make([]rowDigest, len(flightsFilters))
	for i, f := range flightsFilters {
		filtersBefore[i] = scanDigest(t, head, engine.ScanOptions{Filter: f})
		if filtersBefore[i].Rows == 0 {
			t.Fatalf("filter %q matches no row: the comparison would prove nothing", f)
		}
	}
	phase("filtered queries before", t0)

	t0 = time.Now()
	ex := recovery.Enable(compaction.New(db))
	st, err := ex.Run(ctx, name, compaction.Options{})
	if err != nil {
		t.Fatalf("compaction: %v (stats %+v)", err, st)
	}
	elapsed := time.Since(t0)
	phase("compaction (sidecars, default options)", t0)
	t.Logf("compaction: %d -> %d fragments in %d groups, %d rows rewritten, %.1f MB read, %.1f MB written, %.2f M rows/s",
		st.FragmentsBefore, st.FragmentsAfter, st.Groups, st.RowsRewritten, float64(st.BytesRead)/1e6, float64(st.BytesWritten)/1e6,
		float64(st.RowsRewritten)/elapsed.Seconds()/1e6)
	if st.FragmentsAfter > 4 || st.FragmentsBefore != flightsAppends || st.Version != last+1 || !st.Published || st.RowsRewritten != 3_000_000 {
		t.Fatalf("compaction stats %+v: want 300 -> at most 4 fragments at version %d, published, 3,000,000 rows rewritten", st, last+1)
	}
	left, err := store.List(ctx, recovery.Dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d objects left under %s after a clean compaction, e.g. %s", len(left), recovery.Dir, left[0].Key)
	}
	now, err := db.OpenTable(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if now.Version() != last+1 || len(now.Manifest().Fragments) != st.FragmentsAfter {
		t.Fatalf("published HEAD: version %d with %d fragments, want %d with %d", now.Version(), len(now.Manifest().Fragments), last+1, st.FragmentsAfter)
	}

	t0 = time.Now()
	for v := uint64(1); v <= last; v++ {
		got := digestAt(t, db, name, v, sampled(v))
		if got != before[v] {
			t.Errorf("version %d changed by compaction:\n before %+v\n after  %+v", v, before[v], got)
		}
	}
	got := digestAt(t, db, name, last+1, true)
	if want := before[last]; got != want {
		t.Errorf("compacted version %d differs from version %d:\n want %+v\n got  %+v", last+1, last, want, got)
	}
	phase("digests after: 302 versions", t0)

	t0 = time.Now()
	for i, f := range flightsFilters {
		if got := scanDigest(t, now, engine.ScanOptions{Filter: f}); got != filtersBefore[i] {
			t.Errorf("WHERE %s: version %d %+v, version %d before compaction %+v", f, last+1, got, last, filtersBefore[i])
		}
		n, err := now.Count(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if n != filtersBefore[i].Rows {
			t.Errorf("Count(%q) = %d after compaction, want %d", f, n, filtersBefore[i].Rows)
		}
		t.Logf("WHERE %s: %d rows, same before and after", f, n)
	}
	phase("filtered queries after", t0)

	t0 = time.Now()
	rep, err := verify.Table(ctx, store, db.Catalog(), name, verify.Options{AllVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify after compaction: %v", rep.Err())
	}
	phase("verify (every version)", t0)
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}

// versionDigest is what the test compares at one version.
type versionDigest struct {
	Rows int64    // live rows from the manifest (Count(""))
	Agg  aggStats // from a scan of delay and distance
	Full rowDigest
}

type aggStats struct {
	Rows                      int64
	DelaySum, DistanceSum     int64
	DelayNulls, DistanceNulls int64
	DelayMin, DelayMax        int64
	DistanceMin, DistanceMax  int64
}

// rowDigest summarizes a set of rows: Count, Sum (order-independent: the sum of per-row
// hashes mod 2^64) and Chain (order-dependent).
type rowDigest struct {
	Rows       int64
	Sum, Chain uint64
}

var digestSeed = maphash.MakeSeed()

func digestAt(t *testing.T, db *engine.DB, name string, v uint64, full bool) versionDigest {
	t.Helper()
	tbl := mustCheckout(t, db, name, v)
	n, err := tbl.Count(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	d := versionDigest{Rows: n, Agg: aggregates(t, tbl)}
	if full {
		d.Full = scanDigest(t, tbl, engine.ScanOptions{})
		if d.Full.Rows != n {
			t.Fatalf("version %d: full scan returned %d rows, manifest says %d", v, d.Full.Rows, n)
		}
	}
	if d.Agg.Rows != n {
		t.Fatalf("version %d: scan of delay, distance returned %d rows, manifest says %d", v, d.Agg.Rows, n)
	}
	return d
}

func mustCheckout(t *testing.T, db *engine.DB, name string, v uint64) *engine.Table {
	t.Helper()
	tbl, err := db.OpenTable(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Checkout(context.Background(), v)
	if err != nil {
		t.Fatalf("checkout version %d: %v", v, err)
	}
	return at
}

func aggregates(t *testing.T, tbl *engine.Table) aggStats {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), engine.ScanOptions{Columns: []string{"delay", "distance"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var a aggStats
	seenDelay, seenDist := false, false
	for sc.Next() {
		rec := sc.RecordBatch()
		a.Rows += rec.NumRows()
		delay, dist := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			if delay.IsNull(i) {
				a.DelayNulls++
			} else {
				x := delay.Value(i)
				a.DelaySum += x
				if !seenDelay || x < a.DelayMin {
					a.DelayMin = x
				}
				if !seenDelay || x > a.DelayMax {
					a.DelayMax = x
				}
				seenDelay = true
			}
			if dist.IsNull(i) {
				a.DistanceNulls++
			} else {
				x := dist.Value(i)
				a.DistanceSum += x
				if !seenDist || x < a.DistanceMin {
					a.DistanceMin = x
				}
				if !seenDist || x > a.DistanceMax {
					a.DistanceMax = x
				}
				seenDist = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return a
}

// scanDigest hashes every returned row over every returned column (nulls distinguished
// from every value; strings length-prefixed).
func scanDigest(t *testing.T, tbl *engine.Table, opts engine.ScanOptions) rowDigest {
	t.Helper()
	sc, err := tbl.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Release()
	var d rowDigest
	var h maphash.Hash
	h.SetSeed(digestSeed)
	var buf [9]byte
	for sc.Next() {
		rec := sc.RecordBatch()
		cols := rec.Columns()
		for i := 0; i < int(rec.NumRows()); i++ {
			h.Reset()
			for _, c := range cols {
				if c.IsNull(i) {
					h.WriteByte(0)
					continue
				}
				switch a := c.(type) {
				case *array.Int64:
					buf[0] = 1
					binary.LittleEndian.PutUint64(buf[1:], uint64(a.Value(i)))
					h.Write(buf[:])
				case *array.Timestamp:
					buf[0] = 2
					binary.LittleEndian.PutUint64(buf[1:], uint64(a.Value(i)))
					h.Write(buf[:])
				case *array.LargeString:
					s := a.Value(i)
					buf[0] = 3
					binary.LittleEndian.PutUint64(buf[1:], uint64(len(s)))
					h.Write(buf[:])
					h.WriteString(s)
				case *array.String:
					s := a.Value(i)
					buf[0] = 3
					binary.LittleEndian.PutUint64(buf[1:], uint64(len(s)))
					h.Write(buf[:])
					h.WriteString(s)
				default:
					t.Fatalf("scanDigest: column type %s not handled", c.DataType())
				}
			}
			r := h.Sum64()
			d.Rows++
			d.Sum += r
			d.Chain = d.Chain*0x100000001b3 ^ r
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// flights3mPath finds the bundled flights data.
func flights3mPath() string {
	for _, p := range []string{"../testdata/flights-3m.parquet", "../../shared/data/flights-3m.parquet", "/work/shared/data/flights-3m.parquet"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// readFixed reads the Parquet file into record batches of exactly rows rows (the last may
// be shorter), concatenating across the reader's batch and row-group boundaries.
func readFixed(t *testing.T, path string, rows int) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(rows)}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	schema := rdr.Schema()
	var out, pending []arrow.RecordBatch
	var have int64
	flush := func() {
		if len(pending) == 0 {
			return
		}
		cols := make([]arrow.Array, schema.NumFields())
		for c := range cols {
			parts := make([]arrow.Array, len(pending))
			for i, p := range pending {
				parts[i] = p.Column(c)
			}
			a, err := array.Concatenate(parts, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			cols[c] = a
		}
		out = append(out, array.NewRecordBatch(schema, cols, have))
		for _, c := range cols {
			c.Release()
		}
		for _, p := range pending {
			p.Release()
		}
		pending, have = pending[:0], 0
	}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for off := int64(0); off < rec.NumRows(); {
			n := min(rec.NumRows()-off, int64(rows)-have)
			pending = append(pending, rec.NewSlice(off, off+n))
			have += n
			off += n
			if have == int64(rows) {
				flush()
			}
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	t.Cleanup(func() {
		for _, r := range out {
			r.Release()
		}
	})
	if slices.ContainsFunc(out[:len(out)-1], func(r arrow.RecordBatch) bool { return r.NumRows() != int64(rows) }) {
		t.Fatalf("readFixed: a batch other than the last is not %d rows", rows)
	}
	return schema, out
}
