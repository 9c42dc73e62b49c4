package btree

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

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/store"
)

func seed(t *testing.T) uint64 {
	s := uint64(rand.Int64())
	if v := os.Getenv("SHALE_SEED"); v != "" {
		s, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", s, s)
	return s
}

func memStore(t *testing.T) store.Store {
	s, err := store.Open(context.Background(), fmt.Sprintf("mem://btree-%s-%d", t.Name(), rand.Int()), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// column is one test column: a random array of n values (with nulls and duplicates) and
// predicate atoms over it.
type column struct {
	typ   arrow.DataType
	build func(rng *rand.Rand, n int) arrow.Array
	atom  func(rng *rand.Rand) string
}

var columns = []column{
	{arrow.PrimitiveTypes.Int64, func(rng *rand.Rand, n int) arrow.Array {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		for i := 0; i < n; i++ {
			if rng.IntN(15) == 0 {
				b.AppendNull()
			} else {
				b.Append(int64(rng.IntN(500)) - 100)
			}
		}
		return b.NewArray()
	}, func(rng *rand.Rand) string {
		return fmt.Sprintf("v %s %d", []string{"=", "<", ">", "<=", ">=", "!="}[rng.IntN(6)], rng.IntN(500)-100)
	}},
	{arrow.BinaryTypes.String, func(rng *rand.Rand, n int) arrow.Array {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		for i := 0; i < n; i++ {
			if rng.IntN(15) == 0 {
				b.AppendNull()
			} else {
				b.Append(fmt.Sprintf("k%03d", rng.IntN(300)))
			}
		}
		return b.NewArray()
	}, func(rng *rand.Rand) string {
		return fmt.Sprintf("v %s 'k%03d'", []string{"=", "<", ">", "<=", ">="}[rng.IntN(5)], rng.IntN(300))
	}},
	{arrow.PrimitiveTypes.Float64, func(rng *rand.Rand, n int) arrow.Array {
		b := array.NewFloat64Builder(memory.DefaultAllocator)
		for i := 0; i < n; i++ {
			if rng.IntN(15) == 0 {
				b.AppendNull()
			} else {
				b.Append(float64(rng.IntN(200)) / 4)
			}
		}
		return b.NewArray()
	}, func(rng *rand.Rand) string {
		return fmt.Sprintf("v %s %g", []string{"=", "<", ">", "<=", ">="}[rng.IntN(5)], float64(rng.IntN(200))/4)
	}},
	{arrow.FixedWidthTypes.Date32, func(rng *rand.Rand, n int) arrow.Array {
		b := array.NewDate32Builder(memory.DefaultAllocator)
		for i := 0; i < n; i++ {
			if rng.IntN(15) == 0 {
				b.AppendNull()
			} else {
				b.Append(arrow.Date32(11000 + rng.IntN(60)))
			}
		}
		return b.NewArray()
	}, func(rng *rand.Rand) string {
		d := arrow.Date32(11000 + rng.IntN(60)).ToTime().Format("2006-01-02")
		return fmt.Sprintf("v %s DATE '%s'", []string{"=", "<", ">=", "<="}[rng.IntN(4)], d)
	}},
	{arrow.FixedWidthTypes.Boolean, func(rng *rand.Rand, n int) arrow.Array {
		b := array.NewBooleanBuilder(memory.DefaultAllocator)
		for i := 0; i < n; i++ {
			if rng.IntN(10) == 0 {
				b.AppendNull()
			} else {
				b.Append(rng.IntN(3) == 0)
			}
		}
		return b.NewArray()
	}, func(rng *rand.Rand) string { return []string{"v", "NOT v", "v = true", "v = false"}[rng.IntN(4)] }},
}

// TestSearchEqualsBruteForce: for random columns of every kind (nulls, duplicates,
// several chunks) and random predicates (AND, OR, NOT, IN, BETWEEN, IS [NOT] NULL), a
// search returns exactly the rows whose value satisfies the predicate, and reads no page
// whose bounds rule it out.
func TestSearchEqualsBruteForce(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed(t), 7))
	for ci, c := range columns {
		t.Run(c.typ.String(), func(t *testing.T) {
			s := memStore(t)
			var chunks []Chunk
			var all []arrow.Array
			var addrs []uint64
			for frag := uint32(0); frag < 3; frag++ {
				n := 1 + rng.IntN(3000)
				arr := c.build(rng, n)
				defer arr.Release()
				a := make([]uint64, n)
				for i := range a {
					a[i] = uint64(frag)<<32 | uint64(i)
				}
				chunks = append(chunks, Chunk{Values: arr, Addrs: a})
				all = append(all, arr)
				addrs = append(addrs, a...)
			}
			field := arrow.Field{Name: "v", Type: c.typ, Nullable: true}
			built, err := Build(ctx, s, fmt.Sprintf("t/_indices/TXN/%d", ci), field, chunks, BuildOptions{PageRows: 128})
			if err != nil {
				t.Fatal(err)
			}
			lk, err := ReadLookup(ctx, s, built.Files[0])
			if err != nil {
				t.Fatal(err)
			}
			r, err := NewReader(s, lk, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			values, _ := array.Concatenate(all, memory.DefaultAllocator)
			defer values.Release()
			schema := arrow.NewSchema([]arrow.Field{field}, nil)
			rec := array.NewRecordBatch(schema, []arrow.Array{values}, int64(values.Len()))
			defer rec.Release()
			for q := 0; q < 60; q++ {
				where := c.atom(rng)
				switch rng.IntN(6) {
				case 0:
					where = "(" + where + ") AND (" + c.atom(rng) + ")"
				case 1:
					where = "(" + where + ") OR (" + c.atom(rng) + ")"
				case 2:
					where = "NOT (" + where + ")"
				case 3:
					where = "v IS NULL OR (" + where + ")"
				case 4:
					where = "v IS NOT NULL AND (" + where + ")"
				}
				e, err := filter.Parse(where, schema)
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				cond, ok := e.Implied("v")
				if !ok {
					continue
				}
				got, st, err := r.Search(ctx, "v", cond)
				if err != nil {
					t.Fatal(err)
				}
				mask, err := e.Evaluate(ctx, rec)
				if err != nil {
					t.Fatal(err)
				}
				want := 0
				for i := 0; i < mask.Len(); i++ {
					if mask.Value(i) {
						want++
						if !got.Contains(addrs[i]) {
							t.Fatalf("%s: row %x matches but the search missed it", where, addrs[i])
						}
					}
				}
				mask.Release()
				if int(got.GetCardinality()) != want {
					t.Fatalf("%s: search returned %d rows, %d match", where, got.GetCardinality(), want)
				}
				if st.PagesRead+st.PagesSkipped != st.Pages {
					t.Fatalf("%s: stats %+v", where, st)
				}
			}
		})
	}
}

// buildInts stores a BTree of the values 0..n-1 (one fragment) with pages of pageRows
// rows and returns its reader.
func buildInts(t *testing.T, s store.Store, n, pageRows int) *Reader {
	t.Helper()
	ctx := context.Background()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	addrs := make([]uint64, n)
	for i := 0; i < n; i++ {
		b.Append(int64(i))
		addrs[i] = uint64(i)
	}
	arr := b.NewArray()
	defer arr.Release()
	built, err := Build(ctx, s, "t/_indices/TXN/ints", arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		[]Chunk{{Values: arr, Addrs: addrs}}, BuildOptions{PageRows: pageRows})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := ReadLookup(ctx, s, built.Files[0])
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(s, lk, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func intCond(t *testing.T, where string) *filter.Expr {
	t.Helper()
	e, err := filter.Parse(where, arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	cond, ok := e.Implied("v")
	if !ok {
		t.Fatalf("%s: no condition on v", where)
	}
	return cond
}

// TestSearchAfterFirstContextEnds: a Reader keeps its pages file open across searches;
// a search after the context of the first one ended must still work (the file was read
// with that context, so every later page read failed with context.Canceled).
func TestSearchAfterFirstContextEnds(t *testing.T) {
	r := buildInts(t, ctxStore{memStore(t)}, 1000, 100)
	first, cancel := context.WithCancel(context.Background())
	if _, _, err := r.Search(first, "v", intCond(t, "v = 5")); err != nil {
		t.Fatal(err)
	}
	cancel()
	got, _, err := r.Search(context.Background(), "v", intCond(t, "v = 905"))
	if err != nil {
		t.Fatalf("search after the first search's context ended: %v", err)
	}
	if got.GetCardinality() != 1 || !got.Contains(905) {
		t.Fatalf("got %v, want [905]", got.ToArray())
	}
}

// ctxStore fails reads whose context has ended, as a remote store does (the mem store
// does not look at the context of a read).
type ctxStore struct{ store.Store }

func (s ctxStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.Store.GetRange(ctx, key, off, n)
}

// TestWarmSearchRequests: a cold search costs the pages file's tail plus one range request
// per run of consecutive pages that can match; a warm one only the pages, and never the
// lookup.
func TestWarmSearchRequests(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	r := buildInts(t, s, 1000, 100)
	c := s.Counters()
	before := c.Snapshot()
	got, st, err := r.Search(ctx, "v", intCond(t, "v = 5"))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Snapshot().Sub(before); d.Total() != 2 || d.ByOp[store.OpGetRange] != 2 || st.PagesRead != 1 || got.GetCardinality() != 1 {
		t.Fatalf("cold point search: requests %v, stats %+v, %d matches; want the tail and one page", d, st, got.GetCardinality())
	}
	before = c.Snapshot()
	got, st, err = r.Search(ctx, "v", intCond(t, "v = 777"))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Snapshot().Sub(before); d.Total() != 1 || st.PagesRead != 1 || got.GetCardinality() != 1 {
		t.Fatalf("warm point search: requests %v, stats %+v, %d matches; want one page", d, st, got.GetCardinality())
	}
	before = c.Snapshot()
	if _, st, err = r.Search(ctx, "v", intCond(t, "v >= 250 AND v < 450")); err != nil {
		t.Fatal(err)
	}
	if d := c.Snapshot().Sub(before); st.PagesRead != 3 || d.Total() != 1 {
		t.Fatalf("warm range search: requests %v, stats %+v; want pages 2-4 in one request", d, st)
	}
}

// TestPagesSortedByValueThenAddress: with many duplicates, Build's pages hold the entries
// in (value, row address) order when the input is in address order (ties keep the input
// order), nulls first.
func TestPagesSortedByValueThenAddress(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	rng := rand.New(rand.NewPCG(seed(t), 11))
	b := array.NewStringBuilder(memory.DefaultAllocator)
	const n = 5000
	addrs := make([]uint64, n)
	for i := range addrs {
		if rng.IntN(20) == 0 {
			b.AppendNull()
		} else {
			b.Append(fmt.Sprintf("k%d", rng.IntN(7)))
		}
		addrs[i] = uint64(i/1000)<<32 | uint64(i%1000)
	}
	arr := b.NewArray()
	defer arr.Release()
	built, err := Build(ctx, s, "t/_indices/TXN/sorted", arrow.Field{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
		[]Chunk{{Values: arr, Addrs: addrs}}, BuildOptions{PageRows: 300})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(s, built.Lookup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fr, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := r.readPages(ctx, fr, 0, fr.NumBatches())
	if err != nil {
		t.Fatal(err)
	}
	var prevNull = true
	var prevVal string
	var prevAddr uint64
	seen := 0
	for _, rec := range recs {
		vals := rec.Column(0).(*array.String)
		as := rec.Column(1).(*array.Uint64).Uint64Values()
		for i := 0; i < vals.Len(); i++ {
			null, v, a := vals.IsNull(i), vals.Value(i), as[i]
			if seen > 0 {
				switch {
				case prevNull && null, !prevNull && !null && prevVal == v:
					if a <= prevAddr {
						t.Fatalf("entry %d: address %x after %x within equal values", seen, a, prevAddr)
					}
				case !prevNull && null, !prevNull && v < prevVal:
					t.Fatalf("entry %d: %q (null %v) after %q", seen, v, null, prevVal)
				}
			}
			prevNull, prevVal, prevAddr = null, v, a
			seen++
		}
		rec.Release()
	}
	if seen != n {
		t.Fatalf("%d entries, want %d", seen, n)
	}
}
