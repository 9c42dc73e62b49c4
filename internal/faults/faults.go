// Package faults injects failures into Shale's real stores and etcd for tests of
// transactions under faults (DESIGN §12 invariants 4-5 and 14, §13).
//
//   - Store wraps any store.Store: rules drop a request before it reaches the store,
//     drop the response after the store applied it (a write whose outcome the caller
//     cannot know), delay a request, or hang until the caller's context ends (before or
//     after the store applied it).
//   - EtcdKV (installed by WrapKV) wraps a *clientv3.Client's KV the same way: a Txn,
//     Put, Get or Delete fails before it is sent, or is applied by etcd and then reported
//     as failed, or is delayed, or hangs.
//   - RestartEtcdAt restarts an embedded etcd server when a failpoint seam is hit, in the
//     middle of whatever operation reaches that seam.
//
// A rule applies to the next Times matching calls (0 = every one), or to each matching
// call with a Probability drawn from the wrapper's seeded random stream (NewSeed picks a
// seed and logs it, so a failing run can be replayed; a replay sees the same injections
// when the calls come in the same order). Every injection is recorded: Handle.Injected
// counts a rule's, and the wrappers' Injections list them with whether the call reached
// the store or etcd and what it answered there, so a test can assert that data landed,
// or not, as the fault says.
//
// These wrappers sit above the store's own retry loop: an injected transient error is
// what a caller sees once the store's retries are spent. To exercise that retry loop,
// inject at the HTTP layer of the fake S3 server instead (storetest.Faults).
package faults

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ErrInjected is wrapped by every error these wrappers make up, so a test can tell an
// injected failure from a real one.
var ErrInjected = errors.New("faults: injected")

// Kind is what a rule does to a call it selects.
type Kind int

const (
	// DropRequest fails the call without forwarding it: the store or etcd never sees it.
	DropRequest Kind = iota + 1
	// DropResponse forwards the call, so the store or etcd applies it, then discards the
	// answer and fails the call: what a timeout or a broken connection after the request
	// was sent looks like to the caller.
	DropResponse
	// Delay waits Rule.Delay, then forwards the call. If the caller's context ends first
	// the call is not forwarded and fails with the context's error.
	Delay
	// Hang never forwards the call and returns only when the caller's context ends, with
	// the context's error (a request that timed out with no answer).
	Hang
	// HangAfterSend forwards the call, so the store or etcd applies it, then returns only
	// when the caller's context ends, with the context's error: a request that landed but
	// whose answer never came before the deadline.
	HangAfterSend
)

func (k Kind) String() string {
	switch k {
	case DropRequest:
		return "drop-request"
	case DropResponse:
		return "drop-response"
	case Delay:
		return "delay"
	case Hang:
		return "hang"
	case HangAfterSend:
		return "hang-after-send"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Injection records one call a rule affected.
type Injection struct {
	Rule string // the rule's Name, or "#<n>" for the n-th rule added (from 1)
	Kind Kind
	Op   string // store.Op or EtcdOp
	Key  string // the object key (a List's prefix); for etcd, the first key the call names
	// Forwarded reports that the call reached the store or etcd (DropResponse, and Delay
	// when the context lasted); Result is then what it answered there (nil: applied).
	Forwarded bool
	Result    error
	Returned  error // what the caller got
}

// Handle is a rule added to a wrapper.
type Handle struct {
	name     string
	times    int
	prob     float64
	injected int
	removed  bool
	mu       *sync.Mutex // the wrapper's
}

// Injected is the number of calls the rule has affected so far.
func (h *Handle) Injected() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.injected
}

// Remove stops the rule from affecting further calls.
func (h *Handle) Remove() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removed = true
}

// Name is the rule's name in Injection records.
func (h *Handle) Name() string { return h.name }

// take reports whether the rule affects a call it matches, and counts it if so. The
// caller holds h.mu. A probabilistic rule draws from rng only for calls it matches and has
// budget for.
func (h *Handle) take(rng *rand.Rand) bool {
	if h.removed || (h.times > 0 && h.injected >= h.times) {
		return false
	}
	if h.prob > 0 && h.prob < 1 && rng.Float64() >= h.prob {
		return false
	}
	h.injected++
	return true
}

// engine is the rule list and random stream shared by the wrappers.
type engine struct {
	mu    sync.Mutex
	seed  uint64
	rng   *rand.Rand
	added int
	log   []Injection
}

func newEngine(seed uint64) *engine {
	return &engine{seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (e *engine) newHandle(name string, times int, prob float64) *Handle {
	if times < 0 {
		panic(fmt.Sprintf("faults: rule %q: Times %d < 0", name, times))
	}
	if prob < 0 || prob > 1 {
		panic(fmt.Sprintf("faults: rule %q: Probability %v outside [0, 1]", name, prob))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.added++
	if name == "" {
		name = "#" + strconv.Itoa(e.added)
	}
	return &Handle{name: name, times: times, prob: prob, mu: &e.mu}
}

func (e *engine) record(in Injection) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, in)
}

func (e *engine) injections() []Injection {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Injection(nil), e.log...)
}

// EnvSeed names the environment variable that NewSeed takes a seed from, to replay a run.
const EnvSeed = "SHALE_FAULT_SEED"

// NewSeed returns a seed for a wrapper's random stream: $SHALE_FAULT_SEED if set (a
// uint64), else a fresh random one. It logs the seed on tb, so every failing run prints
// how to replay it.
func NewSeed(tb testing.TB) uint64 {
	tb.Helper()
	if s := os.Getenv(EnvSeed); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			tb.Fatalf("faults: %s=%q: %v", EnvSeed, s, err)
		}
		tb.Logf("faults: seed %d (from %s)", seed, EnvSeed)
		return seed
	}
	seed := rand.Uint64()
	tb.Logf("faults: seed %d (replay with %s=%d)", seed, EnvSeed, seed)
	return seed
}

// matchGlob reports whether s matches pattern, in which '*' matches any run of
// characters, '/' included, and every other character matches itself. An empty pattern
// matches everything.
func matchGlob(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	// Iterative wildcard match with backtracking to the last '*'.
	p, i, star, mark := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// sleepCtx waits d or until ctx ends; it reports whether the full wait passed.
func sleepCtx(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
