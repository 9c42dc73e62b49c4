package engine

import (
	"context"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// WriteError is the error of an Append or Overwrite that failed after minting its
// transaction, with outcome Rejected (OutcomeOf): the transaction never commits, so the
// data files it wrote, all under manifest.TxnDataDir(Table, Txn.ID), are referenced by no
// version and never will be; the caller may delete them at once (garbage collection
// otherwise fences and deletes them later). A write interrupted by its context ending is
// one. It unwraps to the write's error, so errors.Is, errors.As and OutcomeOf see
// through it, and its text is that error's. A write the table's drop met
// (ErrTableDropped) is one too: its transaction met the drop marker, which fences it, or
// its version landed in the dropped incarnation, below the marker, where no version is
// ever published or read again (that dead version names the files; garbage collection
// deletes it).
type WriteError struct {
	// Table is the table written.
	Table string
	// Txn is the write's transaction: Txn.ID names its data directory.
	Txn manifest.Transaction
	// Err is the write's error (never nil).
	Err error
}

// Error returns the write's error's text.
func (e *WriteError) Error() string { return e.Err.Error() }

// Unwrap returns the write's error.
func (e *WriteError) Unwrap() error { return e.Err }

// settleWrite is settleKeyed for a write that wrote data files under txn's id (Append,
// Overwrite): a Rejected outcome is returned as a *WriteError naming txn. A Duplicate
// (the idempotency key committed already, by another transaction) decides txn too: it
// never commits, so the data files it wrote are deleted here, best effort (what a
// failure leaves, garbage collection deletes later), and "committed nothing new" leaves
// nothing new behind either.
func (t *Table) settleWrite(ctx context.Context, txn manifest.Transaction, res CommitResult, err error) (CommitResult, error) {
	res, err = t.settleKeyed(ctx, txn, res, err)
	if err == nil && res.Duplicate && res.DuplicateTxn != txn.ID {
		t.deleteTxnData(ctx, txn.ID)
	}
	if err == nil || OutcomeOf(err) != Rejected {
		return res, err
	}
	return res, &WriteError{Table: t.name, Txn: txn, Err: err}
}

// deleteTxnData deletes the data files of transaction txnID, decided never to commit
// (all under manifest.TxnDataDir), best effort: what a store error leaves, garbage
// collection deletes later. It
// runs under a context of its own when ctx has ended (an interrupted write's files are
// still its own to delete), bounded by settleTimeout.
func (t *Table) deleteTxnData(ctx context.Context, txnID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	store.DeletePrefix(ctx, t.db.store, manifest.TxnDataDir(t.name, txnID)+"/")
}
