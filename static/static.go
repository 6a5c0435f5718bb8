// Package static holds koe's own web pages, embedded in the binary.
package static

import (
	"embed"
	"io/fs"
)

//go:embed web
var files embed.FS

// Pages is the tree served at /.
func Pages() fs.FS {
	sub, err := fs.Sub(files, "web")
	if err != nil {
		panic(err) // the embed directive guarantees "web" exists
	}
	return sub
}
