package indextest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/gc"
	"github.com/shale-db/shale/manifest"
)

// heldBuild starts a child building b on f's table, held at engine.index_commit (its
// objects stored, its commit not begun) until the returned release is called.
func heldBuild(t *testing.T, f *fixture, b build) (p *proc, release func()) {
	t.Helper()
	gate := filepath.Join(t.TempDir(), "go")
	p = start(t, f.s, "t", b, "engine.index_commit=block("+gate+")")
	f.waitIndexObjects(p)
	return p, func() {
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAppendsDuringPreparation: rows appended by another process while an index is
// prepared do not stop its commit; their fragments stay uncovered, and every query,
// with the index forced or without it, still returns them.
func TestAppendsDuringPreparation(t *testing.T) {
	for _, b := range []build{btreeK, zonesIDK} {
		t.Run(b.kind, func(t *testing.T) {
			f := newFixture(t)
			before := fragmentIDs(f.table())
			p, release := heldBuild(t, f, b)
			tbl := f.table()
			f.appendRows(tbl, 10_000, 1500, 1000) // k in [1000, 2000): beyond every indexed value
			f.appendRows(tbl, 11_500, 1500, 1000)
			release()
			r, _ := p.wait(t)
			if r.Outcome != engine.Committed.String() || r.Err != "" {
				t.Fatalf("build: %+v; want committed", r)
			}
			after := f.table()
			if after.Version() != r.Version {
				t.Fatalf("published v%d, the build committed v%d", after.Version(), r.Version)
			}
			if cov := coverage(after); !slices.Equal(cov[b.name], before) || len(fragmentIDs(after)) != len(before)+2 {
				t.Fatalf("coverage %v of fragments %v; want the %d built from", cov, fragmentIDs(after), len(before))
			}
			preds := append(f.predicates(30), "k >= 1000", "k BETWEEN 1500 AND 1510", "id >= 10000 AND k > 1200")
			got := answers(t, "after the build", after, preds)
			if n := len(got["k >= 1000"]); n < 2700 {
				t.Fatalf("k >= 1000: %d rows; the appended ones are missing", n)
			}
			f.checkSound()
		})
	}
}

// TestDeletesDuringPreparation: rows of covered fragments deleted by another process
// while an index is prepared do not stop its commit (deletion vectors apply to what an
// index returns), and no query returns them, with the index forced or without it.
func TestDeletesDuringPreparation(t *testing.T) {
	for _, b := range []build{btreeK, zonesIDK} {
		t.Run(b.kind, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			preds := append(f.predicates(30), "k < 100", "k = 50", "id BETWEEN 2400 AND 2600")
			p, release := heldBuild(t, f, b)
			res, err := f.table().Delete(ctx, "k < 100 OR (id >= 2400 AND id < 2600)")
			if err != nil || res.Rows == 0 {
				t.Fatalf("delete: %+v %v", res, err)
			}
			want := answers(t, "after the delete", f.table(), preds)
			release()
			r, _ := p.wait(t)
			if r.Outcome != engine.Committed.String() || r.Err != "" {
				t.Fatalf("build: %+v; want committed", r)
			}
			after := f.table()
			if cov := coverage(after); !slices.Equal(cov[b.name], fragmentIDs(after)) {
				t.Fatalf("coverage %v, fragments %v", cov, fragmentIDs(after))
			}
			got := answers(t, "after the build", after, preds)
			for _, p := range preds {
				if !slices.Equal(got[p], want[p]) {
					t.Fatalf("%q: %d rows, %d after the delete", p, len(got[p]), len(want[p]))
				}
			}
			for _, p := range preds {
				for _, row := range got[p] {
					var id, k int64 = -1, -1
					fmt.Sscanf(row, "%d|%d|", &id, &k)
					if (k >= 0 && k < 100) || (id >= 2400 && id < 2600) {
						t.Fatalf("%q returned the deleted row %s", p, row)
					}
				}
			}
			f.checkSound()
		})
	}
}

// TestCompactionDuringPreparation: a compaction by another process that rewrites
// fragments the index covers makes the prepared index stale: its commit is rejected with
// ErrStalePreparation (errors.Is), the table gains no index, and answers are unchanged.
func TestCompactionDuringPreparation(t *testing.T) {
	for _, b := range []build{btreeK, zonesIDK} {
		t.Run(b.kind, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			preds := f.predicates(30)
			want := answers(t, "before", f.table(), preds)
			p, release := heldBuild(t, f, b)
			st, err := compaction.New(f.db).Run(ctx, "t", compaction.Options{TargetRows: 100_000})
			if err != nil || st.FragmentsRemoved != 4 {
				t.Fatalf("compaction: %+v %v", st, err)
			}
			release()
			r, _ := p.wait(t)
			if r.Outcome != engine.Rejected.String() || !r.Stale || !strings.Contains(r.Err, "stale") {
				t.Fatalf("build: %+v; want rejected with ErrStalePreparation", r)
			}
			after := f.table()
			if len(after.Manifest().Indexes) != 0 || after.Version() != st.Version {
				t.Fatalf("v%d indexes %+v; want the compaction's v%d and no index", after.Version(), after.Manifest().Indexes, st.Version)
			}
			got := answers(t, "after", after, preds)
			for _, p := range preds {
				if !slices.Equal(got[p], want[p]) {
					t.Fatalf("%q: %d rows, %d before", p, len(got[p]), len(want[p]))
				}
			}
			f.collectRejected()
		})
	}
}

// TestSameNameIndexDuringPreparation: an index of the same name committed by another
// process while one is prepared makes the prepared one stale: rejected with
// ErrStalePreparation; the table keeps the other.
func TestSameNameIndexDuringPreparation(t *testing.T) {
	for _, b := range []build{btreeK, zonesIDK} {
		t.Run(b.kind, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			p, release := heldBuild(t, f, b)
			winner, err := f.table().CreateIndex(ctx, engine.IndexSpec{Name: b.name, Kind: b.kind, Columns: strings.Split(b.column, ",")})
			if err != nil {
				t.Fatal(err)
			}
			release()
			r, _ := p.wait(t)
			if r.Outcome != engine.Rejected.String() || !r.Stale {
				t.Fatalf("build: %+v; want rejected with ErrStalePreparation", r)
			}
			after := f.table()
			if ix := after.Manifest().Indexes; len(ix) != 1 || after.Version() != winner.Version || ix[0].Version != winner.Version-1 {
				t.Fatalf("v%d indexes %+v; want only the one committed in v%d", after.Version(), ix, winner.Version)
			}
			answers(t, "after", after, f.predicates(30))
			f.collectRejected()
		})
	}
}

// collectRejected: the objects of a rejected build are the only ones no version names,
// all of one transaction; gc fences it and deletes them, after which the table is sound.
func (f *fixture) collectRejected() {
	f.t.Helper()
	un := f.unreferencedIndexObjects()
	txns := map[string]bool{}
	for _, k := range un {
		id, _ := manifest.KeyTxn("t", k)
		txns[id] = true
	}
	if len(un) == 0 || len(txns) != 1 {
		f.t.Fatalf("unreferenced index objects %v; want the rejected build's", un)
	}
	rep, err := gc.Run(context.Background(), f.s, f.db.Catalog(), "t", gc.Policy{KeepLast: 1000, GracePeriod: -1})
	if err != nil {
		f.t.Fatal(err)
	}
	if tr := rep.Tables[0]; tr.Fence == 0 {
		f.t.Fatalf("gc deleted %v without fencing the rejected build", tr.Deleted)
	}
	f.checkSound()
}
