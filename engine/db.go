package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/oklog/ulid/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/demand"
	"github.com/shale-db/shale/internal/turn"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// storeIDKey holds the store's identity, created once with put-if-absent. The catalog keys
// of a store's tables live under <prefix>/stores/<id>, so one etcd cluster can serve many
// stores and one store reached through different URLs keeps one set of pointers.
const storeIDKey = "_shale/store-id"

// StoreIDKey is the key of the store's identity object (a ULID written once with
// put-if-absent by the first Open with a catalog). A store without it has never been
// opened with a catalog, so no table of it is published in any; a reader that must not
// write can check for it and open without a catalog instead (Open would create it).
const StoreIDKey = storeIDKey

// Options configure a DB.
type Options struct {
	// Etcd is the catalog's etcd client. Nil runs without a catalog: readers see HEAD and
	// commits are not published (a read-only or single-process use of a bare store).
	Etcd *clientv3.Client
	// CatalogPrefix is the etcd key prefix (default "/shale").
	CatalogPrefix string
	// Write tunes the data files writes store (codec, rows per batch and per file; see
	// WriteOptions). Compaction rewrites with the same options.
	Write WriteOptions
	// Commit bounds the commit loop. On a local (file://) store, Commit.Turn defaults to
	// the store's turn locks (internal/turn): a handle that met other writers takes the
	// table's turn for each commit attempt, so writer processes on one machine take turns
	// instead of losing races to each other (a hint for speed; outcomes are decided by
	// put-if-absent and transaction ids as always).
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
	BeforeFirstWrite func(ctx context.Context, s store.Store, cat *catalog.Catalog, table string) error
	// IndexSidecars, when set, stores a recovery sidecar for every index build before it
	// writes its first object (recovery.IndexSidecars; the CLI sets it).
	IndexSidecars IndexSidecars
	// IndexIdleTimeout cancels an index build that completes no storage read or write for
	// this long (default DefaultIndexIdleTimeout); IndexCheckInterval is how often that is
	// checked (default DefaultIndexCheckInterval, at most a quarter of the timeout).
	IndexIdleTimeout, IndexCheckInterval time.Duration
	// WriteHoldAfter: a write (Append, Overwrite, Delete, Update) still running after this
	// long takes a catalog hold so garbage collection cannot delete its not yet committed
	// files, however short GC's grace period (default DefaultWriteHoldAfter; negative:
	// never). A multi-table write (PrepareAppend/PrepareDelete) is timed from its prepare
	// and holds until DB.Commit returns or Write.Release.
	WriteHoldAfter time.Duration
	// OnWALFlush, when set, is called after each flush of a WAL writer of this DB with
	// the shard manifest the flush wrote (on the flushing goroutine: it must not block),
	// e.g. to publish demand.
	OnWALFlush func(table string, m *wal.ShardManifest)
	// OnWALMerged, when set, is called after each MergeWAL that committed and published,
	// once per shard with its new merged watermark (it must not block), e.g. to publish
	// demand.
	OnWALMerged func(table, shard string, merged uint64)
	// MergeSidecars, when set, stores a recovery sidecar for every WAL merge before it
	// commits (recovery.MergeSidecars; the CLI sets it).
	MergeSidecars MergeSidecars
	// ManifestCacheBytes bounds the DB's cache of decoded published manifests
	// (manifest.Cache, keyed by table, version and checksum): 0 is
	// manifest.DefaultCacheBytes (64 MiB), negative turns it off. With it, opening a table
	// at a published version this DB has read before costs the catalog read alone.
	ManifestCacheBytes int64
}

// DB is a set of tables in one store, with the etcd catalog that publishes them when
// Options.Etcd is set. Open one per store and share it: a DB is safe for concurrent use
// by any number of goroutines, and any number of DBs in other processes and machines may
// open the same store and etcd at once. A DB holds no resources of its own to close; close
// the store and the etcd client it was opened with when done.
type DB struct {
	store   store.Store
	cat     *catalog.Catalog
	storeID string
	opts    Options
	// firstWrites gates Options.BeforeFirstWrite per table (see beforeFirstWrite).
	firstWrites writeGates
	// indexes caches index lookups and zone maps (immutable objects).
	indexes indexCache
	// wals are the WAL writers open in this DB (Table.WAL), read by scans.
	wals walRegistry
	// demand holds the WAL demand records beside the catalog (nil without one); pub
	// publishes flushes and merges to them off the write path.
	demand *demand.Records
	pub    *demand.Publisher
	// manifests caches decoded published manifests (nil: off).
	manifests *manifest.Cache
}

