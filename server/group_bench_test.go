package server_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkGroupReply is what one character's reply costs in a group of n
// clients (n = 1: a client alone, an ordinary turn), every member playing
// the part of the OLV client: ns/op and cpu-µs/op are per reply (a
// message in a group of n makes n replies), the process's CPU with the
// fake LLM and the clients included; first-audio is from the message to
// the first audio frame on the member who did not send it (the sender,
// alone).
//
//	go test ./server -run '^$' -bench GroupReply -benchtime 200x
func BenchmarkGroupReply(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("members-%d", n), func(b *testing.B) {
			llm := startBenchLLM(b)
			addr := startBenchServer(b, llm.URL(), nil)
			members := make([]*websocket.Conn, n)
			uids := make([]string, n)
			for i := range members {
				c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/client-ws", nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = c.Close() })
				for range 5 {
					m, _ := readBench(b, c)
					if m.typ() == "set-model-and-conf" {
						uids[i] = m.str("client_uid")
					}
				}
				members[i] = c
			}
			for i := 1; i < n; i++ {
				invite, _ := json.Marshal(msg{"type": "add-client-to-group", "invitee_uid": uids[i]})
				if err := members[0].WriteMessage(websocket.TextMessage, invite); err != nil {
					b.Fatal(err)
				}
				// Every member hears of it: the owner's result comes
				// after its update would, so read the owner's result and
				// let each member's frames be read by the rounds below.
				for {
					m, _ := readBench(b, members[0])
					if m.typ() == "group-operation-result" {
						break
					}
				}
			}
			listener := members[len(members)-1]
			var firsts []time.Duration
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				sent := time.Now()
				if err := members[0].WriteMessage(websocket.TextMessage, []byte(`{"type":"text-input","text":"Can you help me plan my week?"}`)); err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				for _, c := range members {
					wg.Add(1)
					go func() {
						defer wg.Done()
						first := true
						for chains := 0; chains < n; {
							m, at := readBench(b, c)
							switch {
							case m.typ() == "audio" && first && c == listener:
								first = false
								firsts = append(firsts, at.Sub(sent))
							case m.typ() == "backend-synth-complete":
								_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"frontend-playback-complete"}`))
							case isControl("conversation-chain-end")(m):
								chains++
							}
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/reply")
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N*n), "cpu-µs/reply")
			if len(firsts) > 0 {
				var sum time.Duration
				for _, f := range firsts {
					sum += f
				}
				b.ReportMetric(float64(sum.Microseconds())/float64(len(firsts))/1000, "first-audio-ms")
			}
		})
	}
}
