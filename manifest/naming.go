package manifest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrInvalidTableName is returned for table names that are empty, too long, or contain
// anything but ASCII letters, digits, '_', '-' and '.', or that start with '.' or '_'
// (which would collide with internal names) or '-' (which a command line reads as an
// option), or contain "..".
var ErrInvalidTableName = errors.New("invalid table name")

// ValidateTableName checks a table name. Errors wrap ErrInvalidTableName and quote the name.
func ValidateTableName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidTableName, name, why)
	}
	switch {
	case name == "":
		return bad("empty")
	case len(name) > 200:
		return bad("longer than 200 bytes")
	case strings.Contains(name, ".."):
		return bad(`contains ".."`)
	case name[0] == '.' || name[0] == '_':
		return bad("starts with '.' or '_'")
	case name[0] == '-':
		return bad("starts with '-', which a command line reads as an option")
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		case r == '/':
			return bad("contains '/'")
		case r == 0:
			return bad("contains a NUL byte")
		default:
			return bad(fmt.Sprintf("contains %q (allowed: ASCII letters, digits, '_', '-', '.')", r))
		}
	}
	return nil
}

// VersionsDir is the prefix holding a table's manifests.
func VersionsDir(table string) string { return table + "/_versions/" }

// TxnDir is the prefix holding a table's transaction records.
func TxnDir(table string) string { return table + "/_txn/" }

// DataDir is the prefix holding a table's fragment data files.
func DataDir(table string) string { return table + "/data" }

// DeletionsDir is the prefix holding a table's deletion vectors.
func DeletionsDir(table string) string { return table + "/_deletions" }

// IndicesDir is the prefix holding a table's index objects: <table>/_indices, each index
// under <txn-id>/<index-uuid>/.
func IndicesDir(table string) string { return table + "/_indices" }

// ManifestKey is the object key of version v's manifest. Names sort so that higher
// versions come first: <inv> is MaxUint64-v as 20 zero-padded digits.
func ManifestKey(table string, v uint64) string {
	return fmt.Sprintf("%s%020d.manifest", VersionsDir(table), uint64(math.MaxUint64)-v)
}

// TxnKey is the object key of the transaction record id attempted as version v.
func TxnKey(table string, v uint64, id string) string {
	return fmt.Sprintf("%s%d-%s.txn", TxnDir(table), v, id)
}

// ParseManifestKey returns the version a manifest key of table names (the inverse of
// ManifestKey). Errors: the key is not under table's _versions/ or is malformed.
func ParseManifestKey(table, key string) (uint64, error) {
	name, ok := strings.CutPrefix(key, VersionsDir(table))
	if !ok {
		return 0, fmt.Errorf("manifest key %q is not under %q", key, VersionsDir(table))
	}
	digits, ok := strings.CutSuffix(name, ".manifest")
	if !ok || len(digits) != 20 {
		return 0, fmt.Errorf("manifest key %q: malformed name", key)
	}
	inv, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("manifest key %q: %v", key, err)
	}
	return math.MaxUint64 - inv, nil
}

// TxnDataDir is the prefix (no trailing slash) under which transaction txnID writes its
// data files: <table>/data/<txnID>. Every new object a transaction introduces lives under
// a prefix named by its id (this, DeletionDir, and its _txn records), so garbage
// collection can fence the transaction by id before deleting them (invariant 15).
func TxnDataDir(table, txnID string) string { return DataDir(table) + "/" + txnID }

// NewDeletionKey names a new deletion vector of fragment frag written by transaction
// txnID: <table>/_deletions/<txnID>/<frag>-<random>.dv. The random part makes every write
// a new object (deletion vectors are immutable; a rebase writes another one).
func NewDeletionKey(table, txnID string, frag uint32) string {
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s/%s/%d-%s.dv", DeletionsDir(table), txnID, frag, hex.EncodeToString(b[:]))
}

// KeyTxn returns the transaction that wrote an object of table, from its key: data files
// under <table>/data/<id>/, deletion vectors under <table>/_deletions/<id>/, index objects
// under <table>/_indices/<id>/, and transaction records <table>/_txn/<N>-<id>.txn. ok is
// false for other keys, including data files and deletion vectors of the flat layout
// earlier builds wrote (<table>/data/<uuid>.arrow, <table>/_deletions/<frag>-<v>-<rand>.dv).
func KeyTxn(table, key string) (id string, ok bool) {
	rest, found := strings.CutPrefix(key, table+"/")
	if !found {
		return "", false
	}
	for _, dir := range []string{"data/", "_deletions/", "_indices/"} {
		if r, found := strings.CutPrefix(rest, dir); found {
			id, _, found := strings.Cut(r, "/")
			return id, found && validTxnID(id)
		}
	}
	if r, found := strings.CutPrefix(rest, "_txn/"); found {
		name, found := strings.CutSuffix(r, ".txn")
		if !found {
			return "", false
		}
		_, id, found := strings.Cut(name, "-")
		return id, found && validTxnID(id)
	}
	return "", false
}

// validTxnID reports whether id has the shape NewTransactionID mints (a ULID).
func validTxnID(id string) bool {
	if len(id) != 26 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
