package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// Failpoint seams (internal/failpoint; free unless enabled), in the order a run passes
// them. after_expire_manifest fires after each expired version's manifest is replaced by
// its tombstone, after_fence after the abort version fencing uncommitted writers' files,
// mid_file_delete after each file deleted.
var (
	seamAfterPlan           = failpoint.Seam("gc.after_plan")
	seamAfterExpireManifest = failpoint.Seam("gc.after_expire_manifest")
	seamAfterFence          = failpoint.Seam("gc.after_fence")
	seamMidFileDelete       = failpoint.Seam("gc.mid_file_delete")
	seamBeforeDone          = failpoint.Seam("gc.before_done")
)

// Seams lists the seam names above, in order (crash tests iterate over it).
var Seams = []string{"gc.after_wal_manifests", "gc.after_plan", "gc.after_expire_manifest", "gc.after_fence", "gc.mid_file_delete", "gc.before_done"}

// File is one object GC deleted (or, in a dry run, would delete).
type File struct {
	Key   string `json:"key"`             // the object key
	Bytes int64  `json:"bytes"`           // its size
	Class Class  `json:"class,omitempty"` // why it went: Garbage, or ExpiredVersion for an expired version's transaction record
}

// TableReport is what Run did to one table. In JSON every list is [] when empty, never
// null, and Kept/KeptBytes are {} (see MarshalJSON).
type TableReport struct {
	Table     string `json:"table"`     // the table collected
	Published uint64 `json:"published"` // the catalog pointer (0: none or no catalog)
	Head      uint64 `json:"head"`      // the highest version in the store
	Floor     uint64 `json:"floor"`     // lowest retained version
	// Dropped: the table's HEAD is a drop marker (found during the run); its leftovers
	// are collected as a dropped table's (Report.DroppedLeftovers), not here.
	Dropped bool `json:"dropped,omitempty"`
	// IncarnationSince is the first version of HEAD's incarnation (the Create after a
	// drop marker; 0 for tables of older builds): versions below it belong to
	// incarnations a drop ended, and are deleted with their files as garbage.
	IncarnationSince uint64         `json:"incarnation_since,omitempty"`
	Holds            []catalog.Hold `json:"holds"`                      // live catalog holds on the table (running operations, pins, long writes)
	LowWatermark     uint64         `json:"low_watermark,omitempty"`    // the lowest version a hold or pending sidecar needs, when HasLow
	HasLow           bool           `json:"has_low_watermark"`          // LowWatermark is set
	Sidecars         int            `json:"pending_sidecars,omitempty"` // pending sidecars left after recovery
	Retained         []uint64       `json:"retained"`                   // versions kept, ascending (Floor to Head)
	Expired          []uint64       `json:"expired"`                    // versions this run replaced by tombstones
	// ExpiredManifestBytes is the size of the expired versions' manifests, each now
	// replaced by a tombstone of about 60 bytes.
	ExpiredManifestBytes int64 `json:"expired_manifest_bytes"`
	// Deleted lists the objects this run deleted (see Report on concurrent runs).
	Deleted      []File `json:"deleted"`
	BytesDeleted int64  `json:"bytes_deleted"` // sum of Deleted's bytes
	// Kept counts the objects kept under the table prefix by class, KeptBytes their bytes.
	Kept      map[Class]int   `json:"kept"`
	KeptBytes map[Class]int64 `json:"kept_bytes"` // bytes kept, by class
	BytesKept int64           `json:"bytes_kept"` // bytes kept in all, the sum of KeptBytes
	// Unknown lists keys of shapes GC does not recognise (kept).
	Unknown []string `json:"unknown"`
	// Fence is the abort version this run committed before deleting the files of
	// transactions that had not committed (0: none needed), FencedTxns how many it
	// named, FencePublished whether the pointer reached it (see recovery.Fence).
	Fence          uint64 `json:"fence,omitempty"`
	FencedTxns     int    `json:"fenced_transactions,omitempty"` // transactions the fence names
	FencePublished bool   `json:"fence_published,omitempty"`     // the pointer reached Fence
	// Restored lists expired versions put back because a reader pinned them while this
	// run was expiring them.
	Restored []uint64 `json:"restored,omitempty"`
	// HeldExpired is a version a live hold needs that was already expired (a run that
	// restored it died first): no data file was deleted this run (0: none).
	HeldExpired uint64 `json:"held_expired,omitempty"`
	// WAL reports each WAL shard found under <table>/_wal/ (its deleted objects are in
	// Deleted, the kept ones counted in Kept by class).
	WAL []WALShardReport `json:"wal"`
}

