package chaostest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
)

// Operation kinds a worker runs.
const (
	kindAppend    = "append"
	kindDelete    = "delete"
	kindUpdate    = "update"
	kindOverwrite = "overwrite"
)

// worker is a writer process: a seeded sequence of operations, each journaled before it
// starts and after it ends, each under its own idempotency key (<name>-op<n>).
type worker struct {
	cfg  childConfig
	j    *journal
	rng  *rand.Rand
	tbls map[string]*engine.Table
	// alive holds the rows of mainTable this worker appended (Committed) and has not
	// deleted (Committed): the rows it may delete or update next.
	alive map[int64]bool
	// tainted rows are in an undecided state (an operation on them ended Unknown): the
	// worker leaves them alone.
	tainted map[int64]bool
	nextOp  int
}

func runWorker(cfg childConfig) error {
	ctx := context.Background()
	entries, err := readJournal(journalPath(cfg.Dir, cfg.Name))
	if err != nil {
		return err
	}
	j, err := openJournal(cfg.Dir, cfg.Name, cfg.Inc)
	if err != nil {
		return err
	}
	defer j.close()
	opts := engine.Options{WriteHoldAfter: cfg.HoldAfter}
	if cfg.Hook {
		opts.BeforeFirstWrite = recovery.Hook(recovery.Options{})
	}
	db, closeDB, err := openChild(ctx, opts, cfg.Lossy, cfg.Seed)
	if err != nil {
		return err
	}
	defer closeDB()
	w := &worker{cfg: cfg, j: j, rng: rand.New(rand.NewSource(cfg.Seed)), tbls: map[string]*engine.Table{},
		alive: map[int64]bool{}, tainted: map[int64]bool{}}
	for _, name := range []string{mainTable, owTable} {
		// Opening reads the catalog and one manifest; retry what a lossy store fails.
		var tbl *engine.Table
		for try := 0; ; try++ {
			if tbl, err = db.OpenTable(ctx, name); err == nil || try == 20 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		w.tbls[name] = tbl
	}
	// Rebuild what earlier incarnations knew; run again, under the same key, the
	// operation the last incarnation was killed in. An operation killed earlier was
	// abandoned by a forgetful incarnation: running it again now, perhaps thousands of
	// keyed writes later, would be outside the window in which the table remembers its
	// key (manifest.ConfigIdempotencyKeys), where a duplicate is documented behaviour.
	var again []*opState
	ops := opsOf(entries)
	for i, o := range ops {
		w.nextOp = o.Op + 1
		if o.killed() {
			if cfg.Forget || i < len(ops)-1 {
				w.learn(o.Kind, o.Table, o.IDs, engine.Unknown.String())
			} else {
				again = append(again, o)
			}
			continue
		}
		w.learn(o.Kind, o.Table, o.IDs, o.End.Outcome)
	}
	for _, o := range again {
		if err := w.run(ctx, entry{Op: o.Op, Key: o.Key, Kind: o.Kind, Table: o.Table, IDs: o.IDs}, o.Begins); err != nil {
			return err
		}
	}
	for w.nextOp < cfg.Ops && !stopped(cfg.Dir) {
		if err := w.run(ctx, w.plan(), 0); err != nil {
			return err
		}
		if cfg.Pace > 0 {
			time.Sleep(time.Duration(w.rng.Int63n(int64(2 * cfg.Pace))))
		}
	}
	return nil
}

// plan picks the next operation.
func (w *worker) plan() entry {
	op := w.nextOp
	w.nextOp++
	e := entry{Op: op, Key: fmt.Sprintf("%s-op%d", w.cfg.Name, op)}
	var mine []int64
	for id := range w.alive {
		if !w.tainted[id] {
			mine = append(mine, id)
		}
	}
	slices.Sort(mine)
	fresh := func(n int) []int64 {
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = rowID(w.cfg.Index, op, i)
		}
		return ids
	}
	switch r := w.rng.Intn(100); {
	case r < 15 && len(mine) > 0:
		e.Kind, e.Table, e.IDs = kindDelete, mainTable, []int64{mine[w.rng.Intn(len(mine))]}
	case r < 35 && len(mine) > 0:
		e.Kind, e.Table, e.IDs = kindUpdate, mainTable, []int64{mine[w.rng.Intn(len(mine))]}
	case r < 65:
		e.Kind, e.Table, e.IDs = kindAppend, mainTable, fresh(1+w.rng.Intn(20))
	case r < 85:
		e.Kind, e.Table, e.IDs = kindAppend, owTable, fresh(1+w.rng.Intn(10))
	default:
		e.Kind, e.Table, e.IDs = kindOverwrite, owTable, fresh(1+w.rng.Intn(10))
	}
	return e
}

