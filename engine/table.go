package engine

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// Table is a handle on one table at one version. Reads see that version; writes commit on
// top of it (rebasing over anything committed since) and move the handle to the version
// they committed. A handle from Checkout is read-only.
//
// Concurrency: reads of a handle (Scan, Count, Explain, Schema, Versions, …) may run in
// any number of goroutines at once, but a write or Refresh moves the handle, so it must
// not run concurrently with any other use of the same handle: open one handle per writer
// (DB.OpenTable is cheap: one etcd read and one GET). Handles in different goroutines and
// processes may write the same table at once; the commit loop orders them.
type Table struct {
	db       *DB
	name     string
	m        *manifest.Manifest
	readOnly bool
	// contended: other writers committed since this handle's previous write planned (its
	// refresh moved, or its commit rebased); the next commit then reads forward before its
	// first attempt (manifest.CommitOptions.CheckHead). A hint for speed only.
	contended bool
	// quiet counts this handle's commits in a row that met no other writer (up to
	// turnQuietCommits): while below, its commits take turns (so a new handle takes them
	// for its first commits, when writers started together meet first).
	quiet int
}

// Name is the table name.
func (t *Table) Name() string { return t.name }

// Version is the version this handle reads.
func (t *Table) Version() uint64 { return t.m.Version }

// ContentVersion is the version whose content the handle reads: Version, except for a
// prepared version of an aborted multi-table group, which counts as empty and reads as
// the nearest version below it that counts (manifest.Manifest.ContentVersion).
func (t *Table) ContentVersion() uint64 { return t.m.ContentVersion() }

// Manifest is the manifest of the version this handle reads.
func (t *Table) Manifest() *manifest.Manifest { return t.m }

// Schema is the table's Arrow schema at this version.
func (t *Table) Schema() *arrow.Schema { return t.m.Schema.MustArrow() }

// Refresh moves the handle to the latest published version (HEAD without a catalog, or
// when the table was never published), and makes a read-only handle writable again.
// Cost: one etcd read and one manifest GET. Errors: manifest.ErrTableNotFound (and
// ErrTableDropped) when the table is gone, corruption errors naming the manifest, catalog
// and store errors; the handle is unchanged on error.
func (t *Table) Refresh(ctx context.Context) error {
	m, err := t.db.latest(ctx, t.name)
	if err != nil {
		return err
	}
	t.m, t.readOnly = m, false
	return nil
}

// Checkout returns a read-only handle at version v (time travel). A prepared version of an
// aborted multi-table group reads as the nearest version below it that counts (see
// DB.OpenTableAt). Only versions of this handle's incarnation of the table are its
// versions: one of an earlier incarnation (the table was dropped and created again) or a
// drop marker is ErrVersionNotFound. Errors: manifest.ErrVersionNotFound.
func (t *Table) Checkout(ctx context.Context, v uint64) (*Table, error) {
	m, err := t.db.loadAt(ctx, t.name, v)
	if err != nil {
		return nil, err
	}
	if err := ofIncarnation(t.m, m); err != nil {
		return nil, err
	}
	return &Table{db: t.db, name: t.name, m: m, readOnly: true}, nil
}

// VersionInfo describes one committed version.
type VersionInfo struct {
	Version     uint64          // the version number
	Operation   manifest.OpKind // what its transaction did: "append", "delete", "rewrite", …
	Transaction string          // its transaction id (a ULID)
	ReadVersion uint64          // the version the transaction was planned on
	Time        time.Time       // when the version was committed (older manifests: when its transaction was planned)
	// Rows (live) and Fragments are what reading the version gives: those of
	// ContentVersion.
	Rows      int64 // live rows (deleted ones excluded)
	Fragments int   // fragments holding them
	Published bool  // at or below the published version (and not aborted)
	// Group is the multi-table transaction the version belongs to ("" = none); Aborted
	// says that group aborted, so the version counts as empty and reads as ContentVersion,
	// the nearest version below it that counts (0: that version expired, so this one
	// can no longer be read). ContentVersion is Version for every other version.
	Group          string
	Aborted        bool   // the version's group aborted: it reads as ContentVersion
	ContentVersion uint64 // the version whose rows reading this one gives
}

