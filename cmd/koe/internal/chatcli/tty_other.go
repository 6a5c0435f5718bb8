//go:build !linux

package chatcli

import "os"

// isTerminal guesses whether f is a terminal: a character device. It takes
// /dev/null for one, which only costs a spinner nobody sees.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
