package engine

import (
	"context"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// LoadPublished returns the manifest that pointer p (read from db's catalog, say by one
// catalog.Snapshot of every table) names for table name, through the DB's manifest cache:
// what OpenTable reads after its own catalog read, so a version this DB has read before
// costs no store request. It is for callers that read many tables' pointers at once (the
// maintenance planner) instead of one etcd read per table. The manifest is shared and
// read-only. Errors: manifest.LoadVerified's (manifest.ErrVersionNotFound,
// corruption errors naming the object, a checksum that does not match p, store errors).
func (db *DB) LoadPublished(ctx context.Context, name string, p catalog.Pointer) (*manifest.Manifest, error) {
	if err := manifest.ValidateTableName(name); err != nil {
		return nil, err
	}
	return db.manifests.LoadVerified(ctx, db.store, name, p.Version, p.Checksum)
}
