package server_test

import (
	"net/url"
	"slices"
	"testing"

	"github.com/gorilla/websocket"

	"koe/config"
	"koe/testkit/redistest"
)

// A watcher that joins mid-reply on another instance than the speaker's
// starts, as on the speaker's, from the chain's start and the piece on
// air: the first there gets the state from the speaker's instance, later
// ones from what their own instance mirrored, and none gets a frame twice.
func TestWatcherJoinsMidReplyAcrossInstances(t *testing.T) {
	// Greeted from A, which has then sent B what is on air; the
	// watcher of the character, joining next, gets it from B's mirror
	// (A sends it again when it hears of the new follow; B drops it).
	t.Run("client first", func(t *testing.T) { xjoinTurn(t, true) })
	// Its client talking through A, the client's watcher is greeted by
	// B from what B mirrors, before the reply on air; A's greeting
	// follows.
	t.Run("character first", func(t *testing.T) { xjoinTurn(t, false) })
}

func xjoinTurn(t *testing.T, clientFirst bool) {
	srv := redistest.Start(t)
	pieces := []string{"First comes the overture of our evening.", "Second, the weather along the coast.",
		"Third, a song about the old lighthouse.", "Fourth, the letters our listeners sent."}
	llm, join := tsHeldReply(t, pieces)
	config := func() config.Config {
		return tsHeldOpen(withFakeSpeech(withRedis(testConfig(t, t.TempDir(), llm.URL()), srv), llm))
	}
	cfgA := config()
	a, b := startKoe(t, cfgA), startKoe(t, config())
	confQuery := "watch_conf=" + url.QueryEscape(cfgA.Character.ConfUID)

	speaker := dialURL(t, websocket.DefaultDialer, "ws://"+a.Addr()+"/client-ws?client_uid=xjoin", nil)
	speaker.until(isControl("start-mic"))
	speaker.send(msg{"type": "text-input", "text": "What is on tonight?", "images": []any{}})
	heard := 0
	frames := speaker.until(func(f msg) bool {
		if f.typ() == "audio" {
			heard++
		}
		return heard == 2
	})
	var byClient, byConf *client
	var seenConf []string
	if clientFirst {
		byClient = dialWatcher(t, b.Addr(), "watch=xjoin", false)
		byClient.greeted()
		byConf = dialWatcher(t, b.Addr(), confQuery, false)
		byConf.greeted()
	} else {
		byConf = dialWatcher(t, b.Addr(), confQuery, false)
		byConf.greeted()
		// B mirrors the reply once A has sent it what is on air, which
		// the watcher of the character gets then.
		seenConf = describeFrames(byConf.until(isControl("conversation-chain-start")))
		byClient = dialWatcher(t, b.Addr(), "watch=xjoin", false)
		if g := byClient.greeted(); g.str("conf_uid") != cfgA.Character.ConfUID {
			t.Fatalf("the client's watcher on B was greeted with %v", g)
		}
	}
	join()
	frames, later := tsFinishWithLateWatcher(t, speaker, b.Addr(), confQuery, frames)

	all := watched(frames, false)
	for name, w := range map[string]*client{"by character": byConf, "by client": byClient, "later": later} {
		got := describeFrames(w.until(isControl("conversation-chain-end")))
		// A second greeting (the speaker's instance's) is no frame of
		// the turn.
		got = slices.DeleteFunc(got, func(f string) bool {
			return f == "group-update" || f == "set-model-and-conf" || f == "full-text:Connection established"
		})
		if w == byConf {
			got = append(seenConf, got...)
		}
		if err := tsJoinedMidway(all, got); err != nil {
			t.Errorf("the watcher %s on B saw %q: %v\nthe speaker's turn: %q", name, tsBrief(got), err, tsBrief(all))
			continue
		}
		t.Logf("the watcher %s on B started from %q", name, tsBrief(got[1:2]))
		if rest := tsFlush(w); len(rest) > 0 {
			t.Errorf("the watcher %s got %q after the chain's end", name, types(rest))
		}
	}
}
