// Package turn orders the commit attempts of writer processes that share a local store:
// an advisory file lock (flock(2)) per table under the store's temp directory, which a
// writer holds from reading HEAD until its manifest put returned, so writers take turns
// instead of building on the same HEAD and losing the race for its successor (every loss
// is a transaction record and a manifest written and fsynced in vain).
//
// A turn is a hint for speed, never a fence: put-if-absent and transaction ids decide
// every commit, with or without it. Waiting is bounded (Locks.Wait); a writer that cannot
// have the turn in time goes ahead without it, so a holder that is paused (or stuck)
// costs the others one bounded wait, and after such a timeout a Locks only tries the lock
// without waiting for a while (Locks.Skip). A holder that dies releases its lock with its
// file descriptors. Nothing is ever decided by whether a lock was held.
package turn

import (
	"context"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Defaults of Locks.Wait and Locks.Skip.
const (
	DefaultWait = 250 * time.Millisecond
	DefaultSkip = time.Second
)

// Locks hands out the turns of the tables of one local store. Safe for concurrent use;
// the zero value is not usable (New).
type Locks struct {
	dir string
	// Wait bounds how long Take waits for a turn (DefaultWait when 0).
	Wait time.Duration
	// Skip is how long Take only tries the lock, without waiting, after a wait timed out
	// (DefaultSkip when 0).
	Skip time.Duration

	mu        sync.Mutex
	skipUntil map[string]time.Time
}

// New returns the turns of tables whose lock files live in dir (created on first use).
func New(dir string) *Locks {
	return &Locks{dir: dir, skipUntil: map[string]time.Time{}}
}

// path is the lock file of table: its name hashed, so any table name makes one file name.
func (l *Locks) path(table string) string {
	h := fnv.New64a()
	h.Write([]byte(table))
	return filepath.Join(l.dir, "turn-"+strconv.FormatUint(h.Sum64(), 16)+".lock")
}

// Take waits (at most Wait, or not at all while skipping after a timeout) for table's
// turn and returns the function that gives it back, and whether it was had. Without the
// turn the release does nothing and the caller goes ahead all the same. Take never fails:
// a lock that cannot be taken (no such directory, no flock, ctx ended) is not had.
func (l *Locks) Take(ctx context.Context, table string) (release func(), had bool) {
	wait := l.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	l.mu.Lock()
	skipping := time.Now().Before(l.skipUntil[table])
	l.mu.Unlock()
	if skipping {
		wait = 0
	}
	release, had, timedOut := take(ctx, l.dir, l.path(table), wait)
	if timedOut {
		skip := l.Skip
		if skip <= 0 {
			skip = DefaultSkip
		}
		l.mu.Lock()
		l.skipUntil[table] = time.Now().Add(skip)
		l.mu.Unlock()
	}
	if !had {
		return func() {}, false
	}
	return release, true
}
