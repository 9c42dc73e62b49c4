package recovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
)

// RollForward is the part of Recover that is safe on every open for writing: for each
// sidecar of table ("" = every table) whose operation is not live (no catalog hold), a
// version that carries one of its transactions is published by fast-forward and the
// sidecar deleted (RolledForward or AlreadyPublished). It never rolls back and never
// deletes a data file: a sidecar whose operation landed nothing is left for Recover
// (NotLanded), and so is one whose earlier attempts left files no version references
// (the version is published, Outcome.SidecarKept is set). opts.MinAge is ignored (a
// landed version is published whatever its age); ClaimTTL and PublishTimeout apply.
//
// Without a catalog there is nothing to publish: it returns an empty Report.
// Cost: one LIST of _recovery/ plus one GET per sidecar; per sidecar of the table, one
// etcd read, a claim put/delete and the manifests from its read version to HEAD.
// Errors as Recover.
func RollForward(ctx context.Context, s store.Store, cat *catalog.Catalog, table string, opts Options) (Report, error) {
	if cat == nil {
		return Report{}, nil
	}
	opts.MinAge = -1
	return run(ctx, &recoverer{s: s, cat: cat, opts: opts, forwardOnly: true}, table)
}

// Hook returns a function to set as engine.Options.BeforeFirstWrite: it rolls forward
// the table's landed sidecar work (RollForward) before a DB's first write to it, so a
// compaction that committed and died before publishing is published and its sidecar
// removed. Sidecars this build cannot read (ErrCorrupt, ErrNewerFormat, ErrUnknownKind)
// do not fail the write; they stay for `shale recover` to report. Other errors (store,
// etcd, a failed publish) are returned, and fail the write.
func Hook(opts Options) func(ctx context.Context, s store.Store, cat *catalog.Catalog, table string) error {
	return func(ctx context.Context, s store.Store, cat *catalog.Catalog, table string) error {
		_, err := RollForward(ctx, s, cat, table, opts)
		if err == nil {
			return nil
		}
		var keep []error
		for _, e := range flatten(err) {
			if !errors.Is(e, ErrCorrupt) && !errors.Is(e, ErrNewerFormat) && !errors.Is(e, ErrUnknownKind) {
				keep = append(keep, e)
			}
		}
		if len(keep) == 0 {
			return nil
		}
		return fmt.Errorf("table %q: roll forward recovery sidecars: %w", table, errors.Join(keep...))
	}
}

// flatten returns the errors joined in err (err itself when it is not a join).
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Keyed is a pending sidecar as stored at Key; Err is set (and Sidecar partial) when it
// cannot be read or decoded.
type Keyed struct {
	Key     string  // the sidecar's key
	Sidecar Sidecar // the decoded sidecar (partial when Err is set)
	Err     error   // why it could not be read or decoded (ErrCorrupt, ErrNewerFormat, ErrUnknownKind, store errors)
}

// PendingSidecars returns the sidecars of table ("" = every table) decoded, oldest
// first. An unreadable sidecar is returned with Err set (it may belong to any table).
// Errors: listing failures.
func PendingSidecars(ctx context.Context, s store.Store, table string) ([]Keyed, error) {
	// One LIST, then one GET per sidecar, filtered here (Pending with a table would GET
	// each sidecar to filter it, and this would read it again).
	keys, err := Pending(ctx, s, "")
	if err != nil {
		return nil, err
	}
	r := &recoverer{s: s}
	var out []Keyed
	for _, k := range keys {
		sc, ok, err := r.read(ctx, k)
		if !ok && err == nil {
			continue // resolved meanwhile
		}
		if err == nil && table != "" && sc.Table != table {
			continue
		}
		out = append(out, Keyed{Key: k, Sidecar: sc, Err: err})
	}
	return out, nil
}
