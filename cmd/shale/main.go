// Command shale is the operator's tool for Shale tables: create, import, query, delete,
// list versions, inspect manifests, compare HEAD with the published version, and a demo.
//
// Exit status: 0 on success, 1 when the command failed, 2 on a usage error (unknown
// command or flag, missing or extra arguments, a bad flag value). Errors print one line
// to stderr: text, or with --json the object {"error":{"message","kind","exit"}}
// (jsonout.go, docs/json.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/coord"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	// The embedded default etcd runs as a background process that re-executes this
	// binary; it must take over before anything else happens.
	coord.ServeIfRequested()
	// A user sees only shale's messages. The AWS transfer manager logs every failed
	// multipart completion with the standard logger, also the expected 412 of a lost
	// large put-if-absent, which the store reports as an error anyway.
	log.SetOutput(io.Discard)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first Ctrl-C (or SIGTERM) ends ctx: the command stops and cleans up what it
		// was writing. A second one ends the process at once (what is left is gc's).
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status. Errors are printed to
// stderr as one line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	root := app.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	app.close()
	if err == nil {
		return exitOK
	}
	err = interrupted(ctx, cmd, cmdArgs(cmd), err)
	code := exitError
	var ue *usageError
	if errors.As(err, &ue) || !app.started {
		// Cobra reports unknown commands, unknown flags, bad flag values and argument
		// count errors before our PersistentPreRunE runs.
		code = exitUsage
	}
	msg := oneLine(err.Error())
	if code == exitUsage {
		name := "shale"
		if cmd != nil {
			name = cmd.CommandPath()
		}
		msg += fmt.Sprintf(" (see '%s --help')", name)
	}
	fmt.Fprint(stderr, errorLine(msg, code, err, app.jsonOut || wantsJSON(args)))
	return code
}

// usageError marks an error in how the command was called (exit status 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// oneLine folds a multi-line error message into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return strings.Join(parts, "; ")
}

// exactArgs is cobra.ExactArgs with a usage error and a message naming the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			want := strings.Join(names, " ")
			if want == "" {
				return usagef("%s takes no arguments, got %q", cmd.Name(), args)
			}
			return usagef("%s needs %s (got %s)", cmd.Name(), want, plural(len(args), "argument"))
		}
		return nil
	}
}

// cmdArgs are the positional arguments of the command that ran (cobra parsed them).
func cmdArgs(cmd *cobra.Command) []string {
	if cmd == nil {
		return nil
	}
	return cmd.Flags().Args()
}
