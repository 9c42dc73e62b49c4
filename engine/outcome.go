package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// Outcome is what a write's result means for the table (invariant 5).
type Outcome int

const (
	// Committed: the version is in the store and published.
	Committed Outcome = iota
	// Rejected: nothing will ever take effect (a conflict, bad input, an aborted group).
	Rejected
	// Unknown: the write may have landed. Retry with Table.Retry (same transaction id:
	// it commits at most once); never delete what the write created.
	Unknown
)

// String returns "committed", "rejected" or "unknown".
func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Rejected:
		return "rejected"
	}
	return "unknown"
}

// ErrUnknown is wrapped by every *UnknownError.
var ErrUnknown = errors.New("write outcome unknown")

// ErrNotApplied is Table.Retry's answer (Rejected) for a keyed write whose own transaction
// never committed and whose idempotency key has not committed either: the write did not
// take effect; run it again (with the same key it can never apply twice).
var ErrNotApplied = errors.New("the write did not take effect: its transaction never committed and its idempotency key has not")

// UnknownError reports a write whose outcome could not be decided: the manifest put or the
// publish did not answer and reading back could not tell. Txn is the transaction to pass to
// Table.Retry. Committed is true when the version is known to be in the store and only its
// publish is undecided.
//
// A keyed write (WithIdempotencyKey) whose own transaction is decided (it never reached its
// commit, or the commit loop rejected it) but whose key could not be looked up is Unknown
// too: an earlier run under the same key may have committed. Its Txn then carries only the
// id, read version and key, with an empty Op (Kind ""): Table.Retry of it commits nothing
// and only decides whether the key committed (a Duplicate) or not (ErrNotApplied).
type UnknownError struct {
	Table     string               // the table written
	Txn       manifest.Transaction // the transaction, with its id and files: pass it to Table.Retry
	Committed bool                 // the version is in the store; only the publish is undecided
	Version   uint64               // when Committed
	// Group is the multi-table transaction's group id (DB.Commit), "" otherwise; its state
	// (catalog.GroupState) decides the outcome later.
	Group string
	Err   error // the failure that left the outcome open (a timeout, store.ErrOutcomeUnknown, an etcd error)
}

// Error names the table and the transaction id, and the version when Committed.
func (e *UnknownError) Error() string {
	if e.Committed {
		return fmt.Sprintf("table %q: transaction %s committed as version %d but its publish is undecided: %v", e.Table, e.Txn.ID, e.Version, e.Err)
	}
	return fmt.Sprintf("table %q: transaction %s: outcome unknown: %v", e.Table, e.Txn.ID, e.Err)
}

// Unwrap returns ErrUnknown and Err, for errors.Is and errors.As.
func (e *UnknownError) Unwrap() []error { return []error{ErrUnknown, e.Err} }

// OutcomeOf classifies a write's error: nil is Committed, *UnknownError (or any error
// wrapping manifest.ErrCommitUnknown) is Unknown, anything else is Rejected.
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return Committed
	case errors.Is(err, ErrUnknown), errors.Is(err, manifest.ErrCommitUnknown):
		return Unknown
	}
	return Rejected
}

// Failpoint seams around the publish (internal/failpoint).
var (
	seamBeforePublish = failpoint.Seam("engine.before_publish")
	seamAfterPublish  = failpoint.Seam("engine.after_publish")
)

// turnQuietCommits is how many commits in a row a handle makes without meeting another
// writer before it stops taking turns (manifest.CommitOptions.Turn): writers that take
// turns rarely see each other's versions in their own commit, so one quiet commit does
// not mean the others have gone.
const turnQuietCommits = 8

// unknownRetries is how often commit re-runs the commit loop with the same transaction
// after an unknown manifest put before giving the decision to the caller.
const unknownRetries = 3

// commit runs the commit loop for txn on top of this handle's version and publishes the
// result; the handle moves to the committed version. An unknown manifest put is decided by
// re-running the loop with the same transaction (it finds an earlier attempt that landed
// by its id, or commits once); what stays undecided is returned as *UnknownError. The
// commit loop's conflicts are decisions (it reads forward for an earlier attempt before
// reporting one), so a conflict after an unknown attempt means Rejected.
func (t *Table) commit(ctx context.Context, txn manifest.Transaction) (CommitResult, error) {
	return t.commitStaged(ctx, txn, nil)
}

