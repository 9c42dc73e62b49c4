package recovery

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// TestSidecarPrefixesPerKind: a sidecar decodes only when each attempt's prefix is its
// own transaction's directory of the kind's (data files for a compaction, index objects
// for an index build), so no sidecar can make recovery delete foreign files.
func TestSidecarPrefixesPerKind(t *testing.T) {
	txn := manifest.NewTransactionID()
	other := manifest.NewTransactionID()
	at := func(prefix string) []Attempt { return []Attempt{{TxnID: txn, ReadVersion: 3, DataPrefix: prefix}} }
	for _, c := range []struct {
		name     string
		kind     string
		table    string
		attempts []Attempt
		ok       bool
	}{
		{"compaction", KindCompaction, "t", at("t/data/" + txn + "/"), true},
		{"index", KindIndex, "t", at("t/_indices/" + txn + "/"), true},
		{"compaction naming index objects", KindCompaction, "t", at("t/_indices/" + txn + "/"), false},
		{"index naming data files", KindIndex, "t", at("t/data/" + txn + "/"), false},
		{"index naming the whole index directory", KindIndex, "t", at("t/_indices/"), false},
		{"compaction naming the whole data directory", KindCompaction, "t", at("t/data/"), false},
		{"index naming another transaction's objects", KindIndex, "t", at("t/_indices/" + other + "/"), false},
		{"index naming another table's objects", KindIndex, "t", at("u/_indices/" + txn + "/"), false},
		{"index without the trailing slash", KindIndex, "t", at("t/_indices/" + txn), false},
		{"index of a bad table name", KindIndex, "../t", at("../t/_indices/" + txn + "/"), false},
		{"index with a bad transaction id", KindIndex, "t", []Attempt{{TxnID: "..", DataPrefix: "t/_indices/../"}}, false},
		{"index with two attempts", KindIndex, "t", append(at("t/_indices/"+txn+"/"), Attempt{TxnID: other, DataPrefix: "t/_indices/" + other + "/"}), false},
	} {
		sc := Sidecar{Format: Format, Kind: c.kind, OperationID: "op", Table: c.table, Created: time.Now(), Attempts: c.attempts}
		got, err := Decode(sc.Encode())
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrCorrupt)) {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
			continue
		}
		if err != nil {
			continue
		}
		want := []string{"t/data/" + txn + "/", "t/_indices/" + txn + "/"}
		if c.kind == KindIndex {
			want = want[1:]
		}
		if !slices.Equal(got.Prefixes(), want) {
			t.Errorf("%s: prefixes %v, want %v", c.name, got.Prefixes(), want)
		}
	}
	if err := (IndexSidecars{Store: storetest.Mem(t)}).Arm(context.Background(), &engine.IndexIntent{
		OperationID: "op", Table: "t", TxnID: txn, Prefix: "t/data/"}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("arm of a sidecar naming data files: %v, want ErrCorrupt", err)
	}
}

// keepSidecars arms like IndexSidecars but never disarms: the sidecar a build that died
// before its Phase D would leave.
type keepSidecars struct{ IndexSidecars }

func (keepSidecars) Disarm(context.Context, *engine.IndexIntent) error { return nil }

