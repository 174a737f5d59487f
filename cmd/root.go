// Package cmd holds the inorder command line: one cobra command per file,
// each building its configuration inside its own run function.
package cmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Version is the release version, set at link time with
// -ldflags "-X github.com/inorder-proxy/inorder/cmd.Version=v1.2.3".
var Version = "dev"

// Main runs the command line with args and returns the process exit code.
func Main(args []string) int {
	root := newRootCommand()
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "inorder:", err)
		return 1
	}
	return 0
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "inorder",
		Short:         "An ordering-preserving Kafka proxy",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newVersionCommand(),
		newServeCommand(),
		newDevCommand(),
		newBenchCommand(),
	)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(c.OutOrStdout(), "inorder", Version)
			return err
		},
	}
}
