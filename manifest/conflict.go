package manifest

import (
	"errors"
	"fmt"
	"slices"
)

// Resolution is what committing our transaction on top of another committed transaction
// requires.
type Resolution int

const (
	// Compatible: apply ours on top of theirs unchanged.
	Compatible Resolution = iota
	// Rebase: ours can be rewritten to apply on top of theirs (e.g. merged deletion vectors).
	Rebase
	// Retryable: ours is invalid on top of theirs, but re-reading the new version and
	// re-executing the operation is expected to mean the same thing.
	Retryable
	// Incompatible: the premise of ours is gone (e.g. the table was overwritten).
	Incompatible
)

// String returns "compatible", "rebase", "retryable conflict" or "incompatible".
func (r Resolution) String() string {
	switch r {
	case Compatible:
		return "compatible"
	case Rebase:
		return "rebase"
	case Retryable:
		return "retryable conflict"
	case Incompatible:
		return "incompatible"
	}
	return fmt.Sprintf("Resolution(%d)", int(r))
}

var (
	// ErrConflict is wrapped by every conflict error.
	ErrConflict = errors.New("commit conflict")
	// ErrRetryable: re-read the table and re-execute the operation.
	ErrRetryable = errors.New("retryable")
	// ErrIncompatible: the operation's premise is gone; do not retry blindly.
	ErrIncompatible = errors.New("incompatible")
	// ErrStalePreparation: a maintenance output prepared against a read version (an index
	// build) is invalid at the version it would commit on: a fragment it covers was
	// removed or rewritten, the schema changed, or an index of the same name changed
	// meanwhile. Prepare it again. Matched together with ErrRetryable.
	ErrStalePreparation = errors.New("stale preparation; prepare again")
	// ErrTxnAborted: an abort version names the transaction. Garbage collection or
	// recovery commits one before deleting the files of a transaction that had not
	// committed (invariant 15), so the transaction can never commit and its files may be
	// gone: write the data again. Matched together with ErrIncompatible.
	ErrTxnAborted = errors.New("transaction aborted: garbage collection or recovery fenced it and may have deleted its files")
	// ErrTableDropped: the table was dropped. A transaction planned before the drop
	// cannot commit after it (the drop marker, an OpDrop version, fences it), and a
	// version committed in a number the drop freed belongs to no table. What such a
	// write would have added is in no table: write it again (to the table created
	// again, if it was). Matched by a *ConflictError with a drop marker (with
	// ErrIncompatible) and by *DroppedError.
	ErrTableDropped = errors.New("the table was dropped")
	// ErrWatermarkMoved: a MergeWAL planned from a shard's merged watermark meets a table
	// whose watermark has moved: someone else merged those generations. Re-read the
	// watermark and merge only what is above it (a rerun of a finished merge is a no-op).
	ErrWatermarkMoved = errors.New("WAL merged watermark moved")
)

// DroppedError reports a table whose HEAD is a drop marker (a read or a write of a table
// that was dropped), or a version that belongs to an incarnation a drop ended. It matches
// ErrTableDropped and ErrTableNotFound.
type DroppedError struct {
	Table   string // the table
	Version uint64 // the drop marker's version (0 when not known)
	Detail  string // what was found, when more than the marker
}

