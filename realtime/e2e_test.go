package realtime_test

import (
	"testing"

	"koe/testkit/fakellm"
	"koe/testkit/koetest"
)

// rtKoe starts a koe speaking through the fake server's speech endpoint,
// whose model answers with respond.
func rtKoe(t *testing.T, respond func(fakellm.Request) fakellm.Reply) (addr string, llm *fakellm.Server) {
	t.Helper()
	llm = koetest.StartLLM(t, respond)
	cfg := koetest.WithFakeSpeech(koetest.Config(t, t.TempDir(), llm.URL()), llm)
	m := koetest.StartKoe(t, cfg)
	return m.Addr(), llm
}

func TestRealtimeTextTurnSmoke(t *testing.T) {
	addr, _ := rtKoe(t, func(fakellm.Request) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"Hello ", "there. ", "How are ", "you?"}}
	})
	c := rtDial(t, addr, "", nil)
	c.expect("session.created")
	c.expect("conversation.created")
	c.say("hi")
	c.until("response.done")
	t.Log(c.types())
	for _, e := range c.got {
		t.Logf("%s", e.raw[:min(len(e.raw), 300)])
	}
}
