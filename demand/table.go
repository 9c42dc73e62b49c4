package demand

import "fmt"

// TableDemand is one table's demand: the join of its shards' events, folded in memory (a
// planner's view, rebuildable at any time from the stored records). Not safe for
// concurrent mutation; a TableDemand read from etcd is the caller's to keep.
type TableDemand struct {
	// V is the schema version of this view (CurrentVersion).
	V int `json:"v"`
	// Table is the table's name.
	Table string `json:"table"`
	// Shards is each shard's joined state, by shard.
	Shards map[string]ShardDemand `json:"shards"`
	// ObservedRevision is the highest etcd revision among the events folded in that
	// changed something: bookkeeping only, never an ordering input.
	ObservedRevision int64 `json:"observed_revision"`
	// UpdatedMs is the nowMs of the last fold that changed something (Unix ms).
	UpdatedMs int64 `json:"updated_ms"`
}

// NewTableDemand returns the empty demand of table.
func NewTableDemand(table string) *TableDemand {
	return &TableDemand{V: CurrentVersion, Table: table, Shards: map[string]ShardDemand{}}
}

// Fold joins e into its shard (the same join as Join) and reports whether anything
// changed. When it did, ObservedRevision becomes max(ObservedRevision, revision) and
// UpdatedMs nowMs; an event that changes nothing (already contained, or from an older
// incarnation) leaves both alone. Errors: ErrUnknownVersion and ErrInvalid
// (Event.Validate), with nothing folded.
func (t *TableDemand) Fold(e Event, revision, nowMs int64) (bool, error) {
	if err := e.Validate(); err != nil {
		return false, fmt.Errorf("table %q: %w", t.Table, err)
	}
	if t.Shards == nil {
		t.Shards = map[string]ShardDemand{}
	}
	if t.V == 0 {
		t.V = CurrentVersion
	}
	old, had := t.Shards[e.Shard]
	n, changed := old.join(e)
	if !changed && had {
		return false, nil
	}
	t.Shards[e.Shard] = n
	t.ObservedRevision = max(t.ObservedRevision, revision)
	t.UpdatedMs = nowMs
	return true, nil
}

// IncarnationSince returns the newest table incarnation any shard reports. The table's
// aggregates count only shards of that incarnation: a shard whose last report is from an
// older incarnation belongs to a table that no longer exists.
func (t *TableDemand) IncarnationSince() uint64 {
	var inc uint64
	for _, s := range t.Shards {
		inc = max(inc, s.IncarnationSince)
	}
	return inc
}

// current calls f for each shard of the newest incarnation.
func (t *TableDemand) current(f func(ShardDemand)) {
	inc := t.IncarnationSince()
	for _, s := range t.Shards {
		if s.IncarnationSince == inc {
			f(s)
		}
	}
}

// PendingGenerations returns the table's pending generations: the sum over its shards
// (of the newest incarnation) of sealed − merged.
func (t *TableDemand) PendingGenerations() uint64 {
	var n uint64
	t.current(func(s ShardDemand) { n += s.Pending() })
	return n
}

// PendingBytes returns the sum of ShardDemand.PendingBytes over the table's shards (of
// the newest incarnation): an upper bound on the unmerged bytes.
func (t *TableDemand) PendingBytes() uint64 {
	var n uint64
	t.current(func(s ShardDemand) { n += s.PendingBytes() })
	return n
}

// OldestPending returns the earliest ShardDemand.OldestPending time over the table's
// shards with pending work (of the newest incarnation). It is AgeExact only when every
// such shard's age is exact; when some shard's is a bound or unknown, the true oldest
// flush is at or before AtMs (AgeUpperBound); AgeUnknown when no pending shard has a time;
// AgeNone when nothing is pending.
func (t *TableDemand) OldestPending() Age {
	out := Age{Kind: AgeNone}
	exact := true
	t.current(func(s ShardDemand) {
		a := s.OldestPending()
		switch a.Kind {
		case AgeNone:
			return
		case AgeUnknown:
			exact = false
			if out.Kind == AgeNone {
				out.Kind = AgeUnknown
			}
			return
		case AgeUpperBound:
			exact = false
		}
		if out.Kind == AgeNone || out.Kind == AgeUnknown || a.AtMs < out.AtMs {
			out.AtMs = a.AtMs
		}
		out.Kind = AgeExact
	})
	if out.Kind == AgeExact && !exact {
		out.Kind = AgeUpperBound
	}
	return out
}
