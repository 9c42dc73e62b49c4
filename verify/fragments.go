package verify

import (
	"context"
	"fmt"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// deep checks every fragment, data file, deletion vector and index entry of m, reading
// each data file and deletion vector in full (once per run).
func (v *verifier) deep(ctx context.Context, m *manifest.Manifest) error {
	ids := map[uint32]bool{}
	for i := range m.Fragments {
		if err := ctx.Err(); err != nil {
			return err
		}
		f := &m.Fragments[i]
		for _, p := range fragmentProblems(m, f, ids) {
			v.rep.fault(m.Table, m.Version, m.Key(), p, manifest.ErrCorrupt)
		}
		ids[f.ID] = true
		fields := map[int32]bool{}
		for _, df := range f.Files {
			for _, p := range dataFileProblems(f, df, fields) {
				v.rep.fault(m.Table, m.Version, df.Key, p, manifest.ErrCorrupt)
			}
			v.readDataFile(ctx, m, df)
		}
		if f.Deletion != nil {
			v.readDeletionVector(ctx, m, f)
		}
	}
	v.checkIndexes(ctx, m, ids)
	return nil
}

// fragmentProblems lists what is wrong with fragment f's description in m (ids holds the
// fragment ids seen before it).
func fragmentProblems(m *manifest.Manifest, f *manifest.Fragment, ids map[uint32]bool) []string {
	var out []string
	if ids[f.ID] {
		out = append(out, fmt.Sprintf("fragment %d appears twice", f.ID))
	}
	if f.ID >= m.NextFragmentID {
		out = append(out, fmt.Sprintf("fragment %d is not below the next fragment id %d", f.ID, m.NextFragmentID))
	}
	if len(f.Files) == 0 {
		out = append(out, fmt.Sprintf("fragment %d has no data files", f.ID))
	}
	if f.PhysicalRows < 0 || f.PhysicalRows > 1<<32 {
		out = append(out, fmt.Sprintf("fragment %d has %d physical rows", f.ID, f.PhysicalRows))
	}
	if d := f.Deletion; d != nil && (d.Deleted < 0 || d.Deleted > f.PhysicalRows) {
		out = append(out, fmt.Sprintf("fragment %d deletes %d of %d rows", f.ID, d.Deleted, f.PhysicalRows))
	}
	return out
}

// dataFileProblems lists what is wrong with df's description as a file of fragment f
// (fields holds the field ids of f's files before it, and gains df's).
func dataFileProblems(f *manifest.Fragment, df fragment.DataFile, fields map[int32]bool) []string {
	var out []string
	if df.Rows != f.PhysicalRows {
		out = append(out, fmt.Sprintf("data file describes %d rows, fragment %d has %d physical rows", df.Rows, f.ID, f.PhysicalRows))
	}
	if len(df.Batches) > 0 {
		var sum int64
		for _, b := range df.Batches {
			sum += b.Rows
		}
		if sum != df.Rows {
			out = append(out, fmt.Sprintf("data file's batches hold %d rows, its description says %d", sum, df.Rows))
		}
	}
	for _, id := range df.FieldIDs {
		if fields[id] {
			out = append(out, fmt.Sprintf("field id %d is in more than one data file of fragment %d", id, f.ID))
		}
		fields[id] = true
	}
	return out
}

// firstRead reports whether key has not been read in this run, and records it. A key
// read before under a different description is a fault (stored objects are immutable).
func (v *verifier) firstRead(m *manifest.Manifest, key, desc string) bool {
	seen, ok := v.files[key]
	if !ok {
		v.files[key] = fileSeen{desc: desc, version: m.Version}
		return true
	}
	if seen.desc != desc {
		v.rep.fault(m.Table, m.Version, key, fmt.Sprintf("described as %s, but as %s by version %d", desc, seen.desc, seen.version), manifest.ErrCorrupt)
	}
	return false
}

// readDataFile opens df and reads every record batch: OpenFile checks the footer CRC32C,
// the field ids and the batch count against the description, CheckSchema each column's
// type against m's schema field of the same field id, each ReadBatch the batch's CRC32C;
// the rows read must add up to df.Rows.
func (v *verifier) readDataFile(ctx context.Context, m *manifest.Manifest, df fragment.DataFile) {
	desc := fmt.Sprintf("%d bytes, %d rows, footer %08x", df.Size, df.Rows, df.FooterCRC32C)
	if !v.firstRead(m, df.Key, desc) {
		return
	}
	v.sum.DataFiles++
	n := len(v.rep.Faults)
	r, err := fragment.OpenFile(ctx, v.s, df, v.mem)
	if err != nil {
		v.objectFault(m.Table, m.Version, df.Key, "data file", err)
		v.storedSize(ctx, df.Key, df.Size, n)
		return
	}
	defer r.Close()
	schema, err := m.Schema.Arrow()
	if err != nil {
		v.rep.fault(m.Table, m.Version, m.Key(), "schema does not decode", err)
	} else if err := r.CheckSchema(schema, m.Schema.FieldIDs); err != nil {
		v.objectFault(m.Table, m.Version, df.Key, "data file", err)
		v.storedSize(ctx, df.Key, df.Size, n)
		return
	}
	var rows int64
	for i := 0; i < r.NumBatches(); i++ {
		rec, err := r.ReadBatch(i, nil)
		if err != nil {
			v.objectFault(m.Table, m.Version, df.Key, fmt.Sprintf("data file (record batch %d)", i), err)
			v.storedSize(ctx, df.Key, df.Size, n)
			return
		}
		rows += rec.NumRows()
		rec.Release()
	}
	v.sum.Bytes += df.Size
	if rows != df.Rows {
		v.rep.fault(m.Table, m.Version, df.Key, fmt.Sprintf("data file holds %d rows, its description says %d", rows, df.Rows), fragment.ErrCorrupt)
	}
}

// storedSize learns the size of a data file that failed its checks from the store (one
// HEAD), counts it in the summary's bytes, and records it on the faults about key added
// since the first n, whose problem also names the manifest's size (want) when the two
// differ. A missing or unreachable object leaves the size unknown.
func (v *verifier) storedSize(ctx context.Context, key string, want int64, n int) {
	info, err := v.s.Head(ctx, key)
	if err != nil {
		return
	}
	v.sum.Bytes += info.Size
	v.rep.sized(n, key, info.Size)
	if info.Size != want {
		for i := n; i < len(v.rep.Faults); i++ {
			if v.rep.Faults[i].Key == key {
				v.rep.Faults[i].Problem += fmt.Sprintf(" (the manifest says %d bytes)", want)
			}
		}
	}
}

// readDeletionVector reads f's deletion vector: it must decode (its checksum holds), be
// the size the manifest says, hold exactly Deleted rows, all below PhysicalRows.
func (v *verifier) readDeletionVector(ctx context.Context, m *manifest.Manifest, f *manifest.Fragment) {
	d := f.Deletion
	desc := fmt.Sprintf("%d bytes, %d deleted of %d rows", d.Size, d.Deleted, f.PhysicalRows)
	if !v.firstRead(m, d.Key, desc) {
		return
	}
	v.sum.Deletions++
	b, err := v.s.Get(ctx, d.Key)
	if err != nil {
		v.objectFault(m.Table, m.Version, d.Key, "deletion vector", err)
		return
	}
	v.sum.Bytes += int64(len(b))
	n := len(v.rep.Faults)
	defer v.rep.sized(n, d.Key, int64(len(b)))
	if d.Size > 0 && int64(len(b)) != d.Size {
		v.rep.fault(m.Table, m.Version, d.Key, fmt.Sprintf("deletion vector is %d bytes, the manifest says %d", len(b), d.Size), fragment.ErrCorrupt)
	}
	bm, err := fragment.DecodeDeletionVector(d.Key, b)
	if err != nil {
		v.objectFault(m.Table, m.Version, d.Key, "deletion vector", err)
		return
	}
	if c := int64(bm.GetCardinality()); c != d.Deleted {
		v.rep.fault(m.Table, m.Version, d.Key, fmt.Sprintf("deletion vector holds %d rows, the manifest says %d deleted", c, d.Deleted), fragment.ErrCorrupt)
	}
	if !bm.IsEmpty() && int64(bm.Maximum()) >= f.PhysicalRows {
		v.rep.fault(m.Table, m.Version, d.Key, fmt.Sprintf("deletion vector deletes row %d, fragment %d has %d physical rows", bm.Maximum(), f.ID, f.PhysicalRows), fragment.ErrCorrupt)
	}
}
