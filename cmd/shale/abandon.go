package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// cleanupTimeout bounds the clean-up after a failed or interrupted import (it runs after
// the command's own context ended; a second Ctrl-C ends the process, leaving the files
// to gc).
const cleanupTimeout = 30 * time.Second

// abandoned is what became of a failed or interrupted import's writes.
type abandoned struct {
	// landed: the import's transaction committed (as version), despite the failure.
	landed  bool
	version uint64
	// dropped: the table, which this import had created, was dropped again.
	dropped bool
	// files is the number of data files deleted (the import's own, under its
	// transaction's data directory); fence is the abort version committed first when
	// the outcome was unknown (0: none needed).
	files int
	fence uint64
	// kept says why nothing was cleaned up ("" when something was).
	kept string
	// tableKept says why a table this import created was not dropped, though nothing
	// else was written to it ("" when dropped, or written to by another writer).
	tableKept string
}

// abandonImport undoes what an import that failed with err (or was interrupted) wrote, as
// far as it is decided that nothing of it commits:
//
//   - If the import created the table (at version createdAt), the table is dropped again
//     with engine.DB.DropTableAt, whose drop marker is the very next version or nothing:
//     it succeeds only if neither this import nor any other writer committed to the table
//     since, and then fences this import's transaction too (a drop marker fences every
//     transaction of the table). The table's objects, the import's files among them, go
//     with it.
//   - Otherwise, Rejected (an *engine.WriteError): the transaction never commits; its
//     data files are deleted.
//   - Unknown, and the import was interrupted: the outcome is decided first. If the
//     transaction landed, it stays and is published (landed). Otherwise an abort version
//     naming it (recovery.Fence) makes sure it never commits, then its files are deleted.
//   - Unknown without an interrupt, or committed: nothing is touched (running the same
//     import again commits it at most once).
func (a *app) abandonImport(ctx context.Context, db *engine.DB, t *engine.Table, created bool, createdAt uint64, interrupted bool, err error) abandoned {
	table := t.Name()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var we *engine.WriteError
	var ue *engine.UnknownError
	var txn manifest.Transaction
	var out abandoned
	switch {
	case errors.As(err, &we):
		txn = we.Txn
	case errors.As(err, &ue) && !ue.Committed && interrupted:
		txn = ue.Txn
	default:
		out.kept = "its outcome is not decided"
		return out
	}
	if created {
		_, derr := db.DropTableAt(ctx, table, createdAt)
		if derr == nil {
			out.dropped = true
			return out
		}
		if !errors.Is(derr, engine.ErrTableChanged) {
			out.tableKept = fmt.Sprintf("table %s, which this import created, stays (%v)", table, derr)
		}
		// Otherwise a writer committed to the table meanwhile (perhaps this import): it
		// stays.
	}
	if ue != nil {
		v, landed, ferr := decideAbandoned(ctx, db, table, txn)
		if ferr != nil {
			out.kept = fmt.Sprintf("whether it committed could not be decided: %v", ferr)
			return out
		}
		if landed {
			// Committed: publish it (a retry of the same transaction finds the version
			// it landed in and never commits twice).
			out.landed, out.version, out.tableKept = true, v, ""
			if _, rerr := t.Retry(ctx, txn); rerr != nil {
				out.kept = fmt.Sprintf("not published yet (the next write to the table publishes it): %v", rerr)
			}
			return out
		}
		out.fence = v
	}
	out.files, out.kept = deleteWritten(ctx, db, table, txn.ID)
	return out
}

// deleteWritten deletes what transaction txnID of table, decided never to commit
// (Rejected, or fenced), wrote: its data files, all under manifest.TxnDataDir, and the
// records of its commit attempts that no version names (an attempt's record stays when
// its version is the transaction's own, a version of a dropped incarnation: garbage
// collection deletes it with that version). It returns the number of data files deleted
// and, when something could not be deleted, why ("" otherwise).
func deleteWritten(ctx context.Context, db *engine.DB, table, txnID string) (files int, kept string) {
	n, err := store.DeletePrefix(ctx, db.Store(), manifest.TxnDataDir(table, txnID)+"/")
	if err == nil {
		err = deleteAttemptRecords(ctx, db, table, txnID)
	}
	if err != nil {
		return n, fmt.Sprintf("deleting its files failed (gc deletes them later): %v", err)
	}
	return n, ""
}

