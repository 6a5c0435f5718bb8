package server

// onOwnStack runs fn on a goroutine of its own and waits for its result.
//
// A connection's goroutine lives as long as the connection, and Go keeps
// the stack it grew to: opening a session and greeting it (building the
// character's agent, encoding the greeting's frames) run deeper than the
// read loop that follows, and left every idle connection with an 8 KiB
// stack where the read loop needs 4 KiB. On a goroutine of their own,
// their stack goes when they end.
func onOwnStack[T any](fn func() T) T {
	done := make(chan T, 1)
	go func() { done <- fn() }()
	return <-done
}
