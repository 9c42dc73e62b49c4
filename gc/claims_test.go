package gc

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
)

// TestOrphanedRecoveryClaims: a recovery claim whose sidecar is gone (its recovery died
// between deleting the sidecar and releasing the claim) is deleted by GC once older than
// the claim TTL, and reported (a dry run reports it and deletes nothing); a claim whose
// sidecar exists, and an orphaned claim younger than the TTL (by its file time or by the
// time it records), are kept.
func TestOrphanedRecoveryClaims(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	db := openDB(t, s)
	makeTable(t, db, "t", 2, 10)
	plantClaim := func(id string, taken, modified time.Duration) string {
		key := recovery.Dir + id + ".claim"
		b, err := json.Marshal(map[string]any{"token": "dead", "taken": time.Now().Add(-taken).UTC()})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root(t, s), filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-modified)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
		return key
	}
	ttl := recovery.DefaultClaimTTL
	orphan := plantClaim("01ORPHANOLD", time.Hour, time.Hour)
	young := plantClaim("01ORPHANYOUNG", ttl/4, ttl/4)
	recentlyTaken := plantClaim("01ORPHANRETAKEN", ttl/4, time.Hour) // an old object rewritten with a recent claim
	// A pending sidecar (young: recovery skips it) with an old claim: not an orphan.
	pendingID := "01PENDING"
	txn := manifest.NewTransactionID()
	sc := recovery.Sidecar{Format: recovery.Format, Kind: recovery.KindCompaction, OperationID: pendingID, Table: "t",
		Created: time.Now().UTC(), PublishedAtStart: 3,
		Attempts: []recovery.Attempt{{TxnID: txn, ReadVersion: 3, DataPrefix: "t/data/" + txn + "/"}}}
	if err := s.Put(ctx, recovery.Key(pendingID), sc.Encode()); err != nil {
		t.Fatal(err)
	}
	held := plantClaim(pendingID, time.Hour, time.Hour)

	keys := func(fs []File) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Key)
		}
		return out
	}
	exists := func(key string) bool {
		_, err := s.Head(ctx, key)
		return err == nil
	}
	dry, err := Run(ctx, s, db.Catalog(), "", Policy{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys(dry.OrphanClaims), []string{orphan}) || dry.OrphanClaimsKept != 2 || !exists(orphan) {
		t.Fatalf("dry run: orphan claims %v, kept %d; %s exists: %v", keys(dry.OrphanClaims), dry.OrphanClaimsKept, orphan, exists(orphan))
	}
	rep, err := Run(ctx, s, db.Catalog(), "", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys(rep.OrphanClaims), []string{orphan}) || rep.OrphanClaimsKept != 2 {
		t.Fatalf("orphan claims %v, kept %d", keys(rep.OrphanClaims), rep.OrphanClaimsKept)
	}
	if exists(orphan) {
		t.Fatalf("orphaned claim %s still there", orphan)
	}
	for _, k := range []string{young, recentlyTaken, held, recovery.Key(pendingID)} {
		if !exists(k) {
			t.Fatalf("%s deleted", k)
		}
	}
	// Once the young ones are old, they go too; the pending sidecar's claim stays.
	for _, k := range []string{young, recentlyTaken} {
		id := k[len(recovery.Dir) : len(k)-len(".claim")]
		plantClaim(id, time.Hour, time.Hour)
	}
	rep, err = Run(ctx, s, db.Catalog(), "t", Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(rep.OrphanClaims); len(got) != 2 || !slices.Contains(got, young) || !slices.Contains(got, recentlyTaken) || !exists(held) {
		t.Fatalf("second run: orphan claims %v; %s exists: %v", got, held, exists(held))
	}
}
