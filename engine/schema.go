package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
)

// ErrInvalidSchemaChange: a schema change that cannot apply (a non-nullable or duplicate
// new column, dropping every column, renaming onto an existing name, …).
var ErrInvalidSchemaChange = errors.New("invalid schema change")

// Schema evolution changes only the manifest: no data file is read or rewritten. Columns
// are matched to data files by field id, so a renamed column keeps reading its old data, a
// dropped column's data stays in the files (ignored; its id is never reused) and an added
// column reads as NULL in the fragments written before it. Each change is one version (an
// OpSchemaChange transaction) planned on the table's latest version (HEAD, which the handle
// moves to); older versions keep their schema (time travel). Appends and
// updates on a handle at the new version write files with the new schema. A concurrent
// update, schema change, compaction, index build or WAL merge makes the change re-plan at
// HEAD (up to Options.WriteRetries times), where it is checked again.

// AddColumns appends fields to the schema, with new field ids from the manifest's
// NextFieldID. Every field must be nullable (existing rows read as NULL) and its name new.
// Errors: ErrInvalidSchemaChange, ErrReadOnly, *manifest.ConflictError, store errors.
func (t *Table) AddColumns(ctx context.Context, fields ...arrow.Field) (CommitResult, error) {
	return t.changeSchema(ctx, func(m *manifest.Manifest) (manifest.Operation, error) { return planAddColumns(m, fields) })
}

// DropColumns removes the named columns (exact names) from the schema. Their data stays in
// the data files until they are rewritten; indexes on them are dropped. Dropping every
// column is refused. Errors: filter.ErrUnknownColumn, ErrInvalidSchemaChange, ErrReadOnly,
// *manifest.ConflictError, store errors.
func (t *Table) DropColumns(ctx context.Context, names ...string) (CommitResult, error) {
	return t.changeSchema(ctx, func(m *manifest.Manifest) (manifest.Operation, error) { return planDropColumns(m, names) })
}

// RenameColumn renames column from (exact name) to to, keeping its field id, type and
// data. Renaming a column to its own name commits nothing. Errors:
// filter.ErrUnknownColumn, ErrInvalidSchemaChange (to is empty or taken), ErrReadOnly,
// *manifest.ConflictError, store errors.
func (t *Table) RenameColumn(ctx context.Context, from, to string) (CommitResult, error) {
	if from == to {
		if _, err := fieldIndex(t.m, from); err != nil {
			return CommitResult{}, fmt.Errorf("table %q: rename: %w", t.name, err)
		}
		return CommitResult{Version: t.m.Version}, nil
	}
	return t.changeSchema(ctx, func(m *manifest.Manifest) (manifest.Operation, error) { return planRenameColumn(m, from, to) })
}

