package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/gofiber/contrib/websocket"
	"github.com/google/uuid"

	"koe/asr"
	"koe/conversation"
	"koe/history"
	"koe/protocol"
)

// session ties one WebSocket connection to one conversation.
type session struct {
	srv       *Server
	conn      *conn
	conv      *conversation.Session
	ctx       context.Context
	clientUID string
	rawRate   int // sample rate of binary PCM frames (raw-audio-config)
}

func (s *Server) handleWS(c *websocket.Conn) {
	// Registered under the lock that Shutdown takes before it waits: a
	// WaitGroup must not grow once Wait has begun.
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.conns.Add(1)
	s.mu.Unlock()
	defer s.conns.Done()
	s.sessions.Add(1)
	defer s.sessions.Add(-1)

	clientUID := uuid.NewString()
	log := s.log.With("client_uid", clientUID)
	ctx, cancel := context.WithCancel(s.base)
	defer cancel()

	cn := newConn(c.Conn, s.cfg, log)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		cn.writePump(ctx)
	}()

	deps := conversation.Deps{
		Config:      s.opts.Conversation,
		Store:       s.opts.Store,
		NewLLM:      s.opts.NewLLM,
		NewTTS:      s.opts.NewTTS,
		SpeechSlots: s.slots,
		ASR:         s.opts.ASR,
		ASRErr:      s.opts.ASRErr,
		ASRSlots:    s.asrSlots,
		Logger:      log,
	}
	ss := &session{
		srv:       s,
		conn:      cn,
		ctx:       ctx,
		clientUID: clientUID,
		rawRate:   asr.SampleRate,
		conv:      conversation.NewSession(ctx, deps, s.opts.Characters.Default(), cn),
	}
	log.Info("client connected", "ip", c.IP())
	s.register(ss)
	defer s.unregister(ss)
	ss.greet()

	err := cn.readPump(ss.dispatch, ss.dispatchAudio, ss.sendError)
	log.Info("client disconnected", "reason", err)

	// Stop the turn before the writer so it can still persist; its frames
	// are dropped by then anyway.
	cancel()
	ss.conv.Close()
	cn.close(1000, "")
	<-writerDone
}

// greet sends the OLV connect sequence, in order.
func (ss *session) greet() {
	group := protocol.GroupUpdate{Type: protocol.TypeGroupUpdate, Members: []string{}}
	ss.send(group)
	ss.send(protocol.FullText(protocol.ConnectionEstablished))
	ss.send(ss.modelAndConf())
	ss.send(group)
	ss.send(protocol.Control(protocol.ControlStartMic))
}

func (ss *session) modelAndConf() protocol.SetModelAndConf {
	ch := ss.conv.Character()
	return protocol.SetModelAndConf{
		Type:      protocol.TypeSetModelAndConf,
		ModelInfo: ch.ModelInfo,
		ConfName:  ch.ConfName,
		ConfUID:   ch.ConfUID,
		ClientUID: ss.clientUID,
	}
}

func (ss *session) send(msg any) {
	if err := ss.conn.Send(ss.ctx, msg); err != nil {
		ss.conn.log.Debug("message not queued", "err", err)
	}
}

func (ss *session) sendError(message string) {
	ss.send(protocol.NewError(message))
}

// dispatch handles one client message. Handlers return quickly: turns run
// in their own goroutine, and stopping one waits only for it to wind down.
func (ss *session) dispatch(data []byte) {
	var in protocol.Inbound
	ss.conn.log.Debug("received", "bytes", len(data), "head", string(data[:min(len(data), 80)]))
	if err := json.Unmarshal(data, &in); err != nil {
		ss.sendError("invalid message: " + err.Error())
		return
	}
	if in.Type == "" {
		ss.sendError(`invalid message: it has no "type"`)
		return
	}
	if err := ss.handle(in); err != nil {
		ss.sendError(fmt.Sprintf("%s: %s", in.Type, userMessage(err)))
	}
}

