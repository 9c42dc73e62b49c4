package recovery

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// TestRunRemovesSidecar: an in-process run with sidecars leaves none behind and writes
// its data files under the attempt's prefix.
func TestRunRemovesSidecar(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 5, 20)
	before := rowsOf(t, db, "t")
	var armed []string
	ex := Enable(compaction.New(db))
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *compaction.Plan) error {
		keys, err := Pending(ctx, s, "t")
		armed = keys
		return err
	}
	st, err := ex.Run(ctx, "t", compaction.Options{TargetRows: 1000})
	if err != nil || st.Version == 0 {
		t.Fatalf("run: %+v, %v", st, err)
	}
	if len(armed) != 1 {
		t.Fatalf("sidecars before the commit: %v, want 1", armed)
	}
	checkRecovered(t, s, db, "t", before)
	m, err := manifest.LoadHead(ctx, s, "t")
	if err != nil {
		t.Fatal(err)
	}
	prefix := compaction.AttemptDataDir("t", st.TxnID) + "/"
	if k := m.Fragments[0].Files[0].Key; !strings.HasPrefix(k, prefix) {
		t.Fatalf("new data file %s is not under %s", k, prefix)
	}
}

// TestReplanExtendsSidecar: a concurrent delete forces a second attempt; the sidecar
// names both transactions before the second attempt writes, and after a failure in the
// second attempt Recover deletes the files of both.
func TestReplanExtendsSidecar(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 6, 20)
	var seen []Sidecar
	ex := Enable(compaction.New(db))
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *compaction.Plan) error {
		keys, err := Pending(ctx, s, "t")
		if err != nil || len(keys) != 1 {
			return errors.Join(err, errors.New("want one sidecar"))
		}
		b, err := s.Get(ctx, keys[0])
		if err != nil {
			return err
		}
		sc, err := Decode(b)
		if err != nil {
			return err
		}
		seen = append(seen, sc)
		if len(seen) == 1 {
			w, err := db.OpenTable(ctx, "t")
			if err != nil {
				return err
			}
			_, err = w.Delete(ctx, "id = 3")
			return err
		}
		return errors.New("stop here")
	}
	_, err := ex.Run(ctx, "t", compaction.Options{TargetRows: 1000})
	if err == nil || !strings.Contains(err.Error(), "stop here") {
		t.Fatalf("run: %v, want the hook's error", err)
	}
	// The second sidecar records the first attempt as rejected (its conflict is a
	// decision: recovery deletes its files without fencing it).
	first := seen[0].Attempts[0]
	first.Rejected = true
	if len(seen) != 2 || len(seen[1].Attempts) != 2 || seen[1].Attempts[0] != first ||
		seen[1].Attempts[1].ReadVersion != seen[0].Attempts[0].ReadVersion+1 {
		t.Fatalf("sidecars seen: %+v", seen)
	}
	before := rowsOf(t, db, "t") // the delete is part of the content now
	rep, err := Recover(ctx, s, db.Catalog(), "t", Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledBack {
		t.Fatalf("recover: %+v, %v", rep, err)
	}
	for _, a := range seen[1].Attempts {
		n := 0
		for _, k := range rep.Outcomes[0].DeletedFiles {
			if strings.HasPrefix(k, a.DataPrefix) {
				n++
			}
		}
		if n == 0 {
			t.Fatalf("no file of attempt %s deleted: %v", a.TxnID, rep.Outcomes[0].DeletedFiles)
		}
	}
	checkRecovered(t, s, db, "t", before)
}

type storeDB struct {
	s  store.Store
	db *engine.DB
}

// TestReplanThenSuccessCleansUp: a run that replanned and then committed removes the
// first attempt's files along with its sidecar (Phase D).
func TestReplanThenSuccessCleansUp(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 6, 20)
	attempts := 0
	ex := Enable(compaction.New(db))
	ex.Hooks.BeforeCommit = func(ctx context.Context, p *compaction.Plan) error {
		if attempts++; attempts > 1 {
			return nil
		}
		w, err := db.OpenTable(ctx, "t")
		if err != nil {
			return err
		}
		_, err = w.Delete(ctx, "id = 3")
		return err
	}
	st, err := ex.Run(ctx, "t", compaction.Options{TargetRows: 1000})
	if err != nil || st.Attempts != 2 || st.Version == 0 {
		t.Fatalf("run: %+v, %v", st, err)
	}
	before := rowsOf(t, db, "t")
	if len(before) != 119 {
		t.Fatalf("%d rows, want 119", len(before))
	}
	checkRecovered(t, s, db, "t", before) // no sidecar, no unreferenced data file
}

// crashAt prepares table t in a local store and kills a compacting child at seam.
func crashAt(t *testing.T, seam string) (*storeDB, []string) {
	t.Helper()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 6, 50)
	before := rowsOf(t, db, "t")
	if !runChild(t, s, "t", seam) {
		t.Fatalf("child not killed at %s", seam)
	}
	expireHolds(t, db, "t") // the killed child's hold, as its lease expiry would
	return &storeDB{s, db}, before
}

