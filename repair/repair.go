// Package repair publishes drift that no recovery sidecar explains (DESIGN §11): versions
// committed above a table's published version by writers that died before publishing
// (or whose publish failed) and that no pending sidecar names.
//
// Inspect reads the published pointer, HEAD and every manifest from published+1 to HEAD,
// and Classify (pure) sorts each version's transaction: maintenance (content-preserving:
// manifest.OpKind.Maintenance) or logical, and whether a pending sidecar names it (then
// it is `shale recover`'s work, not repair's). Repair publishes by fast-forward to HEAD
// only when asked to: maintenance-only drift with Confirm, logical drift with Confirm and
// Force, sidecar-covered drift never. Repair never writes, rewrites or deletes data or
// manifests; its only write is the catalog pointer.
//
// Where to start: Inspect(ctx, st, db.Catalog(), table) previews a table's drift as a
// Plan; Repair with Options{Confirm: true} (and Force for logical drift) publishes it.
package repair

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// Errors.
var (
	// ErrLogicalDrift: the drift holds logical writes (appends, deletes, …) whose writers
	// never saw them published; publishing them needs Force.
	ErrLogicalDrift = errors.New("repair: logical drift needs --force")
	// ErrSidecarPending: a pending recovery sidecar names a drifting version (or cannot be
	// read, so might): run `shale recover` instead.
	ErrSidecarPending = errors.New("repair: drift is covered by a recovery sidecar; run recover")
	// ErrPublishedAhead: the published version is above HEAD (invariant 3: corruption).
	ErrPublishedAhead = errors.New("repair: published version is above HEAD")
	// ErrGroupPending: a drifting version belongs to a multi-table group still being
	// decided; its commit publishes it (or its abort voids it). Retry later.
	ErrGroupPending = errors.New("repair: a multi-table group is still pending")
	// ErrNoCatalog: there is no catalog, so nothing is ever published.
	ErrNoCatalog = errors.New("repair: no catalog")
)

// Class is a drifting version's kind of change.
type Class string

const (
	Maintenance Class = "maintenance" // content-preserving (rewrite, index, WAL merge)
	Logical     Class = "logical"     // changes rows, schema or config
	// Aborted: a prepared version of an aborted multi-table group; it counts as empty
	// (later versions are built without it) and is never published itself.
	Aborted Class = "aborted"
)

// Decision is what Repair may do with a table's drift.
type Decision string

const (
	NoDrift        Decision = "no-drift"        // HEAD = published: nothing to do
	Publishable    Decision = "publish"         // maintenance-only drift: publish with Confirm
	NeedsForce     Decision = "needs-force"     // logical drift: publish with Confirm and Force
	RunRecover     Decision = "run-recover"     // a sidecar names (or may name) a version: recover's
	GroupPending   Decision = "group-pending"   // a multi-table group is deciding a version: retry later
	OnlyAborted    Decision = "only-aborted"    // every drifting version belongs to an aborted group: nothing to publish
	PublishedAhead Decision = "published-ahead" // HEAD < published: corruption, nothing to publish
)

// Version is one drifting version.
type Version struct {
	Version   uint64          `json:"version"`           // the version number
	TxnID     string          `json:"txn_id"`            // the transaction that committed it
	Kind      manifest.OpKind `json:"kind"`              // what the transaction did
	Class     Class           `json:"class"`             // Maintenance, Logical or Aborted
	Committed time.Time       `json:"planned_at"`        // the transaction's timestamp
	Sidecar   string          `json:"sidecar,omitempty"` // the pending sidecar naming it
	Group     string          `json:"group,omitempty"`   // the multi-table group it belongs to
	// GroupState is the group's state ("pending", "committed", "aborted") when Group is set.
	GroupState string `json:"group_state,omitempty"`
}

// Plan is a table's drift, classified.
type Plan struct {
	Table     string    `json:"table"`              // the table inspected
	Published uint64    `json:"published"`          // 0: never published
	Head      uint64    `json:"head"`               // the highest version in the store
	Versions  []Version `json:"versions,omitempty"` // published+1 … HEAD, ascending
	// Target is the version a publish would move the pointer to: the highest drifting
	// version that is not an aborted group member (0: none).
	Target   uint64   `json:"target,omitempty"`
	Decision Decision `json:"decision"` // what Repair may do, by Classify's rules
	// Unreadable lists sidecars that could not be read; they may name any version.
	Unreadable []string `json:"unreadable_sidecars,omitempty"`
}

