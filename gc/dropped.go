package gc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// tableDirs are the children that make a top-level prefix look like a table directory.
var tableDirs = []string{"data/", "_deletions/", "_indices/", "_txn/", "_versions/", "_wal/"}

// reserved are store-wide prefixes that are never a table's, whatever they hold (table
// names cannot start with '_' or '.' either; this is belt and braces).
var reserved = []string{"_shale/", recovery.Dir, store.ProbeKeyPrefix, store.TempDir + "/"}

// DroppedCandidates groups a listing of the whole store (objs, any order) into the
// top-level prefixes that look like the remains of a dropped table: a valid table name,
// at least one object under data/, _deletions/, _indices/, _txn/, _versions/ or _wal/
// (other than a WAL shard manifest, which is never deleted), and no manifest (no key under
// _versions/ that parses as one; a tombstone counts as a manifest). It returns each such
// table's objects under those directories but the shard manifests, ascending by key;
// other objects under the prefix (shapes GC does not recognise) are left out, so they
// are never deleted. Reserved prefixes (_shale/, _recovery/, _probe/, .shale-tmp/) and
// top-level objects are never candidates. Pure.
func DroppedCandidates(objs []store.ObjectInfo) map[string][]store.ObjectInfo {
	out := map[string][]store.ObjectInfo{}
	live := map[string]bool{}
	for _, o := range objs {
		if isReserved(o.Key) {
			continue
		}
		table, rest, ok := strings.Cut(o.Key, "/")
		if !ok || manifest.ValidateTableName(table) != nil {
			continue
		}
		if strings.HasPrefix(rest, "_versions/") {
			if _, err := manifest.ParseManifestKey(table, o.Key); err == nil {
				live[table] = true
				continue
			}
		}
		if isShardManifestKey(table, o.Key) {
			continue // kept for good, as a drop marker is (see markerLeftovers)
		}
		for _, d := range tableDirs {
			if strings.HasPrefix(rest, d) && len(rest) > len(d) {
				out[table] = append(out[table], o)
				break
			}
		}
	}
	for t := range live {
		delete(out, t)
	}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool { return list[i].Key < list[j].Key })
	}
	return out
}

