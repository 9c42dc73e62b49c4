package chaostest

import (
	"context"
	"math/rand"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/gc"
	"github.com/shale-db/shale/recovery"
)

// Maintenance processes loop until the stop file appears, journaling each run ("maint").
// Their operations' errors (conflicts, fenced attempts, a hold lost while paused) are
// expected under chaos and only counted; what they leave behind is checked at the end.

// compactTargetRows keeps every fragment small, so compaction always has work.
const compactTargetRows = 100

// maint opens a maintenance child's DB and journal and calls step until the stop file
// appears, sleeping between steps.
func maint(cfg childConfig, pause func(*rand.Rand) time.Duration, step func(ctx context.Context, db *engine.DB, rng *rand.Rand) entry) error {
	ctx := context.Background()
	j, err := openJournal(cfg.Dir, cfg.Name, cfg.Inc)
	if err != nil {
		return err
	}
	defer j.close()
	db, closeDB, err := openChild(ctx, engine.Options{}, false, cfg.Seed)
	if err != nil {
		return err
	}
	defer closeDB()
	rng := rand.New(rand.NewSource(cfg.Seed))
	for !stopped(cfg.Dir) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		e := step(sctx, db, rng)
		cancel()
		e.T = "maint"
		if err := j.write(e); err != nil {
			return err
		}
		time.Sleep(pause(rng))
	}
	return nil
}

func pickTable(rng *rand.Rand) string {
	if rng.Intn(3) == 0 {
		return owTable
	}
	return mainTable
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// runCompactor compacts a random table with recovery sidecars (as the CLI does).
func runCompactor(cfg childConfig) error {
	return maint(cfg, func(rng *rand.Rand) time.Duration { return time.Duration(100+rng.Intn(500)) * time.Millisecond },
		func(ctx context.Context, db *engine.DB, rng *rand.Rand) entry {
			table := pickTable(rng)
			st, err := recovery.Enable(compaction.New(db)).Run(ctx, table, compaction.Options{TargetRows: compactTargetRows, Parallelism: 1})
			return entry{What: "compact", Table: table, Version: st.Version, Count: st.FragmentsRemoved, Err: errString(err)}
		})
}

// runRecoverer resolves sidecars older than a small minimum age.
func runRecoverer(cfg childConfig) error {
	return maint(cfg, func(rng *rand.Rand) time.Duration { return time.Duration(200+rng.Intn(600)) * time.Millisecond },
		func(ctx context.Context, db *engine.DB, rng *rand.Rand) entry {
			table := pickTable(rng)
			opts := recovery.Options{MinAge: time.Duration(200+rng.Intn(1800)) * time.Millisecond, ClaimTTL: 5 * time.Second, FenceWait: time.Second}
			rep, err := recovery.Recover(ctx, db.Store(), db.Catalog(), table, opts)
			e := entry{What: "recover", Table: table, Err: errString(err)}
			for _, o := range rep.Outcomes {
				switch o.Action {
				case recovery.RolledBack, recovery.RolledForward, recovery.AlreadyPublished:
					e.Count++
					e.Deleted += len(o.DeletedFiles)
					if o.Fence != 0 {
						e.Fenced++
					}
				}
			}
			return e
		})
}

// runGC alternates garbage collection at the smallest grace the CLI allows (1 min, as
// `shale gc --grace 1m` runs it: gc.Run, no recovery) and at zero grace with recovery
// (gc.RunWithRecover: the library only), keeping few versions.
func runGC(cfg childConfig) error {
	n := 0
	return maint(cfg, func(rng *rand.Rand) time.Duration { return time.Duration(300+rng.Intn(1200)) * time.Millisecond },
		func(ctx context.Context, db *engine.DB, rng *rand.Rand) entry {
			n++
			table := ""
			if rng.Intn(2) == 0 {
				table = pickTable(rng)
			}
			p := gc.Policy{KeepLast: 1 + rng.Intn(3), FenceWait: time.Second}
			var (
				rep gc.Report
				err error
			)
			what := "gc-1m"
			if n%2 == 1 {
				p.GracePeriod = time.Minute
				rep, err = gc.Run(ctx, db.Store(), db.Catalog(), table, p)
			} else {
				what = "gc-0"
				p.GracePeriod = -1
				rep, err = gc.RunWithRecover(ctx, db.Store(), db.Catalog(), table, p,
					recovery.Options{MinAge: 2 * time.Second, ClaimTTL: 5 * time.Second, FenceWait: time.Second})
			}
			e := entry{What: what, Table: table, Err: errString(err)}
			for _, tr := range rep.Tables {
				e.Deleted += len(tr.Deleted)
				e.Fenced += tr.FencedTxns
				e.Expired += len(tr.Expired)
			}
			return e
		})
}
