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
)

// Error is a failed catalog operation on one table: the operation ("get", "fast-forward",
// "compare-and-swap", "publish", "snapshot", "delete"), the table, its etcd key, and the
// cause (wrapping one class above, and the etcd error where there is one).
type Error struct {
	Op    string
	Table string
	Key   string
	Err   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("catalog %s of table %q (key %s): %v", e.Op, e.Table, e.Key, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ConflictError reports a compare-and-swap publish that lost: the table's pointer is at
// Current (Version 0 when absent) rather than at Expected. errors.Is(err, ErrConflict).
type ConflictError struct {
	Table    string
	Expected uint64
	Current  Pointer
}

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
// the table's store, and the manifest's checksum.
type Pointer struct {
	Version     uint64
	ManifestKey string
	Checksum    uint32
}

// PointerFormat is the format version of the encoding this build writes; it refuses to
// read (and to overwrite) a larger one.
const PointerFormat = 1

type wirePointer struct {
	Format      int    `json:"format"`
	Version     uint64 `json:"version"`
	ManifestKey string `json:"manifest_key"`
	Checksum    uint32 `json:"checksum"`
}

// Encode returns the stored form: JSON {"format":1,"version":…,"manifest_key":…,"checksum":…}.
func (p Pointer) Encode() []byte {
	b, err := json.Marshal(wirePointer{PointerFormat, p.Version, p.ManifestKey, p.Checksum})
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
	return Pointer{Version: w.Version, ManifestKey: w.ManifestKey, Checksum: w.Checksum}, nil
}

func (p Pointer) validate() error {
	if p.Version == 0 || p.ManifestKey == "" {
		return fmt.Errorf("%w: pointer needs a version > 0 and a manifest key, got %+v", ErrInvalid, p)
	}
	return nil
}
