package recovery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// Defaults for Options.
const (
	// DefaultMinAge applies without a catalog, where nothing proves an operation alive: a
	// sidecar younger than this may belong to a compaction still running and is skipped
	// (its files could otherwise be deleted under it).
	DefaultMinAge = 10 * time.Minute
	// DefaultMinAgeWithHolds applies with a catalog. A running compaction keeps a catalog
	// hold whose id is its operation id from before it writes its sidecar until after it
	// deletes it, so a sidecar with a live hold is skipped whatever its age (SkippedLive)
	// and one without is an operation that died. The remaining margin covers a holder
	// whose lease expired while it still ran (cut off from etcd: it learns it within one
	// TTL and stops) and the moment between a sidecar's listing and the hold check, so it
	// is twice the hold TTL (2 × 15 s).
	DefaultMinAgeWithHolds = 2 * catalog.DefaultHoldTTL
	// DefaultClaimTTL: a claim older than this was left by a recovery that died, and is
	// taken over.
	DefaultClaimTTL = 2 * time.Minute
)

// Options tune Recover. Zero values take the defaults.
type Options struct {
	// MinAge skips sidecars created or rewritten less than MinAge ago (default
	// DefaultMinAgeWithHolds with a catalog, DefaultMinAge without). Negative:
	// act on every sidecar; only for callers that know no compaction is running (tests,
	// an operator who stopped every writer).
	MinAge time.Duration
	// ClaimTTL is the age past which another recovery's claim on a sidecar is stale
	// (default DefaultClaimTTL).
	ClaimTTL time.Duration
	// PublishTimeout bounds one roll-forward publish (default 30 s).
	PublishTimeout time.Duration
	// FenceWait bounds how long a roll back waits for the versions below its abort
	// version to be published before leaving the abort unpublished (default
	// DefaultFencePublishWait).
	FenceWait time.Duration
	// Exited names operations (sidecar operation ids) whose process the caller knows has
	// exited, say a hold whose holder is a process of this host that is gone
	// (catalog.HolderExited): their sidecars are resolved at once, whatever their age and
	// although their hold's lease has not expired yet. (Were the process alive after all,
	// the roll back's abort version would make its commit fail: nothing is lost.)
	Exited map[string]bool
}

// Actions recorded in Outcome.Action.
const (
	RolledForward    = "rolled-forward"    // a transaction of the operation landed; it is now published
	AlreadyPublished = "already-published" // it landed and the pointer was already at or past it
	RolledBack       = "rolled-back"       // nothing landed; the attempts' unreferenced files were deleted
	SkippedYoung     = "skipped-young"     // younger than MinAge: possibly still running
	SkippedLive      = "skipped-live"      // its operation holds a live catalog hold: it is running
	NotLanded        = "not-landed"        // RollForward only: nothing landed; the sidecar is left for Recover
	SkippedClaimed   = "skipped-claimed"   // another recovery is resolving it
	Gone             = "gone"              // removed by someone else between the listing and the read
	Failed           = "failed"            // see Err; the sidecar stays
)

// Outcome is what Recover did with one sidecar.
type Outcome struct {
	Key       string `json:"key"`                 // the sidecar's key: _recovery/<operation>.json
	Operation string `json:"operation"`           // the operation id
	Table     string `json:"table,omitempty"`     // its table ("" when the sidecar could not be read)
	Action    string `json:"action"`              // what was done: one of the actions above
	Version   uint64 `json:"version,omitempty"`   // the version the operation committed (roll forward)
	Published uint64 `json:"published,omitempty"` // the table's published version afterwards (0: unknown or no catalog)
	// Fence (roll back): the abort version that fences the operation's transactions, so
	// none of them can commit after its files are deleted (0: table dropped).
	Fence        uint64   `json:"fence,omitempty"`
	DeletedFiles []string `json:"deleted_files,omitempty"` // keys of the files a roll back deleted
	// SidecarKept (RollForward only): the version is published but earlier attempts left
	// files no version references; the sidecar stays so that Recover deletes them.
	SidecarKept bool   `json:"sidecar_kept,omitempty"`
	Err         string `json:"error,omitempty"` // why Action is Failed, in words
}

// Report lists one Outcome per sidecar examined, oldest first.
type Report struct {
	Outcomes []Outcome `json:"outcomes"` // one per sidecar, oldest first
}

