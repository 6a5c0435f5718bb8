package server_test

import (
	"strings"
	"testing"

	"koe/server"
)

// server.realtime_max_items is validated with a message naming it and its
// range; the default is within it.
func TestRealtimeMaxItemsValidated(t *testing.T) {
	for _, n := range []int{0, 15, 1<<16 + 1} {
		c := server.DefaultConfig()
		c.RealtimeMaxItems = n
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "server.realtime_max_items") {
			t.Errorf("%d: %v, want an error naming server.realtime_max_items", n, err)
		}
	}
	if c := server.DefaultConfig(); c.RealtimeMaxItems != 1024 || c.Validate() != nil {
		t.Errorf("default %d: %v", c.RealtimeMaxItems, c.Validate())
	}
}