// Open opens the tables of store s. With opts.Etcd it reads (or creates) the store's id and
// uses the catalog under <prefix>/stores/<id>. Cost: one GET (plus one put-if-absent the
// first time a store is used); no etcd request; none at all without opts.Etcd. The DB
// does not own s or the etcd client: close them after the last use of the DB.
// Errors: store errors reading or creating the store id (*store.Error).
func Open(ctx context.Context, s store.Store, opts Options) (*DB, error) {
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
	if opts.Commit.Turn == nil {
		if r, ok := s.(rootedStore); ok {
			opts.Commit.Turn = turn.New(filepath.Join(r.Root(), store.TempDir, "turns"))
		}
	}
	db := &DB{store: s, opts: opts}
	if opts.ManifestCacheBytes >= 0 {
		db.manifests = manifest.NewCache(opts.ManifestCacheBytes)
	}
	if opts.Etcd != nil {
		id, err := storeID(ctx, s)
		if err != nil {
			return nil, err
		}
		db.storeID = id
		prefix := strings.TrimSuffix(opts.CatalogPrefix, "/") + "/stores/" + id
		db.cat = catalog.New(opts.Etcd, prefix)
		db.demand = demand.New(opts.Etcd, prefix)
		db.pub = demand.NewPublisher(db.demand, demand.PublisherOptions{})
	}
	return db, nil
}

// rootedStore is implemented by the local store (its directory).
type rootedStore interface{ Root() string }

