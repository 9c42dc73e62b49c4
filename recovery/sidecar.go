// Package recovery makes maintenance operations crash-safe (DESIGN §11-12): a
// compaction or an index build stores a sidecar, _recovery/<operation ULID>.json, naming
// every transaction it may commit and the prefix each attempt writes under before it
// writes anything (Phase A), and removes it after the publish (Phase D). Recover resolves
// the sidecars a crashed or failed operation left: it rolls forward (publishes) a
// transaction that landed, or fences the transactions (an abort version) and deletes the
// files of attempts that never landed, and then the sidecar. A running operation holds a
// catalog hold named by its operation id; Recover leaves its sidecar alone
// (SkippedLive). RollForward, the roll-forward half alone, runs before a DB's first write
// to a table when Hook is set as engine.Options.BeforeFirstWrite.
//
// Kinds of sidecar (Sidecar.Kind) and the prefixes an attempt owns (Sidecar.Prefixes):
//
//   - "compaction": one attempt per plan-write-commit attempt; each owns its data files
//     under <table>/data/<txn-id>/ and the zone maps of its new fragments under
//     <table>/_indices/<txn-id>/.
//   - "index": one attempt, the build's transaction; it owns <table>/_indices/<txn-id>/
//     (the segment's objects).
//
// Decode refuses a sidecar whose prefix is anything else, so a sidecar can never name
// another transaction's or another table's files.
//
// The import direction is recovery → compaction and recovery → engine: compaction
// defines the Sidecars interface and the Intent it records, the engine IndexSidecars and
// IndexIntent; Sidecars and IndexSidecars here implement them.
//
// Where to start: a program that compacts sets engine.Options.BeforeFirstWrite to
// Hook(Options{}) and compacts through Enable(compaction.New(db)); one that builds
// indexes sets engine.Options.IndexSidecars to IndexSidecars{Store: s}; an operator's
// tool runs Recover (the `shale recover` command) and reads its Report. Recover is safe
// to run concurrently with writers, compactions, index builds and other Recovers, in any
// process.
package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// Dir is the store prefix holding sidecars (and the claims of running recoveries).
const Dir = "_recovery/"

// Format is the sidecar format version this build writes; it refuses to act on a larger one.
const Format = 1

// Kinds of sidecar.
const (
	KindCompaction = "compaction" // a compaction run (compaction.Intent)
	KindIndex      = "index"      // an index build (engine.IndexIntent)
	KindMerge      = "merge_wal"  // a WAL merge (engine.MergeIntent): it writes no object
)

// Errors.
var (
	// ErrNewerFormat: the sidecar was written by a newer build; it is left untouched.
	ErrNewerFormat = errors.New("recovery: sidecar has a newer format")
	// ErrCorrupt: the sidecar cannot be parsed or lacks required fields; it is left untouched.
	ErrCorrupt = errors.New("recovery: corrupt sidecar")
	// ErrUnknownKind: the sidecar names an operation kind this build cannot recover.
	ErrUnknownKind = errors.New("recovery: unknown sidecar kind")
)

// Sidecar is the stored form of a maintenance operation's intent (JSON), a compaction
// run's:
//
//	{"format":1,"kind":"compaction","operation_id":"01J…","table":"t",
//	 "created":"2026-…Z","published_at_start":7,
//	 "attempts":[{"txn_id":"01J…","read_version":7,"data_prefix":"t/data/01J…/"}]}
//
// or an index build's (one attempt; the prefix is its index directory):
//
//	{"format":1,"kind":"index","operation_id":"01J…","table":"t","created":"2026-…Z",
//	 "attempts":[{"txn_id":"01J…","read_version":7,"data_prefix":"t/_indices/01J…/"}]}
//
// Every object an attempt writes has a key starting with one of its prefixes
// (Prefixes); every version the operation may commit carries one of the attempts' txn_id.
type Sidecar struct {
	Format           int       `json:"format"`             // the sidecar format (Format); a newer one is refused
	Kind             string    `json:"kind"`               // the operation kind: KindCompaction or KindIndex
	OperationID      string    `json:"operation_id"`       // the run's id; also its catalog hold id and its key (Key)
	Table            string    `json:"table"`              // the table the operation works on
	Created          time.Time `json:"created"`            // when the run began (MinAge is measured from it)
	PublishedAtStart uint64    `json:"published_at_start"` // the published version when the run began (0 for an index build)
	Attempts         []Attempt `json:"attempts"`           // every attempt so far, oldest first
}

