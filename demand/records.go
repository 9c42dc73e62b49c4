package demand

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PublishAttempts bounds a publish's read-join-compare-and-put rounds (lance-context
// §2.11): after that many lost compare-and-puts (or transient etcd failures) it returns
// ErrContended (or ErrEtcd). Between rounds it sleeps a jittered backoff (full jitter,
// from publishBackoff doubling).
const PublishAttempts = 5

const publishBackoff = time.Millisecond

// Records reads and publishes the demand records of one catalog prefix in etcd. It is safe
// for concurrent use; any number of processes may publish to the same records.
type Records struct {
	cli    *clientv3.Client
	prefix string

	// afterPage, when set (tests), runs after each page of a paged read.
	afterPage func(page int)
	// lost counts compare-and-puts that lost to a concurrent write (tests).
	lost atomic.Int64
}

// New returns the records under <prefix>/demand/ (a trailing "/" on prefix is ignored).
// Pass the prefix the table catalog uses (catalog.New), so a table's pointer and its
// demand sit side by side.
func New(cli *clientv3.Client, prefix string) *Records {
	return &Records{cli: cli, prefix: strings.TrimRight(prefix, "/")}
}

// Key returns the etcd key of a shard's record: <prefix>/demand/<table>/<shard>.
func (r *Records) Key(table, shard string) string { return r.TablePrefix(table) + shard }

// TablePrefix returns the key prefix of a table's records: <prefix>/demand/<table>/.
func (r *Records) TablePrefix(table string) string { return r.demandPrefix() + table + "/" }

func (r *Records) demandPrefix() string { return r.prefix + "/demand/" }

// Error is a failed publish or read of demand: the operation ("publish", "read",
// "delete"), the table, the shard and the etcd key (empty when not one), and the cause,
// wrapping one of the package's error classes.
type Error struct {
	Op    string // "publish", "read" or "delete"
	Table string // the table
	Shard string // the shard, or ""
	Key   string // the etcd key or prefix
	Err   error  // the cause
}

// Error reads "demand <op> of table <t> shard <s> (key <k>): <cause>".
func (e *Error) Error() string {
	shard := ""
	if e.Shard != "" {
		shard = fmt.Sprintf(" shard %q", e.Shard)
	}
	return fmt.Sprintf("demand %s of table %q%s (key %s): %v", e.Op, e.Table, shard, e.Key, e.Err)
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Publish joins e into its shard's record (lance-context §2.11): read the record, Join,
// and when the join changes it, put the result guarded by the mod revision read (absent:
// must still be absent); a lost guard re-reads and joins again, up to PublishAttempts
// rounds with jittered backoff. It reports whether this call's put landed; false with a
// nil error means the record already contained the event (possibly because an earlier
// attempt of this call, whose reply was lost, wrote it). Either way, on success the stored
// record contains e. A record that does not decode is replaced; one from a newer schema is
// never overwritten.
// Errors (as *Error): ErrInvalid and ErrUnknownVersion for e (before touching etcd);
// ErrUnknownVersion for the stored record (nothing written); ErrContended; ErrEtcd (also
// when ctx ends).
func (r *Records) Publish(ctx context.Context, table string, e Event) (bool, error) {
	fail := func(err error) error {
		return &Error{Op: "publish", Table: table, Shard: e.Shard, Key: r.Key(table, e.Shard), Err: err}
	}
	if err := checkName("table", table); err != nil {
		return false, fail(err)
	}
	if err := e.Validate(); err != nil {
		return false, fail(err)
	}
	key := r.Key(table, e.Shard)
	backoff := publishBackoff
	var last error
	for attempt := 1; attempt <= PublishAttempts; attempt++ {
		if attempt > 1 {
			if err := sleepJitter(ctx, backoff); err != nil {
				return false, fail(fmt.Errorf("%w: %w (after %v)", ErrEtcd, err, last))
			}
			backoff *= 2
		}
		wrote, done, err := r.publishOnce(ctx, key, e)
		switch {
		case err == nil && done:
			return wrote, nil
		case err == nil:
			last = fmt.Errorf("%w after %d attempts", ErrContended, attempt)
		case errors.Is(err, ErrUnknownVersion) || !isTransient(ctx, err):
			return false, fail(err)
		default:
			last = err
		}
	}
	return false, fail(last)
}

// publishOnce is one round: read, join, guarded put. done is false when the guard lost.
func (r *Records) publishOnce(ctx context.Context, key string, e Event) (wrote, done bool, err error) {
	resp, err := r.cli.Get(ctx, key)
	if err != nil {
		return false, false, fmt.Errorf("%w: get: %w", ErrEtcd, err)
	}
	var stored *Event
	var modRev int64 // 0 for an absent key, which is also what its ModRevision compares as
	if len(resp.Kvs) > 0 {
		kv := resp.Kvs[0]
		modRev = kv.ModRevision
		se, derr := DecodeEvent(kv.Value)
		switch {
		case errors.Is(derr, ErrUnknownVersion):
			return false, false, fmt.Errorf("stored record (mod revision %d): %w", modRev, derr)
		case derr == nil && se.Shard == e.Shard:
			stored = &se
		} // corrupt (or naming another shard): replaced, as if absent
	}
	next, changed, err := Join(stored, e)
	if err != nil {
		return false, false, err
	}
	if !changed {
		return false, true, nil
	}
	tr, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(clientv3.OpPut(key, string(next.Encode()))).Commit()
	if err != nil {
		return false, false, fmt.Errorf("%w: compare-and-put: %w", ErrEtcd, err)
	}
	if !tr.Succeeded {
		r.lost.Add(1)
	}
	return tr.Succeeded, tr.Succeeded, nil
}

// PublishMerged publishes a merge's new merged watermark for one shard:
// Publish(MergedEvent(shard, merged, incarnationSince, now)). It raises the shard's merged
// mark and nothing else; a record at or past merged is left untouched (false, nil). Errors
// as Publish.
func (r *Records) PublishMerged(ctx context.Context, table, shard string, merged, incarnationSince uint64) (bool, error) {
	return r.Publish(ctx, table, MergedEvent(shard, merged, incarnationSince, time.Now().UnixMilli()))
}

// DeleteTable removes every demand record of table (for a dropped table). A publish still
// in flight may put a record back afterwards; the next incarnation's records supersede it
// (Event.IncarnationSince), and a planner skips tables without a published pointer.
// Errors (as *Error): ErrInvalid, ErrEtcd.
func (r *Records) DeleteTable(ctx context.Context, table string) error {
	pre := r.TablePrefix(table)
	if err := checkName("table", table); err != nil {
		return &Error{Op: "delete", Table: table, Key: pre, Err: err}
	}
	if _, err := r.cli.Delete(ctx, pre, clientv3.WithPrefix()); err != nil {
		return &Error{Op: "delete", Table: table, Key: pre, Err: fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	return nil
}

// isTransient reports an etcd failure worth another round (leader change, connection
// lost, server-side timeout) while ctx is still live. err may wrap the etcd error.
func isTransient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	return code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Aborted
}

func sleepJitter(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(time.Duration(rand.Int64N(int64(d)) + 1))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
