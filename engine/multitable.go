package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// ErrNeedsCatalog: multi-table transactions and snapshots need the etcd catalog.
var ErrNeedsCatalog = errors.New("needs the etcd catalog")

// seamGroupPrepared is between a multi-table commit's prepared versions and the etcd
// transaction that commits the group.
var seamGroupPrepared = failpoint.Seam("engine.group_prepared")

// groupTTL is the lease of a pending group key: a writer that dies mid-commit aborts its
// group this long after its last keepalive.
const groupTTL = 10 * time.Second

func (db *DB) groups() manifest.GroupResolver {
	if db.cat == nil {
		return nil
	}
	return catalog.GroupWaiter{Catalog: db.cat, Timeout: db.opts.GroupTimeout}
}

// Snapshot is a consistent read of several tables: their published versions at one etcd
// revision, so a multi-table commit is seen whole or not at all.
type Snapshot struct {
	Revision int64             // the etcd revision every pointer was read at
	Tables   map[string]*Table // one writable handle per name passed to DB.Snapshot
}

// Snapshot opens the named tables at the versions published at one etcd revision. Each
// handle can be written (its writes commit on top of that version). Errors:
// ErrNeedsCatalog, manifest.ErrTableNotFound for a table never published.
func (db *DB) Snapshot(ctx context.Context, names ...string) (*Snapshot, error) {
	if db.cat == nil {
		return nil, fmt.Errorf("snapshot: %w", ErrNeedsCatalog)
	}
	for _, n := range names {
		if err := manifest.ValidateTableName(n); err != nil {
			return nil, err
		}
	}
	ptrs, rev, err := db.cat.Snapshot(ctx, names)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Revision: rev, Tables: map[string]*Table{}}
	for _, n := range names {
		p, ok := ptrs[n]
		if !ok {
			return nil, fmt.Errorf("snapshot: %w: %q has no published version", manifest.ErrTableNotFound, n)
		}
		m, err := db.manifests.LoadVerified(ctx, db.store, n, p.Version, p.Checksum)
		if err != nil {
			return nil, err
		}
		snap.Tables[n] = &Table{db: db, name: n, m: m}
	}
	return snap, nil
}

// ErrWriteReleased: DB.Commit was given a Write after its Release.
var ErrWriteReleased = errors.New("write released")

// Write is one table's part of a multi-table transaction: planned (data files and deletion
// vectors written) against the handle's version, not yet committed.
//
// Garbage collection: a Write's files are referenced by no version until DB.Commit, so
// gc keeps them only while they are younger than its grace period. A Write still open
// Options.WriteHoldAfter (default 30 s) after its prepare began therefore takes a catalog
// hold (kind HoldKindWrite, id "write-<ulid>", on its table at its read version, backdated
// to the prepare's start), as a long single-table write does: gc in any process then
// deletes none of its files and expires no version it read from. The hold lasts until
// DB.Commit returns (committed, rejected or unknown) or Release; a Write committed within
// WriteHoldAfter costs no etcd request for it. A Write neither committed nor released
// keeps its hold while its process lives, unless the Go garbage collector finds the Write
// unreachable first (the hold is then released in the background); call Release on every
// Write you will not commit.
type Write struct {
	table *Table
	txn   manifest.Transaction
	rows  int64

	hold     *writeHold
	released atomic.Bool
}

// Table is the table the write is planned for.
func (w *Write) Table() *Table { return w.table }

// Release abandons the write: it releases its catalog hold, if one was taken, so garbage
// collection may delete its files once they are past the grace period. A later DB.Commit
// of w fails with ErrWriteReleased. Safe to call more than once and after DB.Commit. It
// waits for etcd's answer (at most 10 s; a hold etcd did not drop expires with its lease,
// 15 s).
func (w *Write) Release() {
	w.released.Store(true)
	w.hold.stop()
}

// newWrite wraps a prepared transaction; the hold is stopped when w is unreachable.
func newWrite(t *Table, txn manifest.Transaction, rows int64, hold *writeHold) *Write {
	w := &Write{table: t, txn: txn, rows: rows, hold: hold}
	if hold != nil {
		// stop may wait on etcd for up to 10 s: not on the cleanup goroutine.
		runtime.AddCleanup(w, func(h *writeHold) { go h.stop() }, hold)
	}
	return w
}

