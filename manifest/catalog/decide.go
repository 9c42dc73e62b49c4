package catalog

import "fmt"

// validate checks a publish request before any I/O.
func validate(updates []Update) error {
	if len(updates) == 0 {
		return fmt.Errorf("%w: no updates", ErrInvalid)
	}
	if len(updates) > MaxPublishMany {
		return fmt.Errorf("%w: %d updates, at most %d per transaction", ErrInvalid, len(updates), MaxPublishMany)
	}
	seen := make(map[string]bool, len(updates))
	for _, u := range updates {
		if u.Table == "" {
			return fmt.Errorf("%w: empty table name", ErrInvalid)
		}
		if seen[u.Table] {
			return fmt.Errorf("%w: table %q appears twice", ErrInvalid, u.Table)
		}
		seen[u.Table] = true
		if err := u.Pointer.validate(); err != nil {
			return fmt.Errorf("table %q: %w", u.Table, err)
		}
		switch u.Mode {
		case FastForward, FastForwardExisting:
		case CAS:
			if u.Pointer.Version <= u.Expected {
				return fmt.Errorf("%w: table %q: version %d does not advance past expected %d",
					ErrBackwards, u.Table, u.Pointer.Version, u.Expected)
			}
		default:
			return fmt.Errorf("%w: table %q: unknown mode %v", ErrInvalid, u.Table, u.Mode)
		}
	}
	return nil
}

// decision is what one update needs given the pointer it was read against.
type decision int

const (
	met   decision = iota // the goal holds; write nothing
	write                 // write our pointer, guarded by the mod revision read
)

// decide applies an update's mode to the current state. A pointer of a later incarnation
// than the update's is never moved (ErrIncarnation); one of an earlier incarnation (the
// table was dropped and created again, and the new incarnation is not published yet) is
// behind any version of the update's and is replaced like any pointer behind.
// Errors: *ConflictError (CAS), ErrDiverged (a pointer at our version naming another
// manifest), ErrIncarnation.
func decide(u Update, s state) (decision, error) {
	p := u.Pointer
	if s.present && compareIncarnation(s.ptr, p) == newerIncarnation {
		return met, fmt.Errorf("%w: version %d of incarnation %q (since version %d) is published, ours is version %d of incarnation %q (since version %d)",
			ErrIncarnation, s.ptr.Version, s.ptr.Incarnation, s.ptr.Since, p.Version, p.Incarnation, p.Since)
	}
	switch u.Mode {
	case FastForward, FastForwardExisting:
		if !s.present && u.Mode == FastForwardExisting {
			return met, ErrNoPointer
		}
		if s.present && s.ptr.Version >= p.Version {
			if s.ptr.Version == p.Version && !s.ptr.Same(p) {
				return met, fmt.Errorf("%w: version %d is published as %s (checksum %08x), ours is %s (checksum %08x)",
					ErrDiverged, p.Version, s.ptr.ManifestKey, s.ptr.Checksum, p.ManifestKey, p.Checksum)
			}
			return met, nil
		}
		return write, nil
	case CAS:
		if s.present && s.ptr.Same(p) {
			return met, nil // our publish already landed (a retry after an unknown outcome)
		}
		if s.version() != u.Expected {
			cur := Pointer{}
			if s.present {
				cur = s.ptr
			}
			return met, &ConflictError{Table: u.Table, Expected: u.Expected, Current: cur}
		}
		return write, nil
	}
	return met, fmt.Errorf("%w: unknown mode %v", ErrInvalid, u.Mode)
}

// plan is the decision for a whole publish.
type plan struct {
	writes []int     // indexes of updates to write
	result []Pointer // pointer in effect per update if the writes succeed (what is written, for writes)
}

type decideError struct {
	index int
	err   error
}

func (e *decideError) Error() string { return e.err.Error() }
func (e *decideError) Unwrap() error { return e.err }

// decideAll decides every update; the first error (in update order) aborts the publish.
func decideAll(updates []Update, states []state) (plan, error) {
	pl := plan{result: make([]Pointer, len(updates))}
	for i, u := range updates {
		d, err := decide(u, states[i])
		if err != nil {
			return plan{}, &decideError{index: i, err: err}
		}
		if d == write {
			pl.writes = append(pl.writes, i)
			pl.result[i] = u.Pointer
			if s := states[i]; s.present && u.Pointer.Incarnation == "" && compareIncarnation(s.ptr, u.Pointer) == sameIncarnation {
				// A version written by an older build (no incarnation) keeps the
				// incarnation the pointer already names.
				pl.result[i].Incarnation, pl.result[i].Since = s.ptr.Incarnation, s.ptr.Since
			}
		} else {
			pl.result[i] = states[i].ptr
		}
	}
	return pl, nil
}

// goalMet reports whether every update's goal holds in states (fast-forward: at or past
// its version without diverging; CAS: exactly its pointer), with the pointers in effect.
func goalMet(updates []Update, states []state) ([]Pointer, bool) {
	res := make([]Pointer, len(updates))
	for i, u := range updates {
		s := states[i]
		switch {
		case !s.present, compareIncarnation(s.ptr, u.Pointer) != sameIncarnation:
			return nil, false
		case s.ptr.Same(u.Pointer), (u.Mode == FastForward || u.Mode == FastForwardExisting) && s.ptr.Version > u.Pointer.Version:
			res[i] = s.ptr
		default:
			return nil, false
		}
	}
	return res, true
}
