package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shale-db/shale/store"
)

// Expiring a version (garbage collection) replaces its manifest object with a small
// tombstone instead of deleting it. Version numbers are claimed with put-if-absent on the
// manifest key, so a deleted manifest would reopen its number: a writer whose read version
// is older than the expired range would find version N+1 "absent", commit into the hole
// below HEAD, and report success for a write no later version contains (a lost write).
// With the tombstone in place that put fails, the read-back sees ErrVersionExpired, and
// the commit reports a retryable conflict; the caller reopens at HEAD.
//
// A tombstone keeps the expired version's transaction (as the manifest embeds it: kind,
// id, read version, touched fragments and keys, aborted ids; no schema or new fragments),
// so a commit loop that walks across expired versions can still check its transaction
// against each of them (Check), recognise its own earlier attempt by id, and meet an
// abort that fences it. Expiry therefore never turns into a conflict, and outcomes stay
// decided by transaction id however much history GC removed. A tombstone is a few hundred
// bytes at most for an append; one stays per expired version (Lance and Delta delete old
// manifests and rely on retention being longer than any transaction; a tombstone makes
// that assumption unnecessary).

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
	// Txn is the version's transaction as its manifest embedded it (nil in tombstones
	// written before it was kept: those can tell ids apart but not conflicts).
	Txn *Transaction `cbor:"5,keyasint,omitempty"`
}

