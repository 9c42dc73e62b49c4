package filter

import (
	"context"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// flight is one row of the flights data set; nil fields are nulls.
type flight struct {
	date             *time.Time
	delay, distance  *int64
	origin, destname *string
}

var airports = []string{"ABQ", "ATL", "BOS", "DEN", "LAX", "ORD", "SEA", "SFO", "SJC", "SMF"}

// genFlights makes n rows in 2006 shaped like flights-3m.parquet, sorted by
// date when sorted is set, with a few nulls in every column.
func genFlights(r *rand.Rand, n int, sorted bool) []flight {
	rows := make([]flight, n)
	start := time.Date(2006, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range rows {
		f := &rows[i]
		if r.Intn(50) != 0 {
			t := start.Add(time.Duration(r.Int63n(int64(365 * 24 * time.Hour))))
			t = t.Truncate(time.Minute)
			f.date = &t
		}
		if r.Intn(50) != 0 {
			d := int64(r.Intn(240) - 30)
			f.delay = &d
		}
		if r.Intn(50) != 0 {
			d := int64(50 + r.Intn(2700))
			f.distance = &d
		}
		if r.Intn(50) != 0 {
			f.origin = &airports[r.Intn(len(airports))]
		}
		if r.Intn(50) != 0 {
			f.destname = &airports[r.Intn(len(airports))]
		}
	}
	if sorted {
		sort.SliceStable(rows, func(i, j int) bool {
			a, b := rows[i].date, rows[j].date
			return a != nil && (b == nil || a.Before(*b))
		})
	}
	return rows
}

func flightsBatch(mem memory.Allocator, rows []flight) arrow.RecordBatch {
	bld := array.NewRecordBuilder(mem, flightsSchema())
	defer bld.Release()
	for _, f := range rows {
		if f.date != nil {
			bld.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(f.date.UnixMicro()))
		} else {
			bld.Field(0).AppendNull()
		}
		for k, v := range []*int64{f.delay, f.distance} {
			if v != nil {
				bld.Field(1 + k).(*array.Int64Builder).Append(*v)
			} else {
				bld.Field(1 + k).AppendNull()
			}
		}
		for k, v := range []*string{f.origin, f.destname} {
			if v != nil {
				bld.Field(3 + k).(*array.LargeStringBuilder).Append(*v)
			} else {
				bld.Field(3 + k).AppendNull()
			}
		}
	}
	return bld.NewRecordBatch()
}

func day(s string) time.Time {
	t, _ := time.Parse("2006-01-02", s)
	return t
}

// flightsQueries pairs queries on the flights schema with hand-written
// row predicates (a row is selected only when every referenced value is
// non-null and the condition holds, or as the SQL dictates for OR/IS NULL).
var flightsQueries = []struct {
	where string
	match func(f flight) bool
}{
	{"origin = 'SFO' AND delay > 60 AND date BETWEEN '2006-01-01' AND '2006-03-31'", func(f flight) bool {
		return f.origin != nil && *f.origin == "SFO" && f.delay != nil && *f.delay > 60 &&
			f.date != nil && !f.date.Before(day("2006-01-01")) && !f.date.After(day("2006-03-31"))
	}},
	{"date >= DATE '2006-02-01' AND date < DATE '2006-03-01'", func(f flight) bool {
		return f.date != nil && !f.date.Before(day("2006-02-01")) && f.date.Before(day("2006-03-01"))
	}},
	{"destination IN ('LAX', 'SEA') OR distance >= 2000", func(f flight) bool {
		return (f.destname != nil && (*f.destname == "LAX" || *f.destname == "SEA")) || (f.distance != nil && *f.distance >= 2000)
	}},
	{"origin LIKE 'S%' AND NOT (delay <= 0)", func(f flight) bool {
		return f.origin != nil && strings.HasPrefix(*f.origin, "S") && f.delay != nil && *f.delay > 0
	}},
	{"delay BETWEEN -10 AND 10 AND origin <> destination", func(f flight) bool {
		return f.delay != nil && *f.delay >= -10 && *f.delay <= 10 && f.origin != nil && f.destname != nil && *f.origin != *f.destname
	}},
	{"delay IS NULL OR date > '2006-12-31T12:00:00Z'", func(f flight) bool {
		return f.delay == nil || (f.date != nil && f.date.After(time.Date(2006, 12, 31, 12, 0, 0, 0, time.UTC)))
	}},
	{"Origin = 'sfo'", func(flight) bool { return false }}, // column name folds, values do not
}

func TestFlightsQueries(t *testing.T) {
	rows := genFlights(rand.New(rand.NewSource(1)), 5000, false)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	rec := flightsBatch(mem, rows)
	ctx := compute.WithAllocator(context.Background(), mem)
	for _, q := range flightsQueries {
		e, err := Parse(q.where, flightsSchema())
		if err != nil {
			t.Fatalf("Parse(%q): %v", q.where, err)
		}
		m, err := e.Evaluate(ctx, rec)
		if err != nil {
			t.Fatalf("Evaluate(%q): %v", q.where, err)
		}
		got, want := 0, 0
		for i, f := range rows {
			w := q.match(f)
			if m.Value(i) != w {
				t.Fatalf("%q row %d: selected=%v want %v (%+v)", q.where, i, m.Value(i), w, f)
			}
			if w {
				want++
			}
			if m.Value(i) {
				got++
			}
		}
		m.Release()
		t.Logf("%-80s %4d of %d rows", q.where, got, len(rows))
	}
	rec.Release()
	mem.AssertSize(t, 0)
}

// TestFlightsZonePruning splits date-sorted flights into zones of 500 rows,
// computes each zone's statistics and checks MayMatch keeps every zone with
// a match and skips most zones of a one-month date range.
func TestFlightsZonePruning(t *testing.T) {
	rows := genFlights(rand.New(rand.NewSource(2)), 20000, true)
	const zone = 500
	zoneStats := func(z []flight) StatsFunc {
		st := map[string]*ColumnStats{}
		for _, c := range []string{"date", "delay", "distance", "origin", "destination"} {
			st[c] = &ColumnStats{}
		}
		widen := func(s *ColumnStats, v any, less func(a, b any) bool) {
			if !s.HasMinMax {
				s.HasMinMax, s.Min, s.Max = true, v, v
				return
			}
			if less(v, s.Min) {
				s.Min = v
			}
			if less(s.Max, v) {
				s.Max = v
			}
		}
		lessI := func(a, b any) bool { return a.(int64) < b.(int64) }
		lessS := func(a, b any) bool { return a.(string) < b.(string) }
		for _, f := range z {
			if f.date == nil {
				st["date"].NullCount++
			} else {
				widen(st["date"], f.date.UnixMicro(), lessI)
			}
			for c, v := range map[string]*int64{"delay": f.delay, "distance": f.distance} {
				if v == nil {
					st[c].NullCount++
				} else {
					widen(st[c], *v, lessI)
				}
			}
			for c, v := range map[string]*string{"origin": f.origin, "destination": f.destname} {
				if v == nil {
					st[c].NullCount++
				} else {
					widen(st[c], *v, lessS)
				}
			}
		}
		return func(c string) (ColumnStats, bool) {
			s, ok := st[c]
			if !ok {
				return ColumnStats{}, false
			}
			return *s, true
		}
	}
	for _, q := range flightsQueries {
		e, err := Parse(q.where, flightsSchema())
		if err != nil {
			t.Fatal(err)
		}
		kept, zones := 0, 0
		for lo := 0; lo < len(rows); lo += zone {
			z := rows[lo:min(lo+zone, len(rows))]
			zones++
			may := e.MayMatch(int64(len(z)), zoneStats(z))
			if may {
				kept++
			}
			for _, f := range z {
				if q.match(f) && !may {
					t.Fatalf("%q: zone at row %d has a match but MayMatch = false", q.where, lo)
				}
			}
		}
		t.Logf("%-80s scans %2d of %d zones", q.where, kept, zones)
		if strings.HasPrefix(q.where, "date >= DATE '2006-02-01'") && kept > zones/4 {
			t.Errorf("%q kept %d of %d date-sorted zones; a one-month range should skip most", q.where, kept, zones)
		}
	}
}

// BenchmarkEvaluateFlights measures Evaluate on 128Ki-row batches of the
// flights schema (the fragment batch size), reporting ns per row.
func BenchmarkEvaluateFlights(b *testing.B) {
	const n = 128 * 1024
	rows := genFlights(rand.New(rand.NewSource(3)), n, false)
	rec := flightsBatch(memory.NewGoAllocator(), rows)
	defer rec.Release()
	for _, where := range []string{
		"origin = 'SFO' AND delay > 60 AND date BETWEEN '2006-01-01' AND '2006-03-31'",
		"delay > 60",
		"destination IN ('LAX', 'SEA', 'SFO') OR distance >= 2000",
		"origin LIKE 'S%'",
	} {
		e, err := Parse(where, flightsSchema())
		if err != nil {
			b.Fatal(err)
		}
		b.Run(where, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				m, err := e.Evaluate(ctx, rec)
				if err != nil {
					b.Fatal(err)
				}
				m.Release()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/row")
		})
	}
}

func BenchmarkParse(b *testing.B) {
	schema := flightsSchema()
	for b.Loop() {
		if _, err := Parse("origin = 'SFO' AND delay > 60 AND date BETWEEN '2006-01-01' AND '2006-03-31'", schema); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMayMatch(b *testing.B) {
	e, _ := Parse("origin = 'SFO' AND delay > 60 AND date BETWEEN '2006-01-01' AND '2006-03-31'", flightsSchema())
	st := map[string]ColumnStats{
		"origin": {HasMinMax: true, Min: "ABQ", Max: "SMF"},
		"delay":  {HasMinMax: true, Min: int64(-30), Max: int64(200)},
		"date":   {HasMinMax: true, Min: us("2006-05-01"), Max: us("2006-05-02")},
	}
	fn := func(c string) (ColumnStats, bool) { s, ok := st[c]; return s, ok }
	for b.Loop() {
		if e.MayMatch(500, fn) {
			b.Fatal("should prune")
		}
	}
}
