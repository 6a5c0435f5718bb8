//go:build !unix

package server

import "errors"

func openFileLimit() (soft, hard uint64, err error) {
	return 0, 0, errors.New("no open-file limit on this system")
}
