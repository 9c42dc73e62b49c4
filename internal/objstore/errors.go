package objstore

import (
	"context"
	"errors"
	"fmt"

	"gocloud.dev/gcerrors"
)

// Error classes. Every error returned by a Store wraps exactly one of these, so callers
// branch with errors.Is and never on message text.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrPreconditionFailed: a put-if-absent lost because the key already holds another object.
	ErrPreconditionFailed = errors.New("precondition failed: object already exists")
	// ErrTransient: a failure that may succeed on retry (throttling, 5xx, connection refused
	// before the request was sent). Stores retry these with jittered backoff before returning.
	ErrTransient = errors.New("transient store error")
	// ErrPermanent: a failure that will not succeed on retry (access denied, bad request).
	ErrPermanent = errors.New("permanent store error")
	// ErrOutcomeUnknown: a write whose request may or may not have landed (timeout or broken
	// connection after the request was sent, and a read-back could not decide). A caller must
	// not delete anything the write may have created.
	ErrOutcomeUnknown = errors.New("outcome unknown: the write may have landed")
	// ErrPreconditionsIgnored: the store accepted a second put-if-absent of the same key, so
	// it cannot be used for commits by more than one writer.
	ErrPreconditionsIgnored = errors.New("store ignores put-if-absent preconditions")
)

// Error describes a failed store request: the operation, the store URL (credentials
// removed), the object key, the class (one of the Err* values above) and the cause.
type Error struct {
	Op    Op
	Store string
	Key   string
	Class error
	Err   error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s %s (store %s): %v", e.Op, e.Key, e.Store, e.Class)
	}
	return fmt.Sprintf("%s %s (store %s): %v: %v", e.Op, e.Key, e.Store, e.Class, e.Err)
}

// Unwrap exposes both the class and the cause to errors.Is / errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Class}
	}
	return []error{e.Class, e.Err}
}

// classify maps a driver error to one of the error classes. written reports whether the
// request may have been sent (a write whose request left this process): a timeout or a
// cancelled context is then "outcome unknown" rather than transient.
func classify(err error, written bool) error {
	if err == nil {
		return nil
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return ErrNotFound
	case gcerrors.FailedPrecondition:
		return ErrPreconditionFailed
	case gcerrors.DeadlineExceeded, gcerrors.Canceled:
		if written {
			return ErrOutcomeUnknown
		}
		return ErrTransient
	case gcerrors.ResourceExhausted, gcerrors.Internal:
		return ErrTransient
	case gcerrors.Unknown:
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			if written {
				return ErrOutcomeUnknown
			}
		}
		return ErrTransient
	case gcerrors.PermissionDenied, gcerrors.InvalidArgument, gcerrors.Unimplemented, gcerrors.AlreadyExists:
		return ErrPermanent
	}
	return ErrPermanent
}
