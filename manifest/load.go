package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shale-db/shale/store"
)

// ErrTableNotFound: the table has no versions in the store.
var ErrTableNotFound = errors.New("table not found")

// ErrVersionNotFound: the table has no such version (never committed, or expired by GC).
var ErrVersionNotFound = errors.New("version not found")

// Load reads and verifies version v of table (one GET). Errors: ErrVersionNotFound,
// ErrVersionExpired (which also matches ErrVersionNotFound), ErrCorrupt / ErrFormatTooNew
// (as *ObjectError naming the key), store errors.
func Load(ctx context.Context, s store.Store, table string, v uint64) (*Manifest, error) {
	key, b, err := getVersion(ctx, s, table, v)
	if err != nil {
		return nil, err
	}
	if IsTombstone(b) {
		_, err := decodeTombstone(table, v, key, b)
		return nil, err
	}
	return DecodeManifest(table, v, key, b)
}

// LoadVerified is Load that also checks the object's CRC32C against checksum (from the
// published pointer). A mismatch is ErrCorrupt naming the key.
func LoadVerified(ctx context.Context, s store.Store, table string, v uint64, checksum uint32) (*Manifest, error) {
	m, err := Load(ctx, s, table, v)
	if err != nil {
		return nil, err
	}
	if m.checksum != checksum {
		return nil, &ObjectError{Table: table, Version: v, Key: m.Key(),
			Err: fmt.Errorf("%w: checksum %08x does not match the published pointer's %08x", ErrCorrupt, m.checksum, checksum)}
	}
	return m, nil
}

// Head returns the highest committed version of table with one LIST request (manifest names
// sort highest version first). Errors: ErrTableNotFound.
func Head(ctx context.Context, s store.Store, table string) (uint64, error) {
	objs, err := s.List(ctx, VersionsDir(table), 1)
	if err != nil {
		return 0, fmt.Errorf("table %q: find HEAD: %w", table, err)
	}
	if len(objs) == 0 {
		return 0, fmt.Errorf("%w: %q has no versions in %s", ErrTableNotFound, table, s.URL())
	}
	return ParseManifestKey(table, objs[0].Key)
}

// LoadHead reads the manifest of HEAD (one LIST + one GET). A table whose HEAD is a drop
// marker was dropped: *DroppedError (ErrTableNotFound, ErrTableDropped).
func LoadHead(ctx context.Context, s store.Store, table string) (*Manifest, error) {
	v, err := Head(ctx, s, table)
	if err != nil {
		return nil, err
	}
	m, err := Load(ctx, s, table, v)
	if err != nil {
		return nil, err
	}
	if m.Dropped() {
		return nil, &DroppedError{Table: table, Version: m.Version}
	}
	return m, nil
}

// Versions lists every version number of table with an object in the store, ascending.
// Expired versions keep a tombstone and are listed too; Load reports them as
// ErrVersionExpired.
func Versions(ctx context.Context, s store.Store, table string) ([]uint64, error) {
	objs, err := s.List(ctx, VersionsDir(table), 0)
	if err != nil {
		return nil, fmt.Errorf("table %q: list versions: %w", table, err)
	}
	out := make([]uint64, 0, len(objs))
	for _, o := range objs {
		v, err := ParseManifestKey(table, o.Key)
		if err != nil {
			continue // not a manifest (e.g. a stray temp name); verify reports it
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// Tables lists the tables in a store: the top-level directories that hold a _versions/,
// except those whose HEAD is a drop marker (dropped tables). One LIST of the store plus
// one GET per table (ListTables), in name order. Errors: as ListTables.
func Tables(ctx context.Context, s store.Store) ([]string, error) {
	heads, err := ListTables(ctx, s)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range heads {
		if !h.Dropped {
			out = append(out, h.Table)
		}
	}
	return out, nil
}

// getVersion reads the object of version v of table (one GET) and returns its key and
// bytes. Errors, as *ObjectError naming the key: ErrVersionNotFound, store errors.
func getVersion(ctx context.Context, s store.Store, table string, v uint64) (string, []byte, error) {
	key := ManifestKey(table, v)
	b, err := s.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return key, nil, &ObjectError{Table: table, Version: v, Key: key, Err: ErrVersionNotFound}
	}
	if err != nil {
		return key, nil, &ObjectError{Table: table, Version: v, Key: key, Err: err}
	}
	return key, b, nil
}