// Attempt is one attempt of the operation (see compaction.Attempt).
type Attempt struct {
	TxnID       string `json:"txn_id"`       // the pre-minted transaction id the attempt may commit
	ReadVersion uint64 `json:"read_version"` // the version it was planned on
	// DataPrefix is where the attempt writes: <table>/data/<txn-id>/ for a compaction
	// (its data files), <table>/_indices/<txn-id>/ for an index build (its objects); the
	// JSON name is the format's.
	DataPrefix string `json:"data_prefix"`
	// Rejected: the run saw this attempt's commit end in a conflict (a decision: it never
	// commits), so a roll back deletes its files without fencing it.
	Rejected bool `json:"rejected,omitempty"`
}

// Key returns the object key of operation id's sidecar: _recovery/<id>.json.
func Key(id string) string { return Dir + id + ".json" }

func claimKey(id string) string { return Dir + id + ".claim" }

// Prefixes lists the key prefixes the sidecar's attempts own, each ending in "/": every
// object the operation wrote is under one of them. A compaction attempt owns its data
// prefix and <table>/_indices/<txn-id>/ (zone maps of its new fragments, written by
// builds that keep zone maps across compaction); an index build's attempt owns its
// index prefix.
func (sc Sidecar) Prefixes() []string {
	var out []string
	for _, a := range sc.Attempts {
		out = append(out, a.DataPrefix)
		if sc.Kind == KindCompaction {
			out = append(out, indexPrefix(sc.Table, a.TxnID))
		}
	}
	return out
}

// indexPrefix is <table>/_indices/<txnID>/: where transaction txnID writes index objects.
func indexPrefix(table, txnID string) string {
	return manifest.IndicesDir(table) + "/" + txnID + "/"
}

// FromIntent converts a compaction intent into its sidecar.
func FromIntent(in *compaction.Intent) Sidecar {
	sc := Sidecar{Format: Format, Kind: KindCompaction, OperationID: in.ID, Table: in.Table,
		Created: in.Created, PublishedAtStart: in.PublishedAtStart}
	for _, a := range in.Attempts {
		sc.Attempts = append(sc.Attempts, Attempt{TxnID: a.TxnID, ReadVersion: a.ReadVersion, DataPrefix: a.DataPrefix, Rejected: a.Rejected})
	}
	return sc
}

// Encode returns the JSON form.
func (sc Sidecar) Encode() []byte {
	b, err := json.Marshal(sc)
	if err != nil {
		panic(err) // plain field types cannot fail
	}
	return b
}

