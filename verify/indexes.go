package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/index/btree"
	"github.com/shale-db/shale/index/zonemap"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// segmentSeen is what reading one index segment's objects taught (once per run; a
// segment's objects never change, only its coverage shrinks as fragments go).
type segmentSeen struct {
	ok   bool   // the objects were read whole and decoded
	desc string // kind, fields and files, to catch one uuid described two ways
	// BTree: the row offsets its pages hold, per fragment.
	offsets map[uint32]*roaring.Bitmap
	rows    int64
	// ZoneMap: its zones, per fragment, in stored order.
	zones map[uint32][]zonemap.Zone
}

// checkIndexes checks m's index segments (manifest.Index) against m and reads their
// objects. Per version: every field is in the schema, the segment was built from a
// version not after m, segments of one name share kind and fields and cover disjoint
// fragments, and every covered fragment is one of m's (ids; Build prunes coverage of
// fragments that are gone, so coverage only ever shrinks). Per segment, once per run:
// its objects are read whole (a BTree's lookup and every page of its pages file, each
// page's checksum checked by reading it; a zone map's object), their sizes and row counts
// must match the manifest's, and what they hold is checked against the table's data: a
// BTree page holds the value each of its row addresses has in the data and values within
// the page's bounds in the lookup, a zone's bounds and null counts hold its rows' values.
// Then, per version: a BTree holds every row of each covered fragment exactly once, and
// no row of a fragment of m it does not cover; a zone map's zones tile each covered
// fragment and name no fragment of m it does not cover. Faults name the object.
func (v *verifier) checkIndexes(ctx context.Context, m *manifest.Manifest, ids map[uint32]bool) {
	schema := map[int32]bool{}
	for _, id := range m.Schema.FieldIDs {
		schema[id] = true
	}
	type nameSeen struct {
		kind    string
		fields  []int32
		covered map[uint32]string // fragment → segment uuid
	}
	names := map[string]*nameSeen{}
	uuids := map[string]bool{}
	for i := range m.Indexes {
		ix := &m.Indexes[i]
		where := fmt.Sprintf("index %q segment %s", ix.Name, ix.UUID)
		fault := func(format string, args ...any) {
			v.rep.fault(m.Table, m.Version, m.Key(), where+": "+fmt.Sprintf(format, args...), manifest.ErrCorrupt)
		}
		if ix.UUID == "" || uuids[ix.UUID] {
			fault("segment uuid empty or used twice")
		}
		uuids[ix.UUID] = true
		if len(ix.FieldIDs) == 0 {
			fault("names no fields")
		}
		for _, id := range ix.FieldIDs {
			if !schema[id] {
				fault("references field id %d, which is not in the schema", id)
			}
		}
		if ix.Version > m.Version {
			fault("was built from version %d, after this one", ix.Version)
		}
		n := names[ix.Name]
		if n == nil {
			n = &nameSeen{kind: ix.Kind, fields: ix.FieldIDs, covered: map[uint32]string{}}
			names[ix.Name] = n
		} else if n.kind != ix.Kind || !slices.Equal(n.fields, ix.FieldIDs) {
			fault("is a %s on fields %v, another segment of the name a %s on fields %v", ix.Kind, ix.FieldIDs, n.kind, n.fields)
		}
		var gone []uint32
		for _, f := range ix.Fragments {
			if !ids[f] {
				gone = append(gone, f)
			}
			if other, dup := n.covered[f]; dup {
				fault("covers fragment %d, which segment %s of the name covers too", f, other)
			}
			n.covered[f] = ix.UUID
		}
		if len(gone) > 0 {
			fault("covers %d fragment(s) not in this version: %v", len(gone), gone)
		}
		for _, key := range ix.Files {
			if !strings.HasPrefix(key, manifest.IndicesDir(m.Table)+"/") || !strings.Contains(key, "/"+ix.UUID+"/") {
				fault("file %s is not under %s/<txn>/%s/", key, manifest.IndicesDir(m.Table), ix.UUID)
			}
		}
		allSchema := !slices.ContainsFunc(ix.FieldIDs, func(id int32) bool { return !schema[id] })
		switch ix.Kind {
		case index.KindBTree, index.KindZoneMap:
			if len(ix.Files) == 0 {
				fault("lists no objects")
				continue
			}
			if !allSchema {
				// Its objects cannot be checked against the data; they must exist.
				for _, key := range ix.Files {
					v.exists(ctx, m.Table, m.Version, key, fmt.Sprintf("index %q file", ix.Name))
				}
				continue
			}
			seen := v.readSegment(ctx, m, ix)
			if seen.ok {
				v.checkCoverage(m, ix, seen, ids)
			}
		default:
			fault("has unknown kind %q", ix.Kind)
			for _, key := range ix.Files {
				v.exists(ctx, m.Table, m.Version, key, fmt.Sprintf("index %q file", ix.Name))
			}
		}
	}
}

