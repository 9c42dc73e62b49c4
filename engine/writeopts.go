package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// WriteOptions tune how writes store data files (Options.Write): the codec, rows per
// record batch (the unit of a range read and of statistics pruning) and rows per data file.
// Zero values take the defaults (CompressionZstd, manifest.DefaultMaxRowsPerBatch = 65,536
// rows, manifest.DefaultMaxRowsPerFile = 1,048,576 rows); manifest.WriteOptions lists every
// field. It never changes which rows a table holds, only how they are laid out.
//
//	db, err := engine.Open(ctx, st, engine.Options{
//		Etcd:  cli.Etcd(),
//		Write: engine.WriteOptions{Compression: engine.CompressionLZ4, MaxRowsPerBatch: 8192},
//	})
type WriteOptions = manifest.WriteOptions

// Compression names a data file codec (WriteOptions.Compression); it is
// manifest.Compression.
type Compression = manifest.Compression

// The data file codecs. The zero value ("") means CompressionZstd.
const (
	CompressionZstd = manifest.CompressionZstd // ZSTD, the default: smallest files
	CompressionLZ4  = manifest.CompressionLZ4  // LZ4 frame: faster, larger
	CompressionNone = manifest.CompressionNone // uncompressed
)

// Table configuration keys (UpdateConfig) choosing how the table's writes store data files;
// they take precedence over Options.Write for that table, for appends, overwrites, updates,
// and compaction's rewrites. Values are checked when set: UpdateConfig refuses a bad one
// with ErrInvalidConfig.
const (
	// ConfigCompression is the data file codec: "zstd" (the default), "lz4" or "none".
	ConfigCompression = "shale.write.compression"
	// ConfigCompressionLevel is the ZSTD level, 1 (fastest, the default) to 22 (smallest;
	// levels map to the encoder's four speeds: 1–2, 3–5, 6–9, 10–22). LZ4 and none ignore it.
	ConfigCompressionLevel = "shale.write.compression_level"
)

// TableWriteOptions returns base with the table configuration's write keys applied
// (ConfigCompression, ConfigCompressionLevel). Errors: ErrInvalidConfig naming the key
// for a value this build does not understand.
func TableWriteOptions(base WriteOptions, config map[string]string) (WriteOptions, error) {
	if v, ok := config[ConfigCompression]; ok {
		c := Compression(v)
		switch c {
		case CompressionZstd, CompressionLZ4, CompressionNone:
		default:
			return base, fmt.Errorf("%w: %s = %q (want zstd, lz4 or none)", ErrInvalidConfig, ConfigCompression, v)
		}
		base.Compression = c
	}
	if v, ok := config[ConfigCompressionLevel]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > fragment.MaxZstdLevel {
			return base, fmt.Errorf("%w: %s = %q (want an integer from 1 to %d)", ErrInvalidConfig, ConfigCompressionLevel, v, fragment.MaxZstdLevel)
		}
		base.CompressionLevel = n
	}
	return base, nil
}

// writeOptions are the WriteOptions of this table's writes at its version.
func (t *Table) writeOptions() (WriteOptions, error) {
	o, err := TableWriteOptions(t.db.opts.Write, t.m.Config)
	if err != nil {
		return o, fmt.Errorf("table %q version %d: %w", t.name, t.m.Version, err)
	}
	return o, nil
}

// WriteOption tunes one write (Append, AppendRecord, Overwrite, Delete, Update,
// PrepareAppend, PrepareDelete).
type WriteOption func(*writeOptions)

type writeOptions struct {
	idempotencyKey string
}

// WithIdempotencyKey gives the write an idempotency key (at most
// manifest.MaxIdempotencyKeyLen bytes): if a write with the same key committed already
// (say, the same import run again after its client crashed between its commit and its
// answer), this one commits nothing and returns that write's version, publishing it, with
// CommitResult.Duplicate set. The table remembers the keys of its newest keyed writes
// (manifest.ConfigIdempotencyKeys, default manifest.DefaultIdempotencyKeys), and any key
// among versions committed after the write's read version. An Append or Overwrite whose
// key HEAD already remembers returns before reading its input or writing anything; one
// that finds the key only at its commit (two runs at once) deletes the data files it
// wrote. This is Delta Lake's application transaction (txn action) idea, keyed per write.
func WithIdempotencyKey(key string) WriteOption {
	return func(o *writeOptions) { o.idempotencyKey = key }
}

// ErrInvalidOption: a write option with a bad value (an idempotency key too long).
var ErrInvalidOption = errors.New("invalid write option")

func collectWriteOptions(table string, opts []WriteOption) (writeOptions, error) {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	if len(o.idempotencyKey) > manifest.MaxIdempotencyKeyLen {
		return o, fmt.Errorf("table %q: %w: idempotency key of %d bytes, at most %d", table, ErrInvalidOption, len(o.idempotencyKey), manifest.MaxIdempotencyKeyLen)
	}
	return o, nil
}

