package manifest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/shale-db/shale/store"
)

// fakeTurn is a Turn that counts takes and releases and says whether one is held.
type fakeTurn struct {
	mu             sync.Mutex
	held           bool
	takes, returns int
	have           bool // what Take reports
}

func (f *fakeTurn) Take(ctx context.Context, table string) (func(), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.takes++
	f.held = true
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.returns++
		f.held = false
	}, f.have
}

func (f *fakeTurn) isHeld() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held
}

// turnCheckStore checks, at each manifest put-if-absent, that the turn is held and that
// the staged objects are already stored; and may refuse the record's Put.
type turnCheckStore struct {
	store.Store
	turn     *fakeTurn
	stage    []string
	failTxn  bool
	failures []string
}

func (s *turnCheckStore) Put(ctx context.Context, key string, data []byte) error {
	if s.failTxn && strings.Contains(key, "/_txn/") {
		return &store.Error{Op: store.OpPut, Key: key, Class: store.ErrPermanent, Err: errors.New("refused")}
	}
	return s.Store.Put(ctx, key, data)
}

func (s *turnCheckStore) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if !s.turn.isHeld() {
		s.failures = append(s.failures, "manifest put without the turn")
	}
	for _, k := range s.stage {
		if _, err := s.Store.Get(ctx, k); err != nil {
			s.failures = append(s.failures, "manifest put before staged object "+k+" was stored")
		}
	}
	return s.Store.PutIfAbsent(ctx, key, data)
}

// TestCommitTakesTurnPerAttempt: with a Turn, every attempt holds it through its manifest
// put and gives it back (also when the attempt fails); the staged objects, written off
// the turn, are stored before the manifest; a turn that is not had changes nothing.
func TestCommitTakesTurnPerAttempt(t *testing.T) {
	ctx := context.Background()
	for _, have := range []bool{true, false} {
		mem := memStore(t)
		base := create(t, mem, "t")
		turn := &fakeTurn{have: have}
		stage := []store.Object{{Key: "t/data/x/1.arrow", Data: []byte("one")}, {Key: "t/data/x/2.arrow", Data: []byte("two")}}
		s := &turnCheckStore{Store: mem, turn: turn, stage: []string{stage[0].Key, stage[1].Key}}
		// Another writer commits after our read: our first attempt builds on it.
		other := mustCommit(t, mem, base, appendTxn(base, 3))
		// Without CheckHead, an attempt that had the turn reads forward all the same; one
		// that went ahead without it builds on base and loses its first race.
		m, stats, err := Commit(ctx, s, "t", base, appendTxn(base, 5), CommitOptions{Turn: turn, Stage: stage})
		if err != nil {
			t.Fatal(err)
		}
		attempts := 2
		if have {
			attempts = 1
		}
		if m.Version != other.Version+1 || !stats.Staged || stats.Attempts != attempts {
			t.Fatalf("turn had %v: committed v%d (want %d), staged %v, %d attempts (want %d)", have, m.Version, other.Version+1, stats.Staged, stats.Attempts, attempts)
		}
		if turn.takes != attempts || turn.returns != attempts || turn.isHeld() {
			t.Fatalf("turn taken %d times, given back %d times", turn.takes, turn.returns)
		}
		if len(s.failures) > 0 {
			t.Fatal(s.failures)
		}

		// A failed attempt gives the turn back, and the background Puts are done.
		s.failTxn = true
		_, stats, err = Commit(ctx, s, "t", m, appendTxn(m, 1), CommitOptions{Turn: turn, Stage: []store.Object{{Key: "t/data/y/1.arrow", Data: []byte("y")}}})
		if err == nil || stats.Staged {
			t.Fatalf("commit with a refused record: %v, staged %v", err, stats.Staged)
		}
		if turn.returns != turn.takes || turn.isHeld() {
			t.Fatalf("after a failed attempt: turn taken %d times, given back %d times", turn.takes, turn.returns)
		}
		if _, err := mem.Get(ctx, "t/data/y/1.arrow"); err != nil {
			t.Fatalf("background staging not finished when Commit returned: %v", err)
		}
	}
}
