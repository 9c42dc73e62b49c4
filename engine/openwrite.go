package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"weak"
)

// firstWrites records, per DB, the tables whose Options.BeforeFirstWrite hook has run.
// It lives beside the DB rather than in it, keyed by a weak pointer and dropped when the
// DB is collected, so a DB value carries no hook state of its own.
var firstWrites sync.Map // weak.Pointer[DB] -> *writeGates

type writeGates struct {
	mu     sync.Mutex
	tables map[string]*writeGate
}

// writeGate serializes the first writes to one table: the first runs the hook, the
// others wait for it; after a success nobody runs it again.
type writeGate struct {
	mu   sync.Mutex
	done bool
}

// beforeFirstWrite runs Options.BeforeFirstWrite for table unless it already succeeded
// on this DB. Errors: the hook's, wrapped with the table name.
func (db *DB) beforeFirstWrite(ctx context.Context, table string) error {
	hook := db.opts.BeforeFirstWrite
	if hook == nil {
		return nil
	}
	key := weak.Make(db)
	v, loaded := firstWrites.Load(key)
	if !loaded {
		v, loaded = firstWrites.LoadOrStore(key, &writeGates{tables: map[string]*writeGate{}})
		if !loaded {
			runtime.AddCleanup(db, func(k weak.Pointer[DB]) { firstWrites.Delete(k) }, key)
		}
	}
	gates := v.(*writeGates)
	gates.mu.Lock()
	g := gates.tables[table]
	if g == nil {
		g = &writeGate{}
		gates.tables[table] = g
	}
	gates.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return nil
	}
	if err := hook(ctx, db.store, db.cat, table); err != nil {
		return fmt.Errorf("table %q: before first write: %w", table, err)
	}
	g.done = true
	return nil
}
