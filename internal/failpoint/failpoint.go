// Package failpoint is a registry of named seams: points in the code where a test can
// make the program fail, crash, stall or run a callback, to check what happens when a
// multi-step operation stops at a phase boundary (DESIGN §13, invariant 14).
//
// A package declares each seam once, at package level, and calls it where the phase
// boundary is:
//
//	var seamBeforeVersionPut = failpoint.Seam("manifest.before_version_put")
//
//	if err := seamBeforeVersionPut.Inject(ctx); err != nil {
//		return err
//	}
//
// In production nothing is enabled and Inject, inlined into its caller, costs one atomic
// pointer load and a compare (0.7 ns, half an empty function call;
// BenchmarkInjectDisabled). Tests enable an Action at a seam by name:
//
//	t.Cleanup(failpoint.Enable("manifest.before_version_put", failpoint.Error(errBoom).Once()))
//
// and a crash test enables seams in a child process through its environment, parsed when
// this package initialises (syntax in ParseSpec):
//
//	SHALE_FAILPOINTS="manifest.before_version_put=kill;catalog.before_txn=after(2)->error(lost)"
//
// Seam names are made of letters, digits and . _ - / (package.phase by convention).
// Names lists every declared seam, so a crash harness can kill a child at each one in turn.
// All functions are safe for concurrent use.
package failpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrInjected is wrapped by every error a seam returns, so callers and tests can tell an
// injected failure from a real one with errors.Is.
var ErrInjected = errors.New("failpoint: injected")

// InjectedError is what an enabled seam returns (and the value its Panic action panics
// with): the seam's name and the cause. It unwraps to ErrInjected and to Err, so
// errors.Is matches both ErrInjected and, for an Error(err) action, err itself; when a
// Sleep or Block action is cut short, Err is the context's error.
type InjectedError struct {
	Seam string
	Err  error
}

func (e *InjectedError) Error() string { return fmt.Sprintf("failpoint %s: %v", e.Seam, e.Err) }

// Unwrap exposes ErrInjected and the cause to errors.Is and errors.As.
func (e *InjectedError) Unwrap() []error { return []error{ErrInjected, e.Err} }

// Point is one named seam. Get one from Seam; the zero value is not usable.
//
// armed comes first: at offset 0 the compiler inlines Inject (cost 79 of its budget of
// 80), so a disabled seam costs its caller one atomic load and a compare.
type Point struct {
	armed    atomic.Pointer[armed] // nil when disabled: the only thing Inject reads
	last     atomic.Pointer[armed] // the latest enabled action, kept after disable for Hits
	name     string
	declared atomic.Bool
}

// armed is one Enable of an action at a point.
type armed struct {
	seam string
	act  Action
	hits atomic.Int64
}

var (
	mu     sync.Mutex
	points = map[string]*Point{}
)

// Seam declares the seam name and returns its Point. Call it once per seam, in a
// package-level var, so the seam is listed by Names before any code runs. Declaring the
// same name again returns the same Point. An action already enabled under name (from
// SHALE_FAILPOINTS, or an Enable that came first) applies at once.
// It panics if name is not a valid seam name.
func Seam(name string) *Point {
	p := point(name)
	p.declared.Store(true)
	return p
}

// point returns the Point for name, creating it undeclared.
func point(name string) *Point {
	if err := checkName(name); err != nil {
		panic(err)
	}
	mu.Lock()
	defer mu.Unlock()
	p := points[name]
	if p == nil {
		p = &Point{name: name}
		points[name] = p
	}
	return p
}

// Name returns the seam's name.
func (p *Point) Name() string { return p.name }

// Inject runs the seam: it returns nil at once unless an action is enabled here. An
// enabled action counts a hit and then, unless its After/Times modifiers skip this hit,
// takes effect: Error returns an *InjectedError; Panic panics; Exit and Kill end the
// process; Sleep and Block wait (returning an *InjectedError wrapping ctx's error if ctx
// ends first, else nil); Call returns its function's error wrapped in an *InjectedError
// (nil stays nil); Count returns nil. ctx may be context.Background() where the caller
// has none.
func (p *Point) Inject(ctx context.Context) error {
	if a := p.armed.Load(); a != nil {
		return a.fire(ctx)
	}
	return nil
}

// fire is Inject's slow path, kept out of line so that Inject stays inlinable.
//
//go:noinline
func (a *armed) fire(ctx context.Context) error {
	n := a.hits.Add(1)
	if n <= a.act.after || (a.act.times > 0 && n > a.act.after+a.act.times) {
		return nil
	}
	return a.act.run(ctx, a.seam)
}

// Enable makes action take effect at the seam name and returns a function that disables
// it again (for t.Cleanup). It replaces any action enabled there before and restarts the
// seam's hit count. The seam need not be declared yet (see Verify). The returned disable
// function only disables this action: after a later Enable of the same name it does
// nothing. It panics if name is not a valid seam name.
func Enable(name string, action Action) (disable func()) {
	p := point(name)
	a := &armed{seam: name, act: action}
	p.last.Store(a)
	p.armed.Store(a)
	return func() { p.armed.CompareAndSwap(a, nil) }
}

// Disable disables whatever action is enabled at the seam name (a no-op if none is).
func Disable(name string) {
	mu.Lock()
	p := points[name]
	mu.Unlock()
	if p != nil {
		p.armed.Store(nil)
	}
}

// DisableAll disables every enabled action.
func DisableAll() {
	mu.Lock()
	defer mu.Unlock()
	for _, p := range points {
		p.armed.Store(nil)
	}
}

// Hits returns how many times the seam name was reached while its latest Enable was in
// effect, including hits that the After/Times modifiers let pass (hits while disabled are
// not counted: a disabled seam does no work). It is 0 for a seam never enabled.
func Hits(name string) int {
	mu.Lock()
	p := points[name]
	mu.Unlock()
	if p == nil {
		return 0
	}
	a := p.last.Load()
	if a == nil {
		return 0
	}
	return int(a.hits.Load())
}

// Names returns every declared seam name (see Seam), sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	return namesLocked()
}

// Enabled returns the names of the seams with an action enabled now, sorted.
func Enabled() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for name, p := range points {
		if p.armed.Load() != nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ErrUndeclared classifies Verify's error.
var ErrUndeclared = errors.New("failpoint: enabled seam is not declared")

// Verify reports an enabled seam that no package has declared, which usually means a
// misspelt name in SHALE_FAILPOINTS or Enable: such an action would never fire and a crash
// test would pass without crashing. Call it once all packages are initialised (first thing
// in main or TestMain of a crash-test child). Errors wrap ErrUndeclared and name the seams.
func Verify() error {
	mu.Lock()
	defer mu.Unlock()
	var bad []string
	for name, p := range points {
		if p.armed.Load() != nil && !p.declared.Load() {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("%w: %q (declared seams: %q)", ErrUndeclared, bad, namesLocked())
}

func namesLocked() []string {
	var out []string
	for name, p := range points {
		if p.declared.Load() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// checkName enforces the seam name alphabet, which keeps names safe inside SHALE_FAILPOINTS.
func checkName(name string) error {
	if name == "" {
		return errors.New("failpoint: empty seam name")
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == '-' || r == '/'
		if !ok {
			return fmt.Errorf("failpoint: seam name %q: character %q not allowed (use letters, digits, . _ - /)", name, r)
		}
	}
	return nil
}
