// Package recovery makes maintenance operations crash-safe (DESIGN §11-12): a
// compaction stores a sidecar, _recovery/<operation ULID>.json, naming every transaction
// it may commit and the data-file prefix of each attempt before it writes anything
// (Phase A), and removes it after the publish (Phase D). Recover resolves the sidecars a
// crashed or failed operation left: it rolls forward (publishes) a transaction that
// landed, or deletes the files of attempts that never landed, and then the sidecar. A
// running operation holds a catalog hold named by its operation id; Recover leaves its
// sidecar alone (SkippedLive). RollForward, the roll-forward half alone, runs before a
// DB's first write to a table when Hook is set as engine.Options.BeforeFirstWrite.
//
// The import direction is recovery → compaction: compaction defines the Sidecars
// interface and the Intent it records; Sidecars here implements it.
//
// Where to start: a program that compacts sets engine.Options.BeforeFirstWrite to
// Hook(Options{}) and compacts through Enable(compaction.New(db)); an operator's tool runs
// Recover (the `shale recover` command) and reads its Report. Recover is safe to run
// concurrently with writers, compactions and other Recovers, in any process.
package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// Dir is the store prefix holding sidecars (and the claims of running recoveries).
const Dir = "_recovery/"

// Format is the sidecar format version this build writes; it refuses to act on a larger one.
const Format = 1

// KindCompaction is the only sidecar kind so far.
const KindCompaction = "compaction"

// Errors.
var (
	// ErrNewerFormat: the sidecar was written by a newer build; it is left untouched.
	ErrNewerFormat = errors.New("recovery: sidecar has a newer format")
	// ErrCorrupt: the sidecar cannot be parsed or lacks required fields; it is left untouched.
	ErrCorrupt = errors.New("recovery: corrupt sidecar")
	// ErrUnknownKind: the sidecar names an operation kind this build cannot recover.
	ErrUnknownKind = errors.New("recovery: unknown sidecar kind")
)

// Sidecar is the stored form of a compaction run's intent (JSON):
//
//	{"format":1,"kind":"compaction","operation_id":"01J…","table":"t",
//	 "created":"2026-…Z","published_at_start":7,
//	 "attempts":[{"txn_id":"01J…","read_version":7,"data_prefix":"t/data/01J…/"}]}
//
// Every data file an attempt writes has a key starting with its data_prefix; every
// version the operation may commit carries one of the attempts' txn_id.
type Sidecar struct {
	Format           int       `json:"format"`             // the sidecar format (Format); a newer one is refused
	Kind             string    `json:"kind"`               // the operation kind: KindCompaction
	OperationID      string    `json:"operation_id"`       // the run's id; also its catalog hold id and its key (Key)
	Table            string    `json:"table"`              // the table the operation works on
	Created          time.Time `json:"created"`            // when the run began (MinAge is measured from it)
	PublishedAtStart uint64    `json:"published_at_start"` // the published version when the run began
	Attempts         []Attempt `json:"attempts"`           // every attempt so far, oldest first
}

// Attempt is one attempt of the operation (see compaction.Attempt).
type Attempt struct {
	TxnID       string `json:"txn_id"`       // the pre-minted transaction id the attempt may commit
	ReadVersion uint64 `json:"read_version"` // the version it was planned on
	DataPrefix  string `json:"data_prefix"`  // <table>/data/<txn-id>/: every data file it writes is below it
	// Rejected: the run saw this attempt's commit end in a conflict (a decision: it never
	// commits), so a roll back deletes its files without fencing it.
	Rejected bool `json:"rejected,omitempty"`
}

// Key returns the object key of operation id's sidecar: _recovery/<id>.json.
func Key(id string) string { return Dir + id + ".json" }

func claimKey(id string) string { return Dir + id + ".claim" }

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
	case sc.Kind != KindCompaction:
		return sc, fmt.Errorf("%w: %q", ErrUnknownKind, sc.Kind)
	case sc.OperationID == "" || sc.Table == "" || len(sc.Attempts) == 0:
		return sc, fmt.Errorf("%w: operation %q, table %q, %d attempts", ErrCorrupt, sc.OperationID, sc.Table, len(sc.Attempts))
	}
	for _, a := range sc.Attempts {
		// A prefix outside the table's data directory would let recovery delete foreign files.
		if a.TxnID == "" || !strings.HasPrefix(a.DataPrefix, sc.Table+"/data/") || !strings.HasSuffix(a.DataPrefix, "/") {
			return sc, fmt.Errorf("%w: attempt %+v", ErrCorrupt, a)
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
// that replanned first resolves the sidecar as Recover would: the files of attempts that
// no version references are deleted, then the sidecar. Attempts the run saw rejected need
// no fence (a conflict is the commit loop's decision), so a run whose replans all
// followed conflicts commits no abort version and leaves the table in sync. Errors:
// store errors naming the key.
func (s Sidecars) Disarm(ctx context.Context, in *compaction.Intent) error {
	key := Key(in.ID)
	if len(in.Attempts) > 1 {
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

// Enable makes e's runs recoverable: it sets e.Sidecars to a Sidecars on e.Store.
func Enable(e *compaction.Executor) *compaction.Executor {
	e.Sidecars = Sidecars{Store: e.Store, Catalog: e.Catalog}
	return e
}