// readSegment reads ix's objects once per run (later versions naming the segment reuse
// what the first learned) and checks their content against m's data.
func (v *verifier) readSegment(ctx context.Context, m *manifest.Manifest, ix *manifest.Index) *segmentSeen {
	desc := fmt.Sprintf("%s on fields %v, files %v, %d rows, %d bytes", ix.Kind, ix.FieldIDs, ix.Files, ix.Rows, ix.Bytes)
	id := m.Table + "/" + ix.UUID
	if seen, ok := v.segments[id]; ok {
		if seen.desc != desc {
			v.rep.fault(m.Table, m.Version, m.Key(), fmt.Sprintf("index %q segment %s described as %s, but as %s before", ix.Name, ix.UUID, desc, seen.desc), manifest.ErrCorrupt)
		}
		return seen
	}
	seen := &segmentSeen{desc: desc}
	v.segments[id] = seen
	v.sum.IndexSegments++
	if ix.Kind == index.KindBTree {
		seen.ok = v.readBTree(ctx, m, ix, seen)
	} else {
		seen.ok = v.readZoneMap(ctx, m, ix, seen)
	}
	return seen
}

// readBTree reads a BTree's lookup and every page; each page's row addresses are checked
// against the values the data holds there (for fragments m has), and its values against
// the page's bounds.
func (v *verifier) readBTree(ctx context.Context, m *manifest.Manifest, ix *manifest.Index, seen *segmentSeen) bool {
	lkKey := ix.Files[0]
	objFault := func(key, problem string, err error) { v.objectFault(m.Table, m.Version, key, problem, err) }
	fault := func(key string, format string, args ...any) {
		v.rep.fault(m.Table, m.Version, key, fmt.Sprintf("index %q: ", ix.Name)+fmt.Sprintf(format, args...), manifest.ErrCorrupt)
	}
	lk, err := btree.ReadLookup(ctx, v.s, lkKey)
	if err != nil {
		objFault(lkKey, fmt.Sprintf("index %q btree lookup", ix.Name), err)
		return false
	}
	v.sum.IndexObjects++
	bytes := lk.Pages.Size
	if info, err := v.s.Head(ctx, lkKey); err == nil {
		bytes += info.Size
	}
	wantFiles := []string{lkKey}
	if lk.Pages.Key != "" {
		wantFiles = append(wantFiles, lk.Pages.Key)
	}
	if !slices.Equal(ix.Files, wantFiles) {
		fault(lkKey, "the manifest lists files %v, the lookup names %v", ix.Files, wantFiles)
		return false
	}
	if lk.Rows != ix.Rows {
		fault(lkKey, "the lookup holds %d rows, the manifest says %d", lk.Rows, ix.Rows)
	}
	if ix.Bytes > 0 && bytes != ix.Bytes {
		fault(lkKey, "the objects are %d bytes, the manifest says %d", bytes, ix.Bytes)
	}
	typ, err := lk.ValueType()
	if err != nil {
		objFault(lkKey, fmt.Sprintf("index %q btree lookup", ix.Name), fmt.Errorf("%w: value type: %v", manifest.ErrCorrupt, err))
		return false
	}
	schema := m.Schema.MustArrow()
	col := slices.Index(m.Schema.FieldIDs, ix.FieldIDs[0])
	if ft := schema.Field(col).Type; !arrow.TypeEqual(typ, ft) {
		fault(lkKey, "indexes %s values, column %q is %s", typ, schema.Field(col).Name, ft)
		return false
	}
	seen.offsets, seen.rows = map[uint32]*roaring.Bitmap{}, lk.Rows
	if lk.Rows == 0 {
		return true
	}
	pk := lk.Pages.Key
	fr, err := fragment.OpenFile(ctx, v.s, lk.Pages, v.mem)
	if err != nil {
		objFault(pk, fmt.Sprintf("index %q btree pages", ix.Name), err)
		return false
	}
	defer fr.Close()
	v.sum.IndexObjects++
	if fr.NumBatches() != len(lk.Pages.Batches) {
		fault(pk, "%d pages, the lookup lists %d", fr.NumBatches(), len(lk.Pages.Batches))
		return false
	}
	data := v.columnOf(ctx, m, ix.Fragments, ix.FieldIDs[0])
	defer data.release()
	var rows int64
	bad := 0 // value mismatches (reported once, with a count)
	var firstBad string
	for p := range fr.NumBatches() {
		rec, err := fr.ReadBatch(p, nil)
		if err != nil {
			objFault(pk, fmt.Sprintf("index %q btree pages (page %d)", ix.Name, p), err)
			return false
		}
		if rec.NumCols() != 2 || !arrow.TypeEqual(rec.Column(0).DataType(), typ) || rec.Column(1).DataType().ID() != arrow.UINT64 {
			fault(pk, "page %d has columns %s", p, rec.Schema())
			rec.Release()
			return false
		}
		vals := rec.Column(0)
		if st := lk.Pages.BatchStats(p); len(st) > 0 {
			if problem := boundsProblem(st[0], fragment.StatsOf(0, vals)); problem != "" {
				fault(pk, "page %d: %s", p, problem)
			}
		}
		addrs := rec.Column(1).(*array.Uint64).Uint64Values()
		for i, a := range addrs {
			f, off := uint32(a>>32), uint32(a)
			bm := seen.offsets[f]
			if bm == nil {
				bm = roaring.New()
				seen.offsets[f] = bm
			}
			if !bm.CheckedAdd(off) {
				fault(pk, "page %d holds row address %d (fragment %d row %d) twice", p, a, f, off)
			}
			if d, ok := data.cols[f]; ok && (int(off) >= d.Len() || !valueEqual(vals, i, d, int(off))) {
				if bad == 0 {
					firstBad = fmt.Sprintf("page %d row %d: fragment %d row %d", p, i, f, off)
				}
				bad++
			}
		}
		rows += rec.NumRows()
		rec.Release()
	}
	if bad > 0 {
		fault(pk, "%d value(s) differ from the table's data (first: %s)", bad, firstBad)
	}
	if rows != lk.Rows {
		fault(pk, "pages hold %d rows, the lookup says %d", rows, lk.Rows)
	}
	return true
}

