package chaostest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// entry is one line of a process's journal (<dir>/<name>.journal, shared by its
// incarnations). A writer journals every operation before it starts ("begin": what it
// will do, under which idempotency key) and after it ends ("end": the outcome). A writer
// killed mid-operation leaves a begin without an end; its next incarnation runs the
// operation again with the same key (a new begin with Attempt > 0). Maintenance
// processes journal what each run did ("maint"), for the run's numbers.
type entry struct {
	T    string `json:"t"` // "begin", "end", "maint"
	Proc string `json:"proc"`
	Inc  int    `json:"inc"`
	At   int64  `json:"at"` // Unix nanoseconds

	// begin and end
	Op    int     `json:"op,omitempty"`
	Key   string  `json:"key,omitempty"`   // the idempotency key
	Kind  string  `json:"kind,omitempty"`  // append, delete, update, overwrite
	Table string  `json:"table,omitempty"` // mainTable or owTable
	IDs   []int64 `json:"ids,omitempty"`   // append, overwrite: the new rows; delete, update: the row
	// Attempt: 0 for the first run of the operation; n > 0 for its n-th run again with the
	// same key, as a new transaction (after a kill, or an outcome still unknown after
	// Table.Retry).
	Attempt int `json:"attempt,omitempty"`

	// end
	Outcome  string `json:"outcome,omitempty"` // engine.Outcome's String
	Version  uint64 `json:"version,omitempty"` // CommitResult.Version
	Rows     int64  `json:"rows,omitempty"`    // CommitResult.Rows
	Dup      bool   `json:"dup,omitempty"`     // CommitResult.Duplicate
	Aborted  bool   `json:"aborted,omitempty"` // errors.Is(err, manifest.ErrTxnAborted)
	Conflict bool   `json:"conflict,omitempty"`
	Retries  int    `json:"retries,omitempty"` // Table.Retry calls
	Err      string `json:"err,omitempty"`

	// maint
	What    string `json:"what,omitempty"` // compact, recover, gc
	Count   int    `json:"count,omitempty"`
	Deleted int    `json:"deleted,omitempty"`
	Fenced  int    `json:"fenced,omitempty"`
	Expired int    `json:"expired,omitempty"`
}

// journal appends entries to a process's journal, one write(2) per line (O_APPEND), so a
// line is whole in the file once write returns, whatever kills the process next.
type journal struct {
	f    *os.File
	proc string
	inc  int
}

func journalPath(dir, name string) string { return filepath.Join(dir, name+".journal") }

func openJournal(dir, name string, inc int) (*journal, error) {
	f, err := os.OpenFile(journalPath(dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &journal{f: f, proc: name, inc: inc}, nil
}

func (j *journal) write(e entry) error {
	e.Proc, e.Inc, e.At = j.proc, j.inc, time.Now().UnixNano()
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = j.f.Write(append(b, '\n'))
	return err
}

func (j *journal) close() { j.f.Close() }

// readJournal returns the entries of a journal (none if it does not exist). A last line
// without its newline (a write torn by a kill, which O_APPEND writes of a few hundred
// bytes to a local file do not suffer in practice) is left out.
func readJournal(path string) ([]entry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []entry
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		var e entry
		if err := json.Unmarshal(b[:i], &e); err != nil {
			return nil, err
		}
		out = append(out, e)
		b = b[i+1:]
	}
	return out, nil
}

// opState is what a journal says about one operation.
type opState struct {
	Proc   string
	Op     int
	Key    string
	Kind   string
	Table  string
	IDs    []int64
	Begins int    // runs started (1 + runs again with the same key)
	End    *entry // the end after the last begin; nil if that run was killed
}

// killed reports whether the operation's last run has no end (its process died in it).
func (o *opState) killed() bool { return o.End == nil }

// outcome is the journaled outcome, or "killed". A run again under the same key that
// ends Rejected means the key landed nowhere: a keyed write whose key committed already
// is its Duplicate, even when it fails before its commit loop.
func (o *opState) outcome() string {
	if o.End == nil {
		return "killed"
	}
	return o.End.Outcome
}

// opsOf folds a journal's begin and end entries into operations, in op order.
func opsOf(entries []entry) []*opState {
	byOp := map[int]*opState{}
	for i := range entries {
		e := &entries[i]
		switch e.T {
		case "begin":
			o := byOp[e.Op]
			if o == nil {
				o = &opState{Proc: e.Proc, Op: e.Op, Key: e.Key, Kind: e.Kind, Table: e.Table, IDs: e.IDs}
				byOp[e.Op] = o
			}
			o.Begins++
			o.End = nil
		case "end":
			if o := byOp[e.Op]; o != nil {
				o.End = e
			}
		}
	}
	out := make([]*opState, 0, len(byOp))
	for _, o := range byOp {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *opState) int { return a.Op - b.Op })
	return out
}
