package conversation

// Hooks for the watcher tests of package conversation_test.

// SetWatchLooked makes Watch run f between its look for the watched
// session and the watcher's listing, until the returned func is called.
// Tests using it must not run in parallel.
func SetWatchLooked(f func()) (restore func()) {
	watchLooked = f
	return func() { watchLooked = nil }
}