// PrepareAppend writes rdr's rows as data files for a later DB.Commit. The Write holds
// its files against garbage collection until it is committed or released (see Write).
// Errors: ErrReadOnly, schema and null errors, store errors.
func (t *Table) PrepareAppend(ctx context.Context, rdr array.RecordReader, opts ...WriteOption) (*Write, error) {
	if t.readOnly {
		return nil, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	o, err := collectWriteOptions(t.name, opts)
	if err != nil {
		return nil, err
	}
	hold := t.startWriteHold(ctx)
	txn := t.newTxn(manifest.OpAppend, o)
	frags, rows, err := t.writeFragments(ctx, rdr, t.Schema(), t.m.Schema.FieldIDs, txn.ID)
	if err != nil {
		hold.stop()
		return nil, err
	}
	txn.Op.NewFragments = frags
	return newWrite(t, txn, rows, hold), nil
}

// PrepareDelete plans deleting the rows matching where (writing the new deletion vectors)
// for a later DB.Commit. The Write holds its deletion vectors against garbage collection
// until it is committed or released (see Write).
// Errors: ErrReadOnly, filter errors, store errors.
func (t *Table) PrepareDelete(ctx context.Context, where string, opts ...WriteOption) (*Write, error) {
	if t.readOnly {
		return nil, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	o, err := collectWriteOptions(t.name, opts)
	if err != nil {
		return nil, err
	}
	hold := t.startWriteHold(ctx)
	txn := t.newTxn(manifest.OpDelete, o)
	op, n, err := t.planDelete(ctx, where, txn.ID)
	if err != nil {
		hold.stop()
		return nil, err
	}
	txn.Op = op
	return newWrite(t, txn, n, hold), nil
}

// logicalPublish reports whether a member publishes by strict compare-and-swap: operations
// that change or remove existing rows or the schema. Appends and maintenance commute with
// them and fast-forward.
func logicalPublish(k manifest.OpKind) bool {
	switch k {
	case manifest.OpDelete, manifest.OpUpdate, manifest.OpOverwrite, manifest.OpSchemaChange, manifest.OpUpdateConfig:
		return true
	}
	return false
}

// Commit commits writes to several tables as one transaction: readers (Snapshot) see all of
// them or none. Protocol: a pending group key in etcd (leased), one prepared version per
// table in its store (the usual commit loop, marked with the group), then one etcd
// transaction that moves every pointer and marks the group committed. Members that delete,
// update or change the schema publish by compare-and-swap: the pointer may have moved past
// their read version only by maintenance-class versions (compaction, index builds, WAL
// merges), otherwise the transaction is rejected with a conflict; appends fast-forward.
// On any failure the group is aborted and its prepared versions count as empty, so the
// outcome is Committed or Rejected; Unknown only if etcd cannot say which.
//
// Before the group begins, Options.BeforeFirstWrite runs for each member table not yet
// written through this DB, in table-name order; its error rejects the commit with nothing
// prepared. Every member's garbage-collection hold (see Write) is released when Commit
// returns, whatever the outcome: a Write committed again after a rejection is protected
// by gc's grace period only, so prepare it again if the retry may wait long.
// Errors: ErrNeedsCatalog, ErrWriteReleased, the hook's, *manifest.ConflictError,
// *UnknownError, catalog and store errors.
func (db *DB) Commit(ctx context.Context, writes ...*Write) ([]CommitResult, error) {
	for _, w := range writes {
		defer w.hold.stop()
	}
	if db.cat == nil {
		return nil, fmt.Errorf("multi-table commit: %w", ErrNeedsCatalog)
	}
	if len(writes) == 0 {
		return nil, nil
	}
	// Prepare members in table-name order: two transactions over the same tables then meet
	// each other's pending versions in the same order, instead of each waiting on the other
	// for the whole GroupTimeout.
	writes = slices.Clone(writes)
	slices.SortFunc(writes, func(a, b *Write) int { return strings.Compare(a.table.name, b.table.name) })
	var tables []string
	for _, w := range writes {
		if slices.Contains(tables, w.table.name) {
			return nil, fmt.Errorf("multi-table commit: table %q appears twice", w.table.name)
		}
		if w.released.Load() {
			return nil, fmt.Errorf("multi-table commit: table %q: %w", w.table.name, ErrWriteReleased)
		}
		tables = append(tables, w.table.name)
	}
	for _, name := range tables {
		if err := db.beforeFirstWrite(ctx, name); err != nil {
			return nil, fmt.Errorf("multi-table commit over %v: %w", tables, err)
		}
	}
	id := manifest.NewTransactionID()
	release, err := db.cat.BeginGroup(ctx, id, groupTTL)
	if err != nil {
		return nil, err
	}
	defer release()
	abort := func(cause error) ([]CommitResult, error) {
		st, err := db.cat.AbortGroup(context.WithoutCancel(ctx), id)
		if err != nil {
			return nil, &UnknownError{Table: fmt.Sprint(tables), Group: id, Err: errors.Join(cause, err)}
		}
		if st == catalog.GroupCommitted {
			return nil, &UnknownError{Table: fmt.Sprint(tables), Group: id, Err: cause}
		}
		return nil, fmt.Errorf("multi-table transaction %s over %v rejected: %w", id, tables, cause)
	}
	opts := db.opts.Commit
	opts.Groups = db.groups()
	prepared := make([]*manifest.Manifest, len(writes))
	sums := make([]uint32, len(writes))
	for i, w := range writes {
		txn := w.txn
		txn.Op.Group = &manifest.GroupRef{ID: id, Tables: tables}
		m, stats, err := manifest.Commit(ctx, db.store, w.table.name, w.table.m, txn, opts)
		if err != nil {
			return abort(err)
		}
		prepared[i], sums[i] = m, stats.Checksum
	}
	if err := seamGroupPrepared.Inject(ctx); err != nil {
		return abort(err)
	}
	for attempt := 0; ; attempt++ {
		updates, err := db.groupUpdates(ctx, writes, prepared, sums)
		if err != nil {
			return abort(err)
		}
		err = db.cat.CommitGroup(ctx, id, updates)
		if err == nil {
			break
		}
		if (errors.Is(err, catalog.ErrConflict) || errors.Is(err, catalog.ErrNoPointer)) && attempt < 5 {
			continue // a pointer moved or went (a drop); re-check what happened
		}
		return abort(droppedIfIncarnation(err))
	}
	out := make([]CommitResult, len(writes))
	for i, w := range writes {
		w.table.m = prepared[i]
		out[i] = CommitResult{Version: prepared[i].Version, Published: true, Rows: w.rows}
	}
	return out, nil
}

// groupUpdates builds the pointer updates of a group commit from the pointers now.
func (db *DB) groupUpdates(ctx context.Context, writes []*Write, prepared []*manifest.Manifest, sums []uint32) ([]catalog.Update, error) {
	names := make([]string, len(writes))
	for i, w := range writes {
		names[i] = w.table.name
	}
	ptrs, _, err := db.cat.Snapshot(ctx, names)
	if err != nil {
		return nil, err
	}
	updates := make([]catalog.Update, len(writes))
	for i, w := range writes {
		m := prepared[i]
		updates[i] = catalog.Update{Table: w.table.name, Mode: catalog.FastForwardExisting, Pointer: PointerOf(m, sums[i])}
		if _, ok := ptrs[w.table.name]; !ok {
			// No pointer: a table never published, or one dropped (whose pointer must not
			// come back). Create it only for a version of the live incarnation.
			if err := manifest.CheckLive(ctx, db.store, m); err != nil {
				return nil, err
			}
			updates[i].Mode = catalog.FastForward
		}
		if !logicalPublish(w.txn.Op.Kind) {
			continue
		}
		cur := ptrs[w.table.name].Version
		// Everything published since our read must be content-preserving.
		for v := w.txn.ReadVersion + 1; v <= cur && v < m.Version; v++ {
			pm, err := manifest.Load(ctx, db.store, w.table.name, v)
			if err != nil {
				return nil, err
			}
			if g := pm.Txn.Op.Group; g != nil {
				committed, err := db.groups().Committed(ctx, g.ID)
				if err != nil {
					return nil, err
				}
				if !committed {
					continue // a prepared version of an aborted group counts as empty
				}
			}
			if !pm.Txn.Op.Kind.Maintenance() {
				return nil, &manifest.ConflictError{Table: w.table.name, Resolution: manifest.Retryable, Ours: w.txn,
					Theirs: pm.Txn, TheirsVersion: v, Reason: "a logical change was published after our read version"}
			}
		}
		updates[i].Mode, updates[i].Expected = catalog.CAS, cur
	}
	return updates, nil
}
