package app

import (
	"context"

	"koe/conversation"
	"koe/protocol"
	"koe/realtime"
	"koe/server"
)

// The hub as server consumes it. server declares the little it calls of
// each part (server.Sessions, server.Chats, server.Watchers); a Go method
// cannot return the narrower interface where the hub returns its own
// types, so these hand the hub's answers over as server's (a nil session
// stays a nil interface) and decide nothing.

// HubOptions returns o with what the hub serves filled in. Benchmarks
// that build a hub of their own, without the rest of koe, use it too.
func HubOptions(hub *conversation.Hub, o server.Options) server.Options {
	o.Sessions = hubSessions{hub}
	o.Chats = hubChats{hub}
	o.Attachments = hub
	o.Watchers = hubWatchers{hub.Watchers()}
	o.Realtime = hubRealtime{realtime.New(hub, o.Logger)}
	o.Explain = func(err error) server.Problem { return server.Problem(conversation.Explain(err)) }
	return o
}

type hubSessions struct{ hub *conversation.Hub }

func (h hubSessions) Open(ctx context.Context, out server.Sender, o server.SessionOptions) (server.Session, error) {
	s, err := h.hub.OpenClient(ctx, out, conversation.SessionOptions{ClientUID: o.ClientUID, KoeEvents: o.KoeEvents, Replaced: o.Replaced, Logger: o.Logger})
	if s == nil {
		return nil, err
	}
	return s, nil
}

func (h hubSessions) Find(clientUID string) server.SessionState {
	if s := h.hub.Session(clientUID); s != nil {
		return s
	}
	return nil
}

func (h hubSessions) List() []protocol.SessionInfo { return h.hub.Sessions() }

type hubChats struct{ hub *conversation.Hub }

func (h hubChats) OpenChat(ctx context.Context, req protocol.ChatRequest, out server.Sender) (server.Chat, error) {
	c, err := h.hub.OpenChat(ctx, req, out)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (h hubChats) StopHistory(ctx context.Context, historyUID string) (bool, error) {
	return h.hub.StopHistory(ctx, historyUID)
}

type hubWatchers struct{ *conversation.Watchers }

func (h hubWatchers) Watch(t protocol.WatchTarget, w server.Watcher, o server.WatchOptions) (func(), error) {
	return h.Watchers.Watch(t, w, conversation.WatchOptions{ClientUID: o.ClientUID, KoeEvents: o.KoeEvents})
}

type hubRealtime struct{ svc *realtime.Service }

func (h hubRealtime) OpenRealtime(ctx context.Context, out server.RealtimeWriter, o server.RealtimeOptions) server.RealtimeConn {
	c := h.svc.Open(ctx, out, realtime.Options{Model: o.Model, Beta: o.Beta, MaxItemBytes: o.MaxItemBytes, MaxItems: o.MaxItems, Logger: o.Logger})
	if c == nil {
		return nil
	}
	return c
}
