package store

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// retryable reports whether a failed attempt may be repeated: transient failures always;
// writes of unknown outcome too, because every write a Store makes is safe to repeat (an
// unconditional put or delete is idempotent, and a put-if-absent is guarded by its own
// precondition and decided by read-back).
func retryable(err error) bool {
	return errors.Is(err, ErrTransient) || errors.Is(err, ErrOutcomeUnknown)
}

// retry runs f until it succeeds, returns an error that is not retryable, ctx ends, or
// opts.Retries extra attempts are spent. Each attempt gets a context bounded by
// opts.AttemptTimeout (when set). Backoff starts at opts.BaseBackoff, doubles, is capped
// at opts.MaxBackoff and is fully jittered.
func retry(ctx context.Context, opts Options, f func(ctx context.Context) error) error {
	var err error
	for attempt := 0; ; attempt++ {
		err = attemptOnce(ctx, opts, f)
		if err == nil || !retryable(err) || attempt >= opts.Retries || ctx.Err() != nil {
			return err
		}
		d := opts.BaseBackoff << min(attempt, 20)
		if d > opts.MaxBackoff || d <= 0 {
			d = opts.MaxBackoff
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(d) + 1)))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

func attemptOnce(ctx context.Context, opts Options, f func(ctx context.Context) error) error {
	if opts.AttemptTimeout <= 0 {
		return f(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, opts.AttemptTimeout)
	defer cancel()
	return f(actx)
}

// readBack is what a put-if-absent needs to decide whose object a key holds.
type readBack struct {
	// head returns the size and, when the store knows it, the MD5 of the stored object.
	head func(ctx context.Context) (size int64, md5 []byte, err error)
	get  func(ctx context.Context) ([]byte, error)
}

// putIfAbsent runs a conditional create with retries and decides every ambiguous outcome
// by reading the key back:
//
//   - an attempt that reports "already exists" is checked: if the key holds exactly data
//     the call succeeds (an earlier attempt of ours landed, possibly hidden by a retry in
//     the SDK, or another writer stored identical bytes); if it holds other bytes the call
//     fails with ErrPreconditionFailed;
//   - attempts whose outcome is unknown are retried (the precondition keeps the retry
//     safe); if the retries run out after such an attempt, the key is read back once more
//     and ErrOutcomeUnknown is returned only when that cannot decide.
func putIfAbsent(ctx context.Context, opts Options, op errorNamer, data []byte, rb readBack, attempt func(ctx context.Context) error) error {
	ambiguous := false
	err := retry(ctx, opts, func(actx context.Context) error {
		err := attempt(actx)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrPreconditionFailed):
			return decide(ctx, opts, op, data, rb, err, true)
		case errors.Is(err, ErrOutcomeUnknown):
			ambiguous = true
		}
		return err
	})
	if err == nil || !ambiguous || errors.Is(err, ErrPreconditionFailed) {
		return err
	}
	// Retries are spent (or the context ended) after an attempt that may have landed.
	if ctx.Err() != nil {
		return op.fail(ErrOutcomeUnknown, detail(err))
	}
	return decide(ctx, opts, op, data, rb, err, false)
}

// decide reads the key back after a put-if-absent attempt. taken reports that the store
// said the key exists; cause is the attempt's error. It returns nil when the key holds
// exactly data, ErrPreconditionFailed when it holds other bytes, a transient error when a
// taken key has since disappeared (so the create is retried), and ErrOutcomeUnknown when
// the read-back fails or (after an ambiguous attempt) finds nothing.
func decide(ctx context.Context, opts Options, op errorNamer, data []byte, rb readBack, cause error, taken bool) error {
	var size int64
	var sum []byte
	err := retry(ctx, opts, func(actx context.Context) error {
		var err error
		size, sum, err = rb.head(actx)
		return err
	})
	switch {
	case errors.Is(err, ErrNotFound) && taken:
		return op.fail(ErrTransient, fmt.Errorf("the key was reported taken but is absent on read-back: %w", detail(cause)))
	case errors.Is(err, ErrNotFound):
		return op.fail(ErrOutcomeUnknown, detail(cause))
	case err != nil:
		return op.fail(ErrOutcomeUnknown, fmt.Errorf("read-back after %v: %w", detail(cause), detail(err)))
	}
	if size != int64(len(data)) {
		return op.fail(ErrPreconditionFailed, nil)
	}
	if len(sum) == md5.Size {
		if got := md5.Sum(data); !bytes.Equal(got[:], sum) {
			return op.fail(ErrPreconditionFailed, nil)
		}
	}
	var got []byte
	err = retry(ctx, opts, func(actx context.Context) error {
		var err error
		got, err = rb.get(actx)
		return err
	})
	switch {
	case err == nil && bytes.Equal(got, data):
		return nil
	case err == nil:
		return op.fail(ErrPreconditionFailed, nil)
	case errors.Is(err, ErrNotFound) && taken:
		return op.fail(ErrTransient, fmt.Errorf("the key was reported taken but is absent on read-back: %w", detail(cause)))
	default:
		return op.fail(ErrOutcomeUnknown, fmt.Errorf("read-back after %v: %w", detail(cause), detail(err)))
	}
}

// errorNamer builds an *Error naming one operation on one key of one store.
type errorNamer struct {
	op    Op
	store string
	key   string
}

func (n errorNamer) fail(class, cause error) error {
	return &Error{Op: n.op, Store: n.store, Key: n.key, Class: class, Err: cause}
}

// detail strips the class from a store error so that it can be the cause of an error of
// another class (an *Error wraps exactly one class). The underlying cause stays reachable
// through errors.Is / errors.As.
func detail(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if e.Err == nil {
		return errors.New(e.Class.Error())
	}
	return fmt.Errorf("%v: %w", e.Class, e.Err)
}

// watchSlow tells opts.Slow about a request of store on key that has gone on for
// opts.SlowAfter, and again every SlowAfter, until the returned stop is called.
func watchSlow(opts Options, store string, op Op, key string) (stop func()) {
	if opts.Slow == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(opts.SlowAfter)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				opts.Slow(SlowRequest{Store: store, Op: op, Key: key, Waited: time.Since(start)})
			}
		}
	}()
	return func() { close(done) }
}
