// Package cmd holds the inorder command line: one cobra command per file,
// each building its configuration inside its own run function.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/inorder-proxy/inorder/config"
)

// Main runs the command line with args and returns the process exit code.
func Main(args []string) int {
	root := newRootCommand()
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "inorder:", err)
	}
	return exitCode(err)
}

// exitCode is the process exit status for what a command returned.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

// exitError asks Main for a particular exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "inorder",
		Short:         "An ordering-preserving Kafka proxy",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// A bad flag value reads like a bad file value: the flag, the value and
	// what was expected.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return config.FlagError(err) })
	root.AddCommand(
		newVersionCommand(),
		newServeCommand(),
		newDevCommand(),
		newBenchCommand(),
		newCheckCommand(),
	)
	return root
}