// TestRacingRecovers: two recoveries of one crashed compaction: one rolls it back, the
// other finds it claimed or gone; no file is reported deleted twice.
func TestRacingRecovers(t *testing.T) {
	ctx := context.Background()
	sd, before := crashAt(t, "manifest.before_version_put")
	var (
		wg   sync.WaitGroup
		reps [2]Report
		errs [2]error
	)
	for i := range 2 {
		wg.Go(func() { reps[i], errs[i] = Recover(ctx, sd.s, sd.db.Catalog(), "", Options{MinAge: -1}) })
	}
	wg.Wait()
	var actions, deleted []string
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("recover %d: %v", i, errs[i])
		}
		for _, o := range reps[i].Outcomes {
			actions = append(actions, o.Action)
			deleted = append(deleted, o.DeletedFiles...)
		}
	}
	if slices.Index(actions, RolledBack) < 0 || len(slices.DeleteFunc(slices.Clone(actions), func(a string) bool { return a != RolledBack })) != 1 {
		t.Fatalf("actions %v, want exactly one %s", actions, RolledBack)
	}
	for _, a := range actions {
		if a != RolledBack && a != SkippedClaimed && a != Gone {
			t.Fatalf("actions %v", actions)
		}
	}
	if len(deleted) == 0 || len(slices.Compact(slices.Sorted(slices.Values(deleted)))) != len(deleted) {
		t.Fatalf("deleted %v: want each file once", deleted)
	}
	t.Logf("racing recovers: %v", actions)
	checkRecovered(t, sd.s, sd.db, "t", before)
}

// TestYoungSidecarSkipped: by default a fresh sidecar may belong to a running compaction
// and is left alone; with MinAge < 0 it is resolved.
func TestYoungSidecarSkipped(t *testing.T) {
	ctx := context.Background()
	sd, before := crashAt(t, "compaction.after_sidecar")
	rep, err := Recover(ctx, sd.s, sd.db.Catalog(), "t", Options{})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != SkippedYoung {
		t.Fatalf("recover: %+v, %v", rep, err)
	}
	if keys, err := Pending(ctx, sd.s, ""); err != nil || len(keys) != 1 {
		t.Fatalf("pending %v, %v: want the sidecar kept", keys, err)
	}
	rep, err = Recover(ctx, sd.s, sd.db.Catalog(), "other", Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 0 {
		t.Fatalf("recover of another table: %+v, %v", rep, err)
	}
	if rep, err = Recover(ctx, sd.s, sd.db.Catalog(), "t", Options{MinAge: -1}); err != nil || rep.Outcomes[0].Action != RolledBack {
		t.Fatalf("recover: %+v, %v", rep, err)
	}
	checkRecovered(t, sd.s, sd.db, "t", before)
}

// TestForeignCommitNotAdopted: a version committed by another transaction after the
// crash is never published by Recover; the crashed run is rolled back.
func TestForeignCommitNotAdopted(t *testing.T) {
	ctx := context.Background()
	sd, _ := crashAt(t, "manifest.before_version_put")
	p0, _, err := sd.db.Catalog().Get(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	bare := compaction.New(sd.db)
	bare.Catalog = nil // commit without publishing: a foreign, unpublished version
	st, err := bare.Run(ctx, "t", compaction.Options{TargetRows: 1000})
	if err != nil || st.Version != p0.Version+1 {
		t.Fatalf("foreign commit: %+v, %v", st, err)
	}
	rep, err := Recover(ctx, sd.s, sd.db.Catalog(), "t", Options{MinAge: -1})
	if err != nil || len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != RolledBack {
		t.Fatalf("recover: %+v, %v", rep, err)
	}
	p1, _, err := sd.db.Catalog().Get(ctx, "t")
	if err != nil || p1.Version != p0.Version {
		t.Fatalf("pointer %d after recover, want %d (the foreign version %d unpublished): %v", p1.Version, p0.Version, st.Version, err)
	}
}

// TestNewerFormatRefused: a sidecar from a newer build is reported and kept.
func TestNewerFormatRefused(t *testing.T) {
	ctx := context.Background()
	s := storetest.Mem(t)
	key := Key("01ZZZZZZZZZZZZZZZZZZZZZZZZ")
	body := []byte(`{"format":2,"kind":"compaction","operation_id":"x","table":"t","created":"2020-01-01T00:00:00Z","attempts":[]}`)
	if err := s.Put(ctx, key, body); err != nil {
		t.Fatal(err)
	}
	rep, err := Recover(ctx, s, nil, "", Options{MinAge: -1})
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), key) {
		t.Fatalf("recover: %v, want ErrNewerFormat naming %s", err, key)
	}
	if len(rep.Outcomes) != 1 || rep.Outcomes[0].Action != Failed {
		t.Fatalf("report %+v", rep)
	}
	if _, err := s.Head(ctx, key); err != nil {
		t.Fatalf("sidecar removed: %v", err)
	}
}
