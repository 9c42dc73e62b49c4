package chaostest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
)

// reader runs beside the chaos in the test process (never paused): it watches the
// published pointers (invariant 2: they never move backwards; invariant 3: HEAD is never
// below them), and now and then pins the published version of a table and scans it. A
// pinned scan must succeed (GC keeps what a pin needs, invariant 13), and what it read is
// kept to be compared, after the run, with the model at that version.
type reader struct {
	db   *engine.DB
	rng  *rand.Rand
	stop chan struct{}
	done chan struct{}

	mu         sync.Mutex
	violations []string
	samples    map[string][]sample
	scans      int
	pinMissed  int // the version expired between reading the pointer and the pin
	lastPub    map[string]uint64
}

// sample is what one pinned scan read.
type sample struct {
	v    uint64
	rows map[int64]row
	dups []int64
}

// maxSamples bounds the samples kept per table (each later scan replaces a random one).
const maxSamples = 40

func startReader(db *engine.DB, seed int64) *reader {
	r := &reader{db: db, rng: rand.New(rand.NewSource(seed)), stop: make(chan struct{}), done: make(chan struct{}),
		samples: map[string][]sample{}, lastPub: map[string]uint64{}}
	go r.loop()
	return r
}

func (r *reader) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

func (r *reader) halt() {
	close(r.stop)
	<-r.done
}

func (r *reader) loop() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-time.After(time.Duration(50+r.rng.Intn(300)) * time.Millisecond):
		}
		for _, table := range []string{mainTable, owTable} {
			r.watch(table)
		}
		if r.rng.Intn(2) == 0 {
			r.scan(pickTable(r.rng))
		}
	}
}

// watch reads the published pointer, then HEAD.
func (r *reader) watch(table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, _, err := r.db.Catalog().Get(ctx, table)
	if err != nil {
		r.fail("%s: read the published pointer: %v", table, err)
		return
	}
	head, err := manifest.Head(ctx, r.db.Store(), table)
	if err != nil {
		r.fail("%s: read HEAD: %v", table, err)
		return
	}
	if p.Version < r.lastPub[table] {
		r.fail("%s: the published version moved backwards from %d to %d (invariant 2)", table, r.lastPub[table], p.Version)
	}
	if head < p.Version {
		r.fail("%s: HEAD %d read after the published version %d is below it (invariant 3)", table, head, p.Version)
	}
	r.lastPub[table] = p.Version
}

// scan pins the published version of table and reads it.
func (r *reader) scan(table string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tbl, err := r.db.OpenTable(ctx, table)
	if err != nil {
		r.fail("%s: open the published version: %v", table, err)
		return
	}
	pin, err := tbl.Pin(ctx)
	if errors.Is(err, manifest.ErrVersionNotFound) {
		r.mu.Lock()
		r.pinMissed++
		r.mu.Unlock()
		return
	}
	if err != nil {
		r.fail("%s: pin version %d: %v", table, tbl.Version(), err)
		return
	}
	defer pin.Release(ctx)
	s := sample{v: tbl.Version(), rows: map[int64]row{}}
	sc, err := tbl.Scan(ctx, engine.ScanOptions{Columns: []string{"id", "val", "tag"}})
	if err != nil {
		r.fail("%s: scan pinned version %d: %v", table, s.v, err)
		return
	}
	defer sc.Release()
	for sc.Next() {
		rec := sc.RecordBatch()
		ids, vals, tags := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64), rec.Column(2).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			id := ids.Value(i)
			if _, ok := s.rows[id]; ok {
				s.dups = append(s.dups, id)
			}
			s.rows[id] = row{vals.Value(i), tags.Value(i)}
		}
	}
	if err := sc.Err(); err != nil {
		r.fail("%s: scan pinned version %d: %v", table, s.v, err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scans++
	if len(r.samples[table]) < maxSamples {
		r.samples[table] = append(r.samples[table], s)
	} else {
		r.samples[table][r.rng.Intn(maxSamples)] = s
	}
}
