package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Error classes. Every error this package returns wraps one of them (or a *ConflictError,
// which matches ErrConflict), so callers branch with errors.Is.
var (
	// ErrNoPointer: the table has no published pointer.
	ErrNoPointer = errors.New("no published pointer")
	// ErrConflict: a compare-and-swap found the pointer at another version than expected.
	// The error is a *ConflictError carrying the current pointer.
	ErrConflict = errors.New("publish conflict")
	// ErrBackwards: the publish would not move the pointer forward (invariant 2).
	ErrBackwards = errors.New("publish would not move the pointer forward")
	// ErrInvalid: a malformed argument (version 0, empty manifest key or table name,
	// duplicate table in one PublishMany, …). Nothing was written.
	ErrInvalid = errors.New("invalid publish request")
	// ErrNewerFormat: a stored pointer has a format version newer than this build reads.
	// It is never overwritten by this build.
	ErrNewerFormat = errors.New("pointer format is newer than this build reads")
	// ErrCorrupt: a stored pointer does not decode.
	ErrCorrupt = errors.New("corrupt pointer")
	// ErrDiverged: the stored pointer has our version but names another manifest or
	// checksum: two manifests claim one version (invariant 1 broken somewhere).
	ErrDiverged = errors.New("pointer names another manifest for the same version")
	// ErrContended: the retry budget ran out while others kept moving the pointer, and the
	// goal still does not hold.
	ErrContended = errors.New("publish retry budget exhausted under contention")
	// ErrEtcd: an etcd request failed; the etcd error is wrapped too. For a write the
	// outcome was re-checked and is still unknown or not ours.
	ErrEtcd = errors.New("etcd request failed")
	// ErrIncarnation: the pointer belongs to a later incarnation of the table than the
	// update (the table was dropped and created again after the update's version was
	// committed): the update's version is in no published table, and the pointer is left
	// alone. Nothing was written.
	ErrIncarnation = errors.New("the pointer belongs to a later incarnation of the table (it was dropped and created again)")
)

// Error is a failed catalog operation on one table: the operation ("get", "fast-forward",
// "compare-and-swap", "publish", "snapshot", "delete"), the table, its etcd key, and the
// cause (wrapping one class above, and the etcd error where there is one).
type Error struct {
	Op    string // the operation, e.g. "fast-forward"
	Table string // the table
	Key   string // the pointer's etcd key
	Err   error  // the cause, wrapping one of the classes above
}

// Error reads "catalog <op> of table <name> (key <key>): <cause>".
func (e *Error) Error() string {
	return fmt.Sprintf("catalog %s of table %q (key %s): %v", e.Op, e.Table, e.Key, e.Err)
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// ConflictError reports a compare-and-swap publish that lost: the table's pointer is at
// Current (Version 0 when absent) rather than at Expected. errors.Is(err, ErrConflict).
type ConflictError struct {
	Table    string  // the table
	Expected uint64  // the version the publish required (0: absent)
	Current  Pointer // the pointer found (Version 0: absent)
}

// Error names the table, the version expected and the pointer found.
func (e *ConflictError) Error() string {
	cur := "absent"
	if e.Current.Version != 0 {
		cur = fmt.Sprintf("at version %d (%s)", e.Current.Version, e.Current.ManifestKey)
	}
	exp := "absent"
	if e.Expected != 0 {
		exp = fmt.Sprintf("at version %d", e.Expected)
	}
	return fmt.Sprintf("catalog: %v on table %q: expected the pointer %s, it is %s", ErrConflict, e.Table, exp, cur)
}

// Is makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Pointer is a table's published version: the version number, the manifest's object key in
// the table's store, the manifest's checksum, and the incarnation the version belongs to
// (manifest.Manifest.Incarnation and IncarnationSince).
type Pointer struct {
	Version     uint64 // the published version
	ManifestKey string // its manifest's key in the store: <table>/_versions/<inv>.manifest
	Checksum    uint32 // CRC32C of that manifest object (manifest.Checksum); readers check it
	// Incarnation is the id of the table's incarnation ("" in pointers of older builds,
	// and for tables created by them: matches any incarnation).
	Incarnation string
	// Since is the first version of that incarnation (0: unknown). A version below it
	// belongs to an earlier incarnation, whatever its id.
	Since uint64
}

// Same reports whether p and q name the same version and manifest object (their
// incarnation fields aside: a pointer written by an older build has none).
func (p Pointer) Same(q Pointer) bool {
	return p.Version == q.Version && p.ManifestKey == q.ManifestKey && p.Checksum == q.Checksum
}

// Incarnation order of two pointers of one table (compareIncarnation).
const (
	sameIncarnation  = 0
	olderIncarnation = -1 // the first pointer's incarnation ended before the second's began
	newerIncarnation = 1  // the first pointer's incarnation began after the second's ended
)

// compareIncarnation places pointer p's incarnation relative to u's. A version below the
// other's first version belongs to an earlier incarnation; otherwise ids decide, "" (a
// pointer or table of an older build) matching any. Different ids with nothing to order
// them count as p newer: u is refused rather than published over p.
func compareIncarnation(p, u Pointer) int {
	switch {
	case u.Version < p.Since:
		return newerIncarnation
	case p.Version < u.Since:
		return olderIncarnation
	case p.Incarnation == "" || u.Incarnation == "" || p.Incarnation == u.Incarnation:
		return sameIncarnation
	case p.Since < u.Since:
		return olderIncarnation
	}
	return newerIncarnation
}

// PointerFormat is the format version of the encoding this build writes; it refuses to
// read (and to overwrite) a larger one. The incarnation fields are optional: older builds
// of format 1 read such a pointer (and write it back without them, which matches any
// incarnation).
const PointerFormat = 1

type wirePointer struct {
	Format      int    `json:"format"`
	Version     uint64 `json:"version"`
	ManifestKey string `json:"manifest_key"`
	Checksum    uint32 `json:"checksum"`
	Incarnation string `json:"incarnation,omitempty"`
	Since       uint64 `json:"incarnation_since,omitempty"`
}

// Encode returns the stored form: JSON {"format":1,"version":…,"manifest_key":…,
// "checksum":…,"incarnation":…,"incarnation_since":…} (the last two omitted when empty).
func (p Pointer) Encode() []byte {
	b, err := json.Marshal(wirePointer{PointerFormat, p.Version, p.ManifestKey, p.Checksum, p.Incarnation, p.Since})
	if err != nil {
		panic(err) // cannot happen for these field types
	}
	return b
}

// DecodePointer parses a stored pointer. Errors: ErrNewerFormat, ErrCorrupt (the caller
// adds the key).
func DecodePointer(b []byte) (Pointer, error) {
	var w wirePointer
	if err := json.Unmarshal(b, &w); err != nil {
		return Pointer{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	switch {
	case w.Format > PointerFormat:
		return Pointer{}, fmt.Errorf("%w: format %d, this build reads up to %d", ErrNewerFormat, w.Format, PointerFormat)
	case w.Format < 1:
		return Pointer{}, fmt.Errorf("%w: missing or bad format %d", ErrCorrupt, w.Format)
	case w.Version == 0 || w.ManifestKey == "":
		return Pointer{}, fmt.Errorf("%w: version %d, manifest key %q", ErrCorrupt, w.Version, w.ManifestKey)
	}
	return Pointer{Version: w.Version, ManifestKey: w.ManifestKey, Checksum: w.Checksum, Incarnation: w.Incarnation, Since: w.Since}, nil
}

func (p Pointer) validate() error {
	if p.Version == 0 || p.ManifestKey == "" {
		return fmt.Errorf("%w: pointer needs a version > 0 and a manifest key, got %+v", ErrInvalid, p)
	}
	return nil
}
