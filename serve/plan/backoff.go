package plan

import "time"

// Retry is the failure ledger's verdict on one entry: when the work may run again, or
// that it needs an operator.
type Retry struct {
	// NeedsAttention: retrying cannot help; no automatic retry (Plan skips the work with
	// SkipNeedsAttention until the runtime clears the entry).
	NeedsAttention bool
	// Delay is the back-off after Failure.LastFailure (zero when NeedsAttention).
	Delay time.Duration
	// At is LastFailure + Delay: the work is eligible from then on (zero when
	// NeedsAttention).
	At time.Time
}

// Back-off schedule constants (lance-context §5.4 adapted).
const (
	retryShort       = 2 * time.Second  // retryable, attempts < 3
	retryBase        = 30 * time.Second // retryable from attempt 3, ownership from attempt 1
	retryMax         = 15 * time.Minute // retryable ceiling
	retryOwnershipTo = 5 * time.Minute  // ownership ceiling
)

// RetryAfter is the back-off of failure f under maxAttempts (Policy.MaxAttemptsBeforeHold;
// zero or negative takes the default). Decided by f.Class and f.Attempts alone, never
// by f.LastError's text:
//
//   - FailureData (data or configuration): needs attention at once.
//   - FailureOwnership (lost the turn, fenced): min(30 s × 2^(n-1), 5 min); never needs
//     attention, whatever the count (another owner's work is not the table's fault).
//   - FailureRetryable, and any class this version does not know (never hardened):
//     needs attention from maxAttempts attempts on; else 2 s for n < 3, then
//     min(30 s × 2^(n-3), 15 min).
//
// n is f.Attempts, at least 1.
func RetryAfter(f Failure, maxAttempts int) Retry {
	if maxAttempts <= 0 {
		maxAttempts = DefaultPolicy().MaxAttemptsBeforeHold
	}
	n := max(f.Attempts, 1)
	var d time.Duration
	switch f.Class {
	case FailureData:
		return Retry{NeedsAttention: true}
	case FailureOwnership:
		d = exponential(retryBase, n-1, retryOwnershipTo)
	default:
		if n >= maxAttempts {
			return Retry{NeedsAttention: true}
		}
		d = retryShort
		if n >= 3 {
			d = exponential(retryBase, n-3, retryMax)
		}
	}
	return Retry{Delay: d, At: f.LastFailure.Add(d)}
}

// exponential is min(base × 2^shift, ceiling) without overflow.
func exponential(base time.Duration, shift int, ceiling time.Duration) time.Duration {
	d := base
	for i := 0; i < shift && d < ceiling; i++ {
		d *= 2
	}
	return min(d, ceiling)
}
