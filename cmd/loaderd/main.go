// Command loaderd is gnnloader's daemon and tool: it serves sampled GNN
// mini-batches to PyTorch trainers over a Unix socket, and it generates,
// imports, verifies and benchmarks datasets.
//
// Every subcommand is a thin shell over the packages of the module; run
// `loaderd help` for the list and `loaderd CMD -h` for each one's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand.
type command struct {
	name    string
	summary string
	usage   string // argument synopsis
	example string
	run     func(ctx context.Context, env *env, args []string) error
}

// env is what every subcommand gets: output streams and the logger.
type env struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// usageError is a bad command line: reported with the usage, exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal cancels the work (the daemon drains and exits 0); a
	// second one, e.g. during a long checksum or generation that cannot stop
	// half-way, kills the process the default way.
	context.AfterFunc(ctx, stop)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				fs := c.flags(stderr, nil)
				fs.Usage()
				return 0
			}
		}
		printUsage(stdout)
		return 0
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(stdout, "loaderd", version)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "loaderd: unknown command %q\n\n", args[0])
		printUsage(stderr)
		return 2
	}
	e := &env{stdout: stdout, stderr: stderr, log: newLogger(stderr, "text", slog.LevelInfo)}
	err := c.run(ctx, e, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// Interrupted by a signal: cancellation is not an error, but the
		// work did not finish.
		fmt.Fprintf(stderr, "loaderd %s: interrupted\n", c.name)
		return 130
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "loaderd %s: %s\n", c.name, ue.msg)
		fmt.Fprintf(stderr, "usage: loaderd %s %s (see loaderd %s -h)\n", c.name, c.usage, c.name)
		return 2
	}
	fmt.Fprintf(stderr, "loaderd %s: %v\n", c.name, err)
	return 1
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, `loaderd feeds GNN training on GPUs: it samples mini-batches of a graph dataset
and serves them to PyTorch trainers over a Unix socket (shared memory on the
CPU, CUDA IPC buffers on GPUs).

usage: loaderd COMMAND [flags] [args]

commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, `
Run 'loaderd COMMAND -h' for a command's flags and an example.

quick start:
  loaderd import npz testdata/cora.npz --out /tmp/cora
  loaderd serve --dataset /tmp/cora     # trainers find it with no socket path given
`)
}

// flags makes the command's flag set with a usage text that includes the
// example; bind, if not nil, declares the flags.
func (c *command) flags(stderr io.Writer, bind func(fs *flag.FlagSet)) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if bind != nil {
		bind(fs)
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: loaderd %s %s\n\n%s\n", c.name, c.usage, c.summary)
		if hasFlags(fs) {
			fmt.Fprintf(stderr, "\nflags:\n")
			fs.PrintDefaults()
		}
		if c.example != "" {
			fmt.Fprintf(stderr, "\nexample:\n  %s\n", strings.ReplaceAll(strings.TrimSpace(c.example), "\n", "\n  "))
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parseInterspersed parses flags that may come before or after positional
// arguments (`loaderd import npz FILE --out DIR`).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