// readZoneMap reads a zone map and checks each zone's bounds against the data of the
// fragments m has.
func (v *verifier) readZoneMap(ctx context.Context, m *manifest.Manifest, ix *manifest.Index, seen *segmentSeen) bool {
	key := ix.Files[0]
	fault := func(format string, args ...any) {
		v.rep.fault(m.Table, m.Version, key, fmt.Sprintf("index %q: ", ix.Name)+fmt.Sprintf(format, args...), manifest.ErrCorrupt)
	}
	if len(ix.Files) != 1 {
		v.rep.fault(m.Table, m.Version, m.Key(), fmt.Sprintf("index %q segment %s: a zone map has one object, the manifest lists %v", ix.Name, ix.UUID, ix.Files), manifest.ErrCorrupt)
		return false
	}
	zm, err := zonemap.Read(ctx, v.s, key)
	if err != nil {
		v.objectFault(m.Table, m.Version, key, fmt.Sprintf("index %q zone map", ix.Name), err)
		return false
	}
	v.sum.IndexObjects++
	if info, err := v.s.Head(ctx, key); err == nil && ix.Bytes > 0 && info.Size != ix.Bytes {
		fault("the object is %d bytes, the manifest says %d", info.Size, ix.Bytes)
	}
	if !slices.Equal(zm.FieldIDs, ix.FieldIDs) || zm.ZoneRows <= 0 {
		fault("zones of fields %v (%d rows each), the manifest says fields %v", zm.FieldIDs, zm.ZoneRows, ix.FieldIDs)
		return false
	}
	var rows int64
	seen.zones = map[uint32][]zonemap.Zone{}
	for _, z := range zm.Zones {
		seen.zones[z.Fragment] = append(seen.zones[z.Fragment], z)
		rows += int64(z.Rows)
	}
	if rows != ix.Rows {
		fault("zones hold %d rows, the manifest says %d", rows, ix.Rows)
	}
	for i, id := range ix.FieldIDs {
		data := v.columnOf(ctx, m, ix.Fragments, id)
		for f, d := range data.cols {
			for _, z := range seen.zones[f] {
				if int64(z.Start)+int64(z.Rows) > int64(d.Len()) {
					continue // reported by the coverage check
				}
				sl := array.NewSlice(d, int64(z.Start), int64(z.Start)+int64(z.Rows))
				problem := boundsProblem(z.Stats[i], fragment.StatsOf(id, sl))
				sl.Release()
				if problem != "" {
					fault("zone of fragment %d rows %d..%d, field %d: %s", f, z.Start, z.Start+z.Rows-1, id, problem)
				}
			}
		}
		data.release()
	}
	return true
}