// Classify sorts the drift of table: versions holds the manifests from published+1 to
// head (ascending; others are ignored), sidecars the pending sidecars (any table; those
// of other tables are ignored, unreadable ones count for every table) and groups the
// state of each multi-table group a version belongs to (a missing entry counts as
// pending: undecided). The decision, strongest first: PublishedAhead if head <
// published; NoDrift if head = published; GroupPending if a version's group is pending;
// RunRecover if a sidecar names a drifting version's transaction or a sidecar is
// unreadable; OnlyAborted if every version is an aborted group member; NeedsForce if any
// version is logical; else Publishable. Pure.
func Classify(table string, published, head uint64, versions []*manifest.Manifest, sidecars []recovery.Keyed, groups map[string]catalog.GroupState) Plan {
	p := Plan{Table: table, Published: published, Head: head}
	switch {
	case head < published:
		p.Decision = PublishedAhead
		return p
	case head == published:
		p.Decision = NoDrift
		return p
	}
	owner := map[string]string{} // txn id -> sidecar key
	for _, k := range sidecars {
		if k.Err != nil {
			p.Unreadable = append(p.Unreadable, k.Key)
			continue
		}
		if k.Sidecar.Table != table {
			continue
		}
		for _, a := range k.Sidecar.Attempts {
			owner[a.TxnID] = k.Key
		}
	}
	covered, logical, pending := len(p.Unreadable) > 0, false, false
	for _, m := range versions {
		if m == nil || m.Version <= published || m.Version > head {
			continue
		}
		v := Version{Version: m.Version, TxnID: m.Txn.ID, Kind: m.Txn.Op.Kind, Class: Logical,
			Committed: time.Unix(0, m.Txn.Timestamp).UTC(), Sidecar: owner[m.Txn.ID]}
		if m.Txn.Op.Kind.Maintenance() {
			v.Class = Maintenance
		}
		if g := m.Txn.Op.Group; g != nil {
			st, ok := groups[g.ID]
			if !ok {
				st = catalog.GroupPending
			}
			v.Group, v.GroupState = g.ID, st.String()
			switch st {
			case catalog.GroupAborted:
				v.Class = Aborted
			case catalog.GroupPending:
				pending = true
			}
		}
		if v.Class != Aborted {
			p.Target = v.Version
		}
		logical = logical || v.Class == Logical
		covered = covered || v.Sidecar != ""
		p.Versions = append(p.Versions, v)
	}
	switch {
	case pending:
		p.Decision = GroupPending
	case covered:
		p.Decision = RunRecover
	case p.Target == 0:
		p.Decision = OnlyAborted
	case logical:
		p.Decision = NeedsForce
	default:
		p.Decision = Publishable
	}
	return p
}

// Allowed reports whether Repair may publish p's drift: nil for Publishable, and for
// NeedsForce when force is set; otherwise ErrLogicalDrift, ErrSidecarPending or
// ErrPublishedAhead, naming the table and the first offending version. NoDrift returns
// nil (there is nothing to publish). Pure.
func Allowed(p Plan, force bool) error {
	switch p.Decision {
	case NoDrift, Publishable, OnlyAborted:
		return nil
	case NeedsForce:
		if force {
			return nil
		}
		for _, v := range p.Versions {
			if v.Class == Logical {
				return fmt.Errorf("table %q: %w: version %d is a logical %s (transaction %s)", p.Table, ErrLogicalDrift, v.Version, v.Kind, v.TxnID)
			}
		}
		return fmt.Errorf("table %q: %w", p.Table, ErrLogicalDrift)
	case RunRecover:
		for _, v := range p.Versions {
			if v.Sidecar != "" {
				return fmt.Errorf("table %q: %w: version %d (transaction %s) is named by sidecar %s", p.Table, ErrSidecarPending, v.Version, v.TxnID, v.Sidecar)
			}
		}
		return fmt.Errorf("table %q: %w: unreadable sidecar(s) %v", p.Table, ErrSidecarPending, p.Unreadable)
	case GroupPending:
		for _, v := range p.Versions {
			if v.GroupState == catalog.GroupPending.String() {
				return fmt.Errorf("table %q: %w: version %d belongs to group %s", p.Table, ErrGroupPending, v.Version, v.Group)
			}
		}
		return fmt.Errorf("table %q: %w", p.Table, ErrGroupPending)
	case PublishedAhead:
		return fmt.Errorf("table %q: %w: HEAD %d, published %d", p.Table, ErrPublishedAhead, p.Head, p.Published)
	}
	return fmt.Errorf("table %q: unknown decision %q", p.Table, p.Decision)
}

