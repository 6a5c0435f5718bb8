package agent

import "testing"

func TestEarlierThinkingIsNotSentBack(t *testing.T) {
	for in, want := range map[string]string{
		"<think>Let me plan.\nStep one.</think>\n\nHello there!": "Hello there!",
		"Plain answer.":                         "Plain answer.",
		"<THINK>loud</THINK>Quiet answer.":      "Quiet answer.",
		"Before <think>aside</think> after.":    "Before  after.",
		"<think>interrupted while thinking and": "",
	} {
		m := Message{Role: RoleAssistant, Content: in}
		if got := m.wire(imagesGone).Content; got != want {
			t.Errorf("assistant %q sent as %q, want %q", in, got, want)
		}
	}
	user := Message{Role: RoleUser, Content: "<think>my own words</think>"}
	if got := user.wire(imagesGone).Content; got != user.Content {
		t.Errorf("a user's text was changed: %q", got)
	}
}