// newTxn mints the transaction of a write planned on this handle's version.
func (t *Table) newTxn(kind manifest.OpKind, o writeOptions) manifest.Transaction {
	txn := manifest.NewTransaction(t.m.Version, manifest.Operation{Kind: kind})
	txn.IdempotencyKey = o.idempotencyKey
	return txn
}

// duplicate is the result of a write whose idempotency key committed already as
// dup.Version: that version is published (a no-op when the pointer is past it) and the
// handle moves to the latest version.
func (t *Table) duplicate(ctx context.Context, dup *manifest.DuplicateError) (CommitResult, error) {
	res := CommitResult{Version: dup.Version, Duplicate: true, DuplicateTxn: dup.TxnID}
	m, err := manifest.Load(ctx, t.db.store, t.name, dup.Version)
	switch {
	case errors.Is(err, manifest.ErrVersionExpired):
		// Expired versions are below the published one.
		res.Published = t.db.cat != nil
	case err != nil:
		return res, fmt.Errorf("table %q: idempotency key committed as version %d: %w", t.name, dup.Version, err)
	default:
		also, err := t.publish(ctx, m, m.Checksum())
		if errors.Is(err, ErrTableDropped) {
			return CommitResult{}, err // that version belongs to no table (any more)
		}
		if err != nil {
			return res, &UnknownError{Table: t.name, Txn: m.Txn, Committed: true, Version: m.Version, Err: err}
		}
		res.Published, res.AlsoPublished = t.db.cat != nil, also
	}
	if latest, err := t.db.latest(ctx, t.name); err == nil {
		t.m = latest
	}
	return res, nil
}

// keyCommitted returns the Duplicate result of a keyed write whose idempotency key this
// handle's version (HEAD, just read) remembers already, with ok true: a write run again
// after it committed (a client that retried, an import run twice) reads none of its input
// and writes nothing. A key that commits after this check is still found by the commit
// loop (manifest.DuplicateError), and the files written meanwhile are deleted
// (settleWrite). Errors: as duplicate (the publish of that version).
func (t *Table) keyCommitted(ctx context.Context, o writeOptions) (res CommitResult, ok bool, err error) {
	rec, ok := t.m.IdempotencyVersion(o.idempotencyKey)
	if !ok {
		return CommitResult{}, false, nil
	}
	res, err = t.duplicate(ctx, &manifest.DuplicateError{Table: t.name, Key: o.idempotencyKey, Version: rec.Version, TxnID: rec.TxnID})
	return res, true, err
}

// settleTimeout bounds how long settleKeyed looks for a write's idempotency key after
// the write's own context ended.
const settleTimeout = 5 * time.Second

// settleKeyed decides a keyed write that failed (err not nil, and not Unknown) by its
// idempotency key: if the key committed already (a write run again after its client
// crashed), the write took effect, and the result is that version as a Duplicate, even
// when this run failed before reaching its commit loop (a failing first-write hook, a
// store error writing its files, bad input). The key is looked for in HEAD's remembered
// keys (one GET when the handle is current); if that read fails, the outcome is Unknown
// (Table.Retry of txn then decides). A write whose context ended (the caller gave up,
// or was interrupted) still gets this answer: the key is looked for under a fresh
// context of settleTimeout, as a publish decides on its goal after its deadline, so that
// an interrupted write is Rejected (or a Duplicate) rather than Unknown. Unkeyed writes
// and successes pass through.
func (t *Table) settleKeyed(ctx context.Context, txn manifest.Transaction, res CommitResult, err error) (CommitResult, error) {
	key := txn.IdempotencyKey
	if err == nil || key == "" || OutcomeOf(err) != Rejected || errors.Is(err, ErrInvalidOption) ||
		errors.Is(err, ErrTableDropped) || errors.Is(err, manifest.ErrTableNotFound) {
		return res, err
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
	}
	head, lerr := manifest.CatchUp(ctx, t.db.store, t.name, t.m, t.db.groups())
	if lerr != nil {
		// txn itself is decided (it never committed); only the key is open. Retry must
		// not commit txn (planned or not), so it gets the key alone (UnknownError).
		keyOnly := manifest.Transaction{ID: txn.ID, ReadVersion: txn.ReadVersion, Timestamp: txn.Timestamp, IdempotencyKey: key}
		return res, &UnknownError{Table: t.name, Txn: keyOnly,
			Err: fmt.Errorf("%w (and whether idempotency key %q committed earlier could not be read: %w)", err, key, lerr)}
	}
	if rec, ok := head.IdempotencyVersion(key); ok && rec.TxnID != txn.ID {
		return t.duplicate(ctx, &manifest.DuplicateError{Table: t.name, Key: key, Version: rec.Version, TxnID: rec.TxnID})
	}
	return res, err
}
