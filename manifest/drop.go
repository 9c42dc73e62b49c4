package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shale-db/shale/store"
)

// Dropping a table commits a drop marker (an OpDrop version) on top of HEAD, then deletes
// the table's objects below it. The marker stays: it is the fence (every commit loop of
// the dropped incarnation that reaches it fails with ErrTableDropped), it keeps the table
// out of Tables, and creating the table again builds version marker+1 on it, so version
// numbers never restart and a version of one incarnation can never take a number of
// another. A writer whose version number the drop's deletes freed can still put a version
// below the marker; that version belongs to no incarnation, and publishing it fails (the
// catalog pointer belongs to a later incarnation, or there is none and CheckLive finds
// the marker).

// TableHead is one table as a listing of the store shows it.
type TableHead struct {
	Table string // the table name (its top-level prefix in the store)
	// Head is the highest version with an object under _versions/.
	Head uint64
	// Dropped: HEAD is a drop marker (the table was dropped).
	Dropped bool
	// TxnKey is HEAD's transaction record ("" when HEAD could not be read).
	TxnKey string
}

// ListTables lists the top-level directories of a store that hold a manifest, in name
// order, with each one's HEAD and whether it is a drop marker: one LIST of the store plus
// one GET per table (see HeadsOf). Errors: store errors other than not found; a HEAD that
// cannot be decoded counts as not dropped rather than failing the listing.
func ListTables(ctx context.Context, s store.Store) ([]TableHead, error) {
	objs, err := s.List(ctx, "", 0)
	if err != nil {
		return nil, err
	}
	return HeadsOf(ctx, s, objs, nil)
}

// HeadsOf is ListTables over a listing of the store already made (objs, any order; a
// listing of some table prefixes gives those tables). It reads each table's HEAD (one
// GET) to tell a drop marker; a HEAD that cannot be decoded, or that vanished since the
// listing, counts as not dropped (verify reports it). cache, when not nil, maps HEAD
// manifest keys to what was read there: it is consulted before a GET and filled after one
// (a manifest never changes).
// Errors: store errors other than not found.
func HeadsOf(ctx context.Context, s store.Store, objs []store.ObjectInfo, cache map[string]TableHead) ([]TableHead, error) {
	heads := map[string]string{} // table -> its smallest manifest key (the highest version)
	for _, o := range objs {
		table, rest, ok := strings.Cut(o.Key, "/")
		if !ok || ValidateTableName(table) != nil || !strings.HasPrefix(rest, "_versions/") {
			continue
		}
		if _, err := ParseManifestKey(table, o.Key); err != nil {
			continue
		}
		if k, ok := heads[table]; !ok || o.Key < k {
			heads[table] = o.Key
		}
	}
	out := make([]TableHead, 0, len(heads))
	for table, key := range heads {
		v, _ := ParseManifestKey(table, key)
		h, ok := cache[key]
		if !ok {
			h = TableHead{Table: table, Head: v}
			rec, err := LoadRecord(ctx, s, table, v)
			switch {
			case err == nil:
				h.Dropped = rec.Txn != nil && rec.Txn.Op.Kind == OpDrop
				if rec.Manifest != nil {
					h.TxnKey = rec.Manifest.TxnKey
				}
				if cache != nil {
					cache[key] = h
				}
			case errors.Is(err, ErrVersionNotFound), errors.Is(err, ErrCorrupt), errors.Is(err, ErrFormatTooNew), errors.Is(err, ErrFormatTooOld):
			default:
				return nil, err
			}
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b TableHead) int { return strings.Compare(a.Table, b.Table) })
	return out, nil
}

// HeadRecord reads the record of the table's HEAD, whatever it is (a drop marker
// included): one LIST, one GET. Errors: ErrTableNotFound, LoadRecord's.
func HeadRecord(ctx context.Context, s store.Store, table string) (*Record, error) {
	v, err := Head(ctx, s, table)
	if err != nil {
		return nil, err
	}
	return LoadRecord(ctx, s, table, v)
}

// SameIncarnation reports whether versions a and b belong to one incarnation of their
// table, as far as their manifests tell: the same incarnation id, or, where one was
// written before incarnations existed (no id), each at or above the other's first
// version.
func SameIncarnation(a, b *Manifest) bool {
	if a.Incarnation != "" && b.Incarnation != "" {
		return a.Incarnation == b.Incarnation
	}
	return a.Version >= b.IncarnationSince && b.Version >= a.IncarnationSince
}

// CheckLive reports whether version m (just committed, or about to be published) belongs
// to the table's live incarnation as the store shows it now: HEAD is not a drop marker
// and is of m's incarnation (SameIncarnation), and the incarnation's first version
// (m.IncarnationSince; version 1 for manifests of older builds) is still in the store (a
// drop deletes it; a drop of an older build left no marker). A publish that finds no
// catalog pointer uses it to tell a table never published, whose pointer it may create,
// from a dropped one, which it must not bring back. Cost: one LIST, one GET, one HEAD.
// Errors: *DroppedError (ErrTableDropped) when m is not live; store errors.
func CheckLive(ctx context.Context, s store.Store, m *Manifest) error {
	rec, err := HeadRecord(ctx, s, m.Table)
	if errors.Is(err, ErrTableNotFound) {
		return &DroppedError{Table: m.Table, Detail: fmt.Sprintf("version %d: the table has no versions left", m.Version)}
	}
	if err != nil {
		return err
	}
	if rec.Txn != nil && rec.Txn.Op.Kind == OpDrop {
		return &DroppedError{Table: m.Table, Version: rec.Version,
			Detail: fmt.Sprintf("version %d was committed to the dropped incarnation", m.Version)}
	}
	if rec.Manifest != nil && !SameIncarnation(rec.Manifest, m) {
		return &DroppedError{Table: m.Table,
			Detail: fmt.Sprintf("version %d belongs to an incarnation dropped before HEAD %d was created", m.Version, rec.Version)}
	}
	first := max(m.IncarnationSince, 1)
	if first == m.Version {
		return nil
	}
	if _, err := s.Head(ctx, ManifestKey(m.Table, first)); errors.Is(err, store.ErrNotFound) {
		return &DroppedError{Table: m.Table,
			Detail: fmt.Sprintf("version %d: the first version of its incarnation (%d) was deleted by a drop", m.Version, first)}
	} else if err != nil {
		return err
	}
	return nil
}