func storeID(ctx context.Context, s store.Store) (string, error) {
	b, err := s.Get(ctx, storeIDKey)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("read store id: %w", err)
	}
	id := ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader).String()
	err = s.PutIfAbsent(ctx, storeIDKey, []byte(id))
	if err != nil && !errors.Is(err, store.ErrPreconditionFailed) {
		return "", fmt.Errorf("create store id: %w", err)
	}
	b, err = s.Get(ctx, storeIDKey)
	if err != nil {
		return "", fmt.Errorf("read store id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ManifestCache reports the DB's manifest cache counters (zero when it is off).
func (db *DB) ManifestCache() manifest.CacheStats { return db.manifests.Stats() }

// Store is the DB's object store.
func (db *DB) Store() store.Store { return db.store }

// Options returns the DB's options with defaults filled in (maintenance executors use
// them to write and commit as the DB's own writers do).
func (db *DB) Options() Options { return db.opts }

// Catalog is the etcd catalog, or nil without one.
func (db *DB) Catalog() *catalog.Catalog { return db.cat }

// CreateOption configures CreateTable.
type CreateOption func(*createOptions)

type createOptions struct {
	config map[string]string
}

// WithConfig gives the table this configuration (key → value, as UpdateConfig sets it,
// and checked the same way) in its first version, so that no writer ever sees it without
// (a codec chosen for the table applies to its first write, whoever makes it).
func WithConfig(config map[string]string) CreateOption {
	return func(o *createOptions) { o.config = config }
}

// CreateTable creates an empty table and publishes it: version 1 for a new name; for the
// name of a dropped table, the version after its drop marker, as a new incarnation (see
// DropTable), so no version number of the dropped table is used again and none of its
// versions can become part of this one. Field ids are 0..n-1.
// Errors: manifest.ErrInvalidTableName, ErrInvalidConfig (WithConfig), ErrTableExists.
func (db *DB) CreateTable(ctx context.Context, name string, schema *arrow.Schema, opts ...CreateOption) (*Table, error) {
	if err := manifest.ValidateTableName(name); err != nil {
		return nil, err
	}
	var co createOptions
	for _, o := range opts {
		o(&co)
	}
	cfg, err := planConfig(co.config, nil)
	if err != nil {
		return nil, fmt.Errorf("table %q: %w", name, err)
	}
	ids := make([]int32, schema.NumFields())
	for i := range ids {
		ids[i] = int32(i)
	}
	ms, err := manifest.NewSchema(schema, ids)
	if err != nil {
		return nil, err
	}
	exists := func() error { return fmt.Errorf("%w: %q in %s", ErrTableExists, name, db.store.URL()) }
	for attempt := 1; ; attempt++ {
		// On top of the drop marker if the table was dropped; from nothing if the name is new.
		var read *manifest.Manifest
		rec, err := manifest.HeadRecord(ctx, db.store, name)
		switch {
		case errors.Is(err, manifest.ErrTableNotFound):
			if err := db.dropStalePointer(ctx, name); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err
		case rec.Manifest == nil || !rec.Manifest.Dropped():
			return nil, exists()
		default:
			read = rec.Manifest
		}
		var rv uint64
		if read != nil {
			rv = read.Version
		}
		txn := manifest.NewTransaction(rv, manifest.Operation{Kind: manifest.OpCreate, Schema: &ms, Config: cfg.Config})
		m, stats, err := manifest.Commit(ctx, db.store, name, read, txn, db.opts.Commit)
		if errors.Is(err, manifest.ErrConflict) {
			return nil, exists()
		}
		if err != nil {
			return nil, err
		}
		if read == nil {
			// Version 1 was free. If the name was created, written and dropped between
			// our look and our put, it was free because the drop deleted it: our version
			// is below the drop marker and belongs to no table. Create again, on the
			// marker.
			if err := manifest.CheckLive(ctx, db.store, m); errors.Is(err, manifest.ErrTableDropped) && attempt < 3 {
				continue
			} else if err != nil {
				return nil, err
			}
		}
		t := &Table{db: db, name: name, m: m}
		if _, err := t.publish(ctx, m, stats.Checksum); err != nil {
			return nil, err
		}
		return t, nil
	}
}

// dropStalePointer removes a catalog pointer left for a table the store holds no version
// of (its objects were deleted by hand, or the store was replaced). Without this, creating
// the table again would "publish" by finding the stale pointer already ahead. (The pointer
// of a dropped table, whose drop marker stays, is replaced by the new incarnation's.)
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
// nearest version below it that counts (Table.ContentVersion; see DB.loadAt). A version
// of an earlier incarnation of the table (it was dropped, and created again or not) or a
// drop marker is not a version of the table: ErrVersionNotFound (told from HEAD, when
// HEAD reads).
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
	if head, err := manifest.HeadRecord(ctx, db.store, name); err == nil && head.Manifest != nil {
		if err := ofIncarnation(head.Manifest, m); err != nil {
			return nil, err
		}
	}
	return &Table{db: db, name: name, m: m, readOnly: true}, nil
}

// ofIncarnation checks that version m is a version of the incarnation of ref (a live
// version, or the drop marker that ended the table): m is not a drop marker, ref is not
// one (then the table is dropped), and both are of one incarnation. Errors:
// ErrVersionNotFound naming the version, saying which.
func ofIncarnation(ref, m *manifest.Manifest) error {
	var why string
	switch {
	case m.Dropped():
		why = "it is the drop marker of a dropped incarnation of the table"
	case ref.Dropped():
		why = fmt.Sprintf("the table was dropped at version %d", ref.Version)
	case !manifest.SameIncarnation(ref, m):
		why = "it belongs to an earlier incarnation of the table, since dropped"
	default:
		return nil
	}
	return &manifest.ObjectError{Table: m.Table, Version: m.Version, Key: m.Key(), Err: fmt.Errorf("%w: %s", manifest.ErrVersionNotFound, why)}
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

// DropTable drops a table. It refuses (ErrTableBusy) while the catalog shows a hold on
// the table: a running compaction, a write running longer than Options.WriteHoldAfter, or
// a pinned reader. Otherwise:
//
//  1. it lists the table's objects;
//  2. it commits a drop marker (manifest.OpDrop: an empty version) on top of HEAD. This is
//     the fence (invariants 15 and 16): every write of the table still in flight meets it
//     in its commit loop and fails with ErrTableDropped, and one whose version number the
//     deletes below free cannot publish it (the pointer is gone, or names a later
//     incarnation);
//  3. it removes the catalog pointer (unless it already names a later incarnation);
//  4. it deletes the objects listed in 1, manifests oldest first, then the others: every
//     version below the marker. The marker stays, so the table's version numbers are
//     never used again: CreateTable of the name builds a new incarnation on it. So do
//     the WAL shard manifests (_wal/<shard>/manifest/, small), for the same reason: a
//     WAL writer of the dropped table still running puts its next shard manifest at the
//     version after its own last one, which must stay taken; the new incarnation's
//     first claim of the shard then takes the next version and a higher epoch, which
//     fences that writer (package wal).
//
// Objects written after the listing by writers still running belong to no version that
// can be published; garbage collection deletes them (the marker fences their writers). A drop
// that dies midway is finished by dropping again: a table whose HEAD is a drop marker is
// dropped already, and dropping it deletes what is left below the marker (and a pointer
// left behind); it reports manifest.ErrTableNotFound (a *manifest.DroppedError) only when
// nothing was left. It returns the number of objects deleted.
// Errors: manifest.ErrInvalidTableName, manifest.ErrTableNotFound, ErrTableBusy, store
// and etcd errors.
func (db *DB) DropTable(ctx context.Context, name string) (int, error) {
	return db.dropTable(ctx, name, 0)
}

// dropTable is DropTable; with at > 0, only while HEAD is version at (DropTableAt).
func (db *DB) dropTable(ctx context.Context, name string, at uint64) (int, error) {
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
	// The listing comes before HEAD is read: every object listed was written before the
	// marker (read or committed below) existed, so none belongs to a later incarnation.
	objs, err := db.store.List(ctx, name+"/", 0)
	if err != nil {
		return 0, fmt.Errorf("drop table %q: %w", name, err)
	}
	marker, finishing, err := db.dropMarker(ctx, name, at)
	if err != nil {
		return 0, err
	}
	removedPointer := false
	if db.cat != nil {
		var ref catalog.Pointer
		if marker != nil {
			ref = catalog.Pointer{Version: marker.Version, ManifestKey: marker.Key(), Incarnation: marker.Incarnation, Since: marker.IncarnationSince}
		} else {
			// No manifest at all (what a drop of an older build, or deletion by hand,
			// leaves): any pointer is stale.
			ref = catalog.Pointer{Version: math.MaxUint64}
		}
		if removedPointer, err = db.cat.DeleteDropped(ctx, name, ref); err != nil {
			return 0, fmt.Errorf("drop table %q: %w", name, err)
		}
	}
	var doomed []store.ObjectInfo
	for _, o := range objs {
		if marker == nil || belowMarker(name, o.Key, marker.Version) {
			doomed = append(doomed, o)
		}
	}
	if len(doomed) == 0 && !removedPointer && (finishing || marker == nil) {
		if marker == nil {
			return 0, fmt.Errorf("drop table: %w: %q in %s", manifest.ErrTableNotFound, name, db.store.URL())
		}
		return 0, &manifest.DroppedError{Table: name, Version: marker.Version, Detail: "nothing is left to delete"}
	}
	versions := manifest.VersionsDir(name)
	slices.SortStableFunc(doomed, func(a, b store.ObjectInfo) int {
		av, bv := strings.HasPrefix(a.Key, versions), strings.HasPrefix(b.Key, versions)
		switch {
		case av && !bv:
			return -1
		case bv && !av:
			return 1
		case av && bv:
			return strings.Compare(b.Key, a.Key) // oldest version first (keys sort newest first)
		}
		return 0
	})
	for i, o := range doomed {
		if err := db.store.Delete(ctx, o.Key); err != nil {
			return i, fmt.Errorf("drop table %q: %w", name, err)
		}
	}
	return len(doomed), nil
}

// dropMarker returns the table's drop marker: the one its HEAD already is (finishing is
// then true: an earlier drop committed it), or one committed now on top of HEAD. A table
// with no manifest (objects only) has none: nil. With at > 0 the marker must be version
// at+1, committed on HEAD at (ErrTableChanged otherwise). Errors: commit and store errors.
func (db *DB) dropMarker(ctx context.Context, name string, at uint64) (*manifest.Manifest, bool, error) {
	opts := db.opts.Commit
	opts.Groups = db.groups()
	if at > 0 {
		return db.dropMarkerAt(ctx, name, at, opts)
	}
	for attempt := 1; ; attempt++ {
		rec, err := manifest.HeadRecord(ctx, db.store, name)
		if errors.Is(err, manifest.ErrTableNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("drop table %q: %w", name, err)
		}
		if rec.Manifest == nil {
			return nil, false, fmt.Errorf("drop table %q: HEAD %d is expired (%s): %w", name, rec.Version,
				manifest.ManifestKey(name, rec.Version), manifest.ErrVersionExpired)
		}
		if rec.Manifest.Dropped() {
			return rec.Manifest, true, nil
		}
		read, err := manifest.LoadCounted(ctx, db.store, name, rec.Version, opts.Groups)
		if err != nil {
			return nil, false, fmt.Errorf("drop table %q: %w", name, err)
		}
		txn := manifest.NewTransaction(read.Version, manifest.Operation{Kind: manifest.OpDrop})
		m, _, err := manifest.Commit(ctx, db.store, name, read, txn, opts)
		switch {
		case err == nil:
			return m, false, nil
		case errors.Is(err, manifest.ErrTableDropped) && attempt < 3:
			continue // another drop committed its marker first: finish that one
		}
		return nil, false, fmt.Errorf("drop table %q: commit the drop marker: %w", name, err)
	}
}

// belowMarker reports whether key, an object of table, goes with a drop whose marker is
// version marker: everything except the marker and the versions and transaction records
// above it (a Create of a new incarnation in flight writes its record before its
// version), and the WAL shard manifests (see DropTable).
func belowMarker(table, key string, marker uint64) bool {
	if _, rest, ok := wal.SplitKey(table, key); ok && strings.HasPrefix(rest, "manifest/") {
		return false
	}
	if v, err := manifest.ParseManifestKey(table, key); err == nil {
		return v < marker
	}
	if rest, ok := strings.CutPrefix(key, manifest.TxnDir(table)); ok {
		if n, _, ok := strings.Cut(rest, "-"); ok {
			if v, err := strconv.ParseUint(n, 10, 64); err == nil {
				return v < marker
			}
		}
	}
	return true
}

// latest loads the published version of a table, or HEAD if it has none.
func (db *DB) latest(ctx context.Context, name string) (*manifest.Manifest, error) {
	if db.cat != nil {
		p, _, err := db.cat.Get(ctx, name)
		switch {
		case err == nil:
			return db.manifests.LoadVerified(ctx, db.store, name, p.Version, p.Checksum)
		case !errors.Is(err, catalog.ErrNoPointer):
			return nil, fmt.Errorf("table %q: read published version: %w", name, err)
		}
	}
	return manifest.LoadHead(ctx, db.store, name)
}

// Tables lists the tables in the store in name order (a dropped table, whose HEAD is its
// drop marker, is not one). Cost: one LIST plus one GET per table. Errors: store errors
// (a HEAD that does not decode is listed; verify reports it).
func (db *DB) Tables(ctx context.Context) ([]string, error) { return manifest.Tables(ctx, db.store) }

// TableStatus compares a table's HEAD with its published version.
type TableStatus struct {
	Table     string // table name
	Head      uint64 // the highest version committed in the store
	Published uint64 // the version the catalog directs readers to; 0 = never published (or no catalog)
	Drift     uint64 // Head - Published when Head > Published: committed work not yet published
}

// Status reports HEAD and the published version of every table. HEAD below the published
// version is reported as ErrDrift (invariant 3) in the returned error, with the others'
// status still filled in; so is a pointer left for a dropped table (ErrTableDropped: a
// drop that died before removing it; dropping again finishes it).
func (db *DB) Status(ctx context.Context) ([]TableStatus, error) {
	heads, err := manifest.ListTables(ctx, db.store)
	if err != nil {
		return nil, err
	}
	var names []string
	dropped := map[string]uint64{} // dropped table -> its marker's version
	for _, h := range heads {
		if h.Dropped {
			dropped[h.Table] = h.Head
		} else {
			names = append(names, h.Table)
		}
	}
	if db.cat != nil {
		// Tables with a pointer but no versions in the store (a drop that raced a
		// publish), or only a drop marker, are reported too.
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
		if m, ok := dropped[n]; ok && m == st.Head {
			errs = append(errs, fmt.Errorf("table %q: %w at version %d, but the catalog still publishes version %d (key %s): drop it again to finish",
				n, ErrTableDropped, st.Head, st.Published, db.cat.Key(n)))
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