// Pending returns the keys of the sidecars of table ("" = every table) in the store,
// oldest first (one LIST plus one GET per sidecar when table is set).
// Errors: store errors.
func Pending(ctx context.Context, s store.Store, table string) ([]string, error) {
	objs, err := s.List(ctx, Dir, 0)
	if err != nil {
		return nil, fmt.Errorf("recovery sidecars: %w", err) // the store error names the listing
	}
	var keys []string
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, ".json") {
			continue
		}
		if table != "" {
			b, err := s.Get(ctx, o.Key)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("sidecar %s: %w", o.Key, err)
			}
			var head struct {
				Table string `json:"table"`
			}
			// An unparsable sidecar is everybody's: Recover reports it.
			if json.Unmarshal(b, &head) == nil && head.Table != table {
				continue
			}
		}
		keys = append(keys, o.Key)
	}
	return keys, nil // List returns byte order: ULIDs sort by creation time
}

// Recover resolves the sidecars of table ("" = every table) in store s, oldest first.
// cat is the catalog holding published pointers (nil: a bare store; nothing is
// published). For each sidecar it takes a claim (_recovery/<id>.claim, put-if-absent),
// re-reads the sidecar, and reads every version from the lowest attempt read version to
// HEAD:
//
//   - a version carrying one of the sidecar's transaction ids landed: publish it by
//     fast-forward (roll forward), delete the files of the other attempts that no
//     version references, then the sidecar;
//   - none landed: commit an abort version naming the transactions not recorded as
//     rejected (Fence, planned on the HEAD the scan read: none of them can commit after
//     it; if one lands first the abort fails and the sidecar is rolled forward instead),
//     published once the versions below it are, then delete every file under the
//     attempts' prefixes (Sidecar.Prefixes) that no version references (roll back),
//     then the sidecar.
//
// Compaction and index-build sidecars are resolved alike; "references" counts a
// version's data files, deletion vectors and index objects (Manifest.Indexes[].Files).
// Versions made by other transactions are never published, and a file a version
// references is never deleted. Recover is idempotent and safe to run concurrently with
// writers and with itself (the claim makes one of two racing recoveries act; the other
// reports SkippedClaimed or Gone). With a catalog, a sidecar whose operation holds a live
// hold (catalog.HoldExists(table, operation id)) is skipped whatever its age
// (SkippedLive); sidecars younger than Options.MinAge are skipped (SkippedYoung). A claim
// whose sidecar is gone (its recovery died before releasing it) blocks nothing, since
// only listed sidecars are claimed; Recover leaves it to garbage collection
// (OrphanClaims).
//
// Errors: listing failures are returned; a failure on one sidecar is recorded in its
// Outcome (Action Failed, the sidecar kept) and joined into the returned error, and the
// others are still resolved. Errors name the sidecar key.
func Recover(ctx context.Context, s store.Store, cat *catalog.Catalog, table string, opts Options) (Report, error) {
	return run(ctx, &recoverer{s: s, cat: cat, opts: opts}, table)
}

// withDefaults fills in Options' zero values (withCatalog picks MinAge's default).
func (o Options) withDefaults(withCatalog bool) Options {
	if o.MinAge == 0 {
		o.MinAge = DefaultMinAge
		if withCatalog {
			o.MinAge = DefaultMinAgeWithHolds
		}
	}
	if o.ClaimTTL <= 0 {
		o.ClaimTTL = DefaultClaimTTL
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = 30 * time.Second
	}
	return o
}

func run(ctx context.Context, r *recoverer, table string) (Report, error) {
	r.opts = r.opts.withDefaults(r.cat != nil)
	var rep Report
	// One LIST; one() reads each sidecar and skips other tables' (Pending with a table
	// would GET every sidecar once more to filter).
	keys, err := Pending(ctx, r.s, "")
	if err != nil {
		return rep, err
	}
	var errs []error
	for _, key := range keys {
		out, err := r.one(ctx, key, table)
		if err != nil {
			out.Action, out.Err = Failed, err.Error()
			errs = append(errs, err)
		}
		if out.Action != "" {
			rep.Outcomes = append(rep.Outcomes, out)
		}
	}
	return rep, errors.Join(errs...)
}

