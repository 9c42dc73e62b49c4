package manifest

import (
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"
)

// OpKind names the operation a transaction applies.
type OpKind string

// Operation kinds.
//
// Logical operations change which rows exist or what they mean: Create, Append, Delete,
// Update, Overwrite, SchemaChange, UpdateConfig, Drop. Maintenance operations preserve content:
// Rewrite (compaction), CreateIndex, MergeWAL (moves rows from WAL generations into the base
// table; readers already saw them through the WAL).
const (
	OpCreate       OpKind = "create"
	OpAppend       OpKind = "append"
	OpDelete       OpKind = "delete"
	OpUpdate       OpKind = "update"
	OpOverwrite    OpKind = "overwrite"
	OpSchemaChange OpKind = "schema_change"
	OpUpdateConfig OpKind = "update_config"
	OpRewrite      OpKind = "rewrite"
	OpCreateIndex  OpKind = "create_index"
	OpMergeWAL     OpKind = "merge_wal"
	// OpAbort changes nothing: it fences transactions that must never commit (recovery
	// rolling back a crashed maintenance operation). It takes a version number, so any
	// listed transaction still in flight meets it in its commit loop and fails, and if one
	// of them landed first the abort itself fails (DESIGN invariant 7: the fence is a
	// position in the version sequence, not a lease).
	OpAbort OpKind = "abort"
	// OpDrop ends the table's incarnation: it commits an empty version (the drop marker)
	// on top of HEAD before the table's objects are deleted. A transaction of the
	// incarnation still in flight meets it in its commit loop and fails with
	// ErrTableDropped, so no version of a dropped table is committed after its objects
	// may have gone (invariant 15), and only a Create (a new incarnation) is built on it
	// (invariant 16).
	OpDrop OpKind = "drop"
)

// OpKinds lists every operation kind (the conflict matrix is tested over all ordered pairs).
var OpKinds = []OpKind{OpCreate, OpAppend, OpDelete, OpUpdate, OpOverwrite, OpSchemaChange,
	OpUpdateConfig, OpRewrite, OpCreateIndex, OpMergeWAL, OpAbort, OpDrop}

// Maintenance reports whether k preserves the table's content (and so publishes by
// fast-forward and never invalidates a concurrent logical writer's read).
func (k OpKind) Maintenance() bool {
	return k == OpRewrite || k == OpCreateIndex || k == OpMergeWAL || k == OpAbort
}

// Transaction is the operation a version applies, planned against ReadVersion. The id is
// minted before the first attempt and kept across retries, so a retry after an unknown
// outcome commits at most once.
type Transaction struct {
	ID          string    // a ULID minted before the first attempt (NewTransactionID)
	ReadVersion uint64    // the version the operation was planned on; conflicts are checked from ReadVersion+1
	Timestamp   int64     // Unix nanoseconds when the transaction was planned
	Op          Operation // what the transaction does
	// IdempotencyKey, when set, names the write across retries by different transactions
	// (a client that crashed and runs the same import again), as Delta's application
	// transactions do: a table commits at most one transaction per key among the keys it
	// remembers (Manifest.Idempotency). Up to MaxIdempotencyKeyLen bytes.
	IdempotencyKey string `cbor:",omitempty"`
}

// MaxIdempotencyKeyLen bounds Transaction.IdempotencyKey.
const MaxIdempotencyKeyLen = 256

