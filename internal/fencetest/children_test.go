package fencetest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
)

// Children that do not write through a Table: they coordinate with the parent through two
// files, READY (the child creates it when it has reached the point the parent waits for)
// and GATE (the child waits for the parent to create it before going on).

// awaitGate creates READY and waits for GATE to exist (up to a minute).
func awaitGate() error {
	if err := os.WriteFile(os.Getenv("READY"), nil, 0o644); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := os.Stat(os.Getenv("GATE")); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gate %s not opened within a minute", os.Getenv("GATE"))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// commitRecord ("commit") is a late commit from another process: it commits again, from
// its own read version, the transaction stored in the transaction record TXN_KEY (an
// attempt of a compaction that lost its hold while its manifest put was in flight), and
// publishes it as the compaction would have. It stops just before the manifest put (after
// building and recording the version) until the parent opens the gate.
func commitRecord(ctx context.Context, db *engine.DB) (engine.CommitResult, error) {
	table, key := os.Getenv("TABLE"), os.Getenv("TXN_KEY")
	b, err := db.Store().Get(ctx, key)
	if err != nil {
		return engine.CommitResult{}, err
	}
	_, txn, err := manifest.DecodeTransaction(table, key, b)
	if err != nil {
		return engine.CommitResult{}, err
	}
	read, err := manifest.Load(ctx, db.Store(), table, txn.ReadVersion)
	if err != nil {
		return engine.CommitResult{}, err
	}
	defer failpoint.Enable("manifest.before_version_put", failpoint.Call(func(context.Context) error {
		return awaitGate()
	}).Once())()
	m, st, err := manifest.Commit(ctx, db.Store(), table, read, txn, manifest.CommitOptions{})
	if err != nil {
		return engine.CommitResult{}, err
	}
	res := engine.CommitResult{Version: m.Version}
	if _, err := engine.PublishVersion(ctx, db.Store(), db.Catalog(), m, st.Checksum); err != nil {
		return res, &engine.UnknownError{Table: table, Txn: txn, Committed: true, Version: m.Version, Err: err}
	}
	res.Published = true
	return res, nil
}

// pinAndScan ("pin") is a reader in another process: it opens table TABLE at version
// VERSION, pins it, and once the parent opens the gate scans every row of it (reading
// every data file and deletion vector) and reports how many it read.
func pinAndScan(ctx context.Context, db *engine.DB) (engine.CommitResult, error) {
	v, err := strconv.ParseUint(os.Getenv("VERSION"), 10, 64)
	if err != nil {
		return engine.CommitResult{}, err
	}
	tbl, err := db.OpenTableAt(ctx, os.Getenv("TABLE"), v)
	if err != nil {
		return engine.CommitResult{}, err
	}
	pin, err := tbl.Pin(ctx)
	if err != nil {
		return engine.CommitResult{}, err
	}
	defer pin.Release(context.WithoutCancel(ctx))
	if err := awaitGate(); err != nil {
		return engine.CommitResult{}, err
	}
	sc, err := tbl.Scan(ctx, engine.ScanOptions{})
	if err != nil {
		return engine.CommitResult{}, err
	}
	defer sc.Release()
	res := engine.CommitResult{Version: v}
	for sc.Next() {
		res.Rows += sc.RecordBatch().NumRows()
	}
	return res, sc.Err()
}
