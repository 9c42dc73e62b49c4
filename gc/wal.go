package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// Classes of the objects under <table>/_wal/ that GC keeps (see the package comment, "WAL
// shards"). A shard manifest is ManifestObj; an object GC does not recognise is Unknown.
const (
	WALLog      Class = "wal-log"       // an entry above the replay position, or the last entry of its epoch (a fence)
	WALUnmerged Class = "wal-unmerged"  // a file of a generation the shard manifest lists above the lowest retained merged watermark
	WALInFlight Class = "wal-in-flight" // a file of a generation a flush in flight, or a writer that claimed after GC read the shard manifest, may list; any object of a shard that appeared after
	// the run read the WAL
	WALUnread Class = "wal-unread" // an object of a shard whose manifest GC could not read: every object of the shard is kept
)

// DefaultWALKeepManifests is how many of a shard's newest manifest versions are kept
// whole when Policy.WALKeepManifests is 0; older ones become tombstones.
const DefaultWALKeepManifests = 10

// seamAfterWALManifests fires after a run read the table's shard manifests and before it
// reads the table's versions (tests make a merge or a claim happen there).
var seamAfterWALManifests = failpoint.Seam("gc.after_wal_manifests")

// WALState is what a run knows of a table's WAL when it classifies its objects.
type WALState struct {
	// Shards maps every shard id found under <table>/_wal/ to its newest shard manifest,
	// read before the table's versions (nil: none could be read; the shard is kept whole).
	Shards map[string]*wal.ShardManifest
	// Merged maps a shard to the lowest merged watermark (manifest.Manifest.WALMerged)
	// over every version the run retains or saw committed; a shard absent from it is 0.
	// A generation the shard manifest lists above it may still be read from the WAL by a
	// reader of a retained version.
	Merged map[string]uint64
}

// WALShardReport is what a run found and did in one WAL shard.
type WALShardReport struct {
	Shard string `json:"shard"` // the shard id
	// Version, Epoch, Replay and NextGeneration are those of the shard manifest read
	// before the versions (all 0 when Skipped).
	Version        uint64 `json:"version"`
	Epoch          uint64 `json:"epoch"`           // the writer epoch that owned the shard
	Replay         string `json:"replay"`          // the replay position, epoch/position
	NextGeneration uint64 `json:"next_generation"` // generations at or above it (of the manifest's epoch) are a flush in flight
	Merged         uint64 `json:"merged"`          // the lowest merged watermark over the retained versions
	// ExpiredManifests are the shard manifest versions this run replaced by tombstones.
	ExpiredManifests []uint64 `json:"expired_manifests"`
	// Skipped says why every object of the shard was kept ("" when it was collected).
	Skipped string `json:"skipped,omitempty"`
}

