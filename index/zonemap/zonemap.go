// Package zonemap is Shale's ZoneMap scalar index (DESIGN §8; Lance's layout,
// shared/reference/lance-format.md §6.2): for each covered fragment, zones of about
// DefaultZoneRows consecutive rows (a zone never spans fragments, so a fragment's last
// zone may be short) with, per indexed column, the minimum, maximum and null count. A
// search evaluates the predicate against each zone's bounds (filter.Expr.MayMatch, with
// every indexed column at once) and returns the row ranges of the zones that may match:
// a superset, on which the scan re-evaluates the predicate. One map can cover several
// columns, built in one pass.
//
// Object (under index.Dir): zones.zonemap, the framed CBOR Map; immutable.
package zonemap

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// DefaultZoneRows is the zone size (rows), as in Lance.
const DefaultZoneRows = 8192

// ObjectName is the object name of a zone map under its index's directory.
const ObjectName = "zones.zonemap"

var magicZones = [4]byte{'S', 'H', 'Z', 'M'}

// Zone is one zone of one fragment: rows Start .. Start+Rows-1 (offsets in the fragment).
type Zone struct {
	Fragment uint32                 `cbor:"1,keyasint"`           // the fragment id
	Start    uint32                 `cbor:"2,keyasint,omitempty"` // first row offset of the zone
	Rows     uint32                 `cbor:"3,keyasint"`           // rows in the zone (at most Map.ZoneRows)
	Stats    []manifest.ColumnStats `cbor:"4,keyasint"`           // one per Map.FieldIDs, in that order
}

// Map is a stored zone map.
type Map struct {
	FieldIDs []int32 `cbor:"1,keyasint"` // the indexed columns' field ids
	ZoneRows int     `cbor:"2,keyasint"` // rows per zone (DefaultZoneRows); a fragment's last zone may be shorter
	Zones    []Zone  `cbor:"3,keyasint"` // every zone of the covered fragments
}

// Builder accumulates the zones of fragments, added in any order but each fragment's
// rows in order. Not safe for concurrent use.
type Builder struct {
	m Map
}

// NewBuilder starts a zone map of the columns fieldIDs with zones of zoneRows rows (0:
// DefaultZoneRows).
func NewBuilder(fieldIDs []int32, zoneRows int) *Builder {
	if zoneRows <= 0 {
		zoneRows = DefaultZoneRows
	}
	return &Builder{m: Map{FieldIDs: append([]int32(nil), fieldIDs...), ZoneRows: zoneRows}}
}

// Add adds rows of fragment frag starting at offset start: cols holds one array per
// indexed column (the builder's field ids, in order), all of the same length. Zones are
// cut at multiples of the zone size from start, so add a fragment's rows in chunks that
// are multiples of it (or all at once) to get full zones. Errors: column count or
// length mismatch.
func (b *Builder) Add(frag uint32, start uint32, cols []arrow.Array) error {
	if len(cols) != len(b.m.FieldIDs) {
		return fmt.Errorf("zonemap: %d columns for %d indexed fields", len(cols), len(b.m.FieldIDs))
	}
	n := 0
	if len(cols) > 0 {
		n = cols[0].Len()
	}
	for _, c := range cols {
		if c.Len() != n {
			return fmt.Errorf("zonemap: columns of %d and %d rows", n, c.Len())
		}
	}
	for off := 0; off < n; off += b.m.ZoneRows {
		end := min(off+b.m.ZoneRows, n)
		z := Zone{Fragment: frag, Start: start + uint32(off), Rows: uint32(end - off)}
		for i, c := range cols {
			sl := sliceArray(c, off, end)
			z.Stats = append(z.Stats, fragment.StatsOf(b.m.FieldIDs[i], sl))
			sl.Release()
		}
		b.m.Zones = append(b.m.Zones, z)
	}
	return nil
}

// Map returns the zones added so far.
func (b *Builder) Map() Map { return b.m }

// Store writes m under dir (index.Dir) with put-if-absent and returns its key and size.
// Errors: store errors naming the key.
func Store(ctx context.Context, s store.Store, dir string, m Map) (string, int64, error) {
	b, err := manifest.Frame(magicZones, m)
	if err != nil {
		return "", 0, err
	}
	key := dir + "/" + ObjectName
	if err := s.PutIfAbsent(ctx, key, b); err != nil {
		return "", 0, fmt.Errorf("zonemap %s: %w", key, err)
	}
	return key, int64(len(b)), nil
}

// Read reads and checks the zone map at key (one GET). Errors: manifest.ErrCorrupt /
// ErrFormatTooNew naming the key, store errors.
func Read(ctx context.Context, s store.Store, key string) (Map, error) {
	b, err := s.Get(ctx, key)
	if err != nil {
		return Map{}, fmt.Errorf("zonemap %s: %w", key, err)
	}
	var m Map
	if err := manifest.Unframe(magicZones, b, &m); err != nil {
		return Map{}, fmt.Errorf("zonemap %s: %w", key, err)
	}
	for _, z := range m.Zones {
		if len(z.Stats) != len(m.FieldIDs) {
			return Map{}, fmt.Errorf("zonemap %s: %w: zone of fragment %d has %d column statistics for %d fields", key, manifest.ErrCorrupt, z.Fragment, len(z.Stats), len(m.FieldIDs))
		}
	}
	return m, nil
}

// Stats describe one search.
type Stats struct {
	Zones, ZonesSkipped int   // zones of the fragments searched; of those, zones that cannot match
	Rows                int64 // rows in the zones that may match
}

// Search returns the zones that may hold a row satisfying e (the whole predicate; names
// maps the map's field ids to the current column names, so only columns still in the
// schema are used), restricted to the fragments keep accepts (nil: all).
func (m Map) Search(e *filter.Expr, names map[int32]string, keep func(frag uint32) bool) ([]Zone, Stats) {
	var out []Zone
	var st Stats
	for _, z := range m.Zones {
		if keep != nil && !keep(z.Fragment) {
			continue
		}
		st.Zones++
		stats := func(col string) (filter.ColumnStats, bool) {
			for i, id := range m.FieldIDs {
				if n, ok := names[id]; ok && n == col {
					return index.FilterStats(z.Stats[i]), true
				}
			}
			return filter.ColumnStats{}, false
		}
		if e.MayMatch(int64(z.Rows), stats) {
			out = append(out, z)
			st.Rows += int64(z.Rows)
		} else {
			st.ZonesSkipped++
		}
	}
	return out, st
}
