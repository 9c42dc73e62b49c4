package wal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// FormatVersion is the shard manifest format this build writes and the newest it reads.
const FormatVersion uint16 = 1

// StatusActive is the only shard status today: the shard accepts claims.
const StatusActive = "active"

var (
	magicShardManifest = [4]byte{'S', 'H', 'W', 'M'}
	magicShardTomb     = [4]byte{'S', 'H', 'W', 'T'}
)

// ShardManifest is one version of a shard's state: who writes it (Epoch), what it has
// flushed (Generations), and where replay starts (Replay). Versions are immutable and
// claimed with put-if-absent; the highest version is the shard's state.
type ShardManifest struct {
	Format uint16 `cbor:"1,keyasint"` // FormatVersion of the build that wrote it
	Table  string `cbor:"2,keyasint"` // the table
	Shard  string `cbor:"3,keyasint"` // the shard id
	// Incarnation is the base table incarnation (manifest.Manifest.Incarnation) the shard
	// belongs to; a shard manifest of another incarnation describes a dropped table.
	Incarnation string `cbor:"4,keyasint,omitempty"`
	Version     uint64 `cbor:"5,keyasint"` // this version's number, from 1
	Epoch       uint64 `cbor:"6,keyasint"` // the writer epoch that owns the shard (from 1)
	// FencedThrough: every epoch at or below it has been fenced (a fence entry ends its
	// entries), so a claim fences only the epochs above it.
	FencedThrough uint64 `cbor:"7,keyasint,omitempty"`
	// Replay is the replay position: every entry at or before it has its rows in a
	// generation listed here or merged into the base table; replay starts after it.
	Replay Position `cbor:"8,keyasint"`
	// NextGeneration is the number the next flush takes (generations count from 1 and
	// continue across epochs).
	NextGeneration uint64 `cbor:"9,keyasint"`
	// Generations are the flushed generations, ascending, that were not yet known to be
	// merged when this version was written (a writer drops merged ones as it flushes).
	Generations []Generation `cbor:"10,keyasint,omitempty"`
	Status      string       `cbor:"11,keyasint"`           // StatusActive
	Written     int64        `cbor:"12,keyasint,omitempty"` // when it was written, Unix ns
	// SealedBytes is the bytes of every generation the shard ever flushed (1 …
	// Sealed()), merged ones included: the running total demand publishes.
	SealedBytes uint64 `cbor:"13,keyasint,omitempty"`
	// Key is the object this manifest was read from (not encoded).
	Key string `cbor:"-"`
}

// Generation is one sealed, flushed batch of a shard's rows: data files with the base
// table's field ids, which MergeWAL commits as base fragments.
type Generation struct {
	Generation uint64              `cbor:"1,keyasint"` // its number
	Epoch      uint64              `cbor:"2,keyasint"` // the writer epoch that flushed it
	Dir        string              `cbor:"3,keyasint"` // the directory holding its files
	Files      []manifest.DataFile `cbor:"4,keyasint"` // its data files, in row order
	Rows       int64               `cbor:"5,keyasint"` // rows in its files
	Bytes      int64               `cbor:"6,keyasint"` // bytes of its files
	FlushedAt  int64               `cbor:"7,keyasint"` // when its flush finished, Unix ms
	// Covers is the replay position its flush reached: its rows are those of the entries
	// after the previous generation's Covers up to this one.
	Covers Position `cbor:"8,keyasint"`
}

// Sealed is the highest generation the manifest lists or has listed (NextGeneration-1).
func (m *ShardManifest) Sealed() uint64 {
	if m.NextGeneration == 0 {
		return 0
	}
	return m.NextGeneration - 1
}

// Unmerged returns the generations above merged (a base version's watermark), ascending.
func (m *ShardManifest) Unmerged(merged uint64) []Generation {
	i, _ := slices.BinarySearchFunc(m.Generations, merged+1, func(g Generation, n uint64) int {
		switch {
		case g.Generation < n:
			return -1
		case g.Generation > n:
			return 1
		}
		return 0
	})
	return m.Generations[i:]
}

// clone is a deep enough copy to build the next version from.
func (m *ShardManifest) clone() *ShardManifest {
	c := *m
	c.Generations = slices.Clone(m.Generations)
	c.Key = ""
	return &c
}

func (m *ShardManifest) encode() ([]byte, error) { return manifest.Frame(magicShardManifest, m) }

