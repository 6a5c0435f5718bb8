package conversation

// NotifyAll sends one of koe's events to every open session that asked for
// them, whatever its character: news of what all characters share (the
// MCP servers' states).
func (h *Hub) NotifyAll(msg any) {
	for _, s := range h.openSessions() {
		s.Notify(msg)
	}
}
