package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shale-db/shale/engine/filter"
)

// TestUpdateMatchesModel runs random appends, deletes and updates (several fragments,
// multi-batch files, NULLs, expressions on the columns the WHERE reads, some failing) and
// compares the table with a brute-force model after each. SHALE_SEED replays a run.
func TestUpdateMatchesModel(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("SHALE_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (rerun with SHALE_SEED=%d)", seed, seed)
	r := rand.New(rand.NewSource(seed))
	ctx := context.Background()
	db := openDB(t, "")
	model := urows{}
	for id := int64(0); id < 80; id++ {
		model[id] = randRow(r)
	}
	tbl := newUpdTable(t, db, "model", model)
	nextID := int64(80)
	ops := 40
	if testing.Short() {
		ops = 15
	}
	for i := 0; i < ops; i++ {
		before := tbl.Version()
		switch k := r.Intn(10); {
		case k < 2:
			batch := urows{}
			for n := r.Intn(25); n > 0; n-- {
				batch[nextID] = randRow(r)
				nextID++
			}
			rec := updBatch(batch)
			if _, err := tbl.AppendRecord(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			maps.Copy(model, batch)
		case k == 2:
			w := randWhere(r, nextID)
			if _, err := tbl.Delete(ctx, w.sql); err != nil {
				t.Fatalf("op %d: DELETE WHERE %s: %v", i, w.sql, err)
			}
			for id, row := range model {
				if w.match(id, row) {
					delete(model, id)
				}
			}
		default:
			w := randWhere(r, nextID)
			set := randSet(r)
			next, n, ok := applyModel(model, set, w)
			res, err := tbl.Update(ctx, set.sql, w.sql)
			switch {
			case !ok:
				if !errors.Is(err, filter.ErrType) && !errors.Is(err, filter.ErrArithmetic) {
					t.Fatalf("op %d: UPDATE SET %v WHERE %s: %+v %v; the model says it fails", i, set.sql, w.sql, res, err)
				}
				if tbl.Version() != before {
					t.Fatalf("op %d: failed update moved to version %d", i, tbl.Version())
				}
			case err != nil:
				t.Fatalf("op %d: UPDATE SET %v WHERE %s: %v", i, set.sql, w.sql, err)
			case res.Rows != n || (n == 0) != (res.Version == before):
				t.Fatalf("op %d: UPDATE SET %v WHERE %s: %+v, model updates %d rows", i, set.sql, w.sql, res, n)
			default:
				model = next
			}
			t.Logf("op %d: UPDATE SET %v WHERE %s: %d rows (ok=%v)", i, set.sql, w.sql, n, ok)
		}
		if got := readRows(t, tbl); !got.equal(model) {
			t.Fatalf("op %d: table differs from the model\n got %v\nwant %v", i, got, model)
		}
	}
	// A fresh handle and Count agree with the model too.
	fresh, err := db.OpenTable(ctx, "model")
	if err != nil {
		t.Fatal(err)
	}
	if got := readRows(t, fresh); !got.equal(model) {
		t.Fatal("fresh handle differs from the model")
	}
	w := randWhere(r, nextID)
	var n int64
	for id, row := range model {
		if w.match(id, row) {
			n++
		}
	}
	if c, err := fresh.Count(ctx, w.sql); err != nil || c != n {
		t.Fatalf("Count(%s) = %d %v, model %d", w.sql, c, err, n)
	}
}

func randRow(r *rand.Rand) urow {
	var row urow
	if r.Intn(5) > 0 {
		row.a = ptr(int32(r.Intn(2001) - 1000))
	}
	if r.Intn(5) > 0 {
		row.f = ptr(float64(r.Intn(81)-40) / 8)
	}
	if r.Intn(5) > 0 {
		row.s = ptr(fmt.Sprint("x", r.Intn(4)))
	}
	return row
}

// mwhere is a WHERE expression with its model.
type mwhere struct {
	sql   string
	match func(id int64, r urow) bool
}

func randWhere(r *rand.Rand, maxID int64) mwhere {
	k := r.Int63n(maxID + 1)
	v := int32(r.Intn(2001) - 1000)
	switch r.Intn(9) {
	case 0:
		return mwhere{fmt.Sprintf("id < %d", k), func(id int64, _ urow) bool { return id < k }}
	case 1:
		return mwhere{fmt.Sprintf("id >= %d", k), func(id int64, _ urow) bool { return id >= k }}
	case 2:
		return mwhere{fmt.Sprintf("a > %d", v), func(_ int64, x urow) bool { return x.a != nil && *x.a > v }}
	case 3:
		return mwhere{"a IS NULL", func(_ int64, x urow) bool { return x.a == nil }}
	case 4:
		s := fmt.Sprint("x", r.Intn(4))
		return mwhere{fmt.Sprintf("s = '%s' OR f < 0", s), func(_ int64, x urow) bool {
			return (x.s != nil && *x.s == s) || (x.f != nil && *x.f < 0)
		}}
	case 5:
		m := int64(2 + r.Intn(5))
		return mwhere{fmt.Sprintf("id %% %d = 1", m), func(id int64, _ urow) bool { return id%m == 1 }}
	case 6:
		return mwhere{fmt.Sprintf("a + id > %d", v), func(id int64, x urow) bool { return x.a != nil && int64(*x.a)+id > int64(v) }}
	case 7:
		return mwhere{"true", func(int64, urow) bool { return true }}
	}
	lo := r.Int63n(maxID + 1)
	hi := lo + r.Int63n(30)
	return mwhere{fmt.Sprintf("id BETWEEN %d AND %d", lo, hi), func(id int64, _ urow) bool { return id >= lo && id <= hi }}
}

// mset is a SET list with its model: apply returns the new row, or ok=false when the
// update must fail (the value does not fit the column).
type mset struct {
	sql   map[string]string
	apply func(id int64, r urow) (urow, bool)
}

func randSet(r *rand.Rand) mset {
	k := int32(r.Intn(11) - 5)
	fits := func(v int64) (*int32, bool) {
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, false
		}
		return ptr(int32(v)), true
	}
	switch r.Intn(10) {
	case 0:
		return mset{map[string]string{"a": fmt.Sprintf("a + %d", k)}, func(_ int64, x urow) (urow, bool) {
			if x.a != nil {
				v, ok := fits(int64(*x.a) + int64(k))
				x.a = v
				return x, ok
			}
			return x, true
		}}
	case 1:
		m := int64([]int{-3, 2, 1000, 3000000}[r.Intn(4)]) // big factors overflow int32
		return mset{map[string]string{"a": fmt.Sprintf("a * %d", m)}, func(_ int64, x urow) (urow, bool) {
			if x.a != nil {
				v, ok := fits(int64(*x.a) * m)
				x.a = v
				return x, ok
			}
			return x, true
		}}
	case 2:
		return mset{map[string]string{"a": "NULL"}, func(_ int64, x urow) (urow, bool) { x.a = nil; return x, true }}
	case 3:
		return mset{map[string]string{"a": fmt.Sprint(k)}, func(_ int64, x urow) (urow, bool) { x.a = ptr(k); return x, true }}
	case 4:
		return mset{map[string]string{"f": "a / 4"}, func(_ int64, x urow) (urow, bool) {
			x.f = nil
			if x.a != nil {
				x.f = ptr(float64(*x.a) / 4)
			}
			return x, true
		}}
	case 5:
		return mset{map[string]string{"f": "COALESCE(f, 0) + 1"}, func(_ int64, x urow) (urow, bool) {
			if x.f == nil {
				x.f = ptr(1.0)
			} else {
				x.f = ptr(*x.f + 1)
			}
			return x, true
		}}
	case 6:
		s := fmt.Sprint("x", r.Intn(4))
		return mset{map[string]string{"s": "'" + s + "'"}, func(_ int64, x urow) (urow, bool) { x.s = ptr(s); return x, true }}
	case 7:
		return mset{map[string]string{"s": fmt.Sprintf("CASE WHEN a > %d THEN 'big' ELSE s END", k*100)}, func(_ int64, x urow) (urow, bool) {
			if x.a != nil && *x.a > k*100 {
				x.s = ptr("big")
			}
			return x, true
		}}
	case 8:
		return mset{map[string]string{"a": "id DIV 3", "s": "'both'", "f": "f"}, func(id int64, x urow) (urow, bool) {
			x.a, x.s = ptr(int32(id/3)), ptr("both")
			return x, true
		}}
	}
	return mset{map[string]string{"a": "CASE WHEN f IS NULL THEN NULL WHEN f > 0 THEN a ELSE -a END"}, func(_ int64, x urow) (urow, bool) {
		switch {
		case x.f == nil:
			x.a = nil
		case *x.f <= 0 && x.a != nil:
			x.a = ptr(-*x.a)
		}
		return x, true
	}}
}

// applyModel applies an update to a copy of m: the new state, the number of rows updated,
// and ok=false when some matching row makes it fail.
func applyModel(m urows, set mset, w mwhere) (urows, int64, bool) {
	next := maps.Clone(m)
	var n int64
	for id, row := range m {
		if !w.match(id, row) {
			continue
		}
		nr, ok := set.apply(id, row)
		if !ok {
			return nil, 0, false
		}
		next[id] = nr
		n++
	}
	return next, n, true
}
