package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/inorder-proxy/inorder/authn"
	"github.com/inorder-proxy/inorder/config"
)

// maxPassword bounds what add reads as a password: a file or a pipe that
// is not a password should not be read whole.
const maxPassword = 64 << 10

func newCredentialsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "credentials",
		Short: "Add users to a file of client credentials and list them",
		Long: `credentials manages a file of client credentials: for each user, salted SCRAM
credentials (salt, iterations, stored and server keys) as Kafka keeps them,
never a password. SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN check clients
against it. The file is YAML, written with mode 0600 by replacing it whole,
so that a reader never sees half of it.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	c.AddCommand(newCredentialsAddCommand(), newCredentialsListCommand())
	return c
}

func newCredentialsAddCommand() *cobra.Command {
	var (
		file, user, passwordFile string
		mechanisms               []string
		iterations               int
	)
	c := &cobra.Command{
		Use:   "add --file FILE --user NAME [--mechanism SCRAM-SHA-256]... [--password-file PATH]",
		Short: "Add or replace a user's credentials",
		Long: `add derives a user's SCRAM credential for each --mechanism from a password
and a fresh random salt, as kafka-configs --alter --add-config
'SCRAM-SHA-256=[iterations=4096,password=...]' does, and writes it to
--file (created if missing), replacing what the user had for that
mechanism. The password comes from --password-file or, without it, from
standard input; one trailing newline is dropped. It is never a flag's
value, which other users of the machine could read.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			bad := func(name, reason string) error { return usage(config.InvalidFlag(c.Flags(), name, reason)) }
			if err := authn.ValidUserName(user); err != nil {
				return bad("user", err.Error())
			}
			for _, m := range mechanisms {
				if !slices.Contains(authn.SCRAMMechanisms(), m) {
					// The flag repeats: name the one value at fault.
					return usage(&config.FieldError{Field: "--mechanism", Value: m, Reason: "must be " + strings.Join(authn.SCRAMMechanisms(), " or ")})
				}
			}
			if iterations < authn.MinIterations || iterations > authn.MaxIterations {
				return bad("iterations", fmt.Sprintf("must be between %d and %d, Kafka's bounds", authn.MinIterations, authn.MaxIterations))
			}
			password, err := readPassword(c, passwordFile)
			if err != nil {
				return err
			}
			// The first add creates the file.
			creds, err := authn.ReadCredentials(file)
			if errors.Is(err, fs.ErrNotExist) {
				creds, err = &authn.Credentials{}, nil
			}
			if err != nil {
				return err
			}
			mechanisms = slices.Compact(slices.Sorted(slices.Values(mechanisms)))
			for _, m := range mechanisms {
				cred, err := authn.NewCredential(m, password, iterations)
				if err == nil {
					err = creds.Set(user, m, cred)
				}
				if err != nil {
					return err
				}
			}
			if err := creds.WriteFile(file); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "%s: %s (%d iterations) written to %s\n", user, strings.Join(mechanisms, ", "), iterations, file)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&file, "file", "", "the credential file (created if missing)")
	f.StringVar(&user, "user", "", "the user name clients authenticate as")
	f.StringArrayVar(&mechanisms, "mechanism", []string{authn.MechanismSCRAMSHA256}, "SCRAM-SHA-256 or SCRAM-SHA-512; repeat for both")
	f.StringVar(&passwordFile, "password-file", "", "file holding the password (default: standard input)")
	f.IntVar(&iterations, "iterations", authn.DefaultIterations, fmt.Sprintf("SCRAM iterations, %d to %d", authn.MinIterations, authn.MaxIterations))
	c.MarkFlagRequired("file")
	c.MarkFlagRequired("user")
	return c
}

// readPassword reads the password from path, or from standard input when
// path is empty, and drops one trailing newline (a file an editor saved,
// or echo's). Its errors never quote what was read.
func readPassword(c *cobra.Command, path string) ([]byte, error) {
	var r io.Reader = c.InOrStdin()
	from := "standard input"
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, from = f, path
	} else if r == os.Stdin {
		if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintln(c.ErrOrStderr(), "reading the password from standard input (end it with Ctrl-D)")
		}
	}
	pw, err := io.ReadAll(io.LimitReader(r, maxPassword+1))
	if err != nil {
		return nil, fmt.Errorf("reading the password from %s: %w", from, err)
	}
	if len(pw) > maxPassword {
		return nil, usage(fmt.Errorf("the password from %s is longer than %d bytes", from, maxPassword))
	}
	pw = bytes.TrimSuffix(pw, []byte("\n"))
	pw = bytes.TrimSuffix(pw, []byte("\r"))
	if len(pw) == 0 {
		return nil, usage(errors.New("the password from " + from + " is empty"))
	}
	return pw, nil
}

func newCredentialsListCommand() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "list --file FILE",
		Short: "List the users of a credential file and their mechanisms, never a secret",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			creds, err := authn.ReadCredentials(file)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "USER\tMECHANISM\tITERATIONS")
			for _, u := range creds.Users() {
				for _, m := range creds.Mechanisms(u) {
					cred, _ := creds.Lookup(u, m)
					fmt.Fprintf(w, "%s\t%s\t%d\n", u, m, cred.Iterations)
				}
			}
			return w.Flush()
		},
	}
	c.Flags().StringVar(&file, "file", "", "the credential file")
	c.MarkFlagRequired("file")
	return c
}
