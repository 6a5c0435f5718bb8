package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"koe/livechat"
)

// The live chat's state kept across a restart: the streamer's pause, the
// messages waiting and the session's blocklist (livechat.Saved). It is
// written at every command that changes it and when the chat stops
// cleanly (the queue then as it is); a koe killed outright loses the
// messages that came since the last command. With an election it lives
// in Redis, where the pause lived before (the election's shared hash), so
// that the instance taking over finds it; alone, in a file of data_dir.
type stateStore interface {
	load(ctx context.Context) (livechat.Saved, error)
	save(ctx context.Context, s livechat.Saved) error
	where() string
}

// sharedState is the field of the election's shared hash holding the
// state as JSON. The older field "paused" is still written, and read when
// there is no state yet (an instance of an older koe kept the pause).
const sharedState = "state"

type redisState struct{ leader Leadership }

func (r redisState) load(ctx context.Context) (livechat.Saved, error) {
	var s livechat.Saved
	v, err := r.leader.Shared(ctx, sharedState)
	if err != nil {
		return s, err
	}
	if v == "" {
		p, err := r.leader.Shared(ctx, sharedPaused)
		s.Paused = p == "1"
		return s, err
	}
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return livechat.Saved{}, fmt.Errorf("the live chat's state in redis is unreadable: %w", err)
	}
	return s, nil
}

func (r redisState) save(ctx context.Context, s livechat.Saved) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	paused := "0"
	if s.Paused {
		paused = "1"
	}
	if err := r.leader.SetShared(ctx, sharedPaused, paused); err != nil {
		return err
	}
	return r.leader.SetShared(ctx, sharedState, string(b))
}

func (redisState) where() string { return "redis" }

// fileState keeps the state in a JSON file, replaced whole (written
// beside it, then renamed) so a crash leaves the old or the new one.
type fileState struct{ path string }

// stateFile is the file of character conf's live chat in dir.
func stateFile(dir, conf string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, conf)
	return filepath.Join(dir, "live_chat-"+strings.TrimLeft(safe, ".")+".json")
}

func (f fileState) load(context.Context) (livechat.Saved, error) {
	var s livechat.Saved
	b, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read the live chat's state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return livechat.Saved{}, fmt.Errorf("the live chat's state in %s is unreadable: %w", f.path, err)
	}
	return s, nil
}

func (f fileState) save(_ context.Context, s livechat.Saved) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".*")
	if err != nil {
		return fmt.Errorf("keep the live chat's state: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("keep the live chat's state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("keep the live chat's state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("keep the live chat's state: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("keep the live chat's state: %w", err)
	}
	return nil
}

func (f fileState) where() string { return f.path }

// defaultKeepBound bounds keeping the state when no coord.lease is given.
const defaultKeepBound = 10 * time.Second

// keep saves the chat's state, bounded by coord.lease; a failure is
// logged (the chat goes on, a restart would not find it).
func (s *Service) keep(ctx context.Context, c *chat) {
	if s.state == nil {
		return
	}
	bound := s.opts.Lease
	if bound <= 0 {
		bound = defaultKeepBound
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	saved := c.runner.Save()
	if err := s.state.save(ctx, saved); err != nil {
		s.log.Warn("live chat: could not keep its state; a restart would not find the pause and the waiting messages", "where", s.state.where(), "err", err)
	}
}