// Expire replaces the manifest of m's version with a tombstone (one PUT). Expiring an
// already expired version rewrites its tombstone. The caller (GC) decides which versions
// may go: never HEAD, the published version, or a held one. Data files, deletion vectors
// and the _txn record are left to the caller.
// Errors: *ObjectError naming the key, wrapping the store error.
func Expire(ctx context.Context, s store.Store, m *Manifest) error {
	txn := m.Txn
	b, err := frame(magicTombstone, tombstone{Table: m.Table, Version: m.Version, TxnID: m.Txn.ID, ExpiredAt: time.Now().UnixNano(), Txn: &txn})
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

// decodeTombstone checks a tombstone read from key for table at version and returns it
// with the ErrVersionExpired error Load reports.
func decodeTombstone(table string, v uint64, key string, b []byte) (*tombstone, error) {
	var t tombstone
	if err := unframe(magicTombstone, b, &t); err != nil {
		return nil, &ObjectError{Table: table, Version: v, Key: key, Err: err}
	}
	if t.Table != table || t.Version != v {
		return nil, &ObjectError{Table: table, Version: v, Key: key,
			Err: fmt.Errorf("%w: tombstone describes table %q version %d", ErrCorrupt, t.Table, t.Version)}
	}
	if t.Txn != nil && t.Txn.ID != t.TxnID {
		return nil, &ObjectError{Table: table, Version: v, Key: key,
			Err: fmt.Errorf("%w: tombstone names transaction %s and embeds %s", ErrCorrupt, t.TxnID, t.Txn.ID)}
	}
	return &t, &ObjectError{Table: table, Version: v, Key: key, Err: expiredErr}
}

// Record is what one version number holds: the manifest of a retained version, or what
// the tombstone of an expired one keeps.
type Record struct {
	Version uint64 // the version number
	// Manifest is nil when the version expired.
	Manifest *Manifest
	// TxnID is the id of the transaction the version applied (always set).
	TxnID string
	// Txn is that transaction as the manifest embeds it; nil only for a tombstone written
	// before tombstones kept it (such a version can be recognised by id but not checked).
	Txn *Transaction
	// Raw is the stored object's bytes (a manifest's, or a tombstone's).
	Raw []byte

	// lazy: read by loadTxnRecord, whose manifest is decoded on first use (manifest);
	// Manifest is nil until then. Such records never leave this package undecoded.
	lazy  bool
	table string
}

// Expired reports whether the version expired (only its tombstone remains).
func (r *Record) Expired() bool { return r.Manifest == nil && !r.lazy }

// manifest returns the record's manifest (nil for an expired version), decoding the whole
// object on first use for a record read by loadTxnRecord. The decode takes the fragments
// whose records are unchanged from base (nil: none), a manifest of an earlier version
// (decodeManifestOn), and keeps the result's records for the next one. Errors:
// DecodeManifest's.
func (r *Record) manifest(base *Manifest) (*Manifest, error) {
	if r.lazy {
		m, err := decodeManifestOn(r.table, r.Version, ManifestKey(r.table, r.Version), r.Raw, base, true)
		if err != nil {
			return nil, err
		}
		if m.Txn.ID != r.TxnID {
			// The same bytes decoded two ways: never differs unless a codec is broken.
			return nil, &ObjectError{Table: r.table, Version: r.Version, Key: m.Key(),
				Err: fmt.Errorf("%w: transaction %s decoded alone, %s with the manifest", ErrCorrupt, r.TxnID, m.Txn.ID)}
		}
		r.Manifest, r.Txn, r.lazy = m, &m.Txn, false
	}
	return r.Manifest, nil
}

// LoadRecord reads version v of table whether it is retained or expired (one GET).
// Errors: ErrVersionNotFound (never committed, or deleted by a drop), ErrCorrupt /
// ErrFormatTooNew as *ObjectError naming the key, store errors.
func LoadRecord(ctx context.Context, s store.Store, table string, v uint64) (*Record, error) {
	key, b, err := getVersion(ctx, s, table, v)
	if err != nil {
		return nil, err
	}
	if IsTombstone(b) {
		return tombstoneRecord(table, v, key, b)
	}
	m, err := DecodeManifest(table, v, key, b)
	if err != nil {
		return nil, err
	}
	return &Record{Version: v, Manifest: m, TxnID: m.Txn.ID, Txn: &m.Txn, Raw: b}, nil
}

// loadTxnRecord is LoadRecord (one GET) that decodes only the transaction of a retained
// version (decodeManifestTxn): the commit walk and CatchUp read every version committed
// since their transaction's read version, but build on the newest alone, so only that one
// is decoded whole (Record.manifest). The object's checksum, table and version are
// verified as LoadRecord verifies them. Errors: LoadRecord's.
func loadTxnRecord(ctx context.Context, s store.Store, table string, v uint64) (*Record, error) {
	key, b, err := getVersion(ctx, s, table, v)
	if err != nil {
		return nil, err
	}
	if IsTombstone(b) {
		return tombstoneRecord(table, v, key, b)
	}
	m, whole, err := decodeManifestTxn(table, v, key, b)
	if err != nil {
		return nil, err
	}
	if whole {
		return &Record{Version: v, Manifest: m, TxnID: m.Txn.ID, Txn: &m.Txn, Raw: b}, nil
	}
	return &Record{Version: v, TxnID: m.Txn.ID, Txn: &m.Txn, Raw: b, lazy: true, table: table}, nil
}

// LoadTransaction reads version v of table (one GET) and returns the transaction it
// applied, decoding nothing else of a manifest (its fragments above all): for callers
// that only need to know what a version did. An expired version's tombstone keeps the
// transaction too. Errors: ErrVersionNotFound; ErrVersionExpired for a tombstone written
// before tombstones kept transactions; ErrCorrupt / ErrFormatTooNew as *ObjectError
// naming the key; store errors.
func LoadTransaction(ctx context.Context, s store.Store, table string, v uint64) (*Transaction, error) {
	r, err := loadTxnRecord(ctx, s, table, v)
	if err != nil {
		return nil, err
	}
	if r.Txn == nil {
		return nil, &ObjectError{Table: table, Version: v, Key: ManifestKey(table, v), Err: expiredErr}
	}
	return r.Txn, nil
}

// Restore puts back the manifest of an expired version from the bytes it had (rec.Raw of
// a Record that held the manifest): garbage collection does this when a reader pinned the
// version while GC was expiring it. The content is the committed content, byte for byte
// (invariant 1 holds: the version never changes; it was unreadable for a while).
// Errors: *ObjectError naming the key.
func Restore(ctx context.Context, s store.Store, rec *Record) error {
	if rec.Manifest == nil || IsTombstone(rec.Raw) {
		return fmt.Errorf("restore version %d: not a manifest's bytes", rec.Version)
	}
	m := rec.Manifest
	if err := s.Put(ctx, m.Key(), rec.Raw); err != nil {
		return &ObjectError{Table: m.Table, Version: m.Version, Key: m.Key(), Err: fmt.Errorf("restore: %w", err)}
	}
	return nil
}

// expiredErr matches both ErrVersionExpired and ErrVersionNotFound.
var expiredErr = fmt.Errorf("%w (%w)", ErrVersionExpired, ErrVersionNotFound)

// tombstoneRecord is the Record of expired version v, whose object b (at key) is a
// tombstone. Errors: decodeTombstone's.
func tombstoneRecord(table string, v uint64, key string, b []byte) (*Record, error) {
	t, err := decodeTombstone(table, v, key, b)
	if t == nil {
		return nil, err
	}
	return &Record{Version: v, TxnID: t.TxnID, Txn: t.Txn, Raw: b}, nil
}
