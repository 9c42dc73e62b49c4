// Package catalog keeps each table's published pointer in etcd (DESIGN §5): the version
// readers are directed to, under <prefix>/tables/<table>.
//
// Two publish modes:
//   - fast-forward (maintenance ops): succeeds once the pointer is at or past our version,
//     whoever put it there; writes only when it is behind, guarded by its mod revision.
//   - compare-and-swap (logical ops): succeeds only if the pointer is still at the version
//     our transaction read; otherwise a *ConflictError with the current pointer.
//
// The pointer never moves backwards (invariant 2): every write is guarded by the mod
// revision of the pointer it was decided against, and is decided only when it raises the
// version. Success means the goal holds (invariant 4): a publish whose etcd request failed
// re-reads the pointer and reports success if our pointer (or a later one, for
// fast-forward) is in place. PublishMany applies several updates in one etcd transaction,
// and Snapshot reads several pointers at one etcd revision, so a reader never sees half of
// a multi-table publish.
//
// Where to start: engine.Open builds the Catalog a DB uses (engine.DB.Catalog returns it);
// New builds one from an etcd client and a key prefix. Get reads a pointer, FastForward
// and CompareAndSwap publish one, Snapshot reads several at one revision, and AcquireHold / Holds
// manage the lease-backed holds that garbage collection respects. A Catalog is safe for
// concurrent use.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Retry budget of a publish that keeps losing its guarded write to concurrent writers:
// attempts, and the jittered backoff between them (full jitter, doubling up to the cap;
// a publish of fast-forwards alone decides again at once, see publishDetailed).
const (
	maxAttempts    = 20
	backoffBase    = time.Millisecond
	backoffCap     = 50 * time.Millisecond
	snapshotChunk  = 100 // keys per read transaction (etcd's default max-txn-ops is 128)
	MaxPublishMany = 128 // updates per PublishMany: etcd's default max-txn-ops
)

// Mode is how one update of PublishMany publishes.
type Mode int

const (
	// FastForward: succeed once the pointer is at or past the update's version.
	FastForward Mode = iota + 1
	// CAS: succeed only if the pointer is at Update.Expected (0 = absent).
	CAS
	// FastForwardExisting is FastForward that never creates a pointer: an absent one is
	// ErrNoPointer (the table was dropped, or never published). The write is guarded by
	// the mod revision read, so a pointer deleted meanwhile is not re-created.
	FastForwardExisting
)