type recoverer struct {
	s    store.Store
	cat  *catalog.Catalog
	opts Options
	// forwardOnly (RollForward): publish what landed, never delete data files, keep the
	// sidecars of operations that did not land.
	forwardOnly bool
	// versions caches the version records one run has read (versions are immutable; a
	// retained one may expire meanwhile, which changes nothing recovery decides), so that
	// many sidecars of one table read each version once, not once per sidecar.
	versions map[versionKey]*manifest.Record
}

type versionKey struct {
	table string
	v     uint64
}

// record is manifest.LoadRecord through the run's cache.
func (r *recoverer) record(ctx context.Context, table string, v uint64) (*manifest.Record, error) {
	k := versionKey{table, v}
	if rec, ok := r.versions[k]; ok {
		return rec, nil
	}
	rec, err := manifest.LoadRecord(ctx, r.s, table, v)
	if err != nil {
		return nil, err
	}
	if r.versions == nil {
		r.versions = map[versionKey]*manifest.Record{}
	}
	r.versions[k] = rec
	return rec, nil
}

// Failpoint seams of a recovery (internal/failpoint), in the order a sidecar passes them.
var (
	seamAfterClaim          = failpoint.Seam("recovery.after_claim")
	seamAfterPublish        = failpoint.Seam("recovery.after_publish")
	seamBeforeFence         = failpoint.Seam("recovery.before_fence") // roll back: the scan found nothing landed
	seamAfterFence          = failpoint.Seam("recovery.after_fence")  // roll back: the abort version committed
	seamMidDelete           = failpoint.Seam("recovery.mid_delete")   // after the first data file delete
	seamBeforeSidecarDelete = failpoint.Seam("recovery.before_sidecar_delete")
	seamAfterSidecarDelete  = failpoint.Seam("recovery.after_sidecar_delete") // before the claim is released
)

type claim struct {
	Token string    `json:"token"`
	Taken time.Time `json:"taken"`
}

// one resolves the sidecar at key. An Outcome with an empty Action means "not this
// table's" (skipped silently).
func (r *recoverer) one(ctx context.Context, key, table string) (Outcome, error) {
	id := strings.TrimSuffix(strings.TrimPrefix(key, Dir), ".json")
	out := Outcome{Key: key, Operation: id}
	sc, ok, err := r.read(ctx, key)
	if err != nil || !ok {
		if !ok && err == nil {
			out.Action = Gone
		}
		return out, err
	}
	out.Table = sc.Table
	if table != "" && sc.Table != table {
		return Outcome{}, nil
	}
	// A live hold proves the operation runs: whatever its age, it is not ours to resolve,
	// unless the caller knows its process exited.
	exited := r.opts.Exited[sc.OperationID]
	if live, err := r.live(ctx, key, sc, exited); err != nil || live {
		if live {
			out.Action = SkippedLive
		}
		return out, err
	}
	// A roll forward only publishes a version that landed, which is safe while its
	// operation still runs (its own publish then finds the pointer there), so age does
	// not matter to it.
	if r.opts.MinAge > 0 && !r.forwardOnly && !exited {
		// Age counts from the last write of the sidecar (each attempt rewrites it).
		last := sc.Created
		if info, err := r.s.Head(ctx, key); err == nil && info.ModTime.After(last) {
			last = info.ModTime
		}
		if time.Since(last) < r.opts.MinAge {
			out.Action = SkippedYoung
			return out, nil
		}
	}
	release, ok, err := r.claim(ctx, id)
	if err != nil {
		return out, err
	}
	if !ok {
		out.Action = SkippedClaimed
		return out, nil
	}
	defer release()
	if err := seamAfterClaim.Inject(ctx); err != nil {
		return out, err
	}
	// Re-read under the claim: another recovery may have finished it meanwhile.
	sc, ok, err = r.read(ctx, key)
	if err != nil || !ok {
		if !ok && err == nil {
			out.Action = Gone
		}
		return out, err
	}
	// And look at the hold again, as late as possible before acting.
	if live, err := r.live(ctx, key, sc, exited); err != nil || live {
		if live {
			out.Action = SkippedLive
		}
		return out, err
	}
	return r.resolve(ctx, key, sc, out)
}

// live reports whether sc's operation holds a live catalog hold (false without a
// catalog, or when its process is known to have exited). Errors: catalog errors, naming
// the sidecar key.
func (r *recoverer) live(ctx context.Context, key string, sc Sidecar, exited bool) (bool, error) {
	if r.cat == nil || exited {
		return false, nil
	}
	live, err := r.cat.HoldExists(ctx, sc.Table, sc.OperationID)
	if err != nil {
		return false, fmt.Errorf("sidecar %s: %w", key, err)
	}
	return live, nil
}

