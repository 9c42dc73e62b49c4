package gc

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shale-db/shale/manifest"
)

// Defaults for Policy.
const (
	// DefaultKeepLast is how many of the newest versions are kept when Policy.KeepLast is 0.
	DefaultKeepLast = 10
	// DefaultGracePeriod is the grace period when Policy.GracePeriod is 0: an unreferenced
	// file modified less than this long ago may belong to a write in flight and is kept.
	DefaultGracePeriod = time.Hour
	// HoldSkew is subtracted from a live hold's start time before it protects files
	// (clock skew between the holder's host and the store).
	HoldSkew = time.Minute
)

// Policy says which versions and files garbage collection keeps.
type Policy struct {
	// KeepLast keeps the KeepLast newest versions (0: DefaultKeepLast; at least 1: HEAD is
	// always kept).
	KeepLast int
	// KeepNewer keeps every version committed less than KeepNewer ago (Manifest.Committed;
	// for older manifests, when its transaction was planned), and every version above it
	// (0: no time-based retention).
	KeepNewer time.Duration
	// GracePeriod: a file no retained version references is deleted only once its
	// modification time is at least GracePeriod old (0: DefaultGracePeriod; negative: no
	// grace, for tests and for an operator who stopped every writer). A write takes a
	// catalog hold only once it has run engine.DefaultWriteHoldAfter (30 s); below twice
	// that, GC can delete the files of a shorter write before it commits.
	GracePeriod time.Duration
	// DryRun reports what would be expired and deleted without deleting anything (recovery
	// is not run either).
	DryRun bool
	// WALKeepManifests keeps the WALKeepManifests newest manifest versions of each WAL
	// shard whole; older ones are replaced by tombstones, never deleted (0:
	// DefaultWALKeepManifests; at least 1: the newest is the shard's state).
	WALKeepManifests int
	// FenceWait bounds how long the abort version committed before deleting uncommitted
	// transactions' files waits for the versions below it to be published (0:
	// recovery.DefaultFencePublishWait).
	FenceWait time.Duration
}

func (p Policy) withDefaults() Policy {
	if p.KeepLast == 0 {
		p.KeepLast = DefaultKeepLast
	}
	if p.KeepLast < 1 {
		p.KeepLast = 1
	}
	if p.GracePeriod == 0 {
		p.GracePeriod = DefaultGracePeriod
	}
	if p.GracePeriod < 0 {
		p.GracePeriod = 0
	}
	return p
}

// Stamp is what retention needs to know about one version.
type Stamp struct {
	Version   uint64 // the version number
	Timestamp int64  // when it was committed (Manifest.Committed, else Transaction.Timestamp), Unix nanoseconds
}

// Bounds are the versions retention must keep whatever the policy says.
type Bounds struct {
	// Published is the catalog pointer's version; it and everything above are kept.
	// Zero keeps every version (a table with a catalog but no pointer: nothing is known
	// to be superseded).
	Published uint64
	// Head is the highest committed version (always kept).
	Head uint64
	// LowWatermark, when HasLow, is the lowest version a live hold needs; it and
	// everything above are kept.
	LowWatermark uint64
	HasLow       bool // LowWatermark is set (some hold is live)
}

// Floor returns the lowest version to keep: every version >= Floor is retained, every
// version below it expires. So the retained versions are always one unbroken suffix of
// the table's history. versions are the versions present, ascending; now is the clock
// KeepNewer is measured against. Pure.
func Floor(versions []Stamp, b Bounds, p Policy, now time.Time) uint64 {
	p = p.withDefaults()
	floor := b.Head
	if b.Published < floor {
		floor = b.Published
	}
	if b.HasLow && b.LowWatermark < floor {
		floor = b.LowWatermark
	}
	if n := len(versions); n > 0 {
		if i := n - p.KeepLast; i <= 0 {
			floor = min(floor, versions[0].Version)
		} else {
			floor = min(floor, versions[i].Version)
		}
	}
	if p.KeepNewer > 0 {
		cut := now.Add(-p.KeepNewer).UnixNano()
		for _, s := range versions {
			if s.Timestamp > cut {
				floor = min(floor, s.Version)
				break
			}
		}
	}
	return floor
}

// Expired returns the versions below floor, ascending (the order they are deleted in).
// Pure.
func Expired(versions []Stamp, floor uint64) []uint64 {
	var out []uint64
	for _, s := range versions {
		if s.Version < floor {
			out = append(out, s.Version)
		}
	}
	return out
}

// Class is what file classification decided for one object.
type Class string

