package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// checkSchema reports whether records with schema got can be stored in a table with schema
// want: the same field names in the same order with identical types, and no nullable field
// stored into a non-nullable one. Errors wrap ErrSchemaMismatch and name the first difference.
func checkSchema(table string, want, got *arrow.Schema) error {
	if got.NumFields() != want.NumFields() {
		return fmt.Errorf("table %q: %w: records have %d columns (%s), the table has %d (%s)",
			table, ErrSchemaMismatch, got.NumFields(), fieldNames(got), want.NumFields(), fieldNames(want))
	}
	for i := range want.NumFields() {
		w, g := want.Field(i), got.Field(i)
		if w.Name != g.Name {
			return fmt.Errorf("table %q: %w: column %d is %q, the table has %q", table, ErrSchemaMismatch, i, g.Name, w.Name)
		}
		if !arrow.TypeEqual(w.Type, g.Type) && !widenable(g.Type, w.Type) {
			return fmt.Errorf("table %q: %w: column %q is %s, the table has %s", table, ErrSchemaMismatch, g.Name, g.Type, w.Type)
		}
	}
	return nil
}

// widenable reports whether values of type from convert to type to without loss: the
// string types (utf8, large_utf8, utf8_view) among themselves, likewise the binary types.
func widenable(from, to arrow.DataType) bool {
	family := func(t arrow.DataType) int {
		switch t.ID() {
		case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
			return 1
		case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
			return 2
		}
		return 0
	}
	return family(from) != 0 && family(from) == family(to)
}

// conform casts the columns of rec whose types differ from schema (only widenable ones
// reach here) and labels the result with schema.
func conform(ctx context.Context, schema *arrow.Schema, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, rec.NumCols())
	for i, col := range rec.Columns() {
		want := schema.Field(i).Type
		if arrow.TypeEqual(col.DataType(), want) {
			col.Retain()
			cols[i] = col
			continue
		}
		cast, err := compute.CastArray(ctx, col, compute.SafeCastOptions(want))
		if err != nil {
			for _, c := range cols[:i] {
				c.Release()
			}
			return nil, fmt.Errorf("%w: column %q: cast %s to %s: %v", ErrSchemaMismatch, schema.Field(i).Name, col.DataType(), want, err)
		}
		cols[i] = cast
	}
	out := array.NewRecordBatch(schema, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

// checkNulls refuses nulls in non-nullable columns.
func checkNulls(table string, schema *arrow.Schema, rec arrow.RecordBatch) error {
	for i, f := range schema.Fields() {
		if !f.Nullable && rec.Column(i).NullN() > 0 {
			return fmt.Errorf("table %q: %w: column %q is not nullable but the records hold %d nulls", table, ErrSchemaMismatch, f.Name, rec.Column(i).NullN())
		}
	}
	return nil
}

// writeFragments streams rdr into new data files (one fragment per file) under the data
// directory of transaction txnID (manifest.TxnDataDir). Memory is bounded by two data
// files' worth of encoded batches (one stored in the background while the next is
// encoded; fragment.Writer) besides the batches being encoded. Every file is stored
// (durable) before writeFragments returns. The files are not referenced by any version until a
// commit of txnID names them; on error they are left for GC, which fences txnID before
// deleting them.
func (t *Table) writeFragments(ctx context.Context, rdr array.RecordReader, schema *arrow.Schema, fieldIDs []int32, txnID string) ([]manifest.Fragment, int64, error) {
	return t.writeFragmentsTo(ctx, t.db.store, rdr, schema, fieldIDs, txnID)
}

// writeFragmentsTo is writeFragments through st (a stagingStore, for Append).
func (t *Table) writeFragmentsTo(ctx context.Context, st store.Store, rdr array.RecordReader, schema *arrow.Schema, fieldIDs []int32, txnID string) ([]manifest.Fragment, int64, error) {
	if err := checkSchema(t.name, schema, rdr.Schema()); err != nil {
		return nil, 0, err
	}
	wo, err := t.writeOptions()
	if err != nil {
		return nil, 0, err
	}
	w, err := fragment.NewWriter(ctx, st, manifest.TxnDataDir(t.name, txnID), schema, fieldIDs, wo)
	if err != nil {
		return nil, 0, err
	}
	var rows int64
	for rdr.Next() {
		// An interrupted write (its context ended) stops at the next batch rather than
		// reading and encoding the rest of its input first.
		if err := ctx.Err(); err != nil {
			w.Close()
			return nil, 0, fmt.Errorf("table %q: write data files: %w", t.name, err)
		}
		rec := rdr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		if err := checkNulls(t.name, schema, rec); err != nil {
			w.Close()
			return nil, 0, err
		}
		// Re-label the columns with the table schema (field metadata, nullability).
		rows += rec.NumRows()
		rec, err := conform(ctx, schema, rec)
		if err != nil {
			w.Close()
			return nil, 0, fmt.Errorf("table %q: %w", t.name, err)
		}
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			w.Close()
			return nil, 0, fmt.Errorf("table %q: write data files: %w", t.name, err)
		}
	}
	if err := rdr.Err(); err != nil {
		w.Close()
		return nil, 0, fmt.Errorf("table %q: read input: %w", t.name, err)
	}
	files, err := w.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("table %q: write data files: %w", t.name, err)
	}
	frags := make([]manifest.Fragment, len(files))
	for i, df := range files {
		frags[i] = manifest.Fragment{Files: []fragment.DataFile{df}, PhysicalRows: df.Rows}
	}
	return frags, rows, nil
}