// checkCoverage checks what a segment's objects hold against its coverage in m.
func (v *verifier) checkCoverage(m *manifest.Manifest, ix *manifest.Index, seen *segmentSeen, ids map[uint32]bool) {
	covered := map[uint32]bool{}
	for _, f := range ix.Fragments {
		covered[f] = true
	}
	key := ix.Files[len(ix.Files)-1]
	fault := func(format string, args ...any) {
		v.rep.fault(m.Table, m.Version, key, fmt.Sprintf("index %q: ", ix.Name)+fmt.Sprintf(format, args...), manifest.ErrCorrupt)
	}
	held := map[uint32]bool{}
	if ix.Kind == index.KindBTree {
		for f := range seen.offsets {
			held[f] = true
		}
	} else {
		for f := range seen.zones {
			held[f] = true
		}
	}
	for f := range held {
		if ids[f] && !covered[f] {
			// Fragment ids are never reused and coverage shrinks only when a fragment
			// goes, so this segment was committed with coverage that does not match
			// its objects: queries would trust it for a fragment it does not describe.
			fault("holds rows of fragment %d, which it does not cover", f)
		}
	}
	for i := range m.Fragments {
		f := &m.Fragments[i]
		if !covered[f.ID] {
			continue
		}
		if ix.Kind == index.KindBTree {
			bm := seen.offsets[f.ID]
			n := int64(0)
			if bm != nil {
				n = int64(bm.GetCardinality())
			}
			if n != f.PhysicalRows || (bm != nil && int64(bm.Maximum()) >= f.PhysicalRows) {
				fault("holds %d rows of fragment %d, which has %d", n, f.ID, f.PhysicalRows)
			}
			continue
		}
		next := int64(0)
		zs := slices.Clone(seen.zones[f.ID])
		slices.SortFunc(zs, func(a, b zonemap.Zone) int { return int(a.Start) - int(b.Start) })
		for _, z := range zs {
			if int64(z.Start) != next || z.Rows == 0 {
				break
			}
			next += int64(z.Rows)
		}
		if next != f.PhysicalRows || len(zs) == 0 && f.PhysicalRows > 0 {
			fault("zones of fragment %d do not tile its %d rows (%d zones)", f.ID, f.PhysicalRows, len(zs))
		}
	}
}

// boundsProblem says how recorded statistics fail to describe values whose exact
// statistics are actual ("" when they do: same null count, bounds that hold the values).
func boundsProblem(recorded, actual fragment.ColumnStats) string {
	if recorded.NullCount != actual.NullCount {
		return fmt.Sprintf("null count %d, the values have %d", recorded.NullCount, actual.NullCount)
	}
	hasMin := recorded.HasMin || recorded.HasMinMax
	hasMax := recorded.HasMax || recorded.HasMinMax
	actualMin := actual.HasMin || actual.HasMinMax
	actualMax := actual.HasMax || actual.HasMinMax
	if hasMin && actualMin && recorded.Min.Compare(actual.Min) > 0 {
		return fmt.Sprintf("minimum %v above the values' %v", recorded.Min, actual.Min)
	}
	if hasMax && actualMax && recorded.Max.Compare(actual.Max) < 0 {
		return fmt.Sprintf("maximum %v below the values' %v", recorded.Max, actual.Max)
	}
	return ""
}

// fragmentColumns is one column of several fragments, read whole.
type fragmentColumns struct {
	cols map[uint32]arrow.Array
}

