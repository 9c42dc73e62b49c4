package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// Table verifies one table of store s. cat is the catalog holding the table's published
// pointer; nil verifies without etcd (no pointer checks, and HEAD stands in for the
// published version).
//
// It lists _versions/ (one LIST), reads the pointer (one etcd GET), reads every manifest
// (one GET each; the published one's CRC32C is compared with the pointer's), checks each manifest's transaction record exists (one HEAD each), and
// reads every data file and deletion vector of the published version in full (of every
// version with opts.AllVersions). Faults and notes go in the returned Report.
//
// A table created again after a drop is verified from its incarnation's first version:
// versions below it belong to incarnations a drop ended (a note, not checked).
//
// Errors: manifest.ErrTableNotFound when the table has neither versions nor a pointer, or
// was dropped (a *manifest.DroppedError; with its pointer left behind that is a fault);
// store LIST failures; catalog.ErrEtcd when etcd cannot be read; ctx errors. Failures to
// read single objects are faults, not errors.
func Table(ctx context.Context, s store.Store, cat *catalog.Catalog, table string, opts Options) (*Report, error) {
	v := newVerifier(s, cat, opts)
	if err := v.table(ctx, table); err != nil {
		return v.rep, err
	}
	return v.rep, nil
}

// All verifies every table in store s (manifest.Tables: each top-level directory that
// holds a _versions/), in name order, into one Report. Errors as for Table; a store
// with no tables is an empty, clean Report.
func All(ctx context.Context, s store.Store, cat *catalog.Catalog, opts Options) (*Report, error) {
	names, err := manifest.Tables(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("verify: list tables in %s: %w", s.URL(), err)
	}
	if cat != nil {
		// A pointer whose table has no versions in the store is a fault to report too.
		ptrs, _, err := cat.Snapshot(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("verify: list published tables: %w", err)
		}
		for n := range ptrs {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
	}
	v := newVerifier(s, cat, opts)
	for _, n := range names {
		if err := v.table(ctx, n); err != nil {
			return v.rep, err
		}
	}
	return v.rep, nil
}

type verifier struct {
	s    store.Store
	cat  *catalog.Catalog
	opts Options
	mem  memory.Allocator
	rep  *Report

	files    map[string]fileSeen     // data files and deletion vectors already read, by key
	heads    map[string]error        // objects already checked for existence, by key
	segments map[string]*segmentSeen // index segments already read, by <table>/<uuid>
	sum      *TableSummary
}

// fileSeen is what a data file or deletion vector was described as when first read.
type fileSeen struct {
	desc    string
	version uint64
}

func newVerifier(s store.Store, cat *catalog.Catalog, opts Options) *verifier {
	return &verifier{s: s, cat: cat, opts: opts, mem: memory.DefaultAllocator, rep: &Report{Faults: []Fault{}, Notes: []Note{}},
		files: map[string]fileSeen{}, heads: map[string]error{}, segments: map[string]*segmentSeen{}}
}

func (v *verifier) table(ctx context.Context, table string) error {
	v.rep.Tables = append(v.rep.Tables, TableSummary{Table: table, Deep: []uint64{}})
	v.sum = &v.rep.Tables[len(v.rep.Tables)-1]
	faultsBefore := len(v.rep.Faults)

	objs, err := v.s.List(ctx, manifest.VersionsDir(table), 0)
	if err != nil {
		return fmt.Errorf("verify: table %q: list versions: %w", table, err)
	}
	var versions []uint64
	for _, o := range objs {
		ver, err := manifest.ParseManifestKey(table, o.Key)
		if err != nil {
			v.rep.fault(table, 0, o.Key, "object under _versions/ is not a manifest name", err)
			continue
		}
		versions = append(versions, ver)
	}
	slices.Sort(versions)
	v.sum.Versions = len(versions)

	ptr, havePtr, err := v.pointer(ctx, table)
	if err != nil {
		return err
	}
	if len(versions) == 0 {
		if !havePtr && len(v.rep.Faults) == faultsBefore {
			v.rep.Tables = v.rep.Tables[:len(v.rep.Tables)-1]
			return fmt.Errorf("verify: %w: %q has no versions in %s", manifest.ErrTableNotFound, table, v.s.URL())
		}
		if havePtr {
			v.rep.fault(table, ptr.Version, v.cat.Key(table), "published pointer names a table with no versions in the store", manifest.ErrTableNotFound)
		}
		return nil
	}
	head := versions[len(versions)-1]
	v.sum.Head = head

	// HEAD's incarnation: a drop marker means the table was dropped; versions below the
	// incarnation's first belong to incarnations a drop ended (garbage collection deletes
	// them) and are not the table's.
	first := uint64(1)
	if hm, err := manifest.Load(ctx, v.s, table, head); err == nil {
		if hm.Dropped() {
			if havePtr {
				v.rep.fault(table, ptr.Version, v.cat.Key(table), fmt.Sprintf("published pointer names a dropped table (drop marker at version %d): drop it again to finish", head), manifest.ErrTableDropped)
				return nil
			}
			v.rep.Tables = v.rep.Tables[:len(v.rep.Tables)-1]
			return fmt.Errorf("verify: %w", &manifest.DroppedError{Table: table, Version: head})
		}
		first = max(first, hm.IncarnationSince)
		v.sum.IncarnationSince = hm.IncarnationSince
	}
	var earlier []uint64
	versions = slices.DeleteFunc(versions, func(ver uint64) bool {
		if ver < first {
			earlier = append(earlier, ver)
			return true
		}
		return false
	})
	if len(earlier) > 0 {
		v.rep.note(table, 0, "", "%d version(s) of incarnations a drop ended, %d..%d, below this incarnation's first version %d (garbage collection deletes them)",
			len(earlier), earlier[0], earlier[len(earlier)-1], first)
	}
	v.sum.Versions = len(versions)

	// The chain first..HEAD.
	present := make(map[uint64]bool, len(versions))
	for _, ver := range versions {
		present[ver] = true
	}
	for want := first; want <= head; want++ {
		if present[want] {
			continue
		}
		key := manifest.ManifestKey(table, want)
		if v.opts.AllowGaps {
			v.rep.note(table, want, key, "missing from the manifest chain (allowed: expired)")
		} else {
			v.rep.fault(table, want, key, fmt.Sprintf("manifest missing from the chain %d..HEAD", first), manifest.ErrVersionNotFound)
		}
	}

	// The published pointer against the store.
	target := head // the version whose objects are read in full
	if havePtr && ptr.Version < first {
		v.rep.fault(table, ptr.Version, v.cat.Key(table),
			fmt.Sprintf("published pointer names version %d of an incarnation a drop ended (this one began at version %d): run shale repair to publish this one", ptr.Version, first), manifest.ErrTableDropped)
		havePtr = false
	}
	if havePtr {
		target = ptr.Version
		v.checkPointer(table, ptr, head, present)
		if ptr.Version < head {
			v.rep.note(table, 0, "", "versions %d..%d committed but not published (drift)", ptr.Version+1, head)
		}
	} else if v.cat != nil {
		v.rep.note(table, 0, v.cat.Key(table), "no published pointer: the table was never published")
	}

	var targetM, headM *manifest.Manifest
	for _, ver := range versions {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, err := manifest.Load(ctx, v.s, table, ver)
		if errors.Is(err, manifest.ErrVersionExpired) && ver != target && ver != head {
			v.rep.note(table, ver, manifest.ManifestKey(table, ver), "expired by garbage collection (tombstone)")
			continue
		}
		if err != nil {
			v.objectFault(table, ver, manifest.ManifestKey(table, ver), "manifest", err)
			continue
		}
		if havePtr && ver == ptr.Version && m.Checksum() != ptr.Checksum {
			// What manifest.LoadVerified checks, without a second GET.
			v.rep.fault(table, ver, m.Key(), "manifest does not match the published pointer",
				fmt.Errorf("%w: checksum %08x, the pointer says %08x", manifest.ErrCorrupt, m.Checksum(), ptr.Checksum))
		}
		if err := v.checkManifest(ctx, m, havePtr && ver == ptr.Version); err != nil {
			return err
		}
		if ver == target {
			targetM = m
		}
		if ver == head {
			headM = m
		}
		if ver == target || v.opts.AllVersions {
			v.sum.Deep = append(v.sum.Deep, ver)
			if err := v.deep(ctx, m); err != nil {
				return err
			}
		}
	}
	return v.checkWAL(ctx, table, targetM, headM)
}

// pointer reads the table's published pointer. An unreadable pointer is a fault; an
// unreachable etcd is an error.
func (v *verifier) pointer(ctx context.Context, table string) (catalog.Pointer, bool, error) {
	if v.cat == nil {
		return catalog.Pointer{}, false, nil
	}
	p, _, err := v.cat.Get(ctx, table)
	switch {
	case err == nil:
		v.sum.Published = p.Version
		return p, true, nil
	case errors.Is(err, catalog.ErrNoPointer):
		return p, false, nil
	case errors.Is(err, catalog.ErrCorrupt), errors.Is(err, catalog.ErrNewerFormat):
		v.rep.fault(table, 0, v.cat.Key(table), "published pointer unreadable", err)
		return p, false, nil
	}
	return p, false, fmt.Errorf("verify: table %q: read published pointer: %w", table, err)
}

// checkPointer checks the pointer's fields against the versions in the store. The
// checksum is checked when the published manifest is read.
func (v *verifier) checkPointer(table string, p catalog.Pointer, head uint64, present map[uint64]bool) {
	pkey := v.cat.Key(table)
	if p.Version == 0 {
		v.rep.fault(table, 0, pkey, "published pointer names version 0", catalog.ErrCorrupt)
		return
	}
	if want := manifest.ManifestKey(table, p.Version); p.ManifestKey != want {
		v.rep.fault(table, p.Version, pkey, fmt.Sprintf("published pointer names manifest %q, version %d is %q", p.ManifestKey, p.Version, want), catalog.ErrCorrupt)
	}
	if p.Version > head {
		v.rep.fault(table, p.Version, pkey, fmt.Sprintf("HEAD %d is below the published version %d (invariant 3)", head, p.Version), manifest.ErrVersionNotFound)
	} else if !present[p.Version] {
		v.rep.fault(table, p.Version, manifest.ManifestKey(table, p.Version), "the published version's manifest is missing", manifest.ErrVersionNotFound)
	}
}

// checkManifest checks what one manifest says about the chain: its transaction record
// exists, its read version is below it, and its multi-table group (if any) is decided.
func (v *verifier) checkManifest(ctx context.Context, m *manifest.Manifest, published bool) error {
	if m.Txn.ReadVersion >= m.Version {
		v.rep.fault(m.Table, m.Version, m.Key(), fmt.Sprintf("transaction read version %d is not below the version", m.Txn.ReadVersion), manifest.ErrCorrupt)
	}
	if m.TxnKey != "" {
		v.exists(ctx, m.Table, m.Version, m.TxnKey, "transaction record")
	}
	g := m.Txn.Op.Group
	if g == nil || v.cat == nil {
		return nil
	}
	st, err := v.cat.GroupState(ctx, g.ID)
	if err != nil {
		if errors.Is(err, catalog.ErrCorrupt) {
			v.rep.fault(m.Table, m.Version, v.cat.GroupKey(g.ID), "multi-table group state unreadable", err)
			return nil
		}
		return fmt.Errorf("verify: table %q version %d: read group %s: %w", m.Table, m.Version, g.ID, err)
	}
	switch st {
	case catalog.GroupAborted:
		if published {
			v.rep.fault(m.Table, m.Version, m.Key(), fmt.Sprintf("published version belongs to aborted multi-table group %s", g.ID), nil)
		} else {
			v.rep.note(m.Table, m.Version, m.Key(), "prepared version of aborted multi-table group %s (counts as empty)", g.ID)
		}
	case catalog.GroupPending:
		v.rep.note(m.Table, m.Version, m.Key(), "prepared version of multi-table group %s, still pending", g.ID)
	}
	return nil
}

// exists checks (once per key) that an object is in the store with one HEAD.
func (v *verifier) exists(ctx context.Context, table string, ver uint64, key, what string) {
	err, done := v.heads[key]
	if !done {
		_, err = v.s.Head(ctx, key)
		v.heads[key] = err
		if err != nil {
			v.objectFault(table, ver, key, what, err)
		}
	}
}

// objectFault records a failure to read or decode one object, worded by its class.
func (v *verifier) objectFault(table string, ver uint64, key, what string, err error) {
	var problem string
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, manifest.ErrVersionNotFound):
		problem = what + " missing"
	case errors.Is(err, manifest.ErrCorrupt), errors.Is(err, fragment.ErrCorrupt), errors.Is(err, wal.ErrCorrupt):
		problem = what + " corrupt"
	case errors.Is(err, manifest.ErrFormatTooNew), errors.Is(err, manifest.ErrFormatTooOld), errors.Is(err, fragment.ErrUnsupportedVersion), errors.Is(err, wal.ErrFormatTooNew):
		problem = what + " in a format this build does not read"
	default:
		problem = what + " unreadable"
	}
	v.rep.fault(table, ver, key, problem, err)
}
