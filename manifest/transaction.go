package manifest

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
)

// OpKind names the operation a transaction applies.
type OpKind string

// Operation kinds. Create and Overwrite replace the whole table; Append adds fragments;
// Delete replaces deletion vectors and drops fully deleted fragments.
const (
	OpCreate    OpKind = "create"
	OpAppend    OpKind = "append"
	OpDelete    OpKind = "delete"
	OpOverwrite OpKind = "overwrite"
)

// Transaction is the operation a version applies, planned against ReadVersion. The id is
// minted before the first attempt and kept across retries, so a retry after an unknown
// outcome commits at most once.
type Transaction struct {
	ID          string
	ReadVersion uint64
	Timestamp   int64 // Unix nanoseconds when the transaction was planned
	Op          Operation
}

// Operation is the payload of a transaction. Which fields are set depends on Kind:
//
//	Create, Overwrite: Schema, NewFragments, Config (replaces the whole table)
//	Append:            NewFragments (ids assigned when the version is built)
//	Delete:            Deletions (fragments whose deletion vector changes), Removed
//	                   (fragments fully deleted), Predicate (for humans and repair)
type Operation struct {
	Kind         OpKind
	Schema       *Schema           `cbor:",omitempty"`
	NewFragments []Fragment        `cbor:",omitempty"`
	Config       map[string]string `cbor:",omitempty"`
	Deletions    []DeletionUpdate  `cbor:",omitempty"`
	Removed      []uint32          `cbor:",omitempty"`
	Predicate    string            `cbor:",omitempty"`
	// NewFragmentIDs are the ids Build gave NewFragments. A manifest embeds its
	// transaction without NewFragments and Schema (the manifest itself holds them; the
	// _txn record keeps the whole transaction), so conflict checks see these ids instead.
	NewFragmentIDs []uint32 `cbor:",omitempty"`
}

// DeletionUpdate gives fragment FragmentID a new deletion vector. Previous is the key of
// the deletion vector it replaces ("" = none), as read at the transaction's read version:
// the new vector contains every row the previous one did.
type DeletionUpdate struct {
	FragmentID uint32
	Previous   string
	New        DeletionFile
}

// NewTransactionID mints a transaction id (a ULID: sortable by creation time).
func NewTransactionID() string {
	return ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader).String()
}

// NewTransaction mints a transaction planned against readVersion.
func NewTransaction(readVersion uint64, op Operation) Transaction {
	return Transaction{ID: NewTransactionID(), ReadVersion: readVersion, Timestamp: time.Now().UnixNano(), Op: op}
}

// TouchedFragments lists the ids of existing fragments the transaction modifies or removes.
func (t *Transaction) TouchedFragments() []uint32 {
	var ids []uint32
	for _, d := range t.Op.Deletions {
		ids = append(ids, d.FragmentID)
	}
	return append(ids, t.Op.Removed...)
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

// EncodeTransaction frames the record of txn attempted as version v of table.
func EncodeTransaction(table string, v uint64, txn Transaction) ([]byte, error) {
	return frame(magicTxn, txnRecord{Table: table, Version: v, Txn: txn})
}

// DecodeTransaction decodes a transaction record read from key.
func DecodeTransaction(table, key string, b []byte) (uint64, Transaction, error) {
	var r txnRecord
	if err := unframe(magicTxn, b, &r); err != nil {
		return 0, Transaction{}, &ObjectError{Table: table, Key: key, Err: err}
	}
	return r.Version, r.Txn, nil
}
