package app_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"koe/config"
	"koe/livechat"
	"koe/testkit/ircdtest"
)

// BenchmarkLiveChatFirstAudio measures chat-to-first-audio: from a
// viewer's message written to a real IRC server (ngircd, as Twitch would
// relay it) to the first audio frame of the live character's answer at a
// watcher (an OBS overlay's socket), with the fake LLM answering at once
// and its speech endpoint speaking. One message at a time, each after
// the previous answer has been spoken.
//
//	go test -run '^$' -bench LiveChatFirstAudio -benchtime 50x ./app
func BenchmarkLiveChatFirstAudio(b *testing.B) {
	k := startLiveKoe(b, func(c *config.Config) {
		c.LiveChat.MaxPerMinute = 1000
		c.LiveChat.MaxPerViewerPerMinute = 1000
	})
	viewer := ircdtest.NewChatter(b, k.irc.Plain, "viewer", "koe")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		viewer.Send(fmt.Sprintf("PRIVMSG #koe :quick question number %d", i))
		k.watchUntil("audio", "")
		lat = append(lat, time.Since(start))
		k.watchUntil("control", "conversation-chain-end")
		k.waitStatus("the answer spoken", func(st livechat.Status) bool { return !st.Running && st.Queued == 0 })
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}
