// Package demand is the WAL merge backlog of each table, kept in etcd per (table, shard)
// and folded by a join (DESIGN §10, invariant 9). Its semantics are lance-context's final
// ("V3") demand model, /work/shared/reference/lance-context.md §3.2–§3.6, with its test
// vectors (§3.5, §7 items 1–16) as this package's tests.
//
// # Who publishes what
//
//   - A WAL writer, after each flush: its shard, writer epoch, the generation it sealed, the
//     shard's sealed bytes and the flush time (Source writer).
//   - A WAL merge, after it commits: the shard's new merged watermark (PublishMerged: a
//     synthetic executor event, sealed = merged, epoch 0, no flush time).
//   - A scan (`shale wal scan`), re-reading storage: a shard's sealed generation from its
//     shard manifest and its merged watermark from the base table, both in one event
//     (Source scan). A scan corrects whatever a lost or dropped event left behind.
//
// Every value is absolute (a generation number, a byte total, a time), never a delta, so
// events may be lost, late, duplicated or reordered.
//
// # The join
//
// A shard's state is the join of every event ever published for it, one dimension at a
// time; nothing in one dimension lowers or replaces another:
//
//   - sealed: the maximum Mark{generation, epoch} over all events, ordered by generation
//     first and epoch second. An epoch is a writer fence and a tiebreak, never a numbering
//     restart: generation numbers continue across writer claims, so a shard merged to 40
//     whose new writer (epoch 2) flushes generation 60 has 20 pending, not 60.
//   - merged: the maximum Mark{merged generation, merged epoch} over events that carry one.
//     An event without a merged watermark leaves it alone, so a writer never forgets a
//     merge it did not see.
//   - bytes: the maximum.
//   - flush times: per generation the minimum time reported, seeded by writer and scan
//     events (never by executor events, whose time is an observation, not a flush), kept
//     to the 63 lowest generations plus the newest (SealedTimesCap). The map is never
//     pruned by merged, which would make what is kept depend on arrival order; entries at
//     or below merged are ignored when read.
//   - source and flush time of the sealed mark (provenance): those of the event that owns
//     the maximum, ties between events with equal marks broken by source (writer over
//     scan over executor) and then by the earlier time, so the whole record is a join.
//   - incarnation: a table dropped and created again under its name starts a new
//     incarnation, whose shards begin again at generation 1. Events carry the
//     incarnation's first version (manifest IncarnationSince); an event of an older
//     incarnation changes nothing, one of a newer incarnation starts the shard afresh.
//     (This is Shale's addition to the lance-context model.)
//
// The source of an event plays no part in ordering: a lower value from any source loses
// the maximum, so a stale scan lowers nothing. The join is a join-semilattice: every order,
// duplication or subset replay of the same events gives the same state (invariant 9), and
// the record stored in etcd is that state, so rebuilding from etcd equals the in-memory
// fold. Join is the storage form (stored record + event → record), TableDemand.Fold the
// in-memory form; both use the same function.
//
// Derived per shard: pending generations = sealed − merged (saturating; merged 0 when
// absent); pending bytes = the shard's sealed bytes when anything is pending (an upper
// bound: there is no per-generation size table); the oldest pending age = the flush time
// of generation merged+1 when the map has it (AgeExact), else that of the lowest kept
// generation above it (AgeUpperBound: the true flush time is at or before it, so now − t
// is a floor on the wait). A table sums its shards.
//
// # Schema versions
//
// A record or event carries v (CurrentVersion, 1). v 0 is the pre-versioning form and
// reads as 1; any other value is refused (ErrUnknownVersion): the fold ignores such an
// event, a publish returns the error before touching etcd, and a stored record with an
// unknown version is never overwritten. A stored record that does not decode at all is
// replaced by the next publish (demand is rebuildable; the scan republishes) and reported
// by reads as ErrCorrupt.
//
// # etcd
//
// Key layout, under the same prefix the catalog uses (its pointers are at
// <prefix>/tables/<table>):
//
//	<prefix>/demand/<table>/<shard>   one record per shard: an Event in JSON (docs/format.md §9)
//
// Publish is read, join, compare-and-put on the key's mod revision, at most
// PublishAttempts times with jittered backoff; it writes only when the join changes the
// record. Records are only put (and removed by DeleteTable); a write never depends on any
// other key, so one shard's publish never fails another's. A Publisher runs publishes
// detached from the write path: bounded concurrency, a hard timeout per publish, events
// that wait for a slot joined per shard (lossless, by the join), and drop-and-count past a
// bound, so it never blocks or fails its caller. ReadTable and ReadAll read records at
// one etcd revision, paged by bytes (start at 512 keys, halve when a response is large or
// refused as too big, grow back), and fold them into TableDemands.
//
// # Where to start
//
// The WAL writer builds an Event{Source: SourceWriter, ...} after each flush and hands it to
// Publisher.Publish; the merge calls Publisher.PublishMerged per shard; a scan publishes
// Event{Source: SourceScan, ...} with MergedThrough set. The planner calls Records.ReadAll
// and reads each TableDemand's PendingGenerations, PendingBytes and OldestPending.
package demand
