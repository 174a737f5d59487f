package cmd

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is the release version, set at link time with
// -ldflags "-X github.com/inorder-proxy/inorder/cmd.Version=v1.2.3". When
// set it takes precedence over the module version in the build information.
var Version = ""

// buildInfo is what `inorder version` prints.
type buildInfo struct {
	Version  string // release or module version; "(devel)" for a source build
	Revision string // VCS revision; empty when the build recorded none
	Modified bool   // the work tree had uncommitted changes
	Go       string // Go toolchain version
	Platform string // GOOS/GOARCH the binary runs on
}

// readBuildInfo combines the link-time version with what the Go toolchain
// recorded in the binary (runtime/debug.ReadBuildInfo): the module version
// (set by go install module@version), and the VCS revision and modified
// flag (set when building inside a git checkout without -buildvcs=false).
func readBuildInfo(linked string, bi *debug.BuildInfo, ok bool) buildInfo {
	out := buildInfo{Version: linked, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !ok || bi == nil {
		if out.Version == "" {
			out.Version = "(unknown)"
		}
		return out
	}
	if bi.GoVersion != "" {
		out.Go = bi.GoVersion
	}
	if out.Version == "" {
		out.Version = bi.Main.Version
	}
	if out.Version == "" {
		out.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Revision = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}

// currentBuild is what this binary knows of its own build.
func currentBuild() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	return readBuildInfo(Version, bi, ok)
}

// revisionLabel is the revision as inorder_build_info carries it: the
// commit, "+dirty" when the tree had changes (Go's own mark in a version),
// or "unknown".
func (b buildInfo) revisionLabel() string {
	switch {
	case b.Revision == "":
		return "unknown"
	case b.Modified:
		return b.Revision + "+dirty"
	}
	return b.Revision
}

func (b buildInfo) write(w io.Writer) error {
	rev := "unknown: the build was not stamped (Go stamps it when it builds in a git clone, unless GOFLAGS has -buildvcs=false or the clone is a git worktree; go build -buildvcs=auto in a clone stamps it)"
	if b.Revision != "" {
		rev = b.Revision
		if b.Modified {
			rev += " (modified: built with uncommitted changes)"
		}
	}
	version := b.Version
	if version == "(devel)" {
		version += ", built from source"
	}
	_, err := fmt.Fprintf(w, "inorder\n  version:   %s\n  revision:  %s\n  go:        %s\n  platform:  %s\n",
		version, rev, b.Go, b.Platform)
	return err
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, source revision, Go version and platform",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return currentBuild().write(c.OutOrStdout())
		},
	}
}
