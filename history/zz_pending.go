package history

// Placeholder until the history branch lands (deleted at merge).

import "errors"

func (s *Store) Page(confUID, historyUID string, before uint64, limit int) ([]Record, bool, error) {
	return nil, false, errors.New("not yet")
}

func (s *Store) Image(confUID, historyUID, ref string) (string, []byte, error) {
	return "", nil, errors.New("not yet")
}
