package waltest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// journal is a child's log of what it did, one line per event:
//
//	O <epoch>                 a shard claimed
//	T <first> <n>             an append of ids [first, first+n) is about to be made
//	A <first> <n> <position>  it was acknowledged (fsynced before the next line)
//	E <first> <n> <kind> …    it failed: kind fenced, unknown (the rows may be in the log) or error
//	F <kind> …                a flush: ok, fenced or error
//	M <version> <rows> …      a merge committed (rows merged; 0: nothing to merge)
//	X <kind> …                a merge failed
//
// A SIGKILL loses nothing written(2) before it; fsync makes acknowledgements survive a
// machine crash too. A torn last line is ignored by the reader.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

func journalPath(dir, name string) string { return filepath.Join(dir, name+".journal") }

func openJournal(dir, name string) (*journal, error) {
	f, err := os.OpenFile(journalPath(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &journal{f: f}, nil
}

func (j *journal) write(sync bool, format string, args ...any) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := fmt.Fprintf(j.f, format+"\n", args...); err != nil {
		return err
	}
	if sync {
		return j.f.Sync()
	}
	return nil
}

func (j *journal) close() { _ = j.f.Close() }

// errKind classifies an append's or a flush's error for the journal.
func errKind(err error) string {
	var ue *wal.UnknownError
	switch {
	case errors.Is(err, wal.ErrFenced):
		return "fenced"
	case errors.As(err, &ue) || errors.Is(err, store.ErrOutcomeUnknown):
		return "unknown"
	}
	return "error"
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// runWriter appends cfg.Batches batches (or until the stop file) through shard cfg.Shard.
func runWriter(ctx context.Context, db *engine.DB, j *journal, cfg childConfig) (int, error) {
	tbl, err := db.OpenTable(ctx, cfg.Table)
	if err != nil {
		return 1, err
	}
	var (
		mu     sync.Mutex
		w      *engine.WALWriter
		claims int
		done   bool // fenced for good (no reclaim) or out of claims
	)
	claim := func(stale *engine.WALWriter) (*engine.WALWriter, error) {
		mu.Lock()
		defer mu.Unlock()
		if w != stale || done {
			return w, nil
		}
		if stale != nil {
			_ = stale.Close(ctx) // fenced: fails, releases its memory
		}
		if cfg.MaxClaims > 0 && claims >= cfg.MaxClaims {
			done = true
			return w, nil
		}
		claims++
		nw, err := tbl.WAL(ctx, cfg.Shard)
		if err != nil {
			return nil, err
		}
		w = nw
		return w, j.write(true, "O %d", nw.Epoch())
	}
	if _, err := claim(nil); err != nil {
		return 1, err
	}
	goroutines := max(cfg.Goroutines, 1)
	var next, acked atomic.Int64
	var fenced atomic.Bool
	errc := make(chan error, goroutines)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				cur, stop := w, done
				mu.Unlock()
				b := next.Add(1) - 1
				if stop || (cfg.Batches > 0 && b >= int64(cfg.Batches)) || (cfg.Batches == 0 && stopped(cfg.Dir)) {
					return
				}
				first := cfg.From + b*int64(cfg.Rows)
				if err := j.write(false, "T %d %d", first, cfg.Rows); err != nil {
					errc <- err
					return
				}
				rec := batch(first, cfg.Rows, cfg.Name)
				ack, err := cur.Append(ctx, rec)
				rec.Release()
				if err != nil {
					kind := errKind(err)
					if jerr := j.write(true, "E %d %d %s %s", first, cfg.Rows, kind, oneLine(err)); jerr != nil {
						errc <- jerr
						return
					}
					if kind != "fenced" {
						errc <- fmt.Errorf("append [%d, %d): %w", first, first+int64(cfg.Rows), err)
						return
					}
					fenced.Store(true)
					if !cfg.Reclaim {
						mu.Lock()
						done = true
						mu.Unlock()
						return
					}
					if _, err := claim(cur); err != nil {
						errc <- err
						return
					}
					continue
				}
				if err := j.write(true, "A %d %d %s", first, cfg.Rows, ack.Position); err != nil {
					errc <- err
					return
				}
				if n := acked.Add(1); cfg.FlushEvery > 0 && n%int64(cfg.FlushEvery) == 0 {
					err := cur.Flush(ctx)
					if err == nil {
						_ = j.write(false, "F ok")
					} else {
						_ = j.write(false, "F %s %s", errKind(err), oneLine(err))
						if errKind(err) != "fenced" {
							errc <- fmt.Errorf("flush: %w", err)
							return
						}
					}
				}
				if cfg.Pace > 0 {
					time.Sleep(cfg.Pace)
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 1, err
	}
	if cfg.Abandon {
		return 0, nil // exits without closing: the memtable is lost, the entries stay
	}
	mu.Lock()
	cur := w
	mu.Unlock()
	if err := cur.Close(ctx); err != nil {
		_ = j.write(false, "F %s %s", errKind(err), oneLine(err))
		if errKind(err) != "fenced" {
			return 1, fmt.Errorf("close: %w", err)
		}
		fenced.Store(true)
	} else {
		_ = j.write(false, "F ok")
	}
	if fenced.Load() && !cfg.Reclaim {
		// Fenced for good: a further append must fail the same way.
		rec := batch(-1, 1, cfg.Name)
		_, err := cur.Append(ctx, rec)
		rec.Release()
		if err == nil {
			return 1, errors.New("an append after the writer was fenced and closed succeeded")
		}
		return exitFenced, nil
	}
	return 0, nil
}

// runReplay opens the shard (claim, fence, replay), then flushes and closes it.
func runReplay(ctx context.Context, db *engine.DB, j *journal, cfg childConfig) error {
	tbl, err := db.OpenTable(ctx, cfg.Table)
	if err != nil {
		return err
	}
	w, err := tbl.WAL(ctx, cfg.Shard)
	if err != nil {
		return err
	}
	if err := j.write(true, "O %d", w.Epoch()); err != nil {
		return err
	}
	if err := w.Close(ctx); err != nil {
		return err
	}
	return j.write(false, "F ok")
}

// runMerger merges the table's WAL once, or until the stop file appears.
func runMerger(ctx context.Context, db *engine.DB, j *journal, cfg childConfig) error {
	for {
		tbl, err := db.OpenTable(ctx, cfg.Table)
		if err != nil {
			return err
		}
		res, err := tbl.MergeWAL(ctx, engine.MergeWALOptions{})
		if err != nil {
			if jerr := j.write(false, "X %s %s", engine.OutcomeOf(err), oneLine(err)); jerr != nil {
				return jerr
			}
			if !cfg.Loop {
				return err
			}
		} else {
			var rows int64
			for _, s := range res.Shards {
				rows += s.Rows
			}
			if err := j.write(false, "M %d %d", res.Version, rows); err != nil {
				return err
			}
		}
		if !cfg.Loop || stopped(cfg.Dir) {
			return nil
		}
		if cfg.Pace > 0 {
			time.Sleep(cfg.Pace)
		}
	}
}

// ledger is what the journals say about rows: the ids appended (attempted) and those
// acknowledged.
type ledger struct {
	attempted map[int64]bool
	acked     map[int64]bool
	fencedIDs map[int64]bool // ids of appends that returned ErrFenced
	epochs    []uint64       // epochs claimed, in journal order
	merges    int            // M lines
	flushes   map[string]int // F lines by kind
}

// readLedger reads the journals of names in dir.
func readLedger(dir string, names ...string) (*ledger, error) {
	l := &ledger{attempted: map[int64]bool{}, acked: map[int64]bool{}, fencedIDs: map[int64]bool{}, flushes: map[string]int{}}
	for _, name := range names {
		lines, err := readLines(journalPath(dir, name))
		if err != nil {
			return nil, err
		}
		for _, line := range lines {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			span := func(m map[int64]bool) error {
				if len(f) < 3 {
					return fmt.Errorf("journal %s: bad line %q", name, line)
				}
				first, err1 := strconv.ParseInt(f[1], 10, 64)
				n, err2 := strconv.ParseInt(f[2], 10, 64)
				if err1 != nil || err2 != nil {
					return fmt.Errorf("journal %s: bad line %q", name, line)
				}
				for id := first; id < first+n; id++ {
					m[id] = true
				}
				return nil
			}
			switch f[0] {
			case "T":
				err = span(l.attempted)
			case "A":
				err = span(l.acked)
			case "E":
				if len(f) > 3 && f[3] == "fenced" {
					err = span(l.fencedIDs)
				}
			case "O":
				e, perr := strconv.ParseUint(f[1], 10, 64)
				if perr != nil {
					err = fmt.Errorf("journal %s: bad line %q", name, line)
				}
				l.epochs = append(l.epochs, e)
			case "M":
				l.merges++
			case "F":
				if len(f) > 1 {
					l.flushes[f[1]]++
				}
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}
