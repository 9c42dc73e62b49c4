package wal

import (
	"errors"
	"fmt"
)

var (
	// ErrFenced: a writer with a higher epoch claimed the shard. The fenced Writer returns
	// it from every later call; its appends that returned an error were not acknowledged
	// (an entry that did become durable before the fence is replayed by the new writer).
	ErrFenced = errors.New("WAL shard fenced by a newer writer")
	// ErrClosed: the Writer was closed.
	ErrClosed = errors.New("WAL writer closed")
	// ErrSchemaMismatch: an appended record's columns differ from the schema the Writer
	// was opened with (names, types, order).
	ErrSchemaMismatch = errors.New("record schema does not match the WAL writer's")
	// ErrBacklog: the shard's unmerged backlog is at Options.BacklogHardBytes; nothing was
	// appended. Merge the WAL (engine.Table.MergeWAL, shale wal merge) and try again.
	ErrBacklog = errors.New("WAL backlog at its hard limit")
	// ErrCorrupt: a WAL object failed its checks (checksum, framing, metadata).
	ErrCorrupt = errors.New("corrupt WAL object")
	// ErrFormatTooNew: a shard manifest was written by a newer build.
	ErrFormatTooNew = errors.New("WAL object from a newer format")
	// ErrNoShard: the shard has no manifest yet (no writer ever claimed it).
	ErrNoShard = errors.New("WAL shard has no manifest")
	// ErrIncarnation: the shard manifest belongs to an earlier life of the table (the
	// table was dropped and created again since).
	ErrIncarnation = errors.New("WAL shard belongs to another incarnation of the table")
)

// ObjectError names the WAL object an error is about.
type ObjectError struct {
	Table string // the table
	Shard string // the shard id
	Key   string // the object key
	Err   error  // what is wrong with it
}

// Error names the table, shard and object.
func (e *ObjectError) Error() string {
	return fmt.Sprintf("table %q WAL shard %s: %s: %v", e.Table, e.Shard, e.Key, e.Err)
}

// Unwrap returns the cause.
func (e *ObjectError) Unwrap() error { return e.Err }

// FencedError is what a fenced Writer returns: its epoch and the epoch that fenced it.
// It unwraps to ErrFenced.
type FencedError struct {
	Table string // the table
	Shard string // the shard id
	Epoch uint64 // the fenced writer's epoch
	By    uint64 // the epoch of the shard manifest that fenced it
}

// Error gives both epochs.
func (e *FencedError) Error() string {
	return fmt.Sprintf("table %q WAL shard %s: writer epoch %d fenced by epoch %d", e.Table, e.Shard, e.Epoch, e.By)
}

// Unwrap returns ErrFenced.
func (e *FencedError) Unwrap() error { return ErrFenced }
