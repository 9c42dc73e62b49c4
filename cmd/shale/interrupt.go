package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
)

// interrupted rewords the error of a command that Ctrl-C (or SIGTERM) stopped: the cause
// reaches it through whatever the command was doing ("WHERE …: greater_equal kernel:
// interrupt signal received", "filter deleted rows of <key>: …"), which blames the
// wrong thing. The message says "interrupted" and what the interruption left. Errors that
// say so already (import's) and errors of a command that was not interrupted pass through.
func interrupted(ctx context.Context, cmd *cobra.Command, args []string, err error) error {
	var ie *interruptedError
	if err == nil || ctx.Err() == nil || errors.As(err, &ie) {
		return err
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return err
	}
	name, table := "", "TABLE"
	if cmd != nil {
		name = cmd.Name()
	}
	if len(args) > 0 {
		table = args[0]
	}
	var msg string
	switch name {
	case "delete", "update":
		var unk *engine.UnknownError
		switch {
		case errors.As(err, &unk) && unk.Committed:
			msg = fmt.Sprintf("the %s committed as version %d of %s, but its publish was cut short: 'shale repair %s' publishes it", name, unk.Version, unk.Table, unk.Table)
		case engine.OutcomeOf(err) == engine.Unknown:
			msg = fmt.Sprintf("the %s may or may not have committed: 'shale versions %s' shows whether it did (nothing half-done is visible either way)", name, table)
		default:
			msg = fmt.Sprintf("nothing was committed: %s is unchanged (any files the %s had written are deleted by 'shale gc')", table, name)
		}
	case "compact":
		msg = fmt.Sprintf("the compaction of %s stopped; its rows are unchanged. Its recovery sidecar is pending: 'shale recover %s' deletes the files it wrote (or publishes its version if it had committed)", table, table)
	case "gc", "drop", "recover", "repair":
		msg = fmt.Sprintf("%s stopped part way; what it did is consistent, and running it again finishes the rest", name)
	case "export":
		msg = "nothing was exported"
	case "create":
		msg = fmt.Sprintf("'shale versions %s' shows whether the table was created", table)
	case "query", "versions", "inspect", "status", "verify", "doctor":
		msg = fmt.Sprintf("%s stopped (it only reads: nothing was changed)", name)
	default:
		msg = fmt.Sprintf("%s stopped", name)
	}
	return &interruptedError{msg, err}
}