// Operation is the payload of a transaction. Which fields are set depends on Kind:
//
//	Create, Overwrite: Schema, NewFragments, Config (replaces the whole table)
//	Append:            NewFragments (ids assigned when the version is built)
//	Delete:            Deletions (fragments whose deletion vector changes), Removed
//	                   (fragments fully deleted), Predicate (for humans and repair)
//	Update:            as Delete for the old rows, NewFragments for the rewritten rows,
//	                   UpdatedFields (field ids assigned), Predicate
//	SchemaChange:      Schema (the new schema), SchemaDelta
//	UpdateConfig:      Config (upserts), ConfigDeletes
//	Rewrite:           Groups (old fragment ids → new fragments, each new fragment's ID
//	                   the id its writer expects it to get); NewIndexes (segments of
//	                   existing indexes over the new fragments, e.g. zone maps; one
//	                   whose index is gone, or whose fragments got other ids, is left out)
//	CreateIndex:       index metadata: RemovedIndexes (names dropped), IndexReplaces
//	                   (segment uuids dropped), NewIndexes (segments added, each covering
//	                   fragments no other segment of its name covers)
//	MergeWAL:          WAL (shard, generations merged), NewFragments
//	Abort:             Aborted (transaction ids fenced off)
//	Drop:              nothing (the version it builds is empty: the drop marker)
type Operation struct {
	Kind           OpKind            // which operation; decides which fields below are set
	Schema         *Schema           `cbor:",omitempty"` // the new schema (Create, Overwrite, SchemaChange)
	NewFragments   []Fragment        `cbor:",omitempty"` // fragments added; ids are assigned when the version is built
	Config         map[string]string `cbor:",omitempty"` // configuration set (UpdateConfig: upserts; Create, Overwrite: the whole map)
	ConfigDeletes  []string          `cbor:",omitempty"` // configuration keys deleted (UpdateConfig)
	Deletions      []DeletionUpdate  `cbor:",omitempty"` // fragments whose deletion vector changes (Delete, Update)
	Removed        []uint32          `cbor:",omitempty"` // fragments removed whole: every row deleted (Delete, Update)
	Predicate      string            `cbor:",omitempty"` // the WHERE expression (Delete, Update), for humans and repair
	UpdatedFields  []int32           `cbor:",omitempty"` // field ids an Update assigned
	SchemaDelta    *SchemaDelta      `cbor:",omitempty"` // field ids a SchemaChange added, dropped or renamed
	Groups         []RewriteGroup    `cbor:",omitempty"` // old fragments → new fragments (Rewrite)
	NewIndexes     []Index           `cbor:",omitempty"` // index segments added (CreateIndex, Rewrite)
	RemovedIndexes []string          `cbor:",omitempty"` // index names dropped (CreateIndex)
	// IndexReplaces are uuids of index segments the operation removes (a merge of a
	// BTree's delta segments into one).
	IndexReplaces []string `cbor:",omitempty"`
	// WALs are the shards and generations a MergeWAL merges: one version may merge several
	// shards, each at most once, with every new watermark committed together.
	WALs    []WALMerge `cbor:",omitempty"`
	Aborted []string   `cbor:",omitempty"` // transaction ids fenced off (Abort): none of them can commit after it
	// Group marks one member of a multi-table transaction: the version counts only if the
	// group commits (see manifest/catalog group keys).
	Group *GroupRef `cbor:",omitempty"`
	// NewFragmentIDs are the ids Build gave NewFragments (and Groups' new fragments). A
	// manifest embeds its transaction without NewFragments, Groups' fragments and Schema
	// (the manifest itself holds them; the _txn record keeps the whole transaction), so
	// conflict checks see these ids instead.
	NewFragmentIDs []uint32 `cbor:",omitempty"`
}

// SchemaDelta says which field ids a SchemaChange added, dropped or renamed.
type SchemaDelta struct {
	Added, Dropped, Renamed []int32 `cbor:",omitempty"` // field ids
}

// RewriteGroup replaces the fragments Old (ids) by New (rows in the same order, deleted
// rows dropped). New fragments get ids when the version is built.
type RewriteGroup struct {
	Old []uint32   // ids of the fragments replaced, in table order
	New []Fragment `cbor:",omitempty"` // their live rows, in the same order
}

// Index describes one segment of a scalar index: which fields it indexes, which
// fragments it covers (a query scans the fragments no segment covers) and where its files
// live. An index (a name) has one or more segments of the same kind and fields covering
// disjoint fragments: a full build, plus deltas built over fragments appended since.
type Index struct {
	Name      string   // the index name; a name's segments share Kind and FieldIDs
	UUID      string   // this segment's id: its objects live under <table>/_indices/<txn-id>/<uuid>/
	Kind      string   // "btree" or "zonemap"
	FieldIDs  []int32  // the indexed fields' ids
	Fragments []uint32 // fragment ids covered (fragments removed since are pruned by Build)
	Version   uint64   // the table version it was built from
	// Files are its objects: a BTree's lookup then its pages file; a zone map's object.
	Files []string `cbor:",omitempty"`
	// Rows is the number of rows indexed (deleted rows included: deletion vectors are
	// applied when a query reads them); Bytes the size of its objects.
	Rows  int64 `cbor:",omitempty"`
	Bytes int64 `cbor:",omitempty"` // bytes of Files
}

