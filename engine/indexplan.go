package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/index/btree"
	"github.com/shale-db/shale/index/zonemap"
	"github.com/shale-db/shale/manifest"
)

// IndexUse says how a scan used (or did not use) the table's indexes; ScanPlan.Indexes
// lists one per index the planner considered.
type IndexUse struct {
	Name string `json:"name"` // the index name
	Kind string `json:"kind"` // index.KindBTree or index.KindZoneMap
	// Used: the index chose the candidate rows of the fragments it covers; otherwise
	// Reason says why not (no condition on its column, or a scan is cheaper).
	Used   bool   `json:"used"`
	Reason string `json:"reason,omitempty"` // why the index was not used, in words; "" when Used
	// Fragments covered by the index among the version's live fragments.
	FragmentsCovered int `json:"fragments_covered"`
	// BTree: pages read and skipped (by their bounds); rows it returned.
	PagesRead    int `json:"pages_read,omitempty"`
	PagesSkipped int `json:"pages_skipped,omitempty"` // BTree pages whose bounds cannot match
	// ZoneMap: zones that may match and zones skipped.
	ZonesRead    int `json:"zones_read,omitempty"`
	ZonesSkipped int `json:"zones_skipped,omitempty"` // zones whose min, max and null count cannot match
	// Candidates is the number of row addresses (BTree) or rows of matching zones
	// (ZoneMap) the scan then reads and filters.
	Candidates int64 `json:"candidates"`
}

// indexCache keeps decoded index lookups and zone maps of a DB (immutable objects, keyed
// by object key). Safe for concurrent use.
type indexCache struct {
	mu    sync.Mutex
	trees map[string]*btree.Reader
	zones map[string]zonemap.Map
}

func (db *DB) btreeReader(ctx context.Context, key string) (*btree.Reader, error) {
	c := &db.indexes
	c.mu.Lock()
	r, ok := c.trees[key]
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	lk, err := btree.ReadLookup(ctx, db.store, key)
	if err != nil {
		return nil, err
	}
	r, err = btree.NewReader(db.store, lk, db.opts.Allocator)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trees == nil {
		c.trees = map[string]*btree.Reader{}
	}
	if prev, ok := c.trees[key]; ok {
		return prev, nil
	}
	c.trees[key] = r
	return r, nil
}