// Append adds the rows of rdr as new fragments in one new version and publishes it.
// Records must match the table schema (ErrSchemaMismatch otherwise; nothing is committed).
// Appending no rows commits nothing and returns the current version. Concurrent appends
// never lose each other's rows: the commit loop rebases over them. The transaction is
// minted before the first data file is written, and its files are written under its id
// (manifest.TxnDataDir), so garbage collection can fence it before deleting them: a write
// that was paused past GC's grace period fails with manifest.ErrTxnAborted instead of
// committing a version naming deleted files (invariant 15). Its files are never committed
// under another transaction id (invariant 16).
//
// Errors: ErrReadOnly, ErrSchemaMismatch, ErrInvalidOption, manifest.ErrTxnAborted,
// ErrTableDropped, the BeforeFirstWrite hook's, store errors (Rejected); *UnknownError
// (Unknown: pass its Txn to Retry). A duplicate idempotency key is not an error: see
// WithIdempotencyKey.
func (t *Table) Append(ctx context.Context, rdr array.RecordReader, opts ...WriteOption) (CommitResult, error) {
	return t.append(ctx, rdr, false, opts...)
}

// append is Append; with stage, the last data file is written by the commit's first
// attempt, together with the transaction record (their fsyncs overlap; it is durable
// before the manifest exists). AppendRecord stages: its input is one record in memory,
// so the held file is small and nothing waits for it to appear before the commit.
func (t *Table) append(ctx context.Context, rdr array.RecordReader, stage bool, opts ...WriteOption) (CommitResult, error) {
	if t.readOnly {
		return CommitResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	o, err := collectWriteOptions(t.name, opts)
	if err != nil {
		return CommitResult{}, err
	}
	defer t.holdWhileWriting(ctx)()
	// Plan on HEAD, as every write does: a version committed but not published (its
	// writer died before publishing) is committed, and an append planned below an
	// overwrite there would conflict with it forever. One GET when the handle is current.
	// Records of the schema this handle had (columns added or dropped since) keep it:
	// their field ids still name their columns, and the commit loop checks them against
	// every version since (an overwrite that renumbered them is a conflict).
	m0 := t.m
	if err := t.refreshHead(ctx); err != nil {
		return t.settleKeyed(ctx, t.newTxn(manifest.OpAppend, o), CommitResult{}, err)
	}
	if t.m != m0 && checkSchema(t.name, t.Schema(), rdr.Schema()) != nil && checkSchema(t.name, m0.Schema.MustArrow(), rdr.Schema()) == nil {
		t.m = m0
	}
	if res, ok, err := t.keyCommitted(ctx, o); ok {
		return res, err
	}
	txn := t.newTxn(manifest.OpAppend, o)
	var st store.Store = t.db.store
	staging := &stagingStore{Store: t.db.store}
	if stage {
		st = staging
	}
	frags, rows, err := t.writeFragmentsTo(ctx, st, rdr, t.Schema(), t.m.Schema.FieldIDs, txn.ID)
	if err != nil {
		return t.settleWrite(ctx, txn, CommitResult{}, err)
	}
	if rows == 0 {
		return CommitResult{Version: t.m.Version}, nil
	}
	txn.Op.NewFragments = frags
	res, err := t.commitStaged(ctx, txn, staging.take())
	res.Rows = rows
	return t.settleWrite(ctx, txn, res, err)
}

// AppendRecord appends one record batch: Append with a reader of rec alone. rec is not
// retained after the call. Errors and outcomes as Append. Its last data file (up to 8
// MiB) is written by the commit's first attempt, with the transaction record, rather
// than before the commit begins (docs/architecture.md, "What is on disk when a write
// returns"): durable before the manifest exists all the same.
func (t *Table) AppendRecord(ctx context.Context, rec arrow.RecordBatch, opts ...WriteOption) (CommitResult, error) {
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		return CommitResult{}, err
	}
	defer rdr.Release()
	return t.append(ctx, rdr, true, opts...)
}

