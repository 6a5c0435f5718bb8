package coord

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"koe/testkit"
	"koe/testkit/redistest"
)

// The election names instances by the configured instance name (with the
// coordinator's id), so that an operator reading who leads the live chat
// knows which koe it is, even with several on one host.
func TestLeaderNamesTheInstance(t *testing.T) {
	srv := redistest.Start(t)
	markKnown(t, srv)
	open := func(name string) *Leader {
		cfg := testConfig(srv.URL())
		cfg.Name = name
		r, err := NewRedis(context.Background(), cfg, slog.New(newLogWatch(t, name)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r.NewLeader("job")
	}
	a, b := open("koe-a"), open("koe-b")
	if id := a.State().Instance; !strings.HasPrefix(id, "koe-a/") {
		t.Fatalf("A's id %q does not start with its name", id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
	})
	for _, l := range []*Leader{a, b} {
		go func() {
			defer func() { done <- struct{}{} }()
			_ = l.Run(ctx, func(ctx context.Context) { <-ctx.Done() }, nil)
		}()
	}
	st := testkit.Await(t, "one of A and B leads and the other knows it", func() (LeaderState, bool) {
		sa, sb := a.State(), b.State()
		switch {
		case sa.Role == RoleLeader && sb.Leader == sa.Instance:
			return sb, true
		case sb.Role == RoleLeader && sa.Leader == sb.Instance:
			return sa, true
		}
		return sa, false
	})
	if !strings.HasPrefix(st.Leader, "koe-a/") && !strings.HasPrefix(st.Leader, "koe-b/") {
		t.Errorf("the standby sees %q lead, not a name", st.Leader)
	}
}
