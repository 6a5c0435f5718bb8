package app_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"koe/protocol"
	"koe/testkit"
)

// TestSceneClientUIDNotTaken: a client asking /client-ws for a scene's
// client_uid is refused with a frame saying why; the scene's session
// stays the one under that client_uid (the sessions API, its watchers)
// and says its lines.
func TestSceneClientUIDNotTaken(t *testing.T) {
	k := startSceneKoe(t, nil)
	hold := k.gateOn("Today's topic")
	in := k.startScene(protocol.SceneRequest{Characters: []string{"koe_default", "mio"}, Topic: "tea", MaxRounds: 1})
	uid := in.Characters[0].ClientUID
	testkit.Eventually(t, "Koe's first line is asked", func() bool { return len(k.lineRequests()) == 1 })

	h := http.Header{"Authorization": {"Bearer " + sceneToken}}
	ws, resp, err := websocket.DefaultDialer.Dial("ws://"+k.addr+"/client-ws?client_uid="+uid, h)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	_ = resp.Body.Close()
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(guard))
	var first struct{ Type, Message string }
	if err := ws.ReadJSON(&first); err != nil || first.Type != protocol.TypeError || !strings.Contains(first.Message, "client_uid "+uid) {
		t.Fatalf("a client asking for the scene's client_uid got %+v (%v), want an error naming it", first, err)
	}
	var ce *websocket.CloseError
	if _, _, err := ws.ReadMessage(); !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
		t.Fatalf("after the refusal: %v, want the connection closed (1008)", err)
	}

	// The client_uid is still the scene's session.
	var sessions []protocol.SessionInfo
	if a := k.api(http.MethodGet, "/api/sessions", nil); a.status != http.StatusOK || json.Unmarshal(a.body, &sessions) != nil {
		t.Fatalf("GET /api/sessions: %d %s", a.status, a.body)
	}
	found := false
	for _, s := range sessions {
		if s.ClientUID == uid {
			found = s.HistoryUID == in.Characters[0].HistoryUID
		}
	}
	if !found {
		t.Errorf("GET /api/sessions %+v: %s is not the scene's session", sessions, uid)
	}
	w := k.watch("watch=" + uid)
	hold.release()
	var said []string
	for _, f := range w.until("control", "conversation-chain-end") {
		if f.Type == "audio" && f.DisplayText != nil {
			said = append(said, f.DisplayText.Text)
		}
	}
	if strings.Join(said, " ") != "Koe line 1." {
		t.Errorf("the scene's watcher saw %q, want Koe's line", said)
	}
	end := k.awaitScene("the scene ends", in.ID, func(in protocol.SceneInfo) bool { return in.State == protocol.SceneEnded })
	if got := sceneTexts(end); len(got) != 3 || end.EndReason != protocol.SceneEndRounds {
		t.Errorf("scene %q, ended %q; want both lines said", got, end.EndReason)
	}
}
