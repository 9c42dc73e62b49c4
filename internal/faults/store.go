package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shale-db/shale/store"
)

// Rule says which store calls to affect and how.
type Rule struct {
	// Name labels the rule in Injection records (default "#<n>", n-th rule added).
	Name string
	// Ops selects calls by kind (store.OpGet, OpGetRange, OpHead, OpPut, OpPutIfAbsent,
	// OpList, OpDelete); empty selects every kind.
	Ops []store.Op
	// Key selects calls by object key (for List, the listed prefix): '*' matches any run
	// of characters including '/', other characters match themselves; "" matches every key.
	// Example: "*/_versions/*".
	Key string
	// Kind is what happens to a selected call.
	Kind Kind
	// Class is the error class a DropRequest call fails with: store.ErrTransient (the
	// default; a 503 answer, or a connection refused before sending), ErrOutcomeUnknown (a
	// timeout whose request in fact never arrived), ErrPermanent, ErrNotFound or
	// ErrPreconditionFailed. Other kinds choose the class themselves (see Store).
	Class error
	// Delay is how long a Delay rule waits before forwarding (required for Delay).
	Delay time.Duration
	// Times limits the rule to this many affected calls; 0 means no limit.
	Times int
	// Probability, when strictly between 0 and 1, makes the rule affect each call it
	// selects with this probability, drawn from the Store's seeded stream; 0 (or 1) means
	// every selected call.
	Probability float64
}

// Store is an store.Store that forwards to an inner store and injects faults by rule.
// Rules are consulted in the order they were added; the first rule that selects a call
// and takes it (budget left, probability drawn) decides its fate, and a call no rule
// takes is forwarded unchanged.
//
// Errors it makes up are *store.Error values naming the inner store's URL and the key,
// with a Class and an Err wrapping ErrInjected:
//
//	DropRequest   Rule.Class (default ErrTransient); nothing reaches the store.
//	DropResponse  writes (Put, PutIfAbsent, Delete): ErrOutcomeUnknown; reads:
//	              ErrTransient. The store applied the call (or refused it: a put-if-absent
//	              that lost); Injection.Result says which.
//	Delay, Hang   when the caller's context ends first: ErrOutcomeUnknown for writes,
//	              ErrTransient for reads (as package store classifies a timeout), wrapping the
//	              context's error; nothing reaches the store.
//	HangAfterSend as Hang, but the store applied the call first.
//
// Counters and URL are the inner store's: a request that was never forwarded is not
// counted. All methods are safe for concurrent use.
type Store struct {
	inner store.Store
	eng   *engine
	rules []storeRule // guarded by eng.mu
}

type storeRule struct {
	Rule
	h *Handle
}

var _ store.Store = (*Store)(nil)

// NewStore wraps inner with no rules. seed seeds the random stream of Probability rules
// (use NewSeed in tests, so the seed is logged).
func NewStore(inner store.Store, seed uint64) *Store {
	return &Store{inner: inner, eng: newEngine(seed)}
}

// Inner returns the wrapped store, to check what landed without going through the rules.
func (s *Store) Inner() store.Store { return s.inner }

// Seed returns the seed of the random stream.
func (s *Store) Seed() uint64 { return s.eng.seed }

// Add appends a rule and returns its handle. It panics on an invalid rule (unknown Kind,
// a Class that is not a store error class, Delay without a positive Delay, Times < 0,
// Probability outside [0, 1]).
func (s *Store) Add(r Rule) *Handle {
	switch r.Kind {
	case DropRequest:
		if r.Class == nil {
			r.Class = store.ErrTransient
		}
		if !slices.Contains([]error{store.ErrTransient, store.ErrOutcomeUnknown, store.ErrPermanent,
			store.ErrNotFound, store.ErrPreconditionFailed}, r.Class) {
			panic(fmt.Sprintf("faults: rule %q: Class %v is not a store error class", r.Name, r.Class))
		}
	case DropResponse, Hang, HangAfterSend:
	case Delay:
		if r.Delay <= 0 {
			panic(fmt.Sprintf("faults: rule %q: Delay rule needs Delay > 0", r.Name))
		}
	default:
		panic(fmt.Sprintf("faults: rule %q: unknown Kind %v", r.Name, r.Kind))
	}
	h := s.eng.newHandle(r.Name, r.Times, r.Probability)
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	s.rules = append(s.rules, storeRule{r, h})
	return h
}

// Clear removes every rule. Injections are kept.
func (s *Store) Clear() {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	for _, r := range s.rules {
		r.h.removed = true
	}
	s.rules = nil
}