func (ss *session) handle(in protocol.Inbound) error {
	conv := ss.conv
	switch in.Type {
	case protocol.TypeTextInput:
		return conv.StartText(in.Text, in.Images)
	case protocol.TypeInterruptSignal:
		conv.Interrupt(in.Text)
	case protocol.TypeFrontendPlaybackComplete:
		conv.PlaybackComplete()
	case protocol.TypeHeartbeat:
		ss.send(protocol.Simple{Type: protocol.TypeHeartbeatAck})
	case protocol.TypeFetchHistoryList:
		list, err := conv.HistoryList()
		if err != nil {
			return err
		}
		ss.send(protocol.HistoryList{Type: protocol.TypeHistoryList, Histories: list})
	case protocol.TypeFetchAndSetHistory:
		msgs, err := conv.SetHistory(in.HistoryUID)
		if err != nil {
			return err
		}
		ss.send(protocol.HistoryData{Type: protocol.TypeHistoryData, Messages: msgs})
		ss.send(conv.MemoryState())
	case protocol.TypeCreateNewHistory:
		uid, err := conv.NewHistory()
		if err != nil {
			return err
		}
		ss.send(protocol.NewHistoryCreated{Type: protocol.TypeNewHistoryCreated, HistoryUID: uid})
	case protocol.TypeDeleteHistory:
		err := conv.DeleteHistory(in.HistoryUID)
		if err != nil && !errors.Is(err, history.ErrNotFound) {
			return err
		}
		ss.send(protocol.HistoryDeleted{Type: protocol.TypeHistoryDeleted, Success: err == nil, HistoryUID: in.HistoryUID})
	case protocol.TypeFetchConfigs:
		list, err := ss.srv.opts.Characters.List()
		if err != nil {
			return err
		}
		ss.send(protocol.ConfigFiles{Type: protocol.TypeConfigFiles, Configs: list})
	case protocol.TypeSwitchConfig:
		ch, err := ss.srv.opts.Characters.Load(in.File)
		if err != nil {
			return err
		}
		conv.SwitchCharacter(ch)
		ss.send(ss.modelAndConf())
		ss.send(protocol.ConfigSwitched{Type: protocol.TypeConfigSwitched, Message: "Switched to config: " + ch.ConfName})
	case protocol.TypeFetchBackgrounds:
		ss.send(protocol.BackgroundFiles{Type: protocol.TypeBackgroundFiles, Files: ss.srv.backgrounds()})
	case protocol.TypeRequestInitConfig:
		ss.send(ss.modelAndConf())
	case protocol.TypeRequestGroupInfo:
		ss.send(protocol.GroupUpdate{Type: protocol.TypeGroupUpdate, Members: []string{}})
	case protocol.TypeAddClientToGroup, protocol.TypeRemoveClientFromGroup:
		ss.send(protocol.GroupOperationResult{Type: protocol.TypeGroupOperationResult, Message: "group chat is not supported by this koe server yet"})
	case protocol.TypeFetchMemoryState:
		ss.send(conv.MemoryState())
	case protocol.TypeSetCompressionRate:
		if in.Rate == nil {
			return errors.New(`"rate" is missing`)
		}
		if err := conv.SetCompressionRate(*in.Rate); err != nil {
			return err
		}
		ss.send(conv.MemoryState())
	case protocol.TypeFetchSystemPrompt, protocol.TypeFetchReminder:
		return ss.sendPrompt(promptName(in.Type))
	case protocol.TypeSetSystemPrompt, protocol.TypeSetReminder:
		text := in.Prompt
		if in.Type == protocol.TypeSetReminder {
			text = in.Reminder
		}
		if text == nil {
			return errors.New(`the new text is missing ("prompt" or "reminder"; "" restores the default)`)
		}
		if err := conv.SetPromptText(promptName(in.Type), *text); err != nil {
			return err
		}
		ss.srv.applyPrompts(conv.Character().ConfUID)
		return ss.sendPrompt(promptName(in.Type))
	case protocol.TypeFetchContext:
		rep, err := conv.LastContext()
		if err != nil {
			return err
		}
		ss.send(protocol.Context{Type: protocol.TypeContext, ContextReport: rep})
	case protocol.TypeMicAudioData:
		return conv.AppendMic(in.Audio)
	case protocol.TypeMicAudioEnd:
		return conv.EndMic(in.Images)
	case protocol.TypeRawAudioData:
		rate := ss.rawRate
		if in.SampleRate != 0 {
			rate = in.SampleRate
		}
		pcm, err := asr.FloatsToPCM16(in.Audio)
		if err != nil {
			return err
		}
		return conv.FeedRaw(pcm, rate)
	case protocol.TypeRawAudioConfig:
		if in.SampleRate < 8000 || in.SampleRate > 192000 {
			return fmt.Errorf("sample_rate %d is not between 8000 and 192000", in.SampleRate)
		}
		ss.rawRate = in.SampleRate
		conv.ResetRaw()
	case protocol.TypeAISpeakSignal:
		return conv.Speak(in.IdleTime, in.Images)
	case protocol.TypeAudioPlayStart:
		// Playback notices matter only in group chats.
	default:
		ss.conn.log.Info("unknown message type", "type", in.Type)
		return errors.New("unknown message type; koe ignored it")
	}
	return nil
}

// dispatchAudio takes a binary frame: 16-bit little-endian mono PCM of the
// continuous microphone stream, at the rate raw-audio-config declared.
func (ss *session) dispatchAudio(data []byte) {
	pcm, err := asr.PCM16FromBytes(data)
	if err == nil {
		err = ss.conv.FeedRaw(pcm, ss.rawRate)
	}
	if err != nil {
		ss.sendError("binary audio: " + err.Error())
	}
}

// promptName maps koe's prompt messages to the stored prompt names.
func promptName(typ string) string {
	switch typ {
	case protocol.TypeFetchReminder, protocol.TypeSetReminder:
		return history.PromptReminder
	}
	return history.PromptSystem
}

func (ss *session) sendPrompt(name string) error {
	text, isDefault, err := ss.conv.PromptText(name)
	if err != nil {
		return err
	}
	typ := protocol.TypeSystemPrompt
	if name == history.PromptReminder {
		typ = protocol.TypeReminder
	}
	ss.send(protocol.Prompt{Type: typ, Text: text, Default: isDefault})
	return nil
}

// userMessage words store errors for the person reading the error frame.
func userMessage(err error) string {
	switch {
	case errors.Is(err, history.ErrInvalidID):
		return "that id is not valid: " + err.Error()
	case errors.Is(err, history.ErrNotFound):
		return "no such history"
	}
	return err.Error()
}

// backgrounds lists the image files of the backgrounds directory.
func (s *Server) backgrounds() []string {
	files := []string{}
	entries, err := os.ReadDir(s.cfg.BackgroundsDir)
	if err != nil {
		return files
	}
	for _, e := range entries {
		if e.Type().IsRegular() && isImage(e.Name()) {
			files = append(files, e.Name())
		}
	}
	sort.Strings(files)
	return files
}
