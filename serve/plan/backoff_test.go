package plan

import (
	"testing"
	"time"
)

// ms is a Unix time in milliseconds, as lance-context's vectors give them.
func ms(v int64) time.Time { return time.UnixMilli(v) }

// TestRetryTemporaryFailures is lance-context §7 item 38 (and 40, whose stale-preparation
// failures are typed Retryable here): 20 retryable failures recorded at 1000 ms. Attempts
// 1-2 retry at 3000 ms, attempt 3 at 31 000 ms, the delay doubles to 15 min, and from 15
// attempts on the work needs attention.
func TestRetryTemporaryFailures(t *testing.T) {
	want := map[int]int64{1: 3_000, 2: 3_000, 3: 31_000, 4: 61_000, 5: 121_000, 6: 241_000, 7: 481_000,
		8: 901_000, 9: 901_000, 14: 901_000}
	for n := 1; n <= 20; n++ {
		r := RetryAfter(Failure{Attempts: n, Class: FailureRetryable, LastFailure: ms(1000)}, 15)
		if n >= 15 {
			if !r.NeedsAttention || !r.At.IsZero() || r.Delay != 0 {
				t.Errorf("attempt %d: %+v, want needs attention", n, r)
			}
			continue
		}
		if r.NeedsAttention || r.At.After(ms(1000).Add(15*time.Minute)) {
			t.Errorf("attempt %d: %+v", n, r)
		}
		if w, ok := want[n]; ok && r.At.UnixMilli() != w {
			t.Errorf("attempt %d: next retry %d ms, want %d", n, r.At.UnixMilli(), w)
		}
	}
	// The hold count is the policy's.
	if r := RetryAfter(Failure{Attempts: 4, Class: FailureRetryable}, 4); !r.NeedsAttention {
		t.Errorf("MaxAttemptsBeforeHold 4, attempt 4: %+v", r)
	}
	if r := RetryAfter(Failure{Attempts: 14, Class: FailureRetryable}, 0); r.NeedsAttention {
		t.Errorf("default hold count: attempt 14 needs attention")
	}
}

// TestRetryDataNeedsAttentionAtOnce is §7 item 39: a data or configuration failure ("not
// found: /data/1.lance") needs attention on its first attempt, with no automatic retry.
func TestRetryDataNeedsAttentionAtOnce(t *testing.T) {
	r := RetryAfter(Failure{Attempts: 1, Class: FailureData, LastFailure: ms(1000), LastError: "not found: /data/1.lance"}, 15)
	if !r.NeedsAttention || !r.At.IsZero() {
		t.Fatalf("%+v", r)
	}
}

// TestRetryNeverByText is §7 item 41: the verdict is the typed class's alone. The six
// strings lance-context's text classifier had to get right change nothing, in either
// class, and a retryable record that reads like a data error is not hardened.
func TestRetryNeverByText(t *testing.T) {
	texts := []string{
		"schema mismatch; reprepare",
		"corrupt index metadata changed; reprepare",
		"index metadata changed; reprepare: permission denied",
		"index metadata changed; reprepare, crates/lance-context-core/src/store_base.rs:1529:24; HTTP 403",
		"index metadata changed; reprepare, /unrelated/path.rs:1:2",
		"ownership unresolved: index metadata changed; reprepare",
		"not found: /data/1.lance",
	}
	for _, class := range []FailureClass{FailureRetryable, FailureData, FailureOwnership} {
		for n := 1; n <= 16; n++ {
			base := Failure{Attempts: n, Class: class, LastFailure: ms(1000)}
			want := RetryAfter(base, 15)
			for _, text := range texts {
				f := base
				f.LastError = text
				if got := RetryAfter(f, 15); got != want {
					t.Errorf("%s attempt %d with %q: %+v, without text %+v", class, n, text, got, want)
				}
			}
		}
	}
}

// TestRetryOldRecordKeepsItsCount is §7 item 41's corrected-on-read vector with typed
// classes: a retryable record of 4 attempts retries 60 s after its last failure and does
// not need attention; the next failure (5 attempts) waits 120 s.
func TestRetryOldRecordKeepsItsCount(t *testing.T) {
	last := ms(1_000_000)
	if r := RetryAfter(Failure{Attempts: 4, Class: FailureRetryable, LastFailure: last}, 15); r.NeedsAttention || r.At != last.Add(60*time.Second) {
		t.Fatalf("4 attempts: %+v", r)
	}
	if r := RetryAfter(Failure{Attempts: 5, Class: FailureRetryable, LastFailure: last}, 15); r.NeedsAttention || r.Delay != 120*time.Second {
		t.Fatalf("5 attempts: %+v", r)
	}
}

// TestRetryOwnership: min(30 s × 2^(n-1), 5 min), never needs attention whatever the count.
func TestRetryOwnership(t *testing.T) {
	want := map[int]time.Duration{0: 30 * time.Second, 1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute,
		4: 4 * time.Minute, 5: 5 * time.Minute, 15: 5 * time.Minute, 1000: 5 * time.Minute}
	for n, d := range want {
		r := RetryAfter(Failure{Attempts: n, Class: FailureOwnership, LastFailure: t0}, 15)
		if r.NeedsAttention || r.Delay != d || r.At != t0.Add(d) {
			t.Errorf("ownership attempt %d: %+v, want %v", n, r, d)
		}
	}
}

// TestRetryUnknownClassIsRetryable: a class this version does not know (a newer
// binary's) gets the retryable schedule: never hardened to needs-attention early.
func TestRetryUnknownClassIsRetryable(t *testing.T) {
	for _, n := range []int{1, 3, 15} {
		got := RetryAfter(Failure{Attempts: n, Class: "deadline", LastFailure: t0}, 15)
		if want := RetryAfter(Failure{Attempts: n, Class: FailureRetryable, LastFailure: t0}, 15); got != want {
			t.Errorf("attempt %d: %+v, want %+v", n, got, want)
		}
	}
}
