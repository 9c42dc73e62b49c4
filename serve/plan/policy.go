package plan

import "time"

// WithDefaults returns p with every zero or negative knob replaced by its DefaultPolicy
// value (a stored policy need name only the knobs it changes). Paused is kept.
func (p Policy) WithDefaults() Policy { return p.Over(DefaultPolicy()) }

// Over returns p with every zero or negative knob replaced by base's (a table's stored
// policy over the configured default policy). Paused is p's.
func (p Policy) Over(base Policy) Policy {
	if p.MinGenerations == 0 {
		p.MinGenerations = base.MinGenerations
	}
	if p.CriticalGenerations == 0 {
		p.CriticalGenerations = base.CriticalGenerations
	}
	if p.MaxAge <= 0 {
		p.MaxAge = base.MaxAge
	}
	if p.MaxTurnWait <= 0 {
		p.MaxTurnWait = base.MaxTurnWait
	}
	if p.MinSmallFragments <= 0 {
		p.MinSmallFragments = base.MinSmallFragments
	}
	if p.MinUncovered <= 0 {
		p.MinUncovered = base.MinUncovered
	}
	if p.MaxConsecutiveTurns <= 0 {
		p.MaxConsecutiveTurns = base.MaxConsecutiveTurns
	}
	if p.MaxAttemptsBeforeHold <= 0 {
		p.MaxAttemptsBeforeHold = base.MaxAttemptsBeforeHold
	}
	return p
}

// policyOf is table's effective policy in in.
func (in *Input) policyOf(table string) Policy {
	if p, ok := in.Policies[table]; ok {
		return p.WithDefaults()
	}
	return DefaultPolicy()
}

// DefaultMaxPlacements is the placements per pass when Input.MaxPlacements is zero or
// negative.
const DefaultMaxPlacements = 8

// MetadataBytes is the reservation estimate of recovery and publish units: they read
// manifests and sidecars and write metadata, never a data file.
const MetadataBytes int64 = 64 << 20

// The Unit.Reason values: why a unit has its class.
const (
	ReasonPendingSidecars = "pending_sidecars"             // Recovery: recovery sidecars to resolve
	ReasonCritical        = "pending_at_or_above_critical" // Critical: PendingGenerations >= CriticalGenerations
	ReasonPromoted        = "promoted_for_age"             // Critical: waited longer than MaxTurnWait (exact age)
	ReasonDrift           = "drift_to_publish"             // CommitReady: committed maintenance to roll forward
	ReasonScore           = "score_at_or_above_1"          // Normal or Maintenance
	ReasonTail            = "score_below_1"                // Tail
)

// wait is how long table st's WAL backlog has waited at now, when its age is exact.
// An unknown age or an upper bound gives (0, false): neither boosts nor promotes.
// A flush time after now (clock skew between processes) counts as no wait.
func wait(st TableState, now time.Time) (time.Duration, bool) {
	if !st.AgeKnown || !st.AgeExact || st.PendingGenerations == 0 {
		return 0, false
	}
	return max(now.Sub(st.OldestPending), 0), true
}
