package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/inorder-proxy/inorder/check"
	"github.com/inorder-proxy/inorder/config"
)

// Exit statuses of `inorder check`.
const (
	exitViolation = 1
	// exitCannotRun is exitUsage: a check asked wrongly did not run either.
	exitCannotRun = exitUsage
)

func newCheckCommand() *cobra.Command {
	var (
		o      check.Options
		format string
		quiet  bool
	)
	c := &cobra.Command{
		Use:   "check --bootstrap HOST:PORT",
		Short: "Probe a Kafka-compatible address for per-connection ordering",
		Long: `check pipelines requests on single connections to any Kafka-compatible
address (a broker, or inorder in front of one) and reports, property by
property, whether responses come back in request order and writes land in
the order sent: Produce with acks=all and acks=1, an idempotent producer's
sequences, OffsetCommit followed by OffsetFetch, and Produce mixed with
Metadata and ApiVersions. It creates and deletes its own topic and group.

The result goes to standard output (--format text, json or junit), progress
to standard error. Exit status: 0 every property holds, 1 a violation was
seen, 2 the check could not run (unreachable, not authorised, missing
permissions, not Kafka), with the reason.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkFlags(c.Flags(), o, format); err != nil {
				return usage(err)
			}
			opts := o
			if !quiet {
				opts.Progress = c.ErrOrStderr()
			}
			rep, err := check.Run(c.Context(), opts)
			if errors.Is(err, check.ErrOptions) {
				return usage(err)
			}
			if werr := check.Write(c.OutOrStdout(), rep, format); werr != nil && err == nil {
				err = werr
			}
			switch {
			case err != nil:
				// Whatever stopped the check, it is not a verdict on the
				// backend: only a violation seen exits 1.
				return &exitError{code: exitCannotRun, err: err}
			case rep.Violations() > 0:
				return &exitError{code: exitViolation, err: fmt.Errorf("ordering violated: %d of %d properties", rep.Violations(), len(rep.Properties))}
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVarP(&o.Bootstrap, "bootstrap", "b", "127.0.0.1:9092", "address to probe, HOST:PORT")
	f.IntVar(&o.Requests, "requests", check.DefaultRequests, "requests each property pipelines")
	f.IntVar(&o.Window, "window", check.DefaultWindow, "requests in flight per probe connection (the idempotent producer keeps 5)")
	f.StringVar(&o.Topic, "topic", "", "topic to write to (default: a fresh inorder-check-* topic, deleted at the end)")
	f.StringVar(&o.Group, "group", "", "group to commit to (default: a fresh inorder-check-* group, deleted at the end)")
	f.DurationVar(&o.Timeout, "timeout", check.DefaultTimeout, "bound on the whole run")
	f.DurationVar(&o.DialTimeout, "dial-timeout", check.DefaultDialTimeout, "bound on each connection attempt")
	f.StringVar(&format, "format", check.FormatText, "result format: text, json or junit")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	return c
}

// checkFlags refuses flag values check cannot use. A zero would mean the
// default to check.Options, but typed on the command line it is a mistake,
// not a wish for the default.
func checkFlags(fs *pflag.FlagSet, o check.Options, format string) error {
	bad := func(name, reason string) error { return config.InvalidFlag(fs, name, reason) }
	switch {
	case format != check.FormatText && format != check.FormatJSON && format != check.FormatJUnit:
		return bad("format", "must be text, json or junit")
	case o.Bootstrap == "":
		return bad("bootstrap", "is required: HOST:PORT of the broker or proxy to probe")
	case !check.IsHostPort(o.Bootstrap):
		return bad("bootstrap", "is not HOST:PORT (for example 127.0.0.1:9092)")
	case o.Requests < check.MinRequests || o.Requests > check.MaxRequests:
		return bad("requests", fmt.Sprintf("must be between %d and %d", check.MinRequests, check.MaxRequests))
	case o.Window < 1:
		return bad("window", "must be at least 1")
	case o.Timeout <= 0:
		return bad("timeout", "must be positive")
	case o.DialTimeout <= 0:
		return bad("dial-timeout", "must be positive")
	}
	return nil
}
