package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shale-db/shale/internal/objstore"
)

// Expiring a version (garbage collection) replaces its manifest object with a small
// tombstone instead of deleting it. Version numbers are claimed with put-if-absent on the
// manifest key, so a deleted manifest would reopen its number: a writer whose read version
// is older than the expired range would find version N+1 "absent", commit into the hole
// below HEAD, and report success for a write no later version contains (a lost write).
// With the tombstone in place that put fails, the read-back sees ErrVersionExpired, and
// the commit reports a retryable conflict; the caller reopens at HEAD.
//
// A tombstone is about 60 bytes; one stays per expired version (Lance and Delta delete
// old manifests and rely on retention being longer than any transaction; a tombstone
// makes that assumption unnecessary).

// ErrVersionExpired: the version was expired by garbage collection; only its tombstone
// remains. Errors carrying it also match ErrVersionNotFound (the version cannot be read),
// so readers need not tell the two apart; the commit loop must, because an expired
// number is below HEAD, not past it.
var ErrVersionExpired = errors.New("version expired by garbage collection")

var magicTombstone = [4]byte{'S', 'H', 'X', 'V'}

// tombstone is the body of an expired version's object.
type tombstone struct {
	Table     string `cbor:"1,keyasint"`
	Version   uint64 `cbor:"2,keyasint"`
	TxnID     string `cbor:"3,keyasint,omitempty"` // the transaction the version carried
	ExpiredAt int64  `cbor:"4,keyasint"`           // Unix nanoseconds
}

// Expire replaces the manifest of m's version with a tombstone (one PUT). Expiring an
// already expired version rewrites its tombstone. The caller (GC) decides which versions
// may go: never HEAD, the published version, or a held one. Data files, deletion vectors
// and the _txn record are left to the caller.
// Errors: *ObjectError naming the key, wrapping the store error.
func Expire(ctx context.Context, s objstore.Store, m *Manifest) error {
	b, err := frame(magicTombstone, tombstone{Table: m.Table, Version: m.Version, TxnID: m.Txn.ID, ExpiredAt: time.Now().UnixNano()})
	if err != nil {
		return &ObjectError{Table: m.Table, Version: m.Version, Key: m.Key(), Err: err}
	}
	if err := s.Put(ctx, m.Key(), b); err != nil {
		return &ObjectError{Table: m.Table, Version: m.Version, Key: m.Key(), Err: fmt.Errorf("expire: %w", err)}
	}
	return nil
}

// IsTombstone reports whether an object's bytes are an expired version's tombstone.
func IsTombstone(b []byte) bool { return bytes.HasPrefix(b, magicTombstone[:]) }

// decodeTombstone checks a tombstone read from key for table at version and returns the
// ErrVersionExpired error Load reports.
func decodeTombstone(table string, v uint64, key string, b []byte) error {
	var t tombstone
	if err := unframe(magicTombstone, b, &t); err != nil {
		return &ObjectError{Table: table, Version: v, Key: key, Err: err}
	}
	if t.Table != table || t.Version != v {
		return &ObjectError{Table: table, Version: v, Key: key,
			Err: fmt.Errorf("%w: tombstone describes table %q version %d", ErrCorrupt, t.Table, t.Version)}
	}
	return &ObjectError{Table: table, Version: v, Key: key, Err: expiredErr}
}

// expiredErr matches both ErrVersionExpired and ErrVersionNotFound.
var expiredErr = fmt.Errorf("%w (%w)", ErrVersionExpired, ErrVersionNotFound)