// read gets and decodes the sidecar at key; ok is false when it no longer exists.
func (r *recoverer) read(ctx context.Context, key string) (Sidecar, bool, error) {
	b, err := r.s.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return Sidecar{}, false, nil
	}
	if err != nil {
		return Sidecar{}, false, fmt.Errorf("sidecar %s: %w", key, err)
	}
	sc, err := Decode(b)
	if err != nil {
		return sc, false, fmt.Errorf("sidecar %s: %w", key, err)
	}
	return sc, true, nil
}

// claim takes the claim on operation id (put-if-absent), taking over a stale one.
func (r *recoverer) claim(ctx context.Context, id string) (release func(), ok bool, err error) {
	key := claimKey(id)
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	mine := hex.EncodeToString(tok[:])
	body, _ := json.Marshal(claim{Token: mine, Taken: time.Now().UTC()})
	release = func() {
		// Delete only our own claim: a slow recovery whose claim went stale and was taken
		// over must not remove its successor's.
		ctx := context.WithoutCancel(ctx)
		var c claim
		if b, err := r.s.Get(ctx, key); err == nil && json.Unmarshal(b, &c) == nil && c.Token == mine {
			_ = r.s.Delete(ctx, key)
		}
	}
	for try := 0; try < 2; try++ {
		err := r.s.PutIfAbsent(ctx, key, body)
		if err == nil {
			return release, true, nil
		}
		if !errors.Is(err, store.ErrPreconditionFailed) {
			return nil, false, fmt.Errorf("claim %s: %w", key, err)
		}
		b, err := r.s.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, false, fmt.Errorf("claim %s: %w", key, err)
		}
		var c claim
		if json.Unmarshal(b, &c) == nil && time.Since(c.Taken) < r.opts.ClaimTTL {
			return nil, false, nil
		}
		// Stale (its recovery died) or unreadable: take it over.
		if err := r.s.Delete(ctx, key); err != nil {
			return nil, false, fmt.Errorf("claim %s: %w", key, err)
		}
	}
	return nil, false, nil
}

// resolve rolls sc forward or back, then deletes it.
func (r *recoverer) resolve(ctx context.Context, key string, sc Sidecar, out Outcome) (Outcome, error) {
	return r.resolveOnce(ctx, key, sc, out, false)
}