// Report is what Run did. In JSON every list is [] when empty, never null (see
// MarshalJSON).
//
// Concurrent runs: a file two runs both listed and both deleted is reported as deleted
// by both (Deleted, DroppedLeftovers, StoreFiles, TempFiles, and an expired version in
// both runs' Expired), so byte totals summed over concurrent runs can count a file
// twice. This run cannot tell whose delete removed it: store.Store.Delete is
// idempotent by contract (a missing object is not an error; S3's DeleteObject answers
// 204 either way, and the local store swallows ENOENT). Each run's report is still an
// upper bound of what it freed, and the store ends in the same state.
type Report struct {
	DryRun bool `json:"dry_run"` // nothing was deleted or expired: the lists say what would have been
	// Recovered are the outcomes of the recovery.Recover run first; the JSON key is
	// "outcomes", as in recovery.Report (shale recover --json).
	Recovered []recovery.Outcome `json:"outcomes"`
	Tables    []TableReport      `json:"tables"` // one per table collected, in name order
	// DroppedLeftovers are objects of dropped tables deleted (or, in a dry run,
	// deletable): of a table whose HEAD is a drop marker, everything below the marker
	// (the marker and its record stay); of a top-level prefix shaped like a table
	// (data/, _deletions/, _indices/, _txn/, _versions/ or _wal/ children) with no manifest (a drop of an
	// older build), everything. Only with no catalog pointer, no live hold and no pending
	// recovery sidecar for the name: a drop that died midway, or writes that raced one.
	// For every table, or for the one table Run covers if it is dropped.
	DroppedLeftovers []File `json:"dropped_leftovers"`
	// DroppedKept counts such objects kept: younger than the grace period, or of a
	// prefix in DroppedSkipped.
	DroppedKept int `json:"dropped_kept"`
	// DroppedSkipped lists the dropped tables' prefixes left whole, and why.
	DroppedSkipped []DroppedSkip `json:"dropped_skipped"`
	// TempFiles are a local store's temp files deleted (or, in a dry run, deletable).
	TempFiles []File `json:"temp_files"`
	// TempKept counts temp files kept (younger than the grace period).
	TempKept int `json:"temp_kept"`
	// StoreFiles are store-wide leftovers deleted: precondition-probe objects
	// (store.ProbeKeyPrefix) of a process that died while opening the store.
	StoreFiles []File `json:"store_files"`
	// OrphanClaims are recovery claims deleted (or, in a dry run, deletable) whose
	// sidecar is gone, left by a recovery that died between deleting the sidecar and
	// releasing its claim (recovery.OrphanClaims); OrphanClaimsKept counts such claims
	// kept as younger than the claim TTL.
	OrphanClaims     []File `json:"orphan_claims"`
	OrphanClaimsKept int    `json:"orphan_claims_kept"` // orphan claims younger than the claim TTL, kept
}

// MarshalJSON encodes r with [] for every empty list.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	p := plain(r)
	p.Recovered = orEmpty(p.Recovered)
	p.Tables = orEmpty(p.Tables)
	p.DroppedLeftovers = orEmpty(p.DroppedLeftovers)
	p.DroppedSkipped = orEmpty(p.DroppedSkipped)
	p.TempFiles = orEmpty(p.TempFiles)
	p.StoreFiles = orEmpty(p.StoreFiles)
	p.OrphanClaims = orEmpty(p.OrphanClaims)
	return json.Marshal(p)
}

