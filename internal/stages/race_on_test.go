//go:build race

package stages

// raceEnabled: the race detector's own work shows up as runtime time.
const raceEnabled = true
