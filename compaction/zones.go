package compaction

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/oklog/ulid/v2"

	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/index/zonemap"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// zoneIndex is a zone-map index of the read version whose zones the rewrite computes for
// its new fragments.
type zoneIndex struct {
	name     string
	fieldIDs []int32
	cols     []int // positions of fieldIDs in the table schema (the rewritten records')
}

// zoneIndexes lists m's zone-map indexes (one per name) whose fields are all in m's schema.
func zoneIndexes(m *manifest.Manifest) []zoneIndex {
	var out []zoneIndex
	for _, ix := range m.Indexes {
		if ix.Kind != index.KindZoneMap || slices.ContainsFunc(out, func(z zoneIndex) bool { return z.name == ix.Name }) {
			continue
		}
		z := zoneIndex{name: ix.Name, fieldIDs: ix.FieldIDs}
		for _, id := range ix.FieldIDs {
			c := slices.Index(m.Schema.FieldIDs, id)
			if c < 0 {
				z.cols = nil
				break
			}
			z.cols = append(z.cols, c)
		}
		if len(z.cols) > 0 {
			out = append(out, z)
		}
	}
	return out
}

// zoneAcc computes, as one group's rows are written, the zones of each zone-map index for
// each data file the group's writer produces. The writer cuts files at exactly fileRows
// rows, so a row's file and offset follow from its position in the group; zones start at
// multiples of zoneRows in their file and never span files. Zones name files by their
// ordinal in the group (the fragment id is known only once every group is written).
type zoneAcc struct {
	specs    []zoneIndex
	builders []*zonemap.Builder
	fileRows int64
	zoneRows int64
	mem      memory.Allocator

	pos        int64               // rows added so far
	pending    []arrow.RecordBatch // slices of the zone in progress
	zoneFile   int64
	zoneStart  int64 // offset of the zone in progress in its file
	zoneFilled int64
}

func newZoneAcc(specs []zoneIndex, fileRows int, mem memory.Allocator) *zoneAcc {
	if len(specs) == 0 {
		return nil
	}
	if fileRows <= 0 {
		fileRows = fragment.DefaultMaxRowsPerFile
	}
	a := &zoneAcc{specs: specs, fileRows: int64(fileRows), zoneRows: zonemap.DefaultZoneRows, mem: mem}
	for _, s := range specs {
		a.builders = append(a.builders, zonemap.NewBuilder(s.fieldIDs, zonemap.DefaultZoneRows))
	}
	return a
}

// add takes rec's rows (the next rows of the group, as written); rec stays the caller's.
func (a *zoneAcc) add(rec arrow.RecordBatch) error {
	if a == nil {
		return nil
	}
	n := rec.NumRows()
	for off := int64(0); off < n; {
		file, inFile := a.pos/a.fileRows, a.pos%a.fileRows
		start := inFile - inFile%a.zoneRows
		end := min(start+a.zoneRows, a.fileRows)
		if a.zoneFilled == 0 {
			a.zoneFile, a.zoneStart = file, start
		}
		take := min(n-off, end-inFile)
		a.pending = append(a.pending, rec.NewSlice(off, off+take))
		a.zoneFilled += take
		a.pos += take
		off += take
		if inFile+take == end {
			if err := a.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush turns the zone in progress into one zone per index.
func (a *zoneAcc) flush() error {
	if a.zoneFilled == 0 {
		return nil
	}
	defer func() {
		for _, r := range a.pending {
			r.Release()
		}
		a.pending, a.zoneFilled = nil, 0
	}()
	for i, s := range a.specs {
		cols := make([]arrow.Array, len(s.cols))
		for j, c := range s.cols {
			parts := make([]arrow.Array, len(a.pending))
			for k, r := range a.pending {
				parts[k] = r.Column(c)
			}
			whole, err := array.Concatenate(parts, a.mem)
			if err != nil {
				return fmt.Errorf("zone map %q: %w", s.name, err)
			}
			defer whole.Release()
			cols[j] = whole
		}
		if err := a.builders[i].Add(uint32(a.zoneFile), uint32(a.zoneStart), cols); err != nil {
			return fmt.Errorf("zone map %q: %w", s.name, err)
		}
	}
	return nil
}

// finish closes the last zone and checks that the writer cut files where the zones
// assumed (files holds their row counts in order).
func (a *zoneAcc) finish(files []int64) error {
	if a == nil {
		return nil
	}
	if err := a.flush(); err != nil {
		return err
	}
	left := a.pos
	for i, rows := range files {
		if rows != min(left, a.fileRows) {
			return fmt.Errorf("zone maps: data file %d of the group holds %d rows, zones assumed %d", i, rows, min(left, a.fileRows))
		}
		left -= rows
	}
	if left != 0 {
		return fmt.Errorf("zone maps: the group's data files hold %d rows fewer than written", left)
	}
	return nil
}

// release drops what a failed group left pending.
func (a *zoneAcc) release() {
	if a == nil {
		return
	}
	for _, r := range a.pending {
		r.Release()
	}
	a.pending = nil
}

// storeZoneMaps gives the new fragments of results (in group order) the ids Build will
// assign them, from m.NextFragmentID on (set as their ID: manifest.Build applies a
// segment only where that prediction held), and stores one zone-map segment per index of
// specs covering them all, under index.Dir(table, txnID, <new uuid>). It returns the
// segments to add to the Rewrite and the bytes written.
func storeZoneMaps(ctx context.Context, r *rewriter, specs []zoneIndex, results []groupResult, txnID string) ([]manifest.Index, int64, error) {
	if len(specs) == 0 {
		return nil, 0, nil
	}
	next := r.m.NextFragmentID
	var ids []uint32
	first := make([]uint32, len(results)) // predicted id of each group's first new fragment
	for g := range results {
		first[g] = next
		for j := range results[g].New {
			results[g].New[j].ID = next
			ids = append(ids, next)
			next++
		}
	}
	if len(ids) == 0 {
		return nil, 0, nil
	}
	var out []manifest.Index
	var written int64
	for i, s := range specs {
		zm := zonemap.Map{FieldIDs: s.fieldIDs, ZoneRows: zonemap.DefaultZoneRows}
		var rows int64
		for g, res := range results {
			if res.zones == nil {
				continue
			}
			for _, z := range res.zones.builders[i].Map().Zones {
				z.Fragment += first[g] // from the file's ordinal in the group
				zm.Zones = append(zm.Zones, z)
				rows += int64(z.Rows)
			}
		}
		uuid := ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader).String()
		key, size, err := zonemap.Store(ctx, r.store, index.Dir(r.m.Table, txnID, uuid), zm)
		if err != nil {
			return nil, written, fmt.Errorf("table %q: compaction: zone map %q of the new fragments: %w", r.m.Table, s.name, err)
		}
		written += size
		out = append(out, manifest.Index{Name: s.name, UUID: uuid, Kind: index.KindZoneMap, FieldIDs: s.fieldIDs,
			Fragments: slices.Clone(ids), Version: r.m.Version, Files: []string{key}, Rows: rows, Bytes: size})
	}
	return out, written, nil
}