// changeSchema plans a schema change on HEAD (the handle moves there) and commits it,
// re-planning at HEAD after a retryable conflict.
func (t *Table) changeSchema(ctx context.Context, plan func(*manifest.Manifest) (manifest.Operation, error)) (CommitResult, error) {
	if t.readOnly {
		return CommitResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	if err := t.refreshHead(ctx); err != nil {
		return CommitResult{}, err
	}
	for attempt := 0; ; attempt++ {
		op, err := plan(t.m)
		if err != nil {
			return CommitResult{}, fmt.Errorf("table %q version %d: %w", t.name, t.m.Version, err)
		}
		if err := seamSchemaPlanned.Inject(ctx); err != nil {
			return CommitResult{}, err
		}
		res, err := t.commit(ctx, manifest.NewTransaction(t.m.Version, op))
		if err == nil || !errors.Is(err, manifest.ErrRetryable) || attempt >= t.db.opts.WriteRetries {
			return res, err
		}
		if lerr := t.refreshHead(ctx); lerr != nil {
			return res, errors.Join(err, lerr)
		}
	}
}

// seamSchemaPlanned is between a schema change's planning and its commit.
var seamSchemaPlanned = failpoint.Seam("engine.schema_change_planned")

// fieldIndex is the schema index of the field named exactly name.
func fieldIndex(m *manifest.Manifest, name string) (int, error) {
	s := m.Schema.MustArrow()
	idx := s.FieldIndices(name)
	switch len(idx) {
	case 0:
		return -1, fmt.Errorf("%w %q (columns: %s)", filter.ErrUnknownColumn, name, fieldNames(s))
	case 1:
		return idx[0], nil
	}
	return -1, fmt.Errorf("%w %q: it names %d columns", filter.ErrUnknownColumn, name, len(idx))
}

// schemaChange builds the SchemaChange operation that gives the table fields (with ids).
func schemaChange(m *manifest.Manifest, fields []arrow.Field, ids []int32, delta manifest.SchemaDelta) (manifest.Operation, error) {
	old := m.Schema.MustArrow()
	md := old.Metadata()
	ms, err := manifest.NewSchema(arrow.NewSchema(fields, &md), ids)
	if err != nil {
		return manifest.Operation{}, err
	}
	return manifest.Operation{Kind: manifest.OpSchemaChange, Schema: &ms, SchemaDelta: &delta}, nil
}

// planAddColumns decides AddColumns on m.
func planAddColumns(m *manifest.Manifest, add []arrow.Field) (manifest.Operation, error) {
	if len(add) == 0 {
		return manifest.Operation{}, fmt.Errorf("%w: no columns to add", ErrInvalidSchemaChange)
	}
	old := m.Schema.MustArrow()
	fields := slices.Clone(old.Fields())
	ids := slices.Clone(m.Schema.FieldIDs)
	var delta manifest.SchemaDelta
	next := m.NextFieldID
	for _, f := range add {
		switch {
		case f.Name == "":
			return manifest.Operation{}, fmt.Errorf("%w: a new column needs a name", ErrInvalidSchemaChange)
		case f.Type == nil:
			return manifest.Operation{}, fmt.Errorf("%w: new column %q has no type", ErrInvalidSchemaChange, f.Name)
		case !f.Nullable:
			return manifest.Operation{}, fmt.Errorf("%w: new column %q must be nullable (existing rows have no value for it)", ErrInvalidSchemaChange, f.Name)
		case slices.ContainsFunc(fields, func(g arrow.Field) bool { return g.Name == f.Name }):
			return manifest.Operation{}, fmt.Errorf("%w: column %q already exists", ErrInvalidSchemaChange, f.Name)
		}
		fields = append(fields, f)
		ids = append(ids, next)
		delta.Added = append(delta.Added, next)
		next++
	}
	return schemaChange(m, fields, ids, delta)
}

// planDropColumns decides DropColumns on m.
func planDropColumns(m *manifest.Manifest, names []string) (manifest.Operation, error) {
	if len(names) == 0 {
		return manifest.Operation{}, fmt.Errorf("%w: no columns to drop", ErrInvalidSchemaChange)
	}
	drop := map[int]bool{}
	var delta manifest.SchemaDelta
	for _, n := range names {
		idx, err := fieldIndex(m, n)
		if err != nil {
			return manifest.Operation{}, err
		}
		if drop[idx] {
			return manifest.Operation{}, fmt.Errorf("%w: column %q is named twice", ErrInvalidSchemaChange, n)
		}
		drop[idx] = true
		delta.Dropped = append(delta.Dropped, m.Schema.FieldIDs[idx])
	}
	old := m.Schema.MustArrow()
	if len(drop) == old.NumFields() {
		return manifest.Operation{}, fmt.Errorf("%w: dropping every column (%s); drop the table instead", ErrInvalidSchemaChange, fieldNames(old))
	}
	var fields []arrow.Field
	var ids []int32
	for i, f := range old.Fields() {
		if !drop[i] {
			fields = append(fields, f)
			ids = append(ids, m.Schema.FieldIDs[i])
		}
	}
	return schemaChange(m, fields, ids, delta)
}

// planRenameColumn decides RenameColumn on m (from != to).
func planRenameColumn(m *manifest.Manifest, from, to string) (manifest.Operation, error) {
	idx, err := fieldIndex(m, from)
	if err != nil {
		return manifest.Operation{}, err
	}
	old := m.Schema.MustArrow()
	switch {
	case to == "":
		return manifest.Operation{}, fmt.Errorf("%w: rename %q to an empty name", ErrInvalidSchemaChange, from)
	case len(old.FieldIndices(to)) > 0:
		return manifest.Operation{}, fmt.Errorf("%w: rename %q to %q: a column of that name exists", ErrInvalidSchemaChange, from, to)
	}
	fields := slices.Clone(old.Fields())
	fields[idx].Name = to
	return schemaChange(m, fields, m.Schema.FieldIDs, manifest.SchemaDelta{Renamed: []int32{m.Schema.FieldIDs[idx]}})
}
