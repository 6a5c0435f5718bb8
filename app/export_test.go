package app

// CloseStore closes the history database under a running koe, as a failed
// disk or a database gone away would leave it: tests check what /readyz
// says then. Close still closes everything else afterwards.
func (m *Main) CloseStore() error { return m.store.Close() }
