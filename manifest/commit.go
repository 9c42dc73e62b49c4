package manifest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/store"
)

// Failpoint seams of the commit loop (internal/failpoint; free unless enabled).
var (
	seamBeforeTxnPut     = failpoint.Seam("manifest.before_txn_put")
	seamBeforeVersionPut = failpoint.Seam("manifest.before_version_put")
	seamAfterVersionPut  = failpoint.Seam("manifest.after_version_put")
)

// ErrCommitUnknown: the manifest put's outcome could not be decided (the store did not
// answer and the version could not be read back). The transaction may or may not have
// committed; retrying Commit with the same transaction commits it at most once. Nothing
// the attempt wrote may be deleted.
var ErrCommitUnknown = errors.New("commit outcome unknown")

// ErrTooManyAttempts: the commit lost the race for a version number more often than the
// budget allows.
var ErrTooManyAttempts = errors.New("commit attempts exhausted")

// CommitOptions bound the commit loop.
type CommitOptions struct {
	// MaxAttempts bounds put-if-absent attempts (default 200).
	MaxAttempts int
	// BaseBackoff bounds the backoff after the second consecutive lost race (the first is
	// retried at once: the loser has just read forward to HEAD, and sleeping would only
	// let it fall behind again); it doubles per further consecutive loss up to MaxBackoff,
	// with full jitter (defaults 1 ms and 8 ms: below one commit's latency on local disk;
	// a 250 ms cap let one writer process take nearly every commit while the others
	// waited seconds, see benchmarks/RESULTS.md). Every attempt after a backoff reads
	// forward to HEAD again before it writes anything.
	BaseBackoff, MaxBackoff time.Duration
	// CheckHead reads forward to HEAD before the first attempt writes anything, as every
	// later attempt does (one GET of the next version, a miss when nothing was committed
	// since the read manifest). A caller that expects concurrent writers sets it: an
	// attempt built on a version that is already stale costs a transaction record and a
	// manifest written (and fsynced) in vain. Without it the first attempt trusts read to
	// be HEAD, as a single writer's handle is.
	CheckHead bool
	// Stage are objects the first attempt writes together with its transaction record
	// (store.PutAllThenPutIfAbsent): the transaction's own data files, written under its
	// id, which a caller may hand over here instead of putting them first, so their
	// fsyncs overlap the record's and the manifest's. Every one is durable before the
	// manifest is created. CommitStats.Staged reports whether they were written; a caller
	// running Commit again for the same transaction passes them again until they were.
	Stage []store.Object
	// Groups decides whether a prepared version of a multi-table group counts (nil: every
	// version counts; only the engine's multi-table commits create groups, and they need a
	// catalog).
	Groups GroupResolver
	// Turn, when set, orders this writer's attempts with other writers' (a hint for speed,
	// never a fence): each attempt holds the table's turn from its read forward to HEAD
	// until its manifest put returned, so writers sharing the turns take them one after
	// another instead of building on the same HEAD and all but one losing the race for
	// its successor. An attempt that had the turn reads forward to HEAD first, CheckHead
	// or not (others committed while it waited). An attempt that does not get the turn
	// (Turn bounds the wait) goes ahead without it: put-if-absent and transaction ids
	// decide every outcome either way.
	Turn Turn
}

// Turn hands out per-table turns to commit attempts (CommitOptions.Turn; internal/turn
// is the local store's). A hint: nothing may depend on a turn being had.
type Turn interface {
	// Take waits, for a bounded time, for table's turn and returns the function that gives
	// it back; had is false (and release does nothing) when the attempt goes ahead without.
	Take(ctx context.Context, table string) (release func(), had bool)
}

// GroupResolver decides multi-table groups for the commit loop.
type GroupResolver interface {
	// Committed reports whether group id committed (true) or aborted (false), waiting while
	// it is pending; it may abort a group that stays pending past its deadline.
	Committed(ctx context.Context, id string) (bool, error)
}

// abortedGroupMember reports whether m is a prepared version of an aborted group.
func abortedGroupMember(ctx context.Context, r GroupResolver, m *Manifest) (bool, error) {
	g := m.Txn.Op.Group
	if g == nil || r == nil {
		return false, nil
	}
	ok, err := r.Committed(ctx, g.ID)
	return !ok, err
}

