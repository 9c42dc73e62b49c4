package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// ErrNullValue: an update would store NULL in a non-nullable column.
var ErrNullValue = errors.New("NULL value for a non-nullable column")

// Update rewrites the rows matching where (a SQL WHERE expression, as in Scan; use
// "true" for every row) with the columns of set replaced: set maps a column name to a SQL
// value expression (filter.ParseValue: literals, columns, + - * / DIV %, CASE, COALESCE,
// conditions) evaluated on the row as it was before the update, so SET a = b, b = a swaps.
// Column names resolve as in filter expressions (exact, else a unique case-insensitive
// match). Values are cast to the column's type with a checked cast.
//
// The rows are those of the table's latest version (HEAD, which the handle moves to), as
// for Delete. They are written as new fragments (every column, the current schema) at the
// end of the table, and their old copies are marked in deletion vectors (old ∪ new; a
// fragment left without live rows is removed), all in one new version: an OpUpdate
// transaction. A retryable conflict (a concurrent delete or update of the same rows,
// compaction of the same fragments, a schema change) re-plans at HEAD, up to
// Options.WriteRetries times; concurrent deletes and updates of other rows of the same
// fragments are merged by the commit loop without re-planning. Updating no rows commits
// nothing and returns the current version. CommitResult.Rows is the number of rows updated.
//
// Errors (nothing is committed): filter errors for where or a value expression
// (filter.ErrSyntax, ErrUnknownColumn, ErrType, ErrUnsupported; filter.ErrArithmetic and
// filter.ErrType for values that overflow or do not fit the column), ErrNullValue (a NULL
// for a non-nullable column: refused before any row is read when the expression is always
// NULL), ErrReadOnly, *manifest.ConflictError, store errors. A failure while rows are being
// rewritten can leave unreferenced data files behind (garbage for GC) only when more than
// one data file's worth of rows (WriterOptions.MaxRowsPerFile) was already written.
func (t *Table) Update(ctx context.Context, set map[string]string, where string, opts ...WriteOption) (CommitResult, error) {
	if t.readOnly {
		return CommitResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	o, err := collectWriteOptions(t.name, opts)
	if err != nil {
		return CommitResult{}, err
	}
	defer t.holdWhileWriting(ctx)()
	if where == "" {
		return CommitResult{}, fmt.Errorf("table %q: update needs a WHERE expression (use \"true\" to update every row)", t.name)
	}
	if len(set) == 0 {
		return CommitResult{}, fmt.Errorf("table %q: update without columns to SET", t.name)
	}
	// Plan against HEAD (as Delete does): rows of versions committed but not yet published
	// are committed rows.
	if err := t.refreshHead(ctx); err != nil {
		return t.settleKeyed(ctx, t.newTxn(manifest.OpUpdate, o), CommitResult{}, err)
	}
	if err := t.walPending(ctx); err != nil {
		return CommitResult{}, err
	}
	for attempt := 0; ; attempt++ {
		// A conflict is a decision (the attempt did not and never will commit), so a
		// re-plan is a new transaction with new files.
		txn := t.newTxn(manifest.OpUpdate, o)
		op, updated, err := t.planUpdate(ctx, set, where, txn.ID)
		if err != nil {
			return t.settleKeyed(ctx, txn, CommitResult{}, err)
		}
		if updated == 0 {
			return CommitResult{Version: t.m.Version}, nil
		}
		if err := seamUpdatePlanned.Inject(ctx); err != nil {
			return CommitResult{}, err
		}
		txn.Op = op
		res, err := t.commit(ctx, txn)
		if !res.Duplicate {
			res.Rows = updated
		}
		if err == nil || !errors.Is(err, manifest.ErrRetryable) || attempt >= t.db.opts.WriteRetries {
			return t.settleKeyed(ctx, txn, res, err)
		}
		if lerr := t.refreshHead(ctx); lerr != nil {
			return t.settleKeyed(ctx, txn, res, errors.Join(err, lerr))
		}
	}
}

// seamUpdatePlanned is between an update's planning (new rows and deletion vectors
// written) and its commit.
var seamUpdatePlanned = failpoint.Seam("engine.update_planned")

// assignment is one bound "column = expression" of an update.
type assignment struct {
	idx   int // table schema index
	field arrow.Field
	id    int32
	expr  *filter.ValueExpr
	text  string
}

// bindAssignments binds set to this version's schema, in schema order.
func (t *Table) bindAssignments(set map[string]string) ([]assignment, error) {
	schema := t.Schema()
	var out []assignment
	for col, text := range set {
		idx, err := filter.ResolveColumn(schema, col)
		if err != nil {
			return nil, fmt.Errorf("table %q: SET: %w", t.name, err) // names the column and lists the schema's
		}
		f := schema.Field(idx)
		if slices.ContainsFunc(out, func(a assignment) bool { return a.idx == idx }) {
			return nil, fmt.Errorf("table %q: %w: column %q is assigned twice", t.name, filter.ErrSyntax, f.Name)
		}
		e, err := filter.ParseValue(text, schema, f.Type)
		if err != nil {
			return nil, fmt.Errorf("table %q: SET %s = %s: %w", t.name, f.Name, text, err)
		}
		if !f.Nullable && e.AlwaysNull() {
			return nil, fmt.Errorf("table %q: SET %s = %s: %w: column %q is not nullable", t.name, f.Name, text, ErrNullValue, f.Name)
		}
		out = append(out, assignment{idx: idx, field: f, id: t.m.Schema.FieldIDs[idx], expr: e, text: text})
	}
	slices.SortFunc(out, func(a, b assignment) int { return a.idx - b.idx })
	return out, nil
}

// updatedBatch is the rewritten rows of one batch: their offsets in fragment frag and the
// new rows (nil when the batch had no matching row).
type updatedBatch struct {
	frag uint32
	rows *roaring.Bitmap
	rec  arrow.RecordBatch
}

// planUpdate rewrites the rows of this version matching where into new data files and
// writes the deletion vectors of their old copies. It returns the Update operation and the
// number of rows updated (0: nothing was written).
func (t *Table) planUpdate(ctx context.Context, set map[string]string, where, txnID string) (manifest.Operation, int64, error) {
	assigns, err := t.bindAssignments(set)
	if err != nil {
		return manifest.Operation{}, 0, err
	}
	p, err := t.plan(ctx, ScanOptions{Filter: where, NoWAL: true})
	if err != nil {
		return manifest.Operation{}, 0, err
	}
	schema := t.Schema()
	st := t.newScanState()
	defer st.close()
	evalCtx := compute.WithAllocator(ctx, t.db.opts.Allocator)

	work := func(task batchTask, rec arrow.RecordBatch, mask *array.Boolean) (updatedBatch, error) {
		bm := roaring.New()
		for i := 0; i < int(rec.NumRows()); i++ {
			if mask == nil || (mask.IsValid(i) && mask.Value(i)) {
				bm.Add(uint32(task.rowStart + int64(i)))
			}
		}
		if bm.IsEmpty() {
			return updatedBatch{}, nil
		}
		matched := rec
		if mask != nil {
			sel, err := compute.FilterRecordBatch(evalCtx, rec, mask, compute.DefaultFilterOptions())
			if err != nil {
				return updatedBatch{}, fmt.Errorf("table %q: select rows to update: %w", t.name, err)
			}
			defer sel.Release()
			matched = sel
		}
		cols := slices.Clone(matched.Columns())
		for _, a := range assigns {
			arr, err := a.expr.Evaluate(evalCtx, matched)
			if err != nil {
				return updatedBatch{}, fmt.Errorf("table %q: SET %s = %s: %w", t.name, a.field.Name, a.text, err)
			}
			defer arr.Release()
			if !a.field.Nullable && arr.NullN() > 0 {
				return updatedBatch{}, fmt.Errorf("table %q: SET %s = %s: %w: %d rows get NULL in non-nullable column %q",
					t.name, a.field.Name, a.text, ErrNullValue, arr.NullN(), a.field.Name)
			}
			cols[a.idx] = arr
		}
		return updatedBatch{frag: task.frag.ID, rows: bm, rec: array.NewRecordBatch(schema, cols, matched.NumRows())}, nil
	}

	wo, err := t.writeOptions()
	if err != nil {
		return manifest.Operation{}, 0, err
	}
	w, err := fragment.NewWriter(ctx, t.db.store, manifest.TxnDataDir(t.name, txnID), schema, t.m.Schema.FieldIDs, wo)
	if err != nil {
		return manifest.Operation{}, 0, err
	}
	hits := map[uint32]*roaring.Bitmap{}
	var updated int64
	use := func(b updatedBatch) error {
		if b.rec == nil {
			return nil
		}
		defer b.rec.Release()
		if prev := hits[b.frag]; prev != nil {
			prev.Or(b.rows)
		} else {
			hits[b.frag] = b.rows
		}
		updated += b.rec.NumRows()
		if err := w.Write(b.rec); err != nil {
			return fmt.Errorf("table %q: write updated rows: %w", t.name, err)
		}
		return nil
	}
	drop := func(b updatedBatch) {
		if b.rec != nil {
			b.rec.Release()
		}
	}
	// On error the writer is dropped unclosed: rows not yet stored are never written.
	if err := inTableOrder(ctx, p, st, work, use, drop); err != nil {
		return manifest.Operation{}, 0, err
	}
	if updated == 0 {
		return manifest.Operation{}, 0, nil
	}
	files, err := w.Close()
	if err != nil {
		return manifest.Operation{}, 0, fmt.Errorf("table %q: write updated rows: %w", t.name, err)
	}
	op := manifest.Operation{Kind: manifest.OpUpdate, Predicate: where}
	for _, df := range files {
		op.NewFragments = append(op.NewFragments, manifest.Fragment{Files: []fragment.DataFile{df}, PhysicalRows: df.Rows})
	}
	for _, a := range assigns {
		op.UpdatedFields = append(op.UpdatedFields, a.id)
	}
	if err := t.markDeleted(ctx, st, hits, &op, txnID); err != nil {
		return manifest.Operation{}, 0, err
	}
	return op, updated, nil
}

// markDeleted adds to op the deletion vectors that delete the rows in hits (fragment id →
// row offsets) on top of each fragment's current deletion vector, and removes fragments left
// without live rows. The vectors are written as objects of transaction txnID.
// (The same decision as planDelete's; a candidate for planDelete to share.)
func (t *Table) markDeleted(ctx context.Context, st *scanState, hits map[uint32]*roaring.Bitmap, op *manifest.Operation, txnID string) error {
	for i := range t.m.Fragments {
		f := &t.m.Fragments[i]
		bm := hits[f.ID]
		if bm == nil {
			continue
		}
		fs, err := st.fragment(ctx, f)
		if err != nil {
			return err
		}
		if fs.dv != nil {
			bm = roaring.Or(bm, fs.dv)
		}
		if int64(bm.GetCardinality()) >= f.PhysicalRows {
			op.Removed = append(op.Removed, f.ID)
			continue
		}
		key := manifest.NewDeletionKey(t.name, txnID, f.ID)
		size, err := fragment.WriteDeletionVector(ctx, t.db.store, key, bm)
		if err != nil {
			return t.dataError(key, err)
		}
		prev := ""
		if f.Deletion != nil {
			prev = f.Deletion.Key
		}
		op.Deletions = append(op.Deletions, manifest.DeletionUpdate{FragmentID: f.ID, Previous: prev,
			New: manifest.DeletionFile{Key: key, Size: size, Deleted: int64(bm.GetCardinality())}})
	}
	return nil
}

// inTableOrder reads p's batches ScanParallelism at a time and runs work on each as it
// arrives (concurrently), then use on the results one at a time in table order. After the
// first error no more batches are started; results produced anyway are passed to drop.
// work gets the batch (readCols order) and its selection mask (nil = every row), both
// released after it returns. A panic in reading or in work is an error (recoverTask).
func inTableOrder[R any](ctx context.Context, p *scanPlan, st *scanState,
	work func(batchTask, arrow.RecordBatch, *array.Boolean) (R, error), use func(R) error, drop func(R)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		r   R
		err error
	}
	par := p.t.db.opts.ScanParallelism
	results := make(chan chan result, par)
	go func() {
		defer close(results)
		sem := make(chan struct{}, par)
		for _, task := range p.tasks {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			ch := make(chan result, 1)
			select {
			case results <- ch:
			case <-ctx.Done():
				<-sem
				return
			}
			go func(task batchTask) {
				defer func() { <-sem }()
				var res result
				res.err = p.visit(ctx, st, task, func(task batchTask, rec arrow.RecordBatch, mask *array.Boolean) (err error) {
					res.r, err = work(task, rec, mask)
					return err
				})
				ch <- res
			}(task)
		}
	}()
	var firstErr error
	for ch := range results {
		res := <-ch
		switch {
		case res.err != nil:
			if firstErr == nil {
				firstErr = res.err
				cancel()
			}
		case firstErr != nil:
			drop(res.r)
		default:
			if err := use(res.r); err != nil {
				firstErr = err
				cancel()
			}
		}
	}
	if firstErr == nil {
		return ctx.Err()
	}
	return firstErr
}
