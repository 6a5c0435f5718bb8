package conversation

// Hooks for the group tests of package conversation_test.

// MarkLeaving sets s as leaveGroup does first, under the lock invitations
// take: the moment before it is taken out of its group.
func MarkLeaving(s *Session) {
	s.hub.groups.mu.Lock()
	s.leaving.Store(true)
	s.hub.groups.mu.Unlock()
}

// HeldLines is how many lines tr holds in memory.
func HeldLines(tr *Transcript) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.lines)
}