// commitStaged is commit that writes stage (txn's own data files, not yet written) with
// the first attempt's transaction record (manifest.CommitOptions.Stage).
func (t *Table) commitStaged(ctx context.Context, txn manifest.Transaction, stage []store.Object) (CommitResult, error) {
	if t.readOnly {
		return CommitResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	if err := t.db.beforeFirstWrite(ctx, t.name); err != nil {
		return CommitResult{}, err
	}
	opts := t.db.opts.Commit
	opts.Groups = t.db.groups()
	opts.CheckHead = opts.CheckHead || t.contended
	if !t.contended && t.quiet >= turnQuietCommits {
		opts.Turn = nil // a writer alone needs no turn (it takes one once it meets others)
	}
	opts.Stage = stage
	var (
		m     *manifest.Manifest
		stats manifest.CommitStats
		err   error
	)
	unknown := false
	for attempt := 0; ; attempt++ {
		m, stats, err = manifest.Commit(ctx, t.db.store, t.name, t.m, txn, opts)
		if stats.Staged {
			opts.Stage = nil // written: a re-run for the same transaction must not need them
		}
		if err == nil {
			break
		}
		var dup *manifest.DuplicateError
		if errors.As(err, &dup) {
			return t.duplicate(ctx, dup)
		}
		var landed *manifest.ExpiredLandingError
		if errors.As(err, &landed) {
			// An earlier attempt committed, in a version garbage collection has expired
			// since: below the published version, so published too.
			return t.landedExpired(ctx, landed)
		}
		if !errors.Is(err, manifest.ErrCommitUnknown) {
			// After an unknown attempt, only a conflict proves ours did not land (the
			// commit loop read every version it could have landed at); any other failure
			// leaves the outcome unknown.
			if unknown && !errors.Is(err, manifest.ErrConflict) {
				return CommitResult{}, &UnknownError{Table: t.name, Txn: txn, Err: err}
			}
			break
		}
		unknown = true
		if attempt >= unknownRetries || ctx.Err() != nil {
			return CommitResult{}, &UnknownError{Table: t.name, Txn: txn, Err: err}
		}
		if serr := sleepCtx(ctx, time.Duration(attempt+1)*20*time.Millisecond); serr != nil {
			return CommitResult{}, &UnknownError{Table: t.name, Txn: txn, Err: err}
		}
	}
	if err != nil {
		return CommitResult{}, err
	}
	t.m = m
	if t.contended || len(stats.Rebased) > 0 {
		t.quiet = 0
	} else {
		t.quiet = min(t.quiet+1, turnQuietCommits)
	}
	t.contended = len(stats.Rebased) > 0
	res := CommitResult{Version: m.Version, Attempts: stats.Attempts, Rebased: stats.Rebased}
	also, err := t.publish(ctx, m, stats.Checksum)
	if err != nil {
		if errors.Is(err, ErrTableDropped) {
			// The version landed in a number the drop freed, or the table was dropped
			// before it could be published: it belongs to no table, and never will.
			return CommitResult{}, err
		}
		return res, &UnknownError{Table: t.name, Txn: txn, Committed: true, Version: m.Version, Err: err}
	}
	res.Published, res.AlsoPublished = t.db.cat != nil, also
	return res, nil
}

// landedExpired is the result of a commit whose earlier attempt landed in a version GC
// has since expired: committed and published. The handle moves to the latest version.
func (t *Table) landedExpired(ctx context.Context, landed *manifest.ExpiredLandingError) (CommitResult, error) {
	res := CommitResult{Version: landed.Version, Published: t.db.cat != nil, Attempts: 0}
	if m, err := t.db.latest(ctx, t.name); err == nil {
		t.m = m
	}
	return res, nil
}

// Retry finishes a write whose outcome was unknown: it re-runs the commit of txn (same
// id, same files). The transaction is checked against every version committed after its
// own read version, whichever version this handle is at, so every handle in every process
// gets the same answer. If an earlier attempt landed (even in a version garbage collection
// has since expired), that version is found and published; otherwise txn commits now or
// is rejected (*manifest.ConflictError; manifest.ErrTxnAborted when gc or recovery fenced
// it before deleting its files). It never commits twice.
//
// A transaction with an empty Op (Kind "": a keyed write decided not to have committed
// whose key could not be looked up, see UnknownError) commits nothing: Retry looks the key
// up and returns the key's version as a Duplicate, or ErrNotApplied.
func (t *Table) Retry(ctx context.Context, txn manifest.Transaction) (CommitResult, error) {
	if txn.Op.Kind == "" {
		return t.retryKey(ctx, txn)
	}
	return t.commit(ctx, txn)
}

// retryKey decides a keyed write whose own transaction is known not to have committed by
// its idempotency key alone.
func (t *Table) retryKey(ctx context.Context, txn manifest.Transaction) (CommitResult, error) {
	key := txn.IdempotencyKey
	if key == "" {
		return CommitResult{}, fmt.Errorf("table %q: transaction %s: %w: an empty operation without an idempotency key", t.name, txn.ID, ErrInvalidOption)
	}
	head, err := manifest.CatchUp(ctx, t.db.store, t.name, t.m, t.db.groups())
	if err != nil {
		return CommitResult{}, &UnknownError{Table: t.name, Txn: txn,
			Err: fmt.Errorf("whether idempotency key %q committed could not be read: %w", key, err)}
	}
	t.m = head
	if rec, ok := head.IdempotencyVersion(key); ok && rec.TxnID != txn.ID {
		return t.duplicate(ctx, &manifest.DuplicateError{Table: t.name, Key: key, Version: rec.Version, TxnID: rec.TxnID})
	}
	return CommitResult{}, fmt.Errorf("table %q: transaction %s (idempotency key %q): %w", t.name, txn.ID, key, ErrNotApplied)
}

// publish moves the table's catalog pointer forward to m (no-op without a catalog) and
// returns the logical versions of other transactions it made visible on the way (see
// CommitResult.AlsoPublished). The version is committed whatever happens here; an error
// means only that the pointer may lag, except ErrTableDropped: the version belongs to no
// table.
//
// Every single-table write publishes this way, logical or maintenance: the store's
// put-if-absent of version N is the commit point, and the commit loop has checked our
// transaction against every version below N, so moving the pointer from any value below N
// to N (or finding it at or past N) publishes a prefix of one linear history. The strict
// compare-and-swap on read versions applies where etcd is the commit point: multi-table
// transactions (DB.Commit).
//
// The pointer carries m's incarnation (see PublishVersion): no publish moves a pointer of
// a later incarnation, and only a Create, or a version of the live incarnation of a
// table never published, creates one.
func (t *Table) publish(ctx context.Context, m *manifest.Manifest, checksum uint32) ([]PublishedVersion, error) {
	if t.db.cat == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, t.db.opts.PublishTimeout)
	defer cancel()
	if err := seamBeforePublish.Inject(ctx); err != nil {
		return nil, err
	}
	adv, err := PublishVersion(ctx, t.db.store, t.db.cat, m, checksum)
	if err == nil {
		err = seamAfterPublish.Inject(ctx)
	}
	if errors.Is(err, ErrTableDropped) {
		return nil, fmt.Errorf("table %q: version %d is in no table: %w", t.name, m.Version, err)
	}
	if err != nil {
		return nil, fmt.Errorf("table %q: version %d committed but not published: %w", t.name, m.Version, err)
	}
	// Versions below the incarnation's first are another incarnation's: never ours to list.
	from := max(adv.Prev+1, m.IncarnationSince)
	if adv.Now.Version != m.Version || from >= m.Version {
		return nil, nil // nobody else's version became visible through us
	}
	return t.othersPublished(ctx, from, m.Version-1), nil
}

