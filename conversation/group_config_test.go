package conversation_test

import (
	"strings"
	"testing"

	"koe/conversation"
)

// Each bound of the groups names its key when it can never work.
func TestGroupsConfigNamesItsKeys(t *testing.T) {
	if err := conversation.DefaultGroupsConfig().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, c := range []struct {
		cfg  conversation.GroupsConfig
		want string
	}{
		{conversation.GroupsConfig{MaxMembers: 1, Rounds: 1}, "conversation.groups.max_members"},
		{conversation.GroupsConfig{MaxMembers: 33, Rounds: 1}, "conversation.groups.max_members"},
		{conversation.GroupsConfig{MaxMembers: 4, Rounds: 0}, "conversation.groups.rounds"},
		{conversation.GroupsConfig{MaxMembers: 4, Rounds: 21}, "conversation.groups.rounds"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	char := conversation.Character{ConfName: "x", ConfUID: conversation.GroupConf}
	if err := char.Validate(); err == nil || !strings.Contains(err.Error(), "koe's own") {
		t.Errorf("a character with the groups' conf uid: %v", err)
	}
}
