package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// Kinds of object a query reads, as query --explain reports them.
const (
	objIndex     = "index"            // <table>/_indices/…: BTree lookups and pages, zone maps
	objData      = "data"             // <table>/data/…: data files (footers and record batches)
	objDeletions = "deletion_vectors" // <table>/_deletions/…
	objMetadata  = "metadata"         // anything else: manifests, transaction records
)

var objectKinds = []string{objIndex, objData, objDeletions, objMetadata}

// objectReads counts the read requests (get, get_range, head, list) of one kind of object
// and the bytes they returned.
type objectReads struct {
	Kind     string `json:"kind"`
	Requests int64  `json:"requests"`
	Bytes    int64  `json:"bytes"`
}

// readCounter is a store.Store that counts reads per kind of object (query --explain).
// Writes pass through uncounted. Safe for concurrent use.
type readCounter struct {
	store.Store
	mu sync.Mutex
	by map[string]*objectReads
}

func newReadCounter(s store.Store) *readCounter {
	return &readCounter{Store: s, by: map[string]*objectReads{}}
}

func objectKind(key string) string {
	_, rest, ok := strings.Cut(key, "/")
	switch {
	case !ok:
		return objMetadata
	case strings.HasPrefix(rest, "_indices/"):
		return objIndex
	case strings.HasPrefix(rest, "data/"):
		return objData
	case strings.HasPrefix(rest, "_deletions/"):
		return objDeletions
	}
	return objMetadata
}

func (c *readCounter) count(key string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := objectKind(key)
	r := c.by[k]
	if r == nil {
		r = &objectReads{Kind: k}
		c.by[k] = r
	}
	r.Requests++
	r.Bytes += int64(n)
}

// reset zeroes the counts.
func (c *readCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.by = map[string]*objectReads{}
}

// snapshot returns the counts of every kind, in objectKinds order (zeros included).
func (c *readCounter) snapshot() []objectReads {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]objectReads, 0, len(objectKinds))
	for _, k := range objectKinds {
		r := objectReads{Kind: k}
		if got := c.by[k]; got != nil {
			r = *got
		}
		out = append(out, r)
	}
	return out
}

func (c *readCounter) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := c.Store.Get(ctx, key)
	c.count(key, len(b))
	return b, err
}

func (c *readCounter) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	b, err := c.Store.GetRange(ctx, key, offset, length)
	c.count(key, len(b))
	return b, err
}

func (c *readCounter) Head(ctx context.Context, key string) (store.ObjectInfo, error) {
	info, err := c.Store.Head(ctx, key)
	c.count(key, 0)
	return info, err
}

func (c *readCounter) List(ctx context.Context, prefix string, limit int) ([]store.ObjectInfo, error) {
	objs, err := c.Store.List(ctx, prefix, limit)
	c.count(prefix, 0)
	return objs, err
}

// explainJSON is query --explain --json.
type explainJSON struct {
	Table    string          `json:"table"`
	Version  uint64          `json:"version"`
	Where    string          `json:"where"`
	Executed bool            `json:"executed"` // always true: the query runs (EXPLAIN ANALYZE)
	NoIndex  bool            `json:"no_index"`
	Count    bool            `json:"count"`
	Limit    int64           `json:"limit,omitempty"`
	Plan     engine.ScanPlan `json:"plan"`
	Rows     int64           `json:"rows"` // rows the query returned (counted, not printed)
	// Requests are the store's request attempts by kind and the bytes read, from planning
	// through the last batch; Objects the same reads by kind of object.
	Requests   requestsJSON  `json:"requests"`
	Objects    []objectReads `json:"objects"`
	PlanningMS int64         `json:"planning_ms"`
	ElapsedMS  int64         `json:"elapsed_ms"`
}

type requestsJSON struct {
	Total     int64            `json:"total"`
	ByOp      map[string]int64 `json:"by_op"`
	BytesRead int64            `json:"bytes_read"`
}

const explainHelp = `--explain runs the query and prints its plan instead of its rows (EXPLAIN ANALYZE): the
fragments and record batches statistics skipped, each index and whether it was used
(pages or zones read and skipped, candidate rows) or why not, then what running it
cost: the rows it returned, the object requests and bytes by kind of object (index,
data files, deletion vectors), and the time. The process starts cold, so index lookups
are read from the store; a long-running library user caches them. --no-index scans
without indexes (the same rows), to compare. --explain with --count explains the count.`

// explain runs a scan of t with opts, counting its reads, and prints the plan and the
// cost (query --explain).
func (a *app) explain(ctx context.Context, name string, v *uint64, opts engine.ScanOptions, count bool) error {
	rc := (*readCounter)(nil)
	a.wrapStore = func(s store.Store) store.Store {
		rc = newReadCounter(s)
		return rc
	}
	t, err := a.tableAt(ctx, name, v)
	if err != nil {
		return err
	}
	pin, err := t.Pin(ctx)
	if err != nil {
		if errors.Is(err, manifest.ErrVersionNotFound) {
			return versionNotFound(ctx, a.db, name, t.Version(), err)
		}
		return err
	}
	defer pin.Release(ctx)
	a.noteVersion(ctx, t, v != nil)
	if count {
		opts.Columns = []string{} // what --count reads: the filter's columns only
	}
	rc.reset()
	before := a.store.Counters().Snapshot()
	start := time.Now()
	sc, err := t.Scan(ctx, opts)
	if err != nil {
		return err
	}
	planning := time.Since(start)
	var rows int64
	for sc.Next() {
		rows += sc.RecordBatch().NumRows()
	}
	err = sc.Err()
	plan := sc.Plan()
	sc.Release()
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	reqs := a.store.Counters().Snapshot().Sub(before)
	out := explainJSON{Table: t.Name(), Version: t.Version(), Where: opts.Filter, Executed: true, NoIndex: opts.NoIndex, Count: count,
		Limit: opts.Limit, Plan: plan, Rows: rows, Objects: rc.snapshot(), PlanningMS: planning.Milliseconds(), ElapsedMS: elapsed.Milliseconds(),
		Requests: requestsJSON{Total: reqs.Total(), ByOp: map[string]int64{}, BytesRead: reqs.BytesRead}}
	for op, n := range reqs.ByOp {
		out.Requests.ByOp[string(op)] = n
	}
	if a.jsonOut {
		return a.printJSON(out)
	}
	a.printExplain(out, reqs, planning, elapsed)
	return nil
}