// MarshalJSON encodes t with [] for every empty list and {} for empty maps.
func (t TableReport) MarshalJSON() ([]byte, error) {
	type plain TableReport
	p := plain(t)
	p.Holds = orEmpty(p.Holds)
	p.Retained = orEmpty(p.Retained)
	p.Expired = orEmpty(p.Expired)
	p.Deleted = orEmpty(p.Deleted)
	p.Unknown = orEmpty(p.Unknown)
	p.WAL = orEmpty(p.WAL)
	if p.Kept == nil {
		p.Kept = map[Class]int{}
	}
	if p.KeptBytes == nil {
		p.KeptBytes = map[Class]int64{}
	}
	return json.Marshal(p)
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ErrGC wraps every error Run returns about one table (errors.Is(err, ErrGC)); the
// underlying store, catalog or manifest error stays reachable with errors.Is/As.
var ErrGC = errors.New("gc")

// Run garbage-collects table ("" = every table in the store) in store s under policy p.
// cat is the catalog (nil: a bare store; HEAD counts as published and there are no
// holds). See the package comment for what is kept, what is deleted, and in which order;
// Run also deletes the leftovers of dropped tables (Report.DroppedLeftovers): every one with
// table "", table itself if it was dropped.
//
// Errors wrap ErrGC and name the table and, where there is one, the object key and
// version. A failure on one table stops the run (the report holds what was done).
func Run(ctx context.Context, s store.Store, cat *catalog.Catalog, table string, p Policy) (Report, error) {
	return RunWithRecover(ctx, s, cat, table, p, recovery.Options{})
}

// RunWithRecover is Run with explicit options for the recovery.Recover it runs first
// (MinAge: only sidecars older than that are resolved; default recovery.DefaultMinAge).
// Errors: as Run.
func RunWithRecover(ctx context.Context, s store.Store, cat *catalog.Catalog, table string, p Policy, ro recovery.Options) (Report, error) {
	p = p.withDefaults()
	rep := Report{DryRun: p.DryRun}
	tables := []string{table}
	// HEAD manifests read to tell dropped tables, shared by the listing of the tables and
	// the collection of dropped tables' leftovers (a manifest never changes).
	heads := map[string]manifest.TableHead{}
	if table == "" {
		objs, err := s.List(ctx, "", 0)
		if err != nil {
			return rep, fmt.Errorf("%w: list tables in %s: %w", ErrGC, s.URL(), err)
		}
		hs, err := manifest.HeadsOf(ctx, s, objs, heads)
		if err != nil {
			return rep, fmt.Errorf("%w: list tables in %s: %w", ErrGC, s.URL(), err)
		}
		tables = nil
		for _, h := range hs {
			if !h.Dropped {
				tables = append(tables, h.Table)
			}
		}
	} else if err := manifest.ValidateTableName(table); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrGC, err)
	}
	if !p.DryRun {
		rr, err := recovery.Recover(ctx, s, cat, table, ro)
		rep.Recovered = rr.Outcomes
		if err != nil {
			return rep, fmt.Errorf("%w: recover stale sidecars first: %w", ErrGC, err)
		}
	}
	collected := map[string]bool{} // tables collected live this run: not dropped leftovers
	for _, t := range tables {
		g := &collector{s: s, cat: cat, table: t, p: p, now: time.Now(), landed: map[string]bool{}, restored: map[uint64]bool{}}
		tr, err := g.run(ctx)
		rep.Tables = append(rep.Tables, tr)
		if err != nil {
			return rep, fmt.Errorf("%w: table %q: %w", ErrGC, t, err)
		}
		collected[t] = tr.Head != 0 && !tr.Dropped
	}
	// Leftovers of dropped tables: every table's, or, for one table, that table's if it
	// was dropped.
	if err := collectDropped(ctx, s, cat, p, &rep, table, heads, collected); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrGC, err)
	}
	if err := collectTemp(ctx, s, p, &rep); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrGC, err)
	}
	if err := collectProbes(ctx, s, p, &rep); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrGC, err)
	}
	if err := collectClaims(ctx, s, p, ro.ClaimTTL, &rep); err != nil {
		return rep, fmt.Errorf("%w: %w", ErrGC, err)
	}
	if err := seamBeforeDone.Inject(ctx); err != nil {
		return rep, err
	}
	return rep, nil
}