func (o CommitOptions) withDefaults() CommitOptions {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 200
	}
	if o.BaseBackoff == 0 {
		o.BaseBackoff = time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 8 * time.Millisecond
	}
	return o
}

// CommitStats describes one Commit call.
type CommitStats struct {
	Attempts int      // put-if-absent attempts
	Rebased  []uint64 // versions committed by others that ours was rebuilt on top of
	Checksum uint32   // CRC32C of the committed manifest object (for the published pointer)
	// SkippedAborted are versions of aborted multi-table groups that ours was built past
	// as if they were empty.
	SkippedAborted []uint64
	// DeletionsMerged counts fragments whose deletion vector was merged with a concurrent
	// delete or update of other rows (a rebase without re-reading data).
	DeletionsMerged int
	// Staged: CommitOptions.Stage were written (durably), with the first attempt's record.
	Staged bool
}

// ErrLandedExpired: the transaction had already committed, in a version garbage
// collection has since expired (only its tombstone remains). The write took effect; the
// error is an *ExpiredLandingError naming the version, because its manifest can no
// longer be returned. A version is expired only below the published one, so it is
// published too.
var ErrLandedExpired = errors.New("transaction committed in a version since expired")

// ExpiredLandingError reports where an expired earlier attempt of the transaction landed.
type ExpiredLandingError struct {
	Table   string // the table
	Version uint64 // the expired version the transaction committed as
	TxnID   string // the transaction's id
}

// Error names the table, the transaction and the version.
func (e *ExpiredLandingError) Error() string {
	return fmt.Sprintf("table %q: transaction %s committed as version %d, which garbage collection has since expired", e.Table, e.TxnID, e.Version)
}

// Unwrap returns ErrLandedExpired.
func (e *ExpiredLandingError) Unwrap() error { return ErrLandedExpired }

// ErrDuplicate: a transaction with the same idempotency key committed already (another
// transaction: a retry of a write after its client crashed). The error is a
// *DuplicateError naming the version; the write takes effect once, in that version.
var ErrDuplicate = errors.New("a write with this idempotency key committed already")

// DuplicateError reports the version that committed a write's idempotency key.
type DuplicateError struct {
	Table   string // the table
	Key     string // the idempotency key
	Version uint64 // the version that committed it
	TxnID   string // the transaction that committed the key
}

// Error names the table, the key, the version and the transaction.
func (e *DuplicateError) Error() string {
	return fmt.Sprintf("table %q: idempotency key %q was committed as version %d by transaction %s", e.Table, e.Key, e.Version, e.TxnID)
}

// Unwrap returns ErrDuplicate.
func (e *DuplicateError) Unwrap() error { return ErrDuplicate }

