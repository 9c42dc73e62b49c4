package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// checkWAL verifies the table's WAL shards (package wal) against m, the version whose
// objects are read in full (the published one), and head, the newest version read:
//
//   - every shard manifest version of every shard decodes (a tombstone gc left is a
//     note), none is missing from 1 to the newest, and the newest is not a tombstone;
//   - m's merged watermark of each shard is at most the newest shard manifest's sealed
//     generation, and the generations it lists above the watermark are contiguous, from
//     the watermark + 1 up to the sealed generation (a gap at the start is accepted when
//     HEAD's watermark, newer than m's, explains it: a merge published meanwhile);
//   - every data file of those generations is read in full (as base data files are);
//   - every entry above the replay position decodes (checksum, trailer, metadata).
//
// One LIST of <table>/_wal/, a GET per shard manifest version, a GET per listed data file
// and per entry. Faults name the object.
func (v *verifier) checkWAL(ctx context.Context, table string, m, head *manifest.Manifest) error {
	objs, err := v.s.List(ctx, wal.Dir(table), 0)
	if err != nil {
		return fmt.Errorf("verify: table %q: list %s: %w", table, wal.Dir(table), err)
	}
	byShard := map[string][]store.ObjectInfo{}
	var ids []string
	for _, o := range objs {
		id, _, ok := wal.SplitKey(table, o.Key)
		switch {
		case !ok:
			v.rep.fault(table, 0, o.Key, "object under _wal/ outside any shard", wal.ErrCorrupt)
			continue
		case strings.HasPrefix(id, "_"):
			v.rep.note(table, 0, o.Key, "object under %s%s/, which holds nothing (a WAL merge's attempt prefix)", wal.Dir(table), id)
			continue
		}
		if _, seen := byShard[id]; !seen {
			ids = append(ids, id)
		}
		byShard[id] = append(byShard[id], o)
	}
	slices.SortFunc(ids, func(a, b string) int {
		ai, aerr := strconv.Atoi(a)
		bi, berr := strconv.Atoi(b)
		if aerr == nil && berr == nil {
			return ai - bi
		}
		return strings.Compare(a, b)
	})
	shards := 0
	if m != nil {
		shards = walShards(m.Config)
	}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		if n, err := strconv.Atoi(id); err != nil || n < 0 || n >= shards {
			v.rep.note(table, 0, wal.ShardDir(table, id), "WAL shard %s is outside the %d shard(s) the table's configuration names (left from an earlier configuration)", id, shards)
		}
		v.sum.WALShards++
		if err := v.checkShard(ctx, table, id, byShard[id], m, head); err != nil {
			return err
		}
	}
	return nil
}

