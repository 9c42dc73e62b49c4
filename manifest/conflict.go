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
)

// ConflictError reports that our transaction cannot commit on top of a transaction
// committed after our read version. It names both transactions and the fragments they
// share.
type ConflictError struct {
	Table         string
	Resolution    Resolution // Retryable or Incompatible
	Ours          Transaction
	Theirs        Transaction
	TheirsVersion uint64
	Fragments     []uint32 // fragments both touch; empty when the conflict is table-wide
	Reason        string
}

func (e *ConflictError) Error() string {
	s := fmt.Sprintf("table %q: %s: our %s conflicts with %s committed as version %d",
		e.Table, e.Resolution, e.Ours.String(), e.Theirs.String(), e.TheirsVersion)
	if len(e.Fragments) > 0 {
		s += fmt.Sprintf(" (shared fragments %v)", e.Fragments)
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap makes errors.Is match ErrConflict and ErrRetryable or ErrIncompatible.
func (e *ConflictError) Unwrap() []error {
	if e.Resolution == Retryable {
		return []error{ErrConflict, ErrRetryable}
	}
	return []error{ErrConflict, ErrIncompatible}
}

// Check decides whether ours can commit after theirs, which committed after our read
// version. It is a pure function of the two transactions (DESIGN §6): rows are ours,
// columns theirs.
//
//	            Append  Delete                Overwrite/Create
//	Append      ok      ok                    incompatible
//	Delete      ok      retry if overlapping  incompatible
//	Overwrite   ok      ok                    retry
//	Create      incompatible (the table already exists)
//
// It returns the resolution, the shared fragment ids and a reason for conflicts.
func Check(ours, theirs *Transaction) (Resolution, []uint32, string) {
	replaces := func(k OpKind) bool { return k == OpOverwrite || k == OpCreate }
	switch ours.Op.Kind {
	case OpCreate:
		return Incompatible, nil, "the table already exists"
	case OpAppend:
		if replaces(theirs.Op.Kind) {
			return Incompatible, nil, "the table was replaced after our read version"
		}
		if theirs.Op.Kind == OpAppend || theirs.Op.Kind == OpDelete {
			return Compatible, nil, ""
		}
	case OpDelete:
		if replaces(theirs.Op.Kind) {
			return Incompatible, nil, "the table was replaced after our read version"
		}
		switch theirs.Op.Kind {
		case OpAppend:
			return Compatible, nil, ""
		case OpDelete:
			if shared := intersect(ours.TouchedFragments(), theirs.TouchedFragments()); len(shared) > 0 {
				return Retryable, shared, "both change the deletion vectors of the same fragments"
			}
			return Compatible, nil, ""
		}
	case OpOverwrite:
		switch theirs.Op.Kind {
		case OpOverwrite, OpCreate:
			return Retryable, nil, "the table was replaced after our read version"
		case OpAppend, OpDelete:
			return Compatible, nil, ""
		}
	}
	return Incompatible, nil, fmt.Sprintf("no rule for %s after %s", ours.Op.Kind, theirs.Op.Kind)
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
