package demand

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
)

// Mark is a watermark as reported: a generation and the writer epoch it was reported
// under. Marks order by generation, then epoch (Compare): the higher generation wins and
// the epoch only breaks ties. The epoch is a writer fence and tiebreak, never a numbering
// restart (generation numbers continue when a new writer claims a shard).
type Mark struct {
	Generation uint64 `json:"generation"` // a WAL generation (0: none; the base table)
	Epoch      uint64 `json:"epoch"`      // the writer epoch it was reported under
}

// Compare returns -1, 0 or +1 as m is below, equal to or above o in (generation, epoch)
// order.
func (m Mark) Compare(o Mark) int {
	if c := cmp.Compare(m.Generation, o.Generation); c != 0 {
		return c
	}
	return cmp.Compare(m.Epoch, o.Epoch)
}

// String reads "<generation>@e<epoch>".
func (m Mark) String() string { return fmt.Sprintf("%d@e%d", m.Generation, m.Epoch) }

// SealedTimesCap bounds a shard's flush-time map: the lowest SealedTimesCap-1 generations
// plus the newest one are kept. Counts and bytes are exact whatever the map holds; the age
// is exact up to the cap and a bound beyond it.
const SealedTimesCap = 64

// ShardDemand is one shard's joined state: the in-memory form of its stored record. The
// zero value is the state before any event. Values are immutable once built by the fold
// (the maps are never shared with an event).
type ShardDemand struct {
	// IncarnationSince is the table incarnation the state belongs to (Event.IncarnationSince).
	IncarnationSince uint64 `json:"incarnation_since,omitempty"`
	// Sealed is the maximum sealed mark reported.
	Sealed Mark `json:"sealed"`
	// Merged is the maximum merged mark reported; meaningful only when HasMerged.
	Merged Mark `json:"merged"`
	// HasMerged reports whether any event carried a merged watermark.
	HasMerged bool `json:"has_merged"`
	// SealedBytes is the maximum Event.SealedBytesThrough reported.
	SealedBytes uint64 `json:"sealed_bytes"`
	// SealedTimes is the bounded flush-time map: generation → Unix ms, the minimum reported
	// per generation, at most SealedTimesCap entries.
	SealedTimes map[uint64]int64 `json:"sealed_times,omitempty"`
	// Source is who reported the Sealed mark (provenance; ties between equal marks go to
	// writer over scan over executor).
	Source Source `json:"source"`
	// FlushedAtMs is the Event.FlushedAtMs of the event that owns the Sealed mark
	// (provenance; ties go to the earlier time).
	FlushedAtMs int64 `json:"flushed_at_ms"`
}

// owns reports whether an event reporting (m, src, at) takes the sealed provenance from
// the state's: a total order on (mark, source rank, earlier time), so the provenance is a
// join too.
func (s ShardDemand) owns(m Mark, src Source, at int64) bool {
	if c := m.Compare(s.Sealed); c != 0 {
		return c > 0
	}
	if src.rank() != s.Source.rank() {
		return src.rank() > s.Source.rank()
	}
	return at < s.FlushedAtMs
}

// join returns the state joined with e (assumed valid) and whether anything changed. It
// is the one join: Join (stored records) and TableDemand.Fold (in memory) both use it.
func (s ShardDemand) join(e Event) (ShardDemand, bool) {
	orig := s
	switch {
	case e.IncarnationSince < s.IncarnationSince:
		return s, false // an older incarnation's report says nothing about this one
	case e.IncarnationSince > s.IncarnationSince:
		s = ShardDemand{IncarnationSince: e.IncarnationSince} // a new life of the table: start afresh
	}
	n := s
	if sm := e.Sealed(); n.owns(sm, e.Source, e.FlushedAtMs) {
		n.Sealed, n.Source, n.FlushedAtMs = sm, e.Source, e.FlushedAtMs
	}
	n.SealedBytes = max(n.SealedBytes, e.SealedBytesThrough)
	if mm, ok := e.Merged(); ok && (!n.HasMerged || mm.Compare(n.Merged) > 0) {
		n.Merged, n.HasMerged = mm, true
	}
	n.SealedTimes = joinTimes(s.SealedTimes, e)
	return n, !n.Equal(orig)
}

