package plan

import (
	"strings"
	"time"
)

// Kind is a kind of maintenance work the sidecar places.
type Kind string

// The kinds. Recover resolves a table's pending recovery sidecars; MergeWAL merges its WAL
// generations (engine.Table.MergeWAL); Compact rewrites small fragments and fragments with
// many deleted rows (package compaction); Index builds indexes over fragments no segment
// covers (engine.Table.UpdateIndex); Publish rolls forward committed maintenance drift
// (maintenance-only versions above the published one that no sidecar explains; never
// logical drift).
const (
	KindRecover  Kind = "recover"
	KindMergeWAL Kind = "merge_wal"
	KindCompact  Kind = "compact"
	KindIndex    Kind = "index"
	KindPublish  Kind = "publish"
)

// Kinds lists every kind in a fixed order (ties in ordering break by it).
var Kinds = []Kind{KindRecover, KindPublish, KindMergeWAL, KindCompact, KindIndex}

// KindList is Kinds as "recover, publish, …" (for usage and error messages).
func KindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// TakesWriteTurn reports whether work of kind k holds the table's write turn while it
// runs (one such unit per table at a time). Compaction and index builds prepare outside
// the turn (DESIGN §7) and only commit briefly; they run beside a turn-holder and each
// other, limited by a per-table preparation slot.
func TakesWriteTurn(k Kind) bool { return k == KindRecover || k == KindMergeWAL || k == KindPublish }

// Class orders work: lower classes are placed first.
type Class int

// The classes (lance-context §5.2, with Shale's kinds).
const (
	ClassRecovery    Class = 0 // pending recovery sidecars
	ClassCritical    Class = 1 // WAL backlog at or above the critical count, or work promoted for waiting too long; oldest first
	ClassCommitReady Class = 2 // drift to publish (committed maintenance waiting for its publish)
	ClassNormal      Class = 3 // merge score >= 1
	ClassMaintenance Class = 4 // compaction or index score >= 1
	ClassTail        Class = 5 // anything else with work (0 < score < 1)
)

// TableState is the planner's picture of one table, folded from demand records, the
// table's published manifest, its pending sidecars and a reconcile scan. Zero values mean
// "nothing of that kind".
type TableState struct {
	Table string // the table's name; unique within an Input
	// WAL demand (demand.TableDemand): unmerged generations and bytes, and the oldest
	// unmerged flush (AgeKnown false: unknown; AgeExact false: an upper bound, which
	// never promotes).
	PendingGenerations uint64
	PendingBytes       uint64    // bytes of the unmerged generations
	OldestPending      time.Time // flush time of the oldest unmerged generation (see AgeKnown, AgeExact)
	AgeKnown, AgeExact bool      // OldestPending is known; and exact (not an upper bound)
	// Base table shape at the published version.
	Fragments         int   // live fragments
	SmallFragments    int   // fragments below the compaction target size
	DeletedRatioHigh  int   // fragments whose deleted-row ratio exceeds the compaction threshold
	UncoveredByIndex  int   // live fragments some index does not cover
	Drift             int   // maintenance-only versions above the published version with no sidecar
	PendingSidecars   int   // recovery sidecars of the table that no live assignment owns (a running unit's own sidecar is not recovery work)
	LargestGeneration int64 // bytes of the largest unmerged generation (for reservations); 0 unknown
	CompactBytes      int64 // bytes of the data files compaction would rewrite (for reservations); 0 unknown
	IndexBytes        int64 // bytes of the data files of the uncovered fragments (for reservations); 0 unknown
	// Dropped, Unreadable: the table cannot be worked on (named skip reasons).
	Dropped    bool
	Unreadable string // why the manifest could not be read ("" = readable)
}

// Policy is the per-table policy (defaults in DefaultPolicy; overridable in etcd per
// table). Every knob is here; the sidecar's process flags add only listen addresses,
// slots and memory.
type Policy struct {
	Paused                bool          // no work is placed (skip reason SkipPaused)
	MinGenerations        uint64        // merge score 1 at this many pending generations (default 8)
	CriticalGenerations   uint64        // pending at or above: class Critical (default 256)
	MaxAge                time.Duration // merge score age boost 1 + wait/MaxAge (default 1 h)
	MaxTurnWait           time.Duration // work that waited longer is promoted to Critical (default 1 h; only exact ages)
	MinSmallFragments     int           // compaction score 1 at this many small fragments (default 16)
	MinUncovered          int           // index score 1 at this many uncovered fragments (default 4)
	MaxConsecutiveTurns   int           // a kind takes at most this many write turns of a table in a row while another kind waits (default 2)
	MaxAttemptsBeforeHold int           // failures classified data/configuration stop retrying at once; retryable ones after this many (default 15)
}

// DefaultPolicy is the policy of a table with none stored.
func DefaultPolicy() Policy {
	return Policy{MinGenerations: 8, CriticalGenerations: 256, MaxAge: time.Hour, MaxTurnWait: time.Hour,
		MinSmallFragments: 16, MinUncovered: 4, MaxConsecutiveTurns: 2, MaxAttemptsBeforeHold: 15}
}

// SkipReason names why a table's work of some kind is not placed now. Every refusal has
// one; an operator reads it through `shale why TABLE`.
type SkipReason string

