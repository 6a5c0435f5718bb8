package server_test

import (
	"context"
	"testing"

	"koe/protocol"
	"koe/server"
)

// fakeScenes answers each call with the scene it was asked about, or the
// failure err names.
type fakeScenes struct {
	started []protocol.SceneRequest
	err     error
}

func (f *fakeScenes) Start(_ context.Context, req protocol.SceneRequest) (protocol.SceneInfo, error) {
	if f.err != nil {
		return protocol.SceneInfo{}, f.err
	}
	f.started = append(f.started, req)
	return protocol.SceneInfo{ID: "s1", State: protocol.SceneRunning, Topic: req.Topic}, nil
}

func (f *fakeScenes) List() protocol.SceneList {
	return protocol.SceneList{Scenes: []protocol.SceneInfo{{ID: "s1"}}}
}

func (f *fakeScenes) scene(id, state string) (protocol.SceneInfo, error) {
	if f.err != nil {
		return protocol.SceneInfo{}, f.err
	}
	return protocol.SceneInfo{ID: id, State: state}, nil
}

func (f *fakeScenes) Scene(id string) (protocol.SceneInfo, error) {
	return f.scene(id, protocol.SceneRunning)
}
func (f *fakeScenes) Stop(id string) (protocol.SceneInfo, error) {
	return f.scene(id, protocol.SceneEnded)
}
func (f *fakeScenes) Pause(id string) (protocol.SceneInfo, error) {
	return f.scene(id, protocol.ScenePaused)
}
func (f *fakeScenes) Resume(id string) (protocol.SceneInfo, error) {
	return f.scene(id, protocol.SceneRunning)
}
func (f *fakeScenes) Skip(id string) (bool, protocol.SceneInfo, error) {
	in, err := f.scene(id, protocol.SceneRunning)
	return err == nil, in, err
}

// The scenes' routes: 404 without scenes, the request handed over as
// sent, each command's answer, and each kind of failure's status.
func TestRoutesScenes(t *testing.T) {
	off := startFake(t)
	off.do(t, "GET", "/api/scenes", nil).want(t, "scenes off", 404, "scenes are not served")

	sc := &fakeScenes{}
	k := startFake(t, func(o *server.Options) { o.Scenes = sc })
	var in protocol.SceneInfo
	a := k.do(t, "POST", "/api/scenes", map[string]any{"characters": []string{"a", "b"}, "topic": "tea", "max_rounds": 3, "duration": "5m"})
	a.json(t, &in)
	if a.status != 201 || in.ID != "s1" || len(sc.started) != 1 || sc.started[0].MaxRounds != 3 || sc.started[0].Duration != "5m" {
		t.Fatalf("start: %d %s, handed %+v", a.status, a.body, sc.started)
	}
	k.do(t, "POST", "/api/scenes", []byte(`{"topic":`)).want(t, "broken JSON", 400, "invalid JSON body")
	k.do(t, "POST", "/api/scenes", []byte(`{}`), "text/plain").want(t, "not JSON", 415, "application/json")
	for cmd, state := range map[string]string{"stop": protocol.SceneEnded, "pause": protocol.ScenePaused, "resume": protocol.SceneRunning} {
		k.do(t, "POST", "/api/scenes/s1/"+cmd, nil).json(t, &in)
		if in.State != state {
			t.Errorf("%s: state %q, want %q", cmd, in.State, state)
		}
	}
	var skip struct {
		Skipped bool               `json:"skipped"`
		Scene   protocol.SceneInfo `json:"scene"`
	}
	k.do(t, "POST", "/api/scenes/s1/skip", nil).json(t, &skip)
	if !skip.Skipped || skip.Scene.ID != "s1" {
		t.Errorf("skip: %+v", skip)
	}
	for _, c := range []struct {
		err    error
		status int
	}{{errInvalid, 400}, {errNotFound, 404}, {errConflict, 409}, {errInternal, 500}} {
		sc.err = c.err
		k.do(t, "POST", "/api/scenes", map[string]any{"topic": "x"}).want(t, c.err.Error(), c.status, "")
		k.do(t, "GET", "/api/scenes/s1", nil).want(t, c.err.Error(), c.status, "")
	}
}