type collector struct {
	s     store.Store
	cat   *catalog.Catalog
	table string
	p     Policy
	now   time.Time
	rep   TableReport

	// records holds the retained versions as read (raw bytes kept to restore one a
	// reader pinned while this run expired it).
	records map[uint64]*manifest.Record
	// landed holds the ids of transactions this run saw committed: their files need no
	// fence.
	landed map[string]bool
	// heldExpired is a version a live hold needs that had already expired (0: none).
	heldExpired uint64
	// restored holds the versions this run expired and put back for a pin.
	restored map[uint64]bool
	// wal is what the run read of the table's WAL before its versions, with the lowest
	// merged watermarks of the versions it keeps.
	wal *WALState
	// headManifest is HEAD's manifest as read (foreignShards compares incarnations with it).
	headManifest *manifest.Manifest
}

func (g *collector) run(ctx context.Context) (TableReport, error) {
	g.rep = TableReport{Table: g.table, Kept: map[Class]int{}, KeptBytes: map[Class]int64{}}
	// The WAL's shard manifests first, before anything about the versions (see the
	// package comment, "WAL shards": a merge committing after this read is then seen in
	// the versions read below).
	if err := g.readWAL(ctx); err != nil {
		return g.rep, err
	}
	// The pointer first, then the holds (see the package comment).
	published, hasPointer := uint64(0), false
	if g.cat != nil {
		ptr, _, err := g.cat.Get(ctx, g.table)
		switch {
		case err == nil:
			published, hasPointer = ptr.Version, true
		case !errors.Is(err, catalog.ErrNoPointer):
			return g.rep, fmt.Errorf("read published version: %w", err)
		}
	}
	holds, err := g.holds(ctx)
	if err != nil {
		return g.rep, err
	}
	g.rep.Holds = holds
	low, hasLow := catalog.LowWatermark(holds)
	sidecars, err := g.sidecars(ctx)
	if err != nil {
		return g.rep, err
	}
	g.rep.Sidecars = len(sidecars)
	var prefixes []string
	for _, sc := range sidecars {
		prefixes = append(prefixes, sc.Prefixes()...)
		for _, a := range sc.Attempts {
			// A pending sidecar's recovery reads forward from its attempts' read versions.
			if !hasLow || a.ReadVersion < low {
				low, hasLow = a.ReadVersion, true
			}
		}
	}
	g.rep.LowWatermark, g.rep.HasLow = low, hasLow

	versions, err := manifest.Versions(ctx, g.s, g.table)
	if err != nil {
		return g.rep, err
	}
	if len(versions) == 0 {
		return g.rep, nil // dropped meanwhile
	}
	mans := make(map[uint64]*manifest.Manifest, len(versions))
	g.records = make(map[uint64]*manifest.Record, len(versions))
	stamps := make([]Stamp, 0, len(versions))
	// Newest first, stopping at the first tombstone: versions expire oldest first and
	// the retained ones are a suffix, so everything below a tombstone is expired too (one
	// GET per retained version, not per version ever committed). A version deleted
	// outright (by hand, or by a concurrent GC's Load race) is skipped.
	//
	// Only HEAD's incarnation is retained: versions below its first version (the Create
	// after a drop marker) belong to incarnations a drop ended, and go with their files
	// as garbage (Refs.Since). A table whose HEAD is a drop marker was dropped: its
	// leftovers are collectDropped's.
	var since uint64
	for i := len(versions) - 1; i >= 0; i-- {
		v := versions[i]
		if v < since {
			break
		}
		rec, err := manifest.LoadRecord(ctx, g.s, g.table, v)
		if errors.Is(err, manifest.ErrVersionNotFound) {
			continue
		}
		if err != nil {
			return g.rep, err
		}
		if len(stamps) == 0 && rec.Manifest != nil {
			if rec.Manifest.Dropped() {
				g.rep.Dropped = true
				return g.rep, nil
			}
			since = rec.Manifest.IncarnationSince
			g.rep.IncarnationSince = since
		}
		if rec.Expired() {
			if hasLow && low <= v {
				// A live hold needs a version that is already expired (a reader pinned it
				// while another run was expiring it, and that run died before restoring
				// it): what it references is unknown, so no data file may go this run.
				g.heldExpired = v
			}
			break
		}
		m := rec.Manifest
		mans[v] = m
		g.records[v] = rec
		g.landed[m.Txn.ID] = true
		// A file under a transaction's prefix that a committed version references was
		// introduced by that transaction's commit: it landed (no fence needed when the
		// file's last referencing version expires).
		files := map[string]bool{}
		references(m, files)
		for k := range files {
			if id, ok := manifest.KeyTxn(g.table, k); ok {
				g.landed[id] = true
			}
		}
		ts := m.Committed
		if ts == 0 {
			ts = m.Txn.Timestamp // written before commit times were recorded
		}
		stamps = append(stamps, Stamp{Version: v, Timestamp: ts})
	}
	g.rep.HeldExpired = g.heldExpired
	slices.Reverse(stamps)
	if len(stamps) == 0 {
		return g.rep, nil
	}
	head := stamps[len(stamps)-1].Version
	switch {
	case g.cat == nil:
		published = head // a bare store: HEAD is what readers see
	case !hasPointer, published < since:
		// Nothing known to be superseded (no pointer, or one left from an incarnation
		// a drop ended): keep every version.
		published = 0
	}
	g.rep.Published, g.rep.Head = published, head
	b := Bounds{Published: published, Head: head, LowWatermark: low, HasLow: hasLow}
	floor := Floor(stamps, b, g.p, g.now)
	g.rep.Floor = floor
	expired := Expired(stamps, floor)
	g.rep.Expired = expired
	for _, st := range stamps {
		if st.Version >= floor {
			g.rep.Retained = append(g.rep.Retained, st.Version)
		}
	}
	if err := seamAfterPlan.Inject(ctx); err != nil {
		return g.rep, err
	}

	// Expire versions, oldest first: the manifest becomes a tombstone (manifest.Expire:
	// a deleted manifest would reopen its version number to a stale writer's
	// put-if-absent), then the transaction record is deleted.
	sizes, err := g.sizes(ctx, manifest.VersionsDir(g.table), manifest.TxnDir(g.table))
	if err != nil {
		return g.rep, err
	}
	for _, v := range expired {
		g.rep.ExpiredManifestBytes += sizes[mans[v].Key()]
	}
	if !g.p.DryRun {
		// The transaction records go later, with the other unreferenced files: a version
		// put back for a pin taken meanwhile keeps its record.
		for _, v := range expired {
			if err := manifest.Expire(ctx, g.s, mans[v]); err != nil {
				return g.rep, err
			}
			if err := seamAfterExpireManifest.Inject(ctx); err != nil {
				return g.rep, err
			}
		}
	}

	// What the retained versions reference, plus what appeared while we were expiring:
	// holds taken meanwhile (a reader that pinned an expired version after we read the
	// holds keeps its files), and versions committed meanwhile.
	refs := &Refs{Files: map[string]bool{}, Txns: map[uint64]string{}, Head: head, Prefixes: prefixes, Since: since}
	for _, st := range stamps {
		if st.Version >= floor {
			m := mans[st.Version]
			references(m, refs.Files)
			refs.Txns[st.Version] = m.TxnKey
			g.noteWatermarks(m)
		}
	}
	g.headManifest = mans[head]
	holds2, err := g.holds(ctx)
	if err != nil {
		return g.rep, err
	}
	if low2, ok := catalog.LowWatermark(holds2); ok {
		for _, v := range expired {
			if v < low2 {
				continue
			}
			// A reader pinned v while we expired it: keep its files, and put its manifest
			// back (byte for byte) so that later runs see the version the pin needs.
			references(mans[v], refs.Files)
			refs.Txns[v] = mans[v].TxnKey
			g.noteWatermarks(mans[v])
			g.restored[v] = true
			if !g.p.DryRun {
				if err := manifest.Restore(ctx, g.s, g.records[v]); err != nil {
					return g.rep, err
				}
				g.rep.Restored = append(g.rep.Restored, v)
			}
		}
	}
	if err := g.readForward(ctx, refs); errors.Is(err, manifest.ErrTableDropped) {
		g.rep.Dropped = true
		return g.rep, nil // dropped during the run: its leftovers are collectDropped's
	} else if err != nil {
		return g.rep, err
	}
	refs.Cutoff = g.now.Add(-g.p.GracePeriod)
	for _, h := range append(holds, holds2...) {
		if h.Kind == engine.HoldKindPin || h.Started.IsZero() {
			continue // a reader writes nothing
		}
		if c := h.Started.Add(-HoldSkew); c.Before(refs.Cutoff) {
			refs.Cutoff = c
		}
	}

	return g.rep, g.collect(ctx, refs, expired, mans)
}