// PointerOf is the catalog pointer publishing version m (whose manifest object has
// checksum): its version, key, checksum and incarnation.
func PointerOf(m *manifest.Manifest, checksum uint32) catalog.Pointer {
	return catalog.Pointer{Version: m.Version, ManifestKey: m.Key(), Checksum: checksum,
		Incarnation: m.Incarnation, Since: m.IncarnationSince}
}

// PublishVersion fast-forwards the catalog pointer of m's table to m (PointerOf: it
// carries m's incarnation), as every single-table write does; maintenance (compaction,
// recovery's roll forward, repair) publishes through it too. A Create publishes by fast-forward, creating the pointer or
// replacing one of the incarnation a drop ended. Every other version never creates a
// pointer (a drop removed it), and no version moves a pointer of a later incarnation (the
// table was dropped and created again, and m landed in a version number the drop freed):
// both are ErrTableDropped. An absent pointer is created only for a version of the live
// incarnation as the store shows it (manifest.CheckLive: a table never published, e.g.
// created without a catalog); if a drop removed it meanwhile, the pointer is taken back.
// Errors: ErrTableDropped (wrapping the catalog's or the store's evidence), catalog and
// store errors.
func PublishVersion(ctx context.Context, s store.Store, cat *catalog.Catalog, m *manifest.Manifest, checksum uint32) (catalog.Advanced, error) {
	p := PointerOf(m, checksum)
	if m.Txn.Op.Kind == manifest.OpCreate {
		adv, err := cat.Advance(ctx, m.Table, p, false)
		return adv, droppedIfIncarnation(err)
	}
	adv, err := cat.Advance(ctx, m.Table, p, true)
	if !errors.Is(err, catalog.ErrNoPointer) {
		return adv, droppedIfIncarnation(err)
	}
	if err := manifest.CheckLive(ctx, s, m); err != nil {
		return adv, err
	}
	if adv, err = cat.Advance(ctx, m.Table, p, false); err != nil {
		return adv, droppedIfIncarnation(err)
	}
	// A drop may have committed its marker and removed the pointer between the check and
	// the write: then the pointer just created names a dropped table. Look again, and
	// take it back if so.
	if err := manifest.CheckLive(ctx, s, m); errors.Is(err, manifest.ErrTableDropped) {
		if _, derr := cat.DeleteDropped(ctx, m.Table, p); derr != nil {
			return adv, errors.Join(err, derr)
		}
		return adv, err
	}
	return adv, nil
}

