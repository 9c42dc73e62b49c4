// Package panics turns a panic on a read or write path into an error returned to the
// caller, so that a bug (in Shale or a library it calls) or input that slipped past
// validation fails one operation instead of crashing the process that links Shale.
//
// Every goroutine a read or write path starts (scan workers, compaction readers and
// writers) and the entry points of the data file reader and writer defer Recover, or
// recover themselves and build the error with New:
//
//	func (w *worker) run(ctx context.Context, key string) (err error) {
//		defer panics.Recover(&err, "read data file", key)
//		...
//	}
//
// The error wraps ErrInternal (and the panic value, when it is an error), names the
// operation and the object when they are known, and carries the first frames of the
// panicking goroutine's stack.
package panics

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// ErrInternal is wrapped by every error made from a panic: a fault of the code, not a
// property of the stored data or the request. The operation failed; nothing it reported
// as written was written. engine.ErrInternal is the same value.
var ErrInternal = errors.New("internal error")

// maxFrames bounds Error.Stack; msgFrames of them go into the message.
const (
	maxFrames = 16
	msgFrames = 3
)

// Error is a recovered panic.
type Error struct {
	Op    string // what was running, e.g. "read data file"; may be empty
	Key   string // the object being read or written; empty when unknown
	Value any    // the value passed to panic
	// Stack is the panicking goroutine's stack from the panic site outwards (at most
	// maxFrames frames), one "function\n\tfile:line" pair per frame, as runtime/debug
	// prints them.
	Stack string
	first []string // "function (file:line)" of the innermost msgFrames frames
}

// New returns the error for panic value v. Call it from the deferred function that
// recovered v, so that the stack it records starts at the panic site.
func New(op, key string, v any) *Error {
	e := &Error{Op: op, Key: key, Value: v}
	pcs := make([]uintptr, 64)
	n := runtime.Callers(1, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var all []runtime.Frame
	panicAt := -1
	for {
		f, more := frames.Next()
		if f.Function == "runtime.gopanic" {
			panicAt = len(all)
		}
		all = append(all, f)
		if !more {
			break
		}
	}
	// Frames after runtime.gopanic are the panic site and its callers; runtime helpers
	// that raise a panic for a fault (runtime.panicIndex, runtime.sigpanic, …) are skipped.
	// Without gopanic (New called outside a deferred recover), keep every frame.
	rest := all[panicAt+1:]
	for len(rest) > 0 && strings.HasPrefix(rest[0].Function, "runtime.") {
		rest = rest[1:]
	}
	var b strings.Builder
	for i, f := range rest {
		if i == maxFrames {
			break
		}
		fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		if i < msgFrames {
			e.first = append(e.first, fmt.Sprintf("%s (%s:%d)", shortFunc(f.Function), shortFile(f.File), f.Line))
		}
	}
	e.Stack = b.String()
	return e
}

// Recover, deferred directly (defer panics.Recover(&err, op, key)), turns a panic of
// the calling goroutine into an *Error stored in *errp. Without a panic it does nothing.
func Recover(errp *error, op, key string) {
	if v := recover(); v != nil {
		*errp = New(op, key, v)
	}
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
	}
	if e.Key != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.Key)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%v: panic: %v", ErrInternal, e.Value)
	if len(e.first) > 0 {
		b.WriteString(" [at " + strings.Join(e.first, " < ") + "]")
	}
	return b.String()
}

// Unwrap exposes ErrInternal and, when the panic value is an error, that error to
// errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrInternal, err}
	}
	return []error{ErrInternal}
}

// shortFunc drops the module path of a function name: github.com/x/y/engine.(*T).m
// becomes engine.(*T).m.
func shortFunc(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// shortFile keeps a file's last directory and name.
func shortFile(path string) string {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return path
	}
	if j := strings.LastIndexByte(path[:i], '/'); j >= 0 {
		return path[j+1:]
	}
	return path
}