// decodeShardManifest checks and decodes the object at key.
func decodeShardManifest(table, shard, key string, v uint64, b []byte) (*ShardManifest, error) {
	oerr := func(err error) error { return &ObjectError{Table: table, Shard: shard, Key: key, Err: err} }
	if len(b) >= 4 && [4]byte(b[:4]) == magicShardTomb {
		return nil, oerr(fmt.Errorf("%w: shard manifest version %d expired", ErrExpired, v))
	}
	var m ShardManifest
	if err := manifest.Unframe(magicShardManifest, b, &m); err != nil {
		if errors.Is(err, manifest.ErrFormatTooNew) {
			return nil, oerr(fmt.Errorf("%w: %v", ErrFormatTooNew, err))
		}
		return nil, oerr(fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	if m.Format > FormatVersion {
		return nil, oerr(fmt.Errorf("%w: shard manifest format %d, this build reads up to %d", ErrFormatTooNew, m.Format, FormatVersion))
	}
	if m.Table != table || m.Shard != shard || m.Version != v {
		return nil, oerr(fmt.Errorf("%w: describes table %q shard %s version %d", ErrCorrupt, m.Table, m.Shard, m.Version))
	}
	if m.Epoch == 0 || m.NextGeneration == 0 {
		return nil, oerr(fmt.Errorf("%w: epoch %d, next generation %d", ErrCorrupt, m.Epoch, m.NextGeneration))
	}
	m.Key = key
	return &m, nil
}

// ErrExpired: a shard manifest version was replaced by a tombstone (gc keeps the key
// taken, so no writer can put that version again).
var ErrExpired = errors.New("shard manifest version expired")

// LatestVersion returns the number of shard's newest manifest with one LIST (0, nil when
// there is none).
func LatestVersion(ctx context.Context, s store.Store, table, shard string) (uint64, error) {
	objs, err := s.List(ctx, ManifestDir(table, shard), 1)
	if err != nil {
		return 0, fmt.Errorf("table %q WAL shard %s: list manifests: %w", table, shard, err)
	}
	if len(objs) == 0 {
		return 0, nil
	}
	v, err := ParseManifestKey(table, shard, objs[0].Key)
	if err != nil {
		return 0, &ObjectError{Table: table, Shard: shard, Key: objs[0].Key, Err: fmt.Errorf("%w: %v", ErrCorrupt, err)}
	}
	return v, nil
}

// maxLoadAttempts bounds the LISTs LoadShard makes while gc keeps expiring the version
// the previous LIST named newest.
const maxLoadAttempts = 8

// LoadShard returns shard's newest manifest: one LIST and one GET. The newest version is
// never expired, so a version the LIST named newest that reads as a tombstone was
// superseded and expired between the LIST and the GET (gc keeps the newest few): LoadShard
// lists again. Errors: ErrNoShard (no manifest yet), ErrCorrupt, ErrFormatTooNew,
// ErrExpired (the newest version kept reading as a tombstone: each an *ObjectError naming
// the key), store errors.
func LoadShard(ctx context.Context, s store.Store, table, shard string) (*ShardManifest, error) {
	for attempt := 1; ; attempt++ {
		v, err := LatestVersion(ctx, s, table, shard)
		if err != nil {
			return nil, err
		}
		if v == 0 {
			return nil, fmt.Errorf("table %q WAL shard %s: %w", table, shard, ErrNoShard)
		}
		m, err := LoadShardVersion(ctx, s, table, shard, v)
		if errors.Is(err, ErrExpired) && attempt < maxLoadAttempts {
			continue
		}
		return m, err
	}
}

// LoadShardVersion reads shard manifest version v. Errors: store.ErrNotFound, ErrExpired,
// ErrCorrupt, ErrFormatTooNew.
func LoadShardVersion(ctx context.Context, s store.Store, table, shard string, v uint64) (*ShardManifest, error) {
	key := ManifestKey(table, shard, v)
	b, err := s.Get(ctx, key)
	if err != nil {
		return nil, &ObjectError{Table: table, Shard: shard, Key: key, Err: err}
	}
	return decodeShardManifest(table, shard, key, v, b)
}

// putShardManifest stores m as its version with put-if-absent: nil when it landed,
// store.ErrPreconditionFailed (wrapped) when the version was taken.
func putShardManifest(ctx context.Context, s store.Store, m *ShardManifest) error {
	m.Format = FormatVersion
	m.Written = time.Now().UnixNano()
	b, err := m.encode()
	if err != nil {
		return err
	}
	key := ManifestKey(m.Table, m.Shard, m.Version)
	if err := s.PutIfAbsent(ctx, key, b); err != nil {
		return &ObjectError{Table: m.Table, Shard: m.Shard, Key: key, Err: err}
	}
	m.Key = key
	return nil
}

// ExpireShardManifest replaces shard manifest version v (which must not be the newest)
// by a tombstone, keeping its key taken so no writer can put that version again (deleting
// it would let a fenced writer's flush land there). For gc.
func ExpireShardManifest(ctx context.Context, s store.Store, table, shard string, v uint64) error {
	b, err := manifest.Frame(magicShardTomb, struct {
		Table, Shard string
		Version      uint64
		Expired      int64
	}{table, shard, v, time.Now().UnixNano()})
	if err != nil {
		return err
	}
	key := ManifestKey(table, shard, v)
	if err := s.Put(ctx, key, b); err != nil {
		return &ObjectError{Table: table, Shard: shard, Key: key, Err: fmt.Errorf("expire: %w", err)}
	}
	return nil
}
