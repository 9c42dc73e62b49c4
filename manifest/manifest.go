package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Manifest describes a table at one version. It is immutable once committed.
//
// Concurrency: a *Manifest returned by Load, LoadHead, Commit or a Table handle is
// decoded whole (its schema included) and then only read, so any number of goroutines may
// read it; never modify one that something else holds (Build works on a copy).
type Manifest struct {
	Table   string // the table name
	Version uint64 // the version number, from 1 (the Create)
	Schema  Schema // the table schema at this version, with field ids
	// Fragments in table order. Fragment ids are unique within the table's history.
	Fragments []Fragment
	// NextFragmentID is the id the next new fragment gets.
	NextFragmentID uint32
	// NextFieldID is the id the next new field gets.
	NextFieldID int32
	// Config holds table properties (UpdateConfig, Create, Overwrite).
	Config map[string]string
	// Indexes are the table's scalar indexes.
	Indexes []Index `cbor:",omitempty"`
	// WALMerged is the merged watermark of each WAL shard: the highest generation whose
	// rows are in the base table.
	WALMerged map[string]uint64 `cbor:",omitempty"`
	// Idempotency remembers the idempotency keys of the newest keyed writes, oldest first,
	// at most IdempotencyKeysKept(Config) of them: a write whose key is here (or in a
	// version committed after its read version) is a duplicate of the version named.
	Idempotency []IdempotencyRecord `cbor:",omitempty"`

	// Txn is the transaction that produced this version; TxnKey is where its record lives.
	Txn    Transaction
	TxnKey string // <table>/_txn/<version>-<txn-id>.txn (KeyTxn)
	// Committed is when this version was built for the commit attempt that created it
	// (Unix nanoseconds; 0 in manifests written before it existed). Txn.Timestamp is when
	// the transaction was planned, which can be much earlier for a long write.
	Committed int64 `cbor:",omitempty"`
	// Incarnation names the life of the table this version belongs to, from the Create
	// that made it to the drop that ended it: the id of that Create transaction, carried
	// to every later version (Build). A table dropped and created again under the same
	// name is a new incarnation, and a version of one incarnation never becomes part of
	// another (invariant 16). "" in manifests of builds before incarnations: it matches
	// any incarnation.
	Incarnation string `cbor:",omitempty"`
	// IncarnationSince is the version of the Create that began the incarnation (1 for a
	// table created fresh; the drop marker's version + 1 for one created again; 0 in
	// manifests of builds before incarnations). Every version of an incarnation is at or
	// above it, so a version below it belongs to an earlier incarnation.
	IncarnationSince uint64 `cbor:",omitempty"`

	checksum uint32 // CRC32C of the object this manifest was decoded from (not encoded)
	size     int64  // length of that object (0 when not decoded; not encoded)
	// content is the version whose content this manifest carries when it was renumbered
	// (0: its own; not encoded).
	content uint64
	// records are the encoded bytes of each fragment record when this manifest was
	// decoded or encoded by the commit path (nil otherwise), valid only while Fragments
	// is the slice they were made with (recordsOf): a decode of a later version takes
	// the fragments whose records are unchanged from here (fragRecords).
	records   [][]byte
	recordsOf *Fragment
}

// fragRecords are a manifest's fragments with their encoded records.
type fragRecords struct {
	frags []Fragment
	recs  [][]byte
}

// fragRecords returns m's fragments with their records, or none when m (which may be
// nil) has no records for its current Fragments (a copy whose Fragments were replaced).
func (m *Manifest) fragRecords() fragRecords {
	if m == nil || len(m.records) == 0 || len(m.records) != len(m.Fragments) || &m.Fragments[0] != m.recordsOf {
		return fragRecords{}
	}
	return fragRecords{frags: m.Fragments, recs: m.records}
}

// setFragRecords records recs as the encoded records of m.Fragments.
func (m *Manifest) setFragRecords(recs [][]byte) {
	m.records, m.recordsOf = nil, nil
	if len(recs) > 0 && len(recs) == len(m.Fragments) {
		m.records, m.recordsOf = recs, &m.Fragments[0]
	}
}

// IdempotencyRecord is one remembered keyed write.
type IdempotencyRecord struct {
	Key     string `cbor:"1,keyasint"` // the write's idempotency key
	Version uint64 `cbor:"2,keyasint"` // the version that committed it
	TxnID   string `cbor:"3,keyasint"` // the transaction that committed it
}

// ConfigIdempotencyKeys is the table configuration key bounding how many idempotency keys
// a manifest remembers (default DefaultIdempotencyKeys; 0 remembers none: duplicates are
// then caught only among versions committed after a write's read version).
const ConfigIdempotencyKeys = "shale.idempotency_keys"

