package plan

import (
	"math"
	"time"
)

// Score scores table st's work of kind k under policy p (with its defaults applied) at
// now, as a Unit with its class, score, wait and byte estimate. ok is false when st has
// nothing of kind k to do. It looks at nothing but st, p and now: eligibility (pauses,
// assignments, back-off, fairness) is Plan's.
//
// Scores (shared/reference/lance-context.md §5.2 with Shale's kinds):
//
//   - merge_wal: PendingGenerations/MinGenerations × (1 + wait/MaxAge), where wait is
//     measured only from an exact age (AgeKnown and AgeExact): an upper bound or an
//     unknown age gives no boost and never promotes. Class Critical when pending >=
//     CriticalGenerations (ReasonCritical), or when the exact wait exceeds MaxTurnWait
//     (ReasonPromoted); else Normal when the score is >= 1, else Tail.
//   - compact: max(SmallFragments, DeletedRatioHigh)/MinSmallFragments, halved when the
//     merge score is >= 1 (do not compact under a hot WAL). A lone small fragment is not
//     work (compaction cannot combine one fragment; it rewrites a fragment alone only
//     for its deleted rows), so SmallFragments counts from 2. Maintenance when >= 1,
//     else Tail.
//   - index: UncoveredByIndex/MinUncovered; Maintenance when >= 1, else Tail.
//   - recover: +Inf when PendingSidecars > 0, class Recovery.
//   - publish: Drift (versions to roll forward) when Drift > 0, class CommitReady.
//
// Only merges have an age, so only merges are promoted. The byte estimate is
// Unit.Bytes; see Reservation.
func Score(st TableState, p Policy, k Kind, now time.Time) (u Unit, ok bool) {
	p = p.WithDefaults()
	u = Unit{Table: st.Table, Kind: k, Slots: 1}
	switch k {
	case KindRecover:
		if st.PendingSidecars <= 0 {
			return u, false
		}
		u.Class, u.Score, u.Reason, u.Bytes = ClassRecovery, math.Inf(1), ReasonPendingSidecars, MetadataBytes
	case KindPublish:
		if st.Drift <= 0 {
			return u, false
		}
		u.Class, u.Score, u.Reason, u.Bytes = ClassCommitReady, float64(st.Drift), ReasonDrift, MetadataBytes
	case KindMergeWAL:
		if st.PendingGenerations == 0 {
			return u, false
		}
		u.Waited, u.WaitKnown = wait(st, now)
		u.Score = mergeScore(st, p, now)
		u.Promote = u.WaitKnown && u.Waited > p.MaxTurnWait
		u.Bytes = mergeBytes(st)
		switch {
		case st.PendingGenerations >= p.CriticalGenerations:
			u.Class, u.Reason = ClassCritical, ReasonCritical
		case u.Promote:
			u.Class, u.Reason = ClassCritical, ReasonPromoted
		default:
			u.Class, u.Reason = threshold(u.Score, ClassNormal)
		}
	case KindCompact:
		n := st.DeletedRatioHigh
		if st.SmallFragments >= 2 {
			n = max(n, st.SmallFragments)
		}
		if n <= 0 {
			return u, false
		}
		u.Score = float64(n) / float64(p.MinSmallFragments)
		if mergeScore(st, p, now) >= 1 {
			u.Score *= 0.5
		}
		u.Class, u.Reason = threshold(u.Score, ClassMaintenance)
		u.Bytes = double(st.CompactBytes)
	case KindIndex:
		if st.UncoveredByIndex <= 0 {
			return u, false
		}
		u.Score = float64(st.UncoveredByIndex) / float64(p.MinUncovered)
		u.Class, u.Reason = threshold(u.Score, ClassMaintenance)
		u.Bytes = double(st.IndexBytes)
	default:
		return u, false
	}
	return u, true
}

// mergeScore is the merge score of st (0 with nothing pending); p has its defaults.
func mergeScore(st TableState, p Policy, now time.Time) float64 {
	s := float64(st.PendingGenerations) / float64(p.MinGenerations)
	if w, ok := wait(st, now); ok {
		s *= 1 + float64(w)/float64(p.MaxAge)
	}
	return s
}

// threshold is the class of a score: at or above 1 the given class, else Tail.
func threshold(score float64, atOrAbove1 Class) (Class, string) {
	if score >= 1 {
		return atOrAbove1, ReasonScore
	}
	return ClassTail, ReasonTail
}

// mergeBytes is a merge's estimate: twice the larger of the largest unmerged generation
// and the mean one (0 when neither is known).
func mergeBytes(st TableState) int64 {
	b := max(st.LargestGeneration, 0)
	if st.PendingGenerations > 0 {
		b = max(b, int64(min(st.PendingBytes/st.PendingGenerations, math.MaxInt64)))
	}
	return double(b)
}

// double is 2b, saturating; 0 (unknown) for b <= 0.
func double(b int64) int64 {
	if b <= 0 {
		return 0
	}
	if b > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return 2 * b
}

// Reservation is the bytes a unit reserves on executor e: its estimate, or e's whole
// budget (Executor.Bytes) when the estimate is unknown (Unit.Bytes 0) or larger than the
// budget; the executor still enforces its own memory limit while the work runs.
//
// Estimates: merge_wal 2 × max(LargestGeneration, PendingBytes/PendingGenerations);
// compact 2 × CompactBytes (a rewrite holds at most Parallelism (2) output files in
// memory, each no larger than the bytes it rewrites); index 2 × IndexBytes (the values
// and row addresses of the uncovered fragments, sorted); recover and publish
// MetadataBytes.
func Reservation(u Unit, e Executor) int64 {
	if u.Bytes <= 0 || u.Bytes > e.Bytes {
		return max(e.Bytes, 0)
	}
	return u.Bytes
}
