package repair

import (
	"errors"
	"testing"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
)

func mv(v uint64, id string, kind manifest.OpKind) *manifest.Manifest {
	return &manifest.Manifest{Table: "t", Version: v, Txn: manifest.Transaction{ID: id, Op: manifest.Operation{Kind: kind}}}
}

// gv is version v of a multi-table group member.
func gv(v uint64, id, group string) *manifest.Manifest {
	m := mv(v, id, manifest.OpAppend)
	m.Txn.Op.Group = &manifest.GroupRef{ID: group, Tables: []string{"t", "u"}}
	return m
}

func sidecar(table string, txns ...string) recovery.Keyed {
	sc := recovery.Sidecar{Format: recovery.Format, Kind: recovery.KindCompaction, OperationID: "op-" + table, Table: table}
	for _, id := range txns {
		sc.Attempts = append(sc.Attempts, recovery.Attempt{TxnID: id, DataPrefix: table + "/data/" + id + "/"})
	}
	return recovery.Keyed{Key: recovery.Key(sc.OperationID), Sidecar: sc}
}

func TestClassify(t *testing.T) {
	rewrite, index, wal := manifest.OpRewrite, manifest.OpCreateIndex, manifest.OpMergeWAL
	cases := []struct {
		name            string
		published, head uint64
		versions        []*manifest.Manifest
		sidecars        []recovery.Keyed
		groups          map[string]catalog.GroupState
		want            Decision
		target          uint64 // 0: head when there is drift
		classes         []Class
		wantErr         error // Allowed without force
		forceErr        error // Allowed with force
	}{
		{name: "none", published: 5, head: 5, want: NoDrift},
		{name: "ahead", published: 6, head: 5, want: PublishedAhead, wantErr: ErrPublishedAhead, forceErr: ErrPublishedAhead},
		{name: "maintenance only", published: 3, head: 6,
			versions: []*manifest.Manifest{mv(4, "a", rewrite), mv(5, "b", index), mv(6, "c", wal)},
			want:     Publishable, classes: []Class{Maintenance, Maintenance, Maintenance}},
		{name: "one logical", published: 3, head: 5,
			versions: []*manifest.Manifest{mv(4, "a", rewrite), mv(5, "b", manifest.OpAppend)},
			want:     NeedsForce, classes: []Class{Maintenance, Logical}, wantErr: ErrLogicalDrift},
		{name: "never published", published: 0, head: 1,
			versions: []*manifest.Manifest{mv(1, "a", manifest.OpCreate)},
			want:     NeedsForce, classes: []Class{Logical}, wantErr: ErrLogicalDrift},
		{name: "sidecar names a drifting txn", published: 3, head: 5,
			versions: []*manifest.Manifest{mv(4, "a", manifest.OpDelete), mv(5, "b", rewrite)},
			sidecars: []recovery.Keyed{sidecar("t", "x", "b")},
			want:     RunRecover, classes: []Class{Logical, Maintenance}, wantErr: ErrSidecarPending, forceErr: ErrSidecarPending},
		{name: "sidecars that name nothing here", published: 3, head: 4,
			versions: []*manifest.Manifest{mv(4, "a", rewrite)},
			// another table's sidecar with the same txn id, and one of ours that never landed
			sidecars: []recovery.Keyed{sidecar("u", "a"), sidecar("t", "zz")},
			want:     Publishable, classes: []Class{Maintenance}},
		{name: "unreadable sidecar", published: 3, head: 4,
			versions: []*manifest.Manifest{mv(4, "a", rewrite)},
			sidecars: []recovery.Keyed{{Key: "_recovery/bad.json", Err: recovery.ErrCorrupt}},
			want:     RunRecover, classes: []Class{Maintenance}, wantErr: ErrSidecarPending, forceErr: ErrSidecarPending},
		{name: "pending group", published: 3, head: 5,
			versions: []*manifest.Manifest{mv(4, "a", rewrite), gv(5, "b", "g1")},
			groups:   map[string]catalog.GroupState{"g1": catalog.GroupPending},
			want:     GroupPending, classes: []Class{Maintenance, Logical}, wantErr: ErrGroupPending, forceErr: ErrGroupPending},
		{name: "group of unknown state counts as pending", published: 3, head: 4,
			versions: []*manifest.Manifest{gv(4, "b", "g1")},
			want:     GroupPending, classes: []Class{Logical}, wantErr: ErrGroupPending, forceErr: ErrGroupPending},
		{name: "aborted member at HEAD is not the target", published: 3, head: 5,
			versions: []*manifest.Manifest{mv(4, "a", rewrite), gv(5, "b", "g1")},
			groups:   map[string]catalog.GroupState{"g1": catalog.GroupAborted},
			want:     Publishable, target: 4, classes: []Class{Maintenance, Aborted}},
		{name: "aborted member below a maintenance version", published: 3, head: 5,
			versions: []*manifest.Manifest{gv(4, "b", "g1"), mv(5, "a", rewrite)},
			groups:   map[string]catalog.GroupState{"g1": catalog.GroupAborted},
			want:     Publishable, classes: []Class{Aborted, Maintenance}},
		{name: "only aborted", published: 3, head: 4,
			versions: []*manifest.Manifest{gv(4, "b", "g1")},
			groups:   map[string]catalog.GroupState{"g1": catalog.GroupAborted},
			want:     OnlyAborted, classes: []Class{Aborted}},
		{name: "committed group member is logical", published: 3, head: 4,
			versions: []*manifest.Manifest{gv(4, "b", "g1")},
			groups:   map[string]catalog.GroupState{"g1": catalog.GroupCommitted},
			want:     NeedsForce, classes: []Class{Logical}, wantErr: ErrLogicalDrift},
		{name: "versions outside the range are ignored", published: 3, head: 4,
			versions: []*manifest.Manifest{mv(3, "old", manifest.OpAppend), mv(4, "a", rewrite), mv(5, "new", manifest.OpAppend), nil},
			want:     Publishable, classes: []Class{Maintenance}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Classify("t", c.published, c.head, c.versions, c.sidecars, c.groups)
			if p.Decision != c.want {
				t.Fatalf("decision %s, want %s (%+v)", p.Decision, c.want, p)
			}
			target := c.target
			if target == 0 && c.head > c.published && c.want != OnlyAborted {
				target = c.head
			}
			if p.Target != target {
				t.Fatalf("target %d, want %d", p.Target, target)
			}
			if len(p.Versions) != len(c.classes) {
				t.Fatalf("%d versions, want %d: %+v", len(p.Versions), len(c.classes), p.Versions)
			}
			for i, v := range p.Versions {
				if v.Class != c.classes[i] || v.Version != c.published+uint64(i)+1 {
					t.Fatalf("version %d: %+v, want v%d %s", i, v, c.published+uint64(i)+1, c.classes[i])
				}
			}
			if err := Allowed(p, false); !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Fatalf("Allowed: %v, want %v", err, c.wantErr)
			}
			if err := Allowed(p, true); !errors.Is(err, c.forceErr) || (c.forceErr == nil) != (err == nil) {
				t.Fatalf("Allowed with force: %v, want %v", err, c.forceErr)
			}
		})
	}
	p := Classify("t", 3, 5, []*manifest.Manifest{mv(4, "a", manifest.OpDelete), mv(5, "b", rewrite)}, []recovery.Keyed{sidecar("t", "b")}, nil)
	if p.Versions[0].Sidecar != "" || p.Versions[1].Sidecar != recovery.Key("op-t") {
		t.Fatalf("sidecar attribution: %+v", p.Versions)
	}
}
