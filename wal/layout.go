package wal

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Dir is the prefix of every WAL object of table: <table>/_wal/.
func Dir(table string) string { return table + "/_wal/" }

// ShardDir is the prefix of shard's objects: <table>/_wal/<shard>/.
func ShardDir(table, shard string) string { return Dir(table) + shard + "/" }

// ManifestDir is the prefix of shard's manifests.
func ManifestDir(table, shard string) string { return ShardDir(table, shard) + "manifest/" }

// ManifestKey is the key of shard manifest version v (names sort newest first).
func ManifestKey(table, shard string, v uint64) string {
	return fmt.Sprintf("%s%020d", ManifestDir(table, shard), uint64(math.MaxUint64)-v)
}

// ParseManifestKey returns the version a shard manifest key names.
func ParseManifestKey(table, shard, key string) (uint64, error) {
	name, ok := strings.CutPrefix(key, ManifestDir(table, shard))
	if !ok || len(name) != 20 {
		return 0, fmt.Errorf("%q is not a shard manifest key of table %q shard %s", key, table, shard)
	}
	inv, err := strconv.ParseUint(name, 10, 64)
	if err != nil || inv == math.MaxUint64 {
		return 0, fmt.Errorf("%q is not a shard manifest key of table %q shard %s", key, table, shard)
	}
	return math.MaxUint64 - inv, nil
}

// EntriesDir is the prefix of shard's entries.
func EntriesDir(table, shard string) string { return ShardDir(table, shard) + "entries/" }

// EpochDir is the prefix of the entries writer epoch wrote.
func EpochDir(table, shard string, epoch uint64) string {
	return fmt.Sprintf("%s%020d/", EntriesDir(table, shard), epoch)
}

// EntryKey is the key of the entry at position pos of epoch.
func EntryKey(table, shard string, p Position) string {
	return fmt.Sprintf("%s%020d.arrows", EpochDir(table, shard, p.Epoch), p.Pos)
}

// ParseEntryKey returns the position an entry key names.
func ParseEntryKey(table, shard, key string) (Position, error) {
	rest, ok := strings.CutPrefix(key, EntriesDir(table, shard))
	bad := fmt.Errorf("%q is not a WAL entry key of table %q shard %s", key, table, shard)
	if !ok {
		return Position{}, bad
	}
	e, p, ok := strings.Cut(rest, "/")
	p, ok2 := strings.CutSuffix(p, ".arrows")
	if !ok || !ok2 || len(e) != 20 || len(p) != 20 {
		return Position{}, bad
	}
	epoch, err1 := strconv.ParseUint(e, 10, 64)
	pos, err2 := strconv.ParseUint(p, 10, 64)
	if err1 != nil || err2 != nil || epoch == 0 || pos == 0 {
		return Position{}, bad
	}
	return Position{Epoch: epoch, Pos: pos}, nil
}

// GenerationDir is a fresh directory for generation gen flushed by epoch: a new random
// suffix per flush attempt, so a failed flush never reuses a half-written directory.
func GenerationDir(table, shard string, gen, epoch uint64) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%sgen-%020d-%020d-%s", ShardDir(table, shard), gen, epoch, hex.EncodeToString(b[:]))
}

// ParseGenerationKey returns the generation and epoch of an object under a generation
// directory (ok false for any other key).
func ParseGenerationKey(table, shard, key string) (gen, epoch uint64, ok bool) {
	rest, found := strings.CutPrefix(key, ShardDir(table, shard)+"gen-")
	if !found || len(rest) < 42 || rest[20] != '-' || rest[41] != '-' {
		return 0, 0, false
	}
	g, err1 := strconv.ParseUint(rest[:20], 10, 64)
	e, err2 := strconv.ParseUint(rest[21:41], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return g, e, true
}

// SplitKey splits a key under table's WAL directory into its shard id and the rest of the
// key below the shard's directory ("manifest/…", "entries/…", "gen-…/…"); ok is false for
// a key outside <table>/_wal/<shard>/.
func SplitKey(table, key string) (shard, rest string, ok bool) {
	r, found := strings.CutPrefix(key, Dir(table))
	if !found {
		return "", "", false
	}
	shard, rest, found = strings.Cut(r, "/")
	if !found || shard == "" || rest == "" {
		return "", "", false
	}
	return shard, rest, true
}

// ShardID is the id of shard number i ("0", "1", …).
func ShardID(i int) string { return strconv.Itoa(i) }

// Position is a place in a shard's log: entry Pos (from 1) of writer epoch Epoch. Positions
// are ordered by epoch, then position; {e, 0} stands before every entry of epoch e.
type Position struct {
	Epoch uint64 `cbor:"1,keyasint"` // the writer epoch whose directory holds the entry
	Pos   uint64 `cbor:"2,keyasint"` // the position within it, from 1
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	return p.Epoch < q.Epoch || p.Epoch == q.Epoch && p.Pos < q.Pos
}

// String is "epoch/pos".
func (p Position) String() string { return fmt.Sprintf("%d/%d", p.Epoch, p.Pos) }