// joinTimes returns the union of times and the event's times (its map, and its own
// (SealedThrough, FlushedAtMs) unless it is an executor event, generation 0 or time 0),
// minimum per generation, pruned to SealedTimesCap. times is not modified.
func joinTimes(times map[uint64]int64, e Event) map[uint64]int64 {
	seed := e.Source != SourceExecutor && e.SealedThrough > 0 && e.FlushedAtMs != 0
	if len(e.SealedTimes) == 0 && !seed {
		return times
	}
	out := maps.Clone(times)
	if out == nil {
		out = make(map[uint64]int64, len(e.SealedTimes)+1)
	}
	add := func(g uint64, t int64) {
		if old, ok := out[g]; !ok || t < old {
			out[g] = t
		}
	}
	for g, t := range e.SealedTimes {
		if g > 0 {
			add(g, t)
		}
	}
	if seed {
		add(e.SealedThrough, e.FlushedAtMs)
	}
	pruneTimes(out)
	return out
}

// pruneTimes keeps the lowest SealedTimesCap-1 generations and the highest one. Bounded
// by the cap only, never by merged: which generations survive is then a function of the
// set of generations ever reported, whatever order they came in.
func pruneTimes(times map[uint64]int64) {
	if len(times) <= SealedTimesCap {
		return
	}
	gens := slices.Sorted(maps.Keys(times))
	for _, g := range gens[SealedTimesCap-1 : len(gens)-1] {
		delete(times, g)
	}
}

// Equal reports whether two states are identical in every field, flush times included.
func (s ShardDemand) Equal(o ShardDemand) bool {
	return s.IncarnationSince == o.IncarnationSince && s.Sealed == o.Sealed && s.HasMerged == o.HasMerged &&
		(!s.HasMerged || s.Merged == o.Merged) && s.SealedBytes == o.SealedBytes &&
		s.Source == o.Source && s.FlushedAtMs == o.FlushedAtMs && maps.Equal(s.SealedTimes, o.SealedTimes)
}

// MergedGeneration returns the merged watermark (0 when none was reported).
func (s ShardDemand) MergedGeneration() uint64 {
	if !s.HasMerged {
		return 0
	}
	return s.Merged.Generation
}

// Pending returns the shard's pending generations: sealed − merged, saturating at 0.
func (s ShardDemand) Pending() uint64 {
	m := s.MergedGeneration()
	if s.Sealed.Generation <= m {
		return 0
	}
	return s.Sealed.Generation - m
}

// PendingBytes returns the shard's sealed bytes when anything is pending, else 0: an upper
// bound on the unmerged bytes (the record keeps a running total, not a size per generation).
func (s ShardDemand) PendingBytes() uint64 {
	if s.Pending() == 0 {
		return 0
	}
	return s.SealedBytes
}

// AgeKind says how much an Age knows.
type AgeKind int

const (
	// AgeNone: nothing is pending.
	AgeNone AgeKind = iota
	// AgeExact: AtMs is the flush time of the oldest pending generation.
	AgeExact
	// AgeUpperBound: the oldest pending generation's flush time is not kept; AtMs is the
	// flush time of a later pending generation, so the true time is at or before AtMs and
	// now − AtMs is a floor on the wait.
	AgeUpperBound
	// AgeUnknown: generations are pending but no flush time of any of them is known (they
	// were reported only by merges, or by publishers that did not know the time).
	AgeUnknown
)

// String returns "none", "exact", "upper bound" or "unknown".
func (k AgeKind) String() string {
	switch k {
	case AgeNone:
		return "none"
	case AgeExact:
		return "exact"
	case AgeUpperBound:
		return "upper bound"
	case AgeUnknown:
		return "unknown"
	}
	return fmt.Sprintf("AgeKind(%d)", int(k))
}

