package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/gc"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
)

// minSafeGrace is the shortest --grace allowed while writers may run: twice the age at
// which a write takes a catalog hold (engine.DefaultWriteHoldAfter).
const minSafeGrace = 2 * engine.DefaultWriteHoldAfter

// gcCommand is `shale gc [TABLE] [--keep-last N] [--keep-newer D] [--grace D] [--dry-run] [--json]`.
func (a *app) gcCommand() *cobra.Command {
	var (
		keepLast  int
		keepNewer time.Duration
		grace     time.Duration
		dryRun    bool
		noWriters bool
	)
	cmd := &cobra.Command{
		Use:   "gc [TABLE] [--keep-last N] [--keep-newer D] [--grace D] [--dry-run]",
		Short: "Expire old versions and delete files no retained version needs",
		Long: `Expire versions by policy, then delete the files no retained version references.
A version is kept if it is among the --keep-last newest, or was written less than
--keep-newer ago, or is the published version or above it, or HEAD, or is needed by a
running operation or a pinned reader (their holds in the catalog, in any process).
Then data files, deletion vectors and transaction records that no retained version
needs (abandoned imports and compaction attempts, losing commit attempts, expired
versions' records) and local temp files are deleted once older than --grace, and
recovery claims whose sidecar is gone once older than ` + recovery.DefaultClaimTTL.String() + `; files a
pending recovery sidecar names are left to recovery, and stale sidecars are resolved
first (as shale recover does). --dry-run prints what would go and deletes nothing.
Before deleting the files of a transaction that has not committed, gc commits an abort
version naming it, so a writer still running it (or paused, however long) fails at its
commit instead of publishing a version whose files are gone. --grace keeps gc from
aborting writes that are simply still running: a write that runs longer than 30 s holds
its files in the catalog, a shorter one is protected by --grace alone, so --grace under
1m needs --no-writers (running writers would fail, nothing would be lost).
In WAL shards, gc deletes the log entries a flush covered (except the last of each
writer epoch, which fences a stale writer), generations no shard manifest will list
(fenced writers', failed flushes') and merged generations no retained version names;
unmerged generations and a flush in flight are kept whatever --grace says, and old
shard manifests become tombstones (the newest 10 of each shard are kept).
Without TABLE every table is collected, and so are the leftovers of dropped tables:
objects under data/, _deletions/, _txn/, _versions/ or _wal/ of a prefix with no manifest
(a drop that died midway, or a write that raced a drop), unless the catalog still has
a pointer or a hold for that name or a recovery sidecar names it. In --json the
recovery step's results are under "outcomes", as in shale recover --json.`,
		Example: `  shale gc --dry-run
  shale gc flights --keep-last 5 --keep-newer 24h --grace 1h --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			table := ""
			if len(args) == 1 {
				table = args[0]
				if err := checkTableName(table); err != nil {
					return err
				}
			}
			switch {
			case keepLast < 1:
				return usagef("--keep-last must be at least 1 (HEAD is always kept)")
			case keepNewer < 0:
				return usagef("--keep-newer must be 0 or more")
			case grace < 0:
				return usagef("--grace must be 0 or more")
			case grace < minSafeGrace && !noWriters:
				// A write shorter than engine.DefaultWriteHoldAfter takes no hold: only the
				// grace period keeps gc from fencing it (it would then fail at its commit).
				return usagef("--grace %s is shorter than %s: a write in flight would be aborted (it fails, nothing is lost); add --no-writers if no process is writing", flagDuration(grace), flagDuration(minSafeGrace))
			}
			p := gc.Policy{KeepLast: keepLast, KeepNewer: keepNewer, GracePeriod: grace, DryRun: dryRun}
			if grace == 0 {
				p.GracePeriod = -1 // the CLI's 0 means no grace; the package's 0 means the default
			}
			db, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			if table != "" {
				if _, err := manifest.Head(cmd.Context(), db.Store(), table); err != nil {
					return err // an unknown table is an error, as for verify and compact
				}
				// A dropped table is one too, saying so (its HEAD is a drop marker); a
				// HEAD that cannot be read is gc's to report.
				if rec, err := manifest.HeadRecord(cmd.Context(), db.Store(), table); err == nil && rec.Manifest != nil && rec.Manifest.Dropped() {
					return fmt.Errorf("%w (shale gc without TABLE deletes what dropped tables left)",
						&manifest.DroppedError{Table: table, Version: rec.Manifest.Version})
				}
			}
			rep, gerr := gc.Run(cmd.Context(), db.Store(), db.Catalog(), table, p)
			if a.jsonOut {
				// gc.Report encodes empty lists as [], never null.
				if err := a.printJSON(rep); err != nil {
					return err
				}
				return gerr
			}
			a.printGC(rep, grace)
			return gerr
		},
	}
	f := cmd.Flags()
	f.IntVar(&keepLast, "keep-last", gc.DefaultKeepLast, "keep this many of the newest versions")
	f.DurationVar(&keepNewer, "keep-newer", 0, "also keep versions written less than this long ago (0: none)")
	f.DurationVar(&grace, "grace", gc.DefaultGracePeriod, "never delete an unreferenced file younger than this (under 1m needs --no-writers)")
	f.BoolVar(&noWriters, "no-writers", false, "allow --grace under 1m: the operator asserts no process is writing")
	f.BoolVar(&dryRun, "dry-run", false, "report what would be expired and deleted without deleting")
	return cmd
}

func (a *app) printGC(rep gc.Report, grace time.Duration) {
	verb, expire, became := "Deleted", "expired", "became"
	if rep.DryRun {
		verb, expire, became = "Would delete", "would expire", "would become"
	}
	for _, o := range rep.Recovered {
		a.printf("recovery: %s operation %s: %s\n", o.Table, o.Operation, o.Action)
	}
	for _, t := range rep.Tables {
		a.printf("%s: published %d, HEAD %d; %s %s%s; keeping %s%s\n",
			t.Table, t.Published, t.Head, expire, plural(len(t.Expired), "version"), versionRange(t.Expired), plural(len(t.Retained), "version"), versionRange(t.Retained))
		if len(t.Holds) > 0 {
			var hs []string
			for _, h := range t.Holds {
				hs = append(hs, h.Kind+" "+h.ID+" at v"+uitoa(h.Version))
			}
			a.printf("  holds: %s (low watermark %d)\n", strings.Join(hs, ", "), t.LowWatermark)
		} else if t.HasLow {
			a.printf("  low watermark %d (%s)\n", t.LowWatermark, plural(t.Sidecars, "pending recovery sidecar"))
		}
		records := 0
		for _, f := range t.Deleted {
			if f.Class == gc.ExpiredVersion {
				records++ // summarised below
				continue
			}
			a.printf("  %s %s (%s, %s)\n", strings.ToLower(verb), f.Key, humanBytes(f.Bytes), f.Class)
		}
		a.printf("  %s %s, %s", verb, plural(len(t.Deleted), "file"), humanBytes(t.BytesDeleted))
		if records > 0 {
			a.printf(" (%s of them expired versions' transaction records; their manifests, %s, %s tombstones)", thousands(int64(records)), humanBytes(t.ExpiredManifestBytes), became)
		}
		a.printf("; kept %s", humanBytes(t.BytesKept))
		if n := t.Kept[gc.Young]; n > 0 {
			a.printf(" (%s younger than --grace %s)", plural(n, "unreferenced file"), flagDuration(grace))
		}
		if n := t.Kept[gc.Protected]; n > 0 {
			a.printf(" (%s of pending recovery sidecars)", plural(n, "file"))
		}
		a.printf("\n")
		if t.Fence > 0 {
			pub := "published"
			if !t.FencePublished {
				pub = "not yet published: versions below it were unpublished; the next write publishes it"
			}
			a.printf("  fenced %s with abort version %d before deleting their files (%s); a writer still running them fails at its commit\n",
				plural(t.FencedTxns, "uncommitted transaction"), t.Fence, pub)
		}
		if len(t.Restored) > 0 {
			a.printf("  put back expired %s %v: a reader pinned them while this run expired them\n", pluralWord(len(t.Restored), "version"), t.Restored)
		}
		if t.HeldExpired > 0 {
			a.printf("  kept every data file: a live hold needs version %d, which is already expired (run gc again once it is released)\n", t.HeldExpired)
		}
		a.printGCWAL(t, expire)
		if len(t.Unknown) > 0 {
			a.printf("  kept %s, e.g. %s\n", plural(len(t.Unknown), "unrecognised object"), t.Unknown[0])
		}
	}
	if len(rep.DroppedLeftovers) > 0 || rep.DroppedKept > 0 {
		var n int64
		for _, f := range rep.DroppedLeftovers {
			a.printf("%s %s (%s, left by a dropped table)\n", strings.ToLower(verb), f.Key, humanBytes(f.Bytes))
			n += f.Bytes
		}
		a.printf("dropped tables' leftovers: %s %s (%s), kept %s\n", strings.ToLower(verb), thousands(int64(len(rep.DroppedLeftovers))), humanBytes(n), thousands(int64(rep.DroppedKept)))
		for _, sk := range rep.DroppedSkipped {
			a.printf("  kept the leftovers of %s: %s\n", sk.Table, sk.Reason)
		}
	}
	if len(rep.TempFiles) > 0 || rep.TempKept > 0 {
		var n int64
		for _, f := range rep.TempFiles {
			n += f.Bytes
		}
		a.printf("temp files: %s %s (%s), kept %s younger than --grace\n", strings.ToLower(verb), thousands(int64(len(rep.TempFiles))), humanBytes(n), thousands(int64(rep.TempKept)))
	}
	for _, f := range rep.StoreFiles {
		a.printf("%s %s (%s: a probe object left by a process that died opening the store)\n", strings.ToLower(verb), f.Key, humanBytes(f.Bytes))
	}
	for _, f := range rep.OrphanClaims {
		a.printf("%s %s (%s: a recovery claim whose sidecar is gone, left by a recovery that died)\n", strings.ToLower(verb), f.Key, humanBytes(f.Bytes))
	}
	if n := rep.OrphanClaimsKept; n > 0 {
		a.printf("kept %s whose sidecar is gone, younger than %s\n", plural(n, "recovery claim"), recovery.DefaultClaimTTL)
	}
	if len(rep.Tables) == 0 {
		a.printf("No tables\n")
	}
}

func versionRange(vs []uint64) string {
	switch len(vs) {
	case 0:
		return ""
	case 1:
		return " (v" + uitoa(vs[0]) + ")"
	}
	return " (v" + uitoa(vs[0]) + "–v" + uitoa(vs[len(vs)-1]) + ")"
}

func uitoa(v uint64) string { return strconv.FormatUint(v, 10) }

// printGCWAL prints what gc found and kept in a table's WAL shards.
func (a *app) printGCWAL(t gc.TableReport, expire string) {
	for _, w := range t.WAL {
		if w.Skipped != "" {
			a.printf("  WAL shard %s: kept whole: %s\n", w.Shard, w.Skipped)
			continue
		}
		a.printf("  WAL shard %s: shard manifest version %d (epoch %d, replay position %s), merged through generation %d in every retained version",
			w.Shard, w.Version, w.Epoch, w.Replay, w.Merged)
		if n := len(w.ExpiredManifests); n > 0 {
			a.printf("; %s %s (tombstones)", expire, plural(n, "old shard manifest"))
		}
		a.printf("\n")
	}
	var parts []string
	if n := t.Kept[gc.WALLog]; n > 0 {
		parts = append(parts, logEntries(n)+" (above the replay position, or the last of an epoch)")
	}
	if n := t.Kept[gc.WALUnmerged]; n > 0 {
		parts = append(parts, plural(n, "unmerged generation file"))
	}
	if n := t.Kept[gc.WALInFlight]; n > 0 {
		parts = append(parts, plural(n, "in-flight generation file"))
	}
	if n := t.Kept[gc.WALUnread]; n > 0 {
		parts = append(parts, plural(n, "object")+" of shards whose manifest does not read")
	}
	if len(parts) > 0 {
		a.printf("  WAL kept: %s\n", strings.Join(parts, ", "))
	}
}