// Inspect reads table's drift and classifies it: the published pointer, then HEAD and the
// manifests from published+1 to HEAD, then the pending sidecars. Sidecars are listed
// last because an operation writes its sidecar before it commits: a sidecar naming a
// version read here is either still listed or already resolved. Cost: one etcd read, one
// LIST of the versions and of _recovery/, one GET per drifting version and per sidecar.
// Errors: ErrNoCatalog, manifest.ErrTableNotFound (a *manifest.DroppedError for a dropped
// table), store, etcd and manifest errors (naming the table, version and key). Drift is
// counted in HEAD's incarnation: a pointer left from an earlier one counts as none.
func Inspect(ctx context.Context, s store.Store, cat *catalog.Catalog, table string) (Plan, error) {
	if cat == nil {
		return Plan{}, fmt.Errorf("table %q: %w", table, ErrNoCatalog)
	}
	var published uint64
	ptr, _, err := cat.Get(ctx, table)
	switch {
	case err == nil:
		published = ptr.Version
	case !errors.Is(err, catalog.ErrNoPointer):
		return Plan{}, fmt.Errorf("table %q: read published version: %w", table, err)
	}
	head, err := manifest.Head(ctx, s, table)
	if err != nil {
		return Plan{}, fmt.Errorf("table %q: %w", table, err)
	}
	// Drift is counted in HEAD's incarnation: a dropped table has none to publish, and a
	// pointer left from an earlier incarnation (a drop, then a create whose publish did
	// not finish) counts as no pointer.
	first := uint64(1)
	if rec, err := manifest.LoadRecord(ctx, s, table, head); err != nil {
		return Plan{}, fmt.Errorf("table %q: HEAD: %w", table, err)
	} else if rec.Txn != nil && rec.Txn.Op.Kind == manifest.OpDrop {
		return Plan{}, &manifest.DroppedError{Table: table, Version: head, Detail: "nothing to repair"}
	} else if rec.Manifest != nil {
		first = max(first, rec.Manifest.IncarnationSince)
	}
	if published < first {
		published = 0
	}
	var ms []*manifest.Manifest
	for v := max(published+1, first); v <= head; v++ {
		m, err := manifest.Load(ctx, s, table, v)
		if err != nil {
			return Plan{}, fmt.Errorf("table %q: drifting version %d (%s): %w", table, v, manifest.ManifestKey(table, v), err)
		}
		ms = append(ms, m)
	}
	groups := map[string]catalog.GroupState{}
	for _, m := range ms {
		if g := m.Txn.Op.Group; g != nil {
			if _, ok := groups[g.ID]; ok {
				continue
			}
			if groups[g.ID], err = cat.GroupState(ctx, g.ID); err != nil {
				return Plan{}, fmt.Errorf("table %q: version %d: group %s: %w", table, m.Version, g.ID, err)
			}
		}
	}
	var sidecars []recovery.Keyed
	if head > published {
		if sidecars, err = recovery.PendingSidecars(ctx, s, table); err != nil {
			return Plan{}, fmt.Errorf("table %q: %w", table, err)
		}
	}
	return Classify(table, published, head, ms, sidecars, groups), nil
}

// Options tune Repair.
type Options struct {
	// Confirm publishes; without it Repair only inspects (a preview).
	Confirm bool
	// Force allows publishing logical drift (with Confirm).
	Force bool
}

// Result is what Repair found and did.
type Result struct {
	Plan
	// Repaired: the pointer was moved to (or found at or past) Plan.Target by this call.
	Repaired bool `json:"repaired"`
	// PublishedNow is the published version afterwards (when Repaired).
	PublishedNow uint64 `json:"published_now,omitempty"`
}

// Repair inspects table and, with opts.Confirm, publishes its drift by fast-forward to
// Plan.Target, the highest version it classified that is not an aborted group member
// (never further: versions committed meanwhile stay unpublished), when Allowed(plan,
// opts.Force). It never touches data or manifests. A preview
// (no Confirm) returns the plan and no error whatever the decision.
// Errors: Inspect's; with Confirm, Allowed's (ErrLogicalDrift, ErrSidecarPending,
// ErrPublishedAhead) and catalog errors from the publish (naming the table and version).
func Repair(ctx context.Context, s store.Store, cat *catalog.Catalog, table string, opts Options) (Result, error) {
	p, err := Inspect(ctx, s, cat, table)
	if err != nil {
		return Result{Plan: p}, err
	}
	res := Result{Plan: p}
	if !opts.Confirm || p.Decision == NoDrift || p.Decision == OnlyAborted {
		return res, nil
	}
	if err := Allowed(p, opts.Force); err != nil {
		return res, err
	}
	m, err := manifest.Load(ctx, s, table, p.Target)
	if err != nil {
		return res, fmt.Errorf("table %q: version %d: %w", table, p.Target, err)
	}
	adv, err := engine.PublishVersion(ctx, s, cat, m, m.Checksum())
	if err != nil {
		return res, fmt.Errorf("table %q: publish version %d (%s): %w", table, m.Version, m.Key(), err)
	}
	res.Repaired, res.PublishedNow = true, adv.Now.Version
	return res, nil
}