// Injections returns every injection so far, in order.
func (s *Store) Injections() []Injection { return s.eng.injections() }

// pick returns the rule that takes the call, or nil.
func (s *Store) pick(op store.Op, key string) *storeRule {
	s.eng.mu.Lock()
	defer s.eng.mu.Unlock()
	for i := range s.rules {
		r := &s.rules[i]
		if (len(r.Ops) > 0 && !slices.Contains(r.Ops, op)) || !matchGlob(r.Key, key) {
			continue
		}
		if r.h.take(s.eng.rng) {
			return r
		}
	}
	return nil
}

func isWrite(op store.Op) bool {
	return op == store.OpPut || op == store.OpPutIfAbsent || op == store.OpDelete
}

// timeoutClass is the class of a call that got no answer: its write may have landed.
func timeoutClass(op store.Op) error {
	if isWrite(op) {
		return store.ErrOutcomeUnknown
	}
	return store.ErrTransient
}

// do runs one call through the rules. call forwards it to the inner store.
func (s *Store) do(ctx context.Context, op store.Op, key string, call func(context.Context) error) error {
	r := s.pick(op, key)
	if r == nil {
		return call(ctx)
	}
	in := Injection{Rule: r.h.name, Kind: r.Kind, Op: string(op), Key: key}
	fail := func(class error, format string, args ...any) error {
		return &store.Error{Op: op, Store: s.inner.URL(), Key: key, Class: class,
			Err: fmt.Errorf("%w (%s, rule %s): "+format, append([]any{ErrInjected, r.Kind, r.h.name}, args...)...)}
	}
	var err error
	switch r.Kind {
	case DropRequest:
		if errors.Is(r.Class, store.ErrTransient) {
			err = fail(r.Class, "503 Service Unavailable; request not forwarded")
		} else {
			err = fail(r.Class, "request not forwarded")
		}
	case DropResponse:
		in.Forwarded = true
		in.Result = call(ctx)
		err = fail(timeoutClass(op), "response dropped after the store answered")
	case Delay:
		if sleepCtx(ctx.Done(), r.Delay) {
			in.Forwarded = true
			in.Result = call(ctx)
			err = in.Result
		} else {
			err = fail(timeoutClass(op), "context ended during a %v delay, request not forwarded: %w",
				r.Delay, context.Cause(ctx))
		}
	case Hang:
		<-ctx.Done()
		err = fail(timeoutClass(op), "no answer, request not forwarded: %w", context.Cause(ctx))
	case HangAfterSend:
		in.Forwarded = true
		in.Result = call(ctx)
		<-ctx.Done()
		err = fail(timeoutClass(op), "no answer after the store answered: %w", context.Cause(ctx))
	}
	in.Returned = err
	s.eng.record(in)
	return err
}

func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	var out []byte
	err := s.do(ctx, store.OpGet, key, func(ctx context.Context) (err error) {
		out, err = s.inner.Get(ctx, key)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	var out []byte
	err := s.do(ctx, store.OpGetRange, key, func(ctx context.Context) (err error) {
		out, err = s.inner.GetRange(ctx, key, offset, length)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) Head(ctx context.Context, key string) (store.ObjectInfo, error) {
	var out store.ObjectInfo
	err := s.do(ctx, store.OpHead, key, func(ctx context.Context) (err error) {
		out, err = s.inner.Head(ctx, key)
		return err
	})
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return out, nil
}

func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	return s.do(ctx, store.OpPut, key, func(ctx context.Context) error { return s.inner.Put(ctx, key, data) })
}

func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return s.do(ctx, store.OpPutIfAbsent, key, func(ctx context.Context) error {
		return s.inner.PutIfAbsent(ctx, key, data)
	})
}

func (s *Store) List(ctx context.Context, prefix string, limit int) ([]store.ObjectInfo, error) {
	var out []store.ObjectInfo
	err := s.do(ctx, store.OpList, prefix, func(ctx context.Context) (err error) {
		out, err = s.inner.List(ctx, prefix, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) Delete(ctx context.Context, key string) error {
	return s.do(ctx, store.OpDelete, key, func(ctx context.Context) error { return s.inner.Delete(ctx, key) })
}

// Counters returns the inner store's counters (requests that reached it).
func (s *Store) Counters() *store.Counters { return s.inner.Counters() }

// URL returns the inner store's URL.
func (s *Store) URL() string { return s.inner.URL() }

// Close closes the inner store.
func (s *Store) Close() error { return s.inner.Close() }