// deleteAttemptRecords deletes the transaction records (<table>/_txn/<N>-<id>.txn) of
// txnID whose version N holds another transaction's manifest or none.
func deleteAttemptRecords(ctx context.Context, db *engine.DB, table, txnID string) error {
	objs, err := db.Store().List(ctx, manifest.TxnDir(table), 0)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if id, ok := manifest.KeyTxn(table, o.Key); !ok || id != txnID {
			continue
		}
		n, _, _ := strings.Cut(strings.TrimPrefix(o.Key, manifest.TxnDir(table)), "-")
		v, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			continue // not a record's name: leave it to gc
		}
		rec, err := manifest.LoadRecord(ctx, db.Store(), table, v)
		switch {
		case err == nil && rec.TxnID == txnID:
			continue // its own version names it
		case err != nil && !errors.Is(err, manifest.ErrVersionNotFound):
			return err
		}
		if err := db.Store().Delete(ctx, o.Key); err != nil {
			return err
		}
	}
	return nil
}

// decideAbandoned decides the outcome of transaction txn of table, whose commit was in
// flight when its writer gave up: it reads every version after the transaction's read
// version for it (landed: at version v), and otherwise commits an abort version naming
// it on the newest version read, so that it can never commit (v is the abort version).
// If it lands between the read and the abort, the abort fails and the read is repeated.
func decideAbandoned(ctx context.Context, db *engine.DB, table string, txn manifest.Transaction) (v uint64, landed bool, err error) {
	var groups manifest.GroupResolver
	if db.Catalog() != nil {
		groups = catalog.GroupWaiter{Catalog: db.Catalog(), Timeout: 10 * time.Second}
	}
	for attempt := 0; ; attempt++ {
		head, err := manifest.Head(ctx, db.Store(), table)
		if err != nil {
			return 0, false, err
		}
		for v := txn.ReadVersion + 1; v <= head; v++ {
			rec, err := manifest.LoadRecord(ctx, db.Store(), table, v)
			if errors.Is(err, manifest.ErrVersionNotFound) {
				continue
			}
			if err != nil {
				return 0, false, err
			}
			if rec.TxnID == txn.ID {
				return v, true, nil
			}
		}
		read, err := manifest.LoadCounted(ctx, db.Store(), table, head, groups)
		if err != nil {
			return 0, false, err
		}
		res, err := recovery.Fence(ctx, db.Store(), db.Catalog(), read, []string{txn.ID}, groups, 0)
		if errors.Is(err, manifest.ErrIncompatible) && attempt == 0 {
			continue // it landed after our read: find it
		}
		if err != nil {
			return 0, false, err
		}
		return res.Version, false, nil
	}
}

// describe says, for the end of an error message, what was undone.
func (ab abandoned) describe(table string) string {
	switch {
	case ab.landed && ab.kept != "":
		return fmt.Sprintf("it had committed already, as version %d of %s, %s", ab.version, table, ab.kept)
	case ab.landed:
		return fmt.Sprintf("it had committed already, as version %d of %s", ab.version, table)
	case ab.dropped:
		return fmt.Sprintf("nothing was imported; table %s, which this import had created, was dropped again", table)
	case ab.kept != "" && ab.tableKept != "":
		return "its files were left for gc: " + ab.kept + "; " + ab.tableKept
	case ab.kept != "":
		return "its files were left for gc: " + ab.kept
	}
	s := "nothing was imported"
	if ab.tableKept != "" {
		s += "; " + ab.tableKept
	}
	if ab.fence > 0 {
		s += fmt.Sprintf(" (abort version %d fences it)", ab.fence)
	}
	switch {
	case ab.files == 1:
		s += "; the data file it had written was deleted"
	case ab.files > 1:
		s += fmt.Sprintf("; the %s data files it had written were deleted", thousands(int64(ab.files)))
	}
	return s
}

// interruptedError is the error of a command interrupted (Ctrl-C, SIGTERM): its text says
// what the interruption left; it unwraps to the context's error.
type interruptedError struct {
	msg   string
	cause error
}

func (e *interruptedError) Error() string { return "interrupted: " + e.msg }
func (e *interruptedError) Unwrap() error { return e.cause }
