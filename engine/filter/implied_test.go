package filter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestImpliedIsNecessary: for random predicates over two columns, every row the
// predicate selects is selected by its implied condition on each column (seeded; the
// seed is printed and SHALE_SEED replays it), and simple cases give the expected text.
func TestImpliedIsNecessary(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	for where, want := range map[string]string{
		"a > 5 AND b = 'x'":           "a > 5",
		"a > 5 OR b = 'x'":            "",
		"a > 5 OR a < 2":              "a > 5 OR a < 2",
		"NOT (a > 5 AND b = 'x')":     "",
		"NOT (a > 5 OR b = 'x')":      "NOT (a > 5)",
		"a BETWEEN 1 AND 3":           "a BETWEEN 1 AND 3",
		"a IN (1, 2) AND b LIKE 'x%'": "a IN (1, 2)",
		"a IS NULL":                   "a IS NULL",
	} {
		e, err := Parse(where, schema)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if im, ok := e.Implied("a"); ok {
			got = im.String()
		}
		if got != want {
			t.Errorf("Implied(a) of %s = %q, want %q", where, got, want)
		}
	}

	seed := uint64(rand.Int64())
	if s := os.Getenv("SHALE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for i := 0; i < 200; i++ {
		if rng.IntN(10) == 0 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.Int64Builder).Append(int64(rng.IntN(20)))
		}
		if rng.IntN(10) == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(string(rune('a' + rng.IntN(5))))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	atoms := []func() string{
		func() string {
			return fmt.Sprintf("a %s %d", []string{"=", "<", ">", "<=", ">=", "!="}[rng.IntN(6)], rng.IntN(20))
		},
		func() string { return fmt.Sprintf("b = '%c'", 'a'+rng.IntN(5)) },
		func() string { return "a IS NULL" },
		func() string { return "b IS NOT NULL" },
		func() string { return fmt.Sprintf("a IN (%d, %d)", rng.IntN(20), rng.IntN(20)) },
		func() string { return fmt.Sprintf("a BETWEEN %d AND %d", rng.IntN(10), 5+rng.IntN(15)) },
	}
	var gen func(depth int) string
	gen = func(depth int) string {
		if depth == 0 || rng.IntN(3) == 0 {
			return atoms[rng.IntN(len(atoms))]()
		}
		switch rng.IntN(3) {
		case 0:
			return "(" + gen(depth-1) + " AND " + gen(depth-1) + ")"
		case 1:
			return "(" + gen(depth-1) + " OR " + gen(depth-1) + ")"
		}
		return "NOT (" + gen(depth-1) + ")"
	}
	ctx := context.Background()
	for i := 0; i < 500; i++ {
		where := gen(3)
		e, err := Parse(where, schema)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		full, err := e.Evaluate(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		for _, col := range []string{"a", "b"} {
			im, ok := e.Implied(col)
			if !ok {
				continue
			}
			one := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{schema.Field(schema.FieldIndices(col)[0])}, nil),
				[]arrow.Array{rec.Column(schema.FieldIndices(col)[0])}, rec.NumRows())
			part, err := im.Evaluate(ctx, one)
			one.Release()
			if err != nil {
				t.Fatalf("%s implied on %s (%s): %v", where, col, im, err)
			}
			for r := 0; r < full.Len(); r++ {
				if full.Value(r) && !part.Value(r) {
					t.Fatalf("seed %d: %s selects row %d but its implied condition on %s (%s) does not", seed, where, r, col, im)
				}
			}
			part.Release()
		}
		full.Release()
	}
}
