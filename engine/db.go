package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/oklog/ulid/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/objstore"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// storeIDKey holds the store's identity, created once with put-if-absent. The catalog keys
// of a store's tables live under <prefix>/stores/<id>, so one etcd cluster can serve many
// stores and one store reached through different URLs keeps one set of pointers.
const storeIDKey = "_shale/store-id"

// Options configure a DB.
type Options struct {
	// Etcd is the catalog's etcd client. Nil runs without a catalog: readers see HEAD and
	// commits are not published (a read-only or single-process use of a bare store).
	Etcd *clientv3.Client
	// CatalogPrefix is the etcd key prefix (default "/shale").
	CatalogPrefix string
	// Write tunes data files (compression, rows per batch and per file).
	Write fragment.WriterOptions
	// Commit bounds the commit loop.
	Commit manifest.CommitOptions
	// Allocator for Arrow memory (default memory.DefaultAllocator).
	Allocator memory.Allocator
	// ScanParallelism is how many batches a scan reads and decodes at once (default 4).
	ScanParallelism int
	// WriteRetries bounds how often Delete re-plans after a retryable conflict (default 10).
	WriteRetries int
	// PublishTimeout bounds one publish to the catalog (default 30 s). A publish that runs
	// out leaves the version committed but unpublished and returns *UnknownError.
	PublishTimeout time.Duration
	// GroupTimeout is how long a writer waits for a pending multi-table group it meets
	// before aborting it (default 30 s; a group whose writer died aborts sooner, when its
	// lease expires).
	GroupTimeout time.Duration
	// BeforeFirstWrite, when set, runs once per DB and table before the first commit of a
	// write to that table (Append, Overwrite, Delete, Update, schema and config changes,
	// and DB.Commit for each member table before its group begins; not CreateTable), with the DB's store and catalog (nil without one). An error fails
	// that write and the hook runs again before the next one; concurrent first writes
	// wait for one run. recovery.Hook rolls forward crashed maintenance here.
	BeforeFirstWrite func(ctx context.Context, store objstore.Store, cat *catalog.Catalog, table string) error
	// WriteHoldAfter: a write (Append, Overwrite, Delete, Update) still running after this
	// long takes a catalog hold so garbage collection cannot delete its not yet committed
	// files, however short GC's grace period (default DefaultWriteHoldAfter; negative:
	// never). A multi-table write (PrepareAppend/PrepareDelete) is timed from its prepare
	// and holds until DB.Commit returns or Write.Release.
	WriteHoldAfter time.Duration
}

// DB is a set of tables in one store.
type DB struct {
	store   objstore.Store
	cat     *catalog.Catalog
	storeID string
	opts    Options
	// firstWrites gates Options.BeforeFirstWrite per table (see beforeFirstWrite).
	firstWrites writeGates
}

// Open opens the tables of store. With opts.Etcd it reads (or creates) the store's id and
// uses the catalog under <prefix>/stores/<id>. Cost: one GET (plus one put-if-absent the
// first time a store is used).
func Open(ctx context.Context, store objstore.Store, opts Options) (*DB, error) {
	if opts.CatalogPrefix == "" {
		opts.CatalogPrefix = "/shale"
	}
	if opts.Allocator == nil {
		opts.Allocator = memory.DefaultAllocator
	}
	if opts.ScanParallelism <= 0 {
		opts.ScanParallelism = 4
	}
	if opts.WriteRetries <= 0 {
		opts.WriteRetries = 10
	}
	if opts.PublishTimeout <= 0 {
		opts.PublishTimeout = 30 * time.Second
	}
	if opts.GroupTimeout <= 0 {
		opts.GroupTimeout = 30 * time.Second
	}
	db := &DB{store: store, opts: opts}
	if opts.Etcd != nil {
		id, err := storeID(ctx, store)
		if err != nil {
			return nil, err
		}
		db.storeID = id
		db.cat = catalog.New(opts.Etcd, strings.TrimSuffix(opts.CatalogPrefix, "/")+"/stores/"+id)
	}
	return db, nil
}

