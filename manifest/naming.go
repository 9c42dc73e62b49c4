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
// (which would collide with internal names), or contain "..".
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
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		case r == '/':
			return bad("contains '/'")
		case r == 0:
			return bad("contains a NUL byte")
		default:
			return bad(fmt.Sprintf("contains %q (allowed: letters, digits, '_', '-', '.')", r))
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

// ManifestKey is the object key of version v's manifest. Names sort so that higher
// versions come first: <inv> is MaxUint64-v as 20 zero-padded digits.
func ManifestKey(table string, v uint64) string {
	return fmt.Sprintf("%s%020d.manifest", VersionsDir(table), uint64(math.MaxUint64)-v)
}

// TxnKey is the object key of the transaction record id attempted as version v.
func TxnKey(table string, v uint64, id string) string {
	return fmt.Sprintf("%s%d-%s.txn", TxnDir(table), v, id)
}

// ParseManifestKey returns the version a manifest key names.
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

// NewDeletionKey names a new deletion vector of fragment frag written for version v:
// <table>/_deletions/<frag>-<v>-<random>.dv. The random part makes every write a new
// object (deletion vectors are immutable).
func NewDeletionKey(table string, frag uint32, v uint64) string {
	var b [8]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s/%d-%d-%s.dv", DeletionsDir(table), frag, v, hex.EncodeToString(b[:]))
}
