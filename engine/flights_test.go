package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// flightsPath finds the bundled real data (repo testdata, else the shared copy).
func flightsPath(t testing.TB) string {
	for _, p := range []string{"../testdata/flights-3m.parquet", "../../shared/data/flights-3m.parquet"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("flights-3m.parquet not found")
	return ""
}

func openParquet(t testing.TB, path string) *pqarrow.FileReader {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	pf, err := file.NewParquetReader(f)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	return fr
}

// flight is one row of the flights data.
type flight struct {
	date               int64 // microseconds since the epoch
	delay, distance    int64
	origin, destnation string
}

func flightRows(t testing.TB, rdr array.RecordReader, cols []string) []flight {
	t.Helper()
	var out []flight
	// Value aliases the batch's memory, which a scan reuses once the batch is released:
	// keep one copy of each distinct airport code.
	codes := map[string]string{}
	intern := func(v string) string {
		c, ok := codes[v]
		if !ok {
			c = strings.Clone(v)
			codes[c] = c
		}
		return c
	}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			var f flight
			for c, name := range cols {
				col := rec.Column(c)
				switch name {
				case "date":
					f.date = int64(col.(*array.Timestamp).Value(i))
				case "delay":
					f.delay = col.(*array.Int64).Value(i)
				case "distance":
					f.distance = col.(*array.Int64).Value(i)
				case "origin":
					f.origin = intern(col.(*array.LargeString).Value(i))
				case "destination":
					f.destnation = intern(col.(*array.LargeString).Value(i))
				}
			}
			out = append(out, f)
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func project(rows []flight, cols []string, keep func(flight) bool) []flight {
	var out []flight
	for _, r := range rows {
		if keep != nil && !keep(r) {
			continue
		}
		var p flight
		for _, c := range cols {
			switch c {
			case "date":
				p.date = r.date
			case "delay":
				p.delay = r.delay
			case "distance":
				p.distance = r.distance
			case "origin":
				p.origin = r.origin
			case "destination":
				p.destnation = r.destnation
			}
		}
		out = append(out, p)
	}
	return out
}

func micros(s string) int64 {
	ts, err := time.Parse("2006-01-02", s)
	if err != nil {
		panic(err)
	}
	return ts.UnixMicro()
}

type flightQuery struct {
	where string
	cols  []string
	keep  func(flight) bool
}

var flightQueries = []flightQuery{
	{"", []string{"origin", "delay"}, nil},
	{"origin = 'SFO'", []string{"date", "delay", "destination"}, func(f flight) bool { return f.origin == "SFO" }},
	{"delay > 60 AND date BETWEEN '2001-02-01' AND '2001-03-31'", []string{"date", "delay", "distance", "origin", "destination"},
		func(f flight) bool {
			return f.delay > 60 && f.date >= micros("2001-02-01") && f.date <= micros("2001-03-31")
		}},
	{"destination IN ('LAX', 'JFK') AND distance < 500", []string{"origin", "destination", "distance"},
		func(f flight) bool { return (f.destnation == "LAX" || f.destnation == "JFK") && f.distance < 500 }},
	{"NOT (delay <= 0) AND (origin = 'ORD' OR origin = 'ATL')", []string{"delay", "origin"},
		func(f flight) bool { return f.delay > 0 && (f.origin == "ORD" || f.origin == "ATL") }},
	{"date >= TIMESTAMP '2001-06-30 12:00:00'", []string{"date"}, func(f flight) bool { return f.date >= micros("2001-06-30")+12*3600*1e6 }},
}

// TestFlightsRoundTrip imports the real flights data and checks that projections and
// filtered queries return exactly the rows the same query over the source Parquet (read with
// pqarrow, filtered in plain Go) returns, in order, including after a delete and at the
// older version (invariant 11's "results do not depend on layout" starts here).
func TestFlightsRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 3,000,000 rows")
	}
	ctx := context.Background()
	path := flightsPath(t)
	fr := openParquet(t, path)
	src, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"date", "delay", "distance", "origin", "destination"}
	want := flightRows(t, src, all)
	src.Release()
	if len(want) != 3_000_000 {
		t.Fatalf("source has %d rows", len(want))
	}

	db := openDB(t, "file://"+filepath.Join(t.TempDir(), "store"))
	fr2 := openParquet(t, path)
	rdr, err := fr2.GetRecordReader(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	tbl, err := db.CreateTable(ctx, "flights", rdr.Schema())
	if err != nil {
		t.Fatal(err)
	}
	res, err := tbl.Append(ctx, rdr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3_000_000 {
		t.Fatalf("imported %d rows", res.Rows)
	}
	if n, _ := tbl.Count(ctx, ""); n != 3_000_000 {
		t.Fatalf("count %d", n)
	}
	check := func(tbl *Table, rows []flight) {
		t.Helper()
		for _, q := range flightQueries {
			sc, err := tbl.Scan(ctx, ScanOptions{Columns: q.cols, Filter: q.where})
			if err != nil {
				t.Fatalf("%q: %v", q.where, err)
			}
			got := flightRows(t, sc, q.cols)
			sc.Release()
			exp := project(rows, q.cols, q.keep)
			if len(got) != len(exp) {
				t.Fatalf("v%d %q: %d rows, want %d", tbl.Version(), q.where, len(got), len(exp))
			}
			for i := range exp {
				if got[i] != exp[i] {
					t.Fatalf("v%d %q: row %d = %+v, want %+v", tbl.Version(), q.where, i, got[i], exp[i])
				}
			}
			if q.where != "" {
				n, err := tbl.Count(ctx, q.where)
				if err != nil || n != int64(len(exp)) {
					t.Fatalf("v%d count %q = %d (%v), want %d", tbl.Version(), q.where, n, err, len(exp))
				}
			}
		}
	}
	check(tbl, want)
	imported := tbl.Version()

	del, err := tbl.Delete(ctx, "origin = 'ORD' OR delay > 300")
	if err != nil {
		t.Fatal(err)
	}
	kept := project(want, all, func(f flight) bool { return !(f.origin == "ORD" || f.delay > 300) })
	if del.Rows != int64(len(want)-len(kept)) {
		t.Fatalf("deleted %d rows, want %d", del.Rows, len(want)-len(kept))
	}
	check(tbl, kept)
	old, err := tbl.Checkout(ctx, imported)
	if err != nil {
		t.Fatal(err)
	}
	check(old, want)
	fmt.Fprintf(os.Stderr, "flights: %d rows in %d fragments; deleted %d\n", res.Rows, len(old.Manifest().Fragments), del.Rows)
	_ = arrow.PrimitiveTypes.Int64
}