// Overwrite replaces every row (and the schema) with the rows of rdr in one new version.
// Fields whose name and type are unchanged keep their field id; others get new ids.
// A concurrent append, delete or update committed after the handle's version makes it a
// conflict (an overwrite planned on a stale version must not drop rows it never saw).
// Errors: ErrReadOnly, *manifest.ConflictError, manifest.ErrTxnAborted, ErrTableDropped,
// store errors; outcomes as Append (OutcomeOf).
func (t *Table) Overwrite(ctx context.Context, rdr array.RecordReader, opts ...WriteOption) (CommitResult, error) {
	if t.readOnly {
		return CommitResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	o, err := collectWriteOptions(t.name, opts)
	if err != nil {
		return CommitResult{}, err
	}
	defer t.holdWhileWriting(ctx)()
	// Plan on HEAD (see Append): the overwrite replaces the rows of the latest committed
	// version, and conflicts with what commits after it.
	if err := t.refreshHead(ctx); err != nil {
		return t.settleKeyed(ctx, t.newTxn(manifest.OpOverwrite, o), CommitResult{}, err)
	}
	if res, ok, err := t.keyCommitted(ctx, o); ok {
		return res, err
	}
	if err := t.walPending(ctx); err != nil {
		return CommitResult{}, err
	}
	schema := rdr.Schema()
	old := t.Schema()
	ids := make([]int32, schema.NumFields())
	next := t.m.NextFieldID
	for i, f := range schema.Fields() {
		if j := old.FieldIndices(f.Name); len(j) > 0 && arrow.TypeEqual(old.Field(j[0]).Type, f.Type) {
			ids[i] = t.m.Schema.FieldIDs[j[0]]
		} else {
			ids[i] = next
			next++
		}
	}
	ms, err := manifest.NewSchema(schema, ids)
	if err != nil {
		return CommitResult{}, err
	}
	txn := t.newTxn(manifest.OpOverwrite, o)
	txn.Op.Schema = &ms
	frags, rows, err := t.writeFragments(ctx, rdr, schema, ids, txn.ID)
	if err != nil {
		return t.settleWrite(ctx, txn, CommitResult{}, err)
	}
	txn.Op.NewFragments = frags
	res, err := t.commit(ctx, txn)
	res.Rows = rows
	return t.settleWrite(ctx, txn, res, err)
}

// Delete marks the rows matching where in the table's latest version (HEAD) as deleted: each touched fragment gets a new
// deletion vector (old ∪ new), and a fragment with no live rows left is dropped, all in one
// new version. Statistics prune fragments and batches that cannot match. A retryable
// conflict (another delete changed the same fragment) re-plans at HEAD, up to
// Options.WriteRetries times. Deleting nothing commits nothing.
// Errors: filter errors for a bad WHERE; *manifest.ConflictError; store errors.
func (t *Table) Delete(ctx context.Context, where string, opts ...WriteOption) (CommitResult, error) {
	if t.readOnly {
		return CommitResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	o, err := collectWriteOptions(t.name, opts)
	if err != nil {
		return CommitResult{}, err
	}
	defer t.holdWhileWriting(ctx)()
	if where == "" {
		return CommitResult{}, fmt.Errorf("table %q: delete needs a WHERE expression (use \"true\" to delete every row)", t.name)
	}
	// Plan against HEAD, not only the published version this handle may hold: versions
	// committed but not yet published (a writer that died before publishing) are
	// committed, and the delete must see their rows too.
	if err := t.refreshHead(ctx); err != nil {
		return t.settleKeyed(ctx, t.newTxn(manifest.OpDelete, o), CommitResult{}, err)
	}
	if err := t.walPending(ctx); err != nil {
		return CommitResult{}, err
	}
	for attempt := 0; ; attempt++ {
		// A conflict is a decision (the attempt did not and never will commit), so a
		// re-plan is a new transaction with new deletion vectors.
		txn := t.newTxn(manifest.OpDelete, o)
		op, deleted, err := t.planDelete(ctx, where, txn.ID)
		if err != nil {
			return t.settleKeyed(ctx, txn, CommitResult{}, err)
		}
		if deleted == 0 {
			return CommitResult{Version: t.m.Version}, nil
		}
		txn.Op = op
		res, err := t.commit(ctx, txn)
		if !res.Duplicate {
			res.Rows = deleted
		}
		if err == nil || !errors.Is(err, manifest.ErrRetryable) || attempt >= t.db.opts.WriteRetries {
			return t.settleKeyed(ctx, txn, res, err)
		}
		if lerr := t.refreshHead(ctx); lerr != nil {
			return t.settleKeyed(ctx, txn, res, errors.Join(err, lerr))
		}
	}
}

// planDelete finds the rows of this version matching where and writes the new deletion
// vectors, as objects of transaction txnID. It returns the Delete operation and the
// number of newly deleted rows.
func (t *Table) planDelete(ctx context.Context, where, txnID string) (manifest.Operation, int64, error) {
	p, err := t.plan(ctx, ScanOptions{Filter: where, Columns: []string{}, NoWAL: true})
	if err != nil {
		return manifest.Operation{}, 0, err
	}
	st := t.newScanState()
	defer st.close()
	var mu sync.Mutex
	hits := map[uint32]*roaring.Bitmap{}
	err = p.forEach(ctx, st, func(task batchTask, rec arrow.RecordBatch, mask *array.Boolean) error {
		bm := roaring.New()
		for i := 0; i < int(rec.NumRows()); i++ {
			if mask == nil || (mask.IsValid(i) && mask.Value(i)) {
				bm.Add(uint32(task.rowStart + int64(i)))
			}
		}
		if bm.IsEmpty() {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if prev := hits[task.frag.ID]; prev != nil {
			prev.Or(bm)
		} else {
			hits[task.frag.ID] = bm
		}
		return nil
	})
	if err != nil {
		return manifest.Operation{}, 0, err
	}
	var order []uint32
	for _, f := range t.m.Fragments {
		if hits[f.ID] != nil {
			order = append(order, f.ID)
		}
	}
	op := manifest.Operation{Kind: manifest.OpDelete, Predicate: where}
	var deleted int64
	for _, id := range order {
		f, _ := t.m.Fragment(id)
		bm := hits[id]
		deleted += int64(bm.GetCardinality())
		fs, err := st.fragment(ctx, f)
		if err != nil {
			return manifest.Operation{}, 0, err
		}
		if fs.dv != nil {
			bm.Or(fs.dv)
		}
		if int64(bm.GetCardinality()) >= f.PhysicalRows {
			op.Removed = append(op.Removed, id)
			continue
		}
		key := manifest.NewDeletionKey(t.name, txnID, id)
		size, err := fragment.WriteDeletionVector(ctx, t.db.store, key, bm)
		if err != nil {
			return manifest.Operation{}, 0, t.dataError(key, err)
		}
		prev := ""
		if f.Deletion != nil {
			prev = f.Deletion.Key
		}
		op.Deletions = append(op.Deletions, manifest.DeletionUpdate{FragmentID: id, Previous: prev,
			New: manifest.DeletionFile{Key: key, Size: size, Deleted: int64(bm.GetCardinality())}})
	}
	return op, deleted, nil
}