func storeID(ctx context.Context, s objstore.Store) (string, error) {
	b, err := s.Get(ctx, storeIDKey)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, objstore.ErrNotFound) {
		return "", fmt.Errorf("read store id: %w", err)
	}
	id := ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader).String()
	err = s.PutIfAbsent(ctx, storeIDKey, []byte(id))
	if err != nil && !errors.Is(err, objstore.ErrPreconditionFailed) {
		return "", fmt.Errorf("create store id: %w", err)
	}
	b, err = s.Get(ctx, storeIDKey)
	if err != nil {
		return "", fmt.Errorf("read store id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Store is the DB's object store.
func (db *DB) Store() objstore.Store { return db.store }

// Options returns the DB's options with defaults filled in (maintenance executors use
// them to write and commit as the DB's own writers do).
func (db *DB) Options() Options { return db.opts }

// Catalog is the etcd catalog, or nil without one.
func (db *DB) Catalog() *catalog.Catalog { return db.cat }

// CreateTable creates an empty table (version 1) and publishes it. Field ids are 0..n-1.
// Errors: manifest.ErrInvalidTableName, ErrTableExists.
func (db *DB) CreateTable(ctx context.Context, name string, schema *arrow.Schema) (*Table, error) {
	if err := manifest.ValidateTableName(name); err != nil {
		return nil, err
	}
	ids := make([]int32, schema.NumFields())
	for i := range ids {
		ids[i] = int32(i)
	}
	ms, err := manifest.NewSchema(schema, ids)
	if err != nil {
		return nil, err
	}
	if err := db.dropStalePointer(ctx, name); err != nil {
		return nil, err
	}
	txn := manifest.NewTransaction(0, manifest.Operation{Kind: manifest.OpCreate, Schema: &ms})
	m, stats, err := manifest.Commit(ctx, db.store, name, nil, txn, db.opts.Commit)
	if errors.Is(err, manifest.ErrConflict) {
		return nil, fmt.Errorf("%w: %q in %s", ErrTableExists, name, db.store.URL())
	}
	if err != nil {
		return nil, err
	}
	t := &Table{db: db, name: name, m: m}
	if _, err := t.publish(ctx, m, stats.Checksum); err != nil {
		return nil, err
	}
	return t, nil
}

// dropStalePointer removes a catalog pointer left for a table the store does not hold (its
// objects were deleted by hand, or the store was replaced). Without this, creating the
// table again would "publish" by finding the stale pointer already ahead.
func (db *DB) dropStalePointer(ctx context.Context, name string) error {
	if db.cat == nil {
		return nil
	}
	p, _, err := db.cat.Get(ctx, name)
	if errors.Is(err, catalog.ErrNoPointer) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := manifest.Head(ctx, db.store, name); !errors.Is(err, manifest.ErrTableNotFound) {
		return err // nil: the table exists; the commit reports it
	}
	if err := db.cat.Delete(ctx, name); err != nil {
		return fmt.Errorf("table %q: drop the stale catalog pointer to version %d: %w", name, p.Version, err)
	}
	return nil
}

// OpenTable opens a table at its published version (HEAD without a catalog, or when the
// table has never been published). Cost: one etcd read and one manifest GET.
// Errors: manifest.ErrInvalidTableName, manifest.ErrTableNotFound, corruption errors
// naming the manifest object.
func (db *DB) OpenTable(ctx context.Context, name string) (*Table, error) {
	if err := manifest.ValidateTableName(name); err != nil {
		return nil, err
	}
	m, err := db.latest(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Table{db: db, name: name, m: m}, nil
}

// OpenTableAt opens a read-only handle on version v of a table (time travel) without
// reading the published version first, so it works even when a later manifest is damaged.
// A prepared version of an aborted multi-table group counts as empty, so it reads as the
// nearest version below it that counts (Table.ContentVersion; see DB.loadAt).
// Errors: manifest.ErrInvalidTableName, manifest.ErrVersionNotFound (and
// manifest.ErrVersionExpired), corruption errors, catalog errors resolving a group.
func (db *DB) OpenTableAt(ctx context.Context, name string, v uint64) (*Table, error) {
	if err := manifest.ValidateTableName(name); err != nil {
		return nil, err
	}
	m, err := db.loadAt(ctx, name, v)
	if err != nil {
		return nil, err
	}
	return &Table{db: db, name: name, m: m, readOnly: true}, nil
}

// loadAt returns what reading version v of a table gives: v's manifest, or, when v is a
// prepared version of a multi-table group that aborted, the content of the nearest
// version below it that counts, under v's number (manifest.LoadCounted, with the DB's
// group resolver: a pending group is waited for, and aborted after
// Options.GroupTimeout, as writers do). Without a catalog there are no groups to resolve
// and every version reads as stored.
func (db *DB) loadAt(ctx context.Context, name string, v uint64) (*manifest.Manifest, error) {
	return manifest.LoadCounted(ctx, db.store, name, v, db.groups())
}

// DropTable deletes a table: its catalog pointer first (so no reader is directed to objects
// about to disappear), then its manifests, oldest first (so the table stops existing for bare-path
// readers), then every other object under its prefix. It returns the number of objects
// deleted. It refuses (ErrTableBusy) while the catalog shows a hold on the table: a
// running compaction, a write running longer than Options.WriteHoldAfter, or a pinned
// reader. A short write racing the drop is not detected: stop writers first. Errors:
// manifest.ErrInvalidTableName, manifest.ErrTableNotFound, ErrTableBusy, store and etcd
// errors.
func (db *DB) DropTable(ctx context.Context, name string) (int, error) {
	if err := manifest.ValidateTableName(name); err != nil {
		return 0, err
	}
	if db.cat != nil {
		holds, err := db.cat.Holds(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("drop table %q: %w", name, err)
		}
		if len(holds) > 0 {
			h := holds[0]
			return 0, fmt.Errorf("drop table %q: %w: %d hold(s) in the catalog, e.g. %s %s by %s since %s",
				name, ErrTableBusy, len(holds), h.Kind, h.ID, h.Holder, h.Started.Format(time.RFC3339))
		}
	}
	objs, err := db.store.List(ctx, name+"/", 0)
	if err != nil {
		return 0, fmt.Errorf("drop table %q: %w", name, err)
	}
	if len(objs) == 0 {
		// A pointer that outlived its objects (a publish that raced an earlier drop)
		// is all that is left: remove it.
		if db.cat != nil {
			if _, _, err := db.cat.Get(ctx, name); err == nil {
				if err := db.cat.Delete(ctx, name); err != nil {
					return 0, fmt.Errorf("drop table %q: %w", name, err)
				}
				return 0, nil
			}
		}
		return 0, fmt.Errorf("drop table: %w: %q in %s", manifest.ErrTableNotFound, name, db.store.URL())
	}
	if db.cat != nil {
		if err := db.cat.Delete(ctx, name); err != nil {
			return 0, fmt.Errorf("drop table %q: %w", name, err)
		}
	}
	versions := manifest.VersionsDir(name)
	slices.SortStableFunc(objs, func(a, b objstore.ObjectInfo) int {
		av, bv := strings.HasPrefix(a.Key, versions), strings.HasPrefix(b.Key, versions)
		switch {
		case av && !bv:
			return -1
		case bv && !av:
			return 1
		case av && bv:
			// Oldest version first (manifest keys sort newest first): a drop that dies
			// midway leaves a table whose HEAD still reads, not one whose newest
			// remaining version is an expired version's tombstone; dropping again
			// finishes it.
			return strings.Compare(b.Key, a.Key)
		}
		return 0
	})
	for i, o := range objs {
		if err := db.store.Delete(ctx, o.Key); err != nil {
			return i, fmt.Errorf("drop table %q: %w", name, err)
		}
	}
	return len(objs), nil
}

// latest loads the published version of a table, or HEAD if it has none.
func (db *DB) latest(ctx context.Context, name string) (*manifest.Manifest, error) {
	if db.cat != nil {
		p, _, err := db.cat.Get(ctx, name)
		switch {
		case err == nil:
			return manifest.LoadVerified(ctx, db.store, name, p.Version, p.Checksum)
		case !errors.Is(err, catalog.ErrNoPointer):
			return nil, fmt.Errorf("table %q: read published version: %w", name, err)
		}
	}
	return manifest.LoadHead(ctx, db.store, name)
}

// Tables lists the tables in the store.
func (db *DB) Tables(ctx context.Context) ([]string, error) { return manifest.Tables(ctx, db.store) }

// TableStatus compares a table's HEAD with its published version.
type TableStatus struct {
	Table     string
	Head      uint64
	Published uint64 // 0 = never published (or no catalog)
	Drift     uint64 // Head - Published when Head > Published
}

// Status reports HEAD and the published version of every table. HEAD below the published
// version is reported as ErrDrift (invariant 3) in the returned error, with the others'
// status still filled in.
func (db *DB) Status(ctx context.Context) ([]TableStatus, error) {
	names, err := db.Tables(ctx)
	if err != nil {
		return nil, err
	}
	if db.cat != nil {
		// Tables with a pointer but no versions in the store (a drop that raced a
		// publish) are reported too.
		ptrs, _, err := db.cat.Snapshot(ctx, nil)
		if err != nil {
			return nil, err
		}
		for n := range ptrs {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
	}
	var out []TableStatus
	var errs []error
	for _, n := range names {
		st := TableStatus{Table: n}
		// The pointer before HEAD: a commit and publish between the two reads then
		// shows as drift, never as HEAD below published.
		if db.cat != nil {
			p, _, err := db.cat.Get(ctx, n)
			if err != nil && !errors.Is(err, catalog.ErrNoPointer) {
				errs = append(errs, err)
				continue
			}
			st.Published = p.Version
		}
		if st.Head, err = manifest.Head(ctx, db.store, n); err != nil {
			if errors.Is(err, manifest.ErrTableNotFound) && st.Published > 0 {
				err = fmt.Errorf("table %q: %w: published version %d, no versions in the store (key %s)", n, ErrDrift, st.Published, db.cat.Key(n))
			}
			errs = append(errs, err)
			continue
		}
		if st.Published > st.Head {
			errs = append(errs, fmt.Errorf("table %q: %w: HEAD %d, published %d", n, ErrDrift, st.Head, st.Published))
		} else if st.Published > 0 {
			st.Drift = st.Head - st.Published
		}
		out = append(out, st)
	}
	return out, errors.Join(errs...)
}
