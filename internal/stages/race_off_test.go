//go:build !race

package stages

const raceEnabled = false
