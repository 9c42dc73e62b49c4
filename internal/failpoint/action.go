package failpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

type kind uint8

const (
	kindCount kind = iota
	kindError
	kindPanic
	kindExit
	kindKill
	kindSleep
	kindBlockFile
	kindBlockChan
	kindCall
)

// Action is what an enabled seam does when it is hit. Build one with Count, Error, Panic,
// Exit, Kill, Sleep, BlockUntilFile, BlockUntilClosed or Call, and limit it with After,
// Times and Once. The zero Action is Count. Actions are values; modifiers return copies.
type Action struct {
	kind  kind
	err   error
	msg   string
	code  int
	d     time.Duration
	path  string
	ch    <-chan struct{}
	fn    func(context.Context) error
	after int64 // hits that pass before the action takes effect
	times int64 // hits (after those) on which it takes effect; 0 = all
}

// Count does nothing but count hits (read them with Hits): it checks that, and how often,
// a code path is reached.
func Count() Action { return Action{kind: kindCount} }

// Error makes the seam return an *InjectedError wrapping err (errors.Is matches err and
// ErrInjected).
// It panics if err is nil.
func Error(err error) Action {
	if err == nil {
		panic("failpoint: Error(nil)")
	}
	return Action{kind: kindError, err: err}
}

// Panic makes the seam panic with an *InjectedError whose cause has the text msg.
func Panic(msg string) Action { return Action{kind: kindPanic, msg: msg} }

// Exit ends the process at once with os.Exit(code): no deferred functions run and buffered
// output is not flushed.
func Exit(code int) Action { return Action{kind: kindExit, code: code} }

// Kill sends SIGKILL to the process itself, the same as `kill -9` from outside: nothing
// runs after the seam, no deferred function, no buffered write, no signal handler. The
// parent sees the child die by signal 9. Only for child processes of a crash test.
func Kill() Action { return Action{kind: kindKill} }

// Sleep makes the seam wait d, then return nil; if ctx ends first it returns an
// *InjectedError wrapping ctx's error.
func Sleep(d time.Duration) Action { return Action{kind: kindSleep, d: d} }

// BlockUntilFile makes the seam wait until a file exists at path (polled every few
// milliseconds, at most 20 ms apart), then return nil; if ctx ends first it returns an
// *InjectedError wrapping ctx's error. From another process, this is how a test holds a
// child at a seam, checks the state, then lets it go (or kills it).
func BlockUntilFile(path string) Action { return Action{kind: kindBlockFile, path: path} }

// BlockUntilClosed makes the seam wait until ch is closed, then return nil; if ctx ends
// first it returns an *InjectedError wrapping ctx's error.
func BlockUntilClosed(ch <-chan struct{}) Action { return Action{kind: kindBlockChan, ch: ch} }

// Call runs f at the seam, on the goroutine that hit it, with the seam's context. A nil
// result lets the code continue; an error is returned wrapped in an *InjectedError. Tests
// use it to act in the middle of an operation (restart etcd, write a competing version,
// record state). f must be safe for concurrent use if several goroutines can hit the seam.
func Call(f func(ctx context.Context) error) Action {
	if f == nil {
		panic("failpoint: Call(nil)")
	}
	return Action{kind: kindCall, fn: f}
}

// After returns the action with its first n hits let through: it takes effect from hit
// n+1 on. It panics if n < 0.
func (a Action) After(n int) Action {
	if n < 0 {
		panic("failpoint: After(n) with n < 0")
	}
	a.after = int64(n)
	return a
}

// Times returns the action limited to n hits (counted after those that After lets
// through); later hits pass. n = 0 removes the limit. It panics if n < 0.
func (a Action) Times(n int) Action {
	if n < 0 {
		panic("failpoint: Times(n) with n < 0")
	}
	a.times = int64(n)
	return a
}

// Once is Times(1).
func (a Action) Once() Action { return a.Times(1) }

// String gives the action in SHALE_FAILPOINTS syntax (see ParseSpec). Channel blocks and
// calls have no such syntax and print as block(<chan>) and call(<func>).
func (a Action) String() string {
	var s string
	if a.after > 0 {
		s = "after(" + strconv.FormatInt(a.after, 10) + ")->"
	}
	if a.times > 0 {
		s += strconv.FormatInt(a.times, 10) + "*"
	}
	switch a.kind {
	case kindCount:
		return s + "count"
	case kindError:
		return s + "error(" + a.err.Error() + ")"
	case kindPanic:
		if a.msg == "" {
			return s + "panic"
		}
		return s + "panic(" + a.msg + ")"
	case kindExit:
		return s + "exit(" + strconv.Itoa(a.code) + ")"
	case kindKill:
		return s + "kill"
	case kindSleep:
		return s + "sleep(" + a.d.String() + ")"
	case kindBlockFile:
		return s + "block(" + a.path + ")"
	case kindBlockChan:
		return s + "block(<chan>)"
	case kindCall:
		return s + "call(<func>)"
	}
	return s + fmt.Sprintf("action(%d)", a.kind)
}

// run performs the action at the seam name.
func (a *Action) run(ctx context.Context, name string) error {
	switch a.kind {
	case kindCount:
		return nil
	case kindError:
		return &InjectedError{Seam: name, Err: a.err}
	case kindPanic:
		msg := a.msg
		if msg == "" {
			msg = "panic"
		}
		panic(&InjectedError{Seam: name, Err: errors.New(msg)})
	case kindExit:
		os.Exit(a.code)
	case kindKill:
		killSelf()
	case kindSleep:
		t := time.NewTimer(a.d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return &InjectedError{Seam: name, Err: context.Cause(ctx)}
		}
	case kindBlockFile:
		delay := time.Millisecond
		for {
			if _, err := os.Stat(a.path); err == nil {
				return nil
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return &InjectedError{Seam: name, Err: context.Cause(ctx)}
			}
			delay = min(2*delay, 20*time.Millisecond)
		}
	case kindBlockChan:
		select {
		case <-a.ch:
			return nil
		case <-ctx.Done():
			return &InjectedError{Seam: name, Err: context.Cause(ctx)}
		}
	case kindCall:
		if err := a.fn(ctx); err != nil {
			return &InjectedError{Seam: name, Err: err}
		}
		return nil
	}
	return nil
}