func (db *DB) zoneMap(ctx context.Context, key string) (zonemap.Map, error) {
	c := &db.indexes
	c.mu.Lock()
	m, ok := c.zones[key]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := zonemap.Read(ctx, db.store, key)
	if err != nil {
		return zonemap.Map{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.zones == nil {
		c.zones = map[string]zonemap.Map{}
	}
	c.zones[key] = m
	return m, nil
}

// btreeScanFraction: a BTree is used when its candidate rows (pages that may match times
// rows per page) are at most this fraction of the rows of the fragments it covers;
// otherwise scanning them (with statistics pruning) is cheaper.
const btreeScanFraction = 0.25

// indexGroup is the segments of one index.
type indexGroup struct {
	name, kind string
	fieldIDs   []int32
	segs       []manifest.Index
}

func groupIndexes(m *manifest.Manifest) []*indexGroup {
	var out []*indexGroup
	for _, ix := range m.Indexes {
		i := slices.IndexFunc(out, func(g *indexGroup) bool { return g.name == ix.Name })
		if i < 0 {
			out = append(out, &indexGroup{name: ix.Name, kind: ix.Kind, fieldIDs: ix.FieldIDs})
			i = len(out) - 1
		}
		out[i].segs = append(out[i].segs, ix)
	}
	return out
}

// selection is, per fragment, the row offsets an index allows (nil: not restricted).
type selection map[uint32]*roaring.Bitmap

// useIndexes narrows p's tasks with the version's indexes: the cheapest usable BTree
// chooses the candidate rows of the fragments it covers, zone maps the zones of other
// covered fragments; fragments no index covers keep their statistics-pruned tasks.
// Results never depend on it: the whole filter is evaluated on every candidate row.
func (p *scanPlan) useIndexes(ctx context.Context) error {
	t := p.t
	m := t.m
	if p.expr == nil || len(m.Indexes) == 0 {
		return nil
	}
	live := map[uint32]bool{}
	for _, f := range m.Fragments {
		live[f.ID] = true
	}
	names := map[int32]string{}
	schema := t.Schema()
	for i, id := range m.Schema.FieldIDs {
		names[id] = schema.Field(i).Name
	}
	sel := selection{}
	restricted := map[uint32]bool{}
	groups := groupIndexes(m)
	// BTrees first: pick the one with the fewest candidates.
	type treeChoice struct {
		g          *indexGroup
		use        *IndexUse
		candidates int64
		covered    map[uint32]bool
		readers    []*btree.Reader
	}
	var best *treeChoice
	usable := map[string]int64{} // BTrees that could be used: their candidate rows
	for _, g := range groups {
		use := IndexUse{Name: g.name, Kind: g.kind}
		covered := map[uint32]bool{}
		for _, s := range g.segs {
			for _, f := range s.Fragments {
				if live[f] {
					covered[f] = true
				}
			}
		}
		use.FragmentsCovered = len(covered)
		if len(g.fieldIDs) == 0 {
			continue
		}
		col, ok := names[g.fieldIDs[0]]
		var cond *filter.Expr
		hasCond := false
		if ok && g.kind == index.KindBTree {
			cond, hasCond = p.expr.Implied(col)
		}
		// Batches statistics left in the fragments the index covers: with one or none an
		// index can only cost requests (reading its objects) and save nothing.
		left := 0
		for _, task := range p.tasks {
			if covered[task.frag.ID] {
				left++
			}
		}
		switch {
		case len(covered) == 0:
			use.Reason = "it covers no live fragment"
		case !ok:
			use.Reason = "its column left the schema"
		case g.kind == index.KindBTree && !hasCond:
			use.Reason = fmt.Sprintf("the filter puts no condition on %s alone", col)
		case !p.force && left == 0:
			use.Reason = "statistics already skip every batch of the fragments it covers"
		case !p.force && left == 1:
			use.Reason = "statistics already leave 1 batch of the fragments it covers: it could only add requests"
		case g.kind == index.KindBTree:
			c := &treeChoice{g: g, covered: covered}
			var coveredRows int64
			for _, f := range m.Fragments {
				if covered[f.ID] {
					coveredRows += f.PhysicalRows
				}
			}
			for _, s := range g.segs {
				if len(s.Files) < 1 {
					return t.dataError(fmt.Sprint(s.Files), fmt.Errorf("%w: btree index %q segment %s lists no objects", manifest.ErrCorrupt, g.name, s.UUID))
				}
				r, err := t.db.btreeReader(ctx, s.Files[0])
				if err != nil {
					return fmt.Errorf("table %q version %d: index %q: %w", t.name, m.Version, g.name, err)
				}
				c.readers = append(c.readers, r)
				c.candidates += int64(len(r.Pages(col, cond))) * int64(r.Lookup().PageRows)
			}
			if !p.force && float64(c.candidates) > btreeScanFraction*float64(coveredRows) {
				use.Reason = fmt.Sprintf("about %d candidate rows of %d covered: a scan is cheaper", c.candidates, coveredRows)
				break
			}
			c.use = &use
			usable[g.name] = c.candidates
			if best == nil || c.candidates < best.candidates {
				best = c
			}
		}
		p.indexUses = append(p.indexUses, use)
	}
	if best != nil {
		col := names[best.g.fieldIDs[0]]
		cond, _ := p.expr.Implied(col)
		for i := range p.indexUses {
			if n, ok := usable[p.indexUses[i].Name]; ok && p.indexUses[i].Name != best.g.name {
				p.indexUses[i].Reason = fmt.Sprintf("index %q has fewer candidate rows (about %d, this one %d)", best.g.name, best.candidates, n)
			}
		}
		use := &p.indexUses[slices.IndexFunc(p.indexUses, func(u IndexUse) bool { return u.Name == best.g.name })]
		use.Used = true
		use.Reason = ""
		for _, r := range best.readers {
			addrs, st, err := r.Search(ctx, col, cond)
			if err != nil {
				return fmt.Errorf("table %q version %d: index %q: %w", t.name, m.Version, best.g.name, err)
			}
			use.PagesRead += st.PagesRead
			use.PagesSkipped += st.PagesSkipped
			it := addrs.Iterator()
			for it.HasNext() {
				a := it.Next()
				f := uint32(a >> 32)
				if !best.covered[f] {
					continue // a fragment removed since the segment was built
				}
				bm := sel[f]
				if bm == nil {
					bm = roaring.New()
					sel[f] = bm
				}
				bm.Add(uint32(a))
			}
		}
		for f := range best.covered {
			restricted[f] = true
			if sel[f] == nil {
				sel[f] = roaring.New()
			}
			use.Candidates += int64(sel[f].GetCardinality())
		}
	}
	// Zone maps for covered fragments the BTree did not restrict.
	for i := range p.indexUses {
		use := &p.indexUses[i]
		g := groups[slices.IndexFunc(groups, func(g *indexGroup) bool { return g.name == use.Name })]
		if g.kind != index.KindZoneMap || use.FragmentsCovered == 0 || use.Reason != "" {
			continue
		}
		use.Used = true
		for _, s := range g.segs {
			if len(s.Files) < 1 {
				continue
			}
			zm, err := t.db.zoneMap(ctx, s.Files[0])
			if err != nil {
				return fmt.Errorf("table %q version %d: index %q: %w", t.name, m.Version, g.name, err)
			}
			zones, st := zm.Search(p.expr, names, func(f uint32) bool { return live[f] && !restricted[f] && slices.Contains(s.Fragments, f) })
			use.ZonesRead += st.Zones - st.ZonesSkipped
			use.ZonesSkipped += st.ZonesSkipped
			use.Candidates += st.Rows
			for _, f := range s.Fragments {
				if live[f] && !restricted[f] && sel[f] == nil {
					sel[f] = roaring.New()
				}
			}
			for _, z := range zones {
				sel[z.Fragment].AddRange(uint64(z.Start), uint64(z.Start)+uint64(z.Rows))
			}
		}
	}
	if len(sel) == 0 {
		return nil
	}
	// Keep only the batches holding candidate rows, restricted to them.
	var tasks []batchTask
	byFrag := map[uint32][2]int{} // fragment: tasks before, tasks kept
	for _, task := range p.tasks {
		bm, ok := sel[task.frag.ID]
		if !ok {
			tasks = append(tasks, task)
			continue
		}
		c := byFrag[task.frag.ID]
		c[0]++
		part := roaring.New()
		part.AddRange(uint64(task.rowStart), uint64(task.rowStart+task.rows))
		part.And(bm)
		if !part.IsEmpty() {
			task.sel = part
			tasks = append(tasks, task)
			c[1]++
		}
		byFrag[task.frag.ID] = c
	}
	// An index pays only when it leaves fewer batches to read than statistics did: a
	// batch is read whole whatever its candidates, so candidates spread over most of the
	// batches (a common value in unsorted data, a range statistics already prune) make the
	// index a cost. Then the plan keeps the statistics' tasks (results are the same).
	var before, kept int
	for _, c := range byFrag {
		before += c[0]
		kept += c[1]
	}
	if !p.force && float64(kept) > indexBatchFraction*float64(before) {
		for i := range p.indexUses {
			if p.indexUses[i].Used {
				p.indexUses[i].Used = false
				p.indexUses[i].Reason = fmt.Sprintf("its candidates are in %d of the %d batches statistics leave: a scan reads the same", kept, before)
			}
		}
		return nil
	}
	p.pruned.BatchesPruned += before - kept
	p.indexPruned = before - kept
	p.tasks = tasks
	return nil
}

// indexBatchFraction: the indexes' candidate rows are used only when they lie in at most
// this fraction of the batches statistics pruning leaves.
const indexBatchFraction = 0.8

// ScanPlan is what a scan does, as the planner decided it (Table.Explain).
type ScanPlan struct {
	// Filter is the WHERE expression as bound ("" for none).
	Filter string `json:"filter"`
	// Fragments, Batches: the version's; pruned by statistics or indexes.
	Fragments       int `json:"fragments"`
	FragmentsPruned int `json:"fragments_pruned"` // skipped whole: no live rows, or statistics show no row can match
	Batches         int `json:"batches"`          // record batches of the fragments kept
	BatchesPruned   int `json:"batches_pruned"`   // of Batches, skipped by statistics or by an index
	// BatchesPrunedByIndex is the part of BatchesPruned that indexes skipped (batches
	// statistics kept that hold no candidate row).
	BatchesPrunedByIndex int `json:"batches_pruned_by_index"`
	// BatchesRead is what the scan reads (one range request each, plus one per data file
	// opened).
	BatchesRead int `json:"batches_read"`
	// Indexes says how each index was used, or why not.
	Indexes []IndexUse `json:"indexes"`
	// WAL is what the scan reads from the table's write-ahead log.
	WAL WALPlan `json:"wal"`
}

func (p *scanPlan) describe() ScanPlan {
	sp := ScanPlan{Fragments: p.pruned.Fragments, FragmentsPruned: p.pruned.FragmentsPruned, Batches: p.pruned.Batches,
		BatchesPruned: p.pruned.BatchesPruned, BatchesPrunedByIndex: p.indexPruned, BatchesRead: len(p.tasks), Indexes: p.indexUses, WAL: p.wal}
	if p.expr != nil {
		sp.Filter = p.expr.String()
	}
	if sp.Indexes == nil {
		sp.Indexes = []IndexUse{}
	}
	return sp
}

// Explain plans a scan of this version with opts and returns the plan without reading any
// data (index lookups and the pages or zones a BTree or zone map needs are read: that is
// how the plan is made). Errors: as Scan.
func (t *Table) Explain(ctx context.Context, opts ScanOptions) (ScanPlan, error) {
	p, err := t.plan(ctx, opts)
	if err != nil {
		return ScanPlan{}, err
	}
	defer p.close()
	return p.describe(), nil
}

// Plan is the plan the scanner runs.
func (s *Scanner) Plan() ScanPlan { return s.plan.describe() }
