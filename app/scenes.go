package app

import (
	"context"

	"koe/config"
	"koe/conversation"
	"koe/scene"
)

// The streamer's scenes (package scene) on the hub's sessions and the
// round, with the characters of the configuration.

// sceneCharacters finds a scene's characters among the configured ones;
// "default" is the configuration file's own, as for the overlay.
type sceneCharacters struct{ chars *config.Characters }

func (c sceneCharacters) Character(confUID string) (string, string, bool) {
	ch, ok := c.chars.Find(confUID)
	if !ok && confUID == "default" {
		ch, ok = c.chars.Default(), true
	}
	if !ok {
		return "", "", false
	}
	return ch.ConfUID, ch.Name, true
}

// sceneStage opens a scene's cast on the hub.
type sceneStage struct{ hub *conversation.Hub }

func (s sceneStage) OpenCast(ctx context.Context, opts scene.CastOptions) (scene.Cast, error) {
	co := conversation.SceneCastOptions{Scene: opts.Scene, Rules: opts.Rules,
		Opening: conversation.Line{Name: opts.Opening.Speaker, Text: opts.Opening.Text}}
	for _, c := range opts.Characters {
		co.Characters = append(co.Characters, c.ConfUID)
		co.Histories = append(co.Histories, c.HistoryUID)
	}
	cast, err := s.hub.OpenSceneCast(ctx, co)
	if err != nil {
		return nil, err
	}
	return cast, nil
}

// openScenes makes the scenes' service; with the live chat on, its
// character's chat enters the scenes it is in.
func (m *Main) openScenes(cfg config.Config, chars *config.Characters) *scene.Service {
	liveConf := ""
	if cfg.LiveChat.Enabled {
		liveConf = cfg.LiveChat.Character
		if liveConf == "" {
			liveConf = cfg.Character.ConfUID
		}
	}
	return scene.New(scene.Options{Config: cfg.Scenes, Characters: sceneCharacters{chars}, Stage: sceneStage{m.hub}, LiveChat: liveConf,
		Explain: func(err error) string { return conversation.Explain(err).Message }, Logger: m.Logger})
}