// readWAL lists the table's WAL and reads the newest manifest of every shard it finds
// (one LIST of <table>/_wal/, then a LIST and a GET per shard). This comes before the
// versions are read: see the package comment for why the order matters. A shard whose
// manifest is missing, corrupt, or from a newer format is kept whole (nil in the map,
// the reason in the report); store errors fail the run.
func (g *collector) readWAL(ctx context.Context) error {
	g.wal = &WALState{Shards: map[string]*wal.ShardManifest{}, Merged: map[string]uint64{}}
	objs, err := g.s.List(ctx, wal.Dir(g.table), 0)
	if err != nil {
		return fmt.Errorf("list %s: %w", wal.Dir(g.table), err)
	}
	var ids []string
	for _, o := range objs {
		if id, _, ok := wal.SplitKey(g.table, o.Key); ok && !slices.Contains(ids, id) && !strings.HasPrefix(id, "_") {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		m, err := wal.LoadShard(ctx, g.s, g.table, id)
		r := WALShardReport{Shard: id, ExpiredManifests: []uint64{}}
		var oe *wal.ObjectError
		switch {
		case err == nil:
			g.wal.Shards[id] = m
			r.Version, r.Epoch, r.Replay, r.NextGeneration = m.Version, m.Epoch, m.Replay.String(), m.NextGeneration
		case errors.Is(err, wal.ErrNoShard):
			g.wal.Shards[id] = nil
			r.Skipped = "no shard manifest (a writer's first claim in flight, or its manifests were removed by hand)"
		case errors.As(err, &oe) && (errors.Is(err, wal.ErrCorrupt) || errors.Is(err, wal.ErrFormatTooNew) || errors.Is(err, wal.ErrExpired)):
			g.wal.Shards[id] = nil
			r.Skipped = "the newest shard manifest does not read: " + err.Error() + " (run shale verify)"
		default:
			return err
		}
		g.rep.WAL = append(g.rep.WAL, r)
	}
	return seamAfterWALManifests.Inject(ctx)
}

// noteWatermarks lowers the WAL state's merged watermarks to m's (m is a version the run
// retains, restored, or read forward).
func (g *collector) noteWatermarks(m *manifest.Manifest) {
	if g.wal == nil {
		return
	}
	for id := range g.wal.Shards {
		w := m.WALMerged[id]
		if cur, ok := g.wal.Merged[id]; !ok || w < cur {
			g.wal.Merged[id] = w
		}
	}
}

// foreignShards zeroes the merged watermark of every shard whose manifest belongs to
// another incarnation than HEAD's (a dropped table's shard not claimed again yet): the
// retained versions' watermarks say nothing about its generations, so every generation
// it lists is kept until a writer of this incarnation claims the shard.
func (g *collector) foreignShards(head *manifest.Manifest) {
	if g.wal == nil || head == nil || head.Incarnation == "" {
		return
	}
	for id, m := range g.wal.Shards {
		if m != nil && m.Incarnation != "" && m.Incarnation != head.Incarnation {
			g.wal.Merged[id] = 0
		}
	}
}

// walReport returns the report of shard id, or nil.
func (g *collector) walReport(id string) *WALShardReport {
	for i := range g.rep.WAL {
		if g.rep.WAL[i].Shard == id {
			return &g.rep.WAL[i]
		}
	}
	return nil
}

// ClassifyWAL decides what to do with every object of table's WAL in objs (a listing of
// the table made after st's shard manifests were read and after r's references were
// gathered; other keys are ignored), returning the class of each. Pure. The rules (see
// the package comment for why each is needed):
//
//   - a shard manifest is ManifestObj (old versions become tombstones separately; none is
//     ever deleted);
//   - an entry above the shard manifest's replay position, or the highest-position entry
//     present in its epoch's directory, is WALLog; any other is Young within the grace
//     period, else Garbage;
//   - a generation directory (generation g, flushed by epoch e) is kept whole when a
//     retained version references any of its files (Referenced: a merged generation's
//     files are base fragments), when e is above the shard manifest's epoch or e equals
//     it and g is at or above its NextGeneration (WALInFlight), or when the shard
//     manifest lists that very directory for g and g is above st.Merged (WALUnmerged);
//     otherwise it is Young within the grace period, else Garbage;
//   - every object of a shard with no readable manifest is WALUnread.
func ClassifyWAL(table string, objs []store.ObjectInfo, st *WALState, r *Refs) map[string]Class {
	out := map[string]Class{}
	type epochKey struct {
		shard string
		epoch uint64
	}
	last := map[epochKey]uint64{} // highest entry position present per shard and epoch
	dirRefd := map[string]bool{}  // generation directories with a referenced file
	type parsed struct {
		o     store.ObjectInfo
		shard string
		rest  string
		entry wal.Position
		isEnt bool
		dir   string // generation directory (no trailing slash)
		gen   uint64
		epoch uint64
		isGen bool
	}
	var ps []parsed
	for _, o := range objs {
		shard, rest, ok := wal.SplitKey(table, o.Key)
		if !ok {
			if strings.HasPrefix(o.Key, wal.Dir(table)) {
				out[o.Key] = Unknown
			}
			continue
		}
		p := parsed{o: o, shard: shard, rest: rest}
		switch {
		case strings.HasPrefix(rest, "entries/"):
			if pos, err := wal.ParseEntryKey(table, shard, o.Key); err == nil {
				p.entry, p.isEnt = pos, true
				k := epochKey{shard, pos.Epoch}
				last[k] = max(last[k], pos.Pos)
			}
		case strings.HasPrefix(rest, "gen-"):
			if gen, epoch, ok := wal.ParseGenerationKey(table, shard, o.Key); ok {
				if d, _, found := strings.Cut(rest, "/"); found {
					p.dir, p.gen, p.epoch, p.isGen = wal.ShardDir(table, shard)+d, gen, epoch, true
					if r.Files[o.Key] {
						dirRefd[p.dir] = true
					}
				}
			}
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		key, young := p.o.Key, p.o.ModTime.After(r.Cutoff)
		m, known := st.Shards[p.shard]
		switch {
		case strings.HasPrefix(p.shard, "_"):
			out[key] = Unknown // _wal/_merge/ is a WAL merge's (empty) attempt prefix: nothing is stored there
		case !known:
			out[key] = WALInFlight
		case m == nil:
			out[key] = WALUnread
		case strings.HasPrefix(p.rest, "manifest/"):
			if _, err := wal.ParseManifestKey(table, p.shard, key); err != nil {
				out[key] = Unknown
			} else {
				out[key] = ManifestObj
			}
		case p.isEnt:
			switch {
			case m.Replay.Less(p.entry), p.entry.Pos == last[epochKey{p.shard, p.entry.Epoch}]:
				out[key] = WALLog
			case young:
				out[key] = Young
			default:
				out[key] = Garbage
			}
		case p.isGen:
			switch {
			case dirRefd[p.dir]:
				out[key] = Referenced
			case p.epoch > m.Epoch, p.epoch == m.Epoch && p.gen >= m.NextGeneration:
				out[key] = WALInFlight
			case p.gen > st.Merged[p.shard] && slices.ContainsFunc(m.Generations, func(g wal.Generation) bool {
				return g.Generation == p.gen && g.Dir == p.dir
			}):
				out[key] = WALUnmerged
			case young:
				out[key] = Young
			default:
				out[key] = Garbage
			}
		default:
			out[key] = Unknown
		}
	}
	return out
}

// expireWALManifests replaces every shard manifest version below the newest
// Policy.WALKeepManifests of each collected shard by a tombstone (wal.ExpireShardManifest),
// oldest first, so the tombstones are always the oldest versions: going down from the
// newest kept, the first tombstone met ends the walk (one GET per version expired, not per
// version ever written). A tombstone keeps the version's key taken; a version is never
// deleted (a fenced writer's flush could otherwise land in its number). objs is the
// table's listing.
func (g *collector) expireWALManifests(ctx context.Context, objs []store.ObjectInfo) error {
	keep := g.p.WALKeepManifests
	if keep <= 0 {
		keep = DefaultWALKeepManifests
	}
	byShard := map[string][]uint64{}
	for _, o := range objs {
		shard, rest, ok := wal.SplitKey(g.table, o.Key)
		if !ok || !strings.HasPrefix(rest, "manifest/") || g.wal.Shards[shard] == nil {
			continue
		}
		if v, err := wal.ParseManifestKey(g.table, shard, o.Key); err == nil {
			byShard[shard] = append(byShard[shard], v)
		}
	}
	for shard, vs := range byShard {
		slices.Sort(vs)
		if len(vs) <= keep {
			continue
		}
		var doomed []uint64
		for i := len(vs) - keep - 1; i >= 0; i-- {
			_, err := wal.LoadShardVersion(ctx, g.s, g.table, shard, vs[i])
			if errors.Is(err, wal.ErrExpired) {
				break
			}
			switch {
			case errors.Is(err, store.ErrNotFound), errors.Is(err, wal.ErrCorrupt), errors.Is(err, wal.ErrFormatTooNew):
				continue // left as it is: verify reports it, and only the newest is read
			case err != nil:
				return err
			}
			doomed = append(doomed, vs[i])
		}
		slices.Sort(doomed)
		r := g.walReport(shard)
		for _, v := range doomed {
			if !g.p.DryRun {
				if err := wal.ExpireShardManifest(ctx, g.s, g.table, shard, v); err != nil {
					return err
				}
			}
			if r != nil {
				r.ExpiredManifests = append(r.ExpiredManifests, v)
			}
		}
	}
	return nil
}

// isShardManifestKey reports whether key is a WAL shard manifest of table.
func isShardManifestKey(table, key string) bool {
	shard, rest, ok := wal.SplitKey(table, key)
	if !ok || !strings.HasPrefix(rest, "manifest/") {
		return false
	}
	_, err := wal.ParseManifestKey(table, shard, key)
	return err == nil
}
