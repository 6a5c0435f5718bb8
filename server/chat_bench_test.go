package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"koe/protocol"
	"koe/testkit/fakellm"
)

// BenchmarkChatFirstToken measures how long after the LLM sends its first
// token the chat API's client reads it as a token event, with one stream
// and with 500 at once. The fake LLM answers at 30 tokens/s and stamps the
// moment it writes each reply's first chunk; ms-p50 and ms-p99 are over
// every stream of every iteration.
//
//	go test ./server -run '^$' -bench ChatFirstToken -benchtime 5x
func BenchmarkChatFirstToken(b *testing.B) {
	for _, n := range []int{1, 500} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			var mu sync.Mutex
			sent := map[string]time.Time{} // by the stream's message
			llm, err := fakellm.Start("127.0.0.1:0", func(r fakellm.Request) fakellm.Reply {
				msg := r.Messages[len(r.Messages)-1].Content
				key := msg[strings.LastIndex(msg, "\n")+1:]
				return fakellm.Reply{Tokens: fakellm.Words(benchReply), Interval: time.Second / 30, BeforeChunk: func(i int) {
					if i == 0 {
						mu.Lock()
						sent[key] = time.Now()
						mu.Unlock()
					}
				}}
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = llm.Close() })
			llm.SetRecording(false)
			addr := startBenchServer(b, llm.URL(), nil)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
			var delays []time.Duration
			round := 0
			for b.Loop() {
				round++
				got := make([]time.Duration, n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						key := fmt.Sprintf("stream %d of round %d", i, round)
						first := streamFirstToken(b, client, addr, key)
						mu.Lock()
						got[i] = first.Sub(sent[key])
						mu.Unlock()
					}()
				}
				wg.Wait()
				delays = append(delays, got...)
			}
			reportPercentiles(b, delays)
		})
	}
}

// streamFirstToken runs one chat API turn and returns when its first token
// event was read; it reads the stream to its end.
func streamFirstToken(b *testing.B, client *http.Client, addr, message string) time.Time {
	body, _ := json.Marshal(protocol.ChatRequest{Message: message})
	resp, err := client.Post("http://"+addr+"/api/chat/stream", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Error(err)
		return time.Time{}
	}
	defer resp.Body.Close()
	var first time.Time
	r := bufio.NewReader(resp.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Errorf("stream ended without end: %v", err)
			return first
		}
		if first.IsZero() && strings.HasPrefix(line, `data: {"type":"token"`) {
			first = time.Now()
		}
		if strings.Contains(line, `"type":"end"`) {
			return first
		}
	}
}

// BenchmarkChatStop measures a stop request: from sending POST
// /api/chat/{history}/stop to the LLM seeing its stream closed.
func BenchmarkChatStop(b *testing.B) {
	llm, err := fakellm.Start("127.0.0.1:0", fakellm.Script(fakellm.Reply{Tokens: fakellm.Words(strings.Repeat("word ", 1000)), Interval: 20 * time.Millisecond}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = llm.Close() })
	llm.SetRecording(false)
	addr := startBenchServer(b, llm.URL(), nil)
	var delays []time.Duration
	for b.Loop() {
		body, _ := json.Marshal(protocol.ChatRequest{Message: "talk"})
		resp, err := http.Post("http://"+addr+"/api/chat/stream", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		uid := ""
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			var ev struct {
				Type    string
				Content json.RawMessage
			}
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || json.Unmarshal([]byte(data), &ev) != nil {
				continue
			}
			if ev.Type == "message" && uid == "" {
				var m protocol.ChatMessage
				_ = json.Unmarshal(ev.Content, &m)
				uid = m.AdditionalKwargs.HistoryUID
			}
			if ev.Type == "token" {
				break
			}
		}
		start := time.Now()
		stop, err := http.Post("http://"+addr+"/api/chat/"+uid+"/stop", "application/json", nil)
		if err != nil {
			b.Fatal(err)
		}
		<-llm.Disconnects()
		delays = append(delays, time.Since(start))
		stop.Body.Close()
		resp.Body.Close()
	}
	reportPercentiles(b, delays)
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	at := func(p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "ms-p50")
	b.ReportMetric(at(0.99), "ms-p99")
}