func (a *app) printExplain(e explainJSON, reqs store.Requests, planning, elapsed time.Duration) {
	p := e.Plan
	a.printf("Plan of %s, version %d (the query ran; its rows were counted, not printed)\n", e.Table, e.Version)
	if p.Filter != "" {
		a.printf("  filter     %s\n", p.Filter)
	} else {
		a.printf("  filter     none: every row\n")
	}
	kept := p.Fragments - p.FragmentsPruned
	a.printf("  fragments  %s of %s read; %s skipped whole (no live rows, or statistics exclude every row)\n",
		thousands(int64(kept)), thousands(int64(p.Fragments)), thousands(int64(p.FragmentsPruned)))
	byStats := p.BatchesPruned - p.BatchesPrunedByIndex
	a.printf("  batches    %s of the %s record %s of those fragments read; %s skipped by statistics, %s by indexes\n",
		thousands(int64(p.BatchesRead)), thousands(int64(p.Batches)), batchNoun(p.Batches), thousands(int64(byStats)), thousands(int64(p.BatchesPrunedByIndex)))
	switch {
	case e.NoIndex:
		a.printf("  indexes    not used (--no-index)\n")
	case len(p.Indexes) == 0:
		a.printf("  indexes    none ('shale index create %s --column C' builds one)\n", e.Table)
	}
	for _, u := range p.Indexes {
		a.printf("  index      %s\n", describeIndexUse(u))
	}
	if w := p.WAL; w.Shards > 0 {
		a.printf("  wal        %s read: %s unmerged %s scanned with the fragments above, %s from the log\n",
			plural(int64(w.Shards), "shard"), thousands(int64(w.Generations)), generationNoun(w.Generations), plural(w.LogRows, "row"))
	}
	what := "returned"
	if e.Count {
		what = "counted"
	}
	a.printf("Ran in %s (planning %s): %s %s %s", seconds(elapsed), seconds(planning), thousands(e.Rows), rowNoun(e.Rows), what)
	if e.Limit > 0 {
		a.printf(" (--limit %s: the scan stopped there)", thousands(e.Limit))
	}
	a.printf("\n")
	var ops []string
	for _, op := range []store.Op{store.OpGet, store.OpGetRange, store.OpHead, store.OpList} {
		if n := reqs.ByOp[op]; n > 0 {
			ops = append(ops, fmt.Sprintf("%s %s", op, thousands(n)))
		}
	}
	detail := ""
	if len(ops) > 0 {
		detail = " (" + strings.Join(ops, ", ") + ")"
	}
	a.printf("  requests   %s%s, %s read\n", plural(reqs.Total(), "object request"), detail, humanBytes(reqs.BytesRead))
	names := map[string]string{objIndex: "index objects", objData: "data files", objDeletions: "deletion vectors", objMetadata: "metadata"}
	for _, o := range e.Objects {
		if o.Requests == 0 {
			continue
		}
		a.printf("    %-17s %s, %s\n", names[o.Kind], plural(o.Requests, "request"), humanBytes(o.Bytes))
	}
}

// batchNoun is "batch" for 1, else "batches".
func batchNoun(n int) string {
	if n == 1 {
		return "batch"
	}
	return "batches"
}

// describeIndexUse says in one line how the planner used one index, or why not.
func describeIndexUse(u engine.IndexUse) string {
	return fmt.Sprintf("%s (%s): %s", u.Name, u.Kind, indexUseDetail(u))
}

// indexUseDetail is describeIndexUse without the index's name and kind.
func indexUseDetail(u engine.IndexUse) string {
	head := ""
	var parts []string
	if u.PagesRead+u.PagesSkipped > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s read (%s skipped by their bounds)", thousands(int64(u.PagesRead)),
			plural(u.PagesRead+u.PagesSkipped, "page"), thousands(int64(u.PagesSkipped))))
	}
	if u.ZonesRead+u.ZonesSkipped > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s may match (%s skipped)", thousands(int64(u.ZonesRead)),
			plural(u.ZonesRead+u.ZonesSkipped, "zone"), thousands(int64(u.ZonesSkipped))))
	}
	if !u.Used {
		why := u.Reason
		if why == "" {
			why = "not needed"
		}
		head += "not used: " + why
		if len(parts) > 0 {
			head += "; " + strings.Join(parts, ", ")
		}
		return head
	}
	parts = append(parts, plural(u.Candidates, "candidate row"))
	return head + fmt.Sprintf("used for %s: ", plural(u.FragmentsCovered, "fragment")) + strings.Join(parts, ", ")
}

func generationNoun(n int) string {
	if n == 1 {
		return "generation"
	}
	return "generations"
}
