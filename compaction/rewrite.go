package compaction

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/internal/panics"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// Seams on the rewrite's two goroutines per group: the reader (hit per input batch, after
// it is decoded) and the writer (hit per batch before it is encoded).
var (
	seamReadBatch  = failpoint.Seam("compaction.read_batch")
	seamWriteBatch = failpoint.Seam("compaction.write_batch")
)

// rewriter streams the live rows of planned groups into new data files.
type rewriter struct {
	store  store.Store
	m      *manifest.Manifest // the pinned read version
	dir    string             // where the new data files go
	schema *arrow.Schema      // the table schema at m
	write  fragment.WriterOptions
	mem    memory.Allocator
	zones  []zoneIndex // zone-map indexes whose zones of the new fragments are computed
}

// groupResult is what rewriting one group produced.
type groupResult struct {
	New       []manifest.Fragment
	Rows      int64 // live rows written
	Dropped   int64 // deleted rows left behind
	BytesRead int64 // data file bytes of the old fragments
	Written   int64 // bytes of the new data files
	zones     *zoneAcc
}

// rewriteAll rewrites every group with at most par groups at once. On error the files
// already written are left for garbage collection (no version names them).
func (r *rewriter) rewriteAll(ctx context.Context, groups []Group, par int) ([]groupResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]groupResult, len(groups))
	errs := make([]error, len(groups))
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i := range groups {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = r.rewriteGroup(ctx, groups[i])
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// readAhead is how many decoded input batches of one group may wait between its reader
// and its writer. With the batch the reader is producing and the one being written, a
// group holds at most readAhead+2 input batches besides what its fragment.Writer buffers
// (the rows of its next output batch and its current file).
const readAhead = 2

// rewriteGroup streams the live rows of g's fragments, in table order, into a writer of
// the table schema. Reading (GET, checksum, decompress, decode, deletion filter) runs on
// its own goroutine ahead of encoding and storing, through a channel of readAhead
// batches, so one group keeps two cores busy. Row order is kept (one reader, one FIFO).
// Memory: readAhead+2 input batches plus the writer's buffers. When either side fails the
// other is stopped and every batch in flight is released before rewriteGroup returns.
// A panic on either side is an error wrapping panics.ErrInternal (engine.ErrInternal).
func (r *rewriter) rewriteGroup(ctx context.Context, g Group) (res groupResult, err error) {
	defer r.recoverPanic(&err, "rewrite", "")
	w, err := fragment.NewWriter(ctx, r.store, r.dir, r.schema, r.m.Schema.FieldIDs, r.write)
	if err != nil {
		return res, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan arrow.RecordBatch, readAhead)
	var read groupResult // owned by the reader until batches is closed
	var readErr error
	go func() {
		defer close(batches)
		readErr = r.readGroup(rctx, g, batches, &read)
	}()
	// The zones of the new fragments' zone maps are computed from the rows as written.
	zones := newZoneAcc(r.zones, r.write.MaxRowsPerFile, r.mem)
	var writeErr error
	for rec := range batches {
		if writeErr == nil {
			err := r.writeBatch(w, rec)
			if err == nil {
				err = zones.add(rec)
			}
			if err != nil {
				writeErr = fmt.Errorf("table %q: write compacted data files: %w", r.m.Table, err)
				cancel() // stop the reader; the loop drains and releases what it sent
			}
		}
		rec.Release()
	}
	// batches is closed: the reader has returned and read, readErr are final.
	res.Rows, res.Dropped, res.BytesRead = read.Rows, read.Dropped, read.BytesRead
	if err := cmp.Or(writeErr, readErr); err != nil {
		zones.release()
		w.Close()
		return res, err
	}
	files, err := w.Close()
	if err != nil {
		zones.release()
		return res, fmt.Errorf("table %q: write compacted data files: %w", r.m.Table, err)
	}
	var fileRows []int64
	for _, df := range files {
		res.New = append(res.New, manifest.Fragment{Files: []fragment.DataFile{df}, PhysicalRows: df.Rows})
		res.Written += df.Size
		fileRows = append(fileRows, df.Rows)
	}
	if err := zones.finish(fileRows); err != nil {
		return res, fmt.Errorf("table %q: %w", r.m.Table, err)
	}
	res.zones = zones
	return res, nil
}

// writeBatch writes rec (which the caller keeps and releases) to w, turning a panic into
// an error naming the directory written to.
func (r *rewriter) writeBatch(w *fragment.Writer, rec arrow.RecordBatch) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panics.New("write data files under", r.dir, v)
		}
	}()
	if err := seamWriteBatch.Inject(context.Background()); err != nil {
		return err
	}
	return w.Write(rec)
}

// recoverPanic, deferred directly by code on a compaction goroutine, turns a panic into
// an error wrapping panics.ErrInternal that names the table, the read version and key (the
// object being read; "" when none).
func (r *rewriter) recoverPanic(errp *error, op, key string) {
	v := recover()
	if v == nil {
		return
	}
	err := panics.New(op, "", v)
	if key != "" {
		*errp = r.objectError(key, err)
		return
	}
	*errp = fmt.Errorf("table %q version %d: compaction: %w", r.m.Table, r.m.Version, err)
}