// resolveOnce is resolve; retried is set on the second pass, after a fence lost to one of
// the operation's own transactions landing meanwhile.
func (r *recoverer) resolveOnce(ctx context.Context, key string, sc Sidecar, out Outcome, retried bool) (Outcome, error) {
	txns := map[string]bool{}
	from := sc.Attempts[0].ReadVersion
	for _, a := range sc.Attempts {
		txns[a.TxnID] = true
		from = min(from, a.ReadVersion)
	}
	var landed *manifest.Record
	var fenced uint64               // an abort version naming one of txns (an earlier roll back)
	abortedIDs := map[string]bool{} // the txns some abort version names
	prefixes := sc.Prefixes()
	referenced := map[string]bool{} // keys under the attempts' prefixes that some version names (data files, index objects)
	head, err := manifest.Head(ctx, r.s, sc.Table)
	switch {
	case errors.Is(err, manifest.ErrTableNotFound):
		head = 0 // no versions left: none references anything
	case err != nil:
		return out, fmt.Errorf("sidecar %s: table %q: %w", key, sc.Table, err)
	}
	// An operation of an incarnation that a drop ended (HEAD is the drop marker, or a
	// version of a later incarnation) cannot commit any more, and what it may have
	// committed belongs to no table: nothing to roll forward and nothing to fence (the
	// marker fences it), only its files to delete.
	dropped, err := r.droppedSince(ctx, sc.Table, head, from)
	if err != nil {
		return out, fmt.Errorf("sidecar %s: %w", key, err)
	}
	if dropped {
		head = 0
	}
	// A version at or below `from` existed before any attempt wrote a file, so it can
	// neither carry the operation's transactions nor reference its files. Expired
	// versions are read too: their tombstones keep the transaction, so a transaction that
	// landed and expired since is still found (and an abort naming one).
	for v := from + 1; v <= head; v++ {
		rec, err := r.record(ctx, sc.Table, v)
		if errors.Is(err, manifest.ErrVersionNotFound) {
			continue // deleted by a drop meanwhile
		}
		if err != nil {
			return out, fmt.Errorf("sidecar %s: %w", key, err)
		}
		if rec.Txn != nil && rec.Txn.Op.Kind == manifest.OpAbort {
			for _, id := range rec.Txn.Op.Aborted {
				if txns[id] {
					fenced, abortedIDs[id] = rec.Version, true
				}
			}
		}
		if txns[rec.TxnID] {
			if landed != nil && landed.TxnID != rec.TxnID {
				return out, fmt.Errorf("sidecar %s: table %q: transactions %s (v%d) and %s (v%d) both landed",
					key, sc.Table, landed.TxnID, landed.Version, rec.TxnID, rec.Version)
			}
			if landed == nil {
				landed = rec
			}
		}
		if rec.Manifest == nil {
			continue
		}
		for _, f := range rec.Manifest.Fragments {
			for _, df := range f.Files {
				if underAny(df.Key, prefixes) {
					referenced[df.Key] = true
				}
			}
		}
		for _, ix := range rec.Manifest.Indexes {
			for _, k := range ix.Files {
				if underAny(k, prefixes) {
					referenced[k] = true
				}
			}
		}
	}
	if landed != nil {
		out.Version = landed.Version
		out.Action = RolledForward
		if landed.Manifest == nil {
			// Expired since: versions expire only below the published one.
			out.Action = AlreadyPublished
		} else if r.cat != nil {
			pub, err := r.publish(ctx, landed.Manifest)
			if errors.Is(err, manifest.ErrTableDropped) {
				// Dropped since the scan: the version is in no table; roll back.
				return r.resolveDropped(ctx, key, sc, Outcome{Key: out.Key, Operation: out.Operation, Table: out.Table})
			}
			if err != nil {
				return out, fmt.Errorf("sidecar %s: table %q: roll forward version %d: %w", key, sc.Table, landed.Version, err)
			}
			if pub.prev >= landed.Version {
				out.Action = AlreadyPublished
			}
			out.Published = pub.now
			if err := seamAfterPublish.Inject(ctx); err != nil {
				return out, err
			}
		}
	} else {
		if r.forwardOnly {
			out.Action = NotLanded
			return out, nil
		}
		if dropped {
			return r.resolveDropped(ctx, key, sc, out)
		}
		out.Action = RolledBack
		// Fence the transactions before deleting their files: a process that still runs
		// the operation (its hold lost, its commit request in flight) must not commit a
		// version naming files about to go. The abort is planned on HEAD as this scan
		// read it, so a transaction that landed after the scan is checked by the abort's
		// commit: either the abort lands first and such a commit fails on it, or the
		// commit lands first and the abort fails: then the operation is rolled forward.
		out.Fence = fenced
		// Attempts the run recorded as rejected never commit, and an abort version
		// already fences those it names: only the others need a fence. (An earlier roll
		// back may have fenced only the first attempts: the run, paused past its hold,
		// resumed, met a conflict before that abort and replanned, rewriting the sidecar
		// with a new attempt.)
		unsure := map[string]bool{}
		for _, a := range sc.Attempts {
			if !a.Rejected && !abortedIDs[a.TxnID] {
				unsure[a.TxnID] = true
			}
		}
		if head > 0 && len(unsure) > 0 {
			fm, err := r.fence(ctx, sc, unsure, head)
			if errors.Is(err, manifest.ErrIncompatible) && !retried {
				return r.resolveOnce(ctx, key, sc, Outcome{Key: out.Key, Operation: out.Operation, Table: out.Table}, true)
			}
			if err != nil {
				return out, fmt.Errorf("sidecar %s: table %q: fence the operation's transactions: %w", key, sc.Table, err)
			}
			out.Fence = fm
			if err := seamAfterFence.Inject(ctx); err != nil {
				return out, err
			}
		}
	}
	return r.deleteFiles(ctx, key, sc, out, referenced)
}

