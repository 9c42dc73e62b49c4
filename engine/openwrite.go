package engine

import (
	"context"
	"fmt"
	"sync"
)

// writeGates records the tables whose Options.BeforeFirstWrite hook has run on a DB.
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
	gates := &db.firstWrites
	gates.mu.Lock()
	g := gates.tables[table]
	if g == nil {
		if gates.tables == nil {
			gates.tables = map[string]*writeGate{}
		}
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