// Error reads "table <name> not found: the table was dropped", with the marker's version
// and the detail when known.
func (e *DroppedError) Error() string {
	s := fmt.Sprintf("table %q not found: %v", e.Table, ErrTableDropped)
	if e.Version != 0 {
		s += fmt.Sprintf(" (drop marker at version %d)", e.Version)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap returns ErrTableDropped and ErrTableNotFound: a dropped table is not found.
func (e *DroppedError) Unwrap() []error { return []error{ErrTableDropped, ErrTableNotFound} }

// ConflictError reports that our transaction cannot commit on top of a transaction
// committed after our read version. It names both transactions and the fragments they
// share.
type ConflictError struct {
	Table         string      // the table
	Resolution    Resolution  // Retryable or Incompatible
	Ours          Transaction // the transaction that could not commit
	Theirs        Transaction // the committed one it conflicts with (zero ID when only an old tombstone remains)
	TheirsVersion uint64      // the version Theirs committed as
	Fragments     []uint32    // fragments both touch; empty when the conflict is table-wide
	Reason        string      // why, in words (for instance "the table already exists")
}

// Error names the table, the resolution, both transactions, Theirs' version and the
// shared fragments.
func (e *ConflictError) Error() string {
	var s string
	if e.Theirs.ID == "" { // no readable transaction on the other side (an expired version)
		s = fmt.Sprintf("table %q: %s: our %s cannot commit at version %d", e.Table, e.Resolution, e.Ours.String(), e.TheirsVersion)
	} else {
		s = fmt.Sprintf("table %q: %s: our %s conflicts with %s committed as version %d",
			e.Table, e.Resolution, e.Ours.String(), e.Theirs.String(), e.TheirsVersion)
	}
	if len(e.Fragments) > 0 {
		s += fmt.Sprintf(" (shared fragments %v)", e.Fragments)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap makes errors.Is match ErrConflict and ErrRetryable or ErrIncompatible,
// ErrTxnAborted when theirs is an abort naming ours, and ErrTableDropped when theirs is a
// drop.
func (e *ConflictError) Unwrap() []error {
	if e.Resolution == Retryable && e.Ours.Op.Kind == OpCreateIndex {
		return []error{ErrConflict, ErrRetryable, ErrStalePreparation}
	}
	if e.Resolution == Retryable {
		return []error{ErrConflict, ErrRetryable}
	}
	if e.Theirs.Op.Kind == OpAbort && slices.Contains(e.Theirs.Op.Aborted, e.Ours.ID) {
		return []error{ErrConflict, ErrIncompatible, ErrTxnAborted}
	}
	if e.Theirs.Op.Kind == OpDrop {
		return []error{ErrConflict, ErrIncompatible, ErrTableDropped}
	}
	return []error{ErrConflict, ErrIncompatible}
}

// Check decides whether ours can commit after theirs, which committed after our read
// version. It is a pure function of the two transactions (DESIGN §6, extended to every
// kind; shared/reference/lance-format.md §4.4 is the model). Rows are ours, columns theirs;
// "/o" means only when the two touch overlapping fragments (otherwise compatible):
//
//	ours\theirs   Append Delete Update Overwrite Schema Config Rewrite Index  MergeWAL
//	Append        ok     ok     ok     X         ok     ok     ok      ok     ok
//	Delete        ok     R/o    R/o    X         ok     ok     T/o     ok     ok
//	Update        ok     R/o    R/o    X         T      ok     T/o     ok     ok
//	Overwrite     T      T      T      T         ok     T/key  ok      ok     ok
//	SchemaChange  ok     ok     T      X         T      ok     T       T      T
//	UpdateConfig  ok     ok     ok     T/key     ok     T/key  ok      ok     ok
//	Rewrite       ok     T/o    T/o    X         T      ok     T/o     T/cov  ok
//	CreateIndex   ok     ok     ok     X         T      ok     T/cov   ok*    ok
//	MergeWAL      ok     ok     ok     X         T      ok     ok      ok     T/shard
//
// X incompatible; T retryable; R rebase (merge deletion vectors when the rows are disjoint;
// the commit loop decides with I/O and falls back to retryable); T/key on a shared
// configuration key; T/cov when an index covers a rewritten fragment; T/shard when both
// merge the same WAL shard (the watermark check makes a merge exactly once); ok* a later
// index of the same name replaces the earlier one. Create after anything but a Drop is
// incompatible (the table exists). Overwrite after a concurrent append, delete or update is retryable,
// not compatible as in DESIGN §6: replacing the table must never silently drop rows
// another writer committed after our read. Abort (recovery's fence) is compatible with
// everything except the transactions it names, in both directions: a named transaction
// cannot commit after it, and it cannot commit after a named transaction. Drop ends the
// incarnation: nothing commits after it (incompatible, "the table was dropped"; an abort
// neither: the drop fences every transaction of the incarnation) except a Create, which
// begins a new incarnation on top of it; a Drop commits after anything but another Drop
// (a drop planned before another drop would otherwise go on to drop a table created
// again meanwhile, which it never saw). It returns the resolution, the shared fragment
// ids and a reason.
func Check(ours, theirs *Transaction) (Resolution, []uint32, string) {
	o, t := ours.Op.Kind, theirs.Op.Kind
	// An abort fences the transactions it names and is compatible with everything else.
	if t == OpAbort && slices.Contains(theirs.Op.Aborted, ours.ID) {
		return Incompatible, nil, "garbage collection or recovery aborted our transaction before deleting its files"
	}
	// A drop ends the incarnation our transaction was planned in.
	if t == OpDrop {
		if o == OpCreate {
			return Compatible, nil, ""
		}
		return Incompatible, nil, "the table was dropped after our read version; what we would have written is in no table"
	}
	if o == OpDrop {
		return Compatible, nil, ""
	}
	if o == OpAbort {
		if slices.Contains(ours.Op.Aborted, theirs.ID) {
			return Incompatible, nil, fmt.Sprintf("transaction %s, which we abort, committed first", theirs.ID)
		}
		return Compatible, nil, ""
	}
	if t == OpAbort {
		if o == OpCreate {
			return Incompatible, nil, "the table already exists"
		}
		return Compatible, nil, ""
	}
	if o == OpCreate {
		return Incompatible, nil, "the table already exists"
	}
	if t == OpOverwrite || t == OpCreate {
		switch o {
		case OpOverwrite:
			return Retryable, nil, "the table was replaced after our read version"
		case OpUpdateConfig:
			if k := sharedKeys(ours, theirs); len(k) > 0 {
				return Retryable, nil, fmt.Sprintf("both set configuration keys %v", k)
			}
			return Compatible, nil, ""
		}
		return Incompatible, nil, "the table was replaced after our read version"
	}
	shared := intersect(ours.TouchedFragments(), theirs.TouchedFragments())
	overlap := func(res Resolution, why string) (Resolution, []uint32, string) {
		if len(shared) == 0 {
			return Compatible, nil, ""
		}
		return res, shared, why
	}
	schemaChanged := func() (Resolution, []uint32, string) {
		return Retryable, nil, "the schema changed after our read version"
	}
	switch o {
	case OpAppend:
		return Compatible, nil, ""
	case OpDelete, OpUpdate:
		switch t {
		case OpDelete, OpUpdate:
			return overlap(Rebase, "both change the deletion vectors of the same fragments")
		case OpRewrite:
			return overlap(Retryable, "the fragments were rewritten by compaction")
		case OpSchemaChange:
			if o == OpUpdate {
				return schemaChanged()
			}
		}
		return Compatible, nil, ""
	case OpOverwrite:
		switch t {
		case OpAppend, OpDelete, OpUpdate:
			// Replacing the table would silently drop rows (or undo changes) that another
			// writer committed after our read: re-read and decide again.
			return Retryable, nil, fmt.Sprintf("a concurrent %s changed the rows we would replace", t)
		case OpUpdateConfig:
			if k := sharedKeys(ours, theirs); len(k) > 0 {
				return Retryable, nil, fmt.Sprintf("both set configuration keys %v", k)
			}
		}
		return Compatible, nil, ""
	case OpSchemaChange:
		switch t {
		case OpUpdate, OpSchemaChange, OpRewrite, OpCreateIndex, OpMergeWAL:
			return Retryable, nil, fmt.Sprintf("a concurrent %s wrote or indexed data with the schema we are changing", t)
		}
		return Compatible, nil, ""
	case OpUpdateConfig:
		if t == OpUpdateConfig {
			if k := sharedKeys(ours, theirs); len(k) > 0 {
				return Retryable, nil, fmt.Sprintf("both set configuration keys %v", k)
			}
		}
		return Compatible, nil, ""
	case OpRewrite:
		switch t {
		case OpDelete, OpUpdate:
			return overlap(Retryable, "the fragments we rewrite had rows deleted or updated")
		case OpRewrite:
			return overlap(Retryable, "the fragments we rewrite were rewritten already")
		case OpSchemaChange:
			return schemaChanged()
		}
		// A new index covering fragments we rewrite is fine: building our version drops
		// the rewritten fragments from every index's coverage.
		return Compatible, nil, ""
	case OpCreateIndex:
		// An index prepared at our read version is stale when a fragment it covers was
		// removed or rewritten, the schema changed, or an index of the same name changed;
		// appends and deletions of covered rows are fine (appended fragments stay
		// uncovered; deletion vectors are applied at query time).
		switch t {
		case OpSchemaChange:
			return schemaChanged()
		case OpRewrite:
			if cov := intersect(ours.IndexedFragments(), oldFragments(theirs)); len(cov) > 0 {
				return Retryable, cov, "fragments our index covers were rewritten by compaction"
			}
		case OpDelete, OpUpdate:
			if cov := intersect(ours.IndexedFragments(), theirs.Op.Removed); len(cov) > 0 {
				return Retryable, cov, "fragments our index covers were removed (every row deleted)"
			}
		case OpCreateIndex:
			if n := sharedNames(ours.IndexNames(), theirs.IndexNames()); len(n) > 0 {
				return Retryable, nil, fmt.Sprintf("index %v was built or replaced concurrently", n)
			}
		}
		return Compatible, nil, ""
	case OpMergeWAL:
		switch t {
		case OpSchemaChange:
			return schemaChanged()
		case OpMergeWAL:
			for _, o := range ours.Op.WALs {
				for _, th := range theirs.Op.WALs {
					if o.Shard == th.Shard {
						return Retryable, nil, fmt.Sprintf("shard %q was merged concurrently", o.Shard)
					}
				}
			}
		}
		return Compatible, nil, ""
	}
	return Incompatible, nil, fmt.Sprintf("no rule for %s after %s", o, t)
}

func oldFragments(t *Transaction) []uint32 {
	var ids []uint32
	for _, g := range t.Op.Groups {
		ids = append(ids, g.Old...)
	}
	return ids
}

func sharedNames(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

func sharedKeys(a, b *Transaction) []string {
	var out []string
	bk := b.ConfigKeys()
	for _, k := range a.ConfigKeys() {
		if slices.Contains(bk, k) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func intersect(a, b []uint32) []uint32 {
	var out []uint32
	for _, x := range a {
		if slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}