// resolveDropped rolls back the operation of sidecar sc on a table dropped since it was
// planned: no fence (the drop marker fences its transactions), every file under its
// attempts' prefixes deleted (no version of a live table references them), then the
// sidecar. RollForward leaves it (NotLanded).
func (r *recoverer) resolveDropped(ctx context.Context, key string, sc Sidecar, out Outcome) (Outcome, error) {
	if r.forwardOnly {
		out.Action = NotLanded
		return out, nil
	}
	out.Action, out.Fence = RolledBack, 0
	return r.deleteFiles(ctx, key, sc, out, nil)
}

// droppedSince reports whether the operation planned at read version from belongs to an
// incarnation of table that a drop has ended since: HEAD (version head; 0 for none) is a
// drop marker, or belongs to a later incarnation (its first version is above from).
func (r *recoverer) droppedSince(ctx context.Context, table string, head, from uint64) (bool, error) {
	if head == 0 {
		return false, nil
	}
	rec, err := manifest.LoadRecord(ctx, r.s, table, head)
	if err != nil {
		return false, fmt.Errorf("table %q: HEAD %d: %w", table, head, err)
	}
	if rec.Txn != nil && rec.Txn.Op.Kind == manifest.OpDrop {
		return true, nil
	}
	return rec.Manifest != nil && rec.Manifest.IncarnationSince > from, nil
}

// deleteFiles deletes the files under sc's prefixes (Sidecar.Prefixes: data files and
// index objects) that no version references (referenced), then the sidecar; RollForward
// only reports that files are left.
func (r *recoverer) deleteFiles(ctx context.Context, key string, sc Sidecar, out Outcome, referenced map[string]bool) (Outcome, error) {
	// Files of attempts that did not land (and, defensively, any file no version names).
	for _, prefix := range sc.Prefixes() {
		objs, err := r.s.List(ctx, prefix, 0)
		if err != nil {
			return out, fmt.Errorf("sidecar %s: list %s: %w", key, prefix, err)
		}
		for _, o := range objs {
			if referenced[o.Key] {
				continue
			}
			if r.forwardOnly {
				out.SidecarKept = true
				return out, nil
			}
			if err := r.s.Delete(ctx, o.Key); err != nil {
				return out, fmt.Errorf("sidecar %s: delete %s: %w", key, o.Key, err)
			}
			out.DeletedFiles = append(out.DeletedFiles, o.Key)
			if len(out.DeletedFiles) == 1 {
				if err := seamMidDelete.Inject(ctx); err != nil {
					return out, err
				}
			}
		}
	}
	if err := seamBeforeSidecarDelete.Inject(ctx); err != nil {
		return out, err
	}
	if err := r.s.Delete(ctx, key); err != nil {
		return out, fmt.Errorf("delete sidecar %s: %w", key, err)
	}
	if err := seamAfterSidecarDelete.Inject(ctx); err != nil {
		return out, err
	}
	return out, nil
}

// fence commits an abort version naming txns on top of version head, the newest version
// the caller's scan read (see Fence), and publishes it once the versions below it are
// published. It returns the abort version. Errors: manifest.ErrIncompatible (wrapped)
// when one of txns committed after head; commit and store errors.
func (r *recoverer) fence(ctx context.Context, sc Sidecar, txns map[string]bool, head uint64) (uint64, error) {
	if err := seamBeforeFence.Inject(ctx); err != nil {
		return 0, err
	}
	var groups manifest.GroupResolver
	if r.cat != nil {
		groups = catalog.GroupWaiter{Catalog: r.cat, Timeout: r.opts.PublishTimeout}
	}
	read, err := manifest.LoadCounted(ctx, r.s, sc.Table, head, groups)
	if err != nil {
		return 0, err
	}
	res, err := Fence(ctx, r.s, r.cat, read, slices.Collect(maps.Keys(txns)), groups, r.opts.FenceWait)
	if err != nil {
		return 0, err
	}
	return res.Version, nil
}

type published struct{ prev, now uint64 }

// publish fast-forwards the table's pointer to m (a no-op when it is at or past m), as
// writers publish (engine.PublishVersion: the pointer carries m's incarnation, and a
// version of a dropped table is refused with manifest.ErrTableDropped).
func (r *recoverer) publish(ctx context.Context, m *manifest.Manifest) (published, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.PublishTimeout)
	defer cancel()
	adv, err := engine.PublishVersion(ctx, r.s, r.cat, m, m.Checksum())
	if err != nil {
		return published{}, err
	}
	return published{prev: adv.Prev, now: adv.Now.Version}, nil
}

func underAny(key string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(key, p) })
}