// MarshalText returns String's form ("exact", "upper bound", …), so JSON shows words.
func (k AgeKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads String's form. Errors: ErrInvalid for any other text.
func (k *AgeKind) UnmarshalText(b []byte) error {
	for c := AgeNone; c <= AgeUnknown; c++ {
		if c.String() == string(b) {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("%w: age kind %q", ErrInvalid, b)
}

// Age is when the oldest pending generation was flushed, and how exactly that is known.
type Age struct {
	AtMs int64   `json:"at_ms,omitempty"` // Unix ms; 0 unless Kind is AgeExact or AgeUpperBound
	Kind AgeKind `json:"kind"`            // how exactly AtMs is known
}

// OldestPending returns the flush time of generation merged+1 (AgeExact) when the map
// keeps it, else that of the lowest kept generation above it (AgeUpperBound), AgeUnknown
// when pending generations have no time at all, and AgeNone when nothing is pending.
// Entries at or below merged are ignored. A newer flush never resets it.
func (s ShardDemand) OldestPending() Age {
	if s.Pending() == 0 {
		return Age{}
	}
	oldest := s.MergedGeneration() + 1
	if t, ok := s.SealedTimes[oldest]; ok {
		return Age{AtMs: t, Kind: AgeExact}
	}
	best, found := uint64(0), false
	for g := range s.SealedTimes {
		if g > oldest && (!found || g < best) {
			best, found = g, true
		}
	}
	if !found {
		return Age{Kind: AgeUnknown}
	}
	return Age{AtMs: s.SealedTimes[best], Kind: AgeUpperBound}
}

// Record returns the state as the stored record of shard: v CurrentVersion, the sealed
// mark as (SealedThrough, WriterEpoch), MergedEpoch only when it differs from WriterEpoch,
// the provenance of the sealed mark, and a copy of the times. Folding the record into an
// empty state gives s back.
func (s ShardDemand) Record(shard string) Event {
	e := Event{
		V: CurrentVersion, Shard: shard, IncarnationSince: s.IncarnationSince,
		SealedThrough: s.Sealed.Generation, WriterEpoch: s.Sealed.Epoch, SealedBytesThrough: s.SealedBytes,
		FlushedAtMs: s.FlushedAtMs, Source: s.Source, SealedTimes: maps.Clone(s.SealedTimes),
	}
	if s.HasMerged {
		e.MergedThrough = new(s.Merged.Generation)
		if s.Merged.Epoch != s.Sealed.Epoch {
			e.MergedEpoch = new(s.Merged.Epoch)
		}
	}
	return e
}

// Join is the storage join (lance-context §3.3 join_events): the record to store for a
// shard given its stored record (nil: none) and a new event, and whether it differs from
// the stored one (false: the stored record already contains everything the event says;
// write nothing). The result is the stored record's state joined with the event
// (ShardDemand's rules), in Record form: v is always CurrentVersion, so a v 0 record is
// written back as 1. Errors: ErrUnknownVersion (the event's, or the stored record's,
// which must then not be overwritten), ErrInvalid (the event; see Event.Validate).
func Join(stored *Event, e Event) (Event, bool, error) {
	if err := e.Validate(); err != nil {
		return Event{}, false, err
	}
	var s ShardDemand
	if stored != nil {
		if err := stored.Validate(); err != nil {
			return Event{}, false, fmt.Errorf("stored record: %w", err)
		}
		if stored.Shard != e.Shard {
			return Event{}, false, fmt.Errorf("%w: the stored record is shard %q, the event shard %q", ErrInvalid, stored.Shard, e.Shard)
		}
		s, _ = ShardDemand{}.join(*stored)
	}
	n, changed := s.join(e)
	return n.Record(e.Shard), changed || stored == nil, nil
}
