package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// gcCommand is a placeholder until the gc command lands (issue 4).
func (a *app) gcCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "not built yet",
		RunE:  func(cmd *cobra.Command, args []string) error { return errors.New("gc: not built yet") },
	}
}