// readGroup sends the live rows of g's fragments, in table order, to out (each batch a
// reference the receiver releases), counting into res. It returns early with ctx's error
// when ctx is cancelled. It runs on its own goroutine: a panic is returned as an error.
func (r *rewriter) readGroup(ctx context.Context, g Group, out chan<- arrow.RecordBatch, res *groupResult) (err error) {
	defer r.recoverPanic(&err, "read", "")
	emit := func(rec arrow.RecordBatch) error {
		select {
		case out <- rec:
			return nil
		case <-ctx.Done():
			rec.Release()
			return ctx.Err()
		}
	}
	for _, id := range g.Old {
		f, ok := r.m.Fragment(id)
		if !ok {
			return fmt.Errorf("table %q version %d: fragment %d is not in the manifest", r.m.Table, r.m.Version, id)
		}
		if err := r.readFragment(ctx, f, emit, res); err != nil {
			return err
		}
	}
	return nil
}

// readFragment passes f's live rows to emit, which takes ownership of each batch. The data
// file must match the table schema (fragment.FileReader.CheckSchema). Errors name the
// table, version and object (*manifest.ObjectError): fragment.ErrCorrupt, store errors,
// panics.ErrInternal for a panic.
func (r *rewriter) readFragment(ctx context.Context, f *manifest.Fragment, emit func(arrow.RecordBatch) error, res *groupResult) (err error) {
	if len(f.Files) != 1 {
		return fmt.Errorf("table %q version %d: fragment %d has %d data files; compaction reads one per fragment", r.m.Table, r.m.Version, f.ID, len(f.Files))
	}
	df := f.Files[0]
	defer r.recoverPanic(&err, "read", df.Key)
	res.BytesRead += df.Size
	var dv *roaring.Bitmap
	if f.Deletion != nil {
		var err error
		if dv, err = fragment.ReadDeletionVector(ctx, r.store, f.Deletion.Key); err != nil {
			return r.objectError(f.Deletion.Key, err)
		}
		if dv.GetCardinality() >= uint64(f.PhysicalRows) {
			res.Dropped += f.PhysicalRows
			return nil // every row deleted: nothing to read
		}
	}
	// Map the table's columns onto the file's: a nullable column added after the file was
	// written reads as nulls; columns dropped since are not read.
	fileCols := make([]int, 0, r.schema.NumFields())
	recCol := make([]int, r.schema.NumFields())
	for i, id := range r.m.Schema.FieldIDs {
		recCol[i] = -1
		if fc := slices.Index(df.FieldIDs, id); fc >= 0 {
			recCol[i] = len(fileCols)
			fileCols = append(fileCols, fc)
		} else if !r.schema.Field(i).Nullable {
			return r.objectError(df.Key, fmt.Errorf("data file lacks non-nullable column %q", r.schema.Field(i).Name))
		}
	}
	rd, err := fragment.OpenFile(ctx, r.store, df, r.mem)
	if err != nil {
		return r.objectError(df.Key, err)
	}
	defer rd.Close()
	if err := rd.CheckSchema(r.schema, r.m.Schema.FieldIDs); err != nil {
		return r.objectError(df.Key, err)
	}
	var start int64
	for b := range rd.NumBatches() {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := rd.ReadBatch(b, fileCols)
		if err != nil {
			return r.objectError(df.Key, err)
		}
		if err := seamReadBatch.Inject(ctx); err != nil {
			rec.Release()
			return err
		}
		n := rec.NumRows()
		named := r.relabel(rec, recCol)
		rec.Release()
		out, dropped, err := r.live(ctx, named, dv, start)
		named.Release()
		if err != nil {
			return fmt.Errorf("table %q: filter deleted rows of %s: %w", r.m.Table, df.Key, err)
		}
		start += n
		res.Dropped += dropped
		if out.NumRows() == 0 {
			out.Release()
			continue
		}
		res.Rows += out.NumRows()
		if err := emit(out); err != nil {
			return err
		}
	}
	if start != f.PhysicalRows {
		return r.objectError(df.Key, fmt.Errorf("%w: data file has %d rows, manifest says %d", fragment.ErrCorrupt, start, f.PhysicalRows))
	}
	return nil
}

// relabel returns rec's columns under the table schema (nulls for columns the file lacks).
func (r *rewriter) relabel(rec arrow.RecordBatch, recCol []int) arrow.RecordBatch {
	n := rec.NumRows()
	cols := make([]arrow.Array, len(recCol))
	for i, c := range recCol {
		if c >= 0 {
			cols[i] = rec.Column(c)
			continue
		}
		cols[i] = array.MakeArrayOfNull(r.mem, r.schema.Field(i).Type, int(n))
		defer cols[i].Release()
	}
	return array.NewRecordBatch(r.schema, cols, n)
}

// live returns rec without the rows dv deletes (rec's first row is row offset start of its
// fragment) and how many it dropped. The result is a new reference either way.
func (r *rewriter) live(ctx context.Context, rec arrow.RecordBatch, dv *roaring.Bitmap, start int64) (arrow.RecordBatch, int64, error) {
	n := rec.NumRows()
	if dv == nil || !dv.IntersectsWithInterval(uint64(start), uint64(start+n)) {
		rec.Retain()
		return rec, 0, nil
	}
	b := array.NewBooleanBuilder(r.mem)
	defer b.Release()
	b.Reserve(int(n))
	for i := int64(0); i < n; i++ {
		b.UnsafeAppend(!dv.Contains(uint32(start + i)))
	}
	mask := b.NewBooleanArray()
	defer mask.Release()
	// Filter into the executor's allocator, like every other batch of the rewrite.
	out, err := compute.FilterRecordBatch(compute.WithAllocator(ctx, r.mem), rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, 0, err
	}
	return out, n - out.NumRows(), nil
}

func (r *rewriter) objectError(key string, err error) error {
	return &manifest.ObjectError{Table: r.m.Table, Version: r.m.Version, Key: key, Err: err}
}
