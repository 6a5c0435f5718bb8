//go:build race

package agent

// RaceEnabled reports whether the tests run under the race detector,
// which makes tokenizing about ten times slower: the heaviest tests do
// less then, and timings are not worth logging.
const RaceEnabled = true