// GroupRef names the multi-table transaction a version belongs to and its member tables.
type GroupRef struct {
	ID     string   // the group id: its state lives in the catalog (catalog.GroupState)
	Tables []string // every member table, sorted
}

// WALMerge merges generations (From, To] of a WAL shard into the base table: the table's
// merged watermark for Shard must be From when the version is built, and becomes To. A
// version built on a table whose watermark is not From fails with ErrWatermarkMoved: the
// generations were merged by someone else (exactly once, invariant 8).
type WALMerge struct {
	Shard    string // the WAL shard
	From, To uint64 // generations: the merged watermark before and after
}

// DeletionUpdate gives fragment FragmentID a new deletion vector. Previous is the key of
// the deletion vector it replaces ("" = none), as read at the transaction's read version:
// the new vector contains every row the previous one did.
type DeletionUpdate struct {
	FragmentID uint32       // the fragment
	Previous   string       // key of the vector replaced, "" for none
	New        DeletionFile // the new vector (old ∪ newly deleted rows)
}

// NewTransactionID mints a transaction id (a ULID: sortable by creation time).
func NewTransactionID() string {
	return ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader).String()
}

// NewTransaction mints a transaction planned against readVersion.
func NewTransaction(readVersion uint64, op Operation) Transaction {
	return Transaction{ID: NewTransactionID(), ReadVersion: readVersion, Timestamp: time.Now().UnixNano(), Op: op}
}

// TouchedFragments lists the ids of existing fragments the transaction modifies or removes
// (deletion vectors, removals, rewrites).
func (t *Transaction) TouchedFragments() []uint32 {
	var ids []uint32
	for _, d := range t.Op.Deletions {
		ids = append(ids, d.FragmentID)
	}
	ids = append(ids, t.Op.Removed...)
	for _, g := range t.Op.Groups {
		ids = append(ids, g.Old...)
	}
	return ids
}

// ConfigKeys lists the configuration keys the transaction sets or deletes.
func (t *Transaction) ConfigKeys() []string {
	var keys []string
	for k := range t.Op.Config {
		keys = append(keys, k)
	}
	return append(keys, t.Op.ConfigDeletes...)
}

// IndexNames lists the names of the indexes the transaction adds segments to or drops.
func (t *Transaction) IndexNames() []string {
	var out []string
	for _, ix := range t.Op.NewIndexes {
		if !slices.Contains(out, ix.Name) {
			out = append(out, ix.Name)
		}
	}
	for _, n := range t.Op.RemovedIndexes {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// IndexedFragments lists the fragments covered by the indexes the transaction creates.
func (t *Transaction) IndexedFragments() []uint32 {
	var ids []uint32
	for _, ix := range t.Op.NewIndexes {
		ids = append(ids, ix.Fragments...)
	}
	return ids
}

// String is "<kind> <id> (read v<R>)".
func (t *Transaction) String() string {
	return fmt.Sprintf("%s %s (read v%d)", t.Op.Kind, t.ID, t.ReadVersion)
}

// txnRecord is what _txn/<N>-<id>.txn holds.
type txnRecord struct {
	Table   string
	Version uint64
	Txn     Transaction
}

// EncodeTransaction frames the record of txn attempted as version v of table, as stored at
// TxnKey. Errors: a field that does not encode as CBOR.
func EncodeTransaction(table string, v uint64, txn Transaction) ([]byte, error) {
	return frame(magicTxn, txnRecord{Table: table, Version: v, Txn: txn})
}

// DecodeTransaction decodes a transaction record read from key and returns the version it
// was attempted as and the transaction. Errors: *ObjectError wrapping ErrCorrupt,
// ErrFormatTooNew or ErrFormatTooOld.
func DecodeTransaction(table, key string, b []byte) (uint64, Transaction, error) {
	var r txnRecord
	if err := unframe(magicTxn, b, &r); err != nil {
		return 0, Transaction{}, &ObjectError{Table: table, Key: key, Err: err}
	}
	return r.Version, r.Txn, nil
}
