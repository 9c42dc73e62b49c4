package panics

import (
	"errors"
	"io"
	"strings"
	"testing"
)

//go:noinline
func boom(v any) { panic(v) }

//go:noinline
func index(xs []int, i int) int { return xs[i] }

func run(f func()) (err error) {
	defer Recover(&err, "read data file", "t/data/x.arrow")
	f()
	return nil
}

func TestRecoverMakesAnError(t *testing.T) {
	err := run(func() { boom("bad state") })
	var pe *Error
	if !errors.As(err, &pe) || !errors.Is(err, ErrInternal) {
		t.Fatalf("err = %v, want an *Error wrapping ErrInternal", err)
	}
	msg := err.Error()
	for _, want := range []string{"read data file t/data/x.arrow: internal error: panic: bad state", "[at panics.boom (panics/panics_test.go:"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("message %q lacks %q", msg, want)
		}
	}
	if !strings.HasPrefix(pe.Stack, "github.com/shale-db/shale/internal/panics.boom\n\t") {
		t.Fatalf("stack does not start at the panic site:\n%s", pe.Stack)
	}
	if n := strings.Count(pe.Stack, "\n\t"); n < 2 || n > maxFrames {
		t.Fatalf("stack has %d frames:\n%s", n, pe.Stack)
	}
}

func TestRecoverRuntimeErrorAndErrorValues(t *testing.T) {
	// A runtime fault: the stack starts at the faulting function, not in the runtime.
	err := run(func() { index(nil, 3) })
	var pe *Error
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Stack, "github.com/shale-db/shale/internal/panics.index\n") {
		t.Fatalf("err = %v, stack:\n%s", err, pe.Stack)
	}
	// An error value stays reachable through errors.Is.
	err = run(func() { boom(io.ErrUnexpectedEOF) })
	if !errors.Is(err, io.ErrUnexpectedEOF) || !errors.Is(err, ErrInternal) {
		t.Fatalf("err = %v, want ErrInternal and the panic's error", err)
	}
}

func TestRecoverWithoutPanicKeepsTheError(t *testing.T) {
	want := errors.New("plain")
	f := func() (err error) {
		defer Recover(&err, "", "")
		return want
	}
	if err := f(); err != want {
		t.Fatalf("err = %v, want %v", err, want)
	}
}
