// Package wal is a table's write-ahead log: shards, each written by one writer epoch at a
// time, whose appends are acknowledged once an entry holding them is durable in the store,
// buffered in a memtable, flushed as sealed generations and later merged into the base
// table (by engine.Table.MergeWAL) exactly once. It follows Lance's MemWAL
// (shared/reference/lance-format.md §7; DESIGN §9, invariants 7–9) for an append-only
// table without a primary key, with the departures listed at the end.
//
// Where to start: Open claims a shard and returns a *Writer (Append, Flush, Close); LoadShard
// and ReadShard read a shard from any process; Fenced, ErrFenced and the other errors say
// what went wrong.
//
// # Layout
//
// Under <table>/_wal/<shard>/ (shard ids are "0" … "N-1"):
//
//	manifest/<inv>                 shard manifests, version v at <inv> = MaxUint64-v as 20
//	                               digits (the first LIST entry is the latest), put-if-absent
//	entries/<epoch>/<pos>.arrows   WAL entries of one writer epoch, positions 1, 2, 3, …
//	                               (both 20 digits), put-if-absent; the last entry of an epoch
//	                               a later writer fenced is its fence entry
//	gen-<G>-<epoch>-<rand>/        the data files of generation G, flushed by that epoch
//
// # Claim and fencing
//
// A writer claims a shard by putting the next shard manifest version with writer epoch =
// the latest's + 1 (a lost race reloads and claims again, so the newest claimant wins). It
// then puts a fence entry at the tail of every earlier epoch's entries that might still
// have a live writer (the epochs above the manifest's FencedThrough), and replays every entry
// above the replay position, in (epoch, position) order, into its memtable.
//
// A writer of epoch e writes entries only under entries/<e>/, one put at a time, at
// positions 1, 2, 3, … with no holes (a put whose outcome is unknown is retried at the same
// position with the same bytes). So when a claimant has put a fence at position f of epoch
// e, positions 1 … f-1 hold every entry writer e ever stores, and writer e's next put (at
// a position ≤ f) collides: it re-reads the shard manifest, sees a higher epoch, and from
// then on every call returns ErrFenced. An entry that won its position before the fence is
// below the fence, so the claimant replays it: an acknowledged append is never lost.
//
// Flushes are fenced the same way: a flush puts shard manifest version v+1 where v is the
// version the writer itself last wrote, and every claim puts a version too, so a fenced
// writer's flush collides and its generation is never listed (gc collects it).
//
// Fencing survives garbage collection of old entries because positions live under the
// epoch (a durable boundary per epoch, not one shared sequence): gc deletes entries the
// replay position covers but never the last entry of an epoch, which for every fenced
// epoch is its fence. A stale writer of epoch e can only put at positions of entries/<e>/
// at or below its fence, and the fence is never deleted, so it always collides; it can
// never land an entry in a slot that collection reopened. (Lance's spec warns that with
// one shared sequence a stale writer can write into a collected position.) No lease or
// clock is involved.
//
// # Durability and the replay position
//
// Append returns once the entry holding its rows is durable (put-if-absent returned), and
// its rows are in the memtable: group commit gathers the appends that arrive while the
// previous entry is being written into the next entry (bounded by Options.MaxEntryBytes
// and Options.MaxEntryDelay), one put in flight per shard; before writing it the committer
// waits briefly (at most a quarter of the last put, 1 ms) for the appenders the previous
// entry acknowledged, so that concurrent appenders share each entry rather than
// alternating in two half-size cohorts. The wait only shapes batches: nothing is
// acknowledged before its entry is durable. A memtable remembers the
// highest entry position whose rows it holds; a flush writes generation G from a frozen
// memtable and sets the shard manifest's replay position to that memtable's position, so
// the replay position only covers entries whose rows are in a flushed generation (an
// entry durable but not yet in a memtable when the flush froze it stays above it).
//
// # Reads
//
// A reader of the table at base version V reads V's fragments, every generation G above
// V's merged watermark for the shard (manifest.Manifest.WALMerged) that the shard
// manifest lists, and every entry above the shard manifest's replay position; in the
// writing process the memtables stand for those entries (Writer.Snapshot). ReadShard reads
// the shard manifest, then the entries, then checks the shard manifest is still the
// latest, and reads again when a flush moved it meanwhile (so it never returns a row
// twice or misses one that was acknowledged before it began).
//
// # Departures from DESIGN §2 and Lance, and why
//
//   - Entry positions are numbered per epoch (entries/<epoch>/<pos>), not in one shared
//     sequence, so fencing does not depend on keeping every old entry (above).
//   - A generation's data files are Arrow IPC files written like fragment data files, with
//     the base table's field ids and statistics; MergeWAL commits them as the base table's
//     new fragments without rewriting them (zero copy), so the merge costs one commit and
//     the files are then collected like any data file.
//   - No primary key: the WAL is append-only; rows of different shards and generations are
//     never deduplicated (merge-insert is not implemented).
package wal