// readForward adds to refs the versions committed after refs.Head (by writers running
// beside this run), up to HEAD, and records their transactions as landed. A drop marker
// (the table was dropped during the run) is *manifest.DroppedError.
func (g *collector) readForward(ctx context.Context, refs *Refs) error {
	for v := refs.Head + 1; ; v++ {
		m, err := manifest.Load(ctx, g.s, g.table, v)
		if errors.Is(err, manifest.ErrVersionNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.Dropped() {
			return &manifest.DroppedError{Table: g.table, Version: v}
		}
		references(m, refs.Files)
		refs.Txns[v] = m.TxnKey
		g.noteWatermarks(m)
		refs.Head = v
		g.landed[m.Txn.ID] = true
	}
}

// fenceAttempts bounds how often a run re-reads and fences again after a transaction it
// was about to fence committed first.
const fenceAttempts = 5

// collect lists the table's objects, classifies them and deletes the garbage. Garbage
// written by a transaction that has not committed (its key names it: manifest.KeyTxn) is
// deleted only after an abort version naming that transaction is committed on top of the
// versions this run read (recovery.Fence): a writer paused for any length of time that
// later tries to commit it meets the abort and fails with manifest.ErrTxnAborted instead
// of committing a version naming deleted files (invariant 15). If one of them committed
// after this run read HEAD, the fence fails; the run reads forward and tries again.
func (g *collector) collect(ctx context.Context, refs *Refs, expired []uint64, mans map[uint64]*manifest.Manifest) error {
	objs, err := g.s.List(ctx, g.table+"/", 0)
	if err != nil {
		return fmt.Errorf("list %s/: %w", g.table, err)
	}
	// In a dry run the expired versions' manifests are still in the store; they were
	// counted with their versions, not as kept or as garbage. Their transaction records
	// are deleted here (class ExpiredVersion), unless the version was put back for a pin.
	expiredKeys, expiredTxns := map[string]bool{}, map[string]bool{}
	for _, v := range expired {
		expiredKeys[manifest.ManifestKey(g.table, v)] = true
		if !g.restored[v] {
			expiredTxns[mans[v].TxnKey] = true
		}
	}
	// Transactions of incarnations a drop ended (a record numbered below HEAD's
	// incarnation's first version) need no fence: the drop marker fences them (or, in a
	// number the drop freed, the catalog pointer refuses their version).
	earlier := map[string]bool{}
	for _, o := range objs {
		if v, id, ok := parseTxnKey(g.table, o.Key); ok && v < refs.Since {
			earlier[id] = true
		}
	}
	for attempt := 1; ; attempt++ {
		g.foreignShards(g.headManifest)
		refs.WAL = ClassifyWAL(g.table, objs, g.wal, refs)
		for i := range g.rep.WAL {
			g.rep.WAL[i].Merged = g.wal.Merged[g.rep.WAL[i].Shard]
		}
		var garbage []store.ObjectInfo
		kept := map[string]Class{}
		unfenced := map[string]bool{}
		for _, o := range objs {
			if g.p.DryRun && expiredKeys[o.Key] {
				continue
			}
			if expiredTxns[o.Key] {
				garbage = append(garbage, o) // a landed transaction's: no fence
				continue
			}
			c := Classify(g.table, o.Key, o.ModTime, refs)
			if c == Garbage && g.heldExpired != 0 && !strings.Contains(o.Key, "/_txn/") {
				c = HeldExpired
			}
			if c != Garbage {
				kept[o.Key] = c
				continue
			}
			garbage = append(garbage, o)
			if id, ok := manifest.KeyTxn(g.table, o.Key); ok && !g.landed[id] && !earlier[id] {
				unfenced[id] = true
			}
		}
		if len(unfenced) > 0 && !g.p.DryRun {
			err := g.fence(ctx, refs, unfenced)
			if errors.Is(err, manifest.ErrTableDropped) {
				g.rep.Dropped = true
				return nil // dropped during the run: its leftovers are collectDropped's
			}
			if errors.Is(err, manifest.ErrIncompatible) && attempt < fenceAttempts {
				// One of them committed after we read HEAD: its files are referenced now.
				if err := g.readForward(ctx, refs); errors.Is(err, manifest.ErrTableDropped) {
					g.rep.Dropped = true
					return nil
				} else if err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("fence %d transaction(s) before deleting their files: %w", len(unfenced), err)
			}
		}
		g.rep.FencedTxns = len(unfenced)
		for _, o := range objs {
			if c, ok := kept[o.Key]; ok {
				g.keep(o, c)
			}
		}
		for _, o := range garbage {
			c := Garbage
			if expiredTxns[o.Key] {
				c = ExpiredVersion
			}
			if g.p.DryRun {
				g.deleted(o, c)
				continue
			}
			if err := g.s.Delete(ctx, o.Key); err != nil {
				return &manifest.ObjectError{Table: g.table, Key: o.Key, Err: fmt.Errorf("delete: %w", err)}
			}
			g.deleted(o, c)
			if err := seamMidFileDelete.Inject(ctx); err != nil {
				return err
			}
		}
		return g.expireWALManifests(ctx, objs)
	}
}

// fence commits an abort version naming ids on top of refs.Head, the newest version this
// run has read (see recovery.Fence).
func (g *collector) fence(ctx context.Context, refs *Refs, ids map[string]bool) error {
	var groups manifest.GroupResolver
	if g.cat != nil {
		groups = catalog.GroupWaiter{Catalog: g.cat, Timeout: 30 * time.Second}
	}
	var read *manifest.Manifest
	if rec := g.records[refs.Head]; rec != nil && rec.Manifest.Txn.Op.Group == nil {
		read = rec.Manifest // read already, and no group to resolve
	} else {
		var err error
		if read, err = manifest.LoadCounted(ctx, g.s, g.table, refs.Head, groups); err != nil {
			return err
		}
	}
	res, err := recovery.Fence(ctx, g.s, g.cat, read, slices.Collect(maps.Keys(ids)), groups, g.p.FenceWait)
	if err != nil {
		return err
	}
	g.rep.Fence, g.rep.FencePublished = res.Version, res.Published
	if err := seamAfterFence.Inject(ctx); err != nil {
		return err
	}
	return nil
}

// sizes lists prefixes and returns each object's size.
func (g *collector) sizes(ctx context.Context, prefixes ...string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, p := range prefixes {
		objs, err := g.s.List(ctx, p, 0)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", p, err)
		}
		for _, o := range objs {
			out[o.Key] = o.Size
		}
	}
	return out, nil
}

