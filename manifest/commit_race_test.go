package manifest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/shale-db/shale/store"
)

// TestCheckHeadBuildsOnNewerVersionsBeforeWriting: with CheckHead, a commit planned on a
// version others have since built on reads forward first and makes one put-if-absent
// attempt, on top of theirs; without it, its first attempt is written in vain and loses.
func TestCheckHeadBuildsOnNewerVersionsBeforeWriting(t *testing.T) {
	ctx := context.Background()
	for _, check := range []bool{true, false} {
		s := memStore(t)
		base := create(t, s, "t")
		head := mustCommit(t, s, base, appendTxn(base, 1))
		head = mustCommit(t, s, head, appendTxn(head, 1))
		before := s.Counters().Snapshot()
		m, st, err := Commit(ctx, s, "t", base, appendTxn(base, 5), CommitOptions{CheckHead: check})
		if err != nil {
			t.Fatalf("CheckHead %v: %v", check, err)
		}
		d := s.Counters().Snapshot().Sub(before)
		wantAttempts := 1
		if !check {
			wantAttempts = 2
		}
		if m.Version != head.Version+1 || st.Attempts != wantAttempts || !slices.Equal(st.Rebased, []uint64{2, 3}) {
			t.Fatalf("CheckHead %v: committed v%d after %d attempts, rebased %v; want v%d, %d attempts, rebased [2 3]",
				check, m.Version, st.Attempts, st.Rebased, head.Version+1, wantAttempts)
		}
		if d.ByOp[store.OpPutIfAbsent] != int64(wantAttempts) || d.ByOp[store.OpPut] != int64(wantAttempts) {
			t.Fatalf("CheckHead %v: %s; want %d records and %d put-if-absent", check, d, wantAttempts, wantAttempts)
		}
		if got := m.LiveRows(); got != head.LiveRows()+5 {
			t.Fatalf("CheckHead %v: %d rows, want %d", check, got, head.LiveRows()+5)
		}
	}
}

// TestFirstLostRaceRetriesAtOnce: the loser of one race has read forward to HEAD and
// retries without backing off (a backoff of an hour would outlast the deadline).
func TestFirstLostRaceRetriesAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := memStore(t)
	base := create(t, s, "t")
	theirs := mustCommit(t, s, base, appendTxn(base, 1))
	m, st, err := Commit(ctx, s, "t", base, appendTxn(base, 2), CommitOptions{BaseBackoff: time.Hour, MaxBackoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if st.Attempts != 2 || m.Version != theirs.Version+1 {
		t.Fatalf("committed v%d after %d attempts; want v%d after 2 (one lost race)", m.Version, st.Attempts, theirs.Version+1)
	}
}

// TestBackoffBounds: the n-th backoff is at most BaseBackoff << (n-1), capped at
// MaxBackoff.
func TestBackoffBounds(t *testing.T) {
	opts := CommitOptions{BaseBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}
	for n, max := range map[int]time.Duration{1: time.Millisecond, 2: 2 * time.Millisecond, 3: 4 * time.Millisecond, 40: 4 * time.Millisecond} {
		for range 20 {
			if d := backoffDuration(opts, n); d < 0 || d > max {
				t.Fatalf("backoff %d: %v, want within [0, %v]", n, d, max)
			}
		}
	}
}
