package tools

import (
	"path/filepath"
	"slices"
)

// Folders are the folders the character's tools may read: read_file's
// tools.files.root when read_file is enabled, as an absolute path. The
// MCP servers the character enables are told of them as roots.
func (c Config) Folders() []string {
	if !slices.Contains(c.Enabled, readFileName) || c.Files.Root == "" {
		return nil
	}
	root, err := filepath.Abs(c.Files.Root)
	if err != nil {
		return nil // read_file refuses the same root, with the reason
	}
	return []string{root}
}