// String returns "fast-forward", "compare-and-swap" or "fast-forward (existing pointer)".
func (m Mode) String() string {
	switch m {
	case FastForward:
		return "fast-forward"
	case CAS:
		return "compare-and-swap"
	case FastForwardExisting:
		return "fast-forward (existing pointer)"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Update is one table's part of a PublishMany.
type Update struct {
	Table    string  // the table
	Mode     Mode    // how this pointer moves
	Expected uint64  // CAS only: the version the pointer must be at; 0 = absent
	Pointer  Pointer // the pointer to publish
}

// Catalog reads and publishes table pointers. It is safe for concurrent use.
type Catalog struct {
	cli    *clientv3.Client
	prefix string
	seen   lastSeen
}

// New returns a catalog whose pointers live under <prefix>/tables/ (a trailing "/" on
// prefix is ignored).
func New(cli *clientv3.Client, prefix string) *Catalog {
	return &Catalog{cli: cli, prefix: strings.TrimRight(prefix, "/")}
}

// lastSeen remembers, per table, the newest pointer state this catalog read or wrote (by
// mod revision), so a publish can send its guarded write first instead of reading the
// pointer first: one etcd round trip instead of two when nobody else moved the pointer.
// A remembered state is only ever a guess. It decides nothing by itself: a publish uses
// it only when every update would write, and the write's compare on each key's mod
// revision makes etcd check that the guess is still the pointer's current state (a mod
// revision changes on every put and on a delete and re-create). A guess that is wrong
// costs the failed compare, whose Else branch returns the current pointers, as the read
// would have. Bounded: past maxSeen tables it starts over.
type lastSeen struct {
	mu sync.Mutex
	m  map[string]state
}

const maxSeen = 4096

func (l *lastSeen) note(table string, s state) {
	if !s.present {
		return // an absent pointer is never guessed: read it
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= maxSeen {
		l.m = make(map[string]state)
	}
	if old, ok := l.m[table]; !ok || old.modRev <= s.modRev {
		l.m[table] = s
	}
}

func (l *lastSeen) forget(table string) {
	l.mu.Lock()
	delete(l.m, table)
	l.mu.Unlock()
}

// guess returns the remembered states of tables, or false when one is unknown.
func (l *lastSeen) guess(tables []string) ([]state, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]state, len(tables))
	for i, t := range tables {
		s, ok := l.m[t]
		if !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// Key returns the etcd key of a table's pointer.
func (c *Catalog) Key(table string) string { return c.prefix + "/tables/" + table }

func (c *Catalog) tablesPrefix() string { return c.prefix + "/tables/" }

// state is a pointer as read from etcd.
type state struct {
	ptr     Pointer
	present bool
	modRev  int64 // 0 when absent, which is also what an etcd ModRevision compare sees
}

func (s state) version() uint64 {
	if !s.present {
		return 0
	}
	return s.ptr.Version
}

// Get returns the table's pointer and the etcd mod revision of its key.
// Errors (as *Error): ErrNoPointer, ErrNewerFormat, ErrCorrupt, ErrEtcd.
func (c *Catalog) Get(ctx context.Context, table string) (Pointer, int64, error) {
	key := c.Key(table)
	r, err := c.cli.Get(ctx, key)
	if err != nil {
		return Pointer{}, 0, &Error{"get", table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	if len(r.Kvs) == 0 {
		return Pointer{}, 0, &Error{"get", table, key, ErrNoPointer}
	}
	p, err := DecodePointer(r.Kvs[0].Value)
	if err != nil {
		return Pointer{}, 0, &Error{"get", table, key, err}
	}
	c.seen.note(table, state{ptr: p, present: true, modRev: r.Kvs[0].ModRevision})
	return p, r.Kvs[0].ModRevision, nil
}

// FastForward publishes p as a maintenance op: it succeeds, returning the pointer now in
// effect, as soon as the table's pointer is at or past p.Version, whether this call wrote
// it or another did. A pointer already at or past p.Version is left untouched. Otherwise
// it writes p guarded by the mod revision it read, retrying with jittered backoff within a
// bounded budget, and re-checks the goal before reporting failure.
// Errors (as *Error): ErrInvalid, ErrDiverged (pointer at p.Version names another
// manifest), ErrNewerFormat/ErrCorrupt (never overwritten), ErrContended, ErrEtcd.
func (c *Catalog) FastForward(ctx context.Context, table string, p Pointer) (Pointer, error) {
	res, err := c.publish(ctx, "fast-forward", []Update{{Table: table, Mode: FastForward, Pointer: p}})
	if err != nil {
		return Pointer{}, err
	}
	return res[0], nil
}

// FastForwardExisting is FastForward on a pointer that must exist: it never creates one,
// so a write racing a drop cannot bring the dropped table's pointer back.
// Errors (as *Error): ErrNoPointer, and FastForward's.
func (c *Catalog) FastForwardExisting(ctx context.Context, table string, p Pointer) (Pointer, error) {
	res, err := c.publish(ctx, "fast-forward", []Update{{Table: table, Mode: FastForwardExisting, Pointer: p}})
	if err != nil {
		return Pointer{}, err
	}
	return res[0], nil
}

// Advanced is what Advance did.
type Advanced struct {
	// Now is the pointer in effect afterwards (ours, or a later one).
	Now Pointer
	// Prev is the pointer's version when this call decided (0: absent). When Prev is below
	// the published version and Now is ours, the versions Prev+1 .. Now.Version became
	// visible through this call, including any other writer's not yet published.
	Prev uint64
}

// Advance is FastForward (mustExist false) or FastForwardExisting (true) that also
// reports the version the pointer moved from. Errors as FastForward and
// FastForwardExisting.
func (c *Catalog) Advance(ctx context.Context, table string, p Pointer, mustExist bool) (Advanced, error) {
	mode := FastForward
	if mustExist {
		mode = FastForwardExisting
	}
	res, prev, err := c.publishDetailed(ctx, "fast-forward", []Update{{Table: table, Mode: mode, Pointer: p}}, nil)
	if err != nil {
		return Advanced{}, err
	}
	return Advanced{Now: res[0], Prev: prev[0]}, nil
}

// CompareAndSwap publishes p as a logical op: only if the table's pointer is still at
// version expected (0 = the table has no pointer). p.Version must exceed expected. If the
// pointer already equals p (a retry of a publish that landed) it succeeds without writing.
// Errors: *ConflictError (errors.Is ErrConflict) with the current pointer; as *Error:
// ErrBackwards, ErrInvalid, ErrNewerFormat, ErrCorrupt, ErrContended, ErrEtcd.
func (c *Catalog) CompareAndSwap(ctx context.Context, table string, expected uint64, p Pointer) error {
	_, err := c.publish(ctx, "compare-and-swap", []Update{{Table: table, Mode: CAS, Expected: expected, Pointer: p}})
	return err
}

// PublishMany publishes updates to several tables in one etcd transaction: all of them
// take effect at one revision, or none does. Each update follows its Mode's rule; a
// fast-forward update whose table is already at or past its version writes nothing. At
// most MaxPublishMany updates, one per table.
// Errors: the first *ConflictError in update order (nothing written), or as *Error with the
// tables' names: ErrInvalid, ErrBackwards, ErrDiverged, ErrNewerFormat, ErrCorrupt,
// ErrContended, ErrEtcd.
func (c *Catalog) PublishMany(ctx context.Context, updates []Update) error {
	_, err := c.publish(ctx, "publish", updates)
	return err
}

// Delete removes the table's pointer, whatever it names. A table without a pointer is
// not an error. Dropping a table uses DeleteDropped, which spares a later incarnation's.
// Errors (as *Error): ErrEtcd.
func (c *Catalog) Delete(ctx context.Context, table string) error {
	key := c.Key(table)
	if table == "" {
		return &Error{"delete", table, key, fmt.Errorf("%w: empty table name", ErrInvalid)}
	}
	c.seen.forget(table)
	if _, err := c.cli.Delete(ctx, key); err != nil {
		return &Error{"delete", table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	return nil
}

// DeleteDropped removes the table's pointer when it belongs to the incarnation that a
// drop ended, or to an earlier one: marker is the drop marker as a pointer (its version,
// incarnation and first version). A pointer of a later incarnation (the table was created
// again after the drop) is left alone, so a drop finishing late never unpublishes a table
// created since. A pointer that does not decode is removed. The delete is guarded by the
// mod revision read. It reports whether it removed a pointer; an absent one is not an
// error. Errors (as *Error): ErrInvalid, ErrContended, ErrEtcd.
func (c *Catalog) DeleteDropped(ctx context.Context, table string, marker Pointer) (bool, error) {
	key := c.Key(table)
	if table == "" {
		return false, &Error{"delete", table, key, fmt.Errorf("%w: empty table name", ErrInvalid)}
	}
	c.seen.forget(table)
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		r, err := c.cli.Get(ctx, key)
		if err != nil {
			return false, &Error{"delete", table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
		}
		if len(r.Kvs) == 0 {
			return false, nil
		}
		kv := r.Kvs[0]
		if p, err := DecodePointer(kv.Value); err == nil && compareIncarnation(p, marker) == newerIncarnation {
			return false, nil
		}
		tr, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return false, &Error{"delete", table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
		}
		if tr.Succeeded {
			return true, nil
		}
	}
	return false, &Error{"delete", table, key, fmt.Errorf("%w after %d attempts", ErrContended, maxAttempts)}
}

// Snapshot reads the pointers of tables (nil = every table in the catalog) at one etcd
// revision, returned with them. Tables without a pointer are absent from the map.
// Errors (as *Error): ErrNewerFormat, ErrCorrupt (naming the key), ErrEtcd.
func (c *Catalog) Snapshot(ctx context.Context, tables []string) (map[string]Pointer, int64, error) {
	out := make(map[string]Pointer)
	if tables == nil {
		pre := c.tablesPrefix()
		r, err := c.cli.Get(ctx, pre, clientv3.WithPrefix())
		if err != nil {
			return nil, 0, &Error{"snapshot", "*", pre, fmt.Errorf("%w: %w", ErrEtcd, err)}
		}
		for _, kv := range r.Kvs {
			table := strings.TrimPrefix(string(kv.Key), pre)
			p, err := DecodePointer(kv.Value)
			if err != nil {
				return nil, 0, &Error{"snapshot", table, string(kv.Key), err}
			}
			out[table] = p
		}
		return out, r.Header.Revision, nil
	}
	var rev int64
	for start := 0; start < len(tables); start += snapshotChunk {
		chunk := tables[start:min(start+snapshotChunk, len(tables))]
		states, r, err := c.read(ctx, chunk, rev)
		if err != nil {
			return nil, 0, withOp(err, "snapshot")
		}
		if rev == 0 {
			rev = r
		}
		for i, s := range states {
			if s.present {
				out[chunk[i]] = s.ptr
			}
		}
	}
	if rev == 0 { // no tables asked: report the current revision anyway
		r, err := c.cli.Get(ctx, c.tablesPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return nil, 0, &Error{"snapshot", "", c.tablesPrefix(), fmt.Errorf("%w: %w", ErrEtcd, err)}
		}
		rev = r.Header.Revision
	}
	return out, rev, nil
}

func withOp(err error, op string) error {
	if e, ok := err.(*Error); ok {
		e.Op = op
	}
	return err
}

// read returns the tables' states in one read transaction, at revision rev (0 = current),
// and the revision read.
func (c *Catalog) read(ctx context.Context, tables []string, rev int64) ([]state, int64, error) {
	ops := make([]clientv3.Op, len(tables))
	for i, t := range tables {
		if rev > 0 {
			ops[i] = clientv3.OpGet(c.Key(t), clientv3.WithRev(rev))
		} else {
			ops[i] = clientv3.OpGet(c.Key(t))
		}
	}
	r, err := c.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, 0, &Error{"read", strings.Join(tables, ","), c.keys(tables), fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	states, err := c.parse(tables, r.Responses)
	return states, r.Header.Revision, err
}

func (c *Catalog) keys(tables []string) string {
	ks := make([]string, len(tables))
	for i, t := range tables {
		ks[i] = c.Key(t)
	}
	return strings.Join(ks, ",")
}

// parse decodes the range responses of a read transaction, one per table.
func (c *Catalog) parse(tables []string, resps []*etcdserverpb.ResponseOp) ([]state, error) {
	states := make([]state, len(tables))
	for i, rr := range resps {
		kvs := rr.GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		p, err := DecodePointer(kvs[0].Value)
		if err != nil {
			return nil, &Error{"read", tables[i], string(kvs[0].Key), err}
		}
		states[i] = state{ptr: p, present: true, modRev: kvs[0].ModRevision}
		c.seen.note(tables[i], states[i])
	}
	return states, nil
}

// publish is the read, decide, guarded-write loop shared by the three publish calls. It
// returns, per update, the pointer in effect after success: ours where it wrote, the
// current one where the goal already held.
func (c *Catalog) publish(ctx context.Context, op string, updates []Update) ([]Pointer, error) {
	return c.publishGuarded(ctx, op, updates, nil)
}

// groupGuard makes a publish also move a multi-table group from pending to committed in
// the same etcd transaction, and fail with ErrGroupAborted once the group is not pending.
type groupGuard struct{ key string }

func (c *Catalog) publishGuarded(ctx context.Context, op string, updates []Update, guard *groupGuard) ([]Pointer, error) {
	res, _, err := c.publishDetailed(ctx, op, updates, guard)
	return res, err
}

// publishDetailed is publishGuarded that also returns, per update, the version the
// pointer had in the state the successful decision was made on (the pointer's version
// when the goal already held).
func (c *Catalog) publishDetailed(ctx context.Context, op string, updates []Update, guard *groupGuard) ([]Pointer, []uint64, error) {
	tables := make([]string, len(updates))
	for i, u := range updates {
		tables[i] = u.Table
	}
	fail := func(err error) error { return &Error{op, strings.Join(tables, ","), c.keys(tables), err} }
	if err := validate(updates); err != nil {
		return nil, nil, fail(err)
	}
	// The guarded write goes first when this catalog remembers every pointer's state and
	// the guess says every update writes (see lastSeen); otherwise, or once the guess
	// decides anything else, the pointers are read as before.
	states, guessed := c.seen.guess(tables)
	if !guessed {
		var err error
		if states, _, err = c.read(ctx, tables, 0); err != nil {
			return nil, nil, withOp(err, op)
		}
	}
	backoff := backoffBase
	for attempt := 1; ; attempt++ {
		plan, err := decideAll(updates, states)
		if guessed && (err != nil || len(plan.writes) < len(updates)) {
			// A guess decides nothing but a write that etcd checks: read, and decide on
			// the pointers as they are.
			guessed = false
			if states, _, err = c.read(ctx, tables, 0); err != nil {
				return nil, nil, withOp(err, op)
			}
			attempt--
			continue
		}
		guessed = false
		if err != nil {
			return nil, nil, c.planError(op, updates, err)
		}
		if len(plan.writes) == 0 && guard == nil {
			return plan.result, versionsOf(states), nil
		}
		cmps := make([]clientv3.Cmp, 0, len(plan.writes)+1)
		puts := make([]clientv3.Op, 0, len(plan.writes)+1)
		if guard != nil {
			cmps = append(cmps, clientv3.Compare(clientv3.Value(guard.key), "=", groupPending))
			puts = append(puts, clientv3.OpPut(guard.key, groupCommitted))
		}
		for _, i := range plan.writes {
			k := c.Key(updates[i].Table)
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", states[i].modRev))
			puts = append(puts, clientv3.OpPut(k, string(plan.result[i].Encode())))
		}
		gets := make([]clientv3.Op, len(tables))
		for i, t := range tables {
			gets[i] = clientv3.OpGet(c.Key(t))
		}
		r, err := c.cli.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
		if err != nil {
			// The write may or may not have landed: decide by the goal, not the reply,
			// even when ctx is what ended the write.
			rctx, cancel := decisionContext(ctx)
			fresh, _, rerr := c.read(rctx, tables, 0)
			cancel()
			if rerr == nil && guard != nil {
				switch st, gerr := c.groupState(ctx, guard.key); {
				case gerr != nil:
					rerr = gerr
				case st == GroupCommitted:
					return plan.result, versionsOf(states), nil
				case st == GroupAborted:
					return nil, nil, fail(ErrGroupAborted)
				}
			}
			if rerr == nil {
				if res, ok := goalMet(updates, fresh); ok && guard == nil {
					return res, versionsOf(states), nil
				}
				if isTransient(ctx, err) && attempt < maxAttempts {
					states = fresh
					if serr := sleepJitter(ctx, backoff); serr != nil {
						return nil, nil, fail(fmt.Errorf("%w: %w (then %w)", ErrEtcd, err, serr))
					}
					backoff = min(backoff*2, backoffCap)
					continue
				}
			}
			return nil, nil, fail(fmt.Errorf("%w: %w", ErrEtcd, err))
		}
		if r.Succeeded {
			for _, i := range plan.writes {
				c.seen.note(updates[i].Table, state{ptr: plan.result[i], present: true, modRev: r.Header.Revision})
			}
			return plan.result, versionsOf(states), nil
		}
		if guard != nil {
			if st, err := c.groupState(ctx, guard.key); err != nil {
				return nil, nil, withOp(err, op)
			} else if st != GroupPending {
				return nil, nil, fail(ErrGroupAborted)
			}
		}
		if states, err = c.parse(tables, r.Responses); err != nil {
			return nil, nil, withOp(err, op)
		}
		if attempt >= maxAttempts {
			break
		}
		if guard == nil && fastForwardOnly(updates) {
			// A lost compare means another write moved a pointer, and a fast-forward
			// pointer only moves up: each loss brings the goal closer (met once the
			// pointer reaches our version), so the next decision is made at once, on the
			// pointers the Else branch returned. Sleeping would only hold a writer whose
			// version is already published behind a backoff.
			continue
		}
		if err := sleepJitter(ctx, backoff); err != nil {
			break // out of time: decide once more below
		}
		backoff = min(backoff*2, backoffCap)
	}
	// Budget (attempts or time) spent. One last decision on a fresh read: others may have
	// met our goal.
	rctx, cancel := decisionContext(ctx)
	defer cancel()
	states, _, err := c.read(rctx, tables, 0)
	if err != nil {
		return nil, nil, withOp(err, op)
	}
	if res, ok := goalMet(updates, states); ok && guard == nil {
		return res, versionsOf(states), nil
	}
	if _, err := decideAll(updates, states); err != nil {
		return nil, nil, c.planError(op, updates, err)
	}
	if cerr := context.Cause(ctx); cerr != nil {
		return nil, nil, fail(fmt.Errorf("%w: %w", ErrContended, cerr))
	}
	return nil, nil, fail(fmt.Errorf("%w after %d attempts", ErrContended, maxAttempts))
}

// fastForwardOnly reports whether every update is a fast-forward.
func fastForwardOnly(updates []Update) bool {
	for _, u := range updates {
		if u.Mode != FastForward && u.Mode != FastForwardExisting {
			return false
		}
	}
	return true
}

// versionsOf lists the pointer versions of states (0 for absent).
func versionsOf(states []state) []uint64 {
	out := make([]uint64, len(states))
	for i, s := range states {
		out[i] = s.version()
	}
	return out
}

// decisionReadTimeout bounds the read that decides a publish whose own context ended.
const decisionReadTimeout = 3 * time.Second

// decisionContext returns ctx while it is live; once it has ended, a fresh context of
// decisionReadTimeout, so that a publish whose deadline passed can still find out whether
// its goal holds (the pointer already at or past its version) and report success
// (invariant 4) instead of a false failure.
func decisionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), decisionReadTimeout)
}

// planError returns a conflict as is, and wraps other decision errors with the table.
func (c *Catalog) planError(op string, updates []Update, err error) error {
	if de, ok := err.(*decideError); ok {
		if _, isConflict := de.err.(*ConflictError); isConflict {
			return de.err
		}
		t := updates[de.index].Table
		return &Error{op, t, c.Key(t), de.err}
	}
	return err
}

// isTransient reports an etcd failure worth retrying (leader change, connection lost,
// server-side timeout) while ctx is still live.
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

// WaitAtLeast returns once the table's pointer is at or past version v, with the pointer
// then in effect: a read, then an etcd watch from the revision read (no polling). It is
// how a maintenance version that must not publish other writers' work (recovery's and
// garbage collection's abort versions) waits for the versions below it to be published
// by their own writers. Errors (as *Error): ErrNoPointer when the pointer is absent or
// deleted while waiting, ErrNewerFormat, ErrCorrupt, ErrEtcd; ctx's error when it ends
// first (the wait is bounded only by ctx).
func (c *Catalog) WaitAtLeast(ctx context.Context, table string, v uint64) (Pointer, error) {
	key := c.Key(table)
	r, err := c.cli.Get(ctx, key)
	if err != nil {
		return Pointer{}, &Error{"wait", table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
	}
	if len(r.Kvs) == 0 {
		return Pointer{}, &Error{"wait", table, key, ErrNoPointer}
	}
	p, err := DecodePointer(r.Kvs[0].Value)
	if err != nil {
		return Pointer{}, &Error{"wait", table, key, err}
	}
	if p.Version >= v {
		return p, nil
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range c.cli.Watch(wctx, key, clientv3.WithRev(r.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return Pointer{}, &Error{"wait", table, key, fmt.Errorf("%w: %w", ErrEtcd, err)}
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return Pointer{}, &Error{"wait", table, key, ErrNoPointer}
			}
			p, err := DecodePointer(ev.Kv.Value)
			if err != nil {
				return Pointer{}, &Error{"wait", table, key, err}
			}
			if p.Version >= v {
				return p, nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return Pointer{}, err
	}
	return Pointer{}, &Error{"wait", table, key, fmt.Errorf("%w: watch closed", ErrEtcd)}
}
