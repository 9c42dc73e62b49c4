package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// repairCommand is a placeholder until the repair command lands (issue 4).
func (a *app) repairCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "repair",
		Short: "not built yet",
		RunE:  func(cmd *cobra.Command, args []string) error { return errors.New("repair: not built yet") },
	}
}