// run journals the operation, runs it (Table.Retry on Unknown; then, while the outcome
// stays unknown, again under the same key as a new transaction, as a client would),
// journals the outcome and learns from it. attempt numbers the run (0: the first).
func (w *worker) run(ctx context.Context, e entry, attempt int) error {
	e.T, e.Attempt = "begin", attempt
	if err := w.j.write(e); err != nil {
		return err
	}
	end := w.exec(ctx, e)
	for again := 0; end.Outcome == engine.Unknown.String() && !w.cfg.Forget && again < 2; again++ {
		e.Attempt++
		if err := w.j.write(e); err != nil {
			return err
		}
		end = w.exec(ctx, e)
	}
	if err := w.j.write(end); err != nil {
		return err
	}
	w.learn(e.Kind, e.Table, e.IDs, end.Outcome)
	return nil
}

// exec runs one operation and returns its end entry.
func (w *worker) exec(ctx context.Context, e entry) entry {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tbl := w.tbls[e.Table]
	if e.Kind == kindOverwrite || w.rng.Intn(2) == 0 {
		_ = tbl.Refresh(ctx) // a failed refresh leaves the handle where it was
	}
	opt := engine.WithIdempotencyKey(e.Key)
	var (
		res engine.CommitResult
		err error
	)
	where := func() string { return fmt.Sprintf("id = %d", e.IDs[0]) }
	switch e.Kind {
	case kindAppend:
		rec := batch(e.IDs, e.Key)
		res, err = tbl.AppendRecord(ctx, rec, opt)
		rec.Release()
	case kindOverwrite:
		rec := batch(e.IDs, e.Key)
		rdr, rerr := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
		if rerr != nil {
			panic(rerr)
		}
		res, err = tbl.Overwrite(ctx, rdr, opt)
		rdr.Release()
		rec.Release()
	case kindDelete:
		res, err = tbl.Delete(ctx, where(), opt)
	case kindUpdate:
		res, err = tbl.Update(ctx, map[string]string{"val": "val + 1"}, where(), opt)
	default:
		panic("unknown kind " + e.Kind)
	}
	retries := 0
	for engine.OutcomeOf(err) == engine.Unknown && retries < 3 {
		var ue *engine.UnknownError
		if !errors.As(err, &ue) {
			break
		}
		time.Sleep(time.Duration(50+w.rng.Intn(200)) * time.Millisecond)
		retries++
		var rres engine.CommitResult
		rres, err = tbl.Retry(ctx, ue.Txn)
		rres.Rows = res.Rows
		res = rres
	}
	end := entry{T: "end", Op: e.Op, Key: e.Key, Kind: e.Kind, Table: e.Table,
		Outcome: engine.OutcomeOf(err).String(), Version: res.Version, Rows: res.Rows, Dup: res.Duplicate,
		Aborted: errors.Is(err, manifest.ErrTxnAborted), Conflict: errors.Is(err, manifest.ErrConflict), Retries: retries}
	if err != nil {
		end.Err = err.Error()
	}
	return end
}

// learn applies an operation's outcome to what the worker knows of its rows.
func (w *worker) learn(kind, table string, ids []int64, outcome string) {
	if table != mainTable {
		return
	}
	switch outcome {
	case engine.Committed.String():
		switch kind {
		case kindAppend:
			for _, id := range ids {
				w.alive[id] = true
			}
		case kindDelete:
			delete(w.alive, ids[0])
		}
	case engine.Unknown.String():
		for _, id := range ids {
			w.tainted[id] = true
		}
	}
}