// walShards is the shard count a configuration names (engine.ConfigWALShards).
func walShards(config map[string]string) int {
	n, err := strconv.Atoi(config["shale.wal.shards"])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func (v *verifier) checkShard(ctx context.Context, table, id string, objs []store.ObjectInfo, m, head *manifest.Manifest) error {
	var versions []uint64
	for _, o := range objs {
		if _, rest, _ := wal.SplitKey(table, o.Key); !strings.HasPrefix(rest, "manifest/") {
			continue
		}
		ver, err := wal.ParseManifestKey(table, id, o.Key)
		if err != nil {
			v.rep.fault(table, 0, o.Key, "object under a shard's manifest/ is not a shard manifest name", wal.ErrCorrupt)
			continue
		}
		versions = append(versions, ver)
	}
	slices.Sort(versions)
	if len(versions) == 0 {
		v.rep.fault(table, 0, wal.ManifestDir(table, id), fmt.Sprintf("WAL shard %s has objects but no shard manifest", id), wal.ErrNoShard)
		return nil
	}
	newest := versions[len(versions)-1]
	var latest *wal.ShardManifest
	var tombstones []uint64
	present := map[uint64]bool{}
	for _, ver := range versions {
		present[ver] = true
		sm, err := wal.LoadShardVersion(ctx, v.s, table, id, ver)
		switch {
		case errors.Is(err, wal.ErrExpired) && ver != newest:
			tombstones = append(tombstones, ver)
		case errors.Is(err, wal.ErrExpired):
			v.rep.fault(table, 0, wal.ManifestKey(table, id, ver), fmt.Sprintf("the newest manifest of WAL shard %s is a tombstone (gc never expires the newest)", id), err)
		case err != nil:
			v.objectFault(table, 0, wal.ManifestKey(table, id, ver), "shard manifest", err)
		case ver == newest:
			latest = sm
		}
	}
	if len(tombstones) > 0 {
		v.rep.note(table, 0, wal.ManifestDir(table, id), "WAL shard %s: %d old shard manifest version(s) expired by gc (tombstones), %d..%d",
			id, len(tombstones), tombstones[0], tombstones[len(tombstones)-1])
	}
	for want := uint64(1); want < newest; want++ {
		if !present[want] {
			v.rep.fault(table, 0, wal.ManifestKey(table, id, want), fmt.Sprintf("shard manifest version %d of WAL shard %s is missing (versions are never deleted)", want, id), store.ErrNotFound)
		}
	}
	if latest == nil {
		return nil // its fault is reported; nothing to check the rest against
	}
	if m != nil && latest.Incarnation != "" && m.Incarnation != "" && latest.Incarnation != m.Incarnation {
		v.rep.note(table, 0, latest.Key, "WAL shard %s belongs to a dropped incarnation of the table (its next claim starts it over); not read", id)
		return nil
	}
	if m != nil {
		v.checkWatermark(table, id, latest, m, head)
	}
	if err := v.checkGenerations(ctx, table, id, latest, m); err != nil {
		return err
	}
	return v.checkEntries(ctx, table, id, latest)
}

// checkWatermark checks m's merged watermark of shard id against the newest shard
// manifest: at most its sealed generation, and the generations listed above it contiguous
// up to the sealed one.
func (v *verifier) checkWatermark(table, id string, sm *wal.ShardManifest, m, head *manifest.Manifest) {
	w := m.WALMerged[id]
	sealed := sm.Sealed()
	start, in := w, fmt.Sprintf("version %d", m.Version)
	if gens := sm.Unmerged(w); (len(gens) == 0 || gens[0].Generation != w+1) && head != nil && head.WALMerged[id] > w {
		// A merge committed above m (not yet published) and the writer dropped what it
		// merged: check against HEAD's watermark.
		start, in = head.WALMerged[id], fmt.Sprintf("HEAD (version %d)", head.Version)
	}
	if start > sealed {
		v.rep.fault(table, m.Version, sm.Key, fmt.Sprintf("%s has WAL shard %s merged through generation %d, above the shard's sealed generation %d", in, id, start, sealed), wal.ErrCorrupt)
		return
	}
	next := start + 1
	for _, g := range sm.Unmerged(start) {
		if g.Generation != next {
			v.rep.fault(table, m.Version, sm.Key, fmt.Sprintf("WAL shard %s lists generation %d where generation %d should follow (merged through %d in %s): the generations above the watermark are not contiguous", id, g.Generation, next, start, in), wal.ErrCorrupt)
			return
		}
		next++
	}
	if next-1 < sealed {
		v.rep.fault(table, m.Version, sm.Key, fmt.Sprintf("WAL shard %s lists generations up to %d, but its sealed generation is %d and %s merged only through %d: generations %d..%d are missing", id, next-1, sealed, in, start, next, sealed), wal.ErrCorrupt)
	}
}

// checkGenerations reads in full every data file of the generations the newest shard
// manifest lists above m's merged watermark (all of them without m), and checks each
// generation's description against its files.
func (v *verifier) checkGenerations(ctx context.Context, table, id string, sm *wal.ShardManifest, m *manifest.Manifest) error {
	var merged uint64
	if m != nil {
		merged = m.WALMerged[id]
	}
	for i, g := range sm.Generations {
		if i > 0 && g.Generation <= sm.Generations[i-1].Generation {
			v.rep.fault(table, 0, sm.Key, fmt.Sprintf("WAL shard %s lists generation %d after %d (not ascending)", id, g.Generation, sm.Generations[i-1].Generation), wal.ErrCorrupt)
		}
		if g.Generation >= sm.NextGeneration || g.Epoch > sm.Epoch {
			v.rep.fault(table, 0, sm.Key, fmt.Sprintf("WAL shard %s lists generation %d of epoch %d, beyond the manifest's next generation %d or epoch %d", id, g.Generation, g.Epoch, sm.NextGeneration, sm.Epoch), wal.ErrCorrupt)
		}
	}
	for _, g := range sm.Unmerged(merged) {
		if err := ctx.Err(); err != nil {
			return err
		}
		v.sum.WALGenerations++
		var rows, bytes int64
		for _, df := range g.Files {
			if gen, epoch, ok := wal.ParseGenerationKey(table, id, df.Key); !ok || gen != g.Generation || epoch != g.Epoch || !strings.HasPrefix(df.Key, g.Dir+"/") {
				v.rep.fault(table, 0, df.Key, fmt.Sprintf("data file of WAL shard %s generation %d (epoch %d) is not under its directory %s", id, g.Generation, g.Epoch, g.Dir), wal.ErrCorrupt)
			}
			rows += df.Rows
			bytes += df.Size
			if m != nil {
				v.readDataFile(ctx, m, df)
			}
		}
		if rows != g.Rows || bytes != g.Bytes {
			v.rep.fault(table, 0, sm.Key, fmt.Sprintf("WAL shard %s generation %d says %d rows and %d bytes, its files hold %d rows and %d bytes", id, g.Generation, g.Rows, g.Bytes, rows, bytes), wal.ErrCorrupt)
		}
	}
	return nil
}

// checkEntries decodes every entry above the newest shard manifest's replay position.
func (v *verifier) checkEntries(ctx context.Context, table, id string, sm *wal.ShardManifest) error {
	ps, err := wal.ListEntries(ctx, v.s, table, id, sm.Replay)
	if err != nil {
		return fmt.Errorf("verify: table %q: %w", table, err)
	}
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := wal.ReadEntry(ctx, v.s, table, id, p, v.mem)
		if errors.Is(err, store.ErrNotFound) {
			continue // collected after a flush moved the replay position past it
		}
		if err != nil {
			v.objectFault(table, 0, wal.EntryKey(table, id, p), "WAL entry", err)
			continue
		}
		v.sum.WALEntries++
		v.sum.WALEntryRows += e.Rows
		e.Release()
	}
	return nil
}
