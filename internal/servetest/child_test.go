package servetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

func logPath(dir, name string) string     { return filepath.Join(dir, name+".log") }
func journalPath(dir, name string) string { return filepath.Join(dir, name+".journal") }

// serveConfig is the planner-wide config of cfg (every serve child of a test gets the
// same, else the later ones refuse to start).
func serveConfig(cfg childConfig) state.Config {
	return state.Config{PassInterval: cfg.PassInterval, LeaseTTL: cfg.LeaseTTL, IdleTimeout: cfg.IdleTimeout,
		Policy: plan.Policy{MinGenerations: cfg.MinGenerations}}
}

// runServe runs a serve process until the stop file appears or SIGTERM, then drains it.
// It logs as JSON lines to <dir>/<name>.log: "serve: bound", "serve: execution
// succeeded", "serve: execution ended" (with table, kind, assignment) tell the parent
// what ran where and when.
func runServe(cfg childConfig) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db, closeDB, err := openChild(ctx, cfg.Prefix)
	if err != nil {
		return err
	}
	defer closeDB()
	f, err := os.OpenFile(logPath(cfg.Dir, cfg.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	log := slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var slots map[plan.Kind]int
	if cfg.Slots != nil {
		slots = map[plan.Kind]int{}
		for k, n := range cfg.Slots {
			slots[plan.Kind(k)] = n
		}
	}
	if cfg.HoldAt != "" {
		failpoint.Enable(cfg.HoldAt, failpoint.Call(func(context.Context) error {
			if err := os.WriteFile(filepath.Join(cfg.Dir, "held"), nil, 0o644); err != nil {
				return err
			}
			for {
				if _, err := os.Stat(filepath.Join(cfg.Dir, "go")); err == nil {
					return nil
				}
				time.Sleep(2 * time.Millisecond)
			}
		}).Once())
	}
	s, err := serve.New(ctx, db, serve.Options{ID: cfg.ID, Slots: slots, Config: serveConfig(cfg), Logger: log,
		Recovery: recovery.Options{MinAge: cfg.RecoveryMinAge}})
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return err
	}
	for ctx.Err() == nil && !cfg.stopped() {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return s.Close(cctx)
}

// journal is a writer's log, one line per event:
//
//	T <table> <first> <n>          an append of ids [first, first+n) to table is about to be made
//	A <table> <first> <n>          it was acknowledged (fsynced before the next line)
//	E <table> <first> <n> <err>    it failed (the rows may or may not be there)
//	F <table> <shard> ok|<err>     a flush
//
// A SIGKILL loses nothing written(2) before it. A torn last line is ignored by the reader.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

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

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// runWriter appends batches round robin through cfg.Targets' shards (every
// PlainEvery-th batch by a plain append to cfg.Plain) until the stop file appears,
// then closes its writers (their last flush).
func runWriter(cfg childConfig) error {
	ctx := context.Background()
	db, closeDB, err := openChild(ctx, cfg.Prefix)
	if err != nil {
		return err
	}
	defer closeDB()
	j, err := openJournal(cfg.Dir, cfg.Name)
	if err != nil {
		return err
	}
	defer j.f.Close()
	ws := make([]*engine.WALWriter, len(cfg.Targets))
	acked := make([]int, len(cfg.Targets))
	for i, tg := range cfg.Targets {
		tbl, err := db.OpenTable(ctx, tg.Table)
		if err != nil {
			return err
		}
		if ws[i], err = tbl.WAL(ctx, tg.Shard); err != nil {
			return fmt.Errorf("table %s shard %d: %w", tg.Table, tg.Shard, err)
		}
	}
	next := cfg.From
	for b := 0; !cfg.stopped(); b++ {
		first := next
		next += int64(cfg.Rows)
		rec := batch(first, cfg.Rows, cfg.Name)
		if cfg.Plain != "" && cfg.PlainEvery > 0 && b%cfg.PlainEvery == cfg.PlainEvery-1 {
			if err := j.write(false, "T %s %d %d", cfg.Plain, first, cfg.Rows); err != nil {
				return err
			}
			tbl, err := db.OpenTable(ctx, cfg.Plain)
			if err == nil {
				_, err = tbl.AppendRecord(ctx, rec)
			}
			rec.Release()
			if err != nil {
				_ = j.write(true, "E %s %d %d %s", cfg.Plain, first, cfg.Rows, oneLine(err))
				return fmt.Errorf("plain append to %s: %w", cfg.Plain, err)
			}
			if err := j.write(true, "A %s %d %d", cfg.Plain, first, cfg.Rows); err != nil {
				return err
			}
		} else {
			i := b % len(ws)
			tg := cfg.Targets[i]
			if err := j.write(false, "T %s %d %d", tg.Table, first, cfg.Rows); err != nil {
				return err
			}
			_, err := ws[i].Append(ctx, rec)
			rec.Release()
			if err != nil {
				_ = j.write(true, "E %s %d %d %s", tg.Table, first, cfg.Rows, oneLine(err))
				return fmt.Errorf("append to %s shard %d: %w", tg.Table, tg.Shard, err)
			}
			if err := j.write(true, "A %s %d %d", tg.Table, first, cfg.Rows); err != nil {
				return err
			}
			if acked[i]++; cfg.FlushEvery > 0 && acked[i]%cfg.FlushEvery == 0 {
				if err := ws[i].Flush(ctx); err != nil {
					_ = j.write(false, "F %s %d %s", tg.Table, tg.Shard, oneLine(err))
					return fmt.Errorf("flush %s shard %d: %w", tg.Table, tg.Shard, err)
				}
				_ = j.write(false, "F %s %d ok", tg.Table, tg.Shard)
			}
		}
		if cfg.Pace > 0 {
			time.Sleep(cfg.Pace)
		}
	}
	var errs []error
	for i, w := range ws {
		if err := w.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close %s shard %d: %w", cfg.Targets[i].Table, cfg.Targets[i].Shard, err))
		}
	}
	return errors.Join(errs...)
}
