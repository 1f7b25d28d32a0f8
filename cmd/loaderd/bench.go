package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// benchmark is one `loaderd bench NAME` subcommand.
type benchmark struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

var benchmarks = map[string]*benchmark{}

// registerBench adds `loaderd bench NAME`.
func registerBench(name, summary string, run func(ctx context.Context, e *env, args []string) error) {
	benchmarks[name] = &benchmark{summary: summary, run: run}
}

func init() {
	register(&command{
		name:    "bench",
		summary: "run a benchmark: " + "sample, serve, gather (GPU), ... (loaderd bench -h lists them)",
		usage:   "NAME [flags]",
		example: "loaderd bench sample --dataset synthetic:papers100M:0.01:1\nloaderd bench serve --trainers 2",
		run:     runBench,
	})
}

func runBench(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		names := make([]string, 0, len(benchmarks))
		for n := range benchmarks {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(e.stderr, "usage: loaderd bench NAME [flags]\n\nbenchmarks:\n")
		for _, n := range names {
			fmt.Fprintf(e.stderr, "  %-8s %s\n", n, benchmarks[n].summary)
		}
		fmt.Fprintf(e.stderr, "\nRun 'loaderd bench NAME -h' for its flags.\n")
		if len(args) == 0 {
			return usageError{"which benchmark?"}
		}
		return nil
	}
	b, ok := benchmarks[args[0]]
	if !ok {
		return usageError{fmt.Sprintf("unknown benchmark %q", args[0])}
	}
	return b.run(ctx, e, args[1:])
}

// benchFlags makes the flag set of `loaderd bench NAME`.
func benchFlags(e *env, name, example string, bind func(fs *flag.FlagSet)) *flag.FlagSet {
	c := &command{name: "bench " + name, summary: benchmarks[name].summary, usage: "[flags]", example: example}
	return c.flags(e.stderr, bind)
}

func parseFanouts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || (v < 1 && v != -1) {
			return nil, fmt.Errorf("bad fanout %q (want positive numbers or -1 for all neighbours)", f)
		}
		out = append(out, v)
	}
	return out, nil
}