func (g *collector) keep(o store.ObjectInfo, c Class) {
	g.rep.Kept[c]++
	g.rep.KeptBytes[c] += o.Size
	g.rep.BytesKept += o.Size
	if c == Unknown {
		g.rep.Unknown = append(g.rep.Unknown, o.Key)
	}
}

func (g *collector) deleted(o store.ObjectInfo, c Class) {
	g.rep.Deleted = append(g.rep.Deleted, File{Key: o.Key, Bytes: o.Size, Class: c})
	g.rep.BytesDeleted += o.Size
}

func (g *collector) holds(ctx context.Context) ([]catalog.Hold, error) {
	if g.cat == nil {
		return nil, nil
	}
	h, err := g.cat.Holds(ctx, g.table)
	if err != nil {
		return nil, fmt.Errorf("read holds: %w", err)
	}
	return h, nil
}

// sidecars reads the table's pending sidecars (left after recovery: young ones, and
// ones recovery could not resolve). An unreadable sidecar fails the run: its prefixes
// cannot be protected.
func (g *collector) sidecars(ctx context.Context) ([]recovery.Sidecar, error) {
	keys, err := recovery.Pending(ctx, g.s, g.table)
	if err != nil {
		return nil, err
	}
	var out []recovery.Sidecar
	for _, k := range keys {
		b, err := g.s.Get(ctx, k)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sidecar %s: %w", k, err)
		}
		sc, err := recovery.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("sidecar %s: %w (gc cannot tell which files it protects)", k, err)
		}
		if sc.Table == g.table {
			out = append(out, sc)
		}
	}
	return out, nil
}

