package compaction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
)

// Failpoint seams of a run with Sidecars set (internal/failpoint; free unless enabled).
// The commit loop's own seams (manifest.before_version_put, …) fire between
// after_sidecar and after_commit.
var (
	seamBeforeSidecar       = failpoint.Seam("compaction.before_sidecar")
	seamAfterSidecar        = failpoint.Seam("compaction.after_sidecar")
	seamAfterCommit         = failpoint.Seam("compaction.after_commit")
	seamBeforePublish       = failpoint.Seam("compaction.before_publish")
	seamAfterPublish        = failpoint.Seam("compaction.after_publish")
	seamBeforeSidecarDelete = failpoint.Seam("compaction.before_sidecar_delete")
)

// Intent is what a compaction run may leave behind, as recorded in its recovery sidecar.
// One Intent covers a whole Run; it gains one Attempt per plan-write-commit attempt.
type Intent struct {
	ID               string    // operation id: a ULID minted when the run starts
	Table            string    // the table compacted
	PublishedAtStart uint64    // the published version when the run started (0: none or no catalog)
	Created          time.Time // when the run started
	Attempts         []Attempt // in order; the last is the one in progress
}

// Attempt is one attempt of a run: the transaction it may commit and where its data
// files go.
type Attempt struct {
	TxnID       string // the pre-minted transaction id (manifest.Transaction.ID)
	ReadVersion uint64 // the version the attempt was planned on
	DataPrefix  string // every data file of the attempt has a key starting with DataPrefix
	// (its zone maps of the new fragments go under <table>/_indices/<TxnID>/, which the
	// sidecar owns too: recovery.Sidecar.Prefixes)
	// Rejected: the attempt's commit ended in a conflict, which the commit loop decides
	// (the transaction has not committed and never will), so its files can be deleted
	// without fencing it first. Recorded when the next attempt is armed.
	Rejected bool
}

// Sidecars stores recovery sidecars (implemented by recovery.Sidecars).
type Sidecars interface {
	// Arm durably records in (with its latest attempt) before that attempt's first data
	// file is written: the first call for an intent creates the sidecar (put-if-absent),
	// later calls rewrite it with the attempts so far. An error aborts the run before
	// the attempt writes anything.
	Arm(ctx context.Context, in *Intent) error
	// Disarm removes the intent's sidecar after its work is published or it did nothing.
	Disarm(ctx context.Context, in *Intent) error
}

// AttemptDataDir is the prefix (no trailing slash) under which the attempt of
// transaction txnID writes its data files: <table>/data/<txnID>, so that recovery can
// find every file of an attempt that crashed before committing.
func AttemptDataDir(table, txnID string) string {
	return manifest.TxnDataDir(table, txnID)
}

// newIntent mints the run's intent, reading the published version (one etcd GET).
func (e *Executor) newIntent(ctx context.Context, table string) (*Intent, error) {
	in := &Intent{ID: manifest.NewTransactionID(), Table: table, Created: time.Now().UTC()}
	if e.Catalog != nil {
		p, _, err := e.Catalog.Get(ctx, table)
		switch {
		case err == nil:
			in.PublishedAtStart = p.Version
		case !isNoPointer(err):
			return nil, fmt.Errorf("table %q: read published version: %w", table, err)
		}
	}
	return in, nil
}

// arm records the attempt of p in the run's sidecar before its first data file.
func (e *Executor) arm(ctx context.Context, in *Intent, p *Plan, dataDir string) error {
	if err := seamBeforeSidecar.Inject(ctx); err != nil {
		return err
	}
	in.Attempts = append(in.Attempts, Attempt{TxnID: p.Txn.ID, ReadVersion: p.ReadVersion, DataPrefix: dataDir + "/"})
	if err := e.Sidecars.Arm(ctx, in); err != nil {
		in.Attempts = in.Attempts[:len(in.Attempts)-1]
		return fmt.Errorf("table %q: compaction %s: write recovery sidecar: %w", p.Table, in.ID, err)
	}
	return seamAfterSidecar.Inject(ctx)
}

// disarm is Phase D: remove the sidecar; a failure is logged (recovery removes it later).
func (e *Executor) disarm(ctx context.Context, in *Intent) {
	if in == nil || len(in.Attempts) == 0 {
		return
	}
	err := seamBeforeSidecarDelete.Inject(ctx)
	if err == nil {
		err = e.Sidecars.Disarm(ctx, in)
	}
	if err != nil {
		l := e.Logger
		if l == nil {
			l = slog.Default()
		}
		l.Warn("compaction: recovery sidecar not removed; recovery will remove it",
			"table", in.Table, "operation", in.ID, "err", err)
	}
}

func isNoPointer(err error) bool { return errors.Is(err, catalog.ErrNoPointer) }
