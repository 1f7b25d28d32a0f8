// Package cputime reads the process's CPU time, for benchmarks that report
// CPU per batch beside wall time (a busy machine shows in one, extra work
// in both). It has no state; safe for concurrent use.
package cputime
