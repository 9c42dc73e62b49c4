package filter

import (
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestMayMatchSound: whenever a row of a random batch matches a random
// predicate, MayMatch with the batch's true statistics (or with some of them
// withheld) must say true. It also reports how often it pruned batches that
// had no match, and fails if it never does.
func TestMayMatchSound(t *testing.T) {
	s := seed(t)
	r := rand.New(rand.NewSource(s))
	mem := memory.NewGoAllocator()
	schema := testSchema()
	ctx := context.Background()
	batches, preds := 200, 25
	if testing.Short() {
		batches = 50
	}
	var empty, pruned, total int
	for bi := 0; bi < batches; bi++ {
		n := r.Intn(60)
		if r.Intn(10) == 0 {
			n = 1 + r.Intn(3) // tiny batches give tight ranges
		}
		b := genBatch(r, mem, n)
		stats := make(map[string]ColumnStats)
		for ci, c := range testCols {
			stats[c.name] = trueStats(b, ci)
		}
		exact := func(col string) (ColumnStats, bool) { st, ok := stats[col]; return st, ok }
		withheld := make(map[string]int) // 0 = known, 1 = unknown, 2 = counts only
		for _, c := range testCols {
			withheld[c.name] = r.Intn(3)
		}
		partial := func(col string) (ColumnStats, bool) {
			st := stats[col]
			switch withheld[col] {
			case 1:
				return ColumnStats{}, false
			case 2:
				st.HasMinMax = false
			}
			return st, true
		}
		g := &gen{r: r, b: b}
		for pi := 0; pi < preds; pi++ {
			p := g.pred(3)
			e, err := Parse(p.sql, schema)
			if err != nil {
				t.Fatalf("Parse(%q): %v", p.sql, err)
			}
			m, err := e.Evaluate(ctx, b.rec)
			if err != nil {
				t.Fatalf("Evaluate(%q): %v", p.sql, err)
			}
			matches := 0
			for i := 0; i < m.Len(); i++ {
				if m.Value(i) {
					matches++
				}
			}
			m.Release()
			may := e.MayMatch(int64(b.n), exact)
			total++
			if matches > 0 {
				if !may {
					t.Fatalf("batch %d: %q (normalized %q) matches %d of %d rows but MayMatch(true stats) = false; stats %v",
						bi, p.sql, e.String(), matches, b.n, statsOf(e, stats))
				}
				if !e.MayMatch(int64(b.n), partial) {
					t.Fatalf("batch %d: %q matches %d rows but MayMatch(partial stats) = false; stats %v, withheld %v",
						bi, p.sql, matches, statsOf(e, stats), withheld)
				}
				if !e.MayMatch(-1, exact) || !e.MayMatch(int64(b.n), nil) {
					t.Fatalf("batch %d: %q matches but MayMatch with unknown rows or nil stats = false", bi, p.sql)
				}
			} else {
				empty++
				if !may {
					pruned++
				}
			}
		}
		b.rec.Release()
	}
	t.Logf("%d predicates, %d with no matching row, %d of those pruned from statistics", total, empty, pruned)
	if pruned == 0 {
		t.Errorf("MayMatch never pruned a batch without matches")
	}
}

func statsOf(e *Expr, stats map[string]ColumnStats) map[string]ColumnStats {
	out := map[string]ColumnStats{}
	for _, c := range e.Columns() {
		out[c] = stats[c]
	}
	return out
}

func us(s string) int64 {
	t, ok := parseTime(s)
	if !ok {
		panic(s)
	}
	return t.UnixMicro()
}

// TestMayMatchPrunes pins the obvious cases, both ways.
func TestMayMatchPrunes(t *testing.T) {
	schema := arrow.NewSchema(append(flightsSchema().Fields(),
		arrow.Field{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		arrow.Field{Name: "flag", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		arrow.Field{Name: "gone", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "one", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "far", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		arrow.Field{Name: "raw", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		arrow.Field{Name: "rawnull", Type: arrow.BinaryTypes.Binary, Nullable: true},
	), nil)
	const rows = 100
	stats := map[string]ColumnStats{
		"delay":       {NullCount: 0, HasMinMax: true, Min: int64(0), Max: int64(50)},
		"distance":    {NullCount: 10, HasMinMax: true, Min: int64(100), Max: int64(2000)},
		"date":        {NullCount: 0, HasMinMax: true, Min: us("2006-01-01"), Max: us("2006-03-31 23:00:00")},
		"origin":      {NullCount: 0, HasMinMax: true, Min: "ABQ", Max: "SFO"},
		"destination": {NullCount: 3, HasMinMax: false},
		"f":           {NullCount: 0, HasMinMax: true, Min: 1.0, Max: 2.0},
		"flag":        {NullCount: 0, HasMinMax: true, Min: false, Max: false},
		"gone":        {NullCount: rows}, // all null
		"one":         {NullCount: 0, HasMinMax: true, Min: int64(5), Max: int64(5)},
		"far":         {NullCount: 0, HasMinMax: true, Min: int64(1000), Max: int64(2000)},
		"d":           {NullCount: 0, HasMinMax: true, Min: int32(baseDay), Max: int32(baseDay + 30)},
		"raw":         {NullCount: 0, HasMinMax: true, Min: []byte{0x41}, Max: string([]byte{0x80, 0x00})},
		"rawnull":     {NullCount: rows}, // all null
	}
	fn := func(c string) (ColumnStats, bool) { st, ok := stats[c]; return st, ok }
	cases := []struct {
		where string
		want  bool
	}{
		{"delay > 60", false},
		{"delay > 40", true},
		{"delay >= 50", true},
		{"delay > 50", false},
		{"delay < 0", false},
		{"delay <= 0", true},
		{"60 < delay", false},
		{"delay = 51", false},
		{"delay = 25.5", false},
		{"delay < 0.5", true},
		{"delay IS NULL", false},
		{"delay IS NOT NULL", true},
		{"distance IS NULL", true},
		{"NOT (delay <= 50)", false},
		{"NOT (delay < 50)", true},
		{"NOT (delay > 60)", true},
		{"delay IN (70, 80)", false},
		{"delay IN (70, 30)", true},
		{"delay NOT IN (0)", true},
		{"delay NOT IN (70, NULL)", false}, // never TRUE with NULL in the list
		{"delay IN (70, NULL)", false},
		{"delay BETWEEN 60 AND 70", false},
		{"delay BETWEEN 40 AND 70", true},
		{"delay NOT BETWEEN 0 AND 50", false},
		{"delay NOT BETWEEN 0 AND 49", true},
		{"(delay > 60) IS TRUE", false},
		{"(delay > 60) IS NOT TRUE", true},
		{"(delay > 60) IS FALSE", true},
		{"(delay > 60) IS NULL", false},
		{"(distance > 60) IS NULL", true},
		{"delay > 60 OR origin = 'SFO'", true},
		{"delay > 60 OR origin = 'ZZZ'", false},
		{"delay > 40 AND origin = 'ZZZ'", false},
		{"origin < 'AAA'", false},
		{"origin LIKE 'SF%'", true},
		{"origin LIKE 'Z%'", false},
		{"origin LIKE 'A%'", true},
		{"origin LIKE '%Z'", true},
		{"origin LIKE 'ZZZ'", false},
		{"destination = 'X'", true},   // counts only
		{"destination IS NULL", true}, // NullCount 3
		{"date > '2007-01-01'", false},
		{"date < DATE '2006-01-01'", false},
		{"date BETWEEN '2006-02-01' AND '2006-02-02'", true},
		{"date >= '2006-03-31T23:00:00.000001Z'", false},
		{"date >= '2006-03-31T23:00:00Z'", true},
		{"d > '2006-02-01'", false},
		{"d >= '2006-01-31'", true},
		{"d > '2006-01-31 00:00:01'", false},
		{"raw = 'A'", true},
		{"raw = ''", false}, // the empty value orders before the minimum 'A'
		{"raw < 'A'", false},
		{"raw < X'4100'", true},
		{"raw = X'80'", true},
		{"raw > X'8000'", false},
		{"raw >= 0x8000", true},
		{"raw = X'FF'", false}, // 0xFF orders after 0x8000
		{"raw IN (X'FF', '', X'00')", false},
		{"raw IN (X'FF', 'Z')", true},
		{"raw BETWEEN X'81' AND X'FF'", false},
		{"raw IS NULL", false},
		{"rawnull IS NULL", true},
		{"rawnull IS NOT NULL", false},
		{"rawnull = X'00'", false},
		{"gone > 0", false},
		{"NOT (gone > 0)", false},
		{"gone IS NULL", true},
		{"gone IS NOT NULL", false},
		{"(gone > 0) IS NULL", true},
		{"(gone > 0) IS NOT TRUE", true},
		{"gone IN (1, NULL)", false},
		{"gone NOT IN (1)", false},
		{"gone = gone", false},
		{"one != 5", false},
		{"one NOT IN (5)", false},
		{"one NOT IN (5, 6)", false},
		{"one NOT IN (6)", true},
		{"one = 5", true},
		{"delay > far", false},
		{"delay < far", true},
		{"delay = far", false},
		{"delay != far", true},
		{"flag", false},
		{"NOT flag", true},
		{"flag IS TRUE", false},
		{"flag = TRUE", false},
		{"f > 3", false},
		{"f = 1.5", true},
		{"f != 1.5", true},
		{"NOT (f < 5)", true}, // a NaN row makes f < 5 FALSE
		{"f IN (7)", false},
		{"delay > 100000000000000000000", false}, // out of int64: FALSE for every row
		{"FALSE", false},
		{"NULL", false},
		{"1 = 1", true},
	}
	for _, c := range cases {
		e, err := Parse(c.where, schema)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.where, err)
		}
		if got := e.MayMatch(rows, fn); got != c.want {
			t.Errorf("MayMatch(%q) = %v, want %v", c.where, got, c.want)
		}
		if got := e.MayMatch(0, fn); got {
			t.Errorf("MayMatch(%q) on 0 rows = true", c.where)
		}
	}

	// Nothing known: only contradictions by type prune.
	unknown := func(string) (ColumnStats, bool) { return ColumnStats{}, false }
	for where, want := range map[string]bool{
		"delay > 60":                      true,
		"delay IS NULL":                   true,
		"delay > 100000000000000000000":   false,
		"NOT (delay > 60)":                true,
		"delay > 60 AND NOT (delay > 60)": true, // rows differ; no cross-leaf reasoning
	} {
		e, err := Parse(where, schema)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.MayMatch(rows, unknown); got != want {
			t.Errorf("MayMatch(%q, unknown) = %v, want %v", where, got, want)
		}
	}

	// Bounds of the wrong Go type are ignored, never trusted.
	odd := func(c string) (ColumnStats, bool) {
		return ColumnStats{HasMinMax: true, Min: "0", Max: time.Second}, true
	}
	e, _ := Parse("delay > 60", schema)
	if !e.MayMatch(rows, odd) {
		t.Errorf("MayMatch with unusable bounds pruned")
	}
}
