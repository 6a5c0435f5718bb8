package server_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/coord"
	"koe/testkit/redistest"
)

// BenchmarkWatcherFanOut is BenchmarkFirstAudioOverhead for a speaker
// followed by n watchers: speaker-p50-ms is the speaker's own latency to
// its first audio (compare n=0), watcher-p50-ms how long after the
// speaker each watcher got that audio.
//
//	go test ./server -run '^$' -bench WatcherFanOut -benchtime 200x
func BenchmarkWatcherFanOut(b *testing.B) {
	for _, n := range []int{0, 1, 50} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			fl := startFlushLLM(b)
			addr := startBenchServer(b, fl.llm.URL(), newInstantEngine(b))
			firsts, ends := make(chan time.Time, n), make(chan struct{}, n)
			for range n {
				w := dialBenchURL(b, "ws://"+addr+"/client-ws?watch=desk")
				go watchFirstAudio(w, firsts, ends)
			}
			c := dialBenchURL(b, "ws://"+addr+"/client-ws?client_uid=desk")
			for range 5 {
				readBench(b, c)
			}
			speaker := make([]time.Duration, 0, b.N)
			lag := make([]time.Duration, 0, b.N*n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, at := fl.turn(b, c)
				speaker = append(speaker, d)
				for range n {
					select {
					case w := <-firsts:
						lag = append(lag, w.Sub(at))
					case <-time.After(30 * time.Second): // a hang guard
						b.Fatal("a watcher got no audio")
					}
				}
				// Every watcher has the whole turn before the next begins,
				// so that each turn's first audio is measured alone.
				for range n {
					select {
					case <-ends:
					case <-time.After(30 * time.Second):
						b.Fatal("a watcher did not see the turn end")
					}
				}
			}
			b.StopTimer()
			reportQuantiles(b, "speaker-", speaker)
			reportQuantiles(b, "watcher-", lag)
			b.ReportMetric(0, "ns/op")
		})
	}
}

// dialBenchURL opens a WebSocket without reading anything.
func dialBenchURL(b *testing.B, url string) *websocket.Conn {
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// watchFirstAudio reads a watcher until its connection closes and sends
// when the first audio of each turn arrived, and when the turn ended. It
// looks at the frames' beginnings only: decoding 50 copies of every audio
// message would measure the benchmark's own clients, which share koe's
// cores.
func watchFirstAudio(w *websocket.Conn, firsts chan<- time.Time, ends chan<- struct{}) {
	chainStart := []byte(`{"type":"control","text":"conversation-chain-start"}`)
	chainEnd := []byte(`{"type":"control","text":"conversation-chain-end"}`)
	audio := []byte(`{"type":"audio",`)
	seen := true
	for {
		_, data, err := w.ReadMessage()
		at := time.Now()
		if err != nil {
			return
		}
		switch {
		case bytes.Equal(data, chainStart):
			seen = false
		case bytes.HasPrefix(data, audio) && !seen:
			seen = true
			firsts <- at
		case bytes.Equal(data, chainEnd):
			ends <- struct{}{}
		}
	}
}

// BenchmarkWatcherAcrossInstances: one watcher of a speaker, on the
// speaker's instance or on another instance through Redis (redis-server
// on loopback): watcher-p50-ms is how long after the speaker the watcher
// got each turn's first audio.
//
//	go test ./server -run '^$' -bench WatcherAcrossInstances -benchtime 200x
func BenchmarkWatcherAcrossInstances(b *testing.B) {
	for _, remote := range []bool{false, true} {
		b.Run(map[bool]string{false: "same-instance", true: "other-instance"}[remote], func(b *testing.B) {
			srv := redistest.Start(b)
			relay := func() *coord.WatchRelay {
				c := coord.DefaultConfig()
				c.Backend, c.RedisURL = coord.Redis, srv.URL()
				r, err := coord.NewWatchRelay(context.Background(), c, coord.RelayOptions{})
				if err != nil {
					b.Fatal(err)
				}
				return r
			}
			fl := startFlushLLM(b)
			addr := startBenchServerRelay(b, fl.llm.URL(), newInstantEngine(b), relay())
			watchAddr := addr
			if remote {
				watchAddr = startBenchServerRelay(b, fl.llm.URL(), newInstantEngine(b), relay())
			}
			c := dialBenchURL(b, "ws://"+addr+"/client-ws?client_uid=desk")
			for range 5 {
				readBench(b, c)
			}
			// Greeted once the speaker's instance knows of the watcher.
			w := dialBenchURL(b, "ws://"+watchAddr+"/client-ws?watch=desk")
			for {
				_, data, err := w.ReadMessage()
				if err != nil {
					b.Fatal(err)
				}
				if bytes.Contains(data, []byte(`"type":"set-model-and-conf"`)) {
					break
				}
			}
			firsts, ends := make(chan time.Time, 1), make(chan struct{}, 1)
			go watchFirstAudio(w, firsts, ends)
			lag := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, at := fl.turn(b, c)
				select {
				case got := <-firsts:
					lag = append(lag, got.Sub(at))
				case <-time.After(30 * time.Second): // a hang guard
					b.Fatal("the watcher got no audio")
				}
				select {
				case <-ends:
				case <-time.After(30 * time.Second):
					b.Fatal("the watcher did not see the turn end")
				}
			}
			b.StopTimer()
			reportQuantiles(b, "watcher-", lag)
			b.ReportMetric(0, "ns/op")
		})
	}
}
