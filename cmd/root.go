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
	"github.com/spf13/pflag"

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

// Exit statuses shared by every command (check and --fail-on-violation
// add their own, README's exit status table lists them all).
const (
	// exitFailed: the command ran and failed (a port in use, an upstream
	// that failed, a data directory held by another process).
	exitFailed = 1
	// exitUsage: the command never ran because it was asked wrongly: an
	// unknown command or flag, a value a flag or a config-file key does
	// not take, settings that cannot work together. It is check's "could
	// not run" too, so that a gate never reads a typo as a violation.
	exitUsage = 2
)

// exitCode is the process exit status for what a command returned.
func exitCode(err error) int {
	var ee *exitError
	var ran *runError
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case !errors.As(err, &ran), errors.As(err, &ue), errors.Is(err, config.ErrInvalid):
		// cobra refused the command line before the command ran, or the
		// command refused its settings.
		return exitUsage
	}
	return exitFailed
}

// exitError asks Main for a particular exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// flagError words what pflag refused on a command line: a bad value
// reads like a bad file value (the flag, the value and what was expected);
// an unknown flag close to one the command takes names it, and any other
// unknown flag or one missing its value points at the command's help.
func flagError(c *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		return config.FlagError(err)
	}
	var ne *pflag.NotExistError
	if errors.As(err, &ne) && ne.GetSpecifiedShortnames() == "" {
		var known []string
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				known = append(known, f.Name)
			}
		})
		if near := config.Suggest(ne.GetSpecifiedName(), known); near != "" {
			return fmt.Errorf("%w (did you mean --%s?)", err, near)
		}
	}
	return fmt.Errorf("%w (%s --help lists the flags)", err, c.CommandPath())
}

// noArgs refuses arguments: every command takes flags only.
func noArgs(c *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return nil
	case c.HasSubCommands():
		return fmt.Errorf("unknown command %q for %q (%s --help lists its commands)", args[0], c.CommandPath(), c.CommandPath())
	}
	return fmt.Errorf("%q: %s takes flags only, no arguments (%s --help lists them)", args[0], c.CommandPath(), c.CommandPath())
}

// usage marks err as a usage error, for what a command refuses once its
// flags parsed.
func usage(err error) error { return &usageError{err: err} }

type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// runError is an error a command's run function returned, as opposed to
// one cobra returned before running it (an unknown flag, a bad value,
// arguments or a required flag missing), which is a usage error.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// markRun wraps the run function of c, so that exitCode can tell what
// the command returned from what cobra did.
func markRun(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(c *cobra.Command, args []string) error {
			if err := run(c, args); err != nil {
				return &runError{err: err}
			}
			return nil
		}
	}
}

// eachCommand calls fn for c and every command below it.
func eachCommand(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		eachCommand(sub, fn)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "inorder",
		Short:         "An ordering-preserving Kafka proxy",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newVersionCommand(),
		newServeCommand(),
		newDevCommand(),
		newBenchCommand(),
		newCheckCommand(),
		newCredentialsCommand(),
	)
	eachCommand(root, func(c *cobra.Command) {
		markRun(c)
		// Errors echo values as the user wrote them.
		config.KeepTyped(c.Flags())
	})
	return root
}
