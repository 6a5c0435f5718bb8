//go:build !unix

package server

import "net"

// watchPeer cannot see a peer leave here; failed writes tell instead.
func watchPeer(net.Conn) (gone <-chan struct{}, stop func()) { return make(chan struct{}), func() {} }