func isReserved(key string) bool {
	for _, p := range reserved {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// DroppedSkip says why a dropped table's leftovers were all kept.
type DroppedSkip struct {
	Table  string `json:"table"`  // the dropped table's name (its top-level prefix)
	Reason string `json:"reason"` // why, in words: a pointer, a live hold or a pending sidecar names it
}

// markerLeftovers returns the objects of a dropped table h (HEAD a drop marker) that go:
// every object under its data/, _deletions/, _indices/, _txn/, _versions/ and _wal/ except
// the marker manifest, its transaction record and the WAL shard manifests, ascending by key
// (objs, any order). The marker stays for good: it keeps the table's version numbers from
// being used again; the shard manifests, likewise, keep each shard's manifest versions
// taken, so a WAL writer of the dropped table still running cannot put its next flush
// into a number a new incarnation's writer will claim (engine.DB.DropTable keeps them too).
func markerLeftovers(h manifest.TableHead, objs []store.ObjectInfo) []store.ObjectInfo {
	var out []store.ObjectInfo
	keep := manifest.ManifestKey(h.Table, h.Head)
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Key, h.Table+"/")
		if !ok || o.Key == keep || o.Key == h.TxnKey || isShardManifestKey(h.Table, o.Key) {
			continue
		}
		for _, d := range tableDirs {
			if strings.HasPrefix(rest, d) && len(rest) > len(d) {
				out = append(out, o)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// collectDropped deletes the leftovers of dropped tables older than the grace period:
// those of manifest-less prefixes (DroppedCandidates: a drop by an older build, or objects
// a write racing such a drop left) and those of tables whose HEAD is a drop marker
// (markerLeftovers: a drop that died midway, versions and files a writer racing the drop
// wrote after its listing). only restricts the run to one table ("" = every table). A
// candidate is skipped whole when the catalog has a pointer for it (a drop that died
// before removing it: dropping again finishes it), a live hold on it, or a pending
// recovery sidecar names it (or cannot be read), or when it was created again since the
// listing. Objects younger than the grace period are kept (a short write racing the drop,
// or the first files of a table being created under the same name). heads caches HEAD
// manifests read (manifest.HeadsOf); tables in live were just collected as live tables
// and are not looked at (one dropped since is collected by the next run).
func collectDropped(ctx context.Context, s store.Store, cat *catalog.Catalog, p Policy, rep *Report, only string, heads map[string]manifest.TableHead, live map[string]bool) error {
	prefix := ""
	if only != "" {
		prefix = only + "/"
	}
	all, err := s.List(ctx, prefix, 0)
	if err != nil {
		return fmt.Errorf("list %s%s: %w", s.URL(), prefix, err)
	}
	objs := all[:0:0]
	for _, o := range all {
		if t, _, _ := strings.Cut(o.Key, "/"); !live[t] {
			objs = append(objs, o)
		}
	}
	cands := DroppedCandidates(objs)
	hs, err := manifest.HeadsOf(ctx, s, objs, heads)
	if err != nil {
		return err
	}
	markers := map[string]uint64{}
	for _, h := range hs {
		if !h.Dropped {
			continue
		}
		if left := markerLeftovers(h, objs); len(left) > 0 {
			cands[h.Table], markers[h.Table] = left, h.Head
		}
	}
	tables := make([]string, 0, len(cands))
	for t := range cands {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	// The listing came first: a pointer, hold or sidecar made before it is seen below.
	for _, t := range tables {
		why, err := droppedBlocker(ctx, s, cat, t, markers[t])
		if err != nil {
			return fmt.Errorf("table %q (dropped?): %w", t, err)
		}
		if why != "" {
			rep.DroppedSkipped = append(rep.DroppedSkipped, DroppedSkip{Table: t, Reason: why})
			rep.DroppedKept += len(cands[t])
			continue
		}
		cutoff := time.Now().Add(-p.GracePeriod)
		for _, o := range cands[t] {
			if o.ModTime.After(cutoff) {
				rep.DroppedKept++
				continue
			}
			if !p.DryRun {
				if err := s.Delete(ctx, o.Key); err != nil {
					return &manifest.ObjectError{Table: t, Key: o.Key, Err: fmt.Errorf("delete dropped table's leftover: %w", err)}
				}
			}
			rep.DroppedLeftovers = append(rep.DroppedLeftovers, File{Key: o.Key, Bytes: o.Size, Class: Garbage})
		}
	}
	return nil
}

// droppedBlocker returns why table's leftovers must stay ("" if nothing protects them).
// marker is the version of its drop marker (0: a manifest-less prefix).
func droppedBlocker(ctx context.Context, s store.Store, cat *catalog.Catalog, table string, marker uint64) (string, error) {
	if cat != nil {
		_, _, err := cat.Get(ctx, table)
		switch {
		case err == nil && marker != 0:
			return "the catalog still has a pointer for it (a drop that died midway: drop it again to finish)", nil
		case err == nil:
			return "the catalog has a pointer for it (manifests missing: run shale verify)", nil
		case !errors.Is(err, catalog.ErrNoPointer):
			return "", fmt.Errorf("read published version: %w", err)
		}
		holds, err := cat.Holds(ctx, table)
		if err != nil {
			return "", fmt.Errorf("read holds: %w", err)
		}
		if len(holds) > 0 {
			return fmt.Sprintf("%d live hold(s), e.g. %s %s", len(holds), holds[0].Kind, holds[0].ID), nil
		}
	}
	keys, err := recovery.Pending(ctx, s, table)
	if err != nil {
		return "", err
	}
	if len(keys) > 0 {
		return "pending recovery sidecar " + keys[0], nil
	}
	if marker != 0 {
		head, err := manifest.Head(ctx, s, table)
		if err != nil {
			return "", err
		}
		if head != marker {
			return "a version appeared above the drop marker (table created again)", nil
		}
		return "", nil
	}
	vs, err := manifest.Versions(ctx, s, table)
	if err != nil {
		return "", err
	}
	if len(vs) > 0 {
		return "a manifest appeared (table re-created)", nil
	}
	return "", nil
}