// Classes.
const (
	Referenced     Class = "referenced"   // named by a retained version (or needed by a live hold)
	Protected      Class = "protected"    // under a pending recovery sidecar's attempt prefix: recovery owns it
	Young          Class = "young"        // unreferenced, but modified within the grace period (or after a live hold started)
	InFlight       Class = "in-flight"    // a transaction record above HEAD within the grace period: a commit in progress
	Unknown        Class = "unknown"      // a shape GC does not recognise: never deleted
	Garbage        Class = "garbage"      // delete
	ExpiredVersion Class = "expired"      // an expired version's transaction record (deleted with its version)
	ManifestObj    Class = "manifest"     // a manifest or an expired version's tombstone of the table's incarnation (never deleted)
	HeldExpired    Class = "held-expired" // unreferenced, kept because a live hold needs an expired version whose references are unknown
)

// Refs is what the retained versions reference, and what else protects files.
type Refs struct {
	// Files are data file, deletion vector and index file keys named by retained versions.
	Files map[string]bool
	// Txns maps each retained version to the key of its transaction record.
	Txns map[uint64]string
	// Head is the highest committed version seen; transaction records above it are in flight.
	Head uint64
	// Prefixes are what pending sidecars' attempts own (recovery.Sidecar.Prefixes: data
	// files, index objects).
	Prefixes []string
	// WAL is the class of each object under <table>/_wal/, decided by ClassifyWAL (a key
	// it lacks is Unknown).
	WAL map[string]Class
	// Cutoff: unreferenced files modified after it are Young (now minus the grace period,
	// or earlier when a live operation started before that).
	Cutoff time.Time
	// Since is the first version of HEAD's incarnation (0: none known). Manifests and
	// tombstones below it belong to incarnations a drop ended: garbage once old (no
	// writer can publish a version there: the catalog pointer names a later
	// incarnation, and a drop marker or the pointer fences them).
	Since uint64
}

// Classify decides what to do with one object under a table's prefix (table/...). Pure.
func Classify(table string, key string, mod time.Time, r *Refs) Class {
	rest, ok := strings.CutPrefix(key, table+"/")
	if !ok {
		return Unknown
	}
	young := mod.After(r.Cutoff)
	switch {
	case strings.HasPrefix(rest, "_versions/"):
		v, err := manifest.ParseManifestKey(table, key)
		switch {
		case err != nil:
			return Unknown
		case v >= r.Since:
			return ManifestObj
		case young:
			return Young
		}
		return Garbage // a version of an incarnation a drop ended
	case strings.HasPrefix(rest, "_txn/"):
		v, _, ok := parseTxnKey(table, key)
		switch {
		case !ok:
			return Unknown
		case r.Txns[v] == key:
			return Referenced
		case v > r.Head && young:
			return InFlight
		case young:
			return Young
		}
		// A losing attempt, the record of an expired version, or one above HEAD older
		// than the grace period (a commit rewrites its record on every attempt, so an
		// old one above HEAD belongs to a writer that died before its manifest put).
		return Garbage
	case strings.HasPrefix(rest, "data/"), strings.HasPrefix(rest, "_deletions/"), strings.HasPrefix(rest, "_indices/"):
		switch {
		case r.Files[key]:
			return Referenced
		case slices.ContainsFunc(r.Prefixes, func(p string) bool { return strings.HasPrefix(key, p) }):
			return Protected
		case young:
			return Young
		}
		return Garbage
	}
	if strings.HasPrefix(rest, "_wal/") {
		if c, ok := r.WAL[key]; ok {
			return c
		}
		return Unknown
	}
	if r.Files[key] {
		return Referenced
	}
	return Unknown
}

// parseTxnKey parses <table>/_txn/<N>-<id>.txn.
func parseTxnKey(table, key string) (uint64, string, bool) {
	name, ok := strings.CutPrefix(key, manifest.TxnDir(table))
	if !ok {
		return 0, "", false
	}
	name, ok = strings.CutSuffix(name, ".txn")
	if !ok {
		return 0, "", false
	}
	n, id, ok := strings.Cut(name, "-")
	if !ok || id == "" {
		return 0, "", false
	}
	v, err := strconv.ParseUint(n, 10, 64)
	if err != nil {
		return 0, "", false
	}
	return v, id, true
}

// references adds every object key m names to files.
func references(m *manifest.Manifest, files map[string]bool) {
	for _, f := range m.Fragments {
		for _, df := range f.Files {
			files[df.Key] = true
		}
		if f.Deletion != nil && f.Deletion.Key != "" {
			files[f.Deletion.Key] = true
		}
	}
	for _, ix := range m.Indexes {
		for _, k := range ix.Files {
			files[k] = true
		}
	}
}
