package compaction

import (
	"slices"
	"testing"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// frag describes a fragment for planner tests: id, physical rows, deleted rows.
type frag struct {
	id            uint32
	rows, deleted int64
}

func testManifest(fs []frag, indexes ...manifest.Index) *manifest.Manifest {
	m := &manifest.Manifest{Table: "t", Version: 7, Indexes: indexes}
	for _, f := range fs {
		mf := manifest.Fragment{ID: f.id, PhysicalRows: f.rows,
			Files: []fragment.DataFile{{Key: "t/data/x.arrow", Size: f.rows * 10, Rows: f.rows}}}
		if f.deleted > 0 {
			mf.Deletion = &manifest.DeletionFile{Key: "t/_deletions/x", Deleted: f.deleted}
		}
		m.Fragments = append(m.Fragments, mf)
	}
	return m
}

func TestNewPlan(t *testing.T) {
	ix := func(name string, ids ...uint32) manifest.Index {
		return manifest.Index{Name: name, Fragments: ids}
	}
	cases := []struct {
		name    string
		frags   []frag
		indexes []manifest.Index
		opts    Options
		want    [][]uint32
	}{
		{"empty table", nil, nil, Options{}, nil},
		{"all small adjacent", []frag{{1, 10, 0}, {2, 10, 0}, {3, 10, 0}}, nil, Options{TargetRows: 100},
			[][]uint32{{1, 2, 3}}},
		{"a large fragment splits the run", []frag{{1, 10, 0}, {2, 10, 0}, {3, 100, 0}, {4, 10, 0}, {5, 10, 0}}, nil,
			Options{TargetRows: 100}, [][]uint32{{1, 2}, {4, 5}}},
		{"single small fragment is a no-op", []frag{{1, 10, 0}, {2, 100, 0}, {3, 10, 0}}, nil, Options{TargetRows: 100}, nil},
		{"single small fragment with few deletions is a no-op", []frag{{1, 100, 0}, {2, 50, 1}, {3, 100, 0}}, nil,
			Options{TargetRows: 100}, nil},
		{"bins close at the target", []frag{{1, 40, 0}, {2, 40, 0}, {3, 40, 0}, {4, 40, 0}, {5, 40, 0}}, nil,
			Options{TargetRows: 100}, [][]uint32{{1, 2}, {3, 4}}},
		{"target counts live rows", []frag{{1, 90, 60}, {2, 90, 60}, {3, 90, 60}}, nil,
			Options{TargetRows: 100}, [][]uint32{{1, 2, 3}}},
		{"large fragment with many deletions alone", []frag{{1, 200, 0}, {2, 200, 30}, {3, 200, 0}}, nil,
			Options{TargetRows: 100}, [][]uint32{{2}}},
		{"deleted ratio at the threshold is not enough", []frag{{1, 200, 20}}, nil, Options{TargetRows: 100}, nil},
		{"custom ratio", []frag{{1, 200, 20}}, nil, Options{TargetRows: 100, DeletedRatio: 0.05}, [][]uint32{{1}}},
		{"negative ratio: any deletion", []frag{{1, 200, 1}}, nil, Options{TargetRows: 100, DeletedRatio: -1}, [][]uint32{{1}}},
		{"ratio 1 turns materialization off", []frag{{1, 200, 150}}, nil, Options{TargetRows: 100, DeletedRatio: 1}, nil},
		{"heavy and small neighbours merge", []frag{{1, 10, 0}, {2, 50, 40}, {3, 10, 0}}, nil, Options{TargetRows: 100},
			[][]uint32{{1, 2, 3}}},
		{"heavy fragment above the target does not absorb neighbours", []frag{{1, 10, 0}, {2, 500, 100}, {3, 10, 0}}, nil,
			Options{TargetRows: 100}, [][]uint32{{2}}},
		{"index boundary", []frag{{1, 10, 0}, {2, 10, 0}, {3, 10, 0}, {4, 10, 0}}, []manifest.Index{ix("a", 1, 2)},
			Options{TargetRows: 100}, [][]uint32{{1, 2}, {3, 4}}},
		{"index set change between two indexes", []frag{{1, 10, 0}, {2, 10, 0}, {3, 10, 0}, {4, 10, 0}},
			[]manifest.Index{ix("a", 1, 2, 3, 4), ix("b", 3, 4)}, Options{TargetRows: 100}, [][]uint32{{1, 2}, {3, 4}}},
		{"index boundary leaves a single no-op", []frag{{1, 10, 0}, {2, 10, 0}, {3, 10, 0}}, []manifest.Index{ix("a", 3)},
			Options{TargetRows: 100}, [][]uint32{{1, 2}}},
		{"default target is 1Mi rows", []frag{{1, 1 << 19, 0}, {2, 1 << 19, 0}, {3, 1, 0}, {4, 1 << 20, 0}}, nil, Options{},
			[][]uint32{{1, 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := testManifest(c.frags, c.indexes...)
			p := NewPlan(m, c.opts)
			var got [][]uint32
			for _, g := range p.Groups {
				got = append(got, g.Old)
			}
			if !slices.EqualFunc(got, c.want, slices.Equal) {
				t.Fatalf("groups %v, want %v", got, c.want)
			}
			if p.ReadVersion != 7 || p.Txn.ReadVersion != 7 || p.Txn.Op.Kind != manifest.OpRewrite || p.Txn.ID == "" {
				t.Fatalf("plan header: read v%d, txn %+v", p.ReadVersion, p.Txn)
			}
			if len(p.Txn.Op.Groups) != len(p.Groups) {
				t.Fatalf("txn has %d groups, plan %d", len(p.Txn.Op.Groups), len(p.Groups))
			}
			for i, g := range p.Groups {
				if !slices.Equal(p.Txn.Op.Groups[i].Old, g.Old) {
					t.Fatalf("txn group %d = %v, plan %v", i, p.Txn.Op.Groups[i].Old, g.Old)
				}
				var phys, live int64
				for _, id := range g.Old {
					f, _ := m.Fragment(id)
					phys += f.PhysicalRows
					live += f.LiveRows()
				}
				if g.PhysicalRows != phys || g.LiveRows != live || g.Bytes != phys*10 {
					t.Fatalf("group %d rows %d/%d bytes %d, want %d/%d/%d", i, g.PhysicalRows, g.LiveRows, g.Bytes, phys, live, phys*10)
				}
				if g.LiveRows > p.Options.TargetRows && len(g.Old) > 1 {
					t.Fatalf("group %d holds %d live rows, past the target %d", i, g.LiveRows, p.Options.TargetRows)
				}
			}
		})
	}
}

// TestNewPlanMintsFreshTransactions: each plan gets its own transaction id (a replan must
// not reuse the id of an attempt that may have landed).
func TestNewPlanMintsFreshTransactions(t *testing.T) {
	m := testManifest([]frag{{1, 10, 0}, {2, 10, 0}})
	a, b := NewPlan(m, Options{}), NewPlan(m, Options{})
	if a.Txn.ID == b.Txn.ID {
		t.Fatalf("two plans share transaction id %s", a.Txn.ID)
	}
	if a.Rows() != 20 || a.OldFragments() != 2 || a.Empty() {
		t.Fatalf("plan %s", a)
	}
}