// droppedIfIncarnation words a publish refused for a pointer of a later incarnation as
// ErrTableDropped.
func droppedIfIncarnation(err error) error {
	if errors.Is(err, catalog.ErrIncarnation) {
		return fmt.Errorf("%w and created again; the version belongs to no table: %w", ErrTableDropped, err)
	}
	return err
}

// othersPublished lists the logical versions in [from, to] (versions of other writers
// that a publish made visible), reading only their transactions. Versions that cannot be
// read, maintenance versions and prepared versions of aborted groups are left out.
func (t *Table) othersPublished(ctx context.Context, from, to uint64) []PublishedVersion {
	var out []PublishedVersion
	for v := from; v <= to; v++ {
		txn, err := manifest.LoadTransaction(ctx, t.db.store, t.name, v)
		if err != nil || txn.Op.Kind.Maintenance() {
			continue
		}
		if g := txn.Op.Group; g != nil {
			if st, err := t.db.cat.GroupState(ctx, g.ID); err != nil || st != catalog.GroupCommitted {
				continue
			}
		}
		out = append(out, PublishedVersion{Version: v, Operation: txn.Op.Kind, Transaction: txn.ID})
	}
	return out
}

// refreshHead moves the handle to the manifest a re-planned write should start from: HEAD,
// with prepared versions of aborted multi-table groups counted as empty.
func (t *Table) refreshHead(ctx context.Context) error {
	m, err := manifest.CatchUp(ctx, t.db.store, t.name, t.m, t.db.groups())
	if err != nil {
		return err
	}
	t.contended = t.contended || m.Version != t.m.Version
	t.m = m
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