func (c fragmentColumns) release() {
	for _, a := range c.cols {
		a.Release()
	}
}

// columnOf reads field id of each of frags that m has (every physical row; nulls for a
// fragment written before the column was added). A fragment whose data cannot be read
// is left out (its data files' faults are reported when they are read).
func (v *verifier) columnOf(ctx context.Context, m *manifest.Manifest, frags []uint32, id int32) fragmentColumns {
	out := fragmentColumns{cols: map[uint32]arrow.Array{}}
	schema, err := m.Schema.Arrow()
	if err != nil {
		return out
	}
	col := slices.Index(m.Schema.FieldIDs, id)
	if col < 0 {
		return out
	}
	typ := schema.Field(col).Type
	for _, fid := range frags {
		f, ok := m.Fragment(fid)
		if !ok {
			continue
		}
		i := slices.IndexFunc(f.Files, func(df fragment.DataFile) bool { return slices.Contains(df.FieldIDs, id) })
		if i < 0 {
			out.cols[fid] = array.MakeArrayOfNull(v.mem, typ, int(f.PhysicalRows))
			continue
		}
		df := f.Files[i]
		rd, err := fragment.OpenFile(ctx, v.s, df, v.mem)
		if err != nil {
			continue
		}
		fc := slices.Index(df.FieldIDs, id)
		var parts []arrow.Array
		okAll := true
		for b := range rd.NumBatches() {
			rec, err := rd.ReadBatch(b, []int{fc})
			if err != nil {
				okAll = false
				break
			}
			a := rec.Column(0)
			a.Retain()
			rec.Release()
			parts = append(parts, a)
		}
		rd.Close()
		if okAll && len(parts) > 0 {
			if whole, err := array.Concatenate(parts, v.mem); err == nil && arrow.TypeEqual(whole.DataType(), typ) {
				out.cols[fid] = whole
			} else if err == nil {
				whole.Release()
			}
		} else if okAll {
			out.cols[fid] = array.MakeArrayOfNull(v.mem, typ, 0)
		}
		for _, p := range parts {
			p.Release()
		}
	}
	return out
}

// valueEqual reports whether a[i] and b[j] (arrays of one type) hold the same value (two
// nulls are equal, and so are two NaNs).
func valueEqual(a arrow.Array, i int, b arrow.Array, j int) bool {
	if an, bn := a.IsNull(i), b.IsNull(j); an || bn {
		return an == bn
	}
	switch x := a.(type) {
	case *array.Int8:
		return x.Value(i) == b.(*array.Int8).Value(j)
	case *array.Int16:
		return x.Value(i) == b.(*array.Int16).Value(j)
	case *array.Int32:
		return x.Value(i) == b.(*array.Int32).Value(j)
	case *array.Int64:
		return x.Value(i) == b.(*array.Int64).Value(j)
	case *array.Uint8:
		return x.Value(i) == b.(*array.Uint8).Value(j)
	case *array.Uint16:
		return x.Value(i) == b.(*array.Uint16).Value(j)
	case *array.Uint32:
		return x.Value(i) == b.(*array.Uint32).Value(j)
	case *array.Uint64:
		return x.Value(i) == b.(*array.Uint64).Value(j)
	case *array.Float32:
		p, q := x.Value(i), b.(*array.Float32).Value(j)
		return p == q || p != p && q != q
	case *array.Float64:
		p, q := x.Value(i), b.(*array.Float64).Value(j)
		return p == q || p != p && q != q
	case *array.Date32:
		return x.Value(i) == b.(*array.Date32).Value(j)
	case *array.Date64:
		return x.Value(i) == b.(*array.Date64).Value(j)
	case *array.Timestamp:
		return x.Value(i) == b.(*array.Timestamp).Value(j)
	case *array.Boolean:
		return x.Value(i) == b.(*array.Boolean).Value(j)
	case *array.String:
		return x.Value(i) == b.(*array.String).Value(j)
	case *array.LargeString:
		return x.Value(i) == b.(*array.LargeString).Value(j)
	case *array.Binary:
		return string(x.Value(i)) == string(b.(*array.Binary).Value(j))
	case *array.LargeBinary:
		return string(x.Value(i)) == string(b.(*array.LargeBinary).Value(j))
	}
	return array.SliceEqual(a, int64(i), int64(i+1), b, int64(j), int64(j+1))
}
