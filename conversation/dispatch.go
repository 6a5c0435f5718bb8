package conversation

import (
	"fmt"

	"koe"
	"koe/internal/quote"
	"koe/protocol"
)

// Dispatch handles one client message; the connection's read loop calls
// it. It returns quickly: turns run in their own goroutine, and stopping
// one waits only for it to wind down. A returned error is for the client
// (see Explain); answers go out through the session's Sender.
func (s *Session) Dispatch(in protocol.Inbound) error {
	switch in.Type {
	case protocol.TypeTextInput:
		if len(in.Images) == 0 && s.answerText(in.Text) {
			return nil // it answers the question the turn waits on (ask.go)
		}
		return s.startText(in.Text, in.Images)
	case protocol.TypeAskAnswer:
		return s.answerClick(in.AskID, in.Action, in.Text)
	case protocol.TypeInterruptSignal:
		s.interrupt(in.Text)
	case protocol.TypeFrontendPlaybackComplete:
		s.playbackComplete()
	case protocol.TypeHeartbeat:
		s.reply(protocol.Simple{Type: protocol.TypeHeartbeatAck})
	case protocol.TypeFetchHistoryList:
		// The session's character, even one whose file has gone since.
		list, err := s.deps.Histories.List(s.ctx, s.Character().ConfUID)
		if err != nil {
			return err
		}
		if !s.koeEvents {
			list = list.OLV()
		}
		s.reply(list)
	case protocol.TypeFetchAndSetHistory:
		data, err := s.setHistory(in.HistoryUID)
		if err != nil {
			return err
		}
		s.reply(data)
		s.Notify(s.MemoryState())
	case protocol.TypeFetchHistoryPage:
		page, err := s.deps.Histories.HistoryPage(s.ctx, s.Character().ConfUID, in.HistoryUID, in.Before, in.Limit)
		if err != nil {
			return err
		}
		s.reply(page)
	case protocol.TypeCreateNewHistory:
		uid, err := s.newHistory()
		if err != nil {
			return err
		}
		s.reply(protocol.NewHistoryCreated{Type: protocol.TypeNewHistoryCreated, HistoryUID: uid})
	case protocol.TypeDeleteHistory:
		ok, err := s.deleteHistory(in.HistoryUID)
		if err != nil {
			return err
		}
		s.reply(protocol.HistoryDeleted{Type: protocol.TypeHistoryDeleted, Success: ok, HistoryUID: in.HistoryUID})
	case protocol.TypeFetchConfigs:
		list, err := s.deps.Characters.List()
		if err != nil {
			return fmt.Errorf("list characters: %w", err)
		}
		s.reply(protocol.ConfigFiles{Type: protocol.TypeConfigFiles, Configs: list})
	case protocol.TypeSwitchConfig:
		ch, err := s.switchCharacter(in.File)
		if err != nil {
			return err
		}
		s.reply(s.modelAndConf())
		s.reply(protocol.ConfigSwitched{Type: protocol.TypeConfigSwitched, Message: "Switched to config: " + ch.ConfName})
	case protocol.TypeFetchBackgrounds:
		s.reply(protocol.BackgroundFiles{Type: protocol.TypeBackgroundFiles, Files: s.deps.Backgrounds()})
	case protocol.TypeRequestInitConfig:
		s.reply(s.modelAndConf())
	case protocol.TypeRequestGroupInfo:
		s.groupInfo()
	case protocol.TypeAddClientToGroup:
		s.invite(in.InviteeUID)
	case protocol.TypeRemoveClientFromGroup:
		s.removeFromGroup(in.TargetUID)
	case protocol.TypeFetchMemoryState:
		s.reply(s.MemoryState())
	case protocol.TypeSetCompressionRate:
		if in.Rate == nil {
			return invalid(`"rate" is missing`)
		}
		st, err := s.SetCompressionRate(*in.Rate)
		if err != nil {
			return err
		}
		s.reply(st)
	case protocol.TypeFetchSystemPrompt, protocol.TypeFetchReminder:
		p, err := s.deps.Histories.Prompt(s.ctx, s.Character().ConfUID, promptName(in.Type))
		if err != nil {
			return err
		}
		s.reply(p)
	case protocol.TypeSetSystemPrompt, protocol.TypeSetReminder:
		text := in.Prompt
		if in.Type == protocol.TypeSetReminder {
			text = in.Reminder
		}
		if text == nil {
			return invalid(`the new text is missing ("prompt" or "reminder"; "" restores the default)`)
		}
		p, err := s.deps.Histories.SetPrompt(s.ctx, s.Character().ConfUID, promptName(in.Type), *text)
		if err != nil {
			return err
		}
		s.reply(p)
	case protocol.TypeFetchContext:
		ctx, err := s.LastContext()
		if err != nil {
			return err
		}
		s.reply(ctx)
	case protocol.TypeMicAudioData:
		return s.voice.appendMic(in.Audio)
	case protocol.TypeMicAudioEnd:
		return s.voice.endMic(in.Images)
	case protocol.TypeRawAudioData:
		if in.SampleRate != 0 && in.SampleRate != s.voice.rate {
			return invalid("raw-audio-data says sample_rate %d but the stream is %d Hz: declare the rate with raw-audio-config", in.SampleRate, s.voice.rate)
		}
		return s.voice.feedFloats(in.Audio)
	case protocol.TypeRawAudioConfig:
		return s.voice.configureRaw(in.SampleRate)
	case protocol.TypeAISpeakSignal:
		return s.speak(in.IdleTime, in.Images)
	case protocol.TypeAttachFile:
		return s.attachFile(in.Name, in.Mime, in.Data)
	case protocol.TypeFetchMCPPrompts:
		s.fetchMCPPrompts()
	case protocol.TypeUseMCPPrompt:
		return s.useMCPPrompt(in.MCPPrompt)
	case protocol.TypeAudioPlayStart:
		// OLV relays a silent copy of the piece to the other members;
		// koe has sent them the piece itself, audio and all (see
		// audience.offer), so a copy would show it twice.
	default:
		return invalid("unknown message type %q; koe ignored it", quote.Shorten(in.Type, 40))
	}
	return nil
}

// promptName maps koe's prompt messages to the stored prompt names.
func promptName(typ string) string {
	switch typ {
	case protocol.TypeFetchReminder, protocol.TypeSetReminder:
		return koe.PromptReminder
	}
	return koe.PromptSystem
}