// DefaultIdempotencyKeys is ConfigIdempotencyKeys' default.
const DefaultIdempotencyKeys = 1000

// IdempotencyKeysKept is the bound ConfigIdempotencyKeys sets in config (the default when
// absent or not a non-negative integer).
func IdempotencyKeysKept(config map[string]string) int {
	v, ok := config[ConfigIdempotencyKeys]
	if !ok {
		return DefaultIdempotencyKeys
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return DefaultIdempotencyKeys
	}
	return n
}

// IdempotencyVersion returns the remembered write with key ("" never matches).
func (m *Manifest) IdempotencyVersion(key string) (IdempotencyRecord, bool) {
	if key == "" {
		return IdempotencyRecord{}, false
	}
	for _, r := range m.Idempotency {
		if r.Key == key {
			return r, true
		}
	}
	return IdempotencyRecord{}, false
}

// Checksum is the CRC32C of the stored object this manifest was read from (0 for a
// manifest built in memory and not yet read back).
func (m *Manifest) Checksum() uint32 { return m.checksum }

// ContentVersion is the version whose content m carries: m.Version, except when m stands
// for a prepared version of an aborted multi-table group (as LoadCounted, LoadLatest,
// CatchUp and the commit loop return one): such a version counts as empty, so m is the
// content of the nearest version below it that counts, under the aborted version's
// number. Its files are that version's, so a reader that must keep them (a pin) holds
// ContentVersion, not Version.
func (m *Manifest) ContentVersion() uint64 {
	if m.content != 0 {
		return m.content
	}
	return m.Version
}

// Fragment is a set of rows: one or more data files holding the same rows and disjoint
// columns, plus an optional deletion vector. Row offsets run 0..PhysicalRows-1; a row's
// address is ID<<32 | offset.
type Fragment struct {
	ID           uint32        `cbor:"1,keyasint,omitempty"` // unique within the table's history (Manifest.NextFragmentID)
	Files        []DataFile    `cbor:"2,keyasint,omitempty"` // the data files: same rows, disjoint columns (one today)
	PhysicalRows int64         `cbor:"3,keyasint,omitempty"` // rows stored, deleted ones included
	Deletion     *DeletionFile `cbor:"4,keyasint,omitempty"` // nil: no row deleted
}

// DeletionFile names a fragment's deletion vector: a roaring bitmap of deleted row offsets.
type DeletionFile struct {
	Key     string `cbor:"1,keyasint,omitempty"` // <table>/_deletions/<txn-id>/<fragment>-<random>.dv (NewDeletionKey)
	Size    int64  `cbor:"2,keyasint,omitempty"` // bytes
	Deleted int64  `cbor:"3,keyasint,omitempty"` // number of deleted rows (the bitmap's cardinality)
}

// LiveRows is the number of rows not deleted.
func (f *Fragment) LiveRows() int64 {
	if f.Deletion == nil {
		return f.PhysicalRows
	}
	return f.PhysicalRows - f.Deletion.Deleted
}

// RowAddress is fragment id << 32 | row offset.
func RowAddress(fragmentID uint32, offset uint32) uint64 {
	return uint64(fragmentID)<<32 | uint64(offset)
}

// LiveRows is the number of rows not deleted, over all fragments.
func (m *Manifest) LiveRows() int64 {
	var n int64
	for i := range m.Fragments {
		n += m.Fragments[i].LiveRows()
	}
	return n
}

// Fragment returns the fragment with the given id.
func (m *Manifest) Fragment(id uint32) (*Fragment, bool) {
	for i := range m.Fragments {
		if m.Fragments[i].ID == id {
			return &m.Fragments[i], true
		}
	}
	return nil, false
}

// Dropped reports whether m is a drop marker: the empty version an OpDrop transaction
// commits on top of a table's last version when the table is dropped. Every transaction
// that reaches it in its commit loop fails (ErrTableDropped), and only a Create can be
// built on it (a new incarnation).
func (m *Manifest) Dropped() bool { return m.Txn.Op.Kind == OpDrop }

// Key is the object key of this manifest.
func (m *Manifest) Key() string { return ManifestKey(m.Table, m.Version) }

// Encode returns the manifest's framed binary encoding (see Frame): what Commit stores at
// Key. Errors: a field that does not encode as CBOR.
func (m *Manifest) Encode() ([]byte, error) {
	b, err := encodeManifest(m)
	if err != nil {
		return nil, fmt.Errorf("encode manifest %s v%d: %w", m.Table, m.Version, err)
	}
	return b, nil
}

// DecodeManifest decodes and verifies a manifest read from key, which must describe table
// at version. Errors are *ObjectError wrapping ErrCorrupt or ErrFormatTooNew.
func DecodeManifest(table string, version uint64, key string, b []byte) (*Manifest, error) {
	return decodeManifestOn(table, version, key, b, nil, false)
}

