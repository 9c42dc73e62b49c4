package manifest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/objstore"
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
	// BaseBackoff is the first backoff after a lost race; it doubles per consecutive loss up
	// to MaxBackoff, with full jitter (defaults 2 ms and 10 ms: about one commit's latency
	// on local disk; a 250 ms cap let one writer process take nearly every commit while the
	// others waited seconds, see benchmarks/RESULTS.md).
	BaseBackoff, MaxBackoff time.Duration
	// Groups decides whether a prepared version of a multi-table group counts (nil: every
	// version counts; only the engine's multi-table commits create groups, and they need a
	// catalog).
	Groups GroupResolver
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
		o.BaseBackoff = 2 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 10 * time.Millisecond
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
}

// Commit commits txn to table as the next version on top of read (nil only for Create),
// and returns the committed manifest.
//
// Each attempt builds version N = parent+1 from parent, writes the transaction record
// _txn/<N>-<id>.txn, then creates _versions/<inv(N)> with put-if-absent. On losing, it reads
// version N, checks the conflict rules (Check) of txn against the winner's transaction and,
// if compatible, makes the winner the parent and tries N+1 after a jittered backoff.
//
// Errors: *ConflictError (errors.Is ErrRetryable or ErrIncompatible) naming both
// transactions; ErrCommitUnknown when the outcome cannot be decided; ErrTooManyAttempts;
// *ObjectError for corrupt manifests met on the way; store errors.
func Commit(ctx context.Context, s objstore.Store, table string, read *Manifest, txn Transaction, opts CommitOptions) (*Manifest, CommitStats, error) {
	opts = opts.withDefaults()
	var stats CommitStats
	parent := read
	// A retry may start from a version that already includes an earlier attempt of this
	// transaction: look for it between the transaction's read version and ours.
	if read != nil {
		for v := txn.ReadVersion + 1; v <= read.Version; v++ {
			m, err := Load(ctx, s, table, v)
			if err != nil {
				return nil, stats, err
			}
			if m.Txn.ID == txn.ID {
				stats.Checksum = m.checksum
				return m, stats, nil
			}
		}
	}
	losses := 0
	for stats.Attempts < opts.MaxAttempts {
		if err := ctx.Err(); err != nil {
			return nil, stats, err
		}
		next, err := Build(table, parent, txn)
		if err != nil {
			return nil, stats, conflictFromBuild(table, parent, txn, err)
		}
		stats.Attempts++
		rec, err := EncodeTransaction(table, next.Version, txn)
		if err != nil {
			return nil, stats, err
		}
		if err := seamBeforeTxnPut.Inject(ctx); err != nil {
			return nil, stats, err
		}
		if err := s.Put(ctx, next.TxnKey, rec); err != nil {
			return nil, stats, fmt.Errorf("table %q: write transaction record: %w", table, err)
		}
		body, err := next.Encode()
		if err != nil {
			return nil, stats, err
		}
		if err := seamBeforeVersionPut.Inject(ctx); err != nil {
			return nil, stats, err
		}
		err = s.PutIfAbsent(ctx, next.Key(), body)
		if err == nil {
			err = seamAfterVersionPut.Inject(ctx)
			if err != nil {
				// Landed, but this process is told otherwise: the read-back below decides.
				err = &objstore.Error{Op: objstore.OpPutIfAbsent, Store: s.URL(), Key: next.Key(), Class: objstore.ErrOutcomeUnknown, Err: err}
			}
		}
		switch {
		case err == nil:
			stats.Checksum = Checksum(body)
			next.checksum = stats.Checksum
			return next, stats, nil
		case errors.Is(err, objstore.ErrPreconditionFailed), errors.Is(err, objstore.ErrOutcomeUnknown):
			// Somebody holds version N, or we may. Read it to find out whose it is.
			winner, lerr := Load(ctx, s, table, next.Version)
			if errors.Is(lerr, ErrVersionExpired) {
				// Our number is below HEAD and its version is gone: we cannot check
				// the transactions committed since our read version.
				return nil, stats, expiredConflict(table, txn, next.Version, lerr)
			}
			if lerr != nil {
				// Version N is taken (or may be), and we cannot read whose it is: it may be
				// an earlier attempt of this transaction.
				return nil, stats, &ObjectError{Table: table, Version: next.Version, Key: next.Key(),
					Err: fmt.Errorf("%w: transaction %s: %v; read-back: %w", ErrCommitUnknown, txn.ID, err, lerr)}
			}
			if winner.Txn.ID == txn.ID {
				stats.Checksum = winner.checksum
				return winner, stats, nil // an earlier attempt of ours landed
			}
			// Catch up: check every version committed since, without waiting between reads.
			for {
				aborted, err := abortedGroupMember(ctx, opts.Groups, winner)
				if err != nil {
					return nil, stats, fmt.Errorf("table %q version %d: %w", table, winner.Version, err)
				}
				if aborted {
					// A prepared version of an aborted multi-table group: it counts as
					// empty, so keep the parent's content under the winner's number.
					stats.SkippedAborted = append(stats.SkippedAborted, winner.Version)
					parent = parent.renumbered(winner.Version)
					goto next
				}
				switch res, shared, reason := Check(&txn, &winner.Txn); res {
				case Retryable, Incompatible:
					return nil, stats, &ConflictError{Table: table, Resolution: res, Ours: txn, Theirs: winner.Txn,
						TheirsVersion: winner.Version, Fragments: shared, Reason: reason}
				case Rebase:
					rebased, err := rebaseDeletions(ctx, s, table, txn, winner, shared)
					if err != nil {
						return nil, stats, err
					}
					txn = rebased
					stats.DeletionsMerged += len(shared)
				}
				stats.Rebased = append(stats.Rebased, winner.Version)
				parent = winner
			next:
				winner, lerr = Load(ctx, s, table, parent.Version+1)
				if errors.Is(lerr, ErrVersionExpired) {
					return nil, stats, expiredConflict(table, txn, parent.Version+1, lerr)
				}
				if errors.Is(lerr, ErrVersionNotFound) {
					break
				}
				if lerr != nil {
					return nil, stats, lerr
				}
				if winner.Txn.ID == txn.ID {
					stats.Checksum = winner.checksum
					return winner, stats, nil
				}
			}
			losses++
			if err := backoff(ctx, opts, losses); err != nil {
				return nil, stats, err
			}
		default:
			return nil, stats, fmt.Errorf("table %q: commit version %d: %w", table, next.Version, err)
		}
	}
	return nil, stats, fmt.Errorf("table %q: transaction %s: %w after %d attempts", table, txn.ID, ErrTooManyAttempts, stats.Attempts)
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

func backoff(ctx context.Context, opts CommitOptions, losses int) error {
	d := opts.BaseBackoff << min(losses, 16)
	if d > opts.MaxBackoff || d <= 0 {
		d = opts.MaxBackoff
	}
	d = time.Duration(rand.Int64N(int64(d) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CatchUp reads forward from m to HEAD (one GET per newer version) and returns the
// manifest a new transaction should be planned against: HEAD's, or, when HEAD and the
// versions below it are prepared versions of aborted groups, the content of the last
// version that counts under HEAD's number. A pending group is waited for (r decides).
func CatchUp(ctx context.Context, s objstore.Store, table string, m *Manifest, r GroupResolver) (*Manifest, error) {
	for {
		next, err := Load(ctx, s, table, m.Version+1)
		if errors.Is(err, ErrVersionExpired) {
			// m is older than the retained history: restart from HEAD. (Its content
			// is HEAD's unless HEAD is a prepared version of an aborted group; then
			// that group's member versions are read forward from the nearest retained
			// one below, as usual.)
			if m, err = LoadLatest(ctx, s, table, r); err != nil {
				return nil, err
			}
			continue
		}
		if errors.Is(err, ErrVersionNotFound) {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		aborted, err := abortedGroupMember(ctx, r, next)
		if err != nil {
			return nil, fmt.Errorf("table %q version %d: %w", table, next.Version, err)
		}
		if aborted {
			m = m.renumbered(next.Version)
		} else {
			m = next
		}
	}
}

// expiredConflict is the retryable conflict of a transaction that reached an expired
// version number: its read version is older than the retained history.
func expiredConflict(table string, txn Transaction, v uint64, cause error) error {
	return &ConflictError{Table: table, Resolution: Retryable, Ours: txn, TheirsVersion: v,
		Reason: fmt.Sprintf("version %d was expired by garbage collection after our read version %d; reopen at HEAD (%v)", v, txn.ReadVersion, cause)}
}

// LoadLatest finds HEAD with one LIST and returns the manifest a new transaction should be
// planned against: the newest version at or below HEAD that counts (not a prepared version
// of an aborted group; r decides, nil counts every version), renumbered to HEAD when
// aborted group versions lie above it. Errors: ErrTableNotFound, load errors.
func LoadLatest(ctx context.Context, s objstore.Store, table string, r GroupResolver) (*Manifest, error) {
	head, err := Head(ctx, s, table)
	if err != nil {
		return nil, err
	}
	for v := head; v > 0; v-- {
		m, err := Load(ctx, s, table, v)
		if err != nil {
			return nil, err
		}
		aborted, err := abortedGroupMember(ctx, r, m)
		if err != nil {
			return nil, fmt.Errorf("table %q version %d: %w", table, m.Version, err)
		}
		if !aborted {
			if v != head {
				m = m.renumbered(head)
			}
			return m, nil
		}
	}
	return nil, fmt.Errorf("%w: %q has no version that counts", ErrTableNotFound, table)
}