// The skip reasons.
const (
	SkipNone             SkipReason = ""
	SkipNoWork           SkipReason = "no_work"               // nothing of this kind to do
	SkipPaused           SkipReason = "paused"                // the table's policy pauses it
	SkipDropped          SkipReason = "dropped"               // the table was dropped
	SkipUnreadable       SkipReason = "unreadable"            // its manifest could not be read
	SkipBelowThreshold   SkipReason = "below_threshold"       // score < 1 and not promoted: tail work, placed only when capacity is idle
	SkipTurnHeld         SkipReason = "write_turn_held"       // another unit holds the table's write turn
	SkipAlreadyAssigned  SkipReason = "already_assigned"      // this kind is already assigned or running on the table
	SkipPreparationSlot  SkipReason = "preparation_slot_busy" // the table's preparation slot is taken
	SkipFairnessYield    SkipReason = "fairness_yield"        // this kind took MaxConsecutiveTurns turns in a row while another kind waits
	SkipBackoff          SkipReason = "backoff"               // a recent failure's back-off has not elapsed
	SkipNeedsAttention   SkipReason = "needs_attention"       // failures that retrying cannot fix (data or configuration): an operator must look
	SkipNoCapacity       SkipReason = "no_capacity"           // no live executor has a free slot and the bytes for it
	SkipPlacementsCapped SkipReason = "placements_capped"     // the pass placed its maximum; next pass
)

// Failure is the failure ledger entry of one (table, kind).
type Failure struct {
	Attempts    int          // consecutive failures (the runtime clears the entry on success)
	Class       FailureClass // the class of the last failure
	LastFailure time.Time    // when the last failure was recorded; back-off counts from it
	LastError   string       // capped; for humans, never classified by text
}

// FailureClass is a failure's class, decided from typed errors (errors.Is), never text.
type FailureClass string

// The failure classes.
const (
	FailureRetryable FailureClass = "retryable"             // transient: back off and retry
	FailureData      FailureClass = "data_or_configuration" // corrupt data, bad configuration, permissions: needs attention
	FailureOwnership FailureClass = "ownership"             // lost the write turn or was fenced: retry soon, without counting against the table
)

// Unit is one candidate piece of work: a kind on a table, with its class, score and
// resource estimate.
type Unit struct {
	Table string  // the table
	Kind  Kind    // the kind of work
	Class Class   // its class (Classify)
	Score float64 // its score within the class (Score); +Inf for recovery
	// Waited is how long the work has waited (from its oldest exact evidence); zero
	// unknown. Class Critical orders by it, oldest first.
	Waited    time.Duration
	WaitKnown bool   // Waited is measured from an exact age (an upper bound or no age leaves it false)
	Reason    string // why this class: "pending_at_or_above_critical", "promoted_for_age", …
	Bytes     int64  // estimated bytes to reserve on the executor; 0 unknown (reserves the executor's whole budget)
	Slots     int    // slots of its kind to reserve (1)
	Promote   bool   // promoted for waiting longer than MaxTurnWait
}

// Executor is one live `shale serve` process as its heartbeat advertises it.
type Executor struct {
	ID    string       // the executor's id (unique)
	Slots map[Kind]int // slots per kind
	Bytes int64        // memory budget for reservations
}

// Assignment is work placed on an executor (assigned, bound or running), with what it
// reserved. Capacity is computed from these, never sampled.
type Assignment struct {
	ID       string // the assignment's id
	Table    string // the table worked on
	Kind     Kind   // the kind of work
	Executor string // the executor it is placed on (a dead one's still hold the table's turn and slot)
	Bytes    int64  // bytes reserved on that executor (Placement.Bytes)
	Slots    int    // slots of Kind reserved (0 counts as 1)
}

// History is the recent write turns of one table: the kinds of the last turns, newest
// last (only the last MaxConsecutiveTurns+1 matter).
type History struct {
	Turns []Kind // the kind of each write-turn placement, oldest first
}

// Input is everything one planning pass reads, at one etcd revision.
type Input struct {
	Now           time.Time                   // the pass's clock: ages and back-offs are measured to it
	Tables        []TableState                // one per table (names unique)
	Policies      map[string]Policy           // by table; absent: DefaultPolicy
	Executors     []Executor                  // the live executors (ids unique)
	Assignments   []Assignment                // every assignment in etcd (on live executors or not)
	Histories     map[string]History          // by table
	Failures      map[string]map[Kind]Failure // by table, kind
	MaxPlacements int                         // per pass (default 8)
}

// Placement is a unit placed on an executor.
type Placement struct {
	Unit     Unit   // the unit placed
	Executor string // the executor's id
	Bytes    int64  // bytes to reserve on it (Reservation); the runtime stores it in the Assignment
}

// Skip is a unit, or a table's kind, not placed, and why.
type Skip struct {
	Table   string     // the table
	Kind    Kind       // the kind of work
	Reason  SkipReason // why it is not placed
	Unit    *Unit      // the scored unit, when it got that far
	Detail  string     // for humans: what holds it (an assignment, an executor, the last error)
	RetryAt time.Time  // SkipBackoff: when the back-off ends
}

// Output is a pass's decision: what to place where, and a named reason for everything
// else. Deterministic: the same Input gives the same Output.
type Output struct {
	Placements []Placement // in placement order (classes ascending)
	Skips      []Skip      // by table, then kind (Kinds order)
	Units      []Unit      // every scored unit of the pass, in planning order (Less)
}