// Commit commits txn to table as the next version and returns the committed manifest.
// read is the manifest to build on when nothing newer exists (nil only for Create of a
// table that never existed; the drop marker for Create of a dropped one); it is normally
// the version txn was planned on, or a newer one (a handle that moved on).
//
// The transaction's window is fixed by its id and read version: before any version is
// built, every version after txn.ReadVersion is checked against txn, whichever handle
// retries it, so the same transaction gets the same answer from every process
// (invariant 16). Each attempt builds version N = parent+1 from parent, writes the
// transaction record _txn/<N>-<id>.txn, then creates _versions/<inv(N)> with
// put-if-absent. On losing, it reads version N and every later one, and for each:
//
//   - a prepared version of an aborted multi-table group counts as empty;
//   - one carrying txn's id is an earlier attempt that landed: it is returned (or, if it
//     expired since, *ExpiredLandingError);
//   - one carrying txn's idempotency key under another transaction id is a duplicate:
//     *DuplicateError (so is a key the version built on remembers, Manifest.Idempotency);
//   - any other is checked with Check, tombstones of expired versions included (they keep
//     the transaction), so expiry never becomes a conflict; a compatible one becomes the
//     parent, a rebase rewrites txn's deletion vectors.
//
// A conflict is a decision: before reporting one, the loop reads forward to HEAD for an
// earlier attempt of txn (which cannot have landed past a version it conflicts with unless
// the check changed, as a rebase against a since-expired version does), so a returned
// *ConflictError means txn has not committed and never will.
//
// Errors: *ConflictError (errors.Is ErrRetryable or ErrIncompatible, and ErrTxnAborted
// when an abort version fences txn: garbage collection or recovery may have deleted its
// files) naming both transactions; *ExpiredLandingError (ErrLandedExpired: committed
// earlier); *DuplicateError (ErrDuplicate: its idempotency key committed already); ErrCommitUnknown when the outcome cannot be decided; ErrTooManyAttempts;
// *ObjectError for corrupt manifests met on the way; store errors.
func Commit(ctx context.Context, s store.Store, table string, read *Manifest, txn Transaction, opts CommitOptions) (*Manifest, CommitStats, error) {
	opts = opts.withDefaults()
	w := &walk{ctx: ctx, s: s, table: table, opts: opts, txn: txn}
	if txn.Op.Kind != OpCreate || read != nil { // a Create of a dropped table builds on its drop marker
		if err := w.start(read); err != nil {
			return w.result(err)
		}
	}
	losses, fresh := 0, !opts.CheckHead
	release := func() {}
	defer func() { release() }()
	// With turns, the staged objects are written while the first attempt waits for its
	// turn and builds, not inside the turn, where their fsyncs would hold up every other
	// writer; the attempt's put-if-absent waits for them (between), so they are durable
	// before the manifest exists as always.
	var staging *backgroundPuts
	if opts.Turn != nil && len(opts.Stage) > 0 {
		staging = startPuts(ctx, s, opts.Stage)
		defer staging.wait() // nothing is written on our behalf after Commit returns
	}
	for w.stats.Attempts < opts.MaxAttempts {
		if err := ctx.Err(); err != nil {
			return nil, w.stats, err
		}
		if opts.Turn != nil {
			var had bool
			if release, had = opts.Turn.Take(ctx, table); had {
				fresh = false // others may have committed while we waited: read forward
			}
		}
		if !fresh {
			// Versions committed since the walk last read forward (while the caller
			// wrote its data, or while this loop backed off) would make this attempt
			// lose: build on them instead of writing a record and a manifest in vain.
			if err := w.forward(); err != nil {
				return w.result(err)
			}
		}
		fresh = false
		parent, err := w.buildParent()
		if err != nil {
			return nil, w.stats, err
		}
		next, err := Build(table, parent, w.txn)
		if err != nil {
			return nil, w.stats, conflictFromBuild(table, parent, w.txn, err)
		}
		w.stats.Attempts++
		rec, err := EncodeTransaction(table, next.Version, w.txn)
		if err != nil {
			return nil, w.stats, err
		}
		body, recs, err := encodeManifestRecords(next, true)
		if err != nil {
			return nil, w.stats, fmt.Errorf("encode manifest %s v%d: %w", next.Table, next.Version, err)
		}
		next.setFragRecords(recs) // the next commit's decodes take its fragments from here
		if err := seamBeforeTxnPut.Inject(ctx); err != nil {
			return nil, w.stats, err
		}
		// The record (and the first attempt's staged data files) are durable before the
		// manifest is created (the order verify and repair rely on); a store that can
		// overlaps the writes' staging (on local disk every temp file is fsynced at once,
		// then the renames' directories).
		puts := []store.Object{{Key: next.TxnKey, Data: rec}}
		if !w.stats.Staged && staging == nil {
			puts = append(slices.Clip(opts.Stage), puts...)
		}
		seamErr := false
		var stageErr error
		putErr, err := store.PutAllThenPutIfAbsent(ctx, s, puts, func(ctx context.Context) error {
			if staging != nil {
				if stageErr = staging.wait(); stageErr != nil {
					return stageErr
				}
			}
			if err := seamBeforeVersionPut.Inject(ctx); err != nil {
				seamErr = true
				return err
			}
			return nil
		}, next.Key(), body)
		release()
		release = func() {}
		if putErr != nil {
			return nil, w.stats, fmt.Errorf("table %q: write transaction record: %w", table, putErr)
		}
		if stageErr != nil {
			// The manifest was not created. A version that decides the transaction's fate
			// comes first: garbage collection fences a transaction (an abort version)
			// before it deletes its directory, which is one way a staged write fails.
			if ferr := w.forward(); ferr != nil {
				return w.result(ferr)
			}
			return nil, w.stats, fmt.Errorf("table %q: write staged objects: %w", table, stageErr)
		}
		w.stats.Staged = true
		if seamErr {
			return nil, w.stats, err
		}
		if err == nil {
			err = seamAfterVersionPut.Inject(ctx)
			if err != nil {
				// Landed, but this process is told otherwise: the read-back below decides.
				err = &store.Error{Op: store.OpPutIfAbsent, Store: s.URL(), Key: next.Key(), Class: store.ErrOutcomeUnknown, Err: err}
			}
		}
		switch {
		case err == nil:
			w.stats.Checksum = Checksum(body)
			next.checksum = w.stats.Checksum
			return next, w.stats, nil
		case errors.Is(err, store.ErrPreconditionFailed), errors.Is(err, store.ErrOutcomeUnknown):
			// Somebody holds version N, or we may. Read it to find out whose it is.
			r, lerr := loadTxnRecord(ctx, s, table, next.Version)
			if lerr != nil {
				// Version N is taken (or may be), and we cannot read whose it is: it may be
				// an earlier attempt of this transaction.
				return nil, w.stats, &ObjectError{Table: table, Version: next.Version, Key: next.Key(),
					Err: fmt.Errorf("%w: transaction %s: %v; read-back: %w", ErrCommitUnknown, w.txn.ID, err, lerr)}
			}
			if err := w.absorb(r); err != nil {
				return w.result(err)
			}
			if err := w.forward(); err != nil {
				return w.result(err)
			}
			losses++
			if losses == 1 {
				// Just read forward to HEAD: retry at once (see CommitOptions.BaseBackoff).
				fresh = true
				continue
			}
			if err := backoff(ctx, opts, losses-1); err != nil {
				return nil, w.stats, err
			}
		default:
			return nil, w.stats, fmt.Errorf("table %q: commit version %d: %w", table, next.Version, err)
		}
	}
	return nil, w.stats, fmt.Errorf("table %q: transaction %s: %w after %d attempts", table, w.txn.ID, ErrTooManyAttempts, w.stats.Attempts)
}