// Versions lists every version still readable, ascending (one LIST plus one GET per
// version number from the handle's incarnation's first, expired ones included). A
// prepared version of an aborted multi-table group is listed with Aborted set and the
// rows of the version it reads as. A pending group is not waited for: its versions are
// listed unpublished and not aborted. Versions of earlier incarnations of the table (it
// was dropped and created again) and drop markers are not listed. Errors: store errors,
// corruption errors naming a manifest, catalog errors reading a group's state.
func (t *Table) Versions(ctx context.Context) ([]VersionInfo, error) {
	vs, err := manifest.Versions(ctx, t.db.store, t.name)
	if err != nil {
		return nil, err
	}
	vs = slices.DeleteFunc(vs, func(v uint64) bool { return v < t.m.IncarnationSince })
	var published uint64
	if t.db.cat != nil {
		if p, _, err := t.db.cat.Get(ctx, t.name); err == nil {
			published = p.Version
		}
	}
	out := make([]VersionInfo, 0, len(vs))
	for _, v := range vs {
		m, err := manifest.Load(ctx, t.db.store, t.name, v)
		if errors.Is(err, manifest.ErrVersionNotFound) {
			continue // expired by GC (a tombstone), or deleted since the LIST
		}
		if err != nil {
			return nil, err
		}
		if m.Dropped() || !manifest.SameIncarnation(t.m, m) {
			continue
		}
		info := VersionInfo{
			Version: v, Operation: m.Txn.Op.Kind, Transaction: m.Txn.ID, ReadVersion: m.Txn.ReadVersion,
			Time: time.Unix(0, commitTime(m)).UTC(), Rows: m.LiveRows(), Fragments: len(m.Fragments),
			Published: t.db.cat == nil || v <= published, ContentVersion: v,
		}
		if g := m.Txn.Op.Group; g != nil && t.db.cat != nil {
			info.Group = g.ID
			st, err := t.db.cat.GroupState(ctx, g.ID)
			if err != nil {
				return nil, err
			}
			info.Aborted = st == catalog.GroupAborted
			info.Published = info.Published && !info.Aborted
		}
		if info.Aborted {
			// It reads as the version below it (itself resolved the same way), unless
			// that one is gone.
			info.ContentVersion, info.Rows, info.Fragments = 0, 0, 0
			if n := len(out); n > 0 && out[n-1].Version == v-1 {
				prev := out[n-1]
				info.ContentVersion, info.Rows, info.Fragments = prev.ContentVersion, prev.Rows, prev.Fragments
			}
		}
		out = append(out, info)
	}
	return out, nil
}

// CommitResult describes a committed write.
type CommitResult struct {
	Version   uint64   // the committed version (for a Duplicate, the earlier write's)
	Attempts  int      // put-if-absent attempts of the final commit
	Rebased   []uint64 // versions by others the commit was rebuilt on top of
	Published bool     // the catalog pointer is at or past Version
	Rows      int64    // rows appended or deleted (for a Duplicate, of this call's input as far as it was read: 0 when HEAD remembered the key before the write began)
	// Duplicate: the write's idempotency key (WithIdempotencyKey) had committed already,
	// as Version, by transaction DuplicateTxn; this call committed nothing new.
	Duplicate    bool
	DuplicateTxn string // the transaction id that committed the key, when Duplicate
	// AlsoPublished lists versions of other transactions that changed rows or the schema
	// (logical operations) and that this write's publish made visible: committed by
	// writers that had not published them yet (still running, or dead between their
	// commit and their publish). Maintenance versions are not listed.
	AlsoPublished []PublishedVersion
}

// PublishedVersion is a version a write published on another transaction's behalf.
type PublishedVersion struct {
	Version     uint64          `json:"version"`     // the version made visible
	Operation   manifest.OpKind `json:"operation"`   // what it did: "delete", "update", "overwrite", …
	Transaction string          `json:"transaction"` // its transaction id
}

// commitTime is when m was committed (Unix ns), or, for manifests written before that was
// recorded, when its transaction was planned.
func commitTime(m *manifest.Manifest) int64 {
	if m.Committed != 0 {
		return m.Committed
	}
	return m.Txn.Timestamp
}