// Decode parses a stored sidecar. Errors: ErrNewerFormat, ErrCorrupt, ErrUnknownKind
// (the caller adds the key).
func Decode(b []byte) (Sidecar, error) {
	var sc Sidecar
	if err := json.Unmarshal(b, &sc); err != nil {
		return sc, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	switch {
	case sc.Format > Format:
		return sc, fmt.Errorf("%w: format %d, this build reads up to %d", ErrNewerFormat, sc.Format, Format)
	case sc.Format < 1:
		return sc, fmt.Errorf("%w: missing or bad format %d", ErrCorrupt, sc.Format)
	case sc.Kind != KindCompaction && sc.Kind != KindIndex && sc.Kind != KindMerge:
		return sc, fmt.Errorf("%w: %q", ErrUnknownKind, sc.Kind)
	case sc.OperationID == "" || sc.Table == "" || len(sc.Attempts) == 0:
		return sc, fmt.Errorf("%w: operation %q, table %q, %d attempts", ErrCorrupt, sc.OperationID, sc.Table, len(sc.Attempts))
	case manifest.ValidateTableName(sc.Table) != nil:
		return sc, fmt.Errorf("%w: table name %q", ErrCorrupt, sc.Table)
	case (sc.Kind == KindIndex || sc.Kind == KindMerge) && len(sc.Attempts) != 1:
		return sc, fmt.Errorf("%w: an %s operation has one attempt, not %d", ErrCorrupt, sc.Kind, len(sc.Attempts))
	}
	for _, a := range sc.Attempts {
		if sc.Kind == KindMerge {
			// A merge writes no object: its prefix names an empty directory, so a roll
			// back deletes nothing.
			if want := mergePrefix(sc.Table, a.TxnID); a.TxnID == "" || a.DataPrefix != want {
				return sc, fmt.Errorf("%w: %s attempt %+v (its prefix must be %q)", ErrCorrupt, sc.Kind, a, want)
			}
			continue
		}
		// Recovery deletes what a prefix holds: a prefix other than the attempt's own
		// transaction directory of the kind's (its data files; an index build's index
		// objects) would let it delete foreign files.
		want := manifest.TxnDataDir(sc.Table, a.TxnID) + "/"
		if sc.Kind == KindIndex {
			want = indexPrefix(sc.Table, a.TxnID)
		}
		if id, ok := manifest.KeyTxn(sc.Table, want+"x"); !ok || id != a.TxnID || a.DataPrefix != want {
			return sc, fmt.Errorf("%w: %s attempt %+v (its prefix must be %q)", ErrCorrupt, sc.Kind, a, want)
		}
	}
	return sc, nil
}

// Sidecars stores compaction sidecars in a store; it implements compaction.Sidecars.
type Sidecars struct {
	Store store.Store // the table's store, where sidecars live under Dir
	// Catalog publishes the abort version a Disarm may need (nil: a bare store).
	Catalog *catalog.Catalog
}

var _ compaction.Sidecars = Sidecars{}

// Arm stores in's sidecar: put-if-absent for its first attempt, an atomic overwrite
// (with every attempt so far) for later ones. Errors: store errors naming the key.
func (s Sidecars) Arm(ctx context.Context, in *compaction.Intent) error {
	key := Key(in.ID)
	body := FromIntent(in).Encode()
	var err error
	if len(in.Attempts) <= 1 {
		err = s.Store.PutIfAbsent(ctx, key, body)
	} else {
		err = s.Store.Put(ctx, key, body)
	}
	if err != nil {
		return fmt.Errorf("table %q: sidecar %s: %w", in.Table, key, err)
	}
	return nil
}

// Disarm deletes in's sidecar after its run published (or found nothing to do). A run
// that replanned first (more than one attempt, or one rejected attempt after which the
// replan found nothing to compact) resolves the sidecar as Recover would: the files of
// attempts that no version references are deleted, then the sidecar. Attempts the run saw
// rejected need no fence (a conflict is the commit loop's decision), so a run whose
// replans all followed conflicts commits no abort version, leaves the table in sync and
// leaves no file for garbage collection to fence. Errors: store errors naming the key.
func (s Sidecars) Disarm(ctx context.Context, in *compaction.Intent) error {
	key := Key(in.ID)
	if len(in.Attempts) > 1 || len(in.Attempts) == 1 && in.Attempts[0].Rejected {
		r := &recoverer{s: s.Store, cat: s.Catalog, opts: Options{}.withDefaults(s.Catalog != nil)}
		if _, err := r.resolve(ctx, key, FromIntent(in), Outcome{Key: key, Operation: in.ID}); err != nil {
			return fmt.Errorf("table %q: %w", in.Table, err)
		}
		return nil
	}
	if err := s.Store.Delete(ctx, key); err != nil {
		return fmt.Errorf("table %q: delete sidecar %s: %w", in.Table, key, err)
	}
	return nil
}

// mergePrefix is the (empty) prefix a WAL merge's attempt owns: <table>/_wal/_merge/<txn-id>/.
func mergePrefix(table, txnID string) string { return wal.Dir(table) + "_merge/" + txnID + "/" }

// FromMergeIntent converts a WAL merge's intent into its sidecar.
func FromMergeIntent(in *engine.MergeIntent) Sidecar {
	return Sidecar{Format: Format, Kind: KindMerge, OperationID: in.OperationID, Table: in.Table, Created: in.Created,
		Attempts: []Attempt{{TxnID: in.TxnID, ReadVersion: in.ReadVersion, DataPrefix: mergePrefix(in.Table, in.TxnID)}}}
}

// MergeSidecars stores the sidecars of WAL merges in a store; it implements
// engine.MergeSidecars (set it as engine.Options.MergeSidecars). Recover rolls a merge
// whose transaction landed forward (publishes it); one that did not is fenced (an abort
// version names it) and nothing is deleted: a merge writes no object.
type MergeSidecars struct {
	Store store.Store // the store of the tables whose merges it records
}

var _ engine.MergeSidecars = MergeSidecars{}

// Arm stores in's sidecar with put-if-absent. Errors: store errors naming the key.
func (s MergeSidecars) Arm(ctx context.Context, in *engine.MergeIntent) error {
	key := Key(in.OperationID)
	if err := s.Store.PutIfAbsent(ctx, key, FromMergeIntent(in).Encode()); err != nil {
		return fmt.Errorf("table %q: sidecar %s: %w", in.Table, key, err)
	}
	return nil
}

// Disarm deletes in's sidecar. Errors: store errors naming the key.
func (s MergeSidecars) Disarm(ctx context.Context, in *engine.MergeIntent) error {
	key := Key(in.OperationID)
	if err := s.Store.Delete(ctx, key); err != nil {
		return fmt.Errorf("table %q: delete sidecar %s: %w", in.Table, key, err)
	}
	return nil
}

// FromIndexIntent converts an index build's intent into its sidecar.
func FromIndexIntent(in *engine.IndexIntent) Sidecar {
	return Sidecar{Format: Format, Kind: KindIndex, OperationID: in.OperationID, Table: in.Table, Created: in.Created,
		Attempts: []Attempt{{TxnID: in.TxnID, ReadVersion: in.ReadVersion, DataPrefix: in.Prefix}}}
}

// IndexSidecars stores the sidecars of index builds in a store; it implements
// engine.IndexSidecars (set it as engine.Options.IndexSidecars). Recover resolves them
// as it does compactions': the build's hold (its operation id) says it is alive; a
// version carrying its transaction is rolled forward (published); otherwise the
// transaction is fenced and the unreferenced objects under its index prefix deleted.
type IndexSidecars struct {
	Store store.Store // the store of the tables whose builds it records (sidecars go under Dir)
}

var _ engine.IndexSidecars = IndexSidecars{}

// Arm stores in's sidecar with put-if-absent. Errors: a sidecar that would not decode
// (ErrCorrupt: a prefix other than the build's index directory), store errors naming
// the key.
func (s IndexSidecars) Arm(ctx context.Context, in *engine.IndexIntent) error {
	sc := FromIndexIntent(in)
	body := sc.Encode()
	if _, err := Decode(body); err != nil {
		return fmt.Errorf("table %q: index sidecar: %w", in.Table, err)
	}
	key := Key(in.OperationID)
	if err := s.Store.PutIfAbsent(ctx, key, body); err != nil {
		return fmt.Errorf("table %q: sidecar %s: %w", in.Table, key, err)
	}
	return nil
}

// Disarm deletes in's sidecar: the build committed and published, or was rejected (its
// objects are then referenced by no version; garbage collection fences its transaction
// and deletes them). Errors: store errors naming the key.
func (s IndexSidecars) Disarm(ctx context.Context, in *engine.IndexIntent) error {
	key := Key(in.OperationID)
	if err := s.Store.Delete(ctx, key); err != nil {
		return fmt.Errorf("table %q: delete sidecar %s: %w", in.Table, key, err)
	}
	return nil
}

// Enable makes e's runs recoverable: it sets e.Sidecars to a Sidecars on e.Store.
func Enable(e *compaction.Executor) *compaction.Executor {
	e.Sidecars = Sidecars{Store: e.Store, Catalog: e.Catalog}
	return e
}