// indexObjects lists the objects under table's _indices/.
func indexObjects(t *testing.T, s store.Store, table string) []string {
	t.Helper()
	objs, err := s.List(context.Background(), manifest.IndicesDir(table)+"/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// TestRecoverIndexSidecar: an index build's sidecar left behind is resolved like a
// compaction's. Built and published: nothing to do but remove it. Committed, not
// published: rolled forward. Not committed (its objects written): fenced, then every
// object under its index prefix deleted; the index never appears. A second Recover does
// nothing.
func TestRecoverIndexSidecar(t *testing.T) {
	for _, c := range []struct {
		name   string
		seam   string // in-process failpoint error ("" = none)
		action string
	}{
		{"published", "", AlreadyPublished},
		{"not published", "engine.before_publish", RolledForward},
		{"not committed", "engine.index_commit", RolledBack},
		{"before the txn record", "manifest.before_txn_put", RolledBack},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := storetest.Mem(t)
			db := enginetest.OpenDB(t, s, engine.Options{IndexSidecars: keepSidecars{IndexSidecars{Store: s}}})
			makeTable(t, db, "t", 4, 50)
			before := rowsOf(t, db, "t")
			tbl, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if c.seam != "" {
				defer failpoint.Enable(c.seam, failpoint.Error(errors.New("crash")).Once())()
			}
			_, err = tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"id"}})
			if (err != nil) != (c.seam != "") {
				t.Fatalf("build: %v", err)
			}
			sc := pendingOne(t, s, "t").Sidecar
			if sc.Kind != KindIndex || len(sc.Attempts) != 1 || !strings.HasPrefix(sc.Attempts[0].DataPrefix, "t/_indices/") {
				t.Fatalf("sidecar %+v", sc)
			}
			objs := indexObjects(t, s, "t")
			if len(objs) != 2 {
				t.Fatalf("index objects %v, want the lookup and the pages", objs)
			}
			rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
			if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != c.action {
				t.Fatalf("recover: %+v %v, want %s", rep, err, c.action)
			}
			o := rep.Outcomes[0]
			after, err := db.OpenTable(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			equalRows(t, enginetest.Rows(t, after), before)
			if c.action == RolledBack {
				if o.Fence == 0 || !slices.Equal(o.DeletedFiles, objs) || len(indexObjects(t, s, "t")) != 0 || len(after.Indexes()) != 0 {
					t.Fatalf("roll back: %+v, objects left %v, indexes %+v", o, indexObjects(t, s, "t"), after.Indexes())
				}
				// The fenced transaction can never commit.
				head, err := manifest.LoadHead(ctx, s, "t")
				if err != nil || head.Txn.Op.Kind != manifest.OpAbort || !slices.Contains(head.Txn.Op.Aborted, sc.Attempts[0].TxnID) {
					t.Fatalf("HEAD %+v %v, want the abort naming the build", head.Txn, err)
				}
			} else {
				if len(o.DeletedFiles) != 0 || !slices.Equal(indexObjects(t, s, "t"), objs) {
					t.Fatalf("roll forward deleted %v (objects %v)", o.DeletedFiles, indexObjects(t, s, "t"))
				}
				if ix := after.Indexes(); len(ix) != 1 || ix[0].FragmentsCovered != 4 || after.Version() != o.Version {
					t.Fatalf("indexes %+v at v%d, want the build published (v%d)", ix, after.Version(), o.Version)
				}
			}
			if n, err := Pending(ctx, s, ""); err != nil || len(n) != 0 {
				t.Fatalf("sidecars left: %v %v", n, err)
			}
			rep, err = Recover(ctx, s, db.Catalog(), "", Options{MinAge: -1})
			if err != nil || len(rep.Outcomes) != 0 {
				t.Fatalf("second recover: %+v %v", rep, err)
			}
		})
	}
}

// TestRecoverSkipsLiveIndexBuild: a build in progress (its hold alive) is never rolled
// back, whatever the sidecar's age, and its objects stay.
func TestRecoverSkipsLiveIndexBuild(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	db := enginetest.OpenDB(t, s, engine.Options{IndexSidecars: IndexSidecars{Store: s}})
	makeTable(t, db, "t", 3, 50)
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	var rerr error
	defer failpoint.Enable("engine.index_commit", failpoint.Call(func(ctx context.Context) error {
		rep, rerr = Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
		return nil
	}))()
	if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"s"}, Kind: index.KindZoneMap}); err != nil {
		t.Fatalf("build: %v", err)
	}
	if rerr != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != SkippedLive {
		t.Fatalf("recover during the build: %+v %v, want skipped-live", rep, rerr)
	}
	after, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if ix := after.Indexes(); len(ix) != 1 || ix[0].FragmentsCovered != 3 {
		t.Fatalf("indexes %+v", ix)
	}
	if n, err := Pending(ctx, s, ""); err != nil || len(n) != 0 {
		t.Fatalf("sidecars left: %v %v", n, err)
	}
}

// TestCompactionSidecarOwnsZoneMaps: a compaction attempt's sidecar owns the zone maps
// it writes for its new fragments (<table>/_indices/<txn>/): after a failure before the
// commit, Recover deletes them with the data files.
func TestCompactionSidecarOwnsZoneMaps(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 4, 50)
	tbl, err := db.OpenTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"id"}, Kind: index.KindZoneMap}); err != nil {
		t.Fatal(err)
	}
	built := indexObjects(t, s, "t")
	ex := Enable(compaction.New(db))
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *compaction.Plan) error { return errors.New("crash before the commit") }
	if _, err := ex.Run(ctx, "t", compaction.Options{TargetRows: 1000}); err == nil {
		t.Fatal("compaction committed")
	}
	if got := indexObjects(t, s, "t"); len(got) != len(built)+1 {
		t.Fatalf("index objects %v, want the build's and the compaction's zone map", got)
	}
	rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledBack {
		t.Fatalf("recover: %+v %v", rep, err)
	}
	if got := indexObjects(t, s, "t"); !slices.Equal(got, built) {
		t.Fatalf("index objects after recover %v, want %v", got, built)
	}
	if un := unreferenced(t, s, "t"); len(un) != 0 {
		t.Fatalf("unreferenced data files %v", un)
	}
}
