package config

// Placeholder until the config branch lands (deleted at merge).
func (c *Characters) Has(confUID string) bool {
	if confUID == c.cfg.Character.ConfUID {
		return true
	}
	names, _ := c.files()
	for _, n := range names {
		if ch, err := c.Load(n); err == nil && ch.ConfUID == confUID {
			return true
		}
	}
	return false
}