// walk is the state of one Commit: the versions after the transaction's read version
// checked so far, and the content the next version is built on.
type walk struct {
	ctx   context.Context
	s     store.Store
	table string
	opts  CommitOptions
	txn   Transaction
	stats CommitStats

	// at is the highest version checked: every version in (txn.ReadVersion, at] is
	// compatible with txn (or counts as empty) and none carries its id.
	at uint64
	// parent is the content that counts at version at (renumbered past aborted group
	// members); nil when version at expired and no retained version has been read since.
	// While parentRec is set, the content is parentRec's manifest, not decoded yet
	// (content): versions read past are decoded only as far as their transactions.
	parent    *Manifest
	parentRec *Record
	// known is the newest manifest decoded or given so far: the decode of a later version
	// takes its unchanged fragments from it (Record.manifest).
	known *Manifest
	// landed is set when an earlier attempt of txn was found.
	landed *Record
}

// errLanded stops a walk that found an earlier attempt of its transaction.
var errLanded = errors.New("landed")

// start checks the versions between the transaction's read version and read, and sets
// the content to build on.
func (w *walk) start(read *Manifest) error {
	w.at = w.txn.ReadVersion
	if read != nil && read.Version >= w.txn.ReadVersion {
		for v := w.txn.ReadVersion + 1; v <= read.Version; v++ {
			r, err := loadTxnRecord(w.ctx, w.s, w.table, v)
			if err != nil {
				return err
			}
			if err := w.absorb(r); err != nil {
				return err
			}
		}
		w.parent, w.parentRec, w.at, w.known = read, nil, read.Version, read
		return w.remembered(read)
	}
	// The handle is older than the transaction's read version (or absent): start there.
	r, err := LoadRecord(w.ctx, w.s, w.table, w.txn.ReadVersion)
	if err != nil {
		return err
	}
	w.parent = r.Manifest
	if r.Manifest != nil && r.Manifest.Txn.Op.Group != nil {
		if w.parent, err = LoadCounted(w.ctx, w.s, w.table, r.Version, w.opts.Groups); err != nil {
			return err
		}
	}
	if w.parent != nil {
		if err := w.remembered(w.parent); err != nil {
			return err
		}
	}
	return w.forward()
}

// remembered reports a duplicate when m remembers the transaction's idempotency key
// under another transaction (its own id is an earlier attempt: the walk finds it).
func (w *walk) remembered(m *Manifest) error {
	if rec, ok := m.IdempotencyVersion(w.txn.IdempotencyKey); ok && rec.TxnID != w.txn.ID {
		return &DuplicateError{Table: w.table, Key: w.txn.IdempotencyKey, Version: rec.Version, TxnID: rec.TxnID}
	}
	return nil
}

