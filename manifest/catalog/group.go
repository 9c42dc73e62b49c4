package catalog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Multi-table groups. A transaction over several tables commits a prepared version in each
// table's store, then publishes all of them in one etcd transaction. Its group key,
// <prefix>/groups/<id>, says whether those prepared versions count:
//
//	pending    written with a lease before the first prepared version; readers and writers
//	           that meet a prepared version of the group wait for a decision
//	committed  written (without a lease) in the same etcd transaction that moves every
//	           member's pointer, so no reader sees half of the group
//	absent     aborted: deleted by the group's writer when a member fails, or gone with the
//	           lease when the writer died. The key's mod revision fences a late writer: its
//	           commit compares the value "pending", which an absent key never has.
//
// A prepared version of an aborted group stays in the store (versions are immutable);
// later versions are built as if it were empty (manifest.Commit with a GroupResolver).

// GroupState is the state of a multi-table group.
type GroupState int

const (
	GroupAborted   GroupState = iota // aborted, or its key is gone: its prepared versions count as empty
	GroupPending                     // still being decided: readers and writers that meet it wait
	GroupCommitted                   // committed: its prepared versions are part of their tables
)

// String returns "aborted", "pending" or "committed".
func (s GroupState) String() string {
	switch s {
	case GroupPending:
		return "pending"
	case GroupCommitted:
		return "committed"
	}
	return "aborted"
}

const (
	groupPending   = "pending"
	groupCommitted = "committed"
)

// ErrGroupAborted: the group is no longer pending (it was aborted, or its lease expired),
// so its prepared versions do not count.
var ErrGroupAborted = errors.New("multi-table group aborted")

// GroupKey is the etcd key of group id.
func (c *Catalog) GroupKey(id string) string { return c.prefix + "/groups/" + id }

// BeginGroup creates group id as pending under a lease of ttl that is kept alive until
// release is called (release does not delete the key; CommitGroup or AbortGroup decide it).
// Errors: ErrEtcd; the group existing already is ErrInvalid.
func (c *Catalog) BeginGroup(ctx context.Context, id string, ttl time.Duration) (release func(), err error) {
	key := c.GroupKey(id)
	secs := int64(ttl / time.Second)
	if secs < 1 {
		secs = 1
	}
	lease, err := c.cli.Grant(ctx, secs)
	if err != nil {
		return nil, &Error{"begin group", id, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	r, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, groupPending, clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		return nil, &Error{"begin group", id, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	if !r.Succeeded {
		return nil, &Error{"begin group", id, key, fmt.Errorf("%w: group exists", ErrInvalid)}
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ch, err := c.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		cancel()
		return nil, &Error{"begin group", id, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	go func() {
		for range ch {
		}
	}()
	return cancel, nil
}

// GroupState reads the state of group id (absent = aborted): one etcd read. Errors: as
// *Error wrapping ErrEtcd.
func (c *Catalog) GroupState(ctx context.Context, id string) (GroupState, error) {
	return c.groupState(ctx, c.GroupKey(id))
}

func (c *Catalog) groupState(ctx context.Context, key string) (GroupState, error) {
	r, err := c.cli.Get(ctx, key)
	if err != nil {
		return 0, &Error{"group state", key, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	if len(r.Kvs) == 0 {
		return GroupAborted, nil
	}
	switch string(r.Kvs[0].Value) {
	case groupPending:
		return GroupPending, nil
	case groupCommitted:
		return GroupCommitted, nil
	}
	return 0, &Error{"group state", key, key, fmt.Errorf("%w: group value %q", ErrCorrupt, r.Kvs[0].Value)}
}

// AbortGroup aborts group id if it is still pending and returns the state that holds
// afterwards (a committed group stays committed): one etcd transaction comparing the
// group key's value. Errors: as *Error wrapping ErrEtcd; the state is then unknown.
func (c *Catalog) AbortGroup(ctx context.Context, id string) (GroupState, error) {
	key := c.GroupKey(id)
	r, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", groupPending)).
		Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		// Decide by reading: the delete may have landed.
		return c.groupState(ctx, key)
	}
	if r.Succeeded {
		return GroupAborted, nil
	}
	return c.groupState(ctx, key)
}

// CommitGroup publishes updates (each by its Mode) and marks group id committed, all in one
// etcd transaction, provided the group is still pending. Errors: ErrGroupAborted when it is
// not; *ConflictError for a CAS update whose pointer moved; ErrEtcd.
func (c *Catalog) CommitGroup(ctx context.Context, id string, updates []Update) error {
	_, err := c.publishGuarded(ctx, "commit group", updates, &groupGuard{key: c.GroupKey(id)})
	return err
}

// GroupWaiter decides multi-table groups for readers and writers that meet a prepared
// version (it satisfies manifest.GroupResolver): committed → true, aborted → false; while
// pending it waits with jittered backoff (2 ms doubling to 100 ms) and aborts a group still
// pending after Timeout (AbortGroup; a group that committed meanwhile stays committed).
type GroupWaiter struct {
	Catalog *Catalog      // the catalog holding the group keys
	Timeout time.Duration // how long a pending group is waited for before it is aborted
}

// Committed reports whether group id committed. Errors: etcd failures, ctx's error.
func (g GroupWaiter) Committed(ctx context.Context, id string) (bool, error) {
	deadline := time.Now().Add(g.Timeout)
	wait := 2 * time.Millisecond
	for {
		st, err := g.Catalog.GroupState(ctx, id)
		if err != nil {
			return false, err
		}
		switch {
		case st == GroupCommitted:
			return true, nil
		case st == GroupAborted:
			return false, nil
		case time.Now().After(deadline):
			st, err = g.Catalog.AbortGroup(ctx, id)
			return st == GroupCommitted, err
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(wait)) + 1))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, 100*time.Millisecond)
	}
}
