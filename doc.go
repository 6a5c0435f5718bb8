// Package koe holds what every part of koe shares and none of them owns:
// the domain types and the error kinds. It imports nothing of koe.
//
// The server itself is built from cmd/koe; docs/architecture.md says where
// each job lives.
package koe
