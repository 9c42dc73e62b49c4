package zonemap

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

// TestSearchNeverMissesAMatch: zones never span fragments, and a search keeps every zone
// holding a row that matches (random sorted-ish data in several fragments, random
// predicates over two columns; seeded), while skipping zones of a selective range.
func TestSearchNeverMissesAMatch(t *testing.T) {
	ctx := context.Background()
	sd := uint64(rand.Int64())
	if v := os.Getenv("SHALE_SEED"); v != "" {
		sd, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", sd, sd)
	rng := rand.New(rand.NewPCG(sd, 3))
	s, err := store.Open(ctx, fmt.Sprintf("mem://zonemap-%d", rng.Int()), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := NewBuilder([]int32{0, 1}, 100)
	type row struct {
		frag, off uint32
	}
	var rows []row
	ab, sb := array.NewInt64Builder(memory.DefaultAllocator), array.NewStringBuilder(memory.DefaultAllocator)
	for frag := uint32(0); frag < 4; frag++ {
		n := 1 + rng.IntN(450)
		fa, fb := array.NewInt64Builder(memory.DefaultAllocator), array.NewStringBuilder(memory.DefaultAllocator)
		for i := 0; i < n; i++ {
			v := int64(frag)*1000 + int64(i) + int64(rng.IntN(30))
			if rng.IntN(20) == 0 {
				fa.AppendNull()
				ab.AppendNull()
			} else {
				fa.Append(v)
				ab.Append(v)
			}
			k := fmt.Sprintf("s%d", rng.IntN(9))
			fb.Append(k)
			sb.Append(k)
			rows = append(rows, row{frag, uint32(i)})
		}
		ca, cb := fa.NewArray(), fb.NewArray()
		if err := b.Add(frag, 0, []arrow.Array{ca, cb}); err != nil {
			t.Fatal(err)
		}
		ca.Release()
		cb.Release()
	}
	key, _, err := Store(ctx, s, "t/_indices/TXN/zm", b.Map())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Read(ctx, s, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, z := range m.Zones {
		if z.Rows == 0 || z.Rows > 100 {
			t.Fatalf("zone %+v", z)
		}
	}
	aa, ba := ab.NewArray(), sb.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{aa, ba}, int64(aa.Len()))
	defer rec.Release()
	names := map[int32]string{0: "a", 1: "b"}
	skippedAny := false
	for q := 0; q < 200; q++ {
		lo := rng.IntN(4000)
		where := fmt.Sprintf("a BETWEEN %d AND %d", lo, lo+rng.IntN(200))
		switch rng.IntN(4) {
		case 0:
			where += fmt.Sprintf(" AND b = 's%d'", rng.IntN(9))
		case 1:
			where = "a IS NULL OR " + where
		case 2:
			where = fmt.Sprintf("b = 's%d' OR %s", rng.IntN(9), where)
		}
		e, err := filter.Parse(where, schema)
		if err != nil {
			t.Fatal(err)
		}
		zones, st := m.Search(e, names, nil)
		if st.ZonesSkipped > 0 {
			skippedAny = true
		}
		mask, err := e.Evaluate(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < mask.Len(); i++ {
			if !mask.Value(i) {
				continue
			}
			r := rows[i]
			found := false
			for _, z := range zones {
				if z.Fragment == r.frag && r.off >= z.Start && r.off < z.Start+z.Rows {
					found = true
				}
			}
			if !found {
				t.Fatalf("seed %d: %s matches fragment %d row %d, whose zone was skipped", sd, where, r.frag, r.off)
			}
		}
		mask.Release()
	}
	if !skippedAny {
		t.Fatal("no search skipped a zone")
	}
}