// probeMinAge is the least age of a probe object GC deletes, whatever the grace period.
const probeMinAge = 10 * time.Minute

// collectProbes deletes precondition-probe objects (store.ProbeKeyPrefix) older than
// the grace period: a probe deletes its objects, unless its process died first.
func collectProbes(ctx context.Context, s store.Store, p Policy, rep *Report) error {
	objs, err := s.List(ctx, store.ProbeKeyPrefix, 0)
	if err != nil {
		return fmt.Errorf("list %s: %w", store.ProbeKeyPrefix, err)
	}
	// A probe takes milliseconds; deleting one mid-probe would make its Open report that
	// the store ignores preconditions, so even "no grace" waits probeMinAge.
	cutoff := time.Now().Add(-max(p.GracePeriod, probeMinAge))
	for _, o := range objs {
		if o.ModTime.After(cutoff) {
			continue
		}
		if !p.DryRun {
			if err := s.Delete(ctx, o.Key); err != nil {
				return fmt.Errorf("delete probe object %s: %w", o.Key, err)
			}
		}
		rep.StoreFiles = append(rep.StoreFiles, File{Key: o.Key, Bytes: o.Size, Class: Garbage})
	}
	return nil
}

// collectClaims deletes recovery claims whose sidecar is gone, once older than the claim
// TTL (recovery.OrphanClaims, which says why deleting a claim never risks data). The TTL,
// not the grace period, decides: a claim is not data, and its owner, if alive, releases
// it moments after deleting the sidecar.
func collectClaims(ctx context.Context, s store.Store, p Policy, ttl time.Duration, rep *Report) error {
	orphans, young, err := recovery.OrphanClaims(ctx, s, ttl)
	if err != nil {
		return err
	}
	rep.OrphanClaimsKept = young
	for _, o := range orphans {
		if !p.DryRun {
			if err := s.Delete(ctx, o.Key); err != nil {
				return fmt.Errorf("delete orphaned recovery claim %s: %w", o.Key, err)
			}
		}
		rep.OrphanClaims = append(rep.OrphanClaims, File{Key: o.Key, Bytes: o.Size, Class: Garbage})
	}
	return nil
}

// rooted is implemented by the local store (the store package's file:// store).
type rooted interface{ Root() string }

// collectTemp deletes a local store's temp files older than the grace period. Temp files
// are never listed by the store (store.TempDir), so they are found on disk. Other
// stores have none.
func collectTemp(ctx context.Context, s store.Store, p Policy, rep *Report) error {
	r, ok := s.(rooted)
	if !ok {
		return nil
	}
	dir := filepath.Join(r.Root(), store.TempDir)
	cutoff := time.Now().Add(-p.GracePeriod)
	var found []File
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if info.ModTime().After(cutoff) {
			rep.TempKept++
			return nil
		}
		rel, _ := filepath.Rel(r.Root(), path)
		found = append(found, File{Key: filepath.ToSlash(rel), Bytes: info.Size(), Class: Garbage})
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk temp files in %s: %w", dir, err)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Key < found[j].Key })
	for _, f := range found {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !p.DryRun {
			if err := os.Remove(filepath.Join(r.Root(), filepath.FromSlash(f.Key))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("delete temp file %s in %s: %w", f.Key, s.URL(), err)
			}
		}
		rep.TempFiles = append(rep.TempFiles, f)
	}
	return nil
}