// forward reads and checks every version after at, to HEAD.
func (w *walk) forward() error {
	for {
		r, err := loadTxnRecord(w.ctx, w.s, w.table, w.at+1)
		if errors.Is(err, ErrVersionNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := w.absorb(r); err != nil {
			return err
		}
	}
}

// absorb checks version r (which must be at+1) against the transaction and advances.
// Errors: errLanded (w.landed is set), *ConflictError, group resolution and store errors.
func (w *walk) absorb(r *Record) error {
	aborted, err := w.abortedGroup(r)
	if err != nil {
		return err
	}
	if aborted {
		// A prepared version of an aborted multi-table group (ours included: a Write
		// committed again after its group aborted) counts as empty.
		w.stats.SkippedAborted = append(w.stats.SkippedAborted, r.Version)
		p, err := w.content()
		if err != nil {
			return err
		}
		if p != nil {
			w.parent = p.renumbered(r.Version)
		}
		w.at = r.Version
		return nil
	}
	if r.TxnID == w.txn.ID {
		w.landed = r
		return errLanded
	}
	if k := w.txn.IdempotencyKey; k != "" && r.Txn != nil && r.Txn.IdempotencyKey == k {
		return &DuplicateError{Table: w.table, Key: k, Version: r.Version, TxnID: r.TxnID}
	}
	if r.Txn == nil {
		// A tombstone from before tombstones kept the transaction: we cannot check ours
		// against it.
		return expiredConflict(w.table, w.txn, r.Version)
	}
	switch res, shared, reason := Check(&w.txn, r.Txn); res {
	case Retryable, Incompatible:
		return &ConflictError{Table: w.table, Resolution: res, Ours: w.txn, Theirs: *r.Txn,
			TheirsVersion: r.Version, Fragments: shared, Reason: reason}
	case Rebase:
		theirs, err := r.manifest(w.base())
		if err != nil {
			return err
		}
		if theirs == nil {
			return &ConflictError{Table: w.table, Resolution: Retryable, Ours: w.txn, Theirs: *r.Txn,
				TheirsVersion: r.Version, Fragments: shared,
				Reason: "both change the deletion vectors of the same fragments, and the other version expired (its deletion vectors cannot be merged)"}
		}
		rebased, err := rebaseDeletions(w.ctx, w.s, w.table, w.txn, theirs, shared)
		if err != nil {
			return err
		}
		w.txn = rebased
		w.stats.DeletionsMerged += len(shared)
	}
	w.stats.Rebased = append(w.stats.Rebased, r.Version)
	w.parent, w.parentRec, w.at = nil, r, r.Version
	return nil
}

// content returns the content that counts at version at (nil when it expired), decoding
// the manifest of the version last read past if it is the one.
func (w *walk) content() (*Manifest, error) {
	if w.parentRec != nil {
		m, err := w.parentRec.manifest(w.base())
		if err != nil {
			return nil, err
		}
		w.parent, w.parentRec = m, nil
		if m != nil {
			w.known = m
		}
	}
	return w.parent, nil
}

// base is the manifest a decode of a later version takes unchanged fragments from.
func (w *walk) base() *Manifest {
	if w.known != nil {
		return w.known
	}
	return w.parent
}

// abortedGroup reports whether r is a prepared version of an aborted multi-table group. A
// version of the transaction's own group (its earlier attempt, the group still pending)
// is not resolved: it is ours.
func (w *walk) abortedGroup(r *Record) (bool, error) {
	if r.Txn == nil || r.Txn.Op.Group == nil || w.opts.Groups == nil {
		return false, nil
	}
	g := r.Txn.Op.Group.ID
	if r.TxnID == w.txn.ID && w.txn.Op.Group != nil && w.txn.Op.Group.ID == g {
		return false, nil
	}
	ok, err := w.opts.Groups.Committed(w.ctx, g)
	if err != nil {
		return false, fmt.Errorf("table %q version %d: %w", w.table, r.Version, err)
	}
	return !ok, nil
}

// buildParent returns the manifest the next attempt builds on (version at).
func (w *walk) buildParent() (*Manifest, error) {
	if w.txn.Op.Kind == OpCreate && w.at == 0 {
		return nil, nil
	}
	parent, err := w.content()
	if err != nil {
		return nil, err
	}
	if parent == nil || parent.Version != w.at {
		key := ManifestKey(w.table, w.at)
		return nil, &ObjectError{Table: w.table, Version: w.at, Key: key,
			Err: fmt.Errorf("%w: the newest version expired; cannot build on it", ErrVersionExpired)}
	}
	return parent, nil
}

// result turns a walk's stop into Commit's return: an earlier attempt that landed, or a
// conflict decided by reading forward for one.
func (w *walk) result(err error) (*Manifest, CommitStats, error) {
	var ce *ConflictError
	if errors.As(err, &ce) && !errors.Is(err, errLanded) {
		// Before reporting that txn did not commit, look for an earlier attempt of it
		// past the conflict (see Commit).
		if ferr := w.findLanded(ce.TheirsVersion); ferr != nil && !errors.Is(ferr, errLanded) {
			return nil, w.stats, fmt.Errorf("%w (and reading forward for an earlier attempt failed: %w)", err, ferr)
		}
	}
	if w.landed == nil {
		return nil, w.stats, err
	}
	m, derr := w.landed.manifest(w.base())
	if derr != nil {
		// Landed (the transaction id says so), but the manifest does not decode.
		return nil, w.stats, derr
	}
	if m == nil {
		return nil, w.stats, &ExpiredLandingError{Table: w.table, Version: w.landed.Version, TxnID: w.txn.ID}
	}
	w.stats.Checksum = m.checksum
	return m, w.stats, nil
}

// findLanded reads versions after v to HEAD for one carrying the transaction's id (not in
// an aborted group). Errors: errLanded when found (w.landed set), store errors.
func (w *walk) findLanded(v uint64) error {
	for ; ; v++ {
		r, err := loadTxnRecord(w.ctx, w.s, w.table, v+1)
		if errors.Is(err, ErrVersionNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if r.TxnID != w.txn.ID {
			continue
		}
		aborted, err := w.abortedGroup(r)
		if err != nil {
			return err
		}
		if !aborted {
			w.landed = r
			return errLanded
		}
	}
}

// conflictFromBuild reports a transaction that no longer applies to the version it was
// rebased onto as a retryable conflict with the transaction that made it so.
func conflictFromBuild(table string, parent *Manifest, txn Transaction, err error) error {
	if parent == nil || parent.Version == txn.ReadVersion {
		return fmt.Errorf("table %q: %s: %w", table, txn.String(), err)
	}
	return &ConflictError{Table: table, Resolution: Retryable, Ours: txn, Theirs: parent.Txn,
		TheirsVersion: parent.Version, Reason: err.Error()}
}

// backoff sleeps a random duration up to BaseBackoff << (n-1), capped at MaxBackoff (full
// jitter): n is the number of consecutive losses that back off, from 1.
func backoff(ctx context.Context, opts CommitOptions, n int) error {
	t := time.NewTimer(backoffDuration(opts, n))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// backoffDuration is backoff's random duration.
func backoffDuration(opts CommitOptions, n int) time.Duration {
	d := opts.BaseBackoff << min(max(n-1, 0), 16)
	if d > opts.MaxBackoff || d <= 0 {
		d = opts.MaxBackoff
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// CatchUp reads forward from m to HEAD (one GET per newer version) and returns the
// manifest a new transaction should be planned against: HEAD's, or, when HEAD and the
// versions below it are prepared versions of aborted groups, the content of the last
// version that counts under HEAD's number. A pending group is waited for (r decides).
// Meeting a drop marker (the table was dropped since m) is *DroppedError: a transaction
// planned on m's incarnation can never commit. Versions read past are decoded only as far
// as their transactions; the one returned is decoded whole.
func CatchUp(ctx context.Context, s store.Store, table string, m *Manifest, r GroupResolver) (*Manifest, error) {
	// cur is the newest version read that counts, not decoded yet (nil: m is it).
	var cur *Record
	for {
		at, kind := m.Version, m.Txn.Op.Kind
		if cur != nil {
			at, kind = cur.Version, cur.Txn.Op.Kind
		}
		if kind == OpDrop {
			return nil, &DroppedError{Table: table, Version: at}
		}
		next, err := loadTxnRecord(ctx, s, table, at+1)
		if err == nil && next.Expired() {
			err = &ObjectError{Table: table, Version: next.Version, Key: ManifestKey(table, next.Version), Err: expiredErr}
		}
		if errors.Is(err, ErrVersionExpired) {
			// m is older than the retained history: restart from HEAD. (Its content
			// is HEAD's unless HEAD is a prepared version of an aborted group; then
			// that group's member versions are read forward from the nearest retained
			// one below, as usual.)
			if m, err = LoadLatest(ctx, s, table, r); err != nil {
				return nil, err
			}
			cur = nil
			continue
		}
		if errors.Is(err, ErrVersionNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		aborted := false
		if g := next.Txn.Op.Group; g != nil && r != nil {
			ok, err := r.Committed(ctx, g.ID)
			if err != nil {
				return nil, fmt.Errorf("table %q version %d: %w", table, next.Version, err)
			}
			aborted = !ok
		}
		if !aborted {
			cur = next
			continue
		}
		if cur != nil {
			if m, err = cur.manifest(m); err != nil {
				return nil, err
			}
			cur = nil
		}
		m = m.renumbered(next.Version)
	}
	if cur != nil {
		return cur.manifest(m)
	}
	return m, nil
}

// expiredConflict is the retryable conflict of a transaction that met the tombstone of a
// version expired by an older build (which kept only the transaction id).
func expiredConflict(table string, txn Transaction, v uint64) error {
	return &ConflictError{Table: table, Resolution: Retryable, Ours: txn, TheirsVersion: v,
		Reason: fmt.Sprintf("version %d expired before tombstones kept transactions, so ours (read version %d) cannot be checked against it; re-plan at HEAD", v, txn.ReadVersion)}
}

// LoadCounted returns the content that counts at version v: v's manifest, or, when v is a
// prepared version of an aborted multi-table group (r decides; nil counts every version),
// the content of the nearest version below it that counts, under v's number (its
// ContentVersion says which). Time travel to such a version reads as its parent. Errors:
// Load's (ErrVersionExpired when the content would come from an expired version), group
// resolution errors.
func LoadCounted(ctx context.Context, s store.Store, table string, v uint64, r GroupResolver) (*Manifest, error) {
	for u := v; u > 0; u-- {
		m, err := Load(ctx, s, table, u)
		if err != nil {
			if u != v {
				return nil, fmt.Errorf("table %q version %d belongs to an aborted multi-table transaction and reads as version %d: %w", table, v, u, err)
			}
			return nil, err
		}
		aborted, err := abortedGroupMember(ctx, r, m)
		if err != nil {
			return nil, fmt.Errorf("table %q version %d: %w", table, m.Version, err)
		}
		if !aborted {
			if u != v {
				m = m.renumbered(v)
			}
			return m, nil
		}
	}
	return nil, fmt.Errorf("%w: %q has no version that counts at or below %d", ErrTableNotFound, table, v)
}

// LoadLatest finds HEAD with one LIST and returns the manifest a new transaction should be
// planned against: the newest version at or below HEAD that counts (not a prepared version
// of an aborted group; r decides, nil counts every version), renumbered to HEAD when
// aborted group versions lie above it. Errors: ErrTableNotFound (*DroppedError when HEAD
// is a drop marker), load errors.
func LoadLatest(ctx context.Context, s store.Store, table string, r GroupResolver) (*Manifest, error) {
	head, err := Head(ctx, s, table)
	if err != nil {
		return nil, err
	}
	m, err := LoadCounted(ctx, s, table, head, r)
	if err != nil {
		return nil, err
	}
	if m.Dropped() {
		return nil, &DroppedError{Table: table, Version: m.Version}
	}
	return m, nil
}

// backgroundPuts are Puts running on their own goroutines (Commit's staged objects when it
// takes turns).
type backgroundPuts struct {
	done chan struct{}
	err  error
}

// startPuts writes objs at once, each with Put.
func startPuts(ctx context.Context, s store.Store, objs []store.Object) *backgroundPuts {
	b := &backgroundPuts{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		errs := make([]error, len(objs))
		var wg sync.WaitGroup
		for i, o := range objs {
			wg.Go(func() { errs[i] = s.Put(ctx, o.Key, o.Data) })
		}
		wg.Wait()
		b.err = errors.Join(errs...)
	}()
	return b
}

// wait returns once every Put has returned: nil when all succeeded (each durable where the
// store promises durability).
func (b *backgroundPuts) wait() error {
	<-b.done
	return b.err
}