// decodeManifestOn is DecodeManifest that takes the fragments whose records are unchanged
// from base (nil: none; see cborReader.fragments), and with keep remembers m's fragment
// records for later decodes (the commit path; the object's bytes stay referenced).
func decodeManifestOn(table string, version uint64, key string, b []byte, base *Manifest, keep bool) (*Manifest, error) {
	m := new(Manifest)
	body, sum, err := checkFrameSum(magicManifest, b)
	if err != nil {
		return nil, &ObjectError{Table: table, Version: version, Key: key, Err: err}
	}
	if err := decodeManifestBodyOn(body, m, base, keep); err != nil {
		return nil, &ObjectError{Table: table, Version: version, Key: key, Err: fmt.Errorf("%w: %v", ErrCorrupt, err)}
	}
	if m.Table != table || m.Version != version {
		return nil, &ObjectError{Table: table, Version: version, Key: key,
			Err: fmt.Errorf("%w: object describes table %q version %d", ErrCorrupt, m.Table, m.Version)}
	}
	if _, err := m.Schema.Arrow(); err != nil {
		return nil, &ObjectError{Table: table, Version: version, Key: key, Err: err}
	}
	m.checksum, m.size = sum, int64(len(b))
	return m, nil
}

// decodeManifestTxn verifies a manifest read from key as DecodeManifest does (frame,
// checksum, table, version) and decodes its table, version, transaction and transaction
// key only (decodeManifestTxnFast); whole reports a body that took the slow path and was
// decoded whole instead. Errors: DecodeManifest's.
func decodeManifestTxn(table string, version uint64, key string, b []byte) (m *Manifest, whole bool, err error) {
	body, sum, err := checkFrameSum(magicManifest, b)
	if err != nil {
		return nil, false, &ObjectError{Table: table, Version: version, Key: key, Err: err}
	}
	m = new(Manifest)
	if decodeManifestTxnFast(body, m) != nil {
		m, err := DecodeManifest(table, version, key, b)
		return m, true, err
	}
	if m.Table != table || m.Version != version {
		return nil, false, &ObjectError{Table: table, Version: version, Key: key,
			Err: fmt.Errorf("%w: object describes table %q version %d", ErrCorrupt, m.Table, m.Version)}
	}
	m.checksum, m.size = sum, int64(len(b))
	return m, false, nil
}

// clone returns a deep enough copy to build a child version from: slices and maps that
// Apply mutates are copied; data files are immutable and shared.
func (m *Manifest) clone() *Manifest {
	c := *m
	c.Fragments = slices.Clone(m.Fragments)
	c.records, c.recordsOf = nil, nil // Build changes the copy's fragments
	c.Config = maps.Clone(m.Config)
	if c.Config == nil {
		c.Config = map[string]string{}
	}
	c.Indexes = slices.Clone(m.Indexes)
	c.WALMerged = maps.Clone(m.WALMerged)
	c.Idempotency = slices.Clone(m.Idempotency)
	return &c
}

// renumbered returns m's content under version v (a prepared version of an aborted group
// keeps its parent's content).
func (m *Manifest) renumbered(v uint64) *Manifest {
	c := m.clone()
	c.setFragRecords(m.fragRecords().recs) // the same fragments, in a new slice
	c.content = m.ContentVersion()
	c.Version = v
	c.checksum, c.size = 0, 0
	return c
}

// ObjectError is an error about one stored object of a table: a manifest, a tombstone or
// a transaction record that is missing (ErrVersionNotFound, ErrVersionExpired), corrupt
// (ErrCorrupt) or of another format (ErrFormatTooNew, ErrFormatTooOld).
type ObjectError struct {
	Table   string // the table
	Version uint64 // 0 when not about one version
	Key     string // the object key
	Err     error  // the class (one of the sentinels above), wrapped with detail
}

// Error names the table, the version when set, the key and the cause. A key under the
// table's own prefix (<table>/...) names the table already, so the table is not named
// twice.
func (e *ObjectError) Error() string {
	if strings.HasPrefix(e.Key, e.Table+"/") {
		if e.Version == 0 {
			return fmt.Sprintf("object %s: %v", e.Key, e.Err)
		}
		return fmt.Sprintf("version %d, object %s: %v", e.Version, e.Key, e.Err)
	}
	if e.Version == 0 {
		return fmt.Sprintf("table %q, object %s: %v", e.Table, e.Key, e.Err)
	}
	return fmt.Sprintf("table %q version %d, object %s: %v", e.Table, e.Version, e.Key, e.Err)
}

// Unwrap returns Err.
func (e *ObjectError) Unwrap() error { return e.Err }
